"""Auditing a dispatch table on any shapes: what the kernel its rules pick for each shape gives
against that shape's own optimum (``dse dispatch check``), so a table can be judged on shapes it
was not chosen for."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from dse.core import limits
from dse.core.errors import UsageError
from dse.core.mix import model_mix, model_of, token_passes
from dse.core.registry import build_evaluator, load_target, search_space_class, workload_class
from dse.deploy.problem import problem_for
from dse.deploy.selector import kernel_index
from dse.study.files.spec_workloads import MAX_WEIGHT

_SHAPE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*(?:\*\s*(\d+(?:\.\d+)?)\s*)?$",
                    re.ASCII)


def shapes_of(text: str | None, model: str | None = None,
              tokens: dict[str, Any] | None = None) -> list[tuple[int, int, int, float]]:
    """(M, K, N, weight) of ``MxKxN[*weight],...`` and of a model's mix at ``tokens``."""
    out: list[tuple[int, int, int, float]] = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        match = _SHAPE.match(part)
        if not match:
            raise UsageError(f"--shapes: {part.strip()[:60]!r} is not MxKxN or MxKxN*WEIGHT")
        m, k, n, weight = match.groups()
        if min(int(m), int(k), int(n)) < 1:
            raise UsageError(f"--shapes: {part.strip()!r} has a zero dimension")
        if not 0 < float(weight or 1) <= MAX_WEIGHT:
            raise UsageError(f"--shapes: {part.strip()[:60]!r}: a weight is above 0 and at "
                             f"most {MAX_WEIGHT:g}")
        out.append((int(m), int(k), int(n), float(weight or 1)))
    if model is not None:
        mix = model_mix(model_of(model), token_passes(tokens or {}))
        out += [(s.M, s.K, s.N, float(s.count)) for s in mix]
    if len(out) > limits.WORKLOADS:
        raise UsageError(f"{len(out):,} shapes to check; at most {limits.WORKLOADS:,}")
    if not out:
        raise UsageError("give the shapes to check: --shapes MxKxN[*WEIGHT],... and/or --model "
                         "with --decode/--prefill")
    return out


def check_table(table: dict[str, Any], shapes: list[tuple[int, int, int, float]]
                ) -> dict[str, Any]:
    """Each shape's kernel by the table's rules, its throughput and loss against the shape's
    optimum (the exhaustive search with the table's evaluator), and the whole list's weighted
    throughput as a fraction of every shape at its optimum."""
    evaluator = build_evaluator(table["evaluator"]["name"], table["evaluator"].get("options"))
    if not evaluator.capabilities.score:
        raise UsageError(f"the table's evaluator {evaluator.name!r} cannot score a shape's "
                         "whole space here; audit with a study of these shapes instead")
    target = load_target(table["target"])
    kind = workload_class(search_space_class(target.space).workload_kind)
    workloads, weights = [], []
    for m, k, n, weight in shapes:
        try:
            workloads.append(kind.parse(kind.shape_of_gemm(m, k, n), table["dtype"],
                                        table.get("b_layout")))
        except UsageError as exc:
            raise UsageError(f"shape {m}x{k}x{n}: {exc}") from None
        weights.append(weight)
    kernels = [kernel["params"] for kernel in table["kernels"]]
    problem = problem_for(table["target"], evaluator, table["evaluator"],
                          table.get("space") or {}, workloads, np.array(weights), kernels)
    picked = [kernel_index(table, m, k, n) for m, k, n, _ in shapes]
    tops = problem.tops[np.arange(len(shapes)), picked]
    seconds = problem.seconds()[np.arange(len(shapes)), picked]
    rows = [{"shape": w.shape, "weight": weights[i], "kernel": picked[i],
             "tops": float(tops[i]), "optimum_tops": float(problem.optimum[i]),
             "loss": float(1 - tops[i] / problem.optimum[i]) if tops[i] > 0 else 1.0,
             "runs": bool(tops[i] > 0), "bound": problem.bound[i]}
            for i, w in enumerate(workloads)]
    runs = np.isfinite(seconds)
    fraction = float(problem.optimal_seconds()[runs].sum() / seconds[runs].sum()) \
        if runs.all() else 0.0
    return {"shapes": rows, "fraction": fraction, "cannot_run": int((~runs).sum())}
