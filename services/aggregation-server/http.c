/* Routes and handlers: see http.h and docs/wire-secure-sum.md. */
#include "http.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../api/jobs.h"
#include "../../api/jobwait.h"
#include "../../api/phase.h"
#include "../../api/wire.h"
#include "crypto/ct.h"
#include "dashboard.h"
#include "io/matio.h"
#include "net/log.h"
#include "net/reply.h"
#include "net/storage.h"
#include "net/svc.h"
#include "powerjob.h"
#include "proto/secagg.h"
#include "shardgc.h"
#include "shardwin.h"

#define SMALL_BODY       (16 * 1024) /* adverts, signatures */
#define SPEC_BODY        (64 * 1024) /* job specs */
#define NPY_HEADER_MAX   128         /* what fs_npy_format_header writes for a 1-D <u8 */
#define MAX_CHUNK_WORDS  (1u << 22)
#define METRIC_SERIES    512
#define METRICS_TEXT_MAX ((size_t)4 << 20)
#define PLAIN_HEADER_MAX 1024 /* .npy header of a plain fedpower upload */

enum auth_kind { A_NONE = 0, A_ADMIN, A_PARTY, A_ANY, A_PEER };

struct route_ctx {
    struct agg_app *app; /* first: agg_http_app */
    enum auth_kind auth;
    int has_job;
};

/* Per-request state, attached in on_begin. */
struct rq {
    struct agg_app *app;
    agg_job *job;
    agg_shardwin *win; /* shard chunk uploads: the window (a reference) instead of a job */
    uint32_t party;    /* 0: admin */
    uint64_t in_bytes;
    uint64_t out_bytes;
    /* chunk uploads: the whole body in buf (header, then 8m bytes) */
    uint64_t reserved; /* bytes of app->chunk_mem this request holds */
    int pooled;        /* buf comes from (and goes back to) the chunk buffer pool */
    uint32_t r;
    enum fs_job_phase wait_phase; /* GET /v1/jobs/{job}?wait_ms=: the phase waited out (with r) */
    uint64_t idx;
    size_t m;
    uint8_t hdr[NPY_HEADER_MAX];
    size_t hdr_n;
    int parsed;
    size_t header_len;
    uint64_t expected;
    uint64_t received;
    /* a streamed chunk (agg_job_stream_*): folded piece by piece, no buf */
    int streaming;
    struct agg_upload up;
    uint8_t carry[8]; /* the start of a word split between two pieces */
    size_t ncarry;
    /* sized bodies (noise-response, plain.npy): buffered up to an exact cap */
    uint8_t *buf;
    size_t buf_n;
    size_t buf_cap;
    size_t prows, pcols; /* plain.npy: the expected shape */
};

/* ------------------------------------------------------------ helpers */

/* Chunk bodies are all one size in practice (header + 8 x chunk words):
 * finished requests park their page-aligned buffers here for the next ones,
 * so a fresh 512 KiB buffer is not faulted in (and zeroed by the kernel) for
 * every chunk. At most POOL_MAX buffers of one size are kept. */
#define POOL_MAX 8
static struct {
    pthread_mutex_t mu;
    size_t size;
    size_t n;
    uint8_t *bufs[POOL_MAX];
} g_pool = {PTHREAD_MUTEX_INITIALIZER, 0, 0, {0}};

static uint8_t *pool_get(size_t size)
{
    uint8_t *b = NULL;

    pthread_mutex_lock(&g_pool.mu);
    if (g_pool.n > 0 && g_pool.size == size) {
        b = g_pool.bufs[--g_pool.n];
    }
    pthread_mutex_unlock(&g_pool.mu);
    if (b == NULL && posix_memalign((void **)&b, 4096, size) != 0) {
        b = NULL;
    }
    return b;
}

static void pool_put(uint8_t *b, size_t size)
{
    if (b == NULL) {
        return;
    }
    pthread_mutex_lock(&g_pool.mu);
    if (g_pool.n == 0) {
        g_pool.size = size;
    }
    if (g_pool.size == size && g_pool.n < POOL_MAX) {
        g_pool.bufs[g_pool.n++] = b;
        b = NULL;
    }
    pthread_mutex_unlock(&g_pool.mu);
    free(b);
}

static void rq_free(void *p)
{
    struct rq *q = p;

    if (q == NULL) {
        return;
    }
    if (q->reserved > 0) {
        atomic_fetch_sub(&q->app->chunk_mem, q->reserved);
    }
    if (q->streaming && (q->job != NULL || q->win != NULL)) {
        /* broke off (or was refused) before it completed: take it back */
        struct fs_err err = {0};
        if ((q->win != NULL ? agg_shardwin_stream_end(q->win, &q->up, 0, &err)
                            : agg_job_stream_end(q->job, &q->up, 0, &err)) != 0) {
            fs_log(FS_LOG_WARN, "cannot take back a broken-off chunk", NULL);
        }
    }
    agg_shardwin_unref(q->win);
    if (q->job != NULL) {
        agg_job_count_bytes(q->job, q->in_bytes, q->out_bytes);
    }
    if (q->pooled) {
        pool_put(q->buf, q->buf_cap);
    } else {
        free(q->buf);
    }
    free(q);
}

/* JSON reply, counting its bytes for the job. Steals body. */
static int reply_json(fs_http_resp *resp, struct rq *q, unsigned status, json_t *body)
{
    return fs_http_reply_json(resp, status, body, q != NULL ? &q->out_bytes : NULL);
}

/* ------------------------------------------------------------ auth (on_begin) */

/* Connection: close on a plain-HTTP server for the parties' requests to a
 * job while it holds its N x d sum or is about to (agg_job_holds_sum), and
 * for chunk uploads to a shard window. libmicrohttpd clears a kept-alive
 * connection's whole buffer (conn_memory_limit, 64 KiB) between requests,
 * so each party's open connection holds it: K x 64 KiB beside the sum when
 * masked_input allocates it and while the parties wait in long polls
 * through the unmasking and the factorization. A new plain connection
 * costs the server some 70 us, some 30 per party and job. With TLS a
 * handshake costs milliseconds, so connections stay open there. */
static void close_while_sum_held(const struct agg_app *app, fs_http_req *req, agg_job *j)
{
    if (!app->tls && (j == NULL || agg_job_holds_sum(j))) {
        fs_http_req_close_after(req);
    }
}

