"""Trials a sampler needs to come within 1 % of the exhaustive optimum (median over seeds).

Run: python benchmarks/sampler_efficiency.py [--samplers tpe random] [--seeds 5] [--trials 400]

Each run is a real study (runner, SQLite store in a temporary folder) on the xdna2 int8-int8
4096^3 space with the analytical evaluator; the optimum comes from the exhaustive search.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import pandas as pd

from dse import load_trials
from dse.core.registry import build_context, build_evaluator
from dse.study.runner import run_study
from dse.study.search import exhaustive
from dse.study.spec import study_from_dict


def trials_to_reach(frame: pd.DataFrame, goal: float) -> int | None:
    """Trials a study (its ``load_trials`` frame) took to reach an ok result of at least ``goal``
    TOPS, or None if it never did."""
    reached = frame[(frame["status"] == "ok") & (frame["tops"] >= goal)]
    return int(reached["number"].min()) + 1 if len(reached) else None


def main() -> None:
    """Find the exhaustive optimum, run each sampler once per seed and print the trials each run
    needed, their median per sampler and the random / tpe ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samplers", nargs="+", default=["tpe", "random"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--shape", default="4096x4096x4096")
    args = parser.parse_args()

    ctx = build_context("xdna2", "int8-int8", args.shape)
    optimum = exhaustive(build_evaluator("analytical"), ctx, top=1).top[0].metrics["tops"]
    goal = 0.99 * optimum
    print(f"xdna2 int8-int8 {args.shape}: exhaustive optimum {optimum:.3f} TOPS, goal "
          f">= {goal:.3f} (within 1 %)")
    medians = {}
    with tempfile.TemporaryDirectory() as tmp:
        for sampler in args.samplers:
            needed = []
            for seed in range(args.seeds):
                spec = study_from_dict({
                    "name": f"{sampler}-{seed}", "target": "xdna2",
                    "workload": {"shape": args.shape, "dtype": "int8-int8"},
                    "sampler": sampler, "budget": {"trials": args.trials}, "seed": seed})
                storage = str(Path(tmp) / f"{sampler}-{seed}.db")
                run_study(spec, storage)
                needed.append(trials_to_reach(load_trials(storage, spec.name), goal))
            reached = [n for n in needed if n is not None]
            shown = ", ".join("-" if n is None else str(n) for n in needed)
            median = statistics.median([n if n is not None else args.trials + 1
                                        for n in needed])
            medians[sampler] = median
            print(f"{sampler:8s} trials to reach the goal per seed: {shown}; median "
                  f"{median:g}{'' if len(reached) == len(needed) else ' (- = not within budget)'}")
    if "tpe" in medians:
        print(f"target: default sampler (tpe) <= 200 trials -> "
              f"{'met' if medians['tpe'] <= 200 else 'NOT met'}")
    if {"tpe", "random"} <= set(medians):
        bound = ">= " if medians["random"] > args.trials else ""
        print(f"ratio random / tpe: {bound}{medians['random'] / medians['tpe']:.2f}")


if __name__ == "__main__":
    main()
