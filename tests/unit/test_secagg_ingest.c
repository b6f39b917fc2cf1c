/* Streamed masked-input uploads (fs_secagg_server_upload_*): chunks of
 * every party fold into the server's sum from several threads at once, in a
 * random order and in pieces of random sizes, and the unmasked sum is still
 * exactly the sum of the inputs, as with one chunk at a time. Also: an
 * upload that breaks off leaves nothing in the sum, a pending chunk is
 * taken back when the round closes under it, a repeat is not streamed. */
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "proto/secagg.h"
#include "test.h"
#include "test_secagg_util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NP 6

struct store {
    uint64_t len;
    uint64_t cw;
    uint64_t *buf[NP + 1]; /* per party: what was persisted */
};

static int st_put(void *ctx, uint32_t party, uint64_t idx, const uint64_t *y, size_t m,
                  struct fs_err *err)
{
    struct store *s = ctx;
    (void)err;
    memcpy(s->buf[party] + idx * s->cw, y, m * sizeof *y);
    return 0;
}

static int st_get(void *ctx, uint32_t party, uint64_t idx, uint64_t *y, size_t m,
                  struct fs_err *err)
{
    struct store *s = ctx;
    (void)err;
    memcpy(y, s->buf[party] + idx * s->cw, m * sizeof *y);
    return 0;
}

static void st_drop(void *ctx, uint32_t party)
{
    (void)ctx;
    (void)party;
}

struct job {
    struct fs_secagg_config cfg;
    fs_secagg_server *s;
    fs_secagg_client *c[NP + 1];
    struct store st;
    uint64_t len;
    uint64_t nchunks;
    uint64_t *x[NP + 1];
    uint64_t *y[NP + 1]; /* masked, little-endian words (checked below) */
    pthread_mutex_t mu;  /* "the caller's lock" */
    /* the work list: (party, chunk), shuffled, taken in order by the threads */
    uint32_t *wp;
    uint64_t *wi;
    size_t nwork;
    size_t next;
    uint64_t rng;
    int bad;
};

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void job_init(struct job *j, uint64_t len, uint32_t cw)
{
    struct fs_err err = {0};
    struct fs_secagg_chunk_store st = {&j->st, st_put, st_get, st_drop};

    memset(j, 0, sizeof *j);
    pthread_mutex_init(&j->mu, NULL);
    j->cfg.n = NP;
    j->cfg.t = NP - 2;
    j->cfg.aggregations = 1;
    j->cfg.chunk_words = cw;
    CHECK_OK(fs_rand_bytes(j->cfg.job_id, 32, &err), &err);
    CHECK_OK(fs_rand_bytes(&j->rng, sizeof j->rng, &err), &err);
    j->rng |= 1;
    j->len = len;
    j->nchunks = (len + cw - 1) / cw;
    j->st.len = len;
    j->st.cw = cw;
    CHECK_OK(fs_secagg_server_new(&j->cfg, &st, &j->s, &err), &err);
    for (uint32_t i = 1; i <= NP; i++) {
        uint8_t sk[32], pk[32];
        struct fs_secagg_adv a;
        CHECK_OK(fs_ed25519_keygen(sk, pk, &err), &err);
        CHECK_OK(fs_secagg_client_new(&j->cfg, i, sk, &j->c[i], &err), &err);
        CHECK_OK(fs_secagg_client_advertise(j->c[i], &a, &err), &err);
        CHECK_OK(fs_secagg_server_add_adv(j->s, &a, &err), &err);
        j->st.buf[i] = calloc(len, sizeof(uint64_t));
        j->x[i] = malloc(len * sizeof(uint64_t));
        j->y[i] = malloc(len * sizeof(uint64_t));
    }
    CHECK_OK(sa_share_all(j->s, j->c, NP, &err), &err);
}

