"""Design space of a blocked GEMM on the host CPU: block sizes and packing (buffering).

C is computed block by block: for each (nc-wide column block, kc-deep slice, mc-tall row block)
one BLAS call multiplies an mc x kc block of A by a kc x nc block of B into C. Packing copies a
block into a contiguous buffer first (B once per slice, A for every step), trading copy time for
unit-stride reads.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from dse.core.params import ChoiceParam, ConfigBatch, IntParam, Param, Rule
from dse.core.space import Calibratable, SearchSpace
from dse.core.workload import GemmWorkload

TILES = ("mc", "kc", "nc")
ALIGN = 16


def _params() -> dict[str, Param]:
    params: list[Param] = [
        IntParam("mc", "rows of an A and C block (multiple of 16)", ALIGN),
        IntParam("kc", "depth of a block step (multiple of 16)", ALIGN),
        IntParam("nc", "columns of a B and C block (multiple of 16)", ALIGN),
        ChoiceParam("pack_a", "copy each A block to a contiguous buffer", ("yes", "no")),
        ChoiceParam("pack_b", "copy each B block to a contiguous buffer", ("yes", "no")),
    ]
    return {p.name: p for p in params}


def block_bytes(batch: ConfigBatch, elem: int) -> np.ndarray:
    """Working set of one block step: the A, B and C blocks."""
    mc, kc, nc = (batch[t].astype(np.int64) for t in ("mc", "kc", "nc"))
    return (mc * kc + kc * nc + mc * nc) * elem


class CpuGemmSpace(SearchSpace):
    """Block sizes and packing of a GEMM on the host CPU."""

    name = "cpu_gemm"
    required = TILES
    kernel_keys = TILES
    tile_axes = ("mc", "nc", "kc")
    calibratable = tuple(Calibratable("model", key) for key in (
        "flops_per_s", "call_s", "c_update_bytes_per_s", "row_s"))

    def __init__(self, target: Any, workload: GemmWorkload,
                 extra_constraints: Sequence[str] = ()) -> None:
        self._accept(target, workload, extra_constraints)
        self.target, self.workload = target, workload
        self._params = _params()
        w, elem, l3 = workload, workload.dtype.in_bytes, target.caches.l3_bytes
        dims = {"mc": w.M, "kc": w.K, "nc": w.N}
        self.constraints = (
            Rule("alignment", "block sizes are multiples of 16",
                  lambda b: np.all([b[t] % ALIGN == 0 for t in TILES], axis=0),
                  lambda b, i: "block sizes must be multiples of 16: " + ", ".join(
                      f"{t}={int(b[t][i])}" for t in TILES if b[t][i] % ALIGN)),
            Rule("within_matrix", "blocks are no larger than the matrices",
                  lambda b: np.all([b[t] <= dims[t] for t in TILES], axis=0),
                  lambda b, i: "a block is larger than the matrix: " + ", ".join(
                      f"{t}={int(b[t][i])} > {dims[t]}" for t in TILES if b[t][i] > dims[t])),
            Rule("last_level_cache", "a block step's working set fits the last-level cache",
                  lambda b: block_bytes(b, elem) <= l3,
                  lambda b, i: f"a block step touches {int(block_bytes(b, elem)[i]):,} B, more "
                               f"than the {l3:,} B last-level cache"),
        )

    def defaults(self) -> dict[str, Any]:
        return {"pack_a": "yes", "pack_b": "yes"}

    def _values(self, tile: str) -> list[int]:
        dim = {"mc": self.workload.M, "kc": self.workload.K, "nc": self.workload.N}[tile]
        return [ALIGN << e for e in range(0, 7) if ALIGN << e <= max(dim, ALIGN)]

    def chunks(self, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = ()) -> Iterator[tuple[ConfigBatch, int]]:
        """Block sizes 16, 32, ..., 1024 (up to the matrix) and packing, in one batch."""
        fixed, free = self._fixed_and_free(fix, free, overlap_ok=True)
        axes = []
        for name, param in self._params.items():
            if name in fixed:
                axes.append([fixed[name]])
            elif name in TILES:
                axes.append(self._values(name))
            else:
                choices = list(param.choices) if isinstance(param, ChoiceParam) else []
                axes.append(choices if name in free else [self.defaults()[name]])
        configs = [dict(zip(self._params, combo, strict=True))
                   for combo in itertools.product(*axes)]
        yield self.encode(configs), len(configs)

    def n_chunks(self, free: Iterable[str] = ()) -> int:
        return 1

    def optuna_encoding(self, fix: Mapping[str, Any], free: Sequence[str],
                        ranges: Mapping[str, tuple[int, int]]) -> CpuEncoding:
        return CpuEncoding(self, self.parse(fix), free)


class CpuEncoding:
    """Block sizes sampled as powers of two times 16; packing as categories."""

    def __init__(self, space: CpuGemmSpace, fix: Mapping[str, Any], free: Sequence[str]) -> None:
        self._space, self._base = space, {**space.defaults(), **fix}
        self._dists: dict[str, BaseDistribution] = {}
        for tile in TILES:
            if tile not in fix:
                top = int(math.log2(space._values(tile)[-1] // ALIGN))
                self._dists[f"log2_{tile}"] = IntDistribution(0, top)
        for name in ("pack_a", "pack_b"):
            if name in free and name not in fix:
                self._dists[name] = CategoricalDistribution(("yes", "no"))

    def distributions(self) -> dict[str, BaseDistribution]:
        return dict(self._dists)

    def decode(self, sampled: Mapping[str, Any]) -> dict[str, Any]:
        config = dict(self._base)
        for tile in TILES:
            if f"log2_{tile}" in sampled:
                config[tile] = ALIGN << int(sampled[f"log2_{tile}"])
        config.update({k: v for k, v in sampled.items() if k in ("pack_a", "pack_b")})
        return {name: config[name] for name in self._space.params()}
