"""Figures to explore a study's trials with: the balance point drawn, parallel coordinates,
slice and contour plots over the real parameters, and the explorer (axes and colour chosen from
menus).

Every point carries its trial (:func:`trial_points`): hovering names the trial, its parameters
and key metrics, and the dashboard opens the config page of a clicked point.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

HOVER_METRICS = ("tops", "latency_s", "t_comp_s", "t_mem_s", "bound")
SLICE_PARAMS = 4  # parameters a slice plot shows (the most important first)
PARALLEL_AXES = 8  # parameters' axes a parallel-coordinates plot shows at first
CONTOUR_BINS = 24


def _cells(name: str, values: pd.Series) -> list[str]:
    """``name=value`` of each of ``values`` as hover text: floats to 4 significant digits, a
    missing value empty."""
    if pd.api.types.is_float_dtype(values):
        return ["" if v != v else f"{name}={v:.4g}" for v in values.tolist()]
    return ["" if missing else f"{name}={v}"
            for v, missing in zip(values.tolist(), values.isna().tolist(), strict=True)]


def _joined(frame: pd.DataFrame, columns: list[str]) -> list[str]:
    """``name=value`` of each of ``columns`` per row, comma-separated (a missing value left
    out). Plain lists: a page's plots label a few thousand points each, and pandas' string
    methods take several times as long."""
    rows = zip(*(_cells(name, frame[name]) for name in columns), strict=True)
    return [", ".join(cell for cell in row if cell) for row in rows]


def trial_points(frame: pd.DataFrame, params: list[str] | tuple[str, ...] = (),
                 metrics: tuple[str, ...] = HOVER_METRICS) -> dict[str, Any]:
    """Scatter keywords that make each point its trial: ``customdata`` holds the trial number
    (the dashboard's click-through reads it) and the hover text names the trial, its
    parameters and ``metrics``."""
    if "number" not in frame or frame.empty:
        return {}
    numbers = frame["number"].astype(int).to_numpy()
    text = [f"trial {n}" for n in numbers.tolist()]
    for columns in ([p for p in params if p in frame], [m for m in metrics if m in frame]):
        if columns:
            text = [f"{head}<br>{tail}" for head, tail in
                    zip(text, _joined(frame, columns), strict=True)]
    return {"customdata": numbers, "hovertext": text,
            "hovertemplate": "%{hovertext}<extra></extra>"}


def balance_point(best: pd.DataFrame) -> pd.Series | None:
    """Of the best configurations, the one whose t_comp and t_mem are closest (the balance
    point the paper's procedure aims for)."""
    if best.empty or not {"t_comp_s", "t_mem_s"} <= set(best.columns):
        return None
    ratio = np.abs(np.log(best["t_comp_s"].astype(float) / best["t_mem_s"].astype(float)))
    return None if ratio.isna().all() else best.loc[ratio.idxmin()]


def balance_point_figure(ok: pd.DataFrame, best: pd.DataFrame,
                         params: list[str] | tuple[str, ...] = ()) -> go.Figure | None:
    """t_comp against t_mem for every trial with the line t_comp = t_mem, compute- and
    memory-bound apart, the best config and the most balanced of the best marked and
    labelled."""
    if ok.empty or not {"t_comp_s", "t_mem_s"} <= set(ok.columns):
        return None
    fig = go.Figure()
    groups = ok.groupby("bound") if "bound" in ok else [("configs", ok)]
    for name, group in groups:
        fig.add_trace(go.Scatter(x=group["t_mem_s"], y=group["t_comp_s"], mode="markers",
                                 name=f"{name}-bound" if "bound" in ok else name,
                                 marker={"size": 5, "opacity": 0.55},
                                 **trial_points(group, params)))
    low = float(min(ok["t_comp_s"].min(), ok["t_mem_s"].min()))
    high = float(max(ok["t_comp_s"].max(), ok["t_mem_s"].max()))
    fig.add_trace(go.Scatter(x=[low, high], y=[low, high], mode="lines", name="t_comp = t_mem",
                             line={"dash": "dash", "color": "grey"}, hoverinfo="skip"))
    if not best.empty and pd.notna(best.iloc[0].get("t_comp_s")):
        top, balanced = best.iloc[0], balance_point(best)
        marks = [("best", top, "star", "black")]
        if balanced is not None and balanced["number"] != top["number"]:
            marks.append((f"most balanced of the {len(best)} best", balanced, "diamond",
                          "crimson"))
        for label, row, symbol, colour in marks:
            frame = row.to_frame().T
            fig.add_trace(go.Scatter(
                x=[row["t_mem_s"]], y=[row["t_comp_s"]], mode="markers+text", name=label,
                marker={"size": 14, "symbol": symbol, "color": colour},
                text=[f"{label} #{int(row['number'])}"], textfont={"color": colour},
                textposition="top right" if symbol == "star" else "bottom right",
                **trial_points(frame, params)))
    fig.update_layout(title="The balance point: compute time against DRAM time",
                      xaxis_title="t_mem (s)", yaxis_title="t_comp (s)", xaxis_type="log",
                      yaxis_type="log")
    return fig


def _numeric(frame: pd.DataFrame, name: str) -> tuple[pd.Series, list[str] | None]:
    """A parameter's values as numbers, with the category names when it is not numeric."""
    values = frame[name]
    if pd.api.types.is_numeric_dtype(values):
        return values.astype(float), None
    categories = sorted(values.dropna().astype(str).unique())
    return values.astype(str).map({c: i for i, c in enumerate(categories)}), categories


def _varying(ok: pd.DataFrame, params: list[str]) -> list[str]:
    return [p for p in params if p in ok and ok[p].nunique() > 1]


def parallel_coordinates_figure(ok: pd.DataFrame, params: list[str], metric: str,
                                order: list[str] | None = None) -> go.Figure | None:
    """One axis per parameter that varies, the most important first (from ``order``), and one
    for ``metric``, each trial a line coloured by ``metric``; dragging along an axis keeps the
    lines through that range, dragging its name moves it. Past :data:`PARALLEL_AXES`
    parameters the most important are shown, and a menu shows more or all of them."""
    names = _varying(ok, order or params) or _varying(ok, params)
    names += [p for p in _varying(ok, params) if p not in names]
    if ok.empty or metric not in ok or not names:
        return None
    dimensions = []
    for i, name in enumerate(names):
        values, categories = _numeric(ok, name)
        dimension: dict[str, Any] = {"label": name, "values": values,
                                     "visible": i < PARALLEL_AXES}
        if categories is not None:
            dimension.update(tickvals=list(range(len(categories))), ticktext=categories)
        dimensions.append(dimension)
    colour = ok[metric].astype(float)
    dimensions.append({"label": metric, "values": colour})
    fig = go.Figure(go.Parcoords(line={"color": colour, "colorscale": "Viridis",
                                       "showscale": True, "colorbar": {"title": metric}},
                                 dimensions=dimensions))
    # the axes' names sit above them: the title needs room of its own
    fig.update_layout(title=f"Parallel coordinates: every parameter and {metric}",
                      margin={"t": 100, "l": 50, "r": 40, "b": 30})
    if len(names) > PARALLEL_AXES:  # 17 axes side by side cannot be read: the user chooses
        # the menu at the right of a shorter title, both above the axes' names
        fig.update_layout(
            title=f"Parallel coordinates<br><sup>{metric} and {len(names)} parameters, the "
                  "most important first</sup>", margin={"t": 120},
            updatemenus=[{**_menu("axes", 1.0, _axes_buttons(len(names))), "active": 1,
                          "xanchor": "right", "y": 1.5}])
    return fig


def _axes_buttons(count: int) -> list[dict[str, Any]]:
    """The parallel-coordinates menu: the few, the :data:`PARALLEL_AXES` or all ``count`` most
    important parameters' axes (the objective's, the last, always shown)."""
    shown = sorted({min(4, count), PARALLEL_AXES, count})
    return [{"label": f"axes: {'all ' + str(n) if n == count else f'the {n} most important'}",
             "method": "restyle",
             "args": [{f"dimensions[{i}].visible": i < n for i in range(count)}]}
            for n in shown]


def slice_figure(ok: pd.DataFrame, params: list[str], metric: str,
                 order: list[str] | None = None) -> go.Figure | None:
    """``metric`` against each parameter on its own (the most important first, from
    ``order``), every point its trial."""
    names = _varying(ok, order or params) or _varying(ok, params)
    names = names[:SLICE_PARAMS]
    if ok.empty or metric not in ok or not names:
        return None
    fig = make_subplots(rows=1, cols=len(names), shared_yaxes=True, horizontal_spacing=0.02)
    identity = trial_points(ok, names, (metric,))  # one hover text for all the panels
    for i, name in enumerate(names, start=1):
        fig.add_trace(go.Scatter(x=ok[name], y=ok[metric], mode="markers", name=name,
                                 showlegend=False, marker={"size": 4, "opacity": 0.5},
                                 **identity), row=1, col=i)
        fig.update_xaxes(title_text=name, row=1, col=i)
    fig.update_yaxes(title_text=metric, row=1, col=1)
    fig.update_layout(title=f"Slices: {metric} against each parameter")
    return fig


def contour_figure(ok: pd.DataFrame, params: list[str], metric: str, direction: str,
                   order: list[str] | None = None) -> go.Figure | None:
    """The best ``metric`` over the two most important numeric parameters (from ``order``):
    each cell of a grid over them holds the best trial's value, the trials drawn on top."""
    numeric = [p for p in _varying(ok, order or params)
               if pd.api.types.is_numeric_dtype(ok[p])]
    if ok.empty or metric not in ok or len(numeric) < 2:
        return None
    x_name, y_name = numeric[:2]
    x, y, z = (ok[c].astype(float) for c in (x_name, y_name, metric))
    x_edges = np.unique(np.quantile(x, np.linspace(0, 1, CONTOUR_BINS + 1)))
    y_edges = np.unique(np.quantile(y, np.linspace(0, 1, CONTOUR_BINS + 1)))
    xi = np.clip(np.searchsorted(x_edges, x, side="right") - 1, 0, len(x_edges) - 2)
    yi = np.clip(np.searchsorted(y_edges, y, side="right") - 1, 0, len(y_edges) - 2)
    grid = pd.DataFrame({"xi": xi, "yi": yi, "z": z.to_numpy()})
    best = grid.groupby(["yi", "xi"])["z"].agg("max" if direction == "maximize" else "min")
    cells = np.full((len(y_edges) - 1, len(x_edges) - 1), np.nan)
    for (row, col), value in best.items():
        cells[row, col] = value
    centres = [(edges[:-1] + edges[1:]) / 2 for edges in (x_edges, y_edges)]
    fig = go.Figure(go.Contour(x=centres[0], y=centres[1], z=cells, colorscale="Viridis",
                               connectgaps=True, colorbar={"title": metric},
                               name=f"best {metric}", hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x, y=y, mode="markers", name="trials", showlegend=False,
                             marker={"size": 4, "color": "white", "opacity": 0.6,
                                     "line": {"width": 0.5, "color": "black"}},
                             **trial_points(ok, params)))
    fig.update_layout(title=f"Best {metric} over {x_name} and {y_name}",
                      xaxis_title=x_name, yaxis_title=y_name)
    return fig


EXPLORER_METRICS = ("tops", "latency_s", "t_comp_s", "t_mem_s", "dram_bytes", "l1_bytes")


def _numeric_columns(ok: pd.DataFrame, names: list[str]) -> list[str]:
    return [n for n in names if n in ok and pd.api.types.is_numeric_dtype(ok[n])
            and ok[n].nunique() > 1]


def _menu(label: str, x: float, buttons: list[dict[str, Any]]) -> dict[str, Any]:
    return {"buttons": buttons, "direction": "down", "x": x, "xanchor": "left", "y": 1.18,
            "yanchor": "top", "showactive": True, "name": label, "pad": {"r": 4, "t": 0}}


def explorer_figure(ok: pd.DataFrame, params: list[str], metric: str,
                    columns: list[str] | None = None, colour: str | None = None,
                    title: str = "Explore: choose the axes and the colour",
                    behind: pd.DataFrame | None = None) -> go.Figure | None:
    """Every trial on two axes of the user's choosing, coloured by a third: three menus over
    the parameters and metrics (``columns``; the metrics the family reports by default), the
    x axis on the first parameter, y on ``metric`` and the colour on ``colour`` (``metric``)
    to start with. ``behind``: other trials drawn in grey under them (a Pareto front's
    dominated trials), moved by the axis menus too."""
    choices = _numeric_columns(ok, columns or [*params, *EXPLORER_METRICS])
    if ok.empty or len(choices) < 2 or metric not in choices:
        return None
    x0 = next(c for c in choices if c != metric)
    colour = colour if colour in choices else metric
    frames = [ok] if behind is None or behind.empty else [behind, ok]
    fig = go.Figure()
    if len(frames) == 2:
        fig.add_trace(go.Scatter(x=behind[x0], y=behind[metric], mode="markers",
                                 showlegend=False, name="dominated trials",
                                 marker={"size": 5, "opacity": 0.5, "color": "#b8b8b8"},
                                 **trial_points(behind, params)))
    fig.add_trace(go.Scatter(
        x=ok[x0], y=ok[metric], mode="markers", showlegend=False,
        marker={"size": 6, "opacity": 0.7, "color": ok[colour], "colorscale": "Viridis",
                "showscale": True, "colorbar": {"title": colour}}, **trial_points(ok, params)))

    # the menus carry every choice's values: to 4 significant digits, they weigh half as much
    rounded = {name: [[float(f"{v:.4g}") for v in frame[name].astype(float)]
                      for frame in frames] for name in choices}

    def buttons(axis: str) -> list[dict[str, Any]]:
        out = []
        for name in choices:
            values = rounded[name]
            if axis == "colour":  # the coloured trials alone (the last trace)
                out.append({"label": f"colour: {name}", "method": "restyle",
                            "args": [{"marker.color": [values[-1]],
                                      "marker.colorbar.title.text": name},
                                     [len(frames) - 1]]})
            else:
                out.append({"label": f"{axis}: {name}", "method": "update",
                            "args": [{axis: values}, {f"{axis}axis.title.text": name}]})
        return out

    def active(axis: str, name: str) -> dict[str, Any]:
        menu = _menu(axis, {"x": 0.0, "y": 0.3, "colour": 0.6}[axis], buttons(axis))
        menu["active"] = choices.index(name)
        return menu

    fig.update_layout(title={"text": title, "y": 0.98}, xaxis_title=x0, yaxis_title=metric,
                      updatemenus=[active("x", x0), active("y", metric),
                                   active("colour", colour)],
                      margin={"t": 110})
    return fig


def ranked_explorer_figure(ok: pd.DataFrame, params: list[str], metric: str,
                           direction: str) -> go.Figure | None:
    """:func:`explorer_figure` with one more column to choose, ``rank of METRIC`` (the share of
    trials a trial is at least as good as, 1 for the best): two parameters on the axes coloured
    by it make Optuna's rank plot."""
    if metric not in ok:
        return explorer_figure(ok, params, metric)
    rank = f"rank of {metric}"
    ranked = ok.assign(**{rank: ok[metric].rank(pct=True, ascending=direction == "maximize")})
    return explorer_figure(ranked, params, metric, columns=[*params, *EXPLORER_METRICS, rank])
