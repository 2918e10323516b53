/* AMX tier (Sapphire Rapids and later: AMX-TILE + AMX-BF16, with AVX-512
 * BF16): every matmul on TDPBF16PS tiles (amx_matmul.h, written once over
 * amx_tiles.h); quantized blocks decoded to BF16 by the avx512bf16 tier's
 * decoder (kipp_cpu_bf16_qdecode). The Makefile compiles this file, and
 * only this file, with -mamx-tile -mamx-bf16; dispatch.c calls into it
 * only after CPUID reports AMX-TILE and AMX-BF16, the OS enables the tile
 * state in XCR0 and grants this process the tile data (arch_prctl
 * ARCH_REQ_XCOMP_PERM).
 *
 * Everything else in the tier -- pack_act (BF16 activations), attention,
 * norms, elementwise ops -- is the avx512bf16 tier's (kernels_avx512bf16.c
 * builds the amx tables). Opt-in like avx512bf16: it rounds activations
 * to BF16. */
#if defined(__x86_64__)
#include "cpu/kernels.h"
#include "cpu/amx_matmul.h"

void kipp_cpu_amx_matmul_bf16(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1,
                              const void *x, size_t x_stride, uint32_t m, float *const *y) {
    amx_matmul_bf16(w, k, n0, n1, x, x_stride, m, y);
}

AMX_MATMUL_Q_ENTRIES(, kipp_cpu_amx_matmul_)
#endif
