"""The deployment question as data: the shapes of a mix, how often each runs, the candidate
kernels (configs), every candidate's throughput on every shape, and each shape's own optimum.

Candidates are what the study evaluated (each shape's best few) and, where the study's evaluator
scores cheaply (the analytical models), each shape's exact best few from the exhaustive search,
which also gives the per-shape optimum exactly. Every candidate is then scored on every shape
with the study's evaluator: a config the shape's rules refuse cannot serve it (throughput 0).
With an evaluator that cannot score cheaply (a simulator, hardware), only the pairs the study
measured with it count (a cheaper rung's scores of a ladder do not), and :func:`measure_across`
measures the pairs it lacks.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dse.core.errors import UsageError
from dse.core.evaluator import EvalContext, Evaluator, score_batch
from dse.core.params import batch_take
from dse.core.registry import (
    build_evaluator,
    load_target,
    search_space_class,
    workload_from_dict,
)
from dse.core.workload import Workload
from dse.storage.frames import best_trials, most_faithful
from dse.storage.store import ResultStore
from dse.study.strategies.search import exhaustive

DEFAULT_CANDIDATES = 8  # best configs a shape offers as candidates


@dataclass
class CoverProblem:
    """``tops[i, j]``: candidate ``j``'s throughput on shape ``i`` (0: it cannot run it);
    ``weights[i]``: calls of shape ``i`` a pass of the mix; ``ops[i]``: its operations a call;
    ``optimum[i]``: the best throughput of any config on it (``exact``: proven by the
    exhaustive search, else the best the study found)."""

    study: str
    target: str
    evaluator: dict[str, Any]
    space: dict[str, Any]
    workloads: list[Workload]
    weights: np.ndarray
    candidates: list[dict[str, Any]]
    tops: np.ndarray
    optimum: np.ndarray
    bound: list[str]  # each shape's optimum: compute- or memory-bound ("" if unknown)
    exact: bool
    params: list[str] = field(default_factory=list)  # the parameters that identify a config

    @property
    def labels(self) -> list[str]:
        return [w.shape for w in self.workloads]

    @property
    def ops(self) -> np.ndarray:
        return np.array([2.0 * w.macs for w in self.workloads])

    def seconds(self) -> np.ndarray:
        """Seconds each candidate spends on each shape in a pass of the mix (inf where it
        cannot run it)."""
        with np.errstate(divide="ignore"):
            work = (self.weights * self.ops)[:, None] / 1e12
            return np.where(self.tops > 0, work / np.where(self.tops > 0, self.tops, 1), np.inf)

    def optimal_seconds(self) -> np.ndarray:
        """Seconds a pass spends on each shape at its own optimum."""
        return self.weights * self.ops / 1e12 / self.optimum


def study_problem(store: ResultStore, study: str, per_shape: int = DEFAULT_CANDIDATES,
                  exact: bool = True) -> CoverProblem:
    """The cover problem of a stored study (its weights, if it has none: once each)."""
    spec = store.study_spec(study)
    target = load_target(spec["target"])
    space_spec = spec.get("space", {})
    contexts = [_context(target, workload_from_dict(body), space_spec)
                for body in spec["workloads"]]
    kinds = {(ctx.workload.dtype.name, ctx.workload.b_layout) for ctx in contexts}
    if len(kinds) > 1:
        raise UsageError(f"study {study!r} mixes dtypes or B layouts "
                         f"({', '.join(sorted(f'{d} (B {b})' for d, b in kinds))}): a dispatch "
                         "table serves one of each; cover a study of one")
    weights = np.array(spec.get("weights") or [1.0] * len(contexts), dtype=float)
    evaluator = build_evaluator(spec["evaluator"]["name"], spec["evaluator"].get("options"))
    frame = store.load_trials(study)
    params = list(frame.attrs.get("params", []))
    found = _study_candidates(frame, contexts, params, per_shape)
    searched = exact and evaluator.capabilities.score
    if searched:
        best, bound, tops_of = _searched(evaluator, contexts, space_spec, per_shape)
        found = [exact_best + of_study for exact_best, of_study in zip(tops_of, found,
                                                                       strict=True)]
    candidates = _unique([config for configs in found for config in configs])
    tops = np.stack([_scores(evaluator, ctx, candidates) if evaluator.capabilities.score
                     else _measured(frame, ctx, candidates, params, evaluator.name)
                     for ctx in contexts])
    if not searched:
        best, bound = _study_best(frame, contexts)
    optimum = np.maximum(best, tops.max(axis=1, initial=0.0))
    return CoverProblem(study, spec["target"], dict(spec["evaluator"]), dict(space_spec),
                        [ctx.workload for ctx in contexts], weights, candidates, tops, optimum,
                        bound, searched, params or list(contexts[0].space.params()))


def problem_for(target: str, evaluator: Evaluator, evaluator_spec: dict[str, Any],
                space_spec: dict[str, Any], workloads: list[Workload], weights: np.ndarray,
                candidates: list[dict[str, Any]], per_shape: int = 1) -> CoverProblem:
    """A cover problem of given shapes and candidates (a dispatch table audited on shapes it
    was not chosen for): each shape's optimum from the exhaustive search."""
    tgt = load_target(target)
    contexts = [_context(tgt, w, space_spec) for w in workloads]
    best, bound, _ = _searched(evaluator, contexts, space_spec, per_shape)
    tops = np.stack([_scores(evaluator, ctx, candidates) for ctx in contexts])
    return CoverProblem("", target, evaluator_spec, space_spec, workloads, weights,
                        candidates, tops, np.maximum(best, tops.max(axis=1, initial=0.0)),
                        bound, True, list(contexts[0].space.params()))


