"""AMX tiles on the streaming kernels' layout (``engine=amx, pack_b=stream``): a row-major B
re-laid out a block at a time into a buffer in cache, as :mod:`.amx_stream` lays it out, and
multiplied there by ``TDPBSSD`` / ``TDPBF16PS`` instead of AVX-512 rows.

Why: a GEMM of a few dozen rows (decode at batch 8 to 32) is bound by reading B once, but an
AVX-512 row kernel's multiply-adds grow with M (bf16's ``VDPBF16PS`` does half of int8's
``VPDPBUSD`` a cycle) and the AMX kernels re-lay all of B out in memory at every call (B read,
written and read again). Here B is read once from where it lies, its block re-laid out into the
streaming buffer (L1 or L2) and each of its 64-column chunks multiplied as four 16-column tiles:
a buffer group (4 int8 or 2 bf16 K rows of a chunk) is four 64-byte vectors, vector ``q`` of
16 consecutive groups one B tile (a 256-byte stride), its columns in the streaming layout's
permuted order, which the row reorder of the streaming kernels undoes when C is stored. int8's
B is laid out without the sign flip (``TDPBSSD`` multiplies signed bytes).

Per thread (a share of the chunks, as the streaming kernels split them), per block of K rows
and group of ``wide`` chunks: the block re-laid out, its tail groups past K zeroed (a whole tile
of K is multiplied), and per chunk and 16 rows of A its four C tiles loaded from the partial
sums (zeroed on the first block), multiplied over the block (tile 4 A, 5 to 7 B in turn) and
stored back, or on the last block stored through a 4 KiB stage into C's rows (those of M),
reordered. A's rows are packed into zero-padded tiles (16 rows of 64 bytes of K). Two orders
(the config's ``block_order``): ``a_block`` walks every group of chunks per block of K (A's
block packed per block and kept, the share's partial sums waiting between blocks: B's rows read
across the whole share, the order for few rows), ``b_block`` all of K per group (A packed
whole once, the group's partial sums staying in cache: the order for many rows, whose share of
C would not). A GEMM of fewer than 16 rows configures its A and C tiles with its own rows (the
tile multiplies, loads and stores only those; measured on a Xeon, bf16 8x4096x28672 ran about
10 % faster than with 16 rows), more rows 16 (a last partial tile of A is zero rows); emulated
tiles always take 16 (A's tiles are zero-padded, the partial sums' tiles have room for 16).

Exported, beside the streaming kernels (the same arguments)::

    int dse_stream_amx_s8s8s32(int64_t M, int64_t N, int64_t K, const int8_t *A, int64_t lda,
                               const int8_t *B, int64_t ldb, int32_t *C, int64_t ldc,
                               int threads);
    int dse_stream_amx_bf16bf16f32(/* the same with uint16_t A, B and float C */);

and on B packed once in the AMX kernels' layout (``dse_pack``'s), 3 when A's tiles would not
stay in L2 (the library's general AMX kernel then multiplies)::

    int dse_stream_amx_s8s8s32_vnni(int64_t M, int64_t N, int64_t K, const int8_t *A,
                                    int64_t lda, const char *vnni, int32_t *C, int64_t ldc,
                                    int threads);
    int dse_stream_amx_bf16bf16f32_vnni(/* the same with uint16_t A and float C */);
"""

from __future__ import annotations

SYMBOLS = ("dse_stream_amx_s8s8s32", "dse_stream_amx_bf16bf16f32",
           "dse_stream_amx_s8s8s32_vnni", "dse_stream_amx_bf16bf16f32_vnni")

