"""Bulk writes: many rows of one table in one call of the driver, in the caller's transaction.

A study's window holds thousands of trials; through SQLAlchemy's ``insert()`` every row is a dict
whose every value passes the column type's bind processor (``json.dumps`` for each document).
Here each column is converted at once, the way its type's bind processor would (a column of
documents by :func:`dse.storage.engine.json_texts`, orjson's speed with the standard library's
semantics), and a value that is the same in every row (the window's time, host, library
versions) converted once. SQLite gets one ``executemany`` of the rows; PostgreSQL one ``COPY``
of their text, built a column at a time (:mod:`dse.storage.copy_text`) and streamed a piece of
:data:`CHUNK` rows after another, so that the server stores one piece while the next is built
(with the whole text built first, then sent, the server waited for it): straight into the table
where the rows are new, else into a temporary table, then one ``INSERT ... SELECT`` (``ON
CONFLICT DO NOTHING`` where rows may exist already), since ``COPY`` itself cannot skip a
conflicting row."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import JSON, Connection, Integer, Table
from sqlalchemy.exc import DBAPIError, IntegrityError

from dse.storage.copy_text import copy_text
from dse.storage.engine import json_dumps, json_texts

Convert = Callable[[Any], Any]
# Rows a piece of a COPY, built just before it is sent: the server stores one piece while the
# next is built. Of 100, 1,000 and 4,000 rows, 100 stored an exhaustive study fastest (also
# the least CPU: a piece's lists stay in the processor's cache).
CHUNK = 100


def converter(table: Table, name: str, dialect: Any) -> Convert | None:
    """How a value of column ``name`` reaches the driver, as SQLAlchemy would send it (None:
    as it is); a JSON document is encoded by :func:`json_dumps`."""
    column_type = table.c[name].type
    if isinstance(column_type, JSON):
        return json_dumps
    return column_type._cached_bind_processor(dialect)  # noqa: SLF001 - SQLAlchemy's own cache


def driver_columns(table: Table, dialect: Any, columns: Mapping[str, Sequence[Any]],
                   constants: Mapping[str, Any]) -> tuple[list[str], list[Sequence[Any]],
                                                          list[Any]]:
    """The column names, the per-row ``columns`` as driver values and the ``constants`` (one
    value for every row) as driver values, each converted once; a column of documents is
    encoded in one pass (:func:`json_texts`)."""
    converted = []
    for name, values in columns.items():
        convert = converter(table, name, dialect)
        if convert is json_dumps and None not in values:
            converted.append(json_texts(values))
        else:
            converted.append(values if convert is None else
                             [None if v is None else convert(v) for v in values])
    fixed = []
    for name, value in constants.items():
        convert = converter(table, name, dialect)
        fixed.append(value if convert is None or value is None else convert(value))
    if len({len(values) for values in converted}) > 1:
        raise ValueError(f"columns of {table.name} of unequal lengths")
    return [*columns, *constants], converted, fixed


def insert_rows(connection: Connection, table: Table, columns: Mapping[str, Sequence[Any]],
                constants: Mapping[str, Any] | None = None,
                conflict: Sequence[str] | None = None,
                returning: Sequence[str] = (),
                meanwhile: Callable[[], Any] | None = None) -> list[tuple[Any, ...]]:
    """Insert the rows in the connection's transaction; with ``conflict`` (the columns of a
    unique constraint), a row whose key is already stored is skipped, as
    ``on_conflict_do_nothing`` does. A failure raises SQLAlchemy's error and leaves the
    transaction to be rolled back whole.

    Returns the ``returning`` columns of the rows inserted, where the database can say (on
    PostgreSQL; on SQLite, none): the caller looks up the others. A table just bulk-loaded has
    statistics PostgreSQL has not refreshed yet, with which a lookup by the unique key scans
    every row of the study, so the ids of new rows are best not looked up at all.

    ``meanwhile`` is work of the caller's that needs none of these rows, done while the server
    stores them: on PostgreSQL once the last piece of the ``COPY`` is sent, before its end is
    awaited (else the client would wait for the server with nothing to do); on SQLite after
    the insert. It may not be done at all where the insert fails."""
    if connection.dialect.name == "postgresql":
        count = len(next(iter(columns.values()), ()))
        if not count:
            return []
        names = [*columns, *(constants or {})]
        return _copy_rows(connection, table, names, _copy_chunks(
            table, connection.dialect, columns, constants or {}, count), conflict, returning,
            meanwhile)
    names, converted, fixed = driver_columns(table, connection.dialect, columns,
                                             constants or {})
    if not converted or not converted[0]:
        return []
    # the constants repeat without end: the per-row columns, equal in length, end the rows
    rows = list(zip(*converted, *map(itertools.repeat, fixed), strict=False))
    marks = ", ".join("?" if connection.dialect.paramstyle == "qmark" else "%s" for _ in names)
    sql = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({marks})"
    if conflict:
        sql += f" ON CONFLICT ({', '.join(conflict)}) DO NOTHING"
    connection.exec_driver_sql(sql, rows)
    if meanwhile is not None:
        meanwhile()
    return []


def insert_new_rows(connection: Connection, table: Table, columns: Mapping[str, Sequence[Any]],
                    constants: Mapping[str, Any], conflict: Sequence[str],
                    key: Sequence[str],
                    meanwhile: Callable[[], Any] | None = None) -> dict[tuple[Any, ...], int]:
    """Insert the rows whose ``conflict`` columns (a unique constraint) are not stored yet,
    skipping the others, and return the ids of the rows inserted by their ``key`` columns'
    values (``key`` names per-row columns).

    On SQLite the caller holds the database's write lock (see
    :func:`dse.storage.runs.hold_write_lock`): the rows get ids after the largest stored, and
    the rows skipped are those whose ids are then absent, read by id range rather than looked
    up by key. On PostgreSQL they are drawn from the table's sequence, or, where some rows
    are stored already, come back from the insert itself (``RETURNING``). ``meanwhile`` as for
    :func:`insert_rows`."""
    if connection.dialect.name == "postgresql":
        return _insert_new_postgresql(connection, table, columns, constants, conflict, key,
                                      meanwhile)
    count = len(next(iter(columns.values())))
    first = (connection.exec_driver_sql(f"SELECT max(id) FROM {table.name}").scalar() or 0) + 1
    ids = range(first, first + count)
    insert_rows(connection, table, {"id": ids, **columns}, constants, conflict=conflict,
                meanwhile=meanwhile)
    keys = zip(*(columns[name] for name in key), strict=True)
    inserted = connection.exec_driver_sql(
        f"SELECT count(*) FROM {table.name} WHERE id >= ?", (first,)).scalar()
    if inserted == count:  # nothing was stored before: no id to read
        return dict(zip(keys, ids, strict=True))
    present = set(connection.exec_driver_sql(
        f"SELECT id FROM {table.name} WHERE id >= ?", (first,)).scalars())
    return {k: i for k, i in zip(keys, ids, strict=True) if i in present}


def _insert_new_postgresql(connection: Connection, table: Table,
                           columns: Mapping[str, Sequence[Any]], constants: Mapping[str, Any],
                           conflict: Sequence[str], key: Sequence[str],
                           meanwhile: Callable[[], Any] | None) -> dict[tuple[Any, ...], int]:
    """:func:`insert_new_rows` on PostgreSQL. The rows are most often all new (a window's
    configs and fresh results): they get ids drawn from the table's sequence and go straight
    into the table by ``COPY``, under a savepoint. Where one is stored already (another
    study's config, another writer's result), that is undone and the rows go through a staging
    table instead, which skips the stored ones and returns the new ones' ids."""
    count = len(next(iter(columns.values())))
    with connection.connection.driver_connection.cursor(binary=True) as cursor:
        # one array, in binary: SQLAlchemy's rows of ten thousand ids took ten times as long;
        # the sequence named once (a CTE), not looked up for each id (seven times as long)
        ids = cursor.execute(
            "WITH s AS MATERIALIZED (SELECT pg_get_serial_sequence(%s, 'id')::regclass AS seq) "
            "SELECT array_agg(nextval(s.seq)) FROM s, generate_series(1, %s)",
            (table.name, count)).fetchone()[0]
    try:
        with connection.begin_nested():
            insert_rows(connection, table, {"id": ids, **columns}, constants,
                        meanwhile=meanwhile)
    except IntegrityError:
        rows = insert_rows(connection, table, columns, constants, conflict=conflict,
                           returning=(*key, "id"))
        return {tuple(row[:-1]): row[-1] for row in rows}
    return dict(zip(zip(*(columns[name] for name in key), strict=True), ids, strict=True))


