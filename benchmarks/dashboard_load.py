"""Dashboard page load times for a study of more than 100,000 stored evaluations.

Run: python benchmarks/dashboard_load.py [--storage big.db] [--shape 4032x4032x4032]

Stores an exhaustive XDNA study (139,279 evaluations for the default 4032^3 int8 problem;
reused when the storage already holds it), serves the real dashboard on a free local port and
times, over HTTP: the studies list, the study page on its first request (its summary read from
SQL and its plots drawn) and again (cached), and the trials table (the first page, and a
filtered page sorted by another column deep in the results). With Chromium available it also
times each page in the browser until its plots are drawn. The baseline, run in the same
process, is what the study page would cost without aggregating on the server: every trial
loaded into pandas (``load_trials``) and ranked (``best_trials``). Target: every page under
1 s of server time; the browser's time to draw them (mostly Plotly's) is shown beside it.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from werkzeug.serving import make_server

from dse import load_trials
from dse.core.errors import UsageError
from dse.dashboard import create_app
from dse.storage import open_store
from dse.storage.frames import best_trials
from dse.study.runner import run_study
from dse.study.spec import study_from_dict

TARGET_S = 1.0  # server time of every page


def fetch(url: str) -> tuple[float, int]:
    """Seconds to GET ``url`` and read its whole body, and the body's size in bytes; any answer
    but 200 ends the benchmark with the status and the start of the body (a page that fails
    fast is not a fast page)."""
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    if status != 200:
        raise SystemExit(f"FAILED: {url} answered HTTP {status}: "
                         f"{body[:300].decode(errors='replace')}")
    return time.perf_counter() - start, len(body)


def browser_times(urls: dict[str, str]) -> dict[str, list[float]]:
    """Seconds until each page's load event and its plots are drawn, in headless Chromium: on
    the first visit (Plotly's 4.6 MB script fetched and compiled) and on the next."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if not chromium:
        print("no Chromium or playwright here: browser times skipped")
        return {}
    out: dict[str, list[float]] = {name: [] for name in urls}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for _ in range(2):
            for name, url in urls.items():
                start = time.perf_counter()
                page.goto(url, wait_until="load")
                page.wait_for_function("[...document.querySelectorAll('.plotly-graph-div')]"
                                       ".every(g => g.querySelector('.main-svg'))")
                out[name].append(time.perf_counter() - start)
        browser.close()
    return out


def main() -> None:
    """Store the study unless already there, serve the dashboard, and print each page's HTTP time,
    the pandas baseline and, with Chromium, the browser times."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", help="SQLite file or URL (default: a temporary file)")
    parser.add_argument("--shape", default="4032x4032x4032")
    args = parser.parse_args()
    storage = args.storage or str(Path(tempfile.mkdtemp()) / "dashboard.db")
    name = f"page-{args.shape}"
    try:
        total = open_store(storage).trial_page(name, limit=1).total
    except UsageError:  # not stored yet
        start = time.perf_counter()
        run_study(study_from_dict({"name": name, "target": "xdna", "sampler": "exhaustive",
                                   "workload": {"shape": args.shape, "dtype": "int8-int8"}}),
                  storage)
        total = open_store(storage).trial_page(name, limit=1).total
        print(f"stored {total:,} evaluations in {time.perf_counter() - start:.1f} s")

    server = make_server("127.0.0.1", 0, create_app(storage), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    quoted = urllib.parse.quote(name)
    filtered = urllib.parse.urlencode({"where": "status == 'ok' and k_ct >= 64",
                                       "sort": "-t_mem_s", "page": 200})
    urls = {"studies list": f"{base}/", "study page (first request)": f"{base}/study/{quoted}",
            "study page (cached)": f"{base}/study/{quoted}",
            "trials table": f"{base}/trials/{quoted}",
            "trials table, filtered, page 200": f"{base}/trials/{quoted}?{filtered}"}
    print(f"study {name}: {total:,} stored evaluations; HTTP times:")
    times = {}
    for label, url in urls.items():
        seconds, size = fetch(url)
        times[label] = seconds
        verdict = "ok" if seconds < TARGET_S else "OVER TARGET"
        print(f"  {label:34s} {seconds:6.2f} s  {size / 1e3:7.0f} kB  {verdict}")

    start = time.perf_counter()
    best_trials(load_trials(storage, name))
    baseline = time.perf_counter() - start
    print(f"baseline, every trial into pandas and ranked: {baseline:.2f} s; ratio baseline / "
          f"study page first request: {baseline / times['study page (first request)']:.1f}x")

    shown = browser_times({"study page": urls["study page (cached)"],
                           "trials table": urls["trials table"],
                           "trials table, filtered, page 200":
                               urls["trials table, filtered, page 200"]})
    if shown:
        print("in Chromium, until loaded with every plot drawn (first visit, next visit; "
              "not the target, which is server time):")
        for label, (first, again) in shown.items():
            print(f"  {label:34s} {first:6.2f} s  {again:6.2f} s")
    server.shutdown()


if __name__ == "__main__":
    main()
