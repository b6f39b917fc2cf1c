/* The "ot" noise exchange (Bellare-Micali oblivious transfer on P-256,
 * lib/crypto/ecot.h) through the public API of noise_exchange.h: the
 * server recovers the seed of every responder but j, exactly; j is
 * uniform; non-responders, repeats and malformed messages; restore after a
 * restart; deterministic responses under a re-randomizer key; and
 * known-answer vectors (computed independently with a plain Python P-256). */
#include "crypto/ecot.h"
#include "crypto/rand.h"
#include "proto/noise_exchange.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>

#define CT   33u
#define RESP 65u

struct ot_job {
    struct fs_noisex_params p;
    fs_noisex_server *s;
    fs_noisex_client **c; /* 1..n */
    uint8_t (*seeds)[32]; /* 1..n */
};

static void job_init(struct ot_job *j, uint32_t n)
{
    struct fs_err err = {0};
    uint8_t pk[CT];

    memset(j, 0, sizeof *j);
    j->p.mode = FS_NOISEX_OT;
    j->p.parties = n;
    CHECK_OK(fs_noisex_server_new(&j->p, 3072, &j->s, &err), &err);
    if (j->s == NULL) {
        return;
    }
    CHECK(fs_noisex_server_pk_size(j->s) == CT);
    CHECK(fs_noisex_server_ct_size(j->s) == CT);
    CHECK(fs_noisex_server_response_size(j->s) == RESP);
    CHECK(fs_noisex_server_slots(j->s) == 1);
    CHECK(fs_noisex_server_sk_size(j->s) == 32);
    CHECK_OK(fs_noisex_server_pk_export(j->s, pk, sizeof pk, &err), &err);
    j->c = calloc(n + 1, sizeof *j->c);
    j->seeds = calloc(n + 1, sizeof *j->seeds);
    for (uint32_t i = 1; i <= n; i++) {
        CHECK_OK(fs_noisex_client_new(&j->p, pk, sizeof pk, &j->c[i], &err), &err);
        CHECK(fs_noisex_client_ct_size(j->c[i]) == CT);
        CHECK(fs_noisex_client_response_size(j->c[i]) == RESP);
        CHECK_OK(fs_rand_bytes(j->seeds[i], 32, &err), &err);
    }
}

static void job_free(struct ot_job *j)
{
    for (uint32_t i = 1; j->c != NULL && i <= j->p.parties; i++) {
        fs_noisex_client_free(j->c[i]);
    }
    free(j->c);
    free(j->seeds);
    fs_noisex_server_free(j->s);
}

/* Party i answers its selector of the open round; the server takes it. */
static void answer(struct ot_job *j, uint32_t i)
{
    struct fs_err err = {0};
    uint8_t sel[CT];
    uint8_t resp[RESP];

    CHECK_OK(fs_noisex_server_selector(j->s, i, sel, sizeof sel, &err), &err);
    CHECK_OK(fs_noisex_client_respond_seed(j->c[i], sel, sizeof sel, j->seeds[i], resp, sizeof resp,
                                           &err),
             &err);
    CHECK_OK(fs_noisex_server_add_response(j->s, i, resp, sizeof resp, &err), &err);
    CHECK(fs_noisex_server_has_response(j->s, i));
}

/* The result holds exactly the seeds of the responders but j, ascending. */
static void check_result(const struct ot_job *j, const struct fs_noisex_result *res,
                         const int *responds)
{
    size_t q = 0;

    for (uint32_t i = 1; i <= j->p.parties; i++) {
        if ((responds != NULL && !responds[i]) || i == res->chosen) {
            continue;
        }
        CHECK_MSG(q < res->removed && res->ids[q] == i, "party %u missing", i);
        if (q < res->removed && res->ids[q] == i) {
            CHECK(memcmp(res->seeds[q], j->seeds[i], 32) == 0);
            q++;
        }
    }
    CHECK(q == res->removed);
    CHECK(res->decryptions == res->removed);
}

