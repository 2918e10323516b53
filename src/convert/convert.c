#include "convert/convert.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/encode.h"
#include "convert/hf_config.h"
#include "convert/layout.h"
#include "convert/provenance.h"
#include "convert/safetensors.h"
#include "convert/vocab.h"
#include "core/common.h"
#include "core/gguf.h"
#include "core/json.h"
#include "core/sha256.h"

#define MAX_SOURCES 4096
/* Elements per streamed chunk (a multiple of 32): 2 MiB of BF16 in. */
#define CHUNK_ELEMS (1u << 20)

typedef struct converter {
    const char *dir;
    const kipp_convert_options *opt;
    const kipp_checkpoint *entry;
    const kipp_scheme_info *scheme;
    /* identity sources, owned (generation_text NULL when the file is absent) */
    char *config_text, *generation_text;
    size_t config_len, generation_len;
    char *template_text; /* chat_template.jinja, when present */
    kipp_provenance provenance;
    /* source files (names relative to dir), sorted, with their hashes */
    char *files[MAX_SOURCES];
    char sha[MAX_SOURCES][65];
    size_t n_files;
    uint64_t source_bytes;
    /* safetensors shards */
    st_file *shards;
    char **shard_names;
    size_t n_shards;
    json_doc *index_doc;
    /* per layout tensor: where its data is */
    kipp_layout_tensor *layout;
    const st_tensor **src;
    const st_file **src_file;
    size_t n_layout;
    /* a tied entry's redundant lm_head.weight, compared then dropped */
    const st_tensor *tied_head;
    const st_file *tied_head_file;
    kipp_vocab vocab;
    uint64_t progress_done, progress_total;
} converter;

static int path_of(const converter *cv, const char *name, char *out, size_t cap, kipp_error *err) {
    if (snprintf(out, cap, "%s/%s", cv->dir, name) >= (int)cap)
        return kipp_fail(err, KIPP_E_ARGUMENT, "path too long: %s/%s", cv->dir, name);
    return KIPP_OK;
}

static bool exists(const converter *cv, const char *name) {
    char path[4096];
    struct stat sb;
    return path_of(cv, name, path, sizeof path, NULL) == KIPP_OK && stat(path, &sb) == 0;
}

static int add_source(converter *cv, const char *name, kipp_error *err) {
    for (size_t i = 0; i < cv->n_files; i++)
        if (strcmp(cv->files[i], name) == 0) return KIPP_OK;
    if (cv->n_files == MAX_SOURCES)
        return kipp_fail(err, KIPP_E_FORMAT, "too many source files");
    if (!(cv->files[cv->n_files] = strdup(name)))
        return kipp_fail(err, KIPP_E_MEMORY, "out of memory");
    cv->n_files++;
    return KIPP_OK;
}

static int read_source(converter *cv, const char *name, char **text, size_t *len, kipp_error *err) {
    char path[4096];
    int rc = path_of(cv, name, path, sizeof path, err);
    if (rc || (rc = kipp_read_file(path, text, len, err))) return rc;
    return add_source(cv, name, err);
}

static void progress(converter *cv, uint64_t bytes) {
    cv->progress_done += bytes;
    if (cv->opt->progress)
        cv->opt->progress(cv->opt->progress_ctx, cv->progress_done, cv->progress_total);
}

/* ---- checkpoint files ------------------------------------------------ */

static int load_config(converter *cv, kipp_error *err) {
    return read_source(cv, "config.json", &cv->config_text, &cv->config_len, err);
}

/* generation_config.json is optional; when present its eos/bos ids are
 * compared with the entry (kipp_hf_config_match) and it is recorded among
 * the source hashes. */
static int load_generation_config(converter *cv, kipp_error *err) {
    if (!exists(cv, "generation_config.json")) return KIPP_OK;
    return read_source(cv, "generation_config.json", &cv->generation_text, &cv->generation_len,
                       err);
}

/* Newer Hugging Face revisions keep the chat template in chat_template.jinja
 * beside tokenizer_config.json (recent transformers versions save it there).
 * It is read whenever present; if tokenizer_config.json also has a template,
 * the two must be the same text, since either could be the one meant. The
 * bytes are taken as they are (no newline added or trimmed). */
