"""Exporting a study's Optuna state to a journal file Optuna's tools read."""

from __future__ import annotations

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from dse.cli import main
from dse.study.runner import run_study
from tests.study_helpers import make_spec


def test_export_opens_in_optuna(tmp_path, capsys):
    storage = str(tmp_path / "r.db")
    run_study(make_spec(budget={"trials": 25}), storage)
    out = tmp_path / "journal.log"
    assert main(["optuna-export", "t", "--storage", storage, "--out", str(out)]) == 0
    assert "optuna-dashboard" in capsys.readouterr().out
    journal = JournalStorage(JournalFileBackend(str(out)))
    (summary,) = optuna.get_all_study_summaries(journal)
    study = optuna.load_study(study_name=summary.study_name, storage=journal)
    assert len(study.trials) == 25
    assert study.best_value > 0
    assert main(["optuna-export", "t", "--storage", storage, "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    run_study(make_spec("ex", sampler="exhaustive", budget={},
                        space={"fix": {"m_ct": 128, "n_ct": 128, "k_ct": 64}}), storage)
    assert main(["optuna-export", "ex", "--storage", storage, "--out",
                 str(tmp_path / "x.log")]) == 2
    assert "no Optuna state" in capsys.readouterr().err