static int auth_begin(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    const struct route_ctx *rc_ = ctx;
    struct agg_app *app = rc_->app;
    struct fs_err err = {0};
    const char *tok = NULL;
    size_t len = 0;
    int admin;
    struct rq *q = calloc(1, sizeof *q);

    if (q == NULL) {
        return fs_http_problem(resp, 503, FS_PROBLEM_UNAVAILABLE, NULL, "out of memory") || 1;
    }
    q->app = app;
    fs_http_req_set_user(req, q, rq_free);
    if (fs_auth_parse_bearer(fs_http_req_header(req, "Authorization"), &tok, &len, &err) != 0) {
        return fs_http_problem_err(resp, &err) || 1;
    }
    if (rc_->auth == A_PEER) {
        /* the shard routes: the peer token only */
        if (app->peer == NULL) {
            return fs_http_fail(resp, AGG_EFORBIDDEN, "%s", "peer token not configured") || 1;
        }
        if (fs_auth_check_token(app->peer, tok, len, NULL, NULL) != 0) {
            return fs_http_fail(resp, FS_EAUTH, "%s", "the peer token is required") || 1;
        }
        return 0;
    }
    admin = fs_auth_check_token(app->admin, tok, len, NULL, NULL) == 0;
    if (rc_->has_job) {
        const char *id = fs_http_req_param(req, "job");
        agg_job *j = agg_mgr_find(app->mgr, id);
        if (j == NULL) {
            return fs_http_fail(resp, admin ? FS_ENOTFOUND : FS_EAUTH,
                                admin ? "no job %s" : "token is not valid for job %s",
                                fs_job_id_valid(id) ? id : "(malformed id)") ||
                   1;
        }
        if (!admin && agg_job_auth(j, tok, len, &q->party, &err) != 0) {
            return fs_http_problem_err(resp, &err) || 1;
        }
        q->job = j;
    } else if (!admin) {
        return fs_http_fail(resp, FS_EAUTH, "%s", "the admin token is required") || 1;
    }
    if (rc_->auth == A_ADMIN && !admin) {
        return fs_http_fail(resp, AGG_EFORBIDDEN, "%s", "the admin token is required") || 1;
    }
    if (rc_->auth == A_PARTY && admin) {
        return fs_http_fail(resp, AGG_EFORBIDDEN, "%s", "a party token is required") || 1;
    }
    if (!admin && q->job != NULL) {
        close_while_sum_held(app, req, q->job);
    }
    return 0;
}

static struct rq *rq_of(fs_http_req *req)
{
    struct rq *q = fs_http_req_user(req);
    if (q != NULL) {
        q->in_bytes = fs_http_req_bytes_received(req);
    }
    return q;
}

/* ------------------------------------------------------------ public endpoints */

static int h_healthz(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)req;
    (void)ctx;
    return reply_json(resp, NULL, 200, fs_svc_health_doc());
}

static int h_readyz(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    const struct route_ctx *rc_ = ctx;
    (void)req;
    if (!atomic_load(&rc_->app->ready) || !agg_store_ping(rc_->app->st)) {
        return fs_http_problem(resp, 503, FS_PROBLEM_UNAVAILABLE, NULL,
                               "not ready: the database is not open or jobs are loading");
    }
    /* disk full or read-only: still ready (reads work, writes answer 503) */
    return reply_json(resp, NULL, 200,
                      json_pack("{s:s, s:s}", "status", "ready", "storage", fs_storage_state()));
}

static int h_openapi(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    const struct route_ctx *rc_ = ctx;
    struct fs_err err = {0};
    (void)req;
    if (rc_->app->openapi_path[0] == '\0' ||
        fs_http_resp_file(resp, 200, "application/yaml", rc_->app->openapi_path, &err) != 0) {
        return fs_http_problem(resp, 404, FS_PROBLEM_NOT_FOUND, NULL,
                               "this server was started without openapi.yaml (see --openapi)");
    }
    return 0;
}

/* The dashboard's page, script and style (dashboard.h): public files (the
 * page asks for the token and calls the admin API with it), each with the
 * dashboard's security headers. */
static int dashboard_file(fs_http_resp *resp, enum agg_asset_id id)
{
    struct agg_asset a;
    int rc;

    agg_dashboard_asset(id, &a);
    rc = fs_http_resp_bytes(resp, 200, a.content_type, a.data, a.len);
    for (size_t i = 0; rc == 0 && AGG_DASHBOARD_HEADERS[i] != NULL; i += 2) {
        rc = fs_http_resp_header(resp, AGG_DASHBOARD_HEADERS[i], AGG_DASHBOARD_HEADERS[i + 1]);
    }
    return rc;
}

static int h_dashboard(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)req;
    (void)ctx;
    return dashboard_file(resp, AGG_ASSET_HTML);
}

static int h_dashboard_js(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)req;
    (void)ctx;
    return dashboard_file(resp, AGG_ASSET_JS);
}

static int h_dashboard_css(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)req;
    (void)ctx;
    return dashboard_file(resp, AGG_ASSET_CSS);
}

static int h_dashboard_icon(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)req;
    (void)ctx;
    return dashboard_file(resp, AGG_ASSET_ICON);
}

/* ------------------------------------------------------------ metrics */

void agg_http_on_request(const struct fs_http_log_entry *e, void *hook_ctx)
{
    const struct agg_app *app = hook_ctx;

    fs_http_metrics_record(app->metrics, e);
}

static int h_metrics(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    const struct route_ctx *rc_ = ctx;
    struct agg_app *app = rc_->app;
    struct agg_counts c;
    struct fs_text b;
    uint64_t del_pending;
    uint64_t del_abandoned;

    (void)req;
    fs_text_init(&b, METRICS_TEXT_MAX);
    agg_mgr_counts(app->mgr, &c);
    agg_del_counts(app->cfg->data_dir, &del_pending, &del_abandoned);
    fs_text_printf(&b,
                   "# HELP fedsvd_jobs Jobs known to the server, by state.\n"
                   "# TYPE fedsvd_jobs gauge\n"
                   "fedsvd_jobs{state=\"running\"} %llu\nfedsvd_jobs{state=\"done\"} %llu\n"
                   "fedsvd_jobs{state=\"failed\"} %llu\n",
                   (unsigned long long)c.running, (unsigned long long)c.done,
                   (unsigned long long)c.failed);
    fs_text_printf(&b,
                   "# HELP fedsvd_secagg_rounds_closed_total Secure-aggregation rounds closed, by "
                   "why.\n# TYPE fedsvd_secagg_rounds_closed_total counter\n"
                   "fedsvd_secagg_rounds_closed_total{reason=\"complete\"} %llu\n"
                   "fedsvd_secagg_rounds_closed_total{reason=\"deadline\"} %llu\n",
                   (unsigned long long)c.rounds_complete, (unsigned long long)c.rounds_deadline);
    fs_text_printf(&b,
                   "# HELP fedsvd_secagg_parties_dropped_total Parties counted as dropped at a "
                   "round close.\n# TYPE fedsvd_secagg_parties_dropped_total counter\n"
                   "fedsvd_secagg_parties_dropped_total %llu\n",
                   (unsigned long long)c.parties_dropped);
    fs_text_printf(&b,
                   "# HELP fedsvd_secagg_chunks_accepted_total Masked-input chunks accepted.\n"
                   "# TYPE fedsvd_secagg_chunks_accepted_total counter\n"
                   "fedsvd_secagg_chunks_accepted_total %llu\n",
                   (unsigned long long)c.chunks_accepted);
    fs_text_printf(&b,
                   "# HELP fedsvd_shard_window_deletions Deletions of shard peers' windows this "
                   "coordinator keeps, by state (pending: sent again until the peer takes it; "
                   "abandoned: given up after --shard-deletion-max-age-s).\n"
                   "# TYPE fedsvd_shard_window_deletions gauge\n"
                   "fedsvd_shard_window_deletions{state=\"pending\"} %llu\n"
                   "fedsvd_shard_window_deletions{state=\"abandoned\"} %llu\n",
                   (unsigned long long)del_pending, (unsigned long long)del_abandoned);
    fs_http_metrics_write(app->metrics, app->srv, &b);
    return fs_http_metrics_respond(resp, &b);
}

