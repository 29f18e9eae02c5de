"""The AMX family: generated kernels exact on shapes with tails (emulated tiles on any x86-64
CPU; the real engine where the CPU has AMX), build and product failures as results, one build
per source, measurements that never overlap, the refusal without AMX, the space's rules and the
model's ranking mechanisms."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from dse.core import Status, build_context
from evaluators.hardware import amx_build
from evaluators.hardware.amx import DEVICE, AmxEvaluator
from evaluators.hardware.amx_detect import HIDE_VARIABLE, amx_problem, cpu_flags
from evaluators.hardware.amx_kernel import run
from evaluators.hardware.amx_source import kernel_source
from evaluators.hardware.harness import MeasureSettings, Worker, measure

X86 = os.uname().machine == "x86_64" and "avx512f" in cpu_flags()
HAS_AMX = amx_problem() is None
if os.environ.get("CI") == "true" and "amx_tile" in cpu_flags():
    assert HAS_AMX, f"CI on a CPU with amx_tile must run the AMX tests: {amx_problem()}"
needs_x86 = pytest.mark.skipif(not X86, reason="the emulated tiles are compiled with x86-64 "
                               "intrinsics headers and -march=native (AVX-512 for prefetches)")
needs_amx = pytest.mark.skipif(not HAS_AMX, reason=f"no AMX here: {amx_problem()}")
VECTOR = {"avx512_vnni", "avx512_bf16"} <= cpu_flags()
needs_vector = pytest.mark.skipif(not VECTOR, reason="the AVX-512 kernels need avx512_vnni and "
                                  "avx512_bf16, which this CPU lacks")
VECTOR_VARIANTS = [
    dict(engine="avx512", grid_rows=4, grid_cols=2, split="n"),
    dict(engine="avx512", grid_rows=1, grid_cols=4, pack_b="block", prefetch=2),
    dict(engine="avx512", grid_rows=3, grid_cols=1, mc=96, block_order="a_block",
         micro_order="b_strip", k_unroll=1),
    dict(engine="avx512", grid_rows=2, grid_cols=3, nc=96, prefetch=0, threads=1),
    # a row-major B packed per block, int8's column sums taken as each block is laid out
    dict(engine="avx512", grid_rows=2, grid_cols=4, pack_b="block", kc=64),
]

BASE = dict(grid_rows=2, grid_cols=2, stream_buffers=1, k_unroll=2, mc=64, kc=128, nc=64,
            pack_a="yes", pack_b="gemm", block_order="b_block", micro_order="a_strip",
            load_hint="t0", prefetch=1, prefetch_c="yes", split="m", threads=2)
VARIANTS = [
    {},
    dict(grid_rows=1, grid_cols=4, stream_buffers=2, prefetch=2),
    dict(grid_rows=4, grid_cols=1, micro_order="b_strip", load_hint="t1"),
    dict(grid_rows=3, grid_cols=1, mc=96, k_unroll=4),
    dict(pack_b="block", block_order="a_block", micro_order="b_strip", prefetch_c="no"),
    dict(grid_rows=1, grid_cols=1, k_unroll=1, split="n", threads=1, prefetch=0),
    dict(grid_rows=2, grid_cols=1, stream_buffers=2, pack_b="block"),
    dict(grid_rows=1, grid_cols=3, nc=96, split="n"),
]
TAILS = [(1, 1, 1, 0), (17, 33, 65, 3), (100, 70, 200, 0), (130, 47, 300, 5)]


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Each test module builds into a cache of its own (shared by its tests)."""
    monkeypatch.setenv("DSE_AMX_CACHE", str(tmp_path_factory.getbasetemp() / "amx-cache"))


def _library(params: dict, dtype: str, b_layout: str, emulate: bool) -> str:
    built = amx_build.build(kernel_source(params, dtype, b_layout, emulate), emulate)
    assert built.library is not None, built.error
    return str(built.library)


