/* fedsvd local for secure-sum, fedsvd and fedpca: a whole federated job on
 * this machine with the real services (started, followed and stopped by
 * local.c). This file holds what is particular to these algorithms: their
 * options, the job spec and the mask set, the result downloads (sum.npy; the
 * shared and private fedsvd/fedpca files of every party), --verify, and the
 * summary. The power methods are cmd_local_power.c; main.c dispatches. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_local.h"
#include "crypto/ed25519.h"
#include "io/matio.h"
#include "jobdoc.h"
#include "local.h"
#include "local_common.h"
#include "local_verify.h"
#include "maskset.h"
#include "orch.h"

#define NOPTS(a) (sizeof(a) / sizeof((a)[0]))
/* ---- the job ---- */

static int create_job(struct local *L, json_t **invitations)
{
    struct fs_job_spec *spec = malloc(sizeof *spec);
    int rc;

    *invitations = NULL;
    if (spec == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    fs_job_spec_init(spec,
                     L->fed ? (L->pca ? FS_ALGO_FEDPCA : FS_ALGO_FEDSVD) : FS_ALGO_SECURE_SUM);
    snprintf(spec->name, sizeof spec->name, "fedsvd local");
    snprintf(spec->server_url, sizeof spec->server_url, "%s", L->server.url);
    spec->parties = (uint32_t)L->k;
    spec->threshold = (uint32_t)L->thr;
    spec->allow_low_threshold = L->allow_low_threshold;
    spec->secagg = L->secagg;
    spec->rows = L->fed ? L->n_rows : L->rows;
    spec->cols = L->fed ? L->n_cols : L->cols;
    spec->round_timeout_s = (uint32_t)L->round_timeout;
    /* every party is an agent of this command, started before the job: one
     * that has not joined within a round timeout has failed (a job's own
     * default, a day, is for partners who join by hand); fedsvd/fedpca
     * joining includes each agent's key download (generated on demand by
     * the masking server): at least a minute even when the rounds are short
     * (dropout tests) */
    spec->join_timeout_s = (uint32_t)(L->fed && L->round_timeout < 60 ? 60 : L->round_timeout);
    if (L->fed) {
        spec->fed.partition = L->features ? FS_JOB_FEATURES : FS_JOB_SAMPLES;
        for (size_t i = 0; i < L->k; i++) {
            spec->fed.party_sizes[i] = L->sizes[i];
        }
        spec->fed.k = L->ksvd;
        spec->fed.method = L->randomized ? FS_JOB_RANDOMIZED : FS_JOB_EXACT;
        spec->fed.standardize = L->pca && L->standardize;
        spec->fed.allow_dropouts = L->allow_dropouts;
        spec->fed.shards = L->shards > 1 ? (uint32_t)L->shards : 1;
    }
    rc = local_post_job(L, spec, NULL, invitations);
    free(spec);
    return rc;
}

/*
 * fedsvd/fedpca: create the job's mask set on the masking server, each party
 * pinned to its agent's identity (so that only agent i can fetch party i's
 * keys), merge masking_url and maskset into the invitations and give the
 * mask set's end token to the aggregation server, which deletes the mask set
 * when the job ends (docs/wire-fedsvd.md). Nobody holds a credential for keys.
 */
static int create_maskset(struct local *L, json_t *invs)
{
    struct fs_maskset_request *rq = calloc(1, sizeof *rq);
    struct fs_maskset_created *mc = calloc(1, sizeof *mc);
    json_t *spec = NULL, *resp = NULL;
    struct fs_err err;
    double t0 = cli_now();
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (rq == NULL || mc == NULL) {
        rc = cli_runtime_error(L->cmd, "out of memory");
        goto out;
    }
    if (L->party_keys == NULL) {
        rc = cli_runtime_error(L->cmd, "the agents' identities are not known yet");
        goto out;
    }
    if (strlen(L->job_id) >= sizeof rq->job_id) {
        rc = cli_runtime_error(L->cmd, "job id too long: %s", L->job_id);
        goto out;
    }
    memcpy(rq->job_id, L->job_id, strlen(L->job_id) + 1);
    snprintf(rq->server_url, sizeof rq->server_url, "%s", L->masker.url);
    rq->partition = L->features ? FS_JOB_FEATURES : FS_JOB_SAMPLES;
    rq->parties = (uint32_t)L->k;
    rq->shared = L->features ? L->n_rows : L->n_cols;
    rq->block_size = L->block;
    for (size_t i = 0; i < L->k; i++) {
        rq->sizes[i] = L->sizes[i];
        if (fs_ed25519_fpr_parse(L->party_keys[i], rq->identities[i], &err) != 0) {
            rc = cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
            goto out;
        }
    }
    spec = fs_maskset_request_encode(rq);
    if (spec == NULL) {
        rc = cli_runtime_error(L->cmd, "out of memory");
        goto out;
    }
    if (fs_httpc_json(L->masker.http, "POST", "/v1/masksets", spec, &resp, NULL, &err) != 0) {
        rc = cli_runtime_error(L->cmd, "masking-server: %s", err.msg);
        goto out;
    }
    if (fs_maskset_created_decode(resp, rq->parties, mc, &err) != 0) {
        rc = cli_runtime_error(L->cmd, "POST /v1/masksets: %s", err.msg);
        goto out;
    }
    snprintf(L->maskset, sizeof L->maskset, "%s", mc->id);
    for (size_t i = 0; i < L->k; i++) {
        json_t *inv = (json_t *)local_invitation_for(invs, mc->parties[i].party);

        if (inv == NULL || fs_invitation_add_maskset(inv, L->masker.url, mc->id) != 0) {
            rc = cli_runtime_error(L->cmd, "POST /v1/masksets: no party %zu", i + 1);
            goto out;
        }
    }
    if (orch_job_set_maskset(L->server.http, L->job_id, L->masker.url, mc->id, mc->end_token,
                             &err) != 0) {
        rc = cli_runtime_error(L->cmd, "aggregation-server: %s", err.msg);
        goto out;
    }
    L->t_mask = cli_now() - t0;
out:
    if (mc != NULL) {
        fs_maskset_created_wipe(mc);
    }
    free(mc);
    free(rq);
    json_decref(resp);
    json_decref(spec);
    return rc;
}

static int fetch_result(struct local *L)
{
    char path[128 + ORCH_ID_MAX], dest[LOCAL_PATH];
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    snprintf(path, sizeof path, "/v1/jobs/%s/result", L->job_id);
    if ((rc = local_get_result(L)) != CLI_OK) {
        return rc;
    }
    if (!local_manifest_sha(L->manifest, "sum.npy", L->sum_sha)) {
        return cli_runtime_error(L->cmd, "GET %s: the manifest has no sum.npy with a sha256", path);
    }
    snprintf(path, sizeof path, "/v1/jobs/%s/result/sum.npy", L->job_id);
    if ((rc = cli_path_join(L->cmd, dest, sizeof dest, L->out, "sum.npy")) != CLI_OK) {
        return rc;
    }
    if (orch_download_verified(L->server.http, path, dest, L->sum_sha, NULL, &err) != 0) {
        return cli_fs_error(L->cmd, &err);
    }
    return CLI_OK;
}

/* Every agent that finished must hold the very same sum as the server. */
static int check_agent_results(struct local *L, json_t *agent_sha)
{
    struct fs_err err;

    fs_err_clear(&err);
    for (size_t i = 0; i < L->k; i++) {
        char path[128 + ORCH_ID_MAX], sha[65];
        json_t *m = NULL;
        int found;

        if (!local_part_done(json_array_get(L->parts, i))) {
            json_array_append_new(agent_sha, json_null());
            continue;
        }
        snprintf(path, sizeof path, "/v1/participations/%s/result", L->part_ids[i]);
        if (fs_httpc_json(L->agents[i].http, "GET", path, NULL, &m, NULL, &err) != 0) {
            return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
        }
        found = local_manifest_sha(m, "sum.npy", sha);
        json_decref(m);
        json_array_append_new(agent_sha, found ? json_string(sha) : json_null());
        if (!found || strcmp(sha, L->sum_sha) != 0) {
            return cli_runtime_error(L->cmd,
                                     "party %zu's agent holds a different sum.npy (sha256 %s) "
                                     "than the server (%s)",
                                     i + 1, found ? sha : "none", L->sum_sha);
        }
    }
    return CLI_OK;
}

/* ---- fedsvd / fedpca results ---- */

/* 1 when result file `name` is private to its party (else shared by all). */
static int fed_private(const struct local *L, const char *name)
{
    if (!L->features) {
        return strcmp(name, L->pca ? "scores.npy" : "U.npy") == 0;
    }
    if (!L->pca) {
        return strcmp(name, "V.npy") == 0;
    }
    return strcmp(name, "components.npy") == 0 || strcmp(name, "mean.npy") == 0 ||
           strcmp(name, "scale.npy") == 0;
}

/* max |a - b| over two equally shaped matrix files, or -1 when they differ in shape. */
static double max_abs_diff(const char *a, const char *b)
{
    fs_mat *x = NULL, *y = NULL;
    struct fs_err err;
    double d = -1.0;

    fs_err_clear(&err);
    if (fs_io_load_dense(a, FS_FMT_NPY, NULL, &x, &err) == 0 &&
        fs_io_load_dense(b, FS_FMT_NPY, NULL, &y, &err) == 0 && x->rows == y->rows &&
        x->cols == y->cols) {
        d = 0.0;
        for (size_t j = 0; j < x->cols; j++) {
            for (size_t i = 0; i < x->rows; i++) {
                double e = fabs(FS_MAT_AT(x, i, j) - FS_MAT_AT(y, i, j));
                d = e > d ? e : d;
            }
        }
    }
    fs_mat_free(x);
    fs_mat_free(y);
    return d;
}

/*
 * Every party that finished holds its result on its agent: copy the shared
 * files once to DIR (checking the other parties hold the same, to the last
 * bit or within rounding), each party's private files to DIR/party-<i>/.
 */
/* 1 if the reference party's manifest (the party whose shared files are DIR's)
 * lists name with this sha256. */
static int same_sha(const struct local *L, size_t ref, const char *name, const char *sha)
{
    char first[65];

    return local_manifest_sha(json_array_get(L->party_manifests, ref), name, first) &&
           strcmp(first, sha) == 0;
}

/* A party's private files, downloaded on a thread of their own while the
 * command goes on polling and collecting the other parties (10 parties
 * finishing within a few ms of each other no longer wait for each other's
 * downloads). The thread uses only its agent's HTTP client, which nothing
 * else touches until it is joined. */
#define FETCH_MAX 8
struct fetch {
    fs_httpc *http;
    const char *agent;
    size_t n;
    char path[FETCH_MAX][128 + ORCH_ID_MAX];
    char dest[FETCH_MAX][LOCAL_PATH];
    char sha[FETCH_MAX][65];
    pthread_t th;
    int started;
    int rc;
    char msg[512];
};

static void *fetch_main(void *arg)
{
    struct fetch *f = arg;
    struct fs_err err;

    fs_err_clear(&err);
    for (size_t q = 0; q < f->n && f->rc == 0; q++) {
        if (orch_download_verified(f->http, f->path[q], f->dest[q], f->sha[q], NULL, &err) != 0) {
            f->rc = -1;
            snprintf(f->msg, sizeof f->msg, "%s", err.msg);
        }
    }
    return NULL;
}

/* Wait for every party's downloads; the first failure, if any, is the error. */
static int fetch_join(struct local *L, struct fetch *fx, int rc)
{
    for (size_t i = 0; fx != NULL && i < L->k; i++) {
        if (!fx[i].started) {
            continue;
        }
        pthread_join(fx[i].th, NULL);
        fx[i].started = 0;
        if (fx[i].rc != 0 && rc == CLI_OK) {
            rc = cli_runtime_error(L->cmd, "%s: %s", fx[i].agent, fx[i].msg);
        }
    }
    return rc;
}

/* Party i finished (done or failed): copy its files; *ref is the party whose
 * shared files are DIR's (the first one collected), SIZE_MAX before that.
 * Its private files go to *fe, fetched on a thread (fetch_join). */
static int collect_party(struct local *L, size_t i, size_t *ref, struct fetch *fe)
{
    char path[128 + ORCH_ID_MAX], dest[LOCAL_PATH], tmp[LOCAL_PATH];
    struct fs_result_file files[FS_RESULT_FILES_MAX];
    char pdir[LOCAL_PATH], pname[32];
    json_t *m = NULL;
    struct fs_err err;
    size_t nfiles = 0;
    int rc;

    fs_err_clear(&err);
    if (!local_part_done(json_array_get(L->parts, i))) {
        return CLI_OK;
    }
    snprintf(path, sizeof path, "/v1/participations/%s/result", L->part_ids[i]);
    if (fs_httpc_json(L->agents[i].http, "GET", path, NULL, &m, NULL, &err) != 0) {
        return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
    }
    json_array_set_new(L->party_manifests, i, m);
    snprintf(pname, sizeof pname, "party-%zu", i + 1);
    if ((rc = cli_path_join(L->cmd, pdir, sizeof pdir, L->out, pname)) != CLI_OK ||
        (rc = cli_mkdir_p(L->cmd, pdir)) != CLI_OK) {
        return rc;
    }
    if (fs_result_files_decode(m, 0, files, &nfiles, &err) != 0) {
        return cli_runtime_error(L->cmd, "%s: the result manifest: %s", L->agents[i].name, err.msg);
    }
    for (size_t q = 0; q < nfiles; q++) {
        const char *name = files[q].name;
        const char *sha = files[q].sha256;
        int priv = fed_private(L, name);

        if ((size_t)snprintf(path, sizeof path, "/v1/participations/%s/result/%s", L->part_ids[i],
                             name) >= sizeof path) {
            return cli_runtime_error(L->cmd, "%s: path too long", L->agents[i].name);
        }
        if ((rc = cli_path_join(L->cmd, dest, sizeof dest, priv ? pdir : L->out, name)) != CLI_OK) {
            return rc;
        }
        if (!priv && *ref != SIZE_MAX && same_sha(L, *ref, name, sha)) {
            /* shared and bit-identical to the first party's copy (SHA-256 in the
             * manifests): nothing to download */
            json_t *prev = json_object_get(L->shared_check, name);
            if (!json_is_number(prev)) {
                json_object_set_new(L->shared_check, name, json_real(0.0));
            }
            continue;
        }
        if (!priv && *ref != SIZE_MAX) {
            /* shared: the first party's copy is DIR's; compare the others with it */
            double d;
            if ((size_t)snprintf(tmp, sizeof tmp, "%s/%s", pdir, name) >= sizeof tmp) {
                return cli_runtime_error(L->cmd, "%s: path too long", pdir);
            }
            if (orch_download_verified(L->agents[i].http, path, tmp, sha, NULL, &err) != 0) {
                return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
            }
            d = max_abs_diff(dest, tmp);
            unlink(tmp);
            {
                json_t *prev = json_object_get(L->shared_check, name);
                double p0 = json_is_number(prev) ? json_number_value(prev) : 0.0;
                json_object_set_new(L->shared_check, name,
                                    d < 0 ? json_null() : json_real(d > p0 ? d : p0));
            }
            if (d < 0 || d > 1e-9) {
                return cli_runtime_error(L->cmd,
                                         "party %zu's %s differs from party %zu's (max |diff| "
                                         "%g): the parties do not agree on the shared result",
                                         i + 1, name, *ref + 1, d);
            }
            continue;
        }
        if (priv) {
            if (fe->n == FETCH_MAX || strlen(sha) >= sizeof fe->sha[0]) {
                return cli_runtime_error(L->cmd, "%s: too many private files in the result",
                                         L->agents[i].name);
            }
            snprintf(fe->path[fe->n], sizeof fe->path[0], "%s", path);
            snprintf(fe->dest[fe->n], sizeof fe->dest[0], "%s", dest);
            snprintf(fe->sha[fe->n], sizeof fe->sha[0], "%s", sha);
            fe->n++;
            continue;
        }
        if (orch_download_verified(L->agents[i].http, path, dest, sha, NULL, &err) != 0) {
            return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
        }
        json_object_set_new(L->shared_check, name, json_real(0.0));
    }
    if (*ref == SIZE_MAX) {
        *ref = i;
    }
    if (fe->n == 0) {
        rmdir(pdir); /* it gets nothing */
        return CLI_OK;
    }
    fe->http = L->agents[i].http;
    fe->agent = L->agents[i].name;
    if (pthread_create(&fe->th, NULL, fetch_main, fe) != 0) {
        fetch_main(fe); /* no thread: fetch here */
        return fe->rc != 0 ? cli_runtime_error(L->cmd, "%s: %s", fe->agent, fe->msg) : CLI_OK;
    }
    fe->started = 1;
    return CLI_OK;
}

/*
 * Every party that finished holds its result on its agent: copy the shared
 * files once to DIR (checking the other parties hold the same, to the last
 * bit or within rounding), each party's private files to DIR/party-<i>/.
 * A party's files are copied as soon as it is done (its private ones on a
 * thread of their own: struct fetch), while the others still
 * recover theirs.
 */
static int fed_collect_loop(struct local *L, struct fetch *fx);

static int fed_collect(struct local *L)
{
    struct fetch *fx = calloc(L->k > 0 ? L->k : 1, sizeof *fx);
    int rc;

    if (fx == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    rc = fetch_join(L, fx, fed_collect_loop(L, fx));
    free(fx);
    return rc;
}

static int fed_collect_loop(struct local *L, struct fetch *fx)
{
    char collected[LOCAL_MAX_PARTIES] = {0};
    size_t ref = SIZE_MAX;
    double t0 = cli_now();
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if ((rc = local_get_result(L)) != CLI_OK) {
        return rc;
    }
    L->party_manifests = json_array();
    L->shared_check = json_object();
    if (L->party_manifests == NULL || L->shared_check == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    for (size_t i = 0; i < L->k; i++) {
        json_array_append_new(L->party_manifests, json_null());
    }
    for (;;) {
        size_t open = 0, got = 0;

        if ((rc = local_poll_agents(L, &open)) != CLI_OK) {
            return rc;
        }
        for (size_t i = 0; i < L->k; i++) {
            if (collected[i] || !local_part_terminal(json_array_get(L->parts, i))) {
                continue;
            }
            collected[i] = 1;
            got++;
            if ((rc = collect_party(L, i, &ref, &fx[i])) != CLI_OK) {
                return rc;
            }
        }
        if (open == 0 || cli_now() - t0 > 120.0 || local_interrupted() != 0) {
            break;
        }
        if (got == 0) {
            orch_progress_text(&L->prog, "waiting for the agents to finish");
            orch_sleep_ms(LOCAL_POLL_MS);
        }
    }
    if (ref == SIZE_MAX) {
        return cli_runtime_error(L->cmd, "no party finished with a result");
    }
    return CLI_OK;
}

static json_t *party_json(const struct local *L, size_t i, const json_t *agent_sha)
{
    const json_t *p = json_array_get(L->parts, i);
    json_t *o;

    o = json_pack("{s:I, s:s, s:o, s:o, s:b, s:o, s:o, s:o, s:o}", "party", (json_int_t)(i + 1),
                  "file", L->shown[i], "participation",
                  L->part_ids[i] != NULL ? json_string(L->part_ids[i]) : json_null(), "state",
                  local_copy_if(p, "state", local_is_str), "dropped", local_dropped(L, i + 1),
                  "fail_at", local_fail_json(L, i), "bytes_sent",
                  local_copy_if(p, "bytes_sent", local_is_num), "bytes_received",
                  local_copy_if(p, "bytes_received", local_is_num), "error",
                  local_copy_if(p, "error", local_is_str));
    if (o != NULL && L->manifest != NULL) {
        json_object_set_new(o, "in_sum", json_boolean(local_in_result(L, i + 1)));
    }
    if (o != NULL && agent_sha != NULL && i < json_array_size(agent_sha)) {
        json_object_set(o, "sum_sha256", json_array_get(agent_sha, i));
    }
    return o;
}

static json_t *build_summary(struct local *L, const json_t *agent_sha, const char *error)
{
    const json_t *job = L->job;
    int done = strcmp(orch_job_state(job), "done") == 0;
    json_t *parties = json_array();
    json_t *procs = json_array();
    json_t *survivors = json_array();
    json_t *dropped = local_copy_if(job, "dropped", local_is_arr);
    json_t *phases = local_copy_if(job, "timings", local_is_obj);
    json_t *s;

    /* Survivors: the parties whose input is in the sum, as the server's result
     * manifest lists them (a party that drops out after its masked input is
     * still summed), else the job's parties not dropped. */
    for (size_t i = 0; i < L->k; i++) {
        int in_sum = L->have_result ? local_in_result(L, i + 1) : done && !local_dropped(L, i + 1);

        json_array_append_new(parties, party_json(L, i, agent_sha));
        if (in_sum) {
            json_array_append_new(survivors, json_integer((json_int_t)(i + 1)));
        }
    }
    json_array_append_new(procs, local_proc_json(&L->server));
    for (size_t i = 0; i < L->k; i++) {
        json_array_append_new(procs, local_proc_json(&L->agents[i]));
    }
    if (json_is_null(dropped)) {
        json_decref(dropped);
        dropped = json_array();
    }
    if (json_is_null(phases)) {
        json_decref(phases);
        phases = json_object();
    }
    s = json_pack("{s:s, s:o, s:s, s:o, s:[I,I], s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:{s:o, s:o}, "
                  "s:{s:f, s:f, s:f}, s:o, s:o, s:s}",
                  "algorithm", "secure-sum", "job_id",
                  L->job_id[0] != '\0' ? json_string(L->job_id) : json_null(), "state",
                  job != NULL ? orch_job_state(job) : "failed", "error",
                  error != NULL ? json_string(error) : json_null(), "shape", (json_int_t)L->rows,
                  (json_int_t)L->cols, "party_count", (json_int_t)L->k, "threshold",
                  (json_int_t)L->thr, "round_timeout_s", (json_int_t)L->round_timeout, "parties",
                  parties, "dropped", dropped, "survivors", survivors, "phases", phases, "server",
                  "bytes_in", local_copy_if(job, "bytes_in", local_is_num), "bytes_out",
                  local_copy_if(job, "bytes_out", local_is_num), "seconds", "total",
                  cli_now() - L->t_start, "startup", L->t_ready > 0 ? L->t_ready - L->t_start : 0.0,
                  "job", L->t_finished > 0 && L->t_created > 0 ? L->t_finished - L->t_created : 0.0,
                  "files",
                  L->sum_sha[0] != '\0'
                      ? json_pack("[{s:s, s:[I,I], s:s}]", "name", "sum.npy", "shape",
                                  (json_int_t)L->rows, (json_int_t)L->cols, "sha256", L->sum_sha)
                      : json_array(),
                  "processes", procs, "out", L->out);
    if (s != NULL) {
        /* how the job masked (full graph or SecAgg+ neighbours), as the server said */
        json_object_set_new(s, "secagg", local_copy_if(job, "secagg", local_is_str));
        json_object_set_new(s, "secagg_degree", local_copy_if(job, "secagg_degree", local_is_num));
    }
    return s;
}

/* Party i's entry of the fedsvd/fedpca summary; its shared file names go
 * into files (an object used as a set). */
static json_t *fed_party_json(const struct local *L, size_t i, json_t *files)
{
    const json_t *p = json_array_get(L->parts, i);
    const json_t *m = json_array_get(L->party_manifests, i);
    json_t *o = json_pack(
        "{s:I, s:s, s:[I,I], s:o, s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "party",
        (json_int_t)(i + 1), "file", L->shown[i], "shape",
        (json_int_t)(L->features ? L->n_rows : L->sizes[i]),
        (json_int_t)(L->features ? L->sizes[i] : L->n_cols), "participation",
        L->part_ids[i] != NULL ? json_string(L->part_ids[i]) : json_null(), "state",
        local_copy_if(p, "state", local_is_str), "dropped", local_dropped(L, i + 1), "fail_at",
        local_fail_json(L, i), "bytes_sent", local_copy_if(p, "bytes_sent", local_is_num),
        "bytes_received", local_copy_if(p, "bytes_received", local_is_num), "timings",
        local_copy_if(m, "party_timings", local_is_obj), "rank",
        local_copy_if(m, "rank", local_is_num), "peak_memory_bytes", local_hwm_json(&L->agents[i]),
        "error", local_copy_if(p, "error", local_is_str));
    json_t *names = json_array();
    size_t q;
    json_t *f;

    json_array_foreach(json_object_get(m, "files"), q, f)
    {
        const char *n = json_string_value(json_object_get(f, "name"));
        char buf[80];
        if (n == NULL) {
            continue;
        }
        if (fed_private(L, n)) {
            snprintf(buf, sizeof buf, "party-%zu/%s", i + 1, n);
            json_array_append_new(names, json_string(buf));
        } else if (json_object_get(files, n) == NULL) {
            json_object_set_new(files, n, json_string(n));
        }
    }
    if (o != NULL) {
        json_object_set_new(o, "files", names);
        json_object_set_new(o, "in_result", json_boolean(local_in_result(L, i + 1)));
    } else {
        json_decref(names);
    }
    return o;
}

/* The server and party phase timings of the fedsvd/fedpca summary. */
static json_t *fed_phases(const struct local *L)
{
    json_t *phases = local_copy_if(L->job, "timings", local_is_obj);
    json_t *pm = local_party_phase_max(L);
    const char *key;
    json_t *v;

    if (json_is_null(phases)) {
        json_decref(phases);
        phases = json_object();
    }
    if (L->t_mask > 0) {
        json_object_set_new(phases, "mask_set", json_real(L->t_mask));
    }
    json_object_foreach(pm, key, v)
    {
        char name[64];
        snprintf(name, sizeof name, "party_%s", key);
        json_object_set(phases, name, v);
    }
    json_decref(pm);
    return phases;
}

/* The servers, shared files, seconds, processes of the fedsvd/fedpca summary s. */
static void fed_summary_rest(const struct local *L, json_t *s, json_t *files, json_t *procs)
{
    const json_t *job = L->job;
    json_t *shared = json_array();
    const char *key;
    json_t *v;

    json_object_set_new(
        s, "servers",
        json_pack(
            "{s:{s:o, s:o, s:o}, s:{s:o, s:o, s:o}}", "aggregation", "bytes_in",
            local_copy_if(job, "bytes_in", local_is_num), "bytes_out",
            local_copy_if(job, "bytes_out", local_is_num), "peak_memory_bytes",
            local_hwm_json(&L->server), "masking", "bytes_in",
            L->masker_bytes_in >= 0 ? json_integer((json_int_t)L->masker_bytes_in) : json_null(),
            "bytes_out",
            L->masker_bytes_out >= 0 ? json_integer((json_int_t)L->masker_bytes_out) : json_null(),
            "peak_memory_bytes", local_hwm_json(&L->masker)));
    json_object_foreach(files, key, v)
    {
        json_array_append_new(shared, json_string(key));
    }
    json_object_set_new(s, "shared_files", shared);
    json_object_set_new(s, "shared_max_abs_difference",
                        L->shared_check != NULL ? json_incref(L->shared_check) : json_object());
    json_object_set_new(
        s, "seconds",
        json_pack(
            "{s:f, s:f, s:f, s:f, s:f}", "total", cli_now() - L->t_start, "startup",
            L->t_ready > 0 ? L->t_ready - L->t_start : 0.0, "job",
            L->t_finished > 0 && L->t_created > 0 ? L->t_finished - L->t_created : 0.0, "collect",
            L->t_collected > 0 && L->t_finished > 0 ? L->t_collected - L->t_finished : 0.0, "stop",
            L->t_stopped > 0 && L->t_collected > 0 ? L->t_stopped - L->t_collected : 0.0));
    json_object_set_new(s, "processes", json_incref(procs));
    json_object_set_new(s, "out", json_string(L->out));
    if (L->verify != NULL) {
        json_object_set(s, "verification", L->verify);
    }
}

static json_t *build_fed_summary(struct local *L, const char *error)
{
    const json_t *job = L->job;
    const json_t *res = L->manifest;
    json_t *parties = json_array(), *procs = json_array(), *files = json_object();
    json_t *phases = fed_phases(L);
    json_t *mem = json_object();
    const json_t *first = NULL;
    json_t *s;

    for (size_t i = 0; i < L->k; i++) {
        const json_t *m = json_array_get(L->party_manifests, i);

        json_array_append_new(parties, fed_party_json(L, i, files));
        if (first == NULL && json_is_object(m)) {
            first = m;
        }
        json_object_set_new(mem, L->agents[i].name, local_hwm_json(&L->agents[i]));
    }
    json_object_set_new(mem, L->server.name, local_hwm_json(&L->server));
    json_object_set_new(mem, L->masker.name, local_hwm_json(&L->masker));
    json_array_append_new(procs, local_proc_json(&L->server));
    json_array_append_new(procs, local_proc_json(&L->masker));
    for (size_t i = 0; L->peers != NULL && i + 1 < L->shards; i++) {
        json_object_set_new(mem, L->peers[i].name, local_hwm_json(&L->peers[i]));
        json_array_append_new(procs, local_proc_json(&L->peers[i]));
    }
    for (size_t i = 0; i < L->k; i++) {
        json_array_append_new(procs, local_proc_json(&L->agents[i]));
    }
    s = json_pack("{s:s, s:s, s:o, s:o, s:s, s:o, s:[I,I], s:I, s:I, s:I, s:o, s:b, s:b, s:o, "
                  "s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                  "algorithm", L->pca ? "fedpca" : "fedsvd", "partition",
                  L->features ? "features" : "samples", "job_id",
                  L->job_id[0] != '\0' ? json_string(L->job_id) : json_null(), "maskset",
                  L->maskset[0] != '\0' ? json_string(L->maskset) : json_null(), "state",
                  job != NULL ? orch_job_state(job) : "failed", "error",
                  error != NULL ? json_string(error) : json_null(), "shape", (json_int_t)L->n_rows,
                  (json_int_t)L->n_cols, "party_count", (json_int_t)L->k, "threshold",
                  (json_int_t)L->thr, "round_timeout_s", (json_int_t)L->round_timeout, "k",
                  L->ksvd > 0 ? json_integer((json_int_t)L->ksvd) : json_null(), "standardize",
                  L->standardize, "allow_dropouts", L->allow_dropouts, "rank",
                  local_copy_if(first != NULL ? first : res, "rank", local_is_num), "r",
                  local_copy_if(res, "r", local_is_num), "singular_values",
                  local_copy_if(res, "singular_values", local_is_arr), "survivors",
                  local_copy_if(res, "survivors", local_is_arr), "dropped",
                  local_copy_if(job, "dropped", local_is_arr), "phases", phases, "parties", parties,
                  "peak_memory_bytes", mem);
    if (s != NULL) {
        fed_summary_rest(L, s, files, procs);
        if (L->test_mask_seed[0] != '\0') { /* --test-mask-seed: INSECURE, say so */
            json_object_set_new(s, "deterministic_masks", json_true());
        }
        if (L->shards > 1) {
            json_object_set_new(s, "shards", local_shards_json(L));
        }
    }
    json_decref(procs);
    json_decref(files);
    return s;
}

static void print_fed_text(const struct local *L, const json_t *summary)
{
    json_int_t rank = json_integer_value(json_object_get(summary, "rank"));
    json_int_t r = json_integer_value(json_object_get(summary, "r"));
    const char *priv =
        L->features ? (L->pca ? "components.npy" : "V.npy") : (L->pca ? "scores.npy" : "U.npy");

    printf("%s (%s partition) of %zu x %zu over %zu of %zu parties in %.1f s: r %lld, numerical "
           "rank %lld\n",
           L->pca ? "fedpca" : "fedsvd", L->features ? "features" : "samples", L->n_rows, L->n_cols,
           orch_count(summary, "survivors"), L->k, L->t_finished - L->t_created, (long long)r,
           (long long)rank);
    if (L->pca) {
        printf("  %s/{components,explained_variance,explained_variance_ratio,singular_values%s}"
               ".npy, %s/party-<i>/%s\n",
               L->out, L->features ? ",scores" : ",mean", L->out, priv);
    } else {
        printf("  %s/S.npy, %s/%s (shared), %s/party-<i>/%s (each party's own)\n", L->out, L->out,
               L->features ? "U.npy" : "V.npy", L->out, priv);
    }
    printf("  %s/summary.json (phase timings, bytes, peak memory)\n", L->out);
    if (L->shards > 1) {
        printf("  %zu shards, peak memory (MiB):", L->shards);
        for (size_t i = 0; i < L->shards; i++) {
            const struct proc *p = i == 0 ? &L->server : &L->peers[i - 1];
            printf(" %s%.0f", i > 0 ? "/ " : "", p->hwm_kb >= 0 ? (double)p->hwm_kb / 1024 : -1.0);
        }
        printf("\n");
    }
}

/*
 * --input FILE... --parties K: pool the inputs (stacked by rows: samples)
 * and split them into K contiguous, near-equal blocks of rows (samples) or
 * of columns (features), written as .npy into the run's temporary
 * directory; those become the parties' files.
 */
static int split_inputs(struct local *L, const char **input, size_t ninput, char **names)
{
    fs_mat **m = calloc(ninput, sizeof *m);
    struct fs_err err;
    size_t rows = 0, cols = 0;
    fs_mat *x = NULL;
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (m == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    for (size_t i = 0; i < ninput; i++) {
        if (fs_io_load_dense(input[i], FS_FMT_AUTO, NULL, &m[i], &err) != 0) {
            rc = cli_fs_error(L->cmd, &err);
            goto out;
        }
        if (i > 0 && m[i]->cols != cols) {
            rc = cli_runtime_error(L->cmd, "%s: %zu columns, but %s has %zu", input[i], m[i]->cols,
                                   input[0], cols);
            goto out;
        }
        cols = m[i]->cols;
        rows += m[i]->rows;
    }
    if ((L->features ? cols : rows) < L->k) {
        rc = cli_runtime_error(L->cmd, "cannot split %zu %s into %zu parties",
                               L->features ? cols : rows, L->features ? "columns" : "rows", L->k);
        goto out;
    }
    x = fs_mat_new(rows, cols);
    if (x == NULL) {
        rc = cli_runtime_error(L->cmd, "out of memory for the %zu x %zu input", rows, cols);
        goto out;
    }
    {
        size_t off = 0;
        for (size_t i = 0; i < ninput; i++) {
            for (size_t j = 0; j < cols; j++) {
                memcpy(&FS_MAT_AT(x, off, j), &FS_MAT_AT(m[i], 0, j), m[i]->rows * sizeof(double));
            }
            off += m[i]->rows;
            fs_mat_free(m[i]);
            m[i] = NULL;
        }
    }
    {
        size_t total = L->features ? cols : rows;
        size_t off = 0;
        for (size_t p = 0; p < L->k; p++) {
            size_t n = total / L->k + (p < total % L->k ? 1 : 0);
            fs_mat v =
                L->features ? fs_mat_view(x, 0, off, rows, n) : fs_mat_view(x, off, 0, n, cols);
            fs_mat *c = fs_mat_dup(&v);
            char path[LOCAL_PATH];

            if (c == NULL) {
                rc = cli_runtime_error(L->cmd, "out of memory");
                goto out;
            }
            if ((size_t)snprintf(path, sizeof path, "%s/input-party-%zu.npy", L->root, p + 1) >=
                    sizeof path ||
                fs_npy_write_mat(path, c, &err) != 0) {
                fs_mat_free(c);
                rc = cli_fs_error(L->cmd, &err);
                goto out;
            }
            fs_mat_free(c);
            names[p] = strdup(path);
            if (names[p] == NULL) {
                rc = cli_runtime_error(L->cmd, "out of memory");
                goto out;
            }
            L->shown[p] = names[p];
            off += n;
        }
    }
out:
    for (size_t i = 0; i < ninput; i++) {
        fs_mat_free(m[i]);
    }
    free(m);
    fs_mat_free(x);
    return rc;
}

/* --verify: the result against a centralised SVD of the pooled matrix. */
static int run_verify(struct local *L)
{
    struct local_verify_in in;
    struct fs_err err;
    int *inc = calloc(L->k, sizeof *inc);
    int rc;

    fs_err_clear(&err);
    if (inc == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    for (size_t i = 0; i < L->k; i++) {
        inc[i] = local_in_result(L, i + 1);
    }
    memset(&in, 0, sizeof in);
    in.pca = L->pca;
    in.features = L->features;
    in.standardize = L->standardize;
    in.k = L->ksvd;
    in.nparties = L->k;
    in.files = (const char *const *)L->files;
    in.included = inc;
    in.out = L->out;
    orch_progress_text(&L->prog, "verifying against a centralised SVD");
    rc = local_verify(&in, &L->verify, &err);
    free(inc);
    orch_progress_done(&L->prog);
    return rc == 0 ? CLI_OK : cli_fs_error(L->cmd, &err);
}

/* Resolve every party file and check that all have one shape. */
static int check_parties(struct local *L)
{
    struct fs_err err;

    fs_err_clear(&err);
    for (size_t i = 0; i < L->k; i++) {
        char abs[PATH_MAX];
        size_t rows = 0;
        size_t cols = 0;

        if (realpath(L->shown[i], abs) == NULL) {
            return cli_runtime_error(L->cmd, "%s: %s", L->shown[i], strerror(errno));
        }
        L->files[i] = strdup(abs);
        if (L->files[i] == NULL) {
            return cli_runtime_error(L->cmd, "out of memory");
        }
        /* every value checked now, so a bad file fails before anything starts
         * (the agents load their file again; .npy files are streamed here) */
        if (fs_io_check_dense(abs, FS_FMT_AUTO, NULL, &rows, &cols, &err) != 0) {
            return cli_fs_error(L->cmd, &err);
        }
        if (L->fed) {
            /* samples: same columns, rows add up; features: the mirror */
            size_t same = L->features ? rows : cols;
            size_t own = L->features ? cols : rows;
            size_t want = L->features ? L->n_rows : L->n_cols;
            if (i > 0 && same != want) {
                int rc = cli_runtime_error(
                    L->cmd, "%s: %zu %s, but %s has %zu (partition %s: parties share the %s)",
                    L->shown[i], same, L->features ? "rows" : "columns", L->shown[0], want,
                    L->features ? "features" : "samples", L->features ? "rows" : "columns");
                return rc;
            }
            if (L->features) {
                L->n_rows = same;
                L->n_cols += own;
            } else {
                L->n_cols = same;
                L->n_rows += own;
            }
            L->sizes[i] = own;
            L->rows = rows;
            L->cols = cols;
            continue;
        }
        if (i == 0) {
            L->rows = rows;
            L->cols = cols;
        } else if (rows != L->rows || cols != L->cols) {
            int rc = cli_runtime_error(L->cmd, "%s: shape %zu x %zu differs from %s (%zu x %zu)",
                                       L->shown[i], rows, cols, L->shown[0], L->rows, L->cols);
            return rc;
        }
    }
    return CLI_OK;
}

/* fedsvd/fedpca: --k, when given, against the pooled N x d that check_parties found. */
static int check_k(const struct local *L, const char *s_k)
{
    size_t r = L->n_rows < L->n_cols ? L->n_rows : L->n_cols;

    if (!L->fed || s_k == NULL || (L->ksvd >= 1 && L->ksvd <= r)) {
        return CLI_OK;
    }
    return cli_usage_error(L->cmd,
                           "--k: must be between 1 and min(N, d) = %zu (N = %zu rows, d = %zu "
                           "columns in all), got '%s'",
                           r, L->n_rows, L->n_cols, s_k);
}

/* The run itself, once arguments are checked: returns the exit status and
 * leaves the error text (if any) in *error for the summary. */
static int run(struct local *L, char *error, size_t error_cap)
{
    json_t *invs = NULL;
    int rc;

    error[0] = '\0';
    if ((rc = local_start(L, error, error_cap)) != CLI_OK) {
        goto out;
    }
    if ((rc = create_job(L, &invs)) != CLI_OK ||
        (L->fed && (rc = create_maskset(L, invs)) != CLI_OK)) {
        snprintf(error, error_cap, "job setup failed");
        goto out;
    }
    if ((rc = local_drive(L, invs, error, error_cap)) != CLI_OK) {
        goto out;
    }
    if (L->fed) {
        if ((rc = fed_collect(L)) != CLI_OK) {
            snprintf(error, error_cap, "could not collect the parties' results");
            goto out;
        }
        L->t_collected = cli_now();
    } else if ((rc = fetch_result(L)) != CLI_OK || (rc = local_settle_agents(L, 60.0)) != CLI_OK) {
        snprintf(error, error_cap, "could not fetch the result");
        goto out;
    }
out:
    json_decref(invs);
    return rc;
}

/* The options of fedsvd local for secure-sum, fedsvd and fedpca. */
struct fed_args {
    struct local_args c; /* the options of every algorithm */
    const char *s_k, *s_part, *s_block, *s_method, *s_parties, *s_shards, *s_test_seed;
    int standardize, verify;
    size_t nsplit;                        /* --parties K with --input: K, else 0 */
    char *split_names[LOCAL_MAX_PARTIES]; /* the files --input was split into */
};

/* --input FILE... --parties K instead of --party FILE per party. */
static int check_split(struct local *L, struct fed_args *a)
{
    int rc;

    if (a->c.ninput == 0 && a->s_parties == NULL) {
        return CLI_OK;
    }
    if (a->c.nparty > 0 || a->c.ninput == 0 || a->s_parties == NULL) {
        return cli_usage_error(L->cmd, "give either --party FILE per party, or --input FILE... "
                                       "with --parties K");
    }
    if ((rc = cli_parse_size(L->cmd, "--parties", a->s_parties, 1, LOCAL_MAX_PARTIES,
                             &a->nsplit)) != CLI_OK) {
        return rc;
    }
    for (size_t i = 0; i < a->nsplit; i++) {
        a->c.party[i] = "(split)"; /* replaced once the split files exist */
    }
    a->c.nparty = a->nsplit;
    return CLI_OK;
}

/* The algorithm and its fedsvd/fedpca options into L. */
static int check_algorithm(struct local *L, const struct fed_args *a)
{
    const char *cmd = L->cmd;
    enum fs_algo algo;
    int rc;

    /* (the power methods are cmd_local_power's) */
    if (fs_algo_parse(a->c.s_alg, &algo) != 0 || fs_algo_is_power(algo)) {
        return cli_usage_error(cmd, "--algorithm: expected " FS_ALGO_LIST ", got '%s'", a->c.s_alg);
    }
    L->fed = fs_algo_is_fedsvd(algo);
    L->pca = algo == FS_ALGO_FEDPCA;
    if (!L->fed && (a->s_k != NULL || a->s_part != NULL || a->s_block != NULL ||
                    a->s_method != NULL || a->standardize || a->c.allow_dropouts)) {
        return cli_usage_error(cmd, "--k, --partition, --block-size, --method, --standardize and "
                                    "--allow-dropouts are for fedsvd and fedpca");
    }
    if (a->standardize && !L->pca) {
        return cli_usage_error(cmd, "--standardize is for fedpca");
    }
    if (a->s_part != NULL && strcmp(a->s_part, "samples") != 0 &&
        strcmp(a->s_part, "features") != 0) {
        return cli_usage_error(cmd, "--partition: expected samples or features, got '%s'",
                               a->s_part);
    }
    if (a->s_method != NULL && strcmp(a->s_method, "exact") != 0 &&
        strcmp(a->s_method, "randomized") != 0) {
        return cli_usage_error(cmd, "--method: expected exact or randomized, got '%s'",
                               a->s_method);
    }
    /* (--k 0 too: its range, 1..min(N, d), is known once the files are read) */
    if ((a->s_k != NULL &&
         (rc = cli_parse_size(cmd, "--k", a->s_k, 0, (size_t)1 << 31, &L->ksvd)) != 0) ||
        (a->s_block != NULL && (rc = cli_parse_size(cmd, "--block-size", a->s_block, 1,
                                                    (size_t)1 << 31, &L->block)) != 0)) {
        return rc;
    }
    L->features = a->s_part != NULL && strcmp(a->s_part, "features") == 0;
    L->randomized = a->s_method != NULL && strcmp(a->s_method, "randomized") == 0;
    if (L->randomized && a->s_k == NULL) {
        return cli_usage_error(cmd, "--method randomized needs --k");
    }
    L->standardize = a->standardize;
    L->allow_dropouts = a->c.allow_dropouts;
    if (a->s_shards != NULL) {
        if ((rc = cli_parse_size(cmd, "--shards", a->s_shards, 1, FS_JOB_MAX_SHARDS, &L->shards)) !=
            0) {
            return rc;
        }
        if (L->shards > 1 && (!L->fed || L->features)) {
            return cli_usage_error(cmd, "--shards needs fedsvd or fedpca with the samples "
                                        "partition");
        }
    }
    return CLI_OK;
}

/* Every option checked, L filled in (before any file is read). */
static int check_options(struct local *L, struct fed_args *a)
{
    const char *cmd = L->cmd;
    /* fedsvd/fedpca rounds carry whole matrices: a round closes as soon as
     * every party is in, so a long deadline costs nothing unless one drops */
    size_t rt = 5;
    int rc;

    if ((rc = check_split(L, a)) != CLI_OK) {
        return rc;
    }
    if (a->c.s_alg == NULL || a->c.s_out == NULL || a->c.nparty == 0) {
        return cli_usage_error(cmd, "--algorithm, --out and at least one --party are required");
    }
    if ((rc = check_algorithm(L, a)) != CLI_OK) {
        return rc;
    }
    if (L->fed) {
        rt = 300;
    }
    if ((rc = local_apply_args(L, &a->c, LOCAL_FAIL_SECAGG,
                               !L->fed  ? FS_ALGO_SECURE_SUM
                               : L->pca ? FS_ALGO_FEDPCA
                                        : FS_ALGO_FEDSVD,
                               rt)) != CLI_OK) {
        return rc;
    }
    L->t_start = cli_now();
    orch_progress_init(&L->prog, stderr, cmd);
    if (a->verify && !L->fed) {
        return cli_usage_error(cmd, "--verify is for fedsvd and fedpca");
    }
    if (a->s_test_seed != NULL) {
        return local_parse_test_seed(L, a->s_test_seed);
    }
    return CLI_OK;
}

/* The party files (split first with --input), the temporary root and the
 * processes' paths; the signal handlers from here on. */
static int prepare(struct local *L, struct fed_args *a, struct local_signals *sigs)
{
    int rc;

    if ((a->nsplit == 0 &&
         ((rc = check_parties(L)) != CLI_OK || (rc = check_k(L, a->s_k)) != CLI_OK)) ||
        (rc = local_open_run(L, &a->c, sigs)) != CLI_OK ||
        (a->nsplit > 0 &&
         ((rc = split_inputs(L, a->c.input, a->c.ninput, a->split_names)) != CLI_OK ||
          (rc = check_parties(L)) != CLI_OK || (rc = check_k(L, a->s_k)) != CLI_OK))) {
        return rc;
    }
    return local_init_procs(L);
}

/* The job, then --verify (fedsvd/fedpca) or the agents' copies of the sum
 * (secure-sum, into agent_sha). */
static int run_and_check(struct local *L, const struct fed_args *a, json_t **agent_sha, char *error,
                         size_t error_cap)
{
    int rc = run(L, error, error_cap);

    if (rc == CLI_OK && L->fed && a->verify) {
        rc = run_verify(L);
        if (rc != CLI_OK) {
            snprintf(error, error_cap, "verification failed");
        }
    }
    if (rc == CLI_OK && !L->fed) {
        *agent_sha = json_array();
        rc = check_agent_results(L, *agent_sha);
        if (rc != CLI_OK) {
            snprintf(error, error_cap, "agents disagree with the server");
        }
        local_refresh_job(L);
    }
    return rc;
}

/* The summary and the text outcome of a run (local_finish). */
struct outcome {
    struct local *L;
    const json_t *agent_sha;
};

static json_t *outcome_summary(void *ctx, const char *error)
{
    struct outcome *o = ctx;

    return o->L->fed ? build_fed_summary(o->L, error) : build_summary(o->L, o->agent_sha, error);
}

static void outcome_print(void *ctx, const json_t *summary)
{
    const struct local *L = ((struct outcome *)ctx)->L;

    if (L->fed) {
        print_fed_text(L, summary);
    } else {
        printf("secure-sum of %zu of %zu parties (%zu dropped, threshold %zu) in %.1f s: "
               "%s/sum.npy\n",
               orch_count(summary, "survivors"), L->k, orch_count(summary, "dropped"), L->thr,
               L->t_finished - L->t_created, L->out);
    }
}

int cmd_local(int argc, char **argv)
{
    const char *cmd = "local";
    struct fed_args a;
    struct cli_opt opts[] = {
        LOCAL_COMMON_OPTS(a.c),
        {"k", CLI_OPT_VALUE, &a.s_k, NULL},
        {"partition", CLI_OPT_VALUE, &a.s_part, NULL},
        {"block-size", CLI_OPT_VALUE, &a.s_block, NULL},
        {"method", CLI_OPT_VALUE, &a.s_method, NULL},
        {"standardize", CLI_OPT_FLAG, NULL, &a.standardize},
        {"parties", CLI_OPT_VALUE, &a.s_parties, NULL},
        {"verify", CLI_OPT_FLAG, NULL, &a.verify},
        {"shards", CLI_OPT_VALUE, &a.s_shards, NULL},
        {"test-mask-seed", CLI_OPT_VALUE, &a.s_test_seed, NULL},
    };
    int help = 0, rc;
    struct local L;
    struct local_signals sigs;
    char error[FS_ERR_MSG_MAX];
    json_t *agent_sha = NULL;

    memset(&a, 0, sizeof a);
    memset(&L, 0, sizeof L);
    memset(&sigs, 0, sizeof sigs);
    L.cmd = cmd;
    L.round_timeout = 5;
    L.timeout = 600;
    error[0] = '\0';
    rc = local_read_args(cmd, argc, argv, opts, NOPTS(opts), &a.c, &help);
    if (rc == CLI_OK && help) {
        local_help();
    } else if (rc == CLI_OK && (rc = check_options(&L, &a)) == CLI_OK &&
               (rc = prepare(&L, &a, &sigs)) == CLI_OK) {
        rc = run_and_check(&L, &a, &agent_sha, error, sizeof error);
    }
    if (!help) {
        struct outcome o = {&L, agent_sha};

        rc = local_finish(&L, outcome_summary, outcome_print, &o, error, rc);
    }
    local_signals_restore(&sigs);
    json_decref(agent_sha);
    local_free(&L);
    for (size_t i = 0; i < a.nsplit; i++) {
        free(a.split_names[i]);
    }
    return rc;
}

/* ---- for the commands that run several jobs on one set of services (lsa) ---- */

int local_create_job(struct local *L, json_t **invitations)
{
    return create_job(L, invitations);
}

int local_create_maskset(struct local *L, json_t *invs)
{
    return create_maskset(L, invs);
}

int local_fetch_sum(struct local *L)
{
    return fetch_result(L);
}

int local_fed_collect(struct local *L)
{
    return fed_collect(L);
}

json_t *local_fed_summary(struct local *L, const char *error)
{
    return build_fed_summary(L, error);
}
