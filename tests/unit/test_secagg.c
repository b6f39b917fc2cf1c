/* Secure aggregation state machines driven in one process: 2 to 50 parties,
 * dropouts injected between any two steps, several aggregations per job,
 * aborts below threshold, and every kind of bad message. */
#include "crypto/ct.h"
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "crypto/x25519.h"
#include "proto/secagg.h"
#include "proto/secagg_internal.h" /* the key derivations a curious server would run */
#include "test.h"
#include "test_secagg_util.h"

#include <stdlib.h>

/* Where a party stops (it does everything before that step). */
enum drop_at {
    DROP_NEVER = 0,
    DROP_ADVERTISE,   /* never advertises */
    DROP_SHARE,       /* advertises, never shares */
    DROP_MASKED,      /* shares keys, never uploads in aggregation `drop_round` */
    DROP_MID_UPLOAD,  /* uploads only the first chunk in `drop_round` */
    DROP_CONSISTENCY, /* uploads, never signs */
    DROP_UNMASK       /* signs, never reveals */
};

/* threads the server unmasks with (fs_secagg_server_set_threads) */
static unsigned g_unmask_threads = 1;

struct party {
    fs_secagg_client *c;
    uint64_t *x;
    enum drop_at drop;
    uint32_t drop_round;
    int gone; /* stopped for good */
};

struct mem_store {
    uint32_t n;
    uint64_t len;
    uint64_t cw;
    uint64_t **buf; /* per party, len words */
};

static int ms_put(void *ctx, uint32_t party, uint64_t idx, const uint64_t *y, size_t m,
                  struct fs_err *err)
{
    struct mem_store *ms = ctx;
    (void)err;
    if (ms->buf[party] == NULL) {
        ms->buf[party] = calloc(ms->len, sizeof(uint64_t));
    }
    memcpy(ms->buf[party] + idx * ms->cw, y, m * sizeof *y);
    return 0;
}

static int ms_get(void *ctx, uint32_t party, uint64_t idx, uint64_t *y, size_t m,
                  struct fs_err *err)
{
    struct mem_store *ms = ctx;
    (void)err;
    memcpy(y, ms->buf[party] + idx * ms->cw, m * sizeof *y);
    return 0;
}

static void ms_drop(void *ctx, uint32_t party)
{
    struct mem_store *ms = ctx;
    free(ms->buf[party]);
    ms->buf[party] = NULL;
}

struct job {
    struct fs_secagg_config cfg;
    struct party *p; /* 1..n */
    fs_secagg_server *s;
    struct mem_store ms;
    uint64_t len;
    uint64_t **captured; /* masked uploads seen by the server, per party (last aggregation) */
    uint32_t spy; /* 0, or the party whose reveals the test collects (as the server gets them) */
    struct fs_secagg_reveal spy_rv[4][64]; /* per aggregation r < 4: reveals about spy */
    size_t spy_nrv[4];
    int resend; /* re-send each accepted message once its round closed: an identical one is
                   answered 0 and changes nothing, a changed one is FS_ECONFLICT */
};

/* j->resend: after R1 closed, party i's shares again (and altered). */
static void resend_shares(struct job *j, uint32_t i, struct fs_secagg_share_ct *cts, size_t nct)
{
    struct fs_err err = {0};

    CHECK_OK(fs_secagg_server_add_shares(j->s, i, cts, nct, &err), &err);
    if (nct > 0) {
        cts[0].ct[0] ^= 1;
        CHECK(fs_secagg_server_add_shares(j->s, i, cts, nct, &err) == FS_ECONFLICT);
        cts[0].ct[0] ^= 1;
    }
}

static void job_init(struct job *j, uint32_t n, uint32_t t, uint32_t aggs, uint64_t len,
                     uint32_t chunk, int use_store)
{
    struct fs_err err = {0};
    struct fs_secagg_chunk_store st;

    memset(j, 0, sizeof *j);
    j->cfg.n = n;
    j->cfg.t = t;
    j->cfg.aggregations = aggs;
    j->cfg.chunk_words = chunk;
    CHECK_OK(fs_rand_bytes(j->cfg.job_id, 32, &err), &err);
    j->len = len;
    j->p = calloc(n + 1, sizeof *j->p);
    j->captured = calloc(n + 1, sizeof *j->captured);
    j->ms.n = n;
    j->ms.len = len;
    j->ms.cw = chunk;
    j->ms.buf = calloc(n + 1, sizeof *j->ms.buf);
    st.ctx = &j->ms;
    st.put = ms_put;
    st.get = ms_get;
    st.drop = ms_drop;
    CHECK_OK(fs_secagg_server_new(&j->cfg, use_store ? &st : NULL, &j->s, &err), &err);
    fs_secagg_server_set_threads(j->s, g_unmask_threads);
    for (uint32_t i = 1; i <= n; i++) {
        uint8_t sk[32], pk[32];
        CHECK_OK(fs_ed25519_keygen(sk, pk, &err), &err);
        CHECK_OK(fs_secagg_client_new(&j->cfg, i, sk, &j->p[i].c, &err), &err);
        j->p[i].x = malloc(len * sizeof(uint64_t));
        j->captured[i] = calloc(len, sizeof(uint64_t));
    }
}

