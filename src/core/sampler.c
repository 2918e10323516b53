/* The one sampling entry point (DESIGN §8), shared by CLI and server.
 *
 * Order of operations on the 151,936 logits (the same order as Hugging
 * Face / vLLM; llama.cpp's default chain differs only in applying the
 * temperature after its filters):
 *   1. penalties over the last 64 accepted tokens (the CLI accepts the
 *      prompt too, the server only generated tokens), once per distinct
 *      token t with count c in the window:
 *        repetition (CTRL):  l > 0 ? l / r : l * r
 *        frequency, presence (OpenAI): l -= c * f + (c > 0) * p
 *   2. logit bias: l += bias (-INFINITY bans the token)
 *   3. temperature 0: greedy argmax (lowest id wins a tie); stop here
 *   4. temperature: l /= T
 *   5. top-k: keep the k highest (ties broken by lower id)
 *   6. softmax over what is left
 *   7. top-p: keep the shortest highest-first prefix whose probability
 *      reaches p (always at least one token)
 *   8. min-p: keep tokens with probability >= min_p * (highest probability)
 *   9. draw one token from the renormalised rest with a seeded splitmix64
 *      generator (deterministic for a given seed and call sequence).
 * A token that is -INFINITY after steps 1-2 is never returned. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kipp.h"

/* The largest k select_best finds through a heap (see there). */
#define SELECT_HEAP_MAX 128

typedef struct candidate {
    int32_t id;
    float value; /* logit, then probability */
} candidate;

struct kipp_sampler {
    kipp_sampling params;
    kipp_logit_bias *bias;  /* owned copy of params.logit_bias */
    int32_t window[KIPP_PENALTY_WINDOW]; /* ring of accepted tokens */
    uint32_t n_window;      /* tokens in the ring (<= 64) */
    uint32_t next;          /* ring write position */
    uint64_t rng;           /* splitmix64 state */
    candidate *cand;        /* [KIPP_VOCAB_SIZE] scratch, made once */
    candidate *heap;        /* [SELECT_HEAP_MAX] scratch of select_best */
};

kipp_sampling kipp_sampling_default(void) {
    return (kipp_sampling){
        .temperature = 0.0f,
        .top_k = 0,
        .top_p = 1.0f,
        .min_p = 0.0f,
        .repetition_penalty = 1.0f,
        .frequency_penalty = 0.0f,
        .presence_penalty = 0.0f,
        .logit_bias = NULL,
        .n_logit_bias = 0,
        .seed = 0,
    };
}

int kipp_sampler_create(const kipp_sampling *p, kipp_sampler **out, kipp_error *err) {
    if (!p || !out) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_sampler_create: NULL argument");
    *out = NULL;
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return kipp_fail(err, KIPP_E_ARGUMENT, "temperature must be finite and >= 0");
    if (p->top_k < 0) return kipp_fail(err, KIPP_E_ARGUMENT, "top_k must be >= 0 (0 = off)");
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return kipp_fail(err, KIPP_E_ARGUMENT, "top_p must be in (0, 1] (1 = off)");
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return kipp_fail(err, KIPP_E_ARGUMENT, "min_p must be in [0, 1] (0 = off)");
    if (!(p->repetition_penalty > 0.0f) || isinf(p->repetition_penalty))
        return kipp_fail(err, KIPP_E_ARGUMENT, "repetition_penalty must be finite and > 0 (1 = off)");
    if (!isfinite(p->frequency_penalty) || !isfinite(p->presence_penalty))
        return kipp_fail(err, KIPP_E_ARGUMENT, "frequency/presence penalties must be finite");
    if (p->n_logit_bias && !p->logit_bias)
        return kipp_fail(err, KIPP_E_ARGUMENT, "logit_bias: NULL array");
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        const kipp_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= KIPP_VOCAB_SIZE)
            return kipp_fail(err, KIPP_E_ARGUMENT, "logit_bias: token %d out of range", b->token);
        if (isnan(b->bias) || b->bias == INFINITY)
            return kipp_fail(err, KIPP_E_ARGUMENT,
                             "logit_bias for token %d must be finite or -inf", b->token);
    }
    kipp_sampler *s = kipp_calloc(1, sizeof *s, err);
    if (!s) return KIPP_E_MEMORY;
    s->cand = kipp_calloc(KIPP_VOCAB_SIZE, sizeof *s->cand, err);
    s->heap = kipp_calloc(SELECT_HEAP_MAX, sizeof *s->heap, err);
    if (p->n_logit_bias) s->bias = kipp_calloc(p->n_logit_bias, sizeof *s->bias, err);
    if (!s->cand || !s->heap || (p->n_logit_bias && !s->bias)) {
        kipp_sampler_destroy(s);
        return KIPP_E_MEMORY;
    }
    s->params = *p;
    if (p->n_logit_bias) memcpy(s->bias, p->logit_bias, p->n_logit_bias * sizeof *s->bias);
    s->params.logit_bias = s->bias;
    s->rng = p->seed;
    *out = s;
    return KIPP_OK;
}

