/* The opt-in avx2i8 tier: the avx2 tier (kernels_avx2.c, compiled a second
 * time into this file, with the same -mavx2 -mfma -mf16c) but for the
 * quantized-weight matmuls, which multiply 8-bit activations with integer
 * dot products (kernels_i8.h, kernels_i8_act.h: what they compute) -- the
 * numerics llama.cpp uses for these formats on every x86 build. auto
 * never picks it (cpu_isa avx2i8 / KIPP_CPU_ISA=avx2i8): quantizing
 * activations moves the logits off the oracle's, as rounding them to BF16
 * does on avx512bf16 (docs/ARCHITECTURE.md, "The avx2i8 tier"). BF16
 * weights (a BF16 model, and every model's output head) and everything
 * else -- norms, RoPE, attention -- are avx2's, bit for bit. The
 * avx512i8 tier (kernels_avx512i8.c) is the same for AVX-512 processors.
 *
 * Why: a Q4_0 block decoded to exact FP32 weights costs avx2 ~19 vector
 * operations per row and block, and decode is bound by that, not by memory
 * (stop 31: 0.74x llama.cpp's Q4_0 decode on AVX2). The integer dot
 * takes ~10. Prefill repacks 8 weight rows at a time so that one integer
 * dot serves 8 outputs (kernels_i8.h's transposed layout): per weight row,
 * activation row and block ~1.5 vector operations on the vpdpbusd table,
 * where the FP32 tiles take 4 FMAs (since stop 44; the row-major integer
 * tiles before it took ~6 and ran 10-25 % slower than avx2's FP32 ones).
 *
 * ACTIVATIONS: kernels_i8_act.h's records, the FP32 part in value order
 * (avx2's tile_span and mm_tile_span read it through ACT_F32 and
 * ACT_CHUNK_BYTES).
 *
 * kernels_avx2i8_vnni.c compiles this file again with KIPP_I8_VNNI:
 * each integer dot one vpdpbusd, the same sums, the same bits. */
#if defined(__x86_64__)
#include <string.h>

#include "cpu/kernels_i8_act.h"

#define KIPP_AVX2_I8 1
#define KIPP_BLOCKED_BF16_ONLY 1

/* k is a multiple of 32 (KIPP_CPU_K_ALIGN), as everywhere in the tiers. */
static void pack_act(const float *x, uint32_t k, void *dst) {
    uint8_t *rec = dst;
    for (uint32_t c = 0; c < k; c += 32, rec += I8_REC) {
        memcpy(rec, x + c, 32 * sizeof(float));
        i8_quantize_block(x + c, rec);
    }
}

#include "cpu/kernels_avx2.c"
#include "cpu/kernels_i8.h"

#ifdef KIPP_I8_VNNI
const kipp_cpu_kernels kipp_cpu_kernels_avx2i8_vnni =
    KIPP_I8_TIER_TABLE("avx2i8", , 0, &kipp_cpu_kernels_avx2i8_vnni_seq);
const kipp_cpu_kernels kipp_cpu_kernels_avx2i8_vnni_seq =
    KIPP_I8_TIER_TABLE("avx2i8", _seq, 1, NULL);
#else
const kipp_cpu_kernels kipp_cpu_kernels_avx2i8 =
    KIPP_I8_TIER_TABLE("avx2i8", , 0, &kipp_cpu_kernels_avx2i8_seq);
const kipp_cpu_kernels kipp_cpu_kernels_avx2i8_seq = KIPP_I8_TIER_TABLE("avx2i8", _seq, 1, NULL);
#endif
#endif
