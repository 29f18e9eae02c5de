"""A dispatch table's AMX kernels as one shared library a program links (``dse dispatch
build``): each kernel compiled on its own (its symbols renamed), a dispatcher that picks one by
the table's rules, a general kernel of the other dtype, AVX-512 kernels for CPUs without AMX,
portable kernels for CPUs without AVX-512, and the header ``dse_gemm.h``. Nothing of Python at
run time.

The C ABI (row-major A, B and C, leading dimensions honoured; 0 on success, non-zero and C
untouched on bad arguments)::

    int dse_gemm_s8s8s32(int64_t M, int64_t N, int64_t K, const int8_t *A, int64_t lda,
                         const int8_t *B, int64_t ldb, int32_t *C, int64_t ldc);
    int dse_gemm_bf16bf16f32(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                             const uint16_t *B, int64_t ldb, float *C, int64_t ldc);
    void dse_set_threads(int n);   /* default: every core */
    int dse_gemm_engine(void);     /* 1: the AMX kernels run, 0: the AVX-512 ones, -1: the
                                      portable ones */
    int dse_gemm_kernel(int64_t M, int64_t N, int64_t K);  /* which kernel serves a shape */

and, for a weight B that many calls multiply, B packed once (``PACKED_API``: ``dse_pack_b_s8``
/ ``_bf16``, the ``_packed`` GEMMs, ``dse_free_packed_b``; the header declares them).

A weight shape the table has no rule for runs the kernel of the table's nearest shape (in log
M, K and N; the table's fallback when it lists no shapes). On a CPU without AMX a shape whose
kernel is one of the table's AVX-512 kernels runs it (a study on such a CPU measures only
those), and one whose kernel needs AMX runs the streaming kernels of :mod:`.amx_stream` (B read
in place) up to :data:`STREAM_M` rows (by default: any).
On a CPU without AVX-512 VNNI and BF16 every GEMM runs the portable kernels of
:mod:`.amx_portable`. The kernels are built for those ISAs, not for the machine that builds the
library, and the dispatcher (built for the baseline x86-64) checks CPUID before it calls one,
so a library runs on any x86-64 CPU. ``DSE_GEMM_ISA`` (``amx``, ``avx512`` or ``portable``)
caps the engine at run time, as ``ONEDNN_MAX_CPU_ISA`` does oneDNN's.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

from evaluators.hardware.amx_build import (
    COMPILE_TIMEOUT_S,
    LIBRARY_KERNEL_FLAGS,
    LIBRARY_PORTABLE_FLAGS,
    compiler,
    complaint,
    missing_compiler,
)
from evaluators.hardware.amx_portable import portable_source
from evaluators.hardware.amx_source import kernel_source
from evaluators.hardware.amx_stream import STREAM_SYMBOLS, stream_source

DTYPES = {"int8-int32": ("s8s8s32", "int8_t", "int32_t"),
          "bf16-fp32": ("bf16bf16f32", "uint16_t", "float")}
# each kernel's own symbols (a pack_b=stream kernel's streaming kernels too), renamed per kernel
RENAMED = ("dse_gemm", "dse_time", "dse_set_threads", "dse_amx_request", "dse_pack",
           "dse_packed_bytes", "dse_gemm_prepacked", *STREAM_SYMBOLS)
# On a CPU without AMX, a GEMM whose table kernel needs AMX runs the streaming kernels (B read
# in place, re-laid out in registers: amx_stream) up to this many rows, the general AVX-512
# kernel above. That one re-lays a row-major B out in memory first and takes B's column sums;
# measured on a Zen 4 the space's kernels of that kind ran 1.1-6x the streaming kernels' time at
# every M of the Llama-3.1-8B mix (1 to 512), and with the column sums taken from the laid-out
# strips still about 1.5x at 512 rows, so by default such GEMMs all stream (a build can pass a
# smaller bound). The table's own AVX-512 kernels serve their shapes at any M: the study
# measured them against everything else it had.
STREAM_M = 2**62
# a kernel for any shape where the table has none (the other dtype), on each engine
GENERAL = {"amx": {"grid_rows": 2, "grid_cols": 2, "mc": 256, "kc": 1024, "nc": 256},
           "avx512": {"grid_rows": 4, "grid_cols": 4, "mc": 64, "kc": 1024, "nc": 256,
                      "engine": "avx512", "split": "n"}}

HEADER = """/* dse_gemm.h: GEMMs tuned by dse ({study} on {target}), for any x86-64 CPU. */
#ifndef DSE_GEMM_H
#define DSE_GEMM_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {{
#endif
/* C[M x N] = A[M x K] B[K x N], all row-major with leading dimensions lda, ldb, ldc (in
 * elements); 0 on success, non-zero (and C untouched) when an argument is wrong. */
