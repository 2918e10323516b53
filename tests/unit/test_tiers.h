/* Which cpu kernel tiers a test runs: every tier this processor supports,
 * up to the one KIPP_CPU_ISA names when it is set, so that
 * KIPP_CPU_ISA=avx2 on an AVX-512 machine tests exactly what an AVX2-only
 * machine would (make test-tiers). Every tier left out is reported by name
 * as a machine skip (test_util.h), with the feature the processor lacks.
 *
 * Tests that open the cpu backend per tier set KIPP_CPU_ISA themselves, so
 * the cap is read once, before the first setenv. */
#ifndef KIPP_TEST_TIERS_H
#define KIPP_TEST_TIERS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "test_util.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

enum { TEST_TIER_COUNT = 4 };
static const char *const test_tier_names[TEST_TIER_COUNT] = {"generic", "avx2", "avx512",
                                                             "avx512bf16"};

#if defined(__x86_64__)
static inline uint64_t test_xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

/* The first thing the processor (or the OS) lacks for a tier, in words for
 * the runner's summary; NULL when it has everything. Written apart from
 * src/cpu/dispatch.c on purpose: the two must agree, and a test checks it. */
static inline const char *test_tier_lacks(const char *tier) {
    if (strcmp(tier, "generic") == 0) return NULL;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return "cpu lacks cpuid leaf 1";
    if (!(c & (1u << 12))) return "cpu lacks fma";
    if (!(c & (1u << 29))) return "cpu lacks f16c";
    if (!(c & (1u << 27))) return "os lacks osxsave";
    if ((test_xgetbv0() & 0x6) != 0x6) return "os does not enable ymm state";
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return "cpu lacks cpuid leaf 7";
    if (!(b & (1u << 5))) return "cpu lacks avx2";
    if (strcmp(tier, "avx2") == 0) return NULL;
    if (!(b & (1u << 16))) return "cpu lacks avx512f";
    if (!(b & (1u << 17))) return "cpu lacks avx512dq";
    if (!(b & (1u << 30))) return "cpu lacks avx512bw";
    if (!(b & (1u << 31))) return "cpu lacks avx512vl";
    if ((test_xgetbv0() & 0xe6) != 0xe6) return "os does not enable zmm state";
    if (strcmp(tier, "avx512") == 0) return NULL;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d) || !(a & (1u << 5)))
        return "cpu lacks avx512_bf16";
    return NULL;
#else
    return "not an x86-64 processor";
#endif
}

/* Index of the highest tier to run: KIPP_CPU_ISA's when set, else the last.
 * -1 when KIPP_CPU_ISA names no tier (reported as a failure: the caller
 * asked for something that does not exist). Read once (see the top). */
static inline int test_tier_cap(void) {
    static int cap = -2;
    if (cap != -2) return cap;
    const char *forced = getenv("KIPP_CPU_ISA");
    cap = TEST_TIER_COUNT - 1;
    if (forced && *forced) {
        cap = -1;
        for (int i = 0; i < TEST_TIER_COUNT; i++)
            if (strcmp(forced, test_tier_names[i]) == 0) cap = i;
        CHECKF(cap >= 0, "KIPP_CPU_ISA=%s names no tier (generic, avx2, avx512, avx512bf16)", forced);
        if (cap >= 0)
            fprintf(stderr, "KIPP_CPU_ISA=%s: tiers above %s are left out as on a machine "
                            "without them\n", forced, forced);
    }
    return cap;
}

/* The kernel table of tier i when this test should run it; otherwise
 * reports the tier as a skip and returns NULL. A tier the processor has
 * but dispatch.c refuses (or the reverse) is a failure, not a skip. */
static inline const kipp_cpu_kernels *test_tier_kernels(int i) {
    const char *name = test_tier_names[i];
    int cap = test_tier_cap();
    if (i > cap) {
        if (cap >= 0) {
            char why[96];
            snprintf(why, sizeof why, "KIPP_CPU_ISA=%s runs as a machine without it",
                     test_tier_names[cap]);
            test_skip_part(TEST_SKIP_MACHINE, name, why);
        }
        return NULL;
    }
    const kipp_cpu_kernels *k = kipp_cpu_kernels_by_name(name);
    const char *lacks = test_tier_lacks(name);
    CHECKF(!k == !!lacks, "tier %s: dispatch says %s, cpuid says %s", name,
           k ? "available" : "unavailable", lacks ? lacks : "available");
    if (!k) {
        fprintf(stderr, "tier %s: not tested here (%s)\n", name, lacks ? lacks : "refused");
        test_skip_part(TEST_SKIP_MACHINE, name, lacks ? lacks : "dispatch refuses it");
        return NULL;
    }
    fprintf(stderr, "tier %s:\n", name);
    return k;
}

#endif
