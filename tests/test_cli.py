"""The command-line contract other tools rely on: JSON shape, exit codes, error messages."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from dse.cli import main
from dse.core.registry import available_targets, evaluator_names, target_path

PROBLEM = ["--target", "xdna2", "--dtype", "int8-int8", "--shape", "4032x4320x4608"]
TILES = ["--param", "m_ct=144", "--param", "k_ct=72", "--param", "n_ct=144", "--param", "k_mt=432"]
STANDARD = {"tops", "latency_s", "t_comp_s", "t_mem_s", "bound", "balance", "macs_per_cycle",
            "l1_bytes", "l2_bytes", "dram_bytes", "dram_bytes_a", "dram_bytes_b", "dram_bytes_c"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_evaluate_json_ok(capsys):
    code, out, _ = run(capsys, "evaluate", *PROBLEM, *TILES, "--json")
    data = json.loads(out)
    assert code == 0 and data["status"] == "ok" and "reason" not in data
    assert data["params"] == {
        "m_ct": 144, "k_ct": 72, "n_ct": 144, "k_mt": 432, "buf_a_l1": 2, "buf_b_l1": 2,
        "buf_c_l1": 1, "buf_a_l2": 2, "buf_b_l2": 2, "buf_c_l2": 1, "m_rows": 4, "n_cols": 8,
        "orientation": "a_rows", "b_layout": "col", "bd_scheme": "overlapped"}
    assert STANDARD <= set(data["metrics"]) and STANDARD <= set(data)
    assert data["bound"] in ("compute", "memory") and data["tops"] == data["metrics"]["tops"]


def test_evaluate_infeasible_exits_1_with_reason(capsys):
    code, out, _ = run(capsys, "evaluate", *PROBLEM, *TILES, "--param", "buf_c_l1=3", "--json")
    data = json.loads(out)
    assert code == 1 and data["status"] == "infeasible"
    assert "L1 overflow" in data["reason"] and data["params"]["buf_c_l1"] == 3


def test_evaluate_table_output(capsys):
    code, out, _ = run(capsys, "evaluate", *PROBLEM, *TILES)
    assert code == 0 and "status: ok" in out and "tops" in out and "bd_scheme" in out


def test_evaluate_configs_file_keeps_order(capsys, tmp_path):
    configs = [{"m_ct": 144, "k_ct": 72, "n_ct": 144, "k_mt": 432},
               {"m_ct": 144, "k_ct": 72, "n_ct": 144, "k_mt": 432, "buf_c_l1": 3},
               {"m_ct": "64", "k_ct": 64, "n_ct": 64, "k_mt": 64, "bd_scheme": "sequential"}]
    path = tmp_path / "configs.json"
    path.write_text(json.dumps(configs))
    code, out, _ = run(capsys, "evaluate", *PROBLEM, "--configs", str(path), "--json")
    data = json.loads(out)
    assert code == 1  # one of them is infeasible
    assert [d["status"] for d in data] == ["ok", "infeasible", "ok"]
    assert data[2]["params"]["bd_scheme"] == "sequential" and data[2]["params"]["m_ct"] == 64


@pytest.mark.parametrize(("argv", "message"), [
    (["--target", "xdna9", "--dtype", "int8-int8", "--shape", "64x64x64", *TILES],
     # every shipped target is listed (a family added adds its own)
     "unknown target 'xdna9' (did you mean 'xdna' or 'xdna2'?); valid: "
     f"{', '.join(available_targets())} or the path"),
    (["--target", "xdna2", "--dtype", "fp8-fp8", "--shape", "64x64x64", *TILES],
     "unknown dtype 'fp8-fp8'; valid: int8-int8"),
    ([*PROBLEM, *TILES, "--param", "m_tile=3"], "unknown parameter 'm_tile'; valid: m_ct, k_ct"),
    ([*PROBLEM, *TILES, "--param", "bd_scheme=fast"],
     "bd_scheme: unknown value 'fast'; valid: overlapped, sequential"),
    ([*PROBLEM, *TILES, "--param", "buf_a_l1=4"], "buf_a_l1: 4 must be >= 1 and <= 3"),
    ([*PROBLEM, *TILES[2:], "--param", "m_ct=big"], "m_ct: 'big' is not an integer"),
    ([*PROBLEM, *TILES[2:], "--param", "m_ct=1e99"], "m_ct: '1e99' is not an integer"),
    ([*PROBLEM, *TILES[2:], "--param", f"m_ct={10**23}"], "m_ct: 100000000000000000000000 must"),
    ([*PROBLEM, *TILES, "--param", "m_ct=64"], "--param m_ct is given twice"),
    ([*PROBLEM, "--param", "m_ct=64"], "missing parameter(s) k_ct, n_ct, k_mt"),
    ([*PROBLEM, *TILES, "--param", "m_ct"], "--param expects NAME=VALUE"),
    ([*PROBLEM[:-1], "4096x4096", *TILES], "not of the form MxKxN"),
    ([*PROBLEM, *TILES, "--evaluator", "oracle"],
     f"unknown evaluator 'oracle'; valid: {', '.join(evaluator_names())}"),
    ([*PROBLEM, *TILES, "--constraint", "tight"],
     "unknown constraint 'tight'; valid: dma_bound, no_padding"),
    ([*PROBLEM, "--configs", "/nonexistent.json"], "does not exist"),
])
def test_evaluate_usage_errors_exit_2(capsys, argv, message):
    code, out, err = run(capsys, "evaluate", *argv)
    assert code == 2 and out == ""
    assert message in err


def test_bad_configs_file_names_the_config(capsys, tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"m_ct": 64, "k_ct": 64, "n_ct": 64, "k_mt": 64},
                                {"m_ct": 64, "k_ct": 64, "n_ct": 64}]))
    code, _, err = run(capsys, "evaluate", *PROBLEM, "--configs", str(path))
    assert code == 2 and "config 1 of" in err and "k_mt" in err
    path.write_text("{not json")
    code, _, err = run(capsys, "evaluate", *PROBLEM, "--configs", str(path))
    assert code == 2 and "not valid JSON" in err


def test_target_file_path_and_malformed_file(capsys, tmp_path):
    mine = tmp_path / "more_l1.toml"
    text = target_path("xdna2").read_text()
    mine.write_text(text.replace("l1_bytes = 65536", "l1_bytes = 131072"))
    triple_c = [*TILES, "--param", "buf_c_l1=3", "--json"]
    code, out, _ = run(capsys, "evaluate", "--target", str(mine), *PROBLEM[2:], *triple_c)
    assert code == 0 and json.loads(out)["l1_bytes"] > 65536
    mine.write_text(text.replace("shim_bds = 16", "shim_bds = many"))
    code, _, err = run(capsys, "evaluate", "--target", str(mine), *PROBLEM[2:], *TILES)
    assert code == 2 and str(mine) in err and "not valid TOML" in err


def test_search_json_contract(capsys):
    code, out, _ = run(capsys, "search", "--target", "xdna", "--dtype", "bf16-bf16",
                       "--shape", "4224x4032x4224", "--top", "5", "--json")
    data = json.loads(out)
    assert code == 0
    assert {"n_total", "n_feasible", "elapsed_s", "top"} <= set(data)
    assert len(data["top"]) == 5 and data["n_total"] >= data["n_feasible"] > 0
    tops = [c["metrics"]["tops"] for c in data["top"]]
    assert tops == sorted(tops, reverse=True)
    assert set(data["top"][0]) == {"params", "metrics"}


def test_search_fix_and_free(capsys):
    code, out, _ = run(capsys, "search", "--target", "xdna", "--dtype", "int8-int16",
                       "--shape", "2048x2048x2048", "--fix", "k_ct=64", "--free", "buf_c_l1",
                       "--free", "bd_scheme", "--top", "20", "--json")
    data = json.loads(out)
    assert code == 0
    assert {c["params"]["k_ct"] for c in data["top"]} == {64}
    assert {c["params"]["bd_scheme"] for c in data["top"]} == {"overlapped"}
    assert len({c["params"]["buf_c_l1"] for c in data["top"]}) >= 1
    code, _, _ = run(capsys, "search", "--target", "xdna", "--dtype", "int8-int16",
                     "--shape", "2048x2048x2048", "--free", "m_ct", "--top", "1")
    assert code == 0  # tile sizes vary anyway
    code, _, err = run(capsys, "search", "--target", "xdna", "--dtype", "int8-int16",
                       "--shape", "2048x2048x2048", "--free", "warp")
    assert code == 2 and "unknown parameter 'warp'" in err
    code, _, err = run(capsys, "search", "--target", "xdna", "--dtype", "int8-int16",
                       "--shape", "2048x2048x2048", "--fix", "k_ct=64", "--free", "k_ct")
    assert code == 2 and "both fixed and free" in err


def test_search_paper_strategy_shows_steps(capsys):
    code, out, _ = run(capsys, "search", "--target", "xdna", "--dtype", "bf16-bf16",
                       "--shape", "4224x4032x4224", "--strategy", "paper", "--start", "64x104x64",
                       "--k-mt", "224")
    assert code == 0 and "balance procedure steps" in out and "96    56    96" in out
    code, out, _ = run(capsys, "search", "--target", "xdna", "--dtype", "bf16-bf16",
                       "--shape", "4224x4032x4224", "--strategy", "paper", "--json")
    data = json.loads(out)
    assert data["steps"] and data["top"][0]["params"]["k_ct"] < data["steps"][0]["k_ct"]
    code, _, err = run(capsys, "search", "--target", "xdna", "--dtype", "bf16-bf16",
                       "--shape", "4224x4032x4224", "--strategy", "paper", "--start", "8x8")
    assert code == 2 and "--start expects" in err


def test_the_balance_procedures_options_are_the_familys(capsys):
    # dse search knows none: the XDNA family's procedure declares --start, --k-mt, --patience
    problem = ("search", "--target", "xdna", "--dtype", "bf16-bf16", "--shape", "512x512x512")
    code, out, _ = run(capsys, *problem, "--procedure-help")
    assert code == 0 and all(flag in out for flag in ("--start", "--k-mt", "--patience"))
    code, _, err = run(capsys, *problem, "--strategy", "paper", "--patiense", "2")
    assert code == 2 and "(did you mean '--patience'?)" in err
    code, _, err = run(capsys, *problem, "--patience", "2")
    assert code == 2 and "--patience: options of the balance procedure" in err
    # a family without a procedure takes none
    code, out, _ = run(capsys, "search", "--target", "h100", "--dtype", "bf16-bf16",
                       "--shape", "512x512x512", "--procedure-help")
    assert code == 0 and "--start" not in out
    code, _, err = run(capsys, "search", "--target", "h100", "--dtype", "bf16-bf16",
                       "--shape", "512x512x512", "--start", "64x64x64")
    assert code == 2 and "unrecognized arguments: --start 64x64x64" in err


def test_targets_command(capsys):
    code, out, _ = run(capsys, "targets")
    assert code == 0 and "xdna2" in out and "4x8" in out


def test_console_script_exit_codes():
    dse = shutil.which("dse") or str(__import__("pathlib").Path(sys.executable).parent / "dse")
    ok = subprocess.run([dse, "evaluate", *PROBLEM, *TILES, "--json"], capture_output=True,
                        text=True)
    assert ok.returncode == 0 and json.loads(ok.stdout)["status"] == "ok"
    bad = subprocess.run([dse, "evaluate", *PROBLEM, *TILES, "--param", "buf_c_l1=3"],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    usage = subprocess.run([dse, "search"], capture_output=True, text=True)
    assert usage.returncode == 2 and "--target" in usage.stderr
