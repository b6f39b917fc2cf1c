/* A small HTTP/1.1 server framework on libmicrohttpd 0.9.75.
 *
 * Usage:
 *
 *   struct fs_http_server_config cfg;
 *   fs_http_server_config_default(&cfg);
 *   cfg.host = "127.0.0.1"; cfg.port = 0;            // 0: ephemeral port
 *   fs_http_server_new(&srv, &cfg, &err);
 *   fs_http_server_route(srv, &(struct fs_http_route){
 *       .method = "GET", .pattern = "/v1/jobs/{id}", .handler = get_job, .ctx = app}, &err);
 *   fs_http_server_start(srv, &err);
 *   ... fs_http_server_port(srv) ...
 *   fs_http_server_stop(srv, 5000);
 *   fs_http_server_free(srv);
 *
 * Request lifecycle (one fs_http_req per request, allocated when the
 * headers are in, freed when libmicrohttpd reports the request completed):
 *
 *  1. Routing on the percent-decoded path segments. No pattern matches:
 *     404 problem. A pattern matches but not the method: 405 problem with an
 *     Allow header. Malformed percent-encoding: 400 problem.
 *  2. route.auth set: the Authorization header must carry an allowed bearer
 *     token, else 401 problem (before any body byte is read).
 *  3. A declared Content-Length above route.max_body: 413 problem (before
 *     any body byte is read).
 *  4. route.on_begin (optional) sees the headers and may reject the request
 *     by setting a response or returning non-zero.
 *  5. Body. Buffered routes (on_chunk == NULL) collect it in memory, capped
 *     at max_body and checked as every piece arrives (413 when exceeded, also
 *     for chunked uploads). Streaming routes get each piece in on_chunk as it
 *     arrives (pieces are bounded by conn_memory_limit) and nothing
 *     is buffered; the total is still capped at max_body.
 *  6. route.handler runs once the whole body is in, and sets the response.
 *
 * Slow clients: besides the idle timeout (cfg.timeout_s) and the connection
 * caps (cfg.max_connections, cfg.max_per_ip), every request has a deadline
 * (cfg.request_timeout_s + body bytes / cfg.min_body_rate) counted from the
 * moment its connection was ready for it (accepted, or the previous response
 * sent). A client still sending headers or body when it passes is
 * disconnected (a warning is logged with its address), however steadily it
 * trickles bytes. The deadline stops once the request is complete: handlers
 * and responses are not limited by it.
 *
 * TLS: versions 1.2 and 1.3 only, AEAD ciphers with forward secrecy
 * (FS_HTTP_TLS_PRIORITIES).
 *
 * When a request is rejected while its body is still coming, the framework
 * discards up to drain_max further bytes so the client reads a clean error
 * reply, then closes the connection if the client keeps sending.
 *
 * Handlers run on the server's threads; several run concurrently, so `ctx`
 * must be thread-safe. They should return quickly: long work (SVD, QR,
 * decryption) belongs on a worker thread.
 *
 * Errors: fs_http_problem produces application/problem+json (RFC 9457):
 *   {"type":"urn:fedsvd:problem:<code>","title":...,"status":...,"detail":...,"code":...}
 */
#ifndef FS_NET_HTTP_SERVER_H
#define FS_NET_HTTP_SERVER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "auth.h"

#define FS_HTTP_PROBLEM_TYPE_PREFIX "urn:fedsvd:problem:"
#define FS_HTTP_MAX_PARAMS          8  /* {param} segments per pattern */
#define FS_HTTP_MAX_SEGMENTS        32 /* path segments per request / pattern */
#define FS_HTTP_MAX_QUERY           32 /* query parameters per request (more: 400) */

/* The GnuTLS priority string of HTTPS servers: TLS 1.3 and 1.2 only, AES-GCM
 * and ChaCha20-Poly1305, ECDHE key exchange (forward secrecy), no SHA-1
 * signatures, the server's order. */
