/* The cpu backend on the fixture models, for every kernel tier this
 * processor runs (each forced through kipp_model_options.cpu_isa; this
 * test walks the tiers itself whatever KIPP_CPU_ISA says):
 *
 *  Batch invariance, BITWISE (memcmp of the logits):
 *   - one-call prefill == ragged chunks == one token at a time, at every
 *     position;
 *   - 1 thread == 2 threads == 3 threads;
 *   - a session alone == the same session inside a batch with sessions of
 *     other lengths (prefill and decode);
 *   - a scrambled block table == the identity table;
 *   - truncate + resume == the original run;
 *   - logits asked for some rows only (a batch's last rows) == the same
 *     rows' logits when every row asks, and the next token after either.
 *  Against the oracle (`ref`): identical argmax and NMSE <= the model's
 *  bound (plan.nmse_bound, set from measurement; the opt-in avx512bf16
 *  tier: plan.nmse_bound_bf16 and test_tiers.h's near-tie argmax rule)
 *  at every prefill position
 *  of a ragged multi-block prompt, at every greedy decode position, after
 *  truncate/resume, with a scrambled table and batched.
 *
 * synthetic-tiny and synthetic-tiny-instruct always; synthetic-0.6b too with
 * KIPP_TEST_FULL=1 (make test-full). Tiers: test_tiers.h (every tier the
 * processor runs, capped by KIPP_CPU_ISA; the others are named skips). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/session_internal.h"
#include "kipp.h"
#include "test_tiers.h"
#include "test_util.h"

#define V KIPP_VOCAB_SIZE
/* Bounds on NMSE vs the oracle, per model: ~10x the worst row measured over
 * every gate below on every tier (2026-12-01, AMD Zen 5; tiers forced):
 *                            generic  avx2     avx512   | avx512bf16
 *   synthetic-tiny           8.2e-8   8.5e-8   6.7e-8   | 3.2e-5
 *   synthetic-tiny-instruct  6.7e-8   4.6e-7   4.6e-7   | 2.6e-5
 *   FP32-activation tiers:   -> 1e-6 (tiny), 5e-6 (tiny-instruct)
 *   avx512bf16:              -> 1e-4 (DESIGN section 7's bound; 10x would
 *                               exceed it)
 * (the instruct worst on the FP32 tiers is one row of the 13-token batch
 * companion). The BF16-residual bug (issue 9) measures 2.5e-5 and must
 * fail on the FP32 tiers; the old bound, 1e-4, let it pass. avx512bf16
 * (opt-in, never auto) rounds every matmul activation to BF16
 * (kernels_avx512bf16.c), an error of that same size by design, so it has
 * its own bound (plan .nmse_bound_bf16) and argmax rule (test_tiers.h:
 * a flip is excused only at an oracle near-tie, margin < 4x the row's rms
 * logit error, and at most 5% of a tier walk's rows): there the residual
 * bug is caught by the FP32 tiers, which this test runs on the same
 * machine first, not by this bound. Measured (2026-12-01): the
 * thread-sanitizer plan's prompt (L = 36) flips argmax on avx512bf16 at
 * two oracle near-ties (margins 0.108 and 0.159 logits at rms logit
 * errors 0.075: 1.44x and 2.12x; NMSE 2.2e-5), both excused by that rule
 * (5 of the walk's 186 rows: one of them recurs in 4 gates). The gcc and
 * clang builds' plans flip none (10 and 21 rows are near-ties).
 * synthetic-0.6b (KIPP_TEST_FULL=1) keeps 1e-4 on every tier. Measured
 * (2026-12-03, AMD Zen 5), worst rows: generic 5.6e-6, avx2 5.3e-6,
 * avx512 5.4e-6, avx2i8 5.3e-6 (avx2 there), avx512bf16 5.4e-5, amx
 * 5.3e-5; of the walk's 220 rows (the same positions recur across gates)
 * 31 are near-ties on the BF16 tiers, avx512bf16 flips at 7, amx at 11,
 * all excused; the exact tiers flip none. */
#define NMSE_TINY 1e-6
#define NMSE_TINY_INSTRUCT 5e-6
#define NMSE_DESIGN 1e-4
#define NMSE_BF16_ACT NMSE_DESIGN
static double nmse_bound; /* the current model's, for the current tier */

static uint64_t rng_state;
static int32_t rand_token(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (int32_t)(rng_state % 151000); /* ordinary tokens */
}

static char model_path[512];

