/* The power-method family driven in one process: 3-5 parties (one of them
 * with CSR data), the real secure-aggregation state machines for the
 * secagg variants (driven as in test_secagg.c), real Paillier keys (1024
 * bits) for the noise exchange, a dropout during a sync.
 *
 * Acceptance checks here: noise-free fedpower with p = 1 is the centralised
 * power method (step by step, and <= 1e-10 from the top-k of a thin SVD);
 * with p = 4 and align global it converges to the same subspace; in
 * fedpower-utility exactly one party's noise (j's) is left in every
 * aggregate; dp-ppm's aggregated noise has variance Delta_l^2 sigma^2. */
#include "crypto/ed25519.h"
#include "crypto/paillier.h"
#include "crypto/prg.h"
#include "crypto/rand.h"
#include "la/csr.h"
#include "la/haar.h"
#include "la/qr.h"
#include "la/svd.h"
#include "proto/fedpower.h"
#include "proto/fedpower_internal.h"
#include "proto/secagg.h"
#include "test.h"
#include "test_secagg_util.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#define NX_BITS 1024u

/* ------------------------------------------------------------------ data */

struct data {
    uint32_t n;
    size_t d;
    size_t k;
    uint64_t *rows;     /* rows[i-1] = s_i */
    fs_mat **x;         /* 1..n dense blocks */
    fs_csr **csr;       /* 1..n, only csr[csr_party] set */
    uint32_t csr_party; /* 0 = none */
    fs_mat *pooled;     /* N x d */
    fs_mat *ref;        /* d x k: top-k right singular vectors of pooled */
    double *eig;        /* k top eigenvalues of X^T X / N */
    double *plam;       /* shared: plam[(i-1) d + j] eigenvalue j of party i's M'_i */
    double bound;       /* max_i trace(M'_i) >= max_i ||M'_i||_2 */
};

static void prg_from_byte(fs_prg **prg, uint8_t b)
{
    struct fs_err err = {0};
    uint8_t key[32];
    memset(key, b, sizeof key);
    CHECK_OK(fs_prg_new(prg, key, NULL, &err), &err);
}

/* shared = 1: every party's M'_i = V diag(lam_i) V^T exactly, lam_i = lam
 * times a per-party factor in [0.85, 1.15] per eigenvalue (same basis, same
 * ordering); shared = 0: rows x = g diag(sqrt(lam)) V^T, g standard normal,
 * and the CSR party's block about 40% zeros. */
static void gen_data(struct data *D, uint32_t n, const uint64_t *rows, size_t d, size_t k,
                     const double *lam, int shared, uint32_t csr_party, uint8_t seed)
{
    struct fs_err err = {0};
    fs_prg *prg = NULL;
    fs_mat *v = NULL;
    uint8_t vseed[32];
    size_t total = 0, off = 0;
    fs_svd sv = {0};
    struct fs_svd_opts so = fs_svd_opts_default();

    memset(D, 0, sizeof *D);
    D->n = n;
    D->d = d;
    D->k = k;
    D->csr_party = csr_party;
    D->rows = malloc(n * sizeof *D->rows);
    D->x = calloc(n + 1, sizeof *D->x);
    D->csr = calloc(n + 1, sizeof *D->csr);
    D->plam = calloc((size_t)n * d, sizeof *D->plam);
    memcpy(D->rows, rows, n * sizeof *rows);
    memset(vseed, seed ^ 0x5a, sizeof vseed);
    CHECK_OK(fs_haar_from_seed(d, vseed, &v, &err), &err);
    prg_from_byte(&prg, seed);
    for (uint32_t i = 1; i <= n; i++) {
        size_t s = rows[i - 1];
        fs_mat *g = fs_mat_new(s, d);
        fs_mat *x = NULL;
        double tr = 0.0;
        CHECK_OK(fs_mat_fill_normal(g, prg, &err), &err);
        if (shared) {
            CHECK(s >= d);
            CHECK_OK(fs_qr_orth(g, NULL, &err), &err); /* U_i: orthonormal columns */
            for (size_t j = 0; j < d; j++) {
                double u = 0.0;
                CHECK_OK(fs_prg_uniform(prg, &u, &err), &err);
                double l = lam[j] * (0.85 + 0.3 * u);
                D->plam[(i - 1) * d + j] = l;
                fs_mat col = fs_mat_view(g, 0, j, s, 1);
                fs_mat_scale(&col, sqrt((double)s * l));
            }
        } else {
            for (size_t j = 0; j < d; j++) {
                fs_mat col = fs_mat_view(g, 0, j, s, 1);
                fs_mat_scale(&col, sqrt(lam[j]));
            }
        }
        CHECK_OK(fs_mat_mul('N', 'T', g, v, &x, &err), &err);
        if (!shared && i == csr_party) {
            for (size_t j = 0; j < d; j++) {
                for (size_t r = 0; r < s; r++) {
                    double u = 0.0;
                    CHECK_OK(fs_prg_uniform(prg, &u, &err), &err);
                    if (u < 0.4) {
                        FS_MAT_AT(x, r, j) = 0.0;
                    }
                }
            }
        }
        for (size_t j = 0; j < d; j++) {
            for (size_t r = 0; r < s; r++) {
                tr += FS_MAT_AT(x, r, j) * FS_MAT_AT(x, r, j);
            }
        }
        tr /= (double)s;
        if (tr > D->bound) {
            D->bound = tr;
        }
        if (i == csr_party) {
            size_t nnz = 0;
            size_t *ri = malloc(s * d * sizeof *ri);
            size_t *ci = malloc(s * d * sizeof *ci);
            double *vv = malloc(s * d * sizeof *vv);
            for (size_t r = 0; r < s; r++) {
                for (size_t j = 0; j < d; j++) {
                    if (FS_MAT_AT(x, r, j) != 0.0) {
                        ri[nnz] = r;
                        ci[nnz] = j;
                        vv[nnz] = FS_MAT_AT(x, r, j);
                        nnz++;
                    }
                }
            }
            CHECK_OK(fs_csr_from_coo(s, d, nnz, ri, ci, vv, &D->csr[i], &err), &err);
            free(ri);
            free(ci);
            free(vv);
        }
        D->x[i] = x;
        total += s;
        fs_mat_free(g);
    }
    D->bound *= 1.01;
    D->pooled = fs_mat_new(total, d);
    for (uint32_t i = 1; i <= n; i++) {
        fs_mat dst = fs_mat_view(D->pooled, off, 0, rows[i - 1], d);
        CHECK_OK(fs_mat_copy(&dst, D->x[i], &err), &err);
        off += rows[i - 1];
    }
    so.method = FS_TOPK_THIN;
    so.want_u = 0;
    CHECK_OK(fs_svd_topk(D->pooled, k, &so, &sv, &err), &err);
    D->ref = sv.v;
    sv.v = NULL;
    D->eig = malloc(k * sizeof *D->eig);
    for (size_t j = 0; j < k; j++) {
        D->eig[j] = sv.s[j] * sv.s[j] / (double)total;
    }
    fs_svd_clear(&sv);
    fs_mat_free(v);
    fs_prg_free(prg);
}

static void data_free(struct data *D)
{
    for (uint32_t i = 1; i <= D->n; i++) {
        fs_mat_free(D->x[i]);
        fs_csr_free(D->csr[i]);
    }
    free(D->x);
    free(D->csr);
    free(D->rows);
    free(D->plam);
    free(D->eig);
    fs_mat_free(D->pooled);
    fs_mat_free(D->ref);
}

static void base_cfg(struct fs_fedpower_config *cfg, enum fs_fedpower_alg alg, const struct data *D,
                     uint32_t r, uint32_t T, uint32_t p)
{
    fs_fedpower_config_default(cfg, alg);
    cfg->parties = D->n;
    cfg->threshold = D->n;
    cfg->d = (uint32_t)D->d;
    cfg->r = r;
    cfg->k = (uint32_t)D->k;
    cfg->iterations = T;
    cfg->sync_every = p;
    cfg->paillier_bits = NX_BITS;
    cfg->value_bound = D->bound;
    memset(cfg->z0_seed, 0x33, sizeof cfg->z0_seed);
}

static fs_fedpower_party *new_party(const struct data *D, const struct fs_fedpower_config *cfg,
                                    uint32_t i)
{
    struct fs_err err = {0};
    fs_fedpower_party *p = NULL;
    const fs_csr *c = D->csr[i];
    CHECK_OK(fs_fedpower_party_new(cfg, D->rows, i, c != NULL ? NULL : D->x[i], c, &p, &err), &err);
    return p;
}

/* ------------------------------------------------------- plain driver */

/* Runs plain fedpower; *qt (may be NULL) receives the final Q_T (the
 * Rayleigh broadcast) as a new matrix. */
static void run_plain(const struct data *D, const struct fs_fedpower_config *cfg,
                      struct fs_fedpower_result *res, fs_mat **qt)
{
    struct fs_err err = {0};
    fs_fedpower_party **p = calloc(D->n + 1, sizeof *p);
    fs_fedpower_server *s = NULL;
    int guard = 0;

    CHECK_OK(fs_fedpower_server_new(cfg, D->rows, &s, &err), &err);
    if (cfg->k == D->k) {
        CHECK_OK(fs_fedpower_server_set_reference(s, D->ref, &err), &err);
    }
    for (uint32_t i = 1; i <= D->n; i++) {
        p[i] = new_party(D, cfg, i);
    }
    while (s != NULL && fs_fedpower_server_phase(s) != FS_FEDPOWER_DONE && guard++ < 100000) {
        uint32_t iter = 0;
        const fs_mat *z = fs_fedpower_server_broadcast(s, &iter);
        if (z == NULL) {
            CHECK(0);
            break;
        }
        if (fs_fedpower_server_phase(s) == FS_FEDPOWER_RAYLEIGH && qt != NULL) {
            *qt = fs_mat_dup(z);
        }
        for (uint32_t i = 1; i <= D->n; i++) {
            double zmax = 0.0;
            const fs_mat *y;
            CHECK_OK(fs_fedpower_party_receive(p[i], z, iter, &err), &err);
            y = fs_fedpower_party_plain_upload(p[i], &zmax);
            CHECK(y != NULL);
            if (y != NULL) {
                CHECK_OK(fs_fedpower_server_add_plain(s, i, y, zmax, &err), &err);
            }
        }
        CHECK_OK(fs_fedpower_server_close_plain(s, &err), &err);
        if (t_case_failed) {
            break;
        }
    }
    CHECK_OK(fs_fedpower_server_result(s, res, &err), &err);
    for (uint32_t i = 1; i <= D->n; i++) {
        fs_fedpower_party_free(p[i]);
    }
    free(p);
    fs_fedpower_server_free(s);
}

