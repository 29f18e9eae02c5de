"""A parameterised Triton GEMM, checked against ``torch.matmul`` and timed on the GPU.

This module needs only PyTorch and Triton (no dse): the ``triton`` evaluator runs it in the
measurement harness's worker process, and ``dse export-configs`` ships its source to a GPU box
where the offline runner executes it. ``TRITON_INTERPRET=1`` (set before Triton is imported)
runs the same kernel on the CPU with Triton's interpreter, for correctness only.

Jobs are dicts: M, K, N, dtype (``bf16``, ``fp16``, ``fp32``), b_layout (``row``: B stored
K x N; ``col``: N x K), the seven kernel parameters (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
SPLIT_K, num_stages, num_warps), a seed and how A and B are loaded (``loads``: ``tma``, through
the tensor memory accelerator of Hopper and later GPUs, or ``pointers``, addresses the kernel
computes, which a job without the key gets). Instead of the kernel parameters a job may carry
``selector``, a dispatch table as the Python module ``dse dispatch export --python`` writes:
the kernel that table picks for the job's M, K and N runs (:func:`dispatched`).
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import time
from collections import namedtuple
from typing import Any

RunOutput = namedtuple("RunOutput", "seconds correct detail")  # what the harness reads
KERNEL_PARAMS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K")
LOADS = ("tma", "pointers")  # how the kernel loads A and B
_KERNEL: Any = None
_DATA: dict[tuple[Any, ...], Any] = {}
_STATE: dict[tuple[Any, ...], Any] = {}


def interpreting() -> bool:
    """Whether Triton's CPU interpreter runs the kernel (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def _build_kernel() -> Any:
    # module globals: Triton resolves names in the kernel's globals when it compiles
    global triton, tl
    # fused multiply-adds, as every Triton before 3.9 compiles (3.9 warns when this is unset)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import triton
    import triton.language as tl

    @triton.jit
    def matmul(a, b, c, partials, arrivals, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
               stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr,
               EPILOGUE_ROWS: tl.constexpr, TMA: tl.constexpr, B_COL: tl.constexpr):
        # a tile's K slices are neighbouring programs (they run together, so the partial sums
        # the last one reads back are still in L2); tiles walk GROUP_M block rows together,
        # column by column (L2 reuse of A and B)
        pid, pid_k = tl.program_id(0) // SPLIT_K, tl.program_id(0) % SPLIT_K
        grid_m, grid_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
        width = GROUP_M * grid_n
        group = pid // width
        rows = tl.minimum(grid_m - group * GROUP_M, GROUP_M)
        pid_m = group * GROUP_M + (pid % width) % rows
        pid_n = (pid % width) // rows
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if TMA:
            # a and b are tensor descriptors: the tensor memory accelerator copies each tile
            # into shared memory (zeros past the edges), so the loop computes no addresses and
            # needs no masks
            for step in range(0, tl.cdiv(K, BLOCK_K * SPLIT_K)):
                k = (pid_k + step * SPLIT_K) * BLOCK_K
                x = a.load([pid_m * BLOCK_M, k])
                if B_COL:  # B stored N x K: its tile comes in as BLOCK_N x BLOCK_K
                    y = b.load([pid_n * BLOCK_N, k]).T
                else:
                    y = b.load([k, pid_n * BLOCK_N])
                acc = tl.dot(x, y, acc)
        else:
            # Rows and columns past the edge wrap onto valid ones (their results are never
            # stored), so only K needs a mask in the loop; addresses come from the step rather
            # than advanced pointers. The sm_90 loop of 128x256x64 is 99 instructions
            # (cuobjdump), against 140 with row and column masks and 156 with advanced pointers.
            rk = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
            ra = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
            rb = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
            for step in range(0, tl.cdiv(K, BLOCK_K * SPLIT_K)):
                k = rk + step * BLOCK_K * SPLIT_K
                x = tl.load(a + ra[:, None] * stride_am + k[None, :] * stride_ak,
                            mask=k[None, :] < K, other=0.0)
                y = tl.load(b + k[:, None] * stride_bk + rb[None, :] * stride_bn,
                            mask=k[:, None] < K, other=0.0)
                acc += tl.dot(x, y)
        target = c + rm[:, None] * stride_cm + rn[None, :] * stride_cn
        inside = (rm[:, None] < M) & (rn[None, :] < N)
        if SPLIT_K > 1:
            # Serial split-K: each K slice leaves its fp32 sums in the workspace; the last slice
            # of a tile to arrive adds them all up and writes C, then resets the tile's counter
            # for the next launch (one kernel: nothing to clear or convert around it).
            slab = M.to(tl.int64) * N
            tl.store(partials + pid_k * slab + rm[:, None] * N + rn[None, :], acc, mask=inside)
            tl.debug_barrier()  # every thread's sums are stored before the arrival counts
            arrived = tl.atomic_add(arrivals + pid, 1, sem="acq_rel", scope="gpu")
            if arrived == SPLIT_K - 1:
                # EPILOGUE_ROWS rows at a time (small tiles, not a second accumulator), every
                # slice's rows loaded at once (an unrolled loop: one round trip a step)
                for row in range(pid_m * BLOCK_M, pid_m * BLOCK_M + BLOCK_M, EPILOGUE_ROWS):
                    rr = row + tl.arange(0, EPILOGUE_ROWS)
                    part = (rr[:, None] < M) & (rn[None, :] < N)
                    total = tl.zeros((EPILOGUE_ROWS, BLOCK_N), dtype=tl.float32)
                    for other in tl.static_range(SPLIT_K):
                        total += tl.load(partials + other * slab + rr[:, None] * N + rn[None, :],
                                         mask=part, other=0.0, cache_modifier=".cg")
                    tl.store(c + rr[:, None] * stride_cm + rn[None, :] * stride_cn,
                             total.to(c.dtype.element_ty), mask=part)
                tl.atomic_xchg(arrivals + pid, 0)
        else:
            tl.store(target, acc.to(c.dtype.element_ty), mask=inside)

    return matmul