static kipp_model *open_model(kipp_backend_kind kind, const char *isa, int threads) {
    kipp_model_options o = test_model_options(kind, threads, isa);
    kipp_model *m = NULL;
    kipp_error err = {0};
    if (kipp_model_open(model_path, &o, &m, &err)) {
        fprintf(stderr, "open %s (%s, %s, %d threads): %s\n", model_path, kipp_backend_name(kind),
                isa ? isa : "-", threads, err.message);
        CHECK(0);
        return NULL;
    }
    return m;
}

static kipp_session *new_session(kipp_model *m, uint32_t capacity) {
    kipp_session_options so = {.capacity = capacity};
    kipp_session *s = NULL;
    kipp_error err = {0};
    if (kipp_session_create(m, &so, &s, &err)) {
        fprintf(stderr, "session: %s\n", err.message);
        CHECK(0);
    }
    return s;
}

/* Feeds tokens[0..n) in the given chunk sizes (0-terminated list; NULL =
 * one call), writing logits for every position into out[n][V]. */
static int feed(kipp_model *m, kipp_session *s, const int32_t *tokens, uint32_t n,
                const uint32_t *chunks, float *out) {
    uint32_t done = 0, ci = 0;
    while (done < n) {
        uint32_t len = chunks && chunks[ci] ? chunks[ci++] : n - done;
        if (len > n - done) len = n - done;
        kipp_eval_item it = {s, tokens + done, len, len, out + (size_t)done * V};
        kipp_error err = {0};
        if (kipp_eval(m, &it, 1, &err)) {
            fprintf(stderr, "eval: %s\n", err.message);
            CHECK(0);
            return 1;
        }
        done += len;
    }
    return 0;
}

