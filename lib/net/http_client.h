/* HTTP client on libcurl: timeouts, capped response
 * bodies, retries with exponential backoff and CSPRNG jitter, bearer
 * tokens, TLS verification on unless told otherwise, streamed uploads and
 * downloads (temp file + rename), problem+json errors as fs_err messages.
 *
 * An fs_httpc keeps one libcurl handle (and so reuses connections). It is
 * NOT thread-safe: use one per thread.
 *
 * Retries (up to cfg.max_retries more attempts):
 *  - idempotent requests (GET, HEAD, PUT, DELETE, or FS_HTTPC_RETRY_ALWAYS):
 *    on connection/transport errors and on 502, 503, 504 and 429;
 *  - others (POST, PATCH): only when the connection could not be made
 *    (nothing was sent) and on 429 (the server refused to process it).
 *  A Retry-After on 429/503 is honoured (seconds or HTTP date) up to
 *  cfg.retry_after_max_ms; longer waits are not retried and the response is
 *  returned. Bodies are re-sent from the start on each attempt.
 */
#ifndef FS_NET_HTTP_CLIENT_H
#define FS_NET_HTTP_CLIENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

typedef struct fs_httpc fs_httpc;

struct fs_httpc_config {
    const char *base_url;    /* "http://127.0.0.1:8080"; paths are appended. NULL: paths
                                are full URLs. Copied. */
    const char *token;       /* bearer token or NULL; copied (wiped on free) */
    long connect_timeout_ms; /* default 5000 */
    long timeout_ms;         /* whole-attempt limit; 0 = none (rely on the low-speed limit) */
    long low_speed_time_s;   /* abort an attempt that moves < 1 byte/s for this long; default 30 */
    unsigned max_retries;    /* extra attempts; default 4 */
    long backoff_base_ms;    /* first delay; doubles per attempt; default 200 */
    long backoff_max_ms;     /* delay cap; default 10000 */
    long retry_after_max_ms; /* longest Retry-After honoured; default 30000 */
    size_t max_body;         /* in-memory response body cap; default 16 MiB */
    uint64_t max_download;   /* file download cap; default 64 GiB */
    int insecure;            /* 1: do not verify TLS certificates or host names */
    int allow_insecure_http; /* 1: allow http:// (and scheme-less) URLs to hosts that are
                                not loopback; default 0: only https:// leaves the machine
                                (see fs_http_url_check) */
    const char *ca_file;     /* PEM bundle to verify the server with; NULL = system store */
    const char *user_agent;  /* the product, default "fedsvd"; requests send the User-Agent
                                "<product>/<version>" (fs_version: "fedsvd/0.9.0") */
    const char *source_address; /* local IP literal that outgoing connections come from (for
                                   hosts with several addresses); NULL = the kernel's choice.
                                   fs_httpc_config_default takes it from the environment
                                   variable FEDSVD_SOURCE_ADDRESS. Copied. */
};

/**
 * 1 when host (as written in a URL or a --listen value, IPv6 without
 * brackets) is a loopback address: "localhost", an IPv4 literal in
 * 127.0.0.0/8 (dotted quad), "::1" or an IPv4-mapped 127.x address. Anything
 * else (names, other spellings of 127.0.0.1, zone ids) is 0.
 */
int fs_http_host_is_loopback(const char *host);

/**
 * The rule every client applies before connecting: plain HTTP only to
 * loopback. A URL that is not https:// (http://, or no scheme, which libcurl
 * would treat as http) must name a loopback host (userinfo skipped, IPv6 in
 * brackets) unless allow_insecure_http is set. Nothing is resolved and no
 * connection is made.
 * @return 0, or FS_EINVAL with a message naming the URL's host and the
 *         --insecure-http flag.
 */
FS_WUR int fs_http_url_check(const char *url, int allow_insecure_http, struct fs_err *err);

/** Fill cfg with the defaults above (base_url/token NULL). */
void fs_httpc_config_default(struct fs_httpc_config *cfg);

/** New client (cfg copied). @return 0, FS_ENOMEM, FS_EINVAL (bad token, or a base_url
 *  refused by fs_http_url_check), FS_EIO (libcurl init). */
FS_WUR int fs_httpc_new(fs_httpc **out, const struct fs_httpc_config *cfg, struct fs_err *err);

/** Free (token wiped). Accepts NULL. */
void fs_httpc_free(fs_httpc *c);

/** Replace the bearer token (copied; NULL removes it). @return 0, FS_EINVAL, FS_ENOMEM. */
FS_WUR int fs_httpc_set_token(fs_httpc *c, const char *token, struct fs_err *err);

/** Streamed body source: fill up to cap bytes into buf, set *got (0 = end).
 *  @return 0, or non-zero to abort the request. */
typedef int (*fs_httpc_read_fn)(void *ctx, void *buf, size_t cap, size_t *got);

