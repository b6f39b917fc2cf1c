/* Householder QR with diag(R) >= 0, and orthogonal Procrustes. */
#include <stdint.h>

#include "la/procrustes.h"
#include "la/qr.h"
#include "test.h"
#include "test_la_util.h"

static void check_qr(const fs_mat *a0, const fs_mat *q, const fs_mat *r)
{
    struct fs_err err = {0};
    fs_mat *qr = NULL;

    CHECK_MSG(tl_orth_err(q) < 1e-13, "orth %g", tl_orth_err(q));
    CHECK_OK(fs_mat_mul('N', 'N', q, r, &qr, &err), &err);
    if (qr != NULL) {
        CHECK_OK(fs_mat_axpy(-1.0, a0, qr, &err), &err);
        CHECK_MSG(fs_mat_norm_fro(qr) < 1e-14 * fs_mat_norm_fro(a0), "||QR - A|| = %g",
                  fs_mat_norm_fro(qr));
    }
    for (size_t j = 0; j < r->cols; j++) {
        CHECK(FS_MAT_AT(r, j, j) >= 0.0);
        for (size_t i = j + 1; i < r->rows; i++) {
            CHECK(FS_MAT_AT(r, i, j) == 0.0);
        }
    }
    fs_mat_free(qr);
}

static void test_qr_random(void)
{
    struct fs_err err = {0};
    fs_mat *a = tl_randn(100, 20, 1);
    fs_mat *q = fs_mat_dup(a);
    fs_mat *r = fs_mat_new(20, 20);

    CHECK_OK(fs_qr_orth(q, r, &err), &err);
    check_qr(a, q, r);
    fs_mat_free(a);
    fs_mat_free(q);
    fs_mat_free(r);
}

static void test_qr_view_and_square(void)
{
    struct fs_err err = {0};
    fs_mat *big = tl_randn(50, 40, 2);
    fs_mat v = fs_mat_view(big, 3, 5, 30, 30);
    fs_mat *a0 = fs_mat_dup(&v);
    fs_mat *rbig = fs_mat_new(40, 40);
    fs_mat rv = fs_mat_view(rbig, 2, 2, 30, 30);
    fs_mat *q2 = fs_mat_dup(a0);

    CHECK_OK(fs_qr_orth(&v, &rv, &err), &err);
    check_qr(a0, &v, &rv);
    CHECK(FS_MAT_AT(big, 2, 5) != 0.0 && FS_MAT_AT(rbig, 1, 1) == 0.0);
    /* Without R the same Q comes out (up to rounding: some BLAS kernels
     * round differently for a different ld or alignment). */
    CHECK_OK(fs_qr_orth(q2, NULL, &err), &err);
    CHECK(tl_max_diff(q2, &v) < 1e-14);
    fs_mat_free(big);
    fs_mat_free(a0);
    fs_mat_free(rbig);
    fs_mat_free(q2);
}

static void test_qr_rank_deficient(void)
{
    struct fs_err err = {0};
    fs_mat *a = tl_randn(30, 6, 3);
    fs_mat *r = fs_mat_new(6, 6);
    fs_mat *a0 = NULL;

    /* column 4 = column 1, column 5 = 0 */
    for (size_t i = 0; i < 30; i++) {
        FS_MAT_AT(a, i, 4) = FS_MAT_AT(a, i, 1);
        FS_MAT_AT(a, i, 5) = 0.0;
    }
    a0 = fs_mat_dup(a);
    CHECK_OK(fs_qr_orth(a, r, &err), &err);
    check_qr(a0, a, r);
    CHECK(fabs(FS_MAT_AT(r, 4, 4)) < 1e-13 && FS_MAT_AT(r, 5, 5) == 0.0);
    fs_mat_free(a);
    fs_mat_free(a0);
    fs_mat_free(r);
}

static void test_qr_errors(void)
{
    struct fs_err err = {0};
    fs_mat *wide = tl_randn(3, 5, 4);
    fs_mat *a = tl_randn(6, 3, 5);
    fs_mat *r = fs_mat_new(2, 3);
    fs_mat *none = fs_mat_new(4, 0);

    CHECK(fs_qr_orth(wide, NULL, &err) == FS_EINVAL);
    CHECK(fs_qr_orth(a, r, &err) == FS_EINVAL);
    CHECK(fs_qr_orth(NULL, NULL, &err) == FS_EINVAL);
    CHECK_OK(fs_qr_orth(none, NULL, &err), &err);
    FS_MAT_AT(a, 1, 1) = INFINITY;
    CHECK(fs_qr_orth(a, NULL, &err) == FS_EINVAL);
    {
        fs_mat *sq = tl_randn(4, 4, 6);
        fs_mat rv = fs_mat_view(sq, 0, 0, 4, 4);
        CHECK(fs_qr_orth(sq, &rv, &err) == FS_EINVAL); /* R aliases A */
        fs_mat_free(sq);
    }
    fs_mat_free(wide);
    fs_mat_free(a);
    fs_mat_free(r);
    fs_mat_free(none);
}