int dse_gemm_s8s8s32(int64_t M, int64_t N, int64_t K, const int8_t *A, int64_t lda,
                     const int8_t *B, int64_t ldb, int32_t *C, int64_t ldc);
int dse_gemm_bf16bf16f32(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                         const uint16_t *B, int64_t ldb, float *C, int64_t ldc);
/* Threads of every later call (default: every core). */
void dse_set_threads(int n);
/* 1 when the AMX kernels run, 0 when this CPU (or its kernel) has no AMX and AVX-512
 * kernels serve every shape (the table's own where it chose one), -1 when it has no AVX-512
 * VNNI and BF16 and the portable kernels (AVX2 where the CPU has it) do. DSE_GEMM_ISA=amx,
 * avx512 or portable in the environment caps it. */
int dse_gemm_engine(void);
/* The kernel a GEMM of the table's dtype runs: its index in the dispatch table, -1 the
 * streaming kernel (without AMX, where the table's kernel needs it), -2 the general AVX-512
 * kernel (the same, above the library's streaming bound), -3 a size below 1,
 * -4 the portable kernel (a CPU without AVX-512). */
int dse_gemm_kernel(int64_t M, int64_t N, int64_t K);
/* A weight B (K x N, row-major) that many calls multiply, packed once: the caller may free B.
 * The packed calls skip re-laying B out at every call: without AMX B is packed in the
 * streaming kernels' layout, with AMX in the AMX kernels' (which the streaming kernels of the
 * table stream too; a shape whose table kernel is another AVX-512 one then runs the general
 * AMX kernel); the portable kernels keep a copy of B. NULL on a wrong argument or no memory. */
typedef struct dse_packed_b dse_packed_b;
dse_packed_b *dse_pack_b_s8(int64_t K, int64_t N, const int8_t *B, int64_t ldb);
dse_packed_b *dse_pack_b_bf16(int64_t K, int64_t N, const uint16_t *B, int64_t ldb);
/* C[M x N] = A[M x K] B with B packed by the call of its dtype; 0 on success, non-zero (and C
 * untouched) when an argument is wrong (B packed for the other dtype included). */
int dse_gemm_s8s8s32_packed(int64_t M, const dse_packed_b *B, const int8_t *A, int64_t lda,
                            int32_t *C, int64_t ldc);
int dse_gemm_bf16bf16f32_packed(int64_t M, const dse_packed_b *B, const uint16_t *A,
                                int64_t lda, float *C, int64_t ldc);
void dse_free_packed_b(dse_packed_b *B);
#ifdef __cplusplus
}}
#endif
#endif
"""


@cache
def _space_defaults() -> dict[str, Any]:
    from dse.core import build_context

    return build_context("cpu-amx", "int8-int32", "64x64x64", "row").space.defaults()


def _kernel(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` completed with the space's defaults (a table's kernels have every one; the
    general kernels name only their blocking)."""
    return {**_space_defaults(), **params}


