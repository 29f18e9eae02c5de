"""The AMX runner's side of a measurement, run in the harness's worker process: the built
library loaded once, operands made once per shape (seeded), one timed call of the GEMM per
run, and the product checked against a float64 reference every run (int8 exactly; bf16 within
``BF16_ATOL_PER_K`` times K, the inputs lying in [-1, 1]). NumPy and the standard library only."""

from __future__ import annotations

import ctypes
import os
from functools import cache

import numpy as np

from evaluators.hardware.amx_detect import amx_problem, vector_problem
from evaluators.hardware.harness import RunOutput

BF16_ATOL_PER_K = 1e-5  # |C - reference| <= 1e-5 K: fp32 accumulation, not a lost K step
MIN_TIMED_S = 0.02  # a timed run calls the GEMM as often as needed to last this long


def to_bf16(values: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) of float32 values, rounded to nearest even."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    """float32 values of bf16 bit patterns."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


@cache
def operands(dtype: str, M: int, N: int, K: int, seed: int, pad: int = 0,
             b_layout: str = "row") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A (M x K+pad), B (K x N+pad, or N x K+pad when ``b_layout`` is ``col``), C (M x N+pad)
    and the float64 reference (M x N): each leading dimension is ``pad`` elements longer than a
    row."""
    rng = np.random.default_rng(seed)
    b_shape = (N, K + pad) if b_layout == "col" else (K, N + pad)
    if dtype == "int8-int32":
        a = rng.integers(-128, 128, (M, K + pad), dtype=np.int8)
        b = rng.integers(-128, 128, b_shape, dtype=np.int8)
        av, bv = a.astype(np.float64), b.astype(np.float64)
        c = np.zeros((M, N + pad), np.int32)
    else:
        a = to_bf16(rng.uniform(-1, 1, (M, K + pad)))
        b = to_bf16(rng.uniform(-1, 1, b_shape))
        av, bv = from_bf16(a).astype(np.float64), from_bf16(b).astype(np.float64)
        c = np.zeros((M, N + pad), np.float32)
    bv = bv[:, :K].T if b_layout == "col" else bv[:, :N]
    return a, b, c, av[:, :K] @ bv  # exact for int8: |sums| < 2^53


@cache
def library(path: str) -> ctypes.CDLL:
    """A built kernel, loaded once per process, its tile permission asked for."""
    lib = ctypes.CDLL(path)
    if lib.dse_amx_request() != 0:
        raise OSError("Linux refused the tile state (arch_prctl ARCH_REQ_XCOMP_PERM)")
    return lib


def check(dtype: str, c: np.ndarray, reference: np.ndarray, K: int) -> tuple[bool, str]:
    """Whether the product matches the reference, and the largest error."""
    if dtype == "int8-int32":
        wrong = int(np.count_nonzero(c != reference))
        return wrong == 0, f"{wrong} of {c.size} elements differ from the exact product"
    error = float(np.nanmax(np.abs(c - reference))) if np.isfinite(c).all() else float("inf")
    atol = BF16_ATOL_PER_K * K
    return error <= atol, f"largest error {error:.3g} (tolerance {atol:.3g})"


def run(library_path: str, dtype: str, M: int, N: int, K: int, seed: int = 0, threads: int = 1,
        pad: int = 0, b_layout: str = "row", emulate: bool = False,
        engine: str = "amx") -> RunOutput:
    """Time one run of the library's GEMM on seeded operands and check its product."""
    problem = vector_problem(dtype) if engine == "avx512" else None if emulate else amx_problem()
    if problem:
        raise OSError(problem)
    lib = library(library_path)
    lib.dse_time.restype = ctypes.c_double
    lib.dse_time.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p, ctypes.c_int64] * 3 \
        + [ctypes.c_int]
    lib.dse_set_threads(threads)
    a, b, c, reference = operands(dtype, M, N, K, seed, pad, b_layout)
    c.fill(-7)  # a product left unwritten cannot pass for a right one
    args = (M, N, K, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1], c.ctypes.data,
            c.shape[1])
    seconds = lib.dse_time(*args, 1)
    if seconds < 0:
        return RunOutput(0.0, False, "the kernel refused its arguments")
    repeats = max(1, min(1000, int(MIN_TIMED_S / max(seconds, 1e-9))))
    if repeats > 1:
        seconds = lib.dse_time(*args, repeats)
    ok, detail = check(dtype, c[:, :N], reference, K)
    return RunOutput(seconds, ok, f"{detail}; pid {os.getpid()}")

