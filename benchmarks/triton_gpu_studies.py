"""The GPU studies of ``studies/h200_bf16.yaml`` (or h100): per shape, the tuned Triton GEMM's
TFLOP/s next to ``torch.matmul`` measured in the same run.

Run on a machine with an NVIDIA GPU, PyTorch and Triton (``pip install -e '.[gpu]'``):
    python benchmarks/triton_gpu_studies.py [--target h200|h100] [--keep 60] [--storage gpu.db]

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

from dse.formatting import table
from dse.study.query import best_trials, fidelity_report, load_trials
from dse.study.runner import run_study
from dse.study.spec import study_from_dict

STUDY = Path(__file__).parents[1] / "studies" / "h200_bf16.yaml"
TARGETS = {"4096x4096x4096": 0.95, "64x4096x4096": 0.9}


def study_dict(target: str, keep: int) -> dict:
    """The shipped study for ``target`` with ``keep`` hardware trials a shape."""
    raw = yaml.safe_load(STUDY.read_text())
    raw.update(name=f"{target}-bf16", target=target)
    raw["ladder"][0]["keep"] = keep
    return raw


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="h200", choices=("h200", "h100"))
    parser.add_argument("--keep", type=int, default=60, help="hardware trials a shape")
    parser.add_argument("--storage", help="SQLite file or URL (default: a temporary file)")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("no PyTorch here: pip install -e '.[gpu]' on a machine with an NVIDIA GPU",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("no CUDA GPU visible to PyTorch: these studies measure on the GPU",
              file=sys.stderr)
        return 2
    from dse.target import load_target
    from search_spaces.triton_gemm.target import device_properties

    found = device_properties() or {}
    declared = load_target(args.target).device
    differs = {k: (getattr(declared, k), v) for k, v in found.items()
               if hasattr(declared, k) and getattr(declared, k) != v}
    print(f"device: {found.get('name', '?')}; differs from {args.target}.toml: "
          f"{differs or 'nothing read'}")
    raw = study_dict(args.target, args.keep)
    storage = args.storage or str(Path(tempfile.mkdtemp()) / "gpu.db")
    start = time.perf_counter()
    run_study(study_from_dict(raw), storage)
    rows = summarise(storage, raw["name"])
    print(f"{raw['name']}: {time.perf_counter() - start:.0f} s, results in {storage}")
    print(table(rows, ("shape", "tuned_tflops", "torch_tflops", "ratio", "target",
                       "hardware_trials", "hardware_ok", "analytical_kept", "best")))
    print(table(fidelity_report(storage, raw["name"]),
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
