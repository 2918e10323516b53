/* The cpu backend's kernels, every tier this processor can run, against
 * scalar double-precision references written here; plus the bitwise
 * batch-invariance properties each tier promises (kernels.h): matvec ==
 * matmat rows == any column split; attention through a scrambled block
 * table == the identity table. And the thread pool's coverage. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/common.h"
#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "test_tiers.h"
#include "test_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static double rel_err(double got, double want, double scale) {
    return fabs(got - want) / (scale > 1e-30 ? scale : 1e-30);
}

/* K_LONG: more than one avx512 K span (kernels_avx512.c K_SPAN = 1024),
 * with a partial last span: 2 x 1024 + 32. */
enum { N = 70, K_SHORT = 320, K_LONG = 2080, M = 11 };

/* Bounds: ~10x the worst measured on 2026-12-01 (AMD Zen 5, every tier of
 * this file's fixed random data; the data are deterministic, so the margin
 * covers compilers and flags, not luck):
 *                        generic  avx2     avx512   avx512bf16
 *   matmul bf16 (rel)    4.2e-8   3.9e-8   2.9e-8   1.7e-8
 *   rmsnorm (rel)        1.7e-7   9.3e-8   1.2e-7   1.5e-7
 *   rope (abs)           8.0e-8   3.6e-8   4.9e-8   4.5e-8
 *   silu_mul (rel)       1.4e-7   2.3e-7   2.2e-7   1.8e-7
 *   attention (abs)      4.6e-7   2.7e-7   2.7e-7   2.8e-7
 * The matmul reference multiplies the activations the tier multiplies:
 * on avx512bf16 (act_bf16) the RNE BF16 roundings, so the bound stays the
 * FP32 tiers'; against FP32 activations that tier is off by ~1e-3. */
#define MATMUL_TOL 5e-7
#define RMSNORM_TOL 2e-6
#define ROPE_TOL 1e-6
#define SILU_TOL 3e-6
#define ATTENTION_TOL 5e-6

/* The tier an integer-dot tier (act_i8) takes everything but its quantized
 * matmuls from: avx2i8 avx2's, avx512i8 avx512's (NULL for other tiers). */
static const kipp_cpu_kernels *i8_base_tier(const kipp_cpu_kernels *kr) {
    if (!kr->act_i8) return NULL;
    const char *base = strcmp(kr->name, "avx2i8") == 0 ? "avx2" : "avx512";
    const kipp_cpu_kernels *b = kipp_cpu_kernels_by_name(base);
    CHECKF(b != NULL, "%s: its base tier is not available", kr->name);
    return b;
}

