"""Turn user input (target name/path, dtype, shape) into typed objects once, at the edge."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from dse.errors import UsageError
from dse.registry import evaluator_class, search_space_class
from dse.target import load_target
from dse.workload import workload_class
from evaluators.base import EvalContext


def build_context(target: str, dtype: str, shape: str, b_layout: str | None = None,
                  constraints: Sequence[str] = ()) -> EvalContext:
    """Load the target, parse the workload (of the kind its search space tunes; ``b_layout``
    None for that kind's default) and build the target's search space."""
    tgt = load_target(target)
    space_class = search_space_class(tgt.space)
    workload = workload_class(space_class.workload_kind).parse(shape, dtype, b_layout)
    space = space_class(tgt, workload, extra_constraints=tuple(constraints))
    return EvalContext(target=tgt, workload=workload, space=space)


def build_evaluator(name: str, options: Mapping[str, Any] | None = None) -> Any:
    """Instantiate the evaluator registered as ``name`` with keyword ``options``."""
    cls = evaluator_class(name)
    accepted = [p for p in inspect.signature(cls).parameters if p != "self"]
    unknown = sorted(set(options or {}) - set(accepted))
    if unknown:
        raise UsageError(f"evaluator {name!r} has no option {unknown[0]!r}; options: "
                         f"{', '.join(accepted) or 'none'}")
    try:
        evaluator = cls(**(options or {}))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"evaluator {name!r}: {exc}") from None
    changed = _result_options(cls, options or {})
    if changed:  # results under other options are other results: not served to this one
        evaluator.version = short_version(f"{cls.version}+{changed}")
    return evaluator


VERSION_CHARS = 30  # of the 50 a stored version holds: a study's rules may add 15


def short_version(version: str) -> str:
    """``version`` itself when short enough to store, else its head and a digest."""
    if len(version) <= VERSION_CHARS:
        return version
    digest = hashlib.sha256(version.encode()).hexdigest()[:12]
    return f"{version[:VERSION_CHARS - 13]}~{digest}"


def _result_options(cls: Any, options: Mapping[str, Any]) -> str:
    """The options given that change what ``cls`` reports (its ``result_options``) and differ
    from their defaults, as ``name=value,...`` (numbers written alike: 60 and 60.0 are one)."""
    defaults = {n: p.default for n, p in inspect.signature(cls).parameters.items()}

    def text(value: Any) -> str:
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        return f"{float(value):g}" if numeric else str(value)

    return ",".join(f"{n}={text(options[n])}" for n in getattr(cls, "result_options", ())
                    if n in options and options[n] != defaults.get(n))