COMMON = r"""
#define TILES_A_MAX (1 << 20)

/* thread t's buffer ``which`` (0 the partial sums, 1 A's tiles): two of tiles.h's slots a
 * thread (the streaming kernels take at most MAX_THREADS, half its slots) */
static char *dse_stream_tiles_buffer(int which, int t, size_t bytes) {
    return dse_buffer(2 * (t % MAX_THREADS) + which, bytes);
}

/* A's rows [0, M) and K elements [k0, k1) as tiles: tile (i, s) holds rows 16i.. and K from
 * k0 + s * kt (``kt`` elements of ``size`` bytes a 64-byte row), zeros past M and k1 */
static void pack_a_tiles(const char *A, int64_t lda_bytes, int64_t M, int64_t k0, int64_t k1,
                         int kt, int size, int64_t steps, char *out) {
    for (int64_t i = 0; i < (M + 15) / 16; i++)
        for (int64_t s = 0; s < steps; s++) {
            int64_t k = k0 + s * kt, left = (k1 - k) * size;
            __mmask64 mask = left >= 64 ? ~0ULL : (1ULL << left) - 1;
            char *tile = out + (i * steps + s) * 1024;
            for (int r = 0; r < 16; r++) {
                int64_t row = 16 * i + r;
                __m512i v = row < M ? _mm512_maskz_loadu_epi8(mask, A + row * lda_bytes
                                                                      + k * size)
                                    : _mm512_setzero_si512();
                _mm512_store_si512(tile + 64 * r, v);
            }
        }
}

#ifndef DSE_AMX_EMULATE
/* tiles 0 to 4 (C and A) of ``rows`` rows, B's of 16: a GEMM of fewer than 16 rows multiplies,
 * loads and stores only its own (emulated tiles always take 16: A's tiles are zero-padded) */
static void tiles_of_rows(int rows) {
    dse_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) { cfg.colsb[t] = 64; cfg.rows[t] = t < 5 ? rows : 16; }
    _tile_loadconfig(&cfg);
}
#define TILE_ROWS(rows) tiles_of_rows(rows)
#else
#define TILE_ROWS(rows) TILE_CONFIG()
#endif

/* int8's layout for TDPBSSD: the streaming one without its sign flip */
static void s8_tiles_pack(const int8_t *B, int64_t ldb, int64_t j, int64_t width, int64_t k0,
                          int64_t k1, __m512i *buf) {
    s8_lay(B, ldb, j, width, k0, k1, buf, 0);
}
"""