static void test_matmul(const kipp_cpu_kernels *kr, int K) {
    const double tol = MATMUL_TOL;
    static uint16_t w[N * K_LONG];
    static float x[M * K_LONG];
    for (int i = 0; i < N * K; i++) w[i] = kipp_f32_to_bf16(frand());
    for (int i = 0; i < M * K; i++) x[i] = frand() * 3.0f;
    size_t stride = kr->act_bytes(K);
    CHECK(stride >= (size_t)K * 2 && stride % 64 == 0);
    /* at most 6 bytes a value: avx2i8's FP32 values, int8 copies, scales */
    static uint8_t act[M * K_LONG * 6 + 64 * M];
    CHECK(stride <= (size_t)K * 6 + 64);
    for (int r = 0; r < M; r++) kr->pack_act(x + r * K, K, act + r * stride);
    /* A tier that rounds activations to BF16 (kernels.h act_bf16): the
     * packed row is exactly the RNE-rounded values in order, and the
     * reference below multiplies those. */
    static float xr[M * K_LONG];
    int pack_bad = 0;
    for (int i = 0; i < M * K; i++) {
        xr[i] = x[i];
        if (!kr->act_bf16) continue;
        uint16_t want = kipp_f32_to_bf16(x[i]), got;
        memcpy(&got, act + (i / K) * stride + (size_t)(i % K) * 2, 2);
        pack_bad += got != want;
        xr[i] = kipp_bf16_to_f32(want);
    }
    CHECKF(pack_bad == 0, "%s: %d packed activations are not their RNE BF16", kr->name, pack_bad);

    static float y_mm[M][N], y_mv[M][N], y_split[M][N];
    float *rows_mm[M], *rows_mv[1], *rows_split[M];
    for (int r = 0; r < M; r++) {
        rows_mm[r] = y_mm[r];
        rows_split[r] = y_split[r];
    }
    kr->matmul_bf16(w, K, 0, N, act, stride, M, rows_mm);
    /* matvec: one activation row at a time */
    for (int r = 0; r < M; r++) {
        rows_mv[0] = y_mv[r];
        kr->matmul_bf16(w, K, 0, N, act + r * stride, stride, 1, rows_mv);
    }
    /* matvec in two column ranges: [0, 29) too short for split decode
     * tiles, [29, N) split from an offset (kernels_blocked.h decode_rows) */
    static float y_mv2[M][N];
    for (int r = 0; r < M; r++) {
        rows_mv[0] = y_mv2[r];
        kr->matmul_bf16(w, K, 0, 29, act + r * stride, stride, 1, rows_mv);
        kr->matmul_bf16(w, K, 29, N, act + r * stride, stride, 1, rows_mv);
    }
    /* ragged column splits and a ragged subset of rows */
    kr->matmul_bf16(w, K, 0, 13, act, stride, M, rows_split);
    kr->matmul_bf16(w, K, 13, 41, act, stride, 5, rows_split);
    kr->matmul_bf16(w, K, 13, 41, act + 5 * stride, stride, M - 5, rows_split + 5);
    kr->matmul_bf16(w, K, 41, N, act, stride, M, rows_split);

    double worst = 0;
    for (int r = 0; r < M; r++)
        for (int n = 0; n < N; n++) {
            double ref = 0, mag = 0;
            for (int i = 0; i < K; i++) {
                double p = (double)kipp_bf16_to_f32(w[n * K + i]) * xr[r * K + i];
                ref += p;
                mag += fabs(p);
            }
            double e = rel_err(y_mm[r][n], ref, mag);
            if (e > worst) worst = e;
        }
    fprintf(stderr, "  %-10s matmul bf16 K=%d: worst error %.2e of sum|w*x| (bound %.0e)\n",
            kr->name, K, worst, tol);
    CHECKF(worst <= tol, "%s matmul: worst error %.3g of sum|w*x| > %.3g", kr->name, worst, tol);
    CHECKF(memcmp(y_mm, y_mv, sizeof y_mm) == 0, "%s: matmat rows differ from matvec", kr->name);
    /* An integer-dot tier's BF16 matmul is its base tier's, reading the
     * FP32 part of its records: the base tier's bits on its own packing. */
    const kipp_cpu_kernels *base = i8_base_tier(kr);
    if (base) {
        static uint8_t bact[M * K_LONG * 6 + 64 * M];
        static float y_base[M][N];
        float *rows_base[M];
        size_t bstride = base->act_bytes(K);
        for (int r = 0; r < M; r++) {
            base->pack_act(x + r * K, K, bact + r * bstride);
            rows_base[r] = y_base[r];
        }
        base->matmul_bf16(w, K, 0, N, bact, bstride, M, rows_base);
        CHECKF(memcmp(y_mm, y_base, sizeof y_mm) == 0, "%s: BF16 matmul differs from %s's bits",
               kr->name, base->name);
    }
    CHECKF(memcmp(y_mm, y_split, sizeof y_mm) == 0, "%s: column/row split changes bits",
           kr->name);
    CHECKF(memcmp(y_mv, y_mv2, sizeof y_mv) == 0, "%s: matvec column split changes bits",
           kr->name);
    /* The tier's PF_SEQ twin: the same table but for decode's prefetch and
     * tile height, so the same decode bits, whole and column-split. */
    if (kr->seq_twin) {
        const kipp_cpu_kernels *tw = kr->seq_twin;
        CHECKF(!strcmp(tw->name, kr->name) && tw->decode_seq && !kr->decode_seq &&
                   !tw->seq_twin && tw->pack_act == kr->pack_act &&
                   tw->attention == kr->attention && tw->act_bf16 == kr->act_bf16 &&
                   tw->act_i8 == kr->act_i8,
               "%s: the seq twin differs beyond the decode matmuls", kr->name);
        static float y_seq[M][N];
        for (int r = 0; r < M; r++) {
            rows_mv[0] = y_seq[r];
            tw->matmul_bf16(w, K, 0, 29, act + r * stride, stride, 1, rows_mv);
            tw->matmul_bf16(w, K, 29, N, act + r * stride, stride, 1, rows_mv);
        }
        CHECKF(memcmp(y_seq, y_mv, sizeof y_mv) == 0, "%s: PF_SEQ decode changes bits",
               kr->name);
    }
    /* A few activation rows (2..8: kernels_blocked.h few_rows, decode's
     * tiles over every row) in both prefetch tables, whole and in the two
     * column ranges: the matvec bits. */
    int few_diffs = 0;
    for (int t = 0; t < 2; t++) {
        const kipp_cpu_kernels *tk = t ? kr->seq_twin : kr;
        if (!tk) continue;
        for (int m = 2; m <= 8; m++) {
            static float y_few[M][N];
            float *rows_few[M];
            for (int r = 0; r < m; r++) rows_few[r] = y_few[r];
            tk->matmul_bf16(w, K, 0, 29, act + stride, stride, (uint32_t)m, rows_few);
            tk->matmul_bf16(w, K, 29, N, act + stride, stride, (uint32_t)m, rows_few);
            for (int r = 0; r < m; r++) few_diffs += memcmp(y_few[r], y_mv[r + 1], sizeof y_few[r]) != 0;
            tk->matmul_bf16(w, K, 0, N, act, stride, (uint32_t)m, rows_few);
            for (int r = 0; r < m; r++) few_diffs += memcmp(y_few[r], y_mv[r], sizeof y_few[r]) != 0;
        }
    }
    CHECKF(few_diffs == 0, "%s: %d rows of a 2..8-row matmul differ from matvec", kr->name,
           few_diffs);
    /* Packing a 32-aligned slice lands at byte offset act_bytes(off) (the
     * forward packs heads and thread column ranges separately). */
    static uint8_t act2[K_LONG * 6 + 64];
    kr->pack_act(x, 96, act2);
    kr->pack_act(x + 96, K - 96, act2 + kr->act_bytes(96));
    CHECKF(memcmp(act2, act, kr->act_bytes(K)) == 0, "%s: sliced pack differs", kr->name);
}

