#include "convert/synth.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/safetensors.h"
#include "core/common.h"

/* ---- the generator ------------------------------------------------------
 *
 * Each element is a pure function of (entry revision, tensor name, index):
 * h = mix64(key(tensor) + index * golden), the splitmix64 finalizer used as a
 * counter-based hash. Its four 16-bit lanes u0..u3 are uniform on [0, 65535].
 *
 *   matrices: s = u0+u1+u2+u3 - 131070 is Irwin-Hall(4), a bell curve on
 *             [-131070, 131070] with standard deviation 37837.2; one float
 *             multiply scales it to the target deviation (0.02).
 *   norms:    1 + (u0 - 32768) / 327680, uniform on [0.9, 1.1).
 *   final norm: FINAL_NORM_GAIN times a norm-like value (see below).
 *
 * Integer operations are exact everywhere; (float)s is exact (|s| < 2^24);
 * a single IEEE multiply and the integer round-to-nearest-even to BF16 give
 * the same bits on every conforming machine, with or without FMA. */

#define MATRIX_STD 0.02f
#define IRWIN_HALL4_STD 37837.2265f /* 65536 * sqrt(1/3) */

/* Why a gain on the final norm: the residual stream is dominated by the
 * layers' outputs, so the normalized final state is roughly a random unit-RMS
 * vector and each logit is sum_j n_j * g * e_ij with e ~ 0.02. Logits then
 * have a standard deviation of g * 0.02 * sqrt(hidden); with g = 1 the
 * next-token distribution is nearly uniform (entropy ~11.9 nats). A larger
 * g spreads the logits until the top order statistics separate, giving a
 * clear top-1. The gain is chosen per width so the logit spread is the same
 * for every entry (see synth_final_gain). */
#define TARGET_LOGIT_STD 16.0f

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static uint64_t tensor_key(const kipp_checkpoint *c, const char *hf_name) {
    return mix64(fnv1a64(c->revision) ^ mix64(fnv1a64(hf_name)));
}

/* g with g * 0.02 * sqrt(hidden) ~= TARGET_LOGIT_STD. sqrt by bisection on
 * integers-as-floats (exact comparisons only), so no libm is involved and
 * the result is identical everywhere. */
static float synth_final_gain(uint32_t hidden) {
    float lo = 1.0f, hi = 1024.0f;
    for (int i = 0; i < 40; i++) {
        float mid = (lo + hi) * 0.5f;
        if (mid * mid > (float)hidden) hi = mid; else lo = mid;
    }
    return TARGET_LOGIT_STD / (MATRIX_STD * lo);
}

void kipp_synth_fill(const kipp_checkpoint *c, const kipp_layout_tensor *t, uint64_t start,
                     uint16_t *out, size_t n) {
    uint64_t key = tensor_key(c, t->hf_name);
    const float matrix_scale = MATRIX_STD / IRWIN_HALL4_STD;
    const float gain = t->role == KIPP_ROLE_FINAL_NORM ? synth_final_gain(c->hidden) : 1.0f;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = mix64(key + (start + i) * 0x9e3779b97f4a7c15ull);
        uint32_t u0 = (uint32_t)(h & 0xffff), u1 = (uint32_t)(h >> 16 & 0xffff);
        uint32_t u2 = (uint32_t)(h >> 32 & 0xffff), u3 = (uint32_t)(h >> 48);
        float v;
        switch (t->role) {
        case KIPP_ROLE_NORM:
        case KIPP_ROLE_QK_NORM:
        case KIPP_ROLE_FINAL_NORM:
            /* 1 + (u0 - 32768) / 327680: (u0 - 32768 + 327680) / 327680
             * computed as an integer ratio, one division, exact inputs. */
            v = (float)((int32_t)u0 - 32768 + 327680) / 327680.0f;
            v = v * gain;
            break;
        default: {
            int32_t s = (int32_t)(u0 + u1 + u2 + u3) - 131070;
            v = (float)s * matrix_scale;
        }
        }
        out[i] = kipp_f32_to_bf16(v);
    }
}

/* ---- files ------------------------------------------------------------- */

