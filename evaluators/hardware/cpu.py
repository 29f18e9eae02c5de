"""The ``cpu`` evaluator: real blocked GEMMs on the host CPU, measured by the harness."""

from __future__ import annotations

import inspect
import os
import platform
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from dse.core import Capabilities, ConfigBatch, EvalContext, EvalResult, Evaluator, Status
from evaluators.hardware import cpu_kernel
from evaluators.hardware.harness import MeasureSettings, Worker, measure


def cpu_provenance() -> dict[str, str]:
    """What was measured on: the CPU model, its clock where readable, NumPy and BLAS."""
    model, mhz = platform.processor() or "unknown", ""
    try:
        for line in open("/proc/cpuinfo"):  # noqa: SIM115 - tiny read
            if line.startswith("model name") and model in ("", "unknown", "x86_64"):
                model = line.split(":", 1)[1].strip()
            if line.startswith("cpu MHz") and not mhz:
                mhz = line.split(":", 1)[1].strip()
    except OSError:
        pass
    blas = ""
    config = np.show_config(mode="dicts") if hasattr(np, "show_config") else {}
    if isinstance(config, dict):
        info = config.get("Build Dependencies", {}).get("blas", {})
        blas = f"{info.get('name', '')} {info.get('version', '')}".strip()
    return {"device": model, "cpu_mhz": mhz, "numpy": np.__version__, "blas": blas,
            "python": platform.python_version(), "host": platform.node()}


class CpuEvaluator(Evaluator):
    """Measures the blocked GEMM of each config on one core (one BLAS thread)."""

    name: ClassVar[str] = "cpu"
    version: ClassVar[str] = "1"
    result_options: ClassVar[tuple[str, ...]] = ("timeout_s",)  # a timeout is a result
    fidelity: ClassVar[str] = "hardware"
    spaces: ClassVar[tuple[str, ...]] = ("cpu_gemm",)  # search spaces it can score
    capabilities: ClassVar[Capabilities] = Capabilities(offline=True)
    device: ClassVar[str | None] = "cpu0"

    def __init__(self, warmup: int = 1, min_repeats: int = 3, max_repeats: int = 7,
                 target_spread: float = 0.05, timeout_s: float = 60.0, seed: int = 0) -> None:
        self.settings = MeasureSettings(warmup, min_repeats, max_repeats, target_spread,
                                        timeout_s)
        self.seed = seed
        self._worker: Worker | None = None

    def _get_worker(self) -> Worker:
        if self._worker is None:
            self._worker = Worker({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                                   "MKL_NUM_THREADS": "1"})
        return self._worker

    def __getstate__(self) -> dict[str, Any]:  # shipped to Ray workers without the process
        return {**self.__dict__, "_worker": None}

    def evaluate_feasible(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        provenance = cpu_provenance()
        w = ctx.workload
        results = []
        for params in ctx.space.decode(batch):
            job = {"M": w.M, "K": w.K, "N": w.N, "mc": params["mc"], "kc": params["kc"],
                   "nc": params["nc"], "pack_a": params["pack_a"] == "yes",
                   "pack_b": params["pack_b"] == "yes", "seed": self.seed}
            m = measure(self._get_worker(), "evaluators.hardware.cpu_kernel:run", job,
                        self.settings, self.device)
            if m.status is not Status.OK:
                results.append(EvalResult(m.status, {"times_s": m.times, **provenance},
                                          reason=m.reason, elapsed_s=sum(m.times)))
                continue
            results.append(EvalResult(Status.OK, {
                "tops": 2.0 * w.M * w.K * w.N / m.median / 1e12, "latency_s": m.median,
                "spread": m.spread, "repeats": len(m.times), "times_s": m.times,
                "pid": os.getpid(), **provenance}, elapsed_s=sum(m.times)))
        return results

    def offline_job(self, params: dict[str, Any], ctx: EvalContext) -> dict[str, Any]:
        """The runner's job: this backend's module (it needs only NumPy) timing the blocked GEMM
        on that machine's CPU."""
        w = ctx.workload
        job = {"M": w.M, "K": w.K, "N": w.N, "mc": params["mc"], "kc": params["kc"],
               "nc": params["nc"], "pack_a": params["pack_a"] == "yes",
               "pack_b": params["pack_b"] == "yes", "seed": self.seed}
        # a call a config: the runner's time limit and its results file then go config by
        # config (there is no compilation for a batch to share)
        return {"kind": "python", "source": Path(inspect.getfile(cpu_kernel)).read_text(),
                "entry": "offline_run", "args": {"jobs": [job]}}

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