/* Prefill-sized BF16 calls (M_MANY activation rows: past the avx2 and
 * avx512 tiers' BF16_DECODE_MIN_ROWS, where their BF16 rows are decoded
 * once into FP32 rather than widened in every tile) give each row the bits one
 * activation row gives, with kipp_cpu_bf16_decode_once on and off (it is
 * off on AMD processors: both paths are held to the same bits wherever
 * the test runs), whole and split into column ranges. */
enum { M_MANY = 72 };
static void test_matmul_many_rows(const kipp_cpu_kernels *kr, int K) {
    static uint16_t w[N * K_LONG];
    static float x[K_LONG];
    static uint8_t act[M_MANY * (K_LONG * 6 + 64)];
    size_t stride = kr->act_bytes(K);
    for (int i = 0; i < N * K; i++) w[i] = kipp_f32_to_bf16(frand());
    for (int r = 0; r < M_MANY; r++) {
        for (int i = 0; i < K; i++) x[i] = frand() * 3.0f;
        kr->pack_act(x, K, act + r * stride);
    }
    static float y_mv[M_MANY][N], y_mm[M_MANY][N];
    float *rows[M_MANY];
    for (int r = 0; r < M_MANY; r++) {
        rows[0] = y_mv[r];
        kr->matmul_bf16(w, K, 0, N, act + r * stride, stride, 1, rows);
    }
    const int saved = kipp_cpu_bf16_decode_once;
    for (int once = 0; once < 2; once++) {
        kipp_cpu_bf16_decode_once = once;
        memset(y_mm, 0, sizeof y_mm);
        for (int r = 0; r < M_MANY; r++) rows[r] = y_mm[r];
        kr->matmul_bf16(w, K, 0, N, act, stride, M_MANY, rows);
        CHECKF(memcmp(y_mm, y_mv, sizeof y_mm) == 0,
               "%s: a %d-row BF16 matmul (K=%d, decode once %d) differs from matvec", kr->name,
               M_MANY, K, once);
        memset(y_mm, 0, sizeof y_mm);
        kr->matmul_bf16(w, K, 0, 13, act, stride, M_MANY, rows);
        kr->matmul_bf16(w, K, 13, N, act, stride, M_MANY, rows);
        CHECKF(memcmp(y_mm, y_mv, sizeof y_mm) == 0,
               "%s: a column-split %d-row BF16 matmul (K=%d, decode once %d) differs from matvec",
               kr->name, M_MANY, K, once);
    }
    kipp_cpu_bf16_decode_once = saved;
}

static void test_norm_rope_silu(const kipp_cpu_kernels *kr) {
    const double tol = RMSNORM_TOL;
    enum { H = 384 };
    float x[H], w[H], out[H], g[H], u[H], g0[H];
    for (int i = 0; i < H; i++) {
        x[i] = frand() * 4;
        w[i] = 1.0f + frand() * 0.5f;
        g[i] = g0[i] = frand() * 12;
        u[i] = frand() * 2;
    }
    kr->rmsnorm(out, x, w, H, 1e-6f);
    double ss = 0;
    for (int i = 0; i < H; i++) ss += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ss / H + 1e-6), worst = 0;
    for (int i = 0; i < H; i++) {
        double e = rel_err(out[i], x[i] * inv * w[i], fabs(x[i] * inv * w[i]) + 1e-3);
        if (e > worst) worst = e;
    }
    fprintf(stderr, "  %-7s rmsnorm: worst relative error %.2e (bound %.0e)\n", kr->name, worst,
            tol);
    CHECKF(worst <= tol, "%s rmsnorm: worst %.3g", kr->name, worst);

    float head[128], h0[128], cs[64], sn[64];
    for (int i = 0; i < 128; i++) head[i] = h0[i] = frand();
    for (int i = 0; i < 64; i++) {
        double a = 37.0 * pow(1e6, -2.0 * i / 128.0);
        cs[i] = (float)cos(a);
        sn[i] = (float)sin(a);
    }
    kr->rope(head, cs, sn);
    worst = 0;
    for (int i = 0; i < 64; i++) {
        double a = (double)h0[i] * cs[i] - (double)h0[i + 64] * sn[i];
        double b = (double)h0[i + 64] * cs[i] + (double)h0[i] * sn[i];
        double e = fmax(fabs(head[i] - a), fabs(head[i + 64] - b));
        if (e > worst) worst = e;
    }
    fprintf(stderr, "  %-7s rope: worst abs error %.2e (bound %.0e)\n", kr->name, worst, ROPE_TOL);
    CHECKF(worst <= ROPE_TOL, "%s rope: worst %.3g", kr->name, worst);

    kr->silu_mul(g, u, H);
    worst = 0;
    for (int i = 0; i < H; i++) {
        double want = g0[i] / (1.0 + exp(-(double)g0[i])) * u[i];
        double e = rel_err(g[i], want, fabs(want) + 1e-6);
        if (e > worst) worst = e;
    }
    fprintf(stderr, "  %-7s silu_mul: worst relative error %.2e (bound %.0e)\n", kr->name, worst,
            SILU_TOL);
    CHECKF(worst <= SILU_TOL, "%s silu_mul: worst %.3g", kr->name, worst);
    /* An integer-dot tier's norm, RoPE and SiLU are its base tier's bits. */
    const kipp_cpu_kernels *base = i8_base_tier(kr);
    if (base) {
        float bout[H], bhead[128], bg[H];
        memcpy(bhead, h0, sizeof bhead);
        memcpy(bg, g0, sizeof bg);
        base->rmsnorm(bout, x, w, H, 1e-6f);
        base->rope(bhead, cs, sn);
        base->silu_mul(bg, u, H);
        CHECKF(memcmp(bout, out, sizeof out) == 0 && memcmp(bhead, head, sizeof head) == 0 &&
                   memcmp(bg, g, sizeof g) == 0,
               "%s: rmsnorm, rope or silu_mul differ from %s's bits", kr->name, base->name);
    }
}

