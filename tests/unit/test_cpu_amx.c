/* The AMX tier's matmuls (src/cpu/amx_matmul.h), BF16 and quantized
 * (Q8_0, Q4_0, Q4_1: blocks decoded to BF16 by the avx512bf16 tier's
 * decoder into the same tiles), on every machine with AVX-512 BF16, AMX or
 * not. The references multiply each weight as the tier does: the BF16
 * weight, or the oracle's dequantized weight rounded to BF16 (RNE).
 *
 * (a) Emulated (tests/unit/amx_emulated.c: the same source over the C tile
 *     operations of amx_tiles.h) against a plain scalar loop written here
 *     from the instruction reference -- per output, for each BF16 pair of K
 *     in order, acc = fma(x[2p], w[2p], acc), then the same with 2p + 1,
 *     denormal inputs as zero, denormal sums flushed -- bit for bit, over
 *     shapes that cross every edge of the tiling: K of one chunk, of a
 *     whole span, one chunk past a span, three spans; weight-row ranges
 *     that start mid-group and end in 1- and 17-row tails; activation rows
 *     1 (decode, the swapped operands), 2, 15, 16, 17, 31, 32, 33, 50; a
 *     row stride wider than the row. Outputs outside [n0, n1) must keep
 *     their sentinel. That pins the repacking, tile shapes, span carry and
 *     tail handling.
 * (b) Batch invariance of the emulated path: row i of an m-row call equals
 *     a one-row call (decode) on row i, bit for bit.
 * (c) A bound against a double-precision dot product (|err| <= K 2^-23
 *     sum |x w|), so (a)'s reference is not merely agreeing with itself.
 * (d) Where the processor has AMX (and the OS grants it), the real tier's
 *     matmul on the same shapes: within (c)'s bound, decode == prefill bit
 *     for bit, and how many outputs equal the emulation (reported; the
 *     reference does not promise the silicon rounds each addition). Else
 *     that part is a named machine skip.
 * A tier-level check runs too where AMX exists: test_cpu_kernels,
 * test_cpu_qkernels and test_cpu_backend walk "amx" with the other tiers. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "test_tiers.h"
#include "test_util.h"

void test_amx_emulated_matmul(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1,
                              const void *x, size_t x_stride, uint32_t m, float *const *y);
void test_amx_emulated_matmul_q(int q, const void *w, uint32_t k, uint32_t n0, uint32_t n1,
                                const void *x, size_t x_stride, uint32_t m, float *const *y);

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rng_float(void) { return ((float)(rng() % 20001) - 10000.0f) / 10000.0f; }

static uint16_t bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
static float bf16_value(uint16_t h, int daz) {
    if (daz && !(h & 0x7f80)) h &= 0x8000;
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float flush(float f) { return fabsf(f) < 0x1p-126f ? copysignf(0.0f, f) : f; }

/* The instruction reference's sequence for one output. */
static float ref_dot(const uint16_t *x, const uint16_t *w, uint32_t k) {
    float acc = 0.0f;
    for (uint32_t p = 0; p < k / 2; p++) {
        acc = flush(fmaf(bf16_value(x[2 * p], 1), bf16_value(w[2 * p], 1), acc));
        acc = flush(fmaf(bf16_value(x[2 * p + 1], 1), bf16_value(w[2 * p + 1], 1), acc));
    }
    return acc;
}

/* The matmuls under test: the emulated build, or a tier's table. */
typedef struct engine {
    const char *label;
    int emulated;
    const kipp_cpu_kernels *kern; /* NULL: emulated */
} engine;

/* Weight formats: -1 BF16, else kipp_cpu_qtype. */
static const char *const format_names[4] = {"bf16", "q8_0", "q4_0", "q4_1"};

static void call(const engine *e, int q, const void *w, uint32_t k, uint32_t n0, uint32_t n1,
                 const void *x, size_t x_stride, uint32_t m, float *const *y) {
    if (!e->kern) {
        if (q < 0)
            test_amx_emulated_matmul(w, k, n0, n1, x, x_stride, m, y);
        else
            test_amx_emulated_matmul_q(q, w, k, n0, n1, x, x_stride, m, y);
        return;
    }
    if (q < 0) e->kern->matmul_bf16(w, k, n0, n1, x, x_stride, m, y);
    if (q == KIPP_CPU_Q8_0) e->kern->matmul_q8_0(w, k, n0, n1, x, x_stride, m, y);
    if (q == KIPP_CPU_Q4_0) e->kern->matmul_q4_0(w, k, n0, n1, x, x_stride, m, y);
    if (q == KIPP_CPU_Q4_1) e->kern->matmul_q4_1(w, k, n0, n1, x, x_stride, m, y);
}

