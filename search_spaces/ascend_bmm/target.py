"""The Ascend target: chip constants and bandwidth rules of thumb (``targets/ascend-*.toml``)
and the quantities the branch rules derive from them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dse.core.target import TargetConstants, family_sections

FP32_BYTES = 4  # L0C accumulates in FP32; StreamK partial sums are FP32


@dataclass(frozen=True)
class Cores:
    """How many Cube (matrix) and vector cores, and their clock."""

    cube: int
    vector: int
    clock_hz: float


@dataclass(frozen=True)
class Compute:
    """The Cube's 16-bit peak and sustained FLOP/s, and a vector core's FP32 operations a cycle."""

    cube_peak_flops: float
    cube_sustained_flops: float
    vector_fp32_per_cycle: float


@dataclass(frozen=True)
class Memory:
    """Buffer sizes in bytes: a Cube core's L1 and L0A/L0B/L0C, the shared L2, a vector core's
    Unified Buffer."""

    l1_bytes: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    l2_bytes: int
    ub_bytes: int


@dataclass(frozen=True)
class Bandwidth:
    """L2 and GM bandwidths (GM as StreamK's workspace too) and a core's L1 -> L0 bytes a cycle."""

    l2_bytes_per_s: float
    gm_bytes_per_s: float
    gm_workspace_bytes_per_s: float
    l1_to_l0_bytes_per_cycle: float


@dataclass(frozen=True)
class Rules:
    """The design's bandwidth-utilisation rules of thumb (movers, bytes a core and a transfer,
    contiguous runs), the tile alignment and the transpose-conflict limit."""

    min_cores: int
    min_bytes_per_core: int
    min_tile_bytes: int
    d_value_min_bytes: int
    d_value_good_bytes: int
    d_value_max_bytes: int
    align: int
    transpose_conflict_max: int


@dataclass(frozen=True)
class Overheads:
    """Fixed costs: one GM -> L1 DMA command."""

    dma_command_s: float


@dataclass(frozen=True)
class AscendTarget(TargetConstants):
    """An Ascend NPU as the batched-GEMM tiling design sees it."""

    name: str
    description: str
    space: str
    dtypes: tuple[str, ...]
    cores: Cores
    compute: Compute
    memory: Memory
    bandwidth: Bandwidth
    rules: Rules
    overheads: Overheads
    source: str = ""

    def compute_units(self) -> tuple[str, float]:
        """What computes (for listings) and its clock in Hz."""
        return f"{self.cores.cube} cores", self.cores.clock_hz

    def occupancy(self, values: Mapping[str, float]) -> list[tuple[str, float, float, str]]:
        """(resource, used, available, unit) of a config's L1 and L0C use a core."""
        return [(f"{name} per core", values[key], float(capacity), "B")
                for name, key, capacity in (("L1", "l1_bytes", self.memory.l1_bytes),
                                            ("L0C", "l0c_bytes", self.memory.l0c_bytes))
                if key in values]

    def roofline(self, input_type: str | None = None) -> tuple[float, float]:
        """(Cube 16-bit peak FLOP/s, GM bytes/s): the roofline's ceilings."""
        return self.compute.cube_peak_flops, self.bandwidth.gm_bytes_per_s

    # --- derived quantities, named as in the design note -----------------------------------
    @property
    def q16(self) -> float:
        """One Cube core's 16-bit peak (FLOP/s)."""
        return self.compute.cube_peak_flops / self.cores.cube

    @property
    def q_aiv(self) -> float:
        """All vector cores' FP32 summation rate (elements/s)."""
        return self.cores.vector * self.compute.vector_fp32_per_cycle * self.cores.clock_hz

    def r16(self, element_bytes: int = 2) -> float:
        """Balance intensity: Cube peak over GM bandwidth in elements (FLOP per element)."""
        return self.compute.cube_peak_flops / (self.bandwidth.gm_bytes_per_s / element_bytes)

    def theta_c(self, l2_bytes_per_s: float | None = None) -> float:
        """StreamK's compute-bound K threshold unit: Q16/2 * (8 B / W_L2 + 1 / Q_AIV)."""
        bw = l2_bytes_per_s or self.bandwidth.l2_bytes_per_s
        return self.q16 / 2 * (2 * FP32_BYTES / bw + 1 / self.q_aiv)

    @property
    def swizzle_window(self) -> int:
        """W: the largest divisor of C not above sqrt(C) (the squarest window of one wave)."""
        c = self.cores.cube
        return max(d for d in range(1, math.isqrt(c) + 1) if c % d == 0)


def ascend_target_from_dict(raw: Mapping[str, Any], source: str = "<dict>") -> AscendTarget:
    """Validate a parsed Ascend target table and build the :class:`AscendTarget`."""
    return AscendTarget(**family_sections(AscendTarget, raw, source, (
        "cores", "compute", "memory", "bandwidth", "rules", "overheads")))
