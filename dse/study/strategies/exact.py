"""Exact search with pruning: a best-first branch-and-bound over a space's search tree.

Each level's nodes are visited best bound first, in slices that grow (one node, then 4, 16,
... up to :data:`MAX_SLICE`) so that the first configs scored are likely among the best and the
k-th best rises early; a node whose bound is below the k-th best config found so far is dropped
with everything below it. The configs reached are checked by the space's rules and scored by
the evaluator like any other, and the top is kept in the same order brute force uses
(:func:`rank`), so the result is exactly brute force's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from dse.core.evaluator import EvalContext, Evaluator
from dse.core.outcome import Candidate, SearchOutcome
from dse.core.params import ConfigBatch, batch_concat, batch_len, batch_take
from dse.core.results import metrics_row
from dse.core.tree import Nodes, SearchTree

GROWTH = 4
MAX_SLICE = 16_384
# Bounds are computed in floating point like the model they bound: a node is dropped only when
# its bound is below the k-th best by more than rounding could explain.
SLACK = 1e-9


def rank(metrics: dict[str, np.ndarray], batch: ConfigBatch | None = None,
         objective: str = "tops") -> np.ndarray:
    """Indices from best to worst: higher objective first, ties by fewer L1 bytes (when the
    model reports them), then by the parameters' codes in the space's order, so the order does
    not depend on how the space was walked."""
    values = metrics[objective]
    keys = [batch[name] for name in reversed(list(batch))] if batch is not None else []
    keys += [metrics.get("l1_bytes", np.zeros(len(values))), -values]
    return np.lexsort(keys)


class TopK:
    """The ``k`` best configs seen so far with their metrics, in :func:`rank`'s order."""

    def __init__(self, k: int, objective: str = "tops") -> None:
        self.k, self.objective = k, objective
        self.batch: ConfigBatch = {}
        self.metrics: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return batch_len(self.batch) if self.batch else 0

    @property
    def threshold(self) -> float:
        """The objective of the k-th best (-inf until k configs are held)."""
        if len(self) < self.k:
            return -np.inf
        return float(self.metrics[self.objective][self.k - 1])

    def add(self, batch: ConfigBatch, metrics: dict[str, np.ndarray]) -> None:
        """Merge scored configs into the top."""
        if not batch_len(batch):
            return
        if self.batch:
            names = list(self.batch)
            batch = batch_concat([self.batch, batch], names)
            metrics = {m: np.concatenate([self.metrics[m], metrics[m]]) for m in self.metrics}
        keep = rank(metrics, batch, self.objective)[:self.k]
        self.batch = batch_take(batch, keep)
        self.metrics = {m: v[keep] for m, v in metrics.items()}

    def candidates(self, decode: Callable[[ConfigBatch], list[dict]]) -> list[Candidate]:
        """The top as parameter dicts with their metrics, best first."""
        if not self.batch:
            return []
        return [Candidate(p, metrics_row(self.metrics, i))
                for i, p in enumerate(decode(self.batch))]


class _Search:
    """One branch-and-bound run: the top so far and the counts the outcome reports."""

    def __init__(self, tree: SearchTree, evaluator: Evaluator, ctx: EvalContext, top: int,
                 progress: Callable[[int, int], None] | None) -> None:
        self.tree, self.evaluator, self.ctx, self.progress = tree, evaluator, ctx, progress
        self.best = TopK(top, tree.objective)
        self.pruned = dict.fromkeys(tree.levels, 0)
        self.generated = self.feasible = 0
        self.rejected = np.zeros(len(ctx.space.constraints), dtype=np.int64)

    def cutoff(self) -> float:
        threshold = self.best.threshold
        return threshold - abs(threshold) * SLACK

    def visit(self, level: int, nodes: Nodes) -> None:
        """Expand ``nodes`` best bound first, dropping those that cannot reach the top."""
        nodes = nodes.take(np.argsort(-nodes.bound, kind="stable"))
        name, start, size = self.tree.levels[level], 0, 1
        while start < len(nodes):
            part = nodes.take(np.arange(start, min(start + size, len(nodes))))
            keep = part.bound >= self.cutoff()
            if not keep[0]:  # sorted: every node left is below the top too
                self.pruned[name] += len(nodes) - start
                break
            self.pruned[name] += int((~keep).sum())
            children = self.tree.expand(level, part.take(np.flatnonzero(keep)))
            if isinstance(children, Nodes):
                self.visit(level + 1, children)
            else:
                self.score(children)
            start, size = start + size, min(size * GROWTH, MAX_SLICE)
            if level == 0 and self.progress is not None:
                self.progress(min(start, len(nodes)), len(nodes))

    def score(self, batch: ConfigBatch) -> None:
        """Check ``batch`` by the space's rules and add its feasible configs to the top."""
        self.generated += batch_len(batch)
        feasibility = self.ctx.space.check(batch)
        self.rejected += np.bincount(feasibility.first_failed[~feasibility.ok],
                                     minlength=len(self.rejected))
        ok = np.flatnonzero(feasibility.ok)
        self.feasible += len(ok)
        if len(ok):
            feasible = batch_take(batch, ok)
            self.best.add(feasible, self.evaluator.score(feasible, self.ctx))


def branch_and_bound(tree: SearchTree, evaluator: Evaluator, ctx: EvalContext, top: int = 10,
                     progress: Callable[[int, int], None] | None = None) -> SearchOutcome:
    """The exact ``top`` of the space ``tree`` splits, scored by ``evaluator`` (the model the
    tree's bounds hold for), visiting only the sub-spaces that can reach it."""
    start = time.perf_counter()
    search = _Search(tree, evaluator, ctx, top, progress)
    roots = tree.roots()
    if len(roots):
        search.visit(0, roots)
    if progress is not None:  # the roots pruned unvisited are done too
        progress(len(roots), len(roots))
    if search.best.batch:
        search.score(tree.shadows(search.best.batch))
    space = ctx.space
    return SearchOutcome(
        n_total=tree.box, n_evaluated=search.generated, n_feasible=search.feasible,
        elapsed_s=time.perf_counter() - start, top=search.best.candidates(space.decode),
        rejected_by={rule.name: int(c) for rule, c in zip(space.constraints, search.rejected,
                                                           strict=True) if c},
        n_scored=search.feasible, pruned=search.pruned, dominated=dict(tree.dominated),
        exact=True)
