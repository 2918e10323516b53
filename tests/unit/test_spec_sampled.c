/* Sampled speculative decoding keeps the target's distribution exactly.
 *
 * Setup (synthetic-tiny, cpu backend): a logit bias of +1000 on four tokens S
 * and top-k 4 confine every distribution to S; temperature 15 flattens it
 * (random weights give it its shape); a presence penalty makes each step
 * depend on the tokens before it, so the penalty window must hold exactly
 * the kept drafts. The prompt is a de Bruijn sequence over S (every 3-gram
 * occurs), so prompt lookup always finds a match and drafts tokens of S.
 *
 * For each run, 1,000 seeds (500 for the wrong rule) generate the first
 * three tokens, drafting K = 2 per step; their joint histogram (64 cells)
 * is compared with the exact joint distribution
 * p(t1) p(t2|t1) p(t3|t1,t2), computed from the model with
 * kipp_sampler_probs, by a chi-square goodness-of-fit test at a false-alarm
 * rate of 0.1% per run (cells with expectation < 5 pooled; critical value
 * by the Wilson-Hilferty approximation). Runs: plain sampling (checks the
 * harness), prompt lookup, and a draft model (synthetic-tiny-instruct, a
 * different network with the same tokenizer, drafting at temperature 1 so q
 * differs from p). Then the same drafters with a deliberately wrong rule
 * (on rejection draw from p instead of max(0, p - q)) must FAIL the test.
 * Seeds are fixed, so the outcome is deterministic. */
#include "test_util.h"

#include <math.h>

#include "core/spec_internal.h"
#include "kipp.h"

#define V KIPP_VOCAB_SIZE
enum { NS = 4, CELLS = NS * NS * NS, N_SEEDS = 1000, N_WRONG = 500, K = 2, PROMPT = 66 };

static const int32_t S[NS] = {1001, 2002, 3003, 4004};
static kipp_model *target, *drafter;
static kipp_session *sess;
static int32_t prompt[PROMPT];
static float *rows, *prompt_row, *tmp, *probs;
static kipp_logit_bias bias[NS];
static double exact[CELLS];

static kipp_sampling params(uint64_t seed) {
    kipp_sampling p = kipp_sampling_default();
    p.temperature = 15.0f;
    p.top_k = NS;
    p.presence_penalty = 5.0f;
    p.logit_bias = bias;
    p.n_logit_bias = NS;
    p.seed = seed;
    return p;
}

/* The classic recursive construction (concatenated Lyndon words). */
static void de_bruijn(int t, int p, int *a, int32_t *out, int *m) {
    if (t > 3) {
        if (3 % p == 0)
            for (int j = 1; j <= p; j++) out[(*m)++] = a[j];
        return;
    }
    a[t] = a[t - p];
    de_bruijn(t + 1, p, a, out, m);
    for (int j = a[t - p] + 1; j < NS; j++) {
        a[t] = j;
        de_bruijn(t + 1, t, a, out, m);
    }
}

static int s_index(int32_t t) {
    for (int i = 0; i < NS; i++)
        if (S[i] == t) return i;
    return -1;
}

static void eval(const int32_t *t, uint32_t n, uint32_t n_logits, float *out) {
    kipp_error err = {0};
    kipp_eval_item it = {sess, t, n, n_logits, out};
    if (kipp_eval(target, &it, 1, &err)) {
        fprintf(stderr, "eval: %s\n", err.message);
        exit(1);
    }
}

static void truncate_to(uint32_t n) {
    kipp_error err = {0};
    if (kipp_session_truncate(sess, n, &err)) exit(1);
}

/* p(. | prompt, prefix[0..n)) over S, via the sampler's own processing. */
static void exact_probs(const int32_t *prefix, int n, double out[NS]) {
    kipp_sampling p = params(0);
    kipp_sampler *s = NULL;
    kipp_error err = {0};
    if (kipp_sampler_create(&p, &s, &err)) exit(1);
    for (int i = 0; i < PROMPT; i++) kipp_sampler_accept(s, prompt[i]);
    for (int i = 0; i < n; i++) kipp_sampler_accept(s, prefix[i]);
    truncate_to(PROMPT);
    if (n) eval(prefix, (uint32_t)n, 1, tmp);
    else memcpy(tmp, prompt_row, V * sizeof(float));
    kipp_sampler_probs(s, tmp, probs);
    double total = 0;
    for (int i = 0; i < NS; i++) total += out[i] = probs[S[i]];
    CHECKF(fabs(total - 1.0) < 1e-4, "support is not S: mass %g", total);
    kipp_sampler_destroy(s);
}

