"""A slow evaluator for exercising orchestration: the analytical model plus real CPU work.

Simulators and hardware runs take tens of milliseconds to minutes per config. To test and
benchmark what happens around such evaluators (fan-out over Ray workers, resuming after a kill,
failures that must not stop a study) without hardware, this evaluator returns the analytical
metrics after spending ``work_s`` seconds of CPU on each config (matrix products, not a sleep),
and fails a deterministic ``fail_fraction`` of configs with an error.
"""

from __future__ import annotations

import hashlib
import time
from typing import ClassVar

import numpy as np

from dse.core import ConfigBatch, EvalContext, EvalResult, Evaluator, Status, batch_len, batch_take
from evaluators.analytical import AnalyticalEvaluator


class SyntheticEvaluator(Evaluator):
    """Analytical metrics at a configurable cost per config."""

    name: ClassVar[str] = "synthetic"
    version: ClassVar[str] = "1"
    result_options: ClassVar[tuple[str, ...]] = ("fail_fraction",)
    fidelity: ClassVar[str] = "synthetic"
    spaces: ClassVar[tuple[str, ...]] = ("xdna_gemm",)  # search spaces it can score

    def __init__(self, work_s: float = 0.05, fail_fraction: float = 0.0) -> None:
        if work_s < 0 or not 0 <= fail_fraction <= 1:
            raise ValueError("work_s must be >= 0 and fail_fraction in [0, 1]")
        self.work_s = work_s
        self.fail_fraction = fail_fraction
        self._model = AnalyticalEvaluator()

    def evaluate_feasible(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        results = []
        for i in range(batch_len(batch)):
            start = time.perf_counter()
            result = self._model.evaluate_feasible(batch_take(batch, np.array([i])), ctx)[0]
            _burn(self.work_s)
            if self._fails(result.params):
                result = EvalResult(Status.FAILED, result.params,
                                    reason="synthetic failure (fail_fraction)")
            results.append(EvalResult(result.status, result.params, result.metrics,
                                      result.reason, time.perf_counter() - start))
        return results

    def _fails(self, params: dict) -> bool:
        digest = hashlib.sha256(repr(sorted(params.items())).encode()).digest()
        return int.from_bytes(digest[:4], "big") / 2**32 < self.fail_fraction


def _burn(seconds: float) -> None:
    """Spend about ``seconds`` of CPU on dense matrix products."""
    deadline = time.perf_counter() + seconds
    a = np.random.default_rng(0).random((64, 64))
    while time.perf_counter() < deadline:
        a = np.tanh(a @ a)
