/* Server side of the power-method family (see fedpower.h). */
#include <lapacke.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/hkdf.h"
#include "../crypto/rand.h"
#include "../la/procrustes.h"
#include "../la/qr.h"
#include "fedpower_internal.h"

/* The server's secret, as fs_fedpower_server_secret_export writes it:
 * magic, the seed of its own noise, then (utility) the Paillier private key. */
#define SECRET_MAGIC     "FPS1"
#define SECRET_MAGIC_LEN 4
#define SECRET_SEED_LEN  32

struct fs_fedpower_server {
    struct fs_fedpower_config cfg;
    struct fpw_plan plan;
    uint64_t *rows; /* n */
    enum fs_fedpower_phase phase;
    uint32_t sync; /* current sync index; syncs when in RAYLEIGH / DONE */
    uint32_t iter; /* the iteration the broadcast follows */
    fs_mat *q;     /* current orthonormal basis, d x r */
    fs_mat *bcast; /* what parties receive (private: q clipped to z_hat) */
    fs_mat *agg;   /* aggregate of the last sync before QR (tests) */
    fs_mat *ref;   /* d x k reference, or NULL */
    /* plain uploads of the current round */
    fs_mat **up;
    double *up_zmax;
    /* utility: the secure sum waiting for its noise exchange */
    uint64_t *sum;
    size_t sum_len;
    uint32_t *sum_ids;
    size_t sum_k;
    fs_noisex_server *nx;
    int xopen; /* utility: this sync's exchange opened before its sum (its U3 is known) */
    uint8_t *pk;
    size_t pk_len;
    uint32_t last_chosen;
    /* exchange_once: the first sync's exchange, which every later sync reuses */
    uint32_t *x_ids; /* its parties (every sum must have exactly these) */
    size_t x_k;
    uint32_t *m_ids; /* the parties whose master seed it recovered (all but j) */
    uint8_t (*m_seeds)[32];
    size_t m_k;
    unsigned threads; /* for regenerating seeded noise */
    uint8_t
        seed[SECRET_SEED_LEN]; /* the server's own noise (fedpower): sync q from HKDF(seed, q) */
    /* per sync */
    double *conv;
    double *errv;
    double *sinv;
    uint32_t *surv;
    uint32_t *left;
    uint32_t done_syncs;
    /* result */
    fs_mat *res_z;
    double *eig;
};

static fs_mat *dup_clipped(const fs_fedpower_server *s, const fs_mat *q)
{
    fs_mat *b = fs_mat_dup(q);
    if (b != NULL && s->cfg.alg == FS_FEDPOWER_PRIVATE) {
        fpw_clip(b, s->cfg.z_hat);
    }
    return b;
}

/* A new server: fresh secrets (secret NULL) or those of an exported secret. */
static int server_make(const struct fs_fedpower_config *cfg, const uint64_t *rows,
                       const uint8_t *secret, size_t secret_len, fs_fedpower_server **out,
                       struct fs_err *err)
{
    fs_fedpower_server *s = NULL;
    uint32_t R;
    int rc;

    if (cfg == NULL || out == NULL || rows == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_server_new: NULL argument");
    }
    if (secret != NULL &&
        (secret_len < SECRET_MAGIC_LEN + SECRET_SEED_LEN ||
         memcmp(secret, SECRET_MAGIC, SECRET_MAGIC_LEN) != 0 ||
         (cfg->alg != FS_FEDPOWER_UTILITY && secret_len != SECRET_MAGIC_LEN + SECRET_SEED_LEN))) {
        *out = NULL;
        return fs_err_set(err, FS_EFORMAT, "fedpower: not a server secret of this job");
    }
    *out = NULL;
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fs_fedpower_server_new: out of memory");
    }
    s->cfg = *cfg;
    rc = fpw_plan_make(cfg, rows, &s->plan, err);
    if (rc != 0) {
        goto out;
    }
    if (!s->plan.priv.allowed) {
        rc = fs_err_set(err, FS_EINVAL, "fedpower: job refused: %s", s->plan.priv.note);
        goto out;
    }
    R = s->plan.syncs;
    s->rows = malloc(cfg->parties * sizeof *s->rows);
    s->conv = calloc(R, sizeof *s->conv);
    s->surv = calloc(R, sizeof *s->surv);
    s->left = calloc(R, sizeof *s->left);
    if (s->rows == NULL || s->conv == NULL || s->surv == NULL || s->left == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "fs_fedpower_server_new: out of memory");
        goto out;
    }
    memcpy(s->rows, rows, cfg->parties * sizeof *rows);
    if (secret != NULL) {
        memcpy(s->seed, secret + SECRET_MAGIC_LEN, SECRET_SEED_LEN);
    } else {
        rc = fs_rand_bytes(s->seed, sizeof s->seed, err);
        if (rc != 0) {
            goto out;
        }
    }
    rc = fs_fedpower_z0(cfg, &s->q, err);
    if (rc != 0) {
        goto out;
    }
    s->bcast = dup_clipped(s, s->q);
    if (s->bcast == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "fs_fedpower_server_new: out of memory");
        goto out;
    }
    if (cfg->alg == FS_FEDPOWER_PLAIN) {
        s->up = calloc(cfg->parties, sizeof *s->up);
        s->up_zmax = calloc(cfg->parties, sizeof *s->up_zmax);
        if (s->up == NULL || s->up_zmax == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "fs_fedpower_server_new: out of memory");
            goto out;
        }
    }
    if (cfg->alg == FS_FEDPOWER_UTILITY) {
        struct fs_noisex_params np;
        memset(&np, 0, sizeof np);
        np.mode = cfg->noise_exchange;
        np.parties = cfg->parties;
        np.noise_len = (size_t)cfg->d * cfg->r;
        np.value_bits = s->plan.noise_bits;
        if (secret != NULL) {
            const uint8_t *sk = secret + SECRET_MAGIC_LEN + SECRET_SEED_LEN;
            rc = fs_noisex_server_new_from_key(
                &np, sk, secret_len - SECRET_MAGIC_LEN - SECRET_SEED_LEN, &s->nx, err);
        } else {
            rc = fs_noisex_server_new(&np, cfg->paillier_bits, &s->nx, err);
        }
        if (rc != 0) {
            goto out;
        }
        s->pk_len = fs_noisex_server_pk_size(s->nx);
        s->pk = malloc(s->pk_len);
        if (s->pk == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "fs_fedpower_server_new: out of memory");
            goto out;
        }
        rc = fs_noisex_server_pk_export(s->nx, s->pk, s->pk_len, err);
        if (rc != 0) {
            goto out;
        }
    }
    s->phase = FS_FEDPOWER_UPLOAD;
    *out = s;
    s = NULL;
