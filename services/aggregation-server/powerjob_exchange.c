/* fedpower-utility's noise exchange on the aggregation server
 * (docs/wire-fedpower.md, "Noise exchange"): the routes, opening the
 * exchange of a sync as soon as its masked input closed, the noise_exchange
 * round after the sum, and the replay of its events. The protocol logic is
 * lib/proto/fedpower.h's and noise_exchange.h's.
 *
 * The sum's parties (U3) are fixed when masked input closes, so the
 * exchange of sync r opens then: the tick draws j and encrypts the
 * selectors without the state-machine lock (the slow part), then installs
 * and persists them under it. From then on, through consistency, unmasking
 * and noise_exchange of r, parties may fetch their selector and answer.
 * When all of them answered before unmasking closed, a thread decrypts the
 * answers and regenerates the noise to remove while unmasking goes on.
 * After unmasking the worker adds the sum and opens the noise_exchange
 * round with the answers already in; when every U3 party answered, the
 * round is complete and closes at once.
 *
 * With exchange_once (fedpower-utility, seed or ot, no allow_dropouts; see
 * lib/proto/fedpower.h) only aggregation 0 has an exchange (pw->exchanges
 * is 1): the parties send master seeds, later syncs go from unmasking to
 * the next round with no exchange, and both routes answer 404 for r >= 1. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../api/phase.h"
#include "../../api/wire.h"
#include "jobmgr_internal.h"
#include "net/log.h"
#include "powerjob.h"
#include "powerjob_internal.h"
#include "proto/noise_exchange.h"
#include "proto/secagg.h"

/* ------------------------------------------------------------ when */

/* mu held: the job is in consistency or unmasking of sync r (the round's
 * worker not started): its exchange may open early. */
static int early_window_locked(const agg_job *j, uint32_t r)
{
    const struct fs_jobsm *s = &j->st;

    return fs_jobsm_running(s) && !s->finishing && s->r == r && r < j->pw->exchanges &&
           (s->phase == FS_JOB_CONSISTENCY || s->phase == FS_JOB_UNMASKING);
}

/* mu held: may round r's exchange take selectors and responses now (as far
 * as the job's phase goes)? 0 in consistency, unmasking and noise_exchange
 * of r; FS_ESTATE (409 not_ready) before; FS_ECONFLICT after. */
static int exchange_window_locked(const agg_job *j, uint32_t r, struct fs_err *err)
{
    const struct fs_jobsm *s = &j->st;
    enum fs_job_phase ph = s->phase;

    if (ph == FS_JOB_FAILED) {
        return fs_err_set(err, AGG_EABORTED, "job failed: %s", s->error);
    }
    if (ph != FS_JOB_DONE && (s->r < r || (s->r == r && ph < FS_JOB_CONSISTENCY))) {
        return fs_err_set(err, FS_ESTATE, "not yet: job phase is %s of aggregation %u",
                          fs_job_phase_name(ph), s->r);
    }
    if (s->r == r && (ph == FS_JOB_CONSISTENCY || ph == FS_JOB_UNMASKING ||
                      (ph == FS_JOB_NOISE_EXCHANGE && !s->finishing))) {
        return 0;
    }
    return fs_err_set(err, FS_ECONFLICT,
                      "the noise exchange of aggregation %u is closed (job phase %s)", r,
                      fs_job_phase_name(ph));
}

/* Round r's noise exchange takes selectors and responses now; sm_mu held on success. */
static int enter_exchange(agg_job *j, uint32_t r, struct fs_err *err)
{
    struct agg_power *pw;
    int rc = pj_need_power(j, 1, 0, err);

    if (rc == 0) {
        rc = agg_exists(j, r, err);
    }
    if (rc == 0 && r >= j->pw->syncs) {
        rc = fs_err_set(err, FS_ENOTFOUND, "round %u (Rayleigh) has no noise exchange", r);
    } else if (rc == 0 && r >= j->pw->exchanges) {
        rc = fs_err_set(err, FS_ENOTFOUND,
                        "aggregation %u has no noise exchange: the exchange of aggregation 0 "
                        "covers every sync of a job without allow_dropouts",
                        r);
    }
    if (rc != 0) {
        return rc;
    }
    pw = j->pw;
    pthread_mutex_lock(&j->mu);
    rc = exchange_window_locked(j, r, err);
    pthread_mutex_unlock(&j->mu);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    rc = exchange_window_locked(j, r, err); /* again: a round may have closed meanwhile */
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && (j->sm == NULL || pw->srv == NULL)) {
        rc = fs_err_set(err, FS_ECONFLICT, "job is over");
    }
    if (rc == 0 && (pw->x_logged != r + 1 || !fs_fedpower_server_exchange_ready(pw->srv))) {
        rc = fs_err_set(err, FS_ESTATE, "not yet: the noise exchange of aggregation %u is not open",
                        r);
    }
    if (rc != 0) {
        pthread_mutex_unlock(&j->sm_mu);
    }
    return rc;
}

