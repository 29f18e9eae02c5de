"""Parameters of the XDNA/XDNA2 whole-array GEMM mapping, named as in the paper."""

from __future__ import annotations

from typing import Any

from dse.core.params import ChoiceParam, IntParam, Param
from dse.core.workload import GemmWorkload
from search_spaces.xdna_gemm.target import XdnaTarget

TILE_PARAMS = ("m_ct", "k_ct", "n_ct", "k_mt")
BUFFER_PARAMS = ("buf_a_l1", "buf_b_l1", "buf_c_l1", "buf_a_l2", "buf_b_l2", "buf_c_l2")
ORIENTATIONS = ("a_rows", "a_cols")
BD_SCHEMES = ("overlapped", "sequential")


def build_params(target: XdnaTarget) -> dict[str, Param]:
    """Every parameter with its fixed domain (the same for all workloads of a target)."""
    longest_side = max(target.array.rows, target.array.cols)
    params: list[Param] = [
        IntParam("m_ct", "rows of the A and C tile in L1 (multiple of r)"),
        IntParam("k_ct", "reduction depth of one kernel call (multiple of s)"),
        IntParam("n_ct", "columns of the B and C tile in L1 (multiple of t)"),
        IntParam("k_mt", "reduction depth staged per MemTile transfer (multiple of k_ct)"),
        IntParam("buf_a_l1", "A buffers in L1", 1, 3),
        IntParam("buf_b_l1", "B buffers in L1", 1, 3),
        IntParam("buf_c_l1", "C buffers in L1", 1, 3),
        IntParam("buf_a_l2", "A buffers in L2", 1, 3),
        IntParam("buf_b_l2", "B buffers in L2", 1, 3),
        IntParam("buf_c_l2", "joined C buffers in L2", 1, 3),
        IntParam("m_rows", "A tiles computed in parallel (array rows when A runs along rows)",
                 1, longest_side),
        IntParam("n_cols", "B tiles computed in parallel (array columns when B runs down columns)",
                 1, longest_side),
        ChoiceParam("orientation",
                    "a_rows: A broadcast along rows, B down columns; a_cols: swapped",
                    ORIENTATIONS),
        ChoiceParam("b_layout", "B in DRAM: col (column-major) or row (row-major)", ("col", "row")),
        ChoiceParam("bd_scheme", "shim BDs: overlapped 5+5+5 queue or sequential reconfiguration",
                    BD_SCHEMES),
    ]
    return {p.name: p for p in params}


def default_params(target: XdnaTarget, workload: GemmWorkload) -> dict[str, Any]:
    """The paper's design: A/B double-, C single-buffered, whole array, overlapped BDs.

    Tile sizes have no default; they are what the search is for.
    """
    return {
        "buf_a_l1": 2, "buf_b_l1": 2, "buf_c_l1": 1,
        "buf_a_l2": 2, "buf_b_l2": 2, "buf_c_l2": 1,
        "m_rows": target.array.rows, "n_cols": target.array.cols,
        "orientation": "a_rows", "b_layout": workload.b_layout, "bd_scheme": "overlapped",
    }
