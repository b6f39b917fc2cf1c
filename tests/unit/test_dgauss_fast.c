/* The fast exact discrete Gaussian sampler (lib/dp/dgauss_fast.c) and the
 * block-wise regeneration of seeded noise (fs_fedpower_noise_remove):
 *  - chi-square against the exact pmf over 10^7 samples for each of four
 *    sigma (16 and 333.3 per integer; 1.37 * 2^20 and 7.0368744177664e11,
 *    the party's sigma of the fedpower-utility configuration of
 *    bench/run.sh, in bins of x / sigma), residues of x modulo 2, 3 and 64
 *    (lattice effects at large sigma), tails beyond 3, 4, 5 sigma, mean,
 *    variance and fourth moment;
 *  - the same distribution as the reference sampler (two-sample chi-square);
 *  - the rare exact paths (inversion at 128+ bits, the multiprecision block,
 *    comparisons bit by bit, the first coin compared exactly) forced on every
 *    sample, against the exact pmf; the bounds on gamma behind the first
 *    coin checked exactly on every proposal; the batch's branch-free pass
 *    against the general code, sample for sample;
 *  - the previous map (fs_dgauss_sample_prg_v1) against the exact pmf;
 *  - known answers for a fixed stream and a fixed seed (the map from seed to
 *    noise must not change silently: party and server must agree), and
 *    determinism;
 *  - regeneration of several parties' seeded noise on 1, 2 and 7 threads:
 *    identical, and equal to what the parties draw.
 * Thresholds: chi-square p ~ 1e-6 and 5 standard errors. Under sanitizers
 * or FS_TEST_QUICK the sample counts are 10x smaller. */
#include "crypto/prg.h"
#include "dp/dgauss.h"
#include "proto/fedpower.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Upper p ~ 1e-6 point of chi-square with k degrees of freedom
 * (Wilson-Hilferty). */
static double chi2_crit(double k)
{
    double z = 4.75;
    double a = 2.0 / (9.0 * k);
    return k * pow(1.0 - a + z * sqrt(a), 3.0);
}

static double phi(double z)
{
    return 0.5 * erfc(-z / sqrt(2.0));
}

/* Bins and their exact probabilities: per integer |x| <= 6 sigma for small
 * sigma (with two tail bins), else 48 bins of x / sigma in [-6, 6) plus tails
 * (the discrete sums equal the continuous integrals from a - 1/2 to b - 1/2
 * to a relative 1 / (24 sigma^2)). */
struct bins {
    size_t k;
    double *p;
    int64_t *edge; /* bin i holds edge[i] <= x < edge[i + 1]; bins 0 and k-1 are the tails */
};

static int bins_make(struct bins *b, double sigma)
{
    if (sigma <= 1000) {
        long lim = (long)ceil(6 * sigma);
        long zl = (long)ceil(40 * sigma) + 2;
        long double z = 0;
        b->k = (size_t)(2 * lim + 1) + 2;
        b->p = calloc(b->k, sizeof *b->p);
        b->edge = calloc(b->k + 1, sizeof *b->edge);
        if (b->p == NULL || b->edge == NULL) {
            return -1;
        }
        for (long x = -zl; x <= zl; x++) {
            z += expl(-(long double)x * x / (2.0L * sigma * sigma));
        }
        b->edge[0] = INT64_MIN;
        for (long x = -lim; x <= lim + 1; x++) {
            b->edge[x + lim + 1] = x;
        }
        b->edge[b->k] = INT64_MAX;
        double inner = 0;
        for (long x = -lim; x <= lim; x++) {
            double p = (double)(expl(-(long double)x * x / (2.0L * sigma * sigma)) / z);
            b->p[x + lim + 1] = p;
            inner += p;
        }
        b->p[0] = b->p[b->k - 1] = (1.0 - inner) / 2;
        return 0;
    }
    b->k = 48 + 2;
    b->p = calloc(b->k, sizeof *b->p);
    b->edge = calloc(b->k + 1, sizeof *b->edge);
    if (b->p == NULL || b->edge == NULL) {
        return -1;
    }
    b->edge[0] = INT64_MIN;
    for (int i = 0; i <= 48; i++) {
        b->edge[i + 1] = (int64_t)ceil((-6.0 + 0.25 * i) * sigma);
    }
    b->edge[b->k] = INT64_MAX;
    for (size_t i = 0; i < b->k; i++) {
        double lo = i == 0 ? -INFINITY : ((double)b->edge[i] - 0.5) / sigma;
        double hi = i == b->k - 1 ? INFINITY : ((double)b->edge[i + 1] - 0.5) / sigma;
        b->p[i] = phi(hi) - phi(lo);
    }
    return 0;
}

