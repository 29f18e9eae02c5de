"""What the conformance suites share: for every registered family, a problem to run on (its
first shipped target, first dtype and its workload kind's example shape) and configs of its
space, some feasible and some not."""

from __future__ import annotations

from typing import Any

import numpy as np

from dse.core import (
    ConfigBatch,
    EvalContext,
    IntParam,
    UsageError,
    batch_concat,
    batch_take,
    build_context,
    families,
    load_target,
    workload_class,
)

FAMILIES = sorted(families())


def example_context(family: str, constraints: tuple[str, ...] = ()) -> EvalContext:
    """The family's first shipped target, its first dtype, its workload kind's example."""
    fam = families()[family]
    target = load_target(next(iter(fam.shipped_targets())))
    shape = workload_class(fam.space.workload_kind).example_shape
    return build_context(target.name, target.dtypes[0], shape, None, constraints)


def _broken(ctx: EvalContext, config: dict[str, Any]) -> dict[str, Any] | None:
    """A config one integer step from ``config`` that the space refuses, if there is one."""
    for name, param in ctx.space.params().items():
        if not isinstance(param, IntParam):
            continue
        for value in (config[name] + 1, config[name] * 1024):
            try:
                candidate = ctx.space.resolve({**config, name: value})
            except UsageError:  # outside the parameter's own domain
                continue
            if not ctx.space.check(ctx.space.encode([candidate])).ok[0]:
                return candidate
    return None


def sample_configs(ctx: EvalContext, feasible: int = 2,
                   infeasible: int = 2) -> tuple[ConfigBatch, int]:
    """A batch of ``feasible`` configs the space accepts (spread over its first chunk) then up
    to ``infeasible`` it refuses, and how many of the latter there are."""
    batch, _ = next(iter(ctx.space.chunks()))
    ok = ctx.space.check(batch).ok
    good = np.flatnonzero(ok)
    assert len(good) >= feasible, f"{ctx.space.name}: too few feasible configs to sample"
    chosen = batch_take(batch, good[np.linspace(0, len(good) - 1, feasible).astype(int)])
    bad = np.flatnonzero(~ok)[:infeasible]
    refused = batch_take(batch, bad)
    missing = infeasible - len(bad)
    extra = [c for c in (_broken(ctx, p) for p in ctx.space.decode(chosen)[:missing]) if c]
    parts = [chosen, refused] + ([ctx.space.encode(extra)] if extra else [])
    return batch_concat(parts, list(ctx.space.params())), len(bad) + len(extra)
