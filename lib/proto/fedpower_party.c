/* Party side of the power-method family (see fedpower.h). */
#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/derive.h"
#include "../crypto/rand.h"
#include "../dp/dgauss.h"
#include "../la/procrustes.h"
#include "../la/qr.h"
#include "fedpower_internal.h"

/* Hard cap on an explicit M'_i even when clipping needs it: 2^28 entries = 2 GiB. */
#define COV_HARD_MAX ((size_t)1 << 28)

struct fs_fedpower_party {
    struct fs_fedpower_config cfg;
    struct fpw_plan plan;
    uint32_t id;
    const fs_mat *dense; /* borrowed */
    const fs_csr *csr;   /* borrowed */
    fs_mat *cov;         /* explicit M'_i (clipped for private), or NULL */
    uint64_t rows;
    double weight;
    fs_mat *z;        /* local iterate Z^(i) */
    fs_mat *zref;     /* last broadcast */
    fs_mat *y;        /* d x r scratch */
    fs_mat *tmp;      /* s_i x r scratch (dense implicit product) */
    fs_mat *plain;    /* d x r sync upload (plain fedpower) */
    fs_mat *plain_rr; /* r x r eigenvalue upload (plain fedpower) */
    double plain_zmax;
    int has_plain;
    uint64_t *ring;
    size_t ring_len; /* 0 = nothing pending */
    int64_t *noise;  /* the noise of the pending ring upload (units of 2^-f) */
    size_t noise_len;
    uint8_t seed[FS_NOISEX_SEED_LEN];   /* utility seed and ot modes */
    uint8_t master[FS_NOISEX_SEED_LEN]; /* exchange_once: every sync's seed derives from it */
    int has_master;
    int exchange_pending; /* utility: a sync upload whose noise may be exchanged */
    uint8_t *resp_sel;    /* the selector last answered (this sync), or NULL */
    uint8_t *resp;        /* and the response sent: a retry gets the same bytes */
    size_t resp_len;
    uint32_t next_iter;
    int done;
    fs_noisex_client *nx;
    int has_det;     /* noise and re-randomizers derived from det (set_secret) */
    uint8_t det[32]; /* the participation's secret: never sent */
};

/* Kinds of noise a party draws (the first index of its derived keys). */
enum { NZ_SYNC = 0, NZ_RAYLEIGH = 1, NZ_LOCAL = 2, NZ_PLAIN = 3 };

/* The key of one noise draw (kind, iteration): derived from the secret, so
 * a restarted party re-adds exactly the noise it drew before. */
static int noise_key(const fs_fedpower_party *p, uint32_t kind, uint32_t tag, uint8_t key[32],
                     struct fs_err *err)
{
    return fs_derive_key(key, p->det, "fedpower/noise", kind, tag, err);
}

static void wipe_free(fs_mat *m)
{
    if (m != NULL) {
        fs_mat_wipe(m);
    }
    fs_mat_free(m);
}

/* ---- covariance products ------------------------------------------------- */

static double col_sq_max(const fs_fedpower_party *p, size_t *arg)
{
    size_t d = p->cfg.d;
    double *acc = calloc(d, sizeof *acc);
    double best = 0.0;

    *arg = 0;
    if (acc == NULL) {
        return NAN;
    }
    if (p->csr != NULL) {
        for (size_t q = 0; q < p->csr->nnz; q++) {
            acc[p->csr->colidx[q]] += p->csr->vals[q] * p->csr->vals[q];
        }
    } else {
        for (size_t j = 0; j < d; j++) {
            const double *c = p->dense->data + j * p->dense->ld;
            double s = 0.0;
            for (size_t i = 0; i < p->dense->rows; i++) {
                s += c[i] * c[i];
            }
            acc[j] = s;
        }
    }
    for (size_t j = 0; j < d; j++) {
        if (acc[j] > best) {
            best = acc[j];
            *arg = j;
        }
    }
    free(acc);
    return best / (double)p->rows;
}

