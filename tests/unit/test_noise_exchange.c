/* Encrypted noise exchange (fedpower-utility) driven in one
 * process with real Paillier keys (1024 bits; one 3072-bit run): the
 * server's recovered noise equals the sum of every party's noise but j's,
 * exactly, in both modes; selectors are fresh, distinct and of one size;
 * j is uniform; non-responders and bad messages. Seed mode with a 2048-bit
 * key (three slots per group): the selectors encrypt 0 for j and
 * 2^(256 t) for the others' slots t; round trips from 1 to 50 parties; a
 * group with non-responders still opens the others' seeds; restore from
 * persisted selectors, also from selectors of 0 and 1. */
#include "crypto/paillier.h"
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

/* ---- seed mode, selectors carrying the slots (2048 bits: 3 per group) ---- */

#define SBITS    2048u
#define SPARTIES 50u

struct sjob {
    struct fs_noisex_params p;
    fs_noisex_server *s;
    fs_noisex_client *c; /* one client answers for every party */
    fs_paillier_sk *sk;  /* the server's key, to read selectors */
    size_t cs, rs, slots;
    uint8_t (*seed)[32]; /* [id] */
    uint8_t *sel;        /* the open round's selectors, [id - 1] */
    uint8_t *resp;       /* [id - 1] */
};

static struct sjob g_sj;

static void sjob_init(struct sjob *j)
{
    struct fs_err err = {0};
    size_t skl, pkl;
    uint8_t *buf;

    memset(j, 0, sizeof *j);
    j->p.mode = FS_NOISEX_SEED;
    j->p.parties = SPARTIES;
    CHECK_OK(fs_noisex_server_new(&j->p, SBITS, &j->s, &err), &err);
    skl = fs_noisex_server_sk_size(j->s);
    pkl = fs_noisex_server_pk_size(j->s);
    buf = malloc(skl > pkl ? skl : pkl);
    CHECK_OK(fs_noisex_server_sk_export(j->s, buf, skl, &err), &err);
    CHECK_OK(fs_paillier_sk_import(&j->sk, buf, skl, &err), &err);
    CHECK_OK(fs_noisex_server_pk_export(j->s, buf, pkl, &err), &err);
    CHECK_OK(fs_noisex_client_new(&j->p, buf, pkl, &j->c, &err), &err);
    free(buf);
    j->cs = fs_noisex_server_ct_size(j->s);
    j->rs = fs_noisex_server_response_size(j->s);
    j->slots = fs_noisex_server_slots(j->s);
    CHECK(j->slots == 3);
    j->seed = calloc(SPARTIES + 1, sizeof *j->seed);
    j->sel = malloc(SPARTIES * j->cs);
    j->resp = malloc(SPARTIES * j->rs);
}

static void sjob_free(struct sjob *j)
{
    fs_noisex_client_free(j->c);
    fs_noisex_server_free(j->s);
    fs_paillier_sk_free(j->sk);
    free(j->seed);
    free(j->sel);
    free(j->resp);
}

/* Round `round` over ids 1..n begun (ids passed in descending order):
 * copies its selectors, draws every party's seed and answer. */
static void sjob_begin(struct sjob *j, uint32_t round, uint32_t n)
{
    struct fs_err err = {0};
    uint32_t ids[SPARTIES];
    size_t len = 0;

    for (uint32_t i = 0; i < n; i++) {
        ids[i] = n - i;
    }
    CHECK_OK(fs_noisex_server_begin(j->s, round, ids, n, &err), &err);
    const uint8_t *sel = fs_noisex_server_selectors(j->s, &len);
    CHECK(sel != NULL && len == n * j->cs);
    memcpy(j->sel, sel, n * j->cs);
    for (uint32_t id = 1; id <= n; id++) {
        CHECK_OK(fs_rand_bytes(j->seed[id], 32, &err), &err);
        CHECK_OK(fs_noisex_client_respond_seed(j->c, j->sel + (id - 1) * j->cs, j->cs, j->seed[id],
                                               j->resp + (id - 1) * j->rs, j->rs, &err),
                 &err);
    }
}

