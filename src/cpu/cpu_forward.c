/* The `cpu` backend: the oracle's forward pass (src/ref/ref_forward.c, same
 * step names) over many rows at once, with SIMD kernels (kernels.h) and a
 * persistent thread pool (pool.h).
 *
 * Rows. An eval call's items are laid end to end: every token of every item
 * is one row (item, position, token). Rows go through the layers in chunks
 * of up to MAX_ROWS, so every weight is read once per chunk for all the
 * sessions in it (decode of N sessions = one chunk of N rows). A chunk
 * finishes all layers before the next starts, so a row's attention always
 * finds the K/V of its earlier positions in the cache, whether they came
 * from this chunk, an earlier chunk or an earlier call.
 *
 * Batch invariance (see kernels.h): each row's numbers are computed by
 * per-row code whose order is fixed by the weight shapes; threads split
 * output columns or (row, head) tasks, never a reduction. So a token's
 * logits do not depend on its chunk, its neighbours or the thread count.
 *
 * Parallel regions per layer (one fork/join each; units claimed
 * dynamically by whichever thread is running, see pool.h):
 *   1 attn_norm + pack       rows (task_units: several a unit)
 *   2 q, k, v projections    units = output-column ranges
 *   3 q/k norm, RoPE, store  (row, KV head) tasks (task_units)
 *   4 attention + pack       one unit per (KV head, run of a session's rows)
 *   5 attn_output + residual units = output-column ranges
 *   6 ffn_norm + pack        rows (task_units)
 *   7 gate, up, SiLU*up, pack units = output-column ranges
 *   8 ffn_down + residual    units = output-column ranges
 * In the last layer, the query projection and regions 4-8 run only for
 * the rows that want logits: their queries are projected from copies of
 * their packed inputs (logit_queries), and the rows are gathered to the
 * front after region 3 has stored every row's K and V
 * (gather_logit_rows); then the final norm and the output head. */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "core/common.h"
#include "core/gguf.h"
#include "cpu/kernels.h"
#include "cpu/pool.h"

#define HALF_DIM (KIPP_HEAD_DIM / 2)
#define MAX_ROWS KIPP_CPU_CHUNK_ROWS /* rows per chunk: weight reuse vs scratch size */
#define COL_GRAIN 32  /* output columns per thread share: packs stay chunk-aligned */
/* Column regions run in guided units (pool.h): long first, short last, so
 * neither a stream restart per unit nor a thread idling behind the
 * other's last long unit costs much, and a slow or descheduled thread's
 * share is picked up by the others. */
#define COL_MIN_GRAINS 1 /* the shortest guided unit, in grains (2: no better, stop 25) */
/* (row, query head) pairs per attention unit: a run of one session's rows
 * shares every K/V block it loads and widens (kernels_att.h). Their
 * queries and outputs (2 x 512 B per pair, 128 KiB here) live in L2: each
 * pair touches its own 1 KiB once per block against 512 FMAs, while the
 * block's widening (32 KiB of stores) is paid once per run. 128 against
 * the earlier 32 (whose state fitted L1): the avx512 attention kernel at
 * 2,048 positions ran ~1.1x faster (single-thread microbenchmark, Zen 5). */
#define ATT_PAIRS 128
_Static_assert(MAX_ROWS <= 256, "attention runs and logit_src index rows in bytes");
_Static_assert(ATT_PAIRS >= KIPP_CPU_MAX_GROUP, "an attention unit holds at least one row");
_Static_assert(KIPP_CPU_K_ALIGN % COL_GRAIN == 0,
               "a K-aligned hidden size is whole COL_GRAIN grains (add_grains)");

/* The steps kipp_model_profile reports, in forward-pass order. */
enum prof_step {
    PROF_EMBED, PROF_NORM, PROF_QKV, PROF_QK_ROPE_STORE, PROF_ATTENTION, PROF_ATTN_OUTPUT,
    PROF_GATE_UP, PROF_DOWN, PROF_HEAD, PROF_STEPS
};
_Static_assert(PROF_STEPS == KIPP_PROFILE_STEPS, "kipp.h names every profiled step");
static const char *const prof_names[PROF_STEPS] = {
    "embed", "norm", "qkv", "qk_rope_store", "attention", "attn_output", "gate_up", "down", "head",
};

