#include "agent_msgs.h"
#include "../lib/core/hex.h"

#include "wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small JSON helpers (field names go into messages, values never do) ---- */

static int only_keys(const json_t *obj, const char *const *keys, const char *what,
                     struct fs_err *err)
{
    const char *key;
    json_t *val;

    json_object_foreach((json_t *)obj, key, val)
    {
        int ok = 0;
        (void)val;
        for (size_t i = 0; keys[i] != NULL; i++) {
            ok |= strcmp(key, keys[i]) == 0;
        }
        if (!ok) {
            return fs_err_set(err, FS_EINVAL, "%s: unknown field \"%.64s\"", what, key);
        }
    }
    return 0;
}

/* Integer member in lo..hi. */
static int get_u64(const json_t *obj, const char *key, uint64_t lo, uint64_t hi, uint64_t *out,
                   const char *what, struct fs_err *err)
{
    json_t *v = json_object_get(obj, key);
    json_int_t x;

    if (v == NULL) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: missing", what, key);
    }
    if (!json_is_integer(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected an integer", what, key);
    }
    x = json_integer_value(v);
    if (x < 0 || (uint64_t)x < lo || (uint64_t)x > hi) {
        return fs_err_set(err, FS_EINVAL, "%s.%s: %lld outside %llu..%llu", what, key, (long long)x,
                          (unsigned long long)lo, (unsigned long long)hi);
    }
    *out = (uint64_t)x;
    return 0;
}

static int get_u32(const json_t *obj, const char *key, uint32_t lo, uint32_t hi, uint32_t *out,
                   const char *what, struct fs_err *err)
{
    uint64_t x = 0;
    int rc = get_u64(obj, key, lo, hi, &x, what, err);

    if (rc == 0) {
        *out = (uint32_t)x;
    }
    return rc;
}

/* Copy a string member (cap bytes with the NUL); no NUL inside. */
static int get_str(const json_t *obj, const char *key, char *buf, size_t cap, const char *what,
                   struct fs_err *err)
{
    json_t *v = json_object_get(obj, key);
    size_t n;

    if (v == NULL) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: missing", what, key);
    }
    if (!json_is_string(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected a string", what, key);
    }
    n = json_string_length(v);
    if (n >= cap || strlen(json_string_value(v)) != n) {
        return fs_err_set(err, FS_EINVAL, "%s.%s: longer than %zu bytes or contains NUL", what, key,
                          cap - 1);
    }
    memcpy(buf, json_string_value(v), n + 1);
    return 0;
}

static int get_shape(const json_t *obj, const char *what, uint64_t *rows, uint64_t *cols,
                     struct fs_err *err)
{
    json_t *v = json_object_get(obj, "shape");

    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(json_array_get(v, 0)) ||
        !json_is_integer(json_array_get(v, 1))) {
        return fs_err_set(err, FS_EFORMAT, "%s.shape: expected [rows, cols]", what);
    }
    if (json_integer_value(json_array_get(v, 0)) < 1 ||
        json_integer_value(json_array_get(v, 1)) < 1) {
        return fs_err_set(err, FS_EINVAL, "%s.shape: dimensions must be positive", what);
    }
    *rows = (uint64_t)json_integer_value(json_array_get(v, 0));
    *cols = (uint64_t)json_integer_value(json_array_get(v, 1));
    return 0;
}

/* ---- the participation request ---- */

static int url_ok(const char *u)
{
    const char *host;

    if (strncmp(u, "http://", 7) == 0) {
        host = u + 7;
    } else if (strncmp(u, "https://", 8) == 0) {
        host = u + 8;
    } else {
        return 0;
    }
    if (host[0] == '\0' || host[0] == '/') {
        return 0;
    }
    for (const char *p = u; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#' || c == '\\' || c == '"') {
            return 0;
        }
    }
    /* user info would put a credential in every log line and error message */
    for (const char *p = host; *p != '\0' && *p != '/'; p++) {
        if (*p == '@') {
            return 0;
        }
    }
    return 1;
}

