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
from dataclasses import dataclass
from typing import Any

from dse.results import EvalResult, Status
from dse.storage import ResultStore
from dse.storage.journal import SqlJournalBackend
from dse.storage.store import now


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


@dataclass
class _Trial:
    workload_id: int
    key: str
    params: dict[str, Any]
    result: EvalResult
    cached: bool
    evaluator: Any


class Recorder:
    """Pending trials of one study run and the cache view that includes them."""

    def __init__(self, store: ResultStore, journal: SqlJournalBackend, study_name: str,
                 study_id: int, target_id: int, evaluator: Any, space: str, next_number: int,
                 renew_lease: Any, host: str, versions: dict[str, str],
                 commit_every: int = 64, commit_interval_s: float = 2.0) -> None:
        self.store, self.journal = store, journal
        self.study_name, self.study_id, self.target_id = study_name, study_id, target_id
        self.evaluator, self.space = evaluator, space
        self.next_number = next_number
        self.renew_lease = renew_lease
        self.host, self.versions = host, versions
        self.commit_every, self.commit_interval_s = commit_every, commit_interval_s
        self._pending: list[_Trial] = []
        # results seen by this run and config keys stored, per (workload, evaluator, version)
        self._results: dict[tuple[int, str, str, str], EvalResult] = {}
        self._stored_keys: dict[tuple[int, str, str], set[str]] = {}
        self._last_commit = time.monotonic()

    def lookup(self, workload_id: int, keys: list[str],
               evaluator: Any = None) -> dict[str, EvalResult]:
        """Known results of these configs: this run's (committed or not), then the database's.

        Which configs the database holds is read once per workload (then kept up to date with
        this run's commits), so a miss costs no query and a repeat costs none either. An
        evaluation another runner commits meanwhile is not seen as a hit; storing it again is a
        no-op, so nothing is duplicated.
        """
        ev = evaluator or self.evaluator
        scope = (workload_id, ev.name, ev.version)
        if scope not in self._stored_keys:
            with self.store.session() as s:
                self._stored_keys[scope] = self.store.evaluated_keys(
                    s, self.target_id, workload_id, ev.name, ev.version)
        found = {k: self._results[(*scope, k)] for k in keys if (*scope, k) in self._results}
        missing = [k for k in keys if k not in found and k in self._stored_keys[scope]]
        if missing:
            with self.store.session() as s:
                rows = self.store.find_evaluations_by_key(s, self.target_id, workload_id,
                                                          missing, ev.name, ev.version)
            for k, r in rows.items():
                found[k] = self._results[(*scope, k)] = EvalResult(
                    Status(r.status), {}, r.metrics, r.reason, r.elapsed_s)
        return found

    def add(self, workload_id: int, keys: list[str], configs: list[dict[str, Any]],
            results: list[EvalResult], cached: list[bool], evaluators: list[Any] | None = None,
            commit: bool = True) -> None:
        """Queue trials (``evaluators``: one per config, default the study's); with ``commit``,
        write the window if it is full or old (see :meth:`maybe_flush`)."""
        chosen = evaluators or [self.evaluator] * len(keys)
        for key, params, result, hit, ev in zip(keys, configs, results, cached, chosen,
                                                strict=True):
            self._pending.append(_Trial(workload_id, key, params, result, hit, ev))
            self._results.setdefault((workload_id, ev.name, ev.version, key), result)
        if commit:
            self.maybe_flush()

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
        if not self._pending and not self.journal.pending:
            return
        with deferred_interrupts():
            self._write_window()

    def _write_window(self) -> None:
        created = now()
        with self.store.session() as s:
            ids = self.store.config_ids(s, self.space, [t.params for t in self._pending])
            new_rows, seen = [], set()
            for trial, cid in zip(self._pending, ids, strict=True):
                ev = trial.evaluator
                if trial.cached or (trial.workload_id, cid, ev.name, ev.version) in seen:
                    continue
                seen.add((trial.workload_id, cid, ev.name, ev.version))
                r = trial.result
                new_rows.append({
                    "target_id": self.target_id, "workload_id": trial.workload_id,
                    "config_id": cid, "evaluator": ev.name, "version": ev.version,
                    "fidelity": ev.fidelity, "status": r.status.value, "reason": r.reason,
                    "metrics": r.metrics, "tops": r.metrics.get("tops"),
                    "elapsed_s": r.elapsed_s, "host": self.host, "versions": self.versions,
                    "created_at": created})
            self.store.put_evaluations(s, new_rows)
            evaluation_ids: dict[tuple[int, str, str, int], int] = {}
            for workload_id, name, version in {(t.workload_id, t.evaluator.name,
                                                t.evaluator.version) for t in self._pending}:
                wanted = [cid for t, cid in zip(self._pending, ids, strict=True)
                          if (t.workload_id, t.evaluator.name) == (workload_id, name)]
                stored = self.store.find_evaluations(s, self.target_id, workload_id, wanted,
                                                     name, version)
                evaluation_ids.update({(workload_id, name, version, cid): row.id
                                       for cid, row in stored.items()})
            self.store.add_trials(s, [{
                "study_id": self.study_id, "number": self.next_number + i,
                "workload_id": t.workload_id, "config_id": cid,
                "evaluation_id": evaluation_ids[(t.workload_id, t.evaluator.name,
                                                 t.evaluator.version, cid)],
                "status": t.result.status.value, "cached": int(t.cached), "created_at": created}
                for i, (t, cid) in enumerate(zip(self._pending, ids, strict=True))])
            self.journal.write_pending(s)
            self.renew_lease(s)
        self.journal.mark_committed()
        for trial in self._pending:
            ev = trial.evaluator
            self._stored_keys.setdefault((trial.workload_id, ev.name, ev.version),
                                         set()).add(trial.key)
        self.next_number += len(self._pending)
        self._pending = []
        self._last_commit = time.monotonic()
