"""Building study specs for tests."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from dse.study.spec import StudySpec, study_from_dict


def slow_study_file(folder: Path, name: str, trials: int, work_s: float, seed: int = 7) -> Path:
    """A study file of ``trials`` random trials of the synthetic evaluator (``work_s`` of CPU a
    config) on an xdna2 2048^3 GEMM, written in ``folder``."""
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""
        name: {name}
        target: xdna2
        workload: {{shape: 2048x2048x2048, dtype: int8-int8}}
        evaluator: {{name: synthetic, options: {{work_s: {work_s}}}}}
        sampler: random
        budget: {{trials: {trials}}}
        seed: {seed}
    """))
    return path


def make_spec(name: str = "t", **overrides: Any) -> StudySpec:
    data: dict[str, Any] = {
        "name": name, "target": "xdna2",
        "workload": {"shape": "2048x2048x2048", "dtype": "int8-int8"},
        "sampler": "random", "budget": {"trials": 20}, "seed": 1,
    }
    data.update(overrides)
    if data.get("workload") is None:
        data.pop("workload")
    return study_from_dict(data)


# Small studies with what the dashboard shows: a fidelity ladder, two workloads, two objectives.
LADDER = {"name": "lad", "target": "xdna", "seed": 0,
          "workload": {"shape": "1024x1024x1024", "dtype": "int8-int8"},
          "ladder": [{"evaluator": "analytical", "keep": 6}, {"evaluator": "simulator"}]}
TWO_WORKLOADS = {"name": "two", "target": "xdna2", "sampler": "random", "seed": 3,
                 "workloads": [{"shape": "2048x2048x2048", "dtype": "int8-int8"},
                               {"shape": "1024x2048x512", "dtype": "bf16-bf16"}],
                 "budget": {"trials": 60}}
PARETO = {"name": "mo", "target": "xdna2", "sampler": "nsga2", "seed": 1,
          "workload": {"shape": "2048x2048x2048", "dtype": "int8-int8"},
          "objectives": ["tops", "l1_bytes"], "budget": {"trials": 60}}
# A study minimising DRAM traffic (many configs tie at the minimum), and one where nothing works.
MIN_DRAM = {"name": "min-dram", "target": "xdna2", "sampler": "tpe", "seed": 0,
            "workload": {"shape": "4096x4096x4096", "dtype": "int8-int8"},
            "objectives": ["dram_bytes"], "budget": {"trials": 100}}
ALL_FAIL = {"name": "all-fail", "target": "xdna2", "sampler": "random", "seed": 1,
            "workload": {"shape": "1024x1024x1024", "dtype": "int8-int8"},
            "evaluator": {"name": "synthetic", "options": {"work_s": 0.0, "fail_fraction": 1.0}},
            "budget": {"trials": 30}}
