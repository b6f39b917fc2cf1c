/* Our Ed25519 verification (lib/crypto/ed25519_verify.c) against OpenSSL's
 * EVP_DigestVerify, called directly here:
 *  - scalar reduction mod L against BIGNUM arithmetic;
 *  - random keys, messages and signatures (made by OpenSSL), each valid one
 *    and mutations of it (bit flips in R, S, A and the message, S + L, S = L,
 *    R or A replaced by one of the 8 points of small order or by an encoding
 *    with y >= p): the same decision as OpenSSL, except where we are stricter
 *    by design (a public key with y >= p, or x = 0 with the sign bit set),
 *    where we must reject;
 *  - signatures that verify only because [h]A is the identity (A of small
 *    order): accepted by both exactly when they should be;
 *  - the argument checks and error codes of fs_ed25519_verify;
 *  - the first verifications of the process from several threads at once.
 * A fixed-seed generator makes runs repeatable. Under the sanitizers or with
 * FS_TEST_QUICK (valgrind) the random part is 10x smaller. */
#include "crypto/ed25519.h"
#include "crypto/ed25519_int.h"
#include "test.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* splitmix64: repeatable test data (not for secrets). */
static uint64_t prng_state = 0x6564766572696679ULL;

static uint64_t prng(void)
{
    uint64_t z = (prng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void prng_bytes(uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        b[i] = (uint8_t)prng();
    }
}

/* L = 2^252 + 27742317777372353535851937790883648493, little endian. */
static const uint8_t L_le[32] = {0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7,
                                 0xa2, 0xde, 0xf9, 0xde, 0x14, 0,    0,    0,    0,    0,    0,
                                 0,    0,    0,    0,    0,    0,    0,    0,    0,    0x10};

/* The eight points of order 1, 2, 4 and 8, canonically encoded. */
static const char *small_order_hex[8] = {
    "0100000000000000000000000000000000000000000000000000000000000000",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0000000000000000000000000000000000000000000000000000000000000080",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
};

static void unhex32(const char *s, uint8_t out[32])
{
    for (int i = 0; i < 32; i++) {
        unsigned v = 0;
        for (int j = 0; j < 2; j++) {
            char c = s[2 * i + j];
            v = v * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        out[i] = (uint8_t)v;
    }
}

/* y = p + k (k <= 18, so y < 2^255), with the given sign bit. */
static void noncanonical(uint8_t out[32], unsigned k, int sign)
{
    memset(out, 0xff, 32);
    out[0] = (uint8_t)(0xed + k);
    out[31] = (uint8_t)(0x7f | (sign << 7));
}

/* The encodings we reject on purpose where OpenSSL 3.0 may accept:
 * y >= p, or x = 0 (y = 1 or y = p - 1) with the sign bit set. */
static int strict_only(const uint8_t pub[32])
{
    uint8_t y1[32] = {1}, ym1[32];
    int i;

    for (i = 1; i < 31 && pub[i] == 0xff; i++) {
    }
    if (i == 31 && (pub[31] & 0x7f) == 0x7f && pub[0] >= 0xed) {
        return 1;
    }
    y1[31] = 0x80;
    unhex32(small_order_hex[1], ym1);
    ym1[31] |= 0x80;
    return memcmp(pub, y1, 32) == 0 || memcmp(pub, ym1, 32) == 0;
}

static int ossl_verify(const uint8_t sig[64], const uint8_t pub[32], const uint8_t *msg, size_t len)
{
    static const uint8_t empty[1] = {0};
    EVP_PKEY *pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, 32);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = 0;

    if (pk != NULL && md != NULL && EVP_DigestVerifyInit(md, NULL, NULL, NULL, pk) == 1) {
        ok = EVP_DigestVerify(md, sig, 64, len > 0 ? msg : empty, len) == 1;
    }
    ERR_clear_error();
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pk);
    return ok;
}

/* Ours, through both entry points (which must agree). */
static int our_verify(const uint8_t sig[64], const uint8_t pub[32], const uint8_t *msg, size_t len)
{
    struct fs_err err = {0};
    int raw = fs_ed25519_verify_sig(sig, pub, len > 0 ? msg : NULL, len);
    int rc = fs_ed25519_verify(sig, pub, len > 0 ? msg : NULL, len, &err);

    CHECK(raw == 0 || raw == 1);
    CHECK_MSG((raw == 1 && rc == 0) || (raw == 0 && rc == FS_EAUTH), "raw %d rc %d", raw, rc);
    return raw;
}