static int load_chat_template_file(converter *cv, kipp_error *err) {
    if (!exists(cv, "chat_template.jinja")) return KIPP_OK;
    size_t len = 0;
    int rc = read_source(cv, "chat_template.jinja", &cv->template_text, &len, err);
    if (rc) return rc;
    if (memchr(cv->template_text, '\0', len))
        return kipp_fail(err, KIPP_E_FORMAT, "chat_template.jinja contains a NUL byte");
    if (len == 0) return kipp_fail(err, KIPP_E_FORMAT, "chat_template.jinja is empty");
    if (cv->vocab.chat_template && strcmp(cv->vocab.chat_template, cv->template_text) != 0)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "tokenizer_config.json has a chat_template and chat_template.jinja holds "
                         "a different one; remove the one that is not meant");
    cv->vocab.chat_template = cv->template_text;
    return KIPP_OK;
}

static int load_tokenizer(converter *cv, kipp_error *err) {
    char *tok = NULL, *cfg = NULL;
    size_t tok_len = 0, cfg_len = 0;
    int rc = read_source(cv, "tokenizer.json", &tok, &tok_len, err);
    if (!rc) rc = read_source(cv, "tokenizer_config.json", &cfg, &cfg_len, err);
    if (!rc) rc = kipp_vocab_build(&cv->vocab, tok, tok_len, cfg, cfg_len, err);
    free(tok);
    free(cfg);
    if (!rc) rc = load_chat_template_file(cv, err);
    return rc;
}

/* The registry entry, from everything the directory says about itself, and
 * the revision it reveals. */
static int match_entry(converter *cv, kipp_error *err) {
    kipp_hf_sources src = {
        .config = cv->config_text,
        .config_len = cv->config_len,
        .generation = cv->generation_text,
        .generation_len = cv->generation_len,
        .has_chat_template = cv->vocab.chat_template != NULL,
    };
    int rc = kipp_hf_config_match(&src, cv->opt->checkpoint_id, &cv->entry, err);
    if (!rc)
        rc = kipp_provenance_check(cv->dir, cv->entry, cv->opt->allow_unpinned, &cv->provenance,
                                   err);
    return rc;
}

static bool valid_shard_name(const char *name) {
    size_t n = strlen(name);
    return n > 12 && n < 200 && !strchr(name, '/') && name[0] != '.' &&
           strcmp(name + n - 12, ".safetensors") == 0;
}

static int open_shard(converter *cv, const char *name, kipp_error *err) {
    for (size_t i = 0; i < cv->n_shards; i++)
        if (strcmp(cv->shard_names[i], name) == 0) return KIPP_OK;
    char path[4096];
    int rc = path_of(cv, name, path, sizeof path, err);
    if (rc) return rc;
    st_file *shards = realloc(cv->shards, (cv->n_shards + 1) * sizeof *shards);
    if (shards) cv->shards = shards;
    char **names = realloc(cv->shard_names, (cv->n_shards + 1) * sizeof *names);
    if (names) cv->shard_names = names;
    if (!shards || !names) return kipp_fail(err, KIPP_E_MEMORY, "out of memory");
    if ((rc = kipp_st_open(path, &cv->shards[cv->n_shards], err))) return rc;
    if (!(cv->shard_names[cv->n_shards] = strdup(name))) {
        kipp_st_close(&cv->shards[cv->n_shards]);
        return kipp_fail(err, KIPP_E_MEMORY, "out of memory");
    }
    cv->n_shards++;
    return add_source(cv, name, err);
}

/* Opens model.safetensors, or every shard the index's weight_map names. */
static int open_weights(converter *cv, kipp_error *err) {
    if (!exists(cv, "model.safetensors.index.json")) {
        if (!exists(cv, "model.safetensors"))
            return kipp_fail(err, KIPP_E_IO,
                             "%s has neither model.safetensors nor model.safetensors.index.json",
                             cv->dir);
        return open_shard(cv, "model.safetensors", err);
    }
    char *text = NULL;
    size_t len = 0;
    int rc = read_source(cv, "model.safetensors.index.json", &text, &len, err);
    if (!rc && (rc = kipp_json_parse(text, len, &cv->index_doc, err)))
        kipp_fail_prefix(err, "model.safetensors.index.json: invalid JSON");
    free(text);
    if (rc) return rc;
    const json_value *map = kipp_json_get_type(kipp_json_root(cv->index_doc), "weight_map", JSON_OBJECT);
    if (!map)
        return kipp_fail(err, KIPP_E_FORMAT, "model.safetensors.index.json: no \"weight_map\" object");
    for (size_t i = 0; i < map->as.object.count; i++) {
        const json_value *f = map->as.object.values[i];
        if (f->type != JSON_STRING || !valid_shard_name(f->as.string.chars))
            return kipp_fail(err, KIPP_E_FORMAT,
                             "model.safetensors.index.json: tensor '%s' maps to an invalid file name",
                             map->as.object.keys[i]);
        if ((rc = open_shard(cv, f->as.string.chars, err))) return rc;
    }
    if (cv->n_shards == 0)
        return kipp_fail(err, KIPP_E_FORMAT, "model.safetensors.index.json: empty weight_map");
    return KIPP_OK;
}

