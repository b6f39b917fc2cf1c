/* Sharded aggregation (TSQR) in one process: the shard-blocked layout, a
 * FedSVD job whose masked matrix is summed over S = 2, 3, 4 windows (one
 * key setup and unmasking on the coordinator, data-only windows elsewhere),
 * each window reduced to its R factor and the stack factorized, against the
 * unsharded run of the same job (same masks); a party dropping on one shard
 * only; and bad input. */
#include "la/qr.h"
#include "proto/fedsvd.h"
#include "proto/fedsvd_shard.h"
#include "test.h"
#include "test_fedsvd_util.h"
#include "test_shard_util.h"

#include <float.h>
#include <stdlib.h>

struct srun {
    /* in */
    size_t rows, cols;
    uint32_t K;
    size_t sizes[SA_MAXP];
    uint32_t S; /* 0 = unsharded */
    size_t k;
    enum fs_topk_method method;
    uint32_t chunk;
    uint32_t drop_party; /* 0 = nobody; sharded: stops on drop_shard; unsharded: never uploads */
    uint32_t drop_shard;
    int allow_dropouts;
    uint8_t seed[32];
    /* out */
    int rc;
    int E;
    fs_fedsvd_party *p[SA_MAXP + 1];
    fs_mat views[SA_MAXP + 1];
    struct fs_fedsvd_published pub;
    struct fs_fedsvd_result res; /* party 1's */
    size_t n_included;
    int sums_exact; /* sharded with a dropout: every window sum is the survivors' exactly */
};

static void srun_init(struct srun *r, size_t rows, size_t cols, uint32_t K, const size_t *sizes,
                      uint32_t S)
{
    memset(r, 0, sizeof *r);
    r->rows = rows;
    r->cols = cols;
    r->K = K;
    r->S = S;
    r->chunk = 97; /* odd: chunks straddle columns */
    memcpy(r->sizes, sizes, K * sizeof *sizes);
    for (int b = 0; b < 32; b++) {
        r->seed[b] = (uint8_t)(0x21 + 3 * b);
    }
}

static void srun_free(struct srun *r)
{
    fs_fedsvd_published_clear(&r->pub);
    fs_fedsvd_result_clear(&r->res);
    for (uint32_t i = 1; i <= r->K; i++) {
        fs_fedsvd_party_free(r->p[i]);
    }
}

static struct fs_fedsvd_job srun_job(const struct srun *r)
{
    struct fs_fedsvd_job job;

    memset(&job, 0, sizeof job);
    job.partition = FS_FEDSVD_SAMPLES;
    job.rows = r->rows;
    job.cols = r->cols;
    job.parties = r->K;
    job.sizes = r->sizes;
    job.shards = r->S;
    return job;
}

static int masked_in(void *ctx, uint32_t party, fs_secagg_client *c, uint64_t off, uint64_t *y,
                     size_t cnt, struct fs_err *err)
{
    struct srun *r = ctx;
    return fs_fedsvd_party_masked(r->p[party], c, off, y, cnt, err);
}

/* Masking server and parties (same master seed: the same A and B in every run). */
static void make_parties(struct srun *r, const fs_mat *x)
{
    struct fs_err err = {0};
    struct fs_fedsvd_job job = srun_job(r);
    fs_fedsvd_maskset *ms = NULL;
    int e[SA_MAXP];
    size_t off = 0;

    CHECK_OK(fs_fedsvd_maskset_new(&job, r->seed, &ms, &err), &err);
    for (uint32_t i = 1; i <= r->K; i++) {
        struct fs_fedsvd_keys *keys = NULL;
        r->views[i] = fs_mat_view(x, off, 0, r->sizes[i - 1], x->cols);
        off += r->sizes[i - 1];
        CHECK_OK(fs_fedsvd_maskset_party(ms, i, &keys, &err), &err);
        CHECK_OK(fs_fedsvd_party_new(keys, &r->views[i], &r->p[i], &err), &err);
        CHECK_OK(fs_fedsvd_party_set_shards(r->p[i], r->S, &err), &err);
        CHECK_OK(fs_fedsvd_party_prepare(r->p[i], &e[i - 1], &err), &err);
    }
    fs_fedsvd_maskset_free(ms);
    CHECK_OK(fs_fedsvd_public_exponent(e, r->K, &r->E, &err), &err);
    for (uint32_t i = 1; i <= r->K; i++) {
        CHECK_OK(fs_fedsvd_party_set_exponent(r->p[i], r->E, &err), &err);
    }
}