static int parse_invitation(const json_t *j, uint64_t max_elements, struct fs_agent_request *out,
                            struct fs_err *err)
{
    int rc = fs_invitation_decode(j, &out->inv, err);

    if (rc != 0) {
        return rc;
    }
    if (!out->inv.algo_known) {
        rc = fs_err_set(err, FS_EINVAL,
                        "invitation: algorithm \"%.32s\" is not supported by this agent "
                        "(it runs secure-sum, fedsvd, fedpca, fedpower, fedpower-utility, "
                        "fedpower-private and dp-ppm)",
                        out->inv.algorithm);
    } else if (out->inv.is_fedsvd && (out->inv.global_cols > max_elements ||
                                      out->inv.global_rows > max_elements / out->inv.global_cols)) {
        rc = fs_err_set(err, FS_EINVAL,
                        "invitation: global_shape %llu x %llu is over this agent's limit of %llu "
                        "elements (--max-elements)",
                        (unsigned long long)out->inv.global_rows,
                        (unsigned long long)out->inv.global_cols, (unsigned long long)max_elements);
    } else if (out->inv.is_fedsvd &&
               (out->inv.masking_url[0] == '\0' || out->inv.maskset[0] == '\0')) {
        rc = fs_err_set(err, FS_EINVAL,
                        "invitation: a %s job needs masking_url and maskset (added when the mask "
                        "set is created: fedsvd job create does it)",
                        out->inv.algorithm);
    } else if (out->inv.is_fedsvd && !url_ok(out->inv.masking_url)) {
        rc = fs_err_set(err, FS_EINVAL,
                        "invitation: masking_url: expected an http:// or https:// URL without "
                        "user info, query, fragment or white space");
    } else if (out->inv.is_fedsvd && !fs_maskset_id_valid(out->inv.maskset)) {
        rc = fs_err_set(err, FS_EINVAL, "invitation: maskset: expected 1..64 of [A-Za-z0-9._-]");
    } else if (out->inv.cols > max_elements || out->inv.rows > max_elements / out->inv.cols) {
        rc = fs_err_set(err, FS_EINVAL,
                        "invitation: shape %llu x %llu is over this agent's limit of %llu "
                        "elements (--max-elements)",
                        (unsigned long long)out->inv.rows, (unsigned long long)out->inv.cols,
                        (unsigned long long)max_elements);
    } else if (!url_ok(out->inv.job_url)) {
        rc = fs_err_set(err, FS_EINVAL,
                        "invitation: job_url: expected an http:// or https:// URL without user "
                        "info, query, fragment or white space");
    } else {
        rc = fs_invitation_server_url(&out->inv, out->base_url, sizeof out->base_url, err);
        if (rc != 0) {
            fs_err_prefix(err, "invitation: ");
        }
    }
    if (rc != 0) {
        fs_invitation_wipe(&out->inv);
    }
    return rc;
}

