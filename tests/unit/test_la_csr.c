/* CSR: construction from triplets (duplicates summed, rows sorted), products
 * A Z, A^T W and the implicit covariance A^T (A Z) against dense products,
 * structural checks and errors; the implicit covariance bit for bit against
 * the column-by-column loop it replaced. */
#include <stdint.h>

#include "la/csr.h"
#include "test.h"
#include "test_la_util.h"

/* A random sparse matrix with about `per_row` entries per row, some of them
 * repeated, also returned densely (duplicates summed) for reference. */
static fs_csr *random_csr(size_t rows, size_t cols, size_t per_row, uint8_t seed, fs_mat **dense)
{
    uint8_t key[32] = {seed, 0xc5};
    struct fs_err err = {0};
    fs_prg *prg = NULL;
    size_t cap = rows * per_row + 8;
    size_t *ri = malloc(cap * sizeof *ri);
    size_t *ci = malloc(cap * sizeof *ci);
    double *v = malloc(cap * sizeof *v);
    size_t nnz = 0;
    fs_csr *a = NULL;

    *dense = fs_mat_new(rows, cols);
    if (ri == NULL || ci == NULL || v == NULL || *dense == NULL ||
        fs_prg_new(&prg, key, NULL, &err) != 0) {
        goto out;
    }
    for (size_t p = 0; p < rows * per_row; p++) {
        uint64_t r = 0;
        uint64_t c = 0;
        double x = 0.0;
        if (fs_prg_below(prg, rows, &r, &err) != 0 || fs_prg_below(prg, cols, &c, &err) != 0 ||
            fs_prg_normal(prg, &x, 1, &err) != 0) {
            goto out;
        }
        ri[nnz] = (size_t)r;
        ci[nnz] = (size_t)c;
        v[nnz] = x;
        FS_MAT_AT(*dense, r, c) += x;
        nnz++;
    }
    /* explicit duplicates of the first entries */
    for (size_t p = 0; p < 8 && p < nnz; p++) {
        ri[nnz] = ri[p];
        ci[nnz] = ci[p];
        v[nnz] = 0.5;
        FS_MAT_AT(*dense, ri[p], ci[p]) += 0.5;
        nnz++;
    }
    if (fs_csr_from_coo(rows, cols, nnz, ri, ci, v, &a, &err) != 0) {
        a = NULL;
    }
out:
    fs_prg_free(prg);
    free(ri);
    free(ci);
    free(v);
    return a;
}

static void test_from_coo_duplicates(void)
{
    /* 3 x 4 with (1,2) given three times and entries out of order */
    size_t ri[] = {1, 0, 1, 2, 1, 0};
    size_t ci[] = {2, 3, 0, 1, 2, 0};
    double v[] = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0};
    size_t ri2[] = {1, 1};
    size_t ci2[] = {2, 2};
    double v2[] = {0.25, 0.5};
    struct fs_err err = {0};
    fs_csr *a = NULL;
    fs_csr *b = NULL;
    fs_mat *d = NULL;

    CHECK_OK(fs_csr_from_coo(3, 4, 6, ri, ci, v, &a, &err), &err);
    if (a == NULL) {
        return;
    }
    CHECK(a->nnz == 5);
    CHECK(a->rowptr[0] == 0 && a->rowptr[1] == 2 && a->rowptr[2] == 4 && a->rowptr[3] == 5);
    CHECK(a->colidx[0] == 0 && a->colidx[1] == 3 && a->colidx[2] == 0 && a->colidx[3] == 2);
    CHECK(a->vals[3] == 6.0);
    CHECK_OK(fs_csr_check(a, &err), &err);
    CHECK_OK(fs_csr_to_dense(a, &d, &err), &err);
    CHECK(d != NULL && FS_MAT_AT(d, 1, 2) == 6.0 && FS_MAT_AT(d, 0, 0) == 6.0 &&
          FS_MAT_AT(d, 2, 1) == 4.0 && FS_MAT_AT(d, 2, 3) == 0.0);
    CHECK_OK(fs_csr_from_coo(3, 4, 2, ri2, ci2, v2, &b, &err), &err);
    CHECK(b != NULL && b->nnz == 1 && b->vals[0] == 0.75);
    fs_csr_free(a);
    fs_csr_free(b);
    fs_mat_free(d);
}

static void test_empty(void)
{
    struct fs_err err = {0};
    fs_csr *a = NULL;
    fs_mat *z = tl_randn(5, 2, 1);
    fs_mat *y = tl_randn(5, 2, 2);

    CHECK_OK(fs_csr_from_coo(4, 5, 0, NULL, NULL, NULL, &a, &err), &err);
    CHECK(a != NULL && a->nnz == 0);
    CHECK_OK(fs_csr_ata_mul(a, z, 1.0, y, &err), &err);
    CHECK(fs_mat_max_abs(y) == 0.0);
    fs_csr_free(a);
    fs_csr_free(NULL);
    fs_mat_free(z);
    fs_mat_free(y);
}

