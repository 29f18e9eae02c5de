"""The study run: its workloads through the study's strategy (ask/tell, exhaustive or a
ladder), evaluations in-process or on Ray, results committed with Optuna's state (see
:mod:`dse.study.execution.recorder`).

A config already evaluated by the same evaluator version on the same target and workload (by
this or any other study in the database) is served from the store, not evaluated again.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna

import dse
from dse.core.errors import InfrastructureError, UsageError
from dse.core.evaluator import EvalContext, Evaluator, EvaluatorError
from dse.core.params import ConfigBatch, batch_take
from dse.core.registry import search_space_class, strategy
from dse.core.results import EvalResult, Status
from dse.core.workload import Workload
from dse.offline.exchange import OfflineExport
from dse.storage.journal import DseJournalStorage, SqlJournalBackend
from dse.storage.runs import Measured
from dse.storage.store import DiskFullError, ResultStore, open_store
from dse.study.execution.pool import Pool, make_pool
from dse.study.execution.port import WorkloadRun, WorkloadSummary, config_keys
from dse.study.execution.progress import Progress, Stage
from dse.study.execution.recorder import Recorder
from dse.study.sampling.samplers import make_sampler
from dse.study.spec import StudySpec
from dse.study.strategies.exhaustive import feasible_configs

LEASE_S = 120.0
CHECKING = "checking the workloads' spaces"  # the progress shown before the first trial


@dataclass
class RunSummary:
    """What :func:`run_study` reports: the study, its storage, how the run ended, its duration and
    each workload's counts."""

    study: str
    storage: str
    status: str
    elapsed_s: float
    workloads: list[WorkloadSummary]
    offline: OfflineExport | None = None  # what ``--offline`` wrote, if a rung was exported


def owner_id() -> str:
    """``host:pid`` of this process: the owner recorded in a study's lease."""
    return f"{socket.gethostname()}:{os.getpid()}"


def library_versions() -> dict[str, str]:
    """Versions of dse, Python, NumPy and Optuna, stored with every evaluation."""
    return {"dse": dse.__version__, "python": platform.python_version(),
            "numpy": np.__version__, "optuna": optuna.__version__}