def _copy_chunks(table: Table, dialect: Any, columns: Mapping[str, Sequence[Any]],
                 constants: Mapping[str, Any], count: int) -> Iterator[bytes]:
    """The ``COPY`` text of the rows, :data:`CHUNK` rows a piece, each piece converted and
    built only when it is asked for (the constants converted once)."""
    _, _, fixed = driver_columns(table, dialect, {}, constants)
    for start in range(0, count, CHUNK):
        part = {name: values[start:start + CHUNK] for name, values in columns.items()}
        _, converted, _ = driver_columns(table, dialect, part, {})
        yield copy_text(converted, fixed)


def _copy_rows(connection: Connection, table: Table, names: list[str], lines: Iterable[bytes],
               conflict: Sequence[str] | None, returning: Sequence[str],
               meanwhile: Callable[[], Any] | None = None) -> list[tuple[Any, ...]]:
    """PostgreSQL: ``COPY`` the rows into ``table``, or, to skip conflicting rows or return
    columns, into a temporary copy of it (dropped at commit), then move them in one
    ``INSERT ... SELECT``; a failure is SQLAlchemy's ``DBAPIError`` of the driver's
    error, as for any statement."""
    columns = ", ".join(names)
    staged = bool(conflict or returning)  # COPY can neither skip a row nor return ids
    staging = f"dse_bulk_{table.name}" if staged else table.name
    if staged:  # the columns' types only: no constraint, no default drawing on a sequence
        connection.exec_driver_sql(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {staging} ON COMMIT DROP AS "
            f"SELECT {columns} FROM {table.name} WITH NO DATA")
        connection.exec_driver_sql(f"TRUNCATE {staging}")
    statement = f"COPY {staging} ({columns}) FROM STDIN"
    dbapi = connection.dialect.loaded_dbapi
    try:
        with connection.connection.driver_connection.cursor() as cursor, \
                cursor.copy(statement) as copy:
            for chunk in lines:
                copy.write(chunk)
            if meanwhile is not None:
                meanwhile()
    except dbapi.Error as exc:  # reported as SQLAlchemy reports any statement's error
        raise DBAPIError.instance(statement, None, exc, dbapi.Error,
                                  dialect=connection.dialect) from None
    if not staged:
        return []
    sql = f"INSERT INTO {table.name} ({columns}) SELECT {columns} FROM {staging}"
    if conflict:
        sql += f" ON CONFLICT ({', '.join(conflict)}) DO NOTHING"
    if not returning:
        connection.exec_driver_sql(sql)
        return []
    return connection.exec_driver_sql(f"{sql} RETURNING {', '.join(returning)}").cursor.fetchall()