static void bins_free(struct bins *b)
{
    free(b->p);
    free(b->edge);
}

static size_t bin_of(const struct bins *b, int64_t x)
{
    size_t lo = 0, hi = b->k; /* edge[lo] <= x < edge[hi] */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (x >= b->edge[mid]) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Chi-square of counts against probabilities, pooling bins expected below 5. */
static double chi2(const double *cnt, const double *p, size_t k, double n, size_t *df)
{
    double c = 0, pc = 0, pp = 0;
    size_t used = 0;

    for (size_t i = 0; i < k; i++) {
        pc += cnt[i];
        pp += p[i];
        if (pp * n >= 5 || i == k - 1) {
            c += (pc - pp * n) * (pc - pp * n) / (pp * n);
            used++;
            pc = pp = 0;
        }
    }
    *df = used - 1;
    return c;
}

/* Goodness of fit of v against N_Z(0, sigma^2): bins, residues, tails, moments. */
static void check_fit(const int64_t *v, size_t n, double sigma, const char *what)
{
    struct bins b;
    double *cnt = NULL;
    size_t df = 0;

    if (bins_make(&b, sigma) != 0 || (cnt = calloc(b.k, sizeof *cnt)) == NULL) {
        CHECK(0);
        bins_free(&b);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        cnt[bin_of(&b, v[i])] += 1;
    }
    double c = chi2(cnt, b.p, b.k, (double)n, &df);
    CHECK_MSG(c < chi2_crit((double)df), "%s sigma %g: chi2 %.1f, %zu df (crit %.1f)", what, sigma,
              c, df, chi2_crit((double)df));
    free(cnt);
    bins_free(&b);

    /* residues: uniform when sigma is large against the modulus */
    const int mods[] = {2, 3, 64};
    for (size_t m = 0; m < 3 && sigma >= 1000; m++) {
        double rc[64] = {0}, rp[64];
        for (size_t i = 0; i < n; i++) {
            int64_t r = v[i] % mods[m];
            rc[r < 0 ? r + mods[m] : r] += 1;
        }
        for (int i = 0; i < mods[m]; i++) {
            rp[i] = 1.0 / mods[m];
        }
        c = chi2(rc, rp, (size_t)mods[m], (double)n, &df);
        CHECK_MSG(c < chi2_crit((double)df), "%s sigma %g: x mod %d chi2 %.1f", what, sigma,
                  mods[m], c);
    }

    /* tails and moments (of x / sigma; sigma >= 16, so the discrete variance
     * is sigma^2 to far below double precision) */
    double s1 = 0, s2 = 0, s4 = 0, t3 = 0, t4 = 0, t5 = 0;
    for (size_t i = 0; i < n; i++) {
        double z = (double)v[i] / sigma;
        s1 += z;
        s2 += z * z;
        s4 += z * z * z * z;
        t3 += fabs(z) > 3;
        t4 += fabs(z) > 4;
        t5 += fabs(z) > 5;
    }
    double dn = (double)n;
    CHECK_NEAR(s1 / dn, 0.0, 5 / sqrt(dn));
    CHECK_NEAR(s2 / dn, 1.0, 5 * sqrt(2.0 / dn));
    CHECK_NEAR(s4 / dn, 3.0, 5 * sqrt(96.0 / dn));
    if (sigma >= 1000) {
        const double pt[3] = {2 * phi(-3), 2 * phi(-4), 2 * phi(-5)};
        const double ct[3] = {t3, t4, t5};
        for (int i = 0; i < 3; i++) {
            CHECK_MSG(fabs(ct[i] / dn - pt[i]) <= 5 * sqrt(pt[i] / dn) + 3.0 / dn,
                      "%s sigma %g: tail beyond %d sigma %.3g, expected %.3g", what, sigma, i + 3,
                      ct[i] / dn, pt[i]);
        }
    }
}

static int64_t *alloc_v(size_t n)
{
    int64_t *v = malloc(n * sizeof *v);
    CHECK(v != NULL);
    return v;
}

static void test_exact_pmf(void)
{
    /* 7.0368744177664e11: the party's sigma in the fedpower-utility
     * configuration of bench/run.sh (0.1 * 0.05 * 2^47) */
    const double sig[] = {16.0, 1000.0 / 3, 1.37 * 1048576.0, 7.0368744177664e11};
    size_t n = t_scale(10000000);
    int64_t *v = alloc_v(n);
    uint8_t key[32] = {3};
    struct fs_err err = {0};

    for (size_t k = 0; v != NULL && k < sizeof sig / sizeof sig[0]; k++) {
        fs_prg *prg = NULL;
        key[1] = (uint8_t)k;
        CHECK_OK(fs_prg_new(&prg, key, NULL, &err), &err);
        CHECK_OK(fs_dgauss_sample_prg(prg, sig[k], v, n, &err), &err);
        check_fit(v, n, sig[k], "prg");
        fs_prg_free(prg);
    }
    /* the CSPRNG entry point */
    if (v != NULL) {
        CHECK_OK(fs_dgauss_sample(5.5e9, v, n / 4, &err), &err);
        check_fit(v, n / 4, 5.5e9, "csprng");
    }
    free(v);
}

/* Two-sample chi-square between the fast and the reference sampler. */
static void test_same_as_reference(void)
{
    const double sig[] = {20.5, 7.3e11};
    size_t n = t_scale(2000000);
    int64_t *a = alloc_v(n), *r = alloc_v(n);
    struct fs_err err = {0};

    for (size_t k = 0; a != NULL && r != NULL && k < 2; k++) {
        struct bins b;
        double *ca = NULL, *cr = NULL;
        if (bins_make(&b, sig[k]) != 0) {
            CHECK(0);
            break;
        }
        ca = calloc(b.k, sizeof *ca);
        cr = calloc(b.k, sizeof *cr);
        CHECK_OK(fs_dgauss_sample(sig[k], a, n, &err), &err);
        CHECK_OK(fs_dgauss_sample_reference(sig[k], r, n, &err), &err);
        if (ca != NULL && cr != NULL) {
            for (size_t i = 0; i < n; i++) {
                ca[bin_of(&b, a[i])] += 1;
                cr[bin_of(&b, r[i])] += 1;
            }
            double c = 0;
            size_t df = 0;
            for (size_t i = 0; i < b.k; i++) {
                if (ca[i] + cr[i] >= 10) {
                    c += (ca[i] - cr[i]) * (ca[i] - cr[i]) / (ca[i] + cr[i]);
                    df++;
                }
            }
            CHECK_MSG(c < chi2_crit((double)df - 1),
                      "sigma %g: fast vs reference chi2 %.1f, %zu bins", sig[k], c, df);
        }
        free(ca);
        free(cr);
        bins_free(&b);
    }
    free(a);
    free(r);
}

/* The paths of probability below 2^-50 (2^-22 for the first coin's exact
 * comparison), forced on every sample. */
static void test_rare_paths(void)
{
    const struct {
        int flags;
        double sigma;
        size_t n;
    } c[] = {
        {FS_DGAUSS_DEBUG_EXACT_CDT, 1e9, 300000},
        {FS_DGAUSS_DEBUG_EXACT_CDT, 16.0, 300000},
        {FS_DGAUSS_DEBUG_GENERIC, 2.5e10, 300000},
        {FS_DGAUSS_DEBUG_GENERIC, 17.0, 300000},
        {FS_DGAUSS_DEBUG_BITWISE, 3e8, 1000000},
        {FS_DGAUSS_DEBUG_BITWISE, 18.0, 1000000},
        {FS_DGAUSS_DEBUG_UNDECIDED, 7.0368744177664e11, 2000000},
        {FS_DGAUSS_DEBUG_UNDECIDED, 19.5, 1000000},
        {FS_DGAUSS_DEBUG_UNDECIDED | FS_DGAUSS_DEBUG_BITWISE, 4e6, 1000000},
        {FS_DGAUSS_DEBUG_EXACT_CDT | FS_DGAUSS_DEBUG_GENERIC | FS_DGAUSS_DEBUG_BITWISE, 5e5,
         100000},
    };
    struct fs_err err = {0};

    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        size_t n = t_scale(c[k].n);
        int64_t *v = alloc_v(n);
        if (v == NULL) {
            break;
        }
        fs_dgauss_debug_force(c[k].flags);
        CHECK_OK(fs_dgauss_sample(c[k].sigma, v, n, &err), &err);
        fs_dgauss_debug_force(0);
        char what[32];
        snprintf(what, sizeof what, "forced %d", c[k].flags);
        check_fit(v, n, c[k].sigma, what);
        free(v);
    }
}

