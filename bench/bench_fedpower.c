/* The power-method family on seed 001's synthetic comparison, in process:
 * a 3000 x 100 matrix, 100 parties (at least 10 rows each, the rest spread
 * at random), r = k = 10, p = 4, T = 92, sigma = sigma' = 0.1; first the
 * paper's data (integers uniform in 0..5, whose 10th and 11th eigenvalues
 * are nearly equal, so nothing converges to the top-10 in 92 rounds), then
 * a planted spectrum of the same shape. Prints the projection distance to
 * the top-10 of a thin SVD per algorithm, the sync where each got within
 * 1% of its final error, and the ordering (the paper: utility < private <
 * fedpower; its absolute "distances" 18.42 / 6.72 / 13.94 exceed every
 * bounded subspace distance for r = 10, DESIGN §6).
 *
 * The secure sums are computed directly (the sum mod 2^64 of the parties'
 * ring vectors: exactly what the secure-aggregation state machines return,
 * as test_fedpower checks with the real ones; running them for 100 parties
 * x 24 aggregations would only add signature checks to the time). The noise
 * exchange of fedpower-utility runs for real, with 1024-bit keys for these
 * accuracy runs; then the costs of the exchange at 3072 bits, per
 * ciphertext and per round, seed against elementwise, extrapolated to the
 * paper's Netflix size. Asserts nothing; about a minute. */
#include "crypto/prg.h"
#include "crypto/rand.h"
#include "dp/dgauss.h"
#include "la/haar.h"
#include "la/svd.h"
#include "proto/fedpower.h"
#include "proto/noise_exchange.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_ROWS    3000
#define D_COLS    100
#define N_PARTIES 100
#define RANK      10

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const struct fs_err *err)
{
    fprintf(stderr, "bench_fedpower: %s: %s\n", what, err->msg);
    exit(1);
}

struct data {
    uint64_t rows[N_PARTIES];
    fs_mat *x[N_PARTIES + 1];
    fs_mat *ref; /* d x k */
    double lam[RANK + 1];
    double max_entry; /* max entry of any M'_i */
    double bound;     /* max trace of any M'_i */
};

/* Split N_ROWS rows: 10 each, the rest one by one to uniformly chosen parties. */
static void split_rows(fs_prg *prg, uint64_t *rows)
{
    struct fs_err err = {0};
    for (int i = 0; i < N_PARTIES; i++) {
        rows[i] = 10;
    }
    for (int q = 10 * N_PARTIES; q < N_ROWS; q++) {
        uint64_t i = 0;
        if (fs_prg_below(prg, N_PARTIES, &i, &err) != 0) {
            die("prg", &err);
        }
        rows[i]++;
    }
}

/* planted = 0: integers uniform in 0..5; 1: x = g diag(sqrt(lam)) V^T with a gap after 10. */
static void make_data(struct data *D, int planted)
{
    struct fs_err err = {0};
    fs_prg *prg = NULL;
    uint8_t key[32];
    fs_mat *all = fs_mat_new(N_ROWS, D_COLS);
    fs_mat *v = NULL;
    fs_svd sv = {0};
    struct fs_svd_opts so = fs_svd_opts_default();
    size_t off = 0;

    memset(key, planted ? 7 : 3, sizeof key);
    if (fs_prg_new(&prg, key, NULL, &err) != 0) {
        die("prg", &err);
    }
    split_rows(prg, D->rows);
    if (planted) {
        if (fs_haar_from_seed(D_COLS, key, &v, &err) != 0 ||
            fs_mat_fill_normal(all, prg, &err) != 0) {
            die("planted data", &err);
        }
        for (size_t j = 0; j < D_COLS; j++) {
            double l = j < RANK ? 10.0 - 0.5 * (double)j : 2.0 * exp(-0.02 * (double)(j - RANK));
            fs_mat col = fs_mat_view(all, 0, j, N_ROWS, 1);
            fs_mat_scale(&col, sqrt(l));
        }
        fs_mat *t = NULL;
        if (fs_mat_mul('N', 'T', all, v, &t, &err) != 0) {
            die("planted data", &err);
        }
        fs_mat_free(all);
        all = t;
    } else {
        for (size_t j = 0; j < D_COLS; j++) {
            for (size_t i = 0; i < N_ROWS; i++) {
                uint64_t u = 0;
                if (fs_prg_below(prg, 6, &u, &err) != 0) {
                    die("prg", &err);
                }
                FS_MAT_AT(all, i, j) = (double)u;
            }
        }
    }
    D->max_entry = 0.0;
    D->bound = 0.0;
    for (int i = 0; i < N_PARTIES; i++) {
        fs_mat blk = fs_mat_view(all, off, 0, D->rows[i], D_COLS);
        fs_mat *c = NULL;
        double tr = 0.0;
        D->x[i + 1] = fs_mat_dup(&blk);
        if (D->x[i + 1] == NULL || fs_mat_mul('T', 'N', &blk, &blk, &c, &err) != 0) {
            die("split", &err);
        }
        fs_mat_scale(c, 1.0 / (double)D->rows[i]);
        if (fs_mat_max_abs(c) > D->max_entry) {
            D->max_entry = fs_mat_max_abs(c);
        }
        for (size_t j = 0; j < D_COLS; j++) {
            tr += FS_MAT_AT(c, j, j);
        }
        if (tr > D->bound) {
            D->bound = tr;
        }
        fs_mat_free(c);
        off += D->rows[i];
    }
    so.method = FS_TOPK_THIN;
    so.want_u = 0;
    if (fs_svd_topk(all, RANK + 1, &so, &sv, &err) != 0) {
        die("svd", &err);
    }
    D->ref = fs_mat_new(D_COLS, RANK);
    {
        fs_mat vk = fs_mat_view(sv.v, 0, 0, D_COLS, RANK);
        if (fs_mat_copy(D->ref, &vk, &err) != 0) {
            die("copy", &err);
        }
    }
    for (int j = 0; j <= RANK; j++) {
        D->lam[j] = sv.s[j] * sv.s[j] / N_ROWS;
    }
    fs_svd_clear(&sv);
    fs_mat_free(all);
    fs_mat_free(v);
    fs_prg_free(prg);
}

