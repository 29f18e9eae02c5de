"""TPU-like systolic-array targets (``targets/tpu-v1.toml`` ... ``edge-npu.toml``): the arrays,
their SRAM per operand, DRAM bandwidth and the energy of each access level."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dse.core.errors import TargetFileError
from dse.core.target import TargetConstants, family_sections

DATAFLOWS: tuple[str, ...] = ("os", "ws", "is")
# (metric of the SRAM a config's tiles take, its size parameter, the target's size, label)
SRAM_USE = (("sram_a_bytes", "ifmap_kb", "ifmap_sram_kb", "ifmap SRAM (A)"),
            ("sram_b_bytes", "filter_kb", "filter_sram_kb", "filter SRAM (B)"),
            ("sram_c_bytes", "ofmap_kb", "ofmap_sram_kb", "ofmap SRAM (C)"))


@dataclass(frozen=True)
class ArraySpec:
    """The systolic arrays: PE rows and columns of one, how many the chip has, their clock and
    the dataflow the hardware runs natively (``os``, ``ws`` or ``is``)."""

    rows: int
    cols: int
    count: int
    clock_hz: float
    dataflow: str


@dataclass(frozen=True)
class MemorySpec:
    """On-chip SRAM per operand (KiB; shared by the chip's arrays), the word the SRAM and DRAM
    move (bytes) and DRAM bandwidth (bytes/s)."""

    ifmap_sram_kb: int   # A, the streamed activations
    filter_sram_kb: int  # B, the weights
    ofmap_sram_kb: int   # C, outputs and partial sums
    word_bytes: int
    dram_bytes_per_s: float


@dataclass(frozen=True)
class EnergySpec:
    """Energy of one access at each level (pJ), the defaults from the seed's table; an SRAM's
    access energy is the global buffer's at ``global_buffer_kb``, scaled by (size /
    global_buffer_kb) ** ``sram_size_exponent``."""

    mac_pj: float
    register_pj: float
    pe_local_pj: float
    global_buffer_pj: float
    global_buffer_kb: float
    sram_size_exponent: float
    dram_pj: float


@dataclass(frozen=True)
class SystolicTarget(TargetConstants):
    """A chip of ``array.count`` systolic arrays fed from SRAM and DRAM."""

    name: str
    description: str
    space: str
    dtypes: tuple[str, ...]
    array: ArraySpec
    memory: MemorySpec
    energy: EnergySpec
    source: str = ""

    @property
    def dram_words_per_cycle(self) -> float:
        """DRAM bandwidth in words per array clock cycle (SCALE-Sim's unit)."""
        return self.memory.dram_bytes_per_s / self.array.clock_hz / self.memory.word_bytes

    def peak_ops(self) -> float:
        """Peak operations/s: two per MAC, every PE of every array each cycle."""
        a = self.array
        return 2.0 * a.rows * a.cols * a.count * a.clock_hz

    def compute_units(self) -> tuple[str, float]:
        a = self.array
        arrays = f"{a.count}x " if a.count > 1 else ""
        return f"{arrays}{a.rows}x{a.cols} PEs ({a.dataflow})", a.clock_hz

    def occupancy(self, values: Mapping[str, float]) -> list[tuple[str, float, float, str]]:
        """(resource, used, available, unit): each operand's SRAM (the config's size where it
        chose one)."""
        out = []
        for used, size, own, label in SRAM_USE:
            if used in values:
                kb = values.get(size) or getattr(self.memory, own)
                out.append((label, values[used], float(kb) * 1024, "B"))
        return out

    def roofline(self, input_type: str | None = None) -> tuple[float, float]:
        """(peak operations/s of the arrays, DRAM bytes/s)."""
        return self.peak_ops(), self.memory.dram_bytes_per_s


def systolic_target_from_dict(raw: Mapping[str, Any], source: str = "<dict>") -> SystolicTarget:
    """Validate a parsed systolic target table and build the :class:`SystolicTarget`."""
    target = SystolicTarget(**family_sections(SystolicTarget, raw, source,
                                              ("array", "memory", "energy")))
    if target.array.dataflow not in DATAFLOWS:
        raise TargetFileError(f"{source}: key 'array.dataflow': unknown dataflow "
                              f"{target.array.dataflow!r}; valid: {', '.join(DATAFLOWS)}")
    return target
