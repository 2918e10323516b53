/* The avx2i8 tier on processors with AVX512_VNNI and AVX512VL (Zen 4,
 * Ice Lake and Sapphire Rapids): kernels_avx2i8.c compiled again, each
 * integer dot one vpdpbusd on 256 bits instead of vpmaddubsw + vpmaddwd
 * (+ the Q4_0 correction's subtract, folded into the dot's start). The
 * same sums -- no pair sum of vpmaddubsw saturates there (at most 2 x 128
 * x 127) -- so the same bits as the plain table: dispatch.c hands this
 * one out as "avx2i8" where the processor has it, and
 * tests/unit/test_cpu_qkernels.c holds both to one scalar reference. */
#define KIPP_I8_VNNI 1
#include "cpu/kernels_avx2i8.c"
