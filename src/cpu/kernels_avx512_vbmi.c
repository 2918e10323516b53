/* The avx512 tier on processors with AVX512_VBMI (Ice Lake, Sapphire
 * Rapids and later Intel cores; AMD Zen 4 and Zen 5): kernels_avx512.c
 * compiled again with -mavx512vbmi, which switches kernels_avx512.h's Q8_0
 * block decoder to its magic-number form (one vpermb per 16 weights, an
 * FMA in place of the conversion and the scale multiply: 7 vector
 * operations a block against 9). The same values, so the same bits:
 * dispatch.c hands this table out as "avx512" where the processor has
 * AVX512_VBMI, and tests/unit/test_cpu_qkernels.c holds both tables to one
 * reference and to each other. Everything else in the tier (BF16 and Q4
 * matmuls, attention over a BF16 cache, norms) compiles to the same code
 * as the plain table's. */
#define KIPP_AVX512_VBMI 1
#include "cpu/kernels_avx512.c"