static void shape_text(char *buf, size_t cap, uint32_t n_dims, const uint64_t *shape) {
    int n = snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < n_dims && n > 0 && (size_t)n < cap; d++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%" PRIu64, d ? ", " : "", shape[d]);
    if (n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, "]");
}

static int check_tensor(const converter *cv, const kipp_layout_tensor *want, const st_tensor *t,
                        const st_file *f, kipp_error *err) {
    if (strcmp(t->dtype, "BF16") != 0)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "%s: tensor '%s' has dtype %s; kipp converts BF16 checkpoints only",
                         f->path, t->name, t->dtype);
    bool same = t->n_dims == want->n_dims;
    for (uint32_t d = 0; same && d < t->n_dims; d++) same = t->shape[d] == want->shape[d];
    if (!same) {
        char have[128], need[64];
        shape_text(have, sizeof have, t->n_dims, t->shape);
        shape_text(need, sizeof need, want->n_dims, want->shape);
        return kipp_fail(err, KIPP_E_FORMAT,
                         "%s: tensor '%s' has shape %s; registry entry '%s' needs %s", f->path,
                         t->name, have, cv->entry->id, need);
    }
    return KIPP_OK;
}

/* Binds every expected tensor to its source, rejecting anything missing,
 * extra, duplicated, mistyped or misshapen. */
static int bind_tensors(converter *cv, kipp_error *err) {
    cv->n_layout = kipp_layout_count(cv->entry);
    cv->layout = kipp_calloc(cv->n_layout, sizeof *cv->layout, err);
    cv->src = kipp_calloc(cv->n_layout, sizeof *cv->src, err);
    cv->src_file = kipp_calloc(cv->n_layout, sizeof *cv->src_file, err);
    if (!cv->layout || !cv->src || !cv->src_file) return KIPP_E_MEMORY;
    for (size_t i = 0; i < cv->n_layout; i++) kipp_layout_at(cv->entry, i, &cv->layout[i]);
    int rc;
    for (size_t s = 0; s < cv->n_shards; s++) {
        const st_file *f = &cv->shards[s];
        for (size_t k = 0; k < f->n_tensors; k++) {
            const st_tensor *t = &f->tensors[k];
            size_t i = 0;
            while (i < cv->n_layout && strcmp(cv->layout[i].hf_name, t->name) != 0) i++;
            if (i == cv->n_layout) {
                if (cv->entry->tied && strcmp(t->name, "lm_head.weight") == 0 && !cv->tied_head) {
                    cv->tied_head = t;
                    cv->tied_head_file = f;
                    continue;
                }
                return kipp_fail(err, KIPP_E_FORMAT,
                                 "%s: unexpected tensor '%s' (not part of registry entry '%s')",
                                 f->path, t->name, cv->entry->id);
            }
            if (cv->src[i])
                return kipp_fail(err, KIPP_E_FORMAT, "tensor '%s' appears in both %s and %s",
                                 t->name, cv->src_file[i]->path, f->path);
            if ((rc = check_tensor(cv, &cv->layout[i], t, f, err))) return rc;
            cv->src[i] = t;
            cv->src_file[i] = f;
        }
    }
    for (size_t i = 0; i < cv->n_layout; i++)
        if (!cv->src[i])
            return kipp_fail(err, KIPP_E_FORMAT, "missing tensor '%s' (registry entry '%s' needs it)",
                             cv->layout[i].hf_name, cv->entry->id);
    if (cv->tied_head && (rc = check_tensor(cv, &cv->layout[0], cv->tied_head,
                                            cv->tied_head_file, err)))
        return rc;
    /* the index must say where each tensor really is */
    if (cv->index_doc) {
        const json_value *map = kipp_json_get(kipp_json_root(cv->index_doc), "weight_map");
        for (size_t j = 0; j < map->as.object.count; j++) {
            const char *name = map->as.object.keys[j];
            const char *file = map->as.object.values[j]->as.string.chars;
            size_t s = 0;
            while (s < cv->n_shards && strcmp(cv->shard_names[s], file) != 0) s++;
            if (!kipp_st_find(&cv->shards[s], name))
                return kipp_fail(err, KIPP_E_FORMAT,
                                 "model.safetensors.index.json lists tensor '%s' in %s, which "
                                 "does not contain it", name, file);
        }
    }
    return KIPP_OK;
}

