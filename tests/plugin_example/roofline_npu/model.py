"""The analytical model: the roofline of each config, vectorised over a batch.

C is computed tile by tile: each tile reads its row panel of A and column panel of B from DRAM
and writes its C once. Time is the larger of compute at the peak and traffic at the DRAM
bandwidth, so a larger tile moves less and needs more SRAM.
"""

from __future__ import annotations

import numpy as np

from dse.core import ConfigBatch, GemmWorkload
from roofline_npu.space import sram_bytes
from roofline_npu.target import RooflineTarget


def score(b: ConfigBatch, target: RooflineTarget, w: GemmWorkload) -> dict[str, np.ndarray]:
    """Metric arrays of feasible configs (dse's standard names)."""
    dt = w.dtype
    rows, cols = -(-w.M // b["tile_m"]), -(-w.N // b["tile_n"])  # tiles down and across C
    ops = 2.0 * (rows * b["tile_m"]) * (cols * b["tile_n"]) * w.K  # padded tiles compute too
    a_bytes = w.M * w.K * dt.in_bytes * cols  # A read once per column of tiles
    b_bytes = w.K * w.N * dt.in_bytes * rows
    c_bytes = np.full(len(rows), w.M * w.N * dt.out_bytes, dtype=np.float64)
    dram = a_bytes + b_bytes + c_bytes
    t_comp = ops / target.compute.peak_ops_per_s
    t_mem = dram / target.memory.dram_bytes_per_s
    latency = np.maximum(t_comp, t_mem)
    return {"tops": 2.0 * w.macs / latency / 1e12, "latency_s": latency, "t_comp_s": t_comp,
            "t_mem_s": t_mem, "bound": np.where(t_comp >= t_mem, "compute", "memory"),
            "balance": t_comp / t_mem, "ops_per_byte": 2.0 * w.macs / dram,
            "l1_bytes": sram_bytes(b, dt.in_bytes, dt.out_bytes),
            "dram_bytes": dram, "dram_bytes_a": a_bytes.astype(np.float64),
            "dram_bytes_b": b_bytes.astype(np.float64), "dram_bytes_c": c_bytes}
