/* Thin and top-k SVD.
 *
 * Sign convention (every routine here): singular vectors are only defined up
 * to a common sign flip of u_j and v_j, so each pair is normalised to make the
 * entry of largest magnitude of v_j positive (the first such entry on exact
 * ties). The same input therefore gives the same output whichever method ran,
 * up to rounding. */
#include "svd.h"

#include <lapacke.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/prg.h"
#include "../crypto/rand.h"
#include "la_internal.h"
#include "qr.h"

#define SVD_DEFAULT_OVERSAMPLE  10
#define SVD_DEFAULT_POWER_ITERS 4
/* AUTO picks the randomized method only when the sketch is at most this
 * fraction of min(m, n) and the matrix is large enough for it to pay off. */
#define SVD_AUTO_RATIO   4
#define SVD_AUTO_MIN_DIM 256

struct fs_svd_opts fs_svd_opts_default(void)
{
    struct fs_svd_opts o;

    memset(&o, 0, sizeof o);
    o.method = FS_TOPK_AUTO;
    o.oversample = SVD_DEFAULT_OVERSAMPLE;
    o.power_iters = SVD_DEFAULT_POWER_ITERS;
    o.seed = NULL;
    o.want_u = 1;
    return o;
}

void fs_svd_clear(fs_svd *s)
{
    if (s == NULL) {
        return;
    }
    fs_mat_free(s->u);
    fs_mat_free(s->v);
    free(s->s);
    memset(s, 0, sizeof *s);
}

size_t fs_svd_rank(const fs_svd *s, double rtol)
{
    size_t r = 0;

    if (s == NULL || s->s == NULL || s->r == 0 || !(s->s[0] > 0.0)) {
        return 0;
    }
    while (r < s->r && s->s[r] > rtol * s->s[0]) {
        r++;
    }
    return r;
}

/* Flip (u_j, v_j) so the largest-magnitude entry of v_j is positive. */
static void svd_fix_signs(fs_svd *s)
{
    for (size_t j = 0; j < s->r; j++) {
        size_t best = 0;
        double bv = -1.0;
        for (size_t i = 0; i < s->v->rows; i++) {
            double a = fabs(FS_MAT_AT(s->v, i, j));
            if (a > bv) {
                bv = a;
                best = i;
            }
        }
        if (s->v->rows == 0 || FS_MAT_AT(s->v, best, j) >= 0.0) {
            continue;
        }
        for (size_t i = 0; i < s->v->rows; i++) {
            FS_MAT_AT(s->v, i, j) = -FS_MAT_AT(s->v, i, j);
        }
        if (s->u != NULL) {
            for (size_t i = 0; i < s->u->rows; i++) {
                FS_MAT_AT(s->u, i, j) = -FS_MAT_AT(s->u, i, j);
            }
        }
    }
}

static int svd_check_input(const fs_mat *a, const char *who, struct fs_err *err)
{
    size_t bi = 0;
    size_t bj = 0;

    if (!la_mat_ok(a)) {
        return fs_err_set(err, FS_EINVAL, "%s: invalid matrix", who);
    }
    if (a->rows == 0 || a->cols == 0) {
        return fs_err_set(err, FS_EINVAL, "%s: empty %zux%zu matrix", who, a->rows, a->cols);
    }
    if (!la_mat_fits_int(a)) {
        return fs_err_set(err, FS_ERANGE, "%s: dimension exceeds the LAPACK int range", who);
    }
    if (!fs_mat_all_finite(a, &bi, &bj)) {
        return fs_err_set(err, FS_EINVAL, "%s: non-finite entry at (%zu, %zu)", who, bi, bj);
    }
    return 0;
}

static int lapack_fail(struct fs_err *err, const char *what, lapack_int info)
{
    if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR) {
        return fs_err_set(err, FS_ENOMEM, "svd: %s: out of memory", what);
    }
    if (info > 0) {
        return fs_err_set(err, FS_ENUMERIC, "svd: %s did not converge (info %d)", what, (int)info);
    }
    return fs_err_set(err, FS_ENUMERIC, "svd: %s rejected argument %d", what, (int)-info);
}

