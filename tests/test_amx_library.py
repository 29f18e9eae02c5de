"""``dse dispatch build``: a dispatch table's AMX kernels as one shared library, called through
its C ABI from Python (ctypes) and from a C program compiled here: tails, leading dimensions,
threads, both dtypes, bad arguments refused with C untouched. The AMX kernels run emulated on a
CPU without AMX (and natively where it has AMX); the AVX-512 ones natively."""

from __future__ import annotations

import ctypes
import json
import subprocess

import numpy as np
import pytest

from dse.cli import main
from evaluators.hardware.amx_detect import amx_problem, cpu_flags
from evaluators.hardware.amx_kernel import operands

pytestmark = pytest.mark.skipif(
    not {"avx512_vnni", "avx512_bf16"} <= cpu_flags(),
    reason="the library's kernels need AVX-512 VNNI and BF16 (and AMX, or its emulation)")
EMULATE = amx_problem() is not None

TABLE = {
    "format": "dse-dispatch/1", "study": "lib-test", "target": "cpu-amx", "evaluator": "amx",
    "space": "amx_gemm", "dtype": "int8-int32", "b_layout": "row",
    "kernels": [
        {"id": 0, "params": {"grid_rows": 2, "grid_cols": 2, "mc": 64, "kc": 256, "nc": 64}},
        {"id": 1, "params": {"grid_rows": 4, "grid_cols": 2, "mc": 8, "kc": 256, "nc": 64,
                             "engine": "avx512", "split": "n"}}],
    "rules": [{"k": 256, "n": 128, "m_min": 1, "m_max": 8, "kernel": 1},
              {"k": 256, "n": 128, "m_min": 9, "m_max": None, "kernel": 0}],
    "fallback": 0,
}
SHAPES = [(1, 128, 256, 0), (8, 128, 256, 3), (40, 128, 256, 0), (17, 33, 65, 2), (1, 1, 1, 0)]
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


def _gemm(lib: ctypes.CDLL, dtype: str):
    fn = lib.dse_gemm_s8s8s32 if dtype == "int8-int32" else lib.dse_gemm_bf16bf16f32
    fn.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p, ctypes.c_int64] * 3
    return fn


@pytest.mark.parametrize("dtype", ["int8-int32", "bf16-fp32"])
def test_every_shape_is_served_exactly(library, dtype):
    lib = ctypes.CDLL(str(library / "libdsegemm.so"))
    fn = _gemm(lib, dtype)
    for threads in (1, 2):
        lib.dse_set_threads(threads)
        for M, N, K, pad in SHAPES:
            a, b, c, reference = operands(dtype, M, N, K, 5, pad, "row")
            c.fill(-7)
            assert fn(M, N, K, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1],
                      c.ctypes.data, c.shape[1]) == 0
            error = np.abs(c[:, :N] - reference).max()
            assert error <= (0 if dtype == "int8-int32" else 1e-5 * K), (M, N, K, threads)
            assert (c[:, N:] == -7).all()  # past N, within ldc: not written


def test_bad_arguments_are_refused_and_c_untouched(library):
    lib = ctypes.CDLL(str(library / "libdsegemm.so"))
    fn = _gemm(lib, "int8-int32")
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
    done = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stdout + done.stderr
    engine = int(done.stdout.strip().split("=")[1])
    assert engine == (0 if amx_problem() and not EMULATE else 1)


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
