/* The power-method job parameters shared by `fedsvd job create` and
 * `fedsvd local` (fedpower, fedpower-utility, fedpower-private, dp-ppm;
 * docs/wire-fedpower.md): their options, help lines and checks. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "crypto/paillier.h"
#include "jobs.h"
#include "orch.h"
#include "proto/noise_exchange.h"

#define POWER_MAX_DIM   (1u << 20)
#define POWER_MAX_RANK  1024
#define POWER_MAX_ITERS 100000

int orch_power_algorithm(const char *alg)
{
    enum fs_algo a;

    return fs_algo_parse(alg, &a) == 0 && fs_algo_is_power(a);
}

/* ---- the job-spec options (shared with job create) ---- */

int orch_power_given(const struct orch_power_opts *o)
{
    return o->rank != NULL || o->iterations != NULL || o->sync_every != NULL || o->align != NULL ||
           o->sigma != NULL || o->sigma_server != NULL || o->epsilon != NULL || o->delta != NULL ||
           o->clip_z != NULL || o->bound_m != NULL || o->bound_mode != NULL ||
           o->value_bound != NULL || o->noise_exchange != NULL || o->paillier_bits != NULL ||
           o->allow_weak_privacy || o->no_eigenvalues;
}

void orch_power_help(void)
{
    printf("Power methods (fedpower, fedpower-utility, fedpower-private, dp-ppm):\n"
           "  --k K                the target rank: the top-K eigenspace (required)\n"
           "  --rank R             iteration rank, K..d (default K)\n"
           "  --iterations T       power iterations (default 92)\n"
           "  --sync-every P       aggregate every P iterations (default 4; dp-ppm: 1 only)\n"
           "  --align A            global (default: Procrustes to the last broadcast Z),\n"
           "                       client1 (to party 1's upload; fedpower only) or none\n"
           "  --sigma S            noise standard deviation (fedpower/utility: 0 = none,\n"
           "                       the default); fedpower-private and dp-ppm need exactly one\n"
           "                       of --sigma and --epsilon\n"
           "  --sigma-server S2    fedpower: the server's noise std\n"
           "  --epsilon E          target total epsilon: sigma is calibrated to it\n"
           "  --delta D            delta of the target and of every epsilon reported\n"
           "                       (default 1e-5)\n"
           "  --clip-z Z           fedpower-private: clip Z's entries to [-Z, Z] (required)\n"
           "  --bound-m M          fedpower-private: bound on the entries of M_i^T M_i / s_i\n"
           "                       (required)\n"
           "  --bound-mode B       fedpower-private: clip (default) or reject data beyond M\n"
           "  --value-bound V      public bound on ||M_i^T M_i / s_i||_2 for the fixed-point\n"
           "                       encoding of secure aggregation (utility, private, dp-ppm;\n"
           "                       private defaults to d*M)\n"
           "  --noise-exchange X   fedpower-utility: seed (default: Paillier), ot (oblivious\n"
           "                       transfer on P-256, much cheaper) or elementwise\n"
           "  --paillier-bits N    fedpower-utility, seed or elementwise: the exchange key\n"
           "                       size, 1024..8192 (default 3072)\n"
           "  --allow-weak-privacy run a job whose total epsilon is above 10 (refused by\n"
           "                       default)\n"
           "  --no-eigenvalues     skip the final Rayleigh-Ritz release (no eigenvalues; V\n"
           "                       is the first K columns of the last iterate)\n");
}

/* Optional value parsers: CLI_OK and *out untouched when s is NULL. */
static int opt_size(const char *cmd, const char *flag, const char *s, size_t min, size_t max,
                    size_t *out)
{
    return s == NULL ? CLI_OK : cli_parse_size(cmd, flag, s, min, max, out);
}

static int opt_pos(const char *cmd, const char *flag, const char *s, double *out)
{
    return s == NULL ? CLI_OK : cli_parse_double(cmd, flag, s, 0.0, CLI_OPEN, 0.0, CLI_NONE, out);
}

/* A "only for ..." combination check: CLI_EUSAGE when given without ok. */
static int only_for(const char *cmd, int given, int ok, const char *flag, const char *what)
{
    if (given && !ok) {
        return cli_usage_error(cmd, "%s %s for %s", flag, strstr(flag, " and ") ? "are" : "is",
                               what);
    }
    return CLI_OK;
}

/* The values of the power options, parsed (defaults where not given). */
struct power_values {
    size_t k, rank, iters, every, bits;
    double sigma, sigma_s, eps, delta, cz, bm, vb;
};

