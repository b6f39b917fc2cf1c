/* The private-key (CRT) arithmetic of lib/crypto/paillier: the constant-time
 * Montgomery primitives against mpz arithmetic, DJN randomizers computed
 * modulo p^2 and q^2 (fs_paillier_djn_new_crt) against the plain object
 * with the same key stream (same base, same hs^a for many exponents, the
 * same ciphertext bytes), the same for the fixed-base comb
 * (fs_paillier_djn_new_comb), and the packed decryption modulo p alone
 * (fs_paillier_decrypt_packed_p) against the two-prime one, at 512 and
 * 3072 bits (FS_TEST_PAILLIER_SMALL=1 skips the 3072-bit cases). */
#include "crypto/paillier.h"
#include "crypto/paillier_mont.h"
#include "crypto/rand.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

#define ITERS (UNDER_SAN ? 20 : 60)

static fs_paillier_sk *g_sk;  /* 512 bits */
static fs_paillier_sk *g_big; /* 3072 bits, NULL when skipped */

static void rand_bytes(void *buf, size_t len)
{
    struct fs_err err = {0};

    CHECK_OK(fs_rand_bytes(buf, len, &err), &err);
}

/* x uniform in [0, 2^bits) */
static void rand_bits(mpz_t x, unsigned bits)
{
    uint8_t buf[FS_PAILLIER_MAX_BITS / 8 + 8];
    size_t nb = (bits + 7) / 8;

    rand_bytes(buf, nb);
    mpz_import(x, nb, 1, 1, 1, 0, buf);
    mpz_fdiv_r_2exp(x, x, bits);
}

/* Exponent number i of a test sequence in [0, 2^L): edge cases first. */
static void exponent(mpz_t a, int i, unsigned L)
{
    mpz_set_ui(a, 0);
    switch (i) {
    case 0:
        break; /* 0 */
    case 1:
        mpz_set_ui(a, 1);
        break;
    case 2:
        mpz_setbit(a, L);
        mpz_sub_ui(a, a, 1); /* all ones */
        break;
    case 3:
        mpz_setbit(a, L - 1); /* top bit only */
        break;
    case 4:
        mpz_setbit(a, L / 2);
        mpz_sub_ui(a, a, 1); /* low half ones */
        break;
    default:
        rand_bits(a, L - (unsigned)(i % 3) * 7);
    }
}

/* Montgomery products, squares, conversions against mpz on random and
 * extreme operands, for odd moduli of 1..50 limbs. */
