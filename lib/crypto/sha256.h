/* SHA-256 (OpenSSL EVP): session ids (hash of all advertised keys), manifests,
 * content hashes of uploads. One-shot and incremental forms. */
#ifndef FS_CRYPTO_SHA256_H
#define FS_CRYPTO_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

#define FS_SHA256_LEN 32

typedef struct fs_sha256_ctx fs_sha256_ctx;

/**
 * out = SHA-256(data[0..n)).
 * @param data borrowed; may be NULL when n == 0.
 * @return 0, or FS_ECRYPTO if OpenSSL fails.
 */
FS_WUR int fs_sha256(uint8_t out[FS_SHA256_LEN], const void *data, size_t n, struct fs_err *err);

/**
 * Start an incremental hash.
 * @param out receives a new context, free with fs_sha256_free.
 * @return 0, FS_ENOMEM or FS_ECRYPTO.
 */
FS_WUR int fs_sha256_new(fs_sha256_ctx **out, struct fs_err *err);

/** Absorb n more bytes (data may be NULL when n == 0). @return 0 or FS_ECRYPTO. */
FS_WUR int fs_sha256_update(fs_sha256_ctx *ctx, const void *data, size_t n, struct fs_err *err);

/**
 * Write the digest. The context is then reset and may be reused for a new
 * message. @return 0 or FS_ECRYPTO.
 */
FS_WUR int fs_sha256_final(fs_sha256_ctx *ctx, uint8_t out[FS_SHA256_LEN], struct fs_err *err);

/** Free a context. Accepts NULL. */
void fs_sha256_free(fs_sha256_ctx *ctx);

#endif
