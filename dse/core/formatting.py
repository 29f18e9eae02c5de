"""Readable tables for the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def fmt(value: Any) -> str:
    """A value as a table cell: floats to 4 significant digits, very large or small ones in
    scientific notation."""
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e5 or abs(value) < 1e-3:
            return f"{value:.3e}"
        return f"{value:.4g}"
    return str(value)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A left-aligned text table of ``rows`` restricted to ``columns``."""
    cells = [[fmt(row.get(c, "")) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def key_values(pairs: dict[str, Any], indent: str = "  ") -> str:
    """``pairs`` as aligned ``key  value`` lines, each starting with ``indent``."""
    width = max((len(k) for k in pairs), default=0)
    return "\n".join(f"{indent}{k.ljust(width)}  {fmt(v)}" for k, v in pairs.items())
