"""The results store: one SQLAlchemy engine, one session context manager for all transactions,
and the only code of dse that speaks SQL (with :mod:`.reads`, :mod:`.runs` and the modules they
use).

Other modules call the store's methods that take no session: each is one transaction. The
methods that take a session ``s`` are the building blocks those use.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Table, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    DatabaseError,
    DBAPIError,
    IntegrityError,
    OperationalError,
    ProgrammingError,
)
from sqlalchemy.orm import Session

from dse.core.errors import DseError, InfrastructureError, UsageError
from dse.core.suggest import did_you_mean
from dse.storage import models as m
from dse.storage.bulk import insert_new_rows, pairs_in
from dse.storage.engine import (
    damaged,
    make_engine,
    normalise_url,
    require_existing,
    sqlite_uri,
)
from dse.storage.foreign import refuse_foreign_sqlite
from dse.storage.hints import missing_database_hint, shown_storage
from dse.storage.keys import canonical_key, config_key, now
from dse.storage.reads import StudyReads
from dse.storage.runs import RunWrites


class StorageError(DseError):
    """The database cannot be used (unreachable, locked, written by a newer dse)."""


class DiskFullError(StorageError, InfrastructureError):
    """The database's disk is full: the transaction was rolled back, everything committed
    before it is kept (CLI exit status 1: not the input's fault)."""


def disk_full(problem: BaseException | None) -> bool:
    """Whether a driver's error says the database's disk is full (SQLite's SQLITE_FULL,
    PostgreSQL's disk_full, SQLSTATE 53100)."""
    return getattr(problem, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL \
        or getattr(problem, "sqlstate", None) == "53100"


class ResultStore(StudyReads, RunWrites):
    """Targets, workloads, configs, evaluations, studies and trials in one SQL database.

    Args:
        storage: a SQLAlchemy URL (``postgresql://user@host/db``) or a SQLite file path;
            default ``./dse.db``.
        existing: refuse (:class:`UsageError`) a SQLite file that does not exist or a database
            without dse's tables, instead of creating them.
        read_only: only read (implies ``existing``): nothing is written, not even SQLite's
            journal mode or a schema migration, so results someone else produced can be read
            from a file or folder this user cannot write.

    A store opened for writing is checked first (SQLite's ``PRAGMA quick_check``; on
    PostgreSQL, reading the schema version is the sanity read): a damaged file is refused
    before anything is written into it.

    Raises:
        StorageError: the database cannot be reached, is damaged or was written by a newer
            schema.
    """

    def __init__(self, storage: str | None = None, existing: bool = False,
                 read_only: bool = False) -> None:
        if existing or read_only:  # a command that only reads creates no database by mistake
            require_existing(storage)
        self.url = normalise_url(storage)
        self.read_only = read_only
        parsed = make_url(self.url)
        if not read_only and parsed.get_backend_name() == "sqlite" and parsed.database \
                and parsed.database != ":memory:" and not sqlite_uri(parsed):
            refuse_foreign_sqlite(parsed.database)  # before its first connection writes
        try:
            self.engine = make_engine(self.url, read_only=read_only)
            if read_only:
                self._check_version()
            else:
                self._check_integrity()
                self._migrate()
        except (OperationalError, DBAPIError) as exc:
            if disk_full(exc.orig):
                raise DiskFullError(f"the disk of {self.safe_url} is full ({exc.orig}): no "
                                    "study was written into it; free some space and run the "
                                    "command again") from None
            raise StorageError(f"cannot use storage {self.safe_url}: {exc.orig}"
                               f"{missing_database_hint(make_url(self.url), str(exc.orig))}"
                               ) from None
        except (OSError, ValueError) as exc:  # a path the file system refuses, a bad option
            raise StorageError(f"cannot use storage {self.url[:200]!r}: {exc}") from None

    @property
    def safe_url(self) -> str:
        """Where the results are, as a person reads it: see :func:`shown_storage`."""
        return shown_storage(self.url)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction: committed on success, rolled back on any exception."""
        try:
            with Session(self.engine, expire_on_commit=False) as session, session.begin():
                yield session
        except OperationalError as exc:
            if "locked" in str(exc.orig):
                raise StorageError(
                    f"{self.safe_url} stayed locked by another writer for 60 s; SQLite allows "
                    "one writer at a time: run one study per process, or use PostgreSQL for "
                    "many concurrent writers") from None
            if disk_full(exc.orig):
                raise DiskFullError(f"the disk of {self.safe_url} is full ({exc.orig}): the "
                                    "last transaction was rolled back, everything committed "
                                    "before it is kept") from None
            raise
        except DatabaseError as exc:
            if type(exc.orig) is sqlite3.DatabaseError:  # "malformed", "not a database"
                raise StorageError(damaged(self.safe_url, str(exc.orig))) from None
            raise

    # -- schema -------------------------------------------------------------------------------
    def _create_schema(self) -> None:
        """Create the tables once, even when several processes open a new database at once.

        Done when the schema-version row exists; SQLite commits DDL on its own, so tables can
        appear before that row does: creating is idempotent and simply repeated until it is.
        """
        # SQLite answers a read upgraded to a write "locked" at once (no busy wait): a process
        # that lost that race tries again for as long as a writer would wait for a lock
        deadline = time.monotonic() + 60.0
        attempt = 0
        while True:
            attempt += 1
            try:
                with self.session() as s:
                    if s.scalar(select(m.Meta.value).where(m.Meta.key == "schema_version")):
                        return
            except (OperationalError, ProgrammingError, StorageError):
                pass  # no tables yet, or another process is creating them
            try:
                with self.engine.begin() as conn:
                    if self.dialect == "postgresql":  # DDL is transactional: serialise it
                        conn.execute(text("SELECT pg_advisory_xact_lock(74260001)"))
                    m.Base.metadata.create_all(conn, checkfirst=True)
                    insert = pg_insert if self.dialect == "postgresql" else sqlite_insert
                    conn.execute(insert(m.Meta.__table__).on_conflict_do_nothing(
                        index_elements=["key"]),
                        [{"key": "schema_version", "value": str(m.SCHEMA_VERSION)}])
            except (IntegrityError, OperationalError, ProgrammingError) as exc:
                locked = "locked" in str(exc.orig)
                if time.monotonic() > deadline if locked else attempt >= 10:
                    raise  # held too long, or another process kept creating the tables
                time.sleep(min(0.1 * attempt, 1.0))

    def _check_integrity(self) -> None:
        """Refuse a SQLite file whose pages are damaged (about 1 s per 200 MB), before anything
        is written into it."""
        if self.dialect != "sqlite":
            return
        try:
            with self.engine.connect() as conn:
                problems = [row[0] for row in conn.exec_driver_sql("PRAGMA quick_check")]
        except DatabaseError as exc:  # a header so damaged SQLite cannot read the schema
            if type(exc.orig) is not sqlite3.DatabaseError:
                raise
            problems = [str(exc.orig)]
        if problems != ["ok"]:
            raise StorageError(damaged(self.safe_url, "; ".join(problems[:3])))

    def _check_version(self) -> int:
        """The database's schema version; a newer one than this dse knows is refused."""
        with self.session() as s:
            version = int(s.scalar(select(m.Meta.value).where(m.Meta.key == "schema_version")))
        if version > m.SCHEMA_VERSION:
            raise StorageError(f"{self.safe_url} has schema version {version}; this dse knows "
                               f"up to {m.SCHEMA_VERSION}: upgrade dse to use it")
        return version

    def _migrate(self) -> None:
        with self.engine.connect():  # an unreachable database fails here, at once
            pass
        self._create_schema()
        version = self._check_version()
        for target_version in range(version + 1, m.SCHEMA_VERSION + 1):
            MIGRATIONS[target_version](self)
            with self.session() as s:
                s.execute(update(m.Meta).where(m.Meta.key == "schema_version")
                          .values(value=str(target_version)))

    def schema_version(self) -> int:
        with self.session() as s:
            return int(s.scalar(select(m.Meta.value).where(m.Meta.key == "schema_version")))

    # -- rows identified by content -----------------------------------------------------------
    def _insert_ignore(self, s: Session, table: Table, rows: list[dict[str, Any]],
                       key: str) -> None:
        if not rows:
            return
        insert = pg_insert if self.dialect == "postgresql" else sqlite_insert
        for start in range(0, len(rows), 500):
            s.execute(insert(table).on_conflict_do_nothing(index_elements=[key]),
                      rows[start:start + 500])

    def _ids_by_key(self, s: Session, model: Any, rows: list[dict[str, Any]]) -> list[int]:
        self._insert_ignore(s, model.__table__, rows, "key" if "key" in rows[0] else "digest")
        column = model.key if "key" in rows[0] else model.digest
        wanted = [r["key"] if "key" in rows[0] else r["digest"] for r in rows]
        found: dict[str, int] = {}
        unique = list(dict.fromkeys(wanted))
        for start in range(0, len(unique), 500):
            chunk = unique[start:start + 500]
            found.update(dict(s.execute(select(column, model.id).where(column.in_(chunk))).all()))
        return [found[k] for k in wanted]

    def target_id(self, s: Session, digest: str, name: str, body: Mapping[str, Any]) -> int:
        return self._ids_by_key(s, m.TargetRow, [{"digest": digest, "name": name,
                                                   "body": dict(body)}])[0]

    def workload_id(self, s: Session, body: Mapping[str, Any]) -> int:
        return self._ids_by_key(s, m.WorkloadRow, [{"key": canonical_key(body),
                                                     "body": dict(body)}])[0]

    def config_ids(self, s: Session, space: str, params: Sequence[Mapping[str, Any]]) -> list[int]:
        if not params:
            return []
        rows = [{"key": config_key(space, p), "space": space, "params": dict(p)} for p in params]
        return self._ids_by_key(s, m.ConfigRow, rows)

    def keyed_config_ids(self, s: Session, space: str, keys: Sequence[str],
                         params: Sequence[Mapping[str, Any]],
                         meanwhile: Callable[[], Any] | None = None) -> list[int]:
        """Like :meth:`config_ids`, for configs whose keys the caller has (``keys[i]`` is
        ``config_key(space, params[i])``): each new config inserted once, in one bulk insert
        (on SQLite, under the write lock: see :func:`dse.storage.bulk.insert_new_rows`, which
        does ``meanwhile`` while the server stores them)."""
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

    # -- evaluations --------------------------------------------------------------------------
    @staticmethod
    def _identity(target_id: int, workload_id: int, evaluator: str, version: str) -> list[Any]:
        """Conditions selecting one evaluator version's results on one target and workload."""
        e = m.EvaluationRow
        return [e.target_id == target_id, e.workload_id == workload_id,
                e.evaluator == evaluator, e.version == version]

    def find_evaluations(self, s: Session, target_id: int, workload_id: int,
                         config_ids: Sequence[int], evaluator: str, version: str,
                         ) -> dict[int, m.EvaluationRow]:
        """Stored evaluations of these configs by this evaluator version, by config id."""
        found: dict[int, m.EvaluationRow] = {}
        unique = list(dict.fromkeys(config_ids))
        for start in range(0, len(unique), 500):
            rows = s.scalars(select(m.EvaluationRow).where(
                *self._identity(target_id, workload_id, evaluator, version),
                m.EvaluationRow.config_id.in_(unique[start:start + 500])))
            found.update({row.config_id: row for row in rows})
        return found

    def evaluation_ids(self, s: Session, target_id: int, workload_id: int,
                       config_ids: Sequence[int], evaluator: str, version: str) -> dict[int, int]:
        """The ids of these configs' stored evaluations by this evaluator version, by config
        id (no row loaded: a window of thousands of trials needs only their ids)."""
        found: dict[int, int] = {}
        unique = list(dict.fromkeys(config_ids))
        e = m.EvaluationRow
        for start in range(0, len(unique), 500):
            found.update(s.execute(select(e.config_id, e.id).where(
                *self._identity(target_id, workload_id, evaluator, version),
                e.config_id.in_(unique[start:start + 500]))).all())
        return found

    def evaluated_keys(self, s: Session, target_id: int, workload_id: int, evaluator: str,
                       version: str) -> set[str]:
        """Config keys with a stored evaluation by this evaluator version."""
        return set(s.scalars(select(m.ConfigRow.key).join(
            m.EvaluationRow, m.EvaluationRow.config_id == m.ConfigRow.id).where(
            *self._identity(target_id, workload_id, evaluator, version))))

    def put_evaluations(self, s: Session, rows: list[dict[str, Any]]) -> None:
        """Insert evaluations; one already stored under the same identity is kept as is."""
        if not rows:
            return
        insert = pg_insert if self.dialect == "postgresql" else sqlite_insert
        for start in range(0, len(rows), 500):
            s.execute(insert(m.EvaluationRow.__table__).on_conflict_do_nothing(
                index_elements=["target_id", "workload_id", "config_id", "evaluator", "version"]),
                rows[start:start + 500])

    # -- studies and trials -------------------------------------------------------------------
    def study(self, s: Session, name: str) -> m.StudyRow | None:
        return s.scalar(select(m.StudyRow).where(m.StudyRow.name == name))

    def require_study(self, s: Session, name: str) -> m.StudyRow:
        row = self.study(s, name)
        if row is None:
            names = s.scalars(select(m.StudyRow.name).order_by(m.StudyRow.name)).all()
            raise UsageError(f"no study {name!r} in {self.safe_url}{did_you_mean(name, names)}; "
                             f"studies there: {', '.join(names) or 'none'}")
        return row

    def create_study(self, s: Session, name: str, spec: dict[str, Any], target_id: int,
                     ) -> m.StudyRow:
        row = m.StudyRow(name=name, spec=spec, target_id=target_id, status="created",
                         created_at=now(), updated_at=now())
        s.add(row)
        s.flush()
        return row

    def acquire(self, s: Session, study: m.StudyRow, owner: str, seconds: float) -> None:
        """Take (or renew) the right to run ``study``; refuses while another live runner has it."""
        current = now()
        if study.owner not in (None, owner) and study.lease_until and study.lease_until > current:
            raise UsageError(f"study {study.name!r} is being run by {study.owner} (lease until "
                             f"{study.lease_until:%H:%M:%S}); wait for it or stop it first")
        study.owner, study.lease_until = owner, current + timedelta(seconds=seconds)
        study.status, study.updated_at = "running", current

    def release(self, study_name: str, owner: str, status: str,
                unchanged_since: datetime | None = None) -> None:
        """End ``owner``'s run of the study with ``status``; a study another runner has taken
        over since (this one's lease lapsed) keeps that runner's lease and status. A run that
        changed nothing gives ``unchanged_since``, the study's last update before it, which the
        study keeps."""
        with self.session() as s:
            study = self.require_study(s, study_name)
            if study.owner != owner:
                return
            study.owner, study.lease_until = None, None
            study.status, study.updated_at = status, unchanged_since or now()

    def trial_count(self, s: Session, study_id: int, workload_id: int | None = None) -> int:
        query = select(func.count()).select_from(m.TrialRow).where(m.TrialRow.study_id == study_id)
        if workload_id is not None:
            query = query.where(m.TrialRow.workload_id == workload_id)
        return int(s.scalar(query) or 0)

    def next_trial_number(self, s: Session, study_id: int) -> int:
        last = s.scalar(select(func.max(m.TrialRow.number)).where(m.TrialRow.study_id == study_id))
        return 0 if last is None else int(last) + 1

    def trialled_keys(self, s: Session, study_id: int, workload_id: int,
                      evaluator: str) -> set[str]:
        """Config keys this study already has a trial for, by this evaluator."""
        return set(s.scalars(
            select(m.ConfigRow.key).join(m.TrialRow, m.TrialRow.config_id == m.ConfigRow.id)
            .join(m.EvaluationRow, m.EvaluationRow.id == m.TrialRow.evaluation_id)
            .where(m.TrialRow.study_id == study_id, m.TrialRow.workload_id == workload_id,
                   m.EvaluationRow.evaluator == evaluator)))

    def add_trials(self, s: Session, rows: list[dict[str, Any]]) -> None:
        if rows:
            s.execute(m.TrialRow.__table__.insert(), rows)


def _add_fidelity_table(store: ResultStore) -> None:
    m.FidelityRow.__table__.create(store.engine, checkfirst=True)


def _add_faults_table(store: ResultStore) -> None:
    m.FaultRow.__table__.create(store.engine, checkfirst=True)


def _unchecked_bulk_tables(store: ResultStore) -> None:
    """Schema version 4: the evaluations' and trials' secondary indexes (prefixes of their
    identities) dropped, and on PostgreSQL their foreign-key constraints (see
    :mod:`dse.storage.models`). SQLite cannot drop a constraint without copying the table: an
    older file keeps checking those references, which costs it little."""
    with store.engine.begin() as conn:
        for index in ("ix_dse_evaluations_target_id", "ix_dse_evaluations_workload_id",
                      "ix_dse_trials_study_id"):
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {index}")
        if store.dialect != "postgresql":
            return
        for table in ("dse_evaluations", "dse_trials"):
            names = conn.exec_driver_sql(
                "SELECT conname FROM pg_constraint WHERE contype = 'f' AND conrelid = "
                f"'{table}'::regclass").scalars().all()
            for name in names:
                conn.exec_driver_sql(f'ALTER TABLE {table} DROP CONSTRAINT IF EXISTS "{name}"')


def _add_frame_snapshots_table(store: ResultStore) -> None:
    m.FrameSnapshotRow.__table__.create(store.engine, checkfirst=True)


# Migration to schema version N, applied in order to databases written by an older dse.
MIGRATIONS: dict[int, Any] = {2: _add_fidelity_table, 3: _add_faults_table,
                              4: _unchecked_bulk_tables, 5: _add_frame_snapshots_table}


def open_store(storage: ResultStore | str | None, existing: bool = False,
               read_only: bool = False) -> ResultStore:
    """``storage`` as a store: a store as it is, a URL or SQLite path opened (``existing``: a
    database that does not exist or holds no dse tables is refused, not created;
    ``read_only``: see :class:`ResultStore`)."""
    return storage if isinstance(storage, ResultStore) else ResultStore(storage, existing,
                                                                        read_only)

