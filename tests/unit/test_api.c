/* The library-facing parts of include/kipp.h (issue 14): the version
 * macros agree with kipp_version(); the kernel tier round-trips through its
 * name; kipp_model_open reports an unknown tier and a backend missing from
 * the table (src/backends.c) as KIPP_E_BACKEND after the artifact checks,
 * and a zero-initialised options struct means the documented defaults. */
#include <stdio.h>
#include <string.h>

#include "kipp.h"
#include "test_util.h"

static void check_version(void) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", KIPP_VERSION_MAJOR, KIPP_VERSION_MINOR,
             KIPP_VERSION_PATCH);
    CHECKF(strcmp(want, KIPP_VERSION_STRING) == 0, "macros %s vs string %s", want,
           KIPP_VERSION_STRING);
    CHECKF(strcmp(kipp_version(), KIPP_VERSION_STRING) == 0, "kipp_version() = %s",
           kipp_version());
    CHECK(KIPP_VERSION ==
          KIPP_VERSION_MAJOR * 10000 + KIPP_VERSION_MINOR * 100 + KIPP_VERSION_PATCH);
}

static void check_isa_names(void) {
    const kipp_cpu_isa all[] = {KIPP_CPU_ISA_AUTO, KIPP_CPU_ISA_GENERIC, KIPP_CPU_ISA_AVX2,
                                KIPP_CPU_ISA_AVX512, KIPP_CPU_ISA_AVX512BF16, KIPP_CPU_ISA_AMX,
                                KIPP_CPU_ISA_AVX2I8, KIPP_CPU_ISA_AVX512I8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *name = kipp_cpu_isa_name(all[i]);
        kipp_cpu_isa back = (kipp_cpu_isa)-1;
        kipp_error err = {0};
        CHECK(name != NULL);
        CHECKF(name && kipp_cpu_isa_parse(name, &back, &err) == KIPP_OK && back == all[i],
               "%s does not round-trip: %s", name ? name : "(null)", err.message);
    }
    CHECK(strcmp(kipp_cpu_isa_name(KIPP_CPU_ISA_AUTO), "auto") == 0);
    CHECK(strcmp(kipp_cpu_isa_name(KIPP_CPU_ISA_AVX512I8), "avx512i8") == 0);
    CHECK(kipp_cpu_isa_name((kipp_cpu_isa)(KIPP_CPU_ISA_AVX512I8 + 1)) == NULL);
    CHECK(kipp_cpu_isa_name((kipp_cpu_isa)99) == NULL);
    kipp_cpu_isa v = KIPP_CPU_ISA_AVX2;
    kipp_error err = {0};
    CHECK(kipp_cpu_isa_parse("sse2", &v, &err) == KIPP_E_ARGUMENT);
    CHECKF(strstr(err.message, "'sse2'") != NULL, "message: %s", err.message);
    CHECK(v == KIPP_CPU_ISA_AVX2); /* untouched on error */
    CHECK(kipp_cpu_isa_parse(NULL, &v, NULL) == KIPP_E_ARGUMENT);
    CHECK(kipp_cpu_isa_parse("", &v, NULL) == KIPP_E_ARGUMENT);
}

static void check_head_names(void) {
    const kipp_head_quant all[] = {KIPP_HEAD_AS_STORED, KIPP_HEAD_Q8_0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *name = kipp_head_quant_name(all[i]);
        kipp_head_quant back = (kipp_head_quant)-1;
        kipp_error err = {0};
        CHECKF(name && kipp_head_quant_parse(name, &back, &err) == KIPP_OK && back == all[i],
               "head %d does not round-trip: %s", (int)all[i], err.message);
    }
    CHECK(strcmp(kipp_head_quant_name(KIPP_HEAD_AS_STORED), "bf16") == 0);
    CHECK(kipp_head_quant_name((kipp_head_quant)7) == NULL);
    kipp_head_quant h = KIPP_HEAD_Q8_0;
    kipp_error err = {0};
    CHECK(kipp_head_quant_parse("q4_0", &h, &err) == KIPP_E_ARGUMENT);
    CHECKF(strstr(err.message, "unknown output head format 'q4_0'") != NULL, "message: %s",
           err.message);
    CHECK(h == KIPP_HEAD_Q8_0); /* untouched on error */
    CHECK(kipp_head_quant_parse(NULL, &h, NULL) == KIPP_E_ARGUMENT);
}

/* options.profile: the cpu backend counts each step of one 3-token eval
 * (2 layers: 2 qkv calls, 5 norms, one head) and its matmul FLOPs; the ref
 * backend keeps none. Wall times and FLOPs of the steps the bench reads
 * are checked in tests/scripts/test_bench_profile.sh. */
