"""The CPU backend's run: a blocked fp32 GEMM in NumPy, timed, and checked against A @ B.

Runs inside the harness worker (one BLAS thread, see ``CpuEvaluator``). Inputs are made once
per shape and seed and kept for the following runs of the same worker.
"""

from __future__ import annotations

import time

import numpy as np

from dse.offline.runner import blocked_gemm
from evaluators.hardware.harness import RunOutput

_cache: dict[tuple[int, int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


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
