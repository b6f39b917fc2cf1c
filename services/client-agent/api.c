/* The agent's HTTP API: the operator's participations (bearer token), and
 * health, metrics and the contract for anyone. Handlers validate, persist
 * and hand work to a worker thread; they never run the protocol. */
#include "agent.h"

#include "core/hex.h"
#include "crypto/ct.h"
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "io/matio.h"
#include "net/http_client.h"
#include "net/reply.h"
#include "net/storage.h"
#include "net/svc.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

json_t *ca_api_part_json(const struct ca_part_rec *r)
{
    json_t *o = json_pack(
        "{s:s, s:s, s:i, s:s, s:s, s:s, s:f, s:I, s:I, s:s, s:s, s:s, s:{s:s, s:s}, s:[I, I]}",
        "id", r->id, "job_id", r->job_id, "party", (int)r->party, "algorithm", r->algorithm,
        "state", r->state, "phase", r->phase, "progress", r->progress, "bytes_sent",
        (json_int_t)r->bytes_sent, "bytes_received", (json_int_t)r->bytes_received, "created_at",
        r->created_at, "updated_at", r->updated_at, "job_url", r->job_url, "dataset", "path",
        r->dataset_path, "format", r->dataset_format, "shape", (json_int_t)r->rows,
        (json_int_t)r->cols);

    if (o == NULL) {
        return NULL;
    }
    if (json_object_set_new(o, "error",
                            r->error[0] != '\0' ? json_string(r->error) : json_null()) != 0 ||
        json_object_set_new(o, "fail_at",
                            r->fail_at[0] != '\0' ? json_string(r->fail_at) : json_null()) != 0 ||
        json_object_set_new(o, "restarts", json_integer((json_int_t)r->restarts)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int id_ok(const char *id)
{
    if (id == NULL || strncmp(id, "p-", 2) != 0 || strlen(id) != 34) {
        return 0;
    }
    for (const char *p = id + 2; *p != '\0'; p++) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

static int new_id(char out[CA_ID_MAX], struct fs_err *err)
{
    uint8_t b[16];
    int rc = fs_rand_bytes(b, sizeof b, err);

    if (rc != 0) {
        return rc;
    }
    out[0] = 'p';
    out[1] = '-';
    fs_hex_encode(b, sizeof b, out + 2);
    return 0;
}

static int reply_part(fs_http_resp *resp, unsigned status, const struct ca_part_rec *r)
{
    json_t *j = ca_api_part_json(r);

    if (j == NULL) {
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "out of memory");
    }
    return fs_http_resp_json(resp, status, j);
}

/* ---- GET /v1/identity ---- */

static int h_identity(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct ca_agent *ag = ctx;
    char fpr[FS_ED25519_FPR_LEN + 1];
    uint8_t pk[FS_ED25519_KEY_LEN];
    struct fs_err err;

    (void)req;
    fs_err_clear(&err);
    if (ca_files_identity_public(ag->cfg.data_dir, pk, &err) != 0) {
        err.code = FS_EINTERNAL;
        return fs_http_problem_err(resp, &err);
    }
    fs_ed25519_fpr_format(pk, fpr);
    return fs_http_resp_json(resp, 200,
                             json_pack("{s:s, s:s}", "algorithm", "ed25519", "fingerprint", fpr));
}

/* ---- POST /v1/participations ---- */

/* The invitation's server URLs: plain http:// to a host that is not loopback
 * would carry the party's token and data in the clear, so it is refused (422)
 * unless the agent runs with --insecure-http. Checked again by the HTTP
 * client before every request. */
static int check_urls(const struct ca_agent *ag, const struct fs_agent_request *rq,
                      struct fs_err *err)
{
    if (fs_http_url_check(rq->base_url, ag->cfg.insecure_http, err) != 0) {
        return fs_err_prefix(err, "invitation: job_url: ");
    }
    if (rq->inv.masking_url[0] != '\0' &&
        fs_http_url_check(rq->inv.masking_url, ag->cfg.insecure_http, err) != 0) {
        return fs_err_prefix(err, "invitation: masking_url: ");
    }
    return 0;
}

/* A pinned job names this agent's identity for the party it invites:
 * anything else is a mix-up (another party's invitation, another agent's
 * data dir) that would only fail later in the protocol. 422 material. */
static int check_own_pin(const struct ca_agent *ag, const struct fs_invitation *inv,
                         struct fs_err *err)
{
    char mine[FS_ED25519_FPR_LEN + 1];
    char pinned[FS_ED25519_FPR_LEN + 1];
    uint8_t pk[FS_ED25519_KEY_LEN];
    int rc;

    if (!inv->has_pins) {
        return 0;
    }
    rc = ca_files_identity_public(ag->cfg.data_dir, pk, err);
    if (rc != 0) {
        err->code = FS_EINTERNAL;
        return FS_EINTERNAL;
    }
    if (memcmp(pk, inv->party_keys[inv->party - 1], sizeof pk) == 0) {
        return 0;
    }
    fs_ed25519_fpr_format(pk, mine);
    fs_ed25519_fpr_format(inv->party_keys[inv->party - 1], pinned);
    return fs_err_set(err, FS_EINVAL,
                      "this agent's identity %s is not the one pinned for party %u (%s): is this "
                      "invitation for this agent?",
                      mine, inv->party, pinned);
}

static int load_dataset(const struct ca_agent *ag, struct fs_agent_request *rq, fs_mat **out,
                        struct fs_err *err);
static int load_power_dataset(const struct ca_agent *ag, struct fs_agent_request *rq,
                              fs_mat **dense, fs_csr **sparse, struct fs_err *err);

int ca_api_load_dataset(const struct ca_agent *ag, struct fs_agent_request *rq, fs_mat **dense,
                        fs_csr **sparse, struct fs_err *err)
{
    *sparse = NULL;
    return rq->inv.is_fedpower ? load_power_dataset(ag, rq, dense, sparse, err)
                               : load_dataset(ag, rq, dense, err);
}

/* Load and check the dataset against the invitation: 422 material. */
static int load_dataset(const struct ca_agent *ag, struct fs_agent_request *rq, fs_mat **out,
                        struct fs_err *err)
{
    struct fs_io_caps caps = fs_io_caps_default();
    char resolved[PATH_MAX];
    fs_mat *m = NULL;
    size_t bi = 0;
    size_t bj = 0;
    int rc;

    *out = NULL;
    if (realpath(rq->path, resolved) == NULL) {
        return fs_err_set(err, FS_EINVAL, "%s: cannot open: %s", rq->path, strerror(errno));
    }
    if (strlen(resolved) >= sizeof rq->path) {
        return fs_err_set(err, FS_EINVAL, "%s: path too long", rq->path);
    }
    memcpy(rq->path, resolved, strlen(resolved) + 1);
    /* caps from the job's shape: a bigger file stops at its first excess row */
    caps.max_rows = (size_t)rq->inv.rows;
    caps.max_cols = (size_t)rq->inv.cols;
    caps.max_elems = ag->cfg.max_elements;
    rc = fs_io_load_dense(rq->path, rq->fmt, &caps, &m, err);
    if (rc != 0) {
        if (rc == FS_ERANGE) {
            size_t n = strlen(err->msg);
            snprintf(err->msg + n, sizeof err->msg - n, " (the job's shape is %llu x %llu)",
                     (unsigned long long)rq->inv.rows, (unsigned long long)rq->inv.cols);
        }
        err->code = FS_EINVAL;
        return FS_EINVAL;
    }
    if (m->rows != rq->inv.rows || m->cols != rq->inv.cols) {
        rc = fs_err_set(err, FS_EINVAL, "%s: shape %zu x %zu does not match the job's %llu x %llu",
                        rq->path, m->rows, m->cols, (unsigned long long)rq->inv.rows,
                        (unsigned long long)rq->inv.cols);
        goto fail;
    }
    if (!fs_mat_all_finite(m, &bi, &bj)) {
        rc = fs_err_set(err, FS_EINVAL, "%s: row %zu, column %zu: not a finite number", rq->path,
                        bi + 1, bj + 1);
        goto fail;
    }
    if (m->ld != m->rows) {
        /* the worker reads the vector as contiguous column-major words */
        fs_mat *c = fs_mat_dup(m);
        if (c == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
            goto fail;
        }
        fs_mat_wipe(m);
        fs_mat_free(m);
        m = c;
    }
    *out = m;
    return 0;
fail:
    fs_mat_wipe(m);
    fs_mat_free(m);
    return rc;
}

/* A power-method job's dataset: dense (.npy, CSV, ...) or, for a MatrixMarket
 * coordinate file, kept sparse (CSR, never densified); it must be this
 * party's s_i x d (ca_power_check). 422 material. */
static int load_power_dataset(const struct ca_agent *ag, struct fs_agent_request *rq,
                              fs_mat **dense, fs_csr **sparse, struct fs_err *err)
{
    struct fs_io_caps caps = fs_io_caps_default();
    char resolved[PATH_MAX];
    size_t bi = 0;
    size_t bj = 0;
    int rc;

    *dense = NULL;
    *sparse = NULL;
    if (realpath(rq->path, resolved) == NULL) {
        return fs_err_set(err, FS_EINVAL, "%s: cannot open: %s", rq->path, strerror(errno));
    }
    if (strlen(resolved) >= sizeof rq->path) {
        return fs_err_set(err, FS_EINVAL, "%s: path too long", rq->path);
    }
    memcpy(rq->path, resolved, strlen(resolved) + 1);
    caps.max_rows = (size_t)rq->inv.rows;
    caps.max_cols = (size_t)rq->inv.cols;
    caps.max_elems = ag->cfg.max_elements;
    caps.max_nnz = ag->cfg.max_elements;
    if (rq->fmt == FS_FMT_MTX || (rq->fmt == FS_FMT_AUTO && fs_io_is_sparse_file(rq->path))) {
        rc = fs_io_load_sparse(rq->path, rq->fmt, &caps, sparse, err);
        if (rc == 0) {
            rc = fs_csr_check(*sparse, err); /* finite values, structure */
            if (rc != 0) {
                fs_err_prefix(err, "%s: ", rq->path);
            }
        }
        if (rc == 0) {
            rc = ca_power_check(&rq->inv, (*sparse)->rows, (*sparse)->cols, err);
        }
    } else {
        rc = fs_io_load_dense(rq->path, rq->fmt, &caps, dense, err);
        if (rc == 0 && !fs_mat_all_finite(*dense, &bi, &bj)) {
            rc = fs_err_set(err, FS_EINVAL, "%s: row %zu, column %zu: not a finite number",
                            rq->path, bi + 1, bj + 1);
        }
        if (rc == 0) {
            rc = ca_power_check(&rq->inv, (*dense)->rows, (*dense)->cols, err);
        }
    }
    if (rc != 0) {
        if (rc == FS_ERANGE) {
            size_t n = strlen(err->msg);
            snprintf(err->msg + n, sizeof err->msg - n, " (party %u of the job holds %llu x %llu)",
                     rq->inv.party, (unsigned long long)rq->inv.rows,
                     (unsigned long long)rq->inv.cols);
        }
        if (*dense != NULL) {
            fs_mat_wipe(*dense);
            fs_mat_free(*dense);
            *dense = NULL;
        }
        if (*sparse != NULL) {
            fs_wipe((*sparse)->vals, (*sparse)->nnz * sizeof *(*sparse)->vals);
            fs_csr_free(*sparse);
            *sparse = NULL;
        }
        err->code = rc == FS_ENOMEM ? FS_ENOMEM : FS_EINVAL;
        return err->code;
    }
    return 0;
}

/* The invitation without its token, as stored. */
static char *public_invitation(const struct fs_invitation *inv)
{
    struct fs_invitation copy = *inv;
    json_t *j;
    char *s = NULL;

    fs_wipe(copy.token, sizeof copy.token);
    j = fs_invitation_encode(&copy);
    if (j != NULL) {
        json_object_del(j, "token");
        s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    }
    json_decref(j);
    fs_invitation_wipe(&copy);
    return s;
}

/* The record of a new participation from its request. */
static void fill_record(struct ca_part *p)
{
    snprintf(p->rec.job_id, sizeof p->rec.job_id, "%s", p->req.inv.job_id);
    p->rec.party = p->req.inv.party;
    snprintf(p->rec.algorithm, sizeof p->rec.algorithm, "%s", p->req.inv.algorithm);
    snprintf(p->rec.state, sizeof p->rec.state, "running");
    snprintf(p->rec.phase, sizeof p->rec.phase, "advertise_keys");
    ca_files_now(p->rec.created_at);
    memcpy(p->rec.updated_at, p->rec.created_at, sizeof p->rec.updated_at);
    snprintf(p->rec.dataset_path, sizeof p->rec.dataset_path, "%s", p->req.path);
    snprintf(p->rec.dataset_format, sizeof p->rec.dataset_format, "%s", p->req.format);
    p->rec.rows = p->req.inv.rows;
    p->rec.cols = p->req.inv.cols;
    snprintf(p->rec.fail_at, sizeof p->rec.fail_at, "%s",
             p->req.fail_at != FS_AGENT_FAIL_NONE ? fs_agent_fail_at_name(p->req.fail_at) : "");
    if (p->req.fail_round > 0) { /* "NAME:R" */
        size_t n = strlen(p->rec.fail_at);
        snprintf(p->rec.fail_at + n, sizeof p->rec.fail_at - n, ":%u", p->req.fail_round);
    }
    snprintf(p->rec.job_url, sizeof p->rec.job_url, "%s", p->req.inv.job_url);
}

/* A new participation from the request body: the invitation checked, the
 * dataset loaded and checked, the privacy-ledger charge, an id and the
 * record. @return 0, or -1 with the problem response set. */
static int read_request(struct ca_agent *ag, fs_http_req *req, fs_http_resp *resp,
                        struct ca_part **out, struct ca_ledger_charge *charge)
{
    struct fs_err err = {0};
    struct ca_part *p = NULL;
    json_t *body = NULL;
    char dsid[CA_LEDGER_DATASET_ID_MAX + 1];
    int rc;

    *out = NULL;
    if (fs_http_body_json(req, resp, &body) != 0) {
        return -1;
    }
    p = calloc(1, sizeof *p);
    if (p == NULL) {
        json_decref(body);
        (void)fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "out of memory");
        return -1;
    }
    rc = ca_ledger_take_dataset_id(body, dsid, &err); /* privacy ledger: dataset.id */
    if (rc == 0) {
        rc = fs_agent_request_parse(body, ag->cfg.max_elements, &p->req, &err);
    }
    if (rc == 0) {
        rc = check_urls(ag, &p->req, &err);
    }
    if (rc == 0) {
        rc = check_own_pin(ag, &p->req.inv, &err);
    }
    if (rc == 0) {
        rc = ca_api_load_dataset(ag, &p->req, &p->data, &p->sparse, &err);
    }
    if (rc == 0) { /* privacy ledger: the job's rho and the dataset's identity (hashes the file) */
        rc = ca_ledger_charge_for(&p->req.inv, dsid, p->req.path, charge, &err);
    }
    if (rc == 0 && charge->sha256[0] != '\0') {
        memcpy(p->dataset_sha256, charge->sha256, sizeof p->dataset_sha256);
    } else if (rc == 0) { /* a resumed participation checks its data is the same */
        uint8_t d[32];
        rc = ca_files_sha256(p->req.path, d, &err);
        if (rc == 0) {
            fs_hex_encode(d, sizeof d, p->dataset_sha256);
        }
    }
    if (rc == 0) {
        rc = new_id(p->rec.id, &err);
    }
    if (rc == 0) { /* the participation's secret: all its client randomness derives from it */
        rc = fs_rand_bytes(p->secret, sizeof p->secret, &err);
    }
    if (rc == 0 && snprintf(p->dir, sizeof p->dir, "%s/participations/%s", ag->cfg.data_dir,
                            p->rec.id) >= (int)sizeof p->dir) {
        rc = fs_err_set(&err, FS_EINVAL, "data dir path too long");
    }
    json_decref(body);
    if (rc != 0) {
        ca_part_free(p);
        (void)fs_http_problem_err(resp, &err);
        return -1;
    }
    fill_record(p);
    *out = p;
    return 0;
}

/* Under ag->mu: the cap on running participations, one participation per
 * (job, party), the privacy budget; then the token file, the row and the
 * worker, which takes p (*snap: the record as it started).
 * @return 0, or -1 with the problem response set (p still the caller's). */
static int admit_locked(struct ca_agent *ag, struct ca_part *p, const char *inv_json,
                        const struct ca_ledger_charge *charge, fs_http_resp *resp,
                        struct ca_part_rec *snap)
{
    struct fs_err err = {0};
    struct fs_ledger_decision dec;
    uint8_t sealed[CA_SEALED_MAX];
    size_t sealed_len = 0;
    int reserved = 0;
    int rc;

    if (ag->nrunning >= ag->cfg.max_running) {
        (void)fs_http_problem(resp, 429, FS_PROBLEM_TOO_MANY_JOBS, NULL,
                              "%u participations are running, the most this agent runs at once "
                              "(--max-participations)",
                              ag->nrunning);
        return -1;
    }
    rc = ca_store_exists_live(ag->db, p->rec.job_id, p->rec.party, &err);
    if (rc != 0) {
        if (rc < 0) {
            (void)fs_http_problem_err(resp, &err);
        } else {
            (void)fs_http_problem(
                resp, 409, FS_PROBLEM_CONFLICT, NULL,
                "party %u of job %s already has a running or finished participation", p->rec.party,
                p->rec.job_id);
        }
        return -1;
    }
    if (charge->charged) {
        /* check and reserve in one transaction, under ag->mu like the checks above */
        rc = ca_ledger_reserve(ag, &p->rec, charge, &dec, &err);
        if (rc != 0) {
            (void)fs_http_problem_err(resp, &err);
            return -1;
        }
        if (!dec.allowed) {
            fs_log_pack(FS_LOG_INFO, "participation refused: privacy budget", "{s:s, s:s, s:s}",
                        "job", p->rec.job_id, "dataset", charge->dataset, "reason", dec.reason);
            (void)ca_ledger_reply_refused(resp, p->rec.algorithm, charge, &dec);
            return -1;
        }
        reserved = 1;
    }
    rc = fs_mkdir_p(p->dir, &err);
    if (rc == 0) {
        /* the secret and the token, sealed under agent.key before any message */
        rc = ca_files_seal_resume(ag->cfg.data_dir, p->rec.id, p->secret, p->req.inv.token, sealed,
                                  &sealed_len, &err);
    }
    if (rc == 0) {
        rc =
            ca_store_insert(ag->db, &p->rec, inv_json, sealed, sealed_len, p->dataset_sha256, &err);
    }
    if (rc == 0) {
        *snap = p->rec; /* once started, the worker owns p */
        rc = ca_worker_start_locked(ag, p, &err);
        if (rc != 0) {
            snprintf(p->rec.state, sizeof p->rec.state, "failed");
            snprintf(p->rec.error, sizeof p->rec.error, "%s", err.msg);
            if (ca_store_progress(ag->db, &p->rec, NULL) != 0) {
                fs_log(FS_LOG_WARN, "cannot mark a participation failed", NULL);
            }
        }
    }
    if (rc != 0) {
        if (reserved) {
            ca_ledger_cancel(ag, p->rec.id); /* the job never started: nothing spent */
        }
        (void)fs_http_problem_err(resp, &err);
        return -1;
    }
    return 0;
}

static int h_create(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct ca_agent *ag = ctx;
    struct ca_part *p = NULL;
    struct ca_ledger_charge charge;
    struct ca_part_rec snap;
    char *inv_json = NULL;
    char loc[64];
    int rc;

    if (atomic_load(&ag->stopping)) {
        return fs_http_problem(resp, 503, FS_PROBLEM_UNAVAILABLE, NULL,
                               "the agent is shutting down");
    }
    if (read_request(ag, req, resp, &p, &charge) != 0) {
        return 0;
    }
    inv_json = public_invitation(&p->req.inv);
    if (inv_json == NULL) {
        ca_part_free(p);
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "out of memory");
    }
    pthread_mutex_lock(&ag->mu);
    rc = admit_locked(ag, p, inv_json, &charge, resp, &snap);
    pthread_mutex_unlock(&ag->mu);
    free(inv_json);
    if (rc != 0) {
        ca_part_free(p);
        return 0;
    }
    atomic_fetch_add(&ag->started, 1);
    fs_log_pack(FS_LOG_INFO, "participation started", "{s:s, s:s, s:i, s:s, s:I, s:I, s:s?}",
                "participation", snap.id, "job", snap.job_id, "party", (int)snap.party, "algorithm",
                snap.algorithm, "rows", (json_int_t)snap.rows, "cols", (json_int_t)snap.cols,
                "fail_at", snap.fail_at[0] != '\0' ? snap.fail_at : NULL);
    snprintf(loc, sizeof loc, "/v1/participations/%s", snap.id);
    if (reply_part(resp, 201, &snap) == 0 && fs_http_resp_header(resp, "Location", loc) != 0) {
        fs_log(FS_LOG_WARN, "cannot set the Location header", NULL);
    }
    return 0;
}

/* ---- GET / DELETE ---- */

static int h_list(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct ca_agent *ag = ctx;
    struct fs_err err = {0};
    struct ca_part_rec *recs = NULL;
    json_t *arr;
    size_t n = 0;

    (void)req;
    if (ca_store_list(ag->db, CA_LIST_MAX, &recs, &n, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        if (json_array_append_new(arr, ca_api_part_json(&recs[i])) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    free(recs);
    if (arr == NULL) {
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "out of memory");
    }
    return fs_http_resp_json(resp, 200, json_pack("{s:o}", "participations", arr));
}

/* Look up {id}; sets a 404 and returns non-zero when absent. */
static int find(struct ca_agent *ag, fs_http_req *req, fs_http_resp *resp, struct ca_part_rec *r)
{
    struct fs_err err = {0};
    const char *id = fs_http_req_param(req, "id");

    if (!id_ok(id)) {
        fs_http_problem(resp, 404, FS_PROBLEM_NOT_FOUND, NULL, "no such participation");
        return -1;
    }
    if (ca_store_get(ag->db, id, r, &err) != 0) {
        fs_http_problem_err(resp, &err);
        return -1;
    }
    return 0;
}

static int h_get(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct ca_part_rec r;

    if (find(ctx, req, resp, &r) != 0) {
        return 0;
    }
    return reply_part(resp, 200, &r);
}

static int h_delete(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct ca_agent *ag = ctx;
    struct fs_err err = {0};
    struct ca_part_rec r;

    if (find(ag, req, resp, &r) != 0) {
        return 0;
    }
    if (strcmp(r.state, "running") == 0) {
        pthread_mutex_lock(&ag->mu);
        for (struct ca_part *p = ag->parts; p != NULL; p = p->next) {
            if (strcmp(p->rec.id, r.id) == 0) {
                atomic_store(&p->stop, 2);
            }
        }
        pthread_cond_broadcast(&ag->cv);
        pthread_mutex_unlock(&ag->mu);
        snprintf(r.state, sizeof r.state, "failed");
        snprintf(r.error, sizeof r.error, "cancelled by the operator");
        ca_files_now(r.updated_at);
        if (ca_store_progress(ag->db, &r, &err) != 0 && err.code != FS_ESTATE) {
            return fs_http_problem_err(resp, &err);
        }
        fs_log_pack(FS_LOG_INFO, "participation cancelled", "{s:s}", "participation", r.id);
        if (ca_store_get(ag->db, r.id, &r, &err) != 0) {
            return fs_http_problem_err(resp, &err);
        }
    }
    if (strcmp(r.state, "done") == 0) {
        return fs_http_problem(resp, 409, FS_PROBLEM_CONFLICT, NULL,
                               "the participation has already finished successfully");
    }
    return reply_part(resp, 200, &r);
}

/* The manifest of a done participation, or a problem reply (returns NULL). */
static json_t *load_manifest(struct ca_agent *ag, const struct ca_part_rec *r, fs_http_resp *resp)
{
    char path[CA_PATH_MAX + 64];
    json_error_t jerr;
    json_t *j;

    if (strcmp(r->state, "running") == 0) {
        fs_http_problem(resp, 409, FS_PROBLEM_NOT_READY, NULL,
                        "the participation is still running (phase %s)", r->phase);
        return NULL;
    }
    if (strcmp(r->state, "done") != 0) {
        fs_http_problem(resp, 409, FS_PROBLEM_ABORTED, NULL, "the participation failed: %s",
                        r->error);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/participations/%s/manifest.json", ag->cfg.data_dir, r->id);
    j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (j == NULL) {
        fs_log_pack(FS_LOG_ERROR, "cannot read a manifest", "{s:s, s:s}", "participation", r->id,
                    "error", jerr.text);
        fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "the result manifest cannot be read");
    }
    return j;
}

/* "bytes" of every entry of the manifest's "files": the size of the file
 * this agent serves, so that a client can check each download's length as
 * well as its sha256. -1 when a listed file is missing or not a plain file. */
static int add_file_sizes(struct ca_agent *ag, const struct ca_part_rec *r, json_t *manifest)
{
    char path[CA_PATH_MAX + 128];
    struct stat sb;
    size_t i;
    json_t *f;

    json_array_foreach(json_object_get(manifest, "files"), i, f)
    {
        const char *name = json_string_value(json_object_get(f, "name"));
        if (name == NULL || !fs_agent_file_name_ok(name) ||
            snprintf(path, sizeof path, "%s/participations/%s/%s", ag->cfg.data_dir, r->id, name) >=
                (int)sizeof path ||
            stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) ||
            json_object_set_new(f, "bytes", json_integer((json_int_t)sb.st_size)) != 0) {
            fs_log_pack(FS_LOG_ERROR, "a result file of the manifest is missing", "{s:s, s:s}",
                        "participation", r->id, "file", name != NULL ? name : "?");
            return -1;
        }
    }
    return 0;
}

static int h_result(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct ca_agent *ag = ctx;
    struct ca_part_rec r;
    json_t *j;

    if (find(ag, req, resp, &r) != 0) {
        return 0;
    }
    j = load_manifest(ag, &r, resp);
    if (j == NULL) {
        return 0;
    }
    if (add_file_sizes(ag, &r, j) != 0) {
        json_decref(j);
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL,
                               "a result file of the manifest is missing");
    }
    (void)json_object_set_new(j, "participation", json_string(r.id));
    return fs_http_resp_json(resp, 200, j);
}

static int h_result_file(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct ca_agent *ag = ctx;
    struct fs_err err = {0};
    struct fs_agent_result res;
    struct ca_part_rec r;
    const char *name = fs_http_req_param(req, "name");
    char file[FS_AGENT_FILE_NAME_MAX + 8];
    char path[CA_PATH_MAX + 128];
    json_t *j;
    int listed = 0;
    int rc;

    if (find(ag, req, resp, &r) != 0) {
        return 0;
    }
    if (name == NULL || snprintf(file, sizeof file, "%s.npy", name) >= (int)sizeof file ||
        !fs_agent_file_name_ok(file)) {
        return fs_http_problem(resp, 404, FS_PROBLEM_NOT_FOUND, NULL, "no such result file");
    }
    j = load_manifest(ag, &r, resp);
    if (j == NULL) {
        return 0;
    }
    rc = fs_agent_result_parse(j, &res, &err);
    json_decref(j);
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    for (size_t i = 0; i < res.nfiles; i++) {
        listed |= strcmp(res.files[i].name, file) == 0;
    }
    if (!listed) {
        return fs_http_problem(resp, 404, FS_PROBLEM_NOT_FOUND, NULL, "no such result file");
    }
    snprintf(path, sizeof path, "%s/participations/%s/%s", ag->cfg.data_dir, r.id, file);
    rc = fs_http_resp_file(resp, 200, "application/x-npy", path, &err);
    if (rc == FS_ENOTFOUND) {
        return fs_http_problem(resp, 404, FS_PROBLEM_NOT_FOUND, NULL, "no such result file");
    }
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return 0;
}

/* ---- health, metrics, contract ---- */

static int h_healthz(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)req;
    (void)ctx;
    return fs_http_resp_json(resp, 200, fs_svc_health_doc());
}

