/* Paillier: round trips (CRT and non-CRT), homomorphic addition and scalar
 * multiplication on random values, re-randomization, fixed-size
 * serialization, DJN randomizers (table equals plain exponentiation),
 * packed slots with negative values summed over K ciphertexts, rejection of
 * invalid input, and one 3072-bit key.
 *
 * Most cases use 512-bit keys to stay fast. FS_TEST_PAILLIER_SMALL=1 skips
 * the 3072-bit case (for valgrind runs). */
#include "crypto/paillier.h"
#include "crypto/rand.h"
#include "test.h"

#include <stdlib.h>

/* Random-value iterations per property (fewer under sanitizers). */
#define ITERS (UNDER_SAN ? 40 : 100)

static fs_paillier_sk *g_sk; /* 512-bit key shared by most cases */
static const fs_paillier_pk *g_pk;

/* GMP's memory functions when the program started (before any key). */
static void *(*g_alloc0)(size_t);
static void *(*g_realloc0)(void *, size_t, size_t);
static void (*g_free0)(void *, size_t);

/* x = uniform-ish integer in [0, bound) (64 extra bits, bias < 2^-64). */
static void rand_below(mpz_t x, const mpz_t bound)
{
    uint8_t buf[FS_PAILLIER_MAX_BITS / 8 + 8];
    size_t nb = (mpz_sizeinbase(bound, 2) + 7) / 8 + 8;
    struct fs_err err = {0};

    CHECK_OK(fs_rand_bytes(buf, nb, &err), &err);
    mpz_import(x, nb, 1, 1, 1, 0, buf);
    mpz_mod(x, x, bound);
}

static uint64_t rand_u64(void)
{
    uint64_t x = 0;
    struct fs_err err = {0};

    CHECK_OK(fs_rand_bytes(&x, sizeof x, &err), &err);
    return x;
}

/* Random value in b-bit two's complement range [-2^(b-1), 2^(b-1)). */
static int64_t rand_i64_bits(unsigned b)
{
    uint64_t x = rand_u64();
    int64_t v;

    if (b == 64) {
        memcpy(&v, &x, sizeof v);
        return v;
    }
    x &= ((uint64_t)1 << b) - 1;
    return (int64_t)x - ((int64_t)1 << (b - 1));
}

static int64_t min_bits(unsigned b)
{
    return b == 64 ? INT64_MIN : -((int64_t)1 << (b - 1));
}

static int64_t max_bits(unsigned b)
{
    return b == 64 ? INT64_MAX : ((int64_t)1 << (b - 1)) - 1;
}

/* Decrypt c with both methods, check they agree and equal want. */
static void check_decrypts_to(const fs_paillier_sk *sk, const mpz_t c, const mpz_t want)
{
    struct fs_err err = {0};
    mpz_t m1;
    mpz_t m2;

    mpz_init(m1);
    mpz_init(m2);
    CHECK_OK(fs_paillier_decrypt(sk, m1, c, &err), &err);
    CHECK_OK(fs_paillier_decrypt_nocrt(sk, m2, c, &err), &err);
    CHECK(mpz_cmp(m1, want) == 0);
    CHECK(mpz_cmp(m2, want) == 0);
    mpz_clear(m1);
    mpz_clear(m2);
}

static void test_keygen_params(void)
{
    struct fs_err err = {0};
    fs_paillier_sk *sk = NULL;

    CHECK(fs_paillier_pk_bits(g_pk) == 512);
    CHECK(fs_paillier_pk_size(g_pk) == 64);
    CHECK(fs_paillier_ct_size(g_pk) == 128);
    CHECK(mpz_odd_p(fs_paillier_pk_n(g_pk)));
    CHECK(fs_paillier_keygen(&sk, 511, &err) == FS_EINVAL);
    CHECK(sk == NULL);
    CHECK(fs_paillier_keygen(&sk, FS_PAILLIER_MIN_BITS - 2, &err) == FS_EINVAL);
    CHECK(fs_paillier_keygen(&sk, FS_PAILLIER_MAX_BITS + 2, &err) == FS_EINVAL);
    /* two keys differ; the smallest size works */
    CHECK_OK(fs_paillier_keygen(&sk, FS_PAILLIER_MIN_BITS, &err), &err);
    if (sk != NULL) {
        CHECK(fs_paillier_pk_bits(fs_paillier_sk_pub(sk)) == FS_PAILLIER_MIN_BITS);
        CHECK(!fs_paillier_pk_equal(fs_paillier_sk_pub(sk), g_pk));
    }
    fs_paillier_sk_free(sk);
    fs_paillier_sk_free(NULL);
    fs_paillier_pk_free(NULL);
    fs_paillier_djn_free(NULL);
}

static void test_roundtrip_random(void)
{
    struct fs_err err = {0};
    mpz_srcptr n = fs_paillier_pk_n(g_pk);
    mpz_t m;
    mpz_t c;

    mpz_init(m);
    mpz_init(c);
    for (int i = 0; i < ITERS; i++) {
        rand_below(m, n);
        CHECK_OK(fs_paillier_encrypt(g_pk, NULL, c, m, &err), &err);
        check_decrypts_to(g_sk, c, m);
    }
    /* edges: 0, 1, n - 1 */
    mpz_set_ui(m, 0);
    CHECK_OK(fs_paillier_encrypt(g_pk, NULL, c, m, &err), &err);
    check_decrypts_to(g_sk, c, m);
    mpz_set_ui(m, 1);
    CHECK_OK(fs_paillier_encrypt(g_pk, NULL, c, m, &err), &err);
    check_decrypts_to(g_sk, c, m);
    mpz_sub_ui(m, n, 1);
    CHECK_OK(fs_paillier_encrypt(g_pk, NULL, c, m, &err), &err);
    check_decrypts_to(g_sk, c, m);
    /* in-place decryption (m aliases c) */
    mpz_set_ui(m, 12345);
    CHECK_OK(fs_paillier_encrypt(g_pk, NULL, c, m, &err), &err);
    CHECK_OK(fs_paillier_decrypt(g_sk, c, c, &err), &err);
    CHECK(mpz_cmp_ui(c, 12345) == 0);
    /* plaintexts outside [0, n) */
    mpz_set(m, n);
    CHECK(fs_paillier_encrypt(g_pk, NULL, c, m, &err) == FS_ERANGE);
    mpz_set_si(m, -1);
    CHECK(fs_paillier_encrypt(g_pk, NULL, c, m, &err) == FS_ERANGE);
    mpz_clear(m);
    mpz_clear(c);
}

