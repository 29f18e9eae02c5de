"""The ``iron`` evaluator: AMD's open-source whole-array GEMM (mlir-aie / IRON) on a Ryzen AI NPU.

It builds and runs ``programming_examples/basic/matrix_multiplication/whole_array`` with a
configuration's tile sizes, in one of two flows:

* ``make``: the Makefile-driven flow (``make`` to build, ``make run`` to run the C++ host, which
  prints ``Avg NPU matmul time: <t>us.`` and ``PASS!``);
* ``jit``: the newer JIT flow, ``python3 whole_array.py ...`` (compiles on first use, prints
  ``NPU time (avg/min/max us): a / b / c`` and ``PASS!``).

The stock design fixes what the paper's design makes free; such a configuration is reported as
unsupported by that design (an infeasible result naming the parameter), never run with the
parameter silently dropped.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from dse.core import (
    Capabilities,
    ConfigBatch,
    EvalContext,
    EvalResult,
    Evaluator,
    GemmWorkload,
    Status,
    UsageError,
)
from evaluators.hardware.harness import device_lock

DTYPES = {"int8": "i8", "int16": "i16", "int32": "i32", "bf16": "bf16"}
DEVICES = {"xdna": "npu", "xdna2": "npu2"}
COLUMNS = {"npu": (1, 2, 4), "npu2": (1, 2, 4, 8)}
FLOWS = ("make", "jit")
EXAMPLE_DIR = "programming_examples/basic/matrix_multiplication/whole_array"

_MAKE_TIME = re.compile(r"^Avg NPU matmul time: ([0-9.]+)us\.$", re.MULTILINE)
_JIT_TIME = re.compile(r"NPU time\s+\(avg/min/max us\):\s*([0-9.]+)\s*/\s*([0-9.]+)\s*/\s*"
                       r"([0-9.]+)")
_ERRORS = re.compile(r"^Error count: (\d+)", re.MULTILINE)
# compiler messages that mean "does not fit": the config is infeasible, not the run broken
_DOES_NOT_FIT = ("allocated buffers exceeded available memory",)


def unsupported(params: Mapping[str, Any], workload: GemmWorkload, device: str,
                flow: str) -> list[str]:
    """Why the stock whole-array design cannot run this config as given (empty: it can)."""
    why = []
    if params["k_mt"] != params["k_ct"]:
        why.append(f"k_mt={params['k_mt']}: the design stages one k_ct tile per MemTile "
                   "transfer (set k_mt = k_ct)")
    for name in ("buf_a_l1", "buf_b_l1", "buf_c_l1", "buf_a_l2", "buf_b_l2", "buf_c_l2"):
        if params[name] != 2:
            why.append(f"{name}={params[name]}: every object FIFO has depth 2 (a single C "
                       "buffer is the paper's change, not the stock design's)")
    if params["m_rows"] != 4:
        why.append(f"m_rows={params['m_rows']}: the design always uses 4 rows")
    if params["n_cols"] not in COLUMNS[device]:
        why.append(f"n_cols={params['n_cols']}: {device} accepts "
                   f"{', '.join(map(str, COLUMNS[device]))} columns")
    if params["orientation"] != "a_rows":
        why.append("orientation a_cols: the design broadcasts A along rows")
    if params["bd_scheme"] != "overlapped":
        why.append("bd_scheme sequential: the design's runtime sequence is fixed (ping-pong)")
    if workload.dtype.output == "int8" and workload.dtype.input != "int8":
        why.append(f"dtype {workload.dtype.name}: no kernel for it")
    m, k, n, cols = params["m_ct"], params["k_ct"], params["n_ct"], params["n_cols"]
    if workload.M % (4 * m) or workload.K % k or workload.N % (n * cols):
        why.append(f"shape {workload.shape}: M must be a multiple of 4*m_ct={4 * m}, K of "
                   f"k_ct={k}, N of n_ct*n_cols={n * cols} (the design does not pad)")
    elif flow == "jit" and (workload.M // m // 4) % 2:
        why.append(f"M/m_ct/4 = {workload.M // m // 4} must be even in the JIT flow")
    return why


@dataclass(frozen=True)
class Commands:
    """What to run, where: build (may be empty) then run."""

    cwd: Path
    build: list[list[str]]
    run: list[str]

    def shell(self) -> str:
        return " && ".join(shlex.join(c) for c in [*self.build, self.run])


def commands(params: Mapping[str, Any], workload: GemmWorkload, device: str, flow: str,
             example_dir: Path, iters: int, warmup: int) -> Commands:
    """The exact commands the mlir-aie documentation gives for this config and flow."""
    dt_in, dt_out = DTYPES[workload.dtype.input], DTYPES[workload.dtype.output]
    b_col_maj = "1" if params["b_layout"] == "col" else "0"
    emulate = device == "npu2" and workload.dtype.input == "bf16"
    if flow == "jit":
        return Commands(example_dir, [], [
            "python3", "whole_array.py", "--dev", device,
            "-M", str(workload.M), "-K", str(workload.K), "-N", str(workload.N),
            "-m", str(params["m_ct"]), "-k", str(params["k_ct"]), "-n", str(params["n_ct"]),
            "--n-aie-cols", str(params["n_cols"]), "--dtype_in", dt_in, "--dtype_out", dt_out,
            "--b-col-maj", b_col_maj,
            "--emulate-bf16-mmul-with-bfp16", "1" if emulate else "0",
            "-w", str(warmup), "-i", str(iters)])
    variables = [f"devicename={device}", f"M={workload.M}", f"K={workload.K}",
                 f"N={workload.N}", f"m={params['m_ct']}", f"k={params['k_ct']}",
                 f"n={params['n_ct']}", f"n_aie_cols={params['n_cols']}",
                 f"dtype_in={dt_in}", f"dtype_out={dt_out}", f"b_col_maj={b_col_maj}"]
    if emulate:
        variables.append("emulate_bfloat16_mmul_with_bfp16=1")
    # `make run runargs=...` replaces the whole string, so --b_col_maj is given again
    runargs = f"--b_col_maj {b_col_maj} --iters {iters} --warmup {warmup}"
    return Commands(example_dir, [["make", *variables]],
                    ["make", "run", *variables, f"runargs={runargs}"])


def parse_output(text: str, returncode: int | None, flow: str) -> tuple[Status, float | None,
                                                                        str | None]:
    """(status, average time in seconds, reason) from a run's output and exit status
    (``returncode`` None: the run was killed at its timeout)."""
    if returncode is None:
        return Status.TIMEOUT, None, "the run did not finish in time and was killed"
    lowered = text.lower()
    for message in _DOES_NOT_FIT:
        if message in lowered:
            return Status.INFEASIBLE, None, f"the compiler says: {message}"
    if flow == "jit":
        match = _JIT_TIME.search(text)
        seconds = float(match.group(1)) * 1e-6 if match else None
    else:
        match = _MAKE_TIME.search(text)
        seconds = float(match.group(1)) * 1e-6 if match else None
    errors = _ERRORS.search(text)
    if errors or "Failed." in text or "FAIL!" in text:
        count = f" ({errors.group(1)} wrong elements)" if errors else ""
        return Status.FAILED, None, f"verification failed{count}: a wrong product is no result"
    if "Kernel did not complete" in text:
        return Status.FAILED, None, "the kernel did not complete"
    if returncode != 0 or seconds is None:
        tail = " | ".join(line for line in text.strip().splitlines()[-3:])
        return Status.FAILED, None, f"build or run failed (exit {returncode}): {tail}"
    if "PASS!" not in text:
        return Status.FAILED, None, "no PASS! line: the product was not verified"
    return Status.OK, seconds, None


class IronEvaluator(Evaluator):
    """Builds and runs the stock whole-array GEMM for each config on the local NPU."""

    name: ClassVar[str] = "iron"
    version: ClassVar[str] = "1"
    result_options: ClassVar[tuple[str, ...]] = ("flow", "timeout_s")
    fidelity: ClassVar[str] = "hardware"
    spaces: ClassVar[tuple[str, ...]] = ("xdna_gemm",)  # search spaces it can score
    capabilities: ClassVar[Capabilities] = Capabilities(offline=True, raw_output=True)
    device: ClassVar[str | None] = "npu0"

    def __init__(self, mlir_aie_dir: str = "", flow: str = "make", iters: int = 20,
                 warmup: int = 5, timeout_s: float = 600.0) -> None:
        if flow not in FLOWS:
            raise ValueError(f"flow {flow!r} is not one of {', '.join(FLOWS)}")
        if not mlir_aie_dir:
            raise ValueError("give mlir_aie_dir: the checkout of mlir-aie to build from")
        self.example_dir = Path(mlir_aie_dir).expanduser() / EXAMPLE_DIR
        self.flow, self.iters, self.warmup, self.timeout_s = flow, iters, warmup, timeout_s

    def unavailable(self) -> str | None:
        """Why this machine cannot run the evaluator (None when it can): the design's example
        directory of the mlir-aie checkout must be here (a run would otherwise fail every config
        for a reason of the machine, not of the config)."""
        if not self.example_dir.is_dir():
            return (f"{self.example_dir} is not a directory: mlir_aie_dir should name the "
                    "mlir-aie checkout, built as its README says (or export the configs with "
                    "dse export-configs --evaluator iron for the NPU machine)")
        return None

    def offline_job(self, params: Mapping[str, Any], ctx: EvalContext) -> dict[str, Any] | str:
        """The runner's job: the flow's exact commands (or why the design cannot run it)."""
        plan = self.plan(params, ctx)
        if isinstance(plan, str):
            return plan
        return {"kind": "command", "commands": [*plan.build, plan.run], "cwd": str(plan.cwd),
                "timeout_s": self.timeout_s}

    def offline_result(self, entry: Mapping[str, Any]) -> EvalResult:
        """A runner's raw output (what the tools printed) as a result."""
        status, seconds, reason = parse_output(entry["output"], entry["returncode"], self.flow)
        metrics = {"latency_s": seconds} if seconds else {}
        return EvalResult(status, metrics, reason, entry.get("elapsed_s", 0.0))

    def plan(self, params: Mapping[str, Any], ctx: EvalContext) -> Commands | str:
        """The commands for a config, or why the stock design cannot run it."""
        device = DEVICES.get(ctx.target.name)
        if device is None:
            raise UsageError(f"the iron evaluator runs on xdna or xdna2, not {ctx.target.name}")
        why = unsupported(params, ctx.workload, device, self.flow)
        if why:
            return "unsupported by the stock whole-array design: " + "; ".join(why)
        return commands(params, ctx.workload, device, self.flow, self.example_dir, self.iters,
                        self.warmup)

    def evaluate_feasible(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        results = []
        for params in ctx.space.decode(batch):
            plan = self.plan(params, ctx)
            if isinstance(plan, str):
                results.append(EvalResult(Status.INFEASIBLE, reason=plan))
                continue
            start = time.perf_counter()
            with device_lock(self.device):
                output, code = run_commands(plan, self.timeout_s)
            status, seconds, reason = parse_output(output, code, self.flow)
            metrics: dict[str, Any] = {"command": plan.shell(), "flow": self.flow}
            if seconds is not None and status is Status.OK:
                metrics.update({"latency_s": seconds,
                                "tops": 2.0 * ctx.workload.macs / seconds / 1e12})
            results.append(EvalResult(status, metrics, reason, time.perf_counter() - start))
        return results


def run_commands(plan: Commands, timeout_s: float) -> tuple[str, int | None]:
    """Run the build and run commands; (output, exit status or None if killed at timeout)."""
    output = []
    deadline = time.monotonic() + timeout_s
    for argv in [*plan.build, plan.run]:
        try:
            done = subprocess.run(argv, cwd=plan.cwd, capture_output=True, text=True,
                                  timeout=max(deadline - time.monotonic(), 0.001))
        except subprocess.TimeoutExpired as exc:
            output.append(exc.stdout or "" if isinstance(exc.stdout, str) else "")
            return "".join(output), None
        except FileNotFoundError as exc:
            return f"{exc}", 127
        output.append(done.stdout + done.stderr)
        if done.returncode != 0:
            return "".join(output), done.returncode
    return "".join(output), 0
