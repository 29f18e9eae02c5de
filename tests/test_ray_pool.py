"""Evaluations fanned out on a real local Ray."""

from __future__ import annotations

import socket
import time

import pytest

from dse.errors import UsageError
from dse.study.query import list_studies, load_trials
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


def test_a_cluster_address_where_nothing_answers_is_refused_at_once(tmp_path):
    """Ray would retry such an address for many minutes, the study leased all the while."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    storage = str(tmp_path / "r.db")
    spec = make_spec(evaluator={"name": "synthetic", "options": {"work_s": 0.01}}, workers=2)
    start = time.monotonic()
    with pytest.raises(UsageError, match=f"127.0.0.1:{port}: nothing answers there"):
        run_study(spec, storage, ray_address=f"127.0.0.1:{port}")
    assert time.monotonic() - start < 30
    (status,) = list_studies(storage)["status"]  # stored, and released: not left running
    assert status != "running"