/* ------------------------------------------------------- secagg driver */

struct sa {
    struct fs_secagg_config cfg;
    fs_secagg_server *s;
    fs_secagg_client **c; /* 1..n */
};

static void sa_init(struct sa *a, uint32_t n, uint32_t t, uint32_t aggs)
{
    struct fs_err err = {0};

    memset(a, 0, sizeof *a);
    a->cfg.n = n;
    a->cfg.t = t;
    a->cfg.aggregations = aggs;
    a->cfg.chunk_words = 256;
    CHECK_OK(fs_rand_bytes(a->cfg.job_id, 32, &err), &err);
    CHECK_OK(fs_secagg_server_new(&a->cfg, NULL, &a->s, &err), &err);
    a->c = calloc(n + 1, sizeof *a->c);
    for (uint32_t i = 1; i <= n; i++) {
        uint8_t sk[32], pk[32];
        struct fs_secagg_adv adv;
        CHECK_OK(fs_ed25519_keygen(sk, pk, &err), &err);
        CHECK_OK(fs_secagg_client_new(&a->cfg, i, sk, &a->c[i], &err), &err);
        CHECK_OK(fs_secagg_client_advertise(a->c[i], &adv, &err), &err);
        CHECK_OK(fs_secagg_server_add_adv(a->s, &adv, &err), &err);
    }
    CHECK_OK(sa_share_all(a->s, a->c, n, &err), &err);
}

static void sa_free(struct sa *a)
{
    fs_secagg_server_free(a->s);
    for (uint32_t i = 1; i <= a->cfg.n; i++) {
        fs_secagg_client_free(a->c[i]);
    }
    free(a->c);
}

/* Aggregation r of len words; in[i] NULL means party i does not upload
 * (drops). *sum is borrowed from the server; ids/k: U3. */
static int sa_aggregate(struct sa *a, uint32_t r, uint64_t len, const uint64_t *const *in,
                        const uint64_t **sum, uint32_t **ids, size_t *k)
{
    struct fs_err err = {0};
    const uint32_t *set;
    size_t na, n3, n4;
    uint64_t *y = malloc(len * sizeof *y);
    uint64_t cw = a->cfg.chunk_words;

    CHECK_OK(fs_secagg_server_begin(a->s, r, len, &err), &err);
    set = fs_secagg_server_set(a->s, 0, &na);
    for (size_t q = 0; q < na; q++) {
        uint32_t i = set[q];
        if (in[i] == NULL) {
            continue;
        }
        CHECK_OK(fs_secagg_client_begin(a->c[i], r, len, set, na, &err), &err);
        CHECK_OK(fs_secagg_client_mask(a->c[i], 0, in[i], y, (size_t)len, &err), &err);
        for (uint64_t idx = 0; idx * cw < len; idx++) {
            size_t m = (size_t)(len - idx * cw < cw ? len - idx * cw : cw);
            CHECK_OK(fs_secagg_server_add_masked(a->s, i, idx, y + idx * cw, m, &err), &err);
        }
    }
    free(y);
    if (fs_secagg_server_close_masked(a->s, &err) != 0) {
        return -1;
    }
    set = fs_secagg_server_set(a->s, 3, &n3);
    for (size_t q = 0; q < n3; q++) {
        uint8_t sig[64];
        CHECK_OK(fs_secagg_client_consistency(a->c[set[q]], set, n3, sig, &err), &err);
        CHECK_OK(fs_secagg_server_add_consistency(a->s, set[q], sig, &err), &err);
    }
    *ids = malloc(n3 * sizeof **ids);
    memcpy(*ids, set, n3 * sizeof *set);
    *k = n3;
    CHECK_OK(fs_secagg_server_close_consistency(a->s, &err), &err);
    set = fs_secagg_server_set(a->s, 4, &n4);
    for (size_t q = 0; q < n4; q++) {
        struct fs_secagg_reveal *rv = NULL;
        size_t nrv = 0;
        CHECK_OK(fs_secagg_client_unmask(a->c[set[q]], set, fs_secagg_server_sigs(a->s), n4, &rv,
                                         &nrv, &err),
                 &err);
        CHECK_OK(fs_secagg_server_add_reveals(a->s, set[q], rv, nrv, &err), &err);
        free(rv);
    }
    CHECK_OK(fs_secagg_server_finish(a->s, sum, &err), &err);
    return 0;
}

struct run_opts {
    uint32_t drop_party; /* 0: nobody drops */
    uint32_t drop_agg;   /* the aggregation in which it stops */
    int check_one_noise; /* utility: exactly j's noise left in every aggregate */
    int check_clip;      /* private: every broadcast entry within z_hat */
    double noise_ss;     /* sum of squares of (aggregate - clean), dp-ppm: / Delta_l */
    size_t noise_n;
    int collect_noise;
    int early;              /* utility: 1 the exchange opens before the sum and every party answers
                               then; 2 the odd parties answer before the sum, the even ones after */
    fs_mat *qt;             /* the final Q_T (new) */
    uint32_t chosen[64];    /* utility with check_one_noise: j of each sync */
    int64_t j_noise[64][4]; /* and the first values of j's noise in it */
    uint32_t exchanges;     /* utility: noise exchanges opened */
};

/* clean[i] = w_i M'_i Z from the raw data */
static fs_mat *clean_product(const struct data *D, uint32_t i, const fs_mat *z, double w)
{
    struct fs_err err = {0};
    fs_mat *t = NULL, *y = NULL;
    CHECK_OK(fs_mat_mul('N', 'N', D->x[i], z, &t, &err), &err);
    CHECK_OK(fs_mat_mul('T', 'N', D->x[i], t, &y, &err), &err);
    fs_mat_scale(y, w / (double)D->rows[i - 1]);
    fs_mat_free(t);
    return y;
}

static void run_secagg(const struct data *D, const struct fs_fedpower_config *cfg,
                       struct run_opts *o, struct fs_fedpower_result *res)
{
    struct fs_err err = {0};
    uint32_t n = D->n;
    fs_fedpower_party **p = calloc(n + 1, sizeof *p);
    int *alive = calloc(n + 1, sizeof *alive);
    const uint64_t **in = calloc(n + 1, sizeof *in);
    uint64_t **clean_ring = calloc(n + 1, sizeof *clean_ring); /* ring - noise */
    int64_t **noise = calloc(n + 1, sizeof *noise);
    fs_fedpower_server *s = NULL;
    struct fs_fedpower_xpre *xpre = NULL;
    struct sa a;
    uint32_t agg = 0;
    uint64_t total = 0;

