"""``dse cover-report STUDY... --out report.html``: the same mix on several targets in one
self-contained HTML file: the K curves side by side, then per study its plan for K kernels
(shapes x kernels heat map, per-shape losses) and a table of every shape's optimum, what
bounds it, the kernel serving it and its loss."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from dse.analysis.figures import figure_html
from dse.analysis.report import write_page
from dse.core.errors import UsageError
from dse.deploy.cover import NoCover
from dse.deploy.figures import heatmap_figure, k_curve_figure, loss_figure
from dse.deploy.plan import Plan, plan_study
from dse.deploy.table import kernel_lines
from dse.storage.store import ResultStore


def cover_plans(store: ResultStore, studies: list[str], kernels: int,
                objective: str) -> list[tuple[str, Plan]]:
    """Each study's plan, named ``study (target)``; a study none of whose K-sets of kernels
    runs every shape is a :class:`UsageError`."""
    plans = []
    for study in dict.fromkeys(studies):
        try:
            plan = plan_study(store, study, kernels, objective)
        except NoCover as exc:
            raise UsageError(str(exc)) from None
        plans.append((f"{study} ({plan.problem.target})", plan))
    return plans


def _shape_table(plan: Plan) -> str:
    rows = pd.DataFrame([{"shape": s["shape"], "calls": s["weight"],
                          "optimum TOPS": s["optimum_tops"], "bound": s["bound"],
                          "kernel": s["kernel"], "TOPS": s["tops"],
                          "loss": f"{100 * s['loss']:.1f} %"} for s in plan.table["shapes"]])
    return rows.to_html(index=False, float_format=lambda v: f"{v:.4g}", classes="configs",
                        border=0, escape=True)


def _kernel_list(plan: Plan) -> str:
    lines, shared = kernel_lines(plan.table)
    items = "".join(f"<li>kernel {n}: {html.escape(line)}</li>" for n, line in enumerate(lines))
    if shared and len(lines) > 1:
        items += f"<li>every kernel: {html.escape(shared)}</li>"
    return f"<ul>{items}</ul>"


def write_cover_report(store: ResultStore, studies: list[str], kernels: int, objective: str,
                       out: str | Path) -> Path:
    """Write the report of ``studies``' covers with at most ``kernels`` kernels to ``out``."""
    plans = cover_plans(store, studies, kernels, objective)
    body = [f"<h1>Deployment: {html.escape(', '.join(studies))}</h1>",
            f"<p>At most {kernels} kernel{'s' if kernels > 1 else ''} a target, objective "
            f"<b>{html.escape(objective)}</b>. A shape's optimum is its best config alone "
            "(exact where the evaluator scores the whole space); the mix's throughput is its "
            "operations over its time, each shape's calls counted.</p>",
            figure_html(k_curve_figure(plans))]
    for name, plan in plans:
        memory = sum(b == "memory" for b in plan.problem.bound)
        body += [f"<h2>{html.escape(name)}</h2>",
                 f"<p>{len(plan.problem.workloads)} shapes ({memory} memory-bound at their "
                 f"optimum), {len(plan.problem.candidates)} candidate kernels; with "
                 f"{plan.cover.k}: {plan.cover.fraction:.1%} of the optimum, worst shape "
                 f"{plan.cover.worst_loss:.1%} below its own"
                 + (f"; one more kernel adds under 1 % past {plan.stops_paying}"
                    if plan.stops_paying else "") + ".</p>",
                 _kernel_list(plan), figure_html(heatmap_figure(name, plan)),
                 figure_html(loss_figure(name, plan)), _shape_table(plan)]
    return write_page(out, "dse cover report", body)
