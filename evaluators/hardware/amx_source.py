"""C source of an AMX GEMM for one config of the ``amx_gemm`` space (a pure function of the
config and the dtype, so a config's source, and its build, can be hashed and tested).

The kernel is a Goto-style blocked GEMM ``C[M,N] = A[M,K] @ B[K,N]`` (row-major, leading
dimensions honoured) over 16x16 C tiles:

- B (stored K x N, or N x K as a weight) is re-laid out to VNNI (4 int8 or 2 bf16 K values
  per 4-byte group) in strips of 16 columns, each strip's K rows contiguous, so a B tile is
  1 KiB read with a 64-byte stride: once per GEMM (``pack_b=gemm``: every thread packs a
  share, then all compute) or per KC x NC block just before it is used (``pack_b=block``,
  each thread its own blocks).
- ``pack_b=none`` (AVX-512, B stored N x K): no re-layout at all; each row of A meets each
  column of B as a dot product over the whole K, both read in place (``dse_dot``): B streamed
  once, the kernel for decode shapes.
- A is packed per MC x KC block into 1 KiB tiles (``pack_a=yes``) or read in place with its
  row stride (``no``; the space's rules keep that to shapes without tails).
- The micro-kernel holds a ``grid_rows x grid_cols`` grid of C tiles across the K of a block;
  the operand along the grid's shorter side stays in tiles for a K step, the other streams
  through ``stream_buffers`` tiles. Its K loop is unrolled ``k_unroll`` times, streamed loads use
  ``TILELOADDT1`` when ``load_hint=t1``, the streamed operand is prefetched ``prefetch`` K steps
  ahead and the next micro-tile's C lines ``prefetch_c``.
- ``block_order``: ``b_block`` keeps a B block while A blocks pass (loops N, K, M: the classic
  order), ``a_block`` keeps an A block while B blocks pass (M, K, N). ``micro_order``:
  ``a_strip`` walks a row strip across the block's columns (the A strip stays in L1),
  ``b_strip`` a column strip down its rows.
- The C region is split over ``threads`` OpenMP threads by rows, columns or both (``split``).
- A weight reused by many calls can be packed once (``dse_pack``: the ``pack_b=gemm`` layout
  of a row-major B, with zero strips for whole grids) and multiplied by any AMX kernel of the
  dtype with ``dse_gemm_prepacked``, which skips packing B (``pack_b=block`` kernels read
  their blocks from it).

Tails: packing pads A and B with zeros to whole tiles; a C tile that reaches past M or N goes
through a 16x16 buffer. With ``emulate`` the tile instructions are computed in C (the header's
``DSE_AMX_EMULATE``): exact products, meaningless times.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from evaluators.hardware.amx_stream import stream_kernel

TILES = 8  # tile registers
SUPPORT = Path(__file__).parent / "amx_c" / "tiles.h"


@dataclass(frozen=True)
class DtypeCode:
    """What the source needs of a dtype pair: C types, elements per tile row (K per TDP), the
    VNNI group and the TDP instruction."""

    c_in: str
    c_out: str
    kt: int
    vnni: int
    tdp: str


DTYPES: dict[str, DtypeCode] = {
    "int8-int32": DtypeCode("int8_t", "int32_t", 64, 4, "TDP_INT8"),
    "bf16-fp32": DtypeCode("uint16_t", "float", 32, 2, "TDP_BF16"),
}


@cache
def support_text() -> str:
    """The tile operations' header, inlined into every source (its text is part of the hash)."""
    return SUPPORT.read_text()


MICRO_SIGNATURE = """static inline void dse_micro(const char *a, int64_t ir, int64_t a_ss,
        int64_t a_ks, int64_t a_ts, const char *b, int64_t jr, int64_t b_ss,
        const int32_t *comp, int64_t nk, TOUT *C, int64_t ldc, int64_t r0, int64_t c0,
        int64_t M, int64_t N, int first, const TOUT *next_c) {"""