/* The plaintext of selector sel (decrypted with the server's key). */
static void selector_plain(const struct sjob *j, const uint8_t *sel, mpz_t m)
{
    struct fs_err err = {0};
    mpz_t c;

    mpz_init(c);
    CHECK_OK(fs_paillier_ct_import(fs_paillier_sk_pub(j->sk), c, sel, j->cs, &err), &err);
    CHECK_OK(fs_paillier_decrypt(j->sk, m, c, &err), &err);
    mpz_clear(c);
}

/* j of the open round over ids 1..n: the one selector that decrypts to 0. */
static uint32_t sjob_chosen(const struct sjob *j, uint32_t n)
{
    uint32_t chosen = 0;
    mpz_t m;

    mpz_init(m);
    for (uint32_t id = 1; id <= n; id++) {
        selector_plain(j, j->sel + (id - 1) * j->cs, m);
        if (mpz_sgn(m) == 0) {
            CHECK(chosen == 0);
            chosen = id;
        }
    }
    mpz_clear(m);
    CHECK(chosen >= 1);
    return chosen;
}

/* Finish the open round over 1..n where answered[id] parties answered:
 * exactly their seeds but j's, in ascending ids, one decryption per group
 * of the parties but j (slots at a time, ascending) with an answer. */
static void sjob_check(struct sjob *j, uint32_t n, const int *answered)
{
    struct fs_err err = {0};
    struct fs_noisex_result res = {0};
    size_t q = 0, rank = 0, groups = 0, in_group = 0;

    CHECK_OK(fs_noisex_server_finish(j->s, &res, &err), &err);
    for (uint32_t id = 1; id <= n; id++) {
        if (id == res.chosen) {
            continue;
        }
        if (rank % j->slots == 0) {
            in_group = 0;
        }
        rank++;
        if (answered[id]) {
            groups += in_group == 0;
            in_group++;
            CHECK_MSG(q < res.removed && res.ids[q] == id, "%u parties: id %u", n, id);
            if (q < res.removed) {
                CHECK_MSG(memcmp(res.seeds[q], j->seed[id], 32) == 0, "%u parties: seed of %u", n,
                          id);
            }
            q++;
        }
    }
    CHECK_MSG(res.removed == q, "%u parties: removed %zu, expected %zu", n, res.removed, q);
    CHECK_MSG(res.decryptions == groups, "%u parties: %u decryptions, expected %zu", n,
              res.decryptions, groups);
    fs_noisex_result_clear(&res);
}

static void sjob_answer(struct sjob *j, uint32_t n, const int *answered)
{
    struct fs_err err = {0};

    for (uint32_t id = n; id >= 1; id--) {
        if (answered[id]) {
            CHECK_OK(
                fs_noisex_server_add_response(j->s, id, j->resp + (id - 1) * j->rs, j->rs, &err),
                &err);
        }
    }
}

/* Every selector's plaintext: 0 for j, 2^(256 t) for the others, t their
 * slot among the parties but j in ascending id order, three per group. */
static void test_selector_slots(void)
{
    static const uint32_t ns[] = {1, 2, 7, 11};
    uint32_t round = 100;
    mpz_t m;

    mpz_init(m);
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        for (int rep = 0; rep < 2; rep++) {
            uint32_t n = ns[i];
            size_t rank = 0;
            sjob_begin(&g_sj, ++round, n);
            uint32_t chosen = sjob_chosen(&g_sj, n);
            for (uint32_t id = 1; id <= n; id++) {
                selector_plain(&g_sj, g_sj.sel + (id - 1) * g_sj.cs, m);
                if (id == chosen) {
                    CHECK(mpz_sgn(m) == 0);
                    continue;
                }
                size_t t = rank++ % g_sj.slots;
                CHECK_MSG(mpz_popcount(m) == 1 && mpz_scan1(m, 0) == 256 * t,
                          "%u parties, id %u (j %u): not 2^(256 * %zu)", n, id, chosen, t);
            }
            fs_noisex_server_end(g_sj.s);
        }
    }
    mpz_clear(m);
}

/* Round trips at 1..50 parties, every party answering, then with parties 2
 * and 3 silent. */