def _exact_on_tails(emulate: bool, dtype: str, variants: list[dict] = VARIANTS) -> None:
    for index, variant in enumerate(variants):
        b_layout = ("row", "col")[index % 2]
        library = _library({**BASE, **variant}, dtype, b_layout, emulate)
        for M, N, K, pad in TAILS:
            out = run(library, dtype, M, N, K, seed=index, threads=2, pad=pad,
                      b_layout=b_layout, emulate=emulate, engine=variant.get("engine", "amx"))
            assert out.correct, (variant, b_layout, (M, N, K, pad), out.detail)


@needs_x86
@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_generated_kernels_are_exact_on_tails_emulated(dtype):
    _exact_on_tails(True, dtype)


@needs_amx
@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_generated_kernels_are_exact_on_tails_on_the_engine(dtype):
    _exact_on_tails(False, dtype)


@needs_vector
@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_avx512_kernels_are_exact_on_tails(dtype):
    """The small-M kernels run natively (VPDPBUSD on A + 128 with B's column sums taken off,
    VDPBF16PS), with or without AMX."""
    _exact_on_tails(False, dtype, VECTOR_VARIANTS)


@needs_vector
@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_dot_kernels_read_a_column_major_b_in_place_exactly(dtype):
    base = {**BASE, "engine": "avx512", "pack_b": "none", "kc": 4096, "prefetch": 2}
    for index, variant in enumerate([dict(grid_rows=2, grid_cols=4, mc=8, nc=64),
                                     dict(grid_rows=4, grid_cols=3, mc=16, nc=33, split="n")]):
        library = _library({**base, **variant}, dtype, "col", False)
        for M, N, K, pad in [*TAILS, (3, 5, 63, 0), (8, 100, 4100, 1)]:
            out = run(library, dtype, M, N, K, seed=index, threads=2, pad=pad, b_layout="col",
                      engine="avx512")
            assert out.correct, (variant, (M, N, K, pad), out.detail)


STREAM = {**BASE, "engine": "avx512", "pack_b": "stream", "grid_rows": 1, "grid_cols": 4,
          "split": "n", "prefetch": 0}


@needs_vector
@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_streaming_configs_read_a_row_major_b_in_place_exactly(dtype):
    """pack_b=stream: B re-laid out in registers a block of kc rows by nc columns at a time
    (one chunk of 64 columns included, and blocks past K), with or without AMX."""
    for index, variant in enumerate([dict(kc=64, nc=64, threads=2), dict(kc=256, nc=256),
                                     dict(kc=4096, nc=512, threads=1)]):
        library = _library({**STREAM, **variant}, dtype, "row", False)
        for M, N, K, pad in [*TAILS, (5, 200, 130, 2), (9, 1000, 700, 0)]:
            out = run(library, dtype, M, N, K, seed=index, threads=2, pad=pad,
                      engine="avx512")
            assert out.correct, (variant, (M, N, K, pad), out.detail)


def test_streaming_configs_are_whole_rows_of_a_on_a_row_major_b():
    row, col = _context("8x520x100"), _context("8x520x100", b_layout="col")
    good = {**STREAM, "mc": 8, "kc": 256, "nc": 128}
    # AMX tiles on the streaming buffer: 8 rows (not a whole tile of A), in both orders
    tiles = [{**good, "engine": "amx", "block_order": order} for order in ("b_block", "a_block")]
    batch = row.space.encode([row.space.resolve(c) for c in [good, *tiles]])
    assert row.space.check(batch).ok.all()
    for space, change, why in [(row.space, {"mc": 4}, "mc the whole M (8, got 4)"),
                               (row.space, {"block_order": "a_block"},
                                "on AVX-512, block_order=b_block"),
                               (row.space, {"grid_cols": 2, "nc": 64}, "a 1x4 grid"),
                               (row.space, {"split": "m"}, "split=n"),
                               (col.space, {}, "B row-major (got col)")]:
        batch = space.encode([space.resolve({**good, **change})])
        assert not space.check(batch).ok.any()
        assert why in space.explain(batch, 0), space.explain(batch, 0)


