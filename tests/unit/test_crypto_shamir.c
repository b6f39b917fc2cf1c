/* Shamir t-of-n over GF(2^256 + 297): the prime, reconstruction from random
 * t-subsets for several (t, n), t - 1 shares are useless (every candidate
 * secret is consistent with them), tampering, consistency checking of extra
 * shares, argument validation, the 35-byte share encoding. */
#include "crypto/rand.h"
#include "crypto/shamir.h"
#include "test.h"

#include <gmp.h>
#include <stdint.h>
#include <stdlib.h>

/* Random permutation prefix: the first k entries of a shuffled copy of all. */
static void random_subset(const struct fs_shamir_share *all, size_t n, size_t k,
                          struct fs_shamir_share *out)
{
    struct fs_err err = {0};
    size_t *idx = malloc(n * sizeof *idx);

    if (idx == NULL) {
        CHECK(0);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        idx[i] = i;
    }
    for (size_t i = 0; i < k; i++) {
        uint64_t r = 0;
        size_t tmp;
        CHECK_OK(fs_rand_below(n - i, &r, &err), &err);
        tmp = idx[i];
        idx[i] = idx[i + (size_t)r];
        idx[i + (size_t)r] = tmp;
        out[i] = all[idx[i]];
    }
    free(idx);
}

static void test_prime(void)
{
    mpz_t p, two256, next;

    mpz_inits(p, two256, next, NULL);
    CHECK(mpz_set_str(p, fs_shamir_prime_hex(), 16) == 0);
    mpz_ui_pow_ui(two256, 2, 256);
    mpz_add_ui(next, two256, 297);
    CHECK(mpz_cmp(p, next) == 0);
    /* 50 Miller-Rabin rounds plus BPSW inside GMP: error below 2^-100. */
    CHECK(mpz_probab_prime_p(p, 50) > 0);
    /* And it is the first prime above 2^256. */
    mpz_nextprime(next, two256);
    CHECK(mpz_cmp(p, next) == 0);
    mpz_clears(p, two256, next, NULL);
}

static void roundtrip_case(size_t t, size_t n, int subsets)
{
    uint8_t secret[32], got[32];
    struct fs_shamir_share *all = calloc(n, sizeof *all);
    struct fs_shamir_share *sub = calloc(n, sizeof *sub);
    struct fs_err err = {0};

    if (all == NULL || sub == NULL) {
        CHECK(0);
        goto out;
    }
    CHECK_OK(fs_rand_bytes(secret, sizeof secret, &err), &err);
    CHECK_OK(fs_shamir_split(secret, t, n, all, &err), &err);
    for (size_t i = 0; i < n; i++) {
        CHECK(all[i].x == i + 1);
    }
    /* Random t-subsets, in random order. */
    for (int s = 0; s < subsets; s++) {
        random_subset(all, n, t, sub);
        CHECK_OK(fs_shamir_combine(sub, t, t, got, &err), &err);
        CHECK_MSG(memcmp(got, secret, 32) == 0, "t=%zu n=%zu subset %d", t, n, s);
    }
    /* All n shares: the n - t extras are checked and agree. */
    CHECK_OK(fs_shamir_combine(all, n, t, got, &err), &err);
    CHECK(memcmp(got, secret, 32) == 0);
    /* t - 1 shares give something else (or are reported inconsistent). */
    if (t > 1) {
        for (int s = 0; s < subsets; s++) {
            int rc;
            random_subset(all, n, t - 1, sub);
            rc = fs_shamir_combine(sub, t - 1, t - 1, got, &err);
            CHECK_MSG((rc == 0 && memcmp(got, secret, 32) != 0) || rc == FS_EAUTH,
                      "t=%zu n=%zu: t-1 shares gave the secret", t, n);
        }
    }
out:
    free(all);
    free(sub);
}

static void test_roundtrip_small(void)
{
    roundtrip_case(1, 1, 1);
    roundtrip_case(1, 4, 4);
    roundtrip_case(2, 2, 2);
    roundtrip_case(2, 3, 6);
    roundtrip_case(3, 5, 8);
    roundtrip_case(5, 10, 8);
    roundtrip_case(10, 10, 2);
}

static void test_roundtrip_large(void)
{
    roundtrip_case(26, 50, 8);
    roundtrip_case(100, 150, 3);
}