def kernels_of(table: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, dtype, params) of every kernel the library holds: the table's, then a general
    kernel per dtype and engine (the AVX-512 ones serve CPUs without AMX)."""
    out = [(f"k{n}", table["dtype"], _kernel(k["params"])) for n, k in
           enumerate(table["kernels"])]
    for dtype in DTYPES:
        for engine, params in GENERAL.items():
            out.append((f"{engine}_{DTYPES[dtype][0]}", dtype, _kernel(params)))
    return out


def _renamed(source: str, name: str) -> str:
    return "".join(f"#define {symbol} dse_{name}_{symbol[4:]}\n" for symbol in RENAMED) + source


def dispatcher_source(table: Mapping[str, Any], emulate: bool = False,
                      stream_m: int = STREAM_M) -> str:
    """The C of the ABI: the table's rules, the choice of engine at the first call (AMX taken
    as present when its tiles are emulated), and each dtype's entry point; without AMX, a
    GEMM whose table kernel needs AMX streams up to ``stream_m`` rows."""
    suffix, c_in, c_out = DTYPES[table["dtype"]]
    kernels = kernels_of(table)
    # the table's AVX-512 streaming kernels: without AMX they also serve B packed once (the
    # layout is the same whatever their blocking)
    streaming = [n for n, (_, _, p) in enumerate(kernels[:len(table["kernels"])])
                 if p.get("engine") == "avx512" and p.get("pack_b") == "stream"]
    lines = ["#define DSE_AMX_EMULATE 1" if emulate else "", "#include <stdint.h>",
             "#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>",
             "#include <cpuid.h>", "#include <omp.h>", ""]
    for name, dtype, _ in kernels:
        _, k_in, k_out = DTYPES[dtype]
        lines.append(f"int dse_{name}_gemm(int64_t, int64_t, int64_t, const {k_in} *, int64_t, "
                     f"const {k_in} *, int64_t, {k_out} *, int64_t);")
        lines.append(f"void dse_{name}_set_threads(int);")
        lines.append(f"int dse_{name}_amx_request(void);")
        lines.append(f"int dse_{name}_gemm_prepacked(int64_t, int64_t, int64_t, const {k_in} *, "
                     f"int64_t, const char *, {k_out} *, int64_t);")
    for c_suffix, k_in, k_out in DTYPES.values():
        lines.append(f"int dse_stream_{c_suffix}(int64_t, int64_t, int64_t, const {k_in} *, "
                     f"int64_t, const {k_in} *, int64_t, {k_out} *, int64_t, int);")
        lines.append(f"int64_t dse_amx_{c_suffix}_packed_bytes(int64_t, int64_t);")
        lines.append(f"int dse_amx_{c_suffix}_pack(int64_t, int64_t, const {k_in} *, int64_t, "
                     "char *);")
        lines.append(f"int dse_portable_{c_suffix}(int64_t, int64_t, int64_t, const {k_in} *, "
                     f"int64_t, const {k_in} *, int64_t, {k_out} *, int64_t, int);")
        prefixes = [""] + ([f"k{n}_" for n in streaming] if c_suffix == suffix else [])
        lines += [f"int dse_{prefix}stream_{c_suffix}_packed(int64_t, const void *, "
                  f"const {k_in} *, int64_t, {k_out} *, int64_t, int);" for prefix in prefixes]
    lines.append(f"#define STREAM_M {int(stream_m)}LL")
    rules = table["rules"] or []
    lines += ["", "typedef struct { int64_t k, n, m_min, m_max; int kernel; } dse_rule;",
              f"static const dse_rule rules[{max(1, len(rules))}] = {{",
              *(f"    {{{r['k']}, {r['n']}, {r['m_min']}, "
                f"{-1 if r['m_max'] is None else r['m_max']}, {r['kernel']}}}," for r in rules),
              *(["    {0, 0, 1, 0, 0},  /* no rule: the fallback serves every shape */"]
                if not rules else []),
              "};", f"#define FALLBACK {table['fallback']}",
              f"#define N_TABLE {len(table['kernels'])}",
              "/* the table's AVX-512 kernels, which serve their shapes on a CPU without AMX */",
              f"static const int vector_kernel[{len(table['kernels'])}] = {{"
              + ", ".join(str(int(p.get("engine") == "avx512")) for _, _, p in
                          kernels[:len(table["kernels"])]) + "};", "", *_nearest(table), ""]
    table_calls = "\n".join(
        f"        case {n}: return dse_k{n}_gemm(M, N, K, A, lda, B, ldb, C, ldc);"
        for n in range(len(table["kernels"])))
    prepacked_calls = "\n".join(
        f"        case {n}: done = dse_k{n}_gemm_prepacked(M, N, K, A, lda, B, C, ldc); break;"
        for n in range(len(table["kernels"])))
    stream_packed_calls = "\n".join(
        f"        case {n}: return dse_k{n}_stream_{suffix}_packed(M, B, A, lda, C, ldc, "
        "threads);" for n in streaming)
    setters = "\n".join(f"    dse_{name}_set_threads(threads);" for name, _, _ in kernels)
    lines.append(DISPATCH.format(suffix=suffix, c_in=c_in, c_out=c_out, table_calls=table_calls,
                                 prepacked_calls=prepacked_calls, setters=setters,
                                 stream_packed_calls=stream_packed_calls,
                                 request="dse_amx_s8s8s32_amx_request"))
    for dtype, (other_suffix, o_in, o_out) in DTYPES.items():
        if dtype != table["dtype"]:
            lines.append(GENERAL_ENTRY.format(suffix=other_suffix, c_in=o_in, c_out=o_out))
    lines.append(PACKED_API)
    return "\n".join(lines)


DISPATCH = r"""
static int engine = -2;  /* 1: AMX, 0: AVX-512 only, -1: the portable kernels; -2: not chosen */
static int threads_set = 0;
static int threads = 1;  /* of every kernel, the streaming ones' included */

