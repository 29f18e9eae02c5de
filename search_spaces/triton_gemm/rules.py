"""The rules of a Triton GEMM on an NVIDIA GPU: what its tiles, stages and warps may be, and
the shared memory and registers they take (checked against Triton's compiler)."""


from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dse.core.params import ConfigBatch, IntParam, Param, Rule
from dse.core.workload import GemmWorkload
from search_spaces.triton_gemm.target import GpuTarget

BLOCKS = ("BLOCK_M", "BLOCK_N", "BLOCK_K")
DOMAINS: dict[str, tuple[int, ...]] = {
    "BLOCK_M": (16, 32, 64, 128, 256), "BLOCK_N": (16, 32, 64, 128, 256),
    "BLOCK_K": (16, 32, 64, 128, 256), "num_stages": (1, 2, 3, 4, 5, 6),
    "num_warps": (1, 2, 4, 8, 16), "GROUP_M": (1, 2, 4, 8, 16, 32),
    "SPLIT_K": (1, 2, 4, 8, 16)}
HELP = {"BLOCK_M": "rows of C a program computes (power of two)",
        "BLOCK_N": "columns of C a program computes (power of two)",
        "BLOCK_K": "depth of one step of the K loop (power of two)",
        "num_stages": "K steps in flight: shared-memory buffers of A and B tiles",
        "num_warps": "warps a program runs (power of two)",
        "GROUP_M": "program-id swizzle: block rows walked together so A and B tiles are "
                   "reused from L2",
        "SPLIT_K": "programs sharing one C tile's K (each stores its fp32 partial sums; the "
                   "last to arrive adds them up)"}


def parameters() -> dict[str, Param]:
    """Every parameter (its domain is :data:`DOMAINS`; the rules keep to it)."""
    return {name: IntParam(name, HELP[name], 1) for name in DOMAINS}


def _pow2(x: np.ndarray) -> np.ndarray:
    return (x > 0) & ((x & (x - 1)) == 0)


def covering(rows: int) -> int:
    """The smallest power of two at least ``rows``: the GROUP_M every larger one walks as."""
    return 1 << (max(rows, 1) - 1).bit_length()


