/* The aggregation server's job documents, client side: see jobdoc.h. */
#include "jobdoc.h"

#include <stdio.h>
#include <string.h>

const char *fs_job_state_name(enum fs_job_state s)
{
    switch (s) {
    case FS_JOB_STATE_RUNNING:
        return "running";
    case FS_JOB_STATE_DONE:
        return "done";
    case FS_JOB_STATE_FAILED:
        return "failed";
    }
    return "unknown";
}

/* ---- member helpers: `what` prefixes the messages ("job", "result") ---- */

/* A string member into buf (cap bytes with the NUL). required: FS_EFORMAT
 * when absent; cut: longer texts are truncated rather than refused; null
 * reads as absent. */
static int str_member(const json_t *j, const char *what, const char *key, int required, int cut,
                      char *buf, size_t cap, struct fs_err *err)
{
    const json_t *v = json_object_get(j, key);
    const char *s;

    buf[0] = '\0';
    if (v == NULL || json_is_null(v)) {
        return required ? fs_err_set(err, FS_EFORMAT, "%s.%s: missing", what, key) : 0;
    }
    if (!json_is_string(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected a string", what, key);
    }
    s = json_string_value(v);
    if (strlen(s) >= cap && !cut) {
        return fs_err_set(err, FS_EINVAL, "%s.%s: longer than %zu bytes", what, key, cap - 1);
    }
    snprintf(buf, cap, "%s", s);
    return 0;
}

/* A non-negative integer member in 0..hi; absent (or null) gives 0 unless required. */
static int uint_member(const json_t *j, const char *what, const char *key, int required,
                       uint64_t hi, uint64_t *out, struct fs_err *err)
{
    const json_t *v = json_object_get(j, key);

    *out = 0;
    if (v == NULL || json_is_null(v)) {
        return required ? fs_err_set(err, FS_EFORMAT, "%s.%s: missing", what, key) : 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected a non-negative integer", what, key);
    }
    if ((uint64_t)json_integer_value(v) > hi) {
        return fs_err_set(err, FS_EINVAL, "%s.%s: %lld is over %llu", what, key,
                          (long long)json_integer_value(v), (unsigned long long)hi);
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int u32_member(const json_t *j, const char *what, const char *key, int required, uint32_t hi,
                      uint32_t *out, struct fs_err *err)
{
    uint64_t x = 0;
    int rc = uint_member(j, what, key, required, hi, &x, err);

    *out = (uint32_t)x;
    return rc;
}

/* "shape": [rows, cols] of positive integers, when present. */
static int shape_member(const json_t *j, const char *what, int *has, uint64_t *rows, uint64_t *cols,
                        struct fs_err *err)
{
    const json_t *v = json_object_get(j, "shape");
    const json_t *r = json_array_get(v, 0);
    const json_t *c = json_array_get(v, 1);

    *has = 0;
    *rows = *cols = 0;
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(r) ||
        !json_is_integer(c)) {
        return fs_err_set(err, FS_EFORMAT, "%s.shape: expected [rows, cols]", what);
    }
    if (json_integer_value(r) < 1 || json_integer_value(c) < 1) {
        return fs_err_set(err, FS_EINVAL, "%s.shape: dimensions must be positive", what);
    }
    *has = 1;
    *rows = (uint64_t)json_integer_value(r);
    *cols = (uint64_t)json_integer_value(c);
    return 0;
}

/* A list of party ids (1..parties, at most parties of them) into ids, when present. */
static int ids_member(const json_t *j, const char *what, const char *key, uint32_t parties,
                      uint32_t *ids, size_t *n, struct fs_err *err)
{
    const json_t *a = json_object_get(j, key);
    size_t i;
    json_t *v;

    *n = 0;
    if (a == NULL || json_is_null(a)) {
        return 0;
    }
    if (!json_is_array(a)) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected an array of party ids", what, key);
    }
    if (json_array_size(a) > parties) {
        return fs_err_set(err, FS_EINVAL, "%s.%s: %zu ids for %u parties", what, key,
                          json_array_size(a), parties);
    }
    json_array_foreach(a, i, v)
    {
        if (!json_is_integer(v)) {
            return fs_err_set(err, FS_EFORMAT, "%s.%s[%zu]: expected an integer", what, key, i);
        }
        if (json_integer_value(v) < 1 || json_integer_value(v) > (json_int_t)parties) {
            return fs_err_set(err, FS_EINVAL, "%s.%s[%zu]: outside 1..%u", what, key, i, parties);
        }
        ids[i] = (uint32_t)json_integer_value(v);
    }
    *n = json_array_size(a);
    return 0;
}

int fs_job_ids_has(const uint32_t *ids, size_t n, uint32_t id)
{
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == id) {
            return 1;
        }
    }
    return 0;
}

