"""Cycle-level simulator of GEMMs on systolic arrays: the middle rung of the systolic ladder.

Its engine (:mod:`evaluators.systolic_sim.fold_schedule`) reproduces SCALE-Sim 3.0's cycles and
SRAM/DRAM access counts for one GEMM layer exactly, by simulating the fold schedule (events per
fold and per buffer fill) instead of every PE and cycle. A config of the ``systolic_gemm`` space
runs each of its SRAM tiles as one such layer on the config's array, SRAM and DRAM bandwidth
(SCALE-Sim's ``USER`` interface bandwidth for the ofmap's writes and its read buffers' prefetch
rate for A and B, each the config's DRAM bandwidth in elements per cycle, as SCALE-Sim models
reads and writes apart); the layers run back to back,
shared out over the chip's arrays. Reuse of an operand across tiles is not simulated (SCALE-Sim's
scratchpad reuses data within a layer only): where the loop order lets the analytical model keep
a panel on chip, the two rungs differ, and a ladder stores by how much.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, ClassVar

import numpy as np

from dse.core import (
    Capabilities,
    ConfigBatch,
    EvalContext,
    EvalResult,
    Evaluator,
    Status,
    batch_take,
    metrics_row,
)
from evaluators.analytical.systolic_gemm import ENERGY_LEVELS, energy_parts, time_metrics
from evaluators.systolic_sim.fold_schedule import ArraySetup, FoldReport, simulate_gemm
from search_spaces.systolic_gemm.rules import TILES, hardware
from search_spaces.systolic_gemm.target import DATAFLOWS, SystolicTarget
from search_spaces.systolic_gemm.workload import GemmMix

COUNTS = ("total_cycles", "compute_cycles", "stall_cycles", "sram_ifmap_reads",
          "sram_filter_reads", "sram_ofmap_writes", "dram_ifmap_reads", "dram_filter_reads",
          "dram_ofmap_writes")


def tile_layers(dim: int, tile: int) -> list[tuple[int, int]]:
    """(size, how many) of the tiles cutting ``dim``: the whole ones and a last partial one."""
    full, rest = divmod(dim, tile)
    return [(tile, full)] * (full > 0) + [(rest, 1)] * (rest > 0)


def setup_of(one: ConfigBatch, target: SystolicTarget, w: GemmMix) -> ArraySetup:
    """The SCALE-Sim configuration of one config's array: rows, columns, dataflow, each
    operand's SRAM in KiB of its elements (SCALE-Sim's words), and one array's share of the
    DRAM bandwidth in elements per cycle, for the reads (the read buffers' prefetch rate) and
    the ofmap's writes (``USER``)."""
    hw = hardware(one, target)
    dt = w.dtype
    per_cycle = float(hw.dram_bytes_per_s[0]) / target.array.clock_hz / target.array.count
    return ArraySetup(rows=int(hw.rows[0]), cols=int(hw.cols[0]),
                      dataflow=DATAFLOWS[int(one["dataflow"][0])],
                      ifmap_sram_kb=hw.sram_bytes["a"][0] / 1024 / dt.in_bytes,
                      filter_sram_kb=hw.sram_bytes["b"][0] / 1024 / dt.in_bytes,
                      ofmap_sram_kb=hw.sram_bytes["c"][0] / 1024 / dt.out_bytes,
                      bandwidth="USER", user_bandwidth=per_cycle / dt.out_bytes,
                      ifmap_read_bandwidth=max(1, int(per_cycle / dt.in_bytes)),
                      filter_read_bandwidth=max(1, int(per_cycle / dt.in_bytes)))


def simulate_config(one: ConfigBatch, target: SystolicTarget, w: GemmMix,
                    ) -> dict[str, float]:
    """Summed counts of every tile layer of every GEMM of the mix (each distinct tile shape
    simulated once), plus the MACs and the stationary operand's words for the energy."""
    setup = setup_of(one, target, w)
    layers: Counter[tuple[int, int, int]] = Counter()
    for term in w.terms:
        t_m, t_k, t_n = (min(int(one[t][0]), d) for t, d in zip(TILES, (term.M, term.K, term.N),
                                                                   strict=True))
        for m, cm in tile_layers(term.M, t_m):
            for k, ck in tile_layers(term.K, t_k):
                for n, cn in tile_layers(term.N, t_n):
                    layers[(m, k, n)] += cm * ck * cn * term.count
    totals = dict.fromkeys(COUNTS, 0.0)
    totals.update(macs=0.0, stationary=0.0, layers=0.0, mapped=0.0)
    for (m, k_dense, n), count in layers.items():
        # 2:4 weights: the array computes half the depth, and every activation of a group of
        # four is still read (the PEs' multiplexers pick the two the kept weights need)
        k = -(-k_dense // 2) if w.sparse else k_dense
        report: FoldReport = simulate_gemm(setup, m, n, k)
        for key in COUNTS:
            scale = k_dense / k if key in ("sram_ifmap_reads", "dram_ifmap_reads") else 1
            totals[key] += getattr(report, key) * count * scale
        totals["macs"] += m * k * n * count
        totals["mapped"] += report.mapping_eff_pct / 100 * report.compute_cycles * count
        totals["stationary"] += count * {"os": m * n, "ws": k * n, "is": k * m}[setup.dataflow]
        totals["layers"] += count
    return totals


class SystolicSimEvaluator(Evaluator):
    """SCALE-Sim-exact cycles and access counts of each SRAM tile, at a fraction of its time."""

    name: ClassVar[str] = "systolic-sim"
    version: ClassVar[str] = "1"
    fidelity: ClassVar[str] = "simulator"
    spaces: ClassVar[tuple[str, ...]] = ("systolic_gemm",)
    capabilities: ClassVar[Capabilities] = Capabilities()

    def evaluate_feasible(self, batch: ConfigBatch, ctx: EvalContext) -> list[EvalResult]:
        results = []
        for i, params in enumerate(ctx.space.decode(batch)):
            start = time.perf_counter()
            metrics = sim_metrics(batch_take(batch, np.array([i])), ctx.target, ctx.workload)
            results.append(EvalResult(Status.OK, params, metrics,
                                      elapsed_s=time.perf_counter() - start))
        return results


def sim_metrics(one: ConfigBatch, target: SystolicTarget, w: GemmMix) -> dict[str, Any]:
    """The standard metrics, SCALE-Sim's counts and the energy of one feasible config."""
    t = simulate_config(one, target, w)
    hw = hardware(one, target)
    arrays, clock = target.array.count, target.array.clock_hz
    dt, word = w.dtype, target.memory.word_bytes
    # SCALE-Sim counts words of one element; C leaves at the output type's width
    # and 2:4 weights carry a 2-bit index per kept value
    index = 0.25 if w.sparse else 0.0
    dram = {"a": t["dram_ifmap_reads"] * dt.in_bytes,
            "b": t["dram_filter_reads"] * (dt.in_bytes + index),
            "c": t["dram_ofmap_writes"] * dt.out_bytes}
    dram_bytes = sum(dram.values())
    latency = t["total_cycles"] / arrays / clock
    t_comp = t["compute_cycles"] / arrays / clock
    t_mem = dram_bytes / float(hw.dram_bytes_per_s[0])
    sram_words = {"a": (t["sram_ifmap_reads"] * dt.in_bytes + dram["a"]) / word,
                  "b": (t["sram_filter_reads"] * dt.in_bytes + dram["b"]) / word,
                  "c": (t["sram_ofmap_writes"] * dt.out_bytes + dram["c"]) / word}
    stationary_bytes = dt.out_bytes if DATAFLOWS[int(one["dataflow"][0])] == "os" \
        else dt.in_bytes
    energy = {k: float(v[0]) for k, v in energy_parts(
        target, np.array([t["macs"]]), np.array([t["stationary"] * stationary_bytes / word]),
        {op: np.array([v]) for op, v in sram_words.items()}, hw.sram_bytes,
        np.array([dram_bytes / word])).items()}
    total_energy = sum(energy[f"energy_{level}_j"] for level in ENERGY_LEVELS)
    pes = int(hw.rows[0] * hw.cols[0]) * arrays
    standard = metrics_row(time_metrics(w.macs, np.array([latency]), np.array([t_comp]),
                                        np.array([t_mem]), np.array([2.0 * pes * clock])), 0)
    return {
        **standard,
        "macs_per_cycle": w.macs / (t["total_cycles"] / arrays),
        **{key: t[key] for key in ("total_cycles", "compute_cycles", "stall_cycles")},
        "utilisation": t["macs"] / (pes / arrays * t["total_cycles"]),
        "mapping_efficiency": t["mapped"] / t["compute_cycles"],
        "sim_layers": t["layers"],
        "dram_bytes": dram_bytes,
        "dram_bytes_a": dram["a"], "dram_bytes_b": dram["b"], "dram_bytes_c": dram["c"],
        "dram_gbps": dram_bytes / latency / 1e9,
        "sram_reads_a": t["sram_ifmap_reads"], "sram_reads_b": t["sram_filter_reads"],
        "sram_writes_c": t["sram_ofmap_writes"],
        "pes": pes,
        "sram_kb": int(sum(v[0] for v in hw.sram_bytes.values()) // 1024),
        "energy_j": total_energy,
        **energy,
        "tops_per_w": 2.0 * w.macs / total_energy / 1e12,
    }
