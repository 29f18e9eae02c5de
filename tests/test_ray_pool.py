"""Evaluations fanned out on a real local Ray."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dse import load_trials
from dse.core.errors import InfrastructureError, UsageError
from dse.storage import open_store
from dse.study.execution.pool import RayPool
from dse.study.runner import run_study
from tests.study_helpers import make_spec


def test_study_on_two_ray_workers(tmp_path):
    storage = str(tmp_path / "r.db")
    spec = make_spec(evaluator={"name": "synthetic", "options": {"work_s": 0.05,
                                                                 "fail_fraction": 0.2}},
                     workers=2, budget={"trials": 16})
    summary = run_study(spec, storage)
    assert summary.status == "finished" and summary.workloads[0].trials == 16
    frame = load_trials(storage, "t")
    assert list(frame["number"]) == list(range(16))
    ok = frame[frame["status"] == "ok"]
    assert len(ok) and (ok["tops"] > 0).all() and (ok["elapsed_s"] >= 0.05).all()
    assert set(frame["status"]) <= {"ok", "infeasible", "failed"}


def test_a_cluster_address_where_nothing_answers_is_refused_at_once(tmp_path):
    """Ray would retry such an address for many minutes, the study leased all the while."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    storage = str(tmp_path / "r.db")
    spec = make_spec(evaluator={"name": "synthetic", "options": {"work_s": 0.01}}, workers=2)
    start = time.monotonic()
    with pytest.raises(UsageError, match=f"127.0.0.1:{port}: nothing answers there"):
        run_study(spec, storage, ray_address=f"127.0.0.1:{port}")
    assert time.monotonic() - start < 30
    # stored, and released: not left running
    (status,) = open_store(storage).list_studies()["status"]
    assert status != "running"


def _serve_once(reply: bytes | None) -> tuple[int, threading.Thread, socket.socket]:
    """A TCP server on a free local port that answers one connection with ``reply`` (or stays
    silent until the client leaves)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(10)
            try:
                conn.recv(64)
                if reply is None:
                    conn.recv(64)  # returns when the client closes
                else:
                    conn.sendall(reply)
            except OSError:  # the client left first
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server.getsockname()[1], thread, server


@pytest.mark.parametrize(("reply", "said"), [
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", "its reply began b'HTTP/1.1 '"),
    (None, "it sent nothing back within 5 s")])
def test_a_cluster_address_where_something_else_answers_is_refused(tmp_path, reply, said):
    """A web server, or a silent one, at the address: Ray's retries would hang as long."""
    port, thread, server = _serve_once(reply)
    storage = str(tmp_path / "r.db")
    spec = make_spec(evaluator={"name": "synthetic", "options": {"work_s": 0.01}}, workers=2)
    start = time.monotonic()
    with server:
        with pytest.raises(UsageError, match="is not a Ray cluster") as refused:
            run_study(spec, storage, ray_address=f"127.0.0.1:{port}")
        thread.join(15)
    assert said in str(refused.value) and time.monotonic() - start < 30
    (status,) = open_store(storage).list_studies()["status"]
    assert status != "running"


