"""What packing a weight once saves: the library's GEMMs with B packed once (``dse_pack_b_*`` and
the ``_packed`` calls) against the same library reading a row-major B at every call.

    python benchmarks/packed_b.py [--dtype int8|bf16] [--rounds 5] [--threads N]

The shapes are the weight GEMMs of the Llama-3.1-8B deploy study
(``studies/deploy_llama3_8b_amx.yaml``: decode at batch 1, 8 and 32, a prefill of 512 tokens),
each weighted by its calls in the mix. The library is built from a one-kernel table (the AMX
family's general kernel): without AMX both sides run the streaming kernels (the packed side skips
their re-layout of B), with AMX the packed calls read B in the AMX kernels' layout (no re-layout
per call either), so the ratio shows what packing saves on this CPU, nothing else.

``--rounds`` times each shape is timed with B in place and packed, one after the other (which goes
first alternates); every product is checked against a float64 reference before its time counts
(int8 exactly, bf16 within 1e-5 K). A time is the median of settled batches of calls. Printed: per
shape the ratio packed / in place (time; below 1 is faster) per round, its median and spread,
the time packing took (once per weight), the summed time of the mix per round, and that ratio
against the goal of not being slower.

Exit status: 0 when packed is not slower on the mix (summed ratio median <= 1), 1 when it is, 3
when a product is wrong, 2 when it cannot run here (no AVX-512 VNNI / BF16, a bad argument).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from amx_library import STUDIES, STUDY_FILES, Shape, check, operands, settled_time, spread
from goals import against_goal

SUFFIX = {"int8": ("s8", "s8s8s32"), "bf16": ("bf16", "bf16bf16f32")}


def mix(dtype: str) -> list[Shape]:
    """The deploy study's shapes, each weighted by its calls."""
    from dse.study.spec import study_from_dict

    raw = yaml.safe_load((STUDIES / STUDY_FILES[dtype]).read_text())
    spec = study_from_dict(raw, f"<{raw['name']}>")
    weights = spec.weights or (1.0,) * len(spec.workloads)
    return [Shape(w.M, w.K, w.N, float(weight), "mix")
            for w, weight in zip(spec.workloads, weights, strict=True)]


def build(folder: Path, dtype: str) -> ctypes.CDLL:
    """The library of a one-kernel table (the family's general AMX kernel), typed."""
    from evaluators.hardware.amx_library import GENERAL, build_library

    table = {"format": "dse-dispatch/1", "study": "packed-b", "target": "cpu-amx",
             "space": "amx_gemm", "dtype": "int8-int32" if dtype == "int8" else "bf16-fp32",
             "b_layout": "row", "kernels": [{"id": 0, "params": GENERAL["amx"]}], "rules": [],
             "fallback": 0}
    library = folder / "libdsegemm.so"
    build_library(table, library)
    lib = ctypes.CDLL(str(library))
    short, suffix = SUFFIX[dtype]
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    getattr(lib, f"dse_gemm_{suffix}").argtypes = [i64, i64, i64, ptr, i64, ptr, i64, ptr, i64]
    getattr(lib, f"dse_pack_b_{short}").restype = ptr
    getattr(lib, f"dse_pack_b_{short}").argtypes = [i64, i64, ptr, i64]
    getattr(lib, f"dse_gemm_{suffix}_packed").argtypes = [i64, ptr, ptr, i64, ptr, i64]
    lib.dse_free_packed_b.argtypes = [ptr]
    return lib


