"""The AMX space's rules, each with the reason a config breaks it."""

from __future__ import annotations

from typing import Any

import numpy as np

from dse.core.params import ConfigBatch, Rule
from dse.core.workload import GemmWorkload
from search_spaces.amx_gemm.geometry import (
    CHOICE_CODES,
    grid_cols_of,
    grid_rows_of,
    k_tile,
    kept_block_bytes,
)

TILE_REGISTERS = 8
STREAM_NC = 512  # columns the streaming kernel re-lays out together, at most (8 chunks)


def tiles_used(b: ConfigBatch) -> np.ndarray:
    """Tile registers the micro-kernel needs: its C tiles, the operand along the grid's shorter
    side held for a K step, and the other's stream buffers."""
    return (b["grid_rows"] * b["grid_cols"] + np.minimum(b["grid_rows"], b["grid_cols"])
            + b["stream_buffers"])


def _code(name: str, choice: str) -> int:
    return CHOICE_CODES[name].index(choice)


def _round_up(value: Any, unit: Any) -> Any:
    return -(-value // unit) * unit


def _two_dimensional(threads: np.ndarray) -> np.ndarray:
    return np.array([any(t % d == 0 for d in range(2, int(t ** 0.5) + 1)) for t in threads],
                    dtype=bool)


def rules(target: Any, w: GemmWorkload) -> tuple[Rule, ...]:
    """The rules of the AMX space on ``target`` for workload ``w``."""
    e, kt = w.dtype.in_bytes, k_tile(w.dtype.in_bytes)
    l2, cores = target.caches.l2_bytes, target.engine.cores
    rows = grid_rows_of
    vector = lambda b: b["engine"] == _code("engine", "avx512")  # noqa: E731
    cols = grid_cols_of
    b_in_place = lambda b: b["pack_b"] == _code("pack_b", "none")  # noqa: E731
    streamed = lambda b: b["pack_b"] == _code("pack_b", "stream")  # noqa: E731
    in_place = lambda b: b["pack_a"] == _code("pack_a", "no")  # noqa: E731
    kept = lambda b: kept_block_bytes(b, e)  # noqa: E731
    return (
        Rule("tile_registers", "the C tiles, the held operand and the stream buffers fit the 8 "
             "tile registers (AMX)",
             lambda b: vector(b) | (tiles_used(b) <= TILE_REGISTERS),
             lambda b, i: f"a {b['grid_rows'][i]}x{b['grid_cols'][i]} grid of C tiles with "
                          f"{b['stream_buffers'][i]} stream buffer(s) needs "
                          f"{int(tiles_used(b)[i])} tile registers; AMX has {TILE_REGISTERS}"),
        Rule("whole_grids", "blocks hold whole micro-kernel grids (the streaming kernels "
             "take all of M, tiles of A padded)",
             lambda b: ((b["mc"] % rows(b) == 0) | streamed(b)) & (b["nc"] % cols(b) == 0),
             lambda b, i: f"mc={b['mc'][i]} and nc={b['nc'][i]} must be multiples of the grid's "
                          f"{rows(b)[i]} rows and {cols(b)[i]} columns"),
        Rule("k_block", f"kc is a multiple of the {kt} K elements of a tile row",
             lambda b: b["kc"] % kt == 0,
             lambda b, i: f"kc={b['kc'][i]} is not a multiple of {kt} ({w.dtype.input}: "
                          "64 bytes of K per tile row)"),
        Rule("within_matrix", "blocks no larger than the matrix rounded up to whole tiles",
             lambda b: (b["mc"] <= _round_up(w.M, rows(b))) & (b["nc"] <= _round_up(w.N, cols(b)))
             & (b["kc"] <= _round_up(w.K, kt)),
             lambda b, i: f"a block passes the matrix: mc={b['mc'][i]}, kc={b['kc'][i]}, "
                          f"nc={b['nc'][i]} on {w.M}x{w.K}x{w.N} (MxKxN)"),
        Rule("kept_block_in_l2", "the block the block order keeps fits L2",
             lambda b: kept(b) <= l2,
             lambda b, i: f"the kept {'B' if b['block_order'][i] == 0 else 'A'} block is "
                          f"{int(kept(b)[i]):,} B, more than the {l2:,} B L2"),
        Rule("a_in_place", "A read in place only in whole tiles (else it is packed, padded)",
             lambda b: ~in_place(b) | ((w.M % rows(b) == 0) & (w.K % kt == 0)),
             lambda b, i: f"A read in place needs M ({w.M}) a multiple of {rows(b)[i]} and K "
                          f"({w.K}) of {kt}: pack A (pack_a=yes) for this shape"),
        Rule("amx_only", "stream buffers and the tile-load hint are AMX's: AVX-512 kernels keep "
             "their defaults",
             lambda b: ~vector(b) | ((b["stream_buffers"] == 1)
                                     & (b["load_hint"] == _code("load_hint", "t0"))),
             lambda b, i: "engine=avx512 has no tiles: stream_buffers=1 and load_hint=t0 "
                          f"(got {b['stream_buffers'][i]} and "
                          f"{CHOICE_CODES['load_hint'][b['load_hint'][i]]})"),
        Rule("b_in_place", "B read in place (pack_b=none) is the AVX-512 dot kernel's, on a "
             "column-major B over the whole K, with the orders and packing it does not use "
             "at their defaults",
             lambda b: ~b_in_place(b) | (vector(b) & (w.b_layout == "col")
                                         & (b["kc"] >= _round_up(w.K, kt))
                                         & (b["block_order"] == 0) & (b["micro_order"] == 0)
                                         & (b["pack_a"] == 0)),
             lambda b, i: "pack_b=none reads B where it lies as dot products over K: it needs "
                          f"engine=avx512 (got {CHOICE_CODES['engine'][b['engine'][i]]}), B "
                          f"column-major (got {w.b_layout}), kc the whole K ({_round_up(w.K, kt)},"
                          f" got {b['kc'][i]}) and pack_a=yes, block_order=b_block, "
                          "micro_order=a_strip"),
        Rule("stream", "pack_b=stream is the streaming kernels', on a row-major B (AVX-512 "
             "rows, or AMX tiles on the same layout): whole rows of A (mc = M), 64-column "
             "chunks (a 1x4 grid, nc up to 512), B's columns split over the threads, the "
             "micro order (and on AVX-512 the block order), packing, buffers and hints they do "
             "not use at their defaults",
             lambda b: ~streamed(b) | ((w.b_layout == "row") & (b["mc"] == w.M)
                                       & (b["grid_rows"] == 1) & (b["grid_cols"] == 4)
                                       & (b["nc"] <= STREAM_NC) & (b["pack_a"] == 0)
                                       & ((b["block_order"] == 0) | ~vector(b))
                                       & (b["micro_order"] == 0)
                                       & (b["prefetch"] == 0) & (b["prefetch_c"] == 0)
                                       & (b["stream_buffers"] == 1)
                                       & (b["load_hint"] == _code("load_hint", "t0"))
                                       & (b["split"] == _code("split", "n"))),
             lambda b, i: f"pack_b=stream needs B row-major (got {w.b_layout}), mc the whole "
                          f"M ({w.M}, got {b['mc'][i]}), a 1x4 grid (got {b['grid_rows'][i]}x"
                          f"{b['grid_cols'][i]}), nc at most {STREAM_NC} (got {b['nc'][i]}), "
                          "split=n and pack_a=yes, micro_order=a_strip, prefetch=0, "
                          "prefetch_c=yes, stream_buffers=1, load_hint=t0 (and, on AVX-512, "
                          "block_order=b_block)"),
        Rule("threads", f"at most one thread per core ({cores})",
             lambda b: b["threads"] <= cores,
             lambda b, i: f"threads={b['threads'][i]} but the target has {cores} cores"),
        Rule("two_dimensional_split", "a 2-D split needs a thread count with two factors",
             lambda b: (b["split"] != _code("split", "mn")) | _two_dimensional(b["threads"]),
             lambda b, i: f"split=mn with {b['threads'][i]} threads is a 1-D split: use m or n"),
    )