/* OpenSSL key pair and signature from a seed. */
static int ossl_sign(const uint8_t seed[32], uint8_t pub[32], uint8_t sig[64], const uint8_t *msg,
                     size_t len)
{
    static const uint8_t empty[1] = {0};
    EVP_PKEY *pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, 32);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t pl = 32, sl = 64;
    int ok = pk != NULL && md != NULL && EVP_PKEY_get_raw_public_key(pk, pub, &pl) == 1 &&
             EVP_DigestSignInit(md, NULL, NULL, NULL, pk) == 1 &&
             EVP_DigestSign(md, sig, &sl, len > 0 ? msg : empty, len) == 1 && pl == 32 && sl == 64;

    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pk);
    return ok;
}

/* x (n little-endian bytes) as a BIGNUM. */
static BIGNUM *bn_le(const uint8_t *x, size_t n)
{
    return BN_lebin2bn(x, (int)n, NULL);
}

static void test_sc_reduce(void)
{
    BN_CTX *ctx = BN_CTX_new();
    BIGNUM *l = bn_le(L_le, 32);
    BIGNUM *x = NULL, *r = NULL;
    size_t n = t_scale(3000);

    for (size_t i = 0; i < n + 6; i++) {
        uint8_t in[64], got[32], want[32];
        if (i < n) {
            prng_bytes(in, 64);
        } else { /* 0, 2^512 - 1, L, L - 1, L + 1, 2L */
            memset(in, i == n + 1 ? 0xff : 0, 64);
            if (i >= n + 2) {
                memcpy(in, L_le, 32);
            }
            in[0] = (uint8_t)(in[0] + (i == n + 3 ? -1 : i == n + 4 ? 1 : 0));
            if (i == n + 5) {
                uint16_t carry = 0; /* 2L */
                for (int j = 0; j < 33; j++) {
                    uint16_t v = (uint16_t)((j < 32 ? L_le[j] : 0) * 2 + carry);
                    in[j] = (uint8_t)v;
                    carry = v >> 8;
                }
            }
        }
        fs_ed25519_sc_reduce64(got, in);
        x = bn_le(in, 64);
        r = BN_new();
        CHECK(x != NULL && r != NULL && BN_nnmod(r, x, l, ctx) == 1 &&
              BN_bn2lebinpad(r, want, 32) == 32);
        CHECK_MSG(memcmp(got, want, 32) == 0, "case %zu", i);
        BN_free(x);
        BN_free(r);
    }
    BN_free(l);
    BN_CTX_free(ctx);
}

enum { M_R, M_S, M_A, M_MSG, M_SPL, M_SEQL, M_RSMALL, M_ASMALL, M_RNONC, M_ANONC, M_KINDS };