KERNEL = r"""
/* One block of K rows [k0, k1) of chunks [c0, c1): the block of B re-laid out into ``buf`` (its
 * groups past K zeroed: a whole tile of K is multiplied), then per chunk and 16 rows of A (tiles
 * ``a_stride`` bytes apart from ``a``, the block's first) the four C tiles loaded from the
 * partial sums (zeroed on K's first block), multiplied over the block, and stored back or, on
 * K's last block, into C's rows of M through a stage, reordered. */
static void amx_block_{suffix}(int64_t M, int64_t N, int64_t K, const {a} *B, int64_t ldb,
                               {c} *C, int64_t ldc, int64_t c0, int64_t c1, int64_t k0,
                               int64_t k1, __m512i *buf, const char *a, int64_t a_stride,
                               char *partials) {{
    const int64_t kt = {kt}, mt = (M + 15) / 16;
    int64_t steps = (k1 - k0 + kt - 1) / kt, used = (k1 - k0 + {kstep} - 1) / {kstep};
    int64_t right = 64 * c1 < N ? 64 * c1 : N;
    __attribute__((aligned(64))) {c} stage[4][16][16];
    {pack}(B, ldb, 64 * c0, right - 64 * c0, k0, k1, buf);
    for (int64_t c = c0; c < c1; c++)
        memset(buf + ((c - c0) * GROUPS + used) * 4, 0, (size_t)(steps * 16 - used) * 256);
    for (int64_t c = c0; c < c1; c++) {{
        const char *b = (const char *)(buf + (c - c0) * GROUPS * 4);
        int64_t j = 64 * c;
        int w = N - j < 64 ? (int)(N - j) : 64;
        for (int64_t i = 0; i < mt; i++) {{
            char *partial = partials + ((c - c0) * mt + i) * 4096;
            const char *ai = a + i * a_stride;
            if (k0 == 0) {{
                TZERO(0); TZERO(1); TZERO(2); TZERO(3);
            }} else {{
                TLOAD(0, partial, 64); TLOAD(1, partial + 1024, 64);
                TLOAD(2, partial + 2048, 64); TLOAD(3, partial + 3072, 64);
            }}
            for (int64_t s = 0; s < steps; s++) {{
                const char *bs = b + s * 16 * 256;
                TLOAD(4, ai + s * 1024, 64);
                TLOAD(5, bs, 256); {tdp}(0, 4, 5);
                TLOAD(6, bs + 64, 256); {tdp}(1, 4, 6);
                TLOAD(7, bs + 128, 256); {tdp}(2, 4, 7);
                TLOAD(5, bs + 192, 256); {tdp}(3, 4, 5);
            }}
            if (k1 < K) {{
                TSTORE(0, partial, 64); TSTORE(1, partial + 1024, 64);
                TSTORE(2, partial + 2048, 64); TSTORE(3, partial + 3072, 64);
                continue;
            }}
            TSTORE(0, stage[0], 64); TSTORE(1, stage[1], 64);
            TSTORE(2, stage[2], 64); TSTORE(3, stage[3], 64);
            int64_t last = M - 16 * i < 16 ? M - 16 * i : 16;
            for (int64_t r = 0; r < last; r++) {{
                {vec} v[4] = {{{load}(stage[0][r]), {load}(stage[1][r]), {load}(stage[2][r]),
                              {load}(stage[3][r])}};
                {order}(v);
                {c} *row = C + (16 * i + r) * ldc + j;
                for (int q = 0; q < 4; q++)
                    {store}(row + 16 * q, cols16(w, q), v[q]);
            }}
        }}
    }}
}}

int dse_stream_amx_{suffix}(int64_t M, int64_t N, int64_t K, const {a} *A, int64_t lda,
                            const {a} *B, int64_t ldb, {c} *C, int64_t ldc, int threads) {{
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    const int64_t rows = {rows}, kt = {kt}, mt = (M + 15) / 16, chunks = (N + 63) / 64;
    const int64_t lda_bytes = lda * (int64_t)sizeof({a});
    #pragma omp parallel num_threads(stream_threads(M, N, K, threads))
    {{
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = chunks * t / nt, hi = chunks * (t + 1) / nt;
        __m512i *buf = dse_stream_buffer(t);
        TILE_ROWS(M < 16 ? (int)M : 16);
#if STREAM_K_OUTER  /* every group of chunks per block of K: the share's partial sums wait */
        const int64_t max_steps = (rows + kt - 1) / kt;
        char *partials = dse_stream_tiles_buffer(0, t, (size_t)((hi - lo) * mt * 4096));
        char *a_tiles = dse_stream_tiles_buffer(1, t, (size_t)(mt * max_steps * 1024));
        for (int64_t k0 = 0; k0 < K; k0 += rows) {{
            int64_t k1 = k0 + rows < K ? k0 + rows : K, steps = (k1 - k0 + kt - 1) / kt;
            pack_a_tiles((const char *)A, lda_bytes, M, k0, k1, (int)kt, (int)sizeof({a}),
                         steps, a_tiles);
            for (int64_t c0 = lo; c0 < hi; c0 += WIDE)
                amx_block_{suffix}(M, N, K, B, ldb, C, ldc, c0, c0 + WIDE < hi ? c0 + WIDE : hi,
                                   k0, k1, buf, a_tiles, steps * 1024,
                                   partials + (c0 - lo) * mt * 4096);
        }}
#else  /* all of K per group of chunks: the group's partial sums stay in cache */
        const int64_t steps_all = (K + kt - 1) / kt;
        char *partials = dse_stream_tiles_buffer(0, t, (size_t)(WIDE * mt * 4096));
        char *a_tiles = dse_stream_tiles_buffer(1, t, (size_t)(mt * steps_all * 1024));
        pack_a_tiles((const char *)A, lda_bytes, M, 0, K, (int)kt, (int)sizeof({a}), steps_all,
                     a_tiles);
        for (int64_t c0 = lo; c0 < hi; c0 += WIDE)
            for (int64_t k0 = 0; k0 < K; k0 += rows)
                amx_block_{suffix}(M, N, K, B, ldb, C, ldc, c0, c0 + WIDE < hi ? c0 + WIDE : hi,
                                   k0, k0 + rows < K ? k0 + rows : K, buf,
                                   a_tiles + k0 / kt * 1024, steps_all * 1024, partials);
#endif
        TRELEASE();
    }}
    return 0;
}}
"""

