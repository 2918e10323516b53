/* Which revision a checkpoint directory holds, as far as the directory
 * itself reveals it, compared with the registry entry's pin. Evidence read
 * (each one written by a tool that knows the commit it fetched; nothing is
 * guessed from file contents):
 *   - a Hugging Face cache snapshot: DIR resolves to
 *     .../models--ORG--NAME/snapshots/<40 hex>, the commit (and repository)
 *     huggingface_hub stored the files under;
 *   - `huggingface-cli download --local-dir DIR`: the first line of each
 *     DIR/.cache/huggingface/download/FILE.metadata is the commit FILE came
 *     from;
 *   - a git clone: DIR/.git/HEAD, directly or through its ref (loose or in
 *     packed-refs).
 * A cache's refs/main is not read: it says where a branch pointed when last
 * fetched, not which commit a snapshot directory holds. A directory with no
 * such evidence (tools/download.sh fetches by the pinned commit) passes. */
#ifndef KIPP_CONVERT_PROVENANCE_H
#define KIPP_CONVERT_PROVENANCE_H

#include <stdbool.h>

#include "kipp.h"

typedef struct kipp_provenance {
    /* "REPOSITORY@REVISION" the files came from when that differs from the
     * entry's pin (REPOSITORY is the entry's when nothing names another);
     * "" when nothing disagrees with the pin. */
    char unpinned[320];
} kipp_provenance;

/* Fails when the directory reveals another revision (or, from a cache path,
 * another repository) than entry c pins, unless allow_unpinned; out says
 * what was found either way. */
int kipp_provenance_check(const char *dir, const kipp_checkpoint *c, bool allow_unpinned,
                          kipp_provenance *out, kipp_error *err);

#endif
