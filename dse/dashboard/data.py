"""What the dashboard shows of a study, read from SQL without loading every trial.

A study of 100,000 trials is summarised from one narrow query (trial number, workload, status,
fidelity and the objectives: no parameter or metric documents decoded), plus the full rows of
only what is shown: the best configurations, an even sample of about :data:`SAMPLE_ROWS` trials
per workload (parameter importance is estimated from it; plots draw a thinner one), and the
trials of a fidelity
ladder's dearer rungs with the cheaper results of the same configs. Summaries are cached per
study and recomputed when the study gains trials.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import func, select

from dse.storage import ResultStore
from dse.storage import models as m
from dse.study.paging import trial_columns
from dse.study.query import (
    FIDELITY_RANK,
    TRIAL_ROW,
    best_trials,
    in_study_trials,
    trials_frame,
)
from dse.target import load_target
from dse.workload import workload_from_dict

SAMPLE_ROWS = 5000


@dataclass
class WorkloadSummary:
    """One workload of a study: its best configs, objective history and rows to draw."""

    label: str
    b_layout: str
    trials: int
    ok: int
    best: pd.DataFrame            # as ``dse best`` ranks them (full rows)
    numbers: np.ndarray           # ok trials' numbers, first objective and evaluator, for
    values: np.ndarray            # the history (a ladder's rungs are drawn apart)
    evaluators: np.ndarray
    sample: pd.DataFrame          # ok trials spread over the study, the best included
    ladder: pd.DataFrame          # trials scored by more than one fidelity (full rows)
    reasons: list[tuple[str, str, int]] = field(default_factory=list)  # (status, reason,
    # trials) of the commonest reasons trials were infeasible or failed


@dataclass
class StudySummary:
    """A study's header and per-workload summaries."""

    name: str
    target: Any
    spec: dict[str, Any]
    objectives: list[tuple[str, str]]
    params: list[str]
    status: str
    updated: Any
    total: int
    status_counts: dict[str, int]
    workloads: list[WorkloadSummary] = field(default_factory=list)
    rendered: dict[str, Any] = field(default_factory=dict)  # views drawn from it, by name


def trials_by_number(session: Any, study_id: int, study: str, numbers: list[int]
                     ) -> pd.DataFrame:
    """Full rows (:func:`dse.load_trials`'s columns) of the given trials, in the given order."""
    if not numbers:
        return trials_frame(study, [], {})
    rows = session.execute(in_study_trials(select(*TRIAL_ROW), study_id)
                           .where(m.TrialRow.number.in_(numbers))).all()
    frame = trials_frame(study, rows, _workloads(session, {r[1] for r in rows}))
    found = set(frame["number"])
    ordered = frame.set_index("number", drop=False).loc[
        [n for n in numbers if n in found]].reset_index(drop=True)
    ordered.attrs = frame.attrs
    return ordered


def _workloads(session: Any, ids: set[int]) -> dict[int, dict[str, Any]]:
    return dict(session.execute(select(m.WorkloadRow.id, m.WorkloadRow.body)
                                .where(m.WorkloadRow.id.in_(ids))).all())


def _narrow(session: Any, study_id: int, objectives: list[tuple[str, str]]) -> pd.DataFrame:
    """One row per trial: number, workload, config, status, evaluator, fidelity, objectives."""
    metrics = [name for name, _ in objectives]
    query = (select(m.TrialRow.number, m.TrialRow.workload_id, m.TrialRow.config_id,
                    m.TrialRow.status, m.EvaluationRow.evaluator, m.EvaluationRow.fidelity)
             .join(m.EvaluationRow, m.EvaluationRow.id == m.TrialRow.evaluation_id)
             .where(m.TrialRow.study_id == study_id).order_by(m.TrialRow.number))
    if metrics != ["tops"]:  # tops has a column; other objectives are read from the documents
        columns = trial_columns(session, study_id)
        metrics = [name for name in metrics if name in columns]
        query = query.add_columns(*(columns[name].expr for name in metrics)).join(
            m.ConfigRow, m.ConfigRow.id == m.TrialRow.config_id).join(
            m.WorkloadRow, m.WorkloadRow.id == m.TrialRow.workload_id)
    else:
        query = query.add_columns(m.EvaluationRow.tops)
    names = ["number", "workload_id", "config_id", "status", "evaluator", "fidelity", *metrics]
    # Core rows, not ORM ones: a third of the time for 100,000 rows
    rows = session.connection().execute(query).all()
    return pd.DataFrame({name: np.asarray(values) for name, values in
                         zip(names, zip(*rows, strict=True), strict=True)} if rows
                        else {name: [] for name in names})


def _best_numbers(narrow: pd.DataFrame, objectives: list[tuple[str, str]],
                  top: int) -> list[int]:
    """The trials ``dse best`` would name, by :func:`best_trials` over the narrow rows (a
    config's id stands for its parameters)."""
    frame = narrow.assign(shape=narrow["workload_id"], dtype="", b_layout="")
    frame.attrs = {"objectives": objectives, "params": ["config_id"]}
    best = best_trials(frame, top=top)
    return [int(n) for n in best["number"]] if not best.empty else []


