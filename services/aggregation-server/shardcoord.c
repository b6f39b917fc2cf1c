/* The coordinator's side of a sharded fedsvd/fedpca job (docs/sharding.md):
 * the windows on the peers (shard s = --shard-peer number s), learning
 * which parties completed their uploads there, and the sharded finish
 * (unmask plan out, R factors in, TSQR). The math is lib/proto's
 * (fedsvd_shard.h, secagg.h windows); this file only moves it between the
 * servers. The plan and the tokens are never logged. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../api/jobdoc.h"
#include "../../api/phase.h"
#include "../../api/shardwire.h"
#include "../../api/wire.h"
#include "core/bgthread.h"
#include "crypto/ct.h"
#include "io/matio.h"
#include "jobmgr_internal.h"
#include "net/auth.h"
#include "net/http_client.h"
#include "net/log.h"
#include "proto/fedsvd_shard.h"
#include "shardgc.h"

#define POLL_MS      250   /* masked_input: how often the peers are asked */
#define PEER_TIMEOUT 30000 /* ms, one request */
#define POLL_TIMEOUT 3000  /* ms, one request of the poller */
#define R_WAIT_MIN_S 600   /* the shards' decode and QR: at least this long */
#define PEER_DOC_MAX (1u << 20)

struct agg_shardjob {
    uint32_t S;
    struct fs_job_shard sh[FS_JOB_MAX_SHARDS];
    uint8_t *elsewhere; /* [1..n]: complete on every peer (mu) */
    int polled;         /* elsewhere holds a verdict of every peer (mu) */
    struct fs_bgthread poller;
};

/* ------------------------------------------------------------ peers */

/* A client for a peer (quick: the poller's, one short attempt, so that a
 * stopping server does not wait long for a peer that hangs). */
static int peer_client(const agg_mgr *m, const char *url, int quick, fs_httpc **out,
                       struct fs_err *err)
{
    struct fs_httpc_config c;
    char *tok = NULL;
    int rc;

    *out = NULL;
    if (m->cfg.peer_token_file == NULL || m->cfg.peer_token_file[0] == '\0') {
        return fs_err_set(err, FS_EUNAVAILABLE,
                          "sharded jobs need --peer-token-file (the token of the shard peers)");
    }
    rc = fs_auth_token_load(m->cfg.peer_token_file, &tok, err);
    if (rc != 0) {
        return fs_err_set(err, FS_EUNAVAILABLE, "peer token: %s", err->msg);
    }
    fs_httpc_config_default(&c);
    c.base_url = url;
    c.token = tok;
    c.timeout_ms = quick ? POLL_TIMEOUT : PEER_TIMEOUT;
    c.connect_timeout_ms = quick ? POLL_TIMEOUT : c.connect_timeout_ms;
    c.max_retries = quick ? 0 : 3;
    c.backoff_base_ms = 100;
    c.backoff_max_ms = 2000;
    c.max_body = PEER_DOC_MAX;
    c.ca_file =
        m->cfg.peer_ca_file != NULL && m->cfg.peer_ca_file[0] != '\0' ? m->cfg.peer_ca_file : NULL;
    c.allow_insecure_http = m->cfg.insecure_http;
    rc = fs_httpc_new(out, &c, err);
    fs_auth_token_free(tok);
    return rc;
}

/* One request to shard s; a non-2xx answer is an error with the peer's words.
 * *status: the HTTP status (0 when none came). */
static int peer_do(fs_httpc *c, const char *method, const char *path, const char *body,
                   const char *download, long *status, json_t **out, struct fs_err *err)
{
    struct fs_httpc_req rq;
    struct fs_httpc_resp resp = {0};
    int rc;

    memset(&rq, 0, sizeof rq);
    rq.method = method;
    rq.path = path;
    rq.body = body;
    rq.body_len = body != NULL ? strlen(body) : 0;
    rq.content_type = body != NULL ? "application/json" : NULL;
    rq.accept = download != NULL ? "application/x-npy" : "application/json";
    rq.download_file = download;
    rq.retry = FS_HTTPC_RETRY_ALWAYS; /* every peer request is idempotent */
    if (out != NULL) {
        *out = NULL;
    }
    *status = 0;
    rc = fs_httpc_do(c, &rq, &resp, err);
    if (rc == 0) {
        *status = resp.status;
        rc = fs_httpc_check(&resp, method, path, err);
    }
    if (rc == 0 && out != NULL && resp.body != NULL) {
        json_error_t je;
        *out = json_loadb(resp.body, resp.len, JSON_REJECT_DUPLICATES, &je);
        if (*out == NULL) {
            rc = fs_err_set(err, FS_EFORMAT, "%s %s: the answer is not JSON", method, path);
        }
    }
    if (resp.body != NULL) {
        fs_wipe(resp.body, resp.len);
    }
    fs_httpc_resp_clear(&resp);
    return rc;
}

/* ------------------------------------------------------------ layout */

