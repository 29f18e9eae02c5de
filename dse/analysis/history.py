"""The optimisation history: every trial's objective and the best so far, each point its trial
(hover names it, and the dashboard opens it on a click, as on the other plots)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

HISTORY_POINTS = 600  # past this many trials, each bucket of trials shows its best


def history_figure(numbers: np.ndarray, values: np.ndarray, direction: str,
                   metric: str, evaluators: np.ndarray | None = None) -> go.Figure:
    """Every trial's objective (bucketed to the best per bucket past :data:`HISTORY_POINTS`
    trials) and the best so far; with ``evaluators`` (one per trial) naming several, each
    evaluator's trials and best so far apart (a ladder's model and measurements are not one
    series)."""
    numbers, values = np.asarray(numbers), np.asarray(values, dtype=float)
    names = list(dict.fromkeys(evaluators)) if evaluators is not None else []
    fig = go.Figure()
    if len(names) > 1:
        for name in names:
            chosen = np.asarray(evaluators) == name
            _add_history(fig, numbers[chosen], values[chosen], direction, metric, f" ({name})")
    else:
        _add_history(fig, numbers, values, direction, metric, "")
    fig.update_layout(title=f"Optimisation history ({len(values):,} trials)",
                      xaxis_title="trial", yaxis_title=metric)
    return fig


def _add_history(fig: go.Figure, numbers: np.ndarray, values: np.ndarray, direction: str,
                 metric: str, suffix: str) -> None:
    """Add the trials' values (bucketed past :data:`HISTORY_POINTS`) and their best so far,
    each point carrying the number of the trial it shows (``customdata``)."""
    order = np.argsort(numbers, kind="stable")
    numbers, values = numbers[order].astype(int), values[order]
    maximize = direction == "maximize"
    running = (np.fmax if maximize else np.fmin).accumulate(values) if len(values) else values
    holders = numbers[_best_so_far_positions(values, running)]
    shown, label = np.arange(len(values)), metric
    if len(values) > HISTORY_POINTS:
        edges = np.linspace(0, len(values), HISTORY_POINTS + 1).astype(int)
        shown = _best_of_buckets(values, edges, maximize)
        label = f"{metric} (best of each {len(values) // HISTORY_POINTS}+ trials)"
        last = edges[1:] - 1
        numbers_at, running, holders = numbers[last], running[last], holders[last]
    else:
        numbers_at = numbers
    fig.add_trace(go.Scatter(
        x=numbers[shown], y=values[shown], mode="markers", name=label + suffix,
        marker={"size": 5, "opacity": 0.6}, customdata=numbers[shown],
        hovertext=[f"trial {n}<br>{metric}={v:.4g}"
                   for n, v in zip(numbers[shown].tolist(), values[shown].tolist(), strict=True)],
        hovertemplate="%{hovertext}<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=numbers_at, y=running, mode="lines", name="best so far" + suffix, customdata=holders,
        hovertext=[f"best after trial {n}: trial {h}<br>{metric}={v:.4g}" for n, h, v in
                   zip(numbers_at.tolist(), holders.tolist(), running.tolist(), strict=True)],
        hovertemplate="%{hovertext}<extra></extra>"))


def _best_so_far_positions(values: np.ndarray, running: np.ndarray) -> np.ndarray:
    """For each position, the position of the trial holding the best so far there: the first to
    reach it (a later tie does not take it over, as ``dse best`` keeps the earlier trial)."""
    if not len(values):
        return np.zeros(0, dtype=int)
    reached = values == running  # NaN reaches nothing
    reached[1:] &= running[1:] != running[:-1]
    reached[0] = True  # before any value, the first trial stands for the (empty) best
    return np.maximum.accumulate(np.where(reached, np.arange(len(values)), 0))


def _best_of_buckets(values: np.ndarray, edges: np.ndarray, maximize: bool) -> np.ndarray:
    """The position of each bucket's best value (buckets between ``edges``; the earliest of
    ties, NaN last)."""
    key = np.where(np.isnan(values), -np.inf, values if maximize else -values)
    positions = np.arange(len(values))
    bucket = np.repeat(np.arange(len(edges) - 1), np.diff(edges))
    # sorted by bucket, then value, then latest first: each bucket's last is its best
    ranked = np.lexsort((-positions, key, bucket))
    return ranked[edges[1:] - 1]