static void test_homomorphic_add(void)
{
    struct fs_err err = {0};
    mpz_srcptr n = fs_paillier_pk_n(g_pk);
    mpz_t a, b, ca, cb, cs, want;

    mpz_inits(a, b, ca, cb, cs, want, NULL);
    for (int i = 0; i < ITERS; i++) {
        rand_below(a, n);
        rand_below(b, n);
        CHECK_OK(fs_paillier_encrypt(g_pk, NULL, ca, a, &err), &err);
        CHECK_OK(fs_paillier_encrypt(g_pk, NULL, cb, b, &err), &err);
        CHECK_OK(fs_paillier_add(g_pk, cs, ca, cb, &err), &err);
        mpz_add(want, a, b);
        mpz_mod(want, want, n); /* wraps mod n about half the time */
        check_decrypts_to(g_sk, cs, want);
        /* output aliasing an input */
        CHECK_OK(fs_paillier_add(g_pk, ca, ca, cb, &err), &err);
        check_decrypts_to(g_sk, ca, want);
    }
    mpz_set_ui(cs, 0);
    CHECK(fs_paillier_add(g_pk, cs, cs, cb, &err) == FS_EINVAL);
    mpz_clears(a, b, ca, cb, cs, want, NULL);
}

static void check_scalar(const mpz_t a, const mpz_t ca, const mpz_t k)
{
    struct fs_err err = {0};
    mpz_srcptr n = fs_paillier_pk_n(g_pk);
    mpz_t ck, want;

    mpz_inits(ck, want, NULL);
    CHECK_OK(fs_paillier_mul_scalar(g_pk, ck, ca, k, &err), &err);
    mpz_mul(want, a, k);
    mpz_fdiv_r(want, want, n);
    check_decrypts_to(g_sk, ck, want);
    mpz_clears(ck, want, NULL);
}

static void test_homomorphic_scalar(void)
{
    struct fs_err err = {0};
    mpz_srcptr n = fs_paillier_pk_n(g_pk);
    mpz_t a, ca, k;

    mpz_inits(a, ca, k, NULL);
    for (int i = 0; i < ITERS; i++) {
        rand_below(a, n);
        CHECK_OK(fs_paillier_encrypt(g_pk, NULL, ca, a, &err), &err);
        mpz_set_ui(k, rand_u64() >> 1); /* 63-bit */
        check_scalar(a, ca, k);
        mpz_neg(k, k); /* negative, via the inverse */
        check_scalar(a, ca, k);
        rand_below(k, n); /* full-size */
        check_scalar(a, ca, k);
        mpz_mul_2exp(k, k, 70); /* |k| >= n, both signs */
        check_scalar(a, ca, k);
        mpz_neg(k, k);
        check_scalar(a, ca, k);
    }
    mpz_set_ui(a, 77);
    CHECK_OK(fs_paillier_encrypt(g_pk, NULL, ca, a, &err), &err);
    mpz_set_ui(k, 0);
    check_scalar(a, ca, k);
    mpz_set_si(k, -1);
    check_scalar(a, ca, k);
    mpz_set(k, n);
    check_scalar(a, ca, k);
    /* in place: ca = ca^3 */
    mpz_set_ui(k, 3);
    CHECK_OK(fs_paillier_mul_scalar(g_pk, ca, ca, k, &err), &err);
    mpz_set_ui(a, 231);
    check_decrypts_to(g_sk, ca, a);
    mpz_clears(a, ca, k, NULL);
}

static void test_rerandomize(void)
{
    struct fs_err err = {0};
    fs_paillier_djn *djn = NULL;
    mpz_t m, c, c1, c2;

    mpz_inits(m, c, c1, c2, NULL);
    CHECK_OK(fs_paillier_djn_new(&djn, g_pk, 0, 4, &err), &err);
    for (int i = 0; i < ITERS / 4 + 1; i++) {
        rand_below(m, fs_paillier_pk_n(g_pk));
        CHECK_OK(fs_paillier_encrypt(g_pk, NULL, c, m, &err), &err);
        CHECK_OK(fs_paillier_rerandomize(g_pk, NULL, c1, c, &err), &err);
        CHECK_OK(fs_paillier_rerandomize(g_pk, djn, c2, c, &err), &err);
        CHECK(mpz_cmp(c1, c) != 0);
        CHECK(mpz_cmp(c2, c) != 0);
        CHECK(mpz_cmp(c1, c2) != 0);
        check_decrypts_to(g_sk, c1, m);
        check_decrypts_to(g_sk, c2, m);
        /* two encryptions of the same plaintext differ */
        CHECK_OK(fs_paillier_encrypt(g_pk, NULL, c1, m, &err), &err);
        CHECK(mpz_cmp(c1, c) != 0);
        /* in place */
        CHECK_OK(fs_paillier_rerandomize(g_pk, djn, c, c, &err), &err);
        check_decrypts_to(g_sk, c, m);
    }
    /* the constant 1 (e.g. from mul_scalar by 0) becomes a real encryption of 0 */
    mpz_set_ui(c, 1);
    CHECK_OK(fs_paillier_rerandomize(g_pk, NULL, c1, c, &err), &err);
    CHECK(mpz_cmp_ui(c1, 1) != 0);
    mpz_set_ui(m, 0);
    check_decrypts_to(g_sk, c1, m);
    mpz_set_ui(c, 0);
    CHECK(fs_paillier_rerandomize(g_pk, NULL, c1, c, &err) == FS_EINVAL);
    fs_paillier_djn_free(djn);
    mpz_clears(m, c, c1, c2, NULL);
}