def _micro_kernel(p: Mapping[str, Any], code: DtypeCode) -> str:
    """``dse_micro``: one grid of C tiles over the K steps of a block, loads and stores of C
    included (generated unrolled: tile numbers are instruction operands)."""
    gr, gc, s = int(p["grid_rows"]), int(p["grid_cols"]), int(p["stream_buffers"])
    unroll, dist = int(p["k_unroll"]), int(p["prefetch"])
    a_held = gr <= gc  # the operand on the grid's shorter side stays in tiles for a K step
    c_tile = {(i, j): i * gc + j for i in range(gr) for j in range(gc)}
    held0 = gr * gc
    stream0 = held0 + (gr if a_held else gc)
    streamed_hint = {"a_strip": "B", "b_strip": "A"}[str(p["micro_order"])]
    lines: list[str] = []

    def load(operand: str, tile: int, index: int, k: str) -> str:
        t1 = p["load_hint"] == "t1" and operand == streamed_hint
        op = "TLOAD_T1" if t1 else "TLOAD"
        if operand == "A":
            return f"{op}({tile}, a + {index} * a_ss + ({k}) * a_ks, a_ts);"
        return f"{op}({tile}, b + {index} * b_ss + ({k}) * 1024, 64);"

    def step(k: str, u: int) -> None:
        held, streamed, n_streamed = ("A", "B", gc) if a_held else ("B", "A", gr)
        for i in range(gr if a_held else gc):
            lines.append("    " + load(held, held0 + i, i, k))
        for j in range(n_streamed):
            buf = stream0 + (u * n_streamed + j) % s
            lines.append("    " + load(streamed, buf, j, k))
            for i in range(gr if a_held else gc):
                c = c_tile[(i, j)] if a_held else c_tile[(j, i)]
                a_t, b_t = (held0 + i, buf) if a_held else (buf, held0 + i)
                lines.append(f"    {code.tdp}({c}, {a_t}, {b_t});")
        if dist:
            which = "b + j * b_ss" if streamed == "B" else "a + j * a_ss"
            stride = "1024" if streamed == "B" else "a_ks"
            rows = "64" if streamed == "B" else "a_ts"
            lines.append(f"    if (({k}) + {dist} < nk) for (int j = 0; j < {n_streamed}; j++)"
                         f" for (int r = 0; r < 16; r++) _mm_prefetch((const char *)({which} "
                         f"+ (({k}) + {dist}) * {stride} + r * {rows}), _MM_HINT_T0);")

    head = [
        MICRO_SIGNATURE,
        "    TOUT edge[256] __attribute__((aligned(64)));",
        "    a += (ir / 16) * a_ss; b += (jr / 16) * b_ss; (void)comp;",
    ]
    if p["prefetch_c"] == "yes":
        head.append(f"    if (next_c) for (int r = 0; r < {16 * gr}; r++) for (int j = 0; "
                    f"j < {gc}; j++) _mm_prefetch((const char *)(next_c + r * ldc + 16 * j), "
                    "_MM_HINT_T0);")
    for (i, j), t in c_tile.items():
        head.append(f"    dse_c_in({t}, C, ldc, r0 + {16 * i}, c0 + {16 * j}, M, N, first, "
                    "edge);")
    lines.extend(head)
    lines.append("    int64_t k = 0;")
    lines.append(f"    for (; k + {unroll} <= nk; k += {unroll}) {{")
    for u in range(unroll):
        step(f"k + {u}", u)
    lines.append("    }")
    lines.append("    for (; k < nk; k++) {")
    step("k", 0)
    lines.append("    }")
    for (i, j), t in c_tile.items():
        lines.append(f"    dse_c_out({t}, C, ldc, r0 + {16 * i}, c0 + {16 * j}, M, N, edge);")
    lines.append("}")
    return "\n".join(lines)


def _vector_kernel(p: Mapping[str, Any], code: DtypeCode) -> str:
    """``dse_micro`` on AVX-512 (``engine=avx512``): ``grid_rows`` rows of A by ``grid_cols``
    16-column strips of B, one zmm accumulator each; per 4-byte group of K, the strips' VNNI
    rows loaded once and each row's group broadcast (``VPDPBUSD`` on A + 128, the packing's
    column sums taken off; ``VDPBF16PS``). Rows past M and columns past N are masked."""
    rows, cols = int(p["grid_rows"]), int(p["grid_cols"])
    unroll, dist = 4 * int(p["k_unroll"]), int(p["prefetch"])
    int8 = code.c_in == "int8_t"
    pairs = [(r, c) for r in range(rows) for c in range(cols)]
    out = [MICRO_SIGNATURE, "    b += (jr / 16) * b_ss;", "    (void)next_c;"]
    out += [f"    const char *a{r} = a + ((ir + {r}) / 16) * a_ss + ((ir + {r}) % 16) * a_ts;"
            for r in range(rows)]
    for c in range(cols):
        out.append(f"    int64_t w{c} = N - c0 - {16 * c};")
        out.append(f"    __mmask16 m{c} = w{c} <= 0 ? 0 : w{c} >= 16 ? 0xFFFF "
                   f": (__mmask16)((1u << w{c}) - 1);")
    for r, c in pairs:
        live = f"(r0 + {r} < M ? m{c} : 0)"
        src = f"C + (r0 + {r}) * ldc + c0 + {16 * c}"
        if int8:
            start = (f"first ? _mm512_setzero_si512() : _mm512_maskz_loadu_epi32({live}, {src})")
            out.append(f"    __m512i acc{r}_{c} = {start};")
            out.append(f"    acc{r}_{c} = _mm512_sub_epi32(acc{r}_{c}, _mm512_slli_epi32("
                       f"_mm512_maskz_loadu_epi32(m{c}, comp + jr + {16 * c}), 7));")
        else:
            out.append(f"    __m512 acc{r}_{c} = first ? _mm512_setzero_ps() : "
                       f"_mm512_maskz_loadu_ps({live}, {src});")
    if int8:
        out.append("    const __m512i bias = _mm512_set1_epi32((int)0x80808080);")
    groups = "nk * 16"

    def step(g: str) -> list[str]:
        body = [f"    {{ const int64_t g_ = {g};"]
        body += [f"      __m512i b{c} = _mm512_loadu_si512(b + {c} * b_ss + g_ * 64);"
                 for c in range(cols)]
        if dist:
            body += [f"      _mm_prefetch(b + {c} * b_ss + (g_ + {16 * dist}) * 64, _MM_HINT_T0);"
                     for c in range(cols)]
        for r in range(rows):
            body.append(f"      int32_t v{r}; memcpy(&v{r}, a{r} + (g_ >> 4) * a_ks + (g_ & 15) * 4"
                        ", 4);")
            body.append(f"      __m512i x{r} = _mm512_set1_epi32(v{r});")
            if int8:
                body.append(f"      x{r} = _mm512_xor_si512(x{r}, bias);")
            for c in range(cols):
                op = (f"_mm512_dpbusd_epi32(acc{r}_{c}, x{r}, b{c})" if int8 else
                      f"_mm512_dpbf16_ps(acc{r}_{c}, (__m512bh)x{r}, (__m512bh)b{c})")
                body.append(f"      acc{r}_{c} = {op};")
        return [*body, "    }"]

    out.append("    int64_t g = 0;")
    out.append(f"    for (; g + {unroll} <= {groups}; g += {unroll}) {{")
    for u in range(unroll):
        out += step(f"g + {u}")
    out.append("    }")
    out.append(f"    for (; g < {groups}; g++) {{")
    out += step("g")
    out.append("    }")
    store = "_mm512_mask_storeu_epi32" if int8 else "_mm512_mask_storeu_ps"
    for r, c in pairs:
        out.append(f"    if (r0 + {r} < M) {store}(C + (r0 + {r}) * ldc + c0 + {16 * c}, m{c}, "
                   f"acc{r}_{c});")
    out.append("}")
    return "\n".join(out)


