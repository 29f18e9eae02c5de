"""The study loop: Optuna ask/tell, evaluations in-process or on Ray, results committed with
Optuna's state (see :mod:`dse.study.recorder`).

A config already evaluated by the same evaluator version on the same target and workload (by
this or any other study in the database) is served from the store, not evaluated again.
Infeasible configs are told to Optuna as pruned, failed ones as failed; both keep their reason.
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
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

import dse
from dse.errors import UsageError
from dse.offline.exchange import OfflineExport
from dse.problem import build_evaluator
from dse.registry import search_space_class
from dse.results import EvalResult, Status
from dse.storage import ResultStore
from dse.storage.journal import DseJournalStorage, SqlJournalBackend
from dse.storage.store import config_key
from dse.study.exhaustive import feasible_configs, run_exhaustive
from dse.study.ladder import run_ladder
from dse.study.pool import make_pool
from dse.study.progress import Progress, Stage
from dse.study.recorder import Recorder
from dse.study.samplers import make_sampler
from dse.study.spec import StudySpec
from dse.target import load_target
from dse.workload import Workload
from evaluators.base import EvalContext

LEASE_S = 120.0
optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass
class WorkloadSummary:
    """A run's counts for one workload: its trials so far (earlier runs' included), and what this
    run evaluated, served from the store, found infeasible, failed or exported."""

    workload: Workload
    trials: int
    evaluated: int = 0
    cached: int = 0
    infeasible: int = 0
    failed: int = 0
    exported: int = 0  # configs written for the offline runner (``--offline``)


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
    """Runs (or resumes) one study against one store."""

    def __init__(self, spec: StudySpec, store: ResultStore, ray_address: str | None = None,
                 progress: Progress | None = None, offline: str | None = None) -> None:
        self.spec, self.store, self.progress = spec, store, progress
        self.ray_address = ray_address
        self.target = load_target(spec.target)
        self.evaluator = build_evaluator(spec.evaluator.name, spec.evaluator.options)
        self.owner = owner_id()
        self.deadline: float | None = None  # set when the trials begin (see run)
        self.evaluated_any = False  # a run with a time budget still does its first round
        self.offline_path = offline
        self.offline_rung, self.offline = self._offline_rung(offline)
        if spec.sampler.name != "exhaustive":
            make_sampler(spec, 1)  # refuse unknown options or a missing package before storing
        for workload in spec.workloads:  # refuse impossible spaces before touching the store
            ctx = self.context(workload)
            if spec.sampler.name == "exhaustive":
                feasible_configs(ctx, spec)
            else:
                _require_feasible(ctx, spec)
        with store.session() as s:
            target_id = store.target_id(s, self.target.digest(), self.target.name,
                                        self.target.to_dict())
            row = store.study(s, spec.name)
            if row is None:
                row = store.create_study(s, spec.name, spec.identity(), target_id)
            elif row.spec != spec.identity():
                changed = sorted(k for k, v in spec.identity().items() if row.spec.get(k) != v)
                raise UsageError(f"study {spec.name!r} already exists in {store.safe_url} with a "
                                 f"different {', '.join(changed)}; give the study another name "
                                 "to run this definition (its budget and workers may change; "
                                 "a ladder's rungs may not)")
            elif row.target_id != target_id:  # one study never mixes two sets of constants
                raise UsageError(f"study {spec.name!r} already exists in {store.safe_url} with "
                                 f"other constants for target {spec.target!r} (its file changed "
                                 "since the study began, or a constant read from the machine "
                                 "differs here); give the study another name to run with these")
            _void_dead_local_owner(row)
            status_before = row.status
            store.acquire(s, row, self.owner, LEASE_S)
            study_id, next_number = row.id, store.next_trial_number(s, row.id)
        self.study_id = study_id
        try:
            self.pool = make_pool(self.evaluator, spec.workers, ray_address)
        except BaseException:  # no Ray cluster at the address, Ctrl-C: the study is not running
            store.release(spec.name, self.owner, status_before)
            raise
        # A vectorised model is asked one trial at a time (the sampler learns from every result);
        # slower evaluators get enough trials per round to keep every worker busy.
        self.batch_size = spec.batch_size or (1 if hasattr(self.evaluator, "score")
                                              else 2 * self.pool.workers)
        self.journal = SqlJournalBackend(store, study_id)
        self.recorder = Recorder(
            store, self.journal, spec.name, study_id, target_id, self.evaluator,
            search_space_class(self.target.space).name, next_number, self._renew_lease,
            socket.gethostname(), library_versions())

    def _offline_rung(self, offline: str | None) -> tuple[int | None, OfflineExport | None]:
        """Refuse an evaluator that cannot run here, before anything is stored; with
        ``offline``, the one ladder rung after the first that cannot is exported instead."""
        spec = self.spec
        plugins = [r.evaluator for r in spec.ladder] or [spec.evaluator]
        stuck = []
        for index, plugin in enumerate(plugins):
            evaluator = build_evaluator(plugin.name, plugin.options)
            problem = evaluator.unavailable() if hasattr(evaluator, "unavailable") else None
            if problem:
                stuck.append((index, evaluator, problem))
        if offline is not None and not spec.ladder:
            raise UsageError("--offline exports a ladder rung, and this study has no ladder; "
                             "use dse export-configs for its best configs")
        if not stuck:
            return None, None
        index, evaluator, problem = stuck[0]
        if offline is None or index == 0 or len(stuck) > 1 \
                or not hasattr(evaluator, "offline_job"):
            hint = (" (or run with --offline FILE to measure that rung elsewhere)"
                    if spec.ladder and index > 0 and hasattr(evaluator, "offline_job")
                    and offline is None else "")
            raise UsageError(f"evaluator {evaluator.name!r} cannot run here: {problem}{hint}")
        plugin = plugins[index]
        return index, OfflineExport(spec.name, spec.target, plugin.name, plugin.options)

    def _renew_lease(self, s: Any) -> None:
        self.store.acquire(s, self.store.require_study(s, self.spec.name), self.owner, LEASE_S)

    def _keep_leased(self, stop: threading.Event) -> None:
        """Renew the lease every quarter of its length until ``stop``: commits renew it too,
        but an evaluation longer than the lease (a hardware run, a full simulation) must not
        let another runner take the study meanwhile."""
        while not stop.wait(LEASE_S / 4):
            try:
                with self.store.session() as s:
                    self._renew_lease(s)
            except UsageError as exc:  # another runner took the study: its commits refuse too
                print(f"dse: {exc}", file=sys.stderr)
                return
            except Exception as exc:  # noqa: BLE001 - a lock or a dropped connection: next tick
                print(f"dse: could not renew the lease of study {self.spec.name!r} (will try "
                      f"again): {exc}", file=sys.stderr)

    def out_of_time(self) -> bool:
        """Whether the time budget is spent; never before the run's first round, so a budget
        shorter than building a workload's space still makes progress."""
        return (self.deadline is not None and self.evaluated_any
                and time.monotonic() >= self.deadline)

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
        except BaseException:
            status = "failed"
            raise
        finally:
            stop.set()
            keeper.join()  # no renewal may land after the release
            self.store.release(self.spec.name, self.owner, status)
            self.pool.close()  # Ray's shutdown takes seconds: the study is released first
        if self.offline is not None and self.offline_path is not None:
            self.offline.write(self.offline_path)
        return RunSummary(self.spec.name, self.store.safe_url, status,
                          time.monotonic() - start, summaries, self.offline)

    def context(self, workload: Workload) -> EvalContext:
        space = search_space_class(self.target.space)(
            self.target, workload, extra_constraints=self.spec.space.constraints)
        return EvalContext(self.target, workload, space)

    def _run_workload(self, workload: Workload) -> WorkloadSummary:
        ctx = self.context(workload)
        space = ctx.space
        with self.store.session() as s:
            workload_id = self.store.workload_id(s, {**workload.to_dict(), "space": space.name})
            done = self.store.trial_count(s, self.study_id, workload_id)
        summary = WorkloadSummary(workload, trials=done)
        if self.spec.ladder:
            run_ladder(self, ctx, workload_id, summary)
            return summary
        if self.spec.sampler.name == "exhaustive":
            run_exhaustive(self, ctx, workload_id, summary)
            return summary
        encoding = space.optuna_encoding(self.spec.space.fix, self.spec.space.free,
                                         self.spec.space.ranges)
        distributions = encoding.distributions()
        storage = DseJournalStorage(self.journal)
        name = f"{workload.shape} {workload.dtype.name} B {workload.b_layout}"
        sampler = make_sampler(self.spec, self.batch_size, done)
        # loaded when it exists: create_study(load_if_exists=True) would log its creation again
        study = (optuna.load_study(study_name=name, storage=storage, sampler=sampler)
                 if name in {st.study_name for st in storage.get_all_studies()} else
                 optuna.create_study(storage=storage, study_name=name, sampler=sampler,
                                     directions=[o.direction for o in self.spec.objectives]))
        # A trial asked but never told (the run stopped in between) would stay RUNNING forever.
        for stale in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            study.tell(stale.number, state=TrialState.FAIL)
        budget = self.spec.budget.trials
        while (budget is None or summary.trials < budget) and not self.out_of_time():
            n = self.batch_size if budget is None else min(self.batch_size,
                                                           budget - summary.trials)
            trials = [study.ask(distributions) for _ in range(n)]
            configs = [encoding.decode(t.params) for t in trials]
            results = self.evaluate_and_record(ctx, workload_id, configs, summary,
                                               commit=False)
            self._tell(study, trials, results)
            self.recorder.maybe_flush()  # the window holds the results and their tells
        return summary

    # -- evaluation with the store as a cache -------------------------------------------------
    def evaluate_and_record(self, ctx: EvalContext, workload_id: int,
                            configs: list[dict[str, Any]], summary: WorkloadSummary,
                            evaluator: Any = None, pool: Any = None,
                            stage: Stage | None = None, commit: bool = True
                            ) -> list[EvalResult]:
        """Results for ``configs`` in order (stored ones reused), queued for the next commit
        (made now if the window is due, unless ``commit`` is false).

        ``evaluator`` and ``pool`` default to the study's (a ladder passes each rung's);
        ``stage`` is what the progress bar counts, by default the workload's trials against the
        study's budget. A config only the study's own rules refuse (its optional constraints or
        ranges) is stored under a version of the evaluator of its own (see
        :class:`_StudyRules`), so it is never served to a study without those rules."""
        evaluator, pool = evaluator or self.evaluator, pool or self.pool
        keys = [config_key(ctx.space.name, c) for c in configs]
        known = self.recorder.lookup(workload_id, keys, evaluator)
        for key in self._refused_by_study_rules(ctx, configs, keys, known):
            del known[key]  # stored by a study without this one's rules: refused again here
        todo: dict[str, int] = {}  # config key -> first index needing it (dedupe in a batch)
        for i, key in enumerate(keys):
            if key not in known:
                todo.setdefault(key, i)
        # a repeat within the batch is served from its first occurrence, as from the store
        cached = [k in known or todo[k] != i for i, k in enumerate(keys)]
        fresh, by_study_rules = self._evaluate_new(ctx, [configs[i] for i in todo.values()],
                                                   evaluator, pool)
        known.update(zip(todo, fresh, strict=True))
        rules = _StudyRules.of(evaluator, self.spec)
        recorded_by = {k: rules if refused else evaluator
                       for k, refused in zip(todo, by_study_rules, strict=True)}
        results = [EvalResult(known[k].status, c, known[k].metrics, known[k].reason,
                              known[k].elapsed_s) for k, c in zip(keys, configs, strict=True)]
        self.recorder.add(workload_id, keys, configs, results, cached,
                          [recorded_by.get(k, evaluator) for k in keys], commit=commit)
        summary.trials += len(configs)
        summary.cached += sum(cached)
        summary.evaluated += len(todo)
        summary.infeasible += sum(r.status is Status.INFEASIBLE for r in results)
        summary.failed += sum(r.status in (Status.FAILED, Status.TIMEOUT) for r in results)
        self.evaluated_any = True
        if stage is None:
            stage = Stage(summary.workload.label, summary.trials, self.spec.budget.trials)
        else:
            stage.done += len(configs)
        if self.progress is not None:
            objective = self.spec.objectives[0]
            pick = max if objective.direction == "maximize" else min
            best = pick((float(r.metrics[objective.metric]) for r in results
                         if r.ok and objective.metric in r.metrics), default=None)
            self.progress(stage.label, stage.done, stage.total or 0, best, objective.direction)
        return results

    def _refused_by_study_rules(self, ctx: EvalContext, configs: list[dict[str, Any]],
                                keys: list[str], known: dict[str, EvalResult]) -> set[str]:
        """Keys of stored results, other than refusals, whose configs the study's own rules
        (optional constraints, ranges) refuse: another study stored them without those
        rules."""
        if not self.spec.space.constraints and not self.spec.space.ranges:
            return set()
        served = [i for i, k in enumerate(keys)
                  if k in known and known[k].status is not Status.INFEASIBLE]
        if not served:
            return set()
        batch = ctx.space.encode([configs[i] for i in served])
        ok = ctx.space.check(batch).ok
        return {keys[i] for j, i in enumerate(served)
                if not ok[j] or _range_reason(self.spec, configs[i])}

    def _evaluate_new(self, ctx: EvalContext, configs: list[dict[str, Any]], evaluator: Any,
                      pool: Any) -> tuple[list[EvalResult], list[bool]]:
        """Results of configs not evaluated before, and whether only the study's own rules
        (its optional constraints, which the space checks last, or its ranges) refused each."""
        if not configs:
            return [], []
        batch = ctx.space.encode(configs)
        feasibility = ctx.space.check(batch)
        own_rules_from = len(ctx.space.constraints) - len(self.spec.space.constraints)
        out: list[EvalResult | None] = [None] * len(configs)
        by_study_rules = [False] * len(configs)
        for i, config in enumerate(configs):
            reason = _range_reason(self.spec, config)
            if reason or not feasibility.ok[i]:
                by_study_rules[i] = bool(reason) or \
                    feasibility.first_failed[i] >= own_rules_from
                # a refusal every study shares names the space's own rules only
                out[i] = EvalResult(Status.INFEASIBLE, config, reason=reason or ctx.space.explain(
                    batch, i, None if by_study_rules[i] else own_rules_from))
        runnable = [i for i, r in enumerate(out) if r is None]
        if runnable:
            sub = {k: v[runnable] for k, v in batch.items()}
            for i, result in zip(runnable, pool.evaluate(evaluator, sub, ctx), strict=True):
                out[i] = result
        return [r for r in out if r is not None], by_study_rules

    def _tell(self, study: optuna.Study, trials: list[optuna.Trial],
              results: list[EvalResult]) -> None:
        for trial, result in zip(trials, results, strict=True):
            if result.status is Status.OK:
                study.tell(trial, [float(result.metrics[o.metric]) for o in self.spec.objectives])
                continue
            trial.set_user_attr("reason", (result.reason or "")[:500])
            state = TrialState.PRUNED if result.status is Status.INFEASIBLE else TrialState.FAIL
            study.tell(trial, state=state)