static void job_free(struct job *j)
{
    fs_secagg_server_free(j->s); /* first: it hands chunks back to the store */
    for (uint32_t i = 1; i <= j->cfg.n; i++) {
        fs_secagg_client_free(j->p[i].c);
        free(j->p[i].x);
        free(j->captured[i]);
        free(j->ms.buf[i]);
    }
    free(j->ms.buf);
    free(j->captured);
    free(j->p);
}

/* Key setup (R0, R1). Returns 0 if the server got through it. */
static int job_setup(struct job *j)
{
    struct fs_err err = {0};
    const struct fs_secagg_adv *roster;
    struct fs_secagg_share_ct *kept[65] = {0}; /* j->resend: each party's shares */
    size_t nkept[65] = {0};
    size_t k;
    uint32_t n = j->cfg.n;

    for (uint32_t i = 1; i <= n; i++) {
        struct fs_secagg_adv a;
        if (j->p[i].drop == DROP_ADVERTISE) {
            j->p[i].gone = 1;
            continue;
        }
        CHECK_OK(fs_secagg_client_advertise(j->p[i].c, &a, &err), &err);
        CHECK_OK(fs_secagg_server_add_adv(j->s, &a, &err), &err);
    }
    if (fs_secagg_server_close_adv(j->s, &err) != 0) {
        return -1;
    }
    for (uint32_t i = 1; j->resend && i <= n; i++) {
        struct fs_secagg_adv a;
        CHECK_OK(fs_secagg_client_advertise(j->p[i].c, &a, &err), &err);
        if (j->p[i].gone) {
            /* never accepted: a late advertisement is not a repeat */
            CHECK(fs_secagg_server_add_adv(j->s, &a, &err) == FS_ECONFLICT);
            continue;
        }
        CHECK_OK(fs_secagg_server_add_adv(j->s, &a, &err), &err);
        a.sig[0] ^= 1;
        CHECK(fs_secagg_server_add_adv(j->s, &a, &err) == FS_ECONFLICT);
    }
    roster = fs_secagg_server_roster(j->s, &k);
    for (uint32_t i = 1; i <= n; i++) {
        struct fs_secagg_share_ct *cts = NULL;
        size_t nct = 0;
        if (j->p[i].gone) {
            continue;
        }
        CHECK_OK(fs_secagg_client_share_keys(j->p[i].c, roster, k, &cts, &nct, &err), &err);
        if (j->p[i].drop == DROP_SHARE) {
            j->p[i].gone = 1;
        } else {
            CHECK_OK(fs_secagg_server_add_shares(j->s, i, cts, nct, &err), &err);
        }
        if (j->resend) {
            kept[i] = cts;
            nkept[i] = nct;
        } else {
            fs_secagg_share_cts_free(cts, nct);
        }
    }
    if (fs_secagg_server_close_shares(j->s, &err) != 0) {
        for (uint32_t i = 1; i <= n; i++) {
            fs_secagg_share_cts_free(kept[i], nkept[i]);
        }
        return -1;
    }
    for (uint32_t i = 1; j->resend && i <= n; i++) {
        if (kept[i] == NULL) {
            continue;
        }
        if (j->p[i].gone) {
            CHECK(fs_secagg_server_add_shares(j->s, i, kept[i], nkept[i], &err) == FS_ECONFLICT);
        } else {
            resend_shares(j, i, kept[i], nkept[i]);
        }
        fs_secagg_share_cts_free(kept[i], nkept[i]);
    }
    for (uint32_t i = 1; i <= n; i++) {
        if (j->p[i].gone) {
            continue;
        }
        CHECK_OK(sa_receive(j->s, j->p[i].c, i, &err), &err);
    }
    return 0;
}

/* j->resend: after R2 closed, every party's upload again (as the server got it,
 * j->captured): an identical chunk is answered 0 and is not new, a changed one
 * is a conflict; a party that sent nothing (or was taken out) has nothing to
 * repeat. */
static void resend_chunks(struct job *j)
{
    struct fs_err err = {0};
    uint64_t cw = j->cfg.chunk_words;

    for (uint32_t i = 1; i <= j->cfg.n; i++) {
        int in_u3 = fs_secagg_server_has_masked(j->s, i);
        for (uint64_t idx = 0; idx * cw < j->len; idx++) {
            size_t m = (size_t)(j->len - idx * cw < cw ? j->len - idx * cw : cw);
            uint64_t *y = j->captured[i] + idx * cw;
            int is_new = -1;
            int rc = fs_secagg_server_add_masked_ex(j->s, i, idx, y, m, &is_new, &err);
            if (!in_u3) {
                CHECK(rc == FS_ECONFLICT);
                continue;
            }
            CHECK_MSG(rc == 0 && is_new == 0, "party %u chunk %llu: %d %s", i,
                      (unsigned long long)idx, rc, err.msg);
            y[0] ^= 1;
            CHECK(fs_secagg_server_add_masked_ex(j->s, i, idx, y, m, &is_new, &err) ==
                  FS_ECONFLICT);
            CHECK(is_new == 0);
            y[0] ^= 1;
        }
    }
}

