/* Property and misuse tests for lib/crypto: constant-time helpers, SHA-256
 * and HKDF argument checks, AES-256-GCM tampering (every byte of ciphertext,
 * tag, associated data, nonce, key), X25519 agreement and low-order points,
 * Ed25519 tampering and signature malleability. */
#include "crypto/aead.h"
#include "crypto/ct.h"
#include "crypto/ed25519.h"
#include "crypto/hkdf.h"
#include "crypto/rand.h"
#include "crypto/sha256.h"
#include "crypto/x25519.h"
#include "test.h"

#include <openssl/err.h>

#include <stdint.h>
#include <stdlib.h>

static void unhex32(const char *s, uint8_t out[32])
{
    for (size_t i = 0; i < 32; i++) {
        unsigned v = 0;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) {
            v = 0;
        }
        out[i] = (uint8_t)v;
    }
}

static int all_bytes(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != v) {
            return 0;
        }
    }
    return 1;
}

/* ---- ct ---- */

static void test_ct(void)
{
    uint8_t a[64], b[64];

    memset(a, 0x5a, sizeof a);
    memset(b, 0x5a, sizeof b);
    CHECK(fs_ct_eq(a, b, sizeof a) == 1);
    CHECK(fs_ct_eq(NULL, NULL, 0) == 1);
    b[63] ^= 1;
    CHECK(fs_ct_eq(a, b, sizeof a) == 0);
    b[63] ^= 1;
    b[0] ^= 0x80;
    CHECK(fs_ct_eq(a, b, sizeof a) == 0);
    b[0] ^= 0x80;
    CHECK(fs_ct_eq_len(a, 64, b, 64) == 1);
    CHECK(fs_ct_eq_len(a, 63, b, 64) == 0);
    CHECK(fs_ct_eq_len(a, 64, b, 63) == 0);
    CHECK(fs_ct_eq_len("", 0, "", 0) == 1);
    CHECK(fs_ct_eq_len("token", 5, "tokem", 5) == 0);
    CHECK(fs_ct_is_zero(a, 0) == 1);
    CHECK(fs_ct_is_zero(a, sizeof a) == 0);
    fs_wipe(a, sizeof a);
    CHECK(fs_ct_is_zero(a, sizeof a) == 1);
    fs_wipe(NULL, 10);
    fs_wipe(a, 0);
}

/* ---- sha256 / hkdf argument handling ---- */

static void test_sha256_args(void)
{
    uint8_t d[32];
    struct fs_err err = {0};

    CHECK(fs_sha256(d, NULL, 1, &err) == FS_EINVAL);
    CHECK_OK(fs_sha256(d, NULL, 0, &err), &err);
}

static void test_hkdf_args_and_separation(void)
{
    static uint8_t big[FS_HKDF_MAX_OUT + 1];
    uint8_t a[32], b[32], prk[32] = {1};
    const char ikm[] = "pairwise secret";
    struct fs_err err = {0};

    CHECK(fs_hkdf_sha256(a, 0, ikm, sizeof ikm, NULL, 0, NULL, 0, &err) == FS_EINVAL);
    CHECK(fs_hkdf_sha256(big, FS_HKDF_MAX_OUT + 1, ikm, sizeof ikm, NULL, 0, NULL, 0, &err) ==
          FS_EINVAL);
    CHECK_OK(fs_hkdf_sha256(big, FS_HKDF_MAX_OUT, ikm, sizeof ikm, NULL, 0, NULL, 0, &err), &err);
    CHECK(fs_hkdf_sha256_expand(big, FS_HKDF_MAX_OUT + 1, prk, NULL, 0, &err) == FS_EINVAL);
    CHECK_OK(fs_hkdf_sha256_expand(big, FS_HKDF_MAX_OUT, prk, NULL, 0, &err), &err);
    CHECK(fs_hkdf_sha256(a, 32, NULL, 5, NULL, 0, NULL, 0, &err) == FS_EINVAL);
    CHECK(fs_hkdf_sha256(a, 32, ikm, sizeof ikm, NULL, 3, NULL, 0, &err) == FS_EINVAL);
    CHECK(fs_hkdf_sha256(a, 32, ikm, sizeof ikm, NULL, 0, NULL, 3, &err) == FS_EINVAL);
    /* Empty IKM is allowed by RFC 5869. */
    CHECK_OK(fs_hkdf_sha256(a, 32, NULL, 0, NULL, 0, NULL, 0, &err), &err);
    /* Different info, different key; same inputs, same key. */
    CHECK_OK(fs_hkdf_sha256(a, 32, ikm, sizeof ikm, "s", 1, "share-enc", 9, &err), &err);
    CHECK_OK(fs_hkdf_sha256(b, 32, ikm, sizeof ikm, "s", 1, "mask-prg", 8, &err), &err);
    CHECK(memcmp(a, b, 32) != 0);
    CHECK_OK(fs_hkdf_sha256(b, 32, ikm, sizeof ikm, "s", 1, "share-enc", 9, &err), &err);
    CHECK(memcmp(a, b, 32) == 0);
    /* A prefix of a longer output equals the shorter output. */
    CHECK_OK(fs_hkdf_sha256(big, 100, ikm, sizeof ikm, "s", 1, "share-enc", 9, &err), &err);
    CHECK(memcmp(a, big, 32) == 0);
}

