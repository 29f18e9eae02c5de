"""The fidelity ladder: each rung scores what the previous one kept, and how well the cheaper
rung ranked what the dearer one measured is recorded.

Rung 0 scores every feasible config of the study's space (vectorised when its evaluator can);
its kept configs, and every config a later rung scores, become trials. After each later rung the
rank agreement with the rung before it, on the configs both scored, is stored: Spearman and
Kendall (tau-b) correlations and the overlap of their top-k sets. Re-running the study reuses
every stored result and adds no trial twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dse.problem import build_evaluator
from dse.results import EvalResult
from dse.storage import models as m
from dse.storage.store import config_key, now
from dse.study.exhaustive import feasible_configs
from dse.study.pool import make_pool
from dse.study.progress import Stage
from evaluators.base import EvalContext
from search_spaces.base import batch_take

if TYPE_CHECKING:
    from dse.study.runner import StudyRunner, WorkloadSummary


def kendall_tau_b(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-b (ties counted once per pair), O(n^2) for the few configs a rung keeps."""
    da = np.sign(a[:, None] - a[None, :])
    db = np.sign(b[:, None] - b[None, :])
    upper = np.triu_indices(len(a), 1)
    da, db = da[upper], db[upper]
    concordant = float(np.sum(da * db))
    denominator = np.sqrt(float(np.sum(da != 0)) * float(np.sum(db != 0)))
    return concordant / denominator if denominator else float("nan")


def agreement(cheap: np.ndarray, dear: np.ndarray, k: int) -> dict[str, float]:
    """Rank agreement of two score vectors (higher is better in both)."""
    constant = np.ptp(cheap) == 0 or np.ptp(dear) == 0  # a rank correlation is undefined
    spearman = float("nan") if constant else float(
        pd.Series(cheap).corr(pd.Series(dear), method="spearman"))
    top_cheap = set(np.argsort(-cheap, kind="stable")[:k])
    top_dear = set(np.argsort(-dear, kind="stable")[:k])
    return {"spearman": spearman, "kendall": kendall_tau_b(cheap, dear),
            "top_k_overlap": len(top_cheap & top_dear) / k}


def choose(scores: np.ndarray, keep: int, how: str, groups: list[Any] | None = None,
           per_group: int | None = None, ties: np.ndarray | None = None) -> np.ndarray:
    """Indices of the configs to pass on: the best ``keep``, or ``keep`` spread over the range of
    scores (best and worst included: the dearer rung then sees the whole range, which is what
    checking or calibrating the cheaper one needs; evenly on a log scale when the scores share a
    sign, as throughputs spanning orders of magnitude do). Unscored configs are never passed;
    with ``groups`` (a label per config), at most ``per_group`` of a group, its best. Configs
    scored alike go in the order of ``ties`` (lower first; the space's ``tie_order``), else in
    their own."""
    order = np.argsort(-scores, kind="stable") if ties is None else np.lexsort((ties, -scores))
    ranked = [i for i in order if np.isfinite(scores[i])]
    if groups is not None and per_group is not None:
        taken: dict[Any, int] = {}
        capped = []
        for i in ranked:
            label = groups[i]
            if taken.get(label, 0) < per_group:
                taken[label] = taken.get(label, 0) + 1
                capped.append(i)
        ranked = capped
    if how == "top" or keep >= len(ranked):
        return np.array(ranked[:keep], dtype=np.int64)
    values = scores[ranked]
    same_sign = bool(np.all(values > 0) or np.all(values < 0))
    goals = (np.sign(values[0]) * np.geomspace(abs(values[0]), abs(values[-1]), keep)
             if same_sign else np.linspace(values[0], values[-1], keep))
    chosen: list[int] = []
    for goal in goals:
        free = [j for j in range(len(ranked)) if ranked[j] not in chosen]
        nearest = min(free, key=lambda j: (abs(values[j] - goal), j))
        chosen.append(ranked[nearest])
    return np.array(sorted(chosen, key=lambda i: -scores[i]), dtype=np.int64)


