"""The GPU studies ``studies/h200_bf16_decode.yaml`` and ``h200_bf16.yaml`` (or h100): per
shape, the tuned Triton GEMM's TFLOP/s next to ``torch.matmul`` measured in the same run.

On a machine with an NVIDIA GPU, PyTorch and Triton (``pip install -e '.[gpu]'``):
    python benchmarks/triton_gpu_studies.py [--target h200|h100] [--keep 60] [--storage gpu.db]
        [--loads tma|pointers]

Where the GPU box has only PyTorch and Triton, the hardware rungs go there as files:
    python benchmarks/triton_gpu_studies.py --storage gpu.db --offline jobs/      # here
    python3 dse/offline/runner.py jobs/NAME.jobs.json NAME.results.json [--time-limit S]  # GPU
    dse ingest NAME.results.json --storage gpu.db                                # here, each
    python benchmarks/triton_gpu_studies.py --storage gpu.db --offline jobs/      # the report

For each shape the analytical model ranks every feasible config and the best ``--keep`` are
compiled, checked and timed (the hardware trials); the report lists the tuned TFLOP/s,
torch.matmul's, their ratio, the hardware trials used and how many configs the analytical
rung kept, and the ladder's rank agreement. The targets: at least 0.95x torch.matmul at 4096^3
and 0.9x at 64x4096x4096 within 60 hardware trials.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

from dse import load_trials
from dse.core.commands import positive_int
from dse.core.errors import DseError
from dse.core.formatting import table
from dse.storage import open_store
from dse.storage.frames import best_trials
from dse.study.runner import run_study
from dse.study.spec import study_from_dict
from evaluators.hardware.triton_kernel import LOADS

# the decode study first: it is quick and has a target, so a run cut short has measured it
STUDIES = tuple(Path(__file__).parents[1] / "studies" / f"h200_bf16{suffix}.yaml"
                for suffix in ("_decode", ""))
TARGETS = {"4096x4096x4096": 0.95, "64x4096x4096": 0.9}


def study_dicts(target: str, keep: int, loads: str = "tma") -> list[dict]:
    """The shipped studies for ``target`` with ``keep`` hardware trials a shape, the kernel
    loading A and B as ``loads`` says (a study of its own, named for it, unless TMA)."""
    studies = []
    for path in STUDIES:
        raw = yaml.safe_load(path.read_text())
        name = raw["name"].replace("h200", target)
        raw.update(name=name if loads == "tma" else f"{name}-{loads}", target=target)
        raw["ladder"][0]["keep"] = keep
        if loads != "tma":
            raw["ladder"][-1].setdefault("options", {})["loads"] = loads
        studies.append(raw)
    return studies


def _gpu_problem() -> str | None:
    """Why the hardware rung cannot run here (None when it can)."""
    try:
        import torch
    except ImportError:
        return "no PyTorch here: pip install -e '.[gpu]' on a machine with an NVIDIA GPU"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch: these studies measure on the GPU"
    return None


def _show_device(target: str) -> None:
    from dse.core.registry import load_target
    from search_spaces.triton_gemm.target import device_properties

    found = device_properties() or {}
    declared = load_target(target).device
    differs = {k: (getattr(declared, k), v) for k, v in found.items()
               if hasattr(declared, k) and getattr(declared, k) != v}
    print(f"device: {found.get('name', '?')}; differs from {target}.toml: "
          f"{differs or 'nothing read'}")


def main(argv: list[str] | None = None) -> int:
    """Run the GPU studies (or write their hardware trials for ``--offline``) and print the report;
    the exit status (2 when the GPU cannot be used here)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="h200", choices=("h200", "h100"))
    parser.add_argument("--keep", type=positive_int, default=60,
                        help="hardware trials a shape")
    parser.add_argument("--loads", default="tma", choices=LOADS,
                        help="how the kernel loads A and B: through TMA (the default) or "
                        "through addresses it computes (studies of their own)")
    parser.add_argument("--storage", help="SQLite file or URL (default: a temporary file)")
    parser.add_argument("--offline", metavar="DIR", help="without a GPU here: write each "
                        "study's hardware trials to DIR/NAME.jobs.json for "
                        "dse/offline/runner.py on the GPU box")
    args = parser.parse_args(argv)
    if args.offline and not args.storage:
        parser.error("--offline needs --storage: the studies continue there after dse ingest")
    if not args.offline:
        problem = _gpu_problem()
        if problem:
            print(f"{problem} (or use --offline)", file=sys.stderr)
            return 2
        _show_device(args.target)
    storage = args.storage or str(Path(tempfile.mkdtemp()) / "gpu.db")
    start = time.perf_counter()
    pending = []
    studies = study_dicts(args.target, args.keep, args.loads)
    for raw in studies:
        jobs = Path(args.offline) / f"{raw['name']}.jobs.json" if args.offline else None
        if jobs is not None:
            jobs.parent.mkdir(parents=True, exist_ok=True)
        try:
            summary = run_study(study_from_dict(raw), storage,
                                offline=str(jobs) if jobs else None)
        except DseError as exc:  # a changed --keep on a database that has the studies, say
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if summary.offline is not None and summary.offline.configs:
            pending.append((raw["name"], jobs, len(summary.offline.configs)))
    if pending:
        for name, jobs, count in pending:
            results = jobs.with_name(f"{name}.results.json")
            print(f"{name}: {count} hardware trials in {jobs}; on the GPU box: python3 "
                  f"dse/offline/runner.py {jobs} {results}; then here: dse ingest {results} "
                  f"--storage {storage}")
        print("then this command again for the report")
        return 0
    names = [raw["name"] for raw in studies]
    rows = [row for name in names for row in summarise(storage, name)]
    print(f"{', '.join(names)}: {time.perf_counter() - start:.0f} s, results in {storage}")
    print(table(rows, ("shape", "tuned_tflops", "torch_tflops", "ratio", "target",
                       "hardware_trials", "hardware_ok", "analytical_kept", "best")))
    print(table([row for name in names for row in open_store(storage).fidelity_report(name)],
                ("workload", "cheaper", "dearer", "n", "spearman", "top_k_overlap")))
    return 0


def summarise(storage: str, name: str) -> list[dict]:
    """Per shape: the tuned and torch.matmul TFLOP/s, trials on each rung, the best config."""
    frame = load_trials(storage, name)
    rows = []
    for shape, group in frame.groupby("shape", sort=False):
        group.attrs = frame.attrs
        measured = group[(group["evaluator"] == "triton") & (group["status"] == "ok")]
        best = best_trials(group, top=1)
        tuned = float(best["tops"].iloc[0]) if not measured.empty else float("nan")
        torch_tflops = float(measured["torch_tflops"].iloc[0]) if not measured.empty \
            else float("nan")
        rows.append({"shape": shape, "tuned_tflops": tuned, "torch_tflops": torch_tflops,
                     "ratio": tuned / torch_tflops,
                     "target": TARGETS.get(shape, ""),
                     "hardware_trials": int((group["evaluator"] == "triton").sum()),
                     "hardware_ok": len(measured),
                     "analytical_kept": int((group["evaluator"] == "analytical").sum()),
                     "best": " ".join(f"{p}={best[p].iloc[0]}" for p in frame.attrs["params"])
                     if not best.empty else ""})
    return rows


if __name__ == "__main__":
    sys.exit(main())
