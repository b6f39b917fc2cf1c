/* Configuration, Z_0, subspace metrics and small matrix helpers of the
 * power-method family. */
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/derive.h"
#include "../crypto/prg.h"
#include "../la/qr.h"
#include "fedpower_internal.h"

void fs_fedpower_config_default(struct fs_fedpower_config *cfg, enum fs_fedpower_alg alg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->alg = alg;
    cfg->r = 10;
    cfg->k = 10;
    cfg->iterations = 92;
    cfg->sync_every = alg == FS_FEDPOWER_DPPPM ? 1 : 4;
    cfg->align = FS_FEDPOWER_ALIGN_GLOBAL;
    cfg->eigenvalues = 1;
    cfg->calib = FS_FEDPOWER_SIGMA_GIVEN;
    cfg->delta = 1e-5;
    cfg->dppm_calib = FS_FEDPOWER_DPPPM_PAPER;
    cfg->m_hat_mode = FS_FEDPOWER_MHAT_CLIP;
    cfg->noise_exchange = FS_NOISEX_SEED;
    cfg->paillier_bits = 3072;
    cfg->cov = FS_FEDPOWER_COV_AUTO;
}

static const char *const ALG_NAMES[] = {NULL, "fedpower", "fedpower-utility", "fedpower-private",
                                        "dp-ppm"};

const char *fs_fedpower_alg_name(enum fs_fedpower_alg alg)
{
    if (alg >= FS_FEDPOWER_PLAIN && alg <= FS_FEDPOWER_DPPPM) {
        return ALG_NAMES[alg];
    }
    return "unknown";
}

int fs_fedpower_alg_parse(const char *s, enum fs_fedpower_alg *out, struct fs_err *err)
{
    for (int a = FS_FEDPOWER_PLAIN; a <= FS_FEDPOWER_DPPPM; a++) {
        if (s != NULL && strcmp(s, ALG_NAMES[a]) == 0) {
            *out = (enum fs_fedpower_alg)a;
            return 0;
        }
    }
    return fs_err_set(err, FS_EINVAL,
                      "algorithm: expected fedpower, fedpower-utility, fedpower-private or dp-ppm");
}

const char *fs_fedpower_align_name(enum fs_fedpower_align a)
{
    switch (a) {
    case FS_FEDPOWER_ALIGN_GLOBAL:
        return "global";
    case FS_FEDPOWER_ALIGN_CLIENT1:
        return "client1";
    case FS_FEDPOWER_ALIGN_NONE:
        return "none";
    }
    return "unknown";
}

