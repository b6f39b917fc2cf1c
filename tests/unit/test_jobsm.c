/* The aggregation server's job state machine (lib/proto/jobsm.h) driven in
 * one process, with real secure-aggregation clients and server: a job
 * through its phases, dropouts at each round, the dropout rules, below
 * threshold aborts, exponent disagreement, the phase checks, and the replay
 * of the recorded events into a fresh state giving the same state. */
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "proto/jobsm.h"
#include "proto/secagg.h"
#include "test.h"
#include "test_secagg_util.h"

#include <stdlib.h>

#define MAXP   8
#define MAXEV  512
#define MAXBUF 256
#define LEN    10
#define CHUNK  4

enum ev_type { EV_MSG, EV_CLOSE, EV_BEGIN };

/* A recorded event (what the service persists); payloads stay alive in the harness. */
struct ev {
    enum ev_type type;
    struct fs_jobsm_msg msg;
    uint8_t bytes[64];
    uint32_t r;
    uint64_t len;
    double at;
};

struct h {
    struct fs_jobsm s;
    fs_secagg_server *sa;
    struct fs_secagg_config cfg;
    uint32_t n;
    fs_secagg_client *c[MAXP + 1];
    struct fs_secagg_adv adv[MAXP + 1];
    enum fs_job_phase stop[MAXP + 1]; /* the party sends nothing from this phase on */
    struct ev ev[MAXEV];
    size_t nev;
    void *keep[MAXBUF]; /* payloads the recorded events point into */
    size_t nkeep;
    size_t nkeep_k[MAXBUF];
    int keep_cts[MAXBUF];
    double clock;
    uint32_t naggs;
    uint64_t expected[LEN];
    int worked; /* the last close handed work to the worker */
};

static double tick(struct h *h)
{
    h->clock += 1.5;
    return h->clock;
}

static void keep(struct h *h, void *p, size_t k, int cts)
{
    if (h->nkeep < MAXBUF) {
        h->keep[h->nkeep] = p;
        h->nkeep_k[h->nkeep] = k;
        h->keep_cts[h->nkeep++] = cts;
    }
}

static void h_init(struct h *h, enum fs_algo algo, uint32_t n, uint32_t t, uint32_t naggs,
                   int allow_dropouts)
{
    struct fs_err err = {0};
    struct fs_jobsm_config c;

    memset(h, 0, sizeof *h);
    h->n = n;
    h->naggs = naggs;
    h->clock = 1000.0;
    h->cfg.n = n;
    h->cfg.t = t;
    h->cfg.aggregations = naggs;
    h->cfg.chunk_words = CHUNK;
    memset(&c, 0, sizeof c);
    c.algo = algo;
    c.parties = n;
    c.threshold = t;
    c.aggregations = naggs;
    c.allow_dropouts = allow_dropouts;
    /* as the service configures it: no consistency round when every input is needed */
    h->cfg.all_inputs = (uint32_t)fs_jobsm_all_inputs(&c);
    CHECK_OK(fs_rand_bytes(h->cfg.job_id, 32, &err), &err);
    CHECK_OK(fs_secagg_server_new(&h->cfg, NULL, &h->sa, &err), &err);
    for (uint32_t i = 1; i <= n; i++) {
        uint8_t sk[32], pk[32];
        CHECK_OK(fs_ed25519_keygen(sk, pk, &err), &err);
        CHECK_OK(fs_secagg_client_new(&h->cfg, i, sk, &h->c[i], &err), &err);
        h->stop[i] = FS_JOB_DONE;
    }
    CHECK_OK(fs_jobsm_init(&h->s, &c, h->clock, &err), &err);
    CHECK(h->s.all_inputs == (int)h->cfg.all_inputs);
}

static void h_free(struct h *h)
{
    fs_secagg_server_free(h->sa);
    for (uint32_t i = 1; i <= h->n; i++) {
        fs_secagg_client_free(h->c[i]);
    }
    for (size_t i = 0; i < h->nkeep; i++) {
        if (h->keep_cts[i]) {
            fs_secagg_share_cts_free(h->keep[i], h->nkeep_k[i]);
        } else {
            free(h->keep[i]);
        }
    }
    fs_jobsm_clear(&h->s);
}

static void record(struct h *h, enum ev_type type, const struct fs_jobsm_msg *msg, uint32_t r,
                   uint64_t len, double at)
{
    struct ev *e;

    if (h->nev >= MAXEV) {
        CHECK(!"too many events");
        return;
    }
    e = &h->ev[h->nev++];
    memset(e, 0, sizeof *e);
    e->type = type;
    e->r = r;
    e->len = len;
    e->at = at;
    if (msg != NULL) {
        e->msg = *msg;
        if (msg->bytes != NULL) {
            memcpy(e->bytes, msg->bytes,
                   msg->kind == FS_JOBSM_SIG ? FS_SECAGG_SIG_LEN : FS_FEDSVD_SEALED_EXP_LEN);
        }
    }
}

/* A party's message as the service takes it; recorded when it changed the state. */
static int h_msg(struct h *h, const struct fs_jobsm_msg *msg, char *reason)
{
    struct fs_err err = {0};
    int is_new = 0;
    int rc = fs_jobsm_apply(&h->s, h->sa, msg, &is_new, reason, FS_JOBSM_REASON_MAX, &err);

    if (rc == 0 && is_new) {
        record(h, EV_MSG, msg, 0, 0, tick(h));
    }
    return rc;
}

