/* The noise exchange's seed groups decrypted on several threads and in the
 * background as answers come: for 1, 5, 6, 19, 20 and 100 parties, with
 * every party answering and with one party hidden, on 1..8 threads, with
 * and without decrypting ahead, the recovered seeds are exactly the
 * parties' and the same as one thread's in order; the groups are fixed by
 * the selectors (every party but j, three at a time), so every group whose
 * members all answered is decrypted ahead and reused, and a group with a
 * hidden member is decrypted at the end with its slot empty. A 2048-bit
 * key: three seeds per group. */
#include "crypto/rand.h"
#include "proto/noise_exchange.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define BITS    2048u
#define PARTIES 100u

/* t_quick() (valgrind or a sanitizer build): no 100-party rounds, fewer modes. */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static fs_noisex_server *srv;
static fs_noisex_client *cli;
static size_t cs, rs, slots;

/* One round's material: selectors, every party's seed and response. */
struct rnd {
    uint32_t n;
    uint32_t *ids; /* 1..n */
    uint8_t *sel;
    uint8_t (*seed)[32]; /* [id] */
    uint8_t *resp;       /* [id - 1] */
    uint32_t chosen;
};

static void rnd_make(struct rnd *r, uint32_t round, uint32_t n)
{
    struct fs_err err = {0};
    size_t len = 0;

    memset(r, 0, sizeof *r);
    r->n = n;
    r->ids = malloc(n * sizeof *r->ids);
    r->seed = calloc(n + 1, sizeof *r->seed);
    r->resp = malloc(n * rs);
    r->sel = malloc(n * cs);
    for (uint32_t i = 0; i < n; i++) {
        r->ids[i] = n - i; /* any order */
    }
    CHECK_OK(fs_noisex_server_begin(srv, round, r->ids, n, &err), &err);
    const uint8_t *sel = fs_noisex_server_selectors(srv, &len);
    CHECK(sel != NULL && len == n * cs);
    memcpy(r->sel, sel, n * cs); /* ascending ids */
    for (uint32_t id = 1; id <= n; id++) {
        CHECK_OK(fs_rand_bytes(r->seed[id], 32, &err), &err);
        r->seed[id][0] &= 0x7f; /* a few with leading zero bytes too */
        if (id % 7 == 0) {
            memset(r->seed[id], 0, 9);
        }
        CHECK_OK(fs_noisex_client_respond_seed(cli, r->sel + (id - 1) * cs, cs, r->seed[id],
                                               r->resp + (size_t)(id - 1) * rs, rs, &err),
                 &err);
    }
    fs_noisex_server_end(srv);
}

static void rnd_free(struct rnd *r)
{
    free(r->ids);
    free(r->sel);
    free(r->seed);
    free(r->resp);
}

/* The groups of every party but j (three at a time, ascending ids): those
 * whose members all answered (decrypted ahead, and reused), and those with
 * an answer (decrypted in all). */
static void expect_groups(const struct rnd *r, uint32_t hidden, size_t *plan_done,
                          size_t *with_answer)
{
    uint32_t plan[PARTIES];
    size_t np = 0;

    for (uint32_t id = 1; id <= r->n; id++) {
        if (id != r->chosen) {
            plan[np++] = id;
        }
    }
    *plan_done = 0;
    *with_answer = 0;
    for (size_t g0 = 0; g0 < np; g0 += slots) {
        size_t cnt = np - g0 < slots ? np - g0 : slots;
        size_t answered = 0;
        for (size_t t = 0; t < cnt; t++) {
            answered += plan[g0 + t] != hidden;
        }
        *plan_done += (size_t)(answered == cnt);
        *with_answer += (size_t)(answered > 0);
    }
}

/* The round again (its selectors restored), answered in a shuffled order
 * but `hidden`, decrypted on `threads` threads, ahead or not. */
