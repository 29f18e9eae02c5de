"""Vectorised enumeration of the tile sizes (m_ct, k_ct, n_ct, k_mt) of the XDNA GEMM space.

The full box of tile sizes is mostly infeasible (L1 holds ~63 KiB), so it is generated
constructively: (m_ct, n_ct) pairs of the kernel's register blocking whose smallest tile fits L1,
then every k_ct that can fit with them, then every k_mt up to the exact L2 limit (L2 use is
linear in k_mt). These bounds only
drop configs that the capacity constraints would reject; all constraints run on the result.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dse.core.params import ConfigBatch
from dse.core.workload import GemmWorkload
from search_spaces.xdna_gemm.geometry import ceil_div, derive, l2_usage
from search_spaces.xdna_gemm.target import XdnaTarget


def tile_domains(
    target: XdnaTarget, workload: GemmWorkload, other: Mapping[str, int]
) -> dict[str, int]:
    """Upper bounds of m_ct, k_ct, n_ct (from L1 alone) and k_mt (from K) for the box size."""
    spec = target.input_spec(workload.dtype.input)
    ty, ty_c = workload.dtype.in_bytes, workload.dtype.out_bytes
    avail = target.memory.l1_bytes - target.memory.l1_stack_bytes
    ba, bb, bc = other["buf_a_l1"], other["buf_b_l1"], other["buf_c_l1"]
    m_hi = (avail - bb * spec.s * spec.t * ty) // (ba * spec.s * ty + bc * spec.t * ty_c)
    n_hi = (avail - ba * spec.r * spec.s * ty) // (bb * spec.s * ty + bc * spec.r * ty_c)
    k_hi = (avail - bc * spec.r * spec.t * ty_c) // ((ba * spec.r + bb * spec.t) * ty)
    return {
        "m_ct": max(m_hi // spec.r, 0) * spec.r,
        "n_ct": max(n_hi // spec.t, 0) * spec.t,
        "k_ct": max(k_hi // spec.s, 0) * spec.s,
        "k_mt": int(ceil_div(workload.K, spec.s)) * spec.s,
    }


def l1_max_k(m: np.ndarray, n: np.ndarray, target: XdnaTarget, workload: GemmWorkload,
             other: Mapping[str, int]) -> np.ndarray:
    """Largest k_ct (not rounded to s) whose tiles fit L1 with m_ct, n_ct (unaligned bytes)."""
    ty, ty_c = workload.dtype.in_bytes, workload.dtype.out_bytes
    avail = target.memory.l1_bytes - target.memory.l1_stack_bytes
    ba, bb, bc = other["buf_a_l1"], other["buf_b_l1"], other["buf_c_l1"]
    return (avail - bc * m * n * ty_c) // ((ba * m + bb * n) * ty)


def max_k_mt_multiple(tiles: ConfigBatch, target: XdnaTarget, workload: GemmWorkload) -> np.ndarray:
    """Largest j such that k_mt = j * k_ct fits L2 and does not exceed K rounded up.

    L2 use of the fullest MemTile group is linear in k_mt (f0 + j*d), so j is solved exactly.
    """
    k = tiles["k_ct"]
    sharing = target.memory.l2_neighbour_sharing
    f1 = _fullest(tiles, k, target, workload, sharing)
    f2 = _fullest(tiles, 2 * k, target, workload, sharing)
    one = {**tiles, "k_mt": k}
    _, _, group = l2_usage(one, derive(one, target, workload), sharing)
    slope = f2 - f1
    cap = group * target.memory.l2_bytes
    j_k = ceil_div(workload.K, k)  # beyond K, a larger k_mt only adds padding
    j_l2 = np.where(slope > 0, (cap - (f1 - slope)) // np.maximum(slope, 1), j_k)
    return np.clip(np.minimum(j_k, j_l2), 0, None)


def ordinal(counts: np.ndarray) -> np.ndarray:
    """1, 2, ..., c for each count c, concatenated (the multiple of each repeated row)."""
    return np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts) + 1


def _values(name: str, step: int, hi: int, fixed: Mapping[str, int]) -> np.ndarray:
    if name in fixed:
        return np.array([fixed[name]], dtype=np.int64)
    return np.arange(step, hi + 1, step, dtype=np.int64)


def enumerate_tiles(
    target: XdnaTarget, workload: GemmWorkload, other: Mapping[str, int], fixed: Mapping[str, int]
) -> ConfigBatch:
    """Every (m_ct, k_ct, n_ct, k_mt) that can fit L1 and L2 with the other parameters ``other``.

    ``fixed`` pins any of the four tile parameters to one value.
    """
    spec = target.input_spec(workload.dtype.input)
    hi = tile_domains(target, workload, other)

    # only multiples of the register blocking: the others break a rule whatever else holds
    ms = _values("m_ct", spec.r * spec.expand_r, hi["m_ct"], fixed)
    ns = _values("n_ct", spec.t * spec.expand_t, hi["n_ct"], fixed)
    mm, nn = (a.ravel() for a in np.meshgrid(ms, ns, indexing="ij"))
    k_max = l1_max_k(mm, nn, target, workload, other)
    if "k_ct" in fixed:
        fits = k_max >= fixed["k_ct"]
        m3, n3 = mm[fits], nn[fits]
        k3 = np.full_like(m3, fixed["k_ct"])
    else:
        count = np.clip(k_max // spec.s, 0, None)
        m3, n3 = np.repeat(mm, count), np.repeat(nn, count)
        k3 = ordinal(count) * spec.s

    base = {name: np.full(len(m3), value, dtype=np.int64) for name, value in other.items()}
    if "k_mt" in fixed:
        kmt = np.full_like(k3, fixed["k_mt"])
        return {**base, "m_ct": m3, "k_ct": k3, "n_ct": n3, "k_mt": kmt}

    reps = max_k_mt_multiple({**base, "m_ct": m3, "k_ct": k3, "n_ct": n3}, target, workload)
    m4, n4, k4 = np.repeat(m3, reps), np.repeat(n3, reps), np.repeat(k3, reps)
    j = ordinal(reps)
    base = {name: np.full(len(m4), value, dtype=np.int64) for name, value in other.items()}
    return {**base, "m_ct": m4, "k_ct": k4, "n_ct": n4, "k_mt": j * k4}


def _fullest(probe: ConfigBatch, kmt: np.ndarray, target: XdnaTarget, workload: GemmWorkload,
             sharing: bool) -> np.ndarray:
    batch = {**probe, "k_mt": kmt}
    return l2_usage(batch, derive(batch, target, workload), sharing)[1]