static int form_cov(fs_fedpower_party *p, struct fs_err *err)
{
    size_t d = p->cfg.d;
    int rc = 0;

    if ((size_t)d * d > COV_HARD_MAX) {
        return fs_err_set(err, FS_ERANGE, "party %u: d = %zu is too large to form M'_i", p->id, d);
    }
    p->cov = fs_mat_new(d, d);
    if (p->cov == NULL) {
        return fs_err_set(err, FS_ENOMEM, "party %u: out of memory for M'_i", p->id);
    }
    if (p->csr != NULL) {
        const fs_csr *a = p->csr;
        for (size_t i = 0; i < a->rows; i++) {
            for (size_t u = a->rowptr[i]; u < a->rowptr[i + 1]; u++) {
                double vu = a->vals[u];
                double *col = p->cov->data + (size_t)a->colidx[u] * p->cov->ld;
                for (size_t v = a->rowptr[i]; v < a->rowptr[i + 1]; v++) {
                    col[a->colidx[v]] += vu * a->vals[v];
                }
            }
        }
        fs_mat_scale(p->cov, 1.0 / (double)p->rows);
    } else {
        rc = fs_mat_gemm('T', 'N', 1.0 / (double)p->rows, p->dense, p->dense, 0.0, p->cov, err);
    }
    return rc;
}

/* Explicit M'_i when the job is cheaper that way (or when forced). */
static int want_explicit(const fs_fedpower_party *p)
{
    double d = p->cfg.d;
    double r = p->cfg.r;
    double iters = (double)p->cfg.iterations + (p->cfg.eigenvalues ? 1.0 : 0.0);
    double implicit, form;

    if (p->cfg.cov == FS_FEDPOWER_COV_EXPLICIT) {
        return 1;
    }
    if (p->cfg.cov == FS_FEDPOWER_COV_IMPLICIT ||
        (size_t)p->cfg.d * p->cfg.d > FPW_COV_MAX_ENTRIES) {
        return 0;
    }
    if (p->csr != NULL) {
        double pairs = 0.0;
        for (size_t i = 0; i < p->csr->rows; i++) {
            double m = (double)(p->csr->rowptr[i + 1] - p->csr->rowptr[i]);
            pairs += m * m;
        }
        implicit = 4.0 * (double)p->csr->nnz * r;
        form = 2.0 * pairs;
    } else {
        implicit = 4.0 * (double)p->rows * d * r;
        form = 2.0 * (double)p->rows * d * d;
    }
    return form + iters * 2.0 * d * d * r < iters * implicit;
}

/* y = M'_i z */
static int cov_apply(fs_fedpower_party *p, const fs_mat *z, fs_mat *y, struct fs_err *err)
{
    double inv = 1.0 / (double)p->rows;
    int rc;

    if (p->cov != NULL) {
        return fs_mat_gemm('N', 'N', 1.0, p->cov, z, 0.0, y, err);
    }
    if (p->csr != NULL) {
        return fs_csr_ata_mul(p->csr, z, inv, y, err);
    }
    if (p->tmp == NULL || p->tmp->cols != z->cols) {
        fs_mat_free(p->tmp);
        p->tmp = fs_mat_new_uninit(p->rows, z->cols);
        if (p->tmp == NULL) {
            return fs_err_set(err, FS_ENOMEM, "party %u: out of memory", p->id);
        }
    }
    rc = fs_mat_gemm('N', 'N', 1.0, p->dense, z, 0.0, p->tmp, err);
    if (rc == 0) {
        rc = fs_mat_gemm('T', 'N', inv, p->dense, p->tmp, 0.0, y, err);
    }
    return rc;
}

/* ---- creation ------------------------------------------------------------ */

static int check_data(const fs_fedpower_party *p, const uint64_t *rows, struct fs_err *err)
{
    size_t nr, nc;

    if ((p->dense == NULL) == (p->csr == NULL)) {
        return fs_err_set(err, FS_EINVAL, "party %u: give exactly one of dense and CSR data",
                          p->id);
    }
    nr = p->dense != NULL ? p->dense->rows : p->csr->rows;
    nc = p->dense != NULL ? p->dense->cols : p->csr->cols;
    if (nc != p->cfg.d) {
        return fs_err_set(err, FS_EINVAL, "party %u: data has %zu columns, the job %u", p->id, nc,
                          p->cfg.d);
    }
    if (nr < 1 || rows == NULL || rows[p->id - 1] != nr) {
        return fs_err_set(err, FS_EINVAL,
                          "party %u: data has %zu rows but the job's row counts say otherwise",
                          p->id, nr);
    }
    if (p->dense != NULL) {
        size_t bi = 0, bj = 0;
        if (p->dense->data == NULL || p->dense->ld < p->dense->rows) {
            return fs_err_set(err, FS_EINVAL, "party %u: invalid matrix", p->id);
        }
        if (!fs_mat_all_finite(p->dense, &bi, &bj)) {
            return fs_err_set(err, FS_EINVAL, "party %u: entry (%zu, %zu) is not finite", p->id, bi,
                              bj);
        }
        return 0;
    }
    return fs_csr_check(p->csr, err);
}

