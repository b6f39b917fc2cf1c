/* Routes and handlers: see http.h and docs/wire-fedsvd.md. */
#include "http.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "crypto/reqsig.h"
#include "net/log.h"
#include "net/metrics.h"
#include "net/reply.h"
#include "net/storage.h"
#include "net/svc.h"
#include "spec.h"
#include "teststop.h"

#define SPEC_BODY        (256 * 1024) /* MaskSetSpec: 1000 parties fit many times */
#define METRIC_SERIES    256
#define METRICS_TEXT_MAX ((size_t)4 << 20)
#define JOB_ID_HEADER    "X-Fedsvd-Job-Id"
#define KEYS_ID_HEADER   "X-Fedsvd-Keys-Id"
#define EXPIRE_BATCH     64 /* mask sets expired per sweep step */

struct mask_metrics {
    fs_http_metrics *http;
    pthread_mutex_t mu;    /* of the counters below */
    uint64_t keys_served;  /* manifests */
    uint64_t files_served; /* .npy files */
    uint64_t keys_bytes;   /* of the .npy files */
};

/* ------------------------------------------------------------ helpers */

/* 401 on a key route: the challenge names the signature scheme. */
static int sig_unauthorized(fs_http_resp *resp, const char *msg)
{
    int rc = fs_http_problem(resp, 401, FS_PROBLEM_UNAUTHORIZED, NULL, "%s", msg);

    if (rc == 0 && fs_http_resp_header(resp, "WWW-Authenticate", FS_REQSIG_SCHEME) != 0) {
        fs_log(FS_LOG_WARN, "cannot add WWW-Authenticate", NULL);
    }
    return rc;
}

