/* Bellare-Micali oblivious transfer on P-256 (see ecot.h). */
#include "ecot.h"

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/obj_mac.h>
#include <stdlib.h>
#include <string.h>

#include "hkdf.h"
#include "rand.h"
#include "sha256.h"

#define LABEL_C   "fedsvd noise-exchange OT C"
#define LABEL_PAD "fedsvd noise-exchange OT key"
#define INFO_K    "fedsvd/noisex-ot/k"
#define INFO_R    "fedsvd/noisex-ot/r"
#define WIDE_LEN  48  /* bytes reduced modulo the order: bias below 2^-128 */
#define C_TRIES   256 /* each x is a coordinate with probability about 1/2 */

struct fs_ecot {
    EC_GROUP *group;
    EC_POINT *c;
    uint8_t c_oct[FS_ECOT_POINT_LEN];
};

/* What a round of point arithmetic holds (one per call: a fs_ecot is shared). */
struct ops {
    BN_CTX *ctx;
    BIGNUM *s; /* secret scalar */
    EC_POINT *a, *b, *z;
};

static int ops_init(const fs_ecot *g, struct ops *o, struct fs_err *err)
{
    memset(o, 0, sizeof *o);
    o->ctx = BN_CTX_secure_new();
    o->s = BN_secure_new();
    o->a = EC_POINT_new(g->group);
    o->b = EC_POINT_new(g->group);
    o->z = EC_POINT_new(g->group);
    if (o->ctx == NULL || o->s == NULL || o->a == NULL || o->b == NULL || o->z == NULL) {
        ERR_clear_error();
        return fs_err_set(err, FS_ENOMEM, "ecot: out of memory");
    }
    BN_set_flags(o->s, BN_FLG_CONSTTIME);
    return 0;
}

static void ops_clear(struct ops *o)
{
    BN_clear_free(o->s);
    EC_POINT_clear_free(o->a);
    EC_POINT_clear_free(o->b);
    EC_POINT_clear_free(o->z);
    BN_CTX_free(o->ctx);
    memset(o, 0, sizeof *o);
}

static int crypto_fail(struct fs_err *err, const char *what)
{
    ERR_clear_error();
    return fs_err_set(err, FS_ECRYPTO, "ecot: %s failed", what);
}

/* A compressed, on-curve, finite point (the OpenSSL error queue stays as it was). */
static int decode(const fs_ecot *g, EC_POINT *p, const uint8_t in[FS_ECOT_POINT_LEN], BN_CTX *ctx,
                  struct fs_err *err)
{
    int ok;

    if (in[0] != 0x02 && in[0] != 0x03) {
        return fs_err_set(err, FS_EFORMAT, "ecot: not a compressed point (prefix 0x%02x)", in[0]);
    }
    ERR_set_mark();
    ok = EC_POINT_oct2point(g->group, p, in, FS_ECOT_POINT_LEN, ctx) == 1;
    ERR_pop_to_mark();
    if (!ok || EC_POINT_is_at_infinity(g->group, p)) {
        return fs_err_set(err, FS_EFORMAT, "ecot: not a point of P-256");
    }
    return 0;
}

static int encode(const fs_ecot *g, const EC_POINT *p, uint8_t out[FS_ECOT_POINT_LEN], BN_CTX *ctx,
                  struct fs_err *err)
{
    if (EC_POINT_point2oct(g->group, p, POINT_CONVERSION_COMPRESSED, out, FS_ECOT_POINT_LEN, ctx) !=
        FS_ECOT_POINT_LEN) {
        return crypto_fail(err, "point encoding");
    }
    return 0;
}

/* out = WIDE_LEN bytes modulo the order; zero is refused (probability 2^-256). */
static int scalar_from(const fs_ecot *g, BIGNUM *out, const uint8_t wide[WIDE_LEN], BN_CTX *ctx,
                       struct fs_err *err)
{
    BIGNUM *w = BN_secure_new();
    int rc = 0;

