"""The study runner on real databases: budgets, resume, cache, failures, Pareto, exhaustive."""

from __future__ import annotations

import os
import signal
import threading
import time

import optuna
import pytest
from optuna.storages.journal._storage import JournalOperation
from sqlalchemy import func, select

from dse import load_trials
from dse.core.errors import UsageError
from dse.storage import ResultStore, open_store, rows
from dse.storage import models as m
from dse.storage.frames import best_trials
from dse.storage.journal import SqlJournalBackend
from dse.storage.keys import now
from dse.study import runner
from dse.study.execution.recorder import deferred_interrupts
from dse.study.runner import CHECKING, run_study
from tests.study_helpers import make_spec


def count(storage, model) -> int:
    store = ResultStore(storage)
    with store.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)))


def test_budget_resume_and_extension(storage_url):
    spec = make_spec(budget={"trials": 30})
    summary = run_study(spec, storage_url)
    assert summary.status == "finished" and summary.workloads[0].trials == 30
    frame = load_trials(storage_url, "t")
    assert list(frame["number"]) == list(range(30))
    assert set(frame["status"]) <= {"ok", "infeasible"}
    assert frame.loc[frame["status"] == "infeasible", "reason"].str.len().gt(0).all()

    again = run_study(spec, storage_url)  # nothing left to do
    assert again.workloads[0].trials == 30 and again.workloads[0].evaluated == 0
    more = run_study(spec.with_overrides(trials=45), storage_url)
    assert more.workloads[0].trials == 45
    frame = load_trials(storage_url, "t")
    assert list(frame["number"]) == list(range(45))
    # Optuna's persisted state agrees with the trials table
    store = ResultStore(storage_url)
    with store.session() as s:
        study_id = rows.require_study(s, "t", lambda: store.safe_url).id
    journal = optuna.storages.JournalStorage(SqlJournalBackend(store, study_id))
    (summary_study,) = optuna.get_all_study_summaries(journal)
    assert summary_study.n_trials == 45
    with store.session() as s:  # created once, not again by each of the three runs
        logs = s.scalars(select(m.JournalRow.log).where(m.JournalRow.study_id == study_id))
        created = [log for log in logs if log["op_code"] == JournalOperation.CREATE_STUDY]
    assert len(created) == 1


def test_a_resumed_random_study_does_not_repeat_its_first_trials(tmp_path):
    storage = str(tmp_path / "r.db")
    spec = make_spec(sampler="random", budget={"trials": 20})
    run_study(spec, storage)
    more = run_study(spec.with_overrides(trials=40), storage)
    frame = load_trials(storage, "t")
    configs = [tuple(row) for row in frame[["m_ct", "k_ct", "n_ct", "k_mt"]].itertuples(
        index=False)]
    assert configs[20:] != configs[:20] and more.workloads[0].evaluated > 10


def test_same_configs_are_served_from_the_store(storage_url):
    fixed = {"fix": {"m_ct": 128, "n_ct": 128, "k_ct": 64}}
    first = run_study(make_spec("a", sampler="exhaustive", space=fixed, budget={}), storage_url)
    evaluated = first.workloads[0].evaluated
    assert evaluated > 5
    second = run_study(make_spec("b", sampler="exhaustive", space=fixed, budget={}), storage_url)
    assert second.workloads[0].evaluated == 0 and second.workloads[0].cached == evaluated
    assert count(storage_url, m.EvaluationRow) == evaluated
    assert count(storage_url, m.TrialRow) == 2 * evaluated


def test_failed_evaluations_are_stored_and_do_not_stop_the_study(tmp_path):
    storage = str(tmp_path / "r.db")
    spec = make_spec(evaluator={"name": "synthetic", "options": {"work_s": 0.0,
                                                                 "fail_fraction": 0.5}},
                     budget={"trials": 40})
    summary = run_study(spec, storage)
    assert summary.status == "finished" and summary.workloads[0].failed > 0
    frame = load_trials(storage, "t")
    failed = frame[frame["status"] == "failed"]
    assert len(failed) == summary.workloads[0].failed
    assert failed["reason"].str.contains("synthetic failure").all()


