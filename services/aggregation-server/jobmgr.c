/* The job manager: the registry of jobs, creating one, and the round
 * driver (deadlines, closing rounds). See jobmgr.h; the job's internals are
 * in jobmgr_internal.h. */
#include "jobmgr.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crypto/ct.h"
#include "jobmgr_internal.h"
#include "net/auth.h"
#include "net/log.h"
#include "net/storage.h"

#define MAX_JOBS_STORED 100000 /* registry cap, all states */

int agg_job_auth(agg_job *j, const char *token, size_t len, uint32_t *party, struct fs_err *err)
{
    char label[FS_AUTH_LABEL_MAX];
    unsigned long v;
    char *end = NULL;
    int rc = fs_auth_check_token(j->auth, token, len, label, err);

    *party = 0;
    if (rc != 0) {
        return fs_err_set(err, FS_EAUTH, "token is not valid for this job");
    }
    if (strncmp(label, "party:", 6) != 0) {
        return fs_err_set(err, FS_EAUTH, "token is not valid for this job");
    }
    v = strtoul(label + 6, &end, 10);
    if (end == label + 6 || *end != '\0' || v < 1 || v > j->n) {
        return fs_err_set(err, FS_EINTERNAL, "bad token label");
    }
    *party = (uint32_t)v;
    return 0;
}

/* ------------------------------------------------------------ creating jobs */

static uint64_t running_jobs(agg_mgr *m)
{
    uint64_t k = 0;

    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = 0; i < m->njobs; i++) {
        pthread_mutex_lock(&m->jobs[i]->mu);
        k += (uint64_t)fs_jobsm_running(&m->jobs[i]->st);
        pthread_mutex_unlock(&m->jobs[i]->mu);
    }
    pthread_rwlock_unlock(&m->lock);
    return k;
}

static json_t *invitation_json(const agg_job *j, uint32_t party, const char *token)
{
    struct fs_invitation inv;
    json_t *o;

    memset(&inv, 0, sizeof inv);
    inv.version = FS_INVITATION_VERSION;
    snprintf(inv.job_id, sizeof inv.job_id, "%s", j->id);
    snprintf(inv.job_url, sizeof inv.job_url, "%s/v1/jobs/%s", j->server_url, j->id);
    inv.party = party;
    snprintf(inv.token, sizeof inv.token, "%s", token);
    snprintf(inv.algorithm, sizeof inv.algorithm, "%s", fs_algo_name(j->spec.algo));
    inv.parties = j->n;
    inv.threshold = j->spec.threshold;
    fs_job_party_shape(&j->spec, party, &inv.rows, &inv.cols);
    inv.has_pins = j->spec.has_pins; /* every party learns every pin */
    memcpy(inv.party_keys, j->spec.party_keys, sizeof inv.party_keys);
    if (j->fed) {
        /* masking_url and maskset are added by whoever creates the mask
         * set; the keys go only to requests signed by each party's pinned
         * identity: this server never holds a credential for masks */
        inv.is_fedsvd = 1;
        inv.global_rows = j->spec.rows;
        inv.global_cols = j->spec.cols;
        inv.fed = j->spec.fed;
    }
    if (j->power) {
        inv.is_fedpower = 1;
        inv.power = j->spec.power;
    }
    o = fs_invitation_encode(&inv);
    fs_invitation_wipe(&inv);
    return o;
}

/* May the server take one more job with this spec? Completes a power
 * method's spec (z0_seed) and refuses weak privacy. */
static int admit(agg_mgr *m, struct fs_job_spec *spec, struct fs_err *err)
{
    int full;

    if (fs_algo_is_power(spec->algo)) {
        if (m->power_ops == NULL) {
            return fs_err_set(err, FS_EINVAL,
                              "algorithm \"%s\" is not supported by this server yet",
                              fs_algo_name(spec->algo));
        }
        int rc = m->power_ops->prepare_spec(spec, err);
        if (rc != 0) {
            return rc;
        }
    } else if (spec->rows * spec->cols > m->cfg.max_elements) {
        return fs_err_set(err, FS_EINVAL, "shape: over the server's limit of %llu elements",
                          (unsigned long long)m->cfg.max_elements);
    }
    if (running_jobs(m) >= m->cfg.max_jobs) {
        return fs_err_set(err, AGG_ETOOMANY, "%u jobs are running, the server's limit",
                          m->cfg.max_jobs);
    }
    pthread_rwlock_rdlock(&m->lock);
    full = m->njobs >= MAX_JOBS_STORED;
    pthread_rwlock_unlock(&m->lock);
    if (full) {
        return fs_err_set(err, AGG_ETOOMANY, "the server holds %d jobs, its limit",
                          MAX_JOBS_STORED);
    }
    return 0;
}

