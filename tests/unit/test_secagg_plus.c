/* SecAgg+ (the neighbour-graph mode of lib/proto/secagg_*): the parameter
 * choice, the graph (regular, connected, the same on both sides, fixed by
 * the session), exact sums under dropouts before and after the masked
 * input for 20 to 50 parties, and a clean abort when too many of a dropped
 * party's neighbours are gone. State machines driven in one process. */
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "proto/secagg.h"
#include "test.h"
#include "test_secagg_util.h"

#include <stdlib.h>

enum drop_at {
    DROP_NEVER = 0,
    DROP_SHARE,       /* advertises, never shares keys */
    DROP_MASKED,      /* shares keys, never uploads in aggregation drop_round */
    DROP_CONSISTENCY, /* uploads, never signs */
    DROP_UNMASK       /* signs, never reveals */
};

struct pjob {
    struct fs_secagg_config cfg;
    fs_secagg_server *s;
    fs_secagg_client **c; /* 1..n */
    enum drop_at *drop;   /* 1..n */
    uint32_t *drop_round; /* 1..n */
    int *gone;            /* 1..n */
    uint64_t len;
    char reason[256]; /* the abort reason, if any */
};

static void pjob_init(struct pjob *j, uint32_t n, uint32_t t, int plus, uint32_t aggs, uint64_t len)
{
    struct fs_err err = {0};

    memset(j, 0, sizeof *j);
    j->cfg.n = n;
    j->cfg.t = t;
    j->cfg.aggregations = aggs;
    j->cfg.chunk_words = 64;
    CHECK_OK(fs_rand_bytes(j->cfg.job_id, 32, &err), &err);
    if (plus) {
        CHECK_OK(fs_secagg_config_plus(&j->cfg, &err), &err);
    }
    j->len = len;
    j->c = calloc(n + 1, sizeof *j->c);
    j->drop = calloc(n + 1, sizeof *j->drop);
    j->drop_round = calloc(n + 1, sizeof *j->drop_round);
    j->gone = calloc(n + 1, sizeof *j->gone);
    CHECK_OK(fs_secagg_server_new(&j->cfg, NULL, &j->s, &err), &err);
    for (uint32_t i = 1; i <= n; i++) {
        uint8_t sk[32], pk[32];
        CHECK_OK(fs_ed25519_keygen(sk, pk, &err), &err);
        CHECK_OK(fs_secagg_client_new(&j->cfg, i, sk, &j->c[i], &err), &err);
    }
}

static void pjob_free(struct pjob *j)
{
    fs_secagg_server_free(j->s);
    for (uint32_t i = 1; i <= j->cfg.n; i++) {
        fs_secagg_client_free(j->c[i]);
    }
    free(j->c);
    free(j->drop);
    free(j->drop_round);
    free(j->gone);
}

/* R0 and R1 for everyone (DROP_SHARE parties stop after R0). */
static int pjob_setup(struct pjob *j)
{
    struct fs_err err = {0};
    const struct fs_secagg_adv *roster;
    size_t k = 0;

    for (uint32_t i = 1; i <= j->cfg.n; i++) {
        struct fs_secagg_adv a;
        CHECK_OK(fs_secagg_client_advertise(j->c[i], &a, &err), &err);
        CHECK_OK(fs_secagg_server_add_adv(j->s, &a, &err), &err);
    }
    if (fs_secagg_server_close_adv(j->s, &err) != 0) {
        return -1;
    }
    roster = fs_secagg_server_roster(j->s, &k);
    for (uint32_t i = 1; i <= j->cfg.n; i++) {
        struct fs_secagg_share_ct *cts = NULL;
        size_t nct = 0;
        CHECK_OK(fs_secagg_client_share_keys(j->c[i], roster, k, &cts, &nct, &err), &err);
        /* one bundle per neighbour: k of them in plus mode, n - 1 in full */
        CHECK(nct == (j->cfg.degree != 0 ? j->cfg.degree : j->cfg.n - 1));
        if (j->drop[i] == DROP_SHARE) {
            j->gone[i] = 1;
        } else {
            CHECK_OK(fs_secagg_server_add_shares(j->s, i, cts, nct, &err), &err);
        }
        fs_secagg_share_cts_free(cts, nct);
    }
    if (fs_secagg_server_close_shares(j->s, &err) != 0) {
        return -1;
    }
    for (uint32_t i = 1; i <= j->cfg.n; i++) {
        if (j->gone[i]) {
            continue;
        }
        CHECK_OK(sa_receive(j->s, j->c[i], i, &err), &err);
    }
    return 0;
}

