/* Power-method participations (docs/wire-fedpower.md): Z downloads and the
 * local iterations, fedpower's plain uploads, fedpower-utility's noise
 * exchange (power.c computes). See worker.h. */
#include "worker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "crypto/ct.h"
#include "io/matio.h"
#include "wire.h"

static int get_b64(const json_t *j, const char *key, size_t cap, uint8_t **out, size_t *n,
                   const char *what, struct fs_err *err);

/* fedpower-utility: GET exchange-key, the server's exchange public key
 * (Paillier; ot: the protocol's public point, checked on import). */
static int xkey_fetch(struct ca_wk *w, uint8_t **buf, size_t *n, struct fs_err *err)
{
    json_t *j = NULL;
    char path[160];
    int rc = ca_wk_path(w, path, sizeof path, "/exchange-key");

    if (rc == 0) {
        rc = ca_wk_get_json(w, path, &j, err);
    }
    if (rc == 0) {
        rc = get_b64(j, "public_key", CA_JSON_BODY_MAX, buf, n, path, err);
    }
    json_decref(j);
    return rc;
}

static double thread_cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The costly half of the exchange key (the party's own DJN base, a
 * full-length exponentiation, and its table; next to nothing in ot mode),
 * at low priority: it takes the moments the party waits for the others
 * rather than delaying them. */
static void *xkey_main(void *arg)
{
    struct ca_wk *w = arg;
    id_t tid = (id_t)syscall(SYS_gettid);
    double t0 = thread_cpu_s();
    int prio;

    /* ten steps nicer than the agent (at most 19) */
    errno = 0;
    prio = getpriority(PRIO_PROCESS, tid);
    if (errno == 0 && prio < 10) {
        (void)setpriority(PRIO_PROCESS, tid, prio + 10 > 19 ? 19 : prio + 10);
    }
    w->xk_rc = ca_power_key_prepare(w->pw, w->xk_pk, w->xk_len, &w->xk_nx, &w->xk_err);
    w->xk_cpu_s = thread_cpu_s() - t0;
    atomic_store(&w->xk_done, 1);
    return NULL;
}

/* Once the job is set up: fetch the exchange key and prepare it on a
 * background thread, so that it is ready by the first noise exchange. Any
 * failure leaves it to the exchange (ca_wk_exchange fetches it then). */
static void xkey_start(struct ca_wk *w)
{
    struct fs_err err = {0};

    if (w->has_xkey || w->xk_started || ca_power_exchanges(w->pw) == 0) {
        return;
    }
    if (xkey_fetch(w, &w->xk_pk, &w->xk_len, &err) != 0) {
        fs_log_pack(FS_LOG_DEBUG, "exchange key not fetched yet", "{s:s, s:s}", "participation",
                    w->p->rec.id, "error", err.msg);
        return;
    }
    w->xk_nx = NULL;
    w->xk_rc = 0;
    atomic_store(&w->xk_done, 0);
    if (pthread_create(&w->xk_thread, NULL, xkey_main, w) != 0) {
        free(w->xk_pk);
        w->xk_pk = NULL;
        return;
    }
    w->xk_started = 1;
}

/* Join the background thread; install its key (install != 0) or drop it. */
static void xkey_join(struct ca_wk *w, int install)
{
    if (!w->xk_started) {
        return;
    }
    pthread_join(w->xk_thread, NULL);
    w->xk_started = 0;
    free(w->xk_pk);
    w->xk_pk = NULL;
    if (install && w->xk_rc == 0) {
        ca_power_key_install(w->pw, w->xk_nx);
        ca_wk_add_timing(w, "crypto", w->xk_cpu_s);
        w->has_xkey = 1;
    } else {
        if (w->xk_rc != 0) {
            fs_log_pack(FS_LOG_DEBUG, "exchange key not prepared: again at the exchange",
                        "{s:s, s:s}", "participation", w->p->rec.id, "error", w->xk_err.msg);
        }
        fs_noisex_client_free(w->xk_nx);
    }
    w->xk_nx = NULL;
}

void ca_wk_xkey_stop(struct ca_wk *w)
{
    xkey_join(w, 0);
}

/* Power-method job: build the party state (on this worker thread: it may
 * form M'_i) and check the job against the invitation. */
