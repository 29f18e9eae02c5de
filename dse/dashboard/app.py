"""The read-only web dashboard (Flask): studies, a study's views, its trials, one config, and
two studies side by side.

Every page is rendered on the server from SQL: tables are sorted, filtered and paged by the
store's trial pages (:mod:`dse.storage.pages`), plots are drawn from the cached summaries of
:mod:`dse.dashboard.data`, so a study of 100,000 trials loads as fast as one of a hundred.
Nothing here writes to the database; the server answers only GET.
"""

from __future__ import annotations

import functools
import math
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from flask import Flask, Response, abort, jsonify, render_template, request, url_for
from plotly.offline import get_plotlyjs
from werkzeug.exceptions import HTTPException

from dse.analysis.columns import config_columns
from dse.analysis.figures import (
    breakdown_figure,
    history_figure,
    roofline_figure,
    workload_figures,
)
from dse.core.errors import UsageError
from dse.core.formatting import fmt
from dse.core.page import PageData, StudyPage
from dse.core.registry import families, study_pages
from dse.core.suggest import did_you_mean
from dse.dashboard import config_view
from dse.dashboard.cover_view import MAX_KERNELS, CoverCache, cover_view, objective_arg
from dse.dashboard.data import StudySummary, SummaryCache
from dse.dashboard.plots import drawn, plot_html, template_script
from dse.dashboard.study_view import (
    FEW_WORKLOADS,
    OVERVIEW_KEY,
    live_state,
    overview,
    page_context,
    workload_filter,
)
from dse.deploy.cover import OBJECTIVES
from dse.storage.pages import MAX_ROW
from dse.storage.store import ResultStore, open_store

PAGE_SIZES = (25, 50, 100, 250)


def create_app(storage: ResultStore | str | None, warm: bool = False) -> Flask:
    """The dashboard for the results database ``storage`` (a store, URL or SQLite path); with
    ``warm``, a background thread summarises the most recently updated studies at once, so
    their first visit does not wait for it."""
    app = Flask(__name__)
    store = open_store(storage, read_only=True)
    families()  # import every family's code now, not in the first page's time
    pages = _Pages(store, SummaryCache())
    if warm:
        threading.Thread(target=_warm, args=(store, pages.cache), daemon=True).start()
    app.jinja_env.filters["fmt"] = _cell
    app.jinja_env.globals["storage"] = store.safe_url
    app.jinja_env.globals["pages_of"] = pages.pages_of
    app.register_error_handler(UsageError, _usage_error)
    app.register_error_handler(404, _not_found)
    for rule, endpoint in (("/assets/plotly.min.js", "plotly_js"),
                           ("/assets/template.js", "template_js"), ("/", "index"),
                           ("/study/<path:name>", "study"), ("/trials/<path:name>", "trials"),
                           ("/config/<int:number>/<path:name>", "config"),
                           ("/state/<path:name>", "state"),
                           ("/figure/<key>/<path:name>", "figure"),
                           ("/timeline/<int:number>/<path:name>", "timeline"),
                           ("/compare", "compare"), ("/cover/<path:name>", "cover"),
                           ("/page/<page>/<path:name>", "study_page")):
        app.add_url_rule(rule, endpoint, getattr(pages, endpoint), methods=["GET"])
    return app


def _usage_error(exc: UsageError) -> tuple[str, int]:
    return render_template("error.html", message=str(exc)), 400


def _not_found(exc: HTTPException) -> tuple[str, int]:
    return render_template("error.html", message=exc.description), 404


