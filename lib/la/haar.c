#include "haar.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "la_internal.h"

/* Reflectors per panel: the compact WY block H_p0 ... H_p1-1 = I - V T V^T
 * used when forming columns. Panels start at multiples of HAAR_NB. */
#define HAAR_NB 64

/* Columns are always produced in chunks aligned to multiples of this (see
 * haar.h; a multiple of HAAR_NB). */
#define HAAR_COL_CHUNK FS_HAAR_COL_CHUNK

struct fs_haar {
    size_t n;
    size_t k;    /* reflectors generated: 0 .. k-1 (k == n for fs_haar_gen) */
    fs_mat *v;   /* n x n, columns 0 .. k-1 written (the others never touched): column
                    j is zero in rows [j - j % HAAR_NB, j), 1 at row j, the reflector
                    below, so each panel is a unit lower trapezoidal V; the lower part
                    is LAPACK's geqrf layout (dormqr ignores the rest) */
    double *tau; /* k scalars, H_j = I - tau_j v_j v_j^T */
    double *s;   /* k signs: Q = H_0 ... H_{n-1} diag(s) */
    double *t;   /* T factor of each panel (HAAR_NB x HAAR_NB, upper), or NULL */
    size_t nt;   /* panels whose T is computed (in order) */
};

size_t fs_haar_dim(const fs_haar *h)
{
    return h != NULL ? h->n : 0;
}

size_t fs_haar_prefix_for(size_t n, size_t c_end)
{
    size_t k;

    if (c_end >= n) {
        return n;
    }
    k = (c_end + HAAR_COL_CHUNK - 1) / HAAR_COL_CHUNK * HAAR_COL_CHUNK;
    return k < n ? k : n;
}