/* One aggregation r. Fills expected with the sum over parties that
 * completed their upload. Returns 0 and *sum on success, -1 on abort. */
static int job_aggregate(struct job *j, uint32_t r, uint64_t *expected, const uint64_t **sum)
{
    struct fs_err err = {0};
    uint8_t sigs[65][64];                   /* j->resend: each party's signature */
    struct fs_secagg_reveal *rvs[65] = {0}; /* and reveals */
    size_t nrvs[65] = {0};
    const uint32_t *set;
    size_t na, n3, n4;
    uint64_t cw = j->cfg.chunk_words;
    uint64_t *y = malloc(j->len * sizeof *y);
    int rc = -1;

    memset(expected, 0, j->len * sizeof *expected);
    if (fs_secagg_server_begin(j->s, r, j->len, &err) != 0) {
        goto out;
    }
    set = fs_secagg_server_set(j->s, 0, &na);
    for (size_t q = 0; q < na; q++) {
        uint32_t i = set[q];
        struct party *p = &j->p[i];
        int partial = p->drop == DROP_MID_UPLOAD && p->drop_round == r;
        if (p->gone) {
            continue;
        }
        if (p->drop == DROP_MASKED && p->drop_round == r) {
            p->gone = 1;
            continue;
        }
        for (uint64_t w = 0; w < j->len; w++) {
            p->x[w] = (uint64_t)i * 1000003u + w * 7919u + r * 104729u;
        }
        CHECK_OK(fs_secagg_client_begin(p->c, r, j->len, set, na, &err), &err);
        /* Mask in uneven chunks, then upload in the server's chunking. */
        for (uint64_t off = 0, step = 3; off < j->len; off += step, step = step * 2 + 1) {
            size_t m = (size_t)(off + step > j->len ? j->len - off : step);
            CHECK_OK(fs_secagg_client_mask(p->c, off, p->x + off, y + off, m, &err), &err);
        }
        memcpy(j->captured[i], y, j->len * sizeof *y);
        for (uint64_t idx = 0; idx * cw < j->len; idx++) {
            size_t m = (size_t)(j->len - idx * cw < cw ? j->len - idx * cw : cw);
            CHECK_OK(fs_secagg_server_add_masked(j->s, i, idx, y + idx * cw, m, &err), &err);
            /* an idempotent retry of the same chunk is fine */
            CHECK_OK(fs_secagg_server_add_masked(j->s, i, idx, y + idx * cw, m, &err), &err);
            if (partial) {
                break;
            }
        }
        if (partial) {
            p->gone = 1;
            continue;
        }
        for (uint64_t w = 0; w < j->len; w++) {
            expected[w] += p->x[w];
        }
    }
    if (fs_secagg_server_close_masked(j->s, &err) != 0) {
        goto out;
    }
    if (j->resend) {
        resend_chunks(j);
    }
    set = fs_secagg_server_set(j->s, 3, &n3);
    for (size_t q = 0; q < n3; q++) {
        uint32_t i = set[q];
        uint8_t sig[64];
        if (j->p[i].drop == DROP_CONSISTENCY && j->p[i].drop_round == r) {
            j->p[i].gone = 1;
            continue;
        }
        CHECK_OK(fs_secagg_client_consistency(j->p[i].c, set, n3, sig, &err), &err);
        CHECK_OK(fs_secagg_server_add_consistency(j->s, i, sig, &err), &err);
        memcpy(sigs[i], sig, sizeof sig);
    }
    if (fs_secagg_server_close_consistency(j->s, &err) != 0) {
        goto out;
    }
    set = fs_secagg_server_set(j->s, 4, &n4);
    for (size_t q = 0; j->resend && q < n4; q++) {
        uint32_t i = set[q];
        CHECK_OK(fs_secagg_server_add_consistency(j->s, i, sigs[i], &err), &err);
        sigs[i][5] ^= 1;
        CHECK(fs_secagg_server_add_consistency(j->s, i, sigs[i], &err) == FS_ECONFLICT);
        sigs[i][5] ^= 1;
    }
    set = fs_secagg_server_set(j->s, 4, &n4);
    for (size_t q = 0; q < n4; q++) {
        uint32_t i = set[q];
        struct fs_secagg_reveal *rv = NULL;
        size_t nrv = 0;
        if (j->p[i].drop == DROP_UNMASK && j->p[i].drop_round == r) {
            j->p[i].gone = 1;
            continue;
        }
        CHECK_OK(fs_secagg_client_unmask(j->p[i].c, set, fs_secagg_server_sigs(j->s), n4, &rv, &nrv,
                                         &err),
                 &err);
        CHECK_OK(fs_secagg_server_add_reveals(j->s, i, rv, nrv, &err), &err);
        for (size_t q2 = 0; j->spy != 0 && r < 4 && q2 < nrv; q2++) {
            if (rv[q2].about == j->spy && j->spy_nrv[r] < 64) {
                j->spy_rv[r][j->spy_nrv[r]++] = rv[q2];
            }
        }
        if (j->resend) {
            rvs[i] = rv;
            nrvs[i] = nrv;
        } else {
            free(rv);
        }
    }
    if (fs_secagg_server_finish(j->s, sum, &err) != 0) {
        goto out;
    }
    if (j->resend) {
        /* every round of this aggregation is closed now: all repeats still answer 0 */
        resend_chunks(j);
        for (uint32_t i = 1; i <= j->cfg.n; i++) {
            if (rvs[i] == NULL) {
                continue;
            }
            CHECK_OK(fs_secagg_server_add_reveals(j->s, i, rvs[i], nrvs[i], &err), &err);
            if (nrvs[i] > 0) {
                rvs[i][0].share[3] ^= 1;
                CHECK(fs_secagg_server_add_reveals(j->s, i, rvs[i], nrvs[i], &err) == FS_ECONFLICT);
            }
        }
        for (size_t q = 0; q < n4; q++) {
            CHECK_OK(fs_secagg_server_add_consistency(j->s, set[q], sigs[set[q]], &err), &err);
        }
    }
    rc = 0;
out:
    for (uint32_t i = 1; i <= j->cfg.n && i < 65; i++) {
        free(rvs[i]);
    }
    free(y);
    return rc;
}

