"""The library's streaming kernels for a row-major B (AVX-512 VNNI / BF16): on a CPU without AMX
they serve every GEMM of the library (decode shapes first of all).

A decode GEMM (M of 1 to a few dozen) is bound by reading B once. The space's kernels re-lay a
row-major B out to VNNI in memory first (``pack_b=gemm`` or ``block``): B read, written and read
again, which costs more than the product; its in-place kernels (``pack_b=none``) need B stored
N x K. These read a row-major B in place and re-lay it out in registers: per 4 K rows (int8) or
2 (bf16) of a 64-column chunk, the rows' 64-byte pieces are interleaved by byte or word unpacks
into the VNNI groups ``VPDPBUSD`` / ``VDPBF16PS`` take, each unpack's lanes holding columns in a
fixed permuted order that a 4x4 transpose of 128-bit lanes undoes when C is stored. int8 flips
B's sign bit (B + 128 as the unsigned operand, A broadcast as the signed one) and takes 128 x A's
row sums off, so no column sums of B are needed. K is walked in blocks of ``STREAM_KB`` rows
(half as many for bf16): per block, ``STREAM_WIDE`` chunks (M <= 4; half as many above) are
re-laid out once into a per-thread buffer that stays in L1 or L2, each row's chunks read
together (rows of a large B are pages apart: 64 bytes a row at a time would cost a DRAM page
each, and rows read again from B share cache sets and would not stay even in L2); the
chunks' row groups of 4 then read the buffer. Between blocks a whole chunk's partial sums wait
in C in the accumulators' order (no lane transposes); the rows ``STREAM_PF`` ahead are
prefetched (the hardware prefetchers stop at pages). The columns are split over the threads in
64-column chunks; a product of under ``STREAM_SMALL`` multiply-adds runs on one thread (a fork
and join would cost more than it).

Exported (B row-major, every leading dimension honoured; the caller checks the arguments)::

    int dse_stream_s8s8s32(int64_t M, int64_t N, int64_t K, const int8_t *A, int64_t lda,
                           const int8_t *B, int64_t ldb, int32_t *C, int64_t ldc, int threads);
    int dse_stream_bf16bf16f32(/* the same with uint16_t A, B and float C */);

A weight used by many calls can be packed once, every block laid out as a call lays it out
(one 64-column chunk after another, its groups over every K row, a last partial group padded
with zero rows); the ``_packed`` calls read it where it lies and skip the re-layout::

    void *dse_stream_pack_s8(int64_t K, int64_t N, const int8_t *B, int64_t ldb, int threads);
    void *dse_stream_pack_bf16(/* the same with uint16_t B */);
    void dse_stream_packed_free(void *packed);
    int dse_stream_s8s8s32_packed(int64_t M, const void *packed, const int8_t *A, int64_t lda,
                                  int32_t *C, int64_t ldc, int threads);
    int dse_stream_bf16bf16f32_packed(/* the same with uint16_t A and float C */);

With AMX a library packs a weight in the AMX kernels' layout instead (strips of 16 columns in
VNNI over all of K, ``dse_pack``), and the ``_vnni`` calls stream that: each chunk's 4 strips
read a VNNI row at a time, already in C's column order (no lane transposes), int8's sign bit
flipped as it is loaded::

    int dse_stream_s8s8s32_vnni(int64_t M, int64_t N, int64_t K, const int8_t *A, int64_t lda,
                                const char *vnni, int32_t *C, int64_t ldc, int threads);
    int dse_stream_bf16bf16f32_vnni(/* the same with uint16_t A and float C */);

With ``tiles`` (a config's ``engine=amx``), AMX tiles multiply the same buffer
(:mod:`.amx_stream_tiles`).
"""

from __future__ import annotations

from evaluators.hardware.amx_stream_tiles import SYMBOLS as TILES_SYMBOLS
from evaluators.hardware.amx_stream_tiles import tiles_source

STREAM_KB = 256  # int8 K rows of a block (a multiple of 4; bf16 half): 2 chunks re-laid, 32 KiB
STREAM_PF = 16  # rows of B prefetched ahead
STREAM_WIDE = 4  # 64-column chunks re-laid out together for M <= 4 (each row's 256 bytes read
# at once); half as many for more rows, whose groups read the buffer again (it stays in L1)
STREAM_SMALL = 1 << 20  # multiply-adds under which one thread does the whole product

