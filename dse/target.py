"""Hardware targets as data: one TOML file per target, loaded into frozen dataclasses.

A user copies a target file, edits numbers (more L1, faster DRAM) and passes its path wherever a
target name is accepted. Every key is required and checked; a malformed file raises
:class:`TargetFileError` naming the file, the key and the problem.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dse.dtypes import DTYPE_PAIRS
from dse.errors import TargetFileError, UsageError, read_text

TARGETS_DIR = Path(__file__).parent / "targets"

_ZERO_OK = {"min": 0.0}  # field metadata: value may be zero (default: strictly positive)


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
    l1_stack_bytes: int = field(metadata=_ZERO_OK)
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

    out_cycles_per_byte: float = field(metadata=_ZERO_OK)
    out_cycles_per_element: float = field(metadata=_ZERO_OK)
    call_cycles: float = field(metadata=_ZERO_OK)
    convert_elements_per_cycle: float
    zero_bytes_per_cycle: float


@dataclass(frozen=True)
class DramSpec:
    """Effective DRAM bandwidth seen by the NPU as a function of contiguous run length.

    A stream whose contiguous runs are ``L`` bytes gets
    ``peak * L / (L**p + run_knee_bytes**p) ** (1/p)`` with ``p = run_knee_sharpness``;
    writes additionally get ``write_efficiency``. Streams of adjacent columns that read or write
    neighbouring spans of the same rows merge into runs ``adjacent_merge`` times as long per
    extra column.
    """

    peak_bytes_per_s: float
    run_knee_bytes: float = field(metadata=_ZERO_OK)
    run_knee_sharpness: float
    write_efficiency: float
    adjacent_merge: float = field(metadata=_ZERO_OK)
    microbenchmark_bytes_per_s: float


@dataclass(frozen=True)
class Overheads:
    """Fixed costs outside the steady state."""

    dispatch_s: float = field(metadata=_ZERO_OK)
    bd_reconfig_s: float = field(metadata=_ZERO_OK)


@dataclass(frozen=True)
class SimulatorSpec:
    """Constants only the event simulator uses (calibrated for it, see the README).

    The simulator shares DRAM between streams explicitly, so its DRAM curve is its own: the
    analytical model's effective bandwidth also absorbs the stalls the simulator plays out.
    """

    dma_setup_cycles: float = field(metadata=_ZERO_OK)  # start of each shim BD task
    dram_peak_bytes_per_s: float
    dram_run_knee_bytes: float
    command_latency_s: float = field(metadata=_ZERO_OK)  # BD reconfiguration by the processor
    write_priority: float  # a write stream's share of DRAM time relative to a read stream


@dataclass(frozen=True)
class Target:
    """Everything the models know about one accelerator."""

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

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("source")
        data["inputs"] = {k: dataclasses.asdict(v) for k, v in self.inputs.items()}
        data["dtypes"] = list(self.dtypes)
        return data

    def digest(self) -> str:
        """Content hash of every constant (not of the file's path or layout)."""
        return digest_of(self.to_dict())

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


def digest_of(constants: Mapping[str, Any]) -> str:
    """A target's identity: the hash of its constants as canonical JSON."""
    canonical = json.dumps(constants, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class FamilyTarget:
    """What every dataclass target of a family with its own schema shares: its constants as a
    dict (without the file's path) and their digest."""

    dtypes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)  # type: ignore[call-overload]
        data.pop("source")
        data["dtypes"] = list(self.dtypes)
        return data

    def digest(self) -> str:
        return digest_of(self.to_dict())


def family_sections(cls: type, raw: Mapping[str, Any], source: str,
                    sections: tuple[str, ...]) -> dict[str, Any]:
    """Check a family target file's keys and dtypes; build its ``sections`` (tables of
    dataclasses) and return them with name, description, space, dtypes and source."""
    _check_keys(raw, {f.name for f in dataclasses.fields(cls)} - {"source"}, source, "")
    dtypes = raw["dtypes"]
    if not isinstance(dtypes, list) or not dtypes or any(d not in DTYPE_PAIRS for d in dtypes):
        raise TargetFileError(f"{source}: key 'dtypes': expected a list of dtype pairs from "
                              f"{', '.join(DTYPE_PAIRS)}")
    hints = typing.get_type_hints(cls)
    return {"name": str(raw["name"]), "description": str(raw["description"]),
            "space": str(raw["space"]), "dtypes": tuple(dtypes), "source": source,
            **{name: _build(hints[name], raw[name], source, name) for name in sections}}


def available_targets() -> list[str]:
    """Names of the targets shipped with dse."""
    return sorted(p.stem for p in TARGETS_DIR.glob("*.toml"))


def load_target(name_or_path: str | Path) -> Any:
    """Load a shipped target by name (``xdna``) or any target file by path.

    Raises:
        UsageError: the name is neither a shipped target nor an existing file.
        TargetFileError: the file is not valid TOML or a key is missing, unknown or wrong.
    """
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith(".toml") or path.is_file()):
        path = TARGETS_DIR / f"{text}.toml"
        if not path.is_file():
            raise UsageError(
                f"unknown target {text!r}; valid: {', '.join(available_targets())} "
                "or the path of a target .toml file"
            )
    if not path.is_file():
        raise UsageError(f"target file {text!r} does not exist")
    try:
        raw = tomllib.loads(read_text(path, "target file"))
    except tomllib.TOMLDecodeError as exc:
        raise TargetFileError(f"{path}: not valid TOML: {exc}") from exc
    from dse.registry import target_schema

    loader = target_schema(str(raw.get("space", "")))  # a family with a schema of its own
    return (loader or target_from_dict)(raw, str(path))


