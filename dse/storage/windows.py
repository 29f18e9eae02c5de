"""A window of a study run, and how the store writes it: the trials (their configs and results)
that one transaction commits, each table in one bulk insert (:mod:`dse.storage.bulk`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from dse.core.results import EvalResult, Status
from dse.storage import models as m
from dse.storage.bulk import insert_new_rows, insert_rows, pairs_in
from dse.storage.rows import keyed_config_ids

if TYPE_CHECKING:  # Optuna is imported by a run, not by every read of the store
    from dse.storage.journal import SqlJournalBackend

# The unique identity of an evaluation (models.EvaluationRow's constraint).
EVALUATION_IDENTITY = ("target_id", "workload_id", "config_id", "evaluator", "version")
# What tells a window's evaluations apart (its target is one).
EVALUATION_KEY = ("workload_id", "evaluator", "version", "config_id")
EvaluationKey = tuple[int, str, str, int]
# each status's text, looked up faster than its enum member's value
STATUS_TEXT = {status: status.value for status in Status}


@dataclass(frozen=True)
class Measured:
    """Who produced a result: an evaluator's name, version and fidelity."""

    name: str
    version: str
    fidelity: str

    @classmethod
    def of(cls, evaluator: Any) -> Measured:
        return cls(evaluator.name, evaluator.version, evaluator.fidelity)


@dataclass
class PendingTrial:
    """A trial of a window: its workload, config (``key``: its :func:`config_key` in the
    window's space, and its parameters) and result, whether the store served it, and the
    evaluator it is recorded under."""

    workload_id: int
    key: str
    params: dict[str, Any]
    result: EvalResult
    cached: bool
    evaluator: Measured


@dataclass
class Window:
    """What one commit writes: the trials (numbered from ``next_number``), their new
    evaluations and Optuna's pending journal lines; the lease of ``owner`` is renewed with it."""

    study: str
    study_id: int
    target_id: int
    space: str
    next_number: int
    trials: list[PendingTrial]
    journal: SqlJournalBackend | None
    owner: str
    lease_s: float
    host: str
    versions: dict[str, str] = field(default_factory=dict)
    # faults of the machinery since the last window (dse_faults rows without study or time)
    faults: list[dict[str, Any]] = field(default_factory=list)


def evaluation_row(target_id: int, workload_id: int, config_id: int, by: Measured,
                   result: EvalResult, host: str, versions: Mapping[str, Any],
                   created: Any) -> dict[str, Any]:
    """The ``dse_evaluations`` row of one result."""
    return {"target_id": target_id, "workload_id": workload_id, "config_id": config_id,
            "evaluator": by.name, "version": by.version, "fidelity": by.fidelity,
            "status": result.status.value, "reason": result.reason, "metrics": result.metrics,
            "tops": result.metrics.get("tops"), "elapsed_s": result.elapsed_s, "host": host,
            "versions": dict(versions), "created_at": created}


def evaluation_keys(trials: Sequence[PendingTrial],
                    config_ids: Sequence[int]) -> list[EvaluationKey]:
    """Each trial's evaluation, by :data:`EVALUATION_KEY` (``config_ids[i]`` is the stored id of
    ``trials[i]``'s config)."""
    return [(t.workload_id, t.evaluator.name, t.evaluator.version, cid)
            for t, cid in zip(trials, config_ids, strict=True)]


def new_evaluations(trials: Sequence[PendingTrial]) -> tuple[list[int], dict[str, list[Any]]]:
    """The evaluations the window's trials add, each once (those the store did not serve): the
    index of the first trial of each, and their columns but the config id. Told apart by config
    key, known before the configs' ids (a window has one space: a key is one id)."""
    firsts: dict[tuple[int, str, str, str], int] = {}
    for i, t in enumerate(trials):
        if not t.cached:
            firsts.setdefault((t.workload_id, t.evaluator.name, t.evaluator.version, t.key), i)
    new = [trials[i] for i in firsts.values()]
    results = [t.result for t in new]
    return list(firsts.values()), {
        "workload_id": [t.workload_id for t in new],
        "evaluator": [t.evaluator.name for t in new],
        "version": [t.evaluator.version for t in new],
        "fidelity": [t.evaluator.fidelity for t in new],
        "status": [STATUS_TEXT[r.status] for r in results],
        "reason": [r.reason for r in results],
        "metrics": [r.metrics for r in results],
        "tops": [r.metrics.get("tops") for r in results],
        "elapsed_s": [r.elapsed_s for r in results]}


