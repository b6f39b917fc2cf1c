/* Orthogonal Procrustes: the orthogonal D minimising ||Y D - Z||_F is
 * D = U V^T from the SVD Y^T Z = U S V^T. FedPower (lib/proto/fedpower.h) aligns each
 * party's iterate Y_i to a reference Z_ref this way before averaging. */
#ifndef FS_LA_PROCRUSTES_H
#define FS_LA_PROCRUSTES_H

#include "mat.h"

/**
 * The polar factor of m: D = U V^T where m = U S V^T (thin SVD).
 * @param m p x q (typically r x r, m = Y^T Z_ref); not modified.
 * @param d_out receives a new p x q matrix with orthonormal columns (p >= q)
 *        or rows (p < q); free with fs_mat_free.
 * @return 0, FS_EINVAL (empty or non-finite m), FS_ENOMEM, FS_ENUMERIC.
 * When m is rank deficient D is one of several minimisers (LAPACK's choice).
 */
FS_WUR int fs_procrustes_rotation(const fs_mat *m, fs_mat **d_out, struct fs_err *err);

/**
 * Align y to z_ref: D = fs_procrustes_rotation(y^T z_ref) and *y_aligned = y D.
 * @param y d x r, @param z_ref d x r (same shape, else FS_EINVAL); neither modified.
 * @param y_aligned receives a new d x r matrix; free with fs_mat_free.
 * @param d_or_null if not NULL receives the new r x r rotation D (caller frees).
 */
FS_WUR int fs_procrustes_align(const fs_mat *y, const fs_mat *z_ref, fs_mat **y_aligned,
                               fs_mat **d_or_null, struct fs_err *err);

#endif