# B packed once in the AMX kernels' layout (strips of 16 columns in VNNI over all of K, zero rows
# past K, zero strips past N): a B tile is 16 VNNI rows of a strip, 1 KiB at a 64-byte stride,
# its columns in C's order. Per chunk of 4 strips and 16 rows of A the C tiles stay in registers
# over all of K. A's tiles over all of K are packed per thread: when they pass TILES_A_MAX bytes
# (half the 2 MiB L2 of AMX's CPUs) it answers 3, and the library runs its general AMX kernel.
VNNI_KERNEL = r"""
int dse_stream_amx_{suffix}_vnni(int64_t M, int64_t N, int64_t K, const {a} *A, int64_t lda,
                                 const char *vnni, {c} *C, int64_t ldc, int threads) {{
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    const int64_t kt = {kt}, mt = (M + 15) / 16, chunks = (N + 63) / 64;
    const int64_t steps_all = (K + kt - 1) / kt, strip = steps_all * 16 * 64;
    if (mt * steps_all * 1024 > TILES_A_MAX) return 3;
    #pragma omp parallel num_threads(stream_threads(M, N, K, threads))
    {{
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = chunks * t / nt, hi = chunks * (t + 1) / nt;
        char *a_tiles = dse_stream_tiles_buffer(1, t, (size_t)(mt * steps_all * 1024));
        __attribute__((aligned(64))) {c} stage[4][16][16];
        pack_a_tiles((const char *)A, lda * (int64_t)sizeof({a}), M, 0, K, (int)kt,
                     (int)sizeof({a}), steps_all, a_tiles);
        TILE_ROWS(M < 16 ? (int)M : 16);
        for (int64_t c = lo; c < hi; c++) {{
            const char *b = vnni + 4 * c * strip;
            int64_t j = 64 * c;
            int w = N - j < 64 ? (int)(N - j) : 64;
            for (int64_t i = 0; i < mt; i++) {{
                const char *a = a_tiles + i * steps_all * 1024;
                TZERO(0); TZERO(1); TZERO(2); TZERO(3);
                for (int64_t s = 0; s < steps_all; s++) {{
                    const char *bs = b + s * 1024;
                    TLOAD(4, a + s * 1024, 64);
                    TLOAD(5, bs, 64); {tdp}(0, 4, 5);
                    TLOAD(6, bs + strip, 64); {tdp}(1, 4, 6);
                    TLOAD(7, bs + 2 * strip, 64); {tdp}(2, 4, 7);
                    TLOAD(5, bs + 3 * strip, 64); {tdp}(3, 4, 5);
                }}
                TSTORE(0, stage[0], 64); TSTORE(1, stage[1], 64);
                TSTORE(2, stage[2], 64); TSTORE(3, stage[3], 64);
                int64_t last = M - 16 * i < 16 ? M - 16 * i : 16;
                for (int64_t r = 0; r < last; r++)
                    for (int q = 0; q < 4; q++)
                        {store}(C + (16 * i + r) * ldc + j + 16 * q, cols16(w, q),
                                {load}(stage[q][r]));
            }}
        }}
        TRELEASE();
    }}
    return 0;
}}
"""

KINDS = {
    "s8": dict(suffix="s8s8s32", a="int8_t", c="int32_t", rows="KB", kt=64, kstep=4,
               pack="s8_tiles_pack", tdp="TDP_INT8", vec="__m512i", load="_mm512_load_si512",
               order="lanes4", store="_mm512_mask_storeu_epi32"),
    "bf": dict(suffix="bf16bf16f32", a="uint16_t", c="float", rows="KB / 2", kt=32, kstep=2,
               pack="bf_pack", tdp="TDP_BF16", vec="__m512", load="_mm512_load_ps",
               order="to_c", store="_mm512_mask_storeu_ps"),
}


def tiles_source(k_outer: bool = True) -> str:
    """The C of the AMX streaming kernels, after the streaming kernels' own (their layout,
    buffers, thread split and row reorders) and the tile operations' (``tiles.h``); ``k_outer``:
    every group of chunks per block of K (else all of K per group)."""
    kernels = "".join(kernel.format(**kind) for kind in KINDS.values()
                      for kernel in (KERNEL, VNNI_KERNEL))
    return f"#define STREAM_K_OUTER {int(k_outer)}\n" + COMMON + kernels
