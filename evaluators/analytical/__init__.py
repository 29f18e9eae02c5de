"""Analytical evaluator: closed-form, vectorised cost models (microseconds per config)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from dse.results import EvalResult, Status
from dse.target import Target
from dse.workload import GemmWorkload
from evaluators.analytical import cpu_gemm, xdna_gemm
from evaluators.base import EvalContext
from search_spaces.base import ConfigBatch, batch_take

ModelFn = Callable[[ConfigBatch, Target, GemmWorkload], dict[str, np.ndarray]]

# One model per search-space family.
MODELS: dict[str, ModelFn] = {"xdna_gemm": xdna_gemm.score, "cpu_gemm": cpu_gemm.score}


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
    """The paper's eqs. 1-10 extended with the effects measured on hardware."""

    name: ClassVar[str] = "analytical"
    version: ClassVar[str] = "1"
    fidelity: ClassVar[str] = "analytical"
    spaces: ClassVar[tuple[str, ...]] = ("xdna_gemm", "cpu_gemm")  # search spaces it can score

    def score(self, batch: ConfigBatch, ctx: EvalContext) -> dict[str, np.ndarray]:
        return MODELS[ctx.space.name](batch, ctx.target, ctx.workload)

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
