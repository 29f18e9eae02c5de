"""A small, safe filter language over trial columns, e.g. ``tops > 30 and k_ct <= 64``.

Grammar: ``expr := term ('or' term)*``, ``term := factor ('and' factor)*``,
``factor := 'not' factor | '(' expr ')' | operand OP operand`` with OP one of
``< <= > >= == != =`` and operands column names, numbers or quoted strings. The expression is
parsed and evaluated on a pandas DataFrame, or built into SQLAlchemy expressions with bound
values (:mod:`dse.storage.pages`); its text never reaches SQL or ``eval``.
"""

from __future__ import annotations

import operator
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import pandas as pd

from dse.core.errors import UsageError
from dse.core.limits import cut

_TOKEN = re.compile(r"""\s*(?:(?P<num>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|(?P<str>'[^']*'|"[^"]*")|
                      (?P<op><=|>=|==|!=|<|>|=)|(?P<paren>[()])|(?P<name>[A-Za-z_][\w.]*))""",
                    re.VERBOSE)
COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "=": operator.eq, "!=": operator.ne}
_KEYWORDS = ("and", "or", "not")
# a filter is typed by a person: these bounds keep the parser's recursion and the SQL
# expression tree (SQLite's limit: depth 1000) far inside what they can hold
MAX_TOKENS = 400
MAX_DEPTH = 50


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if not match:
            rest = text[pos:].strip()
            raise UsageError(f"filter {cut(text)!r}: cannot read {cut(rest)!r} "
                             "(expected a name, number, quoted string, comparison or parenthesis)")
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "name" and value.lower() in _KEYWORDS:
            kind, value = "kw", value.lower()
        out.append((kind, value))
        pos = match.end()
    return out


class FilterParser(ABC):
    """Parses a filter; subclasses say what a column is and what a comparison builds (a pandas
    mask here, a SQL condition in :mod:`dse.storage.pages`)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.pos = 0
        self.depth = 0  # parentheses and nots open
        if len(self.tokens) > MAX_TOKENS:
            raise self.fail(f"is too long: {len(self.tokens)} names, numbers and operators, at "
                            f"most {MAX_TOKENS}")

    def fail(self, message: str) -> UsageError:
        return UsageError(f"filter {cut(self.text)!r}: {message}")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise self.fail("ends too early")
        self.pos += 1
        return token

    def parse(self) -> Any:
        if not self.tokens:
            raise self.fail("is empty")
        result = self.expr()
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()[1]!r}")
        return result

    def expr(self) -> Any:
        result = self.term()
        while self.peek() == ("kw", "or"):
            self.take()
            result = result | self.term()
        return result

    def term(self) -> Any:
        result = self.factor()
        while self.peek() == ("kw", "and"):
            self.take()
            result = result & self.factor()
        return result

    def factor(self) -> Any:
        if self.peek() in (("kw", "not"), ("paren", "(")):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.fail(f"nests more than {MAX_DEPTH} parentheses and nots")
            try:
                return self._nested()
            finally:
                self.depth -= 1
        left = self.operand()
        kind, op = self.take()
        if kind != "op":
            raise self.fail(f"expected a comparison after {self.tokens[self.pos - 2][1]!r}, "
                            f"got {op!r}")
        return self.compare(op, left, self.operand())

    def _nested(self) -> Any:
        if self.take() == ("kw", "not"):
            return ~self.factor()
        result = self.expr()
        if self.take() != ("paren", ")"):
            raise self.fail("missing ')'")
        return result

    def operand(self) -> Any:
        kind, value = self.take()
        if kind == "num":
            return float(value)
        if kind == "str":
            return value[1:-1]
        if kind == "name":
            return self.column(value)
        raise self.fail(f"expected a column, number or string, got {value!r}")

    def require_same_kind(self, op: str, left_numeric: bool, right_numeric: bool) -> None:
        """Numbers compare with numbers and text with text, on a frame as in SQL: a number
        equal to a text would be false in pandas, and refused or converted by a database."""
        if left_numeric != right_numeric:
            raise self.fail(f"cannot compare a number with text in {op!r}")

    @abstractmethod
    def compare(self, op: str, left: Any, right: Any) -> Any:
        """``left OP right`` where at least one side is a column."""

    @abstractmethod
    def column(self, name: str) -> Any:
        """The operand a column name stands for."""


class _FrameParser(FilterParser):
    def __init__(self, text: str, frame: pd.DataFrame) -> None:
        super().__init__(text)
        self.frame = frame

    def compare(self, op: str, left: Any, right: Any) -> pd.Series:
        """A boolean mask; a missing value compares false."""
        if not isinstance(left, pd.Series) and not isinstance(right, pd.Series):
            raise self.fail("a comparison needs at least one column name")
        self.require_same_kind(op, _numeric(left), _numeric(right))
        try:
            result = COMPARISONS[op](left, right)
        except TypeError as exc:
            raise self.fail(f"cannot compare: {exc}") from None
        return result.fillna(False).astype(bool)

    def column(self, name: str) -> pd.Series:
        if name not in self.frame.columns:
            raise self.fail(f"unknown column {name!r}; columns: "
                            f"{', '.join(map(str, self.frame.columns))}")
        return self.frame[name]


def _numeric(side: Any) -> bool:
    """Whether a comparison's side holds numbers (a number, or a column of numbers or
    booleans), as the SQL filter judges its columns."""
    if isinstance(side, pd.Series):
        return pd.api.types.is_numeric_dtype(side.dtype)
    return isinstance(side, float)


def apply_filter(frame: pd.DataFrame, text: str) -> pd.DataFrame:
    """Rows of ``frame`` for which the filter ``text`` holds."""
    return frame[_FrameParser(text, frame).parse().to_numpy()]