void kipp_sampler_destroy(kipp_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->heap);
    free(s->bias);
    free(s);
}

void kipp_sampler_accept(kipp_sampler *s, int32_t token) {
    if (!s) return;
    s->window[s->next] = token;
    s->next = (s->next + 1) % KIPP_PENALTY_WINDOW;
    if (s->n_window < KIPP_PENALTY_WINDOW) s->n_window++;
}

/* splitmix64: tiny, well-mixed, and identical on every machine. */
static uint64_t next_u64(kipp_sampler *s) {
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform double in [0, 1) with 53 random bits. */
static double next_uniform(kipp_sampler *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

static void apply_penalties(const kipp_sampler *s, float *logits) {
    const kipp_sampling *p = &s->params;
    if (p->repetition_penalty == 1.0f && p->frequency_penalty == 0.0f &&
        p->presence_penalty == 0.0f)
        return;
    for (uint32_t i = 0; i < s->n_window; i++) {
        int32_t t = s->window[i];
        if (t < 0 || t >= KIPP_VOCAB_SIZE) continue;
        /* Count t in the window; apply only at its first occurrence. */
        bool first = true;
        uint32_t count = 0;
        for (uint32_t j = 0; j < s->n_window; j++) {
            if (s->window[j] != t) continue;
            if (j < i) first = false;
            count++;
        }
        if (!first) continue;
        float l = logits[t];
        if (p->repetition_penalty != 1.0f)
            l = l > 0.0f ? l / p->repetition_penalty : l * p->repetition_penalty;
        l -= (float)count * p->frequency_penalty + p->presence_penalty;
        logits[t] = l;
    }
}

/* Whether a comes before b: the higher value, or on a tie the lower id --
 * a total order (ids differ), so results never depend on the sort or
 * selection algorithm. */
static inline bool better(candidate a, candidate b) {
    return a.value > b.value || (a.value == b.value && a.id < b.id);
}

/* better as a qsort comparison: highest first. */
static int by_value_desc(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    return better(*x, *y) ? -1 : better(*y, *x) ? 1 : 0;
}

/* Sifts h[i] down the heap h[0..k), whose every node is no better than
 * its children, so h[0] is the worst of the k kept. */
static void heap_sift_down(candidate *h, size_t k, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, w = i;
        if (l < k && better(h[w], h[l])) w = l;
        if (l + 1 < k && better(h[w], h[l + 1])) w = l + 1;
        if (w == i) return;
        candidate t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* Rearranges c[0..n) so that c[0..k) holds the k best candidates (in
 * by_value_desc order, which is total because ids differ), unordered.
 * For k up to SELECT_HEAP_MAX (top-k's usual 20-100, top-p's first round
 * of 64), one pass keeps the k best seen in a heap -- nearly every
 * candidate stops at one comparison with the worst kept, a branch the
 * processor predicts -- and a second moves the k that are no worse than
 * the k-th to the front. Otherwise quickselect with a middle pivot,
 * expected O(n), but its comparisons go either way at random on logits in
 * no order: a whole top-k 40 sample over 151,936 synthetic logits took
 * 0.74-1.98 ms with it, 0.35-0.47 with the heap (docs/BENCHMARKS.md "Stop
 * 70"; past a few hundred the heap's sifts cost more). The k best are the
 * same set either way, and every caller sorts them or draws over all n,
 * so the results are too. */
static void select_best(candidate *c, size_t n, size_t k, candidate *heap) {
    if (k == 0 || k >= n) return;
    if (k <= SELECT_HEAP_MAX) {
        memcpy(heap, c, k * sizeof *heap);
        for (size_t i = k / 2; i-- > 0;) heap_sift_down(heap, k, i);
        float worst = heap[0].value; /* most candidates stop at this one test */
        for (size_t i = k; i < n; i++) {
            if (c[i].value < worst || !better(c[i], heap[0])) continue;
            heap[0] = c[i];
            heap_sift_down(heap, k, 0);
            worst = heap[0].value;
        }
        const candidate kth = heap[0];
        size_t front = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].value >= kth.value && !better(kth, c[i])) { /* the k-th or better */
                candidate t = c[i];
                c[i] = c[front];
                c[front++] = t;
            }
        return;
    }
    size_t lo = 0, hi = n; /* the k-th boundary lies in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        candidate pivot = c[mid];
        c[mid] = c[hi - 1];
        c[hi - 1] = pivot;
        size_t store = lo;
        for (size_t i = lo; i + 1 < hi; i++) {
            if (by_value_desc(&c[i], &pivot) < 0) {
                candidate t = c[i];
                c[i] = c[store];
                c[store] = t;
                store++;
            }
        }
        c[hi - 1] = c[store];
        c[store] = pivot; /* pivot now at its final rank `store` */
        if (store == k || store + 1 == k) return;
        if (store > k) hi = store;
        else lo = store + 1;
    }
}

/* Steps 1-8: leaves the surviving candidates in s->cand[0..*n) with their
 * (not yet renormalised) probabilities. Returns the greedy pick when the
 * temperature is 0 (and sets *n = 0), -1 when every token is banned, else 0.
 * Both kipp_sampler_sample and kipp_sampler_probs run exactly this code, so
 * speculative verification sees the distribution plain sampling draws from. */
static int32_t filter(kipp_sampler *s, float *logits, size_t *n_out) {
    const kipp_sampling *p = &s->params;
    *n_out = 0;

    /* 1-2. penalties, then bias. */
    apply_penalties(s, logits);
    for (size_t i = 0; i < p->n_logit_bias; i++) logits[s->bias[i].token] += s->bias[i].bias;

    /* 3. greedy. NaN and -inf never win; the lowest id wins a tie. */
    if (p->temperature == 0.0f) return kipp_argmax_above(logits, KIPP_VOCAB_SIZE, -INFINITY);

    /* 4. temperature; candidates are the tokens still allowed. */
    size_t n = 0;
    for (int32_t i = 0; i < KIPP_VOCAB_SIZE; i++)
        if (logits[i] > -INFINITY) s->cand[n++] = (candidate){i, logits[i] / p->temperature};
    if (n == 0) return -1;

    /* 5. top-k: the k best, found by selection (O(n)), then sorted. */
    size_t sorted = 0; /* s->cand[0..sorted) is in by_value_desc order */
    if (p->top_k > 0 && (size_t)p->top_k < n) {
        select_best(s->cand, n, (size_t)p->top_k, s->heap);
        n = sorted = (size_t)p->top_k;
        qsort(s->cand, n, sizeof *s->cand, by_value_desc);
    }

    /* 6. softmax over the survivors (max-subtracted, summed in double). */
    float max = s->cand[0].value;
    for (size_t i = 1; i < n; i++)
        if (s->cand[i].value > max) max = s->cand[i].value;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        s->cand[i].value = expf(s->cand[i].value - max);
        sum += s->cand[i].value;
    }
    for (size_t i = 0; i < n; i++) s->cand[i].value = (float)(s->cand[i].value / sum);

    /* 7. top-p: the shortest highest-first prefix whose probability reaches
     * p. Only that prefix needs to be in order: select and sort the best m
     * (m = 64, 256, ...) until their sum reaches p, which is exact and
     * avoids sorting 151,936 values in the usual case. */
    if (p->top_p < 1.0f) {
        size_t m = 64;
        for (;;) {
            if (m >= n) m = n;
            if (sorted < m) {
                if (m < n) select_best(s->cand, n, m, s->heap);
                qsort(s->cand, m, sizeof *s->cand, by_value_desc);
                sorted = m;
            }
            double cum = 0.0;
            size_t keep = 0;
            while (keep < m && cum < p->top_p) cum += s->cand[keep++].value;
            if (cum >= p->top_p || m == n) {
                n = keep;
                break;
            }
            m *= 4;
        }
    }

    /* 8. min-p relative to the most probable survivor. */
    if (p->min_p > 0.0f) {
        float top = 0.0f;
        for (size_t i = 0; i < n; i++)
            if (s->cand[i].value > top) top = s->cand[i].value;
        float threshold = p->min_p * top;
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            if (s->cand[i].value >= threshold) s->cand[kept++] = s->cand[i];
        n = kept;
    }

    *n_out = n;
    return 0;
}

