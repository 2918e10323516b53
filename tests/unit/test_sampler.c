/* Sampler knob semantics on hand-made logits over the full vocabulary.
 * Each check states the expected set or frequency in terms of the knob's
 * definition (see the order in src/core/sampler.c). */
#include "test_util.h"

#include <math.h>

#include "kipp.h"

#define V KIPP_VOCAB_SIZE

static float logits[V], work[V];

/* A base distribution: token i gets a small logit, a few chosen tokens get
 * large ones. */
static void base_logits(void) {
    for (int i = 0; i < V; i++) logits[i] = -10.0f - (float)(i % 97) * 0.01f;
    logits[100] = 5.0f;
    logits[200] = 4.0f;
    logits[300] = 3.0f;
    logits[400] = 2.0f;
}

static kipp_sampler *make(const kipp_sampling *p) {
    kipp_error err = {0};
    kipp_sampler *s = NULL;
    CHECKF(kipp_sampler_create(p, &s, &err) == 0, "%s", err.message);
    return s;
}

static int32_t draw(kipp_sampler *s) {
    memcpy(work, logits, sizeof work);
    return kipp_sampler_sample(s, work);
}

/* Counts of tokens 100/200/300/400/other over n draws. */
static void histogram(kipp_sampler *s, int n, int counts[5]) {
    memset(counts, 0, 5 * sizeof *counts);
    for (int i = 0; i < n; i++) {
        int32_t t = draw(s);
        counts[t == 100 ? 0 : t == 200 ? 1 : t == 300 ? 2 : t == 400 ? 3 : 4]++;
    }
}

/* by_value_desc's order, written again: higher logit first, lower id on a tie. */
typedef struct ranked {
    float value;
    int32_t id;
} ranked;

static int ranked_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->value != y->value) return x->value > y->value ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* top-k keeps exactly the k best by a full sort of the vocabulary (ties
 * broken by lower id), whichever way the sampler selects them (a heap up
 * to 128, quickselect above): over logits with ~3,000-way ties at every
 * value and over distinct ones, k from 1 to 20,000. */
static void check_top_k_sets(void) {
    static ranked order[V];
    static float probs[V];
    static unsigned char want[V];
    const int32_t ks[] = {1, 2, 40, 64, 127, 128, 129, 1000, 3039, 20000};
    for (int pattern = 0; pattern < 2; pattern++) {
        uint32_t r = 12345;
        for (int i = 0; i < V; i++) {
            r = r * 1664525u + 1013904223u;
            logits[i] = pattern == 0 ? (float)((i * 7919) % 50) / 10.0f
                                     : (float)(r >> 8) / (float)(1u << 24) * 5.0f;
            order[i] = (ranked){logits[i], i};
        }
        qsort(order, V, sizeof *order, ranked_desc);
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            kipp_sampling p = kipp_sampling_default();
            p.temperature = 1.0f;
            p.top_k = ks[ki];
            kipp_sampler *s = make(&p);
            memcpy(work, logits, sizeof work);
            CHECK(kipp_sampler_probs(s, work, probs) == order[0].id);
            memset(want, 0, sizeof want);
            for (int32_t j = 0; j < ks[ki]; j++) want[order[j].id] = 1;
            int wrong = 0;
            for (int i = 0; i < V; i++) wrong += (probs[i] != 0.0f) != want[i];
            CHECKF(wrong == 0, "top_k %d (%s logits): %d tokens kept or dropped wrongly", ks[ki],
                   pattern == 0 ? "tied" : "distinct", wrong);
            kipp_sampler_destroy(s);
        }
    }
    base_logits();
}