/* The first acceptance coin is decided from g with g <= 2^64 gamma < g + 3:
 * verified exactly on every proposal, at sigma with M = 2^52 (R capped at
 * 2^64 - 1), the ends of the range and the power methods' sizes. */
static void test_gamma_bounds(void)
{
    const double sig[] = {16.0,
                          17.3,
                          1000.0 / 3,
                          1099511627776.0 /* 2^40 */,
                          7.0368744177664e11,
                          3.5e10,
                          9007199254740991.0 / 2.0 /* < 2^52 */,
                          4503599627370496.0 /* 2^52 */};
    size_t n = t_scale(1000000);
    int64_t *v = alloc_v(n);
    struct fs_err err = {0};

    for (size_t k = 0; v != NULL && k < sizeof sig / sizeof sig[0]; k++) {
        fs_dgauss_debug_force(FS_DGAUSS_DEBUG_CHECK_BOUNDS);
        int rc = fs_dgauss_sample(sig[k], v, n, &err);
        fs_dgauss_debug_force(0);
        CHECK_MSG(rc == 0, "sigma %g: %s", sig[k], err.msg);
    }
    free(v);
}

/* The previous map (fs_dgauss_sample_prg_v1, kept for the benchmark): the
 * same distribution, its rare paths included. */
static void test_v1(void)
{
    const struct {
        int flags;
        double sigma;
        size_t n;
    } c[] = {
        {0, 7.3e11, 1000000},
        {0, 20.5, 1000000},
        {FS_DGAUSS_DEBUG_EXACT_CDT | FS_DGAUSS_DEBUG_GENERIC | FS_DGAUSS_DEBUG_BITWISE, 5e5,
         100000},
    };
    uint8_t key[32] = {4};
    struct fs_err err = {0};

    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        size_t n = t_scale(c[k].n);
        int64_t *v = alloc_v(n);
        fs_prg *prg = NULL;
        if (v == NULL) {
            break;
        }
        key[1] = (uint8_t)k;
        CHECK_OK(fs_prg_new(&prg, key, NULL, &err), &err);
        fs_dgauss_debug_force(c[k].flags);
        CHECK_OK(fs_dgauss_sample_prg_v1(prg, c[k].sigma, v, n, &err), &err);
        fs_dgauss_debug_force(0);
        check_fit(v, n, c[k].sigma, "v1");
        fs_prg_free(prg);
        free(v);
    }
}