def test_a_ray_head_passes_the_address_check():
    """The check speaks HTTP/2 to the head's GCS, which is what a real cluster answers."""
    from dse.study.execution.ray_start import _require_listening

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ray_cli = Path(sys.executable).with_name("ray")
    head = subprocess.Popen([str(ray_cli), "start", "--head", "--block", f"--port={port}",
                             "--node-ip-address=127.0.0.1", "--num-cpus=1",
                             "--include-dashboard=false", "--disable-usage-stats"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                _require_listening(f"127.0.0.1:{port}")
                break
            except UsageError:
                assert head.poll() is None, "ray start --head exited"
                assert time.monotonic() < deadline, "the head's GCS did not come up in 90 s"
                time.sleep(0.5)
        _require_listening(f"ray://127.0.0.1:{port}")  # the same check for the client form
    finally:
        head.terminate()
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:  # a loaded machine: end the head and its children
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()


def test_a_tls_cluster_is_only_checked_for_answering(monkeypatch):
    """A head started with RAY_USE_TLS speaks no plain HTTP/2: what answers is let through."""
    from dse.study.execution.ray_start import _require_listening

    monkeypatch.setenv("RAY_USE_TLS", "1")
    port, thread, server = _serve_once(b"\x15\x03\x03\x00\x02\x02\x46")  # a TLS alert
    with server:
        _require_listening(f"127.0.0.1:{port}")
        thread.join(15)


def test_a_killed_driver_leaves_no_ray_process_behind(tmp_path):
    # Ray's agents outlive a driver killed with SIGKILL; the reaper ends them
    from dse.study.execution.reaper import descendants
    from tests.cluster import cmdline

    study = tmp_path / "slow.yaml"
    study.write_text("name: slow\ntarget: xdna2\nworkload: {shape: 512x512x512, dtype: "
                     "int8-int8}\nevaluator: {name: synthetic, options: {work_s: 0.2}}\n"
                     "sampler: random\nbudget: {trials: 400}\nworkers: 2\n")
    driver = subprocess.Popen([sys.executable, "-m", "dse.cli", "run", str(study), "--storage",
                               str(tmp_path / "r.db")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not any("ray::" in cmdline(p) for p in descendants(driver.pid)):
            assert time.monotonic() < deadline and driver.poll() is None
            time.sleep(0.5)
        time.sleep(3)  # the agents and the first tasks are up
        started = {p: cmdline(p) for p in descendants(driver.pid)}
    finally:
        driver.kill()
        driver.wait()
    reaper = [p for p, name in started.items() if "dse.study.execution.reaper" in name]
    assert reaper, started
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(cmdline(p) for p in started):
        time.sleep(0.5)
    assert not [name for p in started if (name := cmdline(p))]



def _dying(tmp_path: Path, die: str, name: str = "t", trials: int = 8) -> Any:
    options = {"work_s": 0.01, "die": die, **({"marks": str(tmp_path)} if die == "once" else {})}
    return make_spec(name, evaluator={"name": "synthetic", "options": options}, workers=2,
                     budget={"trials": trials})


def test_a_lost_worker_is_a_fault_tried_again_not_a_result(tmp_path):
    storage = str(tmp_path / "r.db")
    summary = run_study(_dying(tmp_path, "once"), storage)  # each batch kills its first worker
    assert summary.status == "finished"
    frame = load_trials(storage, "t")
    assert len(frame) == 8 and set(frame["status"]) <= {"ok", "infeasible"}
    faults = open_store(storage).faults("t")
    assert len(faults) == summary.workloads[0].faults > 0
    assert set(faults["kind"]) <= {"WorkerCrashedError", "RayTaskError", "ActorDiedError"}, \
        faults["kind"]
    assert faults["retried"].all() and (faults["attempt"] == 1).all()


def test_a_worker_that_keeps_dying_stops_the_study_and_nothing_is_cached(tmp_path):
    storage = str(tmp_path / "r.db")
    with pytest.raises(InfrastructureError, match="lost the evaluation of .* 3 times"):
        run_study(_dying(tmp_path, "always"), storage)
    store = open_store(storage)
    assert store.study_header("t")["status"] == "failed"
    assert load_trials(storage, "t").empty  # no failure stored as the configs' result
    faults = store.faults("t")
    assert sorted(set(faults["attempt"])) == [1, 2, 3]
    assert not faults[faults["attempt"] == 3]["retried"].any()
    # the same configs, once the machinery is sound, are evaluated, not served a loss
    again = run_study(_dying(tmp_path, "never", name="again"), storage)
    assert again.workloads[0].evaluated == 8 and again.workloads[0].cached == 0


def test_a_local_ray_starts_no_web_dashboard():
    from dse.core.registry import build_evaluator
    from dse.study.execution.ray_start import dashboard_ports

    pool = RayPool(2, evaluator=build_evaluator("synthetic", {"work_s": 0.01}))
    try:
        pool.wait_ready()  # its actors too
        import ray

        assert not ray._private.worker._global_node.address_info.get("webui_url")
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", 8265)) != 0
        assert dashboard_ports() == []  # Ray's dashboard process serves nothing
    finally:
        pool.close()


def _batch_and_ctx(shape: str, n: int) -> tuple[Any, Any]:
    """``n`` feasible configs of an xdna2 ``shape`` GEMM, and their context."""
    import numpy as np

    from dse.core import batch_take, build_context
    from dse.study.strategies.exhaustive import feasible_configs

    ctx = build_context("xdna2", "int8-int8", shape)
    spec = make_spec(evaluator={"name": "synthetic", "options": {"work_s": 0.001}},
                     sampler="exhaustive", workload={"shape": shape, "dtype": "int8-int8"})
    return batch_take(feasible_configs(ctx, spec), np.arange(n)), ctx


def _same(results: list[Any], expected: list[Any]) -> bool:
    """The same statuses, metrics and reasons, config by config (not the times they took)."""
    def what(r: Any) -> tuple[Any, ...]:
        return r.status, r.metrics, r.reason

    return [what(r) for r in results] == [what(r) for r in expected]


def test_warm_actors_give_the_in_process_results_in_order():
    """The same actors (processes) serve every batch, a second workload and a second evaluator
    included, with the results the runner's own process gives, in the configs' order."""
    from dse.core.registry import build_evaluator
    from dse.study.execution.pool import ACTORS, InProcessPool

    plain = build_evaluator("synthetic", {"work_s": 0.001})
    failing = build_evaluator("synthetic", {"work_s": 0.001, "fail_fraction": 0.5})
    here = InProcessPool()
    pool = RayPool(2, evaluator=plain)
    try:
        assert pool.mode == ACTORS
        pool.wait_ready()
        import ray

        pids = sorted(ray.get([slot.ready for slot in pool._slots]))
        assert len(set(pids)) == 2 and os.getpid() not in pids
        for shape, n in (("1024x1024x1024", 7), ("2048x512x1024", 5), ("1024x1024x1024", 1)):
            batch, ctx = _batch_and_ctx(shape, n)
            for evaluator in (plain, failing):
                results = pool.evaluate(evaluator, batch, ctx)
                assert _same(results, here.evaluate(evaluator, batch, ctx))
        assert {r.status.value for r in pool.evaluate(failing, *_batch_and_ctx(
            "1024x1024x1024", 7))} == {"ok", "failed"}
        again = sorted(ray.get([slot.actor.ready.remote() for slot in pool._slots]))
        assert again == pids and not pool.take_faults()  # warm: never started again
    finally:
        pool.close()


def test_a_bug_in_the_evaluator_stops_the_study_from_an_actor(tmp_path):
    """The evaluator's own exception (not declared) reaches the driver as itself: no fault, no
    retry; the study fails."""
    from dse.core import EvaluatorError
    from dse.core.registry import build_evaluator
    from evaluators.synthetic import SyntheticEvaluator

    class Broken(SyntheticEvaluator):  # defined here: pickled by value into the actors
        def evaluate_feasible(self, batch, ctx):
            return [{"not": "a result"}[0]]

    pool = RayPool(2, evaluator=build_evaluator("synthetic", {"work_s": 0.001}))
    try:
        batch, ctx = _batch_and_ctx("1024x1024x1024", 4)
        with pytest.raises(EvaluatorError, match="KeyError"):
            pool.evaluate(Broken(work_s=0.001), batch, ctx)
        assert not pool.take_faults()
    finally:
        pool.close()


@pytest.mark.parametrize("mode", ["actors", "tasks"])
def test_a_lost_worker_is_a_fault_in_either_mode(tmp_path, monkeypatch, mode):
    """The old way (tasks, forced with DSE_RAY_POOL) keeps the fault semantics too; with actors
    a lost worker is replaced and its chunk evaluated again on the new one."""
    from dse.study.execution.pool import MODE_ENV

    monkeypatch.setenv(MODE_ENV, mode)
    storage = str(tmp_path / "r.db")
    summary = run_study(_dying(tmp_path, "once", trials=6), storage)
    assert summary.status == "finished" and summary.workloads[0].evaluated == 6
    faults = open_store(storage).faults("t")
    kinds = {"actors": {"ActorDiedError", "RayActorError"},
             "tasks": {"WorkerCrashedError", "RayTaskError"}}[mode]
    assert len(faults) > 0 and set(faults["kind"]) <= kinds, faults["kind"]
    assert faults["retried"].all() and (faults["attempt"] == 1).all()


def test_a_ladder_on_two_workers_finishes(tmp_path):
    """The runner's own pool (the ladder's last evaluator) and the rung's pool share one Ray:
    actors hold a CPU each for life, so the unused pool must hold none."""
    from dse.study.spec import study_from_dict

    spec = study_from_dict({
        "name": "t", "target": "xdna2", "workers": 2,
        "workload": {"shape": "2048x2048x2048", "dtype": "int8-int8"},
        "ladder": [{"evaluator": "analytical", "keep": 4},
                   {"evaluator": "synthetic", "options": {"work_s": 0.01}}]})
    summary = run_study(spec, str(tmp_path / "r.db"))
    assert summary.status == "finished" and summary.workloads[0].evaluated > 0


def test_where_evaluations_run():
    """Actors on a local Ray; tasks on a cluster, for a device, or when DSE_RAY_POOL says so."""
    from dse.core.registry import build_evaluator
    from dse.study.execution.pool import MODE_ENV, ray_mode

    synthetic = build_evaluator("synthetic", {"work_s": 0.01})
    assert ray_mode(synthetic, None) == "actors"
    assert ray_mode(synthetic, "auto") == "tasks"

    class OnADevice(type(synthetic)):
        device = "npu0"

    assert ray_mode(OnADevice(), None) == "tasks"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(MODE_ENV, "tasks")
        assert ray_mode(synthetic, None) == "tasks"
        mp.setenv(MODE_ENV, "threads")
        with pytest.raises(UsageError, match="DSE_RAY_POOL=threads: one of actors, tasks"):
            ray_mode(synthetic, None)


def test_the_dashboard_check_sees_a_listening_port():
    """What dashboard_ports reads (/proc's listening sockets) finds one opened here."""
    from dse.study.execution.ray_start import _listening_sockets

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert server.getsockname()[1] in _listening_sockets().values()