static void test_edge_secrets(void)
{
    uint8_t secret[32], got[32];
    struct fs_shamir_share sh[5];
    struct fs_err err = {0};

    memset(secret, 0, sizeof secret);
    CHECK_OK(fs_shamir_split(secret, 3, 5, sh, &err), &err);
    CHECK_OK(fs_shamir_combine(sh + 2, 3, 3, got, &err), &err);
    CHECK(memcmp(got, secret, 32) == 0);
    memset(secret, 0xff, sizeof secret); /* 2^256 - 1, the largest secret */
    CHECK_OK(fs_shamir_split(secret, 3, 5, sh, &err), &err);
    CHECK_OK(fs_shamir_combine(sh + 1, 4, 3, got, &err), &err);
    CHECK(memcmp(got, secret, 32) == 0);
    /* t = 1: every share is the secret itself. */
    CHECK_OK(fs_shamir_split(secret, 1, 5, sh, &err), &err);
    for (int i = 0; i < 5; i++) {
        CHECK(sh[i].y[0] == 0 && memcmp(sh[i].y + 1, secret, 32) == 0);
    }
}

static void test_split_is_randomised(void)
{
    uint8_t secret[32] = {42};
    struct fs_shamir_share a[3], b[3];
    struct fs_err err = {0};

    CHECK_OK(fs_shamir_split(secret, 2, 3, a, &err), &err);
    CHECK_OK(fs_shamir_split(secret, 2, 3, b, &err), &err);
    for (int i = 0; i < 3; i++) {
        CHECK(memcmp(a[i].y, b[i].y, FS_SHAMIR_Y_LEN) != 0);
        CHECK(memcmp(a[i].y + 1, secret, 32) != 0);
    }
}

static void test_split_at(void)
{
    static const uint16_t xs[] = {7, 65535, 300, 2};
    uint8_t secret[32], got[32];
    struct fs_shamir_share sh[4];
    struct fs_err err = {0};
    static const uint16_t dup[] = {3, 9, 3};
    static const uint16_t zero[] = {3, 0};

    CHECK_OK(fs_rand_bytes(secret, sizeof secret, &err), &err);
    CHECK_OK(fs_shamir_split_at(secret, 3, xs, 4, sh, &err), &err);
    for (int i = 0; i < 4; i++) {
        CHECK(sh[i].x == xs[i]);
    }
    CHECK_OK(fs_shamir_combine(sh + 1, 3, 3, got, &err), &err);
    CHECK(memcmp(got, secret, 32) == 0);
    CHECK_OK(fs_shamir_combine(sh, 4, 3, got, &err), &err);
    CHECK(memcmp(got, secret, 32) == 0);
    CHECK(fs_shamir_split_at(secret, 2, dup, 3, sh, &err) == FS_EINVAL);
    CHECK(fs_shamir_split_at(secret, 2, zero, 2, sh, &err) == FS_EINVAL);
}

/* y* = f(x*) for the unique f of degree < t through (0, s') and the t - 1
 * shares: computed independently with GMP (plain Lagrange). */
static void extend(const struct fs_shamir_share *sh, size_t m, const uint8_t cand[32],
                   unsigned xstar, struct fs_shamir_share *out)
{
    mpz_t p, acc, num, den, term, y;
    size_t npts = m + 1;
    long *xs = malloc(npts * sizeof *xs);
    mpz_t *ys = malloc(npts * sizeof *ys);

    if (xs == NULL || ys == NULL) {
        CHECK(0);
        free(xs);
        free(ys);
        return;
    }
    mpz_inits(p, acc, num, den, term, y, NULL);
    mpz_set_str(p, fs_shamir_prime_hex(), 16);
    xs[0] = 0;
    mpz_init(ys[0]);
    mpz_import(ys[0], 32, 1, 1, 1, 0, cand);
    for (size_t i = 0; i < m; i++) {
        xs[i + 1] = sh[i].x;
        mpz_init(ys[i + 1]);
        mpz_import(ys[i + 1], FS_SHAMIR_Y_LEN, 1, 1, 1, 0, sh[i].y);
    }
    for (size_t i = 0; i < npts; i++) {
        mpz_set_ui(num, 1);
        mpz_set_ui(den, 1);
        for (size_t j = 0; j < npts; j++) {
            if (j != i) {
                mpz_mul_si(num, num, (long)xstar - xs[j]);
                mpz_mul_si(den, den, xs[i] - xs[j]);
            }
        }
        mpz_mod(den, den, p);
        CHECK(mpz_invert(den, den, p) != 0);
        mpz_mul(term, num, den);
        mpz_mul(term, term, ys[i]);
        mpz_add(acc, acc, term);
        mpz_mod(acc, acc, p);
    }
    out->x = (uint16_t)xstar;
    memset(out->y, 0, sizeof out->y);
    CHECK(mpz_sizeinbase(acc, 256) <= FS_SHAMIR_Y_LEN);
    {
        size_t bytes = (mpz_sizeinbase(acc, 2) + 7) / 8;
        if (mpz_sgn(acc) != 0 && bytes <= FS_SHAMIR_Y_LEN) {
            mpz_export(out->y + FS_SHAMIR_Y_LEN - bytes, NULL, 1, 1, 1, 0, acc);
        }
    }
    for (size_t i = 0; i < npts; i++) {
        mpz_clear(ys[i]);
    }
    mpz_clears(p, acc, num, den, term, y, NULL);
    free(xs);
    free(ys);
}

