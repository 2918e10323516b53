/* The shared-prefix KV pool (DESIGN §6, issue 10), bitwise on the cpu
 * backend and, where cheap, on the ref oracle:
 *  - a prompt served from adopted blocks gives the same logits (and the same
 *    greedy continuation) as the prompt served cold;
 *  - identity table == scrambled table == adopted (shared) blocks;
 *  - truncation into the private tail, and into a shared block (private
 *    copy; the published block is untouched);
 *  - LRU eviction under pressure evicts leaves before their parents;
 *  - a forced hash collision (every key equal) never aliases;
 *  - exhaustion fails with KIPP_E_POOL_EXHAUSTED and changes no session;
 *  - partial last blocks (tails): published in place, copied by their
 *    publisher before it appends, adopted by copy up to the divergence.
 * Needs the synthetic-tiny fixture (make fixtures); exits 77 without it. */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

#include "test_util.h"

#include "core/model_internal.h"
#include "core/session_internal.h"

#define V KIPP_VOCAB_SIZE
enum { P = 100, DECODE = 5 }; /* 3 full blocks + 4 */

static char path[512];

static kipp_model *open_model(kipp_backend_kind b, uint32_t pool_mib) {
    kipp_model_options o = {.backend = b, .threads = 2, .kv_pool_mib = pool_mib};
    kipp_model *m = NULL;
    kipp_error err = {0};
    CHECKF(kipp_model_open(path, &o, &m, &err) == 0, "%s", err.message);
    return m;
}

static kipp_session *new_session(kipp_model *m, uint32_t capacity) {
    kipp_session_options o = {.capacity = capacity};
    kipp_session *s = NULL;
    kipp_error err = {0};
    CHECKF(kipp_session_create(m, &o, &s, &err) == 0, "%s", err.message);
    return s;
}

static void make_tokens(int32_t *t, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) t[i] = (int32_t)((i * 104729u + seed * 7919u + 11u) % 50000);
}

static size_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int eval(kipp_model *m, kipp_session *s, const int32_t *t, uint32_t n, uint32_t n_logits,
                float *logits) {
    kipp_error err = {0};
    kipp_eval_item it = {s, t, n, n_logits, logits};
    int rc = kipp_eval(m, &it, 1, &err);
    if (rc && rc != KIPP_E_POOL_EXHAUSTED) fprintf(stderr, "eval: %s\n", err.message);
    return rc;
}

/* Evaluates tokens[from..n) (the last row's logits to out) then DECODE
 * greedy steps, each step's logits appended to out. */
static void finish(kipp_model *m, kipp_session *s, const int32_t *tokens, uint32_t from,
                   uint32_t n, float *out) {
    CHECK(eval(m, s, tokens + from, n - from, 1, out) == 0);
    for (int i = 0; i < DECODE; i++) {
        int32_t next = (int32_t)argmax(out + (size_t)i * V, V);
        CHECK(eval(m, s, &next, 1, 1, out + (size_t)(i + 1) * V) == 0);
    }
}

static bool same(const float *a, const float *b, size_t rows) {
    return memcmp(a, b, rows * V * sizeof(float)) == 0;
}

static kipp_pool_stats stats(kipp_model *m) {
    kipp_pool_stats st;
    kipp_error err = {0};
    CHECK(kipp_pool_stats_get(m, KIPP_KV_BF16, &st, &err) == 0);
    return st;
}

