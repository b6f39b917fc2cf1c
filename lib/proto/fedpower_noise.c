/* Noise for the power-method family.
 *
 * 1. A seeded exact discrete Gaussian sampler for the seed mode of the noise
 *    exchange: the party expands a fresh 256-bit seed into its noise, the
 *    server regenerates the noise of every seed it recovers, and both must
 *    get the same integers. lib/dp/dgauss.c draws from the OS CSPRNG; this
 *    is the same algorithm (Canonne, Kamath & Steinke 2020: Bernoulli(exp(-g))
 *    by Algorithm 1, discrete Laplace by Algorithm 2 with s = 1, discrete
 *    Gaussian by rejection, Algorithm 3, t = floor(sigma) + 1), every decision
 *    an integer comparison, driven by the AES-256-CTR keystream of fs_prg
 *    keyed with the seed. The byte consumption is a deterministic function of
 *    the stream, so the output is identical on every machine. (A byte-source
 *    hook in lib/dp would let both share one implementation; until then the
 *    algorithm is repeated here, kept line for line comparable.)
 *
 * 2. Grid noise: every noise that is not secret-shared is also discrete: the
 *    values are rounded to 2^-f, integer noise N_Z(0, (sigma 2^f)^2) from
 *    the CSPRNG (fs_dgauss_sample) is added, and the sum is converted back.
 *    Adding continuous or integer noise to an unrounded double would expose
 *    the value's low bits. */
#include <gmp.h>
#include <limits.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/prg.h"
#include "../dp/dgauss.h"
#include "fedpower_internal.h"

__extension__ typedef unsigned __int128 u128;

#define SG_SIGMA_MAX 4503599627370496.0  /* 2^52, as fs_dgauss_sample */
#define SG_SIGMA_MIN 9.5367431640625e-07 /* 2^-20 */
#define SG_RBUF      4096
#define SG_BITS      1024

/* ---- byte source: the PRG stream, buffered -------------------------------- */

struct sg_src {
    fs_prg *prg;
    unsigned char buf[SG_RBUF];
    size_t pos;
    struct fs_err *err;
    int rc; /* first failure, sticky */
};

static u128 sg_take(struct sg_src *rs, size_t n)
{
    u128 x = 0;

    for (size_t i = 0; i < n; i++) {
        if (rs->pos == SG_RBUF) {
            if (rs->rc != 0) {
                return 0;
            }
            rs->rc = fs_prg_bytes(rs->prg, rs->buf, SG_RBUF, rs->err);
            if (rs->rc != 0) {
                return 0;
            }
            rs->pos = 0;
        }
        x |= (u128)rs->buf[rs->pos] << (8 * i);
        rs->pos++;
    }
    return x;
}

static unsigned bitlen128(u128 x)
{
    uint64_t hi = (uint64_t)(x >> 64);
    uint64_t lo = (uint64_t)x;

    if (hi != 0) {
        return 128u - (unsigned)__builtin_clzll(hi);
    }
    if (lo != 0) {
        return 64u - (unsigned)__builtin_clzll(lo);
    }
    return 0;
}

/* Uniform in [0, bound) by masking and rejection. */
static u128 sg_below(struct sg_src *rs, u128 bound)
{
    if (bound <= 1) {
        return 0;
    }
    unsigned bits = bitlen128(bound - 1);
    size_t nbytes = (bits + 7) / 8;
    u128 mask = bits == 128 ? ~(u128)0 : (((u128)1 << bits) - 1);

    for (;;) {
        u128 x = sg_take(rs, nbytes) & mask;
        if (rs->rc != 0) {
            return 0;
        }
        if (x < bound) {
            return x;
        }
    }
}

/* Bernoulli(exp(-num/den)), 0 <= num <= den. */
static int sg_bern_exp_small(struct sg_src *rs, uint64_t num, uint64_t den)
{
    uint64_t k = 1;

    if (num == 0) {
        return 1;
    }
    for (;;) {
        u128 u = sg_below(rs, (u128)den * k);
        if (rs->rc != 0) {
            return 0;
        }
        if (u >= num) {
            break;
        }
        k++;
    }
    return (int)(k & 1);
}

