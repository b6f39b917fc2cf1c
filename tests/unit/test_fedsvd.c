/* FedSVD end to end in one process: masking server, 2 to 5 parties, secure
 * aggregation with real crypto, server factorization, local recovery —
 * checked against a centralised fs_svd_thin of the pooled matrix. Also: the
 * masks really mask, dropouts, rank deficiency, odd shapes, the key codec,
 * and API misuse. */
#include "la/mask.h"
#include "proto/fedsvd.h"
#include "test.h"
#include "test_fedsvd_util.h"

#include <float.h>
#include <stdlib.h>

/* Byte offset of the first row index of the first slab piece in a key blob. */
#define KEYS_TEST_FIRST_ROW (136 + 32)

struct pipe {
    /* in */
    enum fs_fedsvd_partition part;
    size_t rows, cols;
    uint32_t K, t;
    size_t sizes[SA_MAXP];
    size_t k;
    enum fs_topk_method method;
    size_t block_a, block_b;
    uint32_t chunk;
    enum sa_drop drop[SA_MAXP + 1];
    int allow_dropouts;
    uint8_t seed[32];
    /* out */
    int rc; /* 0, or the code that stopped the job */
    fs_mat *xprime;
    struct fs_fedsvd_published pub;
    struct fs_fedsvd_result res[SA_MAXP + 1];
    int have[SA_MAXP + 1];
    size_t n_included;
    fs_fedsvd_party *p[SA_MAXP + 1];
};

static void pipe_init(struct pipe *pp, enum fs_fedsvd_partition part, size_t rows, size_t cols,
                      uint32_t K, const size_t *sizes)
{
    memset(pp, 0, sizeof *pp);
    pp->part = part;
    pp->rows = rows;
    pp->cols = cols;
    pp->K = K;
    pp->t = K;
    pp->chunk = 97; /* odd, so chunks straddle columns */
    memcpy(pp->sizes, sizes, K * sizeof *sizes);
    for (int b = 0; b < 32; b++) {
        pp->seed[b] = (uint8_t)(0x40 + b);
    }
}

static void pipe_free(struct pipe *pp)
{
    fs_mat_free(pp->xprime);
    fs_fedsvd_published_clear(&pp->pub);
    for (uint32_t i = 1; i <= pp->K; i++) {
        fs_fedsvd_result_clear(&pp->res[i]);
        fs_fedsvd_party_free(pp->p[i]);
    }
}

static int masked_input(void *ctx, uint32_t party, fs_secagg_client *c, uint64_t off, uint64_t *y,
                        size_t cnt, struct fs_err *err)
{
    struct pipe *pp = ctx;
    return fs_fedsvd_party_masked(pp->p[party], c, off, y, cnt, err);
}

static struct fs_fedsvd_job pipe_job(const struct pipe *pp)
{
    struct fs_fedsvd_job job;

    memset(&job, 0, sizeof job);
    job.partition = pp->part;
    job.rows = pp->rows;
    job.cols = pp->cols;
    job.parties = pp->K;
    job.sizes = pp->sizes;
    job.block_a = pp->block_a;
    job.block_b = pp->block_b;
    return job;
}

/* Party i's block of x: rows (samples) or columns (features). */
static fs_mat party_view(const struct pipe *pp, const fs_mat *x, uint32_t i)
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

/* Masking server, parties (keys shipped through the codec), secagg, server, recovery. */
static void run_pipe(struct pipe *pp, const fs_mat *x, fs_mat *views)
{
    struct fs_err err = {0};
    struct fs_fedsvd_job job = pipe_job(pp);
    fs_fedsvd_maskset *ms = NULL;
    struct sa j;
    int e[SA_MAXP];
    int E = 0;
    const uint64_t *sum = NULL;
    uint32_t *u3 = NULL;
    size_t n3 = 0;
    fs_mat *work = NULL;

    CHECK_OK(fs_fedsvd_maskset_new(&job, pp->seed, &ms, &err), &err);
    for (uint32_t i = 1; i <= pp->K; i++) {
        struct fs_fedsvd_keys *keys = NULL, *shipped = NULL;
        uint8_t *blob = NULL;
        size_t blen = 0;
        views[i] = party_view(pp, x, i);
        CHECK_OK(fs_fedsvd_maskset_party(ms, i, &keys, &err), &err);
        CHECK_OK(fs_fedsvd_keys_encode(keys, &blob, &blen, &err), &err);
        CHECK_OK(fs_fedsvd_keys_decode(blob, blen, &shipped, &err), &err);
        fs_fedsvd_wipe_free(blob, blen);
        fs_fedsvd_keys_free(keys);
        CHECK_OK(fs_fedsvd_party_new(shipped, &views[i], &pp->p[i], &err), &err);
        CHECK_OK(fs_fedsvd_party_prepare(pp->p[i], &e[i - 1], &err), &err);
    }
    fs_fedsvd_maskset_free(ms);
    CHECK_OK(fs_fedsvd_public_exponent(e, pp->K, &E, &err), &err);
    for (uint32_t i = 1; i <= pp->K; i++) {
        CHECK_OK(fs_fedsvd_party_set_exponent(pp->p[i], E, &err), &err);
    }
    CHECK(sa_init(&j, pp->K, pp->t, 1, pp->chunk) == 0);
    CHECK(sa_aggregate(&j, 0, fs_fedsvd_vector_len(&job), masked_input, pp, pp->drop, &sum, &u3,
                       &n3) == 0);
    for (uint32_t i = 1; i <= pp->K; i++) {
        fs_fedsvd_party_end_upload(pp->p[i]);
    }
    pp->rc = fs_fedsvd_server_check_contributors(&job, pp->allow_dropouts, u3, n3, &pp->n_included,
                                                 &err);
    if (pp->rc != 0) {
        goto out;
    }
    CHECK_OK(fs_fedsvd_server_decode(&job, E, sum, fs_fedsvd_vector_len(&job), &work, &err), &err);
    pp->xprime = fs_mat_dup(work);
    CHECK_OK(fs_fedsvd_server_factorize(work, pp->k, pp->method, pp->seed, &pp->pub, &err), &err);
    for (size_t q = 0; q < n3; q++) {
        uint32_t i = u3[q];
        if (pp->drop[i] != SA_STAY) {
            continue;
        }
        CHECK_OK(fs_fedsvd_party_recover(pp->p[i], &pp->pub, 0.0, &pp->res[i], &err), &err);
        pp->have[i] = 1;
    }
out:
    fs_mat_free(work);
    free(u3);
    sa_free(&j);
}

/* The shared factor and the stacked private ones of the parties that have results. */
static void gather(const struct pipe *pp, const fs_mat **shared, fs_mat **stacked)
{
    fs_mat *parts[SA_MAXP];
    size_t np = 0;

    *shared = NULL;
    for (uint32_t i = 1; i <= pp->K; i++) {
        if (!pp->have[i]) {
            continue;
        }
        if (pp->part == FS_FEDSVD_SAMPLES) {
            *shared = pp->res[i].v;
            parts[np++] = pp->res[i].u;
        } else {
            *shared = pp->res[i].u;
            parts[np++] = pp->res[i].v;
        }
    }
    *stacked = np > 0 ? stack_rows(parts, np) : NULL;
}

