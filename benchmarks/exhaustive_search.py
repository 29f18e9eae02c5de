"""Size and speed of the exhaustive search, against a one-config-at-a-time baseline.

Run: python benchmarks/exhaustive_search.py [--target xdna2 --dtype int8-int8 --shape 4096x...]

Prints the space size, the time of the vectorised search (best of a few runs) and its configs
per second, then the same model scored one config per call on a sample (the baseline, in the
same process) and the speed-up ratio.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dse.core.params import batch_take
from dse.core.registry import build_context, build_evaluator
from dse.study.search import exhaustive


def main() -> None:
    """Time the vectorised exhaustive search and the one-config-per-call baseline and print both
    rates, their ratio and the verdict against the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="xdna2")
    parser.add_argument("--dtype", default="int8-int8")
    parser.add_argument("--shape", default="4096x4096x4096")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-sample", type=int, default=2000)
    args = parser.parse_args()

    ctx = build_context(args.target, args.dtype, args.shape)
    evaluator = build_evaluator("analytical")
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        outcome = exhaustive(evaluator, ctx, top=10)
        times.append(time.perf_counter() - start)
    best = min(times)
    rate = outcome.n_evaluated / best
    print(f"problem: {args.target} {args.dtype} {args.shape}")
    print(f"parameter box: {outcome.n_total:,} configs; generated {outcome.n_evaluated:,}; "
          f"feasible {outcome.n_feasible:,}")
    print(f"exhaustive search: {best:.3f} s (best of {args.repeats}), "
          f"{rate / 1e6:.2f} M configs/s checked and scored")

    batch, _ = ctx.space.enumerate()
    ok = np.flatnonzero(ctx.space.check(batch).ok)
    sample = np.random.default_rng(0).choice(ok, size=min(args.baseline_sample, len(ok)),
                                             replace=False)
    start = time.perf_counter()
    for i in sample:
        one = batch_take(batch, np.array([i]))
        ctx.space.check(one)
        evaluator.score(one, ctx)
    per_config = (time.perf_counter() - start) / len(sample)
    print(f"baseline (one config per call): {1 / per_config:,.0f} configs/s")
    print(f"ratio vectorised / one-at-a-time: {rate * per_config:.0f}x")
    print(f"target: < 2 s and >= 1 M configs/s -> "
          f"{'met' if best < 2 and rate >= 1e6 else 'NOT met'}")
    print(f"best: {outcome.top[0].params} -> {outcome.top[0].metrics['tops']:.2f} TOPS")


if __name__ == "__main__":
    main()
