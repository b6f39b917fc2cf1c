/* Typed fields of JSON objects with the codecs' error messages: see jsonfield.h. */
#include "jsonfield.h"

#include <string.h>

int fs_json_printable(const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) {
            return 0;
        }
    }
    return 1;
}

/* Optional string field copied into buf (cap bytes incl. NUL). */
int fs_json_opt_string(const json_t *obj, const char *key, char *buf, size_t cap,
                       struct fs_err *err)
{
    json_t *v = json_object_get(obj, key);
    const char *s;

    buf[0] = '\0';
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_string(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected a string", key);
    }
    s = json_string_value(v);
    if (strlen(s) >= cap || json_string_length(v) != strlen(s)) {
        return fs_err_set(err, FS_EINVAL, "%s: longer than %zu bytes or contains NUL", key,
                          cap - 1);
    }
    if (!fs_json_printable(s)) {
        return fs_err_set(err, FS_EINVAL, "%s: contains control characters", key);
    }
    memcpy(buf, s, strlen(s) + 1);
    return 0;
}

int fs_json_req_string(const json_t *obj, const char *key, char *buf, size_t cap,
                       struct fs_err *err)
{
    if (json_object_get(obj, key) == NULL) {
        return fs_err_set(err, FS_EFORMAT, "%s: missing", key);
    }
    return fs_json_opt_string(obj, key, buf, cap, err);
}

/* Integer field in lo..hi; *present = 0 (and no error) when absent/null and present != NULL. */
int fs_json_int_field(const json_t *obj, const char *key, long long lo, long long hi,
                      long long *out, int *present, struct fs_err *err)
{
    json_t *v = json_object_get(obj, key);

    if (present != NULL) {
        *present = 0;
    }
    if (v == NULL || json_is_null(v)) {
        if (present != NULL) {
            return 0;
        }
        return fs_err_set(err, FS_EFORMAT, "%s: missing", key);
    }
    if (!json_is_integer(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected an integer", key);
    }
    if ((long long)json_integer_value(v) < lo || (long long)json_integer_value(v) > hi) {
        return fs_err_set(err, FS_EINVAL, "%s: %lld outside %lld..%lld", key,
                          (long long)json_integer_value(v), lo, hi);
    }
    *out = (long long)json_integer_value(v);
    if (present != NULL) {
        *present = 1;
    }
    return 0;
}

int fs_json_shape_field(const json_t *obj, uint64_t max_elements, uint64_t *rows, uint64_t *cols,
                        struct fs_err *err)
{
    json_t *v = json_object_get(obj, "shape");
    json_t *r;
    json_t *c;

    if (v == NULL) {
        return fs_err_set(err, FS_EFORMAT, "shape: missing");
    }
    if (!json_is_array(v) || json_array_size(v) != 2) {
        return fs_err_set(err, FS_EFORMAT, "shape: expected [rows, cols]");
    }
    r = json_array_get(v, 0);
    c = json_array_get(v, 1);
    if (!json_is_integer(r) || !json_is_integer(c)) {
        return fs_err_set(err, FS_EFORMAT, "shape: expected two integers");
    }
    if (json_integer_value(r) < 1 || json_integer_value(c) < 1) {
        return fs_err_set(err, FS_EINVAL, "shape: dimensions must be positive");
    }
    *rows = (uint64_t)json_integer_value(r);
    *cols = (uint64_t)json_integer_value(c);
    if (*rows > max_elements || *cols > max_elements || *rows > max_elements / *cols) {
        return fs_err_set(err, FS_EINVAL,
                          "shape: %llu x %llu is over the server's limit of "
                          "%llu elements",
                          (unsigned long long)*rows, (unsigned long long)*cols,
                          (unsigned long long)max_elements);
    }
    return 0;
}

int fs_json_bool_field(const json_t *obj, const char *key, int *out, struct fs_err *err)
{
    json_t *v = json_object_get(obj, key);

    *out = 0;
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_boolean(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected true or false", key);
    }
    *out = json_is_true(v);
    return 0;
}
