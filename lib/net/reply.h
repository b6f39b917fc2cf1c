/* Problem responses (RFC 9457, application/problem+json) the three services
 * send, and the one mapping from an fs_err code to the HTTP status, the
 * stable machine "code" and the title. openapi.yaml lists the same table
 * (components.schemas.Problem, x-fedsvd-problem-codes).
 *
 *   fs_err code      status  code          title
 *   FS_EFORMAT        400    bad_request   Bad Request
 *   FS_EAUTH          401    unauthorized  Unauthorized (+ WWW-Authenticate: Bearer)
 *   FS_EFORBIDDEN     403    forbidden     Forbidden
 *   FS_ENOTFOUND      404    not_found     Not Found
 *   FS_ESTATE         409    not_ready     Conflict (not reached yet: retry later)
 *   FS_ECONFLICT      409    conflict      Conflict (different content, or for good)
 *   FS_EABORTED       409    aborted       Conflict (the job or participation failed)
 *   FS_ERANGE         413    too_large     Content Too Large
 *   FS_EINVAL         422    invalid       Unprocessable Content
 *   FS_ETOOMANY       429    too_many_jobs Too Many Requests
 *   FS_EUNAVAILABLE   503    unavailable   Service Unavailable (+ Retry-After: 1)
 *   FS_ESTORAGE       503    storage_unavailable  Service Unavailable (+ Retry-After: 2):
 *                            the service cannot write its state (disk full,
 *                            quota, read-only); nothing was changed, retry
 *   anything else     500    internal      Internal Server Error (message logged, not sent)
 *
 * Codes sent by a route itself, outside the table: 410 gone (a deleted mask
 * set), 415 unsupported_media_type (fs_http_body_json), 403
 * privacy_budget_exceeded (the client-agent's privacy ledger). */
#ifndef FS_NET_REPLY_H
#define FS_NET_REPLY_H

#include <stdint.h>

#include <jansson.h>

#include "../core/err.h"
#include "http_server.h"

#define FS_PROBLEM_BAD_REQUEST   "bad_request"            /* 400 */
#define FS_PROBLEM_UNAUTHORIZED  "unauthorized"           /* 401 */
#define FS_PROBLEM_FORBIDDEN     "forbidden"              /* 403 */
#define FS_PROBLEM_NOT_FOUND     "not_found"              /* 404 */
#define FS_PROBLEM_NOT_READY     "not_ready"              /* 409: not reached yet, retry */
#define FS_PROBLEM_CONFLICT      "conflict"               /* 409: different content, or for good */
#define FS_PROBLEM_ABORTED       "aborted"                /* 409: the job failed */
#define FS_PROBLEM_GONE          "gone"                   /* 410: the resource was deleted */
#define FS_PROBLEM_TOO_LARGE     "too_large"              /* 413 */
#define FS_PROBLEM_UNSUPPORTED   "unsupported_media_type" /* 415 */
#define FS_PROBLEM_INVALID       "invalid"                /* 422 */
#define FS_PROBLEM_TOO_MANY_JOBS "too_many_jobs"          /* 429: a cap on running work */
#define FS_PROBLEM_INTERNAL      "internal"               /* 500 */
#define FS_PROBLEM_UNAVAILABLE   "unavailable"            /* 503: shutting down */
#define FS_PROBLEM_STORAGE       "storage_unavailable"    /* 503: cannot write state */

/* Retry-After (seconds) of a storage_unavailable answer. */
#define FS_STORAGE_RETRY_AFTER "2"

/* 403: a client agent refuses a job over its privacy budget (docs/privacy-ledger.md) */
#define FS_PROBLEM_DP_BUDGET "privacy_budget_exceeded"

/* One row of the mapping. */
struct fs_problem_kind {
    int err;          /* FS_E* code */
    unsigned status;  /* HTTP status */
    const char *code; /* FS_PROBLEM_* */
    const char *title;
};

/** The row of an fs_err code; the 500 "internal" row for a code not in the table. */
const struct fs_problem_kind *fs_problem_kind(int err_code);

/** HTTP status an fs_err code maps to (fs_problem_kind(code)->status). */
unsigned fs_http_status_for_err(int code);

/**
 * Problem response for an fs_err through the table: detail = err->msg,
 * except for a 500, whose detail is generic (the message is logged). A 401
 * carries WWW-Authenticate: Bearer, a 503 Retry-After (1, or
 * FS_STORAGE_RETRY_AFTER for FS_ESTORAGE, which is also noted in
 * net/storage.h's episode).
 * @return 0 or FS_ENOMEM (the framework then sends a bare 500).
 */
int fs_http_problem_err(fs_http_resp *resp, const struct fs_err *err);

/** fs_http_problem_err for code and a printf-style message. */
int fs_http_fail(fs_http_resp *resp, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * 200-style JSON reply: body (stolen; NULL = out of memory, a 500) dumped
 * compact as application/json. When count is not NULL the body's size is
 * added to *count (a job's byte counters).
 */
int fs_http_reply_json(fs_http_resp *resp, unsigned status, json_t *body, uint64_t *count);

/**
 * The buffered request body as JSON, or the problem response set: 415
 * unsupported_media_type for a Content-Type other than JSON, 400
 * bad_request for a body that is not JSON.
 * @return 0, or -1 with the response set.
 */
int fs_http_body_json(fs_http_req *req, fs_http_resp *resp, json_t **out);

#endif
