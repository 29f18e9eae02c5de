"""The GPU target: Triton GEMM space, constraints, analytical model, the kernel under Triton's
interpreter and the offline runner's format. Measurements on a real GPU are the job of
benchmarks/triton_gpu_studies.py on a machine that has one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dse.cli import main
from dse.core.registry import build_context, build_evaluator, load_target
from search_spaces.triton_gemm.target import device_properties, from_device

GOOD = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=3, num_warps=4, GROUP_M=8,
            SPLIT_K=1)


def scored(shape, dtype="bf16-bf16", target="h200", **params):
    ctx = build_context(target, dtype, shape)
    batch = ctx.space.encode([ctx.space.resolve({**GOOD, **params})])
    return build_evaluator("analytical").evaluate(batch, ctx)[0]


def test_targets_and_reading_the_device():
    h100, h200 = load_target("h100"), load_target("h200")
    assert h100.device.sms == h200.device.sms == 132
    assert h200.device.hbm_bytes_per_s > h100.device.hbm_bytes_per_s
    assert h200.device.smem_per_block_bytes == 232_448
    assert h200.peak_flops("bf16") == pytest.approx(989.4e12)
    read = from_device(h200, {"name": "NVIDIA H200", "sms": 120, "l2_bytes": 60 << 20})
    assert (read.device.sms, read.device.l2_bytes) == (120, 60 << 20)
    assert from_device(h200, None) == h200
    if device_properties() is None:  # this machine: no GPU, the file's constants hold
        assert from_device(h200, device_properties()) == h200


def test_space_has_exactly_the_triton_parameters():
    ctx = build_context("h200", "bf16-bf16", "4096x4096x4096")
    assert list(ctx.space.params()) == ["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages",
                                        "num_warps", "GROUP_M", "SPLIT_K"]
    batch, box = ctx.space.enumerate()
    assert box == 112_500 and ctx.space.check(batch).ok.sum() > 10_000


@pytest.mark.parametrize(("params", "reason"), [
    (dict(num_stages=4, BLOCK_M=256, BLOCK_N=256, BLOCK_K=128, num_warps=16),
     "4 buffers x ((256 + 256) x 128 x 2 B + an 8 B barrier) = 524,320 B exceeds the 232,448 B "
     "a block may use"),
    (dict(num_stages=5, BLOCK_M=32, BLOCK_N=256, BLOCK_K=128, num_warps=4),  # mma.sync
     "4 buffers x ((32 + 256) x 128 x 2 B + an 8 B barrier) = 294,944 B exceeds"),
    (dict(BLOCK_M=256, BLOCK_N=256, num_warps=4), "256 x 256 accumulators over 128 threads"),
    (dict(BLOCK_M=256, BLOCK_N=256, BLOCK_K=32, num_warps=16),
     "it needs 168 of the 128 a thread has with 16 warps"),
    (dict(BLOCK_M=16, BLOCK_N=16, num_warps=4), "4 warps need a C tile of at least 1024"),
    (dict(BLOCK_M=96), "powers of two only"),
    (dict(SPLIT_K=128, BLOCK_K=64), "exceeds K=4096"),
    (dict(num_warps=64), "num_warps=64 is 2,048 threads; a block holds 1,024"),
])
def test_constraints_say_why(params, reason):
    result = scored("4096x4096x4096", **params)
    assert not result.ok and reason in result.reason


def test_tma_loads_where_the_gpu_and_the_strides_allow():
    """TMA needs Hopper or later and rows 16 bytes apart: a 4100-deep bf16 A (8,200 B rows)
    is loaded through pointers, and the shared-memory rule charges no barriers for it."""
    from dse.core.workload import GemmWorkload
    from evaluators.hardware.triton_gpu import job_of
    from search_spaces.triton_gemm.rules import tma_loads

    def loads(shape, layout="col", option="tma", dtype="bf16-bf16"):
        ctx = build_context("h200", dtype, shape, layout)
        return job_of(GOOD, ctx, loads=option)["loads"]

    assert loads("4096x4096x4096") == "tma"
    assert loads("4096x4096x4096", option="pointers") == "pointers"
    assert loads("4096x4100x4096") == "pointers"  # A's rows and (col) B's rows: K x 2 B
    assert loads("4096x4096x4100", layout="row") == "pointers"  # a row B's: N x 2 B
    assert loads("4096x4096x4100", layout="col") == "tma"
    assert loads("4096x4100x4096", dtype="fp32-fp32") == "tma"  # 16,400 B rows
    ampere = load_target("h200").with_device(compute_capability=80)
    assert not tma_loads(ampere.device, GemmWorkload.parse("4096x4096x4096", "bf16-bf16"))
    assert "4 buffers x (256 + 256) x 128 x 2 B = 524,288 B exceeds" in scored(
        "4096x4100x4096", num_stages=4, BLOCK_M=256, BLOCK_N=256, BLOCK_K=128,
        num_warps=16).reason
    # mma.sync holds a K step's operand tiles in registers when it loads them through pointers
    thin = dict(BLOCK_M=32, BLOCK_N=256, BLOCK_K=128, num_warps=2)
    assert "it needs 456 of the 255 a thread has with 2 warps" in \
        scored("4096x4100x4096", **thin).reason
    assert scored("4096x4096x4096", **thin).ok


def test_the_load_path_is_an_option_that_changes_results():
    assert build_evaluator("triton").version == "3"
    assert build_evaluator("triton", {"loads": "pointers"}).version == "3+loads=pointers"
    assert build_evaluator("triton", {"loads": "tma"}).version == "3"
    assert main(["evaluate", "--target", "h200", "--dtype", "bf16-bf16", "--shape",
                 "64x64x64", "--evaluator", "triton", "--option", "loads=cp.async",
                 *[f"--param={k}={v}" for k, v in GOOD.items()]]) == 2


def test_swizzle_groups_that_walk_alike_are_one_config():
    """Every GROUP_M at least the grid's block rows walks the programs in the same order: only
    the smallest of them is a config; left out, GROUP_M defaults to at most that one."""
    assert scored("64x4096x4096", BLOCK_M=64, GROUP_M=1).ok
    refused = scored("64x4096x4096", BLOCK_M=64, GROUP_M=2)
    assert not refused.ok and "over the 1 block row of M=64 walks as GROUP_M=1" in \
        refused.reason
    assert scored("96x4096x4096", BLOCK_M=32, GROUP_M=4).ok  # 3 rows: 4 is the covering one
    assert not scored("96x4096x4096", BLOCK_M=32, GROUP_M=8).ok
    ctx = build_context("h200", "bf16-bf16", "64x4096x4096")
    assert ctx.space.resolve({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 64})["GROUP_M"] == 2


def test_the_gpu_sees_swizzles_the_model_ties_from_group_m_8_outwards():
    """At 4096^3 the tensor cores set the pace and every GROUP_M's wave fits L2: the model
    scores the six swizzles of a kernel alike, and the ladder's shortlist takes 8, 4 and 16."""
    from dse.study.strategies.ladder import choose

    ctx = build_context("h200", "bf16-bf16", "4096x4096x4096")
    configs = [ctx.space.resolve({**GOOD, "GROUP_M": g}) for g in (1, 2, 4, 8, 16, 32)]
    batch = ctx.space.encode(configs)
    tops = build_evaluator("analytical").score(batch, ctx)["tops"]
    assert np.all(tops == tops[0])
    kept = choose(tops, 3, "top", ties=ctx.space.tie_order(batch))
    assert [configs[i]["GROUP_M"] for i in kept] == [8, 4, 16]


