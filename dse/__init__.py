"""dse: design-space exploration for GEMM mappings on AI accelerators."""

from dse.errors import DseError, TargetFileError, UsageError
from dse.results import EvalResult, Status
from dse.target import Target, load_target
from dse.workload import GemmWorkload

__version__ = "0.1.0"


def load_trials(storage: str | None, study: str):  # noqa: ANN201 - pandas is imported lazily
    """Every trial of ``study`` in ``storage`` (URL or SQLite path) as a pandas DataFrame."""
    from dse.study.query import load_trials as _load

    return _load(storage, study)


__all__ = [
    "DseError",
    "EvalResult",
    "GemmWorkload",
    "Status",
    "Target",
    "TargetFileError",
    "UsageError",
    "load_target",
    "load_trials",
]
