/* The client-agent's operator documents: see participation.h. */
#include "participation.h"

#include <stdio.h>
#include <string.h>

#include "agent_msgs.h"

json_t *fs_participation_request_encode(const struct fs_invitation *inv, const char *path,
                                        const char *format, const char *dataset_id)
{
    json_t *body = NULL;
    json_t *ds = json_pack("{s:s, s:s}", "path", path, "format", format != NULL ? format : "auto");
    json_t *ij = fs_invitation_encode(inv);

    if (ds != NULL && ij != NULL &&
        (dataset_id == NULL || json_object_set_new(ds, "id", json_string(dataset_id)) == 0)) {
        body = json_pack("{s:O, s:O}", "invitation", ij, "dataset", ds);
    }
    json_decref(ds);
    json_decref(ij);
    return body;
}

int fs_participation_id_valid(const char *s)
{
    if (s == NULL || strlen(s) != FS_PARTICIPATION_ID_LEN || strncmp(s, "p-", 2) != 0) {
        return 0;
    }
    for (const char *p = s + 2; *p != '\0'; p++) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

/* A string member into buf (cap bytes with the NUL); cut: longer texts are
 * truncated rather than refused. */
static int str_member(const json_t *j, const char *key, char *buf, size_t cap, int cut,
                      struct fs_err *err)
{
    const char *s = json_string_value(json_object_get(j, key));

    if (s == NULL) {
        return fs_err_set(err, FS_EFORMAT, "participation.%s: expected a string", key);
    }
    if (strlen(s) >= cap && !cut) {
        return fs_err_set(err, FS_EINVAL, "participation.%s: longer than %zu bytes", key, cap - 1);
    }
    snprintf(buf, cap, "%s", s);
    return 0;
}

static int uint_member(const json_t *j, const char *key, uint64_t *out, struct fs_err *err)
{
    const json_t *v = json_object_get(j, key);

    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        return fs_err_set(err, FS_EFORMAT, "participation.%s: expected a non-negative integer",
                          key);
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

int fs_participation_decode(const json_t *j, struct fs_participation *out, struct fs_err *err)
{
    const json_t *e = json_object_get(j, "error");
    uint64_t party = 0;
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "participation: expected a JSON object");
    }
    if ((rc = str_member(j, "id", out->id, sizeof out->id, 0, err)) != 0 ||
        (rc = str_member(j, "job_id", out->job_id, sizeof out->job_id, 0, err)) != 0 ||
        (rc = str_member(j, "algorithm", out->algorithm, sizeof out->algorithm, 0, err)) != 0 ||
        (rc = str_member(j, "state", out->state, sizeof out->state, 0, err)) != 0 ||
        (rc = str_member(j, "phase", out->phase, sizeof out->phase, 1, err)) != 0 ||
        (rc = str_member(j, "created_at", out->created_at, sizeof out->created_at, 1, err)) != 0 ||
        (rc = str_member(j, "updated_at", out->updated_at, sizeof out->updated_at, 1, err)) != 0 ||
        (rc = uint_member(j, "party", &party, err)) != 0 ||
        (rc = uint_member(j, "bytes_sent", &out->bytes_sent, err)) != 0 ||
        (rc = uint_member(j, "bytes_received", &out->bytes_received, err)) != 0) {
        return rc;
    }
    if (!fs_participation_id_valid(out->id)) {
        return fs_err_set(err, FS_EINVAL, "participation.id: expected \"p-\" and 32 hex digits");
    }
    if (party < 1 || party > FS_JOB_MAX_PARTIES) {
        return fs_err_set(err, FS_EINVAL, "participation.party: expected 1..%d",
                          FS_JOB_MAX_PARTIES);
    }
    out->party = (uint32_t)party;
    if (strcmp(out->state, "running") != 0 && strcmp(out->state, "done") != 0 &&
        strcmp(out->state, "failed") != 0) {
        return fs_err_set(err, FS_EINVAL, "participation.state: expected running, done or failed");
    }
    if (!json_is_number(json_object_get(j, "progress"))) {
        return fs_err_set(err, FS_EFORMAT, "participation.progress: expected a number");
    }
    out->progress = json_number_value(json_object_get(j, "progress"));
    if (!(out->progress >= 0 && out->progress <= 1)) {
        return fs_err_set(err, FS_EINVAL, "participation.progress: expected 0..1");
    }
    if (json_is_string(e)) {
        snprintf(out->error, sizeof out->error, "%s", json_string_value(e));
    } else if (e != NULL && !json_is_null(e)) {
        return fs_err_set(err, FS_EFORMAT, "participation.error: expected a string or null");
    }
    return 0;
}

