/* TEMPORARY during parallel development: weak placeholders for contract
 * functions whose real (strong) definitions are being written in other
 * files. A strong definition anywhere in the link replaces these. This file
 * is deleted once every function has its implementation. */
#include <stdlib.h>

#include "core/artifact.h"
#include "core/common.h"
#include "core/tokenizer.h"

#define PENDING __attribute__((weak))

PENDING int kipp_artifact_open(const char *path, kipp_artifact *out, kipp_error *err) {
    return kipp_fail(err, KIPP_E_UNSUPPORTED, "artifact loader not built yet");
}
PENDING int kipp_artifact_open_memory(const uint8_t *image, size_t size, kipp_artifact *out,
                                      kipp_error *err) {
    return kipp_fail(err, KIPP_E_UNSUPPORTED, "artifact loader not built yet");
}
PENDING void kipp_artifact_close(kipp_artifact *a) {}
PENDING const char *kipp_quant_scheme_name(kipp_quant_scheme s) { return "bf16"; }
PENDING int kipp_tokenizer_create(const kipp_artifact *artifact, kipp_tokenizer **out,
                                  kipp_error *err) {
    *out = NULL;
    return KIPP_OK;
}
PENDING void kipp_tokenizer_destroy(kipp_tokenizer *t) {}
PENDING int kipp_tokenizer_encode(const kipp_tokenizer *t, const char *text, size_t length,
                                  int32_t **ids, size_t *n_ids, kipp_error *err) {
    return kipp_fail(err, KIPP_E_UNSUPPORTED, "tokenizer not built yet");
}
PENDING const uint8_t *kipp_tokenizer_token_bytes(const kipp_tokenizer *t, int32_t id,
                                                  size_t *length) {
    return NULL;
}
PENDING int kipp_detokenize(const kipp_model *model, const int32_t *ids, size_t n_ids,
                            char **text, size_t *length, kipp_error *err) {
    return kipp_fail(err, KIPP_E_UNSUPPORTED, "tokenizer not built yet");
}
PENDING int kipp_detok_stream_create(const kipp_model *model, kipp_detok_stream **out,
                                     kipp_error *err) {
    return kipp_fail(err, KIPP_E_UNSUPPORTED, "tokenizer not built yet");
}
PENDING int kipp_detok_stream_push(kipp_detok_stream *s, int32_t id, char *out, size_t out_cap,
                                   size_t *out_len, kipp_error *err) {
    return kipp_fail(err, KIPP_E_UNSUPPORTED, "tokenizer not built yet");
}
PENDING int kipp_detok_stream_flush(kipp_detok_stream *s, char *out, size_t out_cap,
                                    size_t *out_len) {
    return KIPP_E_UNSUPPORTED;
}
PENDING void kipp_detok_stream_destroy(kipp_detok_stream *s) {}
