/* The job algorithms as a typed enum, shared by the protocol state machines,
 * the services and the CLI. Their wire names ("secure-sum", "fedsvd", ...)
 * live in the wire layer (fs_algo_name / fs_algo_parse in api/jobs.h): this
 * header only knows the algorithms, not how they are spelled.
 *
 *   FS_ALGO_SECURE_SUM         element-wise secure sum of equal-shape matrices
 *   FS_ALGO_FEDSVD, _FEDPCA    lossless masked SVD / PCA (fedsvd.h, fedpca.h)
 *   FS_ALGO_FEDPOWER ...       the federated power method family (fedpower.h):
 *                              fedpower, fedpower-utility, fedpower-private, dp-ppm
 */
#ifndef FS_PROTO_JOB_H
#define FS_PROTO_JOB_H

#include "fedpower.h"

enum fs_algo {
    FS_ALGO_SECURE_SUM = 0,
    FS_ALGO_FEDSVD = 1,
    FS_ALGO_FEDPCA = 2,
    FS_ALGO_FEDPOWER = 3,
    FS_ALGO_FEDPOWER_UTILITY = 4,
    FS_ALGO_FEDPOWER_PRIVATE = 5,
    FS_ALGO_DP_PPM = 6
};

#define FS_ALGO_COUNT 7 /* the algorithms are 0..FS_ALGO_COUNT-1 */

/** 1 for fedsvd and fedpca (the lossless masked-SVD jobs). */
static inline int fs_algo_is_fedsvd(enum fs_algo a)
{
    return a == FS_ALGO_FEDSVD || a == FS_ALGO_FEDPCA;
}

/** 1 for the four power methods (fedpower, -utility, -private, dp-ppm). */
static inline int fs_algo_is_power(enum fs_algo a)
{
    return a == FS_ALGO_FEDPOWER || a == FS_ALGO_FEDPOWER_UTILITY ||
           a == FS_ALGO_FEDPOWER_PRIVATE || a == FS_ALGO_DP_PPM;
}

/**
 * 1 for the power methods whose parties add differentially private noise and
 * upload through secure aggregation (fedpower-utility, fedpower-private,
 * dp-ppm); plain fedpower uploads in the clear (fs_fedpower_uses_secagg).
 */
static inline int fs_algo_is_dp(enum fs_algo a)
{
    return a == FS_ALGO_FEDPOWER_UTILITY || a == FS_ALGO_FEDPOWER_PRIVATE || a == FS_ALGO_DP_PPM;
}

/** The lib/proto/fedpower.h algorithm of a power method (0 for any other algorithm). */
static inline enum fs_fedpower_alg fs_algo_fedpower_alg(enum fs_algo a)
{
    switch (a) {
    case FS_ALGO_FEDPOWER:
        return FS_FEDPOWER_PLAIN;
    case FS_ALGO_FEDPOWER_UTILITY:
        return FS_FEDPOWER_UTILITY;
    case FS_ALGO_FEDPOWER_PRIVATE:
        return FS_FEDPOWER_PRIVATE;
    case FS_ALGO_DP_PPM:
        return FS_FEDPOWER_DPPPM;
    default:
        return (enum fs_fedpower_alg)0;
    }
}

#endif
