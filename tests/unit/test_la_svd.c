/* Thin and top-k SVD: reconstruction, orthonormality, known singular values,
 * top-k (gesvdx, randomized, thin, auto) against the thin SVD, determinism
 * from a seed, want_u = 0, the sign convention, rank, errors. */
#include <stdint.h>

#include "la/svd.h"
#include "test.h"
#include "test_la_util.h"

/* ||A - U diag(s) V^T||_F / ||A||_F */
static double recon_err(const fs_mat *a, const fs_svd *s)
{
    struct fs_err err = {0};
    fs_mat *us = fs_mat_dup(s->u);
    fs_mat *r = fs_mat_dup(a);
    double e = 1e300;

    for (size_t j = 0; j < s->r; j++) {
        for (size_t i = 0; i < us->rows; i++) {
            FS_MAT_AT(us, i, j) *= s->s[j];
        }
    }
    if (fs_mat_gemm('N', 'T', -1.0, us, s->v, 1.0, r, &err) == 0) {
        e = fs_mat_norm_fro(r) / fs_mat_norm_fro(a);
    }
    fs_mat_free(us);
    fs_mat_free(r);
    return e;
}

static int descending(const fs_svd *s)
{
    for (size_t i = 1; i < s->r; i++) {
        if (s->s[i] > s->s[i - 1] || s->s[i] < 0.0) {
            return 0;
        }
    }
    return 1;
}

/* Each V column's largest-|.| entry is positive. */
static int signs_ok(const fs_svd *s)
{
    for (size_t j = 0; j < s->r; j++) {
        size_t best = 0;
        for (size_t i = 1; i < s->v->rows; i++) {
            if (fabs(FS_MAT_AT(s->v, i, j)) > fabs(FS_MAT_AT(s->v, best, j))) {
                best = i;
            }
        }
        if (FS_MAT_AT(s->v, best, j) < 0.0) {
            return 0;
        }
    }
    return 1;
}

static void check_thin(size_t m, size_t n, uint8_t seed)
{
    struct fs_err err = {0};
    fs_mat *a = tl_randn(m, n, seed);
    fs_svd s = {0};
    size_t r = m < n ? m : n;

    CHECK_OK(fs_svd_thin(a, &s, &err), &err);
    if (s.u == NULL) {
        fs_mat_free(a);
        return;
    }
    CHECK(s.r == r && s.u->rows == m && s.u->cols == r && s.v->rows == n && s.v->cols == r);
    CHECK_MSG(recon_err(a, &s) < 1e-13, "recon %g", recon_err(a, &s));
    CHECK_MSG(tl_orth_err(s.u) < 1e-13, "U orth %g", tl_orth_err(s.u));
    CHECK_MSG(tl_orth_err(s.v) < 1e-13, "V orth %g", tl_orth_err(s.v));
    CHECK(descending(&s));
    CHECK(signs_ok(&s));
    fs_svd_clear(&s);
    fs_mat_free(a);
}

static void test_thin_tall(void)
{
    check_thin(200, 50, 1);
}

static void test_thin_wide(void)
{
    check_thin(50, 200, 2);
}

static void test_thin_view_input(void)
{
    struct fs_err err = {0};
    fs_mat *big = tl_randn(40, 30, 3);
    fs_mat v = fs_mat_view(big, 5, 3, 25, 20);
    fs_mat *copy = fs_mat_dup(&v);
    fs_svd s1 = {0};
    fs_svd s2 = {0};

    CHECK_OK(fs_svd_thin(&v, &s1, &err), &err);
    CHECK_OK(fs_svd_thin(copy, &s2, &err), &err);
    CHECK(s1.r == 20 && s2.r == 20);
    for (size_t i = 0; i < s1.r && i < s2.r; i++) {
        CHECK_NEAR(s1.s[i], s2.s[i], 1e-13 * s2.s[0]);
    }
    CHECK(recon_err(&v, &s1) < 1e-13);
    fs_svd_clear(&s1);
    fs_svd_clear(&s2);
    fs_mat_free(copy);
    fs_mat_free(big);
}

static void test_known_singular_values(void)
{
    enum { M = 120, N = 80, R = 80 };
    struct fs_err err = {0};
    double sv[R];
    fs_mat *a = NULL;
    fs_svd s = {0};

    for (size_t i = 0; i < R; i++) {
        sv[i] = 100.0 * pow(0.95, (double)i); /* 100 .. ~1.7 */
    }
    a = tl_with_svals(M, N, sv, R, 4);
    CHECK(a != NULL);
    CHECK_OK(fs_svd_thin(a, &s, &err), &err);
    for (size_t i = 0; i < R && i < s.r; i++) {
        CHECK_MSG(fabs(s.s[i] - sv[i]) <= 1e-12 * sv[i], "s[%zu] = %.17g, want %.17g", i, s.s[i],
                  sv[i]);
    }
    fs_svd_clear(&s);
    fs_mat_free(a);
}

