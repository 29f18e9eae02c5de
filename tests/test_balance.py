"""`dse balance` on the paper's XDNA studies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dse.cli import main
from dse.study.runner import run_study
from dse.study.spec import load_study, study_from_dict
from evaluators.analytical import paper_data

STUDIES = Path(__file__).parents[1] / "studies"
RANK1 = {p.dtype: p for p in paper_data.table2() if p.rank == 1}
TABLE1 = {p.dtype: p for p in paper_data.table1() if p.device == "xdna"}


@pytest.mark.parametrize("dtype", ["int8-int8", "int8-int32"])
def test_balance_names_the_paper_kernel_and_the_memory_bound_start(tmp_path, capsys, dtype):
    storage = str(tmp_path / "r.db")
    spec = load_study(STUDIES / f"xdna_{dtype.replace('-', '_')}.yaml").with_overrides(trials=40)
    run_study(spec, storage)
    assert main(["balance", spec.name, "--storage", storage, "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    paper = RANK1[dtype].params
    kernel = f"{paper['m_ct']}x{paper['k_ct']}x{paper['n_ct']}x"
    assert any(row["config"].startswith(kernel) for row in report["model_best"])
    t1 = TABLE1[dtype]
    start = report["single_core_best"]
    assert start["config"].startswith(f"{t1.m}x") and start["bound"] == "memory"
    assert start["memory_over_compute"] > 1.2
    steps = report["paper_path"]
    assert steps[0]["bound"] == "memory" and any(s["bound"] == "compute" for s in steps)
    # more bandwidth or a faster clock never hurts the best throughput
    what_if = {(r["knob"], r["factor"]): r["tops"] for r in report["what_if"]}
    assert len(what_if) == 12
    assert what_if[("dram bandwidth", 1.5)] >= what_if[("dram bandwidth", 0.5)]
    assert what_if[("clock", 1.5)] > what_if[("clock", 0.5)]
    assert report["study_best"]["bound"] in ("compute", "memory")


def test_balance_table_output(tmp_path, capsys):
    storage = str(tmp_path / "r.db")
    spec = load_study(STUDIES / "xdna_bf16_bf16.yaml").with_overrides(trials=20)
    run_study(spec, storage)
    assert main(["balance", spec.name, "--storage", storage, "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "paper's procedure ends at" in out and "what if" in out and "memory-bound here" in out
    assert main(["balance", spec.name, "--storage", storage, "--workload", "1x1x1"]) == 2
    assert "--workload '1x1x1' is not one of study" in capsys.readouterr().err


def test_balance_without_a_start_for_the_paper_procedure_keeps_the_rest(tmp_path, capsys):
    """A tiny L1 leaves no config that meets eq. 4, where the paper's procedure starts: the
    report says so and still gives the study's best, the model's best and the what-if table."""
    from dse.core.registry import target_path

    target = tmp_path / "tiny.toml"
    target.write_text(target_path("xdna2").read_text().replace(
        "l1_bytes = 65536", "l1_bytes = 2048"))
    spec = study_from_dict({"name": "tiny", "target": str(target), "sampler": "exhaustive",
                            "workload": {"shape": "1024x1024x1024", "dtype": "int8-int8"}})
    storage = str(tmp_path / "r.db")
    run_study(spec, storage)
    assert main(["balance", "tiny", "--storage", storage, "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "paper's procedure: no feasible configuration to start" in out
    assert "study's best" in out and "model's best" in out and "what if" in out


def test_balance_names_the_bound_dse_best_names(tmp_path, capsys):
    # One definition of the bound everywhere: the compute units' busy time (computing and C
    # drains) against DRAM time, not the compute time alone (t_comp), which called a config
    # dse best named compute-bound "memory-bound by 0.8 %".
    storage = str(tmp_path / "r.db")
    spec = load_study(STUDIES / "quick.yaml")
    run_study(spec, storage)
    assert main(["best", spec.name, "--storage", storage, "--top", "1", "--json"]) == 0
    (best,) = json.loads(capsys.readouterr().out)
    assert main(["balance", spec.name, "--storage", storage, "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    side = report["study_best"]
    assert side["bound"] == best["bound"]
    assert side["t_busy_s"] == pytest.approx(best["t_core_s"], rel=1e-6)
    assert all(row["bound"] == ("compute" if row["t_busy_s"] >= row["t_mem_s"] else "memory")
               for row in report["model_best"])
    assert main(["balance", spec.name, "--storage", storage]) == 0
    out = capsys.readouterr().out
    assert f"{side['bound']}-bound: compute units busy" in out and "against DRAM" in out