static void h_begin(struct h *h, uint32_t r)
{
    struct fs_err err = {0};
    uint32_t *active = NULL;
    size_t k = 0;
    double at = tick(h);

    CHECK_OK(fs_jobsm_begin(&h->s, h->sa, r, LEN, &active, &k, &err), &err);
    record(h, EV_BEGIN, NULL, r, LEN, at);
    fs_jobsm_opened(&h->s, r, active, k, at);
    free(active);
}

/* Close the open round as the service does. @return the secure aggregation's
 * code (then the job fails), with *c filled (caller clears). */
static int h_close(struct h *h, struct fs_jobsm_close *c, struct fs_jobsm_step *st)
{
    struct fs_err err = {0};
    double at = tick(h);
    int src = fs_jobsm_close_secagg(&h->s, h->sa, &err);

    memset(st, 0, sizeof *st);
    CHECK_OK(fs_jobsm_close(&h->s, c, &err), &err);
    if (src != 0 && c->drops > 0 && fs_jobsm_drop_fails(&h->s, c->phase)) {
        /* an all-inputs secure aggregation refused to go on without a
         * party: the service fails the job by the dropout rule */
        record(h, EV_CLOSE, NULL, 0, 0, at);
        st->action = FS_JOBSM_FAIL;
        st->no_dropouts = 1;
        fs_jobsm_fail(&h->s, "dropout rule");
        return 0;
    }
    if (src != 0) {
        fs_jobsm_fail(&h->s, err.msg);
        return src;
    }
    record(h, EV_CLOSE, NULL, 0, 0, at);
    CHECK_OK(fs_jobsm_advance(&h->s, h->sa, c, at, st, &err), &err);
    h->worked = st->action == FS_JOBSM_WORK;
    if (st->action == FS_JOBSM_FAIL) {
        fs_jobsm_fail(&h->s, st->no_dropouts ? "dropout rule" : st->reason);
    } else if (st->action == FS_JOBSM_BEGIN) {
        h_begin(h, 0);
    }
    return 0;
}

/* Close and check what the close saw; @return the action. */
static enum fs_jobsm_action close_expect(struct h *h, enum fs_job_phase closing, uint32_t drops,
                                         uint32_t first)
{
    struct fs_jobsm_close c;
    struct fs_jobsm_step st;
    enum fs_jobsm_action a;

    CHECK(h->s.phase == closing);
    CHECK(h_close(h, &c, &st) == 0);
    CHECK_MSG(c.phase == closing && c.drops == drops && c.first_drop == first,
              "phase %d drops %u first %u", (int)c.phase, c.drops, c.first_drop);
    a = st.action;
    fs_jobsm_step_clear(&st);
    fs_jobsm_close_clear(&c);
    return a;
}

static int sends(const struct h *h, uint32_t i)
{
    return h->s.in_round[i] && h->stop[i] > h->s.phase;
}

static struct fs_jobsm_msg msg_of(enum fs_jobsm_kind kind, uint32_t party)
{
    struct fs_jobsm_msg m;

    memset(&m, 0, sizeof m);
    m.kind = kind;
    m.party = party;
    return m;
}

static void round_adv(struct h *h)
{
    struct fs_err err = {0};

    for (uint32_t i = 1; i <= h->n; i++) {
        struct fs_jobsm_msg m = msg_of(FS_JOBSM_ADV, i);
        if (!sends(h, i)) {
            continue;
        }
        CHECK_OK(fs_secagg_client_advertise(h->c[i], &h->adv[i], &err), &err);
        m.adv = &h->adv[i];
        m.has_exp = 1;
        m.exp = (int)i;
        CHECK(h_msg(h, &m, (char[FS_JOBSM_REASON_MAX]){0}) == 0);
        CHECK(h_msg(h, &m, (char[FS_JOBSM_REASON_MAX]){0}) == 0); /* a repeat: not recorded */
        m.exp = 99;
        CHECK(h_msg(h, &m, (char[FS_JOBSM_REASON_MAX]){0}) == FS_ECONFLICT);
    }
}

static void round_share(struct h *h)
{
    struct fs_err err = {0};
    size_t k = 0;
    const struct fs_secagg_adv *roster = fs_secagg_server_roster(h->sa, &k);

    for (uint32_t i = 1; i <= h->n; i++) {
        struct fs_jobsm_msg m = msg_of(FS_JOBSM_SHARES, i);
        struct fs_secagg_share_ct *cts = NULL;
        if (!sends(h, i)) {
            continue;
        }
        CHECK_OK(fs_secagg_client_share_keys(h->c[i], roster, k, &cts, &m.k, &err), &err);
        keep(h, cts, m.k, 1);
        m.cts = cts;
        CHECK(h_msg(h, &m, (char[FS_JOBSM_REASON_MAX]){0}) == 0);
    }
}

/* R0 and R1 with every party, each round closed as expected: the job begins. */
static void keys_shared(struct h *h)
{
    round_adv(h);
    CHECK(close_expect(h, FS_JOB_ADVERTISE, 0, 0) == FS_JOBSM_NEXT);
    round_share(h);
    CHECK(close_expect(h, FS_JOB_SHARE_KEYS, 0, 0) == FS_JOBSM_BEGIN);
}

/* After R1: every party still in receives its shares (client side only). */
static void receive(struct h *h)
{
    struct fs_err err = {0};

    for (uint32_t i = 1; i <= h->n; i++) {
        if (!h->s.shared[i]) {
            continue;
        }
        CHECK_OK(sa_receive(h->sa, h->c[i], i, &err), &err);
    }
}

