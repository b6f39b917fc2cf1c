/* Noise for the power-method family.
 *
 * 1. Seeded noise for the seed mode of the noise exchange: the party expands
 *    a fresh 256-bit seed into its noise, the server regenerates the noise of
 *    every seed it recovers, and both must get the same integers. The exact
 *    sampler of lib/dp (fs_dgauss_sample_prg) is driven by the AES-256-CTR
 *    keystream of the seed, so the output is identical on every machine.
 *
 * 2. Grid noise: every noise that is not secret-shared is also discrete: the
 *    values are rounded to 2^-f, integer noise N_Z(0, (sigma 2^f)^2) from
 *    the CSPRNG (fs_dgauss_sample) is added, and the sum is converted back.
 *    Adding continuous or integer noise to an unrounded double would expose
 *    the value's low bits. */
#include <limits.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/prg.h"
#include "../dp/dgauss.h"
#include "fedpower_internal.h"

int fs_fedpower_noise_from_seed(const uint8_t seed[32], double sigma, int64_t *out, size_t n,
                                struct fs_err *err)
{
    /* Domain separation from any other use of the same 32 bytes as a key. */
    static const uint8_t iv[16] = {'f', 'e', 'd', 'p', 'o', 'w', 'e', 'r',
                                   '-', 'n', 'o', 'i', 's', 'e', 0,   1};
    fs_prg *prg = NULL;
    int rc;

    if (seed == NULL || (n > 0 && out == NULL)) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_noise_from_seed: NULL argument");
    }
    rc = fs_prg_new(&prg, seed, iv, err);
    if (rc == 0) {
        /* The exact CKS20 sampler of lib/dp, fed by the seed's stream, so the
         * server regenerates exactly the party's integers. */
        rc = fs_dgauss_sample_prg(prg, sigma, out, n, err);
    }
    fs_prg_free(prg);
    return rc;
}

/* ---- grid noise ----------------------------------------------------------- */

int fpw_grid_noise(double *y, size_t n, int frac_bits, double sigma, struct fs_err *err)
{
    int64_t *nz = NULL;
    double s_int = ldexp(sigma, frac_bits);
    int rc;

    if (n == 0 || sigma == 0.0) {
        return 0;
    }
    if (!(s_int >= FPW_MIN_INT_SIGMA) || s_int > FPW_MAX_INT_SIGMA) {
        return fs_err_set(err, FS_ERANGE,
                          "noise: std %g on a grid of 2^-%d is outside the sampler's range", sigma,
                          frac_bits);
    }
    nz = malloc(n * sizeof *nz);
    if (nz == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise: out of memory");
    }
    rc = fs_dgauss_sample(s_int, nz, n, err);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        double v = ldexp(y[i], frac_bits);
        if (!(fabs(v) < 4.0e18)) {
            rc = fs_err_set(err, FS_ERANGE, "noise: value %zu does not fit the grid 2^-%d", i,
                            frac_bits);
            break;
        }
        long long q = llrint(v);
        /* |q| < 4e18 and |noise| <= 2^50 * 40: no overflow */
        y[i] = ldexp((double)(q + (long long)nz[i]), -frac_bits);
    }
    OPENSSL_cleanse(nz, n * sizeof *nz);
    free(nz);
    return rc;
}

int fpw_real_noise(double *y, size_t n, double sigma, struct fs_err *err)
{
    double m = 0.0;
    int e = 0;

    if (n == 0 || sigma == 0.0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(y[i])) {
            return fs_err_set(err, FS_ERANGE, "noise: value %zu is not finite", i);
        }
        if (fabs(y[i]) > m) {
            m = fabs(y[i]);
        }
    }
    if (m < FS_FEDPOWER_NOISE_CAP_SIGMAS * sigma) {
        m = FS_FEDPOWER_NOISE_CAP_SIGMAS * sigma;
    }
    /* grid: values (and noise) stay below 2^60, the integer std below 2^50 */
    (void)frexp(m, &e);
    int f = 60 - e;
    (void)frexp(sigma, &e);
    if (f > 50 - e) {
        f = 50 - e;
    }
    return fpw_grid_noise(y, n, f, sigma, err);
}

int fpw_ring_add_noise(uint64_t *v, const int64_t *noise, size_t n, int64_t cap, struct fs_err *err)
{
    for (size_t i = 0; i < n; i++) {
        if (noise[i] > cap || noise[i] < -cap) {
            return fs_err_set(err, FS_EINTERNAL,
                              "noise: sample %zu beyond %.0f standard deviations (probability "
                              "below e^-800)",
                              i, FS_FEDPOWER_NOISE_CAP_SIGMAS);
        }
    }
    for (size_t i = 0; i < n; i++) {
        v[i] += (uint64_t)noise[i];
    }
    return 0;
}
