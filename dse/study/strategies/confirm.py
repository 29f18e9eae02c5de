"""A measured rung's confirmation: its closest contenders measured again, side by side.

On a shared machine a hardware figure moves 10-30 % between moments, and a rung measures each
config once, at a moment of its own: the best of a rung can be the config that happened to be
measured in a quiet moment rather than the fastest. A last rung's ``confirm: N`` measures its N
best again in :data:`ROUNDS` rounds, one contender at a time, every contender once a round, in
the order :func:`round_orders` gives: as ranked, reversed, reversed, as ranked. Every contender
then sits at the same mean position in the sequence, so a drift of the machine that is steady
over the confirmation (or that moves between rounds) weighs on all of them alike, and a
contender's confirmed value is the mean of its rounds (each round is itself the median of the
harness's repeats). Its other metrics are those of the round nearest that mean, with every
round's value (``confirm_rounds``) and the rung's first measurement (``first_measured``) beside
them; a round that fails makes it a failed result.

Confirmed results are stored as results of their own, of a more faithful fidelity
(:data:`dse.core.fidelity.CONFIRMED`), as further trials: a study's best configs are judged by
them where it has any, and the rung's first measurements stay as they were. A contender whose
confirmed result is stored already (by an earlier run of the study, or by another study of the
same workload) is served from the store, as any result is; the others are confirmed together.
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
    from dse.study.spec import Objective

ROUNDS = 4  # as ranked, reversed, reversed, as ranked: the same mean position for everyone


def confirmed_identity(evaluator: Evaluator) -> Measured:
    """The identity confirmed results of ``evaluator`` are stored under."""
    return Measured(evaluator.name, f"{evaluator.version}+confirmed:{ROUNDS}", CONFIRMED.name)


def round_orders(count: int) -> list[list[int]]:
    """The order of ``count`` contenders in each of the :data:`ROUNDS` rounds."""
    forward = list(range(count))
    return [forward, forward[::-1], forward[::-1], forward]


def confirmed_result(rounds: list[EvalResult], metric: str, first: float) -> EvalResult:
    """A contender's confirmed result from its ``rounds`` (in the order measured): the first
    failed round if any, else ``metric`` the mean of the rounds' and the other metrics those of
    the round nearest it, with every round's value and ``first``, the rung's measurement,
    beside them."""
    elapsed = sum(r.elapsed_s for r in rounds)
    failed = next((r for r in rounds if not r.ok), None)
    if failed is not None:
        return EvalResult(failed.status, failed.metrics,
                          f"a confirmation round failed: {failed.reason}", elapsed)
    values = [float(r.metrics[metric]) for r in rounds]
    mean = float(np.mean(values))
    nearest = rounds[int(np.argmin([abs(v - mean) for v in values]))]
    return EvalResult(Status.OK, {**nearest.metrics, metric: mean, "confirm_rounds": values,
                                  "first_measured": first}, elapsed_s=elapsed)


def confirm(port: Port, run: WorkloadRun, evaluator: Evaluator, pool: Pool, label: str,
            rung: tuple[ConfigBatch, list[dict[str, Any]], np.ndarray], contenders: np.ndarray,
            objective: Objective) -> None:
    """Confirm the ``contenders`` (positions, best first) of a rung's configs (``rung``: their
    batch, their dicts and their values, signed so that higher is better) and store their
    confirmed results as trials; ``label`` names the progress bar. Nothing is measured once
    the study's time is spent (a confirmation begun finishes its rounds)."""
    batch, configs, values = rung
    sign = 1.0 if objective.direction == "maximize" else -1.0
    picks = [int(i) for i in contenders]
    identity = confirmed_identity(evaluator)
    keys = dict(zip(picks, config_keys(run, [configs[i] for i in picks]), strict=True))
    stored = port.stored(run, list(keys.values()), identity)
    trialled = port.trialled(run, identity, exact=True)
    served = [i for i in picks if keys[i] in stored and keys[i] not in trialled]
    if served:  # confirmed by another study: a trial of this one, as a stored result is
        port.record(run, [configs[i] for i in served], [stored[keys[i]] for i in served],
                    identity, cached=True)
    todo = [i for i in picks if keys[i] not in stored]
    if not todo or port.out_of_time():
        return
    stage = Stage(f"{label} confirm", 0, len(todo) * ROUNDS)
    rounds: list[list[EvalResult]] = [[] for _ in todo]
    for order in round_orders(len(todo)):
        for j in order:  # one at a time, so that the order holds on any pool
            part = batch_take(batch, np.array([todo[j]], dtype=np.int64))
            rounds[j] += port.evaluate_again(run, part, evaluator, pool, stage)
    port.record(run, [configs[i] for i in todo],
                [confirmed_result(rounds[j], objective.metric, sign * float(values[i]))
                 for j, i in enumerate(todo)], identity)
