/* Test hooks of src/core/spec.c (not in the public header). */
#ifndef KIPP_SPEC_INTERNAL_H
#define KIPP_SPEC_INTERNAL_H

#include "kipp.h"

typedef enum kipp_spec_rule {
    KIPP_SPEC_RULE_EXACT = 0,
    /* Deliberately wrong: on rejection draw from p instead of the normalised
     * max(0, p - q). The sampled-distribution test must catch it. */
    KIPP_SPEC_RULE_WRONG_RESIDUAL,
} kipp_spec_rule;

void kipp_spec_test_set_rule(kipp_spec *sp, kipp_spec_rule rule);

#endif