static void answer_all(const struct rnd *r, uint32_t hidden, unsigned threads, int ahead)
{
    struct fs_err err = {0};
    uint32_t order[PARTIES];

    CHECK_OK(fs_noisex_server_restore(srv, 1, r->ids, r->n, r->sel, r->n * cs, &err), &err);
    fs_noisex_server_set_threads(srv, threads, ahead);
    for (uint32_t i = 0; i < r->n; i++) {
        order[i] = i + 1;
    }
    for (uint32_t i = r->n; i > 1; i--) {
        uint64_t k = 0;
        CHECK_OK(fs_rand_below(i, &k, &err), &err);
        uint32_t t = order[i - 1];
        order[i - 1] = order[k];
        order[k] = t;
    }
    for (uint32_t i = 0; i < r->n; i++) {
        uint32_t id = order[i];
        if (id != hidden) {
            CHECK_OK(
                fs_noisex_server_add_response(srv, id, r->resp + (size_t)(id - 1) * rs, rs, &err),
                &err);
        }
    }
}

static int same_result(const struct fs_noisex_result *a, const struct fs_noisex_result *b)
{
    return a->round == b->round && a->chosen == b->chosen && a->removed == b->removed &&
           a->decryptions == b->decryptions &&
           memcmp(a->ids, b->ids, a->removed * sizeof *a->ids) == 0 &&
           memcmp(a->seeds, b->seeds, a->removed * sizeof *a->seeds) == 0;
}

/* Decrypting ahead on `threads` threads: wait until every complete group of
 * the plan is decrypted in the background, or peek before finish, or
 * neither (finish races the background). */
static void run_ahead(const struct rnd *r, uint32_t hidden, unsigned threads, int wait, int peek,
                      const struct fs_noisex_result *ref)
{
    struct fs_err err = {0};
    struct fs_noisex_result res = {0};
    size_t plan_done = 0, with_answer = 0;

    expect_groups(r, hidden, &plan_done, &with_answer);
    answer_all(r, hidden, threads, 1);
    if (wait) {
        for (int ms = 0; ms < 120000 && fs_noisex_server_ahead(srv) < plan_done; ms++) {
            sleep_ms(1);
        }
        CHECK(fs_noisex_server_ahead(srv) == plan_done);
    }
    if (peek) {
        struct fs_noisex_result p = {0};
        CHECK_OK(fs_noisex_server_peek(srv, &p, &err), &err);
        CHECK(same_result(&p, ref));
        fs_noisex_result_clear(&p);
    }
    CHECK_OK(fs_noisex_server_finish(srv, &res, &err), &err);
    CHECK_MSG(same_result(&res, ref), "%u parties, hidden %u, %u threads, wait %d, peek %d", r->n,
              hidden, threads, wait, peek);
    if (peek || wait) {
        /* every complete group: peek kept them, or they were all decrypted
         * before; the one with the hidden member is decrypted at the end */
        CHECK_MSG(res.ahead == plan_done, "ahead %u, expected %zu", res.ahead, plan_done);
        CHECK_MSG(res.decryptions == with_answer, "decryptions %u, expected %zu", res.decryptions,
                  with_answer);
    }
    CHECK(res.ahead <= res.decryptions);
    fs_noisex_result_clear(&res);
}

/* n parties, `hidden` (0: none) not answering: the seeds on 1..8 threads
 * (1, 3 and 8 for 100 parties) are the parties' own, then the same decrypting ahead in `modes` ways
 * (1: waited for, 2: peek first, 3: raced). */
static void run_case(uint32_t n, uint32_t hidden, const int *modes, size_t nmodes)
{
    struct fs_err err = {0};
    struct fs_noisex_result ref = {0};
    struct rnd r;
    size_t answered = 0, plan_done = 0, with_answer = 0;

    rnd_make(&r, 2, n);
    /* the reference: one thread, nothing ahead, the groups in order */
    answer_all(&r, hidden, 1, 0);
    CHECK_OK(fs_noisex_server_peek(srv, &ref, &err), &err);
    r.chosen = ref.chosen;
    CHECK(ref.chosen >= 1 && ref.chosen <= n);
    for (uint32_t id = 1; id <= n; id++) {
        answered += id != hidden && id != ref.chosen;
    }
    CHECK(ref.removed == answered);
    expect_groups(&r, hidden, &plan_done, &with_answer);
    CHECK_MSG(ref.decryptions == with_answer, "decryptions %u, expected %zu", ref.decryptions,
              with_answer);
    CHECK(ref.ahead == 0);
    for (size_t q = 0; q < ref.removed; q++) {
        uint32_t id = ref.ids[q];
        CHECK(id != ref.chosen && id != hidden && (q == 0 || id > ref.ids[q - 1]));
        CHECK(memcmp(ref.seeds[q], r.seed[id], 32) == 0);
    }
    for (unsigned t = 2; t <= 8; t++) {
        struct fs_noisex_result res = {0};
        if (n == PARTIES && t != 3 && t != 8) {
            continue; /* (the largest round: 3 and 8 only) */
        }
        fs_noisex_server_set_threads(srv, t, 0);
        CHECK_OK(t < 8 ? fs_noisex_server_peek(srv, &res, &err)
                       : fs_noisex_server_finish(srv, &res, &err),
                 &err);
        CHECK_MSG(same_result(&res, &ref), "%u parties, hidden %u, %u threads", n, hidden, t);
        CHECK(res.ahead == 0);
        fs_noisex_result_clear(&res);
    }
    for (size_t i = 0; i < nmodes; i++) {
        run_ahead(&r, hidden, (unsigned)(2 + i), modes[i] == 1, modes[i] == 2, &ref);
    }
    fs_noisex_result_clear(&ref);
    rnd_free(&r);
}

