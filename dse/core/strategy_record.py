"""A search strategy: how a study walks one workload's space.

A strategy is registered under the ``dse.strategies`` entry-point group (as samplers and
evaluators are) and named by a study file's ``strategy`` key; dse's own are ``asktell`` (an
Optuna sampler's ask/tell loop, the default), ``exhaustive`` (every feasible config) and
``ladder`` (cheap evaluator first, dearer ones on what it keeps). The runner asks a strategy
only what it declares here, never its name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Strategy:
    """A strategy's record.

    ``run(port, run)`` evaluates configs of ``run.ctx.space`` through the run's port
    (``dse.study.execution.port.Port``: ``feasible``, ``evaluate``, ``out_of_time``, the study's
    ``spec`` with this strategy's ``spec.strategy.options``) until its budget is spent; the
    port serves stored results, records every trial and keeps the progress bars.
    """

    name: str
    run: Callable[[Any, Any], None]
    # lists every feasible config of a workload before the store is touched (port.feasible
    # then returns them, and the study needs no trial budget)
    enumerates: bool = False
    uses_sampler: bool = False  # asks the study's Optuna sampler (checked before storing)
    takes_rungs: bool = False  # runs the study file's ``ladder`` rungs
    options: tuple[str, ...] = ()  # the keyword options the study file may give it
    summary: str = ""  # what it does, in one line