static void free_data(struct data *D)
{
    for (int i = 1; i <= N_PARTIES; i++) {
        fs_mat_free(D->x[i]);
    }
    fs_mat_free(D->ref);
}

struct outcome {
    uint32_t syncs;
    double dist;
    double sin_theta;
    uint32_t reach; /* first sync within 1% of the final error */
    double eps;
    double seconds;
    int ok;
};

/* One job, every party in process; secure sums computed directly. */
static struct outcome run(const struct data *D, const struct fs_fedpower_config *cfg)
{
    struct fs_err err = {0};
    struct outcome o = {0, INFINITY, INFINITY, 0, INFINITY, 0.0, 0};
    fs_fedpower_party *p[N_PARTIES + 1] = {0};
    fs_fedpower_server *s = NULL;
    struct fs_fedpower_result res = {0};
    uint64_t *acc = NULL;
    uint32_t ids[N_PARTIES];
    double t0 = now();

    for (uint32_t i = 0; i < N_PARTIES; i++) {
        ids[i] = i + 1;
    }
    if (fs_fedpower_server_new(cfg, D->rows, &s, &err) != 0 ||
        fs_fedpower_server_set_reference(s, D->ref, &err) != 0) {
        die("server", &err);
    }
    for (uint32_t i = 1; i <= N_PARTIES; i++) {
        if (fs_fedpower_party_new(cfg, D->rows, i, D->x[i], NULL, &p[i], &err) != 0) {
            die("party", &err);
        }
        if (cfg->alg == FS_FEDPOWER_UTILITY) {
            size_t n = 0;
            const uint8_t *pk = fs_fedpower_server_exchange_key(s, &n);
            if (fs_fedpower_party_set_exchange_key(p[i], pk, n, &err) != 0) {
                die("key", &err);
            }
        }
    }
    acc = malloc((size_t)D_COLS * RANK * sizeof *acc);
    while (fs_fedpower_server_phase(s) != FS_FEDPOWER_DONE) {
        uint32_t iter = 0;
        const fs_mat *z = fs_fedpower_server_broadcast(s, &iter);
        size_t len = fs_fedpower_server_ring_len(s);
        memset(acc, 0, (size_t)D_COLS * RANK * sizeof *acc);
        for (uint32_t i = 1; i <= N_PARTIES; i++) {
            if (fs_fedpower_party_receive(p[i], z, iter, &err) != 0) {
                die("receive", &err);
            }
            if (cfg->alg == FS_FEDPOWER_PLAIN) {
                double zmax = 0.0;
                const fs_mat *y = fs_fedpower_party_plain_upload(p[i], &zmax);
                if (fs_fedpower_server_add_plain(s, i, y, zmax, &err) != 0) {
                    die("add_plain", &err);
                }
            } else {
                size_t ln = 0;
                const uint64_t *ring = fs_fedpower_party_ring_upload(p[i], &ln);
                for (size_t w = 0; w < ln; w++) {
                    acc[w] += ring[w];
                }
            }
        }
        if (cfg->alg == FS_FEDPOWER_PLAIN) {
            if (fs_fedpower_server_close_plain(s, &err) != 0) {
                die("close_plain", &err);
            }
            continue;
        }
        if (fs_fedpower_server_add_sum(s, acc, len, ids, N_PARTIES, &err) != 0) {
            die("add_sum", &err);
        }
        if (fs_fedpower_server_phase(s) == FS_FEDPOWER_EXCHANGE) {
            size_t cs = fs_fedpower_server_selector_size(s);
            size_t rs = fs_fedpower_server_response_size(s);
            uint8_t *sel = malloc(cs), *resp = malloc(rs);
            for (uint32_t i = 1; i <= N_PARTIES; i++) {
                if (fs_fedpower_server_selector(s, i, sel, cs, &err) != 0 ||
                    fs_fedpower_party_exchange(p[i], sel, cs, resp, rs, &err) != 0 ||
                    fs_fedpower_server_add_response(s, i, resp, rs, &err) != 0) {
                    die("exchange", &err);
                }
            }
            if (fs_fedpower_server_close_exchange(s, &err) != 0) {
                die("close_exchange", &err);
            }
            free(sel);
            free(resp);
        }
    }
    if (fs_fedpower_server_result(s, &res, &err) != 0) {
        die("result", &err);
    }
    if (res.z != NULL &&
        fs_fedpower_subspace_dist(D->ref, res.z, &o.dist, &o.sin_theta, &err) != 0) {
        die("dist", &err);
    }
    for (uint32_t q = 0; q < res.syncs; q++) {
        if (res.error[q] <= 1.01 * res.error[res.syncs - 1]) {
            o.reach = q + 1;
            break;
        }
    }
    o.syncs = res.syncs;
    o.eps = res.privacy.eps_total;
    o.seconds = now() - t0;
    o.ok = 1;
    fs_fedpower_result_clear(&res);
    free(acc);
    for (uint32_t i = 1; i <= N_PARTIES; i++) {
        fs_fedpower_party_free(p[i]);
    }
    fs_fedpower_server_free(s);
    return o;
}