/* Current UTC time, ISO 8601 with seconds ("2026-11-23T10:00:00Z"), and as Unix seconds. */
static double now_iso(char out[32])
{
    struct timeval tv;
    struct tm tm;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static int parse_party(const char *s, uint32_t *out)
{
    uint32_t v = 0;

    if (s == NULL || s[0] < '1' || s[0] > '9' || strlen(s) > 4) {
        return -1;
    }
    for (size_t i = 0; s[i] != '\0'; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Base URL for keys_url: http(s)://<Host header>, when the header is sane. */
static void request_base_url(fs_http_req *req, const struct mask_app *app, char *out, size_t cap)
{
    const char *host = fs_http_req_header(req, "Host");
    size_t n = host != NULL ? strlen(host) : 0;
    int ok = n > 0 && n < 256;

    for (size_t i = 0; ok && i < n; i++) {
        char c = host[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
    }
    if (ok) {
        snprintf(out, cap, "%s://%s", app->tls ? "https" : "http", host);
    } else {
        snprintf(out, cap, "%s", app->fallback_url);
    }
}

/* ------------------------------------------------------------ status documents */

/* A copy of one masksets row (the store's rows are borrowed under its lock). */
struct row_copy {
    char *id;
    char *job_id;
    char *spec;
    char *state;
    char *created_at;
    char *deleted_at;
    double expires_unix; /* 0: never */
};

static void row_copy_clear(struct row_copy *r)
{
    free(r->id);
    free(r->job_id);
    free(r->spec);
    free(r->state);
    free(r->created_at);
    free(r->deleted_at);
    memset(r, 0, sizeof *r);
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

static int row_copy_set(struct row_copy *c, const struct mask_row *row, struct fs_err *err)
{
    c->id = dup_or_null(row->id);
    c->job_id = dup_or_null(row->job_id);
    c->spec = dup_or_null(row->spec);
    c->state = dup_or_null(row->state);
    c->created_at = dup_or_null(row->created_at);
    c->deleted_at = dup_or_null(row->deleted_at);
    c->expires_unix = row->expires_unix;
    if (c->id == NULL || c->job_id == NULL || c->spec == NULL || c->state == NULL ||
        c->created_at == NULL || (row->deleted_at != NULL && c->deleted_at == NULL)) {
        row_copy_clear(c);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    return 0;
}

static int copy_one(void *ctx, const struct mask_row *row, struct fs_err *err)
{
    return row_copy_set(ctx, row, err);
}

struct row_list {
    struct row_copy *v;
    size_t n;
    size_t cap;
};

static int copy_many(void *ctx, const struct mask_row *row, struct fs_err *err)
{
    struct row_list *l = ctx;

    if (l->n == l->cap) {
        size_t ncap = l->cap != 0 ? 2 * l->cap : 16;
        struct row_copy *nv = realloc(l->v, ncap * sizeof *nv);
        if (nv == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        l->v = nv;
        l->cap = ncap;
    }
    memset(&l->v[l->n], 0, sizeof l->v[l->n]);
    if (row_copy_set(&l->v[l->n], row, err) != 0) {
        return FS_ENOMEM;
    }
    l->n++;
    return 0;
}

/* Caps that accept every spec this server ever stored (the flags may have changed since). */
static const struct mask_caps STORED_CAPS = {1000, FS_FEDSVD_MAX_DIM, UINT64_MAX, 1};

static int stored_spec(const char *text, struct mask_spec *spec, struct fs_err *err)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    int rc;

    memset(spec, 0, sizeof *spec);
    if (j == NULL) {
        return fs_err_set(err, FS_EINTERNAL, "stored spec is not JSON: %s", je.text);
    }
    rc = mask_spec_decode(j, &STORED_CAPS, spec, err);
    json_decref(j);
    if (rc != 0) {
        return fs_err_set(err, FS_EINTERNAL, "stored spec is invalid");
    }
    return 0;
}

struct party_ctx {
    const struct mask_spec *spec;
    json_t *arr;
};

static json_t *str_or_null(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

static int party_json(void *ctx, const struct mask_party_row *r, struct fs_err *err)
{
    struct party_ctx *pc = ctx;
    const struct mask_spec *s = pc->spec;
    char fpr[FS_ED25519_FPR_LEN + 1];
    json_t *o;

    if (r->party < 1 || r->party > s->parties) {
        return fs_err_set(err, FS_EINTERNAL, "stored party %u out of range", r->party);
    }
    o = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "party", (json_int_t)r->party,
        s->partition == FS_FEDSVD_SAMPLES ? "rows" : "cols", (json_int_t)s->sizes[r->party - 1],
        "offset", (json_int_t)mask_spec_offset(s, r->party), "key_bytes",
        (json_int_t)mask_spec_key_bytes(s, r->party), "downloads", (json_int_t)r->downloads,
        "first_download_at", str_or_null(r->first_at), "last_download_at", str_or_null(r->last_at));
    if (o != NULL && s->identities != NULL) {
        fs_ed25519_fpr_format(s->identities[r->party - 1], fpr);
        if (json_object_set_new(o, "identity", json_string(fpr)) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    if (o == NULL || json_array_append_new(pc->arr, o) != 0) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    return 0;
}

/* The MaskSet document of a row. @param out new reference. */
static int status_json(struct mask_app *app, const struct row_copy *row, json_t **out,
                       struct fs_err *err)
{
    struct mask_spec spec;
    struct party_ctx pc = {NULL, NULL};
    size_t rows;
    size_t cols;
    size_t bp;
    size_t bs;
    const char *state = row->state;
    char expires[32];
    int rc;

    *out = NULL;
    rc = stored_spec(row->spec, &spec, err);
    if (rc != 0) {
        mask_spec_clear(&spec);
        return rc;
    }
    pc.spec = &spec;
    pc.arr = json_array();
    if (pc.arr == NULL) {
        mask_spec_clear(&spec);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = mask_store_parties(app->st, row->id, party_json, &pc, err);
    if (rc != 0) {
        json_decref(pc.arr);
        mask_spec_clear(&spec);
        return rc;
    }
    if (strcmp(state, "active") == 0 && !mask_store_seed_exists(app->st, row->id)) {
        state = "seed_missing";
    }
    mask_spec_shape(&spec, &rows, &cols);
    mask_spec_blocks(&spec, &bp, &bs);
    if (row->expires_unix > 0) {
        time_t t = (time_t)row->expires_unix;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(expires, sizeof expires, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    *out = json_pack("{s:s, s:s, s:s, s:s, s:[I,I], s:{s:I, s:I}, s:o, s:s, s:o, s:o}", "id",
                     row->id, "job_id", row->job_id, "state", state, "partition",
                     spec.partition == FS_FEDSVD_SAMPLES ? "samples" : "features", "shape",
                     (json_int_t)rows, (json_int_t)cols, "block_size", "partitioned",
                     (json_int_t)bp, "shared", (json_int_t)bs, "parties", pc.arr, "created_at",
                     row->created_at, "deleted_at", str_or_null(row->deleted_at), "expires_at",
                     str_or_null(row->expires_unix > 0 ? expires : NULL));
    if (*out != NULL && spec.deterministic &&
        json_object_set_new(*out, "deterministic_masks", json_true()) != 0) {
        json_decref(*out);
        *out = NULL;
    }
    mask_spec_clear(&spec);
    if (*out == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    return 0;
}

static int status_of(struct mask_app *app, const char *id, json_t **out, struct fs_err *err)
{
    struct row_copy row;
    int rc;

    memset(&row, 0, sizeof row);
    rc = mask_store_get(app->st, id, copy_one, &row, err);
    if (rc == 0) {
        rc = status_json(app, &row, out, err);
    }
    row_copy_clear(&row);
    return rc;
}

/* ------------------------------------------------------------ public endpoints */

static int h_healthz(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)req;
    (void)ctx;
    return fs_http_reply_json(resp, 200, fs_svc_health_doc(), NULL);
}

static int h_readyz(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct mask_app *app = ctx;

    (void)req;
    if (!atomic_load(&app->ready) || !mask_store_ping(app->st)) {
        return fs_http_problem(resp, 503, FS_PROBLEM_UNAVAILABLE, NULL,
                               "not ready: starting, stopping, or the database is not open");
    }
    /* disk full or read-only: still ready (reads work, writes answer 503) */
    if (app->test_seed_len > 0) { /* --insecure-test-mask-seed: say so wherever one looks */
        return fs_http_reply_json(resp, 200,
                                  json_pack("{s:s, s:s, s:b}", "status", "ready", "storage",
                                            fs_storage_state(), "deterministic_masks", 1),
                                  NULL);
    }
    return fs_http_reply_json(
        resp, 200, json_pack("{s:s, s:s}", "status", "ready", "storage", fs_storage_state()), NULL);
}

static int h_openapi(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct mask_app *app = ctx;
    struct fs_err err = {0};

    (void)req;
    if (app->openapi_path[0] == '\0' ||
        fs_http_resp_file(resp, 200, "application/yaml", app->openapi_path, &err) != 0) {
        return fs_http_problem(resp, 404, FS_PROBLEM_NOT_FOUND, NULL,
                               "this server was started without openapi.yaml (see --openapi)");
    }
    return 0;
}

/* ------------------------------------------------------------ metrics */

void mask_http_on_request(const struct fs_http_log_entry *e, void *hook_ctx)
{
    const struct mask_app *app = hook_ctx;

    if (app->metrics != NULL) {
        fs_http_metrics_record(app->metrics->http, e);
    }
    mask_teststop_sent(e->req); /* FEDSVD_TEST_STOP_AT_PHASE: a testing aid, off by default */
}

static int h_metrics(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct mask_app *app = ctx;
    struct mask_metrics *m = app->metrics;
    struct mask_keygen_stats ks;
    struct fs_err err = {0};
    uint64_t active = 0;
    uint64_t deleted = 0;
    struct fs_text b;

    (void)req;
    fs_text_init(&b, METRICS_TEXT_MAX);
    if (mask_store_counts(app->st, &active, &deleted, &err) != 0) {
        fs_log_pack(FS_LOG_WARN, "metrics: cannot count mask sets", "{s:s}", "error", err.msg);
    }
    mask_keygen_stats(app->kg, &ks);
    fs_text_printf(
        &b,
        "# HELP fedsvd_masksets Mask sets known to the server, by state.\n"
        "# TYPE fedsvd_masksets gauge\n"
        "fedsvd_masksets{state=\"active\"} %llu\nfedsvd_masksets{state=\"deleted\"} %llu\n",
        (unsigned long long)active, (unsigned long long)deleted);
    fs_text_printf(
        &b,
        "# HELP fedsvd_mask_keygen_running Key generations running now.\n"
        "# TYPE fedsvd_mask_keygen_running gauge\nfedsvd_mask_keygen_running %llu\n"
        "# HELP fedsvd_mask_keygen_waiting Key downloads waiting for a generation slot.\n"
        "# TYPE fedsvd_mask_keygen_waiting gauge\nfedsvd_mask_keygen_waiting %llu\n",
        (unsigned long long)ks.running, (unsigned long long)ks.waiting);
    fs_text_printf(
        &b,
        "# HELP fedsvd_mask_keygen_seconds Time to generate one party's key files.\n"
        "# TYPE fedsvd_mask_keygen_seconds summary\n"
        "fedsvd_mask_keygen_seconds_sum %.6f\nfedsvd_mask_keygen_seconds_count %llu\n"
        "# HELP fedsvd_mask_keygen_seconds_max Longest key generation since start.\n"
        "# TYPE fedsvd_mask_keygen_seconds_max gauge\nfedsvd_mask_keygen_seconds_max %.6f\n"
        "# HELP fedsvd_mask_keygen_failures_total Key generations that failed.\n"
        "# TYPE fedsvd_mask_keygen_failures_total counter\n"
        "fedsvd_mask_keygen_failures_total %llu\n",
        ks.seconds_sum, (unsigned long long)ks.done, ks.seconds_max, (unsigned long long)ks.failed);
    fs_text_printf(
        &b,
        "# HELP fedsvd_mask_keys_cache_entries Parties whose generated keys are cached.\n"
        "# TYPE fedsvd_mask_keys_cache_entries gauge\nfedsvd_mask_keys_cache_entries %llu\n"
        "# HELP fedsvd_mask_keys_cache_bytes Bytes of cached key files.\n"
        "# TYPE fedsvd_mask_keys_cache_bytes gauge\nfedsvd_mask_keys_cache_bytes %llu\n"
        "# HELP fedsvd_mask_keys_cache_hits_total Key requests served without generating.\n"
        "# TYPE fedsvd_mask_keys_cache_hits_total counter\n"
        "fedsvd_mask_keys_cache_hits_total %llu\n",
        (unsigned long long)ks.cache_entries, (unsigned long long)ks.cache_bytes,
        (unsigned long long)ks.cache_hits);
    fs_text_printf(
        &b,
        "# HELP fedsvd_mask_block_cache_total Blocks of A that slabs needed, found or not "
        "in the block cache.\n"
        "# TYPE fedsvd_mask_block_cache_total counter\n"
        "fedsvd_mask_block_cache_total{result=\"hit\"} %llu\n"
        "fedsvd_mask_block_cache_total{result=\"miss\"} %llu\n"
        "# HELP fedsvd_mask_block_cache_bytes Bytes of blocks kept for neighbouring slabs.\n"
        "# TYPE fedsvd_mask_block_cache_bytes gauge\nfedsvd_mask_block_cache_bytes %llu\n",
        (unsigned long long)ks.block_hits, (unsigned long long)ks.block_misses,
        (unsigned long long)ks.block_bytes);
    pthread_mutex_lock(&m->mu);
    fs_text_printf(
        &b,
        "# HELP fedsvd_mask_keys_served_total Keys manifests served.\n"
        "# TYPE fedsvd_mask_keys_served_total counter\nfedsvd_mask_keys_served_total %llu\n"
        "# HELP fedsvd_mask_key_files_served_total Key .npy files served.\n"
        "# TYPE fedsvd_mask_key_files_served_total counter\n"
        "fedsvd_mask_key_files_served_total %llu\n"
        "# HELP fedsvd_mask_keys_bytes_total Bytes of key .npy files served.\n"
        "# TYPE fedsvd_mask_keys_bytes_total counter\nfedsvd_mask_keys_bytes_total %llu\n",
        (unsigned long long)m->keys_served, (unsigned long long)m->files_served,
        (unsigned long long)m->keys_bytes);
    pthread_mutex_unlock(&m->mu);
    fs_http_metrics_write(m->http, app->srv, &b);
    return fs_http_metrics_respond(resp, &b);
}

/* ------------------------------------------------------------ mask sets (admin) */

/* Insert the mask set: seed file first, then the row (see store.h). */
static int persist(struct mask_app *app, const char *id, const struct mask_spec *spec,
                   const uint8_t end_digest[FS_AUTH_DIGEST_LEN], struct fs_err *err)
{
    uint8_t seed[MASK_SEED_LEN];
    char created[32];
    double unix_s = now_iso(created);
    char *text = NULL;
    json_t *canon = mask_spec_encode(spec);
    struct mask_new m;
    int rc;

    if (canon == NULL || (text = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS)) == NULL) {
        json_decref(canon);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    json_decref(canon);
    /* the master seed: the OS CSPRNG, or (tests only) derived from the test seed */
    rc = spec->deterministic
             ? mask_test_seed_derive(app->test_seed, app->test_seed_len, spec, seed, err)
             : fs_rand_bytes(seed, sizeof seed, err);
    if (rc == 0) {
        rc = mask_store_seed_write(app->st, id, seed, err);
    }
    OPENSSL_cleanse(seed, sizeof seed);
    if (rc == 0) {
        memset(&m, 0, sizeof m);
        m.id = id;
        m.job_id = spec->job_id;
        m.spec_json = text;
        m.created_at = created;
        m.created_unix = unix_s;
        m.expires_unix = unix_s + (double)spec->ttl_s;
        m.end_digest = end_digest;
        m.identities = (const uint8_t(*)[32])spec->identities;
        m.parties = spec->parties;
        rc = mask_store_insert(app->st, &m, err);
        if (rc != 0) {
            struct fs_err e2 = {0};
            if (mask_store_seed_destroy(app->st, id, &e2) != 0) {
                fs_log_pack(FS_LOG_ERROR, "cannot destroy the seed of a failed create",
                            "{s:s, s:s}", "maskset", id, "error", e2.msg);
            }
        }
    }
    free(text);
    return rc;
}

/* The parties of the create response: number, pinned identity, keys URL (no credential). */
static json_t *party_urls(const char *base, const char *id, const struct mask_spec *spec)
{
    json_t *arr = json_array();

    for (uint32_t i = 0; arr != NULL && i < spec->parties; i++) {
        char url[MASK_URL_MAX + 128];
        char fpr[FS_ED25519_FPR_LEN + 1];
        snprintf(url, sizeof url, "%s/v1/masksets/%s/parties/%u/keys", base, id, i + 1);
        fs_ed25519_fpr_format(spec->identities[i], fpr);
        if (json_array_append_new(arr, json_pack("{s:I, s:s, s:s}", "party", (json_int_t)(i + 1),
                                                 "identity", fpr, "keys_url", url)) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static int h_create(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct mask_app *app = ctx;
    const struct mask_caps caps = {app->cfg->max_parties, app->cfg->max_dim,
                                   app->cfg->max_key_bytes, 0};
    struct mask_spec spec;
    struct fs_err err = {0};
    char id[MASK_ID_LEN + 1];
    char base[MASK_URL_MAX + 1];
    char end_token[FS_AUTH_TOKEN_GEN_LEN + 1] = "";
    uint8_t end_digest[FS_AUTH_DIGEST_LEN];
    json_t *body = NULL;
    json_t *status = NULL;
    json_t *parties = NULL;
    size_t rows;
    size_t cols;
    int rc;

    memset(&spec, 0, sizeof spec);
    if (fs_http_body_json(req, resp, &body) != 0) {
        return 0;
    }
    rc = mask_spec_decode(body, &caps, &spec, &err);
    json_decref(body);
    if (rc != 0) {
        rc = fs_http_problem_err(resp, &err);
        goto out;
    }
    spec.deterministic = app->test_seed_len > 0;
    if (mask_id_generate(id, &err) != 0 || fs_auth_token_generate(end_token, &err) != 0 ||
        fs_auth_digest(end_token, strlen(end_token), end_digest, &err) != 0 ||
        persist(app, id, &spec, end_digest, &err) != 0 || status_of(app, id, &status, &err) != 0) {
        rc = fs_http_problem_err(resp, &err);
        goto out;
    }
    if (spec.server_url[0] != '\0') {
        snprintf(base, sizeof base, "%s", spec.server_url);
    } else {
        request_base_url(req, app, base, sizeof base);
    }
    parties = party_urls(base, id, &spec);
    if (parties == NULL) {
        rc = fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "out of memory");
        goto out;
    }
    mask_spec_shape(&spec, &rows, &cols);
    fs_log_pack(FS_LOG_INFO, "mask set created", "{s:s, s:s, s:s, s:i, s:I, s:I, s:I}", "maskset",
                id, "job", spec.job_id, "partition",
                spec.partition == FS_FEDSVD_SAMPLES ? "samples" : "features", "parties",
                (int)spec.parties, "rows", (json_int_t)rows, "cols", (json_int_t)cols, "ttl_s",
                (json_int_t)spec.ttl_s);
    if (spec.deterministic) {
        fs_log_pack(FS_LOG_WARN, "INSECURE: deterministic test masks (--insecure-test-mask-seed)",
                    "{s:s}", "maskset", id);
    }
    /* end_token: deletes this mask set (POST .../end) and nothing else; its
     * job's aggregation server keeps it and calls that when the job ends. */
    rc = fs_http_reply_json(
        resp, 201,
        json_pack("{s:o, s:o, s:s}", "maskset", status, "parties", parties, "end_token", end_token),
        NULL);
    status = NULL;
    parties = NULL;
    if (rc == 0) {
        char loc[64];
        snprintf(loc, sizeof loc, "/v1/masksets/%s", id);
        if (fs_http_resp_header(resp, "Location", loc) != 0) {
            fs_log(FS_LOG_WARN, "cannot add Location", NULL);
        }
        if (fs_http_resp_header(resp, "Cache-Control", "no-store") != 0) {
            fs_log(FS_LOG_WARN, "cannot add Cache-Control", NULL);
        }
    }
out:
    json_decref(status);
    json_decref(parties);
    OPENSSL_cleanse(end_token, sizeof end_token);
    OPENSSL_cleanse(end_digest, sizeof end_digest);
    mask_spec_clear(&spec);
    return rc;
}

static int h_list(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct mask_app *app = ctx;
    const char *job_id = fs_http_req_query(req, "job_id");
    const char *state = fs_http_req_query(req, "state");
    struct row_list l = {NULL, 0, 0};
    struct fs_err err = {0};
    json_t *arr = NULL;
    int rc;

    if (state != NULL && strcmp(state, "active") != 0 && strcmp(state, "deleted") != 0) {
        return fs_http_fail(resp, FS_EINVAL, "state must be active or deleted");
    }
    if (job_id != NULL && (job_id[0] == '\0' || strlen(job_id) > MASK_JOB_ID_MAX)) {
        return fs_http_fail(resp, FS_EINVAL, "job_id must be 1..64 characters");
    }
    rc = mask_store_list(app->st, job_id, state, copy_many, &l, &err);
    arr = json_array();
    if (rc == 0 && arr == NULL) {
        rc = fs_err_set(&err, FS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        json_t *s = NULL;
        rc = status_json(app, &l.v[i], &s, &err);
        if (rc == 0 && json_array_append_new(arr, s) != 0) {
            rc = fs_err_set(&err, FS_ENOMEM, "out of memory");
        }
    }
    for (size_t i = 0; i < l.n; i++) {
        row_copy_clear(&l.v[i]);
    }
    free(l.v);
    if (rc != 0) {
        json_decref(arr);
        return fs_http_problem_err(resp, &err);
    }
    return fs_http_reply_json(resp, 200, json_pack("{s:o}", "masksets", arr), NULL);
}

/* The {maskset} parameter for the admin: malformed ids are simply not found. */
static const char *admin_id(fs_http_req *req, fs_http_resp *resp)
{
    const char *id = fs_http_req_param(req, "maskset");

    if (!mask_id_valid(id)) {
        (void)fs_http_fail(resp, FS_ENOTFOUND,
                           "no such mask set (ids look like m-<32 hex digits>)");
        return NULL;
    }
    return id;
}

static int h_get(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct mask_app *app = ctx;
    struct fs_err err = {0};
    json_t *s = NULL;
    const char *id = admin_id(req, resp);

    if (id == NULL) {
        return 0;
    }
    if (status_of(app, id, &s, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return fs_http_reply_json(resp, 200, s, NULL);
}

/* Delete mask set id for `why` ("deleted", "job ended", "expired"): the
 * row first, then its generated keys and its seed (also when it was deleted
 * already: a crash may have left the seed behind). */
static int delete_set(struct mask_app *app, const char *id, const char *why, struct fs_err *err)
{
    char at[32];
    int changed = 0;
    int rc;

    (void)now_iso(at);
    rc = mask_store_mark_deleted(app->st, id, at, &changed, err);
    if (rc != 0) {
        return rc;
    }
    mask_keygen_drop(app->kg, id); /* the generated key files too */
    rc = mask_store_seed_destroy(app->st, id, err);
    if (rc == 0 && changed) {
        fs_log_pack(FS_LOG_INFO, "mask set deleted", "{s:s, s:s}", "maskset", id, "reason", why);
    }
    return rc;
}

static int h_delete(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct mask_app *app = ctx;
    struct fs_err err = {0};
    json_t *s = NULL;
    const char *id = admin_id(req, resp);

    if (id == NULL) {
        return 0;
    }
    if (delete_set(app, id, "deleted by the admin", &err) != 0 ||
        status_of(app, id, &s, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return fs_http_reply_json(resp, 200, s, NULL);
}

/* POST /v1/masksets/{maskset}/end with the mask set's end token (its job
 * ended): delete it. The end token can do nothing else. */
static int h_end(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct mask_app *app = ctx;
    struct fs_err err = {0};
    const char *id = fs_http_req_param(req, "maskset");
    const char *tok = NULL;
    size_t len = 0;
    int match = 0;
    json_t *s = NULL;
    int rc;

    if (fs_auth_parse_bearer(fs_http_req_header(req, "Authorization"), &tok, &len, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    if (!mask_id_valid(id)) {
        return fs_http_fail(resp, FS_ENOTFOUND,
                            "no such mask set (ids look like m-<32 hex digits>)");
    }
    rc = mask_store_match_end(app->st, id, tok, len, &match, &err);
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    if (!match) {
        return fs_http_fail(
            resp, FS_EAUTH,
            "not this mask set's end token (the one its create response returned; the "
            "admin deletes with DELETE /v1/masksets/{maskset})");
    }
    if (delete_set(app, id, "its job ended", &err) != 0 || status_of(app, id, &s, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return fs_http_reply_json(resp, 200, s, NULL);
}

void mask_http_expire_due(struct mask_app *app)
{
    char ids[EXPIRE_BATCH][MASK_ID_LEN + 1];
    struct fs_err err = {0};
    struct timeval tv;
    size_t n = 0;

    gettimeofday(&tv, NULL);
    if (mask_store_expired(app->st, (double)tv.tv_sec, ids, EXPIRE_BATCH, &n, &err) != 0) {
        fs_log_pack(FS_LOG_WARN, "cannot list expired mask sets", "{s:s}", "error", err.msg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (delete_set(app, ids[i], "its ttl_s expired", &err) != 0) {
            fs_log_pack(FS_LOG_ERROR, "cannot delete an expired mask set", "{s:s, s:s}", "maskset",
                        ids[i], "error", err.msg);
        }
    }
}

/* ------------------------------------------------------------ keys (party) */

/* Who may fetch {party}'s keys of {maskset}: only a request signed by that
 * party's pinned identity key (lib/crypto/reqsig.h). No bearer token of any
 * kind (the admin's, an end token, anything a job creator holds) is accepted
 * here. 0 when the request is authentic and *party is the path's party;
 * else the problem response is set. */
static int keys_auth(fs_http_req *req, fs_http_resp *resp, const char *id,
                     const struct mask_spec *spec, uint32_t *party)
{
    struct fs_err err = {0};
    struct fs_reqsig rs;
    const char *hdr = fs_http_req_header(req, "Authorization");
    uint32_t want = 0;

    if (hdr != NULL && !fs_reqsig_is_scheme(hdr) && strncasecmp(hdr, "Bearer ", 7) == 0) {
        return fs_http_problem(resp, 403, FS_PROBLEM_FORBIDDEN, NULL,
                               "bearer tokens (the admin token included) cannot download keys: "
                               "a party's keys go only to a request signed by its pinned "
                               "identity key (Authorization: %s)",
                               FS_REQSIG_SCHEME) ||
               1;
    }
    if (fs_reqsig_parse(hdr, &rs, &err) != 0) {
        return sig_unauthorized(resp, err.msg) || 1;
    }
    if (spec == NULL) {
        return sig_unauthorized(resp, "the signature is not valid for this mask set") || 1;
    }
    if (spec->identities == NULL) {
        return fs_http_problem(resp, 403, FS_PROBLEM_FORBIDDEN, NULL,
                               "mask set %s has no pinned identities (an older server created "
                               "it): delete it and create a new one",
                               id) ||
               1;
    }
    if (parse_party(fs_http_req_param(req, "party"), &want) != 0 || want > spec->parties) {
        return fs_http_problem(resp, 403, FS_PROBLEM_FORBIDDEN, NULL,
                               "mask set %s has parties 1..%u", id, spec->parties) ||
               1;
    }
    if (rs.party != want) {
        /* Say so only when the signature is that other party's, else it is just invalid. */
        if (rs.party <= spec->parties &&
            fs_reqsig_verify(&rs, spec->identities[rs.party - 1], fs_http_req_method(req),
                             fs_http_req_path(req), id, (int64_t)time(NULL), &err) == 0) {
            return fs_http_problem(resp, 403, FS_PROBLEM_FORBIDDEN, NULL,
                                   "signed by party %u's identity: it can fetch only "
                                   "/v1/masksets/%s/parties/%u/keys",
                                   rs.party, id, rs.party) ||
                   1;
        }
        return sig_unauthorized(resp, "the signature is not valid for this mask set and party") ||
               1;
    }
    if (fs_reqsig_verify(&rs, spec->identities[want - 1], fs_http_req_method(req),
                         fs_http_req_path(req), id, (int64_t)time(NULL), &err) != 0) {
        if (err.code != FS_EAUTH) {
            return fs_http_problem_err(resp, &err) || 1;
        }
        return sig_unauthorized(resp, err.msg) || 1;
    }
    *party = want;
    return 0;
}

/* Send blob b (owned by the response from here on) with the keys' headers. */
static int send_blob(fs_http_resp *resp, const char *content_type, struct mask_blob *b,
                     const char *job_id, const char *keys_id)
{
    int rc;

    if (b->fd >= 0) {
        rc = fs_http_resp_fd(resp, 200, content_type, b->fd, b->len);
        b->fd = -1; /* owned by the response now, also on failure */
    } else {
        rc = fs_http_resp_bytes(resp, 200, content_type, b->buf, (size_t)b->len);
    }
    if (rc != 0) {
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "cannot send the keys");
    }
    if (fs_http_resp_header(resp, "Cache-Control", "no-store") != 0 ||
        fs_http_resp_header(resp, JOB_ID_HEADER, job_id) != 0 ||
        fs_http_resp_header(resp, KEYS_ID_HEADER, keys_id) != 0) {
        fs_log(FS_LOG_WARN, "cannot add a header to the keys response", NULL);
    }
    return 0;
}

/* 1 when mask set id is (still) active, 0 when not, -1 when that cannot be read. */
static int still_active(struct mask_app *app, const char *id)
{
    struct row_copy row;
    struct fs_err err = {0};
    int active;

    memset(&row, 0, sizeof row);
    if (mask_store_get(app->st, id, copy_one, &row, &err) != 0) {
        return -1;
    }
    active = strcmp(row.state, "active") == 0;
    row_copy_clear(&row);
    return active;
}

static int gone(fs_http_resp *resp, const char *id)
{
    return fs_http_problem(resp, 410, FS_PROBLEM_GONE, NULL,
                           "mask set %s was deleted: its masks are gone for good", id);
}

/* A piece index: decimal digits without leading zeros. */
static int parse_piece(const char *s, size_t *out)
{
    size_t v = 0;

    if (s == NULL || s[0] == '\0' || strlen(s) > 9 || (s[0] == '0' && s[1] != '\0')) {
        return -1;
    }
    for (size_t i = 0; s[i] != '\0'; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        v = v * 10 + (size_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* What a keys request works on. */
struct keys_req {
    const char *id;
    uint32_t party;
    struct row_copy row;
    struct mask_spec spec;
    mask_keyset *ks;
    int generated;
};

static void keys_req_clear(struct mask_app *app, struct keys_req *k)
{
    mask_keyset_put(app->kg, k->ks);
    row_copy_clear(&k->row);
    mask_spec_clear(&k->spec);
}

/* Authenticate, then load the spec (and, unless piece is out of range, the
 * party's keys: cached or generated now). 0 when k->ks is set, else the
 * problem response is set. piece: SIZE_MAX for the manifest. */
static int keys_load(struct mask_app *app, fs_http_req *req, fs_http_resp *resp, size_t piece,
                     struct keys_req *k)
{
    struct fs_err err = {0};
    uint8_t seed[MASK_SEED_LEN];
    int rc;

    memset(k, 0, sizeof *k);
    k->id = fs_http_req_param(req, "maskset");
    rc = mask_id_valid(k->id) ? mask_store_get(app->st, k->id, copy_one, &k->row, &err)
                              : FS_ENOTFOUND;
    if (rc == FS_ENOTFOUND) {
        (void)keys_auth(req, resp, k->id, NULL, &k->party); /* 403 for bearers, else 401 */
        return -1;
    }
    if (rc == 0) {
        rc = stored_spec(k->row.spec, &k->spec, &err);
    }
    if (rc != 0) {
        (void)fs_http_problem_err(resp, &err);
        return -1;
    }
    if (keys_auth(req, resp, k->id, &k->spec, &k->party) != 0) {
        return -1;
    }
    if (strcmp(k->row.state, "active") != 0) {
        (void)gone(resp, k->id);
        return -1;
    }
    if (k->row.expires_unix > 0 && (double)time(NULL) >= k->row.expires_unix) {
        if (delete_set(app, k->id, "its ttl_s expired", &err) != 0) {
            fs_log_pack(FS_LOG_ERROR, "cannot delete an expired mask set", "{s:s, s:s}", "maskset",
                        k->id, "error", err.msg);
        }
        (void)gone(resp, k->id);
        return -1;
    }
    if (piece != SIZE_MAX && piece >= mask_spec_pieces(&k->spec, k->party)) {
        (void)fs_http_fail(resp, FS_ENOTFOUND,
                           "no such piece: see the keys manifest for the pieces");
        return -1;
    }
    if (rc == 0) {
        rc = mask_store_seed_read(app->st, k->id, seed, &err);
        if (rc == FS_ENOTFOUND && !mask_store_seed_exists(app->st, k->id) &&
            still_active(app, k->id) == 0) {
            (void)gone(resp, k->id);
            return -1;
        }
        if (rc == FS_ENOTFOUND) {
            fs_log_pack(FS_LOG_ERROR, "seed file missing", "{s:s}", "maskset", k->id);
            rc = fs_err_set(&err, FS_ECONFLICT,
                            "the seed of mask set %s is missing on the server; the operator "
                            "must create a new mask set",
                            k->id);
        }
    }
    if (rc == 0) {
        rc = mask_keygen_get(app->kg, k->id, &k->spec, seed, k->party, &k->ks, &k->generated, &err);
        OPENSSL_cleanse(seed, sizeof seed);
    }
    if (rc == 0 && still_active(app, k->id) != 1) {
        /* Deleted while we generated: do not hand out what the operator just revoked. */
        mask_keygen_drop(app->kg, k->id);
        (void)gone(resp, k->id);
        return -1;
    }
    if (rc != 0) {
        (void)fs_http_problem_err(resp, &err);
        return -1;
    }
    return 0;
}

static void count_served(struct mask_app *app, int manifest, uint64_t bytes)
{
    pthread_mutex_lock(&app->metrics->mu);
    if (manifest) {
        app->metrics->keys_served++;
    } else {
        app->metrics->files_served++;
        app->metrics->keys_bytes += bytes;
    }
    pthread_mutex_unlock(&app->metrics->mu);
}

static int h_keys(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct mask_app *app = ctx;
    struct keys_req k;
    struct mask_blob b = {-1, NULL, 0};
    struct fs_err err = {0};
    char at[32];
    int rc;

    mask_teststop_gate(); /* FEDSVD_TEST_STOP_AT_PHASE: may not return */
    if (keys_load(app, req, resp, SIZE_MAX, &k) != 0) {
        keys_req_clear(app, &k);
        return 0;
    }
    rc = mask_keyset_manifest(k.ks, &b, &err);
    if (rc != 0) {
        rc = fs_http_problem_err(resp, &err);
        goto out;
    }
    (void)now_iso(at);
    /* the keys are served all the same; a full disk is logged once per episode */
    if (mask_store_record_download(app->st, k.id, k.party, at, &err) != 0 &&
        err.code != FS_ESTORAGE) {
        fs_log_pack(FS_LOG_WARN, "cannot record a download", "{s:s}", "error", err.msg);
    }
    fs_log_pack(FS_LOG_INFO, "keys served", "{s:s, s:i, s:I, s:I, s:b, s:f}", "maskset", k.id,
                "party", (int)k.party, "pieces", (json_int_t)mask_keyset_npieces(k.ks), "bytes",
                (json_int_t)mask_keyset_bytes(k.ks), "generated", k.generated, "keygen_s",
                mask_keyset_seconds(k.ks));
    rc = send_blob(resp, "application/json", &b, k.row.job_id, mask_keyset_id(k.ks));
    if (rc == 0) {
        count_served(app, 1, 0);
    }
out:
    mask_blob_release(&b);
    keys_req_clear(app, &k);
    return rc;
}

static int keyfile(fs_http_req *req, fs_http_resp *resp, struct mask_app *app,
                   enum fs_fedsvd_keyfile which)
{
    struct keys_req k;
    struct mask_blob b = {-1, NULL, 0};
    struct fs_err err = {0};
    const char *want = fs_http_req_query(req, "keys_id");
    size_t piece = 0;
    int rc;

    memset(&k, 0, sizeof k);
    mask_teststop_gate(); /* FEDSVD_TEST_STOP_AT_PHASE: may not return */
    if (parse_piece(fs_http_req_param(req, "piece"), &piece) != 0) {
        piece = SIZE_MAX - 1; /* authenticate first, then 404 */
    }
    if (keys_load(app, req, resp, piece, &k) != 0) {
        keys_req_clear(app, &k);
        return 0;
    }
    if (want != NULL && strcmp(want, mask_keyset_id(k.ks)) != 0) {
        rc = fs_http_problem(resp, 409, FS_PROBLEM_CONFLICT, NULL,
                             "these keys are not the ones of keys_id %.64s (they were generated "
                             "again); fetch the manifest again",
                             want);
        goto out;
    }
    rc = mask_keyset_file(app->kg, k.ks, piece, which, &b, &err);
    if (rc != 0) {
        rc = fs_http_problem_err(resp, &err);
        goto out;
    }
    fs_log_pack(FS_LOG_DEBUG, "key file served", "{s:s, s:i, s:I, s:s, s:I, s:b}", "maskset", k.id,
                "party", (int)k.party, "piece", (json_int_t)piece, "file",
                which == FS_FEDSVD_KEYFILE_ROWS ? "rows.npy" : "block.npy", "bytes",
                (json_int_t)b.len, "generated", k.generated);
    {
        uint64_t len = b.len;
        rc = send_blob(resp, "application/x-npy", &b, k.row.job_id, mask_keyset_id(k.ks));
        if (rc == 0) {
            count_served(app, 0, len);
            mask_teststop_served(req, k.id, k.row.job_id, k.party,
                                 mask_keyset_all_served(app->kg, k.ks));
        }
    }
out:
    mask_blob_release(&b);
    keys_req_clear(app, &k);
    return rc;
}

static int h_keyfile_rows(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    return keyfile(req, resp, ctx, FS_FEDSVD_KEYFILE_ROWS);
}

static int h_keyfile_block(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    return keyfile(req, resp, ctx, FS_FEDSVD_KEYFILE_BLOCK);
}

/* ------------------------------------------------------------ registration */

struct route_def {
    const char *method;
    const char *pattern;
    uint64_t max_body;
    int admin;
    fs_http_handler_fn handler;
};

static const struct route_def ROUTES[] = {
    {"GET", "/healthz", 0, 0, h_healthz},
    {"GET", "/readyz", 0, 0, h_readyz},
    {"GET", "/metrics", 0, 0, h_metrics},
    {"GET", "/openapi.yaml", 0, 0, h_openapi},
    {"POST", "/v1/masksets", SPEC_BODY, 1, h_create},
    {"GET", "/v1/masksets", 0, 1, h_list},
    {"GET", "/v1/masksets/{maskset}", 0, 1, h_get},
    {"DELETE", "/v1/masksets/{maskset}", 0, 1, h_delete},
    {"POST", "/v1/masksets/{maskset}/end", 0, 0, h_end},
    {"GET", "/v1/masksets/{maskset}/parties/{party}/keys", 0, 0, h_keys},
    {"GET", "/v1/masksets/{maskset}/parties/{party}/keys/{piece}/rows.npy", 0, 0, h_keyfile_rows},
    {"GET", "/v1/masksets/{maskset}/parties/{party}/keys/{piece}/block.npy", 0, 0, h_keyfile_block},
};

#define NROUTES (sizeof ROUTES / sizeof ROUTES[0])

int mask_http_routes(struct mask_app *app, struct fs_err *err)
{
    for (size_t i = 0; i < NROUTES; i++) {
        const struct route_def *d = &ROUTES[i];
        struct fs_http_route r;
        int rc;

        memset(&r, 0, sizeof r);
        r.method = d->method;
        r.pattern = d->pattern;
        r.handler = d->handler;
        r.ctx = app;
        r.max_body = d->max_body;
        r.auth = d->admin ? app->admin : NULL; /* 401 before any body byte is read */
        rc = fs_http_server_route(app->srv, &r, err);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

int mask_http_init(struct mask_app *app, struct fs_err *err)
{
    app->metrics = calloc(1, sizeof *app->metrics);
    if (app->metrics == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    app->metrics->http = fs_http_metrics_new(METRIC_SERIES);
    if (app->metrics->http == NULL) {
        free(app->metrics);
        app->metrics = NULL;
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&app->metrics->mu, NULL);
    return 0;
}

void mask_http_free(struct mask_app *app)
{
    if (app->metrics != NULL) {
        fs_http_metrics_free(app->metrics->http);
        pthread_mutex_destroy(&app->metrics->mu);
        free(app->metrics);
        app->metrics = NULL;
    }
}
