"""Design space of batched GEMM on Ascend NPUs: every branch of the BMM tiling design, not only
the one its rules pick.

A config says how the cores split the work (``branch``; ``grid_k`` for StreamK's K split,
``merge_b0`` for MergeBatch, ``cores`` for leaving cores idle), the tiles at each level (L0:
``base_m/n/k``; L1: ``single_core_m/n`` and ``k_l1``), buffer depths (``l1_buffers``,
``l0c_buffers``), the sliding-window snake swizzle (``window``, ``swizzle``), the L2 execution
groups (``group_m/n`` blocks, 0 for none) and where outputs go (``write_policy``). Parameters a
branch does not use are neutral (1 or the target's full core count) and checked to be.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution

from dse.core.params import ChoiceParam, ConfigBatch, IntParam, Param, Rule
from dse.core.space import SearchSpace
from dse.core.tree import product
from dse.core.workload import BatchedGemmWorkload
from search_spaces.ascend_bmm.geometry import BRANCH, Geometry, geometry
from search_spaces.ascend_bmm.rules import BRANCHES, largest_divisor
from search_spaces.ascend_bmm.target import FP32_BYTES, AscendTarget
from search_spaces.ascend_bmm.tiling import rule_config

TILES = ("base_m", "base_n", "base_k")
# What the Ascend model reports of where a config's time went, beyond t_comp and t_mem.
TIME_PARTS = {"t_drain_s": "drain (exposed at the end)", "t_mte1_s": "L1 -> L0 (MTE1)",
              "t_fixpipe_s": "write-out (Fixpipe)", "t_cmd_s": "DMA commands",
              "t_boundary_s": "block boundaries", "t_reduce_s": "StreamK reduction",
              "t_rearrange_s": "fold rearrangement"}
BLOCKS = ("single_core_m", "single_core_n", "k_l1")
ENUMERATED_BASES = (16, 32, 64, 96, 128, 176, 256)
ENUMERATED_BASE_K = (16, 32, 64, 128, 256)
ENUMERATED_MULTIPLES = (1, 2, 4, 5, 8)
ENUMERATED_K_MULTIPLES = (1, 2, 4)


def _params(target: AscendTarget) -> dict[str, Param]:
    c = target.cores.cube
    params: list[Param] = [
        ChoiceParam("branch", "how the cores split the work (the design's six branches, "
                    "ASW with and without idle cores)", BRANCHES),
        IntParam("base_m", "L0 tile rows (multiple of 16)", 16),
        IntParam("base_n", "L0 tile columns (multiple of 16)", 16),
        IntParam("base_k", "L0 tile depth (multiple of 16)", 16),
        IntParam("single_core_m", "rows of a core's output block (whole L0 tiles)", 16),
        IntParam("single_core_n", "columns of a core's output block (whole L0 tiles)", 16),
        IntParam("k_l1", "depth of one GM->L1 transfer (whole L0 tiles)", 16),
        IntParam("l1_buffers", "L1 copies of the block's inputs: 2 (double) or 4 (quad)", 2, 4),
        IntParam("l0c_buffers", "L0C copies of the output tile: 1 or 2", 1, 2),
        IntParam("window", "block rows a swizzle window spans (divides the cores)", 1, c),
        ChoiceParam("swizzle", "which way windows run: m_first (windows of block rows) or "
                    "n_first (of block columns)", ("m_first", "n_first")),
        IntParam("group_m", "L2 execution group height in blocks (0: no groups)", 0),
        IntParam("group_n", "L2 execution group width in blocks (0: no groups)", 0),
        IntParam("grid_k", "cores sharing one block's K (StreamK; 1 otherwise)", 1, c),
        IntParam("merge_b0", "batches merged into one tile (MergeBatch; 1 otherwise)", 1),
        ChoiceParam("write_policy", "outputs through L2 or straight to GM", ("l2", "gm")),
        IntParam("cores", "Cube cores used", 1, c),
    ]
    return {p.name: p for p in params}


@dataclass(frozen=True)
class Context:
    """What a rule checks: the configs, their decomposition, the target and the workload."""

    batch: ConfigBatch
    geo: Geometry
    target: AscendTarget
    workload: BatchedGemmWorkload

    def __getitem__(self, name: str) -> np.ndarray:
        return self.batch[name]


def _branch_applies(x: Context) -> np.ndarray:
    w, branch = x.workload, x["branch"]
    allowed = np.ones(len(branch), dtype=bool)
    allowed &= (branch != BRANCH["to_matmul"]) | (min(w.batch_count_a, w.batch_count_b) == 1)
    allowed &= (branch != BRANCH["special"]) | (w.K <= 1)
    allowed &= ~np.isin(branch, [BRANCH["iter_batch"], BRANCH["merge_batch"]]) | (
        w.batch_a == w.batch_b)
    return allowed


def _why_branch(x: Context, i: int) -> str:
    name = BRANCHES[int(x["branch"][i])]
    return {"to_matmul": "to_matmul folds a side with one batch, and both sides have several",
            "special": "the vector-core path is for K <= 1",
            "iter_batch": "iter_batch needs the same batches on both sides (no broadcast)",
            "merge_batch": "merge_batch needs the same batches on both sides (no broadcast)",
            }.get(name, f"{name} does not apply")


def _neutral(x: Context) -> np.ndarray:
    branch, c = x["branch"], x.target.cores.cube
    ok = (x["grid_k"] >= 2) == (branch == BRANCH["stream_k"])
    ok &= (x["merge_b0"] >= 2) == (branch == BRANCH["merge_batch"])
    reduced = branch == BRANCH["asw_reduced_cores"]
    ok &= np.where(reduced, x["cores"] < c, x["cores"] == c)
    return ok


def _why_neutral(x: Context, i: int) -> str:
    name = BRANCHES[int(x["branch"][i])]
    return (f"{name}: grid_k >= 2 only with stream_k, merge_b0 >= 2 only with merge_batch, and "
            f"fewer than {x.target.cores.cube} cores only with asw_reduced_cores (got "
            f"grid_k={int(x['grid_k'][i])}, merge_b0={int(x['merge_b0'][i])}, "
            f"cores={int(x['cores'][i])})")


def _values(x: Context, names: Sequence[str], i: int) -> str:
    return ", ".join(f"{n}={int(x[n][i])}" for n in names)


def _rules(target: AscendTarget, workload: BatchedGemmWorkload) -> tuple[Rule, ...]:
    mem, rules, dt = target.memory, target.rules, workload.dtype.in_bytes
    align = rules.align

    def l1_bytes(x: Context) -> np.ndarray:
        return x["l1_buffers"] * (x["single_core_m"] + x["single_core_n"]) * x["k_l1"] * dt

    return (
        Rule("branch_applies", "the branch's preconditions on the shape hold",
             _branch_applies, _why_branch),
        Rule("branch_parameters", "StreamK's grid_k, MergeBatch's b0 and idle cores are used "
             "by their own branch only", _neutral, _why_neutral),
        Rule("alignment", "tiles are multiples of 16 and blocks whole L0 tiles",
             lambda x: ((x["base_m"] % align == 0) & (x["base_n"] % align == 0)
                        & (x["base_k"] % align == 0) & (x["single_core_m"] % x["base_m"] == 0)
                        & (x["single_core_n"] % x["base_n"] == 0)
                        & (x["k_l1"] % x["base_k"] == 0)),
             lambda x, i: "tiles must be multiples of 16 and blocks whole tiles: "
                          + _values(x, (*TILES, *BLOCKS), i)),
        Rule("l0c_capacity", "the L0C copies of the output tile fit L0C (FP32)",
             lambda x: x["base_m"] * x["base_n"] * FP32_BYTES * x["l0c_buffers"]
             <= mem.l0c_bytes,
             lambda x, i: f"{int(x['l0c_buffers'][i])} x {int(x['base_m'][i])} x "
                          f"{int(x['base_n'][i])} x 4 B exceeds L0C ({mem.l0c_bytes:,} B)"),
        Rule("l0ab_capacity", "two copies of the L0A and L0B tiles fit",
             lambda x: (2 * x["base_m"] * x["base_k"] * dt <= mem.l0a_bytes)
             & (2 * x["base_k"] * x["base_n"] * dt <= mem.l0b_bytes),
             lambda x, i: f"double-buffered L0 tiles {_values(x, TILES, i)} need "
                          f"{int(2 * x['base_m'][i] * x['base_k'][i] * dt):,} B of L0A and "
                          f"{int(2 * x['base_k'][i] * x['base_n'][i] * dt):,} B of L0B "
                          f"({mem.l0a_bytes:,} B each)"),
        Rule("l1_capacity", "the block's inputs, l1_buffers copies, fit L1",
             lambda x: l1_bytes(x) <= mem.l1_bytes,
             lambda x, i: f"{int(x['l1_buffers'][i])} x ({int(x['single_core_m'][i])} + "
                          f"{int(x['single_core_n'][i])}) x {int(x['k_l1'][i])} x {dt} B = "
                          f"{int(l1_bytes(x)[i]):,} B exceeds L1 ({mem.l1_bytes:,} B)"),
        Rule("d_value", f"a GM->L1 run along K is at least {rules.d_value_min_bytes} B "
             "(or the whole K)",
             lambda x: (x["k_l1"] * dt >= rules.d_value_min_bytes) | (x["k_l1"] >= workload.K),
             lambda x, i: f"k_l1={int(x['k_l1'][i])} gives {int(x['k_l1'][i] * dt)} B runs, "
                          f"below the {rules.d_value_min_bytes} B that keeps GM bandwidth"),
        Rule("within_problem", "tiles no larger than the (16-aligned) problem",
             lambda x: ((x["single_core_m"] < x.geo.m + x["base_m"])
                        & (x["single_core_n"] < x.geo.n + x["base_n"])
                        & (x["k_l1"] < x.geo.k_seg + x["base_k"])),
             lambda x, i: f"a block larger than the problem by a whole tile: "
                          f"{_values(x, BLOCKS, i)} for {int(x.geo.m[i])} x {int(x.geo.n[i])}"
                          f" x {int(x.geo.k_seg[i])} per core"),
        Rule("merge_fits_l0c", "MergeBatch: the merged output block, double-buffered, fits L0C",
             lambda x: (x["branch"] != BRANCH["merge_batch"])
             | (2 * x.geo.m * x.geo.n * FP32_BYTES <= mem.l0c_bytes),
             lambda x, i: f"merging {int(x['merge_b0'][i])} batches makes a "
                          f"{int(x.geo.m[i])} x {int(x.geo.n[i])} output, over half of L0C"),
        Rule("stream_k_segments", "StreamK: each core's K segment is a whole transfer of at "
             f"least {rules.d_value_min_bytes} B",
             lambda x: (x["branch"] != BRANCH["stream_k"])
             | ((x.geo.k_seg >= x["k_l1"]) & (x.geo.k_seg * dt >= rules.d_value_min_bytes)),
             lambda x, i: f"grid_k={int(x['grid_k'][i])} leaves {int(x.geo.k_seg[i])} of K "
                          "a core, less than one transfer"),
        Rule("swizzle_window", "the window divides the cores and spans at most the block rows",
             lambda x: (x["cores"] % x["window"] == 0) & (x["window"] <= np.maximum(
                 np.where(x["swizzle"] == 0, x.geo.m_cnt, x.geo.n_cnt), 1)),
             lambda x, i: f"window={int(x['window'][i])} must divide cores="
                          f"{int(x['cores'][i])} and not exceed the blocks it spans"),
        Rule("l2_groups", "an L2 group is at most the block grid (and 0 only with 0)",
             lambda x: ((x["group_m"] == 0) == (x["group_n"] == 0))
             & (x["group_m"] <= x.geo.m_cnt) & (x["group_n"] <= x.geo.n_cnt),
             lambda x, i: f"group {int(x['group_m'][i])} x {int(x['group_n'][i])} blocks for "
                          f"a {int(x.geo.m_cnt[i])} x {int(x.geo.n_cnt[i])} block grid"),
    )


class AscendBmmSpace(SearchSpace):
    """Every branch's tiling of a batched GEMM on one Ascend target."""

    name = "ascend_bmm"
    workload_kind = "bmm"
    # the branch, the L0 tile and a core's block
    kernel_keys = ("branch", *TILES, *BLOCKS)
    tile_axes = ("single_core_m", "single_core_n", "k_l1")
    time_parts = TIME_PARTS

    def __init__(self, target: AscendTarget, workload: BatchedGemmWorkload,
                 extra_constraints: Sequence[str] = ()) -> None:
        self._accept(target, workload, extra_constraints)
        self.target, self.workload = target, workload
        self._params = _params(target)
        self.constraints = _rules(target, workload)
        self._defaults = rule_config(target, workload)

    def defaults(self) -> dict[str, Any]:
        """The configuration the design's rules pick (every parameter has a default)."""
        return dict(self._defaults)

    def describe(self, params: Mapping[str, Any]) -> str:
        """The branch, the L0 tile and a core's block, e.g. ``asw L0 128x64x256 block
        512x256x256``."""
        if not all(k in params for k in self.kernel_keys):
            return super().describe(params)
        return (f"{params['branch']} L0 " + "x".join(str(params[k]) for k in
                                                     ("base_m", "base_k", "base_n"))
                + " block " + "x".join(str(params[k]) for k in
                                       ("single_core_m", "k_l1", "single_core_n")))

    def what_if_knobs(self) -> dict[str, Callable[[float], AscendTarget]]:
        """GM bandwidth, L1 size and the clock (the Cube's rates scale with it) by a factor."""
        t = self.target
        return {
            "GM bandwidth": lambda f: t.with_values(
                bandwidth={"gm_bytes_per_s": t.bandwidth.gm_bytes_per_s * f}),
            "L1 size": lambda f: t.with_values(memory={"l1_bytes": int(t.memory.l1_bytes * f)}),
            "clock": lambda f: t.with_values(
                cores={"clock_hz": t.cores.clock_hz * f},
                compute={"cube_peak_flops": t.compute.cube_peak_flops * f,
                         "cube_sustained_flops": t.compute.cube_sustained_flops * f})}

    def _context(self, batch: ConfigBatch) -> Context:
        geo = geometry(batch, self.workload, self.target.cores.cube,
                       self.workload.dtype.in_bytes)
        return Context(batch, geo, self.target, self.workload)

    def _domain(self, name: str) -> list[Any]:
        param = self._params[name]
        if isinstance(param, ChoiceParam):
            return list(param.choices)
        c = self.target.cores.cube
        if name == "window":
            return [d for d in range(1, c + 1) if c % d == 0]
        if name in ("grid_k", "cores"):
            return sorted({1, 2, 4, 8, 16, c})
        return {"l1_buffers": [2, 4], "l0c_buffers": [1, 2], "merge_b0": [1, 2, 4, 8],
                "group_m": [0, 1, 2, 4, 8], "group_n": [0, 1, 2, 4, 8]}.get(name, [])

    def chunks(self, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = ()) -> Iterator[tuple[ConfigBatch, int]]:
        """Per branch (the rules' choice first): L0 tiles from a ladder of sizes, blocks and
        k_l1 as whole multiples of them; other parameters at the rules' values unless fixed or
        listed in ``free``."""
        fixed, free = self._fixed_and_free(fix, free)
        base = {**self._defaults, **fixed}
        first = base["branch"]
        branches = [first, *(b for b in BRANCHES if b != first)]
        if "branch" in fixed:
            branches = [fixed["branch"]]
        others = [p for p in self._params if p not in (*TILES, *BLOCKS, "branch")]
        for branch in branches:
            neutral = self._branch_neutral(branch, base)
            choices = [self._domain(p) if p in free else [neutral[p]] for p in others]
            tiles = [[fixed[t]] if t in fixed else list(
                ENUMERATED_BASE_K if t == "base_k" else ENUMERATED_BASES) for t in TILES]
            # the product, in the order of nested loops over tiles, multiples, then the others
            axes = {**dict(zip(TILES, tiles, strict=True)), "sm": ENUMERATED_MULTIPLES,
                    "sn": ENUMERATED_MULTIPLES, "kk": ENUMERATED_K_MULTIPLES,
                    **{p: [self._params[p].encode(v) for v in values]
                       for p, values in zip(others, choices, strict=True)}}
            grid = product(axes)
            size = len(grid["sm"])
            batch = {"branch": np.full(size, self._params["branch"].encode(branch)),
                     **{t: grid[t] for t in TILES}, **{p: grid[p] for p in others}}
            for name, tile, multiple in (("single_core_m", "base_m", "sm"),
                                         ("single_core_n", "base_n", "sn"),
                                         ("k_l1", "base_k", "kk")):
                batch[name] = (np.full(size, fixed[name]) if name in fixed
                               else grid[tile] * grid[multiple])
            yield {n: batch[n].astype(np.int64) for n in self._params}, size

    def _branch_neutral(self, branch: str, base: Mapping[str, Any]) -> dict[str, Any]:
        """``base`` with the branch-only parameters set as ``branch`` needs them."""
        out = dict(base)
        c = self.target.cores.cube
        out["grid_k"] = max(2, base["grid_k"]) if branch == "stream_k" else 1
        out["merge_b0"] = max(2, base["merge_b0"]) if branch == "merge_batch" else 1
        out["cores"] = (min(base["cores"], c - 1) if branch == "asw_reduced_cores" else c)
        out["window"] = largest_divisor(out["cores"], base["window"])
        return out

    def n_chunks(self, free: Iterable[str] = ()) -> int:
        return len(BRANCHES)

    def optuna_encoding(self, fix: Mapping[str, Any], free: Sequence[str],
                        ranges: Mapping[str, tuple[int, int]]) -> AscendEncoding:
        return AscendEncoding(self, self.parse(fix), ranges)


