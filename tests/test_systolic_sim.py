"""The fold-schedule simulator equals SCALE-Sim 3.0, and SCALE-Sim's files read as SCALE-Sim
reads them.

The reference numbers are real SCALE-Sim 3.0 runs stored in ``tests/fixtures/scalesim/cases.json``
(regenerate with ``.scalesim-venv/bin/python tests/fixtures/scalesim/make_fixtures.py``), so
these tests need no SCALE-Sim. Tolerance: none for any integer (cycles, stalls, access counts,
start/stop cycles) in either bandwidth mode, USER stalls included; floats (utilisations,
bandwidth averages) to 1e-12 relative, as SCALE-Sim's own float sums may round differently
under other Python versions.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from dse.core.errors import UsageError
from evaluators.systolic_sim.fold_schedule import ArraySetup, simulate_gemm
from evaluators.systolic_sim.scalesim_files import read_gemm_topology, read_scalesim_config

FIXTURES = Path(__file__).parent / "fixtures" / "scalesim"
DATA = json.loads((FIXTURES / "cases.json").read_text())
CASES = DATA["cases"]


def setup_of(case: dict) -> ArraySetup:
    return ArraySetup(case["rows"], case["cols"], case["dataflow"], case["ifmap_sram_kb"],
                      case["filter_sram_kb"], case["ofmap_sram_kb"], case["bandwidth"],
                      case["user_bandwidth"],
                      case.get("ifmap_read_bandwidth", 10), case.get("filter_read_bandwidth", 10))


def assert_same(ours: dict, theirs: dict, label: str) -> None:
    wrong = []
    for key, value in theirs.items():
        if isinstance(value, float):
            ok = math.isclose(ours[key], value, rel_tol=1e-12, abs_tol=1e-12)
        else:
            ok = ours[key] == value
        if not ok:
            wrong.append(f"{key}: ours {ours[key]} SCALE-Sim {value}")
    assert not wrong, f"{label}: " + "; ".join(wrong)


def test_the_fixture_covers_what_it_should():
    assert DATA["scalesim_version"] == "3.0.0"
    assert {c["case"]["dataflow"] for c in CASES} == {"os", "ws", "is"}
    assert {c["case"]["bandwidth"] for c in CASES} == {"CALC", "USER"}
    assert any(c["case"]["rows"] != c["case"]["cols"] for c in CASES)
    assert any(c["case"]["m"] == 1 for c in CASES)
    assert any(c["scalesim"]["stall_cycles"] > 0 and c["case"]["bandwidth"] == "USER"
               for c in CASES)
    # some case refetches from DRAM (more DRAM reads than the operand has words)
    assert any(c["scalesim"]["dram_ifmap_reads"] > 2 * c["case"]["m"] * c["case"]["k"]
               for c in CASES)


@pytest.mark.parametrize("result", CASES, ids=[c["case"]["name"] for c in CASES])
def test_equals_scalesim(result):
    case = result["case"]
    ours = simulate_gemm(setup_of(case), case["m"], case["n"], case["k"]).to_dict()
    assert_same(ours, result["scalesim"], case["name"])


def test_shipped_examples_read_and_simulate_as_scalesim_runs_them():
    examples = DATA["examples"]
    name, setup = read_scalesim_config(FIXTURES / examples["config"])
    assert name == examples["run_name"] == "example_16x8_os_user"
    assert setup == ArraySetup(16, 8, "os", 2, 2, 1, "USER", 4)
    layers = read_gemm_topology(FIXTURES / examples["topology"])
    assert [layer[0] for layer in layers] == [x["name"] for x in examples["layers"]]
    for (layer, m, n, k), expected in zip(layers, examples["layers"], strict=True):
        # SCALE-Sim's operands: ifmap m x k, filter k x n (so the CSV's M, N, K are dse's)
        assert (m, n, k) == (expected["m"], expected["n"], expected["k"])
        assert_same(simulate_gemm(setup, m, n, k).to_dict(), expected["scalesim"], layer)


# -- hand-derivable cases -------------------------------------------------------------------

BIG = dict(ifmap_sram_kb=64, filter_sram_kb=64, ofmap_sram_kb=64)


def test_one_os_fold_from_first_principles():
    # M <= rows and N <= cols: one fold. Operands stream in over K cycles, skewed across the
    # rows + cols - 2 extra cycles of the array, and the demand lines end one cycle before
    # the count (cycles start at 0): K + rows + cols - 3. Nothing is big enough to stall.
    r = simulate_gemm(ArraySetup(8, 4, "os", **BIG), 5, 3, 20)
    assert (r.row_folds, r.col_folds) == (1, 1)
    assert r.compute_cycles == 20 + 8 + 4 - 3
    assert r.stall_cycles == 0
    assert r.mapping_eff_pct == pytest.approx(100 * 5 * 3 / 32)
    assert r.compute_util_pct == pytest.approx(100 * 5 * 3 * 20 / (32 * (20 + 8 + 4 - 2)))
    assert r.overall_util_pct == pytest.approx(100 * 5 * 3 * 20 / (32 * r.compute_cycles))
    # every operand word read from SRAM once per fold; SCALE-Sim's OS count adds rows + cols
    assert (r.sram_ifmap_reads, r.sram_filter_reads) == (5 * 20, 20 * 3)
    assert r.sram_ofmap_writes == 5 * 3 + 8 + 4
    # everything fits: each word comes from DRAM once, and C goes out once
    assert (r.dram_ifmap_reads, r.dram_filter_reads, r.dram_ofmap_writes) == (100, 60, 15)


@pytest.mark.parametrize("dataflow, spatial, temporal", [
    ("os", ("m", "n"), "k"), ("ws", ("k", "n"), "m"), ("is", ("k", "m"), "n")])
def test_fold_counts_and_lines_per_dataflow(dataflow, spatial, temporal):
    rows, cols = 4, 8
    dims = {"m": 10, "n": 17, "k": 9}
    r = simulate_gemm(ArraySetup(rows, cols, dataflow, **BIG), dims["m"], dims["n"], dims["k"])
    row_folds = -(-dims[spatial[0]] // rows)
    col_folds = -(-dims[spatial[1]] // cols)
    assert (r.row_folds, r.col_folds) == (row_folds, col_folds)
    t = dims[temporal]
    # lines per fold: OS fills and drains once (t + rows + cols - 2); WS / IS first load the
    # stationary operand (rows more) and drain through the rows again
    per_fold = t + rows + cols - 2 if dataflow == "os" else 2 * rows + cols + t - 2
    assert r.compute_cycles == row_folds * col_folds * per_fold - 1 + r.stall_cycles
    assert r.stall_cycles == 0


def test_calc_refetches_when_a_pass_exceeds_the_buffer_memory():
    # OS re-reads every row block of A for each column fold. SCALE-Sim's CALC buffer forgets
    # all it recorded every 50 sets of floor(words / 100) words (here 50 * 10 = 500 words), so
    # A (16 x 64 = 1024 words > 500) is fetched again for each of the 4 column folds, while a
    # K of 16 (256 words) is fetched once.
    small = ArraySetup(4, 4, "os", 1, 64, 64)
    assert simulate_gemm(small, 16, 16, 64).dram_ifmap_reads == 4 * 16 * 64
    assert simulate_gemm(small, 16, 16, 16).dram_ifmap_reads == 16 * 16


def test_user_reads_count_whole_request_lines():
    # USER: the initial fill requests ceil(active half / 10) lines of 10 words, or the whole
    # (padded) operand if smaller: here A is 5 x 20 = 100 words padded to 8 columns -> 160.
    r = simulate_gemm(ArraySetup(8, 4, "os", **BIG, bandwidth="USER", user_bandwidth=10),
                      5, 3, 20)
    assert r.dram_ifmap_reads == 160


def test_results_do_not_depend_on_how_the_numbers_are_spelt():
    a = simulate_gemm(ArraySetup(8, 8, "ws", 2, 2.0, 1, "USER", 4), 30, 20, 10)
    b = simulate_gemm(ArraySetup(8, 8, "ws", 2.0, 2, 1.0, "USER", 4.0), 30, 20, 10)
    assert a == b
    # SCALE-Sim's Bandwidth is an integer (words per DRAM line); a fraction is rounded down
    c = simulate_gemm(ArraySetup(8, 8, "ws", 2, 2, 1, "USER", 4.7), 30, 20, 10)
    assert c == a


# -- input validation -----------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, word", [
    (dict(dataflow="rs"), "'rs'"),
    (dict(rows=0), "rows"),
    (dict(cols=2.5), "cols"),
    (dict(bandwidth="AUTO"), "'AUTO'"),
    (dict(bandwidth="USER"), "user_bandwidth"),
    (dict(bandwidth="USER", user_bandwidth=-1), "user_bandwidth"),
    (dict(ifmap_sram_kb=0), "ifmap_sram_kb"),
    (dict(ofmap_sram_kb=float("nan")), "ofmap_sram_kb"),
    (dict(ifmap_read_bandwidth=0), "ifmap_read_bandwidth"),
])
def test_bad_setups_are_usage_errors(kwargs, word):
    base = dict(rows=4, cols=4, dataflow="os", ifmap_sram_kb=1, filter_sram_kb=1,
                ofmap_sram_kb=1)
    with pytest.raises(UsageError, match=word):
        ArraySetup(**{**base, **kwargs})


@pytest.mark.parametrize("dims, word", [((0, 4, 4), "m"), ((4, -1, 4), "n"),
                                        ((4, 4, 2.0), "k"), ((4, True, 4), "n")])
def test_bad_gemms_are_usage_errors(dims, word):
    with pytest.raises(UsageError, match=f"^{word} must be a positive integer"):
        simulate_gemm(ArraySetup(4, 4, "os", 1, 1, 1), *dims)


# -- readers --------------------------------------------------------------------------------

EXAMPLE_CFG = (FIXTURES / "example.cfg").read_text()


def write(tmp_path: Path, text: str, name: str = "run.cfg") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def edited(key: str, value: str | None) -> str:
    """The example config with ``key``'s line set to ``value`` (or removed)."""
    lines = []
    for line in EXAMPLE_CFG.splitlines():
        if line.replace(":", "=").split("=")[0].strip() == key:
            if value is None:
                continue
            line = f"{key}: {value}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_config_reads_calc_mode_and_layout_bandwidths(tmp_path):
    text = edited("InterfaceBandwidth", "CALC").replace("Bandwidth : 4", "Bandwidth : x")
    text = text.replace("IfmapSRAMBankBandwidth: 10", "IfmapSRAMBankBandwidth: 20")
    name, setup = read_scalesim_config(write(tmp_path, text))
    # CALC never reads Bandwidth (SCALE-Sim ignores it too)
    assert setup.bandwidth == "CALC" and setup.user_bandwidth is None
    assert setup.ifmap_read_bandwidth == 20 and setup.filter_read_bandwidth == 10