/* Compare the federated result with a centralised thin SVD of xref (the pooled
 * matrix of the included parties, which then all have results). */
static void check_exact(const struct pipe *pp, const fs_mat *xref)
{
    struct fs_err err = {0};
    fs_svd ref = {0};
    const fs_mat *shared = NULL;
    fs_mat *priv = NULL;
    size_t r = pp->pub.r;
    size_t rank = 0;
    int samples = pp->part == FS_FEDSVD_SAMPLES;

    CHECK_OK(fs_svd_thin(xref, &ref, &err), &err);
    gather(pp, &shared, &priv);
    CHECK(shared != NULL && priv != NULL);
    if (shared == NULL || priv == NULL) {
        fs_svd_clear(&ref);
        return;
    }
    for (uint32_t i = 1; i <= pp->K; i++) {
        if (pp->have[i]) {
            rank = pp->res[i].rank;
            /* every party holds the same shared factor */
            CHECK(tl_max_diff(samples ? pp->res[i].v : pp->res[i].u, shared) <= 1e-15);
        }
    }
    {
        size_t rr = r < ref.r ? r : ref.r;
        double se = sv_err(pp->pub.s, ref.s, rr);
        if (getenv("FS_TEST_VERBOSE") != NULL) {
            printf("  sv err %.2e\n", se);
        }
        CHECK_MSG(se <= 1e-12, "singular values: %.3g", se);
        for (size_t j = rr; j < r; j++) {
            CHECK(pp->pub.s[j] <= 1e-12 * ref.s[0]);
        }
        size_t want =
            fs_svd_rank(&ref, (double)(pp->rows > pp->cols ? pp->rows : pp->cols) * DBL_EPSILON);
        CHECK_MSG(rank == (want < r ? want : r), "rank %zu, centralised %zu", rank, want);
    }
    {
        /* the shared factor spans the same leading subspaces */
        const fs_mat *sref = samples ? ref.v : ref.u;
        size_t ks[3] = {1, rank / 2, rank};
        for (int q = 0; q < 3; q++) {
            if (ks[q] == 0 || ks[q] > r ||
                (ks[q] < rank && !(pp->pub.s[ks[q] - 1] > pp->pub.s[ks[q]] * (1 + 1e-6)))) {
                continue;
            }
            double pd = proj_dist(shared, sref, ks[q]);
            if (getenv("FS_TEST_VERBOSE") != NULL) {
                printf("  proj dist k=%zu %.2e\n", ks[q], pd);
            }
            CHECK_MSG(pd <= 1e-10, "projection distance %.3g at k = %zu", pd, ks[q]);
        }
    }
    {
        /* X = U S V^T with the stacked private factors */
        double re = samples ? recon_err(xref, priv, pp->pub.s, shared, rank)
                            : recon_err(xref, shared, pp->pub.s, priv, rank);
        fs_mat pv = fs_mat_view(priv, 0, 0, priv->rows, rank);
        fs_mat sv = fs_mat_view(shared, 0, 0, shared->rows, r);
        if (getenv("FS_TEST_VERBOSE") != NULL) {
            printf("  recon %.2e rank %zu/%zu\n", re, rank, r);
        }
        if (pp->k == 0) {
            CHECK_MSG(re <= 1e-12, "reconstruction %.3g", re);
        }
        CHECK_MSG(tl_orth_err(&pv) <= 1e-10, "private factor orthogonality %.3g", tl_orth_err(&pv));
        CHECK_MSG(tl_orth_err(&sv) <= 1e-12, "shared factor orthogonality %.3g", tl_orth_err(&sv));
        for (size_t j = rank; j < r; j++) {
            for (size_t i = 0; i < priv->rows; i++) {
                CHECK(FS_MAT_AT(priv, i, j) == 0.0);
            }
        }
    }
    fs_mat_free(priv);
    fs_svd_clear(&ref);
}

/* A run that should reproduce the centralised SVD of x exactly. */
static void exact_case(enum fs_fedsvd_partition part, const fs_mat *x, uint32_t K,
                       const size_t *sizes, size_t k, enum fs_topk_method method, size_t ba,
                       size_t bb)
{
    struct pipe pp;
    fs_mat views[SA_MAXP + 1];

    pipe_init(&pp, part, x->rows, x->cols, K, sizes);
    pp.k = k;
    pp.method = method;
    pp.block_a = ba;
    pp.block_b = bb;
    run_pipe(&pp, x, views);
    CHECK_OK(pp.rc, &(struct fs_err){0});
    if (pp.rc == 0) {
        check_exact(&pp, x);
    }
    pipe_free(&pp);
}

static void test_samples_thin_2_3_5_parties(void)
{
    fs_mat *x = tl_randn(90, 20, 1);
    static const size_t s2[] = {50, 40};
    static const size_t s3[] = {30, 25, 35};
    static const size_t s5[] = {10, 30, 5, 25, 20};

    exact_case(FS_FEDSVD_SAMPLES, x, 2, s2, 0, FS_TOPK_AUTO, 0, 0);
    exact_case(FS_FEDSVD_SAMPLES, x, 3, s3, 0, FS_TOPK_AUTO, 0, 0);
    exact_case(FS_FEDSVD_SAMPLES, x, 5, s5, 0, FS_TOPK_AUTO, 0, 0);
    fs_mat_free(x);
}

static void test_samples_block_masks(void)
{
    /* several Haar blocks on both sides, slabs straddling block boundaries */
    fs_mat *x = tl_randn(90, 20, 2);
    static const size_t s3[] = {30, 25, 35};

    exact_case(FS_FEDSVD_SAMPLES, x, 3, s3, 0, FS_TOPK_AUTO, 16, 7);
    exact_case(FS_FEDSVD_FEATURES, x, 3, (const size_t[]){7, 6, 7}, 0, FS_TOPK_AUTO, 6, 25);
    fs_mat_free(x);
}

static void test_topk(void)
{
    double s[12];
    fs_mat *x;
    static const size_t s3[] = {40, 30, 50};

    for (int j = 0; j < 12; j++) {
        s[j] = pow(0.5, j);
    }
    x = tl_with_svals(120, 30, s, 12, 3);
    exact_case(FS_FEDSVD_SAMPLES, x, 3, s3, 4, FS_TOPK_AUTO, 0, 0);  /* dgesvdx */
    exact_case(FS_FEDSVD_SAMPLES, x, 3, s3, 4, FS_TOPK_THIN, 0, 0);  /* thin + truncate */
    exact_case(FS_FEDSVD_SAMPLES, x, 3, s3, 20, FS_TOPK_AUTO, 0, 0); /* AUTO -> thin */
    exact_case(FS_FEDSVD_FEATURES, x, 3, (const size_t[]){10, 12, 8}, 4, FS_TOPK_GESVDX, 0, 0);
    {
        /* randomized only when asked; accurate on a decaying spectrum */
        struct pipe pp;
        fs_mat views[SA_MAXP + 1];
        struct fs_err err = {0};
        fs_svd ref = {0};
        pipe_init(&pp, FS_FEDSVD_SAMPLES, 120, 30, 3, s3);
        pp.k = 4;
        pp.method = FS_TOPK_RANDOMIZED;
        run_pipe(&pp, x, views);
        CHECK_OK(fs_svd_thin(x, &ref, &err), &err);
        CHECK(pp.rc == 0 && pp.pub.r == 4);
        if (pp.rc == 0) {
            CHECK_MSG(sv_err(pp.pub.s, ref.s, 4) <= 1e-8, "%g", sv_err(pp.pub.s, ref.s, 4));
            CHECK(proj_dist(pp.res[1].v, ref.v, 4) <= 1e-6);
        }
        fs_svd_clear(&ref);
        pipe_free(&pp);
    }
    fs_mat_free(x);
}

