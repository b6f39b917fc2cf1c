/* The "ot" mode of the noise exchange (Bellare-Micali oblivious transfer,
 * lib/crypto/ecot.h), for noise_exchange.c only: the same rounds, ids and
 * response bookkeeping as seed mode, these primitives underneath.
 *
 * Party i's selector of round t is PK0 = k0 G when i is j and C - k1 G
 * otherwise, k0 and k1 derived from the server's secret, t, i and the
 * choice; a response is
 * R || seed XOR pad (FS_ECOT_RESP_LEN bytes). */
#ifndef FS_PROTO_NOISEX_OT_H
#define FS_PROTO_NOISEX_OT_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "../crypto/ecot.h"

/* One side's state: the group, and on the server its secret. */
struct nxot;

/*
 * Server (server != 0): a fresh secret (sk NULL) or the exported one (sk,
 * exactly FS_ECOT_SECRET_LEN bytes, else FS_EFORMAT). Client: no secret,
 * sk ignored. @return 0, FS_EFORMAT, FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int nxot_new(int server, const uint8_t *sk, size_t sk_len, struct nxot **out,
                    struct fs_err *err);
void nxot_free(struct nxot *o);

/* The server's secret (FS_ECOT_SECRET_LEN bytes) and the public constant (FS_ECOT_POINT_LEN). */
FS_WUR int nxot_sk_export(const struct nxot *o, uint8_t *buf, size_t len, struct fs_err *err);
FS_WUR int nxot_pk_export(const struct nxot *o, uint8_t *buf, size_t len, struct fs_err *err);

/* Client: pk must be the constant C. @return 0 or FS_EFORMAT. */
FS_WUR int nxot_check_pk(const struct nxot *o, const uint8_t *pk, size_t len, struct fs_err *err);

/* The k selectors of round t over ids (ascending) with chosen = j, into sel. */
FS_WUR int nxot_selectors(const struct nxot *o, uint32_t t, const uint32_t *ids, size_t k,
                          uint32_t chosen, uint8_t *sel, struct fs_err *err);

/* j of restored selectors: exactly one is k0 G, all others C - k1 G (else FS_EFORMAT). */
FS_WUR int nxot_chosen(const struct nxot *o, uint32_t t, const uint32_t *ids, size_t k,
                       const uint8_t *sel, uint32_t *chosen, struct fs_err *err);

/* A response is well formed (its R a point). @return 0 or FS_EFORMAT. */
FS_WUR int nxot_check_response(const struct nxot *o, const uint8_t *buf, struct fs_err *err);

/* seeds[q] of the responders who[0..nw) (indices into ids, sel, resp). */
FS_WUR int nxot_seeds(const struct nxot *o, uint32_t t, const uint32_t *ids, const uint8_t *sel,
                      uint8_t *const *resp, const size_t *who, size_t nw,
                      uint8_t (*seeds)[FS_ECOT_MSG_LEN], struct fs_err *err);

/* Client: the response to selector sel with seed (r from rr_key when not NULL). */
FS_WUR int nxot_respond(const struct nxot *o, const uint8_t *sel, const uint8_t *rr_key,
                        const uint8_t seed[FS_ECOT_MSG_LEN], uint8_t out[FS_ECOT_RESP_LEN],
                        struct fs_err *err);

#endif
