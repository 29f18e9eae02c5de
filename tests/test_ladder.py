"""The fidelity ladder: the shipped CPU study end to end, and an XDNA model -> simulator ladder."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import numpy as np
import pytest

from dse import load_trials
from dse.cli import main
from dse.core.errors import UsageError
from dse.storage import open_store
from dse.storage.frames import best_trials
from dse.study.runner import run_study
from dse.study.spec import StudyFileError, load_study, study_from_dict
from dse.study.strategies.ladder import agreement, choose, kendall_tau_b

STUDIES = Path(__file__).parents[1] / "studies"


def test_cpu_ladder_study(tmp_path, capsys):
    storage = str(tmp_path / "r.db")
    spec = load_study(STUDIES / "cpu_ladder.yaml")
    summary = run_study(spec, storage)
    assert summary.status == "finished"
    frame = load_trials(storage, spec.name)
    measured = frame[frame["evaluator"] == "cpu"]
    assert len(measured) == 24 and (measured["status"] == "ok").all()
    # a measurement names its machine in its metrics; the model rows keep the recorder's host
    assert (measured["host"] == platform.node()).all() and frame["host"].notna().all()
    assert measured["tops"].max() >= 1.5 * measured["tops"].median()
    best = best_trials(frame, top=1).iloc[0]
    assert best["evaluator"] == "cpu" and best["tops"] == measured["tops"].max()
    (row,) = open_store(storage).fidelity_report(spec.name)
    assert (row["cheaper"], row["dearer"], row["n"]) == ("analytical", "cpu", 24)
    assert row["spearman"] >= 0.6
    # running it again measures nothing and adds no trial
    again = run_study(spec, storage)
    assert again.workloads[0].evaluated == 0 and len(load_trials(storage, spec.name)) == 48
    assert main(["fidelity", spec.name, "--storage", storage]) == 0
    assert "analytical" in capsys.readouterr().out

    # calibrating the model on these measurements improves it on the held-out ones
    out = tmp_path / "cpu-calibrated.toml"
    assert main(["calibrate", spec.name, "--storage", storage, "--against", "cpu", "--out",
                 str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n_held_out"] == 24 and report["after"]["mape"] < report["before"]["mape"]
    from dse.core.registry import load_target

    assert load_target(str(out)).model.flops_per_s == pytest.approx(
        report["fitted"]["model.flops_per_s"], rel=1e-5)
    assert main(["calibrate", spec.name, "--storage", storage, "--against", "iron"]) == 2
    assert "calibration needs at least 6" in capsys.readouterr().err


def test_model_to_simulator_ladder(tmp_path):
    storage = str(tmp_path / "r.db")
    spec = study_from_dict({
        "name": "xladder", "target": "xdna", "workload": {"shape": "2048x2048x2048",
                                                          "dtype": "int8-int8"},
        "ladder": [{"evaluator": "analytical", "keep": 12},
                   {"evaluator": "simulator", "keep": 4},
                   {"evaluator": "synthetic", "options": {"work_s": 0.0}}]})
    shown: list[tuple[str, int, int]] = []
    run_study(spec, storage,
              progress=lambda label, done, total, *_: shown.append((label, done, total)))
    frame = load_trials(storage, "xladder")
    assert frame.groupby("evaluator").size().to_dict() == {
        "analytical": 12, "simulator": 12, "synthetic": 4}
    # a bar per rung: the analytical rung at once; the 12 simulations in rounds of 8, so
    # progress shows
    rung = "2048x2048x2048 int8-int8 (B col) rung {}/3 ({})".format
    assert shown == [(rung(1, "analytical"), 12, 12), (rung(2, "simulator"), 8, 12),
                     (rung(2, "simulator"), 12, 12), (rung(3, "synthetic"), 4, 4)]
    report = open_store(storage).fidelity_report("xladder")
    assert [(r["cheaper"], r["dearer"], r["n"]) for r in report] == [
        ("analytical", "simulator", 12), ("simulator", "synthetic", 4)]
    assert report[0]["spearman"] > 0.5


def test_rank_helpers():
    a = np.array([1.0, 2.0, 3.0, 4.0])
    assert kendall_tau_b(a, a) == pytest.approx(1.0)
    assert kendall_tau_b(a, -a) == pytest.approx(-1.0)
    result = agreement(a, np.array([1.0, 3.0, 2.0, 4.0]), k=2)
    assert result["spearman"] == pytest.approx(0.8) and result["top_k_overlap"] == 0.5
    scores = np.array([5.0, np.nan, 1.0, 3.0, 4.0, 2.0])
    assert list(choose(scores, 2, "top")) == [0, 4]
    assert list(choose(scores, 3, "spread")) == [0, 5, 2]  # 5, then nearest sqrt(5) and 1
    assert list(choose(np.array([10.0, 9.9, 9.8, 1.0, -1.0]), 3, "spread")) == [0, 3, 4]


@pytest.mark.parametrize(("ladder", "message"), [
    ([{"evaluator": "analytical", "keep": 5}], "at least two rungs"),
    ([{"evaluator": "analytical"}, {"evaluator": "cpu"}], "passes on 'keep'"),
    ([{"evaluator": "analytical", "keep": 5}, {"evaluator": "simulator"}],
     "cannot score target 'cpu'"),
    ([{"evaluator": "analytical", "keep": 5, "select": "best"}, {"evaluator": "cpu"}],
     "allowed: top, spread"),
    ([{"evaluator": "analytical", "keep": 5}, {"evaluator": "cpu", "keep": 3}],
     "no 'keep' on the last rung"),
])
def test_bad_ladders(ladder, message):
    with pytest.raises(StudyFileError, match=message):
        study_from_dict({"name": "x", "target": "cpu",
                         "workload": {"shape": "256x256x256", "dtype": "fp32-fp32"},
                         "ladder": ladder})


def test_a_ladder_scores_more_configs_than_an_exhaustive_study_stores(monkeypatch):
    from dse.core import build_context
    from dse.study.strategies import exhaustive

    spec = study_from_dict({
        "name": "wide", "target": "cpu", "workload": {"shape": "512x512x512",
                                                      "dtype": "fp32-fp32"},
        "ladder": [{"evaluator": "analytical", "keep": 2}, {"evaluator": "cpu"}]})
    w = spec.workloads[0]
    ctx = build_context(spec.target, w.dtype.name, w.shape, w.b_layout)
    total = len(exhaustive.feasible_configs(ctx, spec)["pack_a"])
    # a ladder stores only what it keeps: the limit on what a study stores is not its
    monkeypatch.setattr(exhaustive, "DEFAULT_MAX_CONFIGS", total - 1)
    assert len(exhaustive.feasible_configs(ctx, spec)["pack_a"]) == total
    monkeypatch.setattr(exhaustive, "LADDER_MAX_CONFIGS", total - 1)
    with pytest.raises(UsageError, match="ladder's first rung would score"):
        exhaustive.feasible_configs(ctx, spec)


def test_choose_caps_each_group():
    scores = np.array([9.0, 8.0, 7.0, 6.0, 5.0, 4.0])
    groups = ["a", "a", "a", "b", "b", "c"]
    assert choose(scores, 4, "top", groups, 2).tolist() == [0, 1, 3, 4]
    assert choose(scores, 3, "top").tolist() == [0, 1, 2]


def test_choose_orders_configs_scored_alike_as_the_space_says():
    scores = np.array([9.0, 7.0, 7.0, 7.0, np.nan, 1.0])
    assert choose(scores, 3, "top").tolist() == [0, 1, 2]  # their own order
    ties = np.array([0.0, 2.0, 1.0, 0.0, 0.0, 0.0])
    assert choose(scores, 3, "top", ties=ties).tolist() == [0, 3, 2]
    assert choose(scores, 3, "top", ["a", "b", "b", "b", "c", "d"], 1, ties).tolist() == [0, 3, 5]


def test_group_by_must_name_parameters():
    rung = {"evaluator": "analytical", "keep": 5, "group_by": ["m_ct", "nope"], "per_group": 1}
    base = {"name": "g", "target": "xdna2",
            "workload": {"shape": "2048x2048x2048", "dtype": "int8-int8"},
            "ladder": [rung, {"evaluator": "simulator"}]}
    with pytest.raises(StudyFileError, match="group_by"):
        study_from_dict(base)
    rung["group_by"] = ["m_ct"]
    del rung["per_group"]
    with pytest.raises(StudyFileError, match="give group_by and per_group together"):
        study_from_dict(base)
    rung["per_group"] = 1
    spec = study_from_dict(base)
    assert spec.ladder[0].group_by == ("m_ct",) and spec.identity()["ladder"][0]["per_group"] == 1
