"""The Triton GEMM compiled for an NVIDIA architecture ahead of time, on a machine without a GPU.

Triton compiles for a named target (``GPUTarget("cuda", 90, 32)``) without a driver, and
ships the ``ptxas`` that turns its PTX into machine code. Compiling each config the way a launch
on the GPU would (the same argument specialisation) gives what the hardware rung would meet:
compile errors, the shared memory Triton allocates, and the registers and spills ``ptxas``
reports. ``dse triton compile`` runs it over an exported configs file before GPU time is spent,
and the tests check the space's shared-memory and register rules against it.

Needs only Triton (and this package's kernel module).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluators.hardware import triton_kernel

_POINTERS = {"a": None, "b": None, "c": None, "partials": "fp32", "arrivals": "i32"}


def _strides(job: dict[str, Any]) -> dict[str, int]:
    """The integer arguments a launch passes, with B stored as the job's layout says."""
    m, k, n = job["M"], job["K"], job["N"]
    col = job.get("b_layout", "row") == "col"
    return {"M": m, "N": n, "K": k, "stride_am": k, "stride_ak": 1,
            "stride_bk": 1 if col else n, "stride_bn": k if col else 1,
            "stride_cm": n, "stride_cn": 1}


def specialised_signature(job: dict[str, Any]) -> tuple[dict[str, str], dict[Any, Any],
                                                         dict[Any, Any]]:
    """(signature, constexprs, attrs) as Triton's launcher specialises this job's call: the
    operands 16-byte aligned (or, with TMA, A and B tensor descriptors of the job's tiles), an
    integer equal to 1 folded in as a constant, one divisible by 16 marked so (which is what
    lets the loads vectorise and the K loop pipeline)."""
    fn = triton_kernel.kernel()
    values = _strides(job)
    constants = triton_kernel.constants(job)
    descriptors = dict(zip("ab", triton_kernel.descriptor_blocks(job), strict=True)) \
        if triton_kernel.uses_tma(job) else {}
    signature: dict[str, str] = {}
    constexprs: dict[Any, Any] = {}
    attrs: dict[Any, Any] = {}
    for index, name in enumerate(fn.arg_names):
        if name in descriptors:
            signature[name] = (f"tensordesc<{job['dtype']}"
                               f"[{', '.join(map(str, descriptors[name]))}]>")
        elif name in _POINTERS:  # the operands and C in the job's type, split-K's buffers
            signature[name] = "*" + (_POINTERS[name] or job["dtype"])
            attrs[(index,)] = [["tt.divisibility", 16]]
        elif name in values and values[name] == 1:
            signature[name], constexprs[(index,)] = "constexpr", 1
        elif name in values:
            signature[name] = "i32" if values[name] < 2 ** 31 else "i64"
            if values[name] % 16 == 0:
                attrs[(index,)] = [["tt.divisibility", 16]]
        else:  # the kernel's compile-time parameters
            signature[name], constexprs[(index,)] = "constexpr", constants[name]
    return signature, constexprs, attrs


def _ptxas_report(ptx: str, arch: int) -> dict[str, int]:
    """Registers per thread and spilled bytes, as ``ptxas -v`` reports them."""
    from triton.backends.nvidia.compiler import get_ptxas

    suffix = "a" if arch >= 90 else ""
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(ptx)
        done = subprocess.run([get_ptxas(arch).path, "-v", f"--gpu-name=sm_{arch}{suffix}",
                               str(source), "-o", str(Path(folder) / "kernel.cubin")],
                              capture_output=True, text=True, check=True)
    text = done.stdout + done.stderr
    registers = re.search(r"Used (\d+) registers", text)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    return {"registers": int(registers.group(1)) if registers else -1,
            "spill_bytes": int(spills.group(1)) + int(spills.group(2)) if spills else 0}


def _mma_kind(ptx: str) -> str:
    """Which tensor-core instructions the kernel uses: Hopper's warp-group ``wgmma``, the
    warp-level ``mma`` of earlier GPUs, or ``none``."""
    if "wgmma" in ptx:
        return "wgmma"
    return "mma" if "mma.sync" in ptx else "none"


# CPython 3.11 (3.11.7 here) can raise "AST constructor recursion depth mismatch" when threads
# build ASTs at once (CPython gh-106905): Triton parses the kernel in each compile
AST_ATTEMPTS = 3


def compile_job(job: dict[str, Any], arch: int = 90) -> dict[str, Any]:
    """Compile one config for ``sm_<arch>``: ``ok`` with Triton's shared memory, ptxas's
    registers and spills, the MMA instructions used, whether it loads through TMA and the
    compile seconds; ``infeasible``
    when the compiler refuses the config (as a GPU run records it) or ``error``, with the
    compiler's message."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    start = time.perf_counter()
    try:
        signature, constexprs, attrs = specialised_signature(job)
        for attempt in range(AST_ATTEMPTS):
            try:
                compiled = triton.compile(
                    ASTSource(fn=triton_kernel.kernel(), signature=signature,
                              constexprs=constexprs, attrs=attrs),
                    target=GPUTarget("cuda", arch, 32),
                    options={"num_warps": job["num_warps"], "num_stages": job["num_stages"]})
                break
            except SystemError as exc:  # CPython's own, not the compiler's: compile again
                if "recursion depth mismatch" not in str(exc) or attempt + 1 == AST_ATTEMPTS:
                    raise
        report = _ptxas_report(compiled.asm["ptx"], arch)
    except Exception as exc:  # noqa: BLE001 - the compiler's message is the result
        refused = triton_kernel.rejected_by_compiler(exc)  # as the GPU run would judge it
        return {"status": "infeasible" if refused else "error",
                "reason": f"{type(exc).__name__}: {exc}"[:2000],
                "seconds": time.perf_counter() - start}
    return {"status": "ok", **triton_kernel.compiled_facts(compiled), **report,
            "mma": _mma_kind(compiled.asm["ptx"]),
            "tma": "cp.async.bulk.tensor" in compiled.asm["ptx"],  # TMA copies in the PTX
            "seconds": time.perf_counter() - start}


def compile_many(jobs: list[dict[str, Any]], arch: int = 90, workers: int = 4,
                 progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """:func:`compile_job` for each job, ``workers`` at a time (the C++ passes and ptxas run
    outside Python's lock), in order; ``progress(done, total)`` after each. What Triton prints
    about a failed compile (the whole PTX) is kept out of the output: the result has the
    reason."""
    triton_kernel.kernel()  # build the kernel once, before the threads share it
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    with contextlib.redirect_stdout(io.StringIO()), \
            concurrent.futures.ThreadPoolExecutor(max(1, workers)) as pool:
        futures = {pool.submit(compile_job, job, arch): i for i, job in enumerate(jobs)}
        for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
            results[futures[future]] = future.result()
            if progress is not None:
                progress(done, len(jobs))
    return [r for r in results if r is not None]