@pytest.mark.parametrize("shape", ["1x4096x4096", "8x4096x4096", "4096x8x4096"])
def test_tiny_dimensions_still_have_configs(shape):
    result = scored(shape, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_warps=1, num_stages=1,
                    GROUP_M=1)
    assert result.ok, result.reason


def test_model_wave_quantisation_and_decode_shapes():
    big = scored("4096x4096x4096")
    assert big.ok and big.metrics["bound"] == "compute" and big.metrics["programs"] == 1024
    slots = 132 * big.metrics["resident_per_sm"]
    assert big.metrics["waves"] == -(-1024 // slots)
    decode = scored("64x4096x4096", BLOCK_M=64, GROUP_M=1)  # one block row: nothing to swizzle
    assert decode.metrics["programs"] == 32 and decode.metrics["wave_efficiency"] < 0.5
    # split-K fills idle SMs on a decode-like GEMM
    split = scored("64x4096x4096", BLOCK_M=64, GROUP_M=1, SPLIT_K=4)
    assert split.metrics["programs"] == 4 * decode.metrics["programs"]
    assert split.metrics["latency_s"] < decode.metrics["latency_s"]


def test_model_swizzle_and_stages():
    plain = scored("8192x8192x8192", GROUP_M=1, BLOCK_M=64, BLOCK_N=64)
    grouped = scored("8192x8192x8192", GROUP_M=8, BLOCK_M=64, BLOCK_N=64)
    assert grouped.metrics["dram_bytes"] < plain.metrics["dram_bytes"]
    assert scored("4096x4096x4096", num_stages=1).metrics["latency_s"] > \
        scored("4096x4096x4096", num_stages=3).metrics["latency_s"]


def test_search_and_evaluate_follow_the_cli_contract(capsys):
    def args(**params):
        return ["evaluate", "--target", "h200", "--dtype", "bf16-bf16", "--shape",
                "4096x4096x4096", *[f"--param={k}={v}" for k, v in params.items()], "--json"]

    assert main(args(**GOOD)) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "ok" and 100 < data["metrics"]["tops"] < 989.4
    assert main(args(**{**GOOD, "BLOCK_M": 96})) == 1
    assert "powers of two only" in json.loads(capsys.readouterr().out)["reason"]
    assert main(["search", "--target", "h200", "--dtype", "bf16-bf16", "--shape",
                 "64x4096x4096", "--top", "3", "--json"]) == 0
    top = json.loads(capsys.readouterr().out)["top"]
    assert len(top) == 3 and all(t["metrics"]["tops"] > 0 for t in top)


# --- the kernel, under Triton's interpreter -------------------------------------------------

def _interpreter_or_skip() -> None:
    for module in ("torch", "triton"):
        try:
            __import__(module)
        except ImportError:
            pytest.skip(f"{module} is not installed: the Triton interpreter tests need "
                        "pip install -e '.[test]'")


CONFIGS = [dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=1, SPLIT_K=1),
           dict(BLOCK_M=64, BLOCK_N=32, BLOCK_K=32, GROUP_M=2, SPLIT_K=1),
           dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=16, GROUP_M=4, SPLIT_K=2),
           dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, SPLIT_K=4)]


