"""Every registered evaluator honours the interface: one result per config, data not errors."""

from __future__ import annotations

import math
import pickle

import pytest

from dse.core.registry import build_context, build_evaluator, evaluator_class, evaluator_names
from dse.core.results import Status

# per search space: a problem and configs whose last two are infeasible
PROBLEMS = {
    "xdna_gemm": (("xdna", "int8-int16", "2048x2048x2048"),
                  [dict(m_ct=m, k_ct=k, n_ct=n, k_mt=4 * k)
                   for m, k, n in [(64, 64, 64), (96, 112, 96), (512, 512, 512), (60, 64, 64)]]),
    "cpu_gemm": (("cpu", "fp32-fp32", "128x128x128"),
                 [dict(mc=32, kc=32, nc=32), dict(mc=64, kc=128, nc=64, pack_b="no"),
                  dict(mc=256, kc=32, nc=32), dict(mc=40, kc=32, nc=32)]),
    "triton_gemm": (("h200", "bf16-bf16", "4096x4096x4096"),
                    [dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
                     dict(BLOCK_M=64, BLOCK_N=256, BLOCK_K=32, num_stages=4, SPLIT_K=2),
                     dict(BLOCK_M=256, BLOCK_N=256, BLOCK_K=128, num_stages=5, num_warps=16),
                     dict(BLOCK_M=96, BLOCK_N=128, BLOCK_K=64)]),
    "ascend_bmm": (("ascend-950pr", "bf16", "8x2048x1024x2048"),
                   [{}, dict(base_m=128, base_n=128, single_core_m=512, single_core_n=256,
                             k_l1=128, base_k=64),
                    dict(single_core_m=1760, single_core_n=1760, k_l1=128),
                    dict(base_m=40)]),
}
# evaluators that need a device this machine lacks are tested by their own files
NEEDS_DEVICE = {"iron", "triton"}
CASES = [(name, space) for name in evaluator_names() if name not in NEEDS_DEVICE
         for space in evaluator_class(name).spaces]


@pytest.fixture(params=CASES, ids=[f"{n}-{s}" for n, s in CASES])
def case(request):
    name, space = request.param
    problem, configs = PROBLEMS[space]
    ctx = build_context(*problem)
    options = {"max_repeats": 3} if name == "cpu" else None
    return build_evaluator(name, options), ctx, ctx.space.encode(
        [ctx.space.resolve(c) for c in configs])


def test_one_result_per_config_in_order(case):
    evaluator, ctx, batch = case
    results = evaluator.evaluate(batch, ctx)
    assert [r.params for r in results] == ctx.space.decode(batch)
    assert [r.status for r in results] == [Status.OK, Status.OK, Status.INFEASIBLE,
                                           Status.INFEASIBLE]


def test_results_are_finite_picklable_and_repeatable(case):
    evaluator, ctx, batch = case
    first, second = evaluator.evaluate(batch, ctx), evaluator.evaluate(batch, ctx)
    if evaluator.fidelity != "hardware":  # measurements vary from run to run
        assert [r.metrics for r in first] == [r.metrics for r in second]
    for r in first:
        assert all(math.isfinite(v) and v >= 0 for v in r.metrics.values()
                   if isinstance(v, float))
        assert r.ok or r.reason
        assert not r.ok or r.metrics["tops"] > 0
    assert pickle.loads(pickle.dumps(first)) == first
    assert pickle.loads(pickle.dumps(evaluator)).name == evaluator.name
    assert evaluator.name and evaluator.version and evaluator.fidelity
