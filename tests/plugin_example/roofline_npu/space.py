"""The search space: the C tile's rows and columns (powers of two), the rules they obey, and
the fixed Optuna distributions a study samples them from."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution

from dse.core import Calibratable, ConfigBatch, GemmWorkload, IntParam, Rule, SearchSpace
from roofline_npu.target import RooflineTarget

TILES = ("tile_m", "tile_n")
SIZES = (16, 32, 64, 128, 256, 512, 1024)
K_STEP = 64  # the depth of the A and B panels streamed through SRAM


def sram_bytes(b: ConfigBatch, in_bytes: int, out_bytes: int) -> np.ndarray:
    """SRAM a config uses: its C tile and two buffers of the A and B panels feeding it."""
    return (b["tile_m"] * b["tile_n"] * out_bytes
            + 2 * (b["tile_m"] + b["tile_n"]) * K_STEP * in_bytes)


def _rules(target: RooflineTarget, w: GemmWorkload) -> tuple[Rule, ...]:
    cap, dt = target.memory.sram_bytes, w.dtype
    return (
        Rule("alignment", "tiles are multiples of 16 (the engine's vector width)",
             lambda b: (b["tile_m"] % 16 == 0) & (b["tile_n"] % 16 == 0),
             lambda b, i: f"tile_m={int(b['tile_m'][i])}, tile_n={int(b['tile_n'][i])}: "
                          "multiples of 16 only"),
        Rule("sram", "the C tile and two A and B panels fit the SRAM",
             lambda b: sram_bytes(b, dt.in_bytes, dt.out_bytes) <= cap,
             lambda b, i: f"{int(sram_bytes(b, dt.in_bytes, dt.out_bytes)[i]):,} B of tiles "
                          f"exceed the {cap:,} B SRAM"),
        Rule("within_problem", "a tile is no larger than its side of C",
             lambda b: (b["tile_m"] <= max(w.M, 16)) & (b["tile_n"] <= max(w.N, 16)),
             lambda b, i: f"a {int(b['tile_m'][i])}x{int(b['tile_n'][i])} tile for a "
                          f"{w.M}x{w.N} C"),
    )


class RooflineSpace(SearchSpace):
    """Tile sizes of a GEMM on a roofline-only accelerator."""

    name = "roofline_npu"
    required = TILES
    kernel_keys = TILES
    calibratable = (Calibratable("memory", "dram_bytes_per_s"),)
    objective_metrics = {"ops_per_byte": "maximize"}  # the model's arithmetic intensity

    def __init__(self, target: RooflineTarget, workload: GemmWorkload,
                 extra_constraints: Sequence[str] = ()) -> None:
        self._accept(target, workload, extra_constraints)
        self.target, self.workload = target, workload
        self._params = {name: IntParam(name, f"{side} of the C tile (a power of two)", 16)
                        for name, side in zip(TILES, ("rows", "columns"), strict=True)}
        self.constraints = _rules(target, workload)

    def defaults(self) -> dict[str, Any]:
        return {}

    def chunks(self, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = ()) -> Iterator[tuple[ConfigBatch, int]]:
        """Every pair of sizes (fixed ones held), in one batch."""
        fixed, _ = self._fixed_and_free(fix, free, overlap_ok=True)
        axes = [[fixed[n]] if n in fixed else list(SIZES) for n in TILES]
        pairs = np.array(list(itertools.product(*axes)), dtype=np.int64)
        yield {n: pairs[:, i] for i, n in enumerate(TILES)}, len(pairs)

    def n_chunks(self, free: Iterable[str] = ()) -> int:
        return 1

    def optuna_encoding(self, fix: Mapping[str, Any], free: Sequence[str],
                        ranges: Mapping[str, tuple[int, int]]) -> TileEncoding:
        return TileEncoding(self.parse(fix), ranges)

    def what_if_knobs(self) -> dict[str, Callable[[float], RooflineTarget]]:
        t = self.target
        return {
            "dram bandwidth": lambda f: t.with_values(
                memory={"dram_bytes_per_s": t.memory.dram_bytes_per_s * f}),
            "SRAM size": lambda f: t.with_values(
                memory={"sram_bytes": int(t.memory.sram_bytes * f)}),
            "peak": lambda f: t.with_values(
                compute={"peak_ops_per_s": t.compute.peak_ops_per_s * f})}


class TileEncoding:
    """Each tile size a category of :data:`SIZES` (inside the study's ranges)."""

    def __init__(self, fix: Mapping[str, Any], ranges: Mapping[str, tuple[int, int]]) -> None:
        self._fix = dict(fix)
        self._dists = {}
        for name in TILES:
            if name not in fix:
                lo, hi = ranges.get(name, (SIZES[0], SIZES[-1]))
                self._dists[name] = CategoricalDistribution(
                    tuple(s for s in SIZES if lo <= s <= hi) or (SIZES[0],))

    def distributions(self) -> dict[str, BaseDistribution]:
        return dict(self._dists)

    def decode(self, sampled: Mapping[str, Any]) -> dict[str, Any]:
        config = {**self._fix, **sampled}
        return {name: int(config[name]) for name in TILES}
