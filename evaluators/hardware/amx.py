"""The ``amx`` evaluator: each config's generated AMX GEMM compiled (in parallel, once per
source) and measured on the host CPU's tile engine.

A batch's kernels are built at once on every core; then, one at a time under the CPU's device
lock, the tile-multiply peak is probed and each kernel is measured in the harness's worker:
warm-up, repeats until the spread settles, every product checked against a reference (int8
exactly, bf16 within 1e-5 K). Each result stores the median, the spread, every time, the
same-run probe and the efficiency (measured / probe). A compile error, a wrong product or a
timeout is a failed result with its reason. With ``emulate=True`` the tile instructions are
computed in C: exact products on any x86-64 CPU, meaningless times.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from dse.core import Capabilities, ConfigBatch, EvalContext, EvalResult, Evaluator, Status
from evaluators.hardware.amx_build import Build, build
from evaluators.hardware.amx_detect import amx_problem, cpu_model
from evaluators.hardware.amx_probe import peak_ops_per_s
from evaluators.hardware.amx_source import kernel_source
from evaluators.hardware.harness import MeasureSettings, Worker, measure

RUNNER = "evaluators.hardware.amx_kernel:run"
# The AMX kernels use every core: they exclude the cpu evaluator's measurements, and it theirs.
DEVICE = "cpu0"


def worker_environment() -> dict[str, str]:
    """OpenMP threads pinned one per core; NumPy's reference on one thread (it runs beside
    nothing, but a pool of BLAS threads would linger spinning)."""
    return {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores", "OMP_WAIT_POLICY": "passive",
            "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class AmxEvaluator(Evaluator):
    """Builds and measures each config's AMX GEMM (see the module docstring)."""

    name: ClassVar[str] = "amx"
    version: ClassVar[str] = "1"
    result_options: ClassVar[tuple[str, ...]] = ("emulate", "timeout_s")
    fidelity: ClassVar[str] = "hardware"
    spaces: ClassVar[tuple[str, ...]] = ("amx_gemm",)
    capabilities: ClassVar[Capabilities] = Capabilities()
    device: ClassVar[str | None] = DEVICE

    def __init__(self, emulate: bool = False, warmup: int = 1, min_repeats: int = 3,
                 max_repeats: int = 10, target_spread: float = 0.03, timeout_s: float = 120.0,
                 seed: int = 0) -> None:
        self.emulate = emulate
        self.settings = MeasureSettings(warmup, min_repeats, max_repeats, target_spread,
                                        timeout_s)
        self.seed = seed
        self._worker: Worker | None = None

    def unavailable(self) -> str | None:
        return None if self.emulate else amx_problem()

    def _get_worker(self) -> Worker:
        if self._worker is None:
            self._worker = Worker(worker_environment())
        return self._worker

    def __getstate__(self) -> dict[str, Any]:  # shipped to Ray workers without the process
        return {**self.__dict__, "_worker": None}

    def build_all(self, sources: list[str]) -> list[Build]:
        """Every source built, at once on every core (a cached one at no cost)."""
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            return list(pool.map(lambda s: build(s, self.emulate), sources))

    def evaluate_feasible(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        problem = self.unavailable()
        params = ctx.space.decode(batch)
        if problem:
            return [EvalResult(Status.FAILED, p, reason=problem) for p in params]
        dtype = ctx.workload.dtype.name
        sources = [kernel_source(p, dtype, ctx.workload.b_layout, self.emulate) for p in params]
        return self.measure_sources(params, sources, ctx)

    def measure_sources(self, params: list[dict[str, Any]], sources: list[str],
                        ctx: EvalContext) -> list[EvalResult]:
        """Build and measure ``sources`` (one per config of ``params``) on ``ctx``'s workload."""
        w = ctx.workload
        builds = self.build_all(sources)
        cores = ctx.target.engine.cores
        probe = None if self.emulate else peak_ops_per_s(
            self._get_worker(), DEVICE, cores, w.dtype.name, self.settings)
        provenance = {"device": cpu_model(), "emulated": self.emulate}
        results = []
        for p, built in zip(params, builds, strict=True):
            if built.library is None:
                results.append(EvalResult(Status.FAILED, p, dict(provenance), reason=built.error))
                continue
            job = {"library_path": str(built.library), "dtype": w.dtype.name, "M": w.M,
                   "N": w.N, "K": w.K, "seed": self.seed, "threads": int(p["threads"]),
                   "b_layout": w.b_layout, "emulate": self.emulate}
            m = measure(self._get_worker(), RUNNER, job, self.settings, DEVICE)
            metrics: dict[str, Any] = {**provenance, "times_s": m.times,
                                       "compile_s": built.seconds}
            if m.status is not Status.OK:
                results.append(EvalResult(m.status, p, metrics, reason=m.reason,
                                          elapsed_s=sum(m.times)))
                continue
            tops = 2.0 * w.M * w.N * w.K / m.median / 1e12
            metrics.update({"tops": tops, "latency_s": m.median, "spread": m.spread,
                            "repeats": len(m.times)})
            if probe:
                metrics.update({"probe_tops": probe / 1e12, "efficiency": tops * 1e12 / probe})
            results.append(EvalResult(Status.OK, p, metrics, elapsed_s=sum(m.times)))
        return results

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