static void test_ciphertext_size(void)
{
    struct fs_err err = {0};
    size_t len = fs_paillier_ct_size(g_pk);
    uint8_t *buf = malloc(len + 1);
    mpz_t m, c, d;

    mpz_inits(m, c, d, NULL);
    for (int i = 0; buf != NULL && i < ITERS; i++) {
        /* small and large plaintexts alike */
        if (i % 2 == 0) {
            mpz_set_ui(m, (unsigned long)i);
        } else {
            rand_below(m, fs_paillier_pk_n(g_pk));
        }
        CHECK_OK(fs_paillier_encrypt(g_pk, NULL, c, m, &err), &err);
        CHECK_OK(fs_paillier_ct_export(g_pk, c, buf, len, &err), &err);
        CHECK_OK(fs_paillier_ct_import(g_pk, d, buf, len, &err), &err);
        CHECK(mpz_cmp(c, d) == 0);
        check_decrypts_to(g_sk, d, m);
    }
    /* a tiny ciphertext keeps its leading zeros and the full width */
    if (buf != NULL) {
        mpz_set_ui(c, 1);
        CHECK_OK(fs_paillier_ct_export(g_pk, c, buf, len, &err), &err);
        for (size_t i = 0; i + 1 < len; i++) {
            CHECK(buf[i] == 0);
        }
        CHECK(buf[len - 1] == 1);
        CHECK_OK(fs_paillier_ct_import(g_pk, d, buf, len, &err), &err);
        CHECK(mpz_cmp_ui(d, 1) == 0);
        /* wrong lengths */
        CHECK(fs_paillier_ct_export(g_pk, c, buf, len - 1, &err) == FS_EINVAL);
        CHECK(fs_paillier_ct_export(g_pk, c, buf, len + 1, &err) == FS_EINVAL);
        CHECK(fs_paillier_ct_import(g_pk, d, buf, len - 1, &err) == FS_EFORMAT);
        CHECK(fs_paillier_ct_import(g_pk, d, buf, len + 1, &err) == FS_EFORMAT);
    }
    free(buf);
    mpz_clears(m, c, d, NULL);
}

static void test_invalid_ciphertexts(void)
{
    struct fs_err err = {0};
    mpz_srcptr n = fs_paillier_pk_n(g_pk);
    size_t len = fs_paillier_ct_size(g_pk);
    uint8_t *buf = calloc(1, len);
    mpz_t c, m, n2, k;

    mpz_inits(c, m, n2, k, NULL);
    mpz_mul(n2, n, n);
    mpz_set_ui(k, 5);
    /* c = 0, c = n^2, c = n^2 + 1, c < 0: out of range */
    mpz_set_ui(c, 0);
    CHECK(fs_paillier_decrypt(g_sk, m, c, &err) == FS_EINVAL);
    CHECK(fs_paillier_decrypt_nocrt(g_sk, m, c, &err) == FS_EINVAL);
    mpz_set(c, n2);
    CHECK(fs_paillier_decrypt(g_sk, m, c, &err) == FS_EINVAL);
    CHECK(fs_paillier_mul_scalar(g_pk, m, c, k, &err) == FS_EINVAL);
    CHECK(fs_paillier_ct_export(g_pk, c, buf, len, &err) == FS_EINVAL);
    mpz_add_ui(c, n2, 1);
    CHECK(fs_paillier_decrypt(g_sk, m, c, &err) == FS_EINVAL);
    CHECK(fs_paillier_decrypt_nocrt(g_sk, m, c, &err) == FS_EINVAL);
    mpz_set_si(c, -3);
    CHECK(fs_paillier_decrypt(g_sk, m, c, &err) == FS_EINVAL);
    /* multiples of n (so of p and q): not invertible */
    mpz_set(c, n);
    CHECK(fs_paillier_decrypt(g_sk, m, c, &err) == FS_EINVAL);
    CHECK(fs_paillier_decrypt_nocrt(g_sk, m, c, &err) == FS_EINVAL);
    mpz_neg(k, k);
    CHECK(fs_paillier_mul_scalar(g_pk, m, c, k, &err) == FS_EINVAL);
    mpz_mul_ui(c, n, 7);
    CHECK(fs_paillier_decrypt(g_sk, m, c, &err) == FS_EINVAL);
    if (buf != NULL) {
        /* import rejects all-zero, n^2 and multiples of n */
        memset(buf, 0, len);
        CHECK(fs_paillier_ct_import(g_pk, c, buf, len, &err) == FS_EFORMAT);
        mpz_mul_ui(m, n, 3);
        mpz_export(buf + len - (mpz_sizeinbase(m, 2) + 7) / 8, NULL, 1, 1, 1, 0, m);
        CHECK(fs_paillier_ct_import(g_pk, c, buf, len, &err) == FS_EFORMAT);
        memset(buf, 0xff, len); /* 2^(8 len) - 1 >= n^2 */
        CHECK(fs_paillier_ct_import(g_pk, c, buf, len, &err) == FS_EFORMAT);
    }
    free(buf);
    mpz_clears(c, m, n2, k, NULL);
}

