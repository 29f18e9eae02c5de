"""Analytical evaluator: closed-form, vectorised cost models (microseconds per config)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from dse.registry import analytical_model, analytical_spaces
from dse.results import EvalResult, Status
from evaluators.base import EvalContext
from search_spaces.base import ConfigBatch, batch_take

# One model per search-space family (dse.registry.ANALYTICAL_MODELS):
# (batch, target, workload) -> metric arrays.
ModelFn = Callable[[ConfigBatch, Any, Any], dict[str, np.ndarray]]


def metrics_row(metrics: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    """Plain-Python metrics of config ``i`` (floats, ints and strings only)."""
    row: dict[str, Any] = {}
    for name, values in metrics.items():
        value = values[i]
        if isinstance(value, np.integer):
            row[name] = int(value)
        elif isinstance(value, np.floating):
            row[name] = float(value)
        else:
            row[name] = str(value)
    return row


class AnalyticalEvaluator:
    """Each space's closed-form model: for XDNA the paper's eqs. 1-10 extended with the effects
    measured on hardware; for Ascend the pipeline model of the BMM tiling design."""

    name: ClassVar[str] = "analytical"
    # Its results are those of every space's rules and model: a change to what one of them
    # reports needs a new version, or results stored before it are served as current.
    # 2: the Triton space's shared memory and registers under TMA loads.
    version: ClassVar[str] = "2"
    fidelity: ClassVar[str] = "analytical"
    spaces: ClassVar[tuple[str, ...]] = analytical_spaces()  # search spaces it can score

    def score(self, batch: ConfigBatch, ctx: EvalContext) -> dict[str, np.ndarray]:
        model: ModelFn = analytical_model(ctx.space.name)
        return model(batch, ctx.target, ctx.workload)

    def evaluate(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        start = time.perf_counter()
        feasibility = ctx.space.check(batch)
        params = ctx.space.decode(batch)
        ok_index = np.flatnonzero(feasibility.ok)
        metrics = self.score(batch_take(batch, ok_index), ctx) if len(ok_index) else {}
        per_config = (time.perf_counter() - start) / max(len(params), 1)
        position = {int(i): j for j, i in enumerate(ok_index)}
        results = []
        for i, p in enumerate(params):
            if i in position:
                results.append(EvalResult(Status.OK, p, metrics_row(metrics, position[i]),
                                          elapsed_s=per_config))
            else:
                results.append(EvalResult(Status.INFEASIBLE, p, reason=ctx.space.explain(batch, i),
                                          elapsed_s=per_config))
        return results
