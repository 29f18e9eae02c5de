"""A measured rung's refinement: a greedy walk from the best config it measured.

A ladder measures only what its cheap rung ranks best. Where the cheap model is off (its
constants describe another CPU, or a mechanism it lacks matters here), that shortlist can sit in
the wrong region of the space, however many of it are measured. A rung's ``refine: N`` spends N
more measurements walking from the best config measured so far to its *neighbours* (the feasible
configs that differ from it in one parameter), the cheap rung choosing which neighbour goes
first: measurement decides where the walk goes, the model only the order within a neighbourhood,
where its ranking is most trustworthy (a change of one choice, the rest alike). When the best
config's neighbours are all measured, the walk goes on from the next best.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dse.core.params import ConfigBatch


def neighbours(space: ConfigBatch, centre: int) -> np.ndarray:
    """Indices of the configs of ``space`` that differ from config ``centre`` in exactly one
    parameter."""
    differing = np.zeros(len(next(iter(space.values()))), dtype=np.int16)
    for values in space.values():
        differing += values != values[centre]
    return np.flatnonzero(differing == 1)


def next_configs(space: ConfigBatch, cheap: np.ndarray, measured: dict[int, float], count: int,
                 ties: np.ndarray | None = None) -> list[int]:
    """Up to ``count`` configs of ``space`` to measure next: the unmeasured neighbours of the best
    measured config that has any, those the cheap rung scores best first (``cheap`` and
    ``measured`` higher is better, a failed measurement NaN; ``ties`` orders equal scores)."""
    centres = sorted((i for i, v in measured.items() if np.isfinite(v)),
                     key=lambda i: (-measured[i], i))
    for centre in centres:
        fresh = np.array([j for j in neighbours(space, centre)
                          if j not in measured and np.isfinite(cheap[j])], dtype=np.int64)
        if len(fresh):
            order = np.lexsort((fresh if ties is None else ties[fresh], -cheap[fresh]))
            return [int(j) for j in fresh[order[:count]]]
    return []


def walk(space: ConfigBatch, cheap: np.ndarray, measured: dict[int, float], budget: int,
         measure: Callable[[list[int]], list[float]],
         ties: np.ndarray | None = None) -> list[int]:
    """Measure up to ``budget`` configs along the walk (see the module doc), one a step, each
    chosen after the last was measured; ``measure`` returns a value per index (higher is better,
    NaN when it failed) and ``measured`` gains them. Returns the indices measured, in order;
    fewer than ``budget`` when every neighbour of every measured config was measured or
    ``measure`` returns none (it was told to stop)."""
    visited: list[int] = []
    while len(visited) < budget:
        picks = next_configs(space, cheap, measured, 1, ties)
        if not picks:
            break
        values = measure(picks)
        if not values:
            break
        measured.update(zip(picks, values, strict=True))
        visited += picks
    return visited
