"""Reading studies back: trials as pandas DataFrames, the best configs, the Pareto front."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Select, func, select

from dse.storage import ResultStore
from dse.storage import models as m
from dse.workload import workload_from_dict

WORKLOAD_COLUMNS = ("shape", "dtype", "b_layout")
# The best configs are judged by the most faithful results a study has.
FIDELITY_RANK = {"analytical": 0, "synthetic": 1, "simulator": 2, "hardware": 3}
TRIAL_COLUMNS = ("study", "number", "shape", "dtype", "b_layout", "status", "cached", "reason",
                 "evaluator", "version", "fidelity", "elapsed_s", "host", "created_at")


# What a trial's row of the frame is read from, in the order trials_frame expects.
TRIAL_ROW = (m.TrialRow.number, m.TrialRow.workload_id, m.TrialRow.status, m.TrialRow.cached,
             m.EvaluationRow.reason, m.EvaluationRow.evaluator, m.EvaluationRow.version,
             m.EvaluationRow.fidelity, m.EvaluationRow.elapsed_s, m.EvaluationRow.host,
             m.TrialRow.created_at, m.ConfigRow.params, m.EvaluationRow.metrics)


def in_study_trials(query: Select[Any], study_id: int) -> Select[Any]:
    """``query`` over the study's trials joined to their workload, config and evaluation."""
    return (query.select_from(m.TrialRow)
            .join(m.WorkloadRow, m.WorkloadRow.id == m.TrialRow.workload_id)
            .join(m.ConfigRow, m.ConfigRow.id == m.TrialRow.config_id)
            .join(m.EvaluationRow, m.EvaluationRow.id == m.TrialRow.evaluation_id)
            .where(m.TrialRow.study_id == study_id))


def storage_of(storage: ResultStore | str | None) -> ResultStore:
    """``storage`` as a :class:`ResultStore` (a URL or SQLite path is opened, and must hold
    dse's tables: queries create no database)."""
    return storage if isinstance(storage, ResultStore) else ResultStore(storage, existing=True)


def load_trials(storage: ResultStore | str | None, study: str) -> pd.DataFrame:
    """Every trial of ``study``: one row each, parameters and metrics as columns.

    Args:
        storage: a :class:`ResultStore`, a storage URL or a SQLite path (default ``./dse.db``).
        study: the study's name.

    Raises:
        UsageError: no such study in the storage.
    """
    store = storage_of(storage)
    with store.session() as s:
        row = store.require_study(s, study)
        # A study has few workloads and many trials: decode each workload once, not per trial.
        workloads = {wid: body for wid, body in s.execute(
            select(m.WorkloadRow.id, m.WorkloadRow.body).where(m.WorkloadRow.id.in_(
                select(m.TrialRow.workload_id).where(m.TrialRow.study_id == row.id))))}
        result = s.execute(in_study_trials(select(*TRIAL_ROW), row.id)
                           .order_by(m.TrialRow.number)).all()
        objectives = row.spec.get("objectives", [["tops", "maximize"]])
    frame = trials_frame(study, result, workloads)
    frame.attrs["objectives"] = [tuple(o) for o in objectives]
    return frame


def trials_frame(study: str, result: list[Any], workloads: dict[int, dict[str, Any]]
                 ) -> pd.DataFrame:
    """The trials frame from rows of :data:`TRIAL_ROW` and the workloads' bodies by id, built
    column by column (far cheaper than a dict per row).

    Where a parameter or metric repeats a name (a harness's ``host``, the workload's
    ``b_layout``), its value wins in the rows that have it, as in ``{**fixed, **params,
    **metrics}`` row by row."""
    if not result:
        frame = pd.DataFrame(columns=list(TRIAL_COLUMNS))
        frame.attrs["params"] = []
        return frame
    (numbers, workload_ids, statuses, cached, reasons, evaluators, versions, fidelities, elapsed,
     hosts, created, params, metrics) = zip(*result, strict=True)
    described = {}
    for wid, body in workloads.items():
        workload = workload_from_dict(body)
        described[wid] = (workload.shape, workload.dtype.name, workload.b_layout)
    shapes, dtypes, b_layouts = zip(*(described[w] for w in workload_ids), strict=True)
    columns: dict[str, Any] = {
        "study": [study] * len(numbers), "number": numbers, "shape": shapes, "dtype": dtypes,
        "b_layout": b_layouts, "status": statuses, "cached": [bool(c) for c in cached],
        "reason": reasons, "evaluator": evaluators, "version": versions,
        "fidelity": fidelities, "elapsed_s": elapsed, "host": hosts, "created_at": created}
    param_frame = pd.DataFrame.from_records(params)
    for part in (param_frame, pd.DataFrame.from_records(metrics)):
        for name in part.columns:
            values = part[name]
            if name in columns:
                values = values.where(values.notna(), pd.Series(columns[name], dtype=object))
            columns[name] = values.to_numpy()
    frame = pd.DataFrame({name: list(values) if isinstance(values, tuple) else values
                          for name, values in columns.items()})
    frame.attrs["params"] = list(param_frame.columns)  # the columns that identify a config
    return frame


def pareto_mask(values: np.ndarray, maximize: list[bool]) -> np.ndarray:
    """Rows of ``values`` (n x objectives) that no other row dominates."""
    signed = np.where(maximize, values, -values)  # larger is better in every column
    keep = np.ones(len(signed), dtype=bool)
    for i in range(len(signed)):
        if keep[i]:
            dominated = np.all(signed <= signed[i], axis=1) & np.any(signed < signed[i], axis=1)
            keep &= ~dominated
    return keep


