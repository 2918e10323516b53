/* Which cpu kernel tiers a test runs: every tier this processor supports,
 * up to the one KIPP_CPU_ISA names when it is set, so that
 * KIPP_CPU_ISA=avx2 on an AVX-512 machine tests exactly what an AVX2-only
 * machine would (make test-tiers). Every tier left out is reported by name
 * as a machine skip (test_util.h), with the feature the processor lacks.
 *
 * The opt-in avx512bf16 and amx tiers (auto never picks them) are walked
 * like the others where the processor has them, in that order after
 * avx512: an unset KIPP_CPU_ISA or KIPP_CPU_ISA=amx runs both, KIPP_CPU_ISA=
 * avx512bf16 runs avx512bf16 and leaves amx out, any lower cap neither.
 * The opt-in avx2i8 comes after them but needs only what avx2 needs, so it
 * ranks with avx2: every cap from avx2 up runs it (KIPP_CPU_ISA=avx2 is an
 * AVX2-only machine, which has it), and KIPP_CPU_ISA=avx2i8 caps as avx2.
 * The opt-in avx512i8 comes last and ranks with avx512 the same way (it
 * needs AVX512_VNNI too: a processor without it skips the tier by name).
 *
 * Tests that open the cpu backend per tier set KIPP_CPU_ISA themselves, so
 * the cap is read once, before the first setenv. */
#ifndef KIPP_TEST_TIERS_H
#define KIPP_TEST_TIERS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "test_util.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

enum { TEST_TIER_COUNT = 7 };
static const char *const test_tier_names[TEST_TIER_COUNT] = {
    "generic", "avx2", "avx512", "avx512bf16", "amx", "avx2i8", "avx512i8"};
/* Tier i's place in the cap order (the index of the tier whose hardware it
 * needs): avx2i8 ranks with avx2, avx512i8 with avx512. */
static const int test_tier_ranks[TEST_TIER_COUNT] = {0, 1, 2, 3, 4, 1, 2};
static inline int test_tier_rank(int i) { return test_tier_ranks[i]; }

#if defined(__x86_64__)
static inline uint64_t test_xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

#if defined(__x86_64__)
/* CPUID 7.0 ECX bit `bit` (AVX-512 extensions are listed there). */
static inline int test_cpuid7_ecx(unsigned bit) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << bit));
}
/* AVX512_VNNI (ECX bit 11): avx2i8's vpdpbusd table, and the avx512i8
 * tier. */
static inline int test_has_avx512vnni(void) { return test_cpuid7_ecx(11); }
#endif

/* The first thing the processor (or the OS) lacks for a tier, in words for
 * the runner's summary; NULL when it has everything. Written apart from
 * src/cpu/dispatch.c on purpose: the two must agree, and a test checks it. */
static inline const char *test_tier_lacks(const char *tier) {
    if (strcmp(tier, "generic") == 0) return NULL;
    if (strcmp(tier, "avx2i8") == 0) tier = "avx2";
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
    if (strcmp(tier, "avx512i8") == 0)
        return test_has_avx512vnni() ? NULL : "cpu lacks avx512_vnni";
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d) || !(a & (1u << 5)))
        return "cpu lacks avx512_bf16";
    if (strcmp(tier, "avx512bf16") == 0) return NULL;
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    if (!(d & (1u << 24))) return "cpu lacks amx_tile";
    if (!(d & (1u << 22))) return "cpu lacks amx_bf16";
    if ((test_xgetbv0() & 0x60000) != 0x60000) return "os does not enable amx tile state";
    /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18). */
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return "os refuses amx tile permission";
    return NULL;
#else
    return "not an x86-64 processor";
#endif
}

#if defined(__x86_64__)
/* AVX512_VBMI (CPUID 7.0 ECX bit 1) with avx512's own needs: the avx512
 * tier's VBMI table (its Q8_0 decoder). */
static inline int test_has_avx512vbmi(void) {
    return !test_tier_lacks("avx512") && test_cpuid7_ecx(1);
}
#endif

/* Rank of the highest tier to run: KIPP_CPU_ISA's when set, else amx's.
 * -1 when KIPP_CPU_ISA names no tier (reported as a failure: the caller
 * asked for something that does not exist). Read once (see the top). */
static inline int test_tier_cap(void) {
    static int cap = -2;
    if (cap != -2) return cap;
    const char *forced = getenv("KIPP_CPU_ISA");
    cap = 4; /* amx, the highest rank */
    if (forced && *forced) {
        cap = -1;
        for (int i = 0; i < TEST_TIER_COUNT; i++)
            if (strcmp(forced, test_tier_names[i]) == 0) cap = test_tier_rank(i);
        CHECKF(cap >= 0, "KIPP_CPU_ISA=%s names no tier (generic, avx2, avx512, avx512bf16, amx, "
                         "avx2i8, avx512i8)", forced);
        if (cap >= 0)
            fprintf(stderr, "KIPP_CPU_ISA=%s: tiers above %s are left out as on a machine "
                            "without them\n", forced, test_tier_names[cap]);
    }
    return cap;
}