static uint64_t input_word(uint32_t i, uint64_t w, uint32_t r)
{
    return (uint64_t)i * 0x9e3779b97f4a7c15ull + w * 7919u + (uint64_t)r * 104729u;
}

/* Aggregation r: 0 with the sum checked against the plain sum of the
 * survivors' inputs, -1 when the server aborted (reason in j->reason). */
static int pjob_aggregate(struct pjob *j, uint32_t r, int *exact)
{
    struct fs_err err = {0};
    const uint32_t *set;
    size_t na = 0, n3 = 0, n4 = 0;
    uint64_t cw = j->cfg.chunk_words;
    uint64_t *x = malloc(j->len * sizeof *x);
    uint64_t *y = malloc(j->len * sizeof *y);
    uint64_t *expected = calloc(j->len, sizeof *expected);
    const uint64_t *sum = NULL;
    int rc = -1;

    *exact = 0;
    if (fs_secagg_server_begin(j->s, r, j->len, &err) != 0) {
        goto out;
    }
    set = fs_secagg_server_set(j->s, 0, &na);
    for (size_t q = 0; q < na; q++) {
        uint32_t i = set[q];
        if (j->gone[i]) {
            continue;
        }
        if (j->drop[i] == DROP_MASKED && j->drop_round[i] == r) {
            j->gone[i] = 1;
            continue;
        }
        for (uint64_t w = 0; w < j->len; w++) {
            x[w] = input_word(i, w, r);
            expected[w] += x[w];
        }
        CHECK_OK(fs_secagg_client_begin(j->c[i], r, j->len, set, na, &err), &err);
        CHECK_OK(fs_secagg_client_mask(j->c[i], 0, x, y, (size_t)j->len, &err), &err);
        for (uint64_t idx = 0; idx * cw < j->len; idx++) {
            size_t m = (size_t)(j->len - idx * cw < cw ? j->len - idx * cw : cw);
            CHECK_OK(fs_secagg_server_add_masked(j->s, i, idx, y + idx * cw, m, &err), &err);
        }
    }
    if (fs_secagg_server_close_masked(j->s, &err) != 0) {
        goto out;
    }
    set = fs_secagg_server_set(j->s, 3, &n3);
    for (size_t q = 0; q < n3; q++) {
        uint32_t i = set[q];
        uint8_t sig[FS_SECAGG_SIG_LEN];
        if (j->drop[i] == DROP_CONSISTENCY && j->drop_round[i] == r) {
            j->gone[i] = 1;
            continue;
        }
        CHECK_OK(fs_secagg_client_consistency(j->c[i], set, n3, sig, &err), &err);
        CHECK_OK(fs_secagg_server_add_consistency(j->s, i, sig, &err), &err);
    }
    if (fs_secagg_server_close_consistency(j->s, &err) != 0) {
        goto out;
    }
    set = fs_secagg_server_set(j->s, 4, &n4);
    for (size_t q = 0; q < n4; q++) {
        uint32_t i = set[q];
        struct fs_secagg_reveal *rv = NULL;
        size_t nrv = 0;
        if (j->drop[i] == DROP_UNMASK && j->drop_round[i] == r) {
            j->gone[i] = 1;
            continue;
        }
        CHECK_OK(
            fs_secagg_client_unmask(j->c[i], set, fs_secagg_server_sigs(j->s), n4, &rv, &nrv, &err),
            &err);
        /* plus mode: shares about itself and its active neighbours only */
        CHECK(j->cfg.degree == 0 || nrv <= j->cfg.degree + 1);
        CHECK_OK(fs_secagg_server_add_reveals(j->s, i, rv, nrv, &err), &err);
        free(rv);
    }
    if (fs_secagg_server_finish(j->s, &sum, &err) != 0) {
        goto out;
    }
    *exact = memcmp(sum, expected, j->len * sizeof *sum) == 0;
    rc = 0;
out:
    if (rc != 0) {
        CHECK(fs_secagg_server_phase(j->s) == FS_SECAGG_ABORTED);
        snprintf(j->reason, sizeof j->reason, "%s", fs_secagg_server_abort_reason(j->s));
    }
    free(x);
    free(y);
    free(expected);
    return rc;
}

