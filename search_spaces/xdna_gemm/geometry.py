"""Derived quantities of a config batch: array use, padding, and L1/L2 footprints.

Shared by the constraints and the cost models so both count bytes the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.core.params import ConfigBatch
from dse.core.workload import GemmWorkload
from search_spaces.xdna_gemm.target import InputSpec, XdnaTarget


def ceil_div(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    """``a / b`` rounded up (elementwise)."""
    return -(-np.asarray(a) // np.asarray(b))


def align_up(x: np.ndarray, alignment: int) -> np.ndarray:
    """``x`` rounded up to a multiple of ``alignment``."""
    return ceil_div(x, alignment) * alignment


@dataclass(frozen=True)
class Geometry:
    """Arrays (one entry per config) describing how a config maps onto the array."""

    spec: InputSpec
    ty_a: int
    ty_b: int
    ty_c: int
    m: np.ndarray
    k: np.ndarray
    n: np.ndarray
    kmt: np.ndarray
    a_cols: np.ndarray          # bool: A broadcast down columns (swapped orientation)
    b_col_major: np.ndarray     # bool
    cols_used: np.ndarray       # array columns (MemTiles, ShimTiles) the design occupies
    rows_used: np.ndarray
    row_tiles: np.ndarray       # tiles of the row-broadcast operand, spread over the MemTiles
    join: np.ndarray            # C tiles joined per column in its MemTile
    M: np.ndarray               # padded GEMM dimensions
    K: np.ndarray
    N: np.ndarray
    l1_a: np.ndarray            # bytes of all A buffers in one core's L1 (aligned)
    l1_b: np.ndarray
    l1_c: np.ndarray
    l2_a_tile: np.ndarray       # bytes of one staged tile of each operand in a MemTile
    l2_b_tile: np.ndarray
    l2_c_join: np.ndarray

    @property
    def l1_bytes(self) -> np.ndarray:
        return self.l1_a + self.l1_b + self.l1_c

    @property
    def cores(self) -> np.ndarray:
        return self.rows_used * self.cols_used


def derive(batch: ConfigBatch, target: XdnaTarget, workload: GemmWorkload) -> Geometry:
    """Compute the geometry of every config in ``batch`` for ``workload`` on ``target``."""
    dt = workload.dtype
    spec = target.input_spec(dt.input)
    m, k, n, kmt = batch["m_ct"], batch["k_ct"], batch["n_ct"], batch["k_mt"]
    a_par, b_par = batch["m_rows"], batch["n_cols"]
    a_cols = batch["orientation"] == 1
    b_col_major = batch["b_layout"] == 0
    cols_used = np.where(a_cols, a_par, b_par)
    rows_used = np.where(a_cols, b_par, a_par)
    align = target.memory.l1_alignment_bytes
    safe_k = np.maximum(k, 1)
    safe_kmt = np.maximum(kmt, 1)
    return Geometry(
        spec=spec, ty_a=dt.in_bytes, ty_b=dt.in_bytes, ty_c=dt.out_bytes,
        m=m, k=k, n=n, kmt=kmt, a_cols=a_cols, b_col_major=b_col_major,
        cols_used=cols_used, rows_used=rows_used,
        row_tiles=rows_used, join=rows_used,
        M=ceil_div(workload.M, m * a_par) * m * a_par,
        K=ceil_div(workload.K, safe_kmt) * safe_kmt,
        N=ceil_div(workload.N, n * b_par) * n * b_par,
        l1_a=batch["buf_a_l1"] * align_up(m * safe_k * dt.in_bytes, align),
        l1_b=batch["buf_b_l1"] * align_up(safe_k * n * dt.in_bytes, align),
        l1_c=batch["buf_c_l1"] * align_up(m * n * dt.out_bytes, align),
        l2_a_tile=m * kmt * dt.in_bytes,
        # Row-major B gives contiguous runs along N already, so the MemTile stages the L1 tile.
        l2_b_tile=np.where(b_col_major, kmt, k) * n * dt.in_bytes,
        l2_c_join=rows_used * m * n * dt.out_bytes,
    )


def l2_usage(
    batch: ConfigBatch, geo: Geometry, sharing: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """L2 bytes: (total over the MemTiles used, bytes of the fullest group, MemTiles per group).

    Each column's MemTile holds its column-operand tile and the join of its C tiles; the
    row-broadcast operand's tiles (one per array row used) are spread over the MemTiles. When a
    MemTile holds no row tile it can lend memory to a neighbour that does (XDNA2), so capacity is
    checked per group of MemTiles sharing one row tile; without sharing the group is one MemTile.
    """
    a_buf, b_buf, c_buf = batch["buf_a_l2"], batch["buf_b_l2"], batch["buf_c_l2"]
    row_bytes = np.where(geo.a_cols, b_buf * geo.l2_b_tile, a_buf * geo.l2_a_tile)
    col_bytes = np.where(geo.a_cols, a_buf * geo.l2_a_tile, b_buf * geo.l2_b_tile)
    c_bytes = c_buf * geo.l2_c_join
    total = geo.row_tiles * row_bytes + geo.cols_used * (col_bytes + c_bytes)
    row_per_memtile = ceil_div(geo.row_tiles, geo.cols_used)
    group = np.maximum(geo.cols_used // np.maximum(geo.row_tiles, 1), 1)
    if not sharing:
        group = np.ones_like(group)
    fullest = row_per_memtile * row_bytes + group * (col_bytes + c_bytes)
    return total, fullest, group