int fs_svd_thin(const fs_mat *a, fs_svd *out, struct fs_err *err)
{
    fs_mat *work = NULL;
    fs_mat *vt = NULL;
    fs_svd res = {0};
    lapack_int info;
    size_t m;
    size_t n;
    size_t r;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "svd_thin: out is NULL");
    }
    memset(out, 0, sizeof *out);
    rc = svd_check_input(a, "svd_thin", err);
    if (rc != 0) {
        return rc;
    }
    m = a->rows;
    n = a->cols;
    r = m < n ? m : n;
    work = fs_mat_dup(a); /* dgesdd destroys its input */
    res.u = fs_mat_new_uninit(m, r);
    vt = fs_mat_new_uninit(r, n);
    res.s = malloc(r * sizeof *res.s);
    if (work == NULL || res.u == NULL || vt == NULL || res.s == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "svd_thin: out of memory for %zux%zu", m, n);
        goto out;
    }
    res.r = r;
    info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', (lapack_int)m, (lapack_int)n, work->data,
                          (lapack_int)work->ld, res.s, res.u->data, (lapack_int)res.u->ld, vt->data,
                          (lapack_int)vt->ld);
    if (info != 0) {
        rc = lapack_fail(err, "dgesdd", info);
        goto out;
    }
    res.v = fs_mat_transpose(vt);
    if (res.v == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "svd_thin: out of memory");
        goto out;
    }
    svd_fix_signs(&res);
    *out = res;
    memset(&res, 0, sizeof res);
out:
    fs_svd_clear(&res);
    fs_mat_free(vt);
    fs_mat_free(work);
    return rc;
}

/* New compact copy of the first k columns of a. */
static fs_mat *first_cols(const fs_mat *a, size_t k)
{
    fs_mat v = fs_mat_view(a, 0, 0, a->rows, k);

    return fs_mat_dup(&v);
}

/* Keep the top k triplets of a full result, dropping U when !want_u. */
static int svd_truncate(fs_svd *s, size_t k, int want_u, struct fs_err *err)
{
    fs_mat *u = NULL;
    fs_mat *v = NULL;

    if (want_u) {
        u = first_cols(s->u, k);
    }
    v = first_cols(s->v, k);
    if ((want_u && u == NULL) || v == NULL) {
        fs_mat_free(u);
        fs_mat_free(v);
        return fs_err_set(err, FS_ENOMEM, "svd_topk: out of memory");
    }
    fs_mat_free(s->u);
    fs_mat_free(s->v);
    s->u = u;
    s->v = v;
    s->r = k;
    return 0;
}

static int topk_thin(const fs_mat *a, size_t k, int want_u, fs_svd *out, struct fs_err *err)
{
    fs_svd res = {0};
    int rc = fs_svd_thin(a, &res, err);

    if (rc == 0) {
        rc = svd_truncate(&res, k, want_u, err);
    }
    if (rc != 0) {
        fs_svd_clear(&res);
        return rc;
    }
    *out = res;
    return 0;
}

