/* bench_fedsvd: the whole FedSVD pipeline in one process — masking server,
 * K parties, secure aggregation with real crypto (X25519, Ed25519, Shamir,
 * AES-CTR masks), server SVD, local recovery — against the centralised
 * fs_svd_thin of the pooled matrix, at the sizes Chai et al. 2021's reference
 * code was measured at on a 2-core machine (docs/references.md).
 *
 * Data: the paper's power-law synthetic matrix, X = U diag(i^-1) V^T with U
 * the Q of a Gaussian N x d and V Haar (alpha = 1), d = 1000 features.
 *
 * Phases (seconds):
 *   masks    masking server: mask set, every party's slab of A, the key
 *            blob encode/decode a service would ship
 *   apply    parties: T_i = X_i B, then A[:, R_i] T_i column block by
 *            column block, fixed-point encoding
 *   secagg   key setup (R0, R1), masking every chunk (AES-CTR PRG streams),
 *            the server folding uploads, consistency, unmasking
 *   server   decode the ring sum, thin SVD in place (dgesdd, no U)
 *   recover  parties: V = B V', U_i = X_i V S^-1
 * Peak RSS is read when the federated run ends (before the centralised SVD
 * runs); it covers the pooled data, all K parties' state and the server in
 * one process. Each size runs in its own child process.
 *
 * Usage: bench_fedsvd [KxN[xd[xb]] ...]   (default 2x10000 10x5000 10x10000)
 * b overrides the block size of the sample mask A (default
 * fs_mask_choose_block: one dense block up to 4096 samples, else balanced
 * blocks of >= max(d, 1024)): the masking server's cost grows as b^2 N, the
 * reference code used b = 1000. The same pipeline with the real services,
 * bytes and memory per process: bench/bench_fedsvd_services.sh.
 * Prints figures; asserts nothing. Exit status non-zero only on failure. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crypto/ed25519.h"
#include "crypto/prg.h"
#include "crypto/rand.h"
#include "la/haar.h"
#include "la/mask.h"
#include "la/mat.h"
#include "la/qr.h"
#include "la/svd.h"
#include "proto/fedsvd.h"
#include "proto/secagg.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_rss_mib(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        return -1;
    }
    return (double)ru.ru_maxrss / 1024.0;
}

/* X = U diag(1/i) V^T, U = orth(Gaussian N x d), V Haar d x d. */
static int make_powerlaw(size_t n, size_t d, fs_mat **out, struct fs_err *err)
{
    static const uint8_t key[32] = {0x70, 0x6f, 0x77, 0x65, 0x72, 0x6c, 0x61, 0x77};
    fs_prg *prg = NULL;
    fs_mat *u = fs_mat_new_uninit(n, d);
    fs_mat *v = NULL;
    fs_mat *x = fs_mat_new_uninit(n, d);
    int rc = u == NULL || x == NULL ? FS_ENOMEM : 0;

    if (rc == 0) {
        rc = fs_prg_new(&prg, key, NULL, err);
    }
    if (rc == 0) {
        rc = fs_mat_fill_normal(u, prg, err);
    }
    if (rc == 0) {
        rc = fs_qr_orth(u, NULL, err);
    }
    if (rc == 0) {
        rc = fs_haar_new(d, prg, &v, err);
    }
    for (size_t j = 0; rc == 0 && j < d; j++) {
        fs_mat col = fs_mat_view(u, 0, j, n, 1);
        fs_mat_scale(&col, 1.0 / (double)(j + 1));
    }
    if (rc == 0) {
        rc = fs_mat_gemm('N', 'T', 1.0, u, v, 0.0, x, err);
    }
    fs_prg_free(prg);
    fs_mat_free(u);
    fs_mat_free(v);
    if (rc != 0) {
        fs_mat_free(x);
        return rc;
    }
    *out = x;
    return 0;
}

struct fed {
    uint32_t K;
    size_t N, d;
    size_t *sizes;
    fs_mat *x;
    fs_mat *views;
    fs_fedsvd_party **p;
    fs_secagg_client **c;
    fs_secagg_server *s;
    struct fs_secagg_config cfg;
    struct fs_fedsvd_job job;
    struct fs_fedsvd_published pub;
    struct fs_fedsvd_result *res;
    double t_masks, t_apply, t_secagg, t_server, t_recover;
};