def test_multi_objective_pareto_front(tmp_path):
    storage = str(tmp_path / "r.db")
    spec = make_spec(objectives=["tops", "l1_bytes"], sampler="nsga2", budget={"trials": 60})
    run_study(spec, storage)
    frame = load_trials(storage, "t")
    front = best_trials(frame)
    ok = frame[frame["status"] == "ok"]
    assert 1 <= len(front) <= len(ok)
    for _, point in front.iterrows():  # nothing in the study dominates a front point
        dominated = (ok["tops"] >= point["tops"]) & (ok["l1_bytes"] <= point["l1_bytes"]) & (
            (ok["tops"] > point["tops"]) | (ok["l1_bytes"] < point["l1_bytes"]))
        assert not dominated.any()


def test_exhaustive_sampler_and_its_limit(tmp_path):
    storage = str(tmp_path / "r.db")
    spec = make_spec(sampler="exhaustive", budget={},
                     space={"fix": {"m_ct": 128, "n_ct": 64}, "range": {"k_ct": [32, 64]}})
    summary = run_study(spec, storage)
    frame = load_trials(storage, "t")
    assert summary.workloads[0].trials == len(frame) > 0
    assert set(frame["k_ct"]) <= {32, 40, 48, 56, 64} and (frame["status"] == "ok").all()
    too_big = make_spec("big", sampler={"name": "exhaustive", "options": {"max_configs": 10}},
                        budget={})
    with pytest.raises(UsageError, match="would store .* configs \\(limit 10\\)"):
        run_study(too_big, storage)


def test_a_resumed_exhaustive_study_takes_the_configs_without_a_trial(tmp_path):
    storage = str(tmp_path / "r.db")
    space = {"fix": {"m_ct": 128, "n_ct": 64}, "range": {"k_ct": [32, 64]}}
    assert run_study(make_spec(sampler="exhaustive", budget={"trials": 5}, space=space),
                     storage).workloads[0].trials == 5
    summary = run_study(make_spec(sampler="exhaustive", budget={}, space=space), storage)
    frame = load_trials(storage, "t")
    keys = frame[["m_ct", "k_ct", "n_ct", "k_mt"]].apply(tuple, axis=1)
    assert summary.workloads[0].trials == len(frame) > 5 and keys.is_unique
    assert summary.workloads[0].evaluated == len(frame) - 5  # the first five not again


def test_impossible_space_is_refused_before_storing(tmp_path):
    storage = str(tmp_path / "r.db")
    run_study(make_spec("keep", budget={"trials": 5}), storage)
    before = load_trials(storage, "keep")
    spec = make_spec("impossible", space={"fix": {"m_ct": 1024, "n_ct": 1024}})
    with pytest.raises(UsageError, match="no configuration .* satisfies the study's space.*"
                       "L1 overflow"):
        run_study(spec, storage)
    assert load_trials(storage, "keep").equals(before)
    assert not ResultStore(storage).has_study("impossible")


@pytest.mark.parametrize(("target", "workload", "space", "reason"), [
    ("h200", {"shape": "4096x4096x4096", "dtype": "bf16"}, {"range": {"BLOCK_M": [100, 120]}},
     r"rejected by: the ranges \(.*shared_memory \("),
    ("h200", {"shape": "4096x4096x4096", "dtype": "bf16"},
     {"fix": {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 256}}, "shared_memory"),
    ("cpu", {"shape": "256x256x256", "dtype": "fp32"}, {"range": {"mc": [17, 31]}},
     r"rejected by: the ranges \("),
    ("ascend-950pr", {"shape": "8x512x512x512", "dtype": "bf16"},
     {"range": {"base_m": [300, 400]}}, "rejected by: .*the ranges"),
])
def test_an_empty_space_of_any_family_is_refused_with_a_reason(tmp_path, target, workload,
                                                                space, reason):
    from dse.study.spec import study_from_dict

    spec = study_from_dict({"name": "empty", "target": target, "workload": workload,
                            "space": space, "sampler": "random", "budget": {"trials": 5}})
    with pytest.raises(UsageError, match=f"satisfies the study's space.*{reason}"):
        run_study(spec, str(tmp_path / "r.db"))


