/* Sharded fedsvd / fedpca jobs (docs/sharding.md): the job document's
 * "shards" list, one HTTP client per shard peer, and which request carries
 * each masked chunk of the SVD aggregation.
 *
 * The SVD aggregation's vector of m n words is shard-blocked: shard s holds
 * the words [off_s, off_s + len_s) (the rows [lo_s, hi_s) of the masked
 * matrix, lo_s = floor(s m / S)). Shard 0 is the coordinator, the server the
 * job runs on: its chunks go to the job route as in an unsharded job. Shard
 * s > 0 gets its window's chunks at {url}/v1/shards/{job}/masked/{c}, c
 * local to the window (global offset off_s + c cw, the last one clipped to
 * the window), with the same party token and the same TLS rules as the
 * aggregation server. Chunks are numbered across the shards for progress:
 * shard 0's first, then shard 1's, ... A job without a "shards" list (or
 * with one entry) is unsharded and uploads exactly as before. */
#include "worker.h"

#include "proto/fedsvd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ca_shard {
    char url[FS_JOB_URL_MAX + 1];
    uint64_t lo, hi;   /* rows of the masked matrix */
    uint64_t off, len; /* words of the aggregation vector */
    fs_httpc *http;    /* shard s > 0; shard 0 uses the worker's client */
};

struct ca_shards {
    uint32_t n;
    struct ca_shard s[FS_FEDSVD_MAX_SHARDS];
};

uint32_t ca_wk_shard_count(const struct ca_wk *w)
{
    return w->shards != NULL ? w->shards->n : 1;
}

void ca_wk_shards_free(struct ca_wk *w)
{
    if (w->shards == NULL) {
        return;
    }
    for (uint32_t i = 0; i < w->shards->n; i++) {
        fs_httpc_free(w->shards->s[i].http);
    }
    free(w->shards);
    w->shards = NULL;
}

/* "[a, b]" of two integers >= 0 into *a, *b. */
static int pair_get(const json_t *v, uint64_t *a, uint64_t *b)
{
    const json_t *x = json_array_get(v, 0);
    const json_t *y = json_array_get(v, 1);

    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(x) ||
        !json_is_integer(y) || json_integer_value(x) < 0 || json_integer_value(y) < 0) {
        return -1;
    }
    *a = (uint64_t)json_integer_value(x);
    *b = (uint64_t)json_integer_value(y);
    return 0;
}

/* One entry of the list: shard i's url, rows and words, which must be the
 * row split every party encodes (lo = floor(i m / S)). */
static int shard_entry(struct ca_wk *w, const json_t *e, uint32_t i, uint32_t n, uint64_t m,
                       uint64_t cols, struct ca_shard *sh, struct fs_err *err)
{
    const json_t *id = json_object_get(e, "shard");
    const json_t *url = json_object_get(e, "url");
    uint64_t lo_want = (uint64_t)i * m / n;
    uint64_t hi_want = (uint64_t)(i + 1) * m / n;

    if (!json_is_object(e) || !json_is_integer(id) || json_integer_value(id) != (json_int_t)i) {
        return fs_err_set(err, FS_EFORMAT, "shards[%u].shard: expected %u", i, i);
    }
    if (!json_is_string(url) || json_string_length(url) == 0 ||
        json_string_length(url) > FS_JOB_URL_MAX) {
        return fs_err_set(err, FS_EFORMAT, "shards[%u].url: expected a URL of at most %d bytes", i,
                          FS_JOB_URL_MAX);
    }
    if (pair_get(json_object_get(e, "rows"), &sh->lo, &sh->hi) != 0 ||
        pair_get(json_object_get(e, "words"), &sh->off, &sh->len) != 0) {
        return fs_err_set(err, FS_EFORMAT, "shards[%u]: rows and words must be [a, b] pairs", i);
    }
    if (sh->lo != lo_want || sh->hi != hi_want || sh->hi == sh->lo || sh->off != sh->lo * cols ||
        sh->len != (sh->hi - sh->lo) * cols) {
        return fs_err_set(err, FS_EINVAL,
                          "shards[%u]: rows [%llu, %llu), words %llu+%llu are not the split of "
                          "%llu rows over %u shards ([%llu, %llu))",
                          i, (unsigned long long)sh->lo, (unsigned long long)sh->hi,
                          (unsigned long long)sh->off, (unsigned long long)sh->len,
                          (unsigned long long)m, n, (unsigned long long)lo_want,
                          (unsigned long long)hi_want);
    }
    memcpy(sh->url, json_string_value(url), json_string_length(url) + 1);
    while (sh->url[0] != '\0' && sh->url[strlen(sh->url) - 1] == '/') {
        sh->url[strlen(sh->url) - 1] = '\0';
    }
    /* the rule every URL the agent uses follows: https off loopback */
    if (fs_http_url_check(sh->url, w->ag->cfg.insecure_http, err) != 0) {
        return fs_err_prefix(err, "shards[%u].url: ", i);
    }
    return 0;
}

