/* Converter pieces: the tensor layout of an entry (attention width vs
 * hidden width), the synthetic generator's chunk independence and value
 * ranges, config.json matching against the registry, and the encoders. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "convert/encode.h"
#include "convert/hf_config.h"
#include "convert/layout.h"
#include "convert/synth.h"
#include "core/common.h"
#include "core/gguf.h"
#include "test_util.h"

static void test_layout(void) {
    const kipp_checkpoint *c = kipp_registry_find_id("qwen3-0.6b");
    CHECK(kipp_layout_count(c) == 2 + 28 * 11);
    kipp_layout_tensor t;
    kipp_layout_at(c, 3, &t); /* blk.0.attn_q: attention width 2048 != hidden 1024 */
    CHECK(strcmp(t.gguf_name, "blk.0.attn_q.weight") == 0);
    CHECK(strcmp(t.hf_name, "model.layers.0.self_attn.q_proj.weight") == 0);
    CHECK(t.shape[0] == 2048 && t.shape[1] == 1024 && t.role == KIPP_ROLE_PROJ);
    kipp_layout_at(c, 6, &t);
    CHECK(strcmp(t.gguf_name, "blk.0.attn_output.weight") == 0 && t.shape[0] == 1024 &&
          t.shape[1] == 2048);
    kipp_layout_at(c, 2 + 27 * 11 + 10, &t);
    CHECK(strcmp(t.gguf_name, "blk.27.ffn_down.weight") == 0 && t.shape[0] == 1024 &&
          t.shape[1] == 3072 && t.layer == 27);
    const kipp_checkpoint *u = kipp_registry_find_id("qwen3-8b");
    CHECK(kipp_layout_count(u) == 3 + 36 * 11);
    kipp_layout_at(u, 2, &t);
    CHECK(strcmp(t.hf_name, "lm_head.weight") == 0 && t.shape[0] == KIPP_VOCAB_SIZE);
}