/* Adopted == cold == scrambled, and truncation, on one backend. */
static void check_reuse(kipp_backend_kind backend, const char *label) {
    fprintf(stderr, "== reuse, %s\n", label);
    kipp_model *m = open_model(backend, 0);
    if (!m) return;
    int32_t tok[P], alt[P];
    make_tokens(tok, P, 1);
    make_tokens(alt, P, 2);
    size_t rows = DECODE + 1;
    float *cold = malloc(rows * V * sizeof(float)), *warm = malloc(rows * V * sizeof(float));
    float *scr = malloc(rows * V * sizeof(float));
    kipp_error err = {0};

    /* Cold: identity table on a fresh pool. Then publish. */
    kipp_session *a = new_session(m, 256);
    finish(m, a, tok, 0, P, cold);
    CHECK(kipp_session_publish(a, &err) == 0);
    kipp_pool_stats st = stats(m);
    /* 3 full blocks and the partial 4th (4 prompt + 5 decoded positions). */
    CHECKF(st.published_blocks == 4, "published %llu", (unsigned long long)st.published_blocks);
    CHECK(kipp_pool_match_length(m, KIPP_KV_BF16, tok, P) == 100);
    CHECK(kipp_pool_match_length(m, KIPP_KV_BF16, alt, P) == 0);

    /* Warm: adopt 3 blocks and copy 3 positions of the tail (all of
     * tok[0..99)), evaluate the last token. */
    kipp_session *b = new_session(m, 256);
    uint32_t got = 0;
    CHECK(kipp_session_match_prefix(b, tok, P - 1, &got, &err) == 0);
    CHECKF(got == 99, "adopted %u", got);
    CHECK(kipp_session_length(b) == 99);
    CHECK(b->kv.block_table[0] == a->kv.block_table[0]); /* really shared */
    CHECK(b->kv.block_table[3] != a->kv.block_table[3]); /* the tail is a private copy */
    finish(m, b, tok, got, P, warm);
    CHECK(same(cold, warm, rows));
    /* Adoption stays within the capacity: 40 positions hold one full block
     * and 8 positions copied from the second. */
    kipp_session *small = new_session(m, 40);
    CHECK(kipp_session_match_prefix(small, tok, P - 1, &got, &err) == 0 && got == 40);
    kipp_session_destroy(small);
    /* Adoption needs an empty session. */
    CHECK(kipp_session_match_prefix(b, tok, P, &got, &err) == KIPP_E_ARGUMENT);

    /* Scrambled table (free blocks in a shuffled order), no sharing. */
    kipp_session *c = new_session(m, 256);
    uint32_t perm[4] = {40, 33, 38, 35};
    CHECKF(kipp_session_set_block_table(c, perm, 4, &err) == 0, "%s", err.message);
    finish(m, c, tok, 0, P, scr);
    CHECK(same(cold, scr, rows));

    /* Truncate into b's private tail (block 3), then continue with other
     * tokens: equals a fresh evaluation of the spliced sequence. */
    int32_t seq[P + 20];
    memcpy(seq, tok, 98 * sizeof *seq);
    memcpy(seq + 98, alt, 20 * sizeof *seq);
    CHECK(kipp_session_truncate(b, 98, &err) == 0);
    float *x = malloc(rows * V * sizeof(float)), *y = malloc(rows * V * sizeof(float));
    finish(m, b, seq, 98, 118, x);
    kipp_session *f = new_session(m, 256);
    finish(m, f, seq, 0, 118, y);
    CHECK(same(x, y, rows));

    /* Truncate into a shared block (position 40 is inside adopted block 1):
     * b continues in a private copy; the published chain is untouched. */
    uint32_t shared1 = b->kv.block_table[1];
    CHECK(kipp_session_truncate(b, 40, &err) == 0);
    CHECK(b->kv.block_table[1] != shared1 && b->kv.n_blocks == 2);
    memcpy(seq, tok, 40 * sizeof *seq);
    memcpy(seq + 40, alt, 30 * sizeof *seq);
    finish(m, b, seq, 40, 70, x);
    kipp_session_reset(f);
    finish(m, f, seq, 0, 70, y);
    CHECK(same(x, y, rows));
    kipp_session *d = new_session(m, 256); /* the original prefix still adopts, same logits */
    CHECK(kipp_session_match_prefix(d, tok, P - 1, &got, &err) == 0 && got == 99);
    finish(m, d, tok, got, P, warm);
    CHECK(same(cold, warm, rows));

    /* Publishing a prefix that is already published shares the existing
     * blocks (dedupe) instead of publishing a second copy. */
    kipp_session_reset(f);
    CHECK(eval(m, f, tok, 64, 0, NULL) == 0);
    uint64_t before = stats(m).published_blocks;
    CHECK(kipp_session_publish(f, &err) == 0);
    CHECK(stats(m).published_blocks == before);
    CHECK(f->kv.block_table[0] == a->kv.block_table[0] && f->kv.block_table[1] == a->kv.block_table[1]);

    kipp_session_destroy(a);
    kipp_session_destroy(b);
    kipp_session_destroy(c);
    kipp_session_destroy(d);
    kipp_session_destroy(f);
    st = stats(m);
    CHECKF(st.blocks_held == 0 && st.blocks_free == st.blocks_total, "held %u free %u of %u",
           st.blocks_held, st.blocks_free, st.blocks_total);
    CHECK(st.blocks_cached == 4);
    free(cold);
    free(warm);
    free(scr);
    free(x);
    free(y);
    kipp_model_close(m);
}