class _Pages:
    """The dashboard's pages over one store, its study summaries cached."""

    def __init__(self, store: ResultStore, cache: SummaryCache) -> None:
        self.store, self.cache = store, cache
        self.covers = CoverCache()
        self.pages = study_pages()  # the pages packages add (dse.pages)

    def summary_of(self, name: str) -> StudySummary:
        if not self.store.has_study(name):
            names = list(self.store.list_studies()["study"])
            abort(404, f"no study {name!r} in {self.store.safe_url}"
                  f"{did_you_mean(name, names)}")
        return self.cache.get(self.store, name)

    def trial_of(self, name: str, number: int) -> pd.Series:
        if number > MAX_ROW:  # beyond what SQL integers hold: no such trial
            abort(404, f"study {name!r} has no trial {number}")
        frame = self.store.trials_by_number(name, [number])
        if frame.empty:
            abort(404, f"study {name!r} has no trial {number}")
        return frame.iloc[0]

    def plotly_js(self) -> Response:
        return _script(_plotly_js())

    def template_js(self) -> Response:
        return _script(_template_js())

    def index(self) -> str:
        studies = self.store.list_studies()
        return render_template("index.html", studies=studies.to_dict("records"),
                               names=list(studies["study"]))

    def section(self, summary: StudySummary, index: int) -> dict[str, Any]:
        """The study page's view of workload ``index`` (from 1), drawn once per version of
        the study and only when asked for (a study of many workloads shows one at a time)."""
        key = ("section", index)
        if key not in summary.rendered:
            summary.rendered[key] = _workload_views(summary, summary.workloads[index - 1], index)
        return summary.rendered[key]

    def shown_workloads(self, summary: StudySummary) -> list[int]:
        """The workloads the study page shows: all of a study of a few, else the one chosen by
        ``?workload=N`` (the first by default)."""
        if len(summary.workloads) <= FEW_WORKLOADS:
            return list(range(1, len(summary.workloads) + 1))
        return [_int_arg("workload", 1, 1, len(summary.workloads))]

    def study_context(self, summary: StudySummary) -> dict[str, Any]:
        """The study page's templates' variables, for the workloads the request shows."""
        shown = self.shown_workloads(summary)
        return page_context(summary, shown, [self.section(summary, i) for i in shown])

    def study(self, name: str) -> str:
        summary = self.summary_of(name)
        return render_template("study.html", **self.study_context(summary), plotly=True)

    def state(self, name: str) -> Response:
        """What a running study's page refreshes from (:func:`.study_view.live_state`)."""
        return jsonify(live_state(self.study_context(self.summary_of(name))))

    def figure(self, key: str, name: str) -> Response:
        """One plot of the study page as Plotly JSON (for a live page to draw or redraw it)."""
        summary = self.summary_of(name)
        shown = overview(summary) if key == OVERVIEW_KEY else None
        if shown:
            return Response(shown["json"], mimetype="application/json")
        index = key.split("-")[0]
        if index.isdigit() and 1 <= int(index) <= len(summary.workloads):
            for f in self.section(summary, int(index))["figures"]:
                if f["key"] == key:
                    return Response(f["json"], mimetype="application/json")
        abort(404, f"study {name!r} has no plot {key!r}")

    def trials(self, name: str) -> tuple[str, int] | str:
        summary = self.summary_of(name)
        where = request.args.get("where", "").strip()
        sort = request.args.get("sort", _default_sort(summary))
        limit = _int_arg("limit", 50, 1, 1000)
        page_number = _int_arg("page", 1, 1, MAX_ROW // 1000)
        unique = request.args.get("unique") == "1"
        choices = {workload_filter(w): w.label for w in summary.workloads}
        try:
            page = self.store.trial_page(name, where=where or None, sort=sort,
                                         offset=(page_number - 1) * limit, limit=limit,
                                         unique=unique)
        except UsageError as exc:
            return render_template("trials.html", s=summary, table=None, error=str(exc),
                                   where=where, sort=sort, limit=limit, unique=unique,
                                   workloads=choices), 400
        last = max(1, math.ceil(page.total / limit))
        if page_number > last:
            abort(404, f"page {page_number} is past the last page ({last}) of the "
                  f"{page.total:,} trials {'matching the filter' if where else 'of ' + name}")
        return render_template("trials.html", s=summary, error=None, where=where, sort=sort,
                               limit=limit, unique=unique, workloads=choices,
                               table=_table_view(summary, page, where, sort, unique))

    def config(self, number: int, name: str) -> str:
        summary = self.summary_of(name)
        row = self.trial_of(name, number)
        workload = summary.workload_of(row)
        figures = [config_view.occupancy_figure(summary.target, row),
                   config_view.dram_figure(row, workload),
                   config_view.time_figure(row, summary.space.time_parts),
                   *(breakdown_figure(row.to_frame().T, b) for b in summary.space.breakdowns)]
        metric_names = [c for c in row.index if c not in summary.params
                        and c not in ("study", "number") and _present(row[c])]
        return render_template(
            "config.html", s=summary, row=row, number=number, label=workload.label,
            params={p: row[p] for p in summary.params if p in row and _present(row[p])},
            fields={c: row[c] for c in metric_names},
            figures=[plot_html(f) for f in figures if f is not None],
            timeline=_has_timeline(row), plotly=True)

    def timeline(self, number: int, name: str) -> Response:
        summary = self.summary_of(name)
        row = self.trial_of(name, number)
        if not _has_timeline(row):
            abort(404, f"trial {number} of {name!r} was not simulated")
        return Response(_simulate_timeline(summary, row), mimetype="application/json",
                        headers={"Content-Disposition": "attachment; filename="
                                 f"\"{name}-trial-{number}-timeline.json\""})

    def compare(self) -> str:
        names = list(self.store.list_studies()["study"])
        chosen = [request.args.get(k, "") for k in ("a", "b")]
        summaries = [self.summary_of(n) for n in chosen if n]
        return render_template("compare.html", names=names, chosen=chosen,
                               summaries=summaries, figures=_compare_figures(summaries),
                               plotly=bool(summaries))


    def cover(self, name: str) -> str:
        summary = self.summary_of(name)
        kernels = _int_arg("kernels", 4, 1, MAX_KERNELS)
        objective = objective_arg(request.args.get("objective"))
        plan = self.covers.get(self.store, name, summary.updated, kernels, objective)
        return render_template("cover.html", s=summary, k=kernels, objective=objective,
                               objectives=OBJECTIVES, max_kernels=MAX_KERNELS,
                               v=cover_view(plan, name), plotly=True)


    def pages_of(self, summary: StudySummary) -> list[StudyPage]:
        """The added pages that apply to ``summary``'s study, for its page's links."""
        return [p for p in self.pages.values() if p.applies_to(summary.target.space)]

    def study_page(self, page: str, name: str) -> str:
        """A page a package adds (:class:`dse.core.StudyPage`), drawn from the study's trials."""
        summary = self.summary_of(name)
        found = self.pages.get(page)
        if found is None or not found.applies_to(summary.target.space):
            shown = [p.name for p in self.pages_of(summary)]
            abort(404, f"study {name!r} has no page {page!r}{did_you_mean(page, shown)}")
        body = found.render(PageData(name, summary.target, self.store.load_trials(name)))
        return render_template("page.html", s=summary, page=found, body=body)


def _warm(store: ResultStore, cache: SummaryCache) -> None:
    try:
        recent = store.list_studies().sort_values("updated", ascending=False)["study"]
    except Exception as exc:  # a daemon thread's traceback would only alarm: pages report it
        print(f"dashboard: could not list the studies to summarise: {exc}", file=sys.stderr)
        return
    for name in list(recent)[:cache.size]:
        try:
            cache.get(store, name)
        except Exception as exc:  # a page reports it properly when visited
            print(f"dashboard: could not summarise {name}: {exc}", file=sys.stderr)


def _script(text: str) -> Response:
    """A script the browser may keep for a day (it changes only with the installed Plotly)."""
    response = Response(text, mimetype="application/javascript")
    response.cache_control.max_age = 86400
    return response


@functools.cache
def _plotly_js() -> str:
    return get_plotlyjs()


@functools.cache
def _template_js() -> str:
    return template_script()


def _int_arg(name: str, default: int, low: int, high: int | None) -> int:
    raw = request.args.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{name}: {raw!r} is not a whole number") from None
    if value < low or (high is not None and value > high):
        raise UsageError(f"{name}: {value} is out of range ({low} to {high or 'any'})")
    return value


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, np.generic):  # numpy scalars
        value = value.item()
    return fmt(value)


