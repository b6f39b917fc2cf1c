/* The job object: its shell and chunk files, failing, the event log, the
 * round deadline and entering a round under the job's locks (see
 * jobmgr_internal.h). The rules of which message is taken when are
 * lib/proto/jobsm.h's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../api/phase.h"
#include "../../api/wire.h"
#include "crypto/ct.h"
#include "jobmgr_internal.h"
#include "net/auth.h"
#include "net/log.h"

/* An event not written yet (storage unavailable): kept in order, in memory. */
struct agg_unlogged {
    struct agg_unlogged *next;
    uint64_t seq;
    char kind[32];
    uint32_t party;
    uint64_t idx;
    double at;
    size_t len;
    uint8_t body[];
};

/* ------------------------------------------------------------ sizes and paths */

/* Words of aggregation r: secure-sum rows*cols; fedsvd N*d; fedpca samples
 * 3d+1 (mean), 3d (variance), then N*d (lib/proto/fedpca.h). */
uint64_t agg_len(const agg_job *j, uint32_t r)
{
    if (j->ops != NULL) {
        return j->ops->round_len(&j->spec, r);
    }
    if (j->fed && r + 1 < j->naggs) {
        return r == 0 ? 3 * j->spec.cols + 1 : 3 * j->spec.cols;
    }
    return j->spec.rows * j->spec.cols;
}

/* 1 when aggregation r's sum goes back to the parties (fedpca statistics). */
int agg_is_stats(const agg_job *j, uint32_t r)
{
    return j->fed && r + 1 < j->naggs;
}

/* Party's upload of the aggregation in progress (sm_mu held): one file of
 * little-endian words, chunk idx at byte 8 * idx * chunk_words. */
int agg_words_path(const agg_job *j, uint32_t party, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s/agg-%u/p%u.words", j->dir, j->st.r, party) >= cap ? -1
                                                                                            : 0;
}

/* Path of the published sum of statistics aggregation r. */
int agg_sum_path(const agg_job *j, uint32_t r, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s/result/agg-%u-sum.npy", j->dir, r) >= cap ? -1 : 0;
}

/* Remove every aggregation's chunk files and the upload temp dir. */
void agg_rm_chunks(const agg_job *j)
{
    for (uint32_t r = 0; r < j->naggs; r++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/agg-%u", j->dir, r);
        agg_rm_tree(p);
    }
    agg_rm_tree(j->tmp_dir);
}

/* ------------------------------------------------------------ chunk files */

/* Write chunk idx of party's upload into its file (and fdatasync it with
 * --fsync) before the state machine folds it: a restart replays it from
 * there, and a party that drops mid-upload is taken out of the sum with it. */
static int cs_put(void *ctx, uint32_t party, uint64_t idx, const uint64_t *y, size_t m,
                  struct fs_err *err)
{
    struct chunk_ctx *c = ctx;
    agg_job *j = c->job;
    char path[4600];
    char dir[4600];
    int rc = 0;

    if (j->replaying) {
        return 0; /* the data was read from that very file */
    }
    if (agg_words_path(j, party, path, sizeof path) != 0 ||
        (size_t)snprintf(dir, sizeof dir, "%s/agg-%u", j->dir, j->st.r) >= sizeof dir) {
        return fs_err_set(err, FS_EINVAL, "upload path too long");
    }
    rc = fs_mkdir_p(dir, err);
    if (rc != 0) {
        return rc;
    }
    /* a disk-full chunk is not folded: 503, and the party sends it again */
    return agg_write_upload_words(path, y, m, (off_t)(idx * j->chunk_words * 8), j->mgr->cfg.fsync,
                                  err);
}

static int cs_get(void *ctx, uint32_t party, uint64_t idx, uint64_t *y, size_t m,
                  struct fs_err *err)
{
    struct chunk_ctx *c = ctx;
    char path[4600];

    if (agg_words_path(c->job, party, path, sizeof path) != 0) {
        return fs_err_set(err, FS_EINVAL, "upload path too long");
    }
    return agg_read_words(path, idx * c->job->chunk_words, y, m, err);
}

/* Upload files stay until the job ends: replay after a restart reads them. */
static void cs_drop(void *ctx, uint32_t party)
{
    (void)ctx;
    (void)party;
}

/* ------------------------------------------------------------ job lifecycle */

