/* What the libFuzzer targets share: a check that stops the run (libFuzzer
 * saves the input as a crash), and the model a target opens once from
 * $KIPP_FUZZ_MODEL. Each target defines FUZZ_NAME (its name in messages)
 * before including this. */
#ifndef KIPP_FUZZ_UTIL_H
#define KIPP_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "kipp.h"

#ifndef FUZZ_NAME
#error "define FUZZ_NAME before including fuzz_util.h"
#endif

#define CHECK(c)                                                                 \
    do {                                                                         \
        if (!(c)) {                                                              \
            fprintf(stderr, FUZZ_NAME ": check failed: %s (line %d)\n", #c,      \
                    __LINE__);                                                   \
            abort();                                                             \
        }                                                                        \
    } while (0)

/* The artifact $KIPP_FUZZ_MODEL names, opened without a backend (the
 * parsers need its tokenizer, template and vocabulary, not its weights);
 * aborts with a message when it is unset or does not open. */
static inline kipp_model *fuzz_open_model(void) {
    const char *path = getenv("KIPP_FUZZ_MODEL");
    if (!path || !*path) {
        fprintf(stderr, FUZZ_NAME ": set KIPP_FUZZ_MODEL to a Kipp GGUF artifact\n");
        abort();
    }
    kipp_model_options opt = {.backend = KIPP_BACKEND_NONE};
    kipp_error err = {0};
    kipp_model *m = NULL;
    if (kipp_model_open(path, &opt, &m, &err)) {
        fprintf(stderr, FUZZ_NAME ": %s\n", err.message);
        abort();
    }
    return m;
}

#endif
