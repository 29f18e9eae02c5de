"""Storage URLs and engines: SQLite file by default, PostgreSQL (or any SQLAlchemy URL) by URL."""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import operator
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry, QueuePool

from dse.core import limits
from dse.core.commands import DEFAULT_STORAGE
from dse.core.errors import UsageError
from dse.storage.hints import missing_database_hint, shown_storage
from dse.storage.wal import pending_wal, readable_copy


def normalise_url(storage: str | None) -> str:
    """A SQLAlchemy URL for ``storage``: a URL as is, anything else as a SQLite file path."""
    storage = DEFAULT_STORAGE if storage is None else storage
    if not storage.strip():
        raise UsageError("storage is empty: give a SQLite file path or a database URL")
    problem = limits.text_problem(storage, "a storage path or URL", limits.STORAGE_CHARS)
    if problem:
        raise UsageError(f"storage {limits.shown(storage)}: {problem}")
    if "://" not in storage:  # a path, quoted: a '?' or '#' in it is part of the file's name
        return URL.create("sqlite", database=str(Path(storage).expanduser())).render_as_string(
            hide_password=False)
    if storage.startswith(("postgresql://", "postgres://")):  # the psycopg 3 driver dse
        # installs; ``postgres://`` is the scheme libpq and hosting services write too
        storage = "postgresql+psycopg://" + storage.split("://", 1)[1]
    try:
        make_url(storage)
    except ArgumentError as exc:
        raise UsageError(f"storage URL {storage[:200]!r} is not valid: {exc}") from None
    except ValueError:  # SQLAlchemy reads the port with int()
        raise UsageError(f"storage URL {storage[:200]!r} is not valid: its port is not a "
                         "number (postgresql://USER@HOST:PORT/DATABASE)") from None
    return storage


CACHE_KIB = -65_536  # SQLite's page cache a connection, in KiB when negative
PAGE_BYTES = 16_384  # SQLite's page size for a new file


