"""The target: its constants as frozen dataclasses, read from ``targets/*.toml``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dse.core import TargetConstants, family_sections


@dataclass(frozen=True)
class Compute:
    """The compute peak (operations a second; a multiply-add is two) and the clock."""

    peak_ops_per_s: float
    clock_hz: float


@dataclass(frozen=True)
class Memory:
    """The on-chip SRAM the tiles live in, and the DRAM bandwidth that feeds it."""

    sram_bytes: int
    dram_bytes_per_s: float


@dataclass(frozen=True)
class RooflineTarget(TargetConstants):
    """A roofline-only accelerator."""

    name: str
    description: str
    space: str
    dtypes: tuple[str, ...]
    compute: Compute
    memory: Memory
    source: str = ""

    def compute_units(self) -> tuple[str, float | None]:
        return "1 engine", self.compute.clock_hz

    def occupancy(self, values: Mapping[str, float]) -> list[tuple[str, float, float, str]]:
        if "l1_bytes" not in values:
            return []
        return [("SRAM", values["l1_bytes"], float(self.memory.sram_bytes), "B")]

    def roofline(self, input_type: str | None = None) -> tuple[float, float]:
        return self.compute.peak_ops_per_s, self.memory.dram_bytes_per_s


def read_target(raw: Mapping[str, Any], source: str) -> RooflineTarget:
    """Check a target file's keys and values and build the target (dse names the file and
    key of anything wrong)."""
    return RooflineTarget(**family_sections(RooflineTarget, raw, source,
                                            ("compute", "memory")))
