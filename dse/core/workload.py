"""The problems a study tunes for: plain GEMMs and batched GEMMs.

Each kind of workload has a name (``kind``), parses from a shape string, a dtype pair and a layout,
and round-trips through the dict stored in the results database (:meth:`to_dict`,
``from_dict``). Kinds are registered (entry-point group ``dse.workloads``) and a search space
says which kind it tunes (``workload_kind``), so a new target family can bring its own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from dse.core.dtypes import DtypePair
from dse.core.errors import UsageError

B_LAYOUTS: tuple[str, ...] = ("col", "row")
# ASCII digits only: \d alone also matches other scripts' digits, which int() then reads
_SHAPE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*$", re.ASCII)
_BATCHED = re.compile(r"^\s*([\d*/]+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*$",
                      re.ASCII)


class Workload(Protocol):
    """What the core needs of any workload."""

    kind: ClassVar[str]
    example_shape: ClassVar[str]  # a small shape of this kind, for examples and tests
    dtype: DtypePair
    b_layout: str

    @property
    def shape(self) -> str:
        """The shape as written in study files and stored, e.g. ``4096x4096x4096``."""

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the whole problem."""

    @property
    def label(self) -> str:
        """A one-line name for listings: shape, dtype and layout."""

    def to_dict(self) -> dict[str, Any]:
        """The body stored in the results database (:func:`workload_from_dict` reads it back)."""

    def operand_bytes(self) -> tuple[int, int, int]:
        """Bytes of A, B and C as stored."""

    @classmethod
    def parse(cls, shape: str, dtype: str, b_layout: str | None = None) -> Workload:
        """A workload of this kind from a shape string, a dtype pair and a layout (None: the
        kind's default); a malformed one is a UsageError."""

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> Workload:
        """A workload of this kind from its stored body."""

    @staticmethod
    def shape_of_gemm(m: int, k: int, n: int) -> str:
        """The shape string of one plain M x K x N GEMM in this kind (a model's mix is made of
        them: see :mod:`dse.core.mix`)."""


MAX_DIMENSION = 2**31 - 1  # sizes and their products stay in int64 arrays


def _positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_DIMENSION:
        raise UsageError(f"dimension {name} must be a positive integer up to {MAX_DIMENSION}, "
                         f"got {value!r}")


@dataclass(frozen=True)
class GemmWorkload:
    """A GEMM of size M x K x N (the paper's order) with A row-major and B in ``b_layout``.

    ``b_layout`` is how B is stored in DRAM: ``col`` (column-major, the paper's default, which
    gives long contiguous runs along K) or ``row``.
    """

    kind: ClassVar[str] = "gemm"
    example_shape: ClassVar[str] = "256x256x256"
    M: int
    K: int
    N: int
    dtype: DtypePair
    b_layout: str = "col"

    def __post_init__(self) -> None:
        for dim in ("M", "K", "N"):
            _positive(dim, getattr(self, dim))
        if self.b_layout not in B_LAYOUTS:
            raise UsageError(f"unknown B layout {self.b_layout!r}; valid: {', '.join(B_LAYOUTS)}")

    @property
    def shape(self) -> str:
        return f"{self.M}x{self.K}x{self.N}"

    @property
    def macs(self) -> int:
        return self.M * self.K * self.N

    @property
    def label(self) -> str:
        return f"{self.shape} {self.dtype.name} (B {self.b_layout})"

    def operand_bytes(self) -> tuple[int, int, int]:
        """Bytes of A, B and C as stored."""
        dt = self.dtype
        return (self.M * self.K * dt.in_bytes, self.K * self.N * dt.in_bytes,
                self.M * self.N * dt.out_bytes)

    @staticmethod
    def shape_of_gemm(m: int, k: int, n: int) -> str:
        return f"{m}x{k}x{n}"

    @classmethod
    def parse(cls, shape: str, dtype: str, b_layout: str | None = None) -> GemmWorkload:
        """Build a workload from ``MxKxN`` and a dtype pair name such as ``int8-int8``."""
        match = _SHAPE.match(shape)
        if not match:
            raise UsageError(f"shape {shape!r} is not of the form MxKxN, e.g. 4096x4096x4096")
        m, k, n = (int(g) for g in match.groups())
        return cls(m, k, n, DtypePair.parse(dtype), b_layout or "col")

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> GemmWorkload:
        return cls(body["M"], body["K"], body["N"], DtypePair.parse(body["dtype"]),
                   body.get("b_layout", "col"))

    def to_dict(self) -> dict[str, Any]:
        # no "kind" key: the bodies stored before batched GEMMs existed keep their identity
        return {"M": self.M, "K": self.K, "N": self.N, "dtype": self.dtype.name,
                "b_layout": self.b_layout}


BMM_LAYOUTS: tuple[str, ...] = ("NN", "NT", "TN", "TT")


