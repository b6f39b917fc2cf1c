#include "mat.h"

#include <cblas.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/prg.h"
#include "la_internal.h"

/* Data alignment: a cache line, so SIMD kernels see the same alignment for
 * every matrix (some OpenBLAS kernels round differently depending on it,
 * which would break the bit-for-bit reproducibility of seeded masks). */
#define MAT_ALIGN 64

/* Allocate the struct and rows x cols doubles (at least one, so an empty
 * matrix still has a valid pointer); zeroed when `zero`. */
static fs_mat *mat_alloc(size_t rows, size_t cols, int zero)
{
    size_t count = 0;
    size_t bytes = 0;
    fs_mat *m = NULL;

    if (!la_mul_size(rows, cols, &count) || !la_mul_size(count, sizeof(double), &bytes) ||
        bytes > SIZE_MAX - MAT_ALIGN) {
        return NULL;
    }
    if (bytes == 0) {
        bytes = sizeof(double);
    }
    bytes = (bytes + MAT_ALIGN - 1) / MAT_ALIGN * MAT_ALIGN; /* aligned_alloc wants a multiple */
    m = malloc(sizeof *m);
    if (m == NULL) {
        return NULL;
    }
    m->data = aligned_alloc(MAT_ALIGN, bytes);
    if (m->data == NULL) {
        free(m);
        return NULL;
    }
    if (zero) {
        memset(m->data, 0, bytes);
    }
    m->rows = rows;
    m->cols = cols;
    m->ld = rows > 0 ? rows : 1;
    m->owns = 1;
    return m;
}

fs_mat *fs_mat_new(size_t rows, size_t cols)
{
    return mat_alloc(rows, cols, 1);
}

fs_mat *fs_mat_new_uninit(size_t rows, size_t cols)
{
    return mat_alloc(rows, cols, 0);
}

fs_mat *fs_mat_dup(const fs_mat *a)
{
    fs_mat *m = NULL;

    if (!la_mat_ok(a)) {
        return NULL;
    }
    m = mat_alloc(a->rows, a->cols, 0);
    if (m == NULL) {
        return NULL;
    }
    for (size_t j = 0; j < a->cols && a->rows > 0; j++) {
        memcpy(m->data + j * m->ld, a->data + j * a->ld, a->rows * sizeof(double));
    }
    return m;
}

fs_mat *fs_mat_eye(size_t n)
{
    fs_mat *m = mat_alloc(n, n, 1);

    if (m == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        FS_MAT_AT(m, i, i) = 1.0;
    }
    return m;
}

fs_mat *fs_mat_transpose(const fs_mat *a)
{
    enum { TILE = 32 };
    fs_mat *t = NULL;

    if (!la_mat_ok(a)) {
        return NULL;
    }
    t = mat_alloc(a->cols, a->rows, 0);
    if (t == NULL) {
        return NULL;
    }
    /* Tiled so both the reads and the writes stay within a few cache lines. */
    for (size_t j0 = 0; j0 < a->cols; j0 += TILE) {
        size_t j1 = j0 + TILE < a->cols ? j0 + TILE : a->cols;
        for (size_t i0 = 0; i0 < a->rows; i0 += TILE) {
            size_t i1 = i0 + TILE < a->rows ? i0 + TILE : a->rows;
            for (size_t j = j0; j < j1; j++) {
                for (size_t i = i0; i < i1; i++) {
                    FS_MAT_AT(t, j, i) = FS_MAT_AT(a, i, j);
                }
            }
        }
    }
    return t;
}

fs_mat fs_mat_view(const fs_mat *a, size_t r0, size_t c0, size_t nr, size_t nc)
{
    fs_mat v = {0, 0, 1, NULL, 0};

    /* An out-of-range request yields an empty view (rows = cols = 0, data NULL). */
    if (!la_mat_ok(a) || r0 > a->rows || nr > a->rows - r0 || c0 > a->cols || nc > a->cols - c0) {
        return v;
    }
    v.rows = nr;
    v.cols = nc;
    v.ld = a->ld;
    v.data = (nr > 0 && nc > 0) ? a->data + r0 + c0 * a->ld : NULL;
    v.owns = 0;
    return v;
}

void fs_mat_free(fs_mat *m)
{
    if (m == NULL) {
        return;
    }
    if (m->owns) {
        free(m->data);
    }
    free(m);
}