/* Run a whole job; returns number of aggregations whose sum was exact, or -1 on abort. */
static int run_job(uint32_t n, uint32_t t, uint32_t aggs, uint64_t len, uint32_t chunk,
                   const enum drop_at *drops, const uint32_t *drop_rounds, int use_store)
{
    struct job j;
    uint64_t *expected = malloc(len * sizeof *expected);
    int exact = 0;

    job_init(&j, n, t, aggs, len, chunk, use_store);
    for (uint32_t i = 1; i <= n; i++) {
        j.p[i].drop = drops != NULL ? drops[i - 1] : DROP_NEVER;
        j.p[i].drop_round = drop_rounds != NULL ? drop_rounds[i - 1] : 0;
    }
    if (job_setup(&j) != 0) {
        exact = -1;
        goto out;
    }
    CHECK(fs_secagg_server_take_sum(j.s, NULL) == NULL); /* nothing finished yet */
    for (uint32_t r = 0; r < aggs; r++) {
        const uint64_t *sum = NULL;
        if (job_aggregate(&j, r, expected, &sum) != 0) {
            CHECK(fs_secagg_server_phase(j.s) == FS_SECAGG_ABORTED);
            exact = -1;
            goto out;
        }
        if (memcmp(sum, expected, len * sizeof *sum) == 0) {
            exact++;
        }
        {
            /* the caller may take the sum over (once) */
            uint64_t tl = 0;
            uint64_t *taken = fs_secagg_server_take_sum(j.s, &tl);
            CHECK(taken == sum && tl == len);
            CHECK(fs_secagg_server_take_sum(j.s, &tl) == NULL && tl == 0);
            free(taken);
        }
    }
out:
    job_free(&j);
    free(expected);
    return exact;
}

static void test_small_no_dropout(void)
{
    CHECK(run_job(2, 2, 1, 100, 16, NULL, NULL, 1) == 1);
    CHECK(run_job(3, 2, 2, 1, 16, NULL, NULL, 0) == 2);
    CHECK(run_job(1, 1, 1, 10, 4, NULL, NULL, 1) == 1);
}

static void test_ten_parties_dropout_each_phase(void)
{
    static const enum drop_at phases[] = {DROP_ADVERTISE,  DROP_SHARE,       DROP_MASKED,
                                          DROP_MID_UPLOAD, DROP_CONSISTENCY, DROP_UNMASK};
    for (size_t ph = 0; ph < sizeof phases / sizeof phases[0]; ph++) {
        enum drop_at drops[10] = {0};
        drops[2] = phases[ph]; /* party 3 */
        drops[7] = phases[ph]; /* party 8 */
        CHECK_MSG(run_job(10, 7, 1, 1000, 128, drops, NULL, 1) == 1, "phase %zu", ph);
    }
}

static void test_abort_below_threshold(void)
{
    static const enum drop_at phases[] = {DROP_ADVERTISE, DROP_SHARE, DROP_MASKED, DROP_CONSISTENCY,
                                          DROP_UNMASK};
    for (size_t ph = 0; ph < sizeof phases / sizeof phases[0]; ph++) {
        enum drop_at drops[10] = {0};
        for (int i = 0; i < 4; i++) {
            drops[i] = phases[ph]; /* 6 survivors < t = 7 */
        }
        CHECK_MSG(run_job(10, 7, 1, 300, 64, drops, NULL, 1) == -1, "phase %zu", ph);
    }
}

static void test_mid_upload_without_store_aborts(void)
{
    enum drop_at drops[5] = {0};
    drops[1] = DROP_MID_UPLOAD;
    CHECK(run_job(5, 3, 1, 100, 10, drops, NULL, 0) == -1);
    CHECK(run_job(5, 3, 1, 100, 10, drops, NULL, 1) == 1);
}

static void test_several_aggregations_with_dropouts(void)
{
    enum drop_at drops[8] = {0};
    uint32_t rounds[8] = {0};

    drops[0] = DROP_MASKED; /* party 1 leaves in aggregation 1: its key is reconstructed */
    rounds[0] = 1;
    drops[4] = DROP_UNMASK; /* party 5 stays a survivor in 2 but does not reveal */
    rounds[4] = 2;
    drops[6] = DROP_CONSISTENCY;
    rounds[6] = 3;
    CHECK(run_job(8, 5, 4, 257, 32, drops, rounds, 1) == 4);
}

