/* Job spec, invitation and job-id codecs: see jobs.h. */
#include "jobs.h"
#include "../lib/core/hex.h"
#include "jsonfield.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../lib/crypto/ct.h"
#include "../lib/crypto/ed25519.h"
#include "../lib/crypto/paillier.h"
#include "../lib/crypto/rand.h"
#include "../lib/crypto/sha256.h"
#include "../lib/dp/dgauss.h"
#include "../lib/proto/fedpower.h"
#include "../lib/proto/secagg.h"

#define POWER_LIST "fedpower, fedpower-utility, fedpower-private or dp-ppm"

const char *fs_job_partition_name(int partition)
{
    return partition == FS_JOB_FEATURES ? "features" : "samples";
}

uint32_t fs_job_aggregations(const struct fs_job_spec *s)
{
    if (fs_algo_is_power(s->algo) && s->power.sync_every > 0) {
        return (s->power.iterations + s->power.sync_every - 1) / s->power.sync_every +
               (s->power.eigenvalues ? 1u : 0u);
    }
    if (s->algo == FS_ALGO_FEDPCA && s->fed.partition == FS_JOB_SAMPLES) {
        return s->fed.standardize ? 3 : 2;
    }
    return 1;
}

void fs_job_party_shape(const struct fs_job_spec *s, uint32_t party, uint64_t *rows, uint64_t *cols)
{
    *rows = s->rows;
    *cols = s->cols;
    if (fs_algo_is_power(s->algo) && party >= 1 && party <= s->parties) {
        *rows = s->power.party_rows[party - 1];
        return;
    }
    if (!fs_algo_is_fedsvd(s->algo) || party < 1 || party > s->parties) {
        return;
    }
    if (s->fed.partition == FS_JOB_SAMPLES) {
        *rows = s->fed.party_sizes[party - 1];
    } else {
        *cols = s->fed.party_sizes[party - 1];
    }
}

/* The fedsvd/fedpca parameters of a spec or invitation: partition, party_sizes
 * (K entries adding up to N or d), k, method, standardize, allow_dropouts. */
int fs_job_fedsvd_decode(const json_t *j, enum fs_algo algo, uint32_t parties, uint64_t rows,
                         uint64_t cols, struct fs_job_fedsvd *out, struct fs_err *err)
{
    char buf[16];
    json_t *sizes = json_object_get(j, "party_sizes");
    uint64_t total = 0;
    uint64_t part_dim;
    long long x = 0;
    int present = 0;
    int rc;

    memset(out, 0, sizeof *out);
    rc = fs_json_opt_string(j, "partition", buf, sizeof buf, err);
    if (rc != 0) {
        return rc;
    }
    if (buf[0] == '\0' || strcmp(buf, "samples") == 0) {
        out->partition = FS_JOB_SAMPLES;
    } else if (strcmp(buf, "features") == 0) {
        out->partition = FS_JOB_FEATURES;
    } else {
        return fs_err_set(err, FS_EINVAL, "partition: expected samples or features");
    }
    part_dim = out->partition == FS_JOB_SAMPLES ? rows : cols;
    if (sizes == NULL) {
        return fs_err_set(err, FS_EFORMAT, "party_sizes: missing");
    }
    if (!json_is_array(sizes)) {
        return fs_err_set(err, FS_EFORMAT, "party_sizes: expected an array of integers");
    }
    if (json_array_size(sizes) != parties) {
        return fs_err_set(err, FS_EINVAL, "party_sizes: %zu entries for %u parties",
                          json_array_size(sizes), parties);
    }
    for (uint32_t i = 0; i < parties; i++) {
        json_t *v = json_array_get(sizes, i);
        if (!json_is_integer(v)) {
            return fs_err_set(err, FS_EFORMAT, "party_sizes[%u]: expected an integer", i);
        }
        if (json_integer_value(v) < 1 || (uint64_t)json_integer_value(v) > part_dim) {
            return fs_err_set(err, FS_EINVAL, "party_sizes[%u]: outside 1..%llu", i,
                              (unsigned long long)part_dim);
        }
        out->party_sizes[i] = (uint64_t)json_integer_value(v);
        total += out->party_sizes[i];
    }
    if (total != part_dim) {
        return fs_err_set(
            err, FS_EINVAL, "party_sizes: add up to %llu, but the pooled matrix has %llu %s",
            (unsigned long long)total, (unsigned long long)part_dim,
            out->partition == FS_JOB_SAMPLES ? "rows (shape[0])" : "columns (shape[1])");
    }
    rc = fs_json_int_field(j, "k", 1, (long long)(rows < cols ? rows : cols), &x, &present, err);
    if (rc != 0) {
        return rc;
    }
    out->k = present ? (uint64_t)x : 0;
    rc = fs_json_opt_string(j, "method", buf, sizeof buf, err);
    if (rc != 0) {
        return rc;
    }
    if (buf[0] == '\0' || strcmp(buf, "exact") == 0) {
        out->method = FS_JOB_EXACT;
    } else if (strcmp(buf, "randomized") == 0) {
        out->method = FS_JOB_RANDOMIZED;
    } else {
        return fs_err_set(err, FS_EINVAL, "method: expected exact or randomized");
    }
    if (out->method == FS_JOB_RANDOMIZED && out->k == 0) {
        return fs_err_set(err, FS_EINVAL, "method: randomized needs k");
    }
    rc = fs_json_bool_field(j, "standardize", &out->standardize, err);
    if (rc == 0 && out->standardize && algo != FS_ALGO_FEDPCA) {
        rc = fs_err_set(err, FS_EINVAL, "standardize: only for fedpca");
    }
    if (rc == 0) {
        rc = fs_json_bool_field(j, "allow_dropouts", &out->allow_dropouts, err);
    }
    if (rc == 0) {
        rc = fs_json_int_field(j, "shards", 1, FS_JOB_MAX_SHARDS, &x, &present, err);
    }
    if (rc != 0) {
        return rc;
    }
    out->shards = present ? (uint32_t)x : 0; /* absent: one server, as 1 */
    if (out->shards > 1 && out->partition != FS_JOB_SAMPLES) {
        return fs_err_set(err, FS_EFORMAT,
                          "shards: shards need fedsvd or fedpca with the samples partition");
    }
    if (out->shards > rows) {
        return fs_err_set(err, FS_EINVAL, "shards: %u shards for %llu rows (each needs a row)",
                          out->shards, (unsigned long long)rows);
    }
    return 0;
}

