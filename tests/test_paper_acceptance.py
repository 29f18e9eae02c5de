"""The model against the paper's published XDNA measurements (and the XDNA2 facts it states).

Table 2's rows, the short-k_mt point and the Table 1 int8-int16 kernel were used to calibrate the
DRAM curve and dispatch overhead (3 constants for 10 points); the remaining checks are not fitted.
"""

from __future__ import annotations

import numpy as np
import pytest

from dse.core.registry import build_context
from dse.study.strategies.search import exhaustive
from evaluators.analytical import paper_data
from evaluators.analytical.calibration import predict_point, row_major_gap
from search_spaces.xdna_gemm.paper_strategy import paper_strategy
from tests.helpers import score_one

TABLE2 = paper_data.table2()
RANK1 = [p for p in TABLE2 if p.rank == 1]
TABLE1_XDNA = {p.dtype: p for p in paper_data.table1() if p.device == "xdna"}
KERNEL = ("m_ct", "k_ct", "n_ct")


def _predicted(point):
    from dse.core.registry import load_target

    return predict_point(load_target("xdna"), point)["tops"]


def test_table2_end_to_end_error():
    errors = np.array([_predicted(p) / p.tops - 1 for p in TABLE2])
    assert np.mean(np.abs(errors)) <= 0.01
    assert np.max(np.abs(errors)) <= 0.021


@pytest.mark.parametrize("dtype", sorted({p.dtype for p in TABLE2}))
def test_rank1_predicted_at_least_as_fast_as_rank2(dtype):
    r1, r2 = (next(p for p in TABLE2 if p.dtype == dtype and p.rank == r) for r in (1, 2))
    assert _predicted(r1) >= _predicted(r2)


def test_memory_bound_facts():
    assert _predicted(paper_data.SHORT_RUN_BF16) == pytest.approx(1.27, rel=0.03)
    assert _predicted(paper_data.TABLE1_KERNEL_INT16) == pytest.approx(4.03, rel=0.03)


def test_c_double_buffering_loses_to_single():
    # Not fitted: the paper's best bf16 kernel with C double-buffered (80x40x96) is slower than
    # the single-buffered balanced kernel (2.76 vs 3.12 TOPS, -11.5 %).
    double = _predicted(paper_data.C_DOUBLE_BUFFER)
    single = _predicted(next(p for p in RANK1 if p.dtype == "bf16-bf16"))
    assert double == pytest.approx(2.76, rel=0.08)
    assert 0.80 < double / single < 0.97


def test_row_major_b_gap_sign():
    # The paper: col-major faster on average by 4.8 % / 4.4 % (int8) and 0.57 % (bf16).
    from dse.core.registry import load_target

    xdna = load_target("xdna")
    gaps = {d: row_major_gap(xdna, d, samples=20) for d in paper_data.ROW_MAJOR_GAPS}
    # One merge factor cannot give both int8 gaps: the model puts int8-int8's at ~0 (its
    # kernel's 112-B rows merge past the DRAM knee) and reproduces the other two.
    assert gaps["int8-int16"] == pytest.approx(0.044, abs=0.02)
    assert gaps["bf16-bf16"] == pytest.approx(0.0057, abs=0.01)
    assert gaps["int8-int8"] > -0.005


def test_xdna2_int8_int16_4k_time():
    # Not fitted (no XDNA2 end-to-end number is): the paper quotes 5.2 ms for a ~4K square
    # int8-int16 GEMM on XDNA2 with its balanced kernel 128x72x112 (k_mt 432).
    m = score_one("xdna2", "int8-int16", "4096x4320x4096", m_ct=128, k_ct=72, n_ct=112, k_mt=432)
    assert m["latency_s"] == pytest.approx(5.2e-3, rel=0.10)


@pytest.mark.parametrize("point", RANK1, ids=[p.dtype for p in RANK1])
def test_balanced_kernel_in_exhaustive_top10(point, analytical):
    ctx = build_context("xdna", point.dtype, point.shape)
    outcome = exhaustive(analytical, ctx, top=10)
    found = [{k: c.params[k] for k in (*KERNEL, "k_mt")} for c in outcome.top]
    assert point.params in found


def _next_to(end: dict, paper: dict, path: list[dict]) -> bool:
    """Equal, one k_ct step of the same tile area away, or adjacent on the walked path."""
    if all(end[k] == paper[k] for k in KERNEL):
        return True
    if end["m_ct"] * end["n_ct"] == paper["m_ct"] * paper["n_ct"] and abs(
            end["k_ct"] - paper["k_ct"]) <= 8:
        return True
    walked = [tuple(s[k] for k in KERNEL) for s in path]
    target, here = tuple(paper[k] for k in KERNEL), tuple(end[k] for k in KERNEL)
    return target in walked and abs(walked.index(target) - walked.index(here)) == 1


@pytest.mark.parametrize("point", RANK1, ids=[p.dtype for p in RANK1])
def test_paper_strategy_from_table1_kernel(point, analytical):
    ctx = build_context("xdna", point.dtype, point.shape)
    t1 = TABLE1_XDNA[point.dtype]
    outcome = paper_strategy(analytical, ctx, start=(t1.m, t1.k, t1.n),
                             k_mt_target=paper_data.CHOSEN_K_MT[point.dtype])
    assert (outcome.steps[0]["m_ct"], outcome.steps[0]["k_ct"]) == (t1.m, t1.k)
    assert _next_to(outcome.top[0].params, point.params, outcome.steps)
