/* The parties' masking cost of secure aggregation with the full graph
 * (every party masks with the n - 1 others) against SecAgg+ (k neighbours,
 * lib/proto/secagg.h), driving the client and server state machines of
 * n = 50 parties in one process (no sockets): key setup, then one
 * aggregation of a vector of LEN words per party. Measures each party's
 * begin + mask calls with its thread's CPU clock and prints the sum over
 * the parties for each mode, the ratio, and checks the sum (a wrong sum
 * exits 1). Then a whole SecAgg+ job step by step (every round's CPU per
 * party and the server's, `aggregations` aggregations; without arguments
 * 20 parties x 60000 words x 7, the shape of a fedpower job of 20 parties).
 * Usage: bench_secagg_plus [parties [words [aggregations]]] (default 50,
 * 2^20, 7). About 8 s on one core. */
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "proto/secagg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const struct fs_err *err)
{
    fprintf(stderr, "bench_secagg_plus: %s: %s\n", what, err->msg);
    exit(1);
}

#define TRY(call, what)                                                                            \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            die(what, &err);                                                                       \
        }                                                                                          \
    } while (0)

/* CPU seconds of each step of a whole SecAgg+ job as the services run it
 * (deterministic clients, as the agents build them), summed over the
 * parties (client side) or the server's, one column per round. */
enum { PH_ADV, PH_SHARE, PH_RECV, PH_BEGIN, PH_MASK, PH_CONS, PH_UNMASK, PH_NCLIENT };
enum { SV_ADV, SV_SHARES, SV_MASKED, SV_CONS, SV_UNMASK, SV_N };

/* Aggregation r of run_phases: every party begins, masks and uploads, then
 * consistency and unmasking; the sum is checked. */
static void phases_round(fs_secagg_server *s, fs_secagg_client **c, uint32_t n, uint64_t len,
                         uint32_t chunk, uint32_t r, uint64_t *x, uint64_t *want, double *cl,
                         double *sv)
{
    struct fs_err err = {0};
    const uint32_t *set;
    const uint64_t *sum = NULL;
    size_t na = 0, n3 = 0, n4 = 0;
    double t;

    memset(want, 0, len * sizeof *want);
    t = cpu_now();
    TRY(fs_secagg_server_begin(s, r, len, &err), "begin");
    sv[SV_MASKED] += cpu_now() - t;
    set = fs_secagg_server_set(s, 0, &na);
    for (uint32_t i = 1; i <= n; i++) {
        for (uint64_t w = 0; w < len; w++) {
            x[w] = (uint64_t)i * 2654435761u + w + r;
            want[w] += x[w];
        }
        t = cpu_now();
        TRY(fs_secagg_client_begin(c[i], r, len, set, na, &err), "client begin");
        cl[PH_BEGIN] += cpu_now() - t;
        t = cpu_now();
        TRY(fs_secagg_client_mask(c[i], 0, x, x, (size_t)len, &err), "mask");
        cl[PH_MASK] += cpu_now() - t;
        t = cpu_now();
        for (uint64_t off = 0; off < len; off += chunk) {
            size_t m = (size_t)(len - off < chunk ? len - off : chunk);
            TRY(fs_secagg_server_add_masked(s, i, off / chunk, x + off, m, &err), "add_masked");
        }
        sv[SV_MASKED] += cpu_now() - t;
    }
    t = cpu_now();
    TRY(fs_secagg_server_close_masked(s, &err), "close_masked");
    sv[SV_MASKED] += cpu_now() - t;
    set = fs_secagg_server_set(s, 3, &n3);
    for (size_t q = 0; q < n3; q++) {
        uint8_t sig[FS_SECAGG_SIG_LEN];
        t = cpu_now();
        TRY(fs_secagg_client_consistency(c[set[q]], set, n3, sig, &err), "consistency");
        cl[PH_CONS] += cpu_now() - t;
        t = cpu_now();
        TRY(fs_secagg_server_add_consistency(s, set[q], sig, &err), "add_consistency");
        sv[SV_CONS] += cpu_now() - t;
    }
    t = cpu_now();
    TRY(fs_secagg_server_close_consistency(s, &err), "close_consistency");
    sv[SV_CONS] += cpu_now() - t;
    set = fs_secagg_server_set(s, 4, &n4);
    for (size_t q = 0; q < n4; q++) {
        struct fs_secagg_reveal *rv = NULL;
        size_t nrv = 0;
        t = cpu_now();
        TRY(fs_secagg_client_unmask(c[set[q]], set, fs_secagg_server_sigs(s), n4, &rv, &nrv, &err),
            "unmask");
        cl[PH_UNMASK] += cpu_now() - t;
        t = cpu_now();
        TRY(fs_secagg_server_add_reveals(s, set[q], rv, nrv, &err), "add_reveals");
        sv[SV_UNMASK] += cpu_now() - t;
        free(rv);
    }
    t = cpu_now();
    TRY(fs_secagg_server_finish(s, &sum, &err), "finish");
    sv[SV_UNMASK] += cpu_now() - t;
    if (memcmp(sum, want, len * sizeof *sum) != 0) {
        fprintf(stderr, "bench_secagg_plus: the sum of aggregation %u is wrong\n", r);
        exit(1);
    }
}