static void job_free(struct job *j)
{
    fs_secagg_server_free(j->s);
    for (uint32_t i = 1; i <= NP; i++) {
        fs_secagg_client_free(j->c[i]);
        free(j->st.buf[i]);
        free(j->x[i]);
        free(j->y[i]);
    }
    free(j->wp);
    free(j->wi);
    pthread_mutex_destroy(&j->mu);
}

/* Begin aggregation 0: every party's input and masked vector. */
static void job_mask(struct job *j)
{
    struct fs_err err = {0};
    const uint32_t *set;
    size_t na = 0;

    CHECK_OK(fs_secagg_server_begin(j->s, 0, j->len, &err), &err);
    set = fs_secagg_server_set(j->s, 0, &na);
    for (uint32_t i = 1; i <= NP; i++) {
        for (uint64_t w = 0; w < j->len; w++) {
            j->x[i][w] = xorshift(&j->rng);
        }
        CHECK_OK(fs_secagg_client_begin(j->c[i], 0, j->len, set, na, &err), &err);
        CHECK_OK(fs_secagg_client_mask(j->c[i], 0, j->x[i], j->y[i], (size_t)j->len, &err), &err);
    }
}

static size_t chunk_len(const struct job *j, uint64_t idx)
{
    uint64_t left = j->len - idx * j->cfg.chunk_words;
    return (size_t)(left < j->cfg.chunk_words ? left : j->cfg.chunk_words);
}

/* As the aggregation server does: persist, then fold, in pieces of random
 * sizes (1 to 3000 words); stop after `upto` words (an upload that breaks
 * off). Returns the words folded, or -1. */
static long stream_chunk(struct job *j, uint32_t i, uint64_t idx, size_t upto, uint64_t *rng,
                         struct fs_secagg_upload *up)
{
    struct fs_err err = {0};
    uint64_t off = idx * j->cfg.chunk_words;
    size_t m = chunk_len(j, idx);
    size_t done = 0;
    int stream = 0;
    int rc;

    pthread_mutex_lock(&j->mu);
    rc = fs_secagg_server_upload_begin(j->s, i, idx, m, up, &stream, &err);
    pthread_mutex_unlock(&j->mu);
    if (rc != 0 || !stream) {
        return -1;
    }
    while (done < m && done < upto) {
        size_t n = (size_t)(xorshift(rng) % 3000) + 1;
        if (n > m - done) {
            n = m - done;
        }
        if (n > upto - done) {
            n = upto - done;
        }
        memcpy(j->st.buf[i] + off + done, j->y[i] + off + done, n * sizeof(uint64_t));
        if (fs_secagg_server_upload_fold(up, (const uint8_t *)(j->y[i] + off + done), n, &err) !=
            0) {
            return -1;
        }
        done += n;
    }
    return (long)done;
}

static void *worker(void *arg)
{
    struct job *j = arg;
    struct fs_err err = {0};
    uint64_t rng;

    pthread_mutex_lock(&j->mu);
    rng = xorshift(&j->rng) | 1;
    pthread_mutex_unlock(&j->mu);
    for (;;) {
        struct fs_secagg_upload up;
        size_t w;
        long done;
        int rc;
        pthread_mutex_lock(&j->mu);
        w = j->next++;
        pthread_mutex_unlock(&j->mu);
        if (w >= j->nwork) {
            break;
        }
        done = stream_chunk(j, j->wp[w], j->wi[w], SIZE_MAX, &rng, &up);
        pthread_mutex_lock(&j->mu);
        rc = done >= 0 ? fs_secagg_server_upload_commit(&up, &err) : -1;
        pthread_mutex_unlock(&j->mu);
        fs_secagg_server_upload_release(&up);
        if (rc != 0) {
            pthread_mutex_lock(&j->mu);
            j->bad++;
            pthread_mutex_unlock(&j->mu);
        }
    }
    return NULL;
}

/* Every (party, chunk) of the parties in `who`, on `threads` threads:
 * shuffled, or (lockstep) chunk by chunk, every party's same chunk side by
 * side, so that the threads fold into the same words at the same time. */
