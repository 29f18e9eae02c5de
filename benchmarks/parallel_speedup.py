"""Speed-up of a study on 2 Ray workers over 1 worker, with an evaluator taking ~50 ms, or
with compiled kernels measured on this CPU (``--case amx``).

Run: python benchmarks/parallel_speedup.py [--trials 200] [--work-s 0.05] [--repeats 3]
     python benchmarks/parallel_speedup.py --case amx [--shape 512x512x512] [--keep 24]
         [--repeats 3]

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

``--case amx``: a measured ladder, the AVX-512 kernels of the ``cpu-amx`` family on an int8 GEMM
(``--shape``, B column-major; needs AVX-512 VNNI, no AMX): the model ranks the space, then the
``amx`` evaluator compiles and measures its best ``--keep`` (the shipped study's walk is left
out: it goes one config a step whatever the workers, so it has nothing to overlap). Each run has
a build cache of its own (``DSE_AMX_CACHE`` in a new folder), so every kernel is compiled, and a
database of its own. 1 worker (in-process) and 2 (Ray actors, each building while the other
measures), interleaved, ``--repeats`` times. Reported: the hardware rung's time (its first batch
to its last result) and the whole study's, 1 worker's over 2 workers' (goal: the rung >= 1.3x);
and whether building beside a measurement disturbed it: each config's measured time on 2 workers
over its time on 1 (median over configs and runs; goal <= 1.05). It fails (exit 1) when a goal
is not met, and at once when a config fails to measure, a run measures other configs than the
others, or a run's kernels were not all compiled into its own cache.
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
from dse.study.execution import pool as pools
from dse.study.execution.ray_start import dashboard_ports
from dse.study.runner import run_study
from dse.study.spec import study_from_dict

STARTUP_GOAL_S = 3.0
SPEEDUP_GOAL = 1.8
AMX_SPEEDUP_GOAL = 1.3  # the measured ladder, 2 workers over 1
AMX_DISTURBANCE_GOAL = 1.05  # a config's measured time on 2 workers over its time on 1


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

    def __init__(self, pool: pools.Pool, evaluator: str = "") -> None:
        self.pool, self.workers, self.evaluator = pool, pool.workers, evaluator
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
def timed_pools(made: list[tuple[float, float, _Timed]], ready: bool = True) -> Any:
    """The runner's pools timed: each pool's start-up (until its workers are ready, checked for
    a dashboard), its creation alone and the pool itself are appended to ``made``. Without
    ``ready`` the workers start with the first batch, as in a plain run: a ladder's runner
    makes a pool it never uses besides each rung's, whose actors must not hold the CPUs."""
    def make(evaluator: Any, workers: int, address: str | None) -> _Timed:
        start = time.perf_counter()
        pool = pools.make_pool(evaluator, workers, address)
        created = time.perf_counter() - start
        if isinstance(pool, pools.RayPool) and ready:
            pool.wait_ready()
            startup = time.perf_counter() - start
            require_no_dashboard()
        else:
            startup = time.perf_counter() - start
        timed = _Timed(pool, evaluator.name)
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
    parser.add_argument("--case", choices=("synthetic", "amx"), default="synthetic",
                        help="the 50 ms synthetic evaluator, or compiled kernels measured here")
    parser.add_argument("--shape", default="512x512x512", help="--case amx: the int8 GEMM")
    parser.add_argument("--keep", type=int, default=24, help="--case amx: configs measured")
    args = parser.parse_args()
    if args.case == "amx":
        return amx_case(args.shape, args.keep, args.repeats)
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


@dataclass
class LadderRun:
    """One run of the measured ladder: its times and each measured config's latency."""

    workers: int
    wall: float
    rung: float  # the hardware rung: its first batch to its last result
    latency: dict[tuple[Any, ...], float]


