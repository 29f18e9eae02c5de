"""The parameters and rules of a GEMM on a systolic array, each rule with its reason, and the
budgets a co-design study may state (``space.constraints: ["pes <= 4096"]``).

A config is a mapping (dataflow, SRAM tile sizes, loop order, buffer counts) and, when a study
frees them, the hardware it runs on (array rows and columns, SRAM per operand, DRAM bandwidth).
A hardware parameter of 0 means "the target's value", so a what-if edit of the target or a
calibration reaches every config that did not choose its own.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dse.core.dtypes import DtypePair
from dse.core.errors import UsageError
from dse.core.params import ChoiceParam, ConfigBatch, IntParam, Param, Rule
from search_spaces.systolic_gemm.target import DATAFLOWS, SystolicTarget
from search_spaces.systolic_gemm.workload import GemmMix

TILES = ("t_m", "t_k", "t_n")
LOOP_ORDERS: tuple[str, ...] = tuple("".join(p) for p in itertools.permutations("mnk"))
BUFFERS = ("buf_a", "buf_b", "buf_c")
HARDWARE = ("rows", "cols", "ifmap_kb", "filter_kb", "ofmap_kb", "dram_mb_s")
# which matrix dimension the array's rows and columns hold, and which one streams through it,
# per dataflow (SCALE-Sim's mapping: its Sr = M, Sc = N, T = K)
MAPPING: dict[str, tuple[str, str, str]] = {"os": ("m", "n", "k"), "ws": ("k", "n", "m"),
                                            "is": ("k", "m", "n")}
# the largest hardware a config may name (its products stay well inside int64)
HARDWARE_MAX = {"rows": 1 << 16, "cols": 1 << 16, "ifmap_kb": 1 << 24, "filter_kb": 1 << 24,
                "ofmap_kb": 1 << 24, "dram_mb_s": 10**9}
HELP = {
    "t_m": "rows of A and C in one SRAM tile",
    "t_k": "depth of one SRAM tile (dense K; 2:4 weights keep half of it)",
    "t_n": "columns of B and C in one SRAM tile",
    "dataflow": "what stays in the PEs: outputs (os), weights (ws) or inputs (is)",
    "loop_order": "tile loops from outermost to innermost (mnk: a row of C tiles at a time)",
    "buf_a": "A tiles in the ifmap SRAM: 1 (load, then compute) or 2 (load the next while "
             "computing)",
    "buf_b": "B tiles in the filter SRAM: 1 or 2",
    "buf_c": "C tiles in the ofmap SRAM: 1 or 2 (drain one while filling the other)",
    "rows": "PE rows of an array (0: the target's)",
    "cols": "PE columns of an array (0: the target's)",
    "ifmap_kb": "ifmap (A) SRAM in KiB (0: the target's)",
    "filter_kb": "filter (B) SRAM in KiB (0: the target's)",
    "ofmap_kb": "ofmap (C) SRAM in KiB (0: the target's)",
    "dram_mb_s": "DRAM bandwidth in MB/s (0: the target's)",
}


def parameters(target: SystolicTarget) -> dict[str, Param]:
    """Every parameter with its domain."""
    params: list[Param] = [IntParam(t, HELP[t], 1) for t in TILES]
    params += [ChoiceParam("dataflow", HELP["dataflow"], DATAFLOWS),
               ChoiceParam("loop_order", HELP["loop_order"], LOOP_ORDERS)]
    params += [IntParam(b, HELP[b], 1, 2) for b in BUFFERS]
    params += [IntParam(h, HELP[h], 0, HARDWARE_MAX[h]) for h in HARDWARE]
    return {p.name: p for p in params}


@dataclass(frozen=True)
class Hardware:
    """The hardware of each config of a batch (the target's where a parameter is 0), arrays."""

    rows: np.ndarray
    cols: np.ndarray
    sram_bytes: dict[str, np.ndarray]  # "a", "b", "c" -> bytes
    dram_bytes_per_s: np.ndarray


def hardware(batch: ConfigBatch, target: SystolicTarget) -> Hardware:
    """The arrays' rows and columns, SRAM per operand and DRAM bandwidth of each config."""
    a, m = target.array, target.memory

    def pick(name: str, default: float) -> np.ndarray:
        return np.where(batch[name] > 0, batch[name], default).astype(np.int64)

    sram = {op: pick(key, kb) * 1024 for op, key, kb in (
        ("a", "ifmap_kb", m.ifmap_sram_kb), ("b", "filter_kb", m.filter_sram_kb),
        ("c", "ofmap_kb", m.ofmap_sram_kb))}
    bandwidth = np.where(batch["dram_mb_s"] > 0, batch["dram_mb_s"] * 1e6, m.dram_bytes_per_s)
    return Hardware(pick("rows", a.rows), pick("cols", a.cols), sram, bandwidth)


def b_tile_bytes(t_k: np.ndarray, t_n: np.ndarray, in_bytes: int, sparse: bool) -> np.ndarray:
    """Bytes of a K x N slice of B as stored: 2:4 keeps half the values and a 2-bit index each."""
    if not sparse:
        return t_k * t_n * in_bytes
    kept = -(-t_k // 2) * t_n
    return kept * in_bytes + -(-kept // 4)


def accumulator_bytes(dtype: DtypePair) -> int:
    """Bytes of one partial sum: the output type, 4 at least (INT32 or FP32 accumulators)."""
    return max(dtype.out_bytes, 4)


def sparse_skips(flow: np.ndarray, sparse: bool) -> np.ndarray:
    """Whether 2:4 weights halve the array's MACs: only when they stay in the PEs (ws), each
    with its 2-bit index selecting one of four streamed activations (the seed's sparse PE);
    streamed weights (os, is) are expanded at the array's edge."""
    return np.full(len(flow), sparse) & (flow == DATAFLOWS.index("ws"))


def held_tile(batch: ConfigBatch, dim: str, sparse: bool) -> np.ndarray:
    """The tile along ``dim`` as the array holds it: 2:4 weights in the PEs keep half of K."""
    tile = batch[f"t_{dim}"]
    if dim != "k" or not sparse:
        return tile
    return np.where(sparse_skips(batch["dataflow"], sparse), -(-tile // 2), tile)


def tile_bytes(batch: ConfigBatch, w: GemmMix, arrays: int) -> dict[str, np.ndarray]:
    """SRAM each operand's buffers take: buffer count x tile x the arrays working at once (C
    as accumulators)."""
    dt = w.dtype
    t_m, t_k, t_n = (batch[t] for t in TILES)
    return {"a": batch["buf_a"] * t_m * t_k * dt.in_bytes * arrays,
            "b": batch["buf_b"] * b_tile_bytes(t_k, t_n, dt.in_bytes, w.sparse) * arrays,
            "c": batch["buf_c"] * t_m * t_n * accumulator_bytes(dt) * arrays}


def _mapped(batch: ConfigBatch, hw: Hardware) -> dict[str, np.ndarray]:
    """Array size along each matrix dimension the dataflow puts on rows or columns (0 along the
    streamed one)."""
    size = {d: np.zeros_like(hw.rows) for d in "mnk"}
    for code, flow in enumerate(DATAFLOWS):
        on_rows, on_cols, _ = MAPPING[flow]
        here = batch["dataflow"] == code
        size[on_rows] = np.where(here, hw.rows, size[on_rows])
        size[on_cols] = np.where(here, hw.cols, size[on_cols])
    return size


class RuleBatch(dict):
    """A config batch as the rules see it (the space's ``_context``): with the hardware, the
    SRAM its tiles take and the array size along each dim computed once for all its rules."""

    def __init__(self, batch: ConfigBatch, target: SystolicTarget, w: GemmMix) -> None:
        super().__init__(batch)
        self.target, self.workload = target, w

    @cached_property
    def hw(self) -> Hardware:
        return hardware(self, self.target)

    @cached_property
    def held(self) -> dict[str, np.ndarray]:
        return tile_bytes(self, self.workload, self.target.array.count)

    @cached_property
    def mapped(self) -> dict[str, np.ndarray]:
        return _mapped(self, self.hw)


def rules(target: SystolicTarget, w: GemmMix) -> tuple[Rule, ...]:
    """The space's rules (budgets come separately, see :func:`budget_rules`)."""
    dims = {"t_m": w.M, "t_k": w.K, "t_n": w.N}
    full = {"m": w.M, "k": w.K, "n": w.N}
    arrays = target.array.count
    names = {"a": ("ifmap", "buf_a", "t_m x t_k"), "b": ("filter", "buf_b", "t_k x t_n"),
             "c": ("ofmap", "buf_c", "t_m x t_n")}

    def misfit(b: RuleBatch) -> dict[str, np.ndarray]:
        size = b.mapped
        return {d: (size[d] > 0) & (held_tile(b, d, w.sparse) % np.maximum(size[d], 1) > 0)
                & (b[f"t_{d}"] < full[d]) for d in "mnk"}

    def aligned(b: RuleBatch) -> np.ndarray:
        bad = misfit(b)
        return ~(bad["m"] | bad["n"] | bad["k"])

    def misaligned(b: RuleBatch, i: int) -> str:
        size, bad = b.mapped, misfit(b)
        flow = DATAFLOWS[int(b["dataflow"][i])]
        held = {d: int(held_tile(b, d, w.sparse)[i]) for d in "mnk"}
        text = [f"t_{d}={int(b[f't_{d}'][i])}"
                + (f" ({held[d]} kept weights under 2:4)" if held[d] != b[f"t_{d}"][i] else "")
                + f" is not a multiple of the {int(size[d][i])} PEs that hold {d.upper()} "
                  f"under {flow}" for d in "mnk" if bad[d][i]]
        return "; ".join(text) + " (every fold of such a tile leaves PEs idle that a tile of " \
                                 "whole folds would use)"

    def fits(op: str) -> Rule:
        label, buf, dims_text = names[op]

        def check(b: RuleBatch) -> np.ndarray:
            return b.held[op] <= b.hw.sram_bytes[op]

        def explain(b: RuleBatch, i: int) -> str:
            used, have = int(b.held[op][i]), int(b.hw.sram_bytes[op][i])
            per = f" for {arrays} arrays" if arrays > 1 else ""
            return (f"{int(b[buf][i])} {dims_text} tile(s) of {op.upper()}{per} take {used:,} B, "
                    f"more than the {have:,} B {label} SRAM")

        return Rule(f"{label}_sram", f"{buf} {op.upper()} tiles fit the {label} SRAM (every "
                    "array computing at once holds its own)", check, explain)

    return (
        Rule("within_matrix", "tiles are no larger than the matrices (the largest of a mix)",
             lambda b: np.all([b[t] <= dims[t] for t in TILES], axis=0),
             lambda b, i: "a tile is larger than the matrix: " + ", ".join(
                 f"{t}={int(b[t][i])} > {dims[t]}" for t in TILES if b[t][i] > dims[t])),
        Rule("whole_folds", "along a dimension the array holds, a tile is a whole number of "
             "folds (a multiple of the array's rows or columns) or the whole matrix",
             aligned, misaligned),
        fits("a"), fits("b"), fits("c"),
        *([Rule("sparse_groups", "2:4 weights: a tile holds whole groups of four weights "
                "along K (t_k a multiple of 4) or the whole K",
                lambda b: (b["t_k"] % 4 == 0) | (b["t_k"] >= w.K),
                lambda b, i: f"t_k={int(b['t_k'][i])} splits a group of four 2:4 weights "
                             "(a multiple of 4 or the whole K)")] if w.sparse else []),
    )


# -- budgets a study states ---------------------------------------------------------------
BUDGETS: dict[str, str] = {
    "pes": "PEs of the chip (rows x cols x arrays)",
    "sram_kb": "SRAM of the three operand buffers together, KiB",
    "dram_mb_s": "DRAM bandwidth, MB/s",
}
_BUDGET = re.compile(r"^\s*(\w+)\s*<=\s*([0-9][0-9_]*)\s*$")


def budget_value(name: str, b: RuleBatch) -> np.ndarray:
    """A budgeted quantity of each config."""
    hw = b.hw
    if name == "pes":
        return hw.rows * hw.cols * b.target.array.count
    if name == "sram_kb":
        return sum(hw.sram_bytes.values()) // 1024
    return (hw.dram_bytes_per_s / 1e6).astype(np.int64)


def split_budgets(constraints: Sequence[str]) -> tuple[dict[str, int], list[str]]:
    """``NAME <= VALUE`` budgets, and the other (named) constraints."""
    budgets: dict[str, int] = {}
    others = []
    for text in constraints:
        match = _BUDGET.match(text) if isinstance(text, str) else None
        if match is None:
            others.append(text)
            continue
        name, value = match.group(1), int(match.group(2).replace("_", ""))
        if name not in BUDGETS:
            raise UsageError(f"constraint {text!r}: unknown budget {name!r}; valid: "
                             + ", ".join(f"{k} ({v})" for k, v in BUDGETS.items()))
        if value <= 0:
            raise UsageError(f"constraint {text!r}: a budget must be positive")
        budgets[name] = value
    return budgets, others


def budget_rules(budgets: Mapping[str, int]) -> tuple[Rule, ...]:
    """One rule a budget: the config's hardware stays within what the study allows."""
    def rule(name: str, limit: int) -> Rule:
        return Rule(f"budget_{name}", f"{BUDGETS[name]} at most {limit:,} (the study's budget)",
                    lambda b: budget_value(name, b) <= limit,
                    lambda b, i: f"{BUDGETS[name]}: {int(budget_value(name, b)[i]):,} "
                                 f"over the study's budget of {limit:,}")

    return tuple(rule(name, limit) for name, limit in budgets.items())


def describe_budgets() -> str:
    """The budget forms, for messages."""
    return ", ".join(f"'{k} <= N'" for k in BUDGETS)
