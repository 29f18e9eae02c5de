"""A measured rung's walk (``refine``): from the best measured config through its neighbours, the
cheap rung ordering each neighbourhood, on a toy space and in a real ladder study."""

from __future__ import annotations

import numpy as np
import pytest

from dse import load_trials
from dse.storage import open_store
from dse.study.runner import run_study
from dse.study.spec import StudyFileError, study_from_dict
from dse.study.strategies.refine import neighbours, next_configs, walk

# a 10 x 10 grid of configs (x, y); the truth peaks at (7, 7), the cheap model at (2, 2)
X, Y = np.meshgrid(np.arange(10), np.arange(10), indexing="ij")
GRID = {"x": X.ravel(), "y": Y.ravel()}
TRUE = -((GRID["x"] - 7.0) ** 2 + (GRID["y"] - 7.0) ** 2)
CHEAP = -((GRID["x"] - 2.0) ** 2 + (GRID["y"] - 2.0) ** 2)


def at(x: int, y: int) -> int:
    return x * 10 + y


def test_a_neighbour_differs_in_exactly_one_parameter():
    around = neighbours(GRID, at(3, 4))
    assert len(around) == 18
    for j in around:
        assert (GRID["x"][j] == 3) != (GRID["y"][j] == 4)


def test_the_next_configs_are_the_best_measured_ones_unmeasured_neighbours_cheap_first():
    measured = {at(2, 2): -50.0, at(5, 5): -8.0, at(5, 4): float("nan")}
    # (5, 5) is the best measured: its neighbours the model rates best, (2, 5) then (5, 2)...
    assert next_configs(GRID, CHEAP, measured, 2) == [at(2, 5), at(5, 2)]
    # ...those of equal score in the order of ties, lower first
    ties = np.zeros(100)
    ties[at(5, 2)] = -1
    assert next_configs(GRID, CHEAP, measured, 1, ties) == [at(5, 2)]
    # once its neighbourhood is measured, the walk goes on from the next best
    for j in neighbours(GRID, at(5, 5)):
        measured.setdefault(int(j), -100.0)
    assert next_configs(GRID, CHEAP, measured, 1) == [at(1, 2)]  # (2, 2)'s, index order
    # a config the model cannot score (NaN) is never proposed
    assert at(1, 2) not in next_configs(GRID, np.where(GRID["x"] == 1, np.nan, CHEAP),
                                        {at(2, 2): -50.0}, 18)


def test_the_walk_leaves_a_wrong_models_top_list_for_what_measures_better():
    top = np.argsort(-CHEAP, kind="stable")[:4]  # the model's best four, around (2, 2)
    measured = {int(i): float(TRUE[i]) for i in top}
    asked: list[list[int]] = []

    def measure(picks: list[int]) -> list[float]:
        asked.append(picks)
        return [float(TRUE[p]) for p in picks]

    walked = walk(GRID, CHEAP, measured, 20, measure)
    assert len(walked) == 20 and len(set(walked)) == 20 and not set(walked) & set(top.tolist())
    assert all(len(a) == 1 for a in asked)  # one a step, each after the last was measured
    assert max(TRUE[walked]) > max(TRUE[top]) + 10  # far better than the model's best four
    assert all(measured[p] == TRUE[p] for p in walked)


def test_the_walk_stops_when_told_or_when_nothing_is_left():
    measured = {at(0, 0): 0.0}
    assert walk(GRID, CHEAP, measured, 5, lambda picks: []) == []
    every = walk(GRID, CHEAP, dict(measured), 500, lambda picks: [0.0] * len(picks))
    assert len(every) == 99  # every other config, reached one parameter at a time


def _xdna_ladder(refine: int) -> dict:
    return {"name": "walked", "target": "xdna", "workload": {"shape": "1024x1024x1024",
                                                             "dtype": "int8-int8"},
            "ladder": [{"evaluator": "analytical", "keep": 6},
                       {"evaluator": "simulator", "refine": refine}]}


def test_a_ladder_study_walks_from_its_best_measured_config(tmp_path):
    storage = str(tmp_path / "r.db")
    spec = study_from_dict(_xdna_ladder(5))
    run_study(spec, storage)
    frame = load_trials(storage, "walked")
    simulated = frame[frame["evaluator"] == "simulator"]
    params = frame.attrs["params"]
    assert len(simulated) == 11 and len(frame[frame["evaluator"] == "analytical"]) == 6
    kept = simulated.iloc[:6][params].to_dict("records")
    for _, config in simulated.iloc[6:][params].iterrows():
        # each walked config is one parameter away from a config measured before it
        assert any(sum(config[p] != earlier[p] for p in params) == 1 for earlier in kept)
        kept.append(config.to_dict())
    # the fidelity record counts the walked configs too (the model scored them all)
    (row,) = open_store(storage).fidelity_report("walked")
    assert (row["cheaper"], row["dearer"], row["n"]) == ("analytical", "simulator", 11)
    # running it again walks the same way on the stored results, adding nothing
    again = run_study(spec, storage)
    assert again.workloads[0].evaluated == 0 and len(load_trials(storage, "walked")) == 17


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["ladder"][0].update(refine=3), "a walk on a later rung"),
    (lambda d: d["ladder"][1].update(refine=-1), "refine"),
    (lambda d: d["ladder"].insert(0, {"evaluator": "simulator", "keep": 20}),
     "a first rung that scores the whole space"),
])
def test_a_walk_needs_a_later_rung_and_a_first_that_scores_the_space(change, message):
    data = _xdna_ladder(4)
    change(data)
    with pytest.raises(StudyFileError, match=message):
        study_from_dict(data)


def test_a_walk_cut_short_by_the_time_budget_leaves_the_later_rungs_for_the_next_run(tmp_path):
    storage = str(tmp_path / "r.db")
    data = _xdna_ladder(5)
    data["ladder"][1]["keep"] = 2
    data["ladder"].append({"evaluator": "synthetic", "options": {"work_s": 0.0}})
    data["budget"] = {"time_s": 1e-6}  # spent before the walk's first step
    run_study(study_from_dict(data), storage)
    counts = load_trials(storage, "walked").groupby("evaluator").size().to_dict()
    assert counts == {"analytical": 6, "simulator": 6}  # no walk, no rung after it
    del data["budget"]
    run_study(study_from_dict(data), storage)
    counts = load_trials(storage, "walked").groupby("evaluator").size().to_dict()
    assert counts == {"analytical": 6, "simulator": 11, "synthetic": 2}