/* The map from a stream to samples is fixed: party and server, on any
 * machine, must draw the same integers from the same seed. */
static void test_known_answer(void)
{
    static const int64_t want[8] = {-586565273, 199201772,  677846787, 441249257,
                                    224556246,  -475753251, 759391210, 1912993048};
    /* the previous map, unchanged */
    static const int64_t want_v1[8] = {-586565273, 677846787,  -441249257, -490051756,
                                       -602304167, 1912993048, 245162702,  -167953358};
    uint8_t key[32] = {7};
    int64_t v[8], w[8], v1[8];
    fs_prg *p = NULL, *q = NULL, *r = NULL;
    struct fs_err err = {0};

    CHECK_OK(fs_prg_new(&p, key, NULL, &err), &err);
    CHECK_OK(fs_prg_new(&q, key, NULL, &err), &err);
    CHECK_OK(fs_prg_new(&r, key, NULL, &err), &err);
    CHECK_OK(fs_dgauss_sample_prg(p, 1e9, v, 8, &err), &err);
    CHECK_OK(fs_dgauss_sample_prg(q, 1e9, w, 8, &err), &err);
    CHECK_OK(fs_dgauss_sample_prg_v1(r, 1e9, v1, 8, &err), &err);
    CHECK(memcmp(v, w, sizeof v) == 0);
    for (int i = 0; i < 8; i++) {
        CHECK_MSG(v[i] == want[i], "sample %d: %lld, expected %lld", i, (long long)v[i],
                  (long long)want[i]);
        CHECK_MSG(v1[i] == want_v1[i], "v1 sample %d: %lld, expected %lld", i, (long long)v1[i],
                  (long long)want_v1[i]);
    }
    fs_prg_free(p);
    fs_prg_free(q);
    fs_prg_free(r);

    /* a party's seeded noise at the fedpower-utility configuration's sigma:
     * two blocks, the rare branches of a few dozen proposals included */
    uint8_t seed[32];
    int64_t *nz = alloc_v(5000);
    uint64_t h = 0;
    for (int i = 0; i < 32; i++) {
        seed[i] = (uint8_t)(i + 1);
    }
    if (nz != NULL) {
        CHECK_OK(fs_fedpower_noise_from_seed(seed, 7.0368744177664e11, nz, 5000, &err), &err);
        for (int i = 0; i < 5000; i++) {
            h = h * 1000003u + (uint64_t)nz[i];
        }
        CHECK(nz[0] == -549029573109 && nz[4095] == -168900243486 && nz[4096] == -378995346597 &&
              nz[4999] == -1485086395398);
        CHECK_MSG(h == 2052132123708958338u, "hash %llu", (unsigned long long)h);
    }
    free(nz);
}