/* The job as lib/proto sees it, from a spec (sizes: caller's, parties entries). */
static int spec_fj(const struct fs_job_spec *spec, size_t *sizes, struct fs_fedsvd_job *fj,
                   struct fs_err *err)
{
    memset(fj, 0, sizeof *fj);
    for (uint32_t v = 0; v < spec->parties; v++) {
        sizes[v] = (size_t)spec->fed.party_sizes[v];
    }
    fj->partition = FS_FEDSVD_SAMPLES;
    fj->rows = (size_t)spec->rows;
    fj->cols = (size_t)spec->cols;
    fj->parties = spec->parties;
    fj->sizes = sizes;
    fj->shards = spec->fed.shards;
    return fs_fedsvd_job_check(fj, err);
}

static int layout(const agg_mgr *m, const struct fs_fedsvd_job *fj, const char *self_url,
                  struct fs_job_shard *sh, uint32_t S, int strict, struct fs_err *err)
{
    if (strict && S - 1 > m->cfg.npeers) {
        return fs_err_set(err, FS_EFORMAT,
                          "shards: a job of %u shards needs %u shard peers (--shard-peer); this "
                          "server has %u",
                          S, S - 1, m->cfg.npeers);
    }
    for (uint32_t s = 0; s < S; s++) {
        memset(&sh[s], 0, sizeof sh[s]);
        sh[s].shard = s;
        snprintf(sh[s].url, sizeof sh[s].url, "%s",
                 s == 0               ? self_url
                 : s <= m->cfg.npeers ? m->cfg.peers[s - 1]
                                      : "");
        if (fs_fedsvd_shard_rows(fj, s, &sh[s].lo, &sh[s].hi) != 0 ||
            fs_fedsvd_shard_window(fj, s, &sh[s].off, &sh[s].len) != 0) {
            return fs_err_set(err, FS_EFORMAT, "shards: %u shards do not fit %llu rows", S,
                              (unsigned long long)fj->rows);
        }
    }
    return 0;
}

/* ------------------------------------------------------------ creating the windows */

static json_t *window_body(const struct fs_job_spec *spec, uint32_t chunk_words,
                           const struct fs_job_shard *sh, uint32_t S, const uint8_t (*digests)[32])
{
    struct fs_shard_window w;
    size_t *sizes = calloc((size_t)spec->parties + 1, sizeof *sizes);
    json_t *b;

    if (sizes == NULL) {
        return NULL;
    }
    for (uint32_t v = 0; v < spec->parties; v++) {
        sizes[v] = (size_t)spec->fed.party_sizes[v];
    }
    memset(&w, 0, sizeof w);
    w.shard = sh->shard;
    w.round = fs_job_aggregations(spec) - 1;
    w.shards = S;
    w.parties = spec->parties;
    w.chunk_words = chunk_words;
    w.total_words = spec->rows * spec->cols;
    w.offset = sh->off;
    w.words = sh->len;
    w.rows = spec->rows;
    w.cols = spec->cols;
    w.party_auth = digests;
    w.party_sizes = sizes;
    b = fs_shardwire_window_encode(&w);
    free(sizes);
    return b;
}

/* ------------------------------------------------------------ deleting the windows
 *
 * A window is deleted on its peer when the job ends (or its creation
 * fails). A peer that is down then must not keep the window's files for
 * ever: the deletion is first recorded, durably, in
 * <data>/shard-deletions/<job>.<shard>.json (shardgc.h: no token), and a
 * thread of the coordinator sends the DELETE, again and again with a
 * growing pause (DEL_BACKOFF_MIN doubling to DEL_BACKOFF_MAX seconds) until
 * the peer answers 204 or 404, also after a restart of the coordinator (the
 * records are read again at its start). A record older than
 * --shard-deletion-max-age-s whose try fails is given up: moved to
 * shard-deletions/abandoned/ with its last error, logged once (warning),
 * counted on /metrics and listed by GET /v1/shard-deletions, and never
 * tried again (by then the peer's --shard-window-ttl-s removes the window
 * by itself). */

#define DEL_BACKOFF_MIN 1.0  /* s, after the first failed try */
#define DEL_BACKOFF_MAX 60.0 /* s */
#define DEL_IDLE        3600 /* s, the thread's sleep without a pending record */
#define DEL_TRACKED_MAX 4096 /* records whose pauses are kept (more: tried every pass) */
#define DEL_DOWN_MAX    16   /* peers found unreachable in one pass, remembered */

struct del_track {
    char name[64];
    double next; /* agg_now_mono() of the next try */
    double pause;
    int seen;
};

struct agg_shardgc {
    agg_mgr *m;
    char dir[4200];
    struct fs_bgthread bt; /* woken when a deletion was recorded */
    struct del_track *t;
    size_t nt;
    /* the peers no connection reached in this pass: their other records
     * are not sent in it (each try may take POLL_TIMEOUT), and fail as
     * these did */
    struct {
        char url[FS_JOB_URL_MAX + 1];
        char error[FS_ERR_MSG_MAX];
    } down[DEL_DOWN_MAX];
    size_t ndown;
};

/* Record the deletion of job id's window on shard s at url (fsync, rename). */
static int del_record(const agg_mgr *m, const char *id, uint32_t s, const char *url,
                      struct fs_err *err)
{
    char path[4400];
    struct agg_del_rec r;
    int rc;

