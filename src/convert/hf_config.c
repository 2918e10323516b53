#include "convert/hf_config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/common.h"
#include "core/json.h"

/* Every entry's bos_token_id (<|endoftext|>); the artifact writes it too. */
#define FAMILY_BOS 151643
/* More ids than any entry's stop set, so a longer list is reported as a
 * mismatch rather than cut short. */
#define MAX_IDS 8
/* Fields compared per entry (see mismatches()). */
#define MAX_DIFFS 12
#define DIFF_LEN 160

/* An eos/bos field: absent, one id, or a list of ids. */
typedef struct id_list {
    bool present;
    bool is_list;
    size_t n;
    int64_t ids[MAX_IDS];
} id_list;

/* Everything the directory says about which entry it is. */
typedef struct facts {
    int64_t layers, hidden, ffn, heads, context;
    double rope_theta;
    bool tied;
    id_list eos, bos;         /* config.json */
    id_list gen_eos, gen_bos; /* generation_config.json; absent when the file is */
    bool has_chat_template;
} facts;

typedef struct diffs {
    size_t n;
    char text[MAX_DIFFS][DIFF_LEN];
} diffs;

static int need_int(const json_value *root, const char *key, int64_t *out, kipp_error *err) {
    const json_value *v = kipp_json_get(root, key);
    if (!v)
        return kipp_fail(err, KIPP_E_FORMAT, "config.json: missing \"%s\"", key);
    if (v->type != JSON_NUMBER || !v->as.number.is_integer || !v->as.number.fits_int64)
        return kipp_fail(err, KIPP_E_FORMAT, "config.json: \"%s\" is not an integer", key);
    *out = v->as.number.integer;
    return KIPP_OK;
}

/* Family invariants every entry shares; violating one means "not a Qwen3
 * dense checkpoint Kipp supports", whatever the dimensions. */
static int check_family(const json_value *root, kipp_error *err) {
    const json_value *arch = kipp_json_get_type(root, "architectures", JSON_ARRAY);
    bool found = false;
    for (size_t i = 0; arch && i < arch->as.array.count; i++) {
        const json_value *a = arch->as.array.items[i];
        if (a->type == JSON_STRING && strcmp(a->as.string.chars, "Qwen3ForCausalLM") == 0)
            found = true;
    }
    if (!found)
        return kipp_fail(err, KIPP_E_REGISTRY,
                         "config.json: \"architectures\" does not list Qwen3ForCausalLM; "
                         "kipp converts Qwen3 dense checkpoints only");
    const char *model_type = kipp_json_get_string(root, "model_type");
    if (!model_type || strcmp(model_type, "qwen3") != 0)
        return kipp_fail(err, KIPP_E_REGISTRY, "config.json: \"model_type\" is %s%s%s, not \"qwen3\"",
                         model_type ? "\"" : "", model_type ? model_type : "missing",
                         model_type ? "\"" : "");
    int64_t v;
    int rc;
    if ((rc = need_int(root, "num_key_value_heads", &v, err))) return rc;
    if (v != KIPP_KV_HEADS)
        return kipp_fail(err, KIPP_E_REGISTRY,
                         "config.json: num_key_value_heads is %lld; every registry entry has %d",
                         (long long)v, KIPP_KV_HEADS);
    if (kipp_json_get(root, "head_dim")) {
        if ((rc = need_int(root, "head_dim", &v, err))) return rc;
        if (v != KIPP_HEAD_DIM)
            return kipp_fail(err, KIPP_E_REGISTRY,
                             "config.json: head_dim is %lld; every registry entry has %d",
                             (long long)v, KIPP_HEAD_DIM);
    }
    if ((rc = need_int(root, "vocab_size", &v, err))) return rc;
    if (v != KIPP_VOCAB_SIZE)
        return kipp_fail(err, KIPP_E_REGISTRY,
                         "config.json: vocab_size is %lld; every registry entry has %d",
                         (long long)v, KIPP_VOCAB_SIZE);
    double eps;
    if (!kipp_json_get_double(root, "rms_norm_eps", &eps) || eps < 0.999e-6 || eps > 1.001e-6)
        return kipp_fail(err, KIPP_E_REGISTRY, "config.json: rms_norm_eps must be 1e-06");
    const char *act = kipp_json_get_string(root, "hidden_act");
    if (kipp_json_get(root, "hidden_act") && (!act || strcmp(act, "silu") != 0))
        return kipp_fail(err, KIPP_E_REGISTRY, "config.json: hidden_act must be \"silu\"");
    const json_value *scaling = kipp_json_get(root, "rope_scaling");
    if (scaling && scaling->type != JSON_NULL)
        return kipp_fail(err, KIPP_E_REGISTRY,
                         "config.json: rope_scaling is set; registry entries use plain RoPE");
    bool flag;
    if (kipp_json_get(root, "attention_bias") &&
        (!kipp_json_get_bool(root, "attention_bias", &flag) || flag))
        return kipp_fail(err, KIPP_E_REGISTRY, "config.json: attention_bias must be false");
    if (kipp_json_get(root, "use_sliding_window") &&
        (!kipp_json_get_bool(root, "use_sliding_window", &flag) || flag))
        return kipp_fail(err, KIPP_E_REGISTRY, "config.json: use_sliding_window must be false");
    /* transformers writes "torch_dtype" (older) or "dtype" (newer) */
    const char *keys[] = {"torch_dtype", "dtype"};
    for (size_t i = 0; i < 2; i++) {
        if (!kipp_json_get(root, keys[i])) continue;
        const char *dt = kipp_json_get_string(root, keys[i]);
        if (!dt || strcmp(dt, "bfloat16") != 0)
            return kipp_fail(err, KIPP_E_REGISTRY,
                             "config.json: %s is %s%s%s; registry checkpoints are bfloat16",
                             keys[i], dt ? "\"" : "", dt ? dt : "not a string", dt ? "\"" : "");
    }
    return KIPP_OK;
}

