"""Trials as pandas DataFrames: a whole study's, chosen trials', the narrow rows a summary
reads; and the best configs and Pareto front of a frame.

The frame of a study has one row per trial: its number, workload (shape, dtype, b_layout),
status, reason, evaluator, version, fidelity, host and time, then its parameters and metrics as
columns (``frame.attrs``: ``params``, the parameter columns, ``space``, the search space they
belong to, and ``objectives``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Select, Text, cast, func, select
from sqlalchemy.orm import Session

from dse.core.registry import fidelity_ranks, workload_from_dict
from dse.storage import models as m
from dse.storage.documents import (
    TEXTS,
    Joined,
    documents_frame,
    read_joined,
    side_connections,
)
from dse.storage.snapshots import read_snapshot

WORKLOAD_COLUMNS = ("shape", "dtype", "b_layout")
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


# How a store reads a study's frame (see :class:`dse.storage.ResultStore`): :func:`study_frame`,
# or another implementation chosen when the store is made.
FrameReader = Callable[[Session, m.StudyRow], pd.DataFrame]


def study_frame(s: Session, study: m.StudyRow, snapshot: bool = True) -> pd.DataFrame:
    """Every trial of ``study``: one row each, parameters and metrics as columns; the frame
    kept when its last run ended where its trials are still those (``snapshot``; see
    :mod:`dse.storage.snapshots`), else read from the documents."""
    kept = read_snapshot(s, study) if snapshot else None
    if kept is not None:
        kept.attrs["objectives"] = objectives_of(study)
        return kept
    # A study has few workloads and many trials: decode each workload once, not per trial.
    workloads = {wid: body for wid, body in s.execute(
        select(m.WorkloadRow.id, m.WorkloadRow.body).where(m.WorkloadRow.id.in_(
            select(m.TrialRow.workload_id).where(m.TrialRow.study_id == study.id))))}
    frame = _columnar_study_frame(s, study, workloads)
    frame.attrs["objectives"] = objectives_of(study)
    return frame


def _columnar_study_frame(s: Session, study: m.StudyRow,
                          workloads: dict[int, dict[str, Any]]) -> pd.DataFrame:
    """:func:`trials_frame` of the study's trials without a row object a trial: the trials'
    own columns, their configs' and their results' documents each joined into one text by the
    database and parsed by Arrow in a thread (:mod:`dse.storage.documents`) while the next
    statement runs; row by row through the driver's cursor where the database cannot."""
    e, t = m.EvaluationRow, m.TrialRow
    connection = s.connection()
    # trials are only ever added, with higher numbers: those up to the last one now are the
    # same rows for every statement below
    last = s.scalar(select(func.max(t.number)).where(t.study_id == study.id))
    if last is None:
        return trials_frame(study.name, [], workloads)
    dialect, opener = connection.dialect.name, side_connections(connection)

    def read(text: str) -> Joined | None:
        if opener is None:  # one connection: the statements one after another
            return read_joined(lambda sql, params: connection.exec_driver_sql(sql, params).one(),
                               dialect, text, study.id, last)
        with opener() as execute:
            return read_joined(execute, dialect, text, study.id, last)

    with ThreadPoolExecutor(len(TEXTS)) as threads:
        reading = [threads.submit(read, text) for text in TEXTS] if opener else []
        elapsed = [row[0] for row in connection.execute(
            select(e.elapsed_s).select_from(t).join(e, e.id == t.evaluation_id)
            .where(t.study_id == study.id, t.number <= last).order_by(t.number))
            .cursor.fetchall()]
        joined = [future.result() for future in reading] or [read(text) for text in TEXTS]
    parts = [None if part is None else part.parsed for part in joined]
    trial, params, metrics = parts
    if trial is None or params is None or metrics is None \
            or not all(part is not None and part.in_order(trial.column("number").to_pylist())
                       for part in joined):
        return _row_by_row_study_frame(s, study, workloads, last)
    created = trial.column("created_at").to_pylist()
    times = {text: datetime.fromisoformat(text) for text in set(created)}
    columns = [trial.column(name).to_numpy() for name in ("number", "workload_id")]
    columns += [trial.column("status").to_pandas(), trial.column("cached").to_numpy(),
                trial.column("reason").to_pylist()]  # inferred as the driver's values were
    columns += [trial.column(name).to_pandas() for name in ("evaluator", "version", "fidelity")]
    columns += [elapsed, trial.column("host").to_pandas(), [times[text] for text in created]]
    return assemble_frame(study.name, columns, params, metrics, workloads)


