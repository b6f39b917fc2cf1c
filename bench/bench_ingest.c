/* The aggregation server's ingest: K parties' masked vectors of L words
 * folded into one sum, in GB/s (10^9 bytes of uploads per second), beside a
 * plain in-memory sum of the same words measured in the same run:
 *   plain, 1 thread       sum[i] += y[i], block by block of the sum (256
 *                         KiB, every party into one cached block)
 *   plain, T threads      the same, each thread its own range of the sum
 *                         (this machine's memory bandwidth for the job)
 *   one lock, T threads   fs_secagg_server_add_masked_ex, whole chunks, under
 *                         one job-wide lock (the server before streamed
 *                         uploads: every chunk queued on that lock)
 *   streamed, T threads   fs_secagg_server_upload_begin / fold / commit,
 *                         (party, chunk) in a random order, 256 KiB pieces
 *                         (the HTTP server's pieces), no job lock while folding
 * T = the online CPUs. Every party's words are its own buffer in memory
 * (K x L words in all); the chunk store is in memory and does
 * nothing, so the figures are the fold alone (the service also writes each
 * piece to its upload file first: bench/bench_fedsvd_services.sh measures
 * the whole). Median of 5 rounds each. Usage: bench_ingest [K [L [chunk
 * [plain]]]] (default 10 x 10^7 words, the 10 x 10 000 x 1000 FedSVD job,
 * chunks of 2^20 words); "plain": only the two plain sums, one line
 * "plain_gbs 1 X T Y" (for bench_fedsvd_services.sh). Asserts nothing.
 */
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "proto/secagg.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS      5
#define PIECE_WORDS 32768

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const struct fs_err *err)
{
    fprintf(stderr, "bench_ingest: %s failed%s%s\n", what, err != NULL ? ": " : "",
            err != NULL ? err->msg : "");
    exit(1);
}

static int st_put(void *ctx, uint32_t party, uint64_t idx, const uint64_t *y, size_t m,
                  struct fs_err *err)
{
    (void)ctx, (void)party, (void)idx, (void)y, (void)m, (void)err;
    return 0;
}

static int st_get(void *ctx, uint32_t party, uint64_t idx, uint64_t *y, size_t m,
                  struct fs_err *err)
{
    (void)ctx, (void)party, (void)idx, (void)err;
    memset(y, 0, m * sizeof *y);
    return 0;
}

struct bench {
    uint32_t k;
    uint64_t len;
    uint32_t cw;
    uint64_t nchunks;
    unsigned threads;
    uint64_t **ys; /* each party's words */
    uint64_t *sum; /* the plain sums' target */
    fs_secagg_server *s;
    fs_secagg_client **c;
    pthread_mutex_t mu;
    uint32_t *order; /* work items: party * nchunks + chunk, shuffled */
    size_t next;
    int streamed;
    unsigned tid_next;
};

/* R0 and R1 with real clients, so that the server reaches masked input. */
static void setup_server(struct bench *b)
{
    struct fs_err err = {0};
    struct fs_secagg_config cfg;
    struct fs_secagg_chunk_store st = {NULL, st_put, st_get, NULL};
    const struct fs_secagg_adv *roster;
    size_t nr = 0;

    memset(&cfg, 0, sizeof cfg);
    cfg.n = b->k;
    cfg.t = b->k / 2 + 1;
    cfg.aggregations = ROUNDS * 2;
    cfg.chunk_words = b->cw;
    if (fs_rand_bytes(cfg.job_id, 32, &err) != 0 || fs_secagg_server_new(&cfg, &st, &b->s, &err)) {
        die("server", &err);
    }
    b->c = calloc(b->k + 1, sizeof *b->c);
    for (uint32_t i = 1; i <= b->k; i++) {
        uint8_t sk[32], pk[32];
        struct fs_secagg_adv a;
        if (fs_ed25519_keygen(sk, pk, &err) != 0 ||
            fs_secagg_client_new(&cfg, i, sk, &b->c[i], &err) != 0 ||
            fs_secagg_client_advertise(b->c[i], &a, &err) != 0 ||
            fs_secagg_server_add_adv(b->s, &a, &err) != 0) {
            die("advertise", &err);
        }
    }
    if (fs_secagg_server_close_adv(b->s, &err) != 0) {
        die("close_adv", &err);
    }
    roster = fs_secagg_server_roster(b->s, &nr);
    for (uint32_t i = 1; i <= b->k; i++) {
        struct fs_secagg_share_ct *cts = NULL;
        size_t nct = 0;
        if (fs_secagg_client_share_keys(b->c[i], roster, nr, &cts, &nct, &err) != 0 ||
            fs_secagg_server_add_shares(b->s, i, cts, nct, &err) != 0) {
            die("shares", &err);
        }
        fs_secagg_share_cts_free(cts, nct);
    }
    if (fs_secagg_server_close_shares(b->s, &err) != 0) {
        die("close_shares", &err);
    }
}