/* Reads key as one integer id or a list of them; null counts as absent. */
static int read_ids(const json_value *root, const char *file, const char *key, id_list *out,
                    kipp_error *err) {
    memset(out, 0, sizeof *out);
    const json_value *v = kipp_json_get(root, key);
    if (!v || v->type == JSON_NULL) return KIPP_OK;
    out->present = true;
    const json_value *const *items = &v;
    size_t n = 1;
    if (v->type == JSON_ARRAY) {
        out->is_list = true;
        items = (const json_value *const *)v->as.array.items;
        n = v->as.array.count;
    }
    if (n == 0 || n > MAX_IDS)
        return kipp_fail(err, KIPP_E_FORMAT, "%s: \"%s\" must list 1 to %d token ids", file, key,
                         MAX_IDS);
    for (size_t i = 0; i < n; i++) {
        const json_value *it = items[i];
        if (it->type != JSON_NUMBER || !it->as.number.is_integer || !it->as.number.fits_int64)
            return kipp_fail(err, KIPP_E_FORMAT,
                             "%s: \"%s\" is not a token id or a list of token ids", file, key);
        out->ids[i] = it->as.number.integer;
    }
    out->n = n;
    return KIPP_OK;
}

static int read_config_facts(const json_value *root, facts *f, kipp_error *err) {
    int rc;
    if ((rc = need_int(root, "num_hidden_layers", &f->layers, err)) ||
        (rc = need_int(root, "hidden_size", &f->hidden, err)) ||
        (rc = need_int(root, "intermediate_size", &f->ffn, err)) ||
        (rc = need_int(root, "num_attention_heads", &f->heads, err)) ||
        (rc = need_int(root, "max_position_embeddings", &f->context, err)))
        return rc;
    if (!kipp_json_get_double(root, "rope_theta", &f->rope_theta))
        return kipp_fail(err, KIPP_E_FORMAT, "config.json: missing or non-numeric \"rope_theta\"");
    /* transformers' Qwen3Config default when the key is absent */
    f->tied = false;
    if (kipp_json_get(root, "tie_word_embeddings") &&
        !kipp_json_get_bool(root, "tie_word_embeddings", &f->tied))
        return kipp_fail(err, KIPP_E_FORMAT, "config.json: tie_word_embeddings is not a boolean");
    if ((rc = read_ids(root, "config.json", "eos_token_id", &f->eos, err)) ||
        (rc = read_ids(root, "config.json", "bos_token_id", &f->bos, err)))
        return rc;
    /* The stop token is what tells a base checkpoint from an instruct one of
     * the same shape; without it an edited dimension could flip the variant
     * unnoticed. Every Qwen3 config.json states it. */
    if (!f->eos.present)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "config.json: missing \"eos_token_id\" (it tells base from instruct "
                         "checkpoints)");
    return KIPP_OK;
}

