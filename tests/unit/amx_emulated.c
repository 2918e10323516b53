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

AMX_MATMUL_Q_ENTRIES(static, emu_)

/* The amx tier's table as kernels_avx512bf16.c builds it, with these
 * emulated matmuls in place of kernels_amx.c's (kipp_cpu_amx_stand_in). */
const kipp_cpu_kernels *test_amx_emulated_table(void);
const kipp_cpu_kernels *test_amx_emulated_table(void) {
    static kipp_cpu_kernels table;
    if (!table.name) {
        table = kipp_cpu_kernels_amx;
        table.matmul_bf16 = test_amx_emulated_matmul;
        table.matmul_q8_0 = emu_q8_0;
        table.matmul_q4_0 = emu_q4_0;
        table.matmul_q4_1 = emu_q4_1;
        table.seq_twin = NULL; /* the tiles have no decode prefetch choice */
    }
    return &table;
}
#else
typedef int test_amx_emulated_x86_only; /* an empty file is not ISO C */
#endif
