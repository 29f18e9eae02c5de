"""dse's tuned AMX GEMMs against oneDNN (through PyTorch) and the engine's peak, in one run.

    python benchmarks/amx_vs_onednn.py [--dtype int8|bf16|both] [--runs 3] [--keep 48]
        [--storage amx.db] [--shapes 4096x4096x4096,...]

On a CPU with AMX (Intel Xeon, Sapphire Rapids or later) and the test extras installed (PyTorch's
CPU build). Per dtype and shape (MxKxN): the ladder study (the shipped ``studies/amx_*.yaml`` at
4096^3, the same space and ladder elsewhere) ranks the space with the model and measures its
best ``--keep``; then, ``--runs`` times, in this process and one after another: the peak probe,
dse's best measured again, and oneDNN (``torch._int_mm`` for int8 x int8 -> int32,
``torch.matmul`` on bf16 for bf16) on the same operands with as many threads. It prints each
run's TOPS, the ratios to oneDNN and to the probe, and their spread; it fails loudly when a
product is wrong (dse's are checked by the harness, oneDNN's here against dse's reference).

The Llama-3.1-8B shapes multiply activations by weights stored as PyTorch stores them (N x K,
B column-major): decode at batch 32 and a prefill of 512 tokens. Targets at 4096^3 on every
core: int8 at >= 2x oneDNN and >= 50 % of the probe, bf16 at >= 1.5x and >= 50 %.

``--engine avx512`` tunes and measures the AVX-512 kernels (the space's small-M engine) instead,
on the decode shapes by default: it runs on any CPU with AVX-512 VNNI and BF16, AMX or not (no
AMX probe then). ``--emulate`` checks the plumbing on a CPU without AMX (tiles computed in C,
small shapes): its figures mean nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

STUDIES = Path(__file__).parents[1] / "studies"
SQUARE = ("1024x1024x1024", "4096x4096x4096")
LLAMA = ("32x4096x4096", "32x4096x14336", "32x14336x4096", "512x4096x4096", "512x4096x14336",
         "512x14336x4096")
EMULATED = ("64x256x96", "48x320x64")
DECODE = ("1x4096x4096", "8x4096x4096", "32x4096x4096", "32x4096x14336")
TARGETS = {("int8", "4096x4096x4096"): (2.0, 0.5), ("bf16", "4096x4096x4096"): (1.5, 0.5)}
DTYPES = {"int8": "int8-int32", "bf16": "bf16-fp32"}


def avx512_only(spec: dict) -> dict:
    """``spec`` (a shipped AMX study) over the AVX-512 kernels alone, measured by an evaluator
    that needs no AMX."""
    spec["space"] = {"fix": {"engine": "avx512"},
                     "free": ["pack_b", "block_order", "micro_order", "split"]}
    spec["ladder"][1]["options"] = {"engine": "avx512"}
    return spec


def study_dict(dtype: str, shape: str, keep: int, emulate: bool, engine: str = "amx") -> dict:
    """The shipped study of ``dtype`` with its workload set to ``shape`` (weights column-major
    for the model's shapes), ``keep`` configs measured, and the AVX-512 engine alone when
    ``engine`` says so."""
    spec = yaml.safe_load((STUDIES / f"amx_{dtype}.yaml").read_text())
    if engine == "avx512":
        avx512_only(spec)
    if shape != "4096x4096x4096" or emulate or engine != "amx":
        spec["name"] = f"amx_{dtype}_{shape}" + ("" if engine == "amx" else f"_{engine}")
        spec["workload"] = {"shape": shape, "dtype": DTYPES[dtype],
                            "b_layout": "row" if shape in SQUARE else "col"}
    spec["ladder"][0]["keep"] = keep
    if emulate:
        spec["ladder"][1]["options"] = {"emulate": True, "max_repeats": 3}
    return spec


def tuned_best(dtype: str, shape: str, keep: int, storage: str, emulate: bool,
               engine: str) -> tuple:
    """Run (or resume) the ladder study; its best measured config and the study's context."""
    from dse import load_trials
    from dse.core import build_context
    from dse.storage.frames import best_trials
    from dse.study.runner import run_study
    from dse.study.spec import study_from_dict

    spec = study_from_dict(study_dict(dtype, shape, keep, emulate, engine), f"<{dtype} {shape}>")
    started = time.perf_counter()
    run_study(spec, storage)
    frame = load_trials(storage, spec.name)
    measured = frame[(frame["evaluator"] == "amx") & (frame["status"] == "ok")]
    if measured.empty:
        raise SystemExit(f"FAILED: no config of {dtype} {shape} measured correctly")
    best = best_trials(measured).iloc[0]
    w = spec.workloads[0]
    ctx = build_context("cpu-amx", w.dtype.name, w.shape, w.b_layout)
    params = ctx.space.resolve({name: best[name] for name in ctx.space.params()})
    confirmed = int((measured["fidelity"] == "hardware-confirmed").sum())
    print(f"  {dtype} {shape}: ladder of {len(measured) - confirmed} measurements"
          f"{f', its {confirmed} best confirmed' if confirmed else ''}, best "
          f"{best['tops']:.2f} TOPS in the study ({time.perf_counter() - started:.0f} s)",
          flush=True)
    return params, ctx


def onednn(dtype: str, ctx, threads: int) -> tuple[float, bool]:
    """oneDNN's time for the workload through PyTorch (median of settled batches) and whether
    its product matched the reference dse's kernels are checked against."""
    import torch

    from evaluators.hardware.amx_kernel import from_bf16, operands

    w = ctx.workload
    torch.set_num_threads(threads)
    a, b, _, reference = operands(w.dtype.name, w.M, w.N, w.K, 0, 0, w.b_layout)
    if dtype == "int8":
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        call = lambda: torch._int_mm(ta, tb.t() if w.b_layout == "col" else tb)  # noqa: E731
    else:
        ta = torch.from_numpy(from_bf16(a)).to(torch.bfloat16)
        tb = torch.from_numpy(from_bf16(b)).to(torch.bfloat16)
        call = lambda: torch.matmul(ta, tb.t() if w.b_layout == "col" else tb)  # noqa: E731
    out = call()
    error = np.abs(out.float().numpy().astype(np.float64) - reference).max()
    # bf16 output: its rounding, 2^-8 of the largest product, is what oneDNN may differ by
    tolerance = 0 if dtype == "int8" else np.abs(reference).max() / 128 + 1e-3 * w.K
    times = []
    for _ in range(5):
        start, calls = time.perf_counter(), 0
        while time.perf_counter() - start < 0.2 or calls < 2:
            call()
            calls += 1
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times), bool(error <= tolerance)


