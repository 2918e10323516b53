/* Block formats: exactness against the fp16-rounded scale, error bounds,
 * edge blocks, and the ggml nibble order written out by hand from the
 * published layout (byte j: element j low nibble, element j+16 high). */
#include <math.h>
#include <stdint.h>

#include <stdlib.h>
#include <string.h>

#include "core/artifact.h"
#include "core/common.h"
#include "core/quant.h"
#include "test_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(void) { /* [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static void test_random_error_bounds(void) {
    float x[32 * 64], y[32 * 64];
    for (int i = 0; i < 32 * 64; i++) x[i] = uniform() * (1.0f + (float)(i / 32));
    kipp_block_q8_0 q8[64];
    kipp_block_q4_0 q40[64];
    kipp_block_q4_1 q41[64];
    kipp_quantize_q8_0(x, 32 * 64, q8);
    kipp_dequantize_q8_0(q8, 32 * 64, y);
    for (int b = 0; b < 64; b++) {
        float d = kipp_fp16_to_f32(q8[b].d);
        for (int i = 0; i < 32; i++) CHECK(fabsf(y[b * 32 + i] - x[b * 32 + i]) <= d * 0.5f * 1.0001f);
    }
    kipp_quantize_q4_0(x, 32 * 64, q40);
    kipp_dequantize_q4_0(q40, 32 * 64, y);
    for (int b = 0; b < 64; b++) {
        float d = fabsf(kipp_fp16_to_f32(q40[b].d));
        /* Q4_0 spans [-8d, 7d]: on the side opposite the extreme the top
         * value 8d clamps to 7d, so the bound there is d, elsewhere d/2. */
        for (int i = 0; i < 32; i++) {
            float err = fabsf(y[b * 32 + i] - x[b * 32 + i]);
            float lim = fabsf(x[b * 32 + i]) > 7.0f * d ? d : d * 0.5f;
            CHECK(err <= lim * 1.0001f);
        }
    }
    kipp_quantize_q4_1(x, 32 * 64, q41);
    kipp_dequantize_q4_1(q41, 32 * 64, y);
    for (int b = 0; b < 64; b++) {
        float d = kipp_fp16_to_f32(q41[b].d);
        for (int i = 0; i < 32; i++) CHECK(fabsf(y[b * 32 + i] - x[b * 32 + i]) <= d * 0.5f * 1.001f + 1e-3f * d);
    }
}

/* Values that are exactly d16 * q decode back exactly: the encoder divided
 * by the same fp16-rounded d the decoder multiplies by. */
static void test_exact_on_rounded_scale(void) {
    float d = kipp_fp16_to_f32(kipp_f32_to_fp16(0.0137f)); /* not a power of two */
    float x[32], y[32];
    for (int i = 0; i < 32; i++) x[i] = d * (float)((i * 37) % 255 - 127);
    x[5] = d * 127.0f; /* make amax/127 == d exactly */
    kipp_block_q8_0 q8;
    kipp_quantize_q8_0(x, 32, &q8);
    CHECK(kipp_fp16_to_f32(q8.d) == d);
    kipp_dequantize_q8_0(&q8, 32, y);
    for (int i = 0; i < 32; i++) CHECKF(y[i] == x[i], "q8_0 element %d: %g vs %g", i, y[i], x[i]);

    /* Q4_0: extreme -8d at element 3 */
    for (int i = 0; i < 32; i++) x[i] = d * (float)(i % 16 - 8);
    x[3] = -8.0f * d;
    kipp_block_q4_0 q40;
    kipp_quantize_q4_0(x, 32, &q40);
    CHECK(kipp_fp16_to_f32(q40.d) == d);
    kipp_dequantize_q4_0(&q40, 32, y);
    for (int i = 0; i < 32; i++) CHECKF(y[i] == x[i], "q4_0 element %d: %g vs %g", i, y[i], x[i]);

    /* Q4_1: min m (fp16-exact), values m + d*q */
    float m = kipp_fp16_to_f32(kipp_f32_to_fp16(-0.25f));
    for (int i = 0; i < 32; i++) x[i] = m + d * (float)(i % 16);
    kipp_block_q4_1 q41;
    kipp_quantize_q4_1(x, 32, &q41);
    kipp_dequantize_q4_1(&q41, 32, y);
    for (int i = 0; i < 32; i++) CHECKF(fabsf(y[i] - x[i]) <= 1e-6f, "q4_1 element %d: %g vs %g", i, y[i], x[i]);
}