def _default_sort(summary: StudySummary) -> str:
    metric, direction = summary.objectives[0]
    return f"-{metric}" if direction == "maximize" else metric


def _columns(summary: StudySummary, frame: pd.DataFrame) -> list[str]:
    """The study's table columns for the rows of ``frame``: parameters that vary among the
    feasible trials or in ``frame`` (a study with none feasible still shows its configs), and
    the workload's columns that tell its workloads apart."""
    varying = [p for p in summary.params
               if any(p in w.sample and w.sample[p].nunique() > 1 for w in summary.workloads)
               or (p in frame and frame[p].nunique() > 1)]
    workloads = []
    if len(summary.workloads) > 1:
        workloads = ["shape", "dtype"] + (
            ["b_layout"] if len({w.b_layout for w in summary.workloads}) > 1 else [])
    columns = config_columns(frame, varying, [o for o, _ in summary.objectives], workloads)
    # the trial and the first objective lead, and stay in view as a wide table scrolls
    lead = [c for c in ("number", summary.objectives[0][0]) if c in columns]
    return lead + [c for c in columns if c not in lead]


def _table_view(summary: StudySummary, page: Any, where: str, sort: str,
                unique: bool = False) -> dict[str, Any]:
    """What the table template needs: columns, rows, sort links and page links."""
    columns = _columns(summary, page.frame)
    pages = max(1, math.ceil(page.total / page.limit))
    current = page.offset // page.limit + 1

    def link(**changes: Any) -> str:
        args = {"where": where, "sort": sort, "limit": page.limit, "page": current,
                "unique": "1" if unique else None, **changes}
        return url_for("trials", name=summary.name, **{k: v for k, v in args.items() if v})

    headers = []
    for c in columns:
        state = "asc" if sort == c else "desc" if sort == f"-{c}" else ""
        target = c if sort == f"-{c}" else f"-{c}"
        headers.append({"name": c, "state": state, "href": link(sort=target, page=1)})
    return {
        "columns": columns, "headers": headers,
        "rows": page.frame[columns].to_dict("records"), "total": page.total,
        "first": page.offset + 1 if page.total else 0,
        "last": min(page.offset + page.limit, page.total), "page": current, "pages": pages,
        "prev": link(page=current - 1) if current > 1 else None,
        "next": link(page=current + 1) if current < pages else None,
        "sizes": [(n, link(limit=n, page=1)) for n in PAGE_SIZES]}


