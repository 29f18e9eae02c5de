"""The XDNA space as a search tree with upper bounds of the analytical model (exact search).

Levels: how the array is used (m_rows, n_cols, orientation) with B's layout; the tile's rows
and columns (m_ct, n_ct); the whole tile (k_ct, k_mt); below it the buffer depths and the BD
scheme. Bounds follow from the model's structure (``evaluators/analytical/xdna_gemm.py``):

* a group's bound is its cores at the kernel's peak plus the fixed dispatch, and C written once
  at DRAM's peak;
* an (m_ct, n_ct) bound takes the deepest k_ct that fits L1 (a call's fixed costs amortised
  best), K unpadded, and every DRAM stream at DRAM's peak;
* a tile's bound is the model itself with the deepest allowed buffers and the overlapped BD
  scheme: a depth-1 buffer only adds serialisation, the sequential scheme only adds BD time.

Depth 3 of a buffer scores exactly as depth 2 and uses more memory, and the sequential BD scheme
is slower than the overlapped one, so neither is enumerated: both rank after the config they
differ from, and :meth:`XdnaTree.shadows` supplies them for the best configs found. Only configs
that fit L1 and L2 with the smallest allowed buffers are generated (the capacity rules are
monotone in every tile size and buffer depth); every rule still runs on what is scored.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dse.core import ConfigBatch, Nodes, Param, SearchTree, cross, product
from dse.core.workload import GemmWorkload
from search_spaces.xdna_gemm.constraints import ARRAY_RULES
from search_spaces.xdna_gemm.enumeration import (
    l1_max_k,
    max_k_mt_multiple,
    ordinal,
    tile_domains,
)
from search_spaces.xdna_gemm.geometry import ceil_div
from search_spaces.xdna_gemm.params import BUFFER_PARAMS, TILE_PARAMS
from search_spaces.xdna_gemm.target import XdnaTarget

GROUP = ("m_rows", "n_cols", "orientation", "b_layout")
OVERLAPPED, SEQUENTIAL = 0, 1  # codes of bd_scheme's choices
SHADOW_DEPTH, KEPT_DEPTH = 3, 2

Score = Callable[[ConfigBatch, XdnaTarget, GemmWorkload], dict[str, np.ndarray]]
Satisfies = Callable[[str, ConfigBatch], np.ndarray]


def _repeat(batch: ConfigBatch, counts: np.ndarray) -> ConfigBatch:
    return {n: np.repeat(v, counts) for n, v in batch.items()}


class XdnaTree(SearchTree):
    """The space of :class:`~search_spaces.xdna_gemm.space.XdnaGemmSpace` with ``allowed``
    codes per parameter (tile sizes: the fixed one, or absent when free)."""

    levels = ("array use and B layout", "tile rows x columns (m_ct, n_ct)",
              "tile (k_ct, k_mt)")

    def __init__(self, target: XdnaTarget, workload: GemmWorkload, params: Mapping[str, Param],
                 allowed: Mapping[str, list[int]], score: Score, satisfies: Satisfies,
                 box: int) -> None:
        self.target, self.workload, self.params = target, workload, params
        self.allowed, self.score_model, self.satisfies = allowed, score, satisfies
        self.box = box
        self.spec = target.input_spec(workload.dtype.input)
        # the smallest allowed buffers bound what fits; the deepest bound the speed
        self.smallest = {b: min(allowed[b]) for b in BUFFER_PARAMS}
        self.deepest = {b: max(allowed[b]) for b in BUFFER_PARAMS}
        self.bd_best = OVERLAPPED if OVERLAPPED in allowed["bd_scheme"] else SEQUENTIAL
        self.shadowed = [b for b in BUFFER_PARAMS
                         if {KEPT_DEPTH, SHADOW_DEPTH} <= set(allowed[b])]
        self.bd_shadowed = set(allowed["bd_scheme"]) == {OVERLAPPED, SEQUENTIAL}
        self.dominated = {
            **{b: "depth 3 scores as depth 2 and takes more memory" for b in self.shadowed},
            **({"bd_scheme": "sequential is slower than overlapped (BD reconfiguration)"}
               if self.bd_shadowed else {})}

    # -- level 0: array use -----------------------------------------------------------------
    def roots(self) -> Nodes:
        groups = product({g: self.allowed[g] for g in GROUP})
        probe = self._with_tiles(groups, self.spec.r, self.spec.s, self.spec.t, self.spec.s)
        fits = np.ones(len(groups["m_rows"]), dtype=bool)
        for rule in ARRAY_RULES:
            fits &= self.satisfies(rule, probe)
        keys = {n: v[fits] for n, v in groups.items()}
        return Nodes(keys, self._group_bound(keys))

    def _group_bound(self, g: ConfigBatch) -> np.ndarray:
        w, spec, t = self.workload, self.spec, self.target
        cores = g["m_rows"] * g["n_cols"]
        t_comp = w.macs / (cores * spec.peak_macs_per_cycle * spec.mac_efficiency
                           * t.array.clock_hz)
        t_c = w.M * w.N * w.dtype.out_bytes / self._write_peak()
        return self._tops(np.maximum(t_comp, t_c))

    # -- level 1: (m_ct, n_ct) --------------------------------------------------------------
    def expand(self, level: int, nodes: Nodes) -> Nodes | ConfigBatch:
        if level == 0:
            return self._pairs(nodes.keys)
        if level == 1:
            return self._tiles(nodes.keys)
        return self._configs(nodes.keys)

    def _pairs(self, groups: ConfigBatch) -> Nodes:
        spec, fixed = self.spec, self.allowed
        hi = tile_domains(self.target, self.workload, self.smallest)
        m_step, n_step = spec.r * spec.expand_r, spec.t * spec.expand_t
        ms = fixed.get("m_ct", np.arange(m_step, hi["m_ct"] + 1, m_step))
        ns = fixed.get("n_ct", np.arange(n_step, hi["n_ct"] + 1, n_step))
        pairs = product({"m_ct": ms, "n_ct": ns})
        k_max = self._k_max(pairs["m_ct"], pairs["n_ct"])
        pairs = {n: v[k_max > 0] for n, v in pairs.items()}
        keys = cross(groups, pairs)
        return Nodes(keys, self._pair_bound(keys))

    def _k_max(self, m: np.ndarray, n: np.ndarray) -> np.ndarray:
        """The deepest k_ct each (m_ct, n_ct) can take (0: none fits L1)."""
        s = self.spec.s
        deepest = l1_max_k(m, n, self.target, self.workload, self.smallest) // s * s
        if "k_ct" in self.allowed:
            k = self.allowed["k_ct"][0]
            return np.where(deepest >= k, k, 0)
        return deepest

    def _pair_bound(self, p: ConfigBatch) -> np.ndarray:
        w, spec, t = self.workload, self.spec, self.target
        ty_a = ty_b = w.dtype.in_bytes
        ty_c = w.dtype.out_bytes
        m, n = p["m_ct"].astype(np.float64), p["n_ct"].astype(np.float64)
        a_par, b_par = p["m_rows"], p["n_cols"]
        clock, dma, cost = t.array.clock_hz, t.dma.channel_bytes_per_cycle, t.kernel
        m_pad = ceil_div(w.M, p["m_ct"] * a_par) * m * a_par
        n_pad = ceil_div(w.N, p["n_ct"] * b_par) * n * b_par
        rounds = m_pad / (m * a_par) * n_pad / (n * b_par)
        # one call's cycles are alpha per unit of k_ct plus beta: fixed costs amortised best
        # at the deepest k_ct; calls * k_ct covers at least K
        alpha = m * n / (spec.peak_macs_per_cycle * spec.mac_efficiency)
        if spec.convert_to_bfp16:
            alpha = alpha + m * n * (1 / (spec.t * spec.expand_t) + 1 / (spec.r * spec.expand_r)
                                     ) / cost.convert_elements_per_cycle
        beta = m * n * (cost.out_cycles_per_element + cost.out_cycles_per_byte * ty_c)
        beta = beta + cost.call_cycles
        k_max = self._k_max(p["m_ct"], p["n_ct"]).astype(np.float64)
        per_round = w.K * np.maximum(alpha + beta / k_max, np.maximum(m * ty_a, n * ty_b) / dma)
        zero = m * n * ty_c / cost.zero_bytes_per_cycle
        t_core = rounds * (per_round + zero) / clock
        read_peak = t.dram.peak_bytes_per_s
        t_mem = (m_pad * w.K * n_pad * (ty_a / (n * b_par) + ty_b / (m * a_par)) / read_peak
                 + m_pad * n_pad * ty_c / self._write_peak())
        s = spec.s
        t_fill = ((a_par * m * s * ty_a + b_par * s * n * ty_b) / read_peak
                  + np.maximum(m * s * ty_a, s * n * ty_b) / dma / clock)
        cores = a_par * b_par
        t_last = m * n * ty_c / dma / clock + cores * m * n * ty_c / self._write_peak()
        return self._tops(np.maximum(t_core, t_mem) + t_fill + t_last)

    # -- level 2: (k_ct, k_mt) --------------------------------------------------------------
    def _tiles(self, pairs: ConfigBatch) -> Nodes:
        s = self.spec.s
        k_max = self._k_max(pairs["m_ct"], pairs["n_ct"])
        if "k_ct" in self.allowed:
            counts = (k_max > 0).astype(np.int64)
            with_k = _repeat(pairs, counts)
            with_k["k_ct"] = np.repeat(k_max, counts)
        else:
            counts = k_max // s
            with_k = _repeat(pairs, counts)
            with_k["k_ct"] = ordinal(counts) * s
        if "k_mt" in self.allowed:
            tiles = {**with_k, "k_mt": np.full(len(with_k["k_ct"]), self.allowed["k_mt"][0])}
        else:  # every multiple of k_ct that fits L2 with the smallest buffers
            probe = self._with_buffers(with_k, self.smallest)
            reps = max_k_mt_multiple(probe, self.target, self.workload).astype(np.int64)
            tiles = _repeat(with_k, reps)
            tiles["k_mt"] = ordinal(reps) * tiles["k_ct"]
        best = self._with_buffers(tiles, self.deepest)
        best["bd_scheme"] = np.full(len(tiles["k_ct"]), self.bd_best, dtype=np.int64)
        return Nodes(tiles, self.score_model(best, self.target, self.workload)["tops"])

    # -- the configs: buffer depths and BD scheme -------------------------------------------
    def _configs(self, tiles: ConfigBatch) -> ConfigBatch:
        kept = {b: [d for d in self.allowed[b] if not (b in self.shadowed and d == SHADOW_DEPTH)]
                for b in BUFFER_PARAMS}
        kept["bd_scheme"] = [self.bd_best] if self.bd_shadowed else list(self.allowed["bd_scheme"])
        batch = cross(tiles, product(kept))
        return {name: batch[name] for name in self.params}

    def shadows(self, batch: ConfigBatch) -> ConfigBatch:
        """The best configs' twins with depth 3 where they hold depth 2 and the sequential BD
        scheme where they hold the overlapped one (every combination, the configs themselves
        left out)."""
        dims = [(b, KEPT_DEPTH, SHADOW_DEPTH) for b in self.shadowed]
        if self.bd_shadowed:
            dims.append(("bd_scheme", OVERLAPPED, SEQUENTIAL))
        parts = []
        for pattern in itertools.product((False, True), repeat=len(dims)):
            if not any(pattern):
                continue
            chosen = [d for d, on in zip(dims, pattern, strict=True) if on]
            eligible = np.ones(len(batch["m_ct"]), dtype=bool)
            for name, kept, _ in chosen:
                eligible &= batch[name] == kept
            twin = {n: v[eligible].copy() for n, v in batch.items()}
            for name, _, shadow in chosen:
                twin[name][:] = shadow
            parts.append(twin)
        if not parts:
            return super().shadows(batch)
        return {n: np.concatenate([p[n] for p in parts]) for n in batch}

    # -- helpers ----------------------------------------------------------------------------
    def _with_tiles(self, groups: ConfigBatch, m: int, k: int, n: int, kmt: int) -> ConfigBatch:
        size = len(groups["m_rows"])
        probe = self._with_buffers(groups, self.smallest)
        probe.update({name: np.full(size, v, dtype=np.int64)
                      for name, v in zip(TILE_PARAMS, (m, k, n, kmt), strict=True)})
        probe["bd_scheme"] = np.full(size, self.bd_best, dtype=np.int64)
        return probe

    @staticmethod
    def _with_buffers(batch: ConfigBatch, depths: Mapping[str, int]) -> ConfigBatch:
        size = len(next(iter(batch.values())))
        return {**batch, **{b: np.full(size, d, dtype=np.int64) for b, d in depths.items()}}

    def _write_peak(self) -> float:
        return self.target.dram.peak_bytes_per_s * self.target.dram.write_efficiency

    def _tops(self, latency_lb: np.ndarray) -> np.ndarray:
        latency = latency_lb + self.target.overheads.dispatch_s
        return 2.0 * self.workload.macs / latency / 1e12


def tree_box(target: XdnaTarget, workload: GemmWorkload, allowed: Mapping[str, list[int]],
             steps: Mapping[str, int]) -> int:
    """Configs in the parameter box, as the space's chunks count it: per combination of the
    other parameters, the product of the tile sizes' ranges (only the L1 depths change them)."""
    others = [p for p in allowed if p not in TILE_PARAMS]
    l1 = ("buf_a_l1", "buf_b_l1", "buf_c_l1")
    rest = int(np.prod([len(allowed[p]) for p in others if p not in l1]))
    box = 0
    for depths in itertools.product(*(allowed[b] for b in l1)):
        hi = tile_domains(target, workload, {**dict(zip(l1, depths, strict=True)),
                                             **{b: 1 for b in BUFFER_PARAMS if b not in l1}})
        size = 1
        for p in TILE_PARAMS:
            size *= 1 if p in allowed else max(hi[p] // steps[p], 1)
        box += size * rest
    return box


def allowed_codes(params: Mapping[str, Param], defaults: Mapping[str, Any],
                  fixed: Mapping[str, Any], free: Sequence[str],
                  domain: Callable[[str], list[Any]]) -> dict[str, list[int]]:
    """Codes each parameter may take under ``fixed`` and ``free`` (tile sizes: only when
    fixed)."""
    allowed: dict[str, list[int]] = {}
    for name, param in params.items():
        if name in fixed:
            allowed[name] = [param.encode(fixed[name])]
        elif name in TILE_PARAMS:
            continue
        elif name in free:
            allowed[name] = [param.encode(v) for v in domain(name)]
        else:
            allowed[name] = [param.encode(defaults[name])]
    return allowed
