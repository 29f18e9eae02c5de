"""What is known of the studies in a database without reading their trials: the list of
studies with their best value, a study's version (for caches), the ladder's agreement rows and
the commonest reasons trials were not ok."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from dse.core.registry import fidelity_ranks, workload_from_dict
from dse.storage import models as m
from dse.storage.frames import in_study_trials
from dse.storage.pages import trial_columns

STUDY_COLUMNS = ["study", "target", "workloads", "trials", "objective", "best", "status",
                 "updated"]


def list_studies(s: Session) -> pd.DataFrame:
    """One row per study: target, workloads, trials, its (first) objective and the best value of
    it, status, last update. The best is judged as ``best_trials`` judges it: on the most
    faithful results of each workload (a ladder's measurements, not its model's predictions)."""
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
    return pd.DataFrame(rows, columns=STUDY_COLUMNS)


def _best_value(s: Session, study_id: int, metric: str, direction: str) -> float | None:
    """The best ``metric`` of a study's ok trials, from each workload's most faithful fidelity."""
    if metric == "tops":  # a column of its own: no document to read
        expr = m.EvaluationRow.tops
    else:
        column = trial_columns(s, study_id).get(metric)
        if column is None or not column.numeric:
            return None
        expr = column.expr
    pick = func.max if direction == "maximize" else func.min
    groups = s.execute(in_study_trials(select(
        m.TrialRow.workload_id, m.EvaluationRow.fidelity, pick(expr)), study_id)
        .where(m.TrialRow.status == "ok")
        .group_by(m.TrialRow.workload_id, m.EvaluationRow.fidelity)).all()
    faithful: dict[int, tuple[float, float | None]] = {}
    ranks = fidelity_ranks()
    for workload_id, fidelity, value in groups:
        rank = ranks.get(fidelity, 0)
        if workload_id not in faithful or rank > faithful[workload_id][0]:
            faithful[workload_id] = (rank, value)
    values = [float(v) for _, v in faithful.values() if v is not None]
    if not values:
        return None
    return max(values) if direction == "maximize" else min(values)


def fidelity_report(s: Session, study: m.StudyRow) -> list[dict[str, Any]]:
    """Rank agreement per workload and pair of ladder rungs (cheaper, dearer)."""
    result = s.execute(select(m.FidelityRow, m.WorkloadRow.body).join(
        m.WorkloadRow, m.WorkloadRow.id == m.FidelityRow.workload_id).where(
        m.FidelityRow.study_id == study.id).order_by(m.FidelityRow.id)).all()
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


def common_reasons(s: Session, study_id: int, workload_id: int,
                   top: int = 3) -> list[tuple[str, str, int]]:
    """The ``top`` commonest (status, reason, trials) of a workload's trials that were not ok."""
    count = func.count()
    return [(str(status), str(reason or ""), int(n)) for status, reason, n in s.execute(
        select(m.TrialRow.status, m.EvaluationRow.reason, count)
        .join(m.EvaluationRow, m.EvaluationRow.id == m.TrialRow.evaluation_id)
        .where(m.TrialRow.study_id == study_id, m.TrialRow.workload_id == workload_id,
               m.TrialRow.status != "ok")
        .group_by(m.TrialRow.status, m.EvaluationRow.reason)
        .order_by(count.desc(), m.TrialRow.status).limit(top))]


def study_version(s: Session, study: m.StudyRow) -> tuple[Any, ...]:
    """Changes whenever the study gains or updates trials (a summary cache's key)."""
    count, last = s.execute(select(func.count(), func.max(m.TrialRow.id))
                            .where(m.TrialRow.study_id == study.id)).one()
    return study.id, count, last, study.updated_at, study.status