/* the randomized sketch without a given seed comes from the matrix itself:
 * the same matrix twice gives the same bytes. A nearly flat spectrum (no gap
 * after s_6) makes the result depend on the sketch, so two independent
 * sketches would differ far above the last bit. */
static void test_randomized_deterministic(void)
{
    double s[12];
    struct fs_err err = {0};
    struct fs_fedsvd_published pub[2] = {{0}};
    fs_mat *x, *y[2] = {NULL, NULL};

    for (int j = 0; j < 12; j++) {
        s[j] = pow(0.99, j);
    }
    x = tl_with_svals(300, 40, s, 12, 5);
    for (int i = 0; i < 2; i++) {
        y[i] = fs_mat_new(300, 40);
        CHECK(y[i] != NULL);
        if (y[i] == NULL) {
            goto out;
        }
        CHECK_OK(fs_mat_copy(y[i], x, &err), &err);
    }
    for (int i = 0; i < 2; i++) {
        CHECK_OK(fs_fedsvd_server_factorize(y[i], 6, FS_TOPK_RANDOMIZED, NULL, &pub[i], &err),
                 &err);
    }
    if (pub[0].r == 6 && pub[1].r == 6) {
        CHECK(memcmp(pub[0].s, pub[1].s, 6 * sizeof(double)) == 0);
        CHECK(memcmp(pub[0].vc->data, pub[1].vc->data, 40 * 6 * sizeof(double)) == 0);
    } else {
        CHECK(0);
    }
out:
    for (int i = 0; i < 2; i++) {
        fs_fedsvd_published_clear(&pub[i]);
        fs_mat_free(y[i]);
    }
    fs_mat_free(x);
}

static void test_features_partition(void)
{
    fs_mat *tall = tl_randn(40, 12, 4); /* N > d */
    fs_mat *wide = tl_randn(8, 30, 5);  /* N < d */

    exact_case(FS_FEDSVD_FEATURES, tall, 3, (const size_t[]){4, 5, 3}, 0, FS_TOPK_AUTO, 0, 0);
    exact_case(FS_FEDSVD_FEATURES, wide, 2, (const size_t[]){18, 12}, 0, FS_TOPK_AUTO, 0, 0);
    exact_case(FS_FEDSVD_FEATURES, wide, 4, (const size_t[]){1, 9, 10, 10}, 0, FS_TOPK_AUTO, 0, 0);
    fs_mat_free(tall);
    fs_mat_free(wide);
}

static void test_edge_shapes(void)
{
    fs_mat *a = tl_randn(30, 9, 6);
    fs_mat *b = tl_randn(15, 40, 7); /* N < d (d > N) */
    fs_mat *c = tl_randn(3, 5, 8);

    exact_case(FS_FEDSVD_SAMPLES, a, 3, (const size_t[]){1, 20, 9}, 0, FS_TOPK_AUTO, 0, 0);
    exact_case(FS_FEDSVD_SAMPLES, b, 3, (const size_t[]){5, 1, 9}, 0, FS_TOPK_AUTO, 0, 0);
    exact_case(FS_FEDSVD_SAMPLES, c, 3, (const size_t[]){1, 1, 1}, 0, FS_TOPK_AUTO, 0, 0);
    exact_case(FS_FEDSVD_SAMPLES, b, 2, (const size_t[]){7, 8}, 3, FS_TOPK_AUTO, 0, 0);
    fs_mat_free(a);
    fs_mat_free(b);
    fs_mat_free(c);
}

static void test_rank_deficient(void)
{
    static const double s[] = {10.0, 5.0, 1.0};
    fs_mat *x = tl_with_svals(50, 12, s, 3, 9);
    struct pipe pp;
    fs_mat views[SA_MAXP + 1];

    pipe_init(&pp, FS_FEDSVD_SAMPLES, 50, 12, 3, (const size_t[]){20, 10, 20});
    run_pipe(&pp, x, views);
    CHECK(pp.rc == 0);
    for (uint32_t i = 1; i <= 3; i++) {
        CHECK_MSG(pp.res[i].rank == 3, "rank %zu", pp.res[i].rank);
        CHECK(pp.res[i].r == 12);
    }
    for (size_t j = 3; j < 12; j++) {
        CHECK(pp.pub.s[j] <= 1e-13 * pp.pub.s[0]);
    }
    check_exact(&pp, x);
    pipe_free(&pp);
    {
        /* all zero: rank 0, nothing divided by zero */
        fs_mat *z = fs_mat_new(10, 4);
        pipe_init(&pp, FS_FEDSVD_SAMPLES, 10, 4, 2, (const size_t[]){4, 6});
        run_pipe(&pp, z, views);
        CHECK(pp.rc == 0 && pp.res[1].rank == 0 && pp.pub.s[0] == 0.0);
        CHECK(fs_mat_max_abs(pp.res[1].u) == 0.0);
        pipe_free(&pp);
        fs_mat_free(z);
    }
    fs_mat_free(x);
}

static void test_masks_really_mask(void)
{
    struct fs_err err = {0};
    fs_mat *x = tl_randn(60, 10, 10);
    struct pipe pp, pp2;
    fs_mat views[SA_MAXP + 1];
    fs_svd ref = {0};
    static const size_t s3[] = {20, 15, 25};

    CHECK_OK(fs_svd_thin(x, &ref, &err), &err);
    pipe_init(&pp, FS_FEDSVD_SAMPLES, 60, 10, 3, s3);
    run_pipe(&pp, x, views);
    CHECK(pp.rc == 0 && pp.xprime != NULL);
    /* The server's matrix has X's singular values and norm but is not X. */
    CHECK(fabs(fs_mat_norm_fro(pp.xprime) - fs_mat_norm_fro(x)) <= 1e-13 * fs_mat_norm_fro(x));
    CHECK(tl_max_diff(pp.xprime, x) > 0.5 * fs_mat_max_abs(x));
    /* V' (what the server publishes) is not V: the mask B rotates it away. */
    CHECK(proj_dist(pp.pub.vc, ref.v, 3) > 0.3);
    CHECK(proj_dist(pp.res[1].v, ref.v, 3) <= 1e-10);
    {
        /* Another master seed: another X', same spectrum. */
        pipe_init(&pp2, FS_FEDSVD_SAMPLES, 60, 10, 3, s3);
        pp2.seed[0] ^= 1;
        run_pipe(&pp2, x, views);
        CHECK(pp2.rc == 0);
        CHECK(tl_max_diff(pp.xprime, pp2.xprime) > 0.5 * fs_mat_max_abs(x));
        CHECK(sv_err(pp.pub.s, pp2.pub.s, 10) <= 1e-13);
        pipe_free(&pp2);
    }
    pipe_free(&pp);
    fs_svd_clear(&ref);
    fs_mat_free(x);
}