typedef struct cpu_model {
    const kipp_checkpoint *ckpt;
    const kipp_weights *w;
    const kipp_cpu_kernels *kern;
    kipp_pool *pool;
    pthread_mutex_t lock; /* one eval at a time: the scratch below is shared */
    /* The K/V bytes of the model's pool, one store per format (kv_create);
     * rows reach them only through their session's block table. */
    kipp_kv_store kv[2];
    double rope_freq[HALF_DIM]; /* theta^(-2i/128), as the oracle */
    /* Guided units (pool.h) of the column regions, planned at load: q/k/v
     * laid end to end, hidden, ffn, vocabulary. */
    struct col_plan {
        uint32_t n;       /* units */
        uint32_t *bounds; /* unit u: columns [bounds[u], bounds[u + 1]) */
    } cols_qkv, cols_h, cols_f, cols_vocab;
    uint32_t H, A, F, group;    /* hidden, heads*128, ffn, query heads per KV head */

    /* Scratch for one chunk of rows, made once (no allocation per token). */
    float *x;      /* (rows, H) residual stream */
    float *xn;     /* (rows, H) normed input / sub-block output */
    float *q;      /* (rows, A) */
    float *k;      /* (rows, 1024) */
    float *v;      /* (rows, 1024) */
    float *attn;   /* (rows, A) */
    float *gate;   /* (rows, F) */
    float *up;     /* (rows, F) */
    float *rope;   /* (rows, 128): cos[64] then sin[64] of the row's position */
    /* (rows, act_stride) packed activations, the matmul input. Two buffers:
     * region 7 reads act[0] (normed x) while packing its output into
     * act[1] for ffn_down, so no thread overwrites what another still reads. */
    uint8_t *act[2];
    size_t act_stride;
    float *att_scratch;   /* (threads, att_scratch_n) */
    size_t att_scratch_n; /* KIPP_CPU_ATT_SCRATCH(att_rows, group) */
    /* (threads, 2 * max_blocks): one KV head's block pointers, K then V */
    const uint16_t **att_blocks;
    const kipp_block_q8_0 **att_qblocks; /* the same for a Q8_0 cache */
    uint32_t max_blocks; /* 32-position blocks in the checkpoint's context */
    uint32_t att_rows;   /* rows per attention unit: ATT_PAIRS / group */
    /* Row pointer arrays for the matmul outputs. */
    float **q_rows, **k_rows, **v_rows, **xn_rows, **gate_rows, **up_rows, **logit_rows;

    /* The current chunk. */
    uint32_t n_rows;
    kipp_kv_cache *row_kv[MAX_ROWS];
    uint32_t row_pos[MAX_ROWS];
    int32_t row_token[MAX_ROWS];
    /* Attention units: runs of consecutive rows of one session at
     * consecutive positions, at most att_rows long. */
    uint32_t n_att_runs;
    uint8_t att_run_first[MAX_ROWS], att_run_len[MAX_ROWS];
    /* The last layer's rows that want logits: row i of them is chunk row
     * logit_src[i] (logit_sources). */
    uint8_t logit_src[MAX_ROWS];
    uint32_t layer;

    /* kipp_model_options.profile: each step's calls, wall time and FLOPs
     * since open (written by the evaluating thread, under lock). */
    bool profile;
    struct {
        uint64_t calls;
        double seconds, flops;
    } prof[PROF_STEPS];
} cpu_model;

/* ---- creation --------------------------------------------------------- */

/* Per-type dispatch (matmul_cols): BF16 and the ggml block types of the
 * quantized schemes (only projections are ever quantized; the embedding and
 * output head stay BF16, which the loader enforces); norms are F32. */
static bool cpu_type_ok(uint32_t type, bool vector) {
    return vector ? type == GGML_TYPE_F32
                  : type == GGML_TYPE_BF16 || type == GGML_TYPE_Q8_0 ||
                        type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1;
}

static void cpu_model_destroy(void *state) {
    cpu_model *m = state;
    if (!m) return;
    kipp_pool_destroy(m->pool);
    pthread_mutex_destroy(&m->lock);
    kipp_kv_store_destroy(&m->kv[0]);
    kipp_kv_store_destroy(&m->kv[1]);
    free(m->x);
    free(m->xn);
    free(m->q);
    free(m->k);
    free(m->v);
    free(m->attn);
    free(m->gate);
    free(m->up);
    free(m->rope);
    free(m->act[0]);
    free(m->act[1]);
    free(m->att_scratch);
    free(m->att_blocks);
    free(m->att_qblocks);
    free(m->q_rows);
    free(m->k_rows);
    free(m->v_rows);
    free(m->xn_rows);
    free(m->gate_rows);
    free(m->up_rows);
    free(m->logit_rows);
    free(m->cols_qkv.bounds);
    free(m->cols_h.bounds);
    free(m->cols_f.bounds);
    free(m->cols_vocab.bounds);
    free(m);
}

static float *alloc_rows(size_t width, kipp_error *err) {
    return kipp_calloc_huge((size_t)MAX_ROWS * width, sizeof(float), err);
}

static float **row_pointers(float *base, size_t width, kipp_error *err) {
    float **p = kipp_calloc(MAX_ROWS, sizeof *p, err);
    if (p && base)
        for (size_t r = 0; r < MAX_ROWS; r++) p[r] = base + r * width;
    return p;
}

static int plan_columns(struct col_plan *plan, uint32_t columns, int threads, kipp_error *err) {
    plan->bounds = kipp_calloc(KIPP_POOL_GUIDED_MAX(columns, COL_GRAIN), sizeof *plan->bounds, err);
    if (!plan->bounds) return KIPP_E_MEMORY;
    plan->n = kipp_pool_guided_plan(columns, COL_GRAIN, COL_MIN_GRAINS, threads, plan->bounds);
    return KIPP_OK;
}