@pytest.fixture(scope="module")
def interpreted():
    _interpreter_or_skip()
    from evaluators.hardware.triton_gpu import TritonEvaluator

    evaluator = TritonEvaluator(interpret=True, min_repeats=1, max_repeats=1)
    yield evaluator
    evaluator.close()


@pytest.fixture(scope="module")
def interpreted_pointers():
    _interpreter_or_skip()
    from evaluators.hardware.triton_gpu import TritonEvaluator

    evaluator = TritonEvaluator(interpret=True, min_repeats=1, max_repeats=1, loads="pointers")
    yield evaluator
    evaluator.close()


@pytest.mark.parametrize("loads", ["tma", "pointers"])
@pytest.mark.parametrize("dtype,layout", [("fp16-fp16", "col"), ("fp16-fp16", "row"),
                                          ("fp32-fp32", "col")])
def test_kernel_is_correct_under_the_interpreter(request, dtype, layout, loads):
    evaluator = request.getfixturevalue("interpreted" if loads == "tma"
                                        else "interpreted_pointers")
    ctx = build_context("h200", dtype, "96x80x72", layout)  # ragged: every edge is masked
    configs = [ctx.space.resolve({**c, "num_warps": 1, "num_stages": 1}) for c in CONFIGS]
    results = evaluator.evaluate(ctx.space.encode(configs), ctx)
    assert [r.status.value for r in results] == ["ok"] * len(CONFIGS), [r.reason for r in results]
    for r in results:
        assert r.metrics["max_relative_error"] < 1e-2 and r.metrics["loads"] == loads
        assert r.metrics["torch_tflops"] > 0 and r.metrics["interpreted"] is True


