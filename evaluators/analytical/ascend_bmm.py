"""Analytical model of batched GEMM on Ascend (the BMM tiling design's pipeline model).

The pipeline stages overlap through double buffering, so a config takes as long as its slowest
stage plus what cannot overlap:

    T = max(T_MMAD, T_MTE2, T_MTE1, T_Fixpipe) + T_drain + T_boundary + T_Reduce + T_rearrange

* T_MMAD: each core's blocks (``waves`` rounds over the cores) at the Cube's sustained rate,
  padded to whole 16-fractals; with one L0C buffer the Fixpipe of each tile does not overlap.
* T_MTE2 (GM/L2 -> L1): the slower of GM traffic over the usable GM bandwidth and L2 traffic
  over L2 bandwidth, plus one DMA command cost per load of a K segment of A and B (a core's
  loads are serial; the design's T_iter and T_mb charge one T_cmd per such load, which its
  MergeBatch/IterBatch arbitration, ``rules.classify``, weighs).
  GM input traffic counts re-reads: inputs that fit L2 (less what outputs written through L2
  occupy) are read once; otherwise the swizzle window keeps one operand's band resident while
  the other is re-read once per window, or L2 execution groups bound the re-reads to one per
  group row/column, whichever is fewer; a batch-split branch re-reads inside a batch only when
  the active batches do not fit L2.
* T_MTE1 (L1 -> L0): each L0 tile's operands at the per-core L1->L0 rate.
* T_Fixpipe: outputs (and StreamK partial sums) written to L2 or straight to GM.
* T_drain: the pipeline's ends: the last write-out, plus the first load when the Cube sets the
  pace or else the last block's compute (a MergeBatch block holds b0 batches, so its drain is
  b0 times longer: the design's drain penalty).
* T_boundary: with only two L1 buffers, the first transfer of each block waits (four buffers
  prefetch it under the previous block).
* T_Reduce: StreamK's partial sums written, read back and summed by the vector cores, through
  L2 when they fit (else GM workspace bandwidth), after the K segments.
* T_rearrange: to_matmul with a one-batch A transposes B into [K, B*N] first (read + write).

Bandwidth-utilisation rules of thumb (modelling assumptions, from the design's measured
ranking: cores > data per core > transfer size > contiguous run) scale GM bandwidth:
min(1, movers / min_cores) * sqrt(min(1, bytes per core / min_bytes_per_core)) *
sqrt(min(1, transfer / min_tile)) * sqrt(min(1, run / good run)); more than
``transpose_conflict_max`` cores reading one block at once divides L2 bandwidth the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dse.core.params import ConfigBatch
from dse.core.workload import BatchedGemmWorkload
from search_spaces.ascend_bmm.geometry import BRANCH, geometry
from search_spaces.ascend_bmm.target import FP32_BYTES, AscendTarget


def _share(x: np.ndarray, threshold: float) -> np.ndarray:
    return np.sqrt(np.clip(x / threshold, 1e-9, 1.0))


def _reread_factors(batch: ConfigBatch, geo: Any, target: AscendTarget,
                    w: BatchedGemmWorkload, l2_read: np.ndarray, s_in: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """How many times A and B come from GM (1 = once)."""
    dt = w.dtype.in_bytes
    scm, scn = batch["single_core_m"], batch["single_core_n"]
    branch = batch["branch"]
    no_reuse_a, no_reuse_b = geo.n_cnt, geo.m_cnt
    everything = s_in <= l2_read
    # batch-split branches: each active batch's inputs stay in L2 while its core works on it
    per_batch = np.isin(branch, [BRANCH["iter_batch"], BRANCH["merge_batch"], BRANCH["special"],
                                 BRANCH["asw_reduced_cores"], BRANCH["stream_k"]])
    active = np.minimum(geo.cores, geo.batches) * (geo.m * geo.k + geo.k * geo.n) * dt
    batch_fits = active <= l2_read
    # M/N split: the swizzle window keeps one operand's band resident for a whole pass
    window = batch["window"].astype(np.float64)
    across = geo.cores / window
    m_first = batch["swizzle"] == 0
    wave_set = np.where(m_first, window * scm + across * scn, across * scm + window * scn)
    wave_fits = wave_set * geo.k * dt <= l2_read
    win_a = np.where(m_first, 1.0, np.ceil(geo.n_cnt / window))
    win_b = np.where(m_first, np.ceil(geo.m_cnt / window), 1.0)
    gm, gn = batch["group_m"].astype(np.float64), batch["group_n"].astype(np.float64)
    grouped = gm > 0
    group_set = geo.batches * geo.k * (gm * scm + gn * scn) * dt
    group_fits = grouped & (group_set <= l2_read)
    grp_a = np.ceil(geo.n_cnt / np.maximum(gn, 1))
    grp_b = np.ceil(geo.m_cnt / np.maximum(gm, 1))
    swizzled_a = np.where(wave_fits, win_a, no_reuse_a)
    swizzled_b = np.where(wave_fits, win_b, no_reuse_b)
    use_groups = group_fits & (grp_a + grp_b < swizzled_a + swizzled_b)
    mn_a = np.where(use_groups, grp_a, swizzled_a)
    mn_b = np.where(use_groups, grp_b, swizzled_b)
    f_a = np.where(everything, 1.0, np.where(per_batch, np.where(batch_fits, 1.0, no_reuse_a),
                                             mn_a))
    f_b = np.where(everything, 1.0, np.where(per_batch, np.where(batch_fits, 1.0, no_reuse_b),
                                             mn_b))
    return f_a, f_b


def score(batch: ConfigBatch, target: AscendTarget, w: BatchedGemmWorkload
          ) -> dict[str, np.ndarray]:
    """Metric arrays for feasible configs of the ``ascend_bmm`` space."""
    dt, out = w.dtype.in_bytes, w.dtype.out_bytes
    bw, rules, c = target.bandwidth, target.rules, target.cores.cube
    geo = geometry(batch, w, c, dt)
    branch = batch["branch"]
    scm, scn = batch["single_core_m"].astype(np.float64), batch["single_core_n"].astype(
        np.float64)
    k_l1 = np.minimum(batch["k_l1"].astype(np.float64), geo.k_seg)
    grid_k = batch["grid_k"].astype(np.float64)
    q_core = target.compute.cube_sustained_flops / c
    useful_flops = 2.0 * w.macs

    # compute: the busiest core runs ``waves`` blocks of the average (tail-trimmed) size
    block_flops = geo.flops / geo.blocks
    t_mmad = geo.waves * block_flops / q_core
    # L1 -> L0: every L0 tile's A and B operands
    mte1_bytes = geo.flops / 2 * dt * (1 / batch["base_n"] + 1 / batch["base_m"])
    t_mte1 = geo.waves * mte1_bytes / geo.blocks / (bw.l1_to_l0_bytes_per_cycle
                                                     * target.cores.clock_hz)

    # traffic
    s_a = w.batch_count_a * w.M * w.K * dt
    s_b = w.batch_count_b * w.K * w.N * dt
    bias = w.batch * w.N * out if w.bias else 0  # read once, added as each block drains
    s_in = float(s_a + s_b + bias)
    out_blocks = geo.batches * geo.m_cnt * geo.n_cnt
    m_pad, n_pad = np.ceil(geo.m / 16) * 16, np.ceil(geo.n / 16) * 16
    # a merged block's cross terms are dropped: only the diagonal blocks are written
    merged = branch == BRANCH["merge_batch"]
    s_out = np.where(merged, w.batch * np.ceil(w.M / 16) * 16 * np.ceil(w.N / 16) * 16,
                     geo.batches * m_pad * n_pad) * out
    through_l2 = batch["write_policy"] == 0
    # outputs written through L2 stay there (dirty) and leave less room for the inputs
    l2_read = np.maximum(target.memory.l2_bytes - np.where(through_l2, s_out, 0.0), 0.0)
    f_a, f_b = _reread_factors(batch, geo, target, w, l2_read, s_in)
    gm_a, gm_b = s_a * f_a, s_b * f_b
    l1_fill = geo.batches * (m_pad * geo.n_cnt + n_pad * geo.m_cnt) * geo.k * dt
    stream = branch == BRANCH["stream_k"]
    partials = np.where(stream, grid_k * geo.batches * m_pad * n_pad * FP32_BYTES, 0.0)
    ws_in_l2 = 2 * partials <= l2_read
    gm_bytes = gm_a + gm_b + bias + s_out + np.where(ws_in_l2, 0.0, 2 * partials)
    l2_bytes = l1_fill + np.where(through_l2, s_out, 0.0) + np.where(ws_in_l2, 2 * partials, 0)

    # bandwidth-utilisation rules of thumb
    movers = np.minimum(geo.cores, geo.blocks / np.maximum(geo.waves, 1))
    run_a = np.where(w.b_layout[0] == "T", scm, k_l1) * dt
    run_b = np.where(w.b_layout[1] == "T", k_l1, scn) * dt
    efficiency = (np.minimum(1.0, movers / rules.min_cores)
                  * _share((gm_a + gm_b) / np.maximum(movers, 1), rules.min_bytes_per_core)
                  * _share(np.minimum(scm, scn) * k_l1 * dt, rules.min_tile_bytes)
                  * _share(np.minimum(run_a, run_b), rules.d_value_good_bytes))
    same_batch = np.maximum(geo.cores / np.maximum(geo.batches, 1), 1)
    conflict = np.maximum(np.ceil(np.minimum(same_batch, geo.cores) / geo.m_cnt),
                          np.ceil(np.minimum(same_batch, geo.cores) / geo.n_cnt))
    l2_efficiency = np.minimum(1.0, rules.transpose_conflict_max / conflict)
    t_gm = gm_bytes / (bw.gm_bytes_per_s * efficiency)
    t_l2 = l2_bytes / (bw.l2_bytes_per_s * l2_efficiency)
    transfers = geo.waves * np.ceil(geo.k_seg / k_l1)  # loads of an A and a B segment, per core
    t_cmd = transfers * target.overheads.dma_command_s
    t_mte2 = np.maximum(t_gm, t_l2) + t_cmd
    t_fix = s_out / np.where(through_l2, bw.l2_bytes_per_s, bw.gm_bytes_per_s) \
        + np.where(stream, partials / bw.l2_bytes_per_s, 0.0)

    # what does not overlap
    per_core_bw = bw.gm_bytes_per_s / c
    block_write = s_out / out_blocks / per_core_bw
    single_l0c = batch["l0c_buffers"] == 1
    t_core = t_mmad + np.where(single_l0c, geo.waves * block_write, 0.0)
    first_load = (scm + scn) * k_l1 * dt / per_core_bw
    # the pipeline's ends: the first load before any compute when the Cube sets the pace, the
    # last block's compute when transfers do; the last write-out either way
    t_drain = block_write + np.where(t_core >= t_mte2, first_load, block_flops / q_core)
    t_boundary = np.where(batch["l1_buffers"] == 2,
                          geo.waves * (scm + scn) * k_l1 * dt / per_core_bw, 0.0)
    ws_bw = np.where(ws_in_l2, bw.l2_bytes_per_s, bw.gm_workspace_bytes_per_s)
    t_reduce = np.where(stream, 2 * partials / ws_bw + s_out / bw.l2_bytes_per_s
                        + partials / FP32_BYTES / target.q_aiv, 0.0)
    t_rearrange = geo.rearrange_bytes / bw.gm_bytes_per_s

    special = branch == BRANCH["special"]
    t_special = np.maximum((s_in + w.batch * w.M * w.N * out) / (bw.gm_bytes_per_s * efficiency),
                           w.macs / target.q_aiv)
    stages = np.stack([t_core, t_mte2, t_mte1, t_fix])
    steady = stages.max(axis=0)
    latency = np.where(special, t_special,
                       steady + t_drain + t_boundary + t_reduce + t_rearrange)
    stage_names = np.array(["mmad", "mte2", "mte1", "fixpipe"])
    t_mem = np.maximum(t_mte2, t_fix)
    l1_used = batch["l1_buffers"] * (scm + scn) * k_l1 * dt
    return {
        "tops": useful_flops / latency / 1e12,
        "latency_s": latency,
        "t_comp_s": np.where(special, w.macs / target.q_aiv, t_mmad),
        "t_mem_s": np.where(special, t_special, t_mem),
        "t_mte1_s": t_mte1,
        "t_fixpipe_s": t_fix,
        "t_cmd_s": t_cmd,
        "t_drain_s": t_drain,
        "t_boundary_s": t_boundary,
        "t_reduce_s": t_reduce,
        "t_rearrange_s": t_rearrange,
        "bound": np.where(t_core >= t_mem, "compute", "memory"),
        "stage": stage_names[stages.argmax(axis=0)],
        "balance": t_mmad / t_mem,
        "l1_bytes": l1_used,
        "l0c_bytes": batch["base_m"] * batch["base_n"] * FP32_BYTES * batch["l0c_buffers"],
        "dram_bytes": gm_bytes + geo.rearrange_bytes,
        "dram_bytes_a": gm_a,
        "dram_bytes_b": gm_b,
        "dram_bytes_c": s_out,
        "l2_traffic_bytes": l2_bytes,
        "r_in": (gm_a + gm_b) / (s_a + s_b),
        "gm_efficiency": efficiency,
        "cores": geo.cores.astype(np.int64),
        "waves": geo.waves,
        "padding_ratio": geo.waste - 1.0,
        "wave_efficiency": geo.blocks / (geo.waves * geo.cores),
    }
