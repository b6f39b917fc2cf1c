#include "csr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "la_internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* A triplet during construction; `ord` (input position) makes the sort, and
 * so the order in which duplicates are summed, deterministic. */
struct coo_ent {
    uint32_t col;
    size_t ord;
    double v;
};

static int ent_cmp(const void *pa, const void *pb)
{
    const struct coo_ent *a = pa;
    const struct coo_ent *b = pb;

    if (a->col != b->col) {
        return a->col < b->col ? -1 : 1;
    }
    return (a->ord > b->ord) - (a->ord < b->ord);
}

void fs_csr_free(fs_csr *a)
{
    if (a == NULL) {
        return;
    }
    free(a->rowptr);
    free(a->colidx);
    free(a->vals);
    free(a);
}

static int coo_check(size_t rows, size_t cols, size_t nnz, const size_t *ri, const size_t *ci,
                     const double *v, struct fs_err *err)
{
    if (cols > (size_t)UINT32_MAX + 1) {
        return fs_err_set(err, FS_ERANGE, "csr: %zu columns exceed the 32-bit index", cols);
    }
    if (rows == SIZE_MAX || nnz > SIZE_MAX / sizeof(struct coo_ent)) {
        return fs_err_set(err, FS_ERANGE, "csr: size overflow");
    }
    if (nnz > 0 && (ri == NULL || ci == NULL || v == NULL)) {
        return fs_err_set(err, FS_EINVAL, "csr: NULL triplet array");
    }
    for (size_t p = 0; p < nnz; p++) {
        if (ri[p] >= rows || ci[p] >= cols) {
            return fs_err_set(err, FS_EINVAL, "csr: entry %zu at (%zu, %zu) outside %zux%zu", p,
                              ri[p], ci[p], rows, cols);
        }
        if (!isfinite(v[p])) {
            return fs_err_set(err, FS_EINVAL, "csr: entry %zu is not finite", p);
        }
    }
    return 0;
}

/* Sort each row's entries by column and sum duplicates in place; returns the
 * compacted nnz and rewrites rowptr. */
static size_t compact_rows(size_t rows, size_t *rowptr, struct coo_ent *ents)
{
    size_t w = 0;
    size_t start = 0;

    for (size_t i = 0; i < rows; i++) {
        size_t end = rowptr[i + 1];
        size_t row_first = w;
        qsort(ents + start, end - start, sizeof *ents, ent_cmp);
        for (size_t p = start; p < end; p++) {
            if (w > row_first && ents[w - 1].col == ents[p].col) {
                ents[w - 1].v += ents[p].v;
            } else {
                ents[w++] = ents[p];
            }
        }
        rowptr[i] = row_first;
        start = end;
    }
    rowptr[rows] = w;
    return w;
}

int fs_csr_from_coo(size_t rows, size_t cols, size_t nnz, const size_t *ri, const size_t *ci,
                    const double *v, fs_csr **out, struct fs_err *err)
{
    struct coo_ent *ents = NULL;
    size_t *fill = NULL;
    fs_csr *a = NULL;
    size_t cnt;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "csr: out is NULL");
    }
    *out = NULL;
    rc = coo_check(rows, cols, nnz, ri, ci, v, err);
    if (rc != 0) {
        return rc;
    }
    a = calloc(1, sizeof *a);
    ents = malloc((nnz > 0 ? nnz : 1) * sizeof *ents);
    fill = calloc(rows + 1, sizeof *fill);
    if (a == NULL || ents == NULL || fill == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "csr: out of memory for %zu entries", nnz);
        goto out;
    }
    a->rowptr = calloc(rows + 1, sizeof *a->rowptr);
    if (a->rowptr == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "csr: out of memory for %zu rows", rows);
        goto out;
    }
    /* Counting sort by row, stable in input order. */
    for (size_t p = 0; p < nnz; p++) {
        a->rowptr[ri[p] + 1]++;
    }
    for (size_t i = 0; i < rows; i++) {
        a->rowptr[i + 1] += a->rowptr[i];
    }
    memcpy(fill, a->rowptr, (rows + 1) * sizeof *fill);
    for (size_t p = 0; p < nnz; p++) {
        struct coo_ent *e = &ents[fill[ri[p]]++];
        e->col = (uint32_t)ci[p];
        e->ord = p;
        e->v = v[p];
    }
    cnt = compact_rows(rows, a->rowptr, ents);
    a->colidx = malloc((cnt > 0 ? cnt : 1) * sizeof *a->colidx);
    a->vals = malloc((cnt > 0 ? cnt : 1) * sizeof *a->vals);
    if (a->colidx == NULL || a->vals == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "csr: out of memory for %zu entries", cnt);
        goto out;
    }
    for (size_t p = 0; p < cnt; p++) {
        a->colidx[p] = ents[p].col;
        a->vals[p] = ents[p].v;
    }
    a->rows = rows;
    a->cols = cols;
    a->nnz = cnt;
    *out = a;
    a = NULL;