class AscendEncoding:
    """Samples the branch and its own parameters, then the tiles level by level inside what the
    levels above leave: each tile size is a fraction of its feasible range (L0C, L0A/L0B and
    L1 capacity, the problem's size, the 128 B run), so almost every sample is feasible. The
    parameters a branch does not use are set neutral."""

    FRACTIONS = ("base_m", "base_n", "base_k", "single_core_m", "single_core_n", "k_l1",
                 "window", "group_m", "group_n", "grid_k", "merge_b0", "cores")

    def __init__(self, space: AscendBmmSpace, fix: Mapping[str, Any],
                 ranges: Mapping[str, tuple[int, int]]) -> None:
        self._space, self._fix, self._ranges = space, dict(fix), dict(ranges)
        dims: dict[str, BaseDistribution] = {
            "branch": CategoricalDistribution(tuple(_applicable(space))),
            "l1_buffers": CategoricalDistribution((2, 4)),
            "l0c_buffers": CategoricalDistribution((1, 2)),
            "swizzle": CategoricalDistribution(("m_first", "n_first")),
            "write_policy": CategoricalDistribution(("l2", "gm")),
            "use_groups": CategoricalDistribution((False, True)),
            **{f"{name}_fraction": FloatDistribution(0.0, 1.0) for name in self.FRACTIONS}}
        self._dists = {k: v for k, v in dims.items()
                       if k.removesuffix("_fraction") not in fix and k not in fix}

    def distributions(self) -> dict[str, BaseDistribution]:
        return dict(self._dists)

    def _pick(self, name: str, sampled: Mapping[str, Any], low: float, high: float,
              step: int = 1) -> int:
        """A multiple of ``step`` in [low, high] (inside the study's range for ``name``) at the
        sampled fraction of the way up."""
        if name in self._fix:
            return int(self._fix[name])
        lo_r, hi_r = self._ranges.get(name, (low, high))
        low, high = max(low, lo_r), min(high, hi_r)
        lo, hi = int(np.ceil(low / step)), max(int(np.ceil(low / step)), int(high // step))
        fraction = float(sampled.get(f"{name}_fraction", 0.0))
        return step * min(hi, lo + int(fraction * (hi - lo + 1)))

    def decode(self, sampled: Mapping[str, Any]) -> dict[str, Any]:
        s = self._space
        t, w, mem = s.target, s.workload, s.target.memory
        c, dt = t.cores.cube, w.dtype.in_bytes
        config = {**s.defaults(),
                  **{k: v for k, v in sampled.items() if k in s.params()}, **self._fix}
        branch = config["branch"]
        # b0 within the batches a core has and the merged output's L0C room; grid_k within
        # the cores and K segments of at least the minimum run
        most_b0 = min(max(2, w.batch // c), max(2, int(np.sqrt(
            mem.l0c_bytes / (2 * w.M * w.N * FP32_BYTES)))))
        config["merge_b0"] = (self._pick("merge_b0", sampled, 2, most_b0)
                              if branch == "merge_batch" else 1)
        most_k = min(c, max(2, w.K * dt // t.rules.d_value_min_bytes))
        config["grid_k"] = (self._pick("grid_k", sampled, 2, most_k)
                            if branch == "stream_k" else 1)
        config["cores"] = (self._pick("cores", sampled, 1, c - 1)
                           if branch == "asw_reduced_cores" else c)
        one = s._context(s.encode([{**config, "single_core_m": 16, "single_core_n": 16,
                                    "base_m": 16, "base_n": 16}])).geo
        m16, n16 = np.ceil(one.m[0] / 16) * 16, np.ceil(one.n[0] / 16) * 16
        k16 = np.ceil(one.k_seg[0] / 16) * 16
        area = mem.l0c_bytes / (FP32_BYTES * config["l0c_buffers"])
        run = t.rules.d_value_min_bytes / dt
        thinnest = mem.l1_bytes / (config["l1_buffers"] * run * dt) - 16  # leaves N 16 wide
        config["base_m"] = self._pick("base_m", sampled, 16, min(
            m16, area / 16, mem.l0a_bytes / (2 * 16 * dt), thinnest), 16)
        config["base_n"] = self._pick("base_n", sampled, 16, min(
            n16, area / config["base_m"], mem.l0b_bytes / (2 * 16 * dt),
            thinnest + 16 - config["base_m"]), 16)
        config["base_k"] = self._pick("base_k", sampled, 16, min(
            k16, mem.l0a_bytes / (2 * config["base_m"] * dt),
            mem.l0b_bytes / (2 * config["base_n"] * dt)), 16)
        run = min(k16, np.ceil(t.rules.d_value_min_bytes / dt / config["base_k"])
                  * config["base_k"])
        widest = mem.l1_bytes / (config["l1_buffers"] * run * dt)  # single_core_m + _n
        config["single_core_m"] = self._pick(
            "single_core_m", sampled, config["base_m"],
            max(config["base_m"], min(np.ceil(m16 / config["base_m"]) * config["base_m"],
                                      widest - config["base_n"])), config["base_m"])
        config["single_core_n"] = self._pick(
            "single_core_n", sampled, config["base_n"],
            max(config["base_n"], min(np.ceil(n16 / config["base_n"]) * config["base_n"],
                                      widest - config["single_core_m"])), config["base_n"])
        deepest = mem.l1_bytes / (config["l1_buffers"] * dt
                                  * (config["single_core_m"] + config["single_core_n"]))
        config["k_l1"] = self._pick("k_l1", sampled, run, max(run, min(
            np.ceil(k16 / config["base_k"]) * config["base_k"], deepest)), config["base_k"])
        m_cnt = int(np.ceil(one.m[0] / config["single_core_m"]))
        n_cnt = int(np.ceil(one.n[0] / config["single_core_n"]))
        along = m_cnt if config["swizzle"] == "m_first" else n_cnt
        windows = [d for d in range(1, config["cores"] + 1)
                   if config["cores"] % d == 0 and d <= max(along, 1)]
        config["window"] = (int(self._fix["window"]) if "window" in self._fix else windows[
            min(len(windows) - 1, int(float(sampled.get("window_fraction", 0)) * len(windows)))])
        if sampled.get("use_groups", False) and "group_m" not in self._fix:
            config["group_m"] = self._pick("group_m", sampled, 1, m_cnt)
            config["group_n"] = self._pick("group_n", sampled, 1, n_cnt)
        elif "group_m" not in self._fix:
            config["group_m"] = config["group_n"] = 0
        return {name: config[name] for name in s.params()}


def _applicable(space: AscendBmmSpace) -> list[str]:
    """The branches whose preconditions the workload meets (MergeBatch: with the smallest
    merge fitting L0C)."""
    defaults = space.defaults()
    batch = space.encode([space._branch_neutral(b, {**defaults, "branch": b})
                          for b in BRANCHES])
    context = space._context(batch)
    ok = _branch_applies(context)
    ok &= next(r for r in space.constraints if r.name == "merge_fits_l0c").check(context)
    return [b for b, good in zip(BRANCHES, ok, strict=True) if good]
