/* Deterministic pseudorandom generator: AES-256-CTR keystream of a 32-byte
 * key and a 16-byte initial counter block. Used for SecAgg masks (uint64
 * vectors in Z_2^64), for mask matrices generated from a seed, and for
 * seeded test data. Streamable: successive calls continue the stream, so a
 * long vector can be produced chunk by chunk with the same result as in one
 * call. */
#ifndef FS_CRYPTO_PRG_H
#define FS_CRYPTO_PRG_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

typedef struct fs_prg fs_prg;

/**
 * Create a PRG. @param key 32 bytes (copied, wiped on free).
 * @param iv 16 bytes initial counter block, or NULL for all zero.
 * @param out receives a new fs_prg, free with fs_prg_free.
 */
FS_WUR int fs_prg_new(fs_prg **out, const uint8_t key[32], const uint8_t *iv, struct fs_err *err);

/** Next n bytes of the stream into buf. */
FS_WUR int fs_prg_bytes(fs_prg *prg, void *buf, size_t n, struct fs_err *err);

/** Next n uint64 values (little-endian interpretation of the stream). */
FS_WUR int fs_prg_u64(fs_prg *prg, uint64_t *out, size_t n, struct fs_err *err);

/** Add (mod 2^64) the next n stream words to vec: vec[i] += w_i. */
FS_WUR int fs_prg_add_u64(fs_prg *prg, uint64_t *vec, size_t n, struct fs_err *err);

/** Subtract (mod 2^64) the next n stream words from vec: vec[i] -= w_i. */
FS_WUR int fs_prg_sub_u64(fs_prg *prg, uint64_t *vec, size_t n, struct fs_err *err);

/** Uniform double in [0, 1) with 53 random bits. */
FS_WUR int fs_prg_uniform(fs_prg *prg, double *out, struct fs_err *err);

/** n standard normal doubles (Box-Muller on the stream). */
FS_WUR int fs_prg_normal(fs_prg *prg, double *out, size_t n, struct fs_err *err);

/** Uniform integer in [0, bound) without bias; bound > 0. */
FS_WUR int fs_prg_below(fs_prg *prg, uint64_t bound, uint64_t *out, struct fs_err *err);

/**
 * Reposition the stream at byte `offset` from its start (as if `offset` bytes
 * had been drawn since fs_prg_new), so a vector can be masked chunk by chunk
 * in any order. @return 0 or FS_ECRYPTO.
 */
FS_WUR int fs_prg_seek(fs_prg *prg, uint64_t offset, struct fs_err *err);

/** Free, wiping the key schedule. Accepts NULL. */
void fs_prg_free(fs_prg *prg);

#endif
