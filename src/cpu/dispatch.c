/* Kernel tier selection: the best FP32-activation tier the processor (and
 * the OS, which must save the wider registers) supports -- never the
 * opt-in avx512bf16, amx, avx2i8 or avx512i8 -- or the one the caller forced
 * through kipp_model_options.cpu_isa (the CLI maps KIPP_CPU_ISA onto it;
 * the library itself reads no environment). Asking for a tier the
 * processor cannot run is an error, never a silent fallback. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "cpu/kernels.h"

const kipp_cpu_kernels *kipp_cpu_amx_stand_in; /* kernels.h: tests only */

float kipp_cpu_f16_table[65536];
float kipp_cpu_f16_table_m16[65536];
float kipp_cpu_f16_table_q8_pair[65536][2];
int kipp_cpu_bf16_decode_once;

static bool cpu_is_amd(void);

static void f16_table_fill(void) {
    kipp_cpu_bf16_decode_once = !cpu_is_amd();
    for (uint32_t h = 0; h < 65536; h++) {
        kipp_cpu_f16_table[h] = kipp_fp16_to_f32((uint16_t)h);
        kipp_cpu_f16_table_m16[h] = ldexpf(kipp_cpu_f16_table[h], -16);
        kipp_cpu_f16_table_q8_pair[h][0] = kipp_cpu_f16_table[h];
        kipp_cpu_f16_table_q8_pair[h][1] = -32896.0f * kipp_cpu_f16_table[h]; /* exact */
    }
}

/* Before any tier is handed out (the SIMD tiers' block decoders read it). */
static void f16_table_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, f16_table_fill);
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static bool has_avx2(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), f16c = c & (1u << 29);
    if (!fma || !osxsave || !f16c) return false;
    if ((xgetbv0() & 0x6) != 0x6) return false; /* XMM and YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return b & (1u << 5);
}

/* avx512: F, BW, VL, DQ (kernels_avx512.c uses no BF16 instruction). */
static bool has_avx512(void) {
    if (!has_avx2()) return false;
    if ((xgetbv0() & 0xe6) != 0xe6) return false; /* + opmask, ZMM state */
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
    return f && dq && bw && vl;
}

/* avx512 and CPUID 7.0 ECX bit `bit` (the AVX-512 extensions listed
 * there). */
static bool has_avx512_and_ecx7(unsigned bit) {
    if (!has_avx512()) return false;
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << bit));
}

/* avx512 + AVX512_VNNI (ECX bit 11): avx2i8's vpdpbusd table, and the
 * avx512i8 tier. */
static bool has_avx512vnni(void) { return has_avx512_and_ecx7(11); }

/* avx512 + AVX512_VBMI (ECX bit 1): the avx512 tier's table with the
 * vpermb Q8_0 decoder (kernels_avx512_vbmi.c), the same bits. */
static bool has_avx512vbmi(void) { return has_avx512_and_ecx7(1); }

/* avx512bf16: avx512 + AVX512_BF16 (vcvtne2ps2bf16, vdpbf16ps). */
static bool has_avx512bf16(void) {
    if (!has_avx512()) return false;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return a & (1u << 5);
}
/* Linux keeps AMX tile data off until a process asks for it
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16+);
 * the grant covers every thread of the process, so it is asked for once,
 * before any tier is handed out, and the answer is kept. */
#define KIPP_ARCH_REQ_XCOMP_PERM 0x1023
#define KIPP_XFEATURE_XTILEDATA 18
static bool amx_permitted;
static void amx_permission_ask(void) {
    amx_permitted = syscall(SYS_arch_prctl, KIPP_ARCH_REQ_XCOMP_PERM, KIPP_XFEATURE_XTILEDATA) == 0;
}

/* amx: avx512bf16 + AMX-TILE + AMX-BF16 (CPUID 7.0 EDX bits 24, 22), the
 * tile state enabled in XCR0 (bits 17, 18) and the process's permission. */
static bool has_amx(void) {
    if (!has_avx512bf16()) return false;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 24)) || !(d & (1u << 22))) return false;
    if ((xgetbv0() & 0x60000) != 0x60000) return false;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, amx_permission_ask);
    return amx_permitted;
}
static bool cpu_is_amd(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
    return b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* AuthenticAMD */
}
/* AMD family 26 (Zen 5) and later: the decode prefetch that measured best
 * there (PF_ROWS, stops 17-25); every other processor, Zen 4 included
 * (family 25, where PF_ROWS streamed ~21 GB/s of ~31), gets PF_SEQ. */
static bool prefers_rows_prefetch(void) {
    unsigned a, b, c, d;
    if (!cpu_is_amd() || !__get_cpuid(1, &a, &b, &c, &d)) return false;
    unsigned family = (a >> 8) & 0xf;
    if (family == 0xf) family += (a >> 20) & 0xff;
    return family >= 0x1a;
}
#define AMX_TABLE (&kipp_cpu_kernels_amx)
#define AVX512BF16_TABLE (&kipp_cpu_kernels_avx512bf16)
#ifdef KIPP_AVX512_PLAIN_ONLY
/* A measurement build (CFLAGS=-DKIPP_AVX512_PLAIN_ONLY): avx512 takes its
 * plain table even where AVX512_VBMI is present -- what Skylake-X and
 * Cascade Lake run. Same bits as the VBMI table. */
