"""``dse ascend ...``: the BMM tiling design's rule-based classifier as a tool.

``dse ascend classify --shape BxMxKxN --dtype bf16 [--json]`` names the branch the rules pick and
the numbers behind it; ``dse ascend sweep`` classifies the design's coverage grid
(:mod:`search_spaces.ascend_bmm.sweep`) and reports each branch's share.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dse.core.commands import positive_int
from dse.core.errors import UsageError

TARGET = "ascend-950pr"


def _ascend_target(name: str) -> Any:
    from dse.core import load_target

    target = load_target(name)
    if target.space != "ascend_bmm":
        raise UsageError(f"--target: {name} is not an Ascend target (its space is "
                         f"{target.space}); e.g. {TARGET}")
    return target


def cmd_classify(args: argparse.Namespace) -> int:
    """``dse ascend classify``: the branch the rules pick for a shape and the numbers behind it
    (with ``--config``, the configuration they choose), or JSON."""
    from dse.core import BatchedGemmWorkload, key_values, require_dtype
    from search_spaces.ascend_bmm.tiling import rule_config, rule_decision

    target = _ascend_target(args.target)
    workload = BatchedGemmWorkload.parse(args.shape, args.dtype, args.b_layout)
    require_dtype(target, workload)
    decision = rule_decision(target, workload)
    if args.config:
        decision["config"] = rule_config(target, workload)
    if args.json:
        print(json.dumps({"shape": workload.shape, "dtype": workload.dtype.name, **decision},
                         indent=2))
        return 0
    form = f" (form {decision['iter_batch_form']})" if decision["iter_batch_form"] else ""
    print(f"{workload.label} on {target.name}: {decision['branch']}{form}")
    shown = {k: v for k, v in decision.items()
             if k not in ("branch", "iter_batch_form", "config")}
    print(key_values(shown))
    if args.config:
        print("configuration the rules pick:\n" + key_values(decision["config"]))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """``dse ascend sweep``: classify the coverage grid; prints each branch's share, the IterBatch
    forms and the rate (or JSON)."""
    import numpy as np

    from dse.core import table
    from search_spaces.ascend_bmm.rules import BRANCHES, ITER_FORMS
    from search_spaces.ascend_bmm.sweep import MAX_BATCH, MAX_POINTS, log_grid, sweep

    target = _ascend_target(args.target)
    if args.points > MAX_POINTS or args.max_batch > MAX_BATCH:
        raise UsageError(f"--points must be at most {MAX_POINTS} (a grid of points^3 shapes is "
                         f"held per batch) and --max-batch at most {MAX_BATCH}; got "
                         f"{args.points} and {args.max_batch}")
    batches = np.arange(1, args.max_batch + 1, args.batch_step)
    values = log_grid(args.points)
    total = len(batches) * len(values) ** 3
    print(f"classifying {total:,} shapes: batch 1..{args.max_batch} (step {args.batch_step}) x "
          f"{len(values)} values of M, N and K in [1, 10240]", file=sys.stderr)
    counts, forms, seconds = sweep(target, batches, values, progress=True)
    rows = [{"branch": name, "shapes": int(c), "share": c / total}
            for name, c in zip(BRANCHES, counts, strict=True)]
    summary = {"shapes": total, "seconds": seconds, "shapes_per_s": total / seconds,
               "branches": rows,
               "iter_batch_forms": {f: int(c) for f, c in zip(ITER_FORMS, forms, strict=True)},
               "empty": [r["branch"] for r in rows if r["shapes"] == 0]}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(table(rows, ("branch", "shapes", "share")))
    print(f"IterBatch forms: {summary['iter_batch_forms']}")
    print(f"{total:,} shapes in {seconds:.1f} s ({total / seconds:,.0f} shapes/s); every "
          "shape got a branch" + (f"; no shape reached {', '.join(summary['empty'])}"
                                  if summary["empty"] else ""))
    return 0


def add_commands(sub: Any) -> None:
    """``dse ascend`` and its subcommands."""
    ascend = sub.add_parser("ascend", help="the Ascend BMM tiling design's rules")
    commands = ascend.add_subparsers(dest="ascend_command", required=True)
    cl = commands.add_parser("classify", help="the branch the rules pick for one shape")
    cl.add_argument("--shape", required=True, help="BxMxKxN, e.g. 8x2048x1024x2048 (B may be "
                    "A/B batches, e.g. 8/1)")
    cl.add_argument("--dtype", default="bf16", help="bf16 (default), fp16, or a pair such as "
                    "bf16-fp32")
    cl.add_argument("--b-layout", default=None, help="transposes: NN (default), NT, TN, TT")
    cl.add_argument("--target", default=TARGET)
    cl.add_argument("--config", action="store_true", help="also the tiling the rules pick")
    cl.add_argument("--json", action="store_true")
    cl.set_defaults(func=cmd_classify)
    sw = commands.add_parser("sweep", help="classify the design's coverage grid")
    sw.add_argument("--target", default=TARGET)
    sw.add_argument("--max-batch", type=positive_int, default=2048)
    sw.add_argument("--batch-step", type=positive_int, default=1, help="every Nth batch (1: all)")
    sw.add_argument("--points", type=positive_int, default=60, help="log-spaced samples of M, N, K")
    sw.add_argument("--json", action="store_true")
    sw.set_defaults(func=cmd_sweep)
