"""Fixed Optuna distributions for the XDNA GEMM space, and their decoding into configs.

Optuna cannot change a parameter's domain between trials, while the tile sizes that fit depend
on one another. So the sampled values are fixed-domain coordinates that decode into tiles:

* ``m_blocks`` / ``n_blocks`` (log-uniform integers): how many blocks of m_ct * (A tiles in
  parallel) rows and n_ct * (B tiles in parallel) columns cover M and N. Each decodes to the
  smallest aligned tile giving that many blocks: a larger tile with the same block count only
  pads more (same B or A traffic per block, more padded work and L1), so nothing better is lost.
  Block counts whose tile cannot fit L1 even beside the smallest other tile are not sampled;
* ``k_frac`` in [0, 1]: k_ct up to the largest that fits L1 with m_ct and n_ct;
* ``k_mt_blocks`` (log-uniform integer): how many k_mt blocks cover K; decodes to the smallest
  multiple of k_ct giving that many (too few blocks overflow L2 and are rejected).

Fixed parameters are not sampled; ranges narrow the bounds; what the remaining rules still reject
is reported as infeasible with its reason. Free non-tile parameters are sampled as themselves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from dse.core.params import ChoiceParam, IntParam, Param
from dse.core.workload import GemmWorkload
from search_spaces.xdna_gemm.enumeration import l1_max_k
from search_spaces.xdna_gemm.params import TILE_PARAMS
from search_spaces.xdna_gemm.target import XdnaTarget

_UNIT = FloatDistribution(0.0, 1.0)


def _pick(frac: float, lo: int, hi: int) -> int:
    """The integer at fraction ``frac`` of [lo, hi] (lo when the range is empty)."""
    if hi <= lo:
        return lo
    return min(lo + int(frac * (hi - lo + 1)), hi)


class OptunaEncoding:
    """Maps between Optuna's sampled values and full parameter dicts of one workload."""

    def __init__(self, target: XdnaTarget, workload: GemmWorkload, params: Mapping[str, Param],
                 defaults: Mapping[str, Any], fix: Mapping[str, Any], free: Sequence[str],
                 ranges: Mapping[str, tuple[int, int]]) -> None:
        self._target, self._workload = target, workload
        self._params = params
        self._base = {**defaults, **fix}
        self._fix = dict(fix)
        self._ranges = dict(ranges)
        spec = target.input_spec(workload.dtype.input)
        self._m_step, self._n_step = spec.r * spec.expand_r, spec.t * spec.expand_t
        self._k_step = spec.s
        self._dists: dict[str, BaseDistribution] = {}
        for tile, blocks in (("m_ct", "m_blocks"), ("n_ct", "n_blocks")):
            if tile not in fix:
                most = self._most_blocks(tile, free)
                self._dists[blocks] = IntDistribution(self._fewest_blocks(tile, most, free),
                                                      most, log=True)
        if "k_ct" not in fix:
            self._dists["k_frac"] = _UNIT
        if "k_mt" not in fix:
            self._dists["k_mt_blocks"] = IntDistribution(
                1, max(math.ceil(workload.K / self._k_step), 1), log=True)
        for name in free:
            if name in TILE_PARAMS or name in fix:
                continue
            param = params[name]
            if isinstance(param, ChoiceParam):
                self._dists[name] = CategoricalDistribution(param.choices)
            elif isinstance(param, IntParam) and param.hi is not None:
                self._dists[name] = IntDistribution(param.lo, param.hi)

    def _parallel(self, config: Mapping[str, Any]) -> tuple[int, int]:
        """(A tiles, B tiles) computed in parallel: the m_ct and n_ct multipliers of a block."""
        return int(config["m_rows"]), int(config["n_cols"])

    def _most_blocks(self, name: str, free: Sequence[str]) -> int:
        """Blocks of the smallest aligned tile (with one tile in parallel when that is free)."""
        size = self._workload.M if name == "m_ct" else self._workload.N
        step = self._m_step if name == "m_ct" else self._n_step
        parallel = 1 if {"m_rows", "n_cols"} & set(free) else self._parallel(self._base)[
            0 if name == "m_ct" else 1]
        lo = self._ranges.get(name, (step, 0))[0]
        return max(math.ceil(size / (max(math.ceil(lo / step), 1) * step * parallel)), 1)

    def _fewest_blocks(self, name: str, most: int, free: Sequence[str]) -> int:
        """The fewest blocks whose tile fits L1 beside the other side's smallest tile at the
        smallest k_ct: fewer (larger tiles) never fit, so they are not sampled (on a chip with
        a small L1 they would be nearly every sample)."""
        if {"m_rows", "n_cols"} & set(free):
            return 1  # the tile for a block count shrinks with the parallelism sampled
        buffers = {b: self._params[b].lo if b in free else self._base[b]
                   for b in ("buf_a_l1", "buf_b_l1", "buf_c_l1")}
        other = self._n_step if name == "m_ct" else self._m_step
        for blocks in range(1, most + 1):
            tile = self._tile(name, blocks, self._base)
            m, n = (tile, other) if name == "m_ct" else (other, tile)
            if l1_max_k(m, n, self._target, self._workload, buffers) >= self._k_step:
                return blocks
        return most

    def _tile(self, name: str, blocks: int, config: Mapping[str, Any]) -> int:
        """The smallest aligned tile that covers the dimension in ``blocks`` blocks."""
        size = self._workload.M if name == "m_ct" else self._workload.N
        step = self._m_step if name == "m_ct" else self._n_step
        parallel = self._parallel(config)[0 if name == "m_ct" else 1]
        tile = math.ceil(size / (blocks * parallel * step)) * step
        lo, hi = self._ranges.get(name, (step, tile))
        return min(max(tile, math.ceil(lo / step) * step), max(hi // step, 1) * step)

    def distributions(self) -> dict[str, BaseDistribution]:
        return dict(self._dists)

    def decode(self, sampled: Mapping[str, Any]) -> dict[str, Any]:
        """The full parameter dict of a sampled point."""
        config = dict(self._base)
        for name, value in sampled.items():
            if name in self._params:
                config[name] = value
        if "m_blocks" in sampled:
            config["m_ct"] = self._tile("m_ct", int(sampled["m_blocks"]), config)
        if "n_blocks" in sampled:
            config["n_ct"] = self._tile("n_ct", int(sampled["n_blocks"]), config)
        m = config["m_ct"]
        if "k_frac" in sampled:
            k_hi = int(l1_max_k(m, config["n_ct"], self._target, self._workload, config))
            config["k_ct"] = self._ranged("k_ct", sampled["k_frac"], self._k_step, k_hi)
        if "k_mt_blocks" in sampled:
            # the smallest multiple of k_ct that covers K in that many blocks
            k = config["k_ct"]
            kmt = math.ceil(self._workload.K / (int(sampled["k_mt_blocks"]) * k)) * k
            lo, hi = self._ranges.get("k_mt", (k, kmt))
            config["k_mt"] = min(max(kmt, math.ceil(lo / k) * k), max(hi // k, 1) * k)
        return {name: config[name] for name in self._params}

    def _ranged(self, name: str, frac: float, step: int, largest: int) -> int:
        lo, hi = self._ranges.get(name, (step, largest))
        lo_i, hi_i = max(math.ceil(lo / step), 1), min(hi, largest) // step
        return _pick(float(frac), lo_i, hi_i) * step
