/* What every service's /metrics reports about HTTP itself, in the Prometheus
 * text format: body bytes received and sent, and requests by method, route
 * and status. Counted from the server's request hook
 * (fs_http_server_config.on_request), so handlers count nothing themselves.
 *
 * The series are bounded: routes are the matched patterns, not paths, and
 * past max_series distinct (method, route, status) triples the rest go to one
 * series {method="OTHER",route="other",status="0"}. The text is built in an
 * fs_text, a growable buffer with a hard cap. */
#ifndef FS_NET_METRICS_H
#define FS_NET_METRICS_H

#include <stddef.h>

#include "http_server.h"

/* A string being built; after any failure (allocation, cap) it stays
 * failed and further appends do nothing. */
struct fs_text {
    char *p; /* NUL-terminated when not failed; owned */
    size_t n;
    size_t cap;
    size_t max; /* hard cap of n, terminator excluded */
    int failed;
};

/** Start an empty text of at most max bytes. Never fails (the first append allocates). */
void fs_text_init(struct fs_text *t, size_t max);

/** Append printf-style; on failure t is marked failed. */
void fs_text_printf(struct fs_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Free the buffer (the struct itself is the caller's). */
void fs_text_free(struct fs_text *t);

typedef struct fs_http_metrics fs_http_metrics;

/** New counters keeping up to max_series request series. @return NULL when out of memory. */
fs_http_metrics *fs_http_metrics_new(size_t max_series);

/** Free; accepts NULL. */
void fs_http_metrics_free(fs_http_metrics *m);

/** Count one finished request; m NULL: nothing. Thread-safe. */
void fs_http_metrics_record(fs_http_metrics *m, const struct fs_http_log_entry *e);

/**
 * Append fedsvd_http_connections (the connections open on srv now; left out
 * when srv is NULL), then fedsvd_bytes_received_total,
 * fedsvd_bytes_sent_total and fedsvd_http_requests_total (one consistent
 * snapshot), then the storage series (net/storage.h) to t. Thread-safe.
 */
void fs_http_metrics_write(fs_http_metrics *m, fs_http_server *srv, struct fs_text *t);

/**
 * Send t as the 200 text/plain (version 0.0.4) response, taking its buffer;
 * a failed t gets a 500 problem instead. t is empty afterwards.
 * @return as the fs_http_resp_* functions.
 */
int fs_http_metrics_respond(fs_http_resp *resp, struct fs_text *t);

#endif
