/* Aggregations: beginning one, and the worker that unmasks it and turns the
 * ring sum into the result (see jobmgr_internal.h). sm_mu is held
 * throughout, as the comments say. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../api/phase.h"
#include "../../api/wire.h"
#include "io/matio.h"
#include "jobmgr_internal.h"
#include "la/mat.h"
#include "net/log.h"
#include "proto/fedpca.h"
#include "teststop.h"

/* ------------------------------------------------------------ beginning */

/* Fixed-point parameters for aggregation 0: B = 2^max(e) over the active
 * parties (1 when all their matrices are zero), summands = |active|. */
static int choose_fixedpt(agg_job *j, const uint32_t *active, size_t na, struct fs_fixedpt *fp,
                          struct fs_err *err)
{
    int have = 0;
    int e = 0;
    double bound;

    pthread_mutex_lock(&j->mu);
    fs_jobsm_max_exp(&j->st, active, na, &have, &e);
    pthread_mutex_unlock(&j->mu);
    if (!have) {
        bound = 1.0;
    } else if (e >= DBL_MAX_EXP) {
        bound = DBL_MAX;
    } else {
        bound = ldexp(1.0, e);
        if (bound == 0.0) {
            bound = DBL_MIN;
        }
    }
    return fs_fixedpt_init(fp, bound, (unsigned)na, err);
}

static json_t *sum_doc(const agg_job *j, const uint32_t *active, size_t na)
{
    return json_pack("{s:i, s:I, s:I, s:I, s:s, s:o, s:n, s:n, s:f, s:i, s:i}", "index", 0,
                     "length", (json_int_t)j->len, "chunk_words", (json_int_t)j->chunk_words,
                     "chunks", (json_int_t)j->nchunks, "phase",
                     fs_job_phase_name(FS_JOB_MASKED_INPUT), "active",
                     fs_wire_ids_encode(active, na), "survivors", "signatures", "bound",
                     j->fp.bound, "frac_bits", j->fp.frac_bits, "summands", (int)j->fp.summands);
}

/* secure-sum: begin the one aggregation (fixed point chosen by the server,
 * or given: replay). */
int agg_begin_sum(agg_job *j, const struct fs_fixedpt *given, double at, struct fs_err *err)
{
    uint32_t *active = NULL;
    size_t na = 0;
    struct fs_fixedpt fp;
    json_t *params = NULL;
    json_t *doc = NULL;
    int rc;

    rc = fs_jobsm_begin(&j->st, j->sm, 0, j->len, &active, &na, err);
    if (rc != 0) {
        agg_after_sm_error(j, rc, err);
        return rc;
    }
    if (given != NULL) {
        fp = *given;
    } else if ((rc = choose_fixedpt(j, active, na, &fp, err)) != 0) {
        agg_fail_job(j, "cannot choose fixed-point parameters");
        goto out;
    }
    params = json_pack("{s:i, s:I, s:f, s:i, s:i}", "r", 0, "len", (json_int_t)j->len, "bound",
                       fp.bound, "frac_bits", fp.frac_bits, "summands", (int)fp.summands);
    rc = params == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
                        : agg_log_json(j, "begin", 0, params, at, err);
    json_decref(params);
    if (rc != 0) {
        goto out;
    }
    pthread_mutex_lock(&j->mu);
    j->fp = fp;
    doc = sum_doc(j, active, na);
    json_array_set_new(j->aggs, 0, doc != NULL ? doc : json_null());
    fs_jobsm_opened(&j->st, 0, active, na, at);
    j->deadline_mono = agg_now_mono() + (double)j->spec.round_timeout_s;
    pthread_mutex_unlock(&j->mu);
    rc = doc == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
out:
    free(active);
    return rc;
}

int agg_begin_first(agg_job *j, double at, struct fs_err *err)
{
    return j->fed           ? agg_begin_fed(j, 0, at, err)
           : j->ops != NULL ? j->ops->begin(j, 0, at, err)
                            : agg_begin_sum(j, NULL, at, err);
}

