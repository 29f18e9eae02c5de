"""A search strategy of the package's own: a coarse sweep, every ``every``-th feasible config
of the space in its fixed order (``strategy: {name: coarse, options: {every: 3}}`` in a study
file). ``pyproject.toml`` names it in ``dse.strategies``."""

from __future__ import annotations

from typing import Any

import numpy as np

from dse.core import Strategy, batch_len, batch_take


def run_coarse(port: Any, run: Any) -> None:
    """Evaluate every ``every``-th feasible config (default 2), within the trial budget."""
    every = int(port.spec.strategy.options.get("every", 2))
    feasible = port.feasible(run)  # listed before the run began: the strategy enumerates
    picked = np.arange(0, batch_len(feasible), max(1, every))
    if port.spec.budget.trials is not None:
        picked = picked[:max(0, port.spec.budget.trials - run.summary.trials)]
    if len(picked) and not port.out_of_time():
        port.evaluate(run, batch_take(feasible, picked), feasible=True)


COARSE = Strategy("coarse", run_coarse, enumerates=True, options=("every",),
                  summary="every n-th feasible config, in the space's order")
