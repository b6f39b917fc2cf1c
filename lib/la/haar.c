#include "haar.h"

#include <lapacke.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>

#include "la_internal.h"

struct fs_haar {
    size_t n;
    fs_mat *v;   /* n x n; column j holds reflector j below the diagonal (LAPACK geqrf layout) */
    double *tau; /* n scalars, H_j = I - tau_j v_j v_j^T */
    double *s;   /* n signs: Q = H_0 ... H_{n-1} diag(s) */
};

size_t fs_haar_dim(const fs_haar *h)
{
    return h != NULL ? h->n : 0;
}

void fs_haar_free(fs_haar *h)
{
    if (h == NULL) {
        return;
    }
    fs_mat_wipe(h->v);
    fs_mat_free(h->v);
    if (h->tau != NULL) {
        OPENSSL_cleanse(h->tau, h->n * sizeof *h->tau);
    }
    if (h->s != NULL) {
        OPENSSL_cleanse(h->s, h->n * sizeof *h->s);
    }
    free(h->tau);
    free(h->s);
    free(h);
}

/*
 * Reflector j from x = column j's entries j..n-1 (length L), in LAPACK's
 * dlarfg convention: H [alpha; x'] = [beta; 0] with H = I - tau v v^T,
 * v = [1; x' / (alpha - beta)], beta = -sign(alpha) ||x||. Writes v below the
 * diagonal of column j in place and returns beta (= R_jj).
 */
static double make_reflector(double *x, size_t len, double *tau)
{
    double alpha = x[0];
    double ss = 0.0;
    double beta;
    double scale;

    for (size_t i = 1; i < len; i++) {
        ss += x[i] * x[i];
    }
    if (ss == 0.0) {
        *tau = 0.0;
        return alpha;
    }
    beta = -copysign(sqrt(alpha * alpha + ss), alpha);
    *tau = (beta - alpha) / beta;
    scale = 1.0 / (alpha - beta);
    for (size_t i = 1; i < len; i++) {
        x[i] *= scale;
    }
    x[0] = beta;
    return beta;
}

int fs_haar_gen(size_t n, fs_prg *prg, fs_haar **out, struct fs_err *err)
{
    fs_haar *h = NULL;
    int rc = 0;

    if (out == NULL || prg == NULL || n == 0) {
        return fs_err_set(err, FS_EINVAL, "haar: invalid argument");
    }
    *out = NULL;
    if (!la_fits_int(n)) {
        return fs_err_set(err, FS_ERANGE, "haar: dimension %zu exceeds the LAPACK int range", n);
    }
    h = calloc(1, sizeof *h);
    if (h == NULL) {
        return fs_err_set(err, FS_ENOMEM, "haar: out of memory");
    }
    h->n = n;
    h->v = fs_mat_new(n, n);
    h->tau = malloc(n * sizeof *h->tau);
    h->s = malloc(n * sizeof *h->s);
    if (h->v == NULL || h->tau == NULL || h->s == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "haar: out of memory for %zux%zu", n, n);
        goto out;
    }
    for (size_t j = 0; rc == 0 && j < n; j++) {
        double *x = &FS_MAT_AT(h->v, j, j);
        rc = fs_prg_normal(prg, x, n - j, err);
        if (rc == 0) {
            /* R_jj = beta; flipping column j of Q when beta < 0 makes diag(R) > 0. */
            h->s[j] = make_reflector(x, n - j, &h->tau[j]) < 0.0 ? -1.0 : 1.0;
        }
    }
