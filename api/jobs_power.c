/* Power-method job specs and invitations (fedpower, fedpower-utility,
 * fedpower-private, dp-ppm): see jobs.h. */
#include "../lib/core/hex.h"
#include "jobs.h"
#include "jsonfield.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../lib/crypto/paillier.h"
#include "../lib/dp/dgauss.h"

#define POWER_LIST "fedpower, fedpower-utility, fedpower-private or dp-ppm"

/* ---------------------------------------------------------- power method */

/* Optional number (integer or real) field; *present = 0 when absent/null. */
static int num_field(const json_t *obj, const char *key, double *out, int *present,
                     struct fs_err *err)
{
    json_t *v = json_object_get(obj, key);

    *present = 0;
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_number(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected a number", key);
    }
    *out = json_number_value(v);
    if (!isfinite(*out)) {
        return fs_err_set(err, FS_EINVAL, "%s: not finite", key);
    }
    *present = 1;
    return 0;
}

/* A field that only some algorithms take: FS_EINVAL when present (non-null) otherwise. */
static int only_for(const json_t *obj, const char *key, int ok, const char *what,
                    struct fs_err *err)
{
    json_t *v = json_object_get(obj, key);

    if (!ok && v != NULL && !json_is_null(v)) {
        return fs_err_set(err, FS_EINVAL, "%s: only for %s jobs", key, what);
    }
    return 0;
}

static int seed_field(const json_t *obj, int need, struct fs_job_fedpower *out, struct fs_err *err)
{
    char buf[80];
    int rc = fs_json_opt_string(obj, "z0_seed", buf, sizeof buf, err);

    if (rc != 0) {
        return rc == FS_EINVAL ? fs_err_set(err, FS_EINVAL, "z0_seed: expected 64 hex digits") : rc;
    }
    if (buf[0] == '\0') {
        return need ? fs_err_set(err, FS_EFORMAT, "z0_seed: missing") : 0;
    }
    if (strlen(buf) != 64) {
        return fs_err_set(err, FS_EINVAL, "z0_seed: expected 64 hex digits");
    }
    if (fs_hex_decode(buf, out->z0_seed, 32) != 0) {
        return fs_err_set(err, FS_EINVAL, "z0_seed: expected 64 hex digits");
    }
    out->has_z0_seed = 1;
    return 0;
}

/* The lib/proto configuration of the parameters (z0_seed zero when absent). */
static int power_config(enum fs_algo algo, uint32_t parties, uint32_t threshold, uint64_t cols,
                        const struct fs_job_fedpower *p, struct fs_fedpower_config *cfg,
                        uint64_t *rows, struct fs_err *err)
{
    enum fs_fedpower_alg alg = fs_algo_fedpower_alg(algo);

    if (!fs_algo_is_power(algo)) {
        return fs_err_set(err, FS_EINVAL, "algorithm: expected " POWER_LIST);
    }
    if (parties < 1 || parties > FS_JOB_MAX_PARTIES || cols < 1 || cols > FS_FEDPOWER_MAX_DIM) {
        return fs_err_set(err, FS_EINVAL, "fedpower job: parties or cols out of range");
    }
    fs_fedpower_config_default(cfg, alg);
    cfg->parties = parties;
    cfg->threshold = threshold;
    cfg->d = (uint32_t)cols;
    cfg->r = p->rank;
    cfg->k = p->k;
    cfg->iterations = p->iterations;
    cfg->sync_every = p->sync_every;
    cfg->align = (enum fs_fedpower_align)p->align;
    memcpy(cfg->z0_seed, p->z0_seed, sizeof cfg->z0_seed);
    cfg->eigenvalues = p->eigenvalues;
    cfg->calib = p->has_epsilon ? FS_FEDPOWER_SIGMA_FROM_EPS : FS_FEDPOWER_SIGMA_GIVEN;
    cfg->eps = p->has_epsilon ? p->epsilon : 0.0;
    cfg->delta = p->delta;
    cfg->sigma = p->has_sigma ? p->sigma : 0.0;
    cfg->sigma_server = p->has_sigma_server ? p->sigma_server : 0.0;
    cfg->m_hat = p->bound_m;
    cfg->z_hat = p->clip_z;
    cfg->m_hat_mode = (enum fs_fedpower_bound_mode)p->bound_mode;
    cfg->value_bound = p->value_bound;
    cfg->noise_exchange = (enum fs_noisex_mode)p->noise_exchange;
    cfg->paillier_bits = p->paillier_bits;
    /* every party's input is in every sum: one exchange covers the job */
    cfg->exchange_once = alg == FS_FEDPOWER_UTILITY && fs_noisex_mode_seeded(cfg->noise_exchange) &&
                         !p->allow_dropouts;
    cfg->allow_weak_privacy = p->allow_weak_privacy;
    if (rows != NULL) {
        memset(rows, 0, FS_JOB_MAX_PARTIES * sizeof *rows);
        memcpy(rows, p->party_rows, parties * sizeof *rows);
    }
    return fs_fedpower_config_check(cfg, err);
}