static int setup_masks(struct fed *f, struct fs_err *err)
{
    uint8_t master[32];
    fs_fedsvd_maskset *ms = NULL;
    double t0 = now();
    size_t off = 0;
    int rc = fs_rand_bytes(master, sizeof master, err);

    if (rc == 0) {
        rc = fs_fedsvd_maskset_new(&f->job, master, &ms, err);
    }
    for (uint32_t i = 1; rc == 0 && i <= f->K; i++) {
        struct fs_fedsvd_keys *k = NULL;
        struct fs_fedsvd_keys *shipped = NULL;
        uint8_t *blob = NULL;
        size_t len = 0;
        rc = fs_fedsvd_maskset_party(ms, i, &k, err);
        if (rc == 0) {
            rc = fs_fedsvd_keys_encode(k, &blob, &len, err);
        }
        if (rc == 0) {
            rc = fs_fedsvd_keys_decode(blob, len, &shipped, err);
        }
        fs_fedsvd_wipe_free(blob, len);
        fs_fedsvd_keys_free(k);
        f->views[i] = fs_mat_view(f->x, off, 0, f->sizes[i - 1], f->d);
        off += f->sizes[i - 1];
        if (rc == 0) {
            rc = fs_fedsvd_party_new(shipped, &f->views[i], &f->p[i], err);
        } else {
            fs_fedsvd_keys_free(shipped);
        }
    }
    fs_fedsvd_maskset_free(ms);
    f->t_masks = now() - t0;
    return rc;
}

/* R0 and R1 of secure aggregation for all K parties. */
static int secagg_setup(struct fed *f, struct fs_err *err)
{
    const struct fs_secagg_adv *roster;
    size_t k = 0;
    int rc;

    f->cfg.n = f->K;
    f->cfg.t = f->K;
    f->cfg.aggregations = 1;
    f->cfg.chunk_words = FS_SECAGG_DEFAULT_CHUNK;
    rc = fs_rand_bytes(f->cfg.job_id, 32, err);
    if (rc == 0) {
        rc = fs_secagg_server_new(&f->cfg, NULL, &f->s, err);
    }
    for (uint32_t i = 1; rc == 0 && i <= f->K; i++) {
        uint8_t sk[32], pk[32];
        struct fs_secagg_adv a;
        rc = fs_ed25519_keygen(sk, pk, err);
        if (rc == 0) {
            rc = fs_secagg_client_new(&f->cfg, i, sk, &f->c[i], err);
        }
        if (rc == 0) {
            rc = fs_secagg_client_advertise(f->c[i], &a, err);
        }
        if (rc == 0) {
            rc = fs_secagg_server_add_adv(f->s, &a, err);
        }
    }
    if (rc == 0) {
        rc = fs_secagg_server_close_adv(f->s, err);
    }
    roster = rc == 0 ? fs_secagg_server_roster(f->s, &k) : NULL;
    for (uint32_t i = 1; rc == 0 && i <= f->K; i++) {
        struct fs_secagg_share_ct *cts = NULL;
        size_t nct = 0;
        rc = fs_secagg_client_share_keys(f->c[i], roster, k, &cts, &nct, err);
        if (rc == 0) {
            rc = fs_secagg_server_add_shares(f->s, i, cts, nct, err);
        }
        fs_secagg_share_cts_free(cts, nct);
    }
    if (rc == 0) {
        rc = fs_secagg_server_close_shares(f->s, err);
    }
    for (uint32_t i = 1; rc == 0 && i <= f->K; i++) {
        const struct fs_secagg_share_ct **mine = NULL;
        struct fs_secagg_share_ct *flat = NULL;
        size_t km = 0;
        rc = fs_secagg_server_shares_for(f->s, i, &mine, &km, err);
        flat = rc == 0 ? calloc(km + 1, sizeof *flat) : NULL;
        for (size_t q = 0; flat != NULL && q < km; q++) {
            flat[q] = *mine[q];
        }
        if (rc == 0) {
            rc = flat == NULL ? FS_ENOMEM : fs_secagg_client_receive_shares(f->c[i], flat, km, err);
        }
        free(flat);
        free(mine);
    }
    return rc;
}

