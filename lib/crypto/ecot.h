/* Bellare-Micali oblivious transfer on P-256 (M. Bellare and S. Micali,
 * "Non-interactive oblivious transfer and applications", CRYPTO 1989), in
 * the one-message form the noise exchange needs: the receiver (the server)
 * publishes one point per sender, the sender (a party) answers with a
 * 32-byte message that the receiver can open or not, depending on a choice
 * the sender cannot see.
 *
 * C is a public point whose discrete logarithm nobody knows: the first x of
 * SHA-256("fedsvd noise-exchange OT C" || ctr, 4 bytes big-endian),
 * ctr = 0, 1, ..., that is below the field prime and the x coordinate of a
 * curve point, taken with even y. With secret scalars k0, k1 the receiver
 * sends PK0 = k0 G (choice 0: it will learn nothing) or PK0 = C - k1 G
 * (choice 1: PK1 = C - PK0 = k1 G and it learns the message). Either is a
 * uniform point, so PK0 says nothing about the choice; and since k0 and k1
 * are independent, neither do the two selectors of one sender and round
 * taken together, should a round be started twice with different choices. The sender draws r, sends
 * R = r G and msg XOR SHA-256("fedsvd noise-exchange OT key" || PK0 || R ||
 * r PK1); only who knows log_G PK1 computes r PK1 = log_G(PK1) R, and the
 * receiver knows it only for choice 1 (for choice 0 it would need log_G C).
 *
 * Scalars: k_b = HKDF-SHA256(ikm = 32-byte receiver secret, no salt,
 * info = "fedsvd/noisex-ot/k" || t || i || b, t and i 4 bytes big-endian,
 * the choice b one byte), 48 bytes
 * reduced modulo the group order; the sender's r the same way from a key
 * (info "fedsvd/noisex-ot/r") or 48 CSPRNG bytes. Points on the wire are
 * compressed SEC1 (33 bytes); decoding rejects another length or prefix,
 * points off the curve and the point at infinity.
 *
 * A fs_ecot is read-only after fs_ecot_new: several threads may use one. */
#ifndef FS_CRYPTO_ECOT_H
#define FS_CRYPTO_ECOT_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

#define FS_ECOT_POINT_LEN  33 /* compressed SEC1 */
#define FS_ECOT_SECRET_LEN 32 /* the receiver's secret */
#define FS_ECOT_MSG_LEN    32
#define FS_ECOT_RESP_LEN   (FS_ECOT_POINT_LEN + FS_ECOT_MSG_LEN) /* R || masked message */

typedef struct fs_ecot fs_ecot;

/**
 * The group and its constant C.
 * @param out new state, free with fs_ecot_free.
 * @return 0, FS_ENOMEM or FS_ECRYPTO.
 */
FS_WUR int fs_ecot_new(fs_ecot **out, struct fs_err *err);

/** Free. Accepts NULL. */
void fs_ecot_free(fs_ecot *g);

/** C, compressed. */
void fs_ecot_constant(const fs_ecot *g, uint8_t out[FS_ECOT_POINT_LEN]);

/** @return 0 if p is a valid compressed point (not infinity), else FS_EFORMAT. */
FS_WUR int fs_ecot_point_check(const fs_ecot *g, const uint8_t p[FS_ECOT_POINT_LEN],
                               struct fs_err *err);

/**
 * Receiver: both possible PK0 of sender i in round t, kg = k0 G (choice 0)
 * and ckg = C - k1 G (choice 1).
 * @return 0, FS_ENOMEM or FS_ECRYPTO.
 */
FS_WUR int fs_ecot_receiver_keys(const fs_ecot *g, const uint8_t secret[FS_ECOT_SECRET_LEN],
                                 uint32_t t, uint32_t i, uint8_t kg[FS_ECOT_POINT_LEN],
                                 uint8_t ckg[FS_ECOT_POINT_LEN], struct fs_err *err);

/**
 * Sender: out = R || msg XOR pad for the receiver's PK0.
 * @param r_key 32 secret bytes to derive r from (the same inputs then give
 *        the same bytes), or NULL for a CSPRNG r.
 * @return 0, FS_EFORMAT (pk0 not a point, or pk0 = C), FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int fs_ecot_send(const fs_ecot *g, const uint8_t pk0[FS_ECOT_POINT_LEN],
                        const uint8_t *r_key, const uint8_t msg[FS_ECOT_MSG_LEN],
                        uint8_t out[FS_ECOT_RESP_LEN], struct fs_err *err);

/**
 * Receiver, choice 1: open sender i's answer to pk0 = C - k1 G of round t.
 * (For choice 0 the result is a meaningless 32 bytes.)
 * @return 0, FS_EFORMAT (R not a point), FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int fs_ecot_receive(const fs_ecot *g, const uint8_t secret[FS_ECOT_SECRET_LEN], uint32_t t,
                           uint32_t i, const uint8_t pk0[FS_ECOT_POINT_LEN],
                           const uint8_t resp[FS_ECOT_RESP_LEN], uint8_t msg[FS_ECOT_MSG_LEN],
                           struct fs_err *err);

#endif