static void test_edge_blocks(void) {
    float zeros[32] = {0}, y[32];
    kipp_block_q8_0 q8;
    kipp_block_q4_0 q40;
    kipp_block_q4_1 q41;
    kipp_quantize_q8_0(zeros, 32, &q8);
    kipp_dequantize_q8_0(&q8, 32, y);
    for (int i = 0; i < 32; i++) CHECK(y[i] == 0.0f);
    kipp_quantize_q4_0(zeros, 32, &q40);
    kipp_dequantize_q4_0(&q40, 32, y);
    for (int i = 0; i < 32; i++) CHECK(y[i] == 0.0f);
    kipp_quantize_q4_1(zeros, 32, &q41);
    kipp_dequantize_q4_1(&q41, 32, y);
    for (int i = 0; i < 32; i++) CHECK(y[i] == 0.0f);

    /* One huge outlier: the scale saturates at the fp16 maximum instead of
     * becoming infinity, every decoded value stays finite. */
    float huge[32];
    for (int i = 0; i < 32; i++) huge[i] = 0.001f * (float)i;
    huge[7] = 3.0e38f;
    kipp_quantize_q8_0(huge, 32, &q8);
    kipp_dequantize_q8_0(&q8, 32, y);
    for (int i = 0; i < 32; i++) CHECK(isfinite(y[i]));
    CHECK(q8.qs[7] == 127);
    kipp_quantize_q4_0(huge, 32, &q40);
    kipp_dequantize_q4_0(&q40, 32, y);
    for (int i = 0; i < 32; i++) CHECK(isfinite(y[i]));
    kipp_quantize_q4_1(huge, 32, &q41);
    kipp_dequantize_q4_1(&q41, 32, y);
    for (int i = 0; i < 32; i++) CHECK(isfinite(y[i]));

    /* Denormal-range scale: amax/127 below fp16's smallest normal. */
    float tiny[32];
    for (int i = 0; i < 32; i++) tiny[i] = (float)(i - 16) * 1e-4f;
    kipp_quantize_q8_0(tiny, 32, &q8);
    kipp_dequantize_q8_0(&q8, 32, y);
    float d = kipp_fp16_to_f32(q8.d);
    CHECK(d > 0.0f && d < 6.2e-5f);
    for (int i = 0; i < 32; i++) CHECK(fabsf(y[i] - tiny[i]) <= d * 0.5f * 1.0001f);
    /* Scale that underflows fp16 entirely: everything decodes to zero. */
    for (int i = 0; i < 32; i++) tiny[i] = (float)(i - 16) * 1e-12f;
    kipp_quantize_q8_0(tiny, 32, &q8);
    kipp_dequantize_q8_0(&q8, 32, y);
    for (int i = 0; i < 32; i++) CHECK(y[i] == 0.0f);
}

static void test_nibble_order(void) {
    /* Hand-built Q4_0 block per ggml's layout: byte j = q[j] | q[j+16] << 4. */
    kipp_block_q4_0 b;
    b.d = kipp_f32_to_fp16(1.0f);
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)((j & 15) | (((15 - j) & 15) << 4));
    float y[32];
    kipp_dequantize_q4_0(&b, 32, y);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == (float)(j - 8));
        CHECK(y[j + 16] == (float)((15 - j) - 8));
    }
    /* And the encoder produces that same layout. */
    kipp_block_q4_0 e;
    kipp_quantize_q4_0(y, 32, &e);
    float z[32];
    kipp_dequantize_q4_0(&e, 32, z);
    for (int i = 0; i < 32; i++) CHECK(z[i] == y[i]);
    for (int j = 0; j < 16; j++) CHECK(e.qs[j] == b.qs[j]);

    kipp_block_q4_1 c;
    c.d = kipp_f32_to_fp16(0.5f);
    c.m = kipp_f32_to_fp16(-1.0f);
    for (int j = 0; j < 16; j++) c.qs[j] = (uint8_t)(j | (3 << 4));
    kipp_dequantize_q4_1(&c, 32, y);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == 0.5f * (float)j - 1.0f);
        CHECK(y[j + 16] == 0.5f * 3.0f - 1.0f);
    }
}