/* Each party uploads every chunk; R3, R4; the sum. */
static int aggregate(struct fed *f, const uint64_t **sum, struct fs_err *err)
{
    uint64_t len = fs_fedsvd_vector_len(&f->job);
    uint64_t cw = f->cfg.chunk_words;
    uint64_t *y = malloc(cw * sizeof *y);
    const uint32_t *set;
    size_t na = 0, n3 = 0, n4 = 0;
    int rc = y == NULL ? FS_ENOMEM : fs_secagg_server_begin(f->s, 0, len, err);

    set = rc == 0 ? fs_secagg_server_set(f->s, 0, &na) : NULL;
    for (size_t q = 0; rc == 0 && q < na; q++) {
        uint32_t i = set[q];
        rc = fs_secagg_client_begin(f->c[i], 0, len, set, na, err);
        for (uint64_t idx = 0; rc == 0 && idx * cw < len; idx++) {
            size_t m = (size_t)(len - idx * cw < cw ? len - idx * cw : cw);
            double t0 = now();
            rc = fs_fedsvd_party_encode(f->p[i], idx * cw, y, m, err);
            f->t_apply += now() - t0;
            t0 = now();
            if (rc == 0) {
                rc = fs_secagg_client_mask(f->c[i], idx * cw, y, y, m, err);
            }
            if (rc == 0) {
                rc = fs_secagg_server_add_masked(f->s, i, idx, y, m, err);
            }
            f->t_secagg += now() - t0;
        }
        fs_fedsvd_party_end_upload(f->p[i]); /* frees T_i, the column cache, the slab */
    }
    {
        double t0 = now();
        if (rc == 0) {
            rc = fs_secagg_server_close_masked(f->s, err);
        }
        set = rc == 0 ? fs_secagg_server_set(f->s, 3, &n3) : NULL;
        for (size_t q = 0; rc == 0 && q < n3; q++) {
            uint8_t sig[FS_SECAGG_SIG_LEN];
            rc = fs_secagg_client_consistency(f->c[set[q]], set, n3, sig, err);
            if (rc == 0) {
                rc = fs_secagg_server_add_consistency(f->s, set[q], sig, err);
            }
        }
        if (rc == 0) {
            rc = fs_secagg_server_close_consistency(f->s, err);
        }
        set = rc == 0 ? fs_secagg_server_set(f->s, 4, &n4) : NULL;
        for (size_t q = 0; rc == 0 && q < n4; q++) {
            struct fs_secagg_reveal *rv = NULL;
            size_t nrv = 0;
            rc = fs_secagg_client_unmask(f->c[set[q]], set, fs_secagg_server_sigs(f->s), n4, &rv,
                                         &nrv, err);
            if (rc == 0) {
                rc = fs_secagg_server_add_reveals(f->s, set[q], rv, nrv, err);
            }
            free(rv);
        }
        if (rc == 0) {
            rc = fs_secagg_server_finish(f->s, sum, err);
        }
        f->t_secagg += now() - t0;
    }
    free(y);
    return rc;
}

