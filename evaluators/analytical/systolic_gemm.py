"""Analytical model of a GEMM on a TPU-like systolic array (the cheap rung of the ladder).

C (M x N) = A (M x K) . B (K x N) is cut into SRAM tiles t_m x t_k x t_n, walked in the config's
loop order, and each tile is folded onto the R x C array the way the dataflow maps it (SCALE-Sim's
mapping): output-stationary puts M on the rows and N on the columns and streams K; weight-
stationary puts K on the rows and N on the columns and streams M; input-stationary puts K on
the rows and M on the columns and streams N.

* **Compute.** A fold streams its tile's length S through the array plus the fill and drain of
  the pipeline, R + C - 2 cycles (the seed's 2(N-1) on an N x N array), and weight- and input-
  stationary first shift the stationary operand in (R cycles). One fold of a single tile is the
  seed's efficiency eta = S / (S + R + C - 2). Folds of every tile run back to back on one array;
  a chip's arrays share them out (the last round may leave some idle).
* **Traffic.** For each operand the loop that does not index it (n for A, m for B, k for C)
  reuses its tile at once when no loop that does index it is nested inside; otherwise the
  operand's panel (its extent over the inner loops) must stay in its SRAM, and when it does not
  fit, the operand is read again on every iteration of that loop (the seed's R_A). C that
  cannot stay on chip across K writes its partial sums out after each K tile but the last and
  reads them back, at the accumulator's width (4 B at least).
* **Time.** DRAM moves the operands at the config's bandwidth. Double-buffered traffic overlaps
  the array's compute, except that the first A and B tiles arrive before any compute and the
  last C tile leaves after it; single-buffered traffic stalls the array for all of its time.
  Stall cycles are what the array waits beyond its compute.
* **Energy.** MACs x E_MAC, three register accesses per MAC (two operands and the partial sum),
  the stationary operand's loads into the PEs at the PE-local level, each operand's SRAM reads,
  writes and fills at its SRAM's access energy (the global buffer's, scaled with the SRAM's
  size), and DRAM words at the DRAM level (the target's pJ).
* **2:4 sparsity** of the weights halves B's storage and traffic, plus a 2-bit index per kept
  value. Where the weights stay in the PEs (ws) the array computes half of K (half the MACs and
  the folds along K) and A is still read whole (each PE's index picks one of four streamed
  activations); streamed weights (os, is) are expanded at the array's edge and skip nothing.
"""

from __future__ import annotations

import numpy as np

from dse.core.params import ConfigBatch
from search_spaces.systolic_gemm.rules import (
    LOOP_ORDERS,
    MAPPING,
    Hardware,
    accumulator_bytes,
    b_tile_bytes,
    hardware,
    sparse_skips,
    tile_bytes,
)
from search_spaces.systolic_gemm.target import DATAFLOWS, SystolicTarget
from search_spaces.systolic_gemm.workload import GemmMix, GemmTerm

REGISTER_ACCESSES_PER_MAC = 3  # two operands latched and the partial sum updated
OPERAND_DIMS = {"a": "mk", "b": "kn", "c": "mn"}
IRRELEVANT = {"a": "n", "b": "m", "c": "k"}


def fill_drain_efficiency(stream: float, rows: int, cols: int) -> float:
    """The seed's eta: share of a fold's cycles the array streams, ``S / (S + R + C - 2)``."""
    return stream / (stream + rows + cols - 2)


def sram_access_pj(target: SystolicTarget, sram_bytes: np.ndarray) -> np.ndarray:
    """Energy of one access to an SRAM of ``sram_bytes``: the global buffer's at the size it is
    quoted at, growing as a power of the size (the seed's table: ~1-2 pJ for ~1 KB next to
    the PE, ~5 pJ for a 100 KB-1 MB buffer; longer word and bit lines in a larger array)."""
    e = target.energy
    return e.global_buffer_pj * (sram_bytes / (e.global_buffer_kb * 1024.0)) \
        ** e.sram_size_exponent


