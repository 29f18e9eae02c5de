"""The XDNA2 model against what the paper says its results do (the numbers are withheld).

Each test states one claim of the paper's and checks it on the analytical model and on the
event simulator; none of these was fitted.
"""

from __future__ import annotations

import pytest

from dse.core.registry import load_target
from evaluators.analytical import paper_data
from evaluators.analytical.layout_sweep import PREDICTORS, Sweep, layout_sweep
from evaluators.analytical.paper_data import EndToEndPoint
from evaluators.analytical.read_merge_bound import margin, read_merge_bound, with_read_merge

XDNA, XDNA2 = load_target("xdna"), load_target("xdna2")
# the paper's two int8-int8 kernels, each at a native size of ~4K (m_ct*4, k_mt, n_ct*8)
SMALL_K = EndToEndPoint("160x64x144", "xdna2", "int8-int8", "3840x4032x4608",
                        {"m_ct": 160, "k_ct": 64, "n_ct": 144, "k_mt": 448}, 0.0)
LARGER_K = EndToEndPoint("144x72x144", "xdna2", "int8-int8", "4032x4320x4608",
                         {"m_ct": 144, "k_ct": 72, "n_ct": 144, "k_mt": 432}, 0.0)
GAP_DTYPES = ("int8-int8", "int8-int16", "bf16-bf16")


@pytest.mark.parametrize("evaluator", sorted(PREDICTORS))
def test_larger_tile_with_smaller_k_is_slower_once_compute_bound(evaluator):
    # The paper: 160x64x144 has the larger m_ct*n_ct (22.5K vs 20.3K) but lower per-core
    # throughput and lower TOPS, the GEMM being compute-bound there.
    predict = PREDICTORS[evaluator]
    small_k, larger_k = (predict(XDNA2, p, "col") for p in (SMALL_K, LARGER_K))
    assert small_k["macs_per_cycle"] < larger_k["macs_per_cycle"]
    assert small_k["bound"] == "compute" and small_k["t_core_s"] > small_k["t_mem_s"]
    # 144x72x144 is the balance point: compute and memory time within a few per cent
    assert larger_k["t_mem_s"] / larger_k["t_core_s"] == pytest.approx(1.0, abs=0.05)
    assert small_k["tops"] < larger_k["tops"]


def test_per_core_throughput_falls_with_k_ct_at_the_l1_limit():
    # Table 1's 64x232x64 > the balanced 144x72x144 > 160x64x144, all int8-int8 near full L1
    from tests.helpers import score_one

    mpc = [score_one("xdna2", "int8-int8", "4096x4096x4096", m_ct=m, k_ct=k, n_ct=n,
                     k_mt=432 if k == 72 else 448)["macs_per_cycle"]
           for m, k, n in ((64, 224, 64), (144, 72, 144), (160, 64, 144))]
    assert mpc[0] > mpc[1] > mpc[2]
    table1 = next(p for p in paper_data.table1()
                  if p.device == "xdna2" and p.dtype == "int8-int8")
    assert mpc[0] == pytest.approx(table1.macs_per_cycle, rel=0.03)


@pytest.fixture(scope="module")
def sweeps() -> dict[tuple[str, str, str], Sweep]:
    return {(evaluator, chip.name, dtype): layout_sweep(chip, dtype, 40, predictor=predict)
            for evaluator, predict in PREDICTORS.items()
            for chip in (XDNA, XDNA2) for dtype in GAP_DTYPES}


@pytest.mark.parametrize("evaluator", sorted(PREDICTORS))
@pytest.mark.parametrize("dtype", GAP_DTYPES)
def test_column_major_b_is_faster_on_xdna2_and_by_more_than_on_xdna(sweeps, evaluator, dtype):
    xdna2 = sweeps[evaluator, "xdna2", dtype].mean_gap
    assert xdna2 > 0.02
    assert xdna2 > sweeps[evaluator, "xdna", dtype].mean_gap + 0.02


@pytest.mark.parametrize("evaluator", sorted(PREDICTORS))
@pytest.mark.parametrize("dtype", ["int8-int8", "int8-int16"])
def test_row_major_b_scatters_on_xdna2(sweeps, evaluator, dtype):
    # The paper: past the ridge XDNA's points lie on a line in both layouts and XDNA2's with B
    # column-major; with B row-major XDNA2's scatter (its example: int8-int16). In the model
    # the short runs of a row-major B gain from sharing DRAM pages when N is small.
    xdna2 = sweeps[evaluator, "xdna2", dtype]
    assert xdna2.scatter("row") > 2 * xdna2.scatter("col")
    assert xdna2.scatter("row") > 2 * sweeps[evaluator, "xdna", dtype].scatter("row")


