"""The IRON backend: the exact commands per flow, what the stock design cannot express, and the
mapping of recorded outputs (no NPU here) to results."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dse.core.registry import build_context
from dse.core.results import Status
from evaluators.hardware.iron import (
    EXAMPLE_DIR,
    Commands,
    IronEvaluator,
    commands,
    parse_output,
    run_commands,
    unsupported,
)

STOCK = dict(buf_a_l1=2, buf_b_l1=2, buf_c_l1=2, buf_a_l2=2, buf_b_l2=2, buf_c_l2=2)
EXAMPLE = Path("/opt/mlir-aie") / EXAMPLE_DIR


def _params(target, dtype, shape, **tiles):
    ctx = build_context(target, dtype, shape)
    return ctx, ctx.space.resolve({**STOCK, **tiles})


def test_make_flow_commands():
    ctx, p = _params("xdna2", "int8-int32", "4096x4096x4096", m_ct=64, k_ct=64, n_ct=64,
                     k_mt=64)
    plan = commands(p, ctx.workload, "npu2", "make", EXAMPLE, iters=20, warmup=5)
    variables = ["devicename=npu2", "M=4096", "K=4096", "N=4096", "m=64", "k=64", "n=64",
                 "n_aie_cols=8", "dtype_in=i8", "dtype_out=i32", "b_col_maj=1"]
    assert plan.cwd == EXAMPLE
    assert plan.build == [["make", *variables]]
    assert plan.run == ["make", "run", *variables,
                        "runargs=--b_col_maj 1 --iters 20 --warmup 5"]


def test_make_flow_bf16_on_npu2_emulates_with_bfp16_and_row_major_b():
    ctx, p = _params("xdna2", "bf16-bf16", "2048x2048x2048", m_ct=64, k_ct=64, n_ct=64,
                     k_mt=64, b_layout="row")
    plan = commands(p, ctx.workload, "npu2", "make", EXAMPLE, iters=10, warmup=2)
    assert "emulate_bfloat16_mmul_with_bfp16=1" in plan.build[0]
    assert "b_col_maj=0" in plan.build[0] and plan.run[-1].startswith("runargs=--b_col_maj 0")


def test_jit_flow_command():
    ctx, p = _params("xdna", "int8-int16", "2048x1024x2048", m_ct=64, k_ct=32, n_ct=32,
                     k_mt=32)
    plan = commands(p, ctx.workload, "npu", "jit", EXAMPLE, iters=50, warmup=10)
    assert plan.build == []
    assert plan.run == ["python3", "whole_array.py", "--dev", "npu", "-M", "2048", "-K", "1024",
                        "-N", "2048", "-m", "64", "-k", "32", "-n", "32", "--n-aie-cols", "4",
                        "--dtype_in", "i8", "--dtype_out", "i16", "--b-col-maj", "1",
                        "--emulate-bf16-mmul-with-bfp16", "0", "-w", "10", "-i", "50"]


def test_what_the_stock_design_cannot_express():
    ctx = build_context("xdna", "int8-int8", "4032x4032x4032")
    paper = ctx.space.resolve(dict(m_ct=112, k_ct=112, n_ct=112, k_mt=448))  # single C buffer
    why = unsupported(paper, ctx.workload, "npu", "make")
    assert any(w.startswith("k_mt=448") for w in why)
    assert any(w.startswith("buf_c_l1=1") for w in why)
    odd = ctx.space.resolve({**STOCK, "m_ct": 64, "k_ct": 64, "n_ct": 64, "k_mt": 64,
                             "n_cols": 3, "bd_scheme": "sequential"})
    why = unsupported(odd, ctx.workload, "npu", "make")
    assert any("n_cols=3" in w for w in why) and any("sequential" in w for w in why)
    assert any("does not pad" in w for w in why)  # 4032 is not a multiple of 4*64
    evaluator = IronEvaluator(mlir_aie_dir="/opt/mlir-aie")
    (result,) = evaluator.evaluate(ctx.space.encode([paper]), ctx)
    assert result.status is Status.INFEASIBLE and "unsupported by the stock" in result.reason


MAKE_PASS = """
Avg NPU matmul time: 3687us.
Avg NPU gflops: 72.8059