/* A call's arguments are wrong: a size below 1, a null pointer, a row longer than its leading
 * dimension (checked here, before any kernel: the streaming ones trust their caller). */
static int bad_arguments(int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                         const void *B, int64_t ldb, const void *C, int64_t ldc) {{
    return M < 1 || N < 1 || K < 1 || !A || !B || !C || lda < K || ldb < N || ldc < N;
}}

/* The ISA the tuned kernels are built for: x86-64-v4 (what any CPU with these AVX-512 subsets
 * has of it) with VNNI and BF16, its registers saved by the OS (the compiler's check reads
 * XCR0). Nothing of theirs runs before this says yes. */
static int avx512_usable(void) {{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
           && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx512f")
           && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")
           && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd")
           && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16");
}}

/* AMX when CPUID says so and Linux grants the tile state (emulated: AVX-512 is enough). */
static int amx_usable(void) {{
#ifdef DSE_AMX_EMULATE
    return 1;
#endif
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!((d >> 24) & 1) || !((d >> 25) & 1) || !((d >> 22) & 1)) return 0;
    return {request}() == 0;
}}

/* The highest engine DSE_GEMM_ISA allows (as ONEDNN_MAX_CPU_ISA caps oneDNN's) */
static int engine_cap(void) {{
    const char *isa = getenv("DSE_GEMM_ISA");
    if (!isa || !*isa || !strcmp(isa, "amx")) return 1;
    if (!strcmp(isa, "avx512")) return 0;
    if (!strcmp(isa, "portable")) return -1;
    fprintf(stderr, "dse_gemm: DSE_GEMM_ISA=%s is none of amx, avx512, portable: ignored\n",
            isa);
    return 1;
}}

/* every kernel's threads (they are built for AVX-512: called only where it runs) */
static void apply_threads(void) {{
{setters}
}}

static void init(void) {{
    if (engine > -2) return;
    int cap = engine_cap(), chosen = -1;
    if (cap >= 0 && avx512_usable()) chosen = cap >= 1 && amx_usable() ? 1 : 0;
    engine = chosen;
    if (!threads_set) threads = omp_get_num_procs();
    if (engine >= 0) apply_threads();
}}

int dse_gemm_engine(void) {{ init(); return engine; }}

void dse_set_threads(int n) {{
    init();
    threads_set = 1;
    threads = n < 1 ? omp_get_num_procs() : n;
    if (engine >= 0) apply_threads();
}}

/* log2 of x >= 1 within 0.09: the exponent, then a straight line to the next power of two */
static double rough_log2(int64_t x) {{
    int e = 63 - __builtin_clzll((unsigned long long)x);
    return e + ((double)x / (double)(1ULL << e) - 1.0);
}}

static int table_kernel(int64_t m, int64_t k, int64_t n) {{
    for (unsigned i = 0; i < sizeof rules / sizeof rules[0]; i++) {{
        const dse_rule *r = &rules[i];
        if (r->k == k && r->n == n && r->m_min <= m && (r->m_max < 0 || m <= r->m_max))
            return r->kernel;
    }}
    /* a weight shape the table has no rule for: the kernel of the table's nearest shape (in
     * log2 M, K and N), which suits a shape of its size better than one kernel for all */
    int best = FALLBACK;
    double lm = rough_log2(m), lk = rough_log2(k), ln = rough_log2(n), closest = 1e300;
    for (unsigned i = 0; i < N_NEAR; i++) {{
        const dse_near *s = &near_shapes[i];
        double d = __builtin_fabs(lm - s->lm) + __builtin_fabs(lk - s->lk)
                   + __builtin_fabs(ln - s->ln);
        if (d < closest) {{ closest = d; best = s->kernel; }}
    }}
    return best;
}}

