"""The pruned exact search (branch-and-bound over a space's search tree) returns exactly what
scoring every config returns, and its bounds hold for every config below them."""

from __future__ import annotations

import numpy as np
import pytest

from dse.core import Nodes, batch_take
from dse.core.registry import build_context, build_evaluator, target_path
from dse.study.strategies.exact import TopK, rank
from dse.study.strategies.search import exhaustive

ANALYTICAL = build_evaluator("analytical")


def _small_target(tmp_path, name: str, l1: int, l2: int) -> str:
    """``name``'s target file with a smaller L1 and L2, so brute force stays quick."""
    text = target_path(name).read_text()
    lines = []
    for line in text.splitlines():
        if line.startswith("l1_bytes ="):
            line = f"l1_bytes = {l1}"
        elif line.startswith("l2_bytes ="):
            line = f"l2_bytes = {l2}"
        lines.append(line)
    path = tmp_path / f"small-{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def assert_same_search(ctx, free=(), fix=None, top=10):
    """Pruned and brute-force search agree config for config, metric for metric."""
    pruned = exhaustive(ANALYTICAL, ctx, fix=fix, free=free, top=top)
    brute = exhaustive(ANALYTICAL, ctx, fix=fix, free=free, top=top, prune=False)
    assert pruned.exact and brute.exact
    assert pruned.n_total == brute.n_total
    assert len(pruned.top) == len(brute.top)
    for a, b in zip(pruned.top, brute.top, strict=True):
        assert a.params == b.params
        assert a.metrics.keys() == b.metrics.keys()
        for name, value in a.metrics.items():
            other = b.metrics[name]
            assert value == other or (value != value and other != other)  # NaN is NaN
    return pruned, brute


CASES = [
    # target, dtype, shape, free, top
    ("xdna2", "int8-int8", "512x512x512",
     ("buf_a_l1", "buf_c_l1", "buf_b_l2", "buf_c_l2", "bd_scheme", "orientation"), 25),
    ("xdna2", "int8-int8", "100x300x200", ("m_rows", "n_cols", "b_layout"), 10),
    ("xdna", "int8-int16", "256x1024x256", ("buf_a_l1", "buf_b_l1", "buf_a_l2", "bd_scheme"), 40),
    ("xdna", "bf16-bf16", "384x256x640", ("m_rows", "orientation", "buf_c_l1"), 5),
    ("xdna2", "bf16-bf16", "64x8192x64", ("n_cols", "buf_b_l1", "buf_c_l2"), 1),
    ("xdna2", "int16-int16", "1000x1000x1000", ("buf_a_l1", "buf_b_l1", "buf_c_l2",
                                                "bd_scheme"), 100),
]


@pytest.mark.parametrize(("target", "dtype", "shape", "free", "top"), CASES)
def test_pruned_search_equals_brute_force_on_small_xdna_spaces(tmp_path, target, dtype, shape,
                                                                 free, top):
    ctx = build_context(_small_target(tmp_path, target, 16384, 65536), dtype, shape)
    pruned, brute = assert_same_search(ctx, free=free, top=top)
    assert pruned.n_scored < brute.n_feasible  # it did prune
    assert sum(pruned.pruned.values()) > 0


def test_pruned_search_equals_brute_force_on_the_shipped_chip(tmp_path):
    ctx = build_context("xdna2", "int8-int8", "4096x4096x4096")
    pruned, brute = assert_same_search(ctx, free=("bd_scheme", "buf_c_l2"))
    assert pruned.dominated == {"buf_c_l2": "depth 3 scores as depth 2 and takes more memory",
                                "bd_scheme": "sequential is slower than overlapped (BD "
                                             "reconfiguration)"}
    assert pruned.n_scored < brute.n_feasible / 100


def test_fixed_parameters_and_constraints_are_honoured(tmp_path):
    path = _small_target(tmp_path, "xdna2", 16384, 65536)
    ctx = build_context(path, "int8-int8", "256x256x512", constraints=("no_padding",))
    assert_same_search(ctx, free=("buf_a_l1", "m_rows"), fix={"k_ct": 32, "buf_c_l2": 3})
    assert_same_search(ctx, free=("bd_scheme",), fix={"m_ct": 32, "k_mt": 256})
    ctx = build_context(path, "int8-int8", "256x256x512")
    assert_same_search(ctx, free=("buf_b_l2",), fix={"buf_a_l1": 1, "bd_scheme": "sequential"})


