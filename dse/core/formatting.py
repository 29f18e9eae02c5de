"""Readable tables for the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MISSING = "-"  # a value a row does not have (no reason for an ok trial, no TOPS for a failed one)


def fmt(value: Any) -> str:
    """A value as a table cell: floats to 4 significant digits, very large or small ones in
    scientific notation; a missing value (None, NaN) as :data:`MISSING`."""
    if value is None or (isinstance(value, float) and value != value):
        return MISSING
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e5 or abs(value) < 1e-3:
            return f"{value:.3e}"
        return f"{value:.4g}"
    return str(value)


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, an ellipsis marking the cut."""
    return text if len(text) <= width else text[:width - 1] + "…"


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str],
          max_width: int | None = None) -> str:
    """A left-aligned text table of ``rows`` restricted to ``columns``; with ``max_width``, each
    cell cut to that many characters."""
    cells = [[fmt(row.get(c, "")) for c in columns] for row in rows]
    if max_width:
        cells = [[clip(v, max_width) for v in r] for r in cells]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def key_values(pairs: dict[str, Any], indent: str = "  ") -> str:
    """``pairs`` as aligned ``key  value`` lines, each starting with ``indent``."""
    width = max((len(k) for k in pairs), default=0)
    return "\n".join(f"{indent}{k.ljust(width)}  {fmt(v)}" for k, v in pairs.items())