/* ---- hashing ------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int hash_sources(converter *cv, uint8_t *buf, size_t cap, kipp_error *err) {
    qsort(cv->files, cv->n_files, sizeof cv->files[0], cmp_str);
    for (size_t i = 0; i < cv->n_files; i++) {
        char path[4096];
        int rc = path_of(cv, cv->files[i], path, sizeof path, err);
        if (rc) return rc;
        FILE *f = fopen(path, "rb");
        if (!f) return kipp_fail(err, KIPP_E_IO, "cannot open %s: %s", path, strerror(errno));
        kipp_sha256 s;
        kipp_sha256_init(&s);
        size_t n;
        while ((n = fread(buf, 1, cap, f)) > 0) {
            kipp_sha256_update(&s, buf, n);
            progress(cv, n);
        }
        bool bad = ferror(f);
        fclose(f);
        if (bad) return kipp_fail(err, KIPP_E_IO, "read failed on %s", path);
        uint8_t digest[32];
        kipp_sha256_final(&s, digest);
        kipp_sha256_hex(digest, cv->sha[i]);
    }
    return KIPP_OK;
}

/* ---- output ------------------------------------------------------------- */

static uint32_t output_type(const converter *cv, const kipp_layout_tensor *t) {
    switch (t->role) {
    case KIPP_ROLE_EMBED:
    case KIPP_ROLE_OUTPUT: return GGML_TYPE_BF16;
    case KIPP_ROLE_PROJ: return cv->scheme->proj_type;
    default: return GGML_TYPE_F32; /* norms: exact widening, as llama.cpp stores 1-D tensors */
    }
}

static int add_metadata(converter *cv, gguf_writer *w, kipp_error *err) {
    const kipp_checkpoint *c = cv->entry;
    const kipp_vocab *v = &cv->vocab;
    int rc;
    if ((rc = kipp_gguf_writer_add_string(w, "general.architecture", "qwen3", err)) ||
        (rc = kipp_gguf_writer_add_string(w, "general.name", c->id, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "general.file_type", cv->scheme->file_type, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "qwen3.context_length", c->context, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "qwen3.embedding_length", c->hidden, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "qwen3.block_count", c->layers, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "qwen3.feed_forward_length", c->ffn, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "qwen3.attention.head_count", c->heads, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "qwen3.attention.head_count_kv", KIPP_KV_HEADS, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "qwen3.attention.key_length", KIPP_HEAD_DIM, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "qwen3.attention.value_length", KIPP_HEAD_DIM, err)) ||
        (rc = kipp_gguf_writer_add_f32(w, "qwen3.rope.freq_base", (float)c->rope_theta, err)) ||
        (rc = kipp_gguf_writer_add_f32(w, "qwen3.attention.layer_norm_rms_epsilon", KIPP_RMS_EPS,
                                  err)) ||
        (rc = kipp_gguf_writer_add_string(w, "tokenizer.ggml.model", "gpt2", err)) ||
        (rc = kipp_gguf_writer_add_string(w, "tokenizer.ggml.pre", "qwen2", err)) ||
        (rc = kipp_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", v->tokens, v->token_lens,
                                           KIPP_VOCAB_SIZE, err)) ||
        (rc = kipp_gguf_writer_add_i32_array(w, "tokenizer.ggml.token_type", v->types,
                                        KIPP_VOCAB_SIZE, err)) ||
        (rc = kipp_gguf_writer_add_string_array(w, "tokenizer.ggml.merges", v->merges, v->merge_lens,
                                           v->n_merges, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", 151643, err)) ||
        (rc = kipp_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 151643, err)) ||
        (rc = kipp_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false, err)))
        return rc;
    if (c->variant != KIPP_VARIANT_BASE &&
        (rc = kipp_gguf_writer_add_string(w, "tokenizer.chat_template", v->chat_template, err)))
        return rc;
    const char *sha[MAX_SOURCES];
    size_t lens[MAX_SOURCES], name_lens[MAX_SOURCES];
    for (size_t i = 0; i < cv->n_files; i++) {
        sha[i] = cv->sha[i];
        lens[i] = 64;
        name_lens[i] = strlen(cv->files[i]);
    }
    if ((rc = kipp_gguf_writer_add_string(w, "kipp.checkpoint", c->id, err)) ||
        (rc = kipp_gguf_writer_add_string(w, "kipp.source.repository", c->source_repository, err)) ||
        (rc = kipp_gguf_writer_add_string(w, "kipp.source.revision", c->revision, err)) ||
        (cv->provenance.unpinned[0] &&
         (rc = kipp_gguf_writer_add_string(w, "kipp.source.unpinned", cv->provenance.unpinned,
                                           err))) ||
        (rc = kipp_gguf_writer_add_string_array(w, "kipp.source.files", (const char *const *)cv->files,
                                           name_lens, cv->n_files, err)) ||
        (rc = kipp_gguf_writer_add_string_array(w, "kipp.source.sha256", sha, lens, cv->n_files, err)) ||
        (rc = kipp_gguf_writer_add_string(w, "kipp.quant.scheme", cv->scheme->name, err)) ||
        (rc = kipp_gguf_writer_add_string(w, "kipp.converter.version", KIPP_VERSION_STRING, err)))
        return rc;
    return KIPP_OK;
}