/* ------------------------------------------------------------ jobs */

/* Base URL for invitations: http(s)://<Host header>, when the header is sane. */
static void request_base_url(fs_http_req *req, const struct agg_app *app, char *out, size_t cap)
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

static int h_jobs_create(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    const struct route_ctx *rc_ = ctx;
    struct agg_app *app = rc_->app;
    struct fs_job_spec spec;
    struct fs_err err = {0};
    char base[FS_JOB_URL_MAX + 1];
    json_t *body = NULL;
    json_t *out = NULL;
    int rc;

    (void)rq_of(req);
    if (fs_http_body_json(req, resp, &body) != 0) {
        return 0;
    }
    rc = fs_job_spec_decode(body, app->cfg->max_elements, &spec, &err);
    json_decref(body);
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    if (spec.server_url[0] != '\0') {
        snprintf(base, sizeof base, "%s", spec.server_url);
    } else {
        request_base_url(req, app, base, sizeof base);
    }
    rc = agg_job_create(app->mgr, &spec, base, &out, &err);
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return reply_json(resp, NULL, 201, out);
}

static int h_jobs_list(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    const struct route_ctx *rc_ = ctx;
    const char *state = fs_http_req_query(req, "state");

    (void)rq_of(req);
    if (state != NULL && strcmp(state, "running") != 0 && strcmp(state, "done") != 0 &&
        strcmp(state, "failed") != 0) {
        return fs_http_fail(resp, FS_EINVAL, "%s", "state must be running, done or failed");
    }
    return reply_json(resp, NULL, 200, agg_mgr_list(rc_->app->mgr, state));
}

/* PUT /v1/jobs/{job}/maskset (admin): a fedsvd/fedpca job's mask set and its
 * end token; once the job is no longer running the server ends the mask set
 * (maskend.h). The end token is kept in server.db until then and is never
 * shown (not in the job's status, not in the log). */
static int h_job_maskset(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    const struct route_ctx *rc_ = ctx;
    struct rq *q = rq_of(req);
    struct fs_job_maskset m;
    struct fs_err err = {0};
    json_t *body = NULL;
    int rc;

    if (fs_http_body_json(req, resp, &body) != 0) {
        return 0;
    }
    rc = fs_job_maskset_decode(body, &m, &err);
    json_decref(body);
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    if (!fs_algo_is_fedsvd(agg_job_algo(q->job))) {
        rc = fs_http_fail(resp, FS_EINVAL, "%s", "only a fedsvd or fedpca job has a mask set");
    } else if (agg_store_maskset_set(rc_->app->st, agg_job_id(q->job), m.masking_url, m.maskset,
                                     m.end_token, &err) != 0) {
        rc = fs_http_problem_err(resp, &err);
    } else {
        fs_log_pack(FS_LOG_INFO, "mask set registered", "{s:s, s:s}", "job", agg_job_id(q->job),
                    "maskset", m.maskset);
        rc = fs_http_resp_empty(resp, 204);
    }
    fs_wipe(&m, sizeof m);
    return rc;
}

/* (the parker's question) 1 once the job left the phase and aggregation waited out */
static int job_moved(void *p)
{
    const struct rq *q = p;
    return agg_job_moved(q->job, q->wait_phase, q->r);
}

/* GET /v1/jobs/{job}; with ?wait_ms=N&phase=P&aggregation=R a long poll: the
 * answer waits (at most N ms) until the job is no longer in phase P of
 * aggregation R. */
static int h_job_get(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = rq_of(req);
    struct fs_job_wait jw;
    struct fs_err err = {0};

    (void)ctx;
    if (!fs_http_req_resumed(req)) {
        if (fs_job_wait_parse(fs_http_req_query(req, "wait_ms"), fs_http_req_query(req, "phase"),
                              fs_http_req_query(req, "aggregation"), AGG_WAIT_MS_MAX, &jw,
                              &err) != 0) {
            return fs_http_problem_err(resp, &err);
        }
        if (jw.wait) {
            q->wait_phase = jw.phase;
            q->r = jw.aggregation;
        }
        if (jw.wait && jw.ms > 0 && !job_moved(q) &&
            fs_http_req_park(req, jw.ms, job_moved, q) == 0) {
            return 0;
        }
    }
    return reply_json(resp, q, 200, agg_job_status(q->job));
}

