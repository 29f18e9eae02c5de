"""The study page and what a live study page refreshes from.

A running study's page asks :func:`live_state` every few seconds and changes itself in place:
the counts, the workloads table and each shown workload's best are HTML rendered by the same
partial templates as the page (the page swaps in those that changed), and each plot is named by
a key with a digest of its JSON (the page fetches again only the plots that changed, draws new
ones where they belong and removes those gone). Nothing reloads the page, so its scroll
position and each plot's zoom survive the study's progress.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from flask import render_template, url_for

from dse.dashboard.data import StudySummary
from dse.dashboard.plots import drawn

FEW_WORKLOADS = 3  # a study of more shows one workload at a time, after a summary of all
OVERVIEW_KEY = "overview"  # the key of the plot of each workload's best


def workload_filter(workload: Any) -> str:
    """The trials filter that keeps one workload's trials."""
    shape, dtype, layout = (str(v).replace("'", "") for v in
                            (workload.shape, workload.dtype, workload.b_layout))
    return f"shape == '{shape}' and dtype == '{dtype}' and b_layout == '{layout}'"


def best_per_workload_figure(summary: StudySummary) -> go.Figure:
    """Each workload's best objective, in the study's order, a point per workload (hover names
    its best trial; clicking opens it)."""
    metric = summary.objectives[0][0]
    rows = [(w.label, w.best.iloc[0]) for w in summary.workloads if not w.best.empty]
    fig = go.Figure(go.Scatter(
        x=[label for label, _ in rows], y=[row[metric] for _, row in rows],
        mode="markers+lines", marker={"size": 9}, name=f"best {metric}",
        customdata=[int(row["number"]) for _, row in rows],
        hovertext=[f"{label}<br>best: trial {int(row['number'])}, {metric}={row[metric]:.4g}"
                   for label, row in rows],
        hovertemplate="%{hovertext}<extra></extra>"))
    fig.update_layout(title=f"Best {metric} of each workload", yaxis_title=metric,
                      xaxis_title="workload", showlegend=False)
    return fig


def overview(summary: StudySummary) -> dict[str, str] | None:
    """The plot of each workload's best (drawn once per version of the study), for a study of
    several workloads."""
    if len(summary.workloads) < 2:
        return None
    if OVERVIEW_KEY not in summary.rendered:
        summary.rendered[OVERVIEW_KEY] = drawn(best_per_workload_figure(summary), OVERVIEW_KEY)
    return summary.rendered[OVERVIEW_KEY]


def page_context(summary: StudySummary, shown: list[int],
                 sections: list[dict[str, Any]]) -> dict[str, Any]:
    """What the study page's templates (the page and its partials) are rendered with."""
    config_url = url_for("config", name=summary.name, number=0).replace("/config/0/",
                                                                        "/config/TRIAL/")
    return {"s": summary, "shown": shown, "sections": sections,
            "one_at_a_time": len(summary.workloads) > FEW_WORKLOADS,
            "filters": [workload_filter(w) for w in summary.workloads],
            "overview": overview(summary), "config_url": config_url}


def live_state(context: dict[str, Any]) -> dict[str, Any]:
    """What a live page refreshes from (see the module's docstring): the study's status and
    counts, the HTML of the page's parts by element id, the overview plot's key and digest,
    and each shown workload's head (HTML) and plots (keys and digests, in page order). Built
    once per version of the study and choice of workloads."""
    summary: StudySummary = context["s"]
    key = ("state", tuple(context["shown"]))
    if key not in summary.rendered:
        shown = context["overview"]
        summary.rendered[key] = {
            "status": summary.status, "updated": str(summary.updated), "total": summary.total,
            "parts": {"counts": render_template("_study_counts.html", **context),
                      "workloads": render_template("_workloads.html", **context),
                      "workload-select-holder": render_template("_workload_select.html",
                                                                **context)},
            "overview": [[shown["key"], shown["hash"]]] if shown else [],
            "sections": [{"index": w["index"],
                          "head": render_template("_section_head.html", **context, w=w),
                          "figures": [[f["key"], f["hash"]] for f in w["figures"]]}
                         for w in context["sections"]]}
    return summary.rendered[key]