/* Encode the fedsvd/fedpca parameters into obj. 0 or -1 (OOM). */
static int fed_encode(json_t *obj, uint32_t parties, const struct fs_job_fedsvd *f)
{
    json_t *sizes = json_array();
    int bad = sizes == NULL;

    for (uint32_t i = 0; !bad && i < parties; i++) {
        bad |= json_array_append_new(sizes, json_integer((json_int_t)f->party_sizes[i])) != 0;
    }
    bad |= json_object_set_new(obj, "partition", json_string(fs_job_partition_name(f->partition)));
    bad |= json_object_set_new(obj, "party_sizes", sizes);
    bad |= json_object_set_new(obj, "k", f->k > 0 ? json_integer((json_int_t)f->k) : json_null());
    bad |= json_object_set_new(
        obj, "method", json_string(f->method == FS_JOB_RANDOMIZED ? "randomized" : "exact"));
    bad |= json_object_set_new(obj, "standardize", json_boolean(f->standardize));
    bad |= json_object_set_new(obj, "allow_dropouts", json_boolean(f->allow_dropouts));
    if (f->shards > 1) {
        bad |= json_object_set_new(obj, "shards", json_integer((json_int_t)f->shards));
    }
    return bad ? -1 : 0;
}

/* d of a power-method spec: "cols", or the second entry of "shape" (both: equal). */
static int power_shape(const json_t *j, uint64_t max_elements, struct fs_job_spec *out,
                       struct fs_err *err)
{
    long long x = 0;
    int present = 0;
    int rc = fs_json_int_field(j, "cols", 1, FS_FEDPOWER_MAX_DIM, &x, &present, err);

    if (rc != 0) {
        return rc;
    }
    if (json_object_get(j, "shape") != NULL) {
        rc = fs_json_shape_field(j, max_elements, &out->rows, &out->cols, err);
        if (rc != 0) {
            return rc;
        }
        if (present && (uint64_t)x != out->cols) {
            return fs_err_set(err, FS_EINVAL, "cols: %lld, but shape has %llu columns", x,
                              (unsigned long long)out->cols);
        }
        if (out->cols > FS_FEDPOWER_MAX_DIM) {
            return fs_err_set(err, FS_EINVAL, "cols: outside 1..%u", FS_FEDPOWER_MAX_DIM);
        }
        return 0;
    }
    if (!present) {
        return fs_err_set(err, FS_EFORMAT, "cols: missing");
    }
    out->cols = (uint64_t)x;
    return 0;
}

int fs_job_party_keys_decode(const json_t *j, uint32_t parties, int *has,
                             uint8_t (*keys)[FS_JOB_KEY_LEN], struct fs_err *err)
{
    json_t *a = json_object_get(j, "party_keys");

    *has = 0;
    if (a == NULL || json_is_null(a)) {
        return 0;
    }
    if (!json_is_array(a)) {
        return fs_err_set(err, FS_EFORMAT, "party_keys: expected an array of fingerprints");
    }
    if (json_array_size(a) != parties) {
        return fs_err_set(err, FS_EINVAL,
                          "party_keys: %zu entries for %u parties (pin every party's identity)",
                          json_array_size(a), parties);
    }
    for (uint32_t i = 0; i < parties; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_string(v)) {
            return fs_err_set(err, FS_EFORMAT, "party_keys[%u]: expected a string", i);
        }
        if (fs_ed25519_fpr_parse(json_string_value(v), keys[i], err) != 0) {
            return fs_err_prefix(err, "party_keys[%u] (party %u): ", i, i + 1);
        }
        for (uint32_t p = 0; p < i; p++) {
            if (memcmp(keys[p], keys[i], FS_JOB_KEY_LEN) == 0) {
                return fs_err_set(err, FS_EINVAL,
                                  "party_keys: parties %u and %u have the same identity key "
                                  "(every party needs its own agent)",
                                  p + 1, i + 1);
            }
        }
    }
    *has = 1;
    return 0;
}