def make_engine(url: str, read_only: bool = False) -> Engine:
    """An engine with the settings each backend needs for several writers, or one that only
    reads (``read_only``: it writes nothing, not even SQLite's journal mode, so a database
    someone else wrote, in a folder this user cannot write, can still be read); a URL whose
    driver is not installed is a :class:`UsageError`."""
    parsed = make_url(url)
    if read_only and parsed.drivername.startswith("sqlite") and parsed.database \
            and parsed.database != ":memory:":
        if sqlite_uri(parsed):  # read-only whatever mode it names: a read creates no file
            return _engine(parsed.update_query_dict({"mode": "ro"}), poolclass=QueuePool)
        # the file, read-only, with the driver options of the URL's query (checked)
        options = {"timeout": 60, **sqlite_options(parsed), "check_same_thread": False}
        uri = read_only_uri(parsed.database)
        # a pool of connections, each used by one thread at a time: for ``sqlite://`` with a
        # creator SQLAlchemy would pick SingletonThreadPool (meant for a memory database),
        # which closes the connections of other threads once more than five threads have
        # used it, while they still read (the dashboard serves each request in a thread of
        # its own: 500s, then a segmentation fault)
        return _engine("sqlite://", poolclass=QueuePool, pool_size=8, max_overflow=24,
                       creator=lambda: sqlite3.connect(uri, uri=True, **options))
    if read_only and parsed.get_backend_name() == "postgresql":
        engine = _engine(url, pool_pre_ping=True)

        @event.listens_for(engine, "connect")
        def _read_only(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
            dbapi_connection.read_only = True  # every transaction: PostgreSQL refuses writes

        return engine
    if url.startswith("sqlite"):
        sqlite_options(parsed)  # an option the driver would ignore, or cannot read, is refused
        engine = _engine(url, connect_args={"timeout": 60})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
            # WAL lets readers run beside a writer; writers wait (timeout) instead of failing.
            cursor = dbapi_connection.cursor()
            # pages of 16 KiB rather than 4 for a new file (an existing one keeps its own): a
            # study appends rows by the ten thousand, and bigger pages split, and are logged,
            # a quarter as often (an exhaustive study's store took about 0.8 of the time)
            cursor.execute(f"PRAGMA page_size={PAGE_BYTES}")
            _journal_mode_wal(cursor)
            cursor.execute("PRAGMA synchronous=NORMAL")
            # copy the WAL into the database every 64 MiB rather than 4 MiB: a study's commit
            # rewrites the same index pages, and each checkpoint waits for the disk; an
            # exhaustive study's commits took half the time (2.4 s to 1.2 s of 139,279 trials)
            cursor.execute("PRAGMA wal_autocheckpoint=16384")
            # a page cache of 64 MiB rather than 2: a window's inserts land all over the
            # unique indexes (config keys are hashes), which no longer fit in 2 MiB once a
            # study has some 50,000 configs, and every page missed is read again
            cursor.execute(f"PRAGMA cache_size={CACHE_KIB}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return _engine(url, pool_pre_ping=True)


SQLITE_OPTIONS = ("timeout", "detect_types", "check_same_thread", "cached_statements",
                  "isolation_level", "uri")  # what SQLAlchemy's pysqlite dialect reads


def sqlite_options(url: URL) -> dict[str, Any]:
    """The driver options of a SQLite file URL's query (``?timeout=5``), as the driver takes
    them; an option it does not take (``mode=ro`` without ``uri=true``, which SQLAlchemy only
    warns about and ignores) or a value it cannot read is a :class:`UsageError`."""
    if not url.query or sqlite_uri(url) or url.drivername not in ("sqlite", "sqlite+pysqlite"):
        return {}
    shown = limits.shown(url.render_as_string(hide_password=False))
    unknown = sorted(set(url.query) - set(SQLITE_OPTIONS))
    if unknown:
        raise UsageError(f"storage URL {shown}: SQLite takes no option {', '.join(unknown)} "
                         f"(its options: {', '.join(SQLITE_OPTIONS[:-1])}; those of a SQLite "
                         "URI, such as mode=ro, need uri=true: sqlite:///file:NAME?mode=ro&"
                         "uri=true)")
    try:
        return SQLiteDialect_pysqlite().create_connect_args(url)[1]
    except ValueError as exc:  # e.g. timeout=abc
        raise UsageError(f"storage URL {shown}: {exc}") from None


def sqlite_uri(url: URL) -> bool:
    """Whether ``url`` names a SQLite URI (``sqlite:///file:NAME?mode=ro&uri=true``), which
    SQLite opens as it says, rather than a file path."""
    return str(url.query.get("uri", "")).lower() in ("true", "1", "yes", "on")


def read_only_uri(path: str) -> str:
    """The SQLite URI that reads ``path`` without writing: ``mode=ro``, or, where that cannot
    open it (a WAL database whose shared-memory file this user cannot create, in a folder
    they cannot write), ``immutable=1``, which reads the file as it is on disk, or, when its
    ``-wal`` file holds commits that reading the file alone would miss, a private copy of
    both (see :mod:`dse.storage.wal`)."""
    resolved = Path(path).expanduser().resolve()
    location = quote(str(resolved))
    uri = f"file:{location}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as probe:
            probe.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.OperationalError as exc:
        if "readonly" not in str(exc) and "unable to open" not in str(exc):
            raise
        wal = pending_wal(resolved)
        if wal is None:
            uri = f"file:{location}?immutable=1"
        else:
            uri = f"file:{quote(str(readable_copy(resolved, wal)))}?mode=ro"
    except sqlite3.DatabaseError as exc:  # "malformed", "not a database"
        raise UsageError(damaged(path, str(exc))) from None
    return uri


def damaged(where: str, problem: str) -> str:
    """What to tell a user whose SQLite file is damaged."""
    return (f"{where} is damaged ({problem[:300]}): dse writes nothing into it. Keep a copy, "
            "then salvage what is readable with `sqlite3 FILE .recover | sqlite3 NEW.db`, or "
            "use another file")


def json_loads(text: str | bytes) -> Any:
    """A stored JSON document decoded by orjson (a study's frame decodes two per trial, and
    orjson takes a quarter of the standard library's time); a document orjson refuses, such as
    one with the ``NaN`` the standard library writes, by the standard library."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


# orjson handles these types differently from the standard library (datetimes and dataclasses
# as strings and objects, subclasses of str/int/dict/list by their base), where the standard
# library raises or, for subclasses, keeps their own formatting: pass them to the fallback.
_STRICT = (orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
           | orjson.OPT_PASSTHROUGH_SUBCLASS)
_strict_dumps = functools.partial(orjson.dumps, option=_STRICT)


def json_dumps(value: Any) -> str:
    """``json.dumps(value)`` as the store has always written it, at orjson's speed.

    orjson writes NaN and infinities as ``null`` (strict JSON), where the standard library writes
    ``NaN`` and ``Infinity`` and :func:`json_loads` reads them back: any document whose orjson
    text holds a ``null`` (a NaN, an infinity, a ``None``, or merely the word in a string) is
    written by the standard library instead, as is one orjson refuses (an integer past 64 bits,
    a key that is not a string, a type it would serialise differently). Only the spacing and
    the digits of a float's shortest form may differ from the standard library's text: the
    decoded document is the same."""
    try:
        text = _strict_dumps(value)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value)
    if b"null" in text:
        return json.dumps(value)
    return text.decode()


def json_texts(values: Sequence[Any]) -> list[str]:
    """:func:`json_dumps` of each value, for a column of thousands of documents: orjson encodes
    them all and the texts are checked and decoded without a Python call each. Where orjson
    refuses a value, each goes through :func:`json_dumps`; where a text holds a ``null``, that
    one does."""
    try:
        encoded = list(map(_strict_dumps, values))
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return [json_dumps(value) for value in values]
    if any(map(operator.contains, encoded, itertools.repeat(b"null"))):
        return [json_dumps(value) if b"null" in text else text.decode()
                for value, text in zip(values, encoded, strict=True)]
    return list(map(bytes.decode, encoded))


def _journal_mode_wal(cursor: Any, wait_s: float = 60.0) -> None:
    """Switch a new SQLite file to WAL. Switching needs the file to itself, and SQLite answers
    "locked" at once, without its busy wait, while another process is creating the same new
    file: try again for as long as a writer would wait for a lock."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _engine(url: str | URL, **options: Any) -> Engine:
    """``create_engine``; a URL whose driver is not installed is a :class:`UsageError`."""
    try:
        return create_engine(url, json_deserializer=json_loads, **options)
    except (ImportError, NoSuchModuleError) as exc:
        parsed = make_url(url)
        raise UsageError(f"storage URL {parsed.render_as_string()!r}: no driver for "
                         f"{parsed.drivername!r} here ({exc}); dse installs those of SQLite and "
                         "PostgreSQL") from None
    except ValueError as exc:  # an option of the URL's query the driver cannot read
        raise UsageError(f"storage URL {limits.shown(str(url))}: {exc}") from None


def require_existing(storage: str | None) -> None:
    """Refuse a SQLite path that does not exist, or a database without dse's tables: for a
    command that only reads, that is a mistyped name, not a database to create tables in."""
    url = make_url(normalise_url(storage))
    if url.drivername.startswith("sqlite") and url.database and not sqlite_uri(url):
        path = Path(url.database)
        try:
            exists, folder = path.exists(), path.is_dir()
        except OSError as exc:  # a name longer than the file system takes
            raise UsageError(f"--storage {limits.cut(url.database)}: "
                             f"{exc.strerror or exc}") from None
        if folder:
            raise UsageError(f"--storage: {url.database} is a folder, not a database file")
        if not exists:
            uri_hint = ("; a SQLite URI is given as sqlite:///file:NAME?mode=ro&uri=true"
                        if url.database.startswith("file:") else "")
            raise UsageError(f"--storage: no database at {limits.cut(url.database)} (run a "
                             "study first, or name the file or URL that holds your "
                             f"studies{uri_hint})")
    engine = make_engine(url.render_as_string(hide_password=False), read_only=True)
    try:
        tables = inspect(engine).get_table_names()
    except (SQLAlchemyError, ValueError, OSError) as exc:  # ValueError: a URL option's value
        raise UsageError(f"--storage: cannot read {limits.shown(shown_storage(url))}: "
                         f"{str(exc).splitlines()[0][:300]}"
                         f"{missing_database_hint(url, str(exc))}") from None
    finally:
        engine.dispose()
    if "dse_meta" not in tables:
        raise UsageError(f"--storage: {shown_storage(url)} holds no dse results (no "
                         "dse_meta table)")


SQLITE_HEADER = b"SQLite format 3\x00"


def refuse_database_as_out(out: str | None, storage: str | None) -> None:
    """Refuse an ``--out`` that would overwrite the results database (or its WAL files) or any
    other SQLite database: writing a report over it would lose every study it holds."""
    if not out:
        return
    path = Path(out).expanduser()
    try:
        url = make_url(normalise_url(storage))
    except UsageError:
        url = None
    if url is not None and url.drivername.startswith("sqlite") and url.database:
        database = Path(url.database).expanduser().resolve()
        if path.resolve() in {database, database.with_name(database.name + "-wal"),
                              database.with_name(database.name + "-shm")}:
            raise UsageError(f"--out {out} is the results database: give another file")
    if path.is_file():
        with path.open("rb") as handle:
            if handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER:
                raise UsageError(f"--out {out} is a SQLite database: give another file")
