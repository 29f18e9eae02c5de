"""What a race of search strategies over measured configs is judged by, apart from who ran it.

Pure functions (no dse, no Kernel Tuner, no NumPy): ``kernel_tuner_side_by_side.py`` uses them on
both sides and its tests call them directly.

* A **memo** maps a config's key to the one measurement it got: its time, or None when it failed,
  and what measuring it cost (compile, check and timed runs). Every strategy and seed reads the
  same memo, so a config has one time whoever asked for it first: "within 3 % of the best" then
  compares like with like on a machine whose timings move by 10-30 % between moments.
* A **run** is the order in which one strategy (one seed) asked for configs; a config asked for
  again costs nothing more and is not counted again.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    """One config's measurement: its time in seconds (None: it failed), and its cost."""

    seconds: float | None
    cost_s: float  # compiling, checking the product and the timed runs, in seconds


def distinct(keys: Iterable[str]) -> list[str]:
    """``keys`` in order, each kept at its first appearance only."""
    seen: set[str] = set()
    out = []
    for key in keys:
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def best_time(memo: Mapping[str, Measured]) -> float:
    """The shortest time in ``memo``.

    Raises:
        ValueError: no config of ``memo`` has a time.
    """
    times = [m.seconds for m in memo.values() if m.seconds is not None]
    if not times:
        raise ValueError("no config was measured successfully")
    return min(times)


def measurements_to_within(run: Sequence[str], memo: Mapping[str, Measured], best: float,
                           tolerance: float = 0.03) -> int | None:
    """How many distinct configs ``run`` measured until one came within ``tolerance`` of
    ``best`` (its time <= best x (1 + tolerance)), that one included; None if none did.

    Raises:
        KeyError: a config of ``run`` is not in ``memo`` (it was never measured).
    """
    for count, key in enumerate(distinct(run), start=1):
        seconds = memo[key].seconds
        if seconds is not None and seconds <= best * (1.0 + tolerance):
            return count
    return None


def cost_until(run: Sequence[str], memo: Mapping[str, Measured], count: int | None) -> float:
    """Seconds of measuring the first ``count`` distinct configs of ``run`` (all when None)."""
    keys = distinct(run)
    return sum(memo[k].cost_s for k in (keys if count is None else keys[:count]))


def median_count(counts: Sequence[int | None], budget: int) -> float | None:
    """The median of ``counts`` where None (not reached within ``budget`` measurements) ranks
    above every count; None when the median itself was not reached."""
    if not counts:
        raise ValueError("no counts")
    ranked = sorted(float(c) if c is not None else float("inf") for c in counts)
    middle = statistics.median(ranked)
    return None if middle == float("inf") or middle > budget else middle


def shown(count: float | None, budget: int) -> str:
    """A count for the table: ``> budget`` when it was not reached."""
    if count is None:
        return f">{budget}"
    return f"{count:g}"