struct range {
    struct bench *b;
    uint64_t lo, hi;
};

static void *plain_range(void *arg)
{
    const struct range *r = arg;
    uint64_t *restrict sum = r->b->sum;

    /* block by block, every party into one cached block of the sum: the
     * fastest order a plain sum of these words can take */
    for (uint64_t b0 = r->lo; b0 < r->hi; b0 += 32768) {
        uint64_t b1 = r->hi - b0 < 32768 ? r->hi : b0 + 32768;
        for (uint32_t p = 0; p < r->b->k; p++) {
            const uint64_t *restrict y = r->b->ys[p];
            for (uint64_t i = b0; i < b1; i++) {
                sum[i] += y[i];
            }
        }
    }
    return NULL;
}

static double plain(struct bench *b, unsigned threads)
{
    pthread_t th[64];
    struct range rg[64];
    double t0;

    memset(b->sum, 0, b->len * sizeof *b->sum);
    t0 = now();
    for (unsigned t = 0; t < threads; t++) {
        rg[t].b = b;
        rg[t].lo = b->len * t / threads;
        rg[t].hi = b->len * (t + 1) / threads;
        if (pthread_create(&th[t], NULL, plain_range, &rg[t]) != 0) {
            die("pthread_create", NULL);
        }
    }
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
    }
    return now() - t0;
}

static size_t chunk_m(const struct bench *b, uint64_t idx)
{
    uint64_t left = b->len - idx * b->cw;
    return (size_t)(left < b->cw ? left : b->cw);
}

static void *server_worker(void *arg)
{
    struct bench *b = arg;
    struct fs_err err = {0};

    for (;;) {
        size_t w;
        uint32_t party;
        uint64_t idx;
        size_t m;
        pthread_mutex_lock(&b->mu);
        w = b->next++;
        pthread_mutex_unlock(&b->mu);
        if (w >= b->k * b->nchunks) {
            return NULL;
        }
        party = (uint32_t)(b->order[w] / b->nchunks) + 1;
        idx = b->order[w] % b->nchunks;
        m = chunk_m(b, idx);
        if (!b->streamed) {
            int is_new = 0;
            pthread_mutex_lock(&b->mu);
            if (fs_secagg_server_add_masked_ex(b->s, party, idx, b->ys[party - 1] + idx * b->cw, m,
                                               &is_new, &err) != 0) {
                die("add_masked_ex", &err);
            }
            pthread_mutex_unlock(&b->mu);
        } else {
            struct fs_secagg_upload up;
            int stream = 0;
            const uint8_t *p = (const uint8_t *)(b->ys[party - 1] + idx * b->cw);
            pthread_mutex_lock(&b->mu);
            if (fs_secagg_server_upload_begin(b->s, party, idx, m, &up, &stream, &err) != 0 ||
                !stream) {
                die("upload_begin", &err);
            }
            pthread_mutex_unlock(&b->mu);
            for (size_t off = 0; off < m; off += PIECE_WORDS) {
                size_t n = m - off < PIECE_WORDS ? m - off : PIECE_WORDS;
                if (fs_secagg_server_upload_fold(&up, p + 8 * off, n, &err) != 0) {
                    die("upload_fold", &err);
                }
            }
            pthread_mutex_lock(&b->mu);
            if (fs_secagg_server_upload_commit(&up, &err) != 0) {
                die("upload_commit", &err);
            }
            pthread_mutex_unlock(&b->mu);
            fs_secagg_server_upload_release(&up);
        }
    }
}

static uint32_t g_round;

/* One aggregation's masked input through the server (begin, all chunks,
 * close): seconds of the chunks alone. */
