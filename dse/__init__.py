"""dse: design-space exploration for GEMM mappings on AI accelerators.

``dse.load_trials(storage, study)`` reads a study back as a pandas DataFrame; the contract a
target family implements is :mod:`dse.core`. Names load on first use (``dse --help`` imports
this package).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from dse.version import __version__

_EXPORTS = {"DseError": "dse.core.errors", "TargetFileError": "dse.core.errors",
            "UsageError": "dse.core.errors", "EvalResult": "dse.core.results",
            "Status": "dse.core.results", "GemmWorkload": "dse.core.workload",
            "Target": "dse.core.target", "load_target": "dse.core.registry"}

__all__ = ["__version__", "load_trials", *sorted(_EXPORTS)]


def load_trials(storage: str | None, study: str):  # noqa: ANN201 - pandas is imported lazily
    """Every trial of ``study`` in ``storage`` (URL or SQLite path, default ``./dse.db``) as a
    pandas DataFrame: one row per trial, parameters and metrics as columns."""
    from dse.storage.store import open_store

    return open_store(storage, read_only=True).load_trials(study)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dse' has no attribute {name!r}")
    return getattr(import_module(module), name)


if TYPE_CHECKING:
    from dse.core.errors import DseError, TargetFileError, UsageError
    from dse.core.registry import load_target
    from dse.core.results import EvalResult, Status
    from dse.core.target import Target
    from dse.core.workload import GemmWorkload
