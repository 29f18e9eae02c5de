"""Every registered evaluator honours the interface: one result per config, data not errors."""

from __future__ import annotations

import math
import pickle

import pytest

from dse.problem import build_context, build_evaluator
from dse.registry import evaluator_names
from dse.results import Status


@pytest.fixture(params=evaluator_names())
def evaluator(request):
    return build_evaluator(request.param)


def _batch():
    ctx = build_context("xdna", "int8-int16", "2048x2048x2048")
    configs = [ctx.space.resolve(dict(m_ct=m, k_ct=k, n_ct=n, k_mt=4 * k))
               for m, k, n in [(64, 64, 64), (96, 112, 96), (512, 512, 512), (60, 64, 64)]]
    return ctx, ctx.space.encode(configs)


def test_one_result_per_config_in_order(evaluator):
    ctx, batch = _batch()
    results = evaluator.evaluate(batch, ctx)
    assert [r.params["m_ct"] for r in results] == [64, 96, 512, 60]
    assert [r.status for r in results] == [Status.OK, Status.OK, Status.INFEASIBLE,
                                           Status.INFEASIBLE]


def test_results_are_deterministic_finite_and_picklable(evaluator):
    ctx, batch = _batch()
    first, second = evaluator.evaluate(batch, ctx), evaluator.evaluate(batch, ctx)
    assert [r.metrics for r in first] == [r.metrics for r in second]
    for r in first:
        assert all(math.isfinite(v) and v >= 0 for v in r.metrics.values()
                   if isinstance(v, float))
        assert r.ok or r.reason
    assert pickle.loads(pickle.dumps(first)) == first
    assert evaluator.name and evaluator.version and evaluator.fidelity
