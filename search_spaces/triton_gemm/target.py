"""NVIDIA GPU targets for Triton GEMMs (``targets/h100.toml``, ``h200.toml``), and reading the
same constants from the device when one is present."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dse.core.target import TargetConstants, family_sections


@dataclass(frozen=True)
class Device:
    """What the GPU provides: SMs, clock, shared memory, register and residency limits, L2 size, HBM
    bandwidth and the architecture Triton compiles for."""

    sms: int
    clock_hz: float
    smem_per_block_bytes: int
    smem_per_sm_bytes: int
    registers_per_sm: int
    max_registers_per_thread: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    l2_bytes: int
    hbm_bytes_per_s: float
    compute_capability: int = 90  # what Triton compiles for (sm_90a on Hopper)


@dataclass(frozen=True)
class Tensor:
    """Dense tensor-core peaks in FLOP/s, by input type."""

    bf16: float
    fp16: float
    fp32: float


@dataclass(frozen=True)
class GpuModel:
    """The GPU model's assumptions: L2 bandwidth, the shares of HBM and tensor-core peaks a GEMM
    reaches, launch and per-K-step costs, and the accumulator register cap."""

    l2_bytes_per_s: float
    hbm_efficiency: float
    launch_s: float
    mma_efficiency: float
    step_overhead_cycles: float
    accumulator_registers_max: int


@dataclass(frozen=True)
class GpuTarget(TargetConstants):
    """An NVIDIA GPU for Triton GEMMs: its device limits, tensor-core peaks and the model's
    assumptions."""

    name: str
    description: str
    space: str
    dtypes: tuple[str, ...]
    device: Device
    tensor: Tensor
    model: GpuModel
    source: str = ""

    def peak_flops(self, input_type: str) -> float:
        return float(getattr(self.tensor, input_type))

    def compute_units(self) -> tuple[str, float]:
        return f"{self.device.sms} SMs", self.device.clock_hz

    def occupancy(self, values: Mapping[str, float]) -> list[tuple[str, float, float, str]]:
        """(resource, used, available, unit): shared memory and registers of a program,
        programs resident on an SM."""
        d, out = self.device, []
        if "smem_bytes" in values:
            out.append(("shared memory per program", values["smem_bytes"],
                        float(d.smem_per_block_bytes), "B"))
        if "registers_per_thread" in values:
            out.append(("registers per thread", values["registers_per_thread"],
                        float(d.max_registers_per_thread), "registers"))
        if "resident_per_sm" in values and "num_warps" in values:
            out.append(("warps resident per SM", values["resident_per_sm"] * values["num_warps"],
                        d.max_threads_per_sm / 32, "warps"))
        return out

    def roofline(self, input_type: str | None = None) -> tuple[float, float]:
        """(tensor-core peak FLOP/s for the input type, HBM bytes/s)."""
        return self.peak_flops(input_type or "bf16"), self.device.hbm_bytes_per_s

    def with_device(self, **values: Any) -> GpuTarget:
        return dataclasses.replace(self, device=dataclasses.replace(self.device, **values))


def gpu_target_from_dict(raw: Mapping[str, Any], source: str = "<dict>") -> GpuTarget:
    """Validate a parsed GPU target table and build the :class:`GpuTarget`."""
    return GpuTarget(**family_sections(GpuTarget, raw, source, ("device", "tensor", "model")))


def device_properties(index: int = 0) -> dict[str, Any] | None:
    """What the GPU at ``index`` reports through PyTorch (None without PyTorch or a GPU)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(index)
    found = {"name": props.name, "sms": props.multi_processor_count,
             "compute_capability": 10 * props.major + props.minor,
             "l2_bytes": getattr(props, "L2_cache_size", None),
             "registers_per_sm": getattr(props, "regs_per_multiprocessor", None),
             "max_threads_per_sm": getattr(props, "max_threads_per_multi_processor", None),
             "smem_per_block_bytes": getattr(props, "shared_memory_per_block_optin", None),
             "smem_per_sm_bytes": getattr(props, "shared_memory_per_multiprocessor", None)}
    return {k: v for k, v in found.items() if v}


def from_device(target: GpuTarget, properties: Mapping[str, Any] | None) -> GpuTarget:
    """``target`` with the constants the device reports (the rest from the file)."""
    if not properties:
        return target
    fields = {f.name for f in dataclasses.fields(Device)}
    return target.with_device(**{k: v for k, v in properties.items() if k in fields})