static void test_products_match_dense(void)
{
    enum { R = 300, C = 80, K = 6 };
    struct fs_err err = {0};
    fs_mat *d = NULL;
    fs_csr *a = random_csr(R, C, 5, 3, &d);
    fs_mat *zbig = tl_randn(C + 4, K + 2, 4);
    fs_mat z = fs_mat_view(zbig, 2, 1, C, K); /* strided input */
    fs_mat *w = tl_randn(R, K, 5);
    fs_mat *y1 = fs_mat_new(R, K);
    fs_mat *y2 = fs_mat_new(C, K);
    fs_mat *y3 = fs_mat_new(C, K);
    fs_mat *ref = NULL;
    fs_mat *az = NULL;
    fs_mat *dd = NULL;

    CHECK(a != NULL);
    if (a == NULL) {
        goto out;
    }
    CHECK_OK(fs_csr_check(a, &err), &err);
    CHECK_OK(fs_csr_to_dense(a, &dd, &err), &err);
    CHECK(tl_max_diff(dd, d) < 1e-15);
    CHECK_OK(fs_csr_mul(a, &z, y1, &err), &err);
    CHECK_OK(fs_mat_mul('N', 'N', d, &z, &ref, &err), &err);
    CHECK(tl_max_diff(y1, ref) < 1e-13);
    fs_mat_free(ref);
    ref = NULL;
    CHECK_OK(fs_csr_tmul(a, w, y2, &err), &err);
    CHECK_OK(fs_mat_mul('T', 'N', d, w, &ref, &err), &err);
    CHECK(tl_max_diff(y2, ref) < 1e-13);
    fs_mat_free(ref);
    ref = NULL;
    /* A^T (A Z) * 0.25 */
    CHECK_OK(fs_csr_ata_mul(a, &z, 0.25, y3, &err), &err);
    CHECK_OK(fs_mat_mul('N', 'N', d, &z, &az, &err), &err);
    CHECK_OK(fs_mat_mul('T', 'N', d, az, &ref, &err), &err);
    fs_mat_scale(ref, 0.25);
    CHECK_MSG(tl_max_diff(y3, ref) < 1e-12 * fs_mat_max_abs(ref), "%g", tl_max_diff(y3, ref));
out:
    fs_csr_free(a);
    fs_mat_free(d);
    fs_mat_free(dd);
    fs_mat_free(zbig);
    fs_mat_free(w);
    fs_mat_free(y1);
    fs_mat_free(y2);
    fs_mat_free(y3);
    fs_mat_free(ref);
    fs_mat_free(az);
}

/* The implicit covariance product as it was first written, column by column
 * (one sum over the row per column of Z, then one scatter per column): the
 * reference that the row-major kernel must reproduce bit for bit. */
static void ata_reference(const fs_csr *a, const fs_mat *z, double scale, fs_mat *y)
{
    double t[64];

    fs_mat_zero(y);
    for (size_t i = 0; i < a->rows; i++) {
        size_t p0 = a->rowptr[i];
        size_t p1 = a->rowptr[i + 1];
        if (p0 == p1) {
            continue;
        }
        for (size_t c = 0; c < z->cols; c++) {
            const double *zc = z->data + c * z->ld;
            double s = 0.0;
            for (size_t p = p0; p < p1; p++) {
                s += a->vals[p] * zc[a->colidx[p]];
            }
            t[c] = s * scale;
        }
        for (size_t c = 0; c < z->cols; c++) {
            double *yc = y->data + c * y->ld;
            for (size_t p = p0; p < p1; p++) {
                yc[a->colidx[p]] += a->vals[p] * t[c];
            }
        }
    }
}