def compare(dtype: str, shape: str, params: dict, ctx, runs: int, emulate: bool,
            engine: str) -> list[dict]:
    """``runs`` rounds of probe, dse's best and oneDNN, one after another in this process."""
    from evaluators.hardware.amx import AmxEvaluator

    evaluator = AmxEvaluator(emulate=emulate, max_repeats=10,
                             engine="avx512" if engine == "avx512" else None)
    ops = 2.0 * ctx.workload.M * ctx.workload.N * ctx.workload.K
    rows = []
    try:
        for run in range(runs):
            result = evaluator.evaluate(ctx.space.encode([params]), ctx)[0]
            if not result.ok:
                raise SystemExit(f"FAILED: dse's {dtype} {shape} kernel: {result.reason}")
            seconds, correct = onednn(dtype, ctx, int(params["threads"]))
            if not correct:
                raise SystemExit(f"FAILED: oneDNN's {dtype} {shape} product is wrong")
            row = {"run": run + 1, "dse": result.metrics["tops"], "onednn": ops / seconds / 1e12,
                   "probe": result.metrics.get("probe_tops", float("nan"))}
            row["vs_onednn"] = row["dse"] / row["onednn"]
            row["of_probe"] = row["dse"] / row["probe"]
            rows.append(row)
            print(f"    run {row['run']}: dse {row['dse']:6.3f}  oneDNN {row['onednn']:6.3f}  "
                  f"probe {row['probe']:6.2f} TOPS   {row['vs_onednn']:.2f}x oneDNN, "
                  f"{row['of_probe']:.0%} of the probe", flush=True)
    finally:
        evaluator.close()
    return rows


def main() -> int:
    """Run the comparison; 0 when every target is met, 1 when one is missed, 2 when it cannot
    run here."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=("int8", "bf16", "both"), default="both")
    parser.add_argument("--shapes", help="comma-separated MxKxN (default: 1024^3, 4096^3 and "
                        "Llama-3.1-8B decode and prefill)")
    parser.add_argument("--runs", type=int, default=3, help="comparison rounds (default 3)")
    parser.add_argument("--keep", type=int, default=48, help="configs measured a shape")
    parser.add_argument("--storage", help="results database (default: a temporary file)")
    parser.add_argument("--emulate", action="store_true",
                        help="emulated tiles on small shapes: checks the plumbing only")
    parser.add_argument("--engine", choices=("amx", "avx512"), default="amx",
                        help="avx512: the small-M kernels alone, on the decode shapes")
    args = parser.parse_args()
    from evaluators.hardware.amx_detect import amx_problem, vector_problem

    problem = (vector_problem("int8-int32") or vector_problem("bf16-fp32")
               if args.engine == "avx512" else amx_problem())
    if problem and not args.emulate:
        print(f"cannot run: {problem}", file=sys.stderr)
        return 2
    if args.emulate:
        print("EMULATED TILES: correct products, meaningless times", flush=True)
    shapes = args.shapes.split(",") if args.shapes else (
        EMULATED if args.emulate else DECODE if args.engine == "avx512" else (*SQUARE, *LLAMA))
    dtypes = ("int8", "bf16") if args.dtype == "both" else (args.dtype,)
    storage = args.storage or str(Path(tempfile.mkdtemp()) / "amx.db")
    missed = []
    for dtype in dtypes:
        for shape in shapes:
            print(f"{dtype} {shape}", flush=True)
            params, ctx = tuned_best(dtype, shape, args.keep, storage, args.emulate, args.engine)
            rows = compare(dtype, shape, params, ctx, args.runs, args.emulate, args.engine)
            ratios = [r["vs_onednn"] for r in rows]
            shares = [r["of_probe"] for r in rows]
            print(f"  {dtype} {shape}: {min(ratios):.2f}-{max(ratios):.2f}x oneDNN, "
                  f"{min(shares):.0%}-{max(shares):.0%} of the same-run probe over "
                  f"{len(rows)} runs", flush=True)
            goal = TARGETS.get((dtype, shape)) if args.engine == "amx" else None
            if goal and not args.emulate and (statistics.median(ratios) < goal[0]
                                               or statistics.median(shares) < goal[1]):
                missed.append(f"{dtype} {shape}: wanted >= {goal[0]}x oneDNN and "
                              f">= {goal[1]:.0%} of the probe")
    for line in missed:
        print(f"MISSED {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
