"""A study's JSON documents (its configs' parameters, its results' metrics) as frames.

A study's frame holds two documents a trial. Fetched row by row, each is a Python string, joined
to the others and encoded again before Arrow's JSON reader parses them. Here the database joins
a column's documents into one text, in trial order, in one statement (SQLite's ``group_concat``,
PostgreSQL's ``string_agg``), which comes back as bytes that Arrow parses where they lie; the
trials' own columns likewise, as one JSON object each. The three statements run at once, each in
a thread on a connection of its own (the database and Arrow's reader leave the interpreter free).
"""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
from pyarrow import json as pa_json
from sqlalchemy import Connection

from dse.storage.engine import json_loads, read_only_uri

# What each text holds, a JSON object a trial, by dialect, and where it is read from (trials
# ``t``, joined to ``d``): the config's parameters, the result's metrics, and the trial's own
# columns but its elapsed time (SQLite writes a float into JSON to 15 digits, which would not be
# the stored number: the caller reads it as a number).
TRIAL_FIELDS = ("number", "workload_id", "status", "cached", "reason", "evaluator", "version",
                "fidelity", "host", "created_at")
_OF_TRIAL = ("t.number", "t.workload_id", "t.status", "t.cached", "d.reason", "d.evaluator",
             "d.version", "d.fidelity", "d.host", "t.created_at")
_TRIAL_PAIRS = ", ".join(f"'{name}', {column}" for name, column in zip(TRIAL_FIELDS, _OF_TRIAL,
                                                                     strict=True))
TEXTS = {
    "trial": ({"sqlite": f"json_object({_TRIAL_PAIRS})",
               "postgresql": f"json_build_object({_TRIAL_PAIRS})::text"},
              "dse_evaluations d ON d.id = t.evaluation_id"),
    "params": ({"sqlite": "d.params", "postgresql": "d.params::text"},
               "dse_configs d ON d.id = t.config_id"),
    "metrics": ({"sqlite": "d.metrics", "postgresql": "d.metrics::text"},
                "dse_evaluations d ON d.id = t.evaluation_id"),
}
# The trial's own columns as Arrow reads them (a time stays text; a reason is text even where
# no trial has one).
TRIAL_SCHEMA = pa.schema([(name, pa.int64() if name in ("number", "workload_id", "cached")
                           else pa.string()) for name in TRIAL_FIELDS])
# SQLite orders an aggregate's input itself from 3.44 on; before, the order of a subquery's rows
# is what it follows in practice, not by promise, so the numbers come back to be checked.
SQLITE_ORDERED_AGGREGATE = sqlite3.sqlite_version_info >= (3, 44)

# Arrow types whose pandas columns are what pd.DataFrame.from_records makes of the same
# values decoded one by one (nulls and missing keys as NaN); any other (a nested document,
# a string Arrow took for a time, booleans with gaps) leaves the documents to from_records.
_PLAIN_TYPES = (pa.int64(), pa.float64(), pa.string())


def documents_frame(texts: Sequence[str]) -> pd.DataFrame:
    """``pd.DataFrame.from_records`` of the JSON documents ``texts`` (one object each): the
    same columns, order, dtypes and values, read by Arrow's JSON reader in one pass where
    every column is of a plain type, else decoded one by one."""
    return lines_frame("\n".join(texts).encode(), len(texts))


def lines_frame(lines: bytes, count: int) -> pd.DataFrame:
    """:func:`documents_frame` of ``count`` documents given as one text, a line each."""
    try:
        table = pa_json.read_json(io.BytesIO(lines))
    # NaN or Infinity (not JSON to Arrow), a key whose type changes between documents, or a
    # nesting Arrow cannot read: those documents are decoded one by one below
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        table = None
    if table is not None and table.num_rows == count and table.num_columns and all(
            field.type in _PLAIN_TYPES
            or (field.type == pa.bool_() and table.column(i).null_count == 0)
            for i, field in enumerate(table.schema)):
        return table.to_pandas()
    return pd.DataFrame.from_records([json_loads(line) for line in lines.split(b"\n")]
                                     if count else [])


