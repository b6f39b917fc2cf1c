/* HKDF with SHA-256 (RFC 5869) on OpenSSL's EVP_KDF "HKDF".
 *
 * Used to turn a pairwise X25519 secret into AES-256-GCM keys for share
 * encryption and into PRG keys for masks (lib/proto/secagg.h); bind the purpose,
 * session id and party ids in `info` so that keys for different uses differ. */
#ifndef FS_CRYPTO_HKDF_H
#define FS_CRYPTO_HKDF_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

#define FS_HKDF_PRK_LEN 32         /* SHA-256 output */
#define FS_HKDF_MAX_OUT (255 * 32) /* RFC 5869 limit: 255 * HashLen = 8160 */

/**
 * Full HKDF: out = HKDF-Expand(HKDF-Extract(salt, ikm), info, out_len).
 * @param out caller's buffer of out_len bytes, 1 <= out_len <= FS_HKDF_MAX_OUT.
 * @param ikm input keying material, borrowed (may be NULL when ikm_len == 0).
 * @param salt borrowed; salt_len == 0 means "no salt" (HashLen zero bytes,
 *        as RFC 5869 specifies).
 * @param info borrowed context string; may be NULL when info_len == 0.
 * @return 0; FS_EINVAL for a bad length or a NULL with nonzero length;
 *         FS_ECRYPTO if OpenSSL fails. On failure out is zeroed.
 */
FS_WUR int fs_hkdf_sha256(uint8_t *out, size_t out_len, const void *ikm, size_t ikm_len,
                          const void *salt, size_t salt_len, const void *info, size_t info_len,
                          struct fs_err *err);

/**
 * HKDF-Extract only: prk = HMAC-SHA256(salt, ikm).
 * Arguments as for fs_hkdf_sha256. @return 0, FS_EINVAL or FS_ECRYPTO.
 */
FS_WUR int fs_hkdf_sha256_extract(uint8_t prk[FS_HKDF_PRK_LEN], const void *ikm, size_t ikm_len,
                                  const void *salt, size_t salt_len, struct fs_err *err);

/**
 * HKDF-Expand only, from a 32-byte pseudorandom key (e.g. the output of
 * fs_hkdf_sha256_extract, or an already uniform 32-byte secret).
 * Arguments as for fs_hkdf_sha256. @return 0, FS_EINVAL or FS_ECRYPTO.
 */
FS_WUR int fs_hkdf_sha256_expand(uint8_t *out, size_t out_len, const uint8_t prk[FS_HKDF_PRK_LEN],
                                 const void *info, size_t info_len, struct fs_err *err);

#endif