/* Parse every power option's value; --k and --rank against d when known. */
static int power_values(const char *cmd, enum fs_algo algo, const struct orch_power_opts *o,
                        size_t d, struct power_values *v)
{
    size_t dmax = d > 0 ? d : POWER_MAX_DIM;
    int rc;

    memset(v, 0, sizeof *v);
    v->iters = 92;
    v->every = algo == FS_ALGO_DP_PPM ? 1 : 4;
    v->delta = 1e-5;
    if (o->k == NULL) {
        return cli_usage_error(cmd, "%s needs --k", fs_algo_name(algo));
    }
    /* --k 0 waits for d (the call with the files read) to name the real range */
    if ((rc = cli_parse_size(cmd, "--k", o->k, 0, (size_t)1 << 31, &v->k)) != CLI_OK) {
        return rc;
    }
    if (d > 0 && (v->k < 1 || v->k > d)) {
        return cli_usage_error(cmd, "--k: must be between 1 and d = %zu (the columns), got '%s'", d,
                               o->k);
    }
    if (v->k > dmax) {
        return cli_usage_error(cmd, "--k: must be between 1 and %zu, got '%s'", dmax, o->k);
    }
    if ((rc = opt_size(cmd, "--rank", o->rank, v->k, dmax < POWER_MAX_RANK ? dmax : POWER_MAX_RANK,
                       &v->rank)) != CLI_OK ||
        (rc = opt_size(cmd, "--iterations", o->iterations, 1, POWER_MAX_ITERS, &v->iters)) !=
            CLI_OK ||
        (rc = opt_size(cmd, "--sync-every", o->sync_every, 1, v->iters, &v->every)) != CLI_OK ||
        (rc = opt_size(cmd, "--paillier-bits", o->paillier_bits, 1024, 8192, &v->bits)) != CLI_OK ||
        (o->sigma != NULL && (rc = cli_parse_double(cmd, "--sigma", o->sigma, 0.0, CLI_CLOSED, 0.0,
                                                    CLI_NONE, &v->sigma)) != CLI_OK) ||
        (o->sigma_server != NULL &&
         (rc = cli_parse_double(cmd, "--sigma-server", o->sigma_server, 0.0, CLI_CLOSED, 0.0,
                                CLI_NONE, &v->sigma_s)) != CLI_OK) ||
        (rc = opt_pos(cmd, "--epsilon", o->epsilon, &v->eps)) != CLI_OK ||
        (o->delta != NULL && (rc = cli_parse_double(cmd, "--delta", o->delta, 0.0, CLI_OPEN, 1.0,
                                                    CLI_OPEN, &v->delta)) != CLI_OK) ||
        (rc = opt_pos(cmd, "--clip-z", o->clip_z, &v->cz)) != CLI_OK ||
        (rc = opt_pos(cmd, "--bound-m", o->bound_m, &v->bm)) != CLI_OK ||
        (rc = opt_pos(cmd, "--value-bound", o->value_bound, &v->vb)) != CLI_OK) {
        return rc;
    }
    if (v->bits % 2 != 0) {
        return cli_usage_error(cmd, "--paillier-bits: expected an even number, got %zu", v->bits);
    }
    if (algo == FS_ALGO_DP_PPM && v->every != 1) {
        return cli_usage_error(cmd, "--sync-every: dp-ppm aggregates after every iteration (1)");
    }
    return CLI_OK;
}

/* The named choices and which option goes with which algorithm. */
static int power_combinations(const char *cmd, enum fs_algo algo, const struct orch_power_opts *o,
                              const struct power_values *v)
{
    int plain = algo == FS_ALGO_FEDPOWER, util = algo == FS_ALGO_FEDPOWER_UTILITY;
    int priv = algo == FS_ALGO_FEDPOWER_PRIVATE, dppm = algo == FS_ALGO_DP_PPM;
    int rc;

    if (o->align != NULL && strcmp(o->align, "global") != 0 && strcmp(o->align, "client1") != 0 &&
        strcmp(o->align, "none") != 0) {
        return cli_usage_error(cmd, "--align: expected global, client1 or none, got '%s'",
                               o->align);
    }
    if (o->bound_mode != NULL && strcmp(o->bound_mode, "clip") != 0 &&
        strcmp(o->bound_mode, "reject") != 0) {
        return cli_usage_error(cmd, "--bound-mode: expected clip or reject, got '%s'",
                               o->bound_mode);
    }
    if (o->noise_exchange != NULL && strcmp(o->noise_exchange, "seed") != 0 &&
        strcmp(o->noise_exchange, "ot") != 0 && strcmp(o->noise_exchange, "elementwise") != 0) {
        return cli_usage_error(cmd, "--noise-exchange: expected seed, ot or elementwise, got '%s'",
                               o->noise_exchange);
    }
    if (o->noise_exchange != NULL && strcmp(o->noise_exchange, "ot") == 0 &&
        o->paillier_bits != NULL) {
        return cli_usage_error(cmd, "--paillier-bits: does not apply to --noise-exchange ot (no "
                                    "Paillier key)");
    }
    if ((rc = only_for(cmd, o->align != NULL && strcmp(o->align, "client1") == 0, plain,
                       "--align client1", "fedpower")) != CLI_OK ||
        (rc = only_for(cmd, o->sigma_server != NULL, plain, "--sigma-server", "fedpower")) !=
            CLI_OK ||
        (rc = only_for(cmd, o->clip_z != NULL || o->bound_m != NULL || o->bound_mode != NULL, priv,
                       "--clip-z, --bound-m and --bound-mode", "fedpower-private")) != CLI_OK ||
        (rc = only_for(cmd, o->noise_exchange != NULL || o->paillier_bits != NULL, util,
                       "--noise-exchange and --paillier-bits", "fedpower-utility")) != CLI_OK ||
        (rc = only_for(cmd, o->value_bound != NULL, !plain, "--value-bound",
                       "fedpower-utility, fedpower-private and dp-ppm (secure aggregation)")) !=
            CLI_OK) {
        return rc;
    }
    if (o->epsilon != NULL && (o->sigma != NULL || o->sigma_server != NULL)) {
        return cli_usage_error(cmd, "give --sigma (and --sigma-server) or --epsilon, not both");
    }
    if ((priv || dppm) && o->sigma == NULL && o->epsilon == NULL) {
        return cli_usage_error(cmd, "%s needs --sigma or --epsilon", fs_algo_name(algo));
    }
    if ((priv || dppm) && o->sigma != NULL && !(v->sigma > 0.0)) {
        return cli_usage_error(cmd, "--sigma: %s needs noise (> 0)", fs_algo_name(algo));
    }
    if (priv && (o->clip_z == NULL || o->bound_m == NULL)) {
        return cli_usage_error(cmd, "fedpower-private needs --clip-z and --bound-m");
    }
    return CLI_OK;
}

