"""The systolic-array family: targets, workloads, the space's rules and budgets, the analytical
model against hand-derivable cases (the seed's figures, fold counts, a tiling's traffic),
energy, sparsity, the simulator rung and ``dse systolic scalesim``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dse.cli import main
from dse.core import UsageError, build_context, load_target
from dse.core.params import batch_len
from evaluators.analytical.systolic_gemm import (
    ENERGY_LEVELS,
    fill_drain_efficiency,
    folds,
    score,
    sram_access_pj,
)
from evaluators.systolic_sim import SystolicSimEvaluator, setup_of, sim_metrics
from evaluators.systolic_sim.fold_schedule import ArraySetup, simulate_gemm
from search_spaces.systolic_gemm.workload import GemmMix

FIXTURES = Path(__file__).parent / "fixtures" / "scalesim"


def evaluate(target: str, shape: str, dtype: str = "int8-int8", b_layout: str | None = None,
             constraints: tuple[str, ...] = (), **params):
    """The model's metrics of one config (scalars), with its context."""
    ctx = build_context(target, dtype, shape, b_layout, constraints)
    batch = ctx.space.encode([ctx.space.resolve(params)])
    assert ctx.space.check(batch).ok[0], ctx.space.explain(batch, 0)
    metrics = score(batch, ctx.target, ctx.workload)
    return {k: v[0] for k, v in metrics.items()}, ctx, batch


# -- targets ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name, peak_tops, gb_s", [
    ("tpu-v1", 92, 34), ("tpu-v2", 46, 700), ("tpu-v3", 123, 900), ("tpu-v4", 275, 1200)])
def test_tpu_targets_carry_the_seeds_peaks_and_bandwidths(name, peak_tops, gb_s):
    target = load_target(name)
    peak, bandwidth = target.roofline()
    assert peak / 1e12 == pytest.approx(peak_tops, rel=0.005)
    assert bandwidth == pytest.approx(gb_s * 1e9)


def test_tpu_v1_ridge_point_is_the_seeds():
    peak, bandwidth = load_target("tpu-v1").roofline()
    assert peak / bandwidth == pytest.approx(2706, rel=0.005)  # the seed: ~2706 ops/byte


def test_edge_npu_is_a_32x32_int8_array():
    target = load_target("edge-npu")
    assert (target.array.rows, target.array.cols, target.array.count) == (32, 32, 1)
    assert target.dtypes[0].startswith("int8")


# -- workloads -------------------------------------------------------------------------------
def test_a_mix_parses_with_counts_and_round_trips():
    w = GemmMix.parse("1x4096x4096*32, 2048x4096x11008", "bf16-fp32", "2:4")
    assert [(t.M, t.K, t.N, t.count) for t in w.terms] == [(1, 4096, 4096, 32),
                                                            (2048, 4096, 11008, 1)]
    assert w.shape == "1x4096x4096*32,2048x4096x11008" and w.sparse
    assert (w.M, w.K, w.N) == (2048, 4096, 11008)
    assert w.macs == 32 * 4096 * 4096 + 2048 * 4096 * 11008
    assert GemmMix.from_dict(w.to_dict()) == w


@pytest.mark.parametrize("shape, layout, message", [
    ("1x2", None, "is not of the form MxKxN"),
    ("0x4x4", None, "dimension M"),
    ("4x4x4*0", None, "count"),
    ("4x4x4", "row", "unknown B storage"),
])
def test_bad_workloads_are_refused_by_name(shape, layout, message):
    with pytest.raises(UsageError, match=message):
        GemmMix.parse(shape, "int8-int8", layout)


# -- the seed's analysis and hand-derivable cases ----------------------------------------------
@pytest.mark.parametrize("m, k, figure", [(1024, 1024, 0.9995), (256, 256, 0.992),
                                          (32, 32, 0.668), (1, 256, 0.334)])