Min NPU matmul time: 3600us.
Max NPU gflops: 74.5

Max NPU matmul time: 3800us.
Min NPU gflops: 70.6

PASS!
"""
MAKE_FAIL = "Avg NPU matmul time: 3687us.\nAvg NPU gflops: 72.8\n\nError count: 12\n\n\nFailed.\n\n"
JIT_PASS = """NPU time     (avg/min/max us): 3687.4 / 3600.0 / 3800.2
End-to-end   (avg/min/max us): 4100.0 / 4000.0 / 4200.0
NPU GFLOPS                    : 72.81
PASS!
"""
BUILD_ERROR = ("error: 'aie.tile' op allocated buffers exceeded available memory\n"
               "make: *** [Makefile:42] Error 1\n")
OTHER_ERROR = "whole_array.py: error: argument -m: invalid int value\nmake: *** Error 2\n"


@pytest.mark.parametrize(("text", "code", "flow", "status", "seconds", "reason"), [
    (MAKE_PASS, 0, "make", Status.OK, 3687e-6, None),
    (JIT_PASS, 0, "jit", Status.OK, 3687.4e-6, None),
    (MAKE_FAIL, 1, "make", Status.FAILED, None, "verification failed (12 wrong elements)"),
    ("FAIL! mismatch\n", 1, "jit", Status.FAILED, None, "verification failed"),
    (BUILD_ERROR, 2, "make", Status.INFEASIBLE, None, "allocated buffers exceeded"),
    (OTHER_ERROR, 2, "make", Status.FAILED, None, "build or run failed (exit 2)"),
    ("Kernel did not complete. Returned status: 4\n", 1, "make", Status.FAILED, None,
     "did not complete"),
    ("Avg NPU matmul time: 10us.\n", 0, "make", Status.FAILED, None, "no PASS!"),
    ("", None, "make", Status.TIMEOUT, None, "killed"),
])
def test_recorded_outputs_map_to_results(text, code, flow, status, seconds, reason):
    got_status, got_seconds, got_reason = parse_output(text, code, flow)
    assert got_status is status
    assert got_seconds == (pytest.approx(seconds) if seconds else None)
    if reason:
        assert reason in got_reason


def test_commands_really_run_with_a_timeout(tmp_path):
    output, code = run_commands(Commands(tmp_path, [], ["sleep", "5"]), timeout_s=0.3)
    assert code is None
    output, code = run_commands(Commands(tmp_path, [["true"]], ["no-such-tool-xyz"]), 5)
    assert code == 127 and "no-such-tool-xyz" in output


def test_evaluate_runs_the_jit_flow(tmp_path):
    """A checkout whose whole_array.py replays a recorded output stands in for the NPU."""
    example = tmp_path / EXAMPLE_DIR
    example.mkdir(parents=True)
    (example / "whole_array.py").write_text(textwrap.dedent(f"""
        import sys
        print({JIT_PASS!r})
        print(" ".join(sys.argv[1:]), file=sys.stderr)
    """))
    ctx, p = _params("xdna2", "int8-int8", "2048x2048x2048", m_ct=64, k_ct=64, n_ct=64,
                     k_mt=64)
    evaluator = IronEvaluator(mlir_aie_dir=str(tmp_path), flow="jit", iters=3, warmup=1)
    (result,) = evaluator.evaluate(ctx.space.encode([p]), ctx)
    assert result.ok and result.metrics["latency_s"] == pytest.approx(3687.4e-6)
    assert result.metrics["tops"] == pytest.approx(2 * 2048**3 / 3687.4e-6 / 1e12)
    assert "whole_array.py --dev npu2" in result.metrics["command"]