static void test_procrustes_recovers_rotation(void)
{
    struct fs_err err = {0};
    fs_mat *y = tl_randn(80, 6, 7);
    fs_mat *d0 = tl_haar(6, 8);
    fs_mat *z = NULL;
    fs_mat *ya = NULL;
    fs_mat *d = NULL;

    CHECK_OK(fs_qr_orth(y, NULL, &err), &err);
    CHECK_OK(fs_mat_mul('N', 'N', y, d0, &z, &err), &err);
    /* Z = Y D0: the optimal D is D0 itself, and Y D reproduces Z. */
    CHECK_OK(fs_procrustes_align(y, z, &ya, &d, &err), &err);
    CHECK_MSG(tl_max_diff(d, d0) < 1e-13, "D - D0 = %g", tl_max_diff(d, d0));
    CHECK(tl_max_diff(ya, z) < 1e-13);
    CHECK(tl_orth_err(d) < 1e-13);
    fs_mat_free(ya);
    fs_mat_free(d);
    ya = NULL;
    d = NULL;
    /* Unnormalised Y and a little noise: still close to D0 (noise 1e-6). */
    {
        fs_mat *noise = tl_randn(80, 6, 9);
        fs_mat *y2 = tl_randn(80, 6, 10);
        fs_mat *z2 = NULL;
        CHECK_OK(fs_mat_mul('N', 'N', y2, d0, &z2, &err), &err);
        CHECK_OK(fs_mat_axpy(1e-6, noise, z2, &err), &err);
        CHECK_OK(fs_procrustes_align(y2, z2, &ya, NULL, &err), &err);
        CHECK_OK(fs_procrustes_rotation(d0, &d, &err), &err); /* polar factor of Q is Q */
        CHECK(tl_max_diff(d, d0) < 1e-13);
        CHECK(ya != NULL && tl_max_diff(ya, z2) < 1e-4);
        fs_mat_free(noise);
        fs_mat_free(y2);
        fs_mat_free(z2);
    }
    fs_mat_free(y);
    fs_mat_free(d0);
    fs_mat_free(z);
    fs_mat_free(ya);
    fs_mat_free(d);
}

static void test_procrustes_spd_is_identity(void)
{
    struct fs_err err = {0};
    fs_mat *x = tl_randn(10, 4, 11);
    fs_mat *m = NULL;
    fs_mat *d = NULL;
    fs_mat *eye = fs_mat_eye(4);

    CHECK_OK(fs_mat_mul('T', 'N', x, x, &m, &err), &err); /* SPD: polar factor I */
    CHECK_OK(fs_procrustes_rotation(m, &d, &err), &err);
    CHECK(tl_max_diff(d, eye) < 1e-13);
    fs_mat_free(x);
    fs_mat_free(m);
    fs_mat_free(d);
    fs_mat_free(eye);
}

static void test_procrustes_errors(void)
{
    struct fs_err err = {0};
    fs_mat *y = tl_randn(10, 3, 12);
    fs_mat *z = tl_randn(10, 4, 13);
    fs_mat *out = NULL;
    fs_mat *d = NULL;
    fs_mat *e = fs_mat_new(0, 0);

    CHECK(fs_procrustes_align(y, z, &out, &d, &err) == FS_EINVAL);
    CHECK(out == NULL && d == NULL);
    CHECK(fs_procrustes_align(y, NULL, &out, NULL, &err) == FS_EINVAL);
    CHECK(fs_procrustes_rotation(e, &d, &err) == FS_EINVAL && d == NULL);
    fs_mat_free(y);
    fs_mat_free(z);
    fs_mat_free(e);
}

int main(void)
{
    RUN(test_qr_random);
    RUN(test_qr_view_and_square);
    RUN(test_qr_rank_deficient);
    RUN(test_qr_errors);
    RUN(test_procrustes_recovers_rotation);
    RUN(test_procrustes_spd_is_identity);
    RUN(test_procrustes_errors);
    return TEST_END("test_la_qr");
}
