/* Exact discrete Gaussian (CKS20): moments against the exact pmf for several
 * sigma, symmetry, chi-square goodness of fit at sigma = 0.7 and 3, shape
 * (mass within 1 and 3 sigma) at large sigma, the Bernoulli(exp(-gamma)) and
 * discrete Laplace sub-samplers, the rational interface, rejected inputs,
 * and a throughput figure. Thresholds are 5 standard errors or chi-square
 * p = 1e-6, so a correct sampler fails a run about once in 10^5. */
#include "crypto/prg.h"
#include "dp/dgauss.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

enum { NS = 200000 };

struct moments {
    double var; /* E[X^2] */
    double m4;  /* E[X^4] */
};

/* Exact moments of N_Z(0, sigma^2) by summing the pmf (sigma <= ~1000), or
 * the continuous ones where they agree to far below double precision
 * (the difference is of order exp(-2 pi^2 sigma^2)). */
static struct moments dg_moments(double sigma)
{
    struct moments m = {sigma * sigma, 3 * sigma * sigma * sigma * sigma};

    if (sigma > 1000) {
        return m;
    }
    long lim = (long)ceil(40 * sigma) + 2;
    long double z = 0;
    long double s2 = 0;
    long double s4 = 0;
    for (long x = -lim; x <= lim; x++) {
        long double w = expl(-(long double)x * x / (2.0L * sigma * sigma));
        z += w;
        s2 += w * x * x;
        s4 += w * x * x * (long double)x * x;
    }
    m.var = (double)(s2 / z);
    m.m4 = (double)(s4 / z);
    return m;
}

static double dg_pmf(double sigma, long x)
{
    long lim = (long)ceil(40 * sigma) + 2;
    long double z = 0;

    for (long k = -lim; k <= lim; k++) {
        z += expl(-(long double)k * k / (2.0L * sigma * sigma));
    }
    return (double)(expl(-(long double)x * x / (2.0L * sigma * sigma)) / z);
}

/* Mean within 5 SE of 0, E[X^2] within 5 SE of the exact variance, the
 * numbers of positive and negative samples within 5 SE of each other. */
static void check_moments(const int64_t *v, size_t n, double sigma)
{
    struct moments m = dg_moments(sigma);
    long double s = 0;
    long double s2 = 0;
    size_t pos = 0;
    size_t neg = 0;

    for (size_t i = 0; i < n; i++) {
        long double x = (long double)v[i];
        s += x;
        s2 += x * x;
        pos += v[i] > 0;
        neg += v[i] < 0;
    }
    double mean = (double)(s / n);
    double var = (double)(s2 / n);
    double se_mean = sqrt(m.var / n);
    double se_var = sqrt((m.m4 - m.var * m.var) / n);
    CHECK_MSG(fabs(mean) <= 5 * se_mean, "sigma %g: mean %g, SE %g", sigma, mean, se_mean);
    CHECK_MSG(fabs(var - m.var) <= 5 * se_var, "sigma %g: var %.8g vs %.8g, SE %g", sigma, var,
              m.var, se_var);
    CHECK_MSG(fabs((double)pos - (double)neg) <= 5 * sqrt((double)(pos + neg)),
              "sigma %g: %zu positive, %zu negative", sigma, pos, neg);
    printf("  sigma %-10g mean %+.3e (SE %.1e)  var/exact %.5f (SE %.1e)\n", sigma, mean, se_mean,
           var / m.var, se_var / m.var);
}