/* A client for shard peer sh: the party token and the TLS settings of the
 * aggregation server's client. */
static int shard_client(struct ca_wk *w, struct ca_shard *sh, struct fs_err *err)
{
    struct fs_httpc_config hc;

    fs_httpc_config_default(&hc);
    hc.base_url = sh->url;
    hc.token = w->token;
    hc.insecure = w->ag->cfg.insecure;
    hc.allow_insecure_http = w->ag->cfg.insecure_http;
    hc.ca_file = w->ag->cfg.ca_file[0] != '\0' ? w->ag->cfg.ca_file : NULL;
    hc.max_body = CA_JSON_BODY_MAX;
    hc.max_retries = 3;
    hc.backoff_max_ms = 2000;
    hc.user_agent = "fedsvd-client-agent";
    return fs_httpc_new(&sh->http, &hc, err);
}

int ca_wk_shards_read(struct ca_wk *w, const json_t *doc, const struct fs_agent_job *job,
                      struct fs_err *err)
{
    const json_t *list = json_object_get(doc, "shards");
    struct ca_shards *sh = NULL;
    size_t n;
    int rc = 0;

    if (w->shards != NULL || list == NULL || json_is_null(list)) {
        return 0; /* read once: the list is fixed when the job is created */
    }
    if (!json_is_array(list) || json_array_size(list) < 1 ||
        json_array_size(list) > FS_FEDSVD_MAX_SHARDS) {
        return fs_err_set(err, FS_EFORMAT, "shards: expected a list of 1 to %d shards",
                          FS_FEDSVD_MAX_SHARDS);
    }
    n = json_array_size(list);
    if (n == 1) {
        return 0; /* one shard: the coordinator holds everything */
    }
    if (!job->is_fed || job->fed.partition != FS_JOB_SAMPLES || job->cols == 0 || job->rows < n) {
        return fs_err_set(err, FS_EINVAL,
                          "shards: a sharded job must be fedsvd or fedpca with the samples "
                          "partition and at least one row per shard");
    }
    sh = calloc(1, sizeof *sh);
    if (sh == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = shard_entry(w, json_array_get(list, i), (uint32_t)i, (uint32_t)n, job->rows, job->cols,
                         &sh->s[i], err);
        if (rc == 0 && i > 0) {
            rc = shard_client(w, &sh->s[i], err);
        }
        sh->n = (uint32_t)(i + 1);
    }
    w->shards = sh;
    if (rc != 0) {
        ca_wk_shards_free(w);
        return rc;
    }
    fs_log_pack(FS_LOG_INFO, "sharded job: masked chunks go to each shard", "{s:s, s:i}",
                "participation", w->p->rec.id, "shards", (int)n);
    return 0;
}

/* 1 when aggregation r's upload is split over the shards. */
static int sharded(const struct ca_wk *w, uint32_t r)
{
    return w->shards != NULL && w->fed != NULL && !ca_fed_is_stats(w->fed, r);
}