static int read_generation_facts(const kipp_hf_sources *src, facts *f, kipp_error *err) {
    if (!src->generation) return KIPP_OK;
    json_doc *doc = NULL;
    int rc = kipp_json_parse(src->generation, src->generation_len, &doc, err);
    if (rc) return kipp_fail_prefix(err, "generation_config.json: invalid JSON");
    const json_value *root = kipp_json_root(doc);
    if (root->type != JSON_OBJECT)
        rc = kipp_fail(err, KIPP_E_FORMAT, "generation_config.json: not a JSON object");
    if (!rc) rc = read_ids(root, "generation_config.json", "eos_token_id", &f->gen_eos, err);
    if (!rc) rc = read_ids(root, "generation_config.json", "bos_token_id", &f->gen_bos, err);
    kipp_json_free(doc);
    return rc;
}

static void ids_text(const int64_t *ids, size_t n, bool is_list, char *buf, size_t cap) {
    int used = snprintf(buf, cap, "%s", is_list ? "[" : "");
    for (size_t i = 0; i < n && used >= 0 && (size_t)used < cap; i++)
        used += snprintf(buf + used, cap - (size_t)used, "%s%lld", i ? ", " : "",
                         (long long)ids[i]);
    if (is_list && used > 0 && (size_t)used < cap) snprintf(buf + used, cap - (size_t)used, "]");
}

static bool in_list(const int64_t *ids, size_t n, int64_t id) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

/* One id must be the entry's eos; a list must be its stop set (any order,
 * as upstream treats every listed id as a stop). */
static bool eos_agrees(const id_list *l, const kipp_checkpoint *c) {
    if (!l->is_list) return l->ids[0] == c->eos;
    int64_t stops[KIPP_MAX_STOPS];
    for (uint32_t i = 0; i < c->n_stops; i++) stops[i] = c->stops[i];
    for (size_t i = 0; i < l->n; i++)
        if (!in_list(stops, c->n_stops, l->ids[i])) return false;
    for (uint32_t i = 0; i < c->n_stops; i++)
        if (!in_list(l->ids, l->n, stops[i])) return false;
    return true;
}

