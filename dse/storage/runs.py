"""The store's writes for a study run: claiming a study, the cache lookups, committing a window
of trials with Optuna's journal, the ladder's agreement rows, and results measured elsewhere
(another fidelity's comparison, the offline runner's file)."""

from __future__ import annotations

import functools
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import update
from sqlalchemy.exc import SQLAlchemyError

from dse.core.errors import DseError, UsageError
from dse.core.results import EvalResult, Status
from dse.storage import models as m
from dse.storage.bulk import insert_new_rows, insert_rows, pairs_in, rows_in
from dse.storage.engine import json_loads
from dse.storage.frames import study_frame
from dse.storage.keys import config_key, now
from dse.storage.snapshots import MIN_TRIALS, keep_snapshot, trial_extent

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from dse.storage.journal import SqlJournalBackend
    from dse.storage.store import ResultStore


# How commit_window writes: in bulk (dse.storage.bulk), or, with False, through SQLAlchemy's
# insert() of row dicts as before it (kept for benchmarks/store_speed.py to measure against).
BULK_WRITES = True
# The unique identity of an evaluation (models.EvaluationRow's constraint).
EVALUATION_IDENTITY = ("target_id", "workload_id", "config_id", "evaluator", "version")
# What tells a window's evaluations apart (its target is one).
EVALUATION_KEY = ("workload_id", "evaluator", "version", "config_id")
EvaluationKey = tuple[int, str, str, int]
# each status's text, looked up faster than its enum member's value
STATUS_TEXT = {status: status.value for status in Status}


@dataclass(frozen=True)
class Claim:
    """A study claimed for a run: its ids, the next trial number, and its status and last update
    before."""

    study_id: int
    target_id: int
    next_number: int
    status_before: str
    updated_before: datetime


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


def _document(value: Any) -> Any:
    """A JSON column's value as the driver returns it, decoded (psycopg decodes a ``json``
    column itself; SQLite returns its text)."""
    return json_loads(value) if isinstance(value, (str, bytes)) else value


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