int fs_agent_request_parse(const json_t *j, uint64_t max_elements, struct fs_agent_request *out,
                           struct fs_err *err)
{
    static const char *const top_keys[] = {"invitation", "dataset", "fail_at", NULL};
    static const char *const ds_keys[] = {"path", "format", NULL};
    const json_t *ds;
    const json_t *fa;
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "request: expected a JSON object");
    }
    rc = only_keys(j, top_keys, "request", err);
    if (rc != 0) {
        return rc;
    }
    ds = json_object_get(j, "dataset");
    if (!json_is_object(ds)) {
        return fs_err_set(err, FS_EFORMAT, "dataset: expected an object {\"path\", \"format\"}");
    }
    rc = only_keys(ds, ds_keys, "dataset", err);
    if (rc == 0) {
        rc = get_str(ds, "path", out->path, sizeof out->path, "dataset", err);
    }
    if (rc == 0 && out->path[0] == '\0') {
        rc = fs_err_set(err, FS_EINVAL, "dataset.path: empty");
    }
    if (rc != 0) {
        return rc;
    }
    if (json_object_get(ds, "format") == NULL || json_is_null(json_object_get(ds, "format"))) {
        memcpy(out->format, "auto", 5);
    } else {
        rc = get_str(ds, "format", out->format, sizeof out->format, "dataset", err);
        if (rc == FS_EINVAL) {
            rc = fs_err_set(err, FS_EINVAL, "dataset.format: expected auto, npy, csv, mtx or idx");
        }
        if (rc != 0) {
            return rc;
        }
    }
    rc = fs_io_format_parse(out->format, &out->fmt, err);
    if (rc != 0) {
        return fs_err_set(err, FS_EINVAL, "dataset.format: expected auto, npy, csv, mtx or idx");
    }
    fa = json_object_get(j, "fail_at");
    out->fail_at = FS_AGENT_FAIL_NONE;
    if (fa != NULL && !json_is_null(fa)) {
        if (!json_is_string(fa)) {
            return fs_err_set(err, FS_EFORMAT, "fail_at: expected a string or null");
        }
        rc = fs_agent_fail_at_parse_round(json_string_value(fa), &out->fail_at, &out->fail_round,
                                          err);
        if (rc != 0) {
            return rc;
        }
    }
    if (json_object_get(j, "invitation") == NULL) {
        return fs_err_set(err, FS_EFORMAT, "invitation: missing");
    }
    return parse_invitation(json_object_get(j, "invitation"), max_elements, out, err);
}

/* ---- job status ---- */

int fs_agent_job_parse(const json_t *j, struct fs_agent_job *out, struct fs_err *err)
{
    static const char *const what = "job";
    char state[16];
    json_t *v;
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "job: expected a JSON object");
    }
    rc = get_str(j, "phase", out->phase_name, sizeof out->phase_name, what, err);
    if (rc == 0) {
        rc = get_str(j, "state", state, sizeof state, what, err);
    }
    if (rc == 0) {
        rc = get_u32(j, "parties", 1, FS_SECAGG_MAX_PARTIES, &out->parties, what, err);
    }
    if (rc == 0) {
        rc = get_u32(j, "threshold", 1, out->parties, &out->threshold, what, err);
    }
    v = json_object_get(j, "algorithm");
    if (json_is_string(v)) {
        snprintf(out->algorithm, sizeof out->algorithm, "%s", json_string_value(v));
    }
    out->algo_known = fs_algo_parse(out->algorithm, &out->algo) == 0;
    if (rc == 0 &&
        (json_object_get(j, "shape") != NULL || !out->algo_known || !fs_algo_is_power(out->algo))) {
        rc = get_shape(j, what, &out->rows, &out->cols, err);
    } else if (rc == 0 && json_object_get(j, "cols") != NULL) {
        /* power-method jobs: d, and no pooled shape needed */
        rc = get_u64(j, "cols", 1, FS_FEDPOWER_MAX_DIM, &out->cols, what, err);
    }
    if (rc != 0) {
        return rc;
    }
    out->phase = fs_agent_jphase_parse(out->phase_name);
    if (strcmp(state, "running") == 0) {
        out->state = 0;
    } else if (strcmp(state, "done") == 0) {
        out->state = 1;
    } else if (strcmp(state, "failed") == 0) {
        out->state = 2;
    } else {
        return fs_err_set(err, FS_EFORMAT, "job.state: expected running, done or failed");
    }
    if (out->algo_known && fs_algo_is_fedsvd(out->algo)) {
        /* a sharded job's document lists its shards under "shards" where
         * the spec has their count: decode the parameters with the count */
        const json_t *list = json_object_get(j, "shards");
        json_t *copy = json_is_array(list) ? json_copy((json_t *)j) : NULL;

        if (json_is_array(list) &&
            (copy == NULL ||
             json_object_set_new(copy, "shards", json_integer((json_int_t)json_array_size(list))) !=
                 0)) {
            json_decref(copy);
            return fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        out->is_fed = 1;
        rc = fs_job_fedsvd_decode(copy != NULL ? copy : j, out->algo, out->parties, out->rows,
                                  out->cols, &out->fed, err);
        json_decref(copy);
        if (rc != 0) {
            return fs_err_prefix(err, "job.");
        }
    }
    out->aggregations = 1;
    if (json_object_get(j, "aggregations") != NULL) {
        rc = get_u32(j, "aggregations", 1, FS_SECAGG_MAX_AGGREGATIONS, &out->aggregations, what,
                     err);
    }
    if (rc == 0 && json_object_get(j, "aggregation") != NULL &&
        !json_is_null(json_object_get(j, "aggregation"))) {
        rc = get_u32(j, "aggregation", 0, FS_SECAGG_MAX_AGGREGATIONS, &out->aggregation, what, err);
    }
    if (rc != 0) {
        return rc;
    }
    out->secagg = FS_JOB_SECAGG_FULL;
    v = json_object_get(j, "secagg");
    if (v != NULL && !json_is_null(v) &&
        (!json_is_string(v) || fs_job_secagg_parse(json_string_value(v), &out->secagg) != 0)) {
        return fs_err_set(err, FS_EFORMAT, "job.secagg: expected \"full\" or \"plus\"");
    }
    if (json_object_get(j, "secagg_degree") != NULL) {
        rc = get_u32(j, "secagg_degree", 0, FS_SECAGG_MAX_PARTIES, &out->secagg_degree, what, err);
    }
    if (rc == 0 && json_object_get(j, "secagg_share_threshold") != NULL) {
        rc = get_u32(j, "secagg_share_threshold", 0, FS_SECAGG_MAX_PARTIES, &out->secagg_share_t,
                     what, err);
    }
    if (rc != 0) {
        return rc;
    }
    v = json_object_get(j, "error");
    if (json_is_string(v)) {
        /* truncated, and made printable: it ends up in our own logs and API */
        snprintf(out->error, sizeof out->error, "%s", json_string_value(v));
        for (char *p = out->error; *p != '\0'; p++) {
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                *p = ' ';
            }
        }
    }
    return 0;
}