/* A pool of 8 blocks: eviction order, exhaustion, forced collisions. */
static void check_pressure(void) {
    fprintf(stderr, "== pressure (8-block pool), cpu\n");
    /* synthetic-tiny: 2 layers * 4096 B * 32 positions = 256 KiB a block. */
    kipp_model *m = open_model(KIPP_BACKEND_CPU, 2);
    if (!m) return;
    CHECK(stats(m).blocks_total == 8);
    int32_t tok[160], alt[160];
    make_tokens(tok, 160, 3);
    make_tokens(alt, 160, 4);
    size_t rows = DECODE + 1;
    float *cold = malloc(rows * V * sizeof(float)), *warm = malloc(rows * V * sizeof(float));
    kipp_error err = {0};
    uint32_t got = 0;

    /* A chain of 4 published blocks, then its session goes away. */
    kipp_session *a = new_session(m, 256);
    CHECK(eval(m, a, tok, 128, 0, NULL) == 0);
    CHECK(kipp_session_publish(a, &err) == 0);
    kipp_session_destroy(a);
    CHECK(stats(m).blocks_cached == 4 && stats(m).blocks_free == 8);

    /* 6 blocks for other tokens: 4 free + 2 evicted, the chain's leaves. */
    kipp_session *b = new_session(m, 256);
    CHECK(eval(m, b, alt, 160, 0, NULL) == 0);
    kipp_session *c = new_session(m, 256);
    CHECK(eval(m, c, alt, 32, 0, NULL) == 0);
    kipp_pool_stats st = stats(m);
    CHECKF(st.evicted_blocks == 2 && st.blocks_cached == 2 && st.blocks_held == 6,
           "evicted %llu cached %u held %u", (unsigned long long)st.evicted_blocks,
           st.blocks_cached, st.blocks_held);
    CHECK(kipp_pool_match_length(m, KIPP_KV_BF16, tok, 160) == 64); /* root survives */

    /* Exhaustion: 3 more blocks wanted, 2 available: error, nothing changes,
     * no cached block evicted for nothing. A batch of two items fails as a
     * whole. */
    kipp_session *d = new_session(m, 256);
    CHECK(eval(m, d, tok, 96, 0, NULL) == KIPP_E_POOL_EXHAUSTED);
    CHECK(kipp_session_length(d) == 0 && d->kv.n_blocks == 0);
    kipp_eval_item two[2] = {{c, alt + 32, 32, 0, NULL}, {d, tok, 64, 0, NULL}};
    CHECK(kipp_eval(m, two, 2, &err) == KIPP_E_POOL_EXHAUSTED);
    CHECK(kipp_session_length(c) == 32 && c->kv.n_blocks == 1 && d->kv.n_blocks == 0);
    st = stats(m);
    CHECK(st.evicted_blocks == 2 && st.blocks_held == 6 && st.blocks_cached == 2);
    /* The held sessions are intact: b continues exactly like a cold run. */
    float *x = malloc(rows * V * sizeof(float));
    kipp_session_destroy(c);
    kipp_session_destroy(d);
    int32_t next = 17;
    CHECK(eval(m, b, &next, 1, 1, x) == 0);
    kipp_session_destroy(b);
    kipp_session *e = new_session(m, 256);
    CHECK(eval(m, e, alt, 160, 0, NULL) == 0);
    CHECK(eval(m, e, &next, 1, 1, warm) == 0);
    CHECK(same(x, warm, 1));
    kipp_session_destroy(e);

    /* Forced collisions: every key is 0, so every published block sits in
     * one hash chain; lookups still tell prefixes apart by their ids. */
    m->pools[KIPP_KV_BF16]->hash_mask = 0;
    kipp_session *p1 = new_session(m, 256), *p2 = new_session(m, 256);
    CHECK(eval(m, p1, tok, 64, 0, NULL) == 0);
    CHECK(eval(m, p2, alt, 64, 0, NULL) == 0);
    CHECK(kipp_session_publish(p1, &err) == 0 && kipp_session_publish(p2, &err) == 0);
    int32_t mixed[64]; /* first block of tok, second of alt: matches one block only */
    memcpy(mixed, tok, 32 * sizeof *mixed);
    memcpy(mixed + 32, alt + 32, 32 * sizeof *mixed);
    CHECK(kipp_pool_match_length(m, KIPP_KV_BF16, mixed, 64) == 32);
    kipp_session_destroy(p1);
    kipp_session_destroy(p2);
    kipp_session *q = new_session(m, 256);
    CHECK(kipp_session_match_prefix(q, alt, 70, &got, &err) == 0 && got == 64);
    CHECK(eval(m, q, alt + 64, 6, 1, warm) == 0);
    kipp_session *r = new_session(m, 256); /* cold, unpublished */
    CHECK(eval(m, r, alt, 70, 1, cold) == 0);
    CHECK(same(cold, warm, 1));
    kipp_session_destroy(q);
    kipp_session_destroy(r);
    free(cold);
    free(warm);
    free(x);
    kipp_model_close(m);
}

