"""`dse report`: one self-contained HTML file with the study's plots."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from dse.analysis.figures import balance_point, parameter_importance
from dse.cli import main
from dse.study.runner import run_study
from dse.study.spec import study_from_dict


def test_report_for_a_multi_objective_xdna_study(tmp_path, capsys):
    storage = str(tmp_path / "r.db")
    run_study(study_from_dict({
        "name": "mo", "target": "xdna2", "workload": {"shape": "2048x2048x2048",
                                                      "dtype": "int8-int8"},
        "sampler": "nsga2", "objectives": ["tops", "l1_bytes"], "budget": {"trials": 40}}),
        storage)
    out = tmp_path / "report.html"
    assert main(["report", "mo", "--storage", storage, "--out", str(out)]) == 0
    assert "self-contained" in capsys.readouterr().out
    page = out.read_text()
    for title in ("Optimisation history", "Balance: t_comp and t_mem against m_ct x n_ct",
                  "Balance: t_comp and t_mem against k_ct", "Roofline", "Parameter importance",
                  "Pareto front", "Best configurations"):
        assert title in page, title
    assert page.count('class="plotly-graph-div"') >= 6
    best_table = page.split("Best configurations", 1)[1].split("</table>", 1)[0]
    assert "<th>l1_bytes</th>" in best_table  # every objective is a column
    # no script or stylesheet fetched from the network
    assert not re.search(r"<script[^>]+src=\"https?://", page)
    assert "plotly.js" in page or "Plotly" in page


def test_report_shows_model_against_measurement(tmp_path):
    storage = str(tmp_path / "r.db")
    run_study(study_from_dict({
        "name": "lad", "target": "xdna", "workload": {"shape": "1024x1024x1024",
                                                      "dtype": "int8-int8"},
        "ladder": [{"evaluator": "analytical", "keep": 8},
                   {"evaluator": "simulator"}]}), storage)
    out = tmp_path / "r.html"
    assert main(["report", "lad", "--storage", storage, "--out", str(out)]) == 0
    assert "simulator against analytical (8 configs, Spearman" in out.read_text()


def test_parameter_importance():
    frame = pd.DataFrame({"a": [1, 1, 2, 2], "b": [1, 2, 1, 2], "y": [1.0, 1.1, 5.0, 5.1]})
    importance = parameter_importance(frame, ["a", "b", "missing"], "y")
    assert list(importance.index) == ["a", "b"]
    assert importance["a"] == pytest.approx(0.9988, abs=1e-3) and importance["b"] < 0.01
    # a parameter of many values that does nothing is not credited for its many values
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.integers(0, 2, 200), "noise": rng.integers(0, 50, 200)})
    frame["y"] = 5.0 * frame["a"] + rng.normal(size=200)
    importance = parameter_importance(frame, ["a", "noise"], "y")
    assert importance["a"] > 0.8 and importance["noise"] < 0.05


def test_balance_point_is_the_best_config_closest_to_balance():
    best = pd.DataFrame({"number": [7, 3, 9], "t_comp_s": [1.0, 2.0, 1.0],
                         "t_mem_s": [1.5, 2.1, 0.5]})
    assert balance_point(best)["number"] == 3
    assert balance_point(best.iloc[:0]) is None