def energy_parts(target: SystolicTarget, macs: np.ndarray, stationary_words: np.ndarray,
                 sram_words: dict[str, np.ndarray], sram_bytes: dict[str, np.ndarray],
                 dram_words: np.ndarray) -> dict[str, np.ndarray]:
    """Joules at each access level (``energy_<level>_j``): MACs, three register accesses per
    MAC, the stationary operand's words into the PEs, each operand's SRAM words at its SRAM's
    access energy, and DRAM words, at the target's energy per access."""
    e = target.energy
    sram = sum(sram_words[op] * sram_access_pj(target, sram_bytes[op]) for op in sram_words)
    picojoules = {"mac": macs * e.mac_pj,
                  "register": REGISTER_ACCESSES_PER_MAC * macs * e.register_pj,
                  "pe_local": stationary_words * e.pe_local_pj,
                  "sram": sram, "dram": dram_words * e.dram_pj}
    return {f"energy_{level}_j": pj * 1e-12 for level, pj in picojoules.items()}


ENERGY_LEVELS = ("mac", "register", "pe_local", "sram", "dram")


def folds(dim: np.ndarray | int, tile: np.ndarray, array: np.ndarray) -> np.ndarray:
    """Folds of ``array`` PEs along a dimension of ``dim`` cut into tiles of ``tile``: whole
    tiles fold ceil(tile / array) times, the last partial tile ceil(rest / array) times."""
    full = np.floor(dim / tile)
    return full * np.ceil(tile / array) + np.ceil((dim - full * tile) / array)


# per dataflow (in DATAFLOWS' order): which of (m, n, k) the array's rows and columns hold and
# which one streams
_AXES = np.array([["mnk".index(d) for d in MAPPING[f]] for f in DATAFLOWS])
_OS = DATAFLOWS.index("os")


def _loop_tables() -> dict[str, np.ndarray]:
    """Per loop order (in LOOP_ORDERS' order) and operand: whether the loop that does not index
    it reuses its tile at once (``now_<op>``), and whether its panel spans each of its dims
    whole (``whole_<op>_<dim>``: that dim's loop is nested inside the reusing one)."""
    tables: dict[str, list[bool]] = {}
    for order in LOOP_ORDERS:
        for op, dims in OPERAND_DIMS.items():
            inner = order[order.index(IRRELEVANT[op]) + 1:]
            tables.setdefault(f"now_{op}", []).append(all(d not in inner for d in dims))
            for d in dims:
                tables.setdefault(f"whole_{op}_{d}", []).append(d in inner)
    return {key: np.array(values) for key, values in tables.items()}


_LOOPS = _loop_tables()