    for (uint32_t i = 0; i < n; i++) {
        total += D->rows[i];
    }
    CHECK_OK(fs_fedpower_server_new(cfg, D->rows, &s, &err), &err);
    if (s == NULL) {
        goto out;
    }
    if (cfg->k == D->k) {
        CHECK_OK(fs_fedpower_server_set_reference(s, D->ref, &err), &err);
    }
    for (uint32_t i = 1; i <= n; i++) {
        p[i] = new_party(D, cfg, i);
        alive[i] = 1;
        if (cfg->alg == FS_FEDPOWER_UTILITY) {
            size_t pkl = 0;
            const uint8_t *pk = fs_fedpower_server_exchange_key(s, &pkl);
            CHECK_OK(fs_fedpower_party_set_exchange_key(p[i], pk, pkl, &err), &err);
            CHECK(fs_fedpower_party_exchange_size(p[i]) == fs_fedpower_server_response_size(s));
        }
    }
    sa_init(&a, n, cfg->threshold, fs_fedpower_aggregations(cfg));
    while (fs_fedpower_server_phase(s) != FS_FEDPOWER_DONE && !t_case_failed) {
        uint32_t iter = 0;
        const fs_mat *z = fs_fedpower_server_broadcast(s, &iter);
        size_t len = fs_fedpower_server_ring_len(s);
        const uint64_t *sum = NULL;
        uint32_t *ids = NULL;
        size_t k = 0;
        int rayleigh = fs_fedpower_server_phase(s) == FS_FEDPOWER_RAYLEIGH;
        fs_mat *zc = fs_mat_dup(z);
        CHECK(z != NULL && len > 0);
        if (rayleigh) {
            o->qt = fs_mat_dup(z);
        }
        if (o->check_clip && !rayleigh) {
            CHECK(fs_mat_max_abs(z) <= cfg->z_hat);
        }
        for (uint32_t i = 1; i <= n; i++) {
            size_t ln = 0, nn = 0;
            const uint64_t *ring;
            const int64_t *nz;
            in[i] = NULL;
            if (!alive[i]) {
                continue;
            }
            CHECK_OK(fs_fedpower_party_receive(p[i], z, iter, &err), &err);
            ring = fs_fedpower_party_ring_upload(p[i], &ln);
            CHECK(ring != NULL && ln == len);
            nz = fs_fedpower_debug_party_noise(p[i], &nn);
            free(clean_ring[i]);
            free(noise[i]);
            clean_ring[i] = malloc(len * sizeof **clean_ring);
            noise[i] = calloc(len, sizeof **noise);
            memcpy(clean_ring[i], ring, len * sizeof *ring);
            if (nz != NULL) {
                CHECK(nn == len);
                memcpy(noise[i], nz, len * sizeof *nz);
                for (size_t w = 0; w < len; w++) {
                    clean_ring[i][w] -= (uint64_t)nz[w];
                }
            }
            if (i == o->drop_party && agg == o->drop_agg) {
                alive[i] = 0; /* computed its upload, never sends it */
                continue;
            }
            in[i] = ring;
        }
        if (sa_aggregate(&a, agg, len, in, &sum, &ids, &k) != 0) {
            CHECK(0);
            fs_mat_free(zc);
            break;
        }
        if (o->early && cfg->alg == FS_FEDPOWER_UTILITY && agg >= fs_fedpower_exchanges(cfg) &&
            !rayleigh) {
            /* exchange_once: no exchange after the first sync's */
            CHECK(fs_fedpower_server_open_exchange(s, ids, k, &err) == FS_ESTATE);
        }
        if (o->early && cfg->alg == FS_FEDPOWER_UTILITY && agg < fs_fedpower_exchanges(cfg)) {
            /* masked input closed: U3 is known, the exchange opens before the sum */
            size_t cs = fs_fedpower_server_selector_size(s);
            size_t rs = fs_fedpower_server_response_size(s);
            uint8_t *sel = malloc(cs);
            uint8_t *resp = malloc(rs);
            CHECK(fs_fedpower_server_selector(s, ids[0], sel, cs, &err) == FS_ESTATE);
            CHECK_OK(fs_fedpower_server_open_exchange(s, ids, k, &err), &err);
            o->exchanges++;
            for (size_t q = 0; q < k; q++) {
                if (o->early == 2 && ids[q] % 2 == 0) {
                    continue;
                }
                CHECK_OK(fs_fedpower_server_selector(s, ids[q], sel, cs, &err), &err);
                CHECK_OK(fs_fedpower_party_exchange(p[ids[q]], sel, cs, resp, rs, &err), &err);
                CHECK_OK(fs_fedpower_server_add_response(s, ids[q], resp, rs, &err), &err);
            }
            free(sel);
            free(resp);
            if (o->early == 1) {
                /* everyone answered: the outcome computed ahead, as the service does */
                CHECK_OK(fs_fedpower_server_exchange_precompute(s, &xpre, &err), &err);
            }
        }
        CHECK_OK(fs_fedpower_server_add_sum(s, sum, len, ids, k, &err), &err);
        if (fs_fedpower_server_phase(s) == FS_FEDPOWER_EXCHANGE) {
            o->exchanges += !o->early;
            size_t cs = fs_fedpower_server_selector_size(s);
            size_t rs = fs_fedpower_server_response_size(s);
            uint8_t *sel = malloc(cs);
            uint8_t *resp = malloc(rs);
            for (size_t q = 0; q < k; q++) {
                CHECK_OK(fs_fedpower_server_selector(s, ids[q], sel, cs, &err), &err);
                CHECK_OK(fs_fedpower_party_exchange(p[ids[q]], sel, cs, resp, rs, &err), &err);
                CHECK_OK(fs_fedpower_server_add_response(s, ids[q], resp, rs, &err), &err);
                /* an HTTP retry: the same bytes again, accepted as a repeat */
                CHECK_OK(fs_fedpower_party_exchange(p[ids[q]], sel, cs, resp, rs, &err), &err);
                CHECK_OK(fs_fedpower_server_add_response(s, ids[q], resp, rs, &err), &err);
                sel[cs - 1] ^= 1;
                CHECK(fs_fedpower_party_exchange(p[ids[q]], sel, cs, resp, rs, &err) ==
                      FS_ECONFLICT);
            }
            CHECK_OK(xpre != NULL ? fs_fedpower_server_close_exchange_pre(s, xpre, &err)
                                  : fs_fedpower_server_close_exchange(s, &err),
                     &err);
            fs_fedpower_xpre_free(xpre);
            xpre = NULL;
            free(sel);
            free(resp);
        }
        if (o->check_one_noise && !rayleigh) {
            /* the server's aggregate is sum_U (ring_i - noise_i) + noise_j, exactly */
            const struct fpw_plan *pl = fs_fedpower_debug_server_plan(s);
            const fs_mat *ag = fs_fedpower_debug_server_aggregate(s);
            uint32_t j = fs_fedpower_debug_server_chosen(s);
            uint64_t *ex = calloc(len, sizeof *ex);
            if (agg < 64) {
                o->chosen[agg] = j;
                for (size_t w = 0; w < 4 && w < len; w++) {
                    o->j_noise[agg][w] = noise[j][w];
                }
            }
            fs_mat *dec = fs_mat_new(cfg->d, cfg->r);
            uint64_t s_u = 0;
            int j_in = 0;
            for (size_t q = 0; q < k; q++) {
                s_u += D->rows[ids[q] - 1];
                j_in |= ids[q] == j;
                for (size_t w = 0; w < len; w++) {
                    ex[w] += clean_ring[ids[q]][w];
                }
            }
            CHECK(j_in);
            for (size_t w = 0; w < len; w++) {
                ex[w] += (uint64_t)noise[j][w];
            }
            fs_fixedpt_decode(&pl->fx, ex, dec->data, len);
            fs_mat_scale(dec, (double)pl->total_rows / (double)s_u);
            CHECK(ag != NULL && memcmp(ag->data, dec->data, len * sizeof(double)) == 0);
            free(ex);
            fs_mat_free(dec);
        }
        if (o->collect_noise && !rayleigh) {
            /* end to end: aggregate minus the exact sum_U w_i M'_i Z (renormalised) */
            const fs_mat *ag = fs_fedpower_debug_server_aggregate(s);
            double dl = cfg->alg == FS_FEDPOWER_DPPPM ? fpw_max_row_norm(zc) : 1.0;
            uint64_t s_u = 0;
            fs_mat *cl = fs_mat_new(cfg->d, cfg->r);
            for (size_t q = 0; q < k; q++) {
                s_u += D->rows[ids[q] - 1];
            }
            for (size_t q = 0; q < k; q++) {
                double w = (double)D->rows[ids[q] - 1] / (double)s_u;
                fs_mat *c = clean_product(D, ids[q], zc, w);
                CHECK_OK(fs_mat_axpy(1.0, c, cl, &err), &err);
                fs_mat_free(c);
            }
            for (size_t w = 0; w < len; w++) {
                double e = (ag->data[w] - cl->data[w]) / dl;
                o->noise_ss += e * e;
                o->noise_n++;
            }
            fs_mat_free(cl);
        }
        fs_mat_free(zc);
        free(ids);
        agg++;
    }
    CHECK(agg == fs_fedpower_aggregations(cfg));
    CHECK_OK(fs_fedpower_server_result(s, res, &err), &err);
    sa_free(&a);
out:
    for (uint32_t i = 1; i <= n; i++) {
        fs_fedpower_party_free(p[i]);
        free(clean_ring[i]);
        free(noise[i]);
    }
    free(p);
    free(alive);
    free(in);
    free(clean_ring);
    free(noise);
    fs_fedpower_server_free(s);
    (void)total;
}

static double final_dist(const struct data *D, const struct fs_fedpower_result *res)
{
    struct fs_err err = {0};
    double dist = INFINITY;
    CHECK(res->z != NULL);
    if (res->z != NULL) {
        CHECK_OK(fs_fedpower_subspace_dist(D->ref, res->z, &dist, NULL, &err), &err);
    }
    return dist;
}

/* ------------------------------------------------------------------ tests */

/* Planted spectrum: 100, 80, 64, 50, 40, then a gap to 1 and a slow decay. */
#define LAM_MAX 128
static double LAM[LAM_MAX];

static void lam_init(void)
{
    static const double top[5] = {100, 80, 64, 50, 40};
    for (int j = 0; j < LAM_MAX; j++) {
        LAM[j] = j < 5 ? top[j] : 1.0 / (1.0 + 0.05 * (j - 5));
    }
}

static void test_config(void)
{
    struct fs_err err = {0};
    struct fs_fedpower_config c;
    enum fs_fedpower_alg a;
    enum fs_fedpower_align al;

    fs_fedpower_config_default(&c, FS_FEDPOWER_PLAIN);
    c.parties = 3;
    c.d = 20;
    CHECK_OK(fs_fedpower_config_check(&c, &err), &err);
    CHECK(fs_fedpower_syncs(&c) == 23); /* T = 92, p = 4 */
    CHECK(fs_fedpower_aggregations(&c) == 0);
    c.iterations = 10;
    CHECK(fs_fedpower_syncs(&c) == 3); /* 4, 8, 10 */
    CHECK(fpw_sync_iter(&c, 0) == 4 && fpw_sync_iter(&c, 2) == 10);
    c.k = 11;
    CHECK(fs_fedpower_config_check(&c, &err) == FS_EINVAL);
    c.k = 10;
    c.r = 21;
    CHECK(fs_fedpower_config_check(&c, &err) == FS_EINVAL);
    c.r = 10;
    c.align = FS_FEDPOWER_ALIGN_CLIENT1;
    CHECK_OK(fs_fedpower_config_check(&c, &err), &err);
    c.alg = FS_FEDPOWER_UTILITY;
    c.threshold = 2;
    c.value_bound = 1.0;
    CHECK(fs_fedpower_config_check(&c, &err) == FS_EINVAL); /* client1 needs plain uploads */
    c.align = FS_FEDPOWER_ALIGN_GLOBAL;
    CHECK_OK(fs_fedpower_config_check(&c, &err), &err);
    c.value_bound = 0.0;
    CHECK(fs_fedpower_config_check(&c, &err) == FS_EINVAL);
    fs_fedpower_config_default(&c, FS_FEDPOWER_DPPPM);
    CHECK(c.sync_every == 1);
    c.parties = 3;
    c.threshold = 3;
    c.d = 20;
    c.sigma = 1.0;
    c.value_bound = 1.0;
    CHECK_OK(fs_fedpower_config_check(&c, &err), &err);
    CHECK(fs_fedpower_aggregations(&c) == 93);
    c.sync_every = 2;
    CHECK(fs_fedpower_config_check(&c, &err) == FS_EINVAL);
    fs_fedpower_config_default(&c, FS_FEDPOWER_PRIVATE);
    c.parties = 3;
    c.threshold = 4;
    c.d = 20;
    c.sigma = 1.0;
    c.m_hat = 0.05;
    c.z_hat = 0.2;
    CHECK(fs_fedpower_config_check(&c, &err) == FS_EINVAL); /* t > n */
    c.threshold = 2;
    CHECK_OK(fs_fedpower_config_check(&c, &err), &err); /* value_bound derived */
    c.z_hat = 0.0;
    CHECK(fs_fedpower_config_check(&c, &err) == FS_EINVAL);
    c.z_hat = 0.2;
    c.sigma = 0.0;
    CHECK(fs_fedpower_config_check(&c, &err) == FS_EINVAL); /* a DP job needs noise */
    CHECK_OK(fs_fedpower_alg_parse("dp-ppm", &a, &err), &err);
    CHECK(a == FS_FEDPOWER_DPPPM);
    CHECK_OK(fs_fedpower_alg_parse("fedpower-utility", &a, &err), &err);
    CHECK(a == FS_FEDPOWER_UTILITY);
    CHECK(strcmp(fs_fedpower_alg_name(FS_FEDPOWER_PRIVATE), "fedpower-private") == 0);
    CHECK(fs_fedpower_alg_parse("fedsvd", &a, &err) == FS_EINVAL);
    CHECK_OK(fs_fedpower_align_parse("client1", &al, &err), &err);
    CHECK(al == FS_FEDPOWER_ALIGN_CLIENT1);
    CHECK(fs_fedpower_align_parse("party1", &al, &err) == FS_EINVAL);
}

