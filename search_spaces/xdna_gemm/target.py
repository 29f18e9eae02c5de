"""The XDNA / XDNA2 target: the array, its memories, DMA, kernel costs and DRAM curve, read
from ``targets/xdna*.toml`` into frozen dataclasses.

A user copies a target file, edits numbers (more L1, faster DRAM) and passes its path wherever a
target name is accepted. Every key is required and checked; a malformed file raises
:class:`TargetFileError` naming the file, the key and the problem.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dse.core import ZERO_OK, TargetConstants, build_section, check_dtypes, check_keys, scalar
from dse.core.errors import TargetFileError


@dataclass(frozen=True)
class ArraySpec:
    """Compute array: rows x cols compute tiles usable by a design, one MemTile/ShimTile per col."""

    rows: int
    cols: int
    physical_cols: int
    clock_hz: float


@dataclass(frozen=True)
class MemorySpec:
    """On-chip memory per tile (L1 in each compute tile, L2 in each MemTile)."""

    l1_bytes: int
    l1_stack_bytes: int = field(metadata=ZERO_OK)
    l1_alignment_bytes: int
    l2_bytes: int
    # XDNA2 lets a buffer spill into the neighbouring MemTile; capacity is then checked over the
    # group of MemTiles that share one row-broadcast operand tile.
    l2_neighbour_sharing: bool


@dataclass(frozen=True)
class DmaSpec:
    """DMA channels per tile kind, stream width and shim buffer descriptors."""

    channel_bytes_per_cycle: float
    compute_s2mm: int
    compute_mm2s: int
    memtile_s2mm: int
    memtile_mm2s: int
    shim_s2mm: int
    shim_mm2s: int
    shim_bds: int
    bds_per_operand: int


@dataclass(frozen=True)
class DmaLimits:
    """Buffer-descriptor field limits (address generation) per tile kind."""

    address_granularity_bytes: int
    compute_wrap_max: int
    memtile_wrap_max: int
    shim_wrap_max: int
    compute_step_bits: int
    memtile_step_bits: int
    shim_step_bits: int


@dataclass(frozen=True)
class InputSpec:
    """Single-core kernel facts for one input element type.

    (r, s, t) is the micro-tile of one mmul, (expand_r, expand_t) the register blocking of the
    kernel loop (m_ct must be a multiple of r*expand_r, n_ct of t*expand_t).
    """

    r: int
    s: int
    t: int
    expand_r: int
    expand_t: int
    peak_macs_per_cycle: float
    mac_efficiency: float
    convert_to_bfp16: bool


@dataclass(frozen=True)
class KernelCost:
    """Cycle costs of the L1 kernel beyond its MACs (calibrated; see the README)."""

    out_cycles_per_byte: float = field(metadata=ZERO_OK)
    out_cycles_per_element: float = field(metadata=ZERO_OK)
    call_cycles: float = field(metadata=ZERO_OK)
    convert_elements_per_cycle: float
    zero_bytes_per_cycle: float


@dataclass(frozen=True)
class DramSpec:
    """Effective DRAM bandwidth seen by the NPU as a function of contiguous run length.

    A stream whose contiguous runs are ``L`` bytes gets
    ``peak * L / (L**p + run_knee_bytes**p) ** (1/p)`` with ``p = run_knee_sharpness``;
    writes additionally get ``write_efficiency``. Streams of adjacent columns that read
    neighbouring spans of the same rows (a row-major B) merge into runs ``read_merge`` times as
    long per extra column; their writes (the C join) ``write_merge`` times. The two differ
    because the memory controller holds writes back and combines them, while reads are served
    as they come, and only merge when the SoC path delivers them together (chip-specific).
    Runs of one stream that lie less than ``page_bytes`` apart share a page opening.
    """

    peak_bytes_per_s: float
    run_knee_bytes: float = field(metadata=ZERO_OK)
    run_knee_sharpness: float
    write_efficiency: float
    read_merge: float = field(metadata=ZERO_OK)
    write_merge: float = field(metadata=ZERO_OK)
    page_bytes: float
    microbenchmark_bytes_per_s: float


@dataclass(frozen=True)
class Overheads:
    """Fixed costs outside the steady state."""

    dispatch_s: float = field(metadata=ZERO_OK)
    bd_reconfig_s: float = field(metadata=ZERO_OK)


@dataclass(frozen=True)
class SimulatorSpec:
    """Constants only the event simulator uses (calibrated for it, see the README).

    The simulator shares DRAM between streams explicitly, so its DRAM curve is its own: the
    analytical model's effective bandwidth also absorbs the stalls the simulator plays out.
    """

    dma_setup_cycles: float = field(metadata=ZERO_OK)  # start of each shim BD task
    dram_peak_bytes_per_s: float
    dram_run_knee_bytes: float
    command_latency_s: float = field(metadata=ZERO_OK)  # BD reconfiguration by the processor
    write_priority: float  # a write stream's share of DRAM time relative to a read stream


@dataclass(frozen=True)
class XdnaTarget(TargetConstants):
    """Everything the XDNA models know about one array."""

    name: str
    description: str
    space: str  # registered search space (and model) family, e.g. "xdna_gemm"
    array: ArraySpec
    memory: MemorySpec
    dma: DmaSpec
    dma_limits: DmaLimits
    kernel: KernelCost
    dram: DramSpec
    overheads: Overheads
    simulator: SimulatorSpec
    dtypes: tuple[str, ...]
    inputs: Mapping[str, InputSpec]
    source: str = ""

    def input_spec(self, input_type: str) -> InputSpec:
        return self.inputs[input_type]

    def compute_units(self) -> tuple[str, float]:
        """What computes (for listings) and its clock in Hz."""
        return f"{self.array.rows}x{self.array.cols}", self.array.clock_hz

    def occupancy(self, values: Mapping[str, float]) -> list[tuple[str, float, float, str]]:
        """(resource, used, available, unit) of a config's on-chip memory use."""
        memory, out = self.memory, []
        if "l1_bytes" in values:
            out.append(("L1 per core (buffers, without the stack)", values["l1_bytes"],
                        float(memory.l1_bytes - memory.l1_stack_bytes), "B"))
        if "l2_bytes" in values:
            out.append((f"L2 over the {self.array.cols} MemTiles", values["l2_bytes"],
                        float(memory.l2_bytes * self.array.cols), "B"))
        return out

    def roofline(self, input_type: str | None = None) -> tuple[float, float]:
        """(peak operations/s of the whole array for an input type, DRAM bytes/s): the
        roofline's ceilings."""
        spec = self.inputs.get(input_type or "", next(iter(self.inputs.values())))
        cores = self.array.rows * self.array.cols
        return 2.0 * spec.peak_macs_per_cycle * cores * self.array.clock_hz, \
            self.dram.peak_bytes_per_s