static double server_round(struct bench *b, int streamed)
{
    struct fs_err err = {0};
    pthread_t th[64];
    double t0, t;
    size_t n = (size_t)b->k * b->nchunks;

    if (fs_secagg_server_begin(b->s, g_round++, b->len, &err) != 0) {
        die("begin", &err);
    }
    for (size_t i = 0; i < n; i++) {
        b->order[i] = (uint32_t)i;
    }
    for (size_t i = n; i > 1; i--) {
        uint32_t r;
        uint32_t tmp;
        if (fs_rand_bytes(&r, sizeof r, &err) != 0) {
            die("rand", &err);
        }
        r %= (uint32_t)i;
        tmp = b->order[i - 1];
        b->order[i - 1] = b->order[r];
        b->order[r] = tmp;
    }
    b->next = 0;
    b->streamed = streamed;
    t0 = now();
    for (unsigned k = 0; k < b->threads; k++) {
        if (pthread_create(&th[k], NULL, server_worker, b) != 0) {
            die("pthread_create", NULL);
        }
    }
    for (unsigned k = 0; k < b->threads; k++) {
        pthread_join(th[k], NULL);
    }
    t = now() - t0;
    /* close R2 and reset the server for the next round: a fresh one is simplest */
    if (fs_secagg_server_close_masked(b->s, &err) != 0) {
        die("close_masked", &err);
    }
    return t;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* The server allows aggregations only in order, after the previous one
 * finished: start a new one for each round. */
static void fresh_server(struct bench *b)
{
    if (b->s != NULL) {
        fs_secagg_server_free(b->s);
        for (uint32_t i = 1; i <= b->k; i++) {
            fs_secagg_client_free(b->c[i]);
        }
        free(b->c);
        b->s = NULL;
    }
    setup_server(b);
    g_round = 0;
}

int main(int argc, char **argv)
{
    struct bench b;
    double t_p1[ROUNDS], t_pt[ROUNDS], t_lock[ROUNDS], t_st[ROUNDS];
    double gb;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    memset(&b, 0, sizeof b);
    b.k = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 10;
    b.len = argc > 2 ? strtoull(argv[2], NULL, 10) : 10000000ull;
    b.cw = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 1u << 20;
    if (b.k < 2 || b.k > 1000 || b.len < 1 || b.cw < 16) {
        fprintf(stderr, "usage: bench_ingest [K [L [chunk]]]\n");
        return 2;
    }
    b.threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (unsigned)cpus;
    b.nchunks = (b.len + b.cw - 1) / b.cw;
    b.ys = calloc(b.k, sizeof *b.ys);
    b.sum = malloc(b.len * sizeof *b.sum);
    b.order = malloc((size_t)b.k * b.nchunks * sizeof *b.order);
    pthread_mutex_init(&b.mu, NULL);
    if (b.ys == NULL || b.sum == NULL || b.order == NULL) {
        die("malloc", NULL);
    }
    for (uint32_t p = 0; p < b.k; p++) {
        b.ys[p] = malloc(b.len * sizeof *b.ys[p]);
        if (b.ys[p] == NULL) {
            die("malloc", NULL);
        }
        for (uint64_t i = 0; i < b.len; i++) {
            b.ys[p][i] = (i + p) * 0x9e3779b97f4a7c15ull;
        }
    }
    gb = (double)b.k * (double)b.len * 8 / 1e9;
    if (argc > 4 && strcmp(argv[4], "plain") == 0) {
        for (int r = 0; r < ROUNDS; r++) {
            t_p1[r] = plain(&b, 1);
            t_pt[r] = plain(&b, b.threads);
        }
        printf("plain_gbs 1 %.3f %u %.3f\n", gb / median(t_p1, ROUNDS), b.threads,
               gb / median(t_pt, ROUNDS));
        for (uint32_t p = 0; p < b.k; p++) {
            free(b.ys[p]);
        }
        free(b.ys);
        free(b.sum);
        free(b.order);
        return 0;
    }
    printf("ingest of %u parties x %llu words (%.2f GB), chunks of %u words, %u threads; "
           "GB/s, median of %d\n",
           b.k, (unsigned long long)b.len, gb, b.cw, b.threads, ROUNDS);
    for (int r = 0; r < ROUNDS; r++) {
        t_p1[r] = plain(&b, 1);
        t_pt[r] = plain(&b, b.threads);
        fresh_server(&b);
        t_lock[r] = server_round(&b, 0);
        fresh_server(&b);
        t_st[r] = server_round(&b, 1);
    }
    {
        double p1 = gb / median(t_p1, ROUNDS);
        double pt = gb / median(t_pt, ROUNDS);
        double lk = gb / median(t_lock, ROUNDS);
        double st = gb / median(t_st, ROUNDS);
        printf("  plain sum, 1 thread            %6.2f GB/s\n", p1);
        printf("  plain sum, %2u threads          %6.2f GB/s\n", b.threads, pt);
        printf("  one job lock, %2u threads       %6.2f GB/s  (%.2f of the plain sum)\n", b.threads,
               lk, lk / pt);
        printf("  streamed ingest, %2u threads    %6.2f GB/s  (%.2f of the plain sum)\n", b.threads,
               st, st / pt);
    }
    fs_secagg_server_free(b.s);
    for (uint32_t i = 1; b.c != NULL && i <= b.k; i++) {
        fs_secagg_client_free(b.c[i]);
    }
    free(b.c);
    for (uint32_t p = 0; p < b.k; p++) {
        free(b.ys[p]);
    }
    free(b.ys);
    free(b.sum);
    free(b.order);
    pthread_mutex_destroy(&b.mu);
    return 0;
}