def _swizzle_reason(group: int, block_m: int, m: int) -> str:
    rows = -(-m // block_m)
    return (f"GROUP_M={group} over the {rows} block row{'s' if rows != 1 else ''} of M={m} "
            f"walks as GROUP_M={covering(rows)} does")


def warpgroup_mma(b: ConfigBatch, device: Any) -> np.ndarray:
    """Whether Triton issues Hopper's warp-group MMA (wgmma): on compute capability 9.0, with
    whole warp groups (num_warps a multiple of 4) and BLOCK_M of at least 64; otherwise the
    warp-level mma.sync (what ``dse triton compile`` finds in the PTX for sm_90)."""
    return (device.compute_capability == 90) & (b["num_warps"] % 4 == 0) & (b["BLOCK_M"] >= 64)


def smem_buffers(b: ConfigBatch, device: Any) -> np.ndarray:
    """A and B tile buffers in shared memory: wgmma reads its operands from shared memory, so
    each of num_stages is one; with mma.sync the tile being multiplied sits in registers and
    Triton keeps num_stages - 1 (at least one)."""
    stages = b["num_stages"]
    return np.where(warpgroup_mma(b, device), stages, np.maximum(stages - 1, 1))


def tma_loads(device: Any, w: GemmWorkload) -> bool:
    """Whether the kernel loads A and B through the tensor memory accelerator (TMA): on compute
    capability 9.0 (Hopper) and later, when every row of both operands starts a multiple of 16
    bytes after the one before (TMA's rule for strides). Otherwise it computes the addresses of
    its loads itself."""
    b_row = w.N if w.b_layout == "row" else w.K  # elements between rows of B as stored
    return (device.compute_capability >= 90 and (w.K * w.dtype.in_bytes) % 16 == 0
            and (b_row * w.dtype.in_bytes) % 16 == 0)


# the barrier (mbarrier) a buffer loaded by TMA has in shared memory, to wait for its arrival
TMA_BARRIER_BYTES = 8


def smem_bytes(b: ConfigBatch, in_bytes: int, device: Any, tma: bool = False) -> np.ndarray:
    """Shared memory a program needs: its buffers of A and B tiles (what Triton allocates for
    sm_90 when the operands' rows are 16-element aligned; otherwise it does not pipeline and
    takes less) with, when ``tma`` loads them, a barrier each, and with split-K at least the
    fp32 C tile, which the epilogue stages through shared memory on its way to the workspace
    (exact for 16-bit inputs on the wgmma path, an upper bound otherwise)."""
    buffers = smem_buffers(b, device)
    pipeline = buffers * ((b["BLOCK_M"] + b["BLOCK_N"]) * b["BLOCK_K"] * in_bytes
                          + (TMA_BARRIER_BYTES if tma else 0))
    return np.where(b["SPLIT_K"] > 1, np.maximum(pipeline, b["BLOCK_M"] * b["BLOCK_N"] * 4),
                    pipeline)


def _buffer_text(b: ConfigBatch, i: int, in_bytes: int, tma: bool) -> str:
    """One buffer's bytes as the shared-memory rule charges them, spelled out."""
    tiles = (f"({int(b['BLOCK_M'][i])} + {int(b['BLOCK_N'][i])}) x {int(b['BLOCK_K'][i])} x "
             f"{in_bytes} B")
    return f"({tiles} + an {TMA_BARRIER_BYTES} B barrier)" if tma else tiles


def accumulator_registers(b: ConfigBatch) -> np.ndarray:
    """FP32 accumulator registers per thread."""
    return b["BLOCK_M"] * b["BLOCK_N"] // (32 * b["num_warps"])


# Registers a thread needs beside its accumulators and operand tiles (addresses, indices).
OPERAND_REGISTERS = 40


def thread_registers(b: ConfigBatch, in_bytes: int, device: Any,
                     tma: bool = False) -> np.ndarray:
    """Registers a thread needs: its fp32 accumulators, 40 more, and with mma.sync the A and B
    tiles of a K step (spread over the block's threads), which that path holds in registers
    when it loads them through pointers; loaded by TMA, the tiles stay in shared memory and a
    quarter of them is charged, for the fragments of the MMA steps in flight.
    Pointer loads: over 72 bf16 configs compiled for sm_90 (both MMA kinds, 1 to 16 warps) the
    rule this feeds agrees with ptxas on which ones spill or fail for 66; of the others, four
    were predicted to need 264 registers and used 248 to 254 without spilling, two spilled 16
    and 120 bytes. TMA loads: over 106 mma.sync configs (bf16 and fp32, both layouts of B, 1 to
    8 warps, 1 to 4 stages) it agrees for 100, and for every bf16 one with B column-major and
    more than one stage; of the others, three with one stage and three with B row-major spill
    20 to 1,196 bytes."""
    tiles = (b["BLOCK_M"] + b["BLOCK_N"]) * b["BLOCK_K"] * in_bytes // (4 * 32 * b["num_warps"])
    held = np.where(warpgroup_mma(b, device), 0, tiles // 4 if tma else tiles)
    return accumulator_registers(b) + OPERAND_REGISTERS + held


def register_budget(b: ConfigBatch, device: Any) -> np.ndarray:
    """Registers a thread may hold: the per-thread limit, or a block's share of the register
    file when it has many threads (16 warps leave 128 each)."""
    return np.minimum(device.max_registers_per_thread,
                      device.registers_per_sm // (32 * b["num_warps"]))


def rules(target: GpuTarget, w: GemmWorkload) -> tuple[Rule, ...]:
    """The space's rules for one GEMM on one GPU, cheapest first."""
    dt, dev, tma = w.dtype.in_bytes, target.device, tma_loads(target.device, w)
    acc_max = target.model.accumulator_registers_max

    def fmt(b: ConfigBatch, i: int, names: Sequence[str]) -> str:
        return ", ".join(f"{n}={int(b[n][i])}" for n in names)

    def covers(b: ConfigBatch, name: str, dim: int) -> np.ndarray:
        return b[name] <= max(16, 1 << (dim - 1).bit_length())  # the next power of two

    return (
        Rule("power_of_two", "blocks and warps are powers of two (tl.arange, layouts)",
             lambda b: np.all([_pow2(b[n]) for n in (*BLOCKS, "num_warps", "GROUP_M",
                                                     "SPLIT_K")], axis=0),
             lambda b, i: "powers of two only: " + fmt(b, i, (*BLOCKS, "num_warps", "GROUP_M",
                                                                "SPLIT_K"))),
        Rule("tensor_core_shape", "every warp owns at least a 16x16 accumulator tile and K steps "
             "are whole 16-deep MMAs",
             lambda b: (b["BLOCK_M"] >= 16) & (b["BLOCK_N"] >= 16) & (b["BLOCK_K"] >= 16)
             & (b["BLOCK_M"] * b["BLOCK_N"] >= 256 * b["num_warps"]),
             lambda b, i: f"{int(b['num_warps'][i])} warps need a C tile of at least "
                          f"{256 * int(b['num_warps'][i])} elements (16x16 each), got "
                          f"{int(b['BLOCK_M'][i])}x{int(b['BLOCK_N'][i])}"),
        Rule("shared_memory", "buffers x (BLOCK_M + BLOCK_N) x BLOCK_K x bytes fits a "
             "block's shared memory (num_stages buffers with wgmma, num_stages - 1 with "
             "mma.sync; with TMA loads an 8-byte barrier each)",
             lambda b: smem_bytes(b, dt, dev, tma) <= dev.smem_per_block_bytes,
             lambda b, i: f"{int(smem_buffers(b, dev)[i])} buffers x "
                          f"{_buffer_text(b, i, dt, tma)} = "
                          f"{int(smem_bytes(b, dt, dev, tma)[i]):,} B exceeds the "
                          f"{dev.smem_per_block_bytes:,} B a block may use"),
        Rule("registers", f"fp32 accumulators per thread at most {acc_max}, and with "
             f"{OPERAND_REGISTERS} more for addresses (and mma.sync's operand tiles, a "
             "quarter of them with TMA loads) within "
             f"what a thread may hold ({dev.max_registers_per_thread}, or "
             f"{dev.registers_per_sm:,} over the block's threads)",
             lambda b: (accumulator_registers(b) <= acc_max)
             & (thread_registers(b, dt, dev, tma) <= register_budget(b, dev)),
             lambda b, i: f"{int(b['BLOCK_M'][i])} x {int(b['BLOCK_N'][i])} accumulators over "
                          f"{32 * int(b['num_warps'][i])} threads is "
                          f"{int(accumulator_registers(b)[i])} registers a thread (at most "
                          f"{acc_max}); with the rest it needs "
                          f"{int(thread_registers(b, dt, dev, tma)[i])} of the "
                          f"{int(register_budget(b, dev)[i])} a thread has with "
                          f"{int(b['num_warps'][i])} warps"),
        Rule("within_problem", "blocks no larger than the next power of two above the matrix",
             lambda b: covers(b, "BLOCK_M", w.M) & covers(b, "BLOCK_N", w.N)
             & covers(b, "BLOCK_K", w.K),
             lambda b, i: f"blocks {fmt(b, i, BLOCKS)} exceed the {w.M}x{w.K}x{w.N} problem"),
        Rule("threads", "at most 1,024 threads a block (32 warps)",
             lambda b: b["num_warps"] <= 32,
             lambda b, i: f"num_warps={int(b['num_warps'][i])} is "
                          f"{32 * int(b['num_warps'][i]):,} threads; a block holds 1,024"),
        Rule("swizzle", "GROUP_M no larger than the grid's block rows need: a larger group walks "
             "the programs in the same order as the smallest one covering every row",
             lambda b: b["GROUP_M"] < 2 * -(-w.M // b["BLOCK_M"]),
             lambda b, i: _swizzle_reason(int(b["GROUP_M"][i]), int(b["BLOCK_M"][i]), w.M)),
        Rule("split_k", "each of SPLIT_K programs gets at least one BLOCK_K step",
             lambda b: b["SPLIT_K"] * b["BLOCK_K"] <= max(w.K, 16),
             lambda b, i: f"SPLIT_K={int(b['SPLIT_K'][i])} x BLOCK_K="
                          f"{int(b['BLOCK_K'][i])} exceeds K={w.K}"),
        Rule("stages", "at least one K step in flight and no more than the K loop has",
             lambda b: (b["num_stages"] >= 1) & (
                 b["num_stages"] <= np.maximum(1, -(-w.K // (b["BLOCK_K"] * b["SPLIT_K"])))),
             lambda b, i: f"num_stages={int(b['num_stages'][i])} for a K loop of "
                          f"{-(-w.K // int(b['BLOCK_K'][i] * b['SPLIT_K'][i]))} steps"),
    )