def trial_table(lines: bytes, count: int) -> pa.Table | None:
    """The trials' own columns (:data:`TRIAL_FIELDS`) from their JSON objects, a line each;
    None if Arrow cannot read them as :data:`TRIAL_SCHEMA`."""
    options = pa_json.ParseOptions(explicit_schema=TRIAL_SCHEMA,
                                   unexpected_field_behavior="error")
    try:
        table = pa_json.read_json(io.BytesIO(lines), parse_options=options)
    # a value of another type than the schema's (a reason that is not text, say): the caller
    # reads the trials row by row instead
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table if table.num_rows == count else None


@dataclass
class Joined:
    """One of :data:`TEXTS` read and parsed (``parsed``: a pandas frame, or for the trials' own
    columns an Arrow table), with, where the database's order of it is to be checked, the trial
    numbers it came in (comma-separated)."""

    parsed: Any
    numbers: str | None

    def in_order(self, numbers: Sequence[int]) -> bool:
        """Whether the documents came in the order of ``numbers`` (the trials' own)."""
        return self.numbers is None or self.numbers == ",".join(map(str, numbers))


# One statement run on some connection, and its only row.
Execute = Callable[[str, tuple[Any, ...]], Sequence[Any]]


def read_joined(execute: Execute, dialect: str, text: str, study_id: int,
                last: int) -> Joined | None:
    """One of :data:`TEXTS` of the study's trials numbered up to ``last``, joined into one text
    in trial order by the database (one statement run by ``execute``) and parsed. None where
    the database cannot join them (neither SQLite nor PostgreSQL)."""
    expressions, joined = TEXTS[text]
    if dialect not in expressions:
        return None
    mark = "?" if dialect == "sqlite" else "%s"
    rows = f"FROM dse_trials t JOIN {joined} WHERE t.study_id = {mark} AND t.number <= {mark}"
    expression = expressions[dialect]
    if dialect == "postgresql":
        sql = (f"SELECT convert_to(string_agg({expression}, E'\\n' ORDER BY t.number), "
               f"'UTF8'), NULL, count(*) {rows}")
    elif SQLITE_ORDERED_AGGREGATE:
        sql = (f"SELECT CAST(group_concat({expression}, char(10) ORDER BY t.number) AS BLOB), "
               f"NULL, count(*) {rows}")
    else:
        sql = ("SELECT CAST(group_concat(doc, char(10)) AS BLOB), group_concat(number), "
               f"count(*) FROM (SELECT {expression} AS doc, t.number AS number {rows} "
               "ORDER BY t.number)")
    lines, numbers, count = execute(sql, (study_id, last))
    reader = trial_table if text == "trial" else lines_frame
    return Joined(reader(bytes(lines or b""), count), numbers)


def binary_row(connection: Connection, sql: str, params: tuple[Any, ...]) -> Sequence[Any]:
    """The only row of ``sql`` on PostgreSQL, in the binary format: a joined text comes as its
    bytes, not as hexadecimal twice their size to decode."""
    with connection.connection.driver_connection.cursor() as cursor:
        cursor.execute(sql, params, binary=True)
        return cursor.fetchone()


def side_connections(connection: Connection
                     ) -> Callable[[], AbstractContextManager[Execute]] | None:
    """How a thread opens a connection of its own to the database ``connection`` reads (each
    statement of :func:`read_joined` spends its time in the database, where threads run at
    once): PostgreSQL's from the engine's pool, SQLite's read-only to the same file. None for
    an in-memory SQLite database, which only ``connection`` sees."""
    if connection.dialect.name == "postgresql":
        engine = connection.engine

        @contextmanager
        def pooled() -> Iterator[Execute]:
            with engine.connect() as side:
                # the sort of the aggregate's input in memory, not in files (4 MB by default)
                side.exec_driver_sql("SET LOCAL work_mem = '256MB'")
                yield lambda sql, params: binary_row(side, sql, params)

        return pooled
    if connection.dialect.name != "sqlite":
        return None
    files = [row[2] for row in connection.exec_driver_sql("PRAGMA database_list")
             if row[1] == "main"]
    if not files or not files[0]:
        return None
    uri = read_only_uri(files[0])

    @contextmanager
    def read_only() -> Iterator[Execute]:
        side = sqlite3.connect(uri, uri=True, timeout=60, check_same_thread=False)
        try:
            yield lambda sql, params: side.execute(sql, params).fetchone()
        finally:
            side.close()

    return read_only
