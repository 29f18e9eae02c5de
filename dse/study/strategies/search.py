"""The exhaustive search over a whole design space (``dse search``), keeping only the best.

A family's own walk (the paper's balance procedure for XDNA) is its record's ``balance``
(:class:`dse.core.family_record.BalanceProcedure`).
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
from dse.study.strategies.exact import TopK, branch_and_bound, rank

SHORTLIST_FACTOR = 10  # non-vectorised evaluators re-rank top x this of the analytical model


def exhaustive(evaluator: Evaluator, ctx: EvalContext, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = (), top: int = 10,
               progress: Callable[[int, int], None] | None = None,
               prune: bool = True) -> SearchOutcome:
    """The ``top`` fastest feasible configs of the space, exactly.

    With the analytical model and a space that offers a search tree, a branch-and-bound
    (:func:`dse.study.strategies.exact.branch_and_bound`) scores only the sub-spaces whose
    bound can reach the top (``prune=False`` scores every config, for comparison). Otherwise
    every config is scored, one batch at a time (one per combination of the free non-tile
    parameters), keeping only the best, so memory stays bounded. ``progress`` is called with
    (done, in all).
    """
    if not evaluator.capabilities.score:
        return _shortlisted(evaluator, ctx, fix, free, top, progress)
    tree = ctx.space.search_tree(fix, free) if prune and evaluator.name == "analytical" else None
    if tree is not None:
        return branch_and_bound(tree, evaluator, ctx, top, progress)
    return _scored(evaluator, ctx, fix, free, top, progress)


def _scored(evaluator: Evaluator, ctx: EvalContext, fix: Mapping[str, Any] | None,
            free: Iterable[str], top: int,
            progress: Callable[[int, int], None] | None) -> SearchOutcome:
    """Every feasible config scored, chunk by chunk."""
    start = time.perf_counter()
    free = list(free)
    n_chunks = ctx.space.n_chunks(free)
    n_total = n_evaluated = n_feasible = 0
    rejected = np.zeros(len(ctx.space.constraints), dtype=np.int64)
    best = TopK(top)
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
            best.add(feasible, evaluator.score(feasible, ctx))
        if progress is not None:
            progress(done, n_chunks)
    return SearchOutcome(
        n_total=n_total, n_evaluated=n_evaluated, n_feasible=n_feasible,
        elapsed_s=time.perf_counter() - start, top=best.candidates(ctx.space.decode),
        rejected_by={rule.name: int(c) for rule, c in zip(ctx.space.constraints, rejected,
                                                           strict=True) if c},
        exact=True)


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
    best = rank(metrics, shortlist)[:top]
    params = ctx.space.decode(batch_take(shortlist, best))
    return SearchOutcome(
        n_total=model.n_total, n_evaluated=model.n_evaluated, n_feasible=model.n_feasible,
        elapsed_s=time.perf_counter() - start, rejected_by=model.rejected_by,
        top=[Candidate(p, metrics_row(metrics, int(i))) for p, i in zip(params, best,
                                                                        strict=True)])
