/* Resolution of a job's public parameters (σ from (ε, δ), fixed point) and
 * its privacy report.
 *
 * Accounting (zCDP; docs/privacy-ledger.md). Each noisy release is a Gaussian mechanism
 * in the integer domain: the query is rounded to the grid 2^-f (which can
 * move each of its `dim` entries by at most one unit, so the integer
 * sensitivity is Delta 2^f + sqrt(dim)) and discrete Gaussian noise is
 * added. For noise summed over n >= t parties, Kairouz, Liu & Steinke 2021
 * (the distributed discrete Gaussian, Thm. 12) give rho = eps^2 / 2 with
 *   eps = Delta_int / (sqrt(n) sigma_p) + tau sqrt(dim),
 *   tau = 10 sum_{k=1}^{n-1} exp(-2 pi^2 sigma_p^2 k / (k + 1)),
 * sigma_p the per-party integer std; a single discrete Gaussian gives
 * Delta_int^2 / (2 sigma^2) (CKS20). With sigma_p >= 16 (enforced) tau is
 * far below 1e-300 and the rounding term is ~2^-40 relative, but both are
 * computed, not assumed. Releases compose additively in rho and the total is
 * converted to (eps, delta) with the optimal conversion (CKS20). Beside it
 * the report gives each paper's own formula, as the paper computes it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../dp/dp.h"
#include "fedpower_internal.h"

#define CALIB_MARGIN 1e-6 /* calibrate for Delta (1 + margin): absorbs the rounding term */

