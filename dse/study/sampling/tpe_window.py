"""TPE fitted to a bounded window of a long study's history (the ``tpe`` sampler's ``window``).

TPE's cost per ask grows with the trials it fits; past ``window`` finished trials it sees a
window of them instead, chosen so its "good" and "bad" estimators keep what matters to them.
"""

from __future__ import annotations

import bisect
import copy
import math
from collections import deque
from collections.abc import Container, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.storages import BaseStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from dse.study.sampling.tpe_kernel import vectorised_log_ndtr

if TYPE_CHECKING:
    from optuna.study._frozen import FrozenStudy  # get_all_studies' type; not re-exported

# The window: TPE's cost per ask grows with the trials it fits (two Parzen estimators over all of
# them, scored at every candidate), so a long study pays O(trials) per trial. Past ``window``
# trials it sees the best tenth of the window (all-time best, which is where its "good" estimator
# comes from: it takes the best 10 %, at most 25, of what it sees), the most recent trials
# (those it weighs most in its "bad" estimator) and a uniform sample of the older ones.
TPE_WINDOW = 200
WINDOW_MIN, WINDOW_MAX = 10, 10_000_000
_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)  # the trials TPE fits


class WindowedTPESampler(optuna.samplers.BaseSampler):
    """``tpe`` fitted to at most ``window`` finished trials of the study, its kernel computed
    over whole arrays (:mod:`dse.study.sampling.tpe_kernel`).

    Until the study has more than ``window`` finished (complete or pruned) trials, every call
    goes to ``tpe`` with the study itself, so its suggestions are exactly ``tpe``'s. After that,
    ``tpe`` samples from a view of the study holding

    * the best ``ceil(window / 10)`` complete trials of the whole history (for several
      objectives: the best by Pareto rank among those kept so far and the new ones),
    * the most recent finished trials, half of the rest of the window,
    * a uniform sample (reservoir, seeded) of the older finished trials, the other half,
    * and the trials still running (asked in the same round), for the constant liar.

    The view is kept up to date from the trials added since the previous ask (each read once
    from the storage), so an ask costs O(window), not O(trials).
    """

    def __init__(self, tpe: optuna.samplers.TPESampler, window: int,
                 seed: int | None = None) -> None:
        self.tpe, self.window = tpe, window
        self._best_size = math.ceil(window / 10)
        self._recent_size = (window - self._best_size + 1) // 2
        self._sample_size = window - self._best_size - self._recent_size
        self._rng = np.random.RandomState(seed)
        self._reset("")

    def _reset(self, study_name: str) -> None:
        self._study_name = study_name
        self._next = 0  # the first trial number not yet read
        self._running: list[int] = []  # numbers read while they were running
        self._finished = 0
        self._best: list[FrozenTrial] = []
        self._recent: deque[FrozenTrial] = deque()
        self._sample: list[FrozenTrial] = []
        self._offered = 0  # trials offered to the reservoir
        self._minimize: list[bool] = []
        self._shown: tuple[tuple[str, int], optuna.Study] | None = None

    def reseed_rng(self) -> None:
        self.tpe.reseed_rng()
        self._rng.seed()

    def infer_relative_search_space(self, study: optuna.Study,
                                    trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.tpe.infer_relative_search_space(self.view(study, trial.number), trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        with vectorised_log_ndtr():
            return self.tpe.sample_relative(self.view(study, trial.number), trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        with vectorised_log_ndtr():
            return self.tpe.sample_independent(self.view(study, trial.number), trial,
                                               param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.tpe.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self.tpe.after_trial(study, trial, state, values)

    def view(self, study: optuna.Study, number: int) -> optuna.Study:
        """What TPE sees when it samples trial ``number`` of ``study``: the study itself while it
        has at most ``window`` finished trials, else a study of the window's trials."""
        if number <= self.window:  # fewer trials than the window, finished or not: no reading
            return study
        if self._shown is not None and self._shown[0] == (study.study_name, number):
            return self._shown[1]  # asked twice an ask: the search space, then the sample
        shown = self._view(study, number)
        self._shown = ((study.study_name, number), shown)
        return shown

    def _view(self, study: optuna.Study, number: int) -> optuna.Study:
        if study.study_name != self._study_name:
            self._reset(study.study_name)
            self._minimize = [d == StudyDirection.MINIMIZE for d in study.directions]
        # the storage of a study is private in Optuna, but it is what its samplers use too
        storage: BaseStorage = study._storage
        study_id = storage.get_study_id_from_name(study.study_name)
        running = self._read(storage, study_id, number)
        if self._finished <= self.window:
            return study
        trials = {t.number: t for t in (*self._sample, *self._recent, *self._best_trials())}
        trials.update((t.number, t) for t in running)
        storage = _WindowStorage(storage, study_id, [trials[n] for n in sorted(trials)])
        return optuna.Study(study_name=study.study_name, storage=storage, sampler=self.tpe)

    def _read(self, storage: BaseStorage, study_id: int, number: int) -> list[FrozenTrial]:
        """Take in the trials finished since the previous ask; return those still running."""
        running = []
        for n in (*self._running, *range(self._next, number)):
            trial = storage.get_trial(storage.get_trial_id_from_study_id_trial_number(study_id, n))
            if trial.state == TrialState.RUNNING:
                running.append(trial)
            elif trial.state in _FINISHED:
                self._take(trial)
        self._running, self._next = [t.number for t in running], max(self._next, number)
        return running

    def _take(self, trial: FrozenTrial) -> None:
        self._finished += 1
        if trial.state == TrialState.COMPLETE:
            self._add_best(trial)
        self._recent.append(trial)
        if len(self._recent) > self._recent_size:
            self._offer(self._recent.popleft())

    def _offer(self, trial: FrozenTrial) -> None:
        """Algorithm R: every trial offered so far is in the sample with the same chance."""
        self._offered += 1
        if len(self._sample) < self._sample_size:
            self._sample.append(trial)
            return
        slot = self._rng.randint(self._offered)
        if slot < self._sample_size:
            self._sample[slot] = trial

    def _add_best(self, trial: FrozenTrial) -> None:
        if len(self._minimize) == 1:
            sign = 1.0 if self._minimize[0] else -1.0
            bisect.insort(self._best, trial, key=lambda t: sign * t.values[0])
            del self._best[self._best_size:]
            return
        self._best.append(trial)
        if len(self._best) >= 2 * self._best_size:  # pruned now and then, not at every trial
            self._best = self._best_trials()

    def _best_trials(self) -> list[FrozenTrial]:
        if len(self._best) <= self._best_size:
            return self._best
        losses = np.array([t.values for t in self._best], dtype=float)
        losses[:, ~np.array(self._minimize)] *= -1
        order = np.lexsort((np.arange(len(losses)), pareto_ranks(losses)))
        return [self._best[i] for i in order[:self._best_size]]


def pareto_ranks(losses: np.ndarray) -> np.ndarray:
    """Non-domination rank (0: the Pareto front) of each row of ``losses`` (all minimised)."""
    ranks = np.full(len(losses), -1)
    left = np.arange(len(losses))
    rank = 0
    while left.size:
        sub = losses[left]
        dominated = ((sub[None, :, :] <= sub[:, None, :]).all(axis=2)
                     & (sub[None, :, :] < sub[:, None, :]).any(axis=2)).any(axis=1)
        ranks[left[~dominated]] = rank
        left, rank = left[dominated], rank + 1
    return ranks


class _WindowStorage(BaseStorage):
    """A storage that lists ``trials`` as study ``study_id``'s trials and passes every other
    call, writes included (TPE's constant liar stores its suggestion), to ``storage``."""

    def __init__(self, storage: BaseStorage, study_id: int, trials: list[FrozenTrial]) -> None:
        self._storage, self._study_id, self._trials = storage, study_id, trials

    def get_all_trials(self, study_id: int, deepcopy: bool = True,
                       states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        if study_id != self._study_id:
            return self._storage.get_all_trials(study_id, deepcopy=deepcopy, states=states)
        trials = [t for t in self._trials if states is None or t.state in states]
        return copy.deepcopy(trials) if deepcopy else trials

    def create_new_study(self, directions: Sequence[StudyDirection],
                         study_name: str | None = None) -> int:
        return self._storage.create_new_study(directions, study_name)

    def delete_study(self, study_id: int) -> None:
        self._storage.delete_study(study_id)

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        self._storage.set_study_user_attr(study_id, key, value)

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        self._storage.set_study_system_attr(study_id, key, value)

    def get_study_id_from_name(self, study_name: str) -> int:
        return self._storage.get_study_id_from_name(study_name)

    def get_study_name_from_id(self, study_id: int) -> str:
        return self._storage.get_study_name_from_id(study_id)

    def get_study_directions(self, study_id: int) -> list[StudyDirection]:
        return self._storage.get_study_directions(study_id)

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return self._storage.get_study_user_attrs(study_id)

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return self._storage.get_study_system_attrs(study_id)

    def get_all_studies(self) -> list[FrozenStudy]:
        return self._storage.get_all_studies()

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        return self._storage.create_new_trial(study_id, template_trial)

    def set_trial_param(self, trial_id: int, param_name: str, param_value_internal: float,
                        distribution: BaseDistribution) -> None:
        self._storage.set_trial_param(trial_id, param_name, param_value_internal, distribution)

    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        return self._storage.get_trial_id_from_study_id_trial_number(study_id, trial_number)

    def set_trial_state_values(self, trial_id: int, state: TrialState,
                               values: Sequence[float] | None = None) -> bool:
        return self._storage.set_trial_state_values(trial_id, state, values)

    def set_trial_intermediate_value(self, trial_id: int, step: int,
                                     intermediate_value: float) -> None:
        self._storage.set_trial_intermediate_value(trial_id, step, intermediate_value)

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._storage.set_trial_user_attr(trial_id, key, value)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._storage.set_trial_system_attr(trial_id, key, value)

    def get_trial(self, trial_id: int) -> FrozenTrial:
        return self._storage.get_trial(trial_id)