/* Block-diagonal A (block 8 of N = 40): a party's contribution is exactly
 * zero outside the rows its slab pieces cover, its words do not depend on
 * how the vector is cut into chunks, and it keeps the norm of X_i. */
static void test_block_slab_words(void)
{
    struct fs_err err = {0};
    static const size_t sz[] = {7, 13, 20};
    struct fs_fedsvd_job job = {FS_FEDSVD_SAMPLES, 40, 6, 3, sz, 8, 0, 0};
    uint8_t seed[32] = {4, 5, 6};
    fs_fedsvd_maskset *ms = NULL;
    fs_mat *x = tl_randn(40, 6, 12);
    fs_fedsvd_party *p[4] = {0};
    fs_mat views[4];
    int e[3], E = 0;
    uint64_t len = fs_fedsvd_vector_len(&job);
    uint64_t *w = malloc(len * sizeof *w);
    uint64_t *w2 = malloc(len * sizeof *w2);
    double *dec = malloc(len * sizeof *dec);
    struct fs_fixedpt fp;
    size_t off = 0;
    char covered[4][40] = {{0}};

    CHECK_OK(fs_fedsvd_maskset_new(&job, seed, &ms, &err), &err);
    for (uint32_t i = 1; i <= 3; i++) {
        struct fs_fedsvd_keys *k = NULL;
        CHECK_OK(fs_fedsvd_maskset_party(ms, i, &k, &err), &err);
        if (k == NULL) {
            break;
        }
        CHECK(k->a_slab->npieces >= 1 && fs_mask_slab_rows(k->a_slab) < 40);
        for (size_t q = 0; q < k->a_slab->npieces; q++) {
            for (size_t a = 0; a < k->a_slab->pieces[q].q->rows; a++) {
                covered[i][k->a_slab->pieces[q].rows[a]] = 1;
            }
        }
        views[i] = fs_mat_view(x, off, 0, sz[i - 1], 6);
        CHECK_OK(fs_fedsvd_party_new(k, &views[i], &p[i], &err), &err);
        CHECK_OK(fs_fedsvd_party_prepare(p[i], &e[i - 1], &err), &err);
        off += sz[i - 1];
    }
    CHECK_OK(fs_fedsvd_public_exponent(e, 3, &E, &err), &err);
    CHECK_OK(fs_fedsvd_fixedpt(E, 3, &fp, &err), &err);
    for (uint32_t i = 1; i <= 3 && p[i] != NULL; i++) {
        size_t zero_out = 0, nout = 0, nonzero_in = 0;
        fs_mat contrib;
        CHECK_OK(fs_fedsvd_party_set_exponent(p[i], E, &err), &err);
        CHECK_OK(fs_fedsvd_party_encode(p[i], 0, w, (size_t)len, &err), &err);
        for (size_t c = 0; c < 6; c++) {
            for (size_t r = 0; r < 40; r++) {
                uint64_t v = w[c * 40 + r];
                if (!covered[i][r]) {
                    nout++;
                    zero_out += v == 0;
                } else {
                    nonzero_in += v != 0;
                }
            }
        }
        CHECK_MSG(zero_out == nout && nout > 0, "party %u: %zu of %zu outside words zero", i,
                  zero_out, nout);
        CHECK(nonzero_in > 0);
        /* chunks of 1, 4, 7, ... words, crossing columns, in reverse order */
        {
            uint64_t starts[64];
            size_t nst = 0;
            for (uint64_t o = 0, st = 1; o < len; o += st, st += 3) {
                starts[nst++] = o;
            }
            for (size_t q = nst; q-- > 0;) {
                uint64_t end = q + 1 < nst ? starts[q + 1] : len;
                CHECK_OK(fs_fedsvd_party_encode(p[i], starts[q], w2 + starts[q],
                                                (size_t)(end - starts[q]), &err),
                         &err);
            }
            CHECK(memcmp(w, w2, len * sizeof *w) == 0);
        }
        fs_fixedpt_decode(&fp, w, dec, (size_t)len);
        contrib = (fs_mat){40, 6, 40, dec, 0};
        CHECK(fabs(fs_mat_norm_fro(&contrib) - fs_mat_norm_fro(&views[i])) <=
              1e-12 * fs_mat_norm_fro(&views[i]));
    }
    {
        /* keys whose pieces share a row are refused, not summed into a wrong X'_i */
        struct fs_fedsvd_keys *k = NULL;
        fs_fedsvd_party *bad = NULL;
        int eb = 0;
        CHECK_OK(fs_fedsvd_maskset_party(ms, 2, &k, &err), &err);
        if (k != NULL && k->a_slab->npieces >= 2) {
            k->a_slab->pieces[1].rows[0] = k->a_slab->pieces[0].rows[0];
            CHECK_OK(fs_fedsvd_party_new(k, &views[2], &bad, &err), &err);
            CHECK_OK(fs_fedsvd_party_prepare(bad, &eb, &err), &err);
            CHECK_OK(fs_fedsvd_party_set_exponent(bad, E > eb ? E : eb, &err), &err);
            CHECK(fs_fedsvd_party_encode(bad, 0, w, (size_t)len, &err) == FS_EINVAL);
            CHECK_MSG(strstr(err.msg, "share row") != NULL, "%s", err.msg);
        } else {
            CHECK_MSG(0, "party 2 should span two blocks");
            fs_fedsvd_keys_free(k);
        }
        fs_fedsvd_party_free(bad);
    }
    for (uint32_t i = 1; i <= 3; i++) {
        fs_fedsvd_party_free(p[i]);
    }
    fs_fedsvd_maskset_free(ms);
    fs_mat_free(x);
    free(w);
    free(w2);
    free(dec);
}

