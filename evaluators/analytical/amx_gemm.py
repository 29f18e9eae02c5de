"""Analytical model of the AMX GEMM the ``amx`` evaluator measures (one config per array entry).

Per thread (the busiest: the split gives each a share of C rounded to whole micro-tile grids):

- **TMUL**: every 16x16 C tile of the share takes one tile multiply per 64-byte K step, padding
  included; ``tdp_cycles`` apart at ``clock_hz``. The AVX-512 kernels (``engine=avx512``, for
  small M) cover one A row per grid row at ``vector_macs_per_cycle`` int8 MACs a cycle (bf16
  half), their A read as 4-byte broadcasts.
- **Tile loads**: each micro-kernel step loads ``grid_rows`` A and ``grid_cols`` B tiles of
  1 KiB. A pair of blocks (A's mc x kc, B's kc x nc) shares L2. The strip the micro order keeps
  (``a_strip``: A's 16 x grid_rows rows by kc) comes first from where the pair lives (L2 when
  both blocks fit it together, else L3, the others' shares taken, or DRAM), then from L1 when
  it fits the share of L1 the other operand's streaming leaves it (three quarters with the
  non-temporal ``t1`` hint, half without), else from L2; the streamed operand's block, read
  again for every held strip, from L2 when it fits there beside the held strip, else beyond.
  A read in place (not packed) costs ``strided_a_factor`` more: each tile row is its own line
  and page. Loads overlap the multiplies; a single stream buffer exposes
  ``load_latency_cycles`` per streamed load, software prefetch costs issue slots.
- **C tiles**: each micro-kernel call loads (after the first K block) and stores its C tiles;
  between K blocks a C panel lives in L2, L3 or DRAM by its size. Unprefetched, C's lines cost
  ``c_latency_factor`` times their bandwidth time. Calls cost ``call_cycles`` each.
- **Streaming** (``pack_b=stream``, on a row-major B): B read once from where it lives (from
  beyond L2 in runs as wide as the chunks laid out together, each run paying a start:
  ``run_knee_bytes``), each block written to a ``kc x nc`` buffer and read from it by every
  group of 4 A rows (AVX-512) or, as tiles, by every 16 (AMX, beside A's tiles); no packing
  of B, and the tiles' loads rotate through three buffers (no exposed latency).
- **Packing**: B to VNNI once per GEMM (shared by the threads) or per block (by each thread
  that uses it, again for each A block in ``a_block`` order); A per block (again for each B block
  in ``b_block`` order), read and written at ``pack_bytes_per_s``.

``t_comp`` is the TMUL time, ``t_mem`` the tile loads', C's and packing's; the latency is the
larger of TMUL and loads plus what cannot overlap (C, calls, packing, exposed latency).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dse.core.params import ConfigBatch
from dse.core.workload import GemmWorkload
from search_spaces.amx_gemm.geometry import (
    grid_cols_of,
    grid_rows_of,
    is_choice,
    k_tile,
    kept_block_bytes,
)

TILE_BYTES = 1024
def _ceil(a: Any, b: Any) -> Any:
    return -(-a // b)


def thread_grid(threads: np.ndarray, split: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Threads along M and along N: all along one for ``m`` / ``n``, for ``mn`` the most
    square factorisation (the kernel's own rule)."""
    square = np.ones_like(threads)
    for t in np.unique(threads):
        square[threads == t] = max(d for d in range(1, int(t) + 1) if t % d == 0 and d * d <= t)
    tm = np.select([split == 0, split == 1], [threads, 1], square)
    return tm, threads // tm


def held_strip_bytes(batch: ConfigBatch, elem: int) -> np.ndarray:
    """Bytes of the strip the micro order keeps in L1: A's grid rows x kc, or B's kc x (16 x
    cols)."""
    width = np.where(is_choice(batch, "micro_order", "a_strip"), grid_rows_of(batch),
                     grid_cols_of(batch))
    return width * batch["kc"] * elem


def run_share(run_bytes: np.ndarray, knee_bytes: float) -> np.ndarray:
    """The share of a level's bandwidth that contiguous runs of ``run_bytes`` get: a cost per
    run (the prefetchers start again) against the bytes' own time, blended by a 2-norm, so a
    run of ``knee_bytes`` gets 1/sqrt(2) and long runs all of it."""
    run = np.asarray(run_bytes, dtype=np.float64)
    return run / np.sqrt(run**2 + knee_bytes**2)


