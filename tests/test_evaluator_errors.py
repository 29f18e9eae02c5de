"""An exception an evaluator does not declare is a bug: the study stops with its traceback and
nothing of it is stored or served later; one it declares is the configs' failure, a result."""

from __future__ import annotations

import pickle
from typing import ClassVar

import pytest

from dse.cli import main
from dse.core import EvalResult, Evaluator, EvaluatorError, Status, batch_len
from dse.core.registry import register, unregister
from dse.storage import open_store
from dse.study.execution.pool import _remote_evaluate
from evaluators.analytical import AnalyticalEvaluator

STUDY = """
name: {name}
target: xdna2
workload: {{shape: 1024x1024x1024, dtype: int8-int8}}
evaluator: {evaluator}
sampler: random
budget: {{trials: 12}}
"""


class Buggy(Evaluator):
    """The analytical model behind an evaluator with a bug that can be fixed; the bug shows
    after ``good`` calls."""

    name: ClassVar[str] = "buggy"
    version: ClassVar[str] = "1"
    fidelity: ClassVar[str] = "simulator"
    spaces: ClassVar[tuple[str, ...]] = ("xdna_gemm",)
    broken: ClassVar[bool] = True
    good: ClassVar[int] = 0
    calls: ClassVar[int] = 0
    evaluated: ClassVar[int] = 0  # configs of the calls before the bug

    def evaluate_feasible(self, batch, ctx):
        type(self).calls += 1
        if type(self).broken and type(self).calls > type(self).good:
            return [{"not": "a result"}[0]]  # a KeyError: the bug
        type(self).evaluated += batch_len(batch)
        return AnalyticalEvaluator().evaluate_feasible(batch, ctx)


class DeviceLost(Evaluator):
    """Loses its device on every config: a failure it declares, the configs' own."""

    name: ClassVar[str] = "device-lost"
    version: ClassVar[str] = "1"
    fidelity: ClassVar[str] = "hardware"
    spaces: ClassVar[tuple[str, ...]] = ("xdna_gemm",)
    expected_errors: ClassVar[tuple[type[Exception], ...]] = (ConnectionError,)

    def evaluate_feasible(self, batch, ctx) -> list[EvalResult]:
        raise ConnectionError("the device went away")


@pytest.fixture
def registered():
    Buggy.broken, Buggy.good, Buggy.calls, Buggy.evaluated = True, 0, 0, 0
    register("evaluator", "buggy", Buggy)
    register("evaluator", "device-lost", DeviceLost)
    yield
    unregister("evaluator", "buggy")
    unregister("evaluator", "device-lost")


def _study(tmp_path, name: str, evaluator: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(STUDY.format(name=name, evaluator=evaluator))
    return str(path)


def test_a_bug_stops_the_study_and_nothing_of_it_is_served_after_the_fix(registered, tmp_path,
                                                                          capsys):
    storage = str(tmp_path / "r.db")
    study = _study(tmp_path, "bug", "buggy")
    assert main(["run", study, "--storage", storage]) == 1
    err = capsys.readouterr().err
    assert "evaluator 'buggy' raised an error it does not declare" in err
    assert "Traceback" in err and "KeyError" in err and "evaluate_feasible" in err
    store = open_store(storage)
    (status,) = store.list_studies()["status"]
    frame = store.load_trials("bug")
    assert status == "failed" and frame[frame["evaluator"] == "buggy"].empty

    Buggy.broken = False  # the bug fixed: the same study evaluates its configs afresh
    assert main(["run", study, "--storage", storage]) == 0
    frame = store.load_trials("bug")
    assert len(frame) == 12 and not frame["cached"].any()
    assert set(frame["status"]) <= {"ok", "infeasible"} and (frame["status"] == "ok").any()


def test_what_finished_before_a_bug_is_kept(registered, tmp_path, capsys):
    storage = str(tmp_path / "r.db")
    Buggy.good = 3  # three rounds evaluate, the fourth hits the bug
    assert main(["run", _study(tmp_path, "late", "buggy"), "--storage", storage]) == 1
    frame = open_store(storage).load_trials("late")
    evaluated = frame[(frame["status"] == "ok") & ~frame["cached"]]
    assert len(evaluated) == Buggy.evaluated > 0 and len(frame) < 12  # kept, then stopped


def test_a_declared_failure_is_a_result(registered, tmp_path, capsys):
    storage = str(tmp_path / "r.db")
    assert main(["run", _study(tmp_path, "lost", "device-lost"), "--storage", storage]) == 0
    frame = open_store(storage).load_trials("lost")
    failed = frame[frame["status"] == "failed"]
    assert len(frame) == 12 and len(failed) > 0
    assert failed["reason"].str.contains("ConnectionError: the device went away").all()


def test_evaluate_reports_a_declared_failure_per_config(registered):
    from dse.core import build_context, build_evaluator

    ctx = build_context("xdna2", "int8-int8", "1024x1024x1024")
    batch = ctx.space.encode([ctx.space.resolve({"m_ct": 64, "k_ct": 64, "n_ct": 64,
                                                 "k_mt": 64}),
                              ctx.space.resolve({"m_ct": 60, "k_ct": 64, "n_ct": 64,
                                                 "k_mt": 64})])
    results = build_evaluator("device-lost").evaluate(batch, ctx)
    assert [r.status for r in results] == [Status.FAILED, Status.INFEASIBLE]
    with pytest.raises(EvaluatorError, match="KeyError"):
        build_evaluator("buggy").evaluate(batch, ctx)


def test_a_ray_task_hands_the_bug_back_to_the_driver(registered):
    """What a Ray task returns for a bug is the error itself (raised again by the driver), not a
    failed result per config."""
    from dse.core import build_context

    ctx = build_context("xdna2", "int8-int8", "1024x1024x1024")
    batch = ctx.space.encode([ctx.space.resolve({"m_ct": 64, "k_ct": 64, "n_ct": 64,
                                                 "k_mt": 64})])
    returned = _remote_evaluate(Buggy(), batch, ctx)
    assert isinstance(returned, EvaluatorError) and "KeyError" in returned.details
    again = pickle.loads(pickle.dumps(returned))  # as it crosses from the worker
    assert str(again) == str(returned)
    (failed,) = _remote_evaluate(DeviceLost(), batch, ctx)
    assert failed.status is Status.FAILED