#if defined(__x86_64__)
/* tests/unit/amx_emulated.c: the amx tier's table over emulated tiles. */
const kipp_cpu_kernels *test_amx_emulated_table(void);
#endif

/* The kernel table of tier i when this test should run it; otherwise
 * reports the tier as a skip and returns NULL. A tier the processor has
 * but dispatch.c refuses (or the reverse) is a failure, not a skip.
 *
 * amx on a processor with AVX512_BF16 but no AMX runs on emulated tiles:
 * the tier's own driver (src/cpu/amx_matmul.h) over amx_tiles.h's C
 * operations, handed out by dispatch.c as kipp_cpu_amx_stand_in, so every
 * test that walks the tiers -- and every model these tests open with
 * cpu_isa amx -- runs the tier's tiling and wiring here too. Only the
 * tile instructions themselves are not exercised, and the summary names
 * that as a machine skip ("amx hardware"). */
static inline const kipp_cpu_kernels *test_tier_kernels(int i) {
    const char *name = test_tier_names[i];
    int cap = test_tier_cap();
    if (test_tier_rank(i) > cap) {
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
#if defined(__x86_64__)
    if (strcmp(name, "amx") == 0 && lacks && !test_tier_lacks("avx512bf16")) {
        CHECKF(!k || k == kipp_cpu_amx_stand_in, "tier amx: dispatch hands out a table on a "
                                                 "processor that %s", lacks);
        kipp_cpu_amx_stand_in = test_amx_emulated_table();
        k = kipp_cpu_kernels_by_name(name);
        CHECKF(k == kipp_cpu_amx_stand_in, "tier amx: the emulated stand-in is not handed out");
        fprintf(stderr, "tier amx: on emulated tiles (%s)\n", lacks);
        test_skip_part(TEST_SKIP_MACHINE, "amx hardware (the tier ran on emulated tiles)", lacks);
        return k;
    }
#endif
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

/* The argmax gate against the oracle. Exact tiers (act_bf16 == 0, every
 * tier auto can pick) with the BF16 cache: the oracle's argmax at every
 * row, DESIGN section 7 (noisy = 0).
 *
 * The opt-in avx512bf16 and amx (act_bf16 == 1) round every matmul activation to
 * BF16 (and avx2i8, act_i8, quantizes the quantized matmuls' activations
 * to 8 bits; callers pass noisy = 1 for both where that applies), which
 * moves each logit by noise of rms e (the row's rms of
 * cpu - oracle; NMSE ~3e-5 on the tiny fixtures, e ~0.1 logit). Where the
 * oracle's two best logits lie closer than that noise, the tier may
 * legitimately pick the other one. So for that tier only, a mismatch is
 * excused as a near-tie when the oracle's margin of its own pick over the
 * tier's pick, ref[oracle] - ref[tier] (at least the oracle's top-2 gap,
 * so the stricter reading), is below TEST_NEAR_TIE_RMS x e. Any other
 * mismatch fails, and so does a tier walk that excuses more than the
 * cap below. Measured (2026-12-01, Zen 5):
 * the flips seen had margins 0.07-0.16 logit at e 0.09-0.14 (margin/e
 * 0.5-1.8), 1-2 distinct rows in 40-45.
 *
 * The opt-in Q8_0 KV cache does the same to every tier, exact ones
 * included: the cache rounds each computed K/V value to one of 255 steps
 * of its block's amax / 127, so an FP32 summation-order difference of an
 * ulp, wherever it moves a value across a rounding boundary, moves the
 * cached value by a whole step. Measured (2026-12-03, Zen 5, KIPP_TEST_FULL,
 * test_cpu_quant): synthetic-0.6b's exact tiers sit at NMSE 2.0-2.5e-5
 * from the oracle with the Q8_0 cache against 2-6e-6 with the BF16 cache,
 * and avx512 flips one prefill row of synthetic-0.6b.affine4_gs32 (oracle
 * margin 0.131 logit, e 0.044: 2.95x). So with the Q8_0 cache the callers
 * pass noisy = 1 on every tier; the NMSE bound still holds it.
 *
 * The cap: at most TEST_NEAR_TIE_MAX_FRACTION of the rows, or half the
 * rows at risk, whichever is larger. Under pure noise a row at risk (gap
 * under 4 e) flips with probability ~0.14 on average (Phi(-gap / (sqrt 2
 * e)) over gaps spread evenly in [0, 4 e)), so half is ~3.5x that; with
 * 43 rows the fraction alone allows 2, and the 0.6B model's larger e puts
 * 6-11 rows at risk on the BF16 tiers, where 3 flips were measured
 * (test_cpu_quant: synthetic-0.6b with the Q8_0 cache on avx512bf16, 3 of
 * 11 at risk; affine4_gs32 on amx, 3 of 9). Where gates re-check the same
 * positions a flip recurs, so flips bunch: test_cpu_backend's 0.6B walk
 * (220 rows) measured 11 of 31 at risk on amx, 7 on avx512bf16, against a
 * cap of 15.5 (11 under the fraction alone). A bug cannot buy a larger cap
 * cheaply: e grows with it, and the NMSE bound caps e first.
 *
 * Why this still catches bugs: a wrong activation, norm, RoPE or
 * attention puts the row's NMSE far above the tier's own bound (1e-4),
 * which fails whatever the argmax does. Measured (2026-12-01): SiLU
 * mutated to x * sigmoid(1.702 x) in kernels_simd.h gives avx512bf16 NMSE
 * 6.6e-3 on synthetic-tiny (66x the bound, every gate fails) and, with e
 * ~6x larger, 22 of 225 rows excused -- over the 5% cap as well. The
 * excuse window stays small on a passing row, since NMSE <= 1e-4 holds e
 * to 1% of the row's rms logit. A subtle shared-code bug, such as the BF16 residual of
 * issue 9 (NMSE 2.5e-5), hides inside the BF16 tier's noise but fails the
 * exact tiers' 1e-6 bounds in the same test on the same machine; a bug in
 * the BF16 kernels themselves fails test_cpu_kernels/test_cpu_qkernels,
 * which hold them to scalar references that round the same way. */
#define TEST_NEAR_TIE_RMS 4.0
#define TEST_NEAR_TIE_MAX_FRACTION 0.05

typedef struct test_argmax_tally {
    long rows;    /* rows checked in this tier walk */
    long at_risk; /* rows whose oracle top-2 gap < TEST_NEAR_TIE_RMS x e */
    long excused; /* mismatches excused as near-ties */
} test_argmax_tally;

/* One row (n logits) of the tier vs the oracle: 0 when the argmax agrees
 * or (noisy only: BF16 or 8-bit activations, or the Q8_0 cache, above) the
 * mismatch is an excused near-tie, 1 for a failing mismatch. Every
 * mismatch is printed with its numbers. */
static inline int test_argmax_row(const char *label, const char *what, unsigned row,
                                  const float *cpu, const float *ref, size_t n, int noisy,
                                  test_argmax_tally *t) {
    size_t ia = 0, ib = 0, ib2 = n > 1;
    double se = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)cpu[i] - ref[i];
        se += d * d;
        if (cpu[i] > cpu[ia]) ia = i;
        if (ref[i] > ref[ib]) ib = i;
    }
    for (size_t i = 0; i < n; i++)
        if (i != ib && (ib2 == ib || ref[i] > ref[ib2])) ib2 = i;
    double e = sqrt(se / (double)n);
    t->rows++;
    t->at_risk += (double)ref[ib] - ref[ib2] < TEST_NEAR_TIE_RMS * e;
    if (ia == ib) return 0;
    double margin = (double)ref[ib] - ref[ia];
    int excuse = noisy && margin < TEST_NEAR_TIE_RMS * e;
    t->excused += excuse;
    fprintf(stderr, "  %s %s row %u: argmax %zu, oracle %zu; oracle margin %.3g logit, rms "
                    "logit error %.3g (%.2fx): %s\n",
            label, what, row, ia, ib, margin, e, e > 0 ? margin / e : 0.0,
            excuse ? "near-tie, excused (BF16 or 8-bit activations, or the Q8_0 cache)"
                   : "FAIL");
    return !excuse;
}

/* End of one tier walk: how many rows were near-ties, how many flips were
 * excused, and the cap on those (the larger of the fraction of all rows
 * and half the rows at risk, above). */
static inline void test_argmax_tally_check(const char *label, const test_argmax_tally *t) {
    double by_rows = TEST_NEAR_TIE_MAX_FRACTION * (double)t->rows;
    double by_risk = 0.5 * (double)t->at_risk;
    double cap = by_rows > by_risk ? by_rows : by_risk;
    fprintf(stderr, "  %s: argmax rows %ld, oracle near-ties (top-2 gap < %gx rms error) %ld, "
                    "flips excused %ld (cap %.1f: %g%% of rows or half the near-ties)\n",
            label, t->rows, TEST_NEAR_TIE_RMS, t->at_risk, t->excused, cap,
            100 * TEST_NEAR_TIE_MAX_FRACTION);
    CHECKF(t->excused <= cap, "%s: %ld of %ld rows excused as near-ties (%ld at risk), over the cap %.1f",
           label, t->excused, t->rows, t->at_risk, cap);
}

#endif
