"""Starting Ray for a study: a local Ray without its web dashboard, or a cluster whose address
is checked first (ray.init would retry a wrong one for minutes), and the check that no
dashboard serves."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

from dse.core.errors import UsageError
from dse.study.execution.reaper import descendants


def _signal_handlers() -> dict[int, Any]:
    """The handlers of SIGINT and SIGTERM (only the main thread may set them again)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}


def _restore(handlers: dict[int, Any]) -> None:
    for sig, handler in handlers.items():
        if handler is not None:
            signal.signal(sig, handler)


# an HTTP/2 client's connection preface and its (empty) SETTINGS frame: a gRPC server, as a
# Ray head's GCS and its client server are, answers with a SETTINGS frame of its own
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
SETTINGS_FRAME = 4
START_HINT = ("start a cluster with `ray start --head` and give the address it prints, or "
              "`auto` for one on this machine")


def _require_listening(address: str) -> None:
    """Refuse a ``host:port`` (or ``ray://host:port``) where nothing accepts a connection, or
    where what does answers no HTTP/2 (gRPC) within 5 s: ray.init would retry for many minutes,
    holding the study's lease."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5) as conn:
            if _ray_uses_tls():  # a TLS head answers no plain HTTP/2: only connecting is checked
                return
            conn.sendall(HTTP2_PREFACE)
            reply = _read_frame_header(conn)
    except OSError as exc:
        raise UsageError(f"--ray-address {address}: nothing answers there ({exc}); "
                         f"{START_HINT}") from None
    if len(reply) < 9 or reply[3] != SETTINGS_FRAME:
        said = f"its reply began {reply!r}" if reply else "it sent nothing back within 5 s"
        raise UsageError(f"--ray-address {address}: what answers there is not a Ray cluster "
                         f"(it does not speak gRPC: {said}); {START_HINT}")


def _ray_uses_tls() -> bool:
    """Whether Ray connects with TLS here (``RAY_USE_TLS``, as Ray itself reads it)."""
    return os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")


def _read_frame_header(conn: Any) -> bytes:
    """The first 9 bytes the server sends (an HTTP/2 frame header), or fewer if it stops or
    stays silent for the connection's timeout."""
    reply = b""
    try:
        while len(reply) < 9:
            chunk = conn.recv(9 - len(reply))
            if not chunk:
                break
            reply += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return reply


def start_ray(ray: Any, workers: int, address: str | None,
               resources: dict[str, int] | None) -> None:
    """``ray.init``: a local Ray of ``workers`` CPUs without its web dashboard, or the cluster
    at ``address``; a refused connection is a usage error, and the run's signal handlers stay."""
    if address:
        _require_listening(address)
    handlers = _signal_handlers()
    try:  # measured and not kept (no gain here): a smaller object store, usage stats off,
        # metrics collection off; what dominates is the raylet waiting for Ray's own agents
        ray.init(address=address, num_cpus=None if address else workers,
                 resources=None if address else resources,
                 include_dashboard=False, log_to_driver=False, configure_logging=False)
    except ConnectionError as exc:  # no cluster at the address, or not let in
        hint = ("" if os.environ.get("RAY_AUTH_MODE") else
                "; if the head uses Ray's token authentication, set RAY_AUTH_MODE=token "
                "and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) here as on its nodes")
        raise UsageError(f"--ray-address {address}: {exc}{hint}") from None
    except SystemExit:  # SIGTERM while Ray started: its handler exits; stop as Ctrl-C
        ray.shutdown()
        raise KeyboardInterrupt from None
    finally:  # Ray installs its own SIGTERM handler (an exit): the run's stays
        _restore(handlers)


def dashboard_ports() -> list[int]:
    """The TCP ports on which a process of this process's local Ray listens that runs Ray's
    dashboard (``ray/dashboard/dashboard.py``): none when started without it (Ray still starts
    that process, with ``--disable-frontend``, but it serves no web page). Linux (``/proc``)."""
    listening = _listening_sockets()
    ports = []
    for pid in descendants(os.getpid()):
        try:
            if b"dashboard/dashboard.py" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:  # ended meanwhile
            continue
        ports += [listening[link] for link in links if link in listening]
    return sorted(ports)


def _listening_sockets() -> dict[str, int]:
    """``socket:[INODE]`` -> port of every listening TCP socket (IPv4 and IPv6)."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A":  # LISTEN
                found[f"socket:[{fields[9]}]"] = int(fields[1].rsplit(":", 1)[1], 16)
    return found