static void test_pk_serialization(void)
{
    struct fs_err err = {0};
    size_t len = fs_paillier_pk_size(g_pk);
    uint8_t *buf = malloc(len);
    fs_paillier_pk *pk2 = NULL;
    fs_paillier_pk *pk3 = NULL;
    mpz_t m, c, sq;

    mpz_inits(m, c, sq, NULL);
    if (buf == NULL) {
        CHECK(buf != NULL);
        return;
    }
    CHECK(fs_paillier_pk_export(g_pk, buf, len - 1, &err) == FS_EINVAL);
    CHECK_OK(fs_paillier_pk_export(g_pk, buf, len, &err), &err);
    CHECK(buf[0] != 0);
    CHECK_OK(fs_paillier_pk_import(&pk2, buf, len, &err), &err);
    if (pk2 != NULL) {
        CHECK(fs_paillier_pk_equal(pk2, g_pk));
        CHECK(fs_paillier_pk_bits(pk2) == 512);
        CHECK(fs_paillier_ct_size(pk2) == fs_paillier_ct_size(g_pk));
        /* encrypt under the imported key, decrypt with the original */
        mpz_set_ui(m, 424242);
        CHECK_OK(fs_paillier_encrypt(pk2, NULL, c, m, &err), &err);
        check_decrypts_to(g_sk, c, m);
        CHECK_OK(fs_paillier_pk_dup(&pk3, pk2, &err), &err);
        CHECK(pk3 != NULL && fs_paillier_pk_equal(pk3, g_pk));
        fs_paillier_pk_free(pk2);
        pk2 = NULL;
    }
    /* malformed keys */
    CHECK(fs_paillier_pk_import(&pk2, buf, 8, &err) == FS_ERANGE);
    CHECK(pk2 == NULL);
    buf[len - 1] &= 0xfe; /* even */
    CHECK(fs_paillier_pk_import(&pk2, buf, len, &err) == FS_EFORMAT);
    buf[0] = 0; /* leading zero */
    CHECK(fs_paillier_pk_import(&pk2, buf, len, &err) == FS_EFORMAT);
    mpz_set_str(sq, "e3d2a8f1b5c7d9ebfd1302f4a6b8cadc0ee1f3a5b7c9dbedff11", 16);
    mpz_setbit(sq, 255);
    mpz_setbit(sq, 0);
    mpz_mul(sq, sq, sq); /* a 512-bit odd perfect square */
    mpz_export(buf, NULL, 1, 1, 1, 0, sq);
    CHECK(fs_paillier_pk_import(&pk2, buf, (mpz_sizeinbase(sq, 2) + 7) / 8, &err) == FS_EFORMAT);
    mpz_set(sq, fs_paillier_pk_n(g_pk)); /* an odd 512-bit multiple of 3 */
    mpz_sub_ui(sq, sq, mpz_fdiv_ui(sq, 3));
    if (mpz_even_p(sq)) {
        mpz_sub_ui(sq, sq, 3);
    }
    mpz_export(buf, NULL, 1, 1, 1, 0, sq);
    CHECK(fs_paillier_pk_import(&pk2, buf, (mpz_sizeinbase(sq, 2) + 7) / 8, &err) == FS_EFORMAT);
    fs_paillier_pk_free(pk3);
    free(buf);
    mpz_clears(m, c, sq, NULL);
}

static void test_signed_encoding(void)
{
    struct fs_err err = {0};
    mpz_srcptr n = fs_paillier_pk_n(g_pk);
    mpz_t v, m, back, half, ca, cb;
    int64_t x = -987654321;
    int64_t y = 123456789;

    mpz_inits(v, m, back, half, ca, cb, NULL);
    mpz_sub_ui(half, n, 1);
    mpz_fdiv_q_2exp(half, half, 1);
    /* a negative and a positive value add homomorphically */
    mpz_set_si(v, (long)x);
    CHECK_OK(fs_paillier_encode_signed(g_pk, m, v, &err), &err);
    CHECK_OK(fs_paillier_encrypt(g_pk, NULL, ca, m, &err), &err);
    mpz_set_si(v, (long)y);
    CHECK_OK(fs_paillier_encode_signed(g_pk, m, v, &err), &err);
    CHECK_OK(fs_paillier_encrypt(g_pk, NULL, cb, m, &err), &err);
    CHECK_OK(fs_paillier_add(g_pk, ca, ca, cb, &err), &err);
    CHECK_OK(fs_paillier_decrypt(g_sk, m, ca, &err), &err);
    CHECK_OK(fs_paillier_decode_signed(g_pk, back, m, &err), &err);
    CHECK(mpz_cmp_si(back, (long)(x + y)) == 0);
    /* the extremes +-(n-1)/2 */
    CHECK_OK(fs_paillier_encode_signed(g_pk, m, half, &err), &err);
    CHECK_OK(fs_paillier_decode_signed(g_pk, back, m, &err), &err);
    CHECK(mpz_cmp(back, half) == 0);
    mpz_neg(v, half);
    CHECK_OK(fs_paillier_encode_signed(g_pk, m, v, &err), &err);
    CHECK(mpz_cmp(m, half) > 0);
    CHECK_OK(fs_paillier_decode_signed(g_pk, back, m, &err), &err);
    CHECK(mpz_cmp(back, v) == 0);
    mpz_add_ui(v, half, 1);
    CHECK(fs_paillier_encode_signed(g_pk, m, v, &err) == FS_ERANGE);
    mpz_set(m, n);
    CHECK(fs_paillier_decode_signed(g_pk, back, m, &err) == FS_ERANGE);
    mpz_clears(v, m, back, half, ca, cb, NULL);
}