def _row_by_row_study_frame(s: Session, study: m.StudyRow,
                            workloads: dict[int, dict[str, Any]], last: int) -> pd.DataFrame:
    """:func:`trials_frame` of the study's trials numbered up to ``last``, read with the
    driver's own cursor a row at a time and its documents parsed by Arrow
    (:func:`documents_frame`)."""
    e, t = m.EvaluationRow, m.TrialRow
    query = (select(t.number, t.workload_id, t.status, t.cached, e.reason, e.evaluator,
                    e.version, e.fidelity, e.elapsed_s, e.host, t.created_at,
                    cast(m.ConfigRow.params, Text), cast(e.metrics, Text))
             .join(m.ConfigRow, m.ConfigRow.id == t.config_id)
             .join(e, e.id == t.evaluation_id)
             .where(t.study_id == study.id, t.number <= last).order_by(t.number))
    columns = list(zip(*s.connection().execute(query).cursor.fetchall(), strict=True))
    # SQLite returns the time as text: convert each distinct value once, as SQLAlchemy would
    parse = t.created_at.type._cached_result_processor(s.get_bind().dialect, None)  # noqa: SLF001
    if parse is not None:
        times = {text: parse(text) for text in set(columns[10])}
        columns[10] = [times[text] for text in columns[10]]
    return assemble_frame(study.name, columns[:11], documents_frame(columns[11]),
                          documents_frame(columns[12]), workloads)


def objectives_of(study: m.StudyRow) -> list[tuple[str, str]]:
    """The study's (metric, direction) objectives, as its spec names them."""
    return [tuple(o) for o in study.spec.get("objectives", [["tops", "maximize"]])]


def trials_frame(study: str, result: list[Any], workloads: dict[int, dict[str, Any]]
                 ) -> pd.DataFrame:
    """The trials frame from rows of :data:`TRIAL_ROW` and the workloads' bodies by id (see
    :func:`assemble_frame`)."""
    if not result:
        frame = pd.DataFrame(columns=list(TRIAL_COLUMNS))
        frame.attrs["params"] = []
        return frame
    columns = list(zip(*result, strict=True))
    return assemble_frame(study, columns[:11], pd.DataFrame.from_records(columns[11]),
                          pd.DataFrame.from_records(columns[12]), workloads)