/* t - 1 shares carry no information: for ANY candidate secret there is a
 * t-th share that completes them to a valid sharing of that candidate. */
static void test_t_minus_one_hides_secret(void)
{
    static const size_t ts[] = {2, 3, 5, 26};
    struct fs_err err = {0};

    for (size_t c = 0; c < sizeof ts / sizeof ts[0]; c++) {
        size_t t = ts[c], n = 2 * t;
        uint8_t secret[32], cand[32], got[32];
        struct fs_shamir_share *all = calloc(n, sizeof *all);
        struct fs_shamir_share *sub = calloc(t, sizeof *sub);
        if (all == NULL || sub == NULL) {
            CHECK(0);
            free(all);
            free(sub);
            return;
        }
        CHECK_OK(fs_rand_bytes(secret, sizeof secret, &err), &err);
        CHECK_OK(fs_shamir_split(secret, t, n, all, &err), &err);
        for (int trial = 0; trial < 3; trial++) {
            random_subset(all, n, t - 1, sub);
            CHECK_OK(fs_rand_bytes(cand, sizeof cand, &err), &err);
            if (trial == 0) {
                memcpy(cand, secret, 32); /* the true secret is one of them */
            }
            /* x* = 1000 is not among 1..n. */
            extend(sub, t - 1, cand, 1000, &sub[t - 1]);
            CHECK_OK(fs_shamir_combine(sub, t, t, got, &err), &err);
            CHECK_MSG(memcmp(got, cand, 32) == 0, "t=%zu trial %d", t, trial);
        }
        free(all);
        free(sub);
    }
}

static void test_tampering(void)
{
    enum { T = 5, N = 9 };
    uint8_t secret[32], got[32];
    struct fs_shamir_share sh[N], bad[N];
    struct fs_err err = {0};

    CHECK_OK(fs_rand_bytes(secret, sizeof secret, &err), &err);
    CHECK_OK(fs_shamir_split(secret, T, N, sh, &err), &err);
    /* Exactly t shares, one value changed: a wrong secret, undetectable. */
    for (size_t i = 0; i < T; i++) {
        int rc;
        memcpy(bad, sh, sizeof sh);
        bad[i].y[FS_SHAMIR_Y_LEN - 1] ^= 0x01;
        rc = fs_shamir_combine(bad, T, T, got, &err);
        CHECK((rc == 0 && memcmp(got, secret, 32) != 0) || rc == FS_EAUTH);
    }
    /* Exactly t shares, one x changed (to an unused index). */
    memcpy(bad, sh, sizeof sh);
    bad[2].x = 40;
    {
        int rc = fs_shamir_combine(bad, T, T, got, &err);
        CHECK((rc == 0 && memcmp(got, secret, 32) != 0) || rc == FS_EAUTH);
    }
    /* More than t shares: any single change is detected. */
    for (size_t i = 0; i < N; i++) {
        memcpy(bad, sh, sizeof sh);
        bad[i].y[10] ^= 0x80;
        memset(got, 0x55, sizeof got);
        CHECK_MSG(fs_shamir_combine(bad, N, T, got, &err) == FS_EAUTH, "share %zu", i);
        CHECK(got[0] == 0 && memcmp(got, got + 1, 31) == 0);
        CHECK_MSG(fs_shamir_combine(bad, T + 1, T, got, &err) == (i <= T ? FS_EAUTH : 0),
                  "share %zu with t+1", i);
    }
}

