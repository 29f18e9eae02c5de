"""``dse dashboard``: the read-only web dashboard of a database."""

from __future__ import annotations

import argparse
from typing import Any

from dse.core.commands import add_storage_option


def port_number(text: str) -> int:
    """A TCP port to listen on: 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 (any free port) to 65535, got {value}")
    return value


def cmd_dashboard(args: argparse.Namespace) -> int:
    """``dse dashboard``: serve the read-only web dashboard until interrupted."""
    from dse.dashboard import serve

    serve(args.store, args.host, args.port)
    return 0


def add_commands(sub: Any) -> None:
    """``dse dashboard``."""
    dash = sub.add_parser("dashboard", help="read-only web dashboard of the studies in a "
                          "database")
    add_storage_option(dash)
    dash.add_argument("--host", default="127.0.0.1",
                      help="address to listen on (default 127.0.0.1: this machine only)")
    dash.add_argument("--port", type=port_number, default=8050,
                      help="port (default 8050; 0 picks one)")
    dash.set_defaults(func=cmd_dashboard)