static int cpu_model_create(const kipp_artifact *a, const kipp_model_options *options,
                            void **out, kipp_error *err) {
    const kipp_checkpoint *c = a->checkpoint;
    const kipp_weights *w = &a->weights;
    int rc = kipp_weights_check(c, w, "cpu", cpu_type_ok, KIPP_CPU_K_ALIGN, err);
    if (rc) return rc;
    char why[160] = "";
    kipp_cpu_isa isa = options ? options->cpu_isa : KIPP_CPU_ISA_AUTO;
    kipp_cpu_decode_prefetch pf = options ? options->cpu_decode_prefetch
                                          : KIPP_CPU_DECODE_PREFETCH_AUTO;
    const kipp_cpu_kernels *kern = kipp_cpu_select_kernels(isa, pf, why, sizeof why);
    if (!kern) return kipp_fail(err, KIPP_E_BACKEND, "cpu backend: %s", why);

    int threads = kipp_resolve_threads(options ? options->threads : 0);
    cpu_model *m = kipp_calloc(1, sizeof *m, err);
    if (!m) return KIPP_E_MEMORY;
    pthread_mutex_init(&m->lock, NULL);
    m->ckpt = c;
    m->w = w;
    m->kern = kern;
    m->profile = options && options->profile;
    m->H = c->hidden;
    m->A = c->heads * KIPP_HEAD_DIM;
    m->F = c->ffn;
    m->group = c->heads / KIPP_KV_HEADS;
    if (m->group > KIPP_CPU_MAX_GROUP) {
        uint32_t g = m->group;
        free(m);
        return kipp_fail(err, KIPP_E_BACKEND,
                         "cpu backend: %u query heads per KV head, at most %d supported", g,
                         KIPP_CPU_MAX_GROUP);
    }
    m->att_rows = ATT_PAIRS / m->group;
    m->max_blocks = (c->context + KIPP_CPU_ATT_BLOCK - 1) / KIPP_CPU_ATT_BLOCK;
    for (int i = 0; i < HALF_DIM; i++)
        m->rope_freq[i] = pow(c->rope_theta, -2.0 * i / (double)KIPP_HEAD_DIM);

    uint32_t widest = m->H > m->A ? m->H : m->A;
    if (m->F > widest) widest = m->F;
    m->act_stride = kern->act_bytes(widest);
    m->x = alloc_rows(m->H, err);
    m->xn = alloc_rows(m->H, err);
    m->q = alloc_rows(m->A, err);
    m->k = alloc_rows(KIPP_KV_ROW, err);
    m->v = alloc_rows(KIPP_KV_ROW, err);
    m->attn = alloc_rows(m->A, err);
    m->gate = alloc_rows(m->F, err);
    m->up = alloc_rows(m->F, err);
    m->rope = alloc_rows(KIPP_HEAD_DIM, err);
    m->act[0] = kipp_calloc_huge(MAX_ROWS, m->act_stride, err);
    m->act[1] = kipp_calloc_huge(MAX_ROWS, m->act_stride, err);
    m->att_scratch_n = KIPP_CPU_ATT_SCRATCH(m->att_rows, m->group);
    m->att_scratch = kipp_calloc((size_t)threads * m->att_scratch_n, sizeof(float), err);
    m->att_blocks = kipp_calloc((size_t)threads * 2 * m->max_blocks, sizeof *m->att_blocks, err);
    m->att_qblocks = kipp_calloc((size_t)threads * 2 * m->max_blocks, sizeof *m->att_qblocks, err);
    m->q_rows = row_pointers(m->q, m->A, err);
    m->k_rows = row_pointers(m->k, KIPP_KV_ROW, err);
    m->v_rows = row_pointers(m->v, KIPP_KV_ROW, err);
    m->xn_rows = row_pointers(m->xn, m->H, err);
    m->gate_rows = row_pointers(m->gate, m->F, err);
    m->up_rows = row_pointers(m->up, m->F, err);
    m->logit_rows = row_pointers(NULL, 0, err);
    if (!m->x || !m->xn || !m->q || !m->k || !m->v || !m->attn || !m->gate || !m->up ||
        !m->rope || !m->act[0] || !m->act[1] || !m->att_scratch || !m->att_blocks ||
        !m->att_qblocks || !m->q_rows || !m->k_rows || !m->v_rows ||
        !m->xn_rows || !m->gate_rows || !m->up_rows || !m->logit_rows) {
        cpu_model_destroy(m);
        return kipp_fail(err, KIPP_E_MEMORY, "cpu backend: out of memory for scratch");
    }
    rc = kipp_pool_create(threads, &m->pool, err);
    if (rc) {
        cpu_model_destroy(m);
        return rc;
    }
    rc = plan_columns(&m->cols_qkv, m->A + 2 * KIPP_KV_ROW, threads, err);
    if (!rc) rc = plan_columns(&m->cols_h, m->H, threads, err);
    if (!rc) rc = plan_columns(&m->cols_f, m->F, threads, err);
    if (!rc) rc = plan_columns(&m->cols_vocab, KIPP_VOCAB_SIZE, threads, err);
    if (rc) {
        cpu_model_destroy(m);
        return rc;
    }
    *out = m;
    return KIPP_OK;
}

static int cpu_kv_create(void *state, kipp_kv_quant quant, uint32_t n_blocks, kipp_error *err) {
    cpu_model *m = state;
    return kipp_kv_store_create(&m->kv[quant], m->ckpt->layers, n_blocks, quant, err);
}

static void cpu_kv_copy(void *state, kipp_kv_quant quant, uint32_t dst, uint32_t src,
                        uint32_t n_positions) {
    cpu_model *m = state;
    pthread_mutex_lock(&m->lock); /* not while an eval writes the store */
    kipp_kv_store_copy(&m->kv[quant], dst, src, n_positions);
    pthread_mutex_unlock(&m->lock);
}