@pytest.mark.parametrize("evaluator", sorted(PREDICTORS))
def test_bf16_row_major_b_scatters_more_than_column_major_on_xdna2(sweeps, evaluator):
    # the same statement for bf16, whose longer rows (160 B) leave less to scatter
    xdna2 = sweeps[evaluator, "xdna2", "bf16-bf16"]
    assert xdna2.scatter("row") > 1.1 * xdna2.scatter("col")


@pytest.mark.parametrize("chip", [XDNA, XDNA2], ids=["xdna", "xdna2"])
def test_bf16_loses_less_to_a_row_major_b_than_int8(chip):
    # The paper: bf16's row-major B reads twice the bytes per row of n_ct, so its gap is the
    # smaller one on both chips. Compared on one tile so only the element size differs.
    tile = {"m_ct": 96, "k_ct": 48, "n_ct": 96, "k_mt": 384}
    gap = {d: layout_sweep(chip, d, 16, params=tile).mean_gap for d in ("int8-int8", "bf16-bf16")}
    assert gap["bf16-bf16"] < gap["int8-int8"]


# The paper's XDNA2 kernels at their ~4K native sizes (m_ct*4 x k_mt x n_ct*8): the Table 3
# kernels its text names (int8-int8 ranks 1 and 2, int8-int16 rank 1) and, for bf16, whose
# Table 3 kernel it does not name, the sweep's (n_ct 80: its row holds more bytes than int8's,
# as the paper's explanation of bf16's smaller effect has it).
TABLE3 = [SMALL_K, LARGER_K,
          EndToEndPoint("128x72x112", "xdna2", "int8-int16", "4096x4320x4480",
                        {"m_ct": 128, "k_ct": 72, "n_ct": 112, "k_mt": 432}, 0.0),
          EndToEndPoint("128x48x80", "xdna2", "bf16-bf16", "4096x4224x4480",
                        {"m_ct": 128, "k_ct": 48, "n_ct": 80, "k_mt": 384}, 0.0)]


def _gain(predict, target, point) -> float:
    return predict(target, point, "col")["tops"] / predict(target, point, "row")["tops"] - 1


def _xdna_gain(predict, dtype: str) -> float:
    """The model's gain on XDNA's Table 2 rank-1 kernel of ``dtype``, at its shape."""
    point = next(p for p in paper_data.table2() if p.dtype == dtype and p.rank == 1)
    return _gain(predict, XDNA, point)


def _table3_claims(predict, xdna2, over_xdna: bool = True) -> None:
    gains = {p.label: _gain(predict, xdna2, p) for p in TABLE3}
    for point in TABLE3:
        gain = gains[point.label]
        assert gain > 0, point.label  # column-major B wins on every kernel
        if over_xdna:  # by more than on XDNA (published and modelled)
            assert gain > paper_data.ROW_MAJOR_GAPS[point.dtype] + 0.02, point.label
            assert gain > _xdna_gain(predict, point.dtype) + 0.02, point.label
    # bf16's gain is the least (its row-major rows hold the most bytes)
    bf16 = gains["128x48x80"]
    assert all(bf16 < g for label, g in gains.items() if label != "128x48x80")


@pytest.mark.parametrize("evaluator", sorted(PREDICTORS))
def test_column_major_b_wins_on_every_table3_kernel_bf16_least(evaluator):
    _table3_claims(PREDICTORS[evaluator], XDNA2)


@pytest.mark.parametrize("b_layout", ["col", "row"])
def test_simulator_adds_no_time_the_model_already_charges_on_table3(b_layout):
    # The two share the kernel and DRAM code; what the simulator adds is the timing of stalls
    # (C drains, zeroing, BD start-ups) the model averages away. At XDNA2's balance point a
    # stall charged on top of the kernel's C-tile costs would show as the simulator running
    # slower than the model by more than its DRAM sharing explains: on the int8 kernels they
    # agree within 1 %; bf16 (memory-bound, its A streams lag B's) within 5 %.
    predict, simulate = PREDICTORS["analytical"], PREDICTORS["simulator"]
    for point in TABLE3:
        model = predict(XDNA2, point, b_layout)["latency_s"]
        bound = 0.05 if point.dtype == "bf16-bf16" else 0.01
        assert simulate(XDNA2, point, b_layout)["latency_s"] == pytest.approx(
            model, rel=bound), point.label


