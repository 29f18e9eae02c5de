"""The configuration the design's rules pick for a workload: its branch (the decision tree of
:mod:`.rules`) and that branch's tiling formulas, as a point of the design space (the baseline
the tuner is measured against)."""

from __future__ import annotations

import math
from typing import Any

from dse.core.workload import BatchedGemmWorkload
from search_spaces.ascend_bmm.rules import (
    BRANCHES,
    ITER_FORMS,
    asw_tiling,
    base_tile,
    ceil_to,
    classify,
    dividing_tile,
    floor_to,
    l2_plan,
    largest_divisor,
)
from search_spaces.ascend_bmm.target import AscendTarget


def rule_decision(target: AscendTarget, workload: BatchedGemmWorkload) -> dict[str, Any]:
    """The branch decision for one workload as plain values (``branch``, ``iter_batch_form``
    and the numbers behind them)."""
    w = workload
    raw = classify(target, w.batch_count_a, w.batch_count_b, w.M, w.K, w.N,
                   w.dtype.in_bytes, w.dtype.out_bytes, batch=w.batch,
                   same=w.batch_a == w.batch_b)
    out: dict[str, Any] = {}
    for name, value in raw.items():
        item = value.item() if hasattr(value, "item") else value
        out[name] = None if isinstance(item, float) and math.isinf(item) else item
    out["branch"] = BRANCHES[out["branch"]]
    form = out["iter_batch_form"]
    out["iter_batch_form"] = ITER_FORMS[form] if form >= 0 else None
    return out


def rule_config(target: AscendTarget, workload: BatchedGemmWorkload) -> dict[str, Any]:
    """Every parameter of the ``ascend_bmm`` space as the rules set it."""
    w, c = workload, target.cores.cube
    dt = w.dtype.in_bytes
    decision = rule_decision(target, w)
    branch = decision["branch"]
    config: dict[str, Any] = {"branch": branch, "l1_buffers": 2, "l0c_buffers": 2,
                              "window": target.swizzle_window, "swizzle": "m_first",
                              "group_m": 0, "group_n": 0, "grid_k": 1, "merge_b0": 1,
                              "write_policy": "l2", "cores": c}
    m, n, batches = w.M, w.N, w.batch
    if branch == "to_matmul":  # fold the one-batch side into a plain GEMM
        m, n = (w.batch * w.M, w.N) if w.batch_count_b == 1 else (w.M, w.batch * w.N)
        batches = 1
    if branch == "merge_batch":
        b0 = max(2, decision["b0"])
        config["merge_b0"] = b0
        m, n, batches = b0 * w.M, b0 * w.N, -(-w.batch // b0)
    if branch in ("iter_batch", "merge_batch"):
        config.update(_whole_batch_tiles(target, m, w.K, n, dt))
    elif branch == "asw_reduced_cores" or branch == "stream_k":
        config.update(_l0c_blocks(target, batches, m, w.K, n, dt, decision))
    else:
        tiling = asw_tiling(target, batches, m, w.K, n, dt)
        config.update(base_m=tiling.base_m, base_n=tiling.base_n, base_k=tiling.base_k,
                      single_core_m=tiling.single_core_m, single_core_n=tiling.single_core_n,
                      k_l1=tiling.k_l1)
        if branch != "special":
            plan = l2_plan(target, batches, m, w.K, n, tiling.single_core_m,
                           tiling.single_core_n, dt, w.dtype.out_bytes)
            config.update(write_policy=plan.write_policy,
                          group_m=min(plan.m_grp, tiling.m_cnt),
                          group_n=min(plan.n_grp, tiling.n_cnt))
            config["swizzle"] = "m_first" if m >= n else "n_first"
    if 4 * (config["single_core_m"] + config["single_core_n"]) * config["k_l1"] * dt \
            <= target.memory.l1_bytes:
        config["l1_buffers"] = 4  # room for four: deepen the pipeline
    blocks_along = -(-m // config["single_core_m"]) if config["swizzle"] == "m_first" \
        else -(-n // config["single_core_n"])
    config["window"] = largest_divisor(config["cores"], min(config["window"], blocks_along))
    return config


def _whole_batch_tiles(target: AscendTarget, m: int, k: int, n: int, dt: int) -> dict[str, Any]:
    """IterBatch / MergeBatch: a core owns whole (merged) batches, so its block is the whole
    output unless L1 cannot then hold 128 B runs along K; L0 tiles fill L0C."""
    tiling = asw_tiling(target, target.cores.cube, m, k, n, dt)  # one block a batch suffices
    return {"base_m": tiling.base_m, "base_n": tiling.base_n, "base_k": tiling.base_k,
            "single_core_m": tiling.single_core_m, "single_core_n": tiling.single_core_n,
            "k_l1": tiling.k_l1}


def _l0c_blocks(target: AscendTarget, batches: int, m: int, k: int, n: int, dt: int,
                decision: dict[str, Any]) -> dict[str, Any]:
    """Reduced cores and StreamK: one L0C-sized output block a core (``ceil(P)`` blocks), K
    split ``grid_k`` ways for StreamK."""
    align, mem = target.rules.align, target.memory
    base_m, base_n, base_k = base_tile(target, m / n, dt, buffers=1)
    base_m, base_n = min(base_m, int(ceil_to(m, align))), min(base_n, int(ceil_to(n, align)))
    base_k = min(base_k, int(floor_to(min(mem.l0a_bytes / (2 * base_m * dt),
                                          mem.l0b_bytes / (2 * base_n * dt)), align)))
    grid_k = int(decision["grid_k"]) if decision["branch"] == "stream_k" else 1
    blocks = batches * -(-m // base_m) * -(-n // base_n)
    cores = min(target.cores.cube, blocks * grid_k)
    if decision["branch"] == "asw_reduced_cores":
        cores = min(cores, target.cores.cube - 1)
    k_seg = -(-k // grid_k)
    k_l1 = mem.l1_bytes / (2 * (base_m + base_n) * dt)
    k_l1 = max(align, int(floor_to(min(k_l1, ceil_to(k_seg, align),
                                       target.rules.d_value_max_bytes / dt), align)))
    base_k = dividing_tile(k_l1, base_k, align)
    return {"base_m": base_m, "base_n": base_n, "base_k": base_k, "single_core_m": base_m,
            "single_core_n": base_n, "k_l1": k_l1, "l0c_buffers": 1, "grid_k": grid_k,
            "cores": max(1, cores)}
