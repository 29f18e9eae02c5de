"""The store's building blocks inside one transaction: rows identified by their content
(targets, workloads, configs), evaluations by their identity, studies, their leases and trials.

Private to :mod:`dse.storage`: each takes the caller's session ``s``, so a method of the store
composes several into one transaction. Code outside the store calls the store's methods
(:class:`dse.storage.face.StoreFace`), each one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Table, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from dse.core.errors import UsageError
from dse.core.suggest import did_you_mean
from dse.storage import models as m
from dse.storage.bulk import insert_new_rows, pairs_in
from dse.storage.keys import canonical_key, config_key, now

# How many rows one statement carries: well under SQLite's limit of bound parameters.
CHUNK = 500


def _insert(s: Session) -> Any:
    """The dialect's ``INSERT`` that can skip rows already stored (``ON CONFLICT``)."""
    return pg_insert if s.get_bind().dialect.name == "postgresql" else sqlite_insert


# -- rows identified by content ---------------------------------------------------------------
def _insert_ignore(s: Session, table: Table, rows: list[dict[str, Any]], key: str) -> None:
    if not rows:
        return
    insert = _insert(s)
    for start in range(0, len(rows), CHUNK):
        s.execute(insert(table).on_conflict_do_nothing(index_elements=[key]),
                  rows[start:start + CHUNK])


def _ids_by_key(s: Session, model: Any, rows: list[dict[str, Any]]) -> list[int]:
    """The ids of ``rows`` (each inserted unless stored), by their ``key`` or ``digest``."""
    _insert_ignore(s, model.__table__, rows, "key" if "key" in rows[0] else "digest")
    column = model.key if "key" in rows[0] else model.digest
    wanted = [r["key"] if "key" in rows[0] else r["digest"] for r in rows]
    found: dict[str, int] = {}
    unique = list(dict.fromkeys(wanted))
    for start in range(0, len(unique), CHUNK):
        chunk = unique[start:start + CHUNK]
        found.update(dict(s.execute(select(column, model.id).where(column.in_(chunk))).all()))
    return [found[k] for k in wanted]


def target_id(s: Session, digest: str, name: str, body: Mapping[str, Any]) -> int:
    """The id of a target's constants (stored once, by digest)."""
    return _ids_by_key(s, m.TargetRow, [{"digest": digest, "name": name, "body": dict(body)}])[0]


def workload_id(s: Session, body: Mapping[str, Any]) -> int:
    """The id of a workload (stored once, by its canonical key)."""
    return _ids_by_key(s, m.WorkloadRow, [{"key": canonical_key(body), "body": dict(body)}])[0]


def config_ids(s: Session, space: str, params: Sequence[Mapping[str, Any]]) -> list[int]:
    """The ids of configs of ``space`` (each stored once, by :func:`config_key`)."""
    if not params:
        return []
    rows = [{"key": config_key(space, p), "space": space, "params": dict(p)} for p in params]
    return _ids_by_key(s, m.ConfigRow, rows)


def keyed_config_ids(s: Session, space: str, keys: Sequence[str],
                     params: Sequence[Mapping[str, Any]],
                     meanwhile: Callable[[], Any] | None = None) -> list[int]:
    """Like :func:`config_ids`, for configs whose keys the caller has (``keys[i]`` is
    ``config_key(space, params[i])``): each new config inserted once, in one bulk insert (on
    SQLite, under the write lock: see :func:`dse.storage.bulk.insert_new_rows`, which does
    ``meanwhile`` while the server stores them)."""
    if not keys:
        return []
    unique: dict[str, Mapping[str, Any]] = {}
    for key, values in zip(keys, params, strict=True):
        unique.setdefault(key, values)  # the first occurrence's document, as before
    found = {key: cid for (key,), cid in insert_new_rows(
        s.connection(), m.ConfigRow.__table__,
        {"key": list(unique), "params": list(unique.values())}, {"space": space},
        conflict=["key"], key=["key"], meanwhile=meanwhile).items()}
    found.update(pairs_in(s.connection(), m.ConfigRow.__table__, "key", "id", {},
                          [k for k in unique if k not in found]))
    return [found[k] for k in keys]


# -- evaluations ------------------------------------------------------------------------------
def evaluation_identity(target_id: int, workload_id: int, evaluator: str,
                        version: str) -> list[Any]:
    """Conditions selecting one evaluator version's results on one target and workload."""
    e = m.EvaluationRow
    return [e.target_id == target_id, e.workload_id == workload_id, e.evaluator == evaluator,
            e.version == version]


