/* Differential-privacy calibration and accounting.
 * Gaussian mechanism calibrations (classic, analytic of Balle & Wang 2018),
 * zero-concentrated DP (Bun & Steinke) composition and conversion to
 * (epsilon, delta), simple and optimal (Canonne, Kamath & Steinke 2020). */
#ifndef FS_DP_DP_H
#define FS_DP_DP_H

#include "../core/err.h"

/**
 * Classic Gaussian: sigma = sens * sqrt(2 ln(1.25/delta)) / eps. Its proof
 * needs eps < 1; *valid receives 1 if eps < 1 else 0 (callers report it).
 */
FS_WUR int fs_dp_sigma_classic(double eps, double delta, double sens, double *sigma, int *valid,
                               struct fs_err *err);

/** Analytic Gaussian (Balle & Wang 2018, Thm 8, bisection): smallest sigma with (eps, delta)-DP. */
FS_WUR int fs_dp_sigma_analytic(double eps, double delta, double sens, double *sigma,
                                struct fs_err *err);

/** The delta that the Gaussian mechanism with sigma achieves at eps (Balle & Wang Thm 8). */
double fs_dp_analytic_delta(double eps, double sigma, double sens);

/** zCDP of one Gaussian release: rho = sens^2 / (2 sigma^2). */
double fs_zcdp_rho(double sens, double sigma);

/** Simple conversion: eps = rho + 2 sqrt(rho ln(1/delta)). */
FS_WUR int fs_zcdp_eps_simple(double rho, double delta, double *eps, struct fs_err *err);

/**
 * Optimal conversion (CKS20):
 * eps = min_{alpha>1} alpha rho + [ln(1/delta) + (alpha-1) ln(1-1/alpha) - ln alpha]/(alpha-1),
 * reported as 0 where that minimum is negative (tiny rho). rho >= 0.
 */
FS_WUR int fs_zcdp_eps_optimal(double rho, double delta, double *eps, struct fs_err *err);

/**
 * Smallest sigma whose zCDP over `releases` releases of sensitivity sens
 * converts (optimally) to (eps, delta); bisection to ~1e-14 relative in rho.
 */
FS_WUR int fs_zcdp_sigma_for(double eps, double delta, double sens, unsigned releases,
                             double *sigma, struct fs_err *err);

/**
 * Liu et al. 2023, Theorem 2 (fedpower-private), epsilon of one round:
 * eps = sqrt(8 r ln(1.25/delta)) * m_hat * z_hat / sigma, with r the rank,
 * m_hat the entry bound of M'_i, z_hat the clip of Z. It rests on the classic
 * Gaussian formula, so it is meaningful only where that one is (eps < 1);
 * kept to reproduce the paper (3.064 at r = 10, m_hat = 0.05, z_hat = 0.2,
 * sigma = 0.1, delta = 1e-5).
 * @return 0 or FS_EINVAL.
 */
FS_WUR int fs_dp_fedpower_private_eps_round(unsigned rank, double m_hat, double z_hat, double sigma,
                                            double delta, double *eps, struct fs_err *err);

#endif