int fs_mat_overlap(const fs_mat *a, const fs_mat *b)
{
    uintptr_t alo;
    uintptr_t ahi;
    uintptr_t blo;
    uintptr_t bhi;

    if (a == NULL || b == NULL || a->data == NULL || b->data == NULL || a->rows == 0 ||
        a->cols == 0 || b->rows == 0 || b->cols == 0) {
        return 0;
    }
    /* Integer addresses: relational operators on pointers into different
     * objects are undefined in C. */
    alo = (uintptr_t)a->data;
    ahi = (uintptr_t)(a->data + (a->cols - 1) * a->ld + a->rows); /* one past the end */
    blo = (uintptr_t)b->data;
    bhi = (uintptr_t)(b->data + (b->cols - 1) * b->ld + b->rows);
    if (ahi <= blo || bhi <= alo) {
        return 0;
    }
    if (a->ld == b->ld && blo >= alo && (blo - alo) % sizeof(double) == 0) {
        /* Same stride, b starts inside a's span: locate b's first element in
         * a's row/column grid. A view never wraps past ld, so rows and columns
         * can be compared independently unless b's columns straddle ld. */
        size_t off = (blo - alo) / sizeof(double);
        size_t dc = off / a->ld;
        size_t dr = off % a->ld;
        if (dr + b->rows > a->ld) {
            return 1;
        }
        return dr < a->rows && dc < a->cols;
    }
    if (a->ld == b->ld && alo > blo) {
        return fs_mat_overlap(b, a);
    }
    return 1;
}

int fs_mat_copy(fs_mat *dst, const fs_mat *src, struct fs_err *err)
{
    if (!la_mat_ok(dst) || !la_mat_ok(src)) {
        return fs_err_set(err, FS_EINVAL, "mat_copy: invalid matrix");
    }
    if (dst->rows != src->rows || dst->cols != src->cols) {
        return fs_err_set(err, FS_EINVAL, "mat_copy: shape %zux%zu into %zux%zu", src->rows,
                          src->cols, dst->rows, dst->cols);
    }
    if (dst->data == src->data && dst->ld == src->ld) {
        return 0;
    }
    if (fs_mat_overlap(dst, src)) {
        return fs_err_set(err, FS_EINVAL, "mat_copy: source and destination overlap");
    }
    for (size_t j = 0; j < src->cols && src->rows > 0; j++) {
        memcpy(dst->data + j * dst->ld, src->data + j * src->ld, src->rows * sizeof(double));
    }
    return 0;
}

double fs_mat_max_abs(const fs_mat *a)
{
    double mx = 0.0;

    if (!la_mat_ok(a)) {
        return NAN;
    }
    for (size_t j = 0; j < a->cols; j++) {
        const double *col = a->data + j * a->ld;
        for (size_t i = 0; i < a->rows; i++) {
            double v = fabs(col[i]);
            if (isnan(v)) {
                return NAN;
            }
            if (v > mx) {
                mx = v;
            }
        }
    }
    return mx;
}

double fs_mat_norm_fro(const fs_mat *a)
{
    double ss = 0.0;
    double mx;
    double inv;

    if (!la_mat_ok(a)) {
        return NAN;
    }
    for (size_t j = 0; j < a->cols; j++) {
        const double *col = a->data + j * a->ld;
        for (size_t i = 0; i < a->rows; i++) {
            ss += col[i] * col[i];
        }
    }
    /* Fast path unless the plain sum overflowed or lost digits to underflow. */
    if (isfinite(ss) && ss >= 0x1p-900) {
        return sqrt(ss);
    }
    mx = fs_mat_max_abs(a);
    if (!isfinite(mx) || mx == 0.0) {
        return mx;
    }
    inv = 1.0 / mx;
    ss = 0.0;
    for (size_t j = 0; j < a->cols; j++) {
        const double *col = a->data + j * a->ld;
        for (size_t i = 0; i < a->rows; i++) {
            double v = col[i] * inv;
            ss += v * v;
        }
    }
    return mx * sqrt(ss);
}

static int op_ok(char t)
{
    return t == 'N' || t == 'n' || t == 'T' || t == 't';
}

static int op_trans(char t)
{
    return t == 'T' || t == 't';
}

int fs_mat_gemm(char ta, char tb, double alpha, const fs_mat *a, const fs_mat *b, double beta,
                fs_mat *c, struct fs_err *err)
{
    size_t m;
    size_t k;
    size_t kb;
    size_t n;

    if (!op_ok(ta) || !op_ok(tb)) {
        return fs_err_set(err, FS_EINVAL, "gemm: op must be 'N' or 'T'");
    }
    if (!la_mat_ok(a) || !la_mat_ok(b) || !la_mat_ok(c)) {
        return fs_err_set(err, FS_EINVAL, "gemm: invalid matrix");
    }
    m = op_trans(ta) ? a->cols : a->rows;
    k = op_trans(ta) ? a->rows : a->cols;
    kb = op_trans(tb) ? b->cols : b->rows;
    n = op_trans(tb) ? b->rows : b->cols;
    if (k != kb || c->rows != m || c->cols != n) {
        return fs_err_set(err, FS_EINVAL,
                          "gemm: shapes op(A) %zux%zu, op(B) %zux%zu, C %zux%zu do not match", m, k,
                          kb, n, c->rows, c->cols);
    }
    if (!la_mat_fits_int(a) || !la_mat_fits_int(b) || !la_mat_fits_int(c)) {
        return fs_err_set(err, FS_ERANGE, "gemm: dimension exceeds the BLAS int range");
    }
    if (fs_mat_overlap(c, a) || fs_mat_overlap(c, b)) {
        return fs_err_set(err, FS_EINVAL, "gemm: C overlaps A or B");
    }
    if (m == 0 || n == 0) {
        return 0;
    }
    if (k == 0) {
        /* BLAS would only scale C; do it here so beta = 0 also clears NaN garbage. */
        if (beta == 0.0) {
            fs_mat_zero(c);
        } else {
            fs_mat_scale(c, beta);
        }
        return 0;
    }
    cblas_dgemm(CblasColMajor, op_trans(ta) ? CblasTrans : CblasNoTrans,
                op_trans(tb) ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a->data,
                (int)a->ld, b->data, (int)b->ld, beta, c->data, (int)c->ld);
    return 0;
}

