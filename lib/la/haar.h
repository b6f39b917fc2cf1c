/* Haar-distributed (uniformly random) orthogonal matrices.
 *
 * Q is the orthogonal factor, with the signs fixed so diag(R) > 0, of the
 * Householder QR of an n x n standard Gaussian matrix G (Mezzadri 2007:
 * without the sign fix the distribution is not Haar). G is never formed: by
 * rotation invariance, the trailing columns of a Gaussian matrix after the
 * first j reflections are again i.i.d. Gaussian and independent of the
 * reflections so far, so the j-th reflector can be computed from n - j fresh
 * normal draws (Stewart 1980). The result is kept as n Householder
 * reflectors plus n signs, Q = H_0 H_1 ... H_{n-1} diag(s):
 *   - generation costs n(n+1)/2 draws and O(n^2) flops (no O(n^3) QR),
 *   - applying Q or Q^T to an n x k block costs O(n^2 k) (LAPACK dormqr),
 *   - any set of w columns of Q costs O(n^2 w).
 *
 * Stream format (fixed; masks depend on it): for j = 0 .. n-1, n - j normals
 * from one fs_prg_normal call; they are the current column's entries j..n-1.
 *
 * Determinism: generation is plain C on the PRG stream (portable up to the
 * libm log/sin/cos behind fs_prg_normal); the products run in LAPACK/BLAS, so the same seed gives
 * bit-identical results only for the same BLAS build, CPU kernel and BLAS thread count (measured:
 * OpenBLAS 0.3.21 gives different last bits for 1 vs 2 threads and between its Haswell/SkylakeX
 * kernels; all matrices are 64-byte aligned so alignment is not a further source of variation). The
 * differences are rounding-level (~1e-16), harmless for accuracy, but a mask must not be assumed
 * bit-identical when regenerated on another machine or setting.
 */
#ifndef FS_LA_HAAR_H
#define FS_LA_HAAR_H

#include <stdint.h>

#include "../crypto/prg.h"
#include "mat.h"

/** A Haar orthogonal matrix in factored (Householder) form. Opaque. */
typedef struct fs_haar fs_haar;

/**
 * Draw a Haar orthogonal n x n matrix (factored) from prg, n >= 1.
 * @param out receives a new object, free with fs_haar_free.
 * @return 0, FS_EINVAL, FS_ERANGE (n over the LAPACK int range), FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int fs_haar_gen(size_t n, fs_prg *prg, fs_haar **out, struct fs_err *err);

/** Dimension n. */
size_t fs_haar_dim(const fs_haar *h);

/**
 * x = op(Q) x in place, x n x k (may be a view). op 'N' or 'T'.
 * Not reentrant for the same h (LAPACK briefly writes into the reflectors),
 * hence the non-const pointer; different objects may be used concurrently.
 */
FS_WUR int fs_haar_apply_left(fs_haar *h, char op, fs_mat *x, struct fs_err *err);

/** x = x op(Q) in place, x k x n (may be a view). Same reentrancy rule. */
FS_WUR int fs_haar_apply_right(fs_haar *h, char op, fs_mat *x, struct fs_err *err);

/**
 * Columns c0 .. c0 + out->cols - 1 of Q into out (n x w, may be a view).
 * Columns are always computed in fixed 64-column chunks, so a column's bits
 * do not depend on the range it was requested with: any slab is
 * bit-identical to the same columns of the full matrix. Cost O(n^2 w).
 */
FS_WUR int fs_haar_columns(fs_haar *h, size_t c0, fs_mat *out, struct fs_err *err);

/** Free, wiping the reflectors. Accepts NULL. */
void fs_haar_free(fs_haar *h);

/**
 * Overwrite the square matrix q (n x n, may be a view) with a dense Haar
 * orthogonal matrix drawn from prg (fs_haar_gen + fs_haar_columns).
 * @return 0, FS_EINVAL if q is not square, FS_ENOMEM, FS_ENUMERIC, FS_ECRYPTO.
 */
FS_WUR int fs_haar_fill(fs_mat *q, fs_prg *prg, struct fs_err *err);

/** New dense n x n Haar orthogonal matrix from prg (free with fs_mat_free). */
FS_WUR int fs_haar_new(size_t n, fs_prg *prg, fs_mat **out, struct fs_err *err);

/** New dense n x n Haar orthogonal matrix from a 32-byte seed (PRG with zero IV). */
FS_WUR int fs_haar_from_seed(size_t n, const uint8_t seed[32], fs_mat **out, struct fs_err *err);

#endif
