"""Small helpers shared by tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from dse.core.params import batch_take
from dse.core.registry import build_context
from dse.core.results import EvalResult, Status
from dse.storage import ResultStore, config_key
from dse.storage.runs import Measured, PendingTrial, Window

SPACE = "space"
BY = Measured("analytical", "1", "analytical")
WORKLOAD = {"M": 64, "K": 64, "N": 64, "dtype": "int8-int8", "b_layout": "col", "space": SPACE}


def one_config(target: str, dtype: str, shape: str, b_layout: str = "col", **params: Any):
    """(ctx, batch) for a single resolved config."""
    ctx = build_context(target, dtype, shape, b_layout)
    batch = ctx.space.encode([ctx.space.resolve(params)])
    return ctx, batch


def score_one(target: str, dtype: str, shape: str, b_layout: str = "col", **params: Any) -> dict:
    """Analytical metrics of one config, asserting it is feasible."""
    from dse.core.results import metrics_row
    from evaluators.analytical import AnalyticalEvaluator

    ctx, batch = one_config(target, dtype, shape, b_layout, **params)
    assert ctx.space.check(batch).ok[0], ctx.space.explain(batch, 0)
    return metrics_row(AnalyticalEvaluator().score(batch, ctx), 0)


def first_rule(ctx, batch) -> str | None:
    index = int(ctx.space.check(batch).first_failed[0])
    return None if index < 0 else ctx.space.constraints[index].name


__all__ = ["batch_take", "first_rule", "one_config", "score_one"]


class StubTarget:
    """The little of a target the store keeps: a name, a digest and its constants."""

    name = "t"

    def digest(self) -> str:
        return "digest"

    def to_dict(self) -> dict:
        return {"x": 1}


def store_before() -> ModuleType:
    """``benchmarks/store_before.py``: the store's window writes and frame reads before the
    bulk and columnar paths, pinned there for ``store_speed.py`` and the tests comparing dse's
    paths with them."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "store_before.py"
    spec = importlib.util.spec_from_file_location("store_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def store_window(store: ResultStore, name: str, trials: list[tuple[dict, dict, bool]],
                 next_number: int = 0) -> Window:
    """A window of ``trials`` (params, metrics, cached) for study ``name`` (claimed, created
    if new), on one workload of the space ``SPACE``; a trial without metrics is infeasible."""
    claim = store.claim_study(name, {"s": name}, StubTarget(), "me:1", 60.0)
    workload_id, _ = store.open_workload(claim.study_id, WORKLOAD)
    pending = [PendingTrial(workload_id, config_key(SPACE, p), p,
                            EvalResult(Status.OK if metrics else Status.INFEASIBLE, metrics,
                                       None if metrics else "too big", 0.5), cached, BY)
               for p, metrics, cached in trials]
    return Window(name, claim.study_id, claim.target_id, SPACE, next_number, pending, None,
                  "me:1", 60.0, "host", {"numpy": "2"})
