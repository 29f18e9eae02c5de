"""Evaluation results: data, never exceptions, for every expected outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np


class Status(StrEnum):
    """Outcome of evaluating one configuration."""

    OK = "ok"
    INFEASIBLE = "infeasible"
    FAILED = "failed"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class EvalResult:
    """One configuration's outcome: its metrics, and why it is not ok.

    Results are positional: an evaluator returns one per config of the batch it was given, in
    the batch's order, and whoever holds the configs (the study's runner, the store) pairs
    them; a result never carries its parameters.

    Metric names are shared by every evaluator: ``tops``, ``latency_s``, ``t_comp_s``,
    ``t_mem_s``, ``bound``, ``balance``, ``macs_per_cycle``, ``l1_bytes``, ``l2_bytes``,
    ``dram_bytes`` (and ``dram_bytes_a``/``_b``/``_c``), plus evaluator-specific extras.
    """

    status: Status
    metrics: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status.value}
        if self.reason is not None:
            out["reason"] = self.reason
        out["metrics"] = dict(self.metrics)
        return out


def metrics_row(metrics: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    """Plain-Python metrics of config ``i`` of metric arrays (floats, ints and strings only)."""
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