/* ---- AES-256-GCM ---- */

static void test_aead_roundtrip_sizes(void)
{
    static const size_t sizes[] = {0, 1, 15, 16, 17, 31, 33, 1000, 65536 + 3};
    uint8_t key[32], nonce[12], ad[24];
    struct fs_err err = {0};

    CHECK_OK(fs_rand_bytes(key, sizeof key, &err), &err);
    CHECK_OK(fs_rand_bytes(nonce, sizeof nonce, &err), &err);
    CHECK_OK(fs_rand_bytes(ad, sizeof ad, &err), &err);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], m = 0, k = 0;
        uint8_t *pt = malloc(n + 1), *ct = malloc(n + 16), *back = malloc(n + 1);
        if (pt == NULL || ct == NULL || back == NULL) {
            CHECK(0);
            free(pt);
            free(ct);
            free(back);
            return;
        }
        CHECK_OK(fs_rand_bytes(pt, n + 1, &err), &err);
        CHECK_OK(fs_aead_seal(ct, n + 16, &m, key, nonce, ad, sizeof ad, pt, n, &err), &err);
        CHECK(m == n + 16);
        CHECK_OK(fs_aead_open(back, n + 1, &k, key, nonce, ad, sizeof ad, ct, m, &err), &err);
        CHECK_MSG(k == n && memcmp(back, pt, n) == 0, "size %zu", n);
        /* In place (out == in) gives the same bytes as out of place. */
        CHECK_OK(fs_aead_seal(ct, n + 16, &m, key, nonce, NULL, 0, pt, n, &err), &err);
        {
            uint8_t *buf = malloc(n + 16);
            if (buf != NULL) {
                memcpy(buf, pt, n);
                CHECK_OK(fs_aead_seal(buf, n + 16, &m, key, nonce, NULL, 0, buf, n, &err), &err);
                CHECK(memcmp(buf, ct, n + 16) == 0);
                CHECK_OK(fs_aead_open(buf, n + 16, &k, key, nonce, NULL, 0, buf, n + 16, &err),
                         &err);
                CHECK(k == n && memcmp(buf, pt, n) == 0);
                free(buf);
            }
        }
        free(pt);
        free(ct);
        free(back);
    }
}

/* Open must fail with FS_EAUTH and leave out zeroed (never partial plaintext). */
static int open_rejects(const uint8_t *key, const uint8_t *nonce, const uint8_t *ad, size_t adl,
                        const uint8_t *ct, size_t ctl)
{
    uint8_t out[256];
    size_t n = 99;
    struct fs_err err = {0};
    int rc;

    memset(out, 0xaa, sizeof out);
    rc = fs_aead_open(out, sizeof out, &n, key, nonce, ad, adl, ct, ctl, &err);
    return rc == FS_EAUTH && n == 0 && all_bytes(out, ctl >= 16 ? ctl - 16 : 0, 0) &&
           all_bytes(out + (ctl >= 16 ? ctl - 16 : 0), sizeof out - (ctl >= 16 ? ctl - 16 : 0),
                     0xaa);
}

