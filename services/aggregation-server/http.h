/* HTTP surface of the aggregation server (docs/wire-secure-sum.md): routes,
 * authentication of admin and party tokens, problem+json errors, streamed
 * chunk uploads, /metrics. Handlers only decode, authenticate and call the
 * job manager (jobmgr.h). */
#ifndef AGGSRV_HTTP_H
#define AGGSRV_HTTP_H

#include <stdatomic.h>

#include "config.h"
#include "jobmgr.h"
#include "net/auth.h"
#include "net/http_server.h"
#include "net/metrics.h"
#include "store.h"

struct agg_app {
    const struct agg_config *cfg;
    agg_mgr *mgr;
    agg_store *st;
    fs_auth *admin; /* the admin token, label "admin" */
    fs_http_server *srv;
    char openapi_path[4200]; /* "" when none was found */
    char fallback_url[300];  /* base URL for invitations without a Host header */
    int tls;
    atomic_int ready;
    _Atomic uint64_t chunk_mem; /* bytes of chunk bodies being received (--upload-buffer) */
    fs_http_metrics *metrics;   /* request counters of /metrics */
};

/** Allocate the metrics of app. @return 0 or FS_ENOMEM. */
FS_WUR int agg_http_init(struct agg_app *app, struct fs_err *err);

/** Free what agg_http_init allocated. */
void agg_http_free(struct agg_app *app);

/** Register every route on app->srv. */
FS_WUR int agg_http_routes(struct agg_app *app, struct fs_err *err);

/** The server's on_request hook (hook_ctx = app): counts requests and bytes. */
void agg_http_on_request(const struct fs_http_log_entry *e, void *hook_ctx);

#endif
