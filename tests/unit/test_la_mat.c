/* fs_mat: allocation, views, copies, transposes, dgemm wrapper against a
 * naive triple loop (all op combinations, strided views), norms, shape and
 * aliasing errors. */
#include <float.h>
#include <stdint.h>

#include "core/mem.h"
#include "la/mat.h"
#include "test.h"
#include "test_la_util.h"

/* Naive C = op(A) op(B). */
static fs_mat *naive_mul(char ta, char tb, const fs_mat *a, const fs_mat *b)
{
    size_t m = ta == 'N' ? a->rows : a->cols;
    size_t k = ta == 'N' ? a->cols : a->rows;
    size_t n = tb == 'N' ? b->cols : b->rows;
    fs_mat *c = fs_mat_new(m, n);

    for (size_t j = 0; j < n; j++) {
        for (size_t i = 0; i < m; i++) {
            double s = 0.0;
            for (size_t p = 0; p < k; p++) {
                double x = ta == 'N' ? FS_MAT_AT(a, i, p) : FS_MAT_AT(a, p, i);
                double y = tb == 'N' ? FS_MAT_AT(b, p, j) : FS_MAT_AT(b, j, p);
                s += x * y;
            }
            FS_MAT_AT(c, i, j) = s;
        }
    }
    return c;
}

static void test_alloc_eye_dup(void)
{
    fs_mat *z = fs_mat_new(3, 4);
    fs_mat *e = fs_mat_eye(5);
    fs_mat *d = NULL;
    fs_mat *empty = fs_mat_new(0, 7);

    CHECK(z != NULL && z->rows == 3 && z->cols == 4 && z->ld == 3 && z->owns == 1);
    CHECK(fs_mat_max_abs(z) == 0.0);
    CHECK(e != NULL && FS_MAT_AT(e, 2, 2) == 1.0 && FS_MAT_AT(e, 1, 2) == 0.0);
    CHECK(fs_mat_norm_fro(e) == sqrt(5.0));
    d = fs_mat_dup(e);
    CHECK(tl_bit_equal(d, e));
    CHECK(empty != NULL && empty->ld == 1 && fs_mat_norm_fro(empty) == 0.0);
    /* rows * cols * 8 overflows size_t */
    CHECK(fs_mat_new(SIZE_MAX / 4, 3) == NULL);
    CHECK(fs_mat_new_uninit(SIZE_MAX, SIZE_MAX) == NULL);
    fs_mat_free(z);
    fs_mat_free(e);
    fs_mat_free(d);
    fs_mat_free(empty);
    fs_mat_free(NULL);
}

static void test_view_copy_transpose(void)
{
    struct fs_err err = {0};
    fs_mat *a = tl_randn(7, 5, 1);
    fs_mat *b = fs_mat_new(3, 2);
    fs_mat v = fs_mat_view(a, 2, 1, 3, 2);
    fs_mat bad = fs_mat_view(a, 5, 0, 3, 1);
    fs_mat *t = NULL;
    fs_mat *vd = NULL;

    CHECK(v.rows == 3 && v.cols == 2 && v.ld == 7 && v.owns == 0);
    CHECK(FS_MAT_AT(&v, 1, 1) == FS_MAT_AT(a, 3, 2));
    CHECK(bad.rows == 0 && bad.cols == 0 && bad.data == NULL);
    CHECK_OK(fs_mat_copy(b, &v, &err), &err);
    CHECK(tl_bit_equal(b, &v));
    CHECK(fs_mat_copy(a, &v, &err) == FS_EINVAL);
    vd = fs_mat_dup(&v);
    CHECK(vd != NULL && vd->ld == 3 && tl_bit_equal(vd, &v));
    t = fs_mat_transpose(a);
    CHECK(t != NULL && t->rows == 5 && t->cols == 7);
    for (size_t i = 0; i < 7; i++) {
        for (size_t j = 0; j < 5; j++) {
            CHECK(FS_MAT_AT(t, j, i) == FS_MAT_AT(a, i, j));
        }
    }
    fs_mat_free(a);
    fs_mat_free(b);
    fs_mat_free(t);
    fs_mat_free(vd);
}

static void test_transpose_large_tiles(void)
{
    fs_mat *a = tl_randn(77, 45, 2);
    fs_mat *t = fs_mat_transpose(a);
    fs_mat *tt = fs_mat_transpose(t);

    CHECK(tl_bit_equal(a, tt));
    fs_mat_free(a);
    fs_mat_free(t);
    fs_mat_free(tt);
}

