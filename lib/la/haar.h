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
 *   - any set of w columns of Q costs O(n^2 w), columns below c only the
 *     first ~c reflectors (fs_haar_gen_prefix): H_j e_i = e_i for j > i.
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

/**
 * Draw only the first k reflectors (1 <= k <= n) of the Haar matrix that
 * fs_haar_gen would draw from the same stream: they are its first k
 * reflectors bit for bit (the stream is consumed in order and stops early).
 * Enough for columns below k (fs_haar_prefix_for); fs_haar_apply_* need all n.
 * @return as fs_haar_gen, and FS_EINVAL for k out of range.
 */
FS_WUR int fs_haar_gen_prefix(size_t n, size_t k, fs_prg *prg, fs_haar **out, struct fs_err *err);

/**
 * Draw reflectors fs_haar_reflectors(h) .. k-1 (k <= n; nothing if k is not
 * more) from prg, which must be the stream that drew h, left where it stopped
 * (the same object): afterwards h is bit for bit what fs_haar_gen_prefix(n, k)
 * gives. Columns already formed do not change.
 * @return 0, FS_EINVAL, FS_ECRYPTO (h keeps the reflectors drawn so far).
 */
FS_WUR int fs_haar_extend(fs_haar *h, size_t k, fs_prg *prg, struct fs_err *err);

/**
 * Keep only the first k reflectors (k <= fs_haar_reflectors(h), a multiple
 * of the column chunk unless it is n), wiping and freeing the rest: less
 * memory for an object kept for columns below k. The stream that drew h is
 * then no longer where reflector k starts, so do not fs_haar_extend it with
 * that stream (draw a new object instead).
 * @return 0, FS_EINVAL, FS_ENOMEM (h unchanged).
 */
FS_WUR int fs_haar_truncate(fs_haar *h, size_t k, struct fs_err *err);

/** Reflectors drawn so far (n after fs_haar_gen). */
size_t fs_haar_reflectors(const fs_haar *h);

/** Columns are formed in aligned chunks of this many (see fs_haar_columns). */
#define FS_HAAR_COL_CHUNK 128

/**
 * Reflectors that fs_haar_columns needs for columns below c_end of an n x n
 * Haar matrix: c_end rounded up to the column chunk, at most n.
 */
size_t fs_haar_prefix_for(size_t n, size_t c_end);

/** Dimension n. */
size_t fs_haar_dim(const fs_haar *h);

/**
 * x = op(Q) x in place, x n x k (may be a view). op 'N' or 'T'. Needs all n
 * reflectors (fs_haar_gen; FS_EINVAL after fs_haar_gen_prefix with k < n).
 * Not reentrant for the same h (LAPACK briefly writes into the reflectors),
 * hence the non-const pointer; different objects may be used concurrently.
 */
FS_WUR int fs_haar_apply_left(fs_haar *h, char op, fs_mat *x, struct fs_err *err);

/** x = x op(Q) in place, x k x n (may be a view). Same reentrancy rule. */
FS_WUR int fs_haar_apply_right(fs_haar *h, char op, fs_mat *x, struct fs_err *err);

/**
 * Columns c0 .. c0 + out->cols - 1 of Q into out (n x w, may be a view).
 * Blocked like LAPACK dorgqr: panels of 64 reflectors in compact WY form
 * (I - V T V^T, each T computed once per object, on first use), applied with
 * BLAS-3 to 128-column chunks from the last panel that touches them to the
 * first. Columns are always computed in those fixed aligned chunks, so a
 * column's bits do not depend on the range it was requested with: any slab
 * is bit-identical to the same columns of the full matrix. Cost about
 * 4 n^2 w flops (the whole Q: 4 n^3 / 3, as dorgqr).
 * @return 0, FS_EINVAL (bad range; fewer reflectors than fs_haar_prefix_for),
 *         FS_ENOMEM, FS_ENUMERIC.
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
