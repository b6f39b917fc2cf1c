/* The worker's requests to the aggregation server, its progress rows and
 * its timings: see worker.h. */
#include "worker.h"

#include "crypto/sha256.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crypto/ct.h"
#include "io/matio.h"
#include "net/reply.h"

#define SAVE_EVERY_S 0.5 /* progress rows at most this often */

void ca_wk_add_timing(struct ca_wk *w, const char *name, double secs)
{
    json_t *v = json_object_get(w->timings, name);
    double prev = json_is_number(v) ? json_number_value(v) : 0.0;

    if (w->timings != NULL) {
        json_object_set_new(w->timings, name, json_real(prev + secs));
    }
}

double ca_mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sleep up to ms, waking early when the participation is told to stop. */
void ca_wk_sleep(struct ca_wk *w, unsigned ms)
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
void ca_wk_save(struct ca_wk *w, int force)
{
    struct ca_part_rec *r = &w->p->rec;
    struct fs_err err = {0};
    double now = ca_mono_s();

    if (w->ready) {
        snprintf(r->phase, sizeof r->phase, "%s", fs_agent_driver_phase(&w->drv));
        r->progress =
            fs_agent_driver_progress(&w->drv, w->chunks_done, w->has_agg ? w->chunks_total : 0);
    }
    if (!force && strcmp(r->phase, w->saved_phase) == 0 && now - w->last_save < SAVE_EVERY_S) {
        return;
    }
    ca_files_now(r->updated_at);
    if (ca_store_progress(w->ag->db, r, &err) != 0) {
        if (err.code == FS_ESTATE) {
            atomic_store(&w->p->stop, 2); /* cancelled (or ended) elsewhere */
        } else if (err.code != FS_ESTORAGE) {
            /* a full disk is logged once per episode (net/storage.h) */
            fs_log_pack(FS_LOG_WARN, "cannot save progress", "{s:s, s:s}", "participation", r->id,
                        "error", err.msg);
        }
    }
    w->last_save = now;
    snprintf(w->saved_phase, sizeof w->saved_phase, "%s", r->phase);
}

void ca_wk_count(struct ca_wk *w, uint64_t sent, uint64_t received)
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

static int body_read(void *ctx, void *buf, size_t cap, size_t *got)
{
    struct ca_body_src *s = ctx;
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
    ((struct ca_body_src *)ctx)->pos = 0;
    return 0;
}

/*
 * One request. JSON bodies (json != NULL) or a two-piece streamed body
 * (src != NULL). A 409 whose code is not_ready or aborted is CA_STEP_WAIT (the
 * next job poll tells which); other non-2xx are errors named after the
 * request. *out gets the parsed JSON response (NULL when empty) if wanted.
 */
int ca_wk_call(struct ca_wk *w, const char *method, const char *path, const json_t *json,
               struct ca_body_src *src, json_t **out, struct fs_err *err)
{
    return ca_wk_call_on(w, w->http, method, path, json, src, out, err);
}