@needs_vector
def test_an_avx512_only_evaluator_measures_those_configs_and_refuses_tiles():
    ctx = _context("8x520x100")
    evaluator = AmxEvaluator(engine="avx512", max_repeats=3)
    vector = ctx.space.resolve({**BASE, "engine": "avx512", "grid_rows": 4, "mc": 8})
    tiles = ctx.space.resolve({**BASE, "mc": 32})
    try:
        measured, refused = evaluator.evaluate(ctx.space.encode([vector, tiles]), ctx)
    finally:
        evaluator.close()
    assert evaluator.unavailable() is None
    assert measured.status is Status.OK and measured.metrics["tops"] > 0, measured.reason
    assert refused.status is Status.FAILED and "engine=avx512 configs only" in refused.reason


@needs_x86
def test_a_in_place_and_leading_dimensions():
    params = {**BASE, "pack_a": "no"}
    library = _library(params, "int8-int32", "row", True)
    out = run(library, "int8-int32", 64, 48, 256, seed=3, threads=2, pad=7, emulate=True)
    assert out.correct, out.detail


@needs_vector
def test_an_avx512_kernel_reading_a_in_place():
    """The AVX-512 micro-kernel on A read in place, its rows' strides honoured (int8: A + 128
    at each broadcast, B's column sums taken off)."""
    params = {**BASE, **VECTOR_VARIANTS[0], "pack_a": "no"}
    library = _library(params, "int8-int32", "row", False)
    out = run(library, "int8-int32", 64, 48, 256, seed=3, threads=2, pad=7, engine="avx512")
    assert out.correct, out.detail


@needs_x86
def test_a_wrong_product_is_caught():
    """A kernel that skips one tile multiply of its loop computes a wrong product: the check
    sees it (int8 exactly, bf16 beyond the tolerance)."""
    for dtype, tdp in (("int8-int32", "TDP_INT8"), ("bf16-fp32", "TDP_BF16")):
        broken = _skipping_one_multiply(kernel_source(BASE, dtype, "row", emulate=True), tdp)
        built = amx_build.build(broken, emulate=True)
        out = run(str(built.library), dtype, 40, 40, 3 * 64 + 5, threads=1, emulate=True)
        assert not out.correct
        assert ("differ" if dtype == "int8-int32" else "largest error") in out.detail


def _skipping_one_multiply(source: str, tdp: str) -> str:
    broken = source.replace(f"    {tdp}(0, ", "    (void)(0, ", 1)
    assert broken != source
    return broken


def _context(shape: str = "48x300x40", dtype: str = "int8-int32", b_layout: str = "row"):
    return build_context("cpu-amx", dtype, shape, b_layout)


@needs_x86
def test_compile_errors_and_wrong_products_are_failed_results_with_reasons():
    ctx = _context()
    evaluator = AmxEvaluator(emulate=True, max_repeats=3)
    params = ctx.space.resolve({**BASE, "mc": 48, "nc": 64, "kc": 128, "grid_rows": 1})
    good = kernel_source(params, "int8-int32", "row", emulate=True)
    syntax = good.replace("int dse_gemm(", "int dse_gemm(((", 1)
    assert syntax != good
    wrong = _skipping_one_multiply(good, "TDP_INT8")
    try:
        results = evaluator.measure_sources([params] * 3, [good, syntax, wrong], ctx)
    finally:
        evaluator.close()
    ok, compile_error, wrong_product = results
    assert ok.status is Status.OK and ok.metrics["tops"] > 0 and ok.metrics["emulated"]
    assert compile_error.status is Status.FAILED
    assert compile_error.reason.startswith("compile error:") and "error" in compile_error.reason
    assert wrong_product.status is Status.FAILED
    assert wrong_product.reason.startswith("wrong product")