int orch_power_params(const char *cmd, enum fs_algo algo, const struct orch_power_opts *o, size_t d,
                      struct fs_job_fedpower *out, int *value_bound_missing)
{
    struct power_values v;
    int rc;

    if (!fs_algo_is_power(algo)) {
        return cli_usage_error(cmd, "--algorithm: '%s' is not a power method", fs_algo_name(algo));
    }
    if ((rc = power_values(cmd, algo, o, d, &v)) != CLI_OK ||
        (rc = power_combinations(cmd, algo, o, &v)) != CLI_OK) {
        return rc;
    }
    if (value_bound_missing != NULL) {
        *value_bound_missing =
            (algo == FS_ALGO_FEDPOWER_UTILITY || algo == FS_ALGO_DP_PPM) && o->value_bound == NULL;
    }
    if (out == NULL) {
        return CLI_OK;
    }
    out->k = (uint32_t)v.k;
    out->rank = (uint32_t)(v.rank > 0 ? v.rank : v.k);
    out->iterations = (uint32_t)v.iters;
    out->sync_every = (uint32_t)v.every;
    out->align = o->align == NULL || strcmp(o->align, "global") == 0 ? FS_FEDPOWER_ALIGN_GLOBAL
                 : strcmp(o->align, "client1") == 0                  ? FS_FEDPOWER_ALIGN_CLIENT1
                                                                     : FS_FEDPOWER_ALIGN_NONE;
    out->has_sigma = o->sigma != NULL;
    out->sigma = v.sigma;
    out->has_sigma_server = o->sigma_server != NULL;
    out->sigma_server = v.sigma_s;
    out->has_epsilon = o->epsilon != NULL;
    out->epsilon = v.eps;
    out->delta = v.delta;
    if (algo == FS_ALGO_FEDPOWER_PRIVATE) {
        out->clip_z = v.cz;
        out->bound_m = v.bm;
        out->bound_mode = o->bound_mode != NULL && strcmp(o->bound_mode, "reject") == 0
                              ? FS_FEDPOWER_MHAT_REJECT
                              : FS_FEDPOWER_MHAT_CLIP;
    }
    out->value_bound = o->value_bound != NULL ? v.vb : 0.0;
    if (algo == FS_ALGO_FEDPOWER_UTILITY) {
        out->noise_exchange = FS_NOISEX_SEED;
        if (o->noise_exchange != NULL && strcmp(o->noise_exchange, "elementwise") == 0) {
            out->noise_exchange = FS_NOISEX_ELEMENTWISE;
        } else if (o->noise_exchange != NULL && strcmp(o->noise_exchange, "ot") == 0) {
            out->noise_exchange = FS_NOISEX_OT;
        }
        /* ot has no Paillier key: no key size (the job spec omits it) */
        out->paillier_bits = !fs_noisex_mode_paillier((enum fs_noisex_mode)out->noise_exchange) ? 0
                             : o->paillier_bits != NULL ? (uint32_t)v.bits
                                                        : FS_PAILLIER_DEFAULT_BITS;
    }
    out->eigenvalues = !o->no_eigenvalues;
    out->allow_weak_privacy = o->allow_weak_privacy;
    return CLI_OK;
}