def test_the_seeds_four_utilisation_figures(m, k, figure):
    # eta = MK / (MK + 2(N-1)) on TPU v1's 256 x 256 array ...
    assert fill_drain_efficiency(m * k, 256, 256) == pytest.approx(figure, abs=0.0006)
    # ... is the model's utilisation of one output-stationary fold streaming M*K values
    depth = m * k
    one, _, _ = evaluate("tpu-v1", f"256x{depth}x256", "int8-int32", t_m=256, t_k=depth,
                         t_n=256, dataflow="os", ifmap_kb=1 << 20, filter_kb=1 << 20)
    assert one["fold_executions"] == 1
    assert one["utilisation"] == pytest.approx(figure, abs=0.0006)


def test_one_output_stationary_fold_is_the_seeds_eta():
    # one fold: 256 rows of A and 256 columns of B fill the array, K = 1024 streams through it
    m, _, _ = evaluate("tpu-v1", "256x1024x256", "int8-int32", t_m=256, t_k=1024, t_n=256,
                       dataflow="os", buf_b=1)
    assert m["compute_cycles"] == 1024 + 2 * 255
    assert m["utilisation"] == pytest.approx(fill_drain_efficiency(1024, 256, 256))
    assert m["mapping_efficiency"] == 1.0


def test_fold_counts_cover_whole_and_partial_tiles():
    # 196 columns in tiles of 64 on 16 PEs: three tiles of 4 folds and one of 4 columns
    assert int(folds(196, np.array([64]), np.array([16]))[0]) == 3 * 4 + 1
    assert int(folds(10, np.array([10]), np.array([4]))[0]) == 3


def test_folds_and_stationary_preload_by_dataflow():
    # M=10, K=8, N=6 on a 4 x 4 array, untiled: output-stationary folds M and N (3 x 2) and
    # streams K; weight-stationary folds K and N (2 x 2), streams M and first shifts the weights
    # in (4 cycles a fold); input-stationary folds K and M (2 x 3) and streams N
    expected = {"os": 6 * (8 + 4 + 4 - 2), "ws": 4 * (10 + 4 + 4 + 4 - 2),
                "is": 6 * (6 + 4 + 4 + 4 - 2)}
    for flow, cycles in expected.items():
        m, _, _ = evaluate("edge-npu", "10x8x6", t_m=10, t_k=8, t_n=6, dataflow=flow, rows=4,
                           cols=4)
        assert m["compute_cycles"] == cycles, flow
        assert m["fold_executions"] == {"os": 6, "ws": 4, "is": 6}[flow]


def test_the_model_counts_the_cycles_scalesim_schedules():
    # without stalls SCALE-Sim's compute cycles are the index of the last cycle (from 0): one
    # less than the model's count, for every dataflow and shape
    for flow in ("os", "ws", "is"):
        for m, k, n, r, c in [(64, 80, 96, 8, 8), (1, 50, 37, 4, 4), (45, 33, 70, 8, 16)]:
            ours, _, _ = evaluate("edge-npu", f"{m}x{k}x{n}", t_m=m, t_k=k, t_n=n,
                                  dataflow=flow, rows=r, cols=c, ifmap_kb=4096,
                                  filter_kb=4096, ofmap_kb=4096)
            theirs = simulate_gemm(ArraySetup(r, c, flow, 4096, 4096, 4096), m, n, k)
            assert ours["compute_cycles"] == theirs.compute_cycles + 1
            assert 100 * ours["mapping_efficiency"] == pytest.approx(theirs.mapping_eff_pct)


def resnet_conv4(**params):
    # the seed's ResNet-50 conv4 GEMM on a 16 x 16 array, T_M = T_N = 16, K whole
    return evaluate("edge-npu", "256x2304x196", **{
        "t_m": 16, "t_k": 2304, "t_n": 16, "dataflow": "os", "rows": 16, "cols": 16,
        "loop_order": "mnk", **params})[0]


def test_a_tilings_traffic_with_the_panel_on_chip_reads_each_operand_once():
    m = resnet_conv4(filter_kb=1024)  # B's 2304 x 196 panel (451 KB) stays in SRAM
    assert (m["dram_bytes_a"], m["dram_bytes_b"]) == (256 * 2304, 2304 * 196)
    assert m["reuse_b"] == 1


