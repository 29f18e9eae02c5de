"""The deployment page of a study of several workloads: the few kernels that serve its mix best
(:mod:`dse.deploy`), the K curve, the shapes x kernels heat map and each shape's loss."""

from __future__ import annotations

import threading
from typing import Any

from dse.core.errors import UsageError
from dse.dashboard.plots import plot_html
from dse.deploy.cover import OBJECTIVES, NoCover
from dse.deploy.figures import heatmap_figure, k_curve_figure, loss_figure
from dse.deploy.plan import Plan, plan_study
from dse.storage.store import ResultStore

MAX_KERNELS = 32


class CoverCache:
    """Plans by (study, its last update, kernels, objective): a plan searches each shape's whole
    space, seconds a study, so a page shown again reuses it."""

    def __init__(self, size: int = 16) -> None:
        self.size, self._plans = size, {}
        self._lock = threading.Lock()

    def get(self, store: ResultStore, study: str, updated: Any, kernels: int,
            objective: str) -> Plan:
        key = (study, str(updated), kernels, objective)
        with self._lock:
            if key in self._plans:
                return self._plans[key]
        try:
            plan = plan_study(store, study, kernels, objective)
        except NoCover as exc:
            raise UsageError(str(exc)) from None
        with self._lock:
            if len(self._plans) >= self.size:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan
        return plan


def cover_view(plan: Plan, study: str) -> dict[str, Any]:
    """What the template shows of ``plan``."""
    cover = plan.cover
    return {"plan": plan, "kernels": plan.table["kernels"], "shapes": plan.table["shapes"],
            "fraction": cover.fraction, "worst": cover.worst_loss, "exact": cover.exact,
            "stops_paying": plan.stops_paying,
            "figures": [plot_html(k_curve_figure([(study, plan)])),
                        plot_html(heatmap_figure(study, plan)),
                        plot_html(loss_figure(study, plan))]}


def objective_arg(raw: str | None) -> str:
    """The page's ``objective`` argument (default ``time``); another is a UsageError."""
    if raw in (None, ""):
        return "time"
    if raw not in OBJECTIVES:
        raise UsageError(f"objective: {raw!r}; valid: {', '.join(OBJECTIVES)}")
    return raw