#define FS_HTTP_TLS_PRIORITIES                                                                     \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM:"            \
    "+CHACHA20-POLY1305:-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:-SIGN-RSA-SHA1:"            \
    "-SIGN-ECDSA-SHA1:-SIGN-DSA-SHA1:%SERVER_PRECEDENCE"

typedef struct fs_http_server fs_http_server;
typedef struct fs_http_req fs_http_req;
typedef struct fs_http_resp fs_http_resp;

/**
 * Called when the request is complete (whole body received) or, for
 * on_begin, when the headers are in. Set the response with one of the
 * fs_http_resp_* / fs_http_problem functions.
 * @return 0 normally. A non-zero return with no response set yields a 500
 *         problem; with a response set, the response is sent as is.
 */
typedef int (*fs_http_handler_fn)(fs_http_req *req, fs_http_resp *resp, void *ctx);

/**
 * Streaming routes: one piece of the body, in order. `data` is borrowed for
 * the call only. Return 0 to continue; return non-zero (and preferably set a
 * problem response) to reject the request: no more pieces are delivered, the
 * handler is not called, and the response (or a 500 problem) is sent.
 */
typedef int (*fs_http_chunk_fn)(fs_http_req *req, const void *data, size_t len, fs_http_resp *resp,
                                void *ctx);

/** One route. Copied by fs_http_server_route; strings are copied too. */
struct fs_http_route {
    const char *method;          /* "GET", "POST", "PUT", "DELETE", "PATCH"; GET also serves HEAD */
    const char *pattern;         /* "/v1/jobs/{id}/result/{name}.npy": a {param} may have a
                                    literal prefix/suffix within its segment */
    uint64_t max_body;           /* body cap in bytes; 0 = no body allowed */
    const fs_auth *auth;         /* borrowed, must outlive the server; NULL = no auth */
    fs_http_handler_fn on_begin; /* optional: headers are in, body not read yet */
    fs_http_chunk_fn on_chunk;   /* non-NULL: streaming route, body not buffered */
    fs_http_handler_fn handler;  /* required: request complete */
    void *ctx;                   /* passed to the three callbacks; borrowed */
};

/** What the request log and the on_request hook see. No tokens, no bodies. */
struct fs_http_log_entry {
    const char *method;     /* "GET", ... or "OTHER" */
    const char *route;      /* the matched pattern, or "-" when none matched */
    unsigned status;        /* status sent; 0 if none was (client went away) */
    double ms;              /* from headers received to request completed */
    uint64_t bytes_in;      /* body bytes received (including discarded ones) */
    uint64_t bytes_out;     /* response body bytes (as queued) */
    int completed;          /* 1 when the response was sent completely */
    const fs_http_req *req; /* the request, to tell it from others (gone after the hook) */
};

struct fs_http_server_config {
    const char *host;           /* numeric IPv4/IPv6 address or name; NULL = "127.0.0.1"; copied */
    uint16_t port;              /* 0 = ephemeral; see fs_http_server_port */
    unsigned threads;           /* >0: thread pool of that size (epoll);
                                   0: one thread per connection (for long-polling) */
    unsigned max_connections;   /* total concurrent connections */
    unsigned max_per_ip;        /* concurrent connections per client IP; 0 = unlimited.
                                   Connections over it are closed at once. */
    unsigned timeout_s;         /* idle connection timeout: nothing received or sent */
    unsigned request_timeout_s; /* whole-request deadline (slow clients): a request's
                                   headers and body must have arrived within this many
                                   seconds of the connection being ready for it, plus
                                   body bytes / min_body_rate; else the connection is
                                   closed. 0 = none. */
    unsigned min_body_rate;     /* bytes per second a body is given (the declared
                                   Content-Length, or the bytes received so far for a
                                   chunked body, at most max_body + drain_max); 0 = the
                                   deadline does not grow with the body */
    size_t conn_memory_limit;   /* per-connection memory: request line + headers + read buffer */
    uint64_t drain_max;         /* body bytes discarded after a rejection before closing */
    int log_requests;           /* 1: one JSON log line per request (fs_log): at debug for
                                   a GET or HEAD answered below 400 (polls, downloads,
                                   probes), else at info */
    /* optional, e.g. metrics: called once per request when it completes, on
     * the server's threads (concurrently); e is valid for the call only */
    void (*on_request)(const struct fs_http_log_entry *e, void *hook_ctx);
    void *hook_ctx;
    const char *tls_cert_file; /* PEM; with tls_key_file enables HTTPS; NULL = plain HTTP */
    const char *tls_key_file;  /* PEM, unencrypted */
    unsigned park_check_ms;    /* how often parked long polls are asked ready() (and
                                  their waits checked) without fs_http_server_kick;
                                  0 = 5 ms */
};

