/* fedsvd local --verify: compare a fedsvd/fedpca result in DIR with a
 * centralised LAPACK SVD of the pooled matrix of the parties in the result
 * (docs/references.md: singular values relative to s_1, projection distance of
 * the shared factor, smallest |cosine| of matching shared columns,
 * reconstruction ||X - U S V^T||_F / ||X||_F with the parties' private
 * factors stacked; fedpca on the centred (scaled) matrix). */
#ifndef FS_CLI_LOCAL_VERIFY_H
#define FS_CLI_LOCAL_VERIFY_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"

struct local_verify_in {
    int pca, features, standardize;
    size_t k; /* 0: thin */
    size_t nparties;
    const char *const *files; /* party files, nparties (borrowed) */
    const int *included;      /* 1 when party i+1 is in the result */
    const char *out;          /* DIR with the result (shared files, party-<i>/) */
};

/**
 * @param out new object: reference, pooled_shape, compared_columns,
 *        reference_rank, sv_error, shared_projection_distance,
 *        private_projection_distance (fedsvd; null when too large to form
 *        densely), min_abs_cosine_shared, reconstruction_error,
 *        reference_reconstruction_error (the truncation error of the
 *        reference itself; equal to rounding without --k), mean_max_abs_error
 *        (fedpca samples).
 */
FS_WUR int local_verify(const struct local_verify_in *in, json_t **out, struct fs_err *err);

#endif