/* KV addressing: the pool store of row r's session and the element offset
 * of (layer, row's position) in it, through the session's block table. */
static inline kipp_kv_store *row_store(cpu_model *m, uint32_t r) {
    return &m->kv[m->row_kv[r]->quant];
}
static inline size_t row_kv_offset(cpu_model *m, uint32_t r, uint32_t kv_head) {
    return kipp_kv_head_offset(row_store(m, r), m->row_kv[r]->block_table, m->layer,
                               m->row_pos[r], kv_head);
}

/* The session's state lives in its KV cache; scratch is per model. */
static int cpu_session_create(void *state, kipp_kv_cache *kv, void **out, kipp_error *err) {
    *out = NULL;
    return KIPP_OK;
}
static void cpu_session_destroy(void *state, void *session_state) {}

/* ---- parallel regions -------------------------------------------------- */

static inline float *row(float *base, size_t width, uint32_t r) { return base + (size_t)r * width; }
static inline void *act_row(const cpu_model *m, int buf, uint32_t r) {
    return m->act[buf] + (size_t)r * m->act_stride;
}

/* Every tier packs 32-value chunks independently at a fixed size per
 * chunk, so a 32-aligned slice [off, off + n) of a row packs to byte
 * offset act_bytes(off). */
static inline void pack_slice(const cpu_model *m, int buf, const float *x, uint32_t off,
                              uint32_t n, uint32_t r) {
    m->kern->pack_act(x + off, n, (uint8_t *)act_row(m, buf, r) + m->kern->act_bytes(off));
}

/* y[r][n0..n1) = t . act[buf] row r, with the tier's kernel for t's type. */
static void matmul_cols(const cpu_model *m, const kipp_tensor *t, int buf, uint32_t n0,
                        uint32_t n1, uint32_t rows, float *const *y) {
    if (n0 >= n1 || rows == 0) return;
    const kipp_cpu_kernels *k = m->kern;
    uint32_t K = (uint32_t)t->cols;
    switch (t->type) {
    case GGML_TYPE_Q8_0: k->matmul_q8_0(t->data, K, n0, n1, m->act[buf], m->act_stride, rows, y); break;
    case GGML_TYPE_Q4_0: k->matmul_q4_0(t->data, K, n0, n1, m->act[buf], m->act_stride, rows, y); break;
    case GGML_TYPE_Q4_1: k->matmul_q4_1(t->data, K, n0, n1, m->act[buf], m->act_stride, rows, y); break;
    default: k->matmul_bf16(t->data, K, n0, n1, m->act[buf], m->act_stride, rows, y); break;
    }
}

/* Unit u of a planned column region. */
static inline void col_split(const struct col_plan *plan, uint32_t u, uint32_t *b, uint32_t *e) {
    *b = plan->bounds[u];
    *e = plan->bounds[u + 1];
}

typedef struct region {
    cpu_model *m;
    const kipp_layer_weights *L;
    const float *norm;     /* regions 1, 6 */
    uint32_t n_rows;       /* rows this region works on */
    /* Region 2's q projection and region 3's queries: rows [0, q_rows) of
     * act[q_buf] and of q. Every row (q_buf 0), except in a last layer
     * where only some rows want logits: those rows, copied to act[1]
     * (q_buf 1, logit_queries). */
    uint32_t q_rows;
    int q_buf;
    const kipp_tensor *out_w; /* region 5/8: attn_output or ffn_down */
    int out_buf;           /* which packed buffer out_w reads */
    uint32_t logit_rows;   /* output head */
} region;

/* 1, 6: xn = RMSNorm(x) per row, packed for the next matmul. */
static void region_norm_pack(void *ctx, uint32_t unit, uint32_t n_units, int tid) {
    region *g = ctx;
    cpu_model *m = g->m;
    uint32_t b, e;
    kipp_pool_split(g->n_rows, 1, unit, n_units, &b, &e);
    for (uint32_t r = b; r < e; r++) {
        float *xn = row(m->xn, m->H, r);
        m->kern->rmsnorm(xn, row(m->x, m->H, r), g->norm, m->H, KIPP_RMS_EPS);
        pack_slice(m, 0, xn, 0, m->H, r);
    }
}

/* 2: q, k, v projections; the three outputs' columns laid end to end are
 * split between threads. */
static void region_qkv(void *ctx, uint32_t unit, uint32_t n_units, int tid) {
    region *g = ctx;
    cpu_model *m = g->m;
    uint32_t b, e;
    col_split(&m->cols_qkv, unit, &b, &e);
    const kipp_tensor *w[3] = {&g->L->attn_q, &g->L->attn_k, &g->L->attn_v};
    float **y[3] = {m->q_rows, m->k_rows, m->v_rows};
    uint32_t start = 0;
    for (int i = 0; i < 3; i++) {
        uint32_t len = (uint32_t)w[i]->rows;
        uint32_t lo = b > start ? b - start : 0, hi = e - start < len ? e - start : len;
        if (e > start && lo < hi)
            matmul_cols(m, w[i], i == 0 ? g->q_buf : 0, lo, hi, i == 0 ? g->q_rows : g->n_rows,
                        y[i]);
        start += len;
    }
}

