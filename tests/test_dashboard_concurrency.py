"""The real dashboard (``dse dashboard`` in its own process) under concurrent readers: several
threads fetch its pages at once over plain HTTP, as one browser opening a study page does, on a
SQLite store and on PostgreSQL. Every answer must be a 200, the server must stay up, and its
error stream must hold no traceback (the warm-up thread reads while the first requests arrive).
"""

from __future__ import annotations

import collections
import threading
import urllib.error
import urllib.request

from dse.study.runner import run_study
from dse.study.spec import study_from_dict
from tests.dashboard_process import dashboard_process
from tests.study_helpers import TWO_WORKLOADS

PAGES = ("/", "/study/two", "/trials/two", "/trials/two?sort=tops&page=2", "/config/5/two",
         "/state/two")
THREADS = 8
ROUNDS = 4


def _fetch_all(base: str, answers: collections.Counter) -> None:
    for _ in range(ROUNDS):
        for page in PAGES:
            try:
                with urllib.request.urlopen(base + page, timeout=120) as response:
                    response.read()
                    answers[response.status] += 1
            except urllib.error.HTTPError as exc:
                answers[exc.code] += 1
            except OSError as exc:  # the server went away: refused, reset, closed
                answers[type(exc).__name__] += 1


def test_concurrent_readers_are_all_served(storage_url):
    run_study(study_from_dict(TWO_WORKLOADS), storage_url)
    answers: collections.Counter = collections.Counter()
    with dashboard_process(storage_url) as (base, process):
        # the first burst meets the warm-up thread, which summarises the studies meanwhile
        threads = [threading.Thread(target=_fetch_all, args=(base, answers))
                   for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        alive = process.poll() is None
    errors = process.stderr.read()
    assert dict(answers) == {200: THREADS * ROUNDS * len(PAGES)}
    assert alive, f"the dashboard died (exit {process.returncode}): {errors[-2000:]}"
    assert "Traceback" not in errors, errors[-4000:]