/* The survivors' plain encodings summed (mod 2^64) over window s. */
static int window_is_survivors_sum(struct srun *r, const struct shard_agg *g, uint32_t s)
{
    struct fs_err err = {0};
    uint64_t *want = calloc(g->len[s], sizeof *want);
    uint64_t *one = malloc(g->len[s] * sizeof *one);
    int same = want != NULL && one != NULL;

    for (uint32_t i = 1; same && i <= r->K; i++) {
        if (i == r->drop_party) {
            continue;
        }
        if (fs_fedsvd_party_encode(r->p[i], g->off[s], one, g->len[s], &err) != 0) {
            same = 0;
            break;
        }
        for (uint64_t w = 0; w < g->len[s]; w++) {
            want[w] += one[w];
        }
    }
    same = same && memcmp(want, g->sum[s], g->len[s] * sizeof *want) == 0;
    free(want);
    free(one);
    return same;
}

static void run(struct srun *r, const fs_mat *x)
{
    struct fs_err err = {0};
    struct fs_fedsvd_job job = srun_job(r);
    struct memstore coord = {0};
    struct fs_secagg_chunk_store cs = ms_store(&coord);
    static struct shard_agg g; /* 2.2 MB: off the stack (valgrind) */
    struct sa j;
    const uint64_t *sum = NULL;
    uint32_t *u3 = NULL;
    size_t n3 = 0;

    memset(&g, 0, sizeof g);
    make_parties(r, x);
    CHECK(sa_init_store(&j, r->K, r->K > 2 ? r->K - 1 : r->K, 1, r->chunk, &cs) == 0);
    if (r->S > 0) {
        g.S = r->S;
        g.drop_party = r->drop_party;
        g.drop_shard = r->drop_shard;
        r->rc = shard_aggregate(&j, &job, 0, masked_in, r, &g) == 0 ? 0 : FS_ESTATE;
        if (r->rc == 0 && r->drop_party != 0) {
            r->sums_exact = 1;
            for (uint32_t s = 0; s < r->S; s++) {
                r->sums_exact = r->sums_exact && window_is_survivors_sum(r, &g, s);
            }
        }
        u3 = g.u3;
        n3 = g.n3;
    } else {
        enum sa_drop drop[SA_MAXP + 1] = {SA_STAY};
        drop[r->drop_party] = r->drop_party != 0 ? SA_DROP_BEFORE_INPUT : SA_STAY;
        r->rc =
            sa_aggregate(&j, 0, fs_fedsvd_vector_len(&job), masked_in, r, drop, &sum, &u3, &n3) == 0
                ? 0
                : FS_ESTATE;
    }
    for (uint32_t i = 1; i <= r->K; i++) {
        fs_fedsvd_party_end_upload(r->p[i]);
    }
    if (r->rc == 0) {
        r->rc = fs_fedsvd_server_check_contributors(&job, r->allow_dropouts, u3, n3, &r->n_included,
                                                    &err);
    }
    if (r->rc == 0 && r->S > 0) {
        r->rc = shard_factorize(&job, &g, r->E, r->k, r->method, r->seed, &r->pub);
    } else if (r->rc == 0) {
        fs_mat *y = NULL;
        CHECK_OK(fs_fedsvd_server_decode(&job, r->E, sum, fs_fedsvd_vector_len(&job), &y, &err),
                 &err);
        CHECK_OK(fs_fedsvd_server_factorize(y, r->k, r->method, r->seed, &r->pub, &err), &err);
        fs_mat_free(y);
    }
    if (r->rc == 0 && r->drop_party != 1) {
        CHECK_OK(fs_fedsvd_party_recover(r->p[1], &r->pub, 0.0, &r->res, &err), &err);
    }
    if (r->S == 0) {
        free(u3);
    }
    shard_agg_free(&g);
    sa_free(&j);
    ms_free(&coord);
}

/* Sharded equals unsharded: singular values to 1e-12 of s_1, the shared
 * factor's leading subspaces to 1e-12, ||X'||_F^2 and party 1's rank. */