#define AVX512_TABLE ((void)has_avx512vbmi, &kipp_cpu_kernels_avx512)
#else
#define AVX512_TABLE (has_avx512vbmi() ? &kipp_cpu_kernels_avx512_vbmi : &kipp_cpu_kernels_avx512)
#endif
#define AVX2_TABLE (&kipp_cpu_kernels_avx2)
#define AVX512I8_TABLE (&kipp_cpu_kernels_avx512i8)
#ifdef KIPP_AVX2I8_PLAIN_ONLY
/* A measurement build (CFLAGS=-DKIPP_AVX2I8_PLAIN_ONLY): avx2i8 takes its
 * vpmaddubsw table even where AVX512_VNNI is present -- what an AVX2-only
 * processor (Zen 3) runs, raced on an AVX-512 machine (docs/BENCHMARKS.md,
 * "Stop 44, later"). Same bits as the vpdpbusd table. */
#define AVX2I8_TABLE ((void)has_avx512vnni, &kipp_cpu_kernels_avx2i8)
#else
#define AVX2I8_TABLE (has_avx512vnni() ? &kipp_cpu_kernels_avx2i8_vnni : &kipp_cpu_kernels_avx2i8)
#endif
#else
static bool has_avx2(void) { return false; }
static bool has_avx512(void) { return false; }
static bool has_avx512vnni(void) { return false; }
static bool has_avx512bf16(void) { return false; }
static bool has_amx(void) { return false; }
static bool cpu_is_amd(void) { return false; }
static bool prefers_rows_prefetch(void) { return false; }
#define AMX_TABLE NULL
#define AVX512BF16_TABLE NULL
#define AVX512_TABLE NULL
#define AVX2_TABLE NULL
#define AVX2I8_TABLE NULL
#define AVX512I8_TABLE NULL
#endif

const kipp_cpu_kernels *kipp_cpu_kernels_by_name(const char *name) {
    if (!name) return NULL;
    f16_table_init();
    if (strcmp(name, "generic") == 0) return &kipp_cpu_kernels_generic;
    if (strcmp(name, "avx2") == 0) return has_avx2() ? AVX2_TABLE : NULL;
    if (strcmp(name, "avx2i8") == 0) return has_avx2() ? AVX2I8_TABLE : NULL;
    if (strcmp(name, "avx512") == 0) return has_avx512() ? AVX512_TABLE : NULL;
    if (strcmp(name, "avx512i8") == 0) return has_avx512vnni() ? AVX512I8_TABLE : NULL;
    if (strcmp(name, "avx512bf16") == 0) return has_avx512bf16() ? AVX512BF16_TABLE : NULL;
    if (strcmp(name, "amx") == 0)
        return has_amx() ? AMX_TABLE : has_avx512bf16() ? kipp_cpu_amx_stand_in : NULL;
    return NULL;
}

kipp_cpu_decode_prefetch kipp_cpu_decode_prefetch_resolve(kipp_cpu_decode_prefetch pf) {
    if (pf != KIPP_CPU_DECODE_PREFETCH_AUTO) return pf;
    return prefers_rows_prefetch() ? KIPP_CPU_DECODE_PREFETCH_ROWS : KIPP_CPU_DECODE_PREFETCH_SEQ;
}

/* The tier's table with the decode prefetch pf (the generic tier has one). */
static const kipp_cpu_kernels *with_prefetch(const kipp_cpu_kernels *k,
                                             kipp_cpu_decode_prefetch pf) {
    if (k && k->seq_twin && kipp_cpu_decode_prefetch_resolve(pf) == KIPP_CPU_DECODE_PREFETCH_SEQ)
        return k->seq_twin;
    return k;
}

const kipp_cpu_kernels *kipp_cpu_select_kernels(kipp_cpu_isa isa, kipp_cpu_decode_prefetch pf,
                                                char *why, size_t why_size) {
    f16_table_init();
    if (!kipp_cpu_decode_prefetch_name(pf)) {
        snprintf(why, why_size, "unknown decode prefetch %d (use auto, rows or seq)", (int)pf);
        return NULL;
    }
    if (isa == KIPP_CPU_ISA_AUTO) {
        /* Never avx512bf16, amx, avx2i8 or avx512i8: they round
         * activations to BF16 (avx2i8, avx512i8: to 8 bits in quantized
         * matmuls), and their logits
         * may then pick another argmax than the oracle at a near-tie,
         * which DESIGN section 7 forbids for the default. Opt-in only
         * (docs/ARCHITECTURE.md, "Two AVX-512 tiers"). */
        if (has_avx512()) return with_prefetch(AVX512_TABLE, pf);
        if (has_avx2()) return with_prefetch(AVX2_TABLE, pf);
        return &kipp_cpu_kernels_generic;
    }
    const char *name = kipp_cpu_isa_name(isa);
    if (!name) {
        snprintf(why, why_size,
                 "unknown kernel tier %d (use auto, avx512, avx2, generic or opt-in avx512bf16, "
                 "amx, avx2i8, avx512i8)",
                 (int)isa);
        return NULL;
    }
    const kipp_cpu_kernels *k = with_prefetch(kipp_cpu_kernels_by_name(name), pf);
    if (!k)
        snprintf(why, why_size, "cpu_isa %s: this processor does not support that tier%s", name,
                 isa == KIPP_CPU_ISA_AVX512BF16 ? " (it needs AVX-512 F/BW/VL/DQ and AVX512_BF16)"
                 : isa == KIPP_CPU_ISA_AMX
                     ? " (it needs AVX512_BF16, AMX-TILE, AMX-BF16 and the OS's tile permission)"
                 : isa == KIPP_CPU_ISA_AVX2I8 ? " (it needs AVX2, FMA and F16C)"
                 : isa == KIPP_CPU_ISA_AVX512I8
                     ? " (it needs AVX-512 F/BW/VL/DQ and AVX512_VNNI)"
                                              : "");
    return k;
}
