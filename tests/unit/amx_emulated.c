/* The AMX tier's matmul (src/cpu/amx_matmul.h) over the emulated tile
 * operations of src/cpu/amx_tiles.h (KIPP_AMX_EMULATE), for
 * test_cpu_amx.c. The Makefile compiles this file alone with AVX-512
 * F/BW/VL/DQ (the repacking's shuffles, as in kernels_amx.c), so
 * the test calls it only where CPUID reports AVX-512. */
#if defined(__x86_64__)
#define KIPP_AMX_EMULATE 1
#include "cpu/kernels.h"
#include "cpu/amx_matmul.h"

void test_amx_emulated_matmul(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1,
                              const void *x, size_t x_stride, uint32_t m, float *const *y);
void test_amx_emulated_matmul(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1,
                              const void *x, size_t x_stride, uint32_t m, float *const *y) {
    amx_matmul_bf16(w, k, n0, n1, x, x_stride, m, y);
}

void test_amx_emulated_matmul_q(int q, const void *w, uint32_t k, uint32_t n0, uint32_t n1,
                                const void *x, size_t x_stride, uint32_t m, float *const *y);
void test_amx_emulated_matmul_q(int q, const void *w, uint32_t k, uint32_t n0, uint32_t n1,
                                const void *x, size_t x_stride, uint32_t m, float *const *y) {
    amx_matmul_q(q, w, k, n0, n1, x, x_stride, m, y);
}
#else
typedef int test_amx_emulated_x86_only; /* an empty file is not ISO C */
#endif