/* One head's K or V row into the BF16 cache: a loop of a fixed length
 * that the compiler vectorizes (kipp_f32_to_bf16 has no branch), so the
 * row leaves in 16-byte stores rather than 2-byte ones (this region's own
 * time in a 512-token BF16 prefill on Zen 5: 2.9 -> 2.3 % of the samples;
 * its stores, into lines not yet in cache, are most of it). */
static inline void store_head_bf16(uint16_t *restrict dst, const float *restrict src) {
    for (int i = 0; i < KIPP_HEAD_DIM; i++) dst[i] = kipp_f32_to_bf16(src[i]);
}

/* 3: per (row, KV head): per-head RMSNorm and RoPE of K and of the query
 * heads that read it; K and V stored in the paged cache (BF16, or Q8_0
 * blocks when the session asked for them). */
static void region_qk_rope_store(void *ctx, uint32_t unit, uint32_t n_units, int tid) {
    region *g = ctx;
    cpu_model *m = g->m;
    const kipp_cpu_kernels *kr = m->kern;
    uint32_t b, e;
    kipp_pool_split(g->n_rows * KIPP_KV_HEADS, 1, unit, n_units, &b, &e);
    for (uint32_t t = b; t < e; t++) {
        uint32_t r = t / KIPP_KV_HEADS, kvh = t % KIPP_KV_HEADS;
        const float *cs = row(m->rope, KIPP_HEAD_DIM, r);
        if (r < g->q_rows) { /* query row r is chunk row r, or logit_src[r] */
            uint32_t src = g->q_buf ? m->logit_src[r] : r;
            const float *qcs = row(m->rope, KIPP_HEAD_DIM, src);
            for (uint32_t h = kvh * m->group; h < (kvh + 1) * m->group; h++) {
                float *qh = row(m->q, m->A, r) + (size_t)h * KIPP_HEAD_DIM;
                kr->rmsnorm(qh, qh, g->L->attn_q_norm.data, KIPP_HEAD_DIM, KIPP_RMS_EPS);
                kr->rope(qh, qcs, qcs + HALF_DIM);
            }
        }
        float *kh = row(m->k, KIPP_KV_ROW, r) + (size_t)kvh * KIPP_HEAD_DIM;
        const float *vh = row(m->v, KIPP_KV_ROW, r) + (size_t)kvh * KIPP_HEAD_DIM;
        kr->rmsnorm(kh, kh, g->L->attn_k_norm.data, KIPP_HEAD_DIM, KIPP_RMS_EPS);
        kr->rope(kh, cs, cs + HALF_DIM);
        kipp_kv_store *st = row_store(m, r);
        size_t off = row_kv_offset(m, r, kvh);
        if (st->quant == KIPP_KV_Q8_0) { /* one head = 4 whole Q8_0 blocks */
            kipp_quantize_q8_0(kh, KIPP_HEAD_DIM, st->kq + off / KIPP_QBLOCK);
            kipp_quantize_q8_0(vh, KIPP_HEAD_DIM, st->vq + off / KIPP_QBLOCK);
            continue;
        }
        store_head_bf16(st->k + off, kh);
        store_head_bf16(st->v + off, vh);
    }
}

/* 4: causal grouped-query attention per (KV head, run of rows) over each
 * row's positions 0..pos, then the rows' slices are packed for attn_output.
 * A run's rows belong to one session at consecutive positions, so the
 * kernel loads each K/V block once for all of them. */
static void region_attention(void *ctx, uint32_t unit, uint32_t n_units, int tid) {
    region *g = ctx;
    cpu_model *m = g->m;
    const float scale = 1.0f / sqrtf((float)KIPP_HEAD_DIM);
    float *scratch = m->att_scratch + (size_t)tid * m->att_scratch_n;
    const uint16_t **kb = m->att_blocks + (size_t)tid * 2 * m->max_blocks;
    const uint16_t **vb = kb + m->max_blocks;
    uint32_t b, e;
    kipp_pool_split(m->n_att_runs * KIPP_KV_HEADS, 1, unit, n_units, &b, &e);
    for (uint32_t t = b; t < e; t++) {
        /* Head-major: consecutive units read the same KV head's positions
         * (one plane per (layer, head) in the store, kv.h: a fresh
         * session's history is one contiguous stream; the kernel
         * prefetches the next block's rows as it goes), which then stay
         * in L2 from one run to the next. Same arithmetic either way. */
        uint32_t run = t % m->n_att_runs, kvh = t / m->n_att_runs;
        uint32_t r0 = m->att_run_first[run], n_q = m->att_run_len[run];
        const kipp_kv_cache *kv = m->row_kv[r0];
        uint32_t pos0 = m->row_pos[r0];
        const kipp_kv_store *st = row_store(m, r0);
        uint32_t off = kvh * m->group * KIPP_HEAD_DIM;
        /* The kernel sees block pointers, not the cache's layout. */
        uint32_t n_blocks = (pos0 + n_q + KIPP_CPU_ATT_BLOCK - 1) / KIPP_CPU_ATT_BLOCK;
        assert(n_blocks <= m->max_blocks && n_blocks <= kv->n_blocks);
        /* Q8_0: offsets in BF16-equivalent elements, / 32 for blocks. */
        const int q8 = st->quant == KIPP_KV_Q8_0;
        const kipp_block_q8_0 **kq = m->att_qblocks + (size_t)tid * 2 * m->max_blocks;
        const kipp_block_q8_0 **vq = kq + m->max_blocks;
        for (uint32_t i = 0; i < n_blocks; i++) {
            size_t at = kipp_kv_head_offset(st, kv->block_table, m->layer, i * KIPP_KV_BLOCK, kvh);
            if (q8) {
                kq[i] = st->kq + at / KIPP_QBLOCK;
                vq[i] = st->vq + at / KIPP_QBLOCK;
            } else {
                kb[i] = st->k + at;
                vb[i] = st->v + at;
            }
        }
        if (q8) {
            kipp_cpu_kv_head_q8 head = {kq, vq, kipp_kv_pos_stride(st) / KIPP_QBLOCK};
            m->kern->attention_q8_0(row(m->q, m->A, r0) + off, m->A, n_q, m->group, pos0, &head,
                                    scale, row(m->attn, m->A, r0) + off, m->A, scratch);
        } else {
            kipp_cpu_kv_head head = {kb, vb, kipp_kv_pos_stride(st)};
            m->kern->attention(row(m->q, m->A, r0) + off, m->A, n_q, m->group, pos0, &head,
                               scale, row(m->attn, m->A, r0) + off, m->A, scratch);
        }
        for (uint32_t r = r0; r < r0 + n_q; r++)
            pack_slice(m, 0, row(m->attn, m->A, r), off, m->group * KIPP_HEAD_DIM, r);
    }
}