def test_changed_definition_is_refused(tmp_path):
    storage = str(tmp_path / "r.db")
    run_study(make_spec(budget={"trials": 3}), storage)
    with pytest.raises(UsageError, match="already exists .* different sampler"):
        run_study(make_spec(sampler="tpe"), storage)


def test_time_budget_stops_the_study(storage_url):
    storage = storage_url
    spec = make_spec(evaluator={"name": "synthetic", "options": {"work_s": 0.02}},
                     budget={"time_s": 0.5})
    summary = run_study(spec, storage)
    assert 1 <= summary.workloads[0].trials < 200
    assert len(load_trials(storage, "t")) == summary.workloads[0].trials
    # stored as the study's status (PostgreSQL refuses one longer than its column)
    assert summary.status == "out of time"
    assert open_store(storage).list_studies()["status"].tolist() == ["out of time"]


def test_a_time_budget_shorter_than_the_setup_still_runs_a_round(tmp_path):
    spec = make_spec(budget={"time_s": 1e-9}, batch_size=4)
    summary = run_study(spec, str(tmp_path / "r.db"))
    assert summary.status == "out of time"
    assert [w.trials for w in summary.workloads] == [4]


def test_several_workloads(tmp_path):
    storage = str(tmp_path / "r.db")
    spec = make_spec(workload=None, workloads={"grid": {"shape": ["1024x1024x1024",
                                                                  "2048x1024x512"],
                                                        "dtype": ["int8-int8", "bf16-bf16"]}},
                     budget={"trials": 8})
    bars: dict[str, int] = {}
    summary = run_study(spec, storage, progress=lambda label, done, total, *_: bars.update(
        {label: done}))
    assert [w.trials for w in summary.workloads] == [8, 8, 8, 8]
    assert bars == {CHECKING: 4,  # the spaces checked before the first trial, then
                    **{w.workload.label: 8 for w in summary.workloads}}  # a bar per workload
    frame = load_trials(storage, "t")
    assert len(frame) == 32 and frame.groupby(["shape", "dtype"]).size().eq(8).all()
    assert len(best_trials(frame, top=1)) == 4


@pytest.mark.parametrize("sampler", ["tpe", "random", "cmaes", "nsga2"])
def test_every_sampler_runs(tmp_path, sampler):
    storage = str(tmp_path / "r.db")
    summary = run_study(make_spec(sampler=sampler, budget={"trials": 12}), storage)
    assert summary.workloads[0].trials == 12 and len(load_trials(storage, "t")) == 12


def test_gp_sampler_needs_pytorch(tmp_path):
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        summary = run_study(make_spec(sampler="gp", budget={"trials": 4}), str(tmp_path / "r"))
        assert summary.workloads[0].trials == 4
    else:
        with pytest.raises(UsageError, match="sampler 'gp' needs PyTorch"):
            run_study(make_spec(sampler="gp", budget={"trials": 4}), str(tmp_path / "r.db"))


def test_unknown_evaluator_option(tmp_path):
    spec = make_spec(evaluator={"name": "synthetic", "options": {"speed": 2}})
    with pytest.raises(UsageError, match="evaluator 'synthetic' has no option 'speed'; "
                       "options: work_s, fail_fraction"):
        run_study(spec, str(tmp_path / "r.db"))


def test_sampled_tiles_fit_a_small_l1(tmp_path):
    """With 2 KB of L1 only the smallest tiles fit: the block counts of larger ones are not
    sampled, so a sampler study finds feasible configs (before, nearly all were infeasible)."""
    from dse.core.registry import target_path

    target = tmp_path / "tiny.toml"
    target.write_text(target_path("xdna2").read_text().replace(
        "l1_bytes = 65536", "l1_bytes = 2048"))
    storage = str(tmp_path / "r.db")
    run_study(make_spec(target=str(target), sampler="tpe", budget={"trials": 30},
                        workload={"shape": "1024x1024x1024", "dtype": "int8-int8"}), storage)
    frame = load_trials(storage, "t")
    assert (frame["status"] == "ok").sum() >= 20