int fs_agent_job_secagg_config(const struct fs_agent_job *job, struct fs_secagg_config *cfg,
                               struct fs_err *err)
{
    int rc = fs_job_secagg_config(job->secagg, cfg, err);

    if (rc != 0) {
        return rc;
    }
    if ((job->secagg_degree != 0 || job->secagg_share_t != 0) &&
        (job->secagg_degree != cfg->degree || job->secagg_share_t != cfg->share_t)) {
        return fs_err_set(err, FS_EINVAL,
                          "the job's secure aggregation graph (degree %u, share threshold %u) is "
                          "not the one SecAgg+ calls for with %u parties (degree %u, threshold %u)",
                          job->secagg_degree, job->secagg_share_t, cfg->n, cfg->degree,
                          cfg->share_t);
    }
    return 0;
}

void fs_agent_job_view(const struct fs_agent_job *job, struct fs_agent_job_view *view)
{
    view->phase = job->phase;
    view->failed = job->state == 2;
    view->aggregation = job->aggregation;
    view->error = job->error;
    if (job->state == 1 && job->phase != FS_AGENT_J_DONE) {
        view->phase = FS_AGENT_J_DONE; /* state wins over an odd phase name */
    }
}

/* ---- aggregation ---- */

void fs_agent_agg_clear(struct fs_agent_agg *a)
{
    if (a == NULL) {
        return;
    }
    free(a->active);
    free(a->survivors);
    free(a->sig_ids);
    free(a->sigs);
    free(a->exp_ids);
    free(a->sealed);
    memset(a, 0, sizeof *a);
}

