"""The dashboard's data and pages, served by Flask's test client over real databases (the
browser tests in test_dashboard_browser.py drive the real server in Chromium)."""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest
from sqlalchemy import func, select

from dse import load_trials
from dse.analysis.explore import trial_points
from dse.core.errors import UsageError
from dse.dashboard import create_app, serve
from dse.dashboard.data import summarise
from dse.storage import ResultStore, open_store
from dse.storage import models as m
from dse.storage.frames import best_trials
from dse.study.runner import run_study
from dse.study.spec import study_from_dict
from tests.study_helpers import ALL_FAIL, LADDER, MIN_DRAM, PARETO, TWO_WORKLOADS


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    storage = str(tmp_path_factory.mktemp("dash") / "d.db")
    for spec in (LADDER, TWO_WORKLOADS, PARETO, MIN_DRAM, ALL_FAIL):
        run_study(study_from_dict(spec), storage)
    return storage


@pytest.fixture(scope="module")
def client(studies):
    return create_app(studies).test_client()


def _best_numbers(storage, study):
    best = best_trials(load_trials(storage, study))
    return {(shape, dtype): list(group["number"]) for (shape, dtype), group
            in best.groupby(["shape", "dtype"], sort=False)}


@pytest.mark.parametrize("spec", [LADDER, TWO_WORKLOADS, PARETO, MIN_DRAM],
                         ids=lambda s: s["name"])
def test_summary_names_what_dse_best_names(storage_url, spec):
    run_study(study_from_dict(spec), storage_url)
    summary = summarise(ResultStore(storage_url), spec["name"])
    expected = _best_numbers(storage_url, spec["name"])
    got = {(w.best["shape"].iloc[0], w.best["dtype"].iloc[0]): list(w.best["number"])
           for w in summary.workloads}
    if len(spec.get("objectives", [])) < 2:
        expected = {k: v[:10] for k, v in expected.items()}
    assert got == expected
    assert summary.total == sum(w.trials for w in summary.workloads)


def test_summary_keeps_the_ladder_pairs_and_history(studies):
    summary = summarise(ResultStore(studies), "lad")
    (workload,) = summary.workloads
    # every simulated config is paired with its analytical score
    assert set(workload.ladder["evaluator"]) == {"analytical", "simulator"}
    assert (workload.ladder["evaluator"] == "simulator").sum() == 6
    assert len(workload.numbers) == workload.ok == len(workload.values)
    assert workload.best["evaluator"].iloc[0] == "simulator"  # the most faithful rung


def test_pages_render(client):
    index = client.get("/")
    assert index.status_code == 200
    for name in ("lad", "two", "mo"):
        assert f'href="/study/{name}"' in index.text
    study = client.get("/study/two")
    assert study.status_code == 200
    for title in ("Optimisation history", "Balance: t_comp and t_mem against k_ct",
                  "Roofline", "Parameter importance", "2048x2048x2048 int8-int8",
                  "Empirical distribution of tops", "Timeline: when each feasible trial",
                  "1024x2048x512 bf16-bf16"):
        assert title in study.text, title
    assert "Pareto front" in client.get("/study/mo").text
    assert "simulator against analytical (6 configs, Spearman" in client.get("/study/lad").text
    js = client.get("/assets/plotly.min.js")
    assert js.status_code == 200 and len(js.data) > 1_000_000


def test_best_card_matches_dse_best(client, studies):
    expected = _best_numbers(studies, "lad")[("1024x1024x1024", "int8-int8")][0]
    page = client.get("/study/lad").text
    assert re.search(r'class="best-number" href="/config/(\d+)/lad"', page).group(1) == str(
        expected)


def test_trials_page_sorts_filters_and_pages(client):
    page = client.get("/trials/two", query_string={
        "where": "status == 'ok' and k_ct >= 48", "sort": "k_ct", "limit": 7, "page": 2})
    assert page.status_code == 200
    k_ct = [int(v) for v in re.findall(r'<td data-column="k_ct">(\d+)</td>', page.text)]
    assert len(k_ct) == 7 and k_ct == sorted(k_ct) and min(k_ct) >= 48
    assert re.search(r"8&ndash;14 of \d+ trials", page.text)


