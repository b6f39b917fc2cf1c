/* The reference exact discrete Gaussian sampler (the fast one is
 * dgauss_fast.c; this one stays for sigma below 16, the rational interface,
 * and as the yardstick of the tests and benchmarks), Canonne, Kamath &
 * Steinke 2020
 * ("The Discrete Gaussian for Differential Privacy"):
 *   Algorithm 1  Bernoulli(exp(-gamma)) for rational gamma,
 *   Algorithm 2  discrete Laplace (here with s = 1),
 *   Algorithm 3  discrete Gaussian by rejection from the discrete Laplace
 *                with t = floor(sigma) + 1.
 * Every decision is a comparison of integers: a uniform integer in [0, m)
 * against an integer numerator. The discrete Laplace part needs at most
 * 128-bit products; the Gaussian acceptance test works with the exact
 * rational gamma = (|Y| D t - N)^2 / (2 N D t^2) for sigma^2 = N / D in GMP.
 *
 * Randomness: bytes from the OS CSPRNG (fs_rand_bytes) are drawn in blocks
 * into a buffer owned by one call and wiped before it returns; bounded
 * integers are made from them by masking to the bit length of the bound and
 * rejecting (no modulo bias). A call to fs_rand_below per draw would cost one
 * RAND_bytes call (~0.8 us) per draw, and a sample takes ~20 draws.
 *
 * The sampler is not constant-time: its running time depends on the sample
 * (as in the paper). The samples are secret noise; scratch integers are
 * wiped (best effort: GMP may have copied limbs when growing a number, which
 * the generous initial sizes below make unlikely). */
#include "dgauss.h"

#include <gmp.h>
#include <limits.h>
#include <math.h>
#include <openssl/crypto.h>
#include <string.h>

#include "../crypto/prg.h"
#include "../crypto/rand.h"

__extension__ typedef unsigned __int128 u128;

/* Largest sigma for fs_dgauss_sample: keeps t, |Y| and the products below
 * far from 64-bit limits. The smallest is only a sanity floor. */
#define DG_SIGMA_MAX 4503599627370496.0  /* 2^52 */
#define DG_SIGMA_MIN 9.5367431640625e-07 /* 2^-20 */

#define RBUF         2048
#define SCRATCH_BITS 1024

struct rsrc {
    fs_prg *prg; /* NULL: the OS CSPRNG; else this deterministic stream */
    unsigned char buf[RBUF];
    size_t pos; /* next unread byte; RBUF = empty */
    struct fs_err *err;
    int rc; /* first CSPRNG failure, sticky */
};

static void rs_init(struct rsrc *rs, struct fs_err *err)
{
    rs->prg = NULL;
    rs->pos = RBUF;
    rs->err = err;
    rs->rc = 0;
}

static void rs_wipe(struct rsrc *rs)
{
    OPENSSL_cleanse(rs->buf, sizeof rs->buf);
    rs->pos = RBUF;
}

/* n <= 16 bytes, little endian into a u128. On CSPRNG failure rs->rc is set
 * and zeros come back; every caller checks rs->rc before using a result. */
