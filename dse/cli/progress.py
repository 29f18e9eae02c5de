"""Progress bars of a running study, one per workload (and per ladder rung), on a terminal."""

from __future__ import annotations

import sys
from typing import Any


class ProgressBars:
    """A progress bar per workload with the best objective so far (on a terminal)."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self._tqdm = tqdm
        self._bars: dict[str, Any] = {}
        self._best: dict[str, float] = {}

    def __call__(self, workload: str, done: int, total: int, best: float | None,
                 direction: str = "maximize") -> None:
        bar = self._bars.get(workload)
        if bar is None:
            bar = self._bars[workload] = self._tqdm(
                total=total or None, desc=workload, unit="trial", file=sys.stderr,
                disable=not sys.stderr.isatty(), leave=True)
        if best is not None and best == best:
            pick = max if direction == "maximize" else min
            self._best[workload] = pick(self._best.get(workload, best), best)
        bar.n = done
        bar.set_postfix(best=f"{self._best.get(workload, float('nan')):.4g}", refresh=True)

    def close(self) -> None:
        """Close every bar (each stays on the terminal)."""
        for bar in self._bars.values():
            bar.close()
