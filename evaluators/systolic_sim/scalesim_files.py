"""Readers for SCALE-Sim 3.0 users' files: a run config (``.cfg``) and a GEMM topology (``.csv``).

Both parse as SCALE-Sim 3.0 does (``scale_config.read_conf_file`` and
``topologies.load_arrays_gemm``), so a file is accepted here exactly when SCALE-Sim accepts it and
means the same; where SCALE-Sim would crash, assert or silently misbehave, we raise
:class:`~dse.core.errors.UsageError` naming the file and the field instead.

Config: SCALE-Sim 3.0 reads these unconditionally, so all are required (option names are case
insensitive, section names are not): ``[general] run_name``; ``[architecture_presets]``
ArrayHeight, ArrayWidth, IfmapSramSzkB, FilterSramSzkB, OfmapSramSzkB (integers), IfmapOffset,
FilterOffset, OfmapOffset, Dataflow, ReadRequestBuffer, WriteRequestBuffer; ``[layout]``
IfmapCustomLayout, IfmapSRAMBankBandwidth, IfmapSRAMBankNum, IfmapSRAMBankPort,
FilterCustomLayout, FilterSRAMBankBandwidth, FilterSRAMBankNum, FilterSRAMBankPort;
``[sparsity] SparsitySupport``; ``[run_presets]`` InterfaceBandwidth (CALC or USER) and
UseRamulatorTrace. ``[architecture_presets] Bandwidth`` (comma-separated integers, the first is
used) is read in USER mode only. MemoryBanks and ``[network_presets]`` are optional and unused.
We model SCALE-Sim's default memory system only: custom layouts, sparsity and Ramulator traces
set to true are refused.

Topology: the first line is a header; blank lines are skipped; every other line is
``name, M, N, K,`` (SCALE-Sim drops each line's last comma-separated field, so the trailing comma
is required; an optional ``N:M`` sparsity ratio may follow K). SCALE-Sim makes M x K its ifmap,
K x N its filter and M x N its ofmap, which is dse's C (M x N) = A (M x K) B (K x N): the row's
M, N, K are returned unchanged.
"""

from __future__ import annotations

import configparser
from pathlib import Path

from dse.core.errors import UsageError, read_text

from .fold_schedule import ArraySetup

_INT_KEYS = {
    "architecture_presets": ("ArrayHeight", "ArrayWidth", "IfmapSramSzkB", "FilterSramSzkB",
                             "OfmapSramSzkB", "IfmapOffset", "FilterOffset", "OfmapOffset",
                             "ReadRequestBuffer", "WriteRequestBuffer"),
    "layout": ("IfmapSRAMBankBandwidth", "IfmapSRAMBankNum", "IfmapSRAMBankPort",
               "FilterSRAMBankBandwidth", "FilterSRAMBankNum", "FilterSRAMBankPort"),
}
# Keys whose value must be > 0 for the simulation to mean anything (offsets may be 0).
_POSITIVE = {"ArrayHeight", "ArrayWidth", "IfmapSramSzkB", "FilterSramSzkB", "OfmapSramSzkB",
             "IfmapSRAMBankBandwidth", "IfmapSRAMBankNum", "FilterSRAMBankBandwidth",
             "FilterSRAMBankNum"}


class _Config:
    """A parsed config with lookups that fail as UsageErrors naming the file and key."""

    def __init__(self, path: Path):
        self.path = path
        # SCALE-Sim uses a default ConfigParser (case-insensitive options, % interpolation).
        self.parser = configparser.ConfigParser()
        try:
            self.parser.read_string(read_text(path, "SCALE-Sim config"), source=str(path))
        except configparser.Error as exc:
            raise UsageError(f"SCALE-Sim config {path}: not a valid config file "
                             f"({exc.message.splitlines()[0]})") from None

    def get(self, section: str, key: str) -> str:
        try:
            return self.parser.get(section, key)
        except configparser.NoSectionError:
            raise UsageError(f"SCALE-Sim config {self.path}: missing section [{section}] "
                             f"(SCALE-Sim 3.0 reads {section}.{key})") from None
        except configparser.NoOptionError:
            raise UsageError(f"SCALE-Sim config {self.path}: missing key {key} "
                             f"in [{section}]") from None
        except configparser.Error as exc:
            raise UsageError(f"SCALE-Sim config {self.path}: {section}.{key} cannot be read "
                             f"({exc.message.splitlines()[0]})") from None

    def integer(self, section: str, key: str, text: str | None = None) -> int:
        text = self.get(section, key) if text is None else text
        try:
            value = int(text.strip())       # SCALE-Sim: int(config.get(...))
        except ValueError:
            raise UsageError(f"SCALE-Sim config {self.path}: {section}.{key} must be an "
                             f"integer, got {text!r}") from None
        if key in _POSITIVE and value <= 0:
            raise UsageError(f"SCALE-Sim config {self.path}: {section}.{key} must be "
                             f"positive, got {value}")
        return value

    def boolean(self, section: str, key: str) -> bool:
        text = self.get(section, key)
        try:
            return self.parser.getboolean(section, key)
        except ValueError:
            raise UsageError(f"SCALE-Sim config {self.path}: {section}.{key} must be true or "
                             f"false, got {text!r}") from None

    def fail(self, message: str) -> UsageError:
        return UsageError(f"SCALE-Sim config {self.path}: {message}")


