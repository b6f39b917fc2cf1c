/* Shamir t-of-n secret sharing of 32-byte secrets over a prime field (GMP).
 *
 * SecAgg (rounds R1 and R4, lib/proto/secagg.h) shares each party's mask private key and
 * self-mask seed so that any t survivors can rebuild the secrets of dropped
 * parties, while t - 1 shares reveal nothing: for every candidate secret there
 * is exactly one polynomial of degree t - 1 through it and the t - 1 shares.
 *
 * Field: integers modulo p = 2^256 + 297, the smallest prime above 2^256
 * (fs_shamir_prime_hex; tests/unit/test_crypto_shamir.c checks that it is a
 * probable prime and that no prime lies between 2^256 and p). Every 32-byte
 * secret, read as a big-endian integer, is a field element.
 *
 * A share is (x, y = f(x)) with f(0) = secret and the other t - 1
 * coefficients uniform in [0, p) (64 CSPRNG bytes reduced mod p: bias below
 * 2^-250). Serialised form, FS_SHAMIR_SHARE_LEN = 35 bytes:
 *   bytes 0..1   x, big-endian uint16, 1 <= x <= 65535
 *   bytes 2..34  y, big-endian, 33 bytes, y < p (so byte 2 is 0 or 1)
 *
 * Shares are secrets: encrypt them in transit (fs_aead_*) and fs_wipe them.
 * Timing: GMP's mpz functions are not constant-time. Secret values go
 * through mpz multiplication and reduction mod p, whose running time may
 * vary with the values (mostly with their sizes). This is a known limitation,
 * not hardened. Limb buffers holding secrets are wiped before they are freed;
 * GMP's internal scratch space is not. */
#ifndef FS_CRYPTO_SHAMIR_H
#define FS_CRYPTO_SHAMIR_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

#define FS_SHAMIR_SECRET_LEN 32
#define FS_SHAMIR_Y_LEN      33
#define FS_SHAMIR_SHARE_LEN  (2 + FS_SHAMIR_Y_LEN)
#define FS_SHAMIR_MAX_N      65535

struct fs_shamir_share {
    uint16_t x;                 /* evaluation point, 1..FS_SHAMIR_MAX_N */
    uint8_t y[FS_SHAMIR_Y_LEN]; /* f(x), big-endian, < p */
};

/**
 * Split secret into n shares at x = 1, 2, ..., n; any t of them reconstruct it.
 * @param secret borrowed, 32 bytes.
 * @param t threshold, 1 <= t <= n (t = 1 makes every share equal the secret).
 * @param n number of shares, n <= FS_SHAMIR_MAX_N.
 * @param shares caller's array of n shares, filled in; zeroed on failure.
 * @return 0; FS_EINVAL for bad t/n; FS_ENOMEM; FS_ECRYPTO if the CSPRNG fails.
 */
FS_WUR int fs_shamir_split(const uint8_t secret[FS_SHAMIR_SECRET_LEN], size_t t, size_t n,
                           struct fs_shamir_share *shares, struct fs_err *err);

/**
 * Like fs_shamir_split, but at caller-chosen points xs[0..n) (distinct,
 * nonzero): e.g. only the O(log K) neighbours of SecAgg+, each at its party
 * index. Also FS_EINVAL for a zero or repeated x.
 */
FS_WUR int fs_shamir_split_at(const uint8_t secret[FS_SHAMIR_SECRET_LEN], size_t t,
                              const uint16_t *xs, size_t n, struct fs_shamir_share *shares,
                              struct fs_err *err);

/**
 * Like fs_shamir_split_at, but the polynomial's random coefficients come
 * from AES-256-CTR under coef_key (32 bytes, borrowed) instead of the
 * CSPRNG: the same (secret, t, coef_key) give the same share at every x.
 * For a client that must rebuild its messages byte for byte after a restart;
 * coef_key must be secret and used for one secret only.
 */
FS_WUR int fs_shamir_split_at_det(const uint8_t secret[FS_SHAMIR_SECRET_LEN], size_t t,
                                  const uint16_t *xs, size_t n, const uint8_t coef_key[32],
                                  struct fs_shamir_share *shares, struct fs_err *err);

/**
 * Reconstruct the secret from k >= t shares. The first t are interpolated
 * (Lagrange at 0); every further share is checked to lie on the same
 * polynomial, so passing more than t shares detects inconsistent ones.
 * Fewer than t shares cannot be detected by anyone: passing t smaller than the
 * threshold used to split yields an unrelated value (or FS_EAUTH).
 * @param shares borrowed, k shares with distinct nonzero x and y < p.
 * @param secret caller's 32-byte buffer; zeroed on failure.
 * @return 0; FS_EINVAL for t == 0, k < t, x == 0, a repeated x, y >= p;
 *         FS_EAUTH if the shares are inconsistent (an extra share off the
 *         polynomial, or an interpolated value >= 2^256, which no 32-byte
 *         secret has); FS_ENOMEM.
 */
FS_WUR int fs_shamir_combine(const struct fs_shamir_share *shares, size_t k, size_t t,
                             uint8_t secret[FS_SHAMIR_SECRET_LEN], struct fs_err *err);

/** Serialise one share into the 35-byte form described above. */
void fs_shamir_share_encode(const struct fs_shamir_share *share, uint8_t out[FS_SHAMIR_SHARE_LEN]);

/**
 * Parse the 35-byte form.
 * @param in borrowed, len bytes.
 * @param share filled in; zeroed on failure.
 * @return 0; FS_EFORMAT if len != FS_SHAMIR_SHARE_LEN, x == 0 or y >= p.
 */
FS_WUR int fs_shamir_share_decode(struct fs_shamir_share *share, const uint8_t *in, size_t len,
                                  struct fs_err *err);

/** The field prime p, lower-case hex without prefix (static string). */
const char *fs_shamir_prime_hex(void);

#endif