static void test_fifty_parties(void)
{
    enum drop_at drops[50] = {0};
    drops[0] = DROP_SHARE;
    drops[10] = DROP_MASKED;
    drops[20] = DROP_MID_UPLOAD;
    drops[30] = DROP_CONSISTENCY;
    drops[40] = DROP_UNMASK;
    CHECK(run_job(50, 26, 2, 64, 16, drops, NULL, 1) == 2);
}

/* Unmasking on several threads, over a sum of many cache pieces (65536
 * words each) with a dropped party's pairwise streams: the same exact sum. */
static void test_unmask_threads(void)
{
    enum drop_at drops[6] = {0};

    drops[1] = DROP_MASKED; /* its pairwise streams are removed */
    drops[4] = DROP_UNMASK; /* a survivor that does not reveal */
    for (unsigned th = 1; th <= 3; th++) {
        g_unmask_threads = th;
        CHECK_MSG(run_job(6, 4, 2, 3 * 65536 + 17, 40000, drops, NULL, 1) == 2, "threads %u", th);
    }
    g_unmask_threads = 1;
}

static void test_masked_upload_hides_input(void)
{
    struct job j;
    uint64_t len = 4096;
    uint64_t *expected = malloc(len * sizeof *expected);
    const uint64_t *sum = NULL;

    job_init(&j, 3, 2, 1, len, 512, 1);
    CHECK(job_setup(&j) == 0);
    CHECK(job_aggregate(&j, 0, expected, &sum) == 0);
    for (uint32_t i = 1; i <= 3; i++) {
        /* Pearson correlation of input and upload, as signed values. */
        double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0, same = 0;
        for (uint64_t w = 0; w < len; w++) {
            double a = (double)(int64_t)j.p[i].x[w];
            double b = (double)(int64_t)j.captured[i][w];
            same += j.p[i].x[w] == j.captured[i][w];
            sx += a;
            sy += b;
            sxx += a * a;
            syy += b * b;
            sxy += a * b;
        }
        double cov = sxy / len - (sx / len) * (sy / len);
        double vx = sxx / len - (sx / len) * (sx / len);
        double vy = syy / len - (sy / len) * (sy / len);
        double corr = cov / sqrt(vx * vy);
        CHECK(same == 0);
        CHECK_MSG(fabs(corr) < 5.0 / sqrt((double)len), "corr %g", corr);
    }
    CHECK(sum != NULL && memcmp(sum, expected, len * sizeof *sum) == 0);
    job_free(&j);
    free(expected);
}