/* The identity-free projection distance agrees with the explicit d x d one
 * and resolves distances far below 1e-8. */
static void test_subspace_dist(void)
{
    struct fs_err err = {0};
    struct fs_fedpower_config c;
    fs_mat *a = NULL, *b = NULL, *pa = NULL, *pb = NULL;
    double dist = 0.0, sin_t = 0.0, expl = 0.0;

    fs_fedpower_config_default(&c, FS_FEDPOWER_PLAIN);
    c.d = 12;
    c.r = 3;
    memset(c.z0_seed, 1, 32);
    CHECK_OK(fs_fedpower_z0(&c, &a, &err), &err);
    memset(c.z0_seed, 2, 32);
    CHECK_OK(fs_fedpower_z0(&c, &b, &err), &err);
    CHECK_OK(fs_fedpower_subspace_dist(a, b, &dist, &sin_t, &err), &err);
    CHECK_OK(fs_mat_mul('N', 'T', a, a, &pa, &err), &err);
    CHECK_OK(fs_mat_mul('N', 'T', b, b, &pb, &err), &err);
    CHECK_OK(fs_mat_axpy(-1.0, pb, pa, &err), &err);
    expl = fs_mat_norm_fro(pa);
    CHECK_NEAR(dist, expl, 1e-12);
    CHECK(sin_t > 0.0 && sin_t <= 1.0 + 1e-12 && sin_t <= dist);
    /* a tiny rotation: distance ~ sqrt(2) * 1e-12 * ||column||, resolved */
    {
        fs_mat *b2 = fs_mat_dup(a);
        double t = 1e-12;
        for (size_t i = 0; i < b2->rows; i++) {
            double x = FS_MAT_AT(a, i, 0), y = FS_MAT_AT(b, i, 0);
            FS_MAT_AT(b2, i, 0) = x + t * y;
        }
        CHECK_OK(fs_qr_orth(b2, NULL, &err), &err);
        CHECK_OK(fs_fedpower_subspace_dist(a, b2, &dist, NULL, &err), &err);
        CHECK_MSG(dist > 1e-14 && dist < 1e-11, "tiny distance %g", dist);
        CHECK_OK(fs_fedpower_subspace_dist(a, a, &dist, NULL, &err), &err);
        CHECK(dist < 1e-15);
        fs_mat_free(b2);
    }
    fs_mat_free(a);
    fs_mat_free(b);
    fs_mat_free(pa);
    fs_mat_free(pb);
}

/* Seed-mode noise: deterministic per seed, distinct across seeds, and
 * distributed as N_Z(0, sigma^2). */
static void test_seeded_noise(void)
{
    struct fs_err err = {0};
    uint8_t s1[32], s2[32];
    const size_t n = 20000;
    int64_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    double m = 0.0, v = 0.0;
    const double sigma = 3.5;

    CHECK_OK(fs_rand_bytes(s1, 32, &err), &err);
    memcpy(s2, s1, 32);
    CHECK_OK(fs_fedpower_noise_from_seed(s1, sigma, a, n, &err), &err);
    CHECK_OK(fs_fedpower_noise_from_seed(s2, sigma, b, n, &err), &err);
    CHECK(memcmp(a, b, n * sizeof *a) == 0);
    s2[31] ^= 1;
    CHECK_OK(fs_fedpower_noise_from_seed(s2, sigma, b, n, &err), &err);
    CHECK(memcmp(a, b, n * sizeof *a) != 0);
    for (size_t i = 0; i < n; i++) {
        m += (double)a[i];
    }
    m /= (double)n;
    for (size_t i = 0; i < n; i++) {
        v += ((double)a[i] - m) * ((double)a[i] - m);
    }
    v /= (double)(n - 1);
    CHECK_MSG(fabs(m) < 5.0 * sigma / sqrt((double)n), "mean %g", m);
    CHECK_MSG(fabs(v / (sigma * sigma) - 1.0) < 0.05, "variance %g vs %g", v, sigma * sigma);
    /* known answer: the stream is fixed by the seed (AES-256-CTR) and the
     * algorithm; pin the first draws for an all-zero seed */
    {
        uint8_t z[32] = {0};
        int64_t kat[8], kat2[8];
        CHECK_OK(fs_fedpower_noise_from_seed(z, 1e6, kat, 8, &err), &err);
        CHECK_OK(fs_fedpower_noise_from_seed(z, 1e6, kat2, 8, &err), &err);
        CHECK(memcmp(kat, kat2, sizeof kat) == 0);
        for (int i = 0; i < 8; i++) {
            CHECK(llabs(kat[i]) < 6000000);
        }
    }
    CHECK(fs_fedpower_noise_from_seed(s1, 0.0, a, 1, &err) == FS_EINVAL);
    CHECK(fs_fedpower_noise_from_seed(s1, 1e17, a, 1, &err) == FS_EINVAL);
    free(a);
    free(b);
}

/* Noise-free fedpower with p = 1 is the centralised power method: the
 * broadcast after every sync equals (to rounding) the centralised iterate,
 * and after convergence the result is within 1e-10 of the thin SVD's top-k;
 * the eigenvalue estimates match too. 4 parties, party 2 sparse (CSR). */
static void test_plain_p1_exact(void)
{
    struct fs_err err = {0};
    static const uint64_t rows[4] = {40, 55, 70, 35};
    struct data D;
    struct fs_fedpower_config cfg;
    struct fs_fedpower_result res = {0};
    fs_mat *qt = NULL, *zc = NULL, *y = NULL, *t = NULL;
    const uint32_t T = 30;

    gen_data(&D, 4, rows, 25, 5, LAM, 0, 2, 11);
    base_cfg(&cfg, FS_FEDPOWER_PLAIN, &D, 5, T, 1);
    run_plain(&D, &cfg, &res, &qt);
    double dist = final_dist(&D, &res);
    CHECK_MSG(dist <= 1e-10, "projection distance %g", dist);
    printf("  fedpower p=1 noise-free: distance to thin SVD top-5 %.2e\n", dist);
    CHECK(res.syncs == T);
    CHECK(res.error != NULL && res.error[T - 1] <= 1e-10);
    CHECK(res.convergence[T - 1] <= 1e-10 && res.convergence[0] > 0.1);
    CHECK(res.eigenvalues != NULL);
    for (size_t j = 0; res.eigenvalues != NULL && j < D.k; j++) {
        CHECK_MSG(fabs(res.eigenvalues[j] - D.eig[j]) <= 1e-10 * D.eig[0],
                  "eig %zu: %.17g vs %.17g", j, res.eigenvalues[j], D.eig[j]);
    }
    /* the centralised power method from the same Z_0, T steps */
    CHECK_OK(fs_fedpower_z0(&cfg, &zc, &err), &err);
    for (uint32_t it = 0; it < T; it++) {
        CHECK_OK(fs_mat_mul('N', 'N', D.pooled, zc, &t, &err), &err);
        CHECK_OK(fs_mat_mul('T', 'N', D.pooled, t, &y, &err), &err);
        fs_mat_scale(y, 1.0 / (double)D.pooled->rows);
        CHECK_OK(fs_qr_orth(y, NULL, &err), &err);
        fs_mat_free(zc);
        fs_mat_free(t);
        zc = y;
        y = NULL;
        t = NULL;
    }
    CHECK(qt != NULL);
    if (qt != NULL) {
        CHECK_OK(fs_mat_axpy(-1.0, zc, qt, &err), &err);
        CHECK_MSG(fs_mat_max_abs(qt) <= 1e-12, "max |Q_fed - Q_central| = %g", fs_mat_max_abs(qt));
    }
    fs_fedpower_result_clear(&res);
    fs_mat_free(qt);
    fs_mat_free(zc);
    /* the same with every party forming M'_i explicitly */
    cfg.cov = FS_FEDPOWER_COV_EXPLICIT;
    run_plain(&D, &cfg, &res, NULL);
    dist = final_dist(&D, &res);
    CHECK_MSG(dist <= 1e-10, "explicit M'_i: distance %g", dist);
    fs_fedpower_result_clear(&res);
    data_free(&D);
}

/* p = 4, align global: converges to the same subspace. With every party
 * sharing the eigenvectors (heterogeneous eigenvalues) the local iterations
 * have the global subspace as their fixed point: <= 1e-8. With i.i.d.
 * sampled parties local iterations drift towards each party's own
 * subspace; the bias is reported (and bounded loosely). client1 and no
 * alignment run too. */