/* The key setup of a job (advertise, share keys, receive shares) for
 * parties 1..cfg->n (deterministic clients, as the agents build them), with
 * the CPU seconds of each step added to cl and sv. */
static fs_secagg_server *setup_job(const struct fs_secagg_config *cfg, fs_secagg_client **c,
                                   double *cl, double *sv)
{
    struct fs_err err = {0};
    fs_secagg_server *s = NULL;
    const struct fs_secagg_adv *roster;
    uint32_t n = cfg->n;
    size_t k = 0;
    double t;

    TRY(fs_secagg_server_new(cfg, NULL, &s, &err), "server");
    for (uint32_t i = 1; i <= n; i++) {
        uint8_t sk[32], pk[32], secret[32];
        struct fs_secagg_adv a;
        TRY(fs_ed25519_keygen(sk, pk, &err), "identity");
        TRY(fs_rand_bytes(secret, 32, &err), "secret");
        t = cpu_now();
        TRY(fs_secagg_client_new_det(cfg, i, sk, secret, &c[i], &err), "client");
        TRY(fs_secagg_client_advertise(c[i], &a, &err), "advertise");
        cl[PH_ADV] += cpu_now() - t;
        t = cpu_now();
        TRY(fs_secagg_server_add_adv(s, &a, &err), "add_adv");
        sv[SV_ADV] += cpu_now() - t;
    }
    t = cpu_now();
    TRY(fs_secagg_server_close_adv(s, &err), "close_adv");
    sv[SV_ADV] += cpu_now() - t;
    roster = fs_secagg_server_roster(s, &k);
    for (uint32_t i = 1; i <= n; i++) {
        struct fs_secagg_share_ct *cts = NULL;
        size_t nct = 0;
        t = cpu_now();
        TRY(fs_secagg_client_share_keys(c[i], roster, k, &cts, &nct, &err), "share_keys");
        cl[PH_SHARE] += cpu_now() - t;
        t = cpu_now();
        TRY(fs_secagg_server_add_shares(s, i, cts, nct, &err), "add_shares");
        sv[SV_SHARES] += cpu_now() - t;
        fs_secagg_share_cts_free(cts, nct);
    }
    t = cpu_now();
    TRY(fs_secagg_server_close_shares(s, &err), "close_shares");
    sv[SV_SHARES] += cpu_now() - t;
    for (uint32_t i = 1; i <= n; i++) {
        const struct fs_secagg_share_ct **mine = NULL;
        struct fs_secagg_share_ct *flat;
        size_t km = 0;
        TRY(fs_secagg_server_shares_for(s, i, &mine, &km, &err), "shares_for");
        flat = calloc(km + 1, sizeof *flat);
        for (size_t q = 0; q < km; q++) {
            flat[q] = *mine[q];
        }
        t = cpu_now();
        TRY(fs_secagg_client_receive_shares(c[i], flat, km, &err), "receive_shares");
        cl[PH_RECV] += cpu_now() - t;
        free(flat);
        free(mine);
    }
    return s;
}

/* A job of `aggregations` rounds over len words (SecAgg+ or full), step
 * CPU seconds added to cl and sv. */
