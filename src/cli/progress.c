#include "cli/progress.h"

#include <stdio.h>
#include <unistd.h>

#include "core/common.h"

void cli_progress_init(cli_progress *p, const char *label) {
    p->label = label;
    p->enabled = isatty(STDERR_FILENO) == 1;
    p->last_permille = -1;
    p->start = kipp_now_seconds();
}

void cli_progress_update(void *ctx, uint64_t done, uint64_t total) {
    cli_progress *p = ctx;
    if (!p->enabled || total == 0) return;
    int permille = (int)(done >= total ? 1000 : done * 1000 / total);
    if (permille == p->last_permille) return;
    p->last_permille = permille;
    enum { WIDTH = 40 };
    char bar[WIDTH + 1];
    int filled = permille * WIDTH / 1000;
    for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[WIDTH] = '\0';
    double secs = kipp_now_seconds() - p->start;
    fprintf(stderr, "\r%s [%s] %5.1f%%  %.0f/%.0f MiB  %.0fs", p->label, bar, permille / 10.0,
            (double)done / 1048576.0, (double)total / 1048576.0, secs);
    fflush(stderr);
}

void cli_progress_finish(cli_progress *p) {
    if (p->enabled && p->last_permille >= 0) fputc('\n', stderr);
}
