/* FedPCA end to end in one process (masking server, parties, secure
 * aggregation with real crypto, server), against a centralised PCA of the
 * pooled matrix: centre (and scale) it, thin SVD. Also: the aggregation
 * server's sums are hidden by the offsets, dropouts, features partition. */
#include "proto/fedpca.h"
#include "test.h"
#include "test_fedsvd_util.h"
#include "test_shard_util.h"

#include <float.h>
#include <stdlib.h>

#define MAXAGG 3

struct ppca {
    /* in */
    enum fs_fedsvd_partition part;
    size_t rows, cols;
    uint32_t K, t;
    size_t sizes[SA_MAXP];
    size_t k;
    int standardize;
    enum sa_drop drop[MAXAGG][SA_MAXP + 1];
    int allow_dropouts;
    uint32_t shards; /* > 1: the SVD aggregation runs sharded (samples) */
    uint8_t seed[32];
    /* out */
    int rc; /* 0, or what stopped the job */
    int server_rc;
    fs_fedpca_party *p[SA_MAXP + 1];
    struct fs_fedpca_result res[SA_MAXP + 1];
    int have[SA_MAXP + 1];
    uint64_t *raw0; /* the server's unmasked sum of aggregation 0 */
    size_t raw0_len;
    /* per-aggregation inputs */
    uint64_t *vec[SA_MAXP + 1];
};

static void ppca_init(struct ppca *pp, enum fs_fedsvd_partition part, size_t rows, size_t cols,
                      uint32_t K, const size_t *sizes, int standardize)
{
    memset(pp, 0, sizeof *pp);
    pp->part = part;
    pp->rows = rows;
    pp->cols = cols;
    pp->K = K;
    pp->t = K;
    pp->standardize = standardize;
    memcpy(pp->sizes, sizes, K * sizeof *sizes);
    for (int b = 0; b < 32; b++) {
        pp->seed[b] = (uint8_t)(0x90 + b);
    }
}

static void ppca_free(struct ppca *pp)
{
    for (uint32_t i = 1; i <= pp->K; i++) {
        fs_fedpca_result_clear(&pp->res[i]);
        fs_fedpca_party_free(pp->p[i]);
        free(pp->vec[i]);
    }
    free(pp->raw0);
}

static int stats_input(void *ctx, uint32_t party, fs_secagg_client *c, uint64_t off, uint64_t *y,
                       size_t cnt, struct fs_err *err)
{
    struct ppca *pp = ctx;
    memcpy(y, pp->vec[party] + off, cnt * sizeof *y);
    return fs_secagg_client_mask(c, off, y, y, cnt, err);
}

static int svd_input(void *ctx, uint32_t party, fs_secagg_client *c, uint64_t off, uint64_t *y,
                     size_t cnt, struct fs_err *err)
{
    struct ppca *pp = ctx;
    return fs_fedsvd_party_masked(fs_fedpca_party_svd(pp->p[party]), c, off, y, cnt, err);
}

static fs_mat party_view(const struct ppca *pp, const fs_mat *x, uint32_t i)
{
    size_t off = 0;

    for (uint32_t q = 1; q < i; q++) {
        off += pp->sizes[q - 1];
    }
    if (pp->part == FS_FEDSVD_SAMPLES) {
        return fs_mat_view(x, off, 0, pp->sizes[i - 1], x->cols);
    }
    return fs_mat_view(x, 0, off, x->rows, pp->sizes[i - 1]);
}

/* Parties still in the protocol (not dropped). */
static int alive(const struct sa *j, const struct ppca *pp, uint32_t i)
{
    return pp->p[i] != NULL && !j->gone[i];
}

