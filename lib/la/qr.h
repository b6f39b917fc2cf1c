/* Householder QR orthonormalisation (LAPACK dgeqrf + dorgqr) with the sign
 * convention diag(R) >= 0, which makes the factorisation unique for full
 * column rank input and makes the Q of a Gaussian matrix Haar-distributed. */
#ifndef FS_LA_QR_H
#define FS_LA_QR_H

#include "mat.h"

/**
 * Orthonormalise the columns of a in place: a = Q R with Q m x k having
 * orthonormal columns, R k x k upper triangular with R_jj >= 0.
 * @param a in: m x k with m >= k (may be a view); out: Q.
 * @param r_or_null if not NULL, a k x k matrix (may be a view) that receives R
 *        (zeros below the diagonal).
 * @return 0; FS_EINVAL for m < k, a wrong R shape or non-finite input;
 *         FS_ERANGE when a dimension exceeds the LAPACK int range; FS_ENOMEM;
 *         FS_ENUMERIC if LAPACK reports an error.
 * Rank-deficient input still yields orthonormal Q (R then has zero diagonal entries).
 */
FS_WUR int fs_qr_orth(fs_mat *a, fs_mat *r_or_null, struct fs_err *err);

/**
 * QR of a (m x n, any shape, ld >= m) in place, keeping only R: a becomes
 * r x n, r = min(m, n), upper triangular (trapezoidal for m < n), ld r, in
 * the first r n words of its buffer; an owned buffer is shrunk to them
 * (realloc), so no second copy of a is ever made. Q is not formed (its
 * reflectors are dropped). LAPACK dgeqrt (recursive BLAS-3 panels: one core,
 * n = 1000, 0.52 s against dgeqrf's 0.65 s at m = 10000); workspace 2 nb n
 * words, nb = min(r, 64), wiped. No sign convention on R.
 * @return 0; FS_EINVAL (empty or invalid matrix), FS_ERANGE (beyond the
 *         LAPACK int range), FS_ENOMEM, FS_ENUMERIC.
 */
FS_WUR int fs_qr_keep_r(fs_mat *a, struct fs_err *err);

#endif
