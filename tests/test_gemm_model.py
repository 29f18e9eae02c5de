"""End-to-end model: each effect the paper measures moves the prediction the right way."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import score_one

BF16 = ("xdna", "bf16-bf16", "4224x4032x4224")
INT16 = ("xdna", "int8-int16", "4224x4032x4224")
BAL_BF16 = dict(m_ct=96, k_ct=56, n_ct=96, k_mt=224)
BAL_INT16 = dict(m_ct=96, k_ct=112, n_ct=96, k_mt=448)


def test_metrics_are_consistent():
    m = score_one(*INT16, **BAL_INT16)
    assert m["tops"] == pytest.approx(2 * 4224 * 4032 * 4224 / m["latency_s"] / 1e12)
    assert m["balance"] == pytest.approx(m["t_comp_s"] / m["t_mem_s"])
    assert m["bound"] in ("compute", "memory")
    assert m["latency_s"] >= max(m["t_core_s"], m["t_mem_s"])
    assert m["peak_tops"] == pytest.approx(m["macs_per_cycle"] * 16 * 1e9 * 2 / 1e12)
    assert m["cores"] == 16 and m["padding_ratio"] == 0
    assert all(np.isfinite(v) for v in m.values() if isinstance(v, float))


def test_short_k_mt_runs_are_memory_bound():
    short = score_one(*BF16, **dict(BAL_BF16, k_mt=56))
    long = score_one(*BF16, **BAL_BF16)
    assert short["bound"] == "memory" and short["dram_gbps"] < long["dram_gbps"]
    assert short["tops"] < 0.5 * long["tops"]
    # beyond the balanced k_mt the bandwidth no longer grows much
    longer = score_one(*BF16, **dict(BAL_BF16, k_mt=448))
    assert longer["dram_gbps"] < 1.1 * long["dram_gbps"]


def test_single_c_buffer_drain_is_exposed_double_hides_it():
    single = score_one(*INT16, **BAL_INT16)
    double = score_one("xdna", "int8-int16", "4224x4032x4224", buf_c_l1=2,
                       **dict(BAL_INT16, m_ct=64))
    assert single["t_drain_s"] > 0 and double["t_drain_s"] == 0
    # the paper: with K/k_ct > 20 the single-buffer drain costs < 5 %
    assert single["t_drain_s"] < 0.05 * single["latency_s"]


def test_zeroing_once_per_output_tile():
    m = score_one(*INT16, **BAL_INT16)
    rounds = (4224 / 384) ** 2
    assert m["t_zero_s"] == pytest.approx(rounds * 96 * 96 * 2 / 64 / 1e9)


def test_sequential_bds_cost_what_the_paper_measured():
    overlapped = score_one(*INT16, **BAL_INT16)
    sequential = score_one(*INT16, **dict(BAL_INT16, bd_scheme="sequential"))
    assert sequential["tops"] / overlapped["tops"] == pytest.approx(0.73, abs=0.01)
    assert overlapped["t_bd_s"] == 0 and sequential["t_bd_s"] > 0


def test_depth_one_buffers_serialise():
    base = score_one(*INT16, **BAL_INT16)
    for name in ("buf_a_l1", "buf_b_l1", "buf_a_l2", "buf_b_l2"):
        slower = score_one(*INT16, **dict(BAL_INT16, **{name: 1}))
        assert slower["latency_s"] > base["latency_s"], name


def test_row_major_b_is_slower_when_memory_bound():
    params = dict(m_ct=64, k_ct=232, n_ct=64, k_mt=464)
    col = score_one("xdna", "int8-int8", "4096x4176x4096", **params)
    row = score_one("xdna", "int8-int8", "4096x4176x4096", b_layout="row", **params)
    assert col["bound"] == "memory" and row["tops"] < col["tops"]


def test_orientation_swap_is_symmetric_on_a_square_array():
    a_rows = score_one("xdna", "int8-int8", "4032x4032x4032", m_ct=112, k_ct=112, n_ct=112,
                       k_mt=448)
    a_cols = score_one("xdna", "int8-int8", "4032x4032x4032", orientation="a_cols",
                       m_ct=112, k_ct=112, n_ct=112, k_mt=448)
    assert a_cols["tops"] == pytest.approx(a_rows["tops"])
    assert a_cols["l2_bytes"] == a_rows["l2_bytes"]


def test_using_fewer_columns_is_slower():
    full = score_one("xdna2", "int8-int8", "4096x4096x4096", m_ct=128, k_ct=64, n_ct=128,
                     k_mt=512)
    half = score_one("xdna2", "int8-int8", "4096x4096x4096", n_cols=4, m_ct=128, k_ct=64,
                     n_ct=128, k_mt=512)
    assert half["cores"] == 16 and half["tops"] < full["tops"]