static int h_readyz(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct ca_agent *ag = ctx;

    (void)req;
    if (atomic_load(&ag->stopping) || ag->db == NULL) {
        return fs_http_problem(resp, 503, FS_PROBLEM_UNAVAILABLE, NULL,
                               "the agent is shutting down");
    }
    /* disk full or read-only: still ready (reads work, writes answer 503) */
    return fs_http_resp_json(
        resp, 200, json_pack("{s:s, s:s}", "status", "ready", "storage", fs_storage_state()));
}

static int h_metrics(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct ca_agent *ag = ctx;
    struct fs_err err = {0};
    uint64_t running = 0;
    uint64_t done = 0;
    uint64_t failed = 0;
    char buf[4096];
    size_t n = 0;
    int w;

    (void)req;
    if (ca_store_counts(ag->db, &running, &done, &failed, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    w = snprintf(buf, sizeof buf,
                 "# HELP fedsvd_agent_up 1 while the agent runs.\n"
                 "# TYPE fedsvd_agent_up gauge\n"
                 "fedsvd_agent_up 1\n"
                 "# HELP fedsvd_agent_participations Participations in agent.db by state.\n"
                 "# TYPE fedsvd_agent_participations gauge\n"
                 "fedsvd_agent_participations{state=\"running\"} %llu\n"
                 "fedsvd_agent_participations{state=\"done\"} %llu\n"
                 "fedsvd_agent_participations{state=\"failed\"} %llu\n"
                 "# HELP fedsvd_agent_participations_started_total Participations started by "
                 "this process.\n"
                 "# TYPE fedsvd_agent_participations_started_total counter\n"
                 "fedsvd_agent_participations_started_total %llu\n"
                 "# HELP fedsvd_agent_bytes_sent_total Body bytes sent to servers.\n"
                 "# TYPE fedsvd_agent_bytes_sent_total counter\n"
                 "fedsvd_agent_bytes_sent_total %llu\n"
                 "# HELP fedsvd_agent_bytes_received_total Body bytes received from servers.\n"
                 "# TYPE fedsvd_agent_bytes_received_total counter\n"
                 "fedsvd_agent_bytes_received_total %llu\n"
                 "# HELP fedsvd_agent_http_connections Open connections to the agent's API.\n"
                 "# TYPE fedsvd_agent_http_connections gauge\n"
                 "fedsvd_agent_http_connections %u\n"
                 "# HELP fedsvd_agent_http_requests_total Requests served, by status class.\n"
                 "# TYPE fedsvd_agent_http_requests_total counter\n",
                 (unsigned long long)running, (unsigned long long)done, (unsigned long long)failed,
                 (unsigned long long)atomic_load(&ag->started),
                 (unsigned long long)atomic_load(&ag->bytes_sent),
                 (unsigned long long)atomic_load(&ag->bytes_received),
                 ag->http != NULL ? fs_http_server_connections(ag->http) : 0u);
    if (w < 0 || (size_t)w >= sizeof buf) {
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "metrics buffer");
    }
    n = (size_t)w;
    for (int c = 1; c <= 5; c++) {
        w = snprintf(buf + n, sizeof buf - n,
                     "fedsvd_agent_http_requests_total{code=\"%dxx\"} %llu\n", c,
                     (unsigned long long)atomic_load(&ag->http_by_class[c]));
        if (w < 0 || (size_t)w >= sizeof buf - n) {
            return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "metrics buffer");
        }
        n += (size_t)w;
    }
    if (fs_http_resp_bytes(resp, 200, "text/plain; version=0.0.4", buf, n) != 0) {
        return -1;
    }
    return 0;
}

