/* Exact discrete Gaussian samplers: x in Z with probability proportional to
 * exp(-x^2 / (2 sigma^2)), sigma^2 taken exactly (for a double sigma = M 2^e,
 * sigma^2 = M^2 2^(2e); nothing is rounded). No floating point touches the
 * sampling decisions.
 *
 * fs_dgauss_sample / fs_dgauss_sample_prg (dgauss_fast.c): block inversion
 * with exact rejection, 64-bit integer arithmetic on the common path (192
 * bits on paths of probability about 2^-22, GMP only on paths of
 * probability below 2^-50 per sample), proposals in batches; 16 random
 * bytes and about 85 to 95 million samples a second per core for sigma >=
 * 1000 (about 22 million at sigma 16; below 16 they call the reference
 * sampler; bench/bench_dgauss).
 * fs_dgauss_sample_prg_v1: the previous map from the stream to samples,
 * about 2.7 times slower, for the benchmark and the tests.
 * fs_dgauss_sample_reference* (dgauss.c): Canonne, Kamath & Steinke 2020,
 * Algorithm 3 (discrete Laplace proposal, Bernoulli(exp(-gamma)) with
 * rational arithmetic in GMP), ~1-3 million samples a second; the same
 * distribution, a different map from random bytes to samples. */
#ifndef FS_DP_DGAUSS_H
#define FS_DP_DGAUSS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

struct fs_prg;

/**
 * n samples of N_Z(0, sigma^2) with sigma^2 = sigma2_num / sigma2_den (both > 0).
 * @return 0, FS_EINVAL, or FS_ECRYPTO if the CSPRNG fails.
 */
FS_WUR int fs_dgauss_sample_rational(uint64_t sigma2_num, uint64_t sigma2_den, int64_t *out,
                                     size_t n, struct fs_err *err);

/**
 * n samples of N_Z(0, sigma^2) from the OS CSPRNG, sigma^2 of the double
 * itself (the rational M^2 2^(2e)). Accepted range 2^-20 <= sigma <= 2^52
 * (FS_EINVAL outside). The fast sampler for sigma >= 16, the reference one
 * below. @return 0, FS_EINVAL, FS_ENOMEM, FS_ERANGE (a sample beyond int64,
 * probability far below 2^-1000) or FS_ECRYPTO.
 */
FS_WUR int fs_dgauss_sample(double sigma, int64_t *out, size_t n, struct fs_err *err);

/** The reference sampler (CKS20 Algorithm 3 in GMP) with the same contract. */
FS_WUR int fs_dgauss_sample_reference(double sigma, int64_t *out, size_t n, struct fs_err *err);

/**
 * Algorithm 1 alone: n independent Bernoulli(exp(-num/den)) bits (0 or 1)
 * into out. For tests and for callers that need exact coins.
 * @return 0, FS_EINVAL (den == 0), or FS_ECRYPTO.
 */
FS_WUR int fs_dgauss_bernoulli_exp(uint64_t gamma_num, uint64_t gamma_den, int *out, size_t n,
                                   struct fs_err *err);

/**
 * Algorithm 2 with s = 1: n samples of the discrete Laplace distribution,
 * P(x) proportional to exp(-|x| / t), 1 <= t <= 2^60.
 * @return 0, FS_EINVAL, FS_ERANGE (a sample beyond int64, probability
 * below e^-2048), or FS_ECRYPTO.
 */
FS_WUR int fs_dlaplace_sample(uint64_t t, int64_t *out, size_t n, struct fs_err *err);

/* The version of the map from a seeded stream to samples (of
 * fs_dgauss_sample_prg). A party and the aggregation server that
 * regenerates its noise from the seed must use the same one; invitations to
 * seed-mode fedpower-utility jobs carry it (api/jobs.h). 1: the releases up to
 * the faster batched sampler; 2: since. */
#define FS_DGAUSS_STREAM_VERSION 2

/**
 * As fs_dgauss_sample, but every random byte comes from `prg` (borrowed; its
 * stream advances) instead of the OS CSPRNG: the same seeded stream gives the
 * same samples, so a party's noise can be regenerated from its seed (the
 * seed-mode noise exchange, lib/proto/noise_exchange.h). Only for that use: the seed must
 * itself come from the CSPRNG and stay secret.
 */
FS_WUR int fs_dgauss_sample_prg(struct fs_prg *prg, double sigma, int64_t *out, size_t n,
                                struct fs_err *err);

/** The map of earlier releases from the stream to samples (the same
 * distribution, 32-bit comparisons, ~33 M samples a second): for the
 * benchmark and the tests only; party and server both use
 * fs_dgauss_sample_prg. */
FS_WUR int fs_dgauss_sample_prg_v1(struct fs_prg *prg, double sigma, int64_t *out, size_t n,
                                   struct fs_err *err);

/** The reference sampler driven by `prg` (a different map from the stream to
 * samples than fs_dgauss_sample_prg's). */
FS_WUR int fs_dgauss_sample_reference_prg(struct fs_prg *prg, double sigma, int64_t *out, size_t n,
                                          struct fs_err *err);

/* Tests only (not thread-safe; 0 restores the normal paths): make the fast
 * sampler take its rare exact paths on every sample. */
#define FS_DGAUSS_DEBUG_EXACT_CDT    1  /* block inversion at 128+ bits */
#define FS_DGAUSS_DEBUG_GENERIC      2  /* block and acceptance in GMP */
#define FS_DGAUSS_DEBUG_BITWISE      4  /* comparisons one bit at a time */
#define FS_DGAUSS_DEBUG_UNDECIDED    8  /* the first acceptance coin exactly, not from its bounds */
#define FS_DGAUSS_DEBUG_CHECK_BOUNDS 16 /* verify those bounds exactly (FS_EINTERNAL if wrong) */
#define FS_DGAUSS_DEBUG_ONE_BY_ONE   32 /* every proposal by the general code (same samples) */
void fs_dgauss_debug_force(int flags);

#endif