class StudyRunner:
    """Runs (or resumes) one study against one store; the port its strategies use
    (:class:`dse.study.execution.port.Port`)."""

    def __init__(self, spec: StudySpec, store: ResultStore, ray_address: str | None = None,
                 progress: Progress | None = None, offline: str | None = None) -> None:
        self.spec, self.store, self.progress = spec, store, progress
        self.ray_address = ray_address
        self.resolution = spec.resolved()
        self.target = self.resolution.target
        self.evaluator = self.resolution.evaluator(spec.evaluator)
        self.owner = owner_id()
        self.deadline: float | None = None  # set when the trials begin (see run)
        self.evaluated_any = False  # a run with a time budget still does its first round
        self.offline_path = offline
        self.offline_rung, self.offline = self._offline_rung(offline)
        self.strategy = strategy(spec.strategy.name)
        if self.strategy.uses_sampler:
            make_sampler(spec, 1)  # refuse unknown options or a missing package before storing
        # every workload's space is checked before the store is touched; a strategy that
        # lists the whole space keeps its feasible configs for the run
        self._feasible: dict[Workload, ConfigBatch] = {}
        for i, workload in enumerate(spec.workloads):
            if progress is not None and len(spec.workloads) > 1:  # ~0.1 s each: say so
                progress(CHECKING, i, len(spec.workloads), None, "maximize")
            ctx = self.context(workload)
            if self.strategy.enumerates:
                self._feasible[workload] = feasible_configs(ctx, spec)
            else:
                _require_feasible(ctx, spec)
        if progress is not None and len(spec.workloads) > 1:
            progress(CHECKING, len(spec.workloads), len(spec.workloads), None, "maximize")
        claim = store.claim_study(spec.name, spec.identity(), self.target, self.owner, LEASE_S)
        self.claim = claim
        self.study_id = claim.study_id
        try:
            self.pool = make_pool(self.evaluator, spec.workers, ray_address)
        except BaseException:  # no Ray cluster at the address, Ctrl-C: the study is not running
            store.release(spec.name, self.owner, claim.status_before, claim.updated_before)
            raise
        # A vectorised model is asked one trial at a time (the sampler learns from every result);
        # slower evaluators get enough trials per round to keep every worker busy.
        self.batch_size = spec.batch_size or (1 if self.evaluator.capabilities.score
                                              else 2 * self.pool.workers)
        self.journal = SqlJournalBackend(store, self.study_id)
        self.recorder = Recorder(
            store, self.journal, spec.name, self.study_id, claim.target_id,
            Measured.of(self.evaluator), search_space_class(self.target.space).name,
            claim.next_number, (self.owner, LEASE_S), socket.gethostname(), library_versions())
        self._rules = _StudyRules.of(spec)

    def _offline_rung(self, offline: str | None) -> tuple[int | None, OfflineExport | None]:
        """Refuse an evaluator that cannot run here, before anything is stored; with
        ``offline``, the one ladder rung after the first that cannot is exported instead."""
        spec = self.spec
        plugins = [r.evaluator for r in spec.ladder] or [spec.evaluator]
        stuck = []
        for index, plugin in enumerate(plugins):
            evaluator = self.resolution.evaluator(plugin)
            problem = evaluator.unavailable()
            if problem:
                stuck.append((index, evaluator, problem))
        if offline is not None and not spec.ladder:
            raise UsageError("--offline exports a ladder rung, and this study has no ladder; "
                             "use dse export-configs for its best configs")
        if not stuck:
            return None, None
        index, evaluator, problem = stuck[0]
        offline_capable = evaluator.capabilities.offline
        if offline is None or index == 0 or len(stuck) > 1 or not offline_capable:
            hint = (" (or run with --offline FILE to measure that rung elsewhere)"
                    if spec.ladder and index > 0 and offline_capable and offline is None else "")
            raise UsageError(f"evaluator {evaluator.name!r} cannot run here: {problem}{hint}")
        plugin = plugins[index]
        return index, OfflineExport(spec.name, spec.target, plugin.name, plugin.options)

    def _keep_leased(self, stop: threading.Event) -> None:
        """Renew the lease every quarter of its length until ``stop``: commits renew it too,
        but an evaluation longer than the lease (a hardware run, a full simulation) must not
        let another runner take the study meanwhile."""
        while not stop.wait(LEASE_S / 4):
            try:
                self.store.renew_lease(self.spec.name, self.owner, LEASE_S)
            except UsageError as exc:  # another runner took the study: its commits refuse too
                print(f"dse: {exc}", file=sys.stderr)
                return
            except Exception as exc:  # noqa: BLE001 - a lock or a dropped connection: next tick
                print(f"dse: could not renew the lease of study {self.spec.name!r} (will try "
                      f"again): {exc}", file=sys.stderr)

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> RunSummary:
        """Run every workload until its budget is spent, the time budget is up or Ctrl-C."""
        start = time.monotonic()
        # the time budget counts from the first trial: starting Ray is not the study's time
        time_s = self.spec.budget.time_s
        self.deadline = start + time_s if time_s else None
        summaries: list[WorkloadSummary] = []
        status = "finished"  # a status holds 20 characters
        stop = threading.Event()
        keeper = threading.Thread(target=self._keep_leased, args=(stop,), daemon=True,
                                  name="dse-lease")
        keeper.start()
        try:
            for workload in self.spec.workloads:
                summaries.append(self._run_workload(workload))
                if self.out_of_time():
                    status = "out of time"  # the time budget
                    break
            self.recorder.flush()
        except KeyboardInterrupt:
            status = "interrupted"
            self.recorder.flush()
        except DiskFullError as exc:  # nothing more can be written: say what was kept
            status = "failed"
            raise DiskFullError(self._kept_on_a_full_disk(exc)) from None
        except (EvaluatorError, InfrastructureError):  # what finished before is kept; the
            status = "failed"  # batch that stopped the run is not (its faults are)
            self.recorder.flush()
            raise
        except BaseException:
            status = "failed"
            raise
        finally:
            stop.set()
            keeper.join()  # no renewal may land after the release
            # a run that added no trial and left the status as it was changed nothing
            unchanged = (self.recorder.next_number == self.claim.next_number
                         and status == self.claim.status_before)
            try:
                self.store.release(self.spec.name, self.owner, status,
                                   self.claim.updated_before if unchanged else None)
            except DiskFullError:
                if status != "failed":
                    raise
                # the run is failing already, for this reason: its lease lapses on its own
            self.pool.close()  # Ray's shutdown takes seconds: the study is released first
        if self.recorder.next_number != self.claim.next_number and status != "interrupted":
            self.store.keep_frame(self.spec.name)  # whole reads of the study take it at once
        if self.offline is not None and self.offline_path is not None:
            self.offline.write(self.offline_path)
        return RunSummary(self.spec.name, self.store.safe_url, status,
                          time.monotonic() - start, summaries, self.offline)

    def _kept_on_a_full_disk(self, exc: DiskFullError) -> str:
        """What a run stopped by a full disk tells: what was kept, and how to go on."""
        added = self.recorder.next_number - self.claim.next_number
        return (f"{exc}: study {self.spec.name!r} keeps its {self.recorder.next_number} "
                f"trials ({added} of them from this run). Free some space, then run the same "
                "`dse run` again: it resumes from there")

    def context(self, workload: Workload) -> EvalContext:
        """The workload on the study's target, in the study's space (its optional rules too)."""
        return self.resolution.context(workload, self.spec.space.constraints)

    def _run_workload(self, workload: Workload) -> WorkloadSummary:
        ctx = self.context(workload)
        workload_id, done = self.store.open_workload(
            self.study_id, {**workload.to_dict(), "space": ctx.space.name})
        run = WorkloadRun(ctx, workload_id, WorkloadSummary(workload, trials=done))
        self.strategy.run(self, run)
        self._feasible.pop(workload, None)  # a workload runs once: its configs are done with
        return run.summary

    # -- the port (dse.study.execution.port.Port) -----------------------------------------------
    def out_of_time(self) -> bool:
        """Whether the time budget is spent; never before the run's first round, so a budget
        shorter than building a workload's space still makes progress."""
        return (self.deadline is not None and self.evaluated_any
                and time.monotonic() >= self.deadline)

    def feasible(self, run: WorkloadRun) -> ConfigBatch:
        workload = run.ctx.workload
        if workload not in self._feasible:
            self._feasible[workload] = feasible_configs(run.ctx, self.spec)
        return self._feasible[workload]

    def stored(self, run: WorkloadRun, keys: list[str],
               evaluator: Evaluator | Measured) -> dict[str, EvalResult]:
        return self.recorder.lookup(run.workload_id, keys, Measured.of(evaluator))

    def evaluate_again(self, run: WorkloadRun, batch: ConfigBatch, evaluator: Evaluator,
                       pool: Pool, stage: Stage) -> list[EvalResult]:
        try:
            results = pool.evaluate(evaluator, batch, run.ctx)
        finally:
            self._record_faults(run, pool)
        self.evaluated_any = True
        stage.done += len(results)
        self._show(stage, results)
        return results

    def record(self, run: WorkloadRun, configs: list[dict[str, Any]],
               results: list[EvalResult], measured: Measured, cached: bool = False) -> None:
        keys = config_keys(run, configs)
        self.recorder.add(run.workload_id, keys, [dict(c) for c in configs], results,
                          [cached] * len(keys), [measured] * len(keys))
        self._tally(run, results, [cached] * len(keys), [False] * len(keys),
                    0 if cached else len(keys))

    def trialled(self, run: WorkloadRun, evaluator: Evaluator | Measured,
                 exact: bool = False) -> set[str]:
        return self.store.keys_with_trials(self.study_id, run.workload_id, evaluator.name,
                                           evaluator.version if exact else None)

    @contextmanager
    def rung(self, evaluator: Evaluator) -> Iterator[Pool]:
        pool = make_pool(evaluator, self.spec.workers, self.ray_address)
        try:
            yield pool
        finally:
            pool.close()
            evaluator.close()

    def export_offline(self, run: WorkloadRun, configs: list[dict[str, Any]],
                       evaluator: Evaluator) -> bool:
        assert self.offline is not None
        self.recorder.flush()
        keys = config_keys(run, configs)
        known = self.stored(run, keys, evaluator)
        missing = [c for c, k in zip(configs, keys, strict=True) if k not in known]
        for config in missing:
            self.offline.add(run.ctx, config)
        run.summary.exported += len(missing)
        return bool(missing)

    def record_agreement(self, run: WorkloadRun, rung: int, cheaper: str, dearer: str,
                         n: int, top_k: int, values: Mapping[str, float | None]) -> None:
        self.store.record_agreement(self.study_id, run.workload_id, rung, cheaper, dearer, n,
                                    top_k, values)

    def optuna_storage(self) -> DseJournalStorage:
        return DseJournalStorage(self.journal)

    def flush(self) -> None:
        self.recorder.flush()

    def commit_if_due(self) -> None:
        self.recorder.maybe_flush()

    def evaluate(self, run: WorkloadRun, batch: ConfigBatch, *,
                 configs: Sequence[Mapping[str, Any]] | None = None, feasible: bool = False,
                 evaluator: Evaluator | None = None, pool: Pool | None = None,
                 stage: Stage | None = None, commit: bool = True) -> list[EvalResult]:
        """Results of ``batch``'s configs in order (stored ones reused), queued for the next
        commit (made now if the window is due, unless ``commit`` is false); see
        :meth:`dse.study.execution.port.Port.evaluate`.

        A config only the study's own rules refuse (its optional constraints or ranges) is
        stored under a version of the evaluator of its own (see :class:`_StudyRules`), so it is
        never served to a study without those rules."""
        evaluator, pool = evaluator or self.evaluator, pool or self.pool
        ctx = run.ctx
        configs = list(configs) if configs is not None else ctx.space.decode(batch)
        keys = config_keys(run, configs)
        refusals = None if feasible else self._rules.refusals(ctx, batch, configs)
        known = self.stored(run, keys, evaluator)
        if refusals is not None and self._rules.any:  # stored by a study without these rules
            for i, key in enumerate(keys):
                if refusals.reason[i] and key in known \
                        and known[key].status is not Status.INFEASIBLE:
                    del known[key]
        todo: dict[str, int] = {}  # config key -> first index needing it (dedupe in a batch)
        for i, key in enumerate(keys):
            if key not in known:
                todo.setdefault(key, i)
        # a repeat within the batch is served from its first occurrence, as from the store
        cached = [k in known or todo[k] != i for i, k in enumerate(keys)]
        # what this run answered already is the sampler repeating itself, not the store serving
        repeated = [hit and (k in run.seen or k in todo)
                    for hit, k in zip(cached, keys, strict=True)]
        run.seen.update(keys)
        fresh = np.array(list(todo.values()), dtype=np.int64)
        results, by_rules = self._evaluate_new(run, batch, configs, fresh, refusals,
                                               evaluator, pool)
        known.update(zip(todo, results, strict=True))
        measured = Measured.of(evaluator)
        recorded = {k: self._rules.measured(evaluator) if own else measured
                    for k, own in zip(todo, by_rules, strict=True)}
        out = [known[k] for k in keys]  # by position: the configs are the caller's
        self.recorder.add(run.workload_id, keys, [dict(c) for c in configs], out, cached,
                          [recorded.get(k, measured) for k in keys],
                          commit=commit)
        self._count(run, out, cached, repeated, len(todo), stage)
        return out

    def _evaluate_new(self, run: WorkloadRun, batch: ConfigBatch,
                      configs: Sequence[Mapping[str, Any]], fresh: np.ndarray,
                      refusals: _Refusals | None, evaluator: Evaluator,
                      pool: Pool) -> tuple[list[EvalResult], list[bool]]:
        """Results of the configs at ``fresh`` (none evaluated before), and whether only the
        study's own rules refused each: refused ones are explained, the rest evaluated."""
        ctx = run.ctx
        out: list[EvalResult | None] = [None] * len(fresh)
        by_rules = [False] * len(fresh)
        if refusals is not None:
            for j, i in enumerate(fresh):
                if refusals.reason[i]:
                    by_rules[j] = refusals.own[i]
                    out[j] = EvalResult(Status.INFEASIBLE, reason=refusals.reason[i])
        runnable = [j for j, r in enumerate(out) if r is None]
        if runnable:
            sub = batch_take(batch, fresh[runnable])
            try:
                results = pool.evaluate(evaluator, sub, ctx)
            finally:  # recorded even when they stop the run
                self._record_faults(run, pool)
            for j, result in zip(runnable, results, strict=True):
                out[j] = result
        return [r for r in out if r is not None], by_rules

    def _record_faults(self, run: WorkloadRun, pool: Pool) -> None:
        faults = pool.take_faults()
        run.summary.faults += len(faults)
        self.recorder.add_faults(run.workload_id, [f.row() for f in faults])

    def _count(self, run: WorkloadRun, results: list[EvalResult], cached: list[bool],
               repeated: list[bool], evaluated: int, stage: Stage | None) -> None:
        """Add a batch to the workload's counts and its progress bar."""
        self._tally(run, results, cached, repeated, evaluated)
        self.evaluated_any = True
        if stage is None:
            stage = Stage(run.summary.workload.label, run.summary.trials,
                          self.spec.budget.trials)
        else:
            stage.done += len(results)
        self._show(stage, results)

    @staticmethod
    def _tally(run: WorkloadRun, results: list[EvalResult], cached: list[bool],
               repeated: list[bool], evaluated: int) -> None:
        """Add a batch's trials to the workload's counts."""
        summary = run.summary
        summary.trials += len(results)
        summary.repeated += sum(repeated)
        summary.cached += sum(cached) - sum(repeated)
        summary.evaluated += evaluated
        summary.infeasible += sum(r.status is Status.INFEASIBLE for r in results)
        summary.failed += sum(r.status in (Status.FAILED, Status.TIMEOUT) for r in results)

    def _show(self, stage: Stage, results: list[EvalResult]) -> None:
        """Move ``stage``'s progress bar, with the best of ``results``."""
        if self.progress is not None:
            objective = self.spec.objectives[0]
            pick = max if objective.direction == "maximize" else min
            best = pick((float(r.metrics[objective.metric]) for r in results
                         if r.ok and objective.metric in r.metrics), default=None)
            self.progress(stage.label, stage.done, stage.total or 0, best, objective.direction)


