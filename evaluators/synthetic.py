"""A slow evaluator for exercising orchestration: the analytical model plus real CPU work.

Simulators and hardware runs take tens of milliseconds to minutes per config. To test and
benchmark what happens around such evaluators (fan-out over Ray workers, resuming after a kill,
failures that must not stop a study) without hardware, this evaluator returns the analytical
metrics after spending ``work_s`` seconds of CPU on each config (matrix products, not a sleep),
and fails a deterministic ``fail_fraction`` of configs with an error. ``die`` makes the worker
process itself die (``os._exit``), as a lost machine would: ``always``, or ``once`` per batch of
configs (the batch's configs are marked in the folder ``marks``, so the batch tried again
succeeds).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import ClassVar

import numpy as np

from dse.core import (
    ConfigBatch,
    EvalContext,
    EvalResult,
    Evaluator,
    Status,
    batch_take,
    limits,
)
from evaluators.analytical import AnalyticalEvaluator


class SyntheticEvaluator(Evaluator):
    """Analytical metrics at a configurable cost per config."""

    name: ClassVar[str] = "synthetic"
    version: ClassVar[str] = "1"
    result_options: ClassVar[tuple[str, ...]] = ("fail_fraction",)
    fidelity: ClassVar[str] = "synthetic"
    spaces: ClassVar[tuple[str, ...]] = ("xdna_gemm",)  # search spaces it can score

    def __init__(self, work_s: float = 0.05, fail_fraction: float = 0.0, die: str = "never",
                 marks: str | None = None) -> None:
        problem = limits.out_of_range("evaluator.seconds_per_config", work_s)
        if problem:
            raise ValueError(f"work_s: {limits.shown(work_s)} is not valid; {problem}")
        if not 0 <= fail_fraction <= 1:
            raise ValueError("fail_fraction must lie in [0, 1]")
        if die not in DEATHS or (die == "once") != (marks is not None):
            raise ValueError(f"die: one of {', '.join(DEATHS)}; 'once' with marks (a folder)")
        self.work_s = work_s
        self.fail_fraction = fail_fraction
        self.die, self.marks = die, marks
        self._model = AnalyticalEvaluator()

    def evaluate_feasible(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        configs = ctx.space.decode(batch)
        self._maybe_die(configs)
        results = []
        for i in range(len(configs)):
            start = time.perf_counter()
            result = self._model.evaluate_feasible(batch_take(batch, np.array([i])), ctx)[0]
            _burn(self.work_s)
            if self._fails(configs[i]):
                result = EvalResult(Status.FAILED, reason="synthetic failure (fail_fraction)")
            results.append(EvalResult(result.status, result.metrics, result.reason,
                                      time.perf_counter() - start))
        return results

    def _fails(self, params: dict) -> bool:
        return int.from_bytes(_digest(params)[:4], "big") / 2**32 < self.fail_fraction

    def _maybe_die(self, configs: list[dict]) -> None:
        """End this process without a word, as a lost machine does (see the module)."""
        if self.die == "always":
            os._exit(DEATH_STATUS)
        if self.die == "once" and self.marks is not None:
            marks = [Path(self.marks) / _digest(c).hex()[:32] for c in configs]
            if not all(mark.exists() for mark in marks):
                for mark in marks:
                    mark.touch()
                os._exit(DEATH_STATUS)


DEATHS = ("never", "once", "always")
DEATH_STATUS = 70  # what the dying worker exits with


def _digest(params: dict) -> bytes:
    return hashlib.sha256(repr(sorted(params.items())).encode()).digest()


def _burn(seconds: float) -> None:
    """Spend about ``seconds`` of CPU on dense matrix products."""
    deadline = time.perf_counter() + seconds
    a = np.random.default_rng(0).random((64, 64))
    while time.perf_counter() < deadline:
        a = np.tanh(a @ a)