static void run_round_trip(uint32_t n)
{
    struct fs_err err = {0};
    struct ot_job j;
    struct fs_noisex_result res = {0};
    uint32_t *ids = malloc(n * sizeof *ids);

    job_init(&j, n);
    for (uint32_t i = 0; i < n; i++) {
        ids[i] = n - i; /* any order */
    }
    CHECK_OK(fs_noisex_server_begin(j.s, 3, ids, n, &err), &err);
    for (uint32_t i = 1; i <= n; i++) {
        answer(&j, i);
    }
    CHECK_OK(fs_noisex_server_finish(j.s, &res, &err), &err);
    CHECK(res.round == 3);
    CHECK(res.chosen >= 1 && res.chosen <= n);
    CHECK(res.removed == n - 1);
    check_result(&j, &res, NULL);
    fs_noisex_result_clear(&res);
    CHECK(fs_noisex_server_finish(j.s, &res, &err) == FS_ESTATE);
    free(ids);
    job_free(&j);
}

static void test_round_trip(void)
{
    run_round_trip(1);
    run_round_trip(2);
    run_round_trip(3);
    run_round_trip(20);
    run_round_trip(50);
}

static void test_params(void)
{
    struct fs_err err = {0};
    struct fs_noisex_params p = {FS_NOISEX_OT, 3, 0, 0};
    enum fs_noisex_mode m = FS_NOISEX_SEED;

    CHECK_OK(fs_noisex_params_check(&p, &err), &err);
    p.parties = 0;
    CHECK(fs_noisex_params_check(&p, &err) == FS_EINVAL);
    CHECK_OK(fs_noisex_mode_parse("ot", &m, &err), &err);
    CHECK(m == FS_NOISEX_OT);
    CHECK(strcmp(fs_noisex_mode_name(FS_NOISEX_OT), "ot") == 0);
}

/* j over 2000 rounds of 4 parties: every id chosen 400..600 times (500
 * expected, standard deviation 19: 5.2 of them either side); 400 rounds
 * (55..145) under the sanitizers and with FS_TEST_QUICK (valgrind). A
 * constant j, or one that skips a party, fails either way. */
static void test_j_uniform(void)
{
    struct fs_err err = {0};
    struct ot_job j;
    struct fs_noisex_result res = {0};
    const uint32_t ids[4] = {1, 2, 3, 4};
    unsigned count[5] = {0};
    unsigned rounds = t_quick() ? 400u : 2000u;
    unsigned tol = (unsigned)(5.2 * sqrt(rounds * 3.0 / 16.0));

    job_init(&j, 4);
    for (unsigned r = 1; r <= rounds; r++) {
        CHECK_OK(fs_noisex_server_begin(j.s, r, ids, 4, &err), &err);
        CHECK_OK(fs_noisex_server_finish(j.s, &res, &err), &err);
        CHECK(res.removed == 0 && res.decryptions == 0);
        if (res.chosen >= 1 && res.chosen <= 4) {
            count[res.chosen]++;
        }
        fs_noisex_result_clear(&res);
    }
    for (uint32_t i = 1; i <= 4; i++) {
        CHECK_MSG(count[i] + tol >= rounds / 4 && count[i] <= rounds / 4 + tol,
                  "id %u chosen %u times in %u rounds", i, count[i], rounds);
    }
    job_free(&j);
}

/* Non-responders are absent; an identical repeat is accepted, other bytes
 * are a conflict; peek then end is finish. */