STREAM_SOURCE = r"""
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <omp.h>
#include <stdlib.h>

#define KB {kb}
#define GROUPS (KB / 4)  /* groups of a block: 4 int8 rows, or 2 bf16 rows of a half block */
#define WIDE {wide}
#define COMMA_SUMS , sums + i
#define PF {pf}
#define SMALL {small}
#define INLINE static inline __attribute__((always_inline))

/* 16-column masks of a chunk w columns wide */
INLINE __mmask16 cols16(int w, int q) {{
    int left = w - 16 * q;
    return left <= 0 ? 0 : left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1);
}}

/* int8: unpacked lane L of vector q holds columns 16L + 4q .. +3: a 4x4 lane transpose swaps
 * that order and C's (it is its own inverse) */
INLINE void lanes4(__m512i v[4]) {{
    __m512i x0 = _mm512_shuffle_i32x4(v[0], v[1], 0x44);
    __m512i x1 = _mm512_shuffle_i32x4(v[0], v[1], 0xEE);
    __m512i x2 = _mm512_shuffle_i32x4(v[2], v[3], 0x44);
    __m512i x3 = _mm512_shuffle_i32x4(v[2], v[3], 0xEE);
    v[0] = _mm512_shuffle_i32x4(x0, x2, 0x88); v[1] = _mm512_shuffle_i32x4(x0, x2, 0xDD);
    v[2] = _mm512_shuffle_i32x4(x1, x3, 0x88); v[3] = _mm512_shuffle_i32x4(x1, x3, 0xDD);
}}

{s8_groups}
/* bf16: a row's 64 columns are two 32-column vectors; unpacked vector q (of 4) lane L holds
 * columns 32 (q / 2) + 8L + 4 (q % 2) .. +3 */
INLINE void to_c(__m512 v[4]) {{
    for (int h = 0; h < 4; h += 2) {{
        __m512 lo = _mm512_shuffle_f32x4(v[h], v[h + 1], 0x44);
        __m512 hi = _mm512_shuffle_f32x4(v[h], v[h + 1], 0xEE);
        v[h] = _mm512_shuffle_f32x4(lo, lo, 0xD8);
        v[h + 1] = _mm512_shuffle_f32x4(hi, hi, 0xD8);
    }}
}}

INLINE void from_c(__m512 v[4]) {{
    for (int h = 0; h < 4; h += 2) {{
        __m512 a = _mm512_shuffle_f32x4(v[h], v[h + 1], 0x88);
        __m512 b = _mm512_shuffle_f32x4(v[h], v[h + 1], 0xDD);
        v[h] = a;
        v[h + 1] = b;
    }}
}}

{bf_groups}
/* A block of K rows of up to WIDE 64-column chunks of B, re-laid out once into a buffer the
 * chunks' row groups then read (from L1 or L2): each row's WIDE x 64 bytes are read together
 * (rows of B are pages apart: a row read 64 bytes at a time would cost a DRAM page opening per
 * line), and a B read again row by row would not stay even in L2 (the rows share cache sets).
 * Chunk c's groups start at buf + c * GROUPS * 4 (the whole B packed once: one chunk at a
 * time, its groups over every K row); a last group of fewer rows than 4 (int8) or 2 (bf16) is
 * laid out with zero rows (A's values past K are zero too). */
#define ROW(k, i, k1, load) ((k) + (i) < (k1) ? (load) : _mm512_setzero_si512())
INLINE void s8_lay(
        const int8_t *B, int64_t ldb, int64_t j, int64_t width, int64_t k0, int64_t k1,
        __m512i *buf, char flip) {{
    const __m512i bias = _mm512_set1_epi8(flip);
    int chunks = (int)((width + 63) / 64);
    for (int64_t k = k0, g = 0; k < k1; k += 4, g++) {{
        for (int c = 0; c < chunks; c++) {{
            int64_t w = width - 64 * c;
            const __mmask64 lm = w >= 64 ? ~0ULL : (1ULL << w) - 1;
            const int8_t *b = B + k * ldb + j + 64 * c;
            _mm_prefetch((const char *)(b + PF * ldb), _MM_HINT_T0);
            _mm_prefetch((const char *)(b + (PF + 1) * ldb), _MM_HINT_T0);
            _mm_prefetch((const char *)(b + (PF + 2) * ldb), _MM_HINT_T0);
            _mm_prefetch((const char *)(b + (PF + 3) * ldb), _MM_HINT_T0);
            __m512i r0 = _mm512_xor_si512(_mm512_maskz_loadu_epi8(lm, b), bias);
            __m512i r1 = _mm512_xor_si512(
                ROW(k, 1, k1, _mm512_maskz_loadu_epi8(lm, b + ldb)), bias);
            __m512i r2 = _mm512_xor_si512(
                ROW(k, 2, k1, _mm512_maskz_loadu_epi8(lm, b + 2 * ldb)), bias);
            __m512i r3 = _mm512_xor_si512(
                ROW(k, 3, k1, _mm512_maskz_loadu_epi8(lm, b + 3 * ldb)), bias);
            __m512i t0 = _mm512_unpacklo_epi8(r0, r1), t1 = _mm512_unpackhi_epi8(r0, r1);
            __m512i t2 = _mm512_unpacklo_epi8(r2, r3), t3 = _mm512_unpackhi_epi8(r2, r3);
            __m512i *out = buf + (c * GROUPS + g) * 4;
            _mm512_store_si512(out, _mm512_unpacklo_epi16(t0, t2));
            _mm512_store_si512(out + 1, _mm512_unpackhi_epi16(t0, t2));
            _mm512_store_si512(out + 2, _mm512_unpacklo_epi16(t1, t3));
            _mm512_store_si512(out + 3, _mm512_unpackhi_epi16(t1, t3));
        }}
    }}
}}

/* B + 128, the unsigned operand of VPDPBUSD */
static void s8_pack(const int8_t *B, int64_t ldb, int64_t j, int64_t width, int64_t k0,
                    int64_t k1, __m512i *buf) {{
    s8_lay(B, ldb, j, width, k0, k1, buf, (char)0x80);
}}

static void bf_pack(const uint16_t *B, int64_t ldb, int64_t j, int64_t width, int64_t k0,
                    int64_t k1, __m512i *buf) {{
    int chunks = (int)((width + 63) / 64);
    for (int64_t k = k0, g = 0; k < k1; k += 2, g++) {{
        for (int c = 0; c < chunks; c++) {{
            int64_t w = width - 64 * c;
            const __mmask32 ma = w >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << w) - 1);
            const __mmask32 mb = w >= 64 ? 0xFFFFFFFFu
                                         : w <= 32 ? 0 : (__mmask32)((1u << (w - 32)) - 1);
            const uint16_t *b = B + k * ldb + j + 64 * c;
            _mm_prefetch((const char *)(b + PF * ldb), _MM_HINT_T0);
            _mm_prefetch((const char *)(b + PF * ldb + 32), _MM_HINT_T0);
            _mm_prefetch((const char *)(b + (PF + 1) * ldb), _MM_HINT_T0);
            _mm_prefetch((const char *)(b + (PF + 1) * ldb + 32), _MM_HINT_T0);
            __m512i r0a = _mm512_maskz_loadu_epi16(ma, b);
            __m512i r0b = _mm512_maskz_loadu_epi16(mb, b + 32);
            __m512i r1a = ROW(k, 1, k1, _mm512_maskz_loadu_epi16(ma, b + ldb));
            __m512i r1b = ROW(k, 1, k1, _mm512_maskz_loadu_epi16(mb, b + ldb + 32));
            __m512i *out = buf + (c * GROUPS + g) * 4;
            _mm512_store_si512(out, _mm512_unpacklo_epi16(r0a, r1a));
            _mm512_store_si512(out + 1, _mm512_unpackhi_epi16(r0a, r1a));
            _mm512_store_si512(out + 2, _mm512_unpacklo_epi16(r0b, r1b));
            _mm512_store_si512(out + 3, _mm512_unpackhi_epi16(r0b, r1b));
        }}
    }}
}}

/* the threads to use: one for a small product, never more than there are chunks */
static int stream_threads(int64_t M, int64_t N, int64_t K, int threads) {{
    int64_t chunks = (N + 63) / 64;
    if (M * N * K < SMALL) return 1;
    return threads < chunks ? threads : (int)chunks;
}}

/* The row groups of 4 of A (and the rest) against chunk j's block [k0, k1) at ``packed``
 * (``stride``: vectors between a group's strips in the AMX kernels' layout, unused otherwise) */
#define ROW_GROUPS(group, packed, ...)                                                      \
    {{                                                                                      \
        int64_t i = 0;                                                                      \
        for (; i + 4 <= M; i += 4)                                                          \
            group##4(A + i * lda, lda, C + i * ldc, ldc, j, w, k0, k1,                      \
                     k1 == K __VA_ARGS__, packed, stride);                                  \
        switch (M - i) {{                                                                   \
        case 3: group##3(A + i * lda, lda, C + i * ldc, ldc, j, w, k0, k1,                  \
                          k1 == K __VA_ARGS__, packed, stride); break;                      \
        case 2: group##2(A + i * lda, lda, C + i * ldc, ldc, j, w, k0, k1,                  \
                          k1 == K __VA_ARGS__, packed, stride); break;                      \
        case 1: group##1(A + i * lda, lda, C + i * ldc, ldc, j, w, k0, k1,                  \
                          k1 == K __VA_ARGS__, packed, stride); break;                      \
        }}                                                                                  \
    }}

/* The statements after ``n`` on each thread of a team of ``n``, as thread ``t`` of ``nt``; a
 * team of one runs them without OpenMP (a parallel region of one thread still sets a team up,
 * which cost a small call 0.6 us, more than a whole 1 x 3 x 5 product takes) */
#define TEAM(n, ...)                                                                        \
    {{                                                                                      \
        int team = (n);                                                                     \
        if (team == 1) {{                                                                   \
            const int t = 0, nt = 1;                                                        \
            __VA_ARGS__                                                                     \
        }} else {{                                                                          \
            _Pragma("omp parallel num_threads(team)")                                       \
            {{                                                                              \
                int t = omp_get_thread_num(), nt = omp_get_num_threads();                  \
                __VA_ARGS__                                                                 \
            }}                                                                              \
        }}                                                                                  \
    }}

/* Each thread a share of the 64-column chunks; per block of K rows (KB int8, KB / 2 bf16) and
 * WIDE chunks: the block re-laid out, then each chunk's row groups. */
#define DRIVER(pack, group, rows_per_block, SUMS)                                           \
    int64_t chunks = (N + 63) / 64;                                                         \
    TEAM(stream_threads(M, N, K, threads),                                                  \
        int64_t lo = chunks * t / nt, hi = chunks * (t + 1) / nt;                           \
        __m512i *buf = dse_stream_buffer(t);                                                 \
        const int64_t stride = 0;                                                           \
        int64_t wide = M <= 4 || WIDE < 2 ? WIDE : WIDE / 2; /* M <= 4: B read once */  \
        for (int64_t k0 = 0; k0 < K; k0 += rows_per_block) {{                                \
            int64_t k1 = k0 + rows_per_block < K ? k0 + rows_per_block : K;                 \
            for (int64_t c0 = lo; c0 < hi; c0 += wide) {{                                    \
                int64_t c1 = c0 + wide < hi ? c0 + wide : hi;                               \
                int64_t right = 64 * c1 < N ? 64 * c1 : N;                                  \
                pack(B, ldb, 64 * c0, right - 64 * c0, k0, k1, buf);                        \
                for (int64_t c = c0; c < c1; c++) {{                                         \
                    int64_t j = 64 * c;                                                     \
                    int w = N - j < 64 ? (int)(N - j) : 64;                                 \
                    const __m512i *packed = buf + (c - c0) * GROUPS * 4;                    \
                    ROW_GROUPS(group, packed, SUMS)                                         \
                }}                                                                          \
            }}                                                                              \
        }}                                                                                  \
    )

/* The same on a B packed once: each chunk's block read where the packing put it (``at``: its
 * first vector, of c and k0; ``stride``: the row groups' stride). */
#define PACKED_DRIVER(group, rows_per_block, at, stride_of, SUMS)                            \
    int64_t chunks = (N + 63) / 64;                                                         \
    const int64_t stride = stride_of;                                                       \
    TEAM(stream_threads(M, N, K, threads),                                                  \
        int64_t lo = chunks * t / nt, hi = chunks * (t + 1) / nt;                           \
        for (int64_t k0 = 0; k0 < K; k0 += rows_per_block) {{                                \
            int64_t k1 = k0 + rows_per_block < K ? k0 + rows_per_block : K;                 \
            for (int64_t c = lo; c < hi; c++) {{                                             \
                int64_t j = 64 * c;                                                         \
                int w = N - j < 64 ? (int)(N - j) : 64;                                     \
                const __m512i *packed = at;                                                 \
                ROW_GROUPS(group, packed, SUMS)                                             \
            }}                                                                              \
        }}                                                                                  \
    )

/* each thread's buffer (WIDE chunks x GROUPS groups x 4 vectors), kept between calls */
#define MAX_THREADS 256
static __m512i *dse_stream_buffer(int t) {{
    static __m512i *buffers[MAX_THREADS];
    if (!buffers[t % MAX_THREADS])
        buffers[t % MAX_THREADS] = aligned_alloc(64, WIDE * GROUPS * 4 * sizeof(__m512i));
    return buffers[t % MAX_THREADS];
}}

/* A's row sums (B + 128 is multiplied, 128 x these come off), in ``local`` when M <= 256 */
static int32_t *row_sums(int64_t M, int64_t K, const int8_t *A, int64_t lda, int32_t *local) {{
    int32_t *sums = M <= 256 ? local : malloc((size_t)M * sizeof(int32_t));
    if (!sums) return NULL;
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t r = 0; r < M; r++) {{
        __m512i s = _mm512_setzero_si512();
        for (int64_t k = 0; k < K; k += 64) {{
            __mmask64 m = K - k >= 64 ? ~0ULL : (1ULL << (K - k)) - 1;
            s = _mm512_dpbusd_epi32(s, ones, _mm512_maskz_loadu_epi8(m, A + r * lda + k));
        }}
        sums[r] = _mm512_reduce_add_epi32(s);
    }}
    return sums;
}}

int dse_stream_s8s8s32(int64_t M, int64_t N, int64_t K, const int8_t *A, int64_t lda,
                       const int8_t *B, int64_t ldb, int32_t *C, int64_t ldc, int threads) {{
    int32_t local[256], *sums = row_sums(M, K, A, lda, local);
    if (!sums) return 2;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    DRIVER(s8_pack, s8_group, KB, COMMA_SUMS)
    if (sums != local) free(sums);
    return 0;
}}

int dse_stream_bf16bf16f32(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                           const uint16_t *B, int64_t ldb, float *C, int64_t ldc,
                           int threads) {{
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    DRIVER(bf_pack, bf_group, KB / 2, )
    return 0;
}}

/* A B packed once: per 64-column chunk, its groups over every K row (see s8_pack) */
typedef struct {{
    int64_t K, N, groups;
    __m512i *data;
}} dse_stream_packed;

static dse_stream_packed *packed_new(int64_t K, int64_t N, int64_t groups) {{
    dse_stream_packed *p = malloc(sizeof *p);
    if (!p) return NULL;
    size_t bytes = (size_t)((N + 63) / 64) * (size_t)groups * 4 * sizeof(__m512i);
    p->data = aligned_alloc(64, bytes);
    if (!p->data) {{ free(p); return NULL; }}
    p->K = K; p->N = N; p->groups = groups;
    return p;
}}

void *dse_stream_pack_s8(int64_t K, int64_t N, const int8_t *B, int64_t ldb, int threads) {{
    dse_stream_packed *p = packed_new(K, N, (K + 3) / 4);
    if (!p) return NULL;
    #pragma omp parallel for num_threads(threads < 1 ? 1 : threads)
    for (int64_t c = 0; c < (N + 63) / 64; c++)
        s8_pack(B, ldb, 64 * c, N - 64 * c < 64 ? N - 64 * c : 64, 0, K,
                p->data + c * p->groups * 4);
    return p;
}}

void *dse_stream_pack_bf16(int64_t K, int64_t N, const uint16_t *B, int64_t ldb,
                           int threads) {{
    dse_stream_packed *p = packed_new(K, N, (K + 1) / 2);
    if (!p) return NULL;
    #pragma omp parallel for num_threads(threads < 1 ? 1 : threads)
    for (int64_t c = 0; c < (N + 63) / 64; c++)
        bf_pack(B, ldb, 64 * c, N - 64 * c < 64 ? N - 64 * c : 64, 0, K,
                p->data + c * p->groups * 4);
    return p;
}}

/* B packed in the AMX kernels' layout (``vnni``: strips of 16 columns in VNNI over all of K,
 * ``strip`` vectors each, zero rows past K and zero strips past N): a chunk's 4 strips read a
 * VNNI row at a time, in C's column order. */
int dse_stream_s8s8s32_vnni(int64_t M, int64_t N, int64_t K, const int8_t *A, int64_t lda,
                            const char *vnni, int32_t *C, int64_t ldc, int threads) {{
    int64_t strip = (K + 63) / 64 * 16;  /* VNNI rows of 4 K rows, K padded to 64 */
    int32_t local[256], *sums = row_sums(M, K, A, lda, local);
    if (!sums) return 2;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    const __m512i *V = (const __m512i *)vnni;
    PACKED_DRIVER(s8_vgroup, KB, V + 4 * c * strip + k0 / 4, strip, COMMA_SUMS)
    if (sums != local) free(sums);
    return 0;
}}

int dse_stream_bf16bf16f32_vnni(int64_t M, int64_t N, int64_t K, const uint16_t *A,
                                int64_t lda, const char *vnni, float *C, int64_t ldc,
                                int threads) {{
    int64_t strip = (K + 31) / 32 * 16;  /* VNNI rows of 2 K rows, K padded to 32 */
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    const __m512i *V = (const __m512i *)vnni;
    PACKED_DRIVER(bf_vgroup, KB / 2, V + 4 * c * strip + k0 / 2, strip, )
    return 0;
}}

void dse_stream_packed_free(void *packed) {{
    dse_stream_packed *p = packed;
    if (p) {{ free(p->data); free(p); }}
}}

int dse_stream_s8s8s32_packed(int64_t M, const void *packed, const int8_t *A, int64_t lda,
                              int32_t *C, int64_t ldc, int threads) {{
    const dse_stream_packed *P = packed;
    int64_t N = P->N, K = P->K;
    int32_t local[256], *sums = row_sums(M, K, A, lda, local);
    if (!sums) return 2;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    PACKED_DRIVER(s8_group, KB, P->data + (c * P->groups + k0 / 4) * 4, 0, COMMA_SUMS)
    if (sums != local) free(sums);
    return 0;
}}

int dse_stream_bf16bf16f32_packed(int64_t M, const void *packed, const uint16_t *A,
                                  int64_t lda, float *C, int64_t ldc, int threads) {{
    const dse_stream_packed *P = packed;
    int64_t N = P->N, K = P->K;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    PACKED_DRIVER(bf_group, KB / 2, P->data + (c * P->groups + k0 / 2) * 4, 0, )
    return 0;
}}
"""


