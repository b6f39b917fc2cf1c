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
    fs_auth *peer;              /* the peer token (label "peer"); NULL: none configured */
    struct agg_shards *shards;  /* the windows held as a shard (shardwin.h) */
};

/** Allocate the metrics of app. @return 0 or FS_ENOMEM. */
FS_WUR int agg_http_init(struct agg_app *app, struct fs_err *err);

/** Free what agg_http_init allocated. */
void agg_http_free(struct agg_app *app);

/** Register every route on app->srv. */
FS_WUR int agg_http_routes(struct agg_app *app, struct fs_err *err);

/** The app of a route's ctx (the handlers of other files): every route's
 * ctx starts with a pointer to its app. */
static inline struct agg_app *agg_http_app(void *ctx)
{
    return *(struct agg_app **)ctx;
}

/* The /v1/shards routes' handlers (shardhttp.c; the peer token is checked). */
int agg_shard_h_put(fs_http_req *req, fs_http_resp *resp, void *ctx);
int agg_shard_h_get(fs_http_req *req, fs_http_resp *resp, void *ctx);
int agg_shard_h_delete(fs_http_req *req, fs_http_resp *resp, void *ctx);
int agg_shard_h_finish(fs_http_req *req, fs_http_resp *resp, void *ctx);
int agg_shard_h_r(fs_http_req *req, fs_http_resp *resp, void *ctx);
/* GET /v1/shard-deletions (admin; shardhttp.c): the coordinator's pending and
 * abandoned deletions of its peers' windows. */
int agg_shard_h_deletions(fs_http_req *req, fs_http_resp *resp, void *ctx);

/** The server's on_request hook (hook_ctx = app): counts requests and bytes. */
void agg_http_on_request(const struct fs_http_log_entry *e, void *hook_ctx);

#endif