static void check_profile(const char *path) {
    kipp_model *m = NULL;
    kipp_error err = {0};
    kipp_model_options o = {.backend = KIPP_BACKEND_CPU, .threads = 2, .profile = 1};
    CHECKF(kipp_model_open(path, &o, &m, &err) == KIPP_OK, "%s", err.message);
    if (!m) return;
    kipp_profile_step p[KIPP_PROFILE_STEPS + 1];
    CHECK(kipp_model_profile(m, p, KIPP_PROFILE_STEPS + 1) == KIPP_PROFILE_STEPS);
    CHECK(strcmp(p[0].name, "embed") == 0 && strcmp(p[8].name, "head") == 0);
    CHECK(p[2].calls == 0 && p[2].flops == 0);
    CHECK(kipp_model_profile(m, NULL, 0) == KIPP_PROFILE_STEPS); /* the count alone */
    CHECK(kipp_model_profile(m, NULL, 5) == KIPP_PROFILE_STEPS); /* NULL out: nothing copied */
    kipp_session *s = NULL;
    CHECKF(kipp_session_create(m, NULL, &s, &err) == KIPP_OK, "%s", err.message);
    static float logits[KIPP_VOCAB_SIZE];
    const int32_t toks[3] = {9707, 11, 1879};
    kipp_eval_item it = {s, toks, 3, 1, logits};
    CHECKF(kipp_eval(m, &it, 1, &err) == KIPP_OK, "%s", err.message);
    CHECK(kipp_model_profile(m, p, KIPP_PROFILE_STEPS) == KIPP_PROFILE_STEPS);
    const kipp_checkpoint *c = kipp_model_checkpoint(m);
    double H = c->hidden, V = KIPP_VOCAB_SIZE;
    CHECK(strcmp(p[2].name, "qkv") == 0 && p[2].calls == c->layers);
    CHECK(strcmp(p[1].name, "norm") == 0 && p[1].calls == 2 * c->layers + 1);
    CHECKF(p[8].calls == 1 && p[8].flops == 2 * H * V, "head: %llu calls, %.0f flops",
           (unsigned long long)p[8].calls, p[8].flops);
    for (int i = 0; i < KIPP_PROFILE_STEPS; i++)
        CHECKF(p[i].seconds >= 0 && p[i].calls >= 1, "%s: %llu calls, %g s", p[i].name,
               (unsigned long long)p[i].calls, p[i].seconds);
    kipp_session_destroy(s);
    kipp_model_close(m);

    kipp_model_options r = {.backend = KIPP_BACKEND_REF, .profile = 1};
    CHECKF(kipp_model_open(path, &r, &m, &err) == KIPP_OK, "%s", err.message);
    CHECK(m && kipp_model_profile(m, p, KIPP_PROFILE_STEPS) == 0);
    kipp_model_close(m);
}

static void check_open(const char *path) {
    kipp_model *m = NULL;
    kipp_error err = {0};

    /* NULL options = zero options = no backend: tokenizing works, eval not. */
    CHECKF(kipp_model_open(path, NULL, &m, &err) == KIPP_OK, "%s", err.message);
    kipp_session *s = NULL;
    CHECK(m && kipp_session_create(m, NULL, &s, &err) == KIPP_E_ARGUMENT);
    kipp_model_close(m);

    /* A tier outside the enum: refused by the cpu backend, nothing leaks. */
    kipp_model_options o = {.backend = KIPP_BACKEND_CPU, .threads = 1,
                            .cpu_isa = (kipp_cpu_isa)99};
    m = NULL;
    CHECK(kipp_model_open(path, &o, &m, &err) == KIPP_E_BACKEND);
    CHECKF(strstr(err.message, "unknown kernel tier 99") != NULL, "message: %s", err.message);
    CHECK(m == NULL);

    /* A head format outside the enum: refused before the file is read. */
    kipp_model_options bad_head = {.backend = KIPP_BACKEND_CPU, .head_quant = (kipp_head_quant)7};
    m = NULL;
    CHECK(kipp_model_open(path, &bad_head, &m, &err) == KIPP_E_ARGUMENT);
    CHECKF(strstr(err.message, "unknown output head format 7") != NULL, "message: %s",
           err.message);
    CHECK(m == NULL);

    /* The Q8_0 head: made for a backend only (the ref model reports it;
     * a tokenizer-only open leaves the head as stored). */
    kipp_model_options q8 = {.backend = KIPP_BACKEND_REF, .head_quant = KIPP_HEAD_Q8_0};
    CHECKF(kipp_model_open(path, &q8, &m, &err) == KIPP_OK, "q8_0 head: %s", err.message);
    CHECK(m && strcmp(kipp_model_head_quant(m), "q8_0") == 0);
    kipp_model_close(m);
    q8.backend = KIPP_BACKEND_NONE;
    CHECKF(kipp_model_open(path, &q8, &m, &err) == KIPP_OK, "q8_0 head, no backend: %s",
           err.message);
    CHECK(m && strcmp(kipp_model_head_quant(m), "bf16") == 0);
    kipp_model_close(m);
    CHECK(kipp_model_head_quant(NULL) == NULL);

    /* The portable tier runs everywhere. */
    o.cpu_isa = KIPP_CPU_ISA_GENERIC;
    CHECKF(kipp_model_open(path, &o, &m, &err) == KIPP_OK, "generic tier: %s", err.message);
    kipp_profile_step prof[KIPP_PROFILE_STEPS];
    CHECK(m && kipp_model_profile(m, prof, KIPP_PROFILE_STEPS) == 0); /* not asked for */
    kipp_model_close(m);
    CHECK(kipp_model_profile(NULL, prof, KIPP_PROFILE_STEPS) == 0);
    check_profile(path);

    /* A kind with no row in the backend table. */
    kipp_model_options cuda = {.backend = KIPP_BACKEND_CUDA};
    m = NULL;
    CHECK(kipp_model_open(path, &cuda, &m, &err) == KIPP_E_BACKEND);
    CHECKF(strstr(err.message, "backend 'cuda' is not available in this build") != NULL,
           "message: %s", err.message);
    CHECK(m == NULL);

    /* The artifact is checked first: a missing file is an I/O error even
     * with a backend that does not exist. */
    CHECK(kipp_model_open("/nonexistent.gguf", &cuda, &m, &err) == KIPP_E_IO);
}

int main(void) {
    check_version();
    check_isa_names();
    check_head_names();
    char path[512];
    snprintf(path, sizeof path, "%s/models/synthetic-tiny.gguf", test_build_dir());
    check_open(path);
    return test_finish("test_api");
}
