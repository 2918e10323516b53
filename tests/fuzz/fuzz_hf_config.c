/* libFuzzer target for the converter's identity check (src/convert/hf_config.c),
 * which reads a downloaded checkpoint's config.json and generation_config.json:
 *   make fuzz-hf-config [FUZZ_SECONDS=60]
 * The input is CONFIG [NUL GENERATION [NUL CHOICE]]: GENERATION empty or
 * absent means no generation_config.json; CHOICE's first byte picks
 * has_chat_template (bit 0) and --checkpoint (bits 1-7: none, or registry
 * entry k - 1). Seeds: tests/fuzz/seeds-hf-config (synthetic-tiny and
 * -instruct as `kipp synth` writes them; qwen3-0.6b and a 4B 2507 config
 * with the values their published config.json files hold).
 *   - a refusal carries a message and no entry;
 *   - an acceptance names a registry entry, the one --checkpoint named when
 *     one was, and a synthetic entry only when named (by --checkpoint or
 *     the config's own kipp_checkpoint field);
 *   - the same input gives the same answer twice (no state between calls). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convert/hf_config.h"
#define FUZZ_NAME "fuzz_hf_config"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool contains(const char *s, size_t n, const char *word) {
    size_t w = strlen(word);
    for (size_t i = 0; w <= n && i <= n - w; i++)
        if (memcmp(s + i, word, w) == 0) return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *p = data, *end = data + size;
    size_t config_len, gen_len = 0;
    bool more = false, has_gen = false;
    char *config = fuzz_next_part(&p, end, &config_len, &more);
    char *gen = NULL;
    if (more) {
        gen = fuzz_next_part(&p, end, &gen_len, &more);
        has_gen = gen_len > 0;
    }
    uint8_t choice = p < end ? *p : 0;
    const kipp_checkpoint *named = NULL;
    size_t k = choice >> 1;
    if (k > 0 && k - 1 < kipp_registry_count()) named = kipp_registry_at(k - 1);

    kipp_hf_sources src = {.config = config, .config_len = config_len,
                           .generation = has_gen ? gen : NULL,
                           .generation_len = has_gen ? gen_len : 0,
                           .has_chat_template = choice & 1};
    const kipp_checkpoint *out = NULL, *again = NULL;
    kipp_error err = {0}, err2 = {0};
    int rc = kipp_hf_config_match(&src, named ? named->id : NULL, &out, &err);
    int rc2 = kipp_hf_config_match(&src, named ? named->id : NULL, &again, &err2);
    CHECK(rc == rc2 && out == again && strcmp(err.message, err2.message) == 0);
    if (rc != KIPP_OK) {
        CHECK(err.message[0] != 0);
    } else {
        bool in_registry = false;
        for (size_t i = 0; i < kipp_registry_count(); i++) in_registry |= kipp_registry_at(i) == out;
        CHECK(out && in_registry);
        if (named) CHECK(out == named);
        if (out->synthetic && !named) CHECK(contains(config, config_len, out->id));
    }
    free(config);
    free(gen);
    return 0;
}
