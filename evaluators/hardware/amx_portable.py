"""The library's kernels for a CPU without AVX-512 VNNI and BF16 (``dse dispatch build``): C
that any x86-64 compiler builds for the baseline ISA, with AVX2 micro-kernels chosen at run time
where the CPU has AVX2 and FMA. They make the library run everywhere (a library built on a Xeon
and shipped to another machine, or built on a laptop); the tuned kernels, which need AVX-512,
are the fast ones.

Per task (a block of at most 128 rows of A and 256 columns of B, spread over the threads), per
block of K rows, B's block is re-laid out once into a buffer that stays in L2, in panels of 16
columns that a micro-kernel reads straight through: int8 as int16 pairs of K rows
(``vpmaddwd`` multiplies two rows of B by two columns of A into int32 without saturation:
products of int8 fit int16), bf16 widened to fp32 (``vfmadd`` on 8 columns). Each row's columns
of the block are read together, the rows a few ahead prefetched: the rows of a large B lie pages
apart, and read 16 columns at a time each line would open a DRAM page of its own. Row groups of
4 then take 16 columns a step (8 accumulators, in registers; a group of fewer rows, a decode
GEMM's one, takes as few); partial sums go to C between blocks of K.

The C API (row-major, leading dimensions honoured; the dispatcher has checked the arguments)::

    int dse_portable_s8s8s32(int64_t M, int64_t N, int64_t K, const int8_t *A, int64_t lda,
                             const int8_t *B, int64_t ldb, int32_t *C, int64_t ldc, int threads);
    int dse_portable_bf16bf16f32(...same, uint16_t A and B, float C...);
"""

from __future__ import annotations

