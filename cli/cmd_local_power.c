/* fedsvd local for the power methods (fedpower, fedpower-utility,
 * fedpower-private, dp-ppm; docs/wire-fedpower.md): the same real processes
 * as the other algorithms (local.c: one aggregation-server,
 * one client-agent per party, no masking server), a job spec with the
 * power-method parameters, and a result of V.npy (d x k), eigenvalues.npy,
 * summary.json (convergence and, with --reference, the subspace error per
 * sync, computed from the broadcast iterates the server keeps at
 * GET /v1/jobs/{job}/aggregations/{r}/z.npy; the privacy report; timings,
 * bytes and peak memory) and convergence.svg (drawn by `fedsvd plot line`'s
 * code). The processes, the agents and the pieces of the summary are
 * local.c's; the power options (shared with `fedsvd job create`) are
 * power_opts.c's. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_docs.h"
#include "io/matio.h"
#include "la/qr.h"
#include "local.h"
#include "local_common.h"
#include "orch.h"
#include "proto/fedpower.h"

#define NOPTS(a)       (sizeof(a) / sizeof((a)[0]))
#define POWER_NPY_HEAD 4096 /* bytes read to parse a .npy header */

/* ---- fedsvd local --algorithm <power method> ---- */

struct power {
    struct local L;
    const char *alg;
    enum fs_algo algo;
    struct fs_job_spec *job; /* the job to create (power parameters from the options) */
    struct orch_power_opts o;
    size_t d, k;
    int *sparse;           /* per party: the file is MatrixMarket coordinate */
    double frob_bound;     /* max_i ||M_i||_F^2 / s_i when computed, else -1 */
    const char *vb_source; /* "given", "frobenius" or "default" */
    const char *reference; /* --reference */
    json_t *spec;          /* what was POSTed (JSON) */
    json_t *per_sync;      /* convergence entries, with the subspace error */
    json_t *subspace;      /* {"initial", "final", ...} or NULL */
    int allow_dropouts;
    double t_reference; /* seconds spent on the subspace errors */
    char v_sha[65];
};

/* rows x cols of a .npy file from its header, without reading the data. */
static int npy_shape(const char *path, size_t *rows, size_t *cols, struct fs_err *err)
{
    uint8_t buf[POWER_NPY_HEAD];
    struct fs_npy_header h;
    size_t n;
    FILE *f = fopen(path, "rb");
    int rc;

    if (f == NULL) {
        return fs_err_set(err, FS_EIO, "%s: cannot open: %s", path, strerror(errno));
    }
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    rc = fs_npy_parse_header(buf, n, NULL, &h, err);
    if (rc != 0) {
        return rc;
    }
    if (h.ndim != 2 || h.dtype != FS_NPY_F8) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected a 2-D <f8 matrix", path);
    }
    *rows = h.shape[0];
    *cols = h.shape[1];
    return 0;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);

    return n >= m && strcmp(s + n - m, suf) == 0;
}

/*
 * Party i's file: its absolute path, rows and columns, whether it is sparse,
 * and (frob != NULL) ||M_i||_F^2. A dense .npy is only opened for its header
 * unless the norm is needed; a MatrixMarket file is loaded as CSR.
 */