static int h_openapi(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct ca_agent *ag = ctx;
    struct fs_err err = {0};
    int rc;

    (void)req;
    if (ag->cfg.openapi[0] == '\0') {
        return fs_http_problem(resp, 404, FS_PROBLEM_NOT_FOUND, NULL,
                               "no contract configured (start the agent with --openapi FILE)");
    }
    rc = fs_http_resp_file(resp, 200, "application/yaml", ag->cfg.openapi, &err);
    if (rc == FS_ENOTFOUND) {
        return fs_http_problem(resp, 404, FS_PROBLEM_NOT_FOUND, NULL,
                               "the contract file is missing");
    }
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return 0;
}

void ca_api_on_request(const struct fs_http_log_entry *e, void *ctx)
{
    struct ca_agent *ag = ctx;
    unsigned c = e->status / 100;

    atomic_fetch_add(&ag->http_by_class[c < 6 ? c : 0], 1);
}

int ca_api_routes(struct ca_agent *ag, struct fs_err *err)
{
    const struct fs_http_route routes[] = {
        {.method = "GET", .pattern = "/healthz", .handler = h_healthz},
        {.method = "GET", .pattern = "/readyz", .handler = h_readyz},
        {.method = "GET", .pattern = "/metrics", .handler = h_metrics},
        {.method = "GET", .pattern = "/openapi.yaml", .handler = h_openapi},
        {.method = "POST",
         .pattern = "/v1/participations",
         .max_body = CA_MAX_BODY,
         .auth = ag->auth,
         .handler = h_create},
        {.method = "GET", .pattern = "/v1/participations", .auth = ag->auth, .handler = h_list},
        {.method = "GET", .pattern = "/v1/identity", .auth = ag->auth, .handler = h_identity},
        {.method = "GET", .pattern = "/v1/participations/{id}", .auth = ag->auth, .handler = h_get},
        {.method = "DELETE",
         .pattern = "/v1/participations/{id}",
         .auth = ag->auth,
         .handler = h_delete},
        {.method = "GET",
         .pattern = "/v1/participations/{id}/result",
         .auth = ag->auth,
         .handler = h_result},
        {.method = "GET",
         .pattern = "/v1/participations/{id}/result/{name}.npy",
         .auth = ag->auth,
         .handler = h_result_file},
        {.method = "GET",
         .pattern = "/v1/privacy-ledger",
         .auth = ag->auth,
         .handler = ca_ledger_h_get},
    };

    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        struct fs_http_route r = routes[i];
        int rc;
        r.ctx = ag;
        rc = fs_http_server_route(ag->http, &r, err);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}