    if (w == NULL) {
        ERR_clear_error();
        return fs_err_set(err, FS_ENOMEM, "ecot: out of memory");
    }
    BN_set_flags(w, BN_FLG_CONSTTIME);
    if (BN_bin2bn(wide, WIDE_LEN, w) == NULL ||
        BN_mod(out, w, EC_GROUP_get0_order(g->group), ctx) != 1) {
        rc = crypto_fail(err, "scalar reduction");
    } else if (BN_is_zero(out)) {
        rc = fs_err_set(err, FS_ECRYPTO, "ecot: derived scalar is zero");
    }
    BN_clear_free(w);
    return rc;
}

/* out = HKDF-SHA256(ikm, info) modulo the order. */
static int scalar_hkdf(const fs_ecot *g, BIGNUM *out, const uint8_t ikm[32], const void *info,
                       size_t info_len, BN_CTX *ctx, struct fs_err *err)
{
    uint8_t wide[WIDE_LEN];
    int rc = fs_hkdf_sha256(wide, sizeof wide, ikm, 32, NULL, 0, info, info_len, err);

    if (rc == 0) {
        rc = scalar_from(g, out, wide, ctx, err);
    }
    OPENSSL_cleanse(wide, sizeof wide);
    return rc;
}

/* k of sender i in round t for choice `choice` (0 or 1): independent
 * scalars for the two choices, so two selector sets of one round that
 * differ in j are unrelated points (k G and C - k G of one k would add up
 * to C and show the party that it was j in one of them). */
static int scalar_k(const fs_ecot *g, BIGNUM *out, const uint8_t secret[FS_ECOT_SECRET_LEN],
                    uint32_t t, uint32_t i, uint8_t choice, BN_CTX *ctx, struct fs_err *err)
{
    uint8_t info[sizeof INFO_K - 1 + 9];
    size_t n = sizeof INFO_K - 1;

    memcpy(info, INFO_K, n);
    for (int b = 0; b < 4; b++) {
        info[n + (size_t)b] = (uint8_t)(t >> (24 - 8 * b));
        info[n + 4 + (size_t)b] = (uint8_t)(i >> (24 - 8 * b));
    }
    info[n + 8] = choice;
    return scalar_hkdf(g, out, secret, info, sizeof info, ctx, err);
}

/* The first hashed x that is a curve point's, with even y. */
static int derive_c(fs_ecot *g, struct fs_err *err)
{
    uint8_t in[sizeof LABEL_C - 1 + 4];
    uint8_t x[FS_SHA256_LEN];
    BN_CTX *ctx = BN_CTX_new();
    BIGNUM *p = BN_new();
    BIGNUM *bx = BN_new();
    int rc = 0;
    int found = 0;

    if (ctx == NULL || p == NULL || bx == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "ecot: out of memory");
        goto out;
    }
    if (EC_GROUP_get_curve(g->group, p, NULL, NULL, ctx) != 1) {
        rc = crypto_fail(err, "curve parameters");
        goto out;
    }
    memcpy(in, LABEL_C, sizeof LABEL_C - 1);
    for (uint32_t ctr = 0; ctr < C_TRIES && !found && rc == 0; ctr++) {
        for (int b = 0; b < 4; b++) {
            in[sizeof LABEL_C - 1 + (size_t)b] = (uint8_t)(ctr >> (24 - 8 * b));
        }
        rc = fs_sha256(x, in, sizeof in, err);
        if (rc != 0 || BN_bin2bn(x, sizeof x, bx) == NULL || BN_cmp(bx, p) >= 0) {
            continue;
        }
        ERR_set_mark();
        found = EC_POINT_set_compressed_coordinates(g->group, g->c, bx, 0, ctx) == 1 &&
                !EC_POINT_is_at_infinity(g->group, g->c);
        ERR_pop_to_mark();
    }
    if (rc == 0 && !found) {
        rc = fs_err_set(err, FS_ECRYPTO, "ecot: no constant point found");
    }
    if (rc == 0) {
        rc = encode(g, g->c, g->c_oct, ctx, err);
    }
out:
    BN_free(bx);
    BN_free(p);
    BN_CTX_free(ctx);
    return rc;
}