static void test_aead_tampering(void)
{
    uint8_t key[32], nonce[12], ad[20], pt[40], ct[56], bad[57], k2[32], n2[12], ad2[21];
    size_t m = 0;
    struct fs_err err = {0};

    CHECK_OK(fs_rand_bytes(key, sizeof key, &err), &err);
    CHECK_OK(fs_rand_bytes(nonce, sizeof nonce, &err), &err);
    CHECK_OK(fs_rand_bytes(ad, sizeof ad, &err), &err);
    CHECK_OK(fs_rand_bytes(pt, sizeof pt, &err), &err);
    CHECK_OK(fs_aead_seal(ct, sizeof ct, &m, key, nonce, ad, sizeof ad, pt, sizeof pt, &err), &err);
    CHECK(m == sizeof ct);
    CHECK(!open_rejects(key, nonce, ad, sizeof ad, ct, sizeof ct));
    /* Every bit of ciphertext and tag. */
    for (size_t i = 0; i < sizeof ct; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(bad, ct, sizeof ct);
            bad[i] ^= (uint8_t)(1u << bit);
            CHECK_MSG(open_rejects(key, nonce, ad, sizeof ad, bad, sizeof ct), "byte %zu bit %d", i,
                      bit);
        }
    }
    /* Every byte of the associated data; AD dropped, truncated, extended. */
    for (size_t i = 0; i < sizeof ad; i++) {
        memcpy(ad2, ad, sizeof ad);
        ad2[i] ^= 0x01;
        CHECK_MSG(open_rejects(key, nonce, ad2, sizeof ad, ct, sizeof ct), "ad byte %zu", i);
    }
    CHECK(open_rejects(key, nonce, NULL, 0, ct, sizeof ct));
    CHECK(open_rejects(key, nonce, ad, sizeof ad - 1, ct, sizeof ct));
    memcpy(ad2, ad, sizeof ad);
    ad2[sizeof ad] = 0;
    CHECK(open_rejects(key, nonce, ad2, sizeof ad2, ct, sizeof ct));
    /* Wrong nonce, wrong key. */
    for (size_t i = 0; i < sizeof nonce; i++) {
        memcpy(n2, nonce, sizeof nonce);
        n2[i] ^= 0x40;
        CHECK(open_rejects(key, n2, ad, sizeof ad, ct, sizeof ct));
    }
    memcpy(k2, key, sizeof key);
    k2[31] ^= 1;
    CHECK(open_rejects(k2, nonce, ad, sizeof ad, ct, sizeof ct));
    /* Truncated, extended, shorter than a tag, empty. */
    CHECK(open_rejects(key, nonce, ad, sizeof ad, ct, sizeof ct - 1));
    CHECK(open_rejects(key, nonce, ad, sizeof ad, ct + 1, sizeof ct - 1));
    memcpy(bad, ct, sizeof ct);
    bad[sizeof ct] = 0;
    CHECK(open_rejects(key, nonce, ad, sizeof ad, bad, sizeof bad));
    CHECK(open_rejects(key, nonce, ad, sizeof ad, ct, 15));
    CHECK(open_rejects(key, nonce, ad, sizeof ad, ct, 16));
    CHECK(open_rejects(key, nonce, ad, sizeof ad, NULL, 0));
    /* Failures leave nothing behind in OpenSSL's error queue. */
    CHECK(ERR_peek_error() == 0);
}

