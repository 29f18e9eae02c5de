"""Element types and the (input, output) type pairs a GEMM can use."""

from __future__ import annotations

from dataclasses import dataclass

from dse.core.errors import UsageError

ELEMENT_BYTES: dict[str, int] = {"int8": 1, "int16": 2, "int32": 4, "bf16": 2, "fp16": 2,
                                 "fp32": 4}

# The pairs GEMM kernels exist for (each target lists the ones it supports): A and B share the
# input type, C has the output type, and the output is at least as wide as the input.
DTYPE_PAIRS: tuple[str, ...] = (
    "int8-int8",
    "int8-int16",
    "int8-int32",
    "int16-int16",
    "int16-int32",
    "bf16-bf16",
    "bf16-fp32",
    "fp16-fp16",
    "fp16-fp32",
    "fp32-fp32",
)


@dataclass(frozen=True)
class DtypePair:
    """Input type of A and B and output type of C, e.g. ``int8-int16``."""

    input: str
    output: str

    @property
    def name(self) -> str:
        return f"{self.input}-{self.output}"

    @property
    def in_bytes(self) -> int:
        return ELEMENT_BYTES[self.input]

    @property
    def out_bytes(self) -> int:
        return ELEMENT_BYTES[self.output]

    @classmethod
    def parse(cls, text: str) -> DtypePair:
        """Parse ``IN-OUT`` (``IN`` alone means the same type out); raises
        :class:`UsageError` listing the valid pairs."""
        if "-" not in text and f"{text}-{text}" in DTYPE_PAIRS:
            text = f"{text}-{text}"
        if text not in DTYPE_PAIRS:
            raise UsageError(f"unknown dtype {text!r}; valid: {', '.join(DTYPE_PAIRS)}")
        inp, out = text.split("-")
        return cls(inp, out)