int fs_mat_mul(char ta, char tb, const fs_mat *a, const fs_mat *b, fs_mat **out, struct fs_err *err)
{
    fs_mat *c = NULL;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "mat_mul: out is NULL");
    }
    *out = NULL;
    if (!op_ok(ta) || !op_ok(tb) || !la_mat_ok(a) || !la_mat_ok(b)) {
        return fs_err_set(err, FS_EINVAL, "mat_mul: invalid argument");
    }
    c = fs_mat_new(op_trans(ta) ? a->cols : a->rows, op_trans(tb) ? b->rows : b->cols);
    if (c == NULL) {
        return fs_err_set(err, FS_ENOMEM, "mat_mul: out of memory");
    }
    rc = fs_mat_gemm(ta, tb, 1.0, a, b, 0.0, c, err);
    if (rc != 0) {
        fs_mat_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int fs_mat_all_finite(const fs_mat *a, size_t *bad_i, size_t *bad_j)
{
    if (!la_mat_ok(a)) {
        return 0;
    }
    for (size_t j = 0; j < a->cols; j++) {
        const double *col = a->data + j * a->ld;
        for (size_t i = 0; i < a->rows; i++) {
            if (!isfinite(col[i])) {
                if (bad_i != NULL) {
                    *bad_i = i;
                }
                if (bad_j != NULL) {
                    *bad_j = j;
                }
                return 0;
            }
        }
    }
    return 1;
}

void fs_mat_zero(fs_mat *a)
{
    if (!la_mat_ok(a)) {
        return;
    }
    for (size_t j = 0; j < a->cols && a->rows > 0; j++) {
        memset(a->data + j * a->ld, 0, a->rows * sizeof(double));
    }
}

void fs_mat_scale(fs_mat *a, double alpha)
{
    if (!la_mat_ok(a)) {
        return;
    }
    for (size_t j = 0; j < a->cols; j++) {
        double *col = a->data + j * a->ld;
        for (size_t i = 0; i < a->rows; i++) {
            col[i] *= alpha;
        }
    }
}

void fs_mat_wipe(fs_mat *a)
{
    if (!la_mat_ok(a)) {
        return;
    }
    for (size_t j = 0; j < a->cols && a->rows > 0; j++) {
        OPENSSL_cleanse(a->data + j * a->ld, a->rows * sizeof(double));
    }
}

int fs_mat_axpy(double alpha, const fs_mat *x, fs_mat *y, struct fs_err *err)
{
    if (!la_mat_ok(x) || !la_mat_ok(y)) {
        return fs_err_set(err, FS_EINVAL, "mat_axpy: invalid matrix");
    }
    if (x->rows != y->rows || x->cols != y->cols) {
        return fs_err_set(err, FS_EINVAL, "mat_axpy: shape %zux%zu vs %zux%zu", x->rows, x->cols,
                          y->rows, y->cols);
    }
    if (fs_mat_overlap(x, y) && !(x->data == y->data && x->ld == y->ld)) {
        return fs_err_set(err, FS_EINVAL, "mat_axpy: x and y partially overlap");
    }
    for (size_t j = 0; j < x->cols; j++) {
        const double *xc = x->data + j * x->ld;
        double *yc = y->data + j * y->ld;
        for (size_t i = 0; i < x->rows; i++) {
            yc[i] += alpha * xc[i];
        }
    }
    return 0;
}

int fs_mat_fill_normal(fs_mat *a, struct fs_prg *prg, struct fs_err *err)
{
    if (!la_mat_ok(a) || prg == NULL) {
        return fs_err_set(err, FS_EINVAL, "mat_fill_normal: invalid argument");
    }
    for (size_t j = 0; j < a->cols && a->rows > 0; j++) {
        int rc = fs_prg_normal(prg, a->data + j * a->ld, a->rows, err);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}