def _dot_kernel(p: Mapping[str, Any], code: DtypeCode) -> str:
    """``dse_dot`` (``pack_b=none``, AVX-512, B stored N x K as a weight): ``grid_rows`` rows of
    A against ``grid_cols`` columns of B, each pair's dot product over the whole K from both
    operands in place, 64 bytes a step: B streamed once, never re-laid out. int8 takes B's
    column sums on the way (``VPDPBUSD`` of ones)."""
    rows, cols = int(p["grid_rows"]), int(p["grid_cols"])
    dist = int(p["prefetch"])
    int8 = code.c_in == "int8_t"
    zero = "_mm512_setzero_si512()" if int8 else "_mm512_setzero_ps()"
    vec = "__m512i" if int8 else "__m512"
    out = ["static inline void dse_dot(const TIN *a, int64_t lda, const TIN *b, int64_t ldb,",
           "        TOUT *c, int64_t ldc, int rows, int cols, int64_t K) {"]
    out += [f"    const char *a{r} = (const char *)(a + ({r} < rows ? {r} : 0) * lda);"
            for r in range(rows)]
    out += [f"    const char *b{s} = (const char *)(b + ({s} < cols ? {s} : 0) * ldb);"
            for s in range(cols)]
    out += [f"    {vec} acc{r}_{s} = {zero};" for r in range(rows) for s in range(cols)]
    if int8:
        out += [f"    __m512i sum{s} = _mm512_setzero_si512();" for s in range(cols)]
        out += ["    const __m512i bias = _mm512_set1_epi8((char)0x80);",
                "    const __m512i ones = _mm512_set1_epi8(1);"]
    out.append("    const int64_t bytes = K * (int64_t)sizeof(TIN);")

    def step(load: str) -> list[str]:
        body = []
        if dist:
            body += [f"        _mm_prefetch(b{s} + x + {256 * dist}, _MM_HINT_T0);"
                     for s in range(cols)]
        body += [f"        __m512i y{s} = {load.format(f'b{s}')};" for s in range(cols)]
        for r in range(rows):
            x = load.format(f"a{r}")
            body.append(f"        __m512i x{r} = " + (f"_mm512_xor_si512({x}, bias);" if int8
                                                     else f"{x};"))
            for s in range(cols):
                op = (f"_mm512_dpbusd_epi32(acc{r}_{s}, x{r}, y{s})" if int8 else
                      f"_mm512_dpbf16_ps(acc{r}_{s}, (__m512bh)x{r}, (__m512bh)y{s})")
                body.append(f"        acc{r}_{s} = {op};")
        if int8:
            body += [f"        sum{s} = _mm512_dpbusd_epi32(sum{s}, ones, y{s});"
                     for s in range(cols)]
        return body

    out.append("    int64_t x = 0;")
    out.append("    for (; x + 64 <= bytes; x += 64) {")
    out += step("_mm512_loadu_si512({} + x)")
    out.append("    }")
    out.append("    if (x < bytes) {")
    out.append("        const __mmask64 tail = ~0ULL >> (64 - (bytes - x));")
    out += step("_mm512_maskz_loadu_epi8(tail, {} + x)")
    out.append("    }")
    for r in range(rows):
        for s in range(cols):
            value = (f"_mm512_reduce_add_epi32(acc{r}_{s}) - 128 * "
                     f"_mm512_reduce_add_epi32(sum{s})" if int8 else
                     f"_mm512_reduce_add_ps(acc{r}_{s})")
            out.append(f"    if ({r} < rows && {s} < cols) c[{r} * ldc + {s}] = {value};")
    out.append("}")
    out.append(DOT_REGION)
    return "\n".join(out)


DOT_REGION = r"""
/* The blocks of one thread's region with B in place: an nc-column block of B kept while the
 * mc-row blocks of A pass, grid by grid. */
static void dse_dot_region(const TIN *A, int64_t lda, const TIN *B, int64_t ldb, TOUT *C,
                           int64_t ldc, int64_t K, int64_t m0, int64_t m1, int64_t n0,
                           int64_t n1) {
    for (int64_t jc = n0; jc < n1; jc += NC)
        for (int64_t ic = m0; ic < m1; ic += MC) {
            int64_t m_end = ic + MC < m1 ? ic + MC : m1, n_end = jc + NC < n1 ? jc + NC : n1;
            for (int64_t i = ic; i < m_end; i += GR)
                for (int64_t j = jc; j < n_end; j += GC)
                    dse_dot(A + i * lda, lda, B + j * ldb, ldb, C + i * ldc + j, ldc,
                            (int)(m_end - i < GR ? m_end - i : GR),
                            (int)(n_end - j < GC ? n_end - j : GC), K);
        }
}
"""


