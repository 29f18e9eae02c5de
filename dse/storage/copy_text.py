"""Rows in PostgreSQL's ``COPY`` text format, built a column at a time.

psycopg's ``write_row`` formats each value of each row through its dumpers, a Python call per
value: for a window of ten thousand trials that was a third of the store's time. Here a column
whose values are all of one plain type is formatted in one pass (a column of texts is scanned
once for the four characters ``COPY`` escapes), and the lines are joined in C.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

NULL = "\\N"
# what COPY's text format reads as a column's or a line's end, and its escape
_SPECIALS = ("\\", "\n", "\r", "\t")
_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _special(text: str) -> bool:
    """Whether ``text`` holds a character COPY's text format escapes (four scans of the text
    take a tenth of a regular expression's one)."""
    return any(special in text for special in _SPECIALS)


def _escaped(text: str) -> str:
    return text.translate(_ESCAPES) if _special(text) else text


def copy_value(value: Any) -> str:
    """One value as COPY's text format reads it (floats as their shortest exact text, which
    PostgreSQL reads back bit for bit, ``inf`` and ``nan`` included)."""
    if value is None:
        return NULL
    if isinstance(value, str):
        return _escaped(value)
    if isinstance(value, bool):  # before int: a bool is one; 1 and 0 read as either type
        return "1" if value else "0"
    if isinstance(value, float):
        return float.__repr__(value)  # numpy's float64 prints its type in its own repr
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return str(value)


def column_texts(values: Sequence[Any]) -> Sequence[str]:
    """Each value of a column as :func:`copy_value` writes it."""
    kinds = set(map(type, values))
    nullable = type(None) in kinds
    kinds.discard(type(None))
    if not kinds:
        return [NULL] * len(values)
    if kinds == {str} and not nullable:
        if _special("".join(values)):  # four scans of one text: most columns have none
            return [_escaped(value) for value in values]
        return values
    plain = {int: int.__repr__, float: float.__repr__}.get(next(iter(kinds))) \
        if len(kinds) == 1 else None
    if plain is None:
        return [copy_value(value) for value in values]
    if nullable:
        return [NULL if value is None else plain(value) for value in values]
    return list(map(plain, values))


def copy_text(columns: Sequence[Sequence[Any]], constants: Sequence[Any] = ()) -> bytes:
    """The lines of ``COPY ... FROM STDIN`` (text format): ``columns`` holds one value per row
    (at least one column, all of one length), ``constants`` one value for every row."""
    if not columns or not columns[0]:
        return b""
    texts = [column_texts(values) for values in columns]
    fixed = [itertools.repeat(copy_value(value)) for value in constants]
    # the constants repeat without end: the per-row columns, equal in length, end the lines
    lines = map("\t".join, zip(*texts, *fixed, strict=False))
    return ("\n".join(lines) + "\n").encode()