static void test_djn(void)
{
    static const unsigned windows[] = {0, 1, 3, 4, 6, 8};
    struct fs_err err = {0};
    fs_paillier_djn *djn = NULL;
    mpz_srcptr n = fs_paillier_pk_n(g_pk);
    mpz_t a, x, y, m, c, prev;

    mpz_inits(a, x, y, m, c, prev, NULL);
    for (size_t wi = 0; wi < sizeof windows / sizeof windows[0]; wi++) {
        unsigned w = windows[wi];
        CHECK_OK(fs_paillier_djn_new(&djn, g_pk, 0, w, &err), &err);
        if (djn == NULL) {
            continue;
        }
        CHECK((fs_paillier_djn_table_bytes(djn) > 0) == (w > 0));
        /* default L = min(448, bits / 2) = 256 here */
        for (int i = 0; i < ITERS / 4 + 2; i++) {
            /* table result equals plain exponentiation */
            if (i == 0) {
                mpz_set_ui(a, 0);
            } else if (i == 1) {
                mpz_set_ui(a, 0);
                mpz_setbit(a, 256);
                mpz_sub_ui(a, a, 1); /* all ones */
            } else {
                mpz_set_ui(a, 0);
                mpz_setbit(a, 256);
                rand_below(a, a);
            }
            CHECK_OK(fs_paillier_djn_pow(djn, x, a, &err), &err);
            mpz_mul(y, n, n);
            mpz_powm(y, fs_paillier_djn_base(djn), a, y);
            CHECK(mpz_cmp(x, y) == 0);
            /* encryption through this randomizer decrypts */
            rand_below(m, n);
            CHECK_OK(fs_paillier_encrypt(g_pk, djn, c, m, &err), &err);
            check_decrypts_to(g_sk, c, m);
            /* fresh randomizers differ from each other and from 1 */
            CHECK_OK(fs_paillier_djn_rn(djn, x, &err), &err);
            CHECK(mpz_cmp_ui(x, 1) != 0);
            CHECK(mpz_cmp(x, prev) != 0);
            mpz_set(prev, x);
        }
        mpz_set_ui(a, 0);
        mpz_setbit(a, 256); /* 2^L is out of range */
        CHECK(fs_paillier_djn_pow(djn, x, a, &err) == FS_EINVAL);
        fs_paillier_djn_free(djn);
        djn = NULL;
    }
    /* hs is a non-trivial n-th residue: it decrypts to 0 */
    CHECK_OK(fs_paillier_djn_new(&djn, g_pk, 100, 5, &err), &err);
    if (djn != NULL) {
        mpz_set_ui(m, 0);
        check_decrypts_to(g_sk, fs_paillier_djn_base(djn), m);
        mpz_set_ui(a, 0);
        mpz_setbit(a, 99);
        mpz_add_ui(a, a, 12345);
        CHECK_OK(fs_paillier_djn_pow(djn, x, a, &err), &err);
        mpz_mul(y, n, n);
        mpz_powm(y, fs_paillier_djn_base(djn), a, y);
        CHECK(mpz_cmp(x, y) == 0);
    }
    fs_paillier_djn_free(djn);
    djn = NULL;
    /* parameter checks */
    CHECK(fs_paillier_djn_new(&djn, g_pk, 32, 4, &err) == FS_EINVAL);
    CHECK(fs_paillier_djn_new(&djn, g_pk, 513, 4, &err) == FS_EINVAL);
    CHECK(fs_paillier_djn_new(&djn, g_pk, 0, FS_PAILLIER_DJN_MAX_WINDOW + 1, &err) == FS_EINVAL);
    CHECK(djn == NULL);
    mpz_clears(a, x, y, m, c, prev, NULL);
}

/* Sum K packed ciphertexts of random b-bit values (and extremes), unpack. */
static void check_packed_sums(const fs_paillier_sk *sk, fs_paillier_djn *djn, unsigned b,
                              unsigned K, unsigned nct, int extremes)
{
    const fs_paillier_pk *pk = fs_paillier_sk_pub(sk);
    struct fs_paillier_packing pp;
    struct fs_err err = {0};
    int64_t *v = NULL;
    int64_t *got = NULL;
    int64_t *want = NULL; /* |sum| <= K 2^(b-1) <= 2^63 by the layout's rule */
    mpz_t m, c, acc;
    size_t slots;

    CHECK_OK(fs_paillier_packing_init(&pp, pk, b, K, &err), &err);
    if (pp.slots == 0) {
        return;
    }
    slots = pp.slots;
    v = malloc(slots * sizeof *v);
    got = malloc(slots * sizeof *got);
    want = calloc(slots, sizeof *want);
    mpz_inits(m, c, acc, NULL);
    if (v == NULL || got == NULL || want == NULL) {
        CHECK(0);
        goto out;
    }
    for (unsigned k = 0; k < nct; k++) {
        for (size_t s = 0; s < slots; s++) {
            if (extremes == 1) {
                v[s] = (s % 2 == 0) ? min_bits(b) : max_bits(b);
            } else if (extremes == 2) {
                v[s] = min_bits(b);
            } else {
                v[s] = rand_i64_bits(b);
            }
            want[s] += v[s];
        }
        CHECK_OK(fs_paillier_pack(&pp, pk, v, slots, m, &err), &err);
        /* plaintext-level round trip of a single packing */
        CHECK_OK(fs_paillier_unpack(&pp, pk, m, got, slots, &err), &err);
        CHECK(memcmp(got, v, slots * sizeof *v) == 0);
        CHECK_OK(fs_paillier_encrypt(pk, djn, c, m, &err), &err);
        if (k == 0) {
            mpz_set(acc, c);
        } else {
            CHECK_OK(fs_paillier_add(pk, acc, acc, c, &err), &err);
        }
    }
    CHECK_OK(fs_paillier_decrypt(sk, m, acc, &err), &err);
    CHECK_OK(fs_paillier_unpack(&pp, pk, m, got, slots, &err), &err);
    for (size_t s = 0; s < slots; s++) {
        CHECK_MSG(got[s] == want[s], "b=%u K=%u slot %zu", b, K, s);
    }
out:
    free(v);
    free(got);
    free(want);
    mpz_clears(m, c, acc, NULL);
}

