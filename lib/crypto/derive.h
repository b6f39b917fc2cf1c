/* Keys derived from one secret. A client that must rebuild its messages
 * byte for byte after a restart draws one 32-byte secret from the OS CSPRNG
 * per participation, keeps it sealed at rest, and takes every other random
 * value of its protocol state (key pairs, Shamir coefficients, self-mask
 * seeds, noise, re-randomizers) from keys derived here: distinct labels and
 * indices give independent keys (HKDF-SHA256, RFC 5869), so nothing random
 * is ever drawn twice for one purpose. */
#ifndef FS_CRYPTO_DERIVE_H
#define FS_CRYPTO_DERIVE_H

#include <stdint.h>

#include "../core/err.h"

#define FS_DERIVE_KEY_LEN 32

/**
 * out = HKDF-SHA256(ikm = secret, salt = "fedsvd/derive/v1",
 *                   info = label || 0x00 || be32(a) || be32(b)), 32 bytes.
 * @param label a short constant naming the purpose ("secagg/mask-key", ...),
 *        at most 64 bytes.
 * @return 0, FS_EINVAL (NULL or long label), FS_ECRYPTO.
 */
FS_WUR int fs_derive_key(uint8_t out[FS_DERIVE_KEY_LEN], const uint8_t secret[FS_DERIVE_KEY_LEN],
                         const char *label, uint32_t a, uint32_t b, struct fs_err *err);

#endif
