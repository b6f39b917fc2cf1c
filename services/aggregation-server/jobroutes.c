/* The job's party routes and the operator's cancel (jobmgr.h): decode,
 * enter the round under the job's locks, apply (jobround.c), leave. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../api/phase.h"
#include "../../api/wire.h"
#include "crypto/ct.h"
#include "jobmgr_internal.h"

/* Enter phase want of aggregation r for msg, apply it (or, when the round
 * has closed but its messages are known, accept only an identical repeat),
 * leave. */
static int enter_apply(agg_job *j, enum fs_job_phase want, uint32_t r,
                       const struct fs_jobsm_msg *msg, const json_t *body, struct fs_err *err)
{
    struct fs_err cerr = {0};
    int closed = 0;
    int rc = agg_enter_repeat(j, want, r, msg->party, &closed, &cerr, err);

    if (rc != 0) {
        return rc;
    }
    if (closed) {
        rc = agg_closed_verdict(fs_jobsm_closed_repeat(&j->st, j->sm, msg, err), &cerr, err);
    } else {
        rc = agg_apply(j, msg, body, agg_now_wall(), err);
    }
    agg_leave(j);
    return rc;
}

static struct fs_jobsm_msg msg_of(enum fs_jobsm_kind kind, uint32_t party)
{
    struct fs_jobsm_msg m;

    memset(&m, 0, sizeof m);
    m.kind = kind;
    m.party = party;
    return m;
}

int agg_job_post_adv(agg_job *j, uint32_t party, const json_t *body, struct fs_err *err)
{
    struct fs_secagg_adv a;
    struct fs_jobsm_msg msg = msg_of(FS_JOBSM_ADV, party);
    int rc = fs_wire_adv_decode(body, &a, &msg.has_exp, &msg.exp, err);

    if (rc != 0) {
        return rc;
    }
    if (a.id != party) {
        uint32_t id = a.id;
        fs_secagg_adv_clear(&a);
        return fs_err_set(err, AGG_EFORBIDDEN, "advert for party %u sent with party %u's token", id,
                          party);
    }
    msg.adv = &a;
    rc = enter_apply(j, FS_JOB_ADVERTISE, 0, &msg, NULL, err);
    fs_secagg_adv_clear(&a); /* the state machine keeps its own copy */
    return rc;
}