# what the int8 and bf16 row groups differ in: C's element type and its loads and stores, the
# multiply-add, the K rows of a group, the lane reorders of the streaming layout, and how A's
# value for K's last partial group is read (padded with zeros; a whole group's 4 bytes are read
# alike, A_GROUP)
A_GROUP = "memcpy(&v, A + {r} * lda + k, 4);"
GROUP_KINDS = {
    "s8": dict(a="int8_t", c="int32_t", vec="__m512i", kstep=4,
               load="_mm512_loadu_si512", masked_load="_mm512_maskz_loadu_epi32",
               store="_mm512_storeu_si512", masked_store="_mm512_mask_storeu_epi32",
               fma="{a} = _mm512_dpbusd_epi32({a}, u{q}, x);", unorder="lanes4", order="lanes4",
               tail="int8_t bytes[4] = {{0, 0, 0, 0}}; for (int i = 0; k + i < k1; i++) "
                    "bytes[i] = A[{r} * lda + k + i]; memcpy(&v, bytes, 4);",
               tail_note="K's last 1 to 3 rows: missing rows, and A past K, are zero"),
    "bf": dict(a="uint16_t", c="float", vec="__m512", kstep=2,
               load="_mm512_loadu_ps", masked_load="_mm512_maskz_loadu_ps",
               store="_mm512_storeu_ps", masked_store="_mm512_mask_storeu_ps",
               fma="{a} = _mm512_dpbf16_ps({a}, (__m512bh)u{q}, (__m512bh)x);",
               unorder="from_c", order="to_c",
               tail="v = (int32_t)A[{r} * lda + k];",
               tail_note="an odd K's last row: its pair's second row and A's are zero"),
}