static void set_text(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap) {
        n = cap - 1;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static double kls_tau(double sigma_p_int, uint32_t n)
{
    double tau = 0.0;

    for (uint32_t k = 1; k < n; k++) {
        tau += exp(-2.0 * M_PI * M_PI * sigma_p_int * sigma_p_int * (double)k / (double)(k + 1));
    }
    return 10.0 * tau;
}

/* Row-count facts for Guo et al.'s formulas. */
static int rows_facts(const struct fs_fedpower_config *cfg, const uint64_t *rows, uint64_t *total,
                      uint64_t *min_s, uint64_t *max_s, struct fs_err *err)
{
    *total = 0;
    *min_s = 0;
    *max_s = 0;
    if (rows == NULL) {
        return 0;
    }
    for (uint32_t i = 0; i < cfg->parties; i++) {
        if (rows[i] == 0) {
            continue;
        }
        if (rows[i] > ((uint64_t)1 << 52) || *total > ((uint64_t)1 << 53) - rows[i]) {
            return fs_err_set(err, FS_EINVAL, "fedpower: row counts too large");
        }
        *total += rows[i];
        if (*min_s == 0 || rows[i] < *min_s) {
            *min_s = rows[i];
        }
        if (rows[i] > *max_s) {
            *max_s = rows[i];
        }
    }
    if (*total == 0) {
        return fs_err_set(err, FS_EINVAL, "fedpower: no party declared any rows");
    }
    return 0;
}

/* σ and the sensitivities, before the fixed point. */
static int resolve_sigma(const struct fs_fedpower_config *cfg, const uint64_t *rows,
                         struct fpw_plan *pl, struct fs_err *err)
{
    uint64_t total, min_s, max_s;
    uint32_t releases = cfg->iterations + (cfg->eigenvalues ? 1u : 0u);
    int rc = rows_facts(cfg, rows, &total, &min_s, &max_s, err);

    if (rc != 0) {
        return rc;
    }
    pl->total_rows = total;
    pl->w_max = total > 0 ? (double)max_s / (double)total : 1.0 / (double)cfg->parties;
    pl->w_min = total > 0 ? (double)min_s / (double)total : 0.0;
    pl->sigma = cfg->sigma;
    pl->sigma_server = cfg->sigma_server;
    switch (cfg->alg) {
    case FS_FEDPOWER_PLAIN:
    case FS_FEDPOWER_UTILITY:
        pl->sens = min_s > 0 ? 1.0 / (double)min_s : NAN;
        if (cfg->calib == FS_FEDPOWER_SIGMA_FROM_EPS) {
            double R = pl->syncs;
            if (min_s == 0) {
                return fs_err_set(err, FS_EINVAL,
                                  "fedpower: sigma from (eps, delta) needs the row counts");
            }
            /* Guo et al. (Liu et al. 2023, §3), with R = ceil(T/p) noisy syncs */
            pl->sigma = R / (cfg->eps * (double)min_s) * sqrt(2.0 * log(1.25 * R / cfg->delta));
            pl->sigma_server = pl->sigma * (double)max_s / (double)total;
        }
        if (cfg->alg == FS_FEDPOWER_UTILITY) {
            pl->sigma_server = 0.0;
        }
        break;
    case FS_FEDPOWER_PRIVATE:
        pl->sens = 2.0 * sqrt(2.0 * cfg->r) * cfg->m_hat * cfg->z_hat;
        pl->sens_ray = 2.0 * sqrt(2.0) * cfg->m_hat * (1.0 + FPW_ORTH_SLACK);
        if (cfg->calib == FS_FEDPOWER_SIGMA_FROM_EPS) {
            rc = fs_zcdp_sigma_for(cfg->eps, cfg->delta, pl->sens * (1.0 + CALIB_MARGIN), releases,
                                   &pl->sigma, err);
            if (rc != 0) {
                return rc;
            }
        }
        pl->sigma_ray = pl->sigma * pl->sens_ray / pl->sens;
        pl->sigma_server = 0.0;
        break;
    case FS_FEDPOWER_DPPPM:
        pl->sens = 1.0;
        pl->sens_ray = 1.0 + FPW_ORTH_SLACK;
        if (cfg->calib == FS_FEDPOWER_SIGMA_FROM_EPS) {
            if (cfg->dppm_calib == FS_FEDPOWER_DPPPM_PAPER) {
                /* Nicolas et al. 2024, Alg. 1-2: sigma = eps^-1 sqrt(4 L ln(1/delta)) */
                pl->sigma = sqrt(4.0 * releases * log(1.0 / cfg->delta)) / cfg->eps;
            } else {
                rc = fs_zcdp_sigma_for(cfg->eps, cfg->delta, 1.0 + CALIB_MARGIN, releases,
                                       &pl->sigma, err);
                if (rc != 0) {
                    return rc;
                }
            }
        }
        pl->sigma_ray = pl->sigma;
        pl->sigma_server = 0.0;
        break;
    }
    if (!isfinite(pl->sigma) || pl->sigma < 0.0) {
        return fs_err_set(err, FS_EINVAL, "fedpower: noise std %g", pl->sigma);
    }
    return 0;
}

/* Fixed point of the secure-aggregation variants. */
static int resolve_ring(const struct fs_fedpower_config *cfg, struct fpw_plan *pl,
                        struct fs_err *err)
{
    double sqrt_t = sqrt((double)cfg->threshold);
    double std_max_all, std_min_all;
    double lo_row = sqrt((double)cfg->r / (double)cfg->d) * (1.0 - FPW_ORTH_SLACK);
    int rc;

    pl->ring = fs_fedpower_uses_secagg(cfg->alg);
    if (!pl->ring) {
        return 0;
    }
    pl->b_sig = cfg->value_bound > 0.0 ? cfg->value_bound : (double)cfg->d * cfg->m_hat;
    /* The bounds on the ring noise use weights <= 1, so the fixed point does not
     * depend on the row counts; the floor uses the actual (or a lower bound of
     * the) weights. */
    switch (cfg->alg) {
    case FS_FEDPOWER_UTILITY: /* party i: w_i sigma */
        pl->ring_std_max = pl->sigma;
        std_max_all = pl->sigma;
        std_min_all = pl->w_min > 0.0 ? pl->w_min * pl->sigma : 0.0;
        break;
    case FS_FEDPOWER_PRIVATE: { /* syncs: w_max sigma / sqrt(t) per party */
        double s_sync = pl->sigma / sqrt_t;
        double s_ray = cfg->eigenvalues ? pl->sigma_ray / sqrt_t : s_sync;
        pl->ring_std_max = fmax(s_sync, s_ray);
        std_max_all = fmax(pl->ring_std_max, pl->sigma); /* local iterations: full sigma */
        std_min_all = pl->w_max * fmin(s_sync, s_ray);
        break;
    }
    default: /* dp-ppm: Delta_l sigma / sqrt(t), sqrt(r/d) <= Delta_l <= 1 */
        pl->ring_std_max = pl->sigma * (1.0 + FPW_ORTH_SLACK) / sqrt_t;
        std_max_all = pl->ring_std_max;
        std_min_all = pl->sigma * lo_row / sqrt_t;
        break;
    }
    rc = fs_fixedpt_init(&pl->fx, pl->b_sig + FS_FEDPOWER_NOISE_CAP_SIGMAS * pl->ring_std_max,
                         cfg->parties, err);
    if (rc != 0) {
        return rc;
    }
    if (std_max_all > 0.0) {
        int e = 0;
        (void)frexp(std_max_all / FPW_MAX_INT_SIGMA, &e);
        /* std_max_all < 2^e FPW_MAX_INT_SIGMA: f <= -e keeps it below the sampler's range */
        if (pl->fx.frac_bits > -e) {
            pl->fx.frac_bits = -e;
        }
        if (std_min_all > 0.0 && ldexp(std_min_all, pl->fx.frac_bits) < FPW_MIN_INT_SIGMA) {
            return fs_err_set(err, FS_ERANGE,
                              "fedpower: noise std %g is below the 64-bit fixed-point resolution "
                              "for value_bound %g and %u parties",
                              std_min_all, pl->b_sig, cfg->parties);
        }
    }
    pl->noise_bits = 1;
    if (cfg->alg == FS_FEDPOWER_UTILITY && pl->sigma > 0.0) {
        double cap = ceil(FS_FEDPOWER_NOISE_CAP_SIGMAS * ldexp(pl->sigma, pl->fx.frac_bits));
        int e = 0;
        (void)frexp(cap, &e); /* cap < 2^e */
        pl->noise_bits = (unsigned)e + 1;
    }
    return 0;
}

static void fill_nonformal(const struct fs_fedpower_config *cfg, struct fpw_plan *pl)
{
    struct fs_fedpower_privacy *pv = &pl->priv;
    double R = pl->syncs;

    pv->formal = 0;
    pv->releases = pl->syncs;
    pv->sensitivity = pl->sens;
    set_text(pv->relation, sizeof pv->relation,
             "Guo et al.: one row of one party's M_i changes; their noise assumes a sensitivity "
             "of ||Z||_max / min_i s_i per sync, which ignores the alignment D and the "
             "orthogonalisation (Liu et al. 2023, §5), so no formal guarantee holds");
    if (cfg->alg == FS_FEDPOWER_PLAIN) {
        set_text(pv->server_learns, sizeof pv->server_learns,
                 "every party's noisy aligned update Y'_i and ||Z_i||_max at each sync, and "
                 "Q^T M'_i Q of each party for the eigenvalues");
    } else {
        set_text(pv->server_learns, sizeof pv->server_learns,
                 "the weighted sum of the updates plus one party's noise (that of j, chosen by "
                 "the server and hidden from the parties) at each sync; each other party's noise "
                 "(seed and ot modes: individually; elementwise: their sum); the exact sum of "
                 "w_i Q^T M'_i Q for the eigenvalues");
    }
    if (pl->sigma > 0.0 && isfinite(pl->sens)) {
        double eps = 0.0;
        double ratio = pl->sens / pl->sigma;
        pv->rho_round = 0.5 * ratio * ratio;
        pv->rho_total = R * pv->rho_round;
        pv->paper_eps_round = ratio * sqrt(2.0 * log(1.25 * R / cfg->delta));
        pv->paper_eps_total = R * pv->paper_eps_round;
        pv->paper_delta_total = cfg->delta;
        pv->paper_formula_valid = pv->paper_eps_round < 1.0;
        if (fs_zcdp_eps_optimal(pv->rho_round, cfg->delta, &eps, NULL) == 0) {
            pv->eps_round = eps;
        }
        if (fs_zcdp_eps_optimal(pv->rho_total, cfg->delta, &eps, NULL) == 0) {
            pv->eps_total = eps;
        }
        set_text(pv->note, sizeof pv->note,
                 "no formal DP guarantee; the epsilons use Guo et al.'s assumed sensitivity and "
                 "are shown for comparison only");
    } else {
        pv->rho_round = INFINITY;
        pv->rho_total = INFINITY;
        pv->eps_round = INFINITY;
        pv->eps_total = INFINITY;
        pv->paper_eps_round = INFINITY;
        pv->paper_eps_total = INFINITY;
        pv->paper_delta_total = cfg->delta;
        set_text(pv->note, sizeof pv->note,
                 pl->sigma == 0.0 ? "no noise: no privacy beyond what the protocol hides"
                                  : "no formal DP guarantee (row counts unknown)");
    }
    pv->weak = 1;
    pv->allowed = 1;
}

static int fill_formal(const struct fs_fedpower_config *cfg, struct fpw_plan *pl,
                       struct fs_err *err)
{
    struct fs_fedpower_privacy *pv = &pl->priv;
    double two_f = ldexp(1.0, pl->fx.frac_bits);
    double sqrt_t = sqrt((double)cfg->threshold);
    double dim_it = (double)cfg->d * cfg->r;
    double dim_ray = (double)cfg->r * cfg->r;
    double c_disc, sp_min, tau, ratio, eps = 0.0;
    int rc;

    pv->formal = 1;
    pv->releases = cfg->iterations + (cfg->eigenvalues ? 1u : 0u);
    pv->sensitivity = pl->sens;
    if (cfg->alg == FS_FEDPOWER_PRIVATE) {
        /* Party i's weighted upload has sensitivity w_i Delta <= w_max Delta and
         * the sum carries noise w_max sigma: ratio Delta / sigma, as a local
         * iteration's. Rounding: iterations sqrt(d r) units on w_max Delta 2^f,
         * Rayleigh r units on w_max Delta_ray 2^f (worst over the weights). */
        c_disc = sqrt(dim_it) / (pl->w_max * pl->sens * two_f);
        if (cfg->eigenvalues) {
            c_disc = fmax(c_disc, cfg->r / (pl->w_max * pl->sens_ray * two_f));
        }
        sp_min = two_f * pl->w_max * pl->sigma / sqrt_t;
        if (cfg->eigenvalues) {
            sp_min = fmin(sp_min, two_f * pl->w_max * pl->sigma_ray / sqrt_t);
        }
        set_text(pv->relation, sizeof pv->relation,
                 "Liu et al. 2023, Alg. 3: one party's M'_i changes in one entry (j, k) and, "
                 "M'_i being symmetric, its mirror (k, j), each by at most 2 m_hat (entries "
                 "bounded by m_hat); Delta = 2 sqrt(2 r) m_hat z_hat per iteration (the "
                 "paper's Theorem 1 counts one entry: 2 sqrt(r) m_hat z_hat). Protects "
                 "covariance entries, not rows.");
        set_text(pv->server_learns, sizeof pv->server_learns,
                 "the secure sum of w_i M'_i Z at each sync, noised with variance >= (w_max "
                 "sigma)^2 in total over >= t survivors (distributed discrete Gaussian; party i "
                 "enters with weight w_i <= w_max), the survivor sets, and the noised sum of "
                 "w_i Q^T M'_i Q for the eigenvalues");
    } else {
        /* dp-ppm: noise Delta_l sigma, Delta_l >= sqrt(r/d) for an orthonormal iterate */
        double lo_row = sqrt((double)cfg->r / (double)cfg->d) * (1.0 - FPW_ORTH_SLACK);
        c_disc = sqrt(dim_it) / (lo_row * two_f);
        if (cfg->eigenvalues) {
            c_disc = fmax(c_disc, cfg->r / (lo_row * two_f));
        }
        sp_min = two_f * pl->sigma * lo_row / sqrt_t;
        set_text(pv->relation, sizeof pv->relation,
                 "Nicolas et al. 2024, eq. (12): the aggregate A = sum_i w_i M'_i changes by a "
                 "symmetric C with sqrt(sum_j ||C_j,:||_1^2) <= 1; Delta_l = max_j "
                 "||Z_l[j,:]||_2 of the public iterate (Thm. 3.1)");
        set_text(pv->server_learns, sizeof pv->server_learns,
                 "the secure sum of w_i M'_i Z + noise each iteration (variance >= Delta_l^2 "
                 "sigma^2 in total over >= t survivors), the survivor sets, and the noised sum "
                 "of w_i Q^T M'_i Q for the eigenvalues");
    }
    tau = kls_tau(sp_min, cfg->parties);
    ratio = pl->sens / pl->sigma * (1.0 + c_disc) + tau * sqrt(fmax(dim_it, dim_ray));
    pv->rho_round = 0.5 * ratio * ratio;
    pv->rho_total = pv->releases * pv->rho_round;
    rc = fs_zcdp_eps_optimal(pv->rho_round, cfg->delta, &eps, err);
    if (rc != 0) {
        return rc;
    }
    pv->eps_round = eps;
    rc = fs_zcdp_eps_optimal(pv->rho_total, cfg->delta, &eps, err);
    if (rc != 0) {
        return rc;
    }
    pv->eps_total = eps;
    if (cfg->alg == FS_FEDPOWER_PRIVATE) {
        rc = fs_dp_fedpower_private_eps_round(cfg->r, cfg->m_hat, cfg->z_hat, pl->sigma, cfg->delta,
                                              &pv->paper_eps_round, err);
        if (rc != 0) {
            return rc;
        }
        pv->paper_eps_total = pv->releases * pv->paper_eps_round;
        pv->paper_delta_total = fmin(1.0, pv->releases * cfg->delta);
        pv->paper_formula_valid = pv->paper_eps_round < 1.0;
    } else {
        double rho_p = 1.0 / (2.0 * pl->sigma * pl->sigma);
        rc = fs_zcdp_eps_simple(rho_p, cfg->delta, &pv->paper_eps_round, err);
        if (rc == 0) {
            rc = fs_zcdp_eps_simple(pv->releases * rho_p, cfg->delta, &pv->paper_eps_total, err);
        }
        if (rc != 0) {
            return rc;
        }
        pv->paper_delta_total = cfg->delta;
        /* its proof needs delta <= exp(-eps/4) */
        pv->paper_formula_valid = pv->paper_eps_total <= 4.0 * log(1.0 / cfg->delta);
    }
    if (cfg->calib == FS_FEDPOWER_SIGMA_FROM_EPS && pv->eps_total > cfg->eps * (1.0 + 1e-9)) {
        return fs_err_set(err, FS_EINTERNAL,
                          "fedpower: calibrated sigma gives eps %.17g above the target %.17g",
                          pv->eps_total, cfg->eps);
    }
    pv->weak = pv->eps_total > FS_FEDPOWER_WEAK_EPS;
    pv->allowed = !pv->weak || cfg->allow_weak_privacy;
    if (pv->weak && !cfg->allow_weak_privacy) {
        snprintf(pv->note, sizeof pv->note,
                 "total epsilon %.4g over %u releases exceeds %.0f: meaningless; refused (set "
                 "allow_weak_privacy to run it anyway)",
                 pv->eps_total, pv->releases, FS_FEDPOWER_WEAK_EPS);
    } else if (pv->weak) {
        snprintf(pv->note, sizeof pv->note,
                 "total epsilon %.4g over %u releases exceeds %.0f: weak privacy, run only "
                 "because allow_weak_privacy is set",
                 pv->eps_total, pv->releases, FS_FEDPOWER_WEAK_EPS);
    } else {
        snprintf(pv->note, sizeof pv->note,
                 "zCDP with the discrete Gaussian, noise calibrated to t = %u survivors; "
                 "optimal conversion to (eps, delta)",
                 cfg->threshold);
    }
    return 0;
}

int fpw_plan_make(const struct fs_fedpower_config *cfg, const uint64_t *rows, struct fpw_plan *pl,
                  struct fs_err *err)
{
    int rc = fs_fedpower_config_check(cfg, err);

    if (rc != 0) {
        return rc;
    }
    memset(pl, 0, sizeof *pl);
    pl->syncs = fs_fedpower_syncs(cfg);
    rc = resolve_sigma(cfg, rows, pl, err);
    if (rc == 0) {
        rc = resolve_ring(cfg, pl, err);
    }
    if (rc != 0) {
        return rc;
    }
    pl->priv.delta = cfg->delta;
    pl->priv.sigma = pl->sigma;
    pl->priv.sigma_server = pl->sigma_server;
    if (cfg->alg == FS_FEDPOWER_PRIVATE || cfg->alg == FS_FEDPOWER_DPPPM) {
        return fill_formal(cfg, pl, err);
    }
    fill_nonformal(cfg, pl);
    return 0;
}

int fs_fedpower_privacy_report(const struct fs_fedpower_config *cfg, const uint64_t *rows,
                               struct fs_fedpower_privacy *out, struct fs_err *err)
{
    struct fpw_plan pl;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_privacy_report: out is NULL");
    }
    rc = fpw_plan_make(cfg, rows, &pl, err);
    if (rc != 0) {
        return rc;
    }
    *out = pl.priv;
    return 0;
}

int fs_fedpower_party_rho(const struct fs_fedpower_config *cfg, const uint64_t *rows, double *rho,
                          struct fs_err *err)
{
    struct fs_fedpower_privacy pv;
    int rc;

    if (rho == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_party_rho: rho is NULL");
    }
    rc = fs_fedpower_privacy_report(cfg, rows, &pv, err);
    if (rc != 0) {
        return rc;
    }
    *rho = pv.formal ? pv.rho_total : INFINITY;
    return 0;
}