json_t *fs_job_party_keys_encode(const uint8_t (*keys)[FS_JOB_KEY_LEN], uint32_t parties)
{
    json_t *a = json_array();
    char fpr[FS_ED25519_FPR_LEN + 1];

    for (uint32_t i = 0; a != NULL && i < parties; i++) {
        fs_ed25519_fpr_format(keys[i], fpr);
        if (json_array_append_new(a, json_string(fpr)) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* party_keys and allow_unpinned of a spec: one of the two is required. */
static int spec_pins(const json_t *j, struct fs_job_spec *out, struct fs_err *err)
{
    int rc = fs_json_bool_field(j, "allow_unpinned", &out->allow_unpinned, err);

    if (rc == 0) {
        rc = fs_job_party_keys_decode(j, out->parties, &out->has_pins, out->party_keys, err);
    }
    if (rc == 0 && !out->has_pins && !out->allow_unpinned) {
        rc = fs_err_set(err, FS_EINVAL,
                        "party_keys: missing: pin every party's identity fingerprint (printed by "
                        "'fedsvd agent identity'), or set allow_unpinned to true to trust the "
                        "keys the server relays");
    }
    return rc;
}

const char *fs_job_secagg_name(int mode)
{
    return mode == FS_JOB_SECAGG_FULL ? "full" : mode == FS_JOB_SECAGG_PLUS ? "plus" : "auto";
}

int fs_job_secagg_parse(const char *name, int *out)
{
    if (name != NULL && strcmp(name, "full") == 0) {
        *out = FS_JOB_SECAGG_FULL;
        return 0;
    }
    if (name != NULL && strcmp(name, "plus") == 0) {
        *out = FS_JOB_SECAGG_PLUS;
        return 0;
    }
    return -1;
}

int fs_job_secagg_default(uint32_t parties)
{
    uint32_t k = 0;
    uint32_t t = 0;

    /* plus only where its graph has fewer edges than the full one */
    if (parties < FS_SECAGG_PLUS_MIN_N ||
        fs_secagg_plus_params(parties, FS_SECAGG_PLUS_GAMMA, FS_SECAGG_PLUS_DELTA, &k, &t, NULL) !=
            0 ||
        k >= parties - 1) {
        return FS_JOB_SECAGG_FULL;
    }
    return FS_JOB_SECAGG_PLUS;
}

int fs_job_secagg_config(int mode, struct fs_secagg_config *cfg, struct fs_err *err)
{
    cfg->degree = 0;
    cfg->share_t = 0;
    if (mode != FS_JOB_SECAGG_PLUS) {
        return 0;
    }
    return fs_secagg_config_plus(cfg, err);
}

/* "secagg": "full" | "plus", absent or null: the default for the number of parties. */
static int secagg_field(const json_t *j, uint32_t parties, int *out, struct fs_err *err)
{
    const json_t *v = json_object_get(j, "secagg");
    struct fs_secagg_config cfg;
    struct fs_err why;

    if (v == NULL || json_is_null(v)) {
        *out = fs_job_secagg_default(parties);
        return 0;
    }
    if (!json_is_string(v)) {
        return fs_err_set(err, FS_EFORMAT, "secagg: expected \"full\" or \"plus\"");
    }
    if (fs_job_secagg_parse(json_string_value(v), out) != 0) {
        return fs_err_set(err, FS_EINVAL, "secagg: expected \"full\" or \"plus\"");
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.n = parties;
    fs_err_clear(&why);
    if (*out == FS_JOB_SECAGG_PLUS && fs_job_secagg_config(*out, &cfg, &why) != 0) {
        return fs_err_set(err, FS_EINVAL, "secagg: \"plus\" is not possible for %u parties (%s)",
                          parties, why.msg);
    }
    return 0;
}

static int spec_decode(const json_t *j, uint64_t max_elements, struct fs_job_spec *out,
                       struct fs_err *err)
{
    static const char *const keys[] = {"algorithm",
                                       "name",
                                       "parties",
                                       "threshold",
                                       "allow_low_threshold",
                                       "secagg",
                                       "shape",
                                       "round_timeout_s",
                                       "join_timeout_s",
                                       "server_url",
                                       "partition",
                                       "party_sizes",
                                       "k",
                                       "method",
                                       "standardize",
                                       "allow_dropouts",
                                       "cols",
                                       "party_rows",
                                       "rank",
                                       "iterations",
                                       "sync_every",
                                       "align",
                                       "sigma",
                                       "sigma_server",
                                       "epsilon",
                                       "delta",
                                       "clip_z",
                                       "bound_m",
                                       "bound_mode",
                                       "value_bound",
                                       "noise_exchange",
                                       "paillier_bits",
                                       "eigenvalues",
                                       "allow_weak_privacy",
                                       "z0_seed",
                                       "party_keys",
                                       "allow_unpinned",
                                       "shards",
                                       NULL};
    static const char *const fed_keys[] = {"partition",   "party_sizes",    "k",      "method",
                                           "standardize", "allow_dropouts", "shards", NULL};
    static const char *const power_keys[] = {"cols",           "party_rows",
                                             "rank",           "iterations",
                                             "sync_every",     "align",
                                             "sigma",          "sigma_server",
                                             "epsilon",        "delta",
                                             "clip_z",         "bound_m",
                                             "bound_mode",     "value_bound",
                                             "noise_exchange", "paillier_bits",
                                             "eigenvalues",    "allow_weak_privacy",
                                             "z0_seed",        NULL};
    char algorithm[FS_JOB_ALGO_MAX + 1];
    const char *key;
    json_t *val;
    long long x = 0;
    int present = 0;
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "job spec: expected an object");
    }
    json_object_foreach((json_t *)j, key, val)
    {
        int ok = 0;
        (void)val;
        for (size_t i = 0; keys[i] != NULL; i++) {
            ok |= strcmp(key, keys[i]) == 0;
        }
        if (!ok) {
            return fs_err_set(err, FS_EINVAL, "job spec: unknown field \"%.64s\"", key);
        }
    }
    rc = fs_json_req_string(j, "algorithm", algorithm, sizeof algorithm, err);
    if (rc != 0) {
        return rc;
    }
    if (fs_algo_parse(algorithm, &out->algo) != 0) {
        return fs_err_set(err, FS_EINVAL, "algorithm: unknown \"%.32s\"", algorithm);
    }
    rc = fs_json_opt_string(j, "name", out->name, sizeof out->name, err);
    if (rc == 0) {
        rc = fs_json_int_field(j, "parties", 1, FS_SECAGG_MAX_PARTIES, &x, NULL, err);
    }
    if (rc != 0) {
        return rc;
    }
    out->parties = (uint32_t)x;
    rc = fs_json_int_field(j, "threshold", 1, out->parties, &x, &present, err);
    if (rc != 0) {
        return rc;
    }
    out->threshold = present ? (uint32_t)x : out->parties / 2 + 1;
    rc = fs_json_bool_field(j, "allow_low_threshold", &out->allow_low_threshold, err);
    if (rc != 0) {
        return rc;
    }
    if (out->threshold < out->parties / 2 + 1 && !out->allow_low_threshold) {
        /* Bonawitz et al. 2017 need t > n/2 against a server that lies about
         * who dropped: with t <= n/2 it can split the parties into two views
         * that each complete an aggregation and unmask */
        return fs_err_set(err, FS_EINVAL,
                          "threshold: %u is below %u (floor(parties/2)+1) for %u parties: with a "
                          "threshold of at most half the parties, two disjoint groups could each "
                          "complete an aggregation, so a malicious server could show the parties "
                          "two different views and unmask an input; set allow_low_threshold to "
                          "true to accept it anyway",
                          out->threshold, out->parties / 2 + 1, out->parties);
    }
    rc = secagg_field(j, out->parties, &out->secagg, err);
    if (rc != 0) {
        return rc;
    }
    if (fs_algo_is_power(out->algo)) {
        rc = power_shape(j, max_elements, out, err);
    } else {
        rc = fs_json_shape_field(j, max_elements, &out->rows, &out->cols, err);
    }
    if (rc == 0) {
        rc = fs_json_int_field(j, "round_timeout_s", 1, FS_JOB_MAX_TIMEOUT, &x, &present, err);
    }
    if (rc != 0) {
        return rc;
    }
    out->round_timeout_s = present ? (uint32_t)x : FS_JOB_DEFAULT_TIMEOUT;
    rc = fs_json_int_field(j, "join_timeout_s", 1, FS_JOB_MAX_JOIN_TIMEOUT, &x, &present, err);
    if (rc != 0) {
        return rc;
    }
    out->join_timeout_s = present ? (uint32_t)x : FS_JOB_DEFAULT_JOIN_TIMEOUT;
    rc = fs_json_opt_string(j, "server_url", out->server_url, sizeof out->server_url, err);
    if (rc != 0) {
        return rc;
    }
    if (out->server_url[0] != '\0') {
        size_t n = strlen(out->server_url);
        size_t pre = 0;
        /* trim first, then check: "http:///" must not leave "http:" (which the
         * spec's own encoding would then fail to decode) */
        while (n > 0 && out->server_url[n - 1] == '/') {
            out->server_url[--n] = '\0';
        }
        pre = strncmp(out->server_url, "http://", 7) == 0    ? 7
              : strncmp(out->server_url, "https://", 8) == 0 ? 8
                                                             : 0;
        if (pre == 0 || n <= pre || out->server_url[pre] == '/' ||
            strpbrk(out->server_url, " \"<>\\^`{|}") != NULL) {
            return fs_err_set(err, FS_EINVAL, "server_url: expected an http:// or https:// URL");
        }
    }
    if (fs_algo_is_fedsvd(out->algo)) {
        for (size_t i = 0; power_keys[i] != NULL; i++) {
            if (json_object_get(j, power_keys[i]) != NULL) {
                return fs_err_set(err, FS_EINVAL, "%s: only for power-method jobs", power_keys[i]);
            }
        }
        return fs_job_fedsvd_decode(j, out->algo, out->parties, out->rows, out->cols, &out->fed,
                                    err);
    }
    if (json_object_get(j, "shards") != NULL && !json_is_null(json_object_get(j, "shards"))) {
        long long sh = 0;
        rc = fs_json_int_field(j, "shards", 1, FS_JOB_MAX_SHARDS, &sh, NULL, err);
        if (rc != 0) {
            return rc;
        }
        if (sh > 1) {
            return fs_err_set(err, FS_EFORMAT,
                              "shards: shards need fedsvd or fedpca with the samples partition");
        }
    }
    if (fs_algo_is_power(out->algo)) {
        for (size_t i = 0; fed_keys[i] != NULL; i++) {
            if (strcmp(fed_keys[i], "k") != 0 && strcmp(fed_keys[i], "allow_dropouts") != 0 &&
                strcmp(fed_keys[i], "shards") != 0 && json_object_get(j, fed_keys[i]) != NULL) {
                return fs_err_set(err, FS_EINVAL, "%s: only for fedsvd and fedpca jobs",
                                  fed_keys[i]);
            }
        }
        rc = fs_job_fedpower_decode(j, out->algo, out->parties, out->threshold, out->cols, 0,
                                    &out->power, err);
        if (rc != 0) {
            return rc;
        }
        out->rows = 0;
        for (uint32_t i = 0; i < out->parties; i++) {
            out->rows += out->power.party_rows[i];
        }
        if ((uint64_t)out->power.rank > max_elements / out->cols) {
            return fs_err_set(err, FS_EINVAL,
                              "rank: a %llu x %u upload is over the server's limit of %llu "
                              "elements",
                              (unsigned long long)out->cols, out->power.rank,
                              (unsigned long long)max_elements);
        }
        return 0;
    }
    for (size_t i = 0; power_keys[i] != NULL; i++) {
        if (json_object_get(j, power_keys[i]) != NULL) {
            return fs_err_set(err, FS_EINVAL, "%s: only for power-method jobs", power_keys[i]);
        }
    }
    for (size_t i = 0; fed_keys[i] != NULL; i++) {
        if (strcmp(fed_keys[i], "shards") != 0 && json_object_get(j, fed_keys[i]) != NULL) {
            return fs_err_set(err, FS_EINVAL, "%s: only for fedsvd and fedpca jobs", fed_keys[i]);
        }
    }
    return 0;
}

int fs_job_spec_decode(const json_t *j, uint64_t max_elements, struct fs_job_spec *out,
                       struct fs_err *err)
{
    int rc = spec_decode(j, max_elements, out, err);

    if (rc == 0) {
        rc = spec_pins(j, out, err); /* last: the other fields' errors come first */
    }
    return rc;
}

static json_t *shape_json(uint64_t rows, uint64_t cols)
{
    return json_pack("[I, I]", (json_int_t)rows, (json_int_t)cols);
}

void fs_job_spec_init(struct fs_job_spec *s, enum fs_algo algo)
{
    memset(s, 0, sizeof *s);
    s->algo = algo;
    s->round_timeout_s = FS_JOB_DEFAULT_TIMEOUT;
    s->join_timeout_s = FS_JOB_DEFAULT_JOIN_TIMEOUT;
    s->fed.partition = FS_JOB_SAMPLES;
    s->fed.method = FS_JOB_EXACT;
    if (fs_algo_is_power(algo)) {
        s->power.iterations = 92;
        s->power.sync_every = algo == FS_ALGO_DP_PPM ? 1 : 4;
        s->power.align = FS_FEDPOWER_ALIGN_GLOBAL;
        s->power.delta = 1e-5;
        s->power.bound_mode = FS_FEDPOWER_MHAT_CLIP;
        s->power.noise_exchange = FS_NOISEX_SEED;
        s->power.paillier_bits = algo == FS_ALGO_FEDPOWER_UTILITY ? FS_PAILLIER_DEFAULT_BITS : 0;
        s->power.eigenvalues = 1;
    }
}

json_t *fs_job_spec_encode(const struct fs_job_spec *s)
{
    /* a power-method spec has "cols" and party_rows, no pooled "shape": the
     * server limits a power job's upload (rank x cols), not rows x cols */
    json_t *o =
        fs_algo_is_power(s->algo)
            ? json_pack("{s:s, s:i, s:i, s:i}", "algorithm", fs_algo_name(s->algo), "parties",
                        (int)s->parties, "round_timeout_s", (int)s->round_timeout_s,
                        "join_timeout_s", (int)s->join_timeout_s)
            : json_pack("{s:s, s:i, s:o, s:i, s:i}", "algorithm", fs_algo_name(s->algo), "parties",
                        (int)s->parties, "shape", shape_json(s->rows, s->cols), "round_timeout_s",
                        (int)s->round_timeout_s, "join_timeout_s", (int)s->join_timeout_s);

    if (o == NULL) {
        return NULL;
    }
    if ((s->threshold > 0 &&
         json_object_set_new(o, "threshold", json_integer((json_int_t)s->threshold)) != 0) ||
        (s->name[0] != '\0' && json_object_set_new(o, "name", json_string(s->name)) != 0) ||
        (s->server_url[0] != '\0' &&
         json_object_set_new(o, "server_url", json_string(s->server_url)) != 0) ||
        (fs_algo_is_fedsvd(s->algo) && fed_encode(o, s->parties, &s->fed) != 0) ||
        (fs_algo_is_power(s->algo) &&
         (json_object_set_new(o, "cols", json_integer((json_int_t)s->cols)) != 0 ||
          fs_job_fedpower_encode(o, s->algo, s->parties, &s->power) != 0)) ||
        json_object_set_new(o, "allow_unpinned", json_boolean(s->allow_unpinned)) != 0 ||
        (s->allow_low_threshold &&
         json_object_set_new(o, "allow_low_threshold", json_true()) != 0) ||
        (s->secagg != FS_JOB_SECAGG_AUTO &&
         json_object_set_new(o, "secagg", json_string(fs_job_secagg_name(s->secagg))) != 0) ||
        (s->has_pins && json_object_set_new(o, "party_keys",
                                            fs_job_party_keys_encode(
                                                (const uint8_t(*)[FS_JOB_KEY_LEN])s->party_keys,
                                                s->parties)) != 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A seed- or ot-mode fedpower-utility job: the server regenerates each
 * party's noise from its seed, so both must map seeds to samples the same
 * way. */
static int invitation_seeded_noise(const struct fs_invitation *inv)
{
    return inv->is_fedpower && fs_invitation_algo(inv) == FS_ALGO_FEDPOWER_UTILITY &&
           fs_noisex_mode_seeded((enum fs_noisex_mode)inv->power.noise_exchange);
}

json_t *fs_invitation_encode(const struct fs_invitation *inv)
{
    json_t *o =
        json_pack("{s:i, s:s, s:s, s:i, s:s, s:s, s:i, s:i, s:o}", "version", inv->version,
                  "job_id", inv->job_id, "job_url", inv->job_url, "party", (int)inv->party, "token",
                  inv->token, "algorithm", inv->algorithm, "parties", (int)inv->parties,
                  "threshold", (int)inv->threshold, "shape", shape_json(inv->rows, inv->cols));
    enum fs_algo algo = fs_invitation_algo(inv);
    int bad = 0;

    if (o != NULL && inv->has_pins &&
        json_object_set_new(o, "party_keys",
                            fs_job_party_keys_encode(
                                (const uint8_t(*)[FS_JOB_KEY_LEN])inv->party_keys, inv->parties)) !=
            0) {
        json_decref(o);
        return NULL;
    }
    if (o != NULL && inv->is_fedpower) {
        if (json_object_set_new(o, "cols", json_integer((json_int_t)inv->cols)) != 0 ||
            fs_job_fedpower_encode(o, algo, inv->parties, &inv->power) != 0 ||
            (invitation_seeded_noise(inv) &&
             json_object_set_new(o, "noise_sampler", json_integer(FS_FEDPOWER_NOISE_MAP_VERSION)) !=
                 0)) {
            json_decref(o);
            return NULL;
        }
        return o;
    }
    if (o == NULL || !inv->is_fedsvd) {
        return o;
    }
    bad |= json_object_set_new(o, "global_shape", shape_json(inv->global_rows, inv->global_cols));
    bad |= fed_encode(o, inv->parties, &inv->fed);
    if (inv->masking_url[0] != '\0') {
        bad |= json_object_set_new(o, "masking_url", json_string(inv->masking_url));
    }
    if (inv->maskset[0] != '\0') {
        bad |= json_object_set_new(o, "maskset", json_string(inv->maskset));
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The fedsvd/fedpca part of an invitation. */
static int invitation_fed(const json_t *j, struct fs_invitation *out, struct fs_err *err)
{
    json_t *gs = json_object_get(j, "global_shape");
    json_t *shape = json_object_get(j, "shape");
    uint64_t rows = 0, cols = 0;
    int rc;

    out->is_fedsvd = 1;
    if (gs == NULL) {
        return fs_err_set(err, FS_EFORMAT, "global_shape: missing");
    }
    {
        json_t *tmp = json_pack("{s:O}", "shape", gs);
        rc = tmp == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory")
                         : fs_json_shape_field(tmp, UINT64_MAX / 2, &out->global_rows,
                                               &out->global_cols, err);
        json_decref(tmp);
        if (rc != 0) {
            return fs_err_prefix(err, "global_");
        }
    }
    (void)shape;
    rc = fs_job_fedsvd_decode(j, out->algo, out->parties, out->global_rows, out->global_cols,
                              &out->fed, err);
    if (rc != 0) {
        return rc;
    }
    rows = out->fed.partition == FS_JOB_SAMPLES ? out->fed.party_sizes[out->party - 1]
                                                : out->global_rows;
    cols = out->fed.partition == FS_JOB_SAMPLES ? out->global_cols
                                                : out->fed.party_sizes[out->party - 1];
    if (rows != out->rows || cols != out->cols) {
        return fs_err_set(err, FS_EINVAL,
                          "shape: %llu x %llu, but party %u of this job holds %llu x %llu",
                          (unsigned long long)out->rows, (unsigned long long)out->cols, out->party,
                          (unsigned long long)rows, (unsigned long long)cols);
    }
    rc = fs_json_opt_string(j, "masking_url", out->masking_url, sizeof out->masking_url, err);
    if (rc == 0 && out->masking_url[0] != '\0') {
        /* trailing '/' trimmed before the check, so "http:///" is refused
         * rather than kept as "http:" */
        size_t n = strlen(out->masking_url);
        size_t pre = 0;
        while (n > 0 && out->masking_url[n - 1] == '/') {
            out->masking_url[--n] = '\0';
        }
        pre = strncmp(out->masking_url, "http://", 7) == 0    ? 7
              : strncmp(out->masking_url, "https://", 8) == 0 ? 8
                                                              : 0;
        if (pre == 0 || n <= pre || out->masking_url[pre] == '/') {
            rc = fs_err_set(err, FS_EINVAL, "masking_url: expected an http:// or https:// URL");
        }
    }
    if (rc == 0) {
        rc = fs_json_opt_string(j, "maskset", out->maskset, sizeof out->maskset, err);
    }
    return rc;
}

/* The first member of `in`, at any depth of objects and arrays, that `known`
 * lacks at the same place: its path into out ("" when there is none). */
static void first_unknown(const json_t *in, const json_t *known, char *out, size_t cap)
{
    out[0] = '\0';
    if (json_is_object(in) && json_is_object(known)) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)in, key, v)
        {
            json_t *k = json_object_get(known, key);
            if (k == NULL) {
                snprintf(out, cap, "%.64s", key);
                return;
            }
            first_unknown(v, k, out, cap);
            if (out[0] != '\0') {
                char sub[128];
                snprintf(sub, sizeof sub, "%s", out);
                snprintf(out, cap, "%.64s.%.90s", key, sub);
                return;
            }
        }
    } else if (json_is_array(in) && json_is_array(known)) {
        for (size_t i = 0; i < json_array_size(in) && i < json_array_size(known); i++) {
            first_unknown(json_array_get(in, i), json_array_get(known, i), out, cap);
            if (out[0] != '\0') {
                char sub[128];
                snprintf(sub, sizeof sub, "%s", out);
                snprintf(out, cap, "[%zu].%.90s", i, sub);
                return;
            }
        }
    }
}

/* An invitation has exactly the fields its codec writes for its algorithm
 * (fs_invitation_encode of what was decoded): any other field, at any
 * level, is refused as in a job spec, not ignored. */
static int invitation_known_fields(const json_t *j, const struct fs_invitation *inv,
                                   struct fs_err *err)
{
    json_t *known = fs_invitation_encode(inv);
    char bad[160];

    if (known == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    first_unknown(j, known, bad, sizeof bad);
    json_decref(known);
    if (bad[0] != '\0') {
        return fs_err_set(err, FS_EINVAL, "unknown field \"%s\"", bad);
    }
    return 0;
}

/* The seeded noise's map (seed to samples) of the inviting server must be
 * ours: a mismatch would leave every party's noise in the result, silently. */
_Static_assert(FS_DGAUSS_STREAM_VERSION == 2,
               "a new sampler stream needs a new FS_FEDPOWER_NOISE_MAP_VERSION");
static int noise_sampler_field(const json_t *j, struct fs_err *err)
{
    json_t *v = json_object_get(j, "noise_sampler");

    if (v == NULL) {
        return fs_err_set(err, FS_EINVAL,
                          "noise_sampler: missing; the aggregation server predates seeded "
                          "noise map %d of this agent (seeded noise would not cancel): "
                          "run the same release on both",
                          FS_FEDPOWER_NOISE_MAP_VERSION);
    }
    if (!json_is_integer(v) || json_integer_value(v) != FS_FEDPOWER_NOISE_MAP_VERSION) {
        return fs_err_set(err, FS_EINVAL,
                          "noise_sampler: the aggregation server maps seeds to noise with version "
                          "%s, this agent with %d (it would not cancel): run the same release on "
                          "both",
                          json_is_integer(v) ? "of another release" : "(not an integer)",
                          FS_FEDPOWER_NOISE_MAP_VERSION);
    }
    return 0;
}

int fs_invitation_decode(const json_t *j, struct fs_invitation *out, struct fs_err *err)
{
    long long x = 0;
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "invitation: expected an object");
    }
    rc = fs_json_int_field(j, "version", 1, 1000, &x, NULL, err);
    if (rc == 0 && x != FS_INVITATION_VERSION) {
        rc = fs_err_set(err, FS_EINVAL, "invitation: version %lld not supported", x);
    }
    out->version = (int)x;
    if (rc == 0) {
        rc = fs_json_req_string(j, "job_id", out->job_id, sizeof out->job_id, err);
    }
    if (rc == 0 && !fs_job_id_valid(out->job_id)) {
        rc = fs_err_set(err, FS_EINVAL, "job_id: not a job id");
    }
    if (rc == 0) {
        rc = fs_json_req_string(j, "job_url", out->job_url, sizeof out->job_url, err);
    }
    if (rc == 0) {
        rc = fs_json_int_field(j, "party", 1, FS_SECAGG_MAX_PARTIES, &x, NULL, err);
        out->party = (uint32_t)x;
    }
    if (rc == 0) {
        rc = fs_json_req_string(j, "token", out->token, sizeof out->token, err);
    }
    if (rc == 0 && !fs_auth_token_valid(out->token, strlen(out->token))) {
        rc = fs_err_set(err, FS_EINVAL, "token: not a valid token");
    }
    if (rc == 0) {
        rc = fs_json_req_string(j, "algorithm", out->algorithm, sizeof out->algorithm, err);
    }
    if (rc == 0) {
        out->algo_known = fs_algo_parse(out->algorithm, &out->algo) == 0;
        rc = fs_json_int_field(j, "parties", 1, FS_SECAGG_MAX_PARTIES, &x, NULL, err);
        out->parties = (uint32_t)x;
    }
    if (rc == 0) {
        rc = fs_json_int_field(j, "threshold", 1, out->parties, &x, NULL, err);
        out->threshold = (uint32_t)x;
    }
    if (rc == 0) {
        rc = fs_json_shape_field(j, UINT64_MAX / 2, &out->rows, &out->cols, err);
    }
    if (rc == 0 && out->party > out->parties) {
        rc = fs_err_set(err, FS_EINVAL, "party: %u outside 1..%u", out->party, out->parties);
    }
    if (rc == 0) {
        rc = fs_job_party_keys_decode(j, out->parties, &out->has_pins, out->party_keys, err);
    }
    if (rc == 0 && out->algo_known && fs_algo_is_fedsvd(out->algo)) {
        rc = invitation_fed(j, out, err);
    }
    if (rc == 0 && out->algo_known && fs_algo_is_power(out->algo)) {
        out->is_fedpower = 1;
        rc = fs_job_fedpower_decode(j, out->algo, out->parties, out->threshold, out->cols, 1,
                                    &out->power, err);
        if (rc == 0 && out->rows != out->power.party_rows[out->party - 1]) {
            rc = fs_err_set(err, FS_EINVAL,
                            "shape: %llu rows, but party %u of this job holds %llu (party_rows)",
                            (unsigned long long)out->rows, out->party,
                            (unsigned long long)out->power.party_rows[out->party - 1]);
        }
    }
    if (rc == 0 && invitation_seeded_noise(out)) {
        rc = noise_sampler_field(j, err);
    }
    if (rc == 0) {
        char base[FS_JOB_URL_MAX + 1];
        rc = fs_invitation_server_url(out, base, sizeof base, err);
    }
    if (rc == 0) {
        rc = invitation_known_fields(j, out, err);
    }
    if (rc != 0) {
        fs_invitation_wipe(out);
        fs_err_prefix(err, "invitation: ");
    }
    return rc;
}

void fs_invitation_wipe(struct fs_invitation *inv)
{
    fs_wipe(inv, sizeof *inv);
}

int fs_invitation_server_url(const struct fs_invitation *inv, char *out, size_t cap,
                             struct fs_err *err)
{
    char suffix[FS_JOB_ID_MAX + 16];
    size_t ul = strlen(inv->job_url);
    size_t sl;

    snprintf(suffix, sizeof suffix, "/v1/jobs/%s", inv->job_id);
    sl = strlen(suffix);
    if (ul <= sl || strcmp(inv->job_url + ul - sl, suffix) != 0 || ul - sl >= cap) {
        return fs_err_set(err, FS_EINVAL, "job_url: does not end in /v1/jobs/<job_id>");
    }
    if (strncmp(inv->job_url, "http://", 7) != 0 && strncmp(inv->job_url, "https://", 8) != 0) {
        return fs_err_set(err, FS_EINVAL, "job_url: expected an http:// or https:// URL");
    }
    memcpy(out, inv->job_url, ul - sl);
    out[ul - sl] = '\0';
    return 0;
}

int fs_job_id_valid(const char *s)
{
    if (s == NULL || s[0] != 'j' || s[1] != '-') {
        return 0;
    }
    for (int i = 2; i < 34; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return 0;
        }
    }
    return s[34] == '\0';
}

int fs_job_id_generate(char out[FS_JOB_ID_MAX + 1], struct fs_err *err)
{
    uint8_t b[16];
    int rc = fs_rand_bytes(b, sizeof b, err);

    if (rc != 0) {
        return rc;
    }
    out[0] = 'j';
    out[1] = '-';
    fs_hex_encode(b, sizeof b, out + 2);
    return 0;
}

int fs_maskset_id_valid(const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;

    if (n == 0 || n > FS_MASKSET_ID_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            return 0;
        }
    }
    return 1;
}

int fs_wire_secagg_job_id(const char *job_id, uint8_t out[32], struct fs_err *err)
{
    return fs_sha256(out, job_id, strlen(job_id), err);
}

int fs_job_maskset_decode(const json_t *j, struct fs_job_maskset *out, struct fs_err *err)
{
    static const char *const KEYS[] = {"masking_url", "maskset", "end_token"};
    const char *key;
    json_t *v;
    size_t n;
    int rc = 0;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "expected a JSON object");
    }
    json_object_foreach((json_t *)j, key, v)
    {
        int known = 0;
        (void)v;
        for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++) {
            known |= strcmp(key, KEYS[i]) == 0;
        }
        if (!known) {
            return fs_err_set(err, FS_EINVAL, "unknown field \"%.64s\"", key);
        }
    }
    rc = fs_json_req_string(j, "masking_url", out->masking_url, sizeof out->masking_url, err);
    if (rc == 0) {
        rc = fs_json_req_string(j, "maskset", out->maskset, sizeof out->maskset, err);
    }
    if (rc == 0) {
        rc = fs_json_req_string(j, "end_token", out->end_token, sizeof out->end_token, err);
    }
    if (rc != 0) {
        return rc;
    }
    n = strlen(out->masking_url);
    while (n > 0 && out->masking_url[n - 1] == '/') {
        out->masking_url[--n] = '\0';
    }
    if ((strncmp(out->masking_url, "http://", 7) != 0 &&
         strncmp(out->masking_url, "https://", 8) != 0) ||
        strpbrk(out->masking_url, " \t\r\n@?#") != NULL || n <= 8) {
        return fs_err_set(err, FS_EINVAL,
                          "masking_url: expected an http:// or https:// URL without user info, "
                          "query, fragment or white space");
    }
    n = strlen(out->maskset);
    for (size_t i = 0; i < n; i++) {
        char c = out->maskset[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            n = 0;
        }
    }
    if (n == 0) {
        return fs_err_set(err, FS_EINVAL, "maskset: expected 1..%d of [A-Za-z0-9._-]",
                          FS_MASKSET_ID_MAX);
    }
    if (!fs_auth_token_valid(out->end_token, strlen(out->end_token))) {
        fs_wipe(out->end_token, sizeof out->end_token);
        return fs_err_set(err, FS_EINVAL, "end_token: not a valid token");
    }
    return 0;
}