out:
    fs_fedpower_server_free(s);
    return rc;
}

int fs_fedpower_server_new(const struct fs_fedpower_config *cfg, const uint64_t *rows,
                           fs_fedpower_server **out, struct fs_err *err)
{
    return server_make(cfg, rows, NULL, 0, out, err);
}

int fs_fedpower_server_new_restored(const struct fs_fedpower_config *cfg, const uint64_t *rows,
                                    const uint8_t *secret, size_t len, fs_fedpower_server **out,
                                    struct fs_err *err)
{
    if (secret == NULL) {
        if (out != NULL) {
            *out = NULL;
        }
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_server_new_restored: NULL secret");
    }
    return server_make(cfg, rows, secret, len, out, err);
}

size_t fs_fedpower_server_secret_size(const fs_fedpower_server *s)
{
    return SECRET_MAGIC_LEN + SECRET_SEED_LEN +
           (s->nx != NULL ? fs_noisex_server_sk_size(s->nx) : 0);
}

int fs_fedpower_server_secret_export(const fs_fedpower_server *s, uint8_t *buf, size_t len,
                                     struct fs_err *err)
{
    if (s == NULL || buf == NULL || len != fs_fedpower_server_secret_size(s)) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_server_secret_export: bad buffer");
    }
    memcpy(buf, SECRET_MAGIC, SECRET_MAGIC_LEN);
    memcpy(buf + SECRET_MAGIC_LEN, s->seed, SECRET_SEED_LEN);
    if (s->nx == NULL) {
        return 0;
    }
    return fs_noisex_server_sk_export(s->nx, buf + SECRET_MAGIC_LEN + SECRET_SEED_LEN,
                                      len - SECRET_MAGIC_LEN - SECRET_SEED_LEN, err);
}