static void upload_order(struct job *j, const int *who, unsigned threads, int lockstep)
{
    pthread_t th[8];

    free(j->wp);
    free(j->wi);
    j->wp = malloc(NP * j->nchunks * sizeof *j->wp);
    j->wi = malloc(NP * j->nchunks * sizeof *j->wi);
    j->nwork = 0;
    j->next = 0;
    for (uint64_t idx = 0; idx < j->nchunks; idx++) {
        for (uint32_t i = 1; i <= NP; i++) {
            if (who[i]) {
                j->wp[j->nwork] = i;
                j->wi[j->nwork++] = idx;
            }
        }
    }
    for (size_t a = j->nwork; !lockstep && a > 1; a--) {
        size_t b = (size_t)(xorshift(&j->rng) % a);
        uint32_t tp = j->wp[a - 1];
        uint64_t ti = j->wi[a - 1];
        j->wp[a - 1] = j->wp[b];
        j->wi[a - 1] = j->wi[b];
        j->wp[b] = tp;
        j->wi[b] = ti;
    }
    for (unsigned t = 0; t < threads; t++) {
        CHECK(pthread_create(&th[t], NULL, worker, j) == 0);
    }
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
    }
    CHECK_MSG(j->bad == 0, "%d uploads failed", j->bad);
}

static void upload_all(struct job *j, const int *who, unsigned threads)
{
    upload_order(j, who, threads, 0);
}

/* Close R2 and unmask; the sum must be the exact sum of x over `who`. */
static void finish_check(struct job *j, const int *who)
{
    struct fs_err err = {0};
    const uint32_t *set;
    const uint64_t *sum = NULL;
    size_t n3 = 0, n4 = 0;
    uint64_t *want = calloc(j->len, sizeof *want);
    int expect_u3 = 0;

    CHECK_OK(fs_secagg_server_close_masked(j->s, &err), &err);
    set = fs_secagg_server_set(j->s, 3, &n3);
    for (uint32_t i = 1; i <= NP; i++) {
        expect_u3 += who[i];
        for (uint64_t w = 0; who[i] && w < j->len; w++) {
            want[w] += j->x[i][w];
        }
    }
    CHECK(n3 == (size_t)expect_u3);
    for (size_t q = 0; q < n3; q++) {
        uint8_t sig[64];
        CHECK_OK(fs_secagg_client_consistency(j->c[set[q]], set, n3, sig, &err), &err);
        CHECK_OK(fs_secagg_server_add_consistency(j->s, set[q], sig, &err), &err);
    }
    CHECK_OK(fs_secagg_server_close_consistency(j->s, &err), &err);
    set = fs_secagg_server_set(j->s, 4, &n4);
    for (size_t q = 0; q < n4; q++) {
        struct fs_secagg_reveal *rv = NULL;
        size_t nrv = 0;
        CHECK_OK(fs_secagg_client_unmask(j->c[set[q]], set, fs_secagg_server_sigs(j->s), n4, &rv,
                                         &nrv, &err),
                 &err);
        CHECK_OK(fs_secagg_server_add_reveals(j->s, set[q], rv, nrv, &err), &err);
        free(rv);
    }
    CHECK_OK(fs_secagg_server_finish(j->s, &sum, &err), &err);
    CHECK(sum != NULL && memcmp(sum, want, j->len * sizeof *sum) == 0);
    free(want);
}

