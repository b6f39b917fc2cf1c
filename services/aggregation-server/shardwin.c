/* The windows this server holds as a shard (see shardwin.h). */
#include "shardwin.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../../api/wire.h"
#include "core/fdio.h"
#include "io/matio.h"
#include "jobmgr_internal.h"
#include "net/auth.h"
#include "net/log.h"
#include "proto/fedsvd_shard.h"

#define WINDOWS_MAX 256 /* windows held at once */

enum win_state { W_RECEIVING = 0, W_FINISHING, W_DONE, W_FAILED };

static const char *const STATE_NAME[] = {"receiving", "finishing", "done", "failed"};

struct agg_shards {
    pthread_mutex_t mu;
    char dir[4200]; /* <data>/shards */
    int fsync;
    agg_shardwin *w[WINDOWS_MAX];
    size_t n;
};

struct agg_shardwin {
    agg_shards *reg;
    unsigned refs; /* reg->mu */
    char job[FS_JOB_ID_MAX + 1];
    char dir[4400];
    char *spec; /* the creation body, canonical (repeats compare equal) */
    uint32_t shard, round, parties, chunk_words, nshards;
    uint64_t total, off, len, nchunks;
    size_t *sizes;
    struct fs_fedsvd_job fj;
    fs_auth *auth;
    int fsync;

    pthread_mutex_t mu;
    fs_secagg_server *sm;
    enum win_state state;
    char error[256];
    uint64_t peak_rss;
    double finish_s;
    pthread_t worker;
    int worker_running;
    /* the finish request, for the worker */
    uint32_t *u3;
    size_t nu3;
    struct fs_prg_term *plan;
    size_t nplan;
    int exponent;
};

static uint64_t peak_rss_bytes(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        return 0;
    }
    return (uint64_t)ru.ru_maxrss * 1024;
}

static double mono_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ the registry */

int agg_shards_new(const char *data_dir, int fsync, agg_shards **out, struct fs_err *err)
{
    agg_shards *r = calloc(1, sizeof *r);

    *out = NULL;
    if (r == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    if ((size_t)snprintf(r->dir, sizeof r->dir, "%s/shards", data_dir) >= sizeof r->dir) {
        free(r);
        return fs_err_set(err, FS_EINVAL, "data directory path too long");
    }
    pthread_mutex_init(&r->mu, NULL);
    r->fsync = fsync;
    agg_rm_tree(r->dir); /* windows do not survive a restart */
    *out = r;
    return 0;
}

static void win_free(agg_shardwin *w)
{
    if (w == NULL) {
        return;
    }
    if (w->worker_running) {
        pthread_join(w->worker, NULL);
    }
    fs_secagg_server_free(w->sm);
    fs_secagg_plan_free(w->plan, w->nplan);
    free(w->u3);
    fs_auth_free(w->auth);
    free(w->sizes);
    free(w->spec);
    if (w->dir[0] != '\0') {
        agg_rm_tree(w->dir);
    }
    pthread_mutex_destroy(&w->mu);
    free(w);
}

void agg_shardwin_unref(agg_shardwin *w)
{
    agg_shards *r;
    int last;

    if (w == NULL) {
        return;
    }
    r = w->reg;
    pthread_mutex_lock(&r->mu);
    last = --w->refs == 0;
    pthread_mutex_unlock(&r->mu);
    if (last) {
        win_free(w);
    }
}

void agg_shards_free(agg_shards *r)
{
    if (r == NULL) {
        return;
    }
    for (size_t i = 0; i < r->n; i++) {
        agg_shardwin_unref(r->w[i]);
    }
    pthread_mutex_destroy(&r->mu);
    free(r);
}

agg_shardwin *agg_shards_find(agg_shards *r, const char *job)
{
    agg_shardwin *w = NULL;

    if (job == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->w[i]->job, job) == 0) {
            w = r->w[i];
            w->refs++;
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return w;
}

int agg_shards_delete(agg_shards *r, const char *job, struct fs_err *err)
{
    agg_shardwin *w = NULL;

    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->w[i]->job, job) == 0) {
            w = r->w[i];
            r->w[i] = r->w[--r->n];
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (w == NULL) {
        return fs_err_set(err, FS_ENOTFOUND, "no shard window for job %s",
                          fs_job_id_valid(job) ? job : "(malformed id)");
    }
    agg_shardwin_unref(w); /* the registry's reference */
    return 0;
}

