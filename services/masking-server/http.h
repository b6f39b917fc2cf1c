/* HTTP surface of the masking server (docs/wire-fedsvd.md): routes, admin
 * authentication, the parties' signed key requests (lib/crypto/reqsig.h),
 * end tokens, expiry, problem+json errors, /metrics. Handlers
 * decode, authenticate, call the store (store.h) and the key generator
 * (keygen.h); they do no mask arithmetic. */
#ifndef MASK_HTTP_H
#define MASK_HTTP_H

#include <stdatomic.h>

#include "config.h"
#include "keygen.h"
#include "net/auth.h"
#include "net/http_server.h"
#include "store.h"
#include "testseed.h"

struct mask_metrics;

struct mask_app {
    const struct mask_config *cfg;
    mask_store *st;
    mask_keygen *kg;
    fs_auth *admin; /* the admin token, label "admin" */
    fs_http_server *srv;
    char openapi_path[4200]; /* "" when none was found */
    char fallback_url[300];  /* base URL for keys_url without a Host header */
    int tls;
    atomic_int ready;
    struct mask_metrics *metrics;
    /* --insecure-test-mask-seed, decoded; test_seed_len 0 = none (master
     * seed from the OS CSPRNG). Wiped at exit. */
    uint8_t test_seed[MASK_TEST_SEED_MAX];
    size_t test_seed_len;
};

/** Allocate the metrics of app. @return 0 or FS_ENOMEM. */
FS_WUR int mask_http_init(struct mask_app *app, struct fs_err *err);

/** Free what mask_http_init allocated. */
void mask_http_free(struct mask_app *app);

/** Register every route on app->srv. */
FS_WUR int mask_http_routes(struct mask_app *app, struct fs_err *err);

/**
 * Delete every active mask set whose ttl_s has run out (row, generated keys,
 * seed file), a batch at a time; failures are logged. Called periodically.
 */
void mask_http_expire_due(struct mask_app *app);

/** The server's on_request hook (hook_ctx = app): counts requests and bytes. */
void mask_http_on_request(const struct fs_http_log_entry *e, void *hook_ctx);

#endif
