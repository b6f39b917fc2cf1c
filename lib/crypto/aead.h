/* AES-256-GCM authenticated encryption (OpenSSL EVP).
 *
 * Used for Shamir shares sent through the server (secure aggregation, R1): the key
 * is an HKDF of the pairwise X25519 secret and the associated data binds the
 * sender and recipient ids, so a share replayed to another pair fails to open.
 *
 * Wire layout:
 *   fs_aead_seal / fs_aead_open:         ciphertext || tag(16)
 *   fs_aead_box_seal / fs_aead_box_open: nonce(12) || ciphertext || tag(16)
 * The ciphertext has the length of the plaintext.
 *
 * Nonces: a (key, nonce) pair must never encrypt two different messages. With
 * caller-chosen nonces use a counter; the box form draws a random 96-bit
 * nonce from the CSPRNG, which is safe for up to 2^32 messages per key (NIST
 * SP 800-38D §8.3). Buffers may be the same (in == out, exactly) for
 * seal/open, but must not otherwise overlap. */
#ifndef FS_CRYPTO_AEAD_H
#define FS_CRYPTO_AEAD_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

#define FS_AEAD_KEY_LEN      32
#define FS_AEAD_NONCE_LEN    12
#define FS_AEAD_TAG_LEN      16
#define FS_AEAD_BOX_OVERHEAD (FS_AEAD_NONCE_LEN + FS_AEAD_TAG_LEN)
/* Longest plaintext accepted (GCM allows 2^39 - 256 bits; we stay far below). */
#define FS_AEAD_MAX_PT ((size_t)1 << 36)

/**
 * Encrypt and authenticate.
 * @param out caller's buffer of out_cap >= pt_len + FS_AEAD_TAG_LEN bytes;
 *        receives ciphertext || tag.
 * @param out_len receives pt_len + FS_AEAD_TAG_LEN.
 * @param key, nonce borrowed, 32 and 12 bytes.
 * @param ad associated data, authenticated but not encrypted; may be NULL
 *        when ad_len == 0.
 * @param pt plaintext, borrowed; may be NULL when pt_len == 0.
 * @return 0; FS_EINVAL (NULL with nonzero length, out_cap too small, pt_len >
 *         FS_AEAD_MAX_PT); FS_ECRYPTO if OpenSSL fails (out is then zeroed).
 */
FS_WUR int fs_aead_seal(uint8_t *out, size_t out_cap, size_t *out_len,
                        const uint8_t key[FS_AEAD_KEY_LEN], const uint8_t nonce[FS_AEAD_NONCE_LEN],
                        const void *ad, size_t ad_len, const void *pt, size_t pt_len,
                        struct fs_err *err);

/**
 * Verify and decrypt ciphertext || tag.
 * @param out caller's buffer of out_cap >= in_len - FS_AEAD_TAG_LEN bytes;
 *        receives the plaintext only if authentication succeeds. On any
 *        failure the first in_len - FS_AEAD_TAG_LEN bytes of out are zeroed, so
 *        no unauthenticated plaintext is released.
 * @param out_len receives in_len - FS_AEAD_TAG_LEN (0 on failure).
 * @param in borrowed, in_len bytes.
 * @return 0; FS_EAUTH if the tag does not verify (wrong key, nonce, AD,
 *         modified or truncated input, including in_len < FS_AEAD_TAG_LEN);
 *         FS_EINVAL for bad arguments; FS_ECRYPTO if OpenSSL fails.
 */
FS_WUR int fs_aead_open(uint8_t *out, size_t out_cap, size_t *out_len,
                        const uint8_t key[FS_AEAD_KEY_LEN], const uint8_t nonce[FS_AEAD_NONCE_LEN],
                        const void *ad, size_t ad_len, const uint8_t *in, size_t in_len,
                        struct fs_err *err);

/**
 * Like fs_aead_seal with a fresh random nonce, written in front:
 * out = nonce || ciphertext || tag, *out_len = pt_len + FS_AEAD_BOX_OVERHEAD.
 * out must not overlap pt.
 * @return as fs_aead_seal.
 */
FS_WUR int fs_aead_box_seal(uint8_t *out, size_t out_cap, size_t *out_len,
                            const uint8_t key[FS_AEAD_KEY_LEN], const void *ad, size_t ad_len,
                            const void *pt, size_t pt_len, struct fs_err *err);

/**
 * Like fs_aead_box_seal, but the nonce is synthetic: the first 12 bytes of
 * SHA-256 over a label, the key, the associated data and the plaintext. The
 * same (key, ad, pt) always give the same box, so a client can rebuild a
 * message byte for byte after a restart; a nonce repeats only with the same
 * plaintext, so the only thing learned is that two boxes are equal.
 * Opened by fs_aead_box_open.
 */
FS_WUR int fs_aead_box_seal_det(uint8_t *out, size_t out_cap, size_t *out_len,
                                const uint8_t key[FS_AEAD_KEY_LEN], const void *ad, size_t ad_len,
                                const void *pt, size_t pt_len, struct fs_err *err);

/**
 * Open nonce || ciphertext || tag made by fs_aead_box_seal.
 * out needs in_len - FS_AEAD_BOX_OVERHEAD bytes and must not overlap in.
 * @return as fs_aead_open; FS_EAUTH also when in_len < FS_AEAD_BOX_OVERHEAD.
 */
FS_WUR int fs_aead_box_open(uint8_t *out, size_t out_cap, size_t *out_len,
                            const uint8_t key[FS_AEAD_KEY_LEN], const void *ad, size_t ad_len,
                            const uint8_t *in, size_t in_len, struct fs_err *err);

#endif