/* m x n planted rank-10 matrix (s = 100 .. 10) plus N(0, 1e-3^2) noise. */
static fs_mat *planted(size_t m, size_t n, uint8_t seed)
{
    double sv[10];
    fs_mat *a = NULL;
    fs_mat *noise = tl_randn(m, n, (uint8_t)(seed + 7));
    struct fs_err err = {0};

    for (size_t i = 0; i < 10; i++) {
        sv[i] = 100.0 - 10.0 * (double)i;
    }
    a = tl_with_svals(m, n, sv, 10, seed);
    if (a == NULL || noise == NULL || fs_mat_axpy(1e-3, noise, a, &err) != 0) {
        fs_mat_free(a);
        a = NULL;
    }
    fs_mat_free(noise);
    return a;
}

/* Compare a top-k result with the thin SVD's top k: values to rel_s (relative
 * to each value), subspaces of U and V in projection distance to pd. */
static void compare_topk(const fs_mat *a, const fs_svd *ref, const fs_svd *t, size_t k,
                         double rel_s, double pd)
{
    fs_mat vr = fs_mat_view(ref->v, 0, 0, ref->v->rows, k);
    fs_mat ur = fs_mat_view(ref->u, 0, 0, ref->u->rows, k);

    CHECK(t->r == k && t->v != NULL && t->v->cols == k && t->v->rows == a->cols);
    if (t->r != k || t->v == NULL) {
        return;
    }
    for (size_t i = 0; i < k; i++) {
        CHECK_MSG(fabs(t->s[i] - ref->s[i]) <= rel_s * ref->s[i], "s[%zu] = %.17g vs %.17g", i,
                  t->s[i], ref->s[i]);
    }
    CHECK_MSG(tl_proj_dist(t->v, &vr) < pd, "V proj dist %g", tl_proj_dist(t->v, &vr));
    CHECK(tl_orth_err(t->v) < 1e-12);
    if (t->u != NULL) {
        CHECK(t->u->rows == a->rows && t->u->cols == k);
        CHECK_MSG(tl_proj_dist(t->u, &ur) < pd, "U proj dist %g", tl_proj_dist(t->u, &ur));
        CHECK(tl_orth_err(t->u) < 1e-12);
    }
    CHECK(descending(t));
    CHECK(signs_ok(t));
}

static void topk_vs_thin(size_t m, size_t n, enum fs_topk_method method, size_t k, double rel_s,
                         double pd, uint8_t seed)
{
    static const uint8_t key[32] = {1, 2, 3, 4};
    struct fs_err err = {0};
    fs_mat *a = planted(m, n, seed);
    struct fs_svd_opts o = fs_svd_opts_default();
    fs_svd ref = {0};
    fs_svd t = {0};

    o.method = method;
    o.seed = key;
    CHECK(a != NULL);
    CHECK_OK(fs_svd_thin(a, &ref, &err), &err);
    CHECK_OK(fs_svd_topk(a, k, &o, &t, &err), &err);
    if (ref.r > 0 && t.r > 0) {
        compare_topk(a, &ref, &t, k, rel_s, pd);
    }
    fs_svd_clear(&ref);
    fs_svd_clear(&t);
    fs_mat_free(a);
}

static void test_topk_gesvdx(void)
{
    topk_vs_thin(300, 120, FS_TOPK_GESVDX, 10, 1e-10, 1e-10, 10);
    topk_vs_thin(120, 300, FS_TOPK_GESVDX, 10, 1e-10, 1e-10, 11);
    topk_vs_thin(300, 120, FS_TOPK_GESVDX, 4, 1e-10, 1e-10, 12);
}

static void test_topk_thin_method(void)
{
    topk_vs_thin(150, 60, FS_TOPK_THIN, 7, 1e-14, 1e-12, 13);
}

/* Planted low rank + noise: the gap s_10 / s_11 ~ 10 / 0.03 makes the
 * randomized result accurate to near machine precision. */
static void test_topk_randomized_planted(void)
{
    topk_vs_thin(300, 120, FS_TOPK_RANDOMIZED, 10, 1e-10, 1e-8, 14);
    topk_vs_thin(120, 300, FS_TOPK_RANDOMIZED, 10, 1e-10, 1e-8, 15);
    topk_vs_thin(300, 120, FS_TOPK_RANDOMIZED, 6, 1e-10, 1e-8, 16);
}

