/* The job manager: see jobmgr.h. Protocol logic stays in lib/proto/secagg;
 * this file moves messages into the state machine, records them, closes
 * rounds on time and turns the ring sum into the result. */
#define _GNU_SOURCE /* O_DIRECT */
#include "jobmgr.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../api/wire.h"
#include "core/fdio.h"
#include "crypto/ct.h"
#include "crypto/sha256.h"
#include "io/matio.h"
#include "jobmgr_internal.h"
#include "la/fixedpt.h"
#include "la/mat.h"
#include "net/auth.h"
#include "net/log.h"
#include "powerjob.h"
#include "proto/fedpca.h"
#include "proto/fedsvd.h"
#include "proto/secagg.h"

#define MAX_JOBS_STORED 100000 /* registry cap, all states */

static const char *const PHASE_NAME[] = {
    "waiting_for_parties", "share_keys", "exponents",   "masked_input",
    "consistency",         "unmasking",  "factorizing", "noise_exchange",
    "plain_upload",        "done",       "failed"};
static const char *const TIMING_NAME[] = {"advertise_keys", "share_keys",     "exponents",
                                          "masked_input",   "consistency",    "unmasking",
                                          "factorizing",    "noise_exchange", "plain_upload"};

const char *agg_phase_name(enum jphase ph)
{
    return PHASE_NAME[ph];
}

const char *agg_timing_name(int t)
{
    return TIMING_NAME[t];
}

/* ------------------------------------------------------------ small helpers */

double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void iso_time(double t, char out[32])
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Remove a directory tree (our own layout: a few levels, no symlinks followed). */
void rm_tree(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;

    if (d == NULL) {
        (void)unlink(path);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        char sub[4600];
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= sizeof sub) {
            continue;
        }
        if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
            rm_tree(sub);
        } else {
            (void)unlink(sub);
        }
    }
    closedir(d);
    (void)rmdir(path);
}

void count_add(agg_mgr *m, uint64_t *field, uint64_t k)
{
    pthread_mutex_lock(&m->count_mu);
    *field += k;
    pthread_mutex_unlock(&m->count_mu);
}

void wake(agg_mgr *m)
{
    pthread_mutex_lock(&m->wake_mu);
    m->woken = 1;
    pthread_cond_signal(&m->wake_cv);
    pthread_mutex_unlock(&m->wake_mu);
}

/* Internal failures (not a bad message): the job cannot go on safely. */
int is_internal(int code)
{
    return code == FS_ENOMEM || code == FS_EIO || code == FS_ECRYPTO || code == FS_EINTERNAL ||
           code == FS_ENUMERIC;
}

json_t *ids_where(const uint8_t *flags, const uint8_t *unless, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t v = 1; a != NULL && v <= n; v++) {
        if (flags[v] && (unless == NULL || !unless[v])) {
            json_array_append_new(a, json_integer(v));
        }
    }
    return a;
}

/* ------------------------------------------------------------ chunk files */

/* Party's upload of the aggregation in progress (j->r; sm_mu held): one file
 * of little-endian words, chunk idx at byte 8 * idx * chunk_words. */
static int words_path(const agg_job *j, uint32_t party, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s/agg-%u/p%u.words", j->dir, j->r, party) >= cap ? -1 : 0;
}

/* Remove every aggregation's chunk files and the upload temp dir. */
static void rm_chunks(const agg_job *j)
{
    for (uint32_t r = 0; r < j->naggs; r++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/agg-%u", j->dir, r);
        rm_tree(p);
    }
    rm_tree(j->tmp_dir);
}

/* Words of aggregation r: secure-sum rows*cols; fedsvd N*d; fedpca samples
 * 3d+1 (mean), 3d (variance), then N*d (lib/proto/fedpca.h). */
static uint64_t agg_len(const agg_job *j, uint32_t r)
{
    if (j->power) {
        return pj_round_len(&j->spec, r);
    }
    if (j->fed && r + 1 < j->naggs) {
        return r == 0 ? 3 * j->spec.cols + 1 : 3 * j->spec.cols;
    }
    return j->spec.rows * j->spec.cols;
}

/* 1 when aggregation r's sum goes back to the parties (fedpca statistics). */
static int agg_is_stats(const agg_job *j, uint32_t r)
{
    return j->fed && r + 1 < j->naggs;
}

void agg_le64_decode(uint64_t *y, const uint8_t *b, size_t m)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if ((const void *)y != (const void *)b) {
        memmove(y, b, m * 8); /* already the host's order; y and b may overlap */
    }
#else
    for (size_t i = 0; i < m; i++) {
        const uint8_t *p = b + 8 * i;
        y[i] = (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) |
               ((uint64_t)p[3] << 24) | ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) |
               ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
    }
#endif
}

/* Words [off, off + m) of a party's upload file, decoded. */
static int read_words(const char *path, uint64_t off, uint64_t *y, size_t m, struct fs_err *err)
{
    size_t want = m * 8;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        return fs_err_set(err, FS_EIO, "upload file: %s", strerror(errno));
    }
    while (got < want) {
        ssize_t r = pread(fd, (uint8_t *)y + got, want - got, (off_t)(off * 8 + got));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            close(fd);
            return fs_err_set(err, FS_EIO, "upload file: short read");
        }
        got += (size_t)r;
    }
    close(fd);
    agg_le64_decode(y, (const uint8_t *)y, m); /* in place */
    return 0;
}

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
/* Encode m words little-endian (in place is allowed: y and b may alias). */
static void le64_encode(uint8_t *b, const uint64_t *y, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        uint64_t v = y[i];
        for (int k = 0; k < 8; k++) {
            b[8 * i + (size_t)k] = (uint8_t)(v >> (8 * k));
        }
    }
}
#endif

/* Write n bytes at off into path (created 0600). The 4 KiB-aligned part goes
 * through O_DIRECT when the buffer allows it: it skips the page-cache copy,
 * which on some hosts costs more CPU than receiving the bytes did (measured:
 * 2.0 s of system time per 800 MB buffered, 0.5 s direct), and the data is
 * still there for a restarted process. The rest, or all of it when O_DIRECT
 * is refused (tmpfs, unaligned chunk sizes), is written normally.
 * @return 0 or an errno value. */
static int write_upload(const char *path, const uint8_t *p, size_t n, off_t off, int sync)
{
    size_t direct = ((uintptr_t)p % 4096 == 0 && off % 4096 == 0) ? n / 4096 * 4096 : 0;
    int fd = -1;
    int e = 0;

    if (direct > 0) {
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_DIRECT, 0600);
        if (fd >= 0 && fs_pwrite_all(fd, p, direct, off) != 0) {
            direct = 0; /* e.g. EINVAL from a file system without O_DIRECT */
        }
        if (fd >= 0 && sync && direct > 0 && fdatasync(fd) != 0) {
            e = errno;
        }
        if (fd >= 0) {
            close(fd);
        } else {
            direct = 0;
        }
    }
    if (e == 0 && direct < n) {
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
            return errno;
        }
        if (fs_pwrite_all(fd, p + direct, n - direct, off + (off_t)direct) != 0 ||
            (sync && fdatasync(fd) != 0)) {
            e = errno != 0 ? errno : EIO;
        }
        close(fd);
    }
    return e;
}

/* Write chunk idx of party's upload into its file (and fdatasync it with
 * --fsync) before the state machine folds it: a restart replays it from
 * there, and a party that drops mid-upload is taken out of the sum with it. */
static int cs_put(void *ctx, uint32_t party, uint64_t idx, const uint64_t *y, size_t m,
                  struct fs_err *err)
{
    struct chunk_ctx *c = ctx;
    agg_job *j = c->job;
    char path[4600];
    char dir[4600];
    uint8_t *le = NULL;
    const uint8_t *bytes = (const uint8_t *)y;
    int rc = 0;

    if (j->replaying) {
        return 0; /* the data was read from that very file */
    }
    if (words_path(j, party, path, sizeof path) != 0 ||
        (size_t)snprintf(dir, sizeof dir, "%s/agg-%u", j->dir, j->r) >= sizeof dir) {
        return fs_err_set(err, FS_EINVAL, "upload path too long");
    }
    rc = fs_mkdir_p(dir, err);
    if (rc != 0) {
        return rc;
    }
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    le = malloc(m * 8 == 0 ? 1 : m * 8);
    if (le == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    le64_encode(le, y, m);
    bytes = le;
#endif
    rc = write_upload(path, bytes, m * 8, (off_t)(idx * j->chunk_words * 8), j->mgr->cfg.fsync);
    if (rc != 0) {
        rc = fs_err_set(err, FS_EIO, "upload file: %s", strerror(rc));
    }
    free(le);
    return rc;
}

static int cs_get(void *ctx, uint32_t party, uint64_t idx, uint64_t *y, size_t m,
                  struct fs_err *err)
{
    struct chunk_ctx *c = ctx;
    char path[4600];