/**
 * Defaults: 127.0.0.1:0, 4 threads, 256 connections, 0 per IP, 30 s idle
 * timeout, 300 s request deadline plus 1 s per 64 KiB of body, 64 KiB
 * connection memory, 1 MiB drain, request log on, no TLS, parked requests
 * checked every 5 ms.
 */
void fs_http_server_config_default(struct fs_http_server_config *cfg);

/**
 * Parse a --listen value "HOST:PORT", "[IPv6]:PORT" or ":PORT" (host "0.0.0.0").
 * @param host    buffer of hostcap bytes receiving the host (without brackets).
 * @return 0 or FS_EINVAL.
 */
FS_WUR int fs_http_parse_listen(const char *s, char *host, size_t hostcap, uint16_t *port,
                                struct fs_err *err);

/** New stopped server; cfg is copied. Free with fs_http_server_free. */
FS_WUR int fs_http_server_new(fs_http_server **out, const struct fs_http_server_config *cfg,
                              struct fs_err *err);

/**
 * Register a route (before fs_http_server_start). Patterns are matched
 * segment by segment; among matching patterns the one with literal segments
 * furthest to the left wins ("/v1/jobs/stats" beats "/v1/jobs/{id}").
 * @return 0, FS_EINVAL (bad pattern/method, missing handler, duplicate), FS_ESTATE
 *         (already started), FS_ENOMEM.
 */
FS_WUR int fs_http_server_route(fs_http_server *s, const struct fs_http_route *route,
                                struct fs_err *err);

/** Bind and start serving. @return 0, FS_EIO (bind failed, TLS files), FS_ESTATE. */
FS_WUR int fs_http_server_start(fs_http_server *s, struct fs_err *err);

/** The bound port (the ephemeral one when cfg.port was 0); 0 when not started. */
uint16_t fs_http_server_port(const fs_http_server *s);

/**
 * Connections currently open (for metrics). libmicrohttpd stops accepting at
 * cfg.max_connections: further clients wait in the kernel's listen backlog.
 */
unsigned fs_http_server_connections(const fs_http_server *s);

/**
 * Graceful stop: stop accepting connections, wait up to grace_ms for
 * requests in flight to complete, then close everything. Idempotent.
 */
void fs_http_server_stop(fs_http_server *s, unsigned grace_ms);

/** Stop (without grace) if running, then free. Accepts NULL. */
void fs_http_server_free(fs_http_server *s);

/* ---- request (all returned pointers are borrowed, valid until the request completes) ---- */

/** Method as received ("GET", "HEAD", ...). */
const char *fs_http_req_method(const fs_http_req *req);

/** The path as received, percent-encoded, without the query string. Do not log it. */
const char *fs_http_req_path(const fs_http_req *req);

/** The matched route pattern ("/v1/jobs/{id}"): safe to log. */
const char *fs_http_req_route(const fs_http_req *req);

/**
 * A {param} of the pattern, percent-decoded. Values are never empty and
 * never contain '/', NUL, or equal "." or ".." (such requests get 400).
 * @return the value, or NULL if the pattern has no such parameter.
 */