static void test_nonresponders(void)
{
    struct fs_err err = {0};
    struct ot_job j;
    struct fs_noisex_result res = {0};
    struct fs_noisex_result res2 = {0};
    const uint32_t ids[6] = {1, 2, 3, 4, 5, 6};
    const int responds[7] = {0, 1, 0, 1, 0, 1, 1};
    uint8_t sel[CT];
    uint8_t resp[RESP];
    uint8_t other[RESP];

    job_init(&j, 6);
    CHECK(fs_noisex_server_selector(j.s, 1, sel, sizeof sel, &err) == FS_ESTATE);
    CHECK_OK(fs_noisex_server_begin(j.s, 1, ids, 6, &err), &err);
    CHECK(fs_noisex_server_begin(j.s, 1, ids, 6, &err) == FS_ESTATE); /* not after round 1 */
    for (uint32_t i = 1; i <= 6; i++) {
        if (responds[i]) {
            answer(&j, i);
        }
    }
    CHECK(!fs_noisex_server_has_response(j.s, 2));
    CHECK_OK(fs_noisex_server_selector(j.s, 1, sel, sizeof sel, &err), &err);
    CHECK_OK(
        fs_noisex_client_respond_seed(j.c[1], sel, sizeof sel, j.seeds[1], resp, sizeof resp, &err),
        &err);
    CHECK_OK(fs_noisex_client_respond_seed(j.c[1], sel, sizeof sel, j.seeds[1], other, sizeof other,
                                           &err),
             &err);
    CHECK(memcmp(resp, other, RESP) != 0); /* a fresh r each time */
    CHECK(fs_noisex_server_add_response(j.s, 1, other, sizeof other, &err) == FS_ECONFLICT);
    CHECK(fs_noisex_server_add_response(j.s, 7, other, sizeof other, &err) == FS_ENOTFOUND);
    CHECK_OK(fs_noisex_server_peek(j.s, &res, &err), &err);
    fs_noisex_server_end(j.s);
    CHECK(fs_noisex_server_peek(j.s, &res2, &err) == FS_ESTATE);
    check_result(&j, &res, responds);
    CHECK(res.removed == (res.chosen == 2 || res.chosen == 4 ? 4u : 3u));
    fs_noisex_result_clear(&res);
    job_free(&j);
}

/* Points the party and the server refuse, each FS_EFORMAT. */
static void bad_points(uint8_t bad[][CT], size_t *nbad, const uint8_t c[CT])
{
    size_t n = 0;

    memset(bad[n++], 0, CT); /* the point at infinity's prefix */
    memcpy(bad[n], c, CT);
    bad[n++][0] = 0x04; /* an uncompressed prefix */
    memcpy(bad[n], c, CT);
    bad[n++][0] = 0x05;
    /* x = 1 is no P-256 point's (1 - 3 + b is not a square modulo p) */
    memset(bad[n], 0, CT);
    bad[n][0] = 0x02;
    bad[n++][32] = 1;
    /* x = 2^256 - 1 >= p */
    memset(bad[n], 0xff, CT);
    bad[n++][0] = 0x03;
    *nbad = n;
}