void agg_job_free(agg_job *j)
{
    if (j == NULL) {
        return;
    }
    if (j->sj_detach != NULL) {
        j->sj_detach(j);
    }
    json_decref(j->sj_doc);
    fs_secagg_server_free(j->sm);
    if (j->ops != NULL) {
        j->ops->detach(j);
    }
    while (j->unlogged != NULL) {
        struct agg_unlogged *u = j->unlogged;
        j->unlogged = u->next;
        fs_wipe(u->body, u->len); /* shares and reveals */
        free(u);
    }
    fs_auth_free(j->auth);
    fs_jobsm_clear(&j->st);
    free(j->sizes);
    free(j->first_u3);
    json_decref(j->roster);
    json_decref(j->aggs);
    json_decref(j->result);
    pthread_mutex_destroy(&j->mu);
    pthread_mutex_destroy(&j->sm_mu);
    free(j);
}

/* fedsvd/fedpca: the job as lib/proto sees it. */
static int fed_init(agg_job *j, struct fs_err *err)
{
    for (uint32_t v = 0; v < j->n; v++) {
        j->sizes[v] = (size_t)j->spec.fed.party_sizes[v];
    }
    memset(&j->fj, 0, sizeof j->fj);
    j->fj.partition =
        j->spec.fed.partition == FS_JOB_FEATURES ? FS_FEDSVD_FEATURES : FS_FEDSVD_SAMPLES;
    j->fj.rows = (size_t)j->spec.rows;
    j->fj.cols = (size_t)j->spec.cols;
    j->fj.parties = j->n;
    j->fj.sizes = j->sizes;
    j->fj.shards = j->spec.fed.shards;
    if (fs_fedsvd_job_check(&j->fj, err) != 0) {
        return fs_err_set(err, FS_EINVAL, "%s", err->msg);
    }
    return 0;
}

/* The protocol state of a new job, opened at `created`. */
static int sm_init(agg_job *j, double created, struct fs_err *err)
{
    struct fs_jobsm_config c;

    memset(&c, 0, sizeof c);
    c.algo = j->spec.algo;
    c.parties = j->n;
    c.threshold = j->spec.threshold;
    c.aggregations = j->naggs;
    c.allow_dropouts = j->fed     ? j->spec.fed.allow_dropouts
                       : j->power ? j->spec.power.allow_dropouts
                                  : 1;
    return fs_jobsm_init(&j->st, &c, created, err);
}

