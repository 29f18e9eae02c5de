"""Rules against search on Ascend 950PR: where does tuning beat the BMM design's rule-picked
tiling, by how much, and in which branch regions?

Run: python benchmarks/ascend_rules_vs_search.py [--shapes 40] [--trials 200] [--seed 0]
     [--out results.json] [--plot results.html]

Samples batched GEMM shapes (log-uniform batch 1..1024 and M, N, K 16..8192, bf16; a quarter
with a broadcast side), scores the configuration the rules pick (``dse ascend classify
--config``) with the analytical model, then tunes each shape under the same model: a grid
search over every branch (``dse search``) and a TPE study (``dse run``), keeping the better.
Prints the searched / rules throughput ratio per shape and, per rule-picked branch, how often
and by how much search wins and which branch it chose instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from dse import load_trials
from dse.core.formatting import table
from dse.core.registry import build_context, build_evaluator
from dse.storage.frames import best_trials
from dse.study.runner import run_study
from dse.study.spec import study_from_dict
from dse.study.strategies.search import exhaustive

WIN = 1.05  # search "wins" when it is at least 5 % faster


def sample_shapes(count: int, seed: int) -> list[str]:
    """``count`` batched shapes ``BxMxKxN``, log-uniform as the module docstring says; every fourth
    broadcasts B over its batches (``b/1``) when b is above 1."""
    rng = np.random.default_rng(seed)

    def log_int(lo: int, hi: int) -> int:
        return int(round(np.exp(rng.uniform(np.log(lo), np.log(hi)))))

    shapes = []
    for i in range(count):
        b, m, k, n = log_int(1, 1024), log_int(16, 8192), log_int(16, 8192), log_int(16, 8192)
        batch = f"{b}/1" if i % 4 == 3 and b > 1 else str(b)
        shapes.append(f"{batch}x{m}x{k}x{n}")
    return shapes


def tune(shape: str, trials: int, seed: int, storage: str) -> dict[str, Any]:
    """The rules' config and the best the tuner finds, both scored by the analytical model."""
    ctx = build_context("ascend-950pr", "bf16", shape)
    model = build_evaluator("analytical")
    defaults = ctx.space.encode([ctx.space.resolve({})])
    rules, rules_params = model.evaluate(defaults, ctx)[0], ctx.space.decode(defaults)[0]
    grid = exhaustive(model, ctx, top=1).top
    name = f"rvs-{shape}"
    run_study(study_from_dict({"name": name, "target": "ascend-950pr", "sampler": "tpe",
                               "seed": seed, "workload": {"shape": shape, "dtype": "bf16"},
                               "budget": {"trials": trials}}), storage)
    best = best_trials(load_trials(storage, name), top=1)
    found = [(grid[0].metrics["tops"], grid[0].params["branch"])] if grid else []
    if not best.empty:
        found.append((float(best["tops"].iloc[0]), str(best["branch"].iloc[0])))
    searched_tops, searched_branch = max(found)
    return {"shape": shape, "rules_branch": rules_params["branch"],
            "rules_tops": rules.metrics["tops"], "rules_stage": rules.metrics["stage"],
            "searched_tops": searched_tops, "searched_branch": searched_branch,
            "ratio": searched_tops / rules.metrics["tops"]}


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per rule-picked branch: its shapes, how often search wins by ``WIN``, the median and largest
    ratios, and the branches search chose instead."""
    by_branch: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_branch[row["rules_branch"]].append(row)
    out = []
    for branch, group in sorted(by_branch.items()):
        ratios = [r["ratio"] for r in group]
        switched = Counter(r["searched_branch"] for r in group if r["ratio"] >= WIN
                           and r["searched_branch"] != branch)
        out.append({"rules_branch": branch, "shapes": len(group),
                    "search_wins": sum(r >= WIN for r in ratios),
                    "median_ratio": statistics.median(ratios), "max_ratio": max(ratios),
                    "search_chose_instead": ", ".join(f"{b} x{c}" for b, c in
                                                      switched.most_common()) or "-"})
    return out


def plot(rows: list[dict[str, Any]], path: str) -> None:
    """Write an HTML scatter of searched against rule-picked TFLOP/s (a trace per rule-picked
    branch) with the line where they are equal."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for branch in sorted({r["rules_branch"] for r in rows}):
        group = [r for r in rows if r["rules_branch"] == branch]
        fig.add_trace(go.Scatter(x=[r["rules_tops"] for r in group],
                                 y=[r["searched_tops"] for r in group], mode="markers",
                                 name=branch, text=[r["shape"] for r in group]))
    top = max(r["searched_tops"] for r in rows)
    fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="equal"))
    fig.update_layout(title="Ascend 950PR bf16: searched against rule-picked TFLOP/s",
                      xaxis_title="rules (TFLOP/s)", yaxis_title="searched (TFLOP/s)")
    fig.write_html(path, include_plotlyjs=True)


def main() -> None:
    """Tune every sampled shape, then print the per-shape table, the per-branch summary and the
    overall ratios; optionally write the rows as JSON and the scatter."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=int, default=40)
    parser.add_argument("--trials", type=int, default=200, help="TPE trials a shape")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write every shape's result as JSON")
    parser.add_argument("--plot", help="write a scatter of searched against rules (HTML)")
    args = parser.parse_args()
    storage = str(Path(tempfile.mkdtemp()) / "rules_vs_search.db")
    rows, start = [], time.perf_counter()
    for i, shape in enumerate(sample_shapes(args.shapes, args.seed), start=1):
        rows.append(tune(shape, args.trials, args.seed, storage))
        print(f"\r{i}/{args.shapes} shapes tuned ({time.perf_counter() - start:.0f} s)",
              end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(table(rows, ("shape", "rules_branch", "rules_tops", "rules_stage", "searched_branch",
                       "searched_tops", "ratio")))
    print("\nper rule-picked branch (ratio = searched / rules TFLOP/s, same analytical model):")
    print(table(summarise(rows), ("rules_branch", "shapes", "search_wins", "median_ratio",
                                  "max_ratio", "search_chose_instead")))
    ratios = [r["ratio"] for r in rows]
    print(f"\nsearch beats the rules by >= {WIN - 1:.0%} on {sum(r >= WIN for r in ratios)} of "
          f"{len(rows)} shapes; median ratio {statistics.median(ratios):.2f}, geometric mean "
          f"{float(np.exp(np.mean(np.log(ratios)))):.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
