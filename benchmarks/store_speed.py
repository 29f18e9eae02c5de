"""Storing an exhaustive study and loading it back: the bulk write and columnar read paths
against the row-by-row paths they replaced, in the same run.

Run: python benchmarks/store_speed.py [--shape 4032x4032x4032] [--postgres URL] [--repeats 3]

Runs the exhaustive XDNA int8 study (139,279 trials for the default 4032^3 problem) twice into
fresh databases, with the old write path (pinned in ``store_before.py``: SQLAlchemy ``insert()``
of row dicts, ``json.dumps`` per document) and dse's (driver ``executemany`` on SQLite,
``COPY`` on PostgreSQL, documents encoded a column at a time), each through a store made with
it, timing the store's share (its ``commit_window`` calls, in trials per second), the frame the
runner keeps when the run ends (``keep_frame``) and the whole run. Then times ``load_trials``
of the stored study (best of ``--repeats``) three ways, each by a store made to read so: from
the kept frame (dse's), from the documents (``study_frame(snapshot=False)``), and by the old
read path (pinned in ``store_before.py``). The engine's own share is measured too: the
bare driver storing the same rows into a third database (``engine_floor.py``). SQLite always;
PostgreSQL as well with ``--postgres`` or ``$DSE_TEST_POSTGRES_URL`` (a fresh database is
created on that server for each run, and dropped after; the server is checkpointed before each
timed run, so that it does not write out the run before while the next is timed). Last, a
second study of the same configs runs into the new database, every result served from the
store, and its time is printed. Exits non-zero if the paths stored or loaded anything
different, the run kept no frame, or the second study evaluated anything.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from engine_floor import engine_seconds, settle
from goals import against_goal, best_of
from store_before import rows_study_frame, write_window_by_rows

from dse.storage import normalise_url
from dse.storage.frames import FrameReader, study_frame
from dse.storage.store import ResultStore
from dse.storage.windows import write_window
from dse.study.runner import run_study
from dse.study.spec import study_from_dict

STORE_GOAL = 50_000.0  # trials persisted per second
LOAD_GOAL_S = 1.0  # load_trials of the whole study
NAME = "store-speed"
# what differs between two runs of the same study: when and how fast each trial ran
VOLATILE = ["created_at", "elapsed_s"]


@contextmanager
def fresh_database(backend: str, server: str | None) -> Iterator[str]:
    """A new, empty database: a SQLite file in a temporary folder, or a database created on
    the PostgreSQL ``server`` (dropped afterwards)."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield str(Path(folder) / "store.db")
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    url = make_url(normalise_url(server))
    name = f"dse_store_speed_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def served_study(storage: str, shape: str) -> float:
    """Seconds to run a second study of the same configs into ``storage``, where the first
    stored them: every result served from the store (looked up by config key), none
    evaluated."""
    start = time.perf_counter()
    summary = run_study(study_from_dict({
        "name": f"{NAME}-served", "target": "xdna", "sampler": "exhaustive",
        "workload": {"shape": shape, "dtype": "int8-int8"}}), storage)
    check(summary.workloads[0].evaluated == 0,
          f"the second study evaluated {summary.workloads[0].evaluated:,} configs, not none")
    return time.perf_counter() - start


def store_study(storage: str, shape: str, bulk: bool) -> dict[str, float]:
    """Run the exhaustive study into ``storage`` with the bulk or the old write path: the
    trials stored, the seconds (wall and CPU) spent in the store's commits, in keeping the
    study's frame when the run ends, and in all, and the kept frame's bytes."""
    spent = {"trials": 0.0, "store_s": 0.0, "store_cpu_s": 0.0, "keep_s": 0.0, "kept": 0.0}

    class TimedStore(ResultStore):
        """The store, its commits and the frame it keeps timed."""

        def commit_window(self, window: Any) -> None:
            wall, cpu = time.perf_counter(), time.process_time()
            super().commit_window(window)
            spent["store_s"] += time.perf_counter() - wall
            spent["store_cpu_s"] += time.process_time() - cpu
            spent["trials"] += len(window.trials)

        def keep_frame(self, name: str) -> int | None:
            wall = time.perf_counter()
            kept = super().keep_frame(name)
            spent["keep_s"] += time.perf_counter() - wall
            spent["kept"] += kept or 0
            return kept

    settle(storage)
    start = time.perf_counter()
    store = TimedStore(storage, window_writer=write_window if bulk else write_window_by_rows)
    run_study(study_from_dict({"name": NAME, "target": "xdna", "sampler": "exhaustive",
                               "workload": {"shape": shape, "dtype": "int8-int8"}}), store)
    spent["total_s"] = time.perf_counter() - start
    return spent


# How each read of the stored study builds its frame: from the frame kept when the run ended
# (dse's), from the documents, or by the old path (SQLAlchemy's rows, from_records).
READERS: dict[str, FrameReader] = {"kept": study_frame,
                                   "documents": functools.partial(study_frame, snapshot=False),
                                   "old": rows_study_frame}