/* x[i] += o[i] over a unit's columns, whole COL_GRAIN grains: an inner
 * loop of a fixed length, which gcc's -O2 vectorizes (the loop over
 * [b, e) it left scalar: ~1.8 % of a 512-token BF16 prefill on Zen 5).
 * Element by element, so the same bits. Units are whole grains but the
 * last, which ends at H, a multiple of KIPP_CPU_K_ALIGN (= COL_GRAIN):
 * the hidden size is the K of q/k/v, which kipp_weights_check checks at
 * load. */
static inline void add_grains(float *restrict x, const float *restrict o, uint32_t n) {
    assert(n % COL_GRAIN == 0);
    for (uint32_t i = 0; i < n; i += COL_GRAIN)
        for (int j = 0; j < COL_GRAIN; j++) x[i + j] += o[i + j];
}

/* 5, 8: x += W . act over this thread's output columns. */
static void region_out_residual(void *ctx, uint32_t unit, uint32_t n_units, int tid) {
    region *g = ctx;
    cpu_model *m = g->m;
    uint32_t b, e;
    col_split(&m->cols_h, unit, &b, &e);
    matmul_cols(m, g->out_w, g->out_buf, b, e, g->n_rows, m->xn_rows);
    for (uint32_t r = 0; r < g->n_rows; r++)
        add_grains(row(m->x, m->H, r) + b, row(m->xn, m->H, r) + b, e - b);
}

/* 7: gate and up over this thread's columns, SiLU(gate) * up, packed. */
static void region_gate_up(void *ctx, uint32_t unit, uint32_t n_units, int tid) {
    region *g = ctx;
    cpu_model *m = g->m;
    uint32_t b, e;
    col_split(&m->cols_f, unit, &b, &e);
    if (b >= e) return;
    matmul_cols(m, &g->L->ffn_gate, 0, b, e, g->n_rows, m->gate_rows);
    matmul_cols(m, &g->L->ffn_up, 0, b, e, g->n_rows, m->up_rows);
    for (uint32_t r = 0; r < g->n_rows; r++) {
        float *gr = row(m->gate, m->F, r);
        m->kern->silu_mul(gr + b, row(m->up, m->F, r) + b, e - b);
        pack_slice(m, 1, gr, b, e - b, r);
    }
}

/* Output head over the vocabulary, columns split. */
static void region_logits(void *ctx, uint32_t unit, uint32_t n_units, int tid) {
    region *g = ctx;
    cpu_model *m = g->m;
    uint32_t b, e;
    col_split(&m->cols_vocab, unit, &b, &e);
    matmul_cols(m, &m->w->output, 0, b, e, g->logit_rows, m->logit_rows);
}

/* Attention runs of rows [0, R): consecutive rows of one session at
 * consecutive positions, capped at att_rows. */
static void plan_att_runs(cpu_model *m, uint32_t R) {
    m->n_att_runs = 0;
    for (uint32_t r = 0; r < R; r++) {
        uint32_t last = m->n_att_runs - 1;
        if (r > 0 && m->row_kv[r] == m->row_kv[r - 1] && m->row_pos[r] == m->row_pos[r - 1] + 1 &&
            m->att_run_len[last] < m->att_rows) {
            m->att_run_len[last]++;
        } else {
            m->att_run_first[m->n_att_runs] = (uint8_t)r;
            m->att_run_len[m->n_att_runs++] = 1;
        }
    }
}

/* The last layer's rows that want logits, in chunk order: the i-th is
 * chunk row logit_src[i], its output logit_rows[i]. Returns how many. */
static uint32_t logit_sources(cpu_model *m, uint32_t R, float *const *logits) {
    uint32_t nl = 0;
    for (uint32_t r = 0; r < R; r++) {
        if (!logits[r]) continue;
        m->logit_src[nl] = (uint8_t)r;
        m->logit_rows[nl++] = logits[r];
    }
    return nl;
}