static int run_federated(struct fed *f, struct fs_err *err)
{
    int e[1000];
    int E = 0;
    const uint64_t *sum = NULL;
    fs_mat *y = NULL;
    double t0;
    int rc = setup_masks(f, err);

    t0 = now();
    for (uint32_t i = 1; rc == 0 && i <= f->K; i++) {
        rc = fs_fedsvd_party_prepare(f->p[i], &e[i - 1], err);
    }
    if (rc == 0) {
        rc = fs_fedsvd_public_exponent(e, f->K, &E, err);
    }
    for (uint32_t i = 1; rc == 0 && i <= f->K; i++) {
        rc = fs_fedsvd_party_set_exponent(f->p[i], E, err);
    }
    f->t_apply = now() - t0;
    t0 = now();
    if (rc == 0) {
        rc = secagg_setup(f, err);
    }
    f->t_secagg = now() - t0;
    if (rc == 0) {
        rc = aggregate(f, &sum, err);
    }
    t0 = now();
    if (rc == 0) {
        rc = fs_fedsvd_server_decode(&f->job, E, sum, fs_fedsvd_vector_len(&f->job), &y, err);
    }
    /* the secagg state (and its N x d sum) is no longer needed */
    fs_secagg_server_free(f->s);
    f->s = NULL;
    if (rc == 0) {
        rc = fs_fedsvd_server_factorize(y, 0, FS_TOPK_AUTO, NULL, &f->pub, err);
    }
    fs_mat_free(y);
    f->t_server = now() - t0;
    t0 = now();
    for (uint32_t i = 1; rc == 0 && i <= f->K; i++) {
        rc = fs_fedsvd_party_recover(f->p[i], &f->pub, 0.0, &f->res[i], err);
    }
    f->t_recover = now() - t0;
    return rc;
}

/* ||P_k P_k^T - Q_k Q_k^T||_F (dense d x d). */
static double proj_dist(const fs_mat *p, const fs_mat *q, size_t k)
{
    struct fs_err err = {0};
    fs_mat pv = fs_mat_view(p, 0, 0, p->rows, k);
    fs_mat qv = fs_mat_view(q, 0, 0, q->rows, k);
    fs_mat *dd = fs_mat_new(p->rows, p->rows);
    double r = NAN;

    if (dd != NULL && fs_mat_gemm('N', 'T', 1.0, &pv, &pv, 0.0, dd, &err) == 0 &&
        fs_mat_gemm('N', 'T', -1.0, &qv, &qv, 1.0, dd, &err) == 0) {
        r = fs_mat_norm_fro(dd);
    }
    fs_mat_free(dd);
    return r;
}

/* Reconstruction ||X - U S V^T||_F / ||X||_F and MAPE (mean |X - Xh| / |X|). */
static void recon(const struct fed *f, double *rel, double *mape)
{
    struct fs_err err = {0};
    fs_mat *xh = fs_mat_new_uninit(f->N, f->d);
    size_t r = f->pub.r;
    double num = 0.0, den = 0.0, ape = 0.0;
    size_t cnt = 0;

    *rel = NAN;
    *mape = NAN;
    if (xh == NULL) {
        return;
    }
    for (uint32_t i = 1; i <= f->K; i++) {
        fs_mat us = fs_mat_view(xh, f->views[i].data - f->x->data, 0, f->sizes[i - 1], f->d);
        fs_mat *t = fs_mat_dup(f->res[i].u);
        for (size_t j = 0; t != NULL && j < r; j++) {
            fs_mat col = fs_mat_view(t, 0, j, t->rows, 1);
            fs_mat_scale(&col, f->pub.s[j]);
        }
        if (t == NULL || fs_mat_gemm('N', 'T', 1.0, t, f->res[i].v, 0.0, &us, &err) != 0) {
            fs_mat_free(t);
            fs_mat_free(xh);
            return;
        }
        fs_mat_free(t);
    }
    for (size_t j = 0; j < f->d; j++) {
        for (size_t i = 0; i < f->N; i++) {
            double a = FS_MAT_AT(f->x, i, j), b = FS_MAT_AT(xh, i, j);
            num += (a - b) * (a - b);
            den += a * a;
            if (a != 0.0) {
                ape += fabs(a - b) / fabs(a);
                cnt++;
            }
        }
    }
    *rel = sqrt(num / den);
    *mape = cnt > 0 ? ape / (double)cnt : NAN;
    fs_mat_free(xh);
}

struct reference {
    uint32_t K;
    size_t N;
    double standalone, masks, apply, server, recover, whole, gib, mape;
};

/* Chai et al. 2021's reference code on a 2-core build machine, d = 1000 (docs/references.md). */
static const struct reference refs[] = {
    {2, 10000, 20.2, 2.4, 5.0, 19.5, 17.0, 99.6, 5.0, 1.4e-8},
    {10, 5000, 5.6, 1.3, 4.7, 4.7, 0.2, 64.4, 8.8, 2.0e-7},
};