/* One statistics aggregation r. 0 or the code that stopped the job. */
static int stats_round(struct ppca *pp, struct sa *j, uint32_t r, uint32_t **first, size_t *nfirst)
{
    struct fs_err err = {0};
    struct fs_fedsvd_job job = {pp->part, pp->rows, pp->cols, pp->K, pp->sizes, 0, 0, 0};
    uint8_t sealed[SA_MAXP][FS_FEDSVD_SEALED_EXP_LEN];
    uint32_t ids[SA_MAXP];
    size_t ne = 0, len = 0;
    int rc;
    const uint64_t *sum = NULL;
    uint32_t *u3 = NULL;
    size_t n3 = 0;

    /* exponents go round sealed: the server only relays them */
    for (uint32_t i = 1; i <= pp->K; i++) {
        if (alive(j, pp, i)) {
            CHECK_OK(fs_fedpca_party_stats_exponent(pp->p[i], sealed[ne], &err), &err);
            ids[ne++] = i;
        }
    }
    for (uint32_t i = 1; i <= pp->K; i++) {
        if (alive(j, pp, i)) {
            CHECK_OK(
                fs_fedpca_party_stats_open(pp->p[i], ids, (const uint8_t(*)[32])sealed, ne, &err),
                &err);
            len = fs_fedpca_party_stats_len(pp->p[i]);
            free(pp->vec[i]);
            pp->vec[i] = malloc(len * sizeof(uint64_t));
            CHECK_OK(fs_fedpca_party_stats_input(pp->p[i], pp->vec[i], len, &err), &err);
        }
    }
    if (sa_aggregate(j, r, len, stats_input, pp, pp->drop[r], &sum, &u3, &n3) != 0) {
        return FS_ESTATE;
    }
    rc = fs_fedpca_server_check_round(&job, pp->allow_dropouts, *first, *nfirst, u3, n3, &err);
    if (rc != 0) {
        pp->server_rc = rc;
        free(u3);
        return rc;
    }
    if (r == 0) {
        pp->raw0 = malloc(len * sizeof(uint64_t));
        memcpy(pp->raw0, sum, len * sizeof(uint64_t));
        pp->raw0_len = len;
    }
    for (uint32_t i = 1; i <= pp->K; i++) {
        if (alive(j, pp, i)) {
            CHECK_OK(fs_fedpca_party_stats_result(pp->p[i], sum, len, u3, n3, &err), &err);
        }
    }
    if (*first == NULL) {
        *first = u3;
        *nfirst = n3;
    } else {
        free(u3);
    }
    return 0;
}

/* The SVD aggregation r and the parties' results. */
static int svd_round(struct ppca *pp, struct sa *j, uint32_t r, const uint32_t *first,
                     size_t nfirst)
{
    struct fs_err err = {0};
    struct fs_fedsvd_job job = {pp->part, pp->rows, pp->cols, pp->K, pp->sizes, 0, 0, pp->shards};
    struct fs_fedsvd_published pub = {0};
    static struct shard_agg g; /* 2.2 MB: off the stack (valgrind) */
    uint8_t sealed[SA_MAXP][FS_FEDSVD_SEALED_EXP_LEN];
    uint32_t ids[SA_MAXP];
    size_t ne = 0;
    int E = FS_FEDSVD_EXP_MIN - 1, rc;
    const uint64_t *sum = NULL;
    uint32_t *u3 = NULL;
    size_t n3 = 0;
    fs_mat *y = NULL;

    /* sealed here too: the server is told only the max (by a party) */
    for (uint32_t i = 1; i <= pp->K; i++) {
        if (alive(j, pp, i)) {
            fs_fedsvd_party *sp = fs_fedpca_party_svd(pp->p[i]);
            int e = 0;
            CHECK_OK(fs_fedsvd_party_set_shards(sp, pp->shards, &err), &err);
            CHECK_OK(fs_fedsvd_party_prepare(sp, &e, &err), &err);
            CHECK_OK(fs_fedsvd_exponent_seal(fs_fedsvd_party_keys(sp)->group_key, r, i, e,
                                             sealed[ne], &err),
                     &err);
            ids[ne++] = i;
        }
    }
    for (uint32_t i = 1; i <= pp->K; i++) {
        if (alive(j, pp, i)) {
            fs_fedsvd_party *sp = fs_fedpca_party_svd(pp->p[i]);
            int ei = 0;
            CHECK_OK(fs_fedsvd_exponent_open_max(fs_fedsvd_party_keys(sp)->group_key, r, ids,
                                                 (const uint8_t(*)[32])sealed, ne, &ei, &err),
                     &err);
            CHECK(ne == 0 || ei == E || E == FS_FEDSVD_EXP_MIN - 1);
            E = ei;
            CHECK_OK(fs_fedsvd_party_set_exponent(sp, E, &err), &err);
        }
    }
    memset(&g, 0, sizeof g);
    g.S = pp->shards;
    if (pp->shards > 1) {
        if (shard_aggregate(j, &job, r, svd_input, pp, &g) != 0) {
            shard_agg_free(&g);
            return FS_ESTATE;
        }
        u3 = g.u3;
        n3 = g.n3;
        g.u3 = NULL;
    } else if (sa_aggregate(j, r, fs_fedsvd_vector_len(&job), svd_input, pp, pp->drop[r], &sum, &u3,
                            &n3) != 0) {
        return FS_ESTATE;
    }
    rc = pp->part == FS_FEDSVD_SAMPLES
             ? fs_fedpca_server_check_round(&job, pp->allow_dropouts, first, nfirst, u3, n3, &err)
             : fs_fedsvd_server_check_contributors(&job, pp->allow_dropouts, u3, n3, NULL, &err);
    if (rc != 0) {
        pp->server_rc = rc;
        goto out;
    }
    if (pp->shards > 1) {
        CHECK(shard_factorize(&job, &g, E, pp->k, FS_TOPK_AUTO, NULL, &pub) == 0);
    } else {
        CHECK_OK(fs_fedsvd_server_decode(&job, E, sum, fs_fedsvd_vector_len(&job), &y, &err), &err);
        CHECK_OK(fs_fedsvd_server_factorize(y, pp->k, FS_TOPK_AUTO, NULL, &pub, &err), &err);
    }
    for (uint32_t i = 1; i <= pp->K; i++) {
        if (alive(j, pp, i)) {
            CHECK_OK(fs_fedpca_party_finish(pp->p[i], &pub, u3, n3, 0.0, &pp->res[i], &err), &err);
            pp->have[i] = 1;
        }
    }
out:
    shard_agg_free(&g);
    fs_mat_free(y);
    fs_fedsvd_published_clear(&pub);
    free(u3);
    return rc;
}

