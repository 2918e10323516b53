/* What the libFuzzer targets share: a check that stops the run (libFuzzer
 * saves the input as a crash), and the model a target opens once from
 * $KIPP_FUZZ_MODEL. Each target defines FUZZ_NAME (its name in messages)
 * before including this. */
#ifndef KIPP_FUZZ_UTIL_H
#define KIPP_FUZZ_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* For inputs made of NUL-separated parts: the next part of [*p, end) as an
 * exact-size malloc'd copy (so ASan sees a read past it; the caller frees),
 * its length in *len; *p moves past the NUL, and *had_nul (when not NULL)
 * says whether one ended the part. */
static inline char *fuzz_next_part(const uint8_t **p, const uint8_t *end, size_t *len,
                                   bool *had_nul) {
    const uint8_t *nul = memchr(*p, 0, (size_t)(end - *p));
    *len = nul ? (size_t)(nul - *p) : (size_t)(end - *p);
    if (had_nul) *had_nul = nul != NULL;
    char *copy = malloc(*len ? *len : 1);
    if (!copy) abort();
    memcpy(copy, *p, *len);
    *p = nul ? nul + 1 : end;
    return copy;
}

#endif