/* n rows of k weights in format q: the matrix the kernel reads (returned)
 * and, in wref, each weight as the tier multiplies it -- the oracle's
 * dequantized value rounded to BF16 (RNE), or the BF16 weight itself. */
static void *make_weights(int q, uint32_t n, uint32_t k, uint16_t *wref) {
    float *row = malloc(k * sizeof *row), *deq = malloc(k * sizeof *deq);
    size_t nb = k / 32;
    size_t row_bytes = q < 0 ? k * 2
                       : q == KIPP_CPU_Q8_0 ? nb * sizeof(kipp_block_q8_0)
                       : q == KIPP_CPU_Q4_0 ? nb * sizeof(kipp_block_q4_0)
                                            : nb * sizeof(kipp_block_q4_1);
    uint8_t *w = malloc(n * row_bytes);
    for (uint32_t r = 0; r < n; r++) {
        for (uint32_t i = 0; i < k; i++) row[i] = rng_float() * (1.0f + (float)(r % 5));
        uint8_t *dst = w + r * row_bytes;
        if (q < 0) {
            for (uint32_t i = 0; i < k; i++) ((uint16_t *)dst)[i] = bf16_rne(row[i]);
            memcpy(wref + (size_t)r * k, dst, row_bytes);
            continue;
        }
        if (q == KIPP_CPU_Q8_0) {
            kipp_quantize_q8_0(row, k, (kipp_block_q8_0 *)dst);
            kipp_dequantize_q8_0((const kipp_block_q8_0 *)dst, k, deq);
        } else if (q == KIPP_CPU_Q4_0) {
            kipp_quantize_q4_0(row, k, (kipp_block_q4_0 *)dst);
            kipp_dequantize_q4_0((const kipp_block_q4_0 *)dst, k, deq);
        } else {
            kipp_quantize_q4_1(row, k, (kipp_block_q4_1 *)dst);
            kipp_dequantize_q4_1((const kipp_block_q4_1 *)dst, k, deq);
        }
        for (uint32_t i = 0; i < k; i++) wref[(size_t)r * k + i] = bf16_rne(deq[i]);
    }
    free(row);
    free(deq);
    return w;
}

#define SENTINEL (-12345.0f)

/* y rows of n floats, filled with the sentinel; returns the row pointers. */
static float **out_rows(uint32_t m, uint32_t n) {
    float **y = malloc(m * sizeof *y);
    for (uint32_t i = 0; i < m; i++) {
        y[i] = malloc(n * sizeof **y);
        for (uint32_t j = 0; j < n; j++) y[i][j] = SENTINEL;
    }
    return y;
}
static void free_rows(float **y, uint32_t m) {
    for (uint32_t i = 0; i < m; i++) free(y[i]);
    free(y);
}

typedef struct amx_case {
    uint32_t k, n, n0, n1, m;
} amx_case;

/* Counters for (d): outputs equal to the emulation, and all compared. */
static long hw_same, hw_total;