def load(storage: str, read: str, repeats: int) -> tuple[float, pd.DataFrame]:
    """Best-of-``repeats`` seconds of ``load_trials`` (as ``dse.load_trials`` opens the store:
    read-only, once a call) and the frame, read the way :data:`READERS` names ``read``."""
    return best_of(repeats, lambda: ResultStore(storage, read_only=True,
                                                frame_reader=READERS[read]).load_trials(NAME))


def check(condition: bool, what: str) -> None:
    """End the benchmark, failed, when the two paths disagree."""
    if not condition:
        sys.exit(f"FAILED: {what}")


def compare_stored(old: pd.DataFrame, new: pd.DataFrame, expected: float) -> None:
    """The same trials, configs and metrics stored by both write paths."""
    check(len(old) == len(new) == expected,
          f"stored {len(old):,} trials with the old path, {len(new):,} with the new one, "
          f"{expected:,.0f} were run")
    try:
        pd.testing.assert_frame_equal(old.drop(columns=VOLATILE), new.drop(columns=VOLATILE),
                                      check_exact=True)
    except AssertionError as exc:
        check(False, f"the two write paths stored different trials: {exc}")


def bench(backend: str, server: str | None, shape: str, repeats: int) -> None:
    """Both write paths into fresh databases, then both read paths of the stored study."""
    label = f"{backend}, xdna int8 {shape} exhaustive"
    with fresh_database(backend, server) as old_db, fresh_database(backend, server) as new_db, \
            fresh_database(backend, server) as bare_db:
        old = store_study(old_db, shape, bulk=False)
        new = store_study(new_db, shape, bulk=True)
        print(f"{backend}: {new['trials']:,.0f} trials; store {new['store_s']:.2f} s "
              f"(CPU {new['store_cpu_s']:.2f} s) of a {new['total_s']:.1f} s run; old path "
              f"{old['store_s']:.2f} s (CPU {old['store_cpu_s']:.2f} s) of {old['total_s']:.1f} s")
        against_goal(f"store an exhaustive study, {label}", new["trials"] / new["store_s"],
                     STORE_GOAL, "trials/s", old=old["trials"] / old["store_s"])
        bare_s = engine_seconds(new_db, bare_db)
        against_goal(f"the bare driver storing the same rows (no dse), {label}",
                     new["trials"] / bare_s, STORE_GOAL, "trials/s")
        print(f"{backend}: dse's store takes {new['store_s'] / bare_s:.2f}x the engine's own "
              f"{bare_s:.2f} s ({new['store_s'] - bare_s:.2f} s of dse's work)", flush=True)
        against_goal(f"run + store an exhaustive study, {label}",
                     new["trials"] / new["total_s"], STORE_GOAL, "trials/s",
                     old=old["trials"] / old["total_s"])
        print(f"{backend}: keeping the study's frame when the run ended took "
              f"{new['keep_s']:.2f} s ({new['kept'] / 1e6:.1f} MB)", flush=True)
        load_kept_s, frame = load(new_db, "kept", repeats)
        load_documents_s, documents = load(new_db, "documents", repeats)
        load_old_s, before = load(new_db, "old", repeats)
        check(new["kept"] > 0, "the run kept no frame of the study")
        for name, other in (("the documents", documents), ("the old path", before)):
            try:
                pd.testing.assert_frame_equal(frame, other, check_exact=True)
            except AssertionError as exc:
                check(False, f"load_trials of the kept frame differs from {name}: {exc}")
            check(frame.attrs == other.attrs, f"load_trials' attrs differ from {name}'s")
        compare_stored(load(old_db, "documents", repeats=1)[1], frame, new["trials"])
        print(f"{backend}: a second study of the same configs, every result served from the "
              f"store: {served_study(new_db, shape):.1f} s", flush=True)
        against_goal(f"load_trials of {len(frame):,} trials (the kept frame), {label}",
                     load_kept_s, LOAD_GOAL_S, "s", higher_is_better=False, old=load_old_s)
        against_goal(f"load_trials of {len(frame):,} trials (from the documents), {label}",
                     load_documents_s, LOAD_GOAL_S, "s", higher_is_better=False,
                     old=load_old_s)


def main() -> None:
    """Both paths on SQLite, and on PostgreSQL when a server is given."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="4032x4032x4032")
    parser.add_argument("--postgres", default=os.environ.get("DSE_TEST_POSTGRES_URL"),
                        help="a PostgreSQL server's URL (default $DSE_TEST_POSTGRES_URL)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    bench("sqlite", None, args.shape, args.repeats)
    if args.postgres:
        bench("postgresql", args.postgres, args.shape, args.repeats)
    else:
        print("postgresql: skipped (give --postgres URL or set DSE_TEST_POSTGRES_URL)")


if __name__ == "__main__":
    main()
