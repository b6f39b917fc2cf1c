/* What a restarted aggregation server needs to go on with a power-method
 * job exactly where it stopped: the Paillier private key exported and
 * imported (lib/crypto/paillier.h), a noise exchange reopened with the
 * selectors it had sent (same bytes, same j, same recovered seeds), and the
 * fedpower server restored from its exported secret (same exchange key, and
 * plain fedpower's server noise regenerated bit for bit). */
#include "crypto/paillier.h"
#include "crypto/rand.h"
#include "proto/fedpower.h"
#include "proto/noise_exchange.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_paillier_sk_roundtrip(void)
{
    struct fs_err err = {0};
    fs_paillier_sk *sk = NULL;
    fs_paillier_sk *back = NULL;
    fs_paillier_djn *djn = NULL;
    uint8_t *buf = NULL;
    size_t len;
    mpz_t m, c, d;

    CHECK_OK(fs_paillier_keygen(&sk, 512, &err), &err);
    if (sk == NULL) {
        return;
    }
    len = fs_paillier_sk_size(sk);
    CHECK(len == 2 + 2 * 32);
    buf = malloc(len);
    CHECK_OK(fs_paillier_sk_export(sk, buf, len, &err), &err);
    CHECK(fs_paillier_sk_export(sk, buf, len - 1, &err) == FS_EINVAL);
    CHECK_OK(fs_paillier_sk_import(&back, buf, len, &err), &err);
    CHECK(back != NULL && fs_paillier_pk_equal(fs_paillier_sk_pub(sk), fs_paillier_sk_pub(back)));
    /* the imported key decrypts what the public half encrypts */
    mpz_init_set_ui(m, 123456789u);
    mpz_init(c);
    mpz_init(d);
    CHECK_OK(fs_paillier_djn_new(&djn, fs_paillier_sk_pub(sk), 0, 4, &err), &err);
    CHECK_OK(fs_paillier_encrypt(fs_paillier_sk_pub(sk), djn, c, m, &err), &err);
    if (back != NULL) {
        CHECK_OK(fs_paillier_decrypt(back, d, c, &err), &err);
        CHECK(mpz_cmp(d, m) == 0);
    }
    fs_paillier_sk_free(back);
    back = NULL;
    /* truncated, wrong size field, a prime changed: refused */
    CHECK(fs_paillier_sk_import(&back, buf, len - 1, &err) == FS_EFORMAT);
    buf[1] ^= 2;
    CHECK(fs_paillier_sk_import(&back, buf, len, &err) == FS_EFORMAT);
    buf[1] ^= 2;
    buf[len - 1] ^= 0x10; /* q +- 16: still odd, most likely no prime */
    CHECK(fs_paillier_sk_import(&back, buf, len, &err) == FS_EFORMAT || back != NULL);
    if (back != NULL) {
        /* a different (prime) q is a different key */
        CHECK(!fs_paillier_pk_equal(fs_paillier_sk_pub(sk), fs_paillier_sk_pub(back)));
        fs_paillier_sk_free(back); /* the next import sets back to NULL */
        back = NULL;
    }
    CHECK(fs_paillier_sk_import(&back, NULL, 0, &err) == FS_EFORMAT);
    mpz_clears(m, c, d, NULL);
    fs_paillier_djn_free(djn);
    fs_paillier_sk_free(back);
    fs_paillier_sk_free(sk);
    free(buf);
}