static int mkdir_p(const char *dir, kipp_error *err) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return kipp_fail(err, KIPP_E_ARGUMENT, "path too long: %s", dir);
    for (char *p = path + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return kipp_fail(err, KIPP_E_IO, "cannot create %s: %s", path, strerror(errno));
            *p = saved;
            if (!saved) break;
        }
    }
    return KIPP_OK;
}

static int join(char *out, size_t cap, const char *dir, const char *name, kipp_error *err) {
    if (snprintf(out, cap, "%s/%s", dir, name) >= (int)cap)
        return kipp_fail(err, KIPP_E_ARGUMENT, "path too long: %s/%s", dir, name);
    return KIPP_OK;
}

static int copy_file(const char *from, const char *to, kipp_error *err) {
    FILE *in = fopen(from, "rb");
    if (!in) return kipp_fail(err, KIPP_E_IO, "cannot open %s: %s", from, strerror(errno));
    FILE *out = fopen(to, "wb");
    if (!out) {
        fclose(in);
        return kipp_fail(err, KIPP_E_IO, "cannot create %s: %s", to, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    int rc = KIPP_OK;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) {
            rc = kipp_fail(err, KIPP_E_IO, "write failed on %s: %s", to, strerror(errno));
            break;
        }
    if (!rc && ferror(in)) rc = kipp_fail(err, KIPP_E_IO, "read failed on %s", from);
    fclose(in);
    if (fclose(out) != 0 && !rc) rc = kipp_fail(err, KIPP_E_IO, "write failed on %s", to);
    return rc;
}

static int write_text(const char *path, const char *text, kipp_error *err) {
    FILE *f = fopen(path, "wb");
    if (!f) return kipp_fail(err, KIPP_E_IO, "cannot create %s: %s", path, strerror(errno));
    size_t n = strlen(text);
    bool ok = fwrite(text, 1, n, f) == n;
    if (fclose(f) != 0) ok = false;
    return ok ? KIPP_OK : kipp_fail(err, KIPP_E_IO, "write failed on %s", path);
}

/* The shape of a real Qwen3 config.json, plus kipp_checkpoint naming the
 * registry entry (the converter's match key for synthetic checkpoints). */
static void format_config(const kipp_checkpoint *c, char *buf, size_t cap) {
    snprintf(buf, cap,
             "{\n"
             "  \"architectures\": [\n    \"Qwen3ForCausalLM\"\n  ],\n"
             "  \"attention_bias\": false,\n"
             "  \"attention_dropout\": 0.0,\n"
             "  \"bos_token_id\": 151643,\n"
             "  \"eos_token_id\": %d,\n"
             "  \"head_dim\": %d,\n"
             "  \"hidden_act\": \"silu\",\n"
             "  \"hidden_size\": %u,\n"
             "  \"initializer_range\": 0.02,\n"
             "  \"intermediate_size\": %u,\n"
             "  \"kipp_checkpoint\": \"%s\",\n"
             "  \"kipp_note\": \"synthetic checkpoint: deterministic random weights made by kipp synth, not a trained model\",\n"
             "  \"max_position_embeddings\": %u,\n"
             "  \"max_window_layers\": %u,\n"
             "  \"model_type\": \"qwen3\",\n"
             "  \"num_attention_heads\": %u,\n"
             "  \"num_hidden_layers\": %u,\n"
             "  \"num_key_value_heads\": %d,\n"
             "  \"rms_norm_eps\": 1e-06,\n"
             "  \"rope_scaling\": null,\n"
             "  \"rope_theta\": %.0f,\n"
             "  \"sliding_window\": null,\n"
             "  \"tie_word_embeddings\": %s,\n"
             "  \"torch_dtype\": \"bfloat16\",\n"
             "  \"transformers_version\": \"4.51.0\",\n"
             "  \"use_cache\": true,\n"
             "  \"use_sliding_window\": false,\n"
             "  \"vocab_size\": %d\n"
             "}\n",
             c->eos, KIPP_HEAD_DIM, c->hidden, c->ffn, c->id, c->context, c->layers, c->heads,
             c->layers, KIPP_KV_HEADS, c->rope_theta, c->tied ? "true" : "false",
             KIPP_VOCAB_SIZE);
}

static void format_generation_config(const kipp_checkpoint *c, char *buf, size_t cap) {
    if (c->variant == KIPP_VARIANT_BASE) {
        snprintf(buf, cap,
                 "{\n  \"bos_token_id\": 151643,\n  \"do_sample\": false,\n"
                 "  \"eos_token_id\": %d,\n  \"max_new_tokens\": 2048,\n"
                 "  \"transformers_version\": \"4.51.0\"\n}\n", c->eos);
        return;
    }
    int n = snprintf(buf, cap, "{\n  \"bos_token_id\": 151643,\n  \"do_sample\": true,\n"
                               "  \"eos_token_id\": [");
    for (uint32_t i = 0; i < c->n_stops && n > 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%d", i ? ", " : "", c->stops[i]);
    if (n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n,
                 "],\n  \"pad_token_id\": 151643,\n  \"temperature\": 0.6,\n"
                 "  \"top_k\": 20,\n  \"top_p\": 0.95,\n"
                 "  \"transformers_version\": \"4.51.0\"\n}\n");
}

/* Shard of each tensor: contiguous runs, balanced by bytes, no shard empty,
 * none skipped. */
static void assign_shards(const uint64_t *bytes, size_t n, unsigned shards, unsigned *shard_of) {
    uint64_t total = 0, before = 0;
    for (size_t i = 0; i < n; i++) total += bytes[i];
    unsigned prev = 0;
    for (size_t i = 0; i < n; i++) {
        /* before * shards cannot overflow: total < 2^40 and shards < 2^16 */
        uint64_t want = total ? before * shards / total : 0;
        uint64_t lo = prev, hi = prev + (i ? 1u : 0u);
        if (shards > n - i && shards - (n - i) > lo) lo = shards - (n - i);
        if (hi > shards - 1) hi = shards - 1;
        uint64_t s = want < lo ? lo : want > hi ? hi : want;
        shard_of[i] = prev = (unsigned)s;
        before += bytes[i];
    }
}

#define CHUNK_ELEMS (1u << 18)

static int write_shard(const kipp_checkpoint *c, const char *path, const kipp_layout_tensor *ts,
                       const unsigned *shard_of, size_t n, unsigned shard, uint16_t *chunk,
                       const kipp_synth_options *opt, uint64_t *done, uint64_t total,
                       kipp_error *err) {
    st_out_tensor *outs = kipp_calloc(n, sizeof *outs, err);
    if (!outs) return KIPP_E_MEMORY;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (shard_of[i] != shard) continue;
        outs[m].name = ts[i].hf_name;
        outs[m].dtype = "BF16";
        outs[m].n_dims = ts[i].n_dims;
        outs[m].shape[0] = ts[i].shape[0];
        outs[m].shape[1] = ts[i].shape[1];
        m++;
    }
    FILE *f = fopen(path, "wb");
    int rc = KIPP_OK;
    if (!f) {
        rc = kipp_fail(err, KIPP_E_IO, "cannot create %s: %s", path, strerror(errno));
        goto done;
    }
    if ((rc = kipp_st_write_header(f, outs, m, err))) goto done;
    for (size_t i = 0; i < n && !rc; i++) {
        if (shard_of[i] != shard) continue;
        uint64_t elems = kipp_layout_elements(&ts[i]);
        for (uint64_t at = 0; at < elems && !rc; at += CHUNK_ELEMS) {
            size_t k = elems - at < CHUNK_ELEMS ? (size_t)(elems - at) : CHUNK_ELEMS;
            kipp_synth_fill(c, &ts[i], at, chunk, k);
            if (fwrite(chunk, sizeof *chunk, k, f) != k)
                rc = kipp_fail(err, KIPP_E_IO, "write failed on %s: %s", path, strerror(errno));
            *done += (uint64_t)k * 2;
            if (opt->progress) opt->progress(opt->progress_ctx, *done, total);
        }
    }
done:
    if (f && fclose(f) != 0 && !rc) rc = kipp_fail(err, KIPP_E_IO, "write failed on %s", path);
    free(outs);
    return rc;
}

static int write_index(const char *path, const kipp_layout_tensor *ts, const unsigned *shard_of,
                       size_t n, unsigned shards, uint64_t total, kipp_error *err) {
    FILE *f = fopen(path, "wb");
    if (!f) return kipp_fail(err, KIPP_E_IO, "cannot create %s: %s", path, strerror(errno));
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %" PRIu64 "\n  },\n  \"weight_map\": {\n",
            total);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "    \"%s\": \"model-%05u-of-%05u.safetensors\"%s\n", ts[i].hf_name,
                shard_of[i] + 1, shards, i + 1 < n ? "," : "");
    fprintf(f, "  }\n}\n");
    return fclose(f) == 0 ? KIPP_OK : kipp_fail(err, KIPP_E_IO, "write failed on %s", path);
}

