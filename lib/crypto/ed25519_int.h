/* Internals of Ed25519 verification (ed25519_verify.c), for ed25519.c and
 * the unit tests only: not part of the library's interface. */
#ifndef FS_CRYPTO_ED25519_INT_H
#define FS_CRYPTO_ED25519_INT_H

#include <stddef.h>
#include <stdint.h>

/**
 * RFC 8032 §5.1.7 verification, cofactorless ([S]B = R + [h]A checked as
 * encode([S]B - [h]A) == R), with strict decoding of A (§5.1.3).
 * Not constant time: every input is public.
 * @param msg borrowed; may be NULL when msg_len == 0.
 * @return 1 valid, 0 invalid, -1 the one-time setup (SHA-512) failed.
 */
int fs_ed25519_verify_sig(const uint8_t sig[64], const uint8_t pub[32], const void *msg,
                          size_t msg_len);

/** out = x mod L (x: 64 little-endian bytes, L the group order). */
void fs_ed25519_sc_reduce64(uint8_t out[32], const uint8_t x[64]);

/** 1 if enc decodes to a curve point under the strict rules of §5.1.3. */
int fs_ed25519_point_ok(const uint8_t enc[32]);

#endif