def _group(kind: str, rows: int, vnni: bool) -> str:
    """``{kind}_group{rows}``: ``rows`` rows of A against a 64-column chunk of B over K rows
    [k0, k1), laid out at ``packed`` as the streaming kernels lay it out (``s8_pack``,
    ``bf_pack``: a group's 4 vectors together, lanes in a permuted column order), the
    accumulators named (generated unrolled, so they stay in registers). With ``vnni``,
    ``{kind}_vgroup{rows}`` on the AMX kernels' layout: a group is a VNNI row of the chunk's 4
    strips, ``stride`` vectors apart, in C's column order; int8 flips B's sign bit as it loads
    (the streaming layout holds B + 128, the unsigned operand of ``VPDPBUSD``)."""
    g = GROUP_KINDS[kind]
    acc = [[f"acc{r}_{q}" for q in range(4)] for r in range(rows)]
    every = [(r, q, a) for r in range(rows) for q, a in enumerate(acc[r])]
    c_at = "C + {r} * ldc + j + {col}"
    sums = ", const int32_t *rowsum" if kind == "s8" else ""
    name = f"{kind}_{'v' if vnni else ''}group{rows}"
    out = [f"static void {name}(const {g['a']} *A, int64_t lda, {g['c']} *C, int64_t ldc, "
           f"int64_t j, int w, int64_t k0, int64_t k1, int last{sums}, const __m512i *packed, "
           "int64_t stride) {",
           f"    {g['vec']} " + ", ".join(a for _, _, a in every) + ";",
           "" if vnni else "    (void)stride;",
           "    if (k0 == 0) {"]
    if kind == "s8":
        for r in range(rows):
            out.append(f"        __m512i s{r} = _mm512_set1_epi32(-128 * rowsum[{r}]);")
            out.append("        " + " ".join(f"{a} = s{r};" for a in acc[r]))
    else:
        out.append("        " + " ".join(f"{a} = _mm512_setzero_ps();" for _, _, a in every))
    masked_c = [f"{a} = {g['masked_load']}(cols16(w, {q}), {c_at.format(r=r, col=16 * q)});"
                for r, q, a in every]
    if vnni:  # C's partial sums are in C's order
        out += ["    } else {", *("        " + x for x in masked_c), "    }"]
    else:  # a whole chunk's partial sums wait in C in the accumulators' order between blocks
        out.append("    } else if (w == 64) {")
        out += [f"        {a} = {g['load']}({c_at.format(r=r, col=16 * q)});"
                for r, q, a in every]
        out.append("    } else {")
        for r in range(rows):
            loads = ", ".join(f"{g['masked_load']}(cols16(w, {q}), "
                              f"{c_at.format(r=r, col=16 * q)})" for q in range(4))
            out += [f"        {g['vec']} v{r}[4] = {{{loads}}};", f"        {g['unorder']}(v{r});",
                    "        " + " ".join(f"{a} = v{r}[{q}];" for q, a in enumerate(acc[r]))]
        out.append("    }")

    def multiply(a_value: str) -> list[str]:
        body = []
        for r in range(rows):
            body.append(f"        {{ int32_t v; {a_value.format(r=r)} "
                        "__m512i x = _mm512_set1_epi32(v);")
            body += ["          " + g["fma"].format(a=a, q=q) for q, a in enumerate(acc[r])]
            body.append("        }")
        return body

    if vnni:
        flip = "_mm512_set1_epi8((char)0x80)"
        loads = [f"_mm512_xor_si512(packed[{q} * stride], {flip})" if kind == "s8"
                 else f"packed[{q} * stride]" for q in range(4)]
        advance = "packed += 1"
    else:
        loads, advance = [f"packed[{q}]" for q in range(4)], "packed += 4"
    load_group = "        __m512i " + ", ".join(f"u{q} = {x}" for q, x in enumerate(loads)) + ";"
    step = g["kstep"]
    out += ["    int64_t k = k0;",
            f"    for (; k + {step} <= k1; k += {step}, {advance}) {{",
            load_group, *multiply(A_GROUP), "    }",
            f"    if (k < k1) {{  /* {g['tail_note']} */",
            load_group, *multiply(g["tail"]), "    }"]
    masked_store = [f"{g['masked_store']}({c_at.format(r=r, col=16 * q)}, cols16(w, {q}), {a});"
                    for r, q, a in every]
    if vnni:
        out += ["    " + x for x in masked_store]
    else:
        out.append("    if (!last && w == 64) {")
        out += [f"        {g['store']}({c_at.format(r=r, col=16 * q)}, {a});"
                for r, q, a in every]
        out.append("    } else {")
        for r in range(rows):
            out.append(f"    {{ {g['vec']} v[4] = {{{', '.join(acc[r])}}}; {g['order']}(v);")
            out += [f"      {g['masked_store']}({c_at.format(r=r, col=16 * q)}, cols16(w, {q}), "
                    f"v[{q}]);" for q in range(4)]
            out.append("    }")
        out.append("    }")
    out.append("}")
    return "\n".join(out)


