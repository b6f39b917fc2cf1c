/* Singular value decompositions: thin (LAPACK dgesdd) and top-k
 * (randomized range finder with oversampling and power iterations, or
 * LAPACK dgesvdx). A = U diag(S) V^T with U m x r, V n x r, S descending.
 *
 * Sign convention (all methods): each pair (u_j, v_j) is flipped so that the
 * entry of largest magnitude of v_j is positive (the first one on an exact
 * tie), so results are deterministic and comparable across methods.
 * Input with NaN or Inf entries, or an empty matrix, is FS_EINVAL.
 * On failure *out is left zeroed (nothing to clear). */
#ifndef FS_LA_SVD_H
#define FS_LA_SVD_H

#include <stdint.h>

#include "mat.h"

typedef struct fs_svd {
    fs_mat *u; /* m x r, owned */
    double *s; /* r values, descending, owned */
    fs_mat *v; /* n x r, owned (V, not V^T) */
    size_t r;
} fs_svd;

enum fs_topk_method {
    FS_TOPK_AUTO = 0, /* randomized when k is small relative to min(m,n), else thin */
    FS_TOPK_RANDOMIZED = 1,
    FS_TOPK_GESVDX = 2,
    FS_TOPK_THIN = 3 /* thin SVD, then truncate */
};

struct fs_svd_opts {
    enum fs_topk_method method;
    size_t oversample;   /* randomized: extra columns, default 10 when 0 */
    int power_iters;     /* randomized: subspace iterations, default 4 when < 0 */
    const uint8_t *seed; /* 32 bytes for reproducible sketches; NULL = OS CSPRNG */
    int want_u;          /* 0 to skip U (out->u is then NULL); default behaviour is 1.
                            Start from fs_svd_opts_default(): a zeroed struct means
                            want_u = 0 and power_iters = 0. */
};

/** Default options (auto method, oversample 10, 4 power iterations, want_u 1). */
struct fs_svd_opts fs_svd_opts_default(void);

/**
 * Thin SVD of a (not modified), r = min(m, n). Fills out (owned fields; release
 * with fs_svd_clear). @return 0, FS_ENOMEM, FS_ENUMERIC if LAPACK fails.
 */
FS_WUR int fs_svd_thin(const fs_mat *a, fs_svd *out, struct fs_err *err);

/**
 * Top-k SVD, 1 <= k <= min(m, n); opts may be NULL for defaults. out->r = k.
 * AUTO uses the randomized method when min(m, n) >= 256 and k + oversample
 * <= min(m, n) / 4, else THIN. The randomized sketch width is
 * min(k + oversample, min(m, n)).
 * Randomized results are accurate to the usual randomized-SVD bounds; use
 * FS_TOPK_GESVDX or FS_TOPK_THIN when exactness to double precision is needed.
 */
FS_WUR int fs_svd_topk(const fs_mat *a, size_t k, const struct fs_svd_opts *opts, fs_svd *out,
                       struct fs_err *err);

/** Numerical rank: number of s_i > rtol * s_1. */
size_t fs_svd_rank(const fs_svd *s, double rtol);

/** Release the fields of s (not s itself). Accepts NULL and zeroed structs. */
void fs_svd_clear(fs_svd *s);

#endif
