"""The paper's iterative balance procedure, driven by a model instead of hardware runs.

Start from the best single-core kernel (highest MACs/cycle that is not DMA bound, eq. 4) or a
given one, then repeatedly lower k_ct in steps of s until a wider kernel fits, and take the
kernel with the largest m_ct * n_ct at that depth (ties: the faster one). As in the paper, each
kernel is "measured" at the multiple of its native size nearest the requested GEMM (so padding
does not favour one kernel over another), with the fastest feasible k_mt or the paper's fixed
k_mt. The paper stops at the first step whose throughput drops; here the walk stops after
``patience`` steps without a new best, and the fastest step is the balance point.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.core import (
    BalanceProcedure,
    Candidate,
    ConfigBatch,
    EvalContext,
    Evaluator,
    ProcedureOption,
    SearchOutcome,
    UsageError,
    batch_take,
    metrics_row,
    positive_int,
    score_batch,
)
from search_spaces.xdna_gemm.geometry import derive
from search_spaces.xdna_gemm.kernel import macs_per_cycle

STEP_METRICS = ("tops", "t_comp_s", "t_mem_s", "bound", "macs_per_cycle")
Kernel = tuple[int, int, int]


@dataclass(frozen=True)
class Step:
    """One kernel of the walk: its best config, metrics and the shape it was measured at."""

    kernel: Kernel
    params: dict[str, Any]
    metrics: dict[str, Any]
    shape: str

    @property
    def tops(self) -> float:
        return float(self.metrics["tops"])

    def to_dict(self, index: int) -> dict[str, Any]:
        return {"step": index, **{p: self.params[p] for p in ("m_ct", "k_ct", "n_ct", "k_mt")},
                "shape": self.shape, **{name: self.metrics[name] for name in STEP_METRICS}}


def _aligned_dim(size: int, native: int) -> int:
    return max(round(size / native), 1) * native


def measure_kernel(evaluator: Evaluator, ctx: EvalContext, kernel: Kernel,
                   configs: ConfigBatch) -> Step:
    """The fastest of ``configs`` (one kernel, its k_mt choices), each scored at the multiple
    of its native size nearest the workload. ``configs`` must hold a feasible config."""
    best: Step | None = None
    w = ctx.workload
    for i in range(len(configs["m_ct"])):
        one = batch_take(configs, np.array([i]))
        shape = dataclasses.replace(
            w,
            M=_aligned_dim(w.M, int(one["m_ct"][0] * one["m_rows"][0])),
            K=_aligned_dim(w.K, int(one["k_mt"][0])),
            N=_aligned_dim(w.N, int(one["n_ct"][0] * one["n_cols"][0])))
        sub = dataclasses.replace(ctx, workload=shape, space=type(ctx.space)(ctx.target, shape))
        if not sub.space.check(one).ok[0]:
            continue
        metrics = metrics_row(score_batch(evaluator, one, sub), 0)
        if best is None or metrics["tops"] > best.tops:
            best = Step(kernel, ctx.space.decode(one)[0], metrics, shape.shape)
    assert best is not None, f"no feasible config of kernel {kernel}"
    return best


def paper_strategy(evaluator: Evaluator, ctx: EvalContext, fix: Mapping[str, Any] | None = None,
                   start: Kernel | None = None, patience: int = 3,
                   k_mt_target: int | None = None) -> SearchOutcome:
    """Run the balance procedure from ``start``, an (m_ct, k_ct, n_ct) kernel.

    The paper stops at the first drop (``patience=1``). Throughput along the walk is not smooth
    (k_mt snaps to multiples of k_ct, the widest kernel changes shape), so by default the walk
    goes on and stops after ``patience`` steps without a new best; the fastest step is the
    balance point.

    With ``k_mt_target`` every kernel uses the largest multiple of its k_ct not above the target
    (at least k_ct): the paper fixed k_mt per dtype, and its Table 2 rank-2 kernels use exactly
    this multiple. Otherwise each kernel gets its fastest feasible k_mt.
    """
    began = time.perf_counter()
    space = ctx.space
    batch, n_total = space.enumerate(fix=fix)
    feasible = space.check(batch).ok
    usable = feasible & space.satisfies("dma_bound", batch)
    if start is not None:  # a given start kernel is taken as is, even if DMA bound
        usable |= feasible & ((batch["m_ct"] == start[0]) & (batch["k_ct"] == start[1])
                              & (batch["n_ct"] == start[2]))
    if k_mt_target is not None:
        usable &= batch["k_mt"] == np.maximum(k_mt_target // batch["k_ct"], 1) * batch["k_ct"]
    cand = batch_take(batch, np.flatnonzero(usable))
    m, k, n = cand["m_ct"], cand["k_ct"], cand["n_ct"]
    if not len(m):
        raise UsageError("no feasible configuration to start the balance procedure from")

    def measure(kernel: Kernel) -> Step:
        mask = (m == kernel[0]) & (k == kernel[1]) & (n == kernel[2])
        return measure_kernel(evaluator, ctx, kernel, batch_take(cand, np.flatnonzero(mask)))

    if start is None:  # the kernel model is the same whatever the fidelity
        geo = derive(cand, ctx.target, ctx.workload)
        mpc = macs_per_cycle(geo.m, geo.k, geo.n, geo.spec, ctx.target.kernel, geo.ty_c)
        first = int(np.lexsort((-k, -mpc))[0])
        start = (int(m[first]), int(k[first]), int(n[first]))
    elif not ((m == start[0]) & (k == start[1]) & (n == start[2])).any():
        raise UsageError(f"start kernel {start[0]}x{start[1]}x{start[2]} is not feasible in "
                         "this space")
    path = [measure(start)]
    depth = start[1]
    step_k = space.target.input_spec(ctx.workload.dtype.input).s
    while depth - step_k > 0:
        depth -= step_k
        area = np.where(k == depth, m * n, -1)
        if area.max() <= path[-1].kernel[0] * path[-1].kernel[2]:
            continue  # a shallower kernel no wider than the current one can only be slower
        widest = {(int(m[i]), depth, int(n[i])) for i in np.flatnonzero(area == area.max())}
        path.append(max((measure(kernel) for kernel in sorted(widest)), key=lambda s: s.tops))
        best = max(range(len(path)), key=lambda i: path[i].tops)
        if len(path) - 1 - best >= patience:
            break
    balanced = max(path, key=lambda s: s.tops)
    return SearchOutcome(
        n_total=n_total, n_evaluated=len(feasible), n_feasible=int(feasible.sum()),
        elapsed_s=time.perf_counter() - began,
        top=[Candidate(balanced.params, {**balanced.metrics, "measured_at_shape": balanced.shape})],
        steps=[step.to_dict(i) for i, step in enumerate(path)],
    )


def parse_start(text: str | None) -> Kernel | None:
    """``--start``: a kernel written ``m_ctxk_ctxn_ct`` (None when not given)."""
    if text is None:
        return None
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise UsageError(f"--start expects m_ctxk_ctxn_ct, e.g. 64x232x64; got {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])


def balance_walk(evaluator: Evaluator, ctx: EvalContext, fix: Mapping[str, Any] | None = None,
                 start: Kernel | str | None = None, **options: Any) -> SearchOutcome:
    """:func:`paper_strategy` with ``start`` as a kernel or as ``--start`` writes it."""
    return paper_strategy(evaluator, ctx, fix=fix,
                          start=parse_start(start) if isinstance(start, str) else start,
                          **options)


# The family's balance procedure (families.xdna_gemm.family's record declares it): the options
# dse search --strategy paper takes for it, each passed to balance_walk by its keyword.
BALANCE = BalanceProcedure(balance_walk, (
    ProcedureOption("--start", "start", parse_start, "kernel to start from", "MxKxN"),
    ProcedureOption("--k-mt", "k_mt_target", positive_int,
                    "use the largest multiple of k_ct <= N as k_mt, as the paper did "
                    "(default: each kernel's fastest feasible k_mt)"),
    ProcedureOption("--patience", "patience", positive_int,
                    "stop after N steps without a new best (the paper: 1; default 3)")))