def pairs_in(connection: Connection, table: Table, key: str, value: str,
             where: Mapping[str, Any], wanted: Sequence[Any]) -> dict[Any, Any]:
    """``{row[key]: row[value]}`` of the rows of ``table`` matching ``where`` (column: value)
    whose ``key`` is one of ``wanted`` (see :func:`rows_in`)."""
    return {row[0]: row[1] for row in rows_in(connection, table, (key, value), where, wanted)}


def rows_in(connection: Connection, table: Table, columns: Sequence[str],
            where: Mapping[str, Any], wanted: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The ``columns`` of the rows of ``table`` matching ``where`` (column: value) whose first
    column is one of ``wanted``, read with the driver's own cursor (a SQLAlchemy ``in_()``
    coerces each of thousands of values); documents come as the driver gives them.

    SQLite takes them in chunks of 500 (``IN``). PostgreSQL takes them in one statement that
    looks each value up on its own (a lateral subquery, fenced by ``OFFSET 0`` so that it is not
    merged into a join): with ``IN``, ``= ANY`` or a plain join, a table just bulk-loaded (no
    statistics yet) was scanned by the prefix of its identity, all of a study's evaluations for
    every 500 configs served from the store (a study served whole took 490 s)."""
    unique = list(dict.fromkeys(wanted))
    if connection.dialect.name == "postgresql":
        first = columns[0]
        kind = "bigint" if isinstance(table.c[first].type, Integer) else "text"
        conditions = "".join(f" AND t.{name} = %s" for name in where)
        listed = ", ".join(f"t.{name}" for name in columns)
        sql = (f"SELECT x.* FROM unnest(%s::{kind}[]) AS w(value) CROSS JOIN LATERAL "
               f"(SELECT {listed} FROM {table.name} t WHERE t.{first} = w.value{conditions} "
               "OFFSET 0) AS x")
        return connection.exec_driver_sql(sql, (unique, *where.values())).cursor.fetchall()
    conditions = "".join(f"{name} = ? AND " for name in where)
    found: list[tuple[Any, ...]] = []
    for start in range(0, len(unique), 500):
        chunk = unique[start:start + 500]
        sql = (f"SELECT {', '.join(columns)} FROM {table.name} WHERE {conditions}{columns[0]} "
               f"IN ({', '.join('?' for _ in chunk)})")
        found += connection.exec_driver_sql(sql, (*where.values(), *chunk)).cursor.fetchall()
    return found