static int fixedpt_ok(const struct fs_fixedpt *fp, uint32_t n, struct fs_err *err)
{
    double lhs;

    if (!isfinite(fp->bound) || fp->bound <= 0) {
        return fs_err_set(err, FS_EINVAL, "aggregation.bound: must be positive and finite");
    }
    if (fp->summands < 1 || fp->summands > n) {
        return fs_err_set(err, FS_EINVAL, "aggregation.summands: %u outside 1..%u", fp->summands,
                          n);
    }
    /* summands * bound * 2^f <= 2^63, or a sum could wrap and decode wrong */
    lhs = log2((double)fp->summands) + log2(fp->bound) + (double)fp->frac_bits;
    if (!(lhs <= 63.0)) {
        return fs_err_set(err, FS_EINVAL,
                          "aggregation: frac_bits %d with bound %g and %u summands can wrap",
                          fp->frac_bits, fp->bound, fp->summands);
    }
    return 0;
}

static int opt_ids(const json_t *j, const char *key, uint32_t n, int *has, uint32_t **ids,
                   size_t *k, struct fs_err *err)
{
    json_t *v = json_object_get(j, key);
    int rc;

    *has = 0;
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    rc = fs_wire_ids_decode(v, n, ids, k, err);
    if (rc != 0) {
        return fs_err_prefix(err, "aggregation.%s: ", key);
    }
    *has = 1;
    return 0;
}

static int hex32(const char *s, uint8_t out[32])
{
    if (s == NULL || strlen(s) != 64) {
        return -1;
    }
    return fs_hex_decode_lower(s, out, 32);
}

/* The fedsvd/fedpca members of an aggregation: kind, exponents, sum. */
static int parse_fed_agg(const json_t *j, uint32_t n, struct fs_agent_agg *out, struct fs_err *err)
{
    char kind[16];
    json_t *v;
    int rc = get_str(j, "kind", kind, sizeof kind, "aggregation", err);

    if (rc != 0) {
        return rc;
    }
    out->fed = 1;
    if (strcmp(kind, "stats") == 0) {
        out->is_stats = 1;
    } else if (strcmp(kind, "svd") != 0) {
        return fs_err_set(err, FS_EINVAL, "aggregation.kind: expected stats or svd");
    }
    v = json_object_get(j, "exponents");
    if (v != NULL && !json_is_null(v)) {
        rc = fs_wire_exps_decode(v, n, &out->exp_ids, &out->sealed, &out->nexps, err);
        if (rc != 0) {
            return fs_err_prefix(err, "aggregation.");
        }
        out->has_exponents = 1;
    }
    v = json_object_get(j, "sum");
    if (v != NULL && !json_is_null(v)) {
        json_t *w = json_object_get(v, "words");
        if (!json_is_object(v) || !json_is_integer(w) ||
            hex32(json_string_value(json_object_get(v, "sha256")), out->sum_sha256) != 0) {
            return fs_err_set(err, FS_EFORMAT,
                              "aggregation.sum: expected {\"words\", \"sha256\"} (hex)");
        }
        if ((uint64_t)json_integer_value(w) != out->length) {
            return fs_err_set(err, FS_EINVAL,
                              "aggregation.sum.words: not the aggregation's length");
        }
        out->sum_words = out->length;
        out->has_sum = 1;
    }
    return 0;
}

/* The power-method members of an aggregation: kind, iteration, z. */
static int parse_power_agg(const json_t *j, const char *kind, struct fs_agent_agg *out,
                           struct fs_err *err)
{
    json_t *z = json_object_get(j, "z");
    json_t *shape = json_object_get(z, "shape");
    int rc;

