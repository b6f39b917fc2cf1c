/* Loading jobs after a start: finished ones from their snapshot, running
 * ones by replaying their events into a fresh state (lib/proto/jobsm.h
 * applies each; this file decodes them and reads uploads back). See
 * jobmgr.h. Nothing else runs while this does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../api/phase.h"
#include "../../api/wire.h"
#include "crypto/ct.h"
#include "crypto/sha256.h"
#include "jobmgr_internal.h"
#include "net/log.h"

/* ------------------------------------------------------------ replay */

/* A party's message event: decode it into msg (payload owned by the
 * caller's buffers, freed by msg_free). */
struct decoded {
    struct fs_jobsm_msg msg;
    struct fs_secagg_adv adv;
    int have_adv;
    struct fs_secagg_share_ct *cts;
    struct fs_secagg_reveal *rv;
    uint64_t *words;
};

static void decoded_free(struct decoded *d)
{
    if (d->have_adv) {
        fs_secagg_adv_clear(&d->adv);
    }
    fs_secagg_share_cts_free(d->cts, d->msg.kind == FS_JOBSM_SHARES ? d->msg.k : 0);
    if (d->rv != NULL) {
        fs_wipe(d->rv, d->msg.k * sizeof *d->rv);
    }
    free(d->rv);
    free(d->words);
}

