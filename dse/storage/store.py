"""The results store: one SQLAlchemy engine, one session context manager for all transactions,
and the only code of dse that speaks SQL (with :mod:`.reads`, :mod:`.runs` and the modules they
use).

Code outside :mod:`dse.storage` calls the store's public face
(:class:`dse.storage.face.StoreFace`): each method is one transaction. The building blocks those
compose inside one transaction take its session and are private to the package
(:mod:`dse.storage.rows`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import select, text, update
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

from dse.core.errors import DseError, InfrastructureError
from dse.storage import models as m
from dse.storage.engine import (
    damaged,
    make_engine,
    normalise_url,
    require_existing,
    sqlite_uri,
)
from dse.storage.foreign import refuse_foreign_sqlite
from dse.storage.frames import FrameReader, study_frame
from dse.storage.hints import missing_database_hint, shown_storage
from dse.storage.reads import StudyReads
from dse.storage.runs import RunWrites, WindowWriter, write_window


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
        window_writer: how :meth:`commit_window` writes a window's configs, evaluations and
            trials (default: in bulk, :func:`dse.storage.runs.write_window`).
        frame_reader: how a study's frame is read (default: the frame kept when its last run
            ended, else its documents, :func:`dse.storage.frames.study_frame`).

    The last two let a benchmark or a test compare another implementation with dse's on the
    same database; dse itself always takes the defaults.

    A store opened for writing is checked first (SQLite's ``PRAGMA quick_check``; on
    PostgreSQL, reading the schema version is the sanity read): a damaged file is refused
    before anything is written into it.

    Raises:
        StorageError: the database cannot be reached, is damaged or was written by a newer
            schema.
    """

    def __init__(self, storage: str | None = None, existing: bool = False,
                 read_only: bool = False, *, window_writer: WindowWriter = write_window,
                 frame_reader: FrameReader = study_frame) -> None:
        self._window_writer = window_writer
        self._frame_reader = frame_reader
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

    def _where(self) -> str:
        """:attr:`safe_url`, for the building blocks' errors: worked out only when one is
        raised, not in every transaction that names a study."""
        return self.safe_url

    @property
    def dialect(self) -> str:
        """The database's SQLAlchemy dialect: ``sqlite`` or ``postgresql``."""
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
        """The database's schema version (:data:`dse.storage.models.SCHEMA_VERSION` once
        opened for writing)."""
        with self.session() as s:
            return int(s.scalar(select(m.Meta.value).where(m.Meta.key == "schema_version")))


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