typedef struct buffers {
    uint16_t *in;   /* [CHUNK_ELEMS] BF16 */
    uint16_t *in2;  /* [CHUNK_ELEMS] for the tied-head comparison */
    float *scratch; /* [CHUNK_ELEMS] */
    uint8_t *out;   /* [CHUNK_ELEMS * 4] widest encoding (F32) */
} buffers;

/* A tied checkpoint may still store lm_head.weight; it is dropped only if it
 * is byte-identical to the embedding (otherwise the file is not tied). */
static int check_tied_head(converter *cv, buffers *b, kipp_error *err) {
    if (!cv->tied_head) return KIPP_OK;
    const st_tensor *e = cv->src[0];
    uint64_t total = e->end - e->begin;
    for (uint64_t at = 0; at < total; at += CHUNK_ELEMS * 2) {
        size_t n = total - at < CHUNK_ELEMS * 2 ? (size_t)(total - at) : CHUNK_ELEMS * 2;
        int rc;
        if ((rc = kipp_st_read(cv->src_file[0], e, at, b->in, n, err)) ||
            (rc = kipp_st_read(cv->tied_head_file, cv->tied_head, at, b->in2, n, err)))
            return rc;
        if (memcmp(b->in, b->in2, n) != 0)
            return kipp_fail(err, KIPP_E_FORMAT,
                             "registry entry '%s' is tied, but lm_head.weight differs from "
                             "model.embed_tokens.weight", cv->entry->id);
    }
    return KIPP_OK;
}

/* No trained checkpoint holds a NaN or an infinity: one is a corrupt file,
 * which BF16 output would copy into NaN logits and the quantizers would
 * turn into a finite but wrong block (their scale saturates, a NaN quotient
 * becomes 0). Checked on the BF16 bits as each chunk streams through. */
static int check_finite(const converter *cv, size_t i, const uint16_t *v, size_t n, uint64_t at,
                        kipp_error *err) {
    for (size_t k = 0; k < n; k++)
        if ((v[k] & 0x7f80u) == 0x7f80u)
            return kipp_fail(err, KIPP_E_FORMAT,
                             "%s: tensor '%s' element %" PRIu64 " is %s: the checkpoint is corrupt",
                             cv->src_file[i]->path, cv->src[i]->name, at + k,
                             v[k] & 0x7fu ? "NaN" : "infinite");
    return KIPP_OK;
}