static void round_exp(struct h *h)
{
    for (uint32_t i = 1; i <= h->n; i++) {
        struct fs_jobsm_msg m = msg_of(FS_JOBSM_EXP, i);
        uint8_t sealed[FS_FEDSVD_SEALED_EXP_LEN];
        if (!sends(h, i)) {
            continue;
        }
        memset(sealed, (int)(i + 16 * h->s.r), sizeof sealed);
        m.bytes = sealed;
        CHECK(h_msg(h, &m, (char[FS_JOBSM_REASON_MAX]){0}) == 0);
        sealed[3] ^= 1;
        CHECK(h_msg(h, &m, (char[FS_JOBSM_REASON_MAX]){0}) == FS_ECONFLICT);
    }
}

static void round_masked(struct h *h, int pubexp)
{
    struct fs_err err = {0};
    size_t na = 0;
    uint32_t active[MAXP];

    for (uint32_t i = 1; i <= h->n; i++) {
        if (h->s.in_round[i]) {
            active[na++] = i;
        }
    }
    memset(h->expected, 0, sizeof h->expected);
    for (uint32_t i = 1; i <= h->n; i++) {
        uint64_t x[LEN];
        uint64_t *y;
        if (!sends(h, i)) {
            continue;
        }
        if (pubexp) {
            struct fs_jobsm_msg m = msg_of(FS_JOBSM_PUBEXP, i);
            m.exp = 7;
            CHECK(h_msg(h, &m, (char[FS_JOBSM_REASON_MAX]){0}) == 0);
        }
        y = malloc(sizeof x);
        keep(h, y, 0, 0);
        for (int w = 0; w < LEN; w++) {
            x[w] = 1000u * i + (uint64_t)w + 100000u * h->s.r;
            h->expected[w] += x[w];
        }
        CHECK_OK(fs_secagg_client_begin(h->c[i], h->s.r, LEN, active, na, &err), &err);
        CHECK_OK(fs_secagg_client_mask(h->c[i], 0, x, y, LEN, &err), &err);
        for (uint64_t idx = 0; idx * CHUNK < LEN; idx++) {
            struct fs_jobsm_msg m = msg_of(FS_JOBSM_MASKED, i);
            m.idx = idx;
            m.words = y + idx * CHUNK;
            m.m = LEN - idx * CHUNK < CHUNK ? LEN - idx * CHUNK : CHUNK;
            CHECK(!h->s.sent[i]); /* only a complete upload counts */
            CHECK(h_msg(h, &m, (char[FS_JOBSM_REASON_MAX]){0}) == 0);
        }
        CHECK(h->s.sent[i]);
    }
}

static void round_sig(struct h *h)
{
    struct fs_err err = {0};
    size_t n3 = 0;
    const uint32_t *u3 = fs_secagg_server_set(h->sa, 3, &n3);

    for (uint32_t i = 1; i <= h->n; i++) {
        struct fs_jobsm_msg m = msg_of(FS_JOBSM_SIG, i);
        uint8_t sig[FS_SECAGG_SIG_LEN];
        if (!sends(h, i)) {
            continue;
        }
        CHECK_OK(fs_secagg_client_consistency(h->c[i], u3, n3, sig, &err), &err);
        m.bytes = sig;
        CHECK(h_msg(h, &m, (char[FS_JOBSM_REASON_MAX]){0}) == 0);
    }
}

static void round_unmask(struct h *h)
{
    struct fs_err err = {0};
    size_t n4 = 0;
    const uint32_t *u4 = fs_secagg_server_set(h->sa, 4, &n4);

    for (uint32_t i = 1; i <= h->n; i++) {
        struct fs_jobsm_msg m = msg_of(FS_JOBSM_REVEALS, i);
        struct fs_secagg_reveal *rv = NULL;
        if (!sends(h, i)) {
            continue;
        }
        if (h->cfg.all_inputs) {
            /* no consistency round: U4 = U3, no signatures */
            CHECK_OK(fs_secagg_client_unmask_all(h->c[i], u4, n4, &rv, &m.k, &err), &err);
        } else {
            CHECK_OK(fs_secagg_client_unmask(h->c[i], u4, fs_secagg_server_sigs(h->sa), n4, &rv,
                                             &m.k, &err),
                     &err);
        }
        keep(h, rv, 0, 0);
        m.rv = rv;
        CHECK(h_msg(h, &m, (char[FS_JOBSM_REASON_MAX]){0}) == 0);
    }
}

/* Replay the recorded events into a fresh state and secure aggregation, as
 * the service does after a restart; the result must equal the live state. */
