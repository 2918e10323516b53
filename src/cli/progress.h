/* A one-line progress bar on stderr, drawn only when stderr is a terminal
 * (so logs and pipes stay clean). Used as a kipp_progress_fn. */
#ifndef KIPP_CLI_PROGRESS_H
#define KIPP_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cli_progress {
    const char *label;
    bool enabled;      /* stderr is a terminal */
    int last_permille; /* redraw only when the value changes */
    double start;
} cli_progress;

void cli_progress_init(cli_progress *p, const char *label);
/* kipp_progress_fn-compatible: ctx is a cli_progress. */
void cli_progress_update(void *ctx, uint64_t done, uint64_t total);
/* Ends the line if a bar was drawn. */
void cli_progress_finish(cli_progress *p);

#endif
