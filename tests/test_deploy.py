"""From a study to deployment: mixes derived from models, the cover selection against brute
force, dispatch tables (JSON, the Python module, the C header compiled with the system's
compiler) that give every shape of the mix the kernel the cover chose, audits of a table, the
commands and the cross-target report."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dse.cli import main
from dse.core.errors import UsageError
from dse.core.mix import PRESETS, model_mix, model_of, token_passes
from dse.core.registry import build_context, build_evaluator, workload_class
from dse.deploy.check import check_table, shapes_of
from dse.deploy.cover import NoCover, choose
from dse.deploy.plan import plan_study
from dse.deploy.problem import CoverProblem, measure_across, study_problem
from dse.deploy.selector import kernel_index, python_module, select
from dse.deploy.table import c_header, read_table, write_table
from dse.storage.store import ResultStore
from dse.study.runner import run_study
from dse.study.spec import StudyFileError, load_study, study_from_dict

TINY = {"name": "tiny", "hidden": 256, "intermediate": 512, "heads": 4, "kv_heads": 2,
        "vocab": 1000, "layers": 2}
TOKENS = {"decode": {1: 8, 8: 4}, "prefill": [64]}
DTYPES = {"xdna2": "int8-int8", "h200": "bf16-bf16", "ascend-950pr": "bf16",
          "tpu-v1": "int8-int32"}


def mix_study(name: str, target: str, trials: int = 8) -> dict:
    return {"name": name, "target": target, "sampler": "random", "seed": 1,
            "workloads": {"model": TINY, "tokens": TOKENS, "dtype": DTYPES[target]},
            "budget": {"trials": trials}}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """Mix studies of the tiny model on four targets, one database."""
    path = str(tmp_path_factory.mktemp("deploy") / "d.db")
    for target in DTYPES:
        run_study(study_from_dict(mix_study(f"tiny-{target}", target)), path)
    return path


# -- mixes ------------------------------------------------------------------------------------

def test_a_model_mix_has_each_layers_gemms_and_the_lm_head():
    model = PRESETS["llama-3.1-8b"]
    shapes = {s.shape: s for s in model_mix(model, token_passes({"decode": {8: 3},
                                                                 "prefill": [2048]}))}
    assert shapes["8x4096x6144"].count == 32 * 3  # QKV: (32 + 2 * 8) heads of 128, 32 layers
    assert shapes["8x4096x4096"].roles == ("o_proj@decode:8",)
    assert shapes["2048x4096x28672"].count == 32  # gate and up together
    assert shapes["2048x14336x4096"].roles == ("down@prefill:2048",)
    assert shapes["8x4096x128256"].count == 3  # the LM head: every sequence of the batch
    assert shapes["1x4096x128256"].roles == ("lm_head@prefill:2048",)  # a prefill's last token
    assert len(shapes) == 10


def test_identical_shapes_of_a_mix_are_merged():
    # an MLP of 128: gate/up is 256 x 256 as the output projection is
    model = model_of({**TINY, "intermediate": 128})
    merged = {s.shape: s for s in model_mix(model, token_passes({"decode": [1],
                                                                 "prefill": [1]}))}
    assert merged["1x256x256"].count == 2 * 2 * 2  # two GEMMs, two layers, two phases
    assert set(merged["1x256x256"].roles) == {"o_proj@decode:1", "gate_up@decode:1",
                                              "o_proj@prefill:1", "gate_up@prefill:1"}
    assert merged["1x256x1000"].roles == ("lm_head@decode:1", "lm_head@prefill:1")


@pytest.mark.parametrize(("raw", "message"), [
    ("llama-9", "unknown model 'llama-9'; presets: llama-3.1-8b"),
    ({**TINY, "heads": 3}, "heads (3) must be a multiple of kv_heads (2)"),
    ({**TINY, "layers": 0}, "layers must be a whole number"),
    ({**TINY, "depth": 3}, "unknown key 'depth'"),
    ({"hidden": 4}, "missing intermediate"),
])
def test_a_bad_model_is_refused_by_name(raw, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        model_of(raw)


@pytest.mark.parametrize(("raw", "message"), [
    ({}, "give decode batch sizes"), ({"decoding": [1]}, "unknown phase 'decoding'"),
    ({"decode": [0]}, "a token count must be a whole number"),
    ({"decode": {1: -2}}, "passes must be a whole number"), ({"decode": 5}, "a list of"),
])
def test_bad_token_counts_are_refused_by_name(raw, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        token_passes(raw)


def test_a_study_file_takes_a_model_mix_in_the_targets_workload_kind():
    for target, dtype in DTYPES.items():
        spec = study_from_dict(mix_study("m", target))
        kind = workload_class(spec.workloads[0].kind)
        assert spec.workloads[0] == kind.parse(kind.shape_of_gemm(1, 256, 512), dtype)
        assert len(spec.workloads) == len(spec.weights) == 14
        identity = spec.identity()
        assert identity["weights"] == list(spec.weights)
        assert identity["mix"]["model"]["name"] == "tiny"
        assert identity["mix"]["tokens"] == {"decode": {"1": 8, "8": 4}, "prefill": {"64": 1}}


def test_a_list_of_shapes_takes_weights_and_merges_repeats():
    spec = study_from_dict({"name": "w", "target": "xdna2", "budget": {"trials": 5},
                            "workloads": [{"shape": "64x64x64", "dtype": "int8-int8",
                                           "weight": 3},
                                          {"shape": "64x64x64", "dtype": "int8-int8"},
                                          {"shape": "128x64x64", "dtype": "int8-int8"}]})
    assert spec.weights == (4.0, 1.0) and len(spec.workloads) == 2
    plain = study_from_dict({"name": "p", "target": "xdna2", "budget": {"trials": 5},
                             "workload": {"shape": "64x64x64", "dtype": "int8-int8"}})
    assert plain.weights == () and "weights" not in plain.identity()  # stored as before


@pytest.mark.parametrize(("workloads", "message"), [
    ({"model": "nope", "tokens": {"decode": [1]}, "dtype": "int8-int8"}, "unknown model"),
    ({"model": "llama-3.2-1b", "dtype": "int8-int8"}, "give decode batch sizes"),
    ({"model": "llama-3.2-1b", "tokens": {"decode": [1]}}, "workloads.dtype"),
    ({"model": "llama-3.2-1b", "tokens": {"decode": [1]}, "dtype": "int8-int8", "x": 1},
     "unknown key 'workloads.x'"),
    ([{"shape": "64x64x64", "dtype": "int8-int8", "weight": 0}], "workloads[0].weight"),
])
def test_a_bad_mix_in_a_study_file_names_the_key(workloads, message):
    with pytest.raises(StudyFileError, match=re.escape(message)):
        study_from_dict({"name": "b", "target": "xdna2", "budget": {"trials": 5},
                         "workloads": workloads}, "s.yaml")


# -- the cover against brute force -------------------------------------------------------------

def _random_problem(rng: np.random.Generator, shapes: int, candidates: int) -> CoverProblem:
    """Throughputs drawn at random, a third of the pairs unable to run, each shape's optimum
    among them."""
    tops = rng.uniform(1, 100, (shapes, candidates)) * (rng.random((shapes, candidates)) > 0.3)
    tops[np.arange(shapes), rng.integers(0, candidates, shapes)] = 150.0  # each runs on one
    kind = workload_class("gemm")
    workloads = [kind.parse(f"{64 * (i + 1)}x256x256", "int8-int8") for i in range(shapes)]
    return CoverProblem("r", "xdna2", {"name": "analytical"}, {}, workloads,
                        rng.uniform(1, 10, shapes), [{"id": j} for j in range(candidates)],
                        tops, tops.max(axis=1), [""] * shapes, True, ["id"])


def _objective(problem: CoverProblem, kernels: tuple[int, ...], objective: str) -> float:
    """The objective of serving the mix with ``kernels`` (inf if one shape has none)."""
    seconds = problem.seconds()[:, list(kernels)].min(axis=1)
    if not np.isfinite(seconds).all():
        return float("inf")
    if objective == "time":
        return float(seconds.sum())
    ratio = (problem.tops[:, list(kernels)] / problem.optimum[:, None]).max(axis=1)
    return float((1 - ratio).max())


def _brute_force(problem: CoverProblem, k: int, objective: str) -> float:
    return min(_objective(problem, subset, objective)
               for subset in itertools.combinations(range(len(problem.candidates)), k))


@pytest.mark.parametrize("objective", ["time", "worst"])
@pytest.mark.parametrize("seed", range(6))
def test_the_cover_equals_brute_force_on_small_mixes(seed, objective):
    rng = np.random.default_rng(seed)
    problem = _random_problem(rng, int(rng.integers(3, 8)), int(rng.integers(4, 11)))
    for k in range(1, 5):
        try:
            best = _brute_force(problem, k, objective)
        except ValueError:
            continue
        for method in ("brute", "milp"):
            if not np.isfinite(best):
                with pytest.raises(NoCover):
                    choose(problem, k, objective, method)
                continue
            cover = choose(problem, k, objective, method)
            assert cover.exact and len(cover.kernels) <= k
            assert _objective(problem, cover.kernels, objective) == pytest.approx(best,
                                                                                  rel=1e-9)
        if np.isfinite(best):
            greedy = choose(problem, k, objective, "greedy")
            assert _objective(problem, greedy.kernels, objective) >= best * (1 - 1e-12)


def test_the_cover_of_real_studies_equals_brute_force(stored):
    store = ResultStore(stored)
    for target in DTYPES:
        problem = study_problem(store, f"tiny-{target}", per_shape=2)
        assert problem.exact and (problem.optimum > 0).all()
        # every shape's optimum is a candidate's: the exhaustive search's best is one
        assert np.allclose(problem.tops.max(axis=1), problem.optimum)
        for k in (1, 2, 3):
            try:
                brute = choose(problem, k, "time", "brute")
            except NoCover:  # no k of the candidates run every shape (systolic tiles)
                with pytest.raises(NoCover):
                    choose(problem, k, "time", "milp")
                continue
            milp = choose(problem, k, "time", "milp")
            assert milp.fraction == pytest.approx(brute.fraction, rel=1e-9)
            assert 0 < brute.fraction <= 1


def test_more_kernels_never_lose(stored):
    plan = plan_study(ResultStore(stored), "tiny-h200", 8)
    fractions = [c.fraction for c in plan.curve if c is not None]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)


# -- dispatch tables ------------------------------------------------------------------------------

def _table(stored: str, target: str, k: int) -> tuple[dict, CoverProblem]:
    plan = plan_study(ResultStore(stored), f"tiny-{target}", k)
    return plan.table, plan.problem


@pytest.mark.parametrize("target", list(DTYPES))
def test_a_table_round_trips_to_the_chosen_config_for_every_shape(stored, tmp_path, target):
    table, problem = _table(stored, target, 3)
    read = read_table(write_table(table, tmp_path / "t.json"))
    namespace: dict = {}
    exec(compile(python_module(read), "t.py", "exec"), namespace)  # the exported module
    for shape in table["shapes"]:
        chosen = table["kernels"][shape["kernel"]]["params"]
        m, k, n = shape["M"], shape["K"], shape["N"]
        assert select(read, m, k, n) == chosen
        assert namespace["config"](m, k, n) == chosen
    assert problem.params == table["params"]


def test_the_c_header_compiles_and_selects_as_python_does(stored, tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler (cc or gcc) on this machine")
    table, _ = _table(stored, "xdna2", 3)
    (tmp_path / "t.h").write_text(c_header(table, "tiny"))
    probes = [(s["M"], s["K"], s["N"]) for s in table["shapes"]] + [(5, 7, 9), (3, 256, 1000)]
    calls = "\n".join(f'    printf("%d %ld\\n", tiny_select({m}, {k}, {n}), '
                      f"tiny_kernels[tiny_select({m}, {k}, {n})].m_ct);" for m, k, n in probes)
    (tmp_path / "main.c").write_text(f'#include <stdio.h>\n#include "t.h"\nint main(void) {{\n'
                                     f"{calls}\n    return 0;\n}}\n")
    subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                    str(tmp_path / "main.c"), "-o", str(tmp_path / "main")], check=True)
    out = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    for (m, k, n), line in zip(probes, out, strict=False):
        index, m_ct = map(int, line.split())
        assert index == kernel_index(table, m, k, n)
        assert m_ct == table["kernels"][index]["params"]["m_ct"]


def test_rules_split_m_between_the_shapes_that_chose_other_kernels(stored):
    table, _ = _table(stored, "h200", 3)
    for _, rules in itertools.groupby(sorted(table["rules"], key=lambda r: (r["k"], r["n"],
                                                                             r["m_min"])),
                                      key=lambda r: (r["k"], r["n"])):
        rules = list(rules)
        assert rules[0]["m_min"] == 1 and rules[-1]["m_max"] is None
        assert all(a["m_max"] + 1 == b["m_min"] and a["kernel"] != b["kernel"]
                   for a, b in itertools.pairwise(rules))
    assert kernel_index(table, 100, 12345, 678) == table["fallback"]  # another weight shape


def test_a_check_on_the_mixs_own_shapes_gives_the_covers_throughput(stored):
    table, problem = _table(stored, "xdna2", 2)
    shapes = [(s["M"], s["K"], s["N"], s["weight"]) for s in table["shapes"]]
    report = check_table(table, shapes)
    assert report["fraction"] == pytest.approx(table["fraction"], rel=1e-9)
    assert [r["loss"] for r in report["shapes"]] == pytest.approx(
        [s["loss"] for s in table["shapes"]], abs=1e-12)
    other = check_table(table, shapes_of("16x256x512*3,200x256x1000"))
    assert len(other["shapes"]) == 2 and 0 < other["fraction"] <= 1


@pytest.mark.parametrize(("text", "message"), [
    ("axbxc", "is not MxKxN"), ("0x4x4", "a zero dimension"), ("", "give the shapes")])
def test_bad_shapes_to_check_are_refused(text, message):
    with pytest.raises(UsageError, match=message):
        shapes_of(text)


@pytest.mark.parametrize(("content", "message"), [
    ("nope", "not JSON"), ('{"format": 1}', "not a dispatch table"),
    ('{"format": "dse-dispatch/1", "kernels": [], "rules": [], "fallback": 0}', "'kernels'"),
    ('{"format": "dse-dispatch/1", "kernels": [{"params": {}}], "rules": [{"k": 1}], '
     '"fallback": 0}', "'rules'"),
    ('{"format": "dse-dispatch/1", "kernels": [{"params": {}}], "rules": [], "fallback": 3}',
     "'fallback'"),
])
def test_a_malformed_table_is_refused_by_name(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UsageError, match=message):
        read_table(path)


def test_the_triton_job_module_runs_the_kernel_the_table_picks(stored):
    from evaluators.hardware import triton_kernel

    table, _ = _table(stored, "h200", 2)
    source = python_module(table)
    for shape in table["shapes"]:
        job = {"M": shape["M"], "K": shape["K"], "N": shape["N"], "dtype": "fp16",
               "b_layout": "col", "seed": 0, "selector": source}
        picked = triton_kernel.dispatched(job)
        assert "selector" not in picked
        params = table["kernels"][shape["kernel"]]["params"]
        assert {k: picked[k] for k in params} == params
    job = {"M": 8, "K": 24, "N": 40, "dtype": "fp16", "b_layout": "col", "seed": 0}
    assert triton_kernel.dispatched(job) is job  # no table: the job as it is


def test_the_job_module_runs_a_dispatched_kernel_under_triton_s_interpreter(stored):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from evaluators.hardware.triton_gpu import TritonEvaluator

    table, _ = _table(stored, "h200", 2)
    table = {**table, "kernels": [{**k, "params": {**k["params"], "num_warps": 1,
                                                   "num_stages": 1}}
                                  for k in table["kernels"]]}
    evaluator = TritonEvaluator(interpret=True, min_repeats=1, max_repeats=1)
    try:  # a small GEMM of the mix's weight shape: the interpreter is slow
        shape = table["shapes"][0]
        outcome = evaluator._call("check", 600.0, M=8, K=shape["K"], N=shape["N"],  # noqa: SLF001
                                  dtype="fp16", b_layout="col", seed=0, loads="pointers",
                                  selector=python_module(table))
    finally:
        evaluator.close()
    assert outcome["status"] == "ok", outcome


# -- commands and report --------------------------------------------------------------------------

def test_dse_cover_prints_the_curve_and_writes_the_table(stored, tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["cover", "tiny-xdna2", "--storage", stored, "--kernels", "2",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "of optimum" in text and "2 kernels (time)" in text and f"wrote {out}" in text
    table = read_table(out)
    assert len(table["kernels"]) <= 2
    assert main(["cover", "tiny-xdna2", "--storage", stored, "--kernels", "2",
                 "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["curve"][1]["of_optimum"] == pytest.approx(table["fraction"])
    assert main(["dispatch", "export", str(out), "--c", str(tmp_path / "t.h"), "--python",
                 str(tmp_path / "t.py"), "--name", "llm"]) == 0
    assert "llm_select" in (tmp_path / "t.h").read_text()
    assert "config(M, K, N)" in capsys.readouterr().out
    assert main(["dispatch", "check", str(out), "--model", "llama-3.2-1b", "--decode", "1",
                 "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["shapes"]) == 5


@pytest.mark.parametrize(("argv", "message"), [
    (["cover", "nope"], "no study 'nope'"),
    (["cover", "tiny-xdna2", "--kernels", "0"], "must be at least 1"),
    (["dispatch", "export", "missing.json", "--c", "x.h"], "missing.json"),
    (["dispatch", "export", "TABLE"], "give --c OUT.h and/or --python OUT.py"),
    (["dispatch", "check", "TABLE", "--model", "llama-3.2-1b"], "give decode batch sizes"),
    (["dispatch", "check", "TABLE", "--model", "llama-3.2-1b", "--decode", "1,x"],
     "--decode: token counts"),
    (["dispatch", "export", "TABLE", "--c", "x.h", "--name", "1bad"], "a C identifier"),
])
def test_bad_deployment_commands_are_refused(stored, tmp_path, capsys, argv, message):
    table, _ = _table(stored, "xdna2", 1)
    path = write_table(table, tmp_path / "t.json")
    argv = [str(path) if a == "TABLE" else a for a in argv]
    if argv[0] == "cover":
        argv += ["--storage", stored]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_study_of_two_dtypes_is_not_covered(tmp_path, capsys):
    storage = str(tmp_path / "two.db")
    run_study(study_from_dict({"name": "two", "target": "xdna2", "sampler": "random",
                               "budget": {"trials": 4},
                               "workloads": [{"shape": "64x64x64", "dtype": "int8-int8"},
                                             {"shape": "64x64x64", "dtype": "bf16-bf16"}]}),
              storage)
    assert main(["cover", "two", "--storage", storage]) == 2
    assert "mixes dtypes or B layouts" in capsys.readouterr().err


def test_the_cover_report_compares_targets(stored, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["cover-report", "tiny-xdna2", "tiny-h200", "--storage", stored, "--kernels",
                 "2", "--out", str(out)]) == 0
    page = out.read_text()
    assert page.count('class="plotly-graph-div"') == 1 + 2 * 2  # the curves, then 2 a study
    assert "tiny-xdna2 (xdna2)" in page and "tiny-h200 (h200)" in page
    assert "memory-bound at their optimum" in page


@pytest.mark.parametrize("target", ["xdna2", "h200"])
def test_the_shipped_deployment_study_goes_from_model_to_table(tmp_path, target):
    path = Path(__file__).parents[1] / "studies" / f"deploy_llama3_8b_{target}.yaml"
    spec = load_study(path).with_overrides(trials=3)
    storage = str(tmp_path / "s.db")
    run_study(spec, storage)
    plan = plan_study(ResultStore(storage), spec.name, 4)
    assert spec.mix["model"]["name"] == "llama-3.1-8b" and len(spec.workloads) == 23
    assert len(plan.curve) >= 8 and plan.cover.exact and len(plan.table["kernels"]) <= 4
    fractions = [c.fraction for c in plan.curve]
    assert fractions == sorted(fractions) and 0.5 < plan.cover.fraction <= 1
    for shape in plan.table["shapes"]:
        assert kernel_index(plan.table, shape["M"], shape["K"], shape["N"]) == shape["kernel"]


def test_an_evaluator_that_cannot_score_counts_only_what_the_study_measured(tmp_path):
    # the systolic simulator scores one config at a time: no exhaustive search, the optimum
    # is the study's best, a pair the study did not measure cannot serve
    storage = str(tmp_path / "sim.db")
    run_study(study_from_dict({
        "name": "sim", "target": "tpu-v1", "evaluator": "systolic-sim", "sampler": "exhaustive",
        "workloads": [{"shape": "8x64x64", "dtype": "int8-int32", "weight": 4},
                      {"shape": "16x64x128", "dtype": "int8-int32"}]}), storage)
    problem = study_problem(ResultStore(storage), "sim")
    assert not problem.exact
    frame = ResultStore(storage).load_trials("sim")
    for i, workload in enumerate(problem.workloads):
        rows = frame[(frame["shape"] == workload.shape) & (frame["status"] == "ok")]
        assert problem.optimum[i] == pytest.approx(rows["tops"].max())
        measured = {tuple(row[p] for p in problem.params): row["tops"]
                    for _, row in rows.iterrows()}
        for j, candidate in enumerate(problem.candidates):
            key = tuple(candidate[p] for p in problem.params)
            assert problem.tops[i, j] == pytest.approx(measured.get(key, 0.0))
    cover = choose(problem, 2)
    assert cover.fraction == pytest.approx(1.0)  # each shape its own best


def test_a_study_without_a_feasible_result_is_refused(tmp_path, capsys):
    storage = str(tmp_path / "none.db")
    run_study(study_from_dict({"name": "none", "target": "xdna2", "sampler": "random",
                               "budget": {"trials": 2},
                               "evaluator": {"name": "synthetic",
                                             "options": {"fail_fraction": 1.0}},
                               "workloads": [{"shape": "64x64x64", "dtype": "int8-int8"},
                                             {"shape": "128x64x64", "dtype": "int8-int8"}]}),
              storage)
    assert main(["cover", "none", "--storage", storage]) == 2
    assert "no feasible result to choose kernels from" in capsys.readouterr().err


def test_measured_across_shapes_a_smaller_cover_serves_every_shape(tmp_path, capsys):
    # A ladder whose last rung measures (synthetic: the model's figures, no cheap scoring):
    # each shape's candidates are measured only on their own shape, so no single kernel
    # serves both until they are measured across; the cheaper rung's scores never count.
    storage = str(tmp_path / "across.db")
    run_study(study_from_dict({
        "name": "across", "target": "xdna2",
        "workloads": [{"shape": "256x4096x256", "dtype": "int8-int8"},
                      {"shape": "4096x256x4096", "dtype": "int8-int8"}],
        "ladder": [{"evaluator": "analytical", "keep": 2},
                   {"evaluator": "synthetic", "options": {"work_s": 0.0}}]}), storage)
    store = ResultStore(storage)
    before = study_problem(store, "across", per_shape=2)
    own = [sum(before.tops[i] > 0) for i in range(2)]
    assert before.tops.shape == (2, len(before.candidates)) and min(own) >= 1
    assert (before.tops == 0).any()  # pairs the study never measured: not served
    one = ["cover", "across", "--storage", storage, "--kernels", "1", "--candidates", "2"]
    assert not (before.tops > 0).all(axis=0).any()  # no candidate measured on both shapes
    assert main(one) == 2 and "run every shape" in capsys.readouterr().err
    trials = len(store.load_trials("across"))
    counts = measure_across(store, "across", per_shape=2)
    assert counts["measured"] == int((before.tops == 0).sum()) - counts["refused"]
    assert len(store.load_trials("across")) == trials + counts["measured"]
    after = study_problem(store, "across", per_shape=2)
    model = build_evaluator("analytical")
    for i, workload in enumerate(after.workloads):  # synthetic reports the model's throughput
        ctx = build_context("xdna2", "int8-int8", workload.shape)
        for j, candidate in enumerate(after.candidates):
            try:
                result = model.evaluate(ctx.space.encode([ctx.space.resolve(candidate)]), ctx)[0]
            except UsageError:  # outside this shape's domains
                assert after.tops[i, j] == 0
                continue
            assert after.tops[i, j] == pytest.approx(result.metrics["tops"] if result.ok else 0)
    assert (after.tops > 0).sum() > (before.tops > 0).sum()
    assert measure_across(store, "across", per_shape=2)["measured"] == 0  # nothing twice
    code = main([*one, "--measure-across"])
    captured = capsys.readouterr()
    assert code == 0 and "measured across shapes: 0 new results" in captured.err
    assert "serves 2 shapes" in captured.out
    # the command itself writes (its store opened for writing), and plain covers still read
    run_study(study_from_dict({"name": "again", "target": "xdna2",
                               "workloads": [{"shape": "256x4096x256", "dtype": "int8-int8"},
                                             {"shape": "4096x256x4096", "dtype": "int8-int8"}],
                               "ladder": [{"evaluator": "analytical", "keep": 2},
                                          {"evaluator": "synthetic",
                                           "options": {"work_s": 0.0}}]}), storage)
    again = ["cover", "again", "--storage", storage, "--kernels", "1", "--candidates", "2"]
    assert main([*again, "--measure-across"]) == 0
    assert "measured across shapes: 4 new results" in capsys.readouterr().err