# Loading and storing one C tile: in place when the whole tile lies inside C, through a 16x16
# buffer when it reaches past M or N, not at all when it lies wholly outside. A macro (the tile
# number is an instruction operand, a literal).
C_EDGES = r"""
#define dse_c_in(t, C, ldc, r, c, M, N, first, edge) do {                                  \
    if ((first) || (r) >= (M) || (c) >= (N)) { TZERO(t); break; }                           \
    if ((r) + 16 <= (M) && (c) + 16 <= (N)) {                                               \
        TLOAD(t, (C) + (r) * (ldc) + (c), (ldc) * (int64_t)sizeof(TOUT)); break; }           \
    memset(edge, 0, sizeof(TOUT) * 256);                                                    \
    for (int64_t i_ = 0; i_ < 16 && (r) + i_ < (M); i_++)                                   \
        memcpy(edge + 16 * i_, (C) + ((r) + i_) * (ldc) + (c),                             \
               sizeof(TOUT) * ((N) - (c) < 16 ? (N) - (c) : 16));                           \
    TLOAD(t, edge, 64);                                                                     \
} while (0)
#define dse_c_out(t, C, ldc, r, c, M, N, edge) do {                                         \
    if ((r) >= (M) || (c) >= (N)) break;                                                    \
    if ((r) + 16 <= (M) && (c) + 16 <= (N)) {                                               \
        TSTORE(t, (C) + (r) * (ldc) + (c), (ldc) * (int64_t)sizeof(TOUT)); break; }          \
    TSTORE(t, edge, 64);                                                                    \
    for (int64_t i_ = 0; i_ < 16 && (r) + i_ < (M); i_++)                                   \
        memcpy((C) + ((r) + i_) * (ldc) + (c), edge + 16 * i_,                             \
               sizeof(TOUT) * ((N) - (c) < 16 ? (N) - (c) : 16));                           \
} while (0)
"""