def test_bad_table_input_is_explained(client):
    bad = client.get("/trials/two", query_string={"where": "nope > 1"})
    assert bad.status_code == 400
    assert "unknown column &#39;nope&#39;" in bad.text
    assert client.get("/trials/two", query_string={"sort": "-nope"}).status_code == 400
    assert "not a whole number" in client.get("/trials/two?page=x").text
    missing = client.get("/study/absent")
    assert missing.status_code == 404 and "absent" in html.unescape(missing.text)
    assert client.get("/config/99999/two").status_code == 404
    huge = 10**24
    assert client.get(f"/config/{huge}/two").status_code == 404
    assert client.get(f"/timeline/{huge}/two").status_code == 404
    assert "out of range" in client.get(f"/trials/two?page={huge}").text
    deep = client.get("/trials/two", query_string={"where": "(" * 2000 + "k_ct > 1" + ")" * 2000})
    assert deep.status_code == 400 and "is too long" in deep.text


def test_config_page_shows_memory_traffic_and_stalls(client):
    page = client.get("/config/6/lad").text  # the first simulated trial
    for title in ("On-chip resource occupancy", "DRAM traffic per matrix", "Time breakdown",
                  "stall: C drain", "Download the simulator's timeline"):
        assert title in page, title


def test_config_page_explains_infeasibility(client, studies):
    with ResultStore(studies).session() as s:
        number = s.scalar(select(func.min(m.TrialRow.number)).join(
            m.StudyRow, m.StudyRow.id == m.TrialRow.study_id).where(
            m.StudyRow.name == "mo", m.TrialRow.status == "infeasible"))
    assert number is not None
    page = client.get(f"/config/{number}/mo").text
    assert 'id="reason"' in page and "Why infeasible" in page


def test_timeline_download_is_a_chrome_trace(client):
    response = client.get("/timeline/6/lad")
    assert response.status_code == 200
    assert "attachment" in response.headers["Content-Disposition"]
    assert response.json["traceEvents"]
    assert client.get("/timeline/0/lad").status_code == 404  # analytical: nothing simulated


def test_compare_page(client):
    page = client.get("/compare", query_string={"a": "two", "b": "lad"})
    assert page.status_code == 200
    assert "Best tops per workload" in page.text and "Best so far" in page.text
    assert page.text.count("best trial") == 3  # two workloads and one
    # one roof per target and input type, however many workloads share it
    page = client.get("/compare", query_string={"a": "two", "b": "min-dram"})
    assert page.text.count("xdna2 int8 roof") == 1 and page.text.count("xdna2 bf16 roof") == 1
    # the best is marked on the roofline (the balance plots' marks say more)
    assert re.search(r'"name":"best #\d+"', client.get("/study/min-dram").text)


def test_browsing_writes_nothing(client, studies):
    def counts():
        with ResultStore(studies).session() as s:
            return [s.scalar(select(func.count()).select_from(t)) for t in
                    (m.TrialRow, m.EvaluationRow, m.StudyRow, m.ConfigRow)]

    before = counts()
    for url in ("/", "/study/two", "/trials/two", "/config/1/two", "/compare?a=two&b=mo"):
        client.get(url)
    assert client.post("/study/two").status_code == 405  # read-only: GET only
    assert counts() == before


def test_serve_refuses_a_missing_or_foreign_database(tmp_path):
    with pytest.raises(UsageError, match="no database at"):
        serve(str(tmp_path / "absent.db"))
    assert not (tmp_path / "absent.db").exists()
    foreign = tmp_path / "other.db"
    foreign.write_bytes(b"")
    with pytest.raises(UsageError, match="holds no dse results"):
        serve(str(foreign))
    assert foreign.read_bytes() == b""  # no tables were created in it


def test_serve_explains_a_busy_port(studies):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(UsageError, match=r"cannot listen on 127\.0\.0\.1:\d+"):
            serve(studies, port=taken.getsockname()[1])


def test_index_and_dse_studies_show_each_study_s_objective(client, studies, storage_url):
    rows = open_store(studies).list_studies().set_index("study")
    best = {name: best_trials(load_trials(studies, name), top=1).iloc[0]
            for name in ("min-dram", "lad")}
    assert rows.loc["min-dram", "objective"] == "dram_bytes"
    assert rows.loc["min-dram", "best"] == pytest.approx(float(best["min-dram"]["dram_bytes"]))
    # a ladder's best is its measurement, not the model's prediction
    assert best["lad"]["evaluator"] == "simulator"
    assert rows.loc["lad", "best"] == pytest.approx(float(best["lad"]["tops"]))
    assert pd.isna(rows.loc["all-fail", "best"])
    assert "dram_bytes" in client.get("/").text
    run_study(study_from_dict(MIN_DRAM), storage_url)  # the JSON metric in PostgreSQL too
    (row,) = open_store(storage_url).list_studies().to_dict("records")
    assert row["best"] == best_trials(load_trials(storage_url, "min-dram"), top=1)[
        "dram_bytes"].iloc[0]