static void test_packing(void)
{
    struct fs_err err = {0};
    struct fs_paillier_packing pp;
    fs_paillier_djn *djn = NULL;
    int64_t v[64];
    int64_t got[64];
    mpz_t m, c, k;

    mpz_inits(m, c, k, NULL);
    CHECK_OK(fs_paillier_djn_new(&djn, g_pk, 0, 4, &err), &err);
    /* layout: w = b + ceil(log2 K) + 1, slots = floor((bits - 1) / w) */
    CHECK_OK(fs_paillier_packing_init(&pp, g_pk, 40, 100, &err), &err);
    CHECK(pp.slot_bits == 48 && pp.slots == 511 / 48);
    CHECK_OK(fs_paillier_packing_init(&pp, g_pk, 64, 1, &err), &err);
    CHECK(pp.slot_bits == 65 && pp.slots == 7);
    CHECK_OK(fs_paillier_packing_init(&pp, g_pk, 16, 8, &err), &err);
    CHECK(pp.slot_bits == 20 && pp.slots == 25);
    CHECK(fs_paillier_packing_init(&pp, g_pk, 64, 2, &err) == FS_ERANGE);
    CHECK(fs_paillier_packing_init(&pp, g_pk, 0, 2, &err) == FS_EINVAL);
    CHECK(fs_paillier_packing_init(&pp, g_pk, 8, 0, &err) == FS_EINVAL);

    /* random negative and positive values summed over K ciphertexts */
    check_packed_sums(g_sk, NULL, 16, 8, 8, 0);
    check_packed_sums(g_sk, djn, 16, 7, 7, 0);
    check_packed_sums(g_sk, djn, 16, 7, 3, 0); /* fewer than K: no offsets to fix */
    check_packed_sums(g_sk, djn, 40, 100, UNDER_SAN ? 10 : 100, 0);
    check_packed_sums(g_sk, djn, 64, 1, 1, 0);
    check_packed_sums(g_sk, djn, 33, 1u << 20, 5, 0);
    /* extremes at the bound: K copies of the most negative / alternating */
    check_packed_sums(g_sk, djn, 16, 8, 8, 2);
    check_packed_sums(g_sk, djn, 16, 8, 8, 1);
    check_packed_sums(g_sk, djn, 12, 5, 5, 2);
    check_packed_sums(g_sk, djn, 63, 2, 2, 2); /* slot sum -2^63 */
    check_packed_sums(g_sk, djn, 63, 2, 2, 1);
    check_packed_sums(g_sk, djn, 64, 1, 1, 1);

    /* a selector bit times a packed ciphertext: 0 clears, 1 keeps, -1 negates */
    CHECK_OK(fs_paillier_packing_init(&pp, g_pk, 20, 4, &err), &err);
    for (size_t s = 0; s < pp.slots; s++) {
        v[s] = rand_i64_bits(20);
    }
    CHECK_OK(fs_paillier_pack(&pp, g_pk, v, pp.slots, m, &err), &err);
    CHECK_OK(fs_paillier_encrypt(g_pk, djn, c, m, &err), &err);
    for (long sel = -1; sel <= 1; sel++) {
        mpz_t cs;
        mpz_init(cs);
        mpz_set_si(k, sel);
        CHECK_OK(fs_paillier_mul_scalar(g_pk, cs, c, k, &err), &err);
        CHECK_OK(fs_paillier_rerandomize(g_pk, djn, cs, cs, &err), &err);
        CHECK_OK(fs_paillier_decrypt(g_sk, m, cs, &err), &err);
        CHECK_OK(fs_paillier_unpack(&pp, g_pk, m, got, pp.slots, &err), &err);
        for (size_t s = 0; s < pp.slots; s++) {
            CHECK(got[s] == sel * v[s]);
        }
        mpz_clear(cs);
    }

    /* errors: value out of range, too many values, overflow, partial unpack */
    CHECK_OK(fs_paillier_packing_init(&pp, g_pk, 8, 2, &err), &err);
    for (size_t s = 0; s < pp.slots; s++) {
        v[s] = -128;
    }
    v[3] = 128;
    CHECK(fs_paillier_pack(&pp, g_pk, v, pp.slots, m, &err) == FS_ERANGE);
    v[3] = -129;
    CHECK(fs_paillier_pack(&pp, g_pk, v, pp.slots, m, &err) == FS_ERANGE);
    v[3] = -128;
    CHECK(fs_paillier_pack(&pp, g_pk, v, (size_t)pp.slots + 1, m, &err) == FS_EINVAL);
    CHECK_OK(fs_paillier_pack(&pp, g_pk, v, pp.slots, m, &err), &err);
    /* three summands of -128 where the layout allows two */
    mpz_mul_ui(m, m, 3);
    mpz_mod(m, m, fs_paillier_pk_n(g_pk));
    CHECK(fs_paillier_unpack(&pp, g_pk, m, got, pp.slots, &err) == FS_ERANGE);
    /* unpacking fewer slots than were filled is detected */
    CHECK_OK(fs_paillier_pack(&pp, g_pk, v, pp.slots, m, &err), &err);
    CHECK(fs_paillier_unpack(&pp, g_pk, m, got, pp.slots - 1, &err) == FS_ERANGE);
    /* a partly filled plaintext unpacks with its own count; empty is 0 */
    CHECK_OK(fs_paillier_pack(&pp, g_pk, v, 5, m, &err), &err);
    CHECK_OK(fs_paillier_unpack(&pp, g_pk, m, got, 5, &err), &err);
    CHECK(memcmp(got, v, 5 * sizeof *v) == 0);
    CHECK_OK(fs_paillier_pack(&pp, g_pk, v, 0, m, &err), &err);
    CHECK(mpz_sgn(m) == 0);
    /* a layout for another key size is refused */
    pp.slots += 1;
    CHECK(fs_paillier_pack(&pp, g_pk, v, 1, m, &err) == FS_EINVAL);
    fs_paillier_djn_free(djn);
    mpz_clears(m, c, k, NULL);
}

/* The production size: one 3072-bit key, textbook and DJN+table encryption,
 * CRT decryption, serialized sizes, and a packed sum. */