static void test_ata_bit_identical(void)
{
    /* rows, cols, entries per row (few: empty rows), k, extra ld of Z and Y, scale */
    static const struct {
        size_t rows, cols, per_row, k, pad;
        double scale;
    } cases[] = {
        {60, 30, 1, 1, 0, 1.0},
        {200, 97, 6, 3, 5, 0.37},
        {300, 250, 20, 10, 3, 1.0 / 300},
        {120, 64, 9, 17, 1, -2.5},
        {40, 1, 3, 2, 0, 0.5},
        {90, 40, 4, 16, 2, 1.0 / 90},
        {90, 40, 4, 18, 0, 3.0},
        {50, 45, 30, 33, 7, 1e-3},
        {80, 500, 2, 8, 0, 1.0},
        {30, 20, 5, 5, 1, 1.0 / 3.0},
        {30, 20, 5, 7, 0, 1.0 / 7.0},
        {30, 20, 5, 12, 4, 0.9},
    };
    struct fs_err err = {0};

    for (size_t n = 0; n < sizeof cases / sizeof cases[0]; n++) {
        size_t d = cases[n].cols;
        size_t k = cases[n].k;
        fs_mat *dense = NULL;
        fs_csr *a = random_csr(cases[n].rows, d, cases[n].per_row, (uint8_t)(40 + n), &dense);
        fs_mat *zbig = tl_randn(d + cases[n].pad + 1, k + 1, 70 + n);
        fs_mat *ybig = tl_randn(d + cases[n].pad, k, 90 + n);
        fs_mat z = fs_mat_view(zbig, 1, 1, d, k);
        fs_mat y = fs_mat_view(ybig, 0, 0, d, k);
        fs_mat *ref = fs_mat_new(d, k);
        size_t same = 0;

        CHECK(a != NULL && zbig != NULL && ybig != NULL && ref != NULL);
        if (a == NULL || zbig == NULL || ybig == NULL || ref == NULL) {
            goto next;
        }
        ata_reference(a, &z, cases[n].scale, ref);
        CHECK_OK(fs_csr_ata_mul(a, &z, cases[n].scale, &y, &err), &err);
        for (size_t c = 0; c < k; c++) {
            same += memcmp(y.data + c * y.ld, ref->data + c * ref->ld, d * sizeof(double)) == 0;
        }
        CHECK_MSG(same == k, "case %zu (k = %zu): %zu of %zu columns differ", n, k, k - same, k);
        CHECK(fs_mat_max_abs(ref) > 0.0);
    next:
        fs_csr_free(a);
        fs_mat_free(dense);
        fs_mat_free(zbig);
        fs_mat_free(ybig);
        fs_mat_free(ref);
    }
}

static void test_errors(void)
{
    size_t ri[] = {0, 3};
    size_t ci[] = {1, 1};
    double v[] = {1.0, 2.0};
    double vnan[] = {1.0, NAN};
    struct fs_err err = {0};
    fs_csr *a = NULL;
    fs_mat *d = NULL;
    fs_mat *z = tl_randn(4, 2, 6);
    fs_mat *ybad = fs_mat_new(3, 2);
    fs_mat *y = fs_mat_new(4, 2);

    CHECK(fs_csr_from_coo(3, 4, 2, ri, ci, v, &a, &err) == FS_EINVAL && a == NULL);
    CHECK(strstr(err.msg, "entry 1") != NULL);
    CHECK(fs_csr_from_coo(4, 4, 2, ri, ci, vnan, &a, &err) == FS_EINVAL);
    CHECK(fs_csr_from_coo(4, 4, 2, NULL, ci, v, &a, &err) == FS_EINVAL);
    CHECK(fs_csr_from_coo(4, (size_t)UINT32_MAX + 2, 2, ri, ci, v, &a, &err) == FS_ERANGE);
    CHECK_OK(fs_csr_from_coo(4, 4, 2, ri, ci, v, &a, &err), &err);
    if (a == NULL) {
        goto out;
    }
    CHECK(fs_csr_mul(a, z, ybad, &err) == FS_EINVAL);
    CHECK(fs_csr_tmul(a, ybad, y, &err) == FS_EINVAL);
    CHECK(fs_csr_ata_mul(a, z, 1.0, ybad, &err) == FS_EINVAL);
    CHECK(fs_csr_ata_mul(a, z, 1.0, z, &err) == FS_EINVAL); /* output overlaps input */
    CHECK(fs_csr_mul(NULL, z, y, &err) == FS_EINVAL);
    CHECK(fs_csr_to_dense(a, NULL, &err) == FS_EINVAL);
    /* corrupt structure is caught by fs_csr_check */
    a->colidx[1] = 9;
    CHECK(fs_csr_check(a, &err) == FS_EINVAL);
    a->colidx[1] = 1;
    a->rowptr[2] = 5;
    CHECK(fs_csr_check(a, &err) == FS_EINVAL);
    a->rowptr[2] = 1;
    CHECK_OK(fs_csr_check(a, &err), &err);
out:
    fs_csr_free(a);
    fs_mat_free(d);
    fs_mat_free(z);
    fs_mat_free(ybad);
    fs_mat_free(y);
}

int main(void)
{
    RUN(test_from_coo_duplicates);
    RUN(test_empty);
    RUN(test_products_match_dense);
    RUN(test_ata_bit_identical);
    RUN(test_errors);
    return TEST_END("test_la_csr");
}
