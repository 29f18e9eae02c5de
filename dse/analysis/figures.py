"""The Plotly figures of a study's views, shared by ``dse report`` and ``dse dashboard``.

Each function takes trials as a frame with :func:`dse.load_trials`'s columns. Scatter plots
draw at most :data:`MAX_POINTS` points (an even sample that always keeps the best rows), so a
study of 100,000 trials stays quick to draw; the caller may pass a sample already.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.io import to_html

from dse.analysis.columns import trial_series
from dse.analysis.explore import (
    balance_point,
    balance_point_figure,
    contour_figure,
    explorer_figure,
    parallel_coordinates_figure,
    ranked_explorer_figure,
    slice_figure,
    trial_points,
)
from dse.analysis.history import history_figure
from dse.analysis.over_time import edf_figure, timeline_figure
from dse.core.registry import fidelity_ranks, search_space_class
from dse.core.space import Breakdown

MAX_POINTS = 600
DOMINATED = "#b8b8b8"  # the grey of trials behind a Pareto front
BREAKDOWN_CONFIGS = 10  # the best configs a study's breakdown bars show
PLOT_CONFIG = {"displaylogo": False}
HOUSE_TEMPLATE = "plotly_white"


def thin(frame: pd.DataFrame, keep: pd.DataFrame | None = None,
         limit: int = MAX_POINTS) -> pd.DataFrame:
    """At most ``limit`` rows of ``frame`` spread evenly over it, plus the rows of ``keep``
    (each trial once)."""
    if len(frame) > limit:
        frame = frame.iloc[np.linspace(0, len(frame) - 1, limit).astype(int)]
    if keep is not None and not keep.empty:
        frame = pd.concat([frame, keep[[c for c in frame.columns if c in keep]]],
                          ignore_index=True)
        if "number" in frame:
            frame = frame.drop_duplicates("number")
    return frame


def _axis_values(fig: go.Figure, axis: str) -> np.ndarray:
    """The positive numbers the traces on layout axis ``axis`` (``xaxis``, ``yaxis2``) draw."""
    letter, suffix = axis[0], axis[5:]
    names = {f"{letter}{suffix}"} | (set() if suffix else {None})  # None: the first axis
    values = []
    for trace in fig.data:
        if getattr(trace, f"{letter}axis", None) in names \
                and getattr(trace, letter, None) is not None:
            values.append(pd.to_numeric(pd.Series(np.ravel(getattr(trace, letter))),
                                        errors="coerce").to_numpy(dtype=float))
    flat = np.concatenate(values) if values else np.array([])
    return flat[np.isfinite(flat) & (flat > 0)]


def log_ticks(low: float, high: float) -> list[float]:
    """Tick values for a log axis over [low, high]: 1, 2 and 5 of each decade over up to three
    decades, the powers of ten alone over more."""
    first, last = int(np.floor(np.log10(low))), int(np.ceil(np.log10(high)))
    steps = (1, 2, 5) if last - first <= 3 else (1,)
    ticks = [step * 10.0 ** k for k in range(first, last + 1) for step in steps]
    return [t for t in ticks if low / 1.01 <= t <= high * 1.01]


def readable_axes(fig: go.Figure) -> go.Figure:
    """Log axes labelled with whole numbers at 1, 2 and 5 of a decade (or its powers of ten),
    not a digit at every minor tick; one that spans less than half a decade, where a log scale
    shows nothing a linear one does not, is linear."""
    for axis in [key for key in fig.layout.to_plotly_json() if key[1:5] == "axis"]:
        if fig.layout[axis].type != "log":
            continue
        values = _axis_values(fig, axis)
        if not len(values):
            continue
        if np.log10(values.max() / values.min()) < 0.5:
            fig.layout[axis].type = "linear"
            continue
        ticks = log_ticks(float(values.min()), float(values.max()))
        fig.layout[axis].update(tickmode="array", tickvals=ticks,
                                ticktext=[f"{t:g}" for t in ticks])
    return fig


def house_layout(fig: go.Figure) -> go.Figure:
    """``fig`` laid out in the house style, its template aside: 420 px high (or more, where the
    figure asks for more: a row a shape, say), the legend under the plot, never over it, and
    :func:`readable_axes`."""
    margin = {side: fig.layout.margin[side] if fig.layout.margin[side] is not None else default
              for side, default in (("l", 60), ("r", 20), ("t", 50), ("b", 50))}
    fig.update_layout(height=max(420, fig.layout.height or 0), margin=margin,
                      legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0})
    return readable_axes(fig)


def house_style(fig: go.Figure) -> go.Figure:
    """``fig`` in the house style: :func:`house_layout` and the :data:`HOUSE_TEMPLATE`."""
    return house_layout(fig).update_layout(template=HOUSE_TEMPLATE)


def figure_html(fig: go.Figure, include_plotlyjs: bool | str = False) -> str:
    """A figure as an HTML fragment in the :func:`house_style` (``include_plotlyjs`` as for
    Plotly)."""
    return to_html(house_style(fig), full_html=False, include_plotlyjs=include_plotlyjs,
                   config=PLOT_CONFIG)


def balance_figures(ok: pd.DataFrame, best: pd.DataFrame,
                    axes: tuple[str, str, str] | None,
                    params: list[str] | tuple[str, ...] = ()) -> list[go.Figure]:
    """t_comp and t_mem against the output tile's area (``axes``: its rows, columns and depth,
    m_ct*n_ct on XDNA) and against its depth (k_ct); the best config and the balance point
    (:func:`balance_point` of ``best``, the best configs in rank order) marked."""
    if axes is None or ok.empty or not {*axes, "t_comp_s", "t_mem_s"} <= set(ok.columns):
        return []
    rows, cols, depth = axes
    area = f"{rows} x {cols}"
    ok = ok.assign(**{area: ok[rows] * ok[cols]})
    marks = []
    if not best.empty and pd.notna(best.iloc[0].get("t_comp_s")):
        # "balance point" only in the sense of the paper's procedure: of the best configs, the
        # one nearest t_comp = t_mem, however far that is (its ratio is in the legend)
        balanced = balance_point(best)
        nearest = f"most balanced of {len(best)} best"
        same = balanced is not None and balanced["number"] == best.iloc[0]["number"]
        marks.append((f"best, also the {nearest}," if same else "best",
                      best.iloc[0], "star", "black"))
        if balanced is not None and not same:
            marks.append((nearest, balanced, "diamond", "crimson"))
    figures = []
    identity = trial_points(ok, params, ("tops", "t_comp_s", "t_mem_s"))
    for axis in (area, depth):
        fig = go.Figure()
        for column, name in (("t_comp_s", "t_comp"), ("t_mem_s", "t_mem")):
            fig.add_trace(go.Scatter(x=ok[axis], y=ok[column], mode="markers", name=name,
                                     marker={"size": 5, "opacity": 0.5}, **identity))
        for label, row, symbol, colour in marks:
            x = row[rows] * row[cols] if axis == area else row[depth]
            fig.add_trace(go.Scatter(
                x=[x, x], y=[row["t_comp_s"], row["t_mem_s"]], mode="markers+lines",
                name=f"{label} #{row['number']} (t_comp/t_mem "
                     f"{row['t_comp_s'] / row['t_mem_s']:.2f})",
                marker={"size": 13 if symbol == "star" else 10, "symbol": symbol,
                        "color": colour}, line={"dash": "dot", "color": colour}))
        fig.update_layout(title=f"Balance: t_comp and t_mem against {axis}",
                          xaxis_title=axis, yaxis_title="seconds", yaxis_type="log")
        figures.append(fig)
    return figures


def roofline_figure(ok: pd.DataFrame, target: Any, name: str = "configs",
                    fig: go.Figure | None = None,
                    best: pd.DataFrame | None = None,
                    params: list[str] | tuple[str, ...] = ()) -> go.Figure | None:
    """Throughput against operations per DRAM byte under the target's two ceilings, the best
    config (first row of ``best``) marked; adds to ``fig`` when given (to overlay studies: each
    target's roof is drawn once)."""
    input_type = str(ok["dtype"].iloc[0]).split("-")[0] if "dtype" in ok and len(ok) else None
    roof = target.roofline(input_type)
    if roof is None or ok.empty or not {"dram_bytes", "tops", "latency_s"} <= set(ok.columns):
        return fig
    intensity = ok["tops"] * ok["latency_s"] * 1e12 / ok["dram_bytes"]
    peak, bandwidth = roof
    xs = np.logspace(np.log10(max(float(intensity.min()) / 2, 1e-3)),
                     np.log10(float(intensity.max()) * 2), 50)
    fig = fig or go.Figure()
    fig.add_trace(go.Scatter(x=intensity, y=ok["tops"], mode="markers", name=name,
                             marker={"size": 5, "opacity": 0.6}, **trial_points(ok, params)))
    if best is not None and not best.empty and pd.notna(best.iloc[0].get("dram_bytes")):
        top = best.iloc[0]
        fig.add_trace(go.Scatter(
            x=[top["tops"] * top["latency_s"] * 1e12 / top["dram_bytes"]], y=[top["tops"]],
            mode="markers", name=f"best #{top['number']}",
            marker={"size": 13, "symbol": "star", "color": "black"}))
    roof_name = (f"{target.name}{' ' + input_type if input_type else ''} roof: "
                 "min(peak, bandwidth x intensity)")
    if roof_name not in {trace.name for trace in fig.data}:
        fig.add_trace(go.Scatter(x=xs, y=np.minimum(peak, bandwidth * xs) / 1e12,
                                 mode="lines", name=roof_name))
    # hardware a study frees (co-design) has ceilings of its own: the best config's
    if best is not None and not best.empty and "peak_tops" in best \
            and pd.notna(best.iloc[0]["peak_tops"]) \
            and not np.isclose(float(best.iloc[0]["peak_tops"]) * 1e12, peak):
        own = float(best.iloc[0]["peak_tops"])
        fig.add_trace(go.Scatter(x=xs, y=np.minimum(own, bandwidth * xs / 1e12), mode="lines",
                                 line={"dash": "dash"},
                                 name=f"best config's ceiling: {own:.3g} TOPS"))
    fig.update_layout(title="Roofline", xaxis_title="operations per DRAM byte",
                      yaxis_title="TOPS", xaxis_type="log", yaxis_type="log")
    return fig


def parameter_importance(frame: pd.DataFrame, params: list[str], metric: str) -> pd.Series:
    """Share of the metric's variance explained by each parameter alone: ANOVA omega squared,
    which, unlike eta squared, does not credit a parameter for having many values (a parameter
    with a value per trial would otherwise explain everything). Parameters are coupled by the
    space's rules, so the shares overlap and need not add up to 1."""
    frame = frame.reset_index(drop=True)  # rows gathered from several reads repeat labels
    values = frame[metric].astype(float)
    values = values[values.notna()]
    total = float(((values - values.mean()) ** 2).sum())
    out = {}
    for name in params:
        if name not in frame or frame[name].nunique() < 2 or total == 0:
            continue
        groups = values.groupby(frame.loc[values.index, name])
        k, n = len(groups), len(values)
        if n <= k:  # a group per trial: nothing left to tell signal from noise
            continue
        between = float((groups.count() * (groups.mean() - values.mean()) ** 2).sum())
        within_mean_square = (total - between) / (n - k)
        omega = (between - (k - 1) * within_mean_square) / (total + within_mean_square)
        out[name] = max(omega, 0.0)
    return pd.Series(out, dtype=float).sort_values(ascending=False)


def importance_figure(ok: pd.DataFrame, params: list[str], metric: str,
                      of_total: int | None = None) -> go.Figure | None:
    """Parameter importance; ``of_total`` says how many trials ``ok`` was sampled from."""
    importance = parameter_importance(ok, params, metric)
    if importance.empty:
        return None
    # each bar says its share: a bar's length alone reads as a ranking, not a value
    fig = go.Figure(go.Bar(x=importance.values, y=importance.index, orientation="h",
                           text=[f"{v:.2f}" for v in importance.values], textposition="auto",
                           hovertemplate="%{y}: ω² = %{x:.3f}<extra></extra>"))
    sampled = (f"<br><sup>estimated from {len(ok):,} of {of_total:,} feasible trials, spread "
               "evenly</sup>" if of_total and of_total > len(ok) else "")
    fig.update_layout(title=f"Parameter importance, each parameter alone{sampled}",
                      xaxis_title=f"share of the variance of {metric} it explains (ω²; "
                      "parameters overlap: no sum to 1)", yaxis={"autorange": "reversed"})
    return fig


def pareto_figure(ok: pd.DataFrame, front: pd.DataFrame,
                  objectives: list[tuple[str, str]],
                  params: list[str] | tuple[str, ...] = ()) -> go.Figure | None:
    """The trials and the Pareto front over the first two objectives; over three or more, the
    front on two axes of the user's choosing among the objectives, coloured by a third."""
    if len(objectives) < 2 or ok.empty:
        return None
    if len(objectives) >= 3 and not front.empty:
        names = [name for name, _ in objectives]
        return explorer_figure(front, list(params), names[1], columns=names,
                               colour=names[2], behind=_dominated(ok, front),
                               title=f"Pareto front, {len(names)} objectives ({len(front)} "
                                     "configs)")
    (mx, _), (my, _) = objectives[0], objectives[1]
    dominated = _dominated(ok, front)
    fig = go.Figure([go.Scatter(x=dominated[mx], y=dominated[my], mode="markers",
                                name="dominated trials",
                                marker={"size": 5, "opacity": 0.5, "color": DOMINATED},
                                **trial_points(dominated, params)),
                     go.Scatter(x=front[mx], y=front[my], mode="markers", name="Pareto front",
                                marker={"size": 10}, **trial_points(front, params))])
    title = ("Pareto front" if len(objectives) == 2 else
             f"Pareto front over {len(objectives)} objectives, drawn on the first two (a front "
             "point can look dominated here)")
    fig.update_layout(title=title, xaxis_title=mx, yaxis_title=my,
                      xaxis_type=_scale(ok[mx]), yaxis_type=_scale(ok[my]))
    return fig


def _dominated(ok: pd.DataFrame, front: pd.DataFrame) -> pd.DataFrame:
    """The trials of ``ok`` not on the ``front`` (drawn in grey behind it)."""
    if "number" not in ok or "number" not in front:
        return ok
    return ok[~ok["number"].isin(front["number"])]


def _scale(values: pd.Series) -> str:
    """``log`` for positive values spanning more than two decades (a front squeezed against an
    axis otherwise), else ``linear``."""
    values = pd.to_numeric(values, errors="coerce").dropna()
    positive = values[values > 0]
    if len(positive) < len(values) or positive.empty:
        return "linear"
    return "log" if positive.max() / positive.min() > 100 else "linear"


def breakdown_figure(rows: pd.DataFrame, breakdown: Breakdown) -> go.Figure | None:
    """One of a family's breakdowns (:class:`dse.core.space.Breakdown`) for each config of
    ``rows`` (a config's page: one; a study's: its best), bars labelled by trial number."""
    parts = {k: v for k, v in breakdown.parts.items() if k in rows and rows[k].notna().any()}
    if not parts or rows.empty:
        return None
    share = breakdown.unit == "share"
    labels = [f"#{n}" for n in rows["number"]] if "number" in rows else \
        [str(i) for i in range(len(rows))]
    fig = go.Figure([go.Bar(y=labels, x=rows[key].astype(float) * (100 if share else 1),
                            name=label, orientation="h") for key, label in parts.items()])
    fig.update_layout(title=breakdown.title, barmode="stack" if breakdown.stacked else "group",
                      xaxis_title="%" if share else breakdown.unit,
                      yaxis={"autorange": "reversed", "type": "category"},
                      legend={"orientation": "h", "y": -0.3},
                      height=200 + (28 if breakdown.stacked else 20 * len(parts)) * len(rows))
    return fig


def fidelity_figures(ok: pd.DataFrame, params: list[str], metric: str) -> list[go.Figure]:
    """Model against measurement for each pair of neighbouring fidelities (a ladder's
    confirmation against its first measurement among them), with the Spearman rank agreement
    over the configs both scored."""
    series = pd.Series(trial_series(ok), index=ok.index)
    rank = ok.groupby(series)["fidelity"].first().map(fidelity_ranks()).fillna(0)
    fidelities = list(rank.sort_values(kind="stable").index)
    keys = [p for p in params if p in ok]
    figures = []
    for cheap, dear in zip(fidelities, fidelities[1:], strict=False):
        a = ok[series == cheap].drop_duplicates(keys).set_index(keys)[metric]
        b = ok[series == dear].drop_duplicates(keys).set_index(keys)[metric]
        both = pd.concat([a.rename("cheap"), b.rename("dear")], axis=1, join="inner")
        if len(both) < 3:
            continue
        rho = both["cheap"].corr(both["dear"], method="spearman")
        fig = go.Figure(go.Scatter(x=both["cheap"], y=both["dear"], mode="markers",
                                   name="configs scored by both"))
        fig.update_layout(title=f"{dear} against {cheap} ({len(both)} configs, "
                                f"Spearman {rho:.3f})",
                          xaxis_title=f"{metric} ({cheap})", yaxis_title=f"{metric} ({dear})")
        figures.append(fig)
    return figures


def workload_figures(numbers: np.ndarray, values: np.ndarray, sample: pd.DataFrame,
                     best: pd.DataFrame, ladder: pd.DataFrame, params: list[str],
                     objectives: list[tuple[str, str]], target: Any,
                     of_total: int | None = None,
                     evaluators: np.ndarray | None = None) -> list[go.Figure]:
    """Every plot of one workload: the history of ``numbers``/``values`` (the feasible trials'
    first objective, apart per evaluator of ``evaluators``), balance, roofline, importance and
    Pareto front from ``sample`` (feasible trials, all or an even sample of ``of_total``) with
    ``best`` marked, and model against measurement from ``ladder`` (trials of configs several
    fidelities scored); none when nothing was feasible."""
    metric, direction = objectives[0]
    if not len(numbers):
        return []
    figures: list[go.Figure | None] = [history_figure(numbers, values, direction, metric,
                                                      evaluators),
                                       edf_figure(values, direction, metric, evaluators)]
    if not sample.empty:
        shown = thin(sample, keep=best)
        axes = search_space_class(target.space).tile_axes
        breakdowns = search_space_class(target.space).breakdowns
        order = list(parameter_importance(sample, params, metric).index)
        # what a point's hover and the menus name: the parameters that vary (a fixed one says
        # nothing and would only make the page heavier)
        varying = [p for p in params if p in shown and shown[p].nunique() > 1]
        figures += [balance_point_figure(shown, best, varying),
                    *balance_figures(shown, best, axes, varying),
                    roofline_figure(shown, target, best=best, params=varying),
                    importance_figure(sample, params, metric, of_total=of_total),
                    pareto_figure(shown, best, objectives, varying),
                    ranked_explorer_figure(shown, varying, metric, direction),
                    parallel_coordinates_figure(shown, varying, metric, order),
                    slice_figure(shown, varying, metric, order),
                    contour_figure(shown, varying, metric, direction, order),
                    timeline_figure(shown, of_total),
                    *(breakdown_figure(best.head(BREAKDOWN_CONFIGS), b) for b in breakdowns)]
    if not ladder.empty:
        figures += fidelity_figures(ladder, params, metric)
    return [f for f in figures if f is not None]