# Packing: B to VNNI strips of 16 columns (K rows of a strip contiguous, zero-padded to whole
# tiles and to whole column grids), A to 1 KiB tiles (16 rows x 64 bytes, zero-padded).
PACKING = r"""
/* 16 VNNI rows (1 KiB: 16 columns x 64 bytes of K) of B from k, col0, all inside B. */
static inline void dse_pack_chunk(const TIN *B, int64_t ldb, int64_t k, int64_t col0, char *out) {
#if B_COL
    /* each column's 64 bytes are contiguous: a 16 x 16 transpose of 4-byte groups */
    __m512i r[16], t[16];
    for (int n = 0; n < 16; n++) r[n] = _mm512_loadu_si512(B + (col0 + n) * ldb + k);
    for (int n = 0; n < 16; n += 2) {
        t[n] = _mm512_unpacklo_epi32(r[n], r[n + 1]);
        t[n + 1] = _mm512_unpackhi_epi32(r[n], r[n + 1]);
    }
    for (int n = 0; n < 16; n += 4) {
        r[n] = _mm512_unpacklo_epi64(t[n], t[n + 2]);
        r[n + 1] = _mm512_unpackhi_epi64(t[n], t[n + 2]);
        r[n + 2] = _mm512_unpacklo_epi64(t[n + 1], t[n + 3]);
        r[n + 3] = _mm512_unpackhi_epi64(t[n + 1], t[n + 3]);
    }
    for (int h = 0; h < 16; h += 8)
        for (int j = 0; j < 4; j++) {
            t[h + j] = _mm512_shuffle_i32x4(r[h + j], r[h + 4 + j], 0x88);
            t[h + 4 + j] = _mm512_shuffle_i32x4(r[h + j], r[h + 4 + j], 0xDD);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xDD);
    }
    for (int g = 0; g < 16; g++) _mm512_storeu_si512(out + 64 * g, r[g]);
#else
    for (int g = 0; g < 16; g++) {
        const char *src = (const char *)(B + (k + g * VN) * ldb + col0);
        char *row = out + 64 * g;
        if (VN == 4) {
            __m128i r0 = _mm_loadu_si128((const __m128i *)src);
            __m128i r1 = _mm_loadu_si128((const __m128i *)(src + ldb));
            __m128i r2 = _mm_loadu_si128((const __m128i *)(src + 2 * ldb));
            __m128i r3 = _mm_loadu_si128((const __m128i *)(src + 3 * ldb));
            __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
            __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
            _mm_storeu_si128((__m128i *)row, _mm_unpacklo_epi16(t0, t2));
            _mm_storeu_si128((__m128i *)(row + 16), _mm_unpackhi_epi16(t0, t2));
            _mm_storeu_si128((__m128i *)(row + 32), _mm_unpacklo_epi16(t1, t3));
            _mm_storeu_si128((__m128i *)(row + 48), _mm_unpackhi_epi16(t1, t3));
        } else {
            const char *next = src + ldb * (int64_t)sizeof(TIN);
            __m128i a0 = _mm_loadu_si128((const __m128i *)src);
            __m128i a1 = _mm_loadu_si128((const __m128i *)(src + 16));
            __m128i b0 = _mm_loadu_si128((const __m128i *)next);
            __m128i b1 = _mm_loadu_si128((const __m128i *)(next + 16));
            _mm_storeu_si128((__m128i *)row, _mm_unpacklo_epi16(a0, b0));
            _mm_storeu_si128((__m128i *)(row + 16), _mm_unpackhi_epi16(a0, b0));
            _mm_storeu_si128((__m128i *)(row + 32), _mm_unpacklo_epi16(a1, b1));
            _mm_storeu_si128((__m128i *)(row + 48), _mm_unpackhi_epi16(a1, b1));
        }
    }
#endif
}

#if !B_COL
/* One VNNI row (VN K rows from k) of 4 strips (64 columns from col0) of a row-major B, each K
 * row's 64 columns read whole: a strip at a time would read 16 or 32 bytes of a row, rows
 * pages apart, and open a DRAM page per piece. Strip j's row goes to out + j * strip_bytes. */
static inline void dse_pack_row4(const TIN *B, int64_t ldb, int64_t k, int64_t col0, char *out,
                                 int64_t strip_bytes) {
#if VN == 4
    const int8_t *src = (const int8_t *)(B + k * ldb + col0);
    __m512i r0 = _mm512_loadu_si512(src), r1 = _mm512_loadu_si512(src + ldb);
    __m512i r2 = _mm512_loadu_si512(src + 2 * ldb), r3 = _mm512_loadu_si512(src + 3 * ldb);
    __m512i t0 = _mm512_unpacklo_epi8(r0, r1), t1 = _mm512_unpackhi_epi8(r0, r1);
    __m512i t2 = _mm512_unpacklo_epi8(r2, r3), t3 = _mm512_unpackhi_epi8(r2, r3);
    /* u_q's 128-bit lane L holds columns 16L + 4q .. +3: strip L's row is lane L of each */
    __m512i u0 = _mm512_unpacklo_epi16(t0, t2), u1 = _mm512_unpackhi_epi16(t0, t2);
    __m512i u2 = _mm512_unpacklo_epi16(t1, t3), u3 = _mm512_unpackhi_epi16(t1, t3);
    __m512i x0 = _mm512_shuffle_i32x4(u0, u1, 0x44), x1 = _mm512_shuffle_i32x4(u0, u1, 0xEE);
    __m512i x2 = _mm512_shuffle_i32x4(u2, u3, 0x44), x3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    _mm512_storeu_si512(out, _mm512_shuffle_i32x4(x0, x2, 0x88));
    _mm512_storeu_si512(out + strip_bytes, _mm512_shuffle_i32x4(x0, x2, 0xDD));
    _mm512_storeu_si512(out + 2 * strip_bytes, _mm512_shuffle_i32x4(x1, x3, 0x88));
    _mm512_storeu_si512(out + 3 * strip_bytes, _mm512_shuffle_i32x4(x1, x3, 0xDD));
#else
    for (int h = 0; h < 2; h++) {  /* 32 columns (two strips) a half */
        const TIN *src = B + k * ldb + col0 + 32 * h;
        __m512i a = _mm512_loadu_si512(src), b = _mm512_loadu_si512(src + ldb);
        /* u0's lane L holds the pairs of columns 8L .. 8L + 3, u1's 8L + 4 .. 8L + 7 */
        __m512i u0 = _mm512_unpacklo_epi16(a, b), u1 = _mm512_unpackhi_epi16(a, b);
        __m512i lo = _mm512_shuffle_i32x4(u0, u1, 0x44), hi = _mm512_shuffle_i32x4(u0, u1, 0xEE);
        _mm512_storeu_si512(out + 2 * h * strip_bytes, _mm512_shuffle_i32x4(lo, lo, 0xD8));
        _mm512_storeu_si512(out + (2 * h + 1) * strip_bytes, _mm512_shuffle_i32x4(hi, hi, 0xD8));
    }
#endif
}
#endif

#if COMP
/* The column sums of each K block of a strip laid out (``used`` VNNI rows from the first
 * block's start, zero rows past them), which come off the product as 128 x the sums (VPDPBUSD
 * multiplies A + 128): a column's 4-byte group holds its VN values, which VPDPBUSD with ones
 * adds up. Read from the strip while it is in L1: a pass of its own over B would read 16 bytes
 * a row, rows pages apart. */
static inline void dse_strip_sums(const char *laid, int64_t used, int64_t kc, int32_t *comp,
                                  int64_t comp_stride) {
    const __m512i ones = _mm512_set1_epi8(1);
    const int64_t per_block = KC / VN;
    for (int64_t blk = 0; blk * KC < kc; blk++) {
        __m512i sums = _mm512_setzero_si512();
        int64_t r1 = (blk + 1) * per_block < used ? (blk + 1) * per_block : used;
        for (int64_t r = blk * per_block; r < r1; r++)
            sums = _mm512_dpbusd_epi32(sums, ones, _mm512_loadu_si512(laid + r * 64));
        _mm512_storeu_si512(comp + blk * comp_stride, sums);
    }
}
#endif

static void dse_pack_b(const TIN *B, int64_t ldb, int64_t K, int64_t N, int64_t k0,
                       int64_t kc, int64_t n0, int64_t s_lo, int64_t s_hi, TIN *dst,
                       int32_t *comp, int64_t comp_stride) {
    int64_t rows = (kc + KT - 1) / KT * (KT / VN);  /* VNNI rows of a strip */
    int64_t k_end = k0 + kc < K ? k0 + kc : K;
    int64_t s = s_lo;
#if !B_COL
    /* whole strips four at a time: the VNNI rows whose K rows all lie in B, then the rest
     * (a last partial group, zero rows past K) */
    int64_t depth4 = k_end - k0, full = depth4 / VN, strip_bytes = rows * 64;
    for (; s + 4 <= s_hi && n0 + 16 * s + 64 <= N; s += 4) {
        char *out = (char *)(dst + s * rows * 16 * VN);
        for (int64_t r = 0; r < full; r++)
            dse_pack_row4(B, ldb, k0 + r * VN, n0 + 16 * s, out + r * 64, strip_bytes);
        for (int j = 0; j < 4; j++) {
            TIN *row = (TIN *)(out + j * strip_bytes + full * 64);
            memset(row, 0, (size_t)(rows - full) * 64);
            for (int v = 0; full * VN + v < depth4; v++) {
                const TIN *src = B + (k0 + full * VN + v) * ldb + n0 + 16 * (s + j);
                for (int n = 0; n < 16; n++) row[n * VN + v] = src[n];
            }
#if COMP
            dse_strip_sums(out + j * strip_bytes, (depth4 + VN - 1) / VN, kc,
                           comp + 16 * (s + j), comp_stride);
#endif
        }
    }
#endif
    for (; s < s_hi; s++) {
        TIN *strip = dst + s * rows * 16 * VN;
        int64_t col0 = n0 + 16 * s;
        memset(strip, 0, (size_t)rows * 16 * VN * sizeof(TIN));
        int64_t width = N - col0 < 16 ? N - col0 : 16, depth = k_end - k0;
        int64_t r = 0;  /* the VNNI rows done by whole 16 x 64-byte chunks */
        if (width == 16)
            for (; (r + 16) * VN <= depth; r += 16)
                dse_pack_chunk(B, ldb, k0 + r * VN, col0, (char *)(strip + r * 16 * VN));
#if B_COL
        /* B stored N x K: a VNNI group of a column (VN values, 4 bytes) is contiguous */
        for (int64_t n = 0; n < width; n++) {
            const TIN *src = B + (col0 + n) * ldb + k0;
            char *out = (char *)strip + n * 4;
            int64_t g = r;
            for (; (g + 1) * VN <= depth; g++) memcpy(out + g * 64, src + g * VN, 4);
            if (g * VN < depth)
                memcpy(out + g * 64, src + g * VN, (depth - g * VN) * sizeof(TIN));
        }
#else
        for (; r * VN < depth; r++) {
            TIN *row = strip + r * 16 * VN;
            for (int v = 0; v < VN && r * VN + v < depth; v++) {
                const TIN *src = B + (k0 + r * VN + v) * ldb + col0;
                for (int64_t n = 0; n < width; n++) row[n * VN + v] = src[n];
            }
        }
#endif
#if COMP
        dse_strip_sums((const char *)strip, (depth + VN - 1) / VN, kc, comp + 16 * s,
                       comp_stride);
#else
        (void)comp; (void)comp_stride;
#endif
    }
}

static void dse_pack_a(const TIN *A, int64_t lda, int64_t M, int64_t K, int64_t r0,
                       int64_t mc_pad, int64_t k0, int64_t kc, TIN *dst) {
    int64_t nk = (kc + KT - 1) / KT;
    for (int64_t st = 0; st < mc_pad / 16; st++)
        for (int64_t kk = 0; kk < nk; kk++) {
            TIN *tile = dst + (st * nk + kk) * 16 * KT;
            for (int r = 0; r < 16; r++) {
                int64_t row = r0 + 16 * st + r, col = k0 + kk * KT;
                int64_t valid = row >= M ? 0 : (K - col < KT ? K - col : KT);
                if (kk * KT + valid > kc) valid = kc - kk * KT;
                if (valid > 0) memcpy(tile + r * KT, A + row * lda + col, valid * sizeof(TIN));
                if (valid < KT) memset(tile + r * KT + (valid > 0 ? valid : 0), 0,
                                       (KT - (valid > 0 ? valid : 0)) * sizeof(TIN));
            }
        }
}
"""