def test_split_k_leaves_its_counters_ready_for_the_next_launch(interpreted):
    """One config alone, so its check and its timed run share the workspace and counters: the
    run is right only if the last slice of every tile reset its counter."""
    ctx = build_context("h200", "fp16-fp16", "96x80x72")
    config = ctx.space.resolve({**CONFIGS[3], "num_warps": 1, "num_stages": 1})
    (result,) = interpreted.evaluate(ctx.space.encode([config]), ctx)
    assert result.ok, result.reason


def test_split_k_workspace_follows_the_problem(interpreted):
    """Two problems with the same split and tile count but a larger C: the second gets a
    workspace of its own size (a reused smaller one is written past its end)."""
    for shape, block in (("16x32x32", 16), ("32x32x64", 32)):
        ctx = build_context("h200", "fp16-fp16", shape)
        config = ctx.space.resolve({"BLOCK_M": block, "BLOCK_N": block, "BLOCK_K": 16,
                                    "GROUP_M": 1, "SPLIT_K": 2, "num_warps": 1,
                                    "num_stages": 1})
        (result,) = interpreted.evaluate(ctx.space.encode([config]), ctx)
        assert result.ok, (shape, result.reason)


def test_b_is_stored_as_the_workload_says(monkeypatch):
    _interpreter_or_skip()
    from evaluators.hardware import triton_kernel

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # operands on the CPU
    job = {"M": 8, "K": 24, "N": 40, "dtype": "fp16"}
    for layout, strides in (("col", (1, 24)), ("row", (40, 1))):
        a, b, reference = triton_kernel._operands({**job, "b_layout": layout})
        assert b.shape == (24, 40) and b.stride() == strides
        assert (reference == a.float() @ b.float()).all()


def test_bf16_under_the_interpreter(interpreted):
    ctx = build_context("h200", "bf16-bf16", "96x80x72")
    config = ctx.space.resolve({**CONFIGS[0], "num_warps": 1, "num_stages": 1})
    (result,) = interpreted.evaluate(ctx.space.encode([config]), ctx)
    if result.status.value == "failed" and "wrong product" in (result.reason or ""):
        pytest.skip("Triton's interpreter runs kernels on NumPy, which has no bfloat16: the "
                    f"bf16 product comes out wrong on this machine ({result.reason}); fp16 and "
                    "fp32 are checked instead, bf16 on a GPU by benchmarks/triton_gpu_studies.py")
    assert result.ok and result.metrics["max_relative_error"] < 2e-2


def test_compile_errors_are_infeasible_with_the_reason(interpreted):
    job = {"M": 64, "K": 64, "N": 64, "dtype": "fp16", "seed": 0, "BLOCK_M": 48,
           "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 1, "SPLIT_K": 1, "num_stages": 1,
           "num_warps": 1}
    (outcome,) = interpreted._call("check_many", 120, jobs=[job])
    assert outcome["status"] == "infeasible" and "Triton" in outcome["reason"]
    assert "power of 2" in outcome["reason"] or "power of two" in outcome["reason"]


