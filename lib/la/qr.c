#include "qr.h"

#include <lapacke.h>
#include <stdlib.h>
#include <string.h>

#include "la_internal.h"

static int qr_check(const fs_mat *a, const fs_mat *r, struct fs_err *err)
{
    if (!la_mat_ok(a)) {
        return fs_err_set(err, FS_EINVAL, "qr: invalid matrix");
    }
    if (a->rows < a->cols) {
        return fs_err_set(err, FS_EINVAL, "qr: %zux%zu has more columns than rows", a->rows,
                          a->cols);
    }
    if (r != NULL && (!la_mat_ok(r) || r->rows != a->cols || r->cols != a->cols)) {
        return fs_err_set(err, FS_EINVAL, "qr: R must be %zux%zu", a->cols, a->cols);
    }
    if (r != NULL && fs_mat_overlap(a, r)) {
        return fs_err_set(err, FS_EINVAL, "qr: R overlaps A");
    }
    if (!la_mat_fits_int(a)) {
        return fs_err_set(err, FS_ERANGE, "qr: dimension exceeds the LAPACK int range");
    }
    if (!fs_mat_all_finite(a, NULL, NULL)) {
        return fs_err_set(err, FS_EINVAL, "qr: input has non-finite entries");
    }
    return 0;
}

static int lapack_fail(struct fs_err *err, const char *what, lapack_int info)
{
    return fs_err_set(err, info == LAPACK_WORK_MEMORY_ERROR ? FS_ENOMEM : FS_ENUMERIC,
                      "qr: %s failed (info %d)", what, (int)info);
}

int fs_qr_orth(fs_mat *a, fs_mat *r_or_null, struct fs_err *err)
{
    double *tau = NULL;
    unsigned char *neg = NULL;
    lapack_int info;
    size_t m;
    size_t k;
    int rc = qr_check(a, r_or_null, err);

    if (rc != 0 || a->cols == 0) {
        return rc;
    }
    m = a->rows;
    k = a->cols;
    tau = malloc(k * sizeof *tau);
    neg = malloc(k);
    if (tau == NULL || neg == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "qr: out of memory");
        goto out;
    }
    info = LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)m, (lapack_int)k, a->data,
                          (lapack_int)a->ld, tau);
    if (info != 0) {
        rc = lapack_fail(err, "dgeqrf", info);
        goto out;
    }
    /* R sits in the upper triangle until dorgqr overwrites it. */
    for (size_t j = 0; j < k; j++) {
        neg[j] = FS_MAT_AT(a, j, j) < 0.0;
    }
    if (r_or_null != NULL) {
        fs_mat_zero(r_or_null);
        for (size_t j = 0; j < k; j++) {
            for (size_t i = 0; i <= j; i++) {
                FS_MAT_AT(r_or_null, i, j) = neg[i] ? -FS_MAT_AT(a, i, j) : FS_MAT_AT(a, i, j);
            }
        }
    }
    info = LAPACKE_dorgqr(LAPACK_COL_MAJOR, (lapack_int)m, (lapack_int)k, (lapack_int)k, a->data,
                          (lapack_int)a->ld, tau);
    if (info != 0) {
        rc = lapack_fail(err, "dorgqr", info);
        goto out;
    }
    /* A = Q R = (Q S)(S R) with S = diag(+-1): flip column j of Q wherever
     * R_jj < 0 (row j of R was flipped above). */
    for (size_t j = 0; j < k; j++) {
        if (neg[j]) {
            for (size_t i = 0; i < m; i++) {
                FS_MAT_AT(a, i, j) = -FS_MAT_AT(a, i, j);
            }
        }
    }
out:
    free(neg);
    free(tau);
    return rc;
}

/* Panel width of dgeqrt. */
#define QR_NB 64

/* After the QR of a: R (its upper triangle, r rows) moves to the first r n
 * words with ld r, the rest of an owned buffer goes back to the system. */
static void keep_r(fs_mat *a)
{
    size_t n = a->cols;
    size_t r = a->rows < n ? a->rows : n;
    double *d = a->data;

    for (size_t j = 0; j < n; j++) {
        size_t keep = j + 1 < r ? j + 1 : r;
        /* column j moves from j*ld to j*r <= j*ld: forward order is safe */
        memmove(d + j * r, d + j * a->ld, keep * sizeof *d);
        memset(d + j * r + keep, 0, (r - keep) * sizeof *d);
    }
    if (a->owns && a->ld > r) {
        double *shrunk = realloc(d, r * n * sizeof *d);
        if (shrunk != NULL) {
            a->data = shrunk;
        }
    }
    a->rows = r;
    a->ld = r;
}

int fs_qr_keep_r(fs_mat *a, struct fs_err *err)
{
    fs_mat *tw = NULL; /* T (nb x r) then the workspace (nb x n) */
    size_t m;
    size_t n;
    size_t nb;
    lapack_int info;
    int rc = 0;

    if (!la_mat_ok(a) || a->rows == 0 || a->cols == 0) {
        return fs_err_set(err, FS_EINVAL, "qr: invalid matrix");
    }
    if (!la_mat_fits_int(a)) {
        return fs_err_set(err, FS_ERANGE, "qr: dimension exceeds the LAPACK int range");
    }
    m = a->rows;
    n = a->cols;
    nb = m < n ? m : n;
    nb = nb < QR_NB ? nb : QR_NB;
    tw = fs_mat_new_uninit(nb, 2 * n);
    if (tw == NULL) {
        return fs_err_set(err, FS_ENOMEM, "qr: out of memory for the QR of %zux%zu", m, n);
    }
    info =
        LAPACKE_dgeqrt_work(LAPACK_COL_MAJOR, (lapack_int)m, (lapack_int)n, (lapack_int)nb, a->data,
                            (lapack_int)a->ld, tw->data, (lapack_int)nb, tw->data + nb * n);
    if (info != 0) {
        rc = lapack_fail(err, "dgeqrt", info);
    } else {
        keep_r(a);
    }
    fs_mat_wipe(tw);
    fs_mat_free(tw);
    return rc;
}