    memset(&r, 0, sizeof r);
    snprintf(r.job, sizeof r.job, "%s", id);
    snprintf(r.url, sizeof r.url, "%s", url);
    r.shard = s;
    r.recorded = (int64_t)time(NULL);
    rc = (size_t)snprintf(path, sizeof path, "%s/%s", m->data_dir, AGG_DEL_DIR) >= sizeof path
             ? fs_err_set(err, FS_EINVAL, "data directory path too long")
             : fs_mkdir_p(path, err);
    if (rc == 0 && (size_t)snprintf(path, sizeof path, "%s/%s/%s.%u.json", m->data_dir, AGG_DEL_DIR,
                                    id, s) >= sizeof path) {
        rc = fs_err_set(err, FS_EINVAL, "data directory path too long");
    }
    if (rc == 0) {
        rc = agg_del_write(path, &r, err);
    }
    return rc;
}

/* DELETE job id's window on url: 0 when it is gone (204, or 404: gone before). */
static int del_send(const agg_mgr *m, const char *id, const char *url, long *st, struct fs_err *err)
{
    fs_httpc *c = NULL;
    char path[128];
    int rc;

    *st = 0;
    snprintf(path, sizeof path, "/v1/shards/%s", id);
    rc = peer_client(m, url, 1, &c, err);
    if (rc == 0) {
        rc = peer_do(c, "DELETE", path, NULL, NULL, st, NULL, err);
    }
    fs_httpc_free(c);
    return rc == 0 || *st == 404 ? 0 : -1;
}

static struct del_track *del_track_of(struct agg_shardgc *g, const char *name)
{
    struct del_track *t;

    for (size_t i = 0; i < g->nt; i++) {
        if (strcmp(g->t[i].name, name) == 0) {
            return &g->t[i];
        }
    }
    if (g->nt >= DEL_TRACKED_MAX || strlen(name) >= sizeof g->t[0].name) {
        return NULL;
    }
    if (g->t == NULL && (g->t = calloc(DEL_TRACKED_MAX, sizeof *g->t)) == NULL) {
        return NULL;
    }
    t = &g->t[g->nt++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, strlen(name) + 1); /* fits: checked above */
    return t;
}

/* Try record name once (when due); its pause doubles when the peer does
 * not take the DELETE. *next: the earliest next try of the pass. */
static void del_one(struct agg_shardgc *g, const char *name, double now, double *next)
{
    struct del_track *t = del_track_of(g, name);
    struct fs_err err = {0};
    struct agg_del_rec r;
    char path[4400];
    int64_t max = (int64_t)g->m->cfg.shard_deletion_max_age_s;
    int64_t age;
    double pause;
    long st = 0;

    if (t != NULL) {
        t->seen = 1;
        if (t->next > now) {
            *next = t->next < *next ? t->next : *next;
            return;
        }
    }
    if ((size_t)snprintf(path, sizeof path, "%s/%s", g->dir, name) >= sizeof path) {
        return;
    }
    if (agg_del_read(g->dir, name, &r) != 0) {
        fs_log_pack(FS_LOG_WARN, "malformed shard deletion record removed", "{s:s}", "file", name);
        (void)unlink(path);
        return;
    }
    for (size_t i = 0; i < g->ndown; i++) {
        if (strcmp(g->down[i].url, r.url) == 0) {
            fs_err_set(&err, FS_EUNAVAILABLE,
                       "DELETE /v1/shards/%s: not sent, the peer was unreachable a moment "
                       "before: %s",
                       r.job, g->down[i].error);
            break;
        }
    }
    if (err.msg[0] == '\0' && del_send(g->m, r.job, r.url, &st, &err) == 0) {
        fs_log_pack(t != NULL && t->pause > 0 ? FS_LOG_INFO : FS_LOG_DEBUG, "shard window deleted",
                    "{s:s, s:i}", "job", r.job, "shard", (int)r.shard);
        (void)unlink(path);
        if (t != NULL) {
            t->seen = 0; /* forgotten at the end of the pass */
        }
        return;
    }
    if (st == 0 && g->ndown < DEL_DOWN_MAX && err.msg[0] != '\0') { /* unreachable */
        int known = 0;
        for (size_t i = 0; i < g->ndown; i++) {
            known = known || strcmp(g->down[i].url, r.url) == 0;
        }
        if (!known) {
            snprintf(g->down[g->ndown].url, sizeof g->down[0].url, "%s", r.url);
            const char *why = strstr(err.msg, ": "); /* without "DELETE /v1/shards/<job>" */
            snprintf(g->down[g->ndown].error, sizeof g->down[0].error, "%s",
                     why != NULL ? why + 2 : err.msg);
            g->ndown++;
        }
    }
    age = (int64_t)time(NULL) - r.recorded;
    if (max > 0 && age >= max) { /* given up: kept, listed, counted; never tried again */
        struct fs_err e2 = {0};
        if (agg_del_abandon(g->dir, name, &r, err.msg, &e2) == 0) {
            fs_log_pack(FS_LOG_WARN,
                        "shard window deletion abandoned after --shard-deletion-max-age-s "
                        "(listed by GET /v1/shard-deletions)",
                        "{s:s, s:i, s:s, s:I, s:s}", "job", r.job, "shard", (int)r.shard, "peer",
                        r.url, "age_s", (json_int_t)age, "error", err.msg);
            if (t != NULL) {
                t->seen = 0;
            }
            return;
        }
        fs_log_pack(FS_LOG_WARN, "cannot record a shard window deletion as abandoned",
                    "{s:s, s:i, s:s}", "job", r.job, "shard", (int)r.shard, "error", e2.msg);
    }
    fs_log_pack(t == NULL || t->pause == 0 ? FS_LOG_WARN : FS_LOG_DEBUG,
                "cannot delete a shard window; tried again later", "{s:s, s:i, s:s}", "job", r.job,
                "shard", (int)r.shard, "error", err.msg);
    pause = t == NULL                        ? DEL_BACKOFF_MAX
            : t->pause == 0                  ? DEL_BACKOFF_MIN
            : 2 * t->pause < DEL_BACKOFF_MAX ? 2 * t->pause
                                             : DEL_BACKOFF_MAX;
    if (t != NULL) {
        t->pause = pause;
    }
    if (max > 0 && max - age > 0 && max - age < pause) { /* the last try at the age */
        pause = (double)(max - age);
    }
    if (t != NULL) {
        t->next = agg_now_mono() + pause;
    }
    *next = now + pause < *next ? now + pause : *next;
}