int fs_ecot_new(fs_ecot **out, struct fs_err *err)
{
    fs_ecot *g;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "ecot: out is NULL");
    }
    *out = NULL;
    g = calloc(1, sizeof *g);
    if (g == NULL) {
        return fs_err_set(err, FS_ENOMEM, "ecot: out of memory");
    }
    g->group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    g->c = g->group != NULL ? EC_POINT_new(g->group) : NULL;
    if (g->c == NULL) {
        fs_ecot_free(g);
        return crypto_fail(err, "P-256 setup");
    }
    rc = derive_c(g, err);
    if (rc != 0) {
        fs_ecot_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

void fs_ecot_free(fs_ecot *g)
{
    if (g == NULL) {
        return;
    }
    EC_POINT_free(g->c);
    EC_GROUP_free(g->group);
    free(g);
}

void fs_ecot_constant(const fs_ecot *g, uint8_t out[FS_ECOT_POINT_LEN])
{
    memcpy(out, g->c_oct, FS_ECOT_POINT_LEN);
}

int fs_ecot_point_check(const fs_ecot *g, const uint8_t p[FS_ECOT_POINT_LEN], struct fs_err *err)
{
    BN_CTX *ctx = BN_CTX_new();
    EC_POINT *pt = EC_POINT_new(g->group);
    int rc;

    if (ctx == NULL || pt == NULL) {
        ERR_clear_error();
        rc = fs_err_set(err, FS_ENOMEM, "ecot: out of memory");
    } else {
        rc = decode(g, pt, p, ctx, err);
    }
    EC_POINT_free(pt);
    BN_CTX_free(ctx);
    return rc;
}

int fs_ecot_receiver_keys(const fs_ecot *g, const uint8_t secret[FS_ECOT_SECRET_LEN], uint32_t t,
                          uint32_t i, uint8_t kg[FS_ECOT_POINT_LEN], uint8_t ckg[FS_ECOT_POINT_LEN],
                          struct fs_err *err)
{
    struct ops o;
    int rc = ops_init(g, &o, err);

    /* a = k0 G; b = C - k1 G */
    if (rc == 0) {
        rc = scalar_k(g, o.s, secret, t, i, 0, o.ctx, err);
    }
    if (rc == 0 && EC_POINT_mul(g->group, o.a, o.s, NULL, NULL, o.ctx) != 1) {
        rc = crypto_fail(err, "selector arithmetic");
    }
    if (rc == 0) {
        rc = scalar_k(g, o.s, secret, t, i, 1, o.ctx, err);
    }
    if (rc == 0 && (EC_POINT_mul(g->group, o.b, o.s, NULL, NULL, o.ctx) != 1 ||
                    EC_POINT_invert(g->group, o.b, o.ctx) != 1 ||
                    EC_POINT_add(g->group, o.b, g->c, o.b, o.ctx) != 1)) {
        rc = crypto_fail(err, "selector arithmetic");
    }
    if (rc == 0) {
        rc = encode(g, o.a, kg, o.ctx, err);
    }
    if (rc == 0) {
        rc = encode(g, o.b, ckg, o.ctx, err);
    }
    ops_clear(&o);
    return rc;
}

/* pad = SHA-256(label || PK0 || R || Z). */
static int pad_of(const fs_ecot *g, const uint8_t pk0[FS_ECOT_POINT_LEN],
                  const uint8_t r_oct[FS_ECOT_POINT_LEN], const EC_POINT *z, BN_CTX *ctx,
                  uint8_t pad[FS_ECOT_MSG_LEN], struct fs_err *err)
{
    uint8_t in[sizeof LABEL_PAD - 1 + 3 * FS_ECOT_POINT_LEN];
    size_t n = sizeof LABEL_PAD - 1;
    int rc;

    memcpy(in, LABEL_PAD, n);
    memcpy(in + n, pk0, FS_ECOT_POINT_LEN);
    memcpy(in + n + FS_ECOT_POINT_LEN, r_oct, FS_ECOT_POINT_LEN);
    rc = encode(g, z, in + n + 2 * FS_ECOT_POINT_LEN, ctx, err);
    if (rc == 0) {
        _Static_assert(FS_SHA256_LEN == FS_ECOT_MSG_LEN, "pad length");
        rc = fs_sha256(pad, in, sizeof in, err);
    }
    OPENSSL_cleanse(in, sizeof in);
    return rc;
}

/* r from the key, or uniform from the CSPRNG. */
static int scalar_r(const fs_ecot *g, BIGNUM *out, const uint8_t *r_key, BN_CTX *ctx,
                    struct fs_err *err)
{
    uint8_t wide[WIDE_LEN];
    int rc;

    if (r_key != NULL) {
        return scalar_hkdf(g, out, r_key, INFO_R, sizeof INFO_R - 1, ctx, err);
    }
    rc = fs_rand_bytes(wide, sizeof wide, err);
    if (rc == 0) {
        rc = scalar_from(g, out, wide, ctx, err);
    }
    OPENSSL_cleanse(wide, sizeof wide);
    return rc;
}

int fs_ecot_send(const fs_ecot *g, const uint8_t pk0[FS_ECOT_POINT_LEN], const uint8_t *r_key,
                 const uint8_t msg[FS_ECOT_MSG_LEN], uint8_t out[FS_ECOT_RESP_LEN],
                 struct fs_err *err)
{
    uint8_t pad[FS_ECOT_MSG_LEN];
    struct ops o;
    int rc = ops_init(g, &o, err);

    if (rc == 0) {
        rc = decode(g, o.a, pk0, o.ctx, err); /* a = PK0 */
    }
    if (rc == 0 && EC_POINT_cmp(g->group, o.a, g->c, o.ctx) == 0) {
        rc = fs_err_set(err, FS_EFORMAT, "ecot: the selector is the constant itself");
    }
    /* b = PK1 = C - PK0 */
    if (rc == 0 && (EC_POINT_copy(o.b, o.a) != 1 || EC_POINT_invert(g->group, o.b, o.ctx) != 1 ||
                    EC_POINT_add(g->group, o.b, g->c, o.b, o.ctx) != 1)) {
        rc = crypto_fail(err, "response arithmetic");
    }
    if (rc == 0) {
        rc = scalar_r(g, o.s, r_key, o.ctx, err);
    }
    /* a = R = r G; z = r PK1 */
    if (rc == 0 && (EC_POINT_mul(g->group, o.a, o.s, NULL, NULL, o.ctx) != 1 ||
                    EC_POINT_mul(g->group, o.z, NULL, o.b, o.s, o.ctx) != 1)) {
        rc = crypto_fail(err, "response arithmetic");
    }
    if (rc == 0) {
        rc = encode(g, o.a, out, o.ctx, err);
    }
    if (rc == 0) {
        rc = pad_of(g, pk0, out, o.z, o.ctx, pad, err);
    }
    if (rc == 0) {
        for (size_t q = 0; q < FS_ECOT_MSG_LEN; q++) {
            out[FS_ECOT_POINT_LEN + q] = msg[q] ^ pad[q];
        }
    } else {
        OPENSSL_cleanse(out, FS_ECOT_RESP_LEN);
    }
    OPENSSL_cleanse(pad, sizeof pad);
    ops_clear(&o);
    return rc;
}

int fs_ecot_receive(const fs_ecot *g, const uint8_t secret[FS_ECOT_SECRET_LEN], uint32_t t,
                    uint32_t i, const uint8_t pk0[FS_ECOT_POINT_LEN],
                    const uint8_t resp[FS_ECOT_RESP_LEN], uint8_t msg[FS_ECOT_MSG_LEN],
                    struct fs_err *err)
{
    uint8_t pad[FS_ECOT_MSG_LEN];
    struct ops o;
    int rc = ops_init(g, &o, err);

    if (rc == 0) {
        rc = decode(g, o.a, resp, o.ctx, err); /* a = R */
    }
    if (rc == 0) {
        rc = scalar_k(g, o.s, secret, t, i, 1, o.ctx, err);
    }
    if (rc == 0 && EC_POINT_mul(g->group, o.z, NULL, o.a, o.s, o.ctx) != 1) {
        rc = crypto_fail(err, "decryption arithmetic");
    }
    if (rc == 0) {
        rc = pad_of(g, pk0, resp, o.z, o.ctx, pad, err);
    }
    if (rc == 0) {
        for (size_t q = 0; q < FS_ECOT_MSG_LEN; q++) {
            msg[q] = resp[FS_ECOT_POINT_LEN + q] ^ pad[q];
        }
    }
    OPENSSL_cleanse(pad, sizeof pad);
    ops_clear(&o);
    return rc;
}
