"""``dse optuna-export``: a study's Optuna state as a journal file that Optuna's own tools read.

dse keeps Optuna's journal in its database (``dse_optuna_journal``); this copies one study's log
to a ``JournalFileBackend`` file, so ``optuna-dashboard FILE`` (or
``optuna.load_study(storage=JournalStorage(JournalFileBackend(FILE)))``) opens it.
"""

from __future__ import annotations

from pathlib import Path

from optuna.storages.journal import JournalFileBackend

from dse.errors import UsageError
from dse.storage import ResultStore
from dse.storage.journal import SqlJournalBackend


def export_journal(storage: str | None, study: str, out: str | Path) -> int:
    """Write the study's journal to ``out`` (which must not exist); returns the line count."""
    path = Path(out)
    if path.exists():
        raise UsageError(f"{path} exists: a journal file is appended to, give a new path")
    store = ResultStore(storage, existing=True)
    with store.session() as s:
        study_id = store.require_study(s, study).id
    logs = list(SqlJournalBackend(store, study_id).read_logs(0))
    if not logs:
        raise UsageError(f"study {study!r} has no Optuna state (exhaustive and ladder studies "
                         "do not use Optuna)")
    JournalFileBackend(str(path)).append_logs(logs)
    return len(logs)