/* Chi-square over bins -lim..lim (tails folded into the end bins). */
static double chi_square(const int64_t *v, size_t n, double sigma, long lim)
{
    size_t nb = (size_t)(2 * lim + 1);
    size_t *cnt = calloc(nb, sizeof *cnt);
    double chi = 0;
    double tail = 0;

    if (cnt == NULL) {
        return INFINITY;
    }
    for (size_t i = 0; i < n; i++) {
        long x = (long)v[i];
        x = x < -lim ? -lim : (x > lim ? lim : x);
        cnt[x + lim]++;
    }
    for (long x = lim; x < lim + 60 * (long)ceil(sigma); x++) {
        tail += dg_pmf(sigma, x + 1);
    }
    for (long x = -lim; x <= lim; x++) {
        double p = dg_pmf(sigma, x);
        if (x == -lim || x == lim) {
            p += tail;
        }
        double e = p * n;
        double d = (double)cnt[x + lim] - e;
        chi += d * d / e;
    }
    free(cnt);
    return chi;
}

static void test_small_sigma_fit(void)
{
    int64_t *v = malloc(NS * sizeof *v);
    struct fs_err err = {0};

    if (v == NULL) {
        CHECK(0);
        return;
    }
    CHECK_OK(fs_dgauss_sample(0.7, v, NS, &err), &err);
    check_moments(v, NS, 0.7);
    double chi = chi_square(v, NS, 0.7, 3);
    printf("  sigma 0.7: chi-square %.2f over -3..3 (6 df, p=1e-6 at 38.26)\n", chi);
    CHECK(chi < 38.26);

    CHECK_OK(fs_dgauss_sample(3.0, v, NS, &err), &err);
    check_moments(v, NS, 3.0);
    chi = chi_square(v, NS, 3.0, 10);
    printf("  sigma 3: chi-square %.2f over -10..10 (20 df, p=1e-6 at 65.42)\n", chi);
    CHECK(chi < 65.42);
    free(v);
}

/*
 * The library's samplers have the variance of N_Z(0, sigma^2): NS draws of
 * fs_dgauss_sample (and of the rational and seeded entry points) for a few
 * sigma, the empirical E[X^2] against the exact variance from the pmf. The
 * tolerance is 5 standard errors of the sample second moment,
 * sqrt((E[X^4] - E[X^2]^2) / NS), about 1.6% of sigma^2 at NS = 200000, so a
 * sampler whose sigma is off by 2% (4% in variance) or that draws a rounded
 * continuous Gaussian at sigma = 0.5 (variance about 0.33 instead of
 * 0.215) fails, and a correct one fails about once in 10^6 runs. For
 * sigma >= 3 the exact variance is sigma^2 itself (to 1e-6 relative).
 */
static void test_variance_is_sigma2(void)
{
    const double sig[] = {0.5, 3.0, 5.5, 100.0};
    static const char *const entry[] = {"double", "rational", "seeded"};
    int64_t *v = malloc(NS * sizeof *v);
    struct fs_err err = {0};
    struct fs_prg *prg = NULL;
    uint8_t seed[32] = {7};

    if (v == NULL) {
        CHECK(0);
        return;
    }
    for (size_t k = 0; k < sizeof sig / sizeof sig[0] + 2; k++) {
        double sigma = k < 4 ? sig[k] : 2.5;
        struct moments m = dg_moments(sigma);
        long double s2 = 0;
        if (k < 4) {
            CHECK_OK(fs_dgauss_sample(sigma, v, NS, &err), &err);
        } else if (k == 4) {
            CHECK_OK(fs_dgauss_sample_rational(25, 4, v, NS, &err), &err);
        } else {
            CHECK_OK(fs_prg_new(&prg, seed, NULL, &err), &err);
            if (prg == NULL) {
                break;
            }
            CHECK_OK(fs_dgauss_sample_prg(prg, sigma, v, NS, &err), &err);
        }
        for (size_t i = 0; i < NS; i++) {
            s2 += (long double)v[i] * (long double)v[i];
        }
        double var = (double)(s2 / NS);
        double se = sqrt((m.m4 - m.var * m.var) / NS);
        CHECK_MSG(fabs(var - m.var) <= 5 * se, "sigma %g (%s): var %.6g, exact %.6g, SE %.3g",
                  sigma, entry[k < 4 ? 0 : k - 3], var, m.var, se);
        if (sigma >= 3) {
            CHECK_NEAR(m.var / (sigma * sigma), 1.0, 1e-6);
        }
        printf("  sigma %-6g var %.6g exact %.6g (5 SE %.2g)\n", sigma, var, m.var, 5 * se);
    }
    fs_prg_free(prg);
    free(v);
}