SOURCE = r"""
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PR 4     /* rows of A a micro-kernel step takes */
#define PC 16    /* columns of B it takes */
#define NB 256   /* columns of a task (a multiple of PC) */
#define MB 128   /* rows of a task */
/* elements between panels of B's buffer past their kpad rows: a pair of rows is laid out
 * across every panel, and panels 4 KiB apart would share an L1 set and a store-forwarding alias */
#define PANEL_PAD 32
#define PANEL_STEP(kpad) (PC * (kpad) + PANEL_PAD)
#define PF 8     /* rows of B prefetched ahead as its blocks are laid out */
#ifndef AVX2_ALLOWED
#define AVX2_ALLOWED 1  /* 0: the plain C micro-kernels everywhere (tests run them so) */
#endif
#define KB_S8 256   /* rows of K a block of B holds: 128 KB either way */
#define KB_BF16 128

/* int8: a panel of B's block as int16 pairs of rows (rows k, k+1 of a column side by side),
 * its K and N tails zero; A's row group the same way. out[r * ldo + c] receives (or, with add,
 * gains) the block's sum for row r < rows, column c. */
static void s8_tile_c(const int16_t *a, int64_t kpad, const int16_t *b, int64_t stride,
                      int32_t *out, int64_t ldo, int add, int rows) {
    int32_t acc[PR][PC] = {{0}};
    for (int64_t k = 0; k < kpad; k += 2, b += stride)
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < PC; c++)
                acc[r][c] += a[r * kpad + k] * b[2 * c] + a[r * kpad + k + 1] * b[2 * c + 1];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < PC; c++) out[r * ldo + c] = acc[r][c] + (add ? out[r * ldo + c] : 0);
}

/* one row r of the AVX2 tiles: its two accumulators of 8 columns (named, so that they stay in
 * registers: an array of them is kept on the stack); rows past the group's take no work */
#define S8_ROW(r)                                                                             \
    if (r < R) {                                                                              \
        int32_t pair;                                                                         \
        memcpy(&pair, a + r * kpad + k, sizeof pair);                                         \
        __m256i x = _mm256_set1_epi32(pair);                                                  \
        c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(x, b0));                        \
        c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(x, b1));                        \
    }
#define S8_STORE(r, h)                                                                        \
    if (r < R) {                                                                              \
        __m256i *c = (__m256i *)(out + r * ldo + 8 * h);                                      \
        _mm256_storeu_si256(c, add ? _mm256_add_epi32(c##r##h, _mm256_loadu_si256(c)) : c##r##h); \
    }

/* R (1 to PR) rows: each call site's R a constant, so a group of fewer rows than PR (a decode
 * GEMM's one row) multiplies no padding */
static inline __attribute__((always_inline, target("avx2,fma")))
void s8_tile_rows(const int16_t *a, int64_t kpad, const int16_t *b, int64_t stride,
                  int32_t *out, int64_t ldo, int add, const int R) {
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
            c21 = c00, c30 = c00, c31 = c00;
    for (int64_t k = 0; k < kpad; k += 2, b += stride) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)b);
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + 16));
        S8_ROW(0) S8_ROW(1) S8_ROW(2) S8_ROW(3)
    }
    S8_STORE(0, 0) S8_STORE(0, 1) S8_STORE(1, 0) S8_STORE(1, 1)
    S8_STORE(2, 0) S8_STORE(2, 1) S8_STORE(3, 0) S8_STORE(3, 1)
}

/* bf16: B's block widened to fp32 rows of the task's columns; A's row group too. */
static void bf16_tile_c(const float *a, int64_t kpad, const float *b, int64_t stride,
                        float *out, int64_t ldo, int add, int rows) {
    float acc[PR][PC] = {{0}};
    for (int64_t k = 0; k < kpad; k++, b += stride)
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < PC; c++) acc[r][c] += a[r * kpad + k] * b[c];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < PC; c++) out[r * ldo + c] = acc[r][c] + (add ? out[r * ldo + c] : 0);
}

#define BF16_ROW(r)                                                                           \
    if (r < R) {                                                                              \
        __m256 x = _mm256_broadcast_ss(a + r * kpad + k);                                     \
        c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);                                            \
        c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);                                            \
    }
#define BF16_STORE(r, h)                                                                      \
    if (r < R) {                                                                              \
        float *c = out + r * ldo + 8 * h;                                                     \
        _mm256_storeu_ps(c, add ? _mm256_add_ps(c##r##h, _mm256_loadu_ps(c)) : c##r##h);      \
    }

static inline __attribute__((always_inline, target("avx2,fma")))
void bf16_tile_rows(const float *a, int64_t kpad, const float *b, int64_t stride,
                    float *out, int64_t ldo, int add, const int R) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00;
    for (int64_t k = 0; k < kpad; k++, b += stride) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        BF16_ROW(0) BF16_ROW(1) BF16_ROW(2) BF16_ROW(3)
    }
    BF16_STORE(0, 0) BF16_STORE(0, 1) BF16_STORE(1, 0) BF16_STORE(1, 1)
    BF16_STORE(2, 0) BF16_STORE(2, 1) BF16_STORE(3, 0) BF16_STORE(3, 1)
}

/* the AVX2 tiles of each dtype with the row count a call passes as a constant */
#define TILE_AVX2(KIND, TBUF, TOUT)                                                           \
__attribute__((target("avx2,fma")))                                                           \
static void KIND##_tile_avx2(const TBUF *a, int64_t kpad, const TBUF *b, int64_t stride,      \
                             TOUT *out, int64_t ldo, int add, int rows) {                     \
    switch (rows) {                                                                           \
    case 1: KIND##_tile_rows(a, kpad, b, stride, out, ldo, add, 1); break;                    \
    case 2: KIND##_tile_rows(a, kpad, b, stride, out, ldo, add, 2); break;                    \
    case 3: KIND##_tile_rows(a, kpad, b, stride, out, ldo, add, 3); break;                    \
    default: KIND##_tile_rows(a, kpad, b, stride, out, ldo, add, PR);                         \
    }                                                                                         \
}
TILE_AVX2(s8, int16_t, int32_t)
TILE_AVX2(bf16, float, float)

static float bf16_value(uint16_t x) {
    uint32_t bits = (uint32_t)x << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* One pair of B's rows (int8) or one row (bf16) laid out across ``panels`` panels of PC whole
 * columns, panel p's piece at out + p * step: int8 as int16 pairs (rows k, k+1 of a column side
 * by side), bf16 widened to fp32. A row's columns are read together: rows of a large B lie
 * pages apart, and a panel's rows read 16 columns at a time would open a DRAM page a line. */
static void s8_rows_c(const int8_t *restrict b, int64_t ldb, int64_t panels,
                      int16_t *restrict out, int64_t step) {
    for (int64_t p = 0; p < panels; p++, b += PC, out += step)
        for (int c = 0; c < PC; c++) {
            out[2 * c] = b[c];
            out[2 * c + 1] = b[ldb + c];
        }
}

__attribute__((target("avx2,fma")))
static void s8_rows_avx2(const int8_t *b, int64_t ldb, int64_t panels, int16_t *out,
                         int64_t step) {
    for (int64_t p = 0; p < panels; p++, b += PC, out += step) {
        __m256i x0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b));
        __m256i x1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + ldb)));
        /* per 128-bit lane: lo holds columns 0-3 and 8-11, hi 4-7 and 12-15 */
        __m256i lo = _mm256_unpacklo_epi16(x0, x1), hi = _mm256_unpackhi_epi16(x0, x1);
        _mm256_storeu_si256((__m256i *)out, _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256((__m256i *)(out + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
}

static void bf16_rows_c(const uint16_t *restrict b, int64_t ldb, int64_t panels,
                        float *restrict out, int64_t step) {
    (void)ldb;
    for (int64_t p = 0; p < panels; p++, b += PC, out += step)
        for (int c = 0; c < PC; c++) out[c] = bf16_value(b[c]);
}

__attribute__((target("avx2,fma")))
static void bf16_rows_avx2(const uint16_t *b, int64_t ldb, int64_t panels, float *out,
                           int64_t step) {
    (void)ldb;
    for (int64_t p = 0; p < panels; p++, b += PC, out += step)
        for (int h = 0; h < 2; h++) {
            __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(b + 8 * h)));
            _mm256_storeu_ps(out + 8 * h, _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)));
        }
}

/* the lines of the rows PF ahead (the hardware prefetchers stop at pages: rows are apart) */
static inline void prefetch_row(const void *row, int64_t bytes) {
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch((const char *)row + o, 0, 3);
}

/* rows [k0, k0 + kb) and columns [n0, n0 + nb) of B into buf: panels of PC columns (npad
 * columns in all, the tail zero), each panel's kpad rows one after the other, so that a
 * micro-kernel reads its panel straight through; the whole panels a pair of rows at a time by
 * ``lay_rows``, the rest (a partial panel, an odd last row) here */
static void s8_pack_b(const int8_t *B, int64_t ldb, int64_t k0, int64_t kb, int64_t kpad,
                      int64_t n0, int64_t nb, int64_t npad, int16_t *buf,
                      void (*lay_rows)(const int8_t *, int64_t, int64_t, int16_t *, int64_t)) {
    const int8_t *b = B + k0 * ldb + n0;
    int64_t whole = nb / PC, done = 0;
    if (whole)
        for (; done + 1 < kb; done += 2) {
            if (done + PF + 1 < kb) {
                prefetch_row(b + (done + PF) * ldb, nb);
                prefetch_row(b + (done + PF + 1) * ldb, nb);
            }
            lay_rows(b + done * ldb, ldb, whole, buf + done * PC, PANEL_STEP(kpad));
        }
    for (int64_t p = 0; p < npad; p += PC) {
        int16_t *out = buf + p / PC * PANEL_STEP(kpad);
        int64_t cols = p + PC < nb ? PC : nb - p;
        /* k < kb (kpad - kb < 2); row k + 1 may be the zero tail */
        for (int64_t k = cols == PC ? done : 0; k < kpad; k += 2)
            for (int64_t c = 0; c < PC; c++) {
                out[k * PC + 2 * c] = c < cols ? b[k * ldb + p + c] : 0;
                out[k * PC + 2 * c + 1] = c < cols && k + 1 < kb ? b[(k + 1) * ldb + p + c] : 0;
            }
    }
}

static void bf16_pack_b(const uint16_t *B, int64_t ldb, int64_t k0, int64_t kb, int64_t kpad,
                        int64_t n0, int64_t nb, int64_t npad, float *buf,
                        void (*lay_rows)(const uint16_t *, int64_t, int64_t, float *, int64_t)) {
    const uint16_t *b = B + k0 * ldb + n0;
    int64_t whole = nb / PC;
    if (whole)
        for (int64_t k = 0; k < kb; k++) {
            if (k + PF < kb) prefetch_row(b + (k + PF) * ldb, 2 * nb);
            lay_rows(b + k * ldb, ldb, whole, buf + k * PC, PANEL_STEP(kpad));
        }
    if (whole * PC < npad) {  /* the partial panel */
        const uint16_t *rest = b + whole * PC;
        int64_t cols = nb - whole * PC;
        float *out = buf + whole * PANEL_STEP(kpad);
        for (int64_t k = 0; k < kb; k++)
            for (int64_t c = 0; c < PC; c++)
                out[k * PC + c] = c < cols ? bf16_value(rest[k * ldb + c]) : 0.0f;
    }
}

/* rows [m0, m0 + rows) of A, K rows [k0, k0 + kb), into PR rows of kpad (the rest zero) */
static void s8_load_a(const int8_t *A, int64_t lda, int64_t m0, int64_t rows, int64_t k0,
                      int64_t kb, int64_t kpad, int16_t *buf) {
    memset(buf, 0, sizeof *buf * PR * kpad);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < kb; k++) buf[r * kpad + k] = A[(m0 + r) * lda + k0 + k];
}

static void bf16_load_a(const uint16_t *A, int64_t lda, int64_t m0, int64_t rows, int64_t k0,
                        int64_t kb, int64_t kpad, float *buf) {
    memset(buf, 0, sizeof *buf * PR * kpad);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < kb; k++) buf[r * kpad + k] = bf16_value(A[(m0 + r) * lda + k0 + k]);
}

/* The driver of a dtype: tasks of MB rows x NB columns over the threads; per task and block of
 * K, B's block laid out once, then every row group of the task. */
#define PORTABLE_DRIVER(NAME, TIN, TOUT, TBUF, KB, KSTEP, KIND)                                \
int NAME(int64_t M, int64_t N, int64_t K, const TIN *A, int64_t lda, const TIN *B,            \
         int64_t ldb, TOUT *C, int64_t ldc, int threads) {                                    \
    int avx2 = AVX2_ALLOWED && __builtin_cpu_supports("avx2")                                \
               && __builtin_cpu_supports("fma");                                              \
    void (*tile)(const TBUF *, int64_t, const TBUF *, int64_t, TOUT *, int64_t, int, int) =  \
        avx2 ? KIND##_tile_avx2 : KIND##_tile_c;                                              \
    void (*lay_rows)(const TIN *, int64_t, int64_t, TBUF *, int64_t) =                        \
        avx2 ? KIND##_rows_avx2 : KIND##_rows_c;                                              \
    int64_t m_tasks = (M + MB - 1) / MB, n_tasks = (N + NB - 1) / NB;                         \
    int failed = 0;                                                                           \
    _Pragma("omp parallel num_threads(threads) reduction(|:failed)")                          \
    {                                                                                         \
        TBUF *bbuf = malloc(sizeof(TBUF) * (KB * NB + NB / PC * PANEL_PAD));                \
        TBUF *abuf = malloc(sizeof(TBUF) * PR * KB);                                          \
        if (!bbuf || !abuf) failed = 1;                                                       \
        _Pragma("omp for collapse(2) schedule(dynamic)")                                      \
        for (int64_t mt = 0; mt < m_tasks; mt++)                                              \
            for (int64_t nt = 0; nt < n_tasks; nt++) {                                        \
                if (!bbuf || !abuf) continue;                                                 \
                int64_t m0 = mt * MB, m1 = m0 + MB < M ? m0 + MB : M;                         \
                int64_t n0 = nt * NB, nb = n0 + NB < N ? NB : N - n0;                         \
                int64_t npad = (nb + PC - 1) / PC * PC;                                       \
                for (int64_t k0 = 0; k0 < K; k0 += KB) {                                      \
                    int64_t kb = k0 + KB < K ? KB : K - k0;                                   \
                    int64_t kpad = (kb + KSTEP - 1) / KSTEP * KSTEP;                          \
                    KIND##_pack_b(B, ldb, k0, kb, kpad, n0, nb, npad, bbuf, lay_rows);        \
                    for (int64_t m = m0; m < m1; m += PR) {                                   \
                        int64_t rows = m + PR < m1 ? PR : m1 - m;                             \
                        KIND##_load_a(A, lda, m, rows, k0, kb, kpad, abuf);                   \
                        for (int64_t c0 = 0; c0 < nb; c0 += PC) {                             \
                            TOUT *c = C + m * ldc + n0 + c0;                                  \
                            const TBUF *panel = bbuf + c0 / PC * PANEL_STEP(kpad);            \
                            int64_t cols = c0 + PC < nb ? PC : nb - c0;                       \
                            if (cols == PC) {  /* the tile adds into C itself */              \
                                tile(abuf, kpad, panel, PC * KSTEP, c, ldc, k0 > 0, (int)rows); \
                                continue;                                                     \
                            }                                                                 \
                            TOUT out[PR * PC];                                                \
                            tile(abuf, kpad, panel, PC * KSTEP, out, PC, 0, (int)rows);       \
                            for (int64_t r = 0; r < rows; r++)                                \
                                for (int64_t j = 0; j < cols; j++)                            \
                                    c[r * ldc + j] = out[r * PC + j]                          \
                                                     + (k0 ? c[r * ldc + j] : 0);             \
                        }                                                                     \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
        free(bbuf);                                                                           \
        free(abuf);                                                                           \
    }                                                                                         \
    return failed ? 4 : 0;                                                                    \
}

PORTABLE_DRIVER(dse_portable_s8s8s32, int8_t, int32_t, int16_t, KB_S8, 2, s8)
PORTABLE_DRIVER(dse_portable_bf16bf16f32, uint16_t, float, float, KB_BF16, 1, bf16)
"""


def portable_source() -> str:
    """The C of the portable kernels (the API in this module's docstring)."""
    return SOURCE
