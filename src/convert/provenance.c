#include "convert/provenance.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/common.h"

#define HEX40 40
/* a path (at most 4096 bytes) plus a few words */
#define EVIDENCE_LEN 4200

/* The first disagreement with the pin, if any. */
typedef struct finding {
    const kipp_checkpoint *entry;
    bool found;
    char repository[200]; /* "" when the evidence names none */
    char revision[HEX40 + 1];
    char evidence[EVIDENCE_LEN];
} finding;

static bool is_hex40(const char *s, size_t n) {
    if (n != HEX40) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

/* Records (repository, revision) from `evidence` when it is not the pin. */
static void consider(finding *f, const char *repository, const char *revision,
                     const char *evidence) {
    if (f->found) return;
    bool other_repo = repository && strcasecmp(repository, f->entry->source_repository) != 0;
    if (!other_repo && strcmp(revision, f->entry->revision) == 0) return;
    f->found = true;
    snprintf(f->repository, sizeof f->repository, "%s", other_repo ? repository : "");
    snprintf(f->revision, sizeof f->revision, "%s", revision);
    snprintf(f->evidence, sizeof f->evidence, "%s", evidence);
}

/* Reads up to cap-1 bytes of a small text file; false if it cannot be read. */
static bool read_small(const char *path, char *buf, size_t cap) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    size_t n = fread(buf, 1, cap - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return true;
}

static size_t first_line_len(const char *s) {
    size_t n = strcspn(s, "\r\n");
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    return n;
}

/* .../models--ORG--NAME/snapshots/<commit>: huggingface_hub's cache layout
 * (the repository id with "/" written as "--"; the hub forbids "--" inside
 * names, so the first one separates ORG from NAME). */
static void from_cache_path(finding *f, const char *dir) {
    char *real = realpath(dir, NULL);
    if (!real) return;
    size_t n = strlen(real);
    while (n > 1 && real[n - 1] == '/') real[--n] = '\0';
    char *rev = strrchr(real, '/');
    if (rev && is_hex40(rev + 1, strlen(rev + 1))) {
        *rev = '\0';
        char *snap = strrchr(real, '/');
        if (snap && strcmp(snap + 1, "snapshots") == 0) {
            *snap = '\0';
            char *repo_dir = strrchr(real, '/');
            char repo[200] = "";
            if (repo_dir && strncmp(repo_dir + 1, "models--", 8) == 0) {
                snprintf(repo, sizeof repo, "%s", repo_dir + 9);
                char *sep = strstr(repo, "--");
                if (sep) {
                    sep[0] = '/';
                    memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
                }
            }
            *snap = '/';
            *rev = '/';
            consider(f, repo[0] ? repo : NULL, rev + 1, "its Hugging Face cache snapshot path");
        }
    }
    free(real);
}

/* DIR/.cache/huggingface/download/FILE.metadata, written by huggingface_hub
 * for --local-dir downloads: "commit\netag\ntimestamp\n". */
static void from_local_dir_metadata(finding *f, const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/.cache/huggingface/download", dir) >= (int)sizeof path)
        return;
    struct dirent **names = NULL;
    int n = scandir(path, &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        size_t len = strlen(name);
        char file[4096], text[128];
        if (len > 9 && strcmp(name + len - 9, ".metadata") == 0 &&
            snprintf(file, sizeof file, "%s/%s", path, name) < (int)sizeof file &&
            read_small(file, text, sizeof text) && is_hex40(text, first_line_len(text))) {
            text[HEX40] = '\0';
            char evidence[EVIDENCE_LEN];
            snprintf(evidence, sizeof evidence,
                     ".cache/huggingface/download/%s, written by huggingface_hub", name);
            consider(f, NULL, text, evidence);
        }
        free(names[i]);
    }
    free(names);
}

/* A safe ref name under .git: no "..", only the characters git allows that
 * matter here. */
static bool plain_ref(const char *ref, size_t n) {
    if (n == 0 || n > 200 || strstr(ref, "..")) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = ref[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '/' || ch == '-' || ch == '_' || ch == '.'))
            return false;
    }
    return true;
}

/* A git clone of the repository: HEAD is a commit, or a ref found loose or
 * in packed-refs ("<commit> <ref>" lines). */
static void from_git(finding *f, const char *dir) {
    char path[4096], head[256], text[128];
    struct stat sb;
    if (snprintf(path, sizeof path, "%s/.git", dir) >= (int)sizeof path ||
        stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return;
    const char *evidence = "the git checkout's .git/HEAD";
    if (snprintf(path, sizeof path, "%s/.git/HEAD", dir) >= (int)sizeof path ||
        !read_small(path, head, sizeof head))
        return;
    size_t n = first_line_len(head);
    if (is_hex40(head, n)) {
        head[HEX40] = '\0';
        consider(f, NULL, head, evidence);
        return;
    }
    if (strncmp(head, "ref: ", 5) != 0 || !plain_ref(head + 5, n - 5)) return;
    head[n] = '\0';
    const char *ref = head + 5;
    if (snprintf(path, sizeof path, "%s/.git/%s", dir, ref) < (int)sizeof path &&
        read_small(path, text, sizeof text) && is_hex40(text, first_line_len(text))) {
        text[HEX40] = '\0';
        consider(f, NULL, text, evidence);
        return;
    }
    if (snprintf(path, sizeof path, "%s/.git/packed-refs", dir) >= (int)sizeof path) return;
    FILE *fp = fopen(path, "rb");
    if (!fp) return;
    char line[512];
    size_t ref_len = strlen(ref);
    while (fgets(line, sizeof line, fp)) {
        size_t len = first_line_len(line);
        if (len == HEX40 + 1 + ref_len && line[HEX40] == ' ' && is_hex40(line, HEX40) &&
            strncmp(line + HEX40 + 1, ref, ref_len) == 0) {
            line[HEX40] = '\0';
            consider(f, NULL, line, evidence);
            break;
        }
    }
    fclose(fp);
}

int kipp_provenance_check(const char *dir, const kipp_checkpoint *c, bool allow_unpinned,
                          kipp_provenance *out, kipp_error *err) {
    finding f;
    memset(&f, 0, sizeof f);
    f.entry = c;
    from_cache_path(&f, dir);
    from_local_dir_metadata(&f, dir);
    from_git(&f, dir);
    out->unpinned[0] = '\0';
    if (!f.found) return KIPP_OK;
    const char *repo = f.repository[0] ? f.repository : c->source_repository;
    snprintf(out->unpinned, sizeof out->unpinned, "%s@%s", repo, f.revision);
    if (allow_unpinned) return KIPP_OK;
    return kipp_fail(err, KIPP_E_REGISTRY,
                     "the checkpoint is %s (from %s), not %s@%s, which registry entry '%s' "
                     "pins; another revision may hold other weights or tokenizer files. To "
                     "convert it anyway pass --allow-unpinned (the artifact then records "
                     "kipp.source.unpinned)",
                     out->unpinned, f.evidence, c->source_repository, c->revision, c->id);
}