/* fedpower-private: entries of M'_i bounded by m_hat. M'_i is positive
 * semidefinite, so its largest |entry| is on the diagonal (|m_jk| <=
 * sqrt(m_jj m_kk)): column sums of squares suffice, no d x d needed. */
static int apply_m_hat(fs_fedpower_party *p, int *must_form, struct fs_err *err)
{
    size_t arg = 0;
    double top = col_sq_max(p, &arg);

    *must_form = 0;
    if (isnan(top)) {
        return fs_err_set(err, FS_ENOMEM, "party %u: out of memory", p->id);
    }
    if (top <= p->cfg.m_hat) {
        return 0;
    }
    if (p->cfg.m_hat_mode == FS_FEDPOWER_MHAT_REJECT) {
        return fs_err_set(err, FS_EINVAL,
                          "party %u: entry (%zu, %zu) of M'_i exceeds m_hat = %g (m_hat_mode "
                          "reject)",
                          p->id, arg, arg, p->cfg.m_hat);
    }
    *must_form = 1;
    return 0;
}

int fs_fedpower_party_new(const struct fs_fedpower_config *cfg, const uint64_t *rows, uint32_t id,
                          const fs_mat *dense, const fs_csr *csr, fs_fedpower_party **out,
                          struct fs_err *err)
{
    fs_fedpower_party *p = NULL;
    size_t dr;
    int must_form = 0;
    int rc;

    if (out == NULL || cfg == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_party_new: NULL argument");
    }
    *out = NULL;
    p = calloc(1, sizeof *p);
    if (p == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fs_fedpower_party_new: out of memory");
    }
    p->cfg = *cfg;
    p->id = id;
    p->dense = dense;
    p->csr = csr;
    rc = fpw_plan_make(cfg, rows, &p->plan, err);
    if (rc != 0) {
        goto out;
    }
    if (id < 1 || id > cfg->parties) {
        rc = fs_err_set(err, FS_EINVAL, "fs_fedpower_party_new: id %u outside 1..%u", id,
                        cfg->parties);
        goto out;
    }
    if (!p->plan.priv.allowed) {
        rc = fs_err_set(err, FS_EINVAL, "party %u refuses the job: %s", id, p->plan.priv.note);
        goto out;
    }
    rc = check_data(p, rows, err);
    if (rc != 0) {
        goto out;
    }
    p->rows = rows[id - 1];
    p->weight = (double)p->rows / (double)p->plan.total_rows;
    if (cfg->alg == FS_FEDPOWER_PRIVATE) {
        rc = apply_m_hat(p, &must_form, err);
        if (rc != 0) {
            goto out;
        }
    }
    if (must_form || want_explicit(p)) {
        rc = form_cov(p, err);
        if (rc != 0) {
            goto out;
        }
        if (cfg->alg == FS_FEDPOWER_PRIVATE) {
            fpw_clip(p->cov, cfg->m_hat);
        }
    }
    dr = (size_t)cfg->d * cfg->r;
    p->z = fs_mat_new(cfg->d, cfg->r);
    p->zref = fs_mat_new(cfg->d, cfg->r);
    p->y = fs_mat_new(cfg->d, cfg->r);
    p->plain = fs_mat_new(cfg->d, cfg->r);
    p->ring = calloc(dr, sizeof *p->ring);
    p->noise = calloc(dr, sizeof *p->noise);
    if (p->z == NULL || p->zref == NULL || p->y == NULL || p->plain == NULL || p->ring == NULL ||
        p->noise == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "fs_fedpower_party_new: out of memory");
        goto out;
    }
    *out = p;
    p = NULL;
out:
    fs_fedpower_party_free(p);
    return rc;
}

/* ---- uploads ----------------------------------------------------------- */

static void forget_pending(fs_fedpower_party *p)
{
    if (p->noise_len > 0) {
        OPENSSL_cleanse(p->noise, p->noise_len * sizeof *p->noise);
    }
    OPENSSL_cleanse(p->seed, sizeof p->seed);
    free(p->resp_sel);
    free(p->resp);
    p->resp_sel = NULL;
    p->resp = NULL;
    p->resp_len = 0;
    p->noise_len = 0;
    p->ring_len = 0;
    p->has_plain = 0;
    p->exchange_pending = 0;
}