/* Chi-square statistic and critical value (alpha = 0.001) of counts vs exact. */
static bool gof(const char *label, const int counts[CELLS], int n) {
    double stat = 0, pool_o = 0, pool_e = 0;
    int cells = 0;
    for (int c = 0; c < CELLS; c++) {
        double e = exact[c] * n;
        if (e < 5) {
            pool_o += counts[c];
            pool_e += e;
            continue;
        }
        stat += (counts[c] - e) * (counts[c] - e) / e;
        cells++;
    }
    if (pool_e > 0) {
        stat += (pool_o - pool_e) * (pool_o - pool_e) / (pool_e > 1e-9 ? pool_e : 1e-9);
        cells++;
    }
    double df = cells - 1, z = 3.0902; /* upper 0.1% point of N(0, 1) */
    double h = 2.0 / (9.0 * df);
    double crit = df * pow(1.0 - h + z * sqrt(h), 3.0);
    fprintf(stderr, "%-28s chi2 = %7.1f, df = %2.0f, critical(0.1%%) = %5.1f -> %s\n", label, stat,
            df, crit, stat <= crit ? "consistent" : "REJECTED");
    return stat <= crit;
}

/* Three tokens per seed: t1 by plain sampling from the prompt row, the rest
 * by spec steps (mode OFF = plain sampling throughout). */
static void run(const char *label, kipp_spec_mode mode, kipp_spec_rule rule, int n_seeds,
                bool expect_pass) {
    int counts[CELLS] = {0};
    kipp_error err = {0};
    kipp_spec *sp = NULL;
    kipp_spec_options so = {.mode = mode, .max_draft = K, .draft_model = drafter,
                            .capacity = PROMPT + 16, .draft_temperature = 1.0f};
    kipp_sampling p0 = params(0);
    if (mode != KIPP_SPEC_OFF) {
        CHECKF(kipp_spec_create(target, &so, &p0, &sp, &err) == 0, "%s", err.message);
        if (!sp) return;
        kipp_spec_test_set_rule(sp, rule);
    }
    for (int seed = 0; seed < n_seeds; seed++) {
        kipp_sampling p = params(1000003u * (uint64_t)seed + 17);
        kipp_sampler *s = NULL;
        if (kipp_sampler_create(&p, &s, &err)) exit(1);
        for (int i = 0; i < PROMPT; i++) kipp_sampler_accept(s, prompt[i]);
        truncate_to(PROMPT);
        int32_t got[3 + K + 1];
        int n_got = 0;
        memcpy(tmp, prompt_row, V * sizeof(float));
        got[n_got++] = kipp_sampler_sample(s, tmp);
        kipp_sampler_accept(s, got[0]);
        if (sp) kipp_spec_set_context(sp, prompt, PROMPT, &err);
        while (n_got < 3) {
            int32_t last = got[n_got - 1];
            if (!sp) {
                eval(&last, 1, 1, tmp);
                got[n_got] = kipp_sampler_sample(s, tmp);
                kipp_sampler_accept(s, got[n_got++]);
                continue;
            }
            int32_t toks[1 + K], out[1 + K];
            uint32_t n = 0, n_out = 0;
            if (kipp_spec_draft(sp, last, K, toks, &n, &err)) exit(1);
            eval(toks, n, n, rows);
            if (kipp_spec_verify(sp, s, sess, rows, out, &n_out, &err)) exit(1);
            for (uint32_t i = 0; i < n_out; i++) got[n_got++] = out[i];
        }
        int a = s_index(got[0]), b = s_index(got[1]), c = s_index(got[2]);
        CHECK(a >= 0 && b >= 0 && c >= 0);
        if (a >= 0 && b >= 0 && c >= 0) counts[(a * NS + b) * NS + c]++;
        kipp_sampler_destroy(s);
    }
    if (sp) {
        kipp_spec_stats st;
        kipp_spec_get_stats(sp, &st);
        fprintf(stderr, "%-28s drafted %llu, accepted %llu\n", label,
                (unsigned long long)st.drafted, (unsigned long long)st.accepted);
        CHECKF(st.drafted > (uint64_t)n_seeds, "%s: too few drafts to test anything", label);
        CHECKF(st.accepted > 0 && st.accepted < st.drafted, "%s: needs both outcomes", label);
    }
    bool pass = gof(label, counts, n_seeds);
    CHECKF(pass == expect_pass, "%s: expected the test to %s", label,
           expect_pass ? "pass" : "reject");
    kipp_spec_destroy(sp);
}