static const int all_modes[] = {1, 2, 3, 3};
static const int some_modes[] = {1, 2, 3};

static void test_every_party(void)
{
    static const uint32_t ns[] = {1, 5, 6, 19, 20, 100};

    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        if (t_quick() && ns[i] == 100) {
            continue;
        }
        if (ns[i] == 100 || t_quick()) {
            run_case(ns[i], 0, some_modes, 3);
        } else {
            run_case(ns[i], 0, all_modes, 4);
        }
    }
}

/* One party does not answer: its group is decrypted at the end with its
 * slot empty, the others' seeds intact; the groups after it do not shift. */
static void test_hidden_party(void)
{
    static const uint32_t ns[] = {5, 6, 20, 100};
    static const uint32_t hide[] = {2, 1, 20, 37};

    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        if (t_quick() && ns[i] == 100) {
            continue;
        }
        if (ns[i] == 100 || t_quick()) {
            run_case(ns[i], hide[i], some_modes, 3);
        } else {
            run_case(ns[i], hide[i], all_modes, 4);
        }
    }
}

/* A round ended, and a server freed, while groups decrypt in the background. */
static void test_end_while_busy(void)
{
    struct fs_err err = {0};
    struct rnd r;

    rnd_make(&r, 3, 20);
    for (int end = 0; end < 2; end++) {
        CHECK_OK(fs_noisex_server_restore(srv, 1, r.ids, r.n, r.sel, r.n * cs, &err), &err);
        fs_noisex_server_set_threads(srv, 3, 1);
        for (uint32_t id = 1; id <= r.n; id++) {
            CHECK_OK(
                fs_noisex_server_add_response(srv, id, r.resp + (size_t)(id - 1) * rs, rs, &err),
                &err);
        }
        if (end) {
            fs_noisex_server_end(srv);
            CHECK(fs_noisex_server_ahead(srv) == 0);
        }
    }
    /* the second round still open, its groups decrypting: freed in main */
    rnd_free(&r);
}

int main(void)
{
    struct fs_err err = {0};
    struct fs_noisex_params p = {FS_NOISEX_SEED, PARTIES, 0, 0};
    uint8_t *pk = NULL;
    size_t pk_len;

    if (fs_noisex_server_new(&p, BITS, &srv, &err) != 0) {
        fprintf(stderr, "server: %s\n", err.msg);
        return 1;
    }
    pk_len = fs_noisex_server_pk_size(srv);
    pk = malloc(pk_len);
    if (pk == NULL || fs_noisex_server_pk_export(srv, pk, pk_len, &err) != 0 ||
        fs_noisex_client_new(&p, pk, pk_len, &cli, &err) != 0) {
        fprintf(stderr, "client: %s\n", err.msg);
        return 1;
    }
    cs = fs_noisex_server_ct_size(srv);
    rs = fs_noisex_server_response_size(srv);
    slots = fs_noisex_server_slots(srv);
    CHECK(slots == 3);
    RUN(test_every_party);
    RUN(test_hidden_party);
    RUN(test_end_while_busy);
    fs_noisex_client_free(cli);
    fs_noisex_server_free(srv);
    free(pk);
    return TEST_END("test_noisex_parallel");
}