static int64_t ring_cap(const fs_fedpower_party *p)
{
    return (int64_t)ceil(
        ldexp(FS_FEDPOWER_NOISE_CAP_SIGMAS * p->plan.ring_std_max, p->plan.fx.frac_bits));
}

/* ring = encode(w_i v) for the n values of v (v is scaled in place). */
static int ring_encode(fs_fedpower_party *p, fs_mat *v, struct fs_err *err)
{
    size_t n = v->rows * v->cols;

    fs_mat_scale(v, p->weight);
    for (size_t j = 0; j < v->cols; j++) {
        for (size_t i = 0; i < v->rows; i++) {
            if (!(fabs(FS_MAT_AT(v, i, j)) <= p->plan.b_sig)) {
                return fs_err_set(err, FS_ERANGE,
                                  "party %u: entry (%zu, %zu) of w_i M'_i Z exceeds value_bound "
                                  "%g (or is not finite)",
                                  p->id, i, j, p->plan.b_sig);
            }
        }
    }
    /* v is compact (ld = rows): the column-major data is the vector */
    return fs_fixedpt_encode(&p->plan.fx, v->data, p->ring, n, err);
}

/* exchange_once: the seed of the sync that follows broadcast iteration iter,
 * from the job's master seed (drawn, or derived from the secret, once). */
static int sync_seed(fs_fedpower_party *p, uint32_t iter, struct fs_err *err)
{
    int rc = 0;

    if (!p->has_master) {
        rc = p->has_det ? fs_derive_key(p->master, p->det, "fedpower/exchange-master", 0, 0, err)
                        : fs_rand_bytes(p->master, sizeof p->master, err);
        p->has_master = rc == 0;
    }
    return rc != 0 ? rc : fs_fedpower_sync_seed(p->seed, p->master, iter / p->cfg.sync_every, err);
}

/* Integer noise with per-party std sigma (real units) into p->noise[0..n) and the ring. */
static int ring_noise(fs_fedpower_party *p, size_t n, double sigma, int seeded, uint32_t kind,
                      uint32_t tag, struct fs_err *err)
{
    double s_int = ldexp(sigma, p->plan.fx.frac_bits);
    uint8_t key[32];
    int rc = 0;

    p->noise_len = n;
    if (seeded && p->cfg.exchange_once) {
        rc = sync_seed(p, tag, err);
    } else if (seeded) {
        rc = p->has_det ? fs_derive_key(p->seed, p->det, "fedpower/exchange-seed", tag, 0, err)
                        : fs_rand_bytes(p->seed, sizeof p->seed, err);
    }
    if (rc != 0 || sigma == 0.0) {
        memset(p->noise, 0, n * sizeof *p->noise);
        return rc;
    }
    if (seeded) {
        rc = fs_fedpower_noise_from_seed(p->seed, s_int, p->noise, n, err);
    } else if (p->has_det) {
        /* the same exact sampler on a key stream instead of the CSPRNG */
        rc = noise_key(p, kind, tag, key, err);
        if (rc == 0) {
            rc = fs_fedpower_noise_from_seed(key, s_int, p->noise, n, err);
        }
        OPENSSL_cleanse(key, sizeof key);
    } else {
        rc = fs_dgauss_sample(s_int, p->noise, n, err);
    }
    if (rc == 0) {
        rc = fpw_ring_add_noise(p->ring, p->noise, n, ring_cap(p), err);
    }
    return rc;
}

/* fedpower-private's noise on the local iterate of iteration t (p->y). */
static int local_noise(fs_fedpower_party *p, uint32_t t, size_t dr, struct fs_err *err)
{
    uint8_t key[32];
    int rc;

    if (!p->has_det) {
        return fpw_grid_noise(p->y->data, dr, p->plan.fx.frac_bits, p->plan.sigma, err);
    }
    rc = noise_key(p, NZ_LOCAL, t, key, err);
    if (rc == 0) {
        rc = fpw_grid_noise_seeded(p->y->data, dr, p->plan.fx.frac_bits, p->plan.sigma, key, err);
    }
    OPENSSL_cleanse(key, sizeof key);
    return rc;
}

