"""Evaluations fanned out on a real local Ray."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dse import load_trials
from dse.core.errors import UsageError
from dse.storage import open_store
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
    from dse.study.pool import _require_listening

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ray_cli = Path(sys.executable).with_name("ray")
    head = subprocess.Popen([str(ray_cli), "start", "--head", "--block", f"--port={port}",
                             "--node-ip-address=127.0.0.1", "--num-cpus=1",
                             "--include-dashboard=false", "--disable-usage-stats"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
        head.wait(60)


def test_a_tls_cluster_is_only_checked_for_answering(monkeypatch):
    """A head started with RAY_USE_TLS speaks no plain HTTP/2: what answers is let through."""
    from dse.study.pool import _require_listening

    monkeypatch.setenv("RAY_USE_TLS", "1")
    port, thread, server = _serve_once(b"\x15\x03\x03\x00\x02\x02\x46")  # a TLS alert
    with server:
        _require_listening(f"127.0.0.1:{port}")
        thread.join(15)