DRIVER = r"""
static int64_t dse_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* The block loops of one thread over its region [m0, m1) x [n0, n1) of C. */
static void dse_region(const TIN *A, int64_t lda, const TIN *B, int64_t ldb, TOUT *C,
                       int64_t ldc, int64_t M, int64_t N, int64_t K, int64_t m0, int64_t m1,
                       int64_t n0, int64_t n1, const char *bp, int64_t bp_strip,
                       const int32_t *comp_all, int64_t comp_stride, int tid) {
    const int64_t grow = ROWS * GR, gcol = 16 * GC;
    size_t a_bytes = (size_t)dse_round_up(dse_round_up(MC, grow), 16) * KC * sizeof(TIN) + 4096;
    size_t b_bytes = (size_t)dse_round_up(NC, gcol) * dse_round_up(KC, KT) * sizeof(TIN) + 4096;
    char *abuf = PACK_A ? dse_buffer(1 + 3 * tid, a_bytes) : 0;
    char *bbuf = PACK_B_BLOCK ? dse_buffer(2 + 3 * tid, b_bytes) : 0;
    int32_t *cbuf = COMP && PACK_B_BLOCK
        ? dse_buffer(3 + 3 * tid, (size_t)dse_round_up(NC, gcol) * sizeof(int32_t)) : 0;
    int64_t outer_lo = B_BLOCK ? n0 : m0, outer_hi = B_BLOCK ? n1 : m1;
    int64_t outer_step = B_BLOCK ? NC : MC;
    for (int64_t o = outer_lo; o < outer_hi; o += outer_step)
    for (int64_t pc = 0; pc < K; pc += KC) {
        int64_t kc = K - pc < KC ? K - pc : KC, nk = (kc + KT - 1) / KT;
        int64_t inner_lo = B_BLOCK ? m0 : n0, inner_hi = B_BLOCK ? m1 : n1;
        int64_t inner_step = B_BLOCK ? MC : NC;
        for (int64_t in = inner_lo; in < inner_hi; in += inner_step) {
            int64_t ic = B_BLOCK ? in : o, jc = B_BLOCK ? o : in;
            int64_t mc = m1 - ic < MC ? m1 - ic : MC;
            int64_t nc = n1 - jc < NC ? n1 - jc : NC;
            int64_t mc_pad = dse_round_up(mc, grow), nc_pad = dse_round_up(nc, gcol);
            const char *b, *a;
            const int32_t *comp = 0;
            int64_t b_ss, a_ss, a_ks, a_ts;
            if (PACK_B_BLOCK && !bp) {
                /* packed once per B block: in b_block order only where the block changes */
                if (!B_BLOCK || in == inner_lo)
                    dse_pack_b(B, ldb, K, N, pc, kc, jc, 0, nc_pad / 16, (TIN *)bbuf, cbuf, 0);
                b = bbuf;
                b_ss = nk * 1024;
                comp = cbuf;
            } else {
                b = bp + (jc / 16) * bp_strip + (pc / KT) * 1024;
                b_ss = bp_strip;
                if (COMP) comp = comp_all + (pc / KC) * comp_stride + jc;
            }
            if (PACK_A) {
                if (B_BLOCK || jc == inner_lo)
                    dse_pack_a(A, lda, M, K, ic, dse_round_up(mc_pad, 16), pc, kc, (TIN *)abuf);
                a = abuf; a_ss = nk * 1024; a_ks = 1024; a_ts = 64;
            } else {
                a = (const char *)(A + ic * lda + pc);
                a_ss = 16 * lda * (int64_t)sizeof(TIN); a_ks = KT * (int64_t)sizeof(TIN);
                a_ts = lda * (int64_t)sizeof(TIN);
            }
            int first = pc == 0;
            if (A_STRIP) {
                for (int64_t ir = 0; ir < mc_pad; ir += grow)
                    for (int64_t jr = 0; jr < nc_pad; jr += gcol) {
                        int64_t nr = jr + gcol < nc_pad ? ir : ir + grow;
                        int64_t nj = jr + gcol < nc_pad ? jr + gcol : 0;
                        const TOUT *next = ic + nr < M ? C + (ic + nr) * ldc + jc + nj : 0;
                        dse_micro(a, ir, a_ss, a_ks, a_ts, b, jr, b_ss, comp, nk, C, ldc,
                                  ic + ir, jc + jr, m1, n1, first, next);
                    }
            } else {
                for (int64_t jr = 0; jr < nc_pad; jr += gcol)
                    for (int64_t ir = 0; ir < mc_pad; ir += grow) {
                        int64_t nr = ir + grow < mc_pad ? ir + grow : 0;
                        int64_t nj = ir + grow < mc_pad ? jr : jr + gcol;
                        const TOUT *next = ic + nr < M && jc + nj < N
                            ? C + (ic + nr) * ldc + jc + nj : 0;
                        dse_micro(a, ir, a_ss, a_ks, a_ts, b, jr, b_ss, comp, nk, C, ldc,
                                  ic + ir, jc + jr, m1, n1, first, next);
                    }
            }
        }
    }
}

#define MAX_THREADS 80  /* each thread's buffers take 3 of dse_buffer's slots (255: B's sums) */

/* C = A @ B with B as it lies (``packed`` null) or packed by dse_pack (B unused). */
static int dse_gemm_on(int64_t M, int64_t N, int64_t K, const TIN *A, int64_t lda,
                       const TIN *B, int64_t ldb, TOUT *C, int64_t ldc, const char *packed) {
    const int64_t grow = ROWS * GR, gcol = (PACK_B_NONE ? 1 : 16) * GC;
    int threads = dse_threads < MAX_THREADS ? dse_threads : MAX_THREADS;
    /* the split: a tm x tn grid of thread regions, each a whole number of micro-tile grids */
    int tm = SPLIT_M ? threads : 1, tn = SPLIT_N ? threads : 1;
    if (SPLIT_M && SPLIT_N) {  /* the most square factorisation */
        for (int d = 1; d * d <= threads; d++) if (threads % d == 0) tm = d;
        tn = threads / tm;
    }
    int64_t m_share = dse_round_up((M + tm - 1) / tm, grow);
    int64_t n_share = dse_round_up((N + tn - 1) / tn, gcol);
    int64_t strips = dse_round_up(N, gcol) / 16;
    int64_t bp_strip = dse_round_up(K, KT) / VN * 16 * VN * (int64_t)sizeof(TIN);
    int pack = PACK_B_GEMM && !packed;
    char *own = pack ? dse_buffer(0, (size_t)(strips * bp_strip) + 4096) : 0;
    const char *bp = packed ? packed : own;
    int64_t comp_stride = strips * 16;
    int32_t *comp_all = COMP && pack
        ? dse_buffer(255, (size_t)((K + KC - 1) / KC * comp_stride) * sizeof(int32_t)) : 0;
    if (pack && (!own || (COMP && !comp_all))) return 2;
    #pragma omp parallel num_threads(threads)
    {
        int tid = omp_get_thread_num(), nt = omp_get_num_threads();
        if (pack) {
            int64_t lo = strips * tid / nt, hi = strips * (tid + 1) / nt;
            dse_pack_b(B, ldb, K, N, 0, K, 0, lo, hi, (TIN *)own, comp_all, comp_stride);
            #pragma omp barrier
        }
        if (!AVX512) TILE_CONFIG();
        for (int r = tid; r < tm * tn; r += nt) {
            int64_t m0 = (r / tn) * m_share, n0 = (r % tn) * n_share;
            int64_t m1 = m0 + m_share < M ? m0 + m_share : M;
            int64_t n1 = n0 + n_share < N ? n0 + n_share : N;
            if (m0 >= m1 || n0 >= n1) continue;
#if PACK_B_NONE
            dse_dot_region(A, lda, B, ldb, C, ldc, K, m0, m1, n0, n1);
#else
            dse_region(A, lda, B, ldb, C, ldc, M, N, K, m0, m1, n0, n1, bp, bp_strip,
                       comp_all, comp_stride, tid);
#endif
        }
        if (!AVX512) TRELEASE();
    }
    return 0;
}

/* C = A @ B for row-major A (M x K, lda), B (K x N, ldb), C (M x N, ldc); 0 on success. */
int dse_gemm(int64_t M, int64_t N, int64_t K, const TIN *A, int64_t lda, const TIN *B,
             int64_t ldb, TOUT *C, int64_t ldc) {
    if (M < 1 || N < 1 || K < 1 || !A || !B || !C || lda < K || ldb < (B_COL ? K : N)
        || ldc < N) return 1;
    return dse_gemm_on(M, N, K, A, lda, B, ldb, C, ldc, 0);
}

/* B packed once for many calls: each 16-column strip of a row-major B in VNNI for all of K,
 * as pack_b=gemm lays it out per call, with 3 zero strips past N (a grid of up to 4 tile
 * columns reads whole grids); dse_packed_bytes(K, N) bytes at dst. 0 on success; 3 from a
 * kernel that packs otherwise (B stored N x K, or the AVX-512 int8 kernels, which also take
 * B's column sums per K block). */
int64_t dse_packed_bytes(int64_t K, int64_t N) {
    return ((N + 15) / 16 + 3) * (dse_round_up(K, KT) / VN * 16 * VN * (int64_t)sizeof(TIN));
}

int dse_pack(int64_t K, int64_t N, const TIN *B, int64_t ldb, char *dst) {
    if (B_COL || COMP) return 3;
    if (K < 1 || N < 1 || !B || !dst || ldb < N) return 1;
    int threads = dse_threads < MAX_THREADS ? dse_threads : MAX_THREADS;
    int64_t strips = (N + 15) / 16 + 3;
    #pragma omp parallel for num_threads(threads)
    for (int64_t s = 0; s < strips; s++)
        dse_pack_b(B, ldb, K, N, 0, K, 0, s, s + 1, (TIN *)dst, 0, 0);
    return 0;
}

/* C = A @ B with B packed by dse_pack (of any AMX kernel of this dtype); 3 from a kernel
 * that cannot read it (the AVX-512 ones, pack_b=none, B stored N x K). */
int dse_gemm_prepacked(int64_t M, int64_t N, int64_t K, const TIN *A, int64_t lda,
                       const char *packed, TOUT *C, int64_t ldc) {
    if (AVX512 || PACK_B_NONE || B_COL) return 3;
    if (M < 1 || N < 1 || K < 1 || !A || !packed || !C || lda < K || ldc < N) return 1;
    return dse_gemm_on(M, N, K, A, lda, 0, N, C, ldc, packed);
}
"""