static void check_replay(struct h *h)
{
    struct fs_err err = {0};
    struct fs_jobsm r;
    fs_secagg_server *sa = NULL;
    int ok = 1;

    CHECK_OK(fs_jobsm_init(&r, &h->s.cfg, 1000.0, &err), &err);
    CHECK_OK(fs_secagg_server_new(&h->cfg, NULL, &sa, &err), &err);
    for (size_t i = 0; ok && i < h->nev; i++) {
        struct ev *e = &h->ev[i];
        if (e->type == EV_MSG) {
            struct fs_jobsm_msg m = e->msg;
            char reason[FS_JOBSM_REASON_MAX];
            int is_new = 0;
            if (m.bytes != NULL) {
                m.bytes = e->bytes;
            }
            ok = fs_jobsm_apply(&r, sa, &m, &is_new, reason, sizeof reason, &err) == 0 && is_new;
        } else if (e->type == EV_BEGIN) {
            uint32_t *active = NULL;
            size_t k = 0;
            int first = 0;
            const uint64_t *sum = NULL;
            if (r.fed) {
                /* the previous (statistics) aggregation is unmasked first */
                ok = fs_jobsm_replay_begin(&r, e->r, &first, &err) == 0 && first == (e->r > 0) &&
                     (!first || fs_secagg_server_finish(sa, &sum, &err) == 0);
            }
            ok = ok && fs_jobsm_begin(&r, sa, e->r, e->len, &active, &k, &err) == 0;
            if (ok) {
                fs_jobsm_opened(&r, e->r, active, k, e->at);
            }
            free(active);
        } else {
            struct fs_jobsm_close c;
            struct fs_jobsm_step st;
            enum fs_job_phase ph = r.phase;
            int src = fs_jobsm_close_secagg(&r, sa, &err);
            ok = fs_jobsm_close(&r, &c, &err) == 0;
            if (ok && src != 0 && c.drops > 0 && fs_jobsm_drop_fails(&r, c.phase)) {
                fs_jobsm_fail(&r, "dropout rule"); /* as h_close */
                fs_jobsm_close_clear(&c);
                continue;
            }
            ok = ok && src == 0 && fs_jobsm_advance(&r, sa, &c, e->at, &st, &err) == 0;
            if (ok && st.action == FS_JOBSM_FAIL) {
                fs_jobsm_fail(&r, st.no_dropouts ? "dropout rule" : st.reason);
            }
            if (ok) {
                fs_jobsm_replay_closed(&r, ph);
                fs_jobsm_step_clear(&st);
                fs_jobsm_close_clear(&c);
            }
        }
        CHECK_MSG(ok, "replay of event %zu: %s", i, err.msg);
    }
    if (ok && h->worked) {
        /* the live side's worker would be running: replay left it pending */
        CHECK(r.finish_pending == (h->s.phase == FS_JOB_UNMASKING));
        fs_jobsm_set_finishing(&r, h->s.finishing);
    }
    CHECK(fs_jobsm_equal(&r, &h->s));
    CHECK(fs_secagg_server_phase(sa) == fs_secagg_server_phase(h->sa));
    fs_secagg_server_free(sa);
    fs_jobsm_clear(&r);
}

/* The unmasking the service's worker runs: the sum, then done. */
static void finish(struct h *h, int check_sum)
{
    struct fs_err err = {0};
    const uint64_t *sum = NULL;

    CHECK(h->worked);
    CHECK_OK(fs_secagg_server_finish(h->sa, &sum, &err), &err);
    for (int w = 0; check_sum && sum != NULL && w < LEN; w++) {
        CHECK(sum[w] == h->expected[w]);
    }
    fs_jobsm_record_timing(&h->s, FS_JOB_UNMASKING, tick(h));
    fs_jobsm_done(&h->s);
    CHECK(!fs_jobsm_running(&h->s));
    CHECK(h->s.has_timing[FS_JOB_UNMASKING] && h->s.timings[FS_JOB_UNMASKING] > 0);
}

/* secure-sum with n parties, party `who` stopping at phase `at` (FS_JOB_DONE: nobody). */
static void run_sum(uint32_t n, uint32_t t, uint32_t who, enum fs_job_phase at)
{
    struct h h;
    int drop = at != FS_JOB_DONE;

    h_init(&h, FS_ALGO_SECURE_SUM, n, t, 1, 1);
    h.stop[who] = at;
    round_adv(&h);
    CHECK(fs_jobsm_running(&h.s) && !fs_jobsm_round_complete(&h.s) == (at == FS_JOB_ADVERTISE));
    CHECK(close_expect(&h, FS_JOB_ADVERTISE, drop && at == FS_JOB_ADVERTISE,
                       at == FS_JOB_ADVERTISE ? who : 0) == FS_JOBSM_NEXT);
    round_share(&h);
    CHECK(close_expect(&h, FS_JOB_SHARE_KEYS, drop && at == FS_JOB_SHARE_KEYS,
                       at == FS_JOB_SHARE_KEYS ? who : 0) == FS_JOBSM_BEGIN);
    CHECK(h.s.phase == FS_JOB_MASKED_INPUT && h.s.r == 0);
    receive(&h);
    round_masked(&h, 0);
    CHECK(close_expect(&h, FS_JOB_MASKED_INPUT, drop && at == FS_JOB_MASKED_INPUT,
                       at == FS_JOB_MASKED_INPUT ? who : 0) == FS_JOBSM_NEXT);
    round_sig(&h);
    CHECK(close_expect(&h, FS_JOB_CONSISTENCY, drop && at == FS_JOB_CONSISTENCY,
                       at == FS_JOB_CONSISTENCY ? who : 0) == FS_JOBSM_NEXT);
    round_unmask(&h);
    CHECK(close_expect(&h, FS_JOB_UNMASKING, drop && at == FS_JOB_UNMASKING,
                       at == FS_JOB_UNMASKING ? who : 0) == FS_JOBSM_WORK);
    CHECK(h.s.dropped[who] == drop);
    for (uint32_t v = 1; v <= n; v++) {
        CHECK(v == who || !h.s.dropped[v]);
        CHECK(h.s.joined[v] == (v != who || at != FS_JOB_ADVERTISE));
    }
    check_replay(&h);
    finish(&h, 1);
    h_free(&h);
}

static void test_sum_all_in(void)
{
    run_sum(4, 3, 1, FS_JOB_DONE);
}

