"""The design's coverage grid classified by the branch rules: every batch 1..2048 by 60
log-spaced values of M, N and K (``dse ascend sweep``)."""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from search_spaces.ascend_bmm.rules import BRANCHES, ITER_FORMS, classify

MAX_POINTS = 200  # 200^3 M, K, N values a batch: about 200 MB of arrays
MAX_BATCH = 1 << 20


def log_grid(points: int = 60, top: int = 10240) -> np.ndarray:
    """The design's sampling of M, N and K: ``points`` log-spaced values in [1, top], rounded,
    duplicates dropped (60 give 54 values; with every batch 1..2048, 322 million shapes)."""
    return np.unique(np.round(np.geomspace(1, top, points)).astype(np.int64))


def sweep(target: Any, batches: np.ndarray, values: np.ndarray, in_bytes: int = 2,
          out_bytes: int = 2, progress: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """Shape counts per branch and per IterBatch form over ``batches`` x ``values``^3, and the
    seconds it took; one batch value at a time (54^3 shapes) keeps memory small."""
    m, k, n = (g.ravel() for g in np.meshgrid(values, values, values, indexing="ij"))
    branch_counts = np.zeros(len(BRANCHES), dtype=np.int64)
    form_counts = np.zeros(len(ITER_FORMS), dtype=np.int64)
    start = time.perf_counter()
    for i, b in enumerate(batches):
        out = classify(target, b, b, m, k, n, in_bytes, out_bytes)
        branch_counts += np.bincount(out["branch"], minlength=len(BRANCHES))
        forms = out["iter_batch_form"][out["iter_batch_form"] >= 0]
        form_counts += np.bincount(forms, minlength=len(ITER_FORMS))
        if progress and (i + 1) % 64 == 0:
            done = (i + 1) * len(m)
            print(f"\r{done:,} shapes classified ({done / (time.perf_counter() - start):,.0f}"
                  "/s)", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return branch_counts, form_counts, time.perf_counter() - start