/* A job shell: parameters, protocol state, directories. No secure aggregation yet. */
int agg_job_alloc(agg_mgr *m, const char *id, const struct fs_job_spec *spec, uint32_t chunk_words,
                  double created, agg_job **out, struct fs_err *err)
{
    agg_job *j = calloc(1, sizeof *j);
    uint32_t n = spec->parties;
    int rc = 0;

    *out = NULL;
    if (j == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_mutex_init(&j->sm_mu, NULL);
    j->mgr = m;
    snprintf(j->id, sizeof j->id, "%s", id);
    j->spec = *spec;
    snprintf(j->server_url, sizeof j->server_url, "%s", spec->server_url);
    j->n = n;
    j->chunk_words = chunk_words;
    j->fed = fs_algo_is_fedsvd(spec->algo);
    j->power = fs_algo_is_power(spec->algo);
    j->ops = j->power ? m->power_ops : NULL;
    if (j->power && j->ops == NULL) {
        free(j);
        return fs_err_set(err, FS_EINVAL, "algorithm \"%s\" is not supported by this server",
                          fs_algo_name(spec->algo));
    }
    j->naggs = fs_job_aggregations(spec);
    j->len = agg_len(j, 0);
    j->nchunks = (j->len + chunk_words - 1) / chunk_words;
    snprintf(j->dir, sizeof j->dir, "%s/jobs/%s", m->data_dir, id);
    snprintf(j->tmp_dir, sizeof j->tmp_dir, "%s/tmp", j->dir);
    j->sizes = calloc((size_t)n + 1, sizeof *j->sizes);
    j->aggs = json_array();
    rc = j->sizes == NULL || j->aggs == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
                                             : sm_init(j, created, err);
    for (uint32_t r = 0; rc == 0 && r < j->naggs; r++) {
        json_array_append_new(j->aggs, json_null());
    }
    if (rc == 0 && j->fed) {
        rc = fed_init(j, err);
    }

    if (rc == 0) {
        rc = fs_auth_new(&j->auth, err);
    }
    j->cfg.n = n;
    j->cfg.t = spec->threshold;
    j->cfg.aggregations = j->ops != NULL ? j->ops->secagg_aggregations(spec) : j->naggs;
    j->cfg.chunk_words = chunk_words;
    /* every active party's input required: no consistency round (secagg.h) */
    j->cfg.all_inputs = rc == 0 ? (uint32_t)j->st.all_inputs : 0;
    if (rc == 0) {
        rc = fs_job_secagg_config(spec->secagg, &j->cfg, err);
    }
    if (rc == 0) {
        rc = fs_wire_secagg_job_id(id, j->cfg.job_id, err);
    }
    if (rc != 0) {
        j->ops = NULL; /* nothing attached yet */
        agg_job_free(j);
        return rc;
    }
    j->cs.job = j;
    j->next_seq = 1;
    *out = j;
    return 0;
}

int agg_job_new_sm(agg_job *j, struct fs_err *err)
{
    struct fs_secagg_chunk_store st;
    int rc;

    st.ctx = &j->cs;
    st.put = cs_put;
    st.get = cs_get;
    st.drop = cs_drop;
    rc = fs_secagg_server_new(&j->cfg, &st, &j->sm, err);
    if (rc == 0 && j->spec.has_pins) {
        /* pinned identities: an advertisement under another key is refused */
        rc = fs_secagg_server_set_pins(
            j->sm, (const uint8_t(*)[FS_SECAGG_KEY_LEN])j->spec.party_keys, j->n, err);
        if (rc != 0) {
            fs_secagg_server_free(j->sm);
            j->sm = NULL;
            return rc;
        }
    }
    if (rc == 0) {
        /* unmasking (a PRG pass per party over the sum) on every core: the
         * job's other work waits for it */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        fs_secagg_server_set_threads(j->sm, cpus < 1 ? 1u : cpus > 8 ? 8u : (unsigned)cpus);
    }
    return rc;
}

int agg_add_digests(agg_job *j, const uint8_t (*digests)[32], struct fs_err *err)
{
    for (uint32_t v = 1; v <= j->n; v++) {
        char label[32];
        int rc;
        snprintf(label, sizeof label, "party:%u", v);
        rc = fs_auth_add_digest(j->auth, digests[v - 1], label, err);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

int agg_mgr_register(agg_mgr *m, agg_job *j, struct fs_err *err)
{
    int rc = 0;

    pthread_rwlock_wrlock(&m->lock);
    if (m->njobs == m->cap) {
        size_t ncap = m->cap == 0 ? 64 : m->cap * 2;
        agg_job **nj = realloc(m->jobs, ncap * sizeof *nj);
        if (nj == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        } else {
            m->jobs = nj;
            m->cap = ncap;
        }
    }
    if (rc == 0) {
        m->jobs[m->njobs++] = j;
    }
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

void agg_count_add(agg_mgr *m, uint64_t *field, uint64_t k)
{
    pthread_mutex_lock(&m->count_mu);
    *field += k;
    pthread_mutex_unlock(&m->count_mu);
}

void agg_wake(agg_mgr *m)
{
    pthread_mutex_lock(&m->wake_mu);
    m->woken = 1;
    pthread_cond_signal(&m->wake_cv);
    pthread_mutex_unlock(&m->wake_mu);
}

/* ------------------------------------------------------------ failing */

/* The job fails for good: sm_mu held. Frees the state machine and chunks. */
void agg_fail_job(agg_job *j, const char *reason)
{
    int now;

    pthread_mutex_lock(&j->mu);
    now = fs_jobsm_fail(&j->st, reason);
    pthread_mutex_unlock(&j->mu);
    if (!now) {
        return;
    }
    fs_log_pack(FS_LOG_WARN, "job failed", "{s:s, s:s}", "job", j->id, "reason", reason);
    if (!j->replaying) {
        agg_persist_state(j, NULL);
    }
    fs_secagg_server_free(j->sm);
    j->sm = NULL;
    agg_rm_chunks(j);
}

/* sm_mu held. After an operation on the state machine failed: an internal
 * error or an abort ends the job; a rejected message changes nothing. */
void agg_after_sm_error(agg_job *j, int rc, const struct fs_err *err)
{
    if (j->sm != NULL && fs_secagg_server_phase(j->sm) == FS_SECAGG_ABORTED) {
        agg_fail_job(j, fs_secagg_server_abort_reason(j->sm));
    } else if (agg_is_internal(rc)) {
        char reason[600];
        snprintf(reason, sizeof reason, "internal error: %s", err != NULL ? err->msg : "");
        agg_fail_job(j, reason);
    }
}

/* fedsvd/fedpca without allow_dropouts: a party missing at a round that
 * comes before its data is in the sum fails the job at once (also the power
 * methods without allow_dropouts, at any round). */
void agg_fail_no_dropouts(agg_job *j, enum fs_job_phase ph, uint32_t who, uint32_t drops)
{
    char reason[400];

    snprintf(reason, sizeof reason,
             "party %u%s did not send its %s message of aggregation %u before the round "
             "deadline; the job does not allow dropouts (allow_dropouts is false), so its "
             "result could not include every party's data",
             who, drops > 1 ? " (and others)" : "", fs_job_phase_name(ph), j->st.r);
    agg_fail_job(j, reason);
}

/* ------------------------------------------------------------ event log */

int agg_storage_wait(agg_job *j, int rc, const struct fs_err *err, unsigned *tries)
{
    if (rc != FS_ESTORAGE) {
        return 0;
    }
    if ((*tries)++ == 0) {
        fs_log_pack(FS_LOG_WARN, "cannot write a result: waiting for storage", "{s:s, s:s}", "job",
                    j->id, "error", err != NULL ? err->msg : "");
    }
    for (int i = 0; i < 10 && !j->mgr->closing; i++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return !j->mgr->closing;
}

int agg_flush_log(agg_job *j, struct fs_err *err)
{
    while (j->unlogged != NULL) {
        struct agg_unlogged *u = j->unlogged;
        int rc = agg_store_event_append(j->mgr->st, j->id, u->seq, u->kind, u->party, u->idx,
                                        u->len > 0 ? u->body : NULL, u->len, u->at, err);
        if (rc != 0) {
            return rc;
        }
        j->unlogged = u->next;
        if (j->unlogged == NULL) {
            j->unlogged_tail = NULL;
        }
        fs_wipe(u->body, u->len);
        free(u);
    }
    return 0;
}

/* Keep the event for agg_flush_log. @return 0, or -1 out of memory. */
static int keep_unlogged(agg_job *j, const char *kind, uint32_t party, uint64_t idx,
                         const void *body, size_t len, double at)
{
    struct agg_unlogged *u = malloc(sizeof *u + len);

    if (u == NULL) {
        return -1;
    }
    memset(u, 0, sizeof *u);
    u->seq = j->next_seq;
    snprintf(u->kind, sizeof u->kind, "%s", kind);
    u->party = party;
    u->idx = idx;
    u->at = at;
    u->len = len;
    if (len > 0) {
        memcpy(u->body, body, len);
    }
    if (j->unlogged_tail == NULL) {
        j->unlogged = u;
    } else {
        *j->unlogged_tail = u;
    }
    j->unlogged_tail = &u->next;
    j->next_seq++;
    return 0;
}

int agg_log_event(agg_job *j, const char *kind, uint32_t party, uint64_t idx, const void *body,
                  size_t len, double at, struct fs_err *err)
{
    int rc;

    if (j->replaying) {
        return 0;
    }
    rc = agg_flush_log(j, err);
    if (rc == 0) {
        rc = agg_store_event_append(j->mgr->st, j->id, j->next_seq, kind, party, idx, body, len, at,
                                    err);
    }
    if (rc == 0) {
        j->next_seq++;
        return 0;
    }
    /* Disk full or read-only: the state machine has taken the step; keep
     * the event in order and write it once storage is back (a restart
     * before that replays the log without it, and the parties, answered
     * 503, send again). The job goes on. */
    if (rc == FS_ESTORAGE && strlen(kind) < sizeof j->unlogged->kind &&
        keep_unlogged(j, kind, party, idx, body, len, at) == 0) {
        return 0;
    }
    /* the state machine is ahead of the log: a replay would differ */
    {
        char reason[600];
        snprintf(reason, sizeof reason, "storage error: %s", err != NULL ? err->msg : "");
        agg_fail_job(j, reason);
    }
    return rc;
}

int agg_log_json(agg_job *j, const char *kind, uint32_t party, const json_t *body, double at,
                 struct fs_err *err)
{
    char *s = json_dumps(body, JSON_COMPACT);
    int rc;

    if (s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = agg_log_event(j, kind, party, 0, s, strlen(s), at, err);
    free(s);
    return rc;
}

/* ------------------------------------------------------------ rounds */

void agg_next_round_locked(agg_job *j, enum fs_job_phase ph, const uint32_t *set, size_t k,
                           double at, int record)
{
    fs_jobsm_next_round(&j->st, ph, set, k, at, record);
    j->deadline_mono = agg_now_mono() + (double)j->spec.round_timeout_s;
}

/*
 * A round opened under sm_mu (by a close or the worker) is set up with its
 * deadline, then the server goes on with its own I/O under that lock (the
 * begin event, the job's snapshot), which can take seconds on a loaded
 * host. No party message can be taken meanwhile (each needs sm_mu), so the
 * round's clock starts again when sm_mu is let go: a party is given the
 * whole round timeout, counted from when it can be heard, and is never
 * dropped for the server's own delay.
 */
void agg_round_clock_locked(agg_job *j, enum fs_job_phase ph, uint32_t r)
{
    if (fs_jobsm_running(&j->st) && !j->st.finishing && (j->st.phase != ph || j->st.r != r)) {
        j->deadline_mono = agg_now_mono() + (double)j->spec.round_timeout_s;
    }
}

int agg_check_locked(const agg_job *j, enum fs_job_phase want, uint32_t r, uint32_t party,
                     struct fs_err *err)
{
    const struct fs_jobsm *s = &j->st;

    switch (fs_jobsm_check(s, want, r, party)) {
    case FS_JOBSM_FAILED:
        return fs_err_set(err, AGG_EABORTED, "job failed: %s", s->error);
    case FS_JOBSM_CLOSED:
        return fs_err_set(err, FS_ECONFLICT, "%s of aggregation %u is closed (job phase %s)",
                          fs_job_phase_name(want), r,
                          s->finishing && s->phase == FS_JOB_UNMASKING
                              ? fs_job_phase_name(FS_JOB_UNMASKING)
                              : fs_job_phase_name(s->phase));
    case FS_JOBSM_NOT_YET:
        return fs_err_set(err, FS_ESTATE, "not yet: job phase is %s of aggregation %u",
                          fs_job_phase_name(s->phase), s->r);
    case FS_JOBSM_NOT_IN_ROUND:
        return fs_err_set(err, FS_ECONFLICT, "party %u is not in this round: it was dropped",
                          party);
    default:
        return 0;
    }
}

/*
 * Check under mu that `party` may act in phase `want` of aggregation r now,
 * then take sm_mu and check again (the driver may have closed the round
 * meanwhile). On success sm_mu is held. party 0 skips the membership check.
 */
int agg_enter(agg_job *j, enum fs_job_phase want, uint32_t r, uint32_t party, struct fs_err *err)
{
    int rc;

    pthread_mutex_lock(&j->mu);
    rc = agg_check_locked(j, want, r, party, err);
    pthread_mutex_unlock(&j->mu);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    rc = agg_check_locked(j, want, r, party, err);
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && j->sm == NULL) {
        rc = fs_err_set(err, FS_ECONFLICT, "job is over");
    }
    if (rc != 0) {
        pthread_mutex_unlock(&j->sm_mu);
    }
    return rc;
}

void agg_leave(agg_job *j)
{
    pthread_mutex_unlock(&j->sm_mu);
    agg_wake(j->mgr);
}

/*
 * agg_enter() for a message that repeats one the party may already have had
 * accepted (docs: "an identical repeat succeeds"; a lost response must not
 * fail an honest party). When the round has closed but its messages are
 * still known, sm_mu is taken anyway, *closed is set and *closed_err keeps
 * the "is closed" answer: the caller accepts only an identical repeat
 * (changing nothing) and answers anything else with *closed_err.
 */
int agg_enter_repeat(agg_job *j, enum fs_job_phase want, uint32_t r, uint32_t party, int *closed,
                     struct fs_err *closed_err, struct fs_err *err)
{
    int rc = agg_enter(j, want, r, party, closed_err);
    int ok;

    *closed = 0;
    if (rc != FS_ECONFLICT) {
        if (rc != 0 && err != NULL) {
            *err = *closed_err;
        }
        return rc;
    }
    pthread_mutex_lock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    ok = fs_jobsm_repeatable(&j->st, want, r);
    pthread_mutex_unlock(&j->mu);
    if (!ok || j->sm == NULL || !fs_jobsm_secagg_closed(j->sm, want)) {
        pthread_mutex_unlock(&j->sm_mu);
        if (err != NULL) {
            *err = *closed_err;
        }
        return rc;
    }
    *closed = 1;
    return 0;
}

/* The answer to a message for a closed round: 0 (an identical repeat: the
 * state machine or the job's record said so), else the "is closed" error. */
int agg_closed_verdict(int rc, const struct fs_err *closed_err, struct fs_err *err)
{
    if (rc == 0) {
        return 0;
    }
    if (err != NULL) {
        *err = *closed_err;
    }
    return closed_err->code;
}

int agg_exists(const agg_job *j, uint32_t r, struct fs_err *err)
{
    if (r >= j->naggs) {
        return fs_err_set(err, FS_ENOTFOUND, "aggregation %u does not exist (this job has %u)", r,
                          j->naggs);
    }
    return 0;
}
