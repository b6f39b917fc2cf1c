/* Power-method jobs on the aggregation server: see powerjob.h. Protocol
 * logic stays in lib/proto/fedpower (the method) and lib/proto/jobsm (the
 * job's phases); this file moves the method's messages and files. It uses
 * the job manager's internals; the job manager reaches it only through
 * agg_power_ops. */
#include "powerjob.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../api/phase.h"
#include "../../api/wire.h"
#include "core/fdio.h"
#include "crypto/aead.h"
#include "crypto/ct.h"
#include "crypto/rand.h"
#include "io/matio.h"
#include "jobmgr_internal.h"
#include "net/log.h"
#include "powerjob_internal.h"
#include "proto/fedpower.h"
#include "proto/secagg.h"
#include "store.h"
#include "teststop.h"

/* The job's sealed server secret (fs_fedpower_server_secret_export) in its
 * directory, and the key it is sealed under in the data directory. */
#define SECRET_FILE     "power.sealed"
#define SERVER_KEY_FILE "server.key"
#define SEALED_MAX      8192 /* a sealed secret is at most ~2.1 KiB (8192-bit key) */
#define SEAL_AD         "fedsvd aggregation-server power-job secret v1 "

/* ------------------------------------------------------------ the sealed secret */

static pthread_mutex_t key_mu = PTHREAD_MUTEX_INITIALIZER;

/* Up to cap bytes of path into buf (*len); FS_ENOTFOUND when it does not
 * exist, FS_EFORMAT when it is longer than cap. */
