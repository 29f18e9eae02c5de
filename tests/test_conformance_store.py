"""The results store's public face (:class:`dse.storage.face.StoreFace`; the store is the only
code that speaks SQL), on SQLite and on PostgreSQL: the store implements it; a run claims a
study, commits windows of trials with Optuna's journal, is served what is stored, and every read
(frames, pages, the best, the list of studies, ladders, summaries) answers alike.

A store is tested by adding it to ``STORES``; every method of the face is called here (a test
checks that too)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from dse.core import EvalResult, Status, UsageError, build_context, load_target
from dse.storage import ResultStore, StoreFace, config_key, open_store
from dse.storage.journal import SqlJournalBackend
from dse.storage.models import SCHEMA_VERSION
from dse.storage.runs import Measured, PendingTrial, Window

MODEL = Measured("analytical", "9", "analytical")
MEASURED = Measured("cpu", "9", "hardware")
IDENTITY = {"target": "xdna2", "objectives": [["tops", "maximize"]]}


class _Evaluator:
    name, version, fidelity = MEASURED.name, MEASURED.version, MEASURED.fidelity


# The implementations of the face, each made from a database's URL.
STORES = {"sql": open_store}


@pytest.fixture(params=list(STORES))
def store_of(request):
    """Each implementation of the face in turn: a function from a database's URL to a
    store."""
    return STORES[request.param]


def _face() -> dict[str, object]:
    """The face's members by name: its methods and properties, and its attributes."""
    members = {name: value for name, value in vars(StoreFace).items()
               if not name.startswith("_") and (callable(value) or isinstance(value, property))}
    return {**members, **{name: None for name in StoreFace.__annotations__}}