def _searched(evaluator: Evaluator, contexts: list[EvalContext], space_spec: dict[str, Any],
              top: int) -> tuple[np.ndarray, list[str], list[list[dict[str, Any]]]]:
    """Each shape's optimum by the exhaustive search (in the study's space), what bounds it, and
    its ``top`` best configs."""
    best, bound, configs = np.zeros(len(contexts)), [""] * len(contexts), []
    for i, ctx in enumerate(contexts):
        outcome = exhaustive(evaluator, ctx, fix=space_spec.get("fix") or {},
                             free=space_spec.get("free") or (), top=top)
        configs.append([c.params for c in outcome.top])
        if outcome.top:
            best[i] = outcome.top[0].metrics["tops"]
            bound[i] = str(outcome.top[0].metrics.get("bound", ""))
    return best, bound, configs


def _context(target: Any, workload: Workload, space_spec: dict[str, Any]) -> EvalContext:
    space = search_space_class(target.space)(
        target, workload, extra_constraints=tuple(space_spec.get("constraints") or ()))
    return EvalContext(target, workload, space)


def _study_candidates(frame: pd.DataFrame, contexts: list[EvalContext], params: list[str],
                      per_shape: int) -> list[list[dict[str, Any]]]:
    """Each shape's ``per_shape`` best configs the study evaluated (by its first objective)."""
    out: list[list[dict[str, Any]]] = [[] for _ in contexts]
    if frame.empty or not params:
        return out
    best = best_trials(frame, per_shape)
    for i, ctx in enumerate(contexts):
        rows = best[_of(best, ctx.workload)]
        out[i] = [ctx.space.resolve({p: _plain(row[p]) for p in params if p in row})
                  for _, row in rows.iterrows()]
    return out