static void cfg_for(struct fs_fedpower_config *c, enum fs_fedpower_alg alg, const struct data *D)
{
    fs_fedpower_config_default(c, alg);
    c->parties = N_PARTIES;
    c->threshold = N_PARTIES;
    c->d = D_COLS;
    c->r = RANK;
    c->k = RANK;
    c->iterations = 92;
    c->sync_every = alg == FS_FEDPOWER_DPPPM ? 1 : 4;
    c->sigma = 0.1;
    c->sigma_server = alg == FS_FEDPOWER_PLAIN ? 0.1 : 0.0;
    c->value_bound = D->bound;
    c->paillier_bits = 1024;
    c->allow_weak_privacy = 1;
    c->eigenvalues = 0;
    c->m_hat = D->max_entry; /* a bound that clips nothing: the comparison is about noise */
    c->z_hat = 0.2;
    memset(c->z0_seed, 0x42, sizeof c->z0_seed);
}

struct row {
    const char *name;
    struct outcome o;
};

static void compare(const char *title, int planted)
{
    struct data D;
    struct fs_fedpower_config c;
    struct row rows[10];
    int n = 0;

    memset(&D, 0, sizeof D);
    make_data(&D, planted);
    printf("\n-- %s: lambda_10 = %.4f, lambda_11 = %.4f (ratio %.4f); max entry of M'_i %.3f\n",
           title, D.lam[RANK - 1], D.lam[RANK], D.lam[RANK] / D.lam[RANK - 1], D.max_entry);

    cfg_for(&c, FS_FEDPOWER_PLAIN, &D);
    c.sigma = 0.0;
    c.sigma_server = 0.0;
    rows[n].name = "noise-free power method (p=4)";
    rows[n++].o = run(&D, &c);
    cfg_for(&c, FS_FEDPOWER_PLAIN, &D);
    rows[n].name = "fedpower (Alg. 1, align global)";
    rows[n++].o = run(&D, &c);
    c.align = FS_FEDPOWER_ALIGN_CLIENT1;
    rows[n].name = "fedpower (Alg. 1, align client1)";
    rows[n++].o = run(&D, &c);
    cfg_for(&c, FS_FEDPOWER_UTILITY, &D);
    rows[n].name = "fedpower-utility (Alg. 2, seed)";
    rows[n++].o = run(&D, &c);
    cfg_for(&c, FS_FEDPOWER_PRIVATE, &D);
    rows[n].name = "fedpower-private (Alg. 3)";
    rows[n++].o = run(&D, &c);
    c.sync_every = 1;
    rows[n].name = "fedpower-private (Alg. 3, p=1)";
    rows[n++].o = run(&D, &c);
    cfg_for(&c, FS_FEDPOWER_DPPPM, &D);
    rows[n].name = "dp-ppm (sigma 0.1, p=1)";
    rows[n++].o = run(&D, &c);
    cfg_for(&c, FS_FEDPOWER_DPPPM, &D);
    c.calib = FS_FEDPOWER_SIGMA_FROM_EPS;
    c.eps = 1.0;
    c.delta = 1e-5;
    c.allow_weak_privacy = 0;
    rows[n].name = "dp-ppm (eps 1, delta 1e-5)";
    rows[n++].o = run(&D, &c);

    printf("  %-34s %12s %10s %14s %12s %8s\n", "algorithm", "proj. dist", "sin theta",
           "1% of final at", "total eps", "time");
    for (int i = 0; i < n; i++) {
        printf("  %-34s %12.4e %10.4e %9u/%-4u %12.4g %7.1fs\n", rows[i].name, rows[i].o.dist,
               rows[i].o.sin_theta, rows[i].o.reach, rows[i].o.syncs, rows[i].o.eps,
               rows[i].o.seconds);
    }
    {
        double f = rows[1].o.dist, u = rows[3].o.dist, pr = rows[4].o.dist, p1 = rows[5].o.dist;
        printf("  ordering at p = 4 (the paper: utility < private < fedpower): %s\n",
               (u < pr && pr < f)  ? "utility < private < fedpower, as the paper"
               : (u < f && f < pr) ? "utility < fedpower < private"
               : (u < f && pr < f) ? "both enhanced schemes beat fedpower"
                                   : "other");
        printf("  fedpower / utility %.2f, fedpower / private %.2f, fedpower / private(p=1) "
               "%.2f\n",
               f / u, f / pr, f / p1);
    }
    free_data(&D);
}

