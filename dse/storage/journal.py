"""Optuna's state in the results database: a journal backend over ``dse_optuna_journal``.

Optuna's ``JournalStorage`` keeps a study as the replay of an append-only log. This backend keeps
one log per dse study in a table of the same database as the results, and holds appended lines
in memory until :meth:`write_pending`, which the runner calls inside the transaction that stores
the window's evaluations and trials. Optuna's state and the results therefore commit together: a
killed run resumes from exactly the last committed window, and a window costs one bulk insert
instead of Optuna's RDB storage's many small transactions per trial.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from optuna.storages import JournalStorage
from optuna.storages.journal import BaseJournalBackend
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.orm import Session

from dse.storage import models as m
from dse.storage.rows import journal_lines


class Transactions(Protocol):
    """What the journal needs of the store: a transaction to read the committed lines in
    (:class:`dse.storage.ResultStore` is one)."""

    def session(self) -> AbstractContextManager[Session]:
        """One transaction, committed on success."""
        ...


class SqlJournalBackend(BaseJournalBackend):
    """Journal of one dse study; a single runner writes it (the study's lease guarantees that).

    Args:
        database: where the study's committed lines are read from, once (the store).
        study_id: the study's id.
    """

    def __init__(self, database: Transactions, study_id: int) -> None:
        self._study_id = study_id
        with database.session() as s:
            self._committed: list[dict[str, Any]] = journal_lines(s, study_id)
        self._pending: list[dict[str, Any]] = []

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        committed = len(self._committed)
        if log_number_from >= committed:
            return self._pending[log_number_from - committed:]
        return self._committed[log_number_from:] + self._pending

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        self._pending.extend(logs)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def write_pending(self, s: Session) -> None:
        """Insert the pending lines in the caller's transaction; call :meth:`mark_committed`
        once it has committed (until then they stay pending, so a retry writes them again)."""
        start = len(self._committed)
        rows = [{"study_id": self._study_id, "seq": start + i, "log": log}
                for i, log in enumerate(self._pending)]
        for first in range(0, len(rows), 1000):
            s.execute(m.JournalRow.__table__.insert(), rows[first:first + 1000])

    def mark_committed(self) -> None:
        self._committed.extend(self._pending)
        self._pending = []


class DseJournalStorage(JournalStorage):
    """Optuna's journal storage minus one full scan per ``ask``.

    ``Study.ask`` first looks for enqueued (WAITING) trials by listing every trial of the study,
    which makes each ask cost O(trials). dse never enqueues trials, so that query is answered
    without the scan; every other query is Optuna's own.
    """

    def get_all_trials(self, study_id: int, deepcopy: bool = True,
                       states: Any = None) -> list[FrozenTrial]:
        if states is not None and tuple(states) == (TrialState.WAITING,):
            return []
        return super().get_all_trials(study_id, deepcopy=deepcopy, states=states)