out:
    fs_csr_free(a);
    free(fill);
    free(ents);
    return rc;
}

static int csr_ok(const fs_csr *a)
{
    return a != NULL && a->rowptr != NULL &&
           (a->nnz == 0 || (a->colidx != NULL && a->vals != NULL));
}

/* Common argument checks: a valid, z has zr rows, y has yr rows and z's columns. */
static int prod_check(const fs_csr *a, const fs_mat *z, size_t zr, const fs_mat *y, size_t yr,
                      const char *who, struct fs_err *err)
{
    if (!csr_ok(a) || !la_mat_ok(z) || !la_mat_ok(y)) {
        return fs_err_set(err, FS_EINVAL, "%s: invalid argument", who);
    }
    if (z->rows != zr || y->rows != yr || y->cols != z->cols) {
        return fs_err_set(err, FS_EINVAL, "%s: %zux%zu sparse with %zux%zu into %zux%zu", who,
                          a->rows, a->cols, z->rows, z->cols, y->rows, y->cols);
    }
    if (fs_mat_overlap(z, y)) {
        return fs_err_set(err, FS_EINVAL, "%s: input and output overlap", who);
    }
    return 0;
}

int fs_csr_mul(const fs_csr *a, const fs_mat *z, fs_mat *y, struct fs_err *err)
{
    int rc = prod_check(a, z, a != NULL ? a->cols : 0, y, a != NULL ? a->rows : 0, "csr_mul", err);

    if (rc != 0) {
        return rc;
    }
    for (size_t c = 0; c < z->cols; c++) {
        const double *zc = z->data + c * z->ld;
        double *yc = y->data + c * y->ld;
        for (size_t i = 0; i < a->rows; i++) {
            double s = 0.0;
            for (size_t p = a->rowptr[i]; p < a->rowptr[i + 1]; p++) {
                s += a->vals[p] * zc[a->colidx[p]];
            }
            yc[i] = s;
        }
    }
    return 0;
}

int fs_csr_tmul(const fs_csr *a, const fs_mat *w, fs_mat *y, struct fs_err *err)
{
    int rc = prod_check(a, w, a != NULL ? a->rows : 0, y, a != NULL ? a->cols : 0, "csr_tmul", err);

    if (rc != 0) {
        return rc;
    }
    fs_mat_zero(y);
    for (size_t c = 0; c < w->cols; c++) {
        const double *wc = w->data + c * w->ld;
        double *yc = y->data + c * y->ld;
        for (size_t i = 0; i < a->rows; i++) {
            double wi = wc[i];
            for (size_t p = a->rowptr[i]; p < a->rowptr[i + 1]; p++) {
                yc[a->colidx[p]] += a->vals[p] * wi;
            }
        }
    }
    return 0;
}

/*
 * Y = scale * sum_i a_i (a_i^T Z) over the rows a_i of A, so that neither
 * A^T A (cols x cols) nor A Z (rows x k) is ever stored.
 *
 * Z is first copied into a row-major cols x kp buffer (kp = k rounded up to
 * even, the pad column zero) and Y is accumulated row-major the same way, so
 * that every nonzero reads or updates kp contiguous doubles (one or two
 * cache lines) instead of k doubles a column apart, and the k sums of a row
 * run side by side in registers. With SSE2 it takes two passes: first the
 * scaled sums t_i = scale a_i^T Z of every row (reading only Z), then the
 * updates Y += a_i t_i^T row after row (touching only Y), so that each pass
 * has one cols x kp buffer, not two, competing for the cache.
 *
 * Per output element the arithmetic and its order are those of the plain
 * column-by-column loop (t_c = sum_p v_p z_{col_p,c} in p order from 0.0,
 * times scale; y_{col,c} += v_p t_c row after row), and no multiply and add
 * are contracted into an FMA (-std=c11 turns GCC's contraction off, and the
 * baseline x86-64 target has no FMA instructions), so the result is the same
 * bit for bit.
 */
struct ata_ctx {
    const fs_csr *a;
    const double *zr; /* cols x kp, row-major */
    double *yr;       /* cols x kp, row-major */
    double *t;        /* rows x kp: the scaled sums of each row (kp without SSE2) */
    size_t kp;
    double scale;
};

#if defined(__SSE2__)

#define ATA_PAIRS 8 /* column pairs (SSE2 registers) summed side by side in one pass */
#define ATA_AHEAD 8 /* prefetch distance in nonzeros */

