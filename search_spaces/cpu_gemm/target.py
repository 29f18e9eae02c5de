"""The host CPU as a target: cache sizes (read from the system when the file says 0) and the
coefficients of the CPU GEMM model (fitted to measurements by ``dse calibrate``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dse.core.target import ZERO_OK, TargetConstants, family_sections

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class CacheSpec:
    """Data cache sizes of one core; 0 means "read it from the system"."""

    l1_bytes: int = field(metadata=ZERO_OK)
    l2_bytes: int = field(metadata=ZERO_OK)
    l3_bytes: int = field(metadata=ZERO_OK)


@dataclass(frozen=True)
class CpuModel:
    """Coefficients of the CPU GEMM model (see ``evaluators/analytical/cpu_gemm.py``)."""

    flops_per_s: float  # one BLAS call on cache-resident blocks, one thread
    call_s: float  # fixed cost of one block step (interpreter + BLAS dispatch)
    copy_bytes_per_s: float  # packing a block into a contiguous buffer
    c_update_bytes_per_s: float  # adding a step's product into C (4 passes over the C block)
    row_s: float  # per row of a C block touched in a step (a new cache line and page per row)
    l1_bytes_per_s: float  # operand traffic of a block step whose footprint fits L1
    l2_bytes_per_s: float
    l3_bytes_per_s: float
    dram_bytes_per_s: float
    strided_penalty: float  # traffic multiplier for a block read in place (not packed)


@dataclass(frozen=True)
class CpuTarget(TargetConstants):
    """The host CPU: its cache sizes and the CPU GEMM model's coefficients."""

    name: str
    description: str
    space: str
    dtypes: tuple[str, ...]
    caches: CacheSpec
    model: CpuModel
    source: str = ""

    def compute_units(self) -> tuple[str, float | None]:
        """The host's CPU (one core measures; its clock is not a constant of the file)."""
        return "host", None


def system_caches() -> CacheSpec:
    """L1 data, L2 and L3 sizes of CPU 0 from sysfs (0 where the system does not say)."""
    sizes = {1: 0, 2: 0, 3: 0}
    for index in sorted(SYSFS_CACHE.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or level not in sizes:
            continue
        scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
        sizes[level] = int(text.rstrip("KMG")) * scale
    return CacheSpec(sizes[1], sizes[2], sizes[3])


def cpu_target_from_dict(raw: Mapping[str, Any], source: str = "<dict>") -> CpuTarget:
    """Validate a parsed CPU target table and build the :class:`CpuTarget`; a cache size of 0 is
    read from the system (else a common default)."""
    values = family_sections(CpuTarget, raw, source, ("caches", "model"))
    declared = values.pop("caches")
    found = system_caches()
    caches = CacheSpec(*(getattr(declared, f) or getattr(found, f) or default
                         for f, default in (("l1_bytes", 32768), ("l2_bytes", 1 << 20),
                                            ("l3_bytes", 8 << 20))))
    return CpuTarget(caches=caches, **values)
