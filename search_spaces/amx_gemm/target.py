"""The host CPU's AMX engine as a target (``targets/cpu-amx.toml``): cores, cache sizes (0 in
the file: read from sysfs), the tile engine's rate and the tile-load bandwidth of each memory
level, and the model's calibratable costs. ``dse amx probe`` writes one measured here."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dse.core.target import ZERO_OK, TargetConstants, family_sections
from search_spaces.cpu_gemm.target import CacheSpec, system_caches

# ops (2 x MACs) of one tile multiply: 16x16 outputs, each a 64-byte row of K
OPS_PER_TDP = {"int8": 2 * 16 * 16 * 64, "bf16": 2 * 16 * 16 * 32}


@dataclass(frozen=True)
class Engine:
    """The matrix engines of one core: cycles between tile multiplies, the vector units' int8
    MACs a cycle, and the clock; ``cores`` 0 means every core this process may use."""

    cores: int = field(metadata=ZERO_OK)
    clock_hz: float
    tdp_cycles: float
    vector_macs_per_cycle: float  # int8 MACs of the AVX-512 VNNI units a cycle (bf16: half)


@dataclass(frozen=True)
class Bandwidth:
    """Bytes a core's tile loads get per second from each level (DRAM's and L3's shared by every
    core that streams)."""

    l1_bytes_per_s: float
    l2_bytes_per_s: float
    l3_bytes_per_s: float
    dram_bytes_per_s: float


@dataclass(frozen=True)
class AmxModel:
    """Costs of the AMX GEMM model beyond the engine and the caches (see
    ``evaluators/analytical/amx_gemm.py``)."""

    pack_bytes_per_s: float  # re-laying out A or B, per core
    load_latency_cycles: float  # a streamed tile load one buffer cannot hide
    call_cycles: float  # one micro-kernel call: C tiles in, the loop set up, C tiles out
    c_latency_factor: float  # C tiles read and written without their lines prefetched
    prefetch_line_cycles: float  # issuing one software prefetch
    strided_a_factor: float  # A's tiles read in place (a row per line and page) vs packed
    # a contiguous run of B's row read from beyond L2 this long gets 1/sqrt(2) of its level's
    # bandwidth: each run starts anew (the hardware prefetchers stop at it); 0 leaves it out
    run_knee_bytes: float = 0.0


@dataclass(frozen=True)
class AmxTarget(TargetConstants):
    """The host CPU's AMX engine: cores, caches, tile rate, load bandwidths, model costs."""

    name: str
    description: str
    space: str
    dtypes: tuple[str, ...]
    engine: Engine
    caches: CacheSpec
    bandwidth: Bandwidth
    model: AmxModel
    source: str = ""

    def compute_units(self) -> tuple[str, float | None]:
        return "cores", float(self.engine.cores)

    def peak_ops(self, input_type: str, cores: int | None = None) -> float:
        """Tile-engine ops per second of ``cores`` cores (all by default)."""
        per_core = OPS_PER_TDP[input_type] * self.engine.clock_hz / self.engine.tdp_cycles
        return per_core * (cores or self.engine.cores)

    def roofline(self, input_type: str | None = None) -> tuple[float, float] | None:
        """Peak TOPS and DRAM bytes per second of the whole CPU."""
        peak = self.peak_ops(input_type or "int8") / 1e12
        return peak, self.bandwidth.dram_bytes_per_s * self.engine.cores


def system_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def amx_target_from_dict(raw: Mapping[str, Any], source: str = "<dict>") -> AmxTarget:
    """Validate a parsed AMX target table and build the :class:`AmxTarget`; cores and cache
    sizes of 0 are read from the system."""
    values = family_sections(AmxTarget, raw, source, ("engine", "caches", "bandwidth", "model"))
    engine, declared = values.pop("engine"), values.pop("caches")
    found = system_caches()
    caches = CacheSpec(*(getattr(declared, f) or getattr(found, f) or default
                         for f, default in (("l1_bytes", 48 << 10), ("l2_bytes", 2 << 20),
                                            ("l3_bytes", 32 << 20))))
    engine = dataclasses.replace(engine, cores=engine.cores or system_cores())
    return AmxTarget(engine=engine, caches=caches, **values)