/* One pass over the records: each due one tried. @return seconds until the next try. */
static double del_pass(struct agg_shardgc *g)
{
    double now = agg_now_mono();
    double next = now + DEL_IDLE;
    DIR *d = opendir(g->dir);
    struct dirent *e;
    size_t k = 0;

    for (size_t i = 0; i < g->nt; i++) {
        g->t[i].seen = 0;
    }
    g->ndown = 0;
    while (d != NULL && (e = readdir(d)) != NULL && !fs_bgthread_stopping(&g->bt)) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.') {
            continue;
        }
        /* a record torn by a crash (not one being written now) */
        if (strstr(e->d_name, ".tmp.") != NULL) {
            char path[4400];
            struct stat st;
            if ((size_t)snprintf(path, sizeof path, "%s/%s", g->dir, e->d_name) < sizeof path &&
                stat(path, &st) == 0 && time(NULL) - st.st_mtime > 60) {
                (void)unlink(path);
            }
            continue;
        }
        if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0) {
            del_one(g, e->d_name, now, &next);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    for (size_t i = 0; i < g->nt; i++) { /* forget the records that are gone */
        if (g->t[i].seen) {
            g->t[k++] = g->t[i];
        }
    }
    g->nt = k;
    return next > now ? next - now : 0;
}

static void *gc_main(void *arg)
{
    struct agg_shardgc *g = arg;

    while (!fs_bgthread_stopping(&g->bt)) {
        double wait = del_pass(g);
        (void)fs_bgthread_wait(&g->bt, (unsigned)(wait * 1000) + 1);
    }
    return NULL;
}

void agg_shard_gc_start(agg_mgr *m)
{
    struct agg_shardgc *g;
    struct stat st;

    if (m->sgc != NULL) {
        return;
    }
    g = calloc(1, sizeof *g);
    if (g == NULL ||
        (size_t)snprintf(g->dir, sizeof g->dir, "%s/%s", m->data_dir, AGG_DEL_DIR) >=
            sizeof g->dir ||
        (m->cfg.npeers == 0 && stat(g->dir, &st) != 0)) {
        free(g); /* no peers and nothing pending: no thread */
        return;
    }
    g->m = m;
    fs_bgthread_init(&g->bt);
    if (fs_bgthread_start(&g->bt, gc_main, g, NULL) != 0) {
        fs_log(FS_LOG_WARN, "cannot start the shard deletion thread", NULL);
        fs_bgthread_stop(&g->bt);
        free(g);
        return;
    }
    m->sgc = g;
}

void agg_shard_gc_stop(agg_mgr *m)
{
    struct agg_shardgc *g = m->sgc;

    if (g == NULL) {
        return;
    }
    fs_bgthread_stop(&g->bt);
    free(g->t);
    free(g);
    m->sgc = NULL;
}

/* Delete job id's windows on shards 1..S-1: recorded, then sent by the
 * deletion thread (without one, or a record that cannot be written: sent
 * once now). */
static void delete_windows(agg_mgr *m, const char *id, const struct fs_job_shard *sh, uint32_t S)
{
    int kick = 0;

    for (uint32_t s = 1; s < S; s++) {
        struct fs_err err = {0};
        long st = 0;
        if (sh[s].url[0] == '\0') {
            fs_log_pack(FS_LOG_WARN, "cannot delete a shard window: no --shard-peer for it",
                        "{s:s, s:i}", "job", id, "shard", (int)s);
            continue;
        }
        if (m->sgc != NULL && del_record(m, id, s, sh[s].url, &err) == 0) {
            kick = 1;
            continue;
        }
        if (err.msg[0] != '\0') {
            fs_log_pack(FS_LOG_WARN, "cannot record a shard window's deletion", "{s:s, s:i, s:s}",
                        "job", id, "shard", (int)s, "error", err.msg);
        }
        if (del_send(m, id, sh[s].url, &st, &err) != 0) {
            fs_log_pack(FS_LOG_WARN, "cannot delete a shard window", "{s:s, s:i, s:s}", "job", id,
                        "shard", (int)s, "error", err.msg);
        }
    }
    if (kick) {
        fs_bgthread_wake(&m->sgc->bt);
    }
}