int main(void) {
    kipp_error err = {0};
    base_logits();
    kipp_sampling p = kipp_sampling_default();
    CHECK(p.temperature == 0 && p.top_k == 0 && p.top_p == 1 && p.min_p == 0 &&
          p.repetition_penalty == 1 && p.frequency_penalty == 0 && p.presence_penalty == 0);

    /* Greedy (temperature 0) and top-k 1 at temperature 1 both give argmax. */
    kipp_sampler *g = make(&p);
    CHECK(draw(g) == 100);
    kipp_sampler_destroy(g);
    p.temperature = 1.0f;
    p.top_k = 1;
    for (uint64_t seed = 0; seed < 20; seed++) {
        p.seed = seed;
        kipp_sampler *s = make(&p);
        CHECK(draw(s) == 100);
        kipp_sampler_destroy(s);
    }
    /* A tie goes to the lower id in both. */
    logits[50] = 5.0f;
    p.temperature = 0;
    g = make(&p);
    CHECK(draw(g) == 50);
    kipp_sampler_destroy(g);
    p.temperature = 1;
    g = make(&p);
    CHECK(draw(g) == 50);
    kipp_sampler_destroy(g);
    base_logits();

    /* Top-k 2: only the two best ever appear, in ratio e^1. */
    p = kipp_sampling_default();
    p.temperature = 1.0f;
    p.top_k = 2;
    p.seed = 7;
    kipp_sampler *s = make(&p);
    int c[5];
    histogram(s, 2000, c);
    CHECK(c[2] == 0 && c[3] == 0 && c[4] == 0);
    double ratio = (double)c[0] / c[1];
    CHECKF(fabs(ratio - exp(1.0)) < 0.35, "top-k 2 ratio %g", ratio);
    kipp_sampler_destroy(s);

    /* Top-p boundary. Probabilities of 100/200/300/400 at T=1 (the tail is
     * negligible, ~1e-5 in total): computed here from the definition. */
    double e[4] = {exp(5.0), exp(4.0), exp(3.0), exp(2.0)}, z = 0;
    for (int i = 0; i < V; i++) z += exp((double)logits[i]);
    double p0 = e[0] / z, p01 = (e[0] + e[1]) / z;
    p = kipp_sampling_default();
    p.temperature = 1.0f;
    p.top_p = (float)(p0 - 1e-4); /* just below p(100): only 100 survives */
    s = make(&p);
    histogram(s, 200, c);
    CHECK(c[0] == 200);
    kipp_sampler_destroy(s);
    p.top_p = (float)(p0 + 1e-4); /* just above: 100 and 200 */
    s = make(&p);
    histogram(s, 500, c);
    CHECK(c[0] > 0 && c[1] > 0 && c[2] == 0 && c[3] == 0 && c[4] == 0);
    kipp_sampler_destroy(s);
    p.top_p = (float)(p01 + 1e-4); /* just above the first two: 300 joins */
    s = make(&p);
    histogram(s, 500, c);
    CHECK(c[2] > 0 && c[3] == 0 && c[4] == 0);
    kipp_sampler_destroy(s);

    /* Min-p boundary: p(300)/p(100) = e^-2 = 0.1353. */
    p = kipp_sampling_default();
    p.temperature = 1.0f;
    p.min_p = 0.135f; /* just below: 100, 200, 300 */
    s = make(&p);
    histogram(s, 500, c);
    CHECK(c[2] > 0 && c[3] == 0 && c[4] == 0);
    kipp_sampler_destroy(s);
    p.min_p = 0.136f; /* just above: 100, 200 */
    s = make(&p);
    histogram(s, 500, c);
    CHECK(c[0] > 0 && c[1] > 0 && c[2] == 0 && c[3] == 0 && c[4] == 0);
    kipp_sampler_destroy(s);

    /* Temperature flattens: at T=2 the 100:200 ratio is e^0.5. */
    p = kipp_sampling_default();
    p.temperature = 2.0f;
    p.top_k = 2;
    s = make(&p);
    histogram(s, 3000, c);
    ratio = (double)c[0] / c[1];
    CHECKF(fabs(ratio - exp(0.5)) < 0.15, "T=2 ratio %g", ratio);
    kipp_sampler_destroy(s);

    /* Banned token never appears, greedy or sampled; bias can promote. */
    kipp_logit_bias bias[2] = {{100, -INFINITY}, {400, 2.5f}};
    p = kipp_sampling_default();
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    s = make(&p);
    CHECK(draw(s) == 400); /* 2 + 2.5 = 4.5 beats 200's 4.0 */
    kipp_sampler_destroy(s);
    p.temperature = 1.5f;
    s = make(&p);
    histogram(s, 500, c);
    CHECK(c[0] == 0 && c[3] > 0);
    kipp_sampler_destroy(s);

    /* Penalties apply only to tokens inside the 64-token window. */
    p = kipp_sampling_default();
    p.repetition_penalty = 2.0f; /* 5 -> 2.5 for token 100 */
    s = make(&p);
    kipp_sampler_accept(s, 100);
    CHECK(draw(s) == 200);
    for (int i = 0; i < 63; i++) kipp_sampler_accept(s, 7); /* 100 still inside (64th) */
    CHECK(draw(s) == 200);
    kipp_sampler_accept(s, 7); /* now 100 has left the window */
    CHECK(draw(s) == 100);
    kipp_sampler_destroy(s);
    /* Repetition penalty multiplies a negative logit. */
    p.repetition_penalty = 1.5f;
    base_logits();
    logits[100] = -1.0f;
    logits[200] = -1.2f;
    for (int i = 0; i < V; i++) if (i != 100 && i != 200) logits[i] = -50.0f;
    s = make(&p);
    kipp_sampler_accept(s, 100); /* -1.5 < -1.2 */
    CHECK(draw(s) == 200);
    kipp_sampler_destroy(s);
    base_logits();
    /* Frequency counts occurrences; presence counts once. 100 leads 200 by 1. */
    p = kipp_sampling_default();
    p.frequency_penalty = 0.4f;
    s = make(&p);
    kipp_sampler_accept(s, 100);
    kipp_sampler_accept(s, 100);
    CHECK(draw(s) == 100); /* 5 - 0.8 = 4.2 > 4 */
    kipp_sampler_accept(s, 100);
    CHECK(draw(s) == 200); /* 5 - 1.2 = 3.8 < 4 */
    kipp_sampler_destroy(s);
    p = kipp_sampling_default();
    p.presence_penalty = 0.9f;
    s = make(&p);
    for (int i = 0; i < 10; i++) kipp_sampler_accept(s, 100);
    CHECK(draw(s) == 100); /* 5 - 0.9 = 4.1 > 4, however many times */
    kipp_sampler_destroy(s);
    p.presence_penalty = 1.1f;
    s = make(&p);
    kipp_sampler_accept(s, 100);
    CHECK(draw(s) == 200);
    kipp_sampler_destroy(s);

    /* Same seed, same tokens; another seed, another sequence. */
    p = kipp_sampling_default();
    p.temperature = 3.0f; /* flat enough that the tail matters */
    p.seed = 1234;
    int32_t seq1[64], seq2[64], seq3[64];
    kipp_sampler *s1 = make(&p), *s2 = make(&p);
    p.seed = 1235;
    kipp_sampler *s3 = make(&p);
    for (int i = 0; i < 64; i++) {
        seq1[i] = draw(s1);
        seq2[i] = draw(s2);
        seq3[i] = draw(s3);
    }
    CHECK(memcmp(seq1, seq2, sizeof seq1) == 0);
    CHECK(memcmp(seq1, seq3, sizeof seq1) != 0);
    kipp_sampler_destroy(s1);
    kipp_sampler_destroy(s2);
    kipp_sampler_destroy(s3);

    /* Everything banned: no token (-1), never an out-of-range id. */
    for (int i = 0; i < V; i++) work[i] = -INFINITY;
    p = kipp_sampling_default();
    s = make(&p);
    CHECK(kipp_sampler_sample(s, work) == -1);
    kipp_sampler_destroy(s);

    /* Bad parameters are rejected. */
    kipp_sampler *bad = NULL;
    p = kipp_sampling_default();
    p.temperature = -1;
    CHECK(kipp_sampler_create(&p, &bad, &err) == KIPP_E_ARGUMENT);
    p = kipp_sampling_default();
    p.top_p = 0;
    CHECK(kipp_sampler_create(&p, &bad, &err) == KIPP_E_ARGUMENT);
    p = kipp_sampling_default();
    p.top_k = -2;
    CHECK(kipp_sampler_create(&p, &bad, &err) == KIPP_E_ARGUMENT);
    p = kipp_sampling_default();
    kipp_logit_bias oob = {V, 1.0f};
    p.logit_bias = &oob;
    p.n_logit_bias = 1;
    CHECK(kipp_sampler_create(&p, &bad, &err) == KIPP_E_ARGUMENT);
    CHECK(bad == NULL);

    /* kipp_sampler_probs (speculative verification's p): the distribution
     * kipp_sampler_sample draws from. top-k 3 at temperature 1 over the base
     * logits keeps 100/200/300 with weights e^2 : e^1 : e^0; a presence
     * penalty on 100 (in the window) lowers it by exactly P. */
    static float probs[V];
    p = kipp_sampling_default();
    p.temperature = 1.0f;
    p.top_k = 3;
    p.presence_penalty = 0.5f;
    s = make(&p);
    kipp_sampler_accept(s, 100);
    memcpy(work, logits, sizeof work);
    CHECK(kipp_sampler_probs(s, work, probs) == 100);
    double zz = exp(1.5) + exp(1.0) + 1.0, mass = 0;
    for (int i = 0; i < V; i++) mass += probs[i];
    CHECK(fabs(mass - 1.0) < 1e-6);
    CHECK(fabs(probs[100] - exp(1.5) / zz) < 1e-6 && fabs(probs[200] - exp(1.0) / zz) < 1e-6 &&
          fabs(probs[300] - 1.0 / zz) < 1e-6 && probs[400] == 0.0f);
    /* Empirical frequencies of sample() agree with probs (20,000 draws,
     * 5-sigma bounds, so a false alarm is practically impossible). */
    int hits[3] = {0};
    for (int i = 0; i < 20000; i++) {
        memcpy(work, logits, sizeof work);
        int32_t t = kipp_sampler_sample(s, work);
        hits[t == 100 ? 0 : t == 200 ? 1 : 2]++;
    }
    const int32_t ids3[3] = {100, 200, 300};
    for (int k = 0; k < 3; k++) {
        double ex = 20000.0 * probs[ids3[k]], sd = sqrt(ex * (1 - probs[ids3[k]]));
        CHECKF(fabs(hits[k] - ex) < 5 * sd, "token %d: %d draws, expected %.0f", ids3[k], hits[k], ex);
    }
    /* kipp_sampler_draw follows the given weights; zero weights never win. */
    static float w[V];
    w[7] = 1.0f;
    w[9] = 3.0f;
    int n9 = 0;
    for (int i = 0; i < 20000; i++) {
        int32_t t = kipp_sampler_draw(s, w);
        CHECK(t == 7 || t == 9);
        n9 += t == 9;
    }
    CHECKF(fabs(n9 - 15000.0) < 5 * sqrt(20000 * 0.75 * 0.25), "%d of 20000 draws were 9", n9);
    w[7] = w[9] = 0.0f;
    CHECK(kipp_sampler_draw(s, w) == -1);
    double u = kipp_sampler_uniform(s);
    CHECK(u >= 0.0 && u < 1.0);
    kipp_sampler_destroy(s);
    /* Greedy: one-hot at the greedy pick, no randomness consumed. */
    p = kipp_sampling_default();
    s = make(&p);
    memcpy(work, logits, sizeof work);
    CHECK(kipp_sampler_probs(s, work, probs) == 100 && probs[100] == 1.0f && probs[200] == 0.0f);
    for (int i = 0; i < V; i++) work[i] = -INFINITY;
    CHECK(kipp_sampler_probs(s, work, probs) == -1);
    kipp_sampler_destroy(s);
    /* No pick (-1), and what caused it: every logit NaN (a corrupt model)
     * or every logit -inf (bans); one NaN among finite logits never wins. */
    for (float t = 0.0f; t <= 1.0f; t += 1.0f) {
        p = kipp_sampling_default();
        p.temperature = t;
        kipp_sampler *ns = make(&p);
        for (int i = 0; i < V; i++) logits[i] = NAN;
        CHECK(draw(ns) == -1 && kipp_logits_have_nan(logits));
        for (int i = 0; i < V; i++) logits[i] = -INFINITY;
        CHECK(draw(ns) == -1 && !kipp_logits_have_nan(logits));
        base_logits();
        CHECK(!kipp_logits_have_nan(logits));
        logits[100] = NAN;
        int32_t id = draw(ns);
        CHECK(id >= 0 && id != 100 && kipp_logits_have_nan(logits));
        base_logits();
        kipp_sampler_destroy(ns);
    }
    CHECK(!kipp_logits_have_nan(NULL));
    check_top_k_sets();
    return test_finish("test_sampler");
}