static void check_same(const struct srun *a, const struct srun *b)
{
    size_t r = a->pub.r;
    size_t ks[3] = {1, r / 2, r > 1 ? r - 1 : 1};
    double se;

    CHECK(a->rc == 0 && b->rc == 0);
    if (a->rc != 0 || b->rc != 0) {
        return;
    }
    CHECK(a->pub.r == b->pub.r && a->pub.vc->rows == b->pub.vc->rows);
    se = sv_err(a->pub.s, b->pub.s, r);
    CHECK_MSG(se <= 1e-12, "singular values differ by %.3g of s_1", se);
    CHECK_MSG(fabs(a->pub.total_sq - b->pub.total_sq) <= 1e-12 * b->pub.total_sq,
              "||X'||^2 %.17g vs %.17g", a->pub.total_sq, b->pub.total_sq);
    for (int q = 0; q < 3; q++) {
        double pd;
        if (ks[q] == 0 || ks[q] > r || (ks[q] < r && !(b->pub.s[ks[q] - 1] > b->pub.s[ks[q]]))) {
            continue;
        }
        pd = proj_dist(a->pub.vc, b->pub.vc, ks[q]);
        CHECK_MSG(pd <= 1e-12, "V' projection distance %.3g at k = %zu", pd, ks[q]);
        if (a->res.v != NULL && b->res.v != NULL) {
            pd = proj_dist(a->res.v, b->res.v, ks[q]);
            CHECK_MSG(pd <= 1e-12, "V projection distance %.3g at k = %zu", pd, ks[q]);
        }
    }
    if (a->res.v != NULL && b->res.v != NULL) {
        CHECK(a->res.rank == b->res.rank);
        /* the sign convention holds: the recovered V agree column by column */
        CHECK_MSG(col_err(a->res.v, b->res.v, a->res.rank) <= 1e-10 &&
                      tl_max_diff(a->res.v, b->res.v) <= 1e-10,
                  "recovered V differ by %.3g", tl_max_diff(a->res.v, b->res.v));
    }
}

static void compare_case(const fs_mat *x, uint32_t K, const size_t *sizes, uint32_t S, size_t k,
                         enum fs_topk_method method)
{
    struct srun a, b;

    srun_init(&a, x->rows, x->cols, K, sizes, S);
    srun_init(&b, x->rows, x->cols, K, sizes, 0);
    a.k = b.k = k;
    a.method = b.method = method;
    run(&a, x);
    run(&b, x);
    CHECK_MSG(a.rc == 0 && b.rc == 0, "S = %u: rc %d / %d", S, a.rc, b.rc);
    check_same(&a, &b);
    srun_free(&a);
    srun_free(&b);
}

/* (a) S = 1 is the unsharded layout word for word; S = 3 puts word (row,
 * col) of Y'_i at window s = the shard of row, local (row - lo_s) + col
 * (hi_s - lo_s). */
static void test_layout(void)
{
    struct fs_err err = {0};
    fs_mat *x = tl_randn(31, 7, 3);
    static const size_t sz[] = {12, 19};
    struct srun r0, r1, r3;
    struct fs_fedsvd_job job;
    uint64_t len = 31 * 7;
    uint64_t *w0 = calloc(len, sizeof *w0);
    uint64_t *w1 = calloc(len, sizeof *w1);
    uint64_t *w3 = calloc(len, sizeof *w3);

    srun_init(&r0, 31, 7, 2, sz, 0);
    srun_init(&r1, 31, 7, 2, sz, 1);
    srun_init(&r3, 31, 7, 2, sz, 3);
    make_parties(&r0, x);
    make_parties(&r1, x);
    make_parties(&r3, x);
    /* unsharded in one go; S = 1 in odd chunks */
    CHECK_OK(fs_fedsvd_party_encode(r0.p[2], 0, w0, (size_t)len, &err), &err);
    for (uint64_t off = 0; off < len; off += 13) {
        size_t m = (size_t)(len - off < 13 ? len - off : 13);
        CHECK_OK(fs_fedsvd_party_encode(r1.p[2], off, w1 + off, m, &err), &err);
    }
    CHECK(memcmp(w0, w1, len * sizeof *w0) == 0);
    /* S = 3: window by window, in chunks inside each */
    job = srun_job(&r3);
    for (uint32_t s = 0; s < 3; s++) {
        uint64_t lo, hi, off, wl;
        CHECK(fs_fedsvd_shard_rows(&job, s, &lo, &hi) == 0);
        CHECK(fs_fedsvd_shard_window(&job, s, &off, &wl) == 0);
        CHECK(lo == (uint64_t)s * 31 / 3 && hi == (uint64_t)(s + 1) * 31 / 3);
        CHECK(off == lo * 7 && wl == (hi - lo) * 7);
        for (uint64_t c = 0; c < wl; c += 5) {
            size_t m = (size_t)(wl - c < 5 ? wl - c : 5);
            CHECK_OK(fs_fedsvd_party_encode(r3.p[2], off + c, w3 + off + c, m, &err), &err);
        }
        for (uint64_t row = lo; row < hi; row++) {
            for (uint64_t col = 0; col < 7; col++) {
                CHECK(w3[off + (row - lo) + col * (hi - lo)] == w0[row + col * 31]);
            }
        }
        /* a chunk that crosses into the next window is refused */
        if (s < 2) {
            CHECK(fs_fedsvd_party_encode(r3.p[2], off + wl - 2, w3, 4, &err) == FS_EINVAL);
        }
    }
    CHECK(memcmp(w0, w3, len * sizeof *w0) != 0); /* the layout did change */
    free(w0);
    free(w1);
    free(w3);
    srun_free(&r0);
    srun_free(&r1);
    srun_free(&r3);
    fs_mat_free(x);
}