def run_ladder(runner: StudyRunner, ctx: EvalContext, workload_id: int,
               summary: WorkloadSummary) -> None:
    """Run the study's ladder on one workload: each rung evaluates what the cheaper one kept (the
    first scores the whole space when it can), and its agreement with that rung is recorded; stops
    at an ``--offline`` rung with configs to measure."""
    spec = runner.spec
    objective = spec.objectives[0]
    sign = 1.0 if objective.direction == "maximize" else -1.0

    def scored(results: list[EvalResult]) -> np.ndarray:
        return np.array([sign * float(r.metrics[objective.metric]) if r.ok else np.nan
                         for r in results])

    batch = feasible_configs(ctx, spec)
    previous: dict[str, float] | None = None
    for index, rung in enumerate(spec.ladder):
        evaluator = build_evaluator(rung.evaluator.name, rung.evaluator.options)
        if index == 0 and hasattr(evaluator, "score"):  # score the whole space at once
            values = evaluator.score(batch, ctx)[objective.metric].astype(float) * sign
            kept = choose(values, rung.keep or len(values), rung.select,
                          _groups(batch, rung.group_by), rung.per_group,
                          ctx.space.tie_order(batch))
            batch = batch_take(batch, kept)
        configs = ctx.space.decode(batch)
        if rung.trials is not None:
            configs = configs[:rung.trials]
        if index == runner.offline_rung and _export_unmeasured(runner, ctx, workload_id,
                                                               configs, evaluator, summary):
            break  # the dearer rungs wait for these results (dse ingest, then run again)
        pool = make_pool(evaluator, spec.workers, runner.ray_address)
        try:
            label = (f"{ctx.workload.label} rung {index + 1}/{len(spec.ladder)} "
                     f"({evaluator.name})")
            results = _evaluate_once(runner, ctx, workload_id, configs, summary, evaluator, pool,
                                     label)
        finally:
            pool.close()
            if hasattr(evaluator, "close"):
                evaluator.close()
        scores = scored(results)
        keys = [config_key(ctx.space.name, c) for c in configs]
        if previous is not None:
            _record_agreement(runner, workload_id, index, spec.ladder[index - 1].evaluator.name,
                              evaluator.name, previous, dict(zip(keys, scores, strict=True)))
        previous = dict(zip(keys, scores, strict=True))
        if index + 1 < len(spec.ladder):
            measured = ctx.space.encode(configs)
            kept = choose(scores, rung.keep or len(scores), rung.select,
                          _groups(measured, rung.group_by), rung.per_group,
                          ctx.space.tie_order(measured))
            batch = batch_take(measured, kept)
        runner.recorder.flush()


def _export_unmeasured(runner: StudyRunner, ctx: EvalContext, workload_id: int,
                       configs: list[dict[str, Any]], evaluator: Any,
                       summary: WorkloadSummary) -> bool:
    """Add the configs ``evaluator`` has no stored result for to the run's offline export;
    whether there were any."""
    runner.recorder.flush()
    keys = [config_key(ctx.space.name, c) for c in configs]
    known = runner.recorder.lookup(workload_id, keys, evaluator)
    missing = [c for c, k in zip(configs, keys, strict=True) if k not in known]
    for config in missing:
        runner.offline.add(ctx, config)
    summary.exported += len(missing)
    return bool(missing)


def _groups(batch: Any, names: tuple[str, ...]) -> list[tuple[Any, ...]] | None:
    """A label per config of ``batch``: its values of the ``names`` parameters."""
    if not names:
        return None
    return list(zip(*(batch[n].tolist() for n in names), strict=True))


def _evaluate_once(runner: StudyRunner, ctx: EvalContext, workload_id: int,
                   configs: list[dict[str, Any]], summary: WorkloadSummary, evaluator: Any,
                   pool: Any, label: str) -> list[EvalResult]:
    """Results of every config; a trial only for those this study has none of yet (``label``
    names the rung's progress bar)."""
    runner.recorder.flush()
    with runner.store.session() as s:
        done = runner.store.trialled_keys(s, runner.study_id, workload_id, evaluator.name)
    keys = [config_key(ctx.space.name, c) for c in configs]
    # what this study has a trial and a result of (a result stored under other options of the
    # rung's evaluator, by an older dse, is not one: measured again)
    results = runner.recorder.lookup(workload_id, [k for k in keys if k in done], evaluator)
    fresh = [c for c, k in zip(configs, keys, strict=True) if k not in results]
    # a slow rung goes in rounds, so progress shows and Ctrl-C keeps what finished; 8 a round
    # at least, so an evaluator that compiles a round in parallel (triton) still can
    size = len(fresh) if hasattr(evaluator, "score") else max(8, 2 * pool.workers)
    measured: list[EvalResult] = []
    stage = Stage(label, len(configs) - len(fresh), len(configs))
    for start in range(0, len(fresh), max(size, 1)):
        measured += runner.evaluate_and_record(ctx, workload_id, fresh[start:start + size],
                                               summary, evaluator, pool, stage)
    results.update(zip([config_key(ctx.space.name, c) for c in fresh], measured, strict=True))
    return [results[k] for k in keys]


def _record_agreement(runner: StudyRunner, workload_id: int, rung: int, cheaper: str,
                      dearer: str, cheap: dict[str, float], dear: dict[str, float]) -> None:
    common = [k for k in dear if k in cheap and np.isfinite(dear[k]) and np.isfinite(cheap[k])]
    k = max(1, min(5, len(common) // 2))
    values = (agreement(np.array([cheap[c] for c in common]),
                        np.array([dear[c] for c in common]), k)
              if len(common) >= 3 else {"spearman": None, "kendall": None,
                                        "top_k_overlap": None})
    with runner.store.session() as s:
        s.execute(m.FidelityRow.__table__.insert(), [{
            "study_id": runner.study_id, "workload_id": workload_id, "rung": rung,
            "cheaper": cheaper, "dearer": dearer, "n": len(common), "top_k": k,
            "created_at": now(), **values}])
