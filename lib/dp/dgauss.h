/* Exact discrete Gaussian sampler (Canonne, Kamath & Steinke 2020,
 * Algorithm 3 via discrete Laplace and Bernoulli(exp(-gamma)) with rational
 * arithmetic), driven by the OS CSPRNG. Samples x in Z with probability
 * proportional to exp(-x^2 / (2 sigma^2)). No floating point touches the
 * sampling decisions: sigma^2 is taken as an exact rational num/den. */
#ifndef FS_DP_DGAUSS_H
#define FS_DP_DGAUSS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

/**
 * n samples of N_Z(0, sigma^2) with sigma^2 = sigma2_num / sigma2_den (both > 0).
 * @return 0, FS_EINVAL, or FS_ECRYPTO if the CSPRNG fails.
 */
FS_WUR int fs_dgauss_sample_rational(uint64_t sigma2_num, uint64_t sigma2_den, int64_t *out,
                                     size_t n, struct fs_err *err);

/**
 * Convenience: sigma (a double > 0) is converted to an exact rational
 * approximation of sigma^2 (relative error < 1e-12) and sampled as above.
 */
FS_WUR int fs_dgauss_sample(double sigma, int64_t *out, size_t n, struct fs_err *err);

#endif