static void test_bad_messages_rejected(void)
{
    struct job j;
    struct fs_err err = {0};
    struct fs_secagg_adv a[4], bad;
    const struct fs_secagg_adv *roster;
    struct fs_secagg_share_ct *cts[4] = {0};
    size_t nct[4] = {0}, k;

    job_init(&j, 3, 2, 1, 10, 4, 1);
    for (uint32_t i = 1; i <= 3; i++) {
        CHECK_OK(fs_secagg_client_advertise(j.p[i].c, &a[i], &err), &err);
    }
    bad = a[1];
    bad.c_pk[0] ^= 1; /* mis-signed */
    CHECK(fs_secagg_server_add_adv(j.s, &bad, &err) == FS_EAUTH);
    bad = a[1];
    bad.id = 9; /* out of range */
    CHECK(fs_secagg_server_add_adv(j.s, &bad, &err) == FS_EINVAL);
    CHECK_OK(fs_secagg_server_add_adv(j.s, &a[1], &err), &err);
    CHECK_OK(fs_secagg_server_add_adv(j.s, &a[1], &err), &err); /* identical repeat */
    CHECK(fs_secagg_server_add_adv(j.s, &a[2], &err) == 0);
    bad = a[3];
    CHECK_OK(fs_secagg_server_add_adv(j.s, &a[3], &err), &err);
    {
        /* a different, validly signed advertisement for id 3 conflicts */
        fs_secagg_client *other = NULL;
        uint8_t sk[32], pk[32];
        struct fs_secagg_adv a3;
        CHECK_OK(fs_ed25519_keygen(sk, pk, &err), &err);
        CHECK_OK(fs_secagg_client_new(&j.cfg, 3, sk, &other, &err), &err);
        CHECK_OK(fs_secagg_client_advertise(other, &a3, &err), &err);
        CHECK(fs_secagg_server_add_adv(j.s, &a3, &err) == FS_ECONFLICT);
        fs_secagg_client_free(other);
    }
    /* shares before the advertisement round closed */
    CHECK(fs_secagg_server_add_shares(j.s, 1, NULL, 0, &err) == FS_ESTATE);
    CHECK_OK(fs_secagg_server_close_adv(j.s, &err), &err);
    roster = fs_secagg_server_roster(j.s, &k);
    CHECK(k == 3);
    {
        /* a client rejects a roster with a tampered entry */
        struct fs_secagg_adv tampered[3];
        struct fs_secagg_share_ct *x = NULL;
        size_t nx = 0;
        uint8_t pks[32];
        memcpy(tampered, roster, sizeof tampered);
        /* any aggregation's mask key is covered by the signature */
        memcpy(pks, roster[1].s_pks, 32);
        pks[5] ^= 0x10;
        tampered[1].s_pks = pks;
        CHECK(fs_secagg_client_share_keys(j.p[1].c, tampered, 3, &x, &nx, &err) == FS_EAUTH);
        /* one mask key too few */
        tampered[1] = roster[1];
        tampered[1].nkeys = 0;
        CHECK(fs_secagg_client_share_keys(j.p[1].c, tampered, 3, &x, &nx, &err) == FS_EINVAL);
    }
    for (uint32_t i = 1; i <= 3; i++) {
        CHECK_OK(fs_secagg_client_share_keys(j.p[i].c, roster, k, &cts[i], &nct[i], &err), &err);
    }
    /* wrong size */
    cts[1][0].len--;
    CHECK(fs_secagg_server_add_shares(j.s, 1, cts[1], nct[1], &err) == FS_EINVAL);
    cts[1][0].len++;
    /* missing one */
    CHECK(fs_secagg_server_add_shares(j.s, 1, cts[1], nct[1] - 1, &err) == FS_EINVAL);
    /* duplicated recipient */
    {
        struct fs_secagg_share_ct dup[2] = {cts[1][0], cts[1][0]};
        CHECK(fs_secagg_server_add_shares(j.s, 1, dup, 2, &err) == FS_EINVAL);
    }
    /* claims to be from someone else */
    CHECK(fs_secagg_server_add_shares(j.s, 2, cts[1], nct[1], &err) == FS_EINVAL);
    for (uint32_t i = 1; i <= 3; i++) {
        CHECK_OK(fs_secagg_server_add_shares(j.s, i, cts[i], nct[i], &err), &err);
    }
    CHECK_OK(fs_secagg_server_add_shares(j.s, 1, cts[1], nct[1], &err), &err); /* retry */
    cts[1][0].ct[30] ^= 1;
    CHECK(fs_secagg_server_add_shares(j.s, 1, cts[1], nct[1], &err) == FS_ECONFLICT);
    CHECK_OK(fs_secagg_server_close_shares(j.s, &err), &err);
    {
        /* a tampered bundle fails to authenticate at the recipient and changes nothing */
        const struct fs_secagg_share_ct **mine = NULL;
        struct fs_secagg_share_ct flat[2];
        uint8_t *copy;
        size_t km = 0;
        CHECK_OK(fs_secagg_server_shares_for(j.s, 2, &mine, &km, &err), &err);
        CHECK(km == 2);
        flat[0] = *mine[0];
        flat[1] = *mine[1];
        copy = malloc(flat[0].len);
        memcpy(copy, flat[0].ct, flat[0].len);
        copy[40] ^= 4;
        flat[0].ct = copy;
        CHECK(fs_secagg_client_receive_shares(j.p[2].c, flat, 2, &err) == FS_EAUTH);
        flat[0] = *mine[0];
        CHECK_OK(fs_secagg_client_receive_shares(j.p[2].c, flat, 2, &err), &err);
        free(copy);
        free(mine);
    }
    for (uint32_t i = 1; i <= 3; i++) {
        fs_secagg_share_cts_free(cts[i], nct[i]);
    }
    job_free(&j);
}

static void test_client_refuses_unsafe_unmask(void)
{
    struct job j;
    struct fs_err err = {0};
    uint64_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    uint32_t all[3] = {1, 2, 3};
    uint32_t two[2] = {1, 2};
    uint8_t sig1[64], sig2[64];
    uint8_t sigs[2][64];
    uint32_t ids[2] = {1, 2};
    struct fs_secagg_reveal *rv = NULL;
    size_t nrv = 0;

    job_init(&j, 3, 2, 2, 8, 8, 1);
    CHECK(job_setup(&j) == 0);
    for (uint32_t i = 1; i <= 2; i++) {
        CHECK_OK(fs_secagg_client_begin(j.p[i].c, 0, 8, all, 3, &err), &err);
        CHECK_OK(fs_secagg_client_mask(j.p[i].c, 0, x, y, 8, &err), &err);
    }
    /* a survivor set below threshold or outside the active set is refused */
    CHECK(fs_secagg_client_consistency(j.p[1].c, two, 1, sig1, &err) != 0);
    CHECK_OK(fs_secagg_client_consistency(j.p[1].c, two, 2, sig1, &err), &err);
    CHECK_OK(fs_secagg_client_consistency(j.p[2].c, two, 2, sig2, &err), &err);
    memcpy(sigs[0], sig1, 64);
    memcpy(sigs[1], sig2, 64);
    /* only one signature: below t */
    CHECK(fs_secagg_client_unmask(j.p[1].c, ids, (const uint8_t(*)[64])sigs, 1, &rv, &nrv, &err) ==
          FS_EAUTH);
    /* a forged signature */
    sigs[1][3] ^= 1;
    CHECK(fs_secagg_client_unmask(j.p[1].c, ids, (const uint8_t(*)[64])sigs, 2, &rv, &nrv, &err) ==
          FS_EAUTH);
    sigs[1][3] ^= 1;
    CHECK_OK(fs_secagg_client_unmask(j.p[1].c, ids, (const uint8_t(*)[64])sigs, 2, &rv, &nrv, &err),
             &err);
    CHECK(nrv == 3);
    for (size_t q = 0; q < nrv; q++) {
        CHECK(rv[q].kind == (rv[q].about == 3 ? FS_SECAGG_MASK_KEY : FS_SECAGG_SELF_SEED));
    }
    free(rv);
    /* party 3's mask key is out: it can never be active again for party 1 */
    CHECK(fs_secagg_client_begin(j.p[1].c, 1, 8, all, 3, &err) == FS_EAUTH);
    CHECK_OK(fs_secagg_client_begin(j.p[1].c, 1, 8, two, 2, &err), &err);
    /* aggregations only move forward */
    CHECK(fs_secagg_client_begin(j.p[2].c, 0, 8, all, 3, &err) == FS_ESTATE);
    job_free(&j);
}