static void mutate(int kind, uint8_t sig[64], uint8_t pub[32], uint8_t *msg, size_t *len)
{
    unsigned bit = (unsigned)(prng() % 256);

    switch (kind) {
    case M_R:
        sig[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        break;
    case M_S:
        sig[32 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
        break;
    case M_A:
        pub[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        break;
    case M_MSG:
        if (*len == 0) {
            msg[(*len)++] = (uint8_t)prng();
        } else {
            msg[(bit / 8) % *len] ^= (uint8_t)(1u << (bit % 8));
        }
        break;
    case M_SPL: { /* S + L: the same scalar, not reduced */
        unsigned carry = 0;
        for (int j = 0; j < 32; j++) {
            unsigned v = sig[32 + j] + L_le[j] + carry;
            sig[32 + j] = (uint8_t)v;
            carry = v >> 8;
        }
        break;
    }
    case M_SEQL:
        memcpy(sig + 32, L_le, 32);
        break;
    case M_RSMALL:
        unhex32(small_order_hex[prng() % 8], sig);
        break;
    case M_ASMALL:
        unhex32(small_order_hex[prng() % 8], pub);
        break;
    case M_RNONC:
        noncanonical(sig, (unsigned)(prng() % 19), (int)(prng() & 1));
        break;
    default:
        noncanonical(pub, (unsigned)(prng() % 19), (int)(prng() & 1));
        break;
    }
}

/* Random triples, valid and mutated: decisions equal OpenSSL's, or ours
 * rejects where we are stricter by design. */
static void test_differential(void)
{
    size_t n = t_scale(2000);
    size_t agree = 0, strict = 0, mutated = 0, accepted = 0;

    for (size_t i = 0; i < n; i++) {
        uint8_t seed[32], pub[32], sig[64], msg[200];
        size_t len = (size_t)(prng() % 130);

        prng_bytes(seed, 32);
        prng_bytes(msg, len);
        if (!ossl_sign(seed, pub, sig, msg, len)) {
            CHECK_MSG(0, "OpenSSL signing failed");
            return;
        }
        CHECK_MSG(ossl_verify(sig, pub, msg, len) == 1, "OpenSSL rejects its own signature");
        CHECK_MSG(our_verify(sig, pub, msg, len) == 1, "we reject a valid signature (%zu)", i);
        for (int m = 0; m < 3; m++) {
            uint8_t s2[64], p2[32], m2[200];
            size_t l2 = len;
            int kind = (int)(prng() % M_KINDS);
            memcpy(s2, sig, 64);
            memcpy(p2, pub, 32);
            memcpy(m2, msg, len);
            mutate(kind, s2, p2, m2, &l2);
            int o = ossl_verify(s2, p2, m2, l2);
            int u = our_verify(s2, p2, m2, l2);
            mutated++;
            accepted += (size_t)u;
            if (o == u) {
                agree++;
            } else if (strict_only(p2) && u == 0) {
                strict++;
            } else {
                CHECK_MSG(0, "triple %zu mutation %d: OpenSSL %d, ours %d", i, kind, o, u);
            }
        }
    }
    printf("  %zu valid, %zu mutated: %zu agree, %zu rejected only by us (strict A), %zu mutated "
           "accepted\n",
           n, mutated, agree, strict, accepted);
}

/* [s]B and S = s mod L from a seed, through OpenSSL's key derivation:
 * the public key is [s]B for s = the clamped first half of SHA-512(seed). */
static void base_mult(const uint8_t seed[32], uint8_t sB[32], uint8_t S[32])
{
    uint8_t d[64], wide[64] = {0}, sig[64];
    unsigned dl = 0;

    CHECK(ossl_sign(seed, sB, sig, NULL, 0));
    CHECK(EVP_Digest(seed, 32, d, &dl, EVP_sha512(), NULL) == 1 && dl == 64);
    d[0] &= 248;
    d[31] &= 127;
    d[31] |= 64;
    memcpy(wide, d, 32);
    fs_ed25519_sc_reduce64(S, wide);
}

/* h mod 8 for R, A, M (h = SHA-512(R || A || M) mod L). */
static unsigned h_mod8(const uint8_t sig[64], const uint8_t pub[32], const uint8_t *msg, size_t len)
{
    uint8_t buf[64 + 64], d[64], h[32];
    unsigned dl = 0;

    memcpy(buf, sig, 32);
    memcpy(buf + 32, pub, 32);
    memcpy(buf + 64, msg, len);
    CHECK(EVP_Digest(buf, 64 + len, d, &dl, EVP_sha512(), NULL) == 1);
    fs_ed25519_sc_reduce64(h, d);
    return h[0] & 7;
}

/* Signatures (R = [S]B, S) under a public key A of small order verify,
 * cofactorless, exactly when [h]A is the identity. Both agree on the eight
 * canonical encodings; for the non-canonical ones and x = 0 with the sign
 * bit, OpenSSL's decision is printed and ours must be "reject". */
static void test_small_order_keys(void)
{
    uint8_t seed[32], sig[64], msg[64];
    unsigned hits = 0, lenient = 0;

    prng_bytes(seed, 32);
    base_mult(seed, sig, sig + 32);
    for (int k = 0; k < 8; k++) {
        uint8_t pub[32];
        unsigned order = k == 0 ? 1 : k == 1 ? 2 : k < 4 ? 4 : 8;
        unhex32(small_order_hex[k], pub);
        CHECK(fs_ed25519_point_ok(pub));
        for (int t = 0; t < 24; t++) {
            prng_bytes(msg, sizeof msg);
            int expect = h_mod8(sig, pub, msg, sizeof msg) % order == 0;
            int o = ossl_verify(sig, pub, msg, sizeof msg);
            int u = our_verify(sig, pub, msg, sizeof msg);
            CHECK_MSG(o == expect && u == expect, "order %u: expect %d, OpenSSL %d, ours %d", order,
                      expect, o, u);
            hits += (unsigned)u;
        }
    }
    CHECK(hits > 0);
    {
        /* the identity as y = p + 1, and as x = 0 with the sign bit: [h]A is
         * the identity for every h, so only the decoding decides */
        uint8_t pubs[3][32] = {{0}};
        noncanonical(pubs[0], 1, 0);
        pubs[1][0] = 1;
        pubs[1][31] = 0x80;
        unhex32(small_order_hex[1], pubs[2]); /* (0, -1) with the sign bit, h even */
        pubs[2][31] |= 0x80;
        for (int k = 0; k < 3; k++) {
            prng_bytes(msg, sizeof msg);
            while (k == 2 && h_mod8(sig, pubs[k], msg, sizeof msg) % 2 != 0) {
                prng_bytes(msg, sizeof msg);
            }
            CHECK(strict_only(pubs[k]));
            CHECK(!fs_ed25519_point_ok(pubs[k]));
            CHECK_MSG(our_verify(sig, pubs[k], msg, sizeof msg) == 0, "strict case %d", k);
            lenient += (unsigned)ossl_verify(sig, pubs[k], msg, sizeof msg);
        }
    }
    printf("  small-order keys: %u valid signatures; stricter than OpenSSL on %u of 3 "
           "non-canonical identity keys\n",
           hits, lenient);
}

/* Strict decoding: every y >= p is refused; below p, x = 0 with the sign
 * bit is refused; points of the curve decode. */
static void test_decoding(void)
{
    uint8_t enc[32], seed[32], S[32];

    for (unsigned k = 0; k < 19; k++) {
        for (int s = 0; s < 2; s++) {
            noncanonical(enc, k, s);
            CHECK_MSG(!fs_ed25519_point_ok(enc), "y = p + %u accepted", k);
        }
    }
    for (int i = 0; i < 20; i++) {
        prng_bytes(seed, 32);
        base_mult(seed, enc, S);
        CHECK(fs_ed25519_point_ok(enc));
    }
    /* y = 2: x^2 = 3 / (4d + 1) is not a square (no point) */
    memset(enc, 0, 32);
    enc[0] = 2;
    CHECK(!fs_ed25519_point_ok(enc));
}

static void test_errors(void)
{
    struct fs_err err = {0};
    uint8_t seed[32] = {7}, pub[32], sig[64];
    uint8_t msg[3] = {1, 2, 3};

    CHECK(ossl_sign(seed, pub, sig, msg, sizeof msg));
    CHECK_OK(fs_ed25519_verify(sig, pub, msg, sizeof msg, &err), &err);
    CHECK(fs_ed25519_verify(sig, pub, NULL, 3, &err) == FS_EINVAL);
    sig[63] ^= 0x80;
    CHECK(fs_ed25519_verify(sig, pub, msg, sizeof msg, &err) == FS_EAUTH);
    CHECK(strcmp(err.msg, "ed25519: signature does not verify") == 0);
    sig[63] ^= 0x80;
    msg[0] ^= 1;
    CHECK(fs_ed25519_verify(sig, pub, msg, sizeof msg, &err) == FS_EAUTH);
}

/* The first verifications of the process, from 4 threads at once: the
 * one-time setup (pthread_once) must serve them all. */
struct thr_case {
    uint8_t pub[32], sig[64], msg[16];
    int ok;
};

static void *thr_verify(void *arg)
{
    struct thr_case *c = arg;

    c->ok = fs_ed25519_verify_sig(c->sig, c->pub, c->msg, sizeof c->msg);
    return NULL;
}

static void test_first_use_threads(void)
{
    struct thr_case c[4];
    pthread_t th[4];

    for (int i = 0; i < 4; i++) {
        uint8_t seed[32];
        prng_bytes(seed, 32);
        prng_bytes(c[i].msg, sizeof c[i].msg);
        CHECK(ossl_sign(seed, c[i].pub, c[i].sig, c[i].msg, sizeof c[i].msg));
        c[i].ok = -2;
    }
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_create(&th[i], NULL, thr_verify, &c[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CHECK_MSG(c[i].ok == 1, "thread %d: %d", i, c[i].ok);
    }
}

int main(void)
{
    RUN(test_first_use_threads); /* first: before anything has set up */
    RUN(test_sc_reduce);
    RUN(test_decoding);
    RUN(test_errors);
    RUN(test_small_order_keys);
    RUN(test_differential);
    return TEST_END("test_ed25519_verify");
}
