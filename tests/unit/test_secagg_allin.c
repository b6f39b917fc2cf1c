/* All-inputs secure aggregation (cfg.all_inputs, lib/proto/secagg.h): no
 * consistency round; R4 opens when R2 closes with every active party's
 * input. Exact sums (full graph and SecAgg+), the server refusing to close
 * R2 with a party missing, the client refusing a survivor set that is not
 * the active set (and then revealing nothing), the consistency entry points
 * refusing, the session id binding the mode. State machines in one process. */
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "proto/secagg.h"
#include "test.h"
#include "test_secagg_util.h"

#include <stdlib.h>

#define LEN 37 /* words: two chunks of 32 and a short one */

struct aj {
    struct fs_secagg_config cfg;
    fs_secagg_server *s;
    fs_secagg_client **c; /* 1..n */
};

static void aj_init(struct aj *j, uint32_t n, uint32_t t, uint32_t aggs, uint32_t degree,
                    uint32_t share_t, uint32_t all_inputs, const uint8_t *det)
{
    struct fs_err err = {0};

    memset(j, 0, sizeof *j);
    j->cfg.n = n;
    j->cfg.t = t;
    j->cfg.aggregations = aggs;
    j->cfg.chunk_words = 32;
    j->cfg.degree = degree;
    j->cfg.share_t = share_t;
    j->cfg.all_inputs = all_inputs;
    memset(j->cfg.job_id, 0x5a, 32);
    j->c = calloc(n + 1, sizeof *j->c);
    CHECK_OK(fs_secagg_server_new(&j->cfg, NULL, &j->s, &err), &err);
    for (uint32_t i = 1; i <= n; i++) {
        uint8_t sk[32], pk[32], secret[32];
        if (det != NULL) {
            /* the same keys in both modes: only the mode differs */
            memset(sk, (int)i, 32);
            memcpy(secret, det, 32);
            secret[0] ^= (uint8_t)i;
            CHECK_OK(fs_secagg_client_new_det(&j->cfg, i, sk, secret, &j->c[i], &err), &err);
        } else {
            CHECK_OK(fs_ed25519_keygen(sk, pk, &err), &err);
            CHECK_OK(fs_secagg_client_new(&j->cfg, i, sk, &j->c[i], &err), &err);
        }
    }
}

static void aj_free(struct aj *j)
{
    fs_secagg_server_free(j->s);
    for (uint32_t i = 1; i <= j->cfg.n; i++) {
        fs_secagg_client_free(j->c[i]);
    }
    free(j->c);
}

/* R0, R1 with every party. */
static void aj_setup(struct aj *j)
{
    struct fs_err err = {0};

    for (uint32_t i = 1; i <= j->cfg.n; i++) {
        struct fs_secagg_adv a;
        CHECK_OK(fs_secagg_client_advertise(j->c[i], &a, &err), &err);
        CHECK_OK(fs_secagg_server_add_adv(j->s, &a, &err), &err);
    }
    CHECK_OK(sa_share_all(j->s, j->c, j->cfg.n, &err), &err);
}

static uint64_t xval(uint32_t i, uint32_t r, uint64_t w)
{
    return (uint64_t)i * 1000003u + w * 7919u + r * 104729u + (w << 60);
}

/* R2 of aggregation r: every active party but `missing` (0: none) uploads;
 * expected gets the uploaders' sum. */
