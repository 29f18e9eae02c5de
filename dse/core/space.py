"""The search space contract: parameters, rules, enumeration, Optuna encoding and the family's
own tables (what names a config, the balance plots' axes, what-if knobs, calibratable
constants, the tie order). A walk to the balance point that a family has of its own is the
family's (:class:`dse.core.family_record.BalanceProcedure`): it takes an evaluator, which scores a
space's configs, so the space knows nothing of evaluators.

A family subclasses :class:`SearchSpace`; its constructor takes ``(target, workload,
extra_constraints=())``. Everything the core asks of a space is a method or class attribute
here, each with a default where one makes sense, so a new family implements the few that are
its own (``defaults``, ``chunks``, ``optuna_encoding``) and declares the rest.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from dse.core.errors import UsageError
from dse.core.params import (
    ConfigBatch,
    Feasibility,
    Param,
    Rule,
    batch_concat,
    batch_from_dicts,
    batch_len,
    batch_take,
    batch_to_dicts,
)

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution

    from dse.core.target import Target
    from dse.core.tree import SearchTree
    from dse.core.workload import Workload


def require_dtype(target: Any, workload: Any) -> None:
    """Refuse a workload whose dtype pair the target does not support."""
    if workload.dtype.name not in target.dtypes:
        raise UsageError(f"dtype {workload.dtype.name!r} is not supported on {target.name}; "
                         f"valid: {', '.join(target.dtypes)}")


class OptunaEncoding(Protocol):
    """Fixed Optuna distributions of a space under a study's overrides, and their decoding.

    Optuna cannot change a parameter's domain between trials, while the values that fit often
    depend on one another: a space samples fixed-domain coordinates and decodes them into
    configs (every parameter present)."""

    def distributions(self) -> dict[str, BaseDistribution]:
        """Name -> distribution of every sampled coordinate."""

    def decode(self, sampled: Mapping[str, Any]) -> dict[str, Any]:
        """The full config of one sampled point."""


@dataclass(frozen=True)
class Calibratable:
    """A target constant ``dse calibrate`` may refit (``section.key`` of the target file), with
    the value it may not pass (shares of a peak stay at most 1)."""

    section: str
    key: str
    upper: float | None = None

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.key}"


@dataclass(frozen=True)
class Breakdown:
    """Metrics that split one quantity into parts (energy per access level, efficiency
    factors), drawn as bars on a config's page and, for the best configs, on the study's:
    ``parts`` maps metric -> label; ``stacked`` when the parts add up to a whole; ``unit``
    labels the axis (``share``: fractions, drawn as percentages)."""

    title: str
    unit: str
    parts: Mapping[str, str]
    stacked: bool = True


# The time components every family's evaluators may report, with their labels (a family adds
# its own in ``time_parts``).
COMMON_TIME_PARTS: dict[str, str] = {"t_comp_s": "compute (t_comp)", "t_mem_s": "DRAM (t_mem)",
                                     "t_core_s": "core busy + stalls"}


class SearchSpace(ABC):
    """Parameter handling and rule checking shared by every search space.

    A subclass sets ``_params`` (name -> domain), ``constraints`` (rules, optional ones last),
    ``required`` (parameters without a default), ``target`` and ``workload``, and implements
    :meth:`defaults`, :meth:`chunks` and :meth:`optuna_encoding`; :meth:`_context` says what
    a rule receives (the batch itself by default).
    """

    name: ClassVar[str]
    workload_kind: ClassVar[str] = "gemm"  # the kind of workload it tunes (dse.workloads)
    required: ClassVar[tuple[str, ...]] = ()
    # the parameters that name a config in tables and listings (its tile sizes)
    kernel_keys: ClassVar[tuple[str, ...]] = ()
    # the output tile's rows, columns and depth: the axes of the balance plots (None: no plots)
    tile_axes: ClassVar[tuple[str, str, str] | None] = None
    # target constants dse calibrate may refit against measurements
    calibratable: ClassVar[tuple[Calibratable, ...]] = ()
    # metric -> label of the time components the family's evaluators report beyond the common
    time_parts: ClassVar[Mapping[str, str]] = {}
    # quantities the family's evaluators report in parts (see Breakdown)
    breakdowns: ClassVar[tuple[Breakdown, ...]] = ()
    # rules a study may add by name (space.constraints), each checked after the space's own
    optional_constraints: ClassVar[Mapping[str, Rule]] = {}
    # metrics of the family's models a study may optimise beyond dse's standard ones, with
    # the direction each is optimised in by default ("maximize" or "minimize")
    objective_metrics: ClassVar[Mapping[str, str]] = {}

    target: Target
    workload: Workload
    _params: dict[str, Param]
    constraints: tuple[Rule, ...]

    def _accept(self, target: Any, workload: Any, extra_constraints: Sequence[str]) -> None:
        """Refuse a dtype the target lacks and optional constraints the space does not have."""
        require_dtype(target, workload)
        optional = tuple(self.optional_constraints)
        unknown = [c for c in extra_constraints if c not in optional]
        if unknown:
            raise UsageError(f"unknown constraint {unknown[0]!r}; " + (
                f"valid: {', '.join(optional)}" if optional
                else f"the {self.name} space has no optional constraints"))

    def _fixed_and_free(self, fix: Mapping[str, Any] | None, free: Iterable[str],
                        overlap_ok: bool = False) -> tuple[dict[str, Any], list[str]]:
        """``fix`` parsed and ``free`` checked against the parameters (and, unless
        ``overlap_ok``, against ``fix``)."""
        fixed, free = self.parse(fix or {}), list(free)
        for name in free:
            if name not in self._params:
                raise UsageError(f"unknown parameter {name!r}; valid: {', '.join(self._params)}")
            if name in fixed and not overlap_ok:
                raise UsageError(f"parameter {name!r} is both fixed and free")
        return fixed, free

    # -- what a family implements -----------------------------------------------------------
    @abstractmethod
    def defaults(self) -> dict[str, Any]:
        """Default values of the parameters that have one."""

    @abstractmethod
    def chunks(self, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = ()) -> Iterator[tuple[ConfigBatch, int]]:
        """The configs to search, in batches, each with the size of the box it came from."""

    @abstractmethod
    def optuna_encoding(self, fix: Mapping[str, Any], free: Sequence[str],
                        ranges: Mapping[str, tuple[int, int]]) -> OptunaEncoding:
        """Fixed Optuna distributions for this space with a study's overrides."""

    def chunks_within(self, fix: Mapping[str, Any] | None, free: Iterable[str],
                      ranges: Mapping[str, tuple[int, int]]) -> Iterator[tuple[ConfigBatch, int]]:
        """:meth:`chunks` for a study whose ``ranges`` narrow integer parameters: the caller
        still filters with :meth:`within`; a space whose chunks are many (hardware a study
        frees) overrides this to skip the values outside the ranges."""
        return self.chunks(fix, free)

    def n_chunks(self, free: Iterable[str] = ()) -> int:
        """How many batches :meth:`chunks` yields for these free parameters (for progress)."""
        return sum(1 for _ in self.chunks(free=free))

    def tie_order(self, batch: ConfigBatch) -> np.ndarray | None:
        """Which of the configs a cheaper rung scores alike a ladder passes on first (lower
        first); None keeps the order they were enumerated in."""
        return None

    def describe(self, params: Mapping[str, Any]) -> str:
        """A config in a few characters for one line of a table (its kernel keys)."""
        keys = [k for k in self.kernel_keys if k in params]
        return "x".join(str(params[k]) for k in keys) if keys else str(dict(params))

    def what_if_knobs(self) -> dict[str, Callable[[float], Target]]:
        """Name -> edit of the target by a factor, for dse balance's what-if table (memory
        bandwidth, on-chip memory, clock): none by default."""
        return {}

    def search_tree(self, fix: Mapping[str, Any] | None = None,
                    free: Iterable[str] = ()) -> SearchTree | None:
        """The space (as :meth:`chunks` walks it) split into levels with upper bounds of the
        family's analytical model, for an exact search that prunes (see :mod:`dse.core.tree`),
        or None: then every config is scored."""
        return None

    def smallest_config(self, fix: Mapping[str, Any]) -> dict[str, Any] | None:
        """A config to explain when a narrowed space generates nothing at all (its smallest
        aligned tiles with ``fix`` applied), or None."""
        return None

    # -- shared by every space ---------------------------------------------------------------
    def _context(self, batch: ConfigBatch) -> Any:
        return batch

    def _all_rules(self) -> tuple[Rule, ...]:
        return self.constraints + tuple(r for r in self.optional_constraints.values()
                                        if r not in self.constraints)

    def params(self) -> dict[str, Param]:
        """Every parameter with its fixed domain."""
        return dict(self._params)

    def parse(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Check names and values of user-given parameters (strings allowed), no defaults."""
        out: dict[str, Any] = {}
        for name, value in given.items():
            if name not in self._params:
                raise UsageError(f"unknown parameter {name!r}; valid: {', '.join(self._params)}")
            out[name] = self._params[name].parse(value)
        return out

    def resolve(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """User parameters with defaults filled in; every required one must be given."""
        params = {**self.defaults(), **self.parse(given)}
        missing = [p for p in self.required if p not in params]
        if missing:
            raise UsageError(f"missing parameter(s) {', '.join(missing)}: they have no default "
                             "(give them with --param NAME=VALUE)")
        return {name: params[name] for name in self._params}

    def encode(self, configs: Sequence[Mapping[str, Any]]) -> ConfigBatch:
        """Resolved configs as a batch."""
        return batch_from_dicts(self._params, list(configs))

    def decode(self, batch: ConfigBatch) -> list[dict[str, Any]]:
        """A batch as one parameter dict per config."""
        return batch_to_dicts(self._params, batch)

    def check(self, batch: ConfigBatch) -> Feasibility:
        """Evaluate every rule on the batch (vectorised); keep the first each config breaks."""
        context = self._context(batch)
        first = np.full(batch_len(batch), -1, dtype=np.int64)
        for index, rule in enumerate(self.constraints):
            first[~rule.check(context) & (first < 0)] = index
        return Feasibility(ok=first < 0, first_failed=first)

    def satisfies(self, rule: str, batch: ConfigBatch) -> np.ndarray:
        """Whether each config satisfies one named rule (optional rules included)."""
        rules = {r.name: r for r in self._all_rules()}
        return rules[rule].check(self._context(batch))

    def explain(self, batch: ConfigBatch, i: int, rules: int | None = None) -> str | None:
        """Why config ``i`` is infeasible (every rule it breaks, of the first ``rules`` when
        given), or None when it is feasible."""
        context = self._context(batch_take(batch, np.array([i])))
        reasons = [rule.explain(context, 0) for rule in self.constraints[:rules]
                   if not rule.check(context)[0]]
        return "; ".join(reasons) if reasons else None

    def enumerate(self, fix: Mapping[str, Any] | None = None,
                  free: Iterable[str] = ()) -> tuple[ConfigBatch, int]:
        """All configs of :meth:`chunks` in one batch, and the size of the parameter box."""
        parts, n_total = [], 0
        for part, box in self.chunks(fix, free):
            parts.append(part)
            n_total += box
        return batch_concat(parts, list(self._params)), n_total

    def within(self, batch: ConfigBatch, ranges: Mapping[str, tuple[int, int]]) -> np.ndarray:
        """Whether each config's integer parameters lie in a study's ``ranges``."""
        ok = np.ones(batch_len(batch), dtype=bool)
        for name, (lo, hi) in ranges.items():
            ok &= (batch[name] >= lo) & (batch[name] <= hi)
        return ok

    def why_empty(self, fix: Mapping[str, Any], free: Iterable[str],
                  ranges: Mapping[str, tuple[int, int]]) -> str | None:
        """None when a config of the narrowed space is feasible; else which rules (or the
        ranges, for configs only they refuse) rejected the configs and how many each (what the
        smallest config breaks when none was generated)."""
        counts: dict[str, int] = {}
        for batch, _ in self.chunks_within(fix, free, ranges):
            feasibility = self.check(batch)
            inside = self.within(batch, ranges)
            if (feasibility.ok & inside).any():
                return None
            for index in feasibility.first_failed[feasibility.first_failed >= 0]:
                rule = self.constraints[int(index)].name
                counts[rule] = counts.get(rule, 0) + 1
            outside = int((feasibility.ok & ~inside).sum())
            if outside:
                counts["the ranges"] = counts.get("the ranges", 0) + outside
        if counts:
            return ", ".join(f"{k} ({v:,})" for k, v in sorted(counts.items(),
                                                               key=lambda kv: -kv[1]))
        probe = self.smallest_config(fix)
        if probe is None:
            return "the ranges"
        return self.explain(self.encode([self.resolve(probe)]), 0) or "the ranges"
