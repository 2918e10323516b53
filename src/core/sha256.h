/* SHA-256 (FIPS 180-4), streaming. Used for source-file hashes recorded in
 * artifacts and for the pinned tokenizer files. */
#ifndef KIPP_SHA256_H
#define KIPP_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct kipp_sha256 {
    uint32_t state[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
} kipp_sha256;

void kipp_sha256_init(kipp_sha256 *s);
void kipp_sha256_update(kipp_sha256 *s, const void *data, size_t n);
void kipp_sha256_final(kipp_sha256 *s, uint8_t digest[32]);
/* digest -> 64 lowercase hex chars + NUL */
void kipp_sha256_hex(const uint8_t digest[32], char hex[65]);

#endif