/* Partial last blocks (tails), cpu: publishing in place, the publisher's
 * copy-before-append, adoption by copy (all of a prompt, or up to where it
 * diverges inside the tail), exhaustion during the copy, and collisions. */
static void check_tails(void) {
    fprintf(stderr, "== published tails, cpu\n");
    kipp_model *m = open_model(KIPP_BACKEND_CPU, 0);
    if (!m) return;
    int32_t tok[P], alt[P];
    make_tokens(tok, P, 6);
    make_tokens(alt, P, 7);
    size_t rows = DECODE + 1;
    float *cold = malloc(rows * V * sizeof(float)), *x = malloc(rows * V * sizeof(float));
    kipp_error err = {0};
    uint32_t got = 0;

    kipp_session *z = new_session(m, 256); /* cold reference, never published */
    finish(m, z, tok, 0, P, cold);

    /* a: the prompt, published with its 4-position tail in place. */
    kipp_session *a = new_session(m, 256);
    CHECK(eval(m, a, tok, P, 1, x) == 0);
    CHECK(same(cold, x, 1));
    uint64_t before = stats(m).published_blocks;
    CHECK(kipp_session_publish(a, &err) == 0);
    CHECK(stats(m).published_blocks == before + 4);
    uint32_t tail = a->kv.block_table[3];
    CHECK(kipp_kv_pool_is_shared(a->pool, tail));
    CHECK(kipp_session_publish(a, &err) == 0); /* again: nothing new */
    CHECK(stats(m).published_blocks == before + 4);

    /* a keeps decoding: the first append copies the tail, the published
     * block stays as it was, and the logits equal the cold run's. */
    for (int i = 0; i < DECODE; i++) {
        int32_t next = (int32_t)argmax(x + (size_t)i * V, V);
        CHECK(eval(m, a, &next, 1, 1, x + (size_t)(i + 1) * V) == 0);
    }
    CHECK(a->kv.block_table[3] != tail && !kipp_kv_pool_is_shared(a->pool, a->kv.block_table[3]));
    CHECK(same(cold, x, rows));

    /* b adopts all 100 prompt positions (3 blocks + 4 copied from the
     * tail): nothing left to evaluate before the first decode step. */
    kipp_session *b = new_session(m, 256);
    CHECK(kipp_session_match_prefix(b, tok, P, &got, &err) == 0 && got == P);
    int32_t first = (int32_t)argmax(cold, V);
    CHECK(eval(m, b, &first, 1, 1, x + V) == 0);
    CHECK(same(cold + V, x + V, 1));

    /* c diverges 2 positions into the tail: adopts 98, evaluates the rest,
     * and equals a cold run of the spliced prompt. */
    int32_t seq[P];
    memcpy(seq, tok, 98 * sizeof *seq);
    memcpy(seq + 98, alt, 2 * sizeof *seq);
    kipp_session *c = new_session(m, 256);
    CHECK(kipp_session_match_prefix(c, seq, P - 1, &got, &err) == 0 && got == 98);
    CHECK(eval(m, c, seq + got, P - got, 1, x) == 0);
    kipp_session_reset(z);
    CHECK(eval(m, z, seq, P, 1, x + V) == 0);
    CHECK(same(x, x + V, 1));

    /* A prompt that leaves a published FULL block early copies its first
     * positions too (13 of the chain's block 1). */
    kipp_session *d = new_session(m, 256);
    CHECK(kipp_session_match_prefix(d, tok, 45, &got, &err) == 0 && got == 45);
    CHECK(d->kv.block_table[0] == a->kv.block_table[0] &&
          d->kv.block_table[1] != a->kv.block_table[1]);
    CHECK(eval(m, d, tok + 45, 5, 1, x) == 0);
    kipp_session_reset(z);
    CHECK(eval(m, z, tok, 50, 1, x + V) == 0);
    CHECK(same(x, x + V, 1));

    kipp_session_destroy(a);
    kipp_session_destroy(b);
    kipp_session_destroy(c);
    kipp_session_destroy(d);
    kipp_session_destroy(z);
    CHECK(stats(m).blocks_held == 0);
    kipp_model_close(m);

    /* Exhaustion during the copy: an 8-block pool, x holds 2 blocks with
     * its tail published in place, holders take the other 6; appending to
     * x needs a block for the copy: KIPP_E_POOL_EXHAUSTED, x unchanged.
     * With a block free again the append succeeds and equals a cold run. */
    m = open_model(KIPP_BACKEND_CPU, 2);
    if (!m) goto out;
    kipp_session *xs = new_session(m, 256), *hold = new_session(m, 256);
    CHECK(eval(m, xs, tok, 40, 0, NULL) == 0 && kipp_session_publish(xs, &err) == 0);
    uint32_t xtail = xs->kv.block_table[1];
    int32_t filler[6 * 32];
    make_tokens(filler, 6 * 32, 8);
    CHECK(eval(m, hold, filler, 6 * 32, 0, NULL) == 0);
    CHECK(stats(m).blocks_free == 0);
    CHECK(eval(m, xs, tok + 40, 1, 1, x) == KIPP_E_POOL_EXHAUSTED);
    CHECK(kipp_session_length(xs) == 40 && xs->kv.n_blocks == 2 &&
          xs->kv.block_table[1] == xtail);
    CHECK(kipp_session_truncate(hold, 5 * 32, &err) == 0);
    CHECK(eval(m, xs, tok + 40, 1, 1, x) == 0);
    kipp_session_reset(hold);
    CHECK(eval(m, hold, tok, 41, 1, x + V) == 0);
    CHECK(same(x, x + V, 1));
    kipp_session_destroy(xs);
    kipp_session_destroy(hold);

    /* Forced collisions: tails of two prompts that share no ids all sit
     * in one hash chain; adoption still follows the ids. */
    m->pools[KIPP_KV_BF16]->hash_mask = 0;
    kipp_session *t1 = new_session(m, 256), *t2 = new_session(m, 256);
    CHECK(eval(m, t1, tok, 20, 0, NULL) == 0 && eval(m, t2, alt, 20, 0, NULL) == 0);
    CHECK(kipp_session_publish(t1, &err) == 0 && kipp_session_publish(t2, &err) == 0);
    CHECK(kipp_pool_match_length(m, KIPP_KV_BF16, tok, 20) == 20);
    int32_t mixed[20]; /* 10 ids of alt, then tok: matches 10 positions of t2's tail */
    memcpy(mixed, alt, 10 * sizeof *mixed);
    memcpy(mixed + 10, tok + 10, 10 * sizeof *mixed);
    CHECK(kipp_pool_match_length(m, KIPP_KV_BF16, mixed, 20) == 10);
    kipp_session_destroy(t1);
    kipp_session_destroy(t2);
    kipp_session *u = new_session(m, 256), *w = new_session(m, 256);
    CHECK(kipp_session_match_prefix(u, mixed, 19, &got, &err) == 0 && got == 10);
    CHECK(eval(m, u, mixed + 10, 10, 1, x) == 0);
    CHECK(eval(m, w, mixed, 20, 1, x + V) == 0);
    CHECK(same(x, x + V, 1));
    kipp_session_destroy(u);
    kipp_session_destroy(w);
    kipp_model_close(m);
out:
    free(cold);
    free(x);
}