static void run_job(uint32_t n, uint64_t len, uint32_t aggs, int plus, uint32_t *degree, double *cl,
                    double *sv)
{
    struct fs_err err = {0};
    struct fs_secagg_config cfg;
    fs_secagg_server *s;
    fs_secagg_client **c = calloc(n + 1, sizeof *c);
    uint64_t *x = malloc(len * sizeof *x);
    uint64_t *want = malloc(len * sizeof *want);

    if (c == NULL || x == NULL || want == NULL) {
        fprintf(stderr, "bench_secagg_plus: out of memory\n");
        exit(1);
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.n = n;
    cfg.t = n / 2 + 1;
    cfg.aggregations = aggs;
    cfg.chunk_words = 1u << 16;
    TRY(fs_rand_bytes(cfg.job_id, 32, &err), "job id");
    if (plus) {
        TRY(fs_secagg_config_plus(&cfg, &err), "SecAgg+ parameters");
    }
    if (degree != NULL) {
        *degree = plus ? cfg.degree : n - 1;
    }
    s = setup_job(&cfg, c, cl, sv);
    for (uint32_t r = 0; r < aggs; r++) {
        phases_round(s, c, n, len, cfg.chunk_words, r, x, want, cl, sv);
    }
    fs_secagg_server_free(s);
    for (uint32_t i = 1; i <= n; i++) {
        fs_secagg_client_free(c[i]);
    }
    free(c);
    free(x);
    free(want);
}

/* One aggregation; returns the parties' mask CPU seconds (begin and mask,
 * summed), *setup_s the key setup's CPU seconds of all parties and the
 * server together. */
static double run(uint32_t n, uint64_t len, int plus, uint32_t *degree, double *setup_s)
{
    double cl[PH_NCLIENT] = {0}, sv[SV_N] = {0};

    run_job(n, len, 1, plus, degree, cl, sv);
    *setup_s = cl[PH_ADV] + cl[PH_SHARE] + cl[PH_RECV] + sv[SV_ADV] + sv[SV_SHARES];
    return cl[PH_BEGIN] + cl[PH_MASK];
}

static void phases(uint32_t n, uint64_t len, uint32_t aggs)
{
    static const char *cname[PH_NCLIENT] = {
        "new+advertise", "share_keys", "receive_shares", "begin", "mask", "consistency", "unmask"};
    static const char *sname[SV_N] = {"adverts", "shares", "masked input", "consistency",
                                      "unmasking"};
    double cl[PH_NCLIENT] = {0}, sv[SV_N] = {0};
    double ctot = 0, stot = 0;

    run_job(n, len, aggs, 1, NULL, cl, sv);
    printf("SecAgg+ job by step, %u parties, %u aggregations of %llu words (deterministic "
           "clients), CPU ms\n",
           n, aggs, (unsigned long long)len);
    for (int i = 0; i < PH_NCLIENT; i++) {
        int per_agg = i >= PH_BEGIN;
        printf("  party %-15s %8.3f ms per party%s\n", cname[i],
               1e3 * cl[i] / n / (per_agg ? aggs : 1), per_agg ? " per aggregation" : " (once)");
        ctot += cl[i];
    }
    for (int i = 0; i < SV_N; i++) {
        int per_agg = i >= SV_MASKED;
        printf("  server %-14s %8.3f ms%s\n", sname[i], 1e3 * sv[i] / (per_agg ? aggs : 1),
               per_agg ? " per aggregation" : " (once)");
        stot += sv[i];
    }
    printf("  whole job: parties %.3f s (%.2f ms each), server %.3f s\n", ctot, 1e3 * ctot / n,
           stot);
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 50;
    uint64_t len = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t)1 << 20;
    uint32_t kf = 0, kp = 0;
    uint32_t aggs = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 7;
    double sf = 0, sp = 0;
    double full, plus;

    if (n < 4 || n > FS_SECAGG_MAX_PARTIES || len == 0) {
        fprintf(stderr, "usage: bench_secagg_plus [parties 4..%d [words]]\n",
                FS_SECAGG_MAX_PARTIES);
        return 2;
    }
    printf("secure aggregation masking, %u parties x %llu words (%.1f MiB each), one core\n", n,
           (unsigned long long)len, (double)len * 8 / (1 << 20));
    full = run(n, len, 0, &kf, &sf);
    printf("  full: %3u pairwise streams per party: parties' mask CPU %.3f s (%.4f s each), "
           "key setup %.3f s\n",
           kf, full, full / n, sf);
    plus = run(n, len, 1, &kp, &sp);
    printf("  plus: %3u pairwise streams per party: parties' mask CPU %.3f s (%.4f s each), "
           "key setup %.3f s\n",
           kp, plus, plus / n, sp);
    printf("  ratio full / plus: mask CPU %.2f (streams %.2f), key setup %.2f\n", full / plus,
           (double)(kf + 1) / (kp + 1), sf / sp);
    printf("  sums exact in both modes\n");
    if (aggs >= 1 && aggs <= FS_SECAGG_MAX_AGGREGATIONS) {
        /* without arguments: the fedpower ratio job's shape */
        phases(argc > 1 ? n : 20, argc > 2 ? len : 60000, aggs);
    }
    return 0;
}