int kipp_synth(const kipp_checkpoint *c, const char *dir, const kipp_synth_options *opt,
               kipp_error *err) {
    if (!c->synthetic)
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "'%s' is not a synthetic-* entry; kipp synth only makes synthetic "
                         "checkpoints (use tools/download.sh for real ones)", c->id);
    size_t n = kipp_layout_count(c);
    unsigned shards = opt->shards ? opt->shards : 1;
    if (shards > n || shards > 99999)
        return kipp_fail(err, KIPP_E_ARGUMENT, "--shards %u: must be between 1 and %zu", shards, n);
    int rc = mkdir_p(dir, err);
    if (rc) return rc;

    kipp_layout_tensor *ts = kipp_calloc(n, sizeof *ts, err);
    uint64_t *bytes = kipp_calloc(n, sizeof *bytes, err);
    unsigned *shard_of = kipp_calloc(n, sizeof *shard_of, err);
    uint16_t *chunk = kipp_calloc(CHUNK_ELEMS, sizeof *chunk, err);
    char path[4096], name[64];
    char text[8192];
    if (!ts || !bytes || !shard_of || !chunk) { rc = KIPP_E_MEMORY; goto done; }
    uint64_t total = 0, done = 0;
    for (size_t i = 0; i < n; i++) {
        kipp_layout_at(c, i, &ts[i]);
        bytes[i] = kipp_layout_elements(&ts[i]) * 2;
        total += bytes[i];
    }
    assign_shards(bytes, n, shards, shard_of);

    /* config.json goes last: its presence means the directory is complete. */
    const char *stale[] = {"config.json", "model.safetensors", "model.safetensors.index.json"};
    for (size_t i = 0; i < 3; i++) {
        if ((rc = join(path, sizeof path, dir, stale[i], err))) goto done;
        if (unlink(path) != 0 && errno != ENOENT) {
            rc = kipp_fail(err, KIPP_E_IO, "cannot remove %s: %s", path, strerror(errno));
            goto done;
        }
    }
    const char *tok_files[] = {"tokenizer.json", "tokenizer_config.json"};
    for (size_t i = 0; i < 2; i++) {
        char from[4096];
        if ((rc = join(from, sizeof from, opt->tokenizer_dir, tok_files[i], err)) ||
            (rc = join(path, sizeof path, dir, tok_files[i], err)) ||
            (rc = copy_file(from, path, err)))
            goto done;
    }
    for (unsigned s = 0; s < shards; s++) {
        if (shards == 1) snprintf(name, sizeof name, "model.safetensors");
        else snprintf(name, sizeof name, "model-%05u-of-%05u.safetensors", s + 1, shards);
        if ((rc = join(path, sizeof path, dir, name, err)) ||
            (rc = write_shard(c, path, ts, shard_of, n, s, chunk, opt, &done, total, err)))
            goto done;
    }
    if (shards > 1 &&
        ((rc = join(path, sizeof path, dir, "model.safetensors.index.json", err)) ||
         (rc = write_index(path, ts, shard_of, n, shards, total, err))))
        goto done;
    format_generation_config(c, text, sizeof text);
    if ((rc = join(path, sizeof path, dir, "generation_config.json", err)) ||
        (rc = write_text(path, text, err)))
        goto done;
    format_config(c, text, sizeof text);
    if ((rc = join(path, sizeof path, dir, "config.json", err)) ||
        (rc = write_text(path, text, err)))
        goto done;
done:
    free(ts);
    free(bytes);
    free(shard_of);
    free(chunk);
    return rc;
}