int ca_wk_setup_power(struct ca_wk *w, const struct fs_agent_job *job, struct fs_err *err)
{
    const struct fs_invitation *inv = &w->p->req.inv;
    double t0 = ca_mono_s();
    int rc;

    if (!ca_same_algo(job, inv) || job->parties != inv->parties ||
        job->threshold != inv->threshold) {
        return fs_err_set(err, FS_EINVAL,
                          "the job does not match the invitation (algorithm %s/%s, parties %u/%u, "
                          "threshold %u/%u)",
                          job->algorithm, inv->algorithm, job->parties, inv->parties,
                          job->threshold, inv->threshold);
    }
    if (w->pw == NULL) {
        rc = ca_power_new(inv, w->p->data, w->p->sparse, &w->pw, err);
        if (rc == 0) {
            /* DP noise from the secret: never drawn afresh after a restart */
            rc = ca_power_set_secret(w->pw, w->p->secret, err);
        }
        if (rc == 0 && w->p->resumed) {
            ca_power_resuming(w->pw);
        }
        ca_wk_add_timing(w, "compute", ca_mono_s() - t0);
        ca_wk_add_timing(w, "crypto", 0.0); /* fedpower-utility's Paillier work, 0 for the others */
        if (rc != 0) {
            return rc;
        }
    }
    if (job->aggregations != ca_power_aggregations(w->pw)) {
        return fs_err_set(err, FS_EINVAL, "the job runs %u aggregations, expected %u",
                          job->aggregations, ca_power_aggregations(w->pw));
    }
    memset(&w->cfg, 0, sizeof w->cfg);
    w->cfg.n = job->parties;
    w->cfg.t = job->threshold;
    /* plain fedpower never uses SecAgg after the join (docs/wire-fedpower.md) */
    w->cfg.aggregations = ca_power_kind(w->pw) == FS_AGENT_POWER_PLAIN ? 1 : job->aggregations;
    /* without allow_dropouts every sum needs every party: no consistency round */
    w->cfg.all_inputs =
        ca_power_kind(w->pw) != FS_AGENT_POWER_PLAIN && !inv->power.allow_dropouts ? 1 : 0;
    rc = fs_agent_job_secagg_config(job, &w->cfg, err);
    if (rc == 0) {
        rc = fs_wire_secagg_job_id(inv->job_id, w->cfg.job_id, err);
    }
    if (rc == 0) {
        rc = fs_secagg_config_check(&w->cfg, err);
    }
    if (rc == 0) {
        rc = fs_agent_driver_init_power(&w->drv, ca_power_kind(w->pw), job->aggregations,
                                        ca_power_exchanges(w->pw), w->p->req.fail_at,
                                        w->p->req.fail_round, err);
    }
    if (rc == 0) {
        fs_agent_driver_set_all_inputs(&w->drv, (int)w->cfg.all_inputs);
    }
    if (rc == 0) {
        w->ready = 1;
        xkey_start(w);
    }
    return rc;
}

/* Power-method BEGIN: GET aggregations/r/z.npy (checked against the
 * aggregation's sha256 and shape) and run the local iterations up to this
 * round's upload. w->agg holds aggregation r. */
int ca_wk_power_begin(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    const struct fs_agent_agg *a = &w->agg;
    struct fs_io_caps caps = fs_io_caps_default();
    char path[160];
    char dest[CA_PATH_MAX + 32];
    uint64_t bytes = 0;
    uint8_t d[32];
    fs_mat *z = NULL;
    double t0;
    int rc;

    if (a->z_rows != ca_power_d(w->pw) || a->z_cols != ca_power_r(w->pw)) {
        return fs_err_set(err, FS_EFORMAT, "aggregation %u: z is %llu x %llu, expected %u x %u", r,
                          (unsigned long long)a->z_rows, (unsigned long long)a->z_cols,
                          ca_power_d(w->pw), ca_power_r(w->pw));
    }
    rc = ca_wk_path(w, path, sizeof path, "/aggregations/%u/z.npy", r);
    if (rc == 0 && snprintf(dest, sizeof dest, "%s/z-%u.npy", w->p->dir, r) >= (int)sizeof dest) {
        rc = FS_EINVAL;
    }
    if (rc != 0) {
        return fs_err_set(err, rc, "path too long");
    }
    rc = fs_httpc_download(w->http, path, dest, &bytes, err);
    ca_wk_count(w, 0, bytes);
    if (rc == 0) {
        rc = ca_files_sha256(dest, d, err);
    }
    if (rc == 0 && !fs_ct_eq(d, a->z_sha256, 32)) {
        rc = fs_err_set(err, FS_EFORMAT, "GET %s: sha256 differs from the aggregation's", path);
    }
    if (rc == 0) {
        caps.max_rows = (size_t)a->z_rows;
        caps.max_cols = (size_t)a->z_cols;
        caps.max_elems = a->z_rows * a->z_cols;
        rc = fs_io_load_dense(dest, FS_FMT_NPY, &caps, &z, err);
        if (rc != 0) {
            fs_err_prefix(err, "GET %s: ", path);
        }
    }
    unlink(dest);
    if (rc != 0) {
        fs_mat_free(z);
        return rc;
    }
    t0 = ca_mono_s();
    rc = ca_power_receive(w->pw, r, z, a->iteration, err);
    ca_wk_add_timing(w, "compute", ca_mono_s() - t0);
    fs_mat_free(z);
    w->t_step0 = ca_mono_s();
    return rc;
}

