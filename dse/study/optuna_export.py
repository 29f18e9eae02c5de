"""``dse optuna-export``: a study as an Optuna journal file that Optuna's own tools open.

The file is built from dse's trials, not copied from the sampler's journal: the sampler sees
encoded coordinates (and exhaustive and ladder studies have no sampler at all), while a person
opening ``optuna-dashboard FILE`` wants the real parameters. Each trial keeps its dse number
(trials are added in number order, and Optuna numbers them in that order from 0), its parameter
values (``m_ct``, ``k_ct``, … with the values the study used as their choices), the study's
objectives as values with their metric names, and every metric, the workload, the evaluator and
the reason of an infeasible or failed trial as user attributes. A trial that is not ok is
``FAIL`` with its reason.

A numeric parameter is exported as a number (an integer or float distribution, so Optuna's plots
order its axis 32, 48, …, 208 rather than as text), a parameter the study never varied is left
out of the trials (its value is a user attribute of the study: a plot of one value is a dot), and
each trial keeps its times: complete when dse recorded it, started its evaluation's time before.

dse keeps its own schema rather than Optuna's RDB tables: one evaluation serves every study
that asks for the same config (Optuna's tables have a trial per study and nowhere for that),
and a trial's metrics, fidelity and workload are columns the store filters and pages in SQL.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState, create_trial

from dse.core.errors import UsageError
from dse.storage.store import ResultStore

# dse's bookkeeping, not the trial's attributes (its time is the trial's own, see _times)
TRIAL_COLUMNS = ("study", "number", "params", "created_at")
LOG_SPAN = 100  # a positive parameter spanning more than this factor gets a log axis


def _plain(value: Any) -> Any:
    """A value as JSON keeps it: numbers, strings, booleans; NaN and None as None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    return value if isinstance(value, int | float | str | bool) else str(value)


def distribution(values: list[Any]) -> BaseDistribution | None:
    """The Optuna distribution of a parameter that took ``values`` (plain, none missing): an
    integer or float range for numbers, categories otherwise; None for a parameter that took
    one value (or none), which is left out of the trials."""
    distinct = set(values)
    if len(distinct) < 2:
        return None
    if all(isinstance(v, int) and not isinstance(v, bool) for v in distinct):
        low, high = min(distinct), max(distinct)
        if low > 0 and high / low > LOG_SPAN:  # tile sizes 16 to 4096: a log axis reads them
            return IntDistribution(low, high, log=True)
        # the widest step that holds every value (multiples of 16 stay multiples of 16)
        return IntDistribution(low, high, step=math.gcd(*(v - low for v in distinct)))
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in distinct):
        low, high = float(min(distinct)), float(max(distinct))
        return FloatDistribution(low, high, log=low > 0 and high / low > LOG_SPAN)
    return CategoricalDistribution(sorted(distinct, key=str))


def _times(row: pd.Series) -> tuple[datetime | None, datetime | None]:
    """When the trial started and completed: dse records a trial when its result is stored,
    and its evaluation took ``elapsed_s`` before that (nothing for a result served from the
    store)."""
    complete = row.get("created_at")
    if complete is None or pd.isna(complete):
        return None, None
    complete = pd.Timestamp(complete).to_pydatetime()
    elapsed = _plain(row.get("elapsed_s"))
    if bool(row.get("cached")) or not isinstance(elapsed, int | float) or elapsed < 0:
        return complete, complete
    return complete - timedelta(seconds=elapsed), complete


def _trial(row: pd.Series, params: list[str], distributions: dict[str, BaseDistribution],
           objectives: list[tuple[str, str]]) -> optuna.trial.FrozenTrial:
    """One dse trial as an Optuna trial (only the parameters in ``distributions``)."""
    values = [_plain(row.get(metric)) for metric, _ in objectives]
    ok = row["status"] == "ok" and all(isinstance(v, int | float) for v in values)
    attrs = {name: _plain(value) for name, value in row.items()
             if name not in TRIAL_COLUMNS and name not in params}
    chosen = {p: v for p in params if p in distributions and (v := _plain(row[p])) is not None}
    trial = create_trial(
        state=TrialState.COMPLETE if ok else TrialState.FAIL,
        values=values if ok else None, params=chosen,
        distributions={p: distributions[p] for p in chosen},
        user_attrs={k: v for k, v in attrs.items() if v is not None})
    start, complete = _times(row)
    if complete is not None:
        trial.datetime_start, trial.datetime_complete = start, complete
    return trial


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
    taken = {p: [v for v in map(_plain, frame[p]) if v is not None] for p in params}
    distributions = {p: d for p in params if (d := distribution(taken[p])) is not None}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    view = optuna.create_study(
        storage=JournalStorage(JournalFileBackend(str(path))), study_name=study,
        directions=[direction for _, direction in objectives])
    fixed = {p: taken[p][0] for p in params if p not in distributions and taken[p]}
    if fixed:  # what the trials leave out, kept where a reader of the study finds it
        view.set_user_attr("fixed parameters", fixed)
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