/* Local iterations iter+1 .. t_sync-1 on p->z. */
static int local_iterations(fs_fedpower_party *p, uint32_t iter, uint32_t t_sync,
                            struct fs_err *err)
{
    size_t dr = (size_t)p->cfg.d * p->cfg.r;
    int priv = p->cfg.alg == FS_FEDPOWER_PRIVATE;
    int rc = 0;

    for (uint32_t t = iter + 1; t < t_sync && rc == 0; t++) {
        rc = cov_apply(p, p->z, p->y, err);
        if (rc == 0 && priv) {
            /* the local iterate feeds the next upload: full sigma on its own */
            rc = local_noise(p, t, dr, err);
        }
        if (rc == 0) {
            rc = fs_mat_copy(p->z, p->y, err);
        }
        if (rc == 0) {
            rc = fs_qr_orth(p->z, NULL, err);
        }
        if (rc == 0 && priv) {
            fpw_clip(p->z, p->cfg.z_hat);
        }
    }
    return rc;
}

static int sync_upload(fs_fedpower_party *p, uint32_t iter, struct fs_err *err)
{
    const struct fs_fedpower_config *c = &p->cfg;
    uint32_t t_sync = iter + c->sync_every < c->iterations ? iter + c->sync_every : c->iterations;
    size_t dr = (size_t)c->d * c->r;
    double sqrt_t = sqrt((double)c->threshold);
    double zmax, dl = 0.0;
    int rc;

    rc = fs_mat_copy(p->zref, p->z, err);
    if (rc == 0 && c->alg == FS_FEDPOWER_PRIVATE) {
        fpw_clip(p->z, c->z_hat); /* the sensitivity needs |z| <= z_hat: enforced here */
    }
    if (rc == 0 && c->alg == FS_FEDPOWER_DPPPM) {
        dl = fpw_max_row_norm(p->z);
        if (!(dl > 0.0 && dl <= 1.0 + FPW_ORTH_SLACK)) {
            rc = fs_err_set(err, FS_EINVAL,
                            "party %u: the broadcast iterate has a row norm %g outside (0, 1]",
                            p->id, dl);
        }
    }
    if (rc == 0) {
        rc = local_iterations(p, iter, t_sync, err);
    }
    if (rc != 0) {
        return rc;
    }
    zmax = fs_mat_max_abs(p->z);
    rc = cov_apply(p, p->z, p->y, err);
    if (rc == 0 && (c->alg == FS_FEDPOWER_PLAIN || c->alg == FS_FEDPOWER_UTILITY) &&
        c->align == FS_FEDPOWER_ALIGN_GLOBAL && t_sync - iter > 1) {
        /* D = polar(Y^T Z_ref); with no local step Z^(i) = Z_ref and D = I exactly */
        fs_mat *ya = NULL;
        rc = fs_procrustes_align(p->y, p->zref, &ya, NULL, err);
        if (rc == 0) {
            rc = fs_mat_copy(p->y, ya, err);
        }
        fs_mat_free(ya);
    }
    if (rc != 0) {
        return rc;
    }
    switch (c->alg) {
    case FS_FEDPOWER_PLAIN:
        rc = fs_mat_copy(p->plain, p->y, err);
        if (rc == 0) {
            if (p->has_det) {
                uint8_t key[32];
                rc = noise_key(p, NZ_PLAIN, iter, key, err);
                if (rc == 0) {
                    rc = fpw_real_noise_seeded(p->plain->data, dr, zmax * p->plan.sigma, key, err);
                }
                OPENSSL_cleanse(key, sizeof key);
            } else {
                rc = fpw_real_noise(p->plain->data, dr, zmax * p->plan.sigma, err);
            }
        }
        p->plain_zmax = zmax;
        p->has_plain = rc == 0;
        break;
    case FS_FEDPOWER_UTILITY:
        /* N(0, sigma^2) on this party's own Y, as in Alg. 1: w_i sigma on w_i Y */
        rc = ring_encode(p, p->y, err);
        if (rc == 0) {
            rc = ring_noise(p, dr, p->weight * p->plan.sigma,
                            fs_noisex_mode_seeded(c->noise_exchange), NZ_SYNC, iter, err);
        }
        /* exchange_once: only the first sync's exchange (its master seed) */
        p->exchange_pending = rc == 0 && (!c->exchange_once || iter == 0);
        break;
    case FS_FEDPOWER_PRIVATE:
        rc = ring_encode(p, p->y, err);
        if (rc == 0) {
            rc = ring_noise(p, dr, p->plan.w_max * p->plan.sigma / sqrt_t, 0, NZ_SYNC, iter, err);
        }
        break;
    case FS_FEDPOWER_DPPPM:
        rc = ring_encode(p, p->y, err);
        if (rc == 0) {
            rc = ring_noise(p, dr, dl * p->plan.sigma / sqrt_t, 0, NZ_SYNC, iter, err);
        }
        break;
    }
    if (rc == 0 && c->alg != FS_FEDPOWER_PLAIN) {
        p->ring_len = dr;
    }
    if (rc == 0) {
        p->next_iter = t_sync;
    }
    return rc;
}