def test_offline_runner_round_trip(tmp_path, capsys):
    _interpreter_or_skip()
    from dse import load_trials
    from dse.study.runner import run_study
    from dse.study.spec import study_from_dict

    storage = str(tmp_path / "t.db")
    run_study(study_from_dict({"name": "tri", "target": "h200", "sampler": "random", "seed": 2,
                               "workload": {"shape": "96x80x72", "dtype": "fp16-fp16"},
                               "space": {"fix": {"num_warps": 1, "num_stages": 1,
                                                 "BLOCK_K": 16, "SPLIT_K": 1},
                                         "range": {"BLOCK_M": [16, 64],
                                                    "BLOCK_N": [16, 64]}},
                               "budget": {"trials": 12}}), storage)
    configs = tmp_path / "configs.json"
    assert main(["export-configs", "tri", "--storage", storage, "--evaluator", "triton",
                 "--top", "2", "--out", str(configs)]) == 0
    exported = json.loads(configs.read_text())
    assert exported["evaluator"]["name"] == "triton" and len(exported["configs"]) == 2
    job = exported["configs"][0]["job"]
    assert job["kind"] == "python" and job["entry"] == "offline_run"
    assert "import dse" not in job["source"] and "@triton.jit" in job["source"]
    results = tmp_path / "results.json"
    # past the runner's deadline the kernel measures nothing: no result, to be exported again
    late = _run_offline_jobs(configs, results, DSE_RUNNER_DEADLINE="0")
    assert json.loads(results.read_text())["results"] == []
    assert "2 of 2 configs not measured" in late
    _run_offline_jobs(configs, results)
    data = json.loads(results.read_text())
    assert [r["status"] for r in data["results"]] == ["ok", "ok"]
    assert all(r["metrics"]["torch_tflops"] > 0 for r in data["results"])
    # the interpreter's timings are not a GPU's: refused unless asked for
    assert main(["ingest", str(results), "--storage", storage]) == 2
    assert "run by Triton's interpreter" in capsys.readouterr().err
    assert main(["ingest", str(results), "--storage", storage, "--accept-interpreted"]) == 0
    frame = load_trials(storage, "tri")
    measured = frame[frame["evaluator"] == "triton"]
    assert len(measured) == 2 and (measured["status"] == "ok").all()
    assert np.isfinite(measured["tops"]).all()