static void test_seed_sizes(void)
{
    static const uint32_t ns[] = {1, 2, 3, 5, 6, 11, 20, 50};
    int answered[SPARTIES + 1];
    uint32_t round = 200;

    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        uint32_t n = ns[i];
        if (t_quick() && n > 11) {
            continue;
        }
        for (int silent = 0; silent < 2; silent++) {
            for (uint32_t id = 0; id <= n; id++) {
                answered[id] = !(silent && (id == 2 || id == 3));
            }
            sjob_begin(&g_sj, ++round, n);
            sjob_answer(&g_sj, n, answered);
            sjob_check(&g_sj, n, answered);
        }
    }
}

/* Non-responders inside a group: 11 parties, the 2nd and 3rd of the first
 * group silent: its first member's seed is still opened, the groups after
 * it do not move (4 decryptions for 8 seeds). A silent member's slot must
 * stay 0: an answer that used its selector instead of the party's own is
 * refused. */
static void test_seed_silent_in_group(void)
{
    struct fs_err err = {0};
    struct fs_noisex_result res = {0};
    int answered[SPARTIES + 1];
    uint32_t plan[SPARTIES];
    const uint32_t n = 11;
    size_t np = 0;

    sjob_begin(&g_sj, 300, n);
    uint32_t chosen = sjob_chosen(&g_sj, n);
    for (uint32_t id = 1; id <= n; id++) {
        answered[id] = 1;
        if (id != chosen) {
            plan[np++] = id;
        }
    }
    answered[plan[1]] = answered[plan[2]] = 0;
    sjob_answer(&g_sj, n, answered);
    sjob_check(&g_sj, n, answered); /* 4 groups with an answer */
    /* plan[0] answers with plan[1]'s selector: its seed lands in the slot
     * of a party that did not answer */
    sjob_begin(&g_sj, 301, n);
    chosen = sjob_chosen(&g_sj, n);
    np = 0;
    for (uint32_t id = 1; id <= n; id++) {
        if (id != chosen) {
            plan[np++] = id;
        }
    }
    CHECK_OK(fs_noisex_client_respond_seed(g_sj.c, g_sj.sel + (plan[1] - 1) * g_sj.cs, g_sj.cs,
                                           g_sj.seed[plan[0]], g_sj.resp, g_sj.rs, &err),
             &err);
    CHECK_OK(fs_noisex_server_add_response(g_sj.s, plan[0], g_sj.resp, g_sj.rs, &err), &err);
    CHECK(fs_noisex_server_finish(g_sj.s, &res, &err) == FS_EFORMAT);
    CHECK(res.seeds == NULL);
    fs_noisex_server_end(g_sj.s);
}

/* Restore: a second server from the key reopens a round from its persisted
 * selectors with the same j and opens the seeds, a silent party included;
 * selectors in the wrong slots are refused; selectors of 0 and 1 (rounds
 * begun before they carried the slots) restore and open the same seeds. */