static int read_party(struct power *P, size_t i, double *frob)
{
    struct local *L = &P->L;
    char abs[PATH_MAX];
    struct fs_err err;
    size_t rows = 0, cols = 0;
    double f2 = 0.0;

    fs_err_clear(&err);
    if (realpath(L->shown[i], abs) == NULL) {
        return cli_runtime_error(L->cmd, "%s: %s", L->shown[i], strerror(errno));
    }
    L->files[i] = strdup(abs);
    if (L->files[i] == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    P->sparse[i] = fs_io_is_sparse_file(abs);
    if (P->sparse[i]) {
        fs_csr *a = NULL;

        if (fs_io_load_sparse(abs, FS_FMT_AUTO, NULL, &a, &err) != 0) {
            return cli_fs_error(L->cmd, &err);
        }
        rows = a->rows;
        cols = a->cols;
        for (size_t q = 0; q < a->nnz; q++) {
            f2 += a->vals[q] * a->vals[q];
        }
        fs_csr_free(a);
    } else if (frob == NULL && has_suffix(abs, ".npy")) {
        if (npy_shape(abs, &rows, &cols, &err) != 0) {
            return cli_fs_error(L->cmd, &err);
        }
    } else {
        fs_mat *m = NULL;

        if (fs_io_load_dense(abs, FS_FMT_AUTO, NULL, &m, &err) != 0) {
            return cli_fs_error(L->cmd, &err);
        }
        rows = m->rows;
        cols = m->cols;
        for (size_t j = 0; j < m->cols; j++) {
            for (size_t q = 0; q < m->rows; q++) {
                f2 += FS_MAT_AT(m, q, j) * FS_MAT_AT(m, q, j);
            }
        }
        fs_mat_free(m);
    }
    if (rows == 0 || cols == 0) {
        return cli_runtime_error(L->cmd, "%s: an empty matrix", L->shown[i]);
    }
    if (i > 0 && cols != P->d) {
        return cli_runtime_error(L->cmd,
                                 "%s: %zu columns, but %s has %zu (the parties share the "
                                 "features)",
                                 L->shown[i], cols, L->shown[0], P->d);
    }
    P->d = cols;
    L->sizes[i] = rows;
    L->n_rows += rows;
    L->n_cols = cols;
    if (frob != NULL) {
        *frob = f2;
    }
    return CLI_OK;
}

static int read_parties(struct power *P, int need_bound)
{
    P->frob_bound = -1.0;
    for (size_t i = 0; i < P->L.k; i++) {
        double f2 = 0.0;
        int rc = read_party(P, i, need_bound ? &f2 : NULL);

        if (rc != CLI_OK) {
            return rc;
        }
        if (need_bound) {
            double b = f2 / (double)P->L.sizes[i];
            P->frob_bound = b > P->frob_bound ? b : P->frob_bound;
        }
    }
    return CLI_OK;
}

/* The job spec of the run, but for the server's URL and the pins (known
 * once the services are up): P->job, and as JSON in P->spec. */
static int fill_job(struct power *P)
{
    struct local *L = &P->L;
    struct fs_job_spec *spec = P->job;

    snprintf(spec->name, sizeof spec->name, "fedsvd local");
    spec->parties = (uint32_t)L->k;
    spec->threshold = (uint32_t)L->thr;
    spec->allow_low_threshold = L->allow_low_threshold;
    spec->secagg = L->secagg;
    spec->rows = L->n_rows;
    spec->cols = P->d;
    for (size_t i = 0; i < L->k; i++) {
        spec->power.party_rows[i] = L->sizes[i];
    }
    spec->power.allow_dropouts = P->allow_dropouts;
    if (P->algo == FS_ALGO_FEDPOWER_UTILITY &&
        spec->power.noise_exchange != FS_NOISEX_ELEMENTWISE && !P->allow_dropouts) {
        /* one noise exchange, in aggregation 0 (fs_fedpower_exchanges) */
        int rc = local_check_restart_exchanges(L, 1);
        if (rc != CLI_OK) {
            return rc;
        }
    }
    spec->round_timeout_s = (uint32_t)L->round_timeout;
    spec->join_timeout_s = (uint32_t)(L->round_timeout > 60 ? L->round_timeout : 60);
    json_decref(P->spec);
    P->spec = NULL;
    return orch_job_spec_json(L->cmd, spec, &P->spec);
}

static int create_job(struct power *P, json_t **invitations)
{
    struct local *L = &P->L;
    json_t *sent = NULL;
    int rc;

    snprintf(P->job->server_url, sizeof P->job->server_url, "%s", L->server.url);
    rc = local_post_job(L, P->job, &sent, invitations);
    if (rc == CLI_OK) {
        json_decref(P->spec);
        P->spec = sent;
    }
    return rc;
}

/* Download a result file listed in the server's manifest into DIR, verified. */
static int fetch_file(struct power *P, const char *name, int required, char sha_out[65])
{
    struct local *L = &P->L;
    char path[128 + ORCH_ID_MAX], dest[LOCAL_PATH], sha[65];
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if (!local_manifest_sha(L->manifest, name, sha)) {
        if (!required) {
            return CLI_OK;
        }
        return cli_runtime_error(L->cmd,
                                 "GET /v1/jobs/%s/result: the manifest has no %s with a "
                                 "sha256",
                                 L->job_id, name);
    }
    snprintf(path, sizeof path, "/v1/jobs/%s/result/%s", L->job_id, name);
    if ((rc = cli_path_join(L->cmd, dest, sizeof dest, L->out, name)) != CLI_OK) {
        return rc;
    }
    if (orch_download_verified(L->server.http, path, dest, sha, NULL, &err) != 0) {
        return cli_fs_error(L->cmd, &err);
    }
    if (sha_out != NULL) {
        snprintf(sha_out, 65, "%s", sha);
    }
    return CLI_OK;
}

/* The parties' own result manifests (timings, bytes), once they are done. */
static int collect_parties(struct power *P)
{
    struct local *L = &P->L;
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if ((rc = local_settle_agents(L, 120.0)) != CLI_OK) {
        return rc;
    }
    L->party_manifests = json_array();
    if (L->party_manifests == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    for (size_t i = 0; i < L->k; i++) {
        char path[64 + ORCH_ID_MAX];
        json_t *m = NULL;

        if (!local_part_done(json_array_get(L->parts, i))) {
            json_array_append_new(L->party_manifests, json_null());
            continue;
        }
        snprintf(path, sizeof path, "/v1/participations/%s/result", L->part_ids[i]);
        if (fs_httpc_json(L->agents[i].http, "GET", path, NULL, &m, NULL, &err) != 0) {
            return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
        }
        json_array_append_new(L->party_manifests, m);
    }
    return CLI_OK;
}

/* The first k columns of a d x >= k matrix, orthonormalised (new matrix). */
static int first_cols_orth(const fs_mat *m, size_t k, fs_mat **out, struct fs_err *err)
{
    fs_mat v = fs_mat_view(m, 0, 0, m->rows, k);
    fs_mat *c = fs_mat_dup(&v);
    int rc;

    *out = NULL;
    if (c == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_qr_orth(c, NULL, err);
    if (rc != 0) {
        fs_mat_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* {"projection_distance", "sin_theta"} of the first k columns of m against ref. */
static json_t *subspace_entry(const fs_mat *ref, const fs_mat *m, size_t k, struct fs_err *err)
{
    fs_mat *q = NULL;
    double dist = NAN, sin = NAN;
    json_t *o;

    if (m->rows != ref->rows || m->cols < k) {
        fs_err_set(err, FS_EFORMAT, "an iterate of shape %zu x %zu, expected %zu x >= %zu", m->rows,
                   m->cols, ref->rows, k);
        return NULL;
    }
    if (first_cols_orth(m, k, &q, err) != 0 ||
        fs_fedpower_subspace_dist(ref, q, &dist, &sin, err) != 0) {
        fs_mat_free(q);
        return NULL;
    }
    fs_mat_free(q);
    o = json_pack("{s:o, s:o}", "projection_distance", cli_json_num(dist), "sin_theta",
                  cli_json_num(sin));
    return o;
}

/* Fetch the broadcast Z before aggregation r (verified) and load it. */
static int fetch_z(struct power *P, size_t r, struct fs_power_agg_view *agg, fs_mat **z,
                   struct fs_err *err)
{
    struct local *L = &P->L;
    char path[128 + ORCH_ID_MAX], dest[LOCAL_PATH];
    json_t *doc = NULL;
    int rc;

    *z = NULL;
    snprintf(path, sizeof path, "/v1/jobs/%s/aggregations/%zu", L->job_id, r);
    if ((rc = fs_httpc_json(L->server.http, "GET", path, NULL, &doc, NULL, err)) != 0) {
        return rc;
    }
    rc = fs_power_agg_view_decode(doc, agg, err);
    json_decref(doc);
    if (rc != 0) {
        return rc;
    }
    snprintf(path, sizeof path, "/v1/jobs/%s/aggregations/%zu/z.npy", L->job_id, r);
    if ((size_t)snprintf(dest, sizeof dest, "%s/z-%zu.npy", L->root, r) >= sizeof dest) {
        return fs_err_set(err, FS_ERANGE, "%s: path too long", L->root);
    }
    if ((rc = orch_download_verified(L->server.http, path, dest, agg->z_sha256, NULL, err)) != 0) {
        return rc;
    }
    rc = fs_io_load_dense(dest, FS_FMT_NPY, NULL, z, err);
    unlink(dest);
    return rc;
}

/*
 * The convergence entries of the server's result, each with the subspace
 * error (--reference) of the Z that sync produced: the Z broadcast before
 * aggregation q + 1, or for the last sync without a Rayleigh round the final
 * V. Also the error of Z_0 and of the final V.
 */
static int subspace_errors(struct power *P)
{
    struct local *L = &P->L;
    const json_t *conv = json_object_get(L->manifest, "convergence");
    size_t syncs = (size_t)json_integer_value(json_object_get(L->manifest, "syncs"));
    size_t naggs = L->status != NULL ? L->status->aggregations : 0;
    fs_mat *raw = NULL, *ref = NULL, *v = NULL;
    char vpath[LOCAL_PATH];
    struct fs_err err;
    double t0 = cli_now();
    int rc = CLI_OK;
    size_t i;
    json_t *c;

    fs_err_clear(&err);
    P->per_sync = json_array();
    if (P->per_sync == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    json_array_foreach(conv, i, c)
    {
        json_array_append_new(P->per_sync, json_deep_copy(c));
    }
    if (P->reference == NULL) {
        return CLI_OK;
    }
    orch_progress_text(&L->prog, "subspace errors against the reference");
    if (syncs == 0) {
        syncs = json_array_size(conv);
    }
    if (naggs == 0) {
        naggs = syncs + (json_is_array(json_object_get(L->manifest, "eigenvalues")) ? 1 : 0);
    }
    if (fs_io_load_dense(P->reference, FS_FMT_AUTO, NULL, &raw, &err) != 0 ||
        first_cols_orth(raw, P->k, &ref, &err) != 0) {
        rc = cli_fs_error(L->cmd, &err);
        goto out;
    }
    if ((rc = cli_path_join(L->cmd, vpath, sizeof vpath, L->out, "V.npy")) != CLI_OK) {
        goto out;
    }
    if (fs_io_load_dense(vpath, FS_FMT_NPY, NULL, &v, &err) != 0) {
        rc = cli_fs_error(L->cmd, &err);
        goto out;
    }
    P->subspace = json_pack("{s:s, s:I}", "reference", P->reference, "k", (json_int_t)P->k);
    for (size_t r = 0; r < naggs && P->subspace != NULL; r++) {
        struct fs_power_agg_view agg;
        json_t *e;
        fs_mat *z = NULL;

        if (fetch_z(P, r, &agg, &z, &err) != 0 ||
            (e = subspace_entry(ref, z, P->k, &err)) == NULL) {
            fs_mat_free(z);
            rc = cli_runtime_error(L->cmd, "the iterate before aggregation %zu: %s", r, err.msg);
            goto out;
        }
        json_object_set_new(e, "iteration", json_integer((json_int_t)agg.iteration));
        if (r == 0) {
            json_object_set(P->subspace, "initial", e);
        } else if (r - 1 < json_array_size(P->per_sync)) {
            json_object_update(json_array_get(P->per_sync, r - 1), e);
        }
        json_decref(e);
        fs_mat_free(z);
    }
    {
        json_t *e = subspace_entry(ref, v, P->k, &err);

        if (e == NULL) {
            rc = cli_runtime_error(L->cmd, "%s: %s", vpath, err.msg);
            goto out;
        }
        json_object_set(P->subspace, "final", e);
        /* the last sync's Z is the final V when no Rayleigh round followed it */
        if (syncs >= 1 && syncs >= naggs && syncs - 1 < json_array_size(P->per_sync)) {
            json_object_update(json_array_get(P->per_sync, syncs - 1), e);
        }
        json_decref(e);
    }
out:
    P->t_reference = cli_now() - t0;
    fs_mat_free(raw);
    fs_mat_free(ref);
    fs_mat_free(v);
    return rc;
}

/* DIR/convergence.svg: the change per sync and the subspace errors. */
static int write_plot(struct power *P)
{
    struct local *L = &P->L;
    size_t n = json_array_size(P->per_sync);
    size_t ncol = P->reference != NULL ? 3 : 1;
    static const char *const keys[] = {"change", "projection_distance", "sin_theta"};
    struct cli_line_plot opt;
    char path[LOCAL_PATH], title[160];
    fs_mat *y;
    int positive = 1, rc;

    if (n == 0) {
        return CLI_OK;
    }
    y = fs_mat_new(n, ncol);
    if (y == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < ncol; j++) {
            const json_t *v = json_object_get(json_array_get(P->per_sync, i), keys[j]);
            double x = json_is_number(v) ? json_number_value(v) : NAN;
            FS_MAT_AT(y, i, j) = x;
            positive &= x > 0.0 || isnan(x);
        }
    }
    /* a log axis unless something is exactly zero (noise-free, converged) or missing
     * everywhere; NaN entries stay out of a log plot, so make them 0 for a linear one */
    for (size_t j = 0; j < ncol && !positive; j++) {
        for (size_t i = 0; i < n; i++) {
            if (isnan(FS_MAT_AT(y, i, j))) {
                FS_MAT_AT(y, i, j) = 0.0;
            }
        }
    }
    if ((rc = cli_path_join(L->cmd, path, sizeof path, L->out, "convergence.svg")) != CLI_OK) {
        fs_mat_free(y);
        return rc;
    }
    snprintf(title, sizeof title, "%s, d = %zu, k = %zu, %zu parties", P->alg, P->d, P->k, L->k);
    memset(&opt, 0, sizeof opt);
    opt.out = path;
    opt.what = "the convergence history";
    opt.title = title;
    opt.xlabel = "sync";
    opt.ylabel = P->reference != NULL ? "change / error" : "change of the projector";
    opt.names = P->reference != NULL ? "change per sync,projection distance to reference,sin theta"
                                     : "change per sync";
    opt.log_y = positive;
    rc = cli_plot_line(L->cmd, y, &opt);
    fs_mat_free(y);
    return rc;
}

static int run_power(struct power *P, char *error, size_t error_cap)
{
    struct local *L = &P->L;
    json_t *invs = NULL;
    int rc;

    error[0] = '\0';
    if ((rc = local_start(L, error, error_cap)) != CLI_OK) {
        goto out;
    }
    if ((rc = create_job(P, &invs)) != CLI_OK) {
        snprintf(error, error_cap, "job setup failed");
        goto out;
    }
    if ((rc = local_drive(L, invs, error, error_cap)) != CLI_OK) {
        goto out;
    }
    if ((rc = local_get_result(L)) != CLI_OK) {
        snprintf(error, error_cap, "could not fetch the result");
        goto out;
    }
    if ((rc = fetch_file(P, "V.npy", 1, P->v_sha)) != CLI_OK ||
        (rc = fetch_file(P, "eigenvalues.npy", !P->o.no_eigenvalues, NULL)) != CLI_OK ||
        (rc = collect_parties(P)) != CLI_OK) {
        snprintf(error, error_cap, "could not fetch the result");
        goto out;
    }
    if ((rc = subspace_errors(P)) != CLI_OK) {
        snprintf(error, error_cap, "could not compute the subspace errors");
        goto out;
    }
    orch_progress_done(&L->prog);
    local_refresh_job(L);
    if ((rc = write_plot(P)) != CLI_OK) {
        snprintf(error, error_cap, "could not draw convergence.svg");
    }
out:
    json_decref(invs);
    return rc;
}

/* ---- summary ---- */

static json_t *party_entry(const struct power *P, size_t i)
{
    const struct local *L = &P->L;
    const json_t *p = json_array_get(L->parts, i);
    const json_t *m = json_array_get(L->party_manifests, i);
    char sha[65];
    int has_sha = local_manifest_sha(m, "V.npy", sha);
    json_t *o;

    o = json_pack(
        "{s:I, s:s, s:s, s:[I,I], s:o, s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:o}", "party",
        (json_int_t)(i + 1), "file", L->shown[i], "format", P->sparse[i] ? "sparse" : "dense",
        "shape", (json_int_t)L->sizes[i], (json_int_t)P->d, "participation",
        L->part_ids[i] != NULL ? json_string(L->part_ids[i]) : json_null(), "state",
        local_copy_if(p, "state", local_is_str), "dropped", local_dropped(L, i + 1), "fail_at",
        local_fail_json(L, i), "bytes_sent", local_copy_if(p, "bytes_sent", local_is_num),
        "bytes_received", local_copy_if(p, "bytes_received", local_is_num), "timings",
        local_copy_if(m, "party_timings", local_is_obj), "peak_memory_bytes",
        local_hwm_json(&L->agents[i]), "error", local_copy_if(p, "error", local_is_str));
    if (o != NULL) {
        json_object_set_new(o, "in_result", json_boolean(local_in_result(L, i + 1)));
        json_object_set_new(o, "v_matches_server",
                            !has_sha || P->v_sha[0] == '\0'
                                ? json_null()
                                : json_boolean(strcmp(sha, P->v_sha) == 0));
    }
    return o;
}

static json_t *build_summary(struct power *P, const char *error)
{
    struct local *L = &P->L;
    const json_t *res = L->manifest;
    const json_t *job = L->job;
    json_t *phases = local_copy_if(job, "timings", local_is_obj);
    json_t *parties = json_array(), *procs = json_array(), *mem = json_object();
    json_t *privacy, *s;

    if (json_is_null(phases)) {
        json_decref(phases);
        phases = json_object();
    }
    {
        /* the result's timings (crypto included) win over the status's */
        const char *key;
        json_t *v, *pm = local_party_phase_max(L);

        json_object_foreach(json_object_get(res, "timings"), key, v)
        {
            json_object_set(phases, key, v);
        }
        json_object_foreach(pm, key, v)
        {
            char name[64];
            snprintf(name, sizeof name, "party_%s", key);
            json_object_set(phases, name, v);
        }
        json_decref(pm);
    }
    if (P->reference != NULL && P->t_reference > 0) {
        json_object_set_new(phases, "cli_subspace_errors", json_real(P->t_reference));
    }
    for (size_t i = 0; i < L->k; i++) {
        json_array_append_new(parties, party_entry(P, i));
        json_object_set_new(mem, L->agents[i].name, local_hwm_json(&L->agents[i]));
        json_array_append_new(procs, local_proc_json(&L->agents[i]));
    }
    json_object_set_new(mem, L->server.name, local_hwm_json(&L->server));
    json_array_insert_new(procs, 0, local_proc_json(&L->server));
    privacy = json_object_get(res, "privacy");
    if (!json_is_object(privacy)) {
        privacy = json_object_get(job, "privacy");
    }
    s = json_pack("{s:s, s:o, s:s, s:o, s:I, s:I, s:I, s:I, s:I}", "algorithm", P->alg, "job_id",
                  L->job_id[0] != '\0' ? json_string(L->job_id) : json_null(), "state",
                  job != NULL ? orch_job_state(job) : "failed", "error",
                  error != NULL ? json_string(error) : json_null(), "d", (json_int_t)P->d, "k",
                  (json_int_t)P->k, "party_count", (json_int_t)L->k, "threshold",
                  (json_int_t)L->thr, "round_timeout_s", (json_int_t)L->round_timeout);
    if (s == NULL) {
        json_decref(phases);
        json_decref(parties);
        json_decref(procs);
        json_decref(mem);
        return NULL;
    }
    /* the result's figures; before there is one, the spec's (and the job's) */
    json_object_set_new(s, "r",
                        local_copy_if(json_is_number(json_object_get(res, "r")) ? res : P->spec,
                                      json_is_number(json_object_get(res, "r")) ? "r" : "rank",
                                      local_is_num));
    json_object_set_new(s, "iterations",
                        local_copy_if(res != NULL ? res : P->spec, "iterations", local_is_num));
    json_object_set_new(s, "sync_every",
                        local_copy_if(res != NULL ? res : P->spec, "sync_every", local_is_num));
    json_object_set_new(s, "syncs", local_copy_if(res != NULL ? res : job, "syncs", local_is_num));
    json_object_set_new(s, "rows", json_integer((json_int_t)L->n_rows));
    json_object_set(s, "spec", P->spec);
    json_object_del(json_object_get(s, "spec"), "server_url");
    json_object_set_new(s, "value_bound",
                        json_pack("{s:o, s:s}", "value",
                                  local_copy_if(P->spec, "value_bound", local_is_num), "source",
                                  P->vb_source));
    json_object_set_new(s, "survivors", local_copy_if(res, "survivors", local_is_arr));
    json_object_set_new(s, "dropped", local_copy_if(job, "dropped", local_is_arr));
    json_object_set_new(s, "eigenvalues", local_copy_if(res, "eigenvalues", local_is_arr));
    json_object_set_new(s, "convergence",
                        P->per_sync != NULL ? json_incref(P->per_sync) : json_array());
    json_object_set_new(s, "subspace_error",
                        P->subspace != NULL ? json_incref(P->subspace) : json_null());
    json_object_set_new(s, "privacy", privacy != NULL ? json_deep_copy(privacy) : json_null());
    json_object_set_new(s, "phases", phases);
    json_object_set_new(s, "servers",
                        json_pack("{s:{s:o, s:o, s:o, s:o}}", "aggregation", "bytes_in",
                                  local_copy_if(job, "bytes_in", local_is_num), "bytes_out",
                                  local_copy_if(job, "bytes_out", local_is_num), "result_bytes",
                                  local_copy_if(res, "bytes", local_is_obj), "peak_memory_bytes",
                                  local_hwm_json(&L->server)));
    json_object_set_new(s, "parties", parties);
    json_object_set_new(s, "peak_memory_bytes", mem);
    json_object_set_new(s, "files", local_copy_if(res, "files", local_is_arr));
    json_object_set_new(
        s, "seconds",
        json_pack("{s:f, s:f, s:f}", "total", cli_now() - L->t_start, "startup",
                  L->t_ready > 0 ? L->t_ready - L->t_start : 0.0, "job",
                  L->t_finished > 0 && L->t_created > 0 ? L->t_finished - L->t_created : 0.0));
    json_object_set_new(s, "processes", procs);
    json_object_set_new(s, "out", json_string(L->out));
    return s;
}

static void print_text(const struct power *P, const json_t *summary)
{
    const struct local *L = &P->L;
    const json_t *priv = json_object_get(summary, "privacy");
    const json_t *fin = json_object_get(json_object_get(summary, "subspace_error"), "final");
    const json_t *eps = json_object_get(priv, "eps_total");

    printf("%s: top-%zu eigenspace of d = %zu over %zu of %zu parties, T = %lld, p = %lld "
           "(%lld syncs) in %.1f s\n",
           P->alg, P->k, P->d, orch_count(summary, "survivors"), L->k,
           (long long)json_integer_value(json_object_get(summary, "iterations")),
           (long long)json_integer_value(json_object_get(summary, "sync_every")),
           (long long)json_integer_value(json_object_get(summary, "syncs")),
           L->t_finished - L->t_created);
    if (json_is_object(fin)) {
        printf("  error vs the reference: projection distance %.3g, sin theta %.3g\n",
               json_number_value(json_object_get(fin, "projection_distance")),
               json_number_value(json_object_get(fin, "sin_theta")));
    }
    if (json_is_object(priv)) {
        if (json_is_true(json_object_get(priv, "formal")) && json_is_number(eps)) {
            printf("  privacy: epsilon %.4g total at delta %.3g (zCDP; the paper's formula: "
                   "%.4g)\n",
                   json_number_value(eps), json_number_value(json_object_get(priv, "delta")),
                   json_number_value(json_object_get(priv, "paper_eps_total")));
        } else if (json_is_number(json_object_get(priv, "paper_eps_total"))) {
            printf("  privacy: no formal guarantee (the paper's formula: epsilon %.4g at delta "
                   "%.3g)\n",
                   json_number_value(json_object_get(priv, "paper_eps_total")),
                   json_number_value(json_object_get(priv, "delta")));
        } else {
            printf("  privacy: no formal guarantee\n");
        }
    }
    printf("  %s/V.npy%s, %s/summary.json, %s/convergence.svg\n", L->out,
           P->o.no_eigenvalues ? "" : ", eigenvalues.npy", L->out, L->out);
}

/* ---- entry ---- */

/* The options of fedsvd local for a power method. */
struct power_args {
    struct local_args c; /* the options of every algorithm */
    const char *s_ref;
};

/* Every option checked on its own (exit 2 before any file is read); P and
 * its local filled in. *vb_missing: the value bound is to be computed. */
static int check_options(struct power *P, struct power_args *a, int *vb_missing)
{
    struct local *L = &P->L;
    const char *cmd = L->cmd;
    int rc;

    if (a->c.ninput > 0) {
        return cli_usage_error(cmd, "--input/--parties are for fedsvd and fedpca; give --party "
                                    "FILE per party");
    }
    if (a->c.s_out == NULL || a->c.nparty == 0) {
        return cli_usage_error(cmd, "--algorithm, --out and at least one --party are required");
    }
    P->alg = a->c.s_alg;
    P->reference = a->s_ref;
    P->allow_dropouts = a->c.allow_dropouts;
    if (fs_algo_parse(a->c.s_alg, &P->algo) != 0 || !fs_algo_is_power(P->algo)) {
        return cli_usage_error(cmd, "--algorithm: '%s' is not a power method",
                               a->c.s_alg != NULL ? a->c.s_alg : "");
    }
    /* the flags on their own first */
    if ((rc = orch_power_params(cmd, P->algo, &P->o, 0, NULL, vb_missing)) != CLI_OK) {
        return rc;
    }
    if ((rc = local_apply_args(L, &a->c, LOCAL_FAIL_POWER, P->algo, 300)) != CLI_OK) {
        return rc;
    }
    P->sparse = calloc(L->k, sizeof *P->sparse);
    P->job = malloc(sizeof *P->job);
    if (P->sparse == NULL || P->job == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    fs_job_spec_init(P->job, P->algo);
    if (a->s_ref != NULL && access(a->s_ref, R_OK) != 0) {
        return cli_runtime_error(cmd, "--reference %s: %s", a->s_ref, strerror(errno));
    }
    return CLI_OK;
}

/* --reference: d x >= k. */
static int check_reference(struct power *P)
{
    const char *cmd = P->L.cmd;
    struct fs_err err;
    fs_mat *ref = NULL;
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (P->reference == NULL) {
        return CLI_OK;
    }
    if (fs_io_load_dense(P->reference, FS_FMT_AUTO, NULL, &ref, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    if (ref->rows != P->d || ref->cols < P->k) {
        rc = cli_runtime_error(cmd, "--reference %s: %zu x %zu, expected %zu x >= %zu (d x k)",
                               P->reference, ref->rows, ref->cols, P->d, P->k);
    }
    fs_mat_free(ref);
    return rc;
}

/* The party files, the job's parameters (now with d), the temporary root
 * and the processes' paths; the signal handlers from here on. */
static int prepare(struct power *P, const struct power_args *a, int vb_missing,
                   struct local_signals *sigs)
{
    struct local *L = &P->L;
    int rc;

    if ((rc = read_parties(P, vb_missing)) != CLI_OK ||
        (rc = orch_power_params(L->cmd, P->algo, &P->o, P->d, &P->job->power, NULL)) != CLI_OK) {
        return rc;
    }
    P->k = P->job->power.k;
    if (vb_missing) {
        /* a bound on ||M_i^T M_i / s_i||_2, a hair above it against rounding */
        double vb = P->frob_bound * (1.0 + 1e-9);
        P->job->power.value_bound = vb > 0 ? vb : 1.0;
        P->vb_source = "frobenius";
    } else if (P->o.value_bound == NULL) {
        P->vb_source = P->algo == FS_ALGO_FEDPOWER_PRIVATE ? "d*bound_m" : "none";
    }
    if ((rc = fill_job(P)) != CLI_OK || (rc = check_reference(P)) != CLI_OK ||
        (rc = local_open_run(L, &a->c, sigs)) != CLI_OK) {
        return rc;
    }
    return local_init_procs(L);
}

/* The summary and the text outcome of a run (local_finish). */
static json_t *outcome_summary(void *ctx, const char *error)
{
    return build_summary(ctx, error);
}

static void outcome_print(void *ctx, const json_t *summary)
{
    print_text(ctx, summary);
}

int cmd_local_power(int argc, char **argv)
{
    const char *cmd = "local";
    struct power_args a;
    struct power P;
    struct cli_opt opts[] = {
        LOCAL_COMMON_OPTS(a.c),
        {"reference", CLI_OPT_VALUE, &a.s_ref, NULL},
        {"k", CLI_OPT_VALUE, &P.o.k, NULL},
        ORCH_POWER_OPTS(P.o),
    };
    int help = 0, vb_missing = 0, rc;
    struct local *L = &P.L;
    struct local_signals sigs;
    char error[FS_ERR_MSG_MAX];

    memset(&a, 0, sizeof a);
    memset(&P, 0, sizeof P);
    memset(&sigs, 0, sizeof sigs);
    L->cmd = cmd;
    L->timeout = 600;
    P.vb_source = "given";
    error[0] = '\0';
    rc = local_read_args(cmd, argc, argv, opts, NOPTS(opts), &a.c, &help);
    if (rc == CLI_OK && help) {
        local_help();
    } else if (rc == CLI_OK && (rc = check_options(&P, &a, &vb_missing)) == CLI_OK) {
        L->t_start = cli_now();
        orch_progress_init(&L->prog, stderr, cmd);
        if ((rc = prepare(&P, &a, vb_missing, &sigs)) == CLI_OK) {
            rc = run_power(&P, error, sizeof error);
        }
    }
    if (!help) {
        rc = local_finish(L, outcome_summary, outcome_print, &P, error, rc);
    }
    local_signals_restore(&sigs);
    json_decref(P.spec);
    json_decref(P.per_sync);
    json_decref(P.subspace);
    free(P.job);
    free(P.sparse);
    local_free(L);
    return rc;
}