/* n fresh party tokens and their digests. */
static int make_tokens(uint32_t n, char (*tokens)[FS_AUTH_TOKEN_GEN_LEN + 1],
                       uint8_t (*digests)[32], struct fs_err *err)
{
    int rc = 0;

    for (uint32_t i = 0; i < n && rc == 0; i++) {
        rc = fs_auth_token_generate(tokens[i], err);
        if (rc == 0) {
            rc = fs_auth_digest(tokens[i], strlen(tokens[i]), digests[i], err);
        }
    }
    return rc;
}

/* The new job with its tokens, protocol state and (power methods) the
 * method's server, open for advertisements until the join timeout. */
static int build_job(agg_mgr *m, const char *id, const struct fs_job_spec *spec,
                     const uint8_t (*digests)[32], agg_job **out, struct fs_err *err)
{
    double created = agg_now_wall();
    agg_job *j = NULL;
    int rc = agg_job_alloc(m, id, spec, m->cfg.chunk_words, created, &j, err);

    if (rc == 0) {
        rc = agg_shard_attach(j, 1, err);
    }
    if (rc == 0) {
        rc = agg_add_digests(j, digests, err);
    }
    if (rc == 0) {
        rc = agg_job_new_sm(j, err);
    }
    if (rc == 0 && j->ops != NULL) {
        rc = j->ops->attach(j, 1, err); /* fedpower-utility: Paillier key generation */
    }
    if (rc != 0) {
        agg_job_free(j);
        return rc;
    }
    j->created_unix = created;
    agg_iso_time(created, j->created_at);
    j->deadline_mono = agg_now_mono() + (double)spec->join_timeout_s;
    *out = j;
    return 0;
}

/* Store the new job's row; {"job": Job, "invitations": [Invitation]}. */
static int insert_job(agg_mgr *m, agg_job *j, char (*tokens)[FS_AUTH_TOKEN_GEN_LEN + 1],
                      const uint8_t (*digests)[32], json_t **out, struct fs_err *err)
{
    json_t *sj = fs_job_spec_encode(&j->spec);
    char *spec_s = sj != NULL ? json_dumps(sj, JSON_COMPACT) : NULL;
    json_t *invs = NULL;
    int rc;

    json_decref(sj);
    *out = NULL;
    if (spec_s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = agg_store_job_insert(m->st, j->id, j->created_at, j->created_unix, spec_s, j->chunk_words,
                              digests, j->n, err);
    free(spec_s);
    if (rc != 0) {
        return rc;
    }
    invs = json_array();
    for (uint32_t v = 1; invs != NULL && v <= j->n; v++) {
        json_array_append_new(invs, invitation_json(j, v, tokens[v - 1]));
    }
    *out = json_pack("{s:o, s:o}", "job", agg_job_status(j), "invitations", invs);
    return *out == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
}

int agg_job_create(agg_mgr *m, const struct fs_job_spec *spec_in, const char *server_url,
                   json_t **out, struct fs_err *err)
{
    struct fs_job_spec spec = *spec_in;
    char id[FS_JOB_ID_MAX + 1];
    char(*tokens)[FS_AUTH_TOKEN_GEN_LEN + 1] = NULL;
    uint8_t(*digests)[32] = NULL;
    agg_job *j = NULL;
    json_t *res = NULL;
    uint32_t n = spec.parties;
    int windows = 0; /* made on the peers: deleted again if the job is not created */
    int rc;

    *out = NULL;
    rc = admit(m, &spec, err);
    if (rc != 0) {
        return rc;
    }
    snprintf(spec.server_url, sizeof spec.server_url, "%s", server_url);
    rc = fs_job_id_generate(id, err);
    if (rc != 0) {
        return rc;
    }
    tokens = calloc(n, sizeof *tokens);
    digests = calloc(n, sizeof *digests);
    rc = tokens == NULL || digests == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
                                           : make_tokens(n, tokens, digests, err);
    if (rc == 0) {
        rc = build_job(m, id, &spec, (const uint8_t(*)[32])digests, &j, err);
    }
    if (rc == 0) {
        /* sharded: the peers' windows first (nothing is stored when they fail) */
        rc = agg_shard_create_windows(m, id, &spec, (const uint8_t(*)[32])digests, err);
        windows = rc == 0;
    }
    if (rc == 0) {
        rc = insert_job(m, j, tokens, (const uint8_t(*)[32])digests, &res, err);
    }
    if (rc == 0) {
        rc = agg_mgr_register(m, j, err);
    }
    if (rc != 0) {
        goto out;
    }
    agg_persist_state(j, NULL);
    fs_log_pack(FS_LOG_INFO, "job created", "{s:s, s:s, s:i, s:i, s:I, s:I}", "job", id,
                "algorithm", fs_algo_name(spec.algo), "parties", (int)n, "threshold",
                (int)spec.threshold, "rows", (json_int_t)spec.rows, "cols", (json_int_t)spec.cols);
    *out = res;
    res = NULL;
    j = NULL;
out:
    if (windows && j != NULL) {
        agg_shard_forget_windows(j);
    }
    if (tokens != NULL) {
        fs_wipe(tokens, (size_t)n * sizeof *tokens);
    }
    free(tokens);
    free(digests);
    json_decref(res);
    agg_job_free(j);
    return rc;
}

/* ------------------------------------------------------------ registry */

agg_job *agg_mgr_find(agg_mgr *m, const char *id)
{
    agg_job *j = NULL;

    if (!fs_job_id_valid(id)) {
        return NULL;
    }
    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = 0; i < m->njobs; i++) {
        if (strcmp(m->jobs[i]->id, id) == 0) {
            j = m->jobs[i];
            break;
        }
    }
    pthread_rwlock_unlock(&m->lock);
    return j;
}