static void run_ppca(struct ppca *pp, const fs_mat *x, fs_mat *views)
{
    struct fs_err err = {0};
    struct fs_fedsvd_job job = {pp->part, pp->rows, pp->cols, pp->K, pp->sizes, 0, 0, 0};
    fs_fedsvd_maskset *ms = NULL;
    unsigned aggs = fs_fedpca_aggregations(pp->part, pp->standardize);
    uint32_t *first = NULL;
    size_t nfirst = 0;
    struct sa j;

    CHECK_OK(fs_fedsvd_maskset_new(&job, pp->seed, &ms, &err), &err);
    for (uint32_t i = 1; i <= pp->K; i++) {
        struct fs_fedsvd_keys *keys = NULL;
        views[i] = party_view(pp, x, i);
        CHECK_OK(fs_fedsvd_maskset_party(ms, i, &keys, &err), &err);
        CHECK_OK(fs_fedpca_party_new(keys, &views[i], pp->standardize, &pp->p[i], &err), &err);
    }
    fs_fedsvd_maskset_free(ms);
    CHECK(sa_init(&j, pp->K, pp->t, aggs, 64) == 0);
    pp->rc = 0;
    for (uint32_t r = 0; pp->rc == 0 && r + 1 < aggs; r++) {
        pp->rc = stats_round(pp, &j, r, &first, &nfirst);
    }
    if (pp->rc == 0) {
        pp->rc = svd_round(pp, &j, aggs - 1, first, nfirst);
    }
    free(first);
    sa_free(&j);
}

/* Centralised PCA of x: mean, scale, thin SVD of the centred (scaled) matrix. */
struct refpca {
    double *mean, *scale;
    fs_svd svd;
    double total_sq;
};

static void ref_pca(const fs_mat *x, int standardize, struct refpca *rp)
{
    struct fs_err err = {0};
    size_t n = x->rows, d = x->cols;
    fs_mat *z = fs_mat_dup(x);

    rp->mean = calloc(d, sizeof(double));
    rp->scale = calloc(d, sizeof(double));
    for (size_t j = 0; j < d; j++) {
        double s = 0.0, ss = 0.0;
        for (size_t i = 0; i < n; i++) {
            s += FS_MAT_AT(x, i, j);
        }
        rp->mean[j] = s / (double)n;
        for (size_t i = 0; i < n; i++) {
            double v = FS_MAT_AT(x, i, j) - rp->mean[j];
            ss += v * v;
        }
        {
            double var = ss / (double)(n - 1);
            double tiny = (double)n * DBL_EPSILON * fabs(rp->mean[j]);
            rp->scale[j] = standardize && var > tiny * tiny ? sqrt(var) : 1.0;
        }
        for (size_t i = 0; i < n; i++) {
            FS_MAT_AT(z, i, j) = (FS_MAT_AT(x, i, j) - rp->mean[j]) / rp->scale[j];
        }
    }
    rp->total_sq = fs_mat_norm_fro(z) * fs_mat_norm_fro(z);
    CHECK_OK(fs_svd_thin(z, &rp->svd, &err), &err);
    fs_mat_free(z);
}