def kernel() -> Any:
    """The Triton GEMM kernel, built (and Triton imported) on first use."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = _build_kernel()
    return _KERNEL


def _torch_dtype(name: str) -> Any:
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def _b_col(job: dict[str, Any]) -> bool:
    """Whether the job's B is stored N x K (``col``) rather than K x N."""
    return job.get("b_layout", "row") == "col"


def _problem(job: dict[str, Any]) -> tuple[Any, ...]:
    return (job["M"], job["K"], job["N"], job["dtype"], job.get("b_layout", "row"),
            job.get("seed", 0))


def _operands(job: dict[str, Any]) -> tuple[Any, Any, Any]:
    """A (row-major), B (stored as the job's ``b_layout`` says: ``col`` holds it N x K, and the
    kernel and torch.matmul see its transposed view) and the fp32 reference, made once per
    problem and reused."""
    import torch

    key = _problem(job)
    if key not in _DATA:
        device = "cpu" if interpreting() else "cuda"
        generator = torch.Generator(device=device).manual_seed(job.get("seed", 0))
        dtype = _torch_dtype(job["dtype"])
        a = torch.randn(job["M"], job["K"], generator=generator, device=device).to(dtype)
        if _b_col(job):
            b = torch.randn(job["N"], job["K"], generator=generator, device=device).to(dtype).t()
        else:
            b = torch.randn(job["K"], job["N"], generator=generator, device=device).to(dtype)
        _DATA.clear()  # one problem at a time keeps GPU memory bounded
        tf32 = torch.backends.cuda.matmul.allow_tf32  # the baseline may have turned it on
        torch.backends.cuda.matmul.allow_tf32 = False  # the reference is full fp32
        try:
            _DATA[key] = (a, b, a.float() @ b.float())
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32
    return _DATA[key]


def _output(job: dict[str, Any], a: Any) -> Any:
    """C's buffer, in the inputs' type, filled with NaN: a tile the kernel fails to write fails
    the check (an empty buffer can hold a right answer from an earlier launch)."""
    import torch

    return torch.full((job["M"], job["N"]), float("nan"), dtype=a.dtype, device=a.device)