static void test_3072(void)
{
    struct fs_err err = {0};
    fs_paillier_sk *sk = NULL;
    fs_paillier_djn *djn = NULL;
    const fs_paillier_pk *pk;
    struct fs_paillier_packing pp;
    mpz_t m, c, c2, d;

    if (getenv("FS_TEST_PAILLIER_SMALL") != NULL) {
        printf("  (3072-bit case skipped: FS_TEST_PAILLIER_SMALL)\n");
        return;
    }
    mpz_inits(m, c, c2, d, NULL);
    CHECK_OK(fs_paillier_keygen(&sk, FS_PAILLIER_DEFAULT_BITS, &err), &err);
    if (sk == NULL) {
        goto out;
    }
    pk = fs_paillier_sk_pub(sk);
    CHECK(fs_paillier_pk_bits(pk) == 3072);
    CHECK(fs_paillier_pk_size(pk) == 384);
    CHECK(fs_paillier_ct_size(pk) == 768);
    rand_below(m, fs_paillier_pk_n(pk));
    CHECK_OK(fs_paillier_encrypt(pk, NULL, c, m, &err), &err);
    check_decrypts_to(sk, c, m);
    CHECK_OK(fs_paillier_djn_new(&djn, pk, 0, FS_PAILLIER_DJN_WINDOW, &err), &err);
    if (djn != NULL) {
        CHECK_OK(fs_paillier_encrypt(pk, djn, c2, m, &err), &err);
        CHECK(mpz_cmp(c, c2) != 0);
        CHECK_OK(fs_paillier_decrypt(sk, d, c2, &err), &err);
        CHECK(mpz_cmp(d, m) == 0);
        CHECK_OK(fs_paillier_add(pk, c, c, c2, &err), &err);
        mpz_mul_2exp(m, m, 1);
        mpz_mod(m, m, fs_paillier_pk_n(pk));
        CHECK_OK(fs_paillier_decrypt(sk, d, c, &err), &err);
        CHECK(mpz_cmp(d, m) == 0);
    }
    /* the elementwise noise exchange layout: 57-bit values, 100 parties */
    CHECK_OK(fs_paillier_packing_init(&pp, pk, 57, 100, &err), &err);
    CHECK(pp.slot_bits == 65 && pp.slots == 47);
    check_packed_sums(sk, djn, 57, 100, UNDER_SAN ? 4 : 20, 0);
    check_packed_sums(sk, djn, 64, 1, 1, 1);
out:
    fs_paillier_djn_free(djn);
    fs_paillier_sk_free(sk);
    mpz_clears(m, c, c2, d, NULL);
}

/* Making a private key installs GMP memory functions that wipe what they
 * free: they are no longer GMP's defaults, and they are the ones
 * fs_paillier_gmp_wipe_on_free installs. Then the free function is run on a
 * block of our own, and the block's bytes past glibc's free-list links must
 * be zero (read after free: only where no sanitizer or valgrind watches). */
static void test_gmp_wipe_installed(void)
{
    void *(*a1)(size_t) = NULL;
    void *(*r1)(void *, size_t, size_t) = NULL;
    void (*f1)(void *, size_t) = NULL;
    void *(*a2)(size_t) = NULL;
    void *(*r2)(void *, size_t, size_t) = NULL;
    void (*f2)(void *, size_t) = NULL;

    mp_get_memory_functions(&a1, &r1, &f1);
    CHECK(a1 != g_alloc0 || r1 != g_realloc0 || f1 != g_free0);
    CHECK(f1 != g_free0 && r1 != g_realloc0);
    fs_paillier_gmp_wipe_on_free(); /* idempotent: the same functions */
    mp_get_memory_functions(&a2, &r2, &f2);
    CHECK(a1 == a2 && r1 == r2 && f1 == f2);
    {
        /* realloc keeps the content it moves */
        uint8_t *p = a1(64);
        for (int i = 0; i < 64; i++) {
            p[i] = (uint8_t)i;
        }
        p = r1(p, 64, 4096);
        int same = 1;
        for (int i = 0; i < 64; i++) {
            same &= p[i] == (uint8_t)i;
        }
        CHECK(same);
        f1(p, 4096);
    }
#if defined(__GLIBC__)
    {
        const char *pre = getenv("LD_PRELOAD");
        int watched = UNDER_SAN || (pre != NULL && strstr(pre, "vgpreload") != NULL);
        if (!watched) {
            /* glibc keeps a freed 512-byte block in its per-thread cache and
             * writes two pointers at its start; the rest keeps whatever the
             * free function left there */
            volatile uint8_t *p = a1(512);
            size_t left = 0;
            for (size_t i = 0; i < 512; i++) {
                p[i] = 0xA5;
            }
            f1((void *)p, 512);
            for (size_t i = 32; i < 512; i++) {
                left += p[i] == 0xA5;
            }
            CHECK_MSG(left == 0, "%zu of 480 bytes not wiped", left);
        }
    }
#endif
}

/* fs_paillier_decrypt_packed: the same plaintext as decrypting the product
 * prod c_t^(2^(shift t)) mod n^2, i.e. sum m_t 2^(shift t) mod n, for
 * random plaintexts, several counts and shifts; bad arguments refused. */
