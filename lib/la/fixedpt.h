/* Fixed-point encoding of doubles into the ring Z_2^64 for secure
 * aggregation. Values are clipped to a public bound B (|x| <= B is required;
 * larger is an error, not a silent wrap), scaled by 2^f, rounded, and stored
 * in two's complement. f is chosen from B and the number of summands K so
 * that K * B * 2^f < 2^63: any sum of K encoded values decodes exactly. */
#ifndef FS_LA_FIXEDPT_H
#define FS_LA_FIXEDPT_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

struct fs_fixedpt {
    double bound; /* public bound on |x| for every summand */
    unsigned summands;
    int frac_bits; /* f: scale 2^f (may be negative for huge bounds) */
};

/**
 * Choose f for (bound, summands): the largest f with summands * bound * 2^f <= 2^62.
 * @return 0, or FS_EINVAL for bound <= 0, non-finite, summands == 0.
 */
FS_WUR int fs_fixedpt_init(struct fs_fixedpt *fp, double bound, unsigned summands,
                           struct fs_err *err);

/**
 * Encode n doubles. A value with |x| > bound or non-finite is FS_ERANGE
 * naming its (first) index; out is then unspecified.
 */
FS_WUR int fs_fixedpt_encode(const struct fs_fixedpt *fp, const double *x, uint64_t *out, size_t n,
                             struct fs_err *err);

/**
 * Like fs_fixedpt_encode, but values beyond +-bound (including +-inf) are
 * clipped to +-bound instead of refused; *clipped (may be NULL) receives how
 * many were. NaN is still FS_ERANGE naming its index.
 */
FS_WUR int fs_fixedpt_encode_clipped(const struct fs_fixedpt *fp, const double *x, uint64_t *out,
                                     size_t n, size_t *clipped, struct fs_err *err);

/**
 * Decode n ring elements (a sum of up to `summands` encodings) back to
 * doubles. The error against the exact sum of the encoded doubles is at most
 * summands * 2^-(f+1) plus one rounding to double (2^-53 relative). A sum
 * beyond DBL_MAX (possible only when summands * bound is) decodes to +-inf.
 * out may be in itself (decoding in place); otherwise they must not overlap.
 */
void fs_fixedpt_decode(const struct fs_fixedpt *fp, const uint64_t *in, double *out, size_t n);

/**
 * 1 when encode/decode run the AVX-512 kernels (CPUID, unless forced off);
 * their results are bit-identical to the scalar loops.
 */
int fs_fixedpt_accelerated(void);

/** Tests and benchmarks: on != 0 forces the scalar loops. Not thread-safe. */
void fs_fixedpt_force_generic(int on);

/** Add integer noise (two's complement) to encoded values: out[i] += (uint64_t)noise[i]. */
void fs_fixedpt_add_noise(uint64_t *v, const int64_t *noise, size_t n);

#endif
