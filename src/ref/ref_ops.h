/* Scalar building blocks of the oracle (src/ref): plain C, FP32 activations,
 * FP32 accumulation in index order, no ISA flags, no -ffast-math. The fast
 * backends use these as the reference their kernels are tested against.
 *
 * Weight rows are read through a per-type row dot, so a quantized projection
 * (Q8_0, Q4_0, Q4_1) is one more case in a switch, not a second forward. */
#ifndef KIPP_REF_OPS_H
#define KIPP_REF_OPS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/artifact.h"

/* Weight types the oracle can read as matrix rows. */
bool kipp_ref_type_supported(uint32_t ggml_type);
/* Bytes of one row of `cols` values of `ggml_type` (cols multiple of 32 for
 * the block types); 0 for an unsupported type. */
size_t kipp_ref_row_bytes(uint32_t ggml_type, uint64_t cols);

/* dot(row r of w, x[w->cols]) with the weights decoded to FP32 one by one. */
float kipp_ref_row_dot(const kipp_tensor *w, uint64_t r, const float *x);
/* Row r of w decoded to FP32: out[w->cols] (the embedding lookup). */
void kipp_ref_row_f32(const kipp_tensor *w, uint64_t r, float *out);

/* out[w->rows] = w[rows][cols] . x[cols]. out must not alias x. */
void kipp_ref_matvec(float *out, const kipp_tensor *w, const float *x);

/* out[n] = x / sqrt(mean(x^2) + eps) * weight[n]; out may alias x.
 * weight is an F32 vector of n values. */
void kipp_ref_rmsnorm(float *out, const float *x, const float *weight, size_t n);

/* x[n] <- softmax(x[n]), max-subtracted. */
void kipp_ref_softmax(float *x, size_t n);

static inline float kipp_ref_silu(float x) { return x / (1.0f + expf(-x)); }

#endif
