"""The Triton GEMM compiled for Hopper (sm_90) on this machine, no GPU needed: the space's
shared-memory and register rules against what Triton and ptxas produce, and ``dse triton
compile`` over an exported configs file."""

from __future__ import annotations

import json

import pytest

from dse.cli import main
from dse.core.registry import build_context
from search_spaces.triton_gemm.rules import smem_bytes, tma_loads

pytest.importorskip("triton", reason="Triton is not installed: pip install -e '.[test]'")

SHAPE = dict(M=4096, K=4096, N=4096, dtype="bf16", b_layout="col", GROUP_M=8, SPLIT_K=1)
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): wgmma and mma.sync, 4 to 16 warps
CONFIGS = [(128, 256, 64, 8, 3), (128, 128, 64, 4, 4), (64, 64, 32, 4, 2), (32, 128, 128, 4, 3),
           (64, 64, 32, 2, 4), (256, 128, 64, 16, 3), (256, 256, 32, 16, 3),
           (256, 256, 64, 8, 3), (32, 256, 128, 2, 3)]


def _job(bm, bn, bk, warps, stages, loads="tma"):
    return {**SHAPE, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps,
            "num_stages": stages, "loads": loads}


@pytest.mark.parametrize("loads", ["tma", "pointers"])
def test_rules_agree_with_the_compiler_for_hopper(loads):
    from evaluators.hardware.triton_compile import compile_many

    ctx = build_context("h200", "bf16-bf16", "4096x4096x4096")
    assert tma_loads(ctx.target.device, ctx.workload)
    configs = [ctx.space.resolve({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w,
                                  "num_stages": s, "GROUP_M": 8, "SPLIT_K": 1})
               for bm, bn, bk, w, s in CONFIGS]
    batch = ctx.space.encode(configs)
    accepted = ctx.space.check(batch).ok  # the space charges TMA's barriers
    rule_smem = smem_bytes(batch, 2, ctx.target.device, loads == "tma")
    results = compile_many([_job(*c, loads) for c in CONFIGS], 90, workers=2)
    for config, ok, smem, result in zip(CONFIGS, accepted, rule_smem, results, strict=True):
        if ok:  # what the rules accept compiles, in the shared memory they charge
            assert result["status"] == "ok", (config, result.get("reason"))
            assert result["shared_bytes"] == smem, config
            assert result["tma"] is (loads == "tma"), config
            if result["mma"] == "wgmma" or loads == "tma":  # and in registers (mma.sync's
                assert result["spill_bytes"] == 0, config   # operands may spill from pointers)
        else:  # what they refuse for registers, ptxas refuses or spills
            assert result["status"] == "infeasible" or result["spill_bytes"] > 0, config
    assert [r.get("mma") for r in results[:5]] == ["wgmma", "wgmma", "wgmma", "mma", "mma"]
    sixteen_warps = results[CONFIGS.index((256, 256, 32, 16, 3))]
    assert sixteen_warps["status"] == "infeasible"  # 128 accumulators, 128 registers a thread
    assert "Insufficient registers" in sixteen_warps["reason"]
    assert not accepted[CONFIGS.index((256, 256, 32, 16, 3))]


def test_dse_triton_compile_reads_an_exported_file(tmp_path, capsys):
    study = tmp_path / "s.yaml"
    study.write_text("name: c\ntarget: h200\nworkloads:\n  - {shape: 64x4096x4096, "
                     "dtype: bf16-bf16}\nladder:\n  - {evaluator: analytical, keep: 3}\n"
                     "  - {evaluator: triton}\n")
    jobs = tmp_path / "jobs.json"
    storage = str(tmp_path / "c.db")
    from evaluators.hardware.triton_gpu import TritonEvaluator

    if TritonEvaluator().unavailable() is None:
        assert main(["run", str(study), "--storage", storage]) == 0
        assert main(["export-configs", "c", "--storage", storage, "--evaluator", "triton",
                     "--top", "3", "--out", str(jobs)]) == 0
    else:
        assert main(["run", str(study), "--storage", storage, "--offline", str(jobs)]) == 0
    capsys.readouterr()
    assert main(["triton", "compile", str(jobs), "--workers", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["arch"] == 90 and len(report["results"]) == 3
    assert all(r["status"] == "ok" and r["shared_B"] == r["rule_B"] for r in report["results"])
    # not a configs file, or one for another evaluator: a clear message, exit 2
    assert main(["triton", "compile", str(tmp_path / "none.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    data = json.loads(jobs.read_text())
    edits = [(lambda d: d.pop("configs"), "key 'configs' must be a list"),
             (lambda d: d["configs"].__setitem__(0, None), "configs[0] needs a 'workload'"),
             (lambda d: d["configs"][0]["params"].pop("BLOCK_K"), "params lack BLOCK_K"),
             (lambda d: d["configs"][0]["params"].update(BLOCK_M=0), "parameter BLOCK_M: 0"),
             (lambda d: d["configs"][0]["params"].update(BLOCK_M="abc"), "'abc' is not"),
             (lambda d: d["evaluator"].update(name="cpu"), "'cpu' evaluator")]
    for edit, message in edits:
        bad = json.loads(json.dumps(data))
        edit(bad)
        jobs.write_text(json.dumps(bad))
        assert main(["triton", "compile", str(jobs)]) == 2
        assert message in capsys.readouterr().err