def find_evaluations(s: Session, target_id: int, workload_id: int, config_ids: Sequence[int],
                     evaluator: str, version: str) -> dict[int, m.EvaluationRow]:
    """Stored evaluations of these configs by this evaluator version, by config id."""
    found: dict[int, m.EvaluationRow] = {}
    unique = list(dict.fromkeys(config_ids))
    for start in range(0, len(unique), CHUNK):
        rows = s.scalars(select(m.EvaluationRow).where(
            *evaluation_identity(target_id, workload_id, evaluator, version),
            m.EvaluationRow.config_id.in_(unique[start:start + CHUNK])))
        found.update({row.config_id: row for row in rows})
    return found


def evaluated_keys(s: Session, target_id: int, workload_id: int, evaluator: str,
                   version: str) -> set[str]:
    """Config keys with a stored evaluation by this evaluator version."""
    return set(s.scalars(select(m.ConfigRow.key).join(
        m.EvaluationRow, m.EvaluationRow.config_id == m.ConfigRow.id).where(
        *evaluation_identity(target_id, workload_id, evaluator, version))))


def put_evaluations(s: Session, rows: list[dict[str, Any]]) -> None:
    """Insert evaluations; one already stored under the same identity is kept as is."""
    if not rows:
        return
    insert = _insert(s)
    for start in range(0, len(rows), CHUNK):
        s.execute(insert(m.EvaluationRow.__table__).on_conflict_do_nothing(
            index_elements=["target_id", "workload_id", "config_id", "evaluator", "version"]),
            rows[start:start + CHUNK])


# -- studies and trials -----------------------------------------------------------------------
def study(s: Session, name: str) -> m.StudyRow | None:
    """The study's row, None if no study has that name."""
    return s.scalar(select(m.StudyRow).where(m.StudyRow.name == name))


def require_study(s: Session, name: str, where: Callable[[], str]) -> m.StudyRow:
    """The study's row.

    Raises:
        UsageError: no study has that name in the database, named by ``where()`` (as a person
            reads its URL: only worked out for the error, since each transaction of a run
            asks for its study); the error names the studies there.
    """
    row = study(s, name)
    if row is None:
        names = s.scalars(select(m.StudyRow.name).order_by(m.StudyRow.name)).all()
        raise UsageError(f"no study {name!r} in {where()}{did_you_mean(name, names)}; "
                         f"studies there: {', '.join(names) or 'none'}")
    return row


def create_study(s: Session, name: str, spec: dict[str, Any], target_id: int) -> m.StudyRow:
    """A new study's row, flushed (its id known)."""
    row = m.StudyRow(name=name, spec=spec, target_id=target_id, status="created",
                     created_at=now(), updated_at=now())
    s.add(row)
    s.flush()
    return row


def acquire(study: m.StudyRow, owner: str, seconds: float) -> None:
    """Take (or renew) the right to run ``study``; refuses while another live runner has it."""
    current = now()
    if study.owner not in (None, owner) and study.lease_until and study.lease_until > current:
        raise UsageError(f"study {study.name!r} is being run by {study.owner} (lease until "
                         f"{study.lease_until:%H:%M:%S}); wait for it or stop it first")
    study.owner, study.lease_until = owner, current + timedelta(seconds=seconds)
    study.status, study.updated_at = "running", current


def trial_count(s: Session, study_id: int, workload_id: int | None = None) -> int:
    """How many trials the study has (of one workload, given its id)."""
    query = select(func.count()).select_from(m.TrialRow).where(m.TrialRow.study_id == study_id)
    if workload_id is not None:
        query = query.where(m.TrialRow.workload_id == workload_id)
    return int(s.scalar(query) or 0)


def next_trial_number(s: Session, study_id: int) -> int:
    """The number the study's next trial takes."""
    last = s.scalar(select(func.max(m.TrialRow.number)).where(m.TrialRow.study_id == study_id))
    return 0 if last is None else int(last) + 1


def trialled_keys(s: Session, study_id: int, workload_id: int, evaluator: str,
                  version: str | None = None) -> set[str]:
    """Config keys this study already has a trial for, by this evaluator (of this version,
    when given)."""
    e = m.EvaluationRow
    of_version = [] if version is None else [e.version == version]
    return set(s.scalars(
        select(m.ConfigRow.key).join(m.TrialRow, m.TrialRow.config_id == m.ConfigRow.id)
        .join(e, e.id == m.TrialRow.evaluation_id)
        .where(m.TrialRow.study_id == study_id, m.TrialRow.workload_id == workload_id,
               e.evaluator == evaluator, *of_version)))


def add_trials(s: Session, rows: list[dict[str, Any]]) -> None:
    """Insert trials' rows as they are."""
    if rows:
        s.execute(m.TrialRow.__table__.insert(), rows)


def journal_lines(s: Session, study_id: int) -> list[dict[str, Any]]:
    """The study's committed Optuna journal lines, in order."""
    return list(s.scalars(select(m.JournalRow.log).where(m.JournalRow.study_id == study_id)
                          .order_by(m.JournalRow.seq)))
