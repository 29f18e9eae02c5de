"""Turn user input (target name/path, dtype, shape) into typed objects once, at the edge."""

from __future__ import annotations

from collections.abc import Sequence

from dse.registry import evaluator_class, search_space_class
from dse.target import load_target
from dse.workload import GemmWorkload
from evaluators.base import EvalContext


def build_context(target: str, dtype: str, shape: str, b_layout: str = "col",
                  constraints: Sequence[str] = ()) -> EvalContext:
    """Load the target, parse the workload and build the target's search space."""
    tgt = load_target(target)
    workload = GemmWorkload.parse(shape, dtype, b_layout)
    space = search_space_class(tgt.space)(tgt, workload, extra_constraints=tuple(constraints))
    return EvalContext(target=tgt, workload=workload, space=space)


def build_evaluator(name: str) -> object:
    """Instantiate the evaluator registered as ``name``."""
    return evaluator_class(name)()