static int topk_gesvdx(const fs_mat *a, size_t k, int want_u, fs_svd *out, struct fs_err *err)
{
    size_t m = a->rows;
    size_t n = a->cols;
    size_t mn = m < n ? m : n;
    fs_mat *work = NULL;
    fs_mat *u = NULL;
    fs_mat *vt = NULL;
    double *s = NULL;
    lapack_int *superb = NULL;
    double udummy = 0.0;
    lapack_int ns = 0;
    lapack_int info;
    fs_svd res = {0};
    int rc = 0;

    if (!la_fits_int(12 * mn)) {
        return fs_err_set(err, FS_ERANGE, "svd_topk: dimension exceeds the LAPACK int range");
    }
    work = fs_mat_dup(a);
    vt = fs_mat_new_uninit(k, n);
    s = malloc(mn * sizeof *s);
    superb = malloc(12 * mn * sizeof *superb);
    if (want_u) {
        u = fs_mat_new_uninit(m, k);
    }
    if (work == NULL || vt == NULL || s == NULL || superb == NULL || (want_u && u == NULL)) {
        rc = fs_err_set(err, FS_ENOMEM, "svd_topk: out of memory for %zux%zu", m, n);
        goto out;
    }
    info = LAPACKE_dgesvdx(LAPACK_COL_MAJOR, want_u ? 'V' : 'N', 'V', 'I', (lapack_int)m,
                           (lapack_int)n, work->data, (lapack_int)work->ld, 0.0, 0.0, 1,
                           (lapack_int)k, &ns, s, want_u ? u->data : &udummy,
                           want_u ? (lapack_int)u->ld : 1, vt->data, (lapack_int)vt->ld, superb);
    if (info != 0) {
        rc = lapack_fail(err, "dgesvdx", info);
        goto out;
    }
    if ((size_t)ns != k) {
        rc =
            fs_err_set(err, FS_ENUMERIC, "svd_topk: dgesvdx returned %d of %zu values", (int)ns, k);
        goto out;
    }
    res.v = fs_mat_transpose(vt);
    res.s = malloc(k * sizeof *res.s);
    if (res.v == NULL || res.s == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "svd_topk: out of memory");
        goto out;
    }
    memcpy(res.s, s, k * sizeof *res.s);
    res.u = u;
    u = NULL;
    res.r = k;
    *out = res;
    memset(&res, 0, sizeof res);
out:
    fs_svd_clear(&res);
    free(superb);
    free(s);
    fs_mat_free(u);
    fs_mat_free(vt);
    fs_mat_free(work);
    return rc;
}

/* Sketch PRG from the caller's seed, or from a fresh CSPRNG seed. */
static int sketch_prg(const struct fs_svd_opts *o, fs_prg **prg, struct fs_err *err)
{
    uint8_t key[32];
    int rc;

    if (o->seed != NULL) {
        return fs_prg_new(prg, o->seed, NULL, err);
    }
    rc = fs_rand_bytes(key, sizeof key, err);
    if (rc == 0) {
        rc = fs_prg_new(prg, key, NULL, err);
    }
    OPENSSL_cleanse(key, sizeof key);
    return rc;
}

/* y (m x l) = A x, then orthonormalise y. */
static int mul_orth(char ta, const fs_mat *a, const fs_mat *x, fs_mat *y, struct fs_err *err)
{
    int rc = fs_mat_gemm(ta, 'N', 1.0, a, x, 0.0, y, err);

    if (rc == 0) {
        rc = fs_qr_orth(y, NULL, err);
    }
    return rc;
}

/*
 * Randomized range finder (Halko, Martinsson, Tropp 2011, Alg. 4.4): Q spans
 * A Omega for an n x l Gaussian Omega, refined by q subspace iterations with
 * QR re-orthonormalisation after every product (plain powers (A A^T)^q A Omega
 * lose the small directions to rounding). Then B = Q^T A (l x n) is small and
 * A ~= Q B = (Q U_B) S V^T.
 */
static int topk_randomized(const fs_mat *a, size_t k, const struct fs_svd_opts *o, fs_svd *out,
                           struct fs_err *err)
{
    size_t m = a->rows;
    size_t n = a->cols;
    size_t mn = m < n ? m : n;
    size_t p = o->oversample > 0 ? o->oversample : SVD_DEFAULT_OVERSAMPLE;
    int q = o->power_iters >= 0 ? o->power_iters : SVD_DEFAULT_POWER_ITERS;
    size_t l = (p > mn - k) ? mn : k + p;
    fs_prg *prg = NULL;
    fs_mat *omega = NULL;
    fs_mat *y = NULL;
    fs_mat *b = NULL;
    fs_svd small = {0};
    fs_svd res = {0};
    int rc;