static void test_party_view_of_masks(void)
{
    /* Each party gets only its own columns of A; together they form an
     * orthogonal matrix; a party's contribution spreads over all N rows and
     * keeps its norm; the contributions add up to X'. */
    struct fs_err err = {0};
    static const size_t sz[] = {7, 13, 20};
    struct fs_fedsvd_job job = {FS_FEDSVD_SAMPLES, 40, 6, 3, sz, 0, 0, 0};
    uint8_t seed[32] = {1, 2, 3};
    fs_fedsvd_maskset *ms = NULL;
    fs_mat *x = tl_randn(40, 6, 11);
    fs_mat *a = fs_mat_new(40, 40);
    fs_mat *sum = fs_mat_new(40, 6);
    fs_mat views[4];
    fs_fedsvd_party *p[4] = {0};
    int e[3], E = 0;
    uint64_t len = fs_fedsvd_vector_len(&job);
    uint64_t *w = malloc(len * sizeof *w);
    double *dec = malloc(len * sizeof *dec);
    struct fs_fixedpt fp;
    size_t off = 0;

    CHECK(len == 240);
    CHECK_OK(fs_fedsvd_maskset_new(&job, seed, &ms, &err), &err);
    for (uint32_t i = 1; i <= 3; i++) {
        struct fs_fedsvd_keys *k = NULL;
        fs_mat *slab = NULL;
        CHECK_OK(fs_fedsvd_maskset_party(ms, i, &k, &err), &err);
        CHECK(k->offset == off && k->size == sz[i - 1]);
        CHECK(k->a_slab->c0 == off && k->a_slab->nc == sz[i - 1] && k->a_slab->n == 40);
        CHECK_OK(fs_mask_slab_to_dense(k->a_slab, &slab, &err), &err);
        for (size_t c = 0; c < sz[i - 1]; c++) {
            memcpy(&FS_MAT_AT(a, 0, off + c), &FS_MAT_AT(slab, 0, c), 40 * sizeof(double));
        }
        fs_mat_free(slab);
        views[i] = fs_mat_view(x, off, 0, sz[i - 1], 6);
        CHECK_OK(fs_fedsvd_party_new(k, &views[i], &p[i], &err), &err);
        CHECK_OK(fs_fedsvd_party_prepare(p[i], &e[i - 1], &err), &err);
        off += sz[i - 1];
    }
    CHECK(tl_orth_err(a) <= 1e-13);
    CHECK_OK(fs_fedsvd_public_exponent(e, 3, &E, &err), &err);
    CHECK_OK(fs_fedsvd_fixedpt(E, 3, &fp, &err), &err);
    for (uint32_t i = 1; i <= 3; i++) {
        fs_mat contrib;
        size_t outside = 0;
        size_t r0 = i == 1 ? 0 : (i == 2 ? 7 : 20);
        CHECK_OK(fs_fedsvd_party_set_exponent(p[i], E, &err), &err);
        CHECK_OK(fs_fedsvd_party_encode(p[i], 0, w, (size_t)len, &err), &err);
        fs_fixedpt_decode(&fp, w, dec, (size_t)len);
        contrib = (fs_mat){40, 6, 40, dec, 0};
        CHECK(fabs(fs_mat_norm_fro(&contrib) - fs_mat_norm_fro(&views[i])) <=
              1e-12 * fs_mat_norm_fro(&views[i]));
        for (size_t r = 0; r < 40; r++) {
            if ((r < r0 || r >= r0 + sz[i - 1]) && fabs(FS_MAT_AT(&contrib, r, 0)) > 1e-3) {
                outside++;
            }
        }
        CHECK_MSG(outside >= (40 - sz[i - 1]) * 3 / 4, "party %u reaches only %zu outside rows", i,
                  outside);
        CHECK_OK(fs_mat_axpy(1.0, &contrib, sum, &err), &err);
    }
    {
        /* sum of the contributions = A X B: same singular values as X */
        fs_svd s1 = {0}, s2 = {0};
        CHECK_OK(fs_svd_thin(sum, &s1, &err), &err);
        CHECK_OK(fs_svd_thin(x, &s2, &err), &err);
        CHECK(sv_err(s1.s, s2.s, 6) <= 1e-13);
        fs_svd_clear(&s1);
        fs_svd_clear(&s2);
    }
    for (uint32_t i = 1; i <= 3; i++) {
        fs_fedsvd_party_free(p[i]);
    }
    fs_fedsvd_maskset_free(ms);
    fs_mat_free(a);
    fs_mat_free(sum);
    fs_mat_free(x);
    free(w);
    free(dec);
}

static void test_dropout_before_input(void)
{
    fs_mat *x = tl_randn(80, 10, 12);
    static const size_t sz[] = {20, 15, 25, 20};
    struct pipe pp;
    fs_mat views[SA_MAXP + 1];

    /* default policy: the job fails cleanly */
    pipe_init(&pp, FS_FEDSVD_SAMPLES, 80, 10, 4, sz);
    pp.t = 3;
    pp.drop[2] = SA_DROP_BEFORE_INPUT;
    run_pipe(&pp, x, views);
    CHECK(pp.rc == FS_ESTATE);
    CHECK(pp.pub.s == NULL && !pp.have[1]);
    pipe_free(&pp);

    /* allow_dropouts: exactly the SVD of the survivors' rows */
    pipe_init(&pp, FS_FEDSVD_SAMPLES, 80, 10, 4, sz);
    pp.t = 3;
    pp.drop[2] = SA_DROP_BEFORE_INPUT;
    pp.allow_dropouts = 1;
    run_pipe(&pp, x, views);
    CHECK(pp.rc == 0 && pp.n_included == 65);
    CHECK(!pp.have[2] && pp.have[1] && pp.have[3] && pp.have[4]);
    if (pp.rc == 0) {
        fs_mat *parts[3] = {NULL, NULL, NULL};
        fs_mat v1 = fs_mat_view(x, 0, 0, 20, 10);
        fs_mat v3 = fs_mat_view(x, 35, 0, 45, 10);
        parts[0] = fs_mat_dup(&v1);
        parts[1] = fs_mat_dup(&v3);
        fs_mat *surv = stack_rows(parts, 2);
        check_exact(&pp, surv);
        fs_mat_free(parts[0]);
        fs_mat_free(parts[1]);
        fs_mat_free(surv);
    }
    pipe_free(&pp);

    /* features: a dropped column owner, the survivors' columns */
    pipe_init(&pp, FS_FEDSVD_FEATURES, 80, 10, 3, (const size_t[]){3, 4, 3});
    pp.t = 2;
    pp.drop[3] = SA_DROP_BEFORE_INPUT;
    pp.allow_dropouts = 1;
    run_pipe(&pp, x, views);
    CHECK(pp.rc == 0 && pp.n_included == 7);
    if (pp.rc == 0) {
        fs_mat v = fs_mat_view(x, 0, 0, 80, 7);
        fs_mat *surv = fs_mat_dup(&v);
        check_exact(&pp, surv);
        fs_mat_free(surv);
    }
    pipe_free(&pp);
    fs_mat_free(x);
}