/* t_i = scale a_i^T Z on the column pairs off/2 .. off/2 + w - 1. */
static inline __attribute__((always_inline)) void ata_gather(const struct ata_ctx *x, size_t i,
                                                             size_t off, int w)
{
    const uint32_t *ci = x->a->colidx;
    const double *va = x->a->vals;
    const double *zr = x->zr + off;
    size_t kp = x->kp;
    size_t p1 = x->a->rowptr[i + 1];
    __m128d acc[ATA_PAIRS];
    __m128d sc = _mm_set1_pd(x->scale);

#pragma GCC unroll 8
    for (int u = 0; u < w; u++) {
        acc[u] = _mm_setzero_pd();
    }
    for (size_t p = x->a->rowptr[i]; p < p1; p++) {
        const double *zp = zr + (size_t)ci[p] * kp;
        __m128d v = _mm_set1_pd(va[p]);
        if (p + ATA_AHEAD < p1) {
            _mm_prefetch((const char *)(zr + (size_t)ci[p + ATA_AHEAD] * kp), _MM_HINT_T0);
        }
#pragma GCC unroll 8
        for (int u = 0; u < w; u++) {
            acc[u] = _mm_add_pd(acc[u], _mm_mul_pd(v, _mm_loadu_pd(zp + 2 * u)));
        }
    }
#pragma GCC unroll 8
    for (int u = 0; u < w; u++) {
        _mm_storeu_pd(x->t + i * kp + off + 2 * u, _mm_mul_pd(acc[u], sc));
    }
}

/* Y += a_i t_i^T on the column pairs off/2 .. off/2 + w - 1. */
static inline __attribute__((always_inline)) void ata_scatter(const struct ata_ctx *x, size_t i,
                                                              size_t off, int w)
{
    const uint32_t *ci = x->a->colidx;
    const double *va = x->a->vals;
    double *yr = x->yr + off;
    size_t kp = x->kp;
    size_t p1 = x->a->rowptr[i + 1];
    __m128d t[ATA_PAIRS];

#pragma GCC unroll 8
    for (int u = 0; u < w; u++) {
        t[u] = _mm_loadu_pd(x->t + i * kp + off + 2 * u);
    }
    for (size_t p = x->a->rowptr[i]; p < p1; p++) {
        double *yp = yr + (size_t)ci[p] * kp;
        __m128d v = _mm_set1_pd(va[p]);
        if (p + ATA_AHEAD < p1) {
            _mm_prefetch((const char *)(yr + (size_t)ci[p + ATA_AHEAD] * kp), _MM_HINT_T0);
        }
#pragma GCC unroll 8
        for (int u = 0; u < w; u++) {
            _mm_storeu_pd(yp + 2 * u, _mm_add_pd(_mm_loadu_pd(yp + 2 * u), _mm_mul_pd(v, t[u])));
        }
    }
}

/* One pass (scatter 0 or 1) over the nonempty rows; a constant pair count w
 * in each call lets the compiler keep the sums in registers. */
#define ATA_CASE(n)                                                                                \
    case n:                                                                                        \
        if (scatter) {                                                                             \
            ata_scatter(x, i, off, n);                                                             \
        } else {                                                                                   \
            ata_gather(x, i, off, n);                                                              \
        }                                                                                          \
        break

static void ata_pass(const struct ata_ctx *x, int scatter)
{
    const fs_csr *a = x->a;

    for (size_t i = 0; i < a->rows; i++) {
        if (a->rowptr[i] == a->rowptr[i + 1]) {
            continue;
        }
        for (size_t off = 0; off < x->kp; off += 2 * ATA_PAIRS) {
            size_t w = (x->kp - off) / 2;
            switch (w < ATA_PAIRS ? w : ATA_PAIRS) {
                ATA_CASE(1);
                ATA_CASE(2);
                ATA_CASE(3);
                ATA_CASE(4);
                ATA_CASE(5);
                ATA_CASE(6);
                ATA_CASE(7);
            default:
                if (scatter) {
                    ata_scatter(x, i, off, ATA_PAIRS);
                } else {
                    ata_gather(x, i, off, ATA_PAIRS);
                }
                break;
            }
        }
    }
}

static void ata_rows(const struct ata_ctx *x)
{
    ata_pass(x, 0);
    ata_pass(x, 1);
}

#else /* no SSE2: the same row-major order in plain C */

