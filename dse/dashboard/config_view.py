"""The figures of one configuration's page: memory occupancy, DRAM traffic, time breakdown."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from dse.workload import parse_workload

# Where each part of a trial's time went: the analytical model's components and the
# simulator's stall counters (the names the evaluators report; absent ones are skipped).
TIME_PARTS = {"t_comp_s": "compute (t_comp)", "t_mem_s": "DRAM (t_mem)",
              "t_core_s": "core busy + stalls", "t_fill_s": "pipeline fill",
              "t_drain_s": "C drain", "t_zero_s": "C zeroing", "t_bd_s": "BD reconfiguration",
              "t_bd_setup_s": "BD setup", "t_dispatch_s": "dispatch",
              "stall_inputs_s": "stall: waiting for A/B", "stall_c_drain_s": "stall: C drain",
              "stall_bds_s": "stall: waiting for BDs", "t_mte1_s": "L1 -> L0 (MTE1)",
              "t_fixpipe_s": "write-out (Fixpipe)", "t_cmd_s": "DMA commands",
              "t_boundary_s": "block boundaries", "t_reduce_s": "StreamK reduction",
              "t_rearrange_s": "fold rearrangement"}


def _number(row: pd.Series, name: str) -> float | None:
    value = row.get(name)
    return float(value) if value is not None and pd.notna(value) else None


def occupancy(target: Any, row: pd.Series) -> list[tuple[str, float, float]]:
    """(memory, bytes used, bytes available) for the target's on-chip memories."""
    memory = getattr(target, "memory", None)
    if memory is not None and hasattr(memory, "l0c_bytes"):  # an Ascend core
        out = [(f"{name} per core", used, float(getattr(memory, f"{key}_bytes")))
               for name, key, used in (("L1", "l1", _number(row, "l1_bytes")),
                                       ("L0C", "l0c", _number(row, "l0c_bytes")))
               if used is not None]
        return out
    if memory is None or not hasattr(memory, "l1_stack_bytes"):
        return []
    out = []
    l1, l2 = _number(row, "l1_bytes"), _number(row, "l2_bytes")
    if l1 is not None:
        out.append(("L1 per core (buffers, without the stack)", l1,
                    float(memory.l1_bytes - memory.l1_stack_bytes)))
    if l2 is not None:
        columns = target.array.cols
        out.append((f"L2 over the {columns} MemTiles", l2, float(memory.l2_bytes * columns)))
    return out


def occupancy_figure(target: Any, row: pd.Series) -> go.Figure | None:
    bars = occupancy(target, row)
    if not bars:
        return None
    names = [b[0] for b in bars]
    used = [100 * b[1] / b[2] for b in bars]
    fig = go.Figure([go.Bar(y=names, x=used, orientation="h", name="used",
                            text=[f"{b[1] / 1024:,.1f} of {b[2] / 1024:,.0f} KiB" for b in bars],
                            textposition="auto")])
    fig.update_layout(title="On-chip memory occupancy", xaxis_title="% of capacity",
                      xaxis_range=[0, 100], height=260)
    return fig


def dram_figure(row: pd.Series) -> go.Figure | None:
    """DRAM bytes moved per matrix against the matrix's own size (the re-read factor)."""
    moved = {k: _number(row, f"dram_bytes_{k.lower()}") for k in "ABC"}
    if any(v is None for v in moved.values()):
        return None
    workload = parse_workload(str(row["shape"]), str(row["dtype"]), str(row["b_layout"]))
    size = dict(zip("ABC", workload.operand_bytes(), strict=True))
    fig = go.Figure([
        go.Bar(x=list(moved), y=[moved[x] / 1e6 for x in moved], name="moved",
               text=[f"{moved[x] / size[x]:.2f}x its size" for x in moved], textposition="auto"),
        go.Bar(x=list(size), y=[size[x] / 1e6 for x in size], name="matrix size")])
    fig.update_layout(title="DRAM traffic per matrix", yaxis_title="MB", barmode="group",
                      height=320)
    return fig


def time_figure(row: pd.Series) -> go.Figure | None:
    """The time components the evaluator reported, stalls included."""
    parts = [(label, _number(row, key)) for key, label in TIME_PARTS.items()]
    parts = [(label, value) for label, value in parts if value is not None]
    if not parts:
        return None
    fig = go.Figure(go.Bar(y=[p[0] for p in parts], x=[p[1] * 1e6 for p in parts],
                           orientation="h"))
    latency = _number(row, "latency_s")
    title = "Time breakdown" + (f" (latency {latency * 1e6:,.1f} us)" if latency else "")
    fig.update_layout(title=title, xaxis_title="microseconds",
                      yaxis={"autorange": "reversed"}, height=120 + 28 * len(parts))
    return fig