static void test_server_rejects_bad_uploads(void)
{
    struct job j;
    struct fs_err err = {0};
    uint64_t y[10] = {0};

    job_init(&j, 3, 2, 1, 10, 4, 1);
    CHECK(job_setup(&j) == 0);
    CHECK(fs_secagg_server_add_masked(j.s, 1, 0, y, 4, &err) == FS_ESTATE); /* not begun */
    CHECK_OK(fs_secagg_server_begin(j.s, 0, 10, &err), &err);
    CHECK(fs_secagg_server_add_masked(j.s, 1, 3, y, 4, &err) == FS_EINVAL); /* no chunk 3 */
    CHECK(fs_secagg_server_add_masked(j.s, 1, 2, y, 4, &err) == FS_EINVAL); /* last has 2 */
    CHECK(fs_secagg_server_add_masked(j.s, 7, 0, y, 4, &err) == FS_EINVAL); /* no party 7 */
    CHECK_OK(fs_secagg_server_add_masked(j.s, 1, 0, y, 4, &err), &err);
    y[0] = 1;
    CHECK(fs_secagg_server_add_masked(j.s, 1, 0, y, 4, &err) == FS_ECONFLICT);
    CHECK(fs_secagg_server_add_consistency(j.s, 1, (const uint8_t *)y, &err) == FS_ESTATE);
    job_free(&j);
}

/* A re-sent chunk: identical is accepted (is_new 0), changed is a conflict,
 * both when the server compares with its chunk store and when it keeps a
 * hash per chunk (no store). */
static void test_server_repeat_chunks(void)
{
    for (int use_store = 0; use_store <= 1; use_store++) {
        struct job j;
        struct fs_err err = {0};
        uint64_t y[4] = {5, 6, 7, 8};
        int is_new = -1;

        job_init(&j, 3, 2, 1, 10, 4, use_store);
        CHECK(job_setup(&j) == 0);
        CHECK_OK(fs_secagg_server_begin(j.s, 0, 10, &err), &err);
        CHECK_OK(fs_secagg_server_add_masked_ex(j.s, 2, 1, y, 4, &is_new, &err), &err);
        CHECK(is_new == 1);
        CHECK_OK(fs_secagg_server_add_masked_ex(j.s, 2, 1, y, 4, &is_new, &err), &err);
        CHECK(is_new == 0);
        y[3] ^= 1;
        CHECK(fs_secagg_server_add_masked_ex(j.s, 2, 1, y, 4, &is_new, &err) == FS_ECONFLICT);
        CHECK(is_new == 0);
        y[3] ^= 1;
        CHECK_OK(fs_secagg_server_add_masked_ex(j.s, 2, 1, y, 4, &is_new, &err), &err);
        CHECK(is_new == 0);
        job_free(&j);
    }
}

/* Lost responses: every message re-sent after its round closed (R0 and R1
 * after they closed, each aggregation's chunks in R3 and after unmasking,
 * signatures in R4 and after, reveals after unmasking) is accepted again and
 * changes nothing, so the sums stay exact; other bytes are a conflict. With
 * and without a chunk store, two aggregations, one party dropping in the
 * second (its upload is not there to repeat). */
static void test_repeat_after_round_closed(void)
{
    for (int use_store = 0; use_store <= 1; use_store++) {
        struct job j;
        uint64_t len = 10;
        uint64_t *expected = malloc(len * sizeof *expected);
        const uint64_t *sum = NULL;

        job_init(&j, 4, 3, 2, len, 4, use_store);
        j.resend = 1;
        j.p[4].drop = DROP_MASKED;
        j.p[4].drop_round = 1;
        CHECK(job_setup(&j) == 0);
        for (uint32_t r = 0; r < 2; r++) {
            CHECK(job_aggregate(&j, r, expected, &sum) == 0);
            CHECK(sum != NULL && memcmp(sum, expected, len * sizeof *sum) == 0);
        }
        job_free(&j);
        free(expected);
    }
}

/* Combine the shares of one kind about the spied party that aggregation r's
 * reveals carried (the server holds exactly these). 0 when t of them combine. */
