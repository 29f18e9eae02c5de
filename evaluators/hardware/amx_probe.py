"""Probes of the AMX engine, built and measured like any kernel: the tile-multiply peak (four
independent accumulators fed from tiles loaded once, on every thread at once) and the rate at
which tile loads stream a buffer of a given size (one that fits L1, L2 or L3, or DRAM).

The peak probe runs beside every batch the ``amx`` evaluator measures, so each result's
efficiency (measured / probe) compares across moments of a shared machine; ``dse amx probe``
runs both to write a target file."""

from __future__ import annotations

import ctypes

from dse.core import Status
from evaluators.hardware.amx_build import build
from evaluators.hardware.amx_source import support_text
from evaluators.hardware.amx_stream import STREAM_KB, STREAM_PF
from evaluators.hardware.harness import MeasureSettings, RunOutput, Worker, measure
from search_spaces.amx_gemm.target import OPS_PER_TDP

PROBE = r"""
#include <omp.h>

/* Seconds for `iters` rounds of 4 independent tile multiplies on each of `threads` threads. */
double dse_probe_peak(int bf16, int64_t iters, int threads) {
    static char operands[4096] __attribute__((aligned(64)));
    double seconds = 0;
    #pragma omp parallel num_threads(threads)
    {
        TILE_CONFIG();
        TLOAD(4, operands, 64); TLOAD(5, operands + 1024, 64);
        TLOAD(6, operands + 2048, 64); TLOAD(7, operands + 3072, 64);
        TZERO(0); TZERO(1); TZERO(2); TZERO(3);
        #pragma omp barrier
        double start = dse_now();
        if (bf16) {
            for (int64_t i = 0; i < iters; i++) {
                TDP_BF16(0, 4, 6); TDP_BF16(1, 4, 7); TDP_BF16(2, 5, 6); TDP_BF16(3, 5, 7);
            }
        } else {
            for (int64_t i = 0; i < iters; i++) {
                TDP_INT8(0, 4, 6); TDP_INT8(1, 4, 7); TDP_INT8(2, 5, 6); TDP_INT8(3, 5, 7);
            }
        }
        #pragma omp barrier
        #pragma omp master
        seconds = dse_now() - start;
        TRELEASE();
    }
    return seconds;
}

/* Seconds for `passes` sweeps of tile loads over a buffer of `bytes` on each thread. */
double dse_probe_loads(int64_t bytes, int64_t passes, int threads) {
    double seconds = 0;
    int64_t tiles = bytes / 1024;
    #pragma omp parallel num_threads(threads)
    {
        char *buf = dse_buffer(omp_get_thread_num(), (size_t)bytes);
        memset(buf, 1, (size_t)bytes);
        TILE_CONFIG();
        #pragma omp barrier
        double start = dse_now();
        for (int64_t p = 0; p < passes; p++)
            for (int64_t t = 0; t + 4 <= tiles; t += 4) {
                TLOAD(0, buf + t * 1024, 64); TLOAD(1, buf + (t + 1) * 1024, 64);
                TLOAD(2, buf + (t + 2) * 1024, 64); TLOAD(3, buf + (t + 3) * 1024, 64);
            }
        #pragma omp barrier
        #pragma omp master
        seconds = dse_now() - start;
        TRELEASE();
    }
    return seconds;
}

/* Seconds for a sweep of a `rows` x `row_bytes` matrix read in runs of `run` bytes a row, as
 * the streaming kernels read a row-major B: the threads split the columns, each walks blocks of
 * RUN_BLOCK rows and, per block, its runs of every row, rows RUN_AHEAD ahead prefetched; -1
 * when the matrix cannot be allocated or its sum comes out wrong. */
double dse_probe_runs(int64_t rows, int64_t row_bytes, int64_t run, int threads) {
    static char *matrix;
    static int64_t held;
    int64_t bytes = rows * row_bytes;
    if (held < bytes) {
        free(matrix);
        matrix = aligned_alloc(4096, (size_t)bytes);
        if (!matrix) { held = 0; return -1; }
        memset(matrix, 1, (size_t)bytes);
        held = bytes;
    }
    int64_t runs = row_bytes / run;
    unsigned long long sum = 0;
    double start = dse_now();
    #pragma omp parallel num_threads(threads) reduction(+:sum)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = runs * t / nt, hi = runs * (t + 1) / nt;
        unsigned long long acc = 0;
        for (int64_t k0 = 0; k0 < rows; k0 += RUN_BLOCK)
            for (int64_t c = lo; c < hi; c++)
                for (int64_t k = k0; k < k0 + RUN_BLOCK && k < rows; k++) {
                    const char *row = matrix + k * row_bytes + c * run;
                    for (int64_t o = 0; o < run; o += 64) {
                        if (k + RUN_AHEAD < rows)
                            _mm_prefetch(row + RUN_AHEAD * row_bytes + o, _MM_HINT_T0);
                        const unsigned long long *line = (const unsigned long long *)(row + o);
                        for (int w = 0; w < 8; w++) acc += line[w];
                    }
                }
        sum += acc;
    }
    double seconds = dse_now() - start;
    return sum == (unsigned long long)(bytes / 8) * 0x0101010101010101ULL ? seconds : -1;
}
"""