/* The eigenvalue release: w_i Q^T M'_i Q (+ noise for the DP algorithms). */
static int rayleigh_upload(fs_fedpower_party *p, const fs_mat *q, struct fs_err *err)
{
    const struct fs_fedpower_config *c = &p->cfg;
    fs_mat *rr = NULL;
    double sqrt_t = sqrt((double)c->threshold);
    size_t r = c->r;
    double dray = 0.0;
    int rc = 0;

    if (c->alg == FS_FEDPOWER_PRIVATE || c->alg == FS_FEDPOWER_DPPPM) {
        double nq = 0.0;
        rc = fpw_spectral_norm(q, &nq, err);
        if (rc != 0) {
            return rc;
        }
        dray = nq * fpw_max_row_norm(q);
        if (!(dray > 0.0 && dray <= 1.0 + FPW_ORTH_SLACK)) {
            return fs_err_set(err, FS_EINVAL,
                              "party %u: the final basis is not orthonormal (refusing the "
                              "eigenvalue release)",
                              p->id);
        }
    }
    rc = cov_apply(p, q, p->y, err);
    if (rc == 0) {
        rc = fs_mat_mul('T', 'N', q, p->y, &rr, err);
    }
    if (rc != 0) {
        fs_mat_free(rr);
        return rc;
    }
    for (size_t j = 0; j < r; j++) {
        for (size_t i = j + 1; i < r; i++) {
            double s = 0.5 * (FS_MAT_AT(rr, i, j) + FS_MAT_AT(rr, j, i));
            FS_MAT_AT(rr, i, j) = s;
            FS_MAT_AT(rr, j, i) = s;
        }
    }
    if (c->alg == FS_FEDPOWER_PLAIN) {
        fs_mat_free(p->plain_rr);
        p->plain_rr = rr;
        rr = NULL;
        p->plain_zmax = 0.0;
        p->has_plain = 1;
    } else {
        rc = ring_encode(p, rr, err);
        if (rc == 0 && c->alg == FS_FEDPOWER_PRIVATE) {
            rc = ring_noise(p, r * r, p->plan.w_max * p->plan.sigma_ray / sqrt_t, 0, NZ_RAYLEIGH,
                            p->next_iter, err);
        } else if (rc == 0 && c->alg == FS_FEDPOWER_DPPPM) {
            rc = ring_noise(p, r * r, dray * p->plan.sigma / sqrt_t, 0, NZ_RAYLEIGH, p->next_iter,
                            err);
        }
        if (rc == 0) {
            p->ring_len = r * r;
        }
    }
    wipe_free(rr);
    if (rc == 0) {
        p->done = 1;
    }
    return rc;
}

int fs_fedpower_party_receive(fs_fedpower_party *p, const fs_mat *z, uint32_t iter,
                              struct fs_err *err)
{
    size_t bi = 0, bj = 0;
    int rc;

    if (p == NULL || z == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_party_receive: NULL argument");
    }
    if (p->done) {
        return fs_err_set(err, FS_ESTATE, "party %u: the job is over", p->id);
    }
    if (iter != p->next_iter) {
        return fs_err_set(err, FS_ESTATE, "party %u: broadcast after iteration %u, expected %u",
                          p->id, iter, p->next_iter);
    }
    if (z->rows != p->cfg.d || z->cols != p->cfg.r) {
        return fs_err_set(err, FS_EINVAL, "party %u: broadcast Z is %zux%zu, expected %ux%u", p->id,
                          z->rows, z->cols, p->cfg.d, p->cfg.r);
    }
    if (!fs_mat_all_finite(z, &bi, &bj)) {
        return fs_err_set(err, FS_EINVAL, "party %u: broadcast entry (%zu, %zu) is not finite",
                          p->id, bi, bj);
    }
    forget_pending(p);
    if (iter == p->cfg.iterations) {
        if (!p->cfg.eigenvalues) {
            return fs_err_set(err, FS_ESTATE, "party %u: the job has no eigenvalue release", p->id);
        }
        rc = rayleigh_upload(p, z, err);
    } else {
        rc = fs_mat_copy(p->z, z, err);
        if (rc == 0) {
            rc = sync_upload(p, iter, err);
        }
    }
    if (rc != 0) {
        forget_pending(p);
    }
    return rc;
}

