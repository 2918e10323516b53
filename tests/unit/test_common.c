/* Float conversion tests for src/core/common.c.
 *
 * Two independent references:
 *  - a value-level model in double arithmetic: the nearest representable
 *    value is rint(x / quantum) * quantum, where quantum = 2^(e - mantissa
 *    bits) for x's binade e (clamped at the format's minimum normal
 *    exponent, which gives subnormals), rint rounding ties to even; results
 *    at or past 2^(emax+1) overflow to infinity;
 *  - the compiler's _Float16 conversions (gcc 12 on x86-64 has them; clang
 *    14 does not define __FLT16_MAX__ there, and then that part alone is
 *    skipped with a note).
 * fp16 -> f32 is checked for all 65536 inputs; f32 -> fp16 and f32 -> bf16
 * at every tie and its neighbours, around every binade edge, in the
 * subnormal and overflow ranges, for NaN/inf, and for millions of random
 * bit patterns. Plus the checked-arithmetic helpers, kipp_fail_prefix, and
 * kipp_argmax_above against a one-element-at-a-time scan. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "test_util.h"

static float f_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* fp16 bits -> exact value, from the format definition (IEEE 754 binary16). */
static double ref_fp16_value(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double v;
    if (exp == 0) v = ldexp(mant, -24);
    else if (exp == 31) v = mant ? NAN : INFINITY;
    else v = ldexp(1024 + mant, exp - 25);
    return sign ? -v : v;
}

/* Nearest value with `mant_bits` fraction bits and minimum normal exponent
 * emin, ties to even; +-inf when it rounds to 2^(emax+1) or beyond. */
static double ref_round(double x, int mant_bits, int emin, int emax) {
    if (x == 0 || isinf(x) || isnan(x)) return x;
    int k;
    frexp(x, &k); /* |x| = m * 2^k, m in [0.5, 1) */
    int e = k - 1;
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - mant_bits);
    double r = rint(x / q) * q; /* x / q is exact: q is a power of two */
    if (fabs(r) >= ldexp(1.0, emax + 1)) return copysign(INFINITY, x);
    return r;
}
static double ref_fp16_round(float f) { return ref_round(f, 10, -14, 15); }
static double ref_bf16_round(float f) { return ref_round(f, 7, -126, 127); }

static long failures_f16, failures_bf16;
#ifdef __FLT16_MAX__
static long failures_f16c;
#endif

/* Checks f32 -> fp16 for one input against both references. */
static void check_to_fp16(float f) {
    uint16_t h = kipp_f32_to_fp16(f);
    double got = ref_fp16_value(h);
    if (isnan(f)) {
        if (!isnan(got) || (h >> 15) != (bits_of(f) >> 31)) {
            if (failures_f16++ < 10) fprintf(stderr, "fp16 NaN: %08x -> %04x\n", bits_of(f), h);
        }
    } else {
        double want = ref_fp16_round(f);
        if (got != want || !signbit(got) != !signbit(want)) {
            if (failures_f16++ < 10)
                fprintf(stderr, "fp16: %08x (%.9g) -> %04x (%.9g), want %.9g\n", bits_of(f), f, h, got, want);
        }
    }
#ifdef __FLT16_MAX__
    _Float16 c = (_Float16)f;
    uint16_t hc;
    memcpy(&hc, &c, sizeof hc);
    int same = isnan(f) ? ((hc & 0x7c00) == 0x7c00 && (hc & 0x3ff) && (h & 0x7c00) == 0x7c00 && (h & 0x3ff) &&
                           (hc >> 15) == (h >> 15))
                        : hc == h;
    if (!same && failures_f16c++ < 10) fprintf(stderr, "fp16 vs _Float16: %08x -> %04x, compiler %04x\n", bits_of(f), h, hc);
#endif
}

static void check_to_bf16(float f) {
    uint16_t b = kipp_f32_to_bf16(f);
    float got = kipp_bf16_to_f32(b);
    if (isnan(f)) {
        /* NaN stays NaN, keeps its sign, and comes out quiet */
        if (!isnan(got) || (b >> 15) != (bits_of(f) >> 31) || !(b & 0x40)) {
            if (failures_bf16++ < 10) fprintf(stderr, "bf16 NaN: %08x -> %04x\n", bits_of(f), b);
        }
        return;
    }
    double want = ref_bf16_round(f);
    if ((double)got != want || !signbit(got) != !signbit(want)) {
        if (failures_bf16++ < 10)
            fprintf(stderr, "bf16: %08x (%.9g) -> %04x (%.9g), want %.9g\n", bits_of(f), f, b, got, want);
    }
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rng32(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 32);
}