    out->power = 1;
    out->is_rayleigh = strcmp(kind, "rayleigh") == 0;
    rc =
        get_u32(j, "iteration", 0, FS_FEDPOWER_MAX_ITERATIONS, &out->iteration, "aggregation", err);
    if (rc != 0) {
        return rc;
    }
    if (!json_is_object(z) || !json_is_array(shape) || json_array_size(shape) != 2 ||
        !json_is_integer(json_array_get(shape, 0)) || !json_is_integer(json_array_get(shape, 1)) ||
        hex32(json_string_value(json_object_get(z, "sha256")), out->z_sha256) != 0) {
        return fs_err_set(err, FS_EFORMAT,
                          "aggregation.z: expected {\"shape\": [d, r], \"sha256\": hex}");
    }
    if (json_integer_value(json_array_get(shape, 0)) < 1 ||
        json_integer_value(json_array_get(shape, 0)) > FS_FEDPOWER_MAX_DIM ||
        json_integer_value(json_array_get(shape, 1)) < 1 ||
        json_integer_value(json_array_get(shape, 1)) > FS_FEDPOWER_MAX_RANK) {
        return fs_err_set(err, FS_EINVAL, "aggregation.z.shape: out of range");
    }
    out->z_rows = (uint64_t)json_integer_value(json_array_get(shape, 0));
    out->z_cols = (uint64_t)json_integer_value(json_array_get(shape, 1));
    return 0;
}

int fs_agent_agg_parse(const json_t *j, uint32_t r, uint32_t n, uint64_t expect_len,
                       struct fs_agent_agg *out, struct fs_err *err)
{
    static const char *const what = "aggregation";
    char phase[32];
    json_t *v;
    json_int_t fb;
    int power;
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "aggregation: expected a JSON object");
    }
    v = json_object_get(j, "kind");
    power = json_is_string(v) && (strcmp(json_string_value(v), "sync") == 0 ||
                                  strcmp(json_string_value(v), "rayleigh") == 0);
    rc = get_u32(j, "index", r, r, &out->index, what, err);
    if (rc == 0) {
        rc = get_u64(j, "length", expect_len, expect_len, &out->length, what, err);
    }
    if (rc == 0) {
        /* plain fedpower rounds have no chunks: both 0 */
        rc = get_u64(j, "chunk_words", power ? 0 : 1, FS_AGENT_MAX_CHUNK_WORDS, &out->chunk_words,
                     what, err);
    }
    if (rc == 0) {
        uint64_t want =
            out->chunk_words == 0 ? 0 : (out->length + out->chunk_words - 1) / out->chunk_words;
        rc = get_u64(j, "chunks", want, want, &out->chunks, what, err);
    }
    if (rc == 0) {
        rc = get_str(j, "phase", phase, sizeof phase, what, err);
    }
    if (rc != 0) {
        goto out;
    }
    out->phase = fs_agent_jphase_parse(phase);
    v = json_object_get(j, "kind");
    if (power) {
        rc = parse_power_agg(j, json_string_value(v), out, err);
        if (rc != 0) {
            goto out;
        }
        goto sets;
    }
    if (v != NULL) {
        rc = parse_fed_agg(j, n, out, err);
        if (rc != 0) {
            goto out;
        }
        goto sets;
    }
    rc = get_u32(j, "summands", 1, n, &out->fp.summands, what, err);
    if (rc != 0) {
        goto out;
    }
    v = json_object_get(j, "bound");
    if (!json_is_number(v)) {
        rc = fs_err_set(err, FS_EFORMAT, "aggregation.bound: expected a number");
        goto out;
    }
    out->fp.bound = json_number_value(v);
    v = json_object_get(j, "frac_bits");
    if (!json_is_integer(v)) {
        rc = fs_err_set(err, FS_EFORMAT, "aggregation.frac_bits: expected an integer");
        goto out;
    }
    fb = json_integer_value(v);
    if (fb < -1100 || fb > 1100) {
        rc = fs_err_set(err, FS_EINVAL, "aggregation.frac_bits: %lld out of range", (long long)fb);
        goto out;
    }
    out->fp.frac_bits = (int)fb;
    rc = fixedpt_ok(&out->fp, n, err);
    if (rc != 0) {
        goto out;
    }