static int h_job_delete(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = rq_of(req);
    struct fs_err err = {0};
    (void)ctx;
    if (agg_job_cancel(q->job, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    fs_log_pack(FS_LOG_INFO, "job cancelled", "{s:s}", "job", agg_job_id(q->job));
    return reply_json(resp, q, 200, agg_job_status(q->job));
}

/* A party POST with a JSON body: decode, hand to fn. */
static int party_post(fs_http_req *req, fs_http_resp *resp, unsigned ok_status,
                      int (*fn)(agg_job *, uint32_t, uint32_t, const json_t *, struct fs_err *))
{
    struct rq *q = rq_of(req);
    struct fs_err err = {0};
    uint64_t r = 0;
    json_t *body = NULL;
    const char *rs = fs_http_req_param(req, "r");
    int rc;

    if (rs != NULL && fs_wire_parse_dec(rs, UINT32_MAX, &r) != 0) {
        return fs_http_fail(resp, FS_ENOTFOUND, "%s",
                            "aggregation index must be a decimal integer");
    }
    if (fs_http_body_json(req, resp, &body) != 0) {
        return 0;
    }
    rc = fn(q->job, q->party, (uint32_t)r, body, &err);
    json_decref(body);
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return fs_http_resp_empty(resp, ok_status);
}

static int post_adv(agg_job *j, uint32_t party, uint32_t r, const json_t *b, struct fs_err *e)
{
    (void)r;
    return agg_job_post_adv(j, party, b, e);
}

static int post_shares(agg_job *j, uint32_t party, uint32_t r, const json_t *b, struct fs_err *e)
{
    (void)r;
    return agg_job_post_shares(j, party, b, e);
}

static int h_keys_post(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    return party_post(req, resp, 202, post_adv);
}

static int h_shares_post(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    return party_post(req, resp, 202, post_shares);
}

static int h_consistency(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    return party_post(req, resp, 204, agg_job_post_sig);
}

static int h_unmask(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    return party_post(req, resp, 204, agg_job_post_reveals);
}

static int h_exponent(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    return party_post(req, resp, 204, agg_job_post_exponent);
}

static int h_pubexp(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    return party_post(req, resp, 204, agg_job_post_pubexp);
}

/* An .npy file of aggregation {r} whose path `locate` gives (the job checks
 * who may read it and whether it exists yet). */
static int agg_file(fs_http_req *req, fs_http_resp *resp,
                    int (*locate)(agg_job *, uint32_t, char *, size_t, struct fs_err *),
                    const char *what)
{
    struct rq *q = rq_of(req);
    struct fs_err err = {0};
    char path[4600];
    struct stat st;
    uint64_t r = 0;

    if (fs_wire_parse_dec(fs_http_req_param(req, "r"), UINT32_MAX, &r) != 0) {
        return fs_http_fail(resp, FS_ENOTFOUND, "%s",
                            "aggregation index must be a decimal integer");
    }
    if (locate(q->job, (uint32_t)r, path, sizeof path, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    if (stat(path, &st) == 0) {
        q->out_bytes += (uint64_t)st.st_size;
    }
    if (fs_http_resp_file(resp, 200, "application/x-npy", path, &err) != 0) {
        fs_err_set(&err, FS_EINTERNAL, "%s file missing", what);
        return fs_http_problem_err(resp, &err);
    }
    return 0;
}

/* The padded sum of a fedpca statistics aggregation. */
static int h_agg_sum(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    return agg_file(req, resp, agg_job_sum_path, "sum");
}

static int h_keys_get(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = rq_of(req);
    struct fs_err err = {0};
    json_t *out = NULL;
    (void)ctx;
    if (agg_job_get_roster(q->job, &out, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return reply_json(resp, q, 200, out);
}

static int h_shares_get(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = rq_of(req);
    struct fs_err err = {0};
    json_t *out = NULL;
    (void)ctx;
    if (agg_job_get_shares(q->job, q->party, &out, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return reply_json(resp, q, 200, out);
}

static int h_agg_get(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = rq_of(req);
    struct fs_err err = {0};
    json_t *out = NULL;
    uint64_t r = 0;
    (void)ctx;
    if (fs_wire_parse_dec(fs_http_req_param(req, "r"), UINT32_MAX, &r) != 0) {
        return fs_http_fail(resp, FS_ENOTFOUND, "%s",
                            "aggregation index must be a decimal integer");
    }
    if (agg_job_get_agg(q->job, (uint32_t)r, &out, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return reply_json(resp, q, 200, out);
}

static int h_result(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = rq_of(req);
    struct fs_err err = {0};
    json_t *out = NULL;
    (void)ctx;
    if (agg_job_result(q->job, &out, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return reply_json(resp, q, 200, out);
}

static int h_result_file(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = rq_of(req);
    struct fs_err err = {0};
    char path[4600];
    struct stat st;
    (void)ctx;
    if (agg_job_result_path(q->job, fs_http_req_param(req, "name"), path, sizeof path, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    if (stat(path, &st) == 0) {
        q->out_bytes += (uint64_t)st.st_size;
    }
    if (fs_http_resp_file(resp, 200, "application/x-npy", path, &err) != 0) {
        fs_err_set(&err, FS_EINTERNAL, "result file missing");
        return fs_http_problem_err(resp, &err);
    }
    return 0;
}

/* ------------------------------------------------------------ masked chunk uploads (streamed) */

/* Hold memory for a chunk body (header + 8m bytes) within --upload-buffer:
 * over it, 503 with Retry-After (clients retry); one request is always let
 * through so a budget below one chunk cannot stall a job. */
static int reserve_chunk_body(struct rq *q, fs_http_resp *resp)
{
    uint64_t need = NPY_HEADER_MAX + 8 * (uint64_t)q->m;
    uint64_t cur = atomic_load(&q->app->chunk_mem);

    do {
        if (cur > 0 && cur + need > q->app->cfg->upload_buffer) {
            int rc = fs_http_problem(resp, 503, FS_PROBLEM_UNAVAILABLE, NULL,
                                     "upload buffers are full (%llu bytes held); retry",
                                     (unsigned long long)cur);
            if (rc == 0 && fs_http_resp_header(resp, "Retry-After", "1") != 0) {
                fs_log(FS_LOG_WARN, "cannot add Retry-After", NULL);
            }
            return rc || 1;
        }
    } while (!atomic_compare_exchange_weak(&q->app->chunk_mem, &cur, cur + need));
    q->reserved = need;
    /* page-aligned: the decoded words start at buf and may go to disk by O_DIRECT */
    q->buf = pool_get((size_t)need);
    q->pooled = 1;
    if (q->buf == NULL) {
        return fs_http_problem(resp, 503, FS_PROBLEM_UNAVAILABLE, NULL, "out of memory") || 1;
    }
    q->buf_cap = (size_t)need;
    return 0;
}

/* The body of a masked chunk, once the caller is known (q->job and its
 * aggregation {r}, or q->win, a shard window: local chunk indices). */
static int chunk_body_begin(fs_http_req *req, fs_http_resp *resp, struct rq *q)
{
    struct fs_err err = {0};
    uint64_t r = 0;
    uint64_t idx = 0;
    uint64_t cl = 0;

    if (!fs_http_req_content_type_is(req, "application/x-npy")) {
        return fs_http_problem(resp, 415, FS_PROBLEM_UNSUPPORTED, NULL,
                               "Content-Type must be application/x-npy") ||
               1;
    }
    if ((q->win == NULL && fs_wire_parse_dec(fs_http_req_param(req, "r"), UINT32_MAX, &r) != 0) ||
        fs_wire_parse_dec(fs_http_req_param(req, "chunk"), UINT64_MAX / 2, &idx) != 0) {
        return fs_http_fail(resp, FS_ENOTFOUND, "%s",
                            "aggregation and chunk must be decimal integers") ||
               1;
    }
    if ((q->win != NULL
             ? agg_shardwin_chunk_check(q->win, q->party, idx, &q->m, &err)
             : agg_job_chunk_check(q->job, q->party, (uint32_t)r, idx, &q->m, &err)) != 0) {
        return fs_http_problem_err(resp, &err) || 1;
    }
    q->r = (uint32_t)r;
    q->idx = idx;
    if (fs_http_req_content_length(req, &cl)) {
        if (cl > NPY_HEADER_MAX + 8 * (uint64_t)q->m) {
            return fs_http_problem(resp, 413, FS_PROBLEM_TOO_LARGE, NULL,
                                   "chunk %llu body of %llu bytes exceeds %llu",
                                   (unsigned long long)idx, (unsigned long long)cl,
                                   (unsigned long long)(NPY_HEADER_MAX + 8 * (uint64_t)q->m)) ||
                   1;
        }
        if (cl < 8 * (uint64_t)q->m + 16) {
            return fs_http_problem(resp, 422, FS_PROBLEM_INVALID, NULL,
                                   "chunk %llu must be a .npy of %zu uint64 words",
                                   (unsigned long long)idx, q->m) ||
                   1;
        }
    }
    /* a new chunk of an open round streams into the sum; anything else
     * (a repeat, a closed round) is buffered and decided whole */
    if ((q->win != NULL
             ? agg_shardwin_stream_begin(q->win, q->party, idx, q->m, &q->up, &q->streaming, &err)
             : agg_job_stream_begin(q->job, q->party, q->r, idx, q->m, &q->up, &q->streaming,
                                    &err)) != 0) {
        return fs_http_problem_err(resp, &err) || 1;
    }
    return q->streaming ? 0 : reserve_chunk_body(q, resp);
}

static int chunk_begin(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    int rc = auth_begin(req, resp, ctx);

    if (rc != 0 || fs_http_resp_is_set(resp)) {
        return rc != 0 ? rc : 1;
    }
    return chunk_body_begin(req, resp, fs_http_req_user(req));
}

/* PUT /v1/shards/{job}/masked/{chunk}: the party's token of the window's job. */
static int shard_chunk_begin(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    const struct route_ctx *rc_ = ctx;
    struct fs_err err = {0};
    const char *tok = NULL;
    const char *id = fs_http_req_param(req, "job");
    size_t len = 0;
    struct rq *q = calloc(1, sizeof *q);

    if (q == NULL) {
        return fs_http_problem(resp, 503, FS_PROBLEM_UNAVAILABLE, NULL, "out of memory") || 1;
    }
    q->app = rc_->app;
    fs_http_req_set_user(req, q, rq_free);
    if (fs_auth_parse_bearer(fs_http_req_header(req, "Authorization"), &tok, &len, &err) != 0) {
        return fs_http_problem_err(resp, &err) || 1;
    }
    q->win = rc_->app->shards != NULL ? agg_shards_find(rc_->app->shards, id) : NULL;
    if (q->win == NULL) {
        return fs_http_fail(resp, FS_ENOTFOUND, "no shard window for job %s",
                            fs_job_id_valid(id) ? id : "(malformed id)") ||
               1;
    }
    if (agg_shardwin_auth(q->win, tok, len, &q->party, &err) != 0) {
        return fs_http_problem_err(resp, &err) || 1;
    }
    close_while_sum_held(rc_->app, req, NULL);
    return chunk_body_begin(req, resp, q);
}

/* Body bytes of a streamed chunk: whole words go to the sum, a split
 * word waits in carry for the rest of it. */
static int stream_bytes(struct rq *q, const uint8_t *p, size_t n, fs_http_resp *resp)
{
    struct fs_err err = {0};
    size_t w;

    if (q->ncarry > 0) {
        size_t t = n < 8 - q->ncarry ? n : 8 - q->ncarry;
        memcpy(q->carry + q->ncarry, p, t);
        q->ncarry += t;
        p += t;
        n -= t;
        if (q->ncarry < 8) {
            return 0; /* the piece ended within the word */
        }
        q->ncarry = 0;
        if ((q->win != NULL ? agg_shardwin_stream_piece(q->win, &q->up, q->carry, 1, &err)
                            : agg_job_stream_piece(q->job, &q->up, q->carry, 1, &err)) != 0) {
            return fs_http_problem_err(resp, &err) || 1;
        }
    }
    w = n / 8;
    if (w > 0 && (q->win != NULL ? agg_shardwin_stream_piece(q->win, &q->up, p, w, &err)
                                 : agg_job_stream_piece(q->job, &q->up, p, w, &err)) != 0) {
        return fs_http_problem_err(resp, &err) || 1;
    }
    memcpy(q->carry, p + 8 * w, n - 8 * w);
    q->ncarry = n - 8 * w;
    return 0;
}

static int chunk_piece(fs_http_req *req, const void *data, size_t len, fs_http_resp *resp,
                       void *ctx)
{
    struct rq *q = fs_http_req_user(req);
    const uint8_t *p = data;
    size_t take = 0; /* of this piece, the bytes that went to hdr */
    int just_parsed = 0;
    uint64_t cap;

    (void)ctx;
    cap = NPY_HEADER_MAX + 8 * (uint64_t)q->m;
    if (q->received + len > cap) {
        return fs_http_problem(resp, 413, FS_PROBLEM_TOO_LARGE, NULL,
                               "chunk body exceeds %llu bytes", (unsigned long long)cap) ||
               1;
    }
    if (!q->parsed) {
        struct fs_io_caps caps = fs_io_caps_default();
        struct fs_npy_header h;
        struct fs_err err = {0};
        int rc;
        take = len < NPY_HEADER_MAX - q->hdr_n ? len : NPY_HEADER_MAX - q->hdr_n;
        memcpy(q->hdr + q->hdr_n, p, take);
        q->hdr_n += take;
        caps.max_elems = (uint64_t)MAX_CHUNK_WORDS;
        rc = fs_npy_parse_header(q->hdr, q->hdr_n, &caps, &h, &err);
        if (rc == FS_ESTATE && q->hdr_n < NPY_HEADER_MAX) {
            rc = 0; /* need more bytes */
        } else if (rc != 0) {
            return fs_http_problem(resp, rc == FS_EFORMAT ? 400 : 422,
                                   rc == FS_EFORMAT ? FS_PROBLEM_BAD_REQUEST : FS_PROBLEM_INVALID,
                                   NULL, "chunk body: %s", err.msg) ||
                   1;
        } else if (h.dtype != FS_NPY_U8 || h.ndim != 1 || h.shape[0] != q->m) {
            return fs_http_problem(resp, 422, FS_PROBLEM_INVALID, NULL,
                                   "chunk %llu must be a 1-D <u8 array of shape (%zu,)",
                                   (unsigned long long)q->idx, q->m) ||
                   1;
        } else {
            q->parsed = 1;
            q->header_len = h.header_len;
            q->expected = (uint64_t)h.header_len + 8 * (uint64_t)q->m;
            just_parsed = 1;
        }
    }
    if (q->parsed && q->received + len > q->expected) {
        return fs_http_problem(resp, 422, FS_PROBLEM_INVALID, NULL,
                               "chunk body is longer than its .npy header says (%llu bytes)",
                               (unsigned long long)q->expected) ||
               1;
    }
    /* The words go straight to the start of buf (page-aligned, as the fold
     * and O_DIRECT want them): the header's bytes stay in hdr. Bytes past
     * the header that arrived with it are in hdr too. received + len <=
     * expected, so they end within 8 m <= buf_cap bytes. */
    if (q->streaming && q->parsed) {
        int rc = 0;
        q->received += len;
        q->in_bytes = q->received;
        if (just_parsed) {
            rc = stream_bytes(q, q->hdr + q->header_len, q->hdr_n - q->header_len, resp);
        }
        return rc != 0 ? rc : stream_bytes(q, p + take, len - take, resp);
    }
    if (just_parsed) {
        size_t pre = q->hdr_n - q->header_len;
        memcpy(q->buf, q->hdr + q->header_len, pre);
        memcpy(q->buf + pre, p + take, len - take);
    } else if (q->parsed) {
        memcpy(q->buf + (q->received - q->header_len), p, len);
    }
    q->received += len;
    q->in_bytes = q->received;
    return 0;
}

static int chunk_done(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = fs_http_req_user(req);
    struct fs_err err = {0};
    uint64_t *y = (uint64_t *)(void *)q->buf; /* page-aligned */

    (void)ctx;
    q->in_bytes = q->received;
    if (!q->parsed || q->received != q->expected) {
        return fs_http_problem(resp, 422, FS_PROBLEM_INVALID, NULL,
                               "chunk %llu must be a .npy of %zu uint64 words (got %llu bytes)",
                               (unsigned long long)q->idx, q->m, (unsigned long long)q->received);
    }
    if (q->streaming) {
        q->streaming = 0;
        if ((q->win != NULL ? agg_shardwin_stream_end(q->win, &q->up, 1, &err)
                            : agg_job_stream_end(q->job, &q->up, 1, &err)) != 0) {
            return fs_http_problem_err(resp, &err);
        }
        return fs_http_resp_empty(resp, 204);
    }
    agg_le64_decode(y, q->buf, q->m); /* in place: nothing to do on little-endian hosts */
    if ((q->win != NULL ? agg_shardwin_put_chunk(q->win, q->party, q->idx, y, q->m, &err)
                        : agg_job_put_chunk(q->job, q->party, q->r, q->idx, y, q->m, &err)) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return fs_http_resp_empty(resp, 204);
}

/* ------------------------------------------------------------ power-method jobs */

/* docs/wire-fedpower.md: broadcast iterates, noise exchange, plain uploads. */

static int parse_r(fs_http_req *req, uint64_t *r)
{
    return fs_wire_parse_dec(fs_http_req_param(req, "r"), UINT32_MAX, r);
}

/* The broadcast Z parties received before aggregation {r}. */
static int h_agg_z(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    return agg_file(req, resp, agg_job_z_path, "z");
}

static int h_exchange_key(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = rq_of(req);
    struct fs_err err = {0};
    json_t *out = NULL;
    (void)ctx;
    if (agg_job_exchange_key(q->job, &out, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return reply_json(resp, q, 200, out);
}

/* (the parker's question) 1 once the selector of aggregation q->r is no longer pending */
static int selector_ready(void *p)
{
    const struct rq *q = p;
    return !agg_job_selector_pending(q->job, q->r);
}

/* GET …/selector; with ?wait_ms=N a long poll: while the exchange of {r} is
 * not open yet (409 not_ready) the answer waits, at most N ms. */
static int h_selector(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = rq_of(req);
    struct fs_err err = {0};
    json_t *out = NULL;
    const char *ws = fs_http_req_query(req, "wait_ms");
    uint64_t ms = 0;
    uint64_t r = 0;
    (void)ctx;
    if (parse_r(req, &r) != 0) {
        return fs_http_fail(resp, FS_ENOTFOUND, "%s",
                            "aggregation index must be a decimal integer");
    }
    if (ws != NULL && fs_wire_parse_dec(ws, AGG_WAIT_MS_MAX, &ms) != 0) {
        return fs_http_fail(resp, FS_EFORMAT, "wait_ms: a decimal integer 0..%u expected",
                            AGG_WAIT_MS_MAX);
    }
    q->r = (uint32_t)r;
    if (!fs_http_req_resumed(req) && ms > 0 && agg_job_selector_pending(q->job, q->r) &&
        fs_http_req_park(req, (unsigned)ms, selector_ready, q) == 0) {
        return 0;
    }
    if (agg_job_get_selector(q->job, q->party, (uint32_t)r, &out, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return reply_json(resp, q, 200, out);
}

/* on_begin of the sized-body routes: auth, content type, the turn, the exact cap. */
static int sized_begin(fs_http_req *req, fs_http_resp *resp, void *ctx, int plain)
{
    struct rq *q;
    struct fs_err err = {0};
    uint64_t r = 0;
    uint64_t cl = 0;
    uint64_t cap;
    int rc = auth_begin(req, resp, ctx);

    if (rc != 0 || fs_http_resp_is_set(resp)) {
        return rc != 0 ? rc : 1;
    }
    q = fs_http_req_user(req);
    if (!fs_http_req_content_type_is(req, plain ? "application/x-npy" : "application/json")) {
        return fs_http_problem(resp, 415, FS_PROBLEM_UNSUPPORTED, NULL,
                               plain ? "Content-Type must be application/x-npy"
                                     : "Content-Type must be application/json") ||
               1;
    }
    if (parse_r(req, &r) != 0) {
        return fs_http_fail(resp, FS_ENOTFOUND, "%s",
                            "aggregation index must be a decimal integer") ||
               1;
    }
    q->r = (uint32_t)r;
    if (plain) {
        rc = agg_job_plain_check(q->job, q->party, q->r, &q->prows, &q->pcols, &err);
        cap = PLAIN_HEADER_MAX + 8 * (uint64_t)q->prows * q->pcols;
    } else {
        size_t n = 0;
        rc = agg_job_noise_check(q->job, q->party, q->r, &n, &err);
        cap = 4 * (((uint64_t)n + 2) / 3) + 256;
    }
    if (rc != 0) {
        return fs_http_problem_err(resp, &err) || 1;
    }
    if (fs_http_req_content_length(req, &cl) && cl > cap) {
        return fs_http_problem(resp, 413, FS_PROBLEM_TOO_LARGE, NULL,
                               "body of %llu bytes exceeds %llu", (unsigned long long)cl,
                               (unsigned long long)cap) ||
               1;
    }
    q->buf_cap = (size_t)cap;
    return 0;
}

static int noise_begin(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    return sized_begin(req, resp, ctx, 0);
}

static int plain_begin(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    return sized_begin(req, resp, ctx, 1);
}

static int sized_piece(fs_http_req *req, const void *data, size_t len, fs_http_resp *resp,
                       void *ctx)
{
    struct rq *q = fs_http_req_user(req);

    (void)ctx;
    if (len > q->buf_cap - q->buf_n) {
        return fs_http_problem(resp, 413, FS_PROBLEM_TOO_LARGE, NULL, "body exceeds %zu bytes",
                               q->buf_cap) ||
               1;
    }
    if (q->buf == NULL) {
        q->buf = malloc(q->buf_cap > 0 ? q->buf_cap : 1);
        if (q->buf == NULL) {
            return fs_http_problem(resp, 503, FS_PROBLEM_UNAVAILABLE, NULL, "out of memory") || 1;
        }
    }
    memcpy(q->buf + q->buf_n, data, len);
    q->buf_n += len;
    q->in_bytes = q->buf_n;
    return 0;
}

static int h_noise_response(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = fs_http_req_user(req);
    struct fs_err err = {0};
    json_error_t je;
    json_t *body;
    json_t *v;
    uint8_t *bytes = NULL;
    size_t n = 0;
    int rc;

    (void)ctx;
    q->in_bytes = q->buf_n;
    body = json_loadb(q->buf != NULL ? (const char *)q->buf : "", q->buf_n, JSON_REJECT_DUPLICATES,
                      &je);
    if (!json_is_object(body)) {
        json_decref(body);
        return fs_http_fail(resp, FS_EFORMAT, "%s",
                            "body: expected a JSON object {\"response\": \"…\"}");
    }
    v = json_object_get(body, "response");
    if (!json_is_string(v)) {
        json_decref(body);
        return fs_http_fail(resp, FS_EFORMAT, "%s", "response: expected a base64url string");
    }
    rc = fs_b64url_decode_alloc(json_string_value(v), q->buf_cap, &bytes, &n, &err);
    json_decref(body);
    if (rc == 0) {
        rc = agg_job_post_noise_response(q->job, q->party, q->r, bytes, n, &err);
    } else {
        fs_err_prefix(&err, "response: ");
    }
    free(bytes);
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return fs_http_resp_empty(resp, 204);
}

/* zmax: a finite decimal number >= 0 (FS_EFORMAT unparsable, FS_EINVAL out of range). */
static int parse_zmax(const char *s, double *out, struct fs_err *err)
{
    char *end = NULL;

    if (s == NULL || s[0] == '\0') {
        return fs_err_set(err, FS_EFORMAT, "zmax: missing (…/plain.npy?zmax=<number>)");
    }
    if (strlen(s) > 64 || strspn(s, "0123456789+-.eE") != strlen(s)) {
        return fs_err_set(err, FS_EFORMAT, "zmax: not a decimal number");
    }
    errno = 0;
    *out = strtod(s, &end);
    if (end == s || *end != '\0') {
        return fs_err_set(err, FS_EFORMAT, "zmax: not a decimal number");
    }
    if (errno == ERANGE || !(*out >= 0.0) || *out > 1e300) {
        return fs_err_set(err, FS_EINVAL, "zmax: must be finite and >= 0");
    }
    return 0;
}

static int h_plain(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct rq *q = fs_http_req_user(req);
    struct fs_io_caps caps = fs_io_caps_default();
    struct fs_npy_header h;
    struct fs_err err = {0};
    size_t want = q->prows * q->pcols;
    uint64_t *w = NULL;
    fs_mat *y = NULL;
    double zmax = 0.0;
    int rc;

    (void)ctx;
    q->in_bytes = q->buf_n;
    rc = parse_zmax(fs_http_req_query(req, "zmax"), &zmax, &err);
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    caps.max_elems = want;
    rc = fs_npy_parse_header(q->buf != NULL ? q->buf : (const uint8_t *)"", q->buf_n, &caps, &h,
                             &err);
    if (rc != 0) {
        return fs_http_problem(resp, rc == FS_EFORMAT ? 400 : 422,
                               rc == FS_EFORMAT ? FS_PROBLEM_BAD_REQUEST : FS_PROBLEM_INVALID, NULL,
                               "plain.npy: %s", err.msg);
    }
    if (h.dtype != FS_NPY_F8 || h.shape[0] != q->prows || h.shape[1] != q->pcols ||
        (h.ndim == 1 && q->pcols != 1) || h.header_len > PLAIN_HEADER_MAX ||
        q->buf_n != h.header_len + 8 * want) {
        return fs_http_problem(resp, 422, FS_PROBLEM_INVALID, NULL,
                               "plain.npy: expected a <f8 array of shape (%zu, %zu), %zu data "
                               "bytes after the header",
                               q->prows, q->pcols, 8 * want);
    }
    w = malloc((want > 0 ? want : 1) * sizeof *w);
    y = fs_mat_new_uninit(q->prows, q->pcols);
    if (w == NULL || y == NULL) {
        free(w);
        fs_mat_free(y);
        return fs_http_problem(resp, 503, FS_PROBLEM_UNAVAILABLE, NULL, "out of memory");
    }
    agg_le64_decode(w, q->buf + h.header_len, want);
    for (size_t i = 0; i < q->prows; i++) {
        for (size_t c = 0; c < q->pcols; c++) {
            size_t at = h.fortran_order ? i + c * q->prows : i * q->pcols + c;
            double x;
            memcpy(&x, &w[at], sizeof x);
            FS_MAT_AT(y, i, c) = x;
        }
    }
    free(w);
    rc = agg_job_put_plain(q->job, q->party, q->r, y, zmax, &err);
    fs_mat_free(y);
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return fs_http_resp_empty(resp, 204);
}

/* ------------------------------------------------------------ registration */

struct route_def {
    const char *method;
    const char *pattern;
    int body; /* 0 none, 1 small, 2 spec, 3 max_body, 4 chunk, 5 noise-response, 6 plain.npy,
                 7 shard chunk, 8 shard finish */
    enum auth_kind auth;
    fs_http_handler_fn handler;
};

static const struct route_def ROUTES[] = {
    {"GET", "/healthz", 0, A_NONE, h_healthz},
    {"GET", "/readyz", 0, A_NONE, h_readyz},
    {"GET", "/metrics", 0, A_NONE, h_metrics},
    {"GET", "/openapi.yaml", 0, A_NONE, h_openapi},
    {"GET", "/", 0, A_NONE, h_dashboard},
    {"GET", "/dashboard.js", 0, A_NONE, h_dashboard_js},
    {"GET", "/dashboard.css", 0, A_NONE, h_dashboard_css},
    {"GET", "/favicon.svg", 0, A_NONE, h_dashboard_icon},
    {"POST", "/v1/jobs", 2, A_ADMIN, h_jobs_create},
    {"GET", "/v1/jobs", 0, A_ADMIN, h_jobs_list},
    {"GET", "/v1/jobs/{job}", 0, A_ANY, h_job_get},
    {"DELETE", "/v1/jobs/{job}", 0, A_ADMIN, h_job_delete},
    {"PUT", "/v1/jobs/{job}/maskset", 1, A_ADMIN, h_job_maskset},
    {"POST", "/v1/jobs/{job}/keys", 3, A_PARTY, h_keys_post}, /* one mask key per aggregation */
    {"GET", "/v1/jobs/{job}/keys", 0, A_ANY, h_keys_get},
    {"POST", "/v1/jobs/{job}/shares", 3, A_PARTY, h_shares_post},
    {"GET", "/v1/jobs/{job}/shares", 0, A_PARTY, h_shares_get},
    {"GET", "/v1/jobs/{job}/aggregations/{r}", 0, A_ANY, h_agg_get},
    {"PUT", "/v1/jobs/{job}/aggregations/{r}/masked/{chunk}", 4, A_PARTY, chunk_done},
    {"POST", "/v1/jobs/{job}/aggregations/{r}/consistency", 1, A_PARTY, h_consistency},
    {"POST", "/v1/jobs/{job}/aggregations/{r}/unmask", 3, A_PARTY, h_unmask},
    {"POST", "/v1/jobs/{job}/aggregations/{r}/exponent", 1, A_PARTY, h_exponent},
    {"POST", "/v1/jobs/{job}/aggregations/{r}/public-exponent", 1, A_PARTY, h_pubexp},
    {"GET", "/v1/jobs/{job}/aggregations/{r}/sum.npy", 0, A_ANY, h_agg_sum},
    {"GET", "/v1/jobs/{job}/aggregations/{r}/z.npy", 0, A_ANY, h_agg_z},
    {"GET", "/v1/jobs/{job}/exchange-key", 0, A_ANY, h_exchange_key},
    {"GET", "/v1/jobs/{job}/aggregations/{r}/selector", 0, A_PARTY, h_selector},
    {"POST", "/v1/jobs/{job}/aggregations/{r}/noise-response", 5, A_PARTY, h_noise_response},
    {"PUT", "/v1/jobs/{job}/aggregations/{r}/plain.npy", 6, A_PARTY, h_plain},
    {"GET", "/v1/jobs/{job}/result", 0, A_ANY, h_result},
    {"GET", "/v1/jobs/{job}/result/{name}.npy", 0, A_ANY, h_result_file},
    {"PUT", "/v1/shards/{job}", 3, A_PEER, agg_shard_h_put},
    {"GET", "/v1/shards/{job}", 0, A_PEER, agg_shard_h_get},
    {"DELETE", "/v1/shards/{job}", 0, A_PEER, agg_shard_h_delete},
    {"PUT", "/v1/shards/{job}/masked/{chunk}", 7, A_PARTY, chunk_done},
    {"POST", "/v1/shards/{job}/finish", 8, A_PEER, agg_shard_h_finish},
    {"GET", "/v1/shards/{job}/r.npy", 0, A_PEER, agg_shard_h_r},
    {"GET", "/v1/shard-deletions", 0, A_ADMIN, agg_shard_h_deletions},
};

#define NROUTES (sizeof ROUTES / sizeof ROUTES[0])

static struct route_ctx g_ctx[NROUTES];

int agg_http_routes(struct agg_app *app, struct fs_err *err)
{
    for (size_t i = 0; i < NROUTES; i++) {
        const struct route_def *d = &ROUTES[i];
        struct fs_http_route r;
        int rc;
        memset(&r, 0, sizeof r);
        g_ctx[i].app = app;
        g_ctx[i].auth = d->auth;
        g_ctx[i].has_job = strncmp(d->pattern, "/v1/jobs/{job}", 14) == 0;
        r.method = d->method;
        r.pattern = d->pattern;
        r.handler = d->handler;
        r.ctx = &g_ctx[i];
        switch (d->body) {
        case 1:
            r.max_body = SMALL_BODY;
            break;
        case 2:
            r.max_body = SPEC_BODY;
            break;
        case 3:
            r.max_body = app->cfg->max_body;
            break;
        case 4:
        case 7:
            r.max_body = NPY_HEADER_MAX + 8 * (uint64_t)MAX_CHUNK_WORDS;
            r.on_chunk = chunk_piece;
            break;
        case 8:
            r.max_body = agg_shard_finish_cap(FS_SECAGG_MAX_PARTIES);
            break;
        case 5: /* the exact cap is set per request (sized_begin) */
        case 6:
            r.max_body = PLAIN_HEADER_MAX + 8 * app->cfg->max_elements;
            r.on_chunk = sized_piece;
            break;
        default:
            r.max_body = 0;
            break;
        }
        if (d->auth != A_NONE) {
            r.on_begin = d->body == 4   ? chunk_begin
                         : d->body == 7 ? shard_chunk_begin
                         : d->body == 5 ? noise_begin
                         : d->body == 6 ? plain_begin
                                        : auth_begin;
        }
        rc = fs_http_server_route(app->srv, &r, err);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

int agg_http_init(struct agg_app *app, struct fs_err *err)
{
    app->metrics = fs_http_metrics_new(METRIC_SERIES);
    if (app->metrics == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    return 0;
}

void agg_http_free(struct agg_app *app)
{
    pthread_mutex_lock(&g_pool.mu);
    while (g_pool.n > 0) {
        free(g_pool.bufs[--g_pool.n]);
    }
    pthread_mutex_unlock(&g_pool.mu);
    fs_http_metrics_free(app->metrics);
    app->metrics = NULL;
}
