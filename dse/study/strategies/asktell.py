"""The sampler strategy: Optuna's ask/tell loop over the space's fixed-domain encoding.

A vectorised model is asked one trial at a time (the sampler learns from every result); slower
evaluators get a round of trials at once to keep every worker busy. Infeasible configs are told
to Optuna as pruned and failed ones as failed, each with its reason.
"""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from dse.core.results import EvalResult, Status
from dse.core.strategy_record import Strategy
from dse.study.execution.port import Port, WorkloadRun
from dse.study.sampling.samplers import make_sampler

optuna.logging.set_verbosity(optuna.logging.WARNING)


def run_sampler(port: Port, run: WorkloadRun) -> None:
    """Ask, evaluate and tell until the workload's trial budget or the time budget is spent."""
    spec, ctx, summary = port.spec, run.ctx, run.summary
    encoding = ctx.space.optuna_encoding(spec.space.fix, spec.space.free, spec.space.ranges)
    distributions = encoding.distributions()
    storage = port.optuna_storage()
    workload = ctx.workload
    name = f"{workload.shape} {workload.dtype.name} B {workload.b_layout}"
    sampler = make_sampler(spec, port.batch_size, summary.trials)
    # loaded when it exists: create_study(load_if_exists=True) would log its creation again
    study = (optuna.load_study(study_name=name, storage=storage, sampler=sampler)
             if name in {st.study_name for st in storage.get_all_studies()} else
             optuna.create_study(storage=storage, study_name=name, sampler=sampler,
                                 directions=[o.direction for o in spec.objectives]))
    # A trial asked but never told (the run stopped in between) would stay RUNNING forever.
    for stale in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(stale.number, state=TrialState.FAIL)
    budget = spec.budget.trials
    while (budget is None or summary.trials < budget) and not port.out_of_time():
        n = port.batch_size if budget is None else min(port.batch_size, budget - summary.trials)
        trials = [study.ask(distributions) for _ in range(n)]
        configs = [encoding.decode(t.params) for t in trials]
        results = port.evaluate(run, ctx.space.encode(configs), configs=configs, commit=False)
        _tell(port, study, trials, results)
        port.commit_if_due()  # the window holds the results and their tells


def _tell(port: Port, study: optuna.Study, trials: list[optuna.Trial],
          results: list[EvalResult]) -> None:
    for trial, result in zip(trials, results, strict=True):
        if result.status is Status.OK:
            study.tell(trial, [float(result.metrics[o.metric]) for o in port.spec.objectives])
            continue
        trial.set_user_attr("reason", (result.reason or "")[:500])
        state = TrialState.PRUNED if result.status is Status.INFEASIBLE else TrialState.FAIL
        study.tell(trial, state=state)


STRATEGY = Strategy("asktell", run_sampler, uses_sampler=True,
                    summary="the study's Optuna sampler, asked and told trial by trial")