def _run_offline_jobs(configs, results, **env):
    """The offline runner on an exported file, the kernel under Triton's interpreter."""
    runner = os.path.join(os.path.dirname(__file__), "..", "dse", "offline", "runner.py")
    done = subprocess.run([sys.executable, runner, str(configs), str(results)],
                          env={**os.environ, "TRITON_INTERPRET": "1", **env},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stderr


def _offline_study(tmp_path, name: str, workloads: str, ladder: str) -> tuple[str, Path, Path,
                                                                             list[str]]:
    """A ladder study over h200 whose triton rung is measured offline (skipped where a GPU
    runs it here): its store, configs file, results file and the ``dse run --offline`` line."""
    _interpreter_or_skip()
    from evaluators.hardware.triton_gpu import TritonEvaluator

    if TritonEvaluator().unavailable() is None:
        pytest.skip("this machine has a GPU: the rung runs here")
    study = tmp_path / "s.yaml"
    study.write_text(f"name: {name}\ntarget: h200\n{workloads}"
                     "space: {fix: {num_warps: 1, num_stages: 1, SPLIT_K: 1}}\n"
                     f"ladder:\n{ladder}")
    storage, configs, results = (str(tmp_path / "o.db"), tmp_path / "jobs.json",
                                 tmp_path / "results.json")
    return storage, configs, results, ["run", str(study), "--storage", storage, "--offline",
                                       str(configs)]


def test_a_ladder_measures_its_gpu_rung_offline(tmp_path, capsys):
    """Without a GPU, ``dse run --offline`` exports the configs the model kept; the runner
    measures them (here under the interpreter); after ingesting, the same command finishes the
    ladder with the rank agreement and exports nothing more."""
    from dse import load_trials
    from dse.storage import open_store

    storage, configs, results, command = _offline_study(
        tmp_path, "offl", "workloads:\n  - {shape: 96x80x72, dtype: fp16-fp16}\n"
        "  - {shape: 64x64x64, dtype: fp16-fp16}\n",
        "  - {evaluator: analytical, keep: 3}\n  - {evaluator: triton}\n")
    assert main(command[:-2]) == 2  # without --offline the rung is refused
    assert "--offline FILE" in capsys.readouterr().err
    assert main(command) == 0
    out = capsys.readouterr().out
    assert "6 configs for the triton rung written to" in out and "3 exported" in out
    exported = json.loads(configs.read_text())
    assert {c["job"]["batch"] for c in exported["configs"]} == {"jobs"}
    assert load_trials(storage, "offl")["evaluator"].tolist() == ["analytical"] * 6
    log = _run_offline_jobs(configs, results)
    assert "[1-3/6]" in log and "[4-6/6]" in log  # one call per workload
    assert main(["ingest", str(results), "--storage", storage, "--accept-interpreted"]) == 0
    assert main(command) == 0
    assert "the study is complete" in capsys.readouterr().out
    frame = load_trials(storage, "offl")
    measured = frame[frame["evaluator"] == "triton"]
    assert len(measured) == 6 and (measured["status"] == "ok").all()
    report = open_store(storage).fidelity_report("offl")
    assert len(report) == 2 and all(r["n"] == 3 for r in report)


def test_an_offline_rung_walks_one_exported_step_at_a_time(tmp_path, capsys):
    """A rung's walk (``refine``) measured elsewhere: each run exports the walk's next config, a
    neighbour of the best measured so far, until the walk is done."""
    from dse import load_trials

    storage, configs, results, command = _offline_study(
        tmp_path, "walked", "workload: {shape: 64x64x64, dtype: fp16-fp16}\n",
        "  - {evaluator: analytical, keep: 2}\n  - {evaluator: triton, refine: 2}\n")
    exported = []
    for _ in range(3):  # the kept two, then the walk's two steps
        assert main(command) == 0
        exported.append(len(json.loads(configs.read_text())["configs"]))
        capsys.readouterr()
        _run_offline_jobs(configs, results)
        assert main(["ingest", str(results), "--storage", storage,
                     "--accept-interpreted"]) == 0
    assert exported == [2, 1, 1]
    assert main(command) == 0
    assert "the study is complete" in capsys.readouterr().out
    frame = load_trials(storage, "walked")
    measured = frame[frame["evaluator"] == "triton"]
    assert len(measured) == 4 and (measured["status"] == "ok").all()
    params = frame.attrs["params"]
    first = measured.iloc[:2][params].to_dict("records")
    for _, walked in measured.iloc[2:][params].iterrows():
        assert any(sum(walked[p] != c[p] for p in params) == 1 for c in first)
        first.append(walked.to_dict())


def test_a_gpu_study_refuses_to_start_without_a_gpu(tmp_path):
    from dse.core.errors import UsageError
    from dse.study.runner import run_study
    from dse.study.spec import load_study
    from evaluators.hardware.triton_gpu import TritonEvaluator

    problem = TritonEvaluator().unavailable()
    if problem is None:
        pytest.skip("this machine has a GPU: the study would run")
    spec = load_study(os.path.join(os.path.dirname(__file__), "..", "studies", "h200_bf16.yaml"))
    with pytest.raises(UsageError, match="evaluator 'triton' cannot run here"):
        run_study(spec, str(tmp_path / "g.db"))


def _gpu_script():
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "triton_gpu_studies.py")
    spec = importlib.util.spec_from_file_location("triton_gpu_studies", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_gpu_script_builds_its_studies():
    from dse.study.spec import study_from_dict

    decode, big = (study_from_dict(raw) for raw in _gpu_script().study_dicts("h100", 20))
    assert (decode.name, big.name) == ("h100-bf16-decode", "h100-bf16")
    assert decode.target == big.target == "h100" and big.ladder[0].keep == 20
    assert big.ladder[0].per_group == 3 and "num_stages" in big.ladder[0].group_by
    assert decode.ladder[0].group_by == ("BLOCK_M", "BLOCK_N", "SPLIT_K")
    assert [w.shape for w in decode.workloads] == ["64x4096x4096"]
    assert [w.shape for w in big.workloads] == ["4096x4096x4096", "8192x8192x8192",
                                                "4096x4096x14336"]
    assert big.ladder[-1].evaluator.options == {}  # TMA loads: the evaluator's default
    pointers = [study_from_dict(raw) for raw in _gpu_script().study_dicts("h200", 20, "pointers")]
    assert [s.name for s in pointers] == ["h200-bf16-decode-pointers", "h200-bf16-pointers"]
    assert all(s.ladder[-1].evaluator.options == {"loads": "pointers"} for s in pointers)


def test_the_gpu_script_writes_its_hardware_trials_for_a_gpu_box(tmp_path, capsys):
    from evaluators.hardware.triton_gpu import TritonEvaluator

    if TritonEvaluator().unavailable() is None:
        pytest.skip("this machine has a GPU: the script measures here")
    script = _gpu_script()
    assert script.main(["--storage", str(tmp_path / "g.db"), "--offline", str(tmp_path / "jobs"),
                        "--keep", "5"]) == 0
    out = capsys.readouterr().out
    assert "h200-bf16-decode: 5 hardware trials" in out and "h200-bf16: 15 hardware" in out
    decode = json.loads((tmp_path / "jobs" / "h200-bf16-decode.jobs.json").read_text())
    big = json.loads((tmp_path / "jobs" / "h200-bf16.jobs.json").read_text())["configs"]
    assert {c["workload"]["M"] for c in decode["configs"]} == {64}
    assert [c["workload"]["N"] for c in big[::5]] == [4096, 8192, 14336]
    assert all(c["job"]["args"]["jobs"][0]["b_layout"] == "col" for c in big)
    assert all(c["job"]["args"]["jobs"][0]["loads"] == "tma" for c in big)


def interpreted_ladder(storage: str, name: str, keep: int, select: str) -> None:
    """A small fp16 ladder study: the model keeps ``keep`` configs, Triton's interpreter runs
    them."""
    _interpreter_or_skip()
    from dse.study.runner import run_study
    from dse.study.spec import study_from_dict

    run_study(study_from_dict({
        "name": name, "target": "h200", "workload": {"shape": "96x80x72", "dtype": "fp16-fp16"},
        "space": {"fix": {"num_warps": 1, "num_stages": 1, "SPLIT_K": 1}},
        "ladder": [{"evaluator": "analytical", "keep": keep, "select": select},
                   {"evaluator": "triton", "options": {"interpret": True, "max_repeats": 1,
                                                       "min_repeats": 1}}]}), storage)


def test_the_gpu_script_reports_a_ladder_study(tmp_path):
    storage = str(tmp_path / "l.db")
    interpreted_ladder(storage, "lad", 3, "top")
    (row,) = _gpu_script().summarise(storage, "lad")
    assert row["shape"] == "96x80x72" and row["analytical_kept"] == 3
    assert row["hardware_trials"] == 3 and row["hardware_ok"] == 3
    assert row["torch_tflops"] > 0 and row["tuned_tflops"] > 0 and "BLOCK_M=" in row["best"]


def test_dashboard_shows_a_gpu_config(tmp_path):
    from dse.dashboard import create_app
    from dse.study.runner import run_study
    from dse.study.spec import study_from_dict

    storage = str(tmp_path / "g.db")
    run_study(study_from_dict({"name": "g", "target": "h200", "sampler": "random", "seed": 0,
                               "workload": {"shape": "4096x4096x4096", "dtype": "bf16-bf16"},
                               "budget": {"trials": 15}}), storage)
    client = create_app(storage).test_client()
    study = client.get("/study/g").text
    assert "Balance: t_comp and t_mem against BLOCK_M x BLOCK_N" in study and "Roofline" in study
    ok = load_ok_number(storage)
    page = client.get(f"/config/{ok}/g").text
    assert "On-chip resource occupancy" in page and "shared memory per program" in page


def load_ok_number(storage: str) -> int:
    from dse import load_trials

    frame = load_trials(storage, "g")
    return int(frame[frame["status"] == "ok"]["number"].iloc[0])


def test_calibrating_the_gpu_model_against_measurements(tmp_path):
    from dse.storage import open_store
    from dse.study.calibrate import calibrate_study

    storage = str(tmp_path / "c.db")
    interpreted_ladder(storage, "cal", 6, "spread")
    report = calibrate_study(open_store(storage), "cal", "analytical", "triton",
                             tmp_path / "fit.toml")
    assert set(report.fitted) == {"model.mma_efficiency", "model.step_overhead_cycles",
                                  "model.l2_bytes_per_s", "model.hbm_efficiency",
                                  "model.launch_s"}
    # a share of a peak stays a share, whatever the measurements
    assert 0 < report.fitted["model.mma_efficiency"] <= 1
    assert 0 < report.fitted["model.hbm_efficiency"] <= 1
    refit = load_target(str(report.out))
    assert refit.model.step_overhead_cycles == pytest.approx(
        report.fitted["model.step_overhead_cycles"], rel=1e-6)
    assert refit.device == load_target("h200").device  # only the model's assumptions move