/* fedpower: PUT aggregations/r/plain.npy?zmax=... with Y'_i (or Q^T M'_i Q). */
int ca_wk_plain_upload(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    double zmax = 0.0;
    const fs_mat *y = ca_power_plain(w->pw, &zmax);
    uint8_t hdr[CA_NPY_HEADER_CAP];
    struct fs_npy_header h;
    struct ca_body_src src;
    char num[40];
    char q[64];
    char path[200];
    size_t hlen = 0;
    size_t n = 0;
    int rc;

    if (y == NULL) {
        return fs_err_set(err, FS_ESTATE, "aggregation %u: no plain upload pending", r);
    }
    if (y->ld != y->rows) {
        return fs_err_set(err, FS_EINTERNAL, "plain upload not contiguous");
    }
    /* the number in the query string, '+' percent-encoded */
    snprintf(num, sizeof num, "%.17g", zmax);
    for (const char *c = num; *c != '\0' && n + 4 < sizeof q; c++) {
        if (*c == '+') {
            memcpy(q + n, "%2B", 3);
            n += 3;
        } else {
            q[n++] = *c;
        }
    }
    q[n] = '\0';
    memset(&h, 0, sizeof h);
    h.dtype = FS_NPY_F8;
    h.fortran_order = 1;
    h.ndim = 2;
    h.shape[0] = y->rows;
    h.shape[1] = y->cols;
    rc = fs_npy_format_header(&h, hdr, sizeof hdr, &hlen, err);
    if (rc != 0) {
        return rc;
    }
    if (ca_wk_path(w, path, sizeof path, "/aggregations/%u/plain.npy?zmax=%s", r, q) != 0) {
        return fs_err_set(err, FS_EINVAL, "path too long");
    }
    src.a = hdr;
    src.alen = hlen;
    src.b = (const uint8_t *)y->data;
    src.blen = y->rows * y->cols * sizeof(double);
    src.pos = 0;
    rc = ca_wk_wal(w, path, src.a, src.alen, src.b, src.blen, err);
    if (rc == 0) {
        rc = ca_wk_ledger_before_upload(w, err);
    }
    if (rc == 0) {
        rc = ca_wk_call(w, "PUT", path, NULL, &src, NULL, err);
    }
    if (rc == 0) {
        ca_wk_add_timing(w, "upload", ca_mono_s() - w->t_step0);
    }
    /* 409 conflict: the round closed (or left us out) meanwhile: the next
     * job poll tells the driver, which reports the drop */
    return rc == FS_ECONFLICT ? CA_STEP_WAIT : rc;
}

/* A base64url string member of a response, decoded (at most cap bytes). */
static int get_b64(const json_t *j, const char *key, size_t cap, uint8_t **out, size_t *n,
                   const char *what, struct fs_err *err)
{
    const char *s = json_string_value(json_object_get(j, key));
    int rc;

    if (s == NULL) {
        return fs_err_set(err, FS_EFORMAT, "%s: %s: expected a base64url string", what, key);
    }
    rc = fs_b64url_decode_alloc(s, cap, out, n, err);
    if (rc != 0) {
        fs_err_prefix(err, "%s: %s: ", what, key);
    }
    return rc;
}

