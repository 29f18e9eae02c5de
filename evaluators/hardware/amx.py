"""The ``amx`` evaluator: each config's generated AMX GEMM compiled (in parallel, once per
source) and measured on the host CPU's tile engine.

A batch's kernels are built at once on every core (in a Ray worker at idle priority); then,
one at a time under the CPU's device lock (held for the measurement only, so another Ray worker
builds its batch meanwhile, on the cycles the measurement leaves idle), the tile-multiply peak
is probed and each kernel is measured in the harness's worker:
warm-up, repeats until the spread settles, every product checked against a reference (int8
exactly, bf16 within 1e-5 K). Each result stores the median, the spread, every time, the
same-run probe and the efficiency (measured / probe). A compile error, a wrong product or a
timeout is a failed result with its reason, and so is a config whose engine this CPU lacks. With
``emulate=True`` the tile instructions are computed in C: exact products on any x86-64 CPU,
meaningless times. The AVX-512 kernels (``engine=avx512`` configs) run natively wherever the CPU
has AVX-512 VNNI (int8) or BF16 (bf16); with the option ``engine=avx512`` the evaluator measures
only those, and so runs on a CPU without AMX. The peak probe is AMX's: they carry an efficiency
only on a CPU with AMX.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from dse.core import Capabilities, ConfigBatch, EvalContext, EvalResult, Evaluator, Status
from evaluators.hardware.amx_build import Build, build
from evaluators.hardware.amx_detect import amx_problem, cpu_model, vector_problem
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


def build_at_idle_priority() -> None:
    """Put the calling thread, and so the compilers it starts, in Linux's idle scheduling
    class: a build then runs only on a core that nothing else wants. Builds of one Ray worker
    run while another worker measures under the device lock; on a machine whose every core
    the measured kernel uses, a build at normal priority would take a core from it and
    inflate its time, while at idle priority it takes the cycles the measurement leaves (its
    harness's Python between runs, the threads' waits). Elsewhere (no ``SCHED_IDLE``) a no-op."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # 0: this thread (Linux)
    except (AttributeError, OSError):
        pass


