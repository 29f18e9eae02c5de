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

import pandas as pd
from plotly.offline import get_plotlyjs

from dse.analysis.columns import config_columns, trial_series
from dse.analysis.figures import figure_html, workload_figures
from dse.core.registry import load_target
from dse.storage.frames import best_trials
from dse.storage.store import ResultStore


def _table(frame: pd.DataFrame, columns: list[str]) -> str:
    return frame[columns].to_html(index=False, float_format=lambda v: f"{v:.4g}",
                                classes="configs", border=0, escape=True)


def _workload_section(group: pd.DataFrame, params: list[str], objectives: list[tuple[str, str]],
                      target: Any) -> list[str]:
    metric = objectives[0][0]
    ok = group[group["status"] == "ok"]
    varying = [p for p in params if p in group and group[p].nunique() > 1]
    if ok.empty:
        reasons = group.groupby(["status", group["reason"].fillna("")]).size().nlargest(3)
        return ["<p><b>No feasible configuration.</b> The commonest reasons:</p><ul>"
                + "".join(f"<li>{n:,} {html.escape(str(status))}: {html.escape(str(reason))}"
                          "</li>" for (status, reason), n in reasons.items()) + "</ul>"]
    best = best_trials(group, top=10)
    parts = ["<h3>Best configurations</h3>" + _table(
        best, config_columns(best, varying, [m for m, _ in objectives]))]
    figures = workload_figures(ok["number"].to_numpy(), ok[metric].to_numpy(dtype=float), ok,
                               best, ok, params, objectives, target,
                               evaluators=trial_series(ok))
    return parts + [figure_html(f) for f in figures]


def write_report(store: ResultStore, study: str, out: str | Path) -> Path:
    """Write the HTML report of ``study`` to ``out`` and return its path."""
    frame = store.load_trials(study)
    target = load_target(store.study_spec(study)["target"])
    params = frame.attrs.get("params", [])
    objectives = frame.attrs.get("objectives", [("tops", "maximize")])
    body = [f"<h1>Study {html.escape(study)}</h1>",
            f"<p>Target {html.escape(target.name)} &mdash; {html.escape(target.description)}; "
            f"{len(frame)} trials; objectives "
            f"{html.escape(', '.join(f'{m} ({d})' for m, d in objectives))}.</p>"]
    for (shape, dtype, layout), group in frame.groupby(["shape", "dtype", "b_layout"]):
        group.attrs = frame.attrs
        body.append(f"<h2>{html.escape(f'{shape} {dtype} (B {layout})')}</h2>")
        body.extend(_workload_section(group, params, objectives, target))
    return write_page(out, f"dse report: {study}", body)


def write_page(out: str | Path, title: str, body: list[str]) -> Path:
    """Write a self-contained HTML page of ``body``'s fragments (Plotly's script embedded once,
    so it opens anywhere without a network) to ``out`` and return its path."""
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<script>{get_plotlyjs()}</script>"
            f"<title>{html.escape(title)}</title><style>"
            "body{font-family:sans-serif;margin:2em;max-width:1100px}"
            "table.configs{display:block;overflow-x:auto}"
            "table.configs{border-collapse:collapse;font-size:13px}"
            "table.configs td,table.configs th{padding:3px 8px;border-bottom:1px solid #ddd}"
            "</style></head><body>" + "\n".join(body) + "</body></html>")
    path = Path(out)
    path.write_text(page, encoding="utf-8")
    return path
