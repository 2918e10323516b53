/* Common plumbing: the error record every public call fills, checked size
 * arithmetic for lengths read from untrusted files, and small helpers.
 * Nothing here knows about models. */
#ifndef KIPP_COMMON_H
#define KIPP_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kipp.h" /* kipp_error, kipp_status */

/* Fill err (may be NULL) with a code and a printf-style message; returns code
 * so callers can write `return kipp_fail(err, KIPP_E_FORMAT, "...")`. */
int kipp_fail(kipp_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix an existing message with context: "context: old message". */
int kipp_fail_prefix(kipp_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Checked arithmetic: return false on overflow, never wrap. */
static inline bool kipp_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool kipp_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool kipp_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool kipp_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* Allocation helpers that report through kipp_error instead of aborting. */
void *kipp_malloc(size_t size, kipp_error *err);
void *kipp_calloc(size_t count, size_t size, kipp_error *err);
/* kipp_calloc for scratch that every forward step sweeps (the cpu
 * backend's row buffers): from 1 MiB up, 2 MiB aligned, rounded up to
 * whole 2 MiB and advised MADV_HUGEPAGE, so the sweep does not walk page
 * tables (common.c says what it measured). Released with free(). */
void *kipp_calloc_huge(size_t count, size_t size, kipp_error *err);
/* A thread count as the options give it: `requested` when positive, else
 * one per online core (at least 1) -- what threads 0 means everywhere. */
int kipp_resolve_threads(int requested);

/* Read a whole (small) file into a NUL-terminated buffer. */
int kipp_read_file(const char *path, char **data, size_t *size, kipp_error *err);

/* bf16 / fp16 <-> fp32. bf16 rounding is round-to-nearest-even, NaN kept quiet. */
static inline float kipp_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = { .u = (uint32_t)h << 16 };
    return v.f;
}
/* Inline: the cpu backend writes every K and V value through it. Written
 * without a branch (a select), so that a loop over a head vectorizes at
 * the baseline ISA: a K/V row is stored 16 bytes at a time, not 2. */
static inline uint16_t kipp_f32_to_bf16(float f) {
    union { float f; uint32_t u; } v = { .f = f };
    uint32_t rne = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (v.u >> 16) | 0x40u;
    return (uint16_t)((v.u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rne);
}
float kipp_fp16_to_f32(uint16_t h);
uint16_t kipp_f32_to_fp16(float f);

/* The index of the largest x[i] above `floor`, the lowest index on a tie;
 * -1 when none is (NaN never wins). The greedy pick of every decode step,
 * over a 151,936-entry vocabulary: eight running maxima (lane j takes the
 * indices = j mod 8), so no comparison waits on the one before it --
 * re-reading x[best] each step, or one running maximum, chained every
 * element to the last (~3-9 cycles each, up to 0.4 ms a step on Zen 5).
 * Each lane keeps its first maximum, and the merge takes the largest value,
 * then the lowest index: the first maximum of the whole array. */
static inline int32_t kipp_argmax_above(const float *x, int32_t n, float floor) {
    enum { LANES = 8 };
    float best_v[LANES];
    int32_t best_i[LANES];
    for (int j = 0; j < LANES; j++) best_v[j] = floor, best_i[j] = -1;
    int32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            if (x[i + j] > best_v[j]) best_v[j] = x[i + j], best_i[j] = i + j;
    for (; i < n; i++)
        if (x[i] > best_v[i % LANES]) best_v[i % LANES] = x[i], best_i[i % LANES] = i;
    int32_t best = -1;
    float v = floor; /* a lane that found anything holds a value above it */
    for (int j = 0; j < LANES; j++)
        if (best_i[j] >= 0 && (best_v[j] > v || (best_v[j] == v && best_i[j] < best)))
            best = best_i[j], v = best_v[j];
    return best;
}

/* Monotonic time in seconds, for throughput reports. */
double kipp_now_seconds(void);

#endif
