/* fedsvd local --verify: the federated result against a centralised LAPACK
 * SVD of the pooled matrix of the parties in the result (the accuracy metrics
 * of docs/references.md).
 * Only `fedsvd local` can do this: it is the one place that holds every
 * party's file. */
#include "local_verify.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/matio.h"
#include "la/svd.h"

#define DENSE_PROJ_MAX 6000 /* projection distances form an n x n matrix */

static int load(const char *dir, const char *sub, const char *name, fs_mat **out,
                struct fs_err *err)
{
    char path[4400];

    if (sub != NULL) {
        snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
    } else {
        snprintf(path, sizeof path, "%s/%s", dir, name);
    }
    return fs_io_load_dense(path, FS_FMT_NPY, NULL, out, err);
}

/* New pooled matrix: row stack (samples) or column stack (features). */
static fs_mat *pool(fs_mat *const *parts, size_t k, int features)
{
    size_t rows = 0, cols = 0, off = 0;
    fs_mat *x;

    for (size_t i = 0; i < k; i++) {
        rows = features ? parts[i]->rows : rows + parts[i]->rows;
        cols = features ? cols + parts[i]->cols : parts[i]->cols;
    }
    x = fs_mat_new(rows, cols);
    for (size_t i = 0; x != NULL && i < k; i++) {
        for (size_t j = 0; j < parts[i]->cols; j++) {
            for (size_t a = 0; a < parts[i]->rows; a++) {
                if (features) {
                    FS_MAT_AT(x, a, off + j) = FS_MAT_AT(parts[i], a, j);
                } else {
                    FS_MAT_AT(x, off + a, j) = FS_MAT_AT(parts[i], a, j);
                }
            }
        }
        off += features ? parts[i]->cols : parts[i]->rows;
    }
    return x;
}

/* ||P_k P_k^T - Q_k Q_k^T||_F (dense; -1 when too large or on failure). */
static double proj_dist(const fs_mat *p, const fs_mat *q, size_t k)
{
    struct fs_err err;
    fs_mat pv, qv;
    fs_mat *d;
    double r = -1;

    if (p->rows > DENSE_PROJ_MAX || p->rows != q->rows || k > p->cols || k > q->cols) {
        return -1;
    }
    fs_err_clear(&err);
    pv = fs_mat_view(p, 0, 0, p->rows, k);
    qv = fs_mat_view(q, 0, 0, q->rows, k);
    d = fs_mat_new(p->rows, p->rows);
    if (d != NULL && fs_mat_gemm('N', 'T', 1.0, &pv, &pv, 0.0, d, &err) == 0 &&
        fs_mat_gemm('N', 'T', -1.0, &qv, &qv, 1.0, d, &err) == 0) {
        r = fs_mat_norm_fro(d);
    }
    fs_mat_free(d);
    return r;
}

/* min_j |<p_j, q_j>| over the first k columns (both orthonormal). */
static double min_cos(const fs_mat *p, const fs_mat *q, size_t k)
{
    double m = 1.0;

    for (size_t j = 0; j < k; j++) {
        double c = 0.0;
        for (size_t i = 0; i < p->rows; i++) {
            c += FS_MAT_AT(p, i, j) * FS_MAT_AT(q, i, j);
        }
        c = fabs(c);
        m = c < m ? c : m;
    }
    return m;
}

/* ||X - Us V^T||_F / ||X||_F over the first k columns, Us = U diag(s) (s NULL: U is Us). */
static double recon(const fs_mat *x, const fs_mat *u, const double *s, const fs_mat *v, size_t k)
{
    struct fs_err err;
    fs_mat *us = fs_mat_new(u->rows, k);
    fs_mat *d = fs_mat_dup(x);
    double r = -1;
    double nx = fs_mat_norm_fro(x);

    fs_err_clear(&err);
    for (size_t j = 0; us != NULL && j < k; j++) {
        for (size_t i = 0; i < u->rows; i++) {
            FS_MAT_AT(us, i, j) = FS_MAT_AT(u, i, j) * (s != NULL ? s[j] : 1.0);
        }
    }
    if (us != NULL && d != NULL && nx > 0) {
        fs_mat vv = fs_mat_view(v, 0, 0, v->rows, k);
        if (fs_mat_gemm('N', 'T', -1.0, us, &vv, 1.0, d, &err) == 0) {
            r = fs_mat_norm_fro(d) / nx;
        }
    }
    fs_mat_free(us);
    fs_mat_free(d);
    return r;
}