def assemble_frame(study: str, fixed: list[Sequence[Any]], param_frame: pd.DataFrame,
                   metric_frame: pd.DataFrame, workloads: dict[int, dict[str, Any]]
                   ) -> pd.DataFrame:
    """The trials frame from the columns of :data:`TRIAL_ROW` before the documents (``fixed``),
    the parameters' and the metrics' frames, and the workloads' bodies by id, built column by
    column (far cheaper than a dict per row).

    Where a parameter or metric repeats a name (a harness's ``host``, the workload's
    ``b_layout``), its value wins in the rows that have it, as in ``{**fixed, **params,
    **metrics}`` row by row."""
    (numbers, workload_ids, statuses, cached, reasons, evaluators, versions, fidelities, elapsed,
     hosts, created) = fixed
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
    for part in (param_frame, metric_frame):
        for name in part.columns:
            values = part[name]
            if name in columns:
                values = values.where(values.notna(), pd.Series(columns[name], dtype=object))
                columns[name] = values.to_numpy()  # typed again with the frame, as before
            else:
                columns[name] = values.to_numpy() if values.dtype == object else values
    frame = pd.DataFrame({name: list(values) if isinstance(values, tuple) else values
                          for name, values in columns.items()})
    frame.attrs["params"] = list(param_frame.columns)  # the columns that identify a config
    # the family whose space the configs are of (a study's workloads share it)
    frame.attrs["space"] = next((body.get("space") for body in workloads.values()), None)
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
    workload counts (a ladder's measurements over its model's predictions), and a config whose
    more faithful result failed (a ladder's confirmation) is not among them."""
    objectives = frame.attrs.get("objectives", [("tops", "maximize")])
    ok = frame[frame["status"] == "ok"] if "status" in frame else frame
    if ok.empty:
        return ok
    metrics = [o[0] for o in objectives]
    maximize = [o[1] == "maximize" for o in objectives]
    parts = []
    identity = [c for c in (*WORKLOAD_COLUMNS, *(p for p in frame.attrs.get("params", [])
                                                if p not in WORKLOAD_COLUMNS))
                if c in frame.columns]
    ranks = fidelity_ranks()
    failed = frame[frame["status"] != "ok"] if "status" in frame else frame.iloc[:0]
    for workload, group in ok.groupby(list(WORKLOAD_COLUMNS), sort=False):
        if "fidelity" in group:
            rank = group["fidelity"].map(ranks).fillna(0)
            group = group[rank == rank.max()]
            of_workload = pd.Series(workload, index=list(WORKLOAD_COLUMNS))
            above = failed[(failed[list(WORKLOAD_COLUMNS)] == of_workload).all(axis=1)
                           & (failed["fidelity"].map(ranks).fillna(0) > rank.max())]
            group = group[~pd.MultiIndex.from_frame(group[identity]).isin(
                pd.MultiIndex.from_frame(above[identity]))]
        group = group.drop_duplicates(subset=identity)
        if len(objectives) > 1:
            group = group[pareto_mask(group[metrics].to_numpy(dtype=float), maximize)]
        # stable: of equally good configs the earliest trial comes first, as in the dashboard
        parts.append(group.sort_values(metrics[0], ascending=not maximize[0],
                                       kind="stable").head(
            top if len(objectives) == 1 else len(group)))
    return pd.concat(parts)


def most_faithful(frame: pd.DataFrame, params: Sequence[str]) -> pd.DataFrame:
    """One row per config of each workload: its most faithful (a ladder's confirmed result over
    the rung's first measurement; of equal fidelity, the later trial), in the frame's order."""
    if frame.empty or "fidelity" not in frame:
        return frame
    identity = [c for c in (*WORKLOAD_COLUMNS, *params) if c in frame.columns]
    rank = frame["fidelity"].map(fidelity_ranks()).fillna(0).to_numpy()
    ordered = frame.iloc[np.argsort(rank, kind="stable")]
    return ordered.drop_duplicates(subset=identity, keep="last").sort_index()


def trials_by_number(s: Session, study: m.StudyRow, numbers: list[int]) -> pd.DataFrame:
    """Full rows (the study frame's columns) of the given trials, in the given order."""
    if not numbers:
        return trials_frame(study.name, [], {})
    rows = s.execute(in_study_trials(select(*TRIAL_ROW), study.id)
                     .where(m.TrialRow.number.in_(numbers))).all()
    workloads = dict(s.execute(select(m.WorkloadRow.id, m.WorkloadRow.body)
                               .where(m.WorkloadRow.id.in_({r[1] for r in rows}))).all())
    frame = trials_frame(study.name, rows, workloads)
    found = set(frame["number"])
    ordered = frame.set_index("number", drop=False).loc[
        [n for n in numbers if n in found]].reset_index(drop=True)
    ordered.attrs = frame.attrs
    return ordered


def narrow_frame(s: Session, study: m.StudyRow, metric_columns: dict[str, Any]) -> pd.DataFrame:
    """One row per trial, no parameter or metric document decoded: number, workload, config,
    status, evaluator, fidelity and the objectives (``metric_columns``: name -> SQL expression
    of the metrics other than ``tops``, which has a column of its own)."""
    query = (select(m.TrialRow.number, m.TrialRow.workload_id, m.TrialRow.config_id,
                    m.TrialRow.status, m.EvaluationRow.evaluator, m.EvaluationRow.fidelity)
             .join(m.EvaluationRow, m.EvaluationRow.id == m.TrialRow.evaluation_id)
             .where(m.TrialRow.study_id == study.id).order_by(m.TrialRow.number))
    if list(metric_columns) != ["tops"]:  # other objectives are read from the documents
        query = query.add_columns(*metric_columns.values()).join(
            m.ConfigRow, m.ConfigRow.id == m.TrialRow.config_id).join(
            m.WorkloadRow, m.WorkloadRow.id == m.TrialRow.workload_id)
    else:
        query = query.add_columns(m.EvaluationRow.tops)
    # The driver's own tuples, not SQLAlchemy rows (every column here is a plain number or
    # string), turned into columns in one NumPy pass: a 100,000-trial study's summary spends
    # most of its time in this read.
    rows = s.connection().execute(query).cursor.fetchall()
    ids, strings = ("number", "workload_id", "config_id"), ("status", "evaluator", "fidelity")
    table = np.array(rows, dtype=[*((n, "i8") for n in ids),
                                  *((n, "O") for n in (*strings, *metric_columns))])
    return pd.DataFrame({
        **{n: table[n] for n in ids},
        # plain objects: cheaper to filter and take from than Arrow strings, at this size
        **{n: pd.Series(table[n], dtype=object) for n in strings},
        **{n: table[n].astype(float) for n in metric_columns}})  # a missing value is NaN