def test_a_study_with_nothing_feasible_says_why(client):
    page = client.get("/study/all-fail").text
    assert "No feasible configuration yet" in page and "synthetic failure" in page
    assert "Optimisation history" not in page  # no empty plot
    table = client.get("/trials/all-fail").text
    assert 'data-column="m_ct"' in table and 'data-column="reason"' in table


def test_paging_past_the_end_is_not_found(client):
    past = client.get("/trials/two?page=999")
    assert past.status_code == 404 and "past the last page" in past.text
    assert client.get("/trials/two?where=tops > 1e9").status_code == 200  # none match: page 1


def test_study_page_overview_and_ladder_history(client):
    page = client.get("/study/two").text
    assert page.count('href="#workload-') == 2 and 'id="legend"' in page
    ladder = client.get("/study/lad").text
    assert "best so far (analytical)" in ladder and "best so far (simulator)" in ladder


def test_a_study_larger_than_the_sample_renders(studies, monkeypatch):
    # A study with more feasible trials than the summary samples draws its plots from the sample
    # plus the best trials, two reads whose rows repeat index labels (this answered HTTP 500).
    from dse.dashboard import data

    monkeypatch.setattr(data, "SAMPLE_ROWS", 7)
    page = create_app(studies).test_client().get("/study/two")
    assert page.status_code == 200 and "importance" in page.text.lower()


def test_plots_take_the_house_template_once_per_page(client):
    # each plot's JSON comes without a template; the page loads the house template once
    script = client.get("/assets/template.js")
    assert script.status_code == 200 and script.text.startswith("const DSE_TEMPLATE = {")
    assert script.cache_control.max_age == 86400
    page = client.get("/study/two").text
    assert page.count("dsePlot(") > 5 and '"template"' not in page
    assert "/assets/template.js" in page and "plots.js" in page
    figure = client.get("/figure/1-1/two").json
    assert figure["data"] and "template" not in figure["layout"]


def test_hover_text_leaves_out_missing_values():
    frame = pd.DataFrame({"number": [4, 5], "m_ct": pd.array([32, None], dtype="Int64"),
                          "layout": ["col", None], "tops": [1.23456, float("nan")]})
    points = trial_points(frame, ["m_ct", "layout"])
    assert points["hovertext"] == ["trial 4<br>m_ct=32, layout=col<br>tops=1.235",
                                   "trial 5<br><br>"]
    assert list(points["customdata"]) == [4, 5]


def test_parameter_importance_ignores_repeated_index_labels():
    from dse.analysis.figures import parameter_importance

    rows = pd.DataFrame({"a": [1, 1, 2, 2, 3, 3], "tops": [1.0, 1.1, 2.0, 2.1, 3.0, 3.2]})
    repeated = pd.concat([rows.iloc[:4], rows.iloc[4:]]).set_axis([0, 1, 2, 3, 0, 1])
    assert parameter_importance(repeated, ["a"], "tops")["a"] == pytest.approx(
        parameter_importance(rows, ["a"], "tops")["a"])


def test_unique_configs_count_a_config_once(studies):
    # a ladder scores its best configs with both fidelities: two trials, one config
    frame = load_trials(studies, "lad")
    params = frame.attrs["params"]
    store = open_store(studies)
    every = store.trial_page("lad", limit=1000)
    once = store.trial_page("lad", limit=1000, unique=True)
    assert every.total == len(frame) > once.total == len(frame.drop_duplicates(params))
    assert not once.frame.duplicated(params).any()
    # the first of each config in the page's order is the one kept
    best_first = store.trial_page("lad", sort="-tops", limit=1000, unique=True).frame
    for _, row in best_first.iterrows():
        same = frame[(frame[params] == row[params]).all(axis=1)]
        assert row["tops"] == same["tops"].max()
    page = create_app(studies).test_client().get("/trials/lad?unique=1&limit=250").text
    assert f"of {once.total} trials" in page and 'id="unique" name="unique" value="1" checked' \
        in page