/* ------------------------------------------------------------ parameters */

static void test_params_table(void)
{
    /* the documented table (docs/secure-aggregation.md): gamma 0.2, delta 0.1 */
    static const uint32_t n[] = {10, 20, 50, 100, 1000};
    static const uint32_t want_k[] = {4, 8, 16, 32, 76};
    static const uint32_t want_t[] = {3, 5, 11, 21, 47};
    struct fs_err err = {0};

    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        uint32_t k = 0, t = 0;
        CHECK_OK(
            fs_secagg_plus_params(n[i], FS_SECAGG_PLUS_GAMMA, FS_SECAGG_PLUS_DELTA, &k, &t, &err),
            &err);
        CHECK_MSG(k == want_k[i] && t == want_t[i], "n %u: k %u t %u, want %u %u", n[i], k, t,
                  want_k[i], want_t[i]);
    }
    /* more corruption or dropouts need more neighbours */
    {
        uint32_t k1 = 0, t1 = 0, k2 = 0, t2 = 0;
        CHECK_OK(fs_secagg_plus_params(1000, 0.1, 0.1, &k1, &t1, &err), &err);
        CHECK_OK(fs_secagg_plus_params(1000, 1.0 / 3, 0.1, &k2, &t2, &err), &err);
        CHECK(k1 == 52 && t1 == 28);
        CHECK(k2 > k1 && t2 > t1);
    }
    {
        /* four parties: gamma n < 1 still counts one colluder, so no lone
         * share reveals a secret */
        uint32_t k = 0, t = 0;
        CHECK_OK(fs_secagg_plus_params(4, FS_SECAGG_PLUS_GAMMA, FS_SECAGG_PLUS_DELTA, &k, &t, &err),
                 &err);
        CHECK(k == 2 && t == 2);
    }
    {
        uint32_t k = 1, t = 1;
        CHECK(fs_secagg_plus_params(50, 0.5, 0.5, &k, &t, &err) == FS_EINVAL);
        CHECK(k == 0 && t == 0);
        CHECK(fs_secagg_plus_params(3, 0.1, 0.1, &k, &t, &err) == FS_EINVAL);
    }
    /* config checks: odd, too large, threshold above the degree */
    {
        struct fs_secagg_config c = {
            .n = 20, .t = 11, .aggregations = 1, .degree = 7, .share_t = 3};
        CHECK(fs_secagg_config_check(&c, &err) == FS_EINVAL);
        c.degree = 19;
        CHECK(fs_secagg_config_check(&c, &err) == FS_EINVAL);
        c.degree = 8;
        c.share_t = 9;
        CHECK(fs_secagg_config_check(&c, &err) == FS_EINVAL);
        c.share_t = 5;
        CHECK_OK(fs_secagg_config_check(&c, &err), &err);
    }
}

/* ------------------------------------------------------------ the graph */