static void test_aead_args(void)
{
    uint8_t key[32] = {1}, nonce[12] = {2}, pt[8] = {3}, out[24];
    size_t m = 0;
    struct fs_err err = {0};

    CHECK(fs_aead_seal(out, 23, &m, key, nonce, NULL, 0, pt, 8, &err) == FS_EINVAL);
    CHECK(fs_aead_seal(out, 24, &m, key, nonce, NULL, 1, pt, 8, &err) == FS_EINVAL);
    CHECK(fs_aead_seal(out, 24, &m, key, nonce, NULL, 0, NULL, 8, &err) == FS_EINVAL);
    CHECK(fs_aead_seal(out, 24, NULL, key, nonce, NULL, 0, pt, 8, &err) == FS_EINVAL);
    CHECK_OK(fs_aead_seal(out, 24, &m, key, nonce, NULL, 0, pt, 8, &err), &err);
    CHECK(fs_aead_open(pt, 7, &m, key, nonce, NULL, 0, out, 24, &err) == FS_EINVAL);
    CHECK_OK(fs_aead_open(pt, 8, &m, key, nonce, NULL, 0, out, 24, &err), &err);
}

static void test_aead_box(void)
{
    uint8_t key[32], pt[100], box1[128], box2[128], back[100];
    const char ad[] = "from=3;to=7";
    size_t n1 = 0, n2 = 0, k = 0;
    struct fs_err err = {0};

    CHECK_OK(fs_rand_bytes(key, sizeof key, &err), &err);
    CHECK_OK(fs_rand_bytes(pt, sizeof pt, &err), &err);
    CHECK_OK(fs_aead_box_seal(box1, sizeof box1, &n1, key, ad, sizeof ad, pt, sizeof pt, &err),
             &err);
    CHECK_OK(fs_aead_box_seal(box2, sizeof box2, &n2, key, ad, sizeof ad, pt, sizeof pt, &err),
             &err);
    CHECK(n1 == sizeof pt + FS_AEAD_BOX_OVERHEAD && n2 == n1);
    /* Fresh random nonce each time. */
    CHECK(memcmp(box1, box2, FS_AEAD_NONCE_LEN) != 0);
    CHECK(memcmp(box1, box2, n1) != 0);
    CHECK_OK(fs_aead_box_open(back, sizeof back, &k, key, ad, sizeof ad, box1, n1, &err), &err);
    CHECK(k == sizeof pt && memcmp(back, pt, sizeof pt) == 0);
    CHECK_OK(fs_aead_box_open(back, sizeof back, &k, key, ad, sizeof ad, box2, n2, &err), &err);
    CHECK(k == sizeof pt && memcmp(back, pt, sizeof pt) == 0);
    /* Nonce tampering, AD of another pair, short box. */
    box1[0] ^= 1;
    CHECK(fs_aead_box_open(back, sizeof back, &k, key, ad, sizeof ad, box1, n1, &err) == FS_EAUTH);
    CHECK(all_bytes(back, sizeof back, 0));
    box1[0] ^= 1;
    CHECK(fs_aead_box_open(back, sizeof back, &k, key, "from=3;to=8", sizeof ad, box1, n1, &err) ==
          FS_EAUTH);
    CHECK(fs_aead_box_open(back, sizeof back, &k, key, ad, sizeof ad, box1, 27, &err) == FS_EAUTH);
    CHECK(fs_aead_box_seal(box1, 27, &n1, key, NULL, 0, NULL, 0, &err) == FS_EINVAL);
    CHECK_OK(fs_aead_box_seal(box1, 28, &n1, key, NULL, 0, NULL, 0, &err), &err);
    CHECK_OK(fs_aead_box_open(back, 0, &k, key, NULL, 0, box1, n1, &err), &err);
    CHECK(k == 0);
}

/* ---- X25519 ---- */

static void test_x25519_agreement(void)
{
    struct fs_err err = {0};

    for (int i = 0; i < 20; i++) {
        uint8_t a[32], ap[32], b[32], bp[32], s1[32], s2[32], p2[32];
        CHECK_OK(fs_x25519_keygen(a, ap, &err), &err);
        CHECK_OK(fs_x25519_keygen(b, bp, &err), &err);
        CHECK(memcmp(a, b, 32) != 0);
        CHECK_OK(fs_x25519_public(p2, a, &err), &err);
        CHECK(memcmp(p2, ap, 32) == 0);
        CHECK_OK(fs_x25519_shared(s1, a, bp, &err), &err);
        CHECK_OK(fs_x25519_shared(s2, b, ap, &err), &err);
        CHECK(memcmp(s1, s2, 32) == 0);
        CHECK(!fs_ct_is_zero(s1, 32));
    }
}

