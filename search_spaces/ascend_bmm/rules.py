"""The BMM tiling design's rules: its branch decision tree (vectorised over shapes) and the
worked quantities each branch derives (tile sizes, swizzle window and order, L2 groups).

The decision tree buys parallelism from the cheapest dimension up: split B (free), then M/N
(re-reads absorbed by L2 and the swizzle), then K (partial sums to reduce):

1. ``special`` (K <= 1: the Cube is useless, the vector cores compute) and ``to_matmul``
   (one side has one batch: fold it into a plain GEMM) reduce the problem first;
2. ``merge_batch`` when several small batches merged into one large tile win by saving DMA
   commands (every entry condition held and K truncated), else ``iter_batch`` (batch by batch)
   when the batch split alone fills the cores without re-reading inside a batch;
3. ``asw_basic`` (split M/N with the sliding-window swizzle) when the output has at least C
   L0C-sized blocks;
4. ``stream_k`` (split K, reduce on the vector cores) when at most half the cores would have a
   block and K is long enough to pay for the reduction, else ``asw_reduced_cores`` (leave cores
   idle rather than cut tiles below the bandwidth rules).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from search_spaces.ascend_bmm.target import FP32_BYTES, AscendTarget

BRANCHES: tuple[str, ...] = ("to_matmul", "special", "iter_batch", "merge_batch", "asw_basic",
                             "asw_reduced_cores", "stream_k")
ITER_FORMS: tuple[str, ...] = ("a", "b", "c", "d")
MIN_MERGE = 2  # b0: the smallest merge that saves DMA commands


def floor_to(x: Any, step: int) -> Any:
    """``x`` rounded down to a multiple of ``step`` (elementwise)."""
    return (np.asarray(x) // step) * step


def ceil_to(x: Any, step: int) -> Any:
    """``x`` rounded up to a multiple of ``step`` (elementwise)."""
    return -(-np.asarray(x) // step) * step


def classify(target: AscendTarget, batch_a: Any, batch_b: Any, m: Any, k: Any, n: Any,
             in_bytes: int = 2, out_bytes: int = 2, batch: Any = None,
             deterministic: bool = False, same: Any = None) -> dict[str, np.ndarray]:
    """The branch the rules pick for each shape (arrays broadcast together).

    ``batch`` is the output's batch count (default: the larger of the two sides, as without
    cross broadcasting); ``same`` whether the two sides have the same batch dims (default:
    the same counts). ``deterministic`` forbids StreamK (its reduction order varies).

    Returns arrays: ``branch`` (index into :data:`BRANCHES`), ``iter_batch_form`` (index into
    :data:`ITER_FORMS`, -1 unless IterBatch) and the numbers behind the decision.
    """
    ba, bb = np.asarray(batch_a, dtype=np.int64), np.asarray(batch_b, dtype=np.int64)
    m, k, n = (np.asarray(v, dtype=np.int64) for v in (m, k, n))
    b = np.maximum(ba, bb) if batch is None else np.asarray(batch, dtype=np.int64)
    c, mem, rules = target.cores.cube, target.memory, target.rules
    dt, out = float(in_bytes), float(out_bytes)
    mf, kf, nf, bf = (v.astype(np.float64) for v in (m, k, n, b))

    special = (k == 0) | ((k == 1) & (b >= 2 * target.cores.vector)
                          & (2 * ((mf + nf) * dt + mf * nf * out) <= mem.ub_bytes))
    to_matmul = (ba == 1) | (bb == 1)
    same = (ba == bb) if same is None else np.asarray(same, dtype=bool)

    # MergeBatch (every condition of the design, b0 = 2 to enter)
    r16 = target.r16(in_bytes)
    b_floor = b // c
    merge_ok = (same & (b_floor >= 2 * MIN_MERGE)
                & (2 * (MIN_MERGE * mf) * (MIN_MERGE * nf) * FP32_BYTES <= mem.l0c_bytes)
                & (b_floor * (mf * kf + kf * nf) * dt >= rules.min_bytes_per_core)
                & (np.maximum(mf * kf, kf * nf) * dt >= rules.min_tile_bytes)
                & (2 * mf * nf / (mf + nf) < r16 / MIN_MERGE))
    b0 = merge_b0(target, mf, nf, b_floor, in_bytes)
    k_l1_iter = np.minimum(kf, mem.l1_bytes / (2 * (mf + nf) * dt))
    t_comp = 2 * mf * nf * kf / target.q16
    t_write = mf * nf * out / target.bandwidth.gm_bytes_per_s
    # The design's entry conditions use only the shape and the chip's constants. Its closed form
    # (MergeBatch wins iff k_L1 = K and b_core > b0 (T_comp + T_write) / T_cmd) has a structural
    # half, K truncated (L1-bound, merging only lengthens the drain), and a half that rests on
    # T_cmd, an estimate ("tens of ns") and no chip constant: the branch is taken on the first,
    # the second is reported (``merge_better``) beside it.
    k_truncated = k_l1_iter >= kf
    merge_better = k_truncated & (
        b_floor > b0 * (t_comp + t_write) / target.overheads.dma_command_s)

    # IterBatch
    b_core = -(-b // c)
    balanced = (b % c == 0) | (b % c >= rules.min_cores)
    form = iter_form(target, mf, kf, nf, b_core, dt)
    iter_ok = same & balanced & (form >= 0)

    # ASW / StreamK: parallelism in L0C-sized output blocks
    p = bf * mf * nf * FP32_BYTES / mem.l0c_bytes
    grid_k = np.where(p > 0, c // np.maximum(np.ceil(p), 1), 0).astype(np.int64)
    theta = target.theta_c()
    with np.errstate(divide="ignore", invalid="ignore"):
        k_needed = np.where(grid_k >= 2, grid_k**2 / np.maximum(grid_k - 1, 1) * theta, np.inf)
    stream_ok = ((p <= c / 2) & (grid_k >= 2)
                 & (kf / np.maximum(grid_k, 1) >= rules.d_value_good_bytes / dt)
                 & (kf > k_needed) & (not deterministic))

    branch = np.select(
        [special, to_matmul, merge_ok & k_truncated, iter_ok, merge_ok, p >= c, stream_ok],
        [1, 0, 3, 2, 3, 4, 6], default=5)
    return {"branch": branch, "iter_batch_form": np.where(branch == 2, form, -1), "batch": b,
            "b_core": b_core, "P": p, "grid_k": np.where(branch == 6, grid_k, 1),
            "k_threshold": k_needed, "theta_c": np.full(b.shape, theta), "b0": b0,
            "intensity": 2 * mf * nf / (mf + nf), "r16": np.full(b.shape, r16),
            "merge_ok": merge_ok, "k_truncated": k_truncated, "merge_better": merge_better,
            "iter_ok": iter_ok, "stream_ok": stream_ok}


def merge_b0(target: AscendTarget, m: Any, n: Any, b_core: Any, in_bytes: int = 2) -> np.ndarray:
    """MergeBatch's merge count: under the L0C bound (double-buffered FP32 output), below the
    balance intensity, and at most the batches a core has."""
    m, n = np.asarray(m, dtype=np.float64), np.asarray(n, dtype=np.float64)
    by_l0c = np.floor(np.sqrt(target.memory.l0c_bytes / (2 * m * n * FP32_BYTES)))
    by_intensity = np.ceil(target.r16(in_bytes) * (m + n) / (2 * m * n)) - 1
    return np.maximum(np.minimum(np.minimum(by_l0c, by_intensity), b_core), 1).astype(np.int64)


def iter_form(target: AscendTarget, m: Any, k: Any, n: Any, b_core: Any,
              in_bytes: float) -> np.ndarray:
    """IterBatch's L1 residency (index into :data:`ITER_FORMS`; -1 when none fits).

    a) one batch a core, A and B both in L1; b) several, two batches in L1 at once;
    c) one side resident, the other streamed in K segments (double-buffered) within
    L1 / min(b_core, 2); d) both streamed in K segments. For c and d the smallest cut is taken
    and must keep the bandwidth rules (transfer >= min tile, run >= 128 B)."""
    mem, rules = target.memory, target.rules
    dt = float(in_bytes)
    mk, kn = m * k * dt, k * n * dt
    a = (b_core == 1) & (mk + kn <= mem.l1_bytes)
    b = (b_core > 1) & (2 * (mk + kn) <= mem.l1_bytes)
    budget = mem.l1_bytes / np.minimum(b_core, 2)
    c_ok = np.zeros(np.shape(a), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for resident, streamed, width in ((mk, kn, n), (kn, mk, m)):
            room = budget - resident
            step = np.maximum(2, np.ceil(2 * streamed / np.where(room > 0, room, np.nan)))
            seg = k / step
            c_ok |= (room > 0) & (seg * width * dt >= rules.min_tile_bytes) & (
                seg * dt >= rules.d_value_min_bytes)
        step = np.maximum(2, np.ceil(2 * k * (m + n) * dt / mem.l1_bytes))
        seg = k / step
        d = ((seg * np.minimum(m, n) * dt >= rules.min_tile_bytes)
             & (seg * dt >= rules.d_value_min_bytes))
    return np.select([a, b, c_ok, d], [0, 1, 2, 3], default=-1)


# --- the worked quantities of the ASW branch -----------------------------------------------

def base_tile(target: AscendTarget, aspect: float = 1.0, in_bytes: int = 2,
              buffers: int = 2) -> tuple[int, int, int]:
    """(BaseM, BaseN, BaseK): BaseM * BaseN fills L0C (``buffers`` copies of FP32), shaped like
    ``aspect`` = M / N, multiples of 16; BaseK from L0A / L0B (double-buffered)."""
    align, mem = target.rules.align, target.memory
    area = mem.l0c_bytes / (buffers * FP32_BYTES)
    tallest = int(floor_to(mem.l0a_bytes / (2 * align * in_bytes), align))  # with BaseK = 16
    widest = int(floor_to(mem.l0b_bytes / (2 * align * in_bytes), align))
    base_m = min(tallest, max(align, int(floor_to(math.sqrt(area * aspect), align))))
    base_n = min(widest, max(align, int(floor_to(area / base_m, align))))
    base_k = int(floor_to(min(mem.l0a_bytes / (2 * base_m * in_bytes),
                              mem.l0b_bytes / (2 * base_n * in_bytes)), align))
    return base_m, base_n, max(align, base_k)


@dataclass(frozen=True)
class AswTiling:
    """Step 0-1 of ASW: L0 tiles, the per-core block and its K granularity."""

    base_m: int
    base_n: int
    base_k: int
    single_core_m: int
    single_core_n: int
    k_l1: int
    m_cnt: int
    n_cnt: int


def asw_tiling(target: AscendTarget, batch: int, m: int, k: int, n: int,
               in_bytes: int = 2) -> AswTiling:
    """The largest per-core blocks that still give every core one (mCnt * nCnt >= C / B) and
    leave L1 room for runs of at least ``d_value_min_bytes`` along K (double-buffered), shaped
    like the output, in whole L0 tiles; k_L1 as large as L1 allows, at most K and the 512 B run
    that stops paying, in whole L0 tiles."""
    c, align, rules = target.cores.cube, target.rules.align, target.rules
    widest = target.memory.l1_bytes / (2 * rules.d_value_min_bytes)  # single_m + single_n
    need = -(-c // batch)
    m_cnt, n_cnt = 1, 1
    while (m_cnt * n_cnt < need or -(-m // m_cnt) + -(-n // n_cnt) > widest) and (
            m > m_cnt * align or n > n_cnt * align):
        if m / m_cnt >= n / n_cnt:  # split the longer side of the block first
            m_cnt += 1
        else:
            n_cnt += 1
    block_m, block_n = -(-m // m_cnt), -(-n // n_cnt)
    base_m, base_n, base_k = base_tile(target, block_m / block_n, in_bytes)
    base_m = min(base_m, int(ceil_to(block_m, align)))
    base_n = min(base_n, int(ceil_to(block_n, align)))
    # whole L0 tiles, rounded down as the design does (a block of 1024 with 176-tiles is 880)
    single_m = max(base_m, block_m // base_m * base_m)
    single_n = max(base_n, block_n // base_n * base_n)
    k_l1 = target.memory.l1_bytes / (2 * (single_m + single_n) * in_bytes)
    k_l1 = int(floor_to(min(k_l1, ceil_to(k, align), rules.d_value_max_bytes / in_bytes), align))
    k_l1 = max(align, k_l1)
    return AswTiling(base_m, base_n, dividing_tile(k_l1, base_k, align), single_m, single_n,
                     k_l1, -(-m // single_m), -(-n // single_n))


def dividing_tile(length: int, most: int, align: int = 16) -> int:
    """The largest multiple of ``align`` up to ``most`` that divides ``length`` (a multiple of
    ``align``): an L0 tile that cuts an L1 transfer into whole tiles."""
    return next(t for t in range(min(most, length) // align * align, 0, -align)
                if length % t == 0)


def largest_divisor(n: int, most: int) -> int:
    """The largest divisor of ``n`` not above ``most`` (at least 1): a swizzle window that
    splits the cores into whole windows."""
    return max(d for d in range(1, max(1, min(n, most)) + 1) if n % d == 0)


def snake_order(cores: int, window: int, m_blocks: int, n_blocks: int) -> np.ndarray:
    """Execution position of each output block (m, n) under the sliding-window snake: windows
    of ``window`` block rows, M fastest inside a window, every odd window walking N backwards."""
    order = np.empty((m_blocks, n_blocks), dtype=np.int64)
    position = 0
    for w, top in enumerate(range(0, m_blocks, window)):
        rows = range(top, min(top + window, m_blocks))
        cols = range(n_blocks - 1, -1, -1) if w % 2 else range(n_blocks)
        for col in cols:
            for row in rows:
                order[row, col] = position
                position += 1
    return order


def diagonal_assignment(cores: int, m_blocks: int, n_blocks: int) -> np.ndarray:
    """Which core computes each block of the first wave with the diagonal (staggered) start:
    block t goes to m = t mod mCnt and n shifted by t // mCnt + m, so that concurrent cores
    read different A rows and B columns; -1 where no core of the wave lands."""
    grid = np.full((m_blocks, n_blocks), -1, dtype=np.int64)
    for t in range(min(cores, m_blocks * n_blocks)):
        m = t % m_blocks
        grid[m, (t // m_blocks + m) % n_blocks] = t
    return grid


def transpose_conflict(cores: int, m_blocks: int, n_blocks: int) -> int:
    """Most cores of one wave reading the same A or B block (the design keeps it <= 6)."""
    return max(-(-cores // m_blocks), -(-cores // n_blocks))


@dataclass(frozen=True)
class L2Plan:
    """Step 5: the write policy and, when the inputs exceed L2, the execution groups."""

    scenario: str          # "A": all resident, "B": inputs resident, "C": inputs exceed L2
    write_policy: str      # "l2" or "gm"
    m_grp: int             # blocks per group along M and N (0: no grouping)
    n_grp: int
    groups: int
    r_in: float            # the design note's re-read factor of the inputs
    bandwidth_needed: float  # GM bytes per second at the Cube's pace (inputs once + outputs)


def l2_plan(target: AscendTarget, batch: int, m: int, k: int, n: int, single_m: int,
            single_n: int, in_bytes: int = 2, out_bytes: int = 2) -> L2Plan:
    """The write policy and L2 groups of the design's scenarios A, B and C."""
    l2 = target.memory.l2_bytes
    s_in = batch * (m * k + k * n) * in_bytes
    s_out = batch * m * n * out_bytes
    t_mmad = 2 * batch * m * n * k / target.compute.cube_sustained_flops
    needed = (s_in + s_out) / t_mmad
    if s_in + s_out <= l2:
        return L2Plan("A", "l2", 0, 0, 1, 1.0, needed)
    if s_in <= l2:
        return L2Plan("B", "gm", 0, 0, 1, 1.0, needed)
    d = l2 / (batch * k * in_bytes)  # block rows + block columns one group may hold
    m_grp = max(1, int(d // (2 * single_m)))
    n_grp = max(1, int(d // (2 * single_n)))
    m_cnt, n_cnt = -(-m // single_m), -(-n // single_n)
    groups = -(-m_cnt // m_grp) * -(-n_cnt // n_grp)
    r_in = (n_grp * m + m_grp * n) / (m + n)
    return L2Plan("C", "gm", m_grp, n_grp, groups, r_in, needed)
