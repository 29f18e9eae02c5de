"""Speed-up of a study on 2 Ray workers over 1 worker, with an evaluator taking ~50 ms.

Run: python benchmarks/parallel_speedup.py [--trials 200] [--work-s 0.05] [--repeats 3]

The evaluator is the synthetic one (the analytical model plus ``work_s`` of real CPU work per
config); the exhaustive sampler over a space where every config is feasible (m_ct = n_ct = 128
fixed) makes every trial cost ``work_s``. One worker evaluates in-process; two run on a local
Ray started by the study, as warm actors (the way now) and as Ray tasks (the way before,
``DSE_RAY_POOL=tasks``), both in the same run. Reported, each as the median of ``--repeats``
runs with the spread beside it:

* start-up: from the pool's creation until its workers are ready (for actors: Ray started and
  each actor has imported the evaluator; for tasks: Ray started, the imports come later);
* steady-state speed-up: 1 worker's time over 2 workers' from the first batch's submission to
  the last batch's results (start-up excluded, the runner's own work between rounds included);
* whole-study wall times, and Ray's stop at the study's end (``ray.shutdown``, seconds);
* the runner's own work between the pool being ready and its first batch: what starting Ray
  in the background could overlap.

It fails (exit 1) if Ray's web dashboard is running while a study runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from goals import against_goal

import dse.study.runner as runner
from dse.study import pool as pools
from dse.study.ray_start import dashboard_ports
from dse.study.runner import run_study
from dse.study.spec import study_from_dict

STARTUP_GOAL_S = 3.0
SPEEDUP_GOAL = 1.8


@dataclass
class Times:
    """One study's wall time, its pool's start-up, its evaluating phase and the runner's own
    work between the pool being ready and its first batch, and the pool's close (seconds)."""

    wall: float
    startup: float = 0.0
    init: float = 0.0  # of the start-up: the pool's creation (ray.init)
    evaluating: float = 0.0
    gap: float = 0.0
    stop: float = 0.0


class _Timed:
    """A pool that notes when its first batch was submitted and its last batch answered."""

    def __init__(self, pool: pools.Pool) -> None:
        self.pool, self.workers = pool, pool.workers
        self.ready = time.perf_counter()
        self.first: float | None = None
        self.last = 0.0
        self.stop = 0.0

    def evaluate(self, *args: Any) -> Any:
        if self.first is None:
            self.first = time.perf_counter()
        try:
            return self.pool.evaluate(*args)
        finally:
            self.last = time.perf_counter()

    def take_faults(self) -> list[pools.Fault]:
        return self.pool.take_faults()

    def close(self) -> None:
        start = time.perf_counter()
        self.pool.close()
        self.stop = time.perf_counter() - start


@contextmanager
def timed_pools(made: list[tuple[float, float, _Timed]]) -> Any:
    """The runner's pools timed: each pool's start-up (until its workers are ready, checked for
    a dashboard), its creation alone and the pool itself are appended to ``made``."""
    def make(evaluator: Any, workers: int, address: str | None) -> _Timed:
        start = time.perf_counter()
        pool = pools.make_pool(evaluator, workers, address)
        created = time.perf_counter() - start
        if isinstance(pool, pools.RayPool):
            pool.wait_ready()
            startup = time.perf_counter() - start
            require_no_dashboard()
        else:
            startup = time.perf_counter() - start
        timed = _Timed(pool)
        made.append((startup, created, timed))
        return timed

    with mock.patch.object(runner, "make_pool", make):
        yield


def require_no_dashboard() -> None:
    """Stop the benchmark loudly if the local Ray serves its web dashboard."""
    import ray

    url = ray._private.worker._global_node.address_info.get("webui_url")
    ports = dashboard_ports()
    if url or ports:
        sys.exit(f"FAILED: Ray's dashboard is running (url {url!r}, listening on {ports})")