static void test_noisex_restore(void)
{
    struct fs_err err = {0};
    struct fs_noisex_params p = {.mode = FS_NOISEX_SEED, .parties = 5};
    fs_noisex_server *s = NULL;
    fs_noisex_server *s2 = NULL;
    fs_noisex_client *cl = NULL;
    struct fs_noisex_result ra, rb;
    const uint32_t ids[4] = {4, 1, 5, 2}; /* party 3 is not in the sum */
    uint8_t *sk = NULL;
    uint8_t *sel = NULL;
    uint8_t *pk = NULL;
    const uint8_t *cur;
    size_t len = 0, sk_len, pk_len, ct, rs;

    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    CHECK_OK(fs_noisex_server_new(&p, 1024, &s, &err), &err);
    if (s == NULL) {
        return;
    }
    CHECK(fs_noisex_server_selectors(s, &len) == NULL); /* no round open */
    CHECK_OK(fs_noisex_server_begin(s, 3, ids, 4, &err), &err);
    cur = fs_noisex_server_selectors(s, &len);
    ct = fs_noisex_server_ct_size(s);
    CHECK(cur != NULL && len == 4 * ct);
    sel = malloc(len);
    memcpy(sel, cur, len);
    sk_len = fs_noisex_server_sk_size(s);
    sk = malloc(sk_len);
    CHECK_OK(fs_noisex_server_sk_export(s, sk, sk_len, &err), &err);
    pk_len = fs_noisex_server_pk_size(s);
    pk = malloc(pk_len);
    CHECK_OK(fs_noisex_server_pk_export(s, pk, pk_len, &err), &err);

    /* the restarted server: same key, the round reopened with its selectors */
    CHECK_OK(fs_noisex_server_new_from_key(&p, sk, sk_len, &s2, &err), &err);
    if (s2 == NULL) {
        goto out;
    }
    CHECK(fs_noisex_server_pk_size(s2) == pk_len);
    CHECK_OK(fs_noisex_server_restore(s2, 3, ids, 4, sel, len, &err), &err);
    for (size_t q = 0; q < 4; q++) {
        uint8_t a[1024], b[1024];
        CHECK(ct <= sizeof a);
        CHECK_OK(fs_noisex_server_selector(s, ids[q], a, ct, &err), &err);
        CHECK_OK(fs_noisex_server_selector(s2, ids[q], b, ct, &err), &err);
        CHECK(memcmp(a, b, ct) == 0);
    }
    /* every party answers both with the same bytes: the same seeds come back */
    CHECK_OK(fs_noisex_client_new(&p, pk, pk_len, &cl, &err), &err);
    rs = fs_noisex_server_response_size(s);
    for (size_t q = 0; cl != NULL && q < 4; q++) {
        uint8_t seed[FS_NOISEX_SEED_LEN];
        uint8_t sq[1024];
        uint8_t *resp = malloc(rs);
        memset(seed, (int)(0x10 + ids[q]), sizeof seed);
        CHECK_OK(fs_noisex_server_selector(s, ids[q], sq, ct, &err), &err);
        CHECK_OK(fs_noisex_client_respond_seed(cl, sq, ct, seed, resp, rs, &err), &err);
        CHECK_OK(fs_noisex_server_add_response(s, ids[q], resp, rs, &err), &err);
        CHECK_OK(fs_noisex_server_add_response(s2, ids[q], resp, rs, &err), &err);
        free(resp);
    }
    CHECK_OK(fs_noisex_server_finish(s, &ra, &err), &err);
    CHECK_OK(fs_noisex_server_finish(s2, &rb, &err), &err);
    CHECK(ra.chosen == rb.chosen && ra.removed == 3 && rb.removed == 3);
    CHECK(ra.seeds != NULL && rb.seeds != NULL &&
          memcmp(ra.seeds, rb.seeds, ra.removed * sizeof *ra.seeds) == 0);
    CHECK(ra.ids != NULL && rb.ids != NULL &&
          memcmp(ra.ids, rb.ids, ra.removed * sizeof *ra.ids) == 0);

    /* selectors that are not this round's: none chosen, wrong size, wrong parties */
    {
        /* replace the chosen party's Enc(0) by another party's Enc(1) */
        size_t zero = 0;
        uint32_t sorted[4] = {1, 2, 4, 5};
        for (size_t q = 0; q < 4; q++) {
            if (sorted[q] == ra.chosen) {
                zero = q;
            }
        }
        memcpy(sel + zero * ct, sel + ((zero + 1) % 4) * ct, ct);
        CHECK(fs_noisex_server_restore(s2, 4, ids, 4, sel, len, &err) == FS_EFORMAT);
        CHECK(fs_noisex_server_restore(s2, 4, ids, 4, sel, len - 1, &err) == FS_EFORMAT);
        CHECK(fs_noisex_server_restore(s2, 4, ids, 3, sel, len, &err) == FS_EFORMAT);
        CHECK(fs_noisex_server_selectors(s2, &len) == NULL); /* nothing left open */
    }
    {
        fs_noisex_server *bad = NULL;
        CHECK(fs_noisex_server_new_from_key(&p, sk, sk_len - 1, &bad, &err) != 0 && bad == NULL);
    }
out:
    fs_noisex_result_clear(&ra);
    fs_noisex_result_clear(&rb);
    fs_noisex_client_free(cl);
    fs_noisex_server_free(s2);
    fs_noisex_server_free(s);
    free(sk);
    free(sel);
    free(pk);
}

