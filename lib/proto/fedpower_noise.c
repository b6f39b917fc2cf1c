/* Noise for the power-method family.
 *
 * 1. Seeded noise for the seed mode of the noise exchange: the party expands
 *    a fresh 256-bit seed into its noise, the server regenerates the noise of
 *    every seed it recovers, and both must get the same integers. The exact
 *    sampler of lib/dp (fs_dgauss_sample_prg, integer decisions only) is
 *    driven by AES-256-CTR keystreams of the seed, one per block of
 *    FS_FEDPOWER_NOISE_BLOCK values, so the output is identical on every
 *    machine and the server can regenerate the blocks on all its cores.
 *
 * 2. Grid noise: every noise that is not secret-shared is also discrete: the
 *    values are rounded to 2^-f, integer noise N_Z(0, (sigma 2^f)^2) from
 *    the CSPRNG (fs_dgauss_sample) is added, and the sum is converted back.
 *    Adding continuous or integer noise to an unrounded double would expose
 *    the value's low bits. */
#include <limits.h>
#include <math.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/prg.h"
#include "../dp/dgauss.h"
#include "fedpower_internal.h"

/* Block `blk` of the seeded noise: n <= FS_FEDPOWER_NOISE_BLOCK values. */
static int noise_block(const uint8_t seed[32], double sigma, uint64_t blk, int64_t *out, size_t n,
                       struct fs_err *err)
{
    /* Domain separation from any other use of the same 32 bytes as a key,
     * the block index, and a 64-bit counter no block can exhaust. */
    uint8_t iv[16] = {'f',
                      'p',
                      'n',
                      'z',
                      (uint8_t)(blk >> 24),
                      (uint8_t)(blk >> 16),
                      (uint8_t)(blk >> 8),
                      (uint8_t)blk,
                      0,
                      0,
                      0,
                      0,
                      0,
                      0,
                      0,
                      0};
    fs_prg *prg = NULL;
    int rc = fs_prg_new(&prg, seed, iv, err);

    if (rc == 0) {
        rc = fs_dgauss_sample_prg(prg, sigma, out, n, err);
    }
    fs_prg_free(prg);
    return rc;
}

static int check_len(size_t n, struct fs_err *err)
{
    if ((uint64_t)n / FS_FEDPOWER_NOISE_BLOCK >= ((uint64_t)1 << 32)) {
        return fs_err_set(err, FS_ERANGE, "seeded noise: %zu values is too many", n);
    }
    return 0;
}

int fs_fedpower_noise_from_seed(const uint8_t seed[32], double sigma, int64_t *out, size_t n,
                                struct fs_err *err)
{
    int rc;

    if (seed == NULL || (n > 0 && out == NULL)) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_noise_from_seed: NULL argument");
    }
    rc = check_len(n, err);
    for (size_t off = 0, blk = 0; rc == 0 && off < n; off += FS_FEDPOWER_NOISE_BLOCK, blk++) {
        size_t m = n - off < FS_FEDPOWER_NOISE_BLOCK ? n - off : FS_FEDPOWER_NOISE_BLOCK;
        rc = noise_block(seed, sigma, blk, out + off, m, err);
    }
    return rc;
}

/* ---- regeneration on several threads ------------------------------------ */

struct remove_work {
    const uint8_t (*seeds)[32];
    const double *sigmas;
    size_t n;
    size_t blocks; /* per seed */
    size_t items;  /* k blocks */
    size_t next;   /* under mu */
    int failed;    /* under mu */
    struct fs_err err;
    pthread_mutex_t mu;
};

struct remove_thread {
    struct remove_work *w;
    uint64_t *acc; /* n: this thread's sum of noise blocks */
    pthread_t tid;
};

static void *remove_worker(void *arg)
{
    struct remove_thread *t = arg;
    struct remove_work *w = t->w;
    int64_t tmp[FS_FEDPOWER_NOISE_BLOCK];
    struct fs_err err;

    fs_err_clear(&err);
    for (;;) {
        size_t item;

        pthread_mutex_lock(&w->mu);
        item = w->failed ? w->items : w->next++;
        pthread_mutex_unlock(&w->mu);
        if (item >= w->items) {
            break;
        }
        size_t q = item / w->blocks;
        size_t blk = item % w->blocks;
        size_t off = blk * FS_FEDPOWER_NOISE_BLOCK;
        size_t m = w->n - off < FS_FEDPOWER_NOISE_BLOCK ? w->n - off : FS_FEDPOWER_NOISE_BLOCK;
        int rc = noise_block(w->seeds[q], w->sigmas[q], blk, tmp, m, &err);
        if (rc != 0) {
            pthread_mutex_lock(&w->mu);
            if (!w->failed) {
                w->failed = 1;
                w->err = err;
            }
            pthread_mutex_unlock(&w->mu);
            break;
        }
        for (size_t i = 0; i < m; i++) {
            t->acc[off + i] += (uint64_t)tmp[i];
        }
    }
    OPENSSL_cleanse(tmp, sizeof tmp);
    return NULL;
}