static void test_fp16_to_f32_exhaustive(void) {
    long bad = 0, bad_roundtrip = 0, bad_compiler = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kipp_fp16_to_f32((uint16_t)h);
        double want = ref_fp16_value((uint16_t)h);
        int nan = isnan(want);
        if (nan ? !isnan(f) || (bits_of(f) >> 31) != (h >> 15)
                : ((double)f != want || !signbit(f) != !signbit(want))) {
            if (bad++ < 10) fprintf(stderr, "fp16->f32 %04x: %.9g want %.9g\n", h, f, want);
        }
        /* round trip: every non-NaN fp16 comes back bit-identical */
        uint16_t back = kipp_f32_to_fp16(f);
        if (nan ? !((back & 0x7c00) == 0x7c00 && (back & 0x3ff)) : back != h) {
            if (bad_roundtrip++ < 10) fprintf(stderr, "fp16 round trip %04x -> %04x\n", h, back);
        }
#ifdef __FLT16_MAX__
        _Float16 c;
        uint16_t hh = (uint16_t)h;
        memcpy(&c, &hh, sizeof c);
        float fc = (float)c;
        if (nan ? !isnan(fc) : bits_of(fc) != bits_of(f)) bad_compiler++;
#endif
    }
    CHECKF(bad == 0, "%ld fp16->f32 mismatches", bad);
    CHECKF(bad_roundtrip == 0, "%ld fp16 round-trip mismatches", bad_roundtrip);
    CHECKF(bad_compiler == 0, "%ld fp16->f32 mismatches against _Float16", bad_compiler);
}

static void test_f32_to_fp16(void) {
    /* Every fp16 value, the midpoint to its successor (a tie) and the f32
     * neighbours of that midpoint, both signs. Midpoints are exact in f32. */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = ref_fp16_value((uint16_t)h);
        double hi = h + 1 < 0x7c00 ? ref_fp16_value((uint16_t)(h + 1)) : 65536.0; /* "next" past max */
        float mid = (float)((lo + hi) / 2);
        for (int s = 0; s < 2; s++) {
            float sign = s ? -1.0f : 1.0f;
            check_to_fp16(sign * (float)lo);
            check_to_fp16(sign * mid);
            check_to_fp16(sign * nextafterf(mid, 0));
            check_to_fp16(sign * nextafterf(mid, INFINITY));
            check_to_fp16(sign * nextafterf((float)lo, 0));
            check_to_fp16(sign * nextafterf((float)lo, INFINITY));
        }
    }
    /* Specials and edges: below half the smallest subnormal (-> 0), exactly
     * half of it (tie -> 0), overflow threshold 65520, huge, inf, NaNs. */
    const float specials[] = {
        0.0f, -0.0f, 5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f, 1e-10f, 1e-30f, 1.4e-45f,
        6.1035156e-5f, 6.1035153e-5f, 65504.0f, 65519.996f, 65520.0f, 65536.0f, 1e10f, 3.4e38f,
        INFINITY, -INFINITY, NAN, -NAN,
    };
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        check_to_fp16(specials[i]);
        check_to_fp16(-specials[i]);
    }
    check_to_fp16(f_from_bits(0x7f800001u)); /* signalling NaN, payload in low bits */
    check_to_fp16(f_from_bits(0xffc00000u));
    check_to_fp16(f_from_bits(0x7fffffffu));
    /* Every f32 exponent with mantissas whose low 13 bits sit at the
     * rounding boundary (0x0fff, 0x1000, 0x1001, ...). */
    const uint32_t lows[] = { 0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x17ff, 0x0800 };
    for (uint32_t e = 0; e < 256; e++)
        for (int k = 0; k < 64; k++)
            for (size_t l = 0; l < sizeof lows / sizeof lows[0]; l++) {
                uint32_t m = ((rng32() & 0x3ff) << 13) | lows[l];
                if (k == 0) m = lows[l];
                if (k == 1) m = 0x7fe000u | lows[l];
                check_to_fp16(f_from_bits((e << 23) | m));
                check_to_fp16(f_from_bits(0x80000000u | (e << 23) | m));
            }
    /* Random bit patterns, concentrated where fp16 lives, then anywhere. */
    for (int i = 0; i < 2000000; i++) {
        uint32_t r = rng32();
        uint32_t e = 127 - 27 + (rng32() % 45); /* 2^-27 .. 2^17 */
        check_to_fp16(f_from_bits((r & 0x807fffffu) | (e << 23)));
    }
    for (int i = 0; i < 1000000; i++) check_to_fp16(f_from_bits(rng32()));
    CHECKF(failures_f16 == 0, "%ld f32->fp16 mismatches against the double model", failures_f16);
