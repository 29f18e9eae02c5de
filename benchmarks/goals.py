"""What the benchmarks share: the best time of a few runs, and one line per figure of a speed
goal (what was measured, the goal, and their ratio).

Every benchmark that measures a figure of a goal table prints it through :func:`against_goal`, so
a run reads the same across scripts::

    figure: exhaustive search, xdna2 int8 4096^3 | 14.2 M configs/s | goal >= 10 M configs/s |
    1.42x the goal | met
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def best_of(repeats: int, work: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of ``repeats`` calls of ``work`` in seconds, and the last call's result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return min(times), result


def against_goal(figure: str, measured: float, goal: float, unit: str,
                 higher_is_better: bool = True, old: float | None = None) -> bool:
    """Print ``figure``'s measurement beside its goal (and the old path's, when one was run in
    the same process) and return whether the goal is met.

    The ratio is always written so that above 1 is better than the goal: measured / goal for a
    rate, goal / measured for a time or a cost.
    """
    ratio = measured / goal if higher_is_better else goal / measured if measured else float("inf")
    met = measured >= goal if higher_is_better else measured <= goal
    sign = ">=" if higher_is_better else "<="
    line = (f"figure: {figure} | {measured:,.4g} {unit} | goal {sign} {goal:,.4g} {unit} | "
            f"{ratio:.2f}x the goal | {'met' if met else 'NOT met'}")
    if old is not None:
        gain = measured / old if higher_is_better else old / measured if measured else float("inf")
        line += f" | old path {old:,.4g} {unit} ({gain:.2f}x)"
    print(line, flush=True)
    return met
