"""What a measured value in an ingested results file may be: one rule for every backend.

SQLite and PostgreSQL disagree about what they store: a NaN ``elapsed_s`` breaks SQLite's NOT
NULL and is kept by PostgreSQL, an infinity inside the metrics is kept by SQLite and refused by
PostgreSQL's JSON, a NUL character is kept by SQLite and refused by PostgreSQL's text, a long
host name fits SQLite and not PostgreSQL's column. So every number, text and nesting of a record
is checked here, against :mod:`dse.core.limits`, before anything of the file is stored, and a
value neither backend should hold is refused, naming the record and the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dse.core import limits
from dse.core.errors import UsageError
from dse.core.results import EvalResult


def check_result(result: EvalResult, where: str) -> None:
    """Refuse (:class:`UsageError`) a result whose time, reason or metrics no backend should
    store: a time outside ``ingest.elapsed_s``, a reason too long or holding a NUL, a metric
    that is not finite, too long, too deep or too big."""
    problem = limits.out_of_range("ingest.elapsed_s", result.elapsed_s)
    if problem:
        raise UsageError(f"{where}: elapsed_s: {problem}, got {limits.shown(result.elapsed_s)}")
    if result.reason is not None:
        problem = limits.text_problem(result.reason, "a reason", limits.REASON_CHARS)
        if problem:
            raise UsageError(f"{where}: reason: {problem}")
    _check_document(result.metrics, f"{where}.metrics")


def check_provenance(provenance: Mapping[str, Any], where: str) -> None:
    """Refuse a file's provenance (the host and the software that measured, stored with each of
    its results) that no backend should store; its host must fit the database's column."""
    host = provenance.get("host", "offline")
    problem = limits.text_problem(str(host), "a host name", limits.HOST_CHARS)
    if problem:
        raise UsageError(f"{where}.host: {problem}")
    _check_document(provenance, where)


def _check_document(document: Mapping[str, Any], where: str) -> None:
    problem = _problem(document, 0)
    if problem:
        place, why = problem
        raise UsageError(f"{where}{place}: {why}")


def _problem(value: Any, depth: int) -> tuple[str, str] | None:
    """Where in ``value`` (as a subscript path) a value no backend should store is, and why;
    None when every value may be stored."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        if abs(value) >= 2**limits.INTEGER_BITS:
            return "", f"an integer beyond {limits.INTEGER_BITS} bits ({limits.shown(value)})"
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else ("", f"not a finite number ({value})")
    if isinstance(value, str):
        problem = limits.text_problem(value, "a text", limits.TEXT_CHARS)
        return None if problem is None else ("", problem)
    if not isinstance(value, list | Mapping):
        return "", f"not a number, text, list or mapping (a {type(value).__name__})"
    if depth >= limits.YAML_DEPTH:
        return "", f"nested deeper than {limits.YAML_DEPTH} levels"
    if len(value) > limits.MEASURED_ITEMS:
        return "", f"more than {limits.MEASURED_ITEMS:,} items ({len(value):,})"
    items = value.items() if isinstance(value, Mapping) else enumerate(value)
    for key, item in items:
        if isinstance(key, str):
            problem = limits.text_problem(key, "a name", limits.NAME_CHARS)
            if problem:
                return f"[{limits.shown(key)}]", problem
        inner = _problem(item, depth + 1)
        if inner:
            return f"[{limits.shown(key)}]{inner[0]}", inner[1]
    return None