int agg_job_get_roster(agg_job *j, json_t **out, struct fs_err *err)
{
    int rc = 0;

    *out = NULL;
    pthread_mutex_lock(&j->mu);
    if (j->st.phase == FS_JOB_FAILED) {
        rc = fs_err_set(err, AGG_EABORTED, "job failed: %s", j->st.error);
    } else if (j->roster == NULL) {
        int open = j->st.phase == FS_JOB_ADVERTISE;
        rc = fs_err_set(err, open ? FS_ESTATE : FS_ECONFLICT,
                        open ? "key advertisement is still open"
                             : "the roster is no longer available");
    } else {
        *out = json_incref(j->roster);
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int agg_job_post_shares(agg_job *j, uint32_t party, const json_t *body, struct fs_err *err)
{
    struct fs_jobsm_msg msg = msg_of(FS_JOBSM_SHARES, party);
    struct fs_secagg_share_ct *cts = NULL;
    int rc = fs_wire_shares_decode(body, 0, party, fs_secagg_share_ct_len(&j->cfg), j->n, &cts,
                                   &msg.k, err);

    if (rc != 0) {
        return rc;
    }
    msg.cts = cts;
    rc = enter_apply(j, FS_JOB_SHARE_KEYS, 0, &msg, body, err);
    fs_secagg_share_cts_free(cts, msg.k);
    return rc;
}

int agg_job_get_shares(agg_job *j, uint32_t party, json_t **out, struct fs_err *err)
{
    const struct fs_secagg_share_ct **list = NULL;
    size_t k = 0;
    int rc = 0;

    *out = NULL;
    pthread_mutex_lock(&j->mu);
    if (j->st.phase == FS_JOB_FAILED) {
        rc = fs_err_set(err, AGG_EABORTED, "job failed: %s", j->st.error);
    } else if (j->st.phase <= FS_JOB_SHARE_KEYS) {
        rc = fs_err_set(err, FS_ESTATE, "share exchange is still open");
    } else if (j->st.phase == FS_JOB_DONE || j->st.finishing) {
        rc = fs_err_set(err, FS_ECONFLICT, "shares are no longer available (job phase %s)",
                        fs_job_phase_name(j->st.finishing ? FS_JOB_UNMASKING : j->st.phase));
    } else if (!j->st.shared[party]) {
        rc = fs_err_set(err, FS_ECONFLICT, "party %u did not share keys: it was dropped", party);
    }
    pthread_mutex_unlock(&j->mu);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->sm_mu);
    if (j->sm == NULL) {
        rc = fs_err_set(err, FS_ECONFLICT, "job is over");
    } else {
        rc = fs_secagg_server_shares_for(j->sm, party, &list, &k, err);
    }
    if (rc == 0) {
        *out = fs_wire_shares_encode(list, k, 1);
        if (*out == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        }
    }
    pthread_mutex_unlock(&j->sm_mu);
    free(list);
    return rc;
}

/* mu held: 1 when aggregation r's document shows the job's live phase. */
static int live_phase_locked(const agg_job *j, uint32_t r)
{
    enum fs_job_phase ph = j->st.phase;

    return r == j->st.r &&
           ((ph <= FS_JOB_UNMASKING && ph >= (j->fed ? FS_JOB_EXPONENTS : FS_JOB_ADVERTISE)) ||
            ph == FS_JOB_NOISE_EXCHANGE || ph == FS_JOB_PLAIN_UPLOAD);
}

int agg_job_get_agg(agg_job *j, uint32_t r, json_t **out, struct fs_err *err)
{
    int rc = agg_exists(j, r, err);
    json_t *doc;

    *out = NULL;
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    doc = json_array_get(j->aggs, r);
    if (j->st.phase == FS_JOB_FAILED) {
        rc = fs_err_set(err, AGG_EABORTED, "job failed: %s", j->st.error);
    } else if (!json_is_object(doc)) {
        rc = fs_err_set(err, FS_ESTATE, "aggregation %u has not begun (job phase %s)", r,
                        fs_job_phase_name(j->st.phase));
    } else {
        *out = json_deep_copy(doc);
        if (*out == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        } else if (live_phase_locked(j, r)) {
            json_object_set_new(*out, "phase", json_string(fs_job_phase_name(j->st.phase)));
        }
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int agg_job_sum_path(agg_job *j, uint32_t r, char *path, size_t cap, struct fs_err *err)
{
    int rc = agg_exists(j, r, err);
    int have = 0;

    if (rc != 0) {
        return rc;
    }
    if (!agg_is_stats(j, r)) {
        return fs_err_set(err, FS_ENOTFOUND,
                          "aggregation %u publishes no sum (only fedpca statistics rounds do)", r);
    }
    pthread_mutex_lock(&j->mu);
    if (j->st.phase == FS_JOB_FAILED) {
        rc = fs_err_set(err, AGG_EABORTED, "job failed: %s", j->st.error);
    } else {
        have = json_is_object(json_object_get(json_array_get(j->aggs, r), "sum"));
        if (!have) {
            rc = fs_err_set(err, FS_ESTATE, "the sum of aggregation %u is not ready", r);
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && agg_sum_path(j, r, path, cap) != 0) {
        rc = fs_err_set(err, FS_EINTERNAL, "path too long");
    }
    return rc;
}

/* Words of chunk idx of the aggregation in progress (len words). */
static size_t chunk_len(const agg_job *j, uint64_t len, uint64_t idx)
{
    uint64_t left = len - idx * j->chunk_words;

    return (size_t)(left < j->chunk_words ? left : j->chunk_words);
}

int agg_job_chunk_check(agg_job *j, uint32_t party, uint32_t r, uint64_t idx, size_t *m,
                        struct fs_err *err)
{
    uint64_t nchunks;
    uint64_t len;
    int rc;

    *m = 0;
    rc = agg_exists(j, r, err);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    rc = agg_check_locked(j, FS_JOB_MASKED_INPUT, r, party, err);
    if (rc == FS_ECONFLICT && fs_jobsm_repeatable(&j->st, FS_JOB_MASKED_INPUT, r)) {
        rc = 0; /* perhaps an identical repeat: agg_job_put_chunk decides */
    } else if (rc == 0 && j->fed && !agg_is_stats(j, r) && !j->st.has_pubexp[party]) {
        rc = fs_err_set(err, FS_ECONFLICT,
                        "party %u: report the public exponent (POST .../public-exponent) before "
                        "uploading",
                        party);
    }
    nchunks = j->nchunks;
    len = j->len;
    pthread_mutex_unlock(&j->mu);
    if (rc != 0) {
        return rc;
    }
    if (idx >= nchunks) {
        return fs_err_set(err, FS_EINVAL, "chunk %llu does not exist (aggregation %u has %llu)",
                          (unsigned long long)idx, r, (unsigned long long)nchunks);
    }
    *m = chunk_len(j, len, idx);
    return 0;
}

int agg_job_put_chunk(agg_job *j, uint32_t party, uint32_t r, uint64_t idx, const uint64_t *y,
                      size_t m, struct fs_err *err)
{
    struct fs_jobsm_msg msg = msg_of(FS_JOBSM_MASKED, party);
    struct fs_err cerr = {0};
    int closed = 0;
    int rc;

    rc = agg_exists(j, r, err);
    if (rc == 0) {
        rc = agg_enter_repeat(j, FS_JOB_MASKED_INPUT, r, party, &closed, &cerr, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (m != chunk_len(j, j->len, idx)) {
        agg_leave(j);
        return fs_err_set(err, FS_EINVAL, "chunk %llu: wrong length", (unsigned long long)idx);
    }
    msg.idx = idx;
    msg.words = y;
    msg.m = m;
    rc = closed ? agg_closed_verdict(fs_jobsm_closed_repeat(&j->st, j->sm, &msg, err), &cerr, err)
                : agg_apply(j, &msg, NULL, agg_now_wall(), err);
    agg_leave(j);
    return rc;
}

/* ------------------------------------------------------------ streamed chunks */

static int upload_file_err(int e, struct fs_err *err)
{
    int code = e == ENOSPC || e == EDQUOT || e == EROFS ? FS_ESTORAGE : FS_EIO;

    return fs_err_set(err, code, "upload file: %s", strerror(e));
}

int agg_job_stream_begin(agg_job *j, uint32_t party, uint32_t r, uint64_t idx, size_t m,
                         struct agg_upload *u, int *stream, struct fs_err *err)
{
    char path[4600];
    char dir[4600];
    int rc;

    memset(u, 0, sizeof *u);
    u->fd = -1;
    *stream = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return 0; /* the file holds little-endian words: buffer and convert */
#endif
    /* anything but an open round: the buffered path answers as it always has */
    if (agg_exists(j, r, err) != 0 || agg_enter(j, FS_JOB_MASKED_INPUT, r, party, err) != 0) {
        return 0;
    }
    if (j->replaying || m != chunk_len(j, j->len, idx)) {
        agg_leave(j);
        return 0;
    }
    rc = fs_secagg_server_upload_begin(j->sm, party, idx, m, &u->up, stream, err);
    if (rc == 0 && *stream) {
        if (agg_words_path(j, party, path, sizeof path) != 0 ||
            (size_t)snprintf(dir, sizeof dir, "%s/agg-%u", j->dir, j->st.r) >= sizeof dir) {
            rc = fs_err_set(err, FS_EINVAL, "upload path too long");
        } else {
            rc = fs_mkdir_p(dir, err);
        }
        if (rc == 0) {
            u->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
            rc = u->fd < 0 ? upload_file_err(errno, err) : 0;
        }
        if (rc != 0) {
            struct fs_err e2 = {0};
            if (fs_secagg_server_upload_cancel(&u->up, &e2) != 0) {
                agg_after_sm_error(j, e2.code, &e2);
            }
            fs_secagg_server_upload_release(&u->up);
            *stream = 0;
        }
    }
    if (rc == 0 && *stream) {
        u->party = party;
        u->r = r;
        u->idx = idx;
        u->off = idx * j->chunk_words * 8;
    }
    agg_leave(j);
    return rc;
}

int agg_job_stream_piece(agg_job *j, struct agg_upload *u, const uint8_t *p, size_t n,
                         struct fs_err *err)
{
    (void)j;
    if (n == 0) {
        return 0;
    }
    if (u->up.s == NULL || n > u->up.m - u->up.done) {
        return fs_err_set(err, FS_EINVAL, "chunk %llu: more words than it has",
                          (unsigned long long)u->idx);
    }
    /* persisted before it is folded: a restart replays the file */
    if (fs_pwrite_all(u->fd, p, n * 8, (off_t)(u->off + 8 * (uint64_t)u->up.done)) != 0) {
        return upload_file_err(errno, err);
    }
    return fs_secagg_server_upload_fold(&u->up, p, n, err);
}

int agg_job_stream_end(agg_job *j, struct agg_upload *u, int complete, struct fs_err *err)
{
    struct fs_err e2 = {0};
    int rc = 0;

    if (u->up.s == NULL) {
        return 0;
    }
    if (complete && j->mgr->cfg.fsync && fdatasync(u->fd) != 0) {
        rc = upload_file_err(errno, err);
        complete = 0;
    }
    if (u->fd >= 0) {
        close(u->fd);
        u->fd = -1;
    }
    pthread_mutex_lock(&j->sm_mu);
    if (j->sm != u->up.s) {
        /* the job ended meanwhile: nothing of this upload counts */
        if (complete) {
            rc = fs_err_set(err, FS_ECONFLICT, "job is over");
        }
    } else if (complete) {
        rc = fs_secagg_server_upload_commit(&u->up, err);
        if (rc == 0) {
            rc = agg_apply_streamed(j, u->party, u->idx, u->up.m, agg_now_wall(), err);
        }
    } else if (fs_secagg_server_upload_cancel(&u->up, &e2) != 0) {
        agg_after_sm_error(j, e2.code, &e2);
    }
    pthread_mutex_unlock(&j->sm_mu);
    agg_wake(j->mgr);
    fs_secagg_server_upload_release(&u->up);
    return rc;
}

int agg_job_post_sig(agg_job *j, uint32_t party, uint32_t r, const json_t *body, struct fs_err *err)
{
    uint8_t sig[FS_SECAGG_SIG_LEN];
    struct fs_jobsm_msg msg = msg_of(FS_JOBSM_SIG, party);
    int rc = agg_exists(j, r, err);

    if (rc == 0) {
        rc = fs_wire_sig_decode(body, sig, err);
    }
    if (rc != 0) {
        return rc;
    }
    msg.bytes = sig;
    return enter_apply(j, FS_JOB_CONSISTENCY, r, &msg, NULL, err);
}

int agg_job_post_reveals(agg_job *j, uint32_t party, uint32_t r, const json_t *body,
                         struct fs_err *err)
{
    struct fs_jobsm_msg msg = msg_of(FS_JOBSM_REVEALS, party);
    struct fs_secagg_reveal *rv = NULL;
    int rc = agg_exists(j, r, err);

    if (rc != 0) {
        return rc;
    }
    rc = fs_wire_reveals_decode(body, j->n, &rv, &msg.k, err);
    if (rc != 0) {
        return rc;
    }
    msg.rv = rv;
    rc = enter_apply(j, FS_JOB_UNMASKING, r, &msg, body, err);
    fs_wipe(rv, msg.k * sizeof *rv);
    free(rv);
    return rc;
}

int agg_job_post_exponent(agg_job *j, uint32_t party, uint32_t r, const json_t *body,
                          struct fs_err *err)
{
    uint8_t sealed[FS_FEDSVD_SEALED_EXP_LEN];
    struct fs_jobsm_msg msg = msg_of(FS_JOBSM_EXP, party);
    int rc = agg_exists(j, r, err);

    if (rc == 0 && !j->fed) {
        rc = fs_err_set(err, FS_ENOTFOUND, "only fedsvd and fedpca jobs exchange exponents");
    }
    if (rc == 0) {
        rc = fs_wire_exp_decode(body, sealed, err);
    }
    if (rc != 0) {
        return rc;
    }
    msg.bytes = sealed;
    return enter_apply(j, FS_JOB_EXPONENTS, r, &msg, NULL, err);
}

int agg_job_post_pubexp(agg_job *j, uint32_t party, uint32_t r, const json_t *body,
                        struct fs_err *err)
{
    struct fs_jobsm_msg msg = msg_of(FS_JOBSM_PUBEXP, party);
    int rc = agg_exists(j, r, err);

    if (rc == 0 && (!j->fed || agg_is_stats(j, r))) {
        rc = fs_err_set(err, FS_ENOTFOUND,
                        "only the SVD aggregation of a fedsvd or fedpca job takes a public "
                        "exponent");
    }
    if (rc == 0) {
        rc = fs_wire_pubexp_decode(body, &msg.exp, err);
    }
    if (rc != 0) {
        return rc;
    }
    return enter_apply(j, FS_JOB_MASKED_INPUT, r, &msg, NULL, err);
}

int agg_job_result(agg_job *j, json_t **out, struct fs_err *err)
{
    int rc = 0;

    *out = NULL;
    pthread_mutex_lock(&j->mu);
    if (j->st.phase == FS_JOB_FAILED) {
        rc = fs_err_set(err, AGG_EABORTED, "job failed: %s", j->st.error);
    } else if (j->st.phase != FS_JOB_DONE || j->result == NULL) {
        rc = fs_err_set(err, FS_ESTATE, "no result yet (job phase %s)",
                        fs_job_phase_name(j->st.finishing ? FS_JOB_UNMASKING : j->st.phase));
    } else {
        *out = json_incref(j->result);
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int agg_job_result_path(agg_job *j, const char *name, char *path, size_t cap, struct fs_err *err)
{
    json_t *res = NULL;
    int rc = agg_job_result(j, &res, err);
    int known;

    json_decref(res);
    if (rc != 0) {
        return rc;
    }
    if (j->ops != NULL) {
        known = j->ops->result_name(j, name);
    } else if (j->fed) {
        known = strcmp(name, "s") == 0 ||
                strcmp(name, j->spec.fed.partition == FS_JOB_FEATURES ? "uprime" : "vprime") == 0;
    } else {
        known = strcmp(name, "sum") == 0;
    }
    if (!known) {
        return fs_err_set(err, FS_ENOTFOUND, "this job has no result file of that name");
    }
    if ((size_t)snprintf(path, cap, "%s/result/%s.npy", j->dir, name) >= cap) {
        return fs_err_set(err, FS_EINTERNAL, "path too long");
    }
    return 0;
}

int agg_job_cancel(agg_job *j, struct fs_err *err)
{
    enum fs_job_phase ph;

    pthread_mutex_lock(&j->mu);
    ph = j->st.phase;
    if (ph == FS_JOB_DONE) {
        pthread_mutex_unlock(&j->mu);
        return fs_err_set(err, FS_ECONFLICT, "job is done");
    }
    if (j->st.finishing) {
        pthread_mutex_unlock(&j->mu);
        return fs_err_set(err, FS_ECONFLICT, "job is unmasking; it cannot be cancelled now");
    }
    pthread_mutex_unlock(&j->mu);
    if (ph == FS_JOB_FAILED) {
        return 0;
    }
    pthread_mutex_lock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    ph = j->st.finishing ? FS_JOB_DONE : j->st.phase;
    pthread_mutex_unlock(&j->mu);
    if (ph < FS_JOB_DONE) {
        agg_fail_job(j, "cancelled by the operator");
    }
    pthread_mutex_unlock(&j->sm_mu);
    return ph == FS_JOB_DONE ? fs_err_set(err, FS_ECONFLICT, "job is done or unmasking") : 0;
}
