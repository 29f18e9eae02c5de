"""The GEMM problem a study tunes for: C[M,N] = A[M,K] @ B[K,N]."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dse.dtypes import DtypePair
from dse.errors import UsageError

B_LAYOUTS: tuple[str, ...] = ("col", "row")
_SHAPE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*$")


@dataclass(frozen=True)
class GemmWorkload:
    """A GEMM of size M x K x N (the paper's order) with A row-major and B in ``b_layout``.

    ``b_layout`` is how B is stored in DRAM: ``col`` (column-major, the paper's default, which
    gives long contiguous runs along K) or ``row``.
    """

    M: int
    K: int
    N: int
    dtype: DtypePair
    b_layout: str = "col"

    def __post_init__(self) -> None:
        for dim in ("M", "K", "N"):
            value = getattr(self, dim)
            if not isinstance(value, int) or value <= 0:
                raise UsageError(f"GEMM dimension {dim} must be a positive integer, got {value!r}")
        if self.b_layout not in B_LAYOUTS:
            raise UsageError(f"unknown B layout {self.b_layout!r}; valid: {', '.join(B_LAYOUTS)}")

    @property
    def shape(self) -> str:
        return f"{self.M}x{self.K}x{self.N}"

    @property
    def macs(self) -> int:
        return self.M * self.K * self.N

    @classmethod
    def parse(cls, shape: str, dtype: str, b_layout: str = "col") -> GemmWorkload:
        """Build a workload from ``MxKxN`` and a dtype pair name such as ``int8-int8``."""
        match = _SHAPE.match(shape)
        if not match:
            raise UsageError(f"shape {shape!r} is not of the form MxKxN, e.g. 4096x4096x4096")
        m, k, n = (int(g) for g in match.groups())
        return cls(m, k, n, DtypePair.parse(dtype), b_layout)

    def to_dict(self) -> dict[str, Any]:
        return {"M": self.M, "K": self.K, "N": self.N, "dtype": self.dtype.name,
                "b_layout": self.b_layout}
