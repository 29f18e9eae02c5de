"""A study is resolved once: one ``dse run`` reads its target file, builds each workload's space
and makes each evaluator once, the file's checks and the run sharing them
(:mod:`dse.study.files.resolution`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import dse.core.registry
from dse.cli import main
from dse.core.registry import evaluator_class, search_space_class

STUDIES = Path(__file__).parents[1] / "studies"


@pytest.fixture
def builds(monkeypatch):
    """Counts of target files read, spaces built and evaluators made, by kind."""
    counts: Counter[str] = Counter()
    read_text = dse.core.registry.read_text

    def counting_read(path, what, *args, **kwargs):
        counts[what] += 1
        return read_text(path, what, *args, **kwargs)

    monkeypatch.setattr(dse.core.registry, "read_text", counting_read)

    def count_init(cls, kind: str) -> None:
        init = cls.__init__

        def counting_init(self, *args, **kwargs):
            counts[kind] += 1
            init(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counting_init)

    count_init(search_space_class("xdna_gemm"), "space")
    count_init(evaluator_class("analytical"), "evaluator")
    return counts


def test_the_quick_study_builds_its_space_target_and_evaluator_once(builds, tmp_path, capsys):
    assert main(["run", str(STUDIES / "quick.yaml"), "--trials", "5", "--storage",
                 str(tmp_path / "q.db")]) == 0
    assert "quick" in capsys.readouterr().out
    assert (builds["target file"], builds["space"], builds["evaluator"]) == (1, 1, 1)


def test_a_ladder_makes_each_rung_evaluator_once_for_all_workloads(builds, tmp_path):
    from dse.study.runner import run_study
    from dse.study.spec import study_from_dict

    run_study(study_from_dict({
        "name": "ladder", "target": "xdna2",
        "workloads": [{"shape": s, "dtype": "int8-int8"} for s in ("512x512x512", "1024x512x512")],
        "space": {"fix": {"k_ct": 64, "k_mt": 64}},
        "ladder": [{"evaluator": "analytical", "keep": 3}, {"evaluator": "simulator"}]}),
        str(tmp_path / "l.db"))
    assert builds["evaluator"] == 1  # the analytical rung, shared by both workloads
    assert builds["space"] == 2 and builds["target file"] == 1