/* Large sigma: moments, plus shape (a Laplace or uniform of the right
 * variance would fail the 1- and 3-sigma masses). */
static void test_large_sigma(void)
{
    const double sig[] = {100.0, 1e6, 1234567.891, 3.3e10, 1e12};
    int64_t *v = malloc(NS * sizeof *v);
    struct fs_err err = {0};

    if (v == NULL) {
        CHECK(0);
        return;
    }
    for (size_t k = 0; k < sizeof sig / sizeof sig[0]; k++) {
        CHECK_OK(fs_dgauss_sample(sig[k], v, NS, &err), &err);
        check_moments(v, NS, sig[k]);
        size_t in1 = 0;
        size_t in3 = 0;
        for (size_t i = 0; i < NS; i++) {
            double a = fabs((double)v[i]);
            in1 += a <= sig[k];
            in3 += a <= 3 * sig[k];
        }
        double p1 = erf(1 / sqrt(2.0));
        double p3 = erf(3 / sqrt(2.0));
        CHECK_MSG(fabs((double)in1 / NS - p1) <= 5 * sqrt(p1 * (1 - p1) / NS), "sigma %g: %g",
                  sig[k], (double)in1 / NS);
        CHECK_MSG(fabs((double)in3 / NS - p3) <= 5 * sqrt(p3 * (1 - p3) / NS), "sigma %g: %g",
                  sig[k], (double)in3 / NS);
    }
    free(v);
}

static void test_rational_interface(void)
{
    int64_t *v = malloc(NS * sizeof *v);
    struct fs_err err = {0};

    if (v == NULL) {
        CHECK(0);
        return;
    }
    /* 18/2 is 9/1 after reduction: sigma = 3. */
    CHECK_OK(fs_dgauss_sample_rational(18, 2, v, NS, &err), &err);
    check_moments(v, NS, 3.0);
    CHECK(chi_square(v, NS, 3.0, 10) < 65.42);
    /* sigma^2 = 49/100: the sigma = 0.7 distribution. */
    CHECK_OK(fs_dgauss_sample_rational(49, 100, v, NS, &err), &err);
    CHECK(chi_square(v, NS, 0.7, 3) < 38.26);
    /* Largest sigma^2 the interface takes (sigma ~ 4.29e9). */
    CHECK_OK(fs_dgauss_sample_rational(UINT64_MAX, 1, v, NS / 4, &err), &err);
    check_moments(v, NS / 4, sqrt((double)UINT64_MAX));
    /* Tiny sigma^2: P(X != 0) ~ 2 exp(-2^63), so all zero. */
    CHECK_OK(fs_dgauss_sample_rational(1, UINT64_MAX, v, 1000, &err), &err);
    int allzero = 1;
    for (size_t i = 0; i < 1000; i++) {
        allzero &= v[i] == 0;
    }
    CHECK(allzero);
    free(v);
}