/*
 * A smoothly decaying spectrum s_i = 0.8^i (no gap) is the hard case. With
 * oversampling p = 10 and q = 4 power iterations the HMT bound scales like
 * (s_{k+p+1} / s_k)^(2q+1) = 0.8^90 ~ 2e-9; observed: values to ~1e-15
 * relative, projection distance ~6e-10 (U) and ~5e-11 (V), the subspaces
 * being limited by the small gap s_k / s_{k+1} = 1.25. Tolerances: 1e-9
 * relative on values, 1e-5 in projection distance.
 */
static void test_topk_randomized_decaying(void)
{
    enum { M = 400, N = 200, K = 10 };
    static const uint8_t key[32] = {9};
    struct fs_err err = {0};
    double sv[N];
    fs_mat *a = NULL;
    struct fs_svd_opts o = fs_svd_opts_default();
    fs_svd ref = {0};
    fs_svd t = {0};

    for (size_t i = 0; i < N; i++) {
        sv[i] = pow(0.8, (double)i);
    }
    a = tl_with_svals(M, N, sv, N, 17);
    o.method = FS_TOPK_RANDOMIZED;
    o.seed = key;
    CHECK_OK(fs_svd_thin(a, &ref, &err), &err);
    CHECK_OK(fs_svd_topk(a, K, &o, &t, &err), &err);
    if (ref.r > 0 && t.r > 0) {
        compare_topk(a, &ref, &t, K, 1e-9, 1e-5);
    }
    fs_svd_clear(&ref);
    fs_svd_clear(&t);
    fs_mat_free(a);
}

static void test_topk_seed_determinism_and_want_u(void)
{
    static const uint8_t key[32] = {5, 5, 5};
    struct fs_err err = {0};
    fs_mat *a = planted(200, 80, 20);
    struct fs_svd_opts o = fs_svd_opts_default();
    fs_svd s1 = {0};
    fs_svd s2 = {0};
    fs_svd s3 = {0};
    fs_svd fresh = {0};

    o.method = FS_TOPK_RANDOMIZED;
    o.seed = key;
    CHECK_OK(fs_svd_topk(a, 5, &o, &s1, &err), &err);
    CHECK_OK(fs_svd_topk(a, 5, &o, &s2, &err), &err);
    CHECK(s1.r == 5 && s2.r == 5 && memcmp(s1.s, s2.s, 5 * sizeof(double)) == 0);
    CHECK(tl_bit_equal(s1.u, s2.u) && tl_bit_equal(s1.v, s2.v));
    o.want_u = 0;
    CHECK_OK(fs_svd_topk(a, 5, &o, &s3, &err), &err);
    CHECK(s3.u == NULL && s3.r == 5 && memcmp(s1.s, s3.s, 5 * sizeof(double)) == 0);
    CHECK(tl_bit_equal(s1.v, s3.v));
    /* fresh CSPRNG sketch: different rounding, same answer */
    o.seed = NULL;
    o.want_u = 1;
    CHECK_OK(fs_svd_topk(a, 5, &o, &fresh, &err), &err);
    for (size_t i = 0; i < 5 && fresh.r == 5; i++) {
        CHECK_NEAR(fresh.s[i], s1.s[i], 1e-10 * s1.s[i]);
    }
    fs_svd_clear(&s1);
    fs_svd_clear(&s2);
    fs_svd_clear(&s3);
    fs_svd_clear(&fresh);
    fs_mat_free(a);
}

static void test_topk_want_u_other_methods(void)
{
    struct fs_err err = {0};
    fs_mat *a = planted(100, 60, 21);
    struct fs_svd_opts o = fs_svd_opts_default();
    fs_svd full = {0};
    fs_svd nou = {0};
    enum fs_topk_method methods[2] = {FS_TOPK_GESVDX, FS_TOPK_THIN};

    for (int i = 0; i < 2; i++) {
        o.method = methods[i];
        o.want_u = 1;
        CHECK_OK(fs_svd_topk(a, 3, &o, &full, &err), &err);
        o.want_u = 0;
        CHECK_OK(fs_svd_topk(a, 3, &o, &nou, &err), &err);
        CHECK(full.u != NULL && nou.u == NULL && nou.r == 3);
        for (size_t j = 0; j < 3 && nou.r == 3 && full.r == 3; j++) {
            CHECK_NEAR(nou.s[j], full.s[j], 1e-12 * full.s[0]);
        }
        if (nou.v != NULL && full.v != NULL) {
            CHECK(tl_max_diff(nou.v, full.v) < 1e-10);
        }
        fs_svd_clear(&full);
        fs_svd_clear(&nou);
    }
    fs_mat_free(a);
}