def test_read_merge_is_the_centre_of_what_the_paper_allows():
    # reads cannot unmerge; past the upper end XDNA2's sweep gain of some dtype falls to XDNA's
    low, high = read_merge_bound(XDNA2)
    assert low == 0 and 0 < high < XDNA.dram.read_merge
    assert XDNA2.dram.read_merge == pytest.approx((low + high) / 2, rel=1e-3)
    assert margin(XDNA2, 0.98 * high) > 0 > margin(XDNA2, 1.02 * high)


@pytest.mark.parametrize("end", [0.0, 0.98])
def test_the_table3_order_holds_over_the_whole_bound(end):
    # the order does not rest on the centre: both ends of the interval give it (at the upper
    # end the sweep's gain meets XDNA's by construction, so "by more" is left to the centre)
    _, high = read_merge_bound(XDNA2)
    _table3_claims(PREDICTORS["analytical"], with_read_merge(XDNA2, end * high),
                   over_xdna=end == 0.0)


def test_calibrate_fits_the_read_merge_from_row_major_measurements(tmp_path, capsys):
    # A machine whose row-major B reads do merge (0.6), measured offline with the IRON flow;
    # the shipped XDNA2 file says they do not. Calibrating on the measurements recovers it.
    # The stock design: depth-2 FIFOs, one k_ct tile per MemTile transfer, no padding (M a
    # multiple of 4*m_ct, N of 8*n_ct, both multiples of 16: 105 = 3*5*7).
    SHAPE = "6720x2048x13440"
    STOCK_DESIGN = {"k_ct": 64, "k_mt": 64, **{f"buf_{x}_{level}": 2 for x in "abc"
                                                for level in ("l1", "l2")}}
    import dataclasses
    import json
    import subprocess
    import sys
    from pathlib import Path

    from dse.cli import main
    from dse.study.runner import run_study
    from dse.study.spec import study_from_dict

    storage = str(tmp_path / "r.db")
    run_study(study_from_dict({
        "name": "rowb", "target": "xdna2",
        "workload": {"shape": SHAPE, "dtype": "int8-int8", "b_layout": "row"},
        "space": {"fix": STOCK_DESIGN}, "sampler": "exhaustive"}), storage)
    configs, results = tmp_path / "configs.json", tmp_path / "results.json"
    assert main(["export-configs", "rowb", "--top", "150", "--out", str(configs), "--evaluator",
                 "iron", "--option", "mlir_aie_dir=/nonexistent/mlir-aie", "--storage",
                 storage]) == 0
    runner = Path(__file__).parents[1] / "dse" / "offline" / "runner.py"
    subprocess.run([sys.executable, str(runner), str(configs), str(results)], check=True,
                   capture_output=True)
    machine = dataclasses.replace(XDNA2, dram=dataclasses.replace(XDNA2.dram, read_merge=0.6))
    exported = {c["id"]: c for c in json.loads(configs.read_text())["configs"]}
    recorded = json.loads(results.read_text())
    for record in recorded["results"]:
        config = exported[record["id"]]
        point = EndToEndPoint("measured", "xdna2", "int8-int8", SHAPE,
                              config["params"], 0.0)
        us = PREDICTORS["simulator"](machine, point, "row")["latency_s"] * 1e6
        record.update(output=f"Avg NPU matmul time: {us:.2f}us.\nPASS!\n", returncode=0)
    results.write_text(json.dumps(recorded))
    assert main(["ingest", str(results), "--storage", storage]) == 0
    capsys.readouterr()
    out = tmp_path / "xdna2-calibrated.toml"
    assert main(["calibrate", "rowb", "--storage", storage, "--against", "iron", "--out",
                 str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["fitted"]["dram.read_merge"] > 0.3
    assert report["after"]["mape"] < 0.5 * report["before"]["mape"]
    assert load_target(str(out)).dram.read_merge == pytest.approx(
        report["fitted"]["dram.read_merge"], rel=1e-5)
