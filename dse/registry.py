"""Name -> implementation registries, imported lazily, extensible through entry points.

A user package adds a search space or evaluator without touching dse by declaring an entry point
in the ``dse.search_spaces`` or ``dse.evaluators`` group whose value is ``module:attribute``.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from dse.errors import UsageError

SEARCH_SPACES: dict[str, str] = {
    "xdna_gemm": "search_spaces.xdna_gemm:XdnaGemmSpace",
    "cpu_gemm": "search_spaces.cpu_gemm:CpuGemmSpace",
}
EVALUATORS: dict[str, str] = {
    "analytical": "evaluators.analytical:AnalyticalEvaluator",
    "cpu": "evaluators.hardware.cpu:CpuEvaluator",
    "iron": "evaluators.hardware.iron:IronEvaluator",
    "simulator": "evaluators.simulator:SimulatorEvaluator",
    "synthetic": "evaluators.synthetic:SyntheticEvaluator",
}


def _registry(builtin: dict[str, str], group: str) -> dict[str, str]:
    merged = dict(builtin)
    for ep in entry_points(group=group):
        merged.setdefault(ep.name, ep.value)
    return merged


def _load(kind: str, name: str, builtin: dict[str, str], group: str) -> Any:
    registry = _registry(builtin, group)
    if name not in registry:
        raise UsageError(f"unknown {kind} {name!r}; valid: {', '.join(sorted(registry))}")
    module, _, attr = registry[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def search_space_class(name: str) -> Any:
    """The search space class registered as ``name``."""
    return _load("search space", name, SEARCH_SPACES, "dse.search_spaces")


def evaluator_class(name: str) -> Any:
    """The evaluator class registered as ``name``."""
    return _load("evaluator", name, EVALUATORS, "dse.evaluators")


def evaluator_names() -> list[str]:
    return sorted(_registry(EVALUATORS, "dse.evaluators"))
