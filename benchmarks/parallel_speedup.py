"""Speed-up of a study on 2 Ray workers over 1 worker, with an evaluator taking ~50 ms.

Run: python benchmarks/parallel_speedup.py [--trials 120] [--work-s 0.05]

The evaluator is the synthetic one (the analytical model plus ``work_s`` of real CPU work per
config); the exhaustive sampler over a space where every config is feasible (m_ct = n_ct = 128
fixed) makes every trial cost ``work_s``. One worker evaluates in-process; two run as Ray tasks
on a local Ray started by the study. Reported: wall time of each whole study, the speed-up, and
the speed-up without Ray's start-up (measured alone in the same run).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dse.study.runner import run_study
from dse.study.spec import study_from_dict


def timed_study(workers: int, trials: int, work_s: float, folder: Path) -> float:
    """Wall seconds of a whole study on ``workers`` workers (its database in ``folder``); prints its
    trial counts."""
    spec = study_from_dict({
        "name": f"parallel-{workers}", "target": "xdna2",
        "workload": {"shape": "4096x4096x4096", "dtype": "int8-int8"},
        "evaluator": {"name": "synthetic", "options": {"work_s": work_s}},
        "sampler": "exhaustive", "space": {"fix": {"m_ct": 128, "n_ct": 128}},
        "budget": {"trials": trials}, "workers": workers, "seed": 0})
    start = time.perf_counter()
    summary = run_study(spec, str(folder / f"w{workers}.db"))
    elapsed = time.perf_counter() - start
    w = summary.workloads[0]
    print(f"workers={workers}: {elapsed:.2f} s for {w.trials} trials ({w.evaluated} evaluated, "
          f"{w.infeasible} infeasible)")
    return elapsed


def main() -> None:
    """Run the study on 1 and 2 workers and print the speed-up, with and without Ray's start-up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--work-s", type=float, default=0.05)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one = timed_study(1, args.trials, args.work_s, Path(tmp))
        two = timed_study(2, args.trials, args.work_s, Path(tmp))
    startup = ray_startup_s()
    print(f"local Ray start + stop alone: {startup:.2f} s")
    print(f"speed-up with --workers 2 over 1: {one / two:.2f}x whole study, "
          f"{one / max(two - startup, 1e-9):.2f}x without Ray's start-up")


def ray_startup_s() -> float:
    """Seconds to start and stop a local 2-worker Ray, the fixed cost a 2-worker study pays."""
    from dse.study.pool import RayPool

    start = time.perf_counter()
    RayPool(2).close()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