static int spy_combine(const struct job *j, uint32_t r, uint8_t kind, uint8_t out[32])
{
    struct fs_shamir_share sh[64];
    struct fs_err err = {0};
    size_t k = 0;

    for (size_t q = 0; q < j->spy_nrv[r]; q++) {
        if (j->spy_rv[r][q].kind == kind &&
            fs_shamir_share_decode(&sh[k], j->spy_rv[r][q].share, FS_SHAMIR_SHARE_LEN, &err) == 0) {
            k++;
        }
    }
    return k >= j->cfg.t ? fs_shamir_combine(sh, k, j->cfg.t, out, &err) : -1;
}

/* The mask public key party a advertised for aggregation r. */
static const uint8_t *adv_mask_pk(const struct fs_secagg_adv *a, uint32_t r)
{
    return fs_secagg_adv_mask_pk(a, r);
}

/*
 * Key safety across aggregations. n = 3, t = 2, two aggregations; party 3
 * survives the first (its self-mask seed is revealed) and drops in the second
 * (shares of its mask key are revealed). A curious server then takes every
 * mask off party 3's first upload with what it received: the seed of
 * aggregation 0, the mask key revealed in aggregation 1 and the advertised
 * public keys. That must not give party 3's input back.
 */
static void test_cross_aggregation_unmask(void)
{
    static const enum drop_at drops[3] = {DROP_NEVER, DROP_NEVER, DROP_MASKED};
    struct job j;
    struct fs_err err = {0};
    uint64_t len = 64;
    uint64_t *expected = malloc(len * sizeof *expected);
    uint64_t *x3 = malloc(len * sizeof *x3);
    uint64_t *y3 = malloc(len * sizeof *y3);
    const uint64_t *sum = NULL;
    const struct fs_secagg_adv *roster;
    uint8_t seed[32], sk[32], pk[32];
    struct fs_prg_term st[3];
    size_t k;

    job_init(&j, 3, 2, 2, len, 16, 1);
    j.spy = 3;
    for (uint32_t i = 1; i <= 3; i++) {
        j.p[i].drop = drops[i - 1];
        j.p[i].drop_round = 1;
    }
    CHECK(job_setup(&j) == 0);
    CHECK(job_aggregate(&j, 0, expected, &sum) == 0);
    CHECK(sum != NULL && memcmp(sum, expected, len * sizeof *sum) == 0);
    memcpy(x3, j.p[3].x, len * sizeof *x3);
    memcpy(y3, j.captured[3], len * sizeof *y3);
    /* aggregation 1 without party 3: the survivors' sum stays exact */
    CHECK(job_aggregate(&j, 1, expected, &sum) == 0);
    CHECK(sum != NULL && memcmp(sum, expected, len * sizeof *sum) == 0);
    /* the server's reconstructions */
    CHECK(spy_combine(&j, 0, FS_SECAGG_SELF_SEED, seed) == 0);
    CHECK(spy_combine(&j, 1, FS_SECAGG_MASK_KEY, sk) == 0);
    roster = fs_secagg_server_roster(j.s, &k);
    CHECK(k == 3);
    /* what it recovered is the key of aggregation 1, checked as the server checks it */
    CHECK_OK(fs_x25519_public(pk, sk, &err), &err);
    CHECK(memcmp(pk, adv_mask_pk(&roster[2], 1), 32) == 0);
    /* the attack on aggregation 0: y3 - self mask - pairwise masks with 1 and 2 */
    CHECK_OK(sa_self_mask_key(seed, fs_secagg_client_session(j.p[1].c), 3, 0, len, st[0].key, &err),
             &err);
    st[0].sign = -1;
    for (uint32_t v = 1; v <= 2; v++) {
        CHECK_OK(sa_pair_mask_key(sk, adv_mask_pk(&roster[v - 1], 0),
                                  fs_secagg_client_session(j.p[1].c), 0, len, st[v].key, &err),
                 &err);
        st[v].sign = -1; /* party 3 added its pairwise masks with smaller ids */
    }
    CHECK_OK(fs_prg_sum(st, 3, 0, y3, len, &err), &err);
    CHECK_MSG(memcmp(y3, x3, len * sizeof *x3) != 0,
              "the server unmasked party 3's aggregation-0 input from the key revealed in "
              "aggregation 1");
    fs_wipe(seed, sizeof seed);
    fs_wipe(sk, sizeof sk);
    fs_wipe(st, sizeof st);
    job_free(&j);
    free(expected);
    free(x3);
    free(y3);
}

int main(void)
{
    RUN(test_small_no_dropout);
    RUN(test_server_repeat_chunks);
    RUN(test_repeat_after_round_closed);
    RUN(test_ten_parties_dropout_each_phase);
    RUN(test_abort_below_threshold);
    RUN(test_mid_upload_without_store_aborts);
    RUN(test_several_aggregations_with_dropouts);
    RUN(test_fifty_parties);
    RUN(test_unmask_threads);
    RUN(test_masked_upload_hides_input);
    RUN(test_bad_messages_rejected);
    RUN(test_client_refuses_unsafe_unmask);
    RUN(test_server_rejects_bad_uploads);
    RUN(test_cross_aggregation_unmask);
    return TEST_END("test_secagg");
}