void fs_haar_free(fs_haar *h)
{
    if (h == NULL) {
        return;
    }
    if (h->v != NULL) {
        fs_mat drawn = fs_mat_view(h->v, 0, 0, h->n, h->k);
        fs_mat_wipe(&drawn);
    }
    fs_mat_free(h->v);
    if (h->tau != NULL) {
        OPENSSL_cleanse(h->tau, h->k * sizeof *h->tau);
    }
    if (h->s != NULL) {
        OPENSSL_cleanse(h->s, h->k * sizeof *h->s);
    }
    if (h->t != NULL) {
        OPENSSL_cleanse(h->t, h->nt * HAAR_NB * HAAR_NB * sizeof *h->t);
    }
    free(h->tau);
    free(h->s);
    free(h->t);
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

/* Draw reflectors h->k .. k-1 from prg (the stream, where reflector h->k starts). */
static int draw(fs_haar *h, size_t k, fs_prg *prg, struct fs_err *err)
{
    size_t n = h->n;
    int rc = 0;

    if (k > h->v->cols) { /* truncated before: back to n columns */
        fs_mat *v = fs_mat_new_uninit(n, n);
        fs_mat old = fs_mat_view(h->v, 0, 0, n, h->k);
        fs_mat dst = fs_mat_view(v, 0, 0, n, h->k);
        if (v == NULL) {
            return fs_err_set(err, FS_ENOMEM, "haar: out of memory for %zux%zu", n, n);
        }
        if (h->k > 0) {
            memcpy(dst.data, old.data, n * h->k * sizeof(double));
        }
        fs_mat_wipe(&old);
        fs_mat_free(h->v);
        h->v = v;
    }
    for (size_t j = h->k; rc == 0 && j < k; j++) {
        double *x = &FS_MAT_AT(h->v, j, j);
        rc = fs_prg_normal(prg, x, n - j, err);
        if (rc == 0) {
            /* R_jj = beta; flipping column j of Q when beta < 0 makes diag(R) > 0. */
            h->s[j] = make_reflector(x, n - j, &h->tau[j]) < 0.0 ? -1.0 : 1.0;
            x[0] = 1.0;
            for (size_t i = j - j % HAAR_NB; i < j; i++) {
                FS_MAT_AT(h->v, i, j) = 0.0;
            }
            h->k = j + 1;
        }
    }
    return rc;
}

int fs_haar_gen_prefix(size_t n, size_t k, fs_prg *prg, fs_haar **out, struct fs_err *err)
{
    fs_haar *h = NULL;
    int rc = 0;

    if (out == NULL || prg == NULL || n == 0 || k == 0 || k > n) {
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
    /* Only the lower trapezoid of the drawn columns and the panels' zeros above
     * it are ever read or wiped: no need to clear anything (and the columns not
     * drawn yet cost no memory until fs_haar_extend writes them). */
    h->v = fs_mat_new_uninit(n, n);
    h->tau = malloc(n * sizeof *h->tau);
    h->s = malloc(n * sizeof *h->s);
    if (h->v == NULL || h->tau == NULL || h->s == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "haar: out of memory for %zux%zu", n, n);
    }
    if (rc == 0) {
        rc = draw(h, k, prg, err);
    }
    if (rc != 0) {
        fs_haar_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

int fs_haar_extend(fs_haar *h, size_t k, fs_prg *prg, struct fs_err *err)
{
    if (h == NULL || prg == NULL || k > h->n) {
        return fs_err_set(err, FS_EINVAL, "haar: invalid argument");
    }
    return draw(h, k, prg, err);
}

int fs_haar_truncate(fs_haar *h, size_t k, struct fs_err *err)
{
    fs_mat *v;

    if (h == NULL || k == 0 || k > h->k || (k < h->n && k % HAAR_NB != 0)) {
        return fs_err_set(err, FS_EINVAL, "haar: cannot keep %zu reflectors", k);
    }
    if (k == h->k) {
        return 0;
    }
    v = fs_mat_new_uninit(h->n, k);
    if (v == NULL) {
        return fs_err_set(err, FS_ENOMEM, "haar: out of memory for %zux%zu", h->n, k);
    }
    memcpy(v->data, h->v->data, h->n * k * sizeof(double)); /* both ld n */
    {
        fs_mat drawn = fs_mat_view(h->v, 0, 0, h->n, h->k);
        fs_mat_wipe(&drawn);
    }
    fs_mat_free(h->v);
    h->v = v;
    OPENSSL_cleanse(h->tau + k, (h->k - k) * sizeof *h->tau);
    OPENSSL_cleanse(h->s + k, (h->k - k) * sizeof *h->s);
    if (h->nt > k / HAAR_NB) {
        OPENSSL_cleanse(h->t + k / HAAR_NB * HAAR_NB * HAAR_NB,
                        (h->nt - k / HAAR_NB) * HAAR_NB * HAAR_NB * sizeof *h->t);
        h->nt = k / HAAR_NB;
    }
    h->k = k;
    return 0;
}

size_t fs_haar_reflectors(const fs_haar *h)
{
    return h != NULL ? h->k : 0;
}

int fs_haar_gen(size_t n, fs_prg *prg, fs_haar **out, struct fs_err *err)
{
    return fs_haar_gen_prefix(n, n, prg, out, err);
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
    if (h->k != h->n) {
        return fs_err_set(err, FS_EINVAL, "haar: only %zu of %zu reflectors were generated", h->k,
                          h->n);
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

/* T factors of panels 0 .. np-1 (computed once per object, in order). As
 * LAPACK dlarft (forward, columnwise: T[0:i, i] = -tau_i T[0:i, 0:i]
 * V[:, 0:i]^T v_i), but with every V^T v_i of a panel from one BLAS-3 call,
 * S = V^T V (dsyrk; V is zero above its unit diagonal, so S[0:i, i] is
 * exactly that product), instead of one dgemv per reflector. */
static int panel_t(fs_haar *h, size_t np, struct fs_err *err)
{
    size_t npanels = (h->n + HAAR_NB - 1) / HAAR_NB;
    double *sm = NULL;

    if (h->nt >= np) {
        return 0;
    }
    if (h->t == NULL) {
        h->t = calloc(npanels * HAAR_NB * HAAR_NB, sizeof *h->t);
        if (h->t == NULL) {
            return fs_err_set(err, FS_ENOMEM, "haar: out of memory");
        }
    }
    sm = malloc(HAAR_NB * HAAR_NB * sizeof *sm);
    if (sm == NULL) {
        return fs_err_set(err, FS_ENOMEM, "haar: out of memory");
    }
    for (; h->nt < np; h->nt++) {
        size_t p0 = h->nt * HAAR_NB;
        size_t nbp = h->n - p0 < HAAR_NB ? h->n - p0 : HAAR_NB;
        const double *tau = h->tau + p0;
        double *t = h->t + h->nt * HAAR_NB * HAAR_NB;

        cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, (int)nbp, (int)(h->n - p0), 1.0,
                    &FS_MAT_AT(h->v, p0, p0), (int)h->v->ld, 0.0, sm, HAAR_NB);
        for (size_t i = 0; i < nbp; i++) {
            for (size_t r = 0; r < i; r++) {
                t[r + i * HAAR_NB] = -tau[i] * sm[r + i * HAAR_NB];
            }
            if (i > 0) {
                cblas_dtrmv(CblasColMajor, CblasUpper, CblasNoTrans, CblasNonUnit, (int)i, t,
                            HAAR_NB, t + i * HAAR_NB, 1);
            }
            t[i + i * HAAR_NB] = tau[i];
        }
    }
    OPENSSL_cleanse(sm, HAAR_NB * HAAR_NB * sizeof *sm);
    free(sm);
    return 0;
}

/*
 * x (n x cw) = columns lo .. lo + cw - 1 of Q, lo a multiple of
 * HAAR_COL_CHUNK: x = Q_h S E, applying the panels that can touch these
 * columns from the last to the first (the dorgqr scheme with each panel's T
 * computed once per object): panel [p0, p1) changes only rows >= p0 of the
 * columns >= p0, and when p1 <= lo those columns are still zero in rows
 * < p1. w (HAAR_NB x HAAR_COL_CHUNK) is scratch.
 */
static void form_chunk(const fs_haar *h, size_t lo, fs_mat *x, double *w)
{
    size_t n = h->n;
    size_t cw = x->cols;
    size_t ldv = h->v->ld;
    size_t ldx = x->ld;

    fs_mat_zero(x);
    for (size_t c = 0; c < cw; c++) {
        FS_MAT_AT(x, lo + c, c) = h->s[lo + c];
    }
    for (size_t b = (lo + cw - 1) / HAAR_NB + 1; b-- > 0;) {
        size_t p0 = b * HAAR_NB;
        size_t nbp = n - p0 < HAAR_NB ? n - p0 : HAAR_NB;
        size_t p1 = p0 + nbp;
        size_t jc = p0 > lo ? p0 - lo : 0;
        size_t wc = cw - jc;
        size_t q = p1 <= lo ? p1 : p0;
        const double *t = h->t + b * HAAR_NB * HAAR_NB;

        /* W = V[q:n, panel]^T X[q:n, jc:] (q < n: q <= lo or q = p0) */
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)nbp, (int)wc, (int)(n - q), 1.0,
                    &FS_MAT_AT(h->v, q, p0), (int)ldv, &FS_MAT_AT(x, q, jc), (int)ldx, 0.0, w,
                    HAAR_NB);
        /* W = T W;  X[p0:n, jc:] -= V[p0:n, panel] W */
        cblas_dtrmm(CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, (int)nbp,
                    (int)wc, 1.0, t, HAAR_NB, w, HAAR_NB);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)(n - p0), (int)wc, (int)nbp,
                    -1.0, &FS_MAT_AT(h->v, p0, p0), (int)ldv, w, HAAR_NB, 1.0,
                    &FS_MAT_AT(x, p0, jc), (int)ldx);
    }
}

