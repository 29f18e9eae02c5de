"""Parameter domains and the batch representation shared by every search space.

A *config batch* is a dict from parameter name to an int64 numpy array, one entry per config.
Choice parameters are stored as the index of the choice, so the whole batch stays numeric and
cost models vectorise over it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.errors import UsageError

ConfigBatch = dict[str, np.ndarray]


@dataclass(frozen=True)
class IntParam:
    """An integer parameter; ``lo``/``hi`` bound the user-facing values (``hi`` may be None)."""

    name: str
    help: str
    lo: int = 1
    hi: int | None = None

    def parse(self, text: str | int) -> int:
        try:
            value = int(text)
        except (TypeError, ValueError):
            raise UsageError(f"parameter {self.name}: {text!r} is not an integer") from None
        if value < self.lo or (self.hi is not None and value > self.hi):
            upper = "" if self.hi is None else f" and <= {self.hi}"
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
    return len(next(iter(batch.values()))) if batch else 0


def batch_take(batch: ConfigBatch, index: np.ndarray) -> ConfigBatch:
    return {name: values[index] for name, values in batch.items()}
