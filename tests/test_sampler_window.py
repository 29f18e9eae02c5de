"""TPE's window (``sampler: {name: tpe, options: {window: N}}``): what the sampler sees once a
study is longer than the window, that shorter studies are TPE's own, and refused options."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from dse import load_trials
from dse.core.errors import UsageError
from dse.core.registry import build_context, build_evaluator
from dse.study.runner import run_study
from dse.study.sampling.samplers import make_sampler, tpe
from dse.study.sampling.tpe_kernel import vectorised_log_ndtr
from dse.study.sampling.tpe_window import TPE_WINDOW, WindowedTPESampler, pareto_ranks
from tests.study_helpers import make_spec

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
CTX = build_context("xdna2", "int8-int8", "4096x4096x4096")
ENCODING = CTX.space.optuna_encoding({}, [], {})
MODEL = build_evaluator("analytical")


def ask_tell(study: optuna.Study, trials: int, batch: int = 1,
             metrics: tuple[str, ...] = ("tops",)) -> None:
    """``trials`` more trials of ``study`` on the xdna2 4096^3 space with the analytical model,
    ``batch`` asked before any is told (as dse's ask/tell loop does)."""
    distributions = ENCODING.distributions()
    for _ in range(0, trials, batch):
        asked = [study.ask(distributions) for _ in range(batch)]
        configs = [ENCODING.decode(t.params) for t in asked]
        for trial, result in zip(asked, MODEL.evaluate(CTX.space.encode(configs), CTX),
                                 strict=True):
            if result.ok:
                study.tell(trial, [float(result.metrics[m]) for m in metrics])
            else:
                study.tell(trial, state=TrialState.PRUNED)


def new_study(sampler: optuna.samplers.BaseSampler, *directions: str) -> optuna.Study:
    return optuna.create_study(sampler=sampler, directions=list(directions or ["maximize"]))


class SeenTPE(optuna.samplers.TPESampler):
    """dse's TPE that notes how many finished trials each of its samples was fitted to."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(multivariate=True, constant_liar=False, **kwargs)
        self.seen: list[int] = []

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(len(study.get_trials(deepcopy=False, states=FINISHED)))
        return super().sample_relative(study, trial, search_space)


def test_a_study_shorter_than_the_window_gets_tpes_own_suggestions():
    """Up to ``window`` finished trials, the windowed sampler is TPE (with the same kernel),
    suggestion for suggestion; past it, the two part (otherwise the window would not be in
    use)."""
    window = 30
    capped = new_study(tpe(5, 1, {"window": window}))
    plain = new_study(tpe(5, 1, {"window": 0}))
    assert isinstance(capped.sampler, WindowedTPESampler)
    assert isinstance(plain.sampler, optuna.samplers.TPESampler)
    ask_tell(capped, 80)
    with vectorised_log_ndtr():
        ask_tell(plain, 80)
    same = window + 1  # trial 30 is still sampled from the 30 before it
    assert [t.params for t in capped.trials[:same]] == [t.params for t in plain.trials[:same]]
    assert [t.params for t in capped.trials[same:]] != [t.params for t in plain.trials[same:]]


def test_tpe_sees_at_most_the_window_and_every_best_trial():
    window = 40
    seen = SeenTPE(seed=3)
    study = new_study(WindowedTPESampler(seen, window, seed=3))
    ask_tell(study, 150)
    assert len(seen.seen) == 150 and max(seen.seen) == window
    assert seen.seen[:window + 1] == list(range(window + 1))  # the whole history till then

    view = study.sampler.view(study, len(study.trials)).get_trials(deepcopy=False)
    finished = [t for t in study.trials if t.state in FINISHED]
    assert len(view) <= window and all(t.state in FINISHED for t in view)
    best = sorted((t for t in finished if t.state == TrialState.COMPLETE),
                  key=lambda t: -t.value)[:math.ceil(window / 10)]
    numbers = {t.number for t in view}
    assert {t.number for t in best} <= numbers
    assert {t.number for t in finished[-(window // 3):]} <= numbers  # the most recent ones
    assert min(numbers) < finished[-window].number  # and some older ones, sampled


def test_a_sampler_built_on_a_long_history_reads_it_once():
    """A resumed study's sampler starts with the whole history in the storage."""
    study = new_study(tpe(1, 1, {"window": 0}))
    ask_tell(study, 120)
    resumed = WindowedTPESampler(SeenTPE(seed=1), 50, seed=1)
    view = resumed.view(study, len(study.trials)).get_trials(deepcopy=False)
    best = max((t for t in study.trials if t.state == TrialState.COMPLETE), key=lambda t: t.value)
    assert len(view) <= 50 and best.number in {t.number for t in view}


def test_trials_asked_together_see_each_other():
    """Asked in one round, the later trials' window holds the earlier ones, still running, so
    TPE's constant liar keeps the round from asking one config four times."""
    window = 20
    study = new_study(tpe(2, 4, {"window": window}))
    ask_tell(study, 60, batch=4)
    first, second = study.ask(ENCODING.distributions()), study.ask(ENCODING.distributions())
    view = study.sampler.view(study, second.number).get_trials(deepcopy=False)
    assert first.number in {t.number for t in view if t.state == TrialState.RUNNING}
    assert len([t for t in view if t.state in FINISHED]) <= window
    assert first.params != second.params


def test_several_objectives_keep_the_pareto_front():
    window = 30
    study = new_study(tpe(4, 1, {"window": window}), "maximize", "minimize")
    ask_tell(study, 90, metrics=("tops", "l1_bytes"))
    view = {t.number for t in study.sampler.view(study, len(study.trials)).get_trials()}
    front = {t.number for t in study.best_trials}
    assert len(view) <= window
    assert len(front & view) >= min(len(front), math.ceil(window / 10))


def test_pareto_ranks():
    losses = np.array([[1, 5], [2, 2], [5, 1], [3, 3], [6, 6], [2, 2]], dtype=float)
    assert pareto_ranks(losses).tolist() == [0, 0, 0, 1, 2, 0]


def test_a_study_file_with_a_window_runs_and_stores_its_trials(tmp_path):
    storage = str(tmp_path / "w.db")
    spec = make_spec(sampler={"name": "tpe", "options": {"window": 25}}, budget={"trials": 70})
    assert run_study(spec, storage).workloads[0].trials == 70
    frame = load_trials(storage, spec.name)
    assert len(frame) == 70 and frame["number"].nunique() == 70
    assert (frame["status"] == "ok").any()


def test_tpe_has_the_window_by_default():
    sampler = make_sampler(make_spec(sampler="tpe"), 1)
    assert isinstance(sampler, WindowedTPESampler) and sampler.window == TPE_WINDOW


def test_the_vectorised_kernel_is_optunas_and_only_inside_dses_sampler():
    from optuna.samplers._tpe import _truncnorm

    own = _truncnorm._log_ndtr
    x = np.concatenate([np.linspace(-60, 40, 2001), [-20.0, -19.99, 6.0, 6.01, 0.0]])
    with vectorised_log_ndtr():
        assert _truncnorm._log_ndtr is not own
        # log-masses: equal within 1e-15 absolute (Optuna's loses digits in the right tail)
        np.testing.assert_allclose(_truncnorm._log_ndtr(x), own(x), rtol=1e-12, atol=1e-15)
    assert _truncnorm._log_ndtr is own


@pytest.mark.parametrize(("window", "why"), [
    (-1, "expected 0 .* or a whole number of trials from 10"),
    (5, "from 10 to"),
    ("big", "expected 0"),
    (12.5, "whole number"),
    (True, "expected 0"),
])
def test_a_bad_window_is_refused_by_name(window, why):
    spec = make_spec(sampler={"name": "tpe", "options": {"window": window}})
    with pytest.raises(UsageError, match=f"sampler 'tpe': option window: .*{why}"):
        make_sampler(spec, 1)


def test_a_window_shorter_than_the_random_start_is_refused():
    spec = make_spec(sampler={"name": "tpe", "options": {"window": 20, "n_startup_trials": 50}})
    with pytest.raises(UsageError, match="option window: 20 .* n_startup_trials \\(50\\)"):
        make_sampler(spec, 1)


def test_window_is_an_option_of_tpe_only(tmp_path):
    spec = make_spec(sampler={"name": "random", "options": {"window": 100}})
    with pytest.raises(UsageError, match="sampler 'random'.*'window'"):
        run_study(spec, str(tmp_path / "r.db"))