@dataclass(frozen=True)
class _Refusals:
    """Per config of a batch: why the space's rules or the study's ranges refuse it ("" when
    they do not) and whether only the study's own rules (its optional constraints, which the
    space checks last, or its ranges) do."""

    reason: list[str]
    own: list[bool]


@dataclass(frozen=True)
class _StudyRules:
    """A study's own rules (optional constraints, ranges). A config only they refuse is stored
    (the trial needs its evaluation and reason) under a version of the evaluator that names
    them, never served: a study checks its own rules again, which costs next to nothing, and
    studies without them look up the evaluator's own version."""

    constraints: tuple[str, ...]
    ranges: dict[str, tuple[int, int]]
    tag: str

    @classmethod
    def of(cls, spec: StudySpec) -> _StudyRules:
        rules = json.dumps([sorted(spec.space.constraints),
                            sorted((k, list(v)) for k, v in spec.space.ranges.items())])
        return cls(spec.space.constraints, dict(spec.space.ranges),
                   hashlib.sha256(rules.encode()).hexdigest()[:8])

    @property
    def any(self) -> bool:
        """Whether the study has rules of its own."""
        return bool(self.constraints or self.ranges)

    def measured(self, evaluator: Evaluator) -> Measured:
        """The evaluator as its refusals by these rules are stored."""
        return Measured(evaluator.name, f"{evaluator.version}+rules:{self.tag}",
                        evaluator.fidelity)

    def refusals(self, ctx: EvalContext, batch: ConfigBatch,
                 configs: Sequence[Mapping[str, Any]]) -> _Refusals:
        """The batch checked once against the space's rules and the study's ranges."""
        feasibility = ctx.space.check(batch)
        outside = ~ctx.space.within(batch, self.ranges)
        own_rules_from = len(ctx.space.constraints) - len(self.constraints)
        reasons, own = [""] * len(configs), [False] * len(configs)
        for i in np.flatnonzero(~feasibility.ok | outside):
            if outside[i]:
                reasons[i], own[i] = _range_reason(self.ranges, configs[i]), True
                continue
            own[i] = bool(feasibility.first_failed[i] >= own_rules_from)
            # a refusal every study shares names the space's own rules only
            reasons[i] = ctx.space.explain(batch, int(i), None if own[i] else own_rules_from)
        return _Refusals(reasons, own)