json_t *agg_mgr_list(agg_mgr *m, const char *state_filter)
{
    json_t *arr = json_array();

    if (arr == NULL) {
        return NULL;
    }
    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = m->njobs; i-- > 0;) {
        json_t *s = agg_job_status(m->jobs[i]);
        if (s == NULL) {
            continue;
        }
        if (state_filter != NULL &&
            strcmp(json_string_value(json_object_get(s, "state")), state_filter) != 0) {
            json_decref(s);
            continue;
        }
        json_array_append_new(arr, s);
    }
    pthread_rwlock_unlock(&m->lock);
    return json_pack("{s:o}", "jobs", arr);
}

void agg_mgr_counts(agg_mgr *m, struct agg_counts *c)
{
    pthread_mutex_lock(&m->count_mu);
    *c = m->counts;
    pthread_mutex_unlock(&m->count_mu);
    c->running = c->done = c->failed = 0;
    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = 0; i < m->njobs; i++) {
        agg_job *j = m->jobs[i];
        pthread_mutex_lock(&j->mu);
        if (j->st.phase == FS_JOB_DONE) {
            c->done++;
        } else if (j->st.phase == FS_JOB_FAILED) {
            c->failed++;
        } else {
            c->running++;
        }
        pthread_mutex_unlock(&j->mu);
    }
    pthread_rwlock_unlock(&m->lock);
}

