"""Killing and resuming studies, and several runners on one database, in real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from dse import load_trials
from dse.core.errors import UsageError
from dse.storage import ResultStore, open_store, rows
from dse.storage import models as m
from dse.storage.journal import SqlJournalBackend
from dse.study.runner import StudyRunner, run_study
from dse.study.spec import load_study
from tests.study_helpers import slow_study_file

DSE = [sys.executable, "-m", "dse.cli"]


def stored_trials(storage: str, name: str) -> int:
    store = ResultStore(storage)
    with store.session() as s:
        study = rows.study(s, name)
        return 0 if study is None else rows.trial_count(s, study.id)


def wait_for(predicate, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_sigkill_mid_run_then_resume(tmp_path):
    storage = str(tmp_path / "results.db")
    path = slow_study_file(tmp_path, "killed", trials=150, work_s=0.02)
    proc = subprocess.Popen([*DSE, "run", str(path), "--storage", storage],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: stored_trials(storage, "killed") >= 40)
        # while it runs, nobody else may drive the same study
        with pytest.raises(UsageError, match="is being run by"):
            StudyRunner(load_study(path), ResultStore(storage))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    done_before = stored_trials(storage, "killed")
    assert 40 <= done_before < 150
    summary = run_study(load_study(path), storage)  # the dead runner's lease is void
    assert summary.status == "finished" and summary.workloads[0].trials == 150

    frame = load_trials(storage, "killed")
    assert list(frame["number"]) == list(range(150))  # none lost, none twice
    store = ResultStore(storage)
    with store.session() as s:
        evaluations = s.scalar(select(func.count()).select_from(m.EvaluationRow))
        distinct_configs = s.scalar(select(func.count(func.distinct(m.TrialRow.config_id))))
        study_id = rows.require_study(s, "killed", lambda: store.safe_url).id
    assert evaluations == distinct_configs
    import optuna

    journal = optuna.storages.JournalStorage(SqlJournalBackend(store, study_id))
    assert optuna.get_all_study_summaries(journal)[0].n_trials == 150
    # every committed window held its results' tells: the sampler's history is dse's
    (study,) = optuna.get_all_study_summaries(journal)
    history = optuna.load_study(study_name=study.study_name, storage=journal).trials
    complete = [t for t in history if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == int((frame["status"] == "ok").sum())


@pytest.mark.parametrize(("stop", "workers"), [(signal.SIGINT, 1), (signal.SIGTERM, 1),
                                               (signal.SIGTERM, 2)],
                         ids=["ctrl-c", "sigterm", "sigterm-with-ray"])
def test_ctrl_c_commits_what_finished_then_resumes(tmp_path, stop, workers):
    """Ctrl-C, and SIGTERM (kill, docker stop, a batch scheduler), stop a run cleanly, also
    once Ray (which installs a SIGTERM handler of its own) has started."""
    storage = str(tmp_path / "results.db")
    path = slow_study_file(tmp_path, "interrupted", trials=200, work_s=0.02)
    proc = subprocess.Popen([*DSE, "run", str(path), "--storage", storage, "--workers",
                             str(workers)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: stored_trials(storage, "interrupted") >= 20)
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "run `dse run" in err, err[-2000:]
    assert open_store(storage).list_studies()["status"].tolist() == ["interrupted"]
    stopped_at = stored_trials(storage, "interrupted")
    assert 20 <= stopped_at < 200
    summary = run_study(load_study(path), storage)
    assert summary.workloads[0].trials == 200
    assert list(load_trials(storage, "interrupted")["number"]) == list(range(200))


def _run_two(tmp_path: Path, storage: str) -> None:
    paths = [slow_study_file(tmp_path, name, trials=60, work_s=0.005)
             for name in ("one", "two")]
    procs = [subprocess.Popen([*DSE, "run", str(p), "--storage", storage],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p in paths]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    for name in ("one", "two"):
        frame = load_trials(storage, name)
        assert list(frame["number"]) == list(range(60))


def test_two_studies_into_one_sqlite_file(tmp_path):
    _run_two(tmp_path, str(tmp_path / "shared.db"))


def test_two_studies_into_one_postgresql_database(tmp_path, postgres_url):
    _run_two(tmp_path, postgres_url)
