"""dse: design-space exploration for GEMM mappings on AI accelerators."""

from dse.errors import DseError, TargetFileError, UsageError
from dse.results import EvalResult, Status
from dse.target import Target, load_target
from dse.workload import GemmWorkload

__version__ = "0.1.0"

__all__ = [
    "DseError",
    "EvalResult",
    "GemmWorkload",
    "Status",
    "Target",
    "TargetFileError",
    "UsageError",
    "load_target",
]