static size_t argmax(const float *x) {
    size_t b = 0;
    for (size_t i = 1; i < V; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static double worst_nmse, worst_nmse_bf16; /* exact tiers; avx512bf16 */
static int tier_bf16;                      /* the current tier rounds activations */
static test_argmax_tally tally;            /* the current tier walk's */

/* cpu rows vs ref rows: NMSE bound at every row, and the argmax rule of
 * test_tiers.h (identical on the exact tiers; near-ties excused on the
 * opt-in BF16-activation tier). */
static void vs_ref(const char *what, const char *isa, const float *cpu, const float *ref,
                   uint32_t rows) {
    int bad_arg = 0, bad_nmse = 0;
    long excused0 = tally.excused;
    double worst = 0;
    for (uint32_t r = 0; r < rows; r++) {
        const float *a = cpu + (size_t)r * V, *b = ref + (size_t)r * V;
        double e = test_nmse(a, b, V);
        if (e > worst) worst = e;
        bad_nmse += !(e <= nmse_bound);
        bad_arg += test_argmax_row(isa, what, r, a, b, V, tier_bf16, &tally);
    }
    double *w = tier_bf16 ? &worst_nmse_bf16 : &worst_nmse;
    if (worst > *w) *w = worst;
    fprintf(stderr, "  %-10s %-28s rows %3u  worst NMSE %.2e  argmax mismatches %d (+%ld "
                    "near-ties excused)\n",
            isa, what, rows, worst, bad_arg, tally.excused - excused0);
    CHECKF(bad_arg == 0 && bad_nmse == 0, "%s %s: %d argmax mismatches, %d rows over NMSE %g",
           isa, what, bad_arg, bad_nmse, nmse_bound);
}

static void same_bits(const char *what, const char *isa, const float *a, const float *b,
                      uint32_t rows) {
    uint32_t first_bad = rows;
    for (uint32_t r = 0; r < rows && first_bad == rows; r++)
        if (memcmp(a + (size_t)r * V, b + (size_t)r * V, V * sizeof(float)) != 0) first_bad = r;
    CHECKF(first_bad == rows, "%s %s: logits differ (first at row %u of %u)", isa, what,
           first_bad, rows);
}

static float *logits_buf(uint32_t rows) {
    float *p = malloc((size_t)rows * V * sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

typedef struct plan {
    uint32_t L;      /* prompt length (ragged, several KV blocks) */
    uint32_t decode; /* greedy decode steps compared with ref */
    uint32_t cut;    /* truncate point */
    uint32_t capacity;
    double nmse_bound;      /* vs the oracle, per row, FP32-activation tiers */
    double nmse_bound_bf16; /* the same on tiers with act_bf16 (avx512bf16) */
} plan;

static void run_model(const char *name, plan p) {
    snprintf(model_path, sizeof model_path, "%s/models/%s.gguf", test_build_dir(), name);
    FILE *f = fopen(model_path, "rb");
    if (!f) {
        fprintf(stderr, "fixture %s missing (make fixtures)\n", model_path);
        CHECK(0);
        return;
    }
    fclose(f);
    fprintf(stderr, "%s (NMSE bound %g; BF16-activation tiers %g):\n", name, p.nmse_bound,
            p.nmse_bound_bf16);
    rng_state = 0x5eed0000ull + p.L;
    uint32_t T = p.L + p.decode;
    int32_t *prompt = malloc(T * sizeof *prompt), *other1 = malloc(64 * 4), *other2 = malloc(64 * 4);
    for (uint32_t i = 0; i < p.L; i++) prompt[i] = rand_token();
    for (int i = 0; i < 64; i++) other1[i] = rand_token(), other2[i] = rand_token();

    /* The oracle: prompt, then greedy decode (tokens fixed by the oracle's
     * argmax; the cpu must agree on every one of them anyway). */
    double t0 = kipp_now_seconds();
    float *ref = logits_buf(T);
    kipp_model *rm = open_model(KIPP_BACKEND_REF, NULL, 1);
    if (!rm) return;
    kipp_session *rs = new_session(rm, p.capacity);
    feed(rm, rs, prompt, p.L, NULL, ref);
    for (uint32_t d = 0; d < p.decode; d++) {
        prompt[p.L + d] = (int32_t)argmax(ref + (size_t)(p.L + d - 1) * V);
        feed(rm, rs, prompt + p.L + d, 1, NULL, ref + (size_t)(p.L + d) * V);
    }
    /* Isolated oracle runs of the two batch companions (13 and 41 tokens). */
    float *ref_o1 = logits_buf(13), *ref_o2 = logits_buf(41);
    kipp_session *ro1 = new_session(rm, p.capacity), *ro2 = new_session(rm, p.capacity);
    feed(rm, ro1, other1, 13, NULL, ref_o1);
    feed(rm, ro2, other2, 41, NULL, ref_o2);
    kipp_session_destroy(ro1);
    kipp_session_destroy(ro2);
    kipp_session_destroy(rs);
    kipp_model_close(rm);

    fprintf(stderr, "  ref runs: %.1f s\n", kipp_now_seconds() - t0);
    float *a = logits_buf(T), *b = logits_buf(T), *o1 = logits_buf(13), *o2 = logits_buf(41);
    for (int t = 0; t < TEST_TIER_COUNT; t++) {
        /* A tier this processor lacks (or KIPP_CPU_ISA leaves out) is a
         * named skip; one it has must open. */
        const kipp_cpu_kernels *kern = test_tier_kernels(t);
        if (!kern) continue;
        const char *isa = test_tier_names[t];
        /* avx2i8 and avx512i8 quantize activations only for quantized
         * weights: on these BF16 models they are avx2 and avx512 bit for
         * bit, held to the exact bounds (their BF16 matmuls read their own
         * activation records). */
        tier_bf16 = kern->act_bf16;
        nmse_bound = tier_bf16 ? p.nmse_bound_bf16 : p.nmse_bound;
        tally = (test_argmax_tally){0};
        double tier_start = kipp_now_seconds();
        kipp_model *m2 = open_model(KIPP_BACKEND_CPU, isa, 2);
        if (!m2) continue;
        /* A: one-call prefill + greedy decode on the oracle's tokens. */
        kipp_session *s = new_session(m2, p.capacity);
        feed(m2, s, prompt, p.L, NULL, a);
        for (uint32_t d = 0; d < p.decode; d++)
            feed(m2, s, prompt + p.L + d, 1, NULL, a + (size_t)(p.L + d) * V);
        vs_ref("prefill (one call)", isa, a, ref, p.L);
        vs_ref("greedy decode", isa, a + (size_t)p.L * V, ref + (size_t)p.L * V, p.decode);

        /* Truncate and resume: the same bits, so the same closeness. */
        kipp_error err = {0};
        CHECK(kipp_session_truncate(s, p.cut, &err) == KIPP_OK);
        feed(m2, s, prompt + p.cut, T - p.cut, NULL, b + (size_t)p.cut * V);
        same_bits("truncate/resume", isa, a + (size_t)p.cut * V, b + (size_t)p.cut * V,
                  T - p.cut);
        vs_ref("after truncate/resume", isa, b + (size_t)p.cut * V, ref + (size_t)p.cut * V,
               T - p.cut);
        kipp_session_destroy(s);

        /* Ragged chunks (crossing 32-position blocks mid-chunk). */
        static const uint32_t ragged[] = {1, 5, 20, 1, 12, 4, 0}; /* crosses 32 mid-chunk */
        s = new_session(m2, p.capacity);
        feed(m2, s, prompt, T, ragged, b);
        same_bits("ragged-chunk prefill", isa, a, b, T);
        kipp_session_destroy(s);

        /* Scrambled block table. */
        s = new_session(m2, p.capacity);
        uint32_t nb = kipp_session_block_count(s);
        uint32_t *table = malloc(nb * sizeof *table);
        for (uint32_t i = 0; i < nb; i++) table[i] = (i * 7 + 3) % nb; /* nb coprime to 7 */
        if (nb % 7 == 0)
            for (uint32_t i = 0; i < nb; i++) table[i] = nb - 1 - i;
        CHECK(kipp_session_set_block_table(s, table, nb, &err) == KIPP_OK);
        free(table);
        feed(m2, s, prompt, T, NULL, b);
        same_bits("scrambled block table", isa, a, b, T);
        vs_ref("scrambled block table", isa, b, ref, T);
        kipp_session_destroy(s);

        /* Batched: the session beside two others of other lengths, all in
         * one eval call; first the prompts, then several decode steps. */
        kipp_session *s0 = new_session(m2, p.capacity), *s1 = new_session(m2, p.capacity),
                     *s2 = new_session(m2, p.capacity);
        kipp_eval_item items[3] = {
            {s1, other1, 13, 13, o1}, {s0, prompt, p.L, p.L, b}, {s2, other2, 41, 41, o2}};
        CHECK(kipp_eval(m2, items, 3, &err) == KIPP_OK);
        for (uint32_t d = 0; d < p.decode; d++) {
            int32_t t1 = other1[(d + 20) % 64], t2 = other2[(d + 50) % 64];
            static float d1[V], d2[V];
            kipp_eval_item step[3] = {{s2, &t2, 1, 1, d2},
                                      {s0, prompt + p.L + d, 1, 1, b + (size_t)(p.L + d) * V},
                                      {s1, &t1, 1, 1, d1}};
            CHECK(kipp_eval(m2, step, 3, &err) == KIPP_OK);
        }
        same_bits("batched with other sessions", isa, a, b, T);
        vs_ref("batched (session)", isa, b, ref, T);
        vs_ref("batched (companion 13)", isa, o1, ref_o1, 13);
        vs_ref("batched (companion 41)", isa, o2, ref_o2, 41);
        kipp_session_destroy(s0);
        kipp_session_destroy(s1);
        kipp_session_destroy(s2);
        kipp_model_close(m2);

        /* Thread counts 1 and 3 (oversubscribed on two cores), fed one
         * token at a time and in one call respectively. */
        kipp_model *m1 = open_model(KIPP_BACKEND_CPU, isa, 1);
        if (m1) {
            s = new_session(m1, p.capacity);
            static const uint32_t ones[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
            if (T <= sizeof ones / sizeof ones[0]) {
                feed(m1, s, prompt, T, ones, b);
                same_bits("1 thread, one token at a time", isa, a, b, T);
            } else {
                CHECK(0);
            }
            kipp_session_destroy(s);
            kipp_model_close(m1);
        }
        kipp_model *m3 = open_model(KIPP_BACKEND_CPU, isa, 3);
        if (m3) {
            s = new_session(m3, p.capacity);
            feed(m3, s, prompt, T, NULL, b);
            same_bits("3 threads, one call", isa, a, b, T);
            kipp_session_destroy(s);
            kipp_model_close(m3);
        }
        char tl[96];
        snprintf(tl, sizeof tl, "%s %s", name, isa);
        test_argmax_tally_check(tl, &tally);
        fprintf(stderr, "  %s: %.1f s\n", isa, kipp_now_seconds() - tier_start);
    }
    free(a);
    free(b);
    free(o1);
    free(o2);
    free(ref);
    free(ref_o1);
    free(ref_o2);
    free(prompt);
    free(other1);
    free(other2);
}

/* Tier t of test_tiers.h on the current model_path, two threads; NULL
 * where the processor lacks the tier (a named skip) or the open failed. */
static kipp_model *open_tier_model(int t) {
    return test_tier_kernels(t) ? open_model(KIPP_BACKEND_CPU, test_tier_names[t], 2) : NULL;
}

/* An eval of more rows than a chunk (KIPP_CPU_CHUNK_ROWS) runs the layers
 * chunk by chunk, and a row after a chunk's end reads the K/V the earlier
 * chunk stored. The plans above stay inside one chunk, so here, on
 * synthetic-tiny and every tier: a prompt of CHUNK + 44 rows in one call
 * (cut at row CHUNK), the same prompt in two calls of 200 and the rest (no
 * cut: the second call is one chunk), and the prompt behind a 150-token
 * session in one eval (cut inside the prompt, at its row CHUNK - 150).
 * The last 48 rows' logits (the first chunk's end among them) must be the
 * same bits every way. */
static void chunk_crossing(void) {
    enum { L = KIPP_CPU_CHUNK_ROWS + 44, OTHER = 150, LOGITS = 48, FIRST = 200 };
    _Static_assert(L - LOGITS < KIPP_CPU_CHUNK_ROWS, "the logit rows include the cut");
    _Static_assert(FIRST < L - LOGITS && L - FIRST <= KIPP_CPU_CHUNK_ROWS,
                   "the two-call feed's second call is one chunk");
    snprintf(model_path, sizeof model_path, "%s/models/synthetic-tiny.gguf", test_build_dir());
    fprintf(stderr, "synthetic-tiny, %d rows across a %d-row chunk:\n", L, KIPP_CPU_CHUNK_ROWS);
    rng_state = 0xc4a11c00ull;
    int32_t *prompt = malloc(L * sizeof *prompt), *other = malloc(OTHER * sizeof *other);
    float *a = logits_buf(LOGITS), *b = logits_buf(LOGITS), *c = logits_buf(LOGITS);
    if (!prompt || !other) exit(1);
    for (int i = 0; i < L; i++) prompt[i] = rand_token();
    for (int i = 0; i < OTHER; i++) other[i] = rand_token();
    for (int t = 0; t < TEST_TIER_COUNT; t++) {
        const char *isa = test_tier_names[t];
        kipp_model *m = open_tier_model(t);
        if (!m) continue;
        kipp_error err = {0};
        kipp_session *s = new_session(m, 512), *s2 = new_session(m, 512),
                     *so = new_session(m, 512);
        kipp_eval_item one = {s, prompt, L, LOGITS, a};
        CHECK(kipp_eval(m, &one, 1, &err) == KIPP_OK);
        kipp_eval_item two[2] = {{s2, prompt, FIRST, 0, NULL},
                                 {s2, prompt + FIRST, L - FIRST, LOGITS, b}};
        CHECK(kipp_eval(m, &two[0], 1, &err) == KIPP_OK);
        CHECK(kipp_eval(m, &two[1], 1, &err) == KIPP_OK);
        kipp_session_destroy(s);
        s = new_session(m, 512);
        kipp_eval_item batch[2] = {{so, other, OTHER, 0, NULL}, {s, prompt, L, LOGITS, c}};
        CHECK(kipp_eval(m, batch, 2, &err) == KIPP_OK);
        same_bits("one call vs two calls", isa, a, b, LOGITS);
        same_bits("one call vs behind a session", isa, a, c, LOGITS);
        fprintf(stderr, "  %-10s one call, two calls, behind a session: compared\n", isa);
        kipp_session_destroy(s);
        kipp_session_destroy(s2);
        kipp_session_destroy(so);
        kipp_model_close(m);
    }
    free(prompt);
    free(other);
    free(a);
    free(b);
    free(c);
}

/* Rows that want no logits stop after the last layer's K/V store
 * (cpu_forward.c gather_logit_rows): that layer's query projection
 * (logit_queries, from copies of their packed inputs) and everything after
 * its K/V store run for the rows that want logits only, gathered to the
 * front. Here, on
 * synthetic-tiny and every tier, one eval of three sessions -- A wants its
 * last row's logits, C none, B its last three (so the gathered rows come
 * from two sessions, with C's rows between them) -- must give A's and B's
 * rows the bits of each prompt fed alone with every row's logits; then
 * one more token on each of the three must match the same token after
 * the reference feeds (bitwise), which reads every row's last-layer K/V,
 * C's included. */
static void logit_rows_only(void) {
    enum { LA = 70, LB = 45, LC = 20, NB = 3 };
    snprintf(model_path, sizeof model_path, "%s/models/synthetic-tiny.gguf", test_build_dir());
    fprintf(stderr, "synthetic-tiny, logits for some rows only:\n");
    rng_state = 0x1061751ull;
    int32_t pa[LA], pb[LB], pc[LC], next = rand_token();
    for (int i = 0; i < LA; i++) pa[i] = rand_token();
    for (int i = 0; i < LB; i++) pb[i] = rand_token();
    for (int i = 0; i < LC; i++) pc[i] = rand_token();
    const int32_t *prompts[3] = {pa, pb, pc};
    const uint32_t lens[3] = {LA, LB, LC};
    float *all[3] = {logits_buf(LA), logits_buf(LB), logits_buf(LC)};
    float *step_ref = logits_buf(3), *step = logits_buf(3), *a = logits_buf(1),
          *b = logits_buf(NB);
    for (int t = 0; t < TEST_TIER_COUNT; t++) {
        const char *isa = test_tier_names[t];
        kipp_model *m = open_tier_model(t);
        if (!m) continue;
        kipp_error err = {0};
        kipp_session *ref[3], *s[3];
        for (int i = 0; i < 3; i++) {
            ref[i] = new_session(m, 128);
            s[i] = new_session(m, 128);
            feed(m, ref[i], prompts[i], lens[i], NULL, all[i]);
        }
        kipp_eval_item batch[3] = {{s[0], pa, LA, 1, a}, {s[2], pc, LC, 0, NULL},
                                   {s[1], pb, LB, NB, b}};
        CHECK(kipp_eval(m, batch, 3, &err) == KIPP_OK);
        same_bits("A's last row alone vs every row's", isa, all[0] + (size_t)(LA - 1) * V, a, 1);
        same_bits("B's last rows alone vs every row's", isa, all[1] + (size_t)(LB - NB) * V, b,
                  NB);
        for (int i = 0; i < 3; i++) {
            kipp_eval_item r1 = {ref[i], &next, 1, 1, step_ref + (size_t)i * V};
            kipp_eval_item s1 = {s[i], &next, 1, 1, step + (size_t)i * V};
            CHECK(kipp_eval(m, &r1, 1, &err) == KIPP_OK);
            CHECK(kipp_eval(m, &s1, 1, &err) == KIPP_OK);
        }
        same_bits("the next token after A, B, C", isa, step_ref, step, 3);
        fprintf(stderr, "  %-10s logit rows of a 3-session batch and the next token: compared\n",
                isa);
        for (int i = 0; i < 3; i++) {
            kipp_session_destroy(ref[i]);
            kipp_session_destroy(s[i]);
        }
        kipp_model_close(m);
    }
    for (int i = 0; i < 3; i++) free(all[i]);
    free(step_ref);
    free(step);
    free(a);
    free(b);
}

/* Under ThreadSanitizer (5-15x slower) a smaller plan: the same gates on
 * synthetic-tiny only, still crossing a KV block boundary. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

int main(void) {
    if (UNDER_TSAN) {
        run_model("synthetic-tiny", (plan){.L = 36, .decode = 2, .cut = 20, .capacity = 64,
                                           .nmse_bound = NMSE_TINY,
                                           .nmse_bound_bf16 = NMSE_BF16_ACT});
        return test_finish("test_cpu_backend (thread-sanitizer plan)");
    }
    run_model("synthetic-tiny", (plan){.L = 45, .decode = 5, .cut = 29, .capacity = 64,
                                       .nmse_bound = NMSE_TINY,
                                           .nmse_bound_bf16 = NMSE_BF16_ACT});
    run_model("synthetic-tiny-instruct", (plan){.L = 41, .decode = 4, .cut = 33, .capacity = 96,
                                                .nmse_bound = NMSE_TINY_INSTRUCT,
                                                .nmse_bound_bf16 = NMSE_BF16_ACT});
    chunk_crossing();
    logit_rows_only();
    const char *full = getenv("KIPP_TEST_FULL");
    if (full && strcmp(full, "1") == 0)
        run_model("synthetic-0.6b", (plan){.L = 45, .decode = 4, .cut = 30, .capacity = 64,
                                           .nmse_bound = NMSE_DESIGN,
                                           .nmse_bound_bf16 = NMSE_DESIGN});
    else
        fprintf(stderr, "synthetic-0.6b gates: only with KIPP_TEST_FULL=1 (make test-full)\n");
    fprintf(stderr, "worst NMSE vs ref over all gates and models: %.2e (FP32-activation tiers), "
                    "%.2e (BF16-activation tiers)\n", worst_nmse, worst_nmse_bf16);
    return test_finish("test_cpu_backend");
}