out:
    if (rc != 0) {
        fs_haar_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

static void scale_rows(fs_mat *x, const double *s)
{
    for (size_t j = 0; j < x->cols; j++) {
        for (size_t i = 0; i < x->rows; i++) {
            FS_MAT_AT(x, i, j) *= s[i];
        }
    }
}

static void scale_cols(fs_mat *x, const double *s)
{
    for (size_t j = 0; j < x->cols; j++) {
        for (size_t i = 0; i < x->rows; i++) {
            FS_MAT_AT(x, i, j) *= s[j];
        }
    }
}

static int apply_check(const fs_haar *h, char op, const fs_mat *x, int left, struct fs_err *err)
{
    if (h == NULL || !la_mat_ok(x)) {
        return fs_err_set(err, FS_EINVAL, "haar: invalid argument");
    }
    if (op != 'N' && op != 'T') {
        return fs_err_set(err, FS_EINVAL, "haar: op must be 'N' or 'T'");
    }
    if ((left ? x->rows : x->cols) != h->n) {
        return fs_err_set(err, FS_EINVAL, "haar: %zux%zu orthogonal %s a %zux%zu matrix", h->n,
                          h->n, left ? "times" : "applied to the right of", x->rows, x->cols);
    }
    if (!la_mat_fits_int(x)) {
        return fs_err_set(err, FS_ERANGE, "haar: dimension exceeds the LAPACK int range");
    }
    return 0;
}

/* x = op(Q_h) x or x op(Q_h) for the bare reflector product Q_h = H_0 ... H_{n-1}.
 * The _work variant skips LAPACKE's NaN scan of the n x n reflector matrix,
 * which would otherwise cost as much as a thin product (the reflectors are
 * finite by construction; x was checked by the caller or is ours). */
static int ormqr(fs_haar *h, char side, char op, size_t nref, fs_mat *x, struct fs_err *err)
{
    double query = 0.0;
    double *work = NULL;
    lapack_int lwork;
    lapack_int info;
    lapack_int m = (lapack_int)x->rows;
    lapack_int n = (lapack_int)x->cols;
    lapack_int k = (lapack_int)nref;
    lapack_int lda = (lapack_int)h->v->ld;
    lapack_int ldc = (lapack_int)x->ld;

    if (x->rows == 0 || x->cols == 0) {
        return 0;
    }
    info = LAPACKE_dormqr_work(LAPACK_COL_MAJOR, side, op, m, n, k, h->v->data, lda, h->tau,
                               x->data, ldc, &query, -1);
    if (info == 0) {
        lwork = query >= 1.0 && query < (double)INT32_MAX ? (lapack_int)query : 1;
        work = malloc((size_t)lwork * sizeof *work);
        if (work == NULL) {
            return fs_err_set(err, FS_ENOMEM, "haar: out of memory for workspace");
        }
        info = LAPACKE_dormqr_work(LAPACK_COL_MAJOR, side, op, m, n, k, h->v->data, lda, h->tau,
                                   x->data, ldc, work, lwork);
        free(work);
    }
    if (info != 0) {
        return fs_err_set(err, FS_ENUMERIC, "haar: dormqr failed (info %d)", (int)info);
    }
    return 0;
}

int fs_haar_apply_left(fs_haar *h, char op, fs_mat *x, struct fs_err *err)
{
    int rc = apply_check(h, op, x, 1, err);

    if (rc != 0) {
        return rc;
    }
    if (op == 'N') {
        /* Q x = Q_h (S x) */
        scale_rows(x, h->s);
        return ormqr(h, 'L', 'N', h->n, x, err);
    }
    /* Q^T x = S (Q_h^T x) */
    rc = ormqr(h, 'L', 'T', h->n, x, err);
    if (rc == 0) {
        scale_rows(x, h->s);
    }
    return rc;
}

int fs_haar_apply_right(fs_haar *h, char op, fs_mat *x, struct fs_err *err)
{
    int rc = apply_check(h, op, x, 0, err);

    if (rc != 0) {
        return rc;
    }
    if (op == 'N') {
        /* x Q = (x Q_h) S */
        rc = ormqr(h, 'R', 'N', h->n, x, err);
        if (rc == 0) {
            scale_cols(x, h->s);
        }
        return rc;
    }
    /* x Q^T = (x S) Q_h^T */
    scale_cols(x, h->s);
    return ormqr(h, 'R', 'T', h->n, x, err);
}

/* Columns are always produced in chunks aligned to multiples of this, so a
 * column's bits do not depend on which range it was requested with. */
#define HAAR_COL_CHUNK 64

int fs_haar_columns(fs_haar *h, size_t c0, fs_mat *out, struct fs_err *err)
{
    fs_mat *scratch = NULL;
    size_t w;
    int rc = 0;

    if (h == NULL || !la_mat_ok(out) || out->rows != h->n || c0 > h->n || out->cols > h->n - c0) {
        return fs_err_set(err, FS_EINVAL, "haar: bad column range");
    }
    w = out->cols;
    if (w == 0) {
        return 0;
    }
    scratch = fs_mat_new_uninit(h->n, HAAR_COL_CHUNK);
    if (scratch == NULL) {
        return fs_err_set(err, FS_ENOMEM, "haar: out of memory");
    }
    for (size_t a = c0 / HAAR_COL_CHUNK; rc == 0 && a * HAAR_COL_CHUNK < c0 + w; a++) {
        size_t lo = a * HAAR_COL_CHUNK;
        size_t cw = h->n - lo < HAAR_COL_CHUNK ? h->n - lo : HAAR_COL_CHUNK;
        size_t from = c0 > lo ? c0 : lo;
        size_t to = c0 + w < lo + cw ? c0 + w : lo + cw;
        fs_mat e = fs_mat_view(scratch, 0, 0, h->n, cw);
        fs_mat_zero(&e);
        /* Q e_r = Q_h (s_r e_r) = s_r H_0 ... H_r e_r: reflectors past the
         * chunk fix its columns exactly, so they are skipped. */
        for (size_t c = 0; c < cw; c++) {
            FS_MAT_AT(&e, lo + c, c) = h->s[lo + c];
        }
        rc = ormqr(h, 'L', 'N', lo + cw, &e, err);
        if (rc == 0) {
            fs_mat src = fs_mat_view(&e, 0, from - lo, h->n, to - from);
            fs_mat dst = fs_mat_view(out, 0, from - c0, h->n, to - from);
            rc = fs_mat_copy(&dst, &src, err);
        }
    }
    fs_mat_wipe(scratch);
    fs_mat_free(scratch);
    return rc;
}

int fs_haar_fill(fs_mat *q, fs_prg *prg, struct fs_err *err)
{
    fs_haar *h = NULL;
    int rc;

    if (!la_mat_ok(q) || prg == NULL) {
        return fs_err_set(err, FS_EINVAL, "haar: invalid argument");
    }
    if (q->rows != q->cols) {
        return fs_err_set(err, FS_EINVAL, "haar: %zux%zu is not square", q->rows, q->cols);
    }
    if (q->rows == 0) {
        return 0;
    }
    rc = fs_haar_gen(q->rows, prg, &h, err);
    if (rc == 0) {
        rc = fs_haar_columns(h, 0, q, err);
    }
    fs_haar_free(h);
    return rc;
}

int fs_haar_new(size_t n, fs_prg *prg, fs_mat **out, struct fs_err *err)
{
    fs_mat *q = NULL;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "haar: out is NULL");
    }
    *out = NULL;
    q = fs_mat_new_uninit(n, n);
    if (q == NULL) {
        return fs_err_set(err, FS_ENOMEM, "haar: out of memory for %zux%zu", n, n);
    }
    rc = fs_haar_fill(q, prg, err);
    if (rc != 0) {
        fs_mat_free(q);
        return rc;
    }
    *out = q;
    return 0;
}

int fs_haar_from_seed(size_t n, const uint8_t seed[32], fs_mat **out, struct fs_err *err)
{
    fs_prg *prg = NULL;
    int rc;

    if (out == NULL || seed == NULL) {
        return fs_err_set(err, FS_EINVAL, "haar: NULL argument");
    }
    *out = NULL;
    rc = fs_prg_new(&prg, seed, NULL, err);
    if (rc == 0) {
        rc = fs_haar_new(n, prg, out, err);
    }
    fs_prg_free(prg);
    return rc;
}