RUN_ROW_BYTES = 65536  # a row of the run probe's matrix: a weight's row, pages apart
RUN_BYTES = 256 << 20  # the run probe's matrix, beyond any L2
RUN_SHORT, RUN_LONG = 128, 4096  # the runs compared: the streaming kernels' narrowest and long
PEAK_ITERS = 2_000_000  # 8M tile multiplies: about 35 ms on a core at full rate
LOAD_BYTES_PER_RUN = 1 << 30  # tile-load bytes a bandwidth probe streams per thread


def probe_library(emulate: bool = False) -> str:
    """The probes' library path (built once, cached like a kernel)."""
    head = "#define DSE_AMX_EMULATE 1\n" if emulate else ""
    # the run probe reads as the streaming kernels do: their int8 blocks, their prefetch distance
    head += f"#define RUN_BLOCK {STREAM_KB}\n#define RUN_AHEAD {STREAM_PF}\n"
    built = build(head + support_text() + PROBE, emulate)
    if built.library is None:
        raise OSError(f"the AMX probe does not build: {built.error}")
    return str(built.library)


def run_probe(library_path: str, what: str, threads: int, dtype: str = "int8-int32",
              buffer_bytes: int = 0, emulate: bool = False) -> RunOutput:
    """One timed run of a probe in the worker (``what``: ``peak``, ``loads`` or ``runs``); its
    seconds are per ``PEAK_ITERS`` rounds, per pass over the buffer, or per sweep of the run
    probe's matrix in runs of ``buffer_bytes``."""
    from evaluators.hardware.amx_kernel import library

    lib = library(library_path)
    if what == "peak":
        lib.dse_probe_peak.restype = ctypes.c_double
        lib.dse_probe_peak.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int]
        iters = PEAK_ITERS // (1000 if emulate else 1)  # emulated tiles: a check, not a rate
        seconds = lib.dse_probe_peak(int(dtype.startswith("bf16")), iters, threads)
        return RunOutput(seconds * PEAK_ITERS / iters, seconds > 0, f"{iters} rounds")
    if what == "runs":
        lib.dse_probe_runs.restype = ctypes.c_double
        lib.dse_probe_runs.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_int]
        rows = RUN_BYTES // RUN_ROW_BYTES  # plain reads: no tiles to emulate
        seconds = lib.dse_probe_runs(rows, RUN_ROW_BYTES, buffer_bytes, threads)
        return RunOutput(seconds, seconds > 0, f"{rows} rows in runs of {buffer_bytes} bytes")
    lib.dse_probe_loads.restype = ctypes.c_double
    lib.dse_probe_loads.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
    passes = max(1, LOAD_BYTES_PER_RUN // max(buffer_bytes, 1) // (1000 if emulate else 1))
    seconds = lib.dse_probe_loads(buffer_bytes, passes, threads)
    return RunOutput(seconds / passes, seconds > 0, f"{passes} passes")


def peak_ops_per_s(worker: Worker, device: str, threads: int, dtype: str,
                   settings: MeasureSettings, emulate: bool = False) -> float | None:
    """Tile-multiply ops per second of ``threads`` threads (the median of settled runs), or
    None when the probe could not be measured."""
    job = {"library_path": probe_library(emulate), "what": "peak", "threads": threads,
           "dtype": dtype, "emulate": emulate}
    m = measure(worker, f"{__name__}:run_probe", job, settings, device)
    if m.status is not Status.OK or not m.times:
        return None
    return OPS_PER_TDP[dtype.split("-")[0]] * 4 * PEAK_ITERS * threads / m.median


def load_bytes_per_s(worker: Worker, device: str, buffer_bytes: int, threads: int,
                     settings: MeasureSettings, emulate: bool = False) -> float | None:
    """Tile-load bytes per second of one core streaming a buffer of ``buffer_bytes`` while
    ``threads`` threads do the same, or None when it could not be measured."""
    buffer_bytes = max(4096, buffer_bytes // 4096 * 4096)
    job = {"library_path": probe_library(emulate), "what": "loads", "threads": threads,
           "buffer_bytes": buffer_bytes, "emulate": emulate}
    m = measure(worker, f"{__name__}:run_probe", job, settings, device)
    if m.status is not Status.OK or not m.times:
        return None
    return buffer_bytes / m.median


def run_knee_bytes(worker: Worker, device: str, threads: int, settings: MeasureSettings,
                   emulate: bool = False) -> tuple[float, float, float] | None:
    """The target's ``model.run_knee_bytes`` measured: ``threads`` threads read a matrix beyond
    L2 in runs of ``RUN_SHORT`` and of ``RUN_LONG`` bytes a row; the short runs' share of the
    long runs' bandwidth, ``s``, puts the knee where the model's 2-norm blend gives it:
    ``RUN_SHORT * sqrt(1 / s**2 - 1)`` (0 when short runs lose nothing). Returns the knee and
    both bandwidths (bytes per second), or None when a run could not be measured."""
    rates, library_path = [], probe_library(emulate)
    for run in (RUN_SHORT, RUN_LONG):
        job = {"library_path": library_path, "what": "runs", "threads": threads,
               "buffer_bytes": run, "emulate": emulate}
        m = measure(worker, f"{__name__}:run_probe", job, settings, device)
        if m.status is not Status.OK or not m.times:
            return None
        rates.append(RUN_BYTES / m.median)
    share = min(rates[0] / rates[1], 1.0)
    return RUN_SHORT * (1.0 / share**2 - 1.0) ** 0.5, rates[0], rates[1]
