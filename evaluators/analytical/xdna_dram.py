"""DRAM traffic (eqs. 6-8) and the bandwidth the NPU gets for it.

Delivered bandwidth depends on how long the contiguous runs of a transfer are. Short runs are
limited by a cost per run (opening a DRAM page, starting a burst), so bandwidth grows linearly
with the run length ``L``; long runs saturate at the peak. The two regimes meet at the knee
``run_knee_bytes`` and are blended by a p-norm, ``peak * L / (L**p + knee**p) ** (1/p)`` with
``p = run_knee_sharpness`` (p = 1 is a pure per-run overhead; large p a hard knee).
Runs of neighbouring columns that read or write adjacent spans of the same rows at the same time
(row-major B, the C join) partly merge in the memory controller: ``read_merge`` and
``write_merge`` are the fraction of each extra stream that lengthens the run. A stream's
consecutive runs lie one matrix row apart; when rows are shorter than a DRAM page
(``page_bytes``), several runs fall in the page one opening serves, and the cost per run is
shared by them (at most the tile's rows). Writes get ``write_efficiency`` on top.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from search_spaces.xdna_gemm.geometry import Geometry
from search_spaces.xdna_gemm.target import DramSpec


def run_bandwidth(run_bytes: np.ndarray, dram: DramSpec, write: bool = False) -> np.ndarray:
    """Bytes per second delivered to a stream of contiguous runs of ``run_bytes``."""
    run = np.asarray(run_bytes, dtype=np.float64)
    p = dram.run_knee_sharpness
    bw = dram.peak_bytes_per_s * run / (run**p + dram.run_knee_bytes**p) ** (1.0 / p)
    return bw * dram.write_efficiency if write else bw


def merged_run(run_bytes: np.ndarray, streams: np.ndarray, dram: DramSpec,
               write: bool = False) -> np.ndarray:
    """Effective run length of ``streams`` concurrent reads (or writes) of adjacent spans."""
    merge = dram.write_merge if write else dram.read_merge
    return np.asarray(run_bytes, dtype=np.float64) * (1 + merge * (streams - 1))


def page_shared_run(run_bytes: np.ndarray, row_bytes: np.ndarray, rows: np.ndarray,
                    dram: DramSpec) -> np.ndarray:
    """Effective run length of ``rows`` runs that lie ``row_bytes`` apart: the runs one DRAM
    page holds share its opening, as if they were one run."""
    per_page = np.clip(dram.page_bytes / np.asarray(row_bytes, dtype=np.float64), 1.0, rows)
    return np.asarray(run_bytes, dtype=np.float64) * per_page


@dataclass(frozen=True)
class StreamRuns:
    """Effective contiguous run length, in bytes, of the A, B and C streams."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray


def stream_runs(geo: Geometry, a_par: np.ndarray, b_par: np.ndarray,
                dram: DramSpec) -> StreamRuns:
    """Run lengths of each stream of the schedule.

    A (row-major) is staged as m_ct x k_mt tiles: runs of k_mt, one per row of A (K apart).
    Column-major B runs along K for k_mt, one per column (K apart); row-major B along N for
    n_ct only, one per row of B (N apart), the b_par columns reading adjacent spans of the same
    rows. C's join (m_ct * a_par rows) writes n_ct per row of C (N apart), adjacent across the
    columns.
    """
    row_a = geo.K * geo.ty_a
    a = page_shared_run(geo.kmt * geo.ty_a, row_a, geo.m, dram)
    b_col = page_shared_run(geo.kmt * geo.ty_b, geo.K * geo.ty_b, geo.n, dram)
    b_row = page_shared_run(merged_run(geo.n * geo.ty_b, b_par, dram), geo.N * geo.ty_b,
                            geo.k, dram)
    c = page_shared_run(merged_run(geo.n * geo.ty_c, b_par, dram, write=True),
                        geo.N * geo.ty_c, geo.m * a_par, dram)
    return StreamRuns(a=a, b=np.where(geo.b_col_major, b_col, b_row), c=c)


@dataclass(frozen=True)
class DramTraffic:
    """Bytes moved per matrix and the seconds they take at their delivered bandwidth."""

    bytes_a: np.ndarray
    bytes_b: np.ndarray
    bytes_c: np.ndarray
    bw_a: np.ndarray
    bw_b: np.ndarray
    bw_c: np.ndarray

    @property
    def bytes_total(self) -> np.ndarray:
        return self.bytes_a + self.bytes_b + self.bytes_c

    @property
    def t_a(self) -> np.ndarray:
        return self.bytes_a / self.bw_a

    @property
    def t_b(self) -> np.ndarray:
        return self.bytes_b / self.bw_b

    @property
    def t_c(self) -> np.ndarray:
        return self.bytes_c / self.bw_c

    @property
    def t_total(self) -> np.ndarray:
        return self.t_a + self.t_b + self.t_c


def dram_traffic(
    geo: Geometry, a_par: np.ndarray, b_par: np.ndarray, dram: DramSpec
) -> DramTraffic:
    """Traffic of the output-stationary schedule on the padded GEMM.

    A is re-read once per block of ``n_ct * b_par`` columns of C (eq. 6), B once per block of
    ``m_ct * a_par`` rows (eq. 7), and C is written once (eq. 8).
    """
    macs = geo.M.astype(np.float64) * geo.K * geo.N
    bytes_a = macs * geo.ty_a / (geo.n * b_par)
    bytes_b = macs * geo.ty_b / (geo.m * a_par)
    bytes_c = geo.M.astype(np.float64) * geo.N * geo.ty_c
    runs = stream_runs(geo, a_par, b_par, dram)
    return DramTraffic(
        bytes_a=bytes_a, bytes_b=bytes_b, bytes_c=bytes_c,
        bw_a=run_bandwidth(runs.a, dram), bw_b=run_bandwidth(runs.b, dram),
        bw_c=run_bandwidth(runs.c, dram, write=True),
    )