def read_scalesim_config(path: str | Path) -> tuple[str, ArraySetup]:
    """The run name and array setup a SCALE-Sim 3.0 ``.cfg`` describes (see the module doc for
    the keys). UsageError, naming the file and the field, when SCALE-Sim could not run it or it
    asks for something beyond SCALE-Sim's default memory system."""
    cfg = _Config(Path(path))
    name = cfg.get("general", "run_name")
    mode = cfg.get("run_presets", "InterfaceBandwidth")
    if mode not in ("CALC", "USER"):
        raise cfg.fail(f"run_presets.InterfaceBandwidth must be CALC or USER, got {mode!r}")
    # SCALE-Sim compares this one as a string: anything but "True" means off.
    if cfg.get("run_presets", "UseRamulatorTrace") == "True":
        raise cfg.fail("run_presets.UseRamulatorTrace = True is not supported "
                       "(Ramulator DRAM traces are not modelled)")
    ints = {key: cfg.integer(section, key)
            for section, keys in _INT_KEYS.items() for key in keys}
    for key in ("IfmapOffset", "FilterOffset", "OfmapOffset"):
        # A negative offset can give an address of -1, which SCALE-Sim takes for "no request".
        if ints[key] < 0:
            raise cfg.fail(f"architecture_presets.{key} must not be negative, got {ints[key]}")
    dataflow = cfg.get("architecture_presets", "Dataflow")
    if dataflow not in ("os", "ws", "is"):
        raise cfg.fail(f"architecture_presets.Dataflow must be os, ws or is, got {dataflow!r}")
    for key in ("IfmapCustomLayout", "FilterCustomLayout"):
        if cfg.boolean("layout", key):
            raise cfg.fail(f"layout.{key} = true is not supported (custom layouts are not "
                           "modelled)")
    if cfg.get("sparsity", "SparsitySupport").lower() == "true":
        raise cfg.fail("sparsity.SparsitySupport = true is not supported (sparsity is not "
                       "modelled)")
    user_bandwidth = None
    if mode == "USER":
        text = cfg.get("architecture_presets", "Bandwidth")
        values = [cfg.integer("architecture_presets", "Bandwidth", part)
                  for part in text.strip().split(",")]
        user_bandwidth = values[0]
        if user_bandwidth <= 0:
            raise cfg.fail(f"architecture_presets.Bandwidth must be positive, got {text!r}")
        for prefix in ("Ifmap", "Filter"):
            # SCALE-Sim's USER read buffer asserts the banks split the bandwidth evenly.
            bandwidth = ints[f"{prefix}SRAMBankBandwidth"]
            banks = ints[f"{prefix}SRAMBankNum"]
            if bandwidth % banks:
                raise cfg.fail(f"layout.{prefix}SRAMBankBandwidth ({bandwidth}) must be a "
                               f"multiple of layout.{prefix}SRAMBankNum ({banks})")
    try:
        setup = ArraySetup(
            rows=ints["ArrayHeight"], cols=ints["ArrayWidth"], dataflow=dataflow,
            ifmap_sram_kb=ints["IfmapSramSzkB"], filter_sram_kb=ints["FilterSramSzkB"],
            ofmap_sram_kb=ints["OfmapSramSzkB"], bandwidth=mode, user_bandwidth=user_bandwidth,
            ifmap_read_bandwidth=ints["IfmapSRAMBankBandwidth"],
            filter_read_bandwidth=ints["FilterSRAMBankBandwidth"])
    except UsageError as exc:
        raise cfg.fail(str(exc)) from None
    return name, setup


def read_gemm_topology(path: str | Path) -> list[tuple[str, int, int, int]]:
    """The layers of a SCALE-Sim GEMM topology CSV as ``(name, m, n, k)`` in dse's convention
    (C m x n = A m x k times B k x n), which is the CSV's own M, N, K (see the module doc).
    UsageError naming the file, line and field for a line SCALE-Sim could not use."""
    path = Path(path)
    text = read_text(path, "GEMM topology")
    layers: list[tuple[str, int, int, int]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        row = raw.strip()
        if number == 1 or not row:
            continue                    # header, blank lines
        where = f"GEMM topology {path} line {number}"
        fields = row.split(",")[:-1]   # SCALE-Sim drops the last field (after the final comma)
        if len(fields) < 4:
            raise UsageError(f"{where}: needs 'name, M, N, K,' (SCALE-Sim drops the last field "
                             f"of a line, so end it with a comma), got {row!r}")
        name = fields[0].strip()
        dims = []
        for field, value in zip(("M", "N", "K"), fields[1:4], strict=True):
            try:
                dim = int(value.strip())
            except ValueError:
                raise UsageError(f"{where}: {field} must be an integer, got "
                                 f"{value.strip()!r}") from None
            if dim <= 0:
                raise UsageError(f"{where}: {field} must be positive, got {dim}")
            dims.append(dim)
        if len(fields) > 4:
            ratio = fields[4].strip().split(":")
            if len(ratio) != 2 or not all(part.strip().isdigit() for part in ratio):
                raise UsageError(f"{where}: sparsity ratio must be N:M, got "
                                 f"{fields[4].strip()!r}")
        layers.append((name, dims[0], dims[1], dims[2]))
    if not layers:
        raise UsageError(f"GEMM topology {path}: no layers (a header line, then "
                         f"'name, M, N, K,' lines)")
    return layers