int ca_wk_call_on(struct ca_wk *w, fs_httpc *http, const char *method, const char *path,
                  const json_t *json, struct ca_body_src *src, json_t **out, struct fs_err *err)
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
    rc = fs_httpc_do(http, &rq, &resp, err);
    ca_wk_count(w,
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
            fs_log_pack(FS_LOG_DEBUG, "not ready: waiting", "{s:s, s:s, s:s}", "method", method,
                        "path", path, "code", code);
            rc = CA_STEP_WAIT;
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

int ca_wk_get_json(struct ca_wk *w, const char *path, json_t **out, struct fs_err *err)
{
    int rc = ca_wk_call(w, "GET", path, NULL, NULL, out, err);

    if (rc == 0 && *out == NULL) {
        rc = fs_err_set(err, FS_EFORMAT, "GET %s: empty response", path);
    }
    return rc;
}

/* A testing aid for the restart tests: with FEDSVD_TEST_STOP_AFTER_WAL set,
 * the first message (once per process) whose path contains its value stops
 * the whole process (SIGSTOP) once written ahead and before it is sent, so
 * that a test can SIGKILL the agent at exactly that point, or hold a job
 * there and let it go on (SIGCONT). Unset, it does nothing. */
static void test_stop_point(struct ca_wk *w, const char *path)
{
    static atomic_flag fired = ATOMIC_FLAG_INIT;
    const char *at = getenv("FEDSVD_TEST_STOP_AFTER_WAL");

    if (at != NULL && at[0] != '\0' && strstr(path, at) != NULL &&
        !atomic_flag_test_and_set(&fired)) {
        fs_log_pack(FS_LOG_WARN, "test stop point reached: stopping the process", "{s:s, s:s}",
                    "participation", w->p->rec.id, "path", path);
        raise(SIGSTOP);
    }
}

/* POST a JSON message; steals msg. */
int ca_wk_wal(struct ca_wk *w, const char *path, const void *a, size_t alen, const void *b,
              size_t blen, struct fs_err *err)
{
    fs_sha256_ctx *ctx = NULL;
    uint8_t d[32];
    int repeat = 0;
    int rc = fs_sha256_new(&ctx, err);

    if (rc == 0) {
        rc = fs_sha256_update(ctx, path, strlen(path) + 1, err);
    }
    if (rc == 0 && alen > 0) {
        rc = fs_sha256_update(ctx, a, alen, err);
    }
    if (rc == 0 && blen > 0) {
        rc = fs_sha256_update(ctx, b, blen, err);
    }
    if (rc == 0) {
        rc = fs_sha256_final(ctx, d, err);
    }
    fs_sha256_free(ctx);
    if (rc == 0) {
        rc = ca_store_wal(w->ag->db, w->p->rec.id, path, d, &repeat, err);
    }
    if (rc == 0 && repeat) {
        fs_log_pack(FS_LOG_INFO, "message matches its write-ahead digest", "{s:s, s:s}",
                    "participation", w->p->rec.id, "path", path);
    } else if (rc == 0) {
        fs_log_pack(FS_LOG_DEBUG, "message written ahead", "{s:s, s:s}", "participation",
                    w->p->rec.id, "path", path);
        test_stop_point(w, path);
    }
    return rc;
}

int ca_wk_post_json(struct ca_wk *w, const char *path, json_t *msg, struct fs_err *err)
{
    char *text;
    int rc;

    if (msg == NULL) {
        return fs_err_set(err, FS_ENOMEM, "POST %s: cannot encode the message", path);
    }
    text = json_dumps(msg, JSON_COMPACT); /* the body ca_wk_call sends */
    rc = text == NULL ? fs_err_set(err, FS_ENOMEM, "POST %s: cannot encode the message", path)
                      : ca_wk_wal(w, path, text, strlen(text), NULL, 0, err);
    if (text != NULL) {
        fs_wipe(text, strlen(text));
        free(text);
    }
    if (rc == 0 && !w->local) {
        rc = ca_wk_call(w, "POST", path, msg, NULL, NULL, err);
    }
    json_decref(msg);
    return rc;
}

int ca_wk_path(struct ca_wk *w, char *buf, size_t cap, const char *fmt, ...)
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

int ca_in_set(const uint32_t *ids, size_t k, uint32_t id)
{
    for (size_t i = 0; i < k; i++) {
        if (ids[i] == id) {
            return 1;
        }
    }
    return 0;
}

/* GET aggregations/r into *agg (caller clears). */
int ca_wk_fetch_agg(struct ca_wk *w, uint32_t r, struct fs_agent_agg *agg, struct fs_err *err)
{
    json_t *j = NULL;
    char path[128];
    int rc;

    rc = ca_wk_path(w, path, sizeof path, "/aggregations/%u", r);
    if (rc == 0) {
        rc = ca_wk_get_json(w, path, &j, err);
    }
    if (rc == 0) {
        uint64_t len = w->fed != NULL  ? ca_fed_agg_len(w->fed, r)
                       : w->pw != NULL ? ca_power_agg_len(w->pw, r)
                                       : (uint64_t)w->p->data->rows * w->p->data->cols;
        json_t *d = ca_wk_shard_agg_doc(w, r, j); /* sharded: worker_shard.c */

        rc = d == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
                       : fs_agent_agg_parse(d, r, w->cfg.n, len, agg, err);
        json_decref(d);
        if (rc == 0 &&
            ((agg->fed != 0) != (w->fed != NULL) || (agg->power != 0) != (w->pw != NULL) ||
             (w->pw != NULL && agg->is_rayleigh != ca_power_is_rayleigh(w->pw, r)))) {
            rc = fs_err_set(err, FS_EFORMAT, "aggregation: not of this job's kind");
        }
        if (rc != 0) {
            fs_err_prefix(err, "GET %s: ", path);
        }
    }
    json_decref(j);
    return rc;
}

/* Power-method jobs: before the first noisy upload leaves (masked chunk,
 * plain.npy, noise response), mark this participation's privacy-ledger
 * reservation spent; a participation that fails before that releases it
 * (worker_main). If the ledger cannot record it, nothing is uploaded. */
int ca_wk_ledger_before_upload(struct ca_wk *w, struct fs_err *err)
{
    int rc;

    if (w->pw == NULL || w->ledger_spent) {
        return 0;
    }
    rc = ca_ledger_spend(w->ag, w->p->rec.id, err);
    if (rc == 0) {
        w->ledger_spent = 1;
    }
    return rc;
}

/* A downloaded file must be the .npy the manifest describes. */
int ca_wk_check_file(const char *dest, const struct fs_agent_file *f, uint64_t max_elems,
                     struct fs_err *err)
{
    struct fs_io_caps caps = fs_io_caps_default();
    struct fs_npy_header h;
    uint8_t buf[4096];
    uint8_t digest[32];
    size_t got;
    FILE *fp;
    int rc;

    rc = ca_files_sha256(dest, digest, err);
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

int ca_wk_write_manifest(struct ca_wk *w, const json_t *j, struct fs_err *err)
{
    char dest[CA_PATH_MAX + 32];
    char *text = NULL;
    int rc;

    if (snprintf(dest, sizeof dest, "%s/manifest.json", w->p->dir) >= (int)sizeof dest) {
        return fs_err_set(err, FS_EINVAL, "path too long");
    }
    text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (text == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_write_file_atomic(dest, text, strlen(text), err);
    free(text);
    return rc;
}
