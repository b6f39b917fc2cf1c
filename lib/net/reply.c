/* The one fs_err -> problem mapping and the reply helpers: see reply.h. */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "storage.h"

static const struct fs_problem_kind KINDS[] = {
    {FS_EFORMAT, 400, FS_PROBLEM_BAD_REQUEST, "Bad Request"},
    {FS_EAUTH, 401, FS_PROBLEM_UNAUTHORIZED, "Unauthorized"},
    {FS_EFORBIDDEN, 403, FS_PROBLEM_FORBIDDEN, "Forbidden"},
    {FS_ENOTFOUND, 404, FS_PROBLEM_NOT_FOUND, "Not Found"},
    {FS_ESTATE, 409, FS_PROBLEM_NOT_READY, "Conflict"},
    {FS_ECONFLICT, 409, FS_PROBLEM_CONFLICT, "Conflict"},
    {FS_EABORTED, 409, FS_PROBLEM_ABORTED, "Conflict"},
    {FS_ERANGE, 413, FS_PROBLEM_TOO_LARGE, "Content Too Large"},
    {FS_EINVAL, 422, FS_PROBLEM_INVALID, "Unprocessable Content"},
    {FS_ETOOMANY, 429, FS_PROBLEM_TOO_MANY_JOBS, "Too Many Requests"},
    {FS_EUNAVAILABLE, 503, FS_PROBLEM_UNAVAILABLE, "Service Unavailable"},
    {FS_ESTORAGE, 503, FS_PROBLEM_STORAGE, "Service Unavailable"},
};

static const struct fs_problem_kind INTERNAL = {FS_EINTERNAL, 500, FS_PROBLEM_INTERNAL,
                                                "Internal Server Error"};

const struct fs_problem_kind *fs_problem_kind(int err_code)
{
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++) {
        if (KINDS[i].err == err_code) {
            return &KINDS[i];
        }
    }
    return &INTERNAL;
}

unsigned fs_http_status_for_err(int code)
{
    return fs_problem_kind(code)->status;
}

int fs_http_problem_err(fs_http_resp *resp, const struct fs_err *err)
{
    const struct fs_problem_kind *k = fs_problem_kind(err != NULL ? err->code : FS_EINTERNAL);
    const char *hdr = NULL;
    const char *val = NULL;
    int rc;

    if (k->status == 500) {
        fs_log_pack(FS_LOG_ERROR, "internal error", "{s:s, s:s}", "code",
                    fs_err_name(err != NULL ? err->code : FS_EINTERNAL), "error",
                    err != NULL ? err->msg : "");
        return fs_http_problem(resp, 500, k->code, k->title, "internal error (see the server log)");
    }
    rc = fs_http_problem(resp, k->status, k->code, k->title, "%s", err->msg);
    if (k->status == 401) {
        hdr = "WWW-Authenticate";
        val = "Bearer";
    } else if (k->status == 503) {
        hdr = "Retry-After";
        val = err->code == FS_ESTORAGE ? FS_STORAGE_RETRY_AFTER : "1";
        fs_storage_failed(err); /* logs once per episode */
    }
    if (rc == 0 && hdr != NULL && fs_http_resp_header(resp, hdr, val) != 0) {
        fs_log_pack(FS_LOG_WARN, "cannot add a response header", "{s:s}", "header", hdr);
    }
    return rc;
}

int fs_http_fail(fs_http_resp *resp, int code, const char *fmt, ...)
{
    struct fs_err err;
    va_list ap;

    fs_err_clear(&err);
    err.code = code;
    va_start(ap, fmt);
    vsnprintf(err.msg, sizeof err.msg, fmt, ap);
    va_end(ap);
    return fs_http_problem_err(resp, &err);
}

int fs_http_reply_json(fs_http_resp *resp, unsigned status, json_t *body, uint64_t *count)
{
    char *s;
    size_t n;

    if (body == NULL) {
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "out of memory");
    }
    s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (s == NULL) {
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "out of memory");
    }
    n = strlen(s);
    if (count != NULL) {
        *count += n;
    }
    return fs_http_resp_bytes_owned(resp, status, "application/json", s, n);
}

int fs_http_body_json(fs_http_req *req, fs_http_resp *resp, json_t **out)
{
    struct fs_err err = {0};
    int rc = fs_http_req_json(req, out, &err);

    if (rc == FS_EINVAL) {
        (void)fs_http_problem(resp, 415, FS_PROBLEM_UNSUPPORTED, NULL,
                              "Content-Type must be application/json");
        return -1;
    }
    if (rc != 0) {
        err.code = FS_EFORMAT;
        (void)fs_http_problem_err(resp, &err);
        return -1;
    }
    return 0;
}
