"""Small helpers shared by tests."""

from __future__ import annotations

from typing import Any

from dse.core.params import batch_take
from dse.core.registry import build_context


def one_config(target: str, dtype: str, shape: str, b_layout: str = "col", **params: Any):
    """(ctx, batch) for a single resolved config."""
    ctx = build_context(target, dtype, shape, b_layout)
    batch = ctx.space.encode([ctx.space.resolve(params)])
    return ctx, batch


def score_one(target: str, dtype: str, shape: str, b_layout: str = "col", **params: Any) -> dict:
    """Analytical metrics of one config, asserting it is feasible."""
    from dse.core.results import metrics_row
    from evaluators.analytical import AnalyticalEvaluator

    ctx, batch = one_config(target, dtype, shape, b_layout, **params)
    assert ctx.space.check(batch).ok[0], ctx.space.explain(batch, 0)
    return metrics_row(AnalyticalEvaluator().score(batch, ctx), 0)


def first_rule(ctx, batch) -> str | None:
    index = int(ctx.space.check(batch).first_failed[0])
    return None if index < 0 else ctx.space.constraints[index].name


__all__ = ["batch_take", "first_rule", "one_config", "score_one"]