static void test_bad_messages(void)
{
    struct fs_err err = {0};
    struct ot_job j;
    struct fs_noisex_result res = {0};
    struct fs_noisex_params ps = {FS_NOISEX_SEED, 2, 0, 0};
    const uint32_t ids[2] = {1, 2};
    uint8_t bad[8][CT];
    uint8_t c[CT];
    uint8_t sel[CT];
    uint8_t resp[RESP];
    uint8_t tmp[RESP];
    fs_noisex_client *cl = NULL;
    size_t nbad = 0;
    int64_t noise[1] = {0};

    job_init(&j, 2);
    CHECK_OK(fs_noisex_server_pk_export(j.s, c, sizeof c, &err), &err);
    bad_points(bad, &nbad, c);
    /* the party: a wrong constant, a selector it cannot use */
    CHECK(fs_noisex_client_new(&j.p, c, CT - 1, &cl, &err) == FS_EFORMAT);
    c[32] ^= 1;
    CHECK(fs_noisex_client_new(&j.p, c, CT, &cl, &err) == FS_EFORMAT);
    CHECK(strstr(err.msg, "OT constant") != NULL);
    CHECK(fs_noisex_client_new(&ps, c, CT, &cl, &err) != 0); /* not a Paillier key */
    c[32] ^= 1;
    CHECK(cl == NULL);
    CHECK(fs_noisex_client_respond_seed(j.c[1], c, CT, j.seeds[1], resp, RESP, &err) ==
          FS_EFORMAT); /* PK0 = C */
    for (size_t b = 0; b < nbad; b++) {
        CHECK_MSG(fs_noisex_client_respond_seed(j.c[1], bad[b], CT, j.seeds[1], resp, RESP, &err) ==
                      FS_EFORMAT,
                  "bad point %zu", b);
    }
    CHECK_OK(fs_noisex_server_begin(j.s, 9, ids, 2, &err), &err);
    CHECK_OK(fs_noisex_server_selector(j.s, 1, sel, sizeof sel, &err), &err);
    CHECK(fs_noisex_client_respond_seed(j.c[1], sel, CT - 1, j.seeds[1], resp, RESP, &err) ==
          FS_EFORMAT);
    CHECK(fs_noisex_client_respond_seed(j.c[1], sel, CT, j.seeds[1], resp, RESP - 1, &err) ==
          FS_EINVAL);
    CHECK(fs_noisex_client_respond_noise(j.c[1], sel, CT, noise, 1, resp, RESP, &err) == FS_ESTATE);
    CHECK_OK(fs_noisex_client_respond_seed(j.c[1], sel, CT, j.seeds[1], resp, RESP, &err), &err);
    /* the server: responses whose R is not a point, or of another length */
    CHECK(fs_noisex_server_add_response(j.s, 1, resp, RESP - 1, &err) == FS_EFORMAT);
    CHECK(fs_noisex_server_add_response(j.s, 1, resp, 97, &err) == FS_EFORMAT);
    for (size_t b = 0; b < nbad; b++) {
        memcpy(tmp, bad[b], CT);
        memcpy(tmp + CT, resp + CT, RESP - CT);
        CHECK_MSG(fs_noisex_server_add_response(j.s, 1, tmp, RESP, &err) == FS_EFORMAT, "bad R %zu",
                  b);
    }
    CHECK(!fs_noisex_server_has_response(j.s, 1)); /* nothing changed */
    CHECK_OK(fs_noisex_server_add_response(j.s, 1, resp, RESP, &err), &err);
    answer(&j, 2);
    CHECK_OK(fs_noisex_server_finish(j.s, &res, &err), &err);
    check_result(&j, &res, NULL);
    CHECK(res.removed == 1);
    fs_noisex_result_clear(&res);
    job_free(&j);
}

/* A restarted server (its exported secret) reopens a round from its
 * selectors: the same j, and it opens the answers; tampered selectors or
 * another secret's are refused. */