def _void_dead_local_owner(row: m.StudyRow) -> None:
    """A lease held by a process of this host that no longer exists is void (it was killed)."""
    host, _, pid = (row.owner or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        row.owner, row.lease_until = None, None
    except PermissionError:
        pass


class RunWrites:
    """Writes of a study run (a mixin of :class:`dse.storage.ResultStore`)."""

    def claim_study(self: ResultStore, name: str, identity: dict[str, Any], target: Any,
                    owner: str, lease_s: float) -> Claim:
        """Create the study or find it (its stored identity and target constants must be
        these), and lease it to ``owner`` for ``lease_s`` seconds.

        Raises:
            UsageError: the stored study differs, or another live runner holds it.
        """
        with self.session() as s:
            target_id = self.target_id(s, target.digest(), target.name, target.to_dict())
            row = self.study(s, name)
            if row is None:
                row = self.create_study(s, name, identity, target_id)
            elif row.spec != identity:
                changed = sorted(k for k, v in identity.items() if row.spec.get(k) != v)
                raise UsageError(f"study {name!r} already exists in {self.safe_url} with a "
                                 f"different {', '.join(changed)}; give the study another name "
                                 "to run this definition (its budget and workers may change; "
                                 "a ladder's rungs may not)")
            elif row.target_id != target_id:  # one study never mixes two sets of constants
                raise UsageError(f"study {name!r} already exists in {self.safe_url} with "
                                 f"other constants for target {identity.get('target')!r} (its "
                                 "file changed since the study began, or a constant read from "
                                 "the machine differs here); give the study another name to "
                                 "run with these")
            _void_dead_local_owner(row)
            status_before, updated_before = row.status, row.updated_at
            self.acquire(s, row, owner, lease_s)
            return Claim(row.id, target_id, self.next_trial_number(s, row.id), status_before,
                         updated_before)

    def renew_lease(self: ResultStore, name: str, owner: str, lease_s: float) -> None:
        """Extend ``owner``'s lease of the study (refused once another runner took it)."""
        with self.session() as s:
            self.acquire(s, self.require_study(s, name), owner, lease_s)

    def open_workload(self: ResultStore, study_id: int,
                      body: Mapping[str, Any]) -> tuple[int, int]:
        """The id of a workload (its body stored once) and how many trials the study has of
        it."""
        with self.session() as s:
            workload_id = self.workload_id(s, body)
            return workload_id, self.trial_count(s, study_id, workload_id)

    def stored_keys(self: ResultStore, target_id: int, workload_id: int, evaluator: str,
                    version: str) -> set[str]:
        """Config keys with a stored evaluation by this evaluator version."""
        with self.session() as s:
            return self.evaluated_keys(s, target_id, workload_id, evaluator, version)

    def stored_results(self: ResultStore, target_id: int, workload_id: int, keys: Sequence[str],
                       evaluator: str, version: str) -> dict[str, EvalResult]:
        """Stored results of these configs by this evaluator version, by config key (their
        parameters left empty: the caller has them).

        The configs' ids are read first, then their evaluations by id: joined in one
        statement, SQLite (no statistics) read every evaluation of the workload for each
        chunk of keys, and a study served from the store spent 30 s of 40 there."""
        with self.session() as s:
            connection = s.connection()
            ids = pairs_in(connection, m.ConfigRow.__table__, "key", "id", {}, keys)
            of_config = {cid: key for key, cid in ids.items()}
            rows = rows_in(connection, m.EvaluationRow.__table__,
                           ("config_id", "status", "metrics", "reason", "elapsed_s"),
                           {"target_id": target_id, "workload_id": workload_id,
                            "evaluator": evaluator, "version": version}, list(ids.values()))
            return {of_config[cid]: EvalResult(Status(status), {}, _document(metrics), reason,
                                               elapsed_s)
                    for cid, status, metrics, reason, elapsed_s in rows}

    def keys_with_trials(self: ResultStore, study_id: int, workload_id: int,
                         evaluator: str) -> set[str]:
        """Config keys the study already has a trial of, by this evaluator."""
        with self.session() as s:
            return self.trialled_keys(s, study_id, workload_id, evaluator)

    def commit_window(self: ResultStore, window: Window) -> None:
        """Write a window in one transaction: its configs, its results not served from the
        store (each evaluation once), its trials, its faults, the journal's pending lines, and
        the renewed lease. On failure nothing is written (the journal's lines stay pending)."""
        created = now()
        with self.session() as s:
            if BULK_WRITES:
                self._window_bulk(s, window, created)
            else:
                self._window_by_rows(s, window, created)
            if window.faults:
                s.execute(m.FaultRow.__table__.insert(), [
                    {**fault, "study_id": window.study_id, "host": window.host,
                     "created_at": created} for fault in window.faults])
            if window.journal is not None:
                window.journal.write_pending(s)
            self.acquire(s, self.require_study(s, window.study), window.owner, window.lease_s)

    def _window_bulk(self: ResultStore, s: Session, window: Window, created: datetime) -> None:
        """The window's configs, new evaluations and trials, each table in one bulk insert
        (:mod:`dse.storage.bulk`); the config keys are the trials' own (the caller computed
        them with :func:`config_key`), not hashed again, and the ids of new rows are drawn or
        returned with them, not looked up."""
        trials = window.trials
        if not trials:
            return
        connection = s.connection()
        hold_write_lock(connection)
        # each table's columns are built while the server stores the table before
        evaluations = functools.cache(functools.partial(new_evaluations, trials))
        ids = self.keyed_config_ids(s, window.space, [t.key for t in trials],
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
        evaluation_ids = self._window_evaluation_ids(s, window.target_id, keys, inserted)
        insert_rows(connection, m.TrialRow.__table__, {
            "number": range(window.next_number, window.next_number + len(trials)),
            **trial_columns(), "config_id": ids,
            "evaluation_id": list(map(evaluation_ids.__getitem__, keys))},
            {"study_id": window.study_id, "created_at": created})

    def _window_by_rows(self: ResultStore, s: Session, window: Window,
                        created: datetime) -> None:
        """The window's configs, new evaluations and trials through SQLAlchemy's ``insert()``
        of row dicts: the write path before :meth:`_window_bulk` (``BULK_WRITES = False``)."""
        trials = window.trials
        ids = self.config_ids(s, window.space, [t.params for t in trials])
        new_rows, seen = [], set()
        for trial, cid in zip(trials, ids, strict=True):
            ev = trial.evaluator
            if trial.cached or (trial.workload_id, cid, ev.name, ev.version) in seen:
                continue
            seen.add((trial.workload_id, cid, ev.name, ev.version))
            new_rows.append(evaluation_row(window.target_id, trial.workload_id, cid, ev,
                                           trial.result, window.host, window.versions,
                                           created))
        self.put_evaluations(s, new_rows)
        keys = evaluation_keys(trials, ids)
        evaluation_ids = self._window_evaluation_ids(s, window.target_id, keys, {})
        self.add_trials(s, [{
            "study_id": window.study_id, "number": window.next_number + i,
            "workload_id": t.workload_id, "config_id": key[-1],
            "evaluation_id": evaluation_ids[key], "status": t.result.status.value,
            "cached": int(t.cached), "created_at": created}
            for i, (t, key) in enumerate(zip(trials, keys, strict=True))])

    def _window_evaluation_ids(self: ResultStore, s: Session, target_id: int,
                               keys: Sequence[EvaluationKey],
                               known: Mapping[EvaluationKey, int]) -> dict[EvaluationKey, int]:
        """The stored evaluation of each of the window's trials (``keys``: their
        :func:`evaluation_keys`); those in ``known`` (just inserted) are not looked up."""
        evaluation_ids = dict(known)
        wanted: dict[tuple[int, str, str], list[int]] = {}  # config ids by evaluator version
        for key in dict.fromkeys(keys):
            if key not in known:
                wanted.setdefault(key[:-1], []).append(key[-1])
        for (workload_id, name, version), config_ids in wanted.items():
            if BULK_WRITES:
                stored = pairs_in(s.connection(), m.EvaluationRow.__table__, "config_id", "id",
                                  {"target_id": target_id, "workload_id": workload_id,
                                   "evaluator": name, "version": version}, config_ids)
            else:
                stored = self.evaluation_ids(s, target_id, workload_id, config_ids, name,
                                             version)
            evaluation_ids.update({(workload_id, name, version, cid): eid
                                   for cid, eid in stored.items()})
        return evaluation_ids

    def record_agreement(self: ResultStore, study_id: int, workload_id: int, rung: int,
                         cheaper: str, dearer: str, n: int, top_k: int,
                         values: Mapping[str, float | None]) -> None:
        """Store how well ladder rung ``rung - 1`` (``cheaper``) ranked what rung ``rung``
        (``dearer``) scored: Spearman, Kendall and top-k overlap over ``n`` configs."""
        with self.session() as s:
            s.execute(m.FidelityRow.__table__.insert(), [{
                "study_id": study_id, "workload_id": workload_id, "rung": rung,
                "cheaper": cheaper, "dearer": dearer, "n": n, "top_k": top_k,
                "created_at": now(), **values}])

    def put_results(self: ResultStore, target: Any, workload_body: Mapping[str, Any],
                    space: str, runs: Sequence[tuple[Any, Sequence[EvalResult]]]) -> None:
        """Store results outside any study (each evaluator's, so studies are later served
        from them): ``runs`` pairs an evaluator with its results on one workload."""
        host, created = socket.gethostname(), now()
        with self.session() as s:
            target_id = self.target_id(s, target.digest(), target.name, target.to_dict())
            workload_id = self.workload_id(s, {**workload_body, "space": space})
            for evaluator, results in runs:
                ids = self.config_ids(s, space, [r.params for r in results])
                self.put_evaluations(s, [
                    evaluation_row(target_id, workload_id, cid, Measured.of(evaluator), r,
                                   host, {}, created)
                    for cid, r in zip(ids, results, strict=True)])

    def ingest_results(self: ResultStore, study: str, evaluator: Any,
                       records: Sequence[tuple[Mapping[str, Any], str, EvalResult]],
                       provenance: Mapping[str, Any]) -> dict[str, int]:
        """Store results measured elsewhere (``records``: workload body, space, result) as
        evaluations of ``evaluator`` on the study's own target constants and as trials of the
        study, all in one transaction; a stored result is never replaced. Returns how many
        evaluations and trials were new and how many results differ in status from the
        stored ones."""
        host = str(provenance.get("host", "offline"))
        by = Measured.of(evaluator)
        added = {"evaluations": 0, "trials": 0, "differ": 0}
        with self.session() as s:
            # first, a write that changes nothing: it waits for any other ingest of the study
            # to commit (a row lock on PostgreSQL, the write lock on SQLite, taken before this
            # transaction reads), so what this one finds stored, and counts as new, is exact
            s.execute(update(m.StudyRow).where(m.StudyRow.name == study)
                      .values(name=m.StudyRow.name))
            row = self.require_study(s, study)
            target_id = row.target_id  # the study's constants, even if its file changed since
            for body, space, result in records:
                workload_id = self.workload_id(s, {**body, "space": space})
                (config_id,) = self.config_ids(s, space, [result.params])
                before = self.find_evaluations(s, target_id, workload_id, [config_id],
                                               by.name, by.version)
                measured = EvalResult(result.status, result.params,
                                      {**result.metrics, **provenance}, result.reason,
                                      result.elapsed_s)
                self.put_evaluations(s, [evaluation_row(target_id, workload_id, config_id, by,
                                                        measured, host, provenance, now())])
                added["evaluations"] += not before
                added["differ"] += bool(before) and \
                    before[config_id].status != result.status.value
                key = config_key(space, result.params)
                if key in self.trialled_keys(s, row.id, workload_id, by.name):
                    continue
                stored = self.find_evaluations(s, target_id, workload_id, [config_id], by.name,
                                               by.version)[config_id]
                self.add_trials(s, [{
                    "study_id": row.id, "number": self.next_trial_number(s, row.id),
                    "workload_id": workload_id, "config_id": config_id,
                    "evaluation_id": stored.id, "status": stored.status, "cached": 0,
                    "created_at": now()}])
                added["trials"] += 1
        return added

    def keep_frame(self: ResultStore, name: str) -> int | None:
        """Keep the study's frame as it is now, for reads of every trial to take whole (see
        :mod:`dse.storage.snapshots`), if it has :data:`~dse.storage.snapshots.MIN_TRIALS`
        trials or more; returns the snapshot's size in bytes, None if none was kept. Only a
        speed-up: a database error is reported on stderr, not raised (what was stored
        stands, and reads take its documents)."""
        try:
            with self.session() as s:
                row = self.require_study(s, name)
                count, last = trial_extent(s, row.id)
                if count < MIN_TRIALS or last is None:
                    return None
                frame = study_frame(s, row, snapshot=False)
                frame.attrs.pop("objectives", None)
                # trials added while the frame was read make it stale at once: it keeps its own
                return keep_snapshot(s, row.id, frame,
                                     (len(frame), int(frame["number"].max())), now())
        except (SQLAlchemyError, DseError) as exc:
            print(f"dse: study {name!r} is stored; its frame was not kept for fast reads "
                  f"({getattr(exc, 'orig', None) or exc}): they read its documents instead",
                  file=sys.stderr)
            return None

    def study_journal(self: ResultStore, name: str) -> list[dict[str, Any]]:
        """The study's Optuna journal lines, in order."""
        from dse.storage.journal import SqlJournalBackend

        with self.session() as s:
            study_id = self.require_study(s, name).id
        return list(SqlJournalBackend(self, study_id).read_logs(0))
