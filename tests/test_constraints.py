"""Every feasibility rule rejects what it should, with a reason a person can read."""

from __future__ import annotations

import pytest

from dse.core.params import batch_take
from dse.core.registry import build_context, target_path
from tests.helpers import first_rule, one_config

OK = dict(m_ct=64, k_ct=64, n_ct=64, k_mt=256)


@pytest.mark.parametrize(("target", "dtype", "shape", "params", "rule", "words"), [
    ("xdna2", "int8-int8", "4096x4096x4096", dict(OK, m_ct=100), "micro_tile",
     ["m_ct=100 is not a positive multiple of 8", "8x8x8"]),
    ("xdna", "bf16-bf16", "4096x4096x4096", dict(OK, k_ct=60, k_mt=240), "micro_tile",
     ["k_ct=60 is not a positive multiple of 8", "4x8x4"]),
    ("xdna2", "int8-int8", "4096x4096x4096", dict(OK, m_ct=72), "register_blocking",
     ["multiple of 16", "m_ct=72"]),
    ("xdna2", "int8-int8", "4096x4096x4096", dict(OK, k_mt=100), "k_mt_multiple",
     ["k_mt=100", "k_ct=64"]),
    ("xdna2", "int8-int8", "4096x4096x4096", dict(OK, orientation="a_cols", m_rows=4, n_cols=8),
     "array_shape", ["needs 8 rows x 4 columns", "offers 4 x 8"]),
    ("xdna2", "int8-int8", "4096x4096x4096", dict(OK, m_ct=128, k_ct=128, n_ct=128, k_mt=512),
     "l1_capacity", ["L1 overflow", "81,920 B", "> 64,512 B", "1,024 B stack"]),
    ("xdna", "int8-int8", "4032x4032x4032", dict(m_ct=112, k_ct=112, n_ct=112, k_mt=4032),
     "l2_capacity", ["L2 overflow", "the fullest MemTile", "> 524,288 B"]),
    ("xdna", "int8-int8", "64x4200000x64", dict(m_ct=16, k_ct=64, n_ct=16, k_mt=256),
     "dma_limits", ["shim A BD row stride (K words) = 1050048 > 1048576", "shim B BD stride"]),
    ("xdna", "int16-int32", "1024x1024x1024", dict(m_ct=16, k_ct=64, n_ct=14, k_mt=256),
     "micro_tile", ["n_ct=14 is not a positive multiple of 4"]),
])
def test_rule_and_reason(target, dtype, shape, params, rule, words):
    ctx, batch = one_config(target, dtype, shape, **params)
    assert first_rule(ctx, batch) == rule
    reason = ctx.space.explain(batch, 0)
    for word in words:
        assert word in reason, reason


def test_explain_lists_every_broken_rule():
    ctx, batch = one_config("xdna2", "int8-int8", "4096x4096x4096",
                            m_ct=1000, k_ct=64, n_ct=64, k_mt=100)
    reason = ctx.space.explain(batch, 0)
    assert "micro-tile" in reason and "k_mt=100" in reason and "L1 overflow" in reason


def test_feasible_config_has_no_reason():
    ctx, batch = one_config("xdna", "int8-int8", "4032x4032x4032", **OK)
    assert ctx.space.check(batch).ok[0]
    assert ctx.space.explain(batch, 0) is None


def test_memtile_channels_on_a_taller_array(tmp_path):
    text = target_path("xdna").read_text().replace("rows = 4", "rows = 6")
    tall = tmp_path / "tall.toml"
    tall.write_text(text)
    ctx, batch = one_config(str(tall), "int8-int8", "4032x4032x4032", m_rows=5, **OK)
    assert first_rule(ctx, batch) == "memtile_channels"
    assert "7 S2MM channels, only 6 exist" in ctx.space.explain(batch, 0)


def test_optional_dma_bound_rule():
    params = dict(m_ct=16, k_ct=256, n_ct=16, k_mt=512)
    ctx, batch = one_config("xdna", "int8-int8", "4096x4096x4096", **params)
    assert first_rule(ctx, batch) is None
    strict = build_context("xdna", "int8-int8", "4096x4096x4096", constraints=["dma_bound"])
    batch = strict.space.encode([strict.space.resolve(params)])
    assert first_rule(strict, batch) == "dma_bound"
    assert "eq. 4" in strict.space.explain(batch, 0)


def test_optional_no_padding_rule_keeps_what_the_stock_iron_design_runs():
    from evaluators.hardware.iron import unsupported

    strict = build_context("xdna2", "int8-int8", "4000x4096x4096", constraints=["no_padding"])
    fixed = {name: 2 for name in ("buf_a_l1", "buf_b_l1", "buf_c_l1", "buf_a_l2", "buf_b_l2",
                                  "buf_c_l2")}
    padded = strict.space.resolve({**fixed, "m_ct": 64, "k_ct": 64, "n_ct": 64, "k_mt": 64,
                                   "n_cols": 8})  # M = 4000 is not a multiple of 4 * 64
    batch = strict.space.encode([padded])
    assert first_rule(strict, batch) == "no_padding"
    assert "would run padded to 4096x4096x4096" in strict.space.explain(batch, 0)
    assert unsupported(padded, strict.workload, "npu2", "make")
    strict = build_context("xdna2", "int8-int8", "4096x4096x3072", constraints=["no_padding"])
    generated, _ = strict.space.enumerate(fix={**fixed, "k_ct": 64, "k_mt": 64})
    kept = batch_take(generated, strict.space.check(generated).ok)
    assert len(kept["m_ct"]) > 10
    for config in strict.space.decode(kept):
        assert not [why for why in unsupported(config, strict.workload, "npu2", "make")
                    if "does not pad" in why]


def test_vectorised_check_matches_one_by_one():
    ctx = build_context("xdna", "bf16-bf16", "2048x2048x2048")
    batch, _ = ctx.space.enumerate(fix={"m_ct": 64})
    whole = ctx.space.check(batch)
    for i in range(0, len(batch["m_ct"]), max(len(batch["m_ct"]) // 40, 1)):
        single = {name: values[i:i + 1] for name, values in batch.items()}
        assert ctx.space.check(single).ok[0] == whole.ok[i]
