/* Power-method jobs on the aggregation server: see powerjob.h. Protocol
 * logic stays in lib/proto/fedpower; this file moves its messages, files and
 * phases. */
#include "powerjob.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../api/wire.h"
#include "crypto/rand.h"
#include "io/matio.h"
#include "jobmgr_internal.h"
#include "net/log.h"
#include "proto/fedpower.h"
#include "proto/secagg.h"

#define RESTART_REASON "server restarted during a fedpower job; not resumable"

struct agg_power {
    /* immutable after pj_attach */
    struct fs_fedpower_config cfg;
    uint64_t rows[FS_JOB_MAX_PARTIES];
    struct fs_fedpower_privacy priv;
    uint32_t syncs;
    int secagg;
    char *pk_b64; /* fedpower-utility: the exported public key */
    unsigned pk_bits;
    size_t sel_size;
    size_t resp_size;

    /* sm_mu */
    fs_fedpower_server *srv;
    uint8_t *active; /* plain fedpower: the parties expected in the next round */

    /* mu */
    uint32_t sync;    /* status: current sync (syncs at the Rayleigh round and after) */
    uint32_t iter;    /* status: the iteration the current Z follows */
    double crypto_s;  /* Paillier key generation, selectors, decryptions */
    json_t *sync_ids; /* array: per sync, the ids in its aggregate */
    json_t *last_ids; /* the ids of the last aggregate */
};

static int is_plain(const agg_job *j)
{
    return j->pw != NULL && j->pw->cfg.alg == FS_FEDPOWER_PLAIN;
}

static int is_utility(const agg_job *j)
{
    return j->pw != NULL && j->pw->cfg.alg == FS_FEDPOWER_UTILITY;
}

/* ------------------------------------------------------------ creation */

int pj_prepare_spec(struct fs_job_spec *spec, struct fs_err *err)
{
    struct fs_fedpower_config cfg;
    struct fs_fedpower_privacy rep;
    uint64_t rows[FS_JOB_MAX_PARTIES];
    int rc;

    if (!spec->power.has_z0_seed) {
        rc = fs_rand_bytes(spec->power.z0_seed, sizeof spec->power.z0_seed, err);
        if (rc != 0) {
            return rc;
        }
        spec->power.has_z0_seed = 1;
    }
    rc = fs_job_fedpower_config(spec, &cfg, rows, err);
    if (rc == 0) {
        rc = fs_fedpower_privacy_report(&cfg, rows, &rep, err);
    }
    if (rc != 0) {
        return fs_err_set(err, FS_EINVAL, "%s", err != NULL ? err->msg : "bad configuration");
    }
    if (!rep.allowed) {
        return fs_err_set(err, FS_EINVAL,
                          "privacy too weak: total epsilon %g at delta %g exceeds %g (%s); set "
                          "allow_weak_privacy to run it anyway",
                          rep.eps_total, rep.delta, FS_FEDPOWER_WEAK_EPS, rep.note);
    }
    return 0;
}

uint64_t pj_round_len(const struct fs_job_spec *spec, uint32_t r)
{
    uint32_t syncs = (spec->power.iterations + spec->power.sync_every - 1) / spec->power.sync_every;
    uint64_t rk = spec->power.rank;

    return r < syncs ? spec->cols * rk : rk * rk;
}

uint32_t pj_secagg_aggregations(const struct fs_job_spec *spec)
{
    return strcmp(spec->algorithm, "fedpower") == 0 ? 1 : fs_job_aggregations(spec);
}

void pj_free(struct agg_power *pw)
{
    if (pw == NULL) {
        return;
    }
    fs_fedpower_server_free(pw->srv);
    free(pw->pk_b64);
    free(pw->active);
    json_decref(pw->sync_ids);
    json_decref(pw->last_ids);
    free(pw);
}