static void ref_free(struct refpca *rp)
{
    free(rp->mean);
    free(rp->scale);
    fs_svd_clear(&rp->svd);
}

/* Every included party's result against the centralised PCA of xref. */
static void check_pca(const struct ppca *pp, const fs_mat *xref)
{
    struct refpca rp = {0};
    fs_mat *parts[SA_MAXP];
    size_t np = 0, k = 0, n = xref->rows, col0 = 0;
    const fs_mat *shared = NULL;
    fs_mat *stacked = NULL;
    double xmax = fs_mat_max_abs(xref);
    int samples = pp->part == FS_FEDSVD_SAMPLES;

    ref_pca(xref, pp->standardize, &rp);
    for (uint32_t i = 1; i <= pp->K; i++) {
        const struct fs_fedpca_result *r = &pp->res[i];
        if (!pp->have[i]) {
            col0 += samples ? 0 : pp->sizes[i - 1];
            continue;
        }
        k = r->k;
        CHECK(r->n_samples == n);
        for (size_t j = 0; j < r->nmean; j++) {
            size_t g = samples ? j : col0 + j;
            CHECK_MSG(fabs(r->mean[j] - rp.mean[g]) <= 1e-14 * xmax, "mean %zu: %.17g vs %.17g", j,
                      r->mean[j], rp.mean[g]);
            if (pp->standardize) {
                CHECK_MSG(fabs(r->scale[j] - rp.scale[g]) <= 1e-12 * rp.scale[g],
                          "scale %zu: %.17g vs %.17g", j, r->scale[j], rp.scale[g]);
            } else {
                CHECK(r->scale == NULL);
            }
        }
        CHECK_MSG(sv_err(r->s, rp.svd.s, k) <= 1e-12, "sv %.3g", sv_err(r->s, rp.svd.s, k));
        CHECK(fabs(r->total_variance - rp.total_sq / (double)(n - 1)) <= 1e-12 * r->total_variance);
        for (size_t q = 0; q < k; q++) {
            double s2 = rp.svd.s[q] * rp.svd.s[q];
            CHECK(fabs(r->explained_variance[q] - s2 / (double)(n - 1)) <=
                  1e-12 * rp.svd.s[0] * rp.svd.s[0] / (double)(n - 1));
            CHECK_MSG(fabs(r->explained_variance_ratio[q] - s2 / rp.total_sq) <= 1e-12,
                      "ratio %zu: %.17g vs %.17g", q, r->explained_variance_ratio[q],
                      s2 / rp.total_sq);
        }
        if (samples) {
            shared = r->components;
            parts[np++] = r->scores;
        } else {
            shared = r->scores;
            parts[np++] = r->components;
        }
        col0 += samples ? 0 : pp->sizes[i - 1];
    }
    CHECK(np > 0);
    if (np > 0) {
        stacked = stack_rows(parts, np);
        /* the reference scores U S and components V, sign-free column by column */
        fs_mat *us = fs_mat_dup(rp.svd.u);
        for (size_t q = 0; q < us->cols; q++) {
            for (size_t i = 0; i < us->rows; i++) {
                FS_MAT_AT(us, i, q) *= rp.svd.s[q];
            }
        }
        {
            const fs_mat *comp = samples ? shared : stacked;
            const fs_mat *scores = samples ? stacked : shared;
            double ce = col_err(comp, rp.svd.v, k);
            double se = col_err(scores, us, k);
            CHECK_MSG(ce <= 1e-10, "components %.3g", ce);
            CHECK_MSG(se <= 1e-10 * rp.svd.s[0], "scores %.3g", se / rp.svd.s[0]);
            CHECK(proj_dist(comp, rp.svd.v, k) <= 1e-10);
            if (getenv("FS_TEST_VERBOSE") != NULL) {
                printf("  components %.2e scores %.2e sv %.2e\n", ce, se / rp.svd.s[0],
                       sv_err(pp->res[samples ? 1 : 1].s, rp.svd.s, k));
            }
        }
        fs_mat_free(us);
        fs_mat_free(stacked);
    }
    ref_free(&rp);
}