static void test_bernoulli_exp(void)
{
    const uint64_t g[][2] = {{0, 1}, {1, 2}, {1, 1}, {3, 2}, {5, 1}, {7, 3}, {999, 1000}};
    int *b = malloc(NS * sizeof *b);
    struct fs_err err = {0};

    if (b == NULL) {
        CHECK(0);
        return;
    }
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) {
        CHECK_OK(fs_dgauss_bernoulli_exp(g[k][0], g[k][1], b, NS, &err), &err);
        size_t ones = 0;
        for (size_t i = 0; i < NS; i++) {
            CHECK(b[i] == 0 || b[i] == 1);
            ones += (size_t)b[i];
        }
        double p = exp(-(double)g[k][0] / (double)g[k][1]);
        double phat = (double)ones / NS;
        double se = sqrt(p * (1 - p) / NS);
        CHECK_MSG(fabs(phat - p) <= 5 * se + 1e-12, "gamma %llu/%llu: %g vs %g",
                  (unsigned long long)g[k][0], (unsigned long long)g[k][1], phat, p);
        printf("  Bernoulli(exp(-%llu/%llu)): rate %.5f, exact %.5f, SE %.1e\n",
               (unsigned long long)g[k][0], (unsigned long long)g[k][1], phat, p, se);
    }
    CHECK(fs_dgauss_bernoulli_exp(1, 0, b, 1, &err) == FS_EINVAL);
    free(b);
}

/* Discrete Laplace with scale t: P(0) = (1 - q)/(1 + q), E[X^2] = 2q/(1 - q)^2,
 * q = exp(-1/t). */
static void test_dlaplace(void)
{
    const uint64_t ts[] = {1, 10, 1000000};
    int64_t *v = malloc(NS * sizeof *v);
    struct fs_err err = {0};

    if (v == NULL) {
        CHECK(0);
        return;
    }
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        CHECK_OK(fs_dlaplace_sample(ts[k], v, NS, &err), &err);
        double q = exp(-1.0 / (double)ts[k]);
        double omq = -expm1(-1.0 / (double)ts[k]); /* 1 - q without cancellation */
        double p0 = omq / (1 + q);
        double var = 2 * q / (omq * omq);
        /* E[X^4] = 2q(1 + 10q + q^2) / (1 - q)^4 for the two-sided geometric. */
        double m4 = 2 * q * (1 + 10 * q + q * q) / pow(omq, 4);
        size_t zeros = 0;
        long double s = 0;
        long double s2 = 0;
        for (size_t i = 0; i < NS; i++) {
            zeros += v[i] == 0;
            s += v[i];
            s2 += (long double)v[i] * v[i];
        }
        double se0 = sqrt(p0 * (1 - p0) / NS);
        double lambda = p0 * NS; /* expected number of zeros */
        if (lambda >= 25) {
            CHECK_MSG(fabs((double)zeros / NS - p0) <= 5 * se0, "t %llu: P(0) %g vs %g",
                      (unsigned long long)ts[k], (double)zeros / NS, p0);
        } else {
            /* Too rare for the normal approximation (t = 1e6 expects ~0.05
             * zeros, and one zero is a 5% event): bound the Poisson tail. */
            CHECK_MSG((double)zeros <= ceil(lambda + 5 * sqrt(lambda) + 5),
                      "t %llu: %zu zeros, expected %g", (unsigned long long)ts[k], zeros, lambda);
        }
        CHECK(fabs((double)(s / NS)) <= 5 * sqrt(var / NS));
        CHECK_MSG(fabs((double)(s2 / NS) - var) <= 5 * sqrt((m4 - var * var) / NS),
                  "t %llu: E[X^2] %g vs %g", (unsigned long long)ts[k], (double)(s2 / NS), var);
    }
    CHECK(fs_dlaplace_sample(0, v, 1, &err) == FS_EINVAL);
    free(v);
}

static void test_invalid(void)
{
    int64_t v[4] = {0};
    struct fs_err err = {0};
    const double bad[] = {0.0, -1.0, NAN, INFINITY, -INFINITY, 1e-9, 1e16};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(fs_dgauss_sample(bad[i], v, 4, &err) == FS_EINVAL);
        CHECK(strstr(err.msg, "sigma") != NULL);
    }
    CHECK(fs_dgauss_sample_rational(0, 1, v, 4, &err) == FS_EINVAL);
    CHECK(fs_dgauss_sample_rational(1, 0, v, 4, &err) == FS_EINVAL);
    CHECK(fs_dgauss_sample(1.0, NULL, 4, &err) == FS_EINVAL);
    CHECK_OK(fs_dgauss_sample(1.0, NULL, 0, &err), &err);
    /* Range ends are accepted. */
    CHECK_OK(fs_dgauss_sample(ldexp(1, -20), v, 4, &err), &err);
    CHECK_OK(fs_dgauss_sample(ldexp(1, 52), v, 4, &err), &err);
}