static u128 rs_take(struct rsrc *rs, size_t n)
{
    u128 x = 0;

    for (size_t i = 0; i < n; i++) {
        if (rs->pos == RBUF) {
            if (rs->rc != 0) {
                return 0;
            }
            rs->rc = rs->prg != NULL ? fs_prg_bytes(rs->prg, rs->buf, RBUF, rs->err)
                                     : fs_rand_bytes(rs->buf, RBUF, rs->err);
            if (rs->rc != 0) {
                return 0;
            }
            rs->pos = 0;
        }
        x |= (u128)rs->buf[rs->pos] << (8 * i);
        rs->buf[rs->pos] = 0;
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

/* Uniform in [0, bound), bound >= 1: mask to bitlen(bound - 1) bits, reject
 * values >= bound (fewer than 2 tries expected). */
static u128 rs_below(struct rsrc *rs, u128 bound)
{
    if (bound <= 1) {
        return 0;
    }
    unsigned bits = bitlen128(bound - 1);
    size_t nbytes = (bits + 7) / 8;
    u128 mask = bits == 128 ? ~(u128)0 : (((u128)1 << bits) - 1);

    for (;;) {
        u128 x = rs_take(rs, nbytes) & mask;
        if (rs->rc != 0) {
            return 0;
        }
        if (x < bound) {
            return x;
        }
    }
}

/* ---- Algorithm 1: Bernoulli(exp(-gamma)) -------------------------------- */

/* Bernoulli(exp(-num/den)) for 0 <= num <= den (gamma in [0, 1]): count the
 * run K of successes of Bernoulli(gamma/k), k = 1, 2, ...; the first failure
 * at an odd k means 1. Bernoulli(num / (den k)) is [uniform(den k) < num]. */
static int bern_exp_small(struct rsrc *rs, uint64_t num, uint64_t den)
{
    uint64_t k = 1;

    if (num == 0) {
        return 1;
    }
    for (;;) {
        u128 u = rs_below(rs, (u128)den * k);
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

/* Bernoulli(exp(-1)). */
static int bern_exp1(struct rsrc *rs)
{
    return bern_exp_small(rs, 1, 1);
}

/* Bernoulli(exp(-num/den)) for any num >= 0, den > 0 (uint64). */
static int bern_exp_u64(struct rsrc *rs, uint64_t num, uint64_t den)
{
    uint64_t q = num / den;
    uint64_t r = num % den;

    for (uint64_t i = 0; i < q; i++) {
        if (!bern_exp1(rs) || rs->rc != 0) {
            return 0;
        }
    }
    return bern_exp_small(rs, r, den);
}

/* Scratch for the GMP part of Algorithm 3. */
struct dg_ctx {
    struct rsrc rs;
    uint64_t t; /* floor(sigma) + 1 */
    mpz_t n;    /* sigma^2 = n / d, in lowest terms */
    mpz_t d;
    mpz_t dt;      /* d t */
    mpz_t den;     /* 2 n d t^2: the denominator of gamma */
    mpz_t a, q, r; /* per-sample secrets */
    mpz_t u, m;
};

/* Uniform in [0, bound), bound >= 1, into z: whole random limbs, masked to
 * the bit length of bound, rejected when >= bound. */
static void mpz_below(struct dg_ctx *c, mpz_t z, const mpz_t bound)
{
    size_t bits = mpz_sizeinbase(bound, 2);
    size_t limbs = (bits + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS;

    for (;;) {
        mp_limb_t *p = mpz_limbs_write(z, (mp_size_t)limbs);
        for (size_t i = 0; i < limbs; i++) {
            p[i] = (mp_limb_t)rs_take(&c->rs, sizeof(mp_limb_t));
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

/* Bernoulli(exp(-num/den)), num >= 0, den > 0 multiprecision. num is
 * clobbered (it is c->a). */
static int bern_exp_mpz(struct dg_ctx *c, mpz_t num, const mpz_t den)
{
    mpz_fdiv_qr(c->q, c->r, num, den);
    while (mpz_sgn(c->q) > 0) {
        if (!bern_exp1(&c->rs) || c->rs.rc != 0) {
            return 0;
        }
        mpz_sub_ui(c->q, c->q, 1);
    }
    if (mpz_sgn(c->r) == 0) {
        return 1;
    }
    for (unsigned long k = 1;; k++) {
        mpz_mul_ui(c->m, den, k);
        mpz_below(c, c->u, c->m);
        if (c->rs.rc != 0) {
            return 0;
        }
        if (mpz_cmp(c->u, c->r) >= 0) {
            return (int)(k & 1);
        }
    }
}

/* ---- Algorithm 2: discrete Laplace, P(x) ~ exp(-|x|/t) ------------------ */

static int dlaplace(struct rsrc *rs, uint64_t t, int64_t *out)
{
    for (;;) {
        uint64_t u = (uint64_t)rs_below(rs, t);
        if (rs->rc != 0) {
            return rs->rc;
        }
        if (!bern_exp_small(rs, u, t)) {
            if (rs->rc != 0) {
                return rs->rc;
            }
            continue;
        }
        uint64_t v = 0;
        while (bern_exp1(rs)) {
            v++;
        }
        if (rs->rc != 0) {
            return rs->rc;
        }
        /* X = U + t V; V > 2^11 has probability e^-2048, but stay exact. */
        if (v > ((uint64_t)INT64_MAX - u) / t) {
            return fs_err_set(rs->err, FS_ERANGE, "discrete Laplace: sample exceeds int64");
        }
        uint64_t x = u + t * v;
        int neg = (int)(rs_take(rs, 1) & 1);
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

/* ---- Algorithm 3: discrete Gaussian ------------------------------------- */

static void ctx_init(struct dg_ctx *c, struct fs_err *err)
{
    rs_init(&c->rs, err);
    mpz_init2(c->n, SCRATCH_BITS);
    mpz_init2(c->d, SCRATCH_BITS);
    mpz_init2(c->dt, SCRATCH_BITS);
    mpz_init2(c->den, SCRATCH_BITS);
    mpz_init2(c->a, SCRATCH_BITS);
    mpz_init2(c->q, SCRATCH_BITS);
    mpz_init2(c->r, SCRATCH_BITS);
    mpz_init2(c->u, SCRATCH_BITS);
    mpz_init2(c->m, SCRATCH_BITS);
}

static void mpz_wipe_clear(mpz_t z)
{
    /* _mp_d/_mp_alloc are the documented layout of mpz_t in gmp.h. */
    OPENSSL_cleanse(z->_mp_d, (size_t)z->_mp_alloc * sizeof(mp_limb_t));
    mpz_clear(z);
}

static void ctx_free(struct dg_ctx *c)
{
    rs_wipe(&c->rs);
    mpz_clear(c->n);
    mpz_clear(c->d);
    mpz_clear(c->dt);
    mpz_clear(c->den);
    mpz_wipe_clear(c->a);
    mpz_wipe_clear(c->q);
    mpz_wipe_clear(c->r);
    mpz_wipe_clear(c->u);
    mpz_wipe_clear(c->m);
}

/* With c->n, c->d set (> 0): reduce, t = floor(sqrt(n/d)) + 1 (exact:
 * floor(sqrt(x)) = floor(sqrt(floor(x)))), and the constants of gamma. */
static int ctx_prepare(struct dg_ctx *c)
{
    mpz_gcd(c->q, c->n, c->d);
    mpz_divexact(c->n, c->n, c->q);
    mpz_divexact(c->d, c->d, c->q);
    mpz_fdiv_q(c->q, c->n, c->d);
    mpz_sqrt(c->q, c->q);
    mpz_add_ui(c->q, c->q, 1);
    if (mpz_sizeinbase(c->q, 2) > 60) {
        return fs_err_set(c->rs.err, FS_EINVAL, "discrete Gaussian: sigma too large");
    }
    c->t = (uint64_t)mpz_get_ui(c->q);
    mpz_mul_ui(c->dt, c->d, c->t);
    mpz_mul(c->den, c->n, c->d);
    mpz_mul_ui(c->den, c->den, c->t);
    mpz_mul_ui(c->den, c->den, c->t);
    mpz_mul_2exp(c->den, c->den, 1);
    return 0;
}

/* One sample: Y from the discrete Laplace with scale t, accepted with
 * probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)). */
static int dgauss_one(struct dg_ctx *c, int64_t *out)
{
    for (;;) {
        int64_t y = 0;
        int rc = dlaplace(&c->rs, c->t, &y);
        if (rc != 0) {
            return rc;
        }
        uint64_t ay = y < 0 ? (uint64_t)0 - (uint64_t)y : (uint64_t)y;
        mpz_mul_ui(c->a, c->dt, ay);
        mpz_sub(c->a, c->a, c->n);
        mpz_mul(c->a, c->a, c->a);
        int keep = bern_exp_mpz(c, c->a, c->den);
        if (c->rs.rc != 0) {
            return c->rs.rc;
        }
        if (keep) {
            *out = y;
            return 0;
        }
    }
}

static int dgauss_run(struct dg_ctx *c, int64_t *out, size_t n)
{
    int rc = ctx_prepare(c);

    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = dgauss_one(c, &out[i]);
    }
    return rc;
}

int fs_dgauss_sample_rational(uint64_t sigma2_num, uint64_t sigma2_den, int64_t *out, size_t n,
                              struct fs_err *err)
{
    struct dg_ctx c;
    int rc;

    if (sigma2_num == 0 || sigma2_den == 0) {
        return fs_err_set(err, FS_EINVAL, "fs_dgauss_sample_rational: sigma^2 = %llu/%llu",
                          (unsigned long long)sigma2_num, (unsigned long long)sigma2_den);
    }
    if (n > 0 && out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_dgauss_sample_rational: out is NULL");
    }
    ctx_init(&c, err);
    mpz_set_ui(c.n, (unsigned long)sigma2_num);
    mpz_set_ui(c.d, (unsigned long)sigma2_den);
    rc = dgauss_run(&c, out, n);
    ctx_free(&c);
    return rc;
}

/* sigma^2 exactly: sigma = M 2^e with M < 2^53 an integer, so
 * sigma^2 = M^2 2^(2e), M^2 < 2^106. No approximation at all. */
static void sigma2_exact(double sigma, mpz_t num, mpz_t den)
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

int fs_dgauss_sample_reference(double sigma, int64_t *out, size_t n, struct fs_err *err)
{
    struct dg_ctx c;
    int rc;

    if (!isfinite(sigma) || sigma < DG_SIGMA_MIN || sigma > DG_SIGMA_MAX) {
        return fs_err_set(err, FS_EINVAL,
                          "fs_dgauss_sample_reference: sigma %g outside [2^-20, 2^52]", sigma);
    }
    if (n > 0 && out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_dgauss_sample_reference: out is NULL");
    }
    ctx_init(&c, err);
    sigma2_exact(sigma, c.n, c.d);
    rc = dgauss_run(&c, out, n);
    ctx_free(&c);
    return rc;
}

int fs_dgauss_bernoulli_exp(uint64_t gamma_num, uint64_t gamma_den, int *out, size_t n,
                            struct fs_err *err)
{
    struct rsrc rs;

    if (gamma_den == 0) {
        return fs_err_set(err, FS_EINVAL, "fs_dgauss_bernoulli_exp: denominator is 0");
    }
    if (n > 0 && out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_dgauss_bernoulli_exp: out is NULL");
    }
    rs_init(&rs, err);
    for (size_t i = 0; i < n && rs.rc == 0; i++) {
        out[i] = bern_exp_u64(&rs, gamma_num, gamma_den);
    }
    rs_wipe(&rs);
    return rs.rc;
}

int fs_dlaplace_sample(uint64_t t, int64_t *out, size_t n, struct fs_err *err)
{
    struct rsrc rs;
    int rc = 0;

    if (t == 0 || t > ((uint64_t)1 << 60)) {
        return fs_err_set(err, FS_EINVAL, "fs_dlaplace_sample: scale %llu outside [1, 2^60]",
                          (unsigned long long)t);
    }
    if (n > 0 && out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_dlaplace_sample: out is NULL");
    }
    rs_init(&rs, err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = dlaplace(&rs, t, &out[i]);
    }
    rs_wipe(&rs);
    return rc;
}

int fs_dgauss_sample_reference_prg(fs_prg *prg, double sigma, int64_t *out, size_t n,
                                   struct fs_err *err)
{
    struct dg_ctx c;
    int rc;

    if (prg == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_dgauss_sample_reference_prg: prg is NULL");
    }
    if (!isfinite(sigma) || sigma < DG_SIGMA_MIN || sigma > DG_SIGMA_MAX) {
        return fs_err_set(err, FS_EINVAL,
                          "fs_dgauss_sample_reference_prg: sigma %g outside [2^-20, 2^52]", sigma);
    }
    if (n > 0 && out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_dgauss_sample_reference_prg: out is NULL");
    }
    ctx_init(&c, err);
    c.rs.prg = prg;
    sigma2_exact(sigma, c.n, c.d);
    rc = dgauss_run(&c, out, n);
    ctx_free(&c);
    return rc;
}