static int little_endian(void)
{
    uint64_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* 6 parties x 23 chunks (the last one short), 4 threads, random order and
 * pieces, a few times over: exact. */
static void test_concurrent_fold_exact(void)
{
    int all[NP + 1] = {0, 1, 1, 1, 1, 1, 1};

    if (!little_endian()) {
        return;
    }
    for (int rep = 0; rep < 3; rep++) {
        struct job j;
        job_init(&j, 90001, 4096);
        job_mask(&j);
        upload_all(&j, all, 4);
        finish_check(&j, all);
        job_free(&j);
    }
}

/* Lockstep: 6 parties' chunk k on 6 threads at once, 20 chunks of 64 Ki
 * words, so unlocked read-modify-writes of the same words would collide
 * (without the range locks this loses updates within a few runs). */
static void test_concurrent_fold_lockstep(void)
{
    int all[NP + 1] = {0, 1, 1, 1, 1, 1, 1};
    struct job j;

    if (!little_endian()) {
        return;
    }
    job_init(&j, 20 * 65536, 65536);
    job_mask(&j);
    upload_order(&j, all, 6, 1);
    finish_check(&j, all);
    job_free(&j);
}

/* A streamed upload that breaks off (cancel) leaves nothing in the sum;
 * the chunk can then be sent again. A chunk pending in one upload is
 * FS_EUNAVAILABLE to another; a repeat of an accepted chunk is not
 * streamed (add_masked_ex compares it). */
static void test_cancel_and_repeat(void)
{
    int all[NP + 1] = {0, 1, 1, 1, 1, 1, 1};
    struct fs_err err = {0};
    struct fs_secagg_upload up;
    struct fs_secagg_upload up2;
    struct job j;
    uint64_t rng = 88172645463325252ull;
    int stream = -1;

    if (!little_endian()) {
        return;
    }
    job_init(&j, 20000, 4096);
    job_mask(&j);
    CHECK(stream_chunk(&j, 2, 1, 1500, &rng, &up) == 1500);
    CHECK(fs_secagg_server_upload_begin(j.s, 2, 1, chunk_len(&j, 1), &up2, &stream, &err) ==
          FS_EUNAVAILABLE);
    CHECK(fs_secagg_server_upload_commit(&up, &err) == FS_EINVAL); /* incomplete */
    CHECK_OK(fs_secagg_server_upload_cancel(&up, &err), &err);
    fs_secagg_server_upload_release(&up);
    upload_all(&j, all, 2);
    CHECK_OK(fs_secagg_server_upload_begin(j.s, 3, 0, chunk_len(&j, 0), &up2, &stream, &err), &err);
    CHECK(stream == 0);
    finish_check(&j, all);
    job_free(&j);
}

/* The round closes while party 5 has a chunk pending (and others done):
 * party 5 drops, its folded words leave the sum, its upload's later fold and
 * commit fail and change nothing. */
static void test_close_under_pending(void)
{
    int four[NP + 1] = {0, 1, 1, 1, 1, 0, 0};
    struct fs_err err = {0};
    struct fs_secagg_upload up;
    struct job j;
    uint64_t rng = 2463534242ull;

    if (!little_endian()) {
        return;
    }
    job_init(&j, 30000, 4096);
    job_mask(&j);
    upload_all(&j, four, 2);
    /* party 5: two whole chunks, then half of a third */
    for (uint64_t idx = 0; idx < 2; idx++) {
        struct fs_secagg_upload u;
        CHECK(stream_chunk(&j, 5, idx, SIZE_MAX, &rng, &u) == (long)chunk_len(&j, idx));
        CHECK_OK(fs_secagg_server_upload_commit(&u, &err), &err);
        fs_secagg_server_upload_release(&u);
    }
    CHECK(stream_chunk(&j, 5, 2, 2000, &rng, &up) == 2000);
    finish_check(&j, four);
    CHECK(fs_secagg_server_upload_fold(&up, (const uint8_t *)j.y[5], 1, &err) == FS_ECONFLICT);
    CHECK(fs_secagg_server_upload_commit(&up, &err) == FS_ECONFLICT);
    CHECK_OK(fs_secagg_server_upload_cancel(&up, &err), &err);
    /* the server goes away before the upload's release: its memory waits for it */
    fs_secagg_server_free(j.s);
    j.s = NULL;
    fs_secagg_server_upload_release(&up);
    job_free(&j);
}

int main(void)
{
    RUN(test_concurrent_fold_exact);
    RUN(test_concurrent_fold_lockstep);
    RUN(test_cancel_and_repeat);
    RUN(test_close_under_pending);
    return TEST_END("test_secagg_ingest");
}
