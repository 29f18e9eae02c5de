"""Speed of the exact search: branch-and-bound against scoring every config, in one run.

Run: python benchmarks/exhaustive_search.py [--target xdna2 --dtype int8-int8 --shape 4096x...]

For the default space, the default space with one more parameter free (bd_scheme, then
buf_a_l1) and the whole space (every parameter free), prints the branch-and-bound's time and
what it scored and pruned, beside the old path (``prune=False``: every config generated, checked
and scored) where that finishes in reasonable time, and each figure against its goal:

* default space: >= 10 M configs/s end to end, counting the configs the old path generates and
  checks (the same set both paths cover);
* the whole space searched exactly in < 1 s.

Exit status 1 when the two paths disagree on any config or metric of the top (the pruned
search must return brute force's top exactly) or a goal is missed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from goals import against_goal

from dse.core.evaluator import EvalContext
from dse.core.outcome import SearchOutcome
from dse.core.registry import build_context, build_evaluator
from dse.study.strategies.search import exhaustive

ANALYTICAL = build_evaluator("analytical")


def timed(ctx: EvalContext, free: Sequence[str], prune: bool, top: int,
          repeats: int) -> tuple[float, SearchOutcome]:
    """Best wall time of ``repeats`` searches and the last outcome."""
    best, outcome = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        outcome = exhaustive(ANALYTICAL, ctx, free=free, top=top, prune=prune)
        best = min(best, time.perf_counter() - start)
    assert outcome is not None
    return best, outcome


def same_top(a: SearchOutcome, b: SearchOutcome) -> bool:
    """Whether two searches returned the same configs with the same metrics, in order."""
    return len(a.top) == len(b.top) and all(
        x.params == y.params and x.metrics == y.metrics for x, y in zip(a.top, b.top,
                                                                        strict=True))


def describe(name: str, seconds: float, outcome: SearchOutcome) -> None:
    """One line of what a search took, covered, scored and pruned."""
    pruned = ", ".join(f"{level} {n:,}" for level, n in outcome.pruned.items())
    print(f"  {name}: {seconds:.4f} s; box {outcome.n_total:,} configs, generated "
          f"{outcome.n_evaluated:,}, feasible {outcome.n_feasible:,}"
          + (f"; scored {outcome.n_scored:,}; pruned sub-spaces: {pruned}"
             if outcome.n_scored is not None else ""))


def main() -> int:
    """Run every comparison; 1 when the paths disagree or a goal is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="xdna2")
    parser.add_argument("--dtype", default="int8-int8")
    parser.add_argument("--shape", default="4096x4096x4096")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ctx = build_context(args.target, args.dtype, args.shape)
    problem = f"{args.target} {args.dtype} {args.shape}"
    ok, default = True, None
    # one more parameter free: the two examples, where the space has them
    more = [(p,) for p in ("bd_scheme", "buf_a_l1") if p in ctx.space.params()]
    for free in ((), *more):
        label = "default space" + (f" + {free[0]} free" if free else "")
        print(f"{problem}, {label}:")
        new_s, new = timed(ctx, free, True, args.top, args.repeats)
        old_s, old = timed(ctx, free, False, args.top, 1)
        default = default or old
        describe("branch-and-bound", new_s, new)
        describe("every config scored (old path)", old_s, old)
        if not same_top(new, old):
            print("  the two paths returned different tops: the pruned search is WRONG")
            ok = False
        rate, old_rate = old.n_evaluated / new_s, old.n_evaluated / old_s
        met = against_goal(f"exact search, {label}, {problem}", rate / 1e6, 10.0,
                           "M configs/s", old=old_rate / 1e6)
        ok &= met or bool(free)  # the goal is the default space's; the others are shown

    every = list(ctx.space.params())
    whole_s, whole = timed(ctx, every, True, args.top, args.repeats)
    print(f"{problem}, every parameter free:")
    describe("branch-and-bound", whole_s, whole)
    assert default is not None
    print(f"  (its box is {whole.n_total / default.n_total:,.0f} times the default space's: "
          "the old path is not run)")
    ok &= against_goal(f"exact search, whole space, {problem}", whole_s, 1.0, "s",
                       higher_is_better=False)
    best = whole.top[0]
    print(f"best: {ctx.space.describe(best.params)} "
          f"{ {k: v for k, v in best.params.items() if k not in ctx.space.kernel_keys} } -> "
          f"{best.metrics['tops']:.2f} TOPS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