static void test_gemm_all_ops(void)
{
    struct fs_err err = {0};
    /* Strided views: A and B live inside bigger matrices. */
    fs_mat *abig = tl_randn(20, 20, 3);
    fs_mat *bbig = tl_randn(20, 20, 4);
    const char ops[2] = {'N', 'T'};

    for (int x = 0; x < 2; x++) {
        for (int y = 0; y < 2; y++) {
            char ta = ops[x];
            char tb = ops[y];
            size_t m = 6, k = 9, n = 4;
            fs_mat a = ta == 'N' ? fs_mat_view(abig, 1, 2, m, k) : fs_mat_view(abig, 1, 2, k, m);
            fs_mat b = tb == 'N' ? fs_mat_view(bbig, 3, 0, k, n) : fs_mat_view(bbig, 3, 0, n, k);
            fs_mat *ref = naive_mul(ta, tb, &a, &b);
            fs_mat *c = NULL;
            fs_mat *c2 = tl_randn(m, n, 5);
            fs_mat *c2ref = fs_mat_dup(c2);
            CHECK_OK(fs_mat_mul(ta, tb, &a, &b, &c, &err), &err);
            CHECK(tl_max_diff(c, ref) < 1e-13);
            /* alpha, beta: c2 = 2 op(A)op(B) - 0.5 c2 */
            CHECK_OK(fs_mat_gemm(ta, tb, 2.0, &a, &b, -0.5, c2, &err), &err);
            for (size_t j = 0; j < n; j++) {
                for (size_t i = 0; i < m; i++) {
                    CHECK_NEAR(FS_MAT_AT(c2, i, j),
                               2.0 * FS_MAT_AT(ref, i, j) - 0.5 * FS_MAT_AT(c2ref, i, j), 1e-13);
                }
            }
            fs_mat_free(ref);
            fs_mat_free(c);
            fs_mat_free(c2);
            fs_mat_free(c2ref);
        }
    }
    fs_mat_free(abig);
    fs_mat_free(bbig);
}

static void test_gemm_errors(void)
{
    struct fs_err err = {0};
    fs_mat *a = tl_randn(4, 3, 6);
    fs_mat *b = tl_randn(4, 2, 7);
    fs_mat *c = fs_mat_new(3, 2);
    fs_mat *out = NULL;
    fs_mat *sq = tl_randn(4, 4, 8);

    CHECK(fs_mat_gemm('N', 'N', 1.0, a, b, 0.0, c, &err) == FS_EINVAL);
    CHECK(strstr(err.msg, "do not match") != NULL);
    CHECK_OK(fs_mat_gemm('T', 'N', 1.0, a, b, 0.0, c, &err), &err);
    CHECK(fs_mat_gemm('X', 'N', 1.0, a, b, 0.0, c, &err) == FS_EINVAL);
    CHECK(fs_mat_gemm('T', 'N', 1.0, a, b, 0.0, NULL, &err) == FS_EINVAL);
    CHECK(fs_mat_mul('N', 'N', a, b, &out, &err) == FS_EINVAL && out == NULL);
    /* C aliasing an input */
    CHECK(fs_mat_gemm('N', 'N', 1.0, sq, sq, 0.0, sq, &err) == FS_EINVAL);
    {
        fs_mat top = fs_mat_view(sq, 0, 0, 2, 4);
        fs_mat bot = fs_mat_view(sq, 2, 0, 2, 4);
        fs_mat left = fs_mat_view(sq, 0, 0, 4, 2);
        fs_mat right = fs_mat_view(sq, 0, 2, 4, 2);
        fs_mat *c22 = fs_mat_new(2, 2);
        CHECK(fs_mat_overlap(&top, &bot) == 0);
        CHECK(fs_mat_overlap(&left, &right) == 0);
        CHECK(fs_mat_overlap(&top, &left) == 1);
        CHECK(fs_mat_overlap(&bot, &top) == 0);
        CHECK(fs_mat_overlap(&right, &left) == 0);
        /* bot (2x4) = top (2x4) * I: disjoint views of one matrix are fine */
        fs_mat *e4 = fs_mat_eye(4);
        CHECK_OK(fs_mat_gemm('N', 'N', 1.0, &top, e4, 0.0, &bot, &err), &err);
        CHECK(tl_bit_equal(&top, &bot));
        CHECK(fs_mat_gemm('N', 'N', 1.0, &top, &left, 0.0, c22, &err) == 0);
        fs_mat_free(e4);
        fs_mat_free(c22);
    }
    fs_mat_free(a);
    fs_mat_free(b);
    fs_mat_free(c);
    fs_mat_free(sq);
}

static void test_gemm_degenerate(void)
{
    struct fs_err err = {0};
    fs_mat *a = fs_mat_new(3, 0);
    fs_mat *b = fs_mat_new(0, 2);
    fs_mat *c = fs_mat_new_uninit(3, 2);

    for (size_t i = 0; i < 6; i++) {
        c->data[i] = NAN;
    }
    CHECK_OK(fs_mat_gemm('N', 'N', 1.0, a, b, 0.0, c, &err), &err);
    CHECK(fs_mat_max_abs(c) == 0.0);
    fs_mat_free(a);
    fs_mat_free(b);
    fs_mat_free(c);
}

