"""MergeBatch against IterBatch on Ascend: the rules' pick against the model's search.

Run: python benchmarks/ascend_arbitration.py

For every shape of a small grid where both branches are legal, the rules' pick (MergeBatch when
K is truncated, k_L1 = K; the design's full closed form, which also asks b_core > b0 (T_comp +
T_write) / T_cmd, is printed beside it) is set beside the branch whose best config the analytical
model scores faster (an exhaustive search with the branch fixed),
with the ratio of the two branches' best latencies; it prints how often they agree and each
shape where they do not. It fails loudly when no shape of the grid has both branches legal
(the grid would test nothing).
"""

from __future__ import annotations

import itertools
import sys

import numpy as np

from dse.core.registry import build_context, build_evaluator
from dse.study.strategies.search import exhaustive
from search_spaces.ascend_bmm.rules import classify

GRID = {"B": (64, 256, 1024), "M": (16, 32, 64), "K": (64, 256, 1024), "N": (16, 64, 128)}


def best_latency(evaluator, ctx, branch: str) -> float:
    """The model's best latency with the branch fixed (inf when none is feasible)."""
    outcome = exhaustive(evaluator, ctx, fix={"branch": branch}, top=1)
    return outcome.top[0].metrics["latency_s"] if outcome.top else float("inf")


def main() -> None:
    """Compare the two on the grid and print the agreement."""
    evaluator = build_evaluator("analytical")
    rows = []
    for b, m, k, n in itertools.product(*GRID.values()):
        ctx = build_context("ascend-950pr", "bf16", f"{b}x{m}x{k}x{n}")
        c = classify(ctx.target, *(np.array([v]) for v in (b, b, m, k, n)), 2, 2)
        if not (c["merge_ok"][0] and c["iter_ok"][0]):
            continue
        ratio = best_latency(evaluator, ctx, "merge_batch") / best_latency(evaluator, ctx,
                                                                           "iter_batch")
        rows.append((f"{b}x{m}x{k}x{n}", bool(c["branch"][0] == 3), ratio < 1, ratio,
                     bool(c["merge_better"][0])))
    if not rows:
        sys.exit("FAIL: no shape of the grid has both MergeBatch and IterBatch legal")
    agree = sum(rule == model for _, rule, model, _, _ in rows)
    closed = sum(form == model for _, _, model, _, form in rows)
    print(f"{agree}/{len(rows)} shapes: the rules pick the branch the model scores faster "
          f"(the closed form with T_cmd: {closed}/{len(rows)})")
    for shape, rule, _, ratio, form in rows:
        if rule != (ratio < 1) or form != (ratio < 1):
            print(f"  {shape}: rules {'merge' if rule else 'iter'}, closed form "
                  f"{'merge' if form else 'iter'}, model merge/iter latency {ratio:.3f}")


if __name__ == "__main__":
    main()
