"""Name -> implementation registries, imported lazily, extensible through entry points.

A user package adds a target family without touching dse by declaring entry points whose value
is ``module:attribute``: its search space (``dse.search_spaces``), the loader of its target
files if they have a schema of their own (``dse.target_schemas``, keyed by the target file's
``space``), its analytical model (``dse.analytical_models``, keyed by space), any other
evaluator (``dse.evaluators``) and commands of its own (``dse.commands``).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from dse.errors import UsageError

SEARCH_SPACES: dict[str, str] = {
    "xdna_gemm": "search_spaces.xdna_gemm:XdnaGemmSpace",
    "cpu_gemm": "search_spaces.cpu_gemm:CpuGemmSpace",
    "ascend_bmm": "search_spaces.ascend_bmm:AscendBmmSpace",
    "triton_gemm": "search_spaces.triton_gemm:TritonGemmSpace",
}
# Target files whose space has its own schema (the rest are array targets, dse.target.Target).
TARGET_SCHEMAS: dict[str, str] = {
    "cpu_gemm": "dse.cpu_target:cpu_target_from_dict",
    "ascend_bmm": "search_spaces.ascend_bmm.target:ascend_target_from_dict",
    "triton_gemm": "search_spaces.triton_gemm.target:gpu_target_from_dict",
}
# The analytical evaluator's closed-form model of each space: (batch, target, workload) -> metrics.
ANALYTICAL_MODELS: dict[str, str] = {
    "xdna_gemm": "evaluators.analytical.xdna_gemm:score",
    "cpu_gemm": "evaluators.analytical.cpu_gemm:score",
    "ascend_bmm": "evaluators.analytical.ascend_bmm:score",
    "triton_gemm": "evaluators.analytical.triton_gemm:score",
}
EVALUATORS: dict[str, str] = {
    "analytical": "evaluators.analytical:AnalyticalEvaluator",
    "cpu": "evaluators.hardware.cpu:CpuEvaluator",
    "iron": "evaluators.hardware.iron:IronEvaluator",
    "simulator": "evaluators.simulator:SimulatorEvaluator",
    "synthetic": "evaluators.synthetic:SyntheticEvaluator",
    "triton": "evaluators.hardware.triton_gpu:TritonEvaluator",
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


# Command groups a target family adds to the CLI: name -> "module:function(subparsers)".
COMMANDS: dict[str, str] = {
    "ascend": "search_spaces.ascend_bmm.cli:add_commands",
    "triton": "search_spaces.triton_gemm.cli:add_commands",
}


def command_adders() -> list[Any]:
    """The functions that add each family's commands to the ``dse`` parser."""
    registry = _registry(COMMANDS, "dse.commands")
    return [_load("command group", name, COMMANDS, "dse.commands") for name in sorted(registry)]


def target_schema(space: str) -> Any | None:
    """The loader ``(raw dict, source) -> target`` of a space's target files, or None for the
    array-target schema."""
    if space not in _registry(TARGET_SCHEMAS, "dse.target_schemas"):
        return None
    return _load("target schema", space, TARGET_SCHEMAS, "dse.target_schemas")


def analytical_model(space: str) -> Any:
    """The analytical model registered for a search space."""
    return _load("analytical model", space, ANALYTICAL_MODELS, "dse.analytical_models")


def analytical_spaces() -> tuple[str, ...]:
    """The search spaces that have an analytical model registered."""
    return tuple(sorted(_registry(ANALYTICAL_MODELS, "dse.analytical_models")))


def evaluator_names() -> list[str]:
    """The registered evaluators' names, sorted."""
    return sorted(_registry(EVALUATORS, "dse.evaluators"))