static void test_dropout_after_upload(void)
{
    /* A party that uploaded and then vanished is in the sum: the others get
     * the SVD of the full matrix, and their own blocks reconstruct. */
    struct fs_err err = {0};
    fs_mat *x = tl_randn(60, 8, 13);
    static const size_t sz[] = {15, 15, 10, 20};
    struct pipe pp;
    fs_mat views[SA_MAXP + 1];
    fs_svd ref = {0};

    pipe_init(&pp, FS_FEDSVD_SAMPLES, 60, 8, 4, sz);
    pp.t = 3;
    pp.drop[3] = SA_DROP_AT_CONSISTENCY;
    run_pipe(&pp, x, views);
    CHECK(pp.rc == 0 && pp.n_included == 60 && !pp.have[3]);
    CHECK_OK(fs_svd_thin(x, &ref, &err), &err);
    if (pp.rc == 0) {
        CHECK(sv_err(pp.pub.s, ref.s, 8) <= 1e-12);
        CHECK(proj_dist(pp.res[1].v, ref.v, 4) <= 1e-10);
        for (uint32_t i = 1; i <= 4; i++) {
            if (pp.have[i]) {
                double re = recon_err(&views[i], pp.res[i].u, pp.pub.s, pp.res[i].v, 8);
                CHECK_MSG(re <= 1e-12, "party %u block %.3g", i, re);
            }
        }
    }
    fs_svd_clear(&ref);
    pipe_free(&pp);
    fs_mat_free(x);
}

static void test_keys_codec(void)
{
    struct fs_err err = {0};
    static const size_t sz[] = {9, 14};
    struct fs_fedsvd_job job = {FS_FEDSVD_SAMPLES, 23, 5, 2, sz, 8, 0, 0};
    uint8_t seed[32] = {7};
    fs_fedsvd_maskset *ms = NULL;
    struct fs_fedsvd_keys *k = NULL, *k2 = NULL;
    uint8_t *blob = NULL, *bad = NULL;
    size_t len = 0;
    fs_mat *d1 = NULL, *d2 = NULL;

    CHECK_OK(fs_fedsvd_maskset_new(&job, seed, &ms, &err), &err);
    CHECK_OK(fs_fedsvd_maskset_party(ms, 2, &k, &err), &err);
    CHECK(k->a_slab->npieces >= 2); /* block 8 over 23 rows: the slab straddles blocks */
    CHECK_OK(fs_fedsvd_keys_encode(k, &blob, &len, &err), &err);
    CHECK_OK(fs_fedsvd_keys_decode(blob, len, &k2, &err), &err);
    CHECK(k2 != NULL && k2->party == 2 && k2->offset == 9 && k2->size == 14 && k2->rows == 23);
    CHECK(k2 != NULL && memcmp(k2->b_seed, k->b_seed, 32) == 0);
    CHECK(k2 != NULL && memcmp(k2->group_key, k->group_key, 32) == 0);
    CHECK_OK(fs_mask_slab_to_dense(k->a_slab, &d1, &err), &err);
    if (k2 != NULL) {
        CHECK_OK(fs_mask_slab_to_dense(k2->a_slab, &d2, &err), &err);
    }
    CHECK(d1 != NULL && d2 != NULL && tl_max_diff(d1, d2) == 0.0);
    /* every truncation is refused */
    for (size_t l = 0; l < len; l++) {
        struct fs_fedsvd_keys *t = NULL;
        int rc = fs_fedsvd_keys_decode(blob, l, &t, &err);
        CHECK_MSG(rc == FS_EFORMAT && t == NULL, "length %zu: %d", l, rc);
    }
    bad = malloc(len + 8);
    {
        struct fs_fedsvd_keys *t = NULL;
        /* trailing bytes */
        memcpy(bad, blob, len);
        memset(bad + len, 0, 8);
        CHECK(fs_fedsvd_keys_decode(bad, len + 8, &t, &err) == FS_EFORMAT);
        /* magic, party 0, party > parties, no parties, unknown partition, no rows,
         * offset beyond N */
        static const size_t at[] = {0, 8, 8, 12, 16, 24, 40};
        static const uint8_t val[] = {'X', 0, 3, 0, 2, 0, 23};
        for (int q = 0; q < 7; q++) {
            memcpy(bad, blob, len);
            bad[at[q]] = val[q];
            CHECK_MSG(fs_fedsvd_keys_decode(bad, len, &t, &err) == FS_EFORMAT, "field %d", q);
        }
        /* a row index out of range in the first piece */
        memcpy(bad, blob, len);
        bad[KEYS_TEST_FIRST_ROW + 3] = 0x7f;
        CHECK(fs_fedsvd_keys_decode(bad, len, &t, &err) == FS_EFORMAT);
        /* a NaN in a block */
        memcpy(bad, blob, len);
        memset(bad + len - 8, 0xff, 8);
        CHECK(fs_fedsvd_keys_decode(bad, len, &t, &err) == FS_EFORMAT);
        /* piece dimensions that would need more bytes than the blob has */
        memcpy(bad, blob, len);
        bad[136 + 16 + 4] = 0x10;
        CHECK(fs_fedsvd_keys_decode(bad, len, &t, &err) == FS_EFORMAT);
        CHECK(t == NULL);
    }
    /* a slab missing a piece is refused before encoding */
    {
        uint8_t *none = NULL;
        size_t nlen = 0;
        k->a_slab->npieces--;
        CHECK(fs_fedsvd_keys_encode(k, &none, &nlen, &err) == FS_EINVAL && none == NULL);
        k->a_slab->npieces++;
    }
    fs_fedsvd_wipe_free(blob, len);
    free(bad);
    fs_mat_free(d1);
    fs_mat_free(d2);
    fs_fedsvd_keys_free(k);
    fs_fedsvd_keys_free(k2);
    fs_fedsvd_maskset_free(ms);
}

/* Collects a key file in memory. */
struct membuf {
    uint8_t *p;
    size_t n;
};