static void test_mont(void)
{
    struct fs_err err = {0};
    mpz_t m, a, b, want, got, R;

    mpz_inits(m, a, b, want, got, R, NULL);
    for (int it = 0; it < ITERS; it++) {
        unsigned limbs = 1 + (unsigned)it % 50;
        struct fs_mont mt;
        mp_limb_t *x, *y, *r, *tp;
        mpz_t view; /* read-only views of limb arrays */

        rand_bits(m, limbs * GMP_NUMB_BITS);
        mpz_setbit(m, limbs * GMP_NUMB_BITS - 1 - (unsigned)(it % 5)); /* top limb non-zero */
        mpz_setbit(m, 0);
        if (it % 7 == 0) {
            mpz_set_ui(m, 0);
            mpz_setbit(m, limbs * GMP_NUMB_BITS);
            mpz_sub_ui(m, m, 1); /* R - 1 */
        }
        CHECK_OK(fs_mont_init(&mt, m, &err), &err);
        if (mt.n == 0) {
            continue;
        }
        mpz_set_ui(R, 0);
        mpz_setbit(R, (mp_bitcnt_t)mt.n * GMP_NUMB_BITS);
        x = calloc((size_t)mt.n, sizeof *x);
        y = calloc((size_t)mt.n, sizeof *y);
        r = calloc((size_t)2 * mt.n + 1, sizeof *r);
        tp = calloc((size_t)fs_mont_scratch(&mt), sizeof *tp);
        for (int k = 0; k < 8 && x != NULL && y != NULL && r != NULL && tp != NULL; k++) {
            /* operands below R (almost reduced), extremes included */
            if (k == 0) {
                mpz_sub_ui(a, R, 1);
                mpz_sub_ui(b, R, 1);
            } else if (k == 1) {
                mpz_sub_ui(a, m, 1);
                mpz_set_ui(b, 0);
            } else {
                rand_bits(a, (unsigned)mt.n * GMP_NUMB_BITS);
                rand_bits(b, (unsigned)mt.n * GMP_NUMB_BITS);
            }
            mpn_zero(x, mt.n);
            mpn_zero(y, mt.n);
            mpn_copyi(x, mpz_limbs_read(a), (mp_size_t)mpz_size(a));
            mpn_copyi(y, mpz_limbs_read(b), (mp_size_t)mpz_size(b));
            /* a b R^-1 mod m */
            fs_mont_mul(&mt, r, x, y, tp);
            mpz_set(want, mpz_roinit_n(view, r, mt.n));
            mpz_invert(got, R, m);
            mpz_mul(got, got, a);
            mpz_mul(got, got, b);
            mpz_mod(got, got, m);
            CHECK(mpz_cmp(want, R) < 0);
            mpz_mod(want, want, m);
            CHECK(mpz_cmp(want, got) == 0);
            /* a^2 R^-1 */
            fs_mont_sqr(&mt, r, x, tp);
            mpz_set(want, mpz_roinit_n(view, r, mt.n));
            mpz_mod(want, want, m);
            mpz_invert(got, R, m);
            mpz_mul(got, got, a);
            mpz_mul(got, got, a);
            mpz_mod(got, got, m);
            CHECK(mpz_cmp(want, got) == 0);
            /* from: canonical a R^-1 */
            fs_mont_from(&mt, r, x, tp);
            mpz_set(want, mpz_roinit_n(view, r, mt.n));
            mpz_invert(got, R, m);
            mpz_mul(got, got, a);
            mpz_mod(got, got, m);
            CHECK(mpz_cmp(want, got) == 0);
            /* to, from a wide value (2n limbs), then back */
            mpz_mul(a, a, b);
            mpn_zero(r, 2 * mt.n);
            mpn_copyi(r, mpz_limbs_read(a), (mp_size_t)mpz_size(a));
            fs_mont_to(&mt, x, r, 2 * mt.n, tp);
            fs_mont_from(&mt, x, x, tp);
            mpz_set(want, mpz_roinit_n(view, x, mt.n));
            mpz_mod(got, a, m);
            CHECK(mpz_cmp(want, got) == 0);
        }
        free(x);
        free(y);
        free(r);
        free(tp);
        fs_mont_clear(&mt);
    }
    {
        struct fs_mont mt;
        mpz_set_ui(m, 1000); /* even */
        CHECK(fs_mont_init(&mt, m, &err) == FS_EINVAL);
    }
    mpz_clears(m, a, b, want, got, R, NULL);
}

static void export_ct(const fs_paillier_pk *pk, const mpz_t c, uint8_t *buf)
{
    struct fs_err err = {0};

    CHECK_OK(fs_paillier_ct_export(pk, c, buf, fs_paillier_ct_size(pk), &err), &err);
}

/* The CRT object and the plain one from the same key stream: equal hs,
 * equal hs^a, equal ciphertext bytes of Enc(0), Enc(1) and of a random m. */