int fs_job_fedpower_decode(const json_t *j, enum fs_algo algo, uint32_t parties, uint32_t threshold,
                           uint64_t cols, int need_seed, struct fs_job_fedpower *out,
                           struct fs_err *err)
{
    struct fs_fedpower_config cfg;
    enum fs_fedpower_alg alg;
    json_t *pr = json_object_get(j, "party_rows");
    char buf[32];
    long long x = 0;
    int present = 0;
    int plain, util, priv, dp;
    int rc;

    memset(out, 0, sizeof *out);
    if (!fs_algo_is_power(algo)) {
        return fs_err_set(err, FS_EINVAL, "algorithm: expected " POWER_LIST);
    }
    alg = fs_algo_fedpower_alg(algo);
    plain = alg == FS_FEDPOWER_PLAIN;
    util = alg == FS_FEDPOWER_UTILITY;
    priv = alg == FS_FEDPOWER_PRIVATE;
    dp = priv || alg == FS_FEDPOWER_DPPPM;
    if (cols < 1 || cols > FS_FEDPOWER_MAX_DIM) {
        return fs_err_set(err, FS_EINVAL, "cols: %llu outside 1..%u", (unsigned long long)cols,
                          FS_FEDPOWER_MAX_DIM);
    }
    if (pr == NULL || json_is_null(pr)) {
        return fs_err_set(err, FS_EFORMAT, "party_rows: missing");
    }
    if (!json_is_array(pr)) {
        return fs_err_set(err, FS_EFORMAT, "party_rows: expected an array of integers");
    }
    if (json_array_size(pr) != parties) {
        return fs_err_set(err, FS_EINVAL, "party_rows: %zu entries for %u parties",
                          json_array_size(pr), parties);
    }
    for (uint32_t i = 0; i < parties; i++) {
        json_t *v = json_array_get(pr, i);
        if (!json_is_integer(v)) {
            return fs_err_set(err, FS_EFORMAT, "party_rows[%u]: expected an integer", i);
        }
        if (json_integer_value(v) < 1 || json_integer_value(v) > (json_int_t)1 << 53) {
            return fs_err_set(err, FS_EINVAL, "party_rows[%u]: outside 1..2^53", i);
        }
        out->party_rows[i] = (uint64_t)json_integer_value(v);
    }
    rc = fs_json_int_field(j, "k", 1, (long long)cols, &x, NULL, err);
    if (rc != 0) {
        return rc;
    }
    out->k = (uint32_t)x;
    rc = fs_json_int_field(j, "rank", out->k,
                           (long long)(cols < FS_FEDPOWER_MAX_RANK ? cols : FS_FEDPOWER_MAX_RANK),
                           &x, &present, err);
    if (rc != 0) {
        return rc;
    }
    out->rank = present ? (uint32_t)x : out->k;
    rc = fs_json_int_field(j, "iterations", 1, FS_FEDPOWER_MAX_ITERATIONS, &x, &present, err);
    if (rc != 0) {
        return rc;
    }
    out->iterations = present ? (uint32_t)x : 92;
    rc = fs_json_int_field(j, "sync_every", 1, FS_FEDPOWER_MAX_ITERATIONS, &x, &present, err);
    if (rc != 0) {
        return rc;
    }
    out->sync_every = present ? (uint32_t)x : (alg == FS_FEDPOWER_DPPPM ? 1 : 4);
    if (alg == FS_FEDPOWER_DPPPM && out->sync_every != 1) {
        return fs_err_set(err, FS_EINVAL, "sync_every: dp-ppm aggregates every iteration (1)");
    }
    if (out->sync_every > out->iterations) {
        return fs_err_set(err, FS_EINVAL, "sync_every: %u is more than iterations (%u)",
                          out->sync_every, out->iterations);
    }
    rc = fs_json_opt_string(j, "align", buf, sizeof buf, err);
    if (rc != 0) {
        return rc;
    }
    out->align = FS_FEDPOWER_ALIGN_GLOBAL;
    if (buf[0] != '\0') {
        enum fs_fedpower_align a;
        rc = fs_fedpower_align_parse(buf, &a, err);
        if (rc != 0) {
            return rc;
        }
        out->align = (int)a;
    }
    rc = num_field(j, "sigma", &out->sigma, &out->has_sigma, err);
    if (rc == 0) {
        rc = only_for(j, "sigma_server", plain, "fedpower", err);
    }
    if (rc == 0) {
        rc = num_field(j, "sigma_server", &out->sigma_server, &out->has_sigma_server, err);
    }
    if (rc == 0) {
        rc = num_field(j, "epsilon", &out->epsilon, &out->has_epsilon, err);
    }
    if (rc == 0) {
        rc = num_field(j, "delta", &out->delta, &present, err);
        if (!present) {
            out->delta = 1e-5;
        }
    }
    if (rc != 0) {
        return rc;
    }
    if ((out->has_sigma && out->sigma < 0.0) ||
        (out->has_sigma_server && out->sigma_server < 0.0)) {
        return fs_err_set(err, FS_EINVAL, "sigma: must be >= 0");
    }
    if (out->has_epsilon && !(out->epsilon > 0.0)) {
        return fs_err_set(err, FS_EINVAL, "epsilon: must be > 0");
    }
    if (!(out->delta > 0.0 && out->delta < 1.0)) {
        return fs_err_set(err, FS_EINVAL, "delta: must be in (0, 1)");
    }
    if (out->has_epsilon && (out->has_sigma || out->has_sigma_server)) {
        return fs_err_set(err, FS_EINVAL,
                          "epsilon: give either sigma (and sigma_server) or epsilon, not both");
    }
    if (dp && !out->has_sigma && !out->has_epsilon) {
        return fs_err_set(err, FS_EINVAL, "sigma: %s needs sigma or epsilon", fs_algo_name(algo));
    }
    rc = only_for(j, "clip_z", priv, "fedpower-private", err);
    if (rc == 0) {
        rc = only_for(j, "bound_m", priv, "fedpower-private", err);
    }
    if (rc == 0) {
        rc = only_for(j, "bound_mode", priv, "fedpower-private", err);
    }
    if (rc == 0) {
        rc = num_field(j, "clip_z", &out->clip_z, &present, err);
    }
    if (rc == 0 && priv && !present) {
        rc = fs_err_set(err, FS_EFORMAT, "clip_z: missing (fedpower-private needs it)");
    }
    if (rc == 0) {
        rc = num_field(j, "bound_m", &out->bound_m, &present, err);
    }
    if (rc == 0 && priv && !present) {
        rc = fs_err_set(err, FS_EFORMAT, "bound_m: missing (fedpower-private needs it)");
    }
    if (rc == 0 && priv && !(out->clip_z > 0.0 && out->bound_m > 0.0)) {
        rc = fs_err_set(err, FS_EINVAL, "clip_z, bound_m: must be > 0");
    }
    if (rc == 0) {
        rc = fs_json_opt_string(j, "bound_mode", buf, sizeof buf, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (buf[0] == '\0' || strcmp(buf, "clip") == 0) {
        out->bound_mode = FS_FEDPOWER_MHAT_CLIP;
    } else if (strcmp(buf, "reject") == 0) {
        out->bound_mode = FS_FEDPOWER_MHAT_REJECT;
    } else {
        return fs_err_set(err, FS_EINVAL, "bound_mode: expected clip or reject");
    }
    rc = num_field(j, "value_bound", &out->value_bound, &present, err);
    if (rc == 0 && present && !(out->value_bound > 0.0)) {
        rc = fs_err_set(err, FS_EINVAL, "value_bound: must be > 0");
    }
    if (rc == 0) {
        rc = only_for(j, "noise_exchange", util, "fedpower-utility", err);
    }
    if (rc == 0) {
        rc = only_for(j, "paillier_bits", util, "fedpower-utility", err);
    }
    if (rc == 0) {
        rc = fs_json_opt_string(j, "noise_exchange", buf, sizeof buf, err);
    }
    if (rc != 0) {
        return rc;
    }
    out->noise_exchange = FS_NOISEX_SEED;
    if (buf[0] != '\0') {
        enum fs_noisex_mode m;
        rc = fs_noisex_mode_parse(buf, &m, err);
        if (rc != 0) {
            return fs_err_set(err, FS_EINVAL, "noise_exchange: expected seed, ot or elementwise");
        }
        out->noise_exchange = (int)m;
    }
    rc = fs_json_int_field(j, "paillier_bits", 1024, FS_PAILLIER_MAX_BITS, &x, &present, err);
    if (rc != 0) {
        return rc;
    }
    if (present && !fs_noisex_mode_paillier((enum fs_noisex_mode)out->noise_exchange)) {
        return fs_err_set(err, FS_EINVAL,
                          "paillier_bits: does not apply to noise_exchange ot (no Paillier key)");
    }
    /* ot has no Paillier key: no key size */
    out->paillier_bits = util && fs_noisex_mode_paillier((enum fs_noisex_mode)out->noise_exchange)
                             ? (present ? (uint32_t)x : FS_PAILLIER_DEFAULT_BITS)
                             : 0;
    if (out->paillier_bits % 2 != 0) {
        return fs_err_set(err, FS_EINVAL, "paillier_bits: must be even");
    }
    out->eigenvalues = 1;
    if (json_object_get(j, "eigenvalues") != NULL &&
        !json_is_null(json_object_get(j, "eigenvalues"))) {
        rc = fs_json_bool_field(j, "eigenvalues", &out->eigenvalues, err);
    }
    if (rc == 0) {
        rc = fs_json_bool_field(j, "allow_weak_privacy", &out->allow_weak_privacy, err);
    }
    if (rc == 0) {
        rc = fs_json_bool_field(j, "allow_dropouts", &out->allow_dropouts, err);
    }
    if (rc == 0) {
        rc = seed_field(j, need_seed, out, err);
    }
    if (rc == 0) {
        /* FS_EINVAL "fedpower config: ..." from lib/proto: a bad combination */
        rc = power_config(algo, parties, threshold, cols, out, &cfg, NULL, err);
    }
    return rc;
}

static json_t *num_or_null(int has, double v)
{
    return has ? json_real(v) : json_null();
}

int fs_job_fedpower_encode(json_t *obj, enum fs_algo algo, uint32_t parties,
                           const struct fs_job_fedpower *p)
{
    int plain = algo == FS_ALGO_FEDPOWER;
    int util = algo == FS_ALGO_FEDPOWER_UTILITY;
    int priv = algo == FS_ALGO_FEDPOWER_PRIVATE;
    json_t *pr = json_array();
    int bad = pr == NULL;

    for (uint32_t i = 0; !bad && i < parties; i++) {
        bad |= json_array_append_new(pr, json_integer((json_int_t)p->party_rows[i])) != 0;
    }
    bad |= json_object_set_new(obj, "party_rows", pr);
    bad |= json_object_set_new(obj, "k", json_integer(p->k));
    bad |= json_object_set_new(obj, "rank", json_integer(p->rank > 0 ? p->rank : p->k));
    bad |= json_object_set_new(obj, "iterations", json_integer(p->iterations));
    bad |= json_object_set_new(obj, "sync_every", json_integer(p->sync_every));
    bad |= json_object_set_new(
        obj, "align", json_string(fs_fedpower_align_name((enum fs_fedpower_align)p->align)));
    bad |= json_object_set_new(obj, "sigma", num_or_null(p->has_sigma, p->sigma));
    if (plain) {
        bad |= json_object_set_new(obj, "sigma_server",
                                   num_or_null(p->has_sigma_server, p->sigma_server));
    }
    bad |= json_object_set_new(obj, "epsilon", num_or_null(p->has_epsilon, p->epsilon));
    bad |= json_object_set_new(obj, "delta", json_real(p->delta));
    if (priv) {
        bad |= json_object_set_new(obj, "clip_z", json_real(p->clip_z));
        bad |= json_object_set_new(obj, "bound_m", json_real(p->bound_m));
        bad |= json_object_set_new(
            obj, "bound_mode",
            json_string(p->bound_mode == FS_FEDPOWER_MHAT_REJECT ? "reject" : "clip"));
    }
    bad |=
        json_object_set_new(obj, "value_bound", num_or_null(p->value_bound > 0.0, p->value_bound));
    if (util) {
        bad |= json_object_set_new(
            obj, "noise_exchange",
            json_string(fs_noisex_mode_name((enum fs_noisex_mode)p->noise_exchange)));
        if (fs_noisex_mode_paillier((enum fs_noisex_mode)p->noise_exchange)) {
            bad |= json_object_set_new(obj, "paillier_bits", json_integer(p->paillier_bits));
        }
    }
    bad |= json_object_set_new(obj, "eigenvalues", json_boolean(p->eigenvalues));
    bad |= json_object_set_new(obj, "allow_weak_privacy", json_boolean(p->allow_weak_privacy));
    bad |= json_object_set_new(obj, "allow_dropouts", json_boolean(p->allow_dropouts));
    if (p->has_z0_seed) {
        char hex[65];
        fs_hex_encode(p->z0_seed, 32, hex);
        bad |= json_object_set_new(obj, "z0_seed", json_string(hex));
    }
    return bad ? -1 : 0;
}

int fs_job_fedpower_config(const struct fs_job_spec *spec, struct fs_fedpower_config *cfg,
                           uint64_t *rows, struct fs_err *err)
{
    if (!fs_algo_is_power(spec->algo)) {
        return fs_err_set(err, FS_EINVAL, "fedpower config: %s is not a power-method job",
                          fs_algo_name(spec->algo));
    }
    return power_config(spec->algo, spec->parties, spec->threshold, spec->cols, &spec->power, cfg,
                        rows, err);
}

/* The algorithm of an invitation: its string is what the server sent (also
 * for an algorithm this build does not know, then secure-sum here and
 * is_fedsvd/is_fedpower 0), and callers that build one set only the string. */
int fs_invitation_fedpower_config(const struct fs_invitation *inv, struct fs_fedpower_config *cfg,
                                  uint64_t *rows, struct fs_err *err)
{
    if (!inv->is_fedpower) {
        return fs_err_set(err, FS_EINVAL, "fedpower config: %s is not a power-method job",
                          inv->algorithm);
    }
    return power_config(fs_invitation_algo(inv), inv->parties, inv->threshold, inv->cols,
                        &inv->power, cfg, rows, err);
}