int dse_gemm_kernel(int64_t M, int64_t N, int64_t K) {{
    init();
    if (M < 1 || N < 1 || K < 1) return -3;
    if (engine < 0) return -4;
    int kernel = table_kernel(M, K, N);
    if (!engine && !vector_kernel[kernel]) return M <= STREAM_M ? -1 : -2;
    return kernel;
}}

int dse_gemm_{suffix}(int64_t M, int64_t N, int64_t K, const {c_in} *A, int64_t lda,
                      const {c_in} *B, int64_t ldb, {c_out} *C, int64_t ldc) {{
    init();
    if (bad_arguments(M, N, K, A, lda, B, ldb, C, ldc)) return 1;
    int kernel = dse_gemm_kernel(M, N, K);
    if (kernel == -1) return dse_stream_{suffix}(M, N, K, A, lda, B, ldb, C, ldc, threads);
    if (kernel == -2) return dse_avx512_{suffix}_gemm(M, N, K, A, lda, B, ldb, C, ldc);
    if (kernel == -4) return dse_portable_{suffix}(M, N, K, A, lda, B, ldb, C, ldc, threads);
    switch (kernel) {{
{table_calls}
    }}
    return -1;
}}

/* With AMX, on B packed once: the kernel of the shape's rule where it reads the packed layout
 * (every AMX kernel, and the streaming ones), else (another AVX-512 kernel of the table) the
 * general AMX kernel. */
static int prepacked_{suffix}(int64_t M, int64_t N, int64_t K, const {c_in} *A, int64_t lda,
                              const char *B, {c_out} *C, int64_t ldc) {{
    int done = 3;
    switch (dse_gemm_kernel(M, N, K)) {{
{prepacked_calls}
    }}
    return done == 3 ? dse_amx_{suffix}_gemm_prepacked(M, N, K, A, lda, B, C, ldc) : done;
}}

/* Without AMX, on B packed once in the streaming kernels' layout: the shape's kernel where it
 * is one of the table's streaming kernels (its blocking), else the library's. */
static int stream_packed_{suffix}(int64_t M, int64_t N, int64_t K, const void *B,
                                  const {c_in} *A, int64_t lda, {c_out} *C, int64_t ldc) {{
    switch (dse_gemm_kernel(M, N, K)) {{
{stream_packed_calls}
    }}
    return dse_stream_{suffix}_packed(M, B, A, lda, C, ldc, threads);
}}
"""

GENERAL_ENTRY = r"""
static int prepacked_{suffix}(int64_t M, int64_t N, int64_t K, const {c_in} *A, int64_t lda,
                              const char *B, {c_out} *C, int64_t ldc) {{
    return dse_amx_{suffix}_gemm_prepacked(M, N, K, A, lda, B, C, ldc);
}}

static int stream_packed_{suffix}(int64_t M, int64_t N, int64_t K, const void *B,
                                  const {c_in} *A, int64_t lda, {c_out} *C, int64_t ldc) {{
    (void)N; (void)K;
    return dse_stream_{suffix}_packed(M, B, A, lda, C, ldc, threads);
}}

int dse_gemm_{suffix}(int64_t M, int64_t N, int64_t K, const {c_in} *A, int64_t lda,
                      const {c_in} *B, int64_t ldb, {c_out} *C, int64_t ldc) {{
    init();
    if (bad_arguments(M, N, K, A, lda, B, ldb, C, ldc)) return 1;
    if (engine < 0) return dse_portable_{suffix}(M, N, K, A, lda, B, ldb, C, ldc, threads);
    if (!engine && M <= STREAM_M)
        return dse_stream_{suffix}(M, N, K, A, lda, B, ldb, C, ldc, threads);
    return engine ? dse_amx_{suffix}_gemm(M, N, K, A, lda, B, ldb, C, ldc)
                  : dse_avx512_{suffix}_gemm(M, N, K, A, lda, B, ldb, C, ldc);
}}
"""

# B packed once: without AMX in the streaming kernels' layout, with AMX in the AMX kernels'
# (VNNI strips of 16 columns over all of K, as pack_b=gemm lays B out on every call); without
# AVX-512 a copy (the portable kernels lay each block out as they go)
PACKED_API = r"""
#include <stdlib.h>
void *dse_stream_pack_s8(int64_t, int64_t, const int8_t *, int64_t, int);
void *dse_stream_pack_bf16(int64_t, int64_t, const uint16_t *, int64_t, int);
void dse_stream_packed_free(void *);