/* ------------------------------------------------------------ routes */

int agg_job_get_selector(agg_job *j, uint32_t party, uint32_t r, json_t **out, struct fs_err *err)
{
    uint8_t *buf = NULL;
    char *b64 = NULL;
    int rc;

    *out = NULL;
    rc = enter_exchange(j, r, err);
    if (rc != 0) {
        return rc;
    }
    buf = malloc(j->pw->sel_size);
    rc = buf == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
                     : fs_fedpower_server_selector(j->pw->srv, party, buf, j->pw->sel_size, err);
    agg_leave(j);
    if (rc == FS_ENOTFOUND) {
        rc = fs_err_set(err, FS_ECONFLICT, "party %u's input is not in sum %u", party, r);
    }
    if (rc == 0) {
        b64 = fs_b64url_encode(buf, j->pw->sel_size);
        *out = b64 != NULL ? json_pack("{s:s}", "selector", b64) : NULL;
        if (*out == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        }
    }
    free(b64);
    free(buf);
    return rc;
}

int agg_job_selector_pending(agg_job *j, uint32_t r)
{
    const struct fs_jobsm *s = &j->st;
    int pending;

    if (j->pw == NULL || j->pw->cfg.alg != FS_FEDPOWER_UTILITY) {
        return 0;
    }
    pthread_mutex_lock(&j->mu);
    pending = fs_jobsm_running(s) && r < j->pw->exchanges && j->pw->x_open != r + 1 &&
              (s->r < r || (s->r == r && s->phase <= FS_JOB_NOISE_EXCHANGE));
    if (pending && s->r == r && j->pw->x_late == r + 1 &&
        (s->phase == FS_JOB_CONSISTENCY || s->phase == FS_JOB_UNMASKING)) {
        pending = 0; /* not before the sum, which may wait for this very party */
    }
    pthread_mutex_unlock(&j->mu);
    return pending;
}

/* sm_mu held, the exchange open: party's input is in the sum. */
static int in_sum(const agg_job *j, uint32_t party, uint32_t r, struct fs_err *err)
{
    uint8_t *buf = malloc(j->pw->sel_size); /* membership is the power server's */
    int rc;

    if (buf == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_fedpower_server_selector(j->pw->srv, party, buf, j->pw->sel_size, err);
    free(buf);
    if (rc == FS_ENOTFOUND) {
        rc = fs_err_set(err, FS_ECONFLICT, "party %u's input is not in sum %u", party, r);
    }
    return rc;
}

int agg_job_noise_check(agg_job *j, uint32_t party, uint32_t r, size_t *bytes, struct fs_err *err)
{
    int rc = enter_exchange(j, r, err);

    *bytes = 0;
    if (rc == 0) {
        rc = in_sum(j, party, r, err);
        *bytes = rc == 0 ? j->pw->resp_size : 0;
        agg_leave(j);
    }
    return rc;
}

int agg_job_post_noise_response(agg_job *j, uint32_t party, uint32_t r, const uint8_t *buf,
                                size_t len, struct fs_err *err)
{
    int rc = enter_exchange(j, r, err);
    int in_round;

    if (rc != 0) {
        return rc;
    }
    if (len != j->pw->resp_size) {
        rc = fs_err_set(err, FS_EINVAL, "response: %zu bytes, expected %zu", len, j->pw->resp_size);
    } else if (j->pw->pre_running && !fs_fedpower_server_has_response(j->pw->srv, party)) {
        /* (cannot happen: the outcome is computed ahead only once all answered) */
        rc = fs_err_set(err, FS_EINTERNAL, "an answer after every party had answered");
    } else {
        int is_new = !fs_fedpower_server_has_response(j->pw->srv, party);
        rc = fs_fedpower_server_add_response(j->pw->srv, party, buf, len, err);
        if (rc == 0 && is_new) {
            /* persisted before it is acknowledged: a restart replays it */
            rc = agg_log_event(j, "noise", party, r, buf, len, agg_now_wall(), err);
        }
    }
    if (rc == FS_EFORMAT) {
        rc = fs_err_set(err, FS_EINVAL, "response: %s", err->msg);
    } else if (rc == FS_ENOTFOUND) {
        rc = fs_err_set(err, FS_ECONFLICT, "party %u's input is not in sum %u", party, r);
    } else if (rc == FS_ESTATE) {
        rc = fs_err_set(err, FS_ECONFLICT, "%s", err->msg);
    }
    pthread_mutex_lock(&j->mu);
    in_round = j->st.phase == FS_JOB_NOISE_EXCHANGE;
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && in_round) {
        /* an early answer counts when the noise_exchange round opens */
        pj_mark_sent(j, party);
    }
    agg_leave(j);
    return rc;
}

