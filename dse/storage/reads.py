"""The store's reads, each in a transaction of its own: a study's spec, its trials as frames,
pages cut in SQL, its best configs, the list of studies and what a dashboard summarises."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import pandas as pd
from sqlalchemy import select

from dse.core.registry import workload_from_dict
from dse.storage import models as m
from dse.storage.frames import (
    FrameReader,
    best_trials,
    narrow_frame,
    objectives_of,
    trials_by_number,
)
from dse.storage.listing import common_reasons, fidelity_report, list_studies, study_version
from dse.storage.pages import TrialPage, trial_columns, trial_page
from dse.storage.rows import require_study, study

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


class StudyReads:
    """Reading studies back (a mixin of :class:`dse.storage.ResultStore`, which provides what
    is declared here)."""

    session: Callable[[], AbstractContextManager[Session]]
    _where: Callable[[], str]
    _frame_reader: FrameReader

    @contextmanager
    def _read(self, name: str) -> Iterator[tuple[Session, m.StudyRow]]:
        """A session and the study's row (:class:`UsageError` naming the studies there when it
        does not exist)."""
        with self.session() as s:
            yield s, require_study(s, name, self._where)

    def has_study(self, name: str) -> bool:
        """Whether a study of that name is stored."""
        with self.session() as s:
            return study(s, name) is not None

    def study_spec(self, name: str) -> dict[str, Any]:
        """The stored identity of a study: target, workloads, space, evaluator, ladder..."""
        with self._read(name) as (_, row):
            return dict(row.spec)

    def study_objectives(self, name: str) -> list[tuple[str, str]]:
        """The study's (metric, direction) objectives."""
        with self._read(name) as (_, row):
            return objectives_of(row)

    def load_trials(self, name: str) -> pd.DataFrame:
        """Every trial of the study, one row each, parameters and metrics as columns (see
        :mod:`dse.storage.frames`)."""
        with self._read(name) as (s, row):
            return self._frame_reader(s, row)

    def best(self, name: str, top: int = 10) -> pd.DataFrame:
        """The study's ``top`` best ok trials per workload by its most faithful results (its
        Pareto front for several objectives)."""
        return best_trials(self.load_trials(name), top)

    def trial_page(self, name: str, *, where: str | None = None, sort: str = "-tops",
                   offset: int = 0, limit: int = 50, unique: bool = False) -> TrialPage:
        """One page of the study's trials, filtered, sorted and cut in SQL (see
        :func:`dse.storage.pages.trial_page`)."""
        with self._read(name) as (s, row):
            return trial_page(s, row, where=where, sort=sort, offset=offset, limit=limit,
                              unique=unique)

    def trials_by_number(self, name: str, numbers: list[int]) -> pd.DataFrame:
        """Full rows of the given trials, in the given order."""
        with self._read(name) as (s, row):
            return trials_by_number(s, row, numbers)

    def narrow_trials(self, name: str) -> pd.DataFrame:
        """One narrow row per trial (number, workload and config ids, status, evaluator,
        fidelity, the objectives), read without decoding a document."""
        with self._read(name) as (s, row):
            objectives = [metric for metric, _ in objectives_of(row)]
            if objectives == ["tops"]:  # a column of its own: no document to type
                return narrow_frame(s, row, {"tops": m.EvaluationRow.tops})
            columns = trial_columns(s, row.id)
            return narrow_frame(s, row, {metric: columns[metric].expr for metric in objectives
                                         if metric in columns})

    def workload_bodies(self, ids: set[int]) -> dict[int, dict[str, Any]]:
        """Stored workload bodies by id."""
        with self.session() as s:
            return dict(s.execute(select(m.WorkloadRow.id, m.WorkloadRow.body)
                                  .where(m.WorkloadRow.id.in_(ids))).all())

    def common_reasons(self, name: str, workload_id: int,
                       top: int = 3) -> list[tuple[str, str, int]]:
        """The commonest (status, reason, trials) of a workload's trials that were not ok."""
        with self._read(name) as (s, row):
            return common_reasons(s, row.id, workload_id, top)

    def study_version(self, name: str) -> tuple[Any, ...]:
        """Changes whenever the study gains or updates trials."""
        with self._read(name) as (s, row):
            return study_version(s, row)

    def study_header(self, name: str) -> dict[str, Any]:
        """The study's name, spec, status and last update."""
        with self._read(name) as (_, row):
            return {"name": row.name, "spec": dict(row.spec), "status": row.status,
                    "updated": row.updated_at}

    def list_studies(self) -> pd.DataFrame:
        """One row per study: target, workloads, trials, objective, best value, status."""
        with self.session() as s:
            return list_studies(s)

    def fidelity_report(self, name: str) -> list[dict[str, Any]]:
        """How well each ladder rung ranked the next one's configs, per workload."""
        with self._read(name) as (s, row):
            return fidelity_report(s, row)

    def faults(self, name: str) -> pd.DataFrame:
        """The study's faults of the machinery (lost workers or nodes), oldest first: when,
        where, the workload, what Ray raised, the attempt, how many configs it cost and whether
        they were tried again."""
        f, w = m.FaultRow, m.WorkloadRow
        with self._read(name) as (s, row):
            rows = s.execute(select(f.created_at, f.host, w.body, f.kind, f.message, f.attempt,
                                    f.configs, f.retried)
                             .join(w, w.id == f.workload_id).where(f.study_id == row.id)
                             .order_by(f.id)).all()
        columns = ["created_at", "host", "workload", "kind", "message", "attempt", "configs",
                   "retried"]
        frame = pd.DataFrame([tuple(r) for r in rows], columns=columns)
        frame["workload"] = [workload_from_dict(body).label for body in frame["workload"]]
        frame["retried"] = frame["retried"].astype(bool)
        return frame