int fs_participation_list_decode(const json_t *j, const json_t **items, size_t *n,
                                 struct fs_err *err)
{
    const json_t *a = json_object_get(j, "participations");

    *items = NULL;
    *n = 0;
    if (!json_is_object(j) || !json_is_array(a)) {
        return fs_err_set(err, FS_EFORMAT, "expected {\"participations\": [...]}");
    }
    *items = a;
    *n = json_array_size(a);
    return 0;
}

/* files[i] of a result document. */
static int file_entry(const json_t *f, size_t i, int need_bytes, struct fs_result_file *out,
                      struct fs_err *err)
{
    const char *name = json_string_value(json_object_get(f, "name"));
    const char *sha = json_string_value(json_object_get(f, "sha256"));
    const json_t *b = json_object_get(f, "bytes");

    memset(out, 0, sizeof *out);
    if (!json_is_object(f) || name == NULL || sha == NULL) {
        return fs_err_set(err, FS_EFORMAT, "files[%zu]: expected {\"name\", \"sha256\", ...}", i);
    }
    if (strlen(name) >= sizeof out->name || !fs_agent_file_name_ok(name)) {
        return fs_err_set(err, FS_EINVAL, "files[%zu].name: not a safe file name", i);
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    if (strlen(sha) != 64) {
        return fs_err_set(err, FS_EINVAL, "files[%zu].sha256: expected 64 hex digits", i);
    }
    for (size_t q = 0; q < 64; q++) {
        char c = sha[q];
        if (c >= 'A' && c <= 'F') {
            c = (char)(c - 'A' + 'a');
        }
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return fs_err_set(err, FS_EINVAL, "files[%zu].sha256: expected 64 hex digits", i);
        }
        out->sha256[q] = c;
    }
    out->sha256[64] = '\0';
    if (b == NULL && !need_bytes) {
        return 0;
    }
    if (!json_is_integer(b) || json_integer_value(b) < 0) {
        return fs_err_set(err, FS_EFORMAT, "files[%zu].bytes: expected a non-negative integer", i);
    }
    out->has_bytes = 1;
    out->bytes = (uint64_t)json_integer_value(b);
    return 0;
}

int fs_result_files_decode(const json_t *j, int need_bytes, struct fs_result_file *files, size_t *n,
                           struct fs_err *err)
{
    const json_t *a = json_object_get(j, "files");
    size_t i;
    json_t *f;
    int rc;

    *n = 0;
    if (!json_is_array(a)) {
        return fs_err_set(err, FS_EFORMAT, "files: expected an array");
    }
    if (json_array_size(a) > FS_RESULT_FILES_MAX) {
        return fs_err_set(err, FS_ERANGE, "files: more than %d entries", FS_RESULT_FILES_MAX);
    }
    json_array_foreach(a, i, f)
    {
        if ((rc = file_entry(f, i, need_bytes, &files[i], err)) != 0) {
            return rc;
        }
        for (size_t q = 0; q < i; q++) {
            if (strcmp(files[q].name, files[i].name) == 0) {
                return fs_err_set(err, FS_EINVAL, "files[%zu].name: %s listed twice", i,
                                  files[i].name);
            }
        }
    }
    *n = json_array_size(a);
    return 0;
}
