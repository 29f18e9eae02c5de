"""What a search over a whole space returns: its sizes, time and best configurations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Candidate:
    """One configuration a search found: its parameters and its metrics."""

    params: dict[str, Any]
    metrics: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"params": self.params, "metrics": self.metrics}


@dataclass(frozen=True)
class SearchOutcome:
    """Result of a search: sizes, time, the best configurations and, for a walk such as the
    paper's balance procedure, its steps (dicts of parameters and metrics).

    A search that prunes reports how many configs it scored (``n_scored``), the sub-spaces it
    dropped at each level of its tree because their bound could not reach the top (``pruned``),
    the dominated choices it placed without enumerating (``dominated``: parameter -> why) and
    whether ``top`` is exactly what scoring every config would give (``exact``)."""

    n_total: int
    n_evaluated: int
    n_feasible: int
    elapsed_s: float
    top: list[Candidate]
    rejected_by: dict[str, int] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    n_scored: int | None = None
    pruned: dict[str, int] = field(default_factory=dict)
    dominated: dict[str, str] = field(default_factory=dict)
    exact: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n_total": self.n_total, "n_evaluated": self.n_evaluated,
            "n_feasible": self.n_feasible, "elapsed_s": self.elapsed_s,
            "rejected_by": self.rejected_by, "top": [c.to_dict() for c in self.top],
        }
        if self.steps:
            out["steps"] = self.steps
        if self.n_scored is not None:
            out.update(n_scored=self.n_scored, pruned=self.pruned, dominated=self.dominated)
        out["exact"] = self.exact
        return out
