"""Choosing at most K kernels for a whole mix: a facility-location problem.

Each shape runs on the chosen kernel that serves it fastest. Two objectives:

* ``time`` (the default): the mix's total time, each shape's seconds weighted by its calls,
  as small as it can be — the mix's throughput as large as it can be;
* ``worst``: the worst shape's loss against its own optimum (1 - its throughput on the chosen
  kernels / its optimum), as small as it can be.

Exact by brute force where the subsets of K candidates are few, else as a mixed-integer
program (SciPy's ``milp``, HiGHS); where HiGHS cannot prove the optimum within its time limit,
the better of its incumbent and the greedy choice, with the LP relaxation's bound on how much
better any choice could be.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from dse.deploy.problem import CoverProblem

OBJECTIVES = ("time", "worst")
BRUTE_FORCE_SUBSETS = 20_000  # up to this many subsets of K candidates, try every one
MILP_TIME_LIMIT_S = 60.0


@dataclass(frozen=True)
class Cover:
    """``kernels``: the candidates chosen (indices into the problem's; at most ``k``, none that
    serves no shape); ``assign[i]``: the
    position in ``kernels`` serving shape ``i``; ``fraction``: the mix's throughput on them over
    its throughput with every shape on its own optimum; ``losses[i]``: shape ``i``'s loss
    against its optimum; ``exact``: proven optimal for the objective, else ``bound`` is what
    no choice can beat (of ``fraction`` for ``time``, of the worst loss for ``worst``)."""

    k: int
    objective: str
    kernels: tuple[int, ...]
    assign: np.ndarray
    fraction: float
    losses: np.ndarray
    exact: bool
    method: str
    bound: float | None = None

    @property
    def worst_loss(self) -> float:
        return float(self.losses.max())


class NoCover(ValueError):
    """No K candidates can run every shape."""


def choose(problem: CoverProblem, k: int, objective: str = "time",
           method: str = "auto") -> Cover:
    """At most ``k`` kernels for the whole mix (``method``: ``auto``, ``brute``, ``milp`` or
    ``greedy``).

    Raises:
        NoCover: no ``k`` candidates run every shape (each needs one that its rules allow).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}; valid: {', '.join(OBJECTIVES)}")
    runs = problem.tops > 0
    if not runs.any(axis=1).all():
        missing = [problem.labels[i] for i in np.flatnonzero(~runs.any(axis=1))]
        raise NoCover(f"no candidate runs {', '.join(missing[:5])}")
    cost = _costs(problem, objective)
    k = min(k, len(problem.candidates))
    if method == "auto":
        method = "brute" if math.comb(len(problem.candidates), k) <= BRUTE_FORCE_SUBSETS \
            else "milp"
    if method == "brute":
        chosen, exact, bound = _brute(cost, k, objective), True, None
    elif method == "greedy":
        chosen, exact, bound = _greedy(cost, k, objective), False, None
    else:
        chosen, exact, bound = _milp(cost, k, objective)
        if not exact:
            greedy = _greedy(cost, k, objective)
            if greedy is not None and (chosen is None or _value(cost, greedy, objective)
                                       < _value(cost, chosen, objective)):
                chosen = greedy
    if chosen is None:
        raise NoCover(f"no {k} candidate{'s' if k > 1 else ''} run every shape: allow more "
                      "kernels")
    return _cover(problem, k, objective, chosen, exact, method, bound)


def curve(problem: CoverProblem, k_max: int, objective: str = "time") -> list[Cover | None]:
    """The best cover for each K from 1 to ``k_max`` (None where no K candidates run every
    shape)."""
    out: list[Cover | None] = []
    for k in range(1, k_max + 1):
        try:
            out.append(choose(problem, k, objective))
        except NoCover:
            out.append(None)
    return out


def _costs(problem: CoverProblem, objective: str) -> np.ndarray:
    """What each candidate costs on each shape: its share of the mix's optimal time (``time``)
    or its loss against the shape's optimum (``worst``); inf where it cannot run the shape."""
    if objective == "time":
        return problem.seconds() / problem.optimal_seconds().sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = problem.tops / problem.optimum[:, None]
    return np.where(problem.tops > 0, 1.0 - ratio, np.inf)


def _value(cost: np.ndarray, chosen: tuple[int, ...], objective: str) -> float:
    served = cost[:, list(chosen)].min(axis=1)
    return float(served.sum() if objective == "time" else served.max())


def _brute(cost: np.ndarray, k: int, objective: str) -> tuple[int, ...] | None:
    """Every subset of ``k`` candidates (the first best, in lexicographic order)."""
    best, best_value = None, math.inf
    for chosen in itertools.combinations(range(cost.shape[1]), k):
        value = _value(cost, chosen, objective)
        if value < best_value:
            best, best_value = chosen, value
    return best if math.isfinite(best_value) else None


