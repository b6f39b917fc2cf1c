/* Shared between the fedpower*.c sources only (and the unit tests' debug hooks). */
#ifndef FS_PROTO_FEDPOWER_INTERNAL_H
#define FS_PROTO_FEDPOWER_INTERNAL_H

#include "../la/fixedpt.h"
#include "fedpower.h"

/* Relative slack a party allows on the orthonormality of a received Q / Z
 * before refusing it (the sensitivity bounds use row norms <= 1). */
#define FPW_ORTH_SLACK 1e-6
/* Largest explicit M'_i (entries) the automatic choice forms: 2^22 = 32 MiB. */
#define FPW_COV_MAX_ENTRIES ((size_t)1 << 22)
/* Smallest integer std of any discrete noise (keeps KLS21's tau and the
 * rounding term negligible). */
#define FPW_MIN_INT_SIGMA 16.0
/* Largest integer std (fs_dgauss_sample accepts up to 2^52). */
#define FPW_MAX_INT_SIGMA 1125899906842624.0 /* 2^50 */

/* Everything the public parameters determine; computed identically by the
 * server and every party (fpw_plan_make). */
struct fpw_plan {
    uint64_t total_rows;  /* s */
    double w_max;         /* max_i s_i / s (1/parties, a lower bound, when rows are unknown) */
    double w_min;         /* min_i s_i / s over parties with rows (0 when unknown) */
    uint32_t syncs;       /* R = ceil(T / p) */
    double sigma;         /* resolved party std (dp-ppm: in units of Delta_l) */
    double sigma_server;  /* fedpower */
    double sens;          /* private: 2 sqrt(2 r) m_hat z_hat; dp-ppm: 1; others: nominal */
    double sens_ray;      /* private: 2 sqrt(2) m_hat (1 + slack); dp-ppm: 1 + slack */
    double sigma_ray;     /* private: sigma sens_ray / sens; dp-ppm: sigma */
    int ring;             /* secagg variant */
    struct fs_fixedpt fx; /* ring encoding, frac_bits f */
    double b_sig;         /* bound on |entries| of w_i M'_i Z */
    double ring_std_max;  /* bound on the per-party std of ring noise (real units, weights <= 1) */
    unsigned noise_bits;  /* utility elementwise: bits of a noise value */
    struct fs_fedpower_privacy priv;
};

/* Resolve the configuration (check it, σ from (ε, δ), fixed point, privacy). */
int fpw_plan_make(const struct fs_fedpower_config *cfg, const uint64_t *rows, struct fpw_plan *plan,
                  struct fs_err *err);

/* The iteration of sync q (0-based): min((q + 1) p, T). */
uint32_t fpw_sync_iter(const struct fs_fedpower_config *cfg, uint32_t q);

/* Round y (n values) to the grid 2^-f, add N_Z(0, (sigma 2^f)^2) from the
 * CSPRNG, and write back (the discrete Gaussian mechanism on a grid). */
int fpw_grid_noise(double *y, size_t n, int frac_bits, double sigma, struct fs_err *err);
/* fpw_grid_noise with the samples expanded from seed (fs_fedpower_noise_from_seed). */
int fpw_grid_noise_seeded(double *y, size_t n, int frac_bits, double sigma, const uint8_t seed[32],
                          struct fs_err *err);

/* Like fpw_grid_noise with a grid chosen for the values and sigma (plain fedpower). */
int fpw_real_noise(double *y, size_t n, double sigma, struct fs_err *err);

/* fpw_real_noise with the samples expanded from seed (fs_fedpower_noise_from_seed):
 * the same seed gives the same noise, so a restarted server re-adds it exactly. */
int fpw_real_noise_seeded(double *y, size_t n, double sigma, const uint8_t seed[32],
                          struct fs_err *err);

/* v[0..n) += noise (two's complement), refusing a sample beyond cap in magnitude. */
int fpw_ring_add_noise(uint64_t *v, const int64_t *noise, size_t n, int64_t cap,
                       struct fs_err *err);

/* Largest row 2-norm of a (Delta_l of Nicolas et al. 2024). */
double fpw_max_row_norm(const fs_mat *a);

/* Largest singular value of a (d x r, r small) via its Gram matrix. */
int fpw_spectral_norm(const fs_mat *a, double *out, struct fs_err *err);

/* Clip every entry of a to [-c, c]. */
void fpw_clip(fs_mat *a, double c);

/* ---- debug hooks for the unit tests (never used by services) ---------- */

/* The party's noise of its pending ring upload, in units of 2^-f (*n values). */
const int64_t *fs_fedpower_debug_party_noise(const fs_fedpower_party *p, size_t *n);
/* The aggregate Y of the last sync before orthogonalisation (renormalised, decoded). */
const fs_mat *fs_fedpower_debug_server_aggregate(const fs_fedpower_server *s);
/* j of the last noise exchange. */
uint32_t fs_fedpower_debug_server_chosen(const fs_fedpower_server *s);
/* The resolved plan. */
const struct fpw_plan *fs_fedpower_debug_server_plan(const fs_fedpower_server *s);

#endif