static void check_graph(uint32_t n)
{
    struct fs_err err = {0};
    struct fs_secagg_config cfg = {.n = n, .t = n / 2 + 1, .aggregations = 1};
    uint8_t session[32], other[32];
    uint32_t *pos = calloc(n + 1, sizeof *pos);
    uint32_t *pos2 = calloc(n + 1, sizeof *pos2);
    uint32_t *seen = calloc(n + 1, sizeof *seen);
    uint32_t *queue = calloc(n + 1, sizeof *queue);
    size_t head = 0, tail = 0;
    int differs = 0;

    CHECK_OK(fs_secagg_config_plus(&cfg, &err), &err);
    CHECK(cfg.degree >= 2 && cfg.degree % 2 == 0 && cfg.degree < n - 1);
    CHECK_OK(fs_rand_bytes(session, sizeof session, &err), &err);
    CHECK_OK(fs_secagg_graph(&cfg, session, pos, &err), &err);
    /* a permutation of the ring positions */
    for (uint32_t v = 1; v <= n; v++) {
        CHECK(pos[v] < n && !seen[pos[v]]);
        seen[pos[v]] = 1;
    }
    /* regular and symmetric */
    for (uint32_t u = 1; u <= n; u++) {
        uint32_t deg = 0;
        for (uint32_t v = 1; v <= n; v++) {
            int a = fs_secagg_adjacent(&cfg, pos, u, v);
            deg += (uint32_t)a;
            CHECK(a == fs_secagg_adjacent(&cfg, pos, v, u));
        }
        CHECK_MSG(deg == cfg.degree, "party %u has %u neighbours, want %u", u, deg, cfg.degree);
        CHECK(!fs_secagg_adjacent(&cfg, pos, u, u));
    }
    /* connected: a breadth-first search from party 1 reaches everyone */
    memset(seen, 0, (n + 1) * sizeof *seen);
    queue[tail++] = 1;
    seen[1] = 1;
    while (head < tail) {
        uint32_t u = queue[head++];
        for (uint32_t v = 1; v <= n; v++) {
            if (!seen[v] && fs_secagg_adjacent(&cfg, pos, u, v)) {
                seen[v] = 1;
                queue[tail++] = v;
            }
        }
    }
    CHECK(tail == n);
    /* deterministic from the session, another session another graph */
    CHECK_OK(fs_secagg_graph(&cfg, session, pos2, &err), &err);
    CHECK(memcmp(pos, pos2, (n + 1) * sizeof *pos) == 0);
    memcpy(other, session, sizeof other);
    other[0] ^= 1;
    CHECK_OK(fs_secagg_graph(&cfg, other, pos2, &err), &err);
    for (uint32_t v = 1; v <= n; v++) {
        differs |= pos[v] != pos2[v];
    }
    CHECK(differs);
    free(pos);
    free(pos2);
    free(seen);
    free(queue);
}

static void test_graph_properties(void)
{
    check_graph(20);
    check_graph(50);
    check_graph(101);
    check_graph(1000);
}

/* Both sides derive the same neighbours from the session, and each party masks with degree
 * others. */
static void test_graph_same_on_both_sides(void)
{
    struct pjob j;
    uint32_t a[64], b[64];

    pjob_init(&j, 30, 16, 1, 1, 16);
    CHECK(j.cfg.degree > 0 && j.cfg.degree < 29);
    CHECK(pjob_setup(&j) == 0);
    for (uint32_t i = 1; i <= 30; i++) {
        size_t ka = fs_secagg_client_neighbours(j.c[i], a);
        size_t kb = fs_secagg_server_neighbours(j.s, i, b);
        CHECK(ka == j.cfg.degree && kb == ka);
        CHECK(memcmp(a, b, ka * sizeof *a) == 0);
    }
    pjob_free(&j);
}

/* ------------------------------------------------------------ sums */

static int run(uint32_t n, int plus, uint32_t aggs, const uint32_t *ids, const enum drop_at *how,
               const uint32_t *rounds, size_t ndrop, char *reason, size_t cap)
{
    struct pjob j;
    int exact_all = 1;
    int rc = 0;

    pjob_init(&j, n, n / 2 + 1, plus, aggs, 300);
    for (size_t q = 0; q < ndrop; q++) {
        j.drop[ids[q]] = how[q];
        j.drop_round[ids[q]] = rounds != NULL ? rounds[q] : 0;
    }
    if (pjob_setup(&j) != 0) {
        rc = -1;
    }
    for (uint32_t r = 0; rc == 0 && r < aggs; r++) {
        int exact = 0;
        rc = pjob_aggregate(&j, r, &exact);
        exact_all &= exact;
    }
    if (reason != NULL) {
        snprintf(reason, cap, "%s", j.reason);
    }
    pjob_free(&j);
    return rc != 0 ? -1 : exact_all;
}

