"""Argument types shared by the command-line parsers: argparse names the option when one fails."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from dse.errors import DseError, UsageError
from dse.storage.engine import normalise_url

SQLITE_HEADER = b"SQLite format 3\x00"


def positive_int(text: str) -> int:
    """A count that must be at least 1 (trials, workers, configs to list, samples)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def name_values(items: Sequence[str] | None, option: str) -> dict[str, str]:
    """Repeated ``option NAME=VALUE`` items as a dict; a name given twice is refused (the
    first value would be dropped without a word)."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"{option} expects NAME=VALUE, got {item!r}")
        if name.strip() in out:
            raise UsageError(f"{option} {name.strip()} is given twice")
        out[name.strip()] = value.strip()
    return out


def backend_options(items: Sequence[str] | None) -> dict[str, Any]:
    """``--option KEY=VALUE`` items as an evaluator's options; a value is read as JSON when it
    is (numbers, true/false), else kept as text (paths, names)."""
    options: dict[str, Any] = {}
    for key, value in name_values(items, "--option").items():
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--option KEY=VALUE`` (repeatable) to ``parser``."""
    parser.add_argument("--option", action="append", metavar="KEY=VALUE",
                        help="evaluator option, e.g. mlir_aie_dir=/opt/mlir-aie flow=jit")


def refuse_database_as_out(out: str | None, storage: str | None) -> None:
    """Refuse an ``--out`` that would overwrite the results database (or its WAL files) or any
    other SQLite database: writing a report over it would lose every study it holds."""
    if not out:
        return
    path = Path(out).expanduser()
    try:
        url = make_url(normalise_url(storage))
    except DseError:
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