static int mem_sink(void *ctx, const uint8_t *buf, size_t n, struct fs_err *err)
{
    struct membuf *m = ctx;
    uint8_t *q = realloc(m->p, m->n + n);

    if (q == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    memcpy(q + m->n, buf, n);
    m->p = q;
    m->n += n;
    return 0;
}

/* The masking server's wire: keys -> .npy files + descriptions -> assembled keys. */
static void test_keys_npy_pieces(void)
{
    struct fs_err err = {0};
    static const size_t sz[] = {9, 14};
    struct fs_fedsvd_job job = {FS_FEDSVD_SAMPLES, 23, 5, 2, sz, 8, 0, 0};
    uint8_t seed[32] = {9};
    fs_fedsvd_maskset *ms = NULL;
    struct fs_fedsvd_keys *k = NULL, *k2 = NULL;
    struct fs_fedsvd_piece_desc d[8];
    struct membuf f[8][2];
    uint8_t id[32];
    size_t n;
    fs_fedsvd_keys_asm *a = NULL;
    fs_mat *d1 = NULL, *d2 = NULL;

    memset(f, 0, sizeof f);
    CHECK_OK(fs_fedsvd_maskset_new(&job, seed, &ms, &err), &err);
    CHECK_OK(fs_fedsvd_maskset_party(ms, 2, &k, &err), &err);
    n = k->a_slab->npieces;
    CHECK(n >= 2 && n <= 8);
    for (size_t p = 0; p < n; p++) {
        for (int w = 0; w < 2; w++) {
            CHECK_OK(fs_fedsvd_keyfile_write(k, p, (enum fs_fedsvd_keyfile)w, mem_sink, &f[p][w],
                                             &d[p], &err),
                     &err);
            CHECK(f[p][w].n == fs_fedsvd_keyfile_len(d[p].r, d[p].c, (enum fs_fedsvd_keyfile)w));
            CHECK(f[p][w].n % 8 == 0 && f[p][w].p[0] == 0x93); /* header padded to 64 */
        }
    }
    CHECK(memcmp(f[0][1].p + 10, "{'descr': '<f8', 'fortran_order': True, 'shape': (", 50) == 0);
    CHECK(memcmp(f[0][0].p + 10, "{'descr': '<u8', 'fortran_order': False, 'shape': (", 51) == 0);
    CHECK_OK(fs_fedsvd_keys_id(k, d, n, id, &err), &err);

    /* the round trip gives the same slab */
    CHECK_OK(fs_fedsvd_keys_asm_new(k, d, n, id, 0, &a, &err), &err);
    for (size_t p = n; p-- > 0;) { /* any order */
        CHECK_OK(fs_fedsvd_keys_asm_add(a, p, FS_FEDSVD_KEYFILE_BLOCK, f[p][1].p, f[p][1].n, &err),
                 &err);
        CHECK_OK(fs_fedsvd_keys_asm_add(a, p, FS_FEDSVD_KEYFILE_ROWS, f[p][0].p, f[p][0].n, &err),
                 &err);
    }
    CHECK(fs_fedsvd_keys_asm_add(a, 0, FS_FEDSVD_KEYFILE_ROWS, f[0][0].p, f[0][0].n, &err) ==
          FS_ESTATE);
    CHECK_OK(fs_fedsvd_keys_asm_finish(a, &k2, &err), &err);
    fs_fedsvd_keys_asm_free(a);
    a = NULL;
    CHECK_OK(fs_mask_slab_to_dense(k->a_slab, &d1, &err), &err);
    if (k2 != NULL) {
        CHECK(k2->offset == 9 && k2->size == 14 && memcmp(k2->b_seed, k->b_seed, 32) == 0);
        CHECK_OK(fs_mask_slab_to_dense(k2->a_slab, &d2, &err), &err);
    }
    CHECK(d1 != NULL && d2 != NULL && tl_max_diff(d1, d2) == 0.0);

    /* a manifest that does not hang together is refused before any file */
    {
        struct fs_fedsvd_piece_desc e[8];
        uint8_t id2[32];
        memcpy(e, d, sizeof e);
        e[1].col0++; /* a gap */
        CHECK_OK(fs_fedsvd_keys_id(k, e, n, id2, &err), &err);
        CHECK(fs_fedsvd_keys_asm_new(k, e, n, id2, 0, &a, &err) == FS_EFORMAT && a == NULL);
        CHECK(fs_fedsvd_keys_asm_new(k, d, n - 1, id, 0, &a, &err) == FS_EFORMAT); /* short */
        memcpy(id2, id, 32);
        id2[5] ^= 1;
        CHECK(fs_fedsvd_keys_asm_new(k, d, n, id2, 0, &a, &err) == FS_EFORMAT); /* keys_id */
        CHECK(fs_fedsvd_keys_asm_new(k, d, n, id, 100, &a, &err) == FS_ERANGE); /* over the cap */
        CHECK(a == NULL);
    }
    /* files that are not the manifest's */
    CHECK_OK(fs_fedsvd_keys_asm_new(k, d, n, id, 0, &a, &err), &err);
    {
        uint8_t *bad = malloc(f[0][1].n);
        memcpy(bad, f[0][1].p, f[0][1].n);
        bad[f[0][1].n - 1] ^= 1; /* one bit of one value */
        CHECK(fs_fedsvd_keys_asm_add(a, 0, FS_FEDSVD_KEYFILE_BLOCK, bad, f[0][1].n, &err) ==
              FS_EFORMAT);
        CHECK(fs_fedsvd_keys_asm_add(a, 0, FS_FEDSVD_KEYFILE_BLOCK, f[0][1].p, f[0][1].n - 8,
                                     &err) == FS_EFORMAT); /* truncated */
        CHECK(fs_fedsvd_keys_asm_add(a, 0, FS_FEDSVD_KEYFILE_BLOCK, f[1][1].p, f[1][1].n, &err) ==
              FS_EFORMAT); /* another piece's */
        CHECK(fs_fedsvd_keys_asm_add(a, n, FS_FEDSVD_KEYFILE_ROWS, f[0][0].p, f[0][0].n, &err) ==
              FS_EFORMAT); /* no such piece */
        free(bad);
    }
    CHECK_OK(fs_fedsvd_keys_asm_add(a, 0, FS_FEDSVD_KEYFILE_ROWS, f[0][0].p, f[0][0].n, &err),
             &err);
    {
        struct fs_fedsvd_keys *none = NULL;
        CHECK(fs_fedsvd_keys_asm_finish(a, &none, &err) == FS_ESTATE && none == NULL);
    }
    fs_fedsvd_keys_asm_free(a); /* wipes the partial slab */
    for (size_t p = 0; p < n; p++) {
        free(f[p][0].p);
        free(f[p][1].p);
    }
    fs_mat_free(d1);
    fs_mat_free(d2);
    fs_fedsvd_keys_free(k);
    fs_fedsvd_keys_free(k2);
    fs_fedsvd_maskset_free(ms);
}

static void test_exponents_and_misuse(void)
{
    struct fs_err err = {0};
    int e = 0;
    static const size_t sz[] = {4, 6};
    struct fs_fedsvd_job job = {FS_FEDSVD_SAMPLES, 10, 3, 2, sz, 0, 0, 0};
    uint8_t seed[32] = {9};
    fs_fedsvd_maskset *ms = NULL;
    struct fs_fedsvd_keys *k = NULL;
    fs_fedsvd_party *p = NULL;
    fs_mat *x = tl_randn(4, 3, 14);
    fs_mat *wrong = tl_randn(5, 3, 15);
    uint64_t a[30], b[30];

    CHECK_OK(fs_fedsvd_exponent(0.0, &e, &err), &err);
    CHECK(e == FS_FEDSVD_EXP_MIN);
    CHECK_OK(fs_fedsvd_exponent(1.0, &e, &err), &err);
    CHECK(e == 1);
    CHECK_OK(fs_fedsvd_exponent(0.75, &e, &err), &err);
    CHECK(e == 0);
    CHECK_OK(fs_fedsvd_exponent(0.9999999, &e, &err), &err);
    CHECK(e == 1); /* the margin pushes it over */
    CHECK(fs_fedsvd_exponent(INFINITY, &e, &err) == FS_ERANGE);
    CHECK(fs_fedsvd_exponent(0x1p1010, &e, &err) == FS_ERANGE);
    CHECK(fs_fedsvd_public_exponent((const int[]){3, -2, 1001}, 3, &e, &err) == FS_EINVAL);
    CHECK_OK(fs_fedsvd_public_exponent((const int[]){3, -2, 7}, 3, &e, &err), &err);
    CHECK(e == 7);
    /* job checks */
    job.sizes = (const size_t[]){4, 5};
    CHECK(fs_fedsvd_job_check(&job, &err) == FS_EINVAL);
    CHECK(fs_fedsvd_vector_len(&job) == 0);
    job.sizes = (const size_t[]){0, 10};
    CHECK(fs_fedsvd_job_check(&job, &err) == FS_EINVAL);
    job.sizes = sz;
    CHECK_OK(fs_fedsvd_job_check(&job, &err), &err);
    CHECK(fs_fedsvd_server_check_contributors(&job, 1, (const uint32_t[]){1, 1}, 2, NULL, &err) ==
          FS_EINVAL);
    CHECK(fs_fedsvd_server_check_contributors(&job, 1, (const uint32_t[]){3}, 1, NULL, &err) ==
          FS_EINVAL);
    CHECK(fs_fedsvd_server_check_contributors(&job, 1, NULL, 0, NULL, &err) == FS_ESTATE);

    CHECK_OK(fs_fedsvd_maskset_new(&job, seed, &ms, &err), &err);
    CHECK(fs_fedsvd_maskset_party(ms, 3, &k, &err) == FS_EINVAL && k == NULL);
    /* wrong data shape: the keys are consumed anyway */
    CHECK_OK(fs_fedsvd_maskset_party(ms, 1, &k, &err), &err);
    CHECK(fs_fedsvd_party_new(k, wrong, &p, &err) == FS_EINVAL && p == NULL);
    CHECK_OK(fs_fedsvd_maskset_party(ms, 1, &k, &err), &err);
    CHECK_OK(fs_fedsvd_party_new(k, x, &p, &err), &err);
    CHECK(fs_fedsvd_party_encode(p, 0, a, 30, &err) == FS_ESTATE);
    CHECK(fs_fedsvd_party_set_exponent(p, 0, &err) == FS_ESTATE);
    CHECK(!fs_fedsvd_party_prepared(p));
    CHECK_OK(fs_fedsvd_party_prepare(p, &e, &err), &err);
    CHECK(fs_fedsvd_party_prepared(p));
    {
        /* prepared early (an agent waiting for the others): the exponent step finds it done */
        int e2 = -99;
        CHECK_OK(fs_fedsvd_party_prepare(p, &e2, &err), &err);
        CHECK(e2 == e);
    }
    CHECK(fs_fedsvd_party_set_exponent(p, e - 1, &err) == FS_EINVAL);
    CHECK_OK(fs_fedsvd_party_set_exponent(p, e + 2, &err), &err);
    CHECK(fs_fedsvd_party_set_exponent(p, e + 3, &err) == FS_ESTATE);
    CHECK(fs_fedsvd_party_encode(p, 25, a, 6, &err) == FS_EINVAL);
    /* chunks in any order and size give the same words, and repeat exactly */
    CHECK_OK(fs_fedsvd_party_encode(p, 0, a, 30, &err), &err);
    for (size_t off = 0, st = 1; off < 30; off += st, st += 2) {
        size_t m = off + st > 30 ? 30 - off : st;
        CHECK_OK(fs_fedsvd_party_encode(p, off, b + off, m, &err), &err);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_OK(fs_fedsvd_party_encode(p, 7, b, 11, &err), &err);
    CHECK(memcmp(a + 7, b, 11 * sizeof *b) == 0);
    fs_fedsvd_party_end_upload(p);
    CHECK(fs_fedsvd_party_prepared(p)); /* nothing left to prepare */
    CHECK(fs_fedsvd_party_encode(p, 0, a, 30, &err) == FS_ESTATE);
    {
        /* a malformed publication is refused */
        struct fs_fedsvd_published pub = {0};
        struct fs_fedsvd_result r = {0};
        pub.r = 3;
        pub.s = (double[]){1.0, 2.0, 0.5}; /* not descending */
        pub.vc = fs_mat_new(3, 3);
        CHECK(fs_fedsvd_party_recover(p, &pub, 0.0, &r, &err) == FS_EINVAL);
        pub.s = (double[]){2.0, 1.0, 0.5};
        pub.r = 4;
        CHECK(fs_fedsvd_party_recover(p, &pub, 0.0, &r, &err) == FS_EINVAL);
        fs_mat_free(pub.vc);
    }
    {
        /* decoding in place gives the same matrix bit for bit; a bad call frees the sum */
        fs_mat *y1 = NULL, *y2 = NULL;
        uint64_t *z = malloc(30 * sizeof *z);
        uint64_t *z2 = malloc(30 * sizeof *z2);
        if (z != NULL && z2 != NULL) {
            for (size_t i = 0; i < 30; i++) {
                z[i] = i % 3 == 0 ? (uint64_t)0 - (uint64_t)(i * 977 + 1) : (uint64_t)(i * 12345);
            }
            memcpy(z2, z, 30 * sizeof *z);
            CHECK_OK(fs_fedsvd_server_decode(&job, 3, z, 30, &y1, &err), &err);
            CHECK_OK(fs_fedsvd_server_decode_owned(&job, 3, z, 30, &y2, &err), &err);
            z = NULL; /* y2 owns it */
            CHECK(y1 != NULL && y2 != NULL && y2->rows == y1->rows && y2->cols == y1->cols &&
                  memcmp(y1->data, y2->data, 30 * sizeof(double)) == 0);
            fs_mat_free(y1);
            y1 = NULL;
            CHECK(fs_fedsvd_server_decode_owned(&job, 3, z2, 29, &y1, &err) == FS_EINVAL);
            CHECK(y1 == NULL);
            z2 = NULL; /* freed by the refused call (valgrind/ASan check) */
        }
        free(z);
        free(z2);
        fs_mat_free(y2);
    }
    {
        /* the server refuses a wrong length, and k beyond min(m, n) */
        fs_mat *y = NULL;
        uint64_t z[30] = {0};
        struct fs_fedsvd_published pub = {0};
        CHECK(fs_fedsvd_server_decode(&job, 0, z, 29, &y, &err) == FS_EINVAL);
        CHECK_OK(fs_fedsvd_server_decode(&job, 0, z, 30, &y, &err), &err);
        CHECK(fs_fedsvd_server_factorize(y, 4, FS_TOPK_AUTO, NULL, &pub, &err) == FS_EINVAL);
        fs_mat_free(y);
    }
    fs_fedsvd_party_free(p);
    fs_fedsvd_maskset_free(ms);
    fs_mat_free(x);
    fs_mat_free(wrong);
}

int main(void)
{
    RUN(test_samples_thin_2_3_5_parties);
    RUN(test_samples_block_masks);
    RUN(test_topk);
    RUN(test_randomized_deterministic);
    RUN(test_features_partition);
    RUN(test_edge_shapes);
    RUN(test_rank_deficient);
    RUN(test_masks_really_mask);
    RUN(test_party_view_of_masks);
    RUN(test_block_slab_words);
    RUN(test_dropout_before_input);
    RUN(test_dropout_after_upload);
    RUN(test_keys_codec);
    RUN(test_keys_npy_pieces);
    RUN(test_exponents_and_misuse);
    return TEST_END("test_fedsvd");
}
