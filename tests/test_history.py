"""The optimisation history: each point is a trial (its number in ``customdata`` and its hover),
a bucket of many trials shows its best trial, the best-so-far line the trial that holds it."""

from __future__ import annotations

import numpy as np

from dse.analysis.history import HISTORY_POINTS, history_figure


def test_every_point_is_its_trial():
    numbers, values = np.array([4, 1, 2, 3]), np.array([6.0, 5.0, 5.0, 7.0])
    points, best = history_figure(numbers, values, "maximize", "tops").data
    assert list(points.x) == list(points.customdata) == [1, 2, 3, 4]
    assert points.hovertext[0] == "trial 1<br>tops=5"
    # a tie does not take the best over (dse best keeps the earlier trial)
    assert list(best.customdata) == [1, 1, 3, 3]
    assert best.hovertext[3] == "best after trial 4: trial 3<br>tops=7"


def test_a_minimised_objective_s_best_so_far():
    _, best = history_figure(np.arange(4), np.array([5.0, 3.0, 4.0, 3.0]), "minimize",
                             "latency_s").data
    assert list(best.customdata) == [0, 1, 1, 1] and list(best.y) == [5, 3, 3, 3]


def test_a_long_history_shows_each_bucket_s_best_trial():
    rng = np.random.default_rng(0)
    count = HISTORY_POINTS * 3 + 7
    numbers, values = np.arange(count) + 100, rng.random(count)
    points, best = history_figure(numbers, values, "maximize", "tops").data
    assert len(points.x) == HISTORY_POINTS == len(best.x)
    edges = np.linspace(0, count, HISTORY_POINTS + 1).astype(int)
    for i, number in enumerate(points.customdata):
        bucket = values[edges[i]:edges[i + 1]]
        assert points.x[i] == number and values[number - 100] == bucket.max()
    assert values[best.customdata[-1] - 100] == values.max()
    assert all(values[h - 100] == y for h, y in zip(best.customdata, best.y, strict=True))
