"""One page of a study's trials, filtered, sorted and counted in SQL.

A study's frame decodes every trial (seconds for 100,000 of them); a table that shows fifty rows
at a time needs only those fifty. Here the filter language of :mod:`dse.storage.filters`
becomes a SQL condition over the trial, evaluation, config and workload rows (parameters and
metrics are read out of their JSON documents by SQLAlchemy's portable JSON accessors, so SQLite
and PostgreSQL answer alike) and only the page's rows are decoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Boolean, ColumnElement, Select, String, cast, false, func, select, true
from sqlalchemy.orm import Session

from dse.core.errors import UsageError
from dse.storage import models as m
from dse.storage.filters import COMPARISONS, FilterParser
from dse.storage.frames import TRIAL_ROW, in_study_trials, objectives_of, trials_frame

MAX_ROW = 2**31 - 1  # the largest offset or limit of a page (SQL integers stay in range)


@dataclass(frozen=True)
class SqlColumn:
    """A trial column as SQL: its expression and whether it holds numbers or text."""

    expr: ColumnElement[Any]
    numeric: bool


@dataclass(frozen=True)
class TrialPage:
    """Rows ``offset`` .. ``offset + limit`` of the trials that match, and how many match."""

    total: int
    offset: int
    limit: int
    frame: pd.DataFrame


def _workload_text(key: str) -> ColumnElement[Any]:
    return m.WorkloadRow.body[key].as_string()


def _fixed_columns() -> dict[str, SqlColumn]:
    dims = [cast(m.WorkloadRow.body[d].as_integer(), String) for d in "MKN"]
    # a batched GEMM stores its shape string; a plain GEMM's is M x K x N
    return {
        "number": SqlColumn(m.TrialRow.number, True),
        "shape": SqlColumn(func.coalesce(_workload_text("shape"),
                                         dims[0] + "x" + dims[1] + "x" + dims[2]), False),
        "dtype": SqlColumn(_workload_text("dtype"), False),
        "b_layout": SqlColumn(func.coalesce(m.ConfigRow.params["b_layout"].as_string(),
                                          _workload_text("b_layout")), False),
        "status": SqlColumn(m.TrialRow.status, False),
        "cached": SqlColumn(m.TrialRow.cached, True),
        "reason": SqlColumn(m.EvaluationRow.reason, False),
        "evaluator": SqlColumn(m.EvaluationRow.evaluator, False),
        "version": SqlColumn(m.EvaluationRow.version, False),
        "fidelity": SqlColumn(m.EvaluationRow.fidelity, False),
        "elapsed_s": SqlColumn(m.EvaluationRow.elapsed_s, True),
        # a measurement names its machine in its metrics (as in load_trials)
        "host": SqlColumn(func.coalesce(m.EvaluationRow.metrics["host"].as_string(),
                                      m.EvaluationRow.host), False),
        "created_at": SqlColumn(m.TrialRow.created_at, False),
        "tops": SqlColumn(m.EvaluationRow.tops, True)}


def _document_columns(session: Any, study_id: int) -> dict[str, SqlColumn]:
    """Parameter and metric columns, typed from one trial per (evaluator, status) pair —
    infeasible trials and each ladder rung may carry different metrics."""
    firsts = (select(func.min(m.TrialRow.id)).join(
        m.EvaluationRow, m.EvaluationRow.id == m.TrialRow.evaluation_id)
        .where(m.TrialRow.study_id == study_id)
        .group_by(m.EvaluationRow.evaluator, m.TrialRow.status))
    columns: dict[str, SqlColumn] = {}
    for params, metrics in session.execute(
            select(m.ConfigRow.params, m.EvaluationRow.metrics)
            .join(m.TrialRow, m.TrialRow.config_id == m.ConfigRow.id)
            .join(m.EvaluationRow, m.EvaluationRow.id == m.TrialRow.evaluation_id)
            .where(m.TrialRow.id.in_(firsts))):
        for document, values in ((m.ConfigRow.params, params), (m.EvaluationRow.metrics, metrics)):
            for name, value in values.items():
                numeric = isinstance(value, (int, float))
                if name in columns and document is m.ConfigRow.params:
                    continue  # a metric of the same name wins, as in load_trials
                columns[name] = SqlColumn(document[name].as_float() if numeric
                                        else document[name].as_string(), numeric)
    return columns


def trial_columns(session: Any, study_id: int) -> dict[str, SqlColumn]:
    """Every column of a study's trials (fixed, parameters, metrics) as a SQL expression over
    the rows that :func:`dse.storage.frames.in_study_trials` joins, with whether it is
    numeric."""
    return {**_fixed_columns(), **_document_columns(session, study_id)}


class _SqlFilter(FilterParser):
    def __init__(self, text: str, columns: dict[str, SqlColumn]) -> None:
        super().__init__(text)
        self.columns = columns

    def column(self, name: str) -> SqlColumn:
        if name not in self.columns:
            raise self.fail(f"unknown column {name!r}; columns: {', '.join(self.columns)}")
        return self.columns[name]

    def compare(self, op: str, left: Any, right: Any) -> ColumnElement[bool]:
        if not isinstance(left, SqlColumn) and not isinstance(right, SqlColumn):
            raise self.fail("a comparison needs at least one column name")
        sides = []
        for side in (left, right):
            numeric = side.numeric if isinstance(side, SqlColumn) else isinstance(side, float)
            sides.append((side.expr if isinstance(side, SqlColumn) else side, numeric))
        self.require_same_kind(op, sides[0][1], sides[1][1])
        # a missing value (NULL) is unequal to everything and fails every other comparison,
        # as in the pandas filter, where SQL would leave the comparison unknown
        return func.coalesce(COMPARISONS[op](sides[0][0], sides[1][0]),
                             true() if op == "!=" else false(), type_=Boolean)


def trial_page(s: Session, study: m.StudyRow, *, where: str | None = None,
               sort: str = "-tops", offset: int = 0, limit: int = 50,
               unique: bool = False) -> TrialPage:
    """The trials of ``study`` that match ``where``, sorted by ``sort`` (``-`` for descending;
    missing values last, ties by trial number), rows ``offset`` to ``offset + limit``; with
    ``unique``, one trial per config of a workload (the first in that order: a config a
    sampler asked for again, or a ladder's several fidelities, count once).

    The frame has the study frame's columns (all of them on every page); ``total`` counts
    every matching trial.

    Raises:
        UsageError: a bad filter, an unknown sort column, a negative offset or a limit below 1.
    """
    if not 0 <= offset <= MAX_ROW or not 1 <= limit <= MAX_ROW:
        raise UsageError(f"page: offset must be 0 to {MAX_ROW} and limit 1 to {MAX_ROW} (got "
                         f"offset {offset}, limit {limit})")
    columns = trial_columns(s, study.id)
    condition = _SqlFilter(where, columns).parse() if where else None
    key = sort.removeprefix("-")
    if key not in columns:
        raise UsageError(f"sort: unknown column {key!r}; columns: {', '.join(columns)}")
    order = columns[key].expr.desc() if sort.startswith("-") else columns[key].expr.asc()

    def filtered(query: Select[Any]) -> Select[Any]:
        query = in_study_trials(query, study.id)
        return query if condition is None else query.where(condition)

    def matching(query: Select[Any]) -> Select[Any]:
        if not unique:
            return filtered(query)
        rank = func.row_number().over(
            partition_by=(m.TrialRow.workload_id, m.TrialRow.config_id),
            order_by=(order.nulls_last(), m.TrialRow.number)).label("rank")
        ranked = filtered(select(m.TrialRow.id.label("trial_id"), rank)).subquery()
        first = select(ranked.c.trial_id).where(ranked.c.rank == 1)
        return filtered(query).where(m.TrialRow.id.in_(first))

    total = s.scalar(matching(select(func.count())))
    result = s.execute(matching(select(*TRIAL_ROW))
                       .order_by(order.nulls_last(), m.TrialRow.number)
                       .offset(offset).limit(limit)).all()
    workloads = {wid: body for wid, body in s.execute(select(
        m.WorkloadRow.id, m.WorkloadRow.body).where(
        m.WorkloadRow.id.in_({r[1] for r in result})))}
    frame = trials_frame(study.name, result, workloads)
    # every page has every column, even one of infeasible trials without metrics
    frame = frame.reindex(columns=[*frame.columns, *(c for c in columns if c not in frame)])
    frame.attrs["objectives"] = objectives_of(study)
    return TrialPage(total=int(total or 0), offset=offset, limit=limit, frame=frame)
