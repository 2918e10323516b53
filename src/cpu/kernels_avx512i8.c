/* The opt-in avx512i8 tier, for AVX-512 processors with AVX512_VNNI
 * (Ice Lake and later Xeons, Zen 4, Zen 5): the avx512 tier
 * (kernels_avx512.c, compiled a second time into this file) but for the
 * quantized-weight matmuls, which are avx2i8's integer dot products on
 * 8-bit activations (kernels_i8.h, with vpdpbusd). So its BF16 matmuls (a
 * BF16 model, every model's output head), norms, RoPE and attention are
 * avx512's, bit for bit, and its quantized matmuls avx2i8's, bit for bit
 * (kernels_i8_act.h: nothing in their sequence depends on the vector
 * width). auto never picks it (cpu_isa avx512i8 / KIPP_CPU_ISA=avx512i8),
 * for avx2i8's reason: 8-bit activations move the logits off the
 * oracle's (docs/ARCHITECTURE.md, "The avx512i8 tier").
 *
 * Why a tier of its own: on an AVX-512 processor avx2i8 pairs the integer
 * quantized matmuls with avx2's 256-bit BF16 paths. On the Intel Xeon of
 * stop 58 (family 6 model 207) its Q8_0 matrices took 14-18 % less time
 * than avx512's exact block decode, while its BF16 output head took 6-12 %
 * more, so Q8_0 decode tied; and its BF16 prefill ran 0.41-0.80x of
 * llama.cpp's on AVX-512 machines. This tier keeps both halves' better
 * side.
 *
 * Prefill's transposed integer tiles are 512 bits wide here (KIPP_I8_ZMM:
 * groups of 16 weight rows, kernels_i8.h), where avx2i8's are 256: on
 * the Intel Xeon of stop 60 (family 6 model 207) a 512-bit vpdpbusd
 * issues as often as a 256-bit one, and the tiles' rate went 259 -> 425
 * GFLOPS (Q8_0, kernel_micro), synthetic-0.6b's quantized prefill up
 * 16-43 % (docs/CPU-JOURNAL.md "Stop 60"). Same sums, same bits.
 *
 * ACTIVATIONS: kernels_i8_act.h's records, each block's FP32 part in
 * avx512's packed order (evens, then odds; kernels_avx512.c pack_act),
 * which avx512's tile_span and mm_tile_span read through ACT_F32 and
 * ACT_CHUNK_BYTES. */
#if defined(__x86_64__)
#include "cpu/kernels_i8_act.h"

#define KIPP_AVX512_I8 1
#define KIPP_BLOCKED_BF16_ONLY 1
#define KIPP_I8_VNNI 1
#define KIPP_I8_ZMM 1

/* k is a multiple of 32 (KIPP_CPU_K_ALIGN), as everywhere in the tiers. */
static void pack_act(const float *x, uint32_t k, void *dst) {
    uint8_t *rec = dst;
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (uint32_t c = 0; c < k; c += 32, rec += I8_REC) {
        __m512 a = _mm512_loadu_ps(x + c), b = _mm512_loadu_ps(x + c + 16);
        _mm512_storeu_ps((float *)rec, _mm512_permutex2var_ps(a, even, b));
        _mm512_storeu_ps((float *)rec + 16, _mm512_permutex2var_ps(a, odd, b));
        i8_quantize_block(x + c, rec);
    }
}

#include "cpu/kernels_avx512.c"
#include "cpu/kernels_i8.h"

const kipp_cpu_kernels kipp_cpu_kernels_avx512i8 =
    KIPP_I8_TIER_TABLE("avx512i8", , 0, &kipp_cpu_kernels_avx512i8_seq);
const kipp_cpu_kernels kipp_cpu_kernels_avx512i8_seq =
    KIPP_I8_TIER_TABLE("avx512i8", _seq, 1, NULL);
#endif