def _ladder_rows(session: Any, study_id: int, study: str, narrow: pd.DataFrame) -> pd.DataFrame:
    """Trials of configs that more than one fidelity scored (a ladder's pairs)."""
    ok = narrow[narrow["status"] == "ok"]
    ranks = ok["fidelity"].map(FIDELITY_RANK).fillna(0)
    if ok["evaluator"].nunique() < 2:
        return trials_frame(study, [], {})
    dear_configs = set(ok.loc[ranks > ranks.min(), "config_id"])
    numbers = ok.loc[ok["config_id"].isin(dear_configs), "number"].astype(int).tolist()
    return trials_by_number(session, study_id, study, numbers)


def _common_reasons(session: Any, study_id: int, workload_id: int,
                    top: int = 3) -> list[tuple[str, str, int]]:
    """The ``top`` commonest (status, reason, trials) of a workload's trials that were not ok."""
    count = func.count()
    return [(str(status), str(reason or ""), int(n)) for status, reason, n in session.execute(
        select(m.TrialRow.status, m.EvaluationRow.reason, count)
        .join(m.EvaluationRow, m.EvaluationRow.id == m.TrialRow.evaluation_id)
        .where(m.TrialRow.study_id == study_id, m.TrialRow.workload_id == workload_id,
               m.TrialRow.status != "ok")
        .group_by(m.TrialRow.status, m.EvaluationRow.reason)
        .order_by(count.desc(), m.TrialRow.status).limit(top))]


def _sample_numbers(ok_numbers: np.ndarray) -> list[int]:
    """At most :data:`SAMPLE_ROWS` of a workload's feasible trials, spread evenly over them."""
    if len(ok_numbers) > SAMPLE_ROWS:
        ok_numbers = ok_numbers[np.linspace(0, len(ok_numbers) - 1, SAMPLE_ROWS).astype(int)]
    return [int(n) for n in ok_numbers]


def summarise(store: ResultStore, study: str, top: int = 10) -> StudySummary:
    """The dashboard's summary of ``study`` (see the module's docstring for what is read).

    Raises:
        UsageError: no such study.
    """
    with store.session() as s:
        row = store.require_study(s, study)
        objectives = [tuple(o) for o in row.spec.get("objectives", [["tops", "maximize"]])]
        narrow = _narrow(s, row.id, objectives)
        bodies = _workloads(s, set(narrow["workload_id"].tolist()))
        summary = StudySummary(
            name=row.name, target=load_target(row.spec["target"]), spec=row.spec,
            objectives=objectives, params=[], status=row.status, updated=row.updated_at,
            total=len(narrow),
            status_counts={str(k): int(v) for k, v in narrow["status"].value_counts().items()})
        ladder = _ladder_rows(s, row.id, study, narrow)
        metric = objectives[0][0]
        for workload_id, group in narrow.groupby("workload_id", sort=False):
            ok = group[group["status"] == "ok"]
            best = trials_by_number(s, row.id, study, _best_numbers(group, objectives, top))
            sample = trials_by_number(s, row.id, study, _sample_numbers(
                ok["number"].to_numpy()))
            if not summary.params:  # a workload with no feasible trial still names them
                named = sample if len(sample) else trials_by_number(
                    s, row.id, study, [int(group["number"].iloc[0])])
                summary.params = named.attrs.get("params", [])
            workload = workload_from_dict(bodies[int(workload_id)])
            summary.workloads.append(WorkloadSummary(
                label=workload.label, b_layout=workload.b_layout, trials=len(group),
                ok=len(ok),
                best=best, numbers=ok["number"].to_numpy(),
                values=(ok[metric].to_numpy(dtype=float) if metric in ok
                        else np.full(len(ok), np.nan)),
                evaluators=ok["evaluator"].to_numpy(),
                reasons=_common_reasons(s, row.id, int(workload_id)) if len(ok) < len(group)
                else [],
                sample=pd.concat([sample, best]).drop_duplicates("number"),
                ladder=ladder[ladder["number"].isin(set(group["number"]))]))
    return summary


def study_version(store: ResultStore, study: str) -> tuple[Any, ...]:
    """Changes whenever the study gains or updates trials (the summary cache's key)."""
    with store.session() as s:
        row = store.require_study(s, study)
        count, last = s.execute(select(func.count(), func.max(m.TrialRow.id))
                                .where(m.TrialRow.study_id == row.id)).one()
        return row.id, count, last, row.updated_at, row.status


class SummaryCache:
    """The last few study summaries, keyed by :func:`study_version` (thread-safe)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._items: OrderedDict[tuple[Any, ...], StudySummary] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[tuple[Any, ...], threading.Lock] = {}

    def get(self, store: ResultStore, study: str) -> StudySummary:
        key = (store.url, study, *study_version(store, study))
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            building = self._building.setdefault(key, threading.Lock())
        with building:  # one summary per key at a time: later callers wait for the first
            with self._lock:
                if key in self._items:
                    return self._items[key]
            summary = summarise(store, study)
            with self._lock:
                self._items[key] = summary
                self._building.pop(key, None)
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
        return summary
