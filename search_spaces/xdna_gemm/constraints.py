"""Feasibility rules of the XDNA whole-array GEMM, vectorised, each with a readable reason.

Each rule has a vectorised ``check`` (True where satisfied) and an ``explain``
that says, with the numbers of one config, why it fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dse.core.params import ConfigBatch, Rule
from dse.core.workload import GemmWorkload
from search_spaces.xdna_gemm.geometry import Geometry, derive, l2_usage
from search_spaces.xdna_gemm.kernel import kernel_cycles
from search_spaces.xdna_gemm.target import XdnaTarget


@dataclass
class CheckContext:
    """A batch with its geometry, computed once and shared by all constraints."""

    batch: ConfigBatch
    target: XdnaTarget
    workload: GemmWorkload

    @cached_property
    def geo(self) -> Geometry:
        return derive(self.batch, self.target, self.workload)

    @cached_property
    def l2(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return l2_usage(self.batch, self.geo, self.target.memory.l2_neighbour_sharing)

    @property
    def l1_available(self) -> int:
        return self.target.memory.l1_bytes - self.target.memory.l1_stack_bytes


def _micro_tile(c: CheckContext) -> np.ndarray:
    g, sp = c.geo, c.geo.spec
    return (g.m % sp.r == 0) & (g.k % sp.s == 0) & (g.n % sp.t == 0) & (g.k > 0)


def _micro_tile_why(c: CheckContext, i: int) -> str:
    g, sp = c.geo, c.geo.spec
    bad = [f"{name}={int(v[i])} is not a positive multiple of {step}"
           for name, v, step in (("m_ct", g.m, sp.r), ("k_ct", g.k, sp.s), ("n_ct", g.n, sp.t))
           if v[i] <= 0 or v[i] % step]
    return (f"micro-tile: {', '.join(bad)} (the {c.workload.dtype.input} mmul on "
            f"{c.target.name} is r x s x t = {sp.r}x{sp.s}x{sp.t})")


def _register_blocking(c: CheckContext) -> np.ndarray:
    g, sp = c.geo, c.geo.spec
    return (g.m % (sp.r * sp.expand_r) == 0) & (g.n % (sp.t * sp.expand_t) == 0)


def _register_blocking_why(c: CheckContext, i: int) -> str:
    g, sp = c.geo, c.geo.spec
    mr, nt = sp.r * sp.expand_r, sp.t * sp.expand_t
    return (f"register blocking: the kernel computes {sp.expand_r}x{sp.expand_t} micro-tiles per "
            f"step, so m_ct must be a multiple of {mr} and n_ct of {nt} "
            f"(got m_ct={int(g.m[i])}, n_ct={int(g.n[i])})")


def _k_mt_multiple(c: CheckContext) -> np.ndarray:
    g = c.geo
    return (g.kmt > 0) & (g.kmt % np.maximum(g.k, 1) == 0)


def _k_mt_multiple_why(c: CheckContext, i: int) -> str:
    g = c.geo
    return (f"k_mt={int(g.kmt[i])} is not a positive multiple of k_ct={int(g.k[i])} "
            "(a MemTile tile is a whole number of L1 tiles along K)")


def _array_shape(c: CheckContext) -> np.ndarray:
    arr = c.target.array
    return (c.geo.rows_used <= arr.rows) & (c.geo.cols_used <= arr.cols)


def _array_shape_why(c: CheckContext, i: int) -> str:
    arr, g, b = c.target.array, c.geo, c.batch
    along = "columns (orientation a_cols)" if g.a_cols[i] else "rows (orientation a_rows)"
    return (f"array: m_rows={int(b['m_rows'][i])} x n_cols={int(b['n_cols'][i])} with A along "
            f"{along} needs {int(g.rows_used[i])} rows x {int(g.cols_used[i])} columns, but "
            f"{c.target.name} offers {arr.rows} x {arr.cols}")


def _memtile_s2mm(g: Geometry) -> np.ndarray:
    # The fullest MemTile receives its row-operand tiles as one stream (distributed to the rows
    # by its MM2S side), its column-operand tile, and one stream per joined C tile.
    return 1 + 1 + g.join


def _memtile_channels(c: CheckContext) -> np.ndarray:
    return _memtile_s2mm(c.geo) <= c.target.dma.memtile_s2mm


def _memtile_channels_why(c: CheckContext, i: int) -> str:
    g = c.geo
    return (f"MemTile channels: a MemTile receives 1 row-operand + 1 column-operand + "
            f"{int(g.join[i])} C streams = {int(_memtile_s2mm(g)[i])} S2MM channels, "
            f"only {c.target.dma.memtile_s2mm} exist")


def _l1(c: CheckContext) -> np.ndarray:
    return c.geo.l1_bytes <= c.l1_available


def _l1_why(c: CheckContext, i: int) -> str:
    g, b, mem = c.geo, c.batch, c.target.memory
    return (f"L1 overflow: A {int(b['buf_a_l1'][i])}x{int(g.m[i])}x{int(g.k[i])}x{g.ty_a} B + "
            f"B {int(b['buf_b_l1'][i])}x{int(g.k[i])}x{int(g.n[i])}x{g.ty_b} B + "
            f"C {int(b['buf_c_l1'][i])}x{int(g.m[i])}x{int(g.n[i])}x{g.ty_c} B = "
            f"{int(g.l1_bytes[i]):,} B (buffers aligned to {mem.l1_alignment_bytes} B) > "
            f"{c.l1_available:,} B available "
            f"({mem.l1_bytes:,} B L1 - {mem.l1_stack_bytes:,} B stack)")


def _l2(c: CheckContext) -> np.ndarray:
    _, fullest, group = c.l2
    return fullest <= group * c.target.memory.l2_bytes


def _l2_why(c: CheckContext, i: int) -> str:
    total, fullest, group = c.l2
    g, b = c.geo, c.batch
    where = (f"a group of {int(group[i])} MemTiles sharing memory" if group[i] > 1
             else "the fullest MemTile")
    b_rows = "k_mt" if g.b_col_major[i] else "k_ct"
    return (f"L2 overflow: {where} needs {int(fullest[i]):,} B > "
            f"{int(group[i] * c.target.memory.l2_bytes):,} B "
            f"(A tile {int(g.m[i])}x{int(g.kmt[i])} x{int(b['buf_a_l2'][i])}, "
            f"B tile {b_rows}x{int(g.n[i])} x{int(b['buf_b_l2'][i])}, "
            f"C join {int(g.join[i])}x{int(g.m[i])}x{int(g.n[i])} x{int(b['buf_c_l2'][i])}; "
            f"{int(total[i]):,} B over all MemTiles)")


def _dma_fields(c: CheckContext) -> list[tuple[str, np.ndarray, np.ndarray | int]]:
    """(description, value, limit) of every BD field the paper's data movement programs."""
    g, lim = c.geo, c.target.dma_limits
    word = lim.address_granularity_bytes
    shim_step = 2 ** lim.shim_step_bits
    b_run = np.where(g.b_col_major, g.kmt, g.n) * g.ty_b
    b_stride = np.where(g.b_col_major, g.K * g.ty_b, g.N * g.ty_b)
    return [
        ("shim A BD d0 (k_mt words)", g.kmt * g.ty_a // word, lim.shim_wrap_max),
        ("shim A BD d1 (m_ct rows)", g.m, lim.shim_wrap_max),
        ("shim A BD row stride (K words)", g.K * g.ty_a // word, shim_step),
        ("shim B BD d0 (contiguous run in words)", b_run // word, lim.shim_wrap_max),
        ("shim B BD d1 (rows)", np.where(g.b_col_major, g.n, g.k), lim.shim_wrap_max),
        ("shim B BD stride (words)", b_stride // word, shim_step),
        ("shim C BD d0 (n_ct words)", g.n * g.ty_c // word, lim.shim_wrap_max),
        ("shim C BD d1 (joined rows)", g.join * g.m, lim.shim_wrap_max),
        ("shim C BD row stride (N words)", g.N * g.ty_c // word, shim_step),
        ("MemTile A k_mt stride (words)", g.kmt * g.ty_a // word, 2 ** lim.memtile_step_bits),
        ("core A/C wrap m_ct/r", g.m // g.spec.r, lim.compute_wrap_max),
        ("core A/B wrap k_ct/s", g.k // g.spec.s, lim.compute_wrap_max),
        ("core B/C wrap n_ct/t", g.n // g.spec.t, lim.compute_wrap_max),
        ("core A step (k_ct*r words)", g.k * g.spec.r * g.ty_a // word, 2 ** lim.compute_step_bits),
    ]


def _granularity(c: CheckContext) -> list[tuple[str, np.ndarray]]:
    g = c.geo
    return [("k_ct x input bytes", g.k * g.ty_a), ("n_ct x input bytes", g.n * g.ty_b),
            ("n_ct x output bytes", g.n * g.ty_c),
            ("s x input bytes", np.full_like(g.k, g.spec.s * g.ty_a))]


def _dma_limits(c: CheckContext) -> np.ndarray:
    word = c.target.dma_limits.address_granularity_bytes
    ok = np.ones(len(c.geo.m), dtype=bool)
    for _, value, limit in _dma_fields(c):
        ok &= value <= limit
    for _, size in _granularity(c):
        ok &= size % word == 0
    return ok


def _dma_limits_why(c: CheckContext, i: int) -> str:
    word = c.target.dma_limits.address_granularity_bytes
    bad = [f"{desc} = {int(np.broadcast_to(v, c.geo.m.shape)[i])} > {limit}"
           for desc, v, limit in _dma_fields(c) if np.broadcast_to(v, c.geo.m.shape)[i] > limit]
    bad += [f"{desc} = {int(size[i])} B is not a multiple of the {word}-B address granularity"
            for desc, size in _granularity(c) if size[i] % word]
    return "DMA buffer-descriptor limits: " + "; ".join(bad)


def _dma_bound_terms(c: CheckContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = c.geo
    bw = c.target.dma.channel_bytes_per_cycle
    comp = kernel_cycles(g.m, g.k, g.n, g.spec, c.target.kernel, g.ty_c).total
    return comp, g.m * g.k * g.ty_a / bw, g.k * g.n * g.ty_b / bw


def _dma_bound(c: CheckContext) -> np.ndarray:
    comp, a, b = _dma_bound_terms(c)
    return (comp >= a) & (comp >= b)


def _dma_bound_why(c: CheckContext, i: int) -> str:
    comp, a, b = _dma_bound_terms(c)
    return (f"DMA bound (eq. 4): a kernel call takes {comp[i]:.0f} cycles but loading its A tile "
            f"takes {a[i]:.0f} and its B tile {b[i]:.0f} cycles at "
            f"{c.target.dma.channel_bytes_per_cycle:g} B/cycle per channel")


CONSTRAINTS: tuple[Rule, ...] = (
    Rule("micro_tile", "m_ct, k_ct, n_ct are multiples of the mmul shape r, s, t",
               _micro_tile, _micro_tile_why),
    Rule("register_blocking", "m_ct, n_ct fit the kernel's register blocking",
               _register_blocking, _register_blocking_why),
    Rule("k_mt_multiple", "k_mt is a multiple of k_ct", _k_mt_multiple, _k_mt_multiple_why),
    Rule("array_shape", "the parallel tiles fit the array", _array_shape, _array_shape_why),
    Rule("memtile_channels", "MemTile S2MM channels suffice", _memtile_channels,
               _memtile_channels_why),
    Rule("l1_capacity", "L1 buffers + stack fit one compute tile (eq. 5, any depths)",
               _l1, _l1_why),
    Rule("l2_capacity", "staged tiles fit the MemTiles", _l2, _l2_why),
    Rule("dma_limits", "buffer-descriptor fields within their bit widths",
               _dma_limits, _dma_limits_why),
)

# Rules that depend only on how the array is used, not on tile sizes.
ARRAY_RULES = ("array_shape", "memtile_channels")

def _no_padding(c: CheckContext) -> np.ndarray:
    g, w = c.geo, c.workload
    return (g.M == w.M) & (g.K == w.K) & (g.N == w.N)


def _no_padding_why(c: CheckContext, i: int) -> str:
    g, w = c.geo, c.workload
    return (f"the tiles do not divide {w.shape}: it would run padded to "
            f"{int(g.M[i])}x{int(g.K[i])}x{int(g.N[i])}")


OPTIONAL_CONSTRAINTS: dict[str, Rule] = {
    "dma_bound": Rule("dma_bound", "a kernel call is not slower to feed than to compute "
                            "(eq. 4)", _dma_bound, _dma_bound_why),
    # the stock IRON whole-array design runs only unpadded shapes
    "no_padding": Rule("no_padding", "the tiles divide the GEMM (nothing padded)",
                             _no_padding, _no_padding_why),
}
