"""Optuna samplers by name, seeded, with options passed through."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import optuna

from dse.errors import UsageError
from dse.study.spec import StudySpec


def make_sampler(spec: StudySpec, batch_size: int,
                 trials_before: int = 0) -> optuna.samplers.BaseSampler:
    """The study's sampler; several trials asked at once use TPE's constant liar.

    A sampler's random stream restarts with its seed, so a run that resumes after
    ``trials_before`` trials seeds it from (seed, trials_before): otherwise it would ask the
    first trials' configs again (served from the store, but spending the budget)."""
    name, options = spec.sampler.name, dict(spec.sampler.options)
    seed = spec.seed if not trials_before else int(
        np.random.SeedSequence([spec.seed, trials_before]).generate_state(1)[0])
    factories: dict[str, Any] = {
        "tpe": lambda: optuna.samplers.TPESampler(
            seed=seed, **{"multivariate": True, "constant_liar": batch_size > 1, **options}),
        "random": lambda: optuna.samplers.RandomSampler(seed=seed, **options),
        "cmaes": lambda: optuna.samplers.CmaEsSampler(seed=seed, **options),
        "nsga2": lambda: optuna.samplers.NSGAIISampler(seed=seed, **options),
        "gp": lambda: optuna.samplers.GPSampler(seed=seed, **options),
    }
    if name == "gp" and importlib.util.find_spec("torch") is None:
        raise UsageError("sampler 'gp' needs PyTorch, which is not installed "
                         "(pip install torch); use tpe, random, cmaes or nsga2")
    if name == "cmaes" and importlib.util.find_spec("cmaes") is None:
        raise UsageError("sampler 'cmaes' needs the cmaes package (pip install cmaes)")
    try:
        return factories[name]()
    except TypeError as exc:
        raise UsageError(f"sampler {name!r}: {exc}") from None
