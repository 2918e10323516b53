/* Tiny test helpers: CHECK records a failure and continues; the test's main
 * returns test_finish(), which prints a summary and the exit status. */
#ifndef KIPP_TEST_UTIL_H
#define KIPP_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kipp.h"

static int test_failures;
static int test_checks;

#define CHECK(cond)                                                           \
    do {                                                                      \
        test_checks++;                                                        \
        if (!(cond)) {                                                        \
            test_failures++;                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,  \
                    #cond);                                                   \
        }                                                                     \
    } while (0)

#define CHECKF(cond, ...)                                                     \
    do {                                                                      \
        test_checks++;                                                        \
        if (!(cond)) {                                                        \
            test_failures++;                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__,  \
                    #cond);                                                   \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)

/* Environment-provided paths (set by tests/run.sh). */
/* NMSE of a[0, n) against the reference b: the sum of squared differences
 * over b's sum of squares (the plain sum where b is all zeros). */
static inline double test_nmse(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

static inline const char *test_build_dir(void) {
    const char *b = getenv("BUILD");
    return b && *b ? b : "build";
}

/* Options for every test that opens a model: backend and threads as given,
 * and the cpu kernel tier `isa` ("generic", "avx2", ...) or, when isa is
 * NULL, the one KIPP_CPU_ISA names (unset or empty: auto). The library
 * reads no environment, so this is where the tests honour KIPP_CPU_ISA
 * (`KIPP_CPU_ISA=avx2 make test`), as the CLI does for `kipp`. A name that
 * is no tier ends the test with status 2 rather than silently testing auto. */
static inline kipp_model_options test_model_options(kipp_backend_kind backend, int threads,
                                                    const char *isa) {
    kipp_model_options o = {.backend = backend, .threads = threads};
    if (!isa) isa = getenv("KIPP_CPU_ISA");
    if (isa && *isa) {
        kipp_error err = {0};
        if (kipp_cpu_isa_parse(isa, &o.cpu_isa, &err)) {
            fprintf(stderr, "test_model_options: %s\n", err.message);
            exit(2);
        }
    }
    return o;
}

/* A part of a test that cannot run here is a skip, never a pass: one line
 * per part on stderr, "SKIP-PART(KIND): PART: REASON", which tests/run.sh
 * collects, counts as a skip and names in its summary. KIND says whether
 * the machine explains it:
 *   TEST_SKIP_MACHINE  the processor lacks a feature (or KIPP_CPU_ISA asks
 *                      the tests to run as if it did); allowed under CI=true;
 *   TEST_SKIP_MISSING  a file, package or tool the set-up should provide
 *                      (make test-deps, npm ci, make fixtures) is absent;
 *                      fails the run under CI=true.
 * A whole test that cannot run prints the same line and exits 77
 * (test_skip_all). */
#define TEST_SKIP_MACHINE "machine"
#define TEST_SKIP_MISSING "missing"

static inline void test_skip_part(const char *kind, const char *part, const char *reason) {
    fprintf(stderr, "SKIP-PART(%s): %s: %s\n", kind, part, reason);
}

static inline int test_skip_all(const char *kind, const char *reason) {
    fprintf(stderr, "SKIP(%s): %s\n", kind, reason);
    return 77;
}

static inline int test_finish(const char *name) {
    fprintf(stderr, "%s: %d checks, %d failed\n", name, test_checks,
            test_failures);
    return test_failures ? 1 : 0;
}

#endif
