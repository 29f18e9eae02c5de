"""The exhaustive search over a whole design space (``dse search``), keeping only the best.

A family's own walk (the paper's balance procedure for XDNA) is its space's
``balance_procedure``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from dse.core.evaluator import EvalContext, Evaluator, score_batch
from dse.core.outcome import Candidate, SearchOutcome
from dse.core.params import batch_len, batch_take
from dse.core.registry import build_evaluator
from dse.core.results import metrics_row

SHORTLIST_FACTOR = 10  # non-vectorised evaluators re-rank top x this of the analytical model


def rank(metrics: dict[str, np.ndarray], objective: str = "tops") -> np.ndarray:
    """Indices from best to worst: higher objective first, ties by fewer L1 bytes (when the
    model reports them)."""
    ties = metrics.get("l1_bytes", np.zeros(len(metrics[objective])))
    return np.lexsort((ties, -metrics[objective]))


def exhaustive(evaluator: Evaluator, ctx: EvalContext, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = (), top: int = 10,
               progress: Callable[[int, int], None] | None = None) -> SearchOutcome:
    """Evaluate every feasible config of the space and return the ``top`` fastest.

    The space is walked one batch at a time (one per combination of the free non-tile
    parameters), keeping only each batch's best, so memory stays bounded. ``progress`` is called
    with (batches done, batches in all) after each batch.
    """
    if not evaluator.capabilities.score:
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
            metrics = evaluator.score(feasible, ctx)
            chosen = rank(metrics)[:top]
            params = ctx.space.decode(batch_take(feasible, chosen))
            for p, i in zip(params, chosen, strict=True):
                row = metrics_row(metrics, int(i))
                best.append((-row["tops"], row.get("l1_bytes", 0), Candidate(p, row)))
            best = sorted(best, key=lambda b: b[:2])[:top]
        if progress is not None:
            progress(done, n_chunks)
    return SearchOutcome(
        n_total=n_total, n_evaluated=n_evaluated, n_feasible=n_feasible,
        elapsed_s=time.perf_counter() - start, top=[b[2] for b in best],
        rejected_by={rule.name: int(c) for rule, c in zip(ctx.space.constraints, rejected,
                                                           strict=True) if c},
    )


def _shortlisted(evaluator: Evaluator, ctx: EvalContext, fix: Mapping[str, Any] | None,
                 free: Iterable[str], top: int,
                 progress: Callable[[int, int], None] | None) -> SearchOutcome:
    """For an evaluator too slow for the whole space: the analytical model ranks everything and
    ``evaluator`` re-ranks the model's best ``top * SHORTLIST_FACTOR``."""
    start = time.perf_counter()
    model = exhaustive(build_evaluator("analytical"), ctx, fix, free, top * SHORTLIST_FACTOR,
                       progress)
    shortlist = ctx.space.encode([c.params for c in model.top])
    metrics = score_batch(evaluator, shortlist, ctx)
    best = rank(metrics)[:top]
    params = ctx.space.decode(batch_take(shortlist, best))
    return SearchOutcome(
        n_total=model.n_total, n_evaluated=model.n_evaluated, n_feasible=model.n_feasible,
        elapsed_s=time.perf_counter() - start, rejected_by=model.rejected_by,
        top=[Candidate(p, metrics_row(metrics, int(i))) for p, i in zip(params, best,
                                                                        strict=True)])
