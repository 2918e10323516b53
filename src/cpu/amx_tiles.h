/* AMX tile operations behind one thin layer, so that the AMX matmul
 * (amx_matmul.h) compiles two ways from one source:
 *  - kernels_amx.c (-mamx-tile -mamx-bf16): the instructions themselves
 *    (ldtilecfg, tileloadd, tilestored, tilezero, tdpbf16ps, tilerelease),
 *    as inline assembly (see below);
 *  - KIPP_AMX_EMULATE (tests/unit/amx_emulated.c): the same operations in C
 *    on a thread-local tile file, written from the instruction set
 *    reference's pseudo-code, so that the packing, tiling, span and tail
 *    logic around them runs -- and is checked bit for bit against a plain
 *    scalar loop -- on every machine with AVX-512, AMX or not.
 *
 * TDPBF16PS, as the reference defines it: for every (row m of A, column n
 * of B), for each BF16 pair p of the row in order,
 *     c[m][n] = c[m][n] + A[m].bf16[2p]   * B[p].bf16[2n]
 *     c[m][n] = c[m][n] + A[m].bf16[2p+1] * B[p].bf16[2n+1]
 * each addition rounded to nearest even (the products of two BF16 values
 * are exact in FP32), BF16 denormal inputs read as zero, denormal results
 * flushed to zero, MXCSR neither read nor written. The emulation does
 * exactly that (a fused multiply-add per addition, then the flush).
 * Whether the silicon rounds the same way is something only a machine with
 * AMX can say; the tier tests there hold the real path to the same
 * references within the BF16 bound, and hold its decode and prefill to
 * each other bit for bit (docs/ARCHITECTURE.md, "The AMX tier").
 *
 * Tile numbers must be integer literals or macros expanding to them (they
 * are pasted into the instruction text). */
#ifndef KIPP_CPU_AMX_TILES_H
#define KIPP_CPU_AMX_TILES_H

#include <stddef.h>
#include <stdint.h>

/* The 64-byte operand of ldtilecfg (palette 1: 8 tiles of at most 16 rows
 * of 64 bytes). A tile with rows == 0 and colsb == 0 is unused. */
typedef struct amx_tilecfg {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16]; /* bytes per row */
    uint8_t rows[16];
} amx_tilecfg;
_Static_assert(sizeof(amx_tilecfg) == 64, "ldtilecfg reads 64 bytes");

#define AMX_TILES 8
#define AMX_MAX_ROWS 16
#define AMX_ROW_BYTES 64

#if defined(KIPP_AMX_EMULATE)
#include <immintrin.h> /* the emulated dot product's loops (AVX-512) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct amx_emu_state {
    amx_tilecfg cfg;
    int configured;
    _Alignas(64) uint8_t tile[AMX_TILES][AMX_MAX_ROWS][AMX_ROW_BYTES];
} amx_emu_state;
static _Thread_local amx_emu_state amx_emu;

/* What the hardware would fault on (#UD or #GP) stops the test loudly. */
static inline void amx_emu_fault(const char *what, int t) {
    fprintf(stderr, "amx emulation: %s (tile %d)\n", what, t);
    abort();
}

static inline void amx_emu_config(const amx_tilecfg *c) {
    if (c->palette != 1) amx_emu_fault("palette is not 1", -1);
    for (int t = 0; t < AMX_TILES; t++)
        if (c->rows[t] > AMX_MAX_ROWS || c->colsb[t] > AMX_ROW_BYTES || (c->colsb[t] & 3) ||
            (!c->rows[t] != !c->colsb[t]))
            amx_emu_fault("bad tile shape in the configuration", t);
    amx_emu.cfg = *c;
    amx_emu.configured = 1;
    memset(amx_emu.tile, 0, sizeof amx_emu.tile); /* ldtilecfg zeroes the tiles */
}

static inline void amx_emu_check(int t) {
    if (!amx_emu.configured) amx_emu_fault("tile instruction before ldtilecfg", t);
    if (t < 0 || t >= AMX_TILES || !amx_emu.cfg.rows[t]) amx_emu_fault("unconfigured tile", t);
}

static inline void amx_emu_load(int t, const void *base, size_t stride) {
    amx_emu_check(t);
    const uint8_t *p = base;
    memset(amx_emu.tile[t], 0, sizeof amx_emu.tile[t]);
    for (int r = 0; r < amx_emu.cfg.rows[t]; r++)
        memcpy(amx_emu.tile[t][r], p + (size_t)r * stride, amx_emu.cfg.colsb[t]);
}

static inline void amx_emu_store(int t, void *base, size_t stride) {
    amx_emu_check(t);
    uint8_t *p = base;
    for (int r = 0; r < amx_emu.cfg.rows[t]; r++)
        memcpy(p + (size_t)r * stride, amx_emu.tile[t][r], amx_emu.cfg.colsb[t]);
}

static inline void amx_emu_zero(int t) {
    amx_emu_check(t);
    memset(amx_emu.tile[t], 0, sizeof amx_emu.tile[t]);
}