static void check_djn_crt(const fs_paillier_sk *sk, unsigned w, int iters)
{
    struct fs_err err = {0};
    const fs_paillier_pk *pk = fs_paillier_sk_pub(sk);
    mpz_srcptr n = fs_paillier_pk_n(pk);
    size_t cts = fs_paillier_ct_size(pk);
    uint8_t key[32], rkey[32];
    uint8_t *b1 = malloc(cts), *b2 = malloc(cts);
    fs_paillier_djn *plain = NULL, *crt = NULL;
    unsigned L = fs_paillier_pk_bits(pk) / 2 < 448 ? fs_paillier_pk_bits(pk) / 2 : 448;
    mpz_t a, x, y, n2, m;

    mpz_inits(a, x, y, n2, m, NULL);
    mpz_mul(n2, n, n);
    rand_bytes(key, sizeof key);
    CHECK_OK(fs_paillier_djn_new_det(&plain, pk, 0, w, key, &err), &err);
    CHECK_OK(fs_paillier_djn_new_crt(&crt, sk, 0, w, key, &err), &err);
    if (plain == NULL || crt == NULL || b1 == NULL || b2 == NULL) {
        goto out;
    }
    CHECK(mpz_cmp(fs_paillier_djn_base(plain), fs_paillier_djn_base(crt)) == 0);
    CHECK(fs_paillier_djn_table_bytes(crt) > 0);
    for (int i = 0; i < iters; i++) {
        exponent(a, i, L);
        CHECK_OK(fs_paillier_djn_pow(plain, x, a, &err), &err);
        CHECK_OK(fs_paillier_djn_pow(crt, y, a, &err), &err);
        CHECK(mpz_cmp(x, y) == 0);
        if (i < 3) {
            mpz_powm(x, fs_paillier_djn_base(plain), a, n2);
            CHECK(mpz_cmp(x, y) == 0);
        }
        /* (1 + m n) hs^a with the same exponent stream: the same bytes */
        if (i % 3 == 0) {
            mpz_set_ui(m, (unsigned long)(i / 3 % 2));
        } else {
            rand_bits(m, fs_paillier_pk_bits(pk) - 1);
        }
        mpz_mul(x, m, n);
        mpz_add_ui(x, x, 1);
        rand_bytes(rkey, sizeof rkey);
        CHECK_OK(fs_paillier_rerandomize_det(pk, plain, y, x, rkey, &err), &err);
        export_ct(pk, y, b1);
        CHECK_OK(fs_paillier_rerandomize_det(pk, crt, y, x, rkey, &err), &err);
        export_ct(pk, y, b2);
        CHECK(memcmp(b1, b2, cts) == 0);
    }
    /* fresh encryptions through the CRT object decrypt */
    mpz_set_ui(m, 1);
    CHECK_OK(fs_paillier_encrypt(pk, crt, x, m, &err), &err);
    CHECK_OK(fs_paillier_decrypt(sk, y, x, &err), &err);
    CHECK(mpz_cmp_ui(y, 1) == 0);
    mpz_set_ui(a, 0);
    mpz_setbit(a, L); /* out of range */
    CHECK(fs_paillier_djn_pow(crt, x, a, &err) == FS_EINVAL);
out:
    fs_paillier_djn_free(plain);
    fs_paillier_djn_free(crt);
    free(b1);
    free(b2);
    mpz_clears(a, x, y, n2, m, NULL);
}

static void test_djn_crt(void)
{
    static const unsigned windows[] = {1, 3, 5, 8};
    struct fs_err err = {0};
    fs_paillier_djn *d = NULL;

    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++) {
        check_djn_crt(g_sk, windows[i], ITERS);
    }
    if (g_big != NULL) {
        check_djn_crt(g_big, FS_PAILLIER_DJN_WINDOW, UNDER_SAN ? 8 : 24);
    }
    /* window 0: the plain object (no tables) */
    CHECK_OK(fs_paillier_djn_new_crt(&d, g_sk, 0, 0, NULL, &err), &err);
    CHECK(d != NULL && fs_paillier_djn_table_bytes(d) == 0);
    fs_paillier_djn_free(d);
    d = NULL;
    CHECK(fs_paillier_djn_new_crt(&d, g_sk, 32, 4, NULL, &err) == FS_EINVAL);
    CHECK(d == NULL);
}

/* The comb object and the plain one from the same key stream: the same hs
 * and hs^a for many exponents (edge cases included), the same re-randomized
 * ciphertext bytes. */
