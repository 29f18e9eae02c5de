"""Orchestration + persistence cost per trial: dse's runner against Optuna's own RDB storage.

Run: python benchmarks/study_overhead.py [--trials 2000 10000] [--optuna-trials 300]

Both sides use Optuna's RandomSampler (so sampling costs the same), the same search space
encoding and the same cheap evaluation (the analytical model, tens of microseconds), and a
SQLite file: dse runs a real study (`run_study`: store, journal, cache lookups); the baseline is
an ask/tell loop on `optuna.storages.RDBStorage`. Optuna's RDB storage is measured on fewer
trials (it is the slow side); the figure compared is seconds per trial.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import optuna

from dse.core.registry import build_context, build_evaluator
from dse.study.runner import run_study
from dse.study.spec import study_from_dict

WORKLOAD = {"shape": "4096x4096x4096", "dtype": "int8-int8"}


def dse_per_trial(trials: int, folder: Path) -> float:
    """Seconds per trial of a dse study of ``trials`` random-sampler trials stored in ``folder``."""
    spec = study_from_dict({"name": f"overhead-{trials}", "target": "xdna2",
                            "workload": WORKLOAD, "sampler": "random",
                            "budget": {"trials": trials}, "seed": 0})
    start = time.perf_counter()
    summary = run_study(spec, str(folder / f"dse-{trials}.db"))
    assert summary.workloads[0].trials == trials
    return (time.perf_counter() - start) / trials


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


def main() -> None:
    """Measure the Optuna baseline, then each dse study size, and print ms/trial, the ratio and the
    verdict against the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--optuna-trials", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        baseline = optuna_rdb_per_trial(args.optuna_trials, folder)
        print(f"Optuna RDBStorage on SQLite ({args.optuna_trials} trials): "
              f"{baseline * 1e3:.2f} ms/trial")
        for trials in args.trials:
            ours = dse_per_trial(trials, folder)
            verdict = "met" if ours <= 0.005 and baseline / ours >= 10 else "NOT met"
            print(f"dse study ({trials:,} trials): {ours * 1e3:.2f} ms/trial; ratio "
                  f"Optuna RDB / dse = {baseline / ours:.1f}x; target <= 5 ms and >= 10x: "
                  f"{verdict}")


if __name__ == "__main__":
    main()