/* Block pointers of one KV head (kernels.h) through a block table. */
static kipp_cpu_kv_head kv_head(const uint16_t *k, const uint16_t *v, const uint32_t *table,
                                int n_blocks, const uint16_t **kb, const uint16_t **vb) {
    for (int i = 0; i < n_blocks; i++) {
        kb[i] = k + (size_t)table[i] * 32 * 1024;
        vb[i] = v + (size_t)table[i] * 32 * 1024;
    }
    return (kipp_cpu_kv_head){kb, vb, 1024};
}

/* Attention over a 5-block (160-position) cache for one KV head (head 3 of
 * 8), two query heads: against a double-precision softmax; bitwise equal
 * through a scrambled block table; and a multi-row call (rows sharing
 * blocks, rows at consecutive positions) bitwise equal to one call per row. */
static void test_attention(const kipp_cpu_kernels *kr) {
    enum { BLOCKS = 5, POS = BLOCKS * 32, G = 2, KVH = 3, NQ = 40 };
    static uint16_t k_id[POS * 1024], v_id[POS * 1024], k_sc[POS * 1024], v_sc[POS * 1024];
    uint32_t identity[BLOCKS] = {0, 1, 2, 3, 4}, scrambled[BLOCKS] = {3, 0, 4, 2, 1};
    const uint16_t *kb_id[BLOCKS], *vb_id[BLOCKS], *kb_sc[BLOCKS], *vb_sc[BLOCKS];
    kipp_cpu_kv_head h_id = kv_head(k_id + KVH * 128, v_id + KVH * 128, identity, BLOCKS, kb_id, vb_id);
    kipp_cpu_kv_head h_sc = kv_head(k_sc + KVH * 128, v_sc + KVH * 128, scrambled, BLOCKS, kb_sc, vb_sc);
    for (int p = 0; p < POS; p++)
        for (int d = 0; d < 1024; d++) {
            uint16_t kv = kipp_f32_to_bf16(frand() * 2), vv = kipp_f32_to_bf16(frand());
            size_t id = (size_t)p * 1024 + d;
            size_t sc = ((size_t)scrambled[p / 32] * 32 + p % 32) * 1024 + d;
            k_id[id] = kv;
            v_id[id] = vv;
            k_sc[sc] = kv;
            v_sc[sc] = vv;
        }
    static float q[NQ * G * 128], out[G * 128], out_sc[G * 128], out_rows[NQ * G * 128];
    static float scratch[KIPP_CPU_ATT_SCRATCH(NQ, G)];
    for (int i = 0; i < NQ * G * 128; i++) q[i] = frand() * 3;
    const float scale = 1.0f / sqrtf(128.0f);
    const uint32_t lengths[] = {1, 2, 31, 32, 33, 64, 100, 159, 160};
    double worst_all = 0;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        uint32_t n = lengths[li];
        kr->attention(q, G * 128, 1, G, n - 1, &h_id, scale, out, G * 128, scratch);
        kr->attention(q, G * 128, 1, G, n - 1, &h_sc, scale, out_sc, G * 128, scratch);
        CHECKF(memcmp(out, out_sc, sizeof out) == 0, "%s attention n=%u: scrambled table "
               "changes bits", kr->name, n);
        const kipp_cpu_kernels *base = i8_base_tier(kr); /* an integer-dot tier's: the same bits */
        if (base) {
            base->attention(q, G * 128, 1, G, n - 1, &h_id, scale, out_sc, G * 128, scratch);
            CHECKF(memcmp(out, out_sc, sizeof out) == 0, "%s attention n=%u: differs from %s's bits",
                   kr->name, n, base->name);
        }
        double worst = 0;
        for (int h = 0; h < G; h++) {
            double s[POS], mx = -1e300, sum = 0;
            for (uint32_t p = 0; p < n; p++) {
                double d = 0;
                for (int i = 0; i < 128; i++)
                    d += (double)q[h * 128 + i] * kipp_bf16_to_f32(k_id[p * 1024 + KVH * 128 + i]);
                s[p] = d * scale;
                if (s[p] > mx) mx = s[p];
            }
            for (uint32_t p = 0; p < n; p++) sum += (s[p] = exp(s[p] - mx));
            for (int i = 0; i < 128; i++) {
                double o = 0;
                for (uint32_t p = 0; p < n; p++)
                    o += s[p] / sum * kipp_bf16_to_f32(v_id[p * 1024 + KVH * 128 + i]);
                double e = fabs(out[h * 128 + i] - o);
                if (e > worst) worst = e;
            }
        }
        CHECKF(worst <= ATTENTION_TOL, "%s attention n=%u: worst abs error %.3g", kr->name, n, worst);
        worst_all = worst > worst_all ? worst : worst_all;
    }
    /* Rows at positions pos0 .. pos0 + nq - 1 in one call == one call each. */
    const uint32_t starts[][2] = {{0, 1}, {0, 40}, {5, 27}, {31, 2}, {60, 40}, {120, 40}, {100, 17}};
    for (size_t si = 0; si < sizeof starts / sizeof starts[0]; si++) {
        uint32_t pos0 = starts[si][0], nq = starts[si][1];
        kr->attention(q, G * 128, nq, G, pos0, &h_sc, scale, out_rows, G * 128, scratch);
        int bad = 0;
        for (uint32_t i = 0; i < nq; i++) {
            kr->attention(q + i * G * 128, G * 128, 1, G, pos0 + i, &h_id, scale, out, G * 128,
                          scratch);
            bad += memcmp(out, out_rows + i * G * 128, sizeof out) != 0;
        }
        CHECKF(bad == 0, "%s attention: %d of %u rows at %u.. differ from single-row calls",
               kr->name, bad, nq, pos0);
    }
    fprintf(stderr, "  %-7s attention: worst abs error %.2e (bound %.0e)\n", kr->name, worst_all,
            ATTENTION_TOL);
}

