/* Speculative-decoding flags shared by generate, chat and serve:
 * --spec lookup|draft|off, --draft-model FILE, --spec-max K, --spec-gate on|off.
 * The draft model is opened here with the target's backend and threads and
 * checked against the target's tokenizer (kipp_spec_check_draft). */
#ifndef KIPP_CLI_SPEC_H
#define KIPP_CLI_SPEC_H

#include <stdbool.h>
#include <stdio.h>

#include "kipp.h"

typedef struct cli_spec {
    kipp_spec_mode mode;
    bool mode_given;
    const char *draft_path;
    long max;    /* 0 = the library's default for the mode */
    bool gate;   /* default on */
    kipp_model *draft; /* opened by cli_spec_open */
} cli_spec;

#define CLI_SPEC_USAGE                                                                   \
    "speculative decoding (output is unchanged: greedy equals plain greedy, sampled\n"    \
    "keeps the target's distribution):\n"                                                \
    "  --spec lookup|draft|off   drafter (default off; --draft-model implies draft)\n"   \
    "  --draft-model FILE        an artifact with the same tokenizer (e.g. a 4-bit file\n" \
    "                            of the same checkpoint)\n"                              \
    "  --spec-max K              drafted tokens per step, 1..16 (default 8 lookup, 4 draft)\n" \
    "  --spec-gate on|off        suspend drafting while it does not pay (default on)\n"

void cli_spec_init(cli_spec *s);
/* If argv[*i] is a speculation flag, consumes it and its value (advancing
 * *i) and returns 1; returns 0 if it is not one, -1 after printing an error. */
int cli_spec_parse(const char *command, cli_spec *s, int argc, char **argv, int *i);
/* Checks the combination and opens the draft model next to target. Returns
 * 0, or 1 after printing an error. */
int cli_spec_open(const char *command, cli_spec *s, const kipp_model *target,
                  const kipp_model_options *mo);
void cli_spec_close(cli_spec *s);
/* The library options for one sequence of `capacity` positions. */
kipp_spec_options cli_spec_options(const cli_spec *s, uint32_t capacity);
/* "kipp CMD: spec lookup: drafted ..., accepted ... (..%), target evals saved ..." */
void cli_spec_print_stats(FILE *out, const char *command, kipp_spec_mode mode,
                          const kipp_spec_stats *st);

#endif