static void test_x25519_low_order(void)
{
    /* u-coordinates of the points of order 1, 2, 4, 8 and their non-canonical
     * encodings (the list libsodium and others reject). With a clamped
     * scalar, each gives the all-zero shared secret. */
    static const char *pts[] = {
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
        "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    };
    uint8_t priv[32], pub[32], u[32], out[32];
    struct fs_err err = {0};

    CHECK_OK(fs_x25519_keygen(priv, pub, &err), &err);
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        unhex32(pts[i], u);
        memset(out, 0xaa, sizeof out);
        CHECK_MSG(fs_x25519_shared(out, priv, u, &err) == FS_EAUTH, "point %zu", i);
        CHECK(all_bytes(out, 32, 0));
    }
    CHECK(ERR_peek_error() == 0);
}

/* Keys loaded once (fs_x25519_key): the same public key, the same secrets
 * as fs_x25519_shared, the same refusals of low-order points. */
static void test_x25519_loaded_key(void)
{
    static const char *low = "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800";
    uint8_t a[32], ap[32], pub[32], u[32], s1[32], s2[32];
    fs_x25519_key *k = NULL;
    struct fs_err err = {0};

    CHECK_OK(fs_x25519_keygen(a, ap, &err), &err);
    CHECK_OK(fs_x25519_key_new(&k, a, &err), &err);
    if (k == NULL) {
        return;
    }
    CHECK_OK(fs_x25519_key_public(k, pub, &err), &err);
    CHECK(memcmp(pub, ap, 32) == 0);
    for (int i = 0; i < 5; i++) {
        uint8_t b[32], bp[32];
        CHECK_OK(fs_x25519_keygen(b, bp, &err), &err);
        CHECK_OK(fs_x25519_key_shared(k, s1, bp, &err), &err);
        CHECK_OK(fs_x25519_shared(s2, a, bp, &err), &err);
        CHECK(memcmp(s1, s2, 32) == 0);
        CHECK_OK(fs_x25519_shared(s2, b, ap, &err), &err);
        CHECK(memcmp(s1, s2, 32) == 0);
    }
    unhex32(low, u);
    memset(s1, 0xaa, sizeof s1);
    CHECK(fs_x25519_key_shared(k, s1, u, &err) == FS_EAUTH);
    CHECK(all_bytes(s1, 32, 0));
    CHECK(ERR_peek_error() == 0);
    fs_x25519_key_free(k);
    fs_x25519_key_free(NULL);
}

/* ---- Ed25519 ---- */

/* A seed loaded once (fs_ed25519_signer): the same public key and the same
 * (deterministic) signatures as fs_ed25519_sign, the same argument checks. */
static void test_ed25519_signer(void)
{
    uint8_t sk[32], pk[32], pub[32], s1[64], s2[64], msg[50];
    fs_ed25519_signer *sg = NULL;
    struct fs_err err = {0};

    CHECK_OK(fs_ed25519_keygen(sk, pk, &err), &err);
    CHECK_OK(fs_ed25519_signer_new(&sg, sk, &err), &err);
    if (sg == NULL) {
        return;
    }
    CHECK_OK(fs_ed25519_signer_public(sg, pub, &err), &err);
    CHECK(memcmp(pub, pk, 32) == 0);
    for (size_t n = 0; n < sizeof msg; n += 7) {
        CHECK_OK(fs_rand_bytes(msg, sizeof msg, &err), &err);
        CHECK_OK(fs_ed25519_signer_sign(sg, s1, n > 0 ? msg : NULL, n, &err), &err);
        CHECK_OK(fs_ed25519_sign(s2, sk, n > 0 ? msg : NULL, n, &err), &err);
        CHECK_MSG(memcmp(s1, s2, 64) == 0, "message of %zu bytes", n);
        CHECK_OK(fs_ed25519_verify(s1, pk, n > 0 ? msg : NULL, n, &err), &err);
    }
    CHECK(fs_ed25519_signer_sign(sg, s1, NULL, 1, &err) == FS_EINVAL);
    CHECK(all_bytes(s1, 64, 0));
    fs_ed25519_signer_free(sg);
    fs_ed25519_signer_free(NULL);
}

