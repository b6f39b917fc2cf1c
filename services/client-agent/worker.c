/* One thread per participation: poll the job, ask the driver
 * (lib/proto/agent_driver.h) what comes next, move the SecAgg client's
 * messages (lib/proto/secagg.h) over HTTP (docs/wire-secure-sum.md), and
 * persist progress. fedsvd/fedpca jobs (docs/wire-fedsvd.md) also fetch the
 * party's keys from the masking server, exchange sealed exponents and
 * recover the party's result locally (fed.c). No protocol decisions here
 * beyond "which request carries this message".
 *
 * Static functions return 0, STEP_WAIT (the server is not there yet: poll
 * again) or a negative FS_E* code. */
#include "agent.h"

#include "../../api/problem.h"
#include "crypto/ct.h"
#include "crypto/reqsig.h"
#include "io/matio.h"
#include "la/fixedpt.h"
#include "maskkeys.h"
#include "net/http_client.h"
#include "proto/agent_driver.h"
#include "proto/secagg.h"
#include "wire.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "masked chunks are sent as <u8 straight from memory: little-endian hosts only"
#endif

#define STEP_WAIT      1
#define JSON_BODY_MAX  (16u * 1024 * 1024) /* any JSON document from a server */
#define SAVE_EVERY_S   0.5                 /* progress rows at most this often */
#define NPY_HEADER_CAP 256
#define MASK_PIECE     ((size_t)65536) /* words encoded and masked at a time */

struct wk {
    struct part *p;
    struct agent *ag;
    fs_httpc *http;
    char jpath[FS_JOB_ID_MAX + 16]; /* "/v1/jobs/<id>" */
    struct fs_secagg_config cfg;
    struct fs_agent_driver drv;
    int ready; /* cfg and drv set from the first job status */
    fs_secagg_client *sc;
    struct fs_secagg_adv adv;
    int has_exp;
    int max_exp;
    double max_abs;
    struct fs_secagg_share_ct *cts; /* R1 message, from ROSTER until SHARE */
    size_t ncts;
    struct fs_agent_agg agg; /* current aggregation, from BEGIN */
    int has_agg;
    uint8_t sig[FS_SECAGG_SIG_LEN]; /* R3 message */
    struct fs_secagg_reveal *rv;    /* R4 message */
    size_t nrv;
    uint64_t *words; /* one masked chunk */
    uint64_t chunks_done;
    double last_save;
    char saved_phase[32];
    /* fedsvd / fedpca */
    struct fed_party *fed;
    /* power-method jobs (power.c) */
    struct power_party *pw;
    int has_xkey;     /* utility: the server's exchange key is set */
    int ledger_spent; /* the privacy ledger was told a noisy upload may leave */
    double t_step0;   /* when the current timed step began */
    json_t *timings;  /* seconds per party-side phase */
};

static void add_timing(struct wk *w, const char *name, double secs)
{
    json_t *v = json_object_get(w->timings, name);
    double prev = json_is_number(v) ? json_number_value(v) : 0.0;

    if (w->timings != NULL) {
        json_object_set_new(w->timings, name, json_real(prev + secs));
    }
}

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sleep up to ms, waking early when the participation is told to stop. */
static void wk_sleep(struct wk *w, unsigned ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->ag->mu);
    while (atomic_load(&w->p->stop) == 0) {
        if (pthread_cond_timedwait(&w->ag->cv, &w->ag->mu, &ts) == ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&w->ag->mu);
}

/* Persist phase/progress/bytes (throttled unless force or the phase changed). */
static void save(struct wk *w, int force)
{
    struct part_rec *r = &w->p->rec;
    struct fs_err err = {0};
    double now = mono_s();

    if (w->ready) {
        snprintf(r->phase, sizeof r->phase, "%s", fs_agent_driver_phase(&w->drv));
        r->progress =
            fs_agent_driver_progress(&w->drv, w->chunks_done, w->has_agg ? w->agg.chunks : 0);
    }
    if (!force && strcmp(r->phase, w->saved_phase) == 0 && now - w->last_save < SAVE_EVERY_S) {
        return;
    }
    files_now(r->updated_at);
    if (store_progress(w->ag->db, r, &err) != 0) {
        if (err.code == FS_ESTATE) {
            atomic_store(&w->p->stop, 2); /* cancelled (or ended) elsewhere */
        } else {
            fs_log_pack(FS_LOG_WARN, "cannot save progress", "{s:s, s:s}", "participation", r->id,
                        "error", err.msg);
        }
    }
    w->last_save = now;
    snprintf(w->saved_phase, sizeof w->saved_phase, "%s", r->phase);
}

static void count(struct wk *w, uint64_t sent, uint64_t received)
{
    w->p->rec.bytes_sent += sent;
    w->p->rec.bytes_received += received;
    atomic_fetch_add(&w->ag->bytes_sent, sent);
    atomic_fetch_add(&w->ag->bytes_received, received);
}

/* The problem+json "code" of a response, into buf. */
static void problem_code(const struct fs_httpc_resp *resp, char *buf, size_t cap)
{
    json_t *j;
    json_t *c;

    buf[0] = '\0';
    if (resp->body == NULL || resp->len == 0) {
        return;
    }
    j = json_loadb(resp->body, resp->len, 0, NULL);
    c = json_object_get(j, "code");
    if (json_is_string(c)) {
        snprintf(buf, cap, "%s", json_string_value(c));
    }
    json_decref(j);
}

struct body_src {
    const uint8_t *a; /* header */
    size_t alen;
    const uint8_t *b; /* payload */
    size_t blen;
    size_t pos;
};

static int body_read(void *ctx, void *buf, size_t cap, size_t *got)
{
    struct body_src *s = ctx;
    uint8_t *out = buf;
    size_t n = 0;

    while (n < cap && s->pos < s->alen + s->blen) {
        size_t take;
        if (s->pos < s->alen) {
            take = s->alen - s->pos;
            take = take < cap - n ? take : cap - n;
            memcpy(out + n, s->a + s->pos, take);
        } else {
            size_t off = s->pos - s->alen;
            take = s->blen - off;
            take = take < cap - n ? take : cap - n;
            memcpy(out + n, s->b + off, take);
        }
        n += take;
        s->pos += take;
    }
    *got = n;
    return 0;
}

static int body_rewind(void *ctx)
{
    ((struct body_src *)ctx)->pos = 0;
    return 0;
}

/*
 * One request. JSON bodies (json != NULL) or a two-piece streamed body
 * (src != NULL). A 409 whose code is not_ready or aborted is STEP_WAIT (the
 * next job poll tells which); other non-2xx are errors named after the
 * request. *out gets the parsed JSON response (NULL when empty) if wanted.
 */
static int call(struct wk *w, const char *method, const char *path, const json_t *json,
                struct body_src *src, json_t **out, struct fs_err *err)
{
    struct fs_httpc_req rq;
    struct fs_httpc_resp resp;
    char *text = NULL;
    char code[32];
    int rc;

    memset(&rq, 0, sizeof rq);
    memset(&resp, 0, sizeof resp);
    if (out != NULL) {
        *out = NULL;
    }
    rq.method = method;
    rq.path = path;
    rq.accept = "application/json";
    /* every upload of the protocol is idempotent (docs/wire-secure-sum.md) */
    rq.retry = FS_HTTPC_RETRY_ALWAYS;
    if (json != NULL) {
        text = json_dumps(json, JSON_COMPACT);
        if (text == NULL) {
            return fs_err_set(err, FS_ENOMEM, "%s %s: cannot encode the body", method, path);
        }
        rq.content_type = "application/json";
        rq.body = text;
        rq.body_len = strlen(text);
    } else if (src != NULL) {
        rq.content_type = "application/x-npy";
        rq.read = body_read;
        rq.rewind = body_rewind;
        rq.read_ctx = src;
        rq.read_len = (int64_t)(src->alen + src->blen);
    }
    rc = fs_httpc_do(w->http, &rq, &resp, err);
    count(w,
          (uint64_t)(json != NULL  ? rq.body_len
                     : src != NULL ? src->alen + src->blen
                                   : 0) *
              (resp.attempts > 0 ? resp.attempts : 1),
          resp.len);
    if (rc != 0) {
        goto out;
    }
    if (resp.status == 409) {
        problem_code(&resp, code, sizeof code);
        if (strcmp(code, FS_PROBLEM_NOT_READY) == 0 || strcmp(code, FS_PROBLEM_ABORTED) == 0) {
            rc = STEP_WAIT;
            goto out;
        }
    }
    rc = fs_httpc_check(&resp, method, path, err);
    if (rc != 0 || out == NULL || resp.len == 0) {
        goto out;
    }
    {
        json_error_t jerr;
        *out = json_loadb(resp.body, resp.len, JSON_REJECT_DUPLICATES, &jerr);
        if (*out == NULL) {
            rc = fs_err_set(err, FS_EFORMAT, "%s %s: response is not JSON: line %d: %s", method,
                            path, jerr.line, jerr.text);
        }
    }
out:
    if (text != NULL) {
        fs_wipe(text, strlen(text)); /* R1/R4 bodies carry encrypted shares and shares */
        free(text);
    }
    fs_httpc_resp_clear(&resp);
    return rc;
}

