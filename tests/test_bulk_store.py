"""Bulk writes and columnar reads of the store, against the row-by-row paths they replaced, on
real SQLite and PostgreSQL databases (PostgreSQL skipped without ``DSE_TEST_POSTGRES_URL``)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from sqlalchemy import inspect, select, update
from sqlalchemy.exc import IntegrityError

from dse import load_trials
from dse.storage import ResultStore, frames
from dse.storage import models as m
from dse.storage.bulk import CHUNK, insert_new_rows
from dse.storage.copy_text import column_texts, copy_text
from dse.storage.documents import Joined, documents_frame
from dse.storage.engine import json_dumps, json_loads, json_texts
from dse.storage.windows import hold_write_lock, write_window
from dse.study.runner import run_study
from dse.study.spec import study_from_dict
from tests.helpers import store_before, store_window

# commit_window's write paths: dse's, and the one before it (benchmarks/store_before.py)
WRITE_PATHS = {"bulk": write_window, "rows": store_before().write_window_by_rows}


@pytest.fixture(params=list(WRITE_PATHS))
def write_path(request):
    """Each write path of commit_window in turn, for a store made with it."""
    return WRITE_PATHS[request.param]


def _stored(store: ResultStore) -> dict[str, list[tuple]]:
    """Every row the windows wrote, in the order written, by content: an id as the key of the
    config it names (ids are the database's to number), documents decoded, times left out."""
    c, e, t = m.ConfigRow, m.EvaluationRow, m.TrialRow
    with store.session() as s:
        keys = dict(s.execute(select(c.id, c.key)).all())
        configs = s.execute(select(c.key, c.space, c.params).order_by(c.id)).all()
        evaluations = s.execute(select(
            e.id, e.target_id, e.workload_id, e.config_id, e.evaluator, e.version, e.fidelity,
            e.status, e.reason, e.metrics, e.tops, e.elapsed_s, e.host, e.versions)
            .order_by(e.id)).all()
        of_evaluation = {row[0]: keys[row[3]] for row in evaluations}
        trials = s.execute(select(t.study_id, t.number, t.workload_id, t.config_id,
                                  t.evaluation_id, t.status, t.cached).order_by(t.id)).all()
    return {
        "configs": [tuple(row) for row in configs],
        "evaluations": [(*row[1:3], keys[row[3]], *(_plain(v) for v in row[4:]))
                        for row in evaluations],
        "trials": [(*row[:3], keys[row[3]], of_evaluation[row[4]], *row[5:]) for row in trials]}


def _plain(value):
    """NaN as a string, so two rows holding it compare equal."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


TRIALS = [({"a": 1, "b": "x"}, {"tops": 1.5, "bound": "memory", "l1": 3}, False),
          ({"b": "x", "a": 1}, {"tops": 1.5, "bound": "memory", "l1": 3}, False),  # repeat
          ({"a": 2, "b": "y"}, {"tops": 2.5, "bound": "compute", "l1": 4, "é": "ü"}, False),
          ({"a": 3, "b": "z"}, {}, False),  # infeasible: no metrics
          ({"a": 4, "b": "w"}, {"tops": 0.5, "note": None, "big": 10 ** 30}, False)]


def _empty(store: ResultStore) -> None:
    """Delete every row, ids restarting at 1 (SQLite reuses them; PostgreSQL restarts its
    sequences)."""
    tables = [t.name for t in reversed(m.Base.metadata.sorted_tables)]
    with store.session() as s:
        if store.dialect == "postgresql":
            s.connection().exec_driver_sql(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY")
        else:
            for name in tables:
                s.connection().exec_driver_sql(f"DELETE FROM {name}")


def test_bulk_writes_store_the_rows_the_old_path_stores(storage_url):
    stored = {}
    for path, writer in WRITE_PATHS.items():
        store = ResultStore(storage_url, window_writer=writer)
        _empty(store)
        store.commit_window(store_window(store, "s", TRIALS))
        store.commit_window(store_window(store, "s", TRIALS[:2], next_number=len(TRIALS)))
        stored[path] = _stored(store)
    assert stored["bulk"] == stored["rows"]
    assert len(stored["bulk"]["evaluations"]) == 4 and len(stored["bulk"]["trials"]) == 7


def test_a_version_3_database_loses_the_bulk_tables_checks(storage_url):
    # version 3 indexed the evaluations by target and workload, the trials by study, and
    # (PostgreSQL) checked their references per row; version 4 keeps only their identities
    store = ResultStore(storage_url)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("CREATE INDEX ix_dse_trials_study_id ON dse_trials (study_id)")
        conn.exec_driver_sql("CREATE INDEX ix_dse_evaluations_target_id "
                             "ON dse_evaluations (target_id)")
        if store.dialect == "postgresql":
            conn.exec_driver_sql("ALTER TABLE dse_trials ADD FOREIGN KEY (study_id) "
                                 "REFERENCES dse_studies (id)")
        conn.execute(update(m.Meta).values(value="3"))
    again = ResultStore(storage_url)
    assert again.schema_version() == m.SCHEMA_VERSION
    inspector = inspect(again.engine)
    for table in ("dse_trials", "dse_evaluations"):
        assert [ix["name"] for ix in inspector.get_indexes(table) if not ix["unique"]] == []
        assert inspector.get_foreign_keys(table) == []
    # an older SQLite file keeps its foreign keys: the bulk path's ids satisfy them
    again.commit_window(store_window(again, "s", TRIALS))
    assert len(_stored(again)["trials"]) == len(TRIALS)


def test_nan_and_infinities_round_trip_as_the_standard_library_writes_them(tmp_path,
                                                                           write_path):
    store = ResultStore(str(tmp_path / "nan.db"), window_writer=write_path)
    metrics = {"tops": 1.0, "t": float("nan"), "u": float("inf"), "v": -float("inf")}
    store.commit_window(store_window(store, "n", [({"a": 1}, metrics, False)]))
    frame = load_trials(store, "n")
    assert math.isnan(frame["t"][0]) and frame["u"][0] == math.inf
    assert frame["v"][0] == -math.inf
    with store.session() as s:
        text = s.connection().exec_driver_sql("SELECT metrics FROM dse_evaluations").scalar()
    assert json_loads(text) == {"tops": 1.0, "t": pytest.approx(float("nan"), nan_ok=True),
                                "u": math.inf, "v": -math.inf}
    assert "NaN" in text and "Infinity" in text


def test_json_dumps_means_what_the_standard_library_writes():
    for value in [{"a": 1.5, "b": "x", "c": [1, 2]}, {"a": None}, {"é": "ü"}, {"a": 1e16},
                  {"a": 10 ** 30}, {1: 2}, {"a": float("nan")}, {}]:
        # the text means what the standard library's means (json_loads reads integers past
        # 64 bits as floats, whoever wrote them)
        assert _plain(json.loads(json_dumps(value))) == _plain(json.loads(json.dumps(value)))
    assert json_dumps({"a": float("nan")}) == json.dumps({"a": float("nan")})
    with pytest.raises(TypeError):
        json_dumps({"a": object()})


def test_nan_is_refused_on_postgresql_as_before(postgres_url, write_path):
    # PostgreSQL's JSON type takes no NaN: both paths refuse the window, and store nothing
    from sqlalchemy.exc import DataError

    store = ResultStore(postgres_url, window_writer=write_path)
    with pytest.raises(DataError):
        store.commit_window(store_window(store, "n", [({"a": 1}, {"t": float("nan")}, False)]))
    assert _stored(store)["trials"] == []


def test_a_failing_window_leaves_nothing_half_stored(storage_url, write_path):
    store = ResultStore(storage_url, window_writer=write_path)
    store.commit_window(store_window(store, "f", TRIALS[:1]))
    before = _stored(store)
    # trial number 0 exists already: the trials' insert fails after the configs' and the
    # evaluations' did
    with pytest.raises(IntegrityError):
        store.commit_window(store_window(store, "f", TRIALS[2:], next_number=0))
    assert _stored(store) == before


def test_the_columnar_frame_equals_the_old_one():
    texts = ['{"i": 1, "f": 2.5, "s": "a", "b": true}', '{"f": 3, "i": 2, "s": "b", "b": false}',
             '{"i": 3, "f": null, "b": true, "late": "x"}']
    cases = [texts, [*texts, '{"i": 1.5}'], ['{"t": "2024-01-01"}', '{"t": "x"}'],
             ['{"n": [1, 2]}', '{"n": {"a": 1}}'], ['{"b": true}', '{}'], ['{}', '{}'],
             ['{"x": NaN}', '{"x": 1.0}'], ['{"i": 1}', '{"i": "s"}'], ['{"z": null}']]
    for case in cases:
        old = pd.DataFrame.from_records([json_loads(t) for t in case])
        pd.testing.assert_frame_equal(documents_frame(case), old, check_exact=True)


@pytest.mark.parametrize("study", [
    {"name": "e", "target": "xdna", "sampler": "exhaustive",
     "workload": {"shape": "128x128x128", "dtype": "int8-int8"}},
    # refused configs (their reasons), repeats served from the store, two workloads
    {"name": "r", "target": "xdna2", "sampler": "random", "seed": 2, "budget": {"trials": 60},
     "workloads": [{"shape": "4096x4096x4096", "dtype": "int8-int8"},
                   {"shape": "1024x4096x2048", "dtype": "bf16-bf16"}]},
], ids=["exhaustive", "random"])
def test_load_trials_of_a_real_study_equals_the_old_path(storage_url, study, monkeypatch):
    run_study(study_from_dict(study), storage_url)
    new = load_trials(storage_url, study["name"])
    # the documents one by one: the database did not join them, or not in the trials' order
    monkeypatch.setattr(frames, "read_joined", lambda *args: None)
    by_rows = load_trials(storage_url, study["name"])
    # the old read path (benchmarks/store_before.py), by a store made to read so
    old = ResultStore(storage_url, read_only=True,
                      frame_reader=store_before().rows_study_frame).load_trials(study["name"])
    assert len(new) >= 60 and (study["sampler"] == "exhaustive" or new["reason"].notna().any())
    for frame in (new, by_rows):
        pd.testing.assert_frame_equal(frame, old, check_exact=True)
        assert frame.attrs == old.attrs


def test_documents_out_of_the_trials_order_are_not_taken():
    joined = Joined(None, "0,2,1")
    assert not joined.in_order([0, 1, 2]) and joined.in_order([0, 2, 1])
    assert Joined(None, None).in_order([5, 3])  # an order the database promised


def test_json_texts_are_json_dumps_of_each_document():
    columns = [[{"a": 1.5, "b": "x\\y\n"}, {"c": [1, 2]}, {}],
               [{"a": float("nan")}, {"a": 1}],  # one needs the standard library: all do
               [{1: 2}], [{"a": 10 ** 30}], [{"s": "null"}], [{"é": "ü\t"}], []]
    for values in columns:
        assert json_texts(values) == [json_dumps(v) for v in values]
    with pytest.raises(TypeError):
        json_texts([{"a": 1}, {"a": object()}])


def test_copy_text_reads_back_as_written_on_postgresql(postgres_url):
    # every kind of value a window writes, through COPY's text format and back, bit for bit
    from datetime import datetime

    import numpy as np
    from sqlalchemy import create_engine

    floats = [0.1, 1e-300, 5e-324, 2.0 ** 60, -0.0, math.inf, -math.inf, 1 / 3, np.float64(2.5)]
    texts = ["plain", "tab\there", "new\nline", "back\\slash", "cr\rx", "é", "\\N", ""]
    rows = max(len(floats), len(texts))
    columns = [list(range(rows)), [floats[i % len(floats)] for i in range(rows)],
               [texts[i % len(texts)] for i in range(rows)], [None] * (rows - 1) + [7],
               [i % 2 == 0 for i in range(rows)]]
    created = datetime(2026, 12, 4, 15, 30, 1, 250)
    engine = create_engine(postgres_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (i integer, f float8, s text, n integer, "
                             "b boolean, c timestamp, d json)")
        with conn.connection.driver_connection.cursor() as cursor, \
                cursor.copy("COPY t FROM STDIN") as copy:
            copy.write(copy_text(columns, [created, '{"k": "v\\\\w"}']))
        back = conn.exec_driver_sql("SELECT i, f, s, n, b, c, d FROM t ORDER BY i").all()
    engine.dispose()
    assert [row.i for row in back] == columns[0]
    assert [row.f for row in back] == [float(v) for v in columns[1]]
    assert [math.copysign(1, row.f) for row in back] == [math.copysign(1, v) for v in columns[1]]
    assert [row.s for row in back] == columns[2] and [row.n for row in back] == columns[3]
    assert [row.b for row in back] == columns[4]
    assert {row.c for row in back} == {created}
    assert all(row.d == {"k": "v\\w"} for row in back)
    assert column_texts([math.nan, None]) == ["nan", "\\N"]  # NaN reads back as PostgreSQL's NaN


def test_a_window_of_stored_configs_and_results_is_stored_again_without_copies(storage_url):
    # another study asks for the same configs and evaluates them again: on PostgreSQL the
    # straight COPY meets the stored rows, is undone, and the staging table skips them
    store = ResultStore(storage_url)
    store.commit_window(store_window(store, "first", TRIALS))
    before = _stored(store)
    store.commit_window(store_window(store, "second", TRIALS))
    after = _stored(store)
    assert after["configs"] == before["configs"]
    assert after["evaluations"] == before["evaluations"]
    first, second = (frame.drop(columns=["study", "created_at"]).reset_index(drop=True)
                     for frame in (load_trials(store, "first"), load_trials(store, "second")))
    pd.testing.assert_frame_equal(first, second)


def test_work_meanwhile_is_done_once_while_the_rows_are_stored(storage_url):
    # the store builds a table's columns while the server stores the table before: that work
    # is done once, whether the rows are all new or some were stored (PostgreSQL then undoes
    # the straight COPY and goes through the staging table)
    store = ResultStore(storage_url)
    table, done = m.ConfigRow.__table__, []
    for keys, new in ((["a", "b"], ["a", "b"]), (["b", "c", "d"], ["c", "d"])):
        with store.session() as s:
            connection = s.connection()
            hold_write_lock(connection)
            ids = insert_new_rows(connection, table, {"key": keys, "params": [{}] * len(keys)},
                                  {"space": "sp"}, conflict=["key"], key=["key"],
                                  meanwhile=lambda: done.append(len(done)))
        assert sorted(ids) == [(key,) for key in new]
    assert done == [0, 1]
    with store.session() as s:
        assert sorted(s.scalars(select(m.ConfigRow.key))) == ["a", "b", "c", "d"]


def test_rows_copied_in_many_chunks_are_the_rows_of_one(postgres_url, monkeypatch):
    # COPY is streamed a chunk of rows at a time, each built as it is sent: cut into chunks of
    # two rows, new rows (copied straight in) and stored ones (through the staging table) are
    # stored as from one chunk
    store = ResultStore(postgres_url)
    stored = {}
    for chunk in (CHUNK, 2):
        monkeypatch.setattr("dse.storage.bulk.CHUNK", chunk)
        _empty(store)
        store.commit_window(store_window(store, "first", TRIALS))
        store.commit_window(store_window(store, "second", TRIALS[1:]))
        stored[chunk] = _stored(store)
    assert stored[2] == stored[CHUNK]
    assert len(stored[2]["evaluations"]) == 4 and len(stored[2]["trials"]) == 9


def test_a_new_sqlite_file_has_big_pages_and_an_old_one_keeps_its_own(tmp_path):
    import sqlite3

    from dse.storage.engine import PAGE_BYTES

    old = tmp_path / "old.db"
    with sqlite3.connect(old) as conn:  # a file made before: 4 KiB pages, no WAL yet, and
        conn.execute("PRAGMA page_size=4096")  # no table (one of its own: not a dse store)
        conn.execute("CREATE TABLE t (x)")
        conn.execute("DROP TABLE t")
    for path, size in ((tmp_path / "new.db", PAGE_BYTES), (old, 4096)):
        store = ResultStore(str(path))
        store.commit_window(store_window(store, "p", TRIALS))
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA page_size").fetchone()[0] == size
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert len(load_trials(str(path), "p")) == len(TRIALS)


def test_a_study_served_from_the_store_has_the_results_another_evaluated(storage_url):
    # the second study asks for the same configs: every result comes from the store, read by
    # config key (ids first, then their evaluations), equal to what the first one evaluated
    spec = {"target": "xdna", "sampler": "exhaustive",
            "workload": {"shape": "128x128x128", "dtype": "int8-int8"}}
    first = run_study(study_from_dict({"name": "first", **spec}), storage_url)
    second = run_study(study_from_dict({"name": "second", **spec}), storage_url)
    assert first.workloads[0].evaluated > 0 and second.workloads[0].evaluated == 0
    frames_ = [load_trials(storage_url, name).drop(columns=["study", "cached", "created_at"])
               for name in ("first", "second")]
    pd.testing.assert_frame_equal(*frames_, check_exact=True)
    assert load_trials(storage_url, "second")["cached"].all()
