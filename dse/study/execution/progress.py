"""What a running study reports to its progress display."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# (what is counted: a workload, or a ladder rung of one; how many are done; how many there will
#  be, or 0 if unknown; this batch's best objective value or None; the objective's direction:
#  "maximize" or "minimize")
Progress = Callable[[str, int, int, float | None, str], None]


@dataclass
class Stage:
    """What one progress bar counts: a workload's trials, or the configs of one ladder rung (its
    best is then that rung's, never a mix of fidelities)."""

    label: str
    done: int
    total: int | None = None
