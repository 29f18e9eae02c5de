"""Design space of an AMX GEMM on the host CPU (the kernel ``evaluators/hardware/amx_source.py``
generates): the C-tile grid and its stream buffers, K steps per loop turn, cache blocks, loop
orders, packing, the tile-load hint, prefetching and the split over cores.

The grid and the blocks are always searched; the other parameters keep their defaults unless a
study frees them (``space.free``), so a study chooses how wide a space its first rung scores.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from dse.core.params import ChoiceParam, ConfigBatch, IntParam, Param
from dse.core.space import Breakdown, Calibratable, SearchSpace
from dse.core.workload import GemmWorkload
from search_spaces.amx_gemm.geometry import CHOICE_CODES, k_tile
from search_spaces.amx_gemm.rules import rules

GRID = (1, 2, 3, 4)  # C tiles along each side of the micro-kernel's grid
BLOCK_ROWS = (4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072,
              4096)
BLOCK_DEPTHS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
SEARCHED = ("grid_rows", "grid_cols", "mc", "kc", "nc")
FREE_VALUES: dict[str, tuple[int, ...]] = {"stream_buffers": (1, 2), "k_unroll": (1, 2, 4),
                                           "prefetch": (0, 1, 2, 4)}

HELP = {
    "grid_rows": "rows of 16x16 C tiles the micro-kernel holds",
    "grid_cols": "columns of 16x16 C tiles the micro-kernel holds",
    "stream_buffers": "tile registers the streamed operand rotates through (2: double-buffered)",
    "k_unroll": "K steps (64 bytes of K each) per turn of the micro-kernel's loop",
    "mc": "rows of an A block (cache block)",
    "kc": "depth of a K block",
    "nc": "columns of a B block",
    "pack_a": "A packed into 1 KiB tiles per block, or read in place",
    "pack_b": "B re-laid out to VNNI once per GEMM or per block, or read in place (none: "
              "AVX-512 dot products over K, B column-major; stream: a row-major B re-laid "
              "out in registers a block of kc rows by nc columns at a time, into a buffer "
              "AVX-512 rows or AMX tiles multiply)",
    "block_order": "the block kept while the other passes: B's (loops N, K, M) or A's (M, K, N)",
    "micro_order": "the strip kept in L1 while the micro-kernel walks the block",
    "load_hint": "streamed tile loads: TILELOADD (t0) or non-temporal TILELOADDT1 (t1)",
    "prefetch": "K steps ahead the streamed operand is prefetched (0: none)",
    "prefetch_c": "prefetch the next micro-tile's C lines",
    "split": "how C is split over the threads: by rows, by columns or both",
    "threads": "threads (one per core)",
    "engine": "the units that multiply: AMX tiles, or AVX-512 VNNI / BF16 rows (small M)",
}


def _params() -> dict[str, Param]:
    params: list[Param] = [
        IntParam("grid_rows", HELP["grid_rows"], 1, 4),
        IntParam("grid_cols", HELP["grid_cols"], 1, 4),
        IntParam("stream_buffers", HELP["stream_buffers"], 1, 2),
        IntParam("k_unroll", HELP["k_unroll"], 1, 8),
        IntParam("mc", HELP["mc"], 1),
        IntParam("kc", HELP["kc"], 32),
        IntParam("nc", HELP["nc"], 1),
        *(ChoiceParam(name, HELP[name], choices) for name, choices in CHOICE_CODES.items()),
        IntParam("prefetch", HELP["prefetch"], 0, 16),
        IntParam("threads", HELP["threads"], 1, 64),
    ]
    return {p.name: p for p in params}


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


class AmxGemmSpace(SearchSpace):
    """Tile grid, blocking, orders, packing, hints and thread split of an AMX GEMM."""

    name = "amx_gemm"
    required = SEARCHED
    kernel_keys = ("grid_rows", "grid_cols", "mc", "kc", "nc")
    tile_axes = ("mc", "nc", "kc")
    calibratable = (
        Calibratable("engine", "clock_hz"),
        *(Calibratable("bandwidth", f"{level}_bytes_per_s") for level in ("l1", "l2", "l3",
                                                                           "dram")),
        *(Calibratable("model", key) for key in (
            "pack_bytes_per_s", "load_latency_cycles", "call_cycles", "c_latency_factor",
            "prefetch_line_cycles", "strided_a_factor", "run_knee_bytes")),
    )
    time_parts = {"t_loads_s": "tile loads", "t_c_s": "C tiles in and out",
                  "t_pack_s": "packing", "t_calls_s": "micro-kernel calls"}
    breakdowns = (Breakdown("Where the time goes (model)", "s",
                            {"t_comp_s": "TMUL", "t_loads_s": "tile loads", "t_c_s": "C tiles",
                             "t_pack_s": "packing", "t_calls_s": "calls"}, stacked=False),)
    objective_metrics = {"efficiency": "maximize"}

    def __init__(self, target: Any, workload: GemmWorkload,
                 extra_constraints: Sequence[str] = ()) -> None:
        self._accept(target, workload, extra_constraints)
        self.target, self.workload = target, workload
        self._params = _params()
        self.constraints = rules(target, workload)

    def defaults(self) -> dict[str, Any]:
        return {"stream_buffers": 1, "k_unroll": 2, "pack_a": "yes", "pack_b": "gemm",
                "block_order": "b_block", "micro_order": "a_strip", "load_hint": "t0",
                "prefetch": 0, "prefetch_c": "yes", "split": "m",
                "threads": self.target.engine.cores, "engine": "amx"}

    def values(self, name: str) -> list[Any]:
        """The values enumeration and the Optuna encoding search for ``name``."""
        w = self.workload
        if name in ("grid_rows", "grid_cols"):
            return list(GRID)
        if name in ("mc", "nc"):
            dim = w.M if name == "mc" else w.N
            units = (1, 16)  # a grid row of A (or column of B in place) may be one
            fits = {_round_up(dim, u * g) for g in GRID for u in units}  # the whole matrix
            return sorted({v for v in BLOCK_ROWS if v < dim} | fits)
        if name == "kc":
            kt = k_tile(w.dtype.in_bytes)
            return sorted({v for v in BLOCK_DEPTHS if v < w.K} | {_round_up(w.K, kt)})
        if name == "threads":
            return list(range(1, self.target.engine.cores + 1))
        if name in FREE_VALUES:
            return list(FREE_VALUES[name])
        param = self._params[name]
        assert isinstance(param, ChoiceParam)
        return list(param.choices)

    def _axes(self, fixed: Mapping[str, Any], free: Iterable[str]) -> dict[str, list[Any]]:
        free = set(free)
        defaults = self.defaults()
        return {name: [fixed[name]] if name in fixed
                else self.values(name) if name in SEARCHED or name in free
                else [defaults[name]] for name in self._params}

    def chunks(self, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = ()) -> Iterator[tuple[ConfigBatch, int]]:
        """Every combination of the searched and freed values, one batch per grid shape."""
        fixed, free = self._fixed_and_free(fix, free, overlap_ok=True)
        axes = self._axes(fixed, free)
        codes = {name: np.array([self._params[name].encode(v) for v in values], dtype=np.int64)
                 for name, values in axes.items()}
        rest = [n for n in self._params if n not in ("grid_rows", "grid_cols")]
        for rows in codes["grid_rows"]:
            for cols in codes["grid_cols"]:
                mesh = np.meshgrid(*(codes[n] for n in rest), indexing="ij")
                batch = {n: m.ravel() for n, m in zip(rest, mesh, strict=True)}
                size = len(batch[rest[0]])
                batch["grid_rows"] = np.full(size, rows)
                batch["grid_cols"] = np.full(size, cols)
                yield {n: batch[n] for n in self._params}, size

    def n_chunks(self, free: Iterable[str] = ()) -> int:
        return len(GRID) ** 2

    def optuna_encoding(self, fix: Mapping[str, Any], free: Sequence[str],
                        ranges: Mapping[str, tuple[int, int]]) -> AmxEncoding:
        return AmxEncoding(self, self.parse(fix), free)


class AmxEncoding:
    """Each searched or freed parameter sampled as an index into its values."""

    def __init__(self, space: AmxGemmSpace, fix: Mapping[str, Any], free: Sequence[str]) -> None:
        self._space = space
        self._axes = {name: values for name, values in space._axes(fix, free).items()
                      if len(values) > 1}
        self._base = {name: values[0] for name, values in space._axes(fix, free).items()}

    def distributions(self) -> dict[str, BaseDistribution]:
        out: dict[str, BaseDistribution] = {}
        for name, values in self._axes.items():
            if isinstance(values[0], str):
                out[name] = CategoricalDistribution(tuple(values))
            else:
                out[f"{name}_index"] = IntDistribution(0, len(values) - 1)
        return out

    def decode(self, sampled: Mapping[str, Any]) -> dict[str, Any]:
        config = dict(self._base)
        for name, values in self._axes.items():
            if name in sampled:
                config[name] = sampled[name]
            elif f"{name}_index" in sampled:
                config[name] = values[int(sampled[f"{name}_index"])]
        return config