/* ------------------------------------------------------------ chunk store */

static int win_path(const agg_shardwin *w, uint32_t party, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s/p%u.words", w->dir, party) >= cap ? -1 : 0;
}

static int cs_put(void *ctx, uint32_t party, uint64_t idx, const uint64_t *y, size_t m,
                  struct fs_err *err)
{
    agg_shardwin *w = ctx;
    char path[4600];

    if (win_path(w, party, path, sizeof path) != 0) {
        return fs_err_set(err, FS_EINVAL, "upload path too long");
    }
    return agg_write_upload_words(path, y, m, (off_t)(idx * w->chunk_words * 8), w->fsync, err);
}

static int cs_get(void *ctx, uint32_t party, uint64_t idx, uint64_t *y, size_t m,
                  struct fs_err *err)
{
    agg_shardwin *w = ctx;
    char path[4600];

    if (win_path(w, party, path, sizeof path) != 0) {
        return fs_err_set(err, FS_EINVAL, "upload path too long");
    }
    return agg_read_words(path, idx * w->chunk_words, y, m, err);
}

static void cs_drop(void *ctx, uint32_t party)
{
    (void)ctx;
    (void)party;
}

/* ------------------------------------------------------------ creating */

static int get_u64(const json_t *b, const char *key, uint64_t lo, uint64_t hi, uint64_t *out,
                   struct fs_err *err)
{
    const json_t *v = json_object_get(b, key);

