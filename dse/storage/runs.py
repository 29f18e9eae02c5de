"""The store's writes for a study run: claiming a study, the cache lookups, committing a window
of trials with Optuna's journal, the ladder's agreement rows, and results measured elsewhere
(another fidelity's comparison, the offline runner's file)."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from dse.core.errors import DseError, UsageError
from dse.core.results import EvalResult, Status
from dse.storage import models as m
from dse.storage import rows
from dse.storage.bulk import pairs_in, rows_in
from dse.storage.engine import json_loads
from dse.storage.frames import study_frame
from dse.storage.keys import config_key, now
from dse.storage.snapshots import MIN_TRIALS, keep_snapshot, trial_extent
from dse.storage.windows import (
    Measured,
    PendingTrial,
    Window,
    WindowWriter,
    evaluation_row,
    write_window,
)

# A window and what it holds are written by the runner, which imports them from here.
__all__ = ["Claim", "Measured", "PendingTrial", "RunWrites", "Window", "WindowWriter",
           "write_window"]


@dataclass(frozen=True)
class Claim:
    """A study claimed for a run: its ids, the next trial number, and its status and last update
    before."""

    study_id: int
    target_id: int
    next_number: int
    status_before: str
    updated_before: datetime


def _document(value: Any) -> Any:
    """A JSON column's value as the driver returns it, decoded (psycopg decodes a ``json``
    column itself; SQLite returns its text)."""
    return json_loads(value) if isinstance(value, (str, bytes)) else value


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
    """Writes of a study run (a mixin of :class:`dse.storage.ResultStore`, which provides
    what is declared here)."""

    session: Callable[[], AbstractContextManager[Session]]
    safe_url: str
    _where: Callable[[], str]
    _window_writer: WindowWriter

    def claim_study(self, name: str, identity: dict[str, Any], target: Any,
                    owner: str, lease_s: float) -> Claim:
        """Create the study or find it (its stored identity and target constants must be
        these), and lease it to ``owner`` for ``lease_s`` seconds.

        Raises:
            UsageError: the stored study differs, or another live runner holds it.
        """
        with self.session() as s:
            target_id = rows.target_id(s, target.digest(), target.name, target.to_dict())
            row = rows.study(s, name)
            if row is None:
                row = rows.create_study(s, name, identity, target_id)
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
            rows.acquire(row, owner, lease_s)
            return Claim(row.id, target_id, rows.next_trial_number(s, row.id), status_before,
                         updated_before)

    def renew_lease(self, name: str, owner: str, lease_s: float) -> None:
        """Extend ``owner``'s lease of the study (refused once another runner took it)."""
        with self.session() as s:
            rows.acquire(rows.require_study(s, name, self._where), owner, lease_s)

    def release(self, study_name: str, owner: str, status: str,
                unchanged_since: datetime | None = None) -> None:
        """End ``owner``'s run of the study with ``status``; a study another runner has taken
        over since (this one's lease lapsed) keeps that runner's lease and status. A run that
        changed nothing gives ``unchanged_since``, the study's last update before it, which the
        study keeps."""
        with self.session() as s:
            study = rows.require_study(s, study_name, self._where)
            if study.owner != owner:
                return
            study.owner, study.lease_until = None, None
            study.status, study.updated_at = status, unchanged_since or now()


    def open_workload(self, study_id: int,
                      body: Mapping[str, Any]) -> tuple[int, int]:
        """The id of a workload (its body stored once) and how many trials the study has of
        it."""
        with self.session() as s:
            workload_id = rows.workload_id(s, body)
            return workload_id, rows.trial_count(s, study_id, workload_id)

    def stored_keys(self, target_id: int, workload_id: int, evaluator: str,
                    version: str) -> set[str]:
        """Config keys with a stored evaluation by this evaluator version."""
        with self.session() as s:
            return rows.evaluated_keys(s, target_id, workload_id, evaluator, version)

    def stored_results(self, target_id: int, workload_id: int, keys: Sequence[str],
                       evaluator: str, version: str) -> dict[str, EvalResult]:
        """Stored results of these configs by this evaluator version, by config key.

        The configs' ids are read first, then their evaluations by id: joined in one
        statement, SQLite (no statistics) read every evaluation of the workload for each
        chunk of keys, and a study served from the store spent 30 s of 40 there."""
        with self.session() as s:
            connection = s.connection()
            ids = pairs_in(connection, m.ConfigRow.__table__, "key", "id", {}, keys)
            of_config = {cid: key for key, cid in ids.items()}
            found = rows_in(connection, m.EvaluationRow.__table__,
                            ("config_id", "status", "metrics", "reason", "elapsed_s"),
                            {"target_id": target_id, "workload_id": workload_id,
                             "evaluator": evaluator, "version": version}, list(ids.values()))
            return {of_config[cid]: EvalResult(Status(status), _document(metrics), reason,
                                               elapsed_s)
                    for cid, status, metrics, reason, elapsed_s in found}

    def keys_with_trials(self, study_id: int, workload_id: int, evaluator: str,
                         version: str | None = None) -> set[str]:
        """Config keys the study already has a trial of, by this evaluator (of this version,
        when given)."""
        with self.session() as s:
            return rows.trialled_keys(s, study_id, workload_id, evaluator, version)

    def commit_window(self, window: Window) -> None:
        """Write a window in one transaction: its configs, its results not served from the
        store (each evaluation once), its trials, its faults, the journal's pending lines, and
        the renewed lease. On failure nothing is written (the journal's lines stay pending)."""
        created = now()
        with self.session() as s:
            self._window_writer(s, window, created)
            if window.faults:
                s.execute(m.FaultRow.__table__.insert(), [
                    {**fault, "study_id": window.study_id, "host": window.host,
                     "created_at": created} for fault in window.faults])
            if window.journal is not None:
                window.journal.write_pending(s)
            rows.acquire(rows.require_study(s, window.study, self._where), window.owner,
                         window.lease_s)

    def record_agreement(self, study_id: int, workload_id: int, rung: int,
                         cheaper: str, dearer: str, n: int, top_k: int,
                         values: Mapping[str, float | None]) -> None:
        """Store how well ladder rung ``rung - 1`` (``cheaper``) ranked what rung ``rung``
        (``dearer``) scored: Spearman, Kendall and top-k overlap over ``n`` configs."""
        with self.session() as s:
            s.execute(m.FidelityRow.__table__.insert(), [{
                "study_id": study_id, "workload_id": workload_id, "rung": rung,
                "cheaper": cheaper, "dearer": dearer, "n": n, "top_k": top_k,
                "created_at": now(), **values}])

    def put_results(self, target: Any, workload_body: Mapping[str, Any], space: str,
                    configs: Sequence[Mapping[str, Any]],
                    runs: Sequence[tuple[Any, Sequence[EvalResult]]]) -> None:
        """Store results outside any study (each evaluator's, so studies are later served
        from them): ``runs`` pairs an evaluator with its results on one workload, one per
        config of ``configs`` by position."""
        host, created = socket.gethostname(), now()
        with self.session() as s:
            target_id = rows.target_id(s, target.digest(), target.name, target.to_dict())
            workload_id = rows.workload_id(s, {**workload_body, "space": space})
            ids = rows.config_ids(s, space, list(configs))
            for evaluator, results in runs:
                rows.put_evaluations(s, [
                    evaluation_row(target_id, workload_id, cid, Measured.of(evaluator), r,
                                   host, {}, created)
                    for cid, r in zip(ids, results, strict=True)])

    def ingest_results(self, study: str, evaluator: Any,
                       records: Sequence[tuple[Mapping[str, Any], str, Mapping[str, Any],
                                               EvalResult]],
                       provenance: Mapping[str, Any]) -> dict[str, int]:
        """Store results measured elsewhere (``records``: workload body, space, the config's
        parameters, its result) as
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
            row = rows.require_study(s, study, self._where)
            target_id = row.target_id  # the study's constants, even if its file changed since
            for body, space, params, result in records:
                workload_id = rows.workload_id(s, {**body, "space": space})
                (config_id,) = rows.config_ids(s, space, [params])
                before = rows.find_evaluations(s, target_id, workload_id, [config_id],
                                               by.name, by.version)
                measured = EvalResult(result.status, {**result.metrics, **provenance},
                                      result.reason, result.elapsed_s)
                rows.put_evaluations(s, [evaluation_row(target_id, workload_id, config_id, by,
                                                        measured, host, provenance, now())])
                added["evaluations"] += not before
                added["differ"] += bool(before) and \
                    before[config_id].status != result.status.value
                key = config_key(space, params)
                if key in rows.trialled_keys(s, row.id, workload_id, by.name):
                    continue
                stored = rows.find_evaluations(s, target_id, workload_id, [config_id], by.name,
                                               by.version)[config_id]
                rows.add_trials(s, [{
                    "study_id": row.id, "number": rows.next_trial_number(s, row.id),
                    "workload_id": workload_id, "config_id": config_id,
                    "evaluation_id": stored.id, "status": stored.status, "cached": 0,
                    "created_at": now()}])
                added["trials"] += 1
        return added

    def keep_frame(self, name: str) -> int | None:
        """Keep the study's frame as it is now, for reads of every trial to take whole (see
        :mod:`dse.storage.snapshots`), if it has :data:`~dse.storage.snapshots.MIN_TRIALS`
        trials or more; returns the snapshot's size in bytes, None if none was kept. Only a
        speed-up: a database error is reported on stderr, not raised (what was stored
        stands, and reads take its documents)."""
        try:
            with self.session() as s:
                row = rows.require_study(s, name, self._where)
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

    def study_journal(self, name: str) -> list[dict[str, Any]]:
        """The study's Optuna journal lines, in order."""
        with self.session() as s:
            return rows.journal_lines(s, rows.require_study(s, name, self._where).id)
