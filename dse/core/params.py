"""Parameter domains, rules and the batch representation every search space shares.

A *config batch* is a dict from parameter name to an int64 numpy array, one entry per config.
Choice parameters are stored as the index of the choice, so the whole batch stays numeric and
cost models vectorise over it.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.core.errors import UsageError

ConfigBatch = dict[str, np.ndarray]

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
        """The batch code of ``value`` (the value itself)."""
        return int(value)

    def decode(self, code: int) -> int:
        """The value of a batch code."""
        return int(code)


@dataclass(frozen=True)
class ChoiceParam:
    """A parameter with a fixed, ordered set of string choices."""

    name: str
    help: str
    choices: tuple[str, ...]

    def parse(self, text: str | int) -> str:
        """``text`` if it is one of the choices."""
        if text not in self.choices:
            raise UsageError(
                f"parameter {self.name}: unknown value {text!r}; valid: {', '.join(self.choices)}"
            )
        return str(text)

    def encode(self, value: str) -> int:
        """The batch code of ``value``: its index among the choices."""
        return self.choices.index(value)

    def decode(self, code: int) -> str:
        """The choice a batch code stands for."""
        return self.choices[int(code)]


Param = IntParam | ChoiceParam


@dataclass(frozen=True)
class Rule:
    """A constraint: ``check(context)`` is a bool array (True: satisfied) and
    ``explain(context, i)`` says, with the numbers, why config ``i`` breaks it. The context is
    what the space's ``_context`` makes of a batch (the batch itself by default)."""

    name: str
    doc: str
    check: Callable[[Any], np.ndarray]
    explain: Callable[[Any, int], str]


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


def batch_concat(parts: list[ConfigBatch], names: list[str]) -> ConfigBatch:
    """The configs of ``parts`` in one batch (each of ``names`` joined in order)."""
    return {name: np.concatenate([p[name] for p in parts]) for name in names}