static void test_norms_finite(void)
{
    fs_mat *a = fs_mat_new(2, 2);
    size_t bi = 99, bj = 99;

    FS_MAT_AT(a, 0, 0) = 3e200;
    FS_MAT_AT(a, 1, 1) = 4e200;
    CHECK_NEAR(fs_mat_norm_fro(a) / 5e200, 1.0, 1e-15);
    FS_MAT_AT(a, 0, 0) = 3e-200;
    FS_MAT_AT(a, 1, 1) = 4e-200;
    CHECK_NEAR(fs_mat_norm_fro(a) / 5e-200, 1.0, 1e-15);
    FS_MAT_AT(a, 1, 0) = -7.0;
    CHECK(fs_mat_max_abs(a) == 7.0);
    CHECK(fs_mat_all_finite(a, &bi, &bj) == 1);
    FS_MAT_AT(a, 0, 1) = NAN;
    CHECK(fs_mat_all_finite(a, &bi, &bj) == 0 && bi == 0 && bj == 1);
    CHECK(isnan(fs_mat_max_abs(a)));
    CHECK(isnan(fs_mat_norm_fro(a)));
    FS_MAT_AT(a, 0, 1) = INFINITY;
    CHECK(isinf(fs_mat_norm_fro(a)));
    fs_mat_free(a);
}

static void test_axpy_scale_zero_wipe(void)
{
    struct fs_err err = {0};
    fs_mat *x = tl_randn(5, 3, 9);
    fs_mat *y = fs_mat_dup(x);
    fs_mat *w = fs_mat_new(5, 4);

    CHECK_OK(fs_mat_axpy(-1.0, x, y, &err), &err);
    CHECK(fs_mat_max_abs(y) == 0.0);
    CHECK(fs_mat_axpy(1.0, x, w, &err) == FS_EINVAL);
    fs_mat_scale(x, 0.0);
    CHECK(fs_mat_max_abs(x) == 0.0);
    fs_mat_free(x);
    x = tl_randn(5, 3, 9);
    {
        fs_mat v = fs_mat_view(x, 1, 1, 2, 2);
        fs_mat_zero(&v);
        CHECK(FS_MAT_AT(x, 1, 1) == 0.0 && FS_MAT_AT(x, 2, 2) == 0.0 && FS_MAT_AT(x, 0, 0) != 0.0);
        fs_mat_wipe(x);
        CHECK(fs_mat_max_abs(x) == 0.0);
    }
    fs_mat_free(x);
    fs_mat_free(y);
    fs_mat_free(w);
}

static void test_fill_normal_view_equals_compact(void)
{
    uint8_t key[32] = {42};
    struct fs_err err = {0};
    fs_prg *p1 = NULL;
    fs_prg *p2 = NULL;
    fs_mat *big = fs_mat_new(9, 4);
    fs_mat *c = fs_mat_new(5, 3);
    fs_mat v = fs_mat_view(big, 2, 1, 5, 3);

    CHECK_OK(fs_prg_new(&p1, key, NULL, &err), &err);
    CHECK_OK(fs_prg_new(&p2, key, NULL, &err), &err);
    CHECK_OK(fs_mat_fill_normal(&v, p1, &err), &err);
    CHECK_OK(fs_mat_fill_normal(c, p2, &err), &err);
    CHECK(tl_bit_equal(&v, c));
    CHECK(FS_MAT_AT(big, 0, 0) == 0.0 && FS_MAT_AT(big, 8, 3) == 0.0);
    fs_prg_free(p1);
    fs_prg_free(p2);
    fs_mat_free(big);
    fs_mat_free(c);
}

/* core/mem.h: prefaulting a buffer (aligned or not, a part, all of it,
 * under a page, NULL) keeps every byte, zeros included. */
static void test_prefault_keeps_contents(void)
{
    size_t n = (size_t)3 << 20;
    uint64_t *v = calloc(n / 8, 8);
    uint8_t *b;
    size_t bad = 0;

    CHECK(v != NULL);
    if (v == NULL) {
        return;
    }
    b = (uint8_t *)v;
    for (size_t i = 0; i < n; i += 4099) {
        b[i] = (uint8_t)(i * 7 + 1);
    }
    fs_prefault_write(b + 1, n - 5000); /* unaligned start and end */
    fs_prefault_write(b, n);
    fs_prefault_write(b + 10, 100); /* less than a page: nothing to do */
    fs_prefault_write(NULL, n);
    fs_prefault_write(b, 0);
    for (size_t i = 0; i < n; i++) {
        uint8_t want = i % 4099 == 0 ? (uint8_t)(i * 7 + 1) : 0;
        bad += b[i] != want;
    }
    CHECK_MSG(bad == 0, "%zu bytes changed", bad);
    free(v);
}

int main(void)
{
    RUN(test_alloc_eye_dup);
    RUN(test_view_copy_transpose);
    RUN(test_transpose_large_tiles);
    RUN(test_gemm_all_ops);
    RUN(test_gemm_errors);
    RUN(test_gemm_degenerate);
    RUN(test_norms_finite);
    RUN(test_axpy_scale_zero_wipe);
    RUN(test_fill_normal_view_equals_compact);
    RUN(test_prefault_keeps_contents);
    return TEST_END("test_la_mat");
}