def _term(batch: ConfigBatch, target: SystolicTarget, w: GemmMix, term: GemmTerm,
          hw: Hardware) -> dict[str, np.ndarray]:
    """Totals of one call of one GEMM of the mix (float arrays: a config batch is millions)."""
    rows, cols = hw.rows.astype(np.float64), hw.cols.astype(np.float64)
    arrays, dt = target.array.count, w.dtype
    flow, order = batch["dataflow"], batch["loop_order"]
    m, n, k = float(term.M), float(term.N), float(term.K)
    tm = np.minimum(batch["t_m"], term.M).astype(np.float64)
    tn = np.minimum(batch["t_n"], term.N).astype(np.float64)
    tk = np.minimum(batch["t_k"], term.K).astype(np.float64)
    # K the array computes: 2:4 weights held in the PEs (ws) skip the pruned half; streamed
    # through them (os, is) they are expanded at the array's edge and skip nothing
    skips = sparse_skips(flow, w.sparse)
    k_c = np.where(skips, float(-(-term.K // 2)), k)
    tk_c = np.where(skips, np.ceil(tk / 2), tk)
    n_m, n_n, n_k = np.ceil(m / tm), np.ceil(n / tn), np.ceil(k / tk)

    # compute: folds along the dims the rows and columns hold, the streamed dim in tiles
    axes = _AXES[flow]
    dims, tiles = (m, n, k_c), (tm, tn, tk_c)
    t_r, t_c = np.choose(axes[:, 0], tiles), np.choose(axes[:, 1], tiles)
    d_r, d_c, d_s = (np.choose(axes[:, i], dims) for i in range(3))
    n_s = np.choose(axes[:, 2], (n_m, n_n, n_k))
    f_r, f_c = folds(d_r, t_r, rows), folds(d_c, t_c, cols)
    overhead = rows + cols - 2 + np.where(flow == _OS, 0.0, rows)  # WS/IS shift R cycles in
    executions = f_r * f_c * n_s
    one_array = f_r * f_c * (d_s + n_s * overhead)
    compute_cycles = one_array if arrays == 1 else \
        one_array * np.ceil(executions / arrays) / executions
    macs = m * k_c * n

    # traffic: reuse across each operand's irrelevant loop, or its panel kept in SRAM; C's
    # partial sums are accumulators (at least 4 B), its final values the output type
    acc = accumulator_bytes(dt)
    b_size = float(b_tile_bytes(np.array(term.K), np.array(term.N), dt.in_bytes, w.sparse))
    size = {"a": m * k * dt.in_bytes, "b": b_size, "c": m * n * dt.out_bytes}
    single = {"a": tm * tk * dt.in_bytes,
              "b": b_tile_bytes(tk, tn, dt.in_bytes, w.sparse).astype(np.float64),
              "c": tm * tn * acc}
    extent = {"m": m / tm, "n": n / tn, "k": k / tk}  # tiles a whole dim holds
    # re-reads when not reused; C: partial sums out after each K tile but the last, back in
    again = {"a": n_n * size["a"], "b": n_m * size["b"],
             "c": size["c"] + (2 * n_k - 2) * m * n * acc}
    buffers = {op: batch[f"buf_{op}"] * arrays for op in OPERAND_DIMS}
    traffic, reused = {}, {}
    for op, (d1, d2) in OPERAND_DIMS.items():
        panel = single[op] * np.where(_LOOPS[f"whole_{op}_{d1}"][order], extent[d1], 1.0) \
            * np.where(_LOOPS[f"whole_{op}_{d2}"][order], extent[d2], 1.0)
        reused[op] = _LOOPS[f"now_{op}"][order] | (
            panel + (buffers[op] - 1) * single[op] <= hw.sram_bytes[op])
        traffic[op] = np.where(reused[op], size[op], again[op])

    # time: double-buffered traffic overlaps the array's compute, except what cannot: the
    # first A and B tiles arrive before any compute, the last C tile leaves after it;
    # single-buffered traffic stalls the array for all of its time
    clock = target.array.clock_hz
    t_comp = compute_cycles / clock
    double = {op: batch[f"buf_{op}"] == 2 for op in OPERAND_DIMS}
    dram_bytes = traffic["a"] + traffic["b"] + traffic["c"]
    ends = (np.where(double["a"], single["a"], 0.0) + np.where(double["b"], single["b"], 0.0)
            + np.where(double["c"], tm * tn * dt.out_bytes, 0.0))
    overlapped = sum(np.where(double[op], traffic[op], 0.0) for op in OPERAND_DIMS) - ends
    exposed = dram_bytes - overlapped - ends
    bandwidth = hw.dram_bytes_per_s
    latency = (ends + exposed) / bandwidth + np.maximum(t_comp, overlapped / bandwidth)

    # accesses for energy, in words of the target. SRAM reads into the array: a streamed
    # operand once per fold of the dim it does not span, a stationary one once per tile of the
    # streamed dim; C written once per K fold or tile
    word = target.memory.word_bytes
    ib, ab = dt.in_bytes / word, acc / word
    a_reads = m * k * np.choose(flow, (f_c, f_c, n_n))
    b_reads = k_c * n * np.choose(flow, (f_r, n_m, f_c))
    c_writes = m * n * np.choose(flow, (n_k, f_r, f_r))
    stationary_words = np.choose(flow, (m * n * n_k * ab, k_c * n * n_m * ib,
                                        k_c * m * n_n * ib))
    # SRAM words: the array's reads and writes (C's partial sums read back to accumulate), and
    # what DRAM fills or drains
    sram_words = {"a": a_reads * ib + traffic["a"] / word, "b": b_reads * ib + traffic["b"] / word,
                  "c": (2 * c_writes - m * n) * ab + traffic["c"] / word}
    energy = energy_parts(target, macs, stationary_words, sram_words, hw.sram_bytes,
                          dram_bytes / word)
    return {
        "latency_s": latency, "t_comp_s": t_comp,
        "t_mem_s": dram_bytes / hw.dram_bytes_per_s, "compute_cycles": compute_cycles,
        "total_cycles": latency * clock, "macs": macs,
        "stream_cycles": f_r * f_c * d_s,
        "fold_cycles": one_array, "fold_executions": executions,
        "mapped_pes": executions * (d_r / f_r) * (d_c / f_c),
        "dram_bytes": dram_bytes, "dram_bytes_a": traffic["a"], "dram_bytes_b": traffic["b"],
        "dram_bytes_c": traffic["c"], "sram_reads_a": a_reads, "sram_reads_b": b_reads,
        "sram_writes_c": c_writes, "reuse_a": reused["a"], "reuse_b": reused["b"],
        "reuse_c": reused["c"],
        **energy,
    }


def time_metrics(macs: int, latency: np.ndarray, t_comp: np.ndarray, t_mem: np.ndarray,
                 peak_ops: np.ndarray) -> dict[str, np.ndarray]:
    """dse's standard metrics from a run's latency, the array's compute time and DRAM's (both
    rungs report them so): the array's time is its compute plus its stalls."""
    return {
        "tops": 2.0 * macs / latency / 1e12,
        "latency_s": latency,
        "t_comp_s": t_comp,
        "t_mem_s": t_mem,
        "t_core_s": latency,
        "t_stall_s": latency - t_comp,
        "bound": np.where(t_comp >= t_mem, "compute", "memory"),
        "balance": t_comp / t_mem,
        "peak_tops": peak_ops / 1e12,
    }


SUMMED = ("latency_s", "t_comp_s", "t_mem_s", "compute_cycles", "total_cycles", "macs",
          "stream_cycles", "fold_cycles", "fold_executions", "mapped_pes", "dram_bytes",
          "dram_bytes_a", "dram_bytes_b", "dram_bytes_c", "sram_reads_a", "sram_reads_b",
          "sram_writes_c", "energy_mac_j", "energy_register_j", "energy_pe_local_j",
          "energy_sram_j", "energy_dram_j")


def score(batch: ConfigBatch, target: SystolicTarget, w: GemmMix) -> dict[str, np.ndarray]:
    """Metric arrays for feasible configs of the ``systolic_gemm`` space (a mix: the sum of
    its GEMMs, each as often as it is called)."""
    totals: dict[str, np.ndarray] = {}
    reuse = {op: np.ones(len(batch["t_m"]), dtype=bool) for op in "abc"}
    hw = hardware(batch, target)
    for term in w.terms:
        one = _term(batch, target, w, term, hw)
        for key in SUMMED:
            totals[key] = totals.get(key, 0) + one[key] * term.count
        for op in "abc":
            reuse[op] &= one[f"reuse_{op}"]
    pes = hw.rows * hw.cols * target.array.count
    latency, t_comp, t_mem = totals["latency_s"], totals["t_comp_s"], totals["t_mem_s"]
    energy = sum(totals[f"energy_{level}_j"] for level in ENERGY_LEVELS)
    held = tile_bytes(batch, w, target.array.count)
    sram_used = held["a"] + held["b"] + held["c"]
    peak = 2.0 * pes * target.array.clock_hz
    return {
        **time_metrics(w.macs, latency, t_comp, t_mem, peak),
        "macs_per_cycle": w.macs / totals["total_cycles"],
        "compute_cycles": totals["compute_cycles"],
        "stall_cycles": totals["total_cycles"] - totals["compute_cycles"],
        "total_cycles": totals["total_cycles"],
        "utilisation": totals["macs"] / (pes * totals["compute_cycles"]),
        "mapping_efficiency": totals["mapped_pes"] / (totals["fold_executions"]
                                                      * hw.rows * hw.cols),
        "fill_drain_efficiency": totals["stream_cycles"] / totals["fold_cycles"],
        "fold_executions": totals["fold_executions"],
        "macs_executed": totals["macs"],
        "dram_bytes": totals["dram_bytes"],
        "dram_bytes_a": totals["dram_bytes_a"],
        "dram_bytes_b": totals["dram_bytes_b"],
        "dram_bytes_c": totals["dram_bytes_c"],
        "dram_gbps": totals["dram_bytes"] / latency / 1e9,
        "sram_reads_a": totals["sram_reads_a"],
        "sram_reads_b": totals["sram_reads_b"],
        "sram_writes_c": totals["sram_writes_c"],
        "reuse_a": reuse["a"].astype(np.int64),
        "reuse_b": reuse["b"].astype(np.int64),
        "reuse_c": reuse["c"].astype(np.int64),
        "sram_a_bytes": held["a"], "sram_b_bytes": held["b"], "sram_c_bytes": held["c"],
        "l1_bytes": sram_used,  # the on-chip buffers a config takes (rankings break ties on it)
        "pes": pes,
        "sram_kb": sum(hw.sram_bytes.values()) // 1024,
        "energy_j": energy,
        "energy_mac_j": totals["energy_mac_j"],
        "energy_register_j": totals["energy_register_j"],
        "energy_pe_local_j": totals["energy_pe_local_j"],
        "energy_sram_j": totals["energy_sram_j"],
        "energy_dram_j": totals["energy_dram_j"],
        "tops_per_w": 2.0 * w.macs / energy / 1e12,
    }
