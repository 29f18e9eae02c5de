"""Reading a study file's mapping: typed values, each error naming the file and the key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dse.core import limits
from dse.core.errors import UsageError

MISSING = object()  # a key the file does not give


class StudyFileError(UsageError):
    """A study file is malformed."""


class Reader:
    """Typed access to a YAML mapping that reports the file and the dotted key on errors."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, value: Any, allowed: str) -> StudyFileError:
        shown = "missing" if value is MISSING else limits.shown(value)
        return StudyFileError(f"{self.source}: key '{key}': {shown} is not valid; {allowed}")

    def limited(self, value: Any, key: str, limit: str | None = None) -> Any:
        """``value`` if it lies in the range :data:`dse.core.limits.NUMBERS` gives ``limit``
        (default: ``key``), else a :class:`StudyFileError`."""
        problem = limits.out_of_range(limit or key, value)
        if problem:
            raise self.fail(key, value, problem)
        return value

    def mapping(self, value: Any, key: str, allowed_keys: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(key, value, "expected a mapping")
        for k in value:
            if k not in allowed_keys:
                where = f"{key}.{k}" if key else str(k)
                raise StudyFileError(f"{self.source}: unknown key '{where}'; allowed: "
                                     f"{', '.join(allowed_keys)}")
        return dict(value)

    def integer(self, value: Any, key: str, minimum: int, limit: str | None = None) -> int:
        """A whole number >= ``minimum``, within its range in the limit table (``limit``, by
        default ``key``, when the table has it)."""
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(key, value, f"expected an integer >= {minimum}")
        if (limit or key) in limits.NUMBERS:
            self.limited(value, key, limit)
        return value

    def number(self, value: Any, key: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.fail(key, value, "expected a positive number")
        if key in limits.NUMBERS:
            self.limited(value, key)
        return float(value)

    def text(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, value, "expected a non-empty string")
        if len(value) > limits.TEXT_CHARS:
            raise self.fail(key, value, f"at most {limits.TEXT_CHARS:,} characters")
        if "\0" in value:  # PostgreSQL's text holds no NUL; no name or path has one
            raise self.fail(key, value, "a NUL character (\\0) is not allowed")
        return value

    def choice(self, value: Any, key: str, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(key, value, f"allowed: {', '.join(choices)}")
        return str(value)

    def str_list(self, value: Any, key: str) -> list[str]:
        items = value if isinstance(value, list) else [value]
        return [self.text(v, f"{key}[{i}]") for i, v in enumerate(items)]


