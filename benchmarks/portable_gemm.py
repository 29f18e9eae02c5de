"""The library's portable kernels (what a CPU without AVX-512 VNNI and BF16 runs) against oneDNN.

    python benchmarks/portable_gemm.py [--dtype int8|bf16] [--rounds 3] [--threads N]
        [--rows 1,8,32,128]

The library is built from a one-kernel table (as ``packed_b.py`` builds it) and loaded with
``DSE_GEMM_ISA=portable``, so the portable kernels serve every call on any x86-64 CPU. The
shapes are Llama-3.1-8B's 4096 x 4096 weight (its attention's query and output projections)
at ``--rows`` tokens. Each is timed against oneDNN in the same process and with the same
threads: in the same dtype (``torch._int_mm``, ``torch.matmul`` on bf16), and its fp32 GEMM on
the same shape (on a CPU without AVX-512 VNNI and BF16 its fastest). Every product is checked
against a float64 reference before its time counts (the library and oneDNN as
``amx_library.py`` checks them; fp32 within 1e-5 K). A time is the median of ``--rounds``
calls after untimed ones for 0.2 s (at least one: oneDNN's int8 and bf16 GEMMs take seconds a
call on such CPUs).

Printed: per shape each time and the ratios dse / oneDNN (below 1: the library is faster).
There is no goal (the tuned kernels' goals are ``amx_library.py``'s); exit status 0 when every
product is right, 3 when one is wrong, 2 when it cannot run (no PyTorch, a bad argument).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from amx_library import Shape, argument_error, check, operands, torch_problem
from packed_b import SUFFIX, build

WEIGHT = (4096, 4096)  # K, N


def timed(call: Callable[[], object], rounds: int, warm_s: float = 0.2) -> float:
    """The median of ``rounds`` timed calls, after untimed calls for ``warm_s`` seconds (the
    caller made the first)."""
    start = time.perf_counter()
    while time.perf_counter() - start < warm_s:
        call()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(lib, dtype: str, shape: Shape, rounds: int) -> tuple[dict[str, float], str | None]:
    """Seconds a call of the library, oneDNN in the dtype and oneDNN in fp32 on ``shape``;
    why a product was wrong, or None."""
    import torch

    a, b, reference = operands(dtype, shape, seed=len(shape.name))
    M, K, N = shape.M, shape.K, shape.N
    c = np.zeros((M, N), np.int32 if dtype == "int8" else np.float32)
    gemm = getattr(lib, f"dse_gemm_{SUFFIX[dtype][1]}")
    if dtype == "int8":
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        same = lambda: torch._int_mm(ta, tb)  # noqa: E731
        fa, fb = ta.float(), tb.float()
    else:
        ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
        same = lambda: torch.matmul(ta, tb)  # noqa: E731
        fa, fb = ta.float(), tb.float()
    calls: dict[str, Callable[[], object]] = {
        "dse": lambda: gemm(M, N, K, a.ctypes.data, K, b.ctypes.data, N, c.ctypes.data, N),
        "oneDNN": same,
        "oneDNN fp32": lambda: torch.matmul(fa, fb)}
    times = {}
    for who, call in calls.items():
        c.fill(-7)
        out = call()
        if who == "dse":
            wrong = f"returned {out}" if out != 0 else check(dtype, "dse", c, reference, K)
        elif who == "oneDNN":
            wrong = check(dtype, who, out.float().numpy() if dtype == "bf16" else out.numpy(),
                          reference, K)
        else:
            error = float(np.abs(out.numpy().astype(np.float64) - reference).max())
            wrong = None if error <= 1e-5 * K else f"largest error {error:.3g}"
        if wrong:
            return times, f"{who}'s product of {shape.name} is wrong: {wrong}"
        times[who] = timed(call, rounds)
    return times, None


def main() -> int:
    """Run the benchmark; the exit status of the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=tuple(SUFFIX), default="int8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rows", default="1,8,32,128", help="M of each shape (default "
                        "1,8,32,128)")
    args = parser.parse_args()
    try:
        rows = [int(x) for x in args.rows.split(",")]
    except ValueError:
        rows = []
    if argument_error(((args.rounds < 1, f"--rounds: at least 1, got {args.rounds}"),
                       (args.threads < 1, f"--threads: at least 1, got {args.threads}"),
                       (not rows or min(rows) < 1,
                        f"--rows: integers of at least 1, got {args.rows!r}")),
                      "portable_gemm.py"):
        return 2
    if torch_problem():
        print(f"cannot run: {torch_problem()}", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="dse-portable-") as folder:
        lib = build(Path(folder), args.dtype)
        os.environ["DSE_GEMM_ISA"] = "portable"  # read by the library's first call
        lib.dse_set_threads(args.threads)
        del os.environ["DSE_GEMM_ISA"]
        if lib.dse_gemm_engine() != -1:
            print("FAILED: the library did not take DSE_GEMM_ISA=portable", file=sys.stderr)
            return 3
        print(f"portable kernels, {args.threads} threads, torch {torch.__version__}; time a "
              f"call, the median of {args.rounds}", flush=True)
        for M in rows:
            shape = Shape(M, *WEIGHT)
            times, wrong = measure(lib, args.dtype, shape, args.rounds)
            if wrong:
                print(f"FAILED: {wrong}", file=sys.stderr)
                return 3
            dse, same, fp32 = times["dse"], times["oneDNN"], times["oneDNN fp32"]
            print(f"  {shape.name:>14} dse {dse * 1e3:9.2f} ms  oneDNN {args.dtype} "
                  f"{same * 1e3:10.2f} ms ({dse / same:.3f}x)  oneDNN fp32 {fp32 * 1e3:9.2f} ms "
                  f"({dse / fp32:.3f}x)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
