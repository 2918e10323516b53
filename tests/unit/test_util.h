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

static inline int test_finish(const char *name) {
    fprintf(stderr, "%s: %d checks, %d failed\n", name, test_checks,
            test_failures);
    return test_failures ? 1 : 0;
}

#endif
