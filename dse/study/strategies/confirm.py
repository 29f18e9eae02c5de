"""A measured rung's confirmation: its closest contenders measured again, side by side.

On a shared machine a hardware figure moves 10-30 % between moments, and a rung measures each
config once, at a moment of its own: the best of a rung can be the config that happened to be
measured in a quiet moment rather than the fastest. A last rung's ``confirm: N`` measures its N
best again in :data:`ROUNDS` rounds, every contender once a round, the order reversed every other
round, so that all of them see the same moments. A contender's confirmed result is its median
round (the round whose objective is the median of its rounds), with every round's value
(``confirm_rounds``) and the rung's first measurement (``first_measured``) beside it; a round
that fails makes it a failed result. Confirmed results are stored as results of their own, of a
more faithful fidelity (:data:`dse.core.fidelity.CONFIRMED`): a study's best configs are judged
by them where it has any, and the rung's first measurements stay as they were.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dse.core.evaluator import Evaluator
from dse.core.fidelity import CONFIRMED
from dse.core.params import ConfigBatch, batch_take
from dse.core.results import EvalResult, Status
from dse.storage.windows import Measured
from dse.study.execution.port import Port, WorkloadRun, config_keys
from dse.study.execution.progress import Stage

if TYPE_CHECKING:
    from dse.study.execution.pool import Pool

ROUNDS = 3  # odd: a contender's median is one of its rounds


def confirming(evaluator: Evaluator) -> Measured:
    """The identity confirmed results of ``evaluator`` are stored under."""
    return Measured(evaluator.name, f"{evaluator.version}+confirmed:{ROUNDS}", CONFIRMED.name)


def contenders(values: np.ndarray, count: int) -> np.ndarray:
    """Positions of the ``count`` best measured ``values`` (higher is better; NaN: failed),
    best first."""
    order = np.argsort(-values, kind="stable")
    return np.array([i for i in order if np.isfinite(values[i])][:count], dtype=np.int64)


def round_orders(count: int, rounds: int = ROUNDS) -> list[list[int]]:
    """The order of ``count`` contenders in each round: as ranked, then reversed, and so on
    (what a slow drift of the machine adds to the first in one round it adds to the last in the
    next)."""
    forward = list(range(count))
    return [forward if r % 2 == 0 else forward[::-1] for r in range(rounds)]


def median_round(rounds: list[EvalResult], metric: str, sign: float,
                 first: float) -> EvalResult:
    """A contender's confirmed result from its ``rounds`` (in the order measured): the first
    failed round if any, else the round whose ``metric`` is the median (``sign`` 1 when higher
    is better, -1 when lower), its metrics with every round's value and ``first``, the rung's
    measurement, beside them."""
    failed = next((r for r in rounds if not r.ok), None)
    if failed is not None:
        return EvalResult(failed.status, failed.metrics,
                          f"a confirmation round failed: {failed.reason}",
                          sum(r.elapsed_s for r in rounds))
    values = [float(r.metrics[metric]) for r in rounds]
    ranked = sorted(range(len(rounds)), key=lambda i: sign * values[i])
    middle = rounds[ranked[len(ranked) // 2]]
    return EvalResult(Status.OK, {**middle.metrics, "confirm_rounds": values,
                                  "first_measured": first},
                      elapsed_s=sum(r.elapsed_s for r in rounds))


def confirm(port: Port, run: WorkloadRun, measuring: tuple[Evaluator, Pool, str],
            batch: ConfigBatch, configs: list[dict[str, Any]], values: np.ndarray, count: int,
            metric: str, sign: float) -> int:
    """Confirm the ``count`` best of a rung's configs (``batch``/``configs``, their ``values``
    signed so that higher is better) and store their confirmed results as trials; contenders
    confirmed by an earlier run keep their results, the rest are measured together. Returns how
    many were measured (none when the study's time is spent)."""
    evaluator, pool, label = measuring
    picks = contenders(values, count)
    measured = confirming(evaluator)
    keys = config_keys(run, [configs[i] for i in picks])
    known = port.stored(run, keys, measured)
    todo = [int(i) for i, key in zip(picks, keys, strict=True) if key not in known]
    if not todo or port.out_of_time():
        return 0
    stage = Stage(f"{label} confirm", 0, len(todo) * ROUNDS)
    rounds: list[list[EvalResult]] = [[] for _ in todo]
    for order in round_orders(len(todo)):
        part = batch_take(batch, np.array([todo[j] for j in order], dtype=np.int64))
        for j, result in zip(order, port.evaluate_again(run, part, evaluator, pool, stage),
                             strict=True):
            rounds[j].append(result)
    confirmed = [median_round(rounds[j], metric, sign, sign * float(values[i]))
                 for j, i in enumerate(todo)]
    port.record(run, [configs[i] for i in todo], confirmed, measured)
    return len(todo)
