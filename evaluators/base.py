"""The evaluator interface shared by every fidelity (analytical, simulator, hardware)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from dse.results import EvalResult
from dse.target import Target
from dse.workload import Workload
from search_spaces.base import ConfigBatch


@dataclass(frozen=True)
class EvalContext:
    """What an evaluator needs besides the configs: the target, the GEMM and its space."""

    target: Target
    workload: Workload
    space: Any


class Evaluator(Protocol):
    """Scores a batch of configurations; expected failures come back as results."""

    name: ClassVar[str]
    version: ClassVar[str]  # with options that change results, build_evaluator extends it
    fidelity: ClassVar[str]
    spaces: ClassVar[tuple[str, ...]]  # names of the search spaces it can score
    # optional: the options that change what it reports (not only how fast): a result is
    # served from the store only to a study that gives them the same values
    # result_options: ClassVar[tuple[str, ...]]

    def evaluate(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        """Evaluate every config of ``batch`` (same order, one result each).

        Args:
            batch: configs in the space's batch encoding.
            ctx: target, workload and space.

        Returns:
            One :class:`EvalResult` per config: ``ok`` with metrics, or ``infeasible`` /
            ``failed`` / ``timeout`` with a reason.
        """
        ...


class VectorEvaluator(Evaluator, Protocol):
    """An evaluator that can also score a whole batch as arrays (for exhaustive search)."""

    def score(self, batch: ConfigBatch, ctx: EvalContext) -> dict[str, np.ndarray]:
        """Metric arrays for a batch of configs already known to be feasible."""
        ...