int agg_shard_create_windows(agg_mgr *m, const char *id, const struct fs_job_spec *spec,
                             const uint8_t (*digests)[32], struct fs_err *err)
{
    struct fs_job_shard sh[FS_JOB_MAX_SHARDS];
    struct fs_fedsvd_job fj;
    size_t *sizes;
    uint32_t S = spec->fed.shards;
    uint32_t made = 1;
    int rc;

    if (!fs_algo_is_fedsvd(spec->algo) || S <= 1) {
        return 0;
    }
    sizes = calloc((size_t)spec->parties + 1, sizeof *sizes);
    if (sizes == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = spec_fj(spec, sizes, &fj, err);
    if (rc == 0) {
        rc = layout(m, &fj, spec->server_url, sh, S, 1, err);
    }
    for (uint32_t s = 1; rc == 0 && s < S; s++) {
        json_t *b = window_body(spec, m->cfg.chunk_words, &sh[s], S, digests);
        char *txt = b != NULL ? json_dumps(b, JSON_COMPACT) : NULL;
        fs_httpc *c = NULL;
        char path[128];
        long st = 0;
        snprintf(path, sizeof path, "/v1/shards/%s", id);
        rc = txt == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
                         : peer_client(m, sh[s].url, 0, &c, err);
        if (rc == 0) {
            rc = peer_do(c, "PUT", path, txt, NULL, &st, NULL, err);
        }
        if (rc != 0) {
            struct fs_err e2 = *err;
            rc = fs_err_set(err, FS_EUNAVAILABLE, "shard %u (%s) cannot take its window: %s", s,
                            sh[s].url, e2.msg);
            made = st == 0 || st >= 500 ? s + 1 : made; /* made, perhaps, with no answer */
        } else {
            made = s + 1;
        }
        fs_httpc_free(c);
        free(txt);
        json_decref(b);
    }
    if (rc != 0 && made > 1) {
        delete_windows(m, id, sh, made);
    }
    free(sizes);
    return rc;
}

/* ------------------------------------------------------------ the job's state */

static void shard_detach(agg_job *j)
{
    struct agg_shardjob *sj = j->sj;

    if (sj == NULL) {
        return;
    }
    fs_bgthread_stop(&sj->poller);
    free(sj->elsewhere);
    free(sj);
    j->sj = NULL;
}

int agg_shard_attach(agg_job *j, int strict, struct fs_err *err)
{
    struct agg_shardjob *sj;
    int rc;

    if (!j->fed || j->spec.fed.shards <= 1) {
        return 0;
    }
    sj = calloc(1, sizeof *sj);
    if (sj == NULL || (sj->elsewhere = calloc((size_t)j->n + 1, 1)) == NULL) {
        free(sj);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    sj->S = j->spec.fed.shards;
    fs_bgthread_init(&sj->poller);
    j->sj = sj;
    j->sj_detach = shard_detach;
    rc = layout(j->mgr, &j->fj, j->server_url, sj->sh, sj->S, strict, err);
    if (rc == 0) {
        j->sj_doc = fs_job_shards_encode(sj->sh, sj->S);
        rc = j->sj_doc == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
    }
    if (rc != 0) {
        shard_detach(j);
    }
    return rc;
}

void agg_shard_forget_windows(agg_job *j)
{
    if (j->sj != NULL) {
        delete_windows(j->mgr, j->id, j->sj->sh, j->sj->S);
    }
}

int agg_shard_is_sharded(const agg_job *j, uint32_t r)
{
    return j->sj != NULL && r + 1 == j->naggs;
}

/* ------------------------------------------------------------ masked input */

int agg_shard_begin(agg_job *j, uint32_t r, uint64_t len, uint32_t **active, size_t *na,
                    uint64_t *win_len, struct fs_err *err)
{
    const uint32_t *set;
    int rc;

    *active = NULL;
    *na = 0;
    *win_len = j->sj->sh[0].len;
    rc = fs_secagg_server_begin_window(j->sm, r, len, 0, j->sj->sh[0].len, err);
    if (rc != 0) {
        return rc;
    }
    set = fs_secagg_server_set(j->sm, 0, na);
    *active = malloc((*na + 1) * sizeof **active);
    if (*active == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    memcpy(*active, set, *na * sizeof *set);
    return 0;
}

/* mu held: 1 when the open round may close as complete (the peers' part). */
int agg_shard_round_ready(const agg_job *j)
{
    const struct agg_shardjob *sj = j->sj;

    if (sj == NULL || j->st.phase != FS_JOB_MASKED_INPUT || !agg_shard_is_sharded(j, j->st.r)) {
        return 1;
    }
    if (!sj->polled) {
        return 0;
    }
    for (uint32_t v = 1; v <= j->n; v++) {
        if (j->st.in_round[v] && !j->st.dropped[v] && !sj->elsewhere[v]) {
            return 0;
        }
    }
    return 1;
}

/* 1 when closing the open round is the sharded masked_input's close. */
int agg_shard_closes_masked(const agg_job *j)
{
    return j->sj != NULL && j->st.phase == FS_JOB_MASKED_INPUT && agg_shard_is_sharded(j, j->st.r);
}

/* sm_mu held: close masked_input counting only the parties complete on
 * every shard; *body: the verdict for the close event (replay uses it). */
int agg_shard_close_masked(agg_job *j, char **body, struct fs_err *err)
{
    struct agg_shardjob *sj = j->sj;
    uint32_t *ids = calloc((size_t)j->n + 1, sizeof *ids);
    json_t *doc;
    size_t k = 0;
    int rc;

    *body = NULL;
    if (ids == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    pthread_mutex_lock(&j->mu);
    for (uint32_t v = 1; v <= j->n; v++) {
        if (!sj->elsewhere[v]) {
            j->st.sent[v] = 0; /* incomplete on a shard: dropped like any incomplete upload */
        } else {
            ids[k++] = v;
        }
    }
    pthread_mutex_unlock(&j->mu);
    doc = fs_shardwire_verdict_encode(ids, k);
    *body = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    free(ids);
    if (*body == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_secagg_server_close_masked_ext(j->sm, sj->elsewhere + 1, err);
    return rc;
}

/* Replay of the close event: the verdict it recorded. */
int agg_shard_replay_close(agg_job *j, const void *body, size_t len, struct fs_err *err)
{
    json_error_t je;
    json_t *doc;
    int rc;

    if (!agg_shard_closes_masked(j)) {
        return 0;
    }
    doc = json_loadb(body, len, 0, &je);
    pthread_mutex_lock(&j->mu);
    rc = fs_shardwire_verdict_decode(doc, j->n, j->sj->elsewhere, err);
    if (rc == 0) {
        j->sj->polled = 1;
    }
    pthread_mutex_unlock(&j->mu);
    json_decref(doc);
    return rc != 0 ? fs_err_prefix(err, "close event without the shards' verdict: ") : 0;
}

/* ------------------------------------------------------------ the poller */

/* Fail the job for shard s: why is the shard's own error when its window
 * failed, else "" (its window is gone, or it has no peer). */
static void fail_lost(agg_job *j, uint32_t s, const char *why)
{
    char reason[FS_SHARDWIRE_ERROR_MAX + 64];

    if (j->sj->sh[s].url[0] == '\0') {
        snprintf(reason, sizeof reason, "shard %u has no --shard-peer on this server", s);
    } else if (why[0] != '\0') {
        snprintf(reason, sizeof reason, "shard %u failed: %s", s, why);
    } else {
        snprintf(reason, sizeof reason, "shard %u lost its state after a restart", s);
    }
    pthread_mutex_lock(&j->sm_mu);
    if (j->sm != NULL && fs_jobsm_running(&j->st)) {
        agg_fail_job(j, reason);
    }
    pthread_mutex_unlock(&j->sm_mu);
    agg_wake(j->mgr);
}

/* Ask every peer which parties are complete: 0, or the shard that lost
 * its window (404) or whose window failed (why: its error, cap
 * FS_SHARDWIRE_ERROR_MAX), or -1 when a peer could not be asked (try again). */
static int poll_peers(agg_job *j, fs_httpc **cs, uint8_t *acc, char *why)
{
    struct agg_shardjob *sj = j->sj;
    char path[128];

    snprintf(path, sizeof path, "/v1/shards/%s", j->id);
    memset(acc, 1, (size_t)j->n + 1);
    for (uint32_t s = 1; s < sj->S; s++) {
        struct fs_err err = {0};
        uint8_t *mine = calloc((size_t)j->n + 1, 1);
        json_t *doc = NULL;
        struct fs_shard_status ss;
        long st = 0;
        int rc;
        if (mine == NULL) {
            return -1;
        }
        if (sj->sh[s].url[0] == '\0') {
            free(mine);
            return (int)s; /* no peer for it on this server (any more) */
        }
        rc = cs[s] == NULL ? peer_client(j->mgr, sj->sh[s].url, 1, &cs[s], &err) : 0;
        if (rc == 0) {
            rc = peer_do(cs[s], "GET", path, NULL, NULL, &st, &doc, &err);
        }
        if (rc != 0) {
            free(mine);
            json_decref(doc);
            if (st == 404) {
                return (int)s;
            }
            fs_log_pack(FS_LOG_DEBUG, "shard not answering", "{s:s, s:i, s:s}", "job", j->id,
                        "shard", (int)s, "error", err.msg);
            return -1;
        }
        memset(&ss, 0, sizeof ss);
        ss.parties = j->n;
        ss.complete = mine + 1;
        if (fs_shardwire_status_decode(doc, &ss, &err) != 0) {
            fs_log_pack(FS_LOG_WARN, "shard status malformed", "{s:s, s:i, s:s}", "job", j->id,
                        "shard", (int)s, "error", err.msg);
            free(mine);
            json_decref(doc);
            return -1;
        }
        for (uint32_t v = 1; v <= j->n; v++) {
            acc[v] &= mine[v];
        }
        free(mine);
        json_decref(doc);
        if (ss.state == FS_SHARD_FAILED) { /* final (a restarted peer reports it too) */
            snprintf(why, FS_SHARDWIRE_ERROR_MAX, "%s",
                     ss.error[0] != '\0' ? ss.error : "(no reason)");
            return (int)s;
        }
    }
    return 0;
}

static void *poller_main(void *arg)
{
    agg_job *j = arg;
    struct agg_shardjob *sj = j->sj;
    fs_httpc *cs[FS_JOB_MAX_SHARDS] = {0};
    uint8_t *acc = calloc((size_t)j->n + 1, 1);
    char why[FS_SHARDWIRE_ERROR_MAX];
    unsigned idle = 0;

    while (acc != NULL && !fs_bgthread_wait(&sj->poller, POLL_MS)) {
        int running;
        int masked;
        int rc;
        pthread_mutex_lock(&j->mu);
        running = fs_jobsm_running(&j->st);
        masked = running && !j->st.finishing && j->st.phase == FS_JOB_MASKED_INPUT &&
                 agg_shard_is_sharded(j, j->st.r);
        pthread_mutex_unlock(&j->mu);
        if (!running) {
            delete_windows(j->mgr, j->id, sj->sh, sj->S);
            break;
        }
        if (!masked && ++idle % 4 != 0) {
            continue; /* outside masked_input: check that the windows are there every second */
        }
        why[0] = '\0';
        rc = poll_peers(j, cs, acc, why);
        if (rc > 0) {
            fail_lost(j, (uint32_t)rc, why);
            continue;
        }
        if (rc == 0 && masked) {
            int changed;
            pthread_mutex_lock(&j->mu);
            changed = !sj->polled || memcmp(sj->elsewhere, acc, (size_t)j->n + 1) != 0;
            memcpy(sj->elsewhere, acc, (size_t)j->n + 1);
            sj->polled = 1;
            pthread_mutex_unlock(&j->mu);
            if (changed) {
                agg_wake(j->mgr);
            }
        }
    }
    for (uint32_t s = 0; s < FS_JOB_MAX_SHARDS; s++) {
        fs_httpc_free(cs[s]);
    }
    free(acc);
    return NULL;
}

void agg_shard_tick(agg_job *j)
{
    struct agg_shardjob *sj = j->sj;

    /* once per job and run: a job that ended while this server was down
     * gets its windows deleted now (the poller does it and exits) */
    if (sj == NULL || fs_bgthread_started(&sj->poller) || j->replaying) {
        return;
    }
    if (fs_bgthread_start(&sj->poller, poller_main, j, NULL) != 0) {
        fs_log_pack(FS_LOG_WARN, "cannot start the shard poller", "{s:s}", "job", j->id);
    }
}

/* ------------------------------------------------------------ finishing */

/* The finish body: survivors, exponent and the plan (secret: wiped by the caller). */
static char *finish_body(const uint32_t *u3, size_t n3, int e, const struct fs_prg_term *plan,
                         size_t np)
{
    return fs_shardwire_finish_encode(u3, n3, e, plan, np);
}

/* A peer that cannot be reached or answers 5xx (restarting, say): try again later. */
static int peer_transient(long st)
{
    return st == 0 || st >= 500;
}

/* POST the finish to shard s. A peer that is away (peer_transient) is not
 * an error: fetch_r sends the finish again once it answers as receiving. */
static int send_finish_to(agg_job *j, fs_httpc *c, uint32_t s, const char *txt, struct fs_err *err)
{
    char path[160];
    long st = 0;
    int rc;

    snprintf(path, sizeof path, "/v1/shards/%s/finish", j->id);
    rc = peer_do(c, "POST", path, txt, NULL, &st, NULL, err);
    if (rc != 0 && peer_transient(st)) {
        fs_log_pack(FS_LOG_WARN, "shard away at the finish; sent again when it is back",
                    "{s:s, s:i, s:s}", "job", j->id, "shard", (int)s, "error", err->msg);
        return 0;
    }
    if (rc != 0) {
        return st == 404 ? fs_err_set(err, FS_ESTATE, "shard %u lost its state after a restart", s)
                         : fs_err_set(err, FS_EIO, "shard %u: %s", s, err->msg);
    }
    return 0;
}

/* POST the finish to every peer. */
static int send_finish(agg_job *j, const char *txt, struct fs_err *err)
{
    struct agg_shardjob *sj = j->sj;

    for (uint32_t s = 1; s < sj->S; s++) {
        fs_httpc *c = NULL;
        int rc = peer_client(j->mgr, sj->sh[s].url, 0, &c, err);
        if (rc == 0) {
            rc = send_finish_to(j, c, s, txt, err);
        }
        fs_httpc_free(c);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* Wait for shard s's R and read it. A peer that restarted while it was
 * finishing reloads its window as receiving (it never stores the plan):
 * the finish txt is sent to it again; a peer away for a moment is waited for. */
static int fetch_r(agg_job *j, uint32_t s, double deadline, const char *txt, fs_mat **r,
                   struct fs_err *err)
{
    struct agg_shardjob *sj = j->sj;
    struct fs_io_caps caps = fs_io_caps_default();
    char path[160];
    char file[4600];
    fs_httpc *c = NULL;
    int rc = peer_client(j->mgr, sj->sh[s].url, 0, &c, err);

    *r = NULL;
    snprintf(path, sizeof path, "/v1/shards/%s", j->id);
    while (rc == 0) {
        json_t *doc = NULL;
        const char *state;
        struct fs_shard_status ss;
        long st = 0;
        rc = peer_do(c, "GET", path, NULL, NULL, &st, &doc, err);
        if (rc != 0 && peer_transient(st) && agg_now_mono() <= deadline && !j->mgr->closing) {
            rc = 0; /* restarting: ask again */
            usleep(100 * 1000);
            continue;
        }
        if (rc != 0) {
            if (st == 404) {
                rc = fs_err_set(err, FS_ESTATE, "shard %u lost its state after a restart", s);
            }
            break;
        }
        memset(&ss, 0, sizeof ss);
        ss.parties = j->n;
        state =
            fs_shardwire_status_decode(doc, &ss, err) == 0 ? fs_shard_state_name(ss.state) : NULL;
        if (state != NULL && strcmp(state, "done") == 0) {
            json_decref(doc);
            break;
        }
        if (state != NULL && strcmp(state, "receiving") == 0) {
            fs_log_pack(FS_LOG_INFO, "shard restarted while finishing: the finish sent again",
                        "{s:s, s:i}", "job", j->id, "shard", (int)s);
            rc = send_finish_to(j, c, s, txt, err);
            if (rc != 0) {
                json_decref(doc);
                break;
            }
        } else if (state == NULL || strcmp(state, "failed") == 0) {
            const char *e = state == NULL         ? err->msg
                            : ss.error[0] != '\0' ? ss.error
                                                  : "(no reason)";
            rc = fs_err_set(err, FS_EIO, "shard %u failed: %s", s, e);
            json_decref(doc);
            break;
        }
        json_decref(doc);
        if (agg_now_mono() > deadline || j->mgr->closing) {
            rc = fs_err_set(err, FS_EIO, "shard %u: no R in time", s);
            break;
        }
        usleep(100 * 1000);
    }
    if (rc == 0) {
        snprintf(file, sizeof file, "%s/shard-%u-r.npy", j->dir, s);
        snprintf(path, sizeof path, "/v1/shards/%s/r.npy", j->id);
        rc = fs_mkdir_p(j->dir, err);
        if (rc == 0) {
            long st = 0;
            rc = peer_do(c, "GET", path, NULL, file, &st, NULL, err);
        }
        if (rc == 0) {
            caps.max_elems = (uint64_t)j->spec.cols * j->spec.cols;
            rc = fs_io_load_dense(file, FS_FMT_NPY, &caps, r, err);
        }
        if (rc == 0 &&
            ((*r)->cols != (size_t)j->spec.cols || (*r)->rows > (size_t)j->spec.cols ||
             (*r)->rows != (sj->sh[s].hi - sj->sh[s].lo < j->spec.cols ? sj->sh[s].hi - sj->sh[s].lo
                                                                       : j->spec.cols))) {
            rc = fs_err_set(err, FS_EFORMAT, "shard %u: R has the wrong shape", s);
        }
        (void)unlink(file);
    }
    fs_httpc_free(c);
    return rc;
}

/*
 * The sharded SVD aggregation is complete (sm_mu held, on the worker; the
 * own window is unmasked, its survivors u3 checked, e their exponent): the
 * plan to the peers, the own window reduced to R_0, the peers' R_s
 * fetched and folded one by one into the running factor (O(d^2) however
 * many shards), TSQR into *pub (S and V'). The finish body (the plan) is
 * kept until every R is in, for a peer that restarts meanwhile.
 */
int agg_shard_finish_svd(agg_job *j, const struct fs_prg_term *plan, size_t np, const uint32_t *u3,
                         size_t n3, int e, struct fs_fedsvd_published *pub, struct fs_err *err)
{
    struct agg_shardjob *sj = j->sj;
    fs_mat *acc = NULL;
    enum fs_topk_method method =
        j->spec.fed.method == FS_JOB_RANDOMIZED ? FS_TOPK_RANDOMIZED : FS_TOPK_AUTO;
    char *txt = finish_body(u3, n3, e, plan, np);
    uint64_t *owned = NULL;
    uint64_t n = 0;
    double wait_s = (double)j->spec.round_timeout_s;
    double deadline;
    int rc = txt == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;

    if (rc == 0) {
        rc = send_finish(j, txt, err);
    }
    if (rc == 0) {
        owned = fs_secagg_server_take_sum(j->sm, &n);
        if (owned == NULL || n != sj->sh[0].len) {
            free(owned);
            rc = fs_err_set(err, FS_EINTERNAL, "the aggregation's sum is not available");
        }
    }
    if (rc == 0) {
        rc = fs_fedsvd_shard_r(&j->fj, 0, e, owned, &acc, err); /* takes owned over */
    }
    deadline = agg_now_mono() + (wait_s > R_WAIT_MIN_S ? wait_s : R_WAIT_MIN_S);
    for (uint32_t s = 1; rc == 0 && s < sj->S; s++) {
        fs_mat *r = NULL;
        rc = fetch_r(j, s, deadline, txt, &r, err);
        if (rc == 0) {
            rc = fs_fedsvd_tsqr_fold(&acc, r, (size_t)j->spec.cols, err);
        }
        if (r != NULL) {
            fs_mat_wipe(r);
        }
        fs_mat_free(r);
    }
    if (txt != NULL) {
        fs_wipe(txt, strlen(txt));
        free(txt);
    }
    if (rc == 0) {
        rc = fs_fedsvd_tsqr_finish(&j->fj, acc, (size_t)j->spec.fed.k, method, NULL, pub, err);
        acc = NULL;
    }
    if (acc != NULL) {
        fs_mat_wipe(acc);
    }
    fs_mat_free(acc);
    return rc;
}