static int read_small(const char *path, uint8_t *buf, size_t cap, size_t *len, struct fs_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    uint8_t extra;
    int rc = 0;

    *len = 0;
    if (fd < 0) {
        return errno == ENOENT ? fs_err_set(err, FS_ENOTFOUND, "%s is missing", path)
                               : fs_err_set(err, FS_EIO, "%s: %s", path, strerror(errno));
    }
    for (;;) {
        ssize_t n = got < cap ? read(fd, buf + got, cap - got) : read(fd, &extra, 1);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            rc = fs_err_set(err, FS_EIO, "%s: %s", path, strerror(errno));
            break;
        }
        if (n == 0) {
            break;
        }
        if (got >= cap) {
            rc = fs_err_set(err, FS_EFORMAT, "%s is longer than %zu bytes", path, cap);
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    *len = got;
    return rc;
}

/* The 32-byte key <data-dir>/server.key that seals the secrets of power-method
 * jobs; with create, made from the OS CSPRNG (0600) when missing. */
static int server_key(const agg_job *j, int create, uint8_t key[FS_AEAD_KEY_LEN],
                      struct fs_err *err)
{
    char path[4200];
    size_t len = 0;
    int rc;

    if ((size_t)snprintf(path, sizeof path, "%s/%s", j->mgr->data_dir, SERVER_KEY_FILE) >=
        sizeof path) {
        return fs_err_set(err, FS_EINVAL, "data directory path too long");
    }
    pthread_mutex_lock(&key_mu);
    rc = read_small(path, key, FS_AEAD_KEY_LEN, &len, err);
    if (rc == 0 && len != FS_AEAD_KEY_LEN) {
        rc = fs_err_set(err, FS_EFORMAT, "%s is not a 32-byte key", path);
    } else if (rc == FS_ENOTFOUND && create) {
        rc = fs_rand_bytes(key, FS_AEAD_KEY_LEN, err);
        if (rc == 0) {
            rc = fs_write_file_atomic(path, key, FS_AEAD_KEY_LEN, err);
        }
        if (rc == 0) {
            fs_log_pack(FS_LOG_INFO, "created the key for job secrets", "{s:s}", "file",
                        SERVER_KEY_FILE);
        }
    }
    pthread_mutex_unlock(&key_mu);
    if (rc != 0) {
        fs_wipe(key, FS_AEAD_KEY_LEN);
    }
    return rc;
}

static int secret_path(const agg_job *j, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s/%s", j->dir, SECRET_FILE) >= cap ? -1 : 0;
}

/* Associated data of a job's sealed secret: binds it to the job id. */
static size_t seal_ad(const agg_job *j, char *ad, size_t cap)
{
    int n = snprintf(ad, cap, "%s%s", SEAL_AD, j->id);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* Seal srv's secret under server.key into the job directory (atomically),
 * before anything that depends on it leaves the server. */
static int save_secret(agg_job *j, const fs_fedpower_server *srv, struct fs_err *err)
{
    size_t len = fs_fedpower_server_secret_size(srv);
    size_t cap = len + FS_AEAD_BOX_OVERHEAD;
    uint8_t key[FS_AEAD_KEY_LEN];
    uint8_t *sec = malloc(len);
    uint8_t *box = malloc(cap);
    char path[4400];
    char ad[200];
    size_t adlen = seal_ad(j, ad, sizeof ad);
    size_t out = 0;
    int rc;

    if (sec == NULL || box == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    if (secret_path(j, path, sizeof path) != 0) {
        rc = fs_err_set(err, FS_EINVAL, "path too long");
        goto out;
    }
    rc = fs_fedpower_server_secret_export(srv, sec, len, err);
    if (rc == 0) {
        rc = server_key(j, 1, key, err);
    }
    if (rc == 0) {
        rc = fs_aead_box_seal(box, cap, &out, key, ad, adlen, sec, len, err);
        fs_wipe(key, sizeof key);
    }
    if (rc == 0) {
        rc = fs_mkdir_p(j->dir, err);
    }
    if (rc == 0) {
        rc = fs_write_file_atomic(path, box, out, err);
    }
out:
    if (sec != NULL) {
        fs_wipe(sec, len);
    }
    free(sec);
    free(box);
    return rc;
}

/* The job's secret, opened (*out: new buffer of *len bytes; wipe and free it). */
static int load_secret(const agg_job *j, uint8_t **out, size_t *len, struct fs_err *err)
{
    uint8_t key[FS_AEAD_KEY_LEN];
    uint8_t *box = malloc(SEALED_MAX);
    uint8_t *sec = malloc(SEALED_MAX);
    char path[4400];
    char ad[200];
    size_t adlen = seal_ad(j, ad, sizeof ad);
    size_t blen = 0;
    int rc;

    *out = NULL;
    *len = 0;
    if (box == NULL || sec == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    if (secret_path(j, path, sizeof path) != 0) {
        rc = fs_err_set(err, FS_EINVAL, "path too long");
        goto out;
    }
    rc = read_small(path, box, SEALED_MAX, &blen, err);
    if (rc == 0) {
        rc = server_key(j, 0, key, err);
    }
    if (rc == 0) {
        rc = fs_aead_box_open(sec, SEALED_MAX, len, key, ad, adlen, box, blen, err);
        fs_wipe(key, sizeof key);
        if (rc != 0) {
            rc = fs_err_set(err, FS_EAUTH, "the job's sealed secret does not open under %s",
                            SERVER_KEY_FILE);
        }
    }
    if (rc == 0) {
        *out = sec;
        sec = NULL;
    }
out:
    if (sec != NULL) {
        fs_wipe(sec, SEALED_MAX);
    }
    free(sec);
    free(box);
    return rc;
}

/* The job is over: its secret goes (secrets live no longer than their job). */
static void drop_secret(const agg_job *j)
{
    char path[4400];

    if (secret_path(j, path, sizeof path) == 0) {
        (void)unlink(path);
    }
}

/* ------------------------------------------------------------ creation */

/* Before a job is created: draw z0_seed (unless the spec fixes it) and
 * compute the privacy report; a weak job is FS_EINVAL unless
 * allow_weak_privacy, as is an unreachable (epsilon, delta) target. */
static int pj_prepare_spec(struct fs_job_spec *spec, struct fs_err *err)
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

/* Words of round r's upload: d*r at a sync, r*r at the Rayleigh round. */
static uint64_t pj_round_len(const struct fs_job_spec *spec, uint32_t r)
{
    uint32_t syncs = (spec->power.iterations + spec->power.sync_every - 1) / spec->power.sync_every;
    uint64_t rk = spec->power.rank;

    return r < syncs ? spec->cols * rk : rk * rk;
}

/* SecAgg aggregations the job's fs_secagg_server needs (1 for plain fedpower). */
static uint32_t pj_secagg_aggregations(const struct fs_job_spec *spec)
{
    return spec->algo == FS_ALGO_FEDPOWER ? 1 : fs_job_aggregations(spec);
}

/* Free (the server wipes its key). */
static void pj_free(struct agg_power *pw)
{
    if (pw == NULL) {
        return;
    }
    pj_join_precompute(NULL, pw); /* (it reads srv) */
    fs_fedpower_server_free(pw->srv);
    fs_fedpower_xpre_free(pw->xpre);
    free(pw->pk_b64);
    json_decref(pw->sync_ids);
    json_decref(pw->last_ids);
    free(pw);
}

static void pj_detach(agg_job *j)
{
    pj_free(j->pw);
    j->pw = NULL;
}

/* Attach the power-method state to a job shell: configuration, privacy
 * report; with_server: the lib/proto server, restored from secret when
 * given, else new (fedpower-utility: Paillier key generation, ~0.1-1 s at
 * 3072 bits) with its secret sealed into the job directory. */
static int attach_with(agg_job *j, int with_server, const uint8_t *secret, size_t secret_len,
                       struct fs_err *err)
{
    struct agg_power *pw = calloc(1, sizeof *pw);
    int rc;

    if (pw == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    pw->sync_ids = json_array();
    pw->last_ids = json_array();
    if (pw->sync_ids == NULL || pw->last_ids == NULL) {
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
    pw->exchanges = fs_fedpower_exchanges(&pw->cfg);
    pw->secagg = fs_fedpower_uses_secagg(pw->cfg.alg);
    if (with_server) {
        double t0 = agg_now_mono();
        rc = secret != NULL ? fs_fedpower_server_new_restored(&pw->cfg, pw->rows, secret,
                                                              secret_len, &pw->srv, err)
                            : fs_fedpower_server_new(&pw->cfg, pw->rows, &pw->srv, err);
        if (rc == 0 && secret == NULL) {
            rc = save_secret(j, pw->srv, err);
        }
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
            /* ot: the group's size (P-256), there is no Paillier key */
            pw->pk_bits =
                fs_noisex_mode_paillier(pw->cfg.noise_exchange) ? pw->cfg.paillier_bits : 256u;
            pw->sel_size = fs_fedpower_server_selector_size(pw->srv);
            pw->resp_size = fs_fedpower_server_response_size(pw->srv);
            pw->crypto_s = agg_now_mono() - t0;
        }
    }
    j->pw = pw;
    return 0;
}

static int pj_attach(agg_job *j, int with_server, struct fs_err *err)
{
    return attach_with(j, with_server, NULL, 0, err);
}

/* A job read from the store (nothing else runs yet). An ended one gets its
 * server-less state (and its secret goes); a running one its server,
 * restored from the sealed secret, before its events are replayed. Plain
 * fedpower's server noise and fedpower-utility's key come from the secret:
 * without it they cannot go on; the others draw nothing secret, so a
 * missing secret (a job from an older version) is made afresh. */
static int pj_load(agg_job *j, int running, struct fs_err *err)
{
    uint8_t *sec = NULL;
    size_t len = 0;
    int rc;

    if (!running) {
        if (pj_attach(j, 0, err) != 0) {
            fs_log_pack(FS_LOG_WARN, "power-method job without its parameters", "{s:s, s:s}", "job",
                        j->id, "error", err->msg);
        }
        if (j->pw != NULL) {
            j->pw->sync = j->pw->syncs;
            j->pw->iter = j->pw->cfg.iterations;
        }
        drop_secret(j);
        return 0;
    }
    rc = load_secret(j, &sec, &len, err);
    if (rc == FS_ENOTFOUND &&
        (j->spec.algo == FS_ALGO_FEDPOWER_PRIVATE || j->spec.algo == FS_ALGO_DP_PPM)) {
        rc = 0;
    }
    if (rc == 0) {
        rc = attach_with(j, 1, sec, len, err);
    }
    if (sec != NULL) {
        fs_wipe(sec, len);
    }
    free(sec);
    if (rc != 0) {
        fs_err_prefix(err, "the power method's server state: ");
    }
    return rc;
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

/* Status fields of the Job document (mu held). */
static void pj_status_locked(const agg_job *j, json_t *o)
{
    const struct agg_power *pw = j->pw;

    json_object_set_new(o, "cols", json_integer((json_int_t)j->spec.cols));
    (void)fs_job_fedpower_encode(o, j->spec.algo, j->n, &j->spec.power);
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

/* Begin round r: write z.npy, open masked input or the plain upload (sm_mu held). */
static int pj_begin(agg_job *j, uint32_t r, double at, struct fs_err *err)
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
    uint32_t *active = NULL;
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
        rc = agg_file_sha256_hex(path, hex, err);
    }
    if (rc != 0) {
        return rc;
    }
    rc = fs_jobsm_begin(&j->st, j->sm, r, len, &active, &na, err);
    if (rc != 0) {
        agg_after_sm_error(j, rc, err);
        return rc;
    }
    /* the hash of the Z sent: a replay after a restart must rebuild the same bytes */
    params = json_pack("{s:i, s:I, s:i, s:s}", "r", (int)r, "len", (json_int_t)len, "iteration",
                       (int)iter, "z_sha256", hex);
    rc = params == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
                        : agg_log_json(j, "begin", 0, params, at, err);
    json_decref(params);
    if (rc != 0) {
        free(active);
        return rc;
    }
    pthread_mutex_lock(&j->mu);
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
                    (json_int_t)j->nchunks, "phase",
                    fs_job_phase_name(pw->secagg ? FS_JOB_MASKED_INPUT : FS_JOB_PLAIN_UPLOAD),
                    "active", fs_wire_ids_encode(active, na), "z", "shape", (json_int_t)z->rows,
                    (json_int_t)z->cols, "sha256", hex, "survivors", "signatures");
    json_array_set_new(j->aggs, r, doc != NULL ? doc : json_null());
    fs_jobsm_opened(&j->st, r, active, na, at);
    j->deadline_mono = agg_now_mono() + (double)j->spec.round_timeout_s;
    fs_jobsm_set_finishing(&j->st, 0); /* (on the worker) the new round is open from now on */
    pthread_mutex_unlock(&j->mu);
    free(active);
    return doc == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
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
        rc = agg_file_sha256_hex(path, hex, err);
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
    for (int t = 0; timings != NULL && t < FS_JOB_NTIMED; t++) {
        if (j->st.has_timing[t]) {
            json_object_set_new(timings, fs_job_timing_name((enum fs_job_phase)t),
                                json_real(j->st.timings[t]));
        }
    }
    if (timings != NULL) {
        json_object_set_new(timings, "crypto", json_real(pw->crypto_s));
    }
    o = json_pack("{s:s, s:i, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:{s:I, "
                  "s:I}, s:o}",
                  "algorithm", fs_algo_name(j->spec.algo), "parties", (int)j->n, "survivors",
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
        sv = in != NULL ? fs_jobsm_ids(&j->st, in, &nsv) : NULL;
        json_object_set_new(o, "dropped", sv != NULL ? agg_dropped_of(j, sv, nsv) : json_array());
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
    unsigned tries = 0; /* waits for storage: a full disk holds the job, it does not fail it */
    int rc;

    do {
        rc = build_result(j, &res, &err);
    } while (rc != 0 && agg_storage_wait(j, rc, &err, &tries));
    if (rc == 0) {
        res_s = json_dumps(res, JSON_COMPACT);
        rc = res_s == NULL ? fs_err_set(&err, FS_ENOMEM, "out of memory") : 0;
    }
    if (rc == 0) {
        rc = agg_log_event(j, "done", 0, 0, NULL, 0, at, &err);
    }
    if (rc != 0) {
        char reason[600];
        snprintf(reason, sizeof reason, "result failed: %s", err.msg);
        json_decref(res);
        free(res_s);
        agg_fail_job(j, reason);
        return;
    }
    if (!j->replaying) {
        agg_teststop_reached(j->id, FS_JOB_DONE, j->st.r); /* FEDSVD_TEST_STOP_AT_PHASE=done */
    }
    pthread_mutex_lock(&j->mu);
    fs_jobsm_done(&j->st);
    j->result = res;
    if (agg_cur_doc(j) != NULL) {
        json_object_set_new(agg_cur_doc(j), "phase", json_string(fs_job_phase_name(FS_JOB_DONE)));
    }
    j->pw->sync = j->pw->syncs;
    j->pw->iter = j->pw->cfg.iterations;
    /* replaying a "done" whose state was not stored before a restart: the
     * store is busy with the replay, the driver stores it (agg_mgr_tick) */
    j->persist_dirty = j->replaying;
    pthread_mutex_unlock(&j->mu);
    if (!j->replaying) {
        agg_persist_state(j, res_s);
    }
    free(res_s);
    fs_log_pack(FS_LOG_INFO, "job done", "{s:s, s:s}", "job", j->id, "algorithm",
                fs_algo_name(j->spec.algo));
    fs_secagg_server_free(j->sm);
    j->sm = NULL;
    pj_join_precompute(j, j->pw);        /* (none runs by now; it would read srv) */
    fs_fedpower_server_free(j->pw->srv); /* wipes the Paillier key */
    j->pw->srv = NULL;
    drop_secret(j);
    agg_rm_chunks(j);
}

/* After an aggregate: the next round or the end. sm_mu held. */
static int advance(agg_job *j, double at, struct fs_err *err)
{
    int rc;

    if (fs_fedpower_server_phase(j->pw->srv) == FS_FEDPOWER_DONE) {
        finish_job(j, at);
        return 0;
    }
    rc = pj_begin(j, j->st.r + 1, at, err);
    if (rc == 0 && !j->replaying) {
        agg_persist_state(j, NULL);
    }
    return rc;
}

/* The worker's part after a round closed (sm_mu held, the worker thread). */
static void pj_worker(agg_job *j)
{
    struct agg_power *pw = j->pw;
    struct fs_err err = {0};
    enum fs_job_phase ph;
    uint32_t r;
    double t0;
    double at;
    int rc = 0;
    int sync;

    pthread_mutex_lock(&j->mu);
    ph = j->st.phase;
    r = j->st.r;
    pthread_mutex_unlock(&j->mu);
    if (pw == NULL || pw->srv == NULL || ph == FS_JOB_FAILED || ph == FS_JOB_DONE) {
        return;
    }
    sync = r < pw->syncs;
    t0 = agg_now_mono();
    if (ph == FS_JOB_UNMASKING) {
        const uint64_t *sum = NULL;
        const uint32_t *u3 = NULL;
        size_t n3 = 0;
        rc = fs_secagg_server_finish(j->sm, &sum, &err);
        if (rc != 0) {
            if (fs_secagg_server_phase(j->sm) == FS_SECAGG_ABORTED) {
                agg_fail_job(j, fs_secagg_server_abort_reason(j->sm));
                return;
            }
        } else {
            u3 = fs_secagg_server_set(j->sm, 3, &n3);
            t0 = agg_now_mono();
            rc = fs_fedpower_server_add_sum(pw->srv, sum, (size_t)j->len, u3, n3, &err);
            if (rc == 0) {
                record_ids(j, sync, u3, n3);
            }
        }
        at = agg_now_wall();
        pthread_mutex_lock(&j->mu);
        fs_jobsm_record_timing(&j->st, FS_JOB_UNMASKING, at);
        if (rc == 0 && pj_is_utility(j)) {
            pw->crypto_s += agg_now_mono() - t0;
        }
        pthread_mutex_unlock(&j->mu);
        if (rc == 0 && fs_fedpower_server_phase(pw->srv) == FS_FEDPOWER_EXCHANGE) {
            /* fedpower-utility: the noise exchange of this sync over U3 (it
             * may be open since masked input closed, and answered already) */
            rc = pj_open_noise_round(j, r, u3, n3, at, &err);
            if (rc == 0) {
                return;
            }
        }
    } else if (ph == FS_JOB_NOISE_EXCHANGE) {
        /* the outcome computed while unmasking ran, when every party had answered */
        pj_join_precompute(j, pw);
        rc = pw->xpre != NULL ? fs_fedpower_server_close_exchange_pre(pw->srv, pw->xpre, &err)
                              : FS_ESTATE;
        if (rc == FS_ESTATE) {
            rc = fs_fedpower_server_close_exchange(pw->srv, &err);
        }
        fs_fedpower_xpre_free(pw->xpre);
        pw->xpre = NULL;
        pthread_mutex_lock(&j->mu);
        pw->crypto_s += agg_now_mono() - t0;
        pthread_mutex_unlock(&j->mu);
    } else if (ph == FS_JOB_PLAIN_UPLOAD) {
        uint32_t *ids = NULL;
        size_t k = 0;
        pthread_mutex_lock(&j->mu);
        ids = fs_jobsm_ids(&j->st, j->st.active, &k);
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
    at = agg_now_wall();
    if (rc == 0) {
        pthread_mutex_lock(&j->mu);
        if (agg_cur_doc(j) != NULL) {
            json_object_set_new(agg_cur_doc(j), "phase",
                                json_string(fs_job_phase_name(FS_JOB_DONE)));
        }
        pthread_mutex_unlock(&j->mu);
        rc = advance(j, at, &err);
    }
    if (rc != 0) {
        char reason[700];
        snprintf(reason, sizeof reason, "%s of round %u failed: %s", fs_job_phase_name(ph), r,
                 err.msg);
        agg_fail_job(j, reason);
    }
}

/* ------------------------------------------------------------ routes */

/* 1 when name (without .npy) is a result file of this power-method job. */
static int pj_result_name(const agg_job *j, const char *name)
{
    return strcmp(name, "V") == 0 ||
           (strcmp(name, "eigenvalues") == 0 && j->spec.power.eigenvalues);
}

int agg_job_z_path(agg_job *j, uint32_t r, char *path, size_t cap, struct fs_err *err)
{
    int rc = pj_need_power(j, 0, 0, err);
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
        rc = j->st.phase == FS_JOB_FAILED
                 ? fs_err_set(err, AGG_EABORTED, "job failed: %s", j->st.error)
                 : fs_err_set(err, FS_ESTATE, "round %u has not begun (job phase %s)", r,
                              fs_job_phase_name(j->st.phase));
    }
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && z_path(j, r, path, cap) != 0) {
        rc = fs_err_set(err, FS_EINTERNAL, "path too long");
    }
    return rc;
}

int agg_job_exchange_key(agg_job *j, json_t **out, struct fs_err *err)
{
    int rc = pj_need_power(j, 1, 0, err);

    *out = NULL;
    if (rc != 0) {
        return rc;
    }
    if (j->pw->pk_b64 == NULL) {
        return fs_err_set(err, FS_ECONFLICT, "the exchange key is gone (server restarted)");
    }
    *out = json_pack("{s:s, s:i, s:s}", "public_key", j->pw->pk_b64, "bits", (int)j->pw->pk_bits,
                     "noise_exchange", fs_noisex_mode_name(j->pw->cfg.noise_exchange));
    return *out == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
}

int agg_job_plain_check(agg_job *j, uint32_t party, uint32_t r, size_t *rows, size_t *cols,
                        struct fs_err *err)
{
    int rc = pj_need_power(j, 0, 1, err);

    *rows = *cols = 0;
    if (rc == 0) {
        rc = agg_exists(j, r, err);
    }
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    rc = agg_check_locked(j, FS_JOB_PLAIN_UPLOAD, r, party, err);
    pthread_mutex_unlock(&j->mu);
    if (rc == 0) {
        *rows = r < j->pw->syncs ? (size_t)j->spec.cols : (size_t)j->pw->cfg.r;
        *cols = j->pw->cfg.r;
    }
    return rc;
}

/* Path of party's plain upload of round r (kept until the job ends). */
static int plain_path(const agg_job *j, uint32_t r, uint32_t party, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s/agg-%u/p%u.npy", j->dir, r, party) >= cap ? -1 : 0;
}

/* zmax as its IEEE bits, big-endian (the "plain" event's body). */
static void zmax_encode(double zmax, uint8_t b[8])
{
    uint64_t u;

    memcpy(&u, &zmax, sizeof u);
    for (int i = 0; i < 8; i++) {
        b[i] = (uint8_t)(u >> (56 - 8 * i));
    }
}

static double zmax_decode(const uint8_t b[8])
{
    uint64_t u = 0;
    double z;

    for (int i = 0; i < 8; i++) {
        u = u << 8 | b[i];
    }
    memcpy(&z, &u, sizeof z);
    return z;
}

/* A party's first plain upload of round r (sm_mu held): its file, then the
 * power server, then its event, all before it is acknowledged. */
static int put_plain_new(agg_job *j, uint32_t party, uint32_t r, const fs_mat *y, double zmax,
                         struct fs_err *err)
{
    char dir[4400];
    char path[4500];
    uint8_t zb[8];
    int rc;

    snprintf(dir, sizeof dir, "%s/agg-%u", j->dir, r);
    rc = plain_path(j, r, party, path, sizeof path) != 0
             ? fs_err_set(err, FS_EINTERNAL, "path too long")
             : fs_mkdir_p(dir, err);
    if (rc == 0) {
        rc = fs_npy_write_mat(path, y, err);
    }
    if (rc == 0) {
        rc = fs_fedpower_server_add_plain(j->pw->srv, party, y, zmax, err);
    }
    if (rc == 0) {
        zmax_encode(zmax, zb);
        rc = agg_log_event(j, "plain", party, r, zb, sizeof zb, agg_now_wall(), err);
    }
    return rc;
}

int agg_job_put_plain(agg_job *j, uint32_t party, uint32_t r, const fs_mat *y, double zmax,
                      struct fs_err *err)
{
    int rc = pj_need_power(j, 0, 1, err);

    if (rc == 0) {
        rc = agg_exists(j, r, err);
    }
    if (rc == 0) {
        rc = agg_enter(j, FS_JOB_PLAIN_UPLOAD, r, party, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (j->pw->srv == NULL) {
        rc = fs_err_set(err, FS_ECONFLICT, "job is over");
    } else if (!j->st.sent[party]) {
        rc = put_plain_new(j, party, r, y, zmax, err);
    } else {
        rc = fs_fedpower_server_add_plain(j->pw->srv, party, y, zmax, err); /* a repeat? */
    }
    if (rc == FS_ESTATE || rc == FS_ENOTFOUND) {
        rc = fs_err_set(err, FS_ECONFLICT, "%s", err->msg);
    }
    if (rc == 0) {
        pj_mark_sent(j, party);
    }
    agg_leave(j);
    return rc;
}

/* ------------------------------------------------------------ replay */

/* "begin" of round r: round 0 begins here; a later one was begun by the
 * replayed worker of the round before. Either way its Z must be the one
 * sent before the restart. */
static int replay_begin(agg_job *j, const struct agg_event *ev, struct fs_err *err)
{
    json_error_t je;
    json_t *body = json_loadb(ev->body, ev->len, JSON_REJECT_DUPLICATES, &je);
    json_t *rv = json_object_get(body, "r");
    const char *want = json_string_value(json_object_get(body, "z_sha256"));
    json_int_t r = json_is_integer(rv) ? json_integer_value(rv) : -1;
    const char *have = NULL;
    int begun;
    int rc = 0;

    if (r < 0 || r >= (json_int_t)j->naggs) {
        json_decref(body);
        return fs_err_set(err, FS_EFORMAT, "bad begin");
    }
    pthread_mutex_lock(&j->mu);
    begun = json_is_object(json_array_get(j->aggs, (size_t)r));
    pthread_mutex_unlock(&j->mu);
    if (!begun && r == 0) {
        rc = pj_begin(j, 0, ev->at, err);
        begun = rc == 0;
    } else if (!begun || (uint32_t)r != j->st.r) {
        rc = fs_err_set(err, FS_EFORMAT, "round %lld begins out of order", (long long)r);
    }
    if (rc == 0 && begun && want != NULL) {
        pthread_mutex_lock(&j->mu);
        have = json_string_value(
            json_object_get(json_object_get(json_array_get(j->aggs, (size_t)r), "z"), "sha256"));
        if (have == NULL || strcmp(have, want) != 0) {
            rc = fs_err_set(err, FS_ESTATE,
                            "round %lld's Z came out different from the one sent before",
                            (long long)r);
        }
        pthread_mutex_unlock(&j->mu);
    }
    json_decref(body);
    return rc;
}

static int replay_plain(agg_job *j, const struct agg_event *ev, struct fs_err *err)
{
    char path[4500];
    fs_mat *y = NULL;
    int rc = pj_replay_in_round(j, ev, FS_JOB_PLAIN_UPLOAD, err);

    if (rc == 0 && ev->len != 8) {
        rc = fs_err_set(err, FS_EFORMAT, "bad plain upload event");
    }
    if (rc == 0 && plain_path(j, j->st.r, ev->party, path, sizeof path) != 0) {
        rc = fs_err_set(err, FS_EINTERNAL, "path too long");
    }
    if (rc == 0) {
        rc = fs_io_load_dense(path, FS_FMT_NPY, NULL, &y, err);
    }
    if (rc == 0) {
        rc = fs_fedpower_server_add_plain(j->pw->srv, ev->party, y, zmax_decode(ev->body), err);
    }
    if (rc == 0) {
        pj_mark_sent(j, ev->party);
    }
    fs_mat_free(y);
    return rc;
}

/* A stored event of a power-method job (sm_mu held, j->replaying). The
 * worker's part of a round that closed runs first, as it did then. */
static int pj_replay(agg_job *j, const struct agg_event *ev, int *handled, struct fs_err *err)
{
    *handled = 0;
    if (j->pw == NULL || j->pw->srv == NULL || j->sm == NULL) {
        return 0;
    }
    /* (also before a close: a noise exchange whose answers all came early
     * closes right after the worker opened it, with no event between) */
    if (j->st.finishing && fs_jobsm_running(&j->st)) {
        pj_worker(j);
        pthread_mutex_lock(&j->mu);
        fs_jobsm_set_finishing(&j->st, 0);
        pthread_mutex_unlock(&j->mu);
        if (j->st.phase == FS_JOB_FAILED) {
            return fs_err_set(err, FS_ESTATE, "%s", j->st.error);
        }
    }
    if (strcmp(ev->kind, "done") == 0) {
        *handled = 1;
        return j->st.phase == FS_JOB_DONE ? 0 : fs_err_set(err, FS_EFORMAT, "done before the end");
    }
    if (j->st.phase == FS_JOB_DONE) {
        return 0; /* the generic replay refuses events after the end */
    }
    if (strcmp(ev->kind, "begin") == 0) {
        *handled = 1;
        return replay_begin(j, ev, err);
    }
    if (strcmp(ev->kind, "exchange") == 0) {
        *handled = 1;
        return pj_replay_exchange(j, ev, err);
    }
    if (strcmp(ev->kind, "plain") == 0) {
        *handled = 1;
        return replay_plain(j, ev, err);
    }
    if (strcmp(ev->kind, "noise") == 0) {
        *handled = 1;
        return pj_replay_noise(j, ev, err);
    }
    return 0;
}

const struct agg_algo_ops agg_power_ops = {
    .prepare_spec = pj_prepare_spec,
    .attach = pj_attach,
    .detach = pj_detach,
    .round_len = pj_round_len,
    .secagg_aggregations = pj_secagg_aggregations,
    .status_locked = pj_status_locked,
    .begin = pj_begin,
    .worker = pj_worker,
    .result_name = pj_result_name,
    .load = pj_load,
    .replay = pj_replay,
    .tick = pj_tick,
};
