"""Every registered family's search space honours the contract (dse.core.SearchSpace): a new
family is tested by registering it."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pytest

from dse.core import (
    ChoiceParam,
    IntParam,
    SearchOutcome,
    UsageError,
    batch_len,
    build_evaluator,
    dotted_value,
    families,
    family,  # the registry's function, not a module of that name
    registered,
)
from tests.conformance import FAMILIES, example_context, sample_configs


@pytest.fixture(params=FAMILIES)
def ctx(request):
    return example_context(request.param)


def test_the_family_names_its_space_and_workload_kind(ctx):
    fam = families()[ctx.space.name]
    assert fam.space is type(ctx.space) and fam.name == ctx.space.name
    assert ctx.space.workload_kind in registered("workload kind")
    assert fam.shipped_targets(), "a family ships at least one target file"


def test_parameters_have_fixed_domains_and_defaults(ctx):
    params = ctx.space.params()
    assert params and all(name == p.name and p.help for name, p in params.items())
    for p in params.values():
        assert isinstance(p, IntParam | ChoiceParam)
        if isinstance(p, IntParam):
            assert p.hi is None or p.lo <= p.hi
        else:
            assert p.choices
    defaults = ctx.space.defaults()
    assert set(defaults) <= set(params) and not set(defaults) & set(ctx.space.required)
    assert set(ctx.space.required) <= set(params)
    if ctx.space.required:
        with pytest.raises(UsageError, match="missing parameter"):
            ctx.space.resolve({})
    with pytest.raises(UsageError, match="unknown parameter"):
        ctx.space.parse({"no_such_parameter": 1})


def test_the_family_tables_name_its_parameters(ctx):
    params = set(ctx.space.params())
    assert set(ctx.space.kernel_keys) <= params and ctx.space.kernel_keys
    assert ctx.space.tile_axes is None or set(ctx.space.tile_axes) <= params
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in ctx.space.time_parts.items())
    for c in ctx.space.calibratable:  # what dse calibrate refits: numbers of the target file
        # a 0 can only be fitted from within a bound (the fit starts at a share of it)
        assert dotted_value(ctx.target, c.dotted) > 0 or c.upper is not None
        assert c.upper is None or c.upper > 0
    model = families()[ctx.space.name].model
    batch, _ = sample_configs(ctx, infeasible=0)
    reported = set(model(batch, ctx.target, ctx.workload)) if model else set()
    for metric, direction in ctx.space.objective_metrics.items():
        assert direction in ("maximize", "minimize")
        assert not model or metric in reported, f"the model does not report {metric}"


def test_chunks_are_batches_of_every_parameter(ctx):
    names = list(ctx.space.params())
    chunks = list(ctx.space.chunks())
    assert len(chunks) == ctx.space.n_chunks()
    for batch, box in chunks:
        assert set(batch) == set(names) and box >= 1
        lengths = {len(v) for v in batch.values()}
        assert len(lengths) == 1 and all(v.dtype == np.int64 for v in batch.values())


def test_encode_decode_check_and_explain(ctx):
    batch, refused = sample_configs(ctx)
    configs = ctx.space.decode(batch)
    again = ctx.space.encode(configs)
    assert all(np.array_equal(again[k], batch[k]) for k in batch)
    assert [ctx.space.resolve(c) for c in configs] == configs
    feasibility = ctx.space.check(batch)
    assert feasibility.ok.dtype == bool and len(feasibility.ok) == batch_len(batch)
    assert feasibility.ok.sum() == batch_len(batch) - refused and refused >= 1
    for i in range(batch_len(batch)):
        reason = ctx.space.explain(batch, i)
        assert (reason is None) == bool(feasibility.ok[i])
        assert feasibility.ok[i] or (isinstance(reason, str) and reason)
        assert (feasibility.first_failed[i] < 0) == bool(feasibility.ok[i])
    assert all(isinstance(ctx.space.describe(c), str) and ctx.space.describe(c) for c in configs)
    order = ctx.space.tie_order(batch)
    assert order is None or len(order) == batch_len(batch)


def test_the_optuna_encoding_decodes_into_whole_configs(ctx):
    encoding = ctx.space.optuna_encoding({}, [], {})
    distributions = encoding.distributions()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    decoded = [encoding.decode(study.ask(distributions).params) for _ in range(30)]
    for config in decoded:
        assert list(config) == list(ctx.space.params())
        assert ctx.space.parse(config) == config
    feasible = ctx.space.check(ctx.space.encode(decoded)).ok.mean()
    assert feasible > 0, "an encoding that never decodes into a feasible config samples nothing"


def test_an_unnarrowed_space_is_not_empty_and_a_narrowed_one_says_why(ctx):
    assert ctx.space.why_empty({}, [], {}) is None
    name = next(n for n, p in ctx.space.params().items() if isinstance(p, IntParam))
    reason = ctx.space.why_empty({}, [], {name: (10**9, 10**9 + 1)})
    assert isinstance(reason, str) and reason
    probe = ctx.space.smallest_config({})
    assert probe is None or set(ctx.space.resolve(probe)) == set(ctx.space.params())


def test_optional_constraints_can_be_enforced(ctx):
    for name in ctx.space.optional_constraints:
        narrowed = example_context(ctx.space.name, (name,))
        batch, _ = sample_configs(narrowed, infeasible=0)
        assert len(narrowed.space.check(batch).ok) == batch_len(batch)
        assert narrowed.space.satisfies(name, batch).dtype == bool
    with pytest.raises(UsageError, match="constraint"):
        example_context(ctx.space.name, ("no_such_rule",))


def test_what_if_knobs_edit_the_target(ctx):
    for knob, edit in ctx.space.what_if_knobs().items():
        edited = edit(1.5)
        assert type(edited) is type(ctx.target) and edited.name == ctx.target.name, knob
        assert edited.digest() != ctx.target.digest(), f"{knob} changed nothing"
        type(ctx.space)(edited, ctx.workload)  # the space builds on the edited target


def test_the_balance_procedure_walks_or_is_refused(ctx):
    model = build_evaluator("analytical")
    own = family(ctx.space.name)
    if own.balance is None:
        with pytest.raises(UsageError, match="no balance procedure"):
            own.walk_to_balance(model, ctx)
        return
    with pytest.raises(UsageError, match="has no option 'stride'"):
        own.walk_to_balance(model, ctx, stride=2)
    outcome = own.walk_to_balance(model, ctx)
    assert isinstance(outcome, SearchOutcome) and outcome.steps and outcome.top
    assert all(math.isfinite(step["tops"]) for step in outcome.steps)


def test_the_exact_search_with_pruning_equals_scoring_every_config(ctx):
    """Where the family offers a search tree, its bounds and dominated choices must leave the
    top exactly as brute force finds it; without one, the search scores every config."""
    from dse.study.strategies.search import exhaustive

    analytical = build_evaluator("analytical")
    if ctx.space.name not in analytical.spaces:
        pytest.skip(f"the {ctx.space.name} family has no analytical model to search with")
    free = [name for name, p in ctx.space.params().items()
            if isinstance(p, ChoiceParam) and len(p.choices) <= 3][:1]
    pruned = exhaustive(analytical, ctx, free=free, top=7)
    brute = exhaustive(analytical, ctx, free=free, top=7, prune=False)
    assert pruned.exact and brute.exact and pruned.top
    assert [c.params for c in pruned.top] == [c.params for c in brute.top]
    assert [c.metrics["tops"] for c in pruned.top] == [c.metrics["tops"] for c in brute.top]
    if ctx.space.search_tree(free=free) is not None:
        assert pruned.n_scored is not None and pruned.n_scored <= brute.n_feasible
