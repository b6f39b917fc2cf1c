/* Party messages and closing rounds: ask the job state machine
 * (lib/proto/jobsm.h), persist, update the documents, log (see
 * jobmgr_internal.h). sm_mu is held throughout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../api/phase.h"
#include "../../api/wire.h"
#include "jobmgr_internal.h"
#include "net/log.h"
#include "teststop.h"

/* ------------------------------------------------------------ messages */

/* Persist an accepted message (its event; masked chunks: their words are in
 * the party's upload file already, the event says which chunk). */
static int log_msg(agg_job *j, const struct fs_jobsm_msg *msg, const json_t *body, double at,
                   struct fs_err *err)
{
    const char *kind = fs_jobsm_event_name(msg->kind);
    char txt[16];
    json_t *adv = NULL;
    int rc;

    switch (msg->kind) {
    case FS_JOBSM_ADV:
        adv = fs_wire_adv_encode(msg->adv, msg->has_exp, msg->exp);
        if (adv == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        rc = agg_log_json(j, kind, msg->adv->id, adv, at, err);
        json_decref(adv);
        return rc;
    case FS_JOBSM_SHARES:
    case FS_JOBSM_REVEALS:
        return agg_log_json(j, kind, msg->party, body, at, err);
    case FS_JOBSM_EXP:
        return agg_log_event(j, kind, msg->party, j->st.r, msg->bytes, FS_FEDSVD_SEALED_EXP_LEN, at,
                             err);
    case FS_JOBSM_PUBEXP:
        snprintf(txt, sizeof txt, "%d", msg->exp);
        return agg_log_event(j, kind, msg->party, j->st.r, txt, strlen(txt), at, err);
    case FS_JOBSM_MASKED:
        return agg_log_event(j, kind, msg->party, msg->idx, NULL, 0, at, err);
    case FS_JOBSM_SIG:
        return agg_log_event(j, kind, msg->party, 0, msg->bytes, FS_SECAGG_SIG_LEN, at, err);
    default:
        return 0;
    }
}

/* A message taken while events wait to be written (storage unavailable) is
 * not acknowledged: 503, and the party's re-send, a repeat, is answered
 * once they are written. */
static int unlogged_503(agg_job *j, int rc, struct fs_err *err)
{
    if (rc == 0 && j->unlogged != NULL) {
        rc = FS_ESTORAGE;
    }
    if (rc == FS_ESTORAGE) {
        fs_err_set(err, FS_ESTORAGE,
                   "the server cannot write its state (storage unavailable): send it again later");
    }
    return rc;
}

int agg_apply(agg_job *j, const struct fs_jobsm_msg *msg, const json_t *body, double at,
              struct fs_err *err)
{
    char reason[FS_JOBSM_REASON_MAX];
    int repeat = 0;
    int is_new = 1;
    int rc = fs_jobsm_seen(&j->st, msg, &repeat, reason, sizeof reason, err);

    if (rc != 0) {
        return rc;
    }
    if (reason[0] != '\0') {
        agg_fail_job(j, reason);
        return fs_err_set(err, AGG_EABORTED, "job failed: %s", reason);
    }
    rc = fs_jobsm_secagg_add(j->sm, msg, &is_new, err);
    if (rc == FS_EAUTH && msg->kind == FS_JOBSM_ADV) {
        /* a key that is not the job's pin for this party: 403, nothing stored */
        return fs_err_set(err, AGG_EFORBIDDEN, "%s", err->msg);
    }
    if (rc != 0) {
        agg_after_sm_error(j, rc, err);
        return rc;
    }
    if (msg->kind == FS_JOBSM_MASKED ? !j->replaying && !is_new : repeat) {
        /* an identical repeat: accepted once what was taken is written */
        return unlogged_503(j, agg_flush_log(j, err), err);
    }
    rc = log_msg(j, msg, body, at, err);
    if (rc != 0) {
        return rc;
    }
    if (msg->kind == FS_JOBSM_MASKED) {
        agg_count_add(j->mgr, &j->mgr->counts.chunks_accepted, 1);
    }
    pthread_mutex_lock(&j->mu);
    fs_jobsm_accepted(&j->st, j->sm, msg);
    pthread_mutex_unlock(&j->mu);
    return unlogged_503(j, 0, err);
}

/* A streamed chunk was committed to the sum (agg_job_stream_end): persist
 * and record it as agg_apply does an uploaded one. */
int agg_apply_streamed(agg_job *j, uint32_t party, uint64_t idx, size_t m, double at,
                       struct fs_err *err)
{
    struct fs_jobsm_msg msg;
    int rc;

