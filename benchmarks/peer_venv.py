"""The interpreter of a peer tool run side by side with dse, in a venv of its own.

Peer tools (SCALE-Sim, ZigZag) pin versions of NumPy and friends that dse's own venv must not
take, so each runs in a subprocess with its own interpreter: the one given on the command line,
else the one an environment variable names, else ``VENV/bin/python`` under the repository root,
which ``--setup`` creates with ``python -m venv`` and ``pip install``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def peer_python(given: str | None, variable: str, venv: str, packages: Sequence[str],
                setup: bool) -> Path:
    """The peer's interpreter: ``given``, else ``$variable``, else ``ROOT/venv/bin/python``
    (made with ``packages`` first when ``setup`` and it is missing)."""
    if given:
        return Path(given)
    if os.environ.get(variable):
        return Path(os.environ[variable])
    folder = ROOT / venv
    python = folder / "bin" / "python"
    if setup and not python.exists():
        print(f"creating {folder} with {' '.join(packages)} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *packages], check=True)
    return python


def imports(python: Path, module: str) -> bool:
    """Whether ``python`` runs and imports ``module``."""
    if not python.exists():
        return False
    return subprocess.run([str(python), "-c", f"import {module}"],
                          capture_output=True).returncode == 0


def peer_or_none(tool: str, given: str | None, option: str, variable: str, venv: str,
                 packages: Sequence[str], setup: bool, module: str) -> Path | None:
    """:func:`peer_python` when it imports ``module``; else None, after saying on stderr how
    to get one (``option`` is the command line's way to give it)."""
    python = peer_python(given, variable, venv, packages, setup)
    if imports(python, module):
        return python
    print(f"no {tool} interpreter at {python}: pass {option} PATH, set {variable}, or run "
          f"with --setup to create {venv} (needs pip access to {' and '.join(packages)})",
          file=sys.stderr)
    return None