int fs_haar_columns(fs_haar *h, size_t c0, fs_mat *out, struct fs_err *err)
{
    fs_mat *scratch = NULL;
    double *w = NULL;
    size_t w_cols;
    int rc = 0;

    if (h == NULL || !la_mat_ok(out) || out->rows != h->n || c0 > h->n || out->cols > h->n - c0) {
        return fs_err_set(err, FS_EINVAL, "haar: bad column range");
    }
    w_cols = out->cols;
    if (w_cols == 0) {
        return 0;
    }
    if (!la_mat_fits_int(out)) {
        return fs_err_set(err, FS_ERANGE, "haar: dimension exceeds the BLAS int range");
    }
    if (h->k < fs_haar_prefix_for(h->n, c0 + w_cols)) {
        return fs_err_set(err, FS_EINVAL, "haar: columns below %zu need %zu reflectors, have %zu",
                          c0 + w_cols, fs_haar_prefix_for(h->n, c0 + w_cols), h->k);
    }
    rc = panel_t(h, (fs_haar_prefix_for(h->n, c0 + w_cols) + HAAR_NB - 1) / HAAR_NB, err);
    if (rc != 0) {
        return rc;
    }
    w = malloc(HAAR_NB * HAAR_COL_CHUNK * sizeof *w);
    if (w == NULL) {
        return fs_err_set(err, FS_ENOMEM, "haar: out of memory");
    }
    for (size_t a = c0 / HAAR_COL_CHUNK; rc == 0 && a * HAAR_COL_CHUNK < c0 + w_cols; a++) {
        size_t lo = a * HAAR_COL_CHUNK;
        size_t cw = h->n - lo < HAAR_COL_CHUNK ? h->n - lo : HAAR_COL_CHUNK;
        size_t from = c0 > lo ? c0 : lo;
        size_t to = c0 + w_cols < lo + cw ? c0 + w_cols : lo + cw;
        /* Always formed in the aligned scratch (ld n), never in place in out:
         * the BLAS calls then see the same layout whatever the range. */
        if (scratch == NULL) {
            scratch = fs_mat_new_uninit(h->n, HAAR_COL_CHUNK);
            if (scratch == NULL) {
                rc = fs_err_set(err, FS_ENOMEM, "haar: out of memory");
                break;
            }
        }
        fs_mat e = fs_mat_view(scratch, 0, 0, h->n, cw);
        form_chunk(h, lo, &e, w);
        fs_mat src = fs_mat_view(&e, 0, from - lo, h->n, to - from);
        fs_mat dst = fs_mat_view(out, 0, from - c0, h->n, to - from);
        rc = fs_mat_copy(&dst, &src, err);
    }
    fs_mat_wipe(scratch);
    fs_mat_free(scratch);
    OPENSSL_cleanse(w, HAAR_NB * HAAR_COL_CHUNK * sizeof *w);
    free(w);
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