typedef struct dse_packed_b {
    int kind;  /* 1: int8, 2: bf16 */
    int64_t K, N;
    void *stream;  /* without AMX: the streaming kernels' layout */
    char *vnni;    /* with AMX: the AMX kernels' */
    void *plain;   /* without AVX-512: B's rows, N elements apart */
} dse_packed_b;

static dse_packed_b *pack_b(int kind, int64_t K, int64_t N, const void *B, int64_t ldb) {
    init();
    if (K < 1 || N < 1 || !B || ldb < N) return NULL;
    dse_packed_b *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->kind = kind; p->K = K; p->N = N;
    if (engine == 1) {
        int64_t bytes = kind == 1 ? dse_amx_s8s8s32_packed_bytes(K, N)
                                  : dse_amx_bf16bf16f32_packed_bytes(K, N);
        p->vnni = aligned_alloc(64, (size_t)(bytes + 63) / 64 * 64);
        if (p->vnni && (kind == 1 ? dse_amx_s8s8s32_pack(K, N, B, ldb, p->vnni)
                                  : dse_amx_bf16bf16f32_pack(K, N, B, ldb, p->vnni))) {
            free(p->vnni);
            p->vnni = NULL;
        }
    } else if (engine == 0) {
        p->stream = kind == 1 ? dse_stream_pack_s8(K, N, B, ldb, threads)
                              : dse_stream_pack_bf16(K, N, B, ldb, threads);
    } else {
        size_t size = kind == 1 ? 1 : 2;
        if ((p->plain = malloc(size * (size_t)K * (size_t)N)))
            for (int64_t k = 0; k < K; k++)
                memcpy((char *)p->plain + size * (size_t)(k * N),
                       (const char *)B + size * (size_t)(k * ldb), size * (size_t)N);
    }
    if (!p->vnni && !p->stream && !p->plain) { free(p); return NULL; }
    return p;
}

dse_packed_b *dse_pack_b_s8(int64_t K, int64_t N, const int8_t *B, int64_t ldb) {
    return pack_b(1, K, N, B, ldb);
}

dse_packed_b *dse_pack_b_bf16(int64_t K, int64_t N, const uint16_t *B, int64_t ldb) {
    return pack_b(2, K, N, B, ldb);
}

void dse_free_packed_b(dse_packed_b *B) {
    if (!B) return;
    if (B->stream) dse_stream_packed_free(B->stream);
    free(B->vnni);
    free(B->plain);
    free(B);
}

static int bad_packed(int kind, int64_t M, const dse_packed_b *B, const void *A, int64_t lda,
                      const void *C, int64_t ldc) {
    return M < 1 || !B || B->kind != kind || !A || !C || lda < B->K || ldc < B->N;
}

int dse_gemm_s8s8s32_packed(int64_t M, const dse_packed_b *B, const int8_t *A, int64_t lda,
                            int32_t *C, int64_t ldc) {
    init();
    if (bad_packed(1, M, B, A, lda, C, ldc)) return 1;
    if (B->vnni) return prepacked_s8s8s32(M, B->N, B->K, A, lda, B->vnni, C, ldc);
    if (B->plain)
        return dse_portable_s8s8s32(M, B->N, B->K, A, lda, B->plain, B->N, C, ldc, threads);
    return stream_packed_s8s8s32(M, B->N, B->K, B->stream, A, lda, C, ldc);
}

