/* Stable machine codes of problem+json errors (docs/wire-secure-sum.md). */
#ifndef FS_API_PROBLEM_H
#define FS_API_PROBLEM_H

#define FS_PROBLEM_BAD_REQUEST   "bad_request"  /* 400 */
#define FS_PROBLEM_UNAUTHORIZED  "unauthorized" /* 401 */
#define FS_PROBLEM_FORBIDDEN     "forbidden"    /* 403 */
#define FS_PROBLEM_NOT_FOUND     "not_found"    /* 404 */
#define FS_PROBLEM_NOT_READY     "not_ready"    /* 409: not reached yet, retry */
#define FS_PROBLEM_CONFLICT      "conflict"  /* 409: different content, or wrong phase for good */
#define FS_PROBLEM_ABORTED       "aborted"   /* 409: the job failed */
#define FS_PROBLEM_TOO_LARGE     "too_large" /* 413 */
#define FS_PROBLEM_UNSUPPORTED   "unsupported_media_type" /* 415 */
#define FS_PROBLEM_INVALID       "invalid"                /* 422 */
#define FS_PROBLEM_TOO_MANY_JOBS "too_many_jobs"          /* 429: server's job cap reached */
#define FS_PROBLEM_INTERNAL      "internal"               /* 500 */
#define FS_PROBLEM_UNAVAILABLE   "unavailable"            /* 503: shutting down */

/* 403: a client agent refuses a job over its privacy budget (docs/privacy-ledger.md) */
#define FS_PROBLEM_DP_BUDGET "privacy_budget_exceeded"

#endif