/* The batch's branch-free pass decides a proposal as the general code would
 * from the same words: the samples are the same when every proposal takes the
 * general code. */
static void test_batch_same_as_one_by_one(void)
{
    const double sig[] = {16.0, 33.3, 1000.0, 7.0368744177664e11, 4503599627370496.0};
    size_t n = t_scale(1000000);
    int64_t *a = alloc_v(n), *b = alloc_v(n);
    uint8_t key[32] = {6};
    struct fs_err err = {0};

    for (size_t k = 0; a != NULL && b != NULL && k < sizeof sig / sizeof sig[0]; k++) {
        fs_prg *p = NULL, *q = NULL;
        key[1] = (uint8_t)k;
        CHECK_OK(fs_prg_new(&p, key, NULL, &err), &err);
        CHECK_OK(fs_prg_new(&q, key, NULL, &err), &err);
        CHECK_OK(fs_dgauss_sample_prg(p, sig[k], a, n, &err), &err);
        fs_dgauss_debug_force(FS_DGAUSS_DEBUG_ONE_BY_ONE);
        CHECK_OK(fs_dgauss_sample_prg(q, sig[k], b, n, &err), &err);
        fs_dgauss_debug_force(0);
        CHECK_MSG(memcmp(a, b, n * sizeof *a) == 0, "sigma %g: batch and one by one differ",
                  sig[k]);
        fs_prg_free(p);
        fs_prg_free(q);
    }
    free(a);
    free(b);
}

/* The server's regeneration on 1, 2 and 7 threads gives the same vector, which
 * is what the parties' own noise predicts; blocks do not depend on n. */