    if (!json_is_integer(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected an integer", key);
    }
    if (json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < lo ||
        (uint64_t)json_integer_value(v) > hi) {
        return fs_err_set(err, FS_EINVAL, "%s: outside %llu..%llu", key, (unsigned long long)lo,
                          (unsigned long long)hi);
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* The fields of a creation body, checked against each other. */
static int parse_spec(agg_shardwin *w, const json_t *b, struct fs_err *err)
{
    static const char *const keys[] = {"shard", "round",       "total_words", "offset",
                                       "words", "chunk_words", "parties",     "party_auth",
                                       "shape", "shards",      "party_sizes", NULL};
    const json_t *auth = json_object_get(b, "party_auth");
    const json_t *sizes = json_object_get(b, "party_sizes");
    const json_t *shape = json_object_get(b, "shape");
    uint64_t x[6] = {0};
    uint64_t off = 0;
    uint64_t len = 0;
    const char *key;
    json_t *val;
    int rc;

    if (!json_is_object(b)) {
        return fs_err_set(err, FS_EFORMAT, "expected a JSON object");
    }
    json_object_foreach((json_t *)b, key, val)
    {
        int ok = 0;
        (void)val;
        for (size_t i = 0; keys[i] != NULL; i++) {
            ok |= strcmp(key, keys[i]) == 0;
        }
        if (!ok) {
            return fs_err_set(err, FS_EINVAL, "unknown field \"%.64s\"", key);
        }
    }
    if ((rc = get_u64(b, "shard", 1, FS_JOB_MAX_SHARDS - 1, &x[0], err)) != 0 ||
        (rc = get_u64(b, "round", 0, UINT32_MAX, &x[1], err)) != 0 ||
        (rc = get_u64(b, "chunk_words", 16, (uint64_t)1 << 22, &x[2], err)) != 0 ||
        (rc = get_u64(b, "parties", 1, FS_SECAGG_MAX_PARTIES, &x[3], err)) != 0 ||
        (rc = get_u64(b, "shards", 2, FS_JOB_MAX_SHARDS, &x[4], err)) != 0 ||
        (rc = get_u64(b, "total_words", 1, (uint64_t)1 << 40, &w->total, err)) != 0 ||
        (rc = get_u64(b, "offset", 0, (uint64_t)1 << 40, &w->off, err)) != 0 ||
        (rc = get_u64(b, "words", 1, (uint64_t)1 << 40, &w->len, err)) != 0) {
        return rc;
    }
    w->shard = (uint32_t)x[0];
    w->round = (uint32_t)x[1];
    w->chunk_words = (uint32_t)x[2];
    w->parties = (uint32_t)x[3];
    w->nshards = (uint32_t)x[4];
    if (w->shard >= w->nshards) {
        return fs_err_set(err, FS_EINVAL, "shard: %u of %u shards", w->shard, w->nshards);
    }
    if (!json_is_array(shape) || json_array_size(shape) != 2 ||
        !json_is_integer(json_array_get(shape, 0)) || !json_is_integer(json_array_get(shape, 1)) ||
        json_integer_value(json_array_get(shape, 0)) < 1 ||
        json_integer_value(json_array_get(shape, 1)) < 1) {
        return fs_err_set(err, FS_EFORMAT, "shape: expected [rows, cols]");
    }
    if (!json_is_array(auth) || json_array_size(auth) != w->parties || !json_is_array(sizes) ||
        json_array_size(sizes) != w->parties) {
        return fs_err_set(err, FS_EFORMAT,
                          "party_auth and party_sizes: expected one entry per party");
    }
    w->sizes = calloc(w->parties, sizeof *w->sizes);
    if (w->sizes == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < w->parties; i++) {
        const json_t *v = json_array_get(sizes, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            return fs_err_set(err, FS_EFORMAT, "party_sizes[%u]: expected a positive integer", i);
        }
        w->sizes[i] = (size_t)json_integer_value(v);
    }
    memset(&w->fj, 0, sizeof w->fj);
    w->fj.partition = FS_FEDSVD_SAMPLES;
    w->fj.rows = (size_t)json_integer_value(json_array_get(shape, 0));
    w->fj.cols = (size_t)json_integer_value(json_array_get(shape, 1));
    w->fj.parties = w->parties;
    w->fj.sizes = w->sizes;
    w->fj.shards = w->nshards;
    if (fs_fedsvd_job_check(&w->fj, err) != 0) {
        return fs_err_set(err, FS_EINVAL, "%s", err->msg);
    }
    if ((uint64_t)w->fj.rows * w->fj.cols != w->total ||
        fs_fedsvd_shard_window(&w->fj, w->shard, &off, &len) != 0 || off != w->off ||
        len != w->len) {
        return fs_err_set(err, FS_EINVAL,
                          "total_words, offset and words do not match the job's shard %u",
                          w->shard);
    }
    w->nchunks = (w->len + w->chunk_words - 1) / w->chunk_words;
    if ((rc = fs_auth_new(&w->auth, err)) != 0) {
        return rc;
    }
    for (uint32_t i = 0; i < w->parties; i++) {
        const json_t *v = json_array_get(auth, i);
        uint8_t d[FS_AUTH_DIGEST_LEN];
        char label[32];
        const char *h = json_string_value(v);
        if (h == NULL || strlen(h) != 2 * FS_AUTH_DIGEST_LEN) {
            return fs_err_set(err, FS_EFORMAT, "party_auth[%u]: expected 64 hex digits", i);
        }
        for (size_t k = 0; k < FS_AUTH_DIGEST_LEN; k++) {
            unsigned int byte = 0;
            if (sscanf(h + 2 * k, "%2x", &byte) != 1 ||
                !((h[2 * k] >= '0' && h[2 * k] <= '9') || (h[2 * k] >= 'a' && h[2 * k] <= 'f'))) {
                return fs_err_set(err, FS_EFORMAT, "party_auth[%u]: expected 64 hex digits", i);
            }
            d[k] = (uint8_t)byte;
        }
        snprintf(label, sizeof label, "party:%u", i + 1);
        if ((rc = fs_auth_add_digest(w->auth, d, label, err)) != 0) {
            return rc;
        }
    }
    return 0;
}

static int win_build(agg_shards *r, const char *job, const json_t *body, agg_shardwin **out,
                     struct fs_err *err)
{
    struct fs_secagg_chunk_store cs = {NULL, cs_put, cs_get, cs_drop};
    agg_shardwin *w = calloc(1, sizeof *w);
    int rc;

    *out = NULL;
    if (w == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&w->mu, NULL);
    w->reg = r;
    w->refs = 1;
    w->fsync = r->fsync;
    snprintf(w->job, sizeof w->job, "%s", job);
    rc = parse_spec(w, body, err);
    if (rc == 0) {
        w->spec = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
        rc = w->spec == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
    }
    if (rc == 0) {
        rc = fs_secagg_shard_new(w->parties, w->round, w->total, w->off, w->len, w->chunk_words,
                                 &w->sm, err);
    }
    if (rc == 0) {
        cs.ctx = w;
        rc = fs_secagg_shard_set_store(w->sm, &cs, err);
    }
    if (rc == 0) {
        snprintf(w->dir, sizeof w->dir, "%s/%s", r->dir, job);
        agg_rm_tree(w->dir);
        rc = fs_mkdir_p(w->dir, err);
        if (rc != 0) {
            w->dir[0] = '\0';
        }
    }
    if (rc != 0) {
        win_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

int agg_shards_create(agg_shards *r, const char *job, const json_t *body, int *created,
                      struct fs_err *err)
{
    agg_shardwin *w = NULL;
    agg_shardwin *old;
    char *canon;
    int rc = 0;

    *created = 0;
    if (!fs_job_id_valid(job)) {
        return fs_err_set(err, FS_ENOTFOUND, "malformed job id");
    }
    old = agg_shards_find(r, job);
    if (old != NULL) {
        canon = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
        rc = canon == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
             : strcmp(canon, old->spec) == 0
                 ? 0
                 : fs_err_set(err, FS_ECONFLICT, "job %s has a different shard window", job);
        free(canon);
        agg_shardwin_unref(old);
        return rc;
    }
    rc = win_build(r, job, body, &w, err);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->w[i]->job, job) == 0) {
            rc = fs_err_set(err, FS_ECONFLICT, "job %s: created at the same time", job);
        }
    }
    if (rc == 0 && r->n >= WINDOWS_MAX) {
        rc =
            fs_err_set(err, FS_ETOOMANY, "this server holds %d shard windows already", WINDOWS_MAX);
    }
    if (rc == 0) {
        r->w[r->n++] = w;
        *created = 1;
    }
    pthread_mutex_unlock(&r->mu);
    if (rc != 0) {
        w->dir[0] = '\0'; /* the directory may be the other window's */
        win_free(w);
    } else {
        fs_log_pack(FS_LOG_INFO, "shard window created", "{s:s, s:i, s:I, s:I}", "job", job,
                    "shard", (int)w->shard, "offset", (json_int_t)w->off, "words",
                    (json_int_t)w->len);
    }
    return rc;
}

/* ------------------------------------------------------------ status */

json_t *agg_shardwin_doc(agg_shardwin *w)
{
    uint8_t *c = calloc(w->parties + 1, 1);
    json_t *o;
    json_t *ids = json_array();

    pthread_mutex_lock(&w->mu);
    if (c != NULL && w->sm != NULL && w->state == W_RECEIVING &&
        fs_secagg_shard_complete(w->sm, c) == 0) {
        for (uint32_t p = 1; ids != NULL && p <= w->parties; p++) {
            if (c[p - 1]) {
                json_array_append_new(ids, json_integer(p));
            }
        }
    }
    o = json_pack("{s:s, s:i, s:s, s:o, s:I, s:I, s:I, s:I, s:I}", "job", w->job, "shard",
                  (int)w->shard, "state", STATE_NAME[w->state], "complete",
                  ids != NULL ? ids : json_array(), "offset", (json_int_t)w->off, "words",
                  (json_int_t)w->len, "chunks", (json_int_t)w->nchunks, "chunk_words",
                  (json_int_t)w->chunk_words, "peak_rss_bytes",
                  (json_int_t)(w->peak_rss > 0 ? w->peak_rss : peak_rss_bytes()));
    if (o != NULL) {
        json_object_set_new(o, "error", w->error[0] != '\0' ? json_string(w->error) : json_null());
        json_object_set_new(o, "finish_s",
                            w->state == W_DONE ? json_real(w->finish_s) : json_null());
    }
    pthread_mutex_unlock(&w->mu);
    free(c);
    return o;
}

int agg_shardwin_auth(agg_shardwin *w, const char *token, size_t len, uint32_t *party,
                      struct fs_err *err)
{
    char label[FS_AUTH_LABEL_MAX];
    unsigned long v;
    char *end = NULL;

    *party = 0;
    if (fs_auth_check_token(w->auth, token, len, label, err) != 0 ||
        strncmp(label, "party:", 6) != 0) {
        return fs_err_set(err, FS_EAUTH, "token is not valid for this job");
    }
    v = strtoul(label + 6, &end, 10);
    if (end == label + 6 || *end != '\0' || v < 1 || v > w->parties) {
        return fs_err_set(err, FS_EINTERNAL, "bad token label");
    }
    *party = (uint32_t)v;
    return 0;
}

/* ------------------------------------------------------------ chunks */

static size_t chunk_len(const agg_shardwin *w, uint64_t idx)
{
    uint64_t left = w->len - idx * w->chunk_words;

    return (size_t)(left < w->chunk_words ? left : w->chunk_words);
}

int agg_shardwin_chunk_check(agg_shardwin *w, uint32_t party, uint64_t idx, size_t *m,
                             struct fs_err *err)
{
    *m = 0;
    if (party < 1 || party > w->parties) {
        return fs_err_set(err, FS_EFORMAT, "party %u is not in this job", party);
    }
    if (idx >= w->nchunks) {
        return fs_err_set(err, FS_EINVAL, "chunk %llu does not exist (shard %u has %llu)",
                          (unsigned long long)idx, w->shard, (unsigned long long)w->nchunks);
    }
    /* whether the window still takes it (a repeat after the finish began is
     * compared by put_chunk) is decided when the body is in */
    *m = chunk_len(w, idx);
    return 0;
}

int agg_shardwin_put_chunk(agg_shardwin *w, uint32_t party, uint64_t idx, const uint64_t *y,
                           size_t m, struct fs_err *err)
{
    int rc;

    if (idx >= w->nchunks || m != chunk_len(w, idx)) {
        return fs_err_set(err, FS_EINVAL, "chunk %llu: wrong length", (unsigned long long)idx);
    }
    pthread_mutex_lock(&w->mu);
    if (w->sm == NULL) {
        rc = fs_err_set(err, FS_ECONFLICT, "shard %u is no longer receiving", w->shard);
    } else {
        rc = fs_secagg_server_add_masked_ex(w->sm, party, idx, y, m, NULL, err);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static int upload_file_err(int e, struct fs_err *err)
{
    return fs_err_set(err, fs_io_errcode(e), "upload file: %s", strerror(e));
}

int agg_shardwin_stream_begin(agg_shardwin *w, uint32_t party, uint64_t idx, size_t m,
                              struct agg_upload *u, int *stream, struct fs_err *err)
{
    char path[4600];
    int rc = 0;

    memset(u, 0, sizeof *u);
    u->fd = -1;
    *stream = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return 0;
#endif
    if (idx >= w->nchunks || m != chunk_len(w, idx) || win_path(w, party, path, sizeof path)) {
        return 0;
    }
    pthread_mutex_lock(&w->mu);
    if (w->sm == NULL || w->state != W_RECEIVING) {
        pthread_mutex_unlock(&w->mu);
        return 0;
    }
    rc = fs_secagg_server_upload_begin(w->sm, party, idx, m, &u->up, stream, err);
    if (rc == 0 && *stream) {
        u->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (u->fd < 0) {
            struct fs_err e2 = {0};
            rc = upload_file_err(errno, err);
            if (fs_secagg_server_upload_cancel(&u->up, &e2) != 0) {
                fs_log(FS_LOG_WARN, "cannot cancel a shard chunk", NULL);
            }
            fs_secagg_server_upload_release(&u->up);
            *stream = 0;
        }
    }
    pthread_mutex_unlock(&w->mu);
    if (rc == 0 && *stream) {
        u->party = party;
        u->r = w->round;
        u->idx = idx;
        u->off = idx * w->chunk_words * 8;
    }
    return rc;
}

int agg_shardwin_stream_piece(agg_shardwin *w, struct agg_upload *u, const uint8_t *p, size_t n,
                              struct fs_err *err)
{
    (void)w;
    return agg_job_stream_piece(NULL, u, p, n, err); /* no job state: the file, then the fold */
}

int agg_shardwin_stream_end(agg_shardwin *w, struct agg_upload *u, int complete, struct fs_err *err)
{
    struct fs_err e2 = {0};
    int rc = 0;

    if (u->up.s == NULL) {
        return 0;
    }
    if (complete && w->fsync && fdatasync(u->fd) != 0) {
        rc = upload_file_err(errno, err);
        complete = 0;
    }
    if (u->fd >= 0) {
        close(u->fd);
        u->fd = -1;
    }
    pthread_mutex_lock(&w->mu);
    if (w->sm != u->up.s) {
        if (complete) {
            rc = fs_err_set(err, FS_ECONFLICT, "shard %u is no longer receiving", w->shard);
        }
    } else if (complete) {
        rc = fs_secagg_server_upload_commit(&u->up, err);
    } else if (fs_secagg_server_upload_cancel(&u->up, &e2) != 0) {
        fs_log_pack(FS_LOG_WARN, "cannot take back a broken-off shard chunk", "{s:s}", "job",
                    w->job);
    }
    pthread_mutex_unlock(&w->mu);
    fs_secagg_server_upload_release(&u->up);
    return rc;
}

/* ------------------------------------------------------------ finishing */

uint64_t agg_shard_finish_cap(uint32_t n)
{
    /* u3: n ids; plan: the survivors' self masks plus, for every dropped
     * party, one pair key per survivor: at most n + ceil(n/2) floor(n/2)
     * terms of about 70 bytes of JSON each */
    uint64_t terms = (uint64_t)n + (uint64_t)((n + 1) / 2) * (n / 2);

    return 4096 + 12 * (uint64_t)n + 80 * terms;
}

static int parse_finish(agg_shardwin *w, const json_t *b, struct fs_err *err)
{
    const json_t *u3 = json_object_get(b, "u3");
    const json_t *plan = json_object_get(b, "plan");
    const json_t *e = json_object_get(b, "exponent");
    uint64_t max_terms = (uint64_t)w->parties + (uint64_t)((w->parties + 1) / 2) * (w->parties / 2);
    size_t np;

    if (!json_is_object(b) || !json_is_array(u3) || !json_is_array(plan) || !json_is_integer(e)) {
        return fs_err_set(err, FS_EFORMAT,
                          "expected {\"u3\": [ids], \"exponent\": E, "
                          "\"plan\": [{\"key\", \"sign\"}]}");
    }
    if (json_integer_value(e) < FS_WIRE_MIN_EXP || json_integer_value(e) > FS_WIRE_MAX_EXP) {
        return fs_err_set(err, FS_EINVAL, "exponent: outside %d..%d", FS_WIRE_MIN_EXP,
                          FS_WIRE_MAX_EXP);
    }
    np = json_array_size(plan);
    if (json_array_size(u3) < 1 || json_array_size(u3) > w->parties || np > max_terms) {
        return fs_err_set(err, FS_ERANGE, "u3 or plan: too many entries for %u parties",
                          w->parties);
    }
    w->exponent = (int)json_integer_value(e);
    w->nu3 = json_array_size(u3);
    w->u3 = calloc(w->nu3, sizeof *w->u3);
    w->plan = calloc(np + 1, sizeof *w->plan);
    if (w->u3 == NULL || w->plan == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < w->nu3; i++) {
        const json_t *v = json_array_get(u3, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > (json_int_t)w->parties ||
            (i > 0 && json_integer_value(v) <= (json_int_t)w->u3[i - 1])) {
            return fs_err_set(err, FS_EINVAL, "u3: expected increasing party ids 1..%u",
                              w->parties);
        }
        w->u3[i] = (uint32_t)json_integer_value(v);
    }
    for (size_t i = 0; i < np; i++) {
        const json_t *t = json_array_get(plan, i);
        const json_t *sg = json_object_get(t, "sign");
        int rc;
        if (!json_is_string(json_object_get(t, "key")) || !json_is_integer(sg) ||
            (json_integer_value(sg) != 1 && json_integer_value(sg) != -1)) {
            return fs_err_set(err, FS_EFORMAT, "plan[%zu]: expected {\"key\", \"sign\": 1|-1}", i);
        }
        rc = fs_b64url_decode_exact(json_string_value(json_object_get(t, "key")), w->plan[i].key,
                                    sizeof w->plan[i].key, err);
        if (rc != 0) {
            return fs_err_set(err, rc, "plan[%zu].key: %s", i, err->msg);
        }
        w->plan[i].sign = (int)json_integer_value(sg);
        w->nplan = i + 1;
    }
    return 0;
}

static void win_fail(agg_shardwin *w, const char *what, const struct fs_err *err)
{
    pthread_mutex_lock(&w->mu);
    w->state = W_FAILED;
    snprintf(w->error, sizeof w->error, "%s: %.200s", what, err->msg);
    pthread_mutex_unlock(&w->mu);
    fs_log_pack(FS_LOG_WARN, "shard window failed", "{s:s, s:s}", "job", w->job, "error", w->error);
}

/* Unmask, decode and reduce the window to R (the worker; w->sm is its own
 * now: no upload can begin once the state left receiving). */
static void *finish_main(void *arg)
{
    agg_shardwin *w = arg;
    struct fs_err err = {0};
    const uint64_t *sum = NULL;
    uint64_t *owned;
    uint64_t n = 0;
    fs_mat *r = NULL;
    char path[4600];
    double t0 = mono_now();
    int rc;

    /* under mu: uploads that began before the state changed end under it */
    pthread_mutex_lock(&w->mu);
    rc = fs_secagg_shard_finish(w->sm, w->u3, w->nu3, w->plan, w->nplan, &sum, &err);
    fs_secagg_plan_free(w->plan, w->nplan);
    w->plan = NULL;
    w->nplan = 0;
    owned = rc == 0 ? fs_secagg_server_take_sum(w->sm, &n) : NULL;
    if (rc == 0) {
        fs_secagg_server_free(w->sm); /* the uploads' state: only the sum is needed now */
        w->sm = NULL;
    }
    pthread_mutex_unlock(&w->mu);
    if (rc == 0 && (owned == NULL || n != w->len)) {
        rc = fs_err_set(&err, FS_EINTERNAL, "the window's sum is not available");
    }
    if (rc != 0) {
        free(owned);
        win_fail(w, "unmasking", &err);
        return NULL;
    }
    rc = fs_fedsvd_shard_r(&w->fj, w->shard, w->exponent, owned, &r, &err);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/r.npy", w->dir);
        rc = fs_npy_write_mat(path, r, &err);
    }
    fs_mat_free(r);
    if (rc != 0) {
        win_fail(w, "factorizing", &err);
        return NULL;
    }
    for (uint32_t p = 1; p <= w->parties; p++) { /* the uploads are not needed any more */
        if (win_path(w, p, path, sizeof path) == 0) {
            (void)unlink(path);
        }
    }
    pthread_mutex_lock(&w->mu);
    w->state = W_DONE;
    w->peak_rss = peak_rss_bytes();
    w->finish_s = mono_now() - t0;
    pthread_mutex_unlock(&w->mu);
    fs_log_pack(FS_LOG_INFO, "shard window done", "{s:s, s:i, s:f, s:I}", "job", w->job, "shard",
                (int)w->shard, "finish_s", w->finish_s, "peak_rss_bytes", (json_int_t)w->peak_rss);
    return NULL;
}

int agg_shardwin_finish(agg_shardwin *w, const json_t *body, struct fs_err *err)
{
    int rc;

    pthread_mutex_lock(&w->mu);
    if (w->state != W_RECEIVING || w->worker_running) {
        rc = w->state == W_FAILED
                 ? fs_err_set(err, FS_EABORTED, "shard %u failed: %s", w->shard, w->error)
                 : 0; /* a repeat */
        pthread_mutex_unlock(&w->mu);
        return rc;
    }
    rc = parse_finish(w, body, err);
    if (rc == 0) {
        w->state = W_FINISHING;
        rc = pthread_create(&w->worker, NULL, finish_main, w);
        if (rc != 0) {
            w->state = W_RECEIVING;
            rc = fs_err_set(err, FS_EUNAVAILABLE, "cannot start a thread");
        } else {
            w->worker_running = 1;
        }
    }
    if (rc != 0) {
        fs_secagg_plan_free(w->plan, w->nplan);
        w->plan = NULL;
        w->nplan = 0;
        free(w->u3);
        w->u3 = NULL;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int agg_shardwin_r_path(agg_shardwin *w, char *path, size_t cap, struct fs_err *err)
{
    int rc = 0;

    pthread_mutex_lock(&w->mu);
    if (w->state == W_FAILED) {
        rc = fs_err_set(err, FS_EABORTED, "shard %u failed: %s", w->shard, w->error);
    } else if (w->state != W_DONE) {
        rc = fs_err_set(err, FS_ESTATE, "shard %u: R is not ready (%s)", w->shard,
                        STATE_NAME[w->state]);
    } else if ((size_t)snprintf(path, cap, "%s/r.npy", w->dir) >= cap) {
        rc = fs_err_set(err, FS_EINTERNAL, "path too long");
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}
