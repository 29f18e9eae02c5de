"""Two views of a study's course that optuna-dashboard users look for: the empirical
distribution of the objective (what share of the feasible trials reach a value) and the
timeline (when each evaluation ran)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

EDF_POINTS = 600  # past this many trials, the distribution is drawn at as many quantiles


def edf_figure(values: np.ndarray, direction: str, metric: str,
               evaluators: np.ndarray | None = None) -> go.Figure | None:
    """The empirical distribution function of ``metric`` over every feasible trial: the share
    of trials at or below each value (a ladder's evaluators apart, as in the history)."""
    values = np.asarray(values, dtype=float)
    names = list(dict.fromkeys(evaluators)) if evaluators is not None else []
    groups = ([(f" ({n})", values[np.asarray(evaluators) == n]) for n in names]
              if len(names) > 1 else [("", values)])
    fig = go.Figure()
    for suffix, group in groups:
        group = np.sort(group[~np.isnan(group)])
        if not len(group):
            continue
        share = np.arange(1, len(group) + 1) / len(group)
        if len(group) > EDF_POINTS:
            keep = np.linspace(0, len(group) - 1, EDF_POINTS).astype(int)
            group, share = group[keep], share[keep]
        fig.add_trace(go.Scatter(x=group, y=share, mode="lines", line={"shape": "hv"},
                                 name=f"{metric}{suffix}",
                                 hovertemplate=f"{metric} ≤ %{{x:.4g}}: %{{y:.1%}} of the "
                                               "trials<extra></extra>"))
    if not fig.data:
        return None
    better = "right" if direction == "maximize" else "left"
    fig.update_layout(title=f"Empirical distribution of {metric} (better to the {better})",
                      xaxis_title=metric, yaxis_title="share of feasible trials",
                      yaxis={"tickformat": ".0%"})
    return fig


def timeline_figure(rows: pd.DataFrame, of_total: int | None = None) -> go.Figure | None:
    """When each of ``rows``' evaluations ran: a bar per trial from its start (recorded less
    the evaluation's time) to when it was recorded, cached results as points; each its trial
    (hover and click). ``of_total``: how many trials ``rows`` were sampled from."""
    if rows.empty or not {"created_at", "elapsed_s", "number"} <= set(rows.columns):
        return None
    rows = rows.sort_values("number")
    end = pd.to_datetime(rows["created_at"])
    took = rows["elapsed_s"].astype(float).fillna(0.0).clip(lower=0.0)
    if "cached" in rows:
        took = took.where(~rows["cached"].astype(bool), 0.0)
    start = (end - pd.to_timedelta(took, unit="s")).dt.round("us")  # what JSON dates hold
    numbers = rows["number"].astype(int).tolist()
    # one trace of segments (a None between two trials), one of their ends to hover and click
    xs = [v for s, e in zip(start, end, strict=True) for v in (s, e, None)]
    ys = [v for n in numbers for v in (n, n, None)]
    fig = go.Figure([
        go.Scatter(x=xs, y=ys, mode="lines", line={"width": 3}, name="evaluating",
                   hoverinfo="skip"),
        go.Scatter(x=end, y=numbers, mode="markers", marker={"size": 4}, name="recorded",
                   customdata=numbers,
                   hovertext=[f"trial {n}<br>{t:.3g} s" for n, t in
                              zip(numbers, took.tolist(), strict=True)],
                   hovertemplate="%{hovertext}<br>%{x}<extra></extra>")])
    sampled = (f"<br><sup>{len(rows):,} of {of_total:,} feasible trials, spread evenly</sup>"
               if of_total and of_total > len(rows) else "")
    fig.update_layout(title=f"Timeline: when each feasible trial was evaluated{sampled}",
                      xaxis_title="time", yaxis_title="trial", showlegend=False)
    return fig