def _greedy(cost: np.ndarray, k: int, objective: str) -> tuple[int, ...] | None:
    """One candidate at a time, each the one that lowers the objective most (a shape no chosen
    candidate runs costs more than any that does)."""
    chosen: list[int] = []
    served = np.full(cost.shape[0], np.inf)
    big = np.nanmax(np.where(np.isfinite(cost), cost, np.nan)) * cost.shape[0] + 1.0
    for _ in range(k):
        trial = np.minimum(served[:, None], cost)
        capped = np.where(np.isfinite(trial), trial, big)
        values = capped.sum(axis=0) if objective == "time" else capped.max(axis=0)
        values[chosen] = np.inf
        pick = int(np.argmin(values))
        chosen.append(pick)
        served = trial[:, pick]
    return tuple(sorted(chosen)) if np.isfinite(served).all() else None


def _milp(cost: np.ndarray, k: int, objective: str,
          ) -> tuple[tuple[int, ...] | None, bool, float | None]:
    """The mixed-integer program: x_j (candidate j chosen), y_ij (shape i served by j, only
    where j runs i), sum_j y_ij = 1, y_ij <= x_j, sum_j x_j <= k; minimise sum c_ij y_ij
    (``time``) or z >= sum_j c_ij y_ij for every i (``worst``). Returns the choice (None if
    none), whether it is proven optimal, and the LP bound when it is not."""
    n_shapes, n_cand = cost.shape
    shape_of, cand_of = np.nonzero(np.isfinite(cost))
    pairs = len(shape_of)
    extra = 1 if objective == "worst" else 0  # z
    n_vars = n_cand + pairs + extra
    y = n_cand + np.arange(pairs)
    rows, cols, vals, lower, upper = [], [], [], [], []

    def add(row_cols: np.ndarray, row_vals: np.ndarray, lo: float, hi: float) -> None:
        rows.append(np.full(len(row_cols), len(lower)))
        cols.append(row_cols)
        vals.append(row_vals)
        lower.append(lo)
        upper.append(hi)

    for i in range(n_shapes):  # each shape served once
        mine = y[shape_of == i]
        add(mine, np.ones(len(mine)), 1.0, 1.0)
        if objective == "worst":  # sum_j c_ij y_ij - z <= 0
            add(np.append(mine, n_vars - 1), np.append(cost[i, cand_of[shape_of == i]], -1.0),
                -np.inf, 0.0)
    for p in range(pairs):  # served only by a chosen candidate
        add(np.array([y[p], cand_of[p]]), np.array([1.0, -1.0]), -np.inf, 0.0)
    add(np.arange(n_cand), np.ones(n_cand), 0.0, float(k))
    matrix = sparse.csr_array((np.concatenate(vals), (np.concatenate(rows),
                                                      np.concatenate(cols))),
                              shape=(len(lower), n_vars))
    objective_vector = np.zeros(n_vars)
    if objective == "time":
        objective_vector[y] = cost[shape_of, cand_of]
    else:
        objective_vector[-1] = 1.0
    integrality = np.zeros(n_vars)
    integrality[:n_cand] = 1
    result = milp(objective_vector, constraints=LinearConstraint(matrix, lower, upper),
                  integrality=integrality, bounds=Bounds(0.0, 1.0 if not extra else
                                                         np.append(np.ones(n_vars - 1),
                                                                   np.inf)),
                  options={"time_limit": MILP_TIME_LIMIT_S})
    if result.x is None:
        return None, False, None
    chosen = tuple(int(j) for j in np.flatnonzero(result.x[:n_cand] > 0.5))
    if result.status == 0:
        return chosen, True, None
    bound = getattr(result, "mip_dual_bound", None)
    return chosen, False, None if bound is None else float(bound)


def _cover(problem: CoverProblem, k: int, objective: str, chosen: tuple[int, ...],
           exact: bool, method: str, bound: float | None) -> Cover:
    seconds = problem.seconds()[:, list(chosen)]
    used = sorted(set(np.argmin(seconds, axis=1).tolist()))
    if len(used) < len(chosen):  # a kernel no shape runs on is not shipped
        chosen = tuple(chosen[u] for u in used)
        seconds = seconds[:, used]
    assign = np.argmin(seconds, axis=1)
    served = seconds[np.arange(len(assign)), assign]
    fraction = float(problem.optimal_seconds().sum() / served.sum())
    tops = problem.tops[np.arange(len(assign)), np.asarray(chosen)[assign]]
    losses = 1.0 - tops / problem.optimum
    if bound is not None and objective == "time":
        bound = 1.0 / bound if bound > 0 else None  # a time share's bound, as a fraction
    return Cover(k, objective, tuple(chosen), assign, fraction, losses, exact, method, bound)