sets:
    v = json_object_get(j, "active");
    if (v == NULL) {
        rc = fs_err_set(err, FS_EFORMAT, "aggregation.active: missing");
        goto out;
    }
    rc = fs_wire_ids_decode(v, n, &out->active, &out->nactive, err);
    if (rc != 0) {
        fs_err_prefix(err, "aggregation.active: ");
        goto out;
    }
    rc = opt_ids(j, "survivors", n, &out->has_survivors, &out->survivors, &out->nsurvivors, err);
    if (rc != 0) {
        goto out;
    }
    v = json_object_get(j, "signatures");
    if (v != NULL && !json_is_null(v)) {
        rc = fs_wire_sigs_decode(v, n, &out->sig_ids, &out->sigs, &out->nsigs, err);
        if (rc != 0) {
            fs_err_prefix(err, "aggregation.");
            goto out;
        }
        out->has_signatures = 1;
    }
out:
    if (rc != 0) {
        fs_agent_agg_clear(out);
    }
    return rc;
}

/* ---- result ---- */

int fs_agent_file_name_ok(const char *name)
{
    size_t n = strlen(name);

    if (n < 5 || n > 52 || strcmp(name + n - 4, ".npy") != 0) {
        return 0;
    }
    for (size_t i = 0; i + 4 < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-')) {
            return 0;
        }
    }
    return 1;
}

static int parse_file(const json_t *e, size_t i, struct fs_agent_file *f, struct fs_err *err)
{
    char what[32];
    char hex[65];
    json_t *shape;
    int rc;

    snprintf(what, sizeof what, "files[%zu]", i);
    if (!json_is_object(e)) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected an object", what);
    }
    rc = get_str(e, "name", f->name, sizeof f->name, what, err);
    if (rc == 0 && !fs_agent_file_name_ok(f->name)) {
        rc = fs_err_set(err, FS_EFORMAT, "%s.name: not a safe .npy file name", what);
    }
    if (rc == 0) {
        rc = get_str(e, "sha256", hex, sizeof hex, what, err);
    }
    if (rc != 0) {
        return rc == FS_EINVAL ? fs_err_set(err, FS_EFORMAT, "%s: bad name or sha256", what) : rc;
    }
    if (strlen(hex) != 64) {
        return fs_err_set(err, FS_EFORMAT, "%s.sha256: expected 64 hex digits", what);
    }
    if (fs_hex_decode(hex, f->sha256, 32) != 0) {
        return fs_err_set(err, FS_EFORMAT, "%s.sha256: expected 64 hex digits", what);
    }
    shape = json_object_get(e, "shape");
    if (!json_is_array(shape) || json_array_size(shape) < 1 || json_array_size(shape) > 2) {
        return fs_err_set(err, FS_EFORMAT, "%s.shape: expected [n] or [rows, cols]", what);
    }
    f->ndim = (int)json_array_size(shape);
    f->shape[1] = 1;
    for (int d = 0; d < f->ndim; d++) {
        json_t *x = json_array_get(shape, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 0) {
            return fs_err_set(err, FS_EFORMAT, "%s.shape[%d]: expected a non-negative integer",
                              what, d);
        }
        f->shape[d] = (uint64_t)json_integer_value(x);
    }
    return 0;
}

int fs_agent_result_parse(const json_t *j, struct fs_agent_result *out, struct fs_err *err)
{
    json_t *files;
    size_t n;
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "result: expected a JSON object");
    }
    files = json_object_get(j, "files");
    if (!json_is_array(files)) {
        return fs_err_set(err, FS_EFORMAT, "result.files: expected an array");
    }
    n = json_array_size(files);
    if (n > FS_AGENT_MAX_FILES) {
        return fs_err_set(err, FS_ERANGE, "result.files: %zu files, at most %d allowed", n,
                          FS_AGENT_MAX_FILES);
    }
    for (size_t i = 0; i < n; i++) {
        rc = parse_file(json_array_get(files, i), i, &out->files[i], err);
        if (rc != 0) {
            fs_err_prefix(err, "result.");
            return rc;
        }
        for (size_t q = 0; q < i; q++) {
            if (strcmp(out->files[q].name, out->files[i].name) == 0) {
                return fs_err_set(err, FS_EFORMAT, "result.files[%zu].name: repeated", i);
            }
        }
    }
    out->nfiles = n;
    return 0;
}