/* fs_qr_keep_r: R^T R = A^T A, R upper triangular (trapezoidal when wide),
 * compact, for tall, wide and square inputs. */
static void test_qr_keep_r(void)
{
    struct fs_err err = {0};
    static const size_t shapes[][2] = {{50, 7}, {4, 9}, {6, 6}, {1, 3}};

    for (size_t q = 0; q < 4; q++) {
        size_t m = shapes[q][0], n = shapes[q][1], r = m < n ? m : n;
        fs_mat *a = tl_randn(m, n, (uint8_t)(40 + q));
        fs_mat *g = fs_mat_new(n, n);
        CHECK_OK(fs_mat_gemm('T', 'N', 1.0, a, a, 0.0, g, &err), &err);
        CHECK_OK(fs_qr_keep_r(a, &err), &err);
        CHECK(a->rows == r && a->cols == n && a->ld == r);
        for (size_t j = 0; j < n; j++) {
            for (size_t i = j + 1; i < r; i++) {
                CHECK(FS_MAT_AT(a, i, j) == 0.0);
            }
        }
        CHECK_OK(fs_mat_gemm('T', 'N', -1.0, a, a, 1.0, g, &err), &err);
        CHECK_MSG(fs_mat_norm_fro(g) <= 1e-12 * (double)(m * n), "R^T R - A^T A: %.3g",
                  fs_mat_norm_fro(g));
        fs_mat_free(a);
        fs_mat_free(g);
    }
    CHECK(fs_qr_keep_r(NULL, &err) == FS_EINVAL);
}

/* (b) thin: S = 2, 3, 4 against unsharded, several parties. */
static void test_sharded_equals_unsharded(void)
{
    fs_mat *x = tl_randn(90, 10, 5);
    static const size_t s3[] = {30, 25, 35};
    static const size_t s4[] = {10, 30, 20, 30};

    compare_case(x, 3, s3, 2, 0, FS_TOPK_AUTO);
    compare_case(x, 3, s3, 3, 0, FS_TOPK_AUTO);
    compare_case(x, 4, s4, 4, 0, FS_TOPK_AUTO);
    fs_mat_free(x);
}

/* Shards with fewer rows than columns (R_s trapezoidal), and m < n. */
static void test_short_shards(void)
{
    fs_mat *x = tl_randn(30, 12, 7);
    fs_mat *w = tl_randn(7, 10, 8);
    static const size_t s3[] = {10, 9, 11};
    static const size_t s2[] = {3, 4};

    compare_case(x, 3, s3, 4, 0, FS_TOPK_AUTO);
    compare_case(w, 2, s2, 3, 0, FS_TOPK_AUTO);
    fs_mat_free(x);
    fs_mat_free(w);
}

/* Top-k methods as unsharded. */
static void test_topk(void)
{
    fs_mat *x = tl_randn(80, 12, 9);
    static const size_t s3[] = {30, 20, 30};

    compare_case(x, 3, s3, 3, 3, FS_TOPK_GESVDX);
    compare_case(x, 3, s3, 2, 8, FS_TOPK_AUTO); /* thin, then truncated */
    compare_case(x, 3, s3, 4, 3, FS_TOPK_RANDOMIZED);
    fs_mat_free(x);
}