/* The last layer projects queries for those rows alone (K and V still
 * take every row): their packed inputs are copied from act[0] to the front
 * of act[1] (free until region 7 of this layer), region 2 projects q from
 * there, and region 3 rotates query row i by chunk row logit_src[i]'s
 * angles. When every row wants logits (decode, --all-logits) nothing
 * moves. */
static void logit_queries(cpu_model *m, region *g, uint32_t nl) {
    if (nl == g->n_rows) return;
    for (uint32_t i = 0; i < nl; i++)
        memcpy(act_row(m, 1, i), act_row(m, 0, m->logit_src[i]), m->kern->act_bytes(m->H));
    g->q_buf = 1;
    g->q_rows = nl;
}

/* After the last layer's region 3: the rows that want logits, moved to the
 * front (their residual, their session and position; their queries are
 * there already), and their attention runs. The other rows are done once
 * region 3 has stored their K and V: nothing reads their attention
 * output, MLP or residual after that. */
static void gather_logit_rows(cpu_model *m, uint32_t nl) {
    for (uint32_t i = 0; i < nl; i++) {
        uint32_t r = m->logit_src[i];
        if (r == i) continue;
        memcpy(row(m->x, m->H, i), row(m->x, m->H, r), m->H * sizeof(float));
        m->row_kv[i] = m->row_kv[r];
        m->row_pos[i] = m->row_pos[r];
    }
    plan_att_runs(m, nl);
}

/* Units for a region of `tasks` small independent tasks (rows, or (row,
 * KV head) pairs): each claim of a unit moves the pool's claim line from
 * one core to the other, about what one (row, head) task of region 3
 * costs, so a region of many tasks claims TASKS_PER_UNIT at a time, and a
 * short one (decode's one row) keeps a task a unit, so that every thread
 * takes part. Which unit runs a task changes no result. */
enum { TASKS_PER_UNIT = 8 };
static uint32_t task_units(const cpu_model *m, uint32_t tasks) {
    uint32_t spread = 4 * (uint32_t)kipp_pool_threads(m->pool);
    uint32_t units = (tasks + TASKS_PER_UNIT - 1) / TASKS_PER_UNIT;
    if (units < spread) units = tasks < spread ? tasks : spread;
    return units;
}

/* ---- the profile (kipp_model_profile) ----------------------------------- */

static void prof_add(cpu_model *m, enum prof_step s, double t0, double flops) {
    m->prof[s].calls++;
    m->prof[s].seconds += kipp_now_seconds() - t0;
    m->prof[s].flops += flops;
}

/* Runs a region and, when profiling, adds its wall time and `flops` (2
 * per multiply-add of its matmuls) to step s. */
static void run_step(cpu_model *m, enum prof_step s, double flops, kipp_pool_fn fn, region *g,
                     uint32_t units) {
    if (!m->profile) {
        kipp_pool_run(m->pool, fn, g, units);
        return;
    }
    double t0 = kipp_now_seconds();
    kipp_pool_run(m->pool, fn, g, units);
    prof_add(m, s, t0, flops);
}

/* Attention's FLOPs over the planned runs: every query head of a row at
 * position p scores and sums p + 1 positions, 2 x 128 multiply-adds each. */
static double att_flops(const cpu_model *m) {
    double positions = 0;
    for (uint32_t i = 0; i < m->n_att_runs; i++) {
        double n = m->att_run_len[i], pos0 = m->row_pos[m->att_run_first[i]];
        positions += n * pos0 + n * (n + 1) / 2;
    }
    return 4.0 * m->A * positions;
}

static size_t cpu_profile(void *state, kipp_profile_step *out, size_t cap) {
    cpu_model *m = state;
    if (!m->profile) return 0;
    pthread_mutex_lock(&m->lock); /* not while an eval adds to it */
    for (size_t i = 0; i < PROF_STEPS && i < cap; i++)
        out[i] = (kipp_profile_step){prof_names[i], m->prof[i].calls, m->prof[i].seconds,
                                     m->prof[i].flops};
    pthread_mutex_unlock(&m->lock);
    return PROF_STEPS;
}

/* ---- the forward pass over one chunk of rows --------------------------- */

