"""The fidelity ladder: each rung scores what the previous one kept, and how well the cheaper
rung ranked what the dearer one measured is recorded.

Rung 0 scores every feasible config of the study's space (vectorised when its evaluator can);
its kept configs, and every config a later rung scores, become trials. After each later rung the
rank agreement with the rung before it, on the configs both scored, is stored: Spearman and
Kendall (tau-b) correlations and the overlap of their top-k sets. A later rung with ``refine: N``
then measures N more configs on a walk from the best it measured (dse.study.strategies.refine);
the last rung's ``confirm: N`` measures its N best again side by side
(dse.study.strategies.confirm).
Re-running the study reuses every stored result and adds no trial twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dse.core.evaluator import EvalContext, Evaluator
from dse.core.params import ConfigBatch, batch_len, batch_take
from dse.core.results import EvalResult
from dse.core.strategy_record import Strategy
from dse.study.execution.port import Port, WorkloadRun, chunked, config_keys
from dse.study.execution.progress import Stage
from dse.study.strategies.confirm import confirm
from dse.study.strategies.refine import walk

if TYPE_CHECKING:
    from dse.study.execution.pool import Pool
    from dse.study.spec import Rung


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


def run_ladder(port: Port, run: WorkloadRun) -> None:
    """Run the study's ladder on one workload: each rung evaluates what the cheaper one kept (the
    first scores the whole space when it can), and its agreement with that rung is recorded; stops
    at an ``--offline`` rung with configs to measure."""
    spec, ctx = port.spec, run.ctx
    objective = spec.objectives[0]
    sign = 1.0 if objective.direction == "maximize" else -1.0

    def scored(results: list[EvalResult]) -> np.ndarray:
        return np.array([sign * float(r.metrics[objective.metric]) if r.ok else np.nan
                         for r in results])

    space = batch = port.feasible(run)
    positions = np.arange(batch_len(space))  # of the batch's configs in the space
    cheap: np.ndarray | None = None  # the first rung's score of every config of the space
    previous: dict[str, float] | None = None
    for index, rung in enumerate(spec.ladder):
        evaluator = port.resolution.evaluator(rung.evaluator)
        if index == 0 and evaluator.capabilities.score:  # score the whole space at once
            cheap = evaluator.score(batch, ctx)[objective.metric].astype(float) * sign
            positions = _kept(ctx, rung, batch, cheap)
            batch = batch_take(space, positions)
        if rung.trials is not None:
            positions = positions[:rung.trials]
            batch = batch_take(space, positions)
        configs = ctx.space.decode(batch)
        offline = index == port.offline_rung
        if offline and port.export_offline(run, configs, evaluator):
            break  # the dearer rungs wait for these results (dse ingest, then run again)
        with port.rung(evaluator) as pool:
            label = (f"{ctx.workload.label} rung {index + 1}/{len(spec.ladder)} "
                     f"({evaluator.name})")
            values = scored(_evaluate_once(port, run, batch, configs, evaluator, pool, label))
            stopped = False
            if rung.refine:
                if cheap is None:
                    raise ValueError("a rung's refine needs a first rung that scores the space")
                walked, walked_values, stopped = _walk(
                    port, run, (evaluator, pool, f"{label} walk"), space, cheap,
                    dict(zip(positions.tolist(), values.tolist(), strict=True)), rung.refine,
                    offline, scored)
                positions = np.concatenate([positions, walked])
                values = np.concatenate([values, walked_values])
                batch = batch_take(space, positions)
                configs = ctx.space.decode(batch)
            if rung.confirm and not stopped and not offline:
                confirm(port, run, evaluator, pool, label, (batch, configs, values),
                        choose(values, rung.confirm, "top"), objective)
        scores = dict(zip(config_keys(run, configs), values, strict=True))
        if previous is not None:
            if rung.refine and index == 1:  # the first rung scored the walk's configs too
                previous = dict(zip(scores, cheap[positions], strict=True))
            _record_agreement(port, run, index, spec.ladder[index - 1].evaluator.name,
                              evaluator.name, previous, scores)
        previous = scores
        if stopped:  # out of time, or the walk goes on once its configs are ingested
            break
        if index + 1 < len(spec.ladder):
            positions = positions[_kept(ctx, rung, batch, values)]
            batch = batch_take(space, positions)
        port.flush()


def _walk(port: Port, run: WorkloadRun, measuring: tuple[Evaluator, Pool, str],
          space: ConfigBatch, cheap: np.ndarray, measured: dict[int, float], budget: int,
          offline: bool, scored: Callable[[list[EvalResult]], np.ndarray],
          ) -> tuple[np.ndarray, np.ndarray, bool]:
    """A rung's walk from the best it ``measured`` (position in ``space``: score), ``budget``
    configs at most: the positions walked, their scores, and whether it stopped short (the
    study's time is spent, or configs were exported for ``--offline`` measurement). One config a
    step, whatever the workers: each step follows the last measurement, and the walk is the same
    when the study is resumed with other workers."""
    evaluator, pool, label = measuring
    stopped = False

    def measure(picks: list[int]) -> list[float]:
        nonlocal stopped
        part = batch_take(space, np.array(picks, dtype=np.int64))
        configs = run.ctx.space.decode(part)
        if port.out_of_time() or (offline and port.export_offline(run, configs, evaluator)):
            stopped = True
            return []
        return scored(_evaluate_once(port, run, part, configs, evaluator, pool,
                                     label)).tolist()

    walked = walk(space, cheap, measured, budget, measure, ties=run.ctx.space.tie_order(space))
    return (np.array(walked, dtype=np.int64),
            np.array([measured[p] for p in walked], dtype=float), stopped)


def _kept(ctx: EvalContext, rung: Rung, batch: ConfigBatch, scores: np.ndarray) -> np.ndarray:
    """The configs of ``batch`` a rung passes on, by its scores (see :func:`choose`)."""
    return choose(scores, rung.keep or len(scores), rung.select, _groups(batch, rung.group_by),
                  rung.per_group, ctx.space.tie_order(batch))


def _groups(batch: ConfigBatch, names: tuple[str, ...]) -> list[tuple[Any, ...]] | None:
    """A label per config of ``batch``: its values of the ``names`` parameters."""
    if not names:
        return None
    return list(zip(*(batch[n].tolist() for n in names), strict=True))


def _evaluate_once(port: Port, run: WorkloadRun, batch: ConfigBatch,
                   configs: list[dict[str, Any]], evaluator: Evaluator, pool: Pool,
                   label: str) -> list[EvalResult]:
    """Results of every config; a trial only for those this study has none of yet (``label``
    names the rung's progress bar)."""
    port.flush()
    done = port.trialled(run, evaluator)
    keys = config_keys(run, configs)
    # what this study has a trial and a result of (a result stored under other options of the
    # rung's evaluator, by an older dse, is not one: measured again)
    results = port.stored(run, [k for k in keys if k in done], evaluator)
    fresh = np.array([i for i, k in enumerate(keys) if k not in results], dtype=np.int64)
    # a slow rung goes in rounds, so progress shows and Ctrl-C keeps what finished; 8 a round
    # at least, so an evaluator that compiles a round in parallel (triton) still can
    size = len(fresh) if evaluator.capabilities.score else max(8, 2 * pool.workers)
    stage = Stage(label, len(configs) - len(fresh), len(configs))
    for part in chunked(len(fresh), size):
        chosen = fresh[part]
        measured = port.evaluate(run, batch_take(batch, chosen),
                                 configs=[configs[i] for i in chosen], feasible=True,
                                 evaluator=evaluator, pool=pool, stage=stage)
        results.update(zip([keys[i] for i in chosen], measured, strict=True))
    return [results[k] for k in keys]


def _record_agreement(port: Port, run: WorkloadRun, rung: int, cheaper: str, dearer: str,
                      cheap: dict[str, float], dear: dict[str, float]) -> None:
    common = [k for k in dear if k in cheap and np.isfinite(dear[k]) and np.isfinite(cheap[k])]
    k = max(1, min(5, len(common) // 2))
    values = (agreement(np.array([cheap[c] for c in common]),
                        np.array([dear[c] for c in common]), k)
              if len(common) >= 3 else {"spearman": None, "kendall": None,
                                        "top_k_overlap": None})
    port.record_agreement(run, rung, cheaper, dearer, len(common), k, values)


STRATEGY = Strategy("ladder", run_ladder, enumerates=True, takes_rungs=True,
                    summary="a cheap evaluator over the space, dearer ones on what it keeps")
