"""End-to-end analytical model of a GEMM on the whole XDNA array (eqs. 1-10 plus measured effects).

Every core runs the same schedule: for each of its output tiles ("rounds") it zeroes C, runs
K/k_ct kernel calls fed by its A and B FIFOs, then drains C to the MemTile. DRAM traffic runs
concurrently; the body takes the longer of the cores and DRAM, plus what cannot overlap:

* a single-buffered C in L1 stalls the core for the drain of every output tile;
* a single-buffered C join in L2 stalls if the join has not reached DRAM by the next drain;
* depth-1 L1 input FIFOs serialise the tile transfer with the kernel call; depth-1 L2 input
  buffers serialise that operand's DRAM traffic with computation;
* the first k_mt chunk (fill) and the last C tile (drain) are exposed once;
* sequential BD reconfiguration exposes the command processor latency and a refill per output
  tile row of BDs; the overlapped 5+5+5 scheme hides it;
* a fixed dispatch overhead (wall-clock measurement).

Work on padded dimensions is charged; ``tops`` counts only the useful 2*M*K*N operations.
"""

from __future__ import annotations

import numpy as np

from dse.core.params import ConfigBatch
from dse.core.workload import GemmWorkload
from evaluators.analytical.xdna_dram import dram_traffic
from search_spaces.xdna_gemm.geometry import derive, l2_usage
from search_spaces.xdna_gemm.kernel import kernel_cycles, zero_cycles
from search_spaces.xdna_gemm.target import XdnaTarget

Metrics = dict[str, np.ndarray]


def score(batch: ConfigBatch, target: XdnaTarget, workload: GemmWorkload) -> Metrics:
    """Predict the standard metrics for every config in ``batch`` (assumed feasible)."""
    geo = derive(batch, target, workload)
    clock = target.array.clock_hz
    dma_bw = target.dma.channel_bytes_per_cycle
    a_par, b_par = batch["m_rows"], batch["n_cols"]
    m, k, n = (x.astype(np.float64) for x in (geo.m, geo.k, geo.n))
    kc = kernel_cycles(m, k, n, geo.spec, target.kernel, geo.ty_c)
    call = kc.total

    # Feeding one call: each input tile arrives over its own core S2MM channel.
    a_dma = m * k * geo.ty_a / dma_bw
    b_dma = k * n * geo.ty_b / dma_bw
    serial_in = np.maximum(np.where(batch["buf_a_l1"] == 1, a_dma, 0.0),
                           np.where(batch["buf_b_l1"] == 1, b_dma, 0.0))
    step = np.maximum(call + serial_in, np.maximum(a_dma, b_dma))

    calls = geo.K / geo.k
    rounds = (geo.M / (geo.m * a_par)) * (geo.N / (geo.n * b_par))
    zero = zero_cycles(m, n, target.kernel, geo.ty_c)
    round_busy = calls * step + zero
    drain = m * n * geo.ty_c / dma_bw
    drain_stall = np.where(batch["buf_c_l1"] == 1, drain, np.maximum(drain - round_busy, 0.0))

    traffic = dram_traffic(geo, a_par, b_par, target.dram)
    # The C join of one column leaves through the shared DRAM bandwidth.
    join_s = geo.l2_c_join * geo.cols_used / traffic.bw_c
    join_stall = np.where(batch["buf_c_l2"] == 1,
                          np.maximum(join_s * clock - round_busy - drain_stall, 0.0), 0.0)

    t_comp = rounds * calls * call / clock
    t_core = rounds * (round_busy + drain_stall + join_stall) / clock
    t_mem = traffic.t_total
    serial_mem = (np.where(batch["buf_a_l2"] == 1, traffic.t_a, 0.0)
                  + np.where(batch["buf_b_l2"] == 1, traffic.t_b, 0.0))
    t_body = np.maximum(t_core + serial_mem, t_mem)

    fill_bytes = a_par * geo.l2_a_tile + b_par * geo.l2_b_tile
    read_bw = (traffic.bytes_a + traffic.bytes_b) / (traffic.t_a + traffic.t_b)
    t_refill = fill_bytes / read_bw
    t_fill = t_refill + np.maximum(a_dma, b_dma) / clock
    t_last = drain / clock + join_s
    sequential = batch["bd_scheme"] == 1
    t_bd = np.where(sequential, rounds * (target.overheads.bd_reconfig_s + t_refill), 0.0)
    latency = t_body + t_fill + t_last + t_bd + target.overheads.dispatch_s

    macs = geo.m.astype(np.float64) * geo.k * geo.n
    mpc = macs / call
    cores = geo.cores
    l2_total, _, _ = l2_usage(batch, geo, target.memory.l2_neighbour_sharing)
    useful = float(workload.macs)
    return {
        "tops": 2.0 * useful / latency / 1e12,
        "latency_s": latency,
        "t_comp_s": t_comp,
        "t_mem_s": t_mem,
        "t_core_s": t_core,
        "bound": np.where(t_mem > t_core + serial_mem, "memory", "compute"),
        "balance": t_comp / t_mem,
        "macs_per_cycle": mpc,
        "kernel_efficiency": mpc / geo.spec.peak_macs_per_cycle,
        "peak_tops": mpc * cores * clock * 2.0 / 1e12,
        "l1_bytes": geo.l1_bytes,
        "l2_bytes": l2_total,
        "dram_bytes": traffic.bytes_total,
        "dram_bytes_a": traffic.bytes_a,
        "dram_bytes_b": traffic.bytes_b,
        "dram_bytes_c": traffic.bytes_c,
        "dram_gbps": traffic.bytes_total / t_mem / 1e9,
        "t_drain_s": rounds * drain_stall / clock,
        "t_zero_s": rounds * zero / clock,
        "t_fill_s": t_fill + t_last,
        "t_bd_s": t_bd,
        "t_dispatch_s": np.full_like(latency, target.overheads.dispatch_s),
        "padding_ratio": geo.M.astype(np.float64) * geo.K * geo.N / useful - 1.0,
        "cores": cores,
    }
