"""What the study page's plots let a user read and choose: a Pareto front over its dominated
trials (in grey), importance with its values, the axes of a parallel-coordinates plot of many
parameters, the objective's empirical distribution and the timeline of the evaluations."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.analysis.explore import PARALLEL_AXES, parallel_coordinates_figure
from dse.analysis.figures import DOMINATED, importance_figure, pareto_figure
from dse.analysis.over_time import EDF_POINTS, edf_figure, timeline_figure


def _trials(count: int = 40, params: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({f"p{i}": rng.integers(1, 5, count) for i in range(params)})
    return frame.assign(number=np.arange(count), tops=rng.random(count) * 10,
                        l1_bytes=rng.random(count) * 1e4, dram_bytes=rng.random(count) * 1e6)


def test_a_pareto_front_is_drawn_over_its_dominated_trials_in_grey():
    ok = _trials()
    front = ok.nlargest(5, "tops")
    grey, drawn = pareto_figure(ok, front, [("tops", "maximize"),
                                            ("l1_bytes", "minimize")]).data
    assert grey.name == "dominated trials" and grey.marker.color == DOMINATED
    assert sorted(grey.customdata) == sorted(set(ok["number"]) - set(front["number"]))
    assert list(drawn.customdata) == list(front["number"])
    three = pareto_figure(ok, front, [("tops", "maximize"), ("l1_bytes", "minimize"),
                                      ("dram_bytes", "minimize")], ["p0"])
    grey, drawn = three.data
    assert grey.marker.color == DOMINATED and drawn.marker.colorbar.title.text == "dram_bytes"
    x_menu, _, colour_menu = three.layout.updatemenus
    moved = x_menu.buttons[0].args[0]["x"]  # an axis moves both the grey and the front
    assert [len(v) for v in moved] == [len(ok) - len(front), len(front)]
    assert list(colour_menu.buttons[0].args[1]) == [1]  # the colour is the front's alone


def test_importance_bars_say_their_values():
    ok = _trials()
    ok["tops"] = ok["p0"] * 3.0 + np.random.default_rng(2).random(len(ok))
    (bar,) = importance_figure(ok, ["p0", "p1", "p2"], "tops").data
    assert list(bar.text) == [f"{v:.2f}" for v in bar.x] and float(bar.text[0]) > 0.5


def test_parallel_coordinates_of_many_parameters_show_the_most_important_first():
    ok = _trials(params=PARALLEL_AXES + 5)
    order = [f"p{i}" for i in reversed(range(PARALLEL_AXES + 5))]
    fig = parallel_coordinates_figure(ok, sorted(order), "tops", order)
    dimensions = fig.data[0].dimensions
    assert [d.label for d in dimensions] == [*order, "tops"]
    assert [d.visible is not False for d in dimensions] == \
        [True] * PARALLEL_AXES + [False] * 5 + [True]
    (menu,) = fig.layout.updatemenus
    labels = [b.label for b in menu.buttons]
    assert labels == ["axes: the 4 most important", f"axes: the {PARALLEL_AXES} most important",
                      f"axes: all {PARALLEL_AXES + 5}"] and menu.active == 1
    everything = menu.buttons[2].args[0]
    assert all(everything[f"dimensions[{i}].visible"] for i in range(PARALLEL_AXES + 5))
    # a few parameters: every axis, no menu
    few = parallel_coordinates_figure(_trials(params=3), ["p0", "p1", "p2"], "tops")
    assert not few.layout.updatemenus and len(few.data[0].dimensions) == 4


def test_the_empirical_distribution_counts_every_feasible_trial():
    values = np.array([3.0, 1.0, 2.0, np.nan, 2.0])
    (line,) = edf_figure(values, "maximize", "tops").data
    assert list(line.x) == [1.0, 2.0, 2.0, 3.0] and list(line.y) == [0.25, 0.5, 0.75, 1.0]
    ladder = edf_figure(values[:3], "maximize", "tops",
                        np.array(["analytical", "simulator", "analytical"]))
    assert [t.name for t in ladder.data] == ["tops (analytical)", "tops (simulator)"]
    many = edf_figure(np.arange(10_000.0), "minimize", "latency_s")
    assert len(many.data[0].x) == EDF_POINTS and many.data[0].y[-1] == 1.0
    assert "better to the left" in many.layout.title.text


def test_the_timeline_draws_each_evaluation_from_its_start_to_its_record():
    end = pd.Timestamp("2026-01-01 12:00:10")
    rows = pd.DataFrame({"number": [2, 1], "created_at": [end, end],
                         "elapsed_s": [4.0, 2.0], "cached": [False, True]})
    bars, ends = timeline_figure(rows, of_total=10).data
    starts = [pd.Timestamp(x) for x in bars.x[0::3]]
    assert starts == [end, end - pd.Timedelta(seconds=4)]  # trial 1 was served from the store
    assert list(ends.customdata) == [1, 2] and ends.hovertext[1].startswith("trial 2<br>4 s")
    assert "2 of 10 feasible trials" in timeline_figure(rows, of_total=10).layout.title.text


def test_the_explorer_colours_by_rank_as_optuna_s_rank_plot():
    from dse.analysis.explore import ranked_explorer_figure

    ok = _trials()
    for direction, best in (("maximize", ok["tops"].idxmax()), ("minimize", ok["tops"].idxmin())):
        fig = ranked_explorer_figure(ok, ["p0", "p1"], "tops", direction)
        colour = next(b for b in fig.layout.updatemenus[2].buttons
                      if b.label == "colour: rank of tops")
        ranks = colour.args[0]["marker.color"][0]
        assert ranks[best] == 1.0 and min(ranks) == 1 / len(ok)