    rc = sketch_prg(o, &prg, err);
    if (rc != 0) {
        goto out;
    }
    omega = fs_mat_new_uninit(n, l);
    y = fs_mat_new_uninit(m, l);
    b = fs_mat_new_uninit(l, n);
    if (omega == NULL || y == NULL || b == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "svd_topk: out of memory for a %zu-column sketch", l);
        goto out;
    }
    rc = fs_mat_fill_normal(omega, prg, err);
    if (rc == 0) {
        rc = mul_orth('N', a, omega, y, err);
    }
    for (int it = 0; rc == 0 && it < q; it++) {
        rc = mul_orth('T', a, y, omega, err); /* omega reused as the n x l iterate */
        if (rc == 0) {
            rc = mul_orth('N', a, omega, y, err);
        }
    }
    if (rc == 0) {
        rc = fs_mat_gemm('T', 'N', 1.0, y, a, 0.0, b, err);
    }
    if (rc == 0) {
        rc = fs_svd_thin(b, &small, err);
    }
    if (rc != 0) {
        goto out;
    }
    res.r = k;
    res.s = malloc(k * sizeof *res.s);
    res.v = first_cols(small.v, k);
    if (res.s == NULL || res.v == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "svd_topk: out of memory");
        goto out;
    }
    memcpy(res.s, small.s, k * sizeof *res.s);
    if (o->want_u) {
        fs_mat ub = fs_mat_view(small.u, 0, 0, l, k);
        rc = fs_mat_mul('N', 'N', y, &ub, &res.u, err);
        if (rc != 0) {
            goto out;
        }
    }
    *out = res;
    memset(&res, 0, sizeof res);
out:
    fs_svd_clear(&res);
    fs_svd_clear(&small);
    fs_mat_free(b);
    fs_mat_free(y);
    fs_mat_free(omega);
    fs_prg_free(prg);
    return rc;
}

static enum fs_topk_method auto_method(size_t m, size_t n, size_t k, size_t p)
{
    size_t mn = m < n ? m : n;

    if (mn >= SVD_AUTO_MIN_DIM && k + p <= mn / SVD_AUTO_RATIO) {
        return FS_TOPK_RANDOMIZED;
    }
    return FS_TOPK_THIN;
}

int fs_svd_topk(const fs_mat *a, size_t k, const struct fs_svd_opts *opts, fs_svd *out,
                struct fs_err *err)
{
    struct fs_svd_opts o = opts != NULL ? *opts : fs_svd_opts_default();
    enum fs_topk_method method = o.method;
    size_t mn;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "svd_topk: out is NULL");
    }
    memset(out, 0, sizeof *out);
    rc = svd_check_input(a, "svd_topk", err);
    if (rc != 0) {
        return rc;
    }
    mn = a->rows < a->cols ? a->rows : a->cols;
    if (k < 1 || k > mn) {
        return fs_err_set(err, FS_EINVAL, "svd_topk: k = %zu outside [1, %zu]", k, mn);
    }
    if (method == FS_TOPK_AUTO) {
        method = auto_method(a->rows, a->cols, k,
                             o.oversample > 0 ? o.oversample : SVD_DEFAULT_OVERSAMPLE);
    }
    switch (method) {
    case FS_TOPK_RANDOMIZED:
        rc = topk_randomized(a, k, &o, out, err);
        break;
    case FS_TOPK_GESVDX:
        rc = topk_gesvdx(a, k, o.want_u, out, err);
        break;
    case FS_TOPK_THIN:
        rc = topk_thin(a, k, o.want_u, out, err);
        break;
    default:
        return fs_err_set(err, FS_EINVAL, "svd_topk: unknown method %d", (int)method);
    }
    if (rc == 0) {
        svd_fix_signs(out);
    }
    return rc;
}