/* kipp_weights_quantize_head (the opt-in Q8_0 output head): a hand-built
 * 3 x 64 BF16 head becomes exactly the blocks the encoder writes for its
 * widened rows, with the tensor's type, shape and size updated and the
 * embedding left alone; a head that is not BF16, has no rows, or whose
 * width is not a multiple of 32, is refused with a message naming why. */
static void test_quantize_head(void) {
    enum { ROWS = 3, COLS = 64 };
    uint16_t head[ROWS * COLS];
    float widened[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++) {
        head[i] = kipp_f32_to_bf16(uniform() * (i % 7 == 0 ? 9.0f : 0.25f));
        widened[i] = kipp_bf16_to_f32(head[i]);
    }
    kipp_block_q8_0 want[ROWS * COLS / 32];
    kipp_quantize_q8_0(widened, ROWS * COLS, want); /* rows are whole blocks */
    kipp_tensor t = {.data = head, .type = GGML_TYPE_BF16, .rows = ROWS, .cols = COLS,
                     .nbytes = sizeof head};
    /* 1 thread, 2 (rows split 1 + 2), and more threads than rows */
    static const int thread_counts[] = {1, 2, 5};
    for (size_t i = 0; i < sizeof thread_counts / sizeof thread_counts[0]; i++) {
        kipp_weights w = {.token_embd = t, .output = t};
        void *owned = NULL;
        kipp_error err = {0};
        CHECKF(kipp_weights_quantize_head(&w, thread_counts[i], &owned, &err) == KIPP_OK, "%s",
               err.message);
        CHECK(owned != NULL && w.output.data == owned);
        CHECK(w.output.type == GGML_TYPE_Q8_0 && w.output.rows == ROWS && w.output.cols == COLS);
        CHECK(w.output.nbytes == sizeof want);
        CHECKF(owned && memcmp(owned, want, sizeof want) == 0, "%d threads: other bytes",
               thread_counts[i]);
        CHECK(w.token_embd.data == head && w.token_embd.type == GGML_TYPE_BF16);
        free(owned);
    }
    void *owned = NULL;
    kipp_error err = {0};

    kipp_weights not_bf16 = {.output = {.data = widened, .type = GGML_TYPE_F32, .rows = ROWS,
                                        .cols = COLS, .nbytes = sizeof widened}};
    owned = (void *)1;
    CHECK(kipp_weights_quantize_head(&not_bf16, 1, &owned, &err) == KIPP_E_UNSUPPORTED);
    CHECKF(strstr(err.message, "only a BF16 head") != NULL, "message: %s", err.message);
    CHECK(owned == NULL && not_bf16.output.data == widened);
    kipp_weights narrow = {.output = {.data = head, .type = GGML_TYPE_BF16, .rows = 4,
                                      .cols = 48, .nbytes = sizeof head}};
    CHECK(kipp_weights_quantize_head(&narrow, 1, &owned, &err) == KIPP_E_FORMAT);
    CHECKF(strstr(err.message, "width 48") != NULL, "message: %s", err.message);
    CHECK(narrow.output.data == head);
    kipp_weights empty = {.output = {.data = head, .type = GGML_TYPE_BF16, .rows = 0,
                                     .cols = COLS, .nbytes = 0}};
    CHECK(kipp_weights_quantize_head(&empty, 2, &owned, &err) == KIPP_E_FORMAT);
    CHECKF(strstr(err.message, "0 rows") != NULL, "message: %s", err.message);
    CHECK(owned == NULL && empty.output.data == head);
}

int main(void) {
    test_random_error_bounds();
    test_exact_on_rounded_scale();
    test_edge_blocks();
    test_nibble_order();
    test_quantize_head();
    return test_finish("test_quant");
}