/* x with column j shifted by shift_j and scaled by scale_j. */
static fs_mat *shifted(size_t n, size_t d, uint8_t seed, double shift, double spread)
{
    fs_mat *x = tl_randn(n, d, seed);

    for (size_t j = 0; x != NULL && j < d; j++) {
        double sc = pow(spread, (double)j / (double)(d > 1 ? d - 1 : 1) - 0.5);
        for (size_t i = 0; i < n; i++) {
            FS_MAT_AT(x, i, j) = FS_MAT_AT(x, i, j) * sc + shift * (double)(j + 1);
        }
    }
    return x;
}

static void pca_case(enum fs_fedsvd_partition part, const fs_mat *x, uint32_t K,
                     const size_t *sizes, size_t k, int standardize)
{
    struct ppca pp;
    fs_mat views[SA_MAXP + 1];

    ppca_init(&pp, part, x->rows, x->cols, K, sizes, standardize);
    pp.k = k;
    run_ppca(&pp, x, views);
    CHECK_MSG(pp.rc == 0, "rc %d", pp.rc);
    if (pp.rc == 0) {
        check_pca(&pp, x);
    }
    ppca_free(&pp);
}

static void test_pca_samples(void)
{
    fs_mat *x = shifted(90, 8, 21, 5.0, 10.0);

    pca_case(FS_FEDSVD_SAMPLES, x, 3, (const size_t[]){30, 25, 35}, 0, 0);
    pca_case(FS_FEDSVD_SAMPLES, x, 2, (const size_t[]){1, 89}, 0, 0);
    pca_case(FS_FEDSVD_SAMPLES, x, 5, (const size_t[]){20, 20, 20, 20, 10}, 3, 0);
    fs_mat_free(x);
}

static void test_pca_standardize(void)
{
    /* means ~1e6 with spreads 1e-3..1e3: the one-pass variance would lose
     * ~12 digits here; plus one constant column */
    fs_mat *x = shifted(70, 7, 22, 1e6, 1e6);

    for (size_t i = 0; i < 70; i++) {
        FS_MAT_AT(x, i, 3) = 42.0;
    }
    pca_case(FS_FEDSVD_SAMPLES, x, 4, (const size_t[]){10, 20, 25, 15}, 0, 1);
    pca_case(FS_FEDSVD_SAMPLES, x, 4, (const size_t[]){10, 20, 25, 15}, 2, 1);
    fs_mat_free(x);
}

static void test_pca_features(void)
{
    fs_mat *x = shifted(50, 12, 23, 3.0, 100.0);

    pca_case(FS_FEDSVD_FEATURES, x, 3, (const size_t[]){4, 5, 3}, 0, 0);
    pca_case(FS_FEDSVD_FEATURES, x, 3, (const size_t[]){4, 5, 3}, 0, 1);
    pca_case(FS_FEDSVD_FEATURES, x, 2, (const size_t[]){6, 6}, 3, 1);
    fs_mat_free(x);
}