@needs_x86
def test_a_config_compiles_once(tmp_path, monkeypatch):
    """The compiler runs once per source: a second build, or a racing one, finds the library."""
    log = tmp_path / "compiles.log"
    wrapper = tmp_path / "cc.sh"
    wrapper.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec cc "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    monkeypatch.setenv("DSE_AMX_CACHE", str(tmp_path / "cache"))
    source = kernel_source(BASE, "int8-int32", "row", emulate=True)
    first = amx_build.build(source, emulate=True)
    second = amx_build.build(source, emulate=True)
    assert not first.cached and first.seconds > 0
    assert second.cached and second.library == first.library and second.seconds == 0
    assert log.read_text().count("run") == 1
    other = kernel_source({**BASE, "k_unroll": 4}, "int8-int32", "row", emulate=True)
    assert amx_build.build(other, emulate=True).library != first.library
    assert log.read_text().count("run") == 2
    assert len(list((tmp_path / "cache").glob("*.so"))) == 2


@needs_x86
def test_two_measurements_never_overlap(tmp_path):
    """Two evaluators measuring at once (two threads, two worker processes) take turns: the
    device lock serialises their timed runs."""
    library = _library({**BASE, "threads": 1}, "int8-int32", "row", True)
    job = {"library_path": library, "dtype": "int8-int32", "M": 96, "N": 96, "K": 512,
           "threads": 1, "emulate": True, "log": str(tmp_path / "runs.log")}
    settings = MeasureSettings(0, 3, 3, 1.0, 60.0)

    def measure_one() -> None:
        worker = Worker()
        try:
            measure(worker, "tests.hw_backends:logged_amx_run", job, settings, DEVICE)
        finally:
            worker.close()

    threads = [threading.Thread(target=measure_one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = sorted(tuple(map(float, line.split())) for line in
                   (tmp_path / "runs.log").read_text().splitlines())
    assert len(spans) == 6
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False))


@needs_amx
def test_the_probe_writes_a_target_this_machine_can_use(tmp_path, capsys):
    """``dse amx probe`` measures the engine and writes the shipped target with its figures."""
    import tomllib

    from dse.cli import main
    from search_spaces.amx_gemm.target import amx_target_from_dict

    out = tmp_path / "here.toml"
    assert main(["amx", "probe", "--out", str(out), "--repeats", "2"]) == 0
    printed = capsys.readouterr().out
    assert "peak int8-int32" in printed and "rows read in runs of 128 bytes" in printed
    target = amx_target_from_dict(tomllib.loads(out.read_text()), str(out))
    assert target.engine.cores >= 1 and target.engine.clock_hz > 0
    # the knee is this machine's: a number the probe measured, not the shipped file's
    assert target.model.run_knee_bytes >= 0
    assert "run_knee_bytes = 150.0" not in out.read_text()
    assert main(["amx", "probe", "--out", str(out)]) == 2  # exists: refused without --force


def test_a_cpu_without_amx_is_refused_by_name(monkeypatch, capsys):
    from dse.cli import main

    monkeypatch.setenv(HIDE_VARIABLE, "1")
    assert "hidden by DSE_AMX_HIDE" in amx_problem()
    assert "DSE_AMX_HIDE" in AmxEvaluator().unavailable()
    assert main(["amx", "probe", "--out", "never.toml"]) == 2
    err = capsys.readouterr().err
    assert "needs AMX" in err and "Traceback" not in err
    ctx = _context()
    results = AmxEvaluator().evaluate(ctx.space.encode([ctx.space.resolve(BASE)]), ctx)
    assert results[0].status is Status.FAILED and "DSE_AMX_HIDE" in results[0].reason


