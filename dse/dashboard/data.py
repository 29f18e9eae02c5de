"""What the dashboard shows of a study, read from SQL without loading every trial.

A study of 100,000 trials is summarised from one narrow query (trial number, workload, status,
fidelity and the objectives: no parameter or metric documents decoded), plus the full rows of
only what is shown: the best configurations, an even sample of about :data:`SAMPLE_ROWS` trials
per workload (parameter importance is estimated from it; plots draw a thinner one), and the
trials of a fidelity
ladder's dearer rungs with the cheaper results of the same configs. Summaries are cached per
study and recomputed when the study gains trials.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dse.analysis.columns import trial_series
from dse.core.registry import (
    fidelity_ranks,
    load_target,
    search_space_class,
    workload_class,
    workload_from_dict,
)
from dse.core.space import SearchSpace
from dse.core.workload import Workload
from dse.storage.frames import best_trials, trials_frame
from dse.storage.store import ResultStore

SAMPLE_ROWS = 2000


@dataclass
class WorkloadSummary:
    """One workload of a study: its best configs, objective history and rows to draw."""

    label: str
    shape: str
    dtype: str
    b_layout: str
    trials: int
    ok: int
    best: pd.DataFrame            # as ``dse best`` ranks them (full rows)
    numbers: np.ndarray           # ok trials' numbers, first objective and series (trial_series:
    values: np.ndarray            # the evaluator, confirmed results apart), for the history (a
    evaluators: np.ndarray        # ladder's rungs and confirmations are drawn apart)
    sample: pd.DataFrame          # ok trials spread over the study, the best included
    ladder: pd.DataFrame          # trials scored by more than one fidelity (full rows)
    reasons: list[tuple[str, str, int]] = field(default_factory=list)  # (status, reason,
    # trials) of the commonest reasons trials were infeasible or failed


@dataclass
class StudySummary:
    """A study's header and per-workload summaries."""

    name: str
    target: Any
    spec: dict[str, Any]
    objectives: list[tuple[str, str]]
    params: list[str]
    status: str
    updated: Any
    total: int
    status_counts: dict[str, int]
    workloads: list[WorkloadSummary] = field(default_factory=list)
    rendered: dict[str, Any] = field(default_factory=dict)  # views drawn from it, by name

    @property
    def space(self) -> type[SearchSpace]:
        """The search space class of the study's family (its tables: time parts, axes)."""
        return search_space_class(self.target.space)

    @property
    def coverable(self) -> bool:
        """Whether a deployment page fits the study: several workloads of one dtype and B
        layout (a dispatch table serves one of each)."""
        kinds = {(w.get("dtype"), w.get("b_layout")) for w in self.spec.get("workloads", [])}
        return len(self.spec.get("workloads", [])) > 1 and len(kinds) == 1

    def workload_of(self, row: pd.Series) -> Workload:
        """The workload of a trial's row, as the study's family writes it."""
        kind = workload_class(self.space.workload_kind)
        return kind.parse(str(row["shape"]), str(row["dtype"]), str(row["b_layout"]))


def _best_numbers(narrow: pd.DataFrame, objectives: list[tuple[str, str]],
                  top: int) -> list[int]:
    """The trials ``dse best`` would name, by :func:`best_trials` over the narrow rows (a
    config's id stands for its parameters)."""
    columns = ["number", "status", "fidelity", "config_id", *(o for o, _ in objectives)]
    frame = narrow[[c for c in columns if c in narrow]].assign(
        shape=narrow["workload_id"], dtype=0, b_layout=0)
    frame.attrs = {"objectives": objectives, "params": ["config_id"]}
    best = best_trials(frame, top=top)
    return [int(n) for n in best["number"]] if not best.empty else []


def _ladder_rows(store: ResultStore, study: str, narrow: pd.DataFrame) -> pd.DataFrame:
    """Trials of configs that more than one fidelity scored (a ladder's pairs)."""
    ok = narrow[narrow["status"] == "ok"]
    if ok["fidelity"].nunique() < 2:  # a confirmation is a fidelity of its own, its evaluator not
        return trials_frame(study, [], {})
    ranks = ok["fidelity"].map(fidelity_ranks()).fillna(0)
    dear_configs = set(ok.loc[ranks > ranks.min(), "config_id"])
    numbers = ok.loc[ok["config_id"].isin(dear_configs), "number"].astype(int).tolist()
    return store.trials_by_number(study, numbers)


def _sample_numbers(ok_numbers: np.ndarray) -> list[int]:
    """At most :data:`SAMPLE_ROWS` of a workload's feasible trials, spread evenly over them."""
    if len(ok_numbers) > SAMPLE_ROWS:
        ok_numbers = ok_numbers[np.linspace(0, len(ok_numbers) - 1, SAMPLE_ROWS).astype(int)]
    return [int(n) for n in ok_numbers]


def summarise(store: ResultStore, study: str, top: int = 10) -> StudySummary:
    """The dashboard's summary of ``study`` (see the module's docstring for what is read).

    Raises:
        UsageError: no such study.
    """
    header = store.study_header(study)
    objectives = store.study_objectives(study)
    narrow = store.narrow_trials(study)
    bodies = store.workload_bodies(set(narrow["workload_id"].tolist()))
    summary = StudySummary(
        name=header["name"], target=load_target(header["spec"]["target"]), spec=header["spec"],
        objectives=objectives, params=[], status=header["status"], updated=header["updated"],
        total=len(narrow),
        status_counts={str(k): int(v) for k, v in narrow["status"].value_counts().items()})
    ladder = _ladder_rows(store, study, narrow)
    metric = objectives[0][0]
    for workload_id, group in narrow.groupby("workload_id", sort=False):
        ok = group[group["status"] == "ok"]
        best = store.trials_by_number(study, _best_numbers(group, objectives, top))
        sample = store.trials_by_number(study, _sample_numbers(ok["number"].to_numpy()))
        if not summary.params:  # a workload with no feasible trial still names them
            named = sample if len(sample) else store.trials_by_number(
                study, [int(group["number"].iloc[0])])
            summary.params = named.attrs.get("params", [])
        workload = workload_from_dict(bodies[int(workload_id)])
        summary.workloads.append(WorkloadSummary(
            label=workload.label, shape=str(workload.shape), dtype=workload.dtype.name,
            b_layout=workload.b_layout, trials=len(group), ok=len(ok),
            best=best, numbers=ok["number"].to_numpy(),
            values=(ok[metric].to_numpy(dtype=float) if metric in ok
                    else np.full(len(ok), np.nan)),
            evaluators=trial_series(ok),
            reasons=store.common_reasons(study, int(workload_id)) if len(ok) < len(group)
            else [],
            sample=pd.concat([sample, best], ignore_index=True).drop_duplicates("number"),
            ladder=ladder[ladder["number"].isin(group["number"])] if len(ladder) else ladder))
    return summary


class SummaryCache:
    """The last few study summaries, keyed by the study's version (thread-safe)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._items: OrderedDict[tuple[Any, ...], StudySummary] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[tuple[Any, ...], threading.Lock] = {}

    def get(self, store: ResultStore, study: str) -> StudySummary:
        key = (store.url, study, *store.study_version(study))
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            building = self._building.setdefault(key, threading.Lock())
        with building:  # one summary per key at a time: later callers wait for the first
            with self._lock:
                if key in self._items:
                    return self._items[key]
            summary = summarise(store, study)
            with self._lock:
                self._items[key] = summary
                self._building.pop(key, None)
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
        return summary