static void base_config(struct fs_fedpower_config *c, enum fs_fedpower_alg alg)
{
    fs_fedpower_config_default(c, alg);
    c->parties = 3;
    c->threshold = 2;
    c->d = 6;
    c->r = 2;
    c->k = 2;
    c->iterations = 3;
    c->sync_every = 1;
    c->eigenvalues = 0;
    c->paillier_bits = 1024;
    memset(c->z0_seed, 0x21, sizeof c->z0_seed);
}

/* Party i's plain upload of round q: fixed values. */
static fs_mat *upload(uint32_t i, uint32_t q, size_t rows, size_t cols)
{
    fs_mat *y = fs_mat_new(rows, cols);
    for (size_t a = 0; y != NULL && a < rows; a++) {
        for (size_t b = 0; b < cols; b++) {
            FS_MAT_AT(y, a, b) = (double)((a * 7 + b * 3 + i * 5 + q) % 11) / 11.0 - 0.4;
        }
    }
    return y;
}

static int same_bcast(const fs_fedpower_server *a, const fs_fedpower_server *b)
{
    uint32_t ia = 0, ib = 0;
    const fs_mat *za = fs_fedpower_server_broadcast(a, &ia);
    const fs_mat *zb = fs_fedpower_server_broadcast(b, &ib);

    if (za == NULL || zb == NULL || ia != ib || za->rows != zb->rows || za->cols != zb->cols) {
        return 0;
    }
    for (size_t j = 0; j < za->cols; j++) {
        if (memcmp(&FS_MAT_AT(za, 0, j), &FS_MAT_AT(zb, 0, j), za->rows * sizeof(double)) != 0) {
            return 0;
        }
    }
    return 1;
}