def _workload_views(summary: StudySummary, workload: Any, index: int) -> dict[str, Any]:
    """One workload's section of the study page; each plot with a key (its place on the page),
    its HTML, its Plotly JSON and a digest of that JSON."""
    figures = workload_figures(workload.numbers, workload.values, workload.sample,
                               workload.best, workload.ladder, summary.params,
                               summary.objectives, summary.target, of_total=workload.ok,
                               evaluators=workload.evaluators)
    columns = _columns(summary, workload.best)
    return {"index": index, "label": workload.label, "trials": workload.trials,
            "ok": workload.ok, "filter": workload_filter(workload),
            "best": workload.best[columns].to_dict("records") if not workload.best.empty
            else [], "columns": columns, "reasons": workload.reasons,
            "figures": [drawn(fig, f"{index}-{n}") for n, fig in enumerate(figures, start=1)]}


def _compare_figures(summaries: list[StudySummary]) -> list[str]:
    if not summaries:
        return []
    best = go.Figure()
    history = go.Figure()
    roof: go.Figure | None = None
    for summary in summaries:
        metric, direction = summary.objectives[0]
        labels = [w.label for w in summary.workloads]
        values = [float(w.best.iloc[0][metric]) if not w.best.empty else None
                  for w in summary.workloads]
        best.add_trace(go.Bar(x=labels, y=values, name=summary.name,
                              text=[_cell(v) for v in values], textposition="auto"))
        for w in summary.workloads:
            trace = history_figure(w.numbers, w.values, direction, metric).data[1]
            trace.name = f"{summary.name}: {w.label}"
            history.add_trace(trace)
            roof = roofline_figure(w.sample, summary.target, name=trace.name, fig=roof)
    metric = summaries[0].objectives[0][0]
    best.update_layout(title=f"Best {metric} per workload", yaxis_title=metric,
                       barmode="group")
    history.update_layout(title="Best so far", xaxis_title="trial", yaxis_title=metric)
    return [plot_html(f) for f in (best, history, roof) if f is not None]


def _present(value: Any) -> bool:
    """Whether a trial has a value for a column: a list (a measurement's times) counts, a
    missing scalar does not."""
    return not pd.api.types.is_scalar(value) or bool(pd.notna(value))


def _has_timeline(row: pd.Series) -> bool:
    """Whether an ok trial's evaluator records a timeline (the simulator's), so its page can
    offer one."""
    from dse.core.errors import DseError
    from dse.core.registry import evaluator_class

    try:
        recorded = evaluator_class(str(row["evaluator"])).capabilities.timeline
    except DseError:  # an evaluator no longer registered here
        return False
    return bool(recorded and row["status"] == "ok")


def _simulate_timeline(summary: StudySummary, row: pd.Series) -> bytes:
    """The trace of the trial's (deterministic) evaluator re-run on its config, in the study's
    space and with the options the study gave that evaluator."""
    from dse.core.registry import build_context, build_evaluator

    spec, name = summary.spec, str(row["evaluator"])
    ctx = build_context(spec["target"], str(row["dtype"]), str(row["shape"]),
                        str(row["b_layout"]), spec.get("space", {}).get("constraints", ()))
    rungs = [spec.get("evaluator", {}), *({"name": r["evaluator"], **r}
                                          for r in spec.get("ladder", []))]
    options = next((r.get("options") for r in rungs if r.get("name") == name), None)
    params = {p: row[p].item() if isinstance(row[p], np.generic) else row[p]
              for p in summary.params if p in row and pd.notna(row[p])}
    batch = ctx.space.encode([ctx.space.resolve(params)])
    with tempfile.TemporaryDirectory(prefix="dse-timeline-") as folder:
        path = Path(folder) / "timeline.json"
        build_evaluator(name, options).simulate(batch, ctx, trace_path=str(path))
        return path.read_bytes()
