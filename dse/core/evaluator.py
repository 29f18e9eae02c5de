"""The evaluator contract shared by every fidelity (analytical, simulator, hardware).

An evaluator subclasses :class:`Evaluator`: it scores batches of *feasible* configs
(:meth:`Evaluator.evaluate_feasible`); :meth:`Evaluator.evaluate` adds the space's feasibility
check around it. What it can do beyond that is declared in :class:`Capabilities`, never
guessed. Expected failures are results: a config that does not compile or times out comes back
as a result, and so does one whose evaluation raises :class:`EvaluationFailed` or an
exception the evaluator declares in ``expected_errors``. A :class:`DseError` (a usage problem
found late) propagates as it is; any other exception is a bug: it propagates as
:class:`EvaluatorError` with its traceback, and nothing is stored for the configs.
"""

from __future__ import annotations

import traceback
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from dse.core.errors import DseError, UsageError
from dse.core.params import ConfigBatch, batch_len, batch_take
from dse.core.results import EvalResult, Status

if TYPE_CHECKING:
    from dse.core.space import SearchSpace
    from dse.core.target import Target
    from dse.core.workload import Workload


@dataclass(frozen=True)
class EvalContext:
    """What an evaluator needs besides the configs: the target, the workload and its space."""

    target: Target
    workload: Workload
    space: SearchSpace


@dataclass(frozen=True)
class Capabilities:
    """What an evaluator can do besides :meth:`Evaluator.evaluate`."""

    score: bool = False  # score(batch, ctx): metric arrays at once (exhaustive search, ladders)
    timeline: bool = False  # simulate(one, ctx, trace_path): a Chrome trace of one config
    offline: bool = False  # offline_job(params, ctx): a job for the offline runner
    raw_output: bool = False  # offline_result(entry): a result from a command job's output


class EvaluationFailed(Exception):
    """Raised by an evaluator for a failure that is the configs' own (say a kernel that takes
    the device down): the configs are recorded as failed with the message as the reason."""


class EvaluatorError(Exception):
    """An evaluator raised an exception it does not declare (a bug): ``details`` is its
    traceback; nothing was stored for the configs it was evaluating."""

    def __init__(self, evaluator: str, details: str) -> None:
        super().__init__(evaluator, details)  # both in args: it crosses processes pickled
        self.evaluator, self.details = evaluator, details

    def __str__(self) -> str:
        return (f"evaluator {self.evaluator!r} raised an error it does not declare as an "
                "expected failure (a bug, not a result: nothing was stored for the configs it "
                f"was evaluating):\n{self.details.rstrip()}")


