#include "convert/hf_config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/common.h"
#include "core/json.h"

/* The dimensions that tell the entries apart. */
typedef struct dims {
    int64_t layers, hidden, ffn, heads, context;
    double rope_theta;
    bool tied;
} dims;

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

static int read_dims(const json_value *root, dims *d, kipp_error *err) {
    int rc;
    if ((rc = need_int(root, "num_hidden_layers", &d->layers, err)) ||
        (rc = need_int(root, "hidden_size", &d->hidden, err)) ||
        (rc = need_int(root, "intermediate_size", &d->ffn, err)) ||
        (rc = need_int(root, "num_attention_heads", &d->heads, err)) ||
        (rc = need_int(root, "max_position_embeddings", &d->context, err)))
        return rc;
    if (!kipp_json_get_double(root, "rope_theta", &d->rope_theta))
        return kipp_fail(err, KIPP_E_FORMAT, "config.json: missing or non-numeric \"rope_theta\"");
    /* transformers' Qwen3Config default when the key is absent */
    d->tied = false;
    if (kipp_json_get(root, "tie_word_embeddings") &&
        !kipp_json_get_bool(root, "tie_word_embeddings", &d->tied))
        return kipp_fail(err, KIPP_E_FORMAT, "config.json: tie_word_embeddings is not a boolean");
    return KIPP_OK;
}

/* First disagreement between config and entry, as a message; NULL if none. */
static const char *mismatch(const dims *d, const kipp_checkpoint *c, char *buf, size_t cap) {
#define CMP(field, key)                                                                       \
    if (d->field != (int64_t)c->field) {                                                      \
        snprintf(buf, cap, key " is %lld, the entry has %lld", (long long)d->field,           \
                 (long long)c->field);                                                        \
        return buf;                                                                           \
    }
    CMP(layers, "num_hidden_layers")
    CMP(hidden, "hidden_size")
    CMP(ffn, "intermediate_size")
    CMP(heads, "num_attention_heads")
    CMP(context, "max_position_embeddings")
#undef CMP
    if (d->rope_theta != c->rope_theta) {
        snprintf(buf, cap, "rope_theta is %.17g, the entry has %.17g", d->rope_theta, c->rope_theta);
        return buf;
    }
    if (d->tied != c->tied) {
        snprintf(buf, cap, "tie_word_embeddings is %s, the entry has %s",
                 d->tied ? "true" : "false", c->tied ? "true" : "false");
        return buf;
    }
    return NULL;
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

static int match_named(const dims *d, const char *id, const char *how,
                       const kipp_checkpoint **out, kipp_error *err) {
    const kipp_checkpoint *c = kipp_registry_find_id(id);
    if (!c)
        return kipp_fail(err, KIPP_E_REGISTRY, "%s '%s' is not in the registry (see kipp registry)",
                         how, id);
    char buf[200];
    const char *why = mismatch(d, c, buf, sizeof buf);
    if (why)
        return kipp_fail(err, KIPP_E_REGISTRY,
                         "config.json does not match registry entry '%s' (%s): %s", id, how, why);
    *out = c;
    return KIPP_OK;
}

int kipp_hf_config_match(const char *text, size_t length, const char *checkpoint_id,
                         const kipp_checkpoint **out, kipp_error *err) {
    json_doc *doc = NULL;
    int rc = kipp_json_parse(text, length, &doc, err);
    if (rc) return kipp_fail_prefix(err, "config.json: invalid JSON");
    const json_value *root = kipp_json_root(doc);
    dims d;
    if (root->type != JSON_OBJECT) {
        rc = kipp_fail(err, KIPP_E_FORMAT, "config.json: not a JSON object");
        goto done;
    }
    if ((rc = check_family(root, err)) || (rc = read_dims(root, &d, err))) goto done;
    const char *named = kipp_json_get_string(root, "kipp_checkpoint");
    if (checkpoint_id) {
        rc = match_named(&d, checkpoint_id, "--checkpoint", out, err);
        goto done;
    }
    if (named) {
        rc = match_named(&d, named, "config.json kipp_checkpoint", out, err);
        goto done;
    }
    /* Synthetic entries share dimensions with real ones (synthetic-0.6b vs
     * qwen3-0.6b), so only real entries are matched by shape. */
    const kipp_checkpoint *cands[32];
    size_t n = 0;
    char buf[200];
    for (size_t i = 0; i < kipp_registry_count() && n < 32; i++) {
        const kipp_checkpoint *c = kipp_registry_at(i);
        if (!c->synthetic && !mismatch(&d, c, buf, sizeof buf)) cands[n++] = c;
    }
    if (n == 0) {
        rc = kipp_fail(err, KIPP_E_REGISTRY,
                       "config.json matches no registry entry (layers %lld, hidden %lld, ffn %lld, "
                       "heads %lld, context %lld, rope_theta %.0f, %s): kipp converts only the "
                       "checkpoints listed by `kipp registry`",
                       (long long)d.layers, (long long)d.hidden, (long long)d.ffn,
                       (long long)d.heads, (long long)d.context, d.rope_theta,
                       d.tied ? "tied" : "untied");
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