def in_ray_worker() -> bool:
    """Whether this process is a Ray worker (a study on several workers): alone, in-process,
    nothing of the study measures while this process builds, and builds keep their normal
    priority (at idle priority, other work on a busy machine would starve them)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


class AmxEvaluator(Evaluator):
    """Builds and measures each config's AMX GEMM (see the module docstring)."""

    name: ClassVar[str] = "amx"
    version: ClassVar[str] = "1"
    # emulated times mean nothing; a timeout is a result; an engine-only evaluator refuses
    # the other engine's configs
    result_options: ClassVar[tuple[str, ...]] = ("emulate", "timeout_s", "engine")
    fidelity: ClassVar[str] = "hardware"
    spaces: ClassVar[tuple[str, ...]] = ("amx_gemm",)
    capabilities: ClassVar[Capabilities] = Capabilities()
    device: ClassVar[str | None] = DEVICE
    # builds need no device and measurements take its lock (the harness's): several Ray
    # workers may run at once, one building while another measures (dse.study.execution.pool)
    shares_device: ClassVar[bool] = True

    def __init__(self, emulate: bool = False, warmup: int = 1, min_repeats: int = 3,
                 max_repeats: int = 10, target_spread: float = 0.03, timeout_s: float = 120.0,
                 seed: int = 0, engine: str | None = None) -> None:
        if engine not in (None, "amx", "avx512"):
            raise ValueError(f"engine={engine!r} is not one of amx, avx512")
        self.emulate, self.engine = emulate, engine
        self.settings = MeasureSettings(warmup, min_repeats, max_repeats, target_spread,
                                        timeout_s)
        self.seed = seed
        self._worker: Worker | None = None

    def unavailable(self) -> str | None:
        """Why the engine this evaluator measures (AMX unless ``engine=avx512``) cannot run
        here, or None."""
        if self.engine == "avx512":
            return vector_problem("int8-int32")
        return _emulation_problem("int8-int32") if self.emulate else amx_problem()

    def engine_problem(self, params: dict[str, Any], dtype: str) -> str | None:
        """Why this config cannot be measured here (its engine missing, or not the one this
        evaluator was asked for), or None."""
        engine = params.get("engine", "amx")
        if self.engine and engine != self.engine:
            return f"this evaluator measures engine={self.engine} configs only, not {engine}"
        if engine == "avx512":
            return vector_problem(dtype)
        return _emulation_problem(dtype) if self.emulate else amx_problem()

    def _get_worker(self) -> Worker:
        if self._worker is None:
            self._worker = Worker(worker_environment())
        return self._worker

    def __getstate__(self) -> dict[str, Any]:  # shipped to Ray workers without the process
        return {**self.__dict__, "_worker": None}

    def build_all(self, sources: list[str]) -> list[Build]:
        """Every source built, at once on every core (a cached one at no cost); in a Ray
        worker, whose study's other workers may be measuring meanwhile, the compilers at idle
        priority (see :func:`build_at_idle_priority`)."""
        idle = build_at_idle_priority if in_ray_worker() else None
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1, initializer=idle) as pool:
            return list(pool.map(lambda s: build(s, self.emulate), sources))

    def evaluate_feasible(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        params = ctx.space.decode(batch)
        dtype = ctx.workload.dtype.name
        problems = [self.engine_problem(p, dtype) for p in params]
        runnable = [i for i, problem in enumerate(problems) if problem is None]
        sources = [kernel_source(params[i], dtype, ctx.workload.b_layout, self.emulate)
                   for i in runnable]
        measured = iter(self.measure_sources([params[i] for i in runnable], sources, ctx))
        return [EvalResult(Status.FAILED, reason=problem) if problem else next(measured)
                for problem in problems]

    def measure_sources(self, params: list[dict[str, Any]], sources: list[str],
                        ctx: EvalContext) -> list[EvalResult]:
        """Build and measure ``sources`` (one per config of ``params``) on ``ctx``'s workload."""
        w = ctx.workload
        builds = self.build_all(sources)
        cores = ctx.target.engine.cores
        probe = None if self.emulate or amx_problem() or not params else peak_ops_per_s(
            self._get_worker(), DEVICE, cores, w.dtype.name, self.settings)
        provenance = {"device": cpu_model(), "emulated": self.emulate}
        results = []
        for p, built in zip(params, builds, strict=True):
            if built.library is None:
                results.append(EvalResult(Status.FAILED, dict(provenance), reason=built.error))
                continue
            job = {"library_path": str(built.library), "dtype": w.dtype.name, "M": w.M,
                   "N": w.N, "K": w.K, "seed": self.seed, "threads": int(p["threads"]),
                   "b_layout": w.b_layout, "emulate": self.emulate,
                   "engine": p.get("engine", "amx")}
            m = measure(self._get_worker(), RUNNER, job, self.settings, DEVICE)
            metrics: dict[str, Any] = {**provenance, "times_s": m.times,
                                       "compile_s": built.seconds}
            if m.status is not Status.OK:
                results.append(EvalResult(m.status, metrics, reason=m.reason,
                                          elapsed_s=sum(m.times)))
                continue
            tops = 2.0 * w.M * w.N * w.K / m.median / 1e12
            metrics.update({"tops": tops, "latency_s": m.median, "spread": m.spread,
                            "repeats": len(m.times)})
            if probe:
                metrics.update({"probe_tops": probe / 1e12, "efficiency": tops * 1e12 / probe})
            results.append(EvalResult(Status.OK, metrics, elapsed_s=sum(m.times)))
        return results

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()


def _emulation_problem(dtype: str) -> str | None:
    """Why AMX kernels of ``dtype`` with their tiles emulated cannot run here, or None: the
    tiles are C, but the kernels' packing and edges are AVX-512 still."""
    problem = vector_problem(dtype)
    return f"emulated AMX tiles still need AVX-512 (the kernels' packing and edges): " \
           f"{problem}" if problem else None