class Evaluator(ABC):
    """Scores a batch of configurations; expected failures come back as results.

    Class attributes: ``name``, ``version`` (a change to what it reports needs a new one: the
    store serves results by name and version), ``fidelity`` (a registered one:
    :mod:`dse.core.fidelity`), ``spaces`` (the search spaces it can score), ``result_options``
    (constructor options that change what it reports, not only how fast: a result is served
    only to a study that gives them the same values), ``capabilities``, ``device`` (a name
    shared by evaluators that may not run at once) and ``expected_errors``. Constructor
    keywords are its options.
    """

    name: ClassVar[str]
    version: str  # a class attribute; build_evaluator extends it for result options
    fidelity: ClassVar[str]
    spaces: ClassVar[tuple[str, ...]]
    result_options: ClassVar[tuple[str, ...]] = ()
    capabilities: ClassVar[Capabilities] = Capabilities()
    device: ClassVar[str | None] = None
    # exceptions that are the configs' fault, recorded as failed (EvaluationFailed always is)
    expected_errors: ClassVar[tuple[type[Exception], ...]] = ()

    @abstractmethod
    def evaluate_feasible(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        """One result per config of ``batch``, by position (a result holds no parameters: the
        caller has them), every config feasible by the
        space's rules: ``ok`` with metrics, or ``infeasible`` / ``failed`` / ``timeout`` with a
        reason (an evaluator may have rules of its own, or fail to measure)."""

    def evaluate(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        """One result per config of ``batch``, by position: those the space's rules refuse
        are infeasible with every rule they break, the rest go to :meth:`evaluate_feasible`."""
        feasibility = ctx.space.check(batch)
        ok = np.flatnonzero(feasibility.ok)
        if len(ok) == len(feasibility.ok):
            return run_feasible(self, batch, ctx)
        results: list[EvalResult | None] = [
            None if fits else EvalResult(Status.INFEASIBLE, reason=ctx.space.explain(batch, i))
            for i, fits in enumerate(feasibility.ok)]
        if len(ok):
            for i, result in zip(ok, run_feasible(self, batch_take(batch, ok), ctx),
                                 strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    def unavailable(self) -> str | None:
        """Why this machine cannot run the evaluator (a missing GPU or toolchain), or None."""
        return None

    def close(self) -> None:  # noqa: B027 - most evaluators hold nothing
        """Release what the evaluator holds (worker processes); it may be used again after."""

    # -- declared capabilities: dse calls one only when ``capabilities`` declares it (the
    # conformance suite checks the two agree), so these defaults only name what is missing --
    def score(self, batch: ConfigBatch, ctx: EvalContext) -> dict[str, np.ndarray]:
        """Metric arrays for a batch of feasible configs (``capabilities.score``)."""
        raise NotImplementedError(f"evaluator {self.name!r} does not score arrays")

    def simulate(self, one: ConfigBatch, ctx: EvalContext,
                 trace_path: str | Path | None = None) -> dict[str, Any]:
        """Metrics of one feasible config, writing its timeline to ``trace_path``
        (``capabilities.timeline``)."""
        raise NotImplementedError(f"evaluator {self.name!r} records no timeline")

    def offline_job(self, params: dict[str, Any], ctx: EvalContext) -> dict[str, Any] | str:
        """The offline runner's job for one config, or why it cannot be run
        (``capabilities.offline``)."""
        raise NotImplementedError(f"evaluator {self.name!r} does not run offline")

    def offline_result(self, entry: dict[str, Any]) -> EvalResult:
        """The result of a runner's raw output (``capabilities.raw_output``)."""
        raise NotImplementedError(f"evaluator {self.name!r} reads no raw output")


def require_fits(evaluator: Evaluator, ctx: EvalContext) -> None:
    """Refuse an evaluator that cannot score the configs of ``ctx``'s search space."""
    if ctx.space.name not in evaluator.spaces:
        raise UsageError(f"evaluator {evaluator.name!r} measures {', '.join(evaluator.spaces)} "
                         f"configs, not {ctx.space.name} ones (target {ctx.target.name})")


def failed_results(batch: ConfigBatch, error: str) -> list[EvalResult]:
    """A failed result with reason ``error`` for every config of ``batch``."""
    return [EvalResult(Status.FAILED, reason=error)] * batch_len(batch)


def run_feasible(evaluator: Evaluator, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
    """``evaluator.evaluate_feasible``; an exception it declares (or
    :class:`EvaluationFailed`) fails the configs, a
    :class:`DseError` (a usage problem found late) propagates as it is, and any other is
    raised as :class:`EvaluatorError` with its traceback."""
    try:
        return evaluator.evaluate_feasible(batch, ctx)
    except EvaluationFailed as exc:  # its message is the reason
        return failed_results(batch, str(exc))
    except evaluator.expected_errors as exc:
        return failed_results(batch, f"{type(exc).__name__}: {exc}")
    except DseError:
        raise
    except Exception as exc:
        raise EvaluatorError(evaluator.name, traceback.format_exc()) from exc


def score_batch(evaluator: Evaluator, batch: ConfigBatch,
                ctx: EvalContext) -> dict[str, np.ndarray]:
    """Metric arrays of feasible configs: vectorised when the evaluator can, else one result at
    a time (a failed one is a :class:`UsageError`)."""
    if evaluator.capabilities.score:
        return evaluator.score(batch, ctx)
    results = run_feasible(evaluator, batch, ctx)
    failed = [i for i, r in enumerate(results) if not r.ok]
    if failed:
        config = ctx.space.decode(batch_take(batch, np.array(failed[:1])))[0]
        raise UsageError(f"evaluator {evaluator.name!r} failed on {config}: "
                         f"{results[failed[0]].reason}")
    return {name: np.array([r.metrics[name] for r in results]) for name in results[0].metrics}