#ifdef __FLT16_MAX__
    CHECKF(failures_f16c == 0, "%ld f32->fp16 mismatches against _Float16", failures_f16c);
#else
    /* The double-model reference above still ran; only the cross-check
     * against the compiler's own conversion is missing. */
    test_skip_part(TEST_SKIP_MACHINE, "f32->fp16 vs _Float16",
                   "this compiler has no _Float16 on this target");
#endif
}

static void test_f32_to_bf16(void) {
    /* every exponent, mantissas at the bf16 rounding boundary: the low 16
     * bits at 0x7fff / 0x8000 (tie) / 0x8001 with even and odd kept lsb */
    const uint32_t lows[] = { 0, 1, 0x7fff, 0x8000, 0x8001, 0xffff };
    for (uint32_t e = 0; e < 256; e++)
        for (uint32_t keep = 0; keep < 128; keep++)
            for (size_t l = 0; l < sizeof lows / sizeof lows[0]; l++) {
                uint32_t u = (e << 23) | (keep << 16) | lows[l];
                check_to_bf16(f_from_bits(u));
                check_to_bf16(f_from_bits(u | 0x80000000u));
            }
    /* explicit ties: 1 + 2^-8 (tie, even -> 1), 1 + 3*2^-8 (tie, odd -> up) */
    CHECK(kipp_f32_to_bf16(1.00390625f) == 0x3f80);
    CHECK(kipp_f32_to_bf16(1.01171875f) == 0x3f82);
    CHECK(kipp_f32_to_bf16(f_from_bits(0x7f7fffffu)) == 0x7f80); /* FLT_MAX rounds to inf */
    CHECK(kipp_f32_to_bf16(INFINITY) == 0x7f80 && kipp_f32_to_bf16(-INFINITY) == 0xff80);
    check_to_bf16(f_from_bits(0x7f800001u)); /* NaN whose payload is only in the dropped bits */
    check_to_bf16(f_from_bits(0xff800001u));
    check_to_bf16(NAN);
    for (int i = 0; i < 3000000; i++) check_to_bf16(f_from_bits(rng32()));
    CHECKF(failures_bf16 == 0, "%ld f32->bf16 mismatches", failures_bf16);
    /* bf16 -> f32 is exact widening: all 65536 round-trip (NaN stays NaN) */
    long bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = kipp_bf16_to_f32((uint16_t)b);
        uint16_t back = kipp_f32_to_bf16(f);
        if (isnan(f) ? !isnan(kipp_bf16_to_f32(back)) : back != b) bad++;
    }
    CHECKF(bad == 0, "%ld bf16 round-trip mismatches", bad);
}

static void test_helpers(void) {
    size_t s;
    CHECK(kipp_mul_size(3, 5, &s) && s == 15);
    CHECK(!kipp_mul_size(SIZE_MAX / 2 + 1, 2, &s));
    CHECK(!kipp_add_size(SIZE_MAX, 1, &s));
    uint64_t u;
    CHECK(!kipp_mul_u64(UINT64_MAX, 3, &u));
    CHECK(kipp_add_u64(1, 2, &u) && u == 3);
    kipp_error err = { 0 };
    CHECK(kipp_fail(&err, KIPP_E_FORMAT, "bad %d", 7) == KIPP_E_FORMAT);
    CHECK(strcmp(err.message, "bad 7") == 0);
    CHECK(kipp_fail_prefix(&err, "reading %s", "x.json") == KIPP_E_FORMAT);
    CHECKF(strcmp(err.message, "reading x.json: bad 7") == 0, "%s", err.message);
    CHECK(kipp_calloc(SIZE_MAX / 2, 4, &err) == NULL && err.code == KIPP_E_MEMORY);
    /* threads 0 (or less) = one per online core; a positive count stands */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(kipp_resolve_threads(3) == 3 && kipp_resolve_threads(1) == 1);
    CHECK(kipp_resolve_threads(0) == (online > 0 ? (int)online : 1));
    CHECK(kipp_resolve_threads(-2) == kipp_resolve_threads(0) && kipp_resolve_threads(0) >= 1);
}