static void test_sum_dropouts_each_round(void)
{
    static const enum fs_job_phase at[] = {FS_JOB_ADVERTISE, FS_JOB_SHARE_KEYS, FS_JOB_MASKED_INPUT,
                                           FS_JOB_CONSISTENCY, FS_JOB_UNMASKING};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        run_sum(4, 3, 2, at[i]);
    }
}

/* Below the threshold the secure aggregation aborts the round's close. */
static void test_below_threshold(void)
{
    struct fs_jobsm_close c;
    struct fs_jobsm_step st;
    struct h h;

    h_init(&h, FS_ALGO_SECURE_SUM, 3, 3, 1, 1);
    h.stop[3] = FS_JOB_MASKED_INPUT;
    keys_shared(&h);
    receive(&h);
    round_masked(&h, 0);
    CHECK(h_close(&h, &c, &st) != 0);
    CHECK(c.drops == 1 && c.first_drop == 3);
    CHECK(h.s.phase == FS_JOB_FAILED && h.s.error[0] != '\0');
    CHECK(fs_secagg_server_phase(h.sa) == FS_SECAGG_ABORTED);
    CHECK(fs_jobsm_check(&h.s, FS_JOB_CONSISTENCY, 0, 1) == FS_JOBSM_FAILED);
    CHECK(fs_jobsm_fail(&h.s, "again") == 0); /* the first reason stays */
    CHECK(strcmp(h.s.error, "again") != 0);
    fs_jobsm_close_clear(&c);
    fs_jobsm_step_clear(&st);
    h_free(&h);
}

/* fedsvd/fedpca: two aggregations with sealed and public exponents; a
 * statistics aggregation then the SVD one, each replayed. */
static void run_fed(uint32_t who, enum fs_job_phase at, int allow, int expect_fail)
{
    struct h h;
    int failed = 0;

    h_init(&h, FS_ALGO_FEDPCA, 4, 2, 2, allow);
    h.stop[who] = at;
    round_adv(&h);
    CHECK(close_expect(&h, FS_JOB_ADVERTISE, 0, 0) == FS_JOBSM_NEXT);
    round_share(&h);
    if (close_expect(&h, FS_JOB_SHARE_KEYS, at == FS_JOB_SHARE_KEYS,
                     at == FS_JOB_SHARE_KEYS ? who : 0) == FS_JOBSM_FAIL) {
        failed = 1;
        goto out;
    }
    receive(&h);
    for (uint32_t r = 0; r < 2; r++) {
        CHECK(h.s.phase == FS_JOB_EXPONENTS && h.s.r == r);
        CHECK(fs_jobsm_check(&h.s, FS_JOB_MASKED_INPUT, r, 1) == FS_JOBSM_NOT_YET);
        round_exp(&h);
        if (close_expect(&h, FS_JOB_EXPONENTS, 0, 0) == FS_JOBSM_FAIL) {
            failed = 1;
            goto out;
        }
        round_masked(&h, r == 1);
        if (close_expect(&h, FS_JOB_MASKED_INPUT, at == FS_JOB_MASKED_INPUT && r == 0,
                         at == FS_JOB_MASKED_INPUT && r == 0 ? who : 0) == FS_JOBSM_FAIL) {
            failed = 1;
            goto out;
        }
        CHECK(fs_jobsm_check(&h.s, FS_JOB_MASKED_INPUT, r, 1) == FS_JOBSM_CLOSED);
        CHECK(fs_jobsm_repeatable(&h.s, FS_JOB_MASKED_INPUT, r));
        if (allow) {
            round_sig(&h);
            CHECK(close_expect(&h, FS_JOB_CONSISTENCY, at == FS_JOB_CONSISTENCY && r == 0,
                               at == FS_JOB_CONSISTENCY && r == 0 ? who : 0) == FS_JOBSM_NEXT);
        } else {
            /* every input needed: unmasking at once, no consistency phase */
            CHECK(h.s.phase == FS_JOB_UNMASKING);
            CHECK(fs_secagg_server_phase(h.sa) == FS_SECAGG_UNMASK);
            CHECK(fs_jobsm_check(&h.s, FS_JOB_CONSISTENCY, r, 1) == FS_JOBSM_CLOSED);
        }
        round_unmask(&h);
        CHECK(close_expect(&h, FS_JOB_UNMASKING, at == FS_JOB_UNMASKING && r == 0,
                           at == FS_JOB_UNMASKING && r == 0 ? who : 0) == FS_JOBSM_WORK);
        check_replay(&h);
        if (r == 0) {
            /* the worker publishes the statistics sum, then begins the next */
            const uint64_t *sum = NULL;
            struct fs_err err = {0};
            CHECK_OK(fs_secagg_server_finish(h.sa, &sum, &err), &err);
            h_begin(&h, 1);
        }
    }
    {
        int e = 0;
        struct fs_err err = {0};
        size_t n3 = 0;
        const uint32_t *u3 = fs_secagg_server_set(h.sa, 3, &n3);
        CHECK_OK(fs_jobsm_agreed_exponent(&h.s, u3, n3, &e, &err), &err);
        CHECK(e == 7);
    }
    finish(&h, 1);
out:
    CHECK(failed == expect_fail);
    if (failed) {
        CHECK(h.s.phase == FS_JOB_FAILED);
        check_replay(&h);
    }
    h_free(&h);
}

static void test_fed_through(void)
{
    run_fed(1, FS_JOB_DONE, 0, 0);
}