static void print_reference(uint32_t K, size_t N, size_t d, double whole, double rss)
{
    if (d != 1000) {
        return;
    }
    for (size_t q = 0; q < sizeof refs / sizeof refs[0]; q++) {
        const struct reference *r = &refs[q];
        if (r->K == K && r->N == N) {
            printf("  Chai et al.'s reference code (2 cores): standalone %.1f s, masks %.1f s, "
                   "apply+secagg %.1f s,\n    server SVD %.1f s, recover %.1f s, whole %.1f s, "
                   "peak %.1f GiB, MAPE %.1e\n",
                   r->standalone, r->masks, r->apply, r->server, r->recover, r->whole, r->gib,
                   r->mape);
            printf("  ours vs reference: whole run %.1fx faster, peak memory %.1fx smaller\n",
                   r->whole / whole, r->gib * 1024.0 / rss);
            return;
        }
    }
    if (K == 10 && N == 10000) {
        printf("  Chai et al.'s reference code (2 cores): killed, out of memory (> 23 GiB)\n");
    }
}

static void fed_free(struct fed *f)
{
    fs_secagg_server_free(f->s);
    for (uint32_t i = 1; i <= f->K; i++) {
        if (f->c != NULL) {
            fs_secagg_client_free(f->c[i]);
        }
        if (f->p != NULL) {
            fs_fedsvd_party_free(f->p[i]);
        }
        if (f->res != NULL) {
            fs_fedsvd_result_clear(&f->res[i]);
        }
    }
    fs_fedsvd_published_clear(&f->pub);
    free(f->c);
    free(f->p);
    free(f->res);
    free(f->views);
    free(f->sizes);
    fs_mat_free(f->x);
}

static void print_accuracy(const struct fed *f, const fs_svd *ref)
{
    double se = 0.0, rel = 0.0, mape = 0.0;

    for (size_t j = 0; j < ref->r; j++) {
        double dd = fabs(f->pub.s[j] - ref->s[j]) / ref->s[0];
        se = dd > se ? dd : se;
    }
    recon(f, &rel, &mape);
    printf("  accuracy vs centralised: max |ds|/s1 %.1e, projection distance V top-10 %.1e, "
           "top-100 %.1e\n",
           se, proj_dist(f->res[1].v, ref->v, 10), proj_dist(f->res[1].v, ref->v, 100));
    printf("  reconstruction ||X - U S V^T||_F/||X||_F %.1e, MAPE %.1e, numerical rank %zu/%zu\n",
           rel, mape, f->res[1].rank, f->pub.r);
}