/* (c) a party drops before its masked input is complete on one shard only. */
static void test_dropout_one_shard(void)
{
    fs_mat *x = tl_randn(80, 9, 11);
    static const size_t sz[] = {20, 15, 25, 20};

    /* on the coordinator's window, on a data-only one */
    for (uint32_t ds = 0; ds < 3; ds += 2) {
        struct srun a, b;
        if (ds == 2) {
            /* default policy: refused */
            srun_init(&a, 80, 9, 4, sz, 3);
            a.drop_party = 2;
            a.drop_shard = ds;
            run(&a, x);
            CHECK_MSG(a.rc == FS_ESTATE, "drop on shard %u: rc %d", ds, a.rc);
            srun_free(&a);
        }
        /* allowed: the survivors' sum exactly, and the unsharded survivors' SVD */
        srun_init(&a, 80, 9, 4, sz, 3);
        srun_init(&b, 80, 9, 4, sz, 0);
        a.drop_party = b.drop_party = 2;
        a.drop_shard = ds;
        a.allow_dropouts = b.allow_dropouts = 1;
        run(&a, x);
        run(&b, x);
        CHECK_MSG(a.rc == 0 && a.n_included == 65, "drop on shard %u: rc %d, %zu rows", ds, a.rc,
                  a.n_included);
        CHECK_MSG(a.sums_exact, "drop on shard %u: a window's sum is not the survivors'", ds);
        check_same(&a, &b);
        srun_free(&a);
        srun_free(&b);
    }
    fs_mat_free(x);
}