/* ---- Job ---- */

static int state_member(const json_t *j, enum fs_job_state *out, struct fs_err *err)
{
    char s[16];
    int rc = str_member(j, "job", "state", 1, 0, s, sizeof s, err);

    if (rc != 0) {
        return rc;
    }
    for (int st = FS_JOB_STATE_RUNNING; st <= FS_JOB_STATE_FAILED; st++) {
        if (strcmp(s, fs_job_state_name((enum fs_job_state)st)) == 0) {
            *out = (enum fs_job_state)st;
            return 0;
        }
    }
    return fs_err_set(err, FS_EINVAL, "job.state: expected running, done or failed");
}

static int timings_member(const json_t *j, struct fs_job_status *out, struct fs_err *err)
{
    const json_t *t = json_object_get(j, "timings");
    const char *key;
    json_t *v;

    if (t == NULL || json_is_null(t)) {
        return 0;
    }
    if (!json_is_object(t)) {
        return fs_err_set(err, FS_EFORMAT, "job.timings: expected an object");
    }
    json_object_foreach((json_t *)t, key, v)
    {
        if (!json_is_number(v)) {
            return fs_err_set(err, FS_EFORMAT, "job.timings.%.48s: expected a number", key);
        }
        if (out->ntimings < FS_JOBDOC_TIMINGS_MAX) {
            struct fs_job_timing *e = &out->timings[out->ntimings++];
            snprintf(e->name, sizeof e->name, "%s", key);
            e->seconds = json_number_value(v);
        }
    }
    return 0;
}

static int deadline_member(const json_t *j, struct fs_job_status *out, struct fs_err *err)
{
    const json_t *v = json_object_get(j, "deadline_in_s");

    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_number(v)) {
        return fs_err_set(err, FS_EFORMAT, "job.deadline_in_s: expected a number or null");
    }
    out->has_deadline = 1;
    out->deadline_in_s = json_number_value(v);
    return 0;
}

static int error_member(const json_t *j, const char *what, int *has, char *buf, size_t cap,
                        struct fs_err *err)
{
    const json_t *v = json_object_get(j, "error");
    int rc = str_member(j, what, "error", 0, 1, buf, cap, err);

    *has = rc == 0 && json_is_string(v);
    return rc;
}

/* A pair [a, b] of integers, a <= b. */
static int pair_member(const json_t *e, const char *what, const char *key, uint64_t *a, uint64_t *b,
                       struct fs_err *err)
{
    const json_t *v = json_object_get(e, key);
    const json_t *x;
    const json_t *y;

    if (!json_is_array(v) || json_array_size(v) != 2) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected [integer, integer]", what, key);
    }
    x = json_array_get(v, 0);
    y = json_array_get(v, 1);
    if (!json_is_integer(x) || !json_is_integer(y) || json_integer_value(x) < 0 ||
        json_integer_value(y) < 0) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected two non-negative integers", what, key);
    }
    *a = (uint64_t)json_integer_value(x);
    *b = (uint64_t)json_integer_value(y);
    return 0;
}