const char *fs_http_req_param(const fs_http_req *req, const char *name);

/**
 * A query parameter, percent-decoded ('+' is not treated as space). A key
 * without '=' has the value "". The first occurrence wins.
 * @return the value, or NULL when absent.
 */
const char *fs_http_req_query(const fs_http_req *req, const char *name);

/** A request header (case-insensitive name), or NULL. */
const char *fs_http_req_header(const fs_http_req *req, const char *name);

/**
 * 1 when the Content-Type's media type equals `media_type` (case-insensitive,
 * parameters such as "; charset=utf-8" ignored), else 0.
 */
int fs_http_req_content_type_is(const fs_http_req *req, const char *media_type);

/**
 * The declared Content-Length. @return 1 and sets *len when one was sent,
 * 0 when the body length is unknown (chunked) or there is no body.
 */
int fs_http_req_content_length(const fs_http_req *req, uint64_t *len);

/**
 * Buffered routes, in the handler: the whole body (NUL-terminated for
 * convenience; *len excludes the NUL). NULL with *len = 0 when empty or
 * on streaming routes.
 */
const char *fs_http_req_body(const fs_http_req *req, size_t *len);

/** Body bytes received so far (streaming routes: running total). */
uint64_t fs_http_req_bytes_received(const fs_http_req *req);

/**
 * Parse the buffered body as JSON (duplicate keys rejected).
 * @param out receives a new reference (free with json_decref).
 * @return 0, or FS_EFORMAT (empty, not JSON; message has line/column),
 *         FS_EINVAL (Content-Type is neither application/json nor a
 *         "+json" media type).
 */
FS_WUR int fs_http_req_json(const fs_http_req *req, json_t **out, struct fs_err *err);

/** Label of the token that passed route.auth ("" when the route has no auth). */
const char *fs_http_req_auth_label(const fs_http_req *req);

/**
 * Attach per-request state (e.g. a streaming upload's temp file). free_fn
 * (may be NULL) is called exactly once with `user` when the request is
 * finished, whatever the outcome (success, rejection, client gone).
 * Replacing state frees the previous one first.
 */
void fs_http_req_set_user(fs_http_req *req, void *user, void (*free_fn)(void *user));

/** The state set with fs_http_req_set_user, or NULL. */
void *fs_http_req_user(const fs_http_req *req);

/**
 * Long polling: from a handler, park the request instead of answering it.
 * The handler returns 0 without setting a response; the server suspends the
 * connection (no thread waits on it) and asks ready(ctx) every few
 * milliseconds on its own thread. When ready returns non-zero, wait_ms have
 * passed, or the server stops, the route's handler runs again for the same
 * request with fs_http_req_resumed() != 0, and answers. ready must be quick
 * and thread-safe, and ctx must outlive the server's stop.
 * @return 0, or -1 when the request cannot be parked (no connection, as in
 *         fs_http_server_probe; a thread-per-connection server; wait_ms 0;
 *         already resumed): the handler answers at once.
 */
int fs_http_req_park(fs_http_req *req, unsigned wait_ms, int (*ready)(void *ctx), void *ctx);

/**
 * Ask the parked requests' ready() now rather than at the next check (a
 * few milliseconds away): for the application to call when what they wait
 * for may have happened (a job's phase changed). It takes no lock and never
 * blocks, so it may be called with any of the application's locks held; a
 * kick that races with the check in progress may wait for the next one.
 * NULL is ignored.
 */
void fs_http_server_kick(fs_http_server *s);

/** The response to this request says "Connection: close", and the
 * connection closes once it is sent: the client's next request opens a new
 * one. libmicrohttpd clears a kept-alive connection's whole buffer
 * (conn_memory_limit) between requests, so every open connection that has
 * served a request holds that much resident memory; a client that writes and
 * then waits (a long poll) for a long time need not hold it meanwhile. */
void fs_http_req_close_after(fs_http_req *req);