static json_t *num(double v)
{
    return v >= 0 && isfinite(v) ? json_real(v) : json_null();
}

/* Centre (and scale) the columns of x as fedpca does: mean over the rows,
 * sample standard deviation (ddof 1), constant columns keep scale 1. */
static void centre(fs_mat *x, int standardize, double *mean)
{
    size_t n = x->rows;

    for (size_t j = 0; j < x->cols; j++) {
        double m = 0.0, var = 0.0, sc = 1.0;
        for (size_t i = 0; i < n; i++) {
            m += FS_MAT_AT(x, i, j);
        }
        m /= (double)n;
        for (size_t i = 0; i < n; i++) {
            double d = FS_MAT_AT(x, i, j) - m;
            var += d * d;
            FS_MAT_AT(x, i, j) = d;
        }
        if (standardize && n > 1) {
            var /= (double)(n - 1);
            if (var > ((double)n * DBL_EPSILON * fabs(m)) * ((double)n * DBL_EPSILON * fabs(m)) &&
                var > 0) {
                sc = sqrt(var);
            }
            for (size_t i = 0; i < n; i++) {
                FS_MAT_AT(x, i, j) /= sc;
            }
        }
        mean[j] = m;
    }
}

/* The figures of the comparison of the result (shared, priv, s) with the
 * reference SVD of the pooled matrix x. New reference, or NULL (memory). */
static json_t *compare(const struct local_verify_in *in, const fs_mat *x, const fs_mat *shared,
                       const fs_mat *priv, const fs_mat *s, const fs_svd *ref, size_t k, double sv,
                       double mean_err, double t0)
{
    json_t *o;
    size_t rank = fs_svd_rank(ref, (double)(x->rows > x->cols ? x->rows : x->cols) * DBL_EPSILON);
    size_t kc = rank < k ? rank : k;
    const fs_mat *ref_shared = in->features ? ref->u : ref->v;
    const fs_mat *ref_priv = in->features ? ref->v : ref->u;
    /* fedpca scores are U S; components and U are orthonormal */
    fs_mat *u_for = NULL;
    double rec, rec_ref;
    if (in->pca && in->features) {
        /* shared scores = U S: normalise for the subspace figures */
        u_for = fs_mat_dup(shared);
        for (size_t j = 0; u_for != NULL && j < k; j++) {
            for (size_t i = 0; i < u_for->rows; i++) {
                FS_MAT_AT(u_for, i, j) = s->data[j] > 0 ? FS_MAT_AT(u_for, i, j) / s->data[j] : 0.0;
            }
        }
    }
    if (!in->pca) {
        rec =
            in->features ? recon(x, shared, s->data, priv, k) : recon(x, priv, s->data, shared, k);
    } else {
        rec = in->features ? recon(x, shared, NULL, priv, k) : recon(x, priv, NULL, shared, k);
    }
    rec_ref = recon(x, ref->u, ref->s, ref->v, k);
    o = json_pack(
        "{s:s, s:[I,I], s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:f}", "reference",
        in->k > 0 ? "LAPACK dgesvdx (exact top-k) of the pooled matrix"
                  : "LAPACK dgesdd (thin SVD) of the pooled matrix",
        "pooled_shape", (json_int_t)x->rows, (json_int_t)x->cols, "compared_columns",
        (json_int_t)kc, "reference_rank", (json_int_t)rank, "sv_error", num(sv),
        "shared_projection_distance",
        num(proj_dist(u_for != NULL ? u_for : shared, ref_shared, kc)),
        "private_projection_distance", in->pca ? json_null() : num(proj_dist(priv, ref_priv, kc)),
        "min_abs_cosine_shared", num(min_cos(u_for != NULL ? u_for : shared, ref_shared, kc)),
        "reconstruction_error", num(rec), "reference_reconstruction_error", num(rec_ref),
        "reference_seconds", (double)clock() / CLOCKS_PER_SEC - t0);
    fs_mat_free(u_for);
    if (o != NULL && in->pca && !in->features) {
        json_object_set_new(o, "mean_max_abs_error", num(mean_err));
    }
    return o;
}

