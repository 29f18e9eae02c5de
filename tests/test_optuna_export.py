"""Exporting a study as an Optuna journal file that Optuna's tools open: real parameters, the
objectives with their names, every metric and reason as user attributes, dse's trial numbers."""

from __future__ import annotations

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from dse import load_trials
from dse.cli import main
from dse.study.runner import run_study
from tests.study_helpers import make_spec


def _opened(path):
    journal = JournalStorage(JournalFileBackend(str(path)))
    (summary,) = optuna.get_all_study_summaries(journal)
    return optuna.load_study(study_name=summary.study_name, storage=journal)


def test_export_keeps_dse_s_trials_as_they_are(tmp_path, capsys):
    storage = str(tmp_path / "r.db")
    run_study(make_spec(budget={"trials": 25}), storage)
    frame = load_trials(storage, "t").set_index("number")
    out = tmp_path / "journal.log"
    assert main(["optuna-export", "t", "--storage", storage, "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "wrote 25 trials" in said and f"optuna-dashboard {out}" in said
    study = _opened(out)
    assert study.study_name == "t" and len(study.trials) == 25
    assert study.metric_names == ["tops"]
    params = frame.attrs["params"]
    for trial in study.trials:
        row = frame.loc[trial.number]  # numbers are dse's
        assert set(trial.params) <= set(params) and "m_ct" in trial.params
        assert all(trial.params[p] == row[p] for p in trial.params)
        assert trial.user_attrs["evaluator"] == row["evaluator"]
        if row["status"] == "ok":
            assert trial.state is TrialState.COMPLETE and trial.values == [row["tops"]]
            assert trial.user_attrs["t_mem_s"] == row["t_mem_s"]
        else:
            assert trial.state is TrialState.FAIL and trial.user_attrs["reason"] == row["reason"]
    assert study.best_value == frame["tops"].max()
    assert main(["optuna-export", "t", "--storage", storage, "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err


def test_a_study_without_a_sampler_exports_too(tmp_path, capsys):
    storage = str(tmp_path / "r.db")
    run_study(make_spec("ex", sampler="exhaustive", budget={},
                        space={"fix": {"m_ct": 128, "n_ct": 128, "k_ct": 64}}), storage)
    out = tmp_path / "x.log"
    assert main(["optuna-export", "ex", "--storage", storage, "--out", str(out)]) == 0
    assert len(_opened(out).trials) == len(load_trials(storage, "ex"))


def test_numbers_are_exported_as_numbers_and_constants_left_out(tmp_path):
    from optuna.distributions import CategoricalDistribution, IntDistribution

    storage = str(tmp_path / "r.db")
    run_study(make_spec(budget={"trials": 40}, space={"fix": {"bd_scheme": "overlapped"}}),
              storage)
    frame = load_trials(storage, "t")
    out = tmp_path / "journal.log"
    assert main(["optuna-export", "t", "--storage", storage, "--out", str(out)]) == 0
    study = _opened(out)  # Optuna's own storage reads the distributions back
    varied = {p for p in frame.attrs["params"] if frame[p].nunique() > 1}
    fixed = set(frame.attrs["params"]) - varied
    assert {"m_ct", "k_ct", "n_ct"} <= varied and "bd_scheme" in fixed
    exported = {p: d for t in study.trials for p, d in t.distributions.items()}
    assert set(exported) == varied  # a parameter of one value would plot as a single dot
    assert study.user_attrs["fixed parameters"]["bd_scheme"] == "overlapped"
    for name in ("m_ct", "k_ct", "n_ct"):
        d = exported[name]
        assert isinstance(d, IntDistribution), (name, d)
        assert (d.low, d.high) == (frame[name].min(), frame[name].max())
        assert all((v - d.low) % d.step == 0 for v in frame[name])
    assert not any(isinstance(d, CategoricalDistribution) and
                   all(isinstance(c, int | float) for c in d.choices)
                   for d in exported.values())


def test_a_trial_keeps_its_own_times(tmp_path):
    storage = str(tmp_path / "r.db")
    run_study(make_spec(evaluator={"name": "synthetic", "options": {"work_s": 0.01}},
                        budget={"trials": 30}), storage)
    frame = load_trials(storage, "t").set_index("number")
    out = tmp_path / "journal.log"
    assert main(["optuna-export", "t", "--storage", storage, "--out", str(out)]) == 0
    for trial in _opened(out).trials:
        row = frame.loc[trial.number]
        # when dse recorded it (to the second), not the instant of the export
        assert trial.datetime_complete == row["created_at"].to_pydatetime()
        took = (trial.datetime_complete - trial.datetime_start).total_seconds()
        assert took == pytest.approx(0.0 if row["cached"] else row["elapsed_s"], abs=1e-3)
