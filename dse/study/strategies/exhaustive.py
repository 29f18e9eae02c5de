"""The ``exhaustive`` sampler: every feasible config of a small enough space, as trials."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dse.core.errors import UsageError
from dse.core.evaluator import EvalContext
from dse.core.params import ConfigBatch, batch_concat, batch_len, batch_take
from dse.core.strategy_record import Strategy
from dse.study.execution.port import Port, WorkloadRun, chunked, config_keys
from dse.study.execution.progress import Stage

if TYPE_CHECKING:
    from dse.study.spec import StudySpec

DEFAULT_MAX_CONFIGS = 200_000
# a ladder stores only what its first rung keeps, so only memory bounds the space it scores
# (its arrays, about 200 bytes a config)
LADDER_MAX_CONFIGS = 5_000_000
SLICE = 10_000  # configs a fast evaluator scores, and the store commits, at once
ROUND = 4  # a slow evaluator's round, in a sampler's rounds (see run_exhaustive)


def feasible_configs(ctx: EvalContext, spec: StudySpec) -> ConfigBatch:
    """Every feasible config of the study's space for one workload, in a fixed order.

    Raises:
        UsageError: none is feasible, or more than the sampler's ``max_configs`` (a ladder's:
            :data:`LADDER_MAX_CONFIGS`).
    """
    options = {} if spec.ladder else dict(spec.sampler.options)
    limit = options.pop("max_configs", LADDER_MAX_CONFIGS if spec.ladder else DEFAULT_MAX_CONFIGS)
    if options:
        raise UsageError(f"sampler 'exhaustive' has no option {next(iter(options))!r}; "
                         "options: max_configs")
    parts = []
    for batch, _ in ctx.space.chunks_within(spec.space.fix, spec.space.free, spec.space.ranges):
        ok = ctx.space.check(batch).ok & ctx.space.within(batch, spec.space.ranges)
        parts.append(batch_take(batch, np.flatnonzero(ok)))
    feasible = batch_concat(parts, list(ctx.space.params())) if parts else {}
    total = batch_len(feasible)
    if total == 0:
        why = ctx.space.why_empty(spec.space.fix, spec.space.free, spec.space.ranges)
        raise UsageError(f"{spec.source}: no feasible configuration in the space of "
                         f"{ctx.workload.shape} {ctx.workload.dtype.name}"
                         + (f" (rejected by: {why})" if why else "") + "; relax the overrides")
    if total > limit and spec.ladder:
        raise UsageError(f"{spec.source}: the ladder's first rung would score {total:,} "
                         f"configs at once (limit {limit:,}): narrow the space (space.fix, "
                         "space.range)")
    if total > limit:
        raise UsageError(f"{spec.source}: the exhaustive sampler would store {total:,} "
                         f"configs (limit {limit:,}): narrow the space (space.fix, space.range) "
                         "or raise sampler.options.max_configs, or use `dse search`, which "
                         "keeps only the best")
    return feasible


def run_exhaustive(port: Port, run: WorkloadRun) -> None:
    """Evaluate and store every feasible config, in a fixed order. A resumed run takes the
    configs that have no trial yet (not those past a count: the space's rules may have
    changed since). Infeasible configs are not stored: the space rejects them by rule."""
    feasible = port.feasible(run)
    total = batch_len(feasible)
    budget = total if port.spec.budget.trials is None else min(total, port.spec.budget.trials)
    stage = Stage(run.ctx.workload.label, run.summary.trials, budget)
    left = np.arange(total)
    if run.summary.trials:
        done = port.trialled(run, port.evaluator)
        keys = config_keys(run, run.ctx.space.decode(feasible))
        left = np.array([i for i, k in enumerate(keys) if k not in done], dtype=np.int64)
    todo = left[:max(0, budget - run.summary.trials)]
    # a slow evaluator's results are committed a round at a time, as a sampler's are; no
    # sampler learns between these rounds, so unless the study sets its batch size they are
    # ROUND times a sampler's: the workers wait while the runner records a round, and with 2
    # configs a worker a 50 ms evaluator's rounds lost a tenth of their time to that
    size = SLICE if port.evaluator.capabilities.score else \
        port.spec.batch_size or ROUND * port.batch_size
    for part in chunked(len(todo), size):
        if port.out_of_time():
            break
        port.evaluate(run, batch_take(feasible, todo[part]), feasible=True, stage=stage)


STRATEGY = Strategy("exhaustive", run_exhaustive, enumerates=True,
                    summary="every feasible config, in a fixed order")
