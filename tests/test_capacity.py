"""L1/L2 accounting against the paper's Table 2, buffer depths and XDNA2 MemTile sharing."""

from __future__ import annotations

import pytest

from dse.core.registry import target_path
from evaluators.analytical import paper_data
from tests.helpers import first_rule, one_config, score_one

TABLE2 = paper_data.table2()


@pytest.mark.parametrize("row", TABLE2, ids=[p.label for p in TABLE2])
def test_l1_and_l2_equal_table2(row):
    metrics = score_one("xdna", row.dtype, row.shape, **row.params)
    assert abs(metrics["l1_bytes"] / 1024 - row.l1_kib) <= 0.05 + 1e-9
    assert abs(metrics["l2_bytes"] / 1024 - row.l2_kib) <= 0.5 + 1e-9


def test_worked_example_bytes():
    m = score_one("xdna", "int8-int8", "4032x4032x4032", m_ct=112, k_ct=112, n_ct=112, k_mt=448)
    assert m["l1_bytes"] == 2 * 112 * 112 + 2 * 112 * 112 + 112 * 112 == 62720
    assert m["l2_bytes"] == 4 * 2 * 112 * 448 + 4 * 2 * 448 * 112 + 4 * 4 * 112 * 112 == 1003520


def test_buffer_depths_generalise_eq5():
    base = dict(m_ct=64, k_ct=64, n_ct=64, k_mt=256)
    single = score_one("xdna", "int8-int32", "1024x1024x1024", **base)
    double_c = score_one("xdna", "int8-int32", "1024x1024x1024", buf_c_l1=2, **base)
    triple_a = score_one("xdna", "int8-int32", "1024x1024x1024", buf_a_l1=3, **base)
    assert double_c["l1_bytes"] - single["l1_bytes"] == 64 * 64 * 4
    assert triple_a["l1_bytes"] - single["l1_bytes"] == 64 * 64 * 1
    deeper_l2 = score_one("xdna", "int8-int32", "1024x1024x1024", buf_c_l2=2, **base)
    assert deeper_l2["l2_bytes"] - single["l2_bytes"] == 4 * 4 * 64 * 64 * 4


def test_row_major_b_stages_the_l1_tile_in_l2():
    col = score_one("xdna", "int8-int8", "4032x4032x4032", m_ct=112, k_ct=112, n_ct=112, k_mt=448)
    row = score_one("xdna", "int8-int8", "4032x4032x4032", b_layout="row",
                    m_ct=112, k_ct=112, n_ct=112, k_mt=448)
    assert col["l2_bytes"] - row["l2_bytes"] == 4 * 2 * (448 - 112) * 112


def test_l1_stack_counts():
    # 2*112*112*2 + 112*128... exactly at the limit of 64 KiB - 1 KiB stack fits, one more row not
    ctx, batch = one_config("xdna", "int8-int8", "4096x4096x4096",
                            m_ct=112, k_ct=104, n_ct=128, k_mt=416)
    assert first_rule(ctx, batch) is None  # 64,256 B <= 64,512 B
    ctx, batch = one_config("xdna", "int8-int8", "4096x4096x4096",
                            m_ct=112, k_ct=112, n_ct=128, k_mt=448)
    assert first_rule(ctx, batch) == "l1_capacity"  # 66,304 B


def test_xdna2_spills_into_the_neighbouring_memtile(tmp_path):
    params = dict(m_ct=128, k_ct=72, n_ct=112, k_mt=1008)
    ctx, batch = one_config("xdna2", "int8-int16", "4096x4032x4096", **params)
    assert first_rule(ctx, batch) is None
    text = target_path("xdna2").read_text().replace(
        "l2_neighbour_sharing = true", "l2_neighbour_sharing = false")
    no_sharing = tmp_path / "xdna2_no_sharing.toml"
    no_sharing.write_text(text)
    ctx, batch = one_config(str(no_sharing), "int8-int16", "4096x4032x4096", **params)
    assert first_rule(ctx, batch) == "l2_capacity"
    assert "598,528 B > 524,288 B" in ctx.space.explain(batch, 0)