def test_a_repeat_within_a_batch_is_served_not_evaluated_twice(tmp_path):
    spec = make_spec(evaluator={"name": "synthetic", "options": {"work_s": 0.0}}, batch_size=8,
                     space={"fix": {"m_ct": 64, "k_ct": 64, "n_ct": 64, "k_mt": 256}},
                     budget={"trials": 24})
    (workload,) = run_study(spec, str(tmp_path / "r.db")).workloads
    # one config asked 24 times in a new database: evaluated once, repeated 23 times, nothing
    # served from the store
    assert (workload.trials, workload.evaluated, workload.repeated, workload.cached) == (
        24, 1, 23, 0)


def test_a_study_s_own_rules_and_result_options_do_not_reach_other_studies(tmp_path):
    """What only a study's optional constraints refuse, or what an evaluator reports under
    options that change results, is stored apart: a study without them evaluates afresh."""
    storage = str(tmp_path / "r.db")
    run_study(make_spec("strict", space={"constraints": ["dma_bound"]},
                        budget={"trials": 60}), storage)
    strict = load_trials(storage, "strict")
    assert strict["reason"].fillna("").str.contains("DMA bound").any()
    run_study(make_spec("plain", budget={"trials": 60}), storage)  # the same configs asked
    plain = load_trials(storage, "plain")
    assert not plain["reason"].fillna("").str.contains("DMA bound").any()
    assert plain["cached"].any()  # what both rule sets agree on is still shared
    # the other way round: a study with the rule is not served what a study without it stored
    first_plain = str(tmp_path / "other.db")
    run_study(make_spec("plain", budget={"trials": 60}), first_plain)
    run_study(make_spec("strict", space={"constraints": ["dma_bound"]},
                        budget={"trials": 60}), first_plain)
    assert (load_trials(first_plain, "strict")["status"] == "ok").sum() == \
        (strict["status"] == "ok").sum()

    failing = {"name": "synthetic", "options": {"work_s": 0.0, "fail_fraction": 1.0}}
    run_study(make_spec("failing", evaluator=failing, budget={"trials": 20}), storage)
    assert set(load_trials(storage, "failing")["status"]) <= {"failed", "infeasible"}
    working = {"name": "synthetic", "options": {"work_s": 0.0}}
    summary = run_study(make_spec("working", evaluator=working, budget={"trials": 20}),
                        storage)
    assert summary.workloads[0].failed == 0
    failed = load_trials(storage, "failing")
    assert set(failed.loc[failed["status"] == "failed", "version"]) == {"1+fail_fraction=1"}


def test_result_options_name_the_version_briefly_and_alike():
    from dse.core.registry import build_evaluator, short_version

    versions = {build_evaluator("synthetic", {"fail_fraction": value}).version
                for value in (1, 1.0)}
    assert versions == {"1+fail_fraction=1"}  # 1 and 1.0 are one setting
    assert build_evaluator("synthetic", {"work_s": 0.5}).version == "1"  # speed, not results
    assert build_evaluator("synthetic", {"fail_fraction": 0.0}).version == "1"  # the default
    long = short_version("1+" + "x" * 80)
    assert len(long) <= 30 and long != short_version("1+" + "x" * 79)


def test_the_lease_is_renewed_while_an_evaluation_outlasts_it(tmp_path, monkeypatch):
    """An evaluation longer than the lease (hardware, a full simulation) must not let another
    runner take the study: the runner renews its lease while it waits."""
    monkeypatch.setattr(runner, "LEASE_S", 3.0)  # times are stored to the second
    storage = str(tmp_path / "r.db")
    spec = make_spec(evaluator={"name": "synthetic", "options": {"work_s": 6.0}},
                     batch_size=1, budget={"trials": 1})
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(run_study(spec, storage).status)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        time.sleep(4.5)  # the evaluation is still running, the first lease long over
        store = ResultStore(storage)
        with store.session() as s:
            study = rows.require_study(s, "t", lambda: store.safe_url)
            assert study.status == "running" and study.lease_until > now()
    finally:
        thread.join(timeout=30)
    assert outcome == ["finished"]
    assert open_store(storage).list_studies()["status"].tolist() == ["finished"]  # released after


def test_ctrl_c_during_a_window_s_write_waits_for_the_write():
    """Interrupted between its commit and its bookkeeping, a window would be written twice."""
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # the signal has arrived: it waits for the block
            finished.append(True)
    assert finished == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