/* s += L (the group order) on a 32-byte little-endian scalar. */
static void add_group_order(uint8_t s[32])
{
    static const char *l_hex = "edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010";
    uint8_t l[32];
    unsigned carry = 0;

    unhex32(l_hex, l);
    for (size_t i = 0; i < 32; i++) {
        unsigned v = (unsigned)s[i] + l[i] + carry;
        s[i] = (uint8_t)v;
        carry = v >> 8;
    }
}

static void test_ed25519_props(void)
{
    uint8_t sk[32], pk[32], sk2[32], pk2[32], sig[64], bad[64], pk_again[32];
    uint8_t msg[77];
    struct fs_err err = {0};

    CHECK_OK(fs_ed25519_keygen(sk, pk, &err), &err);
    CHECK_OK(fs_ed25519_keygen(sk2, pk2, &err), &err);
    CHECK_OK(fs_ed25519_public(pk_again, sk, &err), &err);
    CHECK(memcmp(pk, pk_again, 32) == 0);
    CHECK_OK(fs_rand_bytes(msg, sizeof msg, &err), &err);
    CHECK_OK(fs_ed25519_sign(sig, sk, msg, sizeof msg, &err), &err);
    CHECK_OK(fs_ed25519_verify(sig, pk, msg, sizeof msg, &err), &err);
    /* Deterministic. */
    CHECK_OK(fs_ed25519_sign(bad, sk, msg, sizeof msg, &err), &err);
    CHECK(memcmp(bad, sig, 64) == 0);
    /* Every bit of the signature. */
    for (size_t i = 0; i < 64; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(bad, sig, 64);
            bad[i] ^= (uint8_t)(1u << bit);
            CHECK_MSG(fs_ed25519_verify(bad, pk, msg, sizeof msg, &err) == FS_EAUTH,
                      "sig byte %zu bit %d", i, bit);
        }
    }
    /* Message bits, truncation, wrong key. */
    for (size_t i = 0; i < sizeof msg; i++) {
        msg[i] ^= 0x10;
        CHECK(fs_ed25519_verify(sig, pk, msg, sizeof msg, &err) == FS_EAUTH);
        msg[i] ^= 0x10;
    }
    CHECK(fs_ed25519_verify(sig, pk, msg, sizeof msg - 1, &err) == FS_EAUTH);
    CHECK(fs_ed25519_verify(sig, pk2, msg, sizeof msg, &err) == FS_EAUTH);
    /* Malleability: S + L verifies under a naive check; it must be refused. */
    memcpy(bad, sig, 64);
    add_group_order(bad + 32);
    CHECK(fs_ed25519_verify(bad, pk, msg, sizeof msg, &err) == FS_EAUTH);
    /* Not a point encoding / garbage key: refused, no crash. */
    memset(pk2, 0xff, sizeof pk2);
    CHECK(fs_ed25519_verify(sig, pk2, msg, sizeof msg, &err) == FS_EAUTH);
    CHECK(ERR_peek_error() == 0);
    /* Empty message and argument checks. */
    CHECK_OK(fs_ed25519_sign(sig, sk, NULL, 0, &err), &err);
    CHECK_OK(fs_ed25519_verify(sig, pk, NULL, 0, &err), &err);
    CHECK(fs_ed25519_sign(sig, sk, NULL, 1, &err) == FS_EINVAL);
    CHECK(all_bytes(sig, 64, 0));
    CHECK(fs_ed25519_verify(sig, pk, NULL, 1, &err) == FS_EINVAL);
}

int main(void)
{
    RUN(test_ct);
    RUN(test_sha256_args);
    RUN(test_hkdf_args_and_separation);
    RUN(test_aead_roundtrip_sizes);
    RUN(test_aead_tampering);
    RUN(test_aead_args);
    RUN(test_aead_box);
    RUN(test_x25519_agreement);
    RUN(test_x25519_low_order);
    RUN(test_x25519_loaded_key);
    RUN(test_ed25519_props);
    RUN(test_ed25519_signer);
    return TEST_END("test_crypto_props");
}