static int sg_bern_exp1(struct sg_src *rs)
{
    return sg_bern_exp_small(rs, 1, 1);
}

struct sg_ctx {
    struct sg_src rs;
    uint64_t t;
    mpz_t n, d, dt, den;
    mpz_t a, q, r, u, m;
};

static void sg_mpz_below(struct sg_ctx *c, mpz_t z, const mpz_t bound)
{
    size_t bits = mpz_sizeinbase(bound, 2);
    size_t limbs = (bits + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS;

    for (;;) {
        mp_limb_t *p = mpz_limbs_write(z, (mp_size_t)limbs);
        for (size_t i = 0; i < limbs; i++) {
            p[i] = (mp_limb_t)sg_take(&c->rs, sizeof(mp_limb_t));
        }
        mpz_limbs_finish(z, (mp_size_t)limbs);
        if (c->rs.rc != 0) {
            return;
        }
        mpz_tdiv_r_2exp(z, z, (mp_bitcnt_t)bits);
        if (mpz_cmp(z, bound) < 0) {
            return;
        }
    }
}

static int sg_bern_exp_mpz(struct sg_ctx *c, mpz_t num, const mpz_t den)
{
    mpz_fdiv_qr(c->q, c->r, num, den);
    while (mpz_sgn(c->q) > 0) {
        if (!sg_bern_exp1(&c->rs) || c->rs.rc != 0) {
            return 0;
        }
        mpz_sub_ui(c->q, c->q, 1);
    }
    if (mpz_sgn(c->r) == 0) {
        return 1;
    }
    for (unsigned long k = 1;; k++) {
        mpz_mul_ui(c->m, den, k);
        sg_mpz_below(c, c->u, c->m);
        if (c->rs.rc != 0) {
            return 0;
        }
        if (mpz_cmp(c->u, c->r) >= 0) {
            return (int)(k & 1);
        }
    }
}

static int sg_dlaplace(struct sg_src *rs, uint64_t t, int64_t *out)
{
    for (;;) {
        uint64_t u = (uint64_t)sg_below(rs, t);
        if (rs->rc != 0) {
            return rs->rc;
        }
        if (!sg_bern_exp_small(rs, u, t)) {
            if (rs->rc != 0) {
                return rs->rc;
            }
            continue;
        }
        uint64_t v = 0;
        while (sg_bern_exp1(rs)) {
            v++;
        }
        if (rs->rc != 0) {
            return rs->rc;
        }
        if (v > ((uint64_t)INT64_MAX - u) / t) {
            return fs_err_set(rs->err, FS_ERANGE, "seeded discrete Laplace: sample exceeds int64");
        }
        uint64_t x = u + t * v;
        int neg = (int)(sg_take(rs, 1) & 1);
        if (rs->rc != 0) {
            return rs->rc;
        }
        if (neg && x == 0) {
            continue;
        }
        *out = neg ? -(int64_t)x : (int64_t)x;
        return 0;
    }
}

static void sg_wipe_clear(mpz_t z)
{
    OPENSSL_cleanse(z->_mp_d, (size_t)z->_mp_alloc * sizeof(mp_limb_t));
    mpz_clear(z);
}

/* sigma^2 exactly as num/den (see lib/dp/dgauss.c). */
static void sg_sigma2(double sigma, mpz_t num, mpz_t den)
{
    int e = 0;
    double m = frexp(sigma, &e);
    uint64_t mi = (uint64_t)ldexp(m, 53);
    int ex = e - 53;
    int tz = __builtin_ctzll(mi);

    mi >>= tz;
    ex += tz;
    u128 sq = (u128)mi * mi;
    mpz_set_ui(num, (unsigned long)(uint64_t)(sq >> 64));
    mpz_mul_2exp(num, num, 64);
    mpz_add_ui(num, num, (unsigned long)(uint64_t)sq);
    mpz_set_ui(den, 1);
    if (ex >= 0) {
        mpz_mul_2exp(num, num, (mp_bitcnt_t)(2 * ex));
    } else {
        mpz_mul_2exp(den, den, (mp_bitcnt_t)(-2 * ex));
    }
}

static int sg_prepare(struct sg_ctx *c)
{
    mpz_gcd(c->q, c->n, c->d);
    mpz_divexact(c->n, c->n, c->q);
    mpz_divexact(c->d, c->d, c->q);
    mpz_fdiv_q(c->q, c->n, c->d);
    mpz_sqrt(c->q, c->q);
    mpz_add_ui(c->q, c->q, 1);
    if (mpz_sizeinbase(c->q, 2) > 60) {
        return fs_err_set(c->rs.err, FS_EINVAL, "seeded discrete Gaussian: sigma too large");
    }
    c->t = (uint64_t)mpz_get_ui(c->q);
    mpz_mul_ui(c->dt, c->d, c->t);
    mpz_mul(c->den, c->n, c->d);
    mpz_mul_ui(c->den, c->den, c->t);
    mpz_mul_ui(c->den, c->den, c->t);
    mpz_mul_2exp(c->den, c->den, 1);
    return 0;
}

static int sg_one(struct sg_ctx *c, int64_t *out)
{
    for (;;) {
        int64_t y = 0;
        int rc = sg_dlaplace(&c->rs, c->t, &y);
        if (rc != 0) {
            return rc;
        }
        uint64_t ay = y < 0 ? (uint64_t)0 - (uint64_t)y : (uint64_t)y;
        mpz_mul_ui(c->a, c->dt, ay);
        mpz_sub(c->a, c->a, c->n);
        mpz_mul(c->a, c->a, c->a);
        int keep = sg_bern_exp_mpz(c, c->a, c->den);
        if (c->rs.rc != 0) {
            return c->rs.rc;
        }
        if (keep) {
            *out = y;
            return 0;
        }
    }
}

int fs_fedpower_noise_from_seed(const uint8_t seed[32], double sigma, int64_t *out, size_t n,
                                struct fs_err *err)
{
    /* Domain separation from any other use of the same 32 bytes as a key. */
    static const uint8_t iv[16] = {'f', 'e', 'd', 'p', 'o', 'w', 'e', 'r',
                                   '-', 'n', 'o', 'i', 's', 'e', 0,   1};
    struct sg_ctx c;
    int rc;

    if (seed == NULL || (n > 0 && out == NULL)) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_noise_from_seed: NULL argument");
    }
    if (!isfinite(sigma) || sigma < SG_SIGMA_MIN || sigma > SG_SIGMA_MAX) {
        return fs_err_set(err, FS_EINVAL,
                          "fs_fedpower_noise_from_seed: sigma %g outside [2^-20, 2^52]", sigma);
    }
    memset(&c, 0, sizeof c);
    c.rs.pos = SG_RBUF;
    c.rs.err = err;
    rc = fs_prg_new(&c.rs.prg, seed, iv, err);
    if (rc != 0) {
        return rc;
    }
    mpz_init2(c.n, SG_BITS);
    mpz_init2(c.d, SG_BITS);
    mpz_init2(c.dt, SG_BITS);
    mpz_init2(c.den, SG_BITS);
    mpz_init2(c.a, SG_BITS);
    mpz_init2(c.q, SG_BITS);
    mpz_init2(c.r, SG_BITS);
    mpz_init2(c.u, SG_BITS);
    mpz_init2(c.m, SG_BITS);
    sg_sigma2(sigma, c.n, c.d);
    rc = sg_prepare(&c);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = sg_one(&c, &out[i]);
    }
    OPENSSL_cleanse(c.rs.buf, sizeof c.rs.buf);
    fs_prg_free(c.rs.prg);
    mpz_clear(c.n);
    mpz_clear(c.d);
    mpz_clear(c.dt);
    mpz_clear(c.den);
    sg_wipe_clear(c.a);
    sg_wipe_clear(c.q);
    sg_wipe_clear(c.r);
    sg_wipe_clear(c.u);
    sg_wipe_clear(c.m);
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