static void aj_upload(struct aj *j, uint32_t r, uint32_t missing, uint64_t *expected)
{
    struct fs_err err = {0};
    const uint32_t *set;
    size_t na = 0;
    uint64_t x[LEN], y[LEN];

    memset(expected, 0, LEN * sizeof *expected);
    CHECK_OK(fs_secagg_server_begin(j->s, r, LEN, &err), &err);
    set = fs_secagg_server_set(j->s, 0, &na);
    CHECK(na == j->cfg.n);
    for (size_t q = 0; q < na; q++) {
        uint32_t i = set[q];
        CHECK_OK(fs_secagg_client_begin(j->c[i], r, LEN, set, na, &err), &err);
        if (i == missing) {
            continue;
        }
        for (uint64_t w = 0; w < LEN; w++) {
            x[w] = xval(i, r, w);
            expected[w] += x[w];
        }
        CHECK_OK(fs_secagg_client_mask(j->c[i], 0, x, y, LEN, &err), &err);
        for (uint64_t idx = 0; idx * 32 < LEN; idx++) {
            size_t m = LEN - idx * 32 < 32 ? LEN - idx * 32 : 32;
            CHECK_OK(fs_secagg_server_add_masked(j->s, i, idx, y + idx * 32, m, &err), &err);
        }
    }
}

/* One whole all-inputs aggregation: exact sum, no consistency phase, seeds only. */
static void aj_aggregate(struct aj *j, uint32_t r)
{
    struct fs_err err = {0};
    uint64_t expected[LEN];
    const uint64_t *sum = NULL;
    const uint32_t *u3, *u4;
    size_t n3 = 0, n4 = 0;

    aj_upload(j, r, 0, expected);
    CHECK_OK(fs_secagg_server_close_masked(j->s, &err), &err);
    /* straight to R4: U4 = U3 = the active set */
    CHECK(fs_secagg_server_phase(j->s) == FS_SECAGG_UNMASK);
    u3 = fs_secagg_server_set(j->s, 3, &n3);
    u4 = fs_secagg_server_set(j->s, 4, &n4);
    CHECK(n3 == j->cfg.n && n4 == n3 && memcmp(u3, u4, n3 * sizeof *u3) == 0);
    for (size_t q = 0; q < n3; q++) {
        struct fs_secagg_reveal *rv = NULL;
        size_t nrv = 0;
        uint32_t i = u3[q];
        CHECK_OK(fs_secagg_client_unmask_all(j->c[i], u3, n3, &rv, &nrv, &err), &err);
        CHECK(nrv == (j->cfg.degree != 0 ? j->cfg.degree + 1 : j->cfg.n));
        for (size_t e = 0; e < nrv; e++) {
            CHECK(rv[e].kind == FS_SECAGG_SELF_SEED);
        }
        CHECK_OK(fs_secagg_server_add_reveals(j->s, i, rv, nrv, &err), &err);
        /* an identical repeat is fine */
        CHECK_OK(fs_secagg_server_add_reveals(j->s, i, rv, nrv, &err), &err);
        free(rv);
    }
    CHECK_OK(fs_secagg_server_finish(j->s, &sum, &err), &err);
    CHECK(sum != NULL && memcmp(sum, expected, sizeof expected) == 0);
}

static void test_round_trip_full(void)
{
    struct aj j;

    aj_init(&j, 5, 3, 3, 0, 0, 1, NULL);
    aj_setup(&j);
    for (uint32_t r = 0; r < 3; r++) {
        aj_aggregate(&j, r);
    }
    aj_free(&j);
}

static void test_round_trip_plus(void)
{
    struct aj j;

    /* SecAgg+: 10 parties, 4 neighbours each, shares among them with threshold 3 */
    aj_init(&j, 10, 6, 2, 4, 3, 1, NULL);
    aj_setup(&j);
    for (uint32_t r = 0; r < 2; r++) {
        aj_aggregate(&j, r);
    }
    aj_free(&j);
}

static void test_server_refuses_missing_party(void)
{
    struct aj j;
    struct fs_err err = {0};
    uint64_t expected[LEN];

    /* t = 3 of 5: the four-round mode would go on without party 4 */
    aj_init(&j, 5, 3, 1, 0, 0, 1, NULL);
    aj_setup(&j);
    aj_upload(&j, 0, 4, expected);
    CHECK(fs_secagg_server_close_masked(j.s, &err) != 0);
    CHECK(fs_secagg_server_phase(j.s) == FS_SECAGG_ABORTED);
    CHECK(strstr(fs_secagg_server_abort_reason(j.s), "party 4") != NULL);
    aj_free(&j);
}