def best_trials(frame: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The ``top`` best ok trials for one objective, or the Pareto front for several (per
    workload), best first by the first objective; only the most faithful fidelity present in a
    workload counts (a ladder's measurements over its model's predictions)."""
    objectives = frame.attrs.get("objectives", [("tops", "maximize")])
    ok = frame[frame["status"] == "ok"] if "status" in frame else frame
    if ok.empty:
        return ok
    metrics = [o[0] for o in objectives]
    maximize = [o[1] == "maximize" for o in objectives]
    parts = []
    identity = [*WORKLOAD_COLUMNS, *(p for p in frame.attrs.get("params", [])
                                     if p not in WORKLOAD_COLUMNS)]
    for _, group in ok.groupby(list(WORKLOAD_COLUMNS), sort=False):
        if "fidelity" in group:
            rank = group["fidelity"].map(FIDELITY_RANK).fillna(0)
            group = group[rank == rank.max()]
        group = group.drop_duplicates(subset=[c for c in identity if c in group.columns])
        if len(objectives) > 1:
            group = group[pareto_mask(group[metrics].to_numpy(dtype=float), maximize)]
        # stable: of equally good configs the earliest trial comes first, as in the dashboard
        parts.append(group.sort_values(metrics[0], ascending=not maximize[0],
                                       kind="stable").head(
            top if len(objectives) == 1 else len(group)))
    return pd.concat(parts)


def list_studies(storage: ResultStore | str | None) -> pd.DataFrame:
    """One row per study: target, workloads, trials, its (first) objective and the best value of
    it, status, last update. The best is judged as :func:`best_trials` judges it: on the most
    faithful results of each workload (a ladder's measurements, not its model's predictions)."""
    store = storage_of(storage)
    with store.session() as s:
        counts = dict(s.execute(select(m.TrialRow.study_id, func.count())
                                .group_by(m.TrialRow.study_id)).all())
        rows: list[dict[str, Any]] = []
        for study, target in s.execute(select(m.StudyRow, m.TargetRow.name).join(
                m.TargetRow, m.TargetRow.id == m.StudyRow.target_id).order_by(m.StudyRow.name)):
            workloads = [workload_from_dict(w) for w in study.spec.get("workloads", [])]
            metric, direction = study.spec.get("objectives", [["tops", "maximize"]])[0]
            rows.append({
                "study": study.name, "target": target,
                "workloads": ", ".join(w.label for w in workloads[:3])
                + (f" (+{len(workloads) - 3})" if len(workloads) > 3 else ""),
                "trials": counts.get(study.id, 0), "objective": metric,
                "best": _best_value(s, study.id, metric, direction),
                "status": study.status, "updated": study.updated_at})
    return pd.DataFrame(rows, columns=["study", "target", "workloads", "trials", "objective",
                                       "best", "status", "updated"])


def _best_value(session: Any, study_id: int, metric: str, direction: str) -> float | None:
    """The best ``metric`` of a study's ok trials, from each workload's most faithful fidelity."""
    from dse.study.paging import trial_columns  # paging builds on this module

    if metric == "tops":  # a column of its own: no document to read
        expr = m.EvaluationRow.tops
    else:
        column = trial_columns(session, study_id).get(metric)
        if column is None or not column.numeric:
            return None
        expr = column.expr
    pick = func.max if direction == "maximize" else func.min
    groups = session.execute(in_study_trials(select(
        m.TrialRow.workload_id, m.EvaluationRow.fidelity, pick(expr)), study_id)
        .where(m.TrialRow.status == "ok")
        .group_by(m.TrialRow.workload_id, m.EvaluationRow.fidelity)).all()
    faithful: dict[int, tuple[int, float | None]] = {}
    for workload_id, fidelity, value in groups:
        rank = FIDELITY_RANK.get(fidelity, 0)
        if workload_id not in faithful or rank > faithful[workload_id][0]:
            faithful[workload_id] = (rank, value)
    values = [float(v) for _, v in faithful.values() if v is not None]
    if not values:
        return None
    return max(values) if direction == "maximize" else min(values)


def fidelity_report(storage: ResultStore | str | None, study: str) -> list[dict[str, Any]]:
    """Rank agreement per workload and pair of ladder rungs (cheaper, dearer)."""
    store = storage_of(storage)
    with store.session() as s:
        row = store.require_study(s, study)
        result = s.execute(select(m.FidelityRow, m.WorkloadRow.body).join(
            m.WorkloadRow, m.WorkloadRow.id == m.FidelityRow.workload_id).where(
            m.FidelityRow.study_id == row.id).order_by(m.FidelityRow.id)).all()
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for fidelity, workload in result:  # a re-run records again: keep the latest
        described = workload_from_dict(workload)
        name = f"{described.shape} {described.dtype.name}"
        latest[(name, fidelity.rung)] = {
            "workload": name, "rung": fidelity.rung, "cheaper": fidelity.cheaper,
            "dearer": fidelity.dearer, "n": fidelity.n, "spearman": fidelity.spearman,
            "kendall": fidelity.kendall, "top_k": fidelity.top_k,
            "top_k_overlap": fidelity.top_k_overlap}
    return list(latest.values())