/* A query head's bits do not depend on the heads it shares a KV head with:
 * 5 query heads per KV head (Qwen3-14B's group; the AVX-512 tiers run
 * heads in pairs, the fifth alone) in one call, 1 and 24 rows, against
 * one call per head. */
static void test_attention_group(const kipp_cpu_kernels *kr) {
    enum { BLOCKS = 3, POS = BLOCKS * 32, G = 5, NQ = 24 };
    static uint16_t k[POS * 1024], v[POS * 1024];
    uint32_t table[BLOCKS] = {2, 0, 1};
    const uint16_t *kb[BLOCKS], *vb[BLOCKS];
    kipp_cpu_kv_head h = kv_head(k, v, table, BLOCKS, kb, vb);
    for (int i = 0; i < POS * 1024; i++) {
        k[i] = kipp_f32_to_bf16(frand() * 2);
        v[i] = kipp_f32_to_bf16(frand());
    }
    static float q[NQ * G * 128], out[NQ * G * 128], one[128];
    static float scratch[KIPP_CPU_ATT_SCRATCH(NQ, G)];
    for (int i = 0; i < NQ * G * 128; i++) q[i] = frand() * 3;
    const float scale = 1.0f / sqrtf(128.0f);
    const uint32_t runs[][2] = {{70, 1}, {0, 24}, {50, 24}};
    for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
        uint32_t pos0 = runs[ri][0], nq = runs[ri][1];
        kr->attention(q, G * 128, nq, G, pos0, &h, scale, out, G * 128, scratch);
        int bad = 0;
        for (uint32_t i = 0; i < nq; i++)
            for (int hd = 0; hd < G; hd++) {
                kr->attention(q + ((size_t)i * G + hd) * 128, 128, 1, 1, pos0 + i, &h, scale, one,
                              128, scratch);
                bad += memcmp(one, out + ((size_t)i * G + hd) * 128, sizeof one) != 0;
            }
        CHECKF(bad == 0, "%s attention: %d of %u (row, head) outputs of a 5-head group differ "
               "from one-head calls (rows from %u)", kr->name, bad, nq * G, pos0);
    }
}

/* Softmax weights below FP32's normal range are exactly 0 on every tier
 * (kernels.h KIPP_CPU_EXP_MIN): q = +-1 in every dimension over 64
 * positions whose K rows are 0 but for +127/16 at position 40 and -127/16
 * at 5, so each head's scores are 0 and +-89.8 -- head 0's maximum
 * (position 40) comes in the second block, so its first block's sums are
 * rescaled by exp(-89.8); head 1's (position 5) in the first, so its other
 * positions weigh exp(-89.8) (a subnormal, 9.9e-40). V is 0 in dimensions
 * 0-63 at the two maximum positions and 127/128 elsewhere, so those
 * outputs are what the far positions leave: exactly 0 with the flush (a
 * gradual underflow leaves ~6e-38, avx2's old clamp at exp(-87.3) more),
 * and dimensions 64-127 exactly 127/128. The same through the Q8_0 KV path
 * (every value here is exact in BF16 and in Q8_0: scales 1/16 and 1/128). */
