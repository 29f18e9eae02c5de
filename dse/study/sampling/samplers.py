"""Optuna samplers by name (entry-point group ``dse.samplers``), seeded, options passed through.

A sampler is registered as a function ``(seed, batch_size, options) -> BaseSampler``;
``batch_size`` is how many trials a round asks at once.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import optuna

from dse.core import limits
from dse.core.errors import UsageError
from dse.core.registry import load
from dse.study.sampling.tpe_window import TPE_WINDOW, WINDOW_MAX, WINDOW_MIN, WindowedTPESampler
from dse.study.spec import StudySpec


def make_sampler(spec: StudySpec, batch_size: int,
                 trials_before: int = 0) -> optuna.samplers.BaseSampler:
    """The study's sampler.

    A sampler's random stream restarts with its seed, so a run that resumes after
    ``trials_before`` trials seeds it from (seed, trials_before): otherwise it would ask the
    first trials' configs again (served from the store, but spending the budget)."""
    seed = spec.seed if not trials_before else int(
        np.random.SeedSequence([spec.seed, trials_before]).generate_state(1)[0])
    factory = load("sampler", spec.sampler.name)
    for key, value in spec.sampler.options.items():
        problem = limits.out_of_range(f"sampler.{key}", value) \
            if f"sampler.{key}" in limits.NUMBERS else None
        if problem:
            raise UsageError(f"sampler {spec.sampler.name!r}: option {key}: "
                             f"{limits.shown(value)} is not valid; {problem}")
    try:
        return factory(seed, batch_size, dict(spec.sampler.options))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"sampler {spec.sampler.name!r}: {exc}") from None


def tpe(seed: int, batch_size: int, options: dict[str, Any]) -> optuna.samplers.BaseSampler:
    """Multivariate TPE; several trials asked at once use its constant liar.

    Option ``window`` (default :data:`TPE_WINDOW`; 0: none) bounds the history TPE fits its
    estimators to, so that an ask costs the same at 10,000 trials as at ``window`` (see
    :class:`WindowedTPESampler`); the other options are ``optuna.samplers.TPESampler``'s."""
    options = dict(options)
    window = options.pop("window", TPE_WINDOW)
    sampler = optuna.samplers.TPESampler(
        seed=seed, **{"multivariate": True, "constant_liar": batch_size > 1, **options})
    problem = _window_problem(window, options.get("n_startup_trials", 10))
    if problem:
        raise ValueError(f"option window: {limits.shown(window)} is not valid; {problem}")
    return WindowedTPESampler(sampler, window, seed) if window else sampler


def _window_problem(window: object, startup: object) -> str | None:
    """Why ``window`` cannot be TPE's window with ``startup`` random trials first, or None."""
    if isinstance(window, bool) or not isinstance(window, int) \
            or not (window == 0 or WINDOW_MIN <= window <= WINDOW_MAX):
        return (f"expected 0 (every trial) or a whole number of trials from {WINDOW_MIN:,} to "
                f"{WINDOW_MAX:,}")
    if window and isinstance(startup, int) and window < startup:
        # TPE counts the trials it sees: below n_startup_trials it would sample at random for ever
        return f"expected 0 or at least n_startup_trials ({startup:,})"
    return None


def random(seed: int, batch_size: int, options: dict[str, Any]) -> optuna.samplers.BaseSampler:
    """Uniform random sampling."""
    return optuna.samplers.RandomSampler(seed=seed, **options)


def cmaes(seed: int, batch_size: int, options: dict[str, Any]) -> optuna.samplers.BaseSampler:
    """CMA-ES (one objective; needs the cmaes package)."""
    if importlib.util.find_spec("cmaes") is None:
        raise UsageError("sampler 'cmaes' needs the cmaes package (pip install cmaes)")
    return optuna.samplers.CmaEsSampler(seed=seed, **options)


def nsga2(seed: int, batch_size: int, options: dict[str, Any]) -> optuna.samplers.BaseSampler:
    """NSGA-II, for several objectives."""
    return optuna.samplers.NSGAIISampler(seed=seed, **options)


def gp(seed: int, batch_size: int, options: dict[str, Any]) -> optuna.samplers.BaseSampler:
    """Gaussian-process Bayesian optimisation (needs PyTorch)."""
    if importlib.util.find_spec("torch") is None:
        raise UsageError("sampler 'gp' needs PyTorch, which is not installed "
                         "(pip install torch); use tpe, random, cmaes or nsga2")
    return optuna.samplers.GPSampler(seed=seed, **options)
