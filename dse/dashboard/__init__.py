"""``dse dashboard``: a read-only web view of a results database (see :mod:`.app`)."""

from __future__ import annotations

import ipaddress
import socket
import sys
from pathlib import Path

from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.serving import make_server

from dse.dashboard.app import create_app
from dse.errors import UsageError
from dse.storage.engine import normalise_url

__all__ = ["create_app", "serve"]


def _require_existing(storage: str | None) -> None:
    """A dashboard only reads: a SQLite path that does not exist, or a database without dse's
    tables, is a mistake, not a database to create tables in."""
    url = make_url(normalise_url(storage))
    if url.drivername.startswith("sqlite") and url.database and not Path(url.database).exists():
        raise UsageError(f"--storage: no database at {url.database} (run a study first, or "
                         "name the file or URL that holds your studies)")
    engine = create_engine(url)
    try:
        tables = inspect(engine).get_table_names()
    except SQLAlchemyError as exc:
        raise UsageError(f"--storage: cannot read {url.render_as_string()}: {exc}") from None
    finally:
        engine.dispose()
    if "dse_meta" not in tables:
        raise UsageError(f"--storage: {url.render_as_string()} holds no dse results (no "
                         "dse_meta table)")


def serve(storage: str | None, host: str = "127.0.0.1", port: int = 8050) -> None:
    """Serve the dashboard until interrupted."""
    _require_existing(storage)
    app = create_app(storage, warm=True)
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
              f"{port} can read the results", file=sys.stderr)
    shown = f"[{host}]" if ":" in host else host
    print(f"dse dashboard on http://{shown}:{listener.getsockname()[1]}/ (Ctrl-C stops it)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
