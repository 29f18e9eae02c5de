"""A measured rung's confirmation (``confirm``): its best measured again side by side in
interleaved rounds, their mean stored as results of their own that a study's best is judged by.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from dse import load_trials
from dse.core.results import EvalResult, Status
from dse.deploy.problem import _measured
from dse.storage.frames import best_trials, most_faithful
from dse.study.runner import run_study
from dse.study.spec import StudyFileError, study_from_dict
from dse.study.strategies.confirm import ROUNDS, confirmed_result, round_orders
from dse.study.strategies.ladder import choose


def _cpu_ladder(confirm: int = 3, name: str = "confirmed") -> dict:
    return {"name": name, "target": "cpu",
            "workload": {"shape": "384x384x384", "dtype": "fp32-fp32"},
            "space": {"free": ["pack_a", "pack_b"]},
            "ladder": [{"evaluator": "analytical", "keep": 5},
                       {"evaluator": "cpu", "options": {"max_repeats": 3}, "confirm": confirm}]}


def test_contenders_rounds_and_the_confirmed_result():
    values = np.array([3.0, np.nan, 5.0, 4.0, 1.0])
    # the contenders: best first, a failed one never
    assert choose(values, 3, "top").tolist() == [2, 3, 0]
    assert choose(values, 10, "top").tolist() == [2, 3, 0, 4]
    orders = round_orders(3)
    assert orders == [[0, 1, 2], [2, 1, 0], [2, 1, 0], [0, 1, 2]] and len(orders) == ROUNDS
    # one contender at a time: under a drift steady over the confirmation every contender's
    # mean position in the sequence is the same, so the drift weighs on all alike
    positions = {j: [r * 3 + order.index(j) for r, order in enumerate(orders)] for j in range(3)}
    assert len({sum(p) for p in positions.values()}) == 1

    def ok(tops: float) -> EvalResult:
        return EvalResult(Status.OK, {"tops": tops, "latency_s": 1 / tops}, elapsed_s=0.5)

    confirmed = confirmed_result([ok(2.0), ok(4.0), ok(1.0), ok(2.2)], "tops", first=4.0)
    assert confirmed.ok and confirmed.metrics["tops"] == pytest.approx(2.3)
    assert confirmed.metrics["latency_s"] == 1 / 2.2  # the other metrics: the nearest round's
    assert confirmed.metrics["confirm_rounds"] == [2.0, 4.0, 1.0, 2.2]
    assert confirmed.metrics["first_measured"] == 4.0 and confirmed.elapsed_s == 2.0
    failed = confirmed_result([ok(2.0), EvalResult(Status.FAILED, reason="wrong product"),
                               ok(1.0), ok(1.0)], "tops", first=4.0)
    assert failed.status is Status.FAILED and "confirmation round failed: wrong product" \
        in failed.reason


def test_a_ladder_confirms_its_best_on_the_cpu(tmp_path):
    storage = str(tmp_path / "c.db")
    spec = study_from_dict(_cpu_ladder())
    shown: list[tuple[str, int, int]] = []
    summary = run_study(spec, storage,
                        progress=lambda label, done, total, *_: shown.append((label, done,
                                                                              total)))
    assert summary.status == "finished" and summary.workloads[0].trials == 5 + 5 + 3
    frame = load_trials(storage, spec.name)
    measured = frame[frame["fidelity"] == "hardware"]
    confirmed = frame[frame["fidelity"] == "hardware-confirmed"]
    assert len(measured) == 5 and len(confirmed) == 3
    assert (confirmed["status"] == "ok").all() and (confirmed["evaluator"] == "cpu").all()
    params = ["mc", "kc", "nc", "pack_a", "pack_b"]
    first = {tuple(row[params]): row["tops"] for _, row in measured.iterrows()}
    # the rung's three best by their first measurement are the ones confirmed
    best_three = sorted(first, key=lambda k: -first[k])[:3]
    assert {tuple(row[params]) for _, row in confirmed.iterrows()} == set(best_three)
    for _, row in confirmed.iterrows():
        rounds = row["confirm_rounds"]
        assert len(rounds) == ROUNDS and row["tops"] == pytest.approx(np.mean(rounds))
        assert row["first_measured"] == first[tuple(row[params])]
    # a bar for the confirmation, every contender once a round
    label = "384x384x384 fp32-fp32 (B col) rung 2/2 (cpu) confirm"
    assert [s for s in shown if s[0] == label][-1] == (label, 3 * ROUNDS, 3 * ROUNDS)
    # the study's best is judged by the confirmed results alone
    best = best_trials(frame, top=5)
    assert len(best) == 3 and (best["fidelity"] == "hardware-confirmed").all()
    # running it again measures nothing and adds no trial
    again = run_study(spec, storage)
    assert again.workloads[0].evaluated == 0 and len(load_trials(storage, spec.name)) == 13


def test_a_cover_takes_a_configs_confirmed_result_over_its_first():
    frame = pd.DataFrame({
        "shape": ["8x8x8"] * 3, "dtype": ["fp32-fp32"] * 3, "b_layout": ["col"] * 3,
        "status": ["ok"] * 3, "evaluator": ["cpu"] * 3, "mc": [8, 8, 4],
        "fidelity": ["hardware-confirmed", "hardware", "hardware"],
        "tops": [1.0, 2.0, 1.5]})  # the confirmed result stored first, as it never is

    class Shape:
        workload = type("W", (), {"shape": "8x8x8", "dtype": type("D", (), {
            "name": "fp32-fp32"})(), "b_layout": "col"})()

    tops = _measured(frame, Shape(), [{"mc": 8}, {"mc": 4}], ["mc"], "cpu")
    assert tops.tolist() == [1.0, 1.5]


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["ladder"][1].update(confirm=-1), "confirm"),
    (lambda d: d["ladder"][1].update(confirm=1001), "confirm"),
    (lambda d: d["ladder"].insert(1, {"evaluator": "cpu", "keep": 3, "confirm": 2}),
     "confirming is for the last rung"),
    (lambda d: d["ladder"][1].update(evaluator="analytical", options={}),
     "confirming is for a rung that measures hardware \\('analytical' is of fidelity "
     "analytical"),
])
def test_confirming_takes_the_last_rung_of_hardware(change, message):
    data = _cpu_ladder()
    change(data)
    with pytest.raises(StudyFileError, match=message):
        study_from_dict(data)


def test_confirming_is_part_of_a_studys_identity():
    assert study_from_dict(_cpu_ladder(3)).identity()["ladder"][1]["confirm"] == 3
    # a study without it keeps the identity it was stored with
    assert "confirm" not in study_from_dict(_cpu_ladder(0)).identity()["ladder"][1]


def test_a_run_says_its_best_was_confirmed(tmp_path, capsys):
    from dse.cli import main

    study = tmp_path / "confirmed.yaml"
    study.write_text(yaml.safe_dump(_cpu_ladder(2)))
    assert main(["run", str(study), "--storage", str(tmp_path / "c.db")]) == 0
    out = capsys.readouterr().out
    assert "confirmed: tops " in out and f"in {ROUNDS} rounds beside its contenders" in out


def test_a_confirmation_stored_by_another_study_is_served_as_a_trial(tmp_path):
    storage = str(tmp_path / "c.db")
    run_study(study_from_dict(_cpu_ladder(3, "first")), storage)
    # the same ladder under another name: every result served, the confirmed ones too
    again = run_study(study_from_dict(_cpu_ladder(3, "second")), storage).workloads[0]
    assert (again.evaluated, again.trials) == (0, 13)
    frame = load_trials(storage, "second")
    confirmed = frame[frame["fidelity"] == "hardware-confirmed"]
    assert len(confirmed) == 3 and confirmed["cached"].astype(bool).all()
    # confirming more: the 3 confirmed served, the other 2 confirmed together
    more = run_study(study_from_dict(_cpu_ladder(5, "third")), storage).workloads[0]
    assert (more.evaluated, more.trials) == (2, 15)
    assert len(best_trials(load_trials(storage, "third"), top=10)) == 5


def test_a_config_whose_confirmation_failed_is_never_the_best():
    rows = [("hardware", "ok", 1, 3.0), ("hardware", "ok", 2, 2.0), ("hardware", "ok", 3, 1.0),
            ("hardware-confirmed", "failed", 1, np.nan), ("hardware-confirmed", "ok", 2, 1.9)]
    frame = pd.DataFrame([{"number": n, "shape": "8x8x8", "dtype": "fp32-fp32",
                           "b_layout": "col", "evaluator": "cpu", "fidelity": f, "status": s,
                           "mc": mc, "tops": t} for n, (f, s, mc, t) in enumerate(rows)])
    frame.attrs = {"params": ["mc"], "objectives": [("tops", "maximize")]}
    assert best_trials(frame)["mc"].tolist() == [2]
    # every confirmation failed: the first measurements judge, the failed config left out
    alone = frame[frame["number"] != 4]
    alone.attrs = frame.attrs
    assert best_trials(alone)["mc"].tolist() == [2, 3]
    assert most_faithful(frame, ["mc"])["number"].tolist() == [2, 3, 4]


def test_tables_show_the_fidelity_where_a_ladder_confirmed_rows():
    from dse.analysis.columns import config_columns

    frame = pd.DataFrame({"number": [0, 1], "mc": [8, 8], "tops": [1.0, 1.1],
                          "evaluator": ["cpu", "cpu"], "status": ["ok", "ok"],
                          "fidelity": ["hardware", "hardware-confirmed"]})
    assert config_columns(frame, ["mc"], ["tops"])[-2:] == ["fidelity", "status"]
    assert "fidelity" not in config_columns(frame.iloc[:1], ["mc"], ["tops"])


def test_plots_draw_confirmed_results_as_a_series_of_their_own(tmp_path):
    from dse.analysis.columns import trial_series
    from dse.dashboard.app import _workload_views
    from dse.dashboard.data import summarise
    from dse.storage.store import ResultStore

    frame = pd.DataFrame({"evaluator": ["analytical", "cpu", "cpu"],
                          "fidelity": ["analytical", "hardware", "hardware-confirmed"]})
    assert trial_series(frame).tolist() == ["analytical", "cpu", "cpu, confirmed"]
    assert trial_series(frame.drop(columns="fidelity")).tolist() == ["analytical", "cpu", "cpu"]

    storage = str(tmp_path / "c.db")
    spec = study_from_dict(_cpu_ladder(confirm=3))
    run_study(spec, storage)
    summary = summarise(ResultStore(storage), spec.name)
    workload = summary.workloads[0]
    assert workload.evaluators.tolist().count("cpu, confirmed") == 3
    views = _workload_views(summary, workload, 0)
    text = "".join(f["json"] for f in views["figures"])
    # the history keeps the confirmations apart from the first measurements
    assert "best so far (cpu, confirmed)" in text and "best so far (cpu)" in text
    # and the confirmed results are drawn against the rung's first measurements of them
    assert "cpu, confirmed against cpu (3 configs" in text
