"""``dse report STUDY --out report.html``: one self-contained HTML file with a study's views.

Per workload: the best configurations, the optimisation history, the balance plots (t_comp and
t_mem against m_ct*n_ct and against k_ct, the best config marked), the roofline (throughput
against arithmetic intensity under the target's compute and bandwidth ceilings), parameter
importance, the Pareto front when the study has several objectives, and model-versus-measured
scatters for each pair of fidelities the study holds. Plotly draws the plots; its script is
embedded once, so the file opens anywhere without a network.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.io import to_html

from dse.storage import ResultStore
from dse.study.query import FIDELITY_RANK, best_trials, load_trials
from dse.target import load_target


def parameter_importance(frame: pd.DataFrame, params: list[str], metric: str) -> pd.Series:
    """Share of the metric's variance explained by each parameter alone (ANOVA eta squared)."""
    values = frame[metric].astype(float)
    total = float(((values - values.mean()) ** 2).sum())
    out = {}
    for name in params:
        if name not in frame or frame[name].nunique() < 2 or total == 0:
            continue
        groups = frame.groupby(name)[metric]
        between = float((groups.count() * (groups.mean() - values.mean()) ** 2).sum())
        out[name] = between / total
    return pd.Series(out, dtype=float).sort_values(ascending=False)


def _figure(fig: go.Figure, first: bool) -> str:
    fig.update_layout(height=380, margin={"l": 60, "r": 20, "t": 50, "b": 50},
                      template="plotly_white")
    return to_html(fig, full_html=False, include_plotlyjs="inline" if first else False)


def _table(frame: pd.DataFrame, columns: list[str]) -> str:
    shown = [c for c in columns if c in frame]
    return frame[shown].to_html(index=False, float_format=lambda v: f"{v:.4g}",
                                classes="configs", border=0, escape=True)


def _ceilings(target: Any) -> tuple[float, float] | None:
    """(peak ops/s, DRAM bytes/s) of an array target, for the roofline."""
    if not hasattr(target, "array"):
        return None
    spec = next(iter(target.inputs.values()))
    cores = target.array.rows * target.array.cols
    peak = 2.0 * spec.peak_macs_per_cycle * cores * target.array.clock_hz
    return peak, target.dram.peak_bytes_per_s