static void test_plain_p4_global(void)
{
    static const uint64_t rows[4] = {40, 60, 50, 45};
    static const uint64_t rows_iid[3] = {400, 600, 500};
    struct data D;
    struct fs_fedpower_config cfg;
    struct fs_fedpower_result res = {0};
    double dist;

    gen_data(&D, 4, rows, 30, 4, LAM + 1, 1, 3, 21);
    base_cfg(&cfg, FS_FEDPOWER_PLAIN, &D, 6, 40, 4);
    run_plain(&D, &cfg, &res, NULL);
    dist = final_dist(&D, &res);
    CHECK_MSG(dist <= 1e-8, "p=4 shared eigenvectors: distance %g", dist);
    printf("  fedpower p=4 align global, shared eigenvectors: distance %.2e\n", dist);
    for (size_t j = 0; res.eigenvalues != NULL && j < D.k; j++) {
        CHECK(fabs(res.eigenvalues[j] - D.eig[j]) <= 1e-8 * D.eig[0]);
    }
    fs_fedpower_result_clear(&res);
    cfg.align = FS_FEDPOWER_ALIGN_CLIENT1;
    run_plain(&D, &cfg, &res, NULL);
    dist = final_dist(&D, &res);
    printf("  fedpower p=4 align client1, shared eigenvectors: distance %.2e\n", dist);
    CHECK_MSG(dist <= 1e-6, "client1: %g", dist);
    fs_fedpower_result_clear(&res);
    data_free(&D);

    gen_data(&D, 3, rows_iid, 30, 4, LAM + 1, 0, 1, 22);
    base_cfg(&cfg, FS_FEDPOWER_PLAIN, &D, 6, 40, 4);
    run_plain(&D, &cfg, &res, NULL);
    dist = final_dist(&D, &res);
    printf("  fedpower p=4 align global, i.i.d. parties: distance %.2e\n", dist);
    CHECK_MSG(dist <= 0.05, "p=4 iid: distance %g", dist);
    fs_fedpower_result_clear(&res);
    cfg.align = FS_FEDPOWER_ALIGN_NONE;
    run_plain(&D, &cfg, &res, NULL);
    printf("  fedpower p=4 no alignment, i.i.d. parties: distance %.2e\n", final_dist(&D, &res));
    fs_fedpower_result_clear(&res);
    cfg.sync_every = 1;
    run_plain(&D, &cfg, &res, NULL);
    dist = final_dist(&D, &res);
    CHECK_MSG(dist <= 1e-10, "p=1 iid: distance %g", dist);
    fs_fedpower_result_clear(&res);
    data_free(&D);
}

/* fedpower with noise: runs, the noise shows in the error, and a larger
 * sigma gives a larger error. */
static void test_plain_noisy(void)
{
    static const uint64_t rows[3] = {50, 60, 70};
    struct data D;
    struct fs_fedpower_config cfg;
    struct fs_fedpower_result res = {0};
    double d_small, d_big;

    gen_data(&D, 3, rows, 20, 3, LAM + 2, 1, 0, 31);
    base_cfg(&cfg, FS_FEDPOWER_PLAIN, &D, 3, 20, 2);
    cfg.sigma = 1e-3;
    cfg.sigma_server = 1e-3;
    run_plain(&D, &cfg, &res, NULL);
    d_small = final_dist(&D, &res);
    CHECK(res.privacy.formal == 0 && res.privacy.weak == 1 && res.privacy.allowed == 1);
    fs_fedpower_result_clear(&res);
    cfg.sigma = 1.0;
    cfg.sigma_server = 1.0;
    run_plain(&D, &cfg, &res, NULL);
    d_big = final_dist(&D, &res);
    fs_fedpower_result_clear(&res);
    printf("  fedpower noisy: sigma 1e-3 -> %.2e, sigma 1 -> %.2e\n", d_small, d_big);
    CHECK(d_small > 1e-8 && d_small < 1e-2);
    CHECK(d_big > d_small);
    data_free(&D);
}

/* fedpower-utility, seed mode, real secagg + Paillier: after every exchange
 * the aggregate holds exactly one party's noise (j's), bit for bit. */
/* The utility tests' data (4 parties, seed given) and configuration:
 * T = 12, p = 2 (6 syncs), threshold 3, sigma 0.01. */
static void utility_setup(struct data *D, struct fs_fedpower_config *cfg, uint64_t seed)
{
    static const uint64_t rows[4] = {40, 55, 35, 50};

    gen_data(D, 4, rows, 24, 4, LAM + 1, 1, 2, seed);
    base_cfg(cfg, FS_FEDPOWER_UTILITY, D, 4, 12, 2);
    cfg->threshold = 3;
    cfg->sigma = 0.01;
}

/* Every sync of res summed all 4 parties and kept exactly one noise. */
static void check_one_left(const struct fs_fedpower_result *res, const char *what, int early)
{
    for (uint32_t q = 0; q < res->syncs; q++) {
        CHECK_MSG(res->survivors[q] == 4 && res->noises_left[q] == 1,
                  "%s, early %d, sync %u: %u noises left", what, early, q, res->noises_left[q]);
    }
}

static void test_utility_seed(void)
{
    struct data D;
    struct fs_fedpower_config cfg;
    struct fs_fedpower_result res = {0};
    struct run_opts o;
    double dist;

    utility_setup(&D, &cfg, 41);
    memset(&o, 0, sizeof o);
    o.check_one_noise = 1;
    run_secagg(&D, &cfg, &o, &res);
    dist = final_dist(&D, &res);
    printf("  utility (seed), sigma 0.01: distance %.2e\n", dist);
    CHECK(dist < 0.05);
    check_one_left(&res, "seed", 0);
    CHECK(res.eigenvalues != NULL);
    fs_fedpower_result_clear(&res);
    fs_mat_free(o.qt);
    /* the exchange opened before each sum (every answer early, or half of
     * them): still exactly j's noise left, one noise per sync */
    for (int e = 1; e <= 2 && !t_case_failed; e++) {
        memset(&o, 0, sizeof o);
        o.check_one_noise = 1;
        o.early = e;
        run_secagg(&D, &cfg, &o, &res);
        CHECK(final_dist(&D, &res) < 0.05);
        check_one_left(&res, "seed", e);
        fs_fedpower_result_clear(&res);
        fs_mat_free(o.qt);
    }
    /* noise-free through the whole machinery (fixed point, secagg, an
     * exchange of zero noise): still the power method to 1e-10 */
    cfg.sigma = 0.0;
    cfg.sync_every = 1;
    cfg.iterations = 20;
    memset(&o, 0, sizeof o);
    run_secagg(&D, &cfg, &o, &res);
    dist = final_dist(&D, &res);
    CHECK_MSG(dist <= 1e-10, "utility noise-free: %g", dist);
    fs_fedpower_result_clear(&res);
    fs_mat_free(o.qt);
    data_free(&D);
}

/* fedpower-utility, ot mode (seeds by oblivious transfer, no Paillier key):
 * as seed mode, exactly j's noise left after every exchange, bit for bit,
 * also with the exchange opened before the sum. */
static void test_utility_ot(void)
{
    struct data D;
    struct fs_fedpower_config cfg;
    struct fs_fedpower_result res = {0};
    struct run_opts o;

    utility_setup(&D, &cfg, 43);
    cfg.noise_exchange = FS_NOISEX_OT;
    cfg.paillier_bits = 0; /* not used by ot */
    for (int e = 0; e <= 1 && !t_case_failed; e++) {
        memset(&o, 0, sizeof o);
        o.check_one_noise = 1;
        o.early = e;
        run_secagg(&D, &cfg, &o, &res);
        CHECK(res.syncs == 6 && final_dist(&D, &res) < 0.05);
        check_one_left(&res, "ot", e);
        fs_fedpower_result_clear(&res);
        fs_mat_free(o.qt);
    }
    data_free(&D);
}

/* exchange_once (seed and ot): one exchange, in the first sync, moves the
 * master seeds; every later sync removes the noise derived from them. Each
 * aggregate keeps exactly j's noise (bit for bit: the server derives what
 * the party drew), j is the same at every sync, j's noise is fresh at every
 * sync, and no exchange opens after the first. */
static void test_utility_once(void)
{
    struct data D;
    struct fs_fedpower_config cfg;
    struct fs_fedpower_result res = {0};
    struct run_opts o;

    utility_setup(&D, &cfg, 47);
    cfg.exchange_once = 1;
    CHECK(fs_fedpower_exchanges(&cfg) == 1 && fs_fedpower_syncs(&cfg) == 6);
    for (int mode = 0; mode < 2 && !t_case_failed; mode++) {
        cfg.noise_exchange = mode == 0 ? FS_NOISEX_SEED : FS_NOISEX_OT;
        for (int e = 0; e <= 2 && !t_case_failed; e++) {
            memset(&o, 0, sizeof o);
            o.check_one_noise = 1;
            o.early = e;
            run_secagg(&D, &cfg, &o, &res);
            CHECK_MSG(o.exchanges == 1, "%s, early %d: %u exchanges",
                      fs_noisex_mode_name(cfg.noise_exchange), e, o.exchanges);
            CHECK(res.syncs == 6 && final_dist(&D, &res) < 0.05);
            check_one_left(&res, "once", e);
            for (uint32_t q = 0; q < res.syncs; q++) {
                CHECK(o.chosen[q] >= 1 && o.chosen[q] <= 4 && o.chosen[q] == o.chosen[0]);
                if (q > 0) {
                    CHECK_MSG(memcmp(o.j_noise[q], o.j_noise[q - 1], sizeof o.j_noise[q]) != 0,
                              "sync %u: j's noise repeats the previous sync's", q);
                }
            }
            fs_fedpower_result_clear(&res);
            fs_mat_free(o.qt);
        }
    }
    /* only with a seeded exchange of fedpower-utility */
    {
        struct fs_err err = {0};
        cfg.noise_exchange = FS_NOISEX_ELEMENTWISE;
        CHECK(fs_fedpower_config_check(&cfg, &err) == FS_EINVAL);
        base_cfg(&cfg, FS_FEDPOWER_PRIVATE, &D, 4, 12, 2);
        cfg.exchange_once = 1;
        CHECK(fs_fedpower_config_check(&cfg, &err) == FS_EINVAL);
    }
    data_free(&D);
}

