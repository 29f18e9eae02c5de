"""The ``exhaustive`` sampler: every feasible config of a small enough space, as trials."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dse.errors import UsageError
from dse.storage.store import config_key
from dse.study.progress import Stage
from evaluators.base import EvalContext
from search_spaces.base import ConfigBatch, batch_len, batch_take

if TYPE_CHECKING:
    from dse.study.runner import StudyRunner, WorkloadSummary
    from dse.study.spec import StudySpec

DEFAULT_MAX_CONFIGS = 200_000
SLICE = 2_000


def feasible_configs(ctx: EvalContext, spec: StudySpec) -> ConfigBatch:
    """Every feasible config of the study's space for one workload, in a fixed order.

    Raises:
        UsageError: none is feasible, or more than the sampler's ``max_configs``.
    """
    options = dict(spec.sampler.options)
    limit = options.pop("max_configs", DEFAULT_MAX_CONFIGS)
    if options:
        raise UsageError(f"sampler 'exhaustive' has no option {next(iter(options))!r}; "
                         "options: max_configs")
    parts = []
    for batch, _ in ctx.space.chunks(fix=spec.space.fix, free=spec.space.free):
        ok = ctx.space.check(batch).ok
        for name, (lo, hi) in spec.space.ranges.items():
            ok &= (batch[name] >= lo) & (batch[name] <= hi)
        parts.append(batch_take(batch, np.flatnonzero(ok)))
    feasible = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    total = batch_len(feasible)
    if total == 0:
        raise UsageError(f"{spec.source}: no feasible configuration in the space of "
                         f"{ctx.workload.shape} {ctx.workload.dtype.name}; relax the overrides")
    if total > limit:
        raise UsageError(f"{spec.source}: the exhaustive sampler would store {total:,} "
                         f"configs (limit {limit:,}): narrow the space (space.fix, space.range) "
                         "or raise sampler.options.max_configs, or use `dse search`, which "
                         "keeps only the best")
    return feasible


def run_exhaustive(runner: StudyRunner, ctx: EvalContext, workload_id: int,
                   summary: WorkloadSummary) -> None:
    """Evaluate and store every feasible config, in a fixed order. A resumed run takes the
    configs that have no trial yet (not those past a count: the space's rules may have
    changed since). Infeasible configs are not stored: the space rejects them by rule."""
    spec = runner.spec
    feasible = feasible_configs(ctx, spec)
    total = batch_len(feasible)
    budget = total if spec.budget.trials is None else min(total, spec.budget.trials)
    stage = Stage(ctx.workload.label, summary.trials, budget)
    left = np.arange(total)
    if summary.trials:
        with runner.store.session() as s:
            done = runner.store.trialled_keys(s, runner.study_id, workload_id,
                                              runner.evaluator.name)
        keys = [config_key(ctx.space.name, c) for c in ctx.space.decode(feasible)]
        left = np.array([i for i, k in enumerate(keys) if k not in done], dtype=np.int64)
    todo = left[:max(0, budget - summary.trials)]
    # a slow evaluator's results are committed a round at a time, as a sampler's are
    size = SLICE if hasattr(runner.evaluator, "score") else runner.batch_size
    for start in range(0, len(todo), size):
        if runner.out_of_time():
            break
        configs: list[dict[str, Any]] = ctx.space.decode(
            batch_take(feasible, todo[start:start + size]))
        runner.evaluate_and_record(ctx, workload_id, configs, summary, stage=stage)