@pytest.mark.parametrize("key, value, words", [
    ("ArrayHeight", None, ["ArrayHeight", "missing key"]),
    ("run_name", None, ["run_name"]),
    ("UseRamulatorTrace", None, ["UseRamulatorTrace"]),
    ("IfmapSRAMBankBandwidth", None, ["IfmapSRAMBankBandwidth"]),
    ("ArrayWidth", "eight", ["ArrayWidth", "integer"]),
    ("IfmapSramSzkB", "1.5", ["IfmapSramSzkB", "integer"]),
    ("OfmapSramSzkB", "0", ["OfmapSramSzkB", "positive"]),
    ("ArrayHeight", "-4", ["ArrayHeight", "positive"]),
    ("Dataflow", "rs", ["Dataflow", "'rs'"]),
    ("InterfaceBandwidth", "AUTO", ["InterfaceBandwidth", "'AUTO'"]),
    ("Bandwidth", "fast", ["Bandwidth", "integer"]),
    ("Bandwidth", "0", ["Bandwidth", "positive"]),
    ("IfmapOffset", "-1", ["IfmapOffset", "negative"]),
    ("IfmapSRAMBankNum", "3", ["IfmapSRAMBankBandwidth", "IfmapSRAMBankNum"]),
    ("SparsitySupport", "true", ["SparsitySupport"]),
    ("FilterCustomLayout", "True", ["FilterCustomLayout"]),
    ("FilterCustomLayout", "perhaps", ["FilterCustomLayout", "true or false"]),
    ("UseRamulatorTrace", "True", ["UseRamulatorTrace"]),
])
def test_bad_configs_name_the_file_and_field(tmp_path, key, value, words):
    path = write(tmp_path, edited(key, value))
    with pytest.raises(UsageError) as info:
        read_scalesim_config(path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message


def test_bad_config_files_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        read_scalesim_config(tmp_path / "absent.cfg")
    with pytest.raises(UsageError, match="cannot be read"):
        read_scalesim_config(tmp_path)                           # a directory
    with pytest.raises(UsageError, match="not a valid config"):
        read_scalesim_config(write(tmp_path, "ArrayHeight: 4\n"))
    no_layout = EXAMPLE_CFG.split("[layout]")[0] + "[sparsity]\nSparsitySupport: false\n" \
        "[run_presets]\nInterfaceBandwidth: CALC\nUseRamulatorTrace: False\n"
    with pytest.raises(UsageError, match=r"missing section \[layout\]"):
        read_scalesim_config(write(tmp_path, no_layout))
    bad_bytes = tmp_path / "bytes.cfg"
    bad_bytes.write_bytes(b"\xff\xfe\x00[general]")
    with pytest.raises(UsageError, match="bytes.cfg"):
        read_scalesim_config(bad_bytes)


def test_topology_reads_as_scalesim(tmp_path):
    path = write(tmp_path, "Layer, M, N, K,\n\n fc1 , 12, 34, 56,\nfc2,1,2,3,1:1,\n",
                 "t.csv")
    assert read_gemm_topology(path) == [("fc1", 12, 34, 56), ("fc2", 1, 2, 3)]


@pytest.mark.parametrize("text, words", [
    ("Layer, M, N, K,\nfc1, 12, 34, 56\n", ["line 2", "comma"]),      # no trailing comma
    ("Layer, M, N, K,\nfc1, 12, x, 56,\n", ["line 2", "N", "integer"]),
    ("Layer, M, N, K,\nfc1, 12, 34, 5.5,\n", ["K", "integer"]),
    ("Layer, M, N, K,\nfc1, 0, 34, 56,\n", ["M", "positive"]),
    ("Layer, M, N, K,\nfc1, 1, 2, 3,\nfc2, 4, -5, 6,\n", ["line 3", "N", "positive"]),
    ("Layer, M, N, K,\nfc1, 1, 2, 3, half,\n", ["sparsity"]),
    ("Layer, M, N, K,\n", ["no layers"]),
])
def test_bad_topologies_name_the_file_line_and_field(tmp_path, text, words):
    path = write(tmp_path, text, "t.csv")
    with pytest.raises(UsageError) as info:
        read_gemm_topology(path)
    assert str(path) in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_missing_topology_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        read_gemm_topology(tmp_path / "absent.csv")
