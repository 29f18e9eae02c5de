"""One filtered, sorted page of a large study in SQL, against loading every trial into pandas.

Run: python benchmarks/trial_page.py [--storage big.db] [--shape 4032x4032x4032]

Stores an exhaustive XDNA study (139,279 trials for the default 4032^3 int8 problem; reused
when the storage already holds it), then times, in the same process, a 50-row page of the best
feasible configs with a filter (the store's ``trial_page``) against the baseline of
``load_trials`` + the pandas filter + sort + slice, ``load_trials`` reading the frame the run
kept and the documents in turn, and prints the ratios. Exits non-zero if the rows differ.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from pathlib import Path

from goals import best_of

from dse.core.errors import UsageError
from dse.storage import ResultStore, open_store
from dse.storage.filters import apply_filter
from dse.storage.frames import FrameReader, study_frame
from dse.study.runner import run_study
from dse.study.spec import study_from_dict

WHERE = "status == 'ok' and k_ct >= 64"
SORT = "-tops"


def main() -> None:
    """Store the study unless already there, then time the SQL page against ``load_trials`` and
    pandas, check that both give the same rows and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", help="SQLite file or URL (default: a temporary file)")
    parser.add_argument("--shape", default="4032x4032x4032")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    storage = args.storage or str(Path(tempfile.mkdtemp()) / "page.db")
    name = f"page-{args.shape}"
    try:
        open_store(storage).trial_page(name, limit=1)
    except UsageError:  # not stored yet
        start = time.perf_counter()
        run_study(study_from_dict({"name": name, "target": "xdna", "sampler": "exhaustive",
                                   "workload": {"shape": args.shape, "dtype": "int8-int8"}}),
                  storage)
        print(f"stored the exhaustive study in {time.perf_counter() - start:.1f} s")

    store = open_store(storage)
    paged_s, page = best_of(args.repeats, lambda: store.trial_page(
        name, where=WHERE, sort=SORT, offset=100, limit=50))

    def baseline(reader: FrameReader):  # noqa: ANN202
        # load_trials as dse.load_trials opens the store, made to read the frame so
        loaded = ResultStore(storage, read_only=True, frame_reader=reader).load_trials(name)
        frame = apply_filter(loaded, WHERE)
        return len(frame), frame.sort_values("tops", ascending=False, kind="stable")[100:150]

    print(f"page of 50 in SQL: {paged_s * 1e3:.0f} ms (best of {args.repeats})")
    for label, reader in (("the frame kept when the run ended", study_frame),
                          ("the documents", functools.partial(study_frame, snapshot=False))):
        loaded_s, (total, rows) = best_of(args.repeats, functools.partial(baseline, reader))
        if page.total != total or list(page.frame["number"]) != list(rows["number"]):
            sys.exit(f"FAILED: the SQL page differs from pandas' on {label}")
        print(f"load_trials from {label} + pandas: {loaded_s:.2f} s; ratio to the page "
              f"{loaded_s / paged_s:.2f}x")
    print(f"study {name}: {page.total:,} of its trials match {WHERE!r}")


if __name__ == "__main__":
    main()