static void test_restore(void)
{
    struct fs_err err = {0};
    struct ot_job j;
    struct fs_noisex_result res = {0};
    const uint32_t ids[5] = {1, 2, 3, 4, 5};
    uint8_t sk[32];
    uint8_t sel[5 * CT];
    uint8_t bad[5 * CT];
    const uint8_t *cur;
    size_t len = 0;
    uint32_t chosen;
    fs_noisex_server *s2 = NULL;
    fs_noisex_server *other = NULL;

    job_init(&j, 5);
    CHECK_OK(fs_noisex_server_begin(j.s, 12, ids, 5, &err), &err);
    cur = fs_noisex_server_selectors(j.s, &len);
    CHECK(cur != NULL && len == sizeof sel);
    memcpy(sel, cur, sizeof sel);
    CHECK_OK(fs_noisex_server_sk_export(j.s, sk, sizeof sk, &err), &err);
    CHECK(fs_noisex_server_sk_export(j.s, sk, sizeof sk - 1, &err) == FS_EINVAL);
    CHECK_OK(fs_noisex_server_finish(j.s, &res, &err), &err);
    chosen = res.chosen;
    fs_noisex_result_clear(&res);

    CHECK(fs_noisex_server_new_from_key(&j.p, sk, 31, &s2, &err) == FS_EFORMAT);
    CHECK_OK(fs_noisex_server_new_from_key(&j.p, sk, sizeof sk, &s2, &err), &err);
    CHECK_OK(fs_noisex_server_new(&j.p, 0, &other, &err), &err);
    fs_noisex_server_free(j.s);
    j.s = s2;
    /* tampered: a flipped byte, two selectors swapped (j's moves), another secret's */
    memcpy(bad, sel, sizeof bad);
    bad[2 * CT + 7] ^= 0x40;
    CHECK(fs_noisex_server_restore(j.s, 12, ids, 5, bad, sizeof bad, &err) == FS_EFORMAT);
    CHECK(fs_noisex_server_selectors(j.s, &len) == NULL);
    size_t jq = chosen - 1;
    size_t oq = jq == 0 ? 1 : 0;
    memcpy(bad, sel, sizeof bad);
    memcpy(bad + jq * CT, sel + oq * CT, CT);
    memcpy(bad + oq * CT, sel + jq * CT, CT);
    CHECK(fs_noisex_server_restore(j.s, 12, ids, 5, bad, sizeof bad, &err) == FS_EFORMAT);
    CHECK(fs_noisex_server_restore(j.s, 11, ids, 5, sel, sizeof sel, &err) == FS_EFORMAT);
    CHECK(fs_noisex_server_restore(other, 12, ids, 5, sel, sizeof sel, &err) == FS_EFORMAT);
    CHECK(fs_noisex_server_restore(j.s, 12, ids, 5, sel, sizeof sel - 1, &err) == FS_EFORMAT);
    /* the real ones: the same bytes, the same j, the seeds open */
    CHECK_OK(fs_noisex_server_restore(j.s, 12, ids, 5, sel, sizeof sel, &err), &err);
    cur = fs_noisex_server_selectors(j.s, &len);
    CHECK(cur != NULL && len == sizeof sel && memcmp(cur, sel, sizeof sel) == 0);
    for (uint32_t i = 1; i <= 5; i++) {
        answer(&j, i);
    }
    CHECK_OK(fs_noisex_server_finish(j.s, &res, &err), &err);
    CHECK(res.chosen == chosen);
    CHECK(res.removed == 4);
    check_result(&j, &res, NULL);
    fs_noisex_result_clear(&res);
    fs_noisex_server_free(other);
    job_free(&j);
}

/* prepare + begin_prepared is begin; selectors of one round are distinct points. */
static void test_prepared(void)
{
    struct fs_err err = {0};
    struct ot_job j;
    struct fs_noisex_result res = {0};
    fs_noisex_prepared *x = NULL;
    const uint32_t ids[3] = {3, 1, 2};
    const uint8_t *sel;
    size_t len = 0;

    job_init(&j, 3);
    CHECK_OK(fs_noisex_server_prepare(j.s, 4, ids, 3, &x, &err), &err);
    CHECK(fs_noisex_server_selectors(j.s, &len) == NULL); /* s unchanged */
    CHECK_OK(fs_noisex_server_begin_prepared(j.s, x, &err), &err);
    sel = fs_noisex_server_selectors(j.s, &len);
    CHECK(sel != NULL && len == 3 * CT);
    CHECK(memcmp(sel, sel + CT, CT) != 0 && memcmp(sel + CT, sel + 2 * CT, CT) != 0);
    for (uint32_t i = 1; i <= 3; i++) {
        answer(&j, i);
    }
    CHECK_OK(fs_noisex_server_finish(j.s, &res, &err), &err);
    check_result(&j, &res, NULL);
    CHECK(res.removed == 2 && res.round == 4);
    fs_noisex_result_clear(&res);
    CHECK_OK(fs_noisex_server_prepare(j.s, 4, ids, 3, &x, &err), &err);
    CHECK(fs_noisex_server_begin_prepared(j.s, x, &err) == FS_ESTATE); /* not after round 4 */
    job_free(&j);
}