const fs_mat *fs_fedpower_party_plain_upload(const fs_fedpower_party *p, double *zmax)
{
    if (p == NULL || !p->has_plain) {
        return NULL;
    }
    if (zmax != NULL) {
        *zmax = p->plain_zmax;
    }
    return p->done ? p->plain_rr : p->plain;
}

const uint64_t *fs_fedpower_party_ring_upload(const fs_fedpower_party *p, size_t *len)
{
    if (p == NULL || p->ring_len == 0) {
        return NULL;
    }
    if (len != NULL) {
        *len = p->ring_len;
    }
    return p->ring;
}

int fs_fedpower_party_exchange_prepare(const fs_fedpower_party *p, const uint8_t *pk, size_t len,
                                       fs_noisex_client **nx, struct fs_err *err)
{
    struct fs_noisex_params np;

    if (p == NULL || pk == NULL || nx == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_party_set_exchange_key: NULL argument");
    }
    *nx = NULL;
    if (p->cfg.alg != FS_FEDPOWER_UTILITY) {
        return fs_err_set(err, FS_ESTATE, "party %u: %s has no noise exchange", p->id,
                          fs_fedpower_alg_name(p->cfg.alg));
    }
    memset(&np, 0, sizeof np);
    np.mode = p->cfg.noise_exchange;
    np.parties = p->cfg.parties;
    np.noise_len = (size_t)p->cfg.d * p->cfg.r;
    np.value_bits = p->plan.noise_bits;
    if (p->has_det) {
        uint8_t key[32];
        int rc = fs_derive_key(key, p->det, "fedpower/djn-base", 0, 0, err);
        if (rc == 0) {
            rc = fs_noisex_client_new_det(&np, pk, len, key, nx, err);
        }
        OPENSSL_cleanse(key, sizeof key);
        return rc;
    }
    return fs_noisex_client_new(&np, pk, len, nx, err);
}

void fs_fedpower_party_exchange_install(fs_fedpower_party *p, fs_noisex_client *nx)
{
    fs_noisex_client_free(p->nx);
    p->nx = nx;
}

int fs_fedpower_party_set_exchange_key(fs_fedpower_party *p, const uint8_t *pk, size_t len,
                                       struct fs_err *err)
{
    fs_noisex_client *nx = NULL;
    int rc = fs_fedpower_party_exchange_prepare(p, pk, len, &nx, err);

    if (rc == 0) {
        fs_fedpower_party_exchange_install(p, nx);
    }
    return rc;
}

size_t fs_fedpower_party_exchange_size(const fs_fedpower_party *p)
{
    return p != NULL && p->nx != NULL ? fs_noisex_client_response_size(p->nx) : 0;
}

