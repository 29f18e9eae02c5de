"""Simulator against analytical model on a random sample of feasible configs.

Both fidelities score the same configs; the report gives their rank agreement (Spearman), the
configs where they disagree most and why (from the simulator's stall breakdown), and stores
every result as an evaluation of its fidelity, so later studies are served from the store
(``store`` is the results store ``dse compare --storage`` opened).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from dse.core import EvalContext, UsageError, batch_take, build_evaluator
from dse.core.commands import ResultSink


def why_they_differ(model: dict[str, Any], sim: dict[str, Any]) -> str:
    """The simulator's main reason for a throughput different from the model's."""
    latency = sim["latency_s"]
    memory_bound = sim["bound"] == model["bound"] == "memory"
    causes = [
        (sim["stall_bds_s"], "cores wait for buffer descriptors (sequential reconfiguration)"),
        (sim["t_bd_setup_s"], "a BD task starts every round: small tiles make many rounds"),
        (sim["stall_inputs_s"],
         "memory-bound in both: the simulation shares DRAM stream by stream (reads before C "
         "writes), the model uses one average bandwidth" if memory_bound else
         "cores wait for A/B tiles: DRAM delivers in bursts (C writes, L2 depth) that the "
         "model averages away"),
        (sim["stall_c_drain_s"], "cores wait for the C drain"),
    ]
    share, cause = max(causes, key=lambda c: c[0])
    if share > 0.02 * latency:
        return f"{cause} ({share / latency:.0%} of the time)"
    if sim["bound"] != model["bound"]:
        return (f"near the balance point: the model says {model['bound']}-bound, the simulation "
                f"{sim['bound']}-bound")
    return "fixed costs: BD start-up per round, first chunk and last C tile"


def compare(ctx: EvalContext, samples: int = 50, seed: int = 0,
            store: ResultSink | Callable[[], ResultSink] | None = None,
            ) -> tuple[pd.DataFrame, float]:
    """Score ``samples`` random feasible configs with both fidelities, and store both (``store``:
    a store, or what opens one once the input is checked).

    Returns one row per config (params, both throughputs, relative difference, reason) sorted by
    disagreement, and the Spearman rank correlation of the two throughputs.
    """
    model_ev, sim_ev = build_evaluator("analytical"), build_evaluator("simulator")
    if ctx.space.name not in sim_ev.spaces:
        raise UsageError(f"dse compare runs the {', '.join(sim_ev.spaces)} event simulator; "
                         f"{ctx.target.name} is a {ctx.space.name} target")
    if samples < 3:
        raise UsageError(f"--samples must be at least 3, got {samples}")
    batch, _ = ctx.space.enumerate()
    ok = np.flatnonzero(ctx.space.check(batch).ok)
    if not len(ok):
        raise UsageError("no feasible configuration to compare")
    rng = np.random.default_rng(seed)
    chosen = batch_take(batch, np.sort(rng.choice(ok, size=min(samples, len(ok)),
                                                  replace=False)))
    configs = ctx.space.decode(chosen)
    models, sims = model_ev.evaluate(chosen, ctx), sim_ev.evaluate(chosen, ctx)
    if store is not None:  # stored outside any study: later studies are served from them
        sink = store() if callable(store) else store
        sink.put_results(ctx.target, ctx.workload.to_dict(), ctx.space.name, configs,
                         [(model_ev, models), (sim_ev, sims)])
    rows = []
    for params, model, sim in zip(configs, models, sims, strict=True):
        mt, st = model.metrics["tops"], sim.metrics["tops"]
        rows.append({**params, "analytical_tops": mt, "simulator_tops": st,
                     "difference": st / mt - 1, "analytical_bound": model.metrics["bound"],
                     "simulator_bound": sim.metrics["bound"],
                     "reason": why_they_differ(model.metrics, sim.metrics)})
    frame = pd.DataFrame(rows)
    spearman = float(frame["analytical_tops"].corr(frame["simulator_tops"], method="spearman"))
    order = frame["difference"].abs().sort_values(ascending=False).index
    return frame.loc[order].reset_index(drop=True), spearman
