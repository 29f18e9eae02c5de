"""The CPU backend's run: a blocked fp32 GEMM in NumPy, timed, and checked against A @ B.

This module needs only NumPy (no dse): the ``cpu`` evaluator runs it in the harness's worker
(one BLAS thread), and the offline runner runs it on another machine, from its source
(:func:`offline_run`). Inputs are made once per shape and seed and kept for the following
runs of the same process.
"""

from __future__ import annotations

import statistics
import time
from collections import namedtuple
from typing import Any

import numpy as np

RunOutput = namedtuple("RunOutput", "seconds correct detail")  # what the harness reads

_cache: dict[tuple[int, int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def blocked_gemm(a: np.ndarray, b: np.ndarray, mc: int, kc: int, nc: int, pack_a: bool,
                 pack_b: bool) -> np.ndarray:
    """C = A @ B computed block by block (optionally packing blocks into contiguous buffers)."""
    M, K = a.shape
    N = b.shape[1]
    c = np.zeros((M, N), dtype=np.float32)
    for j in range(0, N, nc):
        for p in range(0, K, kc):
            b_block = b[p:p + kc, j:j + nc]
            if pack_b:
                b_block = np.ascontiguousarray(b_block)
            for i in range(0, M, mc):
                a_block = a[i:i + mc, p:p + kc]
                if pack_a:
                    a_block = np.ascontiguousarray(a_block)
                c[i:i + mc, j:j + nc] += a_block @ b_block
    return c


def _inputs(M: int, K: int, N: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    key = (M, K, N, seed)
    if key not in _cache:
        _cache.clear()
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((K, N), dtype=np.float32)
        _cache[key] = (a, b, a @ b)
    return _cache[key]


def run(M: int, K: int, N: int, mc: int, kc: int, nc: int, pack_a: bool, pack_b: bool,
        seed: int = 0, corrupt: bool = False) -> RunOutput:
    """One timed GEMM. ``corrupt`` perturbs the product (to test the harness's check)."""
    a, b, reference = _inputs(M, K, N, seed)
    start = time.perf_counter()
    c = blocked_gemm(a, b, mc, kc, nc, pack_a, pack_b)
    seconds = time.perf_counter() - start
    if corrupt:
        c[0, 0] += 1.0
    error = float(np.max(np.abs(c - reference)))
    tolerance = 1e-3 * float(np.max(np.abs(reference))) + 1e-3
    return RunOutput(seconds, error <= tolerance, f"max |error| {error:.3g} (tolerance "
                                                  f"{tolerance:.3g})")


def offline_run(jobs: list[dict[str, Any]], repeats: int = 5,
                warmup: int = 1) -> list[dict[str, Any]]:
    """The offline runner's entry: each job's GEMM timed (``warmup`` runs, then ``repeats``),
    every product checked; one outcome each, with the median latency and the spread."""
    outcomes = []
    for job in jobs:
        times, failed = [], None
        for index in range(warmup + repeats):
            output = run(**job)
            if not output.correct:
                failed = {"status": "failed", "reason": f"wrong product: {output.detail}"}
                break
            if index >= warmup:
                times.append(output.seconds)
        if failed:
            outcomes.append(failed)
            continue
        median = statistics.median(times)
        outcomes.append({"status": "ok", "metrics": {
            "latency_s": median, "tops": 2.0 * job["M"] * job["K"] * job["N"] / median / 1e12,
            "spread": (max(times) - min(times)) / median, "repeats": len(times),
            "times_s": times}})
    return outcomes