static int bench_size(uint32_t K, size_t N, size_t d, size_t block)
{
    struct fs_err err = {0};
    struct fed f;
    fs_svd ref = {0};
    double t0, t_central, whole, rss;
    int rc;

    memset(&f, 0, sizeof f);
    f.K = K;
    f.N = N;
    f.d = d;
    printf("bench_fedsvd: %u parties x %zu samples (%zu each) x %zu features, power law "
           "alpha = 1, mask blocks %zu\n",
           K, N, N / K, d, block != 0 ? block : fs_mask_choose_block(N, d, 0));
    fflush(stdout);
    f.sizes = calloc(K, sizeof *f.sizes);
    f.views = calloc((size_t)K + 1, sizeof *f.views);
    f.p = calloc((size_t)K + 1, sizeof *f.p);
    f.c = calloc((size_t)K + 1, sizeof *f.c);
    f.res = calloc((size_t)K + 1, sizeof *f.res);
    if (f.sizes == NULL || f.views == NULL || f.p == NULL || f.c == NULL || f.res == NULL) {
        fed_free(&f);
        return 1;
    }
    for (uint32_t i = 0; i < K; i++) {
        f.sizes[i] = N / K + (i < N % K ? 1 : 0);
    }
    f.job.partition = FS_FEDSVD_SAMPLES;
    f.job.rows = N;
    f.job.cols = d;
    f.job.parties = K;
    f.job.sizes = f.sizes;
    f.job.block_a = block;
    rc = make_powerlaw(N, d, &f.x, &err);
    if (rc == 0) {
        rc = run_federated(&f, &err);
    }
    if (rc != 0) {
        fprintf(stderr, "bench_fedsvd: %s\n", err.msg);
        fed_free(&f);
        return 1;
    }
    rss = peak_rss_mib();
    whole = f.t_masks + f.t_apply + f.t_secagg + f.t_server + f.t_recover;
    t0 = now();
    rc = fs_svd_thin(f.x, &ref, &err);
    t_central = now() - t0;
    if (rc != 0) {
        fprintf(stderr, "bench_fedsvd: %s\n", err.msg);
        fed_free(&f);
        return 1;
    }
    printf("  centralised fs_svd_thin (pooled X)      %8.2f s\n", t_central);
    printf("  masks   (mask set, K slabs, key codec)  %8.2f s\n", f.t_masks);
    printf("  apply   (X_i B, A[:,R_i] T_i, encode)   %8.2f s\n", f.t_apply);
    printf("  secagg  (setup, masks, fold, unmask)    %8.2f s\n", f.t_secagg);
    printf("  server  (decode, thin SVD in place)     %8.2f s   server SVD / centralised %.2f\n",
           f.t_server, f.t_server / t_central);
    printf("  recover (V = B V', U_i = X_i V S^-1)    %8.2f s\n", f.t_recover);
    printf("  whole federated run                     %8.2f s   federated / centralised %.2f\n",
           whole, whole / t_central);
    printf("  peak RSS (data + K parties + servers)   %8.0f MiB\n", rss);
    print_accuracy(&f, &ref);
    print_reference(K, N, d, whole, rss);
    fflush(stdout);
    fs_svd_clear(&ref);
    fed_free(&f);
    return 0;
}

static int parse_size(const char *s, uint32_t *K, size_t *N, size_t *d, size_t *block)
{
    unsigned long long v[4] = {0, 0, 1000, 0};
    char *end = NULL;
    int i = 0;

    for (;;) {
        errno = 0;
        v[i] = strtoull(s, &end, 10);
        if (end == s || errno != 0 || v[i] == 0 || v[i] > (1ULL << 22)) {
            return -1;
        }
        i++;
        if (*end == '\0') {
            break;
        }
        if ((*end != 'x' && *end != 'X') || i == 4) {
            return -1;
        }
        s = end + 1;
    }
    if (i < 2 || v[0] > FS_SECAGG_MAX_PARTIES || v[1] < v[0]) {
        return -1;
    }
    *K = (uint32_t)v[0];
    *N = (size_t)v[1];
    *d = (size_t)v[2];
    *block = (size_t)v[3];
    return 0;
}

static int run_isolated(uint32_t K, size_t N, size_t d, size_t block)
{
    pid_t pid;
    int status = 0;

    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        return bench_size(K, N, d, block);
    }
    if (pid == 0) {
        _exit(bench_size(K, N, d, block) == 0 ? 0 : 1);
    }
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_fedsvd: %u x %zu x %zu failed\n", K, N, d);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const char *defaults[] = {"2x10000", "10x5000", "10x10000"};
    int failed = 0;

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("Usage: bench_fedsvd [KxN[xd[xb]] ...]   K parties, N samples in total, d "
               "features,\n"
               "       b mask block size (default 2x10000 10x5000 10x10000, d = 1000)\n");
        return 0;
    }
    for (int i = 1; i < (argc > 1 ? argc : 1 + (int)(sizeof defaults / sizeof *defaults)); i++) {
        const char *arg = argc > 1 ? argv[i] : defaults[i - 1];
        uint32_t K = 0;
        size_t N = 0, d = 0, b = 0;
        if (parse_size(arg, &K, &N, &d, &b) != 0) {
            fprintf(stderr, "bench_fedsvd: expected KxN, KxNxd or KxNxdxb, got '%s'\n", arg);
            return 2;
        }
        failed |= run_isolated(K, N, d, b);
    }
    return failed;
}
