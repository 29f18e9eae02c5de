"""What a strategy (ask/tell, exhaustive, ladder) may do with a study run: the narrow port the
runner implements, and the workload it works on.

A strategy is a function ``strategy(port, run)`` that evaluates configs of ``run``'s space
through ``port.evaluate`` until its budget (``port.out_of_time()``, its own counts) is spent;
the port serves what the store knows, records every trial and keeps the progress bars.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dse.core.evaluator import EvalContext, Evaluator
from dse.core.params import ConfigBatch
from dse.core.results import EvalResult
from dse.core.workload import Workload
from dse.storage.keys import config_key
from dse.storage.windows import Measured
from dse.study.execution.progress import Stage

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

    from dse.study.execution.pool import Pool
    from dse.study.files.resolution import Resolution
    from dse.study.spec import StudySpec


@dataclass
class WorkloadSummary:
    """A run's counts for one workload: its trials so far (earlier runs' included), and what this
    run evaluated, served from the store (results stored before it: by earlier runs or other
    studies), repeated (configs the sampler asked for again, answered by this run's own
    result), found infeasible, failed or exported, and the faults of the machinery it met."""

    workload: Workload
    trials: int
    evaluated: int = 0
    cached: int = 0
    repeated: int = 0
    infeasible: int = 0
    failed: int = 0
    exported: int = 0  # configs written for the offline runner (``--offline``)
    faults: int = 0  # losses of a Ray worker or node, each tried again (or the run stopped)


@dataclass
class WorkloadRun:
    """One workload of a run: its context (target, workload, the study's space), its stored id
    and its counts."""

    ctx: EvalContext
    workload_id: int
    summary: WorkloadSummary
    seen: set[str] = field(default_factory=set)  # config keys this run has answered


class Port(Protocol):
    """The study run as a strategy sees it."""

    spec: StudySpec
    evaluator: Evaluator  # the study's (a ladder's last rung)
    resolution: Resolution  # its target, spaces and evaluators, each built once
    batch_size: int  # trials a round asks of a sampler
    offline_rung: int | None  # the ladder rung --offline exports, if any

    def evaluate(self, run: WorkloadRun, batch: ConfigBatch, *,
                 configs: Sequence[Mapping[str, Any]] | None = None, feasible: bool = False,
                 evaluator: Evaluator | None = None, pool: Pool | None = None,
                 stage: Stage | None = None, commit: bool = True) -> list[EvalResult]:
        """Results of ``batch``'s configs in order (``configs``: the same as dicts, when the
        strategy has them), each a trial: stored ones served, the rest checked once (unless
        ``feasible`` says they already were) and evaluated by ``evaluator`` on ``pool``
        (default: the study's)."""

    def stored(self, run: WorkloadRun, keys: list[str],
               evaluator: Evaluator | Measured) -> dict[str, EvalResult]:
        """Stored (or this run's) results of these config keys by ``evaluator``."""

    def evaluate_again(self, run: WorkloadRun, batch: ConfigBatch, evaluator: Evaluator,
                       pool: Pool, stage: Stage) -> list[EvalResult]:
        """Fresh results of ``batch``'s configs (none served from the store, none stored: a
        measurement repeated), ``stage`` showing the progress."""

    def record(self, run: WorkloadRun, configs: list[dict[str, Any]],
               results: list[EvalResult], measured: Measured, cached: bool = False) -> None:
        """Store results the strategy made itself (or, ``cached``, found stored) as trials,
        under ``measured``."""

    def trialled(self, run: WorkloadRun, evaluator: Evaluator | Measured,
                 exact: bool = False) -> set[str]:
        """Config keys the study already has a trial of by ``evaluator`` (of its version too,
        when ``exact``)."""

    def feasible(self, run: WorkloadRun) -> ConfigBatch:
        """Every feasible config of the study's space for the workload, in a fixed order."""

    def rung(self, evaluator: Evaluator) -> AbstractContextManager[Pool]:
        """A pool for one ladder rung's evaluator, closed (with the evaluator) after."""

    def export_offline(self, run: WorkloadRun, configs: list[dict[str, Any]],
                       evaluator: Evaluator) -> bool:
        """Add the configs ``evaluator`` has no stored result of to the ``--offline`` export;
        whether there were any."""

    def record_agreement(self, run: WorkloadRun, rung: int, cheaper: str, dearer: str,
                         n: int, top_k: int, values: Mapping[str, float | None]) -> None:
        """Store how well rung ``rung - 1`` ranked what rung ``rung`` scored."""

    def optuna_storage(self) -> BaseStorage:
        """Optuna's storage for the study's samplers (its journal commits with the trials)."""

    def flush(self) -> None:
        """Commit what is pending."""

    def commit_if_due(self) -> None:
        """Commit what is pending if the window is full or old."""

    def out_of_time(self) -> bool:
        """Whether the study's time budget is spent."""


def config_keys(run: WorkloadRun, configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The store's identity of each config of the run's space."""
    return [config_key(run.ctx.space.name, c) for c in configs]


def chunked(count: int, size: int) -> Iterator[slice]:
    """Slices of ``range(count)`` of at most ``size`` (a round of a slow evaluator)."""
    for start in range(0, count, max(size, 1)):
        yield slice(start, start + max(size, 1))