/* (d) bad input. */
static void test_bad_input(void)
{
    struct fs_err err = {0};
    static const size_t sz[] = {4, 6};
    struct fs_fedsvd_job job = {FS_FEDSVD_SAMPLES, 10, 3, 2, sz, 0, 0, 4};
    fs_secagg_server *w = NULL;
    uint64_t lo, hi, buf[8] = {0};
    const uint64_t *sum = NULL;
    uint8_t done[2];
    uint32_t u3[2] = {1, 2};
    struct fs_prg_term plan[1];

    /* jobs */
    CHECK(fs_fedsvd_job_check(&job, &err) == 0);
    job.partition = FS_FEDSVD_FEATURES;
    job.rows = 3;
    job.cols = 10;
    CHECK(fs_fedsvd_job_check(&job, &err) == FS_EINVAL);
    job.shards = 1;
    CHECK(fs_fedsvd_job_check(&job, &err) == 0);
    job = (struct fs_fedsvd_job){FS_FEDSVD_SAMPLES, 10, 3, 2, sz, 0, 0, 11};
    CHECK(fs_fedsvd_job_check(&job, &err) == FS_EINVAL); /* a shard without rows */
    job.shards = 17;
    CHECK(fs_fedsvd_job_check(&job, &err) == FS_EINVAL);
    job.shards = 4;
    CHECK(fs_fedsvd_shard_rows(&job, 4, &lo, &hi) == FS_EINVAL);
    CHECK(fs_fedsvd_shard_rows(&job, 3, &lo, &hi) == 0 && lo == 7 && hi == 10);
    {
        uint64_t *s = calloc(9, sizeof *s);
        fs_mat *r = NULL;
        CHECK(fs_fedsvd_shard_r(&job, 4, 0, s, &r, &err) == FS_EINVAL && r == NULL); /* freed */
    }
    {
        struct fs_fedsvd_published pub = {0};
        fs_mat *rs[1] = {NULL};
        CHECK(fs_fedsvd_tsqr_factorize(&job, rs, 1, 0, FS_TOPK_AUTO, NULL, &pub, &err) ==
              FS_EINVAL);
    }
    /* decoding a sharded job's vector as a whole is refused */
    {
        fs_mat *y = NULL;
        uint64_t v[30] = {0};
        CHECK(fs_fedsvd_server_decode(&job, 0, v, 30, &y, &err) == FS_EINVAL && y == NULL);
    }

    /* windows */
    CHECK(fs_secagg_shard_new(2, 0, 100, 90, 11, 4, &w, &err) == FS_EINVAL && w == NULL);
    CHECK(fs_secagg_shard_new(2, 0, 100, 101, 1, 4, &w, &err) == FS_EINVAL);
    CHECK(fs_secagg_shard_new(2, 0, 100, 10, 0, 4, &w, &err) == FS_EINVAL);
    CHECK_OK(fs_secagg_shard_new(2, 0, 100, 90, 10, 4, &w, &err), &err);
    if (w == NULL) {
        return;
    }
    /* window of 10 words in chunks of 4: local chunks 0, 1, 2 (2 words) */
    CHECK(fs_secagg_server_add_masked(w, 1, 3, buf, 4, &err) == FS_EINVAL);
    CHECK(fs_secagg_server_add_masked(w, 1, 2, buf, 4, &err) == FS_EINVAL);
    CHECK(fs_secagg_server_add_masked(w, 3, 0, buf, 4, &err) == FS_EINVAL);
    CHECK_OK(fs_secagg_server_add_masked(w, 1, 0, buf, 4, &err), &err);
    CHECK_OK(fs_secagg_server_add_masked(w, 1, 1, buf, 4, &err), &err);
    CHECK_OK(fs_secagg_server_add_masked(w, 1, 2, buf, 2, &err), &err);
    CHECK(fs_secagg_shard_complete(w, done) == 0 && done[0] == 1 && done[1] == 0);
    /* a data-only window has no reveals of its own */
    CHECK(fs_secagg_server_finish(w, &sum, &err) != 0);
    /* the plan before party 2 is complete here */
    memset(plan, 0, sizeof plan);
    plan[0].sign = 1;
    CHECK(fs_secagg_shard_finish(w, u3, 2, plan, 1, &sum, &err) == FS_EINVAL && sum == NULL);
    plan[0].sign = 0;
    CHECK(fs_secagg_shard_finish(w, u3, 1, plan, 1, &sum, &err) == FS_EINVAL);
    u3[0] = 3;
    plan[0].sign = -1;
    CHECK(fs_secagg_shard_finish(w, u3, 1, plan, 1, &sum, &err) == FS_EINVAL);
    u3[0] = 1;
    /* party 2 sent nothing and is not in U3: fine; applied twice: refused */
    CHECK_OK(fs_secagg_shard_finish(w, u3, 1, plan, 1, &sum, &err), &err);
    CHECK(sum != NULL);
    CHECK(fs_secagg_shard_finish(w, u3, 1, plan, 1, &sum, &err) == FS_ESTATE && sum == NULL);
    /* uploads after the window closed: an identical repeat is accepted, other bytes not */
    CHECK(fs_secagg_server_add_masked(w, 1, 0, buf, 4, &err) == 0);
    buf[0] = 1;
    CHECK(fs_secagg_server_add_masked(w, 1, 0, buf, 4, &err) == FS_ECONFLICT);
    fs_secagg_server_free(w);

    /* a party's chunk spanning two windows; a features party cannot shard */
    {
        struct sa j;
        CHECK(sa_init(&j, 2, 2, 1, 4) == 0);
        CHECK(fs_secagg_server_begin_window(j.s, 0, 100, 95, 6, &err) == FS_EINVAL);
        CHECK(fs_secagg_server_begin_window(j.s, 0, 100, 0, 0, &err) == FS_EINVAL);
        CHECK_OK(fs_secagg_server_begin_window(j.s, 0, 100, 0, 40, &err), &err);
        CHECK(fs_secagg_server_add_masked(j.s, 1, 10, buf, 4, &err) == FS_EINVAL);
        CHECK(fs_secagg_shard_finish(j.s, u3, 1, plan, 0, &sum, &err) == FS_EINVAL);
        sa_free(&j);
    }
}

/* A data-only window takes streamed uploads with local chunk indices; a
 * broken-off chunk leaves the sum, and so does a party outside U3. */