static int get_json(struct wk *w, const char *path, json_t **out, struct fs_err *err)
{
    int rc = call(w, "GET", path, NULL, NULL, out, err);

    if (rc == 0 && *out == NULL) {
        rc = fs_err_set(err, FS_EFORMAT, "GET %s: empty response", path);
    }
    return rc;
}

/* POST a JSON message; steals msg. */
static int post_json(struct wk *w, const char *path, json_t *msg, struct fs_err *err)
{
    int rc;

    if (msg == NULL) {
        return fs_err_set(err, FS_ENOMEM, "POST %s: cannot encode the message", path);
    }
    rc = call(w, "POST", path, msg, NULL, NULL, err);
    json_decref(msg);
    return rc;
}

static int path_join(struct wk *w, char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int path_join(struct wk *w, char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    size_t n = strlen(w->jpath);
    int m;

    if (n >= cap) {
        return FS_EINVAL;
    }
    memcpy(buf, w->jpath, n + 1);
    va_start(ap, fmt);
    m = vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
    return m < 0 || (size_t)m >= cap - n ? FS_EINVAL : 0;
}

/* ------------------------------------------------------------------ steps */

static int in_set(const uint32_t *ids, size_t k, uint32_t id)
{
    for (size_t i = 0; i < k; i++) {
        if (ids[i] == id) {
            return 1;
        }
    }
    return 0;
}

/* One GET on the masking server into resp (a 2xx, else an error), signed
 * by the party's identity key sk (lib/crypto/reqsig.h: the path without its
 * query string, this mask set, this party, now). */
static int mask_get(fs_httpc *mc, const struct fs_invitation *inv, const uint8_t sk[32],
                    const char *path, const char *accept, struct fs_httpc_resp *resp,
                    struct fs_err *err)
{
    struct fs_httpc_req rq;
    char bare[FS_REQSIG_PATH_MAX + 1];
    char auth[FS_REQSIG_HEADER_MAX];
    size_t n = strcspn(path, "?");
    int rc;

    if (n > FS_REQSIG_PATH_MAX) {
        return fs_err_set(err, FS_EINVAL, "masking server path too long");
    }
    memcpy(bare, path, n);
    bare[n] = '\0';
    rc = fs_reqsig_sign(sk, "GET", bare, inv->maskset, inv->party, (int64_t)time(NULL), NULL, auth,
                        err);
    if (rc != 0) {
        return rc;
    }
    memset(&rq, 0, sizeof rq);
    rq.method = "GET";
    rq.path = path;
    rq.accept = accept;
    rq.authorization = auth;
    rq.timeout_ms = -1; /* the server may generate the slab in this request */
    rc = fs_httpc_do(mc, &rq, resp, err);
    if (rc == 0) {
        rc = fs_httpc_check(resp, "GET", path, err);
    }
    return rc;
}

static void mask_resp_wipe(struct fs_httpc_resp *resp)
{
    if (resp->body != NULL) {
        fs_wipe(resp->body, resp->len);
    }
    fs_httpc_resp_clear(resp);
}

/* One download of the party's keys (docs/wire-fedsvd.md): the manifest,
 * checked against the invitation, then every piece's rows.npy and block.npy,
 * each checked against the manifest (length, SHA-256, .npy header) as it
 * arrives and wiped once copied. FS_ECONFLICT: the server generated the keys
 * again meanwhile (another keys_id): start over. */
static int fetch_keys_once(struct wk *w, fs_httpc *mc, const uint8_t sk[32], uint64_t max_bytes,
                           struct fs_fedsvd_keys **keys, int *again, struct fs_err *err)
{
    const struct fs_invitation *inv = &w->p->req.inv;
    struct fs_httpc_resp resp;
    struct fs_maskkeys man;
    fs_fedsvd_keys_asm *as = NULL;
    json_error_t je;
    json_t *j = NULL;
    char base[FS_MASKSET_ID_MAX + 64];
    char path[FS_MASKSET_ID_MAX + 256];
    char keys_id[65];
    int rc;

    memset(&resp, 0, sizeof resp);
    memset(&man, 0, sizeof man);
    snprintf(base, sizeof base, "/v1/masksets/%s/parties/%u/keys", inv->maskset, inv->party);
    rc = mask_get(mc, inv, sk, base, "application/json", &resp, err);
    if (rc == 0) {
        count(w, 0, resp.len);
        j = json_loadb(resp.body != NULL ? resp.body : "", resp.len, JSON_REJECT_DUPLICATES, &je);
        rc = j == NULL ? fs_err_set(err, FS_EFORMAT, "keys manifest is not JSON: %s", je.text)
                       : fs_maskkeys_decode(j, &man, err);
    }
    mask_resp_wipe(&resp);
    json_decref(j); /* holds the seeds' text, freed unwiped by jansson (the body is wiped) */
    if (rc == 0) {
        rc = fed_check_manifest(inv, &man, err);
    }
    if (rc == 0) {
        rc = fs_fedsvd_keys_asm_new(&man.hdr, man.pieces, man.npieces, man.keys_id, max_bytes, &as,
                                    err);
    }
    for (size_t i = 0; i < 32; i++) {
        snprintf(keys_id + 2 * i, 3, "%02x", man.keys_id[i]);
    }
    for (size_t p = 0; rc == 0 && p < man.npieces; p++) {
        for (int f = 0; rc == 0 && f < 2; f++) {
            enum fs_fedsvd_keyfile which =
                f == 0 ? FS_FEDSVD_KEYFILE_ROWS : FS_FEDSVD_KEYFILE_BLOCK;
            char name[48];
            fs_maskkeys_file_name(p, which, name, sizeof name);
            snprintf(path, sizeof path, "%s/%s?keys_id=%s", base, name, keys_id);
            rc = mask_get(mc, inv, sk, path, "application/x-npy", &resp, err);
            *again = rc == FS_ECONFLICT;
            if (rc == 0) {
                count(w, 0, resp.len);
                rc =
                    fs_fedsvd_keys_asm_add(as, p, which, (const uint8_t *)resp.body, resp.len, err);
            }
            mask_resp_wipe(&resp);
        }
    }
    if (rc == 0) {
        rc = fs_fedsvd_keys_asm_finish(as, keys, err);
    }
    fs_fedsvd_keys_asm_free(as);
    fs_maskkeys_clear(&man);
    return rc;
}

/* GET the party's keys from the masking server (docs/wire-fedsvd.md) with
 * requests signed by the agent's identity key (the one the job pinned), and
 * build the fedsvd/fedpca party state. Everything secret is wiped at once. */
static int fetch_keys(struct wk *w, struct fs_err *err)
{
    const struct fs_invitation *inv = &w->p->req.inv;
    struct fs_httpc_config hc;
    struct fs_fedsvd_keys *keys = NULL;
    fs_httpc *mc = NULL;
    uint8_t sk[32];
    double t0 = mono_s();
    uint64_t max_bytes;
    int rc;

    rc = files_identity_load(w->ag->cfg.data_dir, sk, err);
    if (rc != 0) {
        return rc;
    }
    fs_httpc_config_default(&hc);
    hc.base_url = inv->masking_url;
    hc.insecure = w->ag->cfg.insecure;
    hc.allow_insecure_http = w->ag->cfg.insecure_http;
    hc.ca_file = w->ag->cfg.ca_file;
    /* a party's slab of A: about 8 b n_i bytes (b the block size); the
     * largest file is one piece's block */
    max_bytes = w->ag->cfg.max_elements * 8 < ((uint64_t)4 << 30)
                    ? w->ag->cfg.max_elements * 8 + (1u << 20)
                    : ((uint64_t)4 << 30);
    hc.max_body = (size_t)max_bytes;
    hc.max_retries = 3;
    hc.backoff_max_ms = 2000;
    hc.user_agent = "fedsvd-client-agent";
    /* The masking server sends nothing until the party's slab is generated
     * (on the manifest request, or on a file request after its cache dropped
     * the keys), which takes minutes for large blocks (docs/wire-fedsvd.md):
     * don't let the idle-transfer guard abort and restart that from scratch. */
    hc.low_speed_time_s = 1800;
    rc = fs_httpc_new(&mc, &hc, err);
    for (int attempt = 0; rc == 0; attempt++) {
        int again = 0;
        rc = fetch_keys_once(w, mc, sk, max_bytes, &keys, &again, err);
        if (!again || attempt >= 2) {
            break;
        }
        fs_log_pack(FS_LOG_WARN,
                    "the masking server regenerated the keys during the download; "
                    "starting over",
                    "{s:s}", "participation", w->p->rec.id);
        rc = 0;
    }
    fs_wipe(sk, sizeof sk);
    if (rc == 0) {
        rc = fed_new(inv, w->p->data, keys, &w->fed, err); /* takes keys */
    }
    if (rc != 0) {
        fs_err_prefix(err, "masking server %s: ", inv->masking_url);
    }
    fs_httpc_free(mc);
    add_timing(w, "keys", mono_s() - t0);
    return rc;
}

/* The fedsvd/fedpca parameters of the job must be the invitation's. */
static int setup_fed(struct wk *w, const struct fs_agent_job *job, struct fs_err *err)
{
    const struct fs_invitation *inv = &w->p->req.inv;

    if (!job->is_fed || strcmp(job->algorithm, inv->algorithm) != 0 ||
        job->rows != inv->global_rows || job->cols != inv->global_cols ||
        memcmp(&job->fed, &inv->fed, sizeof job->fed) != 0) {
        return fs_err_set(err, FS_EINVAL,
                          "the job does not match the invitation (algorithm %s/%s, shape "
                          "%llux%llu/%llux%llu, partition, party sizes, k, method, standardize "
                          "or allow_dropouts differ)",
                          job->algorithm, inv->algorithm, (unsigned long long)job->rows,
                          (unsigned long long)job->cols, (unsigned long long)inv->global_rows,
                          (unsigned long long)inv->global_cols);
    }
    return fetch_keys(w, err);
}

/* Power-method job: build the party state (on this worker thread: it may
 * form M'_i) and check the job against the invitation. */
static int setup_power(struct wk *w, const struct fs_agent_job *job, struct fs_err *err)
{
    const struct fs_invitation *inv = &w->p->req.inv;
    double t0 = mono_s();
    int rc;

    if (strcmp(job->algorithm, inv->algorithm) != 0 || job->parties != inv->parties ||
        job->threshold != inv->threshold) {
        return fs_err_set(err, FS_EINVAL,
                          "the job does not match the invitation (algorithm %s/%s, parties %u/%u, "
                          "threshold %u/%u)",
                          job->algorithm, inv->algorithm, job->parties, inv->parties,
                          job->threshold, inv->threshold);
    }
    if (w->pw == NULL) {
        rc = power_new(inv, w->p->data, w->p->sparse, &w->pw, err);
        add_timing(w, "compute", mono_s() - t0);
        add_timing(w, "crypto", 0.0); /* fedpower-utility's Paillier work, 0 for the others */
        if (rc != 0) {
            return rc;
        }
    }
    if (job->aggregations != power_aggregations(w->pw)) {
        return fs_err_set(err, FS_EINVAL, "the job runs %u aggregations, expected %u",
                          job->aggregations, power_aggregations(w->pw));
    }
    memset(&w->cfg, 0, sizeof w->cfg);
    w->cfg.n = job->parties;
    w->cfg.t = job->threshold;
    /* plain fedpower never uses SecAgg after the join (docs/wire-fedpower.md) */
    w->cfg.aggregations = power_kind(w->pw) == FS_AGENT_POWER_PLAIN ? 1 : job->aggregations;
    rc = fs_wire_secagg_job_id(inv->job_id, w->cfg.job_id, err);
    if (rc == 0) {
        rc = fs_secagg_config_check(&w->cfg, err);
    }
    if (rc == 0) {
        rc = fs_agent_driver_init_power(&w->drv, power_kind(w->pw), job->aggregations,
                                        power_exchanges(w->pw), w->p->req.fail_at,
                                        w->p->req.fail_round, err);
    }
    if (rc == 0) {
        w->ready = 1;
    }
    return rc;
}

/* First job status: the job must be the one the invitation describes. */
static int setup(struct wk *w, const struct fs_agent_job *job, struct fs_err *err)
{
    const struct fs_invitation *inv = &w->p->req.inv;
    int rc;

    if (inv->is_fedpower) {
        return setup_power(w, job, err);
    }
    if (inv->is_fedsvd) {
        if (job->parties != inv->parties || job->threshold != inv->threshold) {
            return fs_err_set(err, FS_EINVAL,
                              "the job does not match the invitation (parties %u/%u, threshold "
                              "%u/%u)",
                              job->parties, inv->parties, job->threshold, inv->threshold);
        }
        rc = w->fed == NULL ? setup_fed(w, job, err) : 0;
        if (rc == 0 && job->aggregations != fed_aggregations(w->fed)) {
            rc = fs_err_set(err, FS_EINVAL, "the job runs %u aggregations, expected %u",
                            job->aggregations, fed_aggregations(w->fed));
        }
        if (rc != 0) {
            return rc;
        }
        memset(&w->cfg, 0, sizeof w->cfg);
        w->cfg.n = job->parties;
        w->cfg.t = job->threshold;
        w->cfg.aggregations = job->aggregations;
        rc = fs_wire_secagg_job_id(inv->job_id, w->cfg.job_id, err);
        if (rc == 0) {
            rc = fs_secagg_config_check(&w->cfg, err);
        }
        if (rc == 0) {
            rc = fs_agent_driver_init_fed(&w->drv, job->aggregations, job->aggregations - 1,
                                          w->p->req.fail_at, err);
        }
        if (rc == 0) {
            w->ready = 1;
        }
        return rc;
    }
    if (job->parties != inv->parties || job->threshold != inv->threshold ||
        job->rows != inv->rows || job->cols != inv->cols) {
        return fs_err_set(err, FS_EINVAL,
                          "the job does not match the invitation (parties %u/%u, threshold "
                          "%u/%u, shape %llux%llu/%llux%llu)",
                          job->parties, inv->parties, job->threshold, inv->threshold,
                          (unsigned long long)job->rows, (unsigned long long)job->cols,
                          (unsigned long long)inv->rows, (unsigned long long)inv->cols);
    }
    memset(&w->cfg, 0, sizeof w->cfg);
    w->cfg.n = job->parties;
    w->cfg.t = job->threshold;
    w->cfg.aggregations = job->aggregations;
    rc = fs_wire_secagg_job_id(inv->job_id, w->cfg.job_id, err);
    if (rc == 0) {
        rc = fs_secagg_config_check(&w->cfg, err);
    }
    if (rc == 0) {
        rc = fs_agent_driver_init(&w->drv, job->aggregations, w->p->req.fail_at, err);
    }
    if (rc == 0) {
        w->ready = 1;
    }
    return rc;
}

static int step_advertise(struct wk *w, struct fs_err *err)
{
    char path[128];
    int rc;

    if (w->sc == NULL) {
        uint8_t sk[32];
        rc = files_identity_load(w->ag->cfg.data_dir, sk, err);
        if (rc == 0) {
            rc = fs_secagg_client_new(&w->cfg, w->p->req.inv.party, sk, &w->sc, err);
        }
        fs_wipe(sk, sizeof sk);
        if (rc == 0 && w->p->req.inv.has_pins) {
            /* the job's pins: a roster carrying another key is refused */
            rc = fs_secagg_client_set_pins(
                w->sc, (const uint8_t(*)[FS_SECAGG_KEY_LEN])w->p->req.inv.party_keys, w->cfg.n,
                err);
        }
        if (rc == 0) {
            rc = fs_secagg_client_advertise(w->sc, &w->adv, err);
        }
        if (rc != 0) {
            fs_secagg_client_free(w->sc);
            w->sc = NULL;
            return rc;
        }
    }
    rc = path_join(w, path, sizeof path, "/keys");
    if (rc != 0) {
        return fs_err_set(err, rc, "path too long");
    }
    return post_json(w, path, fs_wire_adv_encode(&w->adv, w->has_exp, w->max_exp), err);
}

static int step_roster(struct wk *w, struct fs_err *err)
{
    struct fs_secagg_adv *roster = NULL;
    json_t *j = NULL;
    char path[128];
    size_t k = 0;
    int rc;

    rc = path_join(w, path, sizeof path, "/keys");
    if (rc == 0) {
        rc = get_json(w, path, &j, err);
    }
    if (rc != 0) {
        goto out;
    }
    rc = fs_wire_roster_decode(j, w->cfg.n, &roster, &k, err);
    if (rc != 0) {
        fs_err_prefix(err, "GET %s: ", path);
        goto out;
    }
    {
        int present = 0;
        for (size_t i = 0; i < k; i++) {
            present |= roster[i].id == w->p->req.inv.party;
        }
        if (!present) {
            rc = fs_err_set(err, FS_ESTATE,
                            "dropped by the server: this party is not in the roster of key "
                            "advertisements");
            goto out;
        }
    }
    rc = fs_secagg_client_share_keys(w->sc, roster, k, &w->cts, &w->ncts, err);
out:
    free(roster);
    json_decref(j);
    return rc;
}

static int step_share(struct wk *w, struct fs_err *err)
{
    const struct fs_secagg_share_ct **ptrs = NULL;
    char path[128];
    int rc;

    ptrs = calloc(w->ncts + 1, sizeof *ptrs);
    if (ptrs == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < w->ncts; i++) {
        ptrs[i] = &w->cts[i];
    }
    rc = path_join(w, path, sizeof path, "/shares");
    if (rc == 0) {
        rc = post_json(w, path, fs_wire_shares_encode(ptrs, w->ncts, 0), err);
    }
    free(ptrs);
    if (rc == 0) {
        fs_secagg_share_cts_free(w->cts, w->ncts);
        w->cts = NULL;
        w->ncts = 0;
    }
    return rc;
}

static int step_receive(struct wk *w, struct fs_err *err)
{
    struct fs_secagg_share_ct *cts = NULL;
    json_t *j = NULL;
    char path[128];
    size_t k = 0;
    int rc;

    rc = path_join(w, path, sizeof path, "/shares");
    if (rc == 0) {
        rc = get_json(w, path, &j, err);
    }
    if (rc != 0) {
        goto out;
    }
    rc = fs_wire_shares_decode(j, 1, w->p->req.inv.party, fs_secagg_share_ct_len(&w->cfg), w->cfg.n,
                               &cts, &k, err);
    if (rc != 0) {
        fs_err_prefix(err, "GET %s: ", path);
        goto out;
    }
    rc = fs_secagg_client_receive_shares(w->sc, cts, k, err);
out:
    fs_secagg_share_cts_free(cts, k);
    json_decref(j);
    return rc;
}

/* GET aggregations/r into *agg (caller clears). */
static int fetch_agg(struct wk *w, uint32_t r, struct fs_agent_agg *agg, struct fs_err *err)
{
    json_t *j = NULL;
    char path[128];
    int rc;

    rc = path_join(w, path, sizeof path, "/aggregations/%u", r);
    if (rc == 0) {
        rc = get_json(w, path, &j, err);
    }
    if (rc == 0) {
        uint64_t len = w->fed != NULL  ? fed_agg_len(w->fed, r)
                       : w->pw != NULL ? power_agg_len(w->pw, r)
                                       : (uint64_t)w->p->data->rows * w->p->data->cols;
        rc = fs_agent_agg_parse(j, r, w->cfg.n, len, agg, err);
        if (rc == 0 &&
            ((agg->fed != 0) != (w->fed != NULL) || (agg->power != 0) != (w->pw != NULL) ||
             (w->pw != NULL && agg->is_rayleigh != power_is_rayleigh(w->pw, r)))) {
            rc = fs_err_set(err, FS_EFORMAT, "aggregation: not of this job's kind");
        }
        if (rc != 0) {
            fs_err_prefix(err, "GET %s: ", path);
        }
    }
    json_decref(j);
    return rc;
}

/* Power-method BEGIN: GET aggregations/r/z.npy (checked against the
 * aggregation's sha256 and shape) and run the local iterations up to this
 * round's upload. w->agg holds aggregation r. */
static int power_begin(struct wk *w, uint32_t r, struct fs_err *err)
{
    const struct fs_agent_agg *a = &w->agg;
    struct fs_io_caps caps = fs_io_caps_default();
    char path[160];
    char dest[AGENT_PATH_MAX + 32];
    uint64_t bytes = 0;
    uint8_t d[32];
    fs_mat *z = NULL;
    double t0;
    int rc;

    if (a->z_rows != power_d(w->pw) || a->z_cols != power_r(w->pw)) {
        return fs_err_set(err, FS_EFORMAT, "aggregation %u: z is %llu x %llu, expected %u x %u", r,
                          (unsigned long long)a->z_rows, (unsigned long long)a->z_cols,
                          power_d(w->pw), power_r(w->pw));
    }
    rc = path_join(w, path, sizeof path, "/aggregations/%u/z.npy", r);
    if (rc == 0 && snprintf(dest, sizeof dest, "%s/z-%u.npy", w->p->dir, r) >= (int)sizeof dest) {
        rc = FS_EINVAL;
    }
    if (rc != 0) {
        return fs_err_set(err, rc, "path too long");
    }
    rc = fs_httpc_download(w->http, path, dest, &bytes, err);
    count(w, 0, bytes);
    if (rc == 0) {
        rc = files_sha256(dest, d, err);
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
    t0 = mono_s();
    rc = power_receive(w->pw, r, z, a->iteration, err);
    add_timing(w, "compute", mono_s() - t0);
    fs_mat_free(z);
    w->t_step0 = mono_s();
    return rc;
}

/* Power-method jobs: before the first noisy upload leaves (masked chunk,
 * plain.npy, noise response), mark this participation's privacy-ledger
 * reservation spent; a participation that fails before that releases it
 * (worker_main). If the ledger cannot record it, nothing is uploaded. */
static int ledger_before_upload(struct wk *w, struct fs_err *err)
{
    int rc;

    if (w->pw == NULL || w->ledger_spent) {
        return 0;
    }
    rc = ledger_spend(w->ag, w->p->rec.id, err);
    if (rc == 0) {
        w->ledger_spent = 1;
    }
    return rc;
}

/* fedpower: PUT aggregations/r/plain.npy?zmax=... with Y'_i (or Q^T M'_i Q). */
static int power_plain_upload(struct wk *w, uint32_t r, struct fs_err *err)
{
    double zmax = 0.0;
    const fs_mat *y = power_plain(w->pw, &zmax);
    uint8_t hdr[NPY_HEADER_CAP];
    struct fs_npy_header h;
    struct body_src src;
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
    if (path_join(w, path, sizeof path, "/aggregations/%u/plain.npy?zmax=%s", r, q) != 0) {
        return fs_err_set(err, FS_EINVAL, "path too long");
    }
    src.a = hdr;
    src.alen = hlen;
    src.b = (const uint8_t *)y->data;
    src.blen = y->rows * y->cols * sizeof(double);
    src.pos = 0;
    rc = ledger_before_upload(w, err);
    if (rc == 0) {
        rc = call(w, "PUT", path, NULL, &src, NULL, err);
    }
    if (rc == 0) {
        add_timing(w, "upload", mono_s() - w->t_step0);
    }
    /* 409 conflict: the round closed (or left us out) meanwhile: the next
     * job poll tells the driver, which reports the drop */
    return rc == FS_ECONFLICT ? STEP_WAIT : rc;
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
static int power_exchange_step(struct wk *w, uint32_t r, struct fs_err *err)
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

    if (!w->has_xkey) {
        rc = path_join(w, path, sizeof path, "/exchange-key");
        if (rc == 0) {
            rc = get_json(w, path, &j, err);
        }
        if (rc == 0) {
            rc = get_b64(j, "public_key", JSON_BODY_MAX, &buf, &n, path, err);
        }
        if (rc == 0) {
            t0 = mono_s();
            rc = power_set_key(w->pw, buf, n, err);
            add_timing(w, "crypto", mono_s() - t0);
        }
        json_decref(j);
        j = NULL;
        free(buf);
        buf = NULL;
        if (rc != 0) {
            return rc;
        }
        w->has_xkey = 1;
    }
    rc = path_join(w, path, sizeof path, "/aggregations/%u/selector", r);
    if (rc == 0) {
        rc = get_json(w, path, &j, err);
        if (rc == FS_ECONFLICT) {
            return STEP_WAIT; /* the exchange closed meanwhile: the driver skips it */
        }
    }
    if (rc == 0) {
        rc = get_b64(j, "selector", JSON_BODY_MAX, &buf, &n, path, err);
    }
    json_decref(j);
    if (rc != 0) {
        return rc;
    }
    rlen = power_response_size(w->pw);
    resp = rlen > 0 ? malloc(rlen) : NULL;
    if (resp == NULL) {
        free(buf);
        return fs_err_set(err, FS_ENOMEM, "out of memory for a %zu-byte response", rlen);
    }
    t0 = mono_s();
    rc = power_exchange(w->pw, buf, n, resp, rlen, err);
    add_timing(w, "crypto", mono_s() - t0);
    free(buf);
    if (rc == 0) {
        enc = fs_b64url_encode(resp, rlen);
        rc = path_join(w, path, sizeof path, "/aggregations/%u/noise-response", r);
        if (rc != 0) {
            rc = fs_err_set(err, rc, "path too long");
        } else if (enc == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        } else {
            rc = ledger_before_upload(w, err);
            if (rc == 0) {
                rc = post_json(w, path, json_pack("{s:s}", "response", enc), err);
            }
            rc = rc == FS_ECONFLICT ? STEP_WAIT : rc; /* closed meanwhile */
        }
    }
    fs_wipe(resp, rlen);
    free(resp);
    free(enc);
    return rc;
}

static int step_begin(struct wk *w, uint32_t r, struct fs_err *err)
{
    uint32_t me = w->p->req.inv.party;
    int rc;

    fs_agent_agg_clear(&w->agg);
    w->has_agg = 0;
    rc = fetch_agg(w, r, &w->agg, err);
    if (rc != 0) {
        return rc;
    }
    w->has_agg = 1;
    if (!in_set(w->agg.active, w->agg.nactive, me)) {
        return fs_err_set(err, FS_ESTATE,
                          "dropped by the server: not in the active set of aggregation %u", r);
    }
    if (w->pw != NULL) {
        rc = power_begin(w, r, err);
        if (rc != 0 || power_kind(w->pw) == FS_AGENT_POWER_PLAIN) {
            return rc;
        }
    } else if (w->fed == NULL && w->max_abs > w->agg.fp.bound) {
        return fs_err_set(err, FS_EINVAL,
                          "the dataset's largest |value| is above the job's fixed-point bound "
                          "%g",
                          w->agg.fp.bound);
    }
    rc = fs_secagg_client_begin(w->sc, r, w->agg.length, w->agg.active, w->agg.nactive, err);
    if (rc != 0) {
        return rc;
    }
    free(w->words);
    w->words = malloc((size_t)w->agg.chunk_words * sizeof *w->words);
    if (w->words == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory for a %llu-word chunk",
                          (unsigned long long)w->agg.chunk_words);
    }
    w->chunks_done = 0;
    return 0;
}

/* fedsvd/fedpca: this party's sealed exponent of aggregation r. */
static int step_exponent(struct wk *w, uint32_t r, struct fs_err *err)
{
    uint8_t sealed[FS_WIRE_SEALED_EXP_LEN];
    char path[128];
    double t0 = mono_s();
    int rc;

    rc = fed_exponent(w->fed, r, sealed, err);
    if (!fed_is_stats(w->fed, r)) {
        add_timing(w, "prepare", mono_s() - t0); /* T = Y_i B: the bulk of the local work */
    }
    if (rc == 0) {
        rc = path_join(w, path, sizeof path, "/aggregations/%u/exponent", r);
        if (rc != 0) {
            rc = fs_err_set(err, rc, "path too long");
        }
    }
    if (rc == 0) {
        rc = post_json(w, path, fs_wire_exp_encode(sealed), err);
    }
    return rc;
}

/* fedsvd/fedpca: open the relayed exponents; report the SVD round's max. */
static int step_exponents(struct wk *w, uint32_t r, struct fs_err *err)
{
    struct fs_agent_agg a;
    char path[128];
    int e = 0;
    int rc = fetch_agg(w, r, &a, err);

    if (rc != 0) {
        return rc;
    }
    if (!a.has_exponents) {
        fs_agent_agg_clear(&a);
        return STEP_WAIT;
    }
    if (!in_set(a.exp_ids, a.nexps, w->p->req.inv.party)) {
        fs_agent_agg_clear(&a);
        return fs_err_set(err, FS_ESTATE,
                          "dropped by the server: this party's exponent is not among those of "
                          "aggregation %u",
                          r);
    }
    rc = fed_open(w->fed, r, a.exp_ids, (const uint8_t(*)[FS_WIRE_SEALED_EXP_LEN])a.sealed, a.nexps,
                  &e, err);
    fs_agent_agg_clear(&a);
    if (rc == 0 && !fed_is_stats(w->fed, r)) {
        rc = path_join(w, path, sizeof path, "/aggregations/%u/public-exponent", r);
        if (rc != 0) {
            return fs_err_set(err, rc, "path too long");
        }
        rc = post_json(w, path, fs_wire_pubexp_encode(e), err);
    }
    w->t_step0 = mono_s();
    return rc;
}

/* fedpca: the published (padded) sum of statistics aggregation r. */
static int step_stats(struct wk *w, uint32_t r, struct fs_err *err)
{
    struct fs_agent_agg a;
    char path[160];
    char dest[AGENT_PATH_MAX + 32];
    uint64_t *sum = NULL;
    size_t n = 0;
    uint64_t bytes = 0;
    uint8_t d[32];
    int rc = fetch_agg(w, r, &a, err);

    if (rc != 0) {
        return rc;
    }
    if (!a.has_sum || !a.has_survivors) {
        fs_agent_agg_clear(&a);
        return STEP_WAIT;
    }
    rc = path_join(w, path, sizeof path, "/aggregations/%u/sum.npy", r);
    if (rc == 0 &&
        snprintf(dest, sizeof dest, "%s/agg-%u-sum.npy", w->p->dir, r) >= (int)sizeof dest) {
        rc = FS_EINVAL;
    }
    if (rc != 0) {
        fs_agent_agg_clear(&a);
        return fs_err_set(err, rc, "path too long");
    }
    rc = fs_httpc_download(w->http, path, dest, &bytes, err);
    count(w, 0, bytes);
    if (rc == 0) {
        rc = files_sha256(dest, d, err);
    }
    if (rc == 0 && !fs_ct_eq(d, a.sum_sha256, 32)) {
        rc = fs_err_set(err, FS_EFORMAT, "GET %s: sha256 differs from the aggregation's", path);
    }
    if (rc == 0) {
        rc = fs_npy_read_u64(dest, a.length, &sum, &n, err);
    }
    if (rc == 0 && n != a.length) {
        rc = fs_err_set(err, FS_EFORMAT, "GET %s: %zu words, expected %llu", path, n,
                        (unsigned long long)a.length);
    }
    if (rc == 0) {
        rc = fed_stats_result(w->fed, sum, n, a.survivors, a.nsurvivors, err);
    }
    unlink(dest);
    free(sum);
    fs_agent_agg_clear(&a);
    return rc;
}

static int step_upload(struct wk *w, uint32_t r, struct fs_err *err)
{
    const double *x =
        w->p->data != NULL ? w->p->data->data : NULL; /* column-major: word i is x[i] */
    uint64_t cw = w->agg.chunk_words;
    uint8_t hdr[NPY_HEADER_CAP];
    int rc = 0;

    while (w->chunks_done < w->agg.chunks) {
        uint64_t c = w->chunks_done;
        uint64_t off = c * cw;
        size_t m = (size_t)(w->agg.length - off < cw ? w->agg.length - off : cw);
        struct fs_npy_header h;
        struct body_src src;
        size_t hlen = 0;
        char path[160];

        if (atomic_load(&w->p->stop) != 0) {
            return STEP_WAIT; /* the loop reports why it stops */
        }
        /* Encoding and masking are deterministic, so a retried chunk is
         * byte-identical (the server accepts identical repeats). They run
         * over pieces of at most MASK_PIECE words: each PRG stream (one per
         * other party, plus the self mask) then passes over a piece that
         * stays in the cache, however large the server's chunks are. */
        for (size_t k = 0; rc == 0 && k < m; k += MASK_PIECE) {
            size_t pm = m - k < MASK_PIECE ? m - k : MASK_PIECE;
            uint64_t *pw = w->words + k;
            if (w->fed != NULL) {
                rc = fed_chunk(w->fed, r, w->sc, off + k, pw, pm, err);
            } else if (w->pw != NULL) {
                rc = power_chunk(w->pw, w->sc, off + k, pw, pm, err);
            } else {
                rc = fs_fixedpt_encode(&w->agg.fp, x + off + k, pw, pm, err);
                if (rc == 0) {
                    rc = fs_secagg_client_mask(w->sc, off + k, pw, pw, pm, err);
                }
            }
        }
        if (rc != 0) {
            break;
        }
        memset(&h, 0, sizeof h);
        h.dtype = FS_NPY_U8;
        h.fortran_order = 0;
        h.ndim = 1;
        h.shape[0] = m;
        h.shape[1] = 1;
        rc = fs_npy_format_header(&h, hdr, sizeof hdr, &hlen, err);
        if (rc == 0) {
            rc = path_join(w, path, sizeof path, "/aggregations/%u/masked/%llu", r,
                           (unsigned long long)c);
            if (rc != 0) {
                rc = fs_err_set(err, rc, "path too long");
            }
        }
        if (rc != 0) {
            break;
        }
        src.a = hdr;
        src.alen = hlen;
        src.b = (const uint8_t *)w->words;
        src.blen = m * sizeof(uint64_t);
        src.pos = 0;
        rc = ledger_before_upload(w, err);
        if (rc == 0) {
            rc = call(w, "PUT", path, NULL, &src, NULL, err);
        }
        if (rc != 0) {
            break;
        }
        w->chunks_done++;
        save(w, 0);
    }
    if (rc == 0 && w->fed != NULL) {
        fed_end_upload(w->fed, r);
        add_timing(w, fed_is_stats(w->fed, r) ? "statistics" : "upload", mono_s() - w->t_step0);
    }
    if (rc == 0 && w->pw != NULL) {
        add_timing(w, "upload", mono_s() - w->t_step0);
    }
    return rc;
}

static int step_survivors(struct wk *w, uint32_t r, struct fs_err *err)
{
    struct fs_agent_agg a;
    int rc = fetch_agg(w, r, &a, err);

    if (rc != 0) {
        return rc;
    }
    if (!a.has_survivors) {
        rc = STEP_WAIT;
    } else if (!in_set(a.survivors, a.nsurvivors, w->p->req.inv.party)) {
        rc = fs_err_set(err, FS_ESTATE,
                        "dropped by the server: not among the survivors of aggregation %u "
                        "(masked input incomplete at the deadline)",
                        r);
    } else {
        rc = fs_secagg_client_consistency(w->sc, a.survivors, a.nsurvivors, w->sig, err);
    }
    fs_agent_agg_clear(&a);
    return rc;
}

static int step_consistency(struct wk *w, uint32_t r, struct fs_err *err)
{
    char path[128];
    int rc = path_join(w, path, sizeof path, "/aggregations/%u/consistency", r);

    if (rc != 0) {
        return fs_err_set(err, rc, "path too long");
    }
    return post_json(w, path, fs_wire_sig_encode(w->sig), err);
}

static int step_signatures(struct wk *w, uint32_t r, struct fs_err *err)
{
    struct fs_agent_agg a;
    int rc = fetch_agg(w, r, &a, err);

    if (rc != 0) {
        return rc;
    }
    if (!a.has_signatures) {
        rc = STEP_WAIT;
    } else {
        if (w->rv != NULL) {
            fs_wipe(w->rv, w->nrv * sizeof *w->rv);
            free(w->rv);
            w->rv = NULL;
        }
        rc = fs_secagg_client_unmask(w->sc, a.sig_ids, (const uint8_t(*)[FS_SECAGG_SIG_LEN])a.sigs,
                                     a.nsigs, &w->rv, &w->nrv, err);
    }
    fs_agent_agg_clear(&a);
    return rc;
}

static int step_unmask(struct wk *w, uint32_t r, struct fs_err *err)
{
    char path[128];
    int rc = path_join(w, path, sizeof path, "/aggregations/%u/unmask", r);

    if (rc != 0) {
        return fs_err_set(err, rc, "path too long");
    }
    rc = post_json(w, path, fs_wire_reveals_encode(w->rv, w->nrv), err);
    if (rc == 0) {
        fs_wipe(w->rv, w->nrv * sizeof *w->rv);
        free(w->rv);
        w->rv = NULL;
        w->nrv = 0;
    }
    return rc;
}

/* A downloaded file must be the .npy the manifest describes. */
static int check_file(const char *dest, const struct fs_agent_file *f, uint64_t max_elems,
                      struct fs_err *err)
{
    struct fs_io_caps caps = fs_io_caps_default();
    struct fs_npy_header h;
    uint8_t buf[4096];
    uint8_t digest[32];
    size_t got;
    FILE *fp;
    int rc;

    rc = files_sha256(dest, digest, err);
    if (rc != 0) {
        return rc;
    }
    if (!fs_ct_eq(digest, f->sha256, 32)) {
        return fs_err_set(err, FS_EFORMAT, "%s: sha256 differs from the server's manifest",
                          f->name);
    }
    fp = fopen(dest, "rb");
    if (fp == NULL) {
        return fs_err_set(err, FS_EIO, "%s: cannot read: %s", f->name, strerror(errno));
    }
    got = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    caps.max_elems = max_elems;
    rc = fs_npy_parse_header(buf, got, &caps, &h, err);
    if (rc != 0) {
        return fs_err_prefix(err, "%s: ", f->name);
    }
    if (h.ndim != f->ndim || h.shape[0] != f->shape[0] ||
        (f->ndim == 2 && h.shape[1] != f->shape[1])) {
        return fs_err_set(err, FS_EFORMAT, "%s: shape differs from the server's manifest", f->name);
    }
    return 0;
}

static int step_result(struct wk *w, struct fs_err *err)
{
    struct fs_agent_result res;
    json_t *j = NULL;
    char *text = NULL;
    char path[160];
    char dest[AGENT_PATH_MAX + FS_AGENT_FILE_NAME_MAX + 2];
    int rc;

    rc = path_join(w, path, sizeof path, "/result");
    if (rc == 0) {
        rc = get_json(w, path, &j, err);
    }
    if (rc != 0) {
        goto out;
    }
    rc = fs_agent_result_parse(j, &res, err);
    if (rc != 0) {
        fs_err_prefix(err, "GET %s: ", path);
        goto out;
    }
    for (size_t i = 0; i < res.nfiles; i++) {
        const struct fs_agent_file *f = &res.files[i];
        uint64_t bytes = 0;
        rc = path_join(w, path, sizeof path, "/result/%s", f->name);
        if (rc == 0 &&
            snprintf(dest, sizeof dest, "%s/%s", w->p->dir, f->name) >= (int)sizeof dest) {
            rc = FS_EINVAL;
        }
        if (rc != 0) {
            rc = fs_err_set(err, rc, "path too long");
            goto out;
        }
        rc = fs_httpc_download(w->http, path, dest, &bytes, err);
        count(w, 0, bytes);
        if (rc == 0) {
            rc = check_file(dest, f, w->ag->cfg.max_elements, err);
        }
        if (rc != 0) {
            unlink(dest);
            goto out;
        }
    }
    if (w->pw != NULL) {
        /* the party's manifest: the server's document, our verified copies */
        json_object_set_new(j, "party", json_integer(w->p->req.inv.party));
        json_object_set(j, "party_timings", w->timings);
        json_object_set_new(j, "bytes_sent", json_integer((json_int_t)w->p->rec.bytes_sent));
        json_object_set_new(j, "bytes_received",
                            json_integer((json_int_t)w->p->rec.bytes_received));
    }
    text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (text == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    if (snprintf(dest, sizeof dest, "%s/manifest.json", w->p->dir) >= (int)sizeof dest) {
        rc = fs_err_set(err, FS_EINVAL, "path too long");
        goto out;
    }
    rc = fs_write_file_atomic(dest, text, strlen(text), err);
out:
    free(text);
    json_decref(j);
    return rc;
}

/* The server's published file `name` from its manifest, downloaded to
 * <dir>/server-<name> and checked; *m is a new matrix (1-D: n x 1). */
static int fetch_published(struct wk *w, const struct fs_agent_result *res, const char *name,
                           fs_mat **m, struct fs_err *err)
{
    const struct fs_agent_file *f = NULL;
    char path[160];
    char dest[AGENT_PATH_MAX + FS_AGENT_FILE_NAME_MAX + 16];
    uint64_t bytes = 0;
    int rc;

    *m = NULL;
    for (size_t i = 0; i < res->nfiles; i++) {
        if (strcmp(res->files[i].name, name) == 0) {
            f = &res->files[i];
        }
    }
    if (f == NULL) {
        return fs_err_set(err, FS_EFORMAT, "the server's result lists no %s", name);
    }
    rc = path_join(w, path, sizeof path, "/result/%s", name);
    if (rc == 0 &&
        snprintf(dest, sizeof dest, "%s/server-%s", w->p->dir, name) >= (int)sizeof dest) {
        rc = FS_EINVAL;
    }
    if (rc != 0) {
        return fs_err_set(err, rc, "path too long");
    }
    rc = fs_httpc_download(w->http, path, dest, &bytes, err);
    count(w, 0, bytes);
    if (rc == 0) {
        rc = check_file(dest, f, w->ag->cfg.max_elements, err);
    }
    if (rc == 0) {
        rc = fs_io_load_dense(dest, FS_FMT_NPY, NULL, m, err);
    }
    unlink(dest);
    return rc;
}

/*
 * fedsvd/fedpca: fetch S and V' (U' for features) and the survivors, recover
 * this party's factors locally (fed.c) and write its own manifest: the
 * server's fields, the party's files, and the party-side timings.
 */
static int step_result_fed(struct wk *w, struct fs_err *err)
{
    int features = w->p->req.inv.fed.partition == FS_JOB_FEATURES;
    struct fs_agent_result res;
    json_t *j = NULL;
    json_t *files = json_array();
    json_t *info = json_object();
    uint32_t *u3 = NULL;
    size_t n3 = 0;
    fs_mat *s = NULL;
    fs_mat *vc = NULL;
    char *text = NULL;
    char path[160];
    char dest[AGENT_PATH_MAX + 32];
    json_t *tsq;
    double t0;
    int rc;

    if (files == NULL || info == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    rc = path_join(w, path, sizeof path, "/result");
    if (rc == 0) {
        rc = get_json(w, path, &j, err);
    }
    if (rc != 0) {
        goto out;
    }
    rc = fs_agent_result_parse(j, &res, err);
    if (rc == 0) {
        rc = fs_wire_ids_decode(json_object_get(j, "survivors"), w->cfg.n, &u3, &n3, err);
    }
    tsq = json_object_get(j, "total_sq");
    if (rc == 0 && !json_is_number(tsq)) {
        rc = fs_err_set(err, FS_EFORMAT, "total_sq: expected a number");
    }
    if (rc != 0) {
        fs_err_prefix(err, "GET %s: ", path);
        goto out;
    }
    rc = fetch_published(w, &res, "s.npy", &s, err);
    if (rc == 0) {
        rc = fetch_published(w, &res, features ? "uprime.npy" : "vprime.npy", &vc, err);
    }
    if (rc == 0 && (s->cols != 1 || vc->cols != s->rows)) {
        rc = fs_err_set(err, FS_EFORMAT, "the published S and shared factor do not fit");
    }
    if (rc != 0) {
        goto out;
    }
    t0 = mono_s();
    rc = fed_finish(w->fed, s->data, s->rows, vc, json_number_value(tsq), u3, n3, w->p->dir, files,
                    info, err);
    add_timing(w, "recover", mono_s() - t0);
    if (rc != 0) {
        goto out;
    }
    /* the party's manifest: the server's facts, our files */
    json_object_set(j, "server_files", json_object_get(j, "files"));
    json_object_set(j, "files", files);
    json_object_set_new(j, "server_rank", json_incref(json_object_get(j, "rank")));
    json_object_update(j, info);
    json_object_set(j, "party_timings", w->timings);
    json_object_set_new(j, "party", json_integer(w->p->req.inv.party));
    text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (text == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    if (snprintf(dest, sizeof dest, "%s/manifest.json", w->p->dir) >= (int)sizeof dest) {
        rc = fs_err_set(err, FS_EINVAL, "path too long");
        goto out;
    }
    rc = fs_write_file_atomic(dest, text, strlen(text), err);
out:
    free(text);
    free(u3);
    fs_mat_free(s);
    fs_mat_free(vc);
    json_decref(files);
    json_decref(info);
    json_decref(j);
    return rc;
}

static int do_step(struct wk *w, const struct fs_agent_action *a, struct fs_err *err)
{
    switch (a->step) {
    case FS_AGENT_S_ADVERTISE:
        return step_advertise(w, err);
    case FS_AGENT_S_ROSTER:
        return step_roster(w, err);
    case FS_AGENT_S_SHARE:
        return step_share(w, err);
    case FS_AGENT_S_RECEIVE:
        return step_receive(w, err);
    case FS_AGENT_S_BEGIN:
        return step_begin(w, a->r, err);
    case FS_AGENT_S_UPLOAD:
        return step_upload(w, a->r, err);
    case FS_AGENT_S_SURVIVORS:
        return step_survivors(w, a->r, err);
    case FS_AGENT_S_CONSISTENCY:
        return step_consistency(w, a->r, err);
    case FS_AGENT_S_SIGNATURES:
        return step_signatures(w, a->r, err);
    case FS_AGENT_S_UNMASK:
        return step_unmask(w, a->r, err);
    case FS_AGENT_S_EXPONENT:
        return step_exponent(w, a->r, err);
    case FS_AGENT_S_EXPONENTS:
        return step_exponents(w, a->r, err);
    case FS_AGENT_S_STATS:
        return step_stats(w, a->r, err);
    case FS_AGENT_S_PLAIN_UPLOAD:
        return power_plain_upload(w, a->r, err);
    case FS_AGENT_S_EXCHANGE:
        return power_exchange_step(w, a->r, err);
    case FS_AGENT_S_RESULT:
        return w->fed != NULL ? step_result_fed(w, err) : step_result(w, err);
    default:
        return fs_err_set(err, FS_EINTERNAL, "no such step");
    }
}

/* Errors worth waiting out: the server unreachable or answering 5xx. */
static int transient(int rc)
{
    return rc == FS_EIO;
}

static int poll_job(struct wk *w, struct fs_agent_job *job, struct fs_err *err)
{
    json_t *j = NULL;
    int rc = get_json(w, w->jpath, &j, err);

    if (rc == 0) {
        rc = fs_agent_job_parse(j, job, err);
        if (rc != 0) {
            fs_err_prefix(err, "GET %s: ", w->jpath);
        }
    }
    json_decref(j);
    return rc;
}

/*
 * The participation loop. @return 0 when done; otherwise the failure
 * reason is in err (err->code may be 0 for a driver decision).
 */
static int run(struct wk *w, struct fs_err *err)
{
    const struct agent_config *cfg = &w->ag->cfg;
    struct fs_agent_job job;
    struct fs_agent_job_view view;
    struct fs_agent_action act;
    double t_err = 0;           /* first of a run of transient errors */
    double t_change = mono_s(); /* last change of the job's position */
    char last_pos[64] = "";
    int rc;

    for (;;) {
        int stop = atomic_load(&w->p->stop);
        if (stop != 0) {
            return fs_err_set(err, FS_ESTATE, "%s",
                              stop == 2 ? "cancelled by the operator" : "agent stopped");
        }
        rc = poll_job(w, &job, err);
        if (rc == 0 && !w->ready) {
            rc = setup(w, &job, err);
        }
        if (rc == 0) {
            fs_agent_job_view(&job, &view);
            fs_agent_driver_next(&w->drv, &view, &act);
            if (act.act == FS_AGENT_DO) {
                fs_log_pack(FS_LOG_DEBUG, "step", "{s:s, s:s, s:i}", "participation", w->p->rec.id,
                            "step", fs_agent_step_name(act.step), "aggregation", (int)act.r);
                rc = do_step(w, &act, err);
                if (rc == 0) {
                    fs_agent_driver_done(&w->drv);
                    t_err = 0;
                    save(w, 0);
                    continue;
                }
            }
        }
        if (rc == STEP_WAIT) {
            rc = 0;
            act.act = FS_AGENT_WAIT;
        }
        if (rc != 0) {
            if (!transient(rc)) {
                return rc;
            }
            if (t_err == 0) {
                t_err = mono_s();
            } else if (mono_s() - t_err > (double)cfg->patience_s) {
                return fs_err_prefix(err, "server unreachable for %u s: ", cfg->patience_s);
            }
            wk_sleep(w, cfg->poll_ms * 5);
            continue;
        }
        t_err = 0;
        switch (act.act) {
        case FS_AGENT_FINISH:
            return 0;
        case FS_AGENT_FAIL:
        case FS_AGENT_CRASH:
            if (act.act == FS_AGENT_CRASH) {
                fs_log_pack(FS_LOG_WARN, "fail_at reached: stopping as if crashed", "{s:s, s:s}",
                            "participation", w->p->rec.id, "fail_at",
                            fs_agent_fail_at_name(w->drv.fail_at));
            }
            return fs_err_set(err, FS_ESTATE, "%s", act.reason);
        default:
            break;
        }
        {
            char pos[64];
            snprintf(pos, sizeof pos, "%s/%u", job.phase_name, job.aggregation);
            /* The join phase waits for partners (hours, by the job's join
             * timeout, which the server enforces): no stall limit there. */
            if (strcmp(pos, last_pos) != 0 || job.phase == FS_AGENT_J_WAITING) {
                memcpy(last_pos, pos, sizeof pos);
                t_change = mono_s();
            } else if (cfg->stall_s > 0 && mono_s() - t_change > (double)cfg->stall_s) {
                return fs_err_set(err, FS_ESTATE, "the job made no progress for %u s (phase %s)",
                                  cfg->stall_s, job.phase_name);
            }
        }
        if (w->fed != NULL && fed_prepare_pending(w->fed)) {
            /* Nothing to send until the others catch up: compute T = Y_i B
             * (the bulk of the local work) now rather than at the exponent
             * step, e.g. while the masking server generates the other
             * parties' keys. The same T either way. */
            double t0 = mono_s();
            rc = fed_prepare(w->fed, err);
            add_timing(w, "prepare", mono_s() - t0);
            if (rc != 0) {
                return rc;
            }
            t_change = mono_s();
            continue;
        }
        save(w, 0);
        wk_sleep(w, cfg->poll_ms);
    }
}

static void wk_free(struct wk *w)
{
    fed_free(w->fed);
    power_free(w->pw);
    json_decref(w->timings);
    fs_httpc_free(w->http);
    fs_secagg_client_free(w->sc);
    fs_secagg_share_cts_free(w->cts, w->ncts);
    if (w->rv != NULL) {
        fs_wipe(w->rv, w->nrv * sizeof *w->rv);
        free(w->rv);
    }
    if (w->words != NULL) {
        fs_wipe(w->words, (size_t)w->agg.chunk_words * sizeof *w->words); /* before agg_clear */
        free(w->words);
    }
    fs_agent_agg_clear(&w->agg);
    fs_wipe(w, sizeof *w);
}

void part_free(struct part *p)
{
    if (p == NULL) {
        return;
    }
    fs_invitation_wipe(&p->req.inv);
    if (p->data != NULL) {
        fs_mat_wipe(p->data);
        fs_mat_free(p->data);
    }
    if (p->sparse != NULL) {
        fs_wipe(p->sparse->vals, p->sparse->nnz * sizeof *p->sparse->vals);
        fs_csr_free(p->sparse);
    }
    free(p);
}

static void unlink_token(struct part *p)
{
    char path[AGENT_PATH_MAX + 8];

    if (snprintf(path, sizeof path, "%s/token", p->dir) < (int)sizeof path) {
        unlink(path);
    }
}

static void *worker_main(void *arg)
{
    struct part *p = arg;
    struct agent *ag = p->ag;
    struct fs_httpc_config hc;
    struct fs_err err = {0};
    struct wk *w;
    int rc;

    w = calloc(1, sizeof *w);
    if (w == NULL) {
        rc = fs_err_set(&err, FS_ENOMEM, "out of memory");
        goto end;
    }
    w->p = p;
    w->ag = ag;
    w->timings = json_object();
    snprintf(w->jpath, sizeof w->jpath, "/v1/jobs/%s", p->req.inv.job_id);
    if (p->req.inv.is_fedpower) {
        w->has_exp = 0; /* lib/proto encodes: no fixed-point negotiation */
    } else {
        w->max_abs = fs_mat_max_abs(p->data);
        rc = fs_agent_max_abs_exp(p->data->data, (size_t)(p->data->rows * p->data->cols),
                                  &w->max_exp);
        w->has_exp = rc == 1;
    }
    fs_httpc_config_default(&hc);
    hc.base_url = p->req.base_url;
    hc.token = p->req.inv.token;
    hc.insecure = ag->cfg.insecure;
    hc.allow_insecure_http = ag->cfg.insecure_http;
    hc.ca_file = ag->cfg.ca_file;
    hc.max_body = JSON_BODY_MAX;
    hc.max_download = ag->cfg.max_elements * 8 + (1u << 20);
    hc.max_retries = 3;
    hc.backoff_max_ms = 2000;
    hc.user_agent = "fedsvd-client-agent";
    rc = fs_httpc_new(&w->http, &hc, &err);
    /* the client holds its own copy now */
    fs_wipe(p->req.inv.token, sizeof p->req.inv.token);
    if (rc == 0) {
        rc = run(w, &err);
    }
end:
    if (rc == 0) {
        snprintf(p->rec.state, sizeof p->rec.state, "done");
        snprintf(p->rec.phase, sizeof p->rec.phase, "done");
        p->rec.progress = 1.0;
        p->rec.error[0] = '\0';
    } else {
        snprintf(p->rec.state, sizeof p->rec.state, "failed");
        snprintf(p->rec.error, sizeof p->rec.error, "%s",
                 err.msg[0] != '\0' ? err.msg : fs_err_name(rc));
        if (p->req.inv.is_fedpower && (w == NULL || !w->ledger_spent)) {
            /* no noisy upload left: give the reservation back (a no-op
             * without one); before the terminal state is stored, so a
             * settling ledger read never sees it failed and reserved */
            struct fs_err lerr = {0};

            if (ledger_release(ag, p->rec.id, &lerr) != 0) {
                fs_log(FS_LOG_WARN, "cannot release a privacy-ledger reservation", NULL);
            }
        }
    }
    if (w != NULL) {
        save(w, 1);
    } else {
        files_now(p->rec.updated_at);
        if (store_progress(ag->db, &p->rec, NULL) != 0) {
            fs_log(FS_LOG_WARN, "cannot save a participation's end", NULL);
        }
    }
    unlink_token(p); /* not resumable: the token is of no further use */
    fs_log_pack(rc == 0 ? FS_LOG_INFO : FS_LOG_WARN, "participation ended",
                "{s:s, s:s, s:i, s:s, s:s, s:s, s:I, s:I}", "participation", p->rec.id, "job",
                p->rec.job_id, "party", (int)p->rec.party, "state", p->rec.state, "phase",
                p->rec.phase, "error", p->rec.error, "bytes_sent", (json_int_t)p->rec.bytes_sent,
                "bytes_received", (json_int_t)p->rec.bytes_received);
    if (w != NULL) {
        wk_free(w);
        free(w);
    }
    pthread_mutex_lock(&ag->mu);
    for (struct part **pp = &ag->parts; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    ag->nrunning--;
    pthread_cond_broadcast(&ag->cv);
    pthread_mutex_unlock(&ag->mu);
    part_free(p);
    return NULL;
}

int worker_start_locked(struct agent *ag, struct part *p, struct fs_err *err)
{
    pthread_attr_t attr;
    pthread_t t;
    int rc;

    p->ag = ag;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, worker_main, p);
    if (rc == 0) {
        p->next = ag->parts;
        ag->parts = p;
        ag->nrunning++;
    }
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        return fs_err_set(err, FS_EIO, "cannot start a worker thread: %s", strerror(rc));
    }
    return 0;
}