/* kipp_calloc_huge: zeroed like calloc at every size; from 1 MiB up the
 * block starts on a 2 MiB boundary (what lets the kernel back it with huge
 * pages); sizes that overflow are refused by name. */
static void test_calloc_huge(void) {
    kipp_error err = {0};
    const size_t sizes[] = {1, 4096, (1u << 20) - 4, 1u << 20, (3u << 20) + 12};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = kipp_calloc_huge(sizes[i] / 4 ? sizes[i] / 4 : 1, 4, &err);
        CHECKF(p != NULL, "%zu bytes: %s", sizes[i], err.message);
        if (!p) continue;
        size_t n = sizes[i] / 4 ? sizes[i] / 4 * 4 : 4, nonzero = 0;
        for (size_t j = 0; j < n; j++) nonzero += p[j] != 0;
        CHECKF(nonzero == 0, "%zu bytes: %zu nonzero", sizes[i], nonzero);
        if (sizes[i] >= (1u << 20))
            CHECKF((uintptr_t)p % (2u << 20) == 0, "%zu bytes at %p", sizes[i], (void *)p);
        memset(p, 0xab, n); /* the whole asked size is writable (ASan checks) */
        free(p);
    }
    err = (kipp_error){0};
    CHECK(kipp_calloc_huge(SIZE_MAX / 2, 4, &err) == NULL && err.code == KIPP_E_MEMORY);
    CHECKF(strstr(err.message, "overflow") != NULL, "%s", err.message);
    err = (kipp_error){0};
    CHECK(kipp_calloc_huge(1, SIZE_MAX - 1, &err) == NULL && err.code == KIPP_E_MEMORY);
}

/* The plain definition: the first index whose value beats every earlier
 * one and the floor (NaN never compares greater). */
static int32_t ref_argmax_above(const float *x, int32_t n, float floor) {
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++)
        if (x[i] > floor && (best < 0 || x[i] > x[best])) best = i;
    return best;
}

/* Lengths around the 8-lane stride, values from a small set so that ties
 * (across lanes and within one) are common, NaN and -inf mixed in. */
static void test_argmax_above(void) {
    static float x[300];
    const float pool[] = {0.0f, 1.0f, -1.0f, 2.5f, 2.5f, -INFINITY, NAN, 3.0f, -0.0f, 1e-30f};
    uint64_t seed = 12345;
    int mismatches = 0;
    for (int trial = 0; trial < 20000; trial++) {
        int32_t n = (int32_t)(trial % 41);
        if (trial % 97 == 0) n = 300;
        for (int32_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int pick = (int)((seed >> 33) % (trial % 3 == 0 ? 4 : 10));
            x[i] = pool[pick];
        }
        float floor = trial % 5 == 0 ? 0.5f : -INFINITY;
        int32_t got = kipp_argmax_above(x, n, floor), want = ref_argmax_above(x, n, floor);
        if (got != want && mismatches++ < 5)
            CHECKF(0, "argmax over %d values: %d, the plain scan %d", n, got, want);
    }
    CHECK(mismatches == 0);
    /* The last of 13 equal maxima lies in lane 4; the first in lane 0. */
    for (int i = 0; i < 13; i++) x[i] = 7.0f;
    CHECK(kipp_argmax_above(x, 13, -INFINITY) == 0);
    x[0] = NAN;
    CHECK(kipp_argmax_above(x, 13, -INFINITY) == 1);
    for (int i = 0; i < 13; i++) x[i] = -INFINITY;
    CHECK(kipp_argmax_above(x, 13, -INFINITY) == -1);
    CHECK(kipp_argmax_above(x, 0, -INFINITY) == -1);
}

int main(void) {
    test_argmax_above();
    test_fp16_to_f32_exhaustive();
    test_f32_to_fp16();
    test_f32_to_bf16();
    test_helpers();
    test_calloc_huge();
    return test_finish("test_common");
}
