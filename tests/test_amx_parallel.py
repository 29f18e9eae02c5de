"""The ``amx`` evaluator on several workers: builds need no device and run beside another
worker's measurement (at idle priority), measurements keep the device's lock."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from dse.study.execution.pool import ray_mode, shares_device
from evaluators.hardware.amx import AmxEvaluator, build_at_idle_priority, in_ray_worker
from evaluators.hardware.amx_detect import cpu_flags

X86 = os.uname().machine == "x86_64" and "avx512f" in cpu_flags()
needs_x86 = pytest.mark.skipif(not X86, reason="the emulated tiles are compiled with x86-64 "
                               "intrinsics headers and -march=native (AVX-512 for prefetches)")
needs_idle = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"),
                                reason="no SCHED_IDLE scheduling class on this system")


def test_the_amx_evaluator_runs_on_actors_that_share_its_device():
    """It declares a device (its measurements lock it) and shares it (its builds do not):
    on a local Ray its workers are actors holding no device resource; on a cluster, tasks."""
    evaluator = AmxEvaluator(emulate=True)
    assert evaluator.device and shares_device(evaluator)
    assert ray_mode(evaluator, None) == "actors"
    assert ray_mode(evaluator, "auto") == "tasks"


@needs_idle
def test_a_build_thread_starts_its_compilers_at_idle_priority():
    """A process started by a thread that :func:`build_at_idle_priority` ran in is in the idle
    class; the rest of the process keeps its own."""
    ask = [sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"]
    seen: list[int] = []

    def build_thread() -> None:
        build_at_idle_priority()
        seen.append(int(subprocess.run(ask, capture_output=True, text=True,
                                       check=True).stdout))

    thread = threading.Thread(target=build_thread)
    thread.start()
    thread.join()
    assert seen == [os.SCHED_IDLE]
    assert int(subprocess.run(ask, capture_output=True, text=True, check=True).stdout) \
        == os.SCHED_OTHER
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_builds_in_process_keep_their_priority():
    """Alone (no Ray here), nothing of the study measures while the evaluator builds."""
    assert not in_ray_worker()


@needs_x86
def test_a_ladder_on_two_workers_builds_and_measures_every_config(tmp_path, monkeypatch):
    """The ladder's hardware rung on 2 Ray actors (emulated tiles): every kept config built
    into the run's cache and measured, the results the same configs one worker measures."""
    from dse import load_trials
    from dse.study.runner import run_study
    from dse.study.spec import study_from_dict

    def study(workers: int) -> dict:
        return {"name": f"amx-w{workers}", "target": "cpu-amx", "workers": workers,
                "workload": {"shape": "70x90x200", "dtype": "int8-int32", "b_layout": "col"},
                "space": {"free": ["pack_b", "micro_order"]},
                "ladder": [{"evaluator": "analytical", "keep": 4, "select": "top"},
                           {"evaluator": "amx", "options": {"emulate": True,
                                                            "max_repeats": 3}}],
                "objectives": ["tops"]}

    measured = {}
    for workers in (2, 1):
        cache = tmp_path / f"cache{workers}"
        monkeypatch.setenv("DSE_AMX_CACHE", str(cache))
        summary = run_study(study_from_dict(study(workers)), str(tmp_path / f"w{workers}.db"))
        assert summary.status == "finished"
        frame = load_trials(str(tmp_path / f"w{workers}.db"), f"amx-w{workers}")
        rows = frame[frame["evaluator"] == "amx"]
        assert len(rows) == 4 and (rows["status"] == "ok").all()
        assert len(list(cache.glob("*.so"))) == 4  # built by the workers, into this cache
        measured[workers] = set(map(tuple, rows[["grid_rows", "grid_cols", "mc", "nc", "kc",
                                                 "pack_b", "micro_order"]].values.tolist()))
    assert measured[1] == measured[2]
