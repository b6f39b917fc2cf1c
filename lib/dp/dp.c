/* Gaussian-mechanism calibration and zCDP accounting.
 *
 * Numerics. The analytic Gaussian check of Balle & Wang (2018, Thm 8) is
 *   delta(sigma) = Phi(a - b) - e^eps Phi(-a - b),  a = sens/(2 sigma), b = eps sigma/sens.
 * Evaluated literally, e^eps overflows for large eps and Phi(-a - b) underflows,
 * and the two terms cancel when delta is small. Since 2ab = eps, the identity
 * e^eps phi(a + b) = phi(a - b) holds for the normal density phi, so with the
 * Mills ratio R(x) = Phi(-x)/phi(x) (computed through the scaled complementary
 * error function erfcx, which neither overflows nor underflows)
 *   delta = phi(b - a) [R(b - a) - R(a + b)]          when b >= a,
 *   delta = Phi(a - b) - phi(a - b) R(a + b)           otherwise (delta > 1/2 - ...).
 * Both forms contain no exponential of eps at all. */
#include "dp.h"

#include <float.h>
#include <math.h>

#define FS_SQRT_PI   1.7724538509055160273
#define FS_SQRT_2    1.4142135623730950488
#define FS_SQRT_2PI  2.5066282746310005024
#define FS_SQRT_PI_2 1.2533141373155002512

/* ---- validation ------------------------------------------------------- */

static int check_eps(const char *fn, double eps, struct fs_err *err)
{
    if (!isfinite(eps) || eps <= 0.0) {
        return fs_err_set(err, FS_EINVAL, "%s: epsilon must be finite and > 0 (got %g)", fn, eps);
    }
    return 0;
}

static int check_delta(const char *fn, double delta, struct fs_err *err)
{
    if (!isfinite(delta) || delta <= 0.0 || delta >= 1.0) {
        return fs_err_set(err, FS_EINVAL, "%s: delta must be in (0, 1) (got %g)", fn, delta);
    }
    return 0;
}

static int check_sens(const char *fn, double sens, struct fs_err *err)
{
    if (!isfinite(sens) || sens <= 0.0) {
        return fs_err_set(err, FS_EINVAL, "%s: sensitivity must be finite and > 0 (got %g)", fn,
                          sens);
    }
    return 0;
}

/* The (eps, delta, sens) triple every calibration takes. */
static int check_eds(const char *fn, double eps, double delta, double sens, struct fs_err *err)
{
    int rc = check_eps(fn, eps, err);
    if (rc == 0) {
        rc = check_delta(fn, delta, err);
    }
    if (rc == 0) {
        rc = check_sens(fn, sens, err);
    }
    return rc;
}

static int check_rho(const char *fn, double rho, struct fs_err *err)
{
    if (!isfinite(rho) || rho < 0.0) {
        return fs_err_set(err, FS_EINVAL, "%s: rho must be finite and >= 0 (got %g)", fn, rho);
    }
    return 0;
}

/* ---- normal distribution helpers -------------------------------------- */

/* exp(x^2) erfc(x) for x >= 0, to a few ulps. Below 26 erfc does not
 * underflow; x^2 is split exactly (fma) so exp(x^2) carries no error from
 * rounding the square. Above, the continued fraction
 *   erfcx(x) = (1/sqrt(pi)) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
 * converges in a handful of terms. */
static double erfcx_pos(double x)
{
    if (x < 26.0) {
        double p = x * x;
        double e = fma(x, x, -p);
        return exp(p) * (1.0 + e) * erfc(x);
    }
    double f = x;
    for (int k = 60; k >= 1; k--) {
        f = x + (0.5 * k) / f;
    }
    return 1.0 / (FS_SQRT_PI * f);
}

/* Mills ratio R(x) = Phi(-x) / phi(x) for x >= 0. */
static double mills(double x)
{
    return FS_SQRT_PI_2 * erfcx_pos(x / FS_SQRT_2);
}

static double normal_pdf(double x)
{
    return exp(-0.5 * x * x) / FS_SQRT_2PI;
}

static double normal_cdf(double x)
{
    return 0.5 * erfc(-x / FS_SQRT_2);
}