def test_a_tilings_traffic_without_room_rereads_b_for_every_row_of_tiles():
    m = resnet_conv4(filter_kb=128)
    # A's tile stays across the inner n loop; B is read again for each of the 16 rows of tiles
    assert m["dram_bytes_a"] == 256 * 2304
    assert m["dram_bytes_b"] == 2304 * 196 * 16 and m["reuse_b"] == 0
    order = resnet_conv4(filter_kb=128, loop_order="nmk")  # now A is re-read per column
    assert order["dram_bytes_a"] == 256 * 2304 * 13  # ceil(196 / 16) columns of tiles


def test_partial_sums_leave_the_chip_when_k_is_not_innermost():
    m, _, _ = evaluate("edge-npu", "512x1024x256", t_m=256, t_k=256, t_n=256, dataflow="os",
                       loop_order="kmn", buf_c=1, ofmap_kb=256)
    # C's 512 x 256 panel of 4 B accumulators does not fit 256 KiB: its partial sums go out
    # after each K tile but the last and come back (3 + 3 passes at 4 B), the result once (1 B)
    assert m["dram_bytes_c"] == 512 * 256 * (6 * 4 + 1) and m["reuse_c"] == 0
    kept, _, _ = evaluate("edge-npu", "512x1024x256", t_m=256, t_k=256, t_n=256,
                          dataflow="os", loop_order="mnk", buf_c=1, ofmap_kb=256)
    assert kept["dram_bytes_c"] == 512 * 256 and kept["reuse_c"] == 1  # k innermost


def test_double_buffering_hides_traffic_single_buffering_stalls():
    double, _, _ = evaluate("edge-npu", "512x512x512", t_m=128, t_k=512, t_n=128,
                            dataflow="os", buf_a=2, buf_b=2, buf_c=2)
    single, _, _ = evaluate("edge-npu", "512x512x512", t_m=128, t_k=512, t_n=128,
                            dataflow="os", buf_a=1, buf_b=1, buf_c=1)
    assert single["compute_cycles"] == double["compute_cycles"]
    assert single["latency_s"] == pytest.approx(single["t_comp_s"] + single["t_mem_s"])
    assert double["latency_s"] < single["latency_s"]
    # double-buffered: the first A and B tiles before any compute, the last C tile after it
    ends = (128 * 512 * 2 + 128 * 128) / 25.6e9
    assert double["latency_s"] == pytest.approx(
        ends + max(double["t_comp_s"], double["t_mem_s"] - ends))


def test_a_c_tile_leaves_only_after_the_compute_that_makes_it():
    # one 256 x 256 C tile of int32 (7.7 us on DDR3) waits for every K step; K in tiles lets
    # A and B load under the compute (64 beats the whole 256), but finer tiles pay fill and
    # drain per fold (32 loses)
    def latency(t_k):
        return evaluate("tpu-v1", "256x256x256", "int8-int32", t_m=256, t_k=t_k, t_n=256,
                        dataflow="os", loop_order="mnk")[0]
    c_store = 256 * 256 * 4 / 34e9
    for t_k in (256, 64, 32):
        m = latency(t_k)
        assert m["latency_s"] >= m["t_comp_s"] + c_store
    assert latency(64)["latency_s"] < min(latency(256)["latency_s"], latency(32)["latency_s"])


def test_a_chips_arrays_share_the_folds():
    # 256 x 128 x 256 on TPU v4's four 128 x 128 arrays, weight-stationary: four folds, one each
    m, _, _ = evaluate("tpu-v4", "128x256x256", "bf16-fp32", t_m=128, t_k=256, t_n=256,
                       dataflow="ws")
    assert m["fold_executions"] == 4
    assert m["compute_cycles"] == 128 + 2 * 128 + 128 - 2
    assert m["utilisation"] == pytest.approx(128 * 256 * 256 / (4 * 128 * 128 * 510))