static void test_attention_underflow(const kipp_cpu_kernels *kr) {
    enum { BLOCKS = 2, POS = BLOCKS * 32, G = 2 };
    static uint16_t k[POS * 128], v[POS * 128];
    static kipp_block_q8_0 kq[POS * 4], vq[POS * 4];
    for (int p = 0; p < POS; p++)
        for (int d = 0; d < 128; d++) {
            float kf = p == 40 ? 7.9375f : p == 5 ? -7.9375f : 0.0f;
            float vf = (p == 40 || p == 5) && d < 64 ? 0.0f : 0.9921875f;
            k[p * 128 + d] = kipp_f32_to_bf16(kf);
            v[p * 128 + d] = kipp_f32_to_bf16(vf);
        }
    float kf[128], vf[128];
    for (int p = 0; p < POS; p++) {
        for (int d = 0; d < 128; d++) {
            kf[d] = kipp_bf16_to_f32(k[p * 128 + d]);
            vf[d] = kipp_bf16_to_f32(v[p * 128 + d]);
        }
        kipp_quantize_q8_0(kf, 128, kq + p * 4);
        kipp_quantize_q8_0(vf, 128, vq + p * 4);
    }
    const uint16_t *kb[BLOCKS] = {k, k + 32 * 128}, *vb[BLOCKS] = {v, v + 32 * 128};
    const kipp_block_q8_0 *kqb[BLOCKS] = {kq, kq + 32 * 4}, *vqb[BLOCKS] = {vq, vq + 32 * 4};
    kipp_cpu_kv_head h = {kb, vb, 128};
    kipp_cpu_kv_head_q8 hq = {kqb, vqb, 4};
    static float q[G * 128], out[G * 128], scratch[KIPP_CPU_ATT_SCRATCH(1, G)];
    for (int i = 0; i < 128; i++) {
        q[i] = 1.0f;
        q[128 + i] = -1.0f;
    }
    const float scale = 1.0f / sqrtf(128.0f);
    for (int cache = 0; cache < 2; cache++) {
        if (cache == 0)
            kr->attention(q, G * 128, 1, G, POS - 1, &h, scale, out, G * 128, scratch);
        else
            kr->attention_q8_0(q, G * 128, 1, G, POS - 1, &hq, scale, out, G * 128, scratch);
        int bad = 0;
        for (int i = 0; i < G * 128; i++) bad += out[i] != (i % 128 < 64 ? 0.0f : 0.9921875f);
        CHECKF(bad == 0, "%s attention (%s cache): %d of %d outputs are not exactly 0 / 127/128 with "
               "weights under exp(-87.3) (out[0] = %g, out[128] = %g)", kr->name,
               cache ? "q8_0" : "bf16", bad, G * 128, (double)out[0], (double)out[128]);
    }
}

typedef struct pool_ctx {
    uint32_t total;
    int hits[1000];
    int units[64];
} pool_ctx;

static void pool_fn(void *ctx, uint32_t unit, uint32_t n_units, int tid) {
    pool_ctx *c = ctx;
    uint32_t b, e;
    kipp_pool_split(c->total, 32, unit, n_units, &b, &e);
    for (uint32_t i = b; i < e; i++) c->hits[i] += 1; /* each item exactly once */
    c->units[unit] += 1; /* CHECK is not thread-safe: verified by the caller */
    (void)tid;
}

static void test_pool(void) {
    for (int threads = 1; threads <= 4; threads++) {
        kipp_pool *p = NULL;
        kipp_error err = {0};
        CHECK(kipp_pool_create(threads, &p, &err) == KIPP_OK);
        if (!p) continue;
        CHECK(kipp_pool_threads(p) == threads);
        static pool_ctx c;
        for (int round = 0; round < 200; round++) {
            memset(&c, 0, sizeof c);
            c.total = (uint32_t)(round * 7 % 1000);
            uint32_t n_units = 1 + (uint32_t)round % 40;
            kipp_pool_run(p, pool_fn, &c, n_units);
            int bad = 0;
            for (uint32_t u = 0; u < 64; u++) bad += c.units[u] != (u < n_units);
            for (uint32_t i = 0; i < c.total; i++) bad += c.hits[i] != 1;
            for (uint32_t i = c.total; i < 1000; i++) bad += c.hits[i] != 0;
            CHECKF(bad == 0, "pool %d threads, total %u: %d items not covered once", threads,
                   c.total, bad);
        }
        kipp_pool_destroy(p);
    }
}

/* Guided units (the cpu backend's column regions): every item exactly
 * once, in order, in whole grains; each unit no longer than the one before
 * (the last may be cut short by the end); the first takes 1 / (2 threads)
 * of the work, rounded up; none shorter than min_grains but the last. */
