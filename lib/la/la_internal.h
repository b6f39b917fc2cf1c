/* Internal helpers shared by the lib/la sources; not part of the public API.
 * BLAS and LAPACK take 32-bit int dimensions (OpenBLAS blasint, LAPACKE
 * lapack_int on Debian), so every size that reaches them is range-checked
 * here first: a too-large matrix is FS_ERANGE, never a silent truncation. */
#ifndef FS_LA_INTERNAL_H
#define FS_LA_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "mat.h"

/* 1 if m is a usable matrix: non-NULL, ld >= max(rows, 1), data present when non-empty. */
static inline int la_mat_ok(const fs_mat *m)
{
    if (m == NULL || m->ld < 1 || m->ld < m->rows) {
        return 0;
    }
    if (m->rows > 0 && m->cols > 0 && m->data == NULL) {
        return 0;
    }
    return 1;
}

/* 1 if x fits the int that BLAS/LAPACK take. */
static inline int la_fits_int(size_t x)
{
    return x <= (size_t)INT_MAX;
}

/* 1 if the dimensions and leading dimension of m fit BLAS/LAPACK ints. */
static inline int la_mat_fits_int(const fs_mat *m)
{
    return la_fits_int(m->rows) && la_fits_int(m->cols) && la_fits_int(m->ld);
}

/* *out = a * b, returning 0 on overflow. */
static inline int la_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a) {
        return 0;
    }
    *out = a * b;
    return 1;
}

#endif
