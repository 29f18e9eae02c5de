"""Speed of the systolic family's rungs: the analytical model over a whole space, and the
cycle-level simulator per config, against baselines run in the same process.

Run: python benchmarks/systolic_speed.py [--target tpu-v1 --dtype int8-int32 --shape 4096x...]

Prints, for the exhaustive search (enumeration, rules and model): the parameter box, the
configs generated (tiles along the array's dims are whole folds by construction) and feasible,
the box decided per second (goal >= 10 M configs/s) and the feasible configs scored per second;
the same model one config per call (baseline) and the ratio; then the simulator rung on the
model's best configs, per config, and the ratio of the two rungs. It fails loudly when the
enumeration by construction misses a feasible config that the full box checked by the rules
holds, or when the simulator and the model disagree on the compute cycles of a stall-free fold.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from dse.core.params import ConfigBatch, batch_concat, batch_len, batch_take
from dse.core.registry import build_context, build_evaluator
from dse.study.strategies.search import exhaustive
from evaluators.analytical.systolic_gemm import score
from evaluators.systolic_sim.fold_schedule import ArraySetup, simulate_gemm

GOAL_PER_S = 10e6


def _rows(batch: ConfigBatch) -> set[tuple[int, ...]]:
    names = sorted(batch)
    return set(zip(*(batch[n].tolist() for n in names), strict=True))


def check_enumeration(ctx) -> int:
    """The feasible configs of the pruned chunks equal those of the whole box under the rules;
    returns how many there are."""
    space = ctx.space
    pruned = [batch_take(b, np.flatnonzero(space.check(b).ok)) for b, _ in space.chunks()]
    axes = space.axes({}, ())
    names = list(space.params())
    grid = np.array(np.meshgrid(*(axes[n] for n in names), indexing="ij"),
                    dtype=np.int64).reshape(len(names), -1)
    box = {n: grid[i] for i, n in enumerate(names)}
    brute = batch_take(box, np.flatnonzero(space.check(box).ok))
    ours = batch_concat(pruned, names)
    if _rows(ours) != _rows(brute):
        sys.exit(f"FAIL: the enumeration by construction holds {batch_len(ours):,} feasible "
                 f"configs, the whole box {batch_len(brute):,}")
    return batch_len(brute)


def check_fold_cycles() -> None:
    """A stall-free untiled GEMM: the model counts one cycle more than SCALE-Sim's schedule,
    whose compute cycles are the index of the last cycle (from 0)."""
    for flow in ("os", "ws", "is"):
        ctx = build_context("edge-npu", "int8-int8", "100x300x50")
        one = ctx.space.encode([ctx.space.resolve({
            "t_m": 100, "t_k": 300, "t_n": 50, "dataflow": flow, "rows": 16, "cols": 4,
            "ifmap_kb": 4096, "filter_kb": 4096, "ofmap_kb": 4096})])
        ours = float(score(one, ctx.target, ctx.workload)["compute_cycles"][0])
        theirs = simulate_gemm(ArraySetup(16, 4, flow, 4096, 4096, 4096), 100, 50, 300)
        if ours != theirs.compute_cycles + 1:
            sys.exit(f"FAIL: {flow}: the model counts {ours:.0f} compute cycles, the schedule "
                     f"{theirs.compute_cycles} (+1)")


def main() -> None:
    """Time both rungs and their baselines; print rates, ratios and the verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="tpu-v1")
    parser.add_argument("--dtype", default="int8-int32")
    parser.add_argument("--shape", default="4096x4096x4096")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline-sample", type=int, default=1000)
    parser.add_argument("--simulated", type=int, default=10, help="best configs simulated")
    args = parser.parse_args()

    ctx = build_context(args.target, args.dtype, args.shape)
    feasible = check_enumeration(ctx)
    check_fold_cycles()
    analytical = build_evaluator("analytical")
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        outcome = exhaustive(analytical, ctx, top=args.simulated)
        times.append(time.perf_counter() - start)
    best = min(times)
    assert outcome.n_feasible == feasible
    batch, _ = ctx.space.enumerate()
    ok = batch_take(batch, np.flatnonzero(ctx.space.check(batch).ok))
    start = time.perf_counter()
    score(ok, ctx.target, ctx.workload)
    model_s = time.perf_counter() - start
    box_rate = outcome.n_total / best
    print(f"problem: {args.target} {args.dtype} {args.shape}")
    print(f"parameter box: {outcome.n_total:,} configs; generated {outcome.n_evaluated:,} "
          f"(whole folds by construction, checked against the full box); feasible "
          f"{outcome.n_feasible:,}")
    print(f"exhaustive search: {best * 1e3:.1f} ms (best of {args.repeats}): "
          f"{box_rate / 1e6:.1f} M configs of the box decided per second; the model alone "
          f"scores {batch_len(ok) / model_s / 1e6:.2f} M feasible configs/s")

    rng = np.random.default_rng(0)
    sample = rng.choice(batch_len(ok), size=min(args.baseline_sample, batch_len(ok)),
                        replace=False)
    start = time.perf_counter()
    for i in sample:
        score(batch_take(ok, np.array([i])), ctx.target, ctx.workload)
    per_config = (time.perf_counter() - start) / len(sample)
    print(f"baseline (the model one config per call): {1 / per_config:,.0f} configs/s; "
          f"vectorised / one at a time: {batch_len(ok) / model_s * per_config:.0f}x")

    simulator = build_evaluator("systolic-sim")
    top = ctx.space.encode([c.params for c in outcome.top])
    start = time.perf_counter()
    simulator.evaluate(top, ctx)
    sim_per_config = (time.perf_counter() - start) / batch_len(top)
    print(f"simulator rung on the {batch_len(top)} best: {sim_per_config * 1e3:.1f} ms a "
          f"config; analytical / simulator: {sim_per_config * batch_len(ok) / model_s:,.0f}x "
          "per config")
    verdict = "met" if box_rate >= GOAL_PER_S else "NOT met"
    print(f"goal >= {GOAL_PER_S / 1e6:.0f} M configs/s over the box: {verdict}")


if __name__ == "__main__":
    main()
