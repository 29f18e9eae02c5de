"""Search efficiency against Kernel Tuner: measurements to come within 3 % of the best.

Run:
    python benchmarks/kernel_tuner_side_by_side.py [--seeds 3] [--budget 40] [--keep 24]
        [--refine 24]
        [--engine amx|avx512] [--shape 4096x4096x4096] [--iterations 3] [--memo DIR]
        [--kernel-tuner-python PATH]
    python benchmarks/kernel_tuner_side_by_side.py --setup   # first make .kernel-tuner-venv (pip)

One int8 GEMM (4096^3 by default, B row-major) and one space: the ``amx_gemm`` space of the
shipped study ``studies/amx_int8.yaml`` (its four freed choices), on the AMX engine where the CPU
has AMX, else its AVX-512 part (``engine=avx512`` fixed; ``--engine`` chooses). The same kernel
generator (``evaluators/hardware/amx_source.py``'s ``kernel_source``) and the same feasible
configs are handed to Kernel Tuner 1.5's C backend: ``tune_params`` are the space's values, the
restriction is membership in dse's feasible set (so both sides search exactly the same configs),
the generator is Kernel Tuner's callable ``kernel_source`` (its source plus a function that times
one call of ``dse_gemm`` and returns milliseconds, the C backend's convention), with no
``#define`` per parameter (the generator writes its own). Kernel Tuner runs in its own venv
(``--kernel-tuner-python``, else ``$DSE_KERNEL_TUNER_PYTHON``, else ``.kernel-tuner-venv``,
which ``--setup`` creates with ``pip install kernel-tuner==1.5.0``), driven by this same file.

Strategies, each for ``--seeds`` seeds:

* Kernel Tuner's ``random_sample``, ``genetic_algorithm`` and ``bayes_opt`` (its defaults),
  ``--budget`` distinct configs each (``max_fevals``);
* dse's ladder as the shipped study runs it: the analytical model ranks every feasible config,
  the first rung keeps its best ``--keep`` (at most 3 per grid, mc and kc), measured in the
  model's order, then ``--refine`` more on the walk from the best measured through configs one
  parameter away, the model ordering each neighbourhood (the study's ``refine``; defaults: the
  study's 24 and 24); beside it, the model's top ``keep + refine`` measured alone, the same
  number of measurements without the walk (both deterministic: the same for every seed);
* Optuna's TPE as dse runs it (multivariate, windowed) straight on the hardware, ``--budget``
  distinct configs measured (an infeasible config asked is told pruned and not measured; a config
  asked again is not measured again).

**One measurement per config, shared.** This VM's timings move by 10-30 % between moments, so
"within 3 % of the best" means something only when every strategy sees the same time for the same
config. Every measurement is therefore Kernel Tuner's C backend (compiled by it, the product
checked against the exact reference through its ``answer``/``verify`` before the time counts,
``--iterations`` timed calls averaged) and goes through one memo: Kernel Tuner's own cachefile,
keyed by the config's values. Kernel Tuner's runs read and extend it run after run; dse's ladder
and TPE ask a measurement service, a Kernel Tuner strategy in the same driver process that serves
configs asked on its standard input through the same runner and cachefile. So a config is
compiled and measured once, whoever asked first, and every later run reads its time. The best
time is the shortest in the memo; a run's count is how many distinct configs it had measured when
the first within 3 % of it came (``benchmarks/search_race.py``).

**Wall time** of a run, compile time included: its own work (Kernel Tuner's strategy and
framework, or dse's model ranking and TPE's asks) plus the measuring cost recorded in the memo
(compile, check, timed calls) of every config it visited, as if it had measured each itself; so a
run that found its configs in the memo is not credited with the time another run spent. (Kernel
Tuner's warm-up, a first config compiled and run once more at the start of each tuning call, is
left out.) The table gives the median over seeds of the counts (a run that did not get within 3 %
in its budget counts as more than all), of each run's best found (the best time over the run's
own best) and of the wall times, and the number of distinct configs measured in all. The runs'
orders are kept beside the memo (``memo-*.runs.json``): ``--table-from`` prints the table of
a finished run again, at another ``--tolerance`` if asked, measuring nothing. Its last line
is the model's rank correlation (Spearman) with every time in the memo: how well the ranking
the ladder starts from holds on this CPU (computed anew, with the model as it is). The figure is
dse's ladder count over the best Kernel Tuner strategy's median count, against the goal of at
most 1/3.

Exit status: 1 when a product is wrong (Kernel Tuner stops on a failed check, and so does this
script) or the goal is missed, 2 when it cannot run here (no engine, no Kernel Tuner, bad input).
Measuring runs under ``flock /tmp/dse-measure.lock`` when ``flock`` exists (one measurement on
the machine at a time; ``--no-lock`` skips it, for plumbing checks).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from peer_venv import peer_or_none
from search_race import (
    Measured,
    best_time,
    cost_until,
    distinct,
    measurements_to_within,
    median_count,
    shown,
)

ROOT = Path(__file__).resolve().parents[1]
VENV = ".kernel-tuner-venv"
PACKAGES = ("kernel-tuner==1.5.0",)
KT_STRATEGIES = ("random_sample", "genetic_algorithm", "bayes_opt")
KERNEL = "dse_kt_gemm"
LOCK = "/tmp/dse-measure.lock"
GOAL = 1 / 3
DTYPE = "int8-int32"

# Kernel Tuner's C backend calls a function that returns its own time in ms; this one times one
# dse_gemm call with the generator's clock (a refused call returns -1 and leaves C unwritten,
# which the product check then catches). Kernel Tuner wraps a source without the words
# extern "C" in an extern "C" block for C++, which this comment's words prevent: it is C.
WRAPPER = """
/* Kernel Tuner's entry point: one timed call of dse_gemm, in ms (extern "C" not needed: C). */
float {name}(const TIN *A, const TIN *B, TOUT *C) {{
    static int asked = 0;
    if (!asked) {{ if (dse_amx_request() != 0) return -1.0f; asked = 1; }}
    double start = dse_now();
    if (dse_gemm({M}, {N}, {K}, A, {K}, B, {ldb}, C, {N})) return -1.0f;
    return (float)((dse_now() - start) * 1e3);
}}
"""

# Kernel Tuner names a generated source .cc and so has gcc compile it as C++; the generator
# writes C (gnu11): this shim compiles as C (and links as usual).
SHIM = """#!/bin/sh
for arg in "$@"; do
    if [ "$arg" = "-c" ]; then exec {cc} -x c "$@"; fi
