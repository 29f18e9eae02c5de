"""The results store on real SQLite and PostgreSQL databases."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import func, select, update

from dse.storage import ResultStore, StorageError, canonical_key, rows
from dse.storage import models as m
from dse.storage.engine import json_loads
from dse.storage.journal import SqlJournalBackend


def test_schema_is_created_and_versioned(storage_url):
    store = ResultStore(storage_url)
    assert store.schema_version() == m.SCHEMA_VERSION
    assert ResultStore(storage_url).schema_version() == m.SCHEMA_VERSION  # reopen is a no-op


def test_newer_schema_is_refused(storage_url):
    store = ResultStore(storage_url)
    with store.session() as s:
        s.execute(update(m.Meta).values(value=str(m.SCHEMA_VERSION + 1)))
    newer = f"schema version {m.SCHEMA_VERSION + 1}; this dse knows up to {m.SCHEMA_VERSION}"
    with pytest.raises(StorageError, match=newer):
        ResultStore(storage_url)


def test_newer_schema_is_refused_by_a_read_naming_the_file(tmp_path):
    path = tmp_path / "newer.db"
    with ResultStore(str(path)).session() as s:
        s.execute(update(m.Meta).values(value=str(m.SCHEMA_VERSION + 1)))
    with pytest.raises(StorageError, match=f"^{path} has schema version"):
        ResultStore(str(path), read_only=True)


def test_unreachable_database():
    with pytest.raises(StorageError, match="cannot use storage"):
        ResultStore("postgresql://nobody@127.0.0.1:1/none")


def test_canonical_key_ignores_order():
    assert canonical_key({"a": 1, "b": [1, 2]}) == canonical_key({"b": [1, 2], "a": 1})
    assert canonical_key({"a": 1}) != canonical_key({"a": 2})


def test_configs_and_evaluations_are_stored_once(storage_url):
    store = ResultStore(storage_url)
    with store.session() as s:
        target = rows.target_id(s, "abc", "t", {"x": 1})
        assert rows.target_id(s, "abc", "t", {"x": 1}) == target
        workload = rows.workload_id(s, {"M": 1, "K": 2, "N": 3})
        ids = rows.config_ids(s, "space", [{"m": 1, "k": 2}, {"k": 2, "m": 1}, {"m": 2}])
        assert ids[0] == ids[1] != ids[2]
        row = {"target_id": target, "workload_id": workload, "config_id": ids[0],
               "evaluator": "analytical", "version": "1", "fidelity": "analytical",
               "status": "ok", "reason": None, "metrics": {"tops": 1.0}, "tops": 1.0,
               "elapsed_s": 0.0, "host": "h", "versions": {}, "created_at": m.datetime.now()}
        rows.put_evaluations(s, [row])
        rows.put_evaluations(s, [dict(row, metrics={"tops": 2.0})])  # same identity: kept
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(m.EvaluationRow)) == 1
        found = rows.find_evaluations(s, target, workload, ids, "analytical", "1")
        assert found[ids[0]].metrics == {"tops": 1.0}
        assert not rows.find_evaluations(s, target, workload, ids, "analytical", "2")


def test_journal_commits_only_with_the_transaction(storage_url):
    store = ResultStore(storage_url)
    with store.session() as s:
        study = rows.create_study(s, "j", {}, rows.target_id(s, "d", "t", {})).id
    journal = SqlJournalBackend(store, study)
    journal.append_logs([{"op": 1}, {"op": 2}])
    assert list(journal.read_logs(0)) == [{"op": 1}, {"op": 2}]
    with pytest.raises(RuntimeError), store.session() as s:
        journal.write_pending(s)
        raise RuntimeError("the window failed")
    assert SqlJournalBackend(store, study).read_logs(0) == []
    assert journal.pending == 2  # still pending: a retry writes them whole
    journal.append_logs([{"op": 3}])
    with store.session() as s:
        journal.write_pending(s)
    journal.mark_committed()
    assert list(SqlJournalBackend(store, study).read_logs(0)) == [{"op": 1}, {"op": 2},
                                                                 {"op": 3}]
    assert list(journal.read_logs(2)) == [{"op": 3}]


def _open(url: str) -> int:
    return ResultStore(url).schema_version()


def test_many_processes_create_one_schema(storage_url):
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(4) as pool:
        assert pool.map(_open, [storage_url] * 4) == [m.SCHEMA_VERSION] * 4


def test_a_version_1_database_is_migrated(storage_url):
    store = ResultStore(storage_url)
    m.FidelityRow.__table__.drop(store.engine)
    m.FaultRow.__table__.drop(store.engine)
    with store.session() as s:
        s.execute(update(m.Meta).values(value="1"))
    again = ResultStore(storage_url)
    assert again.schema_version() == m.SCHEMA_VERSION
    with again.session() as s:
        assert s.scalar(select(func.count()).select_from(m.FidelityRow)) == 0
        assert s.scalar(select(func.count()).select_from(m.FaultRow)) == 0


def test_documents_orjson_refuses_are_still_read():
    # the standard library writes NaN and Infinity, which orjson (strict JSON) refuses
    assert json_loads('{"a": 1, "b": [2.5, "x"]}') == {"a": 1, "b": [2.5, "x"]}
    decoded = json_loads('{"t": NaN, "u": Infinity}')
    assert math.isnan(decoded["t"]) and decoded["u"] == math.inf
