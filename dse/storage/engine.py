"""Storage URLs and engines: SQLite file by default, PostgreSQL (or any SQLAlchemy URL) by URL."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import ConnectionPoolEntry

from dse.errors import UsageError

DEFAULT_STORAGE = "dse.db"


def normalise_url(storage: str | None) -> str:
    """A SQLAlchemy URL for ``storage``: a URL as is, anything else as a SQLite file path."""
    storage = storage or DEFAULT_STORAGE
    if "://" not in storage:
        return f"sqlite:///{Path(storage).expanduser()}"
    if storage.startswith("postgresql://"):  # use the psycopg 3 driver dse installs
        storage = "postgresql+psycopg://" + storage[len("postgresql://"):]
    try:
        make_url(storage)
    except ArgumentError as exc:
        raise UsageError(f"storage URL {storage!r} is not valid: {exc}") from None
    return storage


def make_engine(url: str) -> Engine:
    """An engine with the settings each backend needs for several writers."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 60})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
            # WAL lets readers run beside a writer; writers wait (timeout) instead of failing.
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True)
