"""Every shipped study file loads and runs (with a small budget)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dse import load_trials
from dse.storage.frames import best_trials
from dse.study.runner import run_study
from dse.study.spec import load_study

STUDIES = sorted((Path(__file__).parents[1] / "studies").glob("*.yaml"))


def test_there_are_studies():
    names = {p.stem for p in STUDIES}
    assert {"quick", "pareto_xdna2_int8", "xdna_int8_int8", "xdna2_bf16_bf16"} <= names


SAMPLED = [p for p in STUDIES if not load_study(p).ladder]  # ladders: tests/test_ladder.py


@pytest.mark.parametrize("path", SAMPLED, ids=[p.stem for p in SAMPLED])
def test_study_runs(path, tmp_path):
    spec = load_study(path).with_overrides(trials=6)
    storage = str(tmp_path / "r.db")
    summary = run_study(spec, storage)
    assert summary.status == "finished"
    assert [w.trials for w in summary.workloads] == [6] * len(spec.workloads)
    frame = load_trials(storage, spec.name)
    assert len(frame) == 6 * len(spec.workloads)
    if (frame["status"] == "ok").any():
        assert len(best_trials(frame)) >= 1
