"""Analytical model of a Triton GEMM on an NVIDIA GPU (the cheap rung of the ladder).

C is cut into BLOCK_M x BLOCK_N tiles, each computed by SPLIT_K programs that share its K.

* Occupancy: programs resident on one SM, limited by shared memory (buffers of A and B tiles),
  registers (the fp32 accumulators, mma.sync's operand tiles and an allowance for addresses),
  threads and the block limit.
* Compute: programs run in waves over the SMs (a partial last wave idles SMs). A program's
  K loop steps at the slower of its tensor-core time (its SM's peak shared among the resident
  programs; fewer than four warps cannot keep the tensor cores busy) and its operand loads from
  L2 (the SM's share of L2 bandwidth), plus a fixed cost a step (synchronisation, addresses).
  With fewer than three stages the loads are not hidden: one stage exposes all of each step's
  load, two stages half of it. The tensor cores sustain ``mma_efficiency`` of their peak.
* Memory: HBM traffic of the inputs with L2 reuse from the GROUP_M swizzle. Programs run in
  groups of GROUP_M block rows, column by column, so one wave touches about GROUP_M rows of A
  tiles and (wave / GROUP_M) columns of B tiles; the wave's programs walk K roughly together,
  so when the K slices they read at once fit L2 each wave reads its tiles from HBM once,
  otherwise every program reads its own. Plus C written over HBM at its sustained efficiency.
* Split-K (serial, in one launch): each K slice stores its fp32 sums and the last slice of a
  tile to finish reads the others' back and writes C, which adds that epilogue to each wave and,
  when a wave's fp32 sums do not fit L2, their traffic to HBM.
* T = max(compute, memory) + launch.

All rates are the target file's; the ``model`` section holds the assumptions (L2 bandwidth,
HBM efficiency, launch cost, accumulator registers).
"""

from __future__ import annotations

import numpy as np

from dse.core.params import ConfigBatch
from dse.core.workload import GemmWorkload
from search_spaces.triton_gemm.rules import smem_bytes, thread_registers, tma_loads
from search_spaces.triton_gemm.target import GpuTarget

FULL_RATE_WARPS = 4     # one warp group issues Hopper's wgmma at full rate
DRIFT_STEPS = 8         # how many pipelines of K steps a wave's programs drift apart


def score(batch: ConfigBatch, target: GpuTarget, w: GemmWorkload) -> dict[str, np.ndarray]:
    """Metric arrays for feasible configs of the ``triton_gemm`` space."""
    dev, model = target.device, target.model
    dt, out = w.dtype.in_bytes, w.dtype.out_bytes
    bm, bn, bk = (batch[n].astype(np.float64) for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    stages, warps = batch["num_stages"], batch["num_warps"]
    group, split = batch["GROUP_M"].astype(np.float64), batch["SPLIT_K"].astype(np.float64)

    # occupancy
    tma = tma_loads(dev, w)
    smem = smem_bytes(batch, dt, dev, tma).astype(np.float64)
    threads = 32 * warps
    regs = np.minimum(thread_registers(batch, dt, dev, tma), dev.max_registers_per_thread)
    resident = np.minimum.reduce([
        dev.smem_per_sm_bytes // np.maximum(smem, 1),
        dev.registers_per_sm // (regs * threads),
        dev.max_threads_per_sm // threads,
        np.full(len(bm), dev.max_blocks_per_sm)]).astype(np.float64)
    resident = np.maximum(resident, 1)

    # compute: waves of programs over the SMs
    tiles_m, tiles_n = np.ceil(w.M / bm), np.ceil(w.N / bn)
    programs = tiles_m * tiles_n * split
    slots = dev.sms * resident
    waves = np.ceil(programs / slots)
    k_steps = np.ceil(w.K / (bk * split))
    peak_sm = target.peak_flops(w.dtype.input) * model.mma_efficiency / dev.sms
    warp_rate = np.minimum(1.0, resident * warps / FULL_RATE_WARPS)
    t_mma = 2 * bm * bn * bk * resident / (peak_sm * warp_rate)  # a step of every resident
    l2_sm = model.l2_bytes_per_s / dev.sms
    t_load = (bm + bn) * bk * dt * resident / l2_sm
    exposed = np.where(stages >= 3, 0.0, np.where(stages == 2, 0.5, 1.0))
    t_step = (np.maximum(t_mma, t_load) + exposed * t_load
              + resident * model.step_overhead_cycles / dev.clock_hz)
    in_wave = np.minimum(programs, slots)
    # split-K's epilogue: every program stores its fp32 tile, and the last of a tile's slices
    # reads the other slices' back to write C
    t_fixup = np.where(split > 1, resident * bm * bn * 4.0 * (2 - 1 / split) / l2_sm, 0.0)
    t_compute = waves * (k_steps * t_step + t_fixup)

    # memory: HBM traffic with L2 reuse from the swizzle
    per_wave_tiles = in_wave / split
    rows = np.minimum(tiles_m, np.maximum(group, np.ceil(per_wave_tiles / tiles_n)))
    cols = np.minimum(tiles_n, np.ceil(per_wave_tiles / np.minimum(group, tiles_m)))
    wave_bytes = (rows * bm + cols * bn) * w.K * dt
    # a wave's programs walk K roughly together: L2 must hold the K slices they are reading
    window = (rows * bm + cols * bn) * np.minimum(w.K, DRIFT_STEPS * bk * stages) * dt
    fits = window <= dev.l2_bytes
    inputs = (w.M * w.K + w.K * w.N) * dt
    reuse_reads = np.maximum(inputs, np.ceil(programs / split / per_wave_tiles) * wave_bytes)
    no_reuse = programs / split * (bm + bn) * w.K * dt
    a_b = np.where(fits, np.minimum(reuse_reads, no_reuse), no_reuse)
    # C once; with split-K also each slice's fp32 sums written and all but one read back, from
    # HBM unless a wave's sums stay in L2 (a tile's slices run side by side, so the last one
    # reads them back within the wave)
    spills_l2 = in_wave * bm * bn * 4.0 > dev.l2_bytes
    c_bytes = w.M * w.N * (out + np.where((split > 1) & spills_l2, (2 * split - 1) * 4.0, 0.0))
    hbm = a_b + c_bytes
    t_memory = hbm / (dev.hbm_bytes_per_s * model.hbm_efficiency)

    latency = np.maximum(t_compute, t_memory) + model.launch_s
    return {
        "tops": 2.0 * w.macs / latency / 1e12,
        "latency_s": latency,
        "t_comp_s": t_compute,
        "t_mem_s": t_memory,
        "bound": np.where(t_compute >= t_memory, "compute", "memory"),
        "balance": t_compute / t_memory,
        "programs": programs.astype(np.int64),
        "resident_per_sm": resident.astype(np.int64),
        "waves": waves.astype(np.int64),
        "wave_efficiency": programs / (waves * slots),
        "smem_bytes": smem,
        "l1_bytes": smem,  # shared memory is the per-SM scratchpad (rankings break ties on it)
        "registers_per_thread": regs.astype(np.int64),
        "dram_bytes": hbm,
        "dram_bytes_a_b": a_b,
        "dram_bytes_c": c_bytes,
        "l2_fits_wave": fits.astype(np.int64),
    }