static int write_tensors(converter *cv, gguf_writer *w, FILE *fp, buffers *b, kipp_error *err) {
    for (size_t i = 0; i < cv->n_layout; i++) {
        const kipp_encoder *enc = kipp_encoder_for(output_type(cv, &cv->layout[i]));
        uint64_t elems = kipp_layout_elements(&cv->layout[i]);
        for (uint64_t at = 0; at < elems; at += CHUNK_ELEMS) {
            size_t n = elems - at < CHUNK_ELEMS ? (size_t)(elems - at) : CHUNK_ELEMS;
            int rc = kipp_st_read(cv->src_file[i], cv->src[i], at * 2, b->in, n * 2, err);
            if (rc || (rc = check_finite(cv, i, b->in, n, at, err))) return rc;
            enc->encode(b->in, n, b->out, b->scratch);
            size_t out_bytes = n / enc->block_elems * enc->block_bytes;
            if ((rc = kipp_gguf_writer_write_data(w, fp, i, b->out, out_bytes, err))) return rc;
            progress(cv, n * 2);
        }
    }
    return KIPP_OK;
}

/* ---- FILE.tmp and terminating signals ------------------------------------ */

/* The path a terminating signal removes. A fixed buffer and a flag, because
 * the handler may only use async-signal-safe calls (unlink, raise). */
static char signal_tmp_path[4096];
static volatile sig_atomic_t signal_tmp_armed;
static const int cleanup_signals[] = {SIGHUP, SIGINT, SIGTERM};
#define N_CLEANUP_SIGNALS (sizeof cleanup_signals / sizeof cleanup_signals[0])

typedef struct signal_guard {
    bool installed[N_CLEANUP_SIGNALS];
    struct sigaction old[N_CLEANUP_SIGNALS];
    bool xfsz_ignored;
    struct sigaction old_xfsz;
} signal_guard;

static void remove_tmp_then_die(int sig) {
    if (signal_tmp_armed) unlink(signal_tmp_path);
    /* SA_RESETHAND put back the default action, and the signal is blocked
     * while this runs: once it returns, the re-raised signal ends the process
     * with the status its sender and the shell expect (e.g. 130 for SIGINT). */
    raise(sig);
}

/* Arms the handler for tmp before tmp is created, so there is no window in
 * which it exists unguarded. */
static void signal_guard_install(signal_guard *g, const char *tmp) {
    memset(g, 0, sizeof *g);
    snprintf(signal_tmp_path, sizeof signal_tmp_path, "%s", tmp);
    signal_tmp_armed = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = remove_tmp_then_die;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_CLEANUP_SIGNALS; i++) sigaddset(&sa.sa_mask, cleanup_signals[i]);
    for (size_t i = 0; i < N_CLEANUP_SIGNALS; i++) {
        /* a signal the process ignores (nohup, a background job) stays
         * ignored: it cannot interrupt the write */
        if (sigaction(cleanup_signals[i], NULL, &g->old[i]) != 0 ||
            g->old[i].sa_handler == SIG_IGN)
            continue;
        g->installed[i] = sigaction(cleanup_signals[i], &sa, NULL) == 0;
    }
    /* By default exceeding RLIMIT_FSIZE kills the process with SIGXFSZ,
     * leaving the partial file; ignored, the write fails with EFBIG and the
     * ordinary error path reports it and removes tmp. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    if (sigaction(SIGXFSZ, NULL, &g->old_xfsz) == 0 && g->old_xfsz.sa_handler == SIG_DFL)
        g->xfsz_ignored = sigaction(SIGXFSZ, &ign, NULL) == 0;
}

/* Called once tmp is renamed or removed. */
static void signal_guard_remove(signal_guard *g) {
    signal_tmp_armed = 0;
    for (size_t i = 0; i < N_CLEANUP_SIGNALS; i++)
        if (g->installed[i]) sigaction(cleanup_signals[i], &g->old[i], NULL);
    if (g->xfsz_ignored) sigaction(SIGXFSZ, &g->old_xfsz, NULL);
}