def test_a_mix_is_the_sum_of_its_gemms_as_often_as_called():
    tiles = dict(t_m=16, t_k=256, t_n=256, dataflow="os")
    one, _, _ = evaluate("edge-npu", "16x256x256", **tiles)
    other, _, _ = evaluate("edge-npu", "8x256x256", **{**tiles, "t_m": 8})  # as the mix clamps
    mix, _, _ = evaluate("edge-npu", "16x256x256*3,8x256x256", **tiles)
    for key in ("latency_s", "energy_j", "dram_bytes", "compute_cycles"):
        assert mix[key] == pytest.approx(3 * one[key] + other[key]), key
    assert mix["tops"] == pytest.approx(2 * (3 * 16 + 8) * 256 * 256 / mix["latency_s"] / 1e12)


# -- energy and sparsity -----------------------------------------------------------------------
def test_energy_is_macs_plus_accesses_at_each_level():
    m, ctx, _ = evaluate("edge-npu", "256x256x256", t_m=256, t_k=256, t_n=256, dataflow="os",
                         buf_c=1, ofmap_kb=256)
    e = ctx.target.energy
    assert m["energy_j"] == pytest.approx(sum(m[f"energy_{lv}_j"] for lv in ENERGY_LEVELS))
    assert m["energy_mac_j"] == pytest.approx(256 ** 3 * e.mac_pj * 1e-12)
    assert m["energy_dram_j"] == pytest.approx(m["dram_bytes"] * e.dram_pj * 1e-12)
    # the seed: DRAM access energy dwarfs the MACs' in a memory-bound GEMM
    assert m["energy_dram_j"] > m["energy_mac_j"]
    assert m["tops_per_w"] == pytest.approx(2 * 256 ** 3 / m["energy_j"] / 1e12)


def test_larger_srams_cost_more_an_access():
    target = load_target("edge-npu")
    small, quoted, large = sram_access_pj(target, np.array([1024.0, 256 * 1024.0, 4 << 20]))
    assert small < quoted < large and quoted == pytest.approx(target.energy.global_buffer_pj)
    assert small == pytest.approx(1.5, rel=0.1)  # the seed's PE-local 1-2 pJ at ~1 KB


def test_two_four_sparsity_halves_the_macs_and_the_weights_traffic():
    shape, tiles = "256x1024x256", dict(t_m=256, t_k=1024, t_n=256, dataflow="ws",
                                        ifmap_kb=1024, filter_kb=1024, ofmap_kb=1024)
    dense, _, _ = evaluate("edge-npu", shape, **tiles)
    sparse, ctx, _ = evaluate("edge-npu", shape, b_layout="2:4", **tiles)
    assert sparse["macs_executed"] == dense["macs_executed"] / 2
    kept = 1024 // 2 * 256
    assert sparse["dram_bytes_b"] == kept + kept // 4  # the values and 2 bits each
    assert sparse["dram_bytes_a"] == dense["dram_bytes_a"]  # every activation is still read
    assert sparse["compute_cycles"] < dense["compute_cycles"]
    assert ctx.workload.operand_bytes()[1] == kept + kept // 4


def test_2_4_weights_skip_macs_only_where_they_stay_in_the_pes():
    tiles = dict(t_m=256, t_k=1024, t_n=256, ifmap_kb=1024, filter_kb=1024, ofmap_kb=1024)
    for flow in ("os", "is"):
        dense, _, _ = evaluate("edge-npu", "256x1024x256", dataflow=flow, **tiles)
        sparse, _, _ = evaluate("edge-npu", "256x1024x256", b_layout="2:4", dataflow=flow,
                                **tiles)
        # streamed weights are expanded at the array's edge: the same MACs, B's traffic halved
        assert sparse["compute_cycles"] == dense["compute_cycles"], flow
        assert sparse["dram_bytes_b"] < dense["dram_bytes_b"], flow