done
exec {cc} "$@"
"""


# -- the Kernel Tuner side: runs under Kernel Tuner's interpreter, imports nothing of dse but the
# -- pure kernel generator ------------------------------------------------------------------------
def kt_driver(job_path: Path) -> int:
    """Run the job's Kernel Tuner strategies, then serve measurements on stdin until ``quit``.

    Protocol after the strategies: this process writes ``ready`` on stdout; each line in is a
    JSON list of configs (dicts of the tuned parameters), answered by one JSON line: a
    ``[cache key, seconds or None]`` pair per config; the line ``quit`` ends it. Everything else
    (progress, Kernel Tuner's own prints) goes to stderr."""
    import numpy as np
    from kernel_tuner import tune_kernel
    from kernel_tuner.core import DeviceInterface
    from kernel_tuner.util import StopCriterionReached

    sys.path.insert(0, str(ROOT))
    from evaluators.hardware.amx_source import kernel_source

    warnings.filterwarnings("ignore", message="None of the tunable parameters specify thread")
    protocol, sys.stdout = sys.stdout, sys.stderr  # nothing but answers on the protocol
    job = json.loads(job_path.read_text())
    names: list[str] = list(job["tune_params"])
    feasible = {tuple(c) for c in job["feasible"]}
    m, n, k = job["M"], job["N"], job["K"]
    wrapper = WRAPPER.format(name=KERNEL, M=m, N=n, K=k, ldb=k if job["b_layout"] == "col" else n)

    def generator(params: dict[str, Any]) -> str:
        config = {**job["base"], **{name: params[name] for name in names}}
        return kernel_source(config, DTYPE, job["b_layout"]) + wrapper

    def restriction(params: dict[str, Any]) -> bool:
        return tuple(params[name] for name in names) in feasible

    rng = np.random.default_rng(job["seed"])
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b_shape = (n, k) if job["b_layout"] == "col" else (k, n)
    b = rng.integers(-128, 128, b_shape, dtype=np.int8)
    bt = b.astype(np.float64).T if job["b_layout"] == "col" else b.astype(np.float64)
    print(f"kernel tuner driver: reference product {m}x{k}x{n} ...", file=sys.stderr, flush=True)
    reference = (a.astype(np.float64) @ bt).astype(np.int32)  # exact: |sums| < 2^53
    c = np.full((m, n), -7, dtype=np.int32)  # an unwritten product cannot pass for a right one

    def exact(answer: list[Any], result: list[Any], atol: float | None = None) -> bool:
        return all(np.array_equal(want, got) for want, got in zip(answer, result, strict=True)
                   if want is not None)

    measuring = {"s": 0.0, "count": 0}
    original = DeviceInterface.compile_and_benchmark

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:  # how long measuring takes
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            measuring["s"] += time.perf_counter() - start
            measuring["count"] += 1
            if measuring["count"] % 10 == 0:
                print(f"  {measuring['count']} kernels compiled and measured so far",
                      file=sys.stderr, flush=True)

    DeviceInterface.compile_and_benchmark = timed  # type: ignore[method-assign]
    common = dict(kernel_name=KERNEL, kernel_source=generator, problem_size=(n, m),
                  arguments=[a, b, c], tune_params=job["tune_params"],
                  restrictions=restriction, answer=[None, None, reference], verify=exact,
                  lang="C", compiler=job["compiler"], compiler_options=job["compiler_options"],
                  defines={}, iterations=job["iterations"], cache=job["cachefile"],
                  quiet=True, verbose=False)
    runs = []
    for strategy, seed, budget in job["runs"]:
        # each strategy its own stream per seed: seeded alike, random_sample and the genetic
        # algorithm's first population would be the same configs
        stream = int(np.random.SeedSequence([seed, KT_STRATEGIES.index(strategy)])
                     .generate_state(1)[0])
        random.seed(stream)
        np.random.seed(stream)
        before, start = measuring["s"], time.perf_counter()
        results, _ = tune_kernel(strategy=strategy, strategy_options={"max_fevals": budget},
                                 **common)
        elapsed = time.perf_counter() - start
        visited = [",".join(str(r[name]) for name in names) for r in results]
        runs.append({"strategy": strategy, "seed": seed, "visited": visited,
                     "own_s": elapsed - (measuring["s"] - before)})
        print(f"  kernel tuner {strategy} seed {seed}: {len(distinct(visited))} configs in "
              f"{elapsed:.0f} s", file=sys.stderr, flush=True)

    class Serve:
        """A Kernel Tuner strategy that measures the configs asked on stdin."""

        @staticmethod
        def tune(searchspace: Any, runner: Any, tuning_options: Any) -> list[Any]:
            print("ready", file=protocol, flush=True)
            for line in sys.stdin:
                if line.strip() == "quit":
                    break
                configs = json.loads(line)
                elements = [tuple(cfg[name] for name in names) for cfg in configs]
                bad = [e for e in elements if e not in feasible]
                if bad:
                    raise ValueError(f"asked to measure infeasible configs: {bad[:3]}")
                try:
                    results = runner.run(elements, tuning_options)
                except StopCriterionReached as exc:  # never: the budget is the whole space
                    raise RuntimeError(f"the service's budget ran out: {exc}") from None
                answer = [[",".join(str(v) for v in e), _seconds(r.get("time"))]
                          for e, r in zip(elements, results, strict=True)]
                print(json.dumps(answer), file=protocol, flush=True)
            return []

    tune_kernel(strategy=Serve, **common)
    memo = {}
    for key, entry in _read_cache(Path(job["cachefile"])).items():
        cost = sum(float(entry.get(part) or 0) for part in
                   ("compile_time", "verification_time", "benchmark_time")) / 1e3
        seconds = _seconds(entry.get("time"))
        memo[key] = {"seconds": seconds, "cost_s": cost,
                     "error": None if seconds else str(entry.get("__error__", entry.get("time")))}
    Path(job["out"]).write_text(json.dumps({"runs": runs, "memo": memo,
                                            "version": _kt_version()}))
    return 0


def _seconds(ms: Any) -> float | None:
    """A Kernel Tuner time (ms) in seconds; None for an error or a refused call (negative)."""
    return ms / 1e3 if isinstance(ms, int | float) and ms > 0 else None


def _kt_version() -> str:
    from importlib.metadata import version

    return version("kernel-tuner")


def _read_cache(path: Path) -> dict[str, dict[str, Any]]:
    """The entries of a Kernel Tuner cachefile (open or closed)."""
    text = path.read_text().rstrip()
    if text.endswith(","):
        text = text[:-1] + "}\n}"
    return json.loads(text)["cache"]


# -- the dse side ------------------------------------------------------------------------------
def study(engine: str, shape: str) -> dict[str, Any]:
    """The shipped int8 study at ``shape``, its AVX-512 part alone when ``engine`` says so."""
    import yaml

    spec = yaml.safe_load((ROOT / "studies" / "amx_int8.yaml").read_text())
    spec["name"] = f"kernel_tuner_side_by_side_{engine}"
    spec["workload"]["shape"] = shape
    if engine == "avx512":
        spec["space"]["fix"] = {"engine": "avx512"}
        spec["ladder"][1]["options"] = {"engine": "avx512"}
    return spec


def feasible_space(spec_dict: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The study's spec, context and every feasible config (a batch, in enumeration order)."""
    import numpy as np

    from dse.core import build_context
    from dse.core.params import batch_concat, batch_take
    from dse.study.spec import study_from_dict

    spec = study_from_dict(spec_dict, f"<{spec_dict['name']}>")
    w = spec.workloads[0]
    ctx = build_context(spec.target, w.dtype.name, w.shape, w.b_layout)
    parts = []
    for batch, _ in ctx.space.chunks_within(spec.space.fix, spec.space.free, spec.space.ranges):
        parts.append(batch_take(batch, np.flatnonzero(ctx.space.check(batch).ok)))
    return spec, ctx, batch_concat(parts, list(ctx.space.params()))


def tuned_axes(spec: Any, ctx: Any) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """The study's parameters with several values (Kernel Tuner's tune_params, in the order of
    its cache keys) and the fixed ones' values."""
    axes = ctx.space._axes(spec.space.fix, spec.space.free)
    tune_params = {n: [_plain(v) for v in values] for n, values in axes.items() if len(values) > 1}
    return tune_params, {n: _plain(values[0]) for n, values in axes.items() if len(values) == 1}


def model_agreement(memo: dict[str, Measured], engine: str, shape: str) -> str:
    """Spearman's rank correlation between the model's TOPS and the measured speed of every
    config in ``memo``: how well the ranking the ladder starts from holds on this CPU."""
    from scipy.stats import spearmanr

    from dse.core.registry import build_evaluator
    from evaluators.analytical import AnalyticalEvaluator

    spec, ctx, feasible = feasible_space(study(engine, shape))
    names = list(tuned_axes(spec, ctx)[0])
    scores = build_evaluator("analytical", {}).score(feasible, ctx)["tops"]
    key_score = {",".join(str(_plain(c[n])) for n in names): float(score)
                 for c, score in zip(ctx.space.decode(feasible), scores, strict=True)}
    pairs = [(key_score[k], -m.seconds) for k, m in memo.items()
             if m.seconds is not None and k in key_score]
    rho = spearmanr(*zip(*pairs, strict=True)).statistic
    return (f"the model (analytical version {AnalyticalEvaluator.version}) against the "
            f"{len(pairs)} measured configs: rank correlation {rho:.2f} (Spearman)")


def ladder_order(spec: Any, ctx: Any, feasible: Any, keep: int) -> tuple[Any, Any, float]:
    """The model's score of every feasible config, the indices of the ``keep`` configs dse's
    ladder's first rung passes on (in the model's order) and the seconds ranking took."""
    from dse.core.registry import build_evaluator
    from dse.study.strategies.ladder import choose

    start = time.perf_counter()
    rung = spec.ladder[0]
    scores = build_evaluator(rung.evaluator.name, rung.evaluator.options).score(
        feasible, ctx)["tops"].astype(float)
    groups = list(zip(*(feasible[n].tolist() for n in rung.group_by), strict=True)) \
        if rung.group_by else None
    kept = choose(scores, keep, rung.select, groups, rung.per_group, ctx.space.tie_order(feasible))
    return scores, kept, time.perf_counter() - start


def refined_ladder(service: Service, ctx: Any, feasible: Any, scores: Any, kept: Any,
                   first: dict[str, float | None], refine: int) -> list[str]:
    """The cache keys the refining ladder measures: its first rung's ``kept`` (their times in
    ``first``, by key), then ``refine`` configs of the walk from the best measured (dse's
    ``refine`` rung option, the model ordering each neighbourhood)."""
    import numpy as np

    from dse.core.params import batch_take
    from dse.study.strategies.refine import walk

    def value(seconds: float | None) -> float:
        return -seconds if seconds is not None else float("nan")

    keys = list(first)
    measured = {int(i): value(first[k]) for i, k in zip(kept, keys, strict=True)}

    def measure(picks: list[int]) -> list[float]:
        answers = service.measure(ctx.space.decode(batch_take(feasible, np.array(picks))))
        keys.extend(key for key, _ in answers)
        return [value(seconds) for _, seconds in answers]

    walk(feasible, scores, measured, refine, measure, ties=ctx.space.tie_order(feasible))
    return keys


class Service:
    """The Kernel Tuner driver's measurement service, from dse's side."""

    def __init__(self, process: subprocess.Popen, names: list[str]) -> None:
        self.process, self.names = process, names
        self.asked = 0

    def wait_ready(self) -> None:
        """Block until the driver has run its strategies and serves."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            self.fail(f"expected 'ready', got {line!r}")

    def measure(self, configs: list[dict[str, Any]]) -> list[tuple[str, float | None]]:
        """The cache key and time (None: failed) of each of ``configs``, each measured unless
        the memo has it."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps([{n: _plain(c[n]) for n in self.names} for c in configs]) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            self.fail("the driver stopped while measuring")
        self.asked += len(configs)
        return [(key, seconds) for key, seconds in json.loads(line)]

    def close(self) -> None:
        """Tell the driver to stop serving and wait for it."""
        assert self.process.stdin is not None
        self.process.stdin.write("quit\n")
        self.process.stdin.close()
        if self.process.wait() != 0:
            self.fail(f"the driver exited {self.process.returncode}")

    def fail(self, why: str) -> None:
        """Stop the driver and exit 1: a product was wrong or the driver broke."""
        self.process.kill()
        sys.exit(f"FAILED: Kernel Tuner's driver: {why} (its messages above; a wrong product "
                 "stops it with 'Kernel result verification failed')")


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def tpe_run(service: Service, ctx: Any, spec: Any, seed: int, budget: int,
            max_asks: int) -> dict[str, Any]:
    """Optuna's TPE as dse runs it, each config measured through ``service``: the cache keys in
    the order measured and the seconds of its own work (asks and tells)."""
    import optuna
    from optuna.trial import TrialState

    from dse.study.sampling.samplers import tpe

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    encoding = ctx.space.optuna_encoding(spec.space.fix, spec.space.free, spec.space.ranges)
    distributions = encoding.distributions()
    study = optuna.create_study(direction="maximize", sampler=tpe(seed, 1, {}))
    ops = 2.0 * ctx.workload.M * ctx.workload.N * ctx.workload.K
    visited: list[str] = []
    measured: dict[str, float | None] = {}
    own, asks = 0.0, 0
    while len(measured) < budget and asks < max_asks:
        start = time.perf_counter()
        trial = study.ask(distributions)
        config = ctx.space.resolve(encoding.decode(trial.params))
        infeasible = not bool(ctx.space.check(ctx.space.encode([config])).ok[0])
        own += time.perf_counter() - start
        asks += 1
        if infeasible:
            study.tell(trial, state=TrialState.PRUNED)
            continue
        key, seconds = service.measure([config])[0]
        visited.append(key)
        measured[key] = seconds
        start = time.perf_counter()
        if seconds is None:
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, ops / seconds / 1e12)
        own += time.perf_counter() - start
    return {"visited": visited, "own_s": own, "asks": asks}


def memo_dir(given: str | None, engine: str, shape: str, iterations: int,
             command: list[str]) -> Path:
    """Where the memo lives: ``given`` or a temporary folder; its file is named by what decides
    a time (generator, compiler, CPU, shape, engine, timed calls), so a stale memo is never
    read."""
    from evaluators.hardware.amx_detect import cpu_flags, cpu_model
    from evaluators.hardware.amx_source import SUPPORT

    folder = Path(given) if given else Path(tempfile.mkdtemp(prefix="dse-kt-"))
    folder.mkdir(parents=True, exist_ok=True)
    generator = (ROOT / "evaluators" / "hardware" / "amx_source.py").read_text()
    digest = hashlib.sha256("\0".join([
        generator, SUPPORT.read_text(), WRAPPER, *command, cpu_model(),
        " ".join(sorted(cpu_flags())), engine, shape, str(iterations)]).encode()).hexdigest()
    return folder / f"memo-{digest[:16]}"


def locked(command: list[str], lock: bool = True) -> list[str]:
    """``command`` under the machine's measurement lock, when ``lock`` and ``flock`` exists."""
    return ["flock", LOCK, *command] if lock and shutil.which("flock") else command


def row(label: str, runs: list[dict[str, Any]], memo: dict[str, Measured], best: float,
        tol: float, budget: int) -> tuple[str, float | None]:
    """One line of the table (``runs``: each its ``visited`` keys and ``own_s``) and the median
    count."""
    counts = [measurements_to_within(r["visited"], memo, best, tol) for r in runs]
    middle = median_count(counts, budget)
    reach = [cost_until(r["visited"], memo, c) for r, c in zip(runs, counts, strict=True)
             if c is not None]
    walls = [r["own_s"] + cost_until(r["visited"], memo, None) for r in runs]
    found = [best / min(memo[k].seconds or float("inf") for k in distinct(r["visited"]))
             for r in runs]
    line = (f"{label:<34} {' '.join(shown(c, budget) for c in counts):<16} "
            f"{shown(middle, budget):>7} {statistics.median(found):>10.1%} "
            f"{f'{statistics.median(reach):.0f}' if reach else '-':>10} "
            f"{statistics.median(walls):>9.0f}")
    return line, middle


def main(argv: list[str] | None = None) -> int:
    """Run every strategy, print the table and the figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per strategy (default 3)")
    parser.add_argument("--budget", type=int, default=40,
                        help="distinct configs a Kernel Tuner or TPE run measures (default 40)")
    parser.add_argument("--keep", type=int,
                        help="configs dse's ladder's first rung passes on (default: the shipped "
                        "study's)")
    parser.add_argument("--refine", type=int,
                        help="configs dse's ladder measures on its walk from the best of them "
                        "(default: the shipped study's)")
    parser.add_argument("--engine", choices=("amx", "avx512"),
                        help="default: amx where this CPU has it, else avx512")
    parser.add_argument("--shape", default="4096x4096x4096", help="MxKxN (default 4096^3)")
    parser.add_argument("--iterations", type=int, default=3,
                        help="Kernel Tuner's timed calls per config, averaged (default 3; its "
                        "own default, 7, more than doubles the time of a slow config)")
    parser.add_argument("--strategies", default=",".join(KT_STRATEGIES),
                        help="Kernel Tuner strategies, comma-separated")
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--memo", help="folder to keep the memo in (reused by later runs of the "
                        "same generator, compiler, CPU, shape and engine); default: a new one")
    parser.add_argument("--kernel-tuner-python", help="interpreter with kernel-tuner installed")
    parser.add_argument("--setup", action="store_true", help=f"create {VENV} first (pip)")
    parser.add_argument("--no-lock", action="store_true", help=f"measure without taking {LOCK} "
                        "(plumbing checks only: other measurements may then disturb the times)")
    parser.add_argument("--table-from", metavar="RUNS.json",
                        help="print the table of a finished run again from the runs file it "
                        "kept beside its memo (measures nothing; --tolerance applies)")
    parser.add_argument("--kt-driver", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.kt_driver:
        return kt_driver(args.kt_driver)
    if args.table_from:
        kept = json.loads(Path(args.table_from).read_text())
        return summarise(kept, argparse.Namespace(**{**kept["args"],
                                                     "tolerance": args.tolerance}))
    problem = _bad_input(args)
    if problem:
        print(f"bad input: {problem}", file=sys.stderr)
        return 2
    strategies = args.strategies.split(",")
    from evaluators.hardware.amx import worker_environment
    from evaluators.hardware.amx_build import AMX_FLAGS, BASE_FLAGS, compiler
    from evaluators.hardware.amx_detect import amx_problem, vector_problem

    engine = args.engine or ("avx512" if amx_problem() else "amx")
    cannot = vector_problem(DTYPE) if engine == "avx512" else amx_problem()
    if cannot:
        print(f"cannot run: {cannot}", file=sys.stderr)
        return 2
    python = peer_or_none("Kernel Tuner", args.kernel_tuner_python, "--kernel-tuner-python",
                          "DSE_KERNEL_TUNER_PYTHON", VENV, PACKAGES, args.setup, "kernel_tuner")
    if python is None:
        return 2

    spec_dict = study(engine, args.shape)
    spec, ctx, feasible = feasible_space(spec_dict)
    tune_params, base = tuned_axes(spec, ctx)
    names = list(tune_params)
    configs = ctx.space.decode(feasible)
    print(f"{args.shape} int8 (B {ctx.workload.b_layout}), engine {engine}: "
          f"{len(configs):,} feasible configs of the shipped study's space; tuned: "
          f"{', '.join(names)}", flush=True)
    keep = args.keep if args.keep is not None else spec.ladder[0].keep
    refine = args.refine if args.refine is not None else spec.ladder[-1].refine
    scores, kept, rank_s = ladder_order(spec, ctx, feasible, keep + refine)
    print(f"dse ladder: the model ranked them in {rank_s:.1f} s; {keep} kept, then {refine} "
          f"measured on the walk (and the model's top {len(kept)} alone)", flush=True)

    flags = [f for f in (*BASE_FLAGS, *(AMX_FLAGS if engine == "amx" else ()))
             if f not in ("-shared", "-fPIC")]
    cc = compiler()
    memo = memo_dir(args.memo, engine, args.shape, args.iterations, [*cc, *flags])
    shim = memo.with_suffix(".cc.sh")
    shim.write_text(SHIM.format(cc=" ".join(shlex.quote(p) for p in cc)))
    shim.chmod(0o755)
    runs = [(s, seed, args.budget) for s in strategies for seed in range(1, args.seeds + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        job_path, out = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job_path.write_text(json.dumps({
            "tune_params": tune_params, "base": base, "b_layout": ctx.workload.b_layout,
            "feasible": [[_plain(c[n]) for n in names] for c in configs],
            "M": ctx.workload.M, "N": ctx.workload.N, "K": ctx.workload.K, "seed": 0,
            "compiler": str(shim), "compiler_options": flags, "iterations": args.iterations,
            "cachefile": str(memo.with_suffix(".json")), "runs": runs, "out": str(out)}))
        env = {**os.environ, **worker_environment()}
        print(f"Kernel Tuner ({python}): {len(runs)} runs of {args.budget} configs, then dse's "
              f"ladder and TPE through the same memo ({memo.with_suffix('.json')})", flush=True)
        started = time.perf_counter()
        process = subprocess.Popen(locked([str(python), __file__, "--kt-driver", str(job_path)],
                                          not args.no_lock),
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                   env=env)
        service = Service(process, names)
        service.wait_ready()
        print(f"Kernel Tuner's runs done ({time.perf_counter() - started:.0f} s); dse's ladder",
              flush=True)
        from dse.core.params import batch_take

        top = service.measure(ctx.space.decode(batch_take(feasible, kept)))
        ladder_keys = [key for key, _ in top]
        refined_keys = refined_ladder(service, ctx, feasible, scores, kept[:keep],
                                      dict(top[:keep]), refine)
        tpe_runs = []
        for seed in range(1, args.seeds + 1):
            tpe_runs.append(tpe_run(service, ctx, spec, seed, args.budget, 20 * args.budget))
            print(f"  dse TPE seed {seed}: {len(distinct(tpe_runs[-1]['visited']))} configs "
                  f"({tpe_runs[-1]['asks']} asks)", flush=True)
        service.close()
        report = json.loads(out.read_text())
    # what the table is computed from, kept beside the memo (the runs' orders, the times)
    kept = memo.with_suffix(".runs.json")
    kept.write_text(json.dumps({**report, "ladder": ladder_keys, "refined": refined_keys,
                                "keep": keep, "rank_s": rank_s, "engine": engine,
                                "tpe": tpe_runs, "args": vars(args) | {"kt_driver": None}}))
    print(f"all measured in {time.perf_counter() - started:.0f} s; the runs: {kept}", flush=True)
    return summarise(json.loads(kept.read_text()), args)


def summarise(report: dict[str, Any], args: argparse.Namespace) -> int:
    """Print the table and the figure from a run's ``report`` (Kernel Tuner's runs and memo,
    dse's ladder and TPE runs); 0 when the goal is met."""
    memo = {k: Measured(v["seconds"], v["cost_s"]) for k, v in report["memo"].items()}
    failed = {k: v["error"] for k, v in report["memo"].items() if v["seconds"] is None}
    best = best_time(memo)
    tol, budget = args.tolerance, args.budget
    # the study's ladder (its first rung's best, then the walk); a runs file from before the walk
    # has the model's top list alone
    ladder_keys = report.get("refined", report["ladder"])
    best_key = min((k for k in memo if memo[k].seconds is not None),
                   key=lambda k: memo[k].seconds or 0.0)
    print(f"\nKernel Tuner {report['version']}; {len(memo)} distinct configs in the memo, each "
          f"measured once (every product checked), {len(failed)} failed; best {best * 1e3:.4g} ms "
          f"({2 * _ops(args.shape) / best / 1e12:.3f} TOPS): {best_key}")
    print(f"measurements to come within {tol:.0%} of the best (per seed; median); the median of "
          "each run's best found (best time / its best time), of the seconds of measuring until "
          f"within {tol:.0%} (runs that got there) and of the whole run (compile included):")
    print(f"{'strategy':<34} {'per seed':<16} {'median':>7} {'best found':>10} "
          f"{'to reach s':>10} {'run s':>9}")
    medians: dict[str, float | None] = {}
    strategies = list(dict.fromkeys(r["strategy"] for r in report["runs"]))
    for strategy in strategies:
        runs = [r for r in report["runs"] if r["strategy"] == strategy]
        line, medians[strategy] = row(f"Kernel Tuner {strategy}", runs, memo, best, tol, budget)
        print(line)
    if "refined" in report:
        top = report["ladder"]
        line, _ = row(f"dse model's top {len(distinct(top))} alone",
                      [{"visited": top, "own_s": report["rank_s"]}], memo, best, tol, len(top))
        print(line)
    label = (f"dse ladder ({report['keep']} + {len(distinct(ladder_keys)) - report['keep']} "
             "walked)" if "refined" in report else
             f"dse ladder (model, {len(distinct(ladder_keys))} measured)")
    line, ladder_median = row(label, [{"visited": ladder_keys, "own_s": report["rank_s"]}],
                              memo, best, tol, len(ladder_keys))
    print(line + "   (deterministic: the same for every seed)")
    line, _ = row("dse TPE on the hardware", report["tpe"], memo, best, tol, budget)
    print(line)
    if "engine" in report:  # runs files of earlier versions do not name it
        print(model_agreement(memo, report["engine"], args.shape))
    reached = {s: m for s, m in medians.items() if m is not None}
    if ladder_median is None:
        print(f"MISSED: dse's ladder did not come within {tol:.0%} of the best in its "
              f"{len(ladder_keys)} measurements"
              + ("" if reached else f" (nor did any Kernel Tuner strategy, median over seeds, in "
                 f"{budget})"))
        return 1
    if not reached:
        print(f"no Kernel Tuner strategy came within {tol:.0%} in the median over seeds within "
              f"{budget} measurements: the ratio is below {ladder_median / budget:.3f}"
              f" (goal <= {GOAL:.3f}); raise --budget for the figure")
        return 0 if ladder_median / budget <= GOAL else 1
    kt_best = min(reached, key=lambda s: reached[s] or 0.0)
    ratio = ladder_median / (reached[kt_best] or 1.0)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from goals import against_goal

    seeds = len(report["tpe"])
    met = against_goal(f"dse ladder measurements / Kernel Tuner {kt_best}'s (median over "
                       f"{seeds} seeds, to {tol:.0%} of the best)", ratio, GOAL, "",
                       higher_is_better=False)
    return 0 if met else 1


def _ops(shape: str) -> float:
    m, k, n = (int(v) for v in shape.lower().split("x"))
    return float(m) * n * k


def _bad_input(args: argparse.Namespace) -> str | None:
    """Why the command line cannot run, or None."""
    try:
        dims = [int(v) for v in args.shape.lower().split("x")]
    except ValueError:
        dims = []
    if len(dims) != 3 or min(dims) < 1:
        return f"--shape {args.shape!r} is not MxKxN with three whole numbers >= 1"
    if args.seeds < 1 or args.iterations < 1 or (args.keep is not None and args.keep < 1):
        return "--seeds, --iterations and --keep must be at least 1"
    if args.refine is not None and args.refine < 0:
        return "--refine must be at least 0"
    unknown = [s for s in args.strategies.split(",") if s not in KT_STRATEGIES]
    if unknown:
        return f"unknown strategy {unknown[0]!r}; choose from {', '.join(KT_STRATEGIES)}"
    if "bayes_opt" in args.strategies.split(",") and args.budget <= 20:
        return "--budget must exceed 20 with bayes_opt (its first 20 configs are its sample)"
    if args.budget < 1:
        return "--budget must be at least 1"
    if not 0 < args.tolerance < 1:
        return "--tolerance must lie between 0 and 1"
    return None


if __name__ == "__main__":
    sys.exit(main())