static void run_case(const engine *e, int q, const amx_case *c) {
    const uint32_t k = c->k, n = c->n, m = c->m;
    const int emulated = e->emulated;
    char label[64];
    snprintf(label, sizeof label, "%s %s", e->label, format_names[q + 1]);
    const size_t x_stride = (size_t)k * 2 + 64 * (m % 3); /* wider than a row, sometimes */
    uint16_t *wref = malloc((size_t)n * k * sizeof *wref);
    void *w = make_weights(q, n, k, wref);
    char *x = calloc(m, x_stride);
    for (uint32_t r = 0; r < m; r++) {
        uint16_t *row = (uint16_t *)(x + r * x_stride);
        for (uint32_t i = 0; i < k; i++) row[i] = bf16_rne(rng_float());
        /* A few denormal and zero inputs: they must read as zero. */
        row[(r * 7) % k] = 0x0001;
        row[(r * 11 + 3) % k] = 0x8000;
    }
    if (q < 0) ((uint16_t *)w)[(size_t)c->n0 * k + 5] = wref[(size_t)c->n0 * k + 5] = 0x0003;
    float **y = out_rows(m, n), **y1 = out_rows(1, n);
    call(e, q, w, k, c->n0, c->n1, x, x_stride, m, y);
    long wrong = 0, unbounded = 0, touched = 0, variant = 0;
    for (uint32_t r = 0; r < m; r++) {
        const uint16_t *xr = (const uint16_t *)(x + r * x_stride);
        call(e, q, w, k, c->n0, c->n1, xr, x_stride, 1, y1); /* the same row alone: decode */
        for (uint32_t j = 0; j < n; j++) {
            if (j < c->n0 || j >= c->n1) {
                touched += y[r][j] != SENTINEL || y1[0][j] != SENTINEL;
                continue;
            }
            const uint16_t *wr = wref + (size_t)j * k;
            float want = ref_dot(xr, wr, k);
            double exact = 0, mag = 0;
            for (uint32_t i = 0; i < k; i++) {
                double p = (double)bf16_value(xr[i], 1) * bf16_value(wr[i], 1);
                exact += p, mag += fabs(p);
            }
            unbounded += fabs((double)y[r][j] - exact) > k * 0x1p-23 * mag + 0x1p-120;
            variant += memcmp(&y[r][j], &y1[0][j], sizeof(float)) != 0;
            if (emulated) {
                if (memcmp(&y[r][j], &want, sizeof want) != 0 && wrong++ < 3)
                    fprintf(stderr, "  %s k %u rows [%u, %u) m %u: y[%u][%u] = %.9g, reference %.9g\n",
                            label, k, c->n0, c->n1, m, r, j, y[r][j], want);
            } else {
                hw_same += memcmp(&y[r][j], &want, sizeof want) == 0;
                hw_total++;
            }
        }
    }
    CHECKF(wrong == 0, "%s k %u rows [%u, %u) m %u: %ld outputs differ from the reference", label,
           k, c->n0, c->n1, m, wrong);
    CHECKF(variant == 0, "%s k %u rows [%u, %u) m %u: %ld outputs differ between the m-row call "
           "and one-row calls", label, k, c->n0, c->n1, m, variant);
    CHECKF(unbounded == 0, "%s k %u rows [%u, %u) m %u: %ld outputs off the double dot by more "
           "than K 2^-23 sum |x w|", label, k, c->n0, c->n1, m, unbounded);
    CHECKF(touched == 0, "%s k %u rows [%u, %u) m %u: %ld outputs outside the rows written", label,
           k, c->n0, c->n1, m, touched);
    free_rows(y, m);
    free_rows(y1, 1);
    free(x);
    free(w);
    free(wref);
}

static const amx_case cases[] = {
    {32, 32, 0, 32, 1},    {32, 32, 0, 32, 2},      {64, 48, 16, 48, 17},
    {1024, 64, 0, 64, 16}, {1024, 64, 3, 20, 33},   {1056, 40, 0, 40, 32},
    {1056, 40, 7, 40, 15}, {3072, 32, 0, 32, 50},   {3072, 33, 1, 33, 1},
    {2048, 96, 32, 96, 31}, {128, 17, 0, 17, 5},    {96, 64, 31, 64, 2},
};

/* Every case in BF16; the quantized formats on every other case (their
 * decode feeds the same tiles, so the tiling edges are the BF16 run's). */
static void run_all(const engine *e) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int q = -1; q <= KIPP_CPU_Q4_1; q++)
            if (q < 0 || (i + (size_t)q) % 2 == 0) run_case(e, q, &cases[i]);
}

int main(void) {
#if defined(__x86_64__)
    /* The emulated build needs AVX-512; its quantized rows, the avx512bf16
     * tier's decoder (AVX512_BF16). */
    const char *lacks = test_tier_lacks("avx512bf16");
    if (lacks) return test_skip_all(TEST_SKIP_MACHINE, lacks);
    /* Handing out a tier fills the FP16 scale table the block decoders
     * read (dispatch.c), as opening a model does before any matmul. */
    CHECK(kipp_cpu_kernels_by_name("avx512bf16") != NULL);
    const engine emu = {"emulated", 1, NULL};
    run_all(&emu);

    const kipp_cpu_kernels *amx = kipp_cpu_kernels_by_name("amx");
    const char *hw_lacks = test_tier_lacks("amx");
    CHECKF(!amx == !!hw_lacks, "tier amx: dispatch says %s, cpuid says %s",
           amx ? "available" : "unavailable", hw_lacks ? hw_lacks : "available");
    if (amx) {
        CHECK(amx->act_bf16 == 1 && strcmp(amx->name, "amx") == 0);
        const engine hw = {"amx", 0, amx};
        run_all(&hw);
        fprintf(stderr, "amx hardware: %ld of %ld outputs equal the emulation bit for bit\n",
                hw_same, hw_total);
    } else {
        test_skip_part(TEST_SKIP_MACHINE, "amx hardware", hw_lacks ? hw_lacks : "refused");
    }
#else
    return test_skip_all(TEST_SKIP_MACHINE, "not an x86-64 processor");
#endif
    return test_finish("test_cpu_amx");
}
