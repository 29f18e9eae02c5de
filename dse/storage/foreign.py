"""Refusing another application's SQLite file before dse writes anything into it.

A store opened for writing creates dse's tables where they are missing, and its first
connection sets SQLite's page size and journal mode: given the file of another application
(its own tables, no ``dse_meta``) that would change the file, or fail half-way on a table whose
name dse uses. So the file is read first, read-only, and refused by name unless it is empty, a
dse store, or a dse store whose tables another process is creating this moment.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from urllib.parse import quote

from dse.core import limits
from dse.core.errors import UsageError
from dse.storage import models as m


def refuse_foreign_sqlite(path: str) -> None:
    """Raise :class:`UsageError` naming ``path`` when that SQLite file holds tables and is not
    a dse store; do nothing for a file that does not exist yet, is empty, or cannot be read
    (the store's own checks report that: damaged, not a database, a folder)."""
    tables = _tables(Path(path).expanduser())
    if tables is None or not tables or _is_dse(tables):
        return
    own = sorted(tables)
    shown = ", ".join(own[:5]) + (f" and {len(own) - 5} more" if len(own) > 5 else "")
    raise UsageError(f"storage {limits.cut(str(Path(path).expanduser().absolute()))} is not "
                     f"a dse results database (it holds the tables {shown}, and no dse_meta): "
                     "dse writes nothing into it. Give another file name for a new store")


def _tables(path: Path) -> dict[str, set[str]] | None:
    """The file's tables and their columns, read without writing; None where it cannot be
    read as a database."""
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return None
    except OSError:  # a name the file system refuses: the store reports it
        return None
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=60)) as conn:
            names = [row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")]
            return {name: {row[1] for row in conn.execute(
                "SELECT * FROM pragma_table_info(?)", (name,))} for name in names}
    except sqlite3.Error:  # damaged, not a database, locked: the store's own checks say so
        return None


def _is_dse(tables: dict[str, set[str]]) -> bool:
    """Whether ``tables`` are a dse store's: its ``dse_meta`` is there (other applications'
    tables may sit beside dse's), or only dse's tables are, with dse's columns (another
    process is creating them: SQLite commits each ``CREATE TABLE`` on its own)."""
    ours = m.Base.metadata.tables
    if "dse_meta" in tables:
        return tables["dse_meta"] >= set(ours["dse_meta"].columns.keys())
    return all(name in ours and columns == set(ours[name].columns.keys())
               for name, columns in tables.items())
