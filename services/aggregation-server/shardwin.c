/* The windows this server holds as a shard (see shardwin.h). */
#include "shardwin.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../api/shardwire.h"
#include "../../api/wire.h"
#include "core/bgthread.h"
#include "core/fdio.h"
#include "crypto/ct.h"
#include "io/matio.h"
#include "jobmgr_internal.h"
#include "net/auth.h"
#include "net/log.h"
#include "proto/fedsvd_shard.h"

#define WINDOWS_MAX 256 /* windows held at once */

enum win_state { W_RECEIVING = 0, W_FINISHING, W_DONE, W_FAILED };

static const char *const STATE_NAME[] = {"receiving", "finishing", "done", "failed"};

#define TOUCH_MAX_S 60 /* a window in use: window.json's mtime renewed at most this often */

struct agg_shards {
    pthread_mutex_t mu;
    char dir[4200]; /* <data>/shards */
    int fsync;
    agg_shardwin *w[WINDOWS_MAX];
    size_t n;
    /* windows unused for ttl_s seconds are removed (0: never) by the sweeper */
    uint32_t ttl_s;
    struct fs_bgthread sweeper;
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
    int drop_files; /* remove the directory when freed (deleted, or never made whole) */
    int reloading;  /* folding the persisted chunks again: the store's put writes nothing */
    int log_fd;     /* chunks.log, appended under mu; -1 when closed */
    time_t seen;    /* reg->mu: the last request for the window (wall clock) */
    time_t touched; /* reg->mu: when window.json's mtime was last set to it */

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

static void shards_reload(agg_shards *r);
static void shards_sweep(agg_shards *r);
static void *sweeper_main(void *arg);

int agg_shards_new(const char *data_dir, int fsync, uint32_t ttl_s, agg_shards **out,
                   struct fs_err *err)
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
    fs_bgthread_init(&r->sweeper);
    r->fsync = fsync;
    r->ttl_s = ttl_s;
    shards_reload(r); /* the windows of the previous run, as they were persisted */
    if (ttl_s > 0) {
        shards_sweep(r); /* before the first request could renew an expired one */
        if (fs_bgthread_start(&r->sweeper, sweeper_main, r, NULL) != 0) {
            fs_log(FS_LOG_WARN, "cannot start the shard window sweeper", NULL);
        }
    }
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
    if (w->log_fd >= 0) {
        close(w->log_fd);
    }
    if (w->dir[0] != '\0' && w->drop_files) {
        agg_rm_tree(w->dir); /* else kept for the next run (a stopping server) */
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
    fs_bgthread_stop(&r->sweeper);
    for (size_t i = 0; i < r->n; i++) {
        agg_shardwin_unref(r->w[i]);
    }
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* ------------------------------------------------------------ expiry
 *
 * A window that nobody asks for (neither its coordinator, which polls every
 * window of a running job every second, nor a party) for ttl_s seconds
 * belongs to a job that ended while its coordinator could not delete it,
 * or to a coordinator that is gone: it is removed with its files. The last
 * use survives a restart as window.json's mtime (renewed at most every
 * TOUCH_MAX_S seconds, or ttl_s / 4 when shorter). */

static time_t touch_every(const agg_shards *r)
{
    uint32_t t = r->ttl_s / 4;

    return t < 1 ? 1 : t > TOUCH_MAX_S ? TOUCH_MAX_S : (time_t)t;
}

/* The last use of a reloaded window: its files' latest mtime. */
static time_t win_last_use(const agg_shardwin *w)
{
    static const char *const names[] = {"window.json", "chunks.log", "r.npy", "failed.json"};
    time_t t = 0;

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[4600];
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", w->dir, names[i]) < sizeof path &&
            stat(path, &st) == 0 && st.st_mtime > t) {
            t = st.st_mtime;
        }
    }
    return t;
}

