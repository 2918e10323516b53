/* See cli_spec.h. */
#include "cli/cli_spec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void cli_spec_init(cli_spec *s) { *s = (cli_spec){.gate = true}; }

int cli_spec_parse(const char *command, cli_spec *s, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    if (strcmp(a, "--spec") && strcmp(a, "--draft-model") && strcmp(a, "--spec-max") &&
        strcmp(a, "--spec-gate"))
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "kipp %s: %s needs a value\n", command, a);
        return -1;
    }
    const char *v = argv[++*i];
    if (!strcmp(a, "--spec")) {
        if (!strcmp(v, "lookup")) s->mode = KIPP_SPEC_LOOKUP;
        else if (!strcmp(v, "draft")) s->mode = KIPP_SPEC_DRAFT;
        else if (!strcmp(v, "off")) s->mode = KIPP_SPEC_OFF;
        else {
            fprintf(stderr, "kipp %s: --spec expects lookup, draft or off, got '%s'\n", command,
                    v);
            return -1;
        }
        s->mode_given = true;
    } else if (!strcmp(a, "--draft-model")) {
        s->draft_path = v;
    } else if (!strcmp(a, "--spec-max")) {
        char *end;
        errno = 0;
        long k = strtol(v, &end, 10);
        if (errno || end == v || *end || k < 1 || k > KIPP_SPEC_MAX_DRAFT) {
            fprintf(stderr, "kipp %s: --spec-max expects an integer in [1, %d], got '%s'\n",
                    command, KIPP_SPEC_MAX_DRAFT, v);
            return -1;
        }
        s->max = k;
    } else {
        if (!strcmp(v, "on")) s->gate = true;
        else if (!strcmp(v, "off")) s->gate = false;
        else {
            fprintf(stderr, "kipp %s: --spec-gate expects on or off, got '%s'\n", command, v);
            return -1;
        }
    }
    return 1;
}

int cli_spec_open(const char *command, cli_spec *s, const kipp_model *target,
                  const kipp_model_options *mo) {
    if (s->draft_path && !s->mode_given) s->mode = KIPP_SPEC_DRAFT;
    if (s->mode == KIPP_SPEC_DRAFT && !s->draft_path) {
        fprintf(stderr, "kipp %s: --spec draft needs --draft-model FILE\n", command);
        return 1;
    }
    if (s->mode != KIPP_SPEC_DRAFT && s->draft_path) {
        fprintf(stderr, "kipp %s: --draft-model is only used with --spec draft\n", command);
        return 1;
    }
    if (s->mode != KIPP_SPEC_DRAFT) return 0;
    kipp_error err = {0};
    if (kipp_model_open(s->draft_path, mo, &s->draft, &err)) {
        fprintf(stderr, "kipp %s: cannot open draft model %s: %s\n", command, s->draft_path,
                err.message);
        return 1;
    }
    if (kipp_spec_check_draft(target, s->draft, &err)) {
        fprintf(stderr, "kipp %s: refusing draft model %s: %s\n", command, s->draft_path,
                err.message);
        cli_spec_close(s);
        return 1;
    }
    return 0;
}

void cli_spec_close(cli_spec *s) {
    kipp_model_close(s->draft);
    s->draft = NULL;
}

kipp_spec_options cli_spec_options(const cli_spec *s, uint32_t capacity) {
    return (kipp_spec_options){
        .mode = s->mode,
        .max_draft = (uint32_t)s->max,
        .gate = s->gate,
        .draft_model = s->draft,
        .capacity = capacity,
    };
}

void cli_spec_print_stats(FILE *out, const char *command, kipp_spec_mode mode,
                          const kipp_spec_stats *st) {
    fprintf(out,
            "kipp %s: spec %s: drafted %llu, accepted %llu (%.1f%%), %llu tokens in %llu target "
            "evals (%llu saved), gated steps %llu\n",
            command, kipp_spec_mode_name(mode), (unsigned long long)st->drafted,
            (unsigned long long)st->accepted,
            st->drafted ? 100.0 * (double)st->accepted / (double)st->drafted : 0.0,
            (unsigned long long)st->tokens, (unsigned long long)st->steps,
            (unsigned long long)(st->tokens - st->steps), (unsigned long long)st->gated);
}
