"""A study's frame kept whole when its run ends (dse.storage.snapshots): taken while its trials
are those it was kept with, passed over when stale, damaged or missing, on real SQLite and
PostgreSQL databases."""

from __future__ import annotations

import functools

import pandas as pd
import pytest
from sqlalchemy import select, update

from dse import load_trials
from dse.storage import ResultStore, runs, snapshots
from dse.storage import models as m
from dse.storage.frames import study_frame
from dse.study.runner import run_study
from dse.study.spec import study_from_dict
from tests.helpers import store_window

STUDY = {"name": "r", "target": "xdna2", "sampler": "random", "seed": 2,
         "budget": {"trials": 60},
         "workloads": [{"shape": "4096x4096x4096", "dtype": "int8-int8"},
                       {"shape": "1024x4096x2048", "dtype": "bf16-bf16"}]}


@pytest.fixture
def kept_always(monkeypatch):
    """Snapshots kept for a study of any size."""
    monkeypatch.setattr(runs, "MIN_TRIALS", 1)


def _live(storage: str, name: str) -> pd.DataFrame:
    """The study's frame read from its documents (``load_trials`` by a store made to read no
    kept frame)."""
    return ResultStore(storage, read_only=True,
                       frame_reader=functools.partial(study_frame, snapshot=False)
                       ).load_trials(name)


def _snapshot_row(storage: str) -> m.FrameSnapshotRow | None:
    with ResultStore(storage).session() as s:
        return s.scalar(select(m.FrameSnapshotRow))


def _assert_same(frame: pd.DataFrame, other: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(frame, other, check_exact=True)
    assert frame.attrs == other.attrs


@pytest.mark.parametrize("study", [
    {"name": "e", "target": "xdna", "sampler": "exhaustive",
     "workload": {"shape": "128x128x128", "dtype": "int8-int8"}},
    STUDY,  # refused configs and their reasons, repeats, two workloads
], ids=["exhaustive", "random"])
def test_the_kept_frame_is_the_frame_read_from_the_documents(storage_url, study, kept_always):
    run_study(study_from_dict(study), storage_url)
    row = _snapshot_row(storage_url)
    assert row is not None and row.format == snapshots.FORMAT
    assert (row.trials, row.last_number) == (len(_live(storage_url, study["name"])),
                                              len(_live(storage_url, study["name"])) - 1)
    _assert_same(load_trials(storage_url, study["name"]), _live(storage_url, study["name"]))


def test_a_trial_added_since_makes_the_kept_frame_stale(storage_url, kept_always, monkeypatch):
    run_study(study_from_dict(STUDY), storage_url)
    kept = _snapshot_row(storage_url)
    # a later run adds trials without keeping the frame again (as if the keeping failed)
    monkeypatch.setattr(ResultStore, "keep_frame", lambda self, name: None)
    run_study(study_from_dict({**STUDY, "budget": {"trials": 70}}), storage_url)
    assert _snapshot_row(storage_url).body == kept.body
    frame = load_trials(storage_url, "r")
    assert len(frame) == 140 and len(frame) > kept.trials
    _assert_same(frame, _live(storage_url, "r"))


def test_a_damaged_or_foreign_snapshot_is_passed_over(storage_url, kept_always):
    run_study(study_from_dict(STUDY), storage_url)
    live = _live(storage_url, "r")
    store = ResultStore(storage_url)
    for change in ({"body": b"not an arrow stream"}, {"format": "arrow-ipc-zstd/0 dse 0.0"}):
        with store.session() as s:
            s.execute(update(m.FrameSnapshotRow).values(**change))
        _assert_same(load_trials(storage_url, "r"), live)


def test_columns_of_python_objects_are_kept_exactly_and_a_frame_that_is_not_is_not_kept(
        tmp_path, kept_always, monkeypatch):
    # a metric only some results have (NaN elsewhere), one of several types, one holding lists
    path = str(tmp_path / "objects.db")
    store = ResultStore(path)
    metrics = [{"tops": 1.0, "v": [0, 2], "mixed": 1, "only": True, "pair": [1, 2]},
               {"tops": 2.0, "v": [1, {"a": None}], "mixed": "x", "pair": [3, 4]},
               {"tops": 3.0, "v": [], "mixed": 2.5, "nothing": None, "pair": [5, 6]}]
    store.commit_window(store_window(store, "o", [({"a": i}, values, False)
                                                  for i, values in enumerate(metrics)]))
    assert store.keep_frame("o") > 0
    kept = load_trials(path, "o")
    _assert_same(kept, _live(path, "o"))
    assert list(kept["v"]) == [[0, 2], [1, {"a": None}], []]
    assert [type(value) for value in kept["mixed"]] == [int, str, float]
    assert list(kept["pair"]) == [[1, 2], [3, 4], [5, 6]]
    # a frame whose decoded snapshot differs from it is not kept, and the one before is dropped
    monkeypatch.setattr(snapshots, "decode", lambda body: kept.iloc[:2])
    assert store.keep_frame("o") is None and _snapshot_row(path) is None
    _assert_same(load_trials(path, "o"), _live(path, "o"))


def test_a_small_study_keeps_no_frame(storage_url):
    run_study(study_from_dict(STUDY), storage_url)
    assert snapshots.MIN_TRIALS > 120 and _snapshot_row(storage_url) is None


def test_a_schema_4_file_is_read_without_snapshots_and_migrated_when_written(tmp_path,
                                                                             kept_always):
    path = str(tmp_path / "old.db")
    run_study(study_from_dict(STUDY), path)
    store = ResultStore(path)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE dse_frame_snapshots")
        conn.execute(update(m.Meta).values(value="4"))
    store.engine.dispose()
    assert len(load_trials(path, "r")) == 120  # read-only: no table, no migration
    assert ResultStore(path, read_only=True).schema_version() == 4
    assert ResultStore(path).schema_version() == m.SCHEMA_VERSION
    assert _snapshot_row(path) is None


def test_a_frame_that_cannot_be_kept_is_reported_not_raised(tmp_path, kept_always, capsys):
    path = str(tmp_path / "ro.db")
    run_study(study_from_dict(STUDY), path)
    assert ResultStore(path, read_only=True).keep_frame("r") is None
    assert "its frame was not kept for fast reads" in capsys.readouterr().err
    assert _snapshot_row(path) is not None  # the one the run kept stands
