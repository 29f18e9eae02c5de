"""Pages of trials filtered and sorted in SQL agree with the pandas path on real databases."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dse import load_trials
from dse.cli import main
from dse.core.errors import UsageError
from dse.storage import open_store
from dse.storage.filters import apply_filter
from dse.study.runner import run_study
from tests.study_helpers import make_spec

CASES = [  # (where, sort)
    (None, "-tops"),
    (None, "number"),
    ("status == 'ok' and k_ct >= 64", "-tops"),
    ("not (tops > 5)", "latency_s"),  # a missing tops is not > 5, so "not" keeps it
    ("dtype = 'int8-int8' and bound != 'memory'", "-latency_s"),
    ("status != 'ok'", "-number"),
    ("shape == '1024x1024x1024' and (m_ct < 64 or n_ct > 32)", "-k_ct"),
    ("tops > 1e9", "tops"),  # matches nothing
]


def pandas_page(frame: pd.DataFrame, where: str | None, sort: str, offset: int,
                limit: int) -> tuple[int, pd.DataFrame]:
    rows = apply_filter(frame, where) if where else frame
    rows = rows.sort_values(sort.lstrip("-"), ascending=not sort.startswith("-"),
                            kind="stable", na_position="last")
    return len(rows), rows.iloc[offset:offset + limit]


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """Values only: a page may hold a column all missing (None) that the full frame types."""
    values = frame.astype(object)
    return values.where(values.notna(), None).reset_index(drop=True)


@pytest.fixture
def study(storage_url):
    spec = make_spec("paged", workload=None, budget={"trials": 40}, workloads=[
        {"shape": "2048x2048x2048", "dtype": "int8-int8"},
        {"shape": "1024x1024x1024", "dtype": "int8-int8"}])
    run_study(spec, storage_url)
    return storage_url, load_trials(storage_url, "paged")


@pytest.mark.parametrize(("where", "sort"), CASES)
def test_page_matches_pandas(study, where, sort):
    storage, frame = study
    assert {"ok", "infeasible"} <= set(frame["status"])  # missing metrics are exercised
    for offset, limit in ((0, 25), (20, 25), (75, 10)):
        page = open_store(storage).trial_page("paged", where=where, sort=sort, offset=offset,
                                              limit=limit)
        total, expected = pandas_page(frame, where, sort, offset, limit)
        assert page.total == total
        assert list(page.frame["number"]) == list(expected["number"])
        assert set(page.frame.columns) <= set(frame.columns)
        if len(expected):
            checked = ["number", "shape", "dtype", "status", "reason", "k_ct", "tops"]
            pd.testing.assert_frame_equal(comparable(page.frame[checked]),
                                          comparable(expected[checked]))

@pytest.mark.parametrize(("kwargs", "message"), [
    ({"where": "tops >"}, "ends too early"),
    ({"where": "colour == 'red'"}, "unknown column 'colour'"),
    ({"where": "status > 3"}, "cannot compare a number with text"),
    ({"where": "3 > 2"}, "needs at least one column"),
    ({"sort": "-colour"}, "sort: unknown column 'colour'"),
    ({"offset": -1}, "offset must be 0 to 2147483647"),
    ({"offset": 10**24}, "offset must be 0 to 2147483647"),
    ({"limit": 0}, "limit 1 to 2147483647"),
    ({"where": "(" * 1200 + "tops > 1" + ")" * 1200}, "is too long: 2403 names"),
    ({"where": " or ".join(["tops > 1"] * 120)}, "at most 400"),
    ({"where": "not " * 60 + "tops > 1"}, "nests more than 50 parentheses and nots"),
])
def test_bad_requests_name_the_problem(study, kwargs, message):
    storage, _ = study
    with pytest.raises(UsageError, match=message):
        open_store(storage).trial_page("paged", **kwargs)


@pytest.mark.parametrize("where", [
    "m_ct == '176'", "m_ct != '64'", "status == 3", "'ok' == tops", "status < k_ct",
    "m_ct == 64 or dtype == 'int8-int8'", "cached == 0",
])
def test_a_filter_means_the_same_with_and_without_a_limit(study, capsys, where):
    storage, _ = study
    query = ["trials", "paged", "--storage", storage, "--where", where, "--format", "json"]
    outcomes = []
    for extra in ([], ["--limit", "1000"]):
        code = main([*query, *extra])
        captured = capsys.readouterr()
        outcomes.append((code, sorted(r["number"] for r in json.loads(captured.out))
                         if code == 0 else captured.err.strip()))
    assert outcomes[0] == outcomes[1]


def test_unknown_study(tmp_path):
    run_study(make_spec("other"), str(tmp_path / "r.db"))
    with pytest.raises(UsageError, match="paged"):
        open_store(str(tmp_path / "r.db")).trial_page("paged")


def test_trials_command_pages_in_sql(study, capsys):
    storage, frame = study
    args = ["trials", "paged", "--storage", storage, "--where", "status == 'ok'", "--sort",
            "tops", "--desc", "--format", "json"]
    assert main([*args, "--limit", "5", "--offset", "2"]) == 0
    out = capsys.readouterr()
    total, expected = pandas_page(frame, "status == 'ok'", "-tops", 2, 5)
    assert [r["number"] for r in json.loads(out.out)] == list(expected["number"])
    assert f"trials 3-7 of {total} matching" in out.err
    assert main([*args, "--limit", "0"]) == 2
    assert "--limit: expected 1 to 1,000,000 rows, got 0" in capsys.readouterr().err


def test_trials_table_shows_missing_values_one_way_and_cuts_long_reasons(study, capfd):
    storage, frame = study
    views = {"whole": [], "paged": ["--limit", "40"]}
    shown = {}
    for name, extra in views.items():
        assert main(["trials", "paged", "--storage", storage, "--sort", "number", *extra]) == 0
        shown[name] = capfd.readouterr()
    for name, out in shown.items():
        lines = out.out.splitlines()
        rows = lines[2:]
        assert not any(word in line.split() for line in rows for word in ("nan", "None", "NaN"))
        assert max(map(len, lines)) <= 200, name
        ok_row = next(line for line in rows if " ok " in line)
        assert ok_row.rstrip().endswith(" -")  # an ok trial has no reason
    if (frame["reason"].fillna("").str.len() > 60).any():
        assert any("…" in line for line in shown["whole"].out.splitlines())
    # the page's count is on stderr, after the table, not on its last line
    assert shown["paged"].err.startswith("trials 1-40 of ")
    assert shown["paged"].out.endswith("\n")
