"""The figures of one configuration's page: memory occupancy, DRAM traffic, time breakdown."""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

from dse.core.space import COMMON_TIME_PARTS
from dse.core.target import Target
from dse.core.workload import Workload


def _number(row: pd.Series, name: str) -> float | None:
    value = row.get(name)
    return float(value) if value is not None and pd.notna(value) else None


def occupancy_figure(target: Target, row: pd.Series) -> go.Figure | None:
    """How much of each on-chip resource the config uses (``target.occupancy``: a list of
    (resource, used, available, unit) for a trial's metrics and parameters)."""
    values = {k: float(v) for k, v in row.items()
              if isinstance(v, numbers.Real) and not isinstance(v, bool) and pd.notna(v)}
    bars = [b for b in target.occupancy(values) if b[2] > 0]
    if not bars:
        return None

    def amount(value: float, unit: str) -> str:
        return f"{value / 1024:,.1f} KiB" if unit == "B" else f"{value:,.0f} {unit}"

    fig = go.Figure([go.Bar(y=[b[0] for b in bars], x=[100 * b[1] / b[2] for b in bars],
                            orientation="h", textposition="auto",
                            text=[f"{amount(b[1], b[3])} of {amount(b[2], b[3])}"
                                  for b in bars])])
    fig.update_layout(title="On-chip resource occupancy", xaxis_title="% of capacity",
                      xaxis_range=[0, 100], height=160 + 40 * len(bars))
    return fig


def dram_figure(row: pd.Series, workload: Workload) -> go.Figure | None:
    """DRAM bytes moved per matrix against the matrix's own size (the re-read factor)."""
    moved = {k: _number(row, f"dram_bytes_{k.lower()}") for k in "ABC"}
    if any(v is None for v in moved.values()):
        return None
    size = dict(zip("ABC", workload.operand_bytes(), strict=True))
    fig = go.Figure([
        go.Bar(x=list(moved), y=[moved[x] / 1e6 for x in moved], name="moved",
               text=[f"{moved[x] / size[x]:.2f}x its size" for x in moved], textposition="auto"),
        go.Bar(x=list(size), y=[size[x] / 1e6 for x in size], name="matrix size")])
    fig.update_layout(title="DRAM traffic per matrix", yaxis_title="MB", barmode="group",
                      height=320)
    return fig


def time_figure(row: pd.Series, family_parts: Mapping[str, str]) -> go.Figure | None:
    """The time components the evaluator reported, stalls included: the common ones and those
    the family names (``family_parts``: metric -> label)."""
    labels = {**COMMON_TIME_PARTS, **family_parts}
    parts = [(label, _number(row, key)) for key, label in labels.items()]
    parts = [(label, value) for label, value in parts if value is not None]
    if not parts:
        return None
    fig = go.Figure(go.Bar(y=[p[0] for p in parts], x=[p[1] * 1e6 for p in parts],
                           orientation="h"))
    latency = _number(row, "latency_s")
    title = "Time breakdown" + (f" (latency {latency * 1e6:,.1f} µs)" if latency else "")
    # compute and memory run at once: the parts overlap, so their sum is not the latency
    # on two lines: the long labels of the parts leave the axis narrow
    fig.update_layout(title=title, xaxis_title="microseconds<br>(the parts overlap in time: "
                      "they need not add up to the latency)",
                      yaxis={"autorange": "reversed"}, height=120 + 28 * len(parts))
    return fig