int dse_gemm_bf16bf16f32_packed(int64_t M, const dse_packed_b *B, const uint16_t *A,
                                int64_t lda, float *C, int64_t ldc) {
    init();
    if (bad_packed(2, M, B, A, lda, C, ldc)) return 1;
    if (B->vnni) return prepacked_bf16bf16f32(M, B->N, B->K, A, lda, B->vnni, C, ldc);
    if (B->plain)
        return dse_portable_bf16bf16f32(M, B->N, B->K, A, lda, B->plain, B->N, C, ldc,
                                        threads);
    return stream_packed_bf16bf16f32(M, B->N, B->K, B->stream, A, lda, C, ldc);
}
"""


def rough_log2(x: int) -> float:
    """The dispatcher's log2 of an integer x >= 1 (its ``rough_log2``: the exponent, then a
    straight line to the next power of two; within 0.09 of log2)."""
    e = int(x).bit_length() - 1
    return e + (x / (1 << e) - 1.0)


def _nearest(table: Mapping[str, Any]) -> list[str]:
    """C of the table's shapes as log2 M, K, N and the kernel each runs (a table without its
    shapes: none, and the fallback serves every shape without a rule)."""
    shapes = [s for s in table.get("shapes") or [] if 0 <= s.get("kernel", -1) <
              len(table["kernels"])]
    rows = [f"    {{{rough_log2(s['M'])!r}, {rough_log2(s['K'])!r}, {rough_log2(s['N'])!r}, "
            f"{s['kernel']}}}," for s in shapes]
    return ["typedef struct { double lm, lk, ln; int kernel; } dse_near;",
            f"static const dse_near near_shapes[{max(1, len(rows))}] = {{",
            *(rows or ["    {0, 0, 0, 0},"]), "};", f"#define N_NEAR {len(rows)}"]


def _compile(flags: tuple[str, ...], source: str, work: Path, name: str
             ) -> tuple[Path, str | None]:
    src, obj = work / f"{name}.c", work / f"{name}.o"
    src.write_text(source)
    command = [*compiler(), *flags, "-c", str(src), "-o", str(obj)]
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S, check=False)
    except FileNotFoundError:
        return obj, missing_compiler(command[0])
    return obj, complaint(done, command[0]) if done.returncode else None


def build_library(table: Mapping[str, Any], out: str | Path, emulate: bool = False,
                  stream_m: int = STREAM_M) -> list[Path]:
    """Compile ``table``'s kernels, its dispatch and the general kernels into the shared
    library ``out`` and write ``dse_gemm.h`` beside it; the two paths. ``emulate`` computes
    the AMX kernels' tiles in C (tests on CPUs without AMX; the dispatcher then takes AMX as
    present where AVX-512 is); ``stream_m``: on a CPU without AMX, GEMMs whose table kernel
    needs AMX run the streaming kernels up to this many rows (0: none do). The library runs on
    any x86-64 CPU (its portable kernels where AVX-512 is absent), whatever CPU builds it."""
    from dse.core.errors import UsageError

    if table["dtype"] not in DTYPES:
        raise UsageError(f"a library of {table['dtype']} GEMMs cannot be built: the ABI has "
                         f"{', '.join(DTYPES)}")
    in_place = [n for n, k in enumerate(table["kernels"]) if k["params"].get("pack_b") == "none"]
    if in_place:
        raise UsageError(f"kernel {in_place[0]} reads B in place as a column-major weight "
                         "(pack_b=none), but the library's C ABI takes a row-major B: cover a "
                         "study whose workloads have b_layout row")
    out = Path(out)
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: {out.parent} is not a folder")
    units = [(name, LIBRARY_KERNEL_FLAGS,
              _renamed(kernel_source(params, dtype, "row", emulate), name))
             for name, dtype, params in kernels_of(table)]
    units.append(("stream", LIBRARY_KERNEL_FLAGS, stream_source()))
    units.append(("portable", LIBRARY_PORTABLE_FLAGS, portable_source()))
    units.append(("dispatch", LIBRARY_PORTABLE_FLAGS,
                  dispatcher_source(table, emulate, stream_m)))
    with tempfile.TemporaryDirectory(prefix="dse-lib-") as folder:
        work = Path(folder)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            built = list(pool.map(lambda u: _compile(u[1], u[2], work, u[0]), units))
        for (name, _, _), (_, error) in zip(units, built, strict=True):
            if error:
                raise UsageError(f"kernel {name} does not compile: {error}")
        partial = out.with_name(f".{out.name}.{os.getpid()}")  # renamed whole when linked
        done = subprocess.run([*compiler(), "-shared", "-fopenmp", *(str(o) for o, _ in built),
                               "-o", str(partial)],
                              capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                              check=False)
        if done.returncode:
            partial.unlink(missing_ok=True)
            raise UsageError(f"the library does not link: {done.stderr[-800:]}")
        os.replace(partial, out)
    header = out.parent / "dse_gemm.h"
    header.write_text(HEADER.format(study=table.get("study", ""), target=table["target"]))
    return [out, header]
