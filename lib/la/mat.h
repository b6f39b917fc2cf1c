/* fs_mat: a dense column-major matrix of doubles, the layout LAPACK takes
 * without copies. Element (i, j) lives at data[i + j * ld], ld >= rows.
 *
 * The struct is public (numerical code reads fields in inner loops); callers
 * must not free `data` themselves: an fs_mat from fs_mat_new owns its data
 * and is released with fs_mat_free. A view (fs_mat_view) borrows its data. */
#ifndef FS_LA_MAT_H
#define FS_LA_MAT_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

typedef struct fs_mat {
    size_t rows;
    size_t cols;
    size_t ld; /* leading dimension (column stride), >= rows, >= 1 */
    double *data;
    int owns; /* 1 if data is freed by fs_mat_free */
} fs_mat;

#define FS_MAT_AT(m, i, j) ((m)->data[(size_t)(i) + (size_t)(j) * (m)->ld])

/** New rows x cols matrix of zeros (ld = max(rows,1)). NULL on overflow/OOM. Free with fs_mat_free.
 */
fs_mat *fs_mat_new(size_t rows, size_t cols);

/** New uninitialised matrix (faster when every entry will be written). */
fs_mat *fs_mat_new_uninit(size_t rows, size_t cols);

/** New deep copy (compact, ld = rows). NULL on OOM. */
fs_mat *fs_mat_dup(const fs_mat *a);

/** New identity n x n. */
fs_mat *fs_mat_eye(size_t n);

/** New transpose of a. */
fs_mat *fs_mat_transpose(const fs_mat *a);

/** A non-owning view of the block a[r0:r0+nr, c0:c0+nc] (borrowed; do not free). */
fs_mat fs_mat_view(const fs_mat *a, size_t r0, size_t c0, size_t nr, size_t nc);

/** Free a matrix from fs_mat_new*, and its data if owned. Accepts NULL. */
void fs_mat_free(fs_mat *m);

/** Copy src into dst (same shape, either may be a view). */
FS_WUR int fs_mat_copy(fs_mat *dst, const fs_mat *src, struct fs_err *err);

/** Frobenius norm (scaled, no overflow). */
double fs_mat_norm_fro(const fs_mat *a);

/** Largest |a_ij|. */
double fs_mat_max_abs(const fs_mat *a);

/**
 * C = alpha * op(A) op(B) + beta * C via BLAS dgemm. ta/tb: 'N' or 'T'.
 * Shapes are checked; a mismatch is FS_EINVAL.
 */
FS_WUR int fs_mat_gemm(char ta, char tb, double alpha, const fs_mat *a, const fs_mat *b,
                       double beta, fs_mat *c, struct fs_err *err);

/** New matrix op(A) op(B). NULL-safe error via err. */
FS_WUR int fs_mat_mul(char ta, char tb, const fs_mat *a, const fs_mat *b, fs_mat **out,
                      struct fs_err *err);

/** 1 if all entries are finite, else 0 (and *bad_i, *bad_j set if not NULL). */
int fs_mat_all_finite(const fs_mat *a, size_t *bad_i, size_t *bad_j);

/* ---- Small helpers used across lib/la and by callers. ---- */

struct fs_prg;

/** Set every entry of a (may be a view) to 0. */
void fs_mat_zero(fs_mat *a);

/** a *= alpha, entrywise (may be a view). */
void fs_mat_scale(fs_mat *a, double alpha);

/** Overwrite every entry of a with zeros using a store the compiler cannot drop (for secrets). */
void fs_mat_wipe(fs_mat *a);

/** y += alpha * x (same shape, must not overlap). FS_EINVAL on a shape mismatch. */
FS_WUR int fs_mat_axpy(double alpha, const fs_mat *x, fs_mat *y, struct fs_err *err);

/**
 * Fill a (may be a view) with standard normal draws from prg, column by column
 * (a->rows draws per column), so a view and a compact matrix of the same shape
 * receive the same values from the same stream position.
 */
FS_WUR int fs_mat_fill_normal(fs_mat *a, struct fs_prg *prg, struct fs_err *err);

/**
 * 1 if the storage of a and b may share elements (exact for two views with the
 * same ld, conservative address-range test otherwise), else 0.
 */
int fs_mat_overlap(const fs_mat *a, const fs_mat *b);

#endif