    memset(&msg, 0, sizeof msg);
    msg.kind = FS_JOBSM_MASKED;
    msg.party = party;
    msg.idx = idx;
    msg.m = m;
    rc = log_msg(j, &msg, NULL, at, err);
    if (rc != 0) {
        return rc;
    }
    agg_count_add(j->mgr, &j->mgr->counts.chunks_accepted, 1);
    pthread_mutex_lock(&j->mu);
    fs_jobsm_accepted(&j->st, j->sm, &msg);
    pthread_mutex_unlock(&j->mu);
    return unlogged_503(j, 0, err); /* storage unavailable: the re-send is the ack */
}

/* ------------------------------------------------------------ closing rounds */

static void log_close(agg_job *j, const struct fs_jobsm_close *c, int by_deadline)
{
    struct agg_counts *k = &j->mgr->counts;

    if (j->replaying) {
        return;
    }
    agg_count_add(j->mgr, by_deadline ? &k->rounds_deadline : &k->rounds_complete, 1);
    agg_count_add(j->mgr, &k->parties_dropped, c->drops);
    if (c->ids != NULL) {
        fs_log_pack(FS_LOG_INFO, "round closed", "{s:s, s:s, s:i, s:s, s:i, s:i}", "job", j->id,
                    "phase", fs_job_phase_name(c->phase), "aggregation", (int)j->st.r, "reason",
                    by_deadline ? "deadline" : "complete", "dropped", (int)c->drops, "answered",
                    (int)c->k);
    } else {
        fs_log_pack(FS_LOG_INFO, "round closed", "{s:s, s:s, s:i, s:s, s:i}", "job", j->id, "phase",
                    fs_job_phase_name(c->phase), "aggregation", (int)j->st.r, "reason",
                    by_deadline ? "deadline" : "complete", "dropped", (int)c->drops);
    }
}

/* The relayed sealed exponents of the parties in set. */
static json_t *exps_doc(const agg_job *j, const uint32_t *set, size_t k)
{
    uint8_t(*sl)[FS_FEDSVD_SEALED_EXP_LEN] = calloc(k + 1, sizeof *sl);
    json_t *exps;

    for (size_t q = 0; sl != NULL && q < k; q++) {
        memcpy(sl[q], j->st.sealed[set[q]], FS_FEDSVD_SEALED_EXP_LEN);
    }
    exps = sl != NULL ? fs_wire_exps_encode(set, (const uint8_t(*)[32])sl, k) : NULL;
    free(sl);
    return exps;
}

/* Set field of the current Aggregation document (and its phase unless NULL). */
static int set_doc(agg_job *j, const char *field, json_t *v, const char *phase)
{
    json_t *d = agg_cur_doc(j);

    if (v == NULL) {
        return FS_ENOMEM;
    }
    if (d == NULL) {
        json_decref(v);
        return 0;
    }
    json_object_set_new(d, field, v);
    if (phase != NULL) {
        json_object_set_new(d, "phase", json_string(phase));
    }
    return 0;
}

/* mu held: the documents of the round that closed and the one that opened. */
static int update_docs_locked(agg_job *j, const struct fs_jobsm_close *c,
                              const struct fs_jobsm_step *st)
{
    size_t k = 0;
    const struct fs_secagg_adv *roster;

    switch (c->phase) {
    case FS_JOB_ADVERTISE:
        roster = fs_secagg_server_roster(j->sm, &k);
        json_decref(j->roster);
        j->roster = fs_wire_roster_encode(roster, k);
        return j->roster == NULL ? FS_ENOMEM : 0;
    case FS_JOB_EXPONENTS:
        return set_doc(j, "exponents", exps_doc(j, st->set, st->k),
                       fs_job_phase_name(FS_JOB_MASKED_INPUT));
    case FS_JOB_MASKED_INPUT:
        /* consistency, or unmasking at once in an all-inputs job */
        return set_doc(j, "survivors", fs_wire_ids_encode(st->set, st->k),
                       fs_job_phase_name(j->st.phase));
    case FS_JOB_CONSISTENCY:
        return set_doc(j, "signatures",
                       fs_wire_sigs_encode(st->set, fs_secagg_server_sigs(j->sm), st->k),
                       fs_job_phase_name(FS_JOB_UNMASKING));
    case FS_JOB_PLAIN_UPLOAD:
        return set_doc(j, "survivors", fs_wire_ids_encode(c->ids, c->k), NULL);
    case FS_JOB_NOISE_EXCHANGE:
        return set_doc(j, "responders", fs_wire_ids_encode(c->ids, c->k), NULL);
    default:
        return 0;
    }
}

/* What the service does after the state machine's step. */
static int act(agg_job *j, const struct fs_jobsm_close *c, const struct fs_jobsm_step *st,
               double at, struct fs_err *err)
{
    switch (st->action) {
    case FS_JOBSM_FAIL:
        if (st->no_dropouts) {
            agg_fail_no_dropouts(j, c->phase, c->first_drop, c->drops);
        } else {
            agg_fail_job(j, st->reason);
        }
        return 0;
    case FS_JOBSM_BEGIN:
        if (j->replaying) {
            return 0; /* the begin is an event of its own */
        }
        agg_teststop_before_begin(j->id); /* a testing aid, off by default */
        return agg_begin_first(j, at, err);
    case FS_JOBSM_WORK:
        if (!j->replaying && agg_start_worker(j) != 0) {
            agg_fail_job(j, c->phase == FS_JOB_UNMASKING ? "cannot start the unmasking worker"
                                                         : "cannot start the worker");
            return fs_err_set(err, FS_EINTERNAL, "cannot start a thread");
        }
        return 0;
    default:
        return 0;
    }
}

/* Close the current round (sm_mu held). */
int agg_close_round(agg_job *j, double at, int by_deadline, struct fs_err *err)
{
    struct fs_jobsm_close c;
    struct fs_jobsm_step st;
    char *verdict = NULL; /* a sharded masked_input: who is complete on the peers */
    int src;
    int rc;

    if (j->sm == NULL) {
        return 0;
    }
    memset(&st, 0, sizeof st);
    src = agg_shard_closes_masked(j) ? agg_shard_close_masked(j, &verdict, err)
                                     : fs_jobsm_close_secagg(&j->st, j->sm, err);
    pthread_mutex_lock(&j->mu);
    rc = fs_jobsm_close(&j->st, &c, err);
    pthread_mutex_unlock(&j->mu);
    if (rc != 0 || c.event == NULL) {
        fs_jobsm_close_clear(&c);
        free(verdict);
        return rc;
    }
    log_close(j, &c, by_deadline);
    if (src != 0 && c.drops > 0 && fs_jobsm_drop_fails(&j->st, c.phase) &&
        fs_secagg_server_phase(j->sm) == FS_SECAGG_ABORTED) {
        /* an all-inputs secure aggregation refuses to go on without a
         * party: the job fails by its dropout rule, said as such */
        agg_fail_no_dropouts(j, c.phase, c.first_drop, c.drops);
        rc = src;
        goto out;
    }
    if (src != 0) {
        agg_after_sm_error(j, src, err);
        rc = src;
        goto out;
    }
    rc = agg_log_event(j, c.event, 0, 0, verdict, verdict != NULL ? strlen(verdict) : 0, at, err);
    if (rc != 0) {
        goto out;
    }
    pthread_mutex_lock(&j->mu);
    rc = fs_jobsm_advance(&j->st, j->sm, &c, at, &st, err);
    if (rc == 0 && st.action != FS_JOBSM_FAIL) {
        if (st.set != NULL) {
            j->deadline_mono = agg_now_mono() + (double)j->spec.round_timeout_s;
        }
        rc = update_docs_locked(j, &c, &st);
        if (rc != 0) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (rc == 0) {
        rc = act(j, &c, &st, at, err);
    }
    if (rc == 0 && st.action != FS_JOBSM_FAIL && !j->replaying) {
        agg_persist_state(j, NULL);
    }
out:
    free(verdict);
    fs_jobsm_step_clear(&st);
    fs_jobsm_close_clear(&c);
    return rc;
}