/* The exchange at 3072 bits: per-ciphertext and per-round costs. */
static void exchange_costs(void)
{
    struct fs_err err = {0};
    const uint32_t n = 10;
    const size_t len = 1000; /* d r = 100 x 10 */
    struct fs_noisex_params ps = {FS_NOISEX_SEED, n, 0, 0};
    struct fs_noisex_params pe = {FS_NOISEX_ELEMENTWISE, n, len, 48};
    fs_noisex_server *ss = NULL, *se = NULL;
    fs_noisex_client *cs = NULL, *ce = NULL;
    uint32_t ids[10];
    int64_t *noise = malloc(len * sizeof *noise);
    uint8_t seed[32];
    struct fs_noisex_result res;
    double t0, t_keygen, t_sel, t_seed_resp, t_seed_fin, t_el_resp, t_el_fin;
    size_t ctsz, g;

    printf("\n-- noise exchange at 3072 bits (%u parties, %zu noise values per party)\n", n, len);
    for (uint32_t i = 0; i < n; i++) {
        ids[i] = i + 1;
    }
    if (fs_dgauss_sample(1048576.0, noise, len, &err) != 0) {
        die("noise", &err);
    }
    if (fs_rand_bytes(seed, sizeof seed, &err) != 0) {
        die("rand", &err);
    }
    t0 = now();
    if (fs_noisex_server_new(&ps, 3072, &ss, &err) != 0) {
        die("server", &err);
    }
    t_keygen = now() - t0;
    if (fs_noisex_server_new(&pe, 3072, &se, &err) != 0) {
        die("server", &err);
    }
    {
        size_t pkl = fs_noisex_server_pk_size(ss);
        uint8_t *pk = malloc(pkl);
        if (fs_noisex_server_pk_export(ss, pk, pkl, &err) != 0 ||
            fs_noisex_client_new(&ps, pk, pkl, &cs, &err) != 0) {
            die("client", &err);
        }
        if (fs_noisex_server_pk_export(se, pk, pkl, &err) != 0 ||
            fs_noisex_client_new(&pe, pk, pkl, &ce, &err) != 0) {
            die("client", &err);
        }
        free(pk);
    }
    ctsz = fs_noisex_server_ct_size(ss);
    {
        uint8_t *sel = malloc(ctsz);
        uint8_t *r1 = malloc(fs_noisex_server_response_size(ss));
        uint8_t *r2 = malloc(fs_noisex_server_response_size(se));
        t0 = now();
        if (fs_noisex_server_begin(ss, 0, ids, n, &err) != 0) {
            die("begin", &err);
        }
        t_sel = (now() - t0) / n;
        t0 = now();
        for (uint32_t i = 1; i <= n; i++) {
            if (fs_noisex_server_selector(ss, i, sel, ctsz, &err) != 0 ||
                fs_noisex_client_respond_seed(cs, sel, ctsz, seed, r1, ctsz, &err) != 0 ||
                fs_noisex_server_add_response(ss, i, r1, ctsz, &err) != 0) {
                die("seed round", &err);
            }
        }
        t_seed_resp = (now() - t0) / n;
        t0 = now();
        if (fs_noisex_server_finish(ss, &res, &err) != 0) {
            die("finish", &err);
        }
        t_seed_fin = now() - t0;
        printf("  seed mode: key generation %.0f ms; selector %.2f ms each; party response "
               "%.2f ms (one ciphertext of %zu bytes); server combine + %u decryption(s) %.1f ms "
               "per round\n",
               1e3 * t_keygen, 1e3 * t_sel, 1e3 * t_seed_resp, ctsz, res.decryptions,
               1e3 * t_seed_fin);
        fs_noisex_result_clear(&res);
        if (fs_noisex_server_begin(se, 0, ids, n, &err) != 0) {
            die("begin", &err);
        }
        g = fs_noisex_server_response_size(se) / ctsz;
        t0 = now();
        for (uint32_t i = 1; i <= n; i++) {
            if (fs_noisex_server_selector(se, i, sel, ctsz, &err) != 0 ||
                fs_noisex_client_respond_noise(ce, sel, ctsz, noise, len, r2, g * ctsz, &err) !=
                    0 ||
                fs_noisex_server_add_response(se, i, r2, g * ctsz, &err) != 0) {
                die("elementwise round", &err);
            }
        }
        t_el_resp = (now() - t0) / n;
        t0 = now();
        if (fs_noisex_server_finish(se, &res, &err) != 0) {
            die("finish", &err);
        }
        t_el_fin = now() - t0;
        printf("  elementwise: %zu values per plaintext, %zu ciphertexts per party (%zu bytes); "
               "party %.1f ms per ciphertext, %.0f ms per round; server %.1f ms per round "
               "(%u decryptions)\n",
               fs_noisex_server_slots(se), g, g * ctsz, 1e3 * t_el_resp / (double)g,
               1e3 * t_el_resp, 1e3 * t_el_fin, res.decryptions);
        printf("  party cost per round, elementwise / seed: %.0fx (communication %zux)\n",
               t_el_resp / t_seed_resp, g);
        {
            /* seed 001's Netflix run: d = 17711, r = 10, 100 parties, 23 syncs */
            double vals = 17711.0 * 10.0;
            double cts = ceil(vals / (double)fs_noisex_server_slots(se));
            printf("  extrapolated to seed 001's Netflix run (17711 x 10 values, 23 syncs): "
                   "elementwise %.0f s per party, seed %.2f s per party; server seed mode "
                   "%.1f s per sync for 100 parties\n",
                   23.0 * cts * t_el_resp / (double)g, 23.0 * t_seed_resp,
                   100.0 * (t_sel + t_seed_fin / (double)n));
        }
        fs_noisex_result_clear(&res);
        free(sel);
        free(r1);
        free(r2);
    }
    fs_noisex_client_free(cs);
    fs_noisex_client_free(ce);
    fs_noisex_server_free(ss);
    fs_noisex_server_free(se);
    free(noise);
}

int main(void)
{
    double t0 = now();

    printf("bench_fedpower: %d x %d, %d parties, r = k = %d, p = 4, T = 92, sigma = sigma' = "
           "0.1\n",
           N_ROWS, D_COLS, N_PARTIES, RANK);
    compare("seed 001's data: integers uniform in 0..5", 0);
    compare("planted spectrum (10, 9.5, ..., 5.5 | 2, ...)", 1);
    exchange_costs();
    printf("\n(total %.1f s)\n", now() - t0);
    return 0;
}
