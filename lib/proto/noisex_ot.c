/* The "ot" mode of the noise exchange (see noisex_ot.h). */
#include "noisex_ot.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/ct.h"
#include "../crypto/rand.h"

struct nxot {
    fs_ecot *ec;
    int has_secret;
    uint8_t secret[FS_ECOT_SECRET_LEN];
};

int nxot_new(int server, const uint8_t *sk, size_t sk_len, struct nxot **out, struct fs_err *err)
{
    struct nxot *o;
    int rc = 0;

    *out = NULL;
    if (server && sk != NULL && sk_len != FS_ECOT_SECRET_LEN) {
        return fs_err_set(err, FS_EFORMAT, "noise exchange: an OT key is %d bytes, not %zu",
                          FS_ECOT_SECRET_LEN, sk_len);
    }
    o = calloc(1, sizeof *o);
    if (o == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    if (server) {
        o->has_secret = 1;
        if (sk != NULL) {
            memcpy(o->secret, sk, FS_ECOT_SECRET_LEN);
        } else {
            rc = fs_rand_bytes(o->secret, FS_ECOT_SECRET_LEN, err);
        }
    }
    if (rc == 0) {
        rc = fs_ecot_new(&o->ec, err);
    }
    if (rc != 0) {
        nxot_free(o);
        return rc;
    }
    *out = o;
    return 0;
}

void nxot_free(struct nxot *o)
{
    if (o == NULL) {
        return;
    }
    fs_ecot_free(o->ec);
    OPENSSL_cleanse(o, sizeof *o);
    free(o);
}

int nxot_sk_export(const struct nxot *o, uint8_t *buf, size_t len, struct fs_err *err)
{
    if (buf == NULL || !o->has_secret || len != FS_ECOT_SECRET_LEN) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: OT key buffer of %zu bytes, need %d",
                          len, FS_ECOT_SECRET_LEN);
    }
    memcpy(buf, o->secret, FS_ECOT_SECRET_LEN);
    return 0;
}

int nxot_pk_export(const struct nxot *o, uint8_t *buf, size_t len, struct fs_err *err)
{
    if (buf == NULL || len != FS_ECOT_POINT_LEN) {
        return fs_err_set(err, FS_EINVAL,
                          "noise exchange: OT public key buffer of %zu bytes, need %d", len,
                          FS_ECOT_POINT_LEN);
    }
    fs_ecot_constant(o->ec, buf);
    return 0;
}

int nxot_check_pk(const struct nxot *o, const uint8_t *pk, size_t len, struct fs_err *err)
{
    uint8_t c[FS_ECOT_POINT_LEN];

    fs_ecot_constant(o->ec, c);
    if (len != FS_ECOT_POINT_LEN || memcmp(pk, c, sizeof c) != 0) {
        return fs_err_set(err, FS_EFORMAT,
                          "noise exchange: not this protocol's OT constant (%zu bytes)", len);
    }
    return 0;
}

int nxot_selectors(const struct nxot *o, uint32_t t, const uint32_t *ids, size_t k, uint32_t chosen,
                   uint8_t *sel, struct fs_err *err)
{
    uint8_t kg[FS_ECOT_POINT_LEN];
    uint8_t ckg[FS_ECOT_POINT_LEN];
    int rc = 0;

    for (size_t q = 0; q < k && rc == 0; q++) {
        rc = fs_ecot_receiver_keys(o->ec, o->secret, t, ids[q], kg, ckg, err);
        if (rc == 0) {
            /* both computed, then a masked select: the time does not say j */
            uint8_t m = (uint8_t)(0u - (uint8_t)(ids[q] == chosen));
            uint8_t *dst = sel + q * FS_ECOT_POINT_LEN;
            for (size_t b = 0; b < FS_ECOT_POINT_LEN; b++) {
                dst[b] = (uint8_t)((kg[b] & m) | (ckg[b] & (uint8_t)~m));
            }
        }
    }
    OPENSSL_cleanse(kg, sizeof kg);
    OPENSSL_cleanse(ckg, sizeof ckg);
    return rc;
}

int nxot_chosen(const struct nxot *o, uint32_t t, const uint32_t *ids, size_t k, const uint8_t *sel,
                uint32_t *chosen, struct fs_err *err)
{
    uint8_t kg[FS_ECOT_POINT_LEN];
    uint8_t ckg[FS_ECOT_POINT_LEN];
    size_t found = 0;
    int rc = 0;

    for (size_t q = 0; q < k && rc == 0; q++) {
        const uint8_t *s = sel + q * FS_ECOT_POINT_LEN;
        rc = fs_ecot_receiver_keys(o->ec, o->secret, t, ids[q], kg, ckg, err);
        if (rc != 0) {
            break;
        }
        if (fs_ct_eq(s, kg, sizeof kg)) {
            *chosen = ids[q];
            found++;
        } else if (!fs_ct_eq(s, ckg, sizeof ckg)) {
            rc = fs_err_set(err, FS_EFORMAT, "noise exchange: selector %zu is not this key's", q);
        }
    }
    if (rc == 0 && found != 1) {
        rc = fs_err_set(err, FS_EFORMAT, "noise exchange: %zu parties chosen, not one", found);
    }
    OPENSSL_cleanse(kg, sizeof kg);
    OPENSSL_cleanse(ckg, sizeof ckg);
    return rc;
}

int nxot_check_response(const struct nxot *o, const uint8_t *buf, struct fs_err *err)
{
    return fs_ecot_point_check(o->ec, buf, err);
}

int nxot_seeds(const struct nxot *o, uint32_t t, const uint32_t *ids, const uint8_t *sel,
               uint8_t *const *resp, const size_t *who, size_t nw,
               uint8_t (*seeds)[FS_ECOT_MSG_LEN], struct fs_err *err)
{
    int rc = 0;

    for (size_t q = 0; q < nw && rc == 0; q++) {
        size_t w = who[q];
        rc = fs_ecot_receive(o->ec, o->secret, t, ids[w], sel + w * FS_ECOT_POINT_LEN, resp[w],
                             seeds[q], err);
        if (rc != 0) {
            fs_err_prefix(err, "noise exchange: party %u: ", ids[w]);
        }
    }
    return rc;
}

int nxot_respond(const struct nxot *o, const uint8_t *sel, const uint8_t *rr_key,
                 const uint8_t seed[FS_ECOT_MSG_LEN], uint8_t out[FS_ECOT_RESP_LEN],
                 struct fs_err *err)
{
    int rc = fs_ecot_send(o->ec, sel, rr_key, seed, out, err);

    if (rc != 0) {
        fs_err_prefix(err, "noise exchange: selector: ");
    }
    return rc;
}