/* Fresh CSPRNG output per call: two runs at large sigma never coincide. */
static void test_fresh_randomness(void)
{
    int64_t a[64];
    int64_t b[64];
    struct fs_err err = {0};

    CHECK_OK(fs_dgauss_sample(1e9, a, 64, &err), &err);
    CHECK_OK(fs_dgauss_sample(1e9, b, 64, &err), &err);
    CHECK(memcmp(a, b, sizeof a) != 0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A figure, not an assertion (timing varies under sanitizers). */
static void test_throughput(void)
{
    enum { N = 200000 };
    int64_t *v = malloc(N * sizeof *v);
    struct fs_err err = {0};
    const double sig[] = {0.7, 1e6, 1e12};

    if (v == NULL) {
        CHECK(0);
        return;
    }
    for (size_t k = 0; k < sizeof sig / sizeof sig[0]; k++) {
        double t0 = now_s();
        CHECK_OK(fs_dgauss_sample(sig[k], v, N, &err), &err);
        double dt = now_s() - t0;
        printf("  sigma %g: %.0f samples/s\n", sig[k], N / dt);
    }
    free(v);
}

/* The PRG-driven sampler is deterministic per seed and has the right moments. */
static void test_prg_stream(void)
{
    uint8_t k1[32] = {1}, k2[32] = {2};
    enum { N = 20000 };
    int64_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    struct fs_err err = {0};
    fs_prg *p1 = NULL, *p2 = NULL, *p3 = NULL;
    double s = 0, s2 = 0, sigma = 40.0;

    CHECK_OK(fs_prg_new(&p1, k1, NULL, &err), &err);
    CHECK_OK(fs_prg_new(&p2, k1, NULL, &err), &err);
    CHECK_OK(fs_prg_new(&p3, k2, NULL, &err), &err);
    CHECK_OK(fs_dgauss_sample_prg(p1, sigma, a, N, &err), &err);
    CHECK_OK(fs_dgauss_sample_prg(p2, sigma, b, N, &err), &err);
    CHECK_OK(fs_dgauss_sample_prg(p3, sigma, c, N, &err), &err);
    CHECK(memcmp(a, b, N * sizeof *a) == 0);
    CHECK(memcmp(a, c, N * sizeof *a) != 0);
    for (size_t i = 0; i < N; i++) {
        s += (double)a[i];
        s2 += (double)a[i] * (double)a[i];
    }
    /* mean: sd sigma/sqrt(N) = 0.28; variance: sd ~ sigma^2 sqrt(2/N) = 16 */
    CHECK_NEAR(s / N, 0.0, 5 * sigma / sqrt((double)N));
    CHECK_NEAR(s2 / N, sigma * sigma, 5 * sigma * sigma * sqrt(2.0 / N));
    CHECK(fs_dgauss_sample_prg(NULL, sigma, a, 1, &err) == FS_EINVAL);
    fs_prg_free(p1);
    fs_prg_free(p2);
    fs_prg_free(p3);
    free(a);
    free(b);
    free(c);
}

int main(void)
{
    RUN(test_variance_is_sigma2);
    RUN(test_small_sigma_fit);
    RUN(test_large_sigma);
    RUN(test_rational_interface);
    RUN(test_bernoulli_exp);
    RUN(test_dlaplace);
    RUN(test_invalid);
    RUN(test_fresh_randomness);
    RUN(test_throughput);
    RUN(test_prg_stream);
    return TEST_END("test_dgauss");
}