/* Sessions of one model on several threads share the pool (its mutex;
 * run under TSan by make test-tsan): each thread adopts, evaluates,
 * publishes and drops sessions on an 8-block pool, retrying when it is
 * exhausted, and every result equals the single-threaded reference. */
enum { THREADS = 4, ROUNDS = 6, TLEN = 70 };
typedef struct thread_arg {
    kipp_model *m;
    const int32_t *tok;
    const float *want;
    float *row;
    int bad, exhausted;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = p;
    for (int r = 0; r < ROUNDS; r++) {
        kipp_session_options o = {.capacity = 128};
        kipp_session *s = NULL;
        kipp_error err = {0};
        if (kipp_session_create(a->m, &o, &s, &err)) {
            a->bad++;
            continue;
        }
        uint32_t got = 0;
        kipp_session_match_prefix(s, a->tok, TLEN - 1, &got, &err);
        kipp_eval_item it = {s, a->tok + got, TLEN - got, 1, a->row};
        int rc;
        while ((rc = kipp_eval(a->m, &it, 1, &err)) == KIPP_E_POOL_EXHAUSTED) {
            a->exhausted++;
            sched_yield();
        }
        a->bad += rc != 0 || memcmp(a->row, a->want, V * sizeof(float)) != 0;
        kipp_session_publish(s, &err);
        kipp_session_destroy(s);
    }
    return NULL;
}