static void test_offsets_hide_statistics(void)
{
    /* The aggregation server's unmasked sums are one-time padded: another
     * group key gives unrelated sums for the same data, the count word is
     * not N, and the top limbs (a few bits when padded off) are full-size
     * words. Only parties remove the pads, and only with the right set. */
    struct fs_err err = {0};
    fs_mat *x = shifted(40, 5, 24, 2.0, 1.0);
    struct ppca pp, pp2;
    fs_mat views[SA_MAXP + 1];

    ppca_init(&pp, FS_FEDSVD_SAMPLES, 40, 5, 3, (const size_t[]){10, 10, 20}, 0);
    run_ppca(&pp, x, views);
    ppca_init(&pp2, FS_FEDSVD_SAMPLES, 40, 5, 3, (const size_t[]){10, 10, 20}, 0);
    pp2.seed[5] ^= 0x20;
    run_ppca(&pp2, x, views);
    CHECK(pp.rc == 0 && pp.raw0 != NULL && pp.raw0_len == 16);
    CHECK(pp2.rc == 0 && pp2.raw0 != NULL && pp2.raw0_len == 16);
    if (pp.raw0 != NULL && pp2.raw0 != NULL) {
        size_t same = 0;
        for (size_t w = 0; w < 16; w++) {
            same += pp.raw0[w] == pp2.raw0[w];
        }
        CHECK(same == 0);
        CHECK(pp.raw0[15] != 40);
        for (size_t q = 0; q < 5; q++) {
            uint64_t top = pp.raw0[3 * q + 2];
            CHECK_MSG(top + ((uint64_t)1 << 40) > ((uint64_t)1 << 41), "column %zu top limb", q);
        }
        CHECK(sv_err(pp.res[1].s, pp2.res[1].s, 5) <= 1e-14);
    }
    check_pca(&pp, x);
    ppca_free(&pp);
    ppca_free(&pp2);
    {
        /* sealed exponents and a wrong contributor set */
        static const size_t sz[] = {10, 30};
        struct fs_fedsvd_job job = {FS_FEDSVD_SAMPLES, 40, 5, 2, sz, 0, 0, 0};
        uint8_t seed[32] = {3};
        fs_fedsvd_maskset *ms = NULL;
        struct fs_fedsvd_keys *k1 = NULL, *k2 = NULL;
        fs_fedpca_party *p1 = NULL, *p2 = NULL;
        fs_mat v1 = fs_mat_view(x, 0, 0, 10, 5), v2 = fs_mat_view(x, 10, 0, 30, 5);
        uint8_t se[2][FS_FEDSVD_SEALED_EXP_LEN], bad[2][FS_FEDSVD_SEALED_EXP_LEN];
        uint64_t a[16], b[16], s[16];
        CHECK_OK(fs_fedsvd_maskset_new(&job, seed, &ms, &err), &err);
        CHECK_OK(fs_fedsvd_maskset_party(ms, 1, &k1, &err), &err);
        CHECK_OK(fs_fedsvd_maskset_party(ms, 2, &k2, &err), &err);
        CHECK_OK(fs_fedpca_party_new(k1, &v1, 0, &p1, &err), &err);
        CHECK_OK(fs_fedpca_party_new(k2, &v2, 0, &p2, &err), &err);
        CHECK(fs_fedpca_party_step(p1) == FS_FEDPCA_STEP_MEAN);
        CHECK(fs_fedpca_party_svd(p1) == NULL);
        CHECK(fs_fedpca_party_stats_len(p1) == 16);
        CHECK(fs_fedpca_party_stats_input(p1, a, 16, &err) == FS_ESTATE);
        CHECK_OK(fs_fedpca_party_stats_exponent(p1, se[0], &err), &err);
        CHECK_OK(fs_fedpca_party_stats_exponent(p2, se[1], &err), &err);
        memcpy(bad, se, sizeof bad);
        bad[1][20] ^= 1;
        CHECK(fs_fedpca_party_stats_open(p1, (const uint32_t[]){1, 2}, (const uint8_t(*)[32])bad, 2,
                                         &err) == FS_EAUTH);
        CHECK(fs_fedpca_party_stats_open(p1, (const uint32_t[]){2, 1}, (const uint8_t(*)[32])se, 2,
                                         &err) == FS_EAUTH);
        CHECK_OK(fs_fedpca_party_stats_open(p1, (const uint32_t[]){1, 2}, (const uint8_t(*)[32])se,
                                            2, &err),
                 &err);
        CHECK_OK(fs_fedpca_party_stats_open(p2, (const uint32_t[]){1, 2}, (const uint8_t(*)[32])se,
                                            2, &err),
                 &err);
        CHECK(fs_fedpca_party_stats_input(p1, a, 15, &err) == FS_EINVAL);
        CHECK_OK(fs_fedpca_party_stats_input(p1, a, 16, &err), &err);
        CHECK_OK(fs_fedpca_party_stats_input(p2, b, 16, &err), &err);
        for (int q = 0; q < 16; q++) {
            s[q] = a[q] + b[q]; /* the ring sum secagg would produce */
        }
        CHECK(fs_fedpca_party_stats_result(p1, s, 16, (const uint32_t[]){1}, 1, &err) == FS_ESTATE);
        CHECK(fs_fedpca_party_stats_result(p1, s, 16, (const uint32_t[]){2}, 1, &err) ==
              FS_ESTATE); /* not among them itself */
        CHECK(fs_fedpca_party_step(p1) == FS_FEDPCA_STEP_MEAN);
        CHECK_OK(fs_fedpca_party_stats_result(p1, s, 16, (const uint32_t[]){2, 1}, 2, &err), &err);
        CHECK(fs_fedpca_party_step(p1) == FS_FEDPCA_STEP_SVD);
        CHECK(fs_fedpca_party_svd(p1) != NULL);
        fs_fedpca_party_free(p1);
        fs_fedpca_party_free(p2);
        fs_fedsvd_maskset_free(ms);
    }
    fs_mat_free(x);
}

