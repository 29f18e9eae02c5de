"""The Ascend 950PR target: the BMM tiling design's worked examples, its branch rules, the design
space and the pipeline model."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dse.cli import main
from dse.core.errors import UsageError
from dse.core.registry import build_context, build_evaluator, load_target
from dse.core.workload import BatchedGemmWorkload
from search_spaces.ascend_bmm.rules import (
    BRANCHES,
    asw_tiling,
    classify,
    diagonal_assignment,
    l2_plan,
    snake_order,
    transpose_conflict,
)
from search_spaces.ascend_bmm.sweep import log_grid, sweep
from search_spaces.ascend_bmm.tiling import rule_decision


@pytest.fixture(scope="module")
def chip():
    return load_target("ascend-950pr")


def evaluate(shape, dtype="bf16", **params):
    ctx = build_context("ascend-950pr", dtype, shape)
    batch = ctx.space.encode([ctx.space.resolve(params)])
    return build_evaluator("analytical").evaluate(batch, ctx)[0], ctx


# --- the design's worked examples --------------------------------------------------------

def test_asw_tiling_of_the_worked_example(chip):
    # B=8, M=N=2048, K=1024, bf16: BaseM = BaseN = 176, singleCoreM = 880, k_L1 = 64
    tiling = asw_tiling(chip, 8, 2048, 1024, 2048)
    assert (tiling.base_m, tiling.base_n) == (176, 176)
    assert tiling.single_core_m == tiling.single_core_n == 880
    assert tiling.k_l1 == 64


def test_stream_k_thresholds(chip):
    assert round(chip.theta_c()) == 12
    thresholds = [math.ceil(g * g / (g - 1) * chip.theta_c()) for g in (2, 4, 8)]
    assert thresholds == [49, 66, 112]
    # with partial sums in GM instead of L2 the threshold unit grows to about 97
    assert chip.theta_c(chip.bandwidth.gm_workspace_bytes_per_s) == pytest.approx(97, abs=2)


def test_scenario_b_bandwidth(chip):
    # B=8, M=N=4096, K=512: inputs stay in L2, outputs straight to GM, about 1.05 TB/s
    plan = l2_plan(chip, 8, 4096, 512, 4096, 1024, 1024)
    assert (plan.scenario, plan.write_policy, plan.r_in) == ("B", "gm", 1.0)
    assert plan.bandwidth_needed == pytest.approx(1.05e12, rel=0.01)
    assert plan.bandwidth_needed < chip.bandwidth.gm_bytes_per_s


def test_swizzle_window_and_snake_order(chip):
    assert chip.swizzle_window == 4  # C = 32: the largest divisor not above sqrt(32)
    order = snake_order(32, 4, 8, 8)
    assert order[3, 0] == 3 and order[0, 1] == 4 and order[3, 7] == 31
    assert order[4, 7] == 32 and order[7, 7] == 35 and order[4, 0] == 60  # odd window: N reversed
    assert sorted(order.ravel()) == list(range(64))


def test_diagonal_assignment_of_eight_cores():
    grid = diagonal_assignment(8, 4, 4)
    expected = np.array([[0, 4, -1, -1], [-1, 1, 5, -1], [-1, -1, 2, 6], [7, -1, -1, 3]])
    assert (grid == expected).all()
    # every A row band and B column band is read by at most 2 cores of the wave (not 4)
    assert ((grid >= 0).sum(axis=1) <= 2).all() and ((grid >= 0).sum(axis=0) <= 2).all()
    assert transpose_conflict(8, 4, 4) == 2


def test_l2_grouping_example(chip):
    # B=64, M=N=2048, K=1024, singleCore 256: 2 x 2 blocks a group, 16 groups, r_in = 2
    plan = l2_plan(chip, 64, 2048, 1024, 2048, 256, 256)
    assert plan.scenario == "C"
    assert (plan.m_grp, plan.n_grp, plan.groups, plan.r_in) == (2, 2, 16, 2.0)


# --- the branch rules ----------------------------------------------------------------------

@pytest.mark.parametrize(("shape", "branch"), [
    ("8x2048x1024x2048", "asw_basic"),
    ("8/1x512x256x512", "to_matmul"),
    ("1/8x512x256x512", "to_matmul"),
    ("256x128x1x128", "special"),
    ("4096x64x128x64", "merge_batch"),
    # batch-heavy, small M/N, K truncated: every MergeBatch entry condition holds (b_core = 4 =
    # 2 b0, the merged output fits L0C, 512 KiB a core, intensity 64 < R16 / 2); the closed
    # form's T_cmd half (an estimate, no chip constant) would keep it IterBatch
    ("128x64x512x64", "merge_batch"),
    ("64x1024x1024x1024", "iter_batch"),  # b_core = 2, both sides cut along K (form d)
    ("8x64x65536x64", "stream_k"),
    ("2x100x3000x77", "asw_reduced_cores"),
    ("8x64x40x64", "asw_reduced_cores"),  # too short a K to pay for a reduction
])
def test_branches(chip, shape, branch):
    workload = BatchedGemmWorkload.parse(shape, "bf16")
    assert rule_decision(chip, workload)["branch"] == branch


def test_iter_batch_forms(chip):
    # every batch count a multiple of C: b_core = 2; both inputs twice in L1 -> form b
    decision = rule_decision(chip, BatchedGemmWorkload.parse("64x96x128x96", "bf16"))
    assert (decision["branch"], decision["iter_batch_form"]) == ("iter_batch", "b")
    # too big for two copies, one side resident -> c; too big for that -> d
    forms = classify(chip, 64, 64, [128, 2048], [512, 1024], [512, 2048])["iter_batch_form"]
    assert [["a", "b", "c", "d"][f] for f in forms] == ["c", "d"]
    # a tail of fewer than minCoreNum batches is not balanced: no IterBatch
    assert not classify(chip, 40, 40, 96, 128, 96)["iter_ok"]


def test_classifier_is_vectorised_and_agrees_with_itself(chip):
    rng = np.random.default_rng(0)
    shapes = [rng.integers(1, 4096, 2000) for _ in range(4)]
    together = classify(chip, shapes[0], shapes[0], *shapes[1:])["branch"]
    one_by_one = [int(classify(chip, b, b, m, k, n)["branch"])
                  for b, m, k, n in zip(*shapes, strict=True)]
    assert together.tolist() == one_by_one


def test_coverage_grid_and_sweep(chip):
    values = log_grid(60)
    assert len(values) == 54 and values[0] == 1 and values[-1] == 10240
    assert 2048 * len(values) ** 3 == 322_486_272  # the design's "3.2e8 shapes"
    counts, forms, _ = sweep(chip, np.arange(1, 129), values[::3])
    assert counts.sum() == 128 * len(values[::3]) ** 3
    assert all(counts > 0), dict(zip(BRANCHES, counts, strict=True))  # no branch left empty
    assert forms.sum() == counts[BRANCHES.index("iter_batch")]


def test_classify_cli(capsys):
    assert main(["ascend", "classify", "--shape", "8x2048x1024x2048", "--dtype", "bf16",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["branch"] == "asw_basic" and data["iter_batch_form"] is None
    assert data["P"] == 512 and data["theta_c"] == pytest.approx(12.24, abs=0.01)
    assert main(["ascend", "classify", "--shape", "64x96x128x96", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["iter_batch_form"] == "b"
    assert main(["ascend", "classify", "--shape", "8x2048x1024"]) == 2
    assert "BxMxKxN" in capsys.readouterr().err


# --- workload, space and model -------------------------------------------------------------

def test_batched_workload_parsing():
    w = BatchedGemmWorkload.parse("4*1/1*8x256x512x128", "bf16-fp32", "NT")
    assert w.batch_c == (4, 8) and w.batch == 32 and w.macs == 32 * 256 * 512 * 128
    assert w.shape == "4*1/1*8x256x512x128" and w.dtype.out_bytes == 4
    assert BatchedGemmWorkload.from_dict(w.to_dict()) == w
    with_bias = BatchedGemmWorkload.parse("8x64x64x64+bias", "bf16")
    assert with_bias.bias and with_bias.shape == "8x64x64x64+bias"
    plain, _ = evaluate("8x1024x1024x1024")
    biased, _ = evaluate("8x1024x1024x1024+bias")
    assert biased.metrics["dram_bytes"] - plain.metrics["dram_bytes"] == 8 * 1024 * 2
    with pytest.raises(UsageError, match="do not broadcast"):
        BatchedGemmWorkload.parse("3/4x16x16x16", "bf16")
    with pytest.raises(UsageError, match="unknown layout"):
        BatchedGemmWorkload.parse("2x16x16x16", "bf16", "col")


def test_rule_configs_are_feasible_across_shapes():
    rng = np.random.default_rng(3)
    shapes = [f"{rng.integers(1, 600)}x{rng.integers(1, 6000)}x{rng.integers(1, 40000)}x"
              f"{rng.integers(1, 6000)}" for _ in range(120)]
    shapes += [f"1/{rng.integers(2, 64)}x{rng.integers(1, 3000)}x{rng.integers(1, 3000)}x"
               f"{rng.integers(1, 3000)}" for _ in range(20)]
    for shape in shapes:
        result, _ = evaluate(shape)
        assert result.ok, (shape, result.reason)
        assert 0 < result.metrics["tops"] <= 432.0 + 1e-6  # never above the sustained peak


@pytest.mark.parametrize("shape", ["32*1/1*32x512x1024x512", "1*64/64x256x256x256",
                                   "8*1/1*8x16x4096x16"])
def test_rules_respect_the_batch_dims_not_only_their_counts(shape):
    # equal batch counts from different dims (a cross broadcast) are not "the same batches"
    result, ctx = evaluate(shape)
    assert result.ok, result.reason
    assert ctx.space.defaults()["branch"] not in ("iter_batch", "merge_batch")


def test_merge_batch_writes_only_the_real_output():
    result, ctx = evaluate("1024x16x4096x16")
    assert ctx.space.defaults()["branch"] == "merge_batch"
    assert result.metrics["dram_bytes_c"] == 1024 * 16 * 16 * 2


def test_folding_costs_a_copy_only_when_the_layout_needs_one():
    copies = {layout: evaluate_layout("1/8x512x256x512", layout) for layout in
              ("NN", "NT", "TN")}
    assert copies["NN"] > 0 and copies["NT"] == 0  # B copied into [K, B*N] unless transposed
    assert evaluate_layout("8/1x512x256x512", "TN") > 0 == evaluate_layout("8/1x512x256x512",
                                                                          "NN")


def evaluate_layout(shape: str, layout: str) -> float:
    ctx = build_context("ascend-950pr", "bf16", shape, layout)
    batch = ctx.space.encode([ctx.space.resolve({"branch": "to_matmul"})])
    result = build_evaluator("analytical").evaluate(batch, ctx)[0]
    assert result.ok, result.reason
    return result.metrics["t_rearrange_s"]


def test_infeasible_configs_say_why():
    result, _ = evaluate("8x2048x1024x2048", single_core_m=1760, single_core_n=1760, k_l1=128)
    assert not result.ok and "exceeds L1 (524,288 B)" in result.reason
    result, _ = evaluate("8x2048x1024x2048", branch="merge_batch", merge_b0=2)
    assert not result.ok and "same batches" not in result.reason  # applies: B equal
    result, _ = evaluate("8/1x512x256x512", branch="iter_batch")
    assert not result.ok and "same batches on both sides" in result.reason
    result, _ = evaluate("8x2048x1024x2048", branch="stream_k")
    assert not result.ok and "grid_k >= 2 only with stream_k" in result.reason


def test_output_straight_to_gm_keeps_inputs_in_l2():
    # scenario B: written through L2 the outputs push the inputs out (re-read from GM)
    through_l2, _ = evaluate("8x4096x512x4096", write_policy="l2")
    direct, _ = evaluate("8x4096x512x4096", write_policy="gm")
    assert direct.metrics["r_in"] == 1.0 < through_l2.metrics["r_in"]
    assert direct.metrics["dram_bytes"] < through_l2.metrics["dram_bytes"]


def test_l2_groups_bound_rereads_when_inputs_exceed_l2():
    shape = "64x2048x1024x2048"
    base = dict(base_m=128, base_n=128, single_core_m=256, single_core_n=256, k_l1=256,
                base_k=64, write_policy="gm", window=1)
    plain, _ = evaluate(shape, **base)
    grouped, _ = evaluate(shape, **base, group_m=2, group_n=2)
    assert grouped.ok and plain.ok
    assert grouped.metrics["r_in"] < plain.metrics["r_in"]


def test_stream_k_pays_a_reduction_and_merge_batch_a_drain():
    stream, _ = evaluate("8x64x65536x64")
    assert stream.metrics["t_reduce_s"] > 0
    # MergeBatch trades a longer drain (b0 batches a block) for fewer DMA commands
    merged, ctx = evaluate("4096x64x128x64")
    assert ctx.space.defaults()["branch"] == "merge_batch"
    one_by_one, _ = evaluate("4096x64x128x64", branch="iter_batch", merge_b0=1, base_m=64,
                             base_n=64, single_core_m=64, single_core_n=64)
    assert merged.ok and one_by_one.ok, one_by_one.reason
    assert merged.metrics["t_drain_s"] > one_by_one.metrics["t_drain_s"]
    assert merged.metrics["t_cmd_s"] < one_by_one.metrics["t_cmd_s"]


def test_more_gm_bandwidth_speeds_up_a_memory_bound_config(chip):
    ctx = build_context("ascend-950pr", "bf16", "4096x64x128x64")
    batch = ctx.space.encode([ctx.space.resolve({})])
    model = build_evaluator("analytical")
    slow = model.score(batch, ctx)["latency_s"][0]
    faster = chip.with_values(bandwidth={"gm_bytes_per_s": 3.2e12})
    quick_ctx = build_context("ascend-950pr", "bf16", "4096x64x128x64")
    quick_ctx = type(quick_ctx)(faster, quick_ctx.workload, type(quick_ctx.space)(
        faster, quick_ctx.workload))
    assert model.score(batch, quick_ctx)["latency_s"][0] < slow


def test_search_and_evaluate_commands(capsys):
    assert main(["evaluate", "--target", "ascend-950pr", "--dtype", "bf16", "--shape",
                 "8x2048x1024x2048", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "ok" and data["params"]["branch"] == "asw_basic"
    assert main(["evaluate", "--target", "ascend-950pr", "--dtype", "bf16", "--shape",
                 "8x2048x1024x2048", "--param", "base_m=40"]) == 1
    assert "multiples of 16" in capsys.readouterr().out
    assert main(["search", "--target", "ascend-950pr", "--dtype", "bf16", "--shape",
                 "8x2048x1024x2048", "--top", "3", "--json"]) == 0
    top = json.loads(capsys.readouterr().out)["top"]
    rules, _ = evaluate("8x2048x1024x2048")
    assert top[0]["metrics"]["tops"] >= rules.metrics["tops"] * 0.99


def test_a_study_goes_through_store_queries_dashboard_and_report(storage_url, tmp_path):
    from dse import load_trials
    from dse.analysis.report import write_report
    from dse.dashboard import create_app
    from dse.storage import open_store
    from dse.storage.frames import best_trials
    from dse.study.runner import run_study
    from dse.study.spec import study_from_dict

    run_study(study_from_dict({
        "name": "asc", "target": "ascend-950pr", "sampler": "tpe", "seed": 0,
        "workloads": [{"shape": "8x2048x1024x2048", "dtype": "bf16"},
                      {"shape": "8/1x512x256x512", "dtype": "bf16", "b_layout": "NT"}],
        "budget": {"trials": 25}}), storage_url)
    frame = load_trials(storage_url, "asc")
    assert set(frame["shape"]) == {"8x2048x1024x2048", "8/1x512x256x512"}
    assert set(frame["b_layout"]) == {"NN", "NT"} and (frame["status"] == "ok").mean() > 0.8
    assert len(best_trials(frame, top=1)) == 2
    store = open_store(storage_url)
    assert "8/1x512x256x512 bf16-bf16" in store.list_studies()["workloads"].iloc[0]
    page = store.trial_page("asc", where="shape == '8/1x512x256x512' and status == 'ok'",
                            sort="-tops", limit=5)
    assert page.total > 0 and set(page.frame["shape"]) == {"8/1x512x256x512"}
    client = create_app(storage_url).test_client()
    study = client.get("/study/asc")
    assert study.status_code == 200 and "8/1x512x256x512 bf16-bf16 (NT)" in study.text
    number = int(page.frame["number"].iloc[0])
    config = client.get(f"/config/{number}/asc")
    assert config.status_code == 200 and "DRAM traffic per matrix" in config.text
    assert "On-chip resource occupancy" in config.text
    report = write_report(open_store(storage_url), "asc", tmp_path / "asc.html")
    assert "Roofline" in report.read_text()


def test_balance_report_with_what_if(tmp_path):
    from dse.analysis.balance import balance_report
    from dse.storage import open_store
    from dse.study.runner import run_study
    from dse.study.spec import study_from_dict

    storage = str(tmp_path / "b.db")
    run_study(study_from_dict({"name": "bal", "target": "ascend-950pr", "sampler": "random",
                               "seed": 1, "workload": {"shape": "64x512x512x512",
                                                       "dtype": "bf16"},
                               "budget": {"trials": 20}}), storage)
    (report,) = balance_report(open_store(storage), "bal")
    assert report["study_best"]["bound"] in ("compute", "memory")
    knobs = {row["knob"] for row in report["what_if"]}
    assert knobs == {"GM bandwidth", "L1 size", "clock"}
    by = {(r["knob"], r["factor"]): r["tops"] for r in report["what_if"]}
    assert by[("clock", 1.5)] >= by[("clock", 0.5)]
    assert by[("GM bandwidth", 1.5)] >= by[("GM bandwidth", 0.5)]


def test_one_dma_command_per_k_segment_load_as_the_designs_t_iter():
    # K truncated (the whole K in L1): IterBatch loads each batch's A and B once, one T_cmd per
    # load (the design's T_iter = b_core * n_K * (T_load + T_cmd) + ...); MergeBatch b0 times
    # fewer (T_mb)
    one_by_one, ctx = evaluate("4096x64x128x64", branch="iter_batch", merge_b0=1, base_m=64,
                               base_n=64, single_core_m=64, single_core_n=64)
    b_core = 4096 // ctx.target.cores.cube
    assert one_by_one.metrics["t_cmd_s"] == pytest.approx(
        b_core * ctx.target.overheads.dma_command_s)
    merged, merged_ctx = evaluate("4096x64x128x64")
    b0 = merged_ctx.space.resolve({})["merge_b0"]
    assert merged.metrics["t_cmd_s"] == pytest.approx(
        -(-b_core // b0) * ctx.target.overheads.dma_command_s)
