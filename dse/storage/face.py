"""The store's public face: what code outside :mod:`dse.storage` may ask of a results store.

Each method is one transaction, takes and returns plain values, frames or the store's small
records (:class:`~dse.storage.runs.Claim`, :class:`~dse.storage.runs.Window`,
:class:`~dse.storage.pages.TrialPage`), never a database session or row.
:class:`dse.storage.ResultStore` implements it over SQLAlchemy; the conformance suite
(``tests/test_conformance_store.py``) checks that it does, on SQLite and PostgreSQL, and a new
store is tested by adding it there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pandas as pd

    from dse.core.results import EvalResult
    from dse.storage.pages import TrialPage
    from dse.storage.runs import Claim, Window


@runtime_checkable
class StoreFace(Protocol):
    """Studies, their trials and the results they are served from, as callers see them."""

    # -- where the results are ----------------------------------------------------------------
    url: str  # the database's URL as given (normalised), e.g. a cache key of its reads

    @property
    def safe_url(self) -> str:
        """Where the results are, as a person reads it (no password)."""
        ...

    def schema_version(self) -> int:
        """The database's schema version."""
        ...

    # -- a study run --------------------------------------------------------------------------
    def claim_study(self, name: str, identity: dict[str, Any], target: Any, owner: str,
                    lease_s: float) -> Claim:
        """Create the study or find it (same identity and target constants), and lease it to
        ``owner`` for ``lease_s`` seconds; :class:`UsageError` if it differs or another live
        runner holds it."""
        ...

    def renew_lease(self, name: str, owner: str, lease_s: float) -> None:
        """Extend ``owner``'s lease (refused once another runner took it)."""
        ...

    def release(self, study_name: str, owner: str, status: str,
                unchanged_since: datetime | None = None) -> None:
        """End ``owner``'s run with ``status`` (a study another runner took over keeps its
        lease and status; ``unchanged_since``: the last update a run that changed nothing
        keeps)."""
        ...

    def open_workload(self, study_id: int, body: Mapping[str, Any]) -> tuple[int, int]:
        """The id of a workload (stored once) and how many trials the study has of it."""
        ...

    def stored_keys(self, target_id: int, workload_id: int, evaluator: str,
                    version: str) -> set[str]:
        """Config keys with a stored evaluation by this evaluator version."""
        ...

    def stored_results(self, target_id: int, workload_id: int, keys: Sequence[str],
                       evaluator: str, version: str) -> dict[str, EvalResult]:
        """Stored results of these configs by this evaluator version, by config key (their
        parameters left empty)."""
        ...

    def keys_with_trials(self, study_id: int, workload_id: int, evaluator: str,
                         version: str | None = None) -> set[str]:
        """Config keys the study already has a trial of, by this evaluator (of this version,
        when given)."""
        ...

    def commit_window(self, window: Window) -> None:
        """Write a window's configs, new results, trials, faults, journal lines and renewed
        lease in one transaction; on failure nothing is written."""
        ...

    def record_agreement(self, study_id: int, workload_id: int, rung: int, cheaper: str,
                         dearer: str, n: int, top_k: int,
                         values: Mapping[str, float | None]) -> None:
        """Store how well ladder rung ``rung - 1`` ranked what rung ``rung`` scored."""
        ...

    def keep_frame(self, name: str) -> int | None:
        """Keep the study's frame for whole reads (large studies only); its bytes, or None.
        A database error is reported, not raised."""
        ...

    # -- results measured outside a run -------------------------------------------------------
    def put_results(self, target: Any, workload_body: Mapping[str, Any], space: str,
                    configs: Sequence[Mapping[str, Any]],
                    runs: Sequence[tuple[Any, Sequence[EvalResult]]]) -> None:
        """Store results outside any study (``runs``: an evaluator and its results, one per
        config of ``configs`` by position)."""
        ...

    def ingest_results(self, study: str, evaluator: Any,
                       records: Sequence[tuple[Mapping[str, Any], str, Mapping[str, Any],
                                               EvalResult]],
                       provenance: Mapping[str, Any]) -> dict[str, int]:
        """Store results measured elsewhere as evaluations and trials of the study; how many
        evaluations and trials were new and how many differ in status from stored ones."""
        ...

    # -- reads --------------------------------------------------------------------------------
    def has_study(self, name: str) -> bool:
        """Whether a study of that name is stored."""
        ...

    def study_spec(self, name: str) -> dict[str, Any]:
        """The study's stored identity. Every read of a named study raises
        :class:`UsageError`, naming the studies there, when it does not exist."""
        ...

    def study_objectives(self, name: str) -> list[tuple[str, str]]:
        """The study's (metric, direction) objectives."""
        ...

    def study_header(self, name: str) -> dict[str, Any]:
        """The study's name, spec, status and last update."""
        ...

    def study_version(self, name: str) -> tuple[Any, ...]:
        """A value that changes whenever the study gains or updates trials."""
        ...

    def study_journal(self, name: str) -> list[dict[str, Any]]:
        """The study's committed Optuna journal lines, in order."""
        ...

    def load_trials(self, name: str) -> pd.DataFrame:
        """Every trial of the study, parameters and metrics as columns."""
        ...

    def best(self, name: str, top: int = 10) -> pd.DataFrame:
        """The ``top`` best ok trials per workload (the Pareto front for several
        objectives)."""
        ...

    def trial_page(self, name: str, *, where: str | None = None, sort: str = "-tops",
                   offset: int = 0, limit: int = 50, unique: bool = False) -> TrialPage:
        """One page of the study's trials, filtered, sorted and cut by the database."""
        ...

    def trials_by_number(self, name: str, numbers: list[int]) -> pd.DataFrame:
        """Full rows of the given trials, in the given order."""
        ...

    def narrow_trials(self, name: str) -> pd.DataFrame:
        """One narrow row per trial (ids, status, evaluator, fidelity, the objectives)."""
        ...

    def workload_bodies(self, ids: set[int]) -> dict[int, dict[str, Any]]:
        """Stored workload bodies by id."""
        ...

    def common_reasons(self, name: str, workload_id: int,
                       top: int = 3) -> list[tuple[str, str, int]]:
        """The commonest (status, reason, trials) of a workload's trials that were not ok."""
        ...

    def list_studies(self) -> pd.DataFrame:
        """One row per study: target, workloads, trials, objective, best value, status."""
        ...

    def fidelity_report(self, name: str) -> list[dict[str, Any]]:
        """How well each ladder rung ranked the next one's configs, per workload."""
        ...

    def faults(self, name: str) -> pd.DataFrame:
        """The study's faults of the machinery (lost workers or nodes), oldest first."""
        ...