int pj_attach(agg_job *j, int with_server, struct fs_err *err)
{
    struct agg_power *pw = calloc(1, sizeof *pw);
    int rc;

    if (pw == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    pw->active = calloc((size_t)j->n + 1, 1);
    pw->sync_ids = json_array();
    pw->last_ids = json_array();
    if (pw->active == NULL || pw->sync_ids == NULL || pw->last_ids == NULL) {
        pj_free(pw);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_job_fedpower_config(&j->spec, &pw->cfg, pw->rows, err);
    if (rc == 0) {
        rc = fs_fedpower_privacy_report(&pw->cfg, pw->rows, &pw->priv, err);
    }
    if (rc != 0) {
        pj_free(pw);
        return rc;
    }
    pw->syncs = fs_fedpower_syncs(&pw->cfg);
    pw->secagg = fs_fedpower_uses_secagg(pw->cfg.alg);
    if (with_server) {
        double t0 = now_mono();
        rc = fs_fedpower_server_new(&pw->cfg, pw->rows, &pw->srv, err);
        if (rc != 0) {
            pj_free(pw);
            return rc;
        }
        /* the seeded noise of a noise exchange is regenerated on every core */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        fs_fedpower_server_set_threads(pw->srv, cpus < 1 ? 1u : (unsigned)(cpus > 64 ? 64 : cpus));
        if (pw->cfg.alg == FS_FEDPOWER_UTILITY) {
            size_t len = 0;
            const uint8_t *pk = fs_fedpower_server_exchange_key(pw->srv, &len);
            pw->pk_b64 = pk != NULL ? fs_b64url_encode(pk, len) : NULL;
            if (pw->pk_b64 == NULL) {
                pj_free(pw);
                return fs_err_set(err, FS_ENOMEM, "out of memory");
            }
            pw->pk_bits = pw->cfg.paillier_bits;
            pw->sel_size = fs_fedpower_server_selector_size(pw->srv);
            pw->resp_size = fs_fedpower_server_response_size(pw->srv);
            pw->crypto_s = now_mono() - t0;
        }
    }
    j->pw = pw;
    return 0;
}

void pj_load(agg_job *j, int running)
{
    struct fs_err err = {0};

    if (pj_attach(j, 0, &err) != 0) {
        fs_log_pack(FS_LOG_WARN, "power-method job without its parameters", "{s:s, s:s}", "job",
                    j->id, "error", err.msg);
    }
    if (j->pw != NULL) {
        j->pw->sync = j->pw->syncs;
        j->pw->iter = j->pw->cfg.iterations;
    }
    if (running) {
        pthread_mutex_lock(&j->sm_mu);
        fail_job(j, RESTART_REASON);
        pthread_mutex_unlock(&j->sm_mu);
    }
}

void pj_set_active_locked(agg_job *j, const uint32_t *ids, size_t k)
{
    memset(j->pw->active, 0, (size_t)j->n + 1);
    for (size_t i = 0; i < k; i++) {
        j->pw->active[ids[i]] = 1;
    }
}

/* ------------------------------------------------------------ status */

static json_t *num(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *privacy_json(const struct fs_fedpower_privacy *p)
{
    json_t *o = json_object();

    if (o == NULL) {
        return NULL;
    }
    json_object_set_new(o, "formal", json_boolean(p->formal));
    json_object_set_new(o, "relation", json_string(p->relation));
    json_object_set_new(o, "server_learns", json_string(p->server_learns));
    json_object_set_new(o, "note", json_string(p->note));
    json_object_set_new(o, "delta", num(p->delta));
    json_object_set_new(o, "sigma", num(p->sigma));
    json_object_set_new(o, "sigma_server", num(p->sigma_server));
    json_object_set_new(o, "sensitivity", num(p->sensitivity));
    json_object_set_new(o, "releases", json_integer(p->releases));
    json_object_set_new(o, "rho_round", num(p->rho_round));
    json_object_set_new(o, "rho_total", num(p->rho_total));
    json_object_set_new(o, "eps_round", num(p->eps_round));
    json_object_set_new(o, "eps_total", num(p->eps_total));
    json_object_set_new(o, "paper_eps_round", num(p->paper_eps_round));
    json_object_set_new(o, "paper_eps_total", num(p->paper_eps_total));
    json_object_set_new(o, "paper_delta_total", num(p->paper_delta_total));
    json_object_set_new(o, "paper_formula_valid", json_boolean(p->paper_formula_valid));
    json_object_set_new(o, "weak", json_boolean(p->weak));
    json_object_set_new(o, "allowed", json_boolean(p->allowed));
    return o;
}

void pj_status_locked(const agg_job *j, json_t *o)
{
    const struct agg_power *pw = j->pw;

    json_object_set_new(o, "cols", json_integer((json_int_t)j->spec.cols));
    (void)fs_job_fedpower_encode(o, j->spec.algorithm, j->n, &j->spec.power);
    if (pw == NULL) {
        return;
    }
    json_object_set_new(o, "sync", json_integer(pw->sync));
    json_object_set_new(o, "syncs", json_integer(pw->syncs));
    json_object_set_new(o, "iteration", json_integer(pw->iter));
    json_object_set_new(o, "privacy", privacy_json(&pw->priv));
}

/* ------------------------------------------------------------ rounds */

static int z_path(const agg_job *j, uint32_t r, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s/z/%u.npy", j->dir, r) >= cap ? -1 : 0;
}

int pj_begin(agg_job *j, uint32_t r, double at, struct fs_err *err)
{
    struct agg_power *pw = j->pw;
    const fs_mat *z;
    uint32_t iter = 0;
    int rayleigh = r >= pw->syncs;
    uint64_t rk = pw->cfg.r;
    uint64_t urows = rayleigh ? rk : pw->cfg.d;
    uint64_t len = urows * rk;
    char dir[4400];
    char path[4500];
    char hex[65];
    uint32_t *ids = NULL;
    const uint32_t *active;
    size_t na = 0;
    json_t *doc;
    json_t *params;
    int rc;

    z = fs_fedpower_server_broadcast(pw->srv, &iter);
    if (z == NULL || r >= j->naggs) {
        return fs_err_set(err, FS_EINTERNAL, "fedpower: no broadcast for round %u", r);
    }
    snprintf(dir, sizeof dir, "%s/z", j->dir);
    rc = fs_mkdir_p(dir, err);
    if (rc == 0 && z_path(j, r, path, sizeof path) != 0) {
        rc = fs_err_set(err, FS_EINTERNAL, "path too long");
    }
    if (rc == 0) {
        rc = fs_npy_write_mat(path, z, err);
    }
    if (rc == 0) {
        rc = file_sha256_hex(path, hex, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (pw->secagg) {
        rc = fs_secagg_server_begin(j->sm, r, len, err);
        if (rc != 0) {
            after_sm_error(j, rc, err);
            return rc;
        }
        active = fs_secagg_server_set(j->sm, 0, &na);
    } else {
        ids = flag_ids(pw->active, j->n, &na);
        if (ids == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        active = ids;
    }
    params =
        json_pack("{s:i, s:I, s:i}", "r", (int)r, "len", (json_int_t)len, "iteration", (int)iter);
    rc = params == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
                        : log_json(j, "begin", 0, params, at, err);
    json_decref(params);
    if (rc != 0) {
        free(ids);
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    j->r = r;
    j->len = len;
    j->nchunks = pw->secagg ? (len + j->chunk_words - 1) / j->chunk_words : 0;
    pw->sync = rayleigh ? pw->syncs : r;
    pw->iter = iter;
    doc = json_pack("{s:i, s:s, s:o, s:i, s:I, s:I, s:I, s:I, s:I, s:s, s:o, s:{s:[I, I], s:s}, "
                    "s:n, s:n}",
                    "index", (int)r, "kind", rayleigh ? "rayleigh" : "sync", "sync",
                    rayleigh ? json_null() : json_integer(r), "iteration", (int)iter, "length",
                    (json_int_t)len, "rows", (json_int_t)urows, "cols", (json_int_t)rk,
                    "chunk_words", (json_int_t)(pw->secagg ? j->chunk_words : 0), "chunks",
                    (json_int_t)j->nchunks, "phase", pw->secagg ? "masked_input" : "plain_upload",
                    "active", fs_wire_ids_encode(active, na), "z", "shape", (json_int_t)z->rows,
                    (json_int_t)z->cols, "sha256", hex, "survivors", "signatures");
    json_array_set_new(j->aggs, r, doc != NULL ? doc : json_null());
    next_round_locked(j, pw->secagg ? JP_R2 : JP_PLAIN, active, na, at, 0);
    j->finishing = 0; /* (on the worker) the new round is open from now on */
    pthread_mutex_unlock(&j->mu);
    free(ids);
    return doc == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
}

int pj_close_round(agg_job *j, double at, int by_deadline, struct fs_err *err)
{
    struct agg_power *pw = j->pw;
    enum jphase ph;
    uint32_t drops = 0;
    uint32_t first = 0;
    uint32_t *ids = NULL;
    size_t k = 0;
    int rc;

    pthread_mutex_lock(&j->mu);
    ph = j->phase;
    if (ph == JP_PLAIN) {
        drops = mark_dropped_locked(j, &first);
    }
    ids = flag_ids(j->sent, j->n, &k);
    pthread_mutex_unlock(&j->mu);
    if (ids == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    if (!j->replaying) {
        count_add(j->mgr,
                  by_deadline ? &j->mgr->counts.rounds_deadline : &j->mgr->counts.rounds_complete,
                  1);
        count_add(j->mgr, &j->mgr->counts.parties_dropped, drops);
        fs_log_pack(FS_LOG_INFO, "round closed", "{s:s, s:s, s:i, s:s, s:i, s:i}", "job", j->id,
                    "phase", agg_phase_name(ph), "aggregation", (int)j->r, "reason",
                    by_deadline ? "deadline" : "complete", "dropped", (int)drops, "answered",
                    (int)k);
    }
    rc = log_event(j, ph == JP_PLAIN ? "close_plain" : "close_exchange", 0, 0, NULL, 0, at, err);
    if (rc != 0) {
        free(ids);
        return rc;
    }
    if (ph == JP_PLAIN && drops > 0 && !j->spec.power.allow_dropouts) {
        fail_no_dropouts(j, ph, first, drops);
        free(ids);
        return 0;
    }
    if (ph == JP_PLAIN && k < j->spec.threshold) {
        char reason[200];
        snprintf(reason, sizeof reason, "%zu plain uploads in round %u, threshold %u", k, j->r,
                 j->spec.threshold);
        fail_job(j, reason);
        free(ids);
        return 0;
    }
    pthread_mutex_lock(&j->mu);
    j->timings[ph] += at - j->phase_opened;
    j->has_timing[ph] = 1;
    j->phase_opened = at;
    if (ph == JP_PLAIN) {
        memset(pw->active, 0, (size_t)j->n + 1);
        for (size_t i = 0; i < k; i++) {
            pw->active[ids[i]] = 1;
        }
        if (cur_agg(j) != NULL) {
            json_object_set_new(cur_agg(j), "survivors", fs_wire_ids_encode(ids, k));
        }
    } else if (cur_agg(j) != NULL) {
        json_object_set_new(cur_agg(j), "responders", fs_wire_ids_encode(ids, k));
    }
    pthread_mutex_unlock(&j->mu);
    free(ids);
    if (start_worker(j) != 0) {
        fail_job(j, "cannot start the worker");
        return fs_err_set(err, FS_EINTERNAL, "cannot start a thread");
    }
    persist_state(j, NULL);
    return 0;
}

/* ------------------------------------------------------------ the worker */

/* The ids of the aggregate just formed: recorded per sync (mu taken). */
static void record_ids(agg_job *j, int sync, const uint32_t *ids, size_t k)
{
    struct agg_power *pw = j->pw;
    json_t *a = fs_wire_ids_encode(ids, k);

    pthread_mutex_lock(&j->mu);
    if (a != NULL) {
        json_decref(pw->last_ids);
        pw->last_ids = json_incref(a);
        if (sync) {
            json_array_append(pw->sync_ids, a);
        }
        json_decref(a);
    }
    pthread_mutex_unlock(&j->mu);
}

static int write_npy_hex(agg_job *j, const char *name, const fs_mat *m, const double *v, size_t n,
                         char hex[65], struct fs_err *err)
{
    char dir[4400];
    char path[4500];
    int rc;

    snprintf(dir, sizeof dir, "%s/result", j->dir);
    rc = fs_mkdir_p(dir, err);
    if (rc == 0 && (size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
        rc = fs_err_set(err, FS_EINTERNAL, "path too long");
    }
    if (rc == 0) {
        rc = m != NULL ? fs_npy_write_mat(path, m, err) : fs_npy_write_vec(path, v, n, err);
    }
    if (rc == 0) {
        rc = file_sha256_hex(path, hex, err);
    }
    return rc;
}

/* Result files and manifest from the finished server. sm_mu held. */
static int build_result(agg_job *j, json_t **out, struct fs_err *err)
{
    struct agg_power *pw = j->pw;
    const struct fs_fedpower_config *c = &pw->cfg;
    struct fs_fedpower_result res;
    char hv[65];
    char he[65];
    json_t *files = NULL;
    json_t *conv = NULL;
    json_t *eig = NULL;
    json_t *timings = NULL;
    json_t *o = NULL;
    json_t *survivors = NULL;
    uint32_t *sv = NULL;
    size_t nsv = 0;
    int rc;

    *out = NULL;
    rc = fs_fedpower_server_result(pw->srv, &res, err);
    if (rc != 0) {
        return rc;
    }
    if (res.z == NULL) {
        fs_fedpower_result_clear(&res);
        return fs_err_set(err, FS_EINTERNAL, "fedpower: finished without a result");
    }
    rc = write_npy_hex(j, "V.npy", res.z, NULL, 0, hv, err);
    if (rc == 0 && res.eigenvalues != NULL) {
        rc = write_npy_hex(j, "eigenvalues.npy", NULL, res.eigenvalues, c->k, he, err);
    }
    if (rc != 0) {
        fs_fedpower_result_clear(&res);
        return rc;
    }
    files = json_pack("[{s:s, s:[I, I], s:s}]", "name", "V.npy", "shape", (json_int_t)res.z->rows,
                      (json_int_t)res.z->cols, "sha256", hv);
    if (files != NULL && res.eigenvalues != NULL) {
        json_array_append_new(files, json_pack("{s:s, s:[I], s:s}", "name", "eigenvalues.npy",
                                               "shape", (json_int_t)c->k, "sha256", he));
    }
    eig = res.eigenvalues != NULL ? json_array() : json_null();
    for (uint32_t i = 0; res.eigenvalues != NULL && eig != NULL && i < c->k; i++) {
        json_array_append_new(eig, num(res.eigenvalues[i]));
    }
    conv = json_array();
    pthread_mutex_lock(&j->mu);
    for (uint32_t q = 0; conv != NULL && q < res.syncs; q++) {
        uint64_t it = ((uint64_t)q + 1) * c->sync_every;
        json_t *ids = json_array_get(pw->sync_ids, q);
        json_array_append_new(
            conv, json_pack("{s:i, s:I, s:o, s:O, s:i}", "sync", (int)q, "iteration",
                            (json_int_t)(it < c->iterations ? it : c->iterations), "change",
                            num(res.convergence[q]), "parties", ids != NULL ? ids : json_null(),
                            "noises_left", (int)res.noises_left[q]));
    }
    survivors = json_deep_copy(pw->last_ids);
    timings = json_object();
    for (int t = 0; timings != NULL && t < NTIMINGS; t++) {
        if (j->has_timing[t]) {
            json_object_set_new(timings, agg_timing_name(t), json_real(j->timings[t]));
        }
    }
    if (timings != NULL) {
        json_object_set_new(timings, "crypto", json_real(pw->crypto_s));
    }
    o = json_pack("{s:s, s:i, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:{s:I, "
                  "s:I}, s:o}",
                  "algorithm", j->spec.algorithm, "parties", (int)j->n, "survivors",
                  survivors != NULL ? survivors : json_array(), "d", (json_int_t)c->d, "k",
                  (json_int_t)c->k, "r", (json_int_t)c->r, "iterations", (json_int_t)c->iterations,
                  "sync_every", (json_int_t)c->sync_every, "syncs", (json_int_t)pw->syncs,
                  "eigenvalues", eig != NULL ? eig : json_null(), "convergence",
                  conv != NULL ? conv : json_array(), "privacy", privacy_json(&res.privacy),
                  "timings", timings != NULL ? timings : json_object(), "bytes", "in",
                  (json_int_t)j->bytes_in, "out", (json_int_t)j->bytes_out, "files",
                  files != NULL ? files : json_array());
    pthread_mutex_unlock(&j->mu);
    if (o != NULL) {
        size_t i;
        json_object_set_new(
            o, "shape", json_pack("[I, I]", (json_int_t)j->spec.rows, (json_int_t)j->spec.cols));
        json_t *v;
        uint8_t *in = calloc((size_t)j->n + 1, 1);
        json_array_foreach(json_object_get(o, "survivors"), i, v)
        {
            json_int_t p = json_integer_value(v);
            if (in != NULL && p >= 1 && p <= (json_int_t)j->n) {
                in[p] = 1;
            }
        }
        sv = in != NULL ? flag_ids(in, j->n, &nsv) : NULL;
        json_object_set_new(o, "dropped", sv != NULL ? dropped_of(j, sv, nsv) : json_array());
        free(in);
        free(sv);
    }
    fs_fedpower_result_clear(&res);
    if (o == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    *out = o;
    return 0;
}

/* The job is done: result, state, cleanup. sm_mu held. */
static void finish_job(agg_job *j, double at)
{
    struct fs_err err = {0};
    json_t *res = NULL;
    char *res_s = NULL;
    int rc = build_result(j, &res, &err);

    if (rc == 0) {
        res_s = json_dumps(res, JSON_COMPACT);
        rc = res_s == NULL ? fs_err_set(&err, FS_ENOMEM, "out of memory") : 0;
    }
    if (rc == 0) {
        rc = log_event(j, "done", 0, 0, NULL, 0, at, &err);
    }
    if (rc != 0) {
        char reason[600];
        snprintf(reason, sizeof reason, "result failed: %s", err.msg);
        json_decref(res);
        free(res_s);
        fail_job(j, reason);
        return;
    }
    pthread_mutex_lock(&j->mu);
    j->phase = JP_DONE;
    j->result = res;
    memset(j->in_round, 0, (size_t)j->n + 1);
    if (cur_agg(j) != NULL) {
        json_object_set_new(cur_agg(j), "phase", json_string("done"));
    }
    j->pw->sync = j->pw->syncs;
    j->pw->iter = j->pw->cfg.iterations;
    pthread_mutex_unlock(&j->mu);
    persist_state(j, res_s);
    free(res_s);
    fs_log_pack(FS_LOG_INFO, "job done", "{s:s, s:s}", "job", j->id, "algorithm",
                j->spec.algorithm);
    fs_secagg_server_free(j->sm);
    j->sm = NULL;
    fs_fedpower_server_free(j->pw->srv); /* wipes the Paillier key */
    j->pw->srv = NULL;
    rm_tree(j->tmp_dir);
    for (uint32_t r = 0; r < j->naggs; r++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/agg-%u", j->dir, r);
        rm_tree(p);
    }
}

/* After an aggregate: the next round or the end. sm_mu held. */
static int advance(agg_job *j, double at, struct fs_err *err)
{
    int rc;

    if (fs_fedpower_server_phase(j->pw->srv) == FS_FEDPOWER_DONE) {
        finish_job(j, at);
        return 0;
    }
    rc = pj_begin(j, j->r + 1, at, err);
    if (rc == 0) {
        persist_state(j, NULL);
    }
    return rc;
}

void pj_worker(agg_job *j)
{
    struct agg_power *pw = j->pw;
    struct fs_err err = {0};
    enum jphase ph;
    uint32_t r;
    double t0;
    double at;
    int rc = 0;
    int sync;

    pthread_mutex_lock(&j->mu);
    ph = j->phase;
    r = j->r;
    pthread_mutex_unlock(&j->mu);
    if (pw == NULL || pw->srv == NULL || ph == JP_FAILED || ph == JP_DONE) {
        return;
    }
    sync = r < pw->syncs;
    t0 = now_mono();
    if (ph == JP_R4) {
        const uint64_t *sum = NULL;
        const uint32_t *u3 = NULL;
        size_t n3 = 0;
        rc = fs_secagg_server_finish(j->sm, &sum, &err);
        if (rc != 0) {
            if (fs_secagg_server_phase(j->sm) == FS_SECAGG_ABORTED) {
                fail_job(j, fs_secagg_server_abort_reason(j->sm));
                return;
            }
        } else {
            u3 = fs_secagg_server_set(j->sm, 3, &n3);
            t0 = now_mono();
            rc = fs_fedpower_server_add_sum(pw->srv, sum, (size_t)j->len, u3, n3, &err);
            if (rc == 0) {
                record_ids(j, sync, u3, n3);
            }
        }
        at = now_wall();
        pthread_mutex_lock(&j->mu);
        j->timings[JP_R4] += at - j->phase_opened;
        j->has_timing[JP_R4] = 1;
        if (rc == 0 && is_utility(j)) {
            pw->crypto_s += now_mono() - t0;
        }
        pthread_mutex_unlock(&j->mu);
        if (rc == 0 && fs_fedpower_server_phase(pw->srv) == FS_FEDPOWER_EXCHANGE) {
            /* fedpower-utility: the noise exchange of this sync over U3 */
            rc = log_event(j, "exchange", 0, r, NULL, 0, at, &err);
            if (rc == 0) {
                pthread_mutex_lock(&j->mu);
                if (cur_agg(j) != NULL) {
                    json_object_set_new(cur_agg(j), "phase", json_string("noise_exchange"));
                }
                next_round_locked(j, JP_NOISEX, u3, n3, at, 0);
                j->finishing = 0; /* the exchange is open from now on */
                pthread_mutex_unlock(&j->mu);
                persist_state(j, NULL);
                return;
            }
        }
    } else if (ph == JP_NOISEX) {
        rc = fs_fedpower_server_close_exchange(pw->srv, &err);
        pthread_mutex_lock(&j->mu);
        pw->crypto_s += now_mono() - t0;
        pthread_mutex_unlock(&j->mu);
    } else if (ph == JP_PLAIN) {
        uint32_t *ids = NULL;
        size_t k = 0;
        pthread_mutex_lock(&j->mu);
        ids = flag_ids(pw->active, j->n, &k);
        pthread_mutex_unlock(&j->mu);
        rc = ids == NULL ? fs_err_set(&err, FS_ENOMEM, "out of memory")
                         : fs_fedpower_server_close_plain(pw->srv, &err);
        if (rc == 0) {
            record_ids(j, sync, ids, k);
        }
        free(ids);
    } else {
        return;
    }
    at = now_wall();
    if (rc == 0) {
        pthread_mutex_lock(&j->mu);
        if (cur_agg(j) != NULL) {
            json_object_set_new(cur_agg(j), "phase", json_string("done"));
        }
        pthread_mutex_unlock(&j->mu);
        rc = advance(j, at, &err);
    }
    if (rc != 0) {
        char reason[700];
        snprintf(reason, sizeof reason, "%s of round %u failed: %s", agg_phase_name(ph), r,
                 err.msg);
        fail_job(j, reason);
    }
}

/* ------------------------------------------------------------ routes */

int pj_result_name(const agg_job *j, const char *name)
{
    return strcmp(name, "V") == 0 ||
           (strcmp(name, "eigenvalues") == 0 && j->spec.power.eigenvalues);
}

static int need_power(const agg_job *j, int utility_only, int plain_only, struct fs_err *err)
{
    if (j->pw == NULL) {
        return fs_err_set(err, FS_ENOTFOUND, "only power-method jobs have this resource");
    }
    if (utility_only && !is_utility(j)) {
        return fs_err_set(err, FS_ENOTFOUND, "only fedpower-utility jobs exchange noise");
    }
    if (plain_only && !is_plain(j)) {
        return fs_err_set(err, FS_ENOTFOUND, "only fedpower jobs take plain uploads");
    }
    return 0;
}

int agg_job_z_path(agg_job *j, uint32_t r, char *path, size_t cap, struct fs_err *err)
{
    int rc = need_power(j, 0, 0, err);
    int have;

    if (rc == 0) {
        rc = agg_exists(j, r, err);
    }
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    have = json_is_object(json_object_get(json_array_get(j->aggs, r), "z"));
    if (!have) {
        rc = j->phase == JP_FAILED
                 ? fs_err_set(err, AGG_EABORTED, "job failed: %s", j->error)
                 : fs_err_set(err, FS_ESTATE, "round %u has not begun (job phase %s)", r,
                              agg_phase_name(j->phase));
    }
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && z_path(j, r, path, cap) != 0) {
        rc = fs_err_set(err, FS_EINTERNAL, "path too long");
    }
    return rc;
}

int agg_job_exchange_key(agg_job *j, json_t **out, struct fs_err *err)
{
    int rc = need_power(j, 1, 0, err);

    *out = NULL;
    if (rc != 0) {
        return rc;
    }
    if (j->pw->pk_b64 == NULL) {
        return fs_err_set(err, FS_ECONFLICT, "the exchange key is gone (server restarted)");
    }
    *out = json_pack("{s:s, s:i}", "public_key", j->pw->pk_b64, "bits", (int)j->pw->pk_bits);
    return *out == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
}

/* Round r's noise exchange is open and party's input is in the sum; sm_mu held on success. */
static int enter_exchange(agg_job *j, uint32_t party, uint32_t r, struct fs_err *err)
{
    int rc = need_power(j, 1, 0, err);

    if (rc == 0) {
        rc = agg_exists(j, r, err);
    }
    if (rc == 0 && r >= j->pw->syncs) {
        rc = fs_err_set(err, FS_ENOTFOUND, "round %u (Rayleigh) has no noise exchange", r);
    }
    if (rc != 0) {
        return rc;
    }
    rc = enter(j, JP_NOISEX, r, 0, err);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    if (!j->in_round[party]) {
        rc = fs_err_set(err, FS_ECONFLICT, "party %u's input is not in sum %u", party, r);
    }
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && j->pw->srv == NULL) {
        rc = fs_err_set(err, FS_ECONFLICT, "job is over");
    }
    if (rc != 0) {
        leave(j);
    }
    return rc;
}

int agg_job_get_selector(agg_job *j, uint32_t party, uint32_t r, json_t **out, struct fs_err *err)
{
    uint8_t *buf = NULL;
    char *b64 = NULL;
    int rc;

    *out = NULL;
    rc = enter_exchange(j, party, r, err);
    if (rc != 0) {
        return rc;
    }
    buf = malloc(j->pw->sel_size);
    rc = buf == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
                     : fs_fedpower_server_selector(j->pw->srv, party, buf, j->pw->sel_size, err);
    leave(j);
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

int agg_job_noise_check(agg_job *j, uint32_t party, uint32_t r, size_t *bytes, struct fs_err *err)
{
    int rc = enter_exchange(j, party, r, err);

    *bytes = 0;
    if (rc == 0) {
        *bytes = j->pw->resp_size;
        leave(j);
    }
    return rc;
}

int agg_job_post_noise_response(agg_job *j, uint32_t party, uint32_t r, const uint8_t *buf,
                                size_t len, struct fs_err *err)
{
    int rc = enter_exchange(j, party, r, err);

    if (rc != 0) {
        return rc;
    }
    if (len != j->pw->resp_size) {
        rc = fs_err_set(err, FS_EINVAL, "response: %zu bytes, expected %zu", len, j->pw->resp_size);
    } else {
        rc = fs_fedpower_server_add_response(j->pw->srv, party, buf, len, err);
    }
    if (rc == FS_EFORMAT) {
        rc = fs_err_set(err, FS_EINVAL, "response: %s", err->msg);
    } else if (rc == FS_ENOTFOUND) {
        rc = fs_err_set(err, FS_ECONFLICT, "party %u's input is not in sum %u", party, r);
    } else if (rc == FS_ESTATE) {
        rc = fs_err_set(err, FS_ECONFLICT, "%s", err->msg);
    }
    if (rc == 0) {
        pthread_mutex_lock(&j->mu);
        j->sent[party] = 1;
        pthread_mutex_unlock(&j->mu);
    }
    leave(j);
    return rc;
}

int agg_job_plain_check(agg_job *j, uint32_t party, uint32_t r, size_t *rows, size_t *cols,
                        struct fs_err *err)
{
    int rc = need_power(j, 0, 1, err);

    *rows = *cols = 0;
    if (rc == 0) {
        rc = agg_exists(j, r, err);
    }
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    rc = check_phase_locked(j, JP_PLAIN, r, party, err);
    pthread_mutex_unlock(&j->mu);
    if (rc == 0) {
        *rows = r < j->pw->syncs ? (size_t)j->spec.cols : (size_t)j->pw->cfg.r;
        *cols = j->pw->cfg.r;
    }
    return rc;
}

int agg_job_put_plain(agg_job *j, uint32_t party, uint32_t r, const fs_mat *y, double zmax,
                      struct fs_err *err)
{
    int rc = need_power(j, 0, 1, err);

    if (rc == 0) {
        rc = agg_exists(j, r, err);
    }
    if (rc == 0) {
        rc = enter(j, JP_PLAIN, r, party, err);
    }
    if (rc != 0) {
        return rc;
    }
    rc = j->pw->srv == NULL ? fs_err_set(err, FS_ECONFLICT, "job is over")
                            : fs_fedpower_server_add_plain(j->pw->srv, party, y, zmax, err);
    if (rc == FS_ESTATE || rc == FS_ENOTFOUND) {
        rc = fs_err_set(err, FS_ECONFLICT, "%s", err->msg);
    }
    if (rc == 0) {
        pthread_mutex_lock(&j->mu);
        j->sent[party] = 1;
        pthread_mutex_unlock(&j->mu);
    }
    leave(j);
    return rc;
}
