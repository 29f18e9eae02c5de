"""Every registered evaluator honours the contract (dse.core.Evaluator) on every space it
scores: one result per config, data not errors, its capabilities as declared. Evaluators this
machine cannot run (a GPU, an NPU) skip, saying why; their own files test them otherwise."""

from __future__ import annotations

import inspect
import math
import pickle

import numpy as np
import pytest

from dse.core import (
    Capabilities,
    Evaluator,
    Status,
    UsageError,
    batch_len,
    batch_take,
    build_evaluator,
    evaluator_class,
    evaluator_names,
    families,
    fidelity_ranks,
)
from tests.conformance import example_context, sample_configs

CASES = [(name, space) for name in evaluator_names() for space in evaluator_class(name).spaces
         if space in families()]
DECLARED = {"score": "score", "timeline": "simulate", "offline": "offline_job",
            "raw_output": "offline_result"}


def _cheap(name: str) -> dict:
    """Options that keep a measuring evaluator's repeats few."""
    accepted = inspect.signature(evaluator_class(name)).parameters
    return {"max_repeats": 3} if "max_repeats" in accepted else {}


@pytest.fixture(params=CASES, ids=[f"{n}-{s}" for n, s in CASES])
def case(request):
    name, space = request.param
    try:
        evaluator = build_evaluator(name, _cheap(name))
    except UsageError as exc:  # an option only the user can give (a toolchain's path)
        pytest.skip(f"evaluator {name!r} needs options to be built: {exc}")
    problem = evaluator.unavailable()
    if problem and "emulate" in inspect.signature(evaluator_class(name)).parameters:
        # an engine this CPU lacks, emulated: the contract holds the same (the times mean
        # nothing); where the engine is present the real one is tested
        evaluator = build_evaluator(name, {**_cheap(name), "emulate": True})
        problem = evaluator.unavailable()
    if problem:
        pytest.skip(f"evaluator {name!r} cannot run here: {problem}")
    ctx = example_context(space)
    batch, refused = sample_configs(ctx)
    return evaluator, ctx, batch, refused


@pytest.mark.parametrize("name", evaluator_names())
def test_the_class_declares_what_it_is(name):
    cls = evaluator_class(name)
    assert issubclass(cls, Evaluator) and cls.name == name and cls.version
    assert cls.fidelity in fidelity_ranks() and cls.spaces
    assert isinstance(cls.capabilities, Capabilities)
    accepted = inspect.signature(cls).parameters
    assert set(cls.result_options) <= set(accepted), "a result option is a constructor option"
    for capability, method in DECLARED.items():  # declared is implemented, and the other way
        implemented = getattr(cls, method) is not getattr(Evaluator, method)
        assert implemented == getattr(cls.capabilities, capability), (name, capability)


def test_one_result_per_config_in_order(case):
    evaluator, ctx, batch, refused = case
    results = evaluator.evaluate(batch, ctx)
    assert len(results) == batch_len(batch)
    feasible = batch_len(batch) - refused
    assert [r.status for r in results[feasible:]] == [Status.INFEASIBLE] * refused
    assert all(r.status is Status.OK for r in results[:feasible])


def test_results_are_the_configs_by_position(case):
    """A result holds no parameters: the i-th is config i's, so the batch reversed gives the
    results reversed (metrics compared where they are not timings of a run)."""
    evaluator, ctx, batch, _ = case
    if evaluator.fidelity == "hardware":
        pytest.skip("a hardware run's metrics are timings: they differ between two runs")
    forward = evaluator.evaluate(batch, ctx)
    backward = evaluator.evaluate(batch_take(batch, np.arange(batch_len(batch))[::-1]), ctx)
    assert len({repr(r.metrics) for r in forward}) > 1, "the sample tells no config apart"
    assert [(r.status, r.metrics, r.reason) for r in backward[::-1]] == \
        [(r.status, r.metrics, r.reason) for r in forward]


def test_results_are_finite_picklable_and_repeatable(case):
    evaluator, ctx, batch, _ = case
    first, second = evaluator.evaluate(batch, ctx), evaluator.evaluate(batch, ctx)
    if evaluator.fidelity != "hardware":  # measurements vary from run to run
        assert [r.metrics for r in first] == [r.metrics for r in second]
    for r in first:
        assert all(math.isfinite(v) and v >= 0 for v in r.metrics.values()
                   if isinstance(v, float))
        assert r.ok or r.reason
        assert not r.ok or (r.metrics["tops"] > 0 and r.metrics["latency_s"] > 0)
    assert pickle.loads(pickle.dumps(first)) == first
    assert pickle.loads(pickle.dumps(evaluator)).name == evaluator.name
    evaluator.close()


def test_declared_capabilities_work(case, tmp_path):
    evaluator, ctx, batch, refused = case
    feasible = {k: v[:batch_len(batch) - refused] for k, v in batch.items()}
    if evaluator.capabilities.score:
        metrics = evaluator.score(feasible, ctx)
        assert all(len(v) == batch_len(feasible) for v in metrics.values())
        assert (metrics["tops"] > 0).all()
    if evaluator.capabilities.timeline:
        one = {k: v[:1] for k, v in feasible.items()}
        evaluator.simulate(one, ctx, trace_path=tmp_path / "trace.json")
        assert (tmp_path / "trace.json").stat().st_size > 0
    if evaluator.capabilities.offline:
        job = evaluator.offline_job(ctx.space.decode(feasible)[0], ctx)
        assert isinstance(job, str) or job["kind"] in ("python", "command")