def measured_ladder(workers: int, shape: str, keep: int, folder: Path) -> LadderRun:
    """Run the AVX-512 ladder on ``workers`` workers with a build cache and database of its own
    in ``folder``; stop the benchmark if a config fails or a kernel came from elsewhere."""
    from amx_vs_onednn import study_dict

    from dse import load_trials

    spec_dict = study_dict("int8", shape, keep, emulate=False, engine="avx512")
    spec_dict.update(name=f"ladder-{workers}", workers=workers)
    # the kept configs alone: the shipped study's walk goes one config a step on any number of
    # workers (each step waits for the one before), so it has nothing to run side by side,
    # and its confirmation measures one config at a time
    spec_dict["ladder"][1].pop("refine", None)
    spec_dict["ladder"][1].pop("confirm", None)
    spec = study_from_dict(spec_dict, f"<ladder on {workers} workers>")
    cache = folder / f"cache-w{workers}"
    os.environ["DSE_AMX_CACHE"] = str(cache)  # before Ray starts: its workers inherit it
    made: list[tuple[float, float, _Timed]] = []
    os.environ.pop(pools.MODE_ENV, None)
    start = time.perf_counter()
    with timed_pools(made, ready=False):
        run_study(spec, str(folder / f"w{workers}.db"))
    wall = time.perf_counter() - start
    # the runner makes a pool for the study's evaluator too; the rung's is the one used
    (pool,) = [p for _, _, p in made if p.evaluator == "amx" and p.first is not None]
    rung = pool.last - (pool.first or pool.last)
    frame = load_trials(str(folder / f"w{workers}.db"), spec.name)
    measured = frame[frame["evaluator"] == "amx"]
    bad = measured[measured["status"] != "ok"]
    if len(measured) != keep or len(bad):
        reasons = "; ".join(str(r) for r in bad["reason"].head(3))
        sys.exit(f"FAILED: {workers} worker(s) measured {len(measured) - len(bad)} of {keep} "
                 f"configs correctly ({reasons})")
    built = len(list(cache.glob("*.so")))  # the kernels, and on a CPU with AMX its peak probe
    if built < keep:
        sys.exit(f"FAILED: {workers} worker(s) compiled {built} kernels into {cache}, fewer "
                 f"than {keep}: the build cache was not the run's own")
    names = ("grid_rows", "grid_cols", "mc", "nc", "kc", "pack_a", "pack_b", "block_order",
             "micro_order", "prefetch_c", "split", "threads")
    latency = {tuple(row[n] for n in names): float(row["latency_s"])
               for _, row in measured.iterrows()}
    print(f"  workers={workers}: whole study {wall:.1f} s, hardware rung {rung:.1f} s "
          f"({keep} kernels compiled and measured, median "
          f"{statistics.median(latency.values()) * 1e3:.3f} ms a GEMM)", flush=True)
    return LadderRun(workers, wall, rung, latency)


def amx_case(shape: str, keep: int, repeats: int) -> int:
    """The measured ladder on 1 worker and on 2, ``repeats`` times interleaved; its figures
    against their goals (see the module docstring)."""
    from evaluators.hardware.amx_detect import vector_problem

    problem = vector_problem("int8-int32")
    if problem:
        sys.exit(f"FAILED: --case amx measures AVX-512 VNNI kernels: {problem}")
    import ray  # noqa: F401 - imported once, outside every timed run

    runs: dict[int, list[LadderRun]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):  # interleaved, the order alternating: load falls on both
            print(f"run {repeat + 1} of {repeats}", flush=True)
            for workers in (1, 2)[::1 if repeat % 2 == 0 else -1]:
                folder = Path(tmp) / f"{repeat}-{workers}"
                folder.mkdir()
                runs[workers].append(measured_ladder(workers, shape, keep, folder))
    one, two = runs[1], runs[2]
    configs = {frozenset(r.latency) for r in one + two}
    if len(configs) != 1:
        sys.exit("FAILED: the runs measured different configs (the model rung should pick the "
                 "same ones every time)")
    rung = [a.rung / b.rung for a, b in zip(one, two, strict=True)]
    whole = [a.wall / b.wall for a, b in zip(one, two, strict=True)]
    # per config, its time on 2 workers over its median time on 1: what building beside a
    # measurement does to it (above 1: slowed)
    disturbed = [b.latency[c] / statistics.median(a.latency[c] for a in one)
                 for b in two for c in b.latency]
    print(f"hardware rung: 1 worker {spread([r.rung for r in one], 's')}; 2 workers "
          f"{spread([r.rung for r in two], 's')}")
    print(f"whole study: 1 worker {spread([r.wall for r in one], 's')}; 2 workers "
          f"{spread([r.wall for r in two], 's')}")
    print(f"speed-up, 2 workers over 1: hardware rung {spread(rung, 'x')}; whole study "
          f"{spread(whole, 'x')}")
    print(f"a config's measured time on 2 workers over 1: {spread(disturbed, 'x')} "
          f"({len(disturbed)} measurements)")
    median = statistics.median
    met = [
        against_goal(f"measured ladder ({keep} AVX-512 int8 {shape} kernels compiled and "
                     "measured), 2 workers over 1", median(rung), AMX_SPEEDUP_GOAL, "x"),
        against_goal("measured time of a config, 2 workers over 1 (building beside a "
                     "measurement)", median(disturbed), AMX_DISTURBANCE_GOAL, "x",
                     higher_is_better=False),
    ]
    return 0 if all(met) else 1


if __name__ == "__main__":
    sys.exit(main())
