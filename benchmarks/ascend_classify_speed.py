"""The Ascend branch classifier: shapes a second, vectorised, against one shape at a time.

Run: python benchmarks/ascend_classify_speed.py [--shapes 1000000]

Classifies random shapes (batch 1..2048, M, N, K 1..10240, bf16) in one call of
``classify`` on arrays, and, as the baseline in the same process, a sample of them one shape
per call (the rules written as scalar code would run about as fast); prints both rates and
their ratio. The design's target: over a million shapes a second.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dse.core.registry import load_target
from search_spaces.ascend_bmm.rules import classify


def main() -> None:
    """Classify the random shapes both ways and print the two rates and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=int, default=1_000_000)
    parser.add_argument("--scalar", type=int, default=2_000, help="shapes for the baseline")
    args = parser.parse_args()
    chip = load_target("ascend-950pr")
    rng = np.random.default_rng(0)
    b = rng.integers(1, 2049, args.shapes)
    m, k, n = (rng.integers(1, 10241, args.shapes) for _ in range(3))
    start = time.perf_counter()
    branches = classify(chip, b, b, m, k, n)["branch"]
    vector_rate = args.shapes / (time.perf_counter() - start)
    start = time.perf_counter()
    for i in range(args.scalar):
        assert classify(chip, b[i], b[i], m[i], k[i], n[i])["branch"] == branches[i]
    scalar_rate = args.scalar / (time.perf_counter() - start)
    print(f"vectorised: {vector_rate:,.0f} shapes/s ({args.shapes:,} shapes); one at a time: "
          f"{scalar_rate:,.0f} shapes/s; ratio {vector_rate / scalar_rate:,.0f}x")


if __name__ == "__main__":
    main()