/* With a re-randomizer key, the same selector and seed give the same bytes. */
static void test_rerand_det(void)
{
    struct fs_err err = {0};
    struct ot_job j;
    const uint32_t ids[2] = {1, 2};
    uint8_t pk[CT];
    uint8_t key[32];
    uint8_t base[32] = {9};
    uint8_t sel[CT];
    uint8_t r1[RESP], r2[RESP], r3[RESP];
    fs_noisex_client *c2 = NULL;

    job_init(&j, 2);
    CHECK_OK(fs_noisex_server_pk_export(j.s, pk, sizeof pk, &err), &err);
    CHECK_OK(fs_noisex_client_new_det(&j.p, pk, sizeof pk, base, &c2, &err), &err);
    CHECK_OK(fs_rand_bytes(key, sizeof key, &err), &err);
    CHECK_OK(fs_noisex_server_begin(j.s, 1, ids, 2, &err), &err);
    CHECK_OK(fs_noisex_server_selector(j.s, 1, sel, sizeof sel, &err), &err);
    CHECK_OK(fs_noisex_client_set_rerand_key(j.c[1], key, &err), &err);
    CHECK_OK(fs_noisex_client_set_rerand_key(c2, key, &err), &err); /* a restarted agent */
    CHECK_OK(fs_noisex_client_respond_seed(j.c[1], sel, CT, j.seeds[1], r1, RESP, &err), &err);
    CHECK_OK(fs_noisex_client_respond_seed(c2, sel, CT, j.seeds[1], r2, RESP, &err), &err);
    CHECK(memcmp(r1, r2, RESP) == 0);
    key[0] ^= 1;
    CHECK_OK(fs_noisex_client_set_rerand_key(c2, key, &err), &err);
    CHECK_OK(fs_noisex_client_respond_seed(c2, sel, CT, j.seeds[1], r3, RESP, &err), &err);
    CHECK(memcmp(r1, r3, CT) != 0); /* another R */
    CHECK_OK(fs_noisex_client_set_rerand_key(c2, NULL, &err), &err);
    CHECK_OK(fs_noisex_client_respond_seed(c2, sel, CT, j.seeds[1], r2, RESP, &err), &err);
    CHECK_OK(fs_noisex_client_respond_seed(c2, sel, CT, j.seeds[1], r3, RESP, &err), &err);
    CHECK(memcmp(r2, r3, CT) != 0 && memcmp(r1, r2, CT) != 0);
    /* the deterministic answer opens like any other */
    CHECK_OK(fs_noisex_server_add_response(j.s, 1, r1, RESP, &err), &err);
    fs_noisex_client_free(c2);
    job_free(&j);
}

static void unhex(const char *h, uint8_t *out, size_t n)
{
    for (size_t q = 0; q < n; q++) {
        unsigned v = 0;
        CHECK(sscanf(h + 2 * q, "%2x", &v) == 1);
        out[q] = (uint8_t)v;
    }
}

/* Known answers, computed independently with a plain Python P-256: the
 * constant C (counter 3), the selectors of secret 00..1f for round 7,
 * parties 3 and 4, and party 3's answer (re-randomizer key 20..3f, seed
 * 40..5f) to its non-j selector. */