static void forward_chunk(cpu_model *m, float *const *logits) {
    const kipp_weights *w = m->w;
    uint32_t R = m->n_rows;
    region g = {.m = m, .n_rows = R, .q_rows = R};
    const double H = m->H, A = m->A, F = m->F, KV = KIPP_KV_ROW; /* FLOP counts */
    double t_embed = m->profile ? kipp_now_seconds() : 0;

    plan_att_runs(m, R);

    for (uint32_t r = 0; r < R; r++) {
        /* Token embedding: x = token_embd[token] (hidden,) */
        const uint16_t *e = (const uint16_t *)w->token_embd.data + (size_t)m->row_token[r] * m->H;
        float *x = row(m->x, m->H, r);
        for (uint32_t i = 0; i < m->H; i++) x[i] = kipp_bf16_to_f32(e[i]);
        /* The row's cache block, resident before the layers write it. */
        kipp_kv_store_prefault(row_store(m, r),
                               m->row_kv[r]->block_table[m->row_pos[r] / KIPP_KV_BLOCK]);
        /* RoPE angles for this position, shared by every layer and head. */
        float *cs = row(m->rope, KIPP_HEAD_DIM, r);
        for (int i = 0; i < HALF_DIM; i++) {
            double angle = (double)m->row_pos[r] * m->rope_freq[i];
            cs[i] = (float)cos(angle);
            cs[HALF_DIM + i] = (float)sin(angle);
        }
    }
    if (m->profile) prof_add(m, PROF_EMBED, t_embed, 0);

    for (uint32_t l = 0; l < m->ckpt->layers; l++) {
        const kipp_layer_weights *L = &w->layers[l];
        m->layer = l;
        g.L = L;

        /* Attention block: xn = RMSNorm(x); q, k, v projections. */
        g.norm = L->attn_norm.data;
        run_step(m, PROF_NORM, 0, region_norm_pack, &g, task_units(m, R));
        /* The last layer goes on with the rows that want logits only:
         * every row of a prompt but its last needs nothing past its K/V.
         * Their queries alone are projected (logit_queries); after region
         * 3 has stored every row's K and V, the rows are gathered
         * (gather_logit_rows) and a chunk with none ends
         * (docs/CPU-JOURNAL.md, "Stop 50" and "Stop 51"). Each row's
         * steps do not depend on the rows beside it (batch invariance),
         * so its logits are the same bits either way. */
        const bool last = l + 1 == m->ckpt->layers;
        uint32_t nl = R;
        if (last) {
            nl = logit_sources(m, R, logits);
            logit_queries(m, &g, nl);
        }
        run_step(m, PROF_QKV, 2 * H * (g.q_rows * A + R * 2 * KV), region_qkv, &g,
                 m->cols_qkv.n);
        /* Per-head RMSNorm of Q and K, then RoPE; store K and V (BF16). */
        run_step(m, PROF_QK_ROPE_STORE, 0, region_qk_rope_store, &g,
                 task_units(m, R * KIPP_KV_HEADS));
        if (last) {
            gather_logit_rows(m, nl);
            R = g.n_rows = g.q_rows = nl;
            if (R == 0) break;
        }
        /* Causal grouped-query attention over the paged cache. */
        run_step(m, PROF_ATTENTION, m->profile ? att_flops(m) : 0, region_attention, &g,
                 m->n_att_runs * KIPP_KV_HEADS);
        /* Output projection (heads*128 -> hidden) plus residual. */
        g.out_w = &L->attn_output;
        g.out_buf = 0;
        run_step(m, PROF_ATTN_OUTPUT, 2 * A * H * R, region_out_residual, &g, m->cols_h.n);

        /* MLP block: x += down(SiLU(gate(xn)) * up(xn)), xn = RMSNorm(x). */
        g.norm = L->ffn_norm.data;
        run_step(m, PROF_NORM, 0, region_norm_pack, &g, task_units(m, R));
        run_step(m, PROF_GATE_UP, 2 * H * 2 * F * R, region_gate_up, &g, m->cols_f.n);
        g.out_w = &L->ffn_down;
        g.out_buf = 1;
        run_step(m, PROF_DOWN, 2 * F * H * R, region_out_residual, &g, m->cols_h.n);
    }

    /* Final RMSNorm and output head for the rows that want logits: rows
     * [0, R) since the last layer's gather. */
    if (R) {
        g.norm = w->output_norm.data;
        g.n_rows = R;
        g.logit_rows = R;
        run_step(m, PROF_NORM, 0, region_norm_pack, &g, task_units(m, R));
        run_step(m, PROF_HEAD, 2 * H * KIPP_VOCAB_SIZE * R, region_logits, &g,
                 m->cols_vocab.n);
    }
}

static int cpu_eval(void *state, kipp_backend_item *items, size_t n_items, kipp_error *err) {
    cpu_model *m = state;
    float *logits[MAX_ROWS];
    pthread_mutex_lock(&m->lock);
    uint32_t R = 0;
    for (size_t it = 0; it < n_items; it++) {
        kipp_backend_item *item = &items[it];
        uint32_t first_logit = item->n_tokens - item->n_logits;
        for (uint32_t i = 0; i < item->n_tokens; i++) {
            m->row_kv[R] = item->kv;
            m->row_pos[R] = item->kv->length + i;
            m->row_token[R] = item->tokens[i];
            logits[R] = i >= first_logit
                            ? item->logits + (size_t)(i - first_logit) * KIPP_VOCAB_SIZE
                            : NULL;
            if (++R == MAX_ROWS) {
                m->n_rows = R;
                forward_chunk(m, logits);
                R = 0;
            }
        }
    }
    if (R) {
        m->n_rows = R;
        forward_chunk(m, logits);
    }
    pthread_mutex_unlock(&m->lock);
    (void)err;
    return KIPP_OK;
}

const kipp_backend_ops kipp_backend_cpu = {
    .name = "cpu",
    .model_create = cpu_model_create,
    .model_destroy = cpu_model_destroy,
    .session_create = cpu_session_create,
    .session_destroy = cpu_session_destroy,
    .eval = cpu_eval,
    .kv_create = cpu_kv_create,
    .kv_copy = cpu_kv_copy,
    .kv_q8_0 = true,
    .profile = cpu_profile,
};
