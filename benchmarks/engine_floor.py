"""The database engine's own time to store the rows of an exhaustive study: what dse's store is
measured against in ``store_speed.py``.

The rows the study stored (its configs, evaluations and trials, by id) are read back and written
again into a fresh database of the same schema, in windows of the study's trials, each window
committed, by the bare driver with no Python work per row: SQLite's ``executemany`` of the
tuples as read, PostgreSQL's ``COPY`` of the text its own ``COPY ... TO`` wrote (the server
checkpointed first, as before each of ``store_speed.py``'s timed runs). What that costs
is the engine's share (inserts, indexes, journal, disk); whatever dse's store spends beyond it is
its own.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing

import psycopg
from sqlalchemy.engine import make_url

from dse.storage import normalise_url
from dse.storage.engine import CACHE_KIB
from dse.storage.store import ResultStore
from dse.study.strategies.exhaustive import SLICE

SMALL = ("dse_targets", "dse_workloads", "dse_studies")  # copied once, not timed
BULK = ("dse_configs", "dse_evaluations", "dse_trials")  # a row each a trial of the study
WINDOW = SLICE  # trials a commit, as the exhaustive sampler commits a fast evaluator's


def engine_seconds(source: str, target: str) -> float:
    """Seconds the bare driver takes to store ``source``'s study rows into ``target`` (a fresh
    database of either backend, given as for ``store_speed.py``), a window at a time."""
    ResultStore(target)  # the schema, as dse creates it
    url = make_url(normalise_url(source))
    if url.get_backend_name() == "sqlite":
        return _sqlite(url.database, make_url(normalise_url(target)).database)
    return _postgresql(_libpq(source), _libpq(target))


def settle(storage: str) -> None:
    """Before a timed run on PostgreSQL: a checkpoint, so that the pages an earlier run left
    dirty (hundreds of MB) are not written out by the server while this one is timed. Where
    the user may not checkpoint, runs are timed as they come."""
    url = make_url(normalise_url(storage))
    if url.get_backend_name() != "postgresql":
        return
    try:
        with psycopg.connect(_libpq(storage), autocommit=True) as connection:
            connection.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        print("postgresql: not allowed to CHECKPOINT; runs timed without one before each")


def _libpq(storage: str) -> str:
    return make_url(normalise_url(storage)).set(drivername="postgresql").render_as_string(
        hide_password=False)


def _sqlite(source: str, target: str) -> float:
    with closing(sqlite3.connect(source)) as read, \
            closing(sqlite3.connect(target, isolation_level=None)) as write:
        write.execute("PRAGMA synchronous=NORMAL")
        write.execute("PRAGMA wal_autocheckpoint=16384")  # as dse's engine sets them
        write.execute(f"PRAGMA cache_size={CACHE_KIB}")
        for table in SMALL:
            rows = read.execute(f"SELECT * FROM {table}").fetchall()
            write.executemany(f"INSERT INTO {table} VALUES ({_marks(rows)})", rows)
        tables = {t: read.execute(f"SELECT * FROM {t} ORDER BY id").fetchall() for t in BULK}
        start = time.perf_counter()
        for first in range(0, len(tables["dse_trials"]), WINDOW):
            write.execute("BEGIN")
            for table, rows in tables.items():
                part = rows[first:first + WINDOW]
                write.executemany(f"INSERT INTO {table} VALUES ({_marks(part)})", part)
            write.execute("COMMIT")
        return time.perf_counter() - start


def _marks(rows: list[tuple]) -> str:
    return ", ".join("?" for _ in rows[0]) if rows else ""


def _postgresql(source: str, target: str) -> float:
    with psycopg.connect(source) as read, psycopg.connect(target) as write:
        for table in SMALL:
            _copy(write, table, _copied(read, table))
        write.commit()
        tables = {t: _copied(read, t, "ORDER BY id") for t in BULK}
        settle(target)
        start = time.perf_counter()
        for first in range(0, len(tables["dse_trials"]), WINDOW):
            for table, lines in tables.items():
                _copy(write, table, lines[first:first + WINDOW])
            write.commit()
        return time.perf_counter() - start


def _copied(connection: psycopg.Connection, table: str, order: str = "") -> list[bytes]:
    """The table's rows as COPY's text lines."""
    out = bytearray()
    with connection.cursor() as cursor, \
            cursor.copy(f"COPY (SELECT * FROM {table} {order}) TO STDOUT") as copy:
        for chunk in copy:
            out += chunk
    return bytes(out).splitlines(keepends=True)


def _copy(connection: psycopg.Connection, table: str, lines: list[bytes]) -> None:
    with connection.cursor() as cursor, cursor.copy(f"COPY {table} FROM STDIN") as copy:
        copy.write(b"".join(lines))