static void check_djn_comb(const fs_paillier_pk *pk, unsigned L, int iters)
{
    struct fs_err err = {0};
    size_t cts = fs_paillier_ct_size(pk);
    uint8_t key[32], rkey[32];
    uint8_t *b1 = malloc(cts), *b2 = malloc(cts);
    fs_paillier_djn *plain = NULL, *comb = NULL;
    mpz_t a, x, y, m;

    mpz_inits(a, x, y, m, NULL);
    rand_bytes(key, sizeof key);
    CHECK_OK(fs_paillier_djn_new_det(&plain, pk, L, 3, key, &err), &err);
    CHECK_OK(fs_paillier_djn_new_comb(&comb, pk, L, key, &err), &err);
    if (plain == NULL || comb == NULL || b1 == NULL || b2 == NULL) {
        goto out;
    }
    CHECK(mpz_cmp(fs_paillier_djn_base(plain), fs_paillier_djn_base(comb)) == 0);
    CHECK(fs_paillier_djn_table_bytes(comb) == 128 * cts);
    for (int i = 0; i < iters; i++) {
        exponent(a, i, L);
        CHECK_OK(fs_paillier_djn_pow(plain, x, a, &err), &err);
        CHECK_OK(fs_paillier_djn_pow(comb, y, a, &err), &err);
        CHECK(mpz_cmp(x, y) == 0);
        rand_bits(m, fs_paillier_pk_bits(pk) - 1);
        mpz_mul(x, m, fs_paillier_pk_n(pk));
        mpz_add_ui(x, x, 1);
        rand_bytes(rkey, sizeof rkey);
        CHECK_OK(fs_paillier_rerandomize_det(pk, plain, y, x, rkey, &err), &err);
        export_ct(pk, y, b1);
        CHECK_OK(fs_paillier_rerandomize_det(pk, comb, y, x, rkey, &err), &err);
        export_ct(pk, y, b2);
        CHECK(memcmp(b1, b2, cts) == 0);
    }
    mpz_set_ui(a, 0);
    mpz_setbit(a, L);
    CHECK(fs_paillier_djn_pow(comb, x, a, &err) == FS_EINVAL);
out:
    fs_paillier_djn_free(plain);
    fs_paillier_djn_free(comb);
    free(b1);
    free(b2);
    mpz_clears(a, x, y, m, NULL);
}

static void test_djn_comb(void)
{
    const fs_paillier_pk *pk = fs_paillier_sk_pub(g_sk);
    struct fs_err err = {0};
    fs_paillier_djn *d = NULL;
    mpz_t m, c;

    /* exponent lengths: multiples of the 12 comb blocks and not */
    check_djn_comb(pk, 256, ITERS);
    check_djn_comb(pk, 64, ITERS / 2);
    check_djn_comb(pk, 241, ITERS / 2);
    check_djn_comb(pk, 512, ITERS / 4);
    if (g_big != NULL) {
        check_djn_comb(fs_paillier_sk_pub(g_big), 448, UNDER_SAN ? 8 : 24);
    }
    /* fresh encryptions through a CSPRNG comb decrypt */
    mpz_inits(m, c, NULL);
    CHECK_OK(fs_paillier_djn_new_comb(&d, pk, 0, NULL, &err), &err);
    if (d != NULL) {
        mpz_set_ui(m, 12345);
        CHECK_OK(fs_paillier_encrypt(pk, d, c, m, &err), &err);
        CHECK_OK(fs_paillier_decrypt(g_sk, c, c, &err), &err);
        CHECK(mpz_cmp(c, m) == 0);
    }
    fs_paillier_djn_free(d);
    d = NULL;
    CHECK(fs_paillier_djn_new_comb(&d, pk, 32, NULL, &err) == FS_EINVAL);
    CHECK(d == NULL);
    mpz_clears(m, c, NULL);
}

/* decrypt_packed_p equals decrypt_packed (and the sum) for plaintexts
 * below 2^(shift cnt) <= 2^(bits/2 - 1). */