def stream_source(kb: int = STREAM_KB, pf: int = STREAM_PF, small: int = STREAM_SMALL,
                  wide: int = STREAM_WIDE, tiles: bool = False, k_outer: bool = True) -> str:
    """The C of the streaming kernels (``kb`` K rows a block, a multiple of 4; rows ``pf``
    ahead prefetched; one thread under ``small`` multiply-adds); with ``tiles`` the AMX ones on
    their layout too (:mod:`.amx_stream_tiles`: ``kb`` a multiple of 64, after ``tiles.h``;
    ``k_outer``: their order)."""
    if kb < 4 or kb % 4:
        raise ValueError(f"kb={kb}: a positive multiple of 4")
    if tiles and kb % 64:
        raise ValueError(f"kb={kb}: the AMX streaming kernels take whole tiles of K, a "
                         "multiple of 64")
    return STREAM_SOURCE.format(
        kb=kb, pf=pf, small=small, wide=wide,
        s8_groups="\n\n".join(_group("s8", r, v) for v in (False, True) for r in range(1, 5)),
        bf_groups="\n\n".join(_group("bf", r, v) for v in (False, True) for r in range(1, 5))
    ) + (tiles_source(k_outer) if tiles else "")


# A config of the space with pack_b=stream: the streaming kernels behind the harness's and the
# library's entry points (B row-major; dse_pack answers 3: a library packs B once with an AMX
# kernel's, whose layout dse_gemm_prepacked streams)
STREAM_KERNEL = r"""
int dse_gemm(int64_t M, int64_t N, int64_t K, const TIN *A, int64_t lda, const TIN *B,
             int64_t ldb, TOUT *C, int64_t ldc) {{
    if (M < 1 || N < 1 || K < 1 || !A || !B || !C || lda < K || ldb < N || ldc < N) return 1;
    return dse_stream_{engine}{suffix}(M, N, K, A, lda, B, ldb, C, ldc, dse_threads);
}}

int64_t dse_packed_bytes(int64_t K, int64_t N) {{ (void)K; (void)N; return 0; }}

int dse_pack(int64_t K, int64_t N, const TIN *B, int64_t ldb, char *dst) {{
    (void)K; (void)N; (void)B; (void)ldb; (void)dst;
    return 3;
}}

/* C = A @ B with B packed by an AMX kernel's dse_pack (its VNNI strips), streamed */
int dse_gemm_prepacked(int64_t M, int64_t N, int64_t K, const TIN *A, int64_t lda,
                       const char *packed, TOUT *C, int64_t ldc) {{
    if (M < 1 || N < 1 || K < 1 || !A || !packed || !C || lda < K || ldc < N) return 1;
    return dse_stream_{engine}{suffix}_vnni(M, N, K, A, lda, packed, C, ldc, dse_threads);
}}
"""