# every kernel's threads (dse_set_threads, after its header's THREADS) and the harness's timer
# (after its dse_gemm), whatever computes the product between them
THREAD_SETTING = r"""static int dse_threads = THREADS;

void dse_set_threads(int n) { dse_threads = n > 0 ? n : THREADS; }
"""
TIMER = r"""
/* Seconds of ``repeats`` calls of dse_gemm (the harness's timer; negative on an error). */
double dse_time(int64_t M, int64_t N, int64_t K, const TIN *A, int64_t lda, const TIN *B,
                int64_t ldb, TOUT *C, int64_t ldc, int repeats) {
    double start = dse_now();
    for (int i = 0; i < repeats; i++)
        if (dse_gemm(M, N, K, A, lda, B, ldb, C, ldc)) return -1.0;
    return (dse_now() - start) / repeats;
}
"""


def kernel_source(params: Mapping[str, Any], dtype: str, b_layout: str = "row",
                  emulate: bool = False) -> str:
    """The complete C source of ``params`` (a decoded ``amx_gemm`` config) for ``dtype``
    (``int8-int32`` or ``bf16-fp32``) with B stored ``row`` (K x N) or ``col`` (N x K, a
    weight as PyTorch stores it); ``emulate`` computes the tile instructions in C."""
    code = DTYPES[dtype]
    p = params
    split = str(p["split"])
    vector = p.get("engine", "amx") == "avx512"
    defines = {
        "TIN": code.c_in, "TOUT": code.c_out, "KT": code.kt, "VN": code.vnni,
        "GR": int(p["grid_rows"]), "GC": int(p["grid_cols"]),
        "MC": int(p["mc"]), "KC": int(p["kc"]), "NC": int(p["nc"]),
        "PACK_A": int(p["pack_a"] == "yes"), "PACK_B_BLOCK": int(p["pack_b"] == "block"),
        "PACK_B_GEMM": int(p["pack_b"] == "gemm"), "PACK_B_NONE": int(p["pack_b"] == "none"),
        "B_BLOCK": int(p["block_order"] == "b_block"),
        "A_STRIP": int(p["micro_order"] == "a_strip"),
        "SPLIT_M": int(split in ("m", "mn")), "SPLIT_N": int(split in ("n", "mn")),
        "THREADS": int(p["threads"]), "B_COL": int(b_layout == "col"),
        "AVX512": int(vector), "ROWS": 1 if vector else 16,
        "COMP": int(vector and code.c_in == "int8_t"),
    }
    head = ["/* dse amx_gemm kernel: " + ", ".join(f"{k}={p[k]}" for k in sorted(p))
            + f"; {dtype}, B {b_layout} */"]
    if emulate:
        head.append("#define DSE_AMX_EMULATE 1")
    if vector:
        head.append("#define DSE_NO_TILES 1")
    head.append(support_text())
    head.append("#include <omp.h>")
    head += [f"#define {name} {value}" for name, value in defines.items()]
    head.append(THREAD_SETTING)
    if p["pack_b"] == "stream":  # the streaming kernels: no blocks, grids or packing of B
        return "\n".join([*head, stream_kernel(int(p["kc"]), int(p["nc"]),
                                                code.c_in == "int8_t", tiles=not vector,
                                                k_outer=p["block_order"] == "a_block"),
                           TIMER])
    micro = _vector_kernel(p, code) if vector else _micro_kernel(p, code)
    if p["pack_b"] == "none":
        micro += "\n" + _dot_kernel(p, code)
    return "\n".join([*head, C_EDGES, PACKING, micro, DRIVER, TIMER])
