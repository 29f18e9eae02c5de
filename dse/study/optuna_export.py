"""``dse optuna-export``: a study's Optuna state as a journal file that Optuna's own tools read.

dse keeps Optuna's journal in its database (``dse_optuna_journal``); this copies one study's log
to a ``JournalFileBackend`` file, so ``optuna-dashboard FILE`` (or
``optuna.load_study(storage=JournalStorage(JournalFileBackend(FILE)))``) opens it.
"""

from __future__ import annotations

from pathlib import Path

from optuna.storages.journal import JournalFileBackend

from dse.core.errors import UsageError
from dse.storage.store import ResultStore


def export_journal(store: ResultStore, study: str, out: str | Path) -> int:
    """Write the study's journal to ``out`` (which must not exist); returns the line count."""
    path = Path(out)
    if path.exists():
        raise UsageError(f"{path} exists: a journal file is appended to, give a new path")
    logs = store.study_journal(study)
    if not logs:
        raise UsageError(f"study {study!r} has no Optuna state (exhaustive and ladder studies "
                         "do not use Optuna)")
    JournalFileBackend(str(path)).append_logs(logs)
    return len(logs)