int fs_fedpower_noise_remove(const uint8_t (*seeds)[32], const double *sigmas, size_t k,
                             uint64_t *v, size_t n, unsigned threads, struct fs_err *err)
{
    enum { MAX_THREADS = 64 };
    struct remove_work w;
    struct remove_thread t[MAX_THREADS];
    unsigned nt = 0, started = 0;
    int rc;

    if (k == 0 || n == 0) {
        return 0;
    }
    if (seeds == NULL || sigmas == NULL || v == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_noise_remove: NULL argument");
    }
    rc = check_len(n, err);
    if (rc != 0) {
        return rc;
    }
    memset(&w, 0, sizeof w);
    w.seeds = seeds;
    w.sigmas = sigmas;
    w.n = n;
    w.blocks = (n + FS_FEDPOWER_NOISE_BLOCK - 1) / FS_FEDPOWER_NOISE_BLOCK;
    w.items = k * w.blocks;
    threads = threads == 0 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    if (threads > w.items) {
        threads = (unsigned)w.items;
    }
    for (nt = 0; nt < threads; nt++) {
        t[nt].w = &w;
        t[nt].acc = calloc(n, sizeof *t[nt].acc);
        if (t[nt].acc == NULL) {
            break; /* fewer threads */
        }
    }
    if (nt == 0) {
        return fs_err_set(err, FS_ENOMEM, "seeded noise: out of memory");
    }
    if (pthread_mutex_init(&w.mu, NULL) != 0) {
        rc = fs_err_set(err, FS_ENOMEM, "seeded noise: cannot create a mutex");
        goto out;
    }
    /* the calling thread works too; helpers that fail to start leave it more */
    while (started + 1 < nt &&
           pthread_create(&t[started + 1].tid, NULL, remove_worker, &t[started + 1]) == 0) {
        started++;
    }
    remove_worker(&t[0]);
    for (unsigned i = 1; i <= started; i++) {
        pthread_join(t[i].tid, NULL);
    }
    pthread_mutex_destroy(&w.mu);
    if (w.failed) {
        if (err != NULL) {
            *err = w.err;
        }
        rc = w.err.code != 0 ? w.err.code : FS_ECRYPTO;
        goto out;
    }
    for (unsigned i = 0; i < nt; i++) {
        for (size_t j = 0; j < n; j++) {
            v[j] -= t[i].acc[j];
        }
    }
out:
    for (unsigned i = 0; i < nt; i++) {
        OPENSSL_cleanse(t[i].acc, n * sizeof *t[i].acc);
        free(t[i].acc);
    }
    return rc;
}

/* ---- grid noise ----------------------------------------------------------- */

static int grid_noise(double *y, size_t n, int frac_bits, double sigma, const uint8_t *seed,
                      struct fs_err *err);

int fpw_grid_noise(double *y, size_t n, int frac_bits, double sigma, struct fs_err *err)
{
    return grid_noise(y, n, frac_bits, sigma, NULL, err);
}

int fpw_grid_noise_seeded(double *y, size_t n, int frac_bits, double sigma, const uint8_t seed[32],
                          struct fs_err *err)
{
    return grid_noise(y, n, frac_bits, sigma, seed, err);
}

/* fpw_grid_noise, the samples from the CSPRNG or (seed) regenerable from it. */
static int grid_noise(double *y, size_t n, int frac_bits, double sigma, const uint8_t *seed,
                      struct fs_err *err)
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
    rc = seed != NULL ? fs_fedpower_noise_from_seed(seed, s_int, nz, n, err)
                      : fs_dgauss_sample(s_int, nz, n, err);
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

static int real_noise(double *y, size_t n, double sigma, const uint8_t *seed, struct fs_err *err);

int fpw_real_noise(double *y, size_t n, double sigma, struct fs_err *err)
{
    return real_noise(y, n, sigma, NULL, err);
}

int fpw_real_noise_seeded(double *y, size_t n, double sigma, const uint8_t seed[32],
                          struct fs_err *err)
{
    return real_noise(y, n, sigma, seed, err);
}

static int real_noise(double *y, size_t n, double sigma, const uint8_t *seed, struct fs_err *err)
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
    return grid_noise(y, n, f, sigma, seed, err);
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