/* ------------------------------------------------------------ opening early */

/* sm_mu held: persist sync r's selectors (before any is sent). */
static int log_selectors(agg_job *j, uint32_t r, double at, struct fs_err *err)
{
    size_t sl = 0;
    const uint8_t *sel = fs_fedpower_server_exchange_selectors(j->pw->srv, &sl);
    int rc = sel == NULL ? fs_err_set(err, FS_EINTERNAL, "no selectors")
                         : agg_log_event(j, "exchange", 0, r, sel, sl, at, err);

    if (rc == 0) {
        j->pw->x_logged = r + 1;
        pthread_mutex_lock(&j->mu);
        j->pw->x_open = r + 1; /* parked selector requests answer now */
        pthread_mutex_unlock(&j->mu);
    }
    return rc;
}

/* sm_mu held: U3 of the open sum's masked input (a copy), when sync r's
 * exchange may open early and is not open. */
static uint32_t *early_ids(agg_job *j, uint32_t r, size_t *k)
{
    const uint32_t *u3;
    uint32_t *ids = NULL;
    int ok;

    *k = 0;
    pthread_mutex_lock(&j->mu);
    ok = early_window_locked(j, r);
    pthread_mutex_unlock(&j->mu);
    if (!ok || j->sm == NULL || j->pw->srv == NULL ||
        fs_fedpower_server_exchange_ready(j->pw->srv)) {
        return NULL;
    }
    u3 = fs_secagg_server_set(j->sm, 3, k);
    if (u3 != NULL && *k > 0) {
        ids = malloc(*k * sizeof *ids);
    }
    if (ids != NULL) {
        memcpy(ids, u3, *k * sizeof *ids);
    }
    return ids;
}