def test_2_4_tiles_are_whole_folds_of_the_weights_the_pes_keep():
    ctx = build_context("edge-npu", "int8-int8", "256x1024x256", "2:4")
    batch = ctx.space.encode([ctx.space.resolve(
        {"t_m": 256, "t_k": k, "t_n": 256, "dataflow": "ws", "ofmap_kb": 1024})
        for k in (32, 64, 2)])
    ok = ctx.space.check(batch).ok
    assert list(ok) == [False, True, False]
    assert "t_k=32 (16 kept weights under 2:4) is not a multiple of the 32 PEs" in \
        ctx.space.explain(batch, 0)
    assert "splits a group of four 2:4 weights" in ctx.space.explain(batch, 2)
    built = ctx.space.enumerate()[0]  # the enumeration keeps only whole folds of kept weights
    assert ctx.space.satisfies("whole_folds", built).all()


# -- the space: rules and budgets ----------------------------------------------------------------
def test_tiles_must_be_whole_folds_or_the_whole_matrix():
    ctx = build_context("tpu-v1", "int8-int32", "1024x1024x1024")
    batch = ctx.space.encode([ctx.space.resolve({"t_m": 1024, "t_k": 100, "t_n": 256})])
    reason = ctx.space.explain(batch, 0)
    assert "t_k=100 is not a multiple of the 256 PEs that hold K under ws" in reason


def test_tiles_must_fit_each_operands_sram():
    ctx = build_context("tpu-v1", "int8-int32", "1024x1024x1024")
    batch = ctx.space.encode([ctx.space.resolve({"t_m": 1024, "t_k": 1024, "t_n": 1024})])
    reason = ctx.space.explain(batch, 0)
    assert "more than the 262,144 B filter SRAM" in reason
    assert "more than the 4,194,304 B ofmap SRAM" in reason


def test_budgets_cap_the_hardware_a_study_frees():
    ctx = build_context("edge-npu", "int8-int8", "256x256x256",
                        constraints=("pes <= 4096", "sram_kb <= 512"))
    configs = [{"t_m": 256, "t_k": 256, "t_n": 256, "rows": 128, "cols": 64},
               {"t_m": 256, "t_k": 256, "t_n": 256, "rows": 64, "cols": 64, "ifmap_kb": 512}]
    batch = ctx.space.encode([ctx.space.resolve(c) for c in configs])
    assert not ctx.space.check(batch).ok.any()
    assert "8,192 over the study's budget of 4,096" in ctx.space.explain(batch, 0)
    assert "SRAM of the three operand buffers" in ctx.space.explain(batch, 1)


@pytest.mark.parametrize("constraint, message", [
    ("pes < 4096", "takes budgets: 'pes <= N'"),
    ("watts <= 5", "unknown budget 'watts'"),
    ("pes <= 0", "must be positive"),
])
def test_bad_budgets_are_refused_by_name(constraint, message):
    with pytest.raises(UsageError, match=message):
        build_context("edge-npu", "int8-int8", "64x64x64", constraints=(constraint,))


def test_hardware_is_the_targets_unless_freed_and_then_ranges_narrow_it():
    ctx = build_context("edge-npu", "int8-int8", "64x64x64")
    fixed = ctx.space.enumerate()[0]
    assert set(fixed["rows"]) == {0} and set(fixed["ifmap_kb"]) == {0}
    freed = list(ctx.space.chunks_within({}, ["rows", "cols"], {"rows": (16, 64)}))
    rows = {int(b["rows"][0]) for b, _ in freed}
    assert rows == {16, 32, 64} and len(freed) == 3 * 3 * 8  # dataflows x rows x cols
    # each batch is one dataflow and array: its tiles are whole folds of that array already,
    # out of the same box of tiles, orders and buffers
    assert len({n for _, n in freed}) == 1
    for batch, box in freed:
        assert 0 < batch_len(batch) < box and ctx.space.satisfies("whole_folds", batch).all()


def test_a_what_if_on_the_target_reaches_configs_that_kept_its_hardware():
    m, ctx, batch = evaluate("tpu-v1", "1024x1024x1024", "int8-int32", t_m=1024, t_k=256,
                             t_n=256)
    faster = ctx.space.what_if_knobs()["dram bandwidth"](2.0)
    doubled = score(batch, faster, ctx.workload)
    assert doubled["t_mem_s"][0] == pytest.approx(m["t_mem_s"] / 2)


