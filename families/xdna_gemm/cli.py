"""``dse compare``: the XDNA event simulator against the analytical model on sampled configs."""

from __future__ import annotations

import argparse
import functools
import json
from typing import Any

from dse.core.commands import add_storage_option, positive_int


def cmd_compare(args: argparse.Namespace) -> int:
    """``dse compare``: the simulator against the analytical model on sampled configs; prints their
    rank correlation and largest disagreements (or JSON)."""
    from dse.core import build_context, table
    from search_spaces.xdna_gemm.compare import compare
    from search_spaces.xdna_gemm.params import TILE_PARAMS

    ctx = build_context(args.target, args.dtype, args.shape, args.b_layout)
    # opened once compare has checked its input: a mistyped option creates no database
    store = functools.cache(lambda: args.open_store("create"))
    frame, spearman = compare(ctx, args.samples, args.seed, store)
    if args.json:
        print(json.dumps({"spearman": spearman, "configs": frame.to_dict("records")}, indent=2))
        return 0
    diff = frame["difference"].abs()
    print(f"{len(frame)} configs of {args.shape} {args.dtype} on {args.target}: Spearman rank "
          f"correlation {spearman:.3f}; |difference| median {diff.median():.1%}, "
          f"max {diff.max():.1%}; both fidelities stored in {store().safe_url}")
    print("\nlargest disagreements (difference = simulator / analytical - 1):")
    top = frame.head(args.top).to_dict("records")
    print(table(top, (*TILE_PARAMS, "analytical_tops", "simulator_tops", "difference",
                      "reason")))
    return 0


def add_commands(sub: Any) -> None:
    """``dse compare``."""
    co = sub.add_parser("compare", help="simulator against analytical model on sampled configs")
    for flag in ("--target", "--dtype", "--shape"):
        co.add_argument(flag, required=True)
    co.add_argument("--b-layout", default=None)
    co.add_argument("--samples", type=positive_int, default=50)
    co.add_argument("--seed", type=int, default=0)
    co.add_argument("--top", type=positive_int, default=8, help="disagreements to list")
    add_storage_option(co, "deferred", "./dse.db; both fidelities' results are stored there")
    co.add_argument("--json", action="store_true")
    co.set_defaults(func=cmd_compare)
