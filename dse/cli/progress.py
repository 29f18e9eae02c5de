"""Progress bars of a running study, one per workload (and per ladder rung), on a terminal."""

from __future__ import annotations

import sys
from typing import IO, Any


class ProgressBars:
    """A progress bar per workload with the best objective so far (on a terminal). A bar is
    closed as soon as its workload has all its trials, so its elapsed time and rate are that
    workload's, not the whole study's."""

    def __init__(self, file: IO[str] | None = None, enabled: bool | None = None) -> None:
        from tqdm import tqdm

        self._tqdm = tqdm
        self._file = file or sys.stderr
        self._enabled = self._file.isatty() if enabled is None else enabled
        self._bars: dict[str, Any] = {}
        self._best: dict[str, float] = {}
        self._finished: set[str] = set()

    def __call__(self, workload: str, done: int, total: int, best: float | None,
                 direction: str = "maximize") -> None:
        if workload in self._finished:
            return
        bar = self._bars.get(workload)
        if bar is None:
            bar = self._bars[workload] = self._tqdm(
                total=total or None, desc=workload, unit="trial", file=self._file,
                disable=not self._enabled, leave=True)
        if best is not None and best == best:
            pick = max if direction == "maximize" else min
            self._best[workload] = pick(self._best.get(workload, best), best)
        bar.n = done
        if workload in self._best:
            bar.set_postfix(best=f"{self._best[workload]:.4g}", refresh=False)
        bar.refresh()
        if total and done >= total:
            bar.close()
            self._finished.add(workload)

    def finished(self, workload: str) -> bool:
        """Whether ``workload``'s bar has been closed with all its trials."""
        return workload in self._finished

    def close(self) -> None:
        """Close every bar still open (each stays on the terminal)."""
        for workload, bar in self._bars.items():
            if workload not in self._finished:
                bar.close()
