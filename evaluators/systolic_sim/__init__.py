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

import math
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
    UsageError,
    batch_len,
    batch_take,
    metrics_row,
)
from evaluators.analytical.systolic_gemm import ENERGY_LEVELS, energy_parts, time_metrics
from evaluators.systolic_sim.fold_schedule import ArraySetup, FoldReport, simulate_gemm
from search_spaces.systolic_gemm.rules import TILES, accumulator_bytes, hardware, sparse_skips
from search_spaces.systolic_gemm.target import DATAFLOWS, SystolicTarget
from search_spaces.systolic_gemm.workload import GemmMix

COUNTS = ("total_cycles", "compute_cycles", "stall_cycles", "sram_ifmap_reads",
          "sram_filter_reads", "sram_ofmap_writes", "dram_ifmap_reads", "dram_filter_reads",
          "dram_ofmap_writes")


def tile_layers(dim: int, tile: int) -> list[tuple[int, int]]:
    """(size, how many) of the tiles cutting ``dim``: the whole ones and a last partial one."""
    full, rest = divmod(dim, tile)
    return [(tile, full)] * (full > 0) + [(rest, 1)] * (rest > 0)


def k_layers(dim: int, tile: int) -> list[tuple[int, int, bool]]:
    """(size, how many, final) of the K tiles of one output tile: all but the last leave
    partial sums that come back for the next."""
    tiles = tile_layers(dim, tile)
    *head, (size, count) = tiles
    out = [(t, c, False) for t, c in head]
    if count > 1:
        out.append((size, count - 1, False))
    return out + [(size, 1, True)]


class TooSlow(Exception):
    """A DRAM stream under one word a cycle, which SCALE-Sim's buffers cannot model."""


def setup_of(one: ConfigBatch, target: SystolicTarget, w: GemmMix,
             layer: tuple[int, int, int]) -> ArraySetup:
    """The SCALE-Sim configuration of one config's array for one layer (M, K, N as the array
    computes it): rows, columns, dataflow, one array's share of each operand's SRAM in KiB of
    its elements (SCALE-Sim's words; C as accumulators), and one array's share of the DRAM
    bandwidth split between the three streams in proportion to their bytes (one element a
    cycle at least), in elements per cycle: the read buffers' prefetch rates and the ofmap's
    USER bandwidth."""
    hw = hardware(one, target)
    dt, arrays = w.dtype, target.array.count
    acc = accumulator_bytes(dt)
    m, k, n = layer
    streams = {"a": m * k * dt.in_bytes, "b": k * n * dt.in_bytes, "c": m * n * acc}
    per_cycle = float(hw.dram_bytes_per_s[0]) / target.array.clock_hz / arrays
    element = {"a": dt.in_bytes, "b": dt.in_bytes, "c": acc}
    if per_cycle < sum(element.values()):
        raise TooSlow(f"the simulator moves whole elements: this config's DRAM gives an array "
                      f"{per_cycle:.2f} B a cycle, less than one element of each of A, B and C "
                      f"({sum(element.values())} B; SCALE-Sim's buffers need whole words)")
    # each stream at least one element a cycle (SCALE-Sim's buffers move whole words)
    rate = {op: max(1.0, per_cycle * size / sum(streams.values()) / element[op])
            for op, size in streams.items()}
    return ArraySetup(rows=int(hw.rows[0]), cols=int(hw.cols[0]),
                      dataflow=DATAFLOWS[int(one["dataflow"][0])],
                      ifmap_sram_kb=hw.sram_bytes["a"][0] / arrays / 1024 / dt.in_bytes,
                      filter_sram_kb=hw.sram_bytes["b"][0] / arrays / 1024 / dt.in_bytes,
                      ofmap_sram_kb=hw.sram_bytes["c"][0] / arrays / 1024 / acc,
                      bandwidth="USER", user_bandwidth=rate["c"],
                      ifmap_read_bandwidth=int(rate["a"]), filter_read_bandwidth=int(rate["b"]))