def hold_write_lock(connection: Any) -> None:
    """Take SQLite's write lock at once (a write that changes nothing), waiting for another
    writer as any write does, so that ids drawn next in the transaction are its own until it
    commits (see :func:`dse.storage.bulk.insert_new_rows`); PostgreSQL needs none."""
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql(
            "UPDATE dse_meta SET value = value WHERE key = 'schema_version'")


# How a window's configs, evaluations and trials are written inside the commit's transaction
# (session, window, the rows' creation time): :func:`write_window`, or another implementation
# chosen when the store is made (see :class:`dse.storage.ResultStore`).
WindowWriter = Callable[[Session, "Window", datetime], None]


def write_window(s: Session, window: Window, created: datetime) -> None:
    """The window's configs, new evaluations and trials, each table in one bulk insert
    (:mod:`dse.storage.bulk`); the config keys are the trials' own (the caller computed them
    with :func:`config_key`), not hashed again, and the ids of new rows are drawn or returned
    with them, not looked up."""
    trials = window.trials
    if not trials:
        return
    connection = s.connection()
    hold_write_lock(connection)
    # each table's columns are built while the server stores the table before
    evaluations = functools.cache(functools.partial(new_evaluations, trials))
    ids = keyed_config_ids(s, window.space, [t.key for t in trials],
                           [t.params for t in trials], meanwhile=evaluations)
    firsts, columns = evaluations()
    trial_columns = functools.cache(lambda: {
        "workload_id": [t.workload_id for t in trials],
        "status": [STATUS_TEXT[t.result.status] for t in trials],
        "cached": [int(t.cached) for t in trials]})
    inserted = insert_new_rows(connection, m.EvaluationRow.__table__, {
        **columns, "config_id": [ids[i] for i in firsts]},
        {"target_id": window.target_id, "host": window.host,
         "versions": dict(window.versions), "created_at": created},
        conflict=EVALUATION_IDENTITY, key=EVALUATION_KEY,
        meanwhile=trial_columns) if firsts else {}
    keys = evaluation_keys(trials, ids)
    evaluation_ids = window_evaluation_ids(s, window.target_id, keys, inserted)
    insert_rows(connection, m.TrialRow.__table__, {
        "number": range(window.next_number, window.next_number + len(trials)),
        **trial_columns(), "config_id": ids,
        "evaluation_id": list(map(evaluation_ids.__getitem__, keys))},
        {"study_id": window.study_id, "created_at": created})


def window_evaluation_ids(s: Session, target_id: int, keys: Sequence[EvaluationKey],
                          known: Mapping[EvaluationKey, int]) -> dict[EvaluationKey, int]:
    """The stored evaluation of each of the window's trials (``keys``: their
    :func:`evaluation_keys`); those in ``known`` (just inserted) are not looked up."""
    evaluation_ids = dict(known)
    wanted: dict[tuple[int, str, str], list[int]] = {}  # config ids by evaluator version
    for key in dict.fromkeys(keys):
        if key not in known:
            wanted.setdefault(key[:-1], []).append(key[-1])
    for (workload_id, name, version), config_ids in wanted.items():
        stored = pairs_in(s.connection(), m.EvaluationRow.__table__, "config_id", "id",
                          {"target_id": target_id, "workload_id": workload_id,
                           "evaluator": name, "version": version}, config_ids)
        evaluation_ids.update({(workload_id, name, version, cid): eid
                               for cid, eid in stored.items()})
    return evaluation_ids