def _workload_section(group: pd.DataFrame, params: list[str], objectives: list[tuple[str, str]],
                      target: Any, first: bool) -> tuple[list[str], bool]:
    parts: list[str] = []
    metric, direction = objectives[0]
    ok = group[group["status"] == "ok"].copy()
    best = best_trials(group, top=10)
    varying = [p for p in params if p in group and group[p].nunique() > 1]
    parts.append("<h3>Best configurations</h3>" + _table(
        best, ["number", *varying, "tops", "latency_s", "bound", "balance", "evaluator"]))
    if ok.empty:
        return parts, first
    # history: every trial's objective and the best so far
    history = ok.sort_values("number")
    running = (history[metric].cummax() if direction == "maximize"
               else history[metric].cummin())
    fig = go.Figure([go.Scatter(x=history["number"], y=history[metric], mode="markers",
                                name=metric, marker={"size": 5, "opacity": 0.6}),
                     go.Scatter(x=history["number"], y=running, mode="lines", name="best so far")])
    fig.update_layout(title="Optimisation history", xaxis_title="trial", yaxis_title=metric)
    parts.append(_figure(fig, first))
    first = False
    top = best.iloc[0] if not best.empty else None
    if {"t_comp_s", "t_mem_s", "m_ct", "n_ct", "k_ct"} <= set(ok.columns):
        ok["m_ct x n_ct"] = ok["m_ct"] * ok["n_ct"]
        for axis in ("m_ct x n_ct", "k_ct"):
            fig = go.Figure()
            for column, name in (("t_comp_s", "t_comp"), ("t_mem_s", "t_mem")):
                fig.add_trace(go.Scatter(x=ok[axis], y=ok[column], mode="markers", name=name,
                                         marker={"size": 5, "opacity": 0.6}))
            if top is not None and axis.split(" x ")[0] in top:
                x = top["m_ct"] * top["n_ct"] if axis == "m_ct x n_ct" else top["k_ct"]
                fig.add_trace(go.Scatter(x=[x, x], y=[top.get("t_comp_s"), top.get("t_mem_s")],
                                         mode="markers", name="best (balance point)",
                                         marker={"size": 14, "symbol": "star"}))
            fig.update_layout(title=f"Balance: t_comp and t_mem against {axis}",
                              xaxis_title=axis, yaxis_title="seconds", yaxis_type="log")
            parts.append(_figure(fig, first))
    ceilings = _ceilings(target)
    if ceilings and {"dram_bytes", "tops"} <= set(ok.columns):
        macs = ok["tops"] * ok["latency_s"] * 1e12
        intensity = macs / ok["dram_bytes"]
        peak, bandwidth = ceilings
        xs = np.logspace(np.log10(max(float(intensity.min()) / 2, 1e-3)),
                         np.log10(float(intensity.max()) * 2), 50)
        fig = go.Figure([
            go.Scatter(x=intensity, y=ok["tops"], mode="markers", name="configs",
                       marker={"size": 5, "opacity": 0.6}),
            go.Scatter(x=xs, y=np.minimum(peak, bandwidth * xs) / 1e12, mode="lines",
                       name="roof: min(peak, DRAM bandwidth x intensity)")])
        fig.update_layout(title="Roofline", xaxis_title="operations per DRAM byte",
                          yaxis_title="TOPS", xaxis_type="log", yaxis_type="log")
        parts.append(_figure(fig, first))
    importance = parameter_importance(ok, params, metric)
    if not importance.empty:
        fig = go.Figure(go.Bar(x=importance.values, y=importance.index, orientation="h"))
        fig.update_layout(title=f"Parameter importance (variance of {metric} explained)",
                          xaxis_title="share of variance", yaxis={"autorange": "reversed"})
        parts.append(_figure(fig, first))
    if len(objectives) > 1:
        front = best_trials(group)
        (mx, _), (my, _) = objectives[0], objectives[1]
        fig = go.Figure([go.Scatter(x=ok[mx], y=ok[my], mode="markers", name="trials",
                                    marker={"size": 5, "opacity": 0.4}),
                         go.Scatter(x=front[mx], y=front[my], mode="markers", name="Pareto front",
                                    marker={"size": 10})])
        fig.update_layout(title="Pareto front", xaxis_title=mx, yaxis_title=my)
        parts.append(_figure(fig, first))
    fidelities = sorted(ok["evaluator"].unique(),
                        key=lambda e: FIDELITY_RANK.get(ok[ok["evaluator"] == e]["fidelity"]
                                                        .iloc[0], 0))
    for cheap, dear in zip(fidelities, fidelities[1:], strict=False):
        keys = [p for p in params if p in ok]
        a = ok[ok["evaluator"] == cheap].drop_duplicates(keys).set_index(keys)[metric]
        b = ok[ok["evaluator"] == dear].drop_duplicates(keys).set_index(keys)[metric]
        both = pd.concat([a.rename("cheap"), b.rename("dear")], axis=1, join="inner")
        if len(both) >= 3:
            rho = both["cheap"].corr(both["dear"], method="spearman")
            fig = go.Figure(go.Scatter(x=both["cheap"], y=both["dear"], mode="markers"))
            fig.update_layout(title=f"{dear} against {cheap} ({len(both)} configs, "
                                    f"Spearman {rho:.3f})",
                              xaxis_title=f"{metric} ({cheap})", yaxis_title=f"{metric} ({dear})")
            parts.append(_figure(fig, first))
    return parts, first


def write_report(storage: str | None, study: str, out: str | Path) -> Path:
    store = ResultStore(storage)
    frame = load_trials(store, study)
    with store.session() as s:
        target_name = store.require_study(s, study).spec["target"]
    target = load_target(target_name)
    params = frame.attrs.get("params", [])
    objectives = frame.attrs.get("objectives", [("tops", "maximize")])
    body = [f"<h1>Study {html.escape(study)}</h1>",
            f"<p>Target {html.escape(target.name)} &mdash; {html.escape(target.description)}; "
            f"{len(frame)} trials; objectives "
            f"{html.escape(', '.join(f'{m} ({d})' for m, d in objectives))}.</p>"]
    first = True
    for (shape, dtype, layout), group in frame.groupby(["shape", "dtype", "b_layout"]):
        group.attrs = frame.attrs
        body.append(f"<h2>{html.escape(f'{shape} {dtype} (B {layout})')}</h2>")
        parts, first = _workload_section(group, params, objectives, target, first)
        body.extend(parts)
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>dse report: {html.escape(study)}</title><style>"
            "body{font-family:sans-serif;margin:2em;max-width:1100px}"
            "table.configs{border-collapse:collapse;font-size:13px}"
            "table.configs td,table.configs th{padding:3px 8px;border-bottom:1px solid #ddd}"
            "</style></head><body>" + "\n".join(body) + "</body></html>")
    path = Path(out)
    path.write_text(page)
    return path
