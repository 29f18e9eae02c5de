"""A dispatch table's AMX kernels as one shared library a program links (``dse dispatch
build``): each kernel compiled on its own (its symbols renamed), a dispatcher that picks one by
the table's rules, a general kernel of the other dtype, AVX-512 kernels for CPUs without AMX,
and the header ``dse_gemm.h``. Nothing of Python at run time.

The C ABI (row-major A, B and C, leading dimensions honoured; 0 on success, non-zero and C
untouched on bad arguments)::

    int dse_gemm_s8s8s32(int64_t M, int64_t N, int64_t K, const int8_t *A, int64_t lda,
                         const int8_t *B, int64_t ldb, int32_t *C, int64_t ldc);
    int dse_gemm_bf16bf16f32(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                             const uint16_t *B, int64_t ldb, float *C, int64_t ldc);
    void dse_set_threads(int n);   /* default: every core */
    int dse_gemm_engine(void);     /* 1: the AMX kernels run, 0: the AVX-512 ones */
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

from evaluators.hardware.amx_build import COMPILE_TIMEOUT_S, compile_command
from evaluators.hardware.amx_source import kernel_source

DTYPES = {"int8-int32": ("s8s8s32", "int8_t", "int32_t"),
          "bf16-fp32": ("bf16bf16f32", "uint16_t", "float")}
RENAMED = ("dse_gemm", "dse_time", "dse_set_threads", "dse_amx_request")
# a kernel for any shape where the table has none (the other dtype), on each engine
GENERAL = {"amx": {"grid_rows": 2, "grid_cols": 2, "mc": 256, "kc": 1024, "nc": 256},
           "avx512": {"grid_rows": 4, "grid_cols": 4, "mc": 64, "kc": 1024, "nc": 256,
                      "engine": "avx512", "split": "n"}}

HEADER = """/* dse_gemm.h: GEMMs tuned by dse ({study} on {target}), built for this CPU. */
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
/* 1 when the AMX kernels run, 0 when this CPU (or its kernel) has no AMX and the AVX-512
 * kernels serve every shape. */
int dse_gemm_engine(void);
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


def dispatcher_source(table: Mapping[str, Any], emulate: bool = False) -> str:
    """The C of the ABI: the table's rules, the choice of engine at the first call (AMX taken
    as present when its tiles are emulated), and each dtype's entry point."""
    suffix, c_in, c_out = DTYPES[table["dtype"]]
    kernels = kernels_of(table)
    lines = ["#define DSE_AMX_EMULATE 1" if emulate else "", "#include <stdint.h>",
             "#include <cpuid.h>", "#include <omp.h>", ""]
    for name, dtype, _ in kernels:
        _, k_in, k_out = DTYPES[dtype]
        lines.append(f"int dse_{name}_gemm(int64_t, int64_t, int64_t, const {k_in} *, int64_t, "
                     f"const {k_in} *, int64_t, {k_out} *, int64_t);")
        lines.append(f"void dse_{name}_set_threads(int);")
        lines.append(f"int dse_{name}_amx_request(void);")
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
                          kernels[:len(table["kernels"])]) + "};", ""]
    table_calls = "\n".join(
        f"        case {n}: return dse_k{n}_gemm(M, N, K, A, lda, B, ldb, C, ldc);"
        for n in range(len(table["kernels"])))
    setters = "\n".join(f"    dse_{name}_set_threads(n);" for name, _, _ in kernels)
    lines.append(DISPATCH.format(suffix=suffix, c_in=c_in, c_out=c_out, table_calls=table_calls,
                                 setters=setters, request="dse_amx_s8s8s32_amx_request"))
    for dtype, (other_suffix, o_in, o_out) in DTYPES.items():
        if dtype != table["dtype"]:
            lines.append(GENERAL_ENTRY.format(suffix=other_suffix, c_in=o_in, c_out=o_out))
    return "\n".join(lines)