int local_verify(const struct local_verify_in *in, json_t **out, struct fs_err *err)
{
    const char *shared_name =
        in->features ? (in->pca ? "scores.npy" : "U.npy") : (in->pca ? "components.npy" : "V.npy");
    const char *priv_name =
        in->features ? (in->pca ? "components.npy" : "V.npy") : (in->pca ? "scores.npy" : "U.npy");
    fs_mat **parts = calloc(in->nparties + 1, sizeof *parts);
    fs_mat **privs = calloc(in->nparties + 1, sizeof *privs);
    fs_mat *x = NULL, *shared = NULL, *priv = NULL, *s = NULL, *mean_f = NULL;
    double *mean = NULL;
    fs_svd ref = {0};
    size_t np = 0, k;
    double sv = 0.0, mean_err = -1;
    double t0;
    int rc = 0;

    *out = NULL;
    if (parts == NULL || privs == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < in->nparties && rc == 0; i++) {
        char sub[32];
        if (!in->included[i]) {
            continue;
        }
        snprintf(sub, sizeof sub, "party-%zu", i + 1);
        rc = fs_io_load_dense(in->files[i], FS_FMT_AUTO, NULL, &parts[np], err);
        if (rc == 0) {
            rc = load(in->out, sub, priv_name, &privs[np], err);
        }
        np++;
    }
    if (rc != 0) {
        goto done;
    }
    if (np == 0) {
        rc = fs_err_set(err, FS_EINVAL, "no party in the result");
        goto done;
    }
    x = pool(parts, np, in->features);
    priv = pool(privs, np, 0); /* private factors stack by rows either way */
    if (x == NULL || priv == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory for the pooled matrix");
        goto done;
    }
    for (size_t i = 0; i < np; i++) {
        fs_mat_free(parts[i]);
        parts[i] = NULL;
    }
    rc = load(in->out, NULL, shared_name, &shared, err);
    if (rc == 0) {
        rc = load(in->out, NULL, in->pca ? "singular_values.npy" : "S.npy", &s, err);
    }
    if (rc != 0) {
        goto done;
    }
    if (in->pca) {
        mean = calloc(x->cols + 1, sizeof *mean);
        if (mean == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
            goto done;
        }
        centre(x, in->standardize, mean);
        if (!in->features && load(in->out, NULL, "mean.npy", &mean_f, err) == 0 &&
            mean_f->rows == x->cols) {
            mean_err = 0.0;
            for (size_t j = 0; j < x->cols; j++) {
                double e = fabs(mean_f->data[j] - mean[j]);
                mean_err = e > mean_err ? e : mean_err;
            }
        }
    }
    t0 = (double)clock() / CLOCKS_PER_SEC;
    if (in->k > 0) {
        struct fs_svd_opts o = fs_svd_opts_default();
        o.method = FS_TOPK_GESVDX;
        rc = fs_svd_topk(x, in->k, &o, &ref, err);
    } else {
        rc = fs_svd_thin(x, &ref, err);
    }
    if (rc != 0) {
        goto done;
    }
    k = ref.r < s->rows ? ref.r : s->rows;
    for (size_t j = 0; j < k; j++) {
        double e = fabs(s->data[j] - ref.s[j]) / ref.s[0];
        sv = e > sv ? e : sv;
    }
    *out = compare(in, x, shared, priv, s, &ref, k, sv, mean_err, t0);
    if (*out == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
    }
done:
    if (parts != NULL) {
        for (size_t i = 0; i < in->nparties; i++) {
            fs_mat_free(parts[i]);
            fs_mat_free(privs[i]);
        }
    }
    free(parts);
    free(privs);
    free(mean);
    fs_mat_free(x);
    fs_mat_free(shared);
    fs_mat_free(priv);
    fs_mat_free(s);
    fs_mat_free(mean_f);
    fs_svd_clear(&ref);
    return rc;
}
