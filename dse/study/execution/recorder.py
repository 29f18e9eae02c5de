"""Buffering of a study's results and their commit together with Optuna's journal.

Trials are told to Optuna as soon as they are evaluated, but written to the database in windows
(every ``commit_every`` trials or ``commit_interval_s`` seconds, and at the end): one
transaction stores the window's configs, new evaluations, trials and Optuna's journal lines, so
the database always holds a consistent prefix of the run. A killed run loses at most the open
window, which the resumed run simply does again.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from dse.core.results import EvalResult
from dse.storage.journal import SqlJournalBackend
from dse.storage.runs import Measured, PendingTrial, Window
from dse.storage.store import ResultStore


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block is done, then act on the first that came (only
    the main thread receives signals; elsewhere the block just runs)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda number, frame: caught.append(number))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            handler = previous[caught[0]]
            if callable(handler):
                handler(caught[0], None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(caught[0])


class Recorder:
    """Pending trials of one study run and the cache view that includes them."""

    def __init__(self, store: ResultStore, journal: SqlJournalBackend, study: str,
                 study_id: int, target_id: int, evaluator: Measured, space: str,
                 next_number: int, lease: tuple[str, float], host: str,
                 versions: dict[str, str], commit_every: int = 64,
                 commit_interval_s: float = 2.0) -> None:
        self.store, self.journal = store, journal
        self.study, self.study_id, self.target_id = study, study_id, target_id
        self.evaluator, self.space = evaluator, space
        self.next_number = next_number
        self.owner, self.lease_s = lease
        self.host, self.versions = host, versions
        self.commit_every, self.commit_interval_s = commit_every, commit_interval_s
        self._pending: list[PendingTrial] = []
        self._faults: list[dict[str, Any]] = []  # of the machinery, written with the window
        # results seen by this run and config keys stored, per (workload, evaluator, version)
        self._results: dict[tuple[int, str, str, str], EvalResult] = {}
        self._stored_keys: dict[tuple[int, str, str], set[str]] = {}
        self._last_commit = time.monotonic()

    def lookup(self, workload_id: int, keys: list[str],
               evaluator: Measured | None = None) -> dict[str, EvalResult]:
        """Known results of these configs: this run's (committed or not), then the database's.

        Which configs the database holds is read once per workload (then kept up to date with
        this run's commits), so a miss costs no query and a repeat costs none either. An
        evaluation another runner commits meanwhile is not seen as a hit; storing it again is a
        no-op, so nothing is duplicated.
        """
        ev = evaluator or self.evaluator
        scope = (workload_id, ev.name, ev.version)
        if scope not in self._stored_keys:
            self._stored_keys[scope] = self.store.stored_keys(self.target_id, workload_id,
                                                              ev.name, ev.version)
        found = {k: self._results[(*scope, k)] for k in keys if (*scope, k) in self._results}
        missing = [k for k in keys if k not in found and k in self._stored_keys[scope]]
        if missing:
            rows = self.store.stored_results(self.target_id, workload_id, missing, ev.name,
                                             ev.version)
            for k, result in rows.items():
                found[k] = self._results[(*scope, k)] = result
        return found

    def add(self, workload_id: int, keys: list[str], configs: list[dict[str, Any]],
            results: list[EvalResult], cached: list[bool],
            evaluators: list[Measured] | None = None, commit: bool = True) -> None:
        """Queue trials (``evaluators``: one per config, default the study's); with ``commit``,
        write the window if it is full or old (see :meth:`maybe_flush`)."""
        chosen = evaluators or [self.evaluator] * len(keys)
        for key, params, result, hit, ev in zip(keys, configs, results, cached, chosen,
                                                strict=True):
            self._pending.append(PendingTrial(workload_id, key, params, result, hit, ev))
            self._results.setdefault((workload_id, ev.name, ev.version, key), result)
        if commit:
            self.maybe_flush()

    def add_faults(self, workload_id: int, faults: list[dict[str, Any]]) -> None:
        """Queue faults of the machinery met on a workload (see
        :class:`dse.study.execution.pool.Fault`) for the next window."""
        self._faults.extend({**fault, "workload_id": workload_id} for fault in faults)

    def maybe_flush(self) -> None:
        """Write the window if it holds ``commit_every`` trials or is ``commit_interval_s``
        old. A sampler's study calls this after telling Optuna the results, so a window
        never holds trials whose results its journal lacks."""
        if (len(self._pending) >= self.commit_every
                or time.monotonic() - self._last_commit >= self.commit_interval_s):
            self.flush()

    def flush(self) -> None:
        """Write the pending window in one transaction. On failure nothing of it is written
        and it all stays pending, so calling again (say after Ctrl-C) writes it whole; Ctrl-C
        or SIGTERM during the write takes effect once the window is written and marked so
        (between the two, writing it again would break the unique trial numbers)."""
        if not self._pending and not self.journal.pending and not self._faults:
            return
        with deferred_interrupts():
            self.store.commit_window(Window(
                self.study, self.study_id, self.target_id, self.space, self.next_number,
                self._pending, self.journal, self.owner, self.lease_s, self.host,
                self.versions, self._faults))
            self.journal.mark_committed()
            for trial in self._pending:
                ev = trial.evaluator
                self._stored_keys.setdefault((trial.workload_id, ev.name, ev.version),
                                             set()).add(trial.key)
            self.next_number += len(self._pending)
            self._pending, self._faults = [], []
        self._last_commit = time.monotonic()