/* allow_dropouts false: a drop before the data is in fails the job, later it does not. */
static void test_fed_dropout_rules(void)
{
    run_fed(2, FS_JOB_SHARE_KEYS, 0, 1);
    run_fed(2, FS_JOB_MASKED_INPUT, 0, 1);
    run_fed(2, FS_JOB_UNMASKING, 0, 0);
    run_fed(2, FS_JOB_SHARE_KEYS, 1, 0);
    /* with allow_dropouts the consistency round runs (and a drop there is fine) */
    run_fed(2, FS_JOB_CONSISTENCY, 1, 0);
    run_fed(1, FS_JOB_DONE, 1, 0);
}

/* A secure-aggregation power method: without allow_dropouts its sums need
 * every party (no consistency phase, a missing upload fails the job by the
 * dropout rule); with allow_dropouts the consistency phase is there. */
static void run_power(int allow, uint32_t who, enum fs_job_phase at)
{
    struct h h;
    int fails = at == FS_JOB_MASKED_INPUT && !allow;

    h_init(&h, FS_ALGO_FEDPOWER_PRIVATE, 4, 2, 1, allow);
    CHECK(h.s.all_inputs == !allow && (int)h.cfg.all_inputs == !allow);
    h.stop[who] = at;
    keys_shared(&h);
    receive(&h);
    round_masked(&h, 0);
    if (fails) {
        CHECK(close_expect(&h, FS_JOB_MASKED_INPUT, 1, who) == FS_JOBSM_FAIL);
        CHECK(h.s.phase == FS_JOB_FAILED);
        CHECK(fs_secagg_server_phase(h.sa) == FS_SECAGG_ABORTED);
        check_replay(&h);
        h_free(&h);
        return;
    }
    CHECK(close_expect(&h, FS_JOB_MASKED_INPUT, at == FS_JOB_MASKED_INPUT,
                       at == FS_JOB_MASKED_INPUT ? who : 0) == FS_JOBSM_NEXT);
    CHECK(h.s.phase == (allow ? FS_JOB_CONSISTENCY : FS_JOB_UNMASKING));
    if (allow) {
        round_sig(&h);
        CHECK(close_expect(&h, FS_JOB_CONSISTENCY, 0, 0) == FS_JOBSM_NEXT);
    }
    round_unmask(&h);
    CHECK(close_expect(&h, FS_JOB_UNMASKING, 0, 0) == FS_JOBSM_WORK);
    check_replay(&h);
    finish(&h, at == FS_JOB_DONE);
    h_free(&h);
}

static void test_power_all_inputs(void)
{
    run_power(0, 1, FS_JOB_DONE);
    run_power(0, 3, FS_JOB_MASKED_INPUT);
    run_power(1, 1, FS_JOB_DONE);
    run_power(1, 3, FS_JOB_MASKED_INPUT);
    CHECK(fs_jobsm_all_inputs(&(struct fs_jobsm_config){.algo = FS_ALGO_SECURE_SUM}) == 0);
    CHECK(fs_jobsm_all_inputs(&(struct fs_jobsm_config){.algo = FS_ALGO_FEDPOWER}) == 0);
    CHECK(fs_jobsm_all_inputs(&(struct fs_jobsm_config){.algo = FS_ALGO_FEDSVD}) == 1);
    CHECK(fs_jobsm_all_inputs(&(struct fs_jobsm_config){.algo = FS_ALGO_DP_PPM}) == 1);
    CHECK(fs_jobsm_all_inputs(&(struct fs_jobsm_config){.algo = FS_ALGO_FEDPOWER_UTILITY,
                                                        .allow_dropouts = 1}) == 0);
}

/* Too few sealed exponents: the job fails with the count in its reason. */
static void test_fed_exponent_threshold(void)
{
    struct h h;
    struct fs_jobsm_close c;
    struct fs_jobsm_step st;
    struct fs_err err = {0};

    h_init(&h, FS_ALGO_FEDSVD, 3, 2, 1, 1);
    h.stop[2] = FS_JOB_EXPONENTS;
    h.stop[3] = FS_JOB_EXPONENTS;
    keys_shared(&h);
    round_exp(&h);
    CHECK(fs_jobsm_close_secagg(&h.s, h.sa, &err) == 0);
    CHECK_OK(fs_jobsm_close(&h.s, &c, &err), &err);
    CHECK(c.drops == 2 && c.first_drop == 2);
    CHECK_OK(fs_jobsm_advance(&h.s, h.sa, &c, tick(&h), &st, &err), &err);
    CHECK(st.action == FS_JOBSM_FAIL && !st.no_dropouts);
    CHECK_MSG(strstr(st.reason, "1 sealed exponents") != NULL, "%s", st.reason);
    fs_jobsm_close_clear(&c);
    fs_jobsm_step_clear(&st);
    h_free(&h);
}

/* Between the close of R1 and the begin of aggregation 0 (the service
 * begins it outside its status lock, with I/O) the job shows the phase that
 * begin opens: fedsvd/fedpca exponents, whose messages are taken (once
 * begun), not a later phase that says the exponents round is over. */