/* A BF16 value as FP32, denormals read as zero. */
static inline float amx_emu_bf16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    if (!(h & 0x7f80)) h &= 0x8000;
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline void amx_emu_dpbf16ps(int c, int a, int b) {
    amx_emu_check(c), amx_emu_check(a), amx_emu_check(b);
    const amx_tilecfg *g = &amx_emu.cfg;
    int rows = g->rows[c], cols = g->colsb[c] / 4, pairs = g->colsb[a] / 4;
    if (g->rows[a] != rows || g->rows[b] != pairs || g->colsb[b] != g->colsb[c])
        amx_emu_fault("tdpbf16ps operand shapes do not match", c);
    /* The operands as FP32 arrays with the rows m in the 16 lanes of an
     * AVX-512 vector (the emulated build is compiled with AVX-512, like
     * amx_matmul.h; the whole cpu backend runs on this in the tier tests):
     * A's pair halves column by column (lanes past rows zero), B's as
     * scalars, the accumulators transposed. vfmadd is IEEE fmaf (MXCSR
     * keeps denormals), then the flush; each output's additions keep the
     * reference's order. */
    _Alignas(64) float a0[AMX_MAX_ROWS][16] = {{0}}, a1[AMX_MAX_ROWS][16] = {{0}};
    _Alignas(64) float acc[16][16] = {{0}};
    for (int m = 0; m < rows; m++)
        for (int p = 0; p < pairs; p++) {
            a0[p][m] = amx_emu_bf16(&amx_emu.tile[a][m][4 * p]);
            a1[p][m] = amx_emu_bf16(&amx_emu.tile[a][m][4 * p + 2]);
        }
    for (int m = 0; m < rows; m++)
        for (int n = 0; n < cols; n++) memcpy(&acc[n][m], &amx_emu.tile[c][m][4 * n], 4);
    const __m512 tiny = _mm512_set1_ps(0x1p-126f), sign = _mm512_set1_ps(-0.0f);
    for (int n = 0; n < cols; n++) {
        __m512 v = _mm512_load_ps(acc[n]);
        for (int p = 0; p < pairs; p++) {
            const float w0 = amx_emu_bf16(&amx_emu.tile[b][p][4 * n]);
            const float w1 = amx_emu_bf16(&amx_emu.tile[b][p][4 * n + 2]);
            v = _mm512_fmadd_ps(_mm512_load_ps(a0[p]), _mm512_set1_ps(w0), v);
            v = _mm512_mask_and_ps(v, _mm512_cmp_ps_mask(_mm512_abs_ps(v), tiny, _CMP_LT_OQ), v,
                                   sign);
            v = _mm512_fmadd_ps(_mm512_load_ps(a1[p]), _mm512_set1_ps(w1), v);
            v = _mm512_mask_and_ps(v, _mm512_cmp_ps_mask(_mm512_abs_ps(v), tiny, _CMP_LT_OQ), v,
                                   sign);
        }
        _mm512_store_ps(acc[n], v);
    }
    for (int m = 0; m < rows; m++)
        for (int n = 0; n < cols; n++) memcpy(&amx_emu.tile[c][m][4 * n], &acc[n][m], 4);
}

#define AMX_CONFIG(cfg) amx_emu_config(cfg)
#define AMX_LOAD(t, base, stride) amx_emu_load(t, base, stride)
#define AMX_STORE(t, base, stride) amx_emu_store(t, base, stride)
#define AMX_ZERO(t) amx_emu_zero(t)
#define AMX_DP(c, a, b) amx_emu_dpbf16ps(c, a, b)
#define AMX_RELEASE() ((void)(amx_emu.configured = 0))

#else /* the instructions */
/* Written as inline assembly rather than through <immintrin.h>: gcc 12's
 * tile intrinsics declare no memory operand for tileloadd, and ldtilecfg's
 * operand as 8 bytes, so the compiler may drop or sink the stores that
 * fill a repacked tile or the rest of a configuration before the
 * instruction reads them. Here ldtilecfg reads the whole 64-byte struct
 * and the loads and stores clobber memory. AT&T operand order: sources
 * first (tdpbf16ps B, A, C). */
#define AMX_STR(x) #x
#define AMX_XSTR(x) AMX_STR(x)
#define AMX_CONFIG(cfg) __asm__ volatile("ldtilecfg %0" ::"m"(*(const amx_tilecfg *)(cfg)))
#define AMX_LOAD(t, base, stride)                                             \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" AMX_XSTR(t)                 \
                     ::"r"((const void *)(base)), "r"((long)(stride))          \
                     : "memory")
#define AMX_STORE(t, base, stride)                                            \
    __asm__ volatile("tilestored %%tmm" AMX_XSTR(t) ", (%0,%1,1)"             \
                     ::"r"((void *)(base)), "r"((long)(stride))                \
                     : "memory")
#define AMX_ZERO(t) __asm__ volatile("tilezero %%tmm" AMX_XSTR(t)::)
#define AMX_DP(c, a, b)                                                       \
    __asm__ volatile("tdpbf16ps %%tmm" AMX_XSTR(b) ", %%tmm" AMX_XSTR(a) ", %%tmm" AMX_XSTR(c)::)
#define AMX_RELEASE() __asm__ volatile("tilerelease" ::: "memory")
#endif

#endif