/* fedpower-utility, elementwise (the paper's form): the same exactness. */
static void test_utility_elementwise(void)
{
    static const uint64_t rows[3] = {20, 25, 30};
    struct data D;
    struct fs_fedpower_config cfg;
    struct fs_fedpower_result res = {0};
    struct run_opts o;

    gen_data(&D, 3, rows, 12, 4, LAM + 1, 1, 3, 51);
    base_cfg(&cfg, FS_FEDPOWER_UTILITY, &D, 4, 6, 2);
    cfg.threshold = 2;
    cfg.sigma = 0.01;
    cfg.noise_exchange = FS_NOISEX_ELEMENTWISE;
    memset(&o, 0, sizeof o);
    o.check_one_noise = 1;
    run_secagg(&D, &cfg, &o, &res);
    CHECK(res.syncs == 3);
    for (uint32_t q = 0; q < res.syncs; q++) {
        CHECK(res.noises_left[q] == 1);
    }
    CHECK(final_dist(&D, &res) < 0.1);
    fs_fedpower_result_clear(&res);
    fs_mat_free(o.qt);
    data_free(&D);
}

/* A party drops during a sync: secure aggregation survives (t = 3 of 5),
 * the weights renormalise over the survivors. With shared eigenvectors the
 * subspace is unchanged, and the eigenvalues become the survivors'
 * row-weighted average, which checks the renormalisation exactly. */
static void test_dropout_renormalises(void)
{
    static const uint64_t rows[5] = {30, 45, 60, 35, 50};
    struct data D;
    struct fs_fedpower_config cfg;
    struct fs_fedpower_result res = {0};
    struct run_opts o;
    double dist;

    gen_data(&D, 5, rows, 20, 4, LAM + 1, 1, 4, 61);
    base_cfg(&cfg, FS_FEDPOWER_UTILITY, &D, 4, 12, 1);
    cfg.threshold = 3;
    cfg.sigma = 0.0;
    memset(&o, 0, sizeof o);
    o.drop_party = 3;
    o.drop_agg = 2;
    run_secagg(&D, &cfg, &o, &res);
    CHECK(res.survivors[0] == 5 && res.survivors[1] == 5);
    for (uint32_t q = 2; q < res.syncs; q++) {
        CHECK(res.survivors[q] == 4);
    }
    dist = final_dist(&D, &res);
    CHECK_MSG(dist <= 1e-10, "after dropout: %g", dist);
    {
        /* the survivors' row-weighted eigenvalues, sorted */
        double ex[8] = {0};
        for (size_t j = 0; j < D.k; j++) {
            double num = 0.0, den = 0.0;
            for (uint32_t i = 1; i <= 5; i++) {
                if (i != 3) {
                    num += (double)rows[i - 1] * D.plam[(i - 1) * D.d + j];
                    den += (double)rows[i - 1];
                }
            }
            ex[j] = num / den;
        }
        for (size_t a = 0; a < D.k; a++) {
            for (size_t b = a + 1; b < D.k; b++) {
                if (ex[b] > ex[a]) {
                    double t = ex[a];
                    ex[a] = ex[b];
                    ex[b] = t;
                }
            }
        }
        for (size_t j = 0; res.eigenvalues != NULL && j < D.k; j++) {
            CHECK_MSG(fabs(res.eigenvalues[j] - ex[j]) <= 1e-9 * ex[j], "eig %zu: %.15g vs %.15g",
                      j, res.eigenvalues[j], ex[j]);
        }
    }
    fs_fedpower_result_clear(&res);
    fs_mat_free(o.qt);

    /* private with a dropout in a sync, p = 2 */
    base_cfg(&cfg, FS_FEDPOWER_PRIVATE, &D, 4, 8, 2);
    cfg.threshold = 3;
    cfg.value_bound = 0.0;
    cfg.m_hat = 200.0;
    cfg.z_hat = 1.0;
    cfg.sigma = 1e-3;
    cfg.allow_weak_privacy = 1;
    memset(&o, 0, sizeof o);
    o.drop_party = 5;
    o.drop_agg = 1;
    run_secagg(&D, &cfg, &o, &res);
    CHECK(res.syncs == 4 && res.survivors[0] == 5 && res.survivors[1] == 4);
    dist = final_dist(&D, &res);
    printf("  private with a dropout, sigma 1e-3: distance %.2e\n", dist);
    CHECK(dist < 0.05);
    fs_fedpower_result_clear(&res);
    fs_mat_free(o.qt);
    data_free(&D);
}

/* The top-k eigenvectors of sum_i w_i clip(M'_i, m_hat): what fedpower-private
 * computes when its entry clipping is active. */
static fs_mat *clipped_reference(const struct data *D, double m_hat)
{
    struct fs_err err = {0};
    fs_mat *acc = fs_mat_new(D->d, D->d);
    fs_svd sv = {0};
    struct fs_svd_opts so = fs_svd_opts_default();
    double total = 0.0;
    fs_mat *ref;

    for (uint32_t i = 1; i <= D->n; i++) {
        total += (double)D->rows[i - 1];
    }
    for (uint32_t i = 1; i <= D->n; i++) {
        fs_mat *c = NULL;
        CHECK_OK(fs_mat_mul('T', 'N', D->x[i], D->x[i], &c, &err), &err);
        fs_mat_scale(c, 1.0 / (double)D->rows[i - 1]);
        fpw_clip(c, m_hat);
        CHECK_OK(fs_mat_axpy((double)D->rows[i - 1] / total, c, acc, &err), &err);
        fs_mat_free(c);
    }
    so.method = FS_TOPK_THIN;
    so.want_u = 0;
    CHECK_OK(fs_svd_topk(acc, D->k, &so, &sv, &err), &err);
    ref = sv.v;
    sv.v = NULL;
    fs_svd_clear(&sv);
    fs_mat_free(acc);
    return ref;
}

/* fedpower-private: noise every iteration, entries of M'_i clipped to m_hat
 * (explicit M'_i; reject mode names the entry instead), Z clipped to z_hat
 * (the broadcast never exceeds it), weak jobs refused. */
static void test_private(void)
{
    struct fs_err err = {0};
    static const uint64_t rows[4] = {40, 30, 50, 45};
    struct data D;
    struct fs_fedpower_config cfg;
    struct fs_fedpower_result res = {0};
    struct run_opts o;
    fs_fedpower_party *p = NULL;
    fs_mat *cref = NULL;
    double dist = 0.0, dist_orig = 0.0;

    gen_data(&D, 4, rows, 16, 5, LAM, 1, 1, 71);
    base_cfg(&cfg, FS_FEDPOWER_PRIVATE, &D, 5, 12, 3);
    cfg.threshold = 3;
    cfg.value_bound = 0.0;
    cfg.m_hat = 15.0; /* below the largest diagonal entries of M'_i: they get clipped */
    cfg.z_hat = 1.0;  /* no Z clipping in this run: entries of orthonormal columns are <= 1 */
    cfg.sigma = 1e-5;
    cfg.allow_weak_privacy = 1;
    /* reject mode refuses, naming an entry */
    cfg.m_hat_mode = FS_FEDPOWER_MHAT_REJECT;
    CHECK(fs_fedpower_party_new(&cfg, D.rows, 2, D.x[2], NULL, &p, &err) == FS_EINVAL);
    CHECK(strstr(err.msg, "entry (") != NULL && strstr(err.msg, "m_hat") != NULL);
    CHECK(p == NULL);
    cfg.m_hat_mode = FS_FEDPOWER_MHAT_CLIP;
    CHECK_OK(fs_fedpower_party_new(&cfg, D.rows, 2, D.x[2], NULL, &p, &err), &err);
    CHECK(p != NULL && fs_fedpower_party_explicit_cov(p));
    fs_fedpower_party_free(p);
    p = NULL;
    /* p = 1: exactly the power method on sum_i w_i clip(M'_i) (with p > 1 the
     * clipped local matrices no longer share eigenvectors and local steps drift) */
    cfg.sync_every = 1;
    cfg.iterations = 30;
    memset(&o, 0, sizeof o);
    run_secagg(&D, &cfg, &o, &res);
    CHECK(res.syncs == 30);
    CHECK(res.privacy.formal == 1 && res.privacy.releases == 31);
    cref = clipped_reference(&D, cfg.m_hat);
    if (res.z != NULL) {
        CHECK_OK(fs_fedpower_subspace_dist(cref, res.z, &dist, NULL, &err), &err);
        CHECK_OK(fs_fedpower_subspace_dist(D.ref, res.z, &dist_orig, NULL, &err), &err);
    }
    printf("  private (M'_i clipped to m_hat, sigma 1e-5): distance %.2e to the clipped "
           "aggregate's top-5 (%.2e to the unclipped one)\n",
           dist, dist_orig);
    CHECK_MSG(dist < 1e-3, "private vs clipped reference: %g", dist);
    fs_fedpower_result_clear(&res);
    fs_mat_free(o.qt);
    /* Z clipped to z_hat: every broadcast within it; runs through */
    cfg.z_hat = 0.25;
    cfg.sigma = 1e-3;
    cfg.sync_every = 3;
    cfg.iterations = 12;
    memset(&o, 0, sizeof o);
    o.check_clip = 1;
    run_secagg(&D, &cfg, &o, &res);
    CHECK(res.syncs == 4 && res.z != NULL && res.eigenvalues != NULL);
    if (res.z != NULL) {
        CHECK_OK(fs_fedpower_subspace_dist(cref, res.z, &dist, NULL, &err), &err);
    }
    printf("  private (z_hat 0.25 as well, sigma 1e-3): distance %.2e, eps %.3g (refused "
           "without allow_weak_privacy)\n",
           dist, res.privacy.eps_total);
    fs_fedpower_result_clear(&res);
    fs_mat_free(o.qt);
    fs_mat_free(cref);
    /* a weak job is refused without allow_weak_privacy, by server and party */
    cfg.allow_weak_privacy = 0;
    {
        fs_fedpower_server *s = NULL;
        CHECK(fs_fedpower_server_new(&cfg, D.rows, &s, &err) == FS_EINVAL);
        CHECK(strstr(err.msg, "allow_weak_privacy") != NULL);
        CHECK(fs_fedpower_party_new(&cfg, D.rows, 1, D.x[1], NULL, &p, &err) == FS_EINVAL);
    }
    data_free(&D);
}