static void test_seed_restore(void)
{
    struct fs_err err = {0};
    fs_noisex_server *s2 = NULL;
    fs_paillier_djn *djn = NULL;
    const fs_paillier_pk *pk = fs_paillier_sk_pub(g_sj.sk);
    int answered[SPARTIES + 1];
    uint32_t ids[SPARTIES], plan[SPARTIES];
    const uint32_t n = 8;
    size_t skl = fs_noisex_server_sk_size(g_sj.s), np = 0;
    uint8_t *skb = malloc(skl), *tmp = malloc(g_sj.cs);
    mpz_t c, m;
    fs_noisex_server *keep = g_sj.s;

    mpz_inits(c, m, NULL);
    CHECK_OK(fs_noisex_server_sk_export(g_sj.s, skb, skl, &err), &err);
    CHECK_OK(fs_noisex_server_new_from_key(&g_sj.p, skb, skl, &s2, &err), &err);
    free(skb);
    for (uint32_t i = 0; i < n; i++) {
        ids[i] = i + 1;
        answered[i + 1] = i + 1 != 5;
    }
    sjob_begin(&g_sj, 400, n);
    uint32_t chosen = sjob_chosen(&g_sj, n);
    fs_noisex_server_end(g_sj.s);
    /* the restarted server: the same round from the persisted selectors */
    g_sj.s = s2;
    CHECK_OK(fs_noisex_server_restore(s2, 400, ids, n, g_sj.sel, n * g_sj.cs, &err), &err);
    sjob_answer(&g_sj, n, answered);
    {
        struct fs_noisex_result res = {0};
        CHECK_OK(fs_noisex_server_peek(s2, &res, &err), &err);
        CHECK(res.chosen == chosen);
        fs_noisex_result_clear(&res);
    }
    sjob_check(&g_sj, n, answered);
    /* two selectors of different slots swapped: not this round's */
    for (uint32_t id = 1; id <= n; id++) {
        if (id != chosen) {
            plan[np++] = id;
        }
    }
    memcpy(tmp, g_sj.sel + (plan[0] - 1) * g_sj.cs, g_sj.cs);
    memcpy(g_sj.sel + (plan[0] - 1) * g_sj.cs, g_sj.sel + (plan[1] - 1) * g_sj.cs, g_sj.cs);
    memcpy(g_sj.sel + (plan[1] - 1) * g_sj.cs, tmp, g_sj.cs);
    CHECK(fs_noisex_server_restore(s2, 400, ids, n, g_sj.sel, n * g_sj.cs, &err) == FS_EFORMAT);
    /* swapped back, then j's selector made an Enc(1): no party is chosen */
    memcpy(g_sj.sel + (plan[1] - 1) * g_sj.cs, g_sj.sel + (plan[0] - 1) * g_sj.cs, g_sj.cs);
    memcpy(g_sj.sel + (plan[0] - 1) * g_sj.cs, tmp, g_sj.cs);
    CHECK_OK(fs_noisex_server_restore(s2, 400, ids, n, g_sj.sel, n * g_sj.cs, &err), &err);
    mpz_set_ui(m, 1);
    CHECK_OK(fs_paillier_encrypt(pk, NULL, c, m, &err), &err);
    CHECK_OK(fs_paillier_ct_export(pk, c, g_sj.sel + (chosen - 1) * g_sj.cs, g_sj.cs, &err), &err);
    CHECK(fs_noisex_server_restore(s2, 400, ids, n, g_sj.sel, n * g_sj.cs, &err) == FS_EFORMAT);
    /* selectors of 0 (j = 4) and 1, answered and restored: the same seeds */
    CHECK_OK(fs_paillier_djn_new_crt(&djn, g_sj.sk, 0, 4, NULL, &err), &err);
    for (uint32_t id = 1; id <= n; id++) {
        mpz_set_ui(m, id == 4 ? 0u : 1u);
        CHECK_OK(fs_paillier_encrypt(pk, djn, c, m, &err), &err);
        CHECK_OK(fs_paillier_ct_export(pk, c, g_sj.sel + (id - 1) * g_sj.cs, g_sj.cs, &err), &err);
        CHECK_OK(fs_noisex_client_respond_seed(g_sj.c, g_sj.sel + (id - 1) * g_sj.cs, g_sj.cs,
                                               g_sj.seed[id], g_sj.resp + (id - 1) * g_sj.rs,
                                               g_sj.rs, &err),
                 &err);
    }
    for (int ahead = 0; ahead < 2; ahead++) {
        fs_noisex_server_set_threads(s2, 2, ahead);
        CHECK_OK(fs_noisex_server_restore(s2, 401, ids, n, g_sj.sel, n * g_sj.cs, &err), &err);
        sjob_answer(&g_sj, n, answered);
        sjob_check(&g_sj, n, answered);
    }
    fs_paillier_djn_free(djn);
    fs_noisex_server_free(s2);
    g_sj.s = keep;
    free(tmp);
    mpz_clears(c, m, NULL);
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
    sjob_init(&g_sj);
    RUN(test_selector_slots);
    RUN(test_seed_sizes);
    RUN(test_seed_silent_in_group);
    RUN(test_seed_restore);
    sjob_free(&g_sj);
    return TEST_END("test_noise_exchange");
}
