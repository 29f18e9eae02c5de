"""A study's deployment plan: its cover problem, the best cover for each number of kernels (the
K curve), the cover for the K asked and its dispatch table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dse.deploy.cover import Cover, NoCover, curve
from dse.deploy.problem import DEFAULT_CANDIDATES, CoverProblem, study_problem
from dse.deploy.table import build_table
from dse.storage.store import ResultStore

CURVE_KERNELS = 8  # the K curve reaches at least this far (or every shape its own kernel)
PAYING_GAIN = 0.01  # one more kernel "pays" while it adds this much of the optimum


@dataclass
class Plan:
    """``curve[k - 1]``: the best cover with at most k kernels (None: no k run every shape)."""

    problem: CoverProblem
    curve: list[Cover | None]
    cover: Cover
    table: dict[str, Any]

    @property
    def stops_paying(self) -> int | None:
        """The K past which one more kernel adds less than :data:`PAYING_GAIN` of the optimum
        (None: each one still pays, as far as the curve goes)."""
        fractions = [c.fraction if c else 0.0 for c in self.curve]
        for k in range(1, len(fractions)):
            if fractions[k - 1] > 0 and fractions[k] - fractions[k - 1] < PAYING_GAIN:
                return k
        return None


def plan_study(store: ResultStore, study: str, kernels: int, objective: str = "time",
               per_shape: int = DEFAULT_CANDIDATES) -> Plan:
    """The plan of ``study`` for at most ``kernels`` kernels.

    Raises:
        NoCover: no ``kernels`` candidates run every shape of the study."""
    problem = study_problem(store, study, per_shape)
    if not problem.candidates:
        raise NoCover(f"study {study!r} has no feasible result to choose kernels from: run it "
                      "further")
    # as many kernels as shapes serve every shape at its own optimum: more add nothing
    kernels = min(kernels, len(problem.workloads))
    points = curve(problem, max(kernels, min(CURVE_KERNELS, len(problem.workloads))),
                   objective)
    cover = points[kernels - 1]
    if cover is None:
        raise NoCover(f"study {study!r}: no {kernels} of its {len(problem.candidates)} "
                      "candidate kernels run every shape; allow more kernels")
    return Plan(problem, points, cover, build_table(problem, cover))