static int write_artifact(converter *cv, const char *out_path, kipp_error *err) {
    buffers b = {0};
    gguf_writer *w = NULL;
    FILE *fp = NULL;
    char tmp[4096];
    signal_guard guard;
    bool guarded = false;
    int rc = KIPP_OK;
    if (snprintf(tmp, sizeof tmp, "%s.tmp", out_path) >= (int)sizeof tmp)
        return kipp_fail(err, KIPP_E_ARGUMENT, "output path too long");
    b.in = kipp_malloc(CHUNK_ELEMS * sizeof *b.in, err);
    b.in2 = kipp_malloc(CHUNK_ELEMS * sizeof *b.in2, err);
    b.scratch = kipp_malloc(CHUNK_ELEMS * sizeof *b.scratch, err);
    b.out = kipp_malloc(CHUNK_ELEMS * 4, err);
    if (!b.in || !b.in2 || !b.scratch || !b.out) { rc = KIPP_E_MEMORY; goto done; }

    cv->progress_total = cv->source_bytes;
    for (size_t i = 0; i < cv->n_layout; i++)
        cv->progress_total += cv->src[i]->end - cv->src[i]->begin;
    if ((rc = check_tied_head(cv, &b, err)) ||
        (rc = hash_sources(cv, b.out, CHUNK_ELEMS * 4, err)) ||
        (rc = kipp_gguf_writer_create(&w, err)) || (rc = add_metadata(cv, w, err)))
        goto done;
    for (size_t i = 0; i < cv->n_layout; i++) {
        const kipp_layout_tensor *t = &cv->layout[i];
        uint64_t ne[2] = {t->n_dims == 2 ? t->shape[1] : t->shape[0], t->shape[0]};
        if ((rc = kipp_gguf_writer_add_tensor(w, t->gguf_name, t->n_dims, ne, output_type(cv, t), err)))
            goto done;
    }
    if (cv->opt->remove_tmp_on_signal) {
        signal_guard_install(&guard, tmp);
        guarded = true;
    }
    if (!(fp = fopen(tmp, "wb"))) {
        rc = kipp_fail(err, KIPP_E_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto done;
    }
    setvbuf(fp, NULL, _IOFBF, 1 << 20);
    if ((rc = kipp_gguf_writer_write_header(w, fp, err)) || (rc = write_tensors(cv, w, fp, &b, err)) ||
        (rc = kipp_gguf_writer_finish(w, fp, err)))
        goto done;
    int closed = fclose(fp);
    fp = NULL;
    if (closed != 0) {
        rc = kipp_fail(err, KIPP_E_IO, "write failed on %s: %s", tmp, strerror(errno));
        goto done;
    }
    if (rename(tmp, out_path) != 0)
        rc = kipp_fail(err, KIPP_E_IO, "cannot rename %s to %s: %s", tmp, out_path,
                       strerror(errno));
done:
    if (fp) fclose(fp);
    /* every failure, including one before tmp exists (then ENOENT) */
    if (rc) unlink(tmp);
    if (guarded) signal_guard_remove(&guard);
    kipp_gguf_writer_destroy(w);
    free(b.in);
    free(b.in2);
    free(b.scratch);
    free(b.out);
    return rc;
}

static void converter_free(converter *cv) {
    for (size_t i = 0; i < cv->n_files; i++) free(cv->files[i]);
    for (size_t i = 0; i < cv->n_shards; i++) {
        kipp_st_close(&cv->shards[i]);
        free(cv->shard_names[i]);
    }
    free(cv->shards);
    free(cv->shard_names);
    kipp_json_free(cv->index_doc);
    free(cv->layout);
    free(cv->src);
    free(cv->src_file);
    kipp_vocab_free(&cv->vocab);
    free(cv->config_text);
    free(cv->generation_text);
    free(cv->template_text);
}

int kipp_convert(const char *dir, const char *out_path, const kipp_convert_options *opt,
                 kipp_error *err) {
    const char *quant = opt->quant ? opt->quant : "bf16";
    const kipp_scheme_info *scheme = kipp_scheme_lookup(quant);
    if (!scheme)
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "unknown --quant '%s' (bf16, q8_0, affine4_gs32, scale4_gs32)", quant);
    converter *cv = kipp_calloc(1, sizeof *cv, err);
    if (!cv) return KIPP_E_MEMORY;
    cv->dir = dir;
    cv->opt = opt;
    cv->scheme = scheme;
    int rc;
    if ((rc = load_config(cv, err)) || (rc = load_generation_config(cv, err)) ||
        (rc = load_tokenizer(cv, err)) || (rc = match_entry(cv, err)) ||
        (rc = open_weights(cv, err)) || (rc = bind_tensors(cv, err)))
        goto done;
    for (size_t i = 0; i < cv->n_files; i++) {
        char path[4096];
        struct stat sb;
        if ((rc = path_of(cv, cv->files[i], path, sizeof path, err))) goto done;
        if (stat(path, &sb) != 0) {
            rc = kipp_fail(err, KIPP_E_IO, "cannot stat %s: %s", path, strerror(errno));
            goto done;
        }
        cv->source_bytes += (uint64_t)sb.st_size;
    }
    rc = write_artifact(cv, out_path, err);
done:
    converter_free(cv);
    free(cv);
    return rc;
}