/** 1 when the handler runs again after fs_http_req_park, else 0. */
int fs_http_req_resumed(const fs_http_req *req);

/* ---- response (setting a body again replaces the previous one) ---- */

/**
 * JSON response, "application/json". Steals `body` (also on failure).
 * @return 0 or FS_ENOMEM / FS_EINVAL (body NULL).
 */
FS_WUR int fs_http_resp_json(fs_http_resp *resp, unsigned status, json_t *body);

/** Bytes response; `data` (len bytes, may be NULL when len is 0) is copied. */
FS_WUR int fs_http_resp_bytes(fs_http_resp *resp, unsigned status, const char *content_type,
                              const void *data, size_t len);

/** Bytes response that takes ownership of `data` (malloc'd; freed with free, also on failure). */
FS_WUR int fs_http_resp_bytes_owned(fs_http_resp *resp, unsigned status, const char *content_type,
                                    void *data, size_t len);

/** Empty body (e.g. 204). */
FS_WUR int fs_http_resp_empty(fs_http_resp *resp, unsigned status);

/**
 * Send `size` bytes of an open file from its start. Takes ownership of fd
 * (closed when the response is done, also on failure). The file is read as
 * it is sent (sendfile), never loaded in memory.
 */
FS_WUR int fs_http_resp_fd(fs_http_resp *resp, unsigned status, const char *content_type, int fd,
                           uint64_t size);

/**
 * Open `path` and send it whole. A missing file gives FS_ENOTFOUND and sets
 * no response (the caller decides between 404 and 500).
 */
FS_WUR int fs_http_resp_file(fs_http_resp *resp, unsigned status, const char *content_type,
                             const char *path, struct fs_err *err);

/**
 * Add a header to the response already set (call after the body
 * function). Name and value are copied.
 * @return 0, FS_ESTATE (no response yet), FS_EINVAL (rejected by libmicrohttpd).
 */
FS_WUR int fs_http_resp_header(fs_http_resp *resp, const char *name, const char *value);

/**
 * RFC 9457 problem response, application/problem+json:
 * {type: FS_HTTP_PROBLEM_TYPE_PREFIX code, title, status, detail, code}.
 * @param code       stable machine code, e.g. "invalid_shape".
 * @param title      short summary; NULL = the HTTP reason phrase.
 * @param detail_fmt printf format for the detail (NULL = no detail). Say what
 *                   is wrong with the request; never echo secrets.
 * @return 0 or FS_ENOMEM (the framework then sends a bare 500).
 */
int fs_http_problem(fs_http_resp *resp, unsigned status, const char *code, const char *title,
                    const char *detail_fmt, ...) __attribute__((format(printf, 5, 6)));

/** 1 when a response has been set. */
int fs_http_resp_is_set(const fs_http_resp *resp);

/* ---- routing without a connection (tests, fuzzing) ---- */

/**
 * Route a request as the server does once its headers are in, without a
 * connection: `target` is the request target as received ("/path" or
 * "/path?query", percent-encoded). The path is split and decoded and a route
 * and method picked; the query is then split as libmicrohttpd splits it
 * ('&' between parameters, the first '=' between key and value) and decoded.
 * @param route receives the matched pattern (also on 405), else NULL; borrowed from s.
 * @param out   when non-NULL and the request would go on (return 0), receives the
 *              request: fs_http_req_param, fs_http_req_query, fs_http_req_path and
 *              fs_http_req_route work on it (not the header or body functions).
 *              Free with fs_http_req_probe_free.
 * @return 0 when the request would reach its route, else the status of the
 *         problem the server answers (400 bad path or query, 404, 405, 500).
 */
unsigned fs_http_server_probe(const fs_http_server *s, const char *method, const char *target,
                              const char **route, fs_http_req **out);

/** Free a request from fs_http_server_probe. Accepts NULL. */
void fs_http_req_probe_free(fs_http_req *req);

#endif