static void test_regeneration_threads(void)
{
    enum { K = 5 };
    size_t n = 3 * FS_FEDPOWER_NOISE_BLOCK + 123;
    uint8_t seeds[K][32];
    double sig[K] = {1e9, 3.3e11, 16.5, 7.7e7, 2.0e12};
    uint64_t *v0 = calloc(n, sizeof *v0), *v[3] = {NULL, NULL, NULL};
    int64_t *noise = alloc_v(n), *part = alloc_v(FS_FEDPOWER_NOISE_BLOCK + 5);
    const unsigned thr[3] = {1, 2, 7};
    struct fs_err err = {0};

    for (int i = 0; i < 3; i++) {
        v[i] = calloc(n, sizeof *v[i]);
    }
    if (v0 == NULL || v[0] == NULL || v[1] == NULL || v[2] == NULL || noise == NULL ||
        part == NULL) {
        CHECK(0);
        goto out;
    }
    for (int q = 0; q < K; q++) {
        memset(seeds[q], 0x11 * (q + 1), 32);
    }
    for (size_t i = 0; i < n; i++) {
        v0[i] = (uint64_t)i * 0x9e3779b97f4a7c15u;
    }
    for (int t = 0; t < 3; t++) {
        memcpy(v[t], v0, n * sizeof *v0);
        CHECK_OK(
            fs_fedpower_noise_remove((const uint8_t(*)[32])seeds, sig, K, v[t], n, thr[t], &err),
            &err);
    }
    CHECK(memcmp(v[0], v[1], n * sizeof *v0) == 0);
    CHECK(memcmp(v[0], v[2], n * sizeof *v0) == 0);
    /* the parties' side */
    for (int q = 0; q < K; q++) {
        CHECK_OK(fs_fedpower_noise_from_seed(seeds[q], sig[q], noise, n, &err), &err);
        for (size_t i = 0; i < n; i++) {
            v0[i] -= (uint64_t)noise[i];
        }
    }
    CHECK(memcmp(v0, v[0], n * sizeof *v0) == 0);
    /* a shorter vector is a prefix: the first block is the same, the second starts alike */
    CHECK_OK(fs_fedpower_noise_from_seed(seeds[4], sig[4], part, FS_FEDPOWER_NOISE_BLOCK + 5, &err),
             &err);
    CHECK(memcmp(part, noise, (FS_FEDPOWER_NOISE_BLOCK + 5) * sizeof *part) == 0);
    /* the noise itself is not a constant */
    CHECK(noise[0] != noise[1] || noise[1] != noise[2]);
    CHECK(fs_fedpower_noise_remove(NULL, sig, K, v0, n, 2, &err) == FS_EINVAL);
out:
    free(v0);
    for (int i = 0; i < 3; i++) {
        free(v[i]);
    }
    free(noise);
    free(part);
}

/* A figure, not an assertion (thread CPU time, so other load on the machine
 * matters less; timing varies under sanitizers). */
static void test_throughput(void)
{
    size_t n = t_scale(4000000);
    int64_t *v = alloc_v(n);
    uint8_t key[32] = {9};
    fs_prg *p = NULL;
    struct fs_err err = {0};
    struct timespec t0, t1;

    if (v == NULL) {
        return;
    }
    for (int k = 0; k < 2; k++) {
        CHECK_OK(fs_prg_new(&p, key, NULL, &err), &err);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        CHECK_OK((k ? fs_dgauss_sample_prg_v1 : fs_dgauss_sample_prg)(p, 7.3e11, v, n, &err), &err);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("  %s, sigma 7.3e11: %.1f M samples/s (thread CPU time)\n",
               k ? "previous map (v1)" : "fast sampler", n / dt / 1e6);
        fs_prg_free(p);
        p = NULL;
    }
    free(v);
}

int main(void)
{
    RUN(test_known_answer);
    RUN(test_batch_same_as_one_by_one);
    RUN(test_exact_pmf);
    RUN(test_same_as_reference);
    RUN(test_rare_paths);
    RUN(test_gamma_bounds);
    RUN(test_v1);
    RUN(test_regeneration_threads);
    RUN(test_throughput);
    return TEST_END("test_dgauss_fast");
}