int fs_fedpower_server_set_reference(fs_fedpower_server *s, const fs_mat *ref, struct fs_err *err)
{
    uint32_t R;

    if (s == NULL || ref == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_server_set_reference: NULL argument");
    }
    if (ref->rows != s->cfg.d || ref->cols != s->cfg.k) {
        return fs_err_set(err, FS_EINVAL, "fedpower: reference is %zux%zu, expected %ux%u",
                          ref->rows, ref->cols, s->cfg.d, s->cfg.k);
    }
    R = s->plan.syncs;
    if (s->errv == NULL) {
        s->errv = calloc(R, sizeof *s->errv);
        s->sinv = calloc(R, sizeof *s->sinv);
        if (s->errv == NULL || s->sinv == NULL) {
            return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
        }
    }
    fs_mat_free(s->ref);
    s->ref = fs_mat_dup(ref);
    if (s->ref == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    return 0;
}

enum fs_fedpower_phase fs_fedpower_server_phase(const fs_fedpower_server *s)
{
    return s->phase;
}

const fs_mat *fs_fedpower_server_broadcast(const fs_fedpower_server *s, uint32_t *iter)
{
    if (s->phase != FS_FEDPOWER_UPLOAD && s->phase != FS_FEDPOWER_RAYLEIGH) {
        return NULL;
    }
    if (iter != NULL) {
        *iter = s->iter;
    }
    return s->bcast;
}

uint32_t fs_fedpower_server_sync_index(const fs_fedpower_server *s)
{
    return s->sync;
}

size_t fs_fedpower_server_ring_len(const fs_fedpower_server *s)
{
    if (s->phase == FS_FEDPOWER_UPLOAD) {
        return (size_t)s->cfg.d * s->cfg.r;
    }
    if (s->phase == FS_FEDPOWER_RAYLEIGH) {
        return (size_t)s->cfg.r * s->cfg.r;
    }
    return 0;
}

/* ---- completing a round -------------------------------------------------- */

/* Orthogonalise the aggregate y (consumed), record the metrics, move on. */
static int complete_sync(fs_fedpower_server *s, fs_mat *y, uint32_t survivors, uint32_t left,
                         struct fs_err *err)
{
    const struct fs_fedpower_config *c = &s->cfg;
    fs_mat pk = fs_mat_view(s->q, 0, 0, s->cfg.d, s->cfg.k);
    fs_mat qk = fs_mat_view(y, 0, 0, s->cfg.d, s->cfg.k);
    int rc;

    fs_mat_free(s->agg);
    s->agg = fs_mat_dup(y);
    if (s->agg == NULL) {
        fs_mat_free(y);
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    rc = fs_qr_orth(y, NULL, err);
    if (rc == 0) {
        rc = fs_fedpower_subspace_dist(&pk, &qk, &s->conv[s->sync], NULL, err);
    }
    if (rc == 0 && s->ref != NULL) {
        rc = fs_fedpower_subspace_dist(s->ref, &qk, &s->errv[s->sync], &s->sinv[s->sync], err);
    }
    if (rc != 0) {
        fs_mat_free(y);
        return rc;
    }
    s->surv[s->sync] = survivors;
    s->left[s->sync] = left;
    fs_mat_free(s->q);
    s->q = y;
    s->iter = fpw_sync_iter(c, s->sync);
    s->sync++;
    s->done_syncs = s->sync;
    fs_mat_free(s->bcast);
    s->bcast = NULL;
    if (s->iter == c->iterations && !c->eigenvalues) {
        fs_mat v = fs_mat_view(s->q, 0, 0, c->d, c->k);
        s->res_z = fs_mat_new(c->d, c->k);
        if (s->res_z == NULL) {
            return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
        }
        rc = fs_mat_copy(s->res_z, &v, err);
        s->phase = FS_FEDPOWER_DONE;
        return rc;
    }
    /* the final Q goes out unclipped for the Rayleigh-Ritz step */
    s->bcast = s->iter == c->iterations ? fs_mat_dup(s->q) : dup_clipped(s, s->q);
    if (s->bcast == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    s->phase = s->iter == c->iterations ? FS_FEDPOWER_RAYLEIGH : FS_FEDPOWER_UPLOAD;
    return 0;
}

/* Rayleigh-Ritz: eigenpairs of the summed r x r matrix h (consumed). */
static int finish_rayleigh(fs_fedpower_server *s, fs_mat *h, struct fs_err *err)
{
    const struct fs_fedpower_config *c = &s->cfg;
    size_t r = c->r;
    double *w = malloc(r * sizeof *w);
    fs_mat *vk = fs_mat_new(r, c->k);
    lapack_int info;
    int rc = 0;

    if (w == NULL || vk == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
        goto out;
    }
    for (size_t j = 0; j < r; j++) {
        for (size_t i = j + 1; i < r; i++) {
            double m = 0.5 * (FS_MAT_AT(h, i, j) + FS_MAT_AT(h, j, i));
            FS_MAT_AT(h, i, j) = m;
            FS_MAT_AT(h, j, i) = m;
        }
    }
    info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)r, h->data, (lapack_int)h->ld, w);
    if (info != 0) {
        rc = fs_err_set(err, FS_ENUMERIC, "fedpower: dsyevd failed (info %d)", (int)info);
        goto out;
    }
    s->eig = malloc(c->k * sizeof *s->eig);
    if (s->eig == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
        goto out;
    }
    for (size_t j = 0; j < c->k; j++) {
        s->eig[j] = w[r - 1 - j];
        for (size_t i = 0; i < r; i++) {
            FS_MAT_AT(vk, i, j) = FS_MAT_AT(h, i, r - 1 - j);
        }
    }
    rc = fs_mat_mul('N', 'N', s->q, vk, &s->res_z, err);
    if (rc == 0) {
        fs_mat_free(s->bcast);
        s->bcast = NULL;
        s->phase = FS_FEDPOWER_DONE;
    }
out:
    free(w);
    fs_mat_free(vk);
    fs_mat_free(h);
    return rc;
}

/* ---- plain fedpower ------------------------------------------------------ */

static int check_id(const fs_fedpower_server *s, uint32_t id, struct fs_err *err)
{
    if (id < 1 || id > s->cfg.parties || s->rows[id - 1] == 0) {
        return fs_err_set(err, FS_ENOTFOUND, "fedpower: party %u is not in the job", id);
    }
    return 0;
}

int fs_fedpower_server_add_plain(fs_fedpower_server *s, uint32_t id, const fs_mat *y, double zmax,
                                 struct fs_err *err)
{
    size_t er, ec, bi = 0, bj = 0;
    int rc;

    if (s == NULL || y == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_server_add_plain: NULL argument");
    }
    if (s->cfg.alg != FS_FEDPOWER_PLAIN) {
        return fs_err_set(err, FS_ESTATE, "fedpower: %s takes secure sums, not plain uploads",
                          fs_fedpower_alg_name(s->cfg.alg));
    }
    if (s->phase != FS_FEDPOWER_UPLOAD && s->phase != FS_FEDPOWER_RAYLEIGH) {
        return fs_err_set(err, FS_ESTATE, "fedpower: not accepting uploads now");
    }
    rc = check_id(s, id, err);
    if (rc != 0) {
        return rc;
    }
    er = s->phase == FS_FEDPOWER_UPLOAD ? s->cfg.d : s->cfg.r;
    ec = s->cfg.r;
    if (y->rows != er || y->cols != ec) {
        return fs_err_set(err, FS_EINVAL,
                          "fedpower: upload of party %u is %zux%zu, expected %zux%zu", id, y->rows,
                          y->cols, er, ec);
    }
    if (!fs_mat_all_finite(y, &bi, &bj) || !isfinite(zmax) || zmax < 0.0) {
        return fs_err_set(err, FS_EINVAL, "fedpower: upload of party %u has a non-finite value",
                          id);
    }
    if (s->up[id - 1] != NULL) {
        const fs_mat *o = s->up[id - 1];
        for (size_t j = 0; j < ec; j++) {
            for (size_t i = 0; i < er; i++) {
                if (FS_MAT_AT(o, i, j) != FS_MAT_AT(y, i, j)) {
                    return fs_err_set(err, FS_ECONFLICT,
                                      "fedpower: party %u already uploaded something else", id);
                }
            }
        }
        return 0;
    }
    s->up[id - 1] = fs_mat_dup(y);
    if (s->up[id - 1] == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    s->up_zmax[id - 1] = zmax;
    return 0;
}

static void clear_plain(fs_fedpower_server *s)
{
    for (uint32_t i = 0; i < s->cfg.parties; i++) {
        fs_mat_free(s->up[i]);
        s->up[i] = NULL;
        s->up_zmax[i] = 0.0;
    }
}

int fs_fedpower_server_close_plain(fs_fedpower_server *s, struct fs_err *err)
{
    const struct fs_fedpower_config *c = &s->cfg;
    fs_mat *acc = NULL;
    uint64_t s_u = 0;
    uint32_t count = 0;
    long first = -1;
    double zmax = 0.0;
    int rc = 0;

    if (s == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_server_close_plain: NULL argument");
    }
    if (c->alg != FS_FEDPOWER_PLAIN ||
        (s->phase != FS_FEDPOWER_UPLOAD && s->phase != FS_FEDPOWER_RAYLEIGH)) {
        return fs_err_set(err, FS_ESTATE, "fedpower: no plain round open");
    }
    for (uint32_t i = 0; i < c->parties; i++) {
        if (s->up[i] != NULL) {
            s_u += s->rows[i];
            count++;
            if (first < 0) {
                first = (long)i;
            }
            if (s->up_zmax[i] > zmax) {
                zmax = s->up_zmax[i];
            }
        }
    }
    if (count == 0) {
        return fs_err_set(err, FS_ESTATE, "fedpower: no uploads to aggregate");
    }
    acc = fs_mat_new(s->up[first]->rows, c->r);
    if (acc == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    for (uint32_t i = 0; i < c->parties && rc == 0; i++) {
        fs_mat *yi = s->up[i];
        fs_mat *ya = NULL;
        if (yi == NULL) {
            continue;
        }
        if (s->phase == FS_FEDPOWER_UPLOAD && c->align == FS_FEDPOWER_ALIGN_CLIENT1 &&
            (long)i != first) {
            /* Guo et al.: align to client 1 (the lowest id that uploaded) */
            rc = fs_procrustes_align(yi, s->up[first], &ya, NULL, err);
            if (rc != 0) {
                break;
            }
            yi = ya;
        }
        rc = fs_mat_axpy((double)s->rows[i] / (double)s_u, yi, acc, err);
        fs_mat_free(ya);
    }
    if (rc == 0 && s->phase == FS_FEDPOWER_UPLOAD && zmax * s->plan.sigma_server != 0.0) {
        /* sync q's noise from its own key: a restarted server adds the same */
        uint8_t info[28] = "fedpower server noise";
        uint8_t key[32];
        info[24] = (uint8_t)(s->sync >> 24);
        info[25] = (uint8_t)(s->sync >> 16);
        info[26] = (uint8_t)(s->sync >> 8);
        info[27] = (uint8_t)s->sync;
        rc = fs_hkdf_sha256(key, sizeof key, s->seed, sizeof s->seed, NULL, 0, info, sizeof info,
                            err);
        if (rc == 0) {
            rc = fpw_real_noise_seeded(acc->data, acc->rows * acc->cols,
                                       zmax * s->plan.sigma_server, key, err);
        }
        OPENSSL_cleanse(key, sizeof key);
    }
    clear_plain(s);
    if (rc != 0) {
        fs_mat_free(acc);
        return rc;
    }
    if (s->phase == FS_FEDPOWER_RAYLEIGH) {
        return finish_rayleigh(s, acc, err);
    }
    return complete_sync(s, acc, count, count, err);
}

/* ---- secure-aggregation variants --------------------------------------- */

static int check_ids(const fs_fedpower_server *s, const uint32_t *ids, size_t k, uint64_t *s_u,
                     struct fs_err *err)
{
    uint8_t *seen = calloc(s->cfg.parties + 1, 1);
    int rc = 0;

    *s_u = 0;
    if (seen == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    for (size_t q = 0; q < k && rc == 0; q++) {
        rc = check_id(s, ids[q], err);
        if (rc == 0 && seen[ids[q]]) {
            rc = fs_err_set(err, FS_EINVAL, "fedpower: party %u listed twice", ids[q]);
        }
        if (rc == 0) {
            seen[ids[q]] = 1;
            *s_u += s->rows[ids[q] - 1];
        }
    }
    free(seen);
    return rc;
}

/* Decode a ring sum into a new rows x r matrix scaled by s / s_U. */
static int decode_sum(fs_fedpower_server *s, const uint64_t *sum, size_t rows, uint64_t s_u,
                      fs_mat **out, struct fs_err *err)
{
    fs_mat *y = fs_mat_new_uninit(rows, s->cfg.r);

    if (y == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    fs_fixedpt_decode(&s->plan.fx, sum, y->data, rows * s->cfg.r);
    fs_mat_scale(y, (double)s->plan.total_rows / (double)s_u);
    *out = y;
    return 0;
}

static void clear_sum(fs_fedpower_server *s)
{
    if (s->sum != NULL) {
        OPENSSL_cleanse(s->sum, s->sum_len * sizeof *s->sum);
    }
    free(s->sum);
    free(s->sum_ids);
    s->sum = NULL;
    s->sum_ids = NULL;
    s->sum_len = 0;
    s->sum_k = 0;
}

/* ---- exchange_once ------------------------------------------------------ */

static int remove_seeded(const fs_fedpower_server *s, const uint32_t *ids,
                         const uint8_t (*seeds)[32], size_t k, uint32_t sync, uint64_t *target,
                         size_t n, struct fs_err *err);

static void forget_masters(fs_fedpower_server *s)
{
    if (s->m_seeds != NULL) {
        OPENSSL_cleanse(s->m_seeds, s->m_k * sizeof *s->m_seeds);
    }
    free(s->m_seeds);
    free(s->m_ids);
    free(s->x_ids);
    s->m_seeds = NULL;
    s->m_ids = NULL;
    s->x_ids = NULL;
    s->m_k = 0;
    s->x_k = 0;
}

/* Keep the first sync's exchange (its parties, and the master seeds of all
 * but j) for the later syncs of an exchange_once job. */
static int keep_masters(fs_fedpower_server *s, const uint32_t *ids, const uint8_t (*seeds)[32],
                        size_t k, struct fs_err *err)
{
    if (!s->cfg.exchange_once) {
        return 0;
    }
    forget_masters(s);
    s->x_ids = malloc((s->sum_k > 0 ? s->sum_k : 1) * sizeof *s->x_ids);
    s->m_ids = malloc((k > 0 ? k : 1) * sizeof *s->m_ids);
    s->m_seeds = malloc((k > 0 ? k : 1) * sizeof *s->m_seeds);
    if (s->x_ids == NULL || s->m_ids == NULL || s->m_seeds == NULL) {
        forget_masters(s);
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    memcpy(s->x_ids, s->sum_ids, s->sum_k * sizeof *s->x_ids);
    s->x_k = s->sum_k;
    if (k > 0) {
        memcpy(s->m_ids, ids, k * sizeof *ids);
        memcpy(s->m_seeds, seeds, k * sizeof *seeds);
    }
    s->m_k = k;
    return 0;
}

/* 1 when ids (any order, distinct) are exactly the first exchange's parties. */
static int same_as_exchange(const fs_fedpower_server *s, const uint32_t *ids, size_t k)
{
    size_t hit = 0;

    if (s->x_ids == NULL || k != s->x_k) {
        return 0;
    }
    for (size_t q = 0; q < k; q++) {
        for (size_t u = 0; u < s->x_k; u++) {
            hit += ids[q] == s->x_ids[u];
        }
    }
    return hit == k;
}

/* A later sync of an exchange_once job: remove the noise derived from the
 * master seeds and complete the sync, with no exchange. */
static int sync_from_masters(fs_fedpower_server *s, const uint64_t *sum, size_t len,
                             const uint32_t *ids, size_t k, uint64_t s_u, struct fs_err *err)
{
    uint64_t *acc;
    fs_mat *y = NULL;
    int rc;

    if (!same_as_exchange(s, ids, k)) {
        return fs_err_set(err, FS_ESTATE,
                          "fedpower: the sum's parties are not those of the job's noise exchange "
                          "(its one exchange needs every party in every sum)");
    }
    acc = malloc(len * sizeof *acc);
    if (acc == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    memcpy(acc, sum, len * sizeof *sum);
    rc = remove_seeded(s, s->m_ids, (const uint8_t(*)[32])s->m_seeds, s->m_k, s->sync, acc, len,
                       err);
    if (rc == 0) {
        rc = decode_sum(s, acc, len / s->cfg.r, s_u, &y, err);
    }
    OPENSSL_cleanse(acc, len * sizeof *acc);
    free(acc);
    if (rc == 0) {
        rc = complete_sync(s, y, (uint32_t)k, (uint32_t)(k - s->m_k), err);
    }
    return rc;
}

/* 1 when ids (any order) are exactly the parties of the open exchange. */
static int same_ids(const fs_fedpower_server *s, const uint32_t *ids, size_t k)
{
    size_t nk = 0;
    const uint32_t *have = fs_noisex_server_ids(s->nx, &nk);

    if (have == NULL || nk != k) {
        return 0;
    }
    for (size_t q = 0; q < k; q++) {
        if (!fs_noisex_server_in_round(s->nx, ids[q])) {
            return 0;
        }
    }
    return 1; /* k distinct ids (check_ids), each one of the k */
}

int fs_fedpower_server_add_sum(fs_fedpower_server *s, const uint64_t *sum, size_t len,
                               const uint32_t *ids, size_t k, struct fs_err *err)
{
    const struct fs_fedpower_config *c;
    fs_mat *y = NULL;
    uint64_t s_u = 0;
    int rc;

    if (s == NULL || sum == NULL || ids == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_server_add_sum: NULL argument");
    }
    c = &s->cfg;
    if (!s->plan.ring) {
        return fs_err_set(err, FS_ESTATE, "fedpower: plain fedpower takes plain uploads");
    }
    if (s->phase != FS_FEDPOWER_UPLOAD && s->phase != FS_FEDPOWER_RAYLEIGH) {
        return fs_err_set(err, FS_ESTATE, "fedpower: not expecting a secure sum now");
    }
    if (len != fs_fedpower_server_ring_len(s)) {
        return fs_err_set(err, FS_EINVAL, "fedpower: secure sum of %zu words, expected %zu", len,
                          fs_fedpower_server_ring_len(s));
    }
    if (k < c->threshold) {
        return fs_err_set(err, FS_EINVAL,
                          "fedpower: %zu parties in the sum, fewer than the threshold %u the "
                          "noise is calibrated to",
                          k, c->threshold);
    }
    rc = check_ids(s, ids, k, &s_u, err);
    if (rc != 0) {
        return rc;
    }
    if (c->alg == FS_FEDPOWER_UTILITY && s->phase == FS_FEDPOWER_UPLOAD && s->xopen &&
        !same_ids(s, ids, k)) {
        return fs_err_set(err, FS_ESTATE,
                          "fedpower: the sum's parties are not those of the open exchange");
    }
    if (c->alg == FS_FEDPOWER_UTILITY && s->phase == FS_FEDPOWER_UPLOAD && c->exchange_once &&
        s->sync > 0) {
        return sync_from_masters(s, sum, len, ids, k, s_u, err);
    }
    if (c->alg == FS_FEDPOWER_UTILITY && s->phase == FS_FEDPOWER_UPLOAD) {
        clear_sum(s);
        s->sum = malloc(len * sizeof *s->sum);
        s->sum_ids = malloc(k * sizeof *s->sum_ids);
        if (s->sum == NULL || s->sum_ids == NULL) {
            clear_sum(s);
            return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
        }
        memcpy(s->sum, sum, len * sizeof *sum);
        memcpy(s->sum_ids, ids, k * sizeof *ids);
        s->sum_len = len;
        s->sum_k = k;
        /* the exchange may be open already (fs_fedpower_server_open_exchange) */
        rc = s->xopen ? 0 : fs_noisex_server_begin(s->nx, s->sync, ids, k, err);
        if (rc != 0) {
            clear_sum(s);
            return rc;
        }
        s->xopen = 0;
        s->phase = FS_FEDPOWER_EXCHANGE;
        return 0;
    }
    rc = decode_sum(s, sum, len / c->r, s_u, &y, err);
    if (rc != 0) {
        return rc;
    }
    if (s->phase == FS_FEDPOWER_RAYLEIGH) {
        return finish_rayleigh(s, y, err);
    }
    /* every survivor's distributed noise stays in (private, dp-ppm) */
    return complete_sync(s, y, (uint32_t)k, (uint32_t)k, err);
}

const uint8_t *fs_fedpower_server_exchange_key(const fs_fedpower_server *s, size_t *len)
{
    if (s == NULL || s->pk == NULL) {
        return NULL;
    }
    if (len != NULL) {
        *len = s->pk_len;
    }
    return s->pk;
}

size_t fs_fedpower_server_selector_size(const fs_fedpower_server *s)
{
    return s->nx != NULL ? fs_noisex_server_ct_size(s->nx) : 0;
}

size_t fs_fedpower_server_response_size(const fs_fedpower_server *s)
{
    return s->nx != NULL ? fs_noisex_server_response_size(s->nx) : 0;
}

int fs_fedpower_server_exchange_ready(const fs_fedpower_server *s)
{
    return s != NULL && (s->phase == FS_FEDPOWER_EXCHANGE || s->xopen);
}

/* The exchange of this sync may open early: utility, a sync's upload, none open. */
static int check_early(const fs_fedpower_server *s, struct fs_err *err)
{
    if (s == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedpower: NULL argument");
    }
    if (s->cfg.alg != FS_FEDPOWER_UTILITY || s->nx == NULL) {
        return fs_err_set(err, FS_ESTATE, "fedpower: %s has no noise exchange",
                          fs_fedpower_alg_name(s->cfg.alg));
    }
    if (s->phase != FS_FEDPOWER_UPLOAD || s->xopen) {
        return fs_err_set(err, FS_ESTATE, "fedpower: no sync waiting for its sum%s",
                          s->xopen ? " (its exchange is open)" : "");
    }
    if (s->cfg.exchange_once && s->sync > 0) {
        return fs_err_set(err, FS_ESTATE,
                          "fedpower: sync %u has no noise exchange (the first sync's covers the "
                          "job)",
                          s->sync);
    }
    return 0;
}

int fs_fedpower_server_prepare_exchange(const fs_fedpower_server *s, const uint32_t *ids, size_t k,
                                        fs_noisex_prepared **out, struct fs_err *err)
{
    uint64_t s_u = 0;
    int rc = check_early(s, err);

    if (out != NULL) {
        *out = NULL;
    }
    if (rc == 0 && (ids == NULL || out == NULL)) {
        rc = fs_err_set(err, FS_EINVAL, "fs_fedpower_server_prepare_exchange: NULL argument");
    }
    if (rc == 0) {
        rc = check_ids(s, ids, k, &s_u, err);
    }
    return rc != 0 ? rc : fs_noisex_server_prepare(s->nx, s->sync, ids, k, out, err);
}

int fs_fedpower_server_open_prepared(fs_fedpower_server *s, fs_noisex_prepared *x,
                                     struct fs_err *err)
{
    int rc = check_early(s, err);

    if (rc != 0) {
        fs_noisex_prepared_free(x);
        return rc;
    }
    rc = fs_noisex_server_begin_prepared(s->nx, x, err);
    if (rc == 0) {
        s->xopen = 1;
    }
    return rc;
}

int fs_fedpower_server_open_exchange(fs_fedpower_server *s, const uint32_t *ids, size_t k,
                                     struct fs_err *err)
{
    fs_noisex_prepared *x = NULL;
    int rc = fs_fedpower_server_prepare_exchange(s, ids, k, &x, err);

    return rc != 0 ? rc : fs_fedpower_server_open_prepared(s, x, err);
}

int fs_fedpower_server_restore_exchange(fs_fedpower_server *s, const uint32_t *ids, size_t k,
                                        const uint8_t *sel, size_t len, struct fs_err *err)
{
    uint64_t s_u = 0;
    int rc = check_early(s, err);

    if (rc == 0 && (ids == NULL || sel == NULL)) {
        rc = fs_err_set(err, FS_EINVAL, "fs_fedpower_server_restore_exchange: NULL argument");
    }
    if (rc == 0) {
        rc = check_ids(s, ids, k, &s_u, err);
    }
    if (rc == 0) {
        rc = fs_noisex_server_restore(s->nx, s->sync, ids, k, sel, len, err);
    }
    if (rc == 0) {
        s->xopen = 1;
    }
    return rc;
}

int fs_fedpower_server_has_response(const fs_fedpower_server *s, uint32_t id)
{
    return fs_fedpower_server_exchange_ready(s) && fs_noisex_server_has_response(s->nx, id);
}

const uint8_t *fs_fedpower_server_exchange_selectors(const fs_fedpower_server *s, size_t *len)
{
    if (!fs_fedpower_server_exchange_ready(s)) {
        return NULL;
    }
    return fs_noisex_server_selectors(s->nx, len);
}

int fs_fedpower_server_restore_selectors(fs_fedpower_server *s, const uint8_t *sel, size_t len,
                                         struct fs_err *err)
{
    if (s == NULL || s->phase != FS_FEDPOWER_EXCHANGE) {
        return fs_err_set(err, FS_ESTATE, "fedpower: no noise exchange open");
    }
    return fs_noisex_server_restore(s->nx, s->sync, s->sum_ids, s->sum_k, sel, len, err);
}

int fs_fedpower_server_selector(const fs_fedpower_server *s, uint32_t id, uint8_t *buf, size_t len,
                                struct fs_err *err)
{
    if (!fs_fedpower_server_exchange_ready(s)) {
        return fs_err_set(err, FS_ESTATE, "fedpower: no noise exchange open");
    }
    return fs_noisex_server_selector(s->nx, id, buf, len, err);
}

int fs_fedpower_server_add_response(fs_fedpower_server *s, uint32_t id, const uint8_t *buf,
                                    size_t len, struct fs_err *err)
{
    if (!fs_fedpower_server_exchange_ready(s)) {
        return fs_err_set(err, FS_ESTATE, "fedpower: no noise exchange open");
    }
    return fs_noisex_server_add_response(s->nx, id, buf, len, err);
}

/* target -= the noise of sync `sync` regenerated from the seeds of ids[0..k)
 * (exchange_once: from the seeds derived from these master seeds). */
static int remove_seeded(const fs_fedpower_server *s, const uint32_t *ids,
                         const uint8_t (*seeds)[32], size_t k, uint32_t sync, uint64_t *target,
                         size_t n, struct fs_err *err)
{
    uint8_t(*derived)[32] = NULL;
    double *sig = NULL;
    int rc = 0;

    if (s->plan.sigma == 0.0 || k == 0) {
        return 0;
    }
    sig = malloc(k * sizeof *sig);
    derived = s->cfg.exchange_once ? malloc(k * sizeof *derived) : NULL;
    if (sig == NULL || (s->cfg.exchange_once && derived == NULL)) {
        free(sig);
        free(derived);
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    for (size_t q = 0; q < k && rc == 0; q++) {
        /* the party drew with std w_i sigma: the same double expression here */
        double w = (double)s->rows[ids[q] - 1] / (double)s->plan.total_rows;
        sig[q] = ldexp(w * s->plan.sigma, s->plan.fx.frac_bits);
        if (derived != NULL) {
            rc = fs_fedpower_sync_seed(derived[q], seeds[q], sync, err);
        }
    }
    if (rc == 0) {
        rc = fs_fedpower_noise_remove(derived != NULL ? (const uint8_t(*)[32])derived : seeds, sig,
                                      k, target, n, s->threads, err);
    }
    if (derived != NULL) {
        OPENSSL_cleanse(derived, k * sizeof *derived);
    }
    free(derived);
    free(sig);
    return rc;
}

/* sum -= the noise regenerated from every recovered seed (or the recovered noise sum). */
static int remove_noise(const fs_fedpower_server *s, const struct fs_noisex_result *res,
                        uint64_t *target, size_t n, struct fs_err *err)
{
    if (s->cfg.noise_exchange == FS_NOISEX_ELEMENTWISE) {
        for (size_t i = 0; i < n; i++) {
            target[i] -= (uint64_t)res->noise_sum[i];
        }
        return 0;
    }
    return remove_seeded(s, res->ids, (const uint8_t(*)[32])res->seeds, res->removed, s->sync,
                         target, n, err);
}

/* The exchange's outcome computed ahead (fs_fedpower_server_exchange_precompute). */
struct fs_fedpower_xpre {
    uint32_t sync;
    uint32_t chosen;
    size_t removed;  /* noises recovered */
    size_t answered; /* responses it covers: all of the exchange's parties */
    uint64_t *acc;   /* len words: minus the recovered noise, in the ring */
    size_t len;
    uint32_t *ids; /* exchange_once: the removed ids and their master seeds */
    uint8_t (*seeds)[32];
};

void fs_fedpower_xpre_free(struct fs_fedpower_xpre *x)
{
    if (x == NULL) {
        return;
    }
    if (x->acc != NULL) {
        OPENSSL_cleanse(x->acc, x->len * sizeof *x->acc);
    }
    if (x->seeds != NULL) {
        OPENSSL_cleanse(x->seeds, x->removed * sizeof *x->seeds);
    }
    free(x->acc);
    free(x->ids);
    free(x->seeds);
    OPENSSL_cleanse(x, sizeof *x);
    free(x);
}

size_t fs_fedpower_server_exchange_missing(const fs_fedpower_server *s)
{
    size_t k = 0;
    size_t miss = 0;
    /* the noise exchange's own state only (not the phase add_sum sets): see
     * fs_fedpower_server_exchange_precompute */
    const uint32_t *ids = s != NULL ? fs_noisex_server_ids(s->nx, &k) : NULL;

    if (ids == NULL) {
        return SIZE_MAX;
    }
    for (size_t q = 0; q < k; q++) {
        miss += !fs_noisex_server_has_response(s->nx, ids[q]);
    }
    return miss;
}

int fs_fedpower_server_exchange_precompute(const fs_fedpower_server *s,
                                           struct fs_fedpower_xpre **out, struct fs_err *err)
{
    struct fs_noisex_result res;
    struct fs_fedpower_xpre *x;
    size_t k = 0;
    int rc;

    if (s == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_server_exchange_precompute: NULL argument");
    }
    *out = NULL;
    if (fs_fedpower_server_exchange_missing(s) != 0) {
        return fs_err_set(err, FS_ESTATE, "fedpower: the exchange is not open or not answered");
    }
    (void)fs_noisex_server_ids(s->nx, &k);
    x = calloc(1, sizeof *x);
    if (x == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    x->len = (size_t)s->cfg.d * s->cfg.r;
    x->acc = calloc(x->len, sizeof *x->acc);
    if (x->acc == NULL) {
        fs_fedpower_xpre_free(x);
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    rc = fs_noisex_server_peek(s->nx, &res, err);
    if (rc == 0) {
        x->sync = s->sync;
        x->chosen = res.chosen;
        x->removed = res.removed;
        x->answered = k;
        rc = remove_noise(s, &res, x->acc, x->len, err);
        if (rc == 0 && s->cfg.exchange_once) {
            /* the master seeds, for the syncs after this one */
            x->ids = malloc((res.removed > 0 ? res.removed : 1) * sizeof *x->ids);
            x->seeds = malloc((res.removed > 0 ? res.removed : 1) * sizeof *x->seeds);
            if (x->ids == NULL || x->seeds == NULL) {
                rc = fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
            } else if (res.removed > 0) {
                memcpy(x->ids, res.ids, res.removed * sizeof *x->ids);
                memcpy(x->seeds, res.seeds, res.removed * sizeof *x->seeds);
            }
        }
        fs_noisex_result_clear(&res);
    }
    if (rc != 0) {
        fs_fedpower_xpre_free(x);
        return rc;
    }
    *out = x;
    return 0;
}

void fs_fedpower_server_set_threads(fs_fedpower_server *s, unsigned threads)
{
    if (s != NULL) {
        s->threads = threads > 0 ? threads : 1;
        /* and the seed groups' decryptions, in the background as they fill */
        fs_noisex_server_set_threads(s->nx, s->threads, 1);
    }
}

int fs_fedpower_server_close_exchange(fs_fedpower_server *s, struct fs_err *err)
{
    struct fs_noisex_result res;
    fs_mat *y = NULL;
    uint64_t s_u = 0;
    uint32_t k;
    int rc;

    if (s == NULL || s->phase != FS_FEDPOWER_EXCHANGE) {
        return fs_err_set(err, FS_ESTATE, "fedpower: no noise exchange open");
    }
    rc = fs_noisex_server_finish(s->nx, &res, err);
    if (rc != 0) {
        return rc;
    }
    s->last_chosen = res.chosen;
    rc = remove_noise(s, &res, s->sum, s->sum_len, err);
    if (rc == 0) {
        rc = keep_masters(s, res.ids, (const uint8_t(*)[32])res.seeds, res.removed, err);
    }
    k = (uint32_t)s->sum_k;
    if (rc == 0) {
        rc = check_ids(s, s->sum_ids, s->sum_k, &s_u, err);
    }
    if (rc == 0) {
        rc = decode_sum(s, s->sum, s->sum_len / s->cfg.r, s_u, &y, err);
    }
    if (rc == 0) {
        rc = complete_sync(s, y, k, k - (uint32_t)res.removed, err);
    }
    fs_noisex_result_clear(&res);
    clear_sum(s);
    return rc;
}

int fs_fedpower_server_close_exchange_pre(fs_fedpower_server *s, struct fs_fedpower_xpre *x,
                                          struct fs_err *err)
{
    fs_mat *y = NULL;
    uint64_t s_u = 0;
    uint32_t k;
    int rc;

    if (x == NULL) {
        return fs_fedpower_server_close_exchange(s, err);
    }
    if (s == NULL || s->phase != FS_FEDPOWER_EXCHANGE) {
        return fs_err_set(err, FS_ESTATE, "fedpower: no noise exchange open");
    }
    if (x->sync != s->sync || x->len != s->sum_len || x->answered != s->sum_k ||
        fs_fedpower_server_exchange_missing(s) != 0) {
        return fs_err_set(err, FS_ESTATE, "fedpower: precomputed for another exchange");
    }
    if (s->cfg.exchange_once && (x->ids == NULL || x->seeds == NULL)) {
        return fs_err_set(err, FS_ESTATE, "fedpower: precomputed without the master seeds");
    }
    rc = keep_masters(s, x->ids, (const uint8_t(*)[32])x->seeds, x->removed, err);
    if (rc != 0) {
        return rc;
    }
    fs_noisex_server_end(s->nx);
    s->last_chosen = x->chosen;
    for (size_t w = 0; w < s->sum_len; w++) {
        s->sum[w] += x->acc[w];
    }
    k = (uint32_t)s->sum_k;
    rc = check_ids(s, s->sum_ids, s->sum_k, &s_u, err);
    if (rc == 0) {
        rc = decode_sum(s, s->sum, s->sum_len / s->cfg.r, s_u, &y, err);
    }
    if (rc == 0) {
        rc = complete_sync(s, y, k, k - (uint32_t)x->removed, err);
    }
    clear_sum(s);
    return rc;
}

/* ---- results ------------------------------------------------------------ */

void fs_fedpower_result_clear(struct fs_fedpower_result *r)
{
    if (r == NULL) {
        return;
    }
    fs_mat_free(r->z);
    free(r->eigenvalues);
    free(r->convergence);
    free(r->error);
    free(r->sin_theta);
    free(r->survivors);
    free(r->noises_left);
    memset(r, 0, sizeof *r);
}

static void *dup_bytes(const void *src, size_t n)
{
    void *d = malloc(n > 0 ? n : 1);
    if (d != NULL && n > 0) {
        memcpy(d, src, n);
    }
    return d;
}

int fs_fedpower_server_result(const fs_fedpower_server *s, struct fs_fedpower_result *out,
                              struct fs_err *err)
{
    size_t n;

    if (s == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fedpower_server_result: NULL argument");
    }
    memset(out, 0, sizeof *out);
    n = s->done_syncs;
    out->syncs = s->done_syncs;
    out->privacy = s->plan.priv;
    out->convergence = dup_bytes(s->conv, n * sizeof *s->conv);
    out->survivors = dup_bytes(s->surv, n * sizeof *s->surv);
    out->noises_left = dup_bytes(s->left, n * sizeof *s->left);
    if (s->errv != NULL) {
        out->error = dup_bytes(s->errv, n * sizeof *s->errv);
        out->sin_theta = dup_bytes(s->sinv, n * sizeof *s->sinv);
    }
    if (s->res_z != NULL) {
        out->z = fs_mat_dup(s->res_z);
    }
    if (s->eig != NULL) {
        out->eigenvalues = dup_bytes(s->eig, s->cfg.k * sizeof *s->eig);
    }
    if (out->convergence == NULL || out->survivors == NULL || out->noises_left == NULL ||
        (s->errv != NULL && (out->error == NULL || out->sin_theta == NULL)) ||
        (s->res_z != NULL && out->z == NULL) || (s->eig != NULL && out->eigenvalues == NULL)) {
        fs_fedpower_result_clear(out);
        return fs_err_set(err, FS_ENOMEM, "fedpower: out of memory");
    }
    return 0;
}

const struct fs_fedpower_privacy *fs_fedpower_server_privacy(const fs_fedpower_server *s)
{
    return &s->plan.priv;
}

const fs_mat *fs_fedpower_debug_server_aggregate(const fs_fedpower_server *s)
{
    return s->agg;
}

uint32_t fs_fedpower_debug_server_chosen(const fs_fedpower_server *s)
{
    return s->last_chosen;
}

const struct fpw_plan *fs_fedpower_debug_server_plan(const fs_fedpower_server *s)
{
    return &s->plan;
}

void fs_fedpower_server_free(fs_fedpower_server *s)
{
    if (s == NULL) {
        return;
    }
    if (s->up != NULL) {
        clear_plain(s);
    }
    free(s->up);
    free(s->up_zmax);
    clear_sum(s);
    forget_masters(s);
    fs_noisex_server_free(s->nx);
    free(s->pk);
    fs_mat_free(s->q);
    fs_mat_free(s->bcast);
    fs_mat_free(s->agg);
    fs_mat_free(s->ref);
    fs_mat_free(s->res_z);
    free(s->eig);
    free(s->conv);
    free(s->errv);
    free(s->sinv);
    free(s->surv);
    free(s->left);
    free(s->rows);
    OPENSSL_cleanse(s->seed, sizeof s->seed);
    free(s);
}
