"""``dse dispatch build``: a dispatch table's AMX kernels as one shared library, called through
its C ABI from Python (ctypes) and from a C program compiled here: tails, leading dimensions,
threads, both dtypes, bad arguments refused with C untouched. The AMX kernels run emulated on a
CPU without AMX (and natively where it has AMX); the AVX-512 ones natively; on a CPU without
AVX-512 VNNI and BF16, and wherever ``DSE_GEMM_ISA=portable`` caps the engine, the portable
kernels serve every shape: the ABI's tests run on every x86-64 CPU."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from dse.cli import main
from evaluators.hardware.amx_detect import amx_problem, cpu_flags
from evaluators.hardware.amx_kernel import from_bf16, operands

AVX512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd", "avx512_vnni",
          "avx512_bf16"} <= cpu_flags()
needs_avx512 = pytest.mark.skipif(
    not AVX512, reason="the library's tuned kernels need AVX-512 VNNI and BF16 (this CPU runs "
                       "its portable kernels)")
EMULATE = amx_problem() is not None
# the engine the library picks here: AMX (emulated where the CPU lacks it: AVX-512 is enough),
# else AVX-512, else the portable kernels
ENGINE = (1 if amx_problem() is None or EMULATE else 0) if AVX512 else -1

TABLE = {
    "format": "dse-dispatch/1", "study": "lib-test", "target": "cpu-amx", "evaluator": "amx",
    "space": "amx_gemm", "dtype": "int8-int32", "b_layout": "row",
    "kernels": [
        {"id": 0, "params": {"grid_rows": 2, "grid_cols": 2, "mc": 64, "kc": 256, "nc": 64}},
        {"id": 1, "params": {"grid_rows": 4, "grid_cols": 2, "mc": 8, "kc": 256, "nc": 64,
                             "engine": "avx512", "split": "n"}},
        # B packed per block, a grid of 3 tile columns (B packed once must hold whole grids)
        {"id": 2, "params": {"grid_rows": 1, "grid_cols": 3, "mc": 32, "kc": 128, "nc": 48,
                             "pack_b": "block"}},
        # the streaming kernel (B packed once: it streams the AMX kernels' VNNI strips)
        {"id": 3, "params": {"grid_rows": 1, "grid_cols": 4, "mc": 1, "kc": 64, "nc": 128,
                             "engine": "avx512", "pack_b": "stream", "split": "n"}},
        # AMX tiles on the streaming layout (B packed once: the AVX-512 streaming of it)
        {"id": 4, "params": {"grid_rows": 1, "grid_cols": 4, "mc": 1, "kc": 64, "nc": 128,
                             "pack_b": "stream", "split": "n"}}],
    "rules": [{"k": 256, "n": 128, "m_min": 1, "m_max": 8, "kernel": 1},
              {"k": 256, "n": 128, "m_min": 9, "m_max": None, "kernel": 0},
              {"k": 65, "n": 33, "m_min": 1, "m_max": None, "kernel": 2},
              {"k": 300, "n": 200, "m_min": 1, "m_max": None, "kernel": 3},
              {"k": 130, "n": 70, "m_min": 1, "m_max": None, "kernel": 4}],
    "fallback": 0,
}
SHAPES = [(1, 128, 256, 0), (8, 128, 256, 3), (40, 128, 256, 0), (17, 33, 65, 2), (1, 1, 1, 0),
          (1, 200, 300, 0), (6, 200, 300, 1), (20, 70, 130, 2)]
C_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "dse_gemm.h"
int main(void) {
    enum { M = 37, N = 45, K = 70, LDA = 71, LDB = 46, LDC = 47 };
    static int8_t A[M * LDA], B[K * LDB];
    static int32_t C[M * LDC];
    for (int i = 0; i < M * LDA; i++) A[i] = (int8_t)(i * 7 % 251 - 125);
    for (int i = 0; i < K * LDB; i++) B[i] = (int8_t)(i * 13 % 241 - 120);
    dse_set_threads(2);
    if (dse_gemm_s8s8s32(M, N, K, A, LDA, B, LDB, C, LDC) != 0) return 2;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int32_t want = 0;
            for (int k = 0; k < K; k++) want += A[m * LDA + k] * B[k * LDB + n];
            if (C[m * LDC + n] != want) { printf("wrong at %d %d\n", m, n); return 1; }
        }
    if (dse_gemm_s8s8s32(0, N, K, A, LDA, B, LDB, C, LDC) == 0) return 3;
    /* the same weight packed once: the same product */
    static int32_t again[M * LDC];
    dse_packed_b *packed = dse_pack_b_s8(K, N, B, LDB);
    if (!packed || dse_gemm_s8s8s32_packed(M, packed, A, LDA, again, LDC) != 0) return 4;
    dse_free_packed_b(packed);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++)
            if (again[m * LDC + n] != C[m * LDC + n]) { printf("packed wrong\n"); return 5; }
    printf("ok engine=%d\n", dse_gemm_engine());
    return 0;
}
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lib")
    (folder / "table.json").write_text(json.dumps(TABLE))
    argv = ["dispatch", "build", str(folder / "table.json"), "--out",
            str(folder / "libdsegemm.so")]
    assert main([*argv, *(["--emulate"] if EMULATE else [])]) == 0
    return folder


def load_capped(path, isa: str) -> ctypes.CDLL:
    """The library at ``path`` loaded anew (a copy: its own state) with ``DSE_GEMM_ISA=isa``
    read by its first call."""
    copy = path.with_name(f"{path.stem}-{isa}.so")
    shutil.copy(path, copy)
    lib = ctypes.CDLL(str(copy))
    os.environ["DSE_GEMM_ISA"] = isa
    try:
        lib.dse_gemm_engine()
    finally:
        del os.environ["DSE_GEMM_ISA"]
    return lib


@pytest.fixture(scope="module", params=["as-built", "portable"])
def loaded(library, request):
    """The library as this CPU runs it, and capped to its portable kernels."""
    path = library / "libdsegemm.so"
    if request.param == "portable":
        return load_capped(path, "portable"), -1
    return ctypes.CDLL(str(path)), ENGINE


def _gemm(lib: ctypes.CDLL, dtype: str):
    fn = lib.dse_gemm_s8s8s32 if dtype == "int8-int32" else lib.dse_gemm_bf16bf16f32
    fn.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p, ctypes.c_int64] * 3
    return fn


# every tail of the portable kernels' row groups (4), column tiles (16), int8's pairs of K rows,
# blocks of K (256 int8, 128 bf16), tasks of 128 rows and 256 columns (a task of a few rows of A
# over many columns: each row of B laid out across many panels)
PORTABLE_SHAPES = [(1, 1, 1, 0), (1, 5, 3, 0), (3, 65, 9, 2), (5, 127, 1030, 3),
                   (7, 999, 100, 0), (9, 33, 258, 5), (300, 70, 9, 1), (130, 300, 257, 2),
                   (1, 2100, 70, 1), (3, 1100, 131, 0), (4, 1600, 65, 2)]


@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_every_shape_is_served_exactly(loaded, dtype):
    lib, engine = loaded
    assert lib.dse_gemm_engine() == engine
    fn = _gemm(lib, dtype)
    lib.dse_gemm_kernel.argtypes = [ctypes.c_int64] * 3
    kernels = [1, 1, 0, 2, 0, 3, 3, 4]  # without AMX the AVX-512 ones, 1 and 3; others stream
    assert [lib.dse_gemm_kernel(M, N, K) for M, N, K, _ in SHAPES] == \
        (kernels if engine == 1 else [-4] * len(SHAPES) if engine < 0
         else [k if k in (1, 3) else -1 for k in kernels])
    for threads in (1, 2):
        lib.dse_set_threads(threads)
        for M, N, K, pad in SHAPES + (PORTABLE_SHAPES if engine < 0 else []):
            a, b, c, reference = operands(dtype, M, N, K, 5, pad, "row")
            c.fill(-7)
            assert fn(M, N, K, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1],
                      c.ctypes.data, c.shape[1]) == 0
            error = np.abs(c[:, :N] - reference).max()
            assert error <= (0 if dtype == "int8-int32" else 1e-5 * K), (M, N, K, threads)
            assert (c[:, N:] == -7).all()  # past N, within ldc: not written


def assert_exact(fn, dtype: str, shapes, seed: int) -> None:
    """A kernel taking its threads last (``M, N, K, A, lda, B, ldb, C, ldc, threads``) on every
    shape (M, N, K, padding of the leading dimensions) with one and two threads: int8 exact,
    bf16 within 1e-5 K, nothing past N written."""
    for threads in (1, 2):
        for M, N, K, pad in shapes:
            a, b, c, reference = operands(dtype, M, N, K, seed, pad, "row")
            c.fill(-7)
            assert fn(M, N, K, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1],
                      c.ctypes.data, c.shape[1], threads) == 0
            error = np.abs(c[:, :N] - reference).max()
            assert error <= (0 if dtype == "int8-int32" else 1e-5 * K), (M, N, K, threads)
            assert (c[:, N:] == -7).all()


def test_the_portable_kernels_plain_c_micro_kernels_are_exact(tmp_path):
    # what a CPU without AVX2 runs (the library's portable kernels elsewhere take AVX2's)
    from evaluators.hardware.amx_build import LIBRARY_PORTABLE_FLAGS, compiler
    from evaluators.hardware.amx_portable import portable_source

    (tmp_path / "portable.c").write_text(portable_source())
    subprocess.run([*compiler(), *LIBRARY_PORTABLE_FLAGS, "-DAVX2_ALLOWED=0", "-shared",
                    str(tmp_path / "portable.c"), "-o", str(tmp_path / "portable.so")],
                   check=True)
    lib = ctypes.CDLL(str(tmp_path / "portable.so"))
    for dtype, fn in (("int8-int32", lib.dse_portable_s8s8s32),
                      ("bf16-fp32", lib.dse_portable_bf16bf16f32)):
        fn.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p, ctypes.c_int64] * 3 + [
            ctypes.c_int]
        assert_exact(fn, dtype, PORTABLE_SHAPES, seed=9)


def _packed_api(lib: ctypes.CDLL, dtype: str):
    """(pack, gemm on a packed B) of ``dtype``'s packed-B calls, typed; ``dse_free_packed_b``
    typed too."""
    short, suffix = ("s8", "s8s8s32") if dtype == "int8-int32" else ("bf16", "bf16bf16f32")
    pack, gemm = getattr(lib, f"dse_pack_b_{short}"), getattr(lib, f"dse_gemm_{suffix}_packed")
    pack.restype = ctypes.c_void_p
    pack.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64]
    gemm.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                     ctypes.c_void_p, ctypes.c_int64]
    lib.dse_free_packed_b.argtypes = [ctypes.c_void_p]
    return pack, gemm


def _values(dtype: str, x: np.ndarray) -> np.ndarray:
    return (x if dtype == "int8-int32" else from_bf16(x)).astype(np.float64)


def check_packed_b(lib: ctypes.CDLL, dtype: str, shapes) -> None:
    """B packed once serves many calls exactly (B itself overwritten after packing), on every
    leading dimension and thread count; bad arguments are refused with C untouched."""
    pack, gemm = _packed_api(lib, dtype)
    for threads in (1, 2):
        lib.dse_set_threads(threads)
        for M, N, K, pad in shapes:
            weight = operands(dtype, 1, N, K, 3, pad, "row")[1]
            b = weight.copy()  # operands are drawn once per process
            handle = pack(K, N, b.ctypes.data, b.shape[1])
            assert handle
            b.fill(0)
            for seed, rows in ((5, M), (6, max(1, M // 2))):  # two calls on one packed B
                a, _, c, _ = operands(dtype, rows, N, K, seed, pad, "row")
                reference = _values(dtype, a)[:, :K] @ _values(dtype, weight)[:, :N]
                c.fill(-7)
                assert gemm(rows, handle, a.ctypes.data, a.shape[1], c.ctypes.data,
                            c.shape[1]) == 0
                error = np.abs(c[:, :N] - reference).max()
                assert error <= (0 if dtype == "int8-int32" else 1e-5 * K), (rows, N, K)
                assert (c[:, N:] == -7).all()
            lib.dse_free_packed_b(handle)
    a, b, c, _ = operands(dtype, 4, 4, 4, 5, 0, "row")
    assert not pack(4, 4, b.ctypes.data, 3) and not pack(0, 4, b.ctypes.data, 4)  # ldb < N
    handle = pack(4, 4, b.ctypes.data, 4)
    other = _packed_api(lib, "bf16-fp32" if dtype == "int8-int32" else "int8-int32")[0]
    foreign = other(4, 4, b.ctypes.data, 4)  # packed for the other dtype
    for args in [(0, handle, a.ctypes.data, 4, c.ctypes.data, 4),
                 (4, handle, a.ctypes.data, 3, c.ctypes.data, 4),
                 (4, handle, a.ctypes.data, 4, c.ctypes.data, 3),
                 (4, None, a.ctypes.data, 4, c.ctypes.data, 4),
                 (4, foreign, a.ctypes.data, 4, c.ctypes.data, 4)]:
        c.fill(-7)
        assert gemm(*args) != 0 and (c == -7).all()
    lib.dse_free_packed_b(handle)
    lib.dse_free_packed_b(foreign)
    lib.dse_free_packed_b(None)


@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_a_b_packed_once_serves_many_calls(loaded, dtype):
    check_packed_b(loaded[0], dtype, SHAPES)


def test_bad_arguments_are_refused_and_c_untouched(loaded):
    fn = _gemm(loaded[0], "int8-int32")
    a, b, c, _ = operands("int8-int32", 4, 4, 4, 5, 0, "row")
    cases = [(0, 4, 4, a.ctypes.data, 4, b.ctypes.data, 4, c.ctypes.data, 4),
             (4, 4, 4, a.ctypes.data, 3, b.ctypes.data, 4, c.ctypes.data, 4),
             (4, 4, 4, a.ctypes.data, 4, b.ctypes.data, 4, c.ctypes.data, 2),
             (4, 4, 4, None, 4, b.ctypes.data, 4, c.ctypes.data, 4)]
    for args in cases:
        c.fill(-7)
        assert fn(*args) != 0 and (c == -7).all()


def test_a_c_program_links_the_library(library, tmp_path):
    (tmp_path / "main.c").write_text(C_PROGRAM)
    subprocess.run(["cc", "-O1", str(tmp_path / "main.c"), f"-I{library}", f"-L{library}",
                    "-ldsegemm", f"-Wl,-rpath,{library}", "-o", str(tmp_path / "main")],
                   check=True)
    capped = {"": ENGINE, "portable": -1, "avx512": min(ENGINE, 0), "amx": ENGINE,
              "sse2": ENGINE}
    for isa, engine in capped.items():
        done = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True,
                              env={**os.environ, "DSE_GEMM_ISA": isa})
        assert done.returncode == 0 and done.stdout.startswith("ok"), done.stdout + done.stderr
        assert int(done.stdout.strip().split("=")[1]) == engine, isa
        # a value it does not know is named, and ignored
        assert ("DSE_GEMM_ISA=sse2 is none of amx, avx512, portable" in done.stderr) == \
            (isa == "sse2")


def test_a_table_of_a_family_without_a_builder_is_refused(tmp_path, capsys):
    (tmp_path / "t.json").write_text(json.dumps({**TABLE, "space": "xdna_gemm"}))
    assert main(["dispatch", "build", str(tmp_path / "t.json"), "--out",
                 str(tmp_path / "x.so")]) == 2
    err = capsys.readouterr().err
    assert "builds no library" in err and "amx_gemm" in err and "Traceback" not in err


def test_a_kernel_that_needs_a_column_major_b_is_refused(tmp_path, capsys):
    dot = {"grid_rows": 1, "grid_cols": 4, "mc": 1, "kc": 4096, "nc": 64, "engine": "avx512",
           "pack_b": "none"}
    (tmp_path / "t.json").write_text(json.dumps({**TABLE, "kernels": [{"id": 0, "params": dot}],
                                                 "rules": []}))
    assert main(["dispatch", "build", str(tmp_path / "t.json"), "--out",
                 str(tmp_path / "x.so")]) == 2
    err = capsys.readouterr().err
    assert "pack_b=none" in err and "row-major" in err and not (tmp_path / "x.so").exists()


# The streaming kernels (small M, B row-major read in place) and the dispatch of a CPU without
# AMX: every tail of M (row groups of 4), N (64-column chunks), K (4 int8 or 2 bf16 rows a group,
# blocks of kb rows), leading dimensions longer than rows, one and two threads.
STREAM_SHAPES = [(1, 1, 1, 0), (1, 5, 3, 0), (2, 64, 4, 1), (3, 65, 9, 2), (4, 130, 17, 0),
                 (5, 127, 1030, 3), (7, 999, 100, 0), (9, 33, 258, 5), (300, 70, 9, 1)]


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    from evaluators.hardware.amx_build import compile_command
    from evaluators.hardware.amx_stream import stream_source

    folder = tmp_path_factory.mktemp("stream")
    # blocks of 8 K rows: C's partial sums are stored and reloaded many times a product
    (folder / "stream.c").write_text(stream_source(kb=8, small=1))
    subprocess.run([*compile_command(True), str(folder / "stream.c"), "-o",
                    str(folder / "stream.so")], check=True)
    lib = ctypes.CDLL(str(folder / "stream.so"))
    for name in ("dse_stream_s8s8s32", "dse_stream_bf16bf16f32"):
        getattr(lib, name).argtypes = ([ctypes.c_int64] * 3 + [ctypes.c_void_p, ctypes.c_int64]
                                       * 3 + [ctypes.c_int])
    for name in ("dse_stream_pack_s8", "dse_stream_pack_bf16"):
        getattr(lib, name).restype = ctypes.c_void_p
        getattr(lib, name).argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                       ctypes.c_int64, ctypes.c_int]
    for name in ("dse_stream_s8s8s32_packed", "dse_stream_bf16bf16f32_packed"):
        getattr(lib, name).argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                       ctypes.c_int]
    lib.dse_stream_packed_free.argtypes = [ctypes.c_void_p]
    return lib


@needs_avx512
@pytest.mark.parametrize("packed", [False, True], ids=["b-in-place", "b-packed-once"])
@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_the_streaming_kernels_are_exact_on_every_tail(stream, dtype, packed):
    s8 = dtype == "int8-int32"
    fn = stream.dse_stream_s8s8s32 if s8 else stream.dse_stream_bf16bf16f32
    pack = stream.dse_stream_pack_s8 if s8 else stream.dse_stream_pack_bf16
    on_packed = stream.dse_stream_s8s8s32_packed if s8 else stream.dse_stream_bf16bf16f32_packed
    for threads in (1, 2):
        for M, N, K, pad in STREAM_SHAPES:
            a, b, c, reference = operands(dtype, M, N, K, 11, pad, "row")
            c.fill(-7)
            if packed:  # B packed (its K tail padded), then B overwritten: not read again
                b = b.copy()  # operands are drawn once per process
                handle = pack(K, N, b.ctypes.data, b.shape[1], threads)
                b.fill(0)
                assert on_packed(M, handle, a.ctypes.data, a.shape[1], c.ctypes.data,
                                 c.shape[1], threads) == 0
                stream.dse_stream_packed_free(handle)
            else:
                assert fn(M, N, K, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1],
                          c.ctypes.data, c.shape[1], threads) == 0
            error = np.abs(c[:, :N] - reference).max()
            assert error <= (0 if s8 else 1e-5 * K), (M, N, K, threads)
            assert (c[:, N:] == -7).all()


def test_stream_source_refuses_a_block_that_is_not_whole_groups():
    from evaluators.hardware.amx_stream import stream_source

    with pytest.raises(ValueError, match="multiple of 4"):
        stream_source(kb=6)
    with pytest.raises(ValueError, match="whole tiles of K"):
        stream_source(kb=96, tiles=True)


# AMX tiles on the streaming layout (emulated where the CPU lacks AMX), in both orders: the tails
# above, and partial tiles of A past 16 rows (17, 33, 300), with blocks of 64 int8 or 32 bf16 K
# rows
TILES_SHAPES = [*STREAM_SHAPES, (17, 100, 70, 0), (33, 257, 129, 3), (16, 64, 64, 0)]


@pytest.fixture(scope="module", params=[True, False], ids=["k-outer", "k-inner"])
def stream_tiles(tmp_path_factory, request):
    from evaluators.hardware.amx_build import compile_command
    from evaluators.hardware.amx_source import support_text
    from evaluators.hardware.amx_stream import stream_source

    folder = tmp_path_factory.mktemp("stream_tiles")
    (folder / "tiles.c").write_text(("#define DSE_AMX_EMULATE 1\n" if EMULATE else "")
                                    + support_text() + stream_source(kb=64, small=1, tiles=True,
                                                                     k_outer=request.param))
    subprocess.run([*compile_command(EMULATE), str(folder / "tiles.c"), "-o",
                    str(folder / "tiles.so")], check=True)
    lib = ctypes.CDLL(str(folder / "tiles.so"))
    assert lib.dse_amx_request() == 0
    for name in ("dse_stream_amx_s8s8s32", "dse_stream_amx_bf16bf16f32"):
        getattr(lib, name).argtypes = ([ctypes.c_int64] * 3 + [ctypes.c_void_p, ctypes.c_int64]
                                       * 3 + [ctypes.c_int])
    return lib


@needs_avx512
@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_the_amx_streaming_kernels_are_exact_on_every_tail(stream_tiles, dtype):
    fn = (stream_tiles.dse_stream_amx_s8s8s32 if dtype == "int8-int32"
          else stream_tiles.dse_stream_amx_bf16bf16f32)
    assert_exact(fn, dtype, TILES_SHAPES, seed=13)


NATIVE_TABLE = {
    **TABLE,
    "kernels": [{"id": 0, "params": {"grid_rows": 4, "grid_cols": 2, "mc": 64, "kc": 256,
                                     "nc": 64, "engine": "avx512", "split": "n"}},
                {"id": 1, "params": {"grid_rows": 2, "grid_cols": 4, "mc": 128, "kc": 512,
                                     "nc": 128, "engine": "avx512", "split": "m"}},
                {"id": 2, "params": {"grid_rows": 2, "grid_cols": 2, "mc": 64, "kc": 256,
                                     "nc": 64}},  # AMX: without it, the library's own kernels
                {"id": 3, "params": {"grid_rows": 1, "grid_cols": 4, "mc": 1, "kc": 64,
                                     "nc": 128, "engine": "avx512", "pack_b": "stream",
                                     "split": "n"}}],
    "rules": [{"k": 256, "n": 128, "m_min": 1, "m_max": None, "kernel": 1},
              {"k": 300, "n": 200, "m_min": 1, "m_max": None, "kernel": 2},
              {"k": 130, "n": 70, "m_min": 1, "m_max": None, "kernel": 3}],
    "shapes": [{"M": 80, "K": 256, "N": 128, "kernel": 1},
               {"M": 512, "K": 2048, "N": 2048, "kernel": 1},
               {"M": 96, "K": 160, "N": 96, "kernel": 0}],
    "fallback": 0,
}


STREAM_M = 64  # the native library's bound here, so that the general AVX-512 kernel runs too


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    """The library as built for this CPU (no emulation), a shape whose table kernel needs AMX
    streamed up to :data:`STREAM_M` rows; on a CPU without AMX its AVX-512 and streaming
    kernels serve every shape."""
    from evaluators.hardware.amx_library import build_library

    if amx_problem() is None:
        pytest.skip("this CPU has AMX: the library runs its AMX kernels, not the AVX-512 ones")
    folder = tmp_path_factory.mktemp("native")
    build_library(NATIVE_TABLE, folder / "libdsegemm.so", stream_m=STREAM_M)
    lib = ctypes.CDLL(str(folder / "libdsegemm.so"))
    lib.dse_gemm_kernel.argtypes = [ctypes.c_int64] * 3
    return lib


@needs_avx512
def test_without_amx_the_tables_avx512_kernels_serve_and_the_amx_ones_stream(native):
    assert native.dse_gemm_engine() == 0
    kernel = native.dse_gemm_kernel  # (M, N, K)
    assert kernel(1, 128, 256) == kernel(STREAM_M + 1, 128, 256) == 1  # the table's, any M
    assert kernel(5, 70, 130) == kernel(300, 70, 130) == 3  # the table's streaming kernel
    assert kernel(1, 200, 300) == kernel(STREAM_M, 200, 300) == -1  # AMX's shape: streamed
    assert kernel(STREAM_M + 1, 200, 300) == -2  # above the bound: the general kernel
    assert kernel(400, 1900, 2000) == 1  # an unseen weight, nearest: 512x2048x2048
    assert kernel(100, 100, 150) == 0  # nearest: 96x160x96
    assert kernel(0, 1, 1) == -3


@needs_avx512
def test_by_default_a_shape_whose_kernel_needs_amx_streams_at_any_m(tmp_path):
    if amx_problem() is None:
        pytest.skip("this CPU has AMX: the library runs its AMX kernels")
    (tmp_path / "t.json").write_text(json.dumps(NATIVE_TABLE))
    assert main(["dispatch", "build", str(tmp_path / "t.json"), "--out",
                 str(tmp_path / "lib.so")]) == 0
    lib = ctypes.CDLL(str(tmp_path / "lib.so"))
    lib.dse_gemm_kernel.argtypes = [ctypes.c_int64] * 3
    assert lib.dse_gemm_kernel(1, 200, 300) == lib.dse_gemm_kernel(4096, 200, 300) == -1
    assert lib.dse_gemm_kernel(4096, 128, 256) == 1


def test_the_nearest_shapes_log_is_the_dispatchers():
    from evaluators.hardware.amx_library import rough_log2

    for x in (1, 2, 3, 100, 4096, 4097, 128256):
        assert abs(rough_log2(x) - np.log2(x)) < 0.09
    assert rough_log2(4096) == 12.0


@needs_avx512
@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_without_amx_every_path_is_exact(native, dtype):
    fn = _gemm(native, dtype)
    shapes = [(1, 128, 256, 0), (STREAM_M, 45, 70, 3), (STREAM_M + 1, 128, 256, 1),
              (100, 97, 150, 2), (3, 4099, 17, 0), (STREAM_M, 200, 300, 1),
              (STREAM_M + 1, 200, 300, 2), (5, 70, 130, 0), (300, 70, 130, 3)]
    for threads in (1, 2):
        native.dse_set_threads(threads)
        for M, N, K, pad in shapes:
            a, b, c, reference = operands(dtype, M, N, K, 7, pad, "row")
            c.fill(-7)
            assert fn(M, N, K, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1],
                      c.ctypes.data, c.shape[1]) == 0
            error = np.abs(c[:, :N] - reference).max()
            assert error <= (0 if dtype == "int8-int32" else 1e-5 * K), (M, N, K, threads)
            assert (c[:, N:] == -7).all()
    a, b, c, _ = operands(dtype, 4, 4, 4, 5, 0, "row")
    c.fill(-7)
    assert fn(4, 4, 4, a.ctypes.data, 4, b.ctypes.data, 3, c.ctypes.data, 4) != 0  # ldb < N
    assert (c == -7).all()
    check_packed_b(native, dtype, shapes)  # the streaming kernels on B packed once


def test_a_table_dse_cover_writes_builds(tmp_path, capsys):
    # The documented path: a mix study on cpu-amx, its cover, the library. The cover's table
    # keeps the study's space options under "space"; the family is its target's.
    from dse.study.runner import run_study
    from dse.study.spec import study_from_dict

    storage = str(tmp_path / "s.db")
    run_study(study_from_dict({
        "name": "mix", "target": "cpu-amx", "sampler": "random", "budget": {"trials": 12},
        "workloads": [{"shape": shape, "dtype": "int8-int32", "b_layout": "row",
                       "weight": weight} for shape, weight in (("8x256x128", 3),
                                                               ("64x256x128", 1))],
        "evaluator": {"name": "analytical"}, "seed": 0}), storage)
    table = tmp_path / "t.json"
    assert main(["cover", "mix", "--storage", storage, "--kernels", "2", "--out",
                 str(table)]) == 0
    assert isinstance(json.loads(table.read_text())["space"], dict)
    out = tmp_path / "libdsegemm.so"
    assert main(["dispatch", "build", str(table), "--out", str(out),
                 *(["--emulate"] if EMULATE else [])]) == 0, capsys.readouterr().err
    fn = _gemm(ctypes.CDLL(str(out)), "int8-int32")
    a, b, c, reference = operands("int8-int32", 8, 128, 256, 5, 0, "row")
    assert fn(8, 128, 256, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1],
              c.ctypes.data, c.shape[1]) == 0
    assert (c == reference).all()
