"""Simulator speed on XDNA2 GEMMs, against the full (one actor per core and stream) simulation.

Run: python benchmarks/simulator_speed.py

Targets: a 4096^3 GEMM in <= 1 s and 8192^3 in <= 4 s. For each shape the best configuration of
the analytical search is simulated (reduced, with period extrapolation, the default), and so is a
small-tile configuration with many kernel calls per round. The baseline, measured in the same
run, is the full simulation of every core and stream over every round.
"""

from __future__ import annotations

import time

from dse.core.registry import build_context, build_evaluator
from dse.study.strategies.search import exhaustive
from evaluators.simulator.gemm_sim import Plan, make_plan
from evaluators.simulator.run import simulate

CASES = [("4096x4096x4096", 1.0), ("8192x8192x8192", 4.0)]
SMALL_TILES = {"m_ct": 32, "k_ct": 32, "n_ct": 32, "k_mt": 256}


def timed(plan: Plan, **kw) -> tuple[float, object]:
    """Seconds :func:`simulate` takes on ``plan`` (``kw`` passed on), and its outcome."""
    start = time.perf_counter()
    outcome = simulate(plan, **kw)
    return time.perf_counter() - start, outcome


def main() -> None:
    """Time the default simulation of each case against its target, then the full simulation of a
    2048^3 GEMM against the default one."""
    analytical = build_evaluator("analytical")
    for shape, limit in CASES:
        ctx = build_context("xdna2", "int8-int8", shape)
        best = exhaustive(analytical, ctx, top=1).top[0].params
        for label, params in (("best config", best),
                              ("small tiles", {**best, **SMALL_TILES})):
            batch = ctx.space.encode([params])
            assert ctx.space.check(batch).ok[0], ctx.space.explain(batch, 0)
            plan = make_plan(batch, ctx.target, ctx.workload)
            seconds, outcome = timed(plan)
            verdict = "met" if seconds <= limit else "NOT met"
            print(f"{shape} {label} ({params['m_ct']}x{params['k_ct']}x{params['n_ct']}, "
                  f"{plan.rounds} rounds x {plan.calls} calls): {seconds:.3f} s, "
                  f"{outcome.events:,} events, {outcome.rounds_simulated} rounds simulated; "
                  f"target <= {limit:g} s: {verdict}")
    ctx = build_context("xdna2", "int8-int8", "2048x2048x2048")
    best = exhaustive(analytical, ctx, top=1).top[0].params
    plan = make_plan(ctx.space.encode([best]), ctx.target, ctx.workload)
    reduced_s, reduced = timed(plan)
    full_s, full = timed(plan, full=True)
    print(f"2048^3 best config: reduced {reduced_s:.3f} s vs full simulation {full_s:.3f} s "
          f"({full_s / reduced_s:.0f}x); same end time: "
          f"{abs(reduced.end_s / full.end_s - 1) < 1e-9}")


if __name__ == "__main__":
    main()
