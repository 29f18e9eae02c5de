"""Building study specs for tests."""

from __future__ import annotations

from typing import Any

from dse.study.spec import StudySpec, study_from_dict


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
