"""A running study's page in headless Chromium, opened as the study starts and followed to its
end: it grows in place (counts, the workloads table, each workload's best, new sections and
plots) and never reloads, so scroll and zoom survive. Its screenshots, as it opened and as it
ended, go to ``test-output/dashboard/live_start.png`` and ``live_grown.png``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from dse.storage import open_store
from dse.study.runner import run_study
from tests.dashboard_process import LAUNCH, dashboard
from tests.study_helpers import make_spec

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                                 "(pip install -e '.[test]')")

OUTPUT = Path(os.environ.get("DSE_TEST_OUTPUT", Path(__file__).parent.parent / "test-output"))
TRIALS = 80  # a workload: about 40 feasible ones at 0.1 s each, some 4 s a workload
STUDY = f"""name: grow
target: xdna2
workloads:
  - {{shape: 2048x2048x2048, dtype: int8-int8}}
  - {{shape: 1024x2048x512, dtype: int8-int8}}
evaluator: {{name: synthetic, options: {{work_s: 0.1}}}}
sampler: random
seed: 0
budget: {{trials: {TRIALS}}}
"""
_NUMBER = "(id) => parseInt(document.querySelector(id).textContent.replace(/,/g, ''))"


def _page_of(base: str, deadline_s: float = 60) -> None:
    """Wait until the dashboard serves the study's page (the run has created the study)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/study/grow", timeout=10):
                return
        except urllib.error.HTTPError:  # 404 until the run has created the study
            time.sleep(0.05)
    pytest.fail("the study did not appear")


def test_a_running_study_s_page_grows_in_place(chromium_path, tmp_path):
    storage = str(tmp_path / "grow.db")
    run_study(make_spec("other", budget={"trials": 1}), storage)  # the database, for the server
    study = tmp_path / "grow.yaml"
    study.write_text(STUDY)
    with dashboard(storage) as base, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        run = subprocess.Popen([sys.executable, "-c", LAUNCH, "run", str(study), "--storage",
                                storage], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
        try:
            _page_of(base)
            page.goto(f"{base}/study/grow")
            assert "()" not in page.locator("#counts").inner_text()  # "0 trials", not "()"
            assert page.locator("#status").inner_text() == "running"
            first = page.evaluate(_NUMBER, "#total")
            (OUTPUT / "dashboard").mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(OUTPUT / "dashboard" / "live_start.png"))
            page.evaluate("() => { window.__kept = true; }")  # a reload would lose it
            assert run.wait(timeout=120) == 0, run.stderr.read()
            page.wait_for_function("document.getElementById('live-note').textContent"
                                   ".includes('stopped')", timeout=30000)
        finally:
            run.kill()
        assert page.evaluate("() => window.__kept === true")
        assert page.locator("#status").inner_text() == "finished"
        assert first < page.evaluate(_NUMBER, "#total") == 2 * TRIALS
        assert "()" not in page.locator("#counts").inner_text()
        # every count on the page is the study's final one, its sections and plots all there
        frame = open_store(storage, read_only=True).load_trials("grow")
        feasible = frame[frame["status"] == "ok"].groupby("shape", sort=False).size()
        assert page.locator("#overview tr").count() == 3
        assert page.locator("#overview tr td:nth-child(2)").all_inner_texts() == \
            [str(TRIALS)] * 2
        assert page.locator("#overview tr td:nth-child(3)").all_inner_texts() == \
            [str(n) for n in feasible]
        assert page.locator("section.workload").count() == 2
        for i, n in enumerate(feasible, start=1):
            head = page.locator(f"#workload-{i} .section-head")
            assert head.locator(".trials").inner_text() == str(TRIALS)
            assert head.locator(".feasible").inner_text() == str(n)
            assert head.locator(".best-number").count() == 1
            plots = page.locator(f"#workload-{i} .plotly-graph-div")
            assert plots.count() >= 8
            for j in range(plots.count()):  # each drawn, in the house template
                assert plots.nth(j).locator(".main-svg").count()
        assert page.locator(".plots.overview .plotly-graph-div .main-svg").count()
        page.screenshot(path=str(OUTPUT / "dashboard" / "live_grown.png"), full_page=True)
        # a plot drawn by the live page opens a trial when clicked, as the others do
        page.locator("#workload-2 .plotly-graph-div").first.scroll_into_view_if_needed()
        assert page.evaluate("() => document.querySelector('#workload-2 .plotly-graph-div')"
                             ".dataset.opensTrials === '1'")
        browser.close()
    assert errors == [], errors
