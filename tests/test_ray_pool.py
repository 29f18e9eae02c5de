"""Evaluations fanned out on a real local Ray."""

from __future__ import annotations

from dse.study.query import load_trials
from dse.study.runner import run_study
from tests.study_helpers import make_spec


def test_study_on_two_ray_workers(tmp_path):
    storage = str(tmp_path / "r.db")
    spec = make_spec(evaluator={"name": "synthetic", "options": {"work_s": 0.05,
                                                                 "fail_fraction": 0.2}},
                     workers=2, budget={"trials": 16})
    summary = run_study(spec, storage)
    assert summary.status == "finished" and summary.workloads[0].trials == 16
    frame = load_trials(storage, "t")
    assert list(frame["number"]) == list(range(16))
    ok = frame[frame["status"] == "ok"]
    assert len(ok) and (ok["tops"] > 0).all() and (ok["elapsed_s"] >= 0.05).all()
    assert set(frame["status"]) <= {"ok", "infeasible", "failed"}