static void ata_rows(const struct ata_ctx *x)
{
    const fs_csr *a = x->a;
    double *t = x->t;
    size_t kp = x->kp;

    for (size_t i = 0; i < a->rows; i++) {
        size_t p0 = a->rowptr[i];
        size_t p1 = a->rowptr[i + 1];
        if (p0 == p1) {
            continue;
        }
        for (size_t c = 0; c < kp; c++) {
            t[c] = 0.0;
        }
        for (size_t p = p0; p < p1; p++) {
            const double *zp = x->zr + (size_t)a->colidx[p] * kp;
            double v = a->vals[p];
            for (size_t c = 0; c < kp; c++) {
                t[c] += v * zp[c];
            }
        }
        for (size_t c = 0; c < kp; c++) {
            t[c] *= x->scale;
        }
        for (size_t p = p0; p < p1; p++) {
            double *yp = x->yr + (size_t)a->colidx[p] * kp;
            double v = a->vals[p];
            for (size_t c = 0; c < kp; c++) {
                yp[c] += v * t[c];
            }
        }
    }
}

#endif

int fs_csr_ata_mul(const fs_csr *a, const fs_mat *z, double scale, fs_mat *y, struct fs_err *err)
{
    struct ata_ctx x;
    double *buf = NULL;
    size_t d, k, kp, n, nt;
    int rc =
        prod_check(a, z, a != NULL ? a->cols : 0, y, a != NULL ? a->cols : 0, "csr_ata_mul", err);

    if (rc != 0) {
        return rc;
    }
    d = a->cols;
    k = z->cols;
    kp = k + (k & 1);
    if (d == 0 || k == 0 || a->nnz == 0) {
        fs_mat_zero(y);
        return 0;
    }
    /* zr and yr (cols x kp each), then t (rows x kp) */
    if (!la_mul_size(d, kp, &n) || !la_mul_size(a->rows, kp, &nt) ||
        n > (SIZE_MAX / sizeof *buf - nt) / 2) {
        return fs_err_set(err, FS_ERANGE, "csr_ata_mul: %zux%zu is too large", d, k);
    }
    buf = malloc((2 * n + nt) * sizeof *buf);
    if (buf == NULL) {
        return fs_err_set(err, FS_ENOMEM, "csr_ata_mul: out of memory");
    }
    for (size_t j = 0; j < d; j++) {
        double *zj = buf + j * kp;
        for (size_t c = 0; c < k; c++) {
            zj[c] = z->data[c * z->ld + j];
        }
        if (kp > k) {
            zj[k] = 0.0;
        }
    }
    memset(buf + n, 0, n * sizeof *buf);
    x.a = a;
    x.zr = buf;
    x.yr = buf + n;
    x.t = buf + 2 * n;
    x.kp = kp;
    x.scale = scale;
    ata_rows(&x);
    for (size_t c = 0; c < k; c++) {
        double *yc = y->data + c * y->ld;
        const double *src = x.yr + c;
        for (size_t j = 0; j < d; j++) {
            yc[j] = src[j * kp];
        }
    }
    free(buf);
    return 0;
}

int fs_csr_to_dense(const fs_csr *a, fs_mat **out, struct fs_err *err)
{
    fs_mat *d = NULL;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "csr_to_dense: out is NULL");
    }
    *out = NULL;
    if (!csr_ok(a)) {
        return fs_err_set(err, FS_EINVAL, "csr_to_dense: invalid matrix");
    }
    d = fs_mat_new(a->rows, a->cols);
    if (d == NULL) {
        return fs_err_set(err, FS_ENOMEM, "csr_to_dense: out of memory for %zux%zu", a->rows,
                          a->cols);
    }
    for (size_t i = 0; i < a->rows; i++) {
        for (size_t p = a->rowptr[i]; p < a->rowptr[i + 1]; p++) {
            FS_MAT_AT(d, i, a->colidx[p]) = a->vals[p];
        }
    }
    *out = d;
    return 0;
}

int fs_csr_check(const fs_csr *a, struct fs_err *err)
{
    if (!csr_ok(a) || a->rowptr[0] != 0 || a->rowptr[a->rows] != a->nnz) {
        return fs_err_set(err, FS_EINVAL, "csr: invalid row pointers");
    }
    if (a->cols > (size_t)UINT32_MAX + 1) {
        return fs_err_set(err, FS_EINVAL, "csr: too many columns");
    }
    for (size_t i = 0; i < a->rows; i++) {
        if (a->rowptr[i + 1] < a->rowptr[i] || a->rowptr[i + 1] > a->nnz) {
            return fs_err_set(err, FS_EINVAL, "csr: row pointer %zu decreases", i + 1);
        }
        for (size_t p = a->rowptr[i]; p < a->rowptr[i + 1]; p++) {
            if (a->colidx[p] >= a->cols || (p > a->rowptr[i] && a->colidx[p] <= a->colidx[p - 1])) {
                return fs_err_set(err, FS_EINVAL, "csr: row %zu has a bad column index", i);
            }
            if (!isfinite(a->vals[p])) {
                return fs_err_set(err, FS_EINVAL, "csr: row %zu has a non-finite value", i);
            }
        }
    }
    return 0;
}
