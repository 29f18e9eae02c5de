"""benchmarks/kernel_tuner_side_by_side.py without Kernel Tuner: how a race over one shared memo
is counted, the space both sides get, and the source Kernel Tuner's C backend is handed (compiled
the way it compiles, called the way it calls, its product checked)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import kernel_tuner_side_by_side as side  # noqa: E402
from search_race import (  # noqa: E402
    Measured,
    best_time,
    cost_until,
    distinct,
    measurements_to_within,
    median_count,
    shown,
)

MEMO = {"a": Measured(1.30, 2.0), "b": Measured(1.00, 3.0), "c": Measured(1.02, 4.0),
        "d": Measured(None, 1.0), "e": Measured(1.50, 5.0)}


def test_the_best_is_the_shortest_time_and_failures_have_none():
    assert best_time(MEMO) == 1.00
    with pytest.raises(ValueError, match="no config"):
        best_time({"d": Measured(None, 1.0)})


def test_a_config_asked_again_is_not_counted_again():
    assert distinct(["a", "d", "a", "e", "d", "c"]) == ["a", "d", "e", "c"]
    # a, d, e, then c: within 3 % of 1.00 at the fourth distinct config, not the sixth asked
    assert measurements_to_within(["a", "d", "a", "e", "d", "c"], MEMO, 1.00) == 4
    assert measurements_to_within(["b"], MEMO, 1.00) == 1


def test_within_means_at_most_the_tolerance_above_the_best():
    assert measurements_to_within(["a", "e", "c"], MEMO, 1.00, tolerance=0.02) == 3
    assert measurements_to_within(["a", "e", "c"], MEMO, 1.00, tolerance=0.01) is None
    assert measurements_to_within(["d"], MEMO, 1.00) is None  # a failed config never counts


def test_a_config_never_measured_is_an_error_not_a_guess():
    with pytest.raises(KeyError):
        measurements_to_within(["z"], MEMO, 1.00)


def test_a_run_is_charged_each_distinct_config_once():
    assert cost_until(["a", "a", "b", "c"], MEMO, None) == 9.0
    assert cost_until(["a", "a", "b", "c"], MEMO, 2) == 5.0


def test_the_median_ranks_a_run_that_never_got_there_above_all():
    assert median_count([3, None, 5], 40) == 5
    assert median_count([3, None, None], 40) is None
    assert median_count([2, 4], 40) == 3
    assert shown(None, 40) == ">40" and shown(3.0, 40) == "3"


def test_both_sides_search_the_same_feasible_configs_and_the_ladder_ranks_them():
    spec, ctx, feasible = side.feasible_space(side.study("avx512", "64x128x96"))
    configs = ctx.space.decode(feasible)
    assert configs and all(c["engine"] == "avx512" for c in configs)
    assert bool(ctx.space.check(feasible).ok.all())
    scores, kept, _ = side.ladder_order(spec, ctx, feasible, 6)
    assert len(kept) == 6 and len(scores) == len(configs)
    assert scores[kept[0]] == np.nanmax(scores) and (np.diff(scores[kept]) <= 0).all()
    # the shipped study's ladder: its first rung's best, then a walk from the best measured
    assert spec.ladder[0].keep == 24 and spec.ladder[-1].refine == 24


def test_the_model_is_scored_against_every_measured_config_by_its_memo_key():
    spec, ctx, feasible = side.feasible_space(side.study("avx512", "64x128x96"))
    names = list(side.tuned_axes(spec, ctx)[0])
    scores, _, _ = side.ladder_order(spec, ctx, feasible, 1)
    keys = [",".join(str(side._plain(c[n])) for n in names) for c in ctx.space.decode(feasible)]
    # configs of distinct scores timed in the model's order and against it; a key of no
    # feasible config is left out
    _, distinct = np.unique(np.nan_to_num(scores, nan=-1.0), return_index=True)
    order = distinct[np.argsort(-scores[distinct])][:40]
    assert len(order) == 40
    agreeing = {keys[i]: side.Measured(1e-3 * (1 + rank), 0.1) for rank, i in enumerate(order)}
    against = {keys[i]: side.Measured(1e-3 * (40 - rank), 0.1) for rank, i in enumerate(order)}
    against["no,such,config"] = side.Measured(1.0, 0.1)
    assert side.model_agreement(agreeing, "avx512", "64x128x96").endswith(
        "40 measured configs: rank correlation 1.00 (Spearman)")
    assert "40 measured configs: rank correlation -1.00" in side.model_agreement(
        against, "avx512", "64x128x96")


@pytest.mark.parametrize("argv, message", [
    (["--shape", "4096x4096"], "--shape"),
    (["--strategies", "random_sample,annealing"], "unknown strategy 'annealing'"),
    (["--budget", "20"], "bayes_opt"),
    (["--seeds", "0"], "at least 1"),
])
def test_bad_input_is_refused_with_a_reason(argv, message, capsys):
    assert side.main(argv) == 2
    assert message in capsys.readouterr().err


def _kernel_tuners_compile(tmp_path: Path, source: str) -> Path:
    """The source built as Kernel Tuner's C backend builds it: a .cc file compiled with -c
    through the shim, then linked -shared."""
    from evaluators.hardware.amx_build import BASE_FLAGS, compiler

    shim = tmp_path / "cc.sh"
    shim.write_text(side.SHIM.format(cc=" ".join(compiler())))
    shim.chmod(0o755)
    flags = [f for f in BASE_FLAGS if f not in ("-shared", "-fPIC")]
    src = tmp_path / "kernel.cc"
    src.write_text(source)
    subprocess.run([str(shim), "-c", str(src), "-fPIC", *flags, "-o", str(tmp_path / "k.o")],
                   check=True, capture_output=True, text=True)
    subprocess.run([str(shim), str(tmp_path / "k.o"), "-fPIC", *flags, "-shared", "-o",
                    str(tmp_path / "k.so")], check=True, capture_output=True, text=True)
    return tmp_path / "k.so"


def test_the_source_kernel_tuner_gets_compiles_as_c_and_returns_its_time(tmp_path):
    from evaluators.hardware.amx_detect import vector_problem
    from evaluators.hardware.amx_source import kernel_source

    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    problem = vector_problem("int8-int32")
    if problem:
        pytest.skip(problem)
    m, k, n = 37, 200, 70  # tails on every side
    spec, ctx, feasible = side.feasible_space(side.study("avx512", f"{m}x{k}x{n}"))
    config = ctx.space.decode(feasible)[side.ladder_order(spec, ctx, feasible, 1)[1][0]]
    source = kernel_source(config, side.DTYPE, "row") + side.WRAPPER.format(
        name=side.KERNEL, M=m, N=n, K=k, ldb=n)
    assert 'extern "C"' in source  # Kernel Tuner then leaves it unwrapped: it is C
    lib = ctypes.CDLL(str(_kernel_tuners_compile(tmp_path, source)))
    call = getattr(lib, side.KERNEL)
    call.restype = ctypes.c_float  # as Kernel Tuner sets it
    call.argtypes = [ctypes.c_void_p] * 3  # Kernel Tuner passes typed pointers
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    c = np.full((m, n), -7, dtype=np.int32)
    ms = call(a.ctypes.data, b.ctypes.data, c.ctypes.data)
    assert ms > 0
    assert np.array_equal(c, a.astype(np.int64) @ b.astype(np.int64))