static void test_plus_sums_no_dropout(void)
{
    CHECK(run(20, 1, 1, NULL, NULL, NULL, 0, NULL, 0) == 1);
    CHECK(run(50, 1, 1, NULL, NULL, NULL, 0, NULL, 0) == 1);
    /* the full graph still sums too */
    CHECK(run(20, 0, 1, NULL, NULL, NULL, 0, NULL, 0) == 1);
}

/* Dropout sets small enough that every party keeps share_t share holders
 * that reveal, whatever the graph (at 50 parties: delta n = 5 parties that
 * send no unmasking shares): these sums never depend on luck. */
static void test_plus_sums_with_dropouts(void)
{
    /* before the masked input (no shares; shares but no upload) and after it
     * (no signature; no unmasking shares) */
    {
        const uint32_t ids[] = {3, 7, 12};
        const enum drop_at how[] = {DROP_SHARE, DROP_MASKED, DROP_UNMASK};
        CHECK(run(20, 1, 1, ids, how, NULL, 3, NULL, 0) == 1);
    }
    {
        /* five of 50 (delta n): every kind of dropout at once */
        const uint32_t ids[] = {2, 9, 17, 25, 41};
        const enum drop_at how[] = {DROP_MASKED, DROP_SHARE, DROP_MASKED, DROP_CONSISTENCY,
                                    DROP_UNMASK};
        CHECK(run(50, 1, 1, ids, how, NULL, 5, NULL, 0) == 1);
    }
    {
        /* only masked-input dropouts, five of 50 (delta = 0.1) */
        const uint32_t ids[] = {1, 10, 20, 30, 50};
        const enum drop_at how[] = {DROP_MASKED, DROP_MASKED, DROP_MASKED, DROP_MASKED,
                                    DROP_MASKED};
        CHECK(run(50, 1, 1, ids, how, NULL, 5, NULL, 0) == 1);
    }
    {
        /* three aggregations: a party dropped in one stays out of the next */
        const uint32_t ids[] = {4, 11, 19, 23};
        const enum drop_at how[] = {DROP_MASKED, DROP_UNMASK, DROP_MASKED, DROP_CONSISTENCY};
        const uint32_t rounds[] = {0, 1, 1, 2};
        CHECK(run(24, 1, 3, ids, how, rounds, 4, NULL, 0) == 1);
    }
}

/* A dropped party whose neighbours mostly vanish too: its pairwise masks
 * cannot come back, and the server says so instead of returning a wrong sum. */
static void test_plus_too_many_neighbours_drop(void)
{
    struct pjob probe;
    uint32_t nb[64];
    size_t k;
    char reason[256] = "";
    char want[64];
    const uint32_t n = 20;

    /* the graph depends on the session: take the victim's neighbours after the key setup */
    pjob_init(&probe, n, n / 2 + 1, 1, 1, 300);
    CHECK(pjob_setup(&probe) == 0);
    k = fs_secagg_server_neighbours(probe.s, 5, nb);
    CHECK(k == probe.cfg.degree);
    /* party 5 drops before its upload; k - t + 1 of its neighbours sign and
     * then send no unmasking shares: t - 1 shares of its key remain */
    probe.drop[5] = DROP_MASKED;
    for (size_t q = 0; q < k - probe.cfg.share_t + 1; q++) {
        probe.drop[nb[q]] = DROP_UNMASK;
    }
    {
        int exact = -1;
        CHECK(pjob_aggregate(&probe, 0, &exact) == -1);
        snprintf(reason, sizeof reason, "%s", probe.reason);
    }
    snprintf(want, sizeof want, "party 5 dropped");
    CHECK_MSG(strstr(reason, want) != NULL && strstr(reason, "neighbours") != NULL, "reason: %s",
              reason);
    pjob_free(&probe);
}

int main(void)
{
    RUN(test_params_table);
    RUN(test_graph_properties);
    RUN(test_graph_same_on_both_sides);
    RUN(test_plus_sums_no_dropout);
    RUN(test_plus_sums_with_dropouts);
    RUN(test_plus_too_many_neighbours_drop);
    return TEST_END("test_secagg_plus");
}