# -- the simulator rung and SCALE-Sim's files ---------------------------------------------------
def test_the_simulator_rung_scores_a_config_tile_by_tile():
    _, ctx, batch = evaluate("edge-npu", "96x64x80", t_m=32, t_k=64, t_n=80, dataflow="ws",
                             rows=8, cols=8)
    sim = sim_metrics(batch, ctx.target, ctx.workload)
    # three tiles of 32 x 64 x 80: the engine's count for one, three times, on the config's
    # array with the DRAM's 25.6 B a cycle split between A, B and C by their bytes
    setup = setup_of(batch, ctx.target, ctx.workload, (32, 64, 80))
    assert (setup.rows, setup.cols, setup.dataflow) == (8, 8, "ws")
    assert setup.ifmap_read_bandwidth + setup.filter_read_bandwidth \
        + 4 * setup.user_bandwidth <= 25.6
    one = simulate_gemm(setup, 32, 80, 64)
    assert sim["compute_cycles"] == 3 * (one.compute_cycles - one.stall_cycles)
    assert sim["total_cycles"] == 3 * one.total_cycles
    assert sim["dram_bytes_a"] == 3 * one.dram_ifmap_reads
    assert sim["energy_j"] == pytest.approx(sum(sim[f"energy_{lv}_j"] for lv in ENERGY_LEVELS))
    results = SystolicSimEvaluator().evaluate_feasible(batch, ctx)
    assert results[0].metrics["total_cycles"] == sim["total_cycles"]


def test_dse_systolic_scalesim_prints_scalesims_fields(capsys):
    code = main(["systolic", "scalesim", "-c", str(FIXTURES / "example.cfg"),
                 "-t", str(FIXTURES / "example_topology.csv"), "--json"])
    out = json.loads(capsys.readouterr().out)
    expected = json.loads((FIXTURES / "cases.json").read_text())["examples"]
    assert code == 0 and out["run_name"] == expected["run_name"]
    for ours, theirs in zip(out["layers"], expected["layers"], strict=True):
        assert ours["layer"] == theirs["name"]
        for key in ("total_cycles", "compute_cycles", "stall_cycles", "dram_ifmap_reads",
                    "dram_filter_reads", "dram_ofmap_writes", "sram_ofmap_writes"):
            assert ours[key] == theirs["scalesim"][key], (ours["layer"], key)


def test_dse_systolic_scalesim_table_and_a_bad_file(capsys, tmp_path):
    assert main(["systolic", "scalesim", "-c", str(FIXTURES / "example.cfg"),
                 "-t", str(FIXTURES / "example_topology.csv")]) == 0
    assert "decode_proj" in capsys.readouterr().out
    bad = tmp_path / "bad.cfg"
    bad.write_text("[general]\nrun_name = x\n")
    assert main(["systolic", "scalesim", "-c", str(bad),
                 "-t", str(FIXTURES / "example_topology.csv")]) == 2
    err = capsys.readouterr().err
    assert "bad.cfg" in err and "Traceback" not in err


def test_the_dashboard_draws_breakdowns_roofline_and_the_codesign_front(tmp_path):
    from dse import load_trials
    from dse.dashboard import create_app
    from dse.storage.frames import best_trials
    from dse.study.runner import run_study
    from dse.study.spec import load_study

    spec = load_study(Path(__file__).parents[1] / "studies" / "systolic_codesign.yaml")
    storage = str(tmp_path / "s.db")
    run_study(spec.with_overrides(trials=60), storage)
    client = create_app(storage).test_client()
    page = client.get(f"/study/{spec.name}").text
    for title in ("Energy per run by access level", "Array efficiency", "Roofline",
                  "Pareto front"):
        assert title in page, title
    best = int(best_trials(load_trials(storage, spec.name))["number"].iloc[0])
    config = client.get(f"/config/{best}/{spec.name}").text
    for title in ("Energy per run by access level", "Array efficiency", "ifmap SRAM (A)",
                  "DRAM traffic per matrix"):
        assert title in config, title


