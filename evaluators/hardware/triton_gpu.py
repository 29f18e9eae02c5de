"""The ``triton`` evaluator: the Triton GEMM of each config measured on an NVIDIA GPU.

Runs in the measurement harness's worker process (one GPU, one run at a time): every config of a
batch is compiled in parallel and run once against ``torch.matmul`` (a compile failure or
out-of-resources error is recorded as infeasible with the compiler's reason, a wrong product
as failed); each correct one is then timed with Triton's benchmarking helper until the
harness's spread settles. ``torch.matmul`` on the same operands is measured once per workload
in the same worker and reported beside each result (``torch_tflops``). A and B are loaded
through Hopper's tensor memory accelerator (TMA) where the target and the operands' strides
allow it (``loads`` in the results says which); the option ``loads=pointers`` keeps the
kernel computing its load addresses itself everywhere. With
``interpret=True`` the kernel runs under Triton's CPU interpreter instead: correct results,
meaningless times.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, ClassVar

from dse.core import (
    Capabilities,
    ConfigBatch,
    EvalContext,
    EvalResult,
    EvaluationFailed,
    Evaluator,
    Status,
)
from evaluators.hardware import triton_kernel
from evaluators.hardware.harness import MeasureSettings, Worker, measure
from search_spaces.triton_gemm.rules import tma_loads

KERNEL = "evaluators.hardware.triton_kernel"


def job_of(params: dict[str, Any], ctx: EvalContext, seed: int = 0,
           loads: str = "tma") -> dict[str, Any]:
    """The job :mod:`evaluators.hardware.triton_kernel` runs for ``params`` on ``ctx``'s
    workload: with TMA loads when ``loads`` asks for them and the target and workload allow
    them, else with pointers."""
    w = ctx.workload
    tma = loads == "tma" and tma_loads(ctx.target.device, w)
    return {"M": w.M, "K": w.K, "N": w.N, "dtype": w.dtype.input, "b_layout": w.b_layout,
            "seed": seed, "loads": "tma" if tma else "pointers",
            **{k: int(v) for k, v in params.items()}}


class TritonEvaluator(Evaluator):
    """Measures each config's Triton GEMM (see the module docstring)."""

    name: ClassVar[str] = "triton"
    version: ClassVar[str] = "3"  # 2: B stored as the workload's layout says; 3: TMA loads
    # the interpreter's timings are the CPU's; a timeout is a result; another kernel's loads
    result_options: ClassVar[tuple[str, ...]] = ("interpret", "timeout_s", "loads")
    fidelity: ClassVar[str] = "hardware"
    spaces: ClassVar[tuple[str, ...]] = ("triton_gemm",)
    capabilities: ClassVar[Capabilities] = Capabilities(offline=True)
    device: ClassVar[str | None] = "gpu0"

    def __init__(self, interpret: bool = False, min_repeats: int = 2, max_repeats: int = 4,
                 target_spread: float = 0.05, timeout_s: float = 300.0, seed: int = 0,
                 loads: str = "tma") -> None:
        if loads not in triton_kernel.LOADS:
            raise ValueError(f"loads={loads!r} is not one of {', '.join(triton_kernel.LOADS)}")
        self.interpret, self.loads = interpret, loads
        self.settings = MeasureSettings(0, min_repeats, max_repeats, target_spread, timeout_s)
        self.seed = seed
        self._worker: Worker | None = None
        self._baselines: dict[tuple[Any, ...], float] = {}

    def _get_worker(self) -> Worker:
        if self._worker is None:
            self._worker = Worker({"TRITON_INTERPRET": "1"} if self.interpret else {})
        return self._worker

    def __getstate__(self) -> dict[str, Any]:  # shipped to Ray workers without the process
        return {**self.__dict__, "_worker": None}

    def unavailable(self) -> str | None:
        """Why this machine cannot run the evaluator (None when it can): Triton and PyTorch
        are needed, and a CUDA GPU unless the interpreter is asked for."""
        import importlib.util

        missing = [m for m in ("torch", "triton") if importlib.util.find_spec(m) is None]
        if missing:
            return (f"{' and '.join(missing)} not installed (pip install -e '.[gpu]' on a "
                    "machine with an NVIDIA GPU)")
        if not self.interpret:
            import torch

            if not torch.cuda.is_available():
                return ("no CUDA GPU visible to PyTorch (run on a GPU machine, export the "
                        "configs with dse export-configs --evaluator triton for one, or set "
                        "the option interpret: true for Triton's CPU interpreter)")
        return None

    def _call(self, function: str, timeout_s: float, **kwargs: Any) -> Any:
        state, value = self._get_worker().run(f"{KERNEL}:{function}", kwargs, timeout_s)
        if state == "timeout":  # a kernel that hangs the GPU: the configs' failure
            raise EvaluationFailed(f"the Triton worker did not answer {function} within "
                                   f"{timeout_s:g} s")
        if state == "error":
            self._get_worker().kill()  # its CUDA context may be unusable now
            raise EvaluationFailed(f"the Triton worker failed: "
                                   f"{value.strip().splitlines()[-1]}")
        return value

    def _torch_tflops(self, ctx: EvalContext) -> float:
        w = ctx.workload
        key = (w.M, w.K, w.N, w.dtype.input, w.b_layout)
        if key not in self._baselines:
            job = job_of({}, ctx, self.seed, self.loads)
            m = measure(self._get_worker(), f"{KERNEL}:torch_matmul", job, self.settings,
                        self.device)
            self._baselines[key] = 2.0 * w.macs / m.median / 1e12 if m.times else 0.0
        return self._baselines[key]

    def evaluate_feasible(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        configs = ctx.space.decode(batch)
        jobs = [job_of(params, ctx, self.seed, self.loads) for params in configs]
        checked = self._call("check_many", self.settings.timeout_s * 4, jobs=jobs) if jobs \
            else []
        provenance = self._call("device", 60.0) if jobs else {}
        results = []
        for params, outcome in zip(configs, checked, strict=True):
            if outcome["status"] != "ok":
                results.append(EvalResult(Status(outcome["status"]),
                                          reason=outcome["reason"]))
                continue
            m = measure(self._get_worker(), f"{KERNEL}:run",
                        job_of(params, ctx, self.seed, self.loads), self.settings, self.device)
            if m.status is not Status.OK:
                results.append(EvalResult(m.status, {"times_s": m.times},
                                          reason=m.reason, elapsed_s=sum(m.times)))
                continue
            results.append(EvalResult(Status.OK, {
                "tops": 2.0 * ctx.workload.macs / m.median / 1e12, "latency_s": m.median,
                "spread": m.spread, "repeats": len(m.times), "times_s": m.times,
                "torch_tflops": self._torch_tflops(ctx),
                **{k: v for k, v in outcome.items() if k != "status"}, **provenance},
                elapsed_s=sum(m.times)))
        return results

    def offline_job(self, params: dict[str, Any], ctx: EvalContext) -> dict[str, Any]:
        """The job the offline runner performs on a GPU box: this kernel module's source and
        the config (the box needs PyTorch and Triton only)."""
        source = Path(inspect.getfile(triton_kernel)).read_text()
        return {"kind": "python", "source": source, "entry": "offline_run", "batch": "jobs",
                "args": {"jobs": [job_of(params, ctx, self.seed, self.loads)]}}

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