int fs_fedpower_align_parse(const char *s, enum fs_fedpower_align *out, struct fs_err *err)
{
    static const enum fs_fedpower_align all[] = {FS_FEDPOWER_ALIGN_GLOBAL,
                                                 FS_FEDPOWER_ALIGN_CLIENT1, FS_FEDPOWER_ALIGN_NONE};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (s != NULL && strcmp(s, fs_fedpower_align_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return fs_err_set(err, FS_EINVAL, "align: expected global, client1 or none");
}

int fs_fedpower_uses_secagg(enum fs_fedpower_alg alg)
{
    return alg == FS_FEDPOWER_UTILITY || alg == FS_FEDPOWER_PRIVATE || alg == FS_FEDPOWER_DPPPM;
}

uint32_t fs_fedpower_syncs(const struct fs_fedpower_config *cfg)
{
    if (cfg->sync_every == 0) {
        return 0;
    }
    return (cfg->iterations + cfg->sync_every - 1) / cfg->sync_every;
}

uint32_t fs_fedpower_exchanges(const struct fs_fedpower_config *cfg)
{
    uint32_t syncs = fs_fedpower_syncs(cfg);

    if (cfg->alg != FS_FEDPOWER_UTILITY) {
        return 0;
    }
    return cfg->exchange_once && syncs > 0 ? 1u : syncs;
}

int fs_fedpower_sync_seed(uint8_t out[32], const uint8_t master[32], uint32_t q, struct fs_err *err)
{
    return fs_derive_key(out, master, "fedpower/exchange-sync", q, 0, err);
}

uint32_t fs_fedpower_aggregations(const struct fs_fedpower_config *cfg)
{
    if (!fs_fedpower_uses_secagg(cfg->alg)) {
        return 0;
    }
    return fs_fedpower_syncs(cfg) + (cfg->eigenvalues ? 1u : 0u);
}

uint32_t fpw_sync_iter(const struct fs_fedpower_config *cfg, uint32_t q)
{
    uint64_t t = ((uint64_t)q + 1) * cfg->sync_every;
    return t < cfg->iterations ? (uint32_t)t : cfg->iterations;
}

static int pos_finite(double x)
{
    return isfinite(x) && x > 0.0;
}

int fs_fedpower_config_check(const struct fs_fedpower_config *cfg, struct fs_err *err)
{
    static const char fn[] = "fedpower config";

    if (cfg == NULL) {
        return fs_err_set(err, FS_EINVAL, "%s: NULL", fn);
    }
    if (cfg->alg < FS_FEDPOWER_PLAIN || cfg->alg > FS_FEDPOWER_DPPPM) {
        return fs_err_set(err, FS_EINVAL, "%s: unknown algorithm %d", fn, (int)cfg->alg);
    }
    if (cfg->parties < 1 || cfg->parties > FS_FEDPOWER_MAX_PARTIES) {
        return fs_err_set(err, FS_EINVAL, "%s: parties %u outside 1..%u", fn, cfg->parties,
                          FS_FEDPOWER_MAX_PARTIES);
    }
    if (fs_fedpower_uses_secagg(cfg->alg) &&
        (cfg->threshold < 1 || cfg->threshold > cfg->parties)) {
        return fs_err_set(err, FS_EINVAL, "%s: threshold %u outside 1..%u", fn, cfg->threshold,
                          cfg->parties);
    }
    if (cfg->d < 1 || cfg->d > FS_FEDPOWER_MAX_DIM) {
        return fs_err_set(err, FS_EINVAL, "%s: d %u outside 1..%u", fn, cfg->d,
                          FS_FEDPOWER_MAX_DIM);
    }
    if (cfg->r < 1 || cfg->r > FS_FEDPOWER_MAX_RANK || cfg->r > cfg->d) {
        return fs_err_set(err, FS_EINVAL, "%s: rank r %u outside 1..min(d, %u)", fn, cfg->r,
                          FS_FEDPOWER_MAX_RANK);
    }
    if (cfg->k < 1 || cfg->k > cfg->r) {
        return fs_err_set(err, FS_EINVAL, "%s: target rank k %u outside 1..r (%u)", fn, cfg->k,
                          cfg->r);
    }
    if (cfg->iterations < 1 || cfg->iterations > FS_FEDPOWER_MAX_ITERATIONS) {
        return fs_err_set(err, FS_EINVAL, "%s: iterations %u outside 1..%u", fn, cfg->iterations,
                          FS_FEDPOWER_MAX_ITERATIONS);
    }
    if (cfg->sync_every < 1 || cfg->sync_every > cfg->iterations) {
        return fs_err_set(err, FS_EINVAL, "%s: sync period p %u outside 1..T", fn, cfg->sync_every);
    }
    if (cfg->alg == FS_FEDPOWER_DPPPM && cfg->sync_every != 1) {
        return fs_err_set(err, FS_EINVAL, "%s: dp-ppm aggregates every iteration (p = 1)", fn);
    }
    if (cfg->align != FS_FEDPOWER_ALIGN_GLOBAL && cfg->align != FS_FEDPOWER_ALIGN_CLIENT1 &&
        cfg->align != FS_FEDPOWER_ALIGN_NONE) {
        return fs_err_set(err, FS_EINVAL, "%s: unknown alignment", fn);
    }
    if (cfg->align == FS_FEDPOWER_ALIGN_CLIENT1 && cfg->alg != FS_FEDPOWER_PLAIN) {
        return fs_err_set(err, FS_EINVAL,
                          "%s: align client1 needs every party's upload in the clear (fedpower "
                          "only); use align global",
                          fn);
    }
    if (cfg->calib != FS_FEDPOWER_SIGMA_GIVEN && cfg->calib != FS_FEDPOWER_SIGMA_FROM_EPS) {
        return fs_err_set(err, FS_EINVAL, "%s: unknown calibration", fn);
    }
    if (!(cfg->delta > 0.0 && cfg->delta < 1.0)) {
        return fs_err_set(err, FS_EINVAL, "%s: delta must be in (0, 1)", fn);
    }
    if (cfg->calib == FS_FEDPOWER_SIGMA_FROM_EPS && !pos_finite(cfg->eps)) {
        return fs_err_set(err, FS_EINVAL, "%s: eps must be finite and > 0", fn);
    }
    if (cfg->calib == FS_FEDPOWER_SIGMA_GIVEN) {
        int dp = cfg->alg == FS_FEDPOWER_PRIVATE || cfg->alg == FS_FEDPOWER_DPPPM;
        if (!isfinite(cfg->sigma) || cfg->sigma < 0.0 || (dp && cfg->sigma == 0.0)) {
            return fs_err_set(err, FS_EINVAL, "%s: sigma must be finite and %s", fn,
                              dp ? "> 0" : ">= 0");
        }
        if (!isfinite(cfg->sigma_server) || cfg->sigma_server < 0.0) {
            return fs_err_set(err, FS_EINVAL, "%s: sigma_server must be finite and >= 0", fn);
        }
    }
    if (cfg->alg == FS_FEDPOWER_PRIVATE) {
        if (!pos_finite(cfg->m_hat) || !pos_finite(cfg->z_hat)) {
            return fs_err_set(err, FS_EINVAL, "%s: fedpower-private needs m_hat > 0 and z_hat > 0",
                              fn);
        }
        if (cfg->m_hat_mode != FS_FEDPOWER_MHAT_CLIP &&
            cfg->m_hat_mode != FS_FEDPOWER_MHAT_REJECT) {
            return fs_err_set(err, FS_EINVAL, "%s: unknown m_hat mode", fn);
        }
    }
    if (cfg->alg == FS_FEDPOWER_DPPPM && cfg->dppm_calib != FS_FEDPOWER_DPPPM_PAPER &&
        cfg->dppm_calib != FS_FEDPOWER_DPPPM_ZCDP) {
        return fs_err_set(err, FS_EINVAL, "%s: unknown dp-ppm calibration", fn);
    }
    if (fs_fedpower_uses_secagg(cfg->alg)) {
        if (!isfinite(cfg->value_bound) || cfg->value_bound < 0.0 ||
            (cfg->value_bound == 0.0 && cfg->alg != FS_FEDPOWER_PRIVATE)) {
            return fs_err_set(err, FS_EINVAL,
                              "%s: %s needs value_bound > 0, a public bound on every party's "
                              "||M'_i||_2",
                              fn, fs_fedpower_alg_name(cfg->alg));
        }
    }
    if (cfg->alg == FS_FEDPOWER_UTILITY) {
        if (cfg->noise_exchange != FS_NOISEX_SEED && cfg->noise_exchange != FS_NOISEX_ELEMENTWISE &&
            cfg->noise_exchange != FS_NOISEX_OT) {
            return fs_err_set(err, FS_EINVAL, "%s: unknown noise exchange", fn);
        }
        /* ot has no Paillier key: paillier_bits is not used */
        if (fs_noisex_mode_paillier(cfg->noise_exchange) &&
            (cfg->paillier_bits < 256 || cfg->paillier_bits > 8192 || cfg->paillier_bits % 2)) {
            return fs_err_set(err, FS_EINVAL, "%s: paillier_bits %u", fn, cfg->paillier_bits);
        }
    }
    if (cfg->exchange_once &&
        (cfg->alg != FS_FEDPOWER_UTILITY || !fs_noisex_mode_seeded(cfg->noise_exchange))) {
        return fs_err_set(err, FS_EINVAL,
                          "%s: exchange_once needs fedpower-utility with the seed or ot exchange",
                          fn);
    }
    if (cfg->cov != FS_FEDPOWER_COV_AUTO && cfg->cov != FS_FEDPOWER_COV_IMPLICIT &&
        cfg->cov != FS_FEDPOWER_COV_EXPLICIT) {
        return fs_err_set(err, FS_EINVAL, "%s: unknown covariance mode", fn);
    }
    return 0;
}

int fs_fedpower_z0(const struct fs_fedpower_config *cfg, fs_mat **out, struct fs_err *err)
{
    fs_prg *prg = NULL;
    fs_mat *z = NULL;
    int rc;

    if (cfg == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_z0: NULL argument");
    }
    *out = NULL;
    if (cfg->d < 1 || cfg->r < 1 || cfg->r > cfg->d) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_z0: need 1 <= r <= d");
    }
    z = fs_mat_new_uninit(cfg->d, cfg->r);
    if (z == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fs_fedpower_z0: out of memory");
    }
    rc = fs_prg_new(&prg, cfg->z0_seed, NULL, err);
    if (rc == 0) {
        rc = fs_mat_fill_normal(z, prg, err);
    }
    if (rc == 0) {
        rc = fs_qr_orth(z, NULL, err);
    }
    fs_prg_free(prg);
    if (rc != 0) {
        fs_mat_free(z);
        return rc;
    }
    *out = z;
    return 0;
}

/* ---- helpers ------------------------------------------------------------- */

double fpw_max_row_norm(const fs_mat *a)
{
    double best = 0.0;

    for (size_t i = 0; i < a->rows; i++) {
        double s = 0.0;
        for (size_t j = 0; j < a->cols; j++) {
            double v = FS_MAT_AT(a, i, j);
            s += v * v;
        }
        if (s > best) {
            best = s;
        }
    }
    return sqrt(best);
}

void fpw_clip(fs_mat *a, double c)
{
    for (size_t j = 0; j < a->cols; j++) {
        for (size_t i = 0; i < a->rows; i++) {
            double *v = &FS_MAT_AT(a, i, j);
            if (*v > c) {
                *v = c;
            } else if (*v < -c) {
                *v = -c;
            }
        }
    }
}

/* Eigenvalues (ascending) of a symmetric k x k matrix held column-major in g (overwritten). */
static int sym_eigvals(double *g, size_t k, double *w, struct fs_err *err)
{
    lapack_int info = LAPACKE_dsyev(LAPACK_COL_MAJOR, 'N', 'U', (lapack_int)k, g, (lapack_int)k, w);
    if (info != 0) {
        return fs_err_set(err, FS_ENUMERIC, "dsyev failed (info %d)", (int)info);
    }
    return 0;
}

int fpw_spectral_norm(const fs_mat *a, double *out, struct fs_err *err)
{
    fs_mat *g = NULL;
    double *w = NULL;
    int rc;

    rc = fs_mat_mul('T', 'N', a, a, &g, err);
    if (rc != 0) {
        return rc;
    }
    w = malloc(a->cols * sizeof *w);
    if (w == NULL) {
        fs_mat_free(g);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = sym_eigvals(g->data, a->cols, w, err);
    if (rc == 0) {
        double top = w[a->cols - 1];
        *out = top > 0.0 ? sqrt(top) : 0.0;
    }
    free(w);
    fs_mat_free(g);
    return rc;
}

int fs_fedpower_subspace_dist(const fs_mat *a, const fs_mat *b, double *dist, double *sin_theta,
                              struct fs_err *err)
{
    fs_mat *atb = NULL;
    fs_mat *w = NULL;
    int rc;

    if (a == NULL || b == NULL || dist == NULL) {
        return fs_err_set(err, FS_EINVAL, "subspace distance: NULL argument");
    }
    if (a->rows != b->rows || a->cols != b->cols || a->cols == 0) {
        return fs_err_set(err, FS_EINVAL, "subspace distance: shapes %zux%zu and %zux%zu", a->rows,
                          a->cols, b->rows, b->cols);
    }
    /* W = B - A (A^T B): the part of B outside span(A); ||P_A - P_B||_F^2 = 2 ||W||_F^2
     * for orthonormal bases of equal dimension. */
    rc = fs_mat_mul('T', 'N', a, b, &atb, err);
    if (rc == 0) {
        w = fs_mat_dup(b);
        if (w == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "subspace distance: out of memory");
        }
    }
    if (rc == 0) {
        rc = fs_mat_gemm('N', 'N', -1.0, a, atb, 1.0, w, err);
    }
    if (rc == 0) {
        *dist = sqrt(2.0) * fs_mat_norm_fro(w);
        if (sin_theta != NULL) {
            rc = fpw_spectral_norm(w, sin_theta, err);
        }
    }
    fs_mat_free(w);
    fs_mat_free(atb);
    return rc;
}