static void test_client_refuses_partial_u3(void)
{
    struct aj j;
    struct fs_err err = {0};
    uint64_t expected[LEN];
    struct fs_secagg_reveal *rv = NULL;
    size_t nrv = 7;
    uint32_t short_u3[4] = {1, 2, 3, 5};
    uint32_t all[5] = {5, 4, 3, 2, 1};
    uint32_t with_stranger[5] = {1, 2, 3, 4, 4};

    aj_init(&j, 5, 3, 2, 0, 0, 1, NULL);
    aj_setup(&j);
    aj_upload(&j, 0, 0, expected);
    /* a server claiming party 4 dropped gets nothing: no share of any kind */
    CHECK(fs_secagg_client_unmask_all(j.c[1], short_u3, 4, &rv, &nrv, &err) == FS_EAUTH);
    CHECK(rv == NULL && nrv == 0);
    CHECK(strstr(err.msg, "4") != NULL);
    /* repeated ids are not a way around it */
    CHECK(fs_secagg_client_unmask_all(j.c[1], with_stranger, 5, &rv, &nrv, &err) != 0);
    CHECK(rv == NULL && nrv == 0);
    /* still in the aggregation: the true active set (any order) unmasks, seeds only */
    CHECK_OK(fs_secagg_client_unmask_all(j.c[1], all, 5, &rv, &nrv, &err), &err);
    CHECK(nrv == 5);
    for (size_t e = 0; e < nrv; e++) {
        CHECK(rv[e].kind == FS_SECAGG_SELF_SEED);
    }
    free(rv);
    rv = NULL;
    /* once only per aggregation */
    CHECK(fs_secagg_client_unmask_all(j.c[1], all, 5, &rv, &nrv, &err) == FS_ESTATE);
    CHECK(rv == NULL);
    aj_free(&j);
}

static void test_consistency_refused(void)
{
    struct aj j;
    struct aj old;
    struct fs_err err = {0};
    uint64_t expected[LEN];
    uint8_t sig[64] = {0};
    uint8_t sigs[1][64] = {{0}};
    uint32_t ids[1] = {1};
    uint32_t all[3] = {1, 2, 3};
    struct fs_secagg_reveal *rv = NULL;
    size_t nrv = 0;

    aj_init(&j, 3, 2, 1, 0, 0, 1, NULL);
    aj_setup(&j);
    aj_upload(&j, 0, 0, expected);
    CHECK(fs_secagg_client_consistency(j.c[1], all, 3, sig, &err) == FS_ESTATE);
    CHECK(fs_secagg_client_unmask(j.c[1], ids, (const uint8_t(*)[64])sigs, 1, &rv, &nrv, &err) ==
          FS_ESTATE);
    CHECK(rv == NULL);
    CHECK(fs_secagg_server_add_consistency(j.s, 1, sig, &err) == FS_ESTATE);
    CHECK(fs_secagg_server_close_consistency(j.s, &err) == FS_ESTATE);
    CHECK_OK(fs_secagg_server_close_masked(j.s, &err), &err);
    CHECK(fs_secagg_server_add_consistency(j.s, 1, sig, &err) == FS_ESTATE);
    CHECK(fs_secagg_server_close_consistency(j.s, &err) == FS_ESTATE);
    aj_free(&j);

    /* and the four-round mode has no unmask_all */
    aj_init(&old, 3, 2, 1, 0, 0, 0, NULL);
    aj_setup(&old);
    aj_upload(&old, 0, 0, expected);
    CHECK(fs_secagg_client_unmask_all(old.c[1], all, 3, &rv, &nrv, &err) == FS_ESTATE);
    CHECK(rv == NULL);
    CHECK_OK(fs_secagg_server_close_masked(old.s, &err), &err);
    CHECK(fs_secagg_server_phase(old.s) == FS_SECAGG_CONSISTENCY);
    aj_free(&old);

    /* all_inputs is a flag */
    {
        struct fs_secagg_config c = {.n = 3, .t = 2, .aggregations = 1, .all_inputs = 2};
        CHECK(fs_secagg_config_check(&c, &err) == FS_EINVAL);
    }
}