int fs_fedpower_party_exchange(fs_fedpower_party *p, const uint8_t *sel, size_t sel_len,
                               uint8_t *out, size_t out_len, struct fs_err *err)
{
    int rc;

    if (p == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_party_exchange: NULL argument");
    }
    if (p->nx == NULL) {
        return fs_err_set(err, FS_ESTATE, "party %u: no exchange key", p->id);
    }
    if (!p->exchange_pending) {
        return fs_err_set(err, FS_ESTATE, "party %u: no noisy upload to exchange%s", p->id,
                          p->cfg.exchange_once ? " (the job's one exchange is its first sync's)"
                                               : "");
    }
    if (sel == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_party_exchange: NULL argument");
    }
    if (p->resp != NULL) {
        /* a retry: the same selector gets the same bytes (idempotent uploads); a
         * different selector in the same sync is refused */
        if (sel_len != fs_noisex_client_ct_size(p->nx) || memcmp(sel, p->resp_sel, sel_len) != 0) {
            return fs_err_set(err, FS_ECONFLICT,
                              "party %u: a second, different selector in the same sync", p->id);
        }
        if (out_len != p->resp_len) {
            return fs_err_set(err, FS_EINVAL, "party %u: response buffer of %zu bytes, need %zu",
                              p->id, out_len, p->resp_len);
        }
        memcpy(out, p->resp, p->resp_len);
        return 0;
    }
    if (p->has_det) {
        /* this sync's re-randomizers from the secret: a restarted party
         * answers the same selector with the same bytes */
        uint8_t key[32];
        rc = fs_derive_key(key, p->det, "fedpower/rerandomize", p->next_iter, 0, err);
        if (rc == 0) {
            rc = fs_noisex_client_set_rerand_key(p->nx, key, err);
        }
        OPENSSL_cleanse(key, sizeof key);
        if (rc != 0) {
            return rc;
        }
    }
    if (fs_noisex_mode_seeded(p->cfg.noise_exchange)) {
        /* seed and ot: the 32-byte seed this sync's noise was expanded from
         * (exchange_once: the master seed every sync's derives from) */
        rc = fs_noisex_client_respond_seed(
            p->nx, sel, sel_len, p->cfg.exchange_once ? p->master : p->seed, out, out_len, err);
    } else {
        rc = fs_noisex_client_respond_noise(p->nx, sel, sel_len, p->noise, p->noise_len, out,
                                            out_len, err);
    }
    if (rc != 0) {
        return rc;
    }
    p->resp_sel = malloc(sel_len);
    p->resp = malloc(out_len);
    if (p->resp_sel == NULL || p->resp == NULL) {
        free(p->resp_sel);
        free(p->resp);
        p->resp_sel = NULL;
        p->resp = NULL;
        return fs_err_set(err, FS_ENOMEM, "party %u: out of memory", p->id);
    }
    memcpy(p->resp_sel, sel, sel_len);
    memcpy(p->resp, out, out_len);
    p->resp_len = out_len;
    return 0;
}

uint64_t fs_fedpower_party_rows(const fs_fedpower_party *p)
{
    return p->rows;
}

double fs_fedpower_party_weight(const fs_fedpower_party *p)
{
    return p->weight;
}

int fs_fedpower_party_explicit_cov(const fs_fedpower_party *p)
{
    return p->cov != NULL;
}

const int64_t *fs_fedpower_debug_party_noise(const fs_fedpower_party *p, size_t *n)
{
    *n = p->noise_len;
    return p->noise_len > 0 ? p->noise : NULL;
}

void fs_fedpower_party_free(fs_fedpower_party *p)
{
    size_t dr;

    if (p == NULL) {
        return;
    }
    dr = (size_t)p->cfg.d * p->cfg.r;
    free(p->resp_sel);
    free(p->resp);
    if (p->noise != NULL) {
        OPENSSL_cleanse(p->noise, dr * sizeof *p->noise);
    }
    if (p->ring != NULL) {
        OPENSSL_cleanse(p->ring, dr * sizeof *p->ring);
    }
    free(p->noise);
    free(p->ring);
    wipe_free(p->cov);
    wipe_free(p->z);
    wipe_free(p->zref);
    wipe_free(p->y);
    wipe_free(p->tmp);
    wipe_free(p->plain);
    wipe_free(p->plain_rr);
    fs_noisex_client_free(p->nx);
    OPENSSL_cleanse(p, sizeof *p);
    free(p);
}

int fs_fedpower_party_set_secret(fs_fedpower_party *p, const uint8_t secret[32], struct fs_err *err)
{
    if (p == NULL || secret == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_party_set_secret: NULL argument");
    }
    memcpy(p->det, secret, sizeof p->det);
    p->has_det = 1;
    p->has_master = 0; /* derived from the secret from now on */
    return 0;
}

int fs_fedpower_party_resume_at(fs_fedpower_party *p, uint32_t iter, struct fs_err *err)
{
    if (p == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_party_resume_at: NULL argument");
    }
    if (!p->has_det) {
        return fs_err_set(err, FS_ESTATE, "party %u: resuming needs the derived noise (secret)",
                          p->id);
    }
    if (p->done || iter < p->next_iter || iter > p->cfg.iterations ||
        (iter % p->cfg.sync_every != 0 && iter != p->cfg.iterations)) {
        return fs_err_set(err, FS_ESTATE, "party %u: cannot resume at iteration %u (next %u of %u)",
                          p->id, iter, p->next_iter, p->cfg.iterations);
    }
    p->next_iter = iter;
    return 0;
}
