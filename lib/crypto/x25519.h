/* X25519 Diffie-Hellman (RFC 7748) with raw 32-byte keys, on OpenSSL EVP_PKEY.
 *
 * SecAgg (lib/proto/secagg.h) uses two key pairs per party: one whose pairwise
 * secrets key the share encryption, one whose pairwise secrets seed the masks.
 * Private keys are 32 CSPRNG bytes (clamping happens inside X25519, so any 32
 * bytes are a valid private key); they are secrets: wipe them with fs_wipe. */
#ifndef FS_CRYPTO_X25519_H
#define FS_CRYPTO_X25519_H

#include <stdint.h>

#include "../core/err.h"

#define FS_X25519_KEY_LEN    32
#define FS_X25519_SHARED_LEN 32

/**
 * New key pair from the CSPRNG.
 * @param priv, pub caller's 32-byte buffers. On failure both are zeroed.
 * @return 0 or FS_ECRYPTO.
 */
FS_WUR int fs_x25519_keygen(uint8_t priv[FS_X25519_KEY_LEN], uint8_t pub[FS_X25519_KEY_LEN],
                            struct fs_err *err);

/**
 * Public key of a private key: pub = X25519(priv, 9). Lets a server check a
 * dropped party's reconstructed private key against its advertised public key.
 * @return 0 or FS_ECRYPTO.
 */
FS_WUR int fs_x25519_public(uint8_t pub[FS_X25519_KEY_LEN], const uint8_t priv[FS_X25519_KEY_LEN],
                            struct fs_err *err);

/**
 * Raw shared secret X25519(priv, peer_pub). The result is not uniformly
 * random: pass it through HKDF (fs_hkdf_sha256) before use as a key.
 * @param out caller's 32-byte buffer; zeroed on failure.
 * @param peer_pub the other party's public key (u-coordinate; the top bit is
 *        ignored as RFC 7748 requires).
 * @return 0; FS_EAUTH if peer_pub is a low-order point (the shared secret
 *         would be all zero and so known to anyone: RFC 7748 §6.1);
 *         FS_ECRYPTO if OpenSSL fails otherwise.
 */
FS_WUR int fs_x25519_shared(uint8_t out[FS_X25519_SHARED_LEN],
                            const uint8_t priv[FS_X25519_KEY_LEN],
                            const uint8_t peer_pub[FS_X25519_KEY_LEN], struct fs_err *err);

/*
 * A private key loaded once for several agreements: loading a raw private
 * key computes its public key (a scalar multiplication as costly as the
 * agreement itself), so a party that agrees with many peers under one key
 * loads it once. Results are those of fs_x25519_shared. A key object is not
 * for concurrent use by several threads; fs_x25519_key_free wipes it.
 */
typedef struct fs_x25519_key fs_x25519_key;

/** Load priv (copied). @return 0, FS_ENOMEM or FS_ECRYPTO (*out NULL). */
FS_WUR int fs_x25519_key_new(fs_x25519_key **out, const uint8_t priv[FS_X25519_KEY_LEN],
                             struct fs_err *err);

/** The key's public key, as fs_x25519_public. @return 0 or FS_ECRYPTO. */
FS_WUR int fs_x25519_key_public(const fs_x25519_key *k, uint8_t pub[FS_X25519_KEY_LEN],
                                struct fs_err *err);

/** fs_x25519_shared with the loaded key: same result, same errors. */
FS_WUR int fs_x25519_key_shared(const fs_x25519_key *k, uint8_t out[FS_X25519_SHARED_LEN],
                                const uint8_t peer_pub[FS_X25519_KEY_LEN], struct fs_err *err);

/** Wipe and free; NULL is a no-op. */
void fs_x25519_key_free(fs_x25519_key *k);

#endif