def simulate_config(one: ConfigBatch, target: SystolicTarget, w: GemmMix,
                    ) -> dict[str, float]:
    """Summed counts of every tile layer of every GEMM of the mix (each distinct tile shape
    simulated once), the ofmap's writes apart for partial sums and final values, plus the
    MACs and the stationary operand's words for the energy."""
    layers: Counter[tuple[int, int, int, bool]] = Counter()
    for term in w.terms:
        t_m, t_k, t_n = (min(int(one[t][0]), d) for t, d in zip(TILES, (term.M, term.K, term.N),
                                                                   strict=True))
        for m, cm in tile_layers(term.M, t_m):
            for k, ck, final in k_layers(term.K, t_k):
                for n, cn in tile_layers(term.N, t_n):
                    layers[(m, k, n, final)] += cm * ck * cn * term.count
    flow = DATAFLOWS[int(one["dataflow"][0])]
    skips = bool(sparse_skips(one["dataflow"], w.sparse)[0])
    totals = dict.fromkeys(COUNTS, 0.0)
    totals.update(macs=0.0, stationary=0.0, layers=0.0, mapped=0.0, partial_writes=0.0)
    for (m, k_dense, n, final), count in layers.items():
        # 2:4 weights in the PEs (ws): the array computes half the depth and still reads every
        # activation of a group of four; streamed (os, is): B moves compressed, then expanded
        k = -(-k_dense // 2) if skips else k_dense
        report: FoldReport = simulate_gemm(setup_of(one, target, w, (m, k, n)), m, n, k)
        scale = {"sram_ifmap_reads": k_dense / k, "dram_ifmap_reads": k_dense / k}
        if w.sparse and not skips:
            scale.update(sram_filter_reads=0.5, dram_filter_reads=0.5)
        for key in COUNTS:
            totals[key] += getattr(report, key) * count * scale.get(key, 1)
        if not final:
            totals["partial_writes"] += report.dram_ofmap_writes * count
        totals["macs"] += m * k * n * count
        totals["mapped"] += report.mapping_eff_pct / 100 * report.compute_cycles * count
        totals["stationary"] += count * {"os": m * n, "ws": k * n, "is": k * m}[flow]
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
        for i in range(batch_len(batch)):
            start = time.perf_counter()
            try:
                metrics = sim_metrics(batch_take(batch, np.array([i])), ctx.target,
                                      ctx.workload)
            except (TooSlow, UsageError) as exc:  # what SCALE-Sim's model cannot represent
                results.append(EvalResult(Status.INFEASIBLE, reason=str(exc),
                                          elapsed_s=time.perf_counter() - start))
                continue
            results.append(EvalResult(Status.OK, metrics,
                                      elapsed_s=time.perf_counter() - start))
        return results


def sim_metrics(one: ConfigBatch, target: SystolicTarget, w: GemmMix) -> dict[str, Any]:
    """The standard metrics, SCALE-Sim's counts and the energy of one feasible config, on the
    analytical model's meanings: cycles of the chip's wall time (its arrays take the layers
    in rounds), compute cycles without stalls, utilisation per PE-cycle of compute."""
    t = simulate_config(one, target, w)
    hw = hardware(one, target)
    arrays, clock = target.array.count, target.array.clock_hz
    dt, word, acc = w.dtype, target.memory.word_bytes, accumulator_bytes(w.dtype)
    wall = math.ceil(t["layers"] / arrays) / t["layers"]  # a round's share of the layers
    # SCALE-Sim counts words of one element: A and B at the input type's width (2:4 weights
    # with a 2-bit index each), partial sums out and back at the accumulator's, results at the
    # output type's
    index = 0.25 if w.sparse else 0.0
    partial = t["partial_writes"]
    dram = {"a": t["dram_ifmap_reads"] * dt.in_bytes,
            "b": t["dram_filter_reads"] * (dt.in_bytes + index),
            "c": (t["dram_ofmap_writes"] - partial) * dt.out_bytes + 2 * partial * acc}
    dram_bytes = sum(dram.values())
    total_cycles = t["total_cycles"] * wall
    schedule = (t["compute_cycles"] - t["stall_cycles"]) * wall
    latency, t_comp = total_cycles / clock, schedule / clock
    t_mem = dram_bytes / float(hw.dram_bytes_per_s[0])
    sram_words = {"a": (t["sram_ifmap_reads"] * dt.in_bytes + dram["a"]) / word,
                  "b": (t["sram_filter_reads"] * dt.in_bytes + dram["b"]) / word,
                  "c": (t["sram_ofmap_writes"] * acc + dram["c"]) / word}
    stationary_bytes = acc if DATAFLOWS[int(one["dataflow"][0])] == "os" else dt.in_bytes
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
        "macs_per_cycle": w.macs / total_cycles,
        "total_cycles": total_cycles,
        "compute_cycles": schedule,
        "stall_cycles": t["stall_cycles"] * wall,
        "utilisation": t["macs"] / (pes * schedule),
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
