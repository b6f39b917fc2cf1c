/* HTTP surface of the masking server (docs/wire-fedsvd.md): routes, admin
 * authentication, the parties' signed key requests (lib/crypto/reqsig.h),
 * end tokens, expiry, problem+json errors, /metrics. Handlers
 * decode, authenticate, call the store (store.h) and the key generator
 * (keygen.h); they do no mask arithmetic. */
#ifndef MSK_HTTP_H
#define MSK_HTTP_H

#include <stdatomic.h>

#include "config.h"
#include "keygen.h"
#include "net/auth.h"
#include "net/http_server.h"
#include "store.h"

struct msk_metrics;

struct msk_app {
    const struct msk_config *cfg;
    msk_store *st;
    msk_keygen *kg;
    fs_auth *admin; /* the admin token, label "admin" */
    fs_http_server *srv;
    char openapi_path[4200]; /* "" when none was found */
    char fallback_url[300];  /* base URL for keys_url without a Host header */
    int tls;
    atomic_int ready;
    struct msk_metrics *metrics;
};

/** Allocate the metrics of app. @return 0 or FS_ENOMEM. */
FS_WUR int msk_http_init(struct msk_app *app, struct fs_err *err);

/** Free what msk_http_init allocated. */
void msk_http_free(struct msk_app *app);

/** Register every route on app->srv. */
FS_WUR int msk_http_routes(struct msk_app *app, struct fs_err *err);

/**
 * Delete every active mask set whose ttl_s has run out (row, generated keys,
 * seed file), a batch at a time; failures are logged. Called periodically.
 */
void msk_http_expire_due(struct msk_app *app);

/** The server's on_request hook (hook_ctx = app): counts requests and bytes. */
void msk_http_on_request(const struct fs_http_log_entry *e, void *hook_ctx);

#endif
