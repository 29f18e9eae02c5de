"""XDNA2's read merge, bounded by what the paper says of its layout results.

The merge of a row-major B's column reads (``dram.read_merge``: the fraction of each extra
column's span that lengthens a DRAM run) is a property of the path from the NPU's shim DMAs
through the NoC and the SoC interconnect to the memory controller. The seeds fix no value of it
for XDNA2: both chips have the same DDR5-5600, but XDNA2's B streams leave from eight shims of
which four also carry an A stream (A tiles from the shims of columns 0, 2, 4 and 6), so adjacent
columns are never loaded alike as XDNA's four are, and the paper puts XDNA2's larger layout
effect down to that path. Its burst sizes do not fix it either: a row-major B's runs (n_ct
bytes, at most 288 here) are one burst on both chips (AIE2 bursts of up to 256 B, AIE2P up to
512 B).

What the paper does fix is a bound. Reads cannot unmerge (``read_merge >= 0``), and on the
roofline sweep with the balanced kernels XDNA2's col-major gain exceeds XDNA's published gain
for every dtype (4.8 %, 4.4 %, 0.57 %); the gain falls as the merge grows, so the merge lies
below the value where the first dtype's gain reaches XDNA's. Within ``[0, upper)`` nothing
published prefers one value to another, so the target file takes the centre, the value whose
largest distance to any merge the paper allows is the least.
"""

from __future__ import annotations

import dataclasses

from evaluators.analytical import paper_data
from evaluators.analytical.layout_sweep import layout_sweep
from search_spaces.xdna_gemm.target import XdnaTarget

SAMPLES = 40  # sweep shapes per dtype (seed 0): the gains move < 1 point beyond this


def with_read_merge(target: XdnaTarget, merge: float) -> XdnaTarget:
    """``target`` with its DRAM read merge set to ``merge``."""
    return dataclasses.replace(target, dram=dataclasses.replace(target.dram, read_merge=merge))


def margin(xdna2: XdnaTarget, merge: float) -> float:
    """The least, over the paper's swept dtypes, of XDNA2's mean col-major gain at ``merge``
    minus XDNA's published gain: positive where the paper's statement holds."""
    target = with_read_merge(xdna2, merge)
    return min(layout_sweep(target, dtype, SAMPLES).mean_gap - gap
               for dtype, gap in paper_data.ROW_MAJOR_GAPS.items())


def read_merge_bound(xdna2: XdnaTarget, top: float = 0.5) -> tuple[float, float]:
    """``(0, upper)``: the read merges at which XDNA2's layout gains all exceed XDNA's."""
    from scipy.optimize import brentq

    if margin(xdna2, 0.0) <= 0:
        raise ValueError("XDNA2's gains do not exceed XDNA's even without merging")
    return 0.0, float(brentq(lambda m: margin(xdna2, m), 0.0, top, xtol=1e-6))


def centred_read_merge(xdna2: XdnaTarget) -> float:
    """The centre of :func:`read_merge_bound`'s interval (what the target file ships)."""
    low, high = read_merge_bound(xdna2)
    return (low + high) / 2