/* Open sync r's exchange once its masked input closed. */
static void open_early(agg_job *j)
{
    struct agg_power *pw = j->pw;
    struct fs_err err = {0};
    fs_noisex_prepared *x = NULL;
    uint32_t *ids = NULL;
    size_t k = 0;
    uint32_t r;
    double t0;
    double dt;
    int due;
    int rc;

    pthread_mutex_lock(&j->mu);
    r = j->st.r;
    due = early_window_locked(j, r) && pw->x_tried != r + 1;
    if (due) {
        pw->x_tried = r + 1; /* once per sync; else the worker opens it */
    }
    pthread_mutex_unlock(&j->mu);
    if (!due) {
        return;
    }
    pthread_mutex_lock(&j->sm_mu);
    ids = early_ids(j, r, &k);
    pthread_mutex_unlock(&j->sm_mu);
    if (ids == NULL) {
        pthread_mutex_lock(&j->mu);
        if (pw->x_open != r + 1) {
            pw->x_late = r + 1; /* selector long polls answer now (409 not_ready) */
        }
        pthread_mutex_unlock(&j->mu);
        return;
    }
    /* the slow part without the lock: nothing else opens this exchange or
     * frees the server while the round waits for its sum (only the tick
     * closes rounds) */
    t0 = agg_now_mono();
    rc = fs_fedpower_server_prepare_exchange(pw->srv, ids, k, &x, &err);
    dt = agg_now_mono() - t0;
    pthread_mutex_lock(&j->sm_mu);
    if (rc == 0) {
        size_t k2 = 0;
        uint32_t *again = early_ids(j, r, &k2);
        rc = again == NULL || k2 != k || memcmp(again, ids, k * sizeof *ids) != 0
                 ? fs_err_set(&err, FS_ESTATE, "the round moved on")
                 : fs_fedpower_server_open_prepared(pw->srv, x, &err);
        x = NULL;
        free(again);
    }
    if (rc == 0) {
        rc = log_selectors(j, r, agg_now_wall(), &err);
    }
    pthread_mutex_unlock(&j->sm_mu);
    fs_noisex_prepared_free(x);
    free(ids);
    pthread_mutex_lock(&j->mu);
    pw->crypto_s += dt;
    if (rc != 0) {
        pw->x_late = r + 1; /* selector long polls answer now (409 not_ready) */
    }
    pthread_mutex_unlock(&j->mu);
    if (rc != 0) {
        fs_log_pack(FS_LOG_DEBUG, "noise exchange not opened early: it opens after unmasking",
                    "{s:s, s:i, s:s}", "job", j->id, "aggregation", (int)r, "error", err.msg);
    }
}

/* ------------------------------------------------------------ finishing ahead */

static void *precompute_main(void *arg)
{
    struct agg_power *pw = arg;
    double t0 = agg_now_mono();

    /* reads the exchange (its answers, all in), the key and fixed
     * parameters only; add_sum may run meanwhile, nothing else touches them
     * until pj_join_precompute */
    pw->pre_rc = fs_fedpower_server_exchange_precompute(pw->srv, &pw->pre_out, &pw->pre_err);
    pw->pre_s = agg_now_mono() - t0;
    return NULL;
}

/* sm_mu held: sync r's exchange is open early and answered by everyone. */
static int precompute_due(agg_job *j, uint32_t r)
{
    int ok;

    pthread_mutex_lock(&j->mu);
    ok = early_window_locked(j, r);
    pthread_mutex_unlock(&j->mu);
    return ok && j->sm != NULL && j->pw->srv != NULL && j->pw->x_logged == r + 1 &&
           j->pw->xpre == NULL && !j->pw->pre_running &&
           fs_fedpower_server_exchange_missing(j->pw->srv) == 0;
}

/* Every party answered before unmasking closed: start the decryptions and
 * the noise regeneration now, not after the sum. */
static void precompute_start(agg_job *j)
{
    struct agg_power *pw = j->pw;
    uint32_t r;
    int due;

    pthread_mutex_lock(&j->mu);
    r = j->st.r;
    due = early_window_locked(j, r) && pw->pre_tried != r + 1 && pw->x_tried == r + 1;
    pthread_mutex_unlock(&j->mu);
    if (!due) {
        return;
    }
    pthread_mutex_lock(&j->sm_mu);
    if (precompute_due(j, r)) {
        pthread_mutex_lock(&j->mu);
        pw->pre_tried = r + 1;
        pthread_mutex_unlock(&j->mu);
        pw->pre_r = r;
        pw->pre_rc = 0;
        pw->pre_out = NULL;
        pw->pre_running = pthread_create(&pw->pre_th, NULL, precompute_main, pw) == 0;
    }
    pthread_mutex_unlock(&j->sm_mu);
}

void pj_join_precompute(agg_job *j, struct agg_power *pw)
{
    if (pw == NULL || !pw->pre_running) {
        return;
    }
    pthread_join(pw->pre_th, NULL);
    pw->pre_running = 0;
    if (pw->pre_rc == 0 && pw->xpre == NULL) {
        pw->xpre = pw->pre_out;
        pw->pre_out = NULL;
    } else if (j != NULL && pw->pre_rc != 0) {
        fs_log_pack(FS_LOG_DEBUG, "noise exchange not finished ahead: after the sum",
                    "{s:s, s:i, s:s}", "job", j->id, "aggregation", (int)pw->pre_r, "error",
                    pw->pre_err.msg);
    }
    fs_fedpower_xpre_free(pw->pre_out);
    pw->pre_out = NULL;
    if (j != NULL) {
        pthread_mutex_lock(&j->mu);
        pw->crypto_s += pw->pre_s;
        pthread_mutex_unlock(&j->mu);
    }
}

