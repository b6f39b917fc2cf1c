/* fs_csr: compressed sparse row matrix (0-based), for sparse party data such
 * as ratings. Products against dense column-major blocks. */
#ifndef FS_LA_CSR_H
#define FS_LA_CSR_H

#include <stddef.h>
#include <stdint.h>

#include "mat.h"

typedef struct fs_csr {
    size_t rows;
    size_t cols;
    size_t nnz;
    size_t *rowptr;   /* rows + 1 entries */
    uint32_t *colidx; /* nnz entries, sorted within a row, no duplicates */
    double *vals;     /* nnz entries */
} fs_csr;

/**
 * Build a CSR matrix from coordinate triplets (0-based). Duplicates are summed.
 * Takes nothing; arrays are copied. @param out new matrix, free with fs_csr_free.
 */
FS_WUR int fs_csr_from_coo(size_t rows, size_t cols, size_t nnz, const size_t *ri, const size_t *ci,
                           const double *v, fs_csr **out, struct fs_err *err);

/** Y = A Z (A rows x cols, Z cols x k, Y rows x k preallocated). */
FS_WUR int fs_csr_mul(const fs_csr *a, const fs_mat *z, fs_mat *y, struct fs_err *err);

/** Y = A^T W (W rows x k, Y cols x k preallocated). */
FS_WUR int fs_csr_tmul(const fs_csr *a, const fs_mat *w, fs_mat *y, struct fs_err *err);

/**
 * Y = A^T (A Z) * scale, the implicit covariance product, without forming A^T A.
 * Z cols x k, Y cols x k preallocated.
 */
FS_WUR int fs_csr_ata_mul(const fs_csr *a, const fs_mat *z, double scale, fs_mat *y,
                          struct fs_err *err);

/** Dense copy (rows x cols). */
FS_WUR int fs_csr_to_dense(const fs_csr *a, fs_mat **out, struct fs_err *err);

/** Free. Accepts NULL. */
void fs_csr_free(fs_csr *a);

/* ---- Further CSR operations. ---- */

/**
 * Check the structural invariants of a (rowptr monotone from 0 to nnz, column
 * indices < cols and strictly increasing within a row, finite values). The
 * products trust these; call this on a matrix not built by fs_csr_from_coo
 * (e.g. decoded from a file or the network). @return 0 or FS_EINVAL.
 */
FS_WUR int fs_csr_check(const fs_csr *a, struct fs_err *err);

#endif
