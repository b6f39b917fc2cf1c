/* Sharded aggregation of FedSVD (samples partition): S aggregation servers
 * each hold a row range of the masked matrix Y' = A_c Y B_c and reduce it to
 * the R factor of its rows (tall-skinny QR, Demmel, Grigori, Hoemmen, Langou,
 * "Communication-optimal parallel and sequential QR and LU factorizations",
 * 2012); the coordinator (shard 0) stacks the S factors, takes their QR and
 * the SVD of the n x n R: the singular values and V' of Y', U never formed.
 *
 * Rows: shard s owns rows [lo_s, hi_s) of Y' (m rows), lo_s = floor(s m / S);
 * every shard has at least one row. Vector layout (shard-blocked): the
 * secure-aggregation vector of m n words holds shard 0's sub-block
 * Y'[lo_0:hi_0, :], then shard 1's, ...; within a sub-block the element
 * order is the one the unsharded layout uses for the whole matrix, so S = 1
 * is the unsharded layout word for word. Shard s's window is the words
 * [off_s, off_s + len_s), off_s = lo_s n, len_s = (hi_s - lo_s) n. A party
 * encodes a chunk (fs_fedsvd_party_masked) that lies in one window. */
#ifndef FS_PROTO_FEDSVD_SHARD_H
#define FS_PROTO_FEDSVD_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "../la/mat.h"
#include "../la/svd.h"
#include "fedsvd.h"

/** Shards of a checked job: 1 when job->shards is 0 or 1. */
uint32_t fs_fedsvd_shard_count(const struct fs_fedsvd_job *job);

/**
 * Rows [*lo, *hi) of Y' that shard s (0-based) owns.
 * @return 0, or FS_EINVAL (s out of range, invalid job).
 */
FS_WUR int fs_fedsvd_shard_rows(const struct fs_fedsvd_job *job, uint32_t s, uint64_t *lo,
                                uint64_t *hi);

/**
 * Words [*off, *off + *len) of the aggregation vector that shard s holds.
 * @return 0, or FS_EINVAL (s out of range, invalid job).
 */
FS_WUR int fs_fedsvd_shard_window(const struct fs_fedsvd_job *job, uint32_t s, uint64_t *off,
                                  uint64_t *len);

/**
 * Shard s's R factor: decode the window's ring sum (len_s words, with the
 * public exponent as fs_fedsvd_server_decode_owned does) in place into the
 * (hi_s - lo_s) x n block of Y', take its QR in place and keep R (r x n, r =
 * min(rows, n), upper triangular). Works IN PLACE: sum (from malloc/calloc,
 * e.g. fs_secagg_server_take_sum or fs_secagg_shard_finish's taken sum) is
 * taken over, also on failure; no second copy of the block is made, and the
 * buffer shrinks to r n words once the QR is done. Peak: the block plus the
 * QR's O(n^2) workspace. @param r_out new matrix, free with fs_mat_free.
 * @return 0, FS_EINVAL, FS_ERANGE (non-finite decode), FS_ENOMEM, FS_ELAPACK ...
 */
FS_WUR int fs_fedsvd_shard_r(const struct fs_fedsvd_job *job, uint32_t s, int public_exponent,
                             uint64_t *sum, fs_mat **r_out, struct fs_err *err);

/**
 * Coordinator: stack R_0..R_{S-1} (borrowed, r_s x n each, as
 * fs_fedsvd_shard_r gives them; S must be the job's shard count), QR, and
 * factorize the n x n R exactly as fs_fedsvd_server_factorize factorizes the
 * whole Y' (k, method, seed and out as there; same sign convention; top-k
 * methods behave as unsharded). The R's are not changed.
 */
FS_WUR int fs_fedsvd_tsqr_factorize(const struct fs_fedsvd_job *job, fs_mat *const *r, uint32_t S,
                                    size_t k, enum fs_topk_method method, const uint8_t *seed,
                                    struct fs_fedsvd_published *out, struct fs_err *err);

/**
 * Coordinator, incrementally (O(n^2) memory however many shards): fold one
 * shard's R (borrowed, r_s x n as fs_fedsvd_shard_r gives it) into the
 * running factor *acc: the first R is copied; later ones are stacked under
 * *acc, [acc; R_s], and when the stack has more than n rows its QR leaves
 * the n x n R. *acc (NULL at first) is replaced; free it with fs_mat_free
 * (it is wiped by fs_fedsvd_tsqr_finish). Folding the shards' R's in any
 * order gives the stack's R up to the signs of its rows, so the same S and
 * V' as fs_fedsvd_tsqr_factorize, to rounding.
 * @return 0, FS_EINVAL (R not r x n), FS_ENOMEM, FS_ELAPACK ...
 */
FS_WUR int fs_fedsvd_tsqr_fold(fs_mat **acc, const fs_mat *r, size_t n, struct fs_err *err);

/**
 * Factorize the folded factor of all S shards (fs_fedsvd_tsqr_fold) as
 * fs_fedsvd_tsqr_factorize factorizes the stack (k, method, seed, out as
 * there). acc is consumed: wiped and freed, also on failure.
 */
FS_WUR int fs_fedsvd_tsqr_finish(const struct fs_fedsvd_job *job, fs_mat *acc, size_t k,
                                 enum fs_topk_method method, const uint8_t *seed,
                                 struct fs_fedsvd_published *out, struct fs_err *err);

#endif
