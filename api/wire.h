/* The wire: JSON codecs for the protocol messages of docs/wire-secure-sum.md,
 * shared by the services and the CLI. Binary fields are base64url without
 * padding. Decoders validate shapes and lengths and fill a caller-owned
 * fs_err whose message names the offending field ("shares[3].ct: expected
 * 1024 bytes, got 1023"); they never trust sizes from the input.
 *
 * Ownership: encoders return a NEW json_t reference (json_decref it);
 * decoders borrow the json_t and fill caller-owned structs, allocating where
 * stated (free with the named function). */
#ifndef FS_API_WIRE_H
#define FS_API_WIRE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/core/err.h"
#include "../lib/proto/secagg.h"

/* ---- base64url (no padding) ---- */

/** Encode n bytes; returns a new NUL-terminated string (free()) or NULL on OOM. */
char *fs_b64url_encode(const uint8_t *in, size_t n);

/**
 * Decode a base64url string into exactly `want` bytes (fs_b64url_decode_alloc:
 * any length up to cap bytes, into a new buffer *out, free()). Rejects padding,
 * bad characters and non-zero unused trailing bits (one encoding per value).
 * @return 0; FS_EFORMAT (malformed base64url); FS_EINVAL (well-formed, wrong
 *         length: _exact); FS_ERANGE (over cap: _alloc); FS_ENOMEM.
 *
 * Decoder error codes throughout this header: missing field, wrong JSON type
 * or bad base64 is FS_EFORMAT (HTTP 400); a well-formed but wrong value (byte
 * length, id out of range or repeated, unknown field or kind) is FS_EINVAL
 * (422); more array entries than the caller's cap is FS_ERANGE (413).
 */
FS_WUR int fs_b64url_decode_exact(const char *s, uint8_t *out, size_t want, struct fs_err *err);
FS_WUR int fs_b64url_decode_alloc(const char *s, size_t cap, uint8_t **out, size_t *n,
                                  struct fs_err *err);

/* ---- R0 ---- */

/* Range of max_abs_exp: frexp of a finite nonzero double gives -1073..1024. */
#define FS_WIRE_MIN_EXP (-1074)
#define FS_WIRE_MAX_EXP 1024

/**
 * {"party", "sign_pk", "c_pk", "s_pks", "sig", "max_abs_exp"} ; has_exp = 0 → null.
 * s_pks: base64url of the mask public keys, 32 bytes per aggregation. Decode
 * gives a->s_pks a new buffer: release it with fs_secagg_adv_clear (also on
 * failure nothing is left to release).
 */
json_t *fs_wire_adv_encode(const struct fs_secagg_adv *a, int has_exp, int max_abs_exp);
FS_WUR int fs_wire_adv_decode(const json_t *j, struct fs_secagg_adv *a, int *has_exp,
                              int *max_abs_exp, struct fs_err *err);

/** {"roster": [Advert...]} ; decode allocates *out with at most max entries, their
 * mask keys in the same block: one free() releases it all. */
json_t *fs_wire_roster_encode(const struct fs_secagg_adv *r, size_t k);
FS_WUR int fs_wire_roster_decode(const json_t *j, size_t max, struct fs_secagg_adv **out, size_t *k,
                                 struct fs_err *err);

/* ---- R1 ---- */

/**
 * Upload form {"shares":[{"to":v,"ct":"…"}]} (use_from = 0) or download form
 * {"shares":[{"from":v,"ct":"…"}]} (use_from = 1). Decoding needs the party
 * whose message it is (fills the other end of each ct), the expected ct length
 * and a cap on the count. *out: free with fs_secagg_share_cts_free(*out, *k).
 */
json_t *fs_wire_shares_encode(const struct fs_secagg_share_ct *const *cts, size_t k, int use_from);
FS_WUR int fs_wire_shares_decode(const json_t *j, int use_from, uint32_t self, size_t ct_len,
                                 size_t max, struct fs_secagg_share_ct **out, size_t *k,
                                 struct fs_err *err);

/* ---- R3 / R4 ---- */

json_t *fs_wire_sig_encode(const uint8_t sig[FS_SECAGG_SIG_LEN]);
FS_WUR int fs_wire_sig_decode(const json_t *j, uint8_t sig[FS_SECAGG_SIG_LEN], struct fs_err *err);

/**
 * The array [{"party":v,"sig":"…"}] found under "signatures" in Aggregation
 * (encode returns the array; decode takes it). Decode: *ids and *sigs free().
 */
json_t *fs_wire_sigs_encode(const uint32_t *ids, const uint8_t (*sigs)[FS_SECAGG_SIG_LEN],
                            size_t k);
FS_WUR int fs_wire_sigs_decode(const json_t *arr, size_t max, uint32_t **ids,
                               uint8_t (**sigs)[FS_SECAGG_SIG_LEN], size_t *k, struct fs_err *err);

/** {"reveals":[{"about":v,"kind":"self_seed"|"mask_key","share":"…"}]}; *out free(). */
json_t *fs_wire_reveals_encode(const struct fs_secagg_reveal *rv, size_t k);
FS_WUR int fs_wire_reveals_decode(const json_t *j, size_t max, struct fs_secagg_reveal **out,
                                  size_t *k, struct fs_err *err);

/* ---- fedsvd / fedpca exponents (docs/wire-fedsvd.md) ---- */

#define FS_WIRE_SEALED_EXP_LEN 32      /* = FS_FEDSVD_SEALED_EXP_LEN */
#define FS_WIRE_PUBEXP_MIN     (-1000) /* = FS_FEDSVD_EXP_MIN */
#define FS_WIRE_PUBEXP_MAX     1000    /* = FS_FEDSVD_EXP_MAX */

/** A party's sealed exponent for one aggregation: {"sealed": "…"} (32 bytes). */
json_t *fs_wire_exp_encode(const uint8_t sealed[FS_WIRE_SEALED_EXP_LEN]);
FS_WUR int fs_wire_exp_decode(const json_t *j, uint8_t sealed[FS_WIRE_SEALED_EXP_LEN],
                              struct fs_err *err);

/**
 * The relayed list [{"party": v, "sealed": "…"}] under "exponents" in an
 * Aggregation (encode returns the array; decode takes it: ids 1..n, no
 * repeats, at most n). Decode: *ids and *sealed free().
 */
json_t *fs_wire_exps_encode(const uint32_t *ids, const uint8_t (*sealed)[FS_WIRE_SEALED_EXP_LEN],
                            size_t k);
FS_WUR int fs_wire_exps_decode(const json_t *arr, uint32_t n, uint32_t **ids,
                               uint8_t (**sealed)[FS_WIRE_SEALED_EXP_LEN], size_t *k,
                               struct fs_err *err);

/** The public exponent a party reports before its FedSVD upload: {"exponent": E}. */
json_t *fs_wire_pubexp_encode(int e);
FS_WUR int fs_wire_pubexp_decode(const json_t *j, int *e, struct fs_err *err);

/* ---- party-id arrays ---- */

json_t *fs_wire_ids_encode(const uint32_t *ids, size_t k);
/** JSON array of integers 1..n, no repeats; *out free(). */
FS_WUR int fs_wire_ids_decode(const json_t *arr, uint32_t n, uint32_t **out, size_t *k,
                              struct fs_err *err);

#endif