static void test_synth_values(void) {
    const kipp_checkpoint *c = kipp_registry_find_id("synthetic-tiny");
    kipp_layout_tensor q, norm, final;
    kipp_layout_at(c, 3, &q);
    kipp_layout_at(c, 2, &norm);
    kipp_layout_at(c, 1, &final);
    enum { N = 4096 };
    static uint16_t whole[N], part[N];
    kipp_synth_fill(c, &q, 0, whole, N);
    kipp_synth_fill(c, &q, 0, part, 1000);
    kipp_synth_fill(c, &q, 1000, part + 1000, N - 1000);
    CHECK(memcmp(whole, part, sizeof whole) == 0);
    double sum = 0, sq = 0;
    for (int i = 0; i < N; i++) {
        double v = kipp_bf16_to_f32(whole[i]);
        sum += v;
        sq += v * v;
    }
    double mean = sum / N, sd = sqrt(sq / N - mean * mean);
    CHECKF(fabs(mean) < 0.002 && sd > 0.018 && sd < 0.022, "mean %g sd %g", mean, sd);
    kipp_synth_fill(c, &norm, 0, part, 256);
    for (int i = 0; i < 256; i++) {
        float v = kipp_bf16_to_f32(part[i]);
        CHECKF(v >= 0.89f && v <= 1.11f, "norm %g", v);
    }
    /* another tensor of the same shape gets other values */
    kipp_layout_tensor k;
    kipp_layout_at(c, 4, &k);
    kipp_synth_fill(c, &k, 0, part, N);
    CHECK(memcmp(whole, part, sizeof whole) != 0);
    /* final norm gain: 16 / (0.02 * sqrt(256)) = 50 */
    kipp_synth_fill(c, &final, 0, part, 256);
    float lo = 1e9f, hi = 0;
    for (int i = 0; i < 256; i++) {
        float v = kipp_bf16_to_f32(part[i]);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    CHECKF(lo > 50 * 0.89f && hi < 50 * 1.11f, "final norm range %g..%g", lo, hi);
}

static const char *config_fmt =
    "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\","
    "\"num_key_value_heads\":8,\"head_dim\":128,\"vocab_size\":151936,\"rms_norm_eps\":1e-06,"
    "\"hidden_act\":\"silu\",\"rope_scaling\":null,\"num_hidden_layers\":%d,\"hidden_size\":%d,"
    "\"intermediate_size\":%d,\"num_attention_heads\":%d,\"max_position_embeddings\":%d,"
    "\"rope_theta\":%d,\"tie_word_embeddings\":%s%s}";

/* The config as real checkpoints write it; eos_token_id follows the
 * context length the way the registry pairs them (40960 and 262144:
 * instruct, 32768: base), unless `extra` states one. */
static int match(const char *extra, int layers, int hidden, int ffn, int heads, int ctx, int theta,
                 const char *tied, const char *id, const kipp_checkpoint **out, kipp_error *err) {
    char text[2048], more[512];
    snprintf(more, sizeof more, "%s%s", extra,
             strstr(extra, "eos_token_id") ? ""
             : ctx == 32768                ? ",\"eos_token_id\":151643"
                                           : ",\"eos_token_id\":151645");
    snprintf(text, sizeof text, config_fmt, layers, hidden, ffn, heads, ctx, theta, tied, more);
    *out = NULL;
    kipp_hf_sources src = {.config = text, .config_len = strlen(text), .has_chat_template = true};
    return kipp_hf_config_match(&src, id, out, err);
}

/* match() with a generation_config.json and a chat template presence. */
static int match_gen(const char *extra, int ctx, const char *generation, bool has_template,
                     const char *id, const kipp_checkpoint **out, kipp_error *err) {
    char text[2048], more[512];
    snprintf(more, sizeof more, "%s%s", extra,
             strstr(extra, "eos_token_id") ? "" : ",\"eos_token_id\":151645");
    snprintf(text, sizeof text, config_fmt, 28, 1024, 3072, 16, ctx, 1000000, "true", more);
    *out = NULL;
    kipp_hf_sources src = {.config = text, .config_len = strlen(text),
                           .generation = generation,
                           .generation_len = generation ? strlen(generation) : 0,
                           .has_chat_template = has_template};
    return kipp_hf_config_match(&src, id, out, err);
}

static void test_config_match(void) {
    const kipp_checkpoint *c;
    kipp_error err = {0};
    CHECK(match("", 28, 1024, 3072, 16, 40960, 1000000, "true", NULL, &c, &err) == 0 && c &&
          strcmp(c->id, "qwen3-0.6b") == 0);
    CHECK(match("", 28, 1024, 3072, 16, 32768, 1000000, "true", NULL, &c, &err) == 0 && c &&
          strcmp(c->id, "qwen3-0.6b-base") == 0);
    CHECK(match("", 36, 4096, 12288, 32, 40960, 1000000, "false", NULL, &c, &err) == 0 && c &&
          strcmp(c->id, "qwen3-8b") == 0);
    /* same dims tied vs untied: 8b is untied */
    CHECK(match("", 36, 4096, 12288, 32, 40960, 1000000, "true", NULL, &c, &err) != 0 &&
          strstr(err.message, "matches no registry entry"));
    CHECK(match("", 36, 2560, 9728, 32, 262144, 5000000, "true", NULL, &c, &err) != 0 &&
          strstr(err.message, "several registry entries"));
    CHECK(match(",\"_name_or_path\":\"Qwen/Qwen3-4B-Instruct-2507\"", 36, 2560, 9728, 32, 262144,
                5000000, "true", NULL, &c, &err) == 0 && c &&
          strcmp(c->id, "qwen3-4b-instruct-2507") == 0);
    CHECK(match("", 36, 2560, 9728, 32, 262144, 5000000, "true", "qwen3-4b-thinking-2507", &c,
                &err) == 0 && c && strcmp(c->id, "qwen3-4b-thinking-2507") == 0);
    /* synthetic-0.6b shares qwen3-0.6b's dims: only its name selects it */
    CHECK(match(",\"kipp_checkpoint\":\"synthetic-0.6b\",\"eos_token_id\":151643", 28, 1024, 3072, 16, 40960, 1000000,
                "true", NULL, &c, &err) == 0 && c && strcmp(c->id, "synthetic-0.6b") == 0);
    CHECK(match("", 28, 1024, 3072, 16, 40960, 1000000, "true", "qwen3-1.7b", &c, &err) != 0 &&
          strstr(err.message, "config.json hidden_size is 1024, the entry has 2048"));
    CHECK(match("", 28, 1024, 3072, 16, 40960, 1000000, "true", "nope", &c, &err) != 0 &&
          strstr(err.message, "--checkpoint 'nope' is not in the registry"));
    CHECK(match(",\"rope_scaling\":{\"type\":\"yarn\"}", 28, 1024, 3072, 16, 40960, 1000000,
                "true", NULL, &c, &err) != 0 && strstr(err.message, "rope_scaling"));
    CHECK(match(",\"torch_dtype\":\"float16\"", 28, 1024, 3072, 16, 40960, 1000000, "true", NULL,
                &c, &err) != 0 && strstr(err.message, "bfloat16"));
    CHECK(match(",\"num_key_value_heads\":4", 28, 1024, 3072, 16, 40960, 1000000, "true", NULL, &c,
                &err) != 0 && strstr(err.message, "num_key_value_heads is 4"));
    kipp_hf_sources bad = {.config = "{\"a\":", .config_len = 5};
    CHECK(kipp_hf_config_match(&bad, NULL, &c, &err) != 0 &&
          strstr(err.message, "config.json: invalid JSON"));
    kipp_hf_sources array = {.config = "[]", .config_len = 2};
    CHECK(kipp_hf_config_match(&array, NULL, &c, &err) != 0 &&
          strstr(err.message, "not a JSON object"));
}

/* Every identity-bearing value must agree with exactly one entry. */
static void test_config_identity(void) {
    const kipp_checkpoint *c;
    kipp_error err = {0};
    const char *instruct_gen = "{\"bos_token_id\":151643,\"eos_token_id\":[151645,151643]}";
    const char *base_gen = "{\"bos_token_id\":151643,\"eos_token_id\":151643}";
    CHECK(match_gen("", 40960, instruct_gen, true, NULL, &c, &err) == 0 && c &&
          strcmp(c->id, "qwen3-0.6b") == 0);
    /* the stop set may be listed in any order */
    CHECK(match_gen("", 40960, "{\"eos_token_id\":[151643,151645]}", true, NULL, &c, &err) == 0 &&
          c && strcmp(c->id, "qwen3-0.6b") == 0);
    CHECK(match_gen(",\"eos_token_id\":151643", 32768, base_gen, false, NULL, &c, &err) == 0 &&
          c && strcmp(c->id, "qwen3-0.6b-base") == 0);
    /* an instruct checkpoint whose max_position_embeddings was edited to the
     * base value: no longer taken for the base entry, and both neighbours are
     * named with what differs */
    CHECKF(match_gen("", 32768, instruct_gen, true, NULL, &c, &err) != 0 &&
               strstr(err.message, "matches no registry entry; nearest: qwen3-0.6b (config.json "
                                   "max_position_embeddings is 32768, the entry has 40960)") &&
               strstr(err.message, "qwen3-0.6b-base (config.json eos_token_id is 151645, the "
                                   "entry has 151643; generation_config.json eos_token_id is "
                                   "[151645, 151643], the entry has [151643])"),
           "%s", err.message);
    /* the same without a generation_config.json: eos alone decides */
    CHECK(match_gen("", 32768, NULL, true, NULL, &c, &err) != 0 &&
          strstr(err.message, "qwen3-0.6b-base (config.json eos_token_id is 151645"));
    /* a base stop token in generation_config.json of an instruct config */
    CHECK(match_gen("", 40960, base_gen, true, NULL, &c, &err) != 0 &&
          strstr(err.message, "generation_config.json eos_token_id is 151643, the entry has "
                              "151645"));
    CHECK(match_gen(",\"bos_token_id\":1", 40960, NULL, true, NULL, &c, &err) != 0 &&
          strstr(err.message, "config.json bos_token_id is 1, every entry has 151643"));
    CHECK(match_gen("", 40960, "{\"bos_token_id\":7}", true, NULL, &c, &err) != 0 &&
          strstr(err.message, "generation_config.json bos_token_id is 7, every entry has 151643"));
    /* instruct entries need a chat template; base entries tolerate one */
    CHECK(match_gen("", 40960, NULL, false, NULL, &c, &err) != 0 &&
          strstr(err.message, "no chat_template.jinja, which instruct entry 'qwen3-0.6b' needs"));
    CHECK(match_gen(",\"eos_token_id\":151643", 32768, NULL, true, NULL, &c, &err) == 0 && c &&
          strcmp(c->id, "qwen3-0.6b-base") == 0);
    /* --checkpoint: every differing field is named */
    CHECKF(match_gen("", 32768, instruct_gen, false, "qwen3-0.6b-base", &c, &err) != 0 &&
               strstr(err.message, "does not match registry entry 'qwen3-0.6b-base' "
                                   "(--checkpoint): config.json eos_token_id is 151645, the "
                                   "entry has 151643; generation_config.json eos_token_id"),
           "%s", err.message);
    CHECK(match_gen("", 32768, instruct_gen, true, "qwen3-0.6b", &c, &err) != 0 &&
          strstr(err.message, "config.json max_position_embeddings is 32768, the entry has 40960"));
    /* missing or malformed ids */
    CHECK(match_gen(",\"eos_token_id\":null", 40960, NULL, true, NULL, &c, &err) != 0 &&
          strstr(err.message, "config.json: missing \"eos_token_id\""));
    CHECK(match_gen(",\"eos_token_id\":\"x\"", 40960, NULL, true, NULL, &c, &err) != 0 &&
          strstr(err.message, "not a token id or a list of token ids"));
    CHECK(match_gen("", 40960, "{\"eos_token_id\":[]}", true, NULL, &c, &err) != 0 &&
          strstr(err.message, "must list 1 to 8 token ids"));
    CHECK(match_gen("", 40960, "{", true, NULL, &c, &err) != 0 &&
          strstr(err.message, "generation_config.json: invalid JSON"));
    /* a synthetic entry that agrees fully is pointed at by name */
    CHECKF(match(",\"eos_token_id\":151643", 2, 256, 768, 8, 4096, 1000000, "true", NULL, &c,
                 &err) != 0 &&
               strstr(err.message, "nearest: synthetic-tiny (every field agrees, but a synthetic "
                                   "entry is chosen only by name: --checkpoint synthetic-tiny)"),
           "%s", err.message);
}

static void test_encoders(void) {
    uint16_t src[64];
    for (int i = 0; i < 64; i++) src[i] = kipp_f32_to_bf16((float)(i - 32) * 0.25f);
    uint8_t out[64 * 4];
    float scratch[64];
    const kipp_encoder *f32 = kipp_encoder_for(GGML_TYPE_F32);
    CHECK(f32 && f32->block_bytes == 128);
    f32->encode(src, 64, out, scratch);
    for (int i = 0; i < 64; i++) {
        float v;
        memcpy(&v, out + 4 * i, 4);
        CHECK(v == (float)(i - 32) * 0.25f);
    }
    const kipp_encoder *q8 = kipp_encoder_for(GGML_TYPE_Q8_0);
    CHECK(q8 && q8->block_bytes == 34 && kipp_encoder_for(GGML_TYPE_Q4_0)->block_bytes == 18 &&
          kipp_encoder_for(GGML_TYPE_Q4_1)->block_bytes == 20 && !kipp_encoder_for(99));
    const kipp_scheme_info *s = kipp_scheme_lookup("affine4_gs32");
    CHECK(s && s->proj_type == GGML_TYPE_Q4_1 && s->file_type == 3);
    CHECK(kipp_scheme_lookup("bf16")->file_type == 32 && !kipp_scheme_lookup("q4_k"));
}

int main(void) {
    test_layout();
    test_synth_values();
    test_config_match();
    test_config_identity();
    test_encoders();
    return test_finish("test_convert_parts");
}