static void test_pool_guided(void) {
    const uint32_t totals[] = {0, 1, 31, 32, 33, 1024, 2048 + 2 * 1024, 3072, 151936, 100000};
    for (size_t ti = 0; ti < sizeof totals / sizeof *totals; ti++)
        for (int threads = 1; threads <= 8; threads++)
            for (uint32_t min_g = 1; min_g <= 3; min_g++) {
                uint32_t total = totals[ti], grains = (total + 31) / 32;
                static uint32_t bounds[KIPP_POOL_GUIDED_MAX(151936u, 32u)];
                uint32_t n = kipp_pool_guided_plan(total, 32, min_g, threads, bounds);
                uint32_t at = 0, prev = UINT32_MAX;
                int bad = n >= KIPP_POOL_GUIDED_MAX(total, 32u);
                for (uint32_t u = 0; u < n && !bad; u++) {
                    uint32_t b = bounds[u], e = bounds[u + 1];
                    uint32_t len = e - b;
                    bad += b != at || e <= b || b % 32 != 0;
                    bad += u + 1 < n && (e % 32 != 0 || len > prev || len < min_g * 32);
                    if (u == 0) {
                        uint32_t want = (grains + 2 * threads - 1) / (2 * threads);
                        if (want < min_g) want = min_g;
                        bad += (e - b + 31) / 32 != (want < grains ? want : grains);
                    }
                    prev = len;
                    at = e;
                }
                bad += at != total || bounds[0] != 0;
                /* a harmonic-like count, not one unit per grain */
                bad += total >= 1024 && n > 2 * (uint32_t)threads * 24;
                CHECKF(bad == 0, "guided split total %u, %d threads, min %u grains: %d faults in "
                       "%u units", total, threads, min_g, bad, n);
            }
}

/* Forcing the integer-dot tier isa (name): where the processor has it, a
 * table of its own (8-bit activations, its own packing and quantized
 * matmuls) beside its base tier's; elsewhere refused, naming the tier and
 * the feature it needs. */
static void check_forced_i8(kipp_cpu_isa isa, const char *name, const char *base_name,
                            const char *needs) {
    char why[192] = "";
    const kipp_cpu_kernels *k =
        kipp_cpu_select_kernels(isa, KIPP_CPU_DECODE_PREFETCH_ROWS, why, sizeof why);
    if (!test_tier_lacks(name)) {
        const kipp_cpu_kernels *b = kipp_cpu_kernels_by_name(base_name);
        CHECKF(k && b && strcmp(k->name, name) == 0 && k->act_i8 && !k->act_bf16 &&
                   !k->qweights_bf16 && k->pack_act != b->pack_act &&
                   k->matmul_q4_0 != b->matmul_q4_0 && k->matmul_q8_0 != b->matmul_q8_0,
               "forced %s: %s", name, k ? k->name : why);
    } else {
        CHECKF(!k && strstr(why, name) && strstr(why, needs), "%s without %s: %s", name, needs,
               k ? k->name : why);
    }
}

/* auto is the best exact tier this processor has, never the opt-in
 * avx512bf16 (its BF16 activations may flip an oracle near-tie; DESIGN
 * section 7, docs/ARCHITECTURE.md). Forcing avx512bf16 opens it where
 * CPUID has it and is refused with a message naming AVX512_BF16 elsewhere.
 * Both regardless of KIPP_CPU_ISA: dispatch.c reads no environment. */