static void test_share_keys_close_to_begin(void)
{
    static const enum fs_algo algos[] = {FS_ALGO_FEDSVD, FS_ALGO_FEDPCA, FS_ALGO_SECURE_SUM};

    for (size_t q = 0; q < sizeof algos / sizeof *algos; q++) {
        struct h h;
        struct fs_jobsm_close c;
        struct fs_jobsm_step st;
        struct fs_err err = {0};
        int fed = algos[q] != FS_ALGO_SECURE_SUM;
        enum fs_job_phase opens = fed ? FS_JOB_EXPONENTS : FS_JOB_MASKED_INPUT;
        double at;

        h_init(&h, algos[q], 3, 2, algos[q] == FS_ALGO_FEDPCA ? 2 : 1, 0);
        round_adv(&h);
        CHECK(close_expect(&h, FS_JOB_ADVERTISE, 0, 0) == FS_JOBSM_NEXT);
        round_share(&h);
        at = tick(&h);
        CHECK_OK(fs_jobsm_close_secagg(&h.s, h.sa, &err), &err);
        CHECK_OK(fs_jobsm_close(&h.s, &c, &err), &err);
        record(&h, EV_CLOSE, NULL, 0, 0, at);
        CHECK_OK(fs_jobsm_advance(&h.s, h.sa, &c, at, &st, &err), &err);
        CHECK(st.action == FS_JOBSM_BEGIN);
        /* not begun yet: what a status poll sees now */
        CHECK_MSG(h.s.phase == opens && h.s.r == 0, "algo %d: phase %d before begin", (int)algos[q],
                  (int)h.s.phase);
        for (uint32_t i = 1; i <= 3; i++) {
            CHECK(fs_jobsm_check(&h.s, opens, 0, i) == FS_JOBSM_OK);
            CHECK(fs_jobsm_waits_for(&h.s, i));
        }
        CHECK(!fed || fs_jobsm_check(&h.s, FS_JOB_MASKED_INPUT, 0, 1) == FS_JOBSM_NOT_YET);
        fs_jobsm_step_clear(&st);
        fs_jobsm_close_clear(&c);
        h_begin(&h, 0);
        CHECK(h.s.phase == opens && h.s.r == 0);
        if (fed) {
            receive(&h);
            round_exp(&h);
            CHECK(close_expect(&h, FS_JOB_EXPONENTS, 0, 0) == FS_JOBSM_NEXT);
            CHECK(h.s.phase == FS_JOB_MASKED_INPUT && h.s.r == 0);
        }
        check_replay(&h);
        h_free(&h);
    }
}

/* Public exponents that differ mean the relayed sealed exponents differed. */
static void test_exponent_disagreement(void)
{
    struct h h;
    struct fs_err err = {0};
    char reason[FS_JOBSM_REASON_MAX];
    struct fs_jobsm_msg m = msg_of(FS_JOBSM_PUBEXP, 1);
    uint32_t u3[2] = {1, 2};
    int repeat = 0;
    int e = 0;

    h_init(&h, FS_ALGO_FEDSVD, 3, 2, 1, 1);
    m.exp = 3;
    CHECK(h_msg(&h, &m, reason) == 0 && reason[0] == '\0');
    CHECK(fs_jobsm_agreed_exponent(&h.s, u3, 2, &e, &err) == FS_ESTATE); /* 2 did not report */
    CHECK_OK(fs_jobsm_seen(&h.s, &m, &repeat, reason, sizeof reason, &err), &err);
    CHECK(repeat == 1);
    m.exp = 4;
    CHECK(fs_jobsm_seen(&h.s, &m, &repeat, reason, sizeof reason, &err) == FS_ECONFLICT);
    m.party = 2;
    CHECK_OK(fs_jobsm_seen(&h.s, &m, &repeat, reason, sizeof reason, &err), &err);
    CHECK_MSG(strstr(reason, "parties 1 and 2") != NULL, "%s", reason);
    CHECK(h_msg(&h, &m, reason) == 0 && reason[0] != '\0' && !h.s.has_pubexp[2]);
    m.exp = 3;
    CHECK(h_msg(&h, &m, reason) == 0 && reason[0] == '\0');
    CHECK_OK(fs_jobsm_agreed_exponent(&h.s, u3, 2, &e, &err), &err);
    CHECK(e == 3);
    h.s.pubexp[2] = 5; /* (as if recorded otherwise) */
    CHECK(fs_jobsm_agreed_exponent(&h.s, u3, 2, &e, &err) == FS_ESTATE);
    h_free(&h);
}

/* Plain fedpower: the upload round's threshold and its dropout rule. */
static void test_plain_power(void)
{
    static const int allow[] = {1, 0};
    for (int q = 0; q < 2; q++) {
        struct h h;
        struct fs_jobsm_close c;
        struct fs_jobsm_step st;
        struct fs_err err = {0};
        h_init(&h, FS_ALGO_FEDPOWER, 3, 2, 1, allow[q]);
        keys_shared(&h);
        CHECK(h.s.phase == FS_JOB_PLAIN_UPLOAD && h.s.active[1] && h.s.active[3]);
        fs_jobsm_accepted(&h.s, h.sa, &(struct fs_jobsm_msg){.kind = FS_JOBSM_PLAIN, .party = 1});
        CHECK_OK(fs_jobsm_close(&h.s, &c, &err), &err);
        CHECK(c.drops == 2 && c.k == 1 && c.ids[0] == 1);
        CHECK_OK(fs_jobsm_advance(&h.s, h.sa, &c, tick(&h), &st, &err), &err);
        CHECK(st.action == FS_JOBSM_FAIL);
        CHECK(st.no_dropouts == !allow[q]);
        CHECK(allow[q] == 0 || strstr(st.reason, "1 plain uploads") != NULL);
        fs_jobsm_close_clear(&c);
        fs_jobsm_step_clear(&st);
        h_free(&h);
    }
}