@dataclass(frozen=True)
class _StudyRules:
    """Stands for an evaluator in the store when a study's own rules (optional constraints,
    ranges) refuse a config: the same name and fidelity, a version that names the rules. The
    refusal is stored (the trial needs its evaluation and reason) but never served: a study
    checks its own rules again, which costs next to nothing, and studies without them look
    up the evaluator's own version."""

    name: str
    version: str
    fidelity: str

    @classmethod
    def of(cls, evaluator: Any, spec: StudySpec) -> _StudyRules:
        rules = json.dumps([sorted(spec.space.constraints),
                            sorted((k, list(v)) for k, v in spec.space.ranges.items())])
        tag = hashlib.sha256(rules.encode()).hexdigest()[:8]
        return cls(evaluator.name, f"{evaluator.version}+rules:{tag}", evaluator.fidelity)


def _range_reason(spec: StudySpec, config: dict[str, Any]) -> str | None:
    for name, (lo, hi) in spec.space.ranges.items():
        if not lo <= config[name] <= hi:
            return f"{name}={config[name]} is outside the study's range [{lo}, {hi}]"
    return None


def _require_feasible(ctx: EvalContext, spec: StudySpec) -> None:
    """Refuse a study whose overrides leave no feasible config (checked by enumeration)."""
    counts: dict[str, int] = {}
    for batch, _ in ctx.space.chunks(fix=spec.space.fix, free=spec.space.free):
        feasibility = ctx.space.check(batch)
        ok = feasibility.ok.copy()
        for name, (lo, hi) in spec.space.ranges.items():
            ok &= (batch[name] >= lo) & (batch[name] <= hi)
        if ok.any():
            return
        for index in feasibility.first_failed[feasibility.first_failed >= 0]:
            rule = ctx.space.constraints[int(index)].name
            counts[rule] = counts.get(rule, 0) + 1
    reasons = ", ".join(f"{k} ({v:,})" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    if not reasons:  # nothing could even be generated: show why the smallest tiles fail
        spec_in = ctx.target.input_spec(ctx.workload.dtype.input)
        smallest = {"m_ct": spec_in.r * spec_in.expand_r, "k_ct": spec_in.s,
                    "n_ct": spec_in.t * spec_in.expand_t}
        probe = {**smallest, **spec.space.fix}
        probe.setdefault("k_mt", probe["k_ct"])
        batch = ctx.space.encode([ctx.space.resolve(probe)])
        reasons = ctx.space.explain(batch, 0) or "the ranges"
    raise UsageError(
        f"{spec.source}: no configuration of {ctx.workload.shape} {ctx.workload.dtype.name} on "
        f"{ctx.target.name} satisfies the study's space (fix {spec.space.fix or '{}'}, ranges "
        f"{dict(spec.space.ranges) or '{}'}, constraints {list(spec.space.constraints)}); "
        f"configs were rejected by: {reasons or 'the ranges'}. Relax the overrides.")


def _void_dead_local_owner(row: Any) -> None:
    """A lease held by a process of this host that no longer exists is void (it was killed)."""
    host, _, pid = (row.owner or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        row.owner, row.lease_until = None, None
    except PermissionError:
        pass


def run_study(spec: StudySpec, storage: str | None = None, ray_address: str | None = None,
              progress: Progress | None = None, offline: str | None = None) -> RunSummary:
    """Run or resume ``spec`` into ``storage`` (default: the spec's, else ``./dse.db``).

    With ``offline`` (a file name), a ladder rung whose evaluator cannot run on this machine
    writes the configs it would measure there, for the offline runner, instead of refusing."""
    store = ResultStore(storage if storage is not None else spec.storage)
    return StudyRunner(spec, store, ray_address, progress, offline).run()