static void test_auto_tier(void) {
    const char *best = "generic";
    if (!test_tier_lacks("avx2")) best = "avx2";
    if (!test_tier_lacks("avx512")) best = "avx512";
    char why[192] = "";
    const kipp_cpu_kernels *k =
        kipp_cpu_select_kernels(KIPP_CPU_ISA_AUTO, KIPP_CPU_DECODE_PREFETCH_AUTO, why, sizeof why);
    CHECKF(k && strcmp(k->name, best) == 0 && !k->act_bf16 && !k->act_i8, "auto picks %s, want %s",
           k ? k->name : "nothing", best);
    /* The decode prefetch: auto resolves to rows or seq, the table follows
     * it on SIMD tiers, each forced value gives its table, and an unknown
     * value is refused by name. */
    kipp_cpu_decode_prefetch pf = kipp_cpu_decode_prefetch_resolve(KIPP_CPU_DECODE_PREFETCH_AUTO);
    CHECK(pf == KIPP_CPU_DECODE_PREFETCH_ROWS || pf == KIPP_CPU_DECODE_PREFETCH_SEQ);
    if (k && strcmp(best, "generic") != 0)
        CHECKF(k->decode_seq == (pf == KIPP_CPU_DECODE_PREFETCH_SEQ),
               "auto table's decode prefetch is not what auto resolves to (%s)",
               kipp_cpu_decode_prefetch_name(pf));
    if (strcmp(best, "generic") != 0) {
        const kipp_cpu_kernels *r = kipp_cpu_select_kernels(
            KIPP_CPU_ISA_AUTO, KIPP_CPU_DECODE_PREFETCH_ROWS, why, sizeof why);
        const kipp_cpu_kernels *q = kipp_cpu_select_kernels(
            KIPP_CPU_ISA_AUTO, KIPP_CPU_DECODE_PREFETCH_SEQ, why, sizeof why);
        CHECKF(r && q && !r->decode_seq && q->decode_seq && r->seq_twin == q,
               "forced decode prefetch rows/seq: wrong tables");
    }
    CHECK(kipp_cpu_select_kernels(KIPP_CPU_ISA_AUTO, (kipp_cpu_decode_prefetch)7, why,
                                  sizeof why) == NULL &&
          strstr(why, "decode prefetch 7"));
    CHECK(kipp_cpu_decode_prefetch_name((kipp_cpu_decode_prefetch)7) == NULL);
    k = kipp_cpu_select_kernels(KIPP_CPU_ISA_AVX512BF16, KIPP_CPU_DECODE_PREFETCH_AUTO, why,
                                sizeof why);
    if (!test_tier_lacks("avx512bf16"))
        CHECKF(k && strcmp(k->name, "avx512bf16") == 0 && k->act_bf16, "forced avx512bf16: %s",
               k ? k->name : why);
    else
        CHECKF(!k && strstr(why, "avx512bf16") && strstr(why, "AVX512_BF16"),
               "avx512bf16 without the extension: %s", k ? k->name : why);
    /* avx2i8 and avx512i8: opt-in, avx2's (avx512's) table but for the
     * quantized matmuls and the activation records they need; refused by
     * name without AVX2 (AVX512_VNNI). */
    check_forced_i8(KIPP_CPU_ISA_AVX2I8, "avx2i8", "avx2", "AVX2");
    check_forced_i8(KIPP_CPU_ISA_AVX512I8, "avx512i8", "avx512", "AVX512_VNNI");
    /* amx: opt-in as well, the avx512bf16 table but for its matmuls. The
     * tests' emulated stand-in (test_tiers.h) is set aside for this: a
     * processor without AMX refuses the tier. */
    const kipp_cpu_kernels *stand_in = kipp_cpu_amx_stand_in;
    kipp_cpu_amx_stand_in = NULL;
    k = kipp_cpu_select_kernels(KIPP_CPU_ISA_AMX, KIPP_CPU_DECODE_PREFETCH_AUTO, why, sizeof why);
    kipp_cpu_amx_stand_in = stand_in;
    if (!test_tier_lacks("amx")) {
        const kipp_cpu_kernels *b = kipp_cpu_kernels_by_name("avx512bf16");
        CHECKF(k && b && strcmp(k->name, "amx") == 0 && k->act_bf16 && k->qweights_bf16 &&
                   k->pack_act == b->pack_act && k->matmul_bf16 == kipp_cpu_amx_matmul_bf16,
               "forced amx: %s", k ? k->name : why);
    } else {
        CHECKF(!k && strstr(why, "amx") && strstr(why, "AMX-TILE"),
               "amx without the extension: %s", k ? k->name : why);
    }
}

#if defined(__x86_64__)
#include <immintrin.h>
/* 8 halves through the F16C instruction the SIMD tiers used to convert
 * block scales with (compiled for F16C here only; called only where the
 * avx2 tier, which requires F16C, runs). */
__attribute__((target("avx,f16c"))) static void f16c_convert8(const uint16_t *h, float *out) {
    _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
}
#endif

/* The SIMD tiers read FP16 block scales from kipp_cpu_f16_table (kernels.h),
 * filled by the oracle's software conversion: every one of the 65,536
 * entries must be what the processor's own F16C conversion gives, bit for
 * bit (NaNs: a NaN), or the tiers would decode other weights than before
 * and than the oracle (subnormal scales included). An independent
 * conversion, not the code that filled the table. */
static void test_f16_table(void) {
#if defined(__x86_64__)
    if (test_tier_lacks("avx2")) return; /* no F16C: the SIMD tiers do not run */
    CHECK(kipp_cpu_kernels_by_name("avx2") != NULL); /* fills the table */
    int wrong = 0;
    for (uint32_t h = 0; h < 65536; h += 8) {
        uint16_t in[8];
        float hw[8];
        for (int i = 0; i < 8; i++) in[i] = (uint16_t)(h + (uint32_t)i);
        f16c_convert8(in, hw);
        for (int i = 0; i < 8; i++) {
            float t = kipp_cpu_f16_table[h + (uint32_t)i];
            wrong += isnan(hw[i]) ? !isnan(t) : memcmp(&t, &hw[i], 4) != 0;
        }
    }
    CHECKF(wrong == 0, "%d FP16 table entries differ from the F16C conversion", wrong);
#endif
}

int main(void) {
    int ran = 0;
    test_f16_table();
    for (int t = 0; t < TEST_TIER_COUNT; t++) {
        const kipp_cpu_kernels *kr = test_tier_kernels(t);
        if (!kr) continue;
        CHECK(strcmp(kr->name, test_tier_names[t]) == 0);
        ran++;
        test_matmul(kr, K_SHORT);
        test_matmul(kr, K_LONG);
        test_matmul_many_rows(kr, K_SHORT);
        test_matmul_many_rows(kr, K_LONG);
        test_norm_rope_silu(kr);
        test_attention(kr);
        test_attention_group(kr);
        test_attention_underflow(kr);
    }
    CHECK(ran >= 1);
    CHECK(kipp_cpu_kernels_by_name("nonsense") == NULL);
    test_auto_tier();
    test_pool();
    test_pool_guided();
    return test_finish("test_cpu_kernels");
}