def _split_state(job: dict[str, Any], a: Any) -> tuple[Any, Any]:
    """Split-K's fp32 workspace (a slab of M x N per K slice) and its arrival counter per C
    tile, made once per problem and config shape (the kernel leaves the counters at zero)."""
    import torch
    import triton

    split = job["SPLIT_K"]
    tiles = triton.cdiv(job["M"], job["BLOCK_M"]) * triton.cdiv(job["N"], job["BLOCK_N"])
    key = ("split", split, tiles, job["M"], job["N"]) if split > 1 else ("split", 1)
    if key not in _STATE:
        for old in [k for k in _STATE if k[0] == "split"]:
            del _STATE[old]  # one at a time keeps GPU memory bounded
        size = split * job["M"] * job["N"] if split > 1 else 1
        _STATE[key] = (torch.empty(size, dtype=torch.float32, device=a.device),
                       torch.zeros(tiles if split > 1 else 1, dtype=torch.int32,
                                   device=a.device))
    return _STATE[key]


def _grid(job: dict[str, Any]) -> tuple[int]:
    """A program per C tile and K slice."""
    import triton

    tiles = triton.cdiv(job["M"], job["BLOCK_M"]) * triton.cdiv(job["N"], job["BLOCK_N"])
    return (tiles * job["SPLIT_K"],)


def uses_tma(job: dict[str, Any]) -> bool:
    """Whether the job loads A and B through tensor descriptors (TMA)."""
    loads = job.get("loads", "pointers")
    if loads not in LOADS:
        raise ValueError(f"loads={loads!r} is not one of {', '.join(LOADS)}")
    return loads == "tma"


