"""Hardware targets as data: what the core asks of a target, and the tools a family uses to read
its target files into frozen dataclasses.

A target file is TOML whose ``space`` key names the family (its search space); the family's
reader (:attr:`dse.core.family_record.Family.read_target`) checks every key and builds the target. A
malformed file raises :class:`TargetFileError` naming the file, the key and the problem.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import typing
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from dse.core.dtypes import DTYPE_PAIRS
from dse.core.errors import TargetFileError

ZERO_OK = {"min": 0.0}  # field metadata: value may be zero (default: strictly positive)


@runtime_checkable
class Target(Protocol):
    """What the core needs of any target."""

    name: str
    description: str
    space: str  # the family (search space) whose rules and models apply
    dtypes: tuple[str, ...]
    source: str  # the file it was read from

    def to_dict(self) -> dict[str, Any]:
        """Every constant (not the file's path), as stored with a study."""

    def digest(self) -> str:
        """Content hash of the constants: a study never mixes two sets of them."""

    def compute_units(self) -> tuple[str, float | None]:
        """What computes (for listings, e.g. ``4x8`` or ``132 SMs``) and its clock in Hz."""

    def occupancy(self, values: Mapping[str, float]) -> list[tuple[str, float, float, str]]:
        """(resource, used, available, unit) of a config's on-chip resources, from its
        parameters and metrics (``values``)."""

    def roofline(self, input_type: str | None = None) -> tuple[float, float] | None:
        """(peak operations/s for an input type, memory bytes/s), or None without a roofline."""

    def with_values(self, **sections: Mapping[str, Any]) -> Target:
        """A copy with some constants changed, e.g. ``dram={"peak_bytes_per_s": 2e11}``."""


def digest_of(constants: Mapping[str, Any]) -> str:
    """A target's identity: the hash of its constants as canonical JSON."""
    canonical = json.dumps(constants, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class TargetConstants:
    """What every dataclass target shares: its constants as a dict (without the file's path),
    their digest, edited copies; no compute units, occupancy or roofline unless the family
    says."""

    dtypes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)  # type: ignore[call-overload]
        data.pop("source")
        data["dtypes"] = list(self.dtypes)
        return data

    def digest(self) -> str:
        return digest_of(self.to_dict())

    def compute_units(self) -> tuple[str, float | None]:
        return "-", None

    def occupancy(self, values: Mapping[str, float]) -> list[tuple[str, float, float, str]]:
        return []

    def roofline(self, input_type: str | None = None) -> tuple[float, float] | None:
        return None

    def with_values(self, **sections: Mapping[str, Any]) -> Any:
        changes = {name: dataclasses.replace(getattr(self, name), **values)
                   for name, values in sections.items()}
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def with_dotted(target: Any, values: Mapping[str, Any]) -> Any:
    """``target`` with the constants named ``section.key`` replaced."""
    sections: dict[str, dict[str, Any]] = {}
    for dotted, value in values.items():
        section, key = dotted.split(".")
        sections.setdefault(section, {})[key] = value
    return target.with_values(**sections)


def dotted_value(target: Any, dotted: str) -> Any:
    """The constant named ``section.key`` of ``target``."""
    section, key = dotted.split(".")
    return getattr(getattr(target, section), key)


def check_dtypes(raw: Any, source: str) -> tuple[str, ...]:
    """A target file's ``dtypes``: a non-empty list of known dtype pairs."""
    if not isinstance(raw, list) or not raw:
        raise TargetFileError(f"{source}: key 'dtypes': expected a non-empty list of dtype pairs")
    for pair in raw:
        if pair not in DTYPE_PAIRS:
            raise TargetFileError(
                f"{source}: key 'dtypes': unknown pair {pair!r}; valid: {', '.join(DTYPE_PAIRS)}")
    return tuple(raw)


def family_sections(cls: type, raw: Mapping[str, Any], source: str,
                    sections: tuple[str, ...]) -> dict[str, Any]:
    """Check a target file's keys against the fields of ``cls`` and its dtypes; build its
    ``sections`` (tables of dataclasses) and return them with name, description, space, dtypes
    and source, ready for ``cls(**...)``."""
    check_keys(raw, {f.name for f in dataclasses.fields(cls)} - {"source"}, source, "")
    dtypes = check_dtypes(raw["dtypes"], source)
    hints = typing.get_type_hints(cls)
    return {"name": str(raw["name"]), "description": str(raw["description"]),
            "space": str(raw["space"]), "dtypes": dtypes, "source": source,
            **{name: build_section(hints[name], raw[name], source, name) for name in sections}}


def check_keys(table: Any, allowed: set[str], source: str, prefix: str) -> None:
    """Refuse a table that is not one, or has an unknown or a missing key."""
    where = f"table '{prefix}'" if prefix else "the top level"
    if not isinstance(table, Mapping):
        raise TargetFileError(f"{source}: key '{prefix}': expected a table")
    for key in table:
        if key not in allowed:
            raise TargetFileError(
                f"{source}: unknown key '{_join(prefix, key)}' in {where}; "
                f"valid: {', '.join(sorted(allowed))}"
            )
    for key in sorted(allowed):
        if key not in table:
            raise TargetFileError(f"{source}: missing key '{_join(prefix, key)}'")


def build_section(cls: type, table: Any, source: str, prefix: str) -> Any:
    """The dataclass ``cls`` from a table whose keys are exactly its fields, each checked."""
    fields = dataclasses.fields(cls)
    check_keys(table, {f.name for f in fields}, source, prefix)
    hints = typing.get_type_hints(cls)
    return cls(**{
        f.name: scalar(hints[f.name], table[f.name], source, _join(prefix, f.name), f.metadata)
        for f in fields
    })


def scalar(kind: Any, value: Any, source: str, key: str, meta: Mapping[str, Any]) -> Any:
    """One value of a target file checked against its field's type: a bool, a string, or a
    finite number (positive unless the field's metadata gives a ``min``)."""
    def fail(expected: str) -> TargetFileError:
        return TargetFileError(f"{source}: key '{key}': expected {expected}, got {value!r}")

    if kind is bool:
        if not isinstance(value, bool):
            raise fail("true or false")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise fail("a string")
        return value
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise fail("a finite number")
        if kind is int and not float(value).is_integer():
            raise fail("an integer")
        minimum = meta.get("min")
        if minimum is None and value <= 0:
            raise fail("a positive number")
        if minimum is not None and value < minimum:
            raise fail(f"a number >= {minimum}")
        return kind(value)
    raise TypeError(f"unsupported field type {kind!r} for {key}")  # programming error


def rewrite_toml(text: str, values: Mapping[str, float]) -> str:
    """``text`` with the numbers of the given dotted keys replaced, layout and comments kept."""
    section = ""
    lines = []
    for line in text.splitlines(keepends=True):
        header = re.match(r"^\[([^\]]+)\]", line)
        if header:
            section = header.group(1)
        assign = re.match(r"^(\w+)(\s*=\s*)([^#\s]+)(.*)$", line, re.DOTALL)
        if assign and f"{section}.{assign.group(1)}" in values:
            value = values[f"{section}.{assign.group(1)}"]
            number = f"{0.0 if abs(value) < 1e-9 else value:.6g}"
            if "." not in number and "e" not in number:
                number += ".0"
            line = f"{assign.group(1)}{assign.group(2)}{number}{assign.group(4)}"
        lines.append(line)
    return "".join(lines)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