void pj_tick(agg_job *j)
{
    if (j->pw == NULL || j->pw->cfg.alg != FS_FEDPOWER_UTILITY) {
        return;
    }
    open_early(j);
    precompute_start(j);
}

/* ------------------------------------------------------------ the noise_exchange round */

int pj_open_noise_round(agg_job *j, uint32_t r, const uint32_t *u3, size_t n3, double at,
                        struct fs_err *err)
{
    struct agg_power *pw = j->pw;
    int rc = pw->x_logged == r + 1 ? 0 : log_selectors(j, r, at, err);

    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    if (agg_cur_doc(j) != NULL) {
        json_object_set_new(agg_cur_doc(j), "phase",
                            json_string(fs_job_phase_name(FS_JOB_NOISE_EXCHANGE)));
    }
    agg_next_round_locked(j, FS_JOB_NOISE_EXCHANGE, u3, n3, at, 0);
    pthread_mutex_unlock(&j->mu);
    for (size_t q = 0; q < n3; q++) {
        if (fs_fedpower_server_has_response(pw->srv, u3[q])) {
            pj_mark_sent(j, u3[q]); /* answered early: complete when all did */
        }
    }
    pthread_mutex_lock(&j->mu);
    fs_jobsm_set_finishing(&j->st, 0); /* the exchange round is open from now on */
    pthread_mutex_unlock(&j->mu);
    if (!j->replaying) {
        agg_persist_state(j, NULL);
    }
    return 0;
}

/* ------------------------------------------------------------ replay */

/* sm_mu held, replaying: ev is a message of sync r's early exchange
 * (consistency or unmasking of r). */
static int early_event(const agg_job *j, const struct agg_event *ev)
{
    return ev->idx == j->st.r && j->st.r < j->pw->exchanges &&
           (j->st.phase == FS_JOB_CONSISTENCY || j->st.phase == FS_JOB_UNMASKING);
}

int pj_replay_noise(agg_job *j, const struct agg_event *ev, struct fs_err *err)
{
    int early = early_event(j, ev);
    int rc = early ? 0 : pj_replay_in_round(j, ev, FS_JOB_NOISE_EXCHANGE, err);

    if (rc == 0) {
        rc = fs_fedpower_server_add_response(j->pw->srv, ev->party, ev->body, ev->len, err);
    }
    if (rc == 0 && !early) {
        pj_mark_sent(j, ev->party);
    }
    return rc;
}

/* The exchange gets back the selectors it sent: opened early (before the
 * sum), or by the replayed worker after it. */
int pj_replay_exchange(agg_job *j, const struct agg_event *ev, struct fs_err *err)
{
    int rc;

    if (ev->len == 0) {
        return fs_err_set(err, FS_EFORMAT, "the exchange's selectors were not kept");
    }
    if (early_event(j, ev)) {
        size_t k = 0;
        const uint32_t *u3 = j->sm != NULL ? fs_secagg_server_set(j->sm, 3, &k) : NULL;
        rc = u3 == NULL
                 ? fs_err_set(err, FS_EFORMAT, "noise exchange before masked input closed")
                 : fs_fedpower_server_restore_exchange(j->pw->srv, u3, k, ev->body, ev->len, err);
    } else if (j->st.phase == FS_JOB_NOISE_EXCHANGE && ev->idx == j->st.r) {
        rc = fs_fedpower_server_restore_selectors(j->pw->srv, ev->body, ev->len, err);
    } else {
        return fs_err_set(err, FS_EFORMAT, "noise exchange %llu out of order",
                          (unsigned long long)ev->idx);
    }
    if (rc == 0) {
        pthread_mutex_lock(&j->mu);
        j->pw->x_tried = (uint32_t)ev->idx + 1;
        j->pw->x_open = (uint32_t)ev->idx + 1;
        pthread_mutex_unlock(&j->mu);
        j->pw->x_logged = (uint32_t)ev->idx + 1;
    }
    return rc;
}
