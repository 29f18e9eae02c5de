"""The store's window writes and frame reads as they were before the bulk and columnar paths,
pinned here for ``store_speed.py`` (and the tests that compare the two) to measure against.

Neither is dse's: a store uses them only when made with them, as in
``ResultStore(url, window_writer=write_window_by_rows, frame_reader=rows_study_frame)``. What
they are built of (the row helpers of :mod:`dse.storage.rows`, :func:`trials_frame`) is dse's
own, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from dse.storage import models as m
from dse.storage.frames import TRIAL_ROW, in_study_trials, objectives_of, trials_frame
from dse.storage.rows import CHUNK, add_trials, config_ids, evaluation_identity, put_evaluations
from dse.storage.windows import EvaluationKey, Window, evaluation_keys, evaluation_row


def write_window_by_rows(s: Session, window: Window, created: datetime) -> None:
    """The window's configs, new evaluations and trials through SQLAlchemy's ``insert()`` of
    row dicts, each document encoded by ``json.dumps``: the write path before
    :func:`dse.storage.windows.write_window`."""
    trials = window.trials
    ids = config_ids(s, window.space, [t.params for t in trials])
    new_rows, seen = [], set()
    for trial, cid in zip(trials, ids, strict=True):
        ev = trial.evaluator
        if trial.cached or (trial.workload_id, cid, ev.name, ev.version) in seen:
            continue
        seen.add((trial.workload_id, cid, ev.name, ev.version))
        new_rows.append(evaluation_row(window.target_id, trial.workload_id, cid, ev,
                                       trial.result, window.host, window.versions, created))
    put_evaluations(s, new_rows)
    keys = evaluation_keys(trials, ids)
    evaluation_ids = _window_evaluation_ids(s, window.target_id, keys)
    add_trials(s, [{
        "study_id": window.study_id, "number": window.next_number + i,
        "workload_id": t.workload_id, "config_id": key[-1],
        "evaluation_id": evaluation_ids[key], "status": t.result.status.value,
        "cached": int(t.cached), "created_at": created}
        for i, (t, key) in enumerate(zip(trials, keys, strict=True))])


def _window_evaluation_ids(s: Session, target_id: int,
                           keys: Sequence[EvaluationKey]) -> dict[EvaluationKey, int]:
    """The stored evaluation of each of the window's trials, looked up by evaluator version."""
    found: dict[EvaluationKey, int] = {}
    wanted: dict[tuple[int, str, str], list[int]] = {}  # config ids by evaluator version
    for key in dict.fromkeys(keys):
        wanted.setdefault(key[:-1], []).append(key[-1])
    for (workload_id, name, version), ids in wanted.items():
        found.update({(workload_id, name, version, cid): eid for cid, eid in evaluation_ids(
            s, target_id, workload_id, ids, name, version).items()})
    return found


def evaluation_ids(s: Session, target_id: int, workload_id: int, config_ids: Sequence[int],
                   evaluator: str, version: str) -> dict[int, int]:
    """The ids of these configs' stored evaluations by this evaluator version, by config id."""
    found: dict[int, int] = {}
    unique = list(dict.fromkeys(config_ids))
    e = m.EvaluationRow
    for start in range(0, len(unique), CHUNK):
        found.update(s.execute(select(e.config_id, e.id).where(
            *evaluation_identity(target_id, workload_id, evaluator, version),
            e.config_id.in_(unique[start:start + CHUNK]))).all())
    return found


def rows_study_frame(s: Session, study: m.StudyRow) -> pd.DataFrame:
    """Every trial of ``study`` from SQLAlchemy's rows, its documents decoded one by one by
    ``pd.DataFrame.from_records``: the read path before the columnar one (no kept frame)."""
    workloads: dict[int, Any] = {wid: body for wid, body in s.execute(
        select(m.WorkloadRow.id, m.WorkloadRow.body).where(m.WorkloadRow.id.in_(
            select(m.TrialRow.workload_id).where(m.TrialRow.study_id == study.id))))}
    result = s.execute(in_study_trials(select(*TRIAL_ROW), study.id)
                       .order_by(m.TrialRow.number)).all()
    frame = trials_frame(study.name, result, workloads)
    frame.attrs["objectives"] = objectives_of(study)
    return frame
