"""Analytical model of the blocked CPU GEMM: block steps, their BLAS time, packing and the
memory level each step's working set lives in.

Per block step: a fixed cost (interpreter and BLAS dispatch), the MACs at the BLAS rate, the
A and B blocks read at the bandwidth of the smallest cache holding the step's working set
(unpacked blocks are read with strides: ``strided_penalty`` more traffic), and the product
added into C (written to a temporary, read back, C read and written: four passes over the C
block) plus a cost per C row touched (each row of a C block lives on its own cache lines and
page, N elements from the next). Packing copies A for every step and B once per slice.
"""

from __future__ import annotations

import numpy as np

from dse.core.params import ConfigBatch
from dse.core.workload import GemmWorkload
from search_spaces.cpu_gemm.space import block_bytes


def _ceil_div(a: int, b: np.ndarray) -> np.ndarray:
    return -(-a // b)


def score(batch: ConfigBatch, target: object, workload: GemmWorkload) -> dict[str, np.ndarray]:
    """Metric arrays of the CPU GEMM model, one entry per config of ``batch``."""
    model, caches = target.model, target.caches  # type: ignore[attr-defined]
    elem = workload.dtype.in_bytes
    mc, kc, nc = (batch[t].astype(np.float64) for t in ("mc", "kc", "nc"))
    M, K, N = workload.M, workload.K, workload.N
    row_blocks = _ceil_div(M, batch["mc"])
    slices = _ceil_div(K, batch["kc"])
    col_blocks = _ceil_div(N, batch["nc"])
    steps = (row_blocks * slices * col_blocks).astype(np.float64)
    pack_a, pack_b = batch["pack_a"] == 0, batch["pack_b"] == 0
    footprint = block_bytes(batch, elem).astype(np.float64)
    bandwidth = np.select(
        [footprint <= caches.l1_bytes, footprint <= caches.l2_bytes,
         footprint <= caches.l3_bytes],
        [model.l1_bytes_per_s, model.l2_bytes_per_s, model.l3_bytes_per_s],
        model.dram_bytes_per_s)
    strided = lambda packed: np.where(packed, 1.0, model.strided_penalty)  # noqa: E731
    operand_bytes = elem * (mc * kc * strided(pack_a) + kc * nc * strided(pack_b))
    c_bytes = 4 * elem * mc * nc
    t_step_mem = steps * (operand_bytes / bandwidth + c_bytes / model.c_update_bytes_per_s
                          + mc * model.row_s)
    step_bytes = operand_bytes + c_bytes
    t_calls = steps * model.call_s
    flops = 2.0 * M * K * N
    t_comp = flops / model.flops_per_s
    copied = (np.where(pack_a, elem * mc * kc * steps, 0.0)
              + np.where(pack_b, elem * kc * nc * slices * col_blocks, 0.0))
    t_copy = copied / model.copy_bytes_per_s
    t_mem = t_step_mem + t_copy
    latency = t_comp + t_calls + t_mem
    return {
        "tops": flops / latency / 1e12,
        "latency_s": latency,
        "t_comp_s": np.full_like(latency, t_comp),
        "t_mem_s": t_mem,
        "t_calls_s": t_calls,
        "bound": np.where(t_mem + t_calls > t_comp, "memory", "compute"),
        "balance": t_comp / t_mem,
        "l1_bytes": footprint,
        "l2_bytes": footprint,
        "dram_bytes": steps * step_bytes + copied,
        "steps": steps,
    }