def target_from_dict(raw: Mapping[str, Any], source: str = "<dict>") -> Target:
    """Validate a parsed target table and build the :class:`Target`."""
    _check_keys(raw, {f.name for f in dataclasses.fields(Target)} - {"source"}, source, "")
    dtypes = raw["dtypes"]
    if not isinstance(dtypes, list) or not dtypes:
        raise TargetFileError(f"{source}: key 'dtypes': expected a non-empty list of dtype pairs")
    for pair in dtypes:
        if pair not in DTYPE_PAIRS:
            raise TargetFileError(
                f"{source}: key 'dtypes': unknown pair {pair!r}; valid: {', '.join(DTYPE_PAIRS)}"
            )
    inputs_raw = raw["inputs"]
    if not isinstance(inputs_raw, Mapping):
        raise TargetFileError(f"{source}: key 'inputs': expected a table per input type")
    inputs = {
        name: _build(InputSpec, table, source, f"inputs.{name}")
        for name, table in inputs_raw.items()
    }
    for pair in dtypes:
        if pair.split("-")[0] not in inputs:
            raise TargetFileError(
                f"{source}: key 'inputs.{pair.split('-')[0]}': missing, needed by dtype {pair!r}"
            )
    values: dict[str, Any] = {"dtypes": tuple(dtypes), "inputs": inputs, "source": source}
    for f in dataclasses.fields(Target):
        if f.name in values:
            continue
        hint = typing.get_type_hints(Target)[f.name]
        if dataclasses.is_dataclass(hint):
            values[f.name] = _build(hint, raw[f.name], source, f.name)
        else:
            values[f.name] = _scalar(hint, raw[f.name], source, f.name, {})
    target = Target(**values)
    _check_consistency(target, source)
    return target


def _check_keys(table: Any, allowed: set[str], source: str, prefix: str) -> None:
    where = f"table '{prefix}'" if prefix else "the top level"
    if not isinstance(table, Mapping):
        raise TargetFileError(f"{source}: key '{prefix}': expected a table")
    for key in table:
        if key not in allowed:
            raise TargetFileError(
                f"{source}: unknown key '{_join(prefix, key)}' in {where}; "
                f"valid: {', '.join(sorted(allowed))}"
            )
    for key in sorted(allowed):
        if key not in table:
            raise TargetFileError(f"{source}: missing key '{_join(prefix, key)}'")


def _build(cls: type, table: Any, source: str, prefix: str) -> Any:
    fields = dataclasses.fields(cls)
    _check_keys(table, {f.name for f in fields}, source, prefix)
    hints = typing.get_type_hints(cls)
    return cls(**{
        f.name: _scalar(hints[f.name], table[f.name], source, _join(prefix, f.name), f.metadata)
        for f in fields
    })


def _scalar(kind: Any, value: Any, source: str, key: str, meta: Mapping[str, Any]) -> Any:
    def fail(expected: str) -> TargetFileError:
        return TargetFileError(f"{source}: key '{key}': expected {expected}, got {value!r}")

    if kind is bool:
        if not isinstance(value, bool):
            raise fail("true or false")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise fail("a string")
        return value
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise fail("a finite number")
        if kind is int and not float(value).is_integer():
            raise fail("an integer")
        minimum = meta.get("min")
        if minimum is None and value <= 0:
            raise fail("a positive number")
        if minimum is not None and value < minimum:
            raise fail(f"a number >= {minimum}")
        return kind(value)
    raise TypeError(f"unsupported field type {kind!r} for {key}")  # programming error


def _check_consistency(target: Target, source: str) -> None:
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


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