static void add_diff(diffs *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_diff(diffs *d, const char *fmt, ...) {
    if (d->n == MAX_DIFFS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->text[d->n++], DIFF_LEN, fmt, ap);
    va_end(ap);
}

static void eos_diff(diffs *d, const char *file, const id_list *l, const kipp_checkpoint *c) {
    if (!l->present || eos_agrees(l, c)) return;
    char have[96], want[96];
    ids_text(l->ids, l->n, l->is_list, have, sizeof have);
    if (l->is_list) {
        int64_t stops[KIPP_MAX_STOPS];
        for (uint32_t i = 0; i < c->n_stops; i++) stops[i] = c->stops[i];
        ids_text(stops, c->n_stops, true, want, sizeof want);
    } else {
        snprintf(want, sizeof want, "%d", c->eos);
    }
    add_diff(d, "%s eos_token_id is %s, the entry has %s", file, have, want);
}

static void bos_diff(diffs *d, const char *file, const id_list *l) {
    if (!l->present || (!l->is_list && l->ids[0] == FAMILY_BOS)) return;
    char have[96];
    ids_text(l->ids, l->n, l->is_list, have, sizeof have);
    add_diff(d, "%s bos_token_id is %s, every entry has %d", file, have, FAMILY_BOS);
}

/* Every field in which the directory disagrees with entry c. */
static void mismatches(const facts *f, const kipp_checkpoint *c, diffs *d) {
    d->n = 0;
#define CMP(field, key)                                                                       \
    if (f->field != (int64_t)c->field)                                                        \
        add_diff(d, "config.json " key " is %lld, the entry has %lld", (long long)f->field,   \
                 (long long)c->field);
    CMP(layers, "num_hidden_layers")
    CMP(hidden, "hidden_size")
    CMP(ffn, "intermediate_size")
    CMP(heads, "num_attention_heads")
    CMP(context, "max_position_embeddings")
#undef CMP
    if (f->rope_theta != c->rope_theta)
        add_diff(d, "config.json rope_theta is %.17g, the entry has %.17g", f->rope_theta,
                 c->rope_theta);
    if (f->tied != c->tied)
        add_diff(d, "config.json tie_word_embeddings is %s, the entry has %s",
                 f->tied ? "true" : "false", c->tied ? "true" : "false");
    eos_diff(d, "config.json", &f->eos, c);
    bos_diff(d, "config.json", &f->bos);
    eos_diff(d, "generation_config.json", &f->gen_eos, c);
    bos_diff(d, "generation_config.json", &f->gen_bos);
    if (!f->has_chat_template && c->variant != KIPP_VARIANT_BASE)
        add_diff(d, "tokenizer_config.json has no chat_template and there is no "
                    "chat_template.jinja, which %s entry '%s' needs",
                 kipp_variant_name(c->variant), c->id);
}

/* Appends "a; b; c" (at most `limit` of d's texts, then "and N more"). */
static void join_diffs(char *buf, size_t cap, const diffs *d, size_t limit) {
    size_t used = strlen(buf);
    for (size_t i = 0; i < d->n && i < limit && used < cap; i++) {
        snprintf(buf + used, cap - used, "%s%s", i ? "; " : "", d->text[i]);
        used = strlen(buf);
    }
    if (d->n > limit && used < cap)
        snprintf(buf + used, cap - used, "; and %zu more", d->n - limit);
}

/* "_name_or_path" hint: the repository id, or a local path ending in its
 * name ("/models/Qwen3-4B" matches "Qwen/Qwen3-4B"). */
static bool name_hint_matches(const char *hint, const kipp_checkpoint *c) {
    if (!hint || !*hint) return false;
    if (strcasecmp(hint, c->source_repository) == 0) return true;
    const char *repo_name = strrchr(c->source_repository, '/');
    repo_name = repo_name ? repo_name + 1 : c->source_repository;
    size_t hl = strlen(hint), rl = strlen(repo_name);
    while (hl > 0 && hint[hl - 1] == '/') hl--;
    return hl >= rl && strncasecmp(hint + hl - rl, repo_name, rl) == 0 &&
           (hl == rl || hint[hl - rl - 1] == '/');
}

static int match_named(const facts *f, const char *id, const char *how,
                       const kipp_checkpoint **out, kipp_error *err) {
    const kipp_checkpoint *c = kipp_registry_find_id(id);
    if (!c)
        return kipp_fail(err, KIPP_E_REGISTRY, "%s '%s' is not in the registry (see kipp registry)",
                         how, id);
    diffs d;
    mismatches(f, c, &d);
    if (d.n) {
        char list[sizeof err->message] = "";
        join_diffs(list, sizeof list, &d, MAX_DIFFS);
        return kipp_fail(err, KIPP_E_REGISTRY,
                         "the checkpoint does not match registry entry '%s' (%s): %s", id, how,
                         list);
    }
    *out = c;
    return KIPP_OK;
}

/* No entry agrees: name the nearest ones (fewest differing fields, at most
 * one more than the best) and what differs, so the user sees whether a value
 * was edited or the checkpoint is simply not supported. */
static int no_match(const facts *f, kipp_error *err) {
    enum { SHOWN = 3, FIELDS_SHOWN = 3 };
    const kipp_checkpoint *best[SHOWN] = {0};
    size_t best_n[SHOWN] = {0}, shown = 0;
    diffs d;
    for (size_t i = 0; i < kipp_registry_count(); i++) {
        const kipp_checkpoint *c = kipp_registry_at(i);
        mismatches(f, c, &d);
        /* insertion into the sorted top list; registry order breaks ties */
        size_t at = shown;
        while (at > 0 && best_n[at - 1] > d.n) at--;
        if (at == SHOWN) continue;
        size_t last = shown < SHOWN ? shown : SHOWN - 1;
        for (size_t k = last; k > at; k--) {
            best[k] = best[k - 1];
            best_n[k] = best_n[k - 1];
        }
        best[at] = c;
        best_n[at] = d.n;
        if (shown < SHOWN) shown++;
    }
    char list[sizeof err->message] = "";
    for (size_t k = 0; k < shown && best_n[k] <= best_n[0] + 1; k++) {
        size_t used = strlen(list);
        mismatches(f, best[k], &d);
        if (d.n == 0) {
            /* only a synthetic entry can agree fully here */
            snprintf(list + used, sizeof list - used,
                     "%s%s (every field agrees, but a synthetic entry is chosen only by name: "
                     "--checkpoint %s)", k ? ", " : "", best[k]->id, best[k]->id);
            continue;
        }
        snprintf(list + used, sizeof list - used, "%s%s (", k ? ", " : "", best[k]->id);
        join_diffs(list, sizeof list, &d, FIELDS_SHOWN);
        used = strlen(list);
        snprintf(list + used, sizeof list - used, ")");
    }
    return kipp_fail(err, KIPP_E_REGISTRY,
                     "config.json matches no registry entry; nearest: %s. kipp converts only the "
                     "checkpoints listed by `kipp registry`", list);
}

int kipp_hf_config_match(const kipp_hf_sources *src, const char *checkpoint_id,
                         const kipp_checkpoint **out, kipp_error *err) {
    json_doc *doc = NULL;
    int rc = kipp_json_parse(src->config, src->config_len, &doc, err);
    if (rc) return kipp_fail_prefix(err, "config.json: invalid JSON");
    const json_value *root = kipp_json_root(doc);
    facts f;
    memset(&f, 0, sizeof f);
    f.has_chat_template = src->has_chat_template;
    if (root->type != JSON_OBJECT) {
        rc = kipp_fail(err, KIPP_E_FORMAT, "config.json: not a JSON object");
        goto done;
    }
    if ((rc = check_family(root, err)) || (rc = read_config_facts(root, &f, err)) ||
        (rc = read_generation_facts(src, &f, err)))
        goto done;
    const char *named = kipp_json_get_string(root, "kipp_checkpoint");
    if (checkpoint_id) {
        rc = match_named(&f, checkpoint_id, "--checkpoint", out, err);
        goto done;
    }
    if (named) {
        rc = match_named(&f, named, "config.json kipp_checkpoint", out, err);
        goto done;
    }
    /* Synthetic entries share dimensions with real ones (synthetic-0.6b vs
     * qwen3-0.6b), so only real entries are matched without a name. */
    const kipp_checkpoint *cands[32];
    size_t n = 0;
    diffs d;
    for (size_t i = 0; i < kipp_registry_count() && n < 32; i++) {
        const kipp_checkpoint *c = kipp_registry_at(i);
        mismatches(&f, c, &d);
        if (!c->synthetic && d.n == 0) cands[n++] = c;
    }
    if (n == 0) {
        rc = no_match(&f, err);
        goto done;
    }
    if (n > 1) {
        const char *hint = kipp_json_get_string(root, "_name_or_path");
        const kipp_checkpoint *pick = NULL;
        size_t picks = 0;
        for (size_t i = 0; i < n; i++)
            if (name_hint_matches(hint, cands[i])) { pick = cands[i]; picks++; }
        if (picks == 1) {
            *out = pick;
            goto done;
        }
        char list[256] = "";
        for (size_t i = 0; i < n; i++) {
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", cands[i]->id);
        }
        rc = kipp_fail(err, KIPP_E_REGISTRY,
                       "config.json matches several registry entries (%s); name one with "
                       "--checkpoint ID", list);
        goto done;
    }
    *out = cands[0];
done:
    kipp_json_free(doc);
    return rc;
}
