"""A study file's workloads: one GEMM, a list (each with how often it runs), a grid of shapes,
dtypes and layouts, or the weight GEMMs of a transformer model at given token counts.

```yaml
workloads: [{shape: 1x4096x4096, dtype: int8-int8, weight: 32}, ...]
workloads: {grid: {shape: [...], dtype: [...], b_layout: [...]}}
workloads: {model: llama-3.1-8b, tokens: {decode: [1, 8], prefill: {2048: 1}}, dtype: int8-int8}
```

A workload's weight is how often it runs in one pass of the mix (a model's: its calls, see
:mod:`dse.core.mix`); ``dse cover`` weighs each shape's time by it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from dse.core import limits
from dse.core.errors import UsageError
from dse.core.mix import mix_summary, model_mix, model_of, token_passes
from dse.core.registry import search_space_class, workload_class
from dse.core.target import Target
from dse.core.workload import Workload
from dse.study.files.reader import MISSING, Reader, StudyFileError

ITEM_KEYS = ("shape", "dtype", "b_layout", "weight")
MODEL_KEYS = ("model", "tokens", "dtype", "b_layout")
MAX_WEIGHT = 1e15


@dataclass(frozen=True)
class ChosenWorkloads:
    """The study's workloads, how often each runs (() : once each) and the mix they came
    from."""

    workloads: tuple[Workload, ...]
    weights: tuple[float, ...] = ()
    mix: dict[str, Any] | None = None


def parse_workloads(r: Reader, data: dict[str, Any], target: Target) -> ChosenWorkloads:
    """The ``workload`` or ``workloads`` key of a study file, checked against the target."""
    if ("workload" in data) == ("workloads" in data):
        raise StudyFileError(f"{r.source}: give exactly one of 'workload' (one GEMM) or "
                             "'workloads' (a list, a grid of shapes/dtypes/b_layouts, or a "
                             "model and its token counts)")
    raw = data.get("workloads")
    mix = None
    if "workload" in data:
        items = [(r.mapping(data["workload"], "workload", ITEM_KEYS[:3]), "workload")]
    elif isinstance(raw, list):
        items = [(r.mapping(w, f"workloads[{i}]", ITEM_KEYS), f"workloads[{i}]")
                 for i, w in enumerate(raw)]
    elif isinstance(raw, dict) and "model" in raw:
        items, mix = _model_items(r, raw, target)
    else:
        grid = r.mapping(raw, "workloads", ("grid", "model"))
        axes = r.mapping(grid.get("grid", MISSING), "workloads.grid", ITEM_KEYS[:3])
        lists = {k: [None] if k == "b_layout" and k not in axes  # the kind's default layout
                 else r.str_list(axes.get(k, MISSING), f"workloads.grid.{k}")
                 for k in ITEM_KEYS[:3]}
        items = [(dict(zip(ITEM_KEYS[:3], combo, strict=True)), "workloads.grid")
                 for combo in itertools.product(*(lists[k] for k in ITEM_KEYS[:3]))]
    if not items:
        raise StudyFileError(f"{r.source}: key 'workloads': the list is empty")
    if len(items) > limits.WORKLOADS:
        raise StudyFileError(f"{r.source}: key 'workloads': {len(items):,} workloads; a study "
                             f"holds at most {limits.WORKLOADS:,} (split it into studies)")
    weights: dict[Workload, float] = {}
    for item, key in items:
        workload = _workload(r, item, key, target)
        weights[workload] = weights.get(workload, 0.0) + _weight(r, item, key)
    weighted = any(w != 1.0 for w in weights.values())
    return ChosenWorkloads(tuple(weights), tuple(weights.values()) if weighted else (), mix)


def _workload(r: Reader, item: dict[str, Any], key: str, target: Target) -> Workload:
    kind = workload_class(search_space_class(target.space).workload_kind)
    try:
        workload = kind.parse(r.text(item.get("shape", MISSING), f"{key}.shape"),
                              r.text(item.get("dtype", MISSING), f"{key}.dtype"),
                              item.get("b_layout"))
    except StudyFileError:
        raise  # already names the file and key
    except UsageError as exc:
        raise StudyFileError(f"{r.source}: key '{key}': {exc}") from None
    if workload.dtype.name not in target.dtypes:
        raise StudyFileError(f"{r.source}: key '{key}.dtype': {workload.dtype.name!r} is not "
                             f"supported by target {target.name}; allowed: "
                             f"{', '.join(target.dtypes)}")
    return workload


def _weight(r: Reader, item: dict[str, Any], key: str) -> float:
    weight = item.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) \
            or not 0 < weight <= MAX_WEIGHT:
        raise r.fail(f"{key}.weight", weight, f"how often it runs: a number above 0, at most "
                     f"{MAX_WEIGHT:g}")
    return float(weight)


def _model_items(r: Reader, raw: dict[str, Any], target: Target,
                 ) -> tuple[list[tuple[dict[str, Any], str]], dict[str, Any]]:
    """The items of a model's mix (each GEMM's shape in the target's workload kind, its calls
    as weight) and what the study stores of the mix."""
    spec = r.mapping(raw, "workloads", MODEL_KEYS)
    try:
        model = model_of(spec.get("model", MISSING))
        passes = token_passes(spec.get("tokens", MISSING))
    except UsageError as exc:
        raise StudyFileError(f"{r.source}: key 'workloads': {exc}") from None
    kind = workload_class(search_space_class(target.space).workload_kind)
    dtype = r.text(spec.get("dtype", MISSING), "workloads.dtype")
    shapes = model_mix(model, passes)
    items = [({"shape": kind.shape_of_gemm(s.M, s.K, s.N), "dtype": dtype,
               "b_layout": spec.get("b_layout"), "weight": s.count},
              f"workloads ({model.name} {s.shape})") for s in shapes]
    return items, {**mix_summary(model, shapes), "tokens": {
        phase: {str(t): n for t, n in counts.items()} for phase, counts in passes.items()}}