static void shards_sweep(agg_shards *r)
{
    agg_shardwin *gone[WINDOWS_MAX];
    time_t now = time(NULL);
    size_t k = 0;

    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n;) {
        agg_shardwin *w = r->w[i];
        if (now - w->seen > (time_t)r->ttl_s) {
            w->drop_files = 1; /* removed with the last reference */
            gone[k++] = w;
            r->w[i] = r->w[--r->n];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&r->mu);
    for (size_t i = 0; i < k; i++) {
        fs_log_pack(FS_LOG_INFO, "shard window expired: removed", "{s:s, s:I, s:I}", "job",
                    gone[i]->job, "unused_s", (json_int_t)(now - gone[i]->seen), "ttl_s",
                    (json_int_t)r->ttl_s);
        agg_shardwin_unref(gone[i]);
    }
}

static void *sweeper_main(void *arg)
{
    agg_shards *r = arg;
    unsigned every = r->ttl_s / 4 < 1 ? 1 : r->ttl_s / 4 > 600 ? 600 : r->ttl_s / 4;

    while (!fs_bgthread_wait(&r->sweeper, every * 1000)) {
        shards_sweep(r);
    }
    return NULL;
}

agg_shardwin *agg_shards_find(agg_shards *r, const char *job)
{
    agg_shardwin *w = NULL;
    time_t now = time(NULL);
    int touch = 0;

    if (job == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->w[i]->job, job) == 0) {
            w = r->w[i];
            w->refs++;
            w->seen = now; /* in use: not expired */
            if (r->ttl_s > 0 && now - w->touched >= touch_every(r)) {
                w->touched = now;
                touch = 1;
            }
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (touch) { /* the last use, for a restart: window.json's mtime */
        char path[4600];
        if ((size_t)snprintf(path, sizeof path, "%s/window.json", w->dir) < sizeof path &&
            utimensat(AT_FDCWD, path, NULL, 0) != 0 && errno != ENOENT) {
            fs_log_pack(FS_LOG_DEBUG, "cannot renew a window's mtime", "{s:s}", "job", w->job);
        }
    }
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
    if (w != NULL) {
        w->drop_files = 1; /* removed with the last reference */
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

    if (w->reloading) {
        return 0; /* the words are read from this very file */
    }
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

/* ------------------------------------------------------------ durability
 *
 * A window's directory holds what a restarted server needs to resume it:
 * window.json (the creation body, written before the creation is
 * answered), p<party>.words (the uploads, at their offsets) and chunks.log
 * (one record per accepted chunk, appended once the chunk's words are on
 * disk and folded, before the upload is answered); once done, r.npy (R)
 * only. The unmask plan is never written: a window reloaded while it was
 * finishing is receiving again, and its coordinator sends the finish again. */

#define LOG_MAGIC 0x53484b31u /* "SHK1" */

/* One chunks.log record: the party, a check word, the chunk index (host order). */
struct log_rec {
    uint32_t party;
    uint32_t check;
    uint64_t idx;
};

static uint32_t log_check(uint32_t party, uint64_t idx)
{
    return LOG_MAGIC ^ party ^ (uint32_t)idx ^ (uint32_t)(idx >> 32) ^ (party << 16);
}

static int win_file(const agg_shardwin *w, const char *name, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s/%s", w->dir, name) >= cap ? -1 : 0;
}

static int win_open_log(agg_shardwin *w, struct fs_err *err)
{
    char path[4600];

    if (win_file(w, "chunks.log", path, sizeof path) != 0) {
        return fs_err_set(err, FS_EINVAL, "window path too long");
    }
    w->log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (w->log_fd < 0) {
        return fs_err_set(err, fs_io_errcode(errno), "chunks.log: %s", strerror(errno));
    }
    return 0;
}

/* mu held (or a window nobody else sees yet): a window that is done or
 * failed needs its uploads' state and files no more (a reloaded one: a
 * crash before they went). An upload in flight keeps the state it holds. */
static void win_drop_uploads(agg_shardwin *w)
{
    char path[4600];

    fs_secagg_server_free(w->sm);
    w->sm = NULL;
    if (w->log_fd >= 0) {
        close(w->log_fd);
        w->log_fd = -1;
    }
    for (uint32_t p = 1; p <= w->parties; p++) {
        if (win_path(w, p, path, sizeof path) == 0) {
            (void)unlink(path);
        }
    }
    if (win_file(w, "chunks.log", path, sizeof path) == 0) {
        (void)unlink(path);
    }
}

/* mu held: the window failed (w->error says why): failed.json records it
 * (fsync, rename), so that a restarted server reports the window failed,
 * as before, instead of receiving, and the uploads go (a failure is final:
 * the coordinator fails the job and deletes the window). A record that
 * cannot be written is logged and the files are left as they are. */
static void win_set_failed(agg_shardwin *w)
{
    struct fs_err err = {0};
    char path[4600];
    json_t *doc;
    char *txt = NULL;

    w->state = W_FAILED;
    if (w->reloading || w->dir[0] == '\0') {
        return;
    }
    doc = json_pack("{s:s}", "error", w->error);
    txt = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (txt == NULL || win_file(w, "failed.json", path, sizeof path) != 0 ||
        fs_write_file_atomic(path, txt, strlen(txt), &err) != 0) {
        fs_log_pack(FS_LOG_WARN, "cannot record a shard window's failure", "{s:s, s:s}", "job",
                    w->job, "error", err.msg[0] != '\0' ? err.msg : "out of memory");
        free(txt);
        return; /* the files stay as they are: a restart has the window as it was persisted */
    }
    free(txt);
    if (win_file(w, "r.npy", path, sizeof path) == 0) {
        (void)unlink(path); /* a part of R written before the failure */
    }
    win_drop_uploads(w); /* a failure is final: the uploads are not needed any more */
}

/* A failed window's reason from its failed.json (a reloaded window). */
static void win_load_failure(agg_shardwin *w, const char *path)
{
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    const char *e = json_string_value(json_object_get(doc, "error"));

    snprintf(w->error, sizeof w->error, "%s",
             e != NULL && e[0] != '\0' ? e : "failed before a restart (the reason is lost)");
    json_decref(doc);
}

/* mu held: record an accepted chunk. A record that cannot be written fails
 * the window (its sum would hold a chunk that a restart forgets). */
static int win_log_chunk(agg_shardwin *w, uint32_t party, uint64_t idx, struct fs_err *err)
{
    struct log_rec rec = {party, log_check(party, idx), idx};
    int e;

    if (w->reloading) {
        return 0;
    }
    if (w->log_fd >= 0 && fs_write_all(w->log_fd, &rec, sizeof rec) == 0 &&
        (!w->fsync || fdatasync(w->log_fd) == 0)) {
        return 0;
    }
    e = w->log_fd >= 0 ? errno : EBADF;
    snprintf(w->error, sizeof w->error, "cannot record a chunk: %s", strerror(e));
    win_set_failed(w);
    return fs_err_set(err, fs_io_errcode(e), "shard %u: cannot record a chunk: %s", w->shard,
                      strerror(e));
}

/* Fold the recorded chunks again (a reloaded window; no other thread sees
 * it yet). A torn last record (a crash while appending) is ignored: its
 * upload was not answered. */
static int win_refold(agg_shardwin *w, struct fs_err *err)
{
    char path[4600];
    char upath[4600];
    struct log_rec rec;
    uint64_t *buf = NULL;
    uint64_t n = 0;
    int fd;
    int rc = 0;

    if (win_file(w, "chunks.log", path, sizeof path) != 0) {
        return fs_err_set(err, FS_EINVAL, "window path too long");
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT ? 0 : fs_err_set(err, FS_EIO, "chunks.log: %s", strerror(errno));
    }
    buf = malloc((size_t)w->chunk_words * sizeof *buf);
    if (buf == NULL) {
        close(fd);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    w->reloading = 1;
    while (rc == 0 && read(fd, &rec, sizeof rec) == (ssize_t)sizeof rec) {
        size_t m;
        if (rec.check != log_check(rec.party, rec.idx) || rec.party < 1 || rec.party > w->parties ||
            rec.idx >= w->nchunks) {
            rc = fs_err_set(err, FS_EFORMAT, "chunks.log: bad record %llu", (unsigned long long)n);
            break;
        }
        m = (size_t)(w->len - rec.idx * w->chunk_words < w->chunk_words
                         ? w->len - rec.idx * w->chunk_words
                         : w->chunk_words);
        rc = win_path(w, rec.party, upath, sizeof upath) != 0
                 ? fs_err_set(err, FS_EINVAL, "upload path too long")
                 : agg_read_words(upath, rec.idx * w->chunk_words, buf, m, err);
        if (rc == 0) {
            rc = fs_secagg_server_add_masked_ex(w->sm, rec.party, rec.idx, buf, m, NULL, err);
        }
        n++;
    }
    w->reloading = 0;
    fs_wipe(buf, (size_t)w->chunk_words * sizeof *buf);
    free(buf);
    close(fd);
    if (rc == 0) {
        fs_log_pack(FS_LOG_INFO, "shard window reloaded", "{s:s, s:i, s:I}", "job", w->job, "shard",
                    (int)w->shard, "chunks", (json_int_t)n);
    }
    return rc;
}

/* Write window.json (the creation body) before the creation is answered.
 * The parties' upload files are made (empty) first, so that the directory's
 * fsync after the rename makes their entries durable too (a chunk's
 * fdatasync covers its words, not the file's name). */
static int win_save_spec(agg_shardwin *w, struct fs_err *err)
{
    char path[4600];

    for (uint32_t p = 1; p <= w->parties; p++) {
        int fd = win_path(w, p, path, sizeof path) == 0
                     ? open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)
                     : -1;
        if (fd < 0) {
            return fs_err_set(err, fs_io_errcode(errno), "upload file: %s", strerror(errno));
        }
        close(fd);
    }
    if (win_file(w, "window.json", path, sizeof path) != 0) {
        return fs_err_set(err, FS_EINVAL, "window path too long");
    }
    return fs_write_file_atomic(path, w->spec, strlen(w->spec), err);
}

/* ------------------------------------------------------------ creating */

/* The fields of a creation body (api/shardwire.h checks them against each other). */
static int parse_spec(agg_shardwin *w, const json_t *b, struct fs_err *err)
{
    struct fs_shard_window sw;
    int rc = fs_shardwire_window_decode(b, &sw, err);

    if (rc != 0) {
        return rc;
    }
    w->shard = sw.shard;
    w->round = sw.round;
    w->chunk_words = sw.chunk_words;
    w->parties = sw.parties;
    w->nshards = sw.shards;
    w->total = sw.total_words;
    w->off = sw.offset;
    w->len = sw.words;
    w->sizes = sw.party_sizes; /* the window's now */
    sw.party_sizes = NULL;
    memset(&w->fj, 0, sizeof w->fj);
    w->fj.partition = FS_FEDSVD_SAMPLES;
    w->fj.rows = (size_t)sw.rows;
    w->fj.cols = (size_t)sw.cols;
    w->fj.parties = w->parties;
    w->fj.sizes = w->sizes;
    w->fj.shards = w->nshards;
    w->nchunks = (w->len + w->chunk_words - 1) / w->chunk_words;
    rc = fs_auth_new(&w->auth, err);
    for (uint32_t i = 0; rc == 0 && i < w->parties; i++) {
        char label[32];
        snprintf(label, sizeof label, "party:%u", i + 1);
        rc = fs_auth_add_digest(w->auth, sw.party_auth[i], label, err);
    }
    fs_shardwire_window_clear(&sw);
    return rc;
}

/* A window from its creation body; fresh: a new one (its directory made
 * empty), else one of the previous run (its files kept). */
static int win_build(agg_shards *r, const char *job, const json_t *body, int fresh,
                     agg_shardwin **out, struct fs_err *err)
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
    w->log_fd = -1;
    w->seen = w->touched = time(NULL);
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
        if (fresh) {
            agg_rm_tree(w->dir);
        }
        rc = fs_mkdir_p(w->dir, err);
        if (rc != 0) {
            w->dir[0] = '\0';
        }
    }
    if (rc == 0) {
        rc = win_open_log(w, err);
    }
    if (rc != 0) {
        w->drop_files = fresh;
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
    rc = win_build(r, job, body, 1, &w, err);
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
    if (rc == 0 && (rc = win_save_spec(w, err)) != 0) {
        struct fs_err e2 = {0};
        *created = 0;
        if (agg_shards_delete(r, job, &e2) != 0) { /* not durable: not created */
            fs_log_pack(FS_LOG_WARN, "cannot forget a window", "{s:s}", "job", job);
        }
        return rc;
    }
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
    struct fs_shard_status st;
    uint8_t *c = calloc(w->parties + 1, 1);
    json_t *o;

    memset(&st, 0, sizeof st);
    pthread_mutex_lock(&w->mu);
    snprintf(st.job, sizeof st.job, "%s", w->job);
    st.shard = w->shard;
    st.state = (enum fs_shard_state)w->state;
    st.parties = w->parties;
    if (c != NULL && w->sm != NULL && w->state == W_RECEIVING &&
        fs_secagg_shard_complete(w->sm, c) == 0) {
        st.complete = c;
    }
    st.offset = w->off;
    st.words = w->len;
    st.chunks = w->nchunks;
    st.chunk_words = w->chunk_words;
    st.peak_rss_bytes = w->peak_rss > 0 ? w->peak_rss : peak_rss_bytes();
    snprintf(st.error, sizeof st.error, "%s", w->error);
    st.has_finish_s = w->state == W_DONE;
    st.finish_s = w->finish_s;
    o = fs_shardwire_status_encode(&st);
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
        int is_new = 0;
        rc = fs_secagg_server_add_masked_ex(w->sm, party, idx, y, m, &is_new, err);
        if (rc == 0 && is_new) {
            rc = win_log_chunk(w, party, idx, err);
        }
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
        if (rc == 0) {
            rc = win_log_chunk(w, u->party, u->idx, err);
        }
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
    return fs_shardwire_finish_cap(n);
}

static int parse_finish(agg_shardwin *w, const json_t *b, struct fs_err *err)
{
    struct fs_shard_finish f;
    size_t nu3 = 0;
    size_t np = 0;
    int rc = fs_shardwire_finish_sizes(b, w->parties, &nu3, &np, err);

    if (rc != 0) {
        return rc;
    }
    memset(&f, 0, sizeof f);
    f.u3 = calloc(nu3, sizeof *f.u3);
    f.u3_cap = nu3;
    f.plan = calloc(np + 1, sizeof *f.plan);
    f.plan_cap = np;
    w->u3 = f.u3; /* freed (and the plan wiped) by the caller on failure */
    w->plan = f.plan;
    w->nplan = np;
    if (f.u3 == NULL || f.plan == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_shardwire_finish_decode(b, w->parties, &f, err);
    if (rc == 0) {
        w->exponent = f.exponent;
        w->nu3 = f.nu3;
    }
    return rc;
}

static void win_fail(agg_shardwin *w, const char *what, const struct fs_err *err)
{
    pthread_mutex_lock(&w->mu);
    snprintf(w->error, sizeof w->error, "%s: %.200s", what, err->msg);
    win_set_failed(w);
    pthread_mutex_unlock(&w->mu);
    fs_log_pack(FS_LOG_WARN, "shard window failed", "{s:s, s:s}", "job", w->job, "error", w->error);
}

/* Tests only (tests/shardpeer): FEDSVD_TEST_SHARD_FINISH_DELAY_MS keeps a
 * window in finishing that long (at most 10 s) before it unmasks, so that
 * a restart can be placed there. */
static void test_finish_delay(void)
{
    const char *v = getenv("FEDSVD_TEST_SHARD_FINISH_DELAY_MS");
    char *end = NULL;
    unsigned long ms = v != NULL ? strtoul(v, &end, 10) : 0;

    if (ms > 0 && end != NULL && *end == '\0') {
        usleep((useconds_t)(ms < 10000 ? ms : 10000) * 1000);
    }
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

    test_finish_delay();
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
    pthread_mutex_lock(&w->mu);
    for (uint32_t p = 1; p <= w->parties; p++) { /* r.npy is the state now */
        if (win_path(w, p, path, sizeof path) == 0) {
            (void)unlink(path);
        }
    }
    if (w->log_fd >= 0) {
        close(w->log_fd);
        w->log_fd = -1;
    }
    if (win_file(w, "chunks.log", path, sizeof path) == 0) {
        (void)unlink(path);
    }
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

/* ------------------------------------------------------------ restart */

/* Window job of the previous run from its directory: failed when its
 * failure was recorded, done when its R is there, else receiving with its
 * recorded chunks folded again. */
static int win_reload(agg_shards *r, const char *job, agg_shardwin **out, struct fs_err *err)
{
    char path[4600];
    json_error_t je;
    json_t *body;
    agg_shardwin *w = NULL;
    struct stat st;
    int rc;

    *out = NULL;
    if ((size_t)snprintf(path, sizeof path, "%s/%s/window.json", r->dir, job) >= sizeof path) {
        return fs_err_set(err, FS_EINVAL, "window path too long");
    }
    body = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (body == NULL) {
        return fs_err_set(err, FS_EFORMAT, "window.json: %.100s", je.text);
    }
    rc = win_build(r, job, body, 0, &w, err);
    json_decref(body);
    if (rc != 0) {
        return rc;
    }
    if (win_file(w, "failed.json", path, sizeof path) == 0 && stat(path, &st) == 0) {
        win_load_failure(w, path); /* failed for good: reported as before the restart */
        win_drop_uploads(w);
        w->state = W_FAILED;
        fs_log_pack(FS_LOG_INFO, "shard window reloaded", "{s:s, s:i, s:s}", "job", w->job, "shard",
                    (int)w->shard, "state", "failed");
    } else if (win_file(w, "r.npy", path, sizeof path) == 0 && stat(path, &st) == 0) {
        win_drop_uploads(w); /* done: R is served again */
        w->state = W_DONE;
    } else {
        rc = win_refold(w, err);
    }
    if (rc != 0) {
        win_free(w);
        return rc;
    }
    w->seen = w->touched = win_last_use(w);
    *out = w;
    return 0;
}

/* The windows persisted by the previous run (agg_shards_new): each one
 * reloaded, or, when it cannot be, removed (its coordinator then fails the
 * job: the shard lost its state). */
static void shards_reload(agg_shards *r)
{
    DIR *d = opendir(r->dir);
    struct dirent *e;

    while (d != NULL && (e = readdir(d)) != NULL) {
        struct fs_err err = {0};
        agg_shardwin *w = NULL;
        char path[4400];

        if (e->d_name[0] == '.') {
            continue;
        }
        if (!fs_job_id_valid(e->d_name) || r->n >= WINDOWS_MAX ||
            win_reload(r, e->d_name, &w, &err) != 0) {
            fs_log_pack(FS_LOG_WARN, "shard window not reloaded", "{s:s, s:s}", "job",
                        fs_job_id_valid(e->d_name) ? e->d_name : "(malformed id)", "error",
                        err.msg[0] != '\0' ? err.msg : "not a window");
            if ((size_t)snprintf(path, sizeof path, "%s/%s", r->dir, e->d_name) < sizeof path) {
                agg_rm_tree(path);
            }
            continue;
        }
        r->w[r->n++] = w;
    }
    if (d != NULL) {
        closedir(d);
    }
}