bool kipp_logits_have_nan(const float *logits) {
    if (!logits) return false;
    for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++)
        if (logits[i] != logits[i]) return true;
    return false;
}

int32_t kipp_sampler_sample(kipp_sampler *s, float *logits) {
    if (!s || !logits) return -1;
    size_t n;
    int32_t pick = filter(s, logits, &n);
    if (s->params.temperature == 0.0f || pick < 0) return pick;

    /* 9. draw from the renormalised survivors. */
    double total = 0.0;
    for (size_t i = 0; i < n; i++) total += s->cand[i].value;
    double u = next_uniform(s) * total;
    double cum = 0.0;
    for (size_t i = 0; i < n; i++) {
        cum += s->cand[i].value;
        if (u < cum) return s->cand[i].id;
    }
    return s->cand[n - 1].id; /* rounding left u at the very end */
}

int32_t kipp_sampler_probs(kipp_sampler *s, float *logits, float *probs) {
    if (!s || !logits || !probs) return -1;
    size_t n;
    int32_t pick = filter(s, logits, &n);
    memset(probs, 0, sizeof(float) * KIPP_VOCAB_SIZE);
    if (pick < 0) return -1;
    if (s->params.temperature == 0.0f) {
        probs[pick] = 1.0f;
        return pick;
    }
    double total = 0.0;
    int32_t best = s->cand[0].id;
    float best_p = s->cand[0].value;
    for (size_t i = 0; i < n; i++) {
        total += s->cand[i].value;
        if (s->cand[i].value > best_p ||
            (s->cand[i].value == best_p && s->cand[i].id < best)) {
            best = s->cand[i].id;
            best_p = s->cand[i].value;
        }
    }
    for (size_t i = 0; i < n; i++) probs[s->cand[i].id] = (float)(s->cand[i].value / total);
    return best;
}

double kipp_sampler_uniform(kipp_sampler *s) { return s ? next_uniform(s) : 0.0; }

int32_t kipp_sampler_draw(kipp_sampler *s, const float *weights) {
    if (!s || !weights) return -1;
    double total = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < KIPP_VOCAB_SIZE; i++)
        if (weights[i] > 0.0f) {
            total += weights[i];
            last = i;
        }
    if (last < 0) return -1;
    double u = next_uniform(s) * total;
    double cum = 0.0;
    for (int32_t i = 0; i < last; i++) {
        if (!(weights[i] > 0.0f)) continue;
        cum += weights[i];
        if (u < cum) return i;
    }
    return last; /* the last positive weight, also when rounding left u at the end */
}