static int shards_member(const json_t *j, struct fs_job_status *out, struct fs_err *err)
{
    const json_t *a = json_object_get(j, "shards");
    size_t n;

    out->nshards = 0;
    if (a == NULL || json_is_null(a)) {
        return 0;
    }
    n = json_is_array(a) ? json_array_size(a) : 0;
    if (!json_is_array(a) || n < 2 || n > FS_JOB_MAX_SHARDS) {
        return fs_err_set(err, FS_EFORMAT, "job.shards: expected an array of 2..%d shards",
                          FS_JOB_MAX_SHARDS);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(a, i);
        struct fs_job_shard *sh = &out->shards[i];
        uint64_t len = 0;
        int rc;
        if (!json_is_object(e)) {
            return fs_err_set(err, FS_EFORMAT, "job.shards[%zu]: expected an object", i);
        }
        rc = u32_member(e, "job.shards[]", "shard", 1, FS_JOB_MAX_SHARDS, &sh->shard, err);
        if (rc == 0) {
            rc = str_member(e, "job.shards[]", "url", 1, 0, sh->url, sizeof sh->url, err);
        }
        if (rc == 0) {
            rc = pair_member(e, "job.shards[]", "rows", &sh->lo, &sh->hi, err);
        }
        if (rc == 0) {
            rc = pair_member(e, "job.shards[]", "words", &sh->off, &len, err);
        }
        if (rc != 0) {
            return rc;
        }
        sh->len = len;
        if (sh->shard != i || sh->lo >= sh->hi || len == 0 ||
            (strncmp(sh->url, "http://", 7) != 0 && strncmp(sh->url, "https://", 8) != 0)) {
            return fs_err_set(err, FS_EINVAL, "job.shards[%zu]: bad shard, url, rows or words", i);
        }
    }
    out->nshards = (uint32_t)n;
    return 0;
}