/* dp-ppm at eps = 1, delta = 1e-5: the accountant reports a total eps <= 1,
 * and the aggregated noise (server aggregate minus the exact sum, per
 * iteration divided by Delta_l) has variance sigma^2. */
static void test_dppm_variance(void)
{
    static const uint64_t rows[3] = {70, 80, 90};
    struct data D;
    struct fs_fedpower_config cfg;
    struct fs_fedpower_result res = {0};
    struct run_opts o;
    double var, s2;

    gen_data(&D, 3, rows, 60, 5, LAM, 1, 2, 81);
    base_cfg(&cfg, FS_FEDPOWER_DPPPM, &D, 5, 10, 1);
    cfg.threshold = 3;
    cfg.calib = FS_FEDPOWER_SIGMA_FROM_EPS;
    cfg.eps = 1.0;
    cfg.delta = 1e-5;
    memset(&o, 0, sizeof o);
    o.collect_noise = 1;
    run_secagg(&D, &cfg, &o, &res);
    CHECK(res.privacy.formal == 1);
    CHECK_MSG(res.privacy.eps_total <= 1.0, "eps_total %g", res.privacy.eps_total);
    CHECK(res.privacy.paper_eps_total <= 1.0);
    CHECK(res.privacy.releases == 11);
    s2 = res.privacy.sigma * res.privacy.sigma;
    CHECK_NEAR(res.privacy.sigma, sqrt(4.0 * 11 * log(1e5)), 1e-9);
    var = o.noise_ss / (double)o.noise_n;
    printf("  dp-ppm eps=1: sigma %.4f, eps_total %.4f (paper's simple conversion %.4f), "
           "empirical noise variance / (Delta_l^2 sigma^2) = %.4f over %zu entries\n",
           res.privacy.sigma, res.privacy.eps_total, res.privacy.paper_eps_total, var / s2,
           o.noise_n);
    CHECK_MSG(fabs(var / s2 - 1.0) < 0.12, "variance ratio %g", var / s2);
    fs_fedpower_result_clear(&res);
    fs_mat_free(o.qt);
    /* the tight calibration spends exactly the budget */
    cfg.dppm_calib = FS_FEDPOWER_DPPPM_ZCDP;
    {
        struct fs_err err = {0};
        struct fs_fedpower_privacy pv;
        CHECK_OK(fs_fedpower_privacy_report(&cfg, D.rows, &pv, &err), &err);
        CHECK(pv.eps_total <= 1.0 && pv.eps_total > 0.999);
        CHECK(pv.sigma < sqrt(4.0 * 11 * log(1e5)));
    }
    data_free(&D);
}

/*
 * fedpower-private: each party adds N_Z noise of w_max sigma / sqrt(t) to its
 * sync upload, so t uploads carry w_max sigma in their sum, which is what the
 * privacy accounting assumes (a per-party sigma / t would leave the sum
 * sqrt(t) times too quiet). End to end with t = n = 3, p = 1, nothing
 * clipped: the server's aggregate minus the exact sum_i w_i M'_i Z, over
 * N = d r T = 40 * 5 * 20 = 4000 entries, has variance (w_max sigma)^2. The
 * standard error of the ratio is sqrt(2 / N) = 2.2%; the tolerance is 5 of
 * them, 11%, far from the 1/3 that sigma / t would give.
 */
static void test_private_noise_variance(void)
{
    static const uint64_t rows[3] = {60, 70, 80};
    struct data D;
    struct fs_fedpower_config cfg;
    struct fs_fedpower_result res = {0};
    struct run_opts o;
    double want, var;

    gen_data(&D, 3, rows, 40, 5, LAM, 1, 1, 93);
    base_cfg(&cfg, FS_FEDPOWER_PRIVATE, &D, 5, 20, 1);
    cfg.threshold = 3;
    cfg.value_bound = 0.0;
    cfg.m_hat = 1e6; /* no entry of M'_i clipped */
    cfg.m_hat_mode = FS_FEDPOWER_MHAT_CLIP;
    cfg.z_hat = 1.0; /* nor of Z (orthonormal columns) */
    cfg.sigma = 1e-2;
    cfg.allow_weak_privacy = 1;
    memset(&o, 0, sizeof o);
    o.collect_noise = 1;
    run_secagg(&D, &cfg, &o, &res);
    CHECK(res.syncs == 20);
    want = (80.0 / 210.0) * cfg.sigma;
    want *= want;
    var = o.noise_n > 0 ? o.noise_ss / (double)o.noise_n : 0.0;
    printf("  private: aggregated noise variance / (w_max sigma)^2 = %.4f over %zu entries\n",
           var / want, o.noise_n);
    CHECK(o.noise_n == 4000);
    CHECK_MSG(fabs(var / want - 1.0) < 5 * sqrt(2.0 / 4000.0), "variance ratio %g", var / want);
    fs_fedpower_result_clear(&res);
    fs_mat_free(o.qt);
    data_free(&D);
}

static void test_bad_inputs(void)
{
    struct fs_err err = {0};
    static const uint64_t rows[3] = {20, 25, 30};
    uint64_t bad_rows[3] = {20, 26, 30};
    struct data D;
    struct fs_fedpower_config cfg;
    fs_fedpower_party *p = NULL;
    fs_fedpower_server *s = NULL;
    fs_mat *z = NULL, *wrong = NULL;
    uint64_t sum[4] = {0};
    uint32_t ids[3] = {1, 2, 3};

    gen_data(&D, 3, rows, 10, 2, LAM, 1, 0, 91);
    base_cfg(&cfg, FS_FEDPOWER_PLAIN, &D, 2, 4, 2);
    CHECK(fs_fedpower_party_new(&cfg, bad_rows, 2, D.x[2], NULL, &p, &err) == FS_EINVAL);
    CHECK(fs_fedpower_party_new(&cfg, D.rows, 4, D.x[2], NULL, &p, &err) == FS_EINVAL);
    CHECK(fs_fedpower_party_new(&cfg, D.rows, 2, NULL, NULL, &p, &err) == FS_EINVAL);
    CHECK_OK(fs_fedpower_party_new(&cfg, D.rows, 2, D.x[2], NULL, &p, &err), &err);
    CHECK_OK(fs_fedpower_server_new(&cfg, D.rows, &s, &err), &err);
    CHECK_OK(fs_fedpower_z0(&cfg, &z, &err), &err);
    CHECK(fs_fedpower_party_receive(p, z, 2, &err) == FS_ESTATE); /* expected 0 */
    wrong = fs_mat_new(10, 3);
    CHECK(fs_fedpower_party_receive(p, wrong, 0, &err) == FS_EINVAL);
    FS_MAT_AT(z, 3, 1) = NAN;
    CHECK(fs_fedpower_party_receive(p, z, 0, &err) == FS_EINVAL);
    CHECK(fs_fedpower_party_plain_upload(p, NULL) == NULL);
    CHECK(fs_fedpower_party_ring_upload(p, NULL) == NULL);
    CHECK(fs_fedpower_party_set_exchange_key(p, (const uint8_t *)"x", 1, &err) == FS_ESTATE);
    CHECK(fs_fedpower_server_add_plain(s, 2, wrong, 0.0, &err) == FS_EINVAL);
    CHECK(fs_fedpower_server_add_plain(s, 5, z, 0.0, &err) == FS_ENOTFOUND);
    CHECK(fs_fedpower_server_add_sum(s, sum, 4, ids, 3, &err) == FS_ESTATE);
    CHECK(fs_fedpower_server_close_plain(s, &err) == FS_ESTATE); /* nothing uploaded */
    {
        fs_mat *y = fs_mat_new(10, 2);
        fs_mat *y2 = fs_mat_new(10, 2);
        FS_MAT_AT(y2, 0, 0) = 1.0;
        CHECK_OK(fs_fedpower_server_add_plain(s, 1, y, 0.5, &err), &err);
        CHECK_OK(fs_fedpower_server_add_plain(s, 1, y, 0.5, &err), &err); /* retry */
        CHECK(fs_fedpower_server_add_plain(s, 1, y2, 0.5, &err) == FS_ECONFLICT);
        fs_mat_free(y);
        fs_mat_free(y2);
    }
    CHECK(fs_fedpower_server_selector(s, 1, (uint8_t *)sum, 8, &err) == FS_ESTATE);
    CHECK(fs_fedpower_server_close_exchange(s, &err) == FS_ESTATE);
    fs_fedpower_server_free(s);
    s = NULL;
    /* a secagg job: wrong lengths and too few parties */
    base_cfg(&cfg, FS_FEDPOWER_PRIVATE, &D, 2, 4, 2);
    cfg.threshold = 3;
    cfg.value_bound = 0.0;
    cfg.m_hat = 1e4;
    cfg.z_hat = 1.0;
    cfg.sigma = 1.0;
    cfg.allow_weak_privacy = 1;
    CHECK_OK(fs_fedpower_server_new(&cfg, D.rows, &s, &err), &err);
    CHECK(fs_fedpower_server_add_sum(s, sum, 4, ids, 3, &err) == FS_EINVAL);
    {
        uint64_t *big = calloc(20, sizeof *big);
        CHECK(fs_fedpower_server_add_sum(s, big, 20, ids, 2, &err) == FS_EINVAL); /* < t */
        uint32_t twice[3] = {1, 1, 2};
        CHECK(fs_fedpower_server_add_sum(s, big, 20, twice, 3, &err) == FS_EINVAL);
        free(big);
    }
    fs_fedpower_server_free(s);
    fs_fedpower_party_free(p);
    fs_fedpower_party_free(NULL);
    fs_fedpower_server_free(NULL);
    fs_fedpower_result_clear(NULL);
    fs_mat_free(z);
    fs_mat_free(wrong);
    data_free(&D);
}