def _of(frame: pd.DataFrame, workload: Workload) -> pd.Series:
    """The rows of ``frame`` that are trials of ``workload``."""
    return ((frame["shape"] == workload.shape) & (frame["dtype"] == workload.dtype.name)
            & (frame["b_layout"] == workload.b_layout))


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _unique(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for config in configs:
        seen.setdefault(tuple(sorted(config.items())), config)
    return list(seen.values())


def _scores(evaluator: Evaluator, ctx: EvalContext,
            candidates: list[dict[str, Any]]) -> np.ndarray:
    """Each candidate's throughput on ``ctx``'s workload (0 where its rules refuse it, or
    where a value lies outside the workload's own domain of its parameter)."""
    out = np.zeros(len(candidates))
    usable, configs = [], []
    for j, candidate in enumerate(candidates):
        try:
            configs.append(ctx.space.resolve(candidate))
        except UsageError:
            continue
        usable.append(j)
    if not configs:
        return out
    batch = ctx.space.encode(configs)
    ok = ctx.space.check(batch).ok
    if ok.any():
        out[np.asarray(usable)[ok]] = np.asarray(
            score_batch(evaluator, batch_take(batch, ok), ctx)["tops"], dtype=float)
    return out


def _measured(frame: pd.DataFrame, ctx: EvalContext, candidates: list[dict[str, Any]],
              params: list[str], evaluator: str) -> np.ndarray:
    """What the study measured of each candidate on ``ctx``'s workload with ``evaluator`` (0
    where nothing: a config it failed on, or only a cheaper rung scored, cannot serve); of a
    config measured at two fidelities (a rung's measurement and its confirmation), the more
    faithful result (0 if that failed)."""
    rows = most_faithful(frame[_of(frame, ctx.workload) & (frame["evaluator"] == evaluator)],
                         params)
    rows = rows[rows["status"] == "ok"]
    measured = {tuple(_plain(row[p]) for p in params): float(row["tops"])
                for _, row in rows.iterrows()}
    return np.array([measured.get(tuple(c.get(p) for p in params), 0.0) for c in candidates])


def measure_across(store: ResultStore, study: str, per_shape: int = DEFAULT_CANDIDATES,
                   progress: Callable[[str, int], None] | None = None) -> dict[str, int]:
    """Measure every candidate (each shape's ``per_shape`` best results) on every other shape
    of the study, with the study's evaluator, where it has no result there yet; each result is
    stored as a trial of the study (:meth:`ResultStore.ingest_results`), so covers, the
    dashboard and later calls see it. A cover of fewer kernels than shapes needs these pairs
    when the evaluator cannot score cheaply (hardware, a simulator). ``progress(shape, n)``
    is called before a shape's ``n`` configs are measured. Returns how many results were
    stored, how many configs a shape's domains refuse, and how many pairs were measured
    already; nothing to do for an evaluator that scores every pair itself."""
    spec = store.study_spec(study)
    evaluator = build_evaluator(spec["evaluator"]["name"], spec["evaluator"].get("options"))
    counts = {"measured": 0, "refused": 0, "known": 0}
    if evaluator.capabilities.score:
        return counts
    problem = evaluator.unavailable()
    if problem:
        raise UsageError(f"evaluator {evaluator.name!r} cannot run here: {problem}")
    target, space_spec = load_target(spec["target"]), spec.get("space", {})
    contexts = [_context(target, workload_from_dict(body), space_spec)
                for body in spec["workloads"]]
    frame = store.load_trials(study)
    params = list(frame.attrs.get("params", []))
    candidates = _unique([c for configs in _study_candidates(frame, contexts, params, per_shape)
                          for c in configs])
    if not candidates:
        return counts
    try:
        for ctx in contexts:
            rows = frame[_of(frame, ctx.workload) & (frame["evaluator"] == evaluator.name)]
            tried = {tuple(_plain(row[p]) for p in params) for _, row in rows.iterrows()}
            configs = []
            for candidate in candidates:
                if tuple(candidate.get(p) for p in params) in tried:
                    counts["known"] += 1
                    continue
                try:
                    configs.append(ctx.space.resolve(candidate))
                except UsageError:  # a value outside this workload's domain of a parameter
                    counts["refused"] += 1
            if not configs:
                continue
            if progress is not None:
                progress(ctx.workload.shape, len(configs))
            results = evaluator.evaluate(ctx.space.encode(configs), ctx)
            body = ctx.workload.to_dict()
            counts["measured"] += len(results)
            store.ingest_results(study, evaluator,
                                 [(body, ctx.space.name, config, result)
                                  for config, result in zip(configs, results, strict=True)],
                                 {"host": socket.gethostname()})
    finally:
        evaluator.close()
        if counts["measured"]:  # the frame kept when the study's run ended is stale now
            store.keep_frame(study)
    return counts


def _study_best(frame: pd.DataFrame, contexts: list[EvalContext]) -> tuple[np.ndarray, list[str]]:
    best, bound = np.zeros(len(contexts)), [""] * len(contexts)
    top = best_trials(frame, 1)
    for i, ctx in enumerate(contexts):
        rows = top[_of(top, ctx.workload)]
        if len(rows):
            best[i] = float(rows["tops"].iloc[0])
            bound[i] = str(rows["bound"].iloc[0]) if "bound" in rows else ""
    return best, bound
