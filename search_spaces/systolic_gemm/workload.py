"""The systolic family's workload: one GEMM or a mix of GEMMs with call counts, whose weights
(B) are stored dense or 2:4 structured-sparse.

A shape is ``MxKxN`` (one GEMM) or terms joined by commas, each ``MxKxN`` or ``MxKxN*COUNT``
(``1x4096x4096*32,2048x4096x4096``): a co-design study scores one array against the whole mix.
The layout slot says how B is stored: ``dense`` or ``2:4`` (two of every four consecutive
weights along K kept, with a 2-bit index per kept value), which halves the MACs and the
weights' traffic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from dse.core.dtypes import DtypePair
from dse.core.errors import UsageError
from dse.core.workload import MAX_DIMENSION

SPARSITY: tuple[str, ...] = ("dense", "2:4")
MAX_TERMS = 64  # a mix is a handful of layer shapes, not a trace
_TERM = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*(?:\*\s*(\d+)\s*)?$",
                   re.ASCII)  # ASCII digits: \d alone takes any script's


@dataclass(frozen=True)
class GemmTerm:
    """One GEMM of a mix: C (M x N) = A (M x K) . B (K x N), called ``count`` times."""

    M: int
    K: int
    N: int
    count: int = 1

    @property
    def shape(self) -> str:
        return f"{self.M}x{self.K}x{self.N}" + (f"*{self.count}" if self.count != 1 else "")


def _positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_DIMENSION:
        raise UsageError(f"{name} must be a positive integer up to {MAX_DIMENSION}, "
                         f"got {value!r}")


@dataclass(frozen=True)
class GemmMix:
    """One or more GEMMs (``terms``) of one dtype, weights dense or 2:4-sparse (``b_layout``).

    ``M``, ``K`` and ``N`` are the largest of the terms' (the tiles' upper bounds)."""

    kind: ClassVar[str] = "gemm_mix"
    example_shape: ClassVar[str] = "256x256x256"
    terms: tuple[GemmTerm, ...]
    dtype: DtypePair
    b_layout: str = "dense"

    def __post_init__(self) -> None:
        if not self.terms:
            raise UsageError("a GEMM mix needs at least one shape")
        if len(self.terms) > MAX_TERMS:
            raise UsageError(f"a GEMM mix holds at most {MAX_TERMS} shapes, got "
                             f"{len(self.terms)}")
        for term in self.terms:
            for dim in ("M", "K", "N"):
                _positive(f"dimension {dim}", getattr(term, dim))
            _positive("a shape's count", term.count)
        if self.b_layout not in SPARSITY:
            raise UsageError(f"unknown B storage {self.b_layout!r} for a systolic GEMM; valid: "
                             f"{', '.join(SPARSITY)} (2:4 keeps two of every four weights)")

    @property
    def M(self) -> int:
        return max(t.M for t in self.terms)

    @property
    def K(self) -> int:
        return max(t.K for t in self.terms)

    @property
    def N(self) -> int:
        return max(t.N for t in self.terms)

    @property
    def sparse(self) -> bool:
        """Whether B is 2:4 structured-sparse."""
        return self.b_layout == "2:4"

    @property
    def shape(self) -> str:
        return ",".join(t.shape for t in self.terms)

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the dense problem (what throughput is counted against)."""
        return sum(t.count * t.M * t.K * t.N for t in self.terms)

    @property
    def label(self) -> str:
        return f"{self.shape} {self.dtype.name} (B {self.b_layout})"

    def operand_bytes(self) -> tuple[int, int, int]:
        """Bytes of A, B (as stored: 2:4 keeps half the values plus 2 bits each) and C."""
        dt = self.dtype
        a = sum(t.count * t.M * t.K for t in self.terms) * dt.in_bytes
        b_values = sum(t.count * t.K * t.N for t in self.terms)
        b = b_values * dt.in_bytes if not self.sparse else \
            -(-b_values // 2) * dt.in_bytes + -(-b_values // 8)
        c = sum(t.count * t.M * t.N for t in self.terms) * dt.out_bytes
        return a, b, c

    @staticmethod
    def shape_of_gemm(m: int, k: int, n: int) -> str:
        return f"{m}x{k}x{n}"

    @classmethod
    def parse(cls, shape: str, dtype: str, b_layout: str | None = None) -> GemmMix:
        """A mix from ``MxKxN[*COUNT][,...]``, a dtype pair and the B storage (``dense``)."""
        terms = []
        for part in shape.split(","):
            match = _TERM.match(part)
            if not match:
                raise UsageError(f"shape {shape!r}: {part.strip()!r} is not of the form MxKxN "
                                 "or MxKxN*COUNT, e.g. 1024x1024x1024 or 1x4096x4096*32")
            m, k, n, count = match.groups()
            terms.append(GemmTerm(int(m), int(k), int(n), int(count or 1)))
        return cls(tuple(terms), DtypePair.parse(dtype), b_layout or "dense")

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> GemmMix:
        return cls(tuple(GemmTerm(*map(int, t)) for t in body["terms"]),
                   DtypePair.parse(body["dtype"]), body.get("b_layout", "dense"))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "shape": self.shape,
                "terms": [[t.M, t.K, t.N, t.count] for t in self.terms],
                "dtype": self.dtype.name, "b_layout": self.b_layout}