/** Restart a streamed body from its first byte (before a retry). @return 0 or non-zero. */
typedef int (*fs_httpc_rewind_fn)(void *ctx);

enum fs_httpc_retry {
    FS_HTTPC_RETRY_AUTO = 0, /* by method, see above */
    FS_HTTPC_RETRY_ALWAYS, /* caller asserts the request is idempotent (e.g. a chunk PUT by POST) */
    FS_HTTPC_RETRY_NEVER
};

/** One request. Everything is borrowed for the duration of the call. At most
 *  one body source (body, upload_file, read) may be set. */
struct fs_httpc_req {
    const char *method;       /* "GET", "POST", "PUT", "DELETE", ... */
    const char *path;         /* appended to base_url; also used in error messages */
    const char *content_type; /* of the request body */
    const char *accept;       /* Accept header, or NULL */
    const void *body;         /* in-memory body of body_len bytes */
    size_t body_len;
    const char *upload_file;   /* stream this file as the body */
    fs_httpc_read_fn read;     /* stream from a callback ... */
    fs_httpc_rewind_fn rewind; /* ... which can restart (NULL: no retry once sent) */
    void *read_ctx;
    int64_t read_len;          /* bytes the callback will produce; -1 = unknown (chunked) */
    const char *download_file; /* a 2xx body goes to this file (temp + rename), capped at
                                  cfg.max_download; other bodies go to resp->body */
    enum fs_httpc_retry retry;
    long timeout_ms;           /* this request's whole-attempt limit: 0 = cfg.timeout_ms, < 0 = none
                                  (long polls, very large transfers) */
    const char *authorization; /* this request's Authorization value (e.g. a signature,
                                  lib/crypto/reqsig.h) instead of the bearer token; NULL =
                                  the client's token. Sent as is on every attempt. */
};

/** A response. Clear with fs_httpc_resp_clear. */
struct fs_httpc_resp {
    long status; /* final HTTP status */
    char *body;  /* NUL-terminated, len bytes (not counting the NUL); NULL if empty */
    size_t len;
    char content_type[128]; /* "" when absent */
    unsigned attempts;      /* 1 + retries made */
};

/** Free the body and zero the struct. Accepts NULL. */
void fs_httpc_resp_clear(struct fs_httpc_resp *resp);

/**
 * Perform a request (with retries). Any HTTP status counts as success here;
 * use fs_httpc_check to turn non-2xx into an error.
 * @param resp caller-owned, filled (cleared first). On error it may hold the
 *             last response seen.
 * @return 0; FS_EIO (connection/transport failed after the retries, or file
 *         I/O); FS_ERANGE (response body over the cap); FS_ECRYPTO (TLS
 *         verification failed); FS_EINVAL (bad request description, or a
 *         URL refused by fs_http_url_check: nothing was sent).
 */
FS_WUR int fs_httpc_do(fs_httpc *c, const struct fs_httpc_req *rq, struct fs_httpc_resp *resp,
                       struct fs_err *err);

/**
 * 0 for a 2xx response; otherwise an error named after the request and the
 * server's problem+json, e.g. "POST /v1/jobs: 422 invalid_shape: rows differ".
 * Codes: 400 FS_EFORMAT, 401/403 FS_EAUTH, 404 FS_ENOTFOUND, 409 FS_ECONFLICT,
 * 413 FS_ERANGE, 422 FS_EINVAL, others FS_EIO.
 */
FS_WUR int fs_httpc_check(const struct fs_httpc_resp *resp, const char *method, const char *path,
                          struct fs_err *err);

/**
 * JSON call: send `body` (borrowed; NULL = no body) as application/json, require
 * a 2xx, parse the response. *out receives a new reference (NULL for an empty
 * body); out may be NULL to ignore the response. Optional status out.
 */
FS_WUR int fs_httpc_json(fs_httpc *c, const char *method, const char *path, const json_t *body,
                         json_t **out, long *status, struct fs_err *err);

/** PUT/POST bytes (content_type, e.g. "application/x-npy"), require a 2xx;
 *  the JSON response (if any) to *out as with fs_httpc_json. */
FS_WUR int fs_httpc_send_bytes(fs_httpc *c, const char *method, const char *path,
                               const char *content_type, const void *data, size_t len, json_t **out,
                               struct fs_err *err);

/** PUT/POST a file, streamed; otherwise as fs_httpc_send_bytes. */
FS_WUR int fs_httpc_send_file(fs_httpc *c, const char *method, const char *path,
                              const char *content_type, const char *file, json_t **out,
                              struct fs_err *err);

/** GET path into dest (temp file in dest's directory, then rename); require a 2xx.
 *  Optional *bytes receives the size. */
FS_WUR int fs_httpc_download(fs_httpc *c, const char *path, const char *dest, uint64_t *bytes,
                             struct fs_err *err);

#endif
