"""The library ``dse dispatch build`` makes of the Llama-3.1-8B deploy study, against oneDNN.

    python benchmarks/amx_library.py [--dtype int8|bf16] [--rounds 5] [--storage lib.db]
        [--kernels K] [--keep 12] [--out DIR] [--sets mix,outside]

On a CPU with AMX the study (``studies/deploy_llama3_8b_amx.yaml``, or its ``_bf16`` twin with
``--dtype bf16``) is run as shipped; on one without AMX (an AMD Zen 4, say) over the AVX-512
kernels alone (``engine: avx512``, measured natively), under a name of its own. A run resumes
the study from ``--storage`` (nothing is measured twice). Then ``dse cover STUDY --kernels K
--out table.json`` (default: as many kernels as shapes, each shape its own measured best) and
the family's library builder (``dse dispatch build``'s) make ``libdsegemm.so``; the library is
loaded with ctypes.

Two sets of shapes (MxKxN, B row-major as the library's ABI takes it):

* ``mix``: the study's own shapes, each weighted by its calls in the mix;
* ``outside``: shapes the study never saw: Qwen2.5-7B's and Mistral-7B's weight GEMMs at
  decode batch 1 and 16 and a prefill of 256 tokens, Llama-3.1-8B's at batch 4 (another M on
  known weights), and odd sizes (7x1000x999, 33x4097x511, 1x3x5, 100x100x100, 3x17x4099).

``--rounds`` times, in this process, each shape's operands are multiplied by the library and by
oneDNN (``torch._int_mm`` for int8 x int8 -> int32, ``torch.matmul`` on bf16 for bf16, both with
``torch.set_num_threads`` equal to the library's threads), one after the other; every product is
checked against a float64 reference before its time counts (int8 exactly; bf16: the library
within 1e-5 K, the kernels' own tolerance for inputs in [-1, 1], oneDNN, whose output is rounded
to bf16, within 2^-7 of the largest product plus 1e-3 K). A time is the median of settled
batches of calls lasting ``--batch-s`` each. Printed: per shape the ratio dse / oneDNN (time;
below 1 is faster) of each round, its median and spread, and per set the ratio of summed times
(the mix weighted by its calls, the outside shapes each once) per round. The library is also
timed with B packed once (``dse_pack_b_*`` before the rounds, the ``_packed`` calls; its product
checked the same), printed beside, as a weight a program multiplies many times would be: the
goals are judged on the plain calls. Goals: int8, the mix's
summed time <= 0.6x oneDNN's and no outside shape slower than oneDNN (its median ratio <= 1);
bf16, the mix's summed time <= 0.75x oneDNN's.

Exit status: 0 when every goal is met, 1 when a goal is missed, 3 when a product is wrong (the
figures that follow it are not counted), 2 when it cannot run here (no AVX-512 VNNI / BF16, no
PyTorch, a bad argument).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from goals import against_goal

STUDIES = Path(__file__).parents[1] / "studies"
STUDY_FILES = {"int8": "deploy_llama3_8b_amx.yaml", "bf16": "deploy_llama3_8b_amx_bf16.yaml"}
DTYPES = {"int8": "int8-int32", "bf16": "bf16-fp32"}
# the summed-time goals of the mix (dse / oneDNN), and of each outside shape (int8)
MIX_GOAL = {"int8": 0.6, "bf16": 0.75}
OUTSIDE_GOAL = {"int8": 1.0}
# weight GEMMs of other models at other token counts; Llama-3.1-8B at a batch it was not tuned on
OUTSIDE_MODELS = (("qwen2.5-7b", {"decode": [1, 16], "prefill": [256]}),
                  ("mistral-7b-v0.3", {"decode": [1, 16], "prefill": [256]}),
                  ("llama-3.1-8b", {"decode": [4]}))
ODD = ("7x1000x999", "33x4097x511", "1x3x5", "100x100x100", "3x17x4099")


@dataclass
class Shape:
    """One GEMM of a set: M x K x N, how often the set runs it, where it comes from."""

    M: int
    K: int
    N: int
    weight: float = 1.0
    source: str = ""
    dse: list[float] = field(default_factory=list)  # seconds a call, each round
    onednn: list[float] = field(default_factory=list)
    packed: list[float] = field(default_factory=list)  # the library, B packed once

    @property
    def name(self) -> str:
        """``MxKxN``."""
        return f"{self.M}x{self.K}x{self.N}"


def study_spec(dtype: str, engine: str) -> dict[str, Any]:
    """The shipped deploy study of ``dtype``; over the AVX-512 kernels alone (and named so)
    when ``engine`` is ``avx512``."""
    spec = yaml.safe_load((STUDIES / STUDY_FILES[dtype]).read_text())
    if engine == "avx512":
        # the study's own free parameters, the engine fixed (amx_vs_onednn.avx512_only also
        # frees micro_order, which takes a shape of this mix past the exhaustive limit)
        free = [p for p in spec["space"]["free"] if p != "engine"]
        spec["space"] = {"fix": {"engine": "avx512"}, "free": free}
        spec["ladder"][1]["options"] = {"engine": "avx512"}
        spec["name"] += "-avx512"
    return spec


def run_study(dtype: str, engine: str, storage: str, keep: int | None) -> str:
    """Run (or resume) the deploy study into ``storage``, a line per shape as it finishes;
    its name."""
    from dse.study.runner import run_study as run
    from dse.study.spec import study_from_dict

    raw = study_spec(dtype, engine)
    if keep is not None:
        raw["ladder"][0]["keep"] = keep
        raw["name"] += f"-keep{keep}"
    spec = study_from_dict(raw, f"<{raw['name']}>")
    started = time.perf_counter()
    finished: set[str] = set()

    def progress(workload: str, done: int, total: int, best: float | None,
                 direction: str = "maximize") -> None:
        if total and done >= total and workload not in finished:
            finished.add(workload)
            best_text = f"best {best:.3f} TOPS" if best is not None and best == best else ""
            print(f"  study {spec.name}: {workload} done ({done} trials) {best_text} "
                  f"[{time.perf_counter() - started:.0f} s]", flush=True)

    print(f"study {spec.name}: {len(spec.workloads)} shapes, engine {engine} "
          f"(resumed from {storage} where measured)", flush=True)
    run(spec, storage, progress=progress)
    print(f"study {spec.name}: done in {time.perf_counter() - started:.0f} s", flush=True)
    return spec.name


def build(name: str, storage: str, kernels: int | None, folder: Path) -> tuple[Path, dict]:
    """``dse cover`` (the project's command) writes the dispatch table, and the AMX family's
    library builder (what ``dse dispatch build`` runs) compiles it: the library's path and the
    table. The builder is called by its family's name: a table covered from a study with a
    ``space`` section names that section, not the family, where ``dse dispatch build`` looks."""
    from dse.cli import main as dse
    from dse.core.errors import UsageError
    from dse.core.registry import families

    table_path, library = folder / "table.json", folder / "libdsegemm.so"
    k = kernels or len(_study_shapes(name, storage))
    print(f"dse cover {name} --kernels {k} --out {table_path}", flush=True)
    if dse(["cover", name, "--storage", storage, "--kernels", str(k), "--out",
            str(table_path)]) != 0:
        raise Failure(2, f"dse cover {name} failed (see above)")
    table = json.loads(table_path.read_text())
    print(f"building {library} (the amx_gemm family's library builder)", flush=True)
    started = time.perf_counter()
    try:
        families()["amx_gemm"].build_library(table, library)
    except UsageError as exc:
        raise Failure(2, f"the library does not build: {exc}") from None
    print(f"built in {time.perf_counter() - started:.1f} s", flush=True)
    return library, table


def _study_shapes(name: str, storage: str) -> set[str]:
    from dse import load_trials

    return set(load_trials(storage, name)["shape"])


class Failure(Exception):
    """The benchmark cannot go on: its exit status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def mix_shapes(table: dict) -> list[Shape]:
    """The study's shapes, each weighted by its calls in the mix (from the dispatch table)."""
    return [Shape(s["M"], s["K"], s["N"], float(s["weight"]), "mix") for s in table["shapes"]]


def outside_shapes(seen: set[tuple[int, int, int]]) -> list[Shape]:
    """Other models' weight GEMMs and odd sizes, none of them a shape of the study."""
    from dse.core.mix import model_mix, model_of, token_passes

    out: dict[tuple[int, int, int], Shape] = {}
    for model, tokens in OUTSIDE_MODELS:
        for s in model_mix(model_of(model), token_passes(tokens)):
            key = (s.M, s.K, s.N)
            if key not in seen and key not in out:
                out[key] = Shape(s.M, s.K, s.N, 1.0, f"{model} {s.roles[0]}")
    for text in ODD:
        M, K, N = (int(x) for x in text.split("x"))
        out.setdefault((M, K, N), Shape(M, K, N, 1.0, "odd size"))
    return list(out.values())


@dataclass
class Library:
    """The built library through ctypes, its GEMM of one dtype."""

    path: Path
    dtype: str

    def __post_init__(self) -> None:
        self.lib = ctypes.CDLL(str(self.path))
        self.fn = (self.lib.dse_gemm_s8s8s32 if self.dtype == "int8" else
                   self.lib.dse_gemm_bf16bf16f32)
        self.fn.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p, ctypes.c_int64] * 3
        self.fn.restype = ctypes.c_int
        self.lib.dse_gemm_kernel.argtypes = [ctypes.c_int64] * 3

    def kernel(self, shape: Shape) -> str:
        """Which of the library's kernels serves ``shape`` (``dse_gemm_kernel``)."""
        index = self.lib.dse_gemm_kernel(shape.M, shape.N, shape.K)
        return {-1: "streaming", -2: "general AVX-512", -4: "portable"}.get(
            index, f"table kernel {index}")

    def call(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> Callable[[], int]:
        """A call of the library on these operands (arguments converted once)."""
        M, K = a.shape
        N = b.shape[1]
        args = (M, N, K, a.ctypes.data, a.strides[0] // a.itemsize, b.ctypes.data,
                b.strides[0] // b.itemsize, c.ctypes.data, c.strides[0] // c.itemsize)
        fn = self.fn
        return lambda: fn(*args)

    def packed_call(self, a: np.ndarray, b: np.ndarray,
                    c: np.ndarray) -> tuple[Callable[[], int], Callable[[], None]]:
        """A call of the library on A with B packed once (``dse_pack_b_*``, now), and what
        frees the packed B."""
        short, suffix = ("s8", "s8s8s32") if self.dtype == "int8" else ("bf16", "bf16bf16f32")
        pack, gemm = getattr(self.lib, f"dse_pack_b_{short}"), getattr(
            self.lib, f"dse_gemm_{suffix}_packed")
        pack.restype = ctypes.c_void_p
        pack.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64]
        gemm.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                         ctypes.c_void_p, ctypes.c_int64]
        self.lib.dse_free_packed_b.argtypes = [ctypes.c_void_p]
        M, K = a.shape
        handle = pack(K, b.shape[1], b.ctypes.data, b.strides[0] // b.itemsize)
        if not handle:
            raise MemoryError("dse_pack_b: no memory for the packed B")
        args = (M, handle, a.ctypes.data, a.strides[0] // a.itemsize, c.ctypes.data,
                c.strides[0] // c.itemsize)
        return (lambda: gemm(*args)), (lambda: self.lib.dse_free_packed_b(handle))


def operands(dtype: str, shape: Shape, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N, row-major) drawn as the kernels' harness draws them (int8 over
    its whole range, bf16 in [-1, 1]), and the float64 reference product, computed a block of
    columns at a time (a float64 copy of an LM head's B would take 4 GiB). Nothing is kept
    between shapes (the harness's own ``operands`` caches every shape it draws)."""
    from evaluators.hardware.amx_kernel import from_bf16, to_bf16

    rng = np.random.default_rng(seed)
    M, K, N = shape.M, shape.K, shape.N
    if dtype == "int8":
        a = rng.integers(-128, 128, (M, K), dtype=np.int8)
        b = rng.integers(-128, 128, (K, N), dtype=np.int8)
        widen = lambda x: x.astype(np.float64)  # noqa: E731
    else:
        a = to_bf16(rng.uniform(-1, 1, (M, K)).astype(np.float32))
        b = np.empty((K, N), np.uint16)
        for k in range(0, K, 1024):  # drawn a block of rows at a time: no float64 copy of B
            b[k:k + 1024] = to_bf16(rng.uniform(-1, 1, (min(1024, K - k), N)).astype(np.float32))
        widen = lambda x: from_bf16(x).astype(np.float64)  # noqa: E731
    a64 = widen(a)
    reference = np.empty((M, N), np.float64)
    step = max(1, (1 << 24) // K)  # columns of a block: 128 MiB of float64 B
    for n in range(0, N, step):
        reference[:, n:n + step] = a64 @ widen(b[:, n:n + step])
    return a, b, reference


def settled_time(call: Callable[[], Any], batch_s: float, batches: int = 3) -> float:
    """Seconds a call: the median of ``batches`` batches, each of as many calls as last
    ``batch_s`` (at least 2)."""
    times = []
    for _ in range(batches):
        start, calls = time.perf_counter(), 0
        while calls < 2 or time.perf_counter() - start < batch_s:
            call()
            calls += 1
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def check(dtype: str, who: str, out: np.ndarray, reference: np.ndarray, K: int) -> str | None:
    """Why ``out`` is wrong, or None: int8 exactly; bf16 within the library's tolerance (1e-5
    K, as the kernels' harness) or, for oneDNN's bf16-rounded output, 2^-7 of the largest
    product plus 1e-3 K."""
    if dtype == "int8":
        wrong = int(np.count_nonzero(out != reference))
        return f"{wrong} of {out.size} elements differ from the exact product" if wrong else None
    if not np.isfinite(out).all():
        return "not finite"
    error = float(np.abs(out.astype(np.float64) - reference).max())
    tolerance = 1e-5 * K if who == "dse" else np.abs(reference).max() / 128 + 1e-3 * K
    return None if error <= tolerance else f"largest error {error:.3g} (tolerance {tolerance:.3g})"


def measure_shape(lib: Library, dtype: str, shape: Shape, rounds: int, batch_s: float,
                  threads: int) -> str | None:
    """``rounds`` rounds of the library and oneDNN on one shape, interleaved (which goes first
    alternates); every product checked before and after its round's timing. Why a product was
    wrong, or None."""
    import torch

    a, b, reference = operands(dtype, shape, seed=len(shape.name))
    c = np.zeros((shape.M, shape.N), np.int32 if dtype == "int8" else np.float32)
    dse_call = lib.call(a, b, c)
    packed_call, free_packed = lib.packed_call(a, b, c)
    if dtype == "int8":
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        onednn_call = lambda: torch._int_mm(ta, tb)  # noqa: E731
    else:  # the same bits viewed as bfloat16: no copy
        ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
        onednn_call = lambda: torch.matmul(ta, tb)  # noqa: E731
    torch.set_num_threads(threads)
    lib.lib.dse_set_threads(threads)

    def run_library(call: Callable[[], int], times: list[float]) -> str | None:
        c.fill(-7)
        status = call()
        if status != 0:
            return f"the library returned {status}"
        wrong = check(dtype, "dse", c, reference, shape.K)
        if wrong:
            return wrong
        times.append(settled_time(call, batch_s))
        return check(dtype, "dse", c, reference, shape.K)

    def run_onednn() -> str | None:
        out = onednn_call().float().numpy() if dtype == "bf16" else onednn_call().numpy()
        wrong = check(dtype, "oneDNN", out, reference, shape.K)
        if wrong:
            return wrong
        shape.onednn.append(settled_time(onednn_call, batch_s))
        return None

    order = (("dse", lambda: run_library(dse_call, shape.dse)), ("oneDNN", run_onednn),
             ("dse (B packed once)", lambda: run_library(packed_call, shape.packed)))
    try:
        for round_ in range(rounds):
            for who, run in order if round_ % 2 == 0 else order[::-1]:
                wrong = run()
                if wrong:
                    return f"{who}'s product of {shape.name} is wrong: {wrong}"
    finally:
        free_packed()
    return None


def spread(values: list[float]) -> str:
    """``median (min-max)``."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def report_set(label: str, shapes: list[Shape]) -> list[float]:
    """Print each shape's ratio dse / oneDNN per round and the set's summed-time ratio per
    round; those summed ratios."""
    print(f"\n{label}: time dse / oneDNN, per round (below 1: the library is faster)")
    width = max(len(s.name) for s in shapes)
    for s in shapes:
        ratios = [d / o for d, o in zip(s.dse, s.onednn, strict=True)]
        packed = [p / o for p, o in zip(s.packed, s.onednn, strict=True)]
        weight = f"x{s.weight:g}" if s.weight != 1 else ""
        print(f"  {s.name:>{width}} {weight:>6} dse {statistics.median(s.dse) * 1e3:9.3f} ms  "
              f"oneDNN {statistics.median(s.onednn) * 1e3:9.3f} ms  ratio {spread(ratios)}  "
              f"B packed once: ratio {spread(packed)}  {s.source}")
    rounds = len(shapes[0].dse)
    summed = [sum(s.weight * s.dse[r] for s in shapes) /
              sum(s.weight * s.onednn[r] for s in shapes) for r in range(rounds)]
    print(f"  summed time (weighted by calls), dse / oneDNN, each round: "
          f"{', '.join(f'{x:.3f}' for x in summed)}; median {spread(summed)}")
    packed = [sum(s.weight * s.packed[r] for s in shapes) /
              sum(s.weight * s.onednn[r] for s in shapes) for r in range(rounds)]
    print(f"  the same with B packed once (dse_pack_b_*, not timed), dse / oneDNN, each round: "
          f"{', '.join(f'{x:.3f}' for x in packed)}; median {spread(packed)}")
    return summed


def argument_error(checks: Iterable[tuple[bool, str]], script: str) -> bool:
    """Whether one of ``checks`` (wrong, why) is wrong; the first printed as ``script``'s
    error."""
    for wrong, why in checks:
        if wrong:
            print(f"{script}: error: {why}", file=sys.stderr)
            return True
    return False


def torch_problem() -> str | None:
    """Why PyTorch (oneDNN's way in here) cannot be imported, or None."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return "PyTorch is not installed (pip install -e '.[test]'); oneDNN is the baseline " \
               "through it"
    return None


def engine_here() -> tuple[str, str | None]:
    """The engine the study runs on this CPU (AMX where it has it, else AVX-512) and why not
    even AVX-512 can run, if so."""
    from evaluators.hardware.amx_detect import amx_problem, vector_problem

    if amx_problem() is None:
        return "amx", None
    return "avx512", vector_problem("int8-int32") or vector_problem("bf16-fp32")


def main() -> int:
    """Run the benchmark; the exit status of the module docstring."""
    import os

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=("int8", "bf16"), default="int8")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per shape (default 5)")
    parser.add_argument("--batch-s", type=float, default=0.05,
                        help="seconds of calls a timed batch lasts (default 0.05)")
    parser.add_argument("--storage", help="the study's database, reused where it holds the "
                        "study (default: a temporary file)")
    parser.add_argument("--kernels", type=int, help="dse cover --kernels (default: one per "
                        "shape of the study)")
    parser.add_argument("--keep", type=int, help="configs the ladder measures a shape "
                        "(default: the study's 12; another value names the study apart)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="threads of the library and of oneDNN (default: every core)")
    parser.add_argument("--sets", default="mix,outside",
                        help="which sets to time: mix, outside or both (default)")
    parser.add_argument("--out", help="folder for table.json, libdsegemm.so and dse_gemm.h "
                        "(default: a temporary one)")
    args = parser.parse_args()
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    bad = [s for s in sets if s not in ("mix", "outside")]
    if argument_error(((args.rounds < 1, "--rounds: at least 1"),
                       (args.batch_s <= 0, "--batch-s: above 0"),
                       (args.threads < 1, "--threads: at least 1"),
                       (args.kernels is not None and args.kernels < 1, "--kernels: at least 1"),
                       (args.keep is not None and args.keep < 1, "--keep: at least 1"),
                       (bool(bad) or not sets, f"--sets: mix and/or outside, got {args.sets!r}"),
                       (bool(args.out) and not Path(args.out or ".").is_dir(),
                        f"--out {args.out}: not a folder")),
                      "amx_library.py"):
        return 2
    engine, problem = engine_here()
    if problem:
        print(f"cannot run: {problem}", file=sys.stderr)
        return 2
    if torch_problem():
        print(f"cannot run: {torch_problem()}", file=sys.stderr)
        return 2
    import torch

    folder = Path(args.out or tempfile.mkdtemp(prefix="dse-amx-library-"))
    storage = args.storage or str(folder / "study.db")
    from dse.core.errors import UsageError
    from dse.storage.store import StorageError

    try:
        name = run_study(args.dtype, engine, storage, args.keep)
        library, table = build(name, storage, args.kernels, folder)
    except Failure as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return exc.status
    except (UsageError, StorageError) as exc:  # a bad --storage, a study that cannot run
        print(f"amx_library.py: error: {exc}", file=sys.stderr)
        return 2
    lib = Library(library, args.dtype)
    engine_name = {1: "AMX", 0: "AVX-512"}.get(lib.lib.dse_gemm_engine(), "portable")
    print(f"library {library}: engine {engine_name}, "
          f"{len(table['kernels'])} table kernels; {args.threads} threads for it and oneDNN "
          f"(torch {torch.__version__})", flush=True)
    mix = mix_shapes(table)
    chosen = {"mix": mix, "outside": outside_shapes({(s.M, s.K, s.N) for s in mix})}
    summed: dict[str, list[float]] = {}
    for label in sets:
        shapes = chosen[label]
        print(f"\n{label}: {len(shapes)} shapes, {args.rounds} rounds each", flush=True)
        for n, shape in enumerate(shapes, start=1):
            started = time.perf_counter()
            wrong = measure_shape(lib, args.dtype, shape, args.rounds, args.batch_s,
                                  args.threads)
            if wrong:
                print(f"FAILED: {wrong}", file=sys.stderr)
                return 3
            ratios = [d / o for d, o in zip(shape.dse, shape.onednn, strict=True)]
            print(f"  [{n}/{len(shapes)}] {shape.name} ({lib.kernel(shape)}): products checked, "
                  f"ratio {spread(ratios)} ({time.perf_counter() - started:.1f} s)", flush=True)
        summed[label] = report_set(label, shapes)
    print()
    met = True
    dtype_text = f"{args.dtype}, engine {engine}, {args.threads} threads"
    if "mix" in summed:
        met &= against_goal(f"library / oneDNN summed time, Llama-3.1-8B mix, {dtype_text} "
                            f"(median of {args.rounds} rounds)",
                            statistics.median(summed["mix"]), MIX_GOAL[args.dtype], "x",
                            higher_is_better=False)
    if "outside" in summed:
        worst = max(chosen["outside"], key=lambda s: statistics.median(
            [d / o for d, o in zip(s.dse, s.onednn, strict=True)]))
        worst_ratio = statistics.median([d / o for d, o in zip(worst.dse, worst.onednn,
                                                               strict=True)])
        print(f"outside shapes: summed time dse / oneDNN {spread(summed['outside'])}; slowest "
              f"against oneDNN {worst.name} ({worst.source})", flush=True)
        if args.dtype in OUTSIDE_GOAL:
            met &= against_goal(f"library / oneDNN time, slowest shape outside the study, "
                                f"{dtype_text} ({worst.name}, median of {args.rounds} rounds)",
                                worst_ratio, OUTSIDE_GOAL[args.dtype], "x",
                                higher_is_better=False)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
