/* The compiled-in registry: one row per checkpoint of ../shared/checkpoints.tsv.
 * tools/registry.tsv mirrors it for tooling; tests/scripts/test_registry.sh
 * checks that `kipp registry` (this table) equals both TSV copies.
 * Adding a checkpoint means adding one row here and one in the mirror. */
#include <string.h>

#include "kipp.h"

#define BASE_STOPS {151643}, 1
#define INSTRUCT_STOPS {151645, 151643}, 2

static const kipp_checkpoint registry[] = {
    /* id, repository, revision, variant, layers, hidden, ffn, heads, context,
     * rope_theta, tied, eos, stops, n_stops, synthetic */
    {"qwen3-0.6b-base", "Qwen/Qwen3-0.6B-Base", "da87bfb608c14b7cf20ba1ce41287e8de496c0cd",
     KIPP_VARIANT_BASE, 28, 1024, 3072, 16, 32768, 1000000.0, true, 151643, BASE_STOPS, false},
    {"qwen3-0.6b", "Qwen/Qwen3-0.6B", "c1899de289a04d12100db370d81485cdf75e47ca",
     KIPP_VARIANT_INSTRUCT, 28, 1024, 3072, 16, 40960, 1000000.0, true, 151645, INSTRUCT_STOPS, false},
    {"qwen3-1.7b-base", "Qwen/Qwen3-1.7B-Base", "ea980cb0a6c2ae4b936e82123acc929f1cec04c1",
     KIPP_VARIANT_BASE, 28, 2048, 6144, 16, 32768, 1000000.0, true, 151643, BASE_STOPS, false},
    {"qwen3-1.7b", "Qwen/Qwen3-1.7B", "70d244cc86ccca08cf5af4e1e306ecf908b1ad5e",
     KIPP_VARIANT_INSTRUCT, 28, 2048, 6144, 16, 40960, 1000000.0, true, 151645, INSTRUCT_STOPS, false},
    {"qwen3-4b-base", "Qwen/Qwen3-4B-Base", "906bfd4b4dc7f14ee4320094d8b41684abff8539",
     KIPP_VARIANT_BASE, 36, 2560, 9728, 32, 32768, 1000000.0, true, 151643, BASE_STOPS, false},
    {"qwen3-4b", "Qwen/Qwen3-4B", "1cfa9a7208912126459214e8b04321603b3df60c",
     KIPP_VARIANT_INSTRUCT, 36, 2560, 9728, 32, 40960, 1000000.0, true, 151645, INSTRUCT_STOPS, false},
    {"qwen3-4b-instruct-2507", "Qwen/Qwen3-4B-Instruct-2507", "cdbee75f17c01a7cc42f958dc650907174af0554",
     KIPP_VARIANT_INSTRUCT_2507, 36, 2560, 9728, 32, 262144, 5000000.0, true, 151645, INSTRUCT_STOPS, false},
    {"qwen3-4b-thinking-2507", "Qwen/Qwen3-4B-Thinking-2507", "768f209d9ea81521153ed38c47d515654e938aea",
     KIPP_VARIANT_THINKING_2507, 36, 2560, 9728, 32, 262144, 5000000.0, true, 151645, INSTRUCT_STOPS, false},
    {"qwen3-8b-base", "Qwen/Qwen3-8B-Base", "49e3418fbbbca6ecbdf9608b4d22e5a407081db4",
     KIPP_VARIANT_BASE, 36, 4096, 12288, 32, 32768, 1000000.0, false, 151643, BASE_STOPS, false},
    {"qwen3-8b", "Qwen/Qwen3-8B", "b968826d9c46dd6066d109eabc6255188de91218",
     KIPP_VARIANT_INSTRUCT, 36, 4096, 12288, 32, 40960, 1000000.0, false, 151645, INSTRUCT_STOPS, false},
    {"qwen3-14b-base", "Qwen/Qwen3-14B-Base", "0b0bd3732e2c374d483664439ea334928b65f304",
     KIPP_VARIANT_BASE, 40, 5120, 17408, 40, 32768, 1000000.0, false, 151643, BASE_STOPS, false},
    {"qwen3-14b", "Qwen/Qwen3-14B", "40c069824f4251a91eefaf281ebe4c544efd3e18",
     KIPP_VARIANT_INSTRUCT, 40, 5120, 17408, 40, 40960, 1000000.0, false, 151645, INSTRUCT_STOPS, false},
    {"qwen3-32b", "Qwen/Qwen3-32B", "9216db5781bf21249d130ec9da846c4624c16137",
     KIPP_VARIANT_INSTRUCT, 64, 5120, 25600, 64, 40960, 1000000.0, false, 151645, INSTRUCT_STOPS, false},
    {"synthetic-tiny", "kipp-synthetic/tiny", "v1-seed-1",
     KIPP_VARIANT_BASE, 2, 256, 768, 8, 4096, 1000000.0, true, 151643, BASE_STOPS, true},
    {"synthetic-tiny-instruct", "kipp-synthetic/tiny-instruct", "v1-seed-2",
     KIPP_VARIANT_INSTRUCT, 3, 384, 1024, 16, 4096, 5000000.0, false, 151645, INSTRUCT_STOPS, true},
    {"synthetic-0.6b", "kipp-synthetic/0.6b", "v1-seed-3",
     KIPP_VARIANT_BASE, 28, 1024, 3072, 16, 40960, 1000000.0, true, 151643, BASE_STOPS, true},
    {"synthetic-4b", "kipp-synthetic/4b", "v1-seed-4",
     KIPP_VARIANT_BASE, 36, 2560, 9728, 32, 40960, 1000000.0, true, 151643, BASE_STOPS, true},
};

size_t kipp_registry_count(void) { return sizeof registry / sizeof registry[0]; }

const kipp_checkpoint *kipp_registry_at(size_t index) {
    return index < kipp_registry_count() ? &registry[index] : NULL;
}

const kipp_checkpoint *kipp_registry_find_id(const char *id) {
    for (size_t i = 0; id && i < kipp_registry_count(); i++)
        if (strcmp(registry[i].id, id) == 0) return &registry[i];
    return NULL;
}

const kipp_checkpoint *kipp_registry_find_source(const char *repository,
                                                 const char *revision) {
    for (size_t i = 0; repository && revision && i < kipp_registry_count(); i++)
        if (strcmp(registry[i].source_repository, repository) == 0 &&
            strcmp(registry[i].revision, revision) == 0)
            return &registry[i];
    return NULL;
}

const char *kipp_variant_name(kipp_variant v) {
    switch (v) {
    case KIPP_VARIANT_BASE: return "base";
    case KIPP_VARIANT_INSTRUCT: return "instruct";
    case KIPP_VARIANT_INSTRUCT_2507: return "instruct-2507";
    case KIPP_VARIANT_THINKING_2507: return "thinking-2507";
    }
    return "unknown";
}
