"""``dse roofline ridge``: the family's own command (``dse.commands`` in ``pyproject.toml``)."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_ridge(args: argparse.Namespace) -> int:
    """Print where the target's roofline bends: operations per DRAM byte at the ridge."""
    from dse.core import UsageError, load_target

    target = load_target(args.target)
    if target.space != "roofline_npu":
        raise UsageError(f"--target: {args.target} is not a roofline_npu target")
    peak, bandwidth = target.roofline()
    print(f"{target.name}: ridge at {peak / bandwidth:.1f} operations per DRAM byte "
          f"({peak / 1e12:.1f} TOPS over {bandwidth / 1e9:.0f} GB/s)")
    return 0


def add_commands(sub: Any) -> None:
    """``dse roofline ridge --target NAME``."""
    roofline = sub.add_parser("roofline", help="the roofline_npu family's commands")
    commands = roofline.add_subparsers(dest="roofline_command", required=True)
    ridge = commands.add_parser("ridge", help="where the target's roofline bends")
    ridge.add_argument("--target", default="tiny-npu")
    ridge.set_defaults(func=cmd_ridge)