def _parameters(function) -> list[tuple]:
    return [(p.name, p.kind, p.default, p.annotation)
            for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("store_class", [ResultStore])
def test_the_store_has_the_face_s_methods_with_their_signatures(store_class):
    for name, member in _face().items():
        assert hasattr(store_class, name) or member is None, f"{store_class.__name__}.{name}"
        if isinstance(member, property):
            assert isinstance(getattr(store_class, name), property), name
        elif member is not None:
            implemented = getattr(store_class, name)
            assert _parameters(implemented) == _parameters(member), name
            assert inspect.signature(implemented).return_annotation == \
                inspect.signature(member).return_annotation, name


def test_a_store_is_an_instance_of_its_face(storage_url, store_of):
    store = store_of(storage_url)
    assert isinstance(store, StoreFace)
    assert store.schema_version() == SCHEMA_VERSION
    # where the results are: the URL (a cache key) and as a person reads it
    assert store.url and store.safe_url and isinstance(store.safe_url, str)


def test_every_method_of_the_face_is_called_here():
    source = Path(__file__).read_text()
    uncalled = [name for name in _face() if not re.search(rf"\.{name}\b", source)]
    assert uncalled == [], f"no conformance test calls {uncalled}: add one"


@pytest.fixture
def run(storage_url, store_of):
    """A claimed study with one workload and 4 configs: (store, claim, workload id, configs)."""
    store: StoreFace = store_of(storage_url)
    ctx = build_context("xdna2", "int8-int8", "1024x1024x1024")
    configs = [ctx.space.resolve({"m_ct": m, "k_ct": 64, "n_ct": 64, "k_mt": 64})
               for m in (32, 64, 96, 60)]
    claim = store.claim_study("s", IDENTITY, ctx.target, "me:1", 60)
    workload_id, trials = store.open_workload(claim.study_id, {**ctx.workload.to_dict(),
                                                                "space": ctx.space.name})
    assert trials == 0
    return store, claim, workload_id, configs


def _window(store: ResultStore, claim, workload_id, configs, results, by=MODEL,
            cached=None, first=0) -> Window:
    keys = [config_key("xdna_gemm", c) for c in configs]
    trials = [PendingTrial(workload_id, k, c, r, bool(cached and cached[i]), by)
              for i, (k, c, r) in enumerate(zip(keys, configs, results, strict=True))]
    return Window("s", claim.study_id, claim.target_id, "xdna_gemm", first, trials,
                  SqlJournalBackend(store, claim.study_id), "me:1", 60, "host")


def _results(configs) -> list[EvalResult]:
    ok = [EvalResult(Status.OK, {"tops": 10.0 + i, "latency_s": 1.0 / (10 + i),
                                 "l1_bytes": 1000 - i})
          for i in range(len(configs) - 1)]
    return [*ok, EvalResult(Status.INFEASIBLE, reason="micro-tile: m_ct=60")]


def test_a_claimed_study_is_leased_and_released(run):
    store, claim, _, _ = run
    target = load_target("xdna2")
    with pytest.raises(UsageError, match="being run by me:1"):
        store.claim_study("s", IDENTITY, target, "other:2", 60)
    with pytest.raises(UsageError, match="different objectives"):
        store.claim_study("s", {**IDENTITY, "objectives": []}, target, "me:1", 60)
    store.renew_lease("s", "me:1", 60)
    store.release("s", "me:1", "finished")
    assert store.study_header("s")["status"] == "finished"
    again = store.claim_study("s", IDENTITY, target, "other:2", 60)
    assert (again.study_id, again.status_before) == (claim.study_id, "finished")


def test_a_window_commits_trials_results_and_journal_together(run):
    store, claim, workload_id, configs = run
    results = _results(configs)
    window = _window(store, claim, workload_id, configs, results)
    window.journal.append_logs([{"op": 0}])
    store.commit_window(window)
    window.journal.mark_committed()
    keys = [config_key("xdna_gemm", c) for c in configs]
    assert store.stored_keys(claim.target_id, workload_id, "analytical", "9") == set(keys)
    served = store.stored_results(claim.target_id, workload_id, keys, "analytical", "9")
    assert [served[k].status for k in keys] == [r.status for r in results]
    assert served[keys[0]].metrics["tops"] == 10.0
    assert store.keys_with_trials(claim.study_id, workload_id, "analytical") == set(keys)
    assert store.study_journal("s") == [{"op": 0}]
    # a second window serving the same results adds trials, not evaluations
    store.commit_window(_window(store, claim, workload_id, configs, results,
                                cached=[True] * 4, first=4))
    frame = store.load_trials("s")
    assert list(frame["number"]) == list(range(8)) and frame["cached"].sum() == 4
    assert set(frame.attrs["params"]) == set(configs[0]) and frame.attrs["space"] == "xdna_gemm"


def test_reads_of_a_study(run):
    store, claim, workload_id, configs = run
    store.commit_window(_window(store, claim, workload_id, configs, _results(configs)))
    version = store.study_version("s")
    best = store.best("s", top=1)
    assert list(best["tops"]) == [12.0] and store.has_study("s") and not store.has_study("t")
    page = store.trial_page("s", where="status == 'ok'", sort="-tops", limit=2)
    assert page.total == 3 and list(page.frame["tops"]) == [12.0, 11.0]
    (listed,) = store.list_studies().to_dict("records")
    assert (listed["study"], listed["trials"], listed["best"]) == ("s", 4, 12.0)
    narrow = store.narrow_trials("s")
    assert list(narrow["number"]) == [0, 1, 2, 3] and list(narrow.columns)[-1] == "tops"
    frame = store.load_trials("s")
    assert list(narrow["status"]) == list(frame["status"])
    # the trial with no result reads as NaN, the others as the full frame has them
    assert narrow["tops"].dtype == float and narrow["tops"].isna().tolist() == \
        frame["tops"].isna().tolist() and narrow["tops"].sum() == frame["tops"].sum()
    assert list(store.trials_by_number("s", [2, 0])["number"]) == [2, 0]
    assert store.common_reasons("s", workload_id) == [("infeasible", "micro-tile: m_ct=60", 1)]
    assert store.study_spec("s") == IDENTITY
    assert store.study_objectives("s") == [("tops", "maximize")]
    assert store.workload_bodies({workload_id})[workload_id]["space"] == "xdna_gemm"
    store.commit_window(_window(store, claim, workload_id, configs[:1], _results(configs)[:1],
                                first=4))
    assert store.study_version("s") != version
    with pytest.raises(UsageError, match="no study 'missing'.*studies there: s"):
        store.load_trials("missing")


def test_ladder_rows_and_results_measured_elsewhere(run):
    store, claim, workload_id, configs = run
    store.commit_window(_window(store, claim, workload_id, configs, _results(configs)))
    store.record_agreement(claim.study_id, workload_id, 1, "analytical", "cpu", 3, 1,
                           {"spearman": 1.0, "kendall": 1.0, "top_k_overlap": 1.0})
    (row,) = store.fidelity_report("s")
    assert (row["cheaper"], row["dearer"], row["n"], row["spearman"]) == ("analytical", "cpu",
                                                                         3, 1.0)
    body = build_context("xdna2", "int8-int8", "1024x1024x1024").workload.to_dict()
    measured = (body, "xdna_gemm", configs[0], EvalResult(Status.OK, {"tops": 5.0,
                                                                      "latency_s": 0.2}))
    added = store.ingest_results("s", _Evaluator(), [measured], {"host": "npu-box"})
    assert added == {"evaluations": 1, "trials": 1, "differ": 0}
    again = store.ingest_results("s", _Evaluator(), [measured], {})
    assert again == {"evaluations": 0, "trials": 0, "differ": 0}
    frame = store.load_trials("s")
    (cpu,) = frame[frame["evaluator"] == "cpu"].to_dict("records")
    assert cpu["tops"] == 5.0 and cpu["host"] == "npu-box" and cpu["number"] == 4
    store.put_results(load_target("xdna2"), body, "xdna_gemm", configs[1:2],
                      [(_Evaluator(), [EvalResult(Status.OK, {"tops": 6.0})])])
    key = config_key("xdna_gemm", configs[1])
    assert store.stored_results(claim.target_id, workload_id, [key], "cpu",
                                "9")[key].metrics == {"tops": 6.0}


def test_a_kept_frame_is_read_back_and_faults_are_listed(run, monkeypatch):
    store, claim, workload_id, configs = run
    monkeypatch.setattr("dse.storage.runs.MIN_TRIALS", 1)  # kept, however small the study
    window = _window(store, claim, workload_id, configs, _results(configs))
    window.faults.append({"workload_id": workload_id, "kind": "WorkerCrashedError",
                          "message": "lost", "attempt": 1, "configs": 4, "retried": 1})
    store.commit_window(window)
    before = store.load_trials("s")
    assert store.keep_frame("s") > 0
    kept = store.load_trials("s")
    assert kept.equals(before) and kept.attrs == before.attrs
    (fault,) = store.faults("s").to_dict("records")
    assert (fault["kind"], fault["configs"], fault["retried"], fault["host"]) == \
        ("WorkerCrashedError", 4, True, "host")
