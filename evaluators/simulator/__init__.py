"""Event simulator of the XDNA/XDNA2 GEMM dataflow: the second fidelity.

It follows every DRAM transfer, MemTile broadcast, kernel call, C drain and buffer descriptor,
so next to the standard metrics it reports where time went: utilisation of the cores, the DMA
channels and DRAM, the cores' stalls (waiting for A/B, for the C drain, for BDs) and, on
request, a Chrome trace-event timeline.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from dse.core import (
    Capabilities,
    ConfigBatch,
    EvalContext,
    EvalResult,
    Evaluator,
    Status,
    batch_len,
    batch_take,
    metrics_row,
)
from evaluators.analytical.xdna_gemm import score as model_score
from evaluators.simulator.gemm_sim import Plan, Trace, make_plan
from evaluators.simulator.run import Outcome, simulate


def sim_metrics(plan: Plan, outcome: Outcome, static: dict[str, Any]) -> dict[str, Any]:
    """Standard metrics from a simulation; sizes and traffic come from ``static`` (the
    analytical model's, which count bytes the same way)."""
    s = outcome.stats
    latency = outcome.end_s + plan.dispatch_s
    t_core = s.core_busy + s.zero + s.wait_c
    t_mem = outcome.dram_busy_s
    metrics = {k: static[k] for k in ("macs_per_cycle", "kernel_efficiency", "peak_tops",
                                      "l1_bytes", "l2_bytes", "dram_bytes", "dram_bytes_a",
                                      "dram_bytes_b", "dram_bytes_c", "padding_ratio", "cores")}
    metrics.update({
        "tops": 2.0 * plan.macs_useful / latency / 1e12,
        "latency_s": latency,
        "t_comp_s": plan.t_comp_s,
        "t_mem_s": t_mem,
        "t_core_s": t_core,
        "bound": "memory" if t_mem > t_core else "compute",
        "balance": plan.t_comp_s / t_mem if t_mem > 0 else float("inf"),
        "dram_gbps": outcome.dram_bytes / t_mem / 1e9 if t_mem > 0 else 0.0,
        "t_drain_s": s.wait_c,
        "t_zero_s": s.zero,
        "t_dispatch_s": plan.dispatch_s,
        "stall_inputs_s": s.wait_inputs,
        "stall_c_drain_s": s.wait_c,
        "stall_bds_s": s.wait_bds,
        "t_bd_setup_s": plan.rounds * plan.setup_s,
        "util_cores": s.core_busy / outcome.end_s,
        "util_dram": t_mem / outcome.end_s,
        "util_shim_a": s.shim_a / outcome.end_s,
        "util_shim_b": s.shim_b / outcome.end_s,
        "util_shim_c": s.shim_c / outcome.end_s,
        "util_memtile_a": s.memtile_a / outcome.end_s,
        "util_memtile_b": s.memtile_b / outcome.end_s,
        "util_core_drain": s.drain / outcome.end_s,
        "sim_rounds": plan.rounds,
        "sim_rounds_simulated": outcome.rounds_simulated,
        "sim_events": outcome.events,
    })
    return metrics


def write_chrome_trace(trace: Trace, path: str | Path, note: str = "") -> None:
    """Write spans as Chrome trace-event JSON (opens in Perfetto and chrome://tracing)."""
    tracks = sorted({span[0] for span in trace.spans})
    tid = {name: i + 1 for i, name in enumerate(tracks)}
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "XDNA GEMM (dse)"}}]
    events += [{"ph": "M", "name": "thread_name", "pid": 1, "tid": tid[name],
                "args": {"name": name}} for name in tracks]
    events += [{"ph": "X", "name": name, "pid": 1, "tid": tid[track], "ts": start * 1e6,
                "dur": max(end - start, 0.0) * 1e6} for track, name, start, end in trace.spans]
    Path(path).write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns",
                                      "otherData": {"note": note}}))


class SimulatorEvaluator(Evaluator):
    """Event simulation of the whole-array GEMM (one representative of each identical actor)."""

    name: ClassVar[str] = "simulator"
    # 2: the analytical model's version 4 kernel and DRAM merges
    # 3: the analytical model's version 5 read merge on XDNA2 (a row-major B's reads)
    # 4: a BD task starts up before it waits on its buffer (the start-up no longer serialised
    #    after the wait)
    # 5: its constants refitted from several starts (the single start stopped in a shallower
    #    minimum of the Table 2 residual)
    version: ClassVar[str] = "5"
    fidelity: ClassVar[str] = "simulator"
    spaces: ClassVar[tuple[str, ...]] = ("xdna_gemm",)  # search spaces it can score
    capabilities: ClassVar[Capabilities] = Capabilities(timeline=True)

    def __init__(self, full: bool = False) -> None:
        self.full = full  # simulate every core and stream (slow; for checking the symmetry)

    def evaluate_feasible(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        results = []
        for i in range(batch_len(batch)):
            start = time.perf_counter()
            metrics = self.simulate(batch_take(batch, np.array([i])), ctx)
            results.append(EvalResult(Status.OK, metrics,
                                      elapsed_s=time.perf_counter() - start))
        return results

    def simulate(self, one: ConfigBatch, ctx: EvalContext,
                 trace_path: str | Path | None = None) -> dict[str, Any]:
        """Metrics of one feasible config; with ``trace_path``, also write its timeline."""
        plan = make_plan(one, ctx.target, ctx.workload)
        trace = Trace() if trace_path else None
        outcome = simulate(plan, full=self.full, trace=trace)
        static = metrics_row(model_score(one, ctx.target, ctx.workload), 0)
        if trace is not None and trace_path:
            note = (f"{outcome.rounds_simulated} of {plan.rounds} rounds simulated; the rest "
                    "repeat the steady period" if outcome.rounds_simulated < plan.rounds
                    else "all rounds simulated")
            write_chrome_trace(trace, trace_path, note)
        return sim_metrics(plan, outcome, static)
