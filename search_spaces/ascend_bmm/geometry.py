"""What each config computes, per branch: the GEMMs the cores run after folding (to_matmul) or
merging (merge_batch), and how the output blocks spread over the cores."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.core.params import ConfigBatch
from dse.core.workload import BatchedGemmWorkload
from search_spaces.ascend_bmm.rules import BRANCHES

BRANCH = {name: i for i, name in enumerate(BRANCHES)}


@dataclass(frozen=True)
class Geometry:
    """Per-config arrays (float64): the effective GEMM and its decomposition into blocks."""

    batches: np.ndarray      # independent GEMMs the cores share
    m: np.ndarray            # each GEMM's rows, columns and depth
    n: np.ndarray
    k: np.ndarray
    k_seg: np.ndarray        # depth a core reduces for one block (K / grid_k)
    m_cnt: np.ndarray        # blocks of single_core_m x single_core_n per GEMM
    n_cnt: np.ndarray
    blocks: np.ndarray       # work items: batches * m_cnt * n_cnt * grid_k
    cores: np.ndarray        # cores used
    waves: np.ndarray        # rounds of blocks over the cores
    flops: np.ndarray        # FLOPs the Cubes execute (16-fractals, merged cross terms)
    waste: np.ndarray        # computed / useful MACs
    rearrange_bytes: np.ndarray  # GM bytes moved before the GEMM (to_matmul's fold)


def geometry(batch: ConfigBatch, workload: BatchedGemmWorkload, cube_cores: int,
             in_bytes: int) -> Geometry:
    """The decomposition of every config of ``batch`` (encoded) for ``workload``."""
    w = workload
    branch = batch["branch"]
    b0 = batch["merge_b0"].astype(np.float64)
    big_b = float(w.batch)
    folded_a = (branch == BRANCH["to_matmul"]) & (w.batch_count_b == 1)
    folded_b = (branch == BRANCH["to_matmul"]) & ~folded_a
    merged = branch == BRANCH["merge_batch"]
    batches = np.where(folded_a | folded_b, 1.0, np.where(merged, np.ceil(big_b / b0), big_b))
    m = np.where(folded_a, big_b * w.M, np.where(merged, b0 * w.M, float(w.M)))
    n = np.where(folded_b, big_b * w.N, np.where(merged, b0 * w.N, float(w.N)))
    k = np.full(len(branch), float(w.K))
    grid_k = batch["grid_k"].astype(np.float64)
    single_m = batch["single_core_m"].astype(np.float64)
    single_n = batch["single_core_n"].astype(np.float64)
    m_cnt, n_cnt = np.ceil(m / single_m), np.ceil(n / single_n)
    blocks = batches * m_cnt * n_cnt * grid_k
    cores = np.minimum(batch["cores"].astype(np.float64), cube_cores)
    waves = np.ceil(blocks / cores)
    # tail blocks are as large as what is left, in whole 16-fractals
    padded = batches * (np.ceil(m / 16) * 16) * (np.ceil(n / 16) * 16) * np.ceil(k / 16) * 16
    useful = big_b * w.M * w.N * w.K
    # Folding is free when the folded operand's batches are already contiguous in the folded
    # order: A[B, M, K] as [B*M, K] when A is not transposed, B as [B*N, K] when it is; otherwise
    # it is copied (read and written) into that order first.
    a_copy = folded_a & (w.b_layout[0] == "T")
    b_copy = folded_b & (w.b_layout[1] == "N")
    rearrange = (np.where(a_copy, 2.0 * big_b * w.M * w.K * in_bytes, 0.0)
                 + np.where(b_copy, 2.0 * big_b * w.K * w.N * in_bytes, 0.0))
    return Geometry(batches=batches, m=m, n=n, k=k, k_seg=np.ceil(k / grid_k), m_cnt=m_cnt,
                    n_cnt=n_cnt, blocks=blocks, cores=cores, waves=waves,
                    flops=2.0 * padded, waste=padded / useful, rearrange_bytes=rearrange)

