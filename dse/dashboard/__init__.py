"""``dse dashboard``: a read-only web view of a results database (see :mod:`.app`)."""

from __future__ import annotations

import ipaddress
import socket
import sys

from werkzeug.serving import make_server

from dse.core.errors import UsageError
from dse.dashboard.app import create_app
from dse.storage.store import ResultStore, open_store

__all__ = ["create_app", "serve"]


def serve(storage: ResultStore | str | None, host: str = "127.0.0.1", port: int = 8050) -> None:
    """Serve the dashboard of an existing results database until interrupted."""
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be 0 (any free port) to 65535, got {port}")
    app = create_app(open_store(storage, read_only=True), warm=True)
    # bound here, not by Werkzeug, which would print its own message and exit on failure
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        listener = socket.create_server((host, port), family=family)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    server = make_server(host, port, app, threaded=True, fd=listener.fileno())
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = host == "localhost"
    if not local:
        print(f"warning: listening on {host}, so anyone who can reach this machine's port "
              f"{listener.getsockname()[1]} can read the results", file=sys.stderr)
    shown = f"[{host}]" if ":" in host else host
    print(f"dse dashboard on http://{shown}:{listener.getsockname()[1]}/ (Ctrl-C stops it)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