static void test_streamed_window(void)
{
    struct fs_err err = {0};
    struct memstore st;
    struct fs_secagg_chunk_store cs = ms_store(&st);
    fs_secagg_server *w = NULL;
    struct fs_secagg_upload up;
    int stream = 0;
    uint64_t a[4] = {1, 2, 3, 4}, b[2] = {5, 6};
    const uint64_t *sum = NULL;
    uint32_t u3[1] = {1};
    uint8_t done[2];

    memset(&st, 0, sizeof st);
    /* words 50..55 of 100, chunks of 4: local chunk 0 (4 words), 1 (2 words) */
    CHECK_OK(fs_secagg_shard_new(2, 0, 100, 50, 6, 4, &w, &err), &err);
    CHECK_OK(fs_secagg_shard_set_store(w, &cs, &err), &err);
    if (w == NULL) {
        return;
    }
    CHECK_OK(fs_secagg_server_upload_begin(w, 1, 1, 2, &up, &stream, &err), &err);
    CHECK(stream == 1);
    CHECK_OK(ms_put(&st, 1, 1, b, 2, &err), &err); /* persisted before the fold */
    CHECK_OK(fs_secagg_server_upload_fold(&up, (const uint8_t *)b, 2, &err), &err);
    CHECK_OK(fs_secagg_server_upload_commit(&up, &err), &err);
    fs_secagg_server_upload_release(&up);
    CHECK_OK(fs_secagg_server_add_masked(w, 1, 0, a, 4, &err), &err);
    /* party 2: a streamed chunk breaks off half way, another one arrives */
    CHECK_OK(fs_secagg_server_upload_begin(w, 2, 0, 4, &up, &stream, &err), &err);
    CHECK(stream == 1);
    CHECK_OK(ms_put(&st, 2, 0, a, 4, &err), &err);
    CHECK_OK(fs_secagg_server_upload_fold(&up, (const uint8_t *)a, 2, &err), &err);
    CHECK_OK(fs_secagg_server_upload_cancel(&up, &err), &err);
    fs_secagg_server_upload_release(&up);
    CHECK_OK(fs_secagg_server_add_masked(w, 2, 1, b, 2, &err), &err);
    CHECK(fs_secagg_shard_complete(w, done) == 0 && done[0] == 1 && done[1] == 0);
    /* an empty plan: the sum is party 1's words alone */
    CHECK_OK(fs_secagg_shard_finish(w, u3, 1, NULL, 0, &sum, &err), &err);
    CHECK(sum != NULL && memcmp(sum, a, sizeof a) == 0 && memcmp(sum + 4, b, sizeof b) == 0);
    fs_secagg_server_free(w);
    ms_free(&st);
}

/* Without dropouts every window's unmasked sum is exactly the parties'
 * plain encodings summed over that window. */
static void test_window_sums_exact(void)
{
    fs_mat *x = tl_randn(40, 6, 13);
    static const size_t sz[] = {18, 22};
    struct srun r;
    struct fs_fedsvd_job job;
    static struct shard_agg g; /* 2.2 MB: off the stack (valgrind) */
    struct sa j;

    srun_init(&r, 40, 6, 2, sz, 2);
    make_parties(&r, x);
    job = srun_job(&r);
    memset(&g, 0, sizeof g);
    g.S = 2;
    CHECK(sa_init(&j, 2, 2, 1, 16) == 0);
    CHECK(shard_aggregate(&j, &job, 0, masked_in, &r, &g) == 0);
    if (g.sum[1] != NULL) {
        CHECK(window_is_survivors_sum(&r, &g, 0));
        CHECK(window_is_survivors_sum(&r, &g, 1));
    }
    shard_agg_free(&g);
    sa_free(&j);
    srun_free(&r);
    fs_mat_free(x);
}

/* The coordinator folds the shards' R's one at a time (fs_fedsvd_tsqr_fold):
 * the running factor never has more than n rows (O(n^2), not S n x n), and
 * the result is the unsharded factorization of the whole matrix to 1e-12
 * (singular values relative to s_1, V' subspaces, ||Y'||^2) and the
 * stacked TSQR's, for tall shards and for shards shorter than n. */