int main(void) {
    char path[512], dpath[512];
    snprintf(path, sizeof path, "%s/models/synthetic-tiny.gguf", test_build_dir());
    snprintf(dpath, sizeof dpath, "%s/models/synthetic-tiny-instruct.gguf", test_build_dir());
    FILE *f = fopen(path, "rb"), *g = fopen(dpath, "rb");
    if (!f || !g) {
        printf("fixtures missing (make fixtures)\n");
        return 77;
    }
    fclose(f);
    fclose(g);
    kipp_error err = {0};
    kipp_model_options mo = {.backend = KIPP_BACKEND_CPU};
    if (kipp_model_open(path, &mo, &target, &err) || kipp_model_open(dpath, &mo, &drafter, &err)) {
        fprintf(stderr, "open: %s\n", err.message);
        return 1;
    }
    kipp_session_options so = {.capacity = PROMPT + 16};
    if (kipp_session_create(target, &so, &sess, &err)) return 1;
    rows = malloc((size_t)(K + 1) * V * sizeof(float));
    prompt_row = malloc(V * sizeof(float));
    tmp = malloc(V * sizeof(float));
    probs = malloc(V * sizeof(float));
    for (int i = 0; i < NS; i++) bias[i] = (kipp_logit_bias){S[i], 1000.0f};

    /* de Bruijn B(4, 3): 64 symbols, every 3-gram once (cyclically), plus
     * the first two again so the cyclic ones appear too. */
    int a[4] = {0}, n = 0;
    int32_t db[64];
    de_bruijn(1, 1, a, db, &n);
    CHECK(n == 64);
    for (int i = 0; i < 64; i++) prompt[i] = S[db[i]];
    prompt[64] = S[db[0]];
    prompt[65] = S[db[1]];

    eval(prompt, PROMPT, 1, prompt_row);

    /* Exact joint distribution of the first three tokens. */
    double p1[NS], p2[NS], p3[NS];
    exact_probs(NULL, 0, p1);
    for (int x = 0; x < NS; x++) {
        int32_t pre[2] = {S[x], 0};
        exact_probs(pre, 1, p2);
        for (int y = 0; y < NS; y++) {
            pre[1] = S[y];
            exact_probs(pre, 2, p3);
            for (int z = 0; z < NS; z++) exact[(x * NS + y) * NS + z] = p1[x] * p2[y] * p3[z];
        }
    }
    fprintf(stderr, "p(t1) over S: %.3f %.3f %.3f %.3f\n", p1[0], p1[1], p1[2], p1[3]);

    run("plain sampling", KIPP_SPEC_OFF, KIPP_SPEC_RULE_EXACT, N_SEEDS, true);
    run("lookup", KIPP_SPEC_LOOKUP, KIPP_SPEC_RULE_EXACT, N_SEEDS, true);
    run("draft model", KIPP_SPEC_DRAFT, KIPP_SPEC_RULE_EXACT, N_SEEDS, true);
    run("lookup, wrong rule", KIPP_SPEC_LOOKUP, KIPP_SPEC_RULE_WRONG_RESIDUAL, N_WRONG, false);
    run("draft model, wrong rule", KIPP_SPEC_DRAFT, KIPP_SPEC_RULE_WRONG_RESIDUAL, N_WRONG, false);

    kipp_session_destroy(sess);
    kipp_model_close(drafter);
    kipp_model_close(target);
    free(rows);
    free(prompt_row);
    free(tmp);
    free(probs);
    return test_finish("test_spec_sampled");
}
