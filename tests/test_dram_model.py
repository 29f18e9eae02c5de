"""DRAM traffic (eqs. 6-8) and the run-length bandwidth curve."""

from __future__ import annotations

import numpy as np
import pytest

from dse.core.registry import load_target
from evaluators.analytical.xdna_dram import merged_run, page_shared_run, run_bandwidth
from tests.helpers import score_one

XDNA = load_target("xdna")


def test_bandwidth_linear_for_short_runs_and_flat_for_long():
    d = XDNA.dram
    runs = np.array([16.0, 32.0, 2048.0, 8192.0])
    bw = run_bandwidth(runs, d)
    assert bw[1] / bw[0] == pytest.approx(2.0, rel=1e-3)
    assert bw[3] / bw[2] == pytest.approx(1.0, abs=1e-3)
    assert bw[3] == pytest.approx(d.peak_bytes_per_s, rel=1e-3)
    assert np.all(np.diff(run_bandwidth(np.linspace(8, 4096, 64), d)) > 0)


def test_writes_and_merged_streams():
    d = XDNA.dram
    assert run_bandwidth(np.array([512.0]), d, write=True)[0] == pytest.approx(
        d.write_efficiency * run_bandwidth(np.array([512.0]), d)[0])
    assert merged_run(np.array([100.0]), np.array([1]), d)[0] == 100.0
    assert merged_run(np.array([100.0]), np.array([4]), d)[0] == pytest.approx(
        100 * (1 + 3 * d.read_merge))
    assert merged_run(np.array([100.0]), np.array([4]), d, write=True)[0] == pytest.approx(
        100 * (1 + 3 * d.write_merge))


def test_traffic_matches_eqs_6_to_8():
    M, K, N = 4224, 4224, 4032
    m = score_one("xdna", "int8-int16", f"{M}x{K}x{N}", m_ct=96, k_ct=96, n_ct=112, k_mt=384)
    assert m["dram_bytes_a"] == pytest.approx(M * K * N * 1 / (112 * 4))
    assert m["dram_bytes_b"] == pytest.approx(M * K * N * 1 / (96 * 4))
    assert m["dram_bytes_c"] == pytest.approx(M * N * 2)
    assert m["dram_bytes"] == pytest.approx(m["dram_bytes_a"] + m["dram_bytes_b"]
                                            + m["dram_bytes_c"])


def test_padding_is_charged_in_traffic_and_time():
    exact = score_one("xdna", "int8-int8", "4032x4032x4032", m_ct=112, k_ct=112, n_ct=112,
                      k_mt=448)
    padded = score_one("xdna", "int8-int8", "4033x4032x4032", m_ct=112, k_ct=112, n_ct=112,
                       k_mt=448)
    assert padded["padding_ratio"] == pytest.approx((4032 + 448) / 4033 - 1)
    assert padded["dram_bytes"] > exact["dram_bytes"]
    assert padded["latency_s"] > exact["latency_s"] and padded["tops"] < exact["tops"]


def test_runs_of_rows_shorter_than_a_page_share_its_opening():
    d = XDNA.dram
    run = np.array([144.0, 144.0, 144.0, 144.0])
    row = np.array([d.page_bytes / 4, d.page_bytes / 4, d.page_bytes, 4 * d.page_bytes])
    rows = np.array([64, 2, 64, 64])
    # four rows to a page: four runs' worth; at most the tile's rows; one run a page or less
    assert page_shared_run(run, row, rows, d).tolist() == [576.0, 288.0, 144.0, 144.0]
    # so a row-major B is faster when N is short of a page, a column-major B does not care
    short, long = ("4096x1024x1152", "4096x1024x9216")
    kernel = dict(m_ct=128, k_ct=64, n_ct=144, k_mt=512)
    row_major = [score_one("xdna2", "int8-int8", s, "row", **kernel)["dram_gbps"]
                 for s in (short, long)]
    col_major = [score_one("xdna2", "int8-int8", s, "col", **kernel)["dram_gbps"]
                 for s in (short, long)]
    assert row_major[0] > 1.2 * row_major[1]
    assert col_major[0] == pytest.approx(col_major[1], rel=0.02)