def xdna_target_from_dict(raw: Mapping[str, Any], source: str = "<dict>") -> XdnaTarget:
    """Validate a parsed XDNA target table and build the :class:`XdnaTarget`."""
    check_keys(raw, {f.name for f in dataclasses.fields(XdnaTarget)} - {"source"}, source, "")
    dtypes = check_dtypes(raw["dtypes"], source)
    inputs_raw = raw["inputs"]
    if not isinstance(inputs_raw, Mapping):
        raise TargetFileError(f"{source}: key 'inputs': expected a table per input type")
    inputs = {
        name: build_section(InputSpec, table, source, f"inputs.{name}")
        for name, table in inputs_raw.items()
    }
    for pair in dtypes:
        if pair.split("-")[0] not in inputs:
            raise TargetFileError(
                f"{source}: key 'inputs.{pair.split('-')[0]}': missing, needed by dtype {pair!r}"
            )
    values: dict[str, Any] = {"dtypes": dtypes, "inputs": inputs, "source": source}
    for f in dataclasses.fields(XdnaTarget):
        if f.name in values:
            continue
        hint = typing.get_type_hints(XdnaTarget)[f.name]
        if dataclasses.is_dataclass(hint):
            values[f.name] = build_section(hint, raw[f.name], source, f.name)
        else:
            values[f.name] = scalar(hint, raw[f.name], source, f.name, {})
    target = XdnaTarget(**values)
    _check_consistency(target, source)
    return target


def _check_consistency(target: XdnaTarget, source: str) -> None:
    if target.array.cols > target.array.physical_cols:
        raise TargetFileError(
            f"{source}: key 'array.cols': {target.array.cols} usable columns exceed "
            f"array.physical_cols = {target.array.physical_cols}"
        )
    if target.memory.l1_stack_bytes >= target.memory.l1_bytes:
        raise TargetFileError(f"{source}: key 'memory.l1_stack_bytes': must be below l1_bytes")
    for name, spec in target.inputs.items():
        if spec.mac_efficiency > 1:
            raise TargetFileError(
                f"{source}: key 'inputs.{name}.mac_efficiency': must be in (0, 1], "
                f"got {spec.mac_efficiency}"
            )
    if target.dram.write_efficiency > 1:
        raise TargetFileError(f"{source}: key 'dram.write_efficiency': must be in (0, 1]")
