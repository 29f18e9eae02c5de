"""``dse dashboard``: a read-only web view of a results database (see :mod:`.app`)."""

from __future__ import annotations

import ipaddress
import socket
import sys
from pathlib import Path

from sqlalchemy.engine import make_url
from werkzeug.serving import make_server

from dse.dashboard.app import create_app
from dse.errors import UsageError
from dse.storage.engine import normalise_url

__all__ = ["create_app", "serve"]


def _require_existing(storage: str | None) -> None:
    """A dashboard only reads: a SQLite path that does not exist is a mistake, not a new DB."""
    url = make_url(normalise_url(storage))
    if url.drivername.startswith("sqlite") and url.database and not Path(url.database).exists():
        raise UsageError(f"--storage: no database at {url.database} (run a study first, or "
                         "name the file or URL that holds your studies)")


def serve(storage: str | None, host: str = "127.0.0.1", port: int = 8050) -> None:
    """Serve the dashboard until interrupted."""
    _require_existing(storage)
    app = create_app(storage, warm=True)
    # bound here, not by Werkzeug, which would print its own message and exit on failure
    try:
        listener = socket.create_server((host, port))
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    server = make_server(host, port, app, threaded=True, fd=listener.fileno())
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = host == "localhost"
    if not local:
        print(f"warning: listening on {host}, so anyone who can reach this machine's port "
              f"{port} can read the results", file=sys.stderr)
    print(f"dse dashboard on http://{host}:{listener.getsockname()[1]}/ (Ctrl-C stops it)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