json_t *fs_job_shards_encode(const struct fs_job_shard *sh, uint32_t n)
{
    json_t *a = json_array();

    for (uint32_t i = 0; a != NULL && i < n; i++) {
        json_t *e = json_pack("{s:i, s:s, s:[I, I], s:[I, I]}", "shard", (int)sh[i].shard, "url",
                              sh[i].url, "rows", (json_int_t)sh[i].lo, (json_int_t)sh[i].hi,
                              "words", (json_int_t)sh[i].off, (json_int_t)sh[i].len);
        if (e == NULL || json_array_append_new(a, e) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

int fs_job_status_decode(const json_t *j, struct fs_job_status *out, struct fs_err *err)
{
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "job: expected a JSON object");
    }
    if ((rc = str_member(j, "job", "id", 1, 0, out->id, sizeof out->id, err)) != 0 ||
        (rc = str_member(j, "job", "algorithm", 1, 0, out->algorithm, sizeof out->algorithm,
                         err)) != 0 ||
        (rc = str_member(j, "job", "name", 0, 1, out->name, sizeof out->name, err)) != 0 ||
        (rc = state_member(j, &out->state, err)) != 0 ||
        (rc = str_member(j, "job", "phase", 1, 0, out->phase, sizeof out->phase, err)) != 0 ||
        (rc = u32_member(j, "job", "parties", 1, FS_JOB_MAX_PARTIES, &out->parties, err)) != 0) {
        return rc;
    }
    out->algo_known = fs_algo_parse(out->algorithm, &out->algo) == 0;
    out->phase_known = fs_job_phase_parse(out->phase, &out->phase_id) == 0;
    if (out->parties < 1) {
        return fs_err_set(err, FS_EINVAL, "job.parties: expected 1..%d", FS_JOB_MAX_PARTIES);
    }
    if ((rc = u32_member(j, "job", "threshold", 0, out->parties, &out->threshold, err)) != 0 ||
        (rc = u32_member(j, "job", "aggregation", 0, UINT32_MAX, &out->aggregation, err)) != 0 ||
        (rc = u32_member(j, "job", "aggregations", 0, UINT32_MAX, &out->aggregations, err)) != 0 ||
        (rc = shape_member(j, "job", &out->has_shape, &out->rows, &out->cols, err)) != 0 ||
        (rc = ids_member(j, "job", "present", out->parties, out->present, &out->npresent, err)) !=
            0 ||
        (rc = ids_member(j, "job", "dropped", out->parties, out->dropped, &out->ndropped, err)) !=
            0 ||
        (rc = uint_member(j, "job", "bytes_in", 0, UINT64_MAX, &out->bytes_in, err)) != 0 ||
        (rc = uint_member(j, "job", "bytes_out", 0, UINT64_MAX, &out->bytes_out, err)) != 0 ||
        (rc = timings_member(j, out, err)) != 0 || (rc = deadline_member(j, out, err)) != 0 ||
        (rc = str_member(j, "job", "created_at", 0, 1, out->created_at, sizeof out->created_at,
                         err)) != 0 ||
        (rc = str_member(j, "job", "secagg", 0, 1, out->secagg, sizeof out->secagg, err)) != 0 ||
        (rc = u32_member(j, "job", "secagg_degree", 0, FS_JOB_MAX_PARTIES, &out->secagg_degree,
                         err)) != 0) {
        return rc;
    }
    rc = shards_member(j, out, err);
    if (rc != 0) {
        return rc;
    }
    return error_member(j, "job", &out->has_error, out->error, sizeof out->error, err);
}

int fs_job_list_decode(const json_t *j, const json_t **jobs, size_t *n, struct fs_err *err)
{
    const json_t *a = json_object_get(j, "jobs");

    *jobs = NULL;
    *n = 0;
    if (!json_is_object(j) || !json_is_array(a)) {
        return fs_err_set(err, FS_EFORMAT, "job list: expected {\"jobs\": [...]}");
    }
    *jobs = a;
    *n = json_array_size(a);
    return 0;
}

int fs_job_created_decode(const json_t *j, struct fs_job_status *job, const json_t **invitations,
                          struct fs_err *err)
{
    const json_t *a = json_object_get(j, "invitations");
    int rc;

    *invitations = NULL;
    if (!json_is_object(j)) {
        memset(job, 0, sizeof *job);
        return fs_err_set(err, FS_EFORMAT, "job created: expected a JSON object");
    }
    rc = fs_job_status_decode(json_object_get(j, "job"), job, err);
    if (rc != 0) {
        return rc;
    }
    if (!json_is_array(a)) {
        return fs_err_set(err, FS_EFORMAT, "invitations: expected an array");
    }
    if (json_array_size(a) != job->parties) {
        return fs_err_set(err, FS_EINVAL, "invitations: %zu for %u parties", json_array_size(a),
                          job->parties);
    }
    for (size_t i = 0; i < job->parties; i++) {
        const json_t *inv = json_array_get(a, i);
        const json_t *p = json_object_get(inv, "party");
        if (!json_is_object(inv) || !json_is_integer(p)) {
            return fs_err_set(err, FS_EFORMAT, "invitations[%zu]: expected an invitation", i);
        }
        if (json_integer_value(p) != (json_int_t)(i + 1)) {
            return fs_err_set(err, FS_EINVAL, "invitations[%zu].party: expected %zu", i, i + 1);
        }
    }
    *invitations = a;
    return 0;
}

int fs_invitation_add_maskset(json_t *invitation, const char *masking_url, const char *maskset)
{
    if (!json_is_object(invitation) || masking_url == NULL || maskset == NULL ||
        json_object_set_new(invitation, "masking_url", json_string(masking_url)) != 0 ||
        json_object_set_new(invitation, "maskset", json_string(maskset)) != 0) {
        return -1;
    }
    return 0;
}

/* ---- Result ---- */

int fs_job_result_decode(const json_t *j, int need_bytes, struct fs_job_result *out,
                         struct fs_err *err)
{
    uint32_t lim = FS_JOB_MAX_PARTIES;
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "result: expected a JSON object");
    }
    if ((rc = str_member(j, "result", "algorithm", 1, 0, out->algorithm, sizeof out->algorithm,
                         err)) != 0 ||
        (rc = u32_member(j, "result", "parties", 0, FS_JOB_MAX_PARTIES, &out->parties, err)) != 0 ||
        (rc = shape_member(j, "result", &out->has_shape, &out->rows, &out->cols, err)) != 0) {
        return rc;
    }
    out->algo_known = fs_algo_parse(out->algorithm, &out->algo) == 0;
    if (out->parties > 0) {
        lim = out->parties;
    }
    if ((rc = ids_member(j, "result", "survivors", lim, out->survivors, &out->nsurvivors, err)) !=
            0 ||
        (rc = ids_member(j, "result", "dropped", lim, out->dropped, &out->ndropped, err)) != 0) {
        return rc;
    }
    rc = fs_result_files_decode(j, need_bytes, out->files, &out->nfiles, err);
    if (rc != 0) {
        fs_err_prefix(err, "result.");
    }
    return rc;
}

json_t *fs_job_maskset_encode(const struct fs_job_maskset *m)
{
    return json_pack("{s:s, s:s, s:s}", "masking_url", m->masking_url, "maskset", m->maskset,
                     "end_token", m->end_token);
}