static void check_packed_p(const fs_paillier_sk *sk, unsigned shift, size_t max_cnt, int iters)
{
    struct fs_err err = {0};
    const fs_paillier_pk *pk = fs_paillier_sk_pub(sk);
    fs_paillier_djn *djn = NULL;
    mpz_t c[64], m[64], want, got, old;
    mpz_srcptr cs[64];

    mpz_inits(want, got, old, NULL);
    for (size_t i = 0; i < 64; i++) {
        mpz_inits(c[i], m[i], NULL);
        cs[i] = c[i];
    }
    CHECK_OK(fs_paillier_djn_new(&djn, pk, 0, 4, &err), &err);
    for (int it = 0; it < iters && djn != NULL; it++) {
        size_t cnt = it == 0 ? max_cnt : 1 + (size_t)it % max_cnt;
        mpz_set_ui(want, 0);
        for (size_t q = cnt; q-- > 0;) {
            if (it == 1) {
                mpz_set_ui(m[q], 0);
                mpz_setbit(m[q], shift);
                mpz_sub_ui(m[q], m[q], 1); /* every slot full */
            } else if (it == 2) {
                mpz_set_ui(m[q], 0);
            } else {
                rand_bits(m[q], shift);
            }
            CHECK_OK(fs_paillier_encrypt(pk, djn, c[q], m[q], &err), &err);
            mpz_mul_2exp(want, want, shift);
            mpz_add(want, want, m[q]);
        }
        CHECK_OK(fs_paillier_decrypt_packed_p(sk, got, cs, cnt, shift, &err), &err);
        CHECK(mpz_cmp(got, want) == 0);
        if (cnt * shift < fs_paillier_pk_bits(pk) && it < 6) {
            CHECK_OK(fs_paillier_decrypt_packed(sk, old, cs, cnt, shift, &err), &err);
            CHECK(mpz_cmp(old, got) == 0);
        }
    }
    CHECK(fs_paillier_decrypt_packed_p(sk, got, cs, max_cnt + 1, shift, &err) == FS_EINVAL);
    CHECK(fs_paillier_decrypt_packed_p(sk, got, cs, 0, shift, &err) == FS_EINVAL);
    mpz_set_ui(c[0], 0);
    CHECK(fs_paillier_decrypt_packed_p(sk, got, cs, 1, shift, &err) == FS_EINVAL);
    mpz_set(c[0], fs_paillier_pk_n(pk)); /* divisible by p */
    CHECK(fs_paillier_decrypt_packed_p(sk, got, cs, 1, shift, &err) == FS_EINVAL);
    fs_paillier_djn_free(djn);
    for (size_t i = 0; i < 64; i++) {
        mpz_clears(c[i], m[i], NULL);
    }
    mpz_clears(want, got, old, NULL);
}

static void test_decrypt_packed_p(void)
{
    unsigned half = fs_paillier_pk_bits(fs_paillier_sk_pub(g_sk)) / 2 - 1; /* 255 */

    check_packed_p(g_sk, 64, half / 64, ITERS / 2);
    check_packed_p(g_sk, 1, 64, ITERS / 4);
    check_packed_p(g_sk, 100, 2, ITERS / 4);
    if (g_big != NULL) {
        check_packed_p(g_big, 256, 5, UNDER_SAN ? 3 : 8); /* the noise exchange's seed groups */
    }
}

int main(void)
{
    struct fs_err err = {0};

    if (fs_paillier_keygen(&g_sk, 512, &err) != 0) {
        fprintf(stderr, "keygen failed: %s\n", err.msg);
        t_failed++;
        return TEST_END("test_paillier_crt");
    }
    if (getenv("FS_TEST_PAILLIER_SMALL") == NULL) {
        CHECK_OK(fs_paillier_keygen(&g_big, FS_PAILLIER_DEFAULT_BITS, &err), &err);
    } else {
        printf("  (3072-bit cases skipped: FS_TEST_PAILLIER_SMALL)\n");
    }
    RUN(test_mont);
    RUN(test_djn_crt);
    RUN(test_djn_comb);
    RUN(test_decrypt_packed_p);
    fs_paillier_sk_free(g_big);
    fs_paillier_sk_free(g_sk);
    return TEST_END("test_paillier_crt");
}
