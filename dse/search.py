"""Search strategies over a whole design space: exhaustive, and the paper's balance procedure."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dse.errors import UsageError
from evaluators.analytical import metrics_row
from evaluators.base import EvalContext
from search_spaces.base import ConfigBatch, batch_take


@dataclass(frozen=True)
class Candidate:
    params: dict[str, Any]
    metrics: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"params": self.params, "metrics": self.metrics}


@dataclass(frozen=True)
class SearchOutcome:
    """Result of a search: sizes, time and the best configurations."""

    n_total: int
    n_evaluated: int
    n_feasible: int
    elapsed_s: float
    top: list[Candidate]
    rejected_by: dict[str, int] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n_total": self.n_total, "n_evaluated": self.n_evaluated,
            "n_feasible": self.n_feasible, "elapsed_s": self.elapsed_s,
            "rejected_by": self.rejected_by, "top": [c.to_dict() for c in self.top],
        }
        if self.steps:
            out["steps"] = self.steps
        return out


def _vector_score(evaluator: Any, batch: ConfigBatch, ctx: EvalContext) -> dict[str, np.ndarray]:
    if not hasattr(evaluator, "score"):
        raise UsageError(f"evaluator {evaluator.name!r} cannot score a whole space at once; "
                         "exhaustive search needs a vectorised evaluator such as 'analytical'")
    return evaluator.score(batch, ctx)


def rank(metrics: dict[str, np.ndarray], objective: str = "tops") -> np.ndarray:
    """Indices from best to worst: higher objective first, ties by fewer L1 bytes."""
    return np.lexsort((metrics["l1_bytes"], -metrics[objective]))


def exhaustive(evaluator: Any, ctx: EvalContext, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = (), top: int = 10) -> SearchOutcome:
    """Evaluate every feasible config of the space and return the ``top`` fastest."""
    start = time.perf_counter()
    batch, n_total = ctx.space.enumerate(fix=fix, free=free)
    feasibility = ctx.space.check(batch)
    ok = np.flatnonzero(feasibility.ok)
    feasible = batch_take(batch, ok)
    metrics = _vector_score(evaluator, feasible, ctx) if len(ok) else {}
    best = rank(metrics)[:top] if len(ok) else np.array([], dtype=np.int64)
    params = ctx.space.decode(batch_take(feasible, best))
    elapsed = time.perf_counter() - start
    counts = np.bincount(feasibility.first_failed[~feasibility.ok],
                         minlength=len(ctx.space.constraints))
    rejected = {rule.name: int(c) for rule, c in zip(ctx.space.constraints, counts, strict=True)
                if c}
    return SearchOutcome(
        n_total=n_total, n_evaluated=len(feasibility.ok), n_feasible=len(ok), elapsed_s=elapsed,
        top=[Candidate(p, metrics_row(metrics, int(i))) for p, i in zip(params, best, strict=True)],
        rejected_by=rejected,
    )