    if (words_path(c->job, party, path, sizeof path) != 0) {
        return fs_err_set(err, FS_EINVAL, "upload path too long");
    }
    return read_words(path, idx * c->job->chunk_words, y, m, err);
}

/* Upload files stay until the job ends: replay after a restart reads them. */
static void cs_drop(void *ctx, uint32_t party)
{
    (void)ctx;
    (void)party;
}

/* ------------------------------------------------------------ job lifecycle */

static void job_free(agg_job *j)
{
    if (j == NULL) {
        return;
    }
    fs_secagg_server_free(j->sm);
    pj_free(j->pw);
    fs_auth_free(j->auth);
    free(j->joined);
    free(j->shared);
    free(j->dropped);
    free(j->in_round);
    free(j->sent);
    free(j->has_exp);
    free(j->exp);
    free(j->sealed);
    free(j->has_sealed);
    free(j->pubexp);
    free(j->has_pubexp);
    free(j->sizes);
    free(j->first_u3);
    json_decref(j->roster);
    json_decref(j->aggs);
    json_decref(j->result);
    pthread_mutex_destroy(&j->mu);
    pthread_mutex_destroy(&j->sm_mu);
    free(j);
}

/* A job shell: parameters, bitmaps, directories. No state machine yet. */
static int job_alloc(agg_mgr *m, const char *id, const struct fs_job_spec *spec,
                     uint32_t chunk_words, agg_job **out, struct fs_err *err)
{
    agg_job *j = calloc(1, sizeof *j);
    uint32_t n = spec->parties;
    int rc = 0;

    *out = NULL;
    if (j == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_mutex_init(&j->sm_mu, NULL);
    j->mgr = m;
    snprintf(j->id, sizeof j->id, "%s", id);
    j->spec = *spec;
    snprintf(j->server_url, sizeof j->server_url, "%s", spec->server_url);
    j->n = n;
    j->chunk_words = chunk_words;
    j->fed = fs_job_is_fedsvd(spec->algorithm);
    j->power = fs_job_is_fedpower(spec->algorithm);
    j->naggs = fs_job_aggregations(spec);
    j->len = agg_len(j, 0);
    j->nchunks = (j->len + chunk_words - 1) / chunk_words;
    snprintf(j->dir, sizeof j->dir, "%s/jobs/%s", m->data_dir, id);
    snprintf(j->tmp_dir, sizeof j->tmp_dir, "%s/tmp", j->dir);
    j->joined = calloc((size_t)n + 1, 1);
    j->shared = calloc((size_t)n + 1, 1);
    j->dropped = calloc((size_t)n + 1, 1);
    j->in_round = calloc((size_t)n + 1, 1);
    j->sent = calloc((size_t)n + 1, 1);
    j->has_exp = calloc((size_t)n + 1, 1);
    j->exp = calloc((size_t)n + 1, sizeof *j->exp);
    j->sealed = calloc((size_t)n + 1, sizeof *j->sealed);
    j->has_sealed = calloc((size_t)n + 1, 1);
    j->pubexp = calloc((size_t)n + 1, sizeof *j->pubexp);
    j->has_pubexp = calloc((size_t)n + 1, 1);
    j->sizes = calloc((size_t)n + 1, sizeof *j->sizes);
    j->aggs = json_array();
    if (j->joined == NULL || j->shared == NULL || j->dropped == NULL || j->in_round == NULL ||
        j->sent == NULL || j->has_exp == NULL || j->exp == NULL || j->sealed == NULL ||
        j->has_sealed == NULL || j->pubexp == NULL || j->has_pubexp == NULL || j->sizes == NULL ||
        j->aggs == NULL) {
        job_free(j);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (uint32_t r = 0; r < j->naggs; r++) {
        json_array_append_new(j->aggs, json_null());
    }
    if (j->fed) {
        for (uint32_t v = 0; v < n; v++) {
            j->sizes[v] = (size_t)spec->fed.party_sizes[v];
        }
        memset(&j->fj, 0, sizeof j->fj);
        j->fj.partition =
            spec->fed.partition == FS_JOB_FEATURES ? FS_FEDSVD_FEATURES : FS_FEDSVD_SAMPLES;
        j->fj.rows = (size_t)spec->rows;
        j->fj.cols = (size_t)spec->cols;
        j->fj.parties = n;
        j->fj.sizes = j->sizes;
        rc = fs_fedsvd_job_check(&j->fj, err);
        if (rc != 0) {
            job_free(j);
            return fs_err_set(err, FS_EINVAL, "%s", err->msg);
        }
    }
    rc = fs_auth_new(&j->auth, err);
    if (rc != 0) {
        job_free(j);
        return rc;
    }
    j->cfg.n = n;
    j->cfg.t = spec->threshold;
    j->cfg.aggregations = j->power ? pj_secagg_aggregations(spec) : j->naggs;
    j->cfg.chunk_words = chunk_words;
    rc = fs_wire_secagg_job_id(id, j->cfg.job_id, err);
    if (rc != 0) {
        job_free(j);
        return rc;
    }
    j->cs.job = j;
    *out = j;
    return 0;
}

static int job_new_sm(agg_job *j, struct fs_err *err)
{
    struct fs_secagg_chunk_store st;
    int rc;

    st.ctx = &j->cs;
    st.put = cs_put;
    st.get = cs_get;
    st.drop = cs_drop;
    rc = fs_secagg_server_new(&j->cfg, &st, &j->sm, err);
    if (rc == 0 && j->spec.has_pins) {
        /* pinned identities: an advertisement under another key is refused */
        rc = fs_secagg_server_set_pins(
            j->sm, (const uint8_t(*)[FS_SECAGG_KEY_LEN])j->spec.party_keys, j->n, err);
        if (rc != 0) {
            fs_secagg_server_free(j->sm);
            j->sm = NULL;
            return rc;
        }
    }
    if (rc == 0) {
        /* unmasking (a PRG pass per party over the sum) on every core: the
         * job's other work waits for it */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        fs_secagg_server_set_threads(j->sm, cpus < 1 ? 1u : cpus > 8 ? 8u : (unsigned)cpus);
    }
    return rc;
}

static int add_digests(agg_job *j, const uint8_t (*digests)[32], struct fs_err *err)
{
    for (uint32_t v = 1; v <= j->n; v++) {
        char label[32];
        int rc;
        snprintf(label, sizeof label, "party:%u", v);
        rc = fs_auth_add_digest(j->auth, digests[v - 1], label, err);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static int mgr_register(agg_mgr *m, agg_job *j, struct fs_err *err)
{
    int rc = 0;

    pthread_rwlock_wrlock(&m->lock);
    if (m->njobs == m->cap) {
        size_t ncap = m->cap == 0 ? 64 : m->cap * 2;
        agg_job **nj = realloc(m->jobs, ncap * sizeof *nj);
        if (nj == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        } else {
            m->jobs = nj;
            m->cap = ncap;
        }
    }
    if (rc == 0) {
        m->jobs[m->njobs++] = j;
    }
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

/* ------------------------------------------------------------ status documents */

static json_t *timings_json(const agg_job *j)
{
    json_t *o = json_object();
    for (int i = 0; o != NULL && i < NTIMINGS; i++) {
        if (j->has_timing[i]) {
            json_object_set_new(o, TIMING_NAME[i], json_real(j->timings[i]));
        }
    }
    return o;
}

int job_running(const agg_job *j)
{
    return j->phase != JP_DONE && j->phase != JP_FAILED;
}

/* The SecAgg round (0..4) a phase belongs to, or -1 (exponents, factorizing, over). */
static int secagg_round(enum jphase ph)
{
    switch (ph) {
    case JP_R0:
        return 0;
    case JP_R1:
        return 1;
    case JP_R2:
        return 2;
    case JP_R3:
        return 3;
    case JP_R4:
        return 4;
    default:
        return -1;
    }
}

/* fedsvd/fedpca parameters of the Job document. */
static void fed_status(const agg_job *j, json_t *o)
{
    json_t *sizes = json_array();
    const struct fs_job_fedsvd *f = &j->spec.fed;

    for (uint32_t v = 0; sizes != NULL && v < j->n; v++) {
        json_array_append_new(sizes, json_integer((json_int_t)f->party_sizes[v]));
    }
    json_object_set_new(o, "partition", json_string(fs_job_partition_name(f->partition)));
    json_object_set_new(o, "party_sizes", sizes);
    json_object_set_new(o, "k", f->k > 0 ? json_integer((json_int_t)f->k) : json_null());
    json_object_set_new(o, "method",
                        json_string(f->method == FS_JOB_RANDOMIZED ? "randomized" : "exact"));
    json_object_set_new(o, "standardize", json_boolean(f->standardize));
    json_object_set_new(o, "allow_dropouts", json_boolean(f->allow_dropouts));
}

/* Bytes by phase, {"<timing name>": {"in": n, "out": n}}, for the phases
 * that saw traffic (a request counts in the phase open when it ended). */
static json_t *phase_bytes_json(const agg_job *j)
{
    json_t *o = json_object();
    for (int i = 0; o != NULL && i < NTIMINGS; i++) {
        if (j->phase_in[i] != 0 || j->phase_out[i] != 0) {
            json_object_set_new(o, TIMING_NAME[i],
                                json_pack("{s:I, s:I}", "in", (json_int_t)j->phase_in[i], "out",
                                          (json_int_t)j->phase_out[i]));
        }
    }
    return o;
}

/* mu held: 1 when the open phase waits for party v's message. */
static int waits_for(const agg_job *j, uint32_t v)
{
    return job_running(j) && !j->finishing && j->in_round[v] && !j->sent[v] && !j->dropped[v];
}

/* Each party's state (the dashboard's table) and the parties the job waits
 * for; mu held. sr: the open SecAgg round or -1. */
static void party_status(const agg_job *j, int sr, json_t *o)
{
    json_t *a = json_array();
    json_t *w = json_array();

    for (uint32_t v = 1; a != NULL && w != NULL && v <= j->n; v++) {
        int expected = job_running(j) && !j->finishing && j->in_round[v] && !j->dropped[v];
        json_array_append_new(
            a, json_pack("{s:i, s:b, s:b, s:b, s:b, s:b, s:o}", "party", (int)v, "joined",
                         j->joined[v] != 0, "dropped", j->dropped[v] != 0, "expected", expected,
                         "sent", expected && j->sent[v] != 0, "waiting", waits_for(j, v), "round",
                         expected && sr >= 0 ? json_integer(sr) : json_null()));
        if (waits_for(j, v)) {
            json_array_append_new(w, json_integer((json_int_t)v));
        }
    }
    json_object_set_new(o, "party_states", a);
    json_object_set_new(o, "waiting_for", w);
}

/* The Job document; mu held. */
static json_t *status_locked(const agg_job *j)
{
    const char *state = j->phase == JP_DONE ? "done" : j->phase == JP_FAILED ? "failed" : "running";
    int sr = secagg_round(j->phase);
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:[I, I], s:i, s:i}", "id", j->id,
                  "algorithm", j->spec.algorithm, "name", j->spec.name, "phase",
                  PHASE_NAME[j->phase], "state", state, "aggregation", (int)j->r, "aggregations",
                  (int)j->naggs, "parties", (int)j->n, "threshold", (int)j->spec.threshold, "shape",
                  (json_int_t)j->spec.rows, (json_int_t)j->spec.cols, "chunk_words",
                  (int)j->chunk_words, "round_timeout_s", (int)j->spec.round_timeout_s);

    if (o == NULL) {
        return NULL;
    }
    if (j->fed) {
        fed_status(j, o);
    }
    if (j->power) {
        pj_status_locked(j, o);
    }
    json_object_set_new(o, "round", job_running(j) && sr >= 0 ? json_integer(sr) : json_null());
    json_object_set_new(o, "present", ids_where(j->joined, j->dropped, j->n));
    json_object_set_new(o, "dropped", ids_where(j->dropped, NULL, j->n));
    json_object_set_new(o, "bytes_in", json_integer((json_int_t)j->bytes_in));
    json_object_set_new(o, "bytes_out", json_integer((json_int_t)j->bytes_out));
    json_object_set_new(o, "timings", timings_json(j));
    json_object_set_new(o, "bytes_by_phase", phase_bytes_json(j));
    party_status(j, sr, o);
    json_object_set_new(o, "created_at", json_string(j->created_at));
    json_object_set_new(o, "phase_elapsed_s",
                        job_running(j)
                            ? json_real(floor((now_wall() - j->phase_opened) * 10 + 0.5) / 10)
                            : json_null());
    if (job_running(j) && !j->finishing) {
        double left = j->deadline_mono - now_mono();
        json_object_set_new(o, "deadline_in_s",
                            json_real(left > 0 ? floor(left * 10 + 0.5) / 10 : 0.0));
    } else {
        json_object_set_new(o, "deadline_in_s", json_null());
    }
    json_object_set_new(o, "error", j->error[0] != '\0' ? json_string(j->error) : json_null());
    return o;
}

json_t *agg_job_status(agg_job *j)
{
    json_t *o;

    pthread_mutex_lock(&j->mu);
    o = status_locked(j);
    pthread_mutex_unlock(&j->mu);
    return o;
}

/* Snapshot persisted with the job row: status counters survive restarts and
 * finished jobs are served from it. mu held. */
static char *snapshot_locked(const agg_job *j)
{
    json_t *o = json_object();
    char *s = NULL;

    if (o == NULL) {
        return NULL;
    }
    json_object_set_new(o, "job", status_locked(j));
    json_object_set_new(o, "aggregation_docs", json_deep_copy(j->aggs));
    s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

void persist_state(agg_job *j, const char *result_json)
{
    struct fs_err err = {0};
    const char *state;
    char *snap;
    char error[512];

    pthread_mutex_lock(&j->mu);
    state = j->phase == JP_DONE ? "done" : j->phase == JP_FAILED ? "failed" : "running";
    snap = snapshot_locked(j);
    snprintf(error, sizeof error, "%s", j->error);
    pthread_mutex_unlock(&j->mu);
    if (agg_store_job_update(j->mgr->st, j->id, state, error[0] != '\0' ? error : NULL, result_json,
                             snap, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot persist job state", "{s:s, s:s}", "job", j->id, "error",
                    err.msg);
    }
    free(snap);
}

/* ------------------------------------------------------------ failing */

/* The job fails for good: sm_mu held. Frees the state machine and chunks. */
void fail_job(agg_job *j, const char *reason)
{
    pthread_mutex_lock(&j->mu);
    if (j->phase == JP_FAILED || j->phase == JP_DONE) {
        pthread_mutex_unlock(&j->mu);
        return;
    }
    snprintf(j->error, sizeof j->error, "%s", reason);
    j->phase = JP_FAILED;
    j->finishing = 0;
    pthread_mutex_unlock(&j->mu);
    fs_log_pack(FS_LOG_WARN, "job failed", "{s:s, s:s}", "job", j->id, "reason", reason);
    if (!j->replaying) {
        persist_state(j, NULL);
    }
    fs_secagg_server_free(j->sm);
    j->sm = NULL;
    rm_chunks(j);
}

/* sm_mu held. After an operation on the state machine failed: an internal
 * error or an abort ends the job; a rejected message changes nothing. */
void after_sm_error(agg_job *j, int rc, const struct fs_err *err)
{
    if (j->sm != NULL && fs_secagg_server_phase(j->sm) == FS_SECAGG_ABORTED) {
        fail_job(j, fs_secagg_server_abort_reason(j->sm));
    } else if (is_internal(rc)) {
        char reason[600];
        snprintf(reason, sizeof reason, "internal error: %s", err != NULL ? err->msg : "");
        fail_job(j, reason);
    }
}

/* ------------------------------------------------------------ event log */

int log_event(agg_job *j, const char *kind, uint32_t party, uint64_t idx, const void *body,
              size_t len, double at, struct fs_err *err)
{
    int rc;

    if (j->replaying) {
        return 0;
    }
    rc = agg_store_event_append(j->mgr->st, j->id, j->next_seq, kind, party, idx, body, len, at,
                                err);
    if (rc == 0) {
        j->next_seq++;
        return 0;
    }
    /* the state machine is ahead of the log: a replay would differ */
    {
        char reason[600];
        snprintf(reason, sizeof reason, "storage error: %s", err != NULL ? err->msg : "");
        fail_job(j, reason);
    }
    return rc;
}

int log_json(agg_job *j, const char *kind, uint32_t party, const json_t *body, double at,
             struct fs_err *err)
{
    char *s = json_dumps(body, JSON_COMPACT);
    int rc;

    if (s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = log_event(j, kind, party, 0, s, strlen(s), at, err);
    free(s);
    return rc;
}

/* ------------------------------------------------------------ applying messages (sm_mu held) */

static int apply_adv(agg_job *j, const struct fs_secagg_adv *a, int has_exp, int e, double at,
                     struct fs_err *err)
{
    int rc;
    int repeat;

    pthread_mutex_lock(&j->mu);
    repeat = j->joined[a->id];
    if (repeat && (j->has_exp[a->id] != (uint8_t)has_exp || (has_exp && j->exp[a->id] != e))) {
        pthread_mutex_unlock(&j->mu);
        return fs_err_set(err, FS_ECONFLICT, "party %u already advertised another max_abs_exp",
                          a->id);
    }
    pthread_mutex_unlock(&j->mu);
    if (fs_secagg_server_check_pin(j->sm, a, err) != 0) {
        /* a key that is not the job's pin for this party: 403, nothing stored */
        char why[FS_ERR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err->msg);
        return fs_err_set(err, AGG_EFORBIDDEN, "%s", why);
    }
    rc = fs_secagg_server_add_adv(j->sm, a, err);
    if (rc != 0) {
        after_sm_error(j, rc, err);
        return rc == FS_EAUTH ? fs_err_set(err, FS_EINVAL, "%s", err->msg) : rc;
    }
    if (repeat) {
        return 0;
    }
    {
        json_t *body = fs_wire_adv_encode(a, has_exp, e);
        if (body == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        rc = log_json(j, "adv", a->id, body, at, err);
        json_decref(body);
        if (rc != 0) {
            return rc;
        }
    }
    pthread_mutex_lock(&j->mu);
    j->joined[a->id] = 1;
    j->sent[a->id] = 1;
    j->has_exp[a->id] = (uint8_t)has_exp;
    j->exp[a->id] = e;
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static int apply_shares(agg_job *j, uint32_t party, const struct fs_secagg_share_ct *cts, size_t k,
                        const json_t *body, double at, struct fs_err *err)
{
    int repeat;
    int rc;

    pthread_mutex_lock(&j->mu);
    repeat = j->shared[party];
    pthread_mutex_unlock(&j->mu);
    rc = fs_secagg_server_add_shares(j->sm, party, cts, k, err);
    if (rc != 0) {
        after_sm_error(j, rc, err);
        return rc;
    }
    if (repeat) {
        return 0;
    }
    rc = log_json(j, "shares", party, body, at, err);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    j->shared[party] = 1;
    j->sent[party] = 1;
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static int apply_masked(agg_job *j, uint32_t party, uint64_t idx, const uint64_t *y, size_t m,
                        double at, struct fs_err *err)
{
    int is_new = 0;
    int rc = fs_secagg_server_add_masked_ex(j->sm, party, idx, y, m, &is_new, err);

    if (rc != 0) {
        after_sm_error(j, rc, err);
        return rc;
    }
    if (!j->replaying && !is_new) {
        return 0; /* an identical repeat */
    }
    /* The chunk's words are in the party's upload file; the event says
     * which chunk (logs of earlier versions also carry its SHA-256). */
    rc = log_event(j, "masked", party, idx, NULL, 0, at, err);
    if (rc != 0) {
        return rc;
    }
    count_add(j->mgr, &j->mgr->counts.chunks_accepted, 1);
    if (fs_secagg_server_has_masked(j->sm, party)) {
        pthread_mutex_lock(&j->mu);
        j->sent[party] = 1;
        pthread_mutex_unlock(&j->mu);
    }
    return 0;
}

static int apply_sig(agg_job *j, uint32_t party, const uint8_t sig[FS_SECAGG_SIG_LEN], double at,
                     struct fs_err *err)
{
    int repeat;
    int rc;

    pthread_mutex_lock(&j->mu);
    repeat = j->sent[party];
    pthread_mutex_unlock(&j->mu);
    rc = fs_secagg_server_add_consistency(j->sm, party, sig, err);
    if (rc != 0) {
        after_sm_error(j, rc, err);
        return rc == FS_EAUTH ? fs_err_set(err, FS_EINVAL, "%s", err->msg) : rc;
    }
    if (repeat) {
        return 0;
    }
    rc = log_event(j, "sig", party, 0, sig, FS_SECAGG_SIG_LEN, at, err);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    j->sent[party] = 1;
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static int apply_reveals(agg_job *j, uint32_t party, const struct fs_secagg_reveal *rv, size_t k,
                         const json_t *body, double at, struct fs_err *err)
{
    int repeat;
    int rc;

    pthread_mutex_lock(&j->mu);
    repeat = j->sent[party];
    pthread_mutex_unlock(&j->mu);
    rc = fs_secagg_server_add_reveals(j->sm, party, rv, k, err);
    if (rc != 0) {
        after_sm_error(j, rc, err);
        return rc;
    }
    if (repeat) {
        return 0;
    }
    rc = log_json(j, "reveals", party, body, at, err);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    j->sent[party] = 1;
    pthread_mutex_unlock(&j->mu);
    return 0;
}

/* ------------------------------------------------------------ fedsvd exponents (sm_mu held) */

static int apply_sealed(agg_job *j, uint32_t party, const uint8_t sealed[FS_FEDSVD_SEALED_EXP_LEN],
                        double at, struct fs_err *err)
{
    int repeat;
    int rc;

    pthread_mutex_lock(&j->mu);
    repeat = j->has_sealed[party];
    if (repeat && !fs_ct_eq(j->sealed[party], sealed, FS_FEDSVD_SEALED_EXP_LEN)) {
        pthread_mutex_unlock(&j->mu);
        return fs_err_set(err, FS_ECONFLICT,
                          "party %u already sent another sealed exponent for aggregation %u", party,
                          j->r);
    }
    pthread_mutex_unlock(&j->mu);
    if (repeat) {
        return 0;
    }
    rc = log_event(j, "exp", party, j->r, sealed, FS_FEDSVD_SEALED_EXP_LEN, at, err);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    memcpy(j->sealed[party], sealed, FS_FEDSVD_SEALED_EXP_LEN);
    j->has_sealed[party] = 1;
    j->sent[party] = 1;
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static int apply_pubexp(agg_job *j, uint32_t party, int e, double at, struct fs_err *err)
{
    uint32_t other = 0;
    char body[16];
    int rc;

    pthread_mutex_lock(&j->mu);
    if (j->has_pubexp[party]) {
        int same = j->pubexp[party] == e;
        pthread_mutex_unlock(&j->mu);
        return same ? 0
                    : fs_err_set(err, FS_ECONFLICT,
                                 "party %u already reported another public exponent", party);
    }
    for (uint32_t v = 1; v <= j->n; v++) {
        if (j->has_pubexp[v] && j->pubexp[v] != e) {
            other = v;
            break;
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (other != 0) {
        char reason[256];
        snprintf(reason, sizeof reason,
                 "parties %u and %u report different public exponents: the relayed sealed "
                 "exponents differ between parties",
                 other, party);
        fail_job(j, reason);
        return fs_err_set(err, AGG_EABORTED, "job failed: %s", reason);
    }
    snprintf(body, sizeof body, "%d", e);
    rc = log_event(j, "pubexp", party, j->r, body, strlen(body), at, err);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    j->pubexp[party] = e;
    j->has_pubexp[party] = 1;
    pthread_mutex_unlock(&j->mu);
    return 0;
}

/* ------------------------------------------------------------ closing rounds (sm_mu held) */

/* mu held: parties expected this round that did not send count as dropped;
 * *first receives the lowest such id (0 when none). */
uint32_t mark_dropped_locked(agg_job *j, uint32_t *first)
{
    uint32_t k = 0;

    *first = 0;
    for (uint32_t v = 1; v <= j->n; v++) {
        if (j->in_round[v] && !j->sent[v] && !j->dropped[v]) {
            j->dropped[v] = 1;
            if (k == 0) {
                *first = v;
            }
            k++;
        }
    }
    return k;
}

/* mu held: the next round expects exactly the ids in set. Time spent in a
 * phase adds up over the aggregations. */
void next_round_locked(agg_job *j, enum jphase ph, const uint32_t *set, size_t k, double at,
                       int record)
{
    if (record && j->phase < NTIMINGS) {
        j->timings[j->phase] += at - j->phase_opened;
        j->has_timing[j->phase] = 1;
    }
    memset(j->in_round, 0, (size_t)j->n + 1);
    memset(j->sent, 0, (size_t)j->n + 1);
    for (size_t i = 0; i < k; i++) {
        j->in_round[set[i]] = 1;
    }
    j->phase = ph;
    j->phase_opened = at;
    j->deadline_mono = now_mono() + (double)j->spec.round_timeout_s;
}

uint32_t *flag_ids(const uint8_t *flags, uint32_t n, size_t *k)
{
    uint32_t *ids = calloc((size_t)n + 1, sizeof *ids);
    *k = 0;
    for (uint32_t v = 1; ids != NULL && v <= n; v++) {
        if (flags[v]) {
            ids[(*k)++] = v;
        }
    }
    return ids;
}

/* The Aggregation document of the aggregation in progress (borrowed; mu held). */
json_t *cur_agg(const agg_job *j)
{
    json_t *d = json_array_get(j->aggs, j->r);
    return json_is_object(d) ? d : NULL;
}

/* Fixed-point parameters for aggregation 0: B = 2^max(e) over the active
 * parties (1 when all their matrices are zero), summands = |active|. */
static int choose_fixedpt(agg_job *j, const uint32_t *active, size_t na, struct fs_fixedpt *fp,
                          struct fs_err *err)
{
    int have = 0;
    int e = 0;
    double bound;

    pthread_mutex_lock(&j->mu);
    for (size_t i = 0; i < na; i++) {
        uint32_t v = active[i];
        if (j->has_exp[v] && (!have || j->exp[v] > e)) {
            e = j->exp[v];
            have = 1;
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (!have) {
        bound = 1.0;
    } else if (e >= DBL_MAX_EXP) {
        bound = DBL_MAX;
    } else {
        bound = ldexp(1.0, e);
        if (bound == 0.0) {
            bound = DBL_MIN;
        }
    }
    return fs_fixedpt_init(fp, bound, (unsigned)na, err);
}

static json_t *agg_doc(const agg_job *j, const uint32_t *active, size_t na)
{
    json_t *o =
        json_pack("{s:i, s:I, s:I, s:I, s:s, s:o, s:n, s:n, s:f, s:i, s:i}", "index", 0, "length",
                  (json_int_t)j->len, "chunk_words", (json_int_t)j->chunk_words, "chunks",
                  (json_int_t)j->nchunks, "phase", "masked_input", "active",
                  fs_wire_ids_encode(active, na), "survivors", "signatures", "bound", j->fp.bound,
                  "frac_bits", j->fp.frac_bits, "summands", (int)j->fp.summands);
    return o;
}

/* secure-sum: begin the one aggregation (fixed point chosen by the server). */
static int do_begin(agg_job *j, const struct fs_fixedpt *given, double at, struct fs_err *err)
{
    const uint32_t *active;
    size_t na = 0;
    struct fs_fixedpt fp;
    json_t *params = NULL;
    json_t *doc = NULL;
    int rc;

    rc = fs_secagg_server_begin(j->sm, 0, j->len, err);
    if (rc != 0) {
        after_sm_error(j, rc, err);
        return rc;
    }
    active = fs_secagg_server_set(j->sm, 0, &na);
    if (given != NULL) {
        fp = *given;
    } else {
        rc = choose_fixedpt(j, active, na, &fp, err);
        if (rc != 0) {
            fail_job(j, "cannot choose fixed-point parameters");
            return rc;
        }
    }
    params = json_pack("{s:i, s:I, s:f, s:i, s:i}", "r", 0, "len", (json_int_t)j->len, "bound",
                       fp.bound, "frac_bits", fp.frac_bits, "summands", (int)fp.summands);
    if (params == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = log_json(j, "begin", 0, params, at, err);
    json_decref(params);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    j->fp = fp;
    doc = agg_doc(j, active, na);
    json_array_set_new(j->aggs, 0, doc != NULL ? doc : json_null());
    next_round_locked(j, JP_R2, active, na, at, 0);
    pthread_mutex_unlock(&j->mu);
    return doc == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
}

/* fedsvd/fedpca: begin aggregation r; it opens with the exponents round.
 * Parties keep their own fixed point (lib/proto/fedsvd.h, fedpca.h). */
static int do_begin_fed(agg_job *j, uint32_t r, double at, struct fs_err *err)
{
    const uint32_t *active;
    size_t na = 0;
    uint64_t len = agg_len(j, r);
    json_t *params;
    json_t *doc;
    int rc;

    rc = fs_secagg_server_begin(j->sm, r, len, err);
    if (rc != 0) {
        after_sm_error(j, rc, err);
        return rc;
    }
    active = fs_secagg_server_set(j->sm, 0, &na);
    params = json_pack("{s:i, s:I}", "r", (int)r, "len", (json_int_t)len);
    if (params == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = log_json(j, "begin", 0, params, at, err);
    json_decref(params);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    j->r = r;
    j->len = len;
    j->nchunks = (len + j->chunk_words - 1) / j->chunk_words;
    doc = json_pack("{s:i, s:s, s:I, s:I, s:I, s:s, s:o, s:n, s:n, s:n, s:n}", "index", (int)r,
                    "kind", agg_is_stats(j, r) ? "stats" : "svd", "length", (json_int_t)len,
                    "chunk_words", (json_int_t)j->chunk_words, "chunks", (json_int_t)j->nchunks,
                    "phase", "exponents", "active", fs_wire_ids_encode(active, na), "exponents",
                    "survivors", "signatures", "sum");
    json_array_set_new(j->aggs, r, doc != NULL ? doc : json_null());
    memset(j->has_sealed, 0, (size_t)j->n + 1);
    memset(j->has_pubexp, 0, (size_t)j->n + 1);
    next_round_locked(j, JP_EXP, active, na, at, 0);
    pthread_mutex_unlock(&j->mu);
    return doc == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
}

static void *finish_worker(void *arg);

int start_worker(agg_job *j)
{
    int old;
    int rc;

    /* the previous aggregation's worker, if the driver has not joined it yet */
    pthread_mutex_lock(&j->mu);
    old = j->worker_running;
    j->worker_running = 0;
    pthread_mutex_unlock(&j->mu);
    if (old) {
        pthread_join(j->worker, NULL);
    }
    pthread_mutex_lock(&j->mu);
    j->finishing = 1;
    j->worker_exited = 0;
    rc = pthread_create(&j->worker, NULL, finish_worker, j);
    j->worker_running = rc == 0;
    pthread_mutex_unlock(&j->mu);
    return rc;
}

/* fedsvd/fedpca without allow_dropouts: a party missing at a round that
 * comes before its data is in the sum fails the job at once. */
void fail_no_dropouts(agg_job *j, enum jphase ph, uint32_t who, uint32_t drops)
{
    char reason[400];

    snprintf(reason, sizeof reason,
             "party %u%s did not send its %s message of aggregation %u before the round "
             "deadline; the job does not allow dropouts (allow_dropouts is false), so its "
             "result could not include every party's data",
             who, drops > 1 ? " (and others)" : "", PHASE_NAME[ph], j->r);
    fail_job(j, reason);
}

/* Close the current round (sm_mu held). */
static int close_round(agg_job *j, double at, int by_deadline, struct fs_err *err)
{
    enum jphase ph;
    uint32_t drops;
    uint32_t first_drop = 0;
    size_t k = 0;
    uint32_t *ids = NULL;
    const uint32_t *set;
    int rc = 0;
    static const char *const KIND[] = {"close_adv",    "close_shares",      "close_exp",
                                       "close_masked", "close_consistency", "close_unmask"};

    pthread_mutex_lock(&j->mu);
    ph = j->phase;
    pthread_mutex_unlock(&j->mu);
    if (j->power && (ph == JP_PLAIN || ph == JP_NOISEX) && j->sm != NULL) {
        return pj_close_round(j, at, by_deadline, err);
    }
    if (ph > JP_R4 || j->sm == NULL) {
        return 0;
    }
    switch (ph) {
    case JP_R0:
        rc = fs_secagg_server_close_adv(j->sm, err);
        break;
    case JP_R1:
        rc = fs_secagg_server_close_shares(j->sm, err);
        break;
    case JP_R2:
        rc = fs_secagg_server_close_masked(j->sm, err);
        break;
    case JP_R3:
        rc = fs_secagg_server_close_consistency(j->sm, err);
        break;
    default:
        break;
    }
    pthread_mutex_lock(&j->mu);
    drops = mark_dropped_locked(j, &first_drop);
    pthread_mutex_unlock(&j->mu);
    if (!j->replaying) {
        count_add(j->mgr,
                  by_deadline ? &j->mgr->counts.rounds_deadline : &j->mgr->counts.rounds_complete,
                  1);
        count_add(j->mgr, &j->mgr->counts.parties_dropped, drops);
        fs_log_pack(FS_LOG_INFO, "round closed", "{s:s, s:s, s:i, s:s, s:i}", "job", j->id, "phase",
                    PHASE_NAME[ph], "aggregation", (int)j->r, "reason",
                    by_deadline ? "deadline" : "complete", "dropped", (int)drops);
    }
    if (rc != 0) {
        after_sm_error(j, rc, err);
        return rc;
    }
    rc = log_event(j, KIND[ph], 0, 0, NULL, 0, at, err);
    if (rc != 0) {
        return rc;
    }
    if (j->fed && !j->spec.fed.allow_dropouts && drops > 0 && ph <= JP_R2) {
        fail_no_dropouts(j, ph, first_drop, drops);
        return 0;
    }
    if (j->power && !j->spec.power.allow_dropouts && drops > 0) {
        fail_no_dropouts(j, ph, first_drop, drops);
        return 0;
    }
    switch (ph) {
    case JP_R0: {
        const struct fs_secagg_adv *r = fs_secagg_server_roster(j->sm, &k);
        json_t *doc = fs_wire_roster_encode(r, k);
        ids = flag_ids(j->joined, j->n, &k);
        pthread_mutex_lock(&j->mu);
        json_decref(j->roster);
        j->roster = doc;
        if (ids != NULL) {
            next_round_locked(j, JP_R1, ids, k, at, 1);
        }
        pthread_mutex_unlock(&j->mu);
        if (doc == NULL || ids == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        break;
    }
    case JP_R1:
        pthread_mutex_lock(&j->mu);
        ids = flag_ids(j->shared, j->n, &k);
        if (j->pw != NULL && ids != NULL) {
            pj_set_active_locked(j, ids, k);
        }
        if (ids != NULL) {
            next_round_locked(j, JP_R2, ids, k, at, 1); /* until begin, moments later */
        }
        pthread_mutex_unlock(&j->mu);
        if (ids == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        } else if (!j->replaying) {
            rc = j->fed     ? do_begin_fed(j, 0, at, err)
                 : j->power ? pj_begin(j, 0, at, err)
                            : do_begin(j, NULL, at, err);
        }
        break;
    case JP_EXP: {
        json_t *exps;
        pthread_mutex_lock(&j->mu);
        ids = flag_ids(j->has_sealed, j->n, &k);
        pthread_mutex_unlock(&j->mu);
        if (ids == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
            break;
        }
        if (k < j->spec.threshold) {
            char reason[200];
            snprintf(reason, sizeof reason, "%zu sealed exponents in aggregation %u, threshold %u",
                     k, j->r, j->spec.threshold);
            fail_job(j, reason);
            break;
        }
        {
            uint8_t(*sl)[FS_FEDSVD_SEALED_EXP_LEN] = calloc(k + 1, sizeof *sl);
            pthread_mutex_lock(&j->mu);
            for (size_t q = 0; sl != NULL && q < k; q++) {
                memcpy(sl[q], j->sealed[ids[q]], FS_FEDSVD_SEALED_EXP_LEN);
            }
            exps = sl != NULL ? fs_wire_exps_encode(ids, (const uint8_t(*)[32])sl, k) : NULL;
            free(sl);
            if (exps != NULL && cur_agg(j) != NULL) {
                json_object_set_new(cur_agg(j), "exponents", exps);
                json_object_set_new(cur_agg(j), "phase", json_string("masked_input"));
            } else {
                json_decref(exps);
                exps = NULL;
            }
            next_round_locked(j, JP_R2, ids, k, at, 1);
            pthread_mutex_unlock(&j->mu);
        }
        if (exps == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        break;
    }
    case JP_R2:
        set = fs_secagg_server_set(j->sm, 3, &k);
        pthread_mutex_lock(&j->mu);
        if (cur_agg(j) != NULL) {
            json_object_set_new(cur_agg(j), "survivors", fs_wire_ids_encode(set, k));
            json_object_set_new(cur_agg(j), "phase", json_string("consistency"));
        }
        next_round_locked(j, JP_R3, set, k, at, 1);
        pthread_mutex_unlock(&j->mu);
        break;
    case JP_R3:
        set = fs_secagg_server_set(j->sm, 4, &k);
        pthread_mutex_lock(&j->mu);
        if (cur_agg(j) != NULL) {
            json_object_set_new(cur_agg(j), "signatures",
                                fs_wire_sigs_encode(set, fs_secagg_server_sigs(j->sm), k));
            json_object_set_new(cur_agg(j), "phase", json_string("unmasking"));
        }
        next_round_locked(j, JP_R4, set, k, at, 1);
        pthread_mutex_unlock(&j->mu);
        break;
    case JP_R4:
        if (!j->replaying && start_worker(j) != 0) {
            fail_job(j, "cannot start the unmasking worker");
            rc = fs_err_set(err, FS_EINTERNAL, "cannot start a thread");
        }
        break;
    default:
        break;
    }
    free(ids);
    if (rc == 0 && !j->replaying) {
        persist_state(j, NULL);
    }
    return rc;
}

/* ------------------------------------------------------------ unmasking and the result */

int file_sha256_hex(const char *path, char hex[65], struct fs_err *err)
{
    fs_sha256_ctx *h = NULL;
    uint8_t buf[65536];
    uint8_t d[32];
    FILE *f = fopen(path, "rb");
    size_t r;
    int rc;

    if (f == NULL) {
        return fs_err_set(err, FS_EIO, "%s: %s", path, strerror(errno));
    }
    rc = fs_sha256_new(&h, err);
    while (rc == 0 && (r = fread(buf, 1, sizeof buf, f)) > 0) {
        rc = fs_sha256_update(h, buf, r, err);
    }
    if (rc == 0 && ferror(f)) {
        rc = fs_err_set(err, FS_EIO, "%s: read error", path);
    }
    if (rc == 0) {
        rc = fs_sha256_final(h, d, err);
    }
    fs_sha256_free(h);
    fclose(f);
    for (int i = 0; rc == 0 && i < 32; i++) {
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    }
    return rc;
}

/* sum.npy and the Result manifest. sm_mu held. */
static int write_result(agg_job *j, const uint64_t *sum, json_t **out, struct fs_err *err)
{
    char dir[4400];
    char path[4500];
    char hex[65];
    fs_mat *mat = NULL;
    const uint32_t *u3;
    size_t n3 = 0;
    uint8_t *surv = NULL;
    json_t *res = NULL;
    int rc;

    *out = NULL;
    snprintf(dir, sizeof dir, "%s/result", j->dir);
    snprintf(path, sizeof path, "%s/sum.npy", dir);
    rc = fs_mkdir_p(dir, err);
    if (rc != 0) {
        return rc;
    }
    mat = fs_mat_new_uninit((size_t)j->spec.rows, (size_t)j->spec.cols);
    surv = calloc((size_t)j->n + 1, 1);
    if (mat == NULL || surv == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "cannot hold the %llu x %llu result",
                        (unsigned long long)j->spec.rows, (unsigned long long)j->spec.cols);
        goto out;
    }
    /* the vector is the matrix in column-major order, as is fs_mat with ld = rows */
    fs_fixedpt_decode(&j->fp, sum, mat->data, (size_t)j->len);
    rc = fs_npy_write_mat(path, mat, err);
    if (rc == 0) {
        rc = file_sha256_hex(path, hex, err);
    }
    if (rc != 0) {
        goto out;
    }
    u3 = fs_secagg_server_set(j->sm, 3, &n3);
    for (size_t i = 0; i < n3; i++) {
        surv[u3[i]] = 1;
    }
    {
        uint8_t *all = malloc((size_t)j->n + 1);
        if (all == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
            goto out;
        }
        memset(all, 1, (size_t)j->n + 1);
        res = json_pack("{s:s, s:[I, I], s:i, s:o, s:o, s:[{s:s, s:[I, I], s:s}], s:{s:f, s:i, "
                        "s:i}}",
                        "algorithm", j->spec.algorithm, "shape", (json_int_t)j->spec.rows,
                        (json_int_t)j->spec.cols, "parties", (int)j->n, "survivors",
                        fs_wire_ids_encode(u3, n3), "dropped", ids_where(all, surv, j->n), "files",
                        "name", "sum.npy", "shape", (json_int_t)j->spec.rows,
                        (json_int_t)j->spec.cols, "sha256", hex, "fixed_point", "bound",
                        j->fp.bound, "frac_bits", j->fp.frac_bits, "summands", (int)j->fp.summands);
        free(all);
    }
    if (res == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    *out = res;
out:
    fs_mat_free(mat);
    free(surv);
    return rc;
}

/* The survivors U3 of the aggregation just unmasked and every other party. */
json_t *dropped_of(const agg_job *j, const uint32_t *u3, size_t n3)
{
    uint8_t *surv = calloc((size_t)j->n + 1, 1);
    uint8_t *all = malloc((size_t)j->n + 1);
    json_t *o = NULL;

    if (surv != NULL && all != NULL) {
        for (size_t i = 0; i < n3; i++) {
            surv[u3[i]] = 1;
        }
        memset(all, 1, (size_t)j->n + 1);
        o = ids_where(all, surv, j->n);
    }
    free(surv);
    free(all);
    return o;
}

/* Path of the published sum of statistics aggregation r. */
static int sum_path(const agg_job *j, uint32_t r, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s/result/agg-%u-sum.npy", j->dir, r) >= cap ? -1 : 0;
}

/*
 * A fedpca statistics aggregation is complete: unmask, check the
 * contributors (the same in every aggregation), and publish the ring sum to
 * the parties (it is padded with offsets only they can remove). Also run on
 * replay, before the next aggregation's "begin". sm_mu held.
 */
static int finish_stats(agg_job *j, double at, struct fs_err *err)
{
    const uint64_t *sum = NULL;
    const uint32_t *u3;
    size_t n3 = 0;
    char dir[4400];
    char path[4500];
    char hex[65];
    int rc;

    rc = fs_secagg_server_finish(j->sm, &sum, err);
    if (rc != 0) {
        return rc;
    }
    u3 = fs_secagg_server_set(j->sm, 3, &n3);
    rc = fs_fedpca_server_check_round(&j->fj, j->spec.fed.allow_dropouts, j->first_u3, j->nfirst,
                                      u3, n3, err);
    if (rc != 0) {
        return rc;
    }
    if (j->first_u3 == NULL) {
        j->first_u3 = malloc((n3 + 1) * sizeof *j->first_u3);
        if (j->first_u3 == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        memcpy(j->first_u3, u3, n3 * sizeof *u3);
        j->nfirst = n3;
    }
    snprintf(dir, sizeof dir, "%s/result", j->dir);
    rc = fs_mkdir_p(dir, err);
    if (rc == 0 && sum_path(j, j->r, path, sizeof path) != 0) {
        rc = fs_err_set(err, FS_EINVAL, "path too long");
    }
    if (rc == 0) {
        rc = fs_npy_write_u64(path, sum, (size_t)j->len, err);
    }
    if (rc == 0) {
        rc = file_sha256_hex(path, hex, err);
    }
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    j->timings[JP_R4] += at - j->phase_opened;
    j->has_timing[JP_R4] = 1;
    if (cur_agg(j) != NULL) {
        json_object_set_new(cur_agg(j), "phase", json_string("done"));
        json_object_set_new(cur_agg(j), "sum",
                            json_pack("{s:I, s:s}", "words", (json_int_t)j->len, "sha256", hex));
    }
    pthread_mutex_unlock(&j->mu);
    return 0;
}

/* The public exponent the SVD aggregation's contributors reported. */
static int agreed_exponent(agg_job *j, const uint32_t *u3, size_t n3, int *e, struct fs_err *err)
{
    int have = 0;
    int rc = 0;

    pthread_mutex_lock(&j->mu);
    for (size_t i = 0; i < n3 && rc == 0; i++) {
        uint32_t v = u3[i];
        if (!j->has_pubexp[v]) {
            rc = fs_err_set(err, FS_ESTATE, "party %u uploaded without reporting the exponent", v);
        } else if (have && j->pubexp[v] != *e) {
            rc = fs_err_set(err, FS_ESTATE, "the parties report different public exponents");
        } else {
            *e = j->pubexp[v];
            have = 1;
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && !have) {
        rc = fs_err_set(err, FS_ESTATE, "no contributor reported the public exponent");
    }
    return rc;
}

/* Publish S and V' (U' for features) and build the Result. */
static int write_fed_result(agg_job *j, const struct fs_fedsvd_published *pub, const uint32_t *u3,
                            size_t n3, size_t n_included, int e, json_t **out, struct fs_err *err)
{
    const char *shared = j->spec.fed.partition == FS_JOB_FEATURES ? "uprime.npy" : "vprime.npy";
    uint64_t other = j->spec.fed.partition == FS_JOB_FEATURES ? j->spec.rows : j->spec.cols;
    double rtol = (double)(j->spec.rows > j->spec.cols ? j->spec.rows : j->spec.cols) * DBL_EPSILON;
    char dir[4400];
    char p_s[4500];
    char p_v[4500];
    char h_s[65];
    char h_v[65];
    json_t *sv = json_array();
    json_t *res;
    size_t rank = 0;
    int rc;

    *out = NULL;
    snprintf(dir, sizeof dir, "%s/result", j->dir);
    snprintf(p_s, sizeof p_s, "%s/s.npy", dir);
    snprintf(p_v, sizeof p_v, "%s/%s", dir, shared);
    rc = fs_mkdir_p(dir, err);
    if (rc == 0) {
        rc = fs_npy_write_vec(p_s, pub->s, pub->r, err);
    }
    if (rc == 0) {
        rc = fs_npy_write_mat(p_v, pub->vc, err);
    }
    if (rc == 0) {
        rc = file_sha256_hex(p_s, h_s, err);
    }
    if (rc == 0) {
        rc = file_sha256_hex(p_v, h_v, err);
    }
    if (rc != 0) {
        json_decref(sv);
        return rc;
    }
    for (size_t i = 0; i < pub->r; i++) {
        if (pub->r > 0 && pub->s[i] > rtol * pub->s[0]) {
            rank++;
        }
        json_array_append_new(sv, json_real(pub->s[i]));
    }
    res = json_pack("{s:s, s:s, s:[I, I], s:i, s:o, s:o, s:I, s:o, s:I, s:I, s:f, s:o, s:f, s:i, "
                    "s:[{s:s, s:[I], s:s}, {s:s, s:[I, I], s:s}]}",
                    "algorithm", j->spec.algorithm, "partition",
                    fs_job_partition_name(j->spec.fed.partition), "shape", (json_int_t)j->spec.rows,
                    (json_int_t)j->spec.cols, "parties", (int)j->n, "survivors",
                    fs_wire_ids_encode(u3, n3), "dropped", dropped_of(j, u3, n3), "n_included",
                    (json_int_t)n_included, "k",
                    j->spec.fed.k > 0 ? json_integer((json_int_t)j->spec.fed.k) : json_null(), "r",
                    (json_int_t)pub->r, "rank", (json_int_t)rank, "rtol", rtol, "singular_values",
                    sv, "total_sq", pub->total_sq, "public_exponent", e, "files", "name", "s.npy",
                    "shape", (json_int_t)pub->r, "sha256", h_s, "name", shared, "shape",
                    (json_int_t)other, (json_int_t)pub->r, "sha256", h_v);
    if (res == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    *out = res;
    return 0;
}

/*
 * The SVD aggregation is complete: unmask, check the contributors, decode
 * X' = A X B and factorize it (phase "factorizing", on this worker thread,
 * never an HTTP thread), publish S and the masked shared factor. sm_mu held.
 */
static int finish_svd(agg_job *j, json_t **out, struct fs_err *err)
{
    const uint64_t *sum = NULL;
    const uint32_t *u3;
    uint32_t *u3c = NULL;
    size_t n3 = 0;
    size_t n_included = 0;
    struct fs_fedsvd_published pub = {0};
    enum fs_topk_method method =
        j->spec.fed.method == FS_JOB_RANDOMIZED ? FS_TOPK_RANDOMIZED : FS_TOPK_AUTO;
    fs_mat *y = NULL;
    double at;
    int e = 0;
    int rc;

    *out = NULL;
    rc = fs_secagg_server_finish(j->sm, &sum, err);
    if (rc != 0) {
        return rc;
    }
    u3 = fs_secagg_server_set(j->sm, 3, &n3);
    u3c = malloc((n3 + 1) * sizeof *u3c);
    if (u3c == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    memcpy(u3c, u3, n3 * sizeof *u3);
    if (strcmp(j->spec.algorithm, "fedpca") == 0 && j->naggs > 1) {
        rc = fs_fedpca_server_check_round(&j->fj, j->spec.fed.allow_dropouts, j->first_u3,
                                          j->nfirst, u3c, n3, err);
    }
    if (rc == 0) {
        rc = fs_fedsvd_server_check_contributors(&j->fj, j->spec.fed.allow_dropouts, u3c, n3,
                                                 &n_included, err);
    }
    if (rc == 0) {
        rc = agreed_exponent(j, u3c, n3, &e, err);
    }
    if (rc == 0) {
        /* decode in place: the ring sum becomes X' without a second N x d buffer */
        uint64_t n = 0;
        uint64_t *owned = fs_secagg_server_take_sum(j->sm, &n);
        rc = owned == NULL || owned != sum || n != j->len
                 ? fs_err_set(err, FS_EINTERNAL, "the aggregation's sum is not available")
                 : fs_fedsvd_server_decode_owned(&j->fj, e, owned, n, &y, err);
        if (owned != NULL && owned != sum) {
            free(owned);
        }
    }
    if (rc != 0) {
        goto out;
    }
    at = now_wall();
    pthread_mutex_lock(&j->mu);
    j->timings[JP_R4] += at - j->phase_opened;
    j->has_timing[JP_R4] = 1;
    j->phase = JP_FACTOR;
    j->phase_opened = at;
    if (cur_agg(j) != NULL) {
        json_object_set_new(cur_agg(j), "phase", json_string("done"));
    }
    pthread_mutex_unlock(&j->mu);
    persist_state(j, NULL);
    /* The ring sum is decoded (it is y now): free the rest of the secagg state. */
    fs_secagg_server_free(j->sm);
    j->sm = NULL;
    rc = fs_fedsvd_server_factorize(y, (size_t)j->spec.fed.k, method, NULL, &pub, err);
    fs_mat_free(y);
    y = NULL;
    if (rc == 0) {
        rc = write_fed_result(j, &pub, u3c, n3, n_included, e, out, err);
    }
out:
    fs_mat_free(y);
    fs_fedsvd_published_clear(&pub);
    free(u3c);
    return rc;
}

/* secure-sum: unmask and write sum.npy. sm_mu held. */
static int finish_sum(agg_job *j, json_t **out, struct fs_err *err)
{
    const uint64_t *sum = NULL;
    int rc = fs_secagg_server_finish(j->sm, &sum, err);

    *out = NULL;
    return rc == 0 ? write_result(j, sum, out, err) : rc;
}

static void fail_after_finish(agg_job *j, const char *what, const struct fs_err *err)
{
    if (j->sm != NULL && fs_secagg_server_phase(j->sm) == FS_SECAGG_ABORTED) {
        fail_job(j, fs_secagg_server_abort_reason(j->sm));
    } else {
        char reason[600];
        snprintf(reason, sizeof reason, "%s: %s", what, err->msg);
        fail_job(j, reason);
    }
}

static void *finish_worker(void *arg)
{
    agg_job *j = arg;
    struct fs_err err = {0};
    json_t *res = NULL;
    char *res_s = NULL;
    double at;
    int rc;

    pthread_mutex_lock(&j->sm_mu);
    if (j->sm == NULL) {
        goto out;
    }
    if (j->power) {
        pj_worker(j);
        goto out;
    }
    if (j->fed && agg_is_stats(j, j->r)) {
        /* a fedpca statistics round: publish its sum, go on to the next */
        at = now_wall();
        rc = finish_stats(j, at, &err);
        if (rc == 0) {
            rc = do_begin_fed(j, j->r + 1, at, &err); /* finishing ends at "out" */
        }
        if (rc != 0) {
            fail_after_finish(j, is_internal(rc) ? "unmasking failed" : "statistics round", &err);
        } else {
            persist_state(j, NULL);
        }
        goto out;
    }
    rc = j->fed ? finish_svd(j, &res, &err) : finish_sum(j, &res, &err);
    if (rc == 0) {
        res_s = json_dumps(res, JSON_COMPACT);
        rc = res_s == NULL ? fs_err_set(&err, FS_ENOMEM, "out of memory") : 0;
    }
    at = now_wall();
    if (rc == 0) {
        rc = log_event(j, "done", 0, 0, NULL, 0, at, &err);
    }
    if (rc != 0) {
        fail_after_finish(j, j->fed ? "factorization failed" : "unmasking failed", &err);
        json_decref(res);
        goto out;
    }
    pthread_mutex_lock(&j->mu);
    if (j->phase == JP_FACTOR) {
        j->timings[JP_FACTOR] += at - j->phase_opened;
        j->has_timing[JP_FACTOR] = 1;
    } else {
        j->timings[JP_R4] += at - j->phase_opened;
        j->has_timing[JP_R4] = 1;
    }
    j->phase = JP_DONE;
    j->finishing = 0;
    j->result = res;
    memset(j->in_round, 0, (size_t)j->n + 1);
    if (cur_agg(j) != NULL) {
        json_object_set_new(cur_agg(j), "phase", json_string("done"));
    }
    pthread_mutex_unlock(&j->mu);
    persist_state(j, res_s);
    fs_log_pack(FS_LOG_INFO, "job done", "{s:s, s:f, s:f}", "job", j->id, "unmasking_s",
                j->timings[JP_R4], "factorizing_s", j->timings[JP_FACTOR]);
    fs_secagg_server_free(j->sm);
    j->sm = NULL;
    rm_chunks(j);
out:
    free(res_s);
    pthread_mutex_unlock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    j->finishing = 0;
    j->worker_exited = 1;
    pthread_mutex_unlock(&j->mu);
    wake(j->mgr);
    return NULL;
}

/* ------------------------------------------------------------ entering a round */

/* Position of (phase, aggregation r) on the job's timeline. */
static uint64_t pos_of(const agg_job *j, enum jphase ph, uint32_t r)
{
    switch (ph) {
    case JP_R0:
    case JP_R1:
        return (uint64_t)ph;
    case JP_EXP:
    case JP_R2:
    case JP_R3:
    case JP_R4:
        return 10 + 5 * (uint64_t)r + (uint64_t)(ph - JP_EXP);
    case JP_PLAIN: /* plain fedpower: in place of masked input */
        return 10 + 5 * (uint64_t)r + 1;
    case JP_NOISEX: /* fedpower-utility: after unmasking */
        return 10 + 5 * (uint64_t)r + 4;
    case JP_FACTOR:
        return 10 + 5 * (uint64_t)j->naggs;
    default:
        return UINT64_MAX;
    }
}

/*
 * Check under mu that `party` may act in phase `want` of aggregation r now,
 * then take sm_mu and check again (the driver may have closed the round
 * meanwhile). On success sm_mu is held. party 0 skips the membership check.
 */
int check_phase_locked(const agg_job *j, enum jphase want, uint32_t r, uint32_t party,
                       struct fs_err *err)
{
    uint64_t now = pos_of(j, j->phase, j->r);
    uint64_t need = pos_of(j, want, r);

    if (j->phase == JP_FAILED) {
        return fs_err_set(err, AGG_EABORTED, "job failed: %s", j->error);
    }
    if (j->finishing || j->phase == JP_DONE || now > need) {
        return fs_err_set(err, FS_ECONFLICT, "%s of aggregation %u is closed (job phase %s)",
                          PHASE_NAME[want], r,
                          j->finishing && j->phase == JP_R4 ? "unmasking" : PHASE_NAME[j->phase]);
    }
    if (now < need) {
        return fs_err_set(err, FS_ESTATE, "not yet: job phase is %s of aggregation %u",
                          PHASE_NAME[j->phase], j->r);
    }
    if (party != 0 && !j->in_round[party]) {
        return fs_err_set(err, FS_ECONFLICT, "party %u is not in this round: it was dropped",
                          party);
    }
    return 0;
}

int enter(agg_job *j, enum jphase want, uint32_t r, uint32_t party, struct fs_err *err)
{
    int rc;

    pthread_mutex_lock(&j->mu);
    rc = check_phase_locked(j, want, r, party, err);
    pthread_mutex_unlock(&j->mu);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    rc = check_phase_locked(j, want, r, party, err);
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && j->sm == NULL) {
        rc = fs_err_set(err, FS_ECONFLICT, "job is over");
    }
    if (rc != 0) {
        pthread_mutex_unlock(&j->sm_mu);
    }
    return rc;
}

void leave(agg_job *j)
{
    pthread_mutex_unlock(&j->sm_mu);
    wake(j->mgr);
}

/* mu held: `want` of aggregation r has closed for good, but what was
 * accepted in it may still be known (same aggregation, job not over), so a
 * repeat of an accepted message can be recognised. */
static int repeatable_locked(const agg_job *j, enum jphase want, uint32_t r)
{
    if (j->phase == JP_FAILED || j->phase == JP_DONE || j->phase == JP_FACTOR) {
        return 0;
    }
    if (!j->finishing && pos_of(j, j->phase, j->r) <= pos_of(j, want, r)) {
        return 0;
    }
    return want == JP_R0 || want == JP_R1 || r == j->r;
}

/* sm_mu held: the state machine has closed the secagg round of `want` too
 * (so its add_* accepts nothing new there, only an identical repeat). */
static int sm_closed(const agg_job *j, enum jphase want)
{
    enum fs_secagg_phase ph = fs_secagg_server_phase(j->sm);

    switch (want) {
    case JP_R0:
        return ph != FS_SECAGG_ADVERTISE && ph != FS_SECAGG_ABORTED;
    case JP_R1:
        return ph != FS_SECAGG_ADVERTISE && ph != FS_SECAGG_SHARE && ph != FS_SECAGG_ABORTED;
    case JP_R2:
        return ph == FS_SECAGG_CONSISTENCY || ph == FS_SECAGG_UNMASK || ph == FS_SECAGG_READY;
    case JP_R3:
        return ph == FS_SECAGG_UNMASK || ph == FS_SECAGG_READY;
    case JP_R4:
        return ph == FS_SECAGG_READY;
    default:
        return 1; /* not a secagg round: the caller compares with the job's own record */
    }
}

/*
 * enter() for a message that repeats one the party may already have had
 * accepted (docs: "an identical repeat succeeds"; a lost response must not
 * fail an honest party). When the round has closed but its messages are
 * still known, sm_mu is taken anyway, *closed is set and *closed_err keeps
 * the "is closed" answer: the caller accepts only an identical repeat
 * (changing nothing) and answers anything else with *closed_err.
 */
static int enter_repeat(agg_job *j, enum jphase want, uint32_t r, uint32_t party, int *closed,
                        struct fs_err *closed_err, struct fs_err *err)
{
    int rc = enter(j, want, r, party, closed_err);
    int ok;

    *closed = 0;
    if (rc != FS_ECONFLICT) {
        if (rc != 0 && err != NULL) {
            *err = *closed_err;
        }
        return rc;
    }
    pthread_mutex_lock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    ok = repeatable_locked(j, want, r);
    pthread_mutex_unlock(&j->mu);
    if (!ok || j->sm == NULL || !sm_closed(j, want)) {
        pthread_mutex_unlock(&j->sm_mu);
        if (err != NULL) {
            *err = *closed_err;
        }
        return rc;
    }
    *closed = 1;
    return 0;
}

/* The answer to a message for a closed round: 0 (an identical repeat: the
 * state machine or the job's record said so), else the "is closed" error. */
static int closed_verdict(int rc, const struct fs_err *closed_err, struct fs_err *err)
{
    if (rc == 0) {
        return 0;
    }
    if (err != NULL) {
        *err = *closed_err;
    }
    return closed_err->code;
}

/* ------------------------------------------------------------ public: party messages */

const char *agg_job_id(const agg_job *j)
{
    return j->id;
}

void agg_job_count_bytes(agg_job *j, uint64_t in, uint64_t out)
{
    pthread_mutex_lock(&j->mu);
    j->bytes_in += in;
    j->bytes_out += out;
    if (j->phase < NTIMINGS) {
        j->phase_in[j->phase] += in;
        j->phase_out[j->phase] += out;
    }
    pthread_mutex_unlock(&j->mu);
}

int agg_job_auth(agg_job *j, const char *token, size_t len, uint32_t *party, struct fs_err *err)
{
    char label[FS_AUTH_LABEL_MAX];
    unsigned long v;
    char *end = NULL;
    int rc = fs_auth_check_token(j->auth, token, len, label, err);

    *party = 0;
    if (rc != 0) {
        return fs_err_set(err, FS_EAUTH, "token is not valid for this job");
    }
    if (strncmp(label, "party:", 6) != 0) {
        return fs_err_set(err, FS_EAUTH, "token is not valid for this job");
    }
    v = strtoul(label + 6, &end, 10);
    if (end == label + 6 || *end != '\0' || v < 1 || v > j->n) {
        return fs_err_set(err, FS_EINTERNAL, "bad token label");
    }
    *party = (uint32_t)v;
    return 0;
}

int agg_job_post_adv(agg_job *j, uint32_t party, const json_t *body, struct fs_err *err)
{
    struct fs_secagg_adv a;
    struct fs_err cerr = {0};
    int closed = 0;
    int same_exp = 0;
    int has_exp = 0;
    int e = 0;
    int rc = fs_wire_adv_decode(body, &a, &has_exp, &e, err);

    if (rc != 0) {
        return rc;
    }
    if (a.id != party) {
        uint32_t id = a.id;
        fs_secagg_adv_clear(&a);
        return fs_err_set(err, AGG_EFORBIDDEN, "advert for party %u sent with party %u's token", id,
                          party);
    }
    rc = enter_repeat(j, JP_R0, 0, party, &closed, &cerr, err);
    if (rc != 0) {
        fs_secagg_adv_clear(&a);
        return rc;
    }
    if (closed) {
        pthread_mutex_lock(&j->mu);
        same_exp = j->joined[party] && j->has_exp[party] == (uint8_t)has_exp &&
                   (!has_exp || j->exp[party] == e);
        pthread_mutex_unlock(&j->mu);
        rc = closed_verdict(same_exp ? fs_secagg_server_add_adv(j->sm, &a, err) : FS_ECONFLICT,
                            &cerr, err);
    } else {
        rc = apply_adv(j, &a, has_exp, e, now_wall(), err);
    }
    leave(j);
    fs_secagg_adv_clear(&a); /* the state machine keeps its own copy */
    return rc;
}

int agg_job_get_roster(agg_job *j, json_t **out, struct fs_err *err)
{
    int rc = 0;

    *out = NULL;
    pthread_mutex_lock(&j->mu);
    if (j->phase == JP_FAILED) {
        rc = fs_err_set(err, AGG_EABORTED, "job failed: %s", j->error);
    } else if (j->roster == NULL) {
        rc = fs_err_set(err, j->phase == JP_R0 ? FS_ESTATE : FS_ECONFLICT,
                        j->phase == JP_R0 ? "key advertisement is still open"
                                          : "the roster is no longer available");
    } else {
        *out = json_incref(j->roster);
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int agg_job_post_shares(agg_job *j, uint32_t party, const json_t *body, struct fs_err *err)
{
    struct fs_secagg_share_ct *cts = NULL;
    struct fs_err cerr = {0};
    int closed = 0;
    size_t k = 0;
    int rc =
        fs_wire_shares_decode(body, 0, party, fs_secagg_share_ct_len(&j->cfg), j->n, &cts, &k, err);

    if (rc != 0) {
        return rc;
    }
    rc = enter_repeat(j, JP_R1, 0, party, &closed, &cerr, err);
    if (rc == 0) {
        rc = closed ? closed_verdict(fs_secagg_server_add_shares(j->sm, party, cts, k, err), &cerr,
                                     err)
                    : apply_shares(j, party, cts, k, body, now_wall(), err);
        leave(j);
    }
    fs_secagg_share_cts_free(cts, k);
    return rc;
}

int agg_job_get_shares(agg_job *j, uint32_t party, json_t **out, struct fs_err *err)
{
    const struct fs_secagg_share_ct **list = NULL;
    size_t k = 0;
    int rc = 0;

    *out = NULL;
    pthread_mutex_lock(&j->mu);
    if (j->phase == JP_FAILED) {
        rc = fs_err_set(err, AGG_EABORTED, "job failed: %s", j->error);
    } else if (j->phase <= JP_R1) {
        rc = fs_err_set(err, FS_ESTATE, "share exchange is still open");
    } else if (j->phase == JP_DONE || j->finishing) {
        rc = fs_err_set(err, FS_ECONFLICT, "shares are no longer available (job phase %s)",
                        j->finishing ? "unmasking" : PHASE_NAME[j->phase]);
    } else if (!j->shared[party]) {
        rc = fs_err_set(err, FS_ECONFLICT, "party %u did not share keys: it was dropped", party);
    }
    pthread_mutex_unlock(&j->mu);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->sm_mu);
    if (j->sm == NULL) {
        rc = fs_err_set(err, FS_ECONFLICT, "job is over");
    } else {
        rc = fs_secagg_server_shares_for(j->sm, party, &list, &k, err);
    }
    if (rc == 0) {
        *out = fs_wire_shares_encode(list, k, 1);
        if (*out == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        }
    }
    pthread_mutex_unlock(&j->sm_mu);
    free(list);
    return rc;
}

int agg_exists(const agg_job *j, uint32_t r, struct fs_err *err)
{
    if (r >= j->naggs) {
        return fs_err_set(err, FS_ENOTFOUND, "aggregation %u does not exist (this job has %u)", r,
                          j->naggs);
    }
    return 0;
}

int agg_job_get_agg(agg_job *j, uint32_t r, json_t **out, struct fs_err *err)
{
    int rc = agg_exists(j, r, err);
    json_t *doc;

    *out = NULL;
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    doc = json_array_get(j->aggs, r);
    if (j->phase == JP_FAILED) {
        rc = fs_err_set(err, AGG_EABORTED, "job failed: %s", j->error);
    } else if (!json_is_object(doc)) {
        rc = fs_err_set(err, FS_ESTATE, "aggregation %u has not begun (job phase %s)", r,
                        PHASE_NAME[j->phase]);
    } else {
        *out = json_deep_copy(doc);
        if (*out == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        } else if (r == j->r && ((j->phase <= JP_R4 && j->phase >= (j->fed ? JP_EXP : JP_R0)) ||
                                 j->phase == JP_NOISEX || j->phase == JP_PLAIN)) {
            json_object_set_new(*out, "phase", json_string(PHASE_NAME[j->phase]));
        }
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int agg_job_sum_path(agg_job *j, uint32_t r, char *path, size_t cap, struct fs_err *err)
{
    int rc = agg_exists(j, r, err);
    int have = 0;

    if (rc != 0) {
        return rc;
    }
    if (!agg_is_stats(j, r)) {
        return fs_err_set(err, FS_ENOTFOUND,
                          "aggregation %u publishes no sum (only fedpca statistics rounds do)", r);
    }
    pthread_mutex_lock(&j->mu);
    if (j->phase == JP_FAILED) {
        rc = fs_err_set(err, AGG_EABORTED, "job failed: %s", j->error);
    } else {
        have = json_is_object(json_object_get(json_array_get(j->aggs, r), "sum"));
        if (!have) {
            rc = fs_err_set(err, FS_ESTATE, "the sum of aggregation %u is not ready", r);
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && sum_path(j, r, path, cap) != 0) {
        rc = fs_err_set(err, FS_EINTERNAL, "path too long");
    }
    return rc;
}

int agg_job_chunk_check(agg_job *j, uint32_t party, uint32_t r, uint64_t idx, size_t *m,
                        struct fs_err *err)
{
    uint64_t nchunks;
    uint64_t len;
    int rc;

    *m = 0;
    rc = agg_exists(j, r, err);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    rc = check_phase_locked(j, JP_R2, r, party, err);
    if (rc == FS_ECONFLICT && repeatable_locked(j, JP_R2, r)) {
        rc = 0; /* perhaps an identical repeat: agg_job_put_chunk decides */
    } else if (rc == 0 && j->fed && !agg_is_stats(j, r) && !j->has_pubexp[party]) {
        rc = fs_err_set(err, FS_ECONFLICT,
                        "party %u: report the public exponent (POST .../public-exponent) before "
                        "uploading",
                        party);
    }
    nchunks = j->nchunks;
    len = j->len;
    pthread_mutex_unlock(&j->mu);
    if (rc != 0) {
        return rc;
    }
    if (idx >= nchunks) {
        return fs_err_set(err, FS_EINVAL, "chunk %llu does not exist (aggregation %u has %llu)",
                          (unsigned long long)idx, r, (unsigned long long)nchunks);
    }
    {
        uint64_t off = idx * j->chunk_words;
        uint64_t left = len - off;
        *m = (size_t)(left < j->chunk_words ? left : j->chunk_words);
    }
    return 0;
}

int agg_job_put_chunk(agg_job *j, uint32_t party, uint32_t r, uint64_t idx, const uint64_t *y,
                      size_t m, struct fs_err *err)
{
    struct fs_err cerr = {0};
    int closed = 0;
    int rc;

    rc = agg_exists(j, r, err);
    if (rc == 0) {
        rc = enter_repeat(j, JP_R2, r, party, &closed, &cerr, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (m != (size_t)((j->len - idx * j->chunk_words) < j->chunk_words
                          ? j->len - idx * j->chunk_words
                          : j->chunk_words)) {
        leave(j);
        return fs_err_set(err, FS_EINVAL, "chunk %llu: wrong length", (unsigned long long)idx);
    }
    rc = closed
             ? closed_verdict(fs_secagg_server_add_masked(j->sm, party, idx, y, m, err), &cerr, err)
             : apply_masked(j, party, idx, y, m, now_wall(), err);
    leave(j);
    return rc;
}

int agg_job_post_sig(agg_job *j, uint32_t party, uint32_t r, const json_t *body, struct fs_err *err)
{
    uint8_t sig[FS_SECAGG_SIG_LEN];
    struct fs_err cerr = {0};
    int closed = 0;
    int rc = agg_exists(j, r, err);

    if (rc == 0) {
        rc = fs_wire_sig_decode(body, sig, err);
    }
    if (rc == 0) {
        rc = enter_repeat(j, JP_R3, r, party, &closed, &cerr, err);
    }
    if (rc != 0) {
        return rc;
    }
    rc = closed
             ? closed_verdict(fs_secagg_server_add_consistency(j->sm, party, sig, err), &cerr, err)
             : apply_sig(j, party, sig, now_wall(), err);
    leave(j);
    return rc;
}

int agg_job_post_reveals(agg_job *j, uint32_t party, uint32_t r, const json_t *body,
                         struct fs_err *err)
{
    struct fs_secagg_reveal *rv = NULL;
    struct fs_err cerr = {0};
    int closed = 0;
    size_t k = 0;
    int rc = agg_exists(j, r, err);

    if (rc != 0) {
        return rc;
    }
    rc = fs_wire_reveals_decode(body, j->n, &rv, &k, err);
    if (rc != 0) {
        return rc;
    }
    rc = enter_repeat(j, JP_R4, r, party, &closed, &cerr, err);
    if (rc == 0) {
        rc = closed ? closed_verdict(fs_secagg_server_add_reveals(j->sm, party, rv, k, err), &cerr,
                                     err)
                    : apply_reveals(j, party, rv, k, body, now_wall(), err);
        leave(j);
    }
    fs_wipe(rv, k * sizeof *rv);
    free(rv);
    return rc;
}

int agg_job_post_exponent(agg_job *j, uint32_t party, uint32_t r, const json_t *body,
                          struct fs_err *err)
{
    uint8_t sealed[FS_FEDSVD_SEALED_EXP_LEN];
    struct fs_err cerr = {0};
    int closed = 0;
    int rc = agg_exists(j, r, err);

    if (rc == 0 && !j->fed) {
        rc = fs_err_set(err, FS_ENOTFOUND, "only fedsvd and fedpca jobs exchange exponents");
    }
    if (rc == 0) {
        rc = fs_wire_exp_decode(body, sealed, err);
    }
    if (rc == 0) {
        rc = enter_repeat(j, JP_EXP, r, party, &closed, &cerr, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (closed) {
        pthread_mutex_lock(&j->mu);
        rc = j->has_sealed[party] && fs_ct_eq(j->sealed[party], sealed, FS_FEDSVD_SEALED_EXP_LEN)
                 ? 0
                 : FS_ECONFLICT;
        pthread_mutex_unlock(&j->mu);
        rc = closed_verdict(rc, &cerr, err);
    } else {
        rc = apply_sealed(j, party, sealed, now_wall(), err);
    }
    leave(j);
    return rc;
}

int agg_job_post_pubexp(agg_job *j, uint32_t party, uint32_t r, const json_t *body,
                        struct fs_err *err)
{
    struct fs_err cerr = {0};
    int closed = 0;
    int e = 0;
    int rc = agg_exists(j, r, err);

    if (rc == 0 && (!j->fed || agg_is_stats(j, r))) {
        rc = fs_err_set(err, FS_ENOTFOUND,
                        "only the SVD aggregation of a fedsvd or fedpca job takes a public "
                        "exponent");
    }
    if (rc == 0) {
        rc = fs_wire_pubexp_decode(body, &e, err);
    }
    if (rc == 0) {
        rc = enter_repeat(j, JP_R2, r, party, &closed, &cerr, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (closed) {
        pthread_mutex_lock(&j->mu);
        rc = j->has_pubexp[party] && j->pubexp[party] == e ? 0 : FS_ECONFLICT;
        pthread_mutex_unlock(&j->mu);
        rc = closed_verdict(rc, &cerr, err);
    } else {
        rc = apply_pubexp(j, party, e, now_wall(), err);
    }
    leave(j);
    return rc;
}

int agg_job_result(agg_job *j, json_t **out, struct fs_err *err)
{
    int rc = 0;

    *out = NULL;
    pthread_mutex_lock(&j->mu);
    if (j->phase == JP_FAILED) {
        rc = fs_err_set(err, AGG_EABORTED, "job failed: %s", j->error);
    } else if (j->phase != JP_DONE || j->result == NULL) {
        rc = fs_err_set(err, FS_ESTATE, "no result yet (job phase %s)",
                        j->finishing ? "unmasking" : PHASE_NAME[j->phase]);
    } else {
        *out = json_incref(j->result);
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int agg_job_result_path(agg_job *j, const char *name, char *path, size_t cap, struct fs_err *err)
{
    json_t *res = NULL;
    int rc = agg_job_result(j, &res, err);

    json_decref(res);
    if (rc != 0) {
        return rc;
    }
    if (j->power ? !pj_result_name(j, name)
        : j->fed
            ? strcmp(name, "s") != 0 &&
                  strcmp(name, j->spec.fed.partition == FS_JOB_FEATURES ? "uprime" : "vprime") != 0
            : strcmp(name, "sum") != 0) {
        return fs_err_set(err, FS_ENOTFOUND, "this job has no result file of that name");
    }
    if ((size_t)snprintf(path, cap, "%s/result/%s.npy", j->dir, name) >= cap) {
        return fs_err_set(err, FS_EINTERNAL, "path too long");
    }
    return 0;
}

int agg_job_cancel(agg_job *j, struct fs_err *err)
{
    enum jphase ph;

    pthread_mutex_lock(&j->mu);
    ph = j->phase;
    if (ph == JP_DONE) {
        pthread_mutex_unlock(&j->mu);
        return fs_err_set(err, FS_ECONFLICT, "job is done");
    }
    if (j->finishing) {
        pthread_mutex_unlock(&j->mu);
        return fs_err_set(err, FS_ECONFLICT, "job is unmasking; it cannot be cancelled now");
    }
    pthread_mutex_unlock(&j->mu);
    if (ph == JP_FAILED) {
        return 0;
    }
    pthread_mutex_lock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    ph = j->phase;
    if (j->finishing) {
        ph = JP_DONE;
    }
    pthread_mutex_unlock(&j->mu);
    if (ph < JP_DONE) {
        fail_job(j, "cancelled by the operator");
    }
    pthread_mutex_unlock(&j->sm_mu);
    return ph == JP_DONE ? fs_err_set(err, FS_ECONFLICT, "job is done or unmasking") : 0;
}

/* ------------------------------------------------------------ creating jobs */

static uint64_t running_jobs(agg_mgr *m)
{
    uint64_t k = 0;

    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = 0; i < m->njobs; i++) {
        pthread_mutex_lock(&m->jobs[i]->mu);
        k += (uint64_t)job_running(m->jobs[i]);
        pthread_mutex_unlock(&m->jobs[i]->mu);
    }
    pthread_rwlock_unlock(&m->lock);
    return k;
}

static json_t *invitation_json(const agg_job *j, uint32_t party, const char *token)
{
    struct fs_invitation inv;
    json_t *o;

    memset(&inv, 0, sizeof inv);
    inv.version = FS_INVITATION_VERSION;
    snprintf(inv.job_id, sizeof inv.job_id, "%s", j->id);
    snprintf(inv.job_url, sizeof inv.job_url, "%s/v1/jobs/%s", j->server_url, j->id);
    inv.party = party;
    snprintf(inv.token, sizeof inv.token, "%s", token);
    snprintf(inv.algorithm, sizeof inv.algorithm, "%s", j->spec.algorithm);
    inv.parties = j->n;
    inv.threshold = j->spec.threshold;
    fs_job_party_shape(&j->spec, party, &inv.rows, &inv.cols);
    inv.has_pins = j->spec.has_pins; /* every party learns every pin */
    memcpy(inv.party_keys, j->spec.party_keys, sizeof inv.party_keys);
    if (j->fed) {
        /* masking_url and maskset are added by whoever creates the mask
         * set; the keys go only to requests signed by each party's pinned
         * identity: this server never holds a credential for masks */
        inv.is_fedsvd = 1;
        inv.global_rows = j->spec.rows;
        inv.global_cols = j->spec.cols;
        inv.fed = j->spec.fed;
    }
    if (j->power) {
        inv.is_fedpower = 1;
        inv.power = j->spec.power;
    }
    o = fs_invitation_encode(&inv);
    fs_invitation_wipe(&inv);
    return o;
}

int agg_job_create(agg_mgr *m, const struct fs_job_spec *spec_in, const char *server_url,
                   json_t **out, struct fs_err *err)
{
    struct fs_job_spec spec = *spec_in;
    char id[FS_JOB_ID_MAX + 1];
    char(*tokens)[FS_AUTH_TOKEN_GEN_LEN + 1] = NULL;
    uint8_t(*digests)[32] = NULL;
    agg_job *j = NULL;
    json_t *res = NULL;
    json_t *invs = NULL;
    json_t *sj = NULL;
    char *spec_s = NULL;
    uint32_t n = spec.parties;
    int rc;

    *out = NULL;
    if (strcmp(spec.algorithm, "secure-sum") != 0 && !fs_job_is_fedsvd(spec.algorithm) &&
        !fs_job_is_fedpower(spec.algorithm)) {
        return fs_err_set(err, FS_EINVAL, "algorithm \"%s\" is not supported by this server yet",
                          spec.algorithm);
    }
    if (fs_job_is_fedpower(spec.algorithm)) {
        rc = pj_prepare_spec(&spec, err); /* z0_seed, refuse weak privacy */
        if (rc != 0) {
            return rc;
        }
    } else if (spec.rows * spec.cols > m->cfg.max_elements) {
        return fs_err_set(err, FS_EINVAL, "shape: over the server's limit of %llu elements",
                          (unsigned long long)m->cfg.max_elements);
    }
    if (running_jobs(m) >= m->cfg.max_jobs) {
        return fs_err_set(err, AGG_ETOOMANY, "%u jobs are running, the server's limit",
                          m->cfg.max_jobs);
    }
    pthread_rwlock_rdlock(&m->lock);
    rc = m->njobs >= MAX_JOBS_STORED;
    pthread_rwlock_unlock(&m->lock);
    if (rc) {
        return fs_err_set(err, AGG_ETOOMANY, "the server holds %d jobs, its limit",
                          MAX_JOBS_STORED);
    }
    snprintf(spec.server_url, sizeof spec.server_url, "%s", server_url);
    rc = fs_job_id_generate(id, err);
    if (rc != 0) {
        return rc;
    }
    tokens = calloc(n, sizeof *tokens);
    digests = calloc(n, sizeof *digests);
    if (tokens == NULL || digests == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        rc = fs_auth_token_generate(tokens[i], err);
        if (rc == 0) {
            rc = fs_auth_digest(tokens[i], strlen(tokens[i]), digests[i], err);
        }
    }
    if (rc != 0) {
        goto out;
    }
    rc = job_alloc(m, id, &spec, m->cfg.chunk_words, &j, err);
    if (rc == 0) {
        rc = add_digests(j, (const uint8_t(*)[32])digests, err);
    }
    if (rc == 0) {
        rc = job_new_sm(j, err);
    }
    if (rc == 0 && j->power) {
        rc = pj_attach(j, 1, err); /* fedpower-utility: Paillier key generation */
    }
    if (rc != 0) {
        goto out;
    }
    j->created_unix = now_wall();
    iso_time(j->created_unix, j->created_at);
    j->phase = JP_R0;
    j->phase_opened = j->created_unix;
    j->deadline_mono = now_mono() + (double)spec.join_timeout_s;
    memset(j->in_round + 1, 1, n);
    j->next_seq = 1;
    sj = fs_job_spec_encode(&spec);
    spec_s = sj != NULL ? json_dumps(sj, JSON_COMPACT) : NULL;
    if (spec_s == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    rc = agg_store_job_insert(m->st, id, j->created_at, j->created_unix, spec_s, j->chunk_words,
                              (const uint8_t(*)[32])digests, n, err);
    if (rc != 0) {
        goto out;
    }
    invs = json_array();
    for (uint32_t v = 1; invs != NULL && v <= n; v++) {
        json_array_append_new(invs, invitation_json(j, v, tokens[v - 1]));
    }
    res = json_pack("{s:o, s:o}", "job", agg_job_status(j), "invitations", invs);
    invs = NULL;
    if (res == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    rc = mgr_register(m, j, err);
    if (rc != 0) {
        goto out;
    }
    persist_state(j, NULL);
    fs_log_pack(FS_LOG_INFO, "job created", "{s:s, s:s, s:i, s:i, s:I, s:I}", "job", id,
                "algorithm", spec.algorithm, "parties", (int)n, "threshold", (int)spec.threshold,
                "rows", (json_int_t)spec.rows, "cols", (json_int_t)spec.cols);
    *out = res;
    res = NULL;
    j = NULL;
out:
    if (tokens != NULL) {
        fs_wipe(tokens, (size_t)n * sizeof *tokens);
    }
    free(tokens);
    free(digests);
    free(spec_s);
    json_decref(sj);
    json_decref(invs);
    json_decref(res);
    job_free(j);
    return rc;
}

/* ------------------------------------------------------------ registry */

agg_job *agg_mgr_find(agg_mgr *m, const char *id)
{
    agg_job *j = NULL;

    if (!fs_job_id_valid(id)) {
        return NULL;
    }
    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = 0; i < m->njobs; i++) {
        if (strcmp(m->jobs[i]->id, id) == 0) {
            j = m->jobs[i];
            break;
        }
    }
    pthread_rwlock_unlock(&m->lock);
    return j;
}

json_t *agg_mgr_list(agg_mgr *m, const char *state_filter)
{
    json_t *arr = json_array();

    if (arr == NULL) {
        return NULL;
    }
    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = m->njobs; i-- > 0;) {
        json_t *s = agg_job_status(m->jobs[i]);
        if (s == NULL) {
            continue;
        }
        if (state_filter != NULL &&
            strcmp(json_string_value(json_object_get(s, "state")), state_filter) != 0) {
            json_decref(s);
            continue;
        }
        json_array_append_new(arr, s);
    }
    pthread_rwlock_unlock(&m->lock);
    return json_pack("{s:o}", "jobs", arr);
}

void agg_mgr_counts(agg_mgr *m, struct agg_counts *c)
{
    pthread_mutex_lock(&m->count_mu);
    *c = m->counts;
    pthread_mutex_unlock(&m->count_mu);
    c->running = c->done = c->failed = 0;
    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = 0; i < m->njobs; i++) {
        agg_job *j = m->jobs[i];
        pthread_mutex_lock(&j->mu);
        if (j->phase == JP_DONE) {
            c->done++;
        } else if (j->phase == JP_FAILED) {
            c->failed++;
        } else {
            c->running++;
        }
        pthread_mutex_unlock(&j->mu);
    }
    pthread_rwlock_unlock(&m->lock);
}

int agg_mgr_new(const struct agg_mgr_config *cfg, agg_store *st, agg_mgr **out, struct fs_err *err)
{
    agg_mgr *m = calloc(1, sizeof *m);

    *out = NULL;
    if (m == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    m->cfg = *cfg;
    snprintf(m->data_dir, sizeof m->data_dir, "%s", cfg->data_dir);
    m->cfg.data_dir = m->data_dir;
    m->st = st;
    pthread_rwlock_init(&m->lock, NULL);
    pthread_mutex_init(&m->wake_mu, NULL);
    pthread_cond_init(&m->wake_cv, NULL);
    pthread_mutex_init(&m->count_mu, NULL);
    *out = m;
    return 0;
}

void agg_mgr_free(agg_mgr *m)
{
    if (m == NULL) {
        return;
    }
    for (size_t i = 0; i < m->njobs; i++) {
        agg_job *j = m->jobs[i];
        int join;
        pthread_mutex_lock(&j->mu);
        join = j->worker_running;
        j->worker_running = 0;
        pthread_mutex_unlock(&j->mu);
        if (join) {
            pthread_join(j->worker, NULL);
        }
    }
    for (size_t i = 0; i < m->njobs; i++) {
        job_free(m->jobs[i]);
    }
    free(m->jobs);
    pthread_rwlock_destroy(&m->lock);
    pthread_mutex_destroy(&m->wake_mu);
    pthread_cond_destroy(&m->wake_cv);
    pthread_mutex_destroy(&m->count_mu);
    free(m);
}

/* ------------------------------------------------------------ the round driver */

void agg_mgr_wait(agg_mgr *m, unsigned ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&m->wake_mu);
    while (!m->woken) {
        if (pthread_cond_timedwait(&m->wake_cv, &m->wake_mu, &ts) != 0) {
            break;
        }
    }
    m->woken = 0;
    pthread_mutex_unlock(&m->wake_mu);
}

/* mu held: 1 when every party still in the round has sent its message. */
static int round_complete_locked(const agg_job *j)
{
    int any = 0;
    for (uint32_t v = 1; v <= j->n; v++) {
        if (j->in_round[v]) {
            any = 1;
            if (!j->sent[v]) {
                return 0;
            }
        }
    }
    return any;
}

static void tick_job(agg_job *j)
{
    struct fs_err err = {0};
    int due = 0;
    int by_deadline = 0;
    int join = 0;

    pthread_mutex_lock(&j->mu);
    if (j->worker_running && j->worker_exited) {
        join = 1;
        j->worker_running = 0;
    }
    if (job_running(j) && !j->finishing) {
        if (round_complete_locked(j)) {
            due = 1;
        } else if (now_mono() >= j->deadline_mono) {
            due = 1;
            by_deadline = 1;
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (join) {
        pthread_join(j->worker, NULL);
    }
    if (!due) {
        return;
    }
    pthread_mutex_lock(&j->sm_mu);
    pthread_mutex_lock(&j->mu);
    /* again: a worker may have opened the next round meanwhile */
    due = job_running(j) && !j->finishing && j->sm != NULL &&
          (round_complete_locked(j) || now_mono() >= j->deadline_mono);
    pthread_mutex_unlock(&j->mu);
    if (due) {
        (void)close_round(j, now_wall(), by_deadline, &err);
    }
    pthread_mutex_unlock(&j->sm_mu);
}

void agg_mgr_tick(agg_mgr *m)
{
    agg_job **snap = NULL;
    size_t n;

    pthread_rwlock_rdlock(&m->lock);
    n = m->njobs;
    if (n > 0) {
        snap = malloc(n * sizeof *snap);
        if (snap != NULL) {
            memcpy(snap, m->jobs, n * sizeof *snap);
        }
    }
    pthread_rwlock_unlock(&m->lock);
    for (size_t i = 0; snap != NULL && i < n; i++) {
        tick_job(snap[i]);
    }
    free(snap);
}

/* ------------------------------------------------------------ loading and replay */

struct replay {
    agg_job *j;
    int finish_pending;
};

static int replay_event(void *ctx, const struct agg_event *ev, struct fs_err *err)
{
    struct replay *rp = ctx;
    agg_job *j = rp->j;
    json_t *body = NULL;
    int rc = 0;

    j->next_seq = ev->seq + 1;
    if (j->sm == NULL) {
        return fs_err_set(err, FS_ESTATE, "event %llu after the job ended",
                          (unsigned long long)ev->seq);
    }
    if (strcmp(ev->kind, "adv") == 0 || strcmp(ev->kind, "shares") == 0 ||
        strcmp(ev->kind, "reveals") == 0 || strcmp(ev->kind, "begin") == 0) {
        json_error_t je;
        body = json_loadb(ev->body, ev->len, JSON_REJECT_DUPLICATES, &je);
        if (body == NULL) {
            return fs_err_set(err, FS_EFORMAT, "event %llu: bad JSON", (unsigned long long)ev->seq);
        }
    }
    if (strcmp(ev->kind, "adv") == 0) {
        struct fs_secagg_adv a;
        int has = 0;
        int e = 0;
        rc = fs_wire_adv_decode(body, &a, &has, &e, err);
        if (rc == 0) {
            rc = apply_adv(j, &a, has, e, ev->at, err);
        }
        fs_secagg_adv_clear(&a);
    } else if (strcmp(ev->kind, "shares") == 0) {
        struct fs_secagg_share_ct *cts = NULL;
        size_t k = 0;
        rc = fs_wire_shares_decode(body, 0, ev->party, fs_secagg_share_ct_len(&j->cfg), j->n, &cts,
                                   &k, err);
        if (rc == 0) {
            rc = apply_shares(j, ev->party, cts, k, body, ev->at, err);
        }
        fs_secagg_share_cts_free(cts, k);
    } else if (strcmp(ev->kind, "masked") == 0) {
        uint64_t cw = j->chunk_words;
        uint64_t left = ev->idx < j->nchunks ? j->len - ev->idx * cw : 0;
        size_t m = (size_t)(left < cw ? left : cw);
        uint64_t *y = malloc((m == 0 ? 1 : m) * sizeof *y);
        char path[4600];
        uint8_t h[32];
        if (y == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        rc = m == 0 || words_path(j, ev->party, path, sizeof path) != 0
                 ? fs_err_set(err, FS_EFORMAT, "event %llu: bad chunk", (unsigned long long)ev->seq)
                 : read_words(path, ev->idx * cw, y, m, err);
        if (rc == 0 && ev->len == 32) { /* a log from before uploads went unhashed */
            rc = fs_sha256(h, y, m * sizeof *y, err);
            if (rc == 0 && !fs_ct_eq(h, ev->body, 32)) {
                rc = fs_err_set(err, FS_EIO, "chunk %llu of party %u changed on disk",
                                (unsigned long long)ev->idx, ev->party);
            }
        }
        if (rc == 0) {
            rc = apply_masked(j, ev->party, ev->idx, y, m, ev->at, err);
        }
        free(y);
    } else if (strcmp(ev->kind, "sig") == 0) {
        if (ev->len != FS_SECAGG_SIG_LEN) {
            return fs_err_set(err, FS_EFORMAT, "event %llu: bad signature",
                              (unsigned long long)ev->seq);
        }
        rc = apply_sig(j, ev->party, ev->body, ev->at, err);
    } else if (strcmp(ev->kind, "reveals") == 0) {
        struct fs_secagg_reveal *rv = NULL;
        size_t k = 0;
        rc = fs_wire_reveals_decode(body, j->n, &rv, &k, err);
        if (rc == 0) {
            rc = apply_reveals(j, ev->party, rv, k, body, ev->at, err);
        }
        if (rv != NULL) {
            fs_wipe(rv, k * sizeof *rv);
        }
        free(rv);
    } else if (strncmp(ev->kind, "close_", 6) == 0) {
        rc = close_round(j, ev->at, 0, err);
        if (rc == 0 && strcmp(ev->kind, "close_unmask") == 0) {
            rp->finish_pending = 1;
        }
    } else if (strcmp(ev->kind, "begin") == 0 && j->fed) {
        json_t *rv = json_object_get(body, "r");
        json_int_t r = json_is_integer(rv) ? json_integer_value(rv) : -1;
        if (r < 0 || r >= (json_int_t)j->naggs || (r > 0 && (json_int_t)j->r != r - 1)) {
            rc = fs_err_set(err, FS_EFORMAT, "event %llu: bad begin", (unsigned long long)ev->seq);
        } else if (r > 0) {
            /* the previous (statistics) aggregation was unmasked before this */
            rc = rp->finish_pending ? finish_stats(j, ev->at, err)
                                    : fs_err_set(err, FS_EFORMAT, "event %llu: begin before unmask",
                                                 (unsigned long long)ev->seq);
            rp->finish_pending = 0;
        }
        if (rc == 0) {
            rc = do_begin_fed(j, (uint32_t)r, ev->at, err);
        }
    } else if (strcmp(ev->kind, "exp") == 0) {
        rc = ev->len != FS_FEDSVD_SEALED_EXP_LEN || ev->party < 1 || ev->party > j->n
                 ? fs_err_set(err, FS_EFORMAT, "event %llu: bad exponent",
                              (unsigned long long)ev->seq)
                 : apply_sealed(j, ev->party, ev->body, ev->at, err);
    } else if (strcmp(ev->kind, "pubexp") == 0) {
        char txt[16];
        char *end = NULL;
        long e = 0;
        if (ev->len == 0 || ev->len >= sizeof txt || ev->party < 1 || ev->party > j->n) {
            rc = fs_err_set(err, FS_EFORMAT, "event %llu: bad public exponent",
                            (unsigned long long)ev->seq);
        } else {
            memcpy(txt, ev->body, ev->len);
            txt[ev->len] = '\0';
            e = strtol(txt, &end, 10);
            rc = end == txt || *end != '\0' || e < FS_FEDSVD_EXP_MIN || e > FS_FEDSVD_EXP_MAX
                     ? fs_err_set(err, FS_EFORMAT, "event %llu: bad public exponent",
                                  (unsigned long long)ev->seq)
                     : apply_pubexp(j, ev->party, (int)e, ev->at, err);
        }
    } else if (strcmp(ev->kind, "begin") == 0) {
        struct fs_fixedpt fp;
        json_t *b = json_object_get(body, "bound");
        json_t *f = json_object_get(body, "frac_bits");
        json_t *s = json_object_get(body, "summands");
        if (!json_is_number(b) || !json_is_integer(f) || !json_is_integer(s)) {
            rc = fs_err_set(err, FS_EFORMAT, "event %llu: bad begin", (unsigned long long)ev->seq);
        } else {
            fp.bound = json_number_value(b);
            fp.frac_bits = (int)json_integer_value(f);
            fp.summands = (unsigned)json_integer_value(s);
            rc = do_begin(j, &fp, ev->at, err);
        }
    } else if (strcmp(ev->kind, "done") == 0) {
        rc = fs_err_set(err, FS_ESTATE, "job finished but is marked running");
    } else {
        rc = fs_err_set(err, FS_EFORMAT, "unknown event kind \"%.32s\"", ev->kind);
    }
    json_decref(body);
    if (rc != 0) {
        fs_err_prefix(err, "event %llu (%s): ", (unsigned long long)ev->seq, ev->kind);
    }
    return rc;
}

/* The bytes by phase of a persisted Job document. */
static void restore_phase_bytes(agg_job *j, const json_t *job)
{
    const json_t *by = json_object_get(job, "bytes_by_phase");

    for (int t = 0; t < NTIMINGS; t++) {
        const json_t *x = json_object_get(by, TIMING_NAME[t]);
        j->phase_in[t] = (uint64_t)json_integer_value(json_object_get(x, "in"));
        j->phase_out[t] = (uint64_t)json_integer_value(json_object_get(x, "out"));
    }
}

/* A finished job: status from its snapshot. */
static void apply_snapshot(agg_job *j, const char *snap, const char *result)
{
    json_error_t je;
    json_t *o = snap != NULL ? json_loads(snap, 0, &je) : NULL;
    json_t *job = json_object_get(o, "job");
    json_t *a;
    size_t i;
    json_t *v;

    if (job != NULL) {
        json_array_foreach(json_object_get(job, "present"), i, v)
        {
            json_int_t p = json_integer_value(v);
            if (p >= 1 && p <= (json_int_t)j->n) {
                j->joined[p] = 1;
            }
        }
        json_array_foreach(json_object_get(job, "dropped"), i, v)
        {
            json_int_t p = json_integer_value(v);
            if (p >= 1 && p <= (json_int_t)j->n) {
                j->dropped[p] = 1;
            }
        }
        for (int t = 0; t < NTIMINGS; t++) {
            json_t *x = json_object_get(json_object_get(job, "timings"), TIMING_NAME[t]);
            if (json_is_number(x)) {
                j->timings[t] = json_number_value(x);
                j->has_timing[t] = 1;
            }
        }
        j->bytes_in = (uint64_t)json_integer_value(json_object_get(job, "bytes_in"));
        j->bytes_out = (uint64_t)json_integer_value(json_object_get(job, "bytes_out"));
        restore_phase_bytes(j, job);
        if (json_integer_value(json_object_get(job, "aggregation")) >= 0 &&
            json_integer_value(json_object_get(job, "aggregation")) < (json_int_t)j->naggs) {
            j->r = (uint32_t)json_integer_value(json_object_get(job, "aggregation"));
        }
    }
    a = json_object_get(o, "aggregation_docs");
    if (json_is_array(a) && json_array_size(a) == j->naggs) {
        json_decref(j->aggs);
        j->aggs = json_deep_copy(a);
    } else if (json_is_object(json_object_get(o, "aggregation"))) {
        json_array_set(j->aggs, 0, json_object_get(o, "aggregation")); /* older snapshots */
    }
    if (result != NULL) {
        j->result = json_loads(result, 0, &je);
    }
    json_decref(o);
}

/* A job stored by an earlier version was accepted under the rules of its
 * day: one without pins ran trusting the keys the server relays, one with a
 * threshold below a majority was allowed then. Keep loading it (with a
 * warning) rather than dropping a running job on an upgrade. */
static void grandfather_spec(json_t *sj, const char *id)
{
    json_int_t n = json_integer_value(json_object_get(sj, "parties"));
    json_t *t = json_object_get(sj, "threshold");

    if (json_object_get(sj, "party_keys") == NULL &&
        json_object_get(sj, "allow_unpinned") == NULL) {
        json_object_set_new(sj, "allow_unpinned", json_true());
        fs_log_pack(FS_LOG_WARN, "job stored without pinned identities: loaded as unpinned",
                    "{s:s}", "job", id);
    }
    if (json_is_integer(t) && json_integer_value(t) < n / 2 + 1 &&
        json_object_get(sj, "allow_low_threshold") == NULL) {
        json_object_set_new(sj, "allow_low_threshold", json_true());
        fs_log_pack(FS_LOG_WARN, "job stored with a threshold below a majority: loaded as allowed",
                    "{s:s}", "job", id);
    }
}

static int load_job(void *ctx, const struct agg_job_row *row, struct fs_err *err)
{
    agg_mgr *m = ctx;
    struct fs_job_spec spec;
    struct fs_err jerr = {0};
    uint8_t(*digests)[32] = NULL;
    json_error_t je;
    json_t *sj = json_loads(row->spec, 0, &je);
    agg_job *j = NULL;
    int rc;

    if (!fs_job_id_valid(row->id)) {
        json_decref(sj);
        fs_log(FS_LOG_ERROR, "skipping a job row with a bad id", NULL);
        return 0;
    }
    if (json_is_object(sj)) {
        grandfather_spec(sj, row->id);
    }
    rc = sj == NULL ? fs_err_set(&jerr, FS_EFORMAT, "bad spec JSON")
                    : fs_job_spec_decode(sj, UINT64_MAX / 4, &spec, &jerr);
    json_decref(sj);
    if (rc == 0 && (row->chunk_words < 1 || row->chunk_words > (1u << 22))) {
        rc = fs_err_set(&jerr, FS_EFORMAT, "bad chunk_words");
    }
    if (rc != 0) {
        fs_log_pack(FS_LOG_ERROR, "skipping a job that does not load", "{s:s, s:s}", "job", row->id,
                    "error", jerr.msg);
        return 0;
    }
    rc = job_alloc(m, row->id, &spec, row->chunk_words, &j, err);
    if (rc != 0) {
        return rc;
    }
    snprintf(j->created_at, sizeof j->created_at, "%s", row->created_at);
    j->created_unix = row->created_unix;
    digests = calloc(j->n, sizeof *digests);
    if (digests == NULL) {
        job_free(j);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = agg_store_tokens_load(m->st, j->id, j->n, digests, &jerr);
    if (rc == 0) {
        rc = add_digests(j, (const uint8_t(*)[32])digests, &jerr);
    }
    free(digests);
    if (rc != 0) {
        fs_log_pack(FS_LOG_ERROR, "skipping a job without tokens", "{s:s, s:s}", "job", j->id,
                    "error", jerr.msg);
        job_free(j);
        return 0;
    }
    if (strcmp(row->state, "running") != 0) {
        j->phase = strcmp(row->state, "done") == 0 ? JP_DONE : JP_FAILED;
        snprintf(j->error, sizeof j->error, "%s", row->error != NULL ? row->error : "");
        apply_snapshot(j, row->status, row->result);
        if (j->phase == JP_DONE && j->result == NULL) {
            j->phase = JP_FAILED;
            snprintf(j->error, sizeof j->error, "result manifest lost");
        }
        if (j->power) {
            pj_load(j, 0);
        }
        return mgr_register(m, j, err) == 0 ? 0 : (job_free(j), FS_ENOMEM);
    }
    if (j->power) {
        /* not resumable (docs/wire-fedpower.md): failed with a clear reason */
        apply_snapshot(j, row->status, NULL);
        j->phase = JP_R0;
        pj_load(j, 1);
        return mgr_register(m, j, err) == 0 ? 0 : (job_free(j), FS_ENOMEM);
    }
    /* running: rebuild by replay */
    {
        struct replay rp = {j, 0};
        json_t *snapj = row->status != NULL ? json_loads(row->status, 0, &je) : NULL;
        json_t *jj = json_object_get(snapj, "job");
        j->bytes_in = (uint64_t)json_integer_value(json_object_get(jj, "bytes_in"));
        j->bytes_out = (uint64_t)json_integer_value(json_object_get(jj, "bytes_out"));
        restore_phase_bytes(j, jj);
        json_decref(snapj);
        j->phase = JP_R0;
        j->phase_opened = j->created_unix;
        memset(j->in_round + 1, 1, j->n);
        j->next_seq = 1;
        rc = job_new_sm(j, &jerr);
        if (rc == 0) {
            j->replaying = 1;
            pthread_mutex_lock(&j->sm_mu);
            rc = agg_store_events_load(m->st, j->id, replay_event, &rp, &jerr);
            pthread_mutex_unlock(&j->sm_mu);
            j->replaying = 0;
        }
        rm_tree(j->tmp_dir);
        if (rc != 0 || j->phase == JP_FAILED) {
            char reason[700];
            snprintf(reason, sizeof reason, "cannot resume after restart: %s",
                     rc != 0 ? jerr.msg : j->error);
            pthread_mutex_lock(&j->sm_mu);
            pthread_mutex_lock(&j->mu);
            if (j->phase == JP_FAILED) {
                j->phase = JP_R0; /* let fail_job record it */
            }
            pthread_mutex_unlock(&j->mu);
            fail_job(j, reason);
            pthread_mutex_unlock(&j->sm_mu);
        } else {
            double timeout = j->phase == JP_R0 ? (double)j->spec.join_timeout_s
                                               : (double)j->spec.round_timeout_s;
            j->deadline_mono = now_mono() + timeout;
            fs_log_pack(FS_LOG_INFO, "job resumed", "{s:s, s:s, s:I}", "job", j->id, "phase",
                        PHASE_NAME[j->phase], "events", (json_int_t)(j->next_seq - 1));
        }
        rc = mgr_register(m, j, err);
        if (rc != 0) {
            job_free(j);
            return rc;
        }
        if (rp.finish_pending && j->phase == JP_R4 && j->sm != NULL) {
            if (start_worker(j) != 0) {
                pthread_mutex_lock(&j->sm_mu);
                fail_job(j, "cannot start the unmasking worker");
                pthread_mutex_unlock(&j->sm_mu);
            }
        }
    }
    return 0;
}

int agg_mgr_load(agg_mgr *m, struct fs_err *err)
{
    return agg_store_jobs_load(m->st, load_job, m, err);
}