/* fedpower-utility: answer this sync's selector with the noise of our upload. */
int ca_wk_exchange(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    json_t *j = NULL;
    uint8_t *buf = NULL;
    uint8_t *resp = NULL;
    size_t n = 0;
    size_t rlen = 0;
    char path[160];
    char *enc = NULL;
    double t0;
    int rc;

    xkey_join(w, 1); /* the key prepared in the background, if any */
    if (!w->has_xkey) {
        rc = xkey_fetch(w, &buf, &n, err);
        if (rc == 0) {
            t0 = ca_mono_s();
            rc = ca_power_set_key(w->pw, buf, n, err);
            ca_wk_add_timing(w, "crypto", ca_mono_s() - t0);
        }
        free(buf);
        buf = NULL;
        if (rc != 0) {
            return rc;
        }
        w->has_xkey = 1;
    }
    /* a long poll: the server answers once the exchange is open (a server
     * without long polls of the selector answers 409 not_ready at once) */
    rc = ca_wk_path(w, path, sizeof path, "/aggregations/%u/selector?wait_ms=%u", r,
                    CA_SELECTOR_WAIT_MS);
    if (rc == 0) {
        rc = ca_wk_get_json(w, path, &j, err);
        if (rc == FS_ECONFLICT) {
            fs_log_pack(FS_LOG_DEBUG, "no selector: waiting", "{s:s, s:s}", "participation",
                        w->p->rec.id, "reason", err->msg);
            return CA_STEP_WAIT; /* the exchange closed meanwhile: the driver skips it */
        }
    }
    if (rc == 0) {
        rc = get_b64(j, "selector", CA_JSON_BODY_MAX, &buf, &n, path, err);
    }
    json_decref(j);
    if (rc != 0) {
        return rc;
    }
    rlen = ca_power_response_size(w->pw);
    resp = rlen > 0 ? malloc(rlen) : NULL;
    if (resp == NULL) {
        free(buf);
        return fs_err_set(err, FS_ENOMEM, "out of memory for a %zu-byte response", rlen);
    }
    t0 = ca_mono_s();
    rc = ca_power_exchange(w->pw, buf, n, resp, rlen, err);
    ca_wk_add_timing(w, "crypto", ca_mono_s() - t0);
    free(buf);
    if (rc == 0) {
        enc = fs_b64url_encode(resp, rlen);
        rc = ca_wk_path(w, path, sizeof path, "/aggregations/%u/noise-response", r);
        if (rc != 0) {
            rc = fs_err_set(err, rc, "path too long");
        } else if (enc == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        } else {
            rc = ca_wk_ledger_before_upload(w, err);
            if (rc == 0) {
                rc = ca_wk_post_json(w, path, json_pack("{s:s}", "response", enc), err);
            }
            rc = rc == FS_ECONFLICT ? CA_STEP_WAIT : rc; /* closed meanwhile */
        }
    }
    fs_wipe(resp, rlen);
    free(resp);
    free(enc);
    return rc;
}

/* fedpower-utility: answer sync r's exchange right after this party's
 * unmask message (ot, whose answer costs ~0.1 ms: already after its
 * consistency message, while the others sign, or, in a job without a
 * consistency round, as unmasking opens, before the unmask message): the server unmasks while
 * the party computes its answer, instead of waiting for it. The exchange opens when masked input
 * closes and the selector request is a long poll (ca_wk_exchange), so the party never polls for it.
 * Anything but success (not open in time, closed, an error) leaves the answer to the EXCHANGE step.
 */
void ca_wk_exchange_early(struct ca_wk *w, uint32_t r)
{
    struct fs_err err = {0};
    int rc;

    if (w->pw == NULL || w->local || w->sa_skip || w->x_sent == r + 1 ||
        r >= ca_power_exchanges(w->pw) ||
        (w->drv.fail_at == FS_AGENT_FAIL_NOISE_EXCHANGE && r == w->drv.fail_round)) {
        return; /* (a test that withholds the answer withholds it early too) */
    }
    rc = ca_wk_exchange(w, r, &err);
    if (rc == 0) {
        w->x_sent = r + 1;
    } else {
        fs_log_pack(FS_LOG_DEBUG, "noise response not sent early", "{s:s, s:i, s:s}",
                    "participation", w->p->rec.id, "aggregation", (int)r, "error",
                    rc == CA_STEP_WAIT ? "not open yet" : err.msg);
    }
}