def _level(size: np.ndarray, caches: Any, threads: np.ndarray) -> np.ndarray:
    """0 L1, 1 L2, 2 L3 (a thread's share), 3 DRAM: where ``size`` bytes stay between uses."""
    return np.select([size <= caches.l1_bytes, size <= caches.l2_bytes,
                      size <= caches.l3_bytes / threads], [0, 1, 2], 3)


def score(batch: ConfigBatch, target: Any, workload: GemmWorkload) -> dict[str, np.ndarray]:
    """Metric arrays of the AMX GEMM model, one entry per config of ``batch``."""
    eng, caches, bw, mod = target.engine, target.caches, target.bandwidth, target.model
    e = workload.dtype.in_bytes
    kt = k_tile(e)
    M, N, K = workload.M, workload.N, workload.K
    gr, gc = batch["grid_rows"], batch["grid_cols"]
    mc, kc, nc = batch["mc"], batch["kc"], batch["nc"]
    threads = batch["threads"]
    tm, tn = thread_grid(threads, batch["split"])
    vector = is_choice(batch, "engine", "avx512")
    row_unit = np.where(vector, 1, 16)  # A rows per grid row: a tile's 16, or one
    rows, cols = row_unit * gr, grid_cols_of(batch)
    m_share = np.minimum(_ceil(_ceil(M, tm), rows) * rows, _ceil(M, rows) * rows)
    n_share = np.minimum(_ceil(_ceil(N, tn), cols) * cols, _ceil(N, cols) * cols)
    strips = (m_share // rows) * (n_share // cols)  # micro-kernel grids per K block
    nk, k_blocks = _ceil(K, kt), _ceil(K, kc)
    busy = np.minimum(threads, tm * tn)  # threads that share L3 and DRAM
    f = eng.clock_hz
    per_level = np.array([bw.l1_bytes_per_s, bw.l2_bytes_per_s, bw.l3_bytes_per_s,
                          bw.dram_bytes_per_s])

    # the engine: a tile multiply every tdp_cycles, or the vector units' MACs a cycle
    macs = strips * rows * cols * nk * kt
    amx_macs_per_cycle = 16 * 16 * kt / eng.tdp_cycles
    vector_macs_per_cycle = eng.vector_macs_per_cycle / e  # bf16: half of int8's
    t_tmul = macs / np.where(vector, vector_macs_per_cycle, amx_macs_per_cycle) / f

    # tile loads within a pair of blocks sharing L2 (the module's docstring says from where)
    a_strip = is_choice(batch, "micro_order", "a_strip")
    t1 = is_choice(batch, "load_hint", "t1")
    l1_share = caches.l1_bytes * np.where(t1, 0.75, 0.5)
    held = held_strip_bytes(batch, e)
    a_block_bytes, b_block_bytes = mc * kc * e, kc * nc * e
    pair_level = _level(a_block_bytes + b_block_bytes, caches, busy)
    streamed_level = _level(np.where(a_strip, b_block_bytes, a_block_bytes) + held, caches, busy)
    streamed_strip = np.where(a_strip, cols, rows) * kc * e
    reuse_level = np.where(held <= l1_share, 0,
                           np.maximum(_level(held + streamed_strip, caches, busy), 1))
    uses = np.where(a_strip, nc // cols, mc // rows)  # micro-kernel calls sharing a held strip
    held_time = (uses - 1) / uses / per_level[reuse_level] + 1 / uses / per_level[pair_level]
    packed_a = is_choice(batch, "pack_a", "yes")
    a_bytes = strips * nk * gr * row_unit * 64  # a tile row of 64 bytes per A row
    b_bytes = strips * nk * cols * 64  # a 64-byte row of K per column of B
    a_time = np.where(a_strip, held_time, 1 / per_level[streamed_level])
    b_time = np.where(a_strip, 1 / per_level[streamed_level], held_time)
    t_loads = a_bytes * a_time * np.where(packed_a, 1.0, mod.strided_a_factor) + b_bytes * b_time
    # first touches of a block from where its whole operand lives: B's once-per-GEMM packing
    # (for each A block in a_block order), A read in place (for each B block in b_block order)
    b_block = is_choice(batch, "block_order", "b_block")
    pack_b_block = is_choice(batch, "pack_b", "block")
    b_whole = _level(np.full_like(mc, K * N * e), caches, busy)
    a_whole = _level(np.full_like(mc, M * K * e), caches, busy)
    in_place = is_choice(batch, "pack_b", "none")  # B read where it lies, once per A block
    b_passes = np.where(b_block & ~in_place, 1, _ceil(m_share, mc))
    b_touched = np.where(pack_b_block, 0, K * n_share * e * b_passes)
    a_touched = np.where(packed_a, 0, m_share * K * e * np.where(b_block, _ceil(n_share, nc), 1))
    t_loads = t_loads + b_touched / per_level[b_whole] + a_touched / per_level[a_whole]
    streamed = np.where(gr <= gc, b_bytes, a_bytes) / TILE_BYTES
    streaming = is_choice(batch, "pack_b", "stream")
    # vector registers are renamed; the streaming kernels' tiles rotate through three buffers
    single = (batch["stream_buffers"] == 1) & ~vector & ~streaming
    t_exposed = np.where(single, streamed * mod.load_latency_cycles / f, 0)
    t_prefetch = np.where(batch["prefetch"] > 0, streamed * 16 * mod.prefetch_line_cycles / f, 0)

    # C tiles: stored every K block, loaded again after the first; between K blocks the panel
    # of C a block order revisits stays where it fits (written once: it goes to DRAM)
    c_bytes = strips * rows * cols * 4 * (2 * k_blocks - 1)
    panel = np.where(b_block, m_share * nc, mc * n_share) * 4
    c_level = np.where(k_blocks == 1, 3, np.maximum(_level(panel, caches, busy), 1))
    t_c = c_bytes / per_level[c_level] * np.where(is_choice(batch, "prefetch_c", "yes"), 1.0,
                                                  mod.c_latency_factor)
    t_calls = strips * k_blocks * mod.call_cycles / f

    # the streaming kernels (pack_b=stream) instead: their share of B read once from where B
    # lives and re-laid out into a kc x nc buffer, which each group of 4 rows of A (AVX-512)
    # or each 16 (AMX, beside its A tiles: A's block kept in a_block order, all of A packed
    # once in b_block order) then reads
    share_bytes = K * n_share * e
    # each of B's rows is read in runs as wide as the chunks laid out together (the AVX-512
    # kernels lay half as many out above 4 rows of A; other configs' nc may be narrower than a
    # chunk, and never use this); beyond L2 each run starts anew
    chunks = np.maximum(np.where(vector & (M > 4) & (nc >= 128), nc // 128, nc // 64), 1)
    b_stream_bw = per_level[b_whole] * np.where(
        b_whole >= 2, run_share(chunks * 64 * e, mod.run_knee_bytes), 1.0)
    buffer_level = _level(b_block_bytes, caches, busy)
    buffer_reads = np.where(vector, _ceil(M, 4), _ceil(M, 16))
    a_tiles_level = _level(m_share * np.where(b_block, K, kc) * e, caches, busy)
    t_loads = np.where(streaming, share_bytes / b_stream_bw
                       + (1 + buffer_reads) * share_bytes / per_level[buffer_level]
                       + np.where(vector, 0, a_bytes / per_level[a_tiles_level]), t_loads)

    # packing: bytes read and written
    b_packed = np.select([pack_b_block, in_place | streaming],
                         [K * n_share * e * np.where(b_block, 1, _ceil(m_share, mc)), 0],
                         K * N * e / busy)
    a_packed = np.where(packed_a, m_share * K * e * np.where(b_block, _ceil(n_share, nc), 1), 0)
    t_pack = 2.0 * (b_packed + a_packed) / mod.pack_bytes_per_s

    t_mem = t_loads + t_c + t_pack
    latency = np.maximum(t_tmul, t_loads) + t_exposed + t_prefetch + t_c + t_calls + t_pack
    ops = 2.0 * M * N * K
    from_dram = lambda level, size: np.where(level == 3, size, 0)  # noqa: E731
    dram = (M * K * e + K * N * e + M * N * 4 + from_dram(c_level, c_bytes * busy)
            + from_dram(b_whole, b_touched * busy) + from_dram(a_whole, a_touched * busy))
    return {
        "tops": ops / latency / 1e12,
        "latency_s": latency,
        "t_comp_s": t_tmul,
        "t_mem_s": t_mem,
        "t_loads_s": t_loads,
        "t_c_s": t_c,
        "t_pack_s": t_pack,
        "t_calls_s": t_calls,
        "bound": np.where(t_mem > t_tmul, "memory", "compute"),
        "balance": t_tmul / t_mem,
        "efficiency": ops / latency / target.peak_ops(workload.dtype.input, None),
        "l1_bytes": held_strip_bytes(batch, e).astype(np.float64),
        "l2_bytes": kept_block_bytes(batch, e).astype(np.float64),
        "dram_bytes": dram.astype(np.float64),
    }