def _range_reason(ranges: Mapping[str, tuple[int, int]], config: Mapping[str, Any]) -> str:
    for name, (lo, hi) in ranges.items():
        if not lo <= config[name] <= hi:
            return f"{name}={config[name]} is outside the study's range [{lo}, {hi}]"
    return ""


def _require_feasible(ctx: EvalContext, spec: StudySpec) -> None:
    """Refuse a study whose overrides leave no feasible config (checked by enumeration)."""
    reasons = ctx.space.why_empty(spec.space.fix, spec.space.free, spec.space.ranges)
    if reasons is None:
        return
    raise UsageError(
        f"{spec.source}: no configuration of {ctx.workload.shape} {ctx.workload.dtype.name} on "
        f"{ctx.target.name} satisfies the study's space (fix {spec.space.fix or '{}'}, ranges "
        f"{dict(spec.space.ranges) or '{}'}, constraints {list(spec.space.constraints)}); "
        f"configs were rejected by: {reasons}. Relax the overrides.")


def run_study(spec: StudySpec, storage: ResultStore | str | None = None,
              ray_address: str | None = None, progress: Progress | None = None,
              offline: str | None = None) -> RunSummary:
    """Run or resume ``spec`` into ``storage`` (a store, URL or SQLite path; default: the spec's,
    else ``./dse.db``).

    With ``offline`` (a file name), a ladder rung whose evaluator cannot run on this machine
    writes the configs it would measure there, for the offline runner, instead of refusing."""
    store = open_store(storage if storage is not None else spec.storage)
    return StudyRunner(spec, store, ray_address, progress, offline).run()
