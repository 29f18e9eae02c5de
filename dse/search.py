"""Search strategies over a whole design space: exhaustive, and the paper's balance procedure."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dse.errors import UsageError
from evaluators.analytical import metrics_row
from evaluators.base import EvalContext
from search_spaces.base import ConfigBatch, batch_len, batch_take


@dataclass(frozen=True)
class Candidate:
    """One configuration a search found: its parameters and its metrics."""

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


SHORTLIST_FACTOR = 10  # non-vectorised evaluators re-rank top x this of the analytical model


def vector_score(evaluator: Any, batch: ConfigBatch, ctx: EvalContext) -> dict[str, np.ndarray]:
    """Metric arrays of feasible configs: vectorised when the evaluator can, else one by one."""
    if hasattr(evaluator, "score"):
        return evaluator.score(batch, ctx)
    results = evaluator.evaluate(batch, ctx)
    failed = [r for r in results if not r.ok]
    if failed:
        raise UsageError(f"evaluator {evaluator.name!r} failed on {failed[0].params}: "
                         f"{failed[0].reason}")
    return {name: np.array([r.metrics[name] for r in results]) for name in results[0].metrics}


def rank(metrics: dict[str, np.ndarray], objective: str = "tops") -> np.ndarray:
    """Indices from best to worst: higher objective first, ties by fewer L1 bytes."""
    return np.lexsort((metrics["l1_bytes"], -metrics[objective]))


def exhaustive(evaluator: Any, ctx: EvalContext, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = (), top: int = 10,
               progress: Callable[[int, int], None] | None = None) -> SearchOutcome:
    """Evaluate every feasible config of the space and return the ``top`` fastest.

    The space is walked one batch at a time (one per combination of the free non-tile
    parameters), keeping only each batch's best, so memory stays bounded. ``progress`` is called
    with (batches done, batches in all) after each batch.
    """
    if not hasattr(evaluator, "score"):
        return _shortlisted(evaluator, ctx, fix, free, top, progress)
    start = time.perf_counter()
    free = list(free)
    n_chunks = ctx.space.n_chunks(free)
    n_total = n_evaluated = n_feasible = 0
    rejected = np.zeros(len(ctx.space.constraints), dtype=np.int64)
    best: list[tuple[float, int, Candidate]] = []
    for done, (batch, box) in enumerate(ctx.space.chunks(fix=fix, free=free), start=1):
        n_total += box
        n_evaluated += batch_len(batch)
        feasibility = ctx.space.check(batch)
        rejected += np.bincount(feasibility.first_failed[~feasibility.ok],
                                minlength=len(rejected))
        ok = np.flatnonzero(feasibility.ok)
        n_feasible += len(ok)
        if len(ok):
            feasible = batch_take(batch, ok)
            metrics = vector_score(evaluator, feasible, ctx)
            chosen = rank(metrics)[:top]
            params = ctx.space.decode(batch_take(feasible, chosen))
            for p, i in zip(params, chosen, strict=True):
                row = metrics_row(metrics, int(i))
                best.append((-row["tops"], row["l1_bytes"], Candidate(p, row)))
            best = sorted(best, key=lambda b: b[:2])[:top]
        if progress is not None:
            progress(done, n_chunks)
    return SearchOutcome(
        n_total=n_total, n_evaluated=n_evaluated, n_feasible=n_feasible,
        elapsed_s=time.perf_counter() - start, top=[b[2] for b in best],
        rejected_by={rule.name: int(c) for rule, c in zip(ctx.space.constraints, rejected,
                                                           strict=True) if c},
    )


def _shortlisted(evaluator: Any, ctx: EvalContext, fix: Mapping[str, Any] | None,
                 free: Iterable[str], top: int,
                 progress: Callable[[int, int], None] | None) -> SearchOutcome:
    """For an evaluator too slow for the whole space: the analytical model ranks everything and
    ``evaluator`` re-ranks the model's best ``top * SHORTLIST_FACTOR``."""
    from evaluators.analytical import AnalyticalEvaluator

    start = time.perf_counter()
    model = exhaustive(AnalyticalEvaluator(), ctx, fix, free, top * SHORTLIST_FACTOR, progress)
    shortlist = ctx.space.encode([c.params for c in model.top])
    metrics = vector_score(evaluator, shortlist, ctx)
    best = rank(metrics)[:top]
    params = ctx.space.decode(batch_take(shortlist, best))
    return SearchOutcome(
        n_total=model.n_total, n_evaluated=model.n_evaluated, n_feasible=model.n_feasible,
        elapsed_s=time.perf_counter() - start, rejected_by=model.rejected_by,
        top=[Candidate(p, metrics_row(metrics, int(i))) for p, i in zip(params, best,
                                                                        strict=True)])