def test_dse_evaluate_json_follows_the_command_line_contract(capsys):
    code = main(["evaluate", "--target", "tpu-v1", "--dtype", "int8-int32", "--shape",
                 "1024x1024x1024", "--param", "t_m=1024", "--param", "t_k=256", "--param",
                 "t_n=256", "--json"])
    data = json.loads(capsys.readouterr().out)
    standard = {"tops", "latency_s", "t_comp_s", "t_mem_s", "bound", "balance",
                "macs_per_cycle", "l1_bytes", "dram_bytes", "dram_bytes_a", "dram_bytes_b",
                "dram_bytes_c"}
    assert code == 0 and data["status"] == "ok" and standard <= set(data["metrics"])
    assert data["params"]["dataflow"] == "ws" and data["params"]["rows"] == 0
    code = main(["evaluate", "--target", "tpu-v1", "--dtype", "int8-int32", "--shape",
                 "1024x1024x1024", "--param", "t_m=1024", "--param", "t_k=1024", "--param",
                 "t_n=1024", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["status"] == "infeasible" and "filter SRAM" in data["reason"]


def test_the_simulator_rung_counts_2_4_weights_as_the_model_does():
    tiles = dict(t_m=64, t_k=256, t_n=64, dataflow="ws", ifmap_kb=1024, filter_kb=1024,
                 ofmap_kb=1024)
    dense, ctx, batch = evaluate("edge-npu", "64x256x64", **tiles)
    sparse, sctx, sbatch = evaluate("edge-npu", "64x256x64", b_layout="2:4", **tiles)
    sim_dense = sim_metrics(batch, ctx.target, ctx.workload)
    sim_sparse = sim_metrics(sbatch, sctx.target, sctx.workload)
    # every operand fits its SRAM: each is read from DRAM once, as the model counts it (the
    # simulator in SCALE-Sim's whole request lines, a little over)
    assert dense["dram_bytes_a"] == sparse["dram_bytes_a"] == 64 * 256
    assert sparse["dram_bytes_b"] == 128 * 64 * 1.25
    for sim, model in ((sim_dense, dense), (sim_sparse, sparse)):
        for key in ("dram_bytes_a", "dram_bytes_b"):
            assert model[key] <= sim[key] <= 1.01 * model[key], key
    assert sim_sparse["compute_cycles"] < sim_dense["compute_cycles"]


def test_the_simulator_rung_sends_partial_sums_out_and_back():
    _, ctx, batch = evaluate("edge-npu", "128x1024x128", "int8-int32", t_m=128, t_k=256,
                             t_n=128, dataflow="os", buf_c=1, ofmap_kb=256)
    sim = sim_metrics(batch, ctx.target, ctx.workload)
    # four K tiles a C tile: three leave 4 B partial sums that come back, the last the result
    layer = simulate_gemm(setup_of(batch, ctx.target, ctx.workload, (128, 256, 128)),
                          128, 128, 256)
    assert sim["dram_bytes_c"] == layer.dram_ofmap_writes * (3 * 2 * 4 + 4)


def test_a_dram_too_slow_for_the_simulators_words_is_infeasible_there():
    _, ctx, batch = evaluate("edge-npu", "64x64x64", t_m=64, t_k=64, t_n=64, dram_mb_s=100)
    (result,) = SystolicSimEvaluator().evaluate_feasible(batch, ctx)
    assert result.status.value == "infeasible" and "0.10 B a cycle" in result.reason


def test_the_simulator_rung_runs_a_chips_arrays_in_rounds():
    _, ctx, batch = evaluate("tpu-v4", "512x256x128", "bf16-fp32", t_m=128, t_k=256, t_n=128,
                             dataflow="ws")
    sim = sim_metrics(batch, ctx.target, ctx.workload)
    layer = simulate_gemm(setup_of(batch, ctx.target, ctx.workload, (128, 256, 128)),
                          128, 128, 256)
    assert sim["sim_layers"] == 4  # four 128-row tiles, one round on four arrays
    assert sim["total_cycles"] == layer.total_cycles