static void test_fedpower_plain_restored(void)
{
    struct fs_err err = {0};
    struct fs_fedpower_config c;
    const uint64_t rows[3] = {10, 20, 30};
    fs_fedpower_server *a = NULL, *b = NULL, *fresh = NULL;
    uint8_t *sec = NULL, *sec2 = NULL;
    size_t len;
    int differs = 0;

    base_config(&c, FS_FEDPOWER_PLAIN);
    c.sigma_server = 0.05;
    CHECK_OK(fs_fedpower_server_new(&c, rows, &a, &err), &err);
    CHECK_OK(fs_fedpower_server_new(&c, rows, &fresh, &err), &err);
    if (a == NULL || fresh == NULL) {
        goto out;
    }
    len = fs_fedpower_server_secret_size(a);
    CHECK(len == 36);
    sec = malloc(len);
    sec2 = malloc(len);
    CHECK_OK(fs_fedpower_server_secret_export(a, sec, len, &err), &err);
    CHECK_OK(fs_fedpower_server_new_restored(&c, rows, sec, len, &b, &err), &err);
    if (b == NULL) {
        goto out;
    }
    CHECK_OK(fs_fedpower_server_secret_export(b, sec2, len, &err), &err);
    CHECK(memcmp(sec, sec2, len) == 0);
    CHECK(same_bcast(a, b) && same_bcast(a, fresh)); /* Z_0 is public */
    for (uint32_t q = 0; q < c.iterations; q++) {
        for (uint32_t i = 1; i <= 3; i++) {
            fs_mat *y = upload(i, q, c.d, c.r);
            CHECK_OK(fs_fedpower_server_add_plain(a, i, y, 1.0, &err), &err);
            CHECK_OK(fs_fedpower_server_add_plain(b, i, y, 1.0, &err), &err);
            CHECK_OK(fs_fedpower_server_add_plain(fresh, i, y, 1.0, &err), &err);
            fs_mat_free(y);
        }
        CHECK_OK(fs_fedpower_server_close_plain(a, &err), &err);
        CHECK_OK(fs_fedpower_server_close_plain(b, &err), &err);
        CHECK_OK(fs_fedpower_server_close_plain(fresh, &err), &err);
        if (fs_fedpower_server_phase(a) == FS_FEDPOWER_DONE) {
            break;
        }
        /* the same server noise from the same secret; another secret, another noise */
        CHECK(same_bcast(a, b));
        differs |= !same_bcast(a, fresh);
    }
    CHECK(differs);
    CHECK(fs_fedpower_server_phase(a) == FS_FEDPOWER_DONE &&
          fs_fedpower_server_phase(b) == FS_FEDPOWER_DONE);
    {
        struct fs_fedpower_result ra, rb;
        CHECK_OK(fs_fedpower_server_result(a, &ra, &err), &err);
        CHECK_OK(fs_fedpower_server_result(b, &rb, &err), &err);
        CHECK(ra.z != NULL && rb.z != NULL &&
              memcmp(ra.z->data, rb.z->data, ra.z->rows * sizeof(double)) == 0);
        fs_fedpower_result_clear(&ra);
        fs_fedpower_result_clear(&rb);
    }
    /* not a secret: bad magic, wrong length for the algorithm */
    {
        fs_fedpower_server *bad = NULL;
        sec[0] ^= 1;
        CHECK(fs_fedpower_server_new_restored(&c, rows, sec, len, &bad, &err) == FS_EFORMAT &&
              bad == NULL);
        sec[0] ^= 1;
        CHECK(fs_fedpower_server_new_restored(&c, rows, sec, len - 1, &bad, &err) == FS_EFORMAT &&
              bad == NULL);
    }
out:
    fs_fedpower_server_free(a);
    fs_fedpower_server_free(b);
    fs_fedpower_server_free(fresh);
    free(sec);
    free(sec2);
}