/* May a message be taken now: not yet, open, closed, dropped, failed. */
static void test_checks(void)
{
    struct h h;

    h_init(&h, FS_ALGO_SECURE_SUM, 3, 2, 1, 1);
    h.stop[3] = FS_JOB_ADVERTISE;
    CHECK(fs_jobsm_check(&h.s, FS_JOB_ADVERTISE, 0, 3) == FS_JOBSM_OK);
    CHECK(fs_jobsm_check(&h.s, FS_JOB_SHARE_KEYS, 0, 1) == FS_JOBSM_NOT_YET);
    CHECK(fs_jobsm_waits_for(&h.s, 3) && fs_jobsm_expects(&h.s, 3));
    round_adv(&h);
    CHECK(close_expect(&h, FS_JOB_ADVERTISE, 1, 3) == FS_JOBSM_NEXT);
    CHECK(fs_jobsm_check(&h.s, FS_JOB_ADVERTISE, 0, 1) == FS_JOBSM_CLOSED);
    CHECK(fs_jobsm_repeatable(&h.s, FS_JOB_ADVERTISE, 0));
    CHECK(fs_jobsm_secagg_closed(h.sa, FS_JOB_ADVERTISE));
    CHECK(!fs_jobsm_secagg_closed(h.sa, FS_JOB_SHARE_KEYS));
    CHECK(fs_jobsm_check(&h.s, FS_JOB_SHARE_KEYS, 0, 3) == FS_JOBSM_NOT_IN_ROUND);
    CHECK(!fs_jobsm_expects(&h.s, 3) && fs_jobsm_expects(&h.s, 1));
    {
        /* a closed round's repeat is recognised, another message is not */
        struct fs_err err = {0};
        struct fs_jobsm_msg m = msg_of(FS_JOBSM_ADV, 1);
        m.adv = &h.adv[1];
        m.has_exp = 1;
        m.exp = 1;
        CHECK_OK(fs_jobsm_closed_repeat(&h.s, h.sa, &m, &err), &err);
        m.exp = 2;
        CHECK(fs_jobsm_closed_repeat(&h.s, h.sa, &m, &err) == FS_ECONFLICT);
    }
    check_replay(&h);
    CHECK(fs_jobsm_fail(&h.s, "cancelled") == 1);
    CHECK(fs_jobsm_check(&h.s, FS_JOB_SHARE_KEYS, 0, 1) == FS_JOBSM_FAILED);
    CHECK(!fs_jobsm_repeatable(&h.s, FS_JOB_ADVERTISE, 0));
    h_free(&h);
}

/* Stored event names and the replay rules of "begin". */
static void test_events(void)
{
    struct fs_err err = {0};
    struct fs_jobsm s;
    struct fs_jobsm_config c = {FS_ALGO_FEDPCA, 3, 2, 3, 1};
    enum fs_jobsm_event ev;
    int first = 0;
    int e = 0;

    CHECK(fs_jobsm_event_parse("adv", &ev) == 0 && ev == FS_JOBSM_EV_ADV);
    CHECK(fs_jobsm_event_parse("close_unmask", &ev) == 0 && ev == FS_JOBSM_EV_CLOSE);
    CHECK(fs_jobsm_event_parse("close_plain", &ev) == 0 && ev == FS_JOBSM_EV_CLOSE);
    CHECK(fs_jobsm_event_parse("pubexp", &ev) == 0 && ev == FS_JOBSM_EV_PUBEXP);
    CHECK(fs_jobsm_event_parse("exchange", &ev) == -1);
    for (int k = FS_JOBSM_ADV; k <= FS_JOBSM_REVEALS; k++) {
        CHECK(fs_jobsm_event_parse(fs_jobsm_event_name((enum fs_jobsm_kind)k), &ev) == 0);
    }
    CHECK_OK(fs_jobsm_pubexp_parse((const uint8_t *)"-12", 3, &e, &err), &err);
    CHECK(e == -12);
    CHECK(fs_jobsm_pubexp_parse((const uint8_t *)"12x", 3, &e, &err) == FS_EFORMAT);
    CHECK(fs_jobsm_pubexp_parse((const uint8_t *)"5000", 4, &e, &err) == FS_EFORMAT);
    CHECK_OK(fs_jobsm_init(&s, &c, 0.0, &err), &err);
    CHECK_OK(fs_jobsm_replay_begin(&s, 0, &first, &err), &err);
    CHECK(first == 0);
    CHECK(fs_jobsm_replay_begin(&s, 1, &first, &err) == FS_EFORMAT); /* not unmasked yet */
    fs_jobsm_replay_closed(&s, FS_JOB_UNMASKING);
    CHECK(fs_jobsm_replay_begin(&s, 2, &first, &err) == FS_EFORMAT); /* skips one */
    CHECK(fs_jobsm_replay_begin(&s, 3, &first, &err) == FS_EFORMAT); /* out of range */
    CHECK_OK(fs_jobsm_replay_begin(&s, 1, &first, &err), &err);
    CHECK(first == 1 && !s.finish_pending);
    fs_jobsm_clear(&s);
}

int main(void)
{
    RUN(test_sum_all_in);
    RUN(test_sum_dropouts_each_round);
    RUN(test_below_threshold);
    RUN(test_fed_through);
    RUN(test_fed_dropout_rules);
    RUN(test_power_all_inputs);
    RUN(test_fed_exponent_threshold);
    RUN(test_share_keys_close_to_begin);
    RUN(test_exponent_disagreement);
    RUN(test_plain_power);
    RUN(test_checks);
    RUN(test_events);
    return TEST_END("test_jobsm");
}
