/* Ed25519 signatures (RFC 8032, pure Ed25519) with raw 32-byte keys.
 *
 * Key generation and signing use OpenSSL (EVP_DigestSign): they handle the
 * secret seed, and OpenSSL's code is constant time. Verification is our own
 * (ed25519_verify.c): it sees only public data, so it may be variable time,
 * and it is about 2.5x faster than OpenSSL 3.0's, which matters because every
 * party verifies every other party's signature in each consistency round of
 * secure aggregation and the servers verify a request signature per request.
 * It decides as OpenSSL does (the cofactorless equation, S < L required)
 * except that it also refuses public keys that RFC 8032 says do not decode
 * and OpenSSL accepts: y >= p, and x = 0 with the sign bit set.
 *
 * Each party's long-term identity key signs its advertised X25519 keys (R0)
 * and the survivor set (R3) in secure aggregation (lib/proto/secagg.h).
 * The private key is the 32-byte RFC 8032 seed; it is a secret (fs_wipe it). */
#ifndef FS_CRYPTO_ED25519_H
#define FS_CRYPTO_ED25519_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

#define FS_ED25519_KEY_LEN 32
#define FS_ED25519_SIG_LEN 64
#define FS_ED25519_FPR_LEN 64 /* hex digits of a fingerprint, without the NUL */

/**
 * New key pair; the private seed comes from the CSPRNG.
 * @param priv, pub caller's 32-byte buffers; both zeroed on failure.
 * @return 0 or FS_ECRYPTO.
 */
FS_WUR int fs_ed25519_keygen(uint8_t priv[FS_ED25519_KEY_LEN], uint8_t pub[FS_ED25519_KEY_LEN],
                             struct fs_err *err);

/** Public key of a private seed. @return 0 or FS_ECRYPTO. */
FS_WUR int fs_ed25519_public(uint8_t pub[FS_ED25519_KEY_LEN],
                             const uint8_t priv[FS_ED25519_KEY_LEN], struct fs_err *err);

/**
 * Sign msg (deterministic, as RFC 8032 specifies).
 * @param sig caller's 64-byte buffer; zeroed on failure.
 * @param msg borrowed, msg_len bytes; may be NULL when msg_len == 0.
 * @return 0; FS_EINVAL for NULL msg with nonzero length; FS_ECRYPTO.
 */
FS_WUR int fs_ed25519_sign(uint8_t sig[FS_ED25519_SIG_LEN], const uint8_t priv[FS_ED25519_KEY_LEN],
                           const void *msg, size_t msg_len, struct fs_err *err);

/**
 * Verify sig on msg under pub.
 * @return 0 if valid; FS_EAUTH if the signature does not verify (also for a
 *         public key that is not a valid point encoding); FS_EINVAL for NULL
 *         msg with nonzero length; FS_ECRYPTO if SHA-512 cannot be set up.
 *         Thread-safe; the first call builds a table of multiples of the
 *         base point (about 1 ms, once per process).
 */
FS_WUR int fs_ed25519_verify(const uint8_t sig[FS_ED25519_SIG_LEN],
                             const uint8_t pub[FS_ED25519_KEY_LEN], const void *msg, size_t msg_len,
                             struct fs_err *err);

/*
 * A private key loaded once for several signatures: loading a raw seed
 * computes its public key (a base-point multiplication as costly as the
 * signature itself). Signatures are those of fs_ed25519_sign. A signer is
 * not for concurrent use by several threads; fs_ed25519_signer_free wipes it.
 */
typedef struct fs_ed25519_signer fs_ed25519_signer;

/** Load the seed priv (copied). @return 0, FS_ENOMEM or FS_ECRYPTO (*out NULL). */
FS_WUR int fs_ed25519_signer_new(fs_ed25519_signer **out, const uint8_t priv[FS_ED25519_KEY_LEN],
                                 struct fs_err *err);

/** The signer's public key, as fs_ed25519_public. @return 0 or FS_ECRYPTO. */
FS_WUR int fs_ed25519_signer_public(const fs_ed25519_signer *s, uint8_t pub[FS_ED25519_KEY_LEN],
                                    struct fs_err *err);

/** fs_ed25519_sign with the loaded seed: same signature, same errors. */
FS_WUR int fs_ed25519_signer_sign(const fs_ed25519_signer *s, uint8_t sig[FS_ED25519_SIG_LEN],
                                  const void *msg, size_t msg_len, struct fs_err *err);

/** Wipe and free; NULL is a no-op. */
void fs_ed25519_signer_free(fs_ed25519_signer *s);

/*
 * Fingerprints: how operators print and jobs pin a party's identity. A
 * fingerprint is the public key itself, 64 hex digits (printed in lower
 * case), so a verifier needs nothing but the fingerprint to compare a key.
 */

/** Format pub as its fingerprint (64 lower-case hex digits and a NUL). */
void fs_ed25519_fpr_format(const uint8_t pub[FS_ED25519_KEY_LEN], char out[FS_ED25519_FPR_LEN + 1]);

/**
 * Parse a fingerprint: exactly 64 hex digits (either case), nothing before
 * or after. Whether the key is a valid curve point is not checked (a key
 * that is not never verifies a signature).
 * @param pub receives the 32 bytes; zeroed on failure.
 * @return 0 or FS_EINVAL.
 */
FS_WUR int fs_ed25519_fpr_parse(const char *s, uint8_t pub[FS_ED25519_KEY_LEN], struct fs_err *err);

#endif