static void test_decrypt_packed(void)
{
    struct fs_err err = {0};
    mpz_srcptr n = fs_paillier_pk_n(g_pk);
    mpz_t c[6], m[6], prod, t, e, want, got, n2;
    mpz_srcptr cs[6];
    static const unsigned shifts[] = {1, 64, 100};

    mpz_inits(prod, t, e, want, got, n2, NULL);
    mpz_mul(n2, n, n);
    for (int i = 0; i < 6; i++) {
        mpz_inits(c[i], m[i], NULL);
        cs[i] = c[i];
    }
    for (int it = 0; it < ITERS / 10; it++) {
        for (size_t k = 0; k < sizeof shifts / sizeof shifts[0]; k++) {
            size_t cnt = 1 + (size_t)(rand_u64() % 6);
            unsigned sh = shifts[k];
            mpz_set_ui(prod, 1);
            mpz_set_ui(want, 0);
            mpz_set_ui(e, 0);
            mpz_setbit(e, sh);
            for (size_t q = cnt; q-- > 0;) {
                rand_below(m[q], n);
                CHECK_OK(fs_paillier_encrypt(g_pk, NULL, c[q], m[q], &err), &err);
                if (q + 1 < cnt) {
                    mpz_powm(prod, prod, e, n2);
                    mpz_mul_2exp(want, want, sh);
                }
                mpz_mul(prod, prod, c[q]);
                mpz_mod(prod, prod, n2);
                mpz_add(want, want, m[q]);
            }
            mpz_mod(want, want, n);
            CHECK_OK(fs_paillier_decrypt_packed(g_sk, got, cs, cnt, sh, &err), &err);
            CHECK(mpz_cmp(got, want) == 0);
            CHECK_OK(fs_paillier_decrypt(g_sk, t, prod, &err), &err);
            CHECK(mpz_cmp(t, got) == 0);
        }
    }
    CHECK(fs_paillier_decrypt_packed(g_sk, got, cs, 0, 64, &err) == FS_EINVAL);
    CHECK(fs_paillier_decrypt_packed(g_sk, got, cs, 2, 0, &err) == FS_EINVAL);
    mpz_set_ui(c[1], 0); /* out of range */
    CHECK(fs_paillier_decrypt_packed(g_sk, got, cs, 2, 64, &err) == FS_EINVAL);
    mpz_set(c[1], n); /* not invertible */
    CHECK(fs_paillier_decrypt_packed(g_sk, got, cs, 2, 64, &err) == FS_EINVAL);
    for (int i = 0; i < 6; i++) {
        mpz_clears(c[i], m[i], NULL);
    }
    mpz_clears(prod, t, e, want, got, n2, NULL);
}

/* fs_paillier_decrypt_sum_p: the product of up to 6 ciphertexts whose
 * plaintexts sum below p decrypts to that sum (as fs_paillier_decrypt of
 * the product mod n^2), with encryptions of 0 among them; a sum at or
 * above p decrypts modulo p; bad arguments refused. */
static void test_decrypt_sum_p(void)
{
    struct fs_err err = {0};
    mpz_srcptr n = fs_paillier_pk_n(g_pk);
    mpz_t c[6], m[6], prod, want, got, n2, bound;
    mpz_srcptr cs[6];

    mpz_inits(prod, want, got, n2, bound, NULL);
    mpz_mul(n2, n, n);
    /* each plaintext below 2^(bits/2 - 4): the sum of 6 stays below p */
    mpz_setbit(bound, fs_paillier_pk_bits(g_pk) / 2 - 4);
    for (int i = 0; i < 6; i++) {
        mpz_inits(c[i], m[i], NULL);
        cs[i] = c[i];
    }
    for (int it = 0; it < ITERS / 10; it++) {
        size_t cnt = 1 + (size_t)(rand_u64() % 6);
        mpz_set_ui(prod, 1);
        mpz_set_ui(want, 0);
        for (size_t q = 0; q < cnt; q++) {
            rand_below(m[q], bound);
            if (rand_u64() % 4 == 0) {
                mpz_set_ui(m[q], 0);
            }
            CHECK_OK(fs_paillier_encrypt(g_pk, NULL, c[q], m[q], &err), &err);
            mpz_mul(prod, prod, c[q]);
            mpz_mod(prod, prod, n2);
            mpz_add(want, want, m[q]);
        }
        CHECK_OK(fs_paillier_decrypt_sum_p(g_sk, got, cs, cnt, &err), &err);
        CHECK(mpz_cmp(got, want) == 0);
        CHECK_OK(fs_paillier_decrypt(g_sk, want, prod, &err), &err);
        CHECK(mpz_cmp(got, want) == 0);
    }
    /* n - 1 = p q - 1 is beyond the bound: it decrypts to (n - 1) mod p =
     * p - 1, so got + 1 is a proper factor of n */
    mpz_sub_ui(m[0], n, 1);
    CHECK_OK(fs_paillier_encrypt(g_pk, NULL, c[0], m[0], &err), &err);
    CHECK_OK(fs_paillier_decrypt_sum_p(g_sk, got, cs, 1, &err), &err);
    mpz_add_ui(got, got, 1);
    CHECK(mpz_cmp_ui(got, 1) > 0 && mpz_cmp(got, n) < 0 && mpz_divisible_p(n, got));
    CHECK(fs_paillier_decrypt_sum_p(g_sk, got, cs, 0, &err) == FS_EINVAL);
    CHECK(fs_paillier_decrypt_sum_p(g_sk, got, cs, 65, &err) == FS_EINVAL);
    mpz_set_ui(c[1], 0); /* out of range */
    CHECK(fs_paillier_decrypt_sum_p(g_sk, got, cs, 2, &err) == FS_EINVAL);
    mpz_set(c[1], n); /* not invertible */
    CHECK(fs_paillier_decrypt_sum_p(g_sk, got, cs, 2, &err) == FS_EINVAL);
    for (int i = 0; i < 6; i++) {
        mpz_clears(c[i], m[i], NULL);
    }
    mpz_clears(prod, want, got, n2, bound, NULL);
}

int main(void)
{
    struct fs_err err = {0};
    int rc;

    /* No explicit fs_paillier_gmp_wipe_on_free(): keygen must install it. */
    mp_get_memory_functions(&g_alloc0, &g_realloc0, &g_free0);
    rc = fs_paillier_keygen(&g_sk, 512, &err);
    if (rc != 0) {
        fprintf(stderr, "keygen failed: %s\n", err.msg);
        t_failed++;
        return TEST_END("test_paillier");
    }
    g_pk = fs_paillier_sk_pub(g_sk);
    RUN(test_gmp_wipe_installed);
    RUN(test_keygen_params);
    RUN(test_roundtrip_random);
    RUN(test_homomorphic_add);
    RUN(test_homomorphic_scalar);
    RUN(test_rerandomize);
    RUN(test_ciphertext_size);
    RUN(test_invalid_ciphertexts);
    RUN(test_pk_serialization);
    RUN(test_signed_encoding);
    RUN(test_djn);
    RUN(test_packing);
    RUN(test_decrypt_packed);
    RUN(test_decrypt_sum_p);
    RUN(test_3072);
    fs_paillier_sk_free(g_sk);
    return TEST_END("test_paillier");
}
