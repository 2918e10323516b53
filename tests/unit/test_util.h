/* Tiny test helpers: CHECK records a failure and continues; the test's main
 * returns test_finish(), which prints a summary and the exit status. */
#ifndef KIPP_TEST_UTIL_H
#define KIPP_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static inline int test_finish(const char *name) {
    fprintf(stderr, "%s: %d checks, %d failed\n", name, test_checks,
            test_failures);
    return test_failures ? 1 : 0;
}

#endif