static void test_topk_auto_and_null_opts(void)
{
    struct fs_err err = {0};
    fs_mat *small = planted(100, 60, 22);
    fs_svd s = {0};
    fs_svd ref = {0};

    /* small matrix: AUTO falls back to thin, exact */
    CHECK_OK(fs_svd_topk(small, 5, NULL, &s, &err), &err);
    CHECK_OK(fs_svd_thin(small, &ref, &err), &err);
    for (size_t i = 0; i < 5 && s.r == 5; i++) {
        CHECK_NEAR(s.s[i], ref.s[i], 1e-14 * ref.s[0]);
    }
    CHECK(s.u != NULL);
    fs_svd_clear(&s);
    fs_svd_clear(&ref);
    fs_mat_free(small);
}

static void test_topk_full_rank_k_equals_min(void)
{
    static const uint8_t key[32] = {3};
    struct fs_err err = {0};
    fs_mat *a = tl_randn(40, 30, 23);
    struct fs_svd_opts o = fs_svd_opts_default();
    fs_svd ref = {0};
    fs_svd t = {0};

    /* k = min(m, n): the sketch is the whole column space, exact up to rounding */
    o.method = FS_TOPK_RANDOMIZED;
    o.seed = key;
    CHECK_OK(fs_svd_thin(a, &ref, &err), &err);
    CHECK_OK(fs_svd_topk(a, 30, &o, &t, &err), &err);
    for (size_t i = 0; i < 30 && t.r == 30; i++) {
        CHECK_NEAR(t.s[i], ref.s[i], 1e-12 * ref.s[0]);
    }
    CHECK(t.r == 30 && recon_err(a, &t) < 1e-13);
    fs_svd_clear(&ref);
    fs_svd_clear(&t);
    fs_mat_free(a);
}

static void test_rank(void)
{
    double sv[3] = {5.0, 2.0, 1.0};
    struct fs_err err = {0};
    fs_mat *a = tl_with_svals(30, 20, sv, 3, 24);
    fs_svd s = {0};
    fs_svd empty = {0};

    CHECK_OK(fs_svd_thin(a, &s, &err), &err);
    CHECK(fs_svd_rank(&s, 1e-10) == 3);
    CHECK(fs_svd_rank(&s, 0.3) == 2);
    CHECK(fs_svd_rank(&empty, 1e-10) == 0);
    CHECK(fs_svd_rank(NULL, 1e-10) == 0);
    fs_svd_clear(&s);
    fs_svd_clear(&s);
    fs_svd_clear(NULL);
    fs_mat_free(a);
}

static void test_errors(void)
{
    struct fs_err err = {0};
    fs_mat *a = tl_randn(10, 6, 25);
    fs_mat *e = fs_mat_new(0, 5);
    struct fs_svd_opts o = fs_svd_opts_default();
    fs_svd s = {0};

    CHECK(fs_svd_topk(a, 0, NULL, &s, &err) == FS_EINVAL);
    CHECK(fs_svd_topk(a, 7, NULL, &s, &err) == FS_EINVAL);
    CHECK(s.u == NULL && s.v == NULL && s.s == NULL);
    CHECK(fs_svd_thin(e, &s, &err) == FS_EINVAL);
    CHECK(fs_svd_thin(NULL, &s, &err) == FS_EINVAL);
    CHECK(fs_svd_thin(a, NULL, &err) == FS_EINVAL);
    o.method = (enum fs_topk_method)42;
    CHECK(fs_svd_topk(a, 2, &o, &s, &err) == FS_EINVAL);
    FS_MAT_AT(a, 3, 4) = NAN;
    CHECK(fs_svd_thin(a, &s, &err) == FS_EINVAL);
    CHECK(strstr(err.msg, "(3, 4)") != NULL);
    o.method = FS_TOPK_GESVDX;
    CHECK(fs_svd_topk(a, 2, &o, &s, &err) == FS_EINVAL);
    fs_mat_free(a);
    fs_mat_free(e);
}

int main(void)
{
    RUN(test_thin_tall);
    RUN(test_thin_wide);
    RUN(test_thin_view_input);
    RUN(test_known_singular_values);
    RUN(test_topk_gesvdx);
    RUN(test_topk_thin_method);
    RUN(test_topk_randomized_planted);
    RUN(test_topk_randomized_decaying);
    RUN(test_topk_seed_determinism_and_want_u);
    RUN(test_topk_want_u_other_methods);
    RUN(test_topk_auto_and_null_opts);
    RUN(test_topk_full_rank_k_equals_min);
    RUN(test_rank);
    RUN(test_errors);
    return TEST_END("test_la_svd");
}