static void test_session_binds_mode(void)
{
    struct aj a, b;
    struct fs_err err = {0};
    uint8_t det[32];
    const struct fs_secagg_adv *roster;
    size_t k = 0;
    struct fs_secagg_share_ct *cts = NULL;
    size_t nct = 0;
    const struct fs_secagg_share_ct **mine = NULL;
    struct fs_secagg_share_ct *flat;
    size_t km = 0;

    CHECK_OK(fs_rand_bytes(det, 32, &err), &err);
    aj_init(&a, 3, 2, 1, 0, 0, 0, det);
    aj_init(&b, 3, 2, 1, 0, 0, 1, det);
    aj_setup(&a);
    aj_setup(&b);
    /* same job, same keys: only the mode differs, and so does the session */
    CHECK(memcmp(fs_secagg_client_session(a.c[1]), fs_secagg_client_session(b.c[1]), 32) != 0);
    CHECK(memcmp(fs_secagg_client_session(a.c[1]), fs_secagg_client_session(a.c[2]), 32) == 0);
    aj_free(&a);
    aj_free(&b);

    /* a party of the other mode fails at the key exchange, not later */
    aj_init(&a, 3, 2, 1, 0, 0, 1, det);
    aj_init(&b, 3, 2, 1, 0, 0, 0, det);
    for (uint32_t i = 1; i <= 3; i++) {
        struct fs_secagg_adv adv;
        CHECK_OK(fs_secagg_client_advertise(a.c[i], &adv, &err), &err);
        CHECK_OK(fs_secagg_server_add_adv(a.s, &adv, &err), &err);
    }
    CHECK_OK(fs_secagg_server_close_adv(a.s, &err), &err);
    roster = fs_secagg_server_roster(a.s, &k);
    /* party 1 runs the four-round mode (b's client with a's roster: same keys) */
    {
        struct fs_secagg_adv adv;
        CHECK_OK(fs_secagg_client_advertise(b.c[1], &adv, &err), &err);
    }
    CHECK_OK(fs_secagg_client_share_keys(b.c[1], roster, k, &cts, &nct, &err), &err);
    CHECK_OK(fs_secagg_server_add_shares(a.s, 1, cts, nct, &err), &err);
    fs_secagg_share_cts_free(cts, nct);
    for (uint32_t i = 2; i <= 3; i++) {
        CHECK_OK(fs_secagg_client_share_keys(a.c[i], roster, k, &cts, &nct, &err), &err);
        CHECK_OK(fs_secagg_server_add_shares(a.s, i, cts, nct, &err), &err);
        fs_secagg_share_cts_free(cts, nct);
    }
    CHECK_OK(fs_secagg_server_close_shares(a.s, &err), &err);
    CHECK_OK(fs_secagg_server_shares_for(a.s, 2, &mine, &km, &err), &err);
    flat = calloc(km + 1, sizeof *flat);
    for (size_t q = 0; q < km; q++) {
        flat[q] = *mine[q];
    }
    CHECK(fs_secagg_client_receive_shares(a.c[2], flat, km, &err) != 0);
    free(flat);
    free(mine);
    aj_free(&a);
    aj_free(&b);
}

int main(void)
{
    RUN(test_round_trip_full);
    RUN(test_round_trip_plus);
    RUN(test_server_refuses_missing_party);
    RUN(test_client_refuses_partial_u3);
    RUN(test_consistency_refused);
    RUN(test_session_binds_mode);
    return TEST_END("test_secagg_allin");
}