static void fold_case(size_t m, size_t n, uint32_t S, size_t k)
{
    struct fs_err err = {0};
    size_t sizes[1] = {m};
    struct fs_fedsvd_job job = {FS_FEDSVD_SAMPLES, m, n, 1, sizes, 0, 0, S};
    struct fs_fedsvd_published inc = {0}, whole = {0}, stacked = {0};
    fs_mat *x = tl_randn(m, n, (uint8_t)(60 + S));
    fs_mat *xc = fs_mat_new(m, n);
    fs_mat *rs[SH_MAXS] = {NULL};
    fs_mat *acc = NULL;
    size_t ks[3] = {1, n / 2, n - 1};

    for (size_t j = 0; j < n; j++) {
        memcpy(&FS_MAT_AT(xc, 0, j), &FS_MAT_AT(x, 0, j), m * sizeof(double));
    }
    for (uint32_t s = 0; s < S; s++) {
        uint64_t lo = 0, hi = 0;
        CHECK(fs_fedsvd_shard_rows(&job, s, &lo, &hi) == 0);
        rs[s] = fs_mat_new((size_t)(hi - lo), n);
        for (size_t j = 0; j < n; j++) {
            memcpy(&FS_MAT_AT(rs[s], 0, j), &FS_MAT_AT(x, lo, j), (hi - lo) * sizeof(double));
        }
        CHECK_OK(fs_qr_keep_r(rs[s], &err), &err);
        CHECK_OK(fs_fedsvd_tsqr_fold(&acc, rs[s], n, &err), &err);
        CHECK_MSG(acc != NULL && acc->rows <= n && acc->cols == n,
                  "S = %u: the running factor has %zu rows after shard %u", S,
                  acc != NULL ? acc->rows : 0, s);
    }
    CHECK_OK(fs_fedsvd_tsqr_finish(&job, acc, k, FS_TOPK_AUTO, NULL, &inc, &err), &err);
    CHECK_OK(fs_fedsvd_tsqr_factorize(&job, rs, S, k, FS_TOPK_AUTO, NULL, &stacked, &err), &err);
    CHECK_OK(fs_fedsvd_server_factorize(xc, k, FS_TOPK_AUTO, NULL, &whole, &err), &err);
    if (inc.s != NULL && whole.s != NULL && stacked.s != NULL) {
        size_t r = whole.r;
        double se = sv_err(inc.s, whole.s, r);
        CHECK(inc.r == r && stacked.r == r);
        CHECK_MSG(se <= 1e-12, "S = %u: incremental vs unsharded singular values %.3g", S, se);
        se = sv_err(inc.s, stacked.s, r);
        CHECK_MSG(se <= 1e-12, "S = %u: incremental vs stacked singular values %.3g", S, se);
        CHECK_MSG(fabs(inc.total_sq - whole.total_sq) <= 1e-12 * whole.total_sq,
                  "S = %u: ||Y'||^2 %.17g vs %.17g", S, inc.total_sq, whole.total_sq);
        for (int q = 0; q < 3; q++) {
            double pd;
            if (ks[q] == 0 || ks[q] >= r || !(whole.s[ks[q] - 1] > whole.s[ks[q]])) {
                continue;
            }
            pd = proj_dist(inc.vc, whole.vc, ks[q]);
            CHECK_MSG(pd <= 1e-12, "S = %u: V' projection distance %.3g at k = %zu", S, pd, ks[q]);
        }
    }
    fs_fedsvd_published_clear(&inc);
    fs_fedsvd_published_clear(&whole);
    fs_fedsvd_published_clear(&stacked);
    for (uint32_t s = 0; s < S; s++) {
        fs_mat_free(rs[s]);
    }
    fs_mat_free(x);
    fs_mat_free(xc);
}

static void test_incremental_fold(void)
{
    struct fs_err err = {0};
    fs_mat *acc = NULL;
    fs_mat *bad = fs_mat_new(3, 5);

    fold_case(200, 12, 2, 0);
    fold_case(200, 12, 5, 0);
    fold_case(200, 12, 16, 0); /* shards of 12 or 13 rows */
    fold_case(40, 12, 7, 0);   /* shards of 5 or 6 rows: stacks under n rows are kept */
    fold_case(300, 20, 4, 5);  /* top-k */
    /* a factor of the wrong width is refused, the running factor kept */
    CHECK(fs_fedsvd_tsqr_fold(&acc, bad, 4, &err) == FS_EINVAL && acc == NULL);
    CHECK(fs_fedsvd_tsqr_fold(NULL, bad, 5, &err) == FS_EINVAL);
    CHECK(fs_fedsvd_tsqr_finish(NULL, NULL, 0, FS_TOPK_AUTO, NULL, NULL, &err) == FS_EINVAL);
    fs_mat_free(bad);
}

int main(void)
{
    RUN(test_layout);
    RUN(test_qr_keep_r);
    RUN(test_sharded_equals_unsharded);
    RUN(test_short_shards);
    RUN(test_topk);
    RUN(test_dropout_one_shard);
    RUN(test_bad_input);
    RUN(test_streamed_window);
    RUN(test_window_sums_exact);
    RUN(test_incremental_fold);
    return TEST_END("test_shard");
}