def test_the_space_rules_say_why():
    ctx = _context("4096x4096x4096")
    space = ctx.space
    cases = {
        "tile_registers": {"grid_rows": 2, "grid_cols": 3},
        "whole_grids": {"grid_rows": 3, "grid_cols": 1, "mc": 64},
        "kept_block_in_l2": {"kc": 4096, "nc": 4096},
        "two_dimensional_split": {"split": "mn"},
        "threads": {"threads": space.target.engine.cores + 1},
    }
    names = [rule.name for rule in space.constraints]
    for rule, change in cases.items():
        batch = space.encode([space.resolve({**BASE, **change})])
        feasibility = space.check(batch)
        assert not feasibility.ok[0], rule
        assert names[feasibility.first_failed[0]] == rule
        assert space.explain(batch, 0)
    tails = build_context("cpu-amx", "int8-int32", "100x64x64", "row").space
    batch = tails.encode([tails.resolve({**BASE, "pack_a": "no"})])
    assert "pack A" in tails.explain(batch, 0)
    decode = build_context("cpu-amx", "int8-int32", "1x4096x4096", "col").space
    one_row = {**BASE, "grid_rows": 1, "mc": 1}
    batch = decode.encode([decode.resolve({**one_row, "engine": "avx512"}),
                           decode.resolve(one_row),
                           decode.resolve({**one_row, "engine": "avx512", "load_hint": "t1"})])
    feasibility = decode.check(batch)
    assert feasibility.ok.tolist() == [True, False, False]
    assert "multiples of the grid's 16 rows" in decode.explain(batch, 1)
    assert "no tiles" in decode.explain(batch, 2)
    in_place = {**one_row, "engine": "avx512", "pack_b": "none", "kc": 4096, "nc": 4}
    batch = decode.encode([decode.resolve(in_place),
                           decode.resolve({**in_place, "engine": "amx", "mc": 16}),
                           decode.resolve({**in_place, "kc": 1024})])
    assert decode.check(batch).ok.tolist() == [True, False, False]
    assert "needs engine=avx512" in decode.explain(batch, 1)
    row_b = build_context("cpu-amx", "int8-int32", "1x4096x4096", "row").space
    assert "column-major" in row_b.explain(row_b.encode([row_b.resolve(in_place)]), 0)


def test_the_space_enumerates_only_what_the_study_frees():
    space = _context("4096x4096x4096").space
    fixed_rest = sum(size for _, size in space.chunks())
    freed = sum(size for _, size in space.chunks(free=["pack_b", "split"]))
    assert freed == 12 * fixed_rest  # pack_b: gemm, block, none, stream; split: m, n, mn
    encoding = space.optuna_encoding({}, ["pack_b"], {})
    assert {"mc_index", "grid_rows_index", "pack_b"} <= set(encoding.distributions())
    config = encoding.decode({"mc_index": 0, "grid_rows_index": 1, "pack_b": "block"})
    assert config["mc"] == space.values("mc")[0] and config["grid_rows"] == 2
    assert config["pack_b"] == "block" and config["threads"] == space.target.engine.cores


@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_the_model_streams_b_for_decode_and_tiles_it_for_prefill(dtype):
    """A streaming kernel reads a row-major B once; the tile kernels re-lay it out first (read,
    written, read again), which costs more than a decode GEMM's multiply-adds, and less than a
    prefill's, where the tiles' rate wins."""
    from evaluators.analytical.amx_gemm import score

    def tops(shape: str, **config) -> float:
        ctx = _context(shape, dtype)
        batch = ctx.space.encode([ctx.space.resolve({**BASE, **config})])
        return float(score(batch, ctx.target, ctx.workload)["tops"][0])

    for M, stream_wins in ((1, True), (8, True), (512, False)):
        shape = f"{M}x4096x4096"
        streamed = tops(shape, **{**STREAM, "mc": M, "kc": 256, "nc": 256})
        tiles = tops(shape, grid_rows=2, grid_cols=2, mc=max(32, min(M, 256)), kc=1024,
                     nc=256, pack_b="block", split="n")
        assert (streamed > tiles) == stream_wins, (M, streamed, tiles)
    # at 32 rows the AVX-512 rows' multiply-adds bound the streaming kernel; AMX tiles on its
    # buffer stay bound by reading B
    rows = {**STREAM, "mc": 32, "kc": 256, "nc": 256}
    assert tops("32x4096x4096", **{**rows, "engine": "amx", "block_order": "a_block"}) > \
        tops("32x4096x4096", **rows)


