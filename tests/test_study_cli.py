"""`dse run`, `dse studies`, `dse best`, `dse trials` as a user calls them."""

from __future__ import annotations

import json
import textwrap

import pandas as pd
import pytest

from dse.cli import main

STUDY = """
name: cli
target: xdna2
workload: {shape: 2048x2048x2048, dtype: int8-int8}
sampler: tpe
budget: {trials: 40}
"""


@pytest.fixture
def ran(tmp_path, capsys):
    path = tmp_path / "cli.yaml"
    path.write_text(textwrap.dedent(STUDY))
    storage = str(tmp_path / "r.db")
    assert main(["run", str(path), "--storage", storage]) == 0
    out = capsys.readouterr().out
    return path, storage, out


def test_run_prints_best_and_bound(ran):
    _, _, out = ran
    assert "study cli: finished" in out and "40 trials" in out
    assert "best configuration (trial" in out and "m_ct=" in out
    assert "-bound: the compute units are busy" in out and "DRAM" in out and "tops" in out


def test_rerun_resumes_and_trials_override(ran, capsys):
    path, storage, _ = ran
    assert main(["run", str(path), "--storage", storage, "--trials", "50"]) == 0
    assert "50 trials; this run evaluated" in capsys.readouterr().out


def test_studies_best_and_trials(ran, capsys, tmp_path):
    _, storage, _ = ran
    assert main(["studies", "--storage", storage, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["study"] == "cli" and row["trials"] == 40 and row["target"] == "xdna2"
    assert main(["best", "cli", "--storage", storage, "--top", "3", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)
    assert len(best) == 3 and best[0]["tops"] == row["best"]
    assert best[0]["tops"] >= best[1]["tops"] >= best[2]["tops"]
    assert main(["best", "cli", "--storage", storage]) == 0
    assert "m_ct" in capsys.readouterr().out

    assert main(["trials", "cli", "--storage", storage, "--where", "tops > 10 and k_ct <= 64",
                 "--sort=-tops", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["tops"] > 10 and r["k_ct"] <= 64 for r in rows)
    assert [r["tops"] for r in rows] == sorted((r["tops"] for r in rows), reverse=True)

    csv_path, parquet_path = tmp_path / "t.csv", tmp_path / "t.parquet"
    assert main(["trials", "cli", "--storage", storage, "--format", "csv", "--out",
                 str(csv_path)]) == 0
    assert main(["trials", "cli", "--storage", storage, "--format", "parquet", "--out",
                 str(parquet_path)]) == 0
    capsys.readouterr()
    assert len(pd.read_csv(csv_path)) == 40 == len(pd.read_parquet(parquet_path))
    assert main(["trials", "cli", "--storage", storage, "--where", "status == 'infeasible'"]) == 0
    assert "reason" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["best", "nope"], "no study 'nope'"),
    (["trials", "cli", "--where", "tops >"], "ends too early"),
    (["trials", "cli", "--sort", "speed"], "--sort: unknown column 'speed'"),
    (["trials", "cli", "--format", "parquet"], "give --out FILE"),
    (["best", "cli", "--top", "0"], "argument --top: must be at least 1, got 0"),
    (["run", "x.yaml", "--trials", "-1"],
     "argument --trials: expected 1 to 100,000,000 trials a workload, got -1"),
])
def test_query_errors_exit_2(ran, capsys, argv, message):
    _, storage, _ = ran
    assert main([*argv, "--storage", storage]) == 2
    assert message in capsys.readouterr().err


def test_run_bad_inputs_exit_2_and_leave_results(ran, capsys, tmp_path):
    path, storage, _ = ran
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n"
                   "budget: {trials: 3}\nsampler: annealing\n")
    assert main(["run", str(bad), "--storage", storage]) == 2
    assert "key 'sampler.name'" in capsys.readouterr().err
    assert main(["run", str(path), "--storage", "postgresql://x@127.0.0.1:1/none"]) == 2
    assert "cannot use storage" in capsys.readouterr().err
    assert main(["studies", "--storage", storage, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["trials"] == 40


def test_a_new_database_serves_nothing_from_the_store(tmp_path, capsys):
    # A sampler asking for a config again is answered by this run's own result: on a new
    # database that is a repeat, not a result "served from the store"; a second run into the
    # same database is served the first run's results.
    import re

    path = tmp_path / "q.yaml"
    path.write_text(textwrap.dedent(STUDY).replace("2048x2048x2048", "4096x4096x4096")
                    .replace("trials: 40", "trials: 300"))
    storage = str(tmp_path / "r.db")
    assert main(["run", str(path), "--storage", storage]) == 0
    first = capsys.readouterr().out
    assert "from the store" not in first
    repeats = int(re.search(r"(\d+) repeats the sampler asked for again", first).group(1))
    evaluated = int(re.search(r"this run evaluated (\d+)", first).group(1))
    assert repeats > 0 and evaluated + repeats == 300
    path.write_text(path.read_text().replace("name: cli", "name: again"))
    assert main(["run", str(path), "--storage", storage]) == 0
    second = capsys.readouterr().out
    assert re.search(r"this run evaluated 0, served \d+ from the store", second)


def test_rerunning_a_finished_study_keeps_its_last_update(ran, capsys):
    path, storage, _ = ran
    assert main(["studies", "--storage", storage, "--json"]) == 0
    (before,) = json.loads(capsys.readouterr().out)
    import time

    time.sleep(1.1)  # the store keeps times to the second
    assert main(["run", str(path), "--storage", storage]) == 0  # its budget is spent
    assert "this run evaluated 0" in capsys.readouterr().out
    assert main(["studies", "--storage", storage, "--json"]) == 0
    (after,) = json.loads(capsys.readouterr().out)
    assert after["updated"] == before["updated"] and after["status"] == before["status"]
    assert main(["run", str(path), "--storage", storage, "--trials", "45"]) == 0
    capsys.readouterr()
    assert main(["studies", "--storage", storage, "--json"]) == 0
    (grown,) = json.loads(capsys.readouterr().out)
    assert grown["updated"] > before["updated"] and grown["trials"] == 45