def measure(lib: ctypes.CDLL, dtype: str, shape: Shape, rounds: int, batch_s: float,
            packed_times: list[float], pack_s: list[float]) -> str | None:
    """``rounds`` rounds of one shape, in place (``shape.onednn``: the baseline's list) and
    packed (``shape.dse``); why a product was wrong, or None."""
    short, suffix = SUFFIX[dtype]
    a, b, reference = operands(dtype, shape, seed=len(shape.name))
    c = np.zeros((shape.M, shape.N), np.int32 if dtype == "int8" else np.float32)
    M, K, N = shape.M, shape.K, shape.N
    gemm, gemm_packed = getattr(lib, f"dse_gemm_{suffix}"), getattr(lib,
                                                                   f"dse_gemm_{suffix}_packed")
    started = time.perf_counter()
    handle = getattr(lib, f"dse_pack_b_{short}")(K, N, b.ctypes.data, N)
    pack_s.append(time.perf_counter() - started)
    if not handle:
        return "packing B failed"
    calls = {"in place": lambda: gemm(M, N, K, a.ctypes.data, K, b.ctypes.data, N,
                                      c.ctypes.data, N),
             "packed": lambda: gemm_packed(M, handle, a.ctypes.data, K, c.ctypes.data, N)}
    times = {"in place": shape.onednn, "packed": shape.dse}
    try:
        for round_ in range(rounds):
            order = list(calls.items())
            for who, call in order if round_ % 2 == 0 else order[::-1]:
                c.fill(-7)
                if call() != 0:
                    return f"the {who} call returned non-zero"
                wrong = check(dtype, "dse", c, reference, K)
                if wrong:
                    return f"the {who} product of {shape.name} is wrong: {wrong}"
                times[who].append(settled_time(call, batch_s))
    finally:
        lib.dse_free_packed_b(handle)
    packed_times.append(statistics.median(shape.dse))
    return None


def main() -> int:
    """Run the benchmark; the exit status of the module docstring."""
    from evaluators.hardware.amx_detect import amx_problem, vector_problem

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=tuple(SUFFIX), default="int8")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-s", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    if args.rounds < 1 or args.batch_s <= 0 or args.threads < 1:
        print("packed_b.py: error: --rounds and --threads at least 1, --batch-s above 0",
              file=sys.stderr)
        return 2
    problem = vector_problem("int8-int32") or vector_problem("bf16-fp32")
    if problem:
        print(f"cannot run: {problem}", file=sys.stderr)
        return 2
    shapes = mix(args.dtype)
    with tempfile.TemporaryDirectory(prefix="dse-packed-b-") as folder:
        lib = build(Path(folder), args.dtype)
        lib.dse_set_threads(args.threads)
        engine = {1: "AMX (packed: B in the AMX kernels' layout)", 0: "AVX-512 streaming"}.get(
            lib.dse_gemm_engine(), "portable (DSE_GEMM_ISA=portable)")
        print(f"engine {engine}; {args.threads} threads; {len(shapes)} shapes "
              f"({'AMX absent: ' + amx_problem() if amx_problem() else 'AMX present'})")
        packed_times: list[float] = []
        for shape in shapes:
            pack_s: list[float] = []
            wrong = measure(lib, args.dtype, shape, args.rounds, args.batch_s, packed_times,
                            pack_s)
            if wrong:
                print(f"FAILED: {wrong}", file=sys.stderr)
                return 3
            ratios = [p / q for p, q in zip(shape.dse, shape.onednn, strict=True)]
            print(f"  {shape.name:>16} x{shape.weight:<4g} in place "
                  f"{statistics.median(shape.onednn) * 1e3:8.3f} ms  packed "
                  f"{statistics.median(shape.dse) * 1e3:8.3f} ms  packed / in place "
                  f"{spread(ratios)}  packing {pack_s[0] * 1e3:.1f} ms once", flush=True)
    summed = [sum(s.weight * s.dse[r] for s in shapes) / sum(s.weight * s.onednn[r]
                                                             for s in shapes)
              for r in range(args.rounds)]
    print(f"summed time of the mix (weighted by calls), packed / in place, each round: "
          f"{', '.join(f'{x:.3f}' for x in summed)}; median {spread(summed)}")
    met = against_goal(f"{args.dtype} Llama-3.1-8B mix, B packed once / read in place",
                       statistics.median(summed), 1.0, "x", higher_is_better=False)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
