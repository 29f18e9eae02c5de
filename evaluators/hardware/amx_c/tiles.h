/* Tile operations of the generated AMX GEMMs: Intel's intrinsics, or (DSE_AMX_EMULATE) the same
 * instructions computed in C, so a generated kernel's blocking, packing and tails can be checked
 * exactly on a CPU without AMX. Every tile is configured 16 rows x 64 bytes: partial tiles are
 * handled by padded packing and edge buffers, never by a second tile configuration. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <immintrin.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* The Linux permission to use the tile state; 0 on success (and where no tile is used). */
int dse_amx_request(void) {
#if defined(DSE_AMX_EMULATE) || defined(DSE_NO_TILES)
    return 0;
#else
    return (int)syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA);
#endif
}

#ifdef DSE_AMX_EMULATE
static __thread uint8_t emu_tmm[8][16][64];
static void emu_load(int t, const void *base, int64_t stride) {
    for (int r = 0; r < 16; r++) memcpy(emu_tmm[t][r], (const char *)base + r * stride, 64);
}
static void emu_store(int t, void *base, int64_t stride) {
    for (int r = 0; r < 16; r++) memcpy((char *)base + r * stride, emu_tmm[t][r], 64);
}
static void emu_dp_s8(int c, int a, int b) {
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            int32_t acc;
            memcpy(&acc, &emu_tmm[c][m][4 * n], 4);
            for (int k = 0; k < 16; k++)
                for (int i = 0; i < 4; i++)
                    acc += (int32_t)(int8_t)emu_tmm[a][m][4 * k + i]
                         * (int32_t)(int8_t)emu_tmm[b][k][4 * n + i];
            memcpy(&emu_tmm[c][m][4 * n], &acc, 4);
        }
}
static float emu_bf16(const uint8_t *p) {
    uint32_t bits = (uint32_t)(p[0] | (p[1] << 8)) << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static void emu_dp_bf16(int c, int a, int b) {
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            float acc;
            memcpy(&acc, &emu_tmm[c][m][4 * n], 4);
            for (int k = 0; k < 16; k++)
                for (int i = 0; i < 2; i++)
                    acc += emu_bf16(&emu_tmm[a][m][4 * k + 2 * i])
                         * emu_bf16(&emu_tmm[b][k][4 * n + 2 * i]);
            memcpy(&emu_tmm[c][m][4 * n], &acc, 4);
        }
}
#define TILE_CONFIG() ((void)0)
#define TLOAD(t, p, s) emu_load(t, p, s)
#define TLOAD_T1(t, p, s) emu_load(t, p, s)
#define TSTORE(t, p, s) emu_store(t, p, s)
#define TZERO(t) memset(emu_tmm[t], 0, 1024)
#define TDP_INT8(c, a, b) emu_dp_s8(c, a, b)
#define TDP_BF16(c, a, b) emu_dp_bf16(c, a, b)
#define TRELEASE() ((void)0)
#else
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} dse_tilecfg;
static void dse_tile_config(void) {
    dse_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) { cfg.colsb[t] = 64; cfg.rows[t] = 16; }
    _tile_loadconfig(&cfg);
}
#define TILE_CONFIG() dse_tile_config()
#define TLOAD(t, p, s) _tile_loadd(t, p, s)
#define TLOAD_T1(t, p, s) _tile_stream_loadd(t, p, s)
#define TSTORE(t, p, s) _tile_stored(t, p, s)
#define TZERO(t) _tile_zero(t)
#define TDP_INT8(c, a, b) _tile_dpbssd(c, a, b)
#define TDP_BF16(c, a, b) _tile_dpbf16ps(c, a, b)
#define TRELEASE() _tile_release()
#endif

static double dse_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* A 64-byte aligned buffer kept between calls (one per slot, of DSE_BUFFER_SLOTS), grown when
 * too small: a GEMM call allocates nothing once warm, so its time holds no page faults. */
#define DSE_BUFFER_SLOTS 512
static void *dse_buffer(int slot, size_t bytes) {
    static void *bufs[DSE_BUFFER_SLOTS];
    static size_t sizes[DSE_BUFFER_SLOTS];
    if (sizes[slot] < bytes) {
        free(bufs[slot]);
        bytes = (bytes + 4095) & ~(size_t)4095;
        bufs[slot] = aligned_alloc(4096, bytes);
        sizes[slot] = bufs[slot] ? bytes : 0;
    }
    return bufs[slot];
}