/* The words of a masked-chunk event, read back from the party's upload file. */
static int read_chunk(agg_job *j, const struct agg_event *ev, struct decoded *d, struct fs_err *err)
{
    uint64_t cw = j->chunk_words;
    uint64_t left = ev->idx < j->nchunks ? j->len - ev->idx * cw : 0;
    size_t m = (size_t)(left < cw ? left : cw);
    char path[4600];
    uint8_t h[32];
    int rc;

    d->words = malloc((m == 0 ? 1 : m) * sizeof *d->words);
    if (d->words == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = m == 0 || agg_words_path(j, ev->party, path, sizeof path) != 0
             ? fs_err_set(err, FS_EFORMAT, "event %llu: bad chunk", (unsigned long long)ev->seq)
             : agg_read_words(path, ev->idx * cw, d->words, m, err);
    if (rc == 0 && ev->len == 32) { /* a log from before uploads went unhashed */
        rc = fs_sha256(h, d->words, m * sizeof *d->words, err);
        if (rc == 0 && !fs_ct_eq(h, ev->body, 32)) {
            rc = fs_err_set(err, FS_EIO, "chunk %llu of party %u changed on disk",
                            (unsigned long long)ev->idx, ev->party);
        }
    }
    d->msg.idx = ev->idx;
    d->msg.words = d->words;
    d->msg.m = m;
    return rc;
}

static int decode_msg(agg_job *j, enum fs_jobsm_event kind, const struct agg_event *ev,
                      const json_t *body, struct decoded *d, struct fs_err *err)
{
    struct fs_jobsm_msg *msg = &d->msg;
    int in_range = ev->party >= 1 && ev->party <= j->n;
    int rc;

    msg->party = ev->party;
    switch (kind) {
    case FS_JOBSM_EV_ADV:
        msg->kind = FS_JOBSM_ADV;
        rc = fs_wire_adv_decode(body, &d->adv, &msg->has_exp, &msg->exp, err);
        d->have_adv = rc == 0;
        msg->adv = &d->adv;
        return rc;
    case FS_JOBSM_EV_SHARES:
        msg->kind = FS_JOBSM_SHARES;
        rc = fs_wire_shares_decode(body, 0, ev->party, fs_secagg_share_ct_len(&j->cfg), j->n,
                                   &d->cts, &msg->k, err);
        msg->cts = d->cts;
        return rc;
    case FS_JOBSM_EV_REVEALS:
        msg->kind = FS_JOBSM_REVEALS;
        rc = fs_wire_reveals_decode(body, j->n, &d->rv, &msg->k, err);
        msg->rv = d->rv;
        return rc;
    case FS_JOBSM_EV_MASKED:
        msg->kind = FS_JOBSM_MASKED;
        return read_chunk(j, ev, d, err);
    case FS_JOBSM_EV_SIG:
        msg->kind = FS_JOBSM_SIG;
        msg->bytes = ev->body;
        return ev->len != FS_SECAGG_SIG_LEN
                   ? fs_err_set(err, FS_EFORMAT, "event %llu: bad signature",
                                (unsigned long long)ev->seq)
                   : 0;
    case FS_JOBSM_EV_EXP:
        msg->kind = FS_JOBSM_EXP;
        msg->bytes = ev->body;
        return ev->len != FS_FEDSVD_SEALED_EXP_LEN || !in_range
                   ? fs_err_set(err, FS_EFORMAT, "event %llu: bad exponent",
                                (unsigned long long)ev->seq)
                   : 0;
    default:
        msg->kind = FS_JOBSM_PUBEXP;
        rc = in_range ? fs_jobsm_pubexp_parse(ev->body, ev->len, &msg->exp, err) : FS_EFORMAT;
        return rc != 0 ? fs_err_set(err, FS_EFORMAT, "event %llu: bad public exponent",
                                    (unsigned long long)ev->seq)
                       : 0;
    }
}

/* Replay a party's message through the same path as when it came in. */
static int replay_msg(agg_job *j, enum fs_jobsm_event kind, const struct agg_event *ev,
                      const json_t *body, struct fs_err *err)
{
    struct decoded d;
    int rc;

    memset(&d, 0, sizeof d);
    rc = decode_msg(j, kind, ev, body, &d, err);
    if (rc == 0) {
        rc = agg_apply(j, &d.msg, body, ev->at, err);
    }
    decoded_free(&d);
    return rc;
}

/* "begin" of fedsvd/fedpca aggregation r (after the previous one's sum). */
static int replay_begin_fed(agg_job *j, const struct agg_event *ev, const json_t *body,
                            struct fs_err *err)
{
    json_t *rv = json_object_get(body, "r");
    json_int_t r = json_is_integer(rv) ? json_integer_value(rv) : -1;
    int finish_first = 0;
    int rc = fs_jobsm_replay_begin(&j->st, (int64_t)r, &finish_first, err);

    if (rc != 0) {
        return fs_err_set(err, FS_EFORMAT, "event %llu: %s", (unsigned long long)ev->seq, err->msg);
    }
    if (finish_first) {
        rc = agg_finish_stats(j, ev->at, err);
    }
    return rc == 0 ? agg_begin_fed(j, (uint32_t)r, ev->at, err) : rc;
}

/* "begin" of the secure sum, with the fixed point chosen then. */
static int replay_begin_sum(agg_job *j, const struct agg_event *ev, const json_t *body,
                            struct fs_err *err)
{
    struct fs_fixedpt fp;
    json_t *b = json_object_get(body, "bound");
    json_t *f = json_object_get(body, "frac_bits");
    json_t *s = json_object_get(body, "summands");

    if (!json_is_number(b) || !json_is_integer(f) || !json_is_integer(s)) {
        return fs_err_set(err, FS_EFORMAT, "event %llu: bad begin", (unsigned long long)ev->seq);
    }
    fp.bound = json_number_value(b);
    fp.frac_bits = (int)json_integer_value(f);
    fp.summands = (unsigned)json_integer_value(s);
    return agg_begin_sum(j, &fp, ev->at, err);
}

static int replay_event(void *ctx, const struct agg_event *ev, struct fs_err *err)
{
    agg_job *j = ctx;
    enum fs_jobsm_event kind;
    enum fs_job_phase ph = j->st.phase;
    json_t *body = NULL;
    int rc;

    j->next_seq = ev->seq + 1;
    if (j->ops != NULL && j->ops->replay != NULL) {
        int handled = 0;
        rc = j->ops->replay(j, ev, &handled, err);
        if (rc != 0 || handled) {
            if (rc != 0) {
                fs_err_prefix(err, "event %llu (%s): ", (unsigned long long)ev->seq, ev->kind);
            }
            return rc;
        }
    }
    if (j->sm == NULL) {
        return fs_err_set(err, FS_ESTATE, "event %llu after the job ended",
                          (unsigned long long)ev->seq);
    }
    if (fs_jobsm_event_parse(ev->kind, &kind) != 0) {
        return fs_err_set(err, FS_EFORMAT, "unknown event kind \"%.32s\"", ev->kind);
    }
    if (kind == FS_JOBSM_EV_ADV || kind == FS_JOBSM_EV_SHARES || kind == FS_JOBSM_EV_REVEALS ||
        kind == FS_JOBSM_EV_BEGIN) {
        json_error_t je;
        body = json_loadb(ev->body, ev->len, JSON_REJECT_DUPLICATES, &je);
        if (body == NULL) {
            return fs_err_set(err, FS_EFORMAT, "event %llu: bad JSON", (unsigned long long)ev->seq);
        }
    }
    switch (kind) {
    case FS_JOBSM_EV_CLOSE:
        rc = agg_shard_replay_close(j, ev->body, ev->len, err);
        if (rc == 0) {
            rc = agg_close_round(j, ev->at, 0, err);
        }
        if (rc == 0) {
            fs_jobsm_replay_closed(&j->st, ph);
        }
        if (rc == 0 && j->ops != NULL && fs_jobsm_running(&j->st) &&
            (ph == FS_JOB_UNMASKING || ph == FS_JOB_NOISE_EXCHANGE || ph == FS_JOB_PLAIN_UPLOAD)) {
            /* the worker's part of this round runs before the next event
             * (or on the worker after the replay) */
            pthread_mutex_lock(&j->mu);
            fs_jobsm_set_finishing(&j->st, 1);
            pthread_mutex_unlock(&j->mu);
        }
        break;
    case FS_JOBSM_EV_BEGIN:
        rc = j->fed ? replay_begin_fed(j, ev, body, err) : replay_begin_sum(j, ev, body, err);
        break;
    case FS_JOBSM_EV_DONE:
        /* The end was logged but the server stopped before it stored the
         * job's state and result: the replay ends in the last unmasking as
         * before it, and the worker (load_job) finishes the job again. */
        fs_log_pack(FS_LOG_INFO, "job's end logged but not stored: finishing it again",
                    "{s:s, s:I}", "job", j->id, "event", (json_int_t)ev->seq);
        rc = 0;
        break;
    default:
        rc = replay_msg(j, kind, ev, body, err);
        break;
    }
    json_decref(body);
    if (rc != 0) {
        fs_err_prefix(err, "event %llu (%s): ", (unsigned long long)ev->seq, ev->kind);
    }
    return rc;
}

/* ------------------------------------------------------------ snapshots */

/* The bytes by phase of a persisted Job document. */
static void restore_phase_bytes(agg_job *j, const json_t *job)
{
    const json_t *by = json_object_get(job, "bytes_by_phase");

    j->bytes_in = (uint64_t)json_integer_value(json_object_get(job, "bytes_in"));
    j->bytes_out = (uint64_t)json_integer_value(json_object_get(job, "bytes_out"));
    for (int t = 0; t < FS_JOB_NTIMED; t++) {
        const json_t *x = json_object_get(by, fs_job_timing_name((enum fs_job_phase)t));
        j->phase_in[t] = (uint64_t)json_integer_value(json_object_get(x, "in"));
        j->phase_out[t] = (uint64_t)json_integer_value(json_object_get(x, "out"));
    }
}

/* The party sets, timings and counters of a persisted Job document. */
static void restore_job_doc(agg_job *j, const json_t *job)
{
    json_int_t r = json_integer_value(json_object_get(job, "aggregation"));
    size_t i;
    json_t *v;

    json_array_foreach(json_object_get(job, "present"), i, v)
    {
        json_int_t p = json_integer_value(v);
        if (p >= 1 && p <= (json_int_t)j->n) {
            fs_jobsm_restore_party(&j->st, (uint32_t)p, 1, 0);
        }
    }
    json_array_foreach(json_object_get(job, "dropped"), i, v)
    {
        json_int_t p = json_integer_value(v);
        if (p >= 1 && p <= (json_int_t)j->n) {
            fs_jobsm_restore_party(&j->st, (uint32_t)p, 0, 1);
        }
    }
    for (int t = 0; t < FS_JOB_NTIMED; t++) {
        enum fs_job_phase ph = (enum fs_job_phase)t;
        json_t *x = json_object_get(json_object_get(job, "timings"), fs_job_timing_name(ph));
        if (json_is_number(x)) {
            fs_jobsm_restore_timing(&j->st, ph, json_number_value(x));
        }
    }
    restore_phase_bytes(j, job);
    if (r >= 0 && r < (json_int_t)j->naggs) {
        j->st.r = (uint32_t)r;
    }
}

/* A job from its snapshot (a job that ended, or a power-method job that
 * cannot resume). */
static void apply_snapshot(agg_job *j, const char *snap, const char *result)
{
    json_error_t je;
    json_t *o = snap != NULL ? json_loads(snap, 0, &je) : NULL;
    json_t *job = json_object_get(o, "job");
    json_t *a;

    if (job != NULL) {
        restore_job_doc(j, job);
    }
    a = json_object_get(o, "aggregation_docs");
    if (json_is_array(a) && json_array_size(a) == j->naggs) {
        json_decref(j->aggs);
        j->aggs = json_deep_copy(a);
    } else if (json_is_object(json_object_get(o, "aggregation"))) {
        json_array_set(j->aggs, 0, json_object_get(o, "aggregation")); /* older snapshots */
    }
    if (result != NULL) {
        j->result = json_loads(result, 0, &je);
    }
    json_decref(o);
}

/* A job stored by an earlier version was accepted under the rules of its
 * day: one without pins ran trusting the keys the server relays, one with a
 * threshold below a majority was allowed then. Keep loading it (with a
 * warning) rather than dropping a running job on an upgrade. */
static void grandfather_spec(json_t *sj, const char *id)
{
    json_int_t n = json_integer_value(json_object_get(sj, "parties"));
    json_t *t = json_object_get(sj, "threshold");

    if (json_object_get(sj, "party_keys") == NULL &&
        json_object_get(sj, "allow_unpinned") == NULL) {
        json_object_set_new(sj, "allow_unpinned", json_true());
        fs_log_pack(FS_LOG_WARN, "job stored without pinned identities: loaded as unpinned",
                    "{s:s}", "job", id);
    }
    if (json_is_integer(t) && json_integer_value(t) < n / 2 + 1 &&
        json_object_get(sj, "allow_low_threshold") == NULL) {
        json_object_set_new(sj, "allow_low_threshold", json_true());
        fs_log_pack(FS_LOG_WARN, "job stored with a threshold below a majority: loaded as allowed",
                    "{s:s}", "job", id);
    }
    /* stored before the secagg field: every job then masked with all parties */
    if (json_object_get(sj, "secagg") == NULL) {
        json_object_set_new(sj, "secagg", json_string("full"));
    }
}

/* ------------------------------------------------------------ loading */

/* The spec of a stored job row (0), or 1 when the row is skipped (logged). */
static int row_spec(const struct agg_job_row *row, struct fs_job_spec *spec)
{
    struct fs_err jerr = {0};
    json_error_t je;
    json_t *sj = json_loads(row->spec, 0, &je);
    int rc;

    if (!fs_job_id_valid(row->id)) {
        json_decref(sj);
        fs_log(FS_LOG_ERROR, "skipping a job row with a bad id", NULL);
        return 1;
    }
    if (json_is_object(sj)) {
        grandfather_spec(sj, row->id);
    }
    rc = sj == NULL ? fs_err_set(&jerr, FS_EFORMAT, "bad spec JSON")
                    : fs_job_spec_decode(sj, UINT64_MAX / 4, spec, &jerr);
    json_decref(sj);
    if (rc == 0 && (row->chunk_words < 1 || row->chunk_words > (1u << 22))) {
        rc = fs_err_set(&jerr, FS_EFORMAT, "bad chunk_words");
    }
    if (rc != 0) {
        fs_log_pack(FS_LOG_ERROR, "skipping a job that does not load", "{s:s, s:s}", "job", row->id,
                    "error", jerr.msg);
        return 1;
    }
    return 0;
}

/* The party token digests of a job from the store (logged when missing). */
static int load_tokens(agg_mgr *m, agg_job *j)
{
    struct fs_err jerr = {0};
    uint8_t(*digests)[32] = calloc(j->n, sizeof *digests);
    int rc = digests == NULL ? fs_err_set(&jerr, FS_ENOMEM, "out of memory")
                             : agg_store_tokens_load(m->st, j->id, j->n, digests, &jerr);

    if (rc == 0) {
        rc = agg_add_digests(j, (const uint8_t(*)[32])digests, &jerr);
    }
    free(digests);
    if (rc != 0) {
        fs_log_pack(FS_LOG_ERROR, "skipping a job without tokens", "{s:s, s:s}", "job", j->id,
                    "error", jerr.msg);
    }
    return rc;
}

/* Rebuild a running job by replaying its events; a replay that fails fails
 * the job ("cannot resume after restart"). */
static void resume(agg_mgr *m, agg_job *j, const char *status)
{
    struct fs_err jerr = {0};
    json_error_t je;
    json_t *snapj = status != NULL ? json_loads(status, 0, &je) : NULL;
    int rc;

    restore_phase_bytes(j, json_object_get(snapj, "job"));
    json_decref(snapj);
    rc = agg_job_new_sm(j, &jerr);
    if (rc == 0) {
        j->replaying = 1;
        pthread_mutex_lock(&j->sm_mu);
        rc = agg_store_events_load(m->st, j->id, replay_event, j, &jerr);
        pthread_mutex_unlock(&j->sm_mu);
        j->replaying = 0;
    }
    agg_rm_tree(j->tmp_dir);
    if (rc != 0 || j->st.phase == FS_JOB_FAILED) {
        char reason[700];
        snprintf(reason, sizeof reason, "cannot resume after restart: %s",
                 rc != 0 ? jerr.msg : j->st.error);
        pthread_mutex_lock(&j->sm_mu);
        pthread_mutex_lock(&j->mu);
        fs_jobsm_restart(&j->st); /* let agg_fail_job record it */
        pthread_mutex_unlock(&j->mu);
        agg_fail_job(j, reason);
        pthread_mutex_unlock(&j->sm_mu);
    } else {
        double timeout = j->st.phase == FS_JOB_ADVERTISE ? (double)j->spec.join_timeout_s
                                                         : (double)j->spec.round_timeout_s;
        j->deadline_mono = agg_now_mono() + timeout;
        fs_log_pack(FS_LOG_INFO, "job resumed", "{s:s, s:s, s:I}", "job", j->id, "phase",
                    fs_job_phase_name(j->st.phase), "events", (json_int_t)(j->next_seq - 1));
    }
}

/* A job stopped after its key-sharing round's close was logged but before
 * aggregation 0's begin was (the begin is an event of its own, which the
 * replay waits for): the job shows the phase begin opens, with no
 * aggregation document. Begin aggregation 0 now, once; it logs its begin
 * event, so a later replay takes that instead. */
static void begin_if_due(agg_job *j)
{
    struct fs_err jerr = {0};
    double at = agg_now_wall();
    int due;

    pthread_mutex_lock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    due = j->sm != NULL && fs_jobsm_running(&j->st) && !j->st.finishing &&
          j->st.phase == (j->fed ? FS_JOB_EXPONENTS : FS_JOB_MASKED_INPUT) && j->st.r == 0 &&
          !json_is_object(json_array_get(j->aggs, 0));
    pthread_mutex_unlock(&j->mu);
    if (due) {
        fs_log_pack(FS_LOG_INFO, "key sharing closed before the restart: beginning aggregation 0",
                    "{s:s}", "job", j->id);
        if (agg_begin_first(j, at, &jerr) != 0) { /* (a failure the begin did not record already) */
            char reason[700];
            snprintf(reason, sizeof reason, "cannot resume after restart: %s", jerr.msg);
            agg_fail_job(j, reason);
        }
    }
    pthread_mutex_unlock(&j->sm_mu);
}

static int load_job(void *ctx, const struct agg_job_row *row, struct fs_err *err)
{
    agg_mgr *m = ctx;
    struct fs_err jerr = {0};
    struct fs_job_spec spec;
    agg_job *j = NULL;
    int running = strcmp(row->state, "running") == 0;
    int rc;

    if (row_spec(row, &spec) != 0) {
        return 0;
    }
    rc = agg_job_alloc(m, row->id, &spec, row->chunk_words, row->created_unix, &j, err);
    if (rc == 0) {
        rc = agg_shard_attach(j, 0, err);
    }
    if (rc != 0) {
        agg_job_free(j);
        return rc;
    }
    snprintf(j->created_at, sizeof j->created_at, "%s", row->created_at);
    j->created_unix = row->created_unix;
    if (load_tokens(m, j) != 0) {
        agg_job_free(j);
        return 0;
    }
    if (!running) {
        fs_jobsm_restore_end(&j->st, strcmp(row->state, "done") != 0, row->error, 0);
        apply_snapshot(j, row->status, row->result);
        if (j->st.phase == FS_JOB_DONE && j->result == NULL) {
            fs_jobsm_restore_end(&j->st, 1, "result manifest lost", j->st.r);
        }
        if (j->ops != NULL) {
            (void)j->ops->load(j, 0, &jerr);
        }
    } else if (j->ops != NULL && j->ops->load(j, 1, &jerr) != 0) {
        /* a power-method job whose server cannot be restored */
        char reason[700];
        snprintf(reason, sizeof reason, "cannot resume after restart: %s", jerr.msg);
        apply_snapshot(j, row->status, NULL);
        pthread_mutex_lock(&j->sm_mu);
        agg_fail_job(j, reason);
        pthread_mutex_unlock(&j->sm_mu);
    } else {
        resume(m, j, row->status);
        begin_if_due(j);
    }
    rc = agg_mgr_register(m, j, err);
    if (rc != 0) {
        agg_job_free(j);
        return rc;
    }
    if (running && j->ops != NULL && j->st.finishing && fs_jobsm_running(&j->st) && j->sm != NULL &&
        agg_start_worker(j) != 0) {
        /* a power-method round closed before the restart: its worker's part */
        pthread_mutex_lock(&j->sm_mu);
        agg_fail_job(j, "cannot start the worker");
        pthread_mutex_unlock(&j->sm_mu);
    }
    if (running && j->ops == NULL && j->st.finish_pending && j->st.phase == FS_JOB_UNMASKING &&
        j->sm != NULL && agg_start_worker(j) != 0) {
        pthread_mutex_lock(&j->sm_mu);
        agg_fail_job(j, "cannot start the unmasking worker");
        pthread_mutex_unlock(&j->sm_mu);
    }
    return 0;
}

int agg_mgr_load(agg_mgr *m, struct fs_err *err)
{
    return agg_store_jobs_load(m->st, load_job, m, err);
}