double fs_dp_analytic_delta(double eps, double sigma, double sens)
{
    if (!isfinite(eps) || eps <= 0.0 || !isfinite(sigma) || sigma <= 0.0 || !isfinite(sens) ||
        sens <= 0.0) {
        return NAN;
    }
    double a = sens / (2.0 * sigma);
    double b = eps * sigma / sens;
    double d;

    if (b >= a) {
        d = normal_pdf(b - a) * (mills(b - a) - mills(a + b));
    } else {
        d = normal_cdf(a - b) - normal_pdf(a - b) * mills(a + b);
    }
    if (d < 0.0) {
        d = 0.0;
    }
    return d;
}

/* ---- calibrations ------------------------------------------------------ */

int fs_dp_sigma_classic(double eps, double delta, double sens, double *sigma, int *valid,
                        struct fs_err *err)
{
    static const char fn[] = "fs_dp_sigma_classic";
    int rc = check_eds(fn, eps, delta, sens, err);

    if (rc != 0) {
        return rc;
    }
    *sigma = sens * sqrt(2.0 * log(1.25 / delta)) / eps;
    if (valid != NULL) {
        *valid = eps < 1.0;
    }
    return 0;
}

int fs_dp_sigma_analytic(double eps, double delta, double sens, double *sigma, struct fs_err *err)
{
    static const char fn[] = "fs_dp_sigma_analytic";
    int rc = check_eds(fn, eps, delta, sens, err);

    if (rc != 0) {
        return rc;
    }
    /* Work with sens = 1 (delta depends on sigma/sens only) and bracket the
     * root: delta(lo) > delta >= delta(hi). */
    double lo = 1.0;
    double hi = 1.0;
    int guard = 0;
    while (fs_dp_analytic_delta(eps, hi, 1.0) > delta) {
        hi *= 2.0;
        if (++guard > 2100) {
            return fs_err_set(err, FS_ENUMERIC, "%s: no sigma found for eps %g, delta %g", fn, eps,
                              delta);
        }
    }
    lo = hi / 2.0;
    guard = 0;
    while (fs_dp_analytic_delta(eps, lo, 1.0) <= delta) {
        hi = lo;
        lo /= 2.0;
        if (++guard > 2100) {
            return fs_err_set(err, FS_ENUMERIC, "%s: no sigma found for eps %g, delta %g", fn, eps,
                              delta);
        }
    }
    for (int it = 0; it < 200 && hi - lo > 1e-13 * hi; it++) {
        double mid = 0.5 * (lo + hi);
        if (fs_dp_analytic_delta(eps, mid, 1.0) > delta) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    *sigma = hi * sens;
    return 0;
}

/* ---- zCDP --------------------------------------------------------------- */

double fs_zcdp_rho(double sens, double sigma)
{
    return sens * sens / (2.0 * sigma * sigma);
}

int fs_zcdp_eps_simple(double rho, double delta, double *eps, struct fs_err *err)
{
    static const char fn[] = "fs_zcdp_eps_simple";
    int rc = check_rho(fn, rho, err);

    if (rc == 0) {
        rc = check_delta(fn, delta, err);
    }
    if (rc != 0) {
        return rc;
    }
    *eps = rho + 2.0 * sqrt(rho * log(1.0 / delta));
    return 0;
}

/* The CKS20 bound at alpha = 1 + e^u, written without cancellation:
 * with s = alpha - 1, ln(1 - 1/alpha) = u - log1p(s), so
 *   eps(u) = (1 + s) rho + L/s + u - log1p(s) - log1p(s)/s,   L = ln(1/delta). */
static double cks_bound(double u, double rho, double L)
{
    double s = exp(u);
    double l1 = log1p(s);
    return (1.0 + s) * rho + L / s + u - l1 - l1 / s;
}

/* Minimise cks_bound over u: a coarse scan (step 0.1 in ln(alpha - 1))
 * locates the basin, so nothing rests on unimodality beyond one grid cell, then
 * golden-section search narrows it to machine precision in u. */
static double cks_minimise(double rho, double L)
{
    /* The optimum is near alpha - 1 = sqrt(L / rho); scan e^{+-30} around it. */
    const double u0 = 0.5 * (log(L) - log(rho));
    const double ulo = u0 - 30.0;
    const double uhi = u0 + 30.0;
    const int n = 600;
    const double h = (uhi - ulo) / n;
    int best = 0;
    double fbest = INFINITY;

    for (int i = 0; i <= n; i++) {
        double f = cks_bound(ulo + h * i, rho, L);
        if (f < fbest) {
            fbest = f;
            best = i;
        }
    }
    double a = ulo + h * (best > 0 ? best - 1 : 0);
    double b = ulo + h * (best < n ? best + 1 : n);
    const double gr = 0.6180339887498948482;
    double c = b - gr * (b - a);
    double d = a + gr * (b - a);
    double fc = cks_bound(c, rho, L);
    double fd = cks_bound(d, rho, L);
    for (int it = 0; it < 200 && b - a > 1e-12; it++) {
        if (fc < fd) {
            b = d;
            d = c;
            fd = fc;
            c = b - gr * (b - a);
            fc = cks_bound(c, rho, L);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + gr * (b - a);
            fd = cks_bound(d, rho, L);
        }
    }
    double fm = cks_bound(0.5 * (a + b), rho, L);
    if (fc < fm) {
        fm = fc;
    }
    if (fd < fm) {
        fm = fd;
    }
    return fm < fbest ? fm : fbest;
}

int fs_zcdp_eps_optimal(double rho, double delta, double *eps, struct fs_err *err)
{
    static const char fn[] = "fs_zcdp_eps_optimal";
    int rc = check_rho(fn, rho, err);

    if (rc == 0) {
        rc = check_delta(fn, delta, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (rho == 0.0) {
        *eps = 0.0;
        return 0;
    }
    double e = cks_minimise(rho, -log(delta));
    if (!isfinite(e)) {
        return fs_err_set(err, FS_ENUMERIC, "%s: no finite bound for rho %g, delta %g", fn, rho,
                          delta);
    }
    *eps = e > 0.0 ? e : 0.0;
    return 0;
}

int fs_zcdp_sigma_for(double eps, double delta, double sens, unsigned releases, double *sigma,
                      struct fs_err *err)
{
    static const char fn[] = "fs_zcdp_sigma_for";
    int rc = check_eds(fn, eps, delta, sens, err);

    if (rc != 0) {
        return rc;
    }
    if (releases == 0) {
        return fs_err_set(err, FS_EINVAL, "%s: releases must be > 0", fn);
    }
    /* Largest total rho whose optimal conversion stays within eps; the
     * conversion is increasing in rho. Bisect on log rho. */
    double L = -log(delta);
    double lo = log(1e-300);
    double hi = log(1e300);
    if (cks_minimise(exp(lo), L) > eps) {
        return fs_err_set(err, FS_ENUMERIC, "%s: eps %g unreachable at delta %g", fn, eps, delta);
    }
    for (int it = 0; it < 300 && hi - lo > 1e-14; it++) {
        double mid = 0.5 * (lo + hi);
        if (cks_minimise(exp(mid), L) <= eps) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    double rho = exp(lo);
    *sigma = sens * sqrt((double)releases / (2.0 * rho));
    return 0;
}

int fs_dp_fedpower_private_eps_round(unsigned rank, double m_hat, double z_hat, double sigma,
                                     double delta, double *eps, struct fs_err *err)
{
    static const char fn[] = "fs_dp_fedpower_private_eps_round";
    int rc = check_delta(fn, delta, err);

    if (rc != 0) {
        return rc;
    }
    if (rank == 0 || !isfinite(m_hat) || m_hat <= 0.0 || !isfinite(z_hat) || z_hat <= 0.0 ||
        !isfinite(sigma) || sigma <= 0.0) {
        return fs_err_set(err, FS_EINVAL, "%s: need rank > 0 and finite m_hat, z_hat, sigma > 0",
                          fn);
    }
    *eps = sqrt(8.0 * rank * log(1.25 / delta)) * m_hat * z_hat / sigma;
    return 0;
}
