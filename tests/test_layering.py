"""The layering the import contracts in pyproject.toml state holds: dse imports no family,
families import only the contract (dse.core), the contract imports nothing of the project, a
family's record sits above its evaluators and they above its space, and only the store speaks
SQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def lint_imports(*args: str, cwd: Path = ROOT,
                 env: dict | None = None) -> subprocess.CompletedProcess:
    """import-linter's command, from the venv the tests run in (``args``: config files)."""
    command = [str(Path(sys.executable).with_name("lint-imports")), "--no-cache", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)


def test_the_import_contracts_are_kept():
    done = lint_imports()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 kept, 0 broken" in done.stdout


def test_no_package_export_is_named_as_a_module_of_the_package():
    """A lazily exported name shared with a submodule becomes the submodule once something
    imports it (Python sets the attribute), so ``from dse.core import family`` would give a
    module or a function depending on what ran before."""
    import importlib
    import pkgutil

    for package in ("dse", "dse.core", "dse.storage"):
        module = importlib.import_module(package)
        submodules = {m.name for m in pkgutil.iter_modules(module.__path__)}
        assert not set(module._EXPORTS) & submodules, package
