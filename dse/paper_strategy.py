"""The paper's iterative balance procedure, driven by a model instead of hardware runs.

Start from the best single-core kernel (highest MACs/cycle that is not DMA bound, eq. 4) or a
given one, then repeatedly lower k_ct in steps of s until a wider kernel fits, and take the
kernel with the largest m_ct * n_ct at that depth (ties: the faster one). As in the paper, each
kernel is "measured" at the multiple of its native size nearest the requested GEMM (so padding
does not favour one kernel over another), with the fastest feasible k_mt or the paper's fixed
k_mt policy. The paper stops at the first step whose throughput drops; here the walk stops after
``patience`` steps without a new best, and the fastest step is the balance point.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from dse.errors import UsageError
from dse.search import Candidate, SearchOutcome, _vector_score
from evaluators.analytical import metrics_row
from evaluators.base import EvalContext
from search_spaces.base import ConfigBatch, batch_take

STEP_METRICS = ("tops", "t_comp_s", "t_mem_s", "bound", "macs_per_cycle")


def _aligned_dim(size: int, native: int) -> int:
    return max(round(size / native), 1) * native


def measure_kernel(evaluator: Any, ctx: EvalContext, configs: ConfigBatch) -> tuple[int, dict, str]:
    """Best of ``configs`` (one kernel, several k_mt), each at its native-aligned shape.

    Returns the index of the best config, its metrics and the shape it was scored at.
    """
    best: tuple[float, int, dict[str, Any], str] | None = None
    w = ctx.workload
    for i in range(len(configs["m_ct"])):
        one = batch_take(configs, np.array([i]))
        shape = dataclasses.replace(
            w,
            M=_aligned_dim(w.M, int(one["m_ct"][0] * one["m_rows"][0])),
            K=_aligned_dim(w.K, int(one["k_mt"][0])),
            N=_aligned_dim(w.N, int(one["n_ct"][0] * one["n_cols"][0])))
        sub = dataclasses.replace(ctx, workload=shape,
                                  space=type(ctx.space)(ctx.target, shape))
        if not sub.space.check(one).ok[0]:
            continue
        row = metrics_row(_vector_score(evaluator, one, sub), 0)
        if best is None or row["tops"] > best[0]:
            best = (row["tops"], i, row, shape.shape)
    if best is None:
        raise UsageError("no k_mt makes this kernel feasible")  # callers pass feasible kernels
    return best[1], best[2], best[3]


def paper_strategy(evaluator: Any, ctx: EvalContext, fix: Mapping[str, Any] | None = None,
                   start: tuple[int, int, int] | None = None, patience: int = 2,
                   k_mt_target: int | None = None) -> SearchOutcome:
    """Run the balance procedure from ``start``, an (m_ct, k_ct, n_ct) kernel.

    The paper stops at the first drop (``patience=1``). A model's ranking of neighbouring kernels
    is noisier than a measurement, so by default the walk goes on through one more slower step
    and stops after ``patience`` steps without a new best; the best step is the balance point.
    """
    began = time.perf_counter()
    space = ctx.space
    batch, n_total = space.enumerate(fix=fix)
    feasible = space.check(batch).ok
    is_start = np.zeros_like(feasible)
    if start is not None:  # a given start kernel is taken as is, even if DMA bound
        is_start = ((batch["m_ct"] == start[0]) & (batch["k_ct"] == start[1])
                    & (batch["n_ct"] == start[2]))
    usable = feasible & (space.satisfies("dma_bound", batch) | is_start)
    if k_mt_target is not None:
        usable &= batch["k_mt"] == -(-k_mt_target // batch["k_ct"]) * batch["k_ct"]
    cand = batch_take(batch, np.flatnonzero(usable))
    if not len(cand["m_ct"]):
        raise UsageError("no feasible configuration to start the balance procedure from")
    m, k, n = cand["m_ct"], cand["k_ct"], cand["n_ct"]

    def kernel_configs(kernel: tuple[int, int, int]) -> ConfigBatch:
        return batch_take(cand, np.flatnonzero((m == kernel[0]) & (k == kernel[1])
                                               & (n == kernel[2])))

    if start is None:
        mpc = _vector_score(evaluator, cand, ctx)["macs_per_cycle"]
        first = int(np.lexsort((-k, -mpc))[0])
        start = (int(m[first]), int(k[first]), int(n[first]))
    elif not len(kernel_configs(start)["m_ct"]):
        raise UsageError(f"start kernel {start[0]}x{start[1]}x{start[2]} is not feasible in "
                         "this space")
    step_k = space.target.input_spec(ctx.workload.dtype.input).s

    path: list[tuple[tuple[int, int, int], dict[str, Any], dict[str, Any], str]] = []

    def visit(kernel: tuple[int, int, int]) -> float:
        configs = kernel_configs(kernel)
        i, row, shape = measure_kernel(evaluator, ctx, configs)
        path.append((kernel, space.decode(batch_take(configs, np.array([i])))[0], row, shape))
        return float(row["tops"])

    visit(start)
    depth = start[1]
    while True:
        depth -= step_k
        if depth <= 0:
            break
        at_depth = k == depth
        area = np.where(at_depth, m * n, -1)
        current = path[-1][0][0] * path[-1][0][2]
        if area.max() <= current:
            continue  # a shallower kernel no wider than the current one can only be slower

        widest = sorted({(int(m[i]), depth, int(n[i])) for i in np.flatnonzero(area == area.max())})
        scores = []
        for kernel in widest:
            visit(kernel)
            scores.append(path.pop())
        path.append(max(scores, key=lambda s: s[2]["tops"]))
        best_step = max(range(len(path)), key=lambda i: path[i][2]["tops"])
        if len(path) - 1 - best_step >= patience:
            break
    balanced = max(path, key=lambda s: s[2]["tops"])
    steps = [{"step": i, **{p: params[p] for p in ("m_ct", "k_ct", "n_ct", "k_mt")},
              "shape": shape, **{name: row[name] for name in STEP_METRICS}}
             for i, (_, params, row, shape) in enumerate(path)]
    return SearchOutcome(
        n_total=n_total, n_evaluated=len(feasible), n_feasible=int(feasible.sum()),
        elapsed_s=time.perf_counter() - began,
        top=[Candidate(balanced[1], {**balanced[2], "measured_at_shape": balanced[3]})],
        steps=steps,
    )