uint64_t ca_wk_chunks_total(const struct ca_wk *w, uint32_t r)
{
    uint64_t cw = w->agg.chunk_words;
    uint64_t total = 0;

    if (!sharded(w, r) || cw == 0) {
        return w->agg.chunks;
    }
    for (uint32_t i = 0; i < w->shards->n; i++) {
        total += (w->shards->s[i].len + cw - 1) / cw;
    }
    return total;
}

json_t *ca_wk_shard_agg_doc(const struct ca_wk *w, uint32_t r, json_t *doc)
{
    const json_t *cwj = json_object_get(doc, "chunk_words");
    const json_t *nj = json_object_get(doc, "chunks");
    uint64_t cw;
    uint64_t len = 0;
    json_t *copy;

    if (!sharded(w, r) || !json_is_integer(cwj) || !json_is_integer(nj) ||
        json_integer_value(cwj) <= 0) {
        return json_incref(doc);
    }
    /* The coordinator's aggregation document counts the chunks of its own
     * window (shard 0); the decoder checks chunks against the whole
     * vector's length: give it the whole vector's count. */
    cw = (uint64_t)json_integer_value(cwj);
    for (uint32_t i = 0; i < w->shards->n; i++) {
        len += w->shards->s[i].len;
    }
    if ((uint64_t)json_integer_value(nj) != (w->shards->s[0].len + cw - 1) / cw) {
        return json_incref(doc); /* not shard 0's count: the decoder judges */
    }
    copy = json_copy(doc);
    if (copy != NULL &&
        json_object_set_new(copy, "chunks", json_integer((json_int_t)((len + cw - 1) / cw))) != 0) {
        json_decref(copy);
        copy = NULL;
    }
    return copy;
}

int ca_wk_upload_begin(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    uint64_t total = 0;

    if (!sharded(w, r)) {
        return 0;
    }
    for (uint32_t i = 0; i < w->shards->n; i++) {
        total += w->shards->s[i].len;
    }
    if (total != w->agg.length) {
        return fs_err_set(err, FS_EINVAL,
                          "the shards' windows hold %llu words, the aggregation %llu",
                          (unsigned long long)total, (unsigned long long)w->agg.length);
    }
    return ca_fed_set_shards(w->fed, w->shards->n, err);
}

int ca_wk_chunk_target(struct ca_wk *w, uint32_t r, uint64_t idx, struct ca_chunk_target *t,
                       struct fs_err *err)
{
    uint64_t cw = w->agg.chunk_words;
    uint64_t c = idx;
    uint32_t s = 0;
    int n;

    memset(t, 0, sizeof *t);
    t->http = w->http;
    if (!sharded(w, r)) {
        /* unsharded: the job route, global chunk idx */
        t->off = idx * cw;
        t->m = (size_t)(w->agg.length - t->off < cw ? w->agg.length - t->off : cw);
    } else {
        for (; s < w->shards->n; s++) {
            uint64_t k = (w->shards->s[s].len + cw - 1) / cw;
            if (c < k) {
                break;
            }
            c -= k;
        }
        if (s == w->shards->n) {
            return fs_err_set(err, FS_EINTERNAL, "chunk %llu beyond the shards' windows",
                              (unsigned long long)idx);
        }
        t->shard = s;
        t->off = w->shards->s[s].off + c * cw;
        t->m = (size_t)(w->shards->s[s].len - c * cw < cw ? w->shards->s[s].len - c * cw : cw);
    }
    if (s > 0) {
        t->http = w->shards->s[s].http;
        n = snprintf(t->path, sizeof t->path, "/v1/shards/%s/masked/%llu", w->p->req.inv.job_id,
                     (unsigned long long)c);
    } else {
        /* the job route (shard 0: its local chunk index is the global one) */
        n = snprintf(t->path, sizeof t->path, "%s/aggregations/%u/masked/%llu", w->jpath, r,
                     (unsigned long long)c);
    }
    return n < 0 || (size_t)n >= sizeof t->path ? fs_err_set(err, FS_EINVAL, "path too long") : 0;
}

const char *ca_wk_shard_url(const struct ca_wk *w, uint32_t s)
{
    return w->shards != NULL && s < w->shards->n ? w->shards->s[s].url : "";
}
