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

/** One stream of fs_prg_sum: the AES-256-CTR stream of key (zero initial
 * counter block, as fs_prg_new with iv NULL), added (sign > 0) or subtracted. */
struct fs_prg_term {
    uint8_t key[32];
    int sign;
};

/**
 * v[i] += sum_s sign_s * W_s[word0 + i] (mod 2^64) for i < m, where W_s is the
 * uint64 stream of t[s] (what fs_prg_u64 gives after seeking to byte
 * 8 * word0). One pass over v however many streams: every stream goes over an
 * L1-sized piece of v before the next piece. Uses VAES with AVX-512 when the
 * CPU has them (fs_prg_sum_accelerated), OpenSSL's EVP otherwise; the result
 * is the same. Round keys and keystream are wiped.
 * @return 0, FS_EINVAL (NULL, over 2^20 streams), FS_ERANGE (word0 + m beyond 2^60), FS_ENOMEM,
 * FS_ECRYPTO.
 */
FS_WUR int fs_prg_sum(const struct fs_prg_term *t, size_t nt, uint64_t word0, uint64_t *v, size_t m,
                      struct fs_err *err);

/** 1 when fs_prg_sum runs its VAES/AVX-512 code on this CPU, else 0. */
int fs_prg_sum_accelerated(void);

/** Tests and benchmarks: make fs_prg_sum take the EVP path (on != 0) or not.
 * Not thread-safe: call before any fs_prg_sum runs. */
void fs_prg_sum_force_generic(int on);

/** Free, wiping the key schedule. Accepts NULL. */
void fs_prg_free(fs_prg *prg);

#endif