@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_the_model_charges_the_streaming_kernels_short_runs_of_b(dtype):
    """A streaming kernel reads each row of B in runs as wide as the chunks it lays out
    together; from beyond L2 each run starts anew, so of two buffers of one size (kc x nc) the
    wider reads B faster (measured: 7-8 GB/s in runs of 64 bytes, 23-25 from 256 on): against
    a target that leaves the runs' cost out (run_knee_bytes = 0), it slows the narrow buffer
    by far more than the wide one."""
    import dataclasses

    from evaluators.analytical.amx_gemm import run_share, score

    ctx = _context("8x4096x28672", dtype)

    def tops(target, **config) -> float:
        batch = ctx.space.encode([ctx.space.resolve({**STREAM, "engine": "amx", "mc": 8,
                                                     "block_order": "a_block", **config})])
        return float(score(batch, target, ctx.workload)["tops"][0])

    kept = 16384 // ctx.workload.dtype.in_bytes  # kc x nc of a 16 KiB buffer
    narrow, wide = dict(kc=kept // 64, nc=64), dict(kc=kept // 256, nc=256)
    assert tops(ctx.target, **wide) > tops(ctx.target, **narrow)
    without = dataclasses.replace(ctx.target, model=dataclasses.replace(ctx.target.model,
                                                                        run_knee_bytes=0.0))
    cost = {name: tops(without, **config) / tops(ctx.target, **config)
            for name, config in (("narrow", narrow), ("wide", wide))}
    assert cost["narrow"] > 1.25 * cost["wide"] and cost["wide"] > 1.0, cost
    assert run_share(np.array([150.0, 1e9]), 150.0) == pytest.approx([2**-0.5, 1.0])
    assert run_share(np.array([64.0]), 0.0)[0] == 1.0


def test_the_models_blocks_share_l2():
    """A pair of blocks (A's mc x kc, B's kc x nc) shares L2. Measured at 4096^3 int8 on a Xeon
    with a 2 MiB L2 (docs/families/amx.md): with A's block filling L2 (mc 1024, kc 2048), the
    A strip held across B's strips ran 3.6 TOPS with nc 512 and 2.7 with nc 64 (its first use
    from beyond L2, then reused from L2 for each 32 columns), and the B strip held while A's
    whole block streamed past it 2.3, whatever nc; with blocks a quarter that size, which fit
    together, the model charges no order and no nc for it."""
    from evaluators.analytical.amx_gemm import score

    ctx = _context("4096x4096x4096")
    space = ctx.space

    def tops(**change) -> float:
        batch = space.encode([space.resolve({**BASE, "kc": 2048, "block_order": "a_block",
                                             **change})])
        assert space.check(batch).ok[0], change
        return float(score(batch, ctx.target, ctx.workload)["tops"][0])

    def grids(rows: int) -> int:  # whole 2x2 grids of 32 rows or columns
        return max(32, rows // 32 * 32)

    filling = grids(ctx.target.caches.l2_bytes // 2048)  # A's block fills L2
    wide = tops(mc=filling, nc=grids(filling // 2), micro_order="a_strip")
    assert wide > 1.2 * tops(mc=filling, nc=64, micro_order="a_strip")
    assert wide > 1.3 * tops(mc=filling, nc=grids(filling // 2), micro_order="b_strip")
    quarter = grids(filling // 4)
    fitting = [tops(mc=quarter, nc=nc, micro_order=order)
               for nc in (64, grids(quarter // 2)) for order in ("a_strip", "b_strip")]
    assert max(fitting) == pytest.approx(min(fitting), rel=0.01), fitting


def test_the_model_prefers_what_the_engine_rewards():
    """Mechanisms the measurements on these machines show (docs/families/amx.md): a 2x2 grid
    loads one tile per multiply and beats 1x1's two; fewer K blocks re-read C less; C lines
    prefetched beat C lines waited for; a block that spills L2 costs."""
    from evaluators.analytical.amx_gemm import score

    ctx = _context("4096x4096x4096")
    space = ctx.space

    def tops(**change):
        batch = space.encode([space.resolve({**BASE, "mc": 256, "kc": 1024, "nc": 256,
                                             **change})])
        return float(score(batch, ctx.target, ctx.workload)["tops"][0])

    assert tops() > tops(grid_rows=1, grid_cols=1)
    assert tops(kc=2048, nc=128) > tops(kc=256, nc=128)
    assert tops(prefetch_c="yes") > tops(prefetch_c="no")
    assert tops(threads=2) > tops(threads=1)
    metrics = score(space.encode([space.resolve({**BASE, "mc": 256, "kc": 1024, "nc": 256})]),
                    ctx.target, ctx.workload)
    assert metrics["bound"][0] in ("compute", "memory")
    assert np.isclose(metrics["t_comp_s"][0],
                      4096**3 / (16 * 16 * 64) * 16 / ctx.target.engine.clock_hz / 2)


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_the_shipped_studies_rank_the_space_then_measure(dtype):
    from pathlib import Path

    from dse.study.spec import load_study

    spec = load_study(Path(__file__).parents[1] / "studies" / f"amx_{dtype}.yaml")
    assert spec.name == f"amx_{dtype}" and spec.workloads[0].shape == "4096x4096x4096"
    assert [rung.evaluator.name for rung in spec.ladder] == ["analytical", "amx"]
    assert spec.ladder[0].keep <= 48 and spec.ladder[1].confirm == 4
    mix = load_study(Path(__file__).parents[1] / "studies" / (
        "deploy_llama3_8b_amx.yaml" if dtype == "int8" else "deploy_llama3_8b_amx_bf16.yaml"))
    assert len(mix.workloads) == 19 and {w.M for w in mix.workloads} == {1, 8, 32, 512}
    assert mix.workloads[0].dtype.name == spec.workloads[0].dtype.name


@needs_x86
def test_a_ladder_study_runs_end_to_end_emulated(tmp_path):
    """The shipped study's ladder, shrunk: the model ranks the space, the kept configs are
    built and measured (emulated tiles), the store holds both rungs."""
    from dse import load_trials
    from dse.study.runner import run_study
    from dse.study.spec import load_study

    text = """
name: amx-tiny
target: cpu-amx
workload: {shape: 70x90x200, dtype: bf16-fp32, b_layout: col}
space: {free: [pack_b, micro_order]}
ladder:
  - {evaluator: analytical, keep: 4, select: top}
  - {evaluator: amx, options: {emulate: true, max_repeats: 3}}
objectives: [tops]
"""
    (tmp_path / "amx-tiny.yaml").write_text(text)
    spec = load_study(tmp_path / "amx-tiny.yaml")
    summary = run_study(spec, str(tmp_path / "s.db"))
    assert summary.status == "finished"
    frame = load_trials(str(tmp_path / "s.db"), "amx-tiny")
    measured = frame[frame["evaluator"] == "amx"]
    assert len(measured) == 4 and (measured["status"] == "ok").all()
    started = time.time()
    assert run_study(spec, str(tmp_path / "s.db")).status == "finished"  # served, not re-run
    assert time.time() - started < 30
    # the dashboard's page of a measured config shows its list of times
    from dse.dashboard import create_app

    client = create_app(str(tmp_path / "s.db")).test_client()
    page = client.get(f"/config/{int(measured['number'].iloc[0])}/amx-tiny")
    assert page.status_code == 200 and "times_s" in page.text