static void test_pca_dropouts(void)
{
    fs_mat *x = shifted(60, 6, 25, 4.0, 5.0);
    static const size_t sz[] = {15, 10, 20, 15};
    struct ppca pp;
    fs_mat views[SA_MAXP + 1];

    /* a party lost in the mean round, allowed: the exact PCA of the survivors */
    ppca_init(&pp, FS_FEDSVD_SAMPLES, 60, 6, 4, sz, 1);
    pp.t = 3;
    pp.allow_dropouts = 1;
    pp.drop[0][2] = SA_DROP_BEFORE_INPUT;
    run_ppca(&pp, x, views);
    CHECK(pp.rc == 0 && !pp.have[2] && pp.have[1]);
    if (pp.rc == 0) {
        fs_mat a = fs_mat_view(x, 0, 0, 15, 6), b = fs_mat_view(x, 25, 0, 35, 6);
        fs_mat *parts[2] = {fs_mat_dup(&a), fs_mat_dup(&b)};
        fs_mat *surv = stack_rows(parts, 2);
        check_pca(&pp, surv);
        fs_mat_free(parts[0]);
        fs_mat_free(parts[1]);
        fs_mat_free(surv);
    }
    ppca_free(&pp);

    /* not allowed: the server stops after the mean round */
    ppca_init(&pp, FS_FEDSVD_SAMPLES, 60, 6, 4, sz, 0);
    pp.t = 3;
    pp.drop[0][2] = SA_DROP_BEFORE_INPUT;
    run_ppca(&pp, x, views);
    CHECK(pp.rc == FS_ESTATE && pp.server_rc == FS_ESTATE && !pp.have[1]);
    ppca_free(&pp);

    /* a party in the mean but gone before the SVD: the job fails cleanly
     * even with dropouts allowed (the mean no longer matches the rows) */
    ppca_init(&pp, FS_FEDSVD_SAMPLES, 60, 6, 4, sz, 0);
    pp.t = 3;
    pp.allow_dropouts = 1;
    pp.drop[0][3] = SA_DROP_AT_CONSISTENCY;
    run_ppca(&pp, x, views);
    CHECK(pp.rc == FS_ESTATE && pp.server_rc == FS_ESTATE && !pp.have[1]);
    ppca_free(&pp);
    fs_mat_free(x);
}

/* The SVD step sharded over 2 and 3 aggregation windows (TSQR): the same
 * PCA as the centralised one, and as the unsharded run to 1e-12. */
static void test_pca_sharded(void)
{
    fs_mat *x = shifted(90, 8, 27, 5.0, 10.0);
    static const size_t sz[] = {30, 25, 35};
    struct ppca a, b;
    fs_mat views[SA_MAXP + 1];

    for (uint32_t S = 2; S <= 3; S++) {
        ppca_init(&a, FS_FEDSVD_SAMPLES, 90, 8, 3, sz, S == 3);
        ppca_init(&b, FS_FEDSVD_SAMPLES, 90, 8, 3, sz, S == 3);
        a.shards = S;
        run_ppca(&a, x, views);
        run_ppca(&b, x, views);
        CHECK_MSG(a.rc == 0 && b.rc == 0 && a.have[1] && b.have[1], "S = %u: rc %d", S, a.rc);
        if (a.rc == 0 && b.rc == 0 && a.have[1] && b.have[1]) {
            check_pca(&a, x);
            CHECK(sv_err(a.res[1].s, b.res[1].s, a.res[1].k) <= 1e-12);
            CHECK(proj_dist(a.res[1].components, b.res[1].components, 3) <= 1e-12);
        }
        ppca_free(&a);
        ppca_free(&b);
    }
    fs_mat_free(x);
}

int main(void)
{
    RUN(test_pca_samples);
    RUN(test_pca_standardize);
    RUN(test_pca_features);
    RUN(test_offsets_hide_statistics);
    RUN(test_pca_dropouts);
    RUN(test_pca_sharded);
    return TEST_END("test_fedpca");
}