def timed_study(workers: int, trials: int, work_s: float, folder: Path, mode: str) -> Times:
    """Times of a whole study on ``workers`` workers (its database in ``folder``, its Ray pool
    in ``mode``); prints them with its trial counts."""
    spec = study_from_dict({
        "name": f"parallel-{workers}", "target": "xdna2",
        "workload": {"shape": "4096x4096x4096", "dtype": "int8-int8"},
        "evaluator": {"name": "synthetic", "options": {"work_s": work_s}},
        "sampler": "exhaustive", "space": {"fix": {"m_ct": 128, "n_ct": 128}},
        "budget": {"trials": trials}, "workers": workers, "seed": 0})
    made: list[tuple[float, float, _Timed]] = []
    os.environ[pools.MODE_ENV] = mode
    start = time.perf_counter()
    with timed_pools(made):
        summary = run_study(spec, str(folder / f"w{workers}-{mode}.db"))
    wall = time.perf_counter() - start
    ((startup, created, pool),) = made
    first = pool.first or pool.last
    times = Times(wall, startup, created, pool.last - first, first - pool.ready, pool.stop)
    w = summary.workloads[0]
    label = "in-process" if workers == 1 else mode
    print(f"  workers={workers} ({label}): whole study {wall:.2f} s, start-up {startup:.2f} s, "
          f"evaluating {times.evaluating:.2f} s, stop {times.stop:.2f} s; the runner's work "
          f"before its first batch {times.gap:.3f} s; {w.trials} trials ({w.evaluated} "
          "evaluated)", flush=True)
    return times


def spread(values: list[float], unit: str) -> str:
    """``median (min–max, n runs)``."""
    return (f"{statistics.median(values):.2f} {unit} ({min(values):.2f}–{max(values):.2f}, "
            f"{len(values)} runs)")


def main() -> int:
    """Run the study on 1 worker and on 2 (actors, then tasks) ``--repeats`` times, and print
    the start-up, steady-state speed-up and whole-study figures against their goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--work-s", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    start = time.perf_counter()
    import ray  # noqa: F401 - once, before either way's first pool, so neither pays it alone

    print(f"import ray: {time.perf_counter() - start:.2f} s (a dse run pays it once, in its "
          "start-up)")
    runs: dict[str, list[Times]] = {"one": [], pools.ACTORS: [], pools.TASKS: []}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):  # interleaved: the machine's load falls on all
            print(f"run {repeat + 1} of {args.repeats}", flush=True)
            folder = Path(tmp) / str(repeat)
            folder.mkdir()
            runs["one"].append(timed_study(1, args.trials, args.work_s, folder, pools.ACTORS))
            for mode in (pools.ACTORS, pools.TASKS)[::1 if repeat % 2 else -1]:
                runs[mode].append(timed_study(2, args.trials, args.work_s, folder, mode))
    return report(runs)


def report(runs: dict[str, list[Times]]) -> int:
    """Print the figures (medians; the spread of the runs beside) and return the exit status:
    0 if the goals are met."""
    one, new, old = runs["one"], runs[pools.ACTORS], runs[pools.TASKS]
    steady = {mode: [a.evaluating / b.evaluating for a, b in zip(one, runs[mode], strict=True)]
              for mode in (pools.ACTORS, pools.TASKS)}
    whole = {mode: [a.wall / b.wall for a, b in zip(one, runs[mode], strict=True)]
             for mode in (pools.ACTORS, pools.TASKS)}
    print(f"start-up: actors {spread([t.startup for t in new], 's')}; "
          f"tasks {spread([t.startup for t in old], 's')}")
    print(f"steady-state speed-up: actors {spread(steady[pools.ACTORS], 'x')}; "
          f"tasks {spread(steady[pools.TASKS], 'x')}")
    print(f"of the start-up, the pool's creation (ray.init): actors "
          f"{spread([t.init for t in new], 's')}; tasks {spread([t.init for t in old], 's')}")
    print(f"stopping Ray: actors {spread([t.stop for t in new], 's')}; "
          f"tasks {spread([t.stop for t in old], 's')}")
    print(f"the runner's work between the pool ready and its first batch: "
          f"{spread([t.gap for t in new + old], 's')}")
    print(f"whole study: 1 worker {spread([t.wall for t in one], 's')}; 2 actors "
          f"{spread([t.wall for t in new], 's')}; 2 tasks {spread([t.wall for t in old], 's')}")
    print(f"whole-study speed-up: actors {spread(whole[pools.ACTORS], 'x')}; "
          f"tasks {spread(whole[pools.TASKS], 'x')}")
    median = statistics.median
    met = [
        against_goal("Ray start-up, 2 local workers ready", median(t.startup for t in new),
                     STARTUP_GOAL_S, "s", higher_is_better=False,
                     old=median(t.startup for t in old)),
        against_goal("steady-state speed-up, 2 workers over 1, 50 ms evaluations",
                     median(steady[pools.ACTORS]), SPEEDUP_GOAL, "x",
                     old=median(steady[pools.TASKS])),
    ]
    print("Ray's web dashboard: not running (no URL, no port of its process listening)")
    return 0 if all(met) else 1


if __name__ == "__main__":
    sys.exit(main())