static void test_fedpower_utility_restored(void)
{
    struct fs_err err = {0};
    struct fs_fedpower_config c;
    const uint64_t rows[3] = {10, 20, 30};
    const uint32_t ids[3] = {1, 2, 3};
    fs_fedpower_server *a = NULL, *b = NULL;
    uint64_t *sum = NULL;
    uint8_t *sec = NULL, *junk = NULL;
    const uint8_t *ka, *kb, *sel;
    size_t len, la = 0, lb = 0, sl = 0, ct;

    base_config(&c, FS_FEDPOWER_UTILITY);
    c.sigma = 0.001;
    c.value_bound = 4.0;
    c.allow_weak_privacy = 1;
    CHECK_OK(fs_fedpower_server_new(&c, rows, &a, &err), &err);
    if (a == NULL) {
        return;
    }
    len = fs_fedpower_server_secret_size(a);
    CHECK(len > 36 + 128);
    sec = malloc(len);
    CHECK_OK(fs_fedpower_server_secret_export(a, sec, len, &err), &err);
    CHECK_OK(fs_fedpower_server_new_restored(&c, rows, sec, len, &b, &err), &err);
    if (b == NULL) {
        goto out;
    }
    ka = fs_fedpower_server_exchange_key(a, &la);
    kb = fs_fedpower_server_exchange_key(b, &lb);
    CHECK(ka != NULL && kb != NULL && la == lb && memcmp(ka, kb, la) == 0);
    CHECK(fs_fedpower_server_exchange_selectors(a, &sl) == NULL); /* not in EXCHANGE */
    sum = calloc(fs_fedpower_server_ring_len(a), sizeof *sum);
    CHECK_OK(fs_fedpower_server_add_sum(a, sum, fs_fedpower_server_ring_len(a), ids, 3, &err),
             &err);
    CHECK_OK(fs_fedpower_server_add_sum(b, sum, fs_fedpower_server_ring_len(b), ids, 3, &err),
             &err);
    sel = fs_fedpower_server_exchange_selectors(a, &sl);
    ct = fs_fedpower_server_selector_size(a);
    CHECK(sel != NULL && sl == 3 * ct);
    junk = malloc(sl);
    CHECK_OK(fs_rand_bytes(junk, sl, &err), &err);
    CHECK(fs_fedpower_server_restore_selectors(b, junk, sl, &err) != 0);
    CHECK_OK(fs_fedpower_server_restore_selectors(b, sel, sl, &err), &err);
    for (uint32_t i = 1; i <= 3; i++) {
        uint8_t x[512], y[512];
        CHECK(ct <= sizeof x);
        CHECK_OK(fs_fedpower_server_selector(a, i, x, ct, &err), &err);
        CHECK_OK(fs_fedpower_server_selector(b, i, y, ct, &err), &err);
        CHECK(memcmp(x, y, ct) == 0);
    }
out:
    fs_fedpower_server_free(a);
    fs_fedpower_server_free(b);
    free(sum);
    free(sec);
    free(junk);
}

/* Party i's seed-mode answer to its selector in s's open exchange. */
static int answer(const fs_fedpower_server *s, fs_noisex_client *cl, uint32_t i, uint8_t *resp,
                  size_t rlen)
{
    struct fs_err err = {0};
    uint8_t sel[512];
    uint8_t seed[FS_NOISEX_SEED_LEN];
    size_t ct = fs_fedpower_server_selector_size(s);
    int rc = ct <= sizeof sel ? fs_fedpower_server_selector(s, i, sel, ct, &err) : FS_EINVAL;

    memset(seed, (int)(0x40 + i), sizeof seed);
    if (rc == 0) {
        rc = fs_noisex_client_respond_seed(cl, sel, ct, seed, resp, rlen, &err);
    }
    return rc;
}

/* The exchange of a sync opened before its sum (as the server does once
 * masked input closes): selectors and responses are taken early, add_sum
 * keeps them, and the result is that of the usual order. A restarted server
 * that replays the selectors and the early responses before the sum, in the
 * order they were persisted, ends with the same Z byte for byte. */