/* ------------------------------------------------- resume: derived randomness */

/* The party's noise, ring upload and exchange response of one sync. */
struct sync_out {
    uint64_t *ring;
    size_t len;
    int64_t *noise;
    size_t nlen;
    uint8_t *resp;
    size_t rlen;
};

static void sync_out_free(struct sync_out *o)
{
    free(o->ring);
    free(o->noise);
    free(o->resp);
    memset(o, 0, sizeof *o);
}

/* one_sync prepares the exchange key on a second thread while the party
 * computes (fs_fedpower_party_exchange_prepare, then _install), as the agent
 * does, instead of fs_fedpower_party_set_exchange_key. */
static int g_key_on_thread;

struct key_job {
    const fs_fedpower_party *p;
    const uint8_t *pk;
    size_t pkl;
    fs_noisex_client *nx;
    int rc;
    struct fs_err err;
};

static void *key_job_main(void *arg)
{
    struct key_job *kj = arg;
    kj->rc = fs_fedpower_party_exchange_prepare(kj->p, kj->pk, kj->pkl, &kj->nx, &kj->err);
    return NULL;
}

/* Party 1 with the given secret (NULL: the CSPRNG), resumed at iter (0:
 * from the start), receives z after iteration iter; with sel it answers the
 * selector too. */
static void one_sync(const struct data *D, const struct fs_fedpower_config *cfg,
                     const uint8_t *secret, uint32_t iter, const fs_mat *z, const uint8_t *pk,
                     size_t pkl, const uint8_t *sel, size_t sel_len, struct sync_out *o)
{
    struct fs_err err = {0};
    fs_fedpower_party *p = new_party(D, cfg, 1);
    const uint64_t *ring;
    const int64_t *nz;

    memset(o, 0, sizeof *o);
    if (secret != NULL) {
        CHECK_OK(fs_fedpower_party_set_secret(p, secret, &err), &err);
    }
    if (iter > 0) {
        CHECK_OK(fs_fedpower_party_resume_at(p, iter, &err), &err);
    }
    struct key_job kj = {p, pk, pkl, NULL, 0, {0}};
    pthread_t th;
    int threaded = 0;

    if (pk != NULL && g_key_on_thread) {
        threaded = pthread_create(&th, NULL, key_job_main, &kj) == 0;
        CHECK(threaded);
    } else if (pk != NULL) {
        CHECK_OK(fs_fedpower_party_set_exchange_key(p, pk, pkl, &err), &err);
    }
    CHECK_OK(fs_fedpower_party_receive(p, z, iter, &err), &err);
    if (threaded) {
        pthread_join(th, NULL);
        CHECK_OK(kj.rc, &kj.err);
        fs_fedpower_party_exchange_install(p, kj.nx);
    }
    ring = fs_fedpower_party_ring_upload(p, &o->len);
    nz = fs_fedpower_debug_party_noise(p, &o->nlen);
    CHECK(ring != NULL && nz != NULL && o->nlen == o->len);
    if (ring == NULL || nz == NULL) {
        fs_fedpower_party_free(p);
        return;
    }
    o->ring = malloc(o->len * sizeof *o->ring);
    o->noise = malloc(o->nlen * sizeof *o->noise);
    memcpy(o->ring, ring, o->len * sizeof *o->ring);
    memcpy(o->noise, nz, o->nlen * sizeof *o->noise);
    if (sel != NULL && (iter == 0 || !cfg->exchange_once)) {
        o->rlen = fs_fedpower_party_exchange_size(p);
        o->resp = malloc(o->rlen);
        CHECK_OK(fs_fedpower_party_exchange(p, sel, sel_len, o->resp, o->rlen, &err), &err);
    }
    fs_fedpower_party_free(p);
}

static int same_sync(const struct sync_out *a, const struct sync_out *b)
{
    return a->len == b->len && a->nlen == b->nlen && a->rlen == b->rlen &&
           memcmp(a->ring, b->ring, a->len * sizeof *a->ring) == 0 &&
           memcmp(a->noise, b->noise, a->nlen * sizeof *a->noise) == 0 &&
           (a->rlen == 0 || memcmp(a->resp, b->resp, a->rlen) == 0);
}

/* A party rebuilt from the same secret after a restart draws no new noise:
 * the noise vector, the ring upload and the exchange response of a sync are
 * byte for byte those of the first run, also when it takes up the job at a
 * later sync (resume_at); without a secret, or with another, they differ. */
static void test_resume_same_noise(void)
{
    static const uint64_t rows[3] = {40, 55, 35};
    /* the second: utility with one exchange per job (every sync's seed from the master) */
    static const enum fs_fedpower_alg algs[3] = {FS_FEDPOWER_UTILITY, FS_FEDPOWER_UTILITY,
                                                 FS_FEDPOWER_DPPPM};
    struct fs_err err = {0};
    struct data D;
    uint8_t secret[32];
    uint8_t other[32];

    memset(secret, 0x5e, sizeof secret);
    memset(other, 0x5f, sizeof other);
    gen_data(&D, 3, rows, 12, 3, LAM + 1, 1, 0, 43);
    for (int a = 0; a < 3 && !t_case_failed; a++) {
        struct fs_fedpower_config cfg;
        fs_fedpower_server *s = NULL;
        fs_paillier_pk *ppk = NULL;
        fs_mat *z = NULL;
        const uint8_t *pk = NULL;
        size_t pkl = 0;
        uint8_t *sel = NULL;
        size_t sl = 0;
        struct sync_out o1, o2, o3, o4;

        base_cfg(&cfg, algs[a], &D, 3, 6, algs[a] == FS_FEDPOWER_DPPPM ? 1 : 2);
        cfg.threshold = 2;
        cfg.sigma = 0.01;
        cfg.allow_weak_privacy = 1; /* the noise, not its calibration, is under test */
        cfg.exchange_once = a == 1;
        CHECK_OK(fs_fedpower_z0(&cfg, &z, &err), &err);
        if (algs[a] == FS_FEDPOWER_UTILITY) {
            mpz_t c, m;
            CHECK_OK(fs_fedpower_server_new(&cfg, D.rows, &s, &err), &err);
            pk = fs_fedpower_server_exchange_key(s, &pkl);
            CHECK_OK(fs_paillier_pk_import(&ppk, pk, pkl, &err), &err);
            sl = fs_paillier_ct_size(ppk);
            sel = malloc(sl);
            mpz_init_set_ui(m, 1);
            mpz_init(c);
            CHECK_OK(fs_paillier_encrypt(ppk, NULL, c, m, &err), &err);
            CHECK_OK(fs_paillier_ct_export(ppk, c, sel, sl, &err), &err);
            mpz_clear(c);
            mpz_clear(m);
        }
        one_sync(&D, &cfg, secret, 0, z, pk, pkl, sel, sl, &o1);
        one_sync(&D, &cfg, secret, 0, z, pk, pkl, sel, sl, &o2); /* the restarted party */
        CHECK_MSG(same_sync(&o1, &o2), "%s: a rebuilt party's sync differs",
                  fs_fedpower_alg_name(algs[a]));
        sync_out_free(&o2);
        g_key_on_thread = 1; /* the key prepared on another thread: the same bytes */
        one_sync(&D, &cfg, secret, 0, z, pk, pkl, sel, sl, &o2);
        g_key_on_thread = 0;
        CHECK_MSG(same_sync(&o1, &o2), "%s: a sync with the key prepared on a thread differs",
                  fs_fedpower_alg_name(algs[a]));
        one_sync(&D, &cfg, other, 0, z, pk, pkl, sel, sl, &o3);
        CHECK(o3.nlen == o1.nlen && memcmp(o3.noise, o1.noise, o1.nlen * sizeof *o1.noise) != 0);
        one_sync(&D, &cfg, NULL, 0, z, pk, pkl, sel, sl, &o4);
        CHECK(o4.nlen == o1.nlen && memcmp(o4.noise, o1.noise, o1.nlen * sizeof *o1.noise) != 0);
        /* taken up at the sync after iteration 2 (the Z of that broadcast is z
         * again here: any orthonormal d x r does) */
        sync_out_free(&o2);
        sync_out_free(&o3);
        {
            fs_fedpower_party *p = new_party(&D, &cfg, 1);
            CHECK(fs_fedpower_party_resume_at(p, 2, &err) == FS_ESTATE); /* no secret */
            CHECK_OK(fs_fedpower_party_set_secret(p, secret, &err), &err);
            if (cfg.sync_every == 2) {
                CHECK(fs_fedpower_party_resume_at(p, 1, &err) == FS_ESTATE); /* not a sync */
            }
            fs_fedpower_party_free(p);
        }
        one_sync(&D, &cfg, secret, 2, z, pk, pkl, sel, sl, &o2);
        one_sync(&D, &cfg, secret, 2, z, pk, pkl, sel, sl, &o3);
        CHECK(same_sync(&o2, &o3));
        CHECK(memcmp(o2.noise, o1.noise, o1.nlen * sizeof *o1.noise) != 0); /* per sync */
        sync_out_free(&o1);
        sync_out_free(&o2);
        sync_out_free(&o3);
        sync_out_free(&o4);
        free(sel);
        fs_paillier_pk_free(ppk);
        fs_fedpower_server_free(s);
        fs_mat_free(z);
    }
    data_free(&D);
}

int main(void)
{
    lam_init();
    RUN(test_config);
    RUN(test_subspace_dist);
    RUN(test_seeded_noise);
    RUN(test_plain_p1_exact);
    RUN(test_plain_p4_global);
    RUN(test_plain_noisy);
    RUN(test_utility_seed);
    RUN(test_utility_ot);
    RUN(test_utility_once);
    RUN(test_utility_elementwise);
    RUN(test_dropout_renormalises);
    RUN(test_private);
    RUN(test_dppm_variance);
    RUN(test_private_noise_variance);
    RUN(test_bad_inputs);
    RUN(test_resume_same_noise);
    return TEST_END("test_fedpower");
}