/* fedsvd/fedpca: begin aggregation r; it opens with the exponents round.
 * Parties keep their own fixed point (lib/proto/fedsvd.h, fedpca.h). */
int agg_begin_fed(agg_job *j, uint32_t r, double at, struct fs_err *err)
{
    uint32_t *active = NULL;
    size_t na = 0;
    uint64_t len = agg_len(j, r);
    uint64_t own = len; /* words this server sums: its window when sharded */
    json_t *params;
    json_t *doc;
    int rc;

    rc = agg_shard_is_sharded(j, r) ? agg_shard_begin(j, r, len, &active, &na, &own, err)
                                    : fs_jobsm_begin(&j->st, j->sm, r, len, &active, &na, err);
    if (rc != 0) {
        agg_after_sm_error(j, rc, err);
        return rc;
    }
    params = json_pack("{s:i, s:I}", "r", (int)r, "len", (json_int_t)len);
    rc = params == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
                        : agg_log_json(j, "begin", 0, params, at, err);
    json_decref(params);
    if (rc != 0) {
        free(active);
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    j->len = own;
    j->nchunks = (own + j->chunk_words - 1) / j->chunk_words;
    doc = json_pack("{s:i, s:s, s:I, s:I, s:I, s:s, s:o, s:n, s:n, s:n, s:n}", "index", (int)r,
                    "kind", agg_is_stats(j, r) ? "stats" : "svd", "length", (json_int_t)len,
                    "chunk_words", (json_int_t)j->chunk_words, "chunks",
                    (json_int_t)((len + j->chunk_words - 1) / j->chunk_words), /* all shards' */
                    "phase", fs_job_phase_name(FS_JOB_EXPONENTS), "active",
                    fs_wire_ids_encode(active, na), "exponents", "survivors", "signatures", "sum");
    json_array_set_new(j->aggs, r, doc != NULL ? doc : json_null());
    fs_jobsm_opened(&j->st, r, active, na, at);
    j->deadline_mono = agg_now_mono() + (double)j->spec.round_timeout_s;
    /* (on the worker, after a statistics aggregation) the new round is open
     * from now on: its status shows it, so its messages must not be refused
     * as closed while the worker still persists the job */
    fs_jobsm_set_finishing(&j->st, 0);
    pthread_mutex_unlock(&j->mu);
    free(active);
    return doc == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
}

/* ------------------------------------------------------------ results */

/* sum.npy and the Result manifest. */
static int write_result(agg_job *j, const uint64_t *sum, json_t **out, struct fs_err *err)
{
    char dir[4400];
    char path[4500];
    char hex[65];
    fs_mat *mat = NULL;
    const uint32_t *u3;
    size_t n3 = 0;
    json_t *res = NULL;
    int rc;

    *out = NULL;
    snprintf(dir, sizeof dir, "%s/result", j->dir);
    snprintf(path, sizeof path, "%s/sum.npy", dir);
    rc = fs_mkdir_p(dir, err);
    if (rc != 0) {
        return rc;
    }
    mat = fs_mat_new_uninit((size_t)j->spec.rows, (size_t)j->spec.cols);
    if (mat == NULL) {
        return fs_err_set(err, FS_ENOMEM, "cannot hold the %llu x %llu result",
                          (unsigned long long)j->spec.rows, (unsigned long long)j->spec.cols);
    }
    /* the vector is the matrix in column-major order, as is fs_mat with ld = rows */
    fs_fixedpt_decode(&j->fp, sum, mat->data, (size_t)j->len);
    rc = fs_npy_write_mat(path, mat, err);
    fs_mat_free(mat);
    if (rc == 0) {
        rc = agg_file_sha256_hex(path, hex, err);
    }
    if (rc != 0) {
        return rc;
    }
    u3 = fs_secagg_server_set(j->sm, 3, &n3);
    res = json_pack("{s:s, s:[I, I], s:i, s:o, s:o, s:[{s:s, s:[I, I], s:s}], s:{s:f, s:i, "
                    "s:i}}",
                    "algorithm", fs_algo_name(j->spec.algo), "shape", (json_int_t)j->spec.rows,
                    (json_int_t)j->spec.cols, "parties", (int)j->n, "survivors",
                    fs_wire_ids_encode(u3, n3), "dropped", agg_dropped_of(j, u3, n3), "files",
                    "name", "sum.npy", "shape", (json_int_t)j->spec.rows, (json_int_t)j->spec.cols,
                    "sha256", hex, "fixed_point", "bound", j->fp.bound, "frac_bits",
                    j->fp.frac_bits, "summands", (int)j->fp.summands);
    if (res == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    *out = res;
    return 0;
}

/*
 * A fedpca statistics aggregation is complete: unmask, check the
 * contributors (the same in every aggregation), and publish the ring sum to
 * the parties (it is padded with offsets only they can remove). Also run on
 * replay, before the next aggregation's "begin".
 */
int agg_finish_stats(agg_job *j, double at, struct fs_err *err)
{
    unsigned tries = 0; /* waits for storage */
    const uint64_t *sum = NULL;
    const uint32_t *u3;
    size_t n3 = 0;
    char dir[4400];
    char path[4500];
    char hex[65];
    int rc;

    rc = fs_secagg_server_finish(j->sm, &sum, err);
    if (rc != 0) {
        return rc;
    }
    u3 = fs_secagg_server_set(j->sm, 3, &n3);
    rc = fs_fedpca_server_check_round(&j->fj, j->spec.fed.allow_dropouts, j->first_u3, j->nfirst,
                                      u3, n3, err);
    if (rc != 0) {
        return rc;
    }
    if (j->first_u3 == NULL) {
        j->first_u3 = malloc((n3 + 1) * sizeof *j->first_u3);
        if (j->first_u3 == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        memcpy(j->first_u3, u3, n3 * sizeof *u3);
        j->nfirst = n3;
    }
    snprintf(dir, sizeof dir, "%s/result", j->dir);
    do { /* disk full: the job waits for space */
        rc = fs_mkdir_p(dir, err);
    } while (agg_storage_wait(j, rc, err, &tries));
    if (rc == 0 && agg_sum_path(j, j->st.r, path, sizeof path) != 0) {
        rc = fs_err_set(err, FS_EINVAL, "path too long");
    }
    if (rc == 0) {
        do {
            rc = fs_npy_write_u64(path, sum, (size_t)j->len, err);
        } while (agg_storage_wait(j, rc, err, &tries));
    }
    if (rc == 0) {
        rc = agg_file_sha256_hex(path, hex, err);
    }
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    fs_jobsm_record_timing(&j->st, FS_JOB_UNMASKING, at);
    if (agg_cur_doc(j) != NULL) {
        json_object_set_new(agg_cur_doc(j), "phase", json_string(fs_job_phase_name(FS_JOB_DONE)));
        json_object_set_new(agg_cur_doc(j), "sum",
                            json_pack("{s:I, s:s}", "words", (json_int_t)j->len, "sha256", hex));
    }
    pthread_mutex_unlock(&j->mu);
    return 0;
}

/* Publish S and V' (U' for features) and build the Result. */
static int write_fed_result(agg_job *j, const struct fs_fedsvd_published *pub, const uint32_t *u3,
                            size_t n3, size_t n_included, int e, json_t **out, struct fs_err *err)
{
    const char *shared = j->spec.fed.partition == FS_JOB_FEATURES ? "uprime.npy" : "vprime.npy";
    uint64_t other = j->spec.fed.partition == FS_JOB_FEATURES ? j->spec.rows : j->spec.cols;
    double rtol = (double)(j->spec.rows > j->spec.cols ? j->spec.rows : j->spec.cols) * DBL_EPSILON;
    char dir[4400];
    char p_s[4500];
    char p_v[4500];
    char h_s[65];
    char h_v[65];
    json_t *sv = json_array();
    json_t *res;
    size_t rank = 0;
    int rc;

    *out = NULL;
    snprintf(dir, sizeof dir, "%s/result", j->dir);
    snprintf(p_s, sizeof p_s, "%s/s.npy", dir);
    snprintf(p_v, sizeof p_v, "%s/%s", dir, shared);
    rc = fs_mkdir_p(dir, err);
    if (rc == 0) {
        rc = fs_npy_write_vec(p_s, pub->s, pub->r, err);
    }
    if (rc == 0) {
        rc = fs_npy_write_mat(p_v, pub->vc, err);
    }
    if (rc == 0) {
        rc = agg_file_sha256_hex(p_s, h_s, err);
    }
    if (rc == 0) {
        rc = agg_file_sha256_hex(p_v, h_v, err);
    }
    if (rc != 0) {
        json_decref(sv);
        return rc;
    }
    for (size_t i = 0; i < pub->r; i++) {
        if (pub->r > 0 && pub->s[i] > rtol * pub->s[0]) {
            rank++;
        }
        json_array_append_new(sv, json_real(pub->s[i]));
    }
    res = json_pack("{s:s, s:s, s:[I, I], s:i, s:o, s:o, s:I, s:o, s:I, s:I, s:f, s:o, s:f, s:i, "
                    "s:[{s:s, s:[I], s:s}, {s:s, s:[I, I], s:s}]}",
                    "algorithm", fs_algo_name(j->spec.algo), "partition",
                    fs_job_partition_name(j->spec.fed.partition), "shape", (json_int_t)j->spec.rows,
                    (json_int_t)j->spec.cols, "parties", (int)j->n, "survivors",
                    fs_wire_ids_encode(u3, n3), "dropped", agg_dropped_of(j, u3, n3), "n_included",
                    (json_int_t)n_included, "k",
                    j->spec.fed.k > 0 ? json_integer((json_int_t)j->spec.fed.k) : json_null(), "r",
                    (json_int_t)pub->r, "rank", (json_int_t)rank, "rtol", rtol, "singular_values",
                    sv, "total_sq", pub->total_sq, "public_exponent", e, "files", "name", "s.npy",
                    "shape", (json_int_t)pub->r, "sha256", h_s, "name", shared, "shape",
                    (json_int_t)other, (json_int_t)pub->r, "sha256", h_v);
    if (res == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    *out = res;
    return 0;
}

/* The SVD aggregation's checks and its decoded sum X' (on success *y). */
static int decode_svd(agg_job *j, const uint64_t *sum, const uint32_t *u3, size_t n3,
                      size_t *n_included, int *e, fs_mat **y, struct fs_err *err)
{
    int rc = 0;

    if (j->spec.algo == FS_ALGO_FEDPCA && j->naggs > 1) {
        rc = fs_fedpca_server_check_round(&j->fj, j->spec.fed.allow_dropouts, j->first_u3,
                                          j->nfirst, u3, n3, err);
    }
    if (rc == 0) {
        rc = fs_fedsvd_server_check_contributors(&j->fj, j->spec.fed.allow_dropouts, u3, n3,
                                                 n_included, err);
    }
    if (rc == 0) {
        pthread_mutex_lock(&j->mu);
        rc = fs_jobsm_agreed_exponent(&j->st, u3, n3, e, err);
        pthread_mutex_unlock(&j->mu);
    }
    if (rc == 0 && j->sj != NULL) {
        return 0; /* sharded: every shard decodes its own rows (agg_shard_finish_svd) */
    }
    if (rc == 0) {
        /* decode in place: the ring sum becomes X' without a second N x d buffer */
        uint64_t n = 0;
        uint64_t *owned = fs_secagg_server_take_sum(j->sm, &n);
        rc = owned == NULL || owned != sum || n != j->len
                 ? fs_err_set(err, FS_EINTERNAL, "the aggregation's sum is not available")
                 : fs_fedsvd_server_decode_owned(&j->fj, *e, owned, n, y, err);
        if (owned != NULL && owned != sum) {
            free(owned);
        }
    }
    return rc;
}

/*
 * The SVD aggregation is complete: unmask, check the contributors, decode
 * X' = A X B and factorize it (phase "factorizing", on this worker thread,
 * never an HTTP thread), publish S and the masked shared factor.
 */
static int finish_svd(agg_job *j, json_t **out, struct fs_err *err)
{
    unsigned tries = 0; /* waits for storage */
    const uint64_t *sum = NULL;
    const uint32_t *u3;
    uint32_t *u3c = NULL;
    size_t n3 = 0;
    size_t n_included = 0;
    struct fs_fedsvd_published pub = {0};
    enum fs_topk_method method =
        j->spec.fed.method == FS_JOB_RANDOMIZED ? FS_TOPK_RANDOMIZED : FS_TOPK_AUTO;
    fs_mat *y = NULL;
    struct fs_prg_term *plan = NULL; /* sharded: what the peers unmask with (secret) */
    size_t np = 0;
    int e = 0;
    int rc;

    *out = NULL;
    if (j->sj != NULL && (rc = fs_secagg_server_unmask_plan(j->sm, &plan, &np, err)) != 0) {
        return rc;
    }
    rc = fs_secagg_server_finish(j->sm, &sum, err);
    if (rc != 0) {
        fs_secagg_plan_free(plan, np);
        return rc;
    }
    u3 = fs_secagg_server_set(j->sm, 3, &n3);
    u3c = malloc((n3 + 1) * sizeof *u3c);
    if (u3c == NULL) {
        fs_secagg_plan_free(plan, np);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    memcpy(u3c, u3, n3 * sizeof *u3);
    rc = decode_svd(j, sum, u3c, n3, &n_included, &e, &y, err);
    if (rc == 0 && j->sj != NULL) {
        pthread_mutex_lock(&j->mu);
        fs_jobsm_factorizing(&j->st, agg_now_wall());
        pthread_mutex_unlock(&j->mu);
        rc = agg_shard_finish_svd(j, plan, np, u3c, n3, e, &pub, err);
    }
    fs_secagg_plan_free(plan, np);
    if (rc != 0) {
        goto out;
    }
    pthread_mutex_lock(&j->mu);
    if (j->sj == NULL) {
        fs_jobsm_factorizing(&j->st, agg_now_wall());
    }
    if (agg_cur_doc(j) != NULL) {
        json_object_set_new(agg_cur_doc(j), "phase", json_string(fs_job_phase_name(FS_JOB_DONE)));
    }
    pthread_mutex_unlock(&j->mu);
    agg_persist_state(j, NULL);
    /* The ring sum is decoded (it is y now): free the rest of the secagg state. */
    fs_secagg_server_free(j->sm);
    j->sm = NULL;
    rc = j->sj != NULL
             ? 0 /* factorized */
             : fs_fedsvd_server_factorize(y, (size_t)j->spec.fed.k, method, NULL, &pub, err);
    fs_mat_free(y);
    y = NULL;
    if (rc == 0) {
        do { /* disk full: the job waits for space */
            rc = write_fed_result(j, &pub, u3c, n3, n_included, e, out, err);
        } while (agg_storage_wait(j, rc, err, &tries));
    }
out:
    fs_mat_free(y);
    fs_fedsvd_published_clear(&pub);
    free(u3c);
    return rc;
}

/* secure-sum: unmask and write sum.npy. */
static int finish_sum(agg_job *j, json_t **out, struct fs_err *err)
{
    unsigned tries = 0; /* waits for storage */
    const uint64_t *sum = NULL;
    int rc = fs_secagg_server_finish(j->sm, &sum, err);

    *out = NULL;
    if (rc == 0) {
        do { /* disk full: the job waits for space */
            rc = write_result(j, sum, out, err);
        } while (agg_storage_wait(j, rc, err, &tries));
    }
    return rc;
}

static void fail_after_finish(agg_job *j, const char *what, const struct fs_err *err)
{
    if (j->sm != NULL && fs_secagg_server_phase(j->sm) == FS_SECAGG_ABORTED) {
        agg_fail_job(j, fs_secagg_server_abort_reason(j->sm));
    } else {
        char reason[600];
        snprintf(reason, sizeof reason, "%s: %s", what, err->msg);
        agg_fail_job(j, reason);
    }
}

/* A fedpca statistics round is unmasked: publish its sum, go on to the next. */
static void next_stats(agg_job *j)
{
    struct fs_err err = {0};
    double at = agg_now_wall();
    int rc = agg_finish_stats(j, at, &err);

    if (rc == 0) {
        rc = agg_begin_fed(j, j->st.r + 1, at, &err); /* it ends finishing */
    }
    if (rc != 0) {
        fail_after_finish(j, agg_is_internal(rc) ? "unmasking failed" : "statistics round", &err);
    } else {
        agg_persist_state(j, NULL);
    }
}

/* The last aggregation is unmasked (and factorized): the result, the end. */
static void finish_job(agg_job *j)
{
    struct fs_err err = {0};
    json_t *res = NULL;
    char *res_s = NULL;
    double at;
    int rc = j->fed ? finish_svd(j, &res, &err) : finish_sum(j, &res, &err);

    if (rc == 0) {
        res_s = json_dumps(res, JSON_COMPACT);
        rc = res_s == NULL ? fs_err_set(&err, FS_ENOMEM, "out of memory") : 0;
    }
    at = agg_now_wall();
    if (rc == 0) {
        rc = agg_log_event(j, "done", 0, 0, NULL, 0, at, &err);
    }
    if (rc != 0) {
        fail_after_finish(j, j->fed ? "factorization failed" : "unmasking failed", &err);
        json_decref(res);
        free(res_s);
        return;
    }
    agg_teststop_reached(j->id, FS_JOB_DONE, j->st.r); /* FEDSVD_TEST_STOP_AT_PHASE=done */
    pthread_mutex_lock(&j->mu);
    fs_jobsm_record_timing(&j->st, j->st.phase, at);
    fs_jobsm_done(&j->st);
    j->result = res;
    if (agg_cur_doc(j) != NULL) {
        json_object_set_new(agg_cur_doc(j), "phase", json_string(fs_job_phase_name(FS_JOB_DONE)));
    }
    pthread_mutex_unlock(&j->mu);
    agg_persist_state(j, res_s);
    fs_log_pack(FS_LOG_INFO, "job done", "{s:s, s:f, s:f}", "job", j->id, "unmasking_s",
                j->st.timings[FS_JOB_UNMASKING], "factorizing_s",
                j->st.timings[FS_JOB_FACTORIZING]);
    fs_secagg_server_free(j->sm);
    j->sm = NULL;
    agg_rm_chunks(j);
    free(res_s);
}

static void *finish_worker(void *arg)
{
    agg_job *j = arg;
    enum fs_job_phase ph;
    uint32_t r;

    pthread_mutex_lock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    ph = j->st.phase;
    r = j->st.r;
    pthread_mutex_unlock(&j->mu);
    if (j->sm == NULL) {
        /* the job ended meanwhile */
    } else if (j->ops != NULL) {
        j->ops->worker(j);
    } else if (j->fed && agg_is_stats(j, j->st.r)) {
        next_stats(j);
    } else {
        finish_job(j);
    }
    pthread_mutex_lock(&j->mu);
    agg_round_clock_locked(j, ph, r); /* a round it opened (fedpca: the next exponents) */
    pthread_mutex_unlock(&j->mu);
    pthread_mutex_unlock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    fs_jobsm_set_finishing(&j->st, 0);
    j->worker_exited = 1;
    pthread_mutex_unlock(&j->mu);
    agg_wake(j->mgr);
    return NULL;
}

int agg_start_worker(agg_job *j)
{
    int old;
    int rc;

    /* the previous aggregation's worker, if the driver has not joined it yet */
    pthread_mutex_lock(&j->mu);
    old = j->worker_running;
    j->worker_running = 0;
    pthread_mutex_unlock(&j->mu);
    if (old) {
        pthread_join(j->worker, NULL);
    }
    pthread_mutex_lock(&j->mu);
    fs_jobsm_set_finishing(&j->st, 1);
    j->worker_exited = 0;
    rc = pthread_create(&j->worker, NULL, finish_worker, j);
    j->worker_running = rc == 0;
    pthread_mutex_unlock(&j->mu);
    return rc;
}