def _descendants_below_bound(ctx, free):
    """For each level, whether every scored config below a node scores at most its bound."""
    tree = ctx.space.search_tree(free=free)
    nodes, level, checked = tree.roots(), 0, 0
    while True:
        children = tree.expand(level, nodes)
        if not isinstance(children, Nodes):
            break
        # map each child back to its parent by the parent's keys
        parent = {tuple(int(nodes.keys[k][i]) for k in nodes.keys): nodes.bound[i]
                  for i in range(len(nodes))}
        owner = np.array([parent[tuple(int(children.keys[k][i]) for k in nodes.keys)]
                          for i in range(len(children))])
        assert (children.bound <= owner * (1 + 1e-12)).all(), tree.levels[level + 1]
        nodes, level = children, level + 1
        checked += len(children)
    ok = ctx.space.check(children).ok
    configs = batch_take(children, np.flatnonzero(ok))
    tops = ANALYTICAL.score(configs, ctx)["tops"]
    keys = list(nodes.keys)
    bound = {tuple(int(nodes.keys[k][i]) for k in keys): nodes.bound[i] for i in range(len(nodes))}
    owner = np.array([bound[tuple(int(configs[k][i]) for k in keys)] for i in range(len(tops))])
    assert (tops <= owner * (1 + 1e-12)).all()
    return checked + len(tops)


def test_every_bound_holds_for_every_config_below_it(tmp_path):
    ctx = build_context(_small_target(tmp_path, "xdna2", 8192, 32768), "int8-int8", "192x640x320")
    assert _descendants_below_bound(ctx, ("buf_a_l1", "buf_c_l1", "buf_a_l2", "m_rows",
                                          "orientation", "b_layout", "bd_scheme")) > 1000


def test_dominated_choices_rank_after_the_config_they_shadow(tmp_path):
    ctx = build_context(_small_target(tmp_path, "xdna2", 16384, 65536), "int8-int8", "512x512x512")
    free = ("buf_a_l1", "buf_b_l2", "bd_scheme")
    tree = ctx.space.search_tree(free=free)
    batch, _ = ctx.space.enumerate(free=free)
    ok = ctx.space.check(batch).ok
    twins = ok & (batch["buf_a_l1"] == 2) & (batch["buf_b_l2"] == 2) & (batch["bd_scheme"] == 0)
    kept = batch_take(batch, np.flatnonzero(twins)[::50])
    shadows = tree.shadows(kept)
    # every combination of depth 3 for the two buffers and the sequential scheme, but kept's own
    assert len(shadows["m_ct"]) == 7 * len(kept["m_ct"]) > 0
    own = (shadows["buf_a_l1"] == 2) & (shadows["buf_b_l2"] == 2) & (shadows["bd_scheme"] == 0)
    assert not own.any()
    base = ANALYTICAL.score(kept, ctx)
    for name, kept_code, shadow_code in (("buf_a_l1", 2, 3), ("buf_b_l2", 2, 3),
                                         ("bd_scheme", 0, 1)):
        twin = {n: v.copy() for n, v in kept.items()}
        eligible = twin[name] == kept_code
        twin[name][eligible] = shadow_code
        scored = ANALYTICAL.score(twin, ctx)
        if name == "bd_scheme":
            assert (scored["tops"][eligible] < base["tops"][eligible]).all()
        else:
            assert (scored["tops"] == base["tops"]).all()
            assert (scored["l1_bytes"] >= base["l1_bytes"]).all()


def test_the_whole_space_is_searched_with_every_parameter_free():
    ctx = build_context("xdna2", "int8-int8", "4096x4096x4096")
    outcome = exhaustive(ANALYTICAL, ctx, free=list(ctx.space.params()), top=10)
    default = exhaustive(ANALYTICAL, ctx, top=1)
    assert outcome.exact and outcome.n_total > 10**15
    assert outcome.top[0].metrics["tops"] >= default.top[0].metrics["tops"]
    assert outcome.n_scored < 10**6


def test_rank_breaks_ties_by_memory_then_parameter_codes():
    metrics = {"tops": np.array([2.0, 3.0, 3.0, 3.0]), "l1_bytes": np.array([1, 5, 4, 4])}
    batch = {"a": np.array([0, 0, 2, 1]), "b": np.array([0, 0, 0, 9])}
    assert rank(metrics, batch).tolist() == [3, 2, 1, 0]
    top = TopK(2)
    top.add(batch, metrics)
    top.add({"a": np.array([0]), "b": np.array([0])},
            {"tops": np.array([3.0]), "l1_bytes": np.array([4])})
    assert top.batch["a"].tolist() == [0, 1] and top.threshold == 3.0


@pytest.mark.parametrize(("target", "dtype", "shape", "fix"), [
    ("h200", "bf16-bf16", "4096x4096x4096", None),
    ("h100", "fp16-fp16", "16x4096x4096", None),
    ("h200", "fp32-fp32", "1000x3000x77", {"SPLIT_K": 4}),
    ("h100", "bf16-bf16", "8192x128x8192", {"num_stages": 2, "BLOCK_K": 64}),
])
def test_pruned_search_equals_brute_force_on_gpu_spaces(target, dtype, shape, fix):
    ctx = build_context(target, dtype, shape)
    pruned, brute = assert_same_search(ctx, fix=fix, top=30)
    assert pruned.n_scored < brute.n_feasible