def broadcast_batch(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The output's batch dims under NumPy broadcasting (right-aligned; a 1 stretches)."""
    width = max(len(a), len(b))
    a, b = (1,) * (width - len(a)) + a, (1,) * (width - len(b)) + b
    out = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x != y and 1 not in (x, y):
            raise UsageError(f"batch dims {a} and {b} do not broadcast (dim {i}: {x} vs {y})")
        out.append(max(x, y))
    return tuple(out)


def _batch_text(dims: tuple[int, ...]) -> str:
    return "*".join(str(d) for d in dims)


@dataclass(frozen=True)
class BatchedGemmWorkload:
    """``C[Bc, M, N] = A[Ba, M, K] @ B[Bb, K, N] (+ bias[Bc, 1, N])``: a batched GEMM whose batch
    dims broadcast (``Bc = broadcast(Ba, Bb)``).

    The shape is ``BxMxKxN``: ``B`` is one batch count for both sides (``8x2048x1024x2048``), or
    ``A/B`` with each side's batch dims joined by ``*`` (``8/1x...`` broadcasts B over 8 batches;
    ``4*1/1*8x...`` crosses them into 4*8); a ``+bias`` suffix adds ``bias[Bc, 1, N]``. The
    layout says which operand is stored transposed: ``NN`` (default), ``NT``, ``TN`` or ``TT``
    (A's letter first).
    """

    kind: ClassVar[str] = "bmm"
    example_shape: ClassVar[str] = "4x256x256x256"
    batch_a: tuple[int, ...]
    batch_b: tuple[int, ...]
    M: int
    K: int
    N: int
    dtype: DtypePair
    b_layout: str = "NN"
    bias: bool = False

    def __post_init__(self) -> None:
        for dim in ("M", "K", "N"):
            _positive(dim, getattr(self, dim))
        for side in (self.batch_a, self.batch_b):
            if not side:
                raise UsageError("a batch needs at least one dim")
            for d in side:
                _positive("batch", d)
        broadcast_batch(self.batch_a, self.batch_b)
        if self.b_layout not in BMM_LAYOUTS:
            raise UsageError(f"unknown layout {self.b_layout!r} for a batched GEMM; valid: "
                             f"{', '.join(BMM_LAYOUTS)} (A's then B's: N as stored, T transposed)")

    @property
    def batch_c(self) -> tuple[int, ...]:
        return broadcast_batch(self.batch_a, self.batch_b)

    @property
    def batch(self) -> int:
        """Output batches (the ``B`` of the branch rules)."""
        return math.prod(self.batch_c)

    @property
    def batch_count_a(self) -> int:
        return math.prod(self.batch_a)

    @property
    def batch_count_b(self) -> int:
        return math.prod(self.batch_b)

    @property
    def shape(self) -> str:
        batch = (_batch_text(self.batch_a) if self.batch_a == self.batch_b
                 else f"{_batch_text(self.batch_a)}/{_batch_text(self.batch_b)}")
        return f"{batch}x{self.M}x{self.K}x{self.N}{'+bias' if self.bias else ''}"

    @property
    def macs(self) -> int:
        return self.batch * self.M * self.K * self.N

    @property
    def label(self) -> str:
        return f"{self.shape} {self.dtype.name} ({self.b_layout})"

    def operand_bytes(self) -> tuple[int, int, int]:
        """Bytes of A, B and C as stored (a broadcast side once)."""
        dt = self.dtype
        return (self.batch_count_a * self.M * self.K * dt.in_bytes,
                self.batch_count_b * self.K * self.N * dt.in_bytes,
                self.batch * self.M * self.N * dt.out_bytes)

    @staticmethod
    def shape_of_gemm(m: int, k: int, n: int) -> str:
        return f"1x{m}x{k}x{n}"

    @classmethod
    def parse(cls, shape: str, dtype: str, b_layout: str | None = None,
              bias: bool = False) -> BatchedGemmWorkload:
        """Build a batched GEMM from ``BxMxKxN[+bias]`` (see the class) and a dtype (``bf16`` or
        a pair such as ``bf16-fp32``)."""
        if shape.strip().lower().endswith("+bias"):
            shape, bias = shape.strip()[:-len("+bias")], True
        match = _BATCHED.match(shape)
        if not match:
            raise UsageError(f"shape {shape!r} is not of the form BxMxKxN, e.g. "
                             "8x2048x1024x2048 (B may be A/B batches, e.g. 8/1, or 4*1/1*8)")
        batch, m, k, n = match.groups()
        sides = batch.split("/")
        if len(sides) > 2 or not all(sides):
            raise UsageError(f"shape {shape!r}: the batch {batch!r} must be one count or A/B")
        try:
            dims = [tuple(int(d) for d in side.split("*")) for side in sides]
        except ValueError:
            raise UsageError(f"shape {shape!r}: batch dims are whole numbers joined by *") from None
        return cls(dims[0], dims[-1], int(m), int(k), int(n), DtypePair.parse(dtype),
                   b_layout or "NN", bias)

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> BatchedGemmWorkload:
        return cls(tuple(body["batch_a"]), tuple(body["batch_b"]), body["M"], body["K"],
                   body["N"], DtypePair.parse(body["dtype"]), body.get("b_layout", "NN"),
                   bool(body.get("bias", False)))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "shape": self.shape, "batch_a": list(self.batch_a),
                "batch_b": list(self.batch_b), "M": self.M, "K": self.K, "N": self.N,
                "dtype": self.dtype.name, "b_layout": self.b_layout, "bias": self.bias}
