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
