"""`dse compare`: both fidelities on sampled configs, rank agreement, reasons, storage."""

from __future__ import annotations

import json

from sqlalchemy import func, select

from dse.cli import main
from dse.core.registry import build_context
from dse.storage import ResultStore
from dse.storage import models as m
from search_spaces.xdna_gemm.compare import compare, why_they_differ


def test_compare_ranks_and_stores(tmp_path):
    storage = str(tmp_path / "c.db")
    ctx = build_context("xdna", "bf16-bf16", "2048x2048x2048")
    frame, spearman = compare(ctx, samples=15, seed=1, store=ResultStore(storage))
    assert len(frame) == 15 and 0.8 < spearman <= 1.0
    assert frame["difference"].abs().is_monotonic_decreasing
    assert frame["reason"].str.len().gt(10).all()
    store = ResultStore(storage)
    with store.session() as s:
        by_fidelity = dict(s.execute(select(m.EvaluationRow.fidelity, func.count())
                                     .group_by(m.EvaluationRow.fidelity)).all())
    assert by_fidelity == {"analytical": 15, "simulator": 15}


def test_compare_refuses_bad_input_before_creating_a_database(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for target in ("nosuch", "h100"):
        assert main(["compare", "--target", target, "--dtype", "bf16", "--shape",
                     "512x512x512"]) == 2
    err = capsys.readouterr().err
    assert "unknown target 'nosuch'" in err and "h100 is a triton_gemm target" in err
    assert not (tmp_path / "dse.db").exists()


def test_reasons():
    base = {"latency_s": 1.0, "stall_bds_s": 0.0, "t_bd_setup_s": 0.0, "stall_inputs_s": 0.0,
            "stall_c_drain_s": 0.0, "bound": "compute"}
    assert "buffer descriptors" in why_they_differ(base, {**base, "stall_bds_s": 0.2})
    assert "C drain" in why_they_differ(base, {**base, "stall_c_drain_s": 0.1})
    assert "bursts" in why_they_differ(base, {**base, "stall_inputs_s": 0.1})
    assert "balance point" in why_they_differ(base, {**base, "bound": "memory"})
    assert "fixed costs" in why_they_differ(base, base)


def test_compare_command(tmp_path, capsys):
    storage = str(tmp_path / "c.db")
    argv = ["compare", "--target", "xdna2", "--dtype", "int8-int8", "--shape",
            "2048x2048x2048", "--samples", "8", "--storage", storage]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Spearman rank correlation" in out and "largest disagreements" in out
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["configs"]) == 8 and -1 <= data["spearman"] <= 1
    assert main([*argv[:-4], "--samples", "1", "--storage", storage]) == 2
    assert "at least 3" in capsys.readouterr().err