int agg_mgr_new(const struct agg_mgr_config *cfg, agg_store *st, agg_mgr **out, struct fs_err *err)
{
    agg_mgr *m = calloc(1, sizeof *m);

    *out = NULL;
    if (m == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    m->cfg = *cfg;
    snprintf(m->data_dir, sizeof m->data_dir, "%s", cfg->data_dir);
    m->cfg.data_dir = m->data_dir;
    m->st = st;
    pthread_rwlock_init(&m->lock, NULL);
    pthread_mutex_init(&m->wake_mu, NULL);
    pthread_cond_init(&m->wake_cv, NULL);
    pthread_mutex_init(&m->count_mu, NULL);
    agg_shard_gc_start(m);
    *out = m;
    return 0;
}

void agg_mgr_set_power_ops(agg_mgr *m, const struct agg_algo_ops *ops)
{
    m->power_ops = ops;
}

void agg_mgr_free(agg_mgr *m)
{
    if (m == NULL) {
        return;
    }
    m->closing = 1; /* a worker waiting for storage gives up */
    for (size_t i = 0; i < m->njobs; i++) {
        agg_job *j = m->jobs[i];
        int join;
        pthread_mutex_lock(&j->mu);
        join = j->worker_running;
        j->worker_running = 0;
        pthread_mutex_unlock(&j->mu);
        if (join) {
            pthread_join(j->worker, NULL);
        }
    }
    for (size_t i = 0; i < m->njobs; i++) {
        agg_job_free(m->jobs[i]);
    }
    agg_shard_gc_stop(m); /* after the jobs' pollers, which record deletions */
    free(m->jobs);
    pthread_rwlock_destroy(&m->lock);
    pthread_mutex_destroy(&m->wake_mu);
    pthread_cond_destroy(&m->wake_cv);
    pthread_mutex_destroy(&m->count_mu);
    free(m);
}

/* ------------------------------------------------------------ the round driver */

void agg_mgr_wait(agg_mgr *m, unsigned ms)
{
    struct timespec ts;

    agg_deadline_in(&ts, ms);
    pthread_mutex_lock(&m->wake_mu);
    while (!m->woken) {
        if (pthread_cond_timedwait(&m->wake_cv, &m->wake_mu, &ts) != 0) {
            break;
        }
    }
    m->woken = 0;
    pthread_mutex_unlock(&m->wake_mu);
}

/* Storage unavailable (disk full, read-only): write what waits once it is
 * back, and keep the round open meanwhile, since the parties' messages are
 * answered 503 and come again. */
static void tick_storage(agg_job *j)
{
    struct fs_err err = {0};
    char *res = NULL;
    int dirty;

    if (pthread_mutex_trylock(&j->sm_mu) == 0) { /* busy: a request is at it */
        if (j->unlogged != NULL) {
            (void)agg_flush_log(j, &err);
        }
        pthread_mutex_unlock(&j->sm_mu);
    }
    pthread_mutex_lock(&j->mu);
    dirty = j->persist_dirty;
    if (dirty && j->result != NULL) {
        res = json_dumps(j->result, JSON_COMPACT);
        dirty = res != NULL;
    }
    if (fs_storage_degraded() && fs_jobsm_running(&j->st)) {
        double hold = agg_now_mono() + (double)j->spec.round_timeout_s;
        if (j->deadline_mono < hold) {
            j->deadline_mono = hold;
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (dirty) {
        agg_persist_state(j, res);
    }
    free(res);
}

static void tick_close(agg_job *j, int by_deadline);

static void tick_job(agg_job *j)
{
    int due = 0;
    int by_deadline = 0;
    int join = 0;

    tick_storage(j);
    agg_shard_tick(j);
    pthread_mutex_lock(&j->mu);
    if (j->worker_running && j->worker_exited) {
        join = 1;
        j->worker_running = 0;
    }
    if (fs_jobsm_running(&j->st) && !j->st.finishing) {
        if (fs_jobsm_round_complete(&j->st) && agg_shard_round_ready(j)) {
            due = 1;
        } else if (agg_now_mono() >= j->deadline_mono) {
            due = 1;
            by_deadline = 1;
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (join) {
        pthread_join(j->worker, NULL);
    }
    if (due) {
        tick_close(j, by_deadline);
    }
    if (j->ops != NULL && j->ops->tick != NULL) {
        j->ops->tick(j); /* fedpower-utility: the noise exchange opens once masked input closed */
    }
}

/* The open round of j is complete or past its deadline: close it. */
static void tick_close(agg_job *j, int by_deadline)
{
    struct fs_err err = {0};
    enum fs_job_phase ph;
    uint32_t r;
    int due;

    pthread_mutex_lock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    /* again: a worker may have opened the next round meanwhile */
    due = fs_jobsm_running(&j->st) && !j->st.finishing && j->sm != NULL &&
          ((fs_jobsm_round_complete(&j->st) && agg_shard_round_ready(j)) ||
           agg_now_mono() >= j->deadline_mono);
    ph = j->st.phase;
    r = j->st.r;
    pthread_mutex_unlock(&j->mu);
    if (due) {
        (void)agg_close_round(j, agg_now_wall(), by_deadline, &err);
        pthread_mutex_lock(&j->mu);
        agg_round_clock_locked(j, ph, r); /* the next round's clock starts as sm_mu goes */
        pthread_mutex_unlock(&j->mu);
    }
    pthread_mutex_unlock(&j->sm_mu);
}

void agg_mgr_tick(agg_mgr *m)
{
    agg_job **snap = NULL;
    size_t n;

    pthread_rwlock_rdlock(&m->lock);
    n = m->njobs;
    if (n > 0) {
        snap = malloc(n * sizeof *snap);
        if (snap != NULL) {
            memcpy(snap, m->jobs, n * sizeof *snap);
        }
    }
    pthread_rwlock_unlock(&m->lock);
    for (size_t i = 0; snap != NULL && i < n; i++) {
        tick_job(snap[i]);
    }
    free(snap);
}
