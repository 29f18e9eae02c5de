"""Design space of a GEMM on a TPU-like systolic array: the dataflow, SRAM tile sizes with the
array's folding, loop order and buffer counts, searched by default; the hardware (array rows and
columns, SRAM per operand, DRAM bandwidth) when a study frees it, under its budgets."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from dse.core.errors import UsageError
from dse.core.params import ChoiceParam, ConfigBatch
from dse.core.space import Breakdown, SearchSpace
from search_spaces.systolic_gemm.rules import (
    BUFFERS,
    HARDWARE,
    MAPPING,
    TILES,
    RuleBatch,
    budget_rules,
    describe_budgets,
    parameters,
    rules,
    split_budgets,
)
from search_spaces.systolic_gemm.target import DATAFLOWS, SystolicTarget
from search_spaces.systolic_gemm.workload import GemmMix

MAPPING_CHOICES = ("dataflow", "loop_order")
# what a freed hardware parameter ranges over (a study's `space.range` narrows it)
HARDWARE_VALUES: dict[str, tuple[int, ...]] = {
    "rows": tuple(4 << i for i in range(8)),          # 4 ... 512
    "cols": tuple(4 << i for i in range(8)),
    "ifmap_kb": tuple(8 << i for i in range(14)),     # 8 KiB ... 64 MiB
    "filter_kb": tuple(8 << i for i in range(14)),
    "ofmap_kb": tuple(8 << i for i in range(14)),
}
BANDWIDTH_STEPS = tuple(2.0 ** e for e in range(-3, 4))  # the target's DRAM bandwidth x 1/8 ... 8


def tile_values(dim: int) -> list[int]:
    """Powers of two below ``dim``, and ``dim`` itself (the whole matrix)."""
    return [1 << e for e in range(dim.bit_length()) if 1 << e < dim] + [dim]


class SystolicGemmSpace(SearchSpace):
    """Dataflow, tiling, loop order and buffering of a GEMM (or a mix of GEMMs) on a systolic
    array, and the array itself when a study frees its parameters."""

    name = "systolic_gemm"
    workload_kind = "gemm_mix"
    required = TILES
    kernel_keys = (*TILES, "dataflow")
    tile_axes = ("t_m", "t_n", "t_k")
    time_parts = {"t_stall_s": "stalls on DRAM"}
    breakdowns = (
        Breakdown("Energy per run by access level", "J", {
            "energy_mac_j": "MACs", "energy_register_j": "registers",
            "energy_pe_local_j": "PE-local (stationary loads)", "energy_sram_j": "SRAM",
            "energy_dram_j": "DRAM"}),
        Breakdown("Array efficiency", "share", {
            "utilisation": "utilisation (MACs per PE-cycle)",
            "mapping_efficiency": "mapping (PEs a fold holds)",
            "fill_drain_efficiency": "fill/drain (cycles streaming)"}, stacked=False),
    )
    objective_metrics = {"energy_j": "minimize", "tops_per_w": "maximize",
                         "utilisation": "maximize", "total_cycles": "minimize",
                         "pes": "minimize", "sram_kb": "minimize"}

    def __init__(self, target: SystolicTarget, workload: GemmMix,
                 extra_constraints: Sequence[str] = ()) -> None:
        budgets, named = split_budgets(extra_constraints)
        if named:
            raise UsageError(f"unknown constraint {named[0]!r}; the {self.name} space takes "
                             f"budgets: {describe_budgets()}")
        self._accept(target, workload, ())
        self.target, self.workload = target, workload
        self.budgets = budgets
        self._params = parameters(target)
        self.constraints = rules(target, workload) + budget_rules(budgets)

    def _context(self, batch: ConfigBatch) -> RuleBatch:
        return RuleBatch(batch, self.target, self.workload)

    def defaults(self) -> dict[str, Any]:
        return {"dataflow": self.target.array.dataflow, "loop_order": "mnk",
                **{b: 2 for b in BUFFERS}, **{h: 0 for h in HARDWARE}}

    def describe(self, params: Mapping[str, Any]) -> str:
        """Tile M x K x N and the dataflow, e.g. ``256x1024x256 ws``."""
        if not all(k in params for k in self.kernel_keys):
            return super().describe(params)
        return f"{params['t_m']}x{params['t_k']}x{params['t_n']} {params['dataflow']}"

    def what_if_knobs(self) -> dict[str, Callable[[float], SystolicTarget]]:
        """DRAM bandwidth, every SRAM buffer and the clock, each scaled by a factor."""
        t, m = self.target, self.target.memory
        return {
            "dram bandwidth": lambda f: t.with_values(
                memory={"dram_bytes_per_s": m.dram_bytes_per_s * f}),
            "SRAM size": lambda f: t.with_values(memory={
                "ifmap_sram_kb": max(1, int(m.ifmap_sram_kb * f)),
                "filter_sram_kb": max(1, int(m.filter_sram_kb * f)),
                "ofmap_sram_kb": max(1, int(m.ofmap_sram_kb * f))}),
            "clock": lambda f: t.with_values(array={"clock_hz": t.array.clock_hz * f})}

    # -- enumeration -------------------------------------------------------------------------
    def hardware_values(self, name: str) -> tuple[int, ...]:
        """What a freed hardware parameter ranges over."""
        if name == "dram_mb_s":
            base = self.target.memory.dram_bytes_per_s / 1e6
            return tuple(max(1, round(base * step)) for step in BANDWIDTH_STEPS)
        return HARDWARE_VALUES[name]

    def axes(self, fix: Mapping[str, Any], free: Iterable[str],
             ranges: Mapping[str, tuple[int, int]] | None = None) -> dict[str, list[Any]]:
        """Every parameter's values to enumerate (batch codes): fixed ones held, the mapping
        searched, hardware only where freed; integers inside ``ranges`` when given."""
        free, ranges = set(free), ranges or {}
        dims = {"t_m": self.workload.M, "t_k": self.workload.K, "t_n": self.workload.N}
        out: dict[str, list[Any]] = {}
        for name, param in self._params.items():
            if name in fix:
                out[name] = [param.encode(fix[name])]
            elif name in TILES:
                out[name] = tile_values(dims[name])
            elif isinstance(param, ChoiceParam):
                out[name] = list(range(len(param.choices)))
            elif name in BUFFERS:
                out[name] = [1, 2]
            else:
                out[name] = list(self.hardware_values(name)) if name in free else [0]
            if name in ranges and name not in fix:
                lo, hi = ranges[name]
                out[name] = [v for v in out[name] if lo <= v <= hi]
        return out

    def chunks(self, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = ()) -> Iterator[tuple[ConfigBatch, int]]:
        """The product of :meth:`axes`, one batch per dataflow and hardware choice."""
        return self.chunks_within(fix, free, {})

    def chunks_within(self, fix: Mapping[str, Any] | None, free: Iterable[str],
                      ranges: Mapping[str, tuple[int, int]]) -> Iterator[tuple[ConfigBatch, int]]:
        """:meth:`chunks` without the values outside ``ranges`` (a co-design space holds
        thousands of hardware choices, most outside a study's ranges). Each batch is one
        dataflow and hardware choice; its tiles along the dims the array holds are whole folds
        already (the ``whole_folds`` rule, applied by construction: the box counts them)."""
        fixed, free = self._fixed_and_free(fix, free, overlap_ok=True)
        axes = self.axes(fixed, free, ranges)
        outer = ["dataflow", *HARDWARE]
        inner = [n for n in self._params if n not in outer]
        box = int(np.prod([len(axes[n]) for n in inner]))
        grids: dict[tuple[int, int, int], np.ndarray] = {}
        array = self.target.array
        for combo in np.array(np.meshgrid(*(axes[n] for n in outer), indexing="ij"),
                              dtype=np.int64).reshape(len(outer), -1).T:
            values = dict(zip(outer, combo.tolist(), strict=True))
            key = (values["dataflow"], values["rows"] or array.rows, values["cols"] or array.cols)
            if key not in grids:
                grids[key] = self._inner_grid(axes, inner, *key)
            grid = grids[key]
            batch = {n: grid[i] for i, n in enumerate(inner)}
            batch.update({n: np.full(grid.shape[1], v, dtype=np.int64)
                          for n, v in values.items()})
            yield {n: batch[n] for n in self._params}, box

    def _inner_grid(self, axes: Mapping[str, list[Any]], inner: Sequence[str], flow: int,
                    rows: int, cols: int) -> np.ndarray:
        """The product of the inner axes, tiles along the array's dims cut to whole folds."""
        on_rows, on_cols, _ = MAPPING[DATAFLOWS[flow]]
        w = self.workload
        full = {"m": w.M, "n": w.N, "k": w.K}
        halves = w.sparse and DATAFLOWS[flow] == "ws"  # the PEs hold half of K's weights

        def held(dim: str, v: int) -> int:
            return -(-v // 2) if dim == "k" and halves else v

        kept = dict(axes)
        for dim, pes in ((on_rows, rows), (on_cols, cols)):
            kept[f"t_{dim}"] = [v for v in axes[f"t_{dim}"]
                                if held(dim, v) % pes == 0 or v >= full[dim]]
        return np.array(np.meshgrid(*(kept[n] for n in inner), indexing="ij"),
                        dtype=np.int64).reshape(len(inner), -1)

    def n_chunks(self, free: Iterable[str] = ()) -> int:
        axes = self.axes({}, free)
        return int(np.prod([len(axes[n]) for n in ("dataflow", *HARDWARE)]))

    def optuna_encoding(self, fix: Mapping[str, Any], free: Sequence[str],
                        ranges: Mapping[str, tuple[int, int]]) -> SystolicEncoding:
        return SystolicEncoding(self, self.parse(fix), free, ranges)


class SystolicEncoding:
    """Tiles and freed hardware as the index of their value (ordered, so TPE learns "larger"),
    dataflow and loop order as categories, buffer counts as 1 or 2."""

    def __init__(self, space: SystolicGemmSpace, fix: Mapping[str, Any], free: Sequence[str],
                 ranges: Mapping[str, tuple[int, int]]) -> None:
        self._space, self._fix = space, dict(fix)
        axes = space.axes({}, free)
        self._values: dict[str, list[int]] = {}
        self._dists: dict[str, BaseDistribution] = {}
        for name, param in space.params().items():
            if name in fix:
                continue
            if isinstance(param, ChoiceParam):
                self._dists[name] = CategoricalDistribution(param.choices)
                continue
            lo, hi = ranges.get(name, (min(axes[name]), max(axes[name])))
            kept = [v for v in axes[name] if lo <= v <= hi]
            if not kept:
                raise UsageError(f"range of {name} [{lo}, {hi}] holds none of "
                                 f"{', '.join(map(str, axes[name]))}")
            if len(kept) > 1:
                self._values[name] = kept
                self._dists[f"{name}_index"] = IntDistribution(0, len(kept) - 1)
            else:
                self._fix[name] = kept[0]

    def distributions(self) -> dict[str, BaseDistribution]:
        return dict(self._dists)

    def decode(self, sampled: Mapping[str, Any]) -> dict[str, Any]:
        config = {**self._space.defaults(), **self._fix}
        for name, values in self._values.items():
            config[name] = values[int(sampled[f"{name}_index"])]
        config.update({k: v for k, v in sampled.items() if k in MAPPING_CHOICES})
        return {name: config[name] for name in self._space.params()}
