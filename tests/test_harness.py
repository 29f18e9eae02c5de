"""The measurement harness with a real worker process, and the CPU backend end to end."""

from __future__ import annotations

import time

import pytest

from dse.core.registry import build_context, build_evaluator
from dse.core.results import Status
from evaluators.hardware.harness import MeasureSettings, Worker, measure


@pytest.fixture
def worker():
    w = Worker()
    yield w
    w.close()


def test_a_hung_run_is_killed_and_recorded_as_timeout(worker):
    start = time.monotonic()
    m = measure(worker, "tests.hw_backends:hang", {}, MeasureSettings(timeout_s=1.5), "test")
    assert m.status is Status.TIMEOUT and "killed" in m.reason
    assert time.monotonic() - start < 20
    # the worker is replaced: the next job runs
    ok = measure(worker, "tests.hw_backends:steady", {}, MeasureSettings(timeout_s=10), "test")
    assert ok.status is Status.OK


def test_a_wrong_product_is_a_failure_not_a_result(worker):
    m = measure(worker, "tests.hw_backends:wrong", {}, MeasureSettings(), "test")
    assert m.status is Status.FAILED and "wrong product" in m.reason and not m.times
    crashed = measure(worker, "tests.hw_backends:crash", {}, MeasureSettings(), "test")
    assert crashed.status is Status.FAILED and "device lost" in crashed.reason


def test_a_run_that_raises_gets_a_fresh_worker_next(worker):
    """An error can leave the process unusable (a GPU fault poisons its CUDA context), so the
    next run starts a new one."""
    once = MeasureSettings(warmup=0, min_repeats=1, max_repeats=1)
    before = measure(worker, "tests.hw_backends:pid", {}, once, "test").times[0]
    assert measure(worker, "tests.hw_backends:pid", {}, once, "test").times[0] == before
    measure(worker, "tests.hw_backends:crash", {}, once, "test")
    assert measure(worker, "tests.hw_backends:pid", {}, once, "test").times[0] != before


def test_a_process_that_dies_in_a_run_is_a_failed_run_not_a_bug(worker):
    once = MeasureSettings(warmup=0, min_repeats=1, max_repeats=1)
    died = measure(worker, "tests.hw_backends:die", {}, once, "test")
    assert died.status is Status.FAILED and "the worker process died (exit code 11)" in died.reason
    assert measure(worker, "tests.hw_backends:steady", {}, once, "test").status is Status.OK


def test_repeats_until_the_spread_settles(worker):
    settings = MeasureSettings(warmup=2, min_repeats=4, max_repeats=9, target_spread=0.5)
    m = measure(worker, "tests.hw_backends:steady", {"seconds": 0.01}, settings, "test")
    assert m.status is Status.OK and len(m.times) == 4 and m.median == 0.01 and m.spread == 0
    tight = MeasureSettings(warmup=0, min_repeats=3, max_repeats=5, target_spread=-1.0)
    capped = measure(worker, "tests.hw_backends:steady", {}, tight, "test")
    assert len(capped.times) == 5  # never settles: stops at the cap


def test_cpu_backend_measures_and_checks():
    ctx = build_context("cpu", "fp32-fp32", "256x256x256")
    evaluator = build_evaluator("cpu", {"max_repeats": 4})
    batch = ctx.space.encode([ctx.space.resolve(dict(mc=16, kc=16, nc=16)),
                              ctx.space.resolve(dict(mc=256, kc=256, nc=256, pack_a="no")),
                              ctx.space.resolve(dict(mc=24, kc=16, nc=16))])
    slow, fast, bad = evaluator.evaluate(batch, ctx)
    evaluator.close()
    assert slow.ok and fast.ok and bad.status is Status.INFEASIBLE
    assert "multiples of 16" in bad.reason
    # block sizes genuinely change the measured time
    assert slow.metrics["latency_s"] > 3 * fast.metrics["latency_s"]
    for r in (slow, fast):
        assert 3 <= r.metrics["repeats"] <= 4 and len(r.metrics["times_s"]) == r.metrics["repeats"]
        assert r.metrics["device"] and r.metrics["blas"] and r.metrics["spread"] >= 0


def test_cpu_backend_rejects_a_corrupted_product(worker):
    job = dict(M=64, K=64, N=64, mc=32, kc=32, nc=32, pack_a=True, pack_b=True, corrupt=True)
    m = measure(worker, "evaluators.hardware.cpu_kernel:run", job, MeasureSettings(), "test")
    assert m.status is Status.FAILED and "max |error|" in m.reason