static void test_validation(void)
{
    uint8_t secret[32] = {1}, got[32];
    struct fs_shamir_share sh[4], bad[4];
    struct fs_err err = {0};

    CHECK(fs_shamir_split(secret, 0, 3, sh, &err) == FS_EINVAL);
    CHECK(fs_shamir_split(secret, 4, 3, sh, &err) == FS_EINVAL);
    CHECK(fs_shamir_split(secret, 1, 0, sh, &err) == FS_EINVAL);
    CHECK(fs_shamir_split(secret, 1, FS_SHAMIR_MAX_N + 1, sh, &err) == FS_EINVAL);
    CHECK_OK(fs_shamir_split(secret, 2, 4, sh, &err), &err);
    CHECK(fs_shamir_combine(sh, 1, 2, got, &err) == FS_EINVAL);
    CHECK(fs_shamir_combine(sh, 2, 0, got, &err) == FS_EINVAL);
    CHECK(fs_shamir_combine(NULL, 2, 2, got, &err) == FS_EINVAL);
    /* Duplicate x (same share twice, or two shares claiming one x). */
    memcpy(bad, sh, sizeof sh);
    bad[1] = bad[0];
    CHECK(fs_shamir_combine(bad, 2, 2, got, &err) == FS_EINVAL);
    memcpy(bad, sh, sizeof sh);
    bad[3].x = bad[1].x;
    CHECK(fs_shamir_combine(bad, 4, 2, got, &err) == FS_EINVAL);
    /* x = 0 would be the secret itself. */
    memcpy(bad, sh, sizeof sh);
    bad[0].x = 0;
    CHECK(fs_shamir_combine(bad, 2, 2, got, &err) == FS_EINVAL);
    /* y = p and y = 2^264 - 1 are not field elements; y = p - 1 is. */
    memcpy(bad, sh, sizeof sh);
    memset(bad[0].y, 0, FS_SHAMIR_Y_LEN);
    bad[0].y[0] = 0x01;
    bad[0].y[31] = 0x01;
    bad[0].y[32] = 0x29;
    CHECK(fs_shamir_combine(bad, 2, 2, got, &err) == FS_EINVAL);
    bad[0].y[32] = 0x28;
    CHECK(fs_shamir_combine(bad, 2, 2, got, &err) != FS_EINVAL);
    memset(bad[0].y, 0xff, FS_SHAMIR_Y_LEN);
    CHECK(fs_shamir_combine(bad, 2, 2, got, &err) == FS_EINVAL);
}

static void test_encoding(void)
{
    uint8_t secret[32], got[32], wire[3][FS_SHAMIR_SHARE_LEN + 1];
    struct fs_shamir_share sh[3], back[3], s;
    struct fs_err err = {0};

    CHECK(FS_SHAMIR_SHARE_LEN == 35);
    CHECK_OK(fs_rand_bytes(secret, sizeof secret, &err), &err);
    CHECK_OK(fs_shamir_split(secret, 2, 3, sh, &err), &err);
    for (int i = 0; i < 3; i++) {
        fs_shamir_share_encode(&sh[i], wire[i]);
        CHECK(wire[i][0] == 0 && wire[i][1] == i + 1);
        CHECK(memcmp(wire[i] + 2, sh[i].y, FS_SHAMIR_Y_LEN) == 0);
        CHECK_OK(fs_shamir_share_decode(&back[i], wire[i], FS_SHAMIR_SHARE_LEN, &err), &err);
        CHECK(back[i].x == sh[i].x && memcmp(back[i].y, sh[i].y, FS_SHAMIR_Y_LEN) == 0);
    }
    CHECK_OK(fs_shamir_combine(back + 1, 2, 2, got, &err), &err);
    CHECK(memcmp(got, secret, 32) == 0);
    /* Big-endian x. */
    s = sh[0];
    s.x = 0x1234;
    fs_shamir_share_encode(&s, wire[0]);
    CHECK(wire[0][0] == 0x12 && wire[0][1] == 0x34);
    /* Wrong length, x = 0, y >= p. */
    CHECK(fs_shamir_share_decode(&s, wire[0], FS_SHAMIR_SHARE_LEN - 1, &err) == FS_EFORMAT);
    CHECK(fs_shamir_share_decode(&s, wire[0], FS_SHAMIR_SHARE_LEN + 1, &err) == FS_EFORMAT);
    CHECK(fs_shamir_share_decode(&s, NULL, FS_SHAMIR_SHARE_LEN, &err) == FS_EFORMAT);
    wire[0][0] = wire[0][1] = 0;
    CHECK(fs_shamir_share_decode(&s, wire[0], FS_SHAMIR_SHARE_LEN, &err) == FS_EFORMAT);
    wire[0][1] = 1;
    wire[0][2] = 0x02;
    CHECK(fs_shamir_share_decode(&s, wire[0], FS_SHAMIR_SHARE_LEN, &err) == FS_EFORMAT);
    CHECK(s.x == 0);
}

int main(void)
{
    RUN(test_prime);
    RUN(test_roundtrip_small);
    RUN(test_roundtrip_large);
    RUN(test_edge_secrets);
    RUN(test_split_is_randomised);
    RUN(test_split_at);
    RUN(test_t_minus_one_hides_secret);
    RUN(test_tampering);
    RUN(test_validation);
    RUN(test_encoding);
    return TEST_END("test_crypto_shamir");
}
