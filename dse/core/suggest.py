""""Did you mean": the valid names closest to a mistyped one, for the messages that refuse it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CLOSE = 0.6  # difflib's ratio: 'quik' is close to 'quick', 'tops' is not close to 'latency_s'


def close_names(given: str, choices: Iterable[str], most: int = 3) -> list[str]:
    """Up to ``most`` of ``choices`` that look like ``given``, the closest first."""
    return difflib.get_close_matches(str(given), [str(c) for c in choices], n=most,
                                     cutoff=CLOSE)


def did_you_mean(given: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'quick'?)`` naming the choices that look like ``given``; empty when
    none does (a message then lists the valid names alone)."""
    close = close_names(given, choices)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