# the symbols the streaming kernels export (a library renames each kernel's own copy)
STREAM_SYMBOLS = ("dse_stream_s8s8s32", "dse_stream_bf16bf16f32", "dse_stream_pack_s8",
                  "dse_stream_pack_bf16", "dse_stream_packed_free", "dse_stream_s8s8s32_packed",
                  "dse_stream_bf16bf16f32_packed", "dse_stream_s8s8s32_vnni",
                  "dse_stream_bf16bf16f32_vnni", *TILES_SYMBOLS)


def stream_kernel(kc: int, nc: int, int8: bool, tiles: bool = False,
                  k_outer: bool = True) -> str:
    """The C after a kernel's header (its types, ``dse_threads``) of a ``pack_b=stream`` config:
    the streaming kernels with blocks of ``kc`` K rows and ``nc / 64`` chunks re-laid out
    together (half as many above 4 rows of A), and the library's entry points (the harness's
    timer follows); with ``tiles`` (``engine=amx``) its GEMM multiplies on AMX tiles, every
    group of chunks per block of K when ``k_outer`` (``block_order=a_block``)."""
    if kc < 1 or nc < 64 or nc % 64:
        raise ValueError(f"kc={kc}, nc={nc}: a streaming kernel needs kc >= 1 and nc a "
                         "multiple of 64")
    kb = -(-kc // 4) * 4 if int8 else -(-2 * kc // 4) * 4  # bf16 blocks are KB / 2 rows
    entry = STREAM_KERNEL.format(suffix="s8s8s32" if int8 else "bf16bf16f32",
                                 engine="amx_" if tiles else "")
    return stream_source(kb=kb, wide=nc // 64, tiles=tiles, k_outer=k_outer) + entry
