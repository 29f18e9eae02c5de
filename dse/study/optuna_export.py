"""``dse optuna-export``: a study as an Optuna journal file that Optuna's own tools open.

The file is built from dse's trials, not copied from the sampler's journal: the sampler sees
encoded coordinates (and exhaustive and ladder studies have no sampler at all), while a person
opening ``optuna-dashboard FILE`` wants the real parameters. Each trial keeps its dse number
(trials are added in number order, and Optuna numbers them in that order from 0), its parameter
values (``m_ct``, ``k_ct``, … with the values the study used as their choices), the study's
objectives as values with their metric names, and every metric, the workload, the evaluator and
the reason of an infeasible or failed trial as user attributes. A trial that is not ok is
``FAIL`` with its reason.

dse keeps its own schema rather than Optuna's RDB tables: one evaluation serves every study
that asks for the same config (Optuna's tables have a trial per study and nowhere for that),
and a trial's metrics, fidelity and workload are columns the store filters and pages in SQL.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from optuna.distributions import CategoricalDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState, create_trial

from dse.core.errors import UsageError
from dse.storage.store import ResultStore

TRIAL_COLUMNS = ("study", "number", "params")  # dse's bookkeeping, not the trial's attributes


def _plain(value: Any) -> Any:
    """A value as JSON keeps it: numbers, strings, booleans; NaN and None as None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    return value if isinstance(value, int | float | str | bool) else str(value)


def _trial(row: pd.Series, params: list[str], distributions: dict[str, CategoricalDistribution],
           objectives: list[tuple[str, str]]) -> optuna.trial.FrozenTrial:
    """One dse trial as an Optuna trial."""
    values = [_plain(row.get(metric)) for metric, _ in objectives]
    ok = row["status"] == "ok" and all(isinstance(v, int | float) for v in values)
    attrs = {name: _plain(value) for name, value in row.items()
             if name not in TRIAL_COLUMNS and name not in params}
    chosen = {p: v for p in params if (v := _plain(row[p])) is not None}
    return create_trial(
        state=TrialState.COMPLETE if ok else TrialState.FAIL,
        values=values if ok else None, params=chosen,
        distributions={p: distributions[p] for p in chosen},
        user_attrs={k: v for k, v in attrs.items() if v is not None})


def export_journal(store: ResultStore, study: str, out: str | Path,
                   progress: Callable[[int, int], None] | None = None) -> int:
    """Write ``study`` to the journal file ``out`` (which must not exist) as one Optuna study of
    the same name; returns the number of trials written. ``progress`` is called with (trials
    written, trials in all) as it goes."""
    path = Path(out)
    if path.exists():
        raise UsageError(f"{path} exists: a journal file is appended to, give a new path")
    frame = store.load_trials(study)
    if frame.empty:
        raise UsageError(f"study {study!r} has no trials yet: run it first")
    frame = frame.sort_values("number")
    if list(frame["number"]) != list(range(len(frame))):
        raise UsageError(f"study {study!r}'s trial numbers are not 0 to {len(frame) - 1}: "
                         "Optuna would number them otherwise")
    params = list(frame.attrs.get("params", []))
    objectives = list(frame.attrs.get("objectives", [("tops", "maximize")]))
    distributions = {p: CategoricalDistribution(sorted(
        {_plain(v) for v in frame[p] if _plain(v) is not None}, key=str)) for p in params}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    view = optuna.create_study(
        storage=JournalStorage(JournalFileBackend(str(path))), study_name=study,
        directions=[direction for _, direction in objectives])
    with warnings.catch_warnings():  # metric names are "experimental" in Optuna, not for us
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        view.set_metric_names([metric for metric, _ in objectives])
    batch = 500
    for start in range(0, len(frame), batch):
        rows = frame.iloc[start:start + batch]
        view.add_trials([_trial(row, params, distributions, objectives)
                         for _, row in rows.iterrows()])
        if progress:
            progress(min(start + batch, len(frame)), len(frame))
    return len(frame)