static void test_fedpower_utility_early(void)
{
    struct fs_err err = {0};
    struct fs_fedpower_config c;
    struct fs_noisex_params np;
    const uint64_t rows[3] = {10, 20, 30};
    const uint32_t ids[3] = {3, 1, 2}; /* any order */
    const uint32_t other[2] = {1, 2};
    fs_fedpower_server *a = NULL, *b = NULL, *o = NULL;
    fs_noisex_client *cl[4] = {NULL, NULL, NULL, NULL};
    uint8_t *resp[4] = {NULL, NULL, NULL, NULL};
    uint64_t *sum = NULL;
    uint8_t *sec = NULL, *selv = NULL, *buf = NULL;
    const uint8_t *pk, *sel;
    size_t len, pkl = 0, sl = 0, ct, rlen, rl;

    base_config(&c, FS_FEDPOWER_UTILITY);
    c.sigma = 0.001;
    c.value_bound = 4.0;
    c.allow_weak_privacy = 1;
    CHECK_OK(fs_fedpower_server_new(&c, rows, &a, &err), &err);
    if (a == NULL) {
        return;
    }
    len = fs_fedpower_server_secret_size(a);
    sec = malloc(len);
    CHECK_OK(fs_fedpower_server_secret_export(a, sec, len, &err), &err);
    CHECK_OK(fs_fedpower_server_new_restored(&c, rows, sec, len, &b, &err), &err);
    CHECK_OK(fs_fedpower_server_new_restored(&c, rows, sec, len, &o, &err), &err);
    if (b == NULL || o == NULL) {
        goto out;
    }
    pk = fs_fedpower_server_exchange_key(a, &pkl);
    memset(&np, 0, sizeof np);
    np.mode = FS_NOISEX_SEED;
    np.parties = 3;
    for (uint32_t i = 1; i <= 3; i++) {
        CHECK_OK(fs_noisex_client_new(&np, pk, pkl, &cl[i], &err), &err);
    }
    ct = fs_fedpower_server_selector_size(a);
    rlen = fs_fedpower_server_response_size(a);
    rl = fs_fedpower_server_ring_len(a);
    buf = malloc(ct);
    sum = calloc(rl, sizeof *sum);
    for (uint32_t i = 1; i <= 3; i++) {
        resp[i] = malloc(rlen);
    }
    /* before it opens: no selector, no response (the server's 409 not_ready) */
    CHECK(!fs_fedpower_server_exchange_ready(a));
    CHECK(fs_fedpower_server_selector(a, 1, buf, ct, &err) == FS_ESTATE);
    CHECK(fs_fedpower_server_add_response(a, 1, buf, ct, &err) == FS_ESTATE);
    /* open early over U3 = {1, 2, 3}; once per sync */
    CHECK_OK(fs_fedpower_server_open_exchange(a, ids, 3, &err), &err);
    CHECK(fs_fedpower_server_exchange_ready(a));
    CHECK(fs_fedpower_server_open_exchange(a, ids, 3, &err) == FS_ESTATE);
    CHECK(fs_fedpower_server_phase(a) == FS_FEDPOWER_UPLOAD); /* the sum is still to come */
    sel = fs_fedpower_server_exchange_selectors(a, &sl);
    CHECK(sel != NULL && sl == 3 * ct);
    if (sel == NULL || t_case_failed) {
        goto out;
    }
    selv = malloc(sl);
    memcpy(selv, sel, sl);
    /* parties 1 and 3 answer before the sum (during consistency/unmasking) */
    for (uint32_t i = 1; i <= 3; i += 2) {
        CHECK_OK(answer(a, cl[i], i, resp[i], rlen), &err);
        CHECK_OK(fs_fedpower_server_add_response(a, i, resp[i], rlen, &err), &err);
        CHECK(fs_fedpower_server_has_response(a, i));
    }
    CHECK(!fs_fedpower_server_has_response(a, 2));
    /* a sum over other parties than the exchange's is refused */
    CHECK(fs_fedpower_server_add_sum(a, sum, rl, other, 2, &err) == FS_ESTATE);
    CHECK_OK(fs_fedpower_server_add_sum(a, sum, rl, ids, 3, &err), &err);
    CHECK(fs_fedpower_server_phase(a) == FS_FEDPOWER_EXCHANGE);
    /* the early answers are kept; the same selectors; party 2 answers late */
    CHECK(fs_fedpower_server_has_response(a, 1) && fs_fedpower_server_has_response(a, 3));
    sel = fs_fedpower_server_exchange_selectors(a, &sl);
    CHECK(sel != NULL && sl == 3 * ct && memcmp(sel, selv, sl) == 0);
    CHECK_OK(answer(a, cl[2], 2, resp[2], rlen), &err);
    CHECK_OK(fs_fedpower_server_add_response(a, 2, resp[2], rlen, &err), &err);
    CHECK_OK(fs_fedpower_server_close_exchange(a, &err), &err);

    /* b replays the log: the selectors and the early answers before the sum */
    CHECK(fs_fedpower_server_restore_exchange(b, ids, 3, selv, sl - 1, &err) != 0);
    CHECK_OK(fs_fedpower_server_restore_exchange(b, ids, 3, selv, sl, &err), &err);
    for (uint32_t i = 1; i <= 3; i += 2) {
        CHECK_OK(fs_fedpower_server_add_response(b, i, resp[i], rlen, &err), &err);
    }
    CHECK_OK(fs_fedpower_server_add_sum(b, sum, rl, ids, 3, &err), &err);
    CHECK_OK(fs_fedpower_server_add_response(b, 2, resp[2], rlen, &err), &err);
    CHECK_OK(fs_fedpower_server_close_exchange(b, &err), &err);
    CHECK_MSG(same_bcast(a, b), "a replay with early responses gives another Z");

    /* o replays a log of the old order (the exchange after the sum) */
    CHECK_OK(fs_fedpower_server_add_sum(o, sum, rl, ids, 3, &err), &err);
    CHECK_OK(fs_fedpower_server_restore_selectors(o, selv, sl, &err), &err);
    for (uint32_t i = 1; i <= 3; i++) {
        CHECK_OK(fs_fedpower_server_add_response(o, i, resp[i], rlen, &err), &err);
    }
    CHECK_OK(fs_fedpower_server_close_exchange(o, &err), &err);
    CHECK_MSG(same_bcast(a, o), "the early exchange changed the result");

    /* every answer early: the outcome computed ahead of the sum, the close
     * only adds it; the same Z bit for bit */
    {
        fs_fedpower_server *p = NULL;
        struct fs_fedpower_xpre *x = NULL;
        CHECK_OK(fs_fedpower_server_new_restored(&c, rows, sec, len, &p, &err), &err);
        if (p != NULL) {
            CHECK(fs_fedpower_server_exchange_missing(p) == SIZE_MAX);
            CHECK(fs_fedpower_server_exchange_precompute(p, &x, &err) == FS_ESTATE);
            CHECK_OK(fs_fedpower_server_restore_exchange(p, ids, 3, selv, sl, &err), &err);
            for (uint32_t i = 1; i <= 2; i++) {
                CHECK_OK(fs_fedpower_server_add_response(p, i, resp[i], rlen, &err), &err);
            }
            CHECK(fs_fedpower_server_exchange_missing(p) == 1);
            CHECK(fs_fedpower_server_exchange_precompute(p, &x, &err) == FS_ESTATE && x == NULL);
            CHECK_OK(fs_fedpower_server_add_response(p, 3, resp[3], rlen, &err), &err);
            CHECK(fs_fedpower_server_exchange_missing(p) == 0);
            CHECK_OK(fs_fedpower_server_exchange_precompute(p, &x, &err), &err);
            /* not before the sum */
            CHECK(fs_fedpower_server_close_exchange_pre(p, x, &err) == FS_ESTATE);
            CHECK_OK(fs_fedpower_server_add_sum(p, sum, rl, ids, 3, &err), &err);
            CHECK_OK(fs_fedpower_server_close_exchange_pre(p, x, &err), &err);
            CHECK_MSG(same_bcast(a, p), "the exchange finished ahead changed the result");
            fs_fedpower_xpre_free(x);
        }
        fs_fedpower_server_free(p);
    }
out:
    for (uint32_t i = 1; i <= 3; i++) {
        fs_noisex_client_free(cl[i]);
        free(resp[i]);
    }
    fs_fedpower_server_free(a);
    fs_fedpower_server_free(b);
    fs_fedpower_server_free(o);
    free(sum);
    free(sec);
    free(selv);
    free(buf);
}

int main(void)
{
    RUN(test_paillier_sk_roundtrip);
    RUN(test_noisex_restore);
    RUN(test_fedpower_plain_restored);
    RUN(test_fedpower_utility_restored);
    RUN(test_fedpower_utility_early);
    return TEST_END("test_power_resume");
}
