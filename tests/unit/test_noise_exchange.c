/* Encrypted noise exchange (fedpower-utility) driven in one
 * process with real Paillier keys (1024 bits; one 3072-bit run): the
 * server's recovered noise equals the sum of every party's noise but j's,
 * exactly, in both modes; selectors are fresh, distinct and of one size;
 * j is uniform; non-responders and bad messages. */
#include "crypto/rand.h"
#include "dp/dgauss.h"
#include "proto/fedpower.h"
#include "proto/noise_exchange.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define BITS 1024u

static int quick(void)
{
    const char *q = getenv("FS_TEST_QUICK");
    return q != NULL && q[0] != '\0' && q[0] != '0';
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct nx_job {
    struct fs_noisex_params p;
    fs_noisex_server *s;
    fs_noisex_client **c; /* 1..n */
    uint8_t *pk;
    size_t pk_len;
};

static void nx_job_init(struct nx_job *j, enum fs_noisex_mode mode, uint32_t n, size_t len,
                        unsigned value_bits, unsigned bits)
{
    struct fs_err err = {0};

    memset(j, 0, sizeof *j);
    j->p.mode = mode;
    j->p.parties = n;
    j->p.noise_len = len;
    j->p.value_bits = value_bits;
    CHECK_OK(fs_noisex_server_new(&j->p, bits, &j->s, &err), &err);
    j->pk_len = fs_noisex_server_pk_size(j->s);
    j->pk = malloc(j->pk_len);
    CHECK_OK(fs_noisex_server_pk_export(j->s, j->pk, j->pk_len, &err), &err);
    j->c = calloc(n + 1, sizeof *j->c);
    for (uint32_t i = 1; i <= n; i++) {
        CHECK_OK(fs_noisex_client_new(&j->p, j->pk, j->pk_len, &j->c[i], &err), &err);
        CHECK(fs_noisex_client_response_size(j->c[i]) == fs_noisex_server_response_size(j->s));
    }
}

static void nx_job_free(struct nx_job *j)
{
    for (uint32_t i = 1; i <= j->p.parties; i++) {
        fs_noisex_client_free(j->c[i]);
    }
    free(j->c);
    free(j->pk);
    fs_noisex_server_free(j->s);
}

/* One round over ids 1..n where responds[i] says whether party i answers.
 * seeds, noise: the parties' secrets. */
static void nx_round(struct nx_job *j, uint32_t round, const int *responds, uint8_t (*seeds)[32],
                     int64_t **noise, struct fs_noisex_result *res)
{
    struct fs_err err = {0};
    uint32_t n = j->p.parties;
    uint32_t *ids = malloc(n * sizeof *ids);
    size_t cs = fs_noisex_server_ct_size(j->s);
    size_t rs = fs_noisex_server_response_size(j->s);
    uint8_t *sel = malloc(cs);
    uint8_t *resp = malloc(rs);

    for (uint32_t i = 0; i < n; i++) {
        ids[i] = n - i; /* any order */
    }
    CHECK_OK(fs_noisex_server_begin(j->s, round, ids, n, &err), &err);
    for (uint32_t i = 1; i <= n; i++) {
        if (responds != NULL && !responds[i]) {
            continue;
        }
        CHECK_OK(fs_noisex_server_selector(j->s, i, sel, cs, &err), &err);
        if (j->p.mode == FS_NOISEX_SEED) {
            CHECK_OK(fs_noisex_client_respond_seed(j->c[i], sel, cs, seeds[i], resp, rs, &err),
                     &err);
        } else {
            CHECK_OK(fs_noisex_client_respond_noise(j->c[i], sel, cs, noise[i], j->p.noise_len,
                                                    resp, rs, &err),
                     &err);
        }
        CHECK_OK(fs_noisex_server_add_response(j->s, i, resp, rs, &err), &err);
        /* an identical retry is accepted */
        CHECK_OK(fs_noisex_server_add_response(j->s, i, resp, rs, &err), &err);
        CHECK(fs_noisex_server_has_response(j->s, i));
    }
    CHECK_OK(fs_noisex_server_finish(j->s, res, &err), &err);
    free(resp);
    free(sel);
    free(ids);
}

static void test_params(void)
{
    struct fs_err err = {0};
    struct fs_noisex_params p = {FS_NOISEX_SEED, 3, 0, 0};
    enum fs_noisex_mode m;

    CHECK_OK(fs_noisex_params_check(&p, &err), &err);
    p.parties = 0;
    CHECK(fs_noisex_params_check(&p, &err) == FS_EINVAL);
    p.parties = 4;
    p.mode = FS_NOISEX_ELEMENTWISE;
    CHECK(fs_noisex_params_check(&p, &err) == FS_EINVAL); /* noise_len 0 */
    p.noise_len = 10;
    p.value_bits = 63; /* + ceil(log2 4) = 65 > 64 */
    CHECK(fs_noisex_params_check(&p, &err) == FS_EINVAL);
    p.value_bits = 62;
    CHECK_OK(fs_noisex_params_check(&p, &err), &err);
    CHECK_OK(fs_noisex_mode_parse("elementwise", &m, &err), &err);
    CHECK(m == FS_NOISEX_ELEMENTWISE);
    CHECK_OK(fs_noisex_mode_parse("seed", &m, &err), &err);
    CHECK(m == FS_NOISEX_SEED);
    CHECK(fs_noisex_mode_parse("all-ones", &m, &err) == FS_EINVAL);
}

/* Seed mode: the recovered seeds regenerate the noise of every party but j,
 * and their sum is exactly the sum of those parties' noise. */
static void run_seed_exact(uint32_t n, unsigned bits, size_t len)
{
    struct fs_err err = {0};
    struct nx_job j;
    struct fs_noisex_result res = {0};
    uint8_t(*seeds)[32] = calloc(n + 1, 32);
    int64_t **noise = calloc(n + 1, sizeof *noise);
    int64_t *expect = calloc(len, sizeof *expect);
    int64_t *got = calloc(len, sizeof *got);
    int64_t *tmp = calloc(len, sizeof *tmp);
    const double sigma = 1048576.5; /* a fixed-point scale std, as the protocol uses */

    nx_job_init(&j, FS_NOISEX_SEED, n, 0, 0, bits);
    for (uint32_t i = 1; i <= n; i++) {
        CHECK_OK(fs_rand_bytes(seeds[i], 32, &err), &err);
        noise[i] = malloc(len * sizeof **noise);
        CHECK_OK(fs_fedpower_noise_from_seed(seeds[i], sigma, noise[i], len, &err), &err);
    }
    nx_round(&j, 7, NULL, seeds, noise, &res);
    CHECK(res.round == 7);
    CHECK(res.chosen >= 1 && res.chosen <= n);
    CHECK(res.removed == n - 1);
    /* one decryption per group of slots: ceil((n-1) / slots), the slots
     * below p (bits/2 - 1 bits) when one fits, else below n */
    size_t slots = fs_noisex_server_slots(j.s);
    CHECK(slots == (bits / 2 - 1 >= 256 ? (bits / 2 - 1) / 256 : (bits - 1) / 256));
    CHECK(res.decryptions == (n - 1 + slots - 1) / slots);
    for (uint32_t i = 1; i <= n; i++) {
        if (i == res.chosen) {
            continue;
        }
        for (size_t w = 0; w < len; w++) {
            expect[w] += noise[i][w];
        }
    }
    for (size_t q = 0; q < res.removed; q++) {
        uint32_t id = res.ids[q];
        CHECK(id != res.chosen);
        CHECK(memcmp(res.seeds[q], seeds[id], 32) == 0);
        CHECK_OK(fs_fedpower_noise_from_seed(res.seeds[q], sigma, tmp, len, &err), &err);
        for (size_t w = 0; w < len; w++) {
            got[w] += tmp[w];
        }
    }
    CHECK(memcmp(got, expect, len * sizeof *got) == 0);
    fs_noisex_result_clear(&res);
    nx_job_free(&j);
    for (uint32_t i = 1; i <= n; i++) {
        free(noise[i]);
    }
    free(noise);
    free(seeds);
    free(expect);
    free(got);
    free(tmp);
}

static void test_seed_mode_exact(void)
{
    run_seed_exact(5, BITS, 300);
    run_seed_exact(2, BITS, 17);
    run_seed_exact(8, BITS, 5); /* seven decryption groups of 1 slot below p */
    run_seed_exact(3, 512, 5);  /* no slot below p: groups of 1 slot modulo n */
}

/* Elementwise (the paper's form): the decrypted product is exactly the sum of
 * every party's noise vector but j's. */
static void test_elementwise_exact(void)
{
    struct fs_err err = {0};
    struct nx_job j;
    struct fs_noisex_result res = {0};
    const uint32_t n = 4;
    const size_t len = 100;
    int64_t **noise = calloc(n + 1, sizeof *noise);
    int64_t *expect = calloc(len, sizeof *expect);

    nx_job_init(&j, FS_NOISEX_ELEMENTWISE, n, len, 40, BITS);
    for (uint32_t i = 1; i <= n; i++) {
        noise[i] = malloc(len * sizeof **noise);
        CHECK_OK(fs_dgauss_sample(1048576.0, noise[i], len, &err), &err);
    }
    noise[2][0] = ((int64_t)1 << 39) - 1; /* the extremes of 40-bit values */
    noise[3][len - 1] = -((int64_t)1 << 39);
    nx_round(&j, 0, NULL, NULL, noise, &res);
    CHECK(res.removed == n - 1);
    CHECK(res.noise_len == len);
    size_t slots = fs_noisex_server_slots(j.s);
    CHECK(slots == (BITS - 1) / (40 + 2 + 1));
    CHECK(res.decryptions == (len + slots - 1) / slots);
    for (uint32_t i = 1; i <= n; i++) {
        if (i != res.chosen) {
            for (size_t w = 0; w < len; w++) {
                expect[w] += noise[i][w];
            }
        }
    }
    CHECK(memcmp(res.noise_sum, expect, len * sizeof *expect) == 0);
    fs_noisex_result_clear(&res);
    /* a value outside value_bits is refused by the client, naming it */
    {
        size_t cs = fs_noisex_server_ct_size(j.s);
        size_t rs = fs_noisex_server_response_size(j.s);
        uint8_t *sel = malloc(cs);
        uint8_t *resp = malloc(rs);
        uint32_t ids[1] = {1};
        CHECK_OK(fs_noisex_server_begin(j.s, 1, ids, 1, &err), &err);
        CHECK_OK(fs_noisex_server_selector(j.s, 1, sel, cs, &err), &err);
        noise[1][5] = (int64_t)1 << 39;
        CHECK(fs_noisex_client_respond_noise(j.c[1], sel, cs, noise[1], len, resp, rs, &err) ==
              FS_ERANGE);
        free(sel);
        free(resp);
    }
    nx_job_free(&j);
    for (uint32_t i = 1; i <= n; i++) {
        free(noise[i]);
    }
    free(noise);
    free(expect);
}

/* Selector ciphertexts: every one of every round is distinct (fresh
 * encryptions, re-randomised), and all have the same size, j's included. */
static void test_selectors_fresh(void)
{
    struct fs_err err = {0};
    struct nx_job j;
    const uint32_t n = 6;
    const uint32_t rounds = 3;
    size_t cs;
    uint8_t *all;
    uint8_t *again;
    uint32_t ids[6] = {1, 2, 3, 4, 5, 6};
    uint32_t chosen[3] = {0};

    nx_job_init(&j, FS_NOISEX_SEED, n, 0, 0, BITS);
    cs = fs_noisex_server_ct_size(j.s);
    CHECK(cs == 2 * (BITS / 8));
    all = malloc(rounds * n * cs);
    again = malloc(cs);
    for (uint32_t r = 0; r < rounds; r++) {
        struct fs_noisex_result res = {0};
        CHECK_OK(fs_noisex_server_begin(j.s, r, ids, n, &err), &err);
        for (uint32_t i = 1; i <= n; i++) {
            uint8_t *dst = all + ((size_t)r * n + (i - 1)) * cs;
            CHECK_OK(fs_noisex_server_selector(j.s, i, dst, cs, &err), &err);
            /* a wrong buffer size is refused: sizes are fixed */
            CHECK(fs_noisex_server_selector(j.s, i, again, cs - 1, &err) == FS_EINVAL);
            /* a repeated request within the round gets the same bytes */
            CHECK_OK(fs_noisex_server_selector(j.s, i, again, cs, &err), &err);
            CHECK(memcmp(dst, again, cs) == 0);
        }
        CHECK_OK(fs_noisex_server_finish(j.s, &res, &err), &err);
        chosen[r] = res.chosen;
        fs_noisex_result_clear(&res);
    }
    for (size_t a = 0; a < (size_t)rounds * n; a++) {
        for (size_t b = a + 1; b < (size_t)rounds * n; b++) {
            CHECK_MSG(memcmp(all + a * cs, all + b * cs, cs) != 0, "selectors %zu and %zu equal", a,
                      b);
        }
    }
    /* j's selector (an encryption of 0) and the others' (of 1): the same fixed
     * size, and j's differs from every other one of its round */
    for (uint32_t r = 0; r < rounds; r++) {
        const uint8_t *sj = all + ((size_t)r * n + (chosen[r] - 1)) * cs;
        CHECK(chosen[r] >= 1 && chosen[r] <= n);
        for (uint32_t i = 1; i <= n; i++) {
            if (i != chosen[r]) {
                CHECK(memcmp(sj, all + ((size_t)r * n + (i - 1)) * cs, cs) != 0);
            }
        }
    }
    nx_job_free(&j);
    free(all);
    free(again);
}

/* j is drawn uniformly: over 60 rounds of 3 parties each is chosen. */
static void test_j_uniform(void)
{
    struct fs_err err = {0};
    struct nx_job j;
    struct fs_noisex_result res = {0};
    uint32_t ids[3] = {1, 2, 3};
    unsigned count[4] = {0};

    nx_job_init(&j, FS_NOISEX_SEED, 3, 0, 0, 512);
    for (uint32_t r = 0; r < 60; r++) {
        CHECK_OK(fs_noisex_server_begin(j.s, r, ids, 3, &err), &err);
        CHECK_OK(fs_noisex_server_finish(j.s, &res, &err), &err); /* nobody responded */
        CHECK(res.removed == 0 && res.decryptions == 0);
        CHECK(res.chosen >= 1 && res.chosen <= 3);
        count[res.chosen]++;
        fs_noisex_result_clear(&res);
    }
    CHECK_MSG(count[1] > 0 && count[2] > 0 && count[3] > 0, "%u %u %u", count[1], count[2],
              count[3]);
    nx_job_free(&j);
}

/* A party that does not respond keeps its noise: only responders other than
 * j are removed. */
static void test_nonresponder(void)
{
    struct fs_err err = {0};
    struct nx_job j;
    struct fs_noisex_result res = {0};
    const uint32_t n = 4;
    const size_t len = 30;
    int64_t **noise = calloc(n + 1, sizeof *noise);
    int64_t *expect = calloc(len, sizeof *expect);
    int responds[5] = {0, 1, 0, 1, 1};

    nx_job_init(&j, FS_NOISEX_ELEMENTWISE, n, len, 30, BITS);
    for (uint32_t i = 1; i <= n; i++) {
        noise[i] = malloc(len * sizeof **noise);
        CHECK_OK(fs_dgauss_sample(1000.0, noise[i], len, &err), &err);
    }
    nx_round(&j, 3, responds, NULL, noise, &res);
    for (uint32_t i = 1; i <= n; i++) {
        if (i != res.chosen && responds[i]) {
            for (size_t w = 0; w < len; w++) {
                expect[w] += noise[i][w];
            }
        }
    }
    CHECK(res.removed == (res.chosen == 2 ? 3u : 2u));
    for (size_t q = 0; q < res.removed; q++) {
        CHECK(res.ids[q] != 2 && res.ids[q] != res.chosen);
    }
    CHECK(memcmp(res.noise_sum, expect, len * sizeof *expect) == 0);
    fs_noisex_result_clear(&res);
    nx_job_free(&j);
    for (uint32_t i = 1; i <= n; i++) {
        free(noise[i]);
    }
    free(noise);
    free(expect);
}

static void test_bad_messages(void)
{
    struct fs_err err = {0};
    struct nx_job j;
    struct fs_noisex_result res = {0};
    uint32_t ids[3] = {1, 2, 3};
    uint32_t dup[2] = {2, 2};
    uint32_t out_of_range[1] = {4};
    size_t cs, rs;
    uint8_t *sel, *resp, *resp2, seed[32] = {1};
    fs_noisex_client *bad = NULL;

    nx_job_init(&j, FS_NOISEX_SEED, 3, 0, 0, BITS);
    cs = fs_noisex_server_ct_size(j.s);
    rs = fs_noisex_server_response_size(j.s);
    sel = malloc(cs);
    resp = malloc(rs);
    resp2 = malloc(rs);
    /* nothing open yet */
    CHECK(fs_noisex_server_selector(j.s, 1, sel, cs, &err) == FS_ESTATE);
    CHECK(fs_noisex_server_add_response(j.s, 1, resp, rs, &err) == FS_ESTATE);
    CHECK(fs_noisex_server_finish(j.s, &res, &err) == FS_ESTATE);
    CHECK(fs_noisex_server_begin(j.s, 0, dup, 2, &err) == FS_EINVAL);
    CHECK(fs_noisex_server_begin(j.s, 0, out_of_range, 1, &err) == FS_EINVAL);
    CHECK_OK(fs_noisex_server_begin(j.s, 5, ids, 2, &err), &err);     /* parties 1, 2 */
    CHECK(fs_noisex_server_begin(j.s, 5, ids, 2, &err) == FS_ESTATE); /* rounds increase */
    CHECK_OK(fs_noisex_server_begin(j.s, 6, ids, 2, &err), &err);
    CHECK(fs_noisex_server_selector(j.s, 3, sel, cs, &err) == FS_ENOTFOUND);
    CHECK_OK(fs_noisex_server_selector(j.s, 1, sel, cs, &err), &err);
    /* malformed selectors: wrong size, zero, >= n^2 */
    CHECK(fs_noisex_client_respond_seed(j.c[1], sel, cs - 1, seed, resp, rs, &err) == FS_EFORMAT);
    memset(resp2, 0, rs);
    CHECK(fs_noisex_client_respond_seed(j.c[1], resp2, cs, seed, resp, rs, &err) == FS_EFORMAT);
    memset(resp2, 0xff, rs);
    CHECK(fs_noisex_client_respond_seed(j.c[1], resp2, cs, seed, resp, rs, &err) == FS_EFORMAT);
    /* the wrong mode */
    CHECK(fs_noisex_client_respond_noise(j.c[1], sel, cs, (const int64_t *)seed, 1, resp, rs,
                                         &err) == FS_ESTATE);
    CHECK_OK(fs_noisex_client_respond_seed(j.c[1], sel, cs, seed, resp, rs, &err), &err);
    CHECK(fs_noisex_server_add_response(j.s, 3, resp, rs, &err) == FS_ENOTFOUND);
    CHECK(fs_noisex_server_add_response(j.s, 1, resp, rs - 1, &err) == FS_EFORMAT);
    memset(resp2, 0, rs);
    CHECK(fs_noisex_server_add_response(j.s, 1, resp2, rs, &err) == FS_EFORMAT);
    CHECK_OK(fs_noisex_server_add_response(j.s, 1, resp, rs, &err), &err);
    /* a second, different response (a fresh re-randomisation) conflicts */
    CHECK_OK(fs_noisex_client_respond_seed(j.c[1], sel, cs, seed, resp2, rs, &err), &err);
    CHECK(memcmp(resp, resp2, rs) != 0);
    CHECK(fs_noisex_server_add_response(j.s, 1, resp2, rs, &err) == FS_ECONFLICT);
    CHECK_OK(fs_noisex_server_finish(j.s, &res, &err), &err);
    CHECK(res.removed == (res.chosen == 1 ? 0u : 1u));
    if (res.removed == 1) {
        CHECK(memcmp(res.seeds[0], seed, 32) == 0);
    }
    fs_noisex_result_clear(&res);
    CHECK(fs_noisex_server_finish(j.s, &res, &err) == FS_ESTATE); /* closed */
    /* a malformed public key */
    memset(resp2, 0, j.pk_len);
    CHECK(fs_noisex_client_new(&j.p, resp2, j.pk_len, &bad, &err) == FS_EFORMAT);
    CHECK(bad == NULL);
    fs_noisex_result_clear(NULL);
    fs_noisex_server_free(NULL);
    fs_noisex_client_free(NULL);
    nx_job_free(&j);
    free(sel);
    free(resp);
    free(resp2);
}

/* One production-size run: 3072-bit key, seed mode, 12 parties (groups of
 * 5, 5 and 1 slots below p); prints per-operation costs. */
static void test_3072(void)
{
    struct fs_err err = {0};
    double t0, t1;

    if (quick()) {
        printf("  (FS_TEST_QUICK: 3072-bit run skipped)\n");
        return;
    }
    t0 = now_s();
    run_seed_exact(12, 3072, 64);
    t1 = now_s();
    printf("  3072-bit seed exchange, 12 parties (keygen, 12 selectors, 12 responses, 3 "
           "decryptions): %.2f s\n",
           t1 - t0);
    (void)err;
}

int main(void)
{
    RUN(test_params);
    RUN(test_seed_mode_exact);
    RUN(test_elementwise_exact);
    RUN(test_selectors_fresh);
    RUN(test_j_uniform);
    RUN(test_nonresponder);
    RUN(test_bad_messages);
    RUN(test_3072);
    return TEST_END("test_noise_exchange");
}
