/* Randomness from the operating system's CSPRNG (OpenSSL RAND_bytes, which
 * is seeded from getrandom). Never the C library generators or GMP's twister. */
#ifndef FS_CRYPTO_RAND_H
#define FS_CRYPTO_RAND_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

/** Fill buf with n CSPRNG bytes. @return 0 or FS_ECRYPTO. */
FS_WUR int fs_rand_bytes(void *buf, size_t n, struct fs_err *err);

/** Uniform integer in [0, bound) without modulo bias; bound > 0. */
FS_WUR int fs_rand_below(uint64_t bound, uint64_t *out, struct fs_err *err);

#endif
