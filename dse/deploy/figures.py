"""Plots of a deployment plan: the K curve (the mix's throughput, as a fraction of every shape
at its own optimum, against the number of kernels), the shapes x kernels heat map (each
kernel's throughput on each shape against the shape's optimum, the kernel serving it marked)
and the per-shape loss bars (coloured by what bounds the shape's optimum)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from dse.deploy.plan import Plan

BOUND_COLOURS = {"memory": "#d62728", "compute": "#1f77b4"}


def k_curve_figure(plans: Sequence[tuple[str, Plan]]) -> go.Figure:
    """Each plan's fraction of the optimum against K (one line a study or target)."""
    fig = go.Figure()
    for name, plan in plans:
        ks = [k for k, c in enumerate(plan.curve, start=1) if c is not None]
        fractions = [100 * c.fraction for c in plan.curve if c is not None]
        fig.add_trace(go.Scatter(x=ks, y=fractions, mode="lines+markers", name=name,
                                 hovertemplate="K=%{x}: %{y:.1f} % of the optimum<extra>"
                                 f"{name}</extra>"))
    fig.update_layout(title="Mix throughput against the number of kernels",
                      xaxis_title="kernels (K)", yaxis_title="% of every shape at its optimum",
                      xaxis={"dtick": 1})
    return fig


def heatmap_figure(name: str, plan: Plan) -> go.Figure:
    """Each chosen kernel's throughput on each shape, as a % of the shape's optimum (blank where
    it cannot run the shape); the kernel serving a shape marked with a ring."""
    problem, cover = plan.problem, plan.cover
    ratio = problem.tops[:, list(cover.kernels)] / problem.optimum[:, None] * 100
    shown = np.where(problem.tops[:, list(cover.kernels)] > 0, ratio, np.nan)
    labels = [f"{w.shape} ({weight:g} calls)" for w, weight in zip(problem.workloads,
                                                                   problem.weights,
                                                                   strict=True)]
    kernels = [f"kernel {n}" for n in range(len(cover.kernels))]
    fig = go.Figure(go.Heatmap(z=shown, x=kernels, y=labels, zmin=0, zmax=100,
                               colorscale="Viridis", colorbar={"title": "% of optimum"},
                               text=np.where(np.isnan(shown), "cannot run",
                                             np.char.mod("%.0f", np.nan_to_num(shown))),
                               texttemplate="%{text}",
                               hovertemplate="%{y} on %{x}: %{z:.1f} % of its optimum"
                                             "<extra></extra>"))
    fig.add_trace(go.Scatter(x=[kernels[a] for a in cover.assign], y=labels, mode="markers",
                             marker={"symbol": "circle-open", "size": 22, "color": "white",
                                     "line": {"width": 3}},
                             name="serves the shape", hoverinfo="skip"))
    fig.update_layout(title=f"{name}: shapes x kernels (K = {cover.k})",
                      height=max(360, 28 * len(labels) + 160),
                      yaxis={"autorange": "reversed"})
    return fig


def loss_figure(name: str, plan: Plan) -> go.Figure:
    """Each shape's loss against its own optimum on the kernel serving it, coloured by what
    bounds its optimum."""
    problem, cover = plan.problem, plan.cover
    fig = go.Figure()
    for bound in sorted(set(problem.bound)):
        at = [i for i, b in enumerate(problem.bound) if b == bound]
        fig.add_trace(go.Bar(x=[problem.workloads[i].shape for i in at],
                             y=[100 * cover.losses[i] for i in at],
                             name=f"{bound or 'unknown'}-bound",
                             marker_color=BOUND_COLOURS.get(bound, "#7f7f7f"),
                             hovertemplate="%{x}: %{y:.1f} % below its optimum<extra></extra>"))
    fig.update_layout(title=f"{name}: each shape's loss on its kernel (K = {cover.k})",
                      xaxis_title="shape (M x K x N)", yaxis_title="% below its optimum",
                      barmode="overlay",  # one bar a shape, in the mix's order
                      xaxis={"categoryorder": "array",
                             "categoryarray": [w.shape for w in problem.workloads]})
    return fig
