"""Orchestration + persistence + sampling cost per trial: dse's runner with the random sampler
against Optuna's own RDB storage, and with TPE, capped (its ``window`` option) and uncapped.

Run: python benchmarks/study_overhead.py [--random-trials 10000] [--optuna-trials 300]
    [--tpe-trials 10000] [--uncapped-trials 3000] [--window N]

Every study is real (`run_study`: store, journal, cache lookups) on the xdna2 int8-int8 4096^3
space with the analytical model (tens of microseconds a config), in a SQLite file. The random
sampler's side is compared with an ask/tell loop on `optuna.storages.RDBStorage` (same sampler,
space encoding and model; wall time, measured on fewer trials: it is the slow side). TPE's cost
grows with the history it fits, so its figures are CPU seconds (`time.process_time`, steadier
than wall time on a shared machine) per trial over ranges of trial numbers, read from a stamp
taken as each trial is asked. The uncapped TPE (window 0, the old path) costs more at every
trial, so it runs fewer trials (``--uncapped-trials``); its last range is a lower bound of what it
would cost at 10,000.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from goals import against_goal
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from dse.core.registry import build_context, build_evaluator, load, register
from dse.study.runner import run_study
from dse.study.sampling.tpe_window import TPE_WINDOW
from dse.study.spec import study_from_dict

WORKLOAD = {"shape": "4096x4096x4096", "dtype": "int8-int8"}
RANGES = ((50, 600), (300, 3000), (5000, 10000))  # trial numbers: flat or growing?


class Stamped(optuna.samplers.BaseSampler):
    """``inner``, noting the CPU time at which each trial is asked (in ``stamps``)."""

    def __init__(self, inner: optuna.samplers.BaseSampler) -> None:
        self.inner, self.stamps = inner, []

    def infer_relative_search_space(self, study: optuna.Study,
                                    trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self.inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self.inner.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.stamps.append(time.process_time())
        self.inner.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self.inner.after_trial(study, trial, state, values)


def stamped_study(sampler: str, options: dict[str, Any], trials: int,
                  folder: Path) -> tuple[list[float], float]:
    """CPU time at each trial's ask (and one more at the end) of a dse study of ``trials`` trials
    of ``sampler`` with ``options``, and its wall seconds."""
    made: list[Stamped] = []

    def factory(seed: int, batch_size: int, opts: dict[str, Any]) -> Stamped:
        made.append(Stamped(load("sampler", sampler)(seed, batch_size, opts)))
        return made[-1]

    name = f"timed-{sampler}"
    register("sampler", name, factory)
    label = "-".join([sampler, *(f"{k}{v}" for k, v in options.items()), str(trials)])
    spec = study_from_dict({"name": label, "target": "xdna2", "workload": WORKLOAD,
                            "sampler": {"name": name, "options": options},
                            "budget": {"trials": trials}, "seed": 0})
    start = time.perf_counter()
    summary = run_study(spec, str(folder / f"{label}.db"))
    wall = time.perf_counter() - start
    assert summary.workloads[0].trials == trials
    stamps = [s for m in made for s in m.stamps]  # the runner's check builds one that asks none
    return [*stamps, time.process_time()], wall


def per_trial(stamps: list[float], first: int, last: int) -> float | None:
    """CPU milliseconds per trial from trial ``first`` to ``last`` (None: not that many)."""
    if last >= len(stamps):
        return None
    return (stamps[last] - stamps[first]) / (last - first) * 1e3


def optuna_rdb_per_trial(trials: int, folder: Path) -> float:
    """Seconds per trial of an Optuna ask/tell loop over the same space and model, on Optuna's RDB
    storage in ``folder``."""
    ctx = build_context("xdna2", WORKLOAD["dtype"], WORKLOAD["shape"])
    evaluator = build_evaluator("analytical")
    encoding = ctx.space.optuna_encoding({}, [], {})
    distributions = encoding.distributions()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(f"sqlite:///{folder / 'optuna.db'}")
    study = optuna.create_study(storage=storage, direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=0))
    start = time.perf_counter()
    for _ in range(trials):
        trial = study.ask(distributions)
        batch = ctx.space.encode([encoding.decode(trial.params)])
        result = evaluator.evaluate(batch, ctx)[0]
        if result.ok:
            study.tell(trial, result.metrics["tops"])
        else:
            trial.set_user_attr("reason", result.reason)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    return (time.perf_counter() - start) / trials


def random_side(args: argparse.Namespace, folder: Path) -> None:
    """The random sampler's figures: ms a trial (goal <= 2) and its ratio to Optuna's RDB."""
    baseline = optuna_rdb_per_trial(args.optuna_trials, folder)
    print(f"Optuna RDBStorage on SQLite ({args.optuna_trials} trials): "
          f"{baseline * 1e3:.2f} ms/trial (wall)", flush=True)
    stamps, wall = stamped_study("random", {}, args.random_trials, folder)
    n = args.random_trials
    against_goal(f"dse study overhead, random sampler, {n:,} trials (CPU)",
                 per_trial(stamps, 0, n), 2.0, "ms/trial", higher_is_better=False)
    against_goal(f"Optuna RDB / dse, random sampler, {n:,} trials (wall)", baseline * n / wall,
                 10.0, "x")


def tpe_side(args: argparse.Namespace, folder: Path) -> None:
    """TPE's ms a trial over :data:`RANGES`, capped (``--window``) and uncapped, measured in
    this run; the goal is <= 5 ms at 10,000 trials."""
    capped, _ = stamped_study("tpe", {"window": args.window}, args.tpe_trials, folder)
    uncapped, _ = stamped_study("tpe", {"window": 0}, args.uncapped_trials, folder)
    for first, last in RANGES:
        new, old = per_trial(capped, first, last), per_trial(uncapped, first, last)
        if new is None:
            continue
        shown = f"uncapped at {last:,}" if old is not None else "uncapped not run that far"
        against_goal(f"TPE window {args.window:,}, trials {first:,}-{last:,} (CPU; old path: "
                     f"{shown})", new, 5.0, "ms/trial", higher_is_better=False, old=old)
    last_old = max((r for r in RANGES if per_trial(uncapped, *r) is not None), default=None)
    n = args.tpe_trials
    if last_old is not None and per_trial(capped, 0, n) is not None:
        against_goal(f"TPE window {args.window:,}, whole study of {n:,} trials (CPU; old path: "
                     f"uncapped trials {last_old[0]:,}-{last_old[1]:,}, a lower bound)",
                     per_trial(capped, 0, n), 5.0, "ms/trial", higher_is_better=False,
                     old=per_trial(uncapped, *last_old))


def main() -> None:
    """Measure the random side against Optuna's RDB storage, then TPE capped and uncapped, and
    print each figure against its goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-trials", type=int, default=10000)
    parser.add_argument("--optuna-trials", type=int, default=300)
    parser.add_argument("--tpe-trials", type=int, default=10000)
    parser.add_argument("--uncapped-trials", type=int, default=3000)
    parser.add_argument("--window", type=int, default=TPE_WINDOW,
                        help="the capped TPE's window (default: dse's default)")
    parser.add_argument("--skip-random", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_random:
            random_side(args, Path(tmp))
        tpe_side(args, Path(tmp))


if __name__ == "__main__":
    main()