static void test_kat(void)
{
    static const char *c_hex = "020fd9856d56d02b7d4980017df755ea4fc974a2ff7026a2d6324066abd89ceaa2";
    static const char *kg3 = "0282627e55b9be59531f63a6c54691e9919dcb4499c800585d714854a0dfbfba27";
    static const char *ckg3 = "0212b488f6a2df52bab56a2dd69fd2fa4e4513e2edba97dbe1ad7433b5fbacfd61";
    static const char *kg4 = "03ad7255b1186a84b904d5d1101097aec90ccf38f3dd3d49556b8e9616b06e3895";
    static const char *ckg4 = "03f3a9f74579b63cb69ad2bd7389085e9577bb8e00bdede20858d953476748e44e";
    static const char *resp3 = "034abe71dfcc94643dd209e1fb49a85f1477ebf05c33e32f22265d5d98c01efea3"
                               "5b4a63d04192b1e511a5400cd87eb4d1063a9163959d29850033b7f2d48d1f9a";
    struct fs_err err = {0};
    struct fs_noisex_params p = {FS_NOISEX_OT, 4, 0, 0};
    struct fs_noisex_result res = {0};
    fs_noisex_server *s = NULL;
    fs_noisex_client *c = NULL;
    uint8_t sk[32], rkey[32], seed[32], base[32] = {0};
    uint8_t want[2 * CT], got[2 * CT], r[RESP], out[RESP], cbuf[CT];
    const uint32_t three = 3;
    const uint32_t ids[2] = {3, 4};

    for (unsigned q = 0; q < 32; q++) {
        sk[q] = (uint8_t)q;
        rkey[q] = (uint8_t)(0x20 + q);
        seed[q] = (uint8_t)(0x40 + q);
    }
    CHECK_OK(fs_noisex_server_new_from_key(&p, sk, sizeof sk, &s, &err), &err);
    if (s == NULL) {
        return;
    }
    unhex(c_hex, want, CT);
    CHECK_OK(fs_noisex_server_pk_export(s, cbuf, sizeof cbuf, &err), &err);
    CHECK(memcmp(cbuf, want, CT) == 0);
    /* a round of party 3 alone: it is j, its selector k0 G */
    CHECK_OK(fs_noisex_server_begin(s, 7, &three, 1, &err), &err);
    CHECK_OK(fs_noisex_server_selector(s, 3, got, CT, &err), &err);
    unhex(kg3, want, CT);
    CHECK(memcmp(got, want, CT) == 0);
    /* parties 3 and 4 with 4 chosen: C - k1_3 G, k0_4 G */
    unhex(ckg3, want, CT);
    unhex(kg4, want + CT, CT);
    CHECK_OK(fs_noisex_server_restore(s, 7, ids, 2, want, sizeof want, &err), &err);
    unhex(kg3, got, CT); /* 3 chosen */
    unhex(ckg4, got + CT, CT);
    CHECK_OK(fs_noisex_server_restore(s, 7, ids, 2, got, sizeof got, &err), &err);
    CHECK_OK(fs_noisex_server_finish(s, &res, &err), &err);
    CHECK(res.chosen == 3);
    fs_noisex_result_clear(&res);
    /* party 3's answer */
    CHECK_OK(fs_noisex_client_new_det(&p, cbuf, CT, base, &c, &err), &err);
    CHECK_OK(fs_noisex_client_set_rerand_key(c, rkey, &err), &err);
    CHECK_OK(fs_noisex_client_respond_seed(c, want, CT, seed, out, RESP, &err), &err);
    unhex(resp3, r, RESP);
    CHECK(memcmp(out, r, RESP) == 0);
    /* the server opens it to the seed */
    CHECK_OK(fs_noisex_server_restore(s, 7, ids, 2, want, sizeof want, &err), &err);
    CHECK_OK(fs_noisex_server_add_response(s, 3, r, RESP, &err), &err);
    CHECK_OK(fs_noisex_server_finish(s, &res, &err), &err);
    CHECK(res.chosen == 4 && res.removed == 1 && res.ids != NULL && res.ids[0] == 3);
    CHECK(res.seeds != NULL && memcmp(res.seeds[0], seed, 32) == 0);
    fs_noisex_result_clear(&res);
    fs_noisex_client_free(c);
    fs_noisex_server_free(s);
}

int main(void)
{
    RUN(test_params);
    RUN(test_round_trip);
    RUN(test_j_uniform);
    RUN(test_nonresponders);
    RUN(test_bad_messages);
    RUN(test_restore);
    RUN(test_prepared);
    RUN(test_rerand_det);
    RUN(test_kat);
    return TEST_END("test_noisex_ot");
}