DISPATCH = r"""
static int engine = -1;  /* 1: AMX, 0: AVX-512 only */
static int threads_set = 0;

/* AMX when CPUID says so and Linux grants the tile state. */
static int amx_usable(void) {{
#ifdef DSE_AMX_EMULATE
    return 1;
#endif
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!((d >> 24) & 1) || !((d >> 25) & 1) || !((d >> 22) & 1)) return 0;
    return {request}() == 0;
}}

static void init(void) {{
    if (engine >= 0) return;
    int amx = amx_usable();
    if (!threads_set) dse_set_threads(omp_get_num_procs());
    engine = amx;
}}

int dse_gemm_engine(void) {{ init(); return engine; }}

void dse_set_threads(int n) {{
    if (n < 1) n = omp_get_num_procs();
    threads_set = 1;
{setters}
}}

static int table_kernel(int64_t m, int64_t k, int64_t n) {{
    for (unsigned i = 0; i < sizeof rules / sizeof rules[0]; i++) {{
        const dse_rule *r = &rules[i];
        if (r->k == k && r->n == n && r->m_min <= m && (r->m_max < 0 || m <= r->m_max))
            return r->kernel;
    }}
    return FALLBACK;
}}

int dse_gemm_{suffix}(int64_t M, int64_t N, int64_t K, const {c_in} *A, int64_t lda,
                      const {c_in} *B, int64_t ldb, {c_out} *C, int64_t ldc) {{
    init();
    int kernel = table_kernel(M, K, N);
    if (!engine && !vector_kernel[kernel])
        return dse_avx512_{suffix}_gemm(M, N, K, A, lda, B, ldb, C, ldc);
    switch (kernel) {{
{table_calls}
    }}
    return -1;
}}
"""

GENERAL_ENTRY = r"""
int dse_gemm_{suffix}(int64_t M, int64_t N, int64_t K, const {c_in} *A, int64_t lda,
                      const {c_in} *B, int64_t ldb, {c_out} *C, int64_t ldc) {{
    init();
    return engine ? dse_amx_{suffix}_gemm(M, N, K, A, lda, B, ldb, C, ldc)
                  : dse_avx512_{suffix}_gemm(M, N, K, A, lda, B, ldb, C, ldc);
}}
"""


def _compile(command: list[str], source: str, work: Path, name: str) -> tuple[Path, str | None]:
    src, obj = work / f"{name}.c", work / f"{name}.o"
    src.write_text(source)
    flags = [flag for flag in command if flag != "-shared"]
    done = subprocess.run([*flags, "-c", str(src), "-o", str(obj)], capture_output=True,
                          text=True, timeout=COMPILE_TIMEOUT_S, check=False)
    return obj, (done.stderr[-800:] or "the compiler failed") if done.returncode else None


def build_library(table: Mapping[str, Any], out: str | Path,
                  emulate: bool = False) -> list[Path]:
    """Compile ``table``'s kernels, its dispatch and the general kernels into the shared
    library ``out`` and write ``dse_gemm.h`` beside it; the two paths. ``emulate`` computes
    the AMX kernels' tiles in C (tests on CPUs without AMX; the dispatcher then takes AMX as
    present)."""
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
    command = compile_command(emulate)
    units = [(name, _renamed(kernel_source(params, dtype, "row", emulate), name))
             for name, dtype, params in kernels_of(table)]
    units.append(("dispatch", dispatcher_source(table, emulate)))
    with tempfile.TemporaryDirectory(prefix="dse-lib-") as folder:
        work = Path(folder)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            built = list(pool.map(lambda u: _compile(command, u[1], work, u[0]), units))
        for (name, _), (_, error) in zip(units, built, strict=True):
            if error:
                raise UsageError(f"kernel {name} does not compile: {error}")
        partial = out.with_name(f".{out.name}.{os.getpid()}")  # renamed whole when linked
        done = subprocess.run([*command, *(str(o) for o, _ in built), "-o", str(partial)],
                              capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                              check=False)
        if done.returncode:
            partial.unlink(missing_ok=True)
            raise UsageError(f"the library does not link: {done.stderr[-800:]}")
        os.replace(partial, out)
    header = out.parent / "dse_gemm.h"
    header.write_text(HEADER.format(study=table.get("study", ""), target=table["target"]))
    return [out, header]