static void check_threads(void) {
    fprintf(stderr, "== %d threads on one 8-block pool, cpu\n", THREADS);
    kipp_model *m = open_model(KIPP_BACKEND_CPU, 2);
    if (!m) return;
    int32_t tok[TLEN];
    make_tokens(tok, TLEN, 5);
    float *want = malloc((size_t)(THREADS + 1) * V * sizeof(float));
    kipp_session *s = new_session(m, 128);
    CHECK(eval(m, s, tok, TLEN, 1, want) == 0);
    kipp_session_destroy(s); /* unpublished: the threads start cold */
    pthread_t th[THREADS];
    thread_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (thread_arg){m, tok, want, want + (size_t)(i + 1) * V, 0, 0};
        pthread_create(&th[i], NULL, thread_main, &args[i]);
    }
    int bad = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        bad += args[i].bad;
    }
    CHECKF(bad == 0, "%d thread rounds differ from the reference", bad);
    kipp_pool_stats st = stats(m);
    CHECK(st.blocks_held == 0 && st.reused_blocks > 0);
    free(want);
    kipp_model_close(m);
}

int main(void) {
    snprintf(path, sizeof path, "%s/models/synthetic-tiny.gguf", test_build_dir());
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("skipped: fixture %s not found (run `make fixtures`)\n", path);
        return 77;
    }
    fclose(f);
    check_reuse(KIPP_BACKEND_CPU, "cpu");
    check_reuse(KIPP_BACKEND_REF, "ref");
    check_pressure();
    check_tails();
    check_threads();
    return test_finish("test_kv_pool");
}
