"""Parameter domains and the batch representation shared by every search space.

A *config batch* is a dict from parameter name to an int64 numpy array, one entry per config.
Choice parameters are stored as the index of the choice, so the whole batch stays numeric and
cost models vectorise over it.
"""

from __future__ import annotations

import numbers
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.errors import UsageError

ConfigBatch = dict[str, np.ndarray]


def require_dtype(target: Any, workload: Any) -> None:
    """Refuse a workload whose dtype pair the target does not support."""
    if workload.dtype.name not in target.dtypes:
        raise UsageError(f"dtype {workload.dtype.name!r} is not supported on {target.name}; "
                         f"valid: {', '.join(target.dtypes)}")


INT_LIMIT = 2**31 - 1  # the largest parameter value a space accepts
_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")


@dataclass(frozen=True)
class IntParam:
    """An integer parameter; ``lo``/``hi`` bound the user-facing values (``hi`` may be None)."""

    name: str
    help: str
    lo: int = 1
    hi: int | None = None

    def parse(self, text: str | int) -> int:
        """The value of ``text`` (an int, or its decimal string), checked against the bounds."""
        value = None
        if isinstance(text, bool | np.bool_):  # True is an int to Python, not to a user
            pass
        elif isinstance(text, numbers.Integral):
            value = int(text)
        elif isinstance(text, float | np.floating) and float(text).is_integer():
            value = int(text)  # pandas stores integer columns with gaps as floats
        elif isinstance(text, str) and _INTEGER.fullmatch(text):
            value = int(text)
        if value is None:
            raise UsageError(f"parameter {self.name}: {text!r} is not an integer")
        hi = INT_LIMIT if self.hi is None else self.hi  # beyond it, arrays would overflow
        if value < self.lo or value > hi:
            upper = f" and <= {hi}"
            raise UsageError(f"parameter {self.name}: {value} must be >= {self.lo}{upper}")
        return value

    def encode(self, value: int) -> int:
        return int(value)

    def decode(self, code: int) -> int:
        return int(code)


@dataclass(frozen=True)
class ChoiceParam:
    """A parameter with a fixed, ordered set of string choices."""

    name: str
    help: str
    choices: tuple[str, ...]

    def parse(self, text: str | int) -> str:
        if text not in self.choices:
            raise UsageError(
                f"parameter {self.name}: unknown value {text!r}; valid: {', '.join(self.choices)}"
            )
        return str(text)

    def encode(self, value: str) -> int:
        return self.choices.index(value)

    def decode(self, code: int) -> str:
        return self.choices[int(code)]


Param = IntParam | ChoiceParam


@dataclass(frozen=True)
class Rule:
    """A constraint: ``check(context)`` is a bool array (True: satisfied) and
    ``explain(context, i)`` says, with the numbers, why config ``i`` breaks it."""

    name: str
    doc: str
    check: Any
    explain: Any


@dataclass(frozen=True)
class Feasibility:
    """Result of checking a batch: which configs are feasible and the first rule each breaks."""

    ok: np.ndarray
    first_failed: np.ndarray  # index into the space's constraints, -1 when feasible


def batch_from_dicts(params: Mapping[str, Param], configs: list[Mapping[str, Any]]) -> ConfigBatch:
    """Encode resolved configs (every parameter present) into a config batch."""
    return {
        name: np.array([p.encode(c[name]) for c in configs], dtype=np.int64)
        for name, p in params.items()
    }


def batch_to_dicts(params: Mapping[str, Param], batch: ConfigBatch) -> list[dict[str, Any]]:
    """Decode a config batch into one parameter dict per config."""
    n = batch_len(batch)
    columns = {name: batch[name].tolist() for name in params}
    return [{name: params[name].decode(columns[name][i]) for name in params} for i in range(n)]


def batch_len(batch: ConfigBatch) -> int:
    """How many configs ``batch`` holds (0 when it has no parameters)."""
    return len(next(iter(batch.values()))) if batch else 0


def batch_take(batch: ConfigBatch, index: np.ndarray) -> ConfigBatch:
    """The configs of ``batch`` at ``index`` (positions or a boolean mask)."""
    return {name: values[index] for name, values in batch.items()}


class SearchSpaceBase(ABC):
    """Parameter handling and rule checking shared by every search space.

    A subclass sets ``_params`` (name -> domain), ``constraints`` (rules with ``name``,
    ``check(context) -> bool array`` and ``explain(context, i) -> str``), ``required`` (parameters
    without a default) and implements :meth:`defaults` and :meth:`chunks`; :meth:`_context` says
    what a rule receives (the batch itself by default).
    """

    name: str
    workload_kind: str = "gemm"  # the kind of workload it tunes (dse.workload.WORKLOAD_KINDS)
    required: tuple[str, ...] = ()
    _params: dict[str, Param]
    constraints: tuple[Any, ...]

    def _accept(self, target: Any, workload: Any, extra_constraints: Sequence[str],
                optional: Sequence[str] = ()) -> None:
        """Refuse a dtype the target lacks and optional constraints the space does not have."""
        require_dtype(target, workload)
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

    def params(self) -> dict[str, Param]:
        """Every parameter with its fixed domain."""
        return dict(self._params)

    @abstractmethod
    def defaults(self) -> dict[str, Any]:
        """Default values of the parameters that have one."""

    @abstractmethod
    def chunks(self, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = ()) -> Iterator[tuple[ConfigBatch, int]]:
        """The configs to search, in batches, each with the size of the box it came from."""

    def tie_order(self, batch: ConfigBatch) -> np.ndarray | None:
        """Which of the configs a cheaper rung scores alike a ladder passes on first (lower
        first); None keeps the order they were enumerated in."""
        return None

    def _context(self, batch: ConfigBatch) -> Any:
        return batch

    def _all_rules(self) -> tuple[Any, ...]:
        return self.constraints

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
        return batch_from_dicts(self._params, list(configs))

    def decode(self, batch: ConfigBatch) -> list[dict[str, Any]]:
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
        return {name: np.concatenate([p[name] for p in parts]) for name in self._params}, n_total