def constants(job: dict[str, Any]) -> dict[str, int]:
    """The kernel's compile-time parameters for this job: the five of the design space, the
    rows split-K's epilogue reduces at a time (about 64 values a thread), whether A and B
    come through tensor descriptors and whether B is stored N x K."""
    rows = max(8, 2048 * job["num_warps"] // job["BLOCK_N"])
    return {**{p: job[p] for p in KERNEL_PARAMS}, "EPILOGUE_ROWS": min(job["BLOCK_M"], rows),
            "TMA": int(uses_tma(job)), "B_COL": int(_b_col(job))}


def descriptor_blocks(job: dict[str, Any]) -> tuple[list[int], list[int]]:
    """The tiles the TMA descriptors of A and B (as B is stored) copy a step."""
    bm, bn, bk = job["BLOCK_M"], job["BLOCK_N"], job["BLOCK_K"]
    return [bm, bk], ([bn, bk] if _b_col(job) else [bk, bn])


def _operand_arguments(job: dict[str, Any], a: Any, b: Any) -> tuple[Any, Any]:
    """A and B as the kernel takes them: the tensors, or with TMA their descriptors (B's over
    its storage: a ``col`` B is the transposed view of an N x K tensor)."""
    if not uses_tma(job):
        return a, b
    from triton.tools.tensor_descriptor import TensorDescriptor

    a_block, b_block = descriptor_blocks(job)
    stored = b.t() if _b_col(job) else b
    return (TensorDescriptor.from_tensor(a, a_block),
            TensorDescriptor.from_tensor(stored, b_block))


def _arguments(job: dict[str, Any], a: Any, b: Any, c: Any, partials: Any,
               arrivals: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The kernel's arguments for this job: positional, and its parameters by name."""
    options = {} if interpreting() else {"num_stages": job["num_stages"],
                                         "num_warps": job["num_warps"]}
    return ((*_operand_arguments(job, a, b), c, partials, arrivals, job["M"], job["N"],
             job["K"], a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
             c.stride(1)), {**constants(job), **options})


def _launcher(job: dict[str, Any], a: Any, b: Any, c: Any) -> Any:
    """A callable computing C = A @ B in one launch of the kernel (split-K reduces its slices
    inside it) and returning the compiled kernel Triton launched (None under the
    interpreter); its arguments (the descriptors' Python objects included) are made once, not
    at every launch (Triton still encodes each TMA descriptor for the GPU at every launch)."""
    positional, named = _arguments(job, a, b, c, *_split_state(job, a))
    launch = kernel()[_grid(job)]
    return lambda: launch(*positional, **named)


def compiled_facts(compiled: Any) -> dict[str, int]:
    """What the GPU's compiled kernel used: registers a thread, spilled registers, shared
    memory (the numbers ``dse triton compile`` predicts without a GPU)."""
    facts = {"registers": getattr(compiled, "n_regs", None),
             "spilled_registers": getattr(compiled, "n_spills", None),
             "shared_bytes": getattr(getattr(compiled, "metadata", None), "shared", None)}
    return {k: int(v) for k, v in facts.items() if isinstance(v, int)}


def tolerance(dtype: str, k: int) -> float:
    """Largest |error| / max|reference| accepted. The reference multiplies the same (rounded)
    inputs in fp32, so a 16-bit product differs by the output's rounding to its type and the
    order of fp32 sums (growing with sqrt(K)); fp32 inputs run as TF32 on the tensor cores,
    whose rounding of the inputs comes on top. Two units of the output's type: a product
    missing a few dozen of K's terms fails."""
    unit = {"bf16": 2 ** -8, "fp16": 2 ** -11, "fp32": 2 ** -10}[dtype]  # fp32 runs as TF32
    return (8 if dtype == "fp32" else 2) * unit + 2 ** -20 * max(k, 1) ** 0.5


# what Triton raises when it refuses a config (ptxas: too few registers for 16 warps, say)
COMPILER_ERRORS = ("OutOfResources", "CompilationError", "InterpreterError", "PTXASError")


def rejected_by_compiler(exc: BaseException) -> bool:
    """Whether Triton refused the config (resources, an invalid shape), not the run failing."""
    if type(exc).__name__ in COMPILER_ERRORS or "out of resource" in str(exc).lower():
        return True
    cause = exc.__cause__ or exc.__context__
    return cause is not None and rejected_by_compiler(cause)


def dispatched(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` with its kernel's parameters chosen by a dispatch table, where it has one:
    ``job["selector"]`` is the source of the module ``dse dispatch export --python`` writes,
    whose ``config(M, K, N)`` gives them (it needs nothing but Python). A job without one is
    returned as it is."""
    source = job.get("selector")
    if source is None:
        return job
    namespace: dict[str, Any] = {}
    exec(compile(source, "<dispatch table>", "exec"), namespace)  # noqa: S102 - the job's own
    params = namespace["config"](job["M"], job["K"], job["N"])
    chosen = {name: int(params[name]) for name in (*KERNEL_PARAMS, "num_stages", "num_warps")
              if name in params}
    return {**{k: v for k, v in job.items() if k != "selector"}, **chosen}


def check(**job: Any) -> dict[str, Any]:
    """Compile and run once: ``ok`` with the error, ``infeasible`` with the compiler's reason
    (out of resources, an invalid layout), or ``failed`` for a wrong product. A job with a
    dispatch table's selector runs the kernel the table picks (:func:`dispatched`)."""
    job = dispatched(job)
    a, b, reference = _operands(job)
    c = _output(job, a)
    try:
        compiled = _launcher(job, a, b, c)()
    except Exception as exc:  # noqa: BLE001 - compile errors surface here, reported as data
        name = type(exc).__name__
        if rejected_by_compiler(exc):
            return {"status": "infeasible", "reason": f"Triton: {name}: {exc}"[:2000]}
        return {"status": "failed", "reason": f"{name}: {exc}"[:2000]}
    error = float((c.float() - reference).abs().max()) / max(float(reference.abs().max()),
                                                              1e-30)
    if not error <= tolerance(job["dtype"], job["K"]):
        return {"status": "failed", "reason": f"wrong product: max relative error {error:.3g}"}
    return {"status": "ok", "max_relative_error": error,
            "loads": "tma" if uses_tma(job) else "pointers", **compiled_facts(compiled)}


def preflight(job: dict[str, Any]) -> dict[str, Any]:
    """Whether this machine can measure ``job``'s kind of config, before any is: PyTorch sees
    a CUDA GPU (or the interpreter runs), and Triton compiles, launches and gets right a small
    GEMM of the job's type. Returns :func:`device`; raises RuntimeError saying what is
    missing (a C compiler and Python's headers, which Triton builds its launcher with, say)."""
    import torch

    if not interpreting() and not torch.cuda.is_available():
        raise RuntimeError("PyTorch sees no CUDA GPU here (torch.cuda.is_available() is False)")
    small = {**job, "M": 64, "K": 64, "N": 64, "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16,
             "GROUP_M": 1, "SPLIT_K": 1, "num_stages": 2, "num_warps": 1}
    try:
        outcome = check(**small)
    finally:
        _DATA.clear()
    if outcome["status"] != "ok":
        raise RuntimeError(f"Triton could not compile and run a 64x64x64 {job['dtype']} GEMM "
                           f"here: {outcome['reason']}")
    return device()


def check_many(jobs: list[dict[str, Any]], workers: int = 8) -> list[dict[str, Any]]:
    """:func:`check` for several configs of one problem, compiling them in parallel threads
    (Triton's compiler runs ptxas as a subprocess) before each runs once."""

    import torch

    warm = getattr(kernel(), "warmup", None)
    scratch: list[Any] = []  # stand-ins for split-K's buffers: only their types matter here

    def compile_only(job: dict[str, Any]) -> None:
        if warm is None or interpreting():
            return
        a, b, _ = _operands(job)
        try:
            positional, named = _arguments(job, a, b, _output(job, a), *scratch)
            warm(*positional, grid=_grid(job), **named)
        except Exception:  # noqa: BLE001 - check() reports the error properly
            pass

    if jobs:
        a, _, _ = _operands(jobs[0])
        scratch.extend([torch.empty(1, dtype=torch.float32, device=a.device),
                        torch.zeros(1, dtype=torch.int32, device=a.device)])
        compile_only(jobs[0])  # the kernel's caches are made here, not raced for by threads
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(compile_only, jobs[1:]))
    return [check(**job) for job in jobs]


def _bench(fn: Any) -> float:
    """Median seconds of ``fn`` with Triton's benchmarking helper (CUDA events, L2 flushed)."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") / 1e3


def run(**job: Any) -> RunOutput:
    """One timed measurement of the config (the harness repeats it); a job with a dispatch
    table's selector runs the kernel the table picks (:func:`dispatched`)."""
    job = dispatched(job)
    a, b, reference = _operands(job)
    out = _output(job, a)
    launch = _launcher(job, a, b, out)
    start = time.perf_counter()
    launch()
    seconds = time.perf_counter() - start if interpreting() else _bench(launch)
    error = float((out.float() - reference).abs().max()) / max(float(reference.abs().max()),
                                                                1e-30)
    return RunOutput(seconds, error <= tolerance(job["dtype"], job["K"]),
                     f"max relative error {error:.3g}")


def torch_matmul(**job: Any) -> RunOutput:
    """``torch.matmul`` on the same operands: the baseline measured in the same run."""
    import torch

    a, b, _ = _operands(job)
    if interpreting():
        start = time.perf_counter()
        torch.matmul(a, b)
        return RunOutput(time.perf_counter() - start, True, "cpu")
    # fp32 inputs run on TF32 tensor cores in the kernel: let torch.matmul use them too
    torch.backends.cuda.matmul.allow_tf32 = True
    return RunOutput(_bench(lambda: torch.matmul(a, b)), True, "")


def device() -> dict[str, Any]:
    """What the runs are on: the GPU (or CPU under the interpreter) and the versions."""
    import torch
    import triton

    info = {"torch": torch.__version__, "triton": triton.__version__,
            "interpreted": interpreting()}
    if torch.cuda.is_available() and not interpreting():
        props = torch.cuda.get_device_properties(0)
        info.update(device=props.name, sms=props.multi_processor_count,
                    cuda=torch.version.cuda)
    else:
        info["device"] = "cpu (Triton interpreter)"
    return info


def _median(values: list[float]) -> float:
    """The middle value (the upper one of an even count), as the configs and baseline use."""
    return sorted(values)[len(values) // 2]


def _require_usable_gpu(exc: BaseException) -> None:
    """End this process when the GPU no longer works after ``exc`` (an illegal address poisons
    the process's CUDA context: every later config would fail for it). The offline runner,
    whose child process this is, then measures the call's configs again in fresh processes,
    in halves, down to the config at fault."""
    import torch

    if interpreting():
        return
    try:
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - the context is gone
        print(f"  the GPU context is lost ({type(exc).__name__}: {exc}); ending this process",
              file=sys.stderr, flush=True)
        os._exit(70)


def _measure_problem(jobs: list[dict[str, Any]], repeats: int) -> list[dict[str, Any]]:
    """Check, time and compare against torch.matmul the configs of one problem (a job with a
    dispatch table's selector: the kernel the table picks)."""
    jobs = [dispatched(job) for job in jobs]
    results: list[dict[str, Any]] = []
    baseline: float | None = None
    info = device()
    deadline = float(os.environ.get("DSE_RUNNER_DEADLINE", "inf"))  # the offline runner's
    for job, checked in zip(jobs, check_many(jobs), strict=True):
        label = " ".join(f"{p}={job[p]}" for p in (*KERNEL_PARAMS, "num_stages", "num_warps"))
        if time.time() >= deadline:  # left out of the results, exported again after ingest
            results.append({"status": "skipped", "reason": "the runner's time limit"})
            continue
        if checked["status"] != "ok":
            print(f"  {label}: {checked['status']}: {checked['reason'][:120]}", file=sys.stderr)
            results.append(checked)
            continue
        try:
            runs = [run(**job) for _ in range(repeats)]
            if baseline is None:
                baseline = _median([torch_matmul(**job).seconds for _ in range(repeats)])
        except Exception as exc:  # noqa: BLE001 - this config's failure, if the GPU still works
            _require_usable_gpu(exc)
            reason = f"{type(exc).__name__}: {exc}"[:2000]
            print(f"  {label}: failed: {reason[:120]}", file=sys.stderr)
            results.append({"status": "failed", "reason": reason})
            continue
        wrong = next((r.detail for r in runs if not r.correct), None)
        if wrong is not None:  # a product gone wrong after the check passed: a race, say
            print(f"  {label}: failed: timed product wrong ({wrong})", file=sys.stderr)
            results.append({"status": "failed", "reason": f"wrong timed product: {wrong}"})
            continue
        times = [r.seconds for r in runs]
        seconds = _median(times)
        flops = 2.0 * job["M"] * job["K"] * job["N"]
        print(f"  {label}: {flops / seconds / 1e12:.1f} TFLOP/s (torch.matmul "
              f"{flops / baseline / 1e12:.1f})", file=sys.stderr, flush=True)
        results.append({"status": "ok", "metrics": {
            "latency_s": seconds, "tops": flops / seconds / 1e12, "times_s": times,
            "torch_tflops": flops / baseline / 1e12,
            **{k: v for k, v in checked.items() if k != "status"}, **info}})
    return results


def offline_run(jobs: list[dict[str, Any]], repeats: int = 3) -> list[dict[str, Any]]:
    """The offline runner's entry: check, time and compare every job against torch.matmul, one
    problem at a time (its configs compiled in parallel); one result per job, in order."""
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    by_problem: dict[tuple[Any, ...], list[int]] = {}
    for index, job in enumerate(jobs):
        by_problem.setdefault(_problem(job), []).append(index)
    for (m, k, n, dtype, layout, _), indices in by_problem.items():
        print(f"{m}x{k}x{n} {dtype} (B {layout}): {len(indices)} configs", file=sys.stderr,
              flush=True)
        measured = _measure_problem([jobs[i] for i in indices], repeats)
        for index, result in zip(indices, measured, strict=True):
            results[index] = result
    return [r for r in results if r is not None]
