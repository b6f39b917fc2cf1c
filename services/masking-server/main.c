/* masking-server: creates the secret masks of FedSVD jobs and hands each
 * party only its own keys (docs/wire-fedsvd.md).
 *
 * Threads: one HTTP thread per connection (libmicrohttpd
 * THREAD_PER_CONNECTION), because the first request for a party's keys
 * generates its slab in the request and that can take seconds: in a shared
 * pool it would hold up every other connection of its thread. Later requests
 * (the party's .npy files) are served from the key cache (keygen.h).
 * --max-connections bounds the threads, --keygen-concurrency the generations
 * running at once; one more thread sweeps the key cache and one deletes mask
 * sets whose ttl_s ran out (every EXPIRE_EVERY_S seconds). The main
 * thread waits for SIGTERM/SIGINT, then stops accepting, lets requests in
 * flight finish (--shutdown-grace-ms; waiting downloads get 503) and exits 0.
 * Everything is in SQLite and the seed files before a 201 is sent, so a
 * killed server loses nothing. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "config.h"
#include "core/bgthread.h"
#include "http.h"
#include "keygen.h"
#include "net/auth.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/log.h"
#include "net/svc.h"
#include "store.h"
#include "teststop.h"

#define EXPIRE_EVERY_S 5

/* The expiry thread: deletes expired mask sets until told to stop. */
struct expirer {
    struct mask_app *app;
    struct fs_bgthread bt;
};

static void *expire_loop(void *arg)
{
    struct expirer *e = arg;

    do {
        mask_http_expire_due(e->app);
    } while (!fs_bgthread_wait(&e->bt, EXPIRE_EVERY_S * 1000));
    return NULL;
}

/* Everything before serving: the key generator, the admin token, the data
 * directory and its store, the HTTP server listening, the port file.
 * @return 0, or -1 (logged; what is set up is freed by the caller). */
static int start(struct mask_app *app, struct mask_config *cfg, const char *host, uint16_t port)
{
    struct fs_http_server_config hcfg;
    struct mask_keygen_opts kopts;
    struct fs_err err = {0};
    size_t swept = 0;

    kopts.concurrency = cfg->keygen_concurrency;
    kopts.cache_bytes = cfg->keys_cache_bytes;
    kopts.ttl_s = cfg->keys_cache_ttl_s;
    if (mask_http_init(app, &err) != 0 || fs_auth_new(&app->admin, &err) != 0 ||
        fs_auth_add_file(app->admin, cfg->admin_token_file, "admin", &err) != 0 ||
        mask_keygen_new(&kopts, &app->kg, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot start", "{s:s}", "error", err.msg);
        return -1;
    }
    /* The data directory holds the seeds: never shared with group or others. */
    if (fs_svc_private_dir(cfg->data_dir, &err) != 0 ||
        mask_store_open(cfg->data_dir, cfg->fsync, &app->st, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot open the data directory", "{s:s}", "error", err.msg);
        return -1;
    }
    if (mask_store_sweep_seeds(app->st, &swept, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot clean up seed files", "{s:s}", "error", err.msg);
        return -1;
    }
    if (swept > 0) {
        fs_log_pack(FS_LOG_WARN, "destroyed seed files without an active mask set", "{s:I}",
                    "count", (json_int_t)swept);
    }
    /* a testing aid, off unless set */
    if (mask_teststop_arm(cfg->data_dir, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot start", "{s:s}", "error", err.msg);
        return -1;
    }
    (void)fs_svc_find_openapi(cfg->openapi, app->openapi_path, sizeof app->openapi_path);
    if (app->openapi_path[0] == '\0') {
        fs_log(FS_LOG_WARN, "no openapi.yaml found; /openapi.yaml answers 404", NULL);
    }

    fs_http_server_config_default(&hcfg);
    hcfg.host = host;
    hcfg.port = port;
    hcfg.threads = 0; /* one thread per connection: see the comment at the top */
    hcfg.max_connections = cfg->max_connections;
    hcfg.max_per_ip = cfg->max_per_ip;
    hcfg.request_timeout_s = cfg->request_timeout_s;
    hcfg.timeout_s = cfg->idle_timeout_s;
    hcfg.log_requests = 1;
    hcfg.on_request = mask_http_on_request;
    hcfg.hook_ctx = app;
    hcfg.tls_cert_file = app->tls ? cfg->tls_cert : NULL;
    hcfg.tls_key_file = app->tls ? cfg->tls_key : NULL;
    if (fs_http_server_new(&app->srv, &hcfg, &err) != 0 || mask_http_routes(app, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot set up HTTP", "{s:s}", "error", err.msg);
        return -1;
    }
    if (fs_http_server_start(app->srv, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot listen", "{s:s, s:s}", "listen", cfg->listen, "error",
                    err.msg);
        return -1;
    }
    fs_svc_base_url(app->fallback_url, sizeof app->fallback_url, app->tls, host,
                    fs_http_server_port(app->srv));
    if (cfg->port_file[0] != '\0' &&
        fs_svc_write_port_file(cfg->port_file, fs_http_server_port(app->srv), &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot write the port file", "{s:s}", "error", err.msg);
        return -1;
    }
    return 0;
}

/* --insecure-test-mask-seed: decoded into app (the hex copy wiped), only on
 * a loopback --listen. @return 0, or 2 (a usage error, printed). */
static int test_seed_config(struct mask_config *cfg, const char *host, struct mask_app *app)
{
    struct fs_err err = {0};
    int rc;

    if (cfg->insecure_test_mask_seed[0] == '\0') {
        return 0;
    }
    if (!fs_http_host_is_loopback(host)) {
        fprintf(stderr,
                "masking-server: --insecure-test-mask-seed is refused on a --listen address "
                "that is not loopback (%s): deterministic masks are for tests on one machine "
                "only\n",
                host[0] != '\0' ? host : "all interfaces");
        rc = 2;
    } else if (mask_test_seed_parse(cfg->insecure_test_mask_seed, app->test_seed,
                                    &app->test_seed_len, &err) != 0) {
        fprintf(stderr, "masking-server: --insecure-test-mask-seed: %s\n", err.msg);
        rc = 2;
    } else {
        rc = 0;
    }
    OPENSSL_cleanse(cfg->insecure_test_mask_seed, sizeof cfg->insecure_test_mask_seed);
    return rc;
}

/* The configuration: exit status 0 (--help, --version), 2 (a usage error), or -1 to run. */
static int configure(int argc, char **argv, struct mask_config *cfg, char *host, size_t cap,
                     uint16_t *port)
{
    struct fs_err err = {0};

    if (fs_svc_version_flag("masking-server", argc, argv)) {
        return 0;
    }
    if (mask_config_parse(argc, argv, cfg, &err) != 0) {
        fprintf(stderr, "masking-server: %s\n", err.msg);
        return 2;
    }
    if (cfg->help) {
        mask_config_usage(stdout);
        return 0;
    }
    fs_log_set_level(cfg->log_level);
    if (fs_http_parse_listen(cfg->listen, host, cap, port, &err) != 0) {
        fprintf(stderr, "masking-server: --listen: %s\n", err.msg);
        return 2;
    }
    if (fs_svc_check_listen(host, cfg->tls_cert[0] != '\0', cfg->insecure_http, &err) != 0) {
        fprintf(stderr, "masking-server: %s\n", err.msg);
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    struct mask_config cfg;
    struct mask_app app;
    char host[256];
    uint16_t port = 0;
    sigset_t sigs;
    struct expirer exp;
    int status;

    memset(&app, 0, sizeof app);
    memset(&exp, 0, sizeof exp);
    status = configure(argc, argv, &cfg, host, sizeof host, &port);
    if (status < 0) {
        status = test_seed_config(&cfg, host, &app) != 0 ? 2 : -1;
    }
    if (status >= 0) {
        return status;
    }
    status = 1;
    exp.app = &app;
    fs_bgthread_init(&exp.bt);
    /* Every file this process creates (database, WAL, seeds) is private. */
    umask(077);
    /* Signals go to the main thread only: block them before any thread starts. */
    fs_svc_block_signals(&sigs);

    app.cfg = &cfg;
    app.tls = cfg.tls_cert[0] != '\0';
    atomic_store(&app.ready, 0);
    if (start(&app, &cfg, host, port) != 0) {
        goto out;
    }
    if (fs_bgthread_start(&exp.bt, expire_loop, &exp, NULL) != 0) {
        fs_log(FS_LOG_ERROR, "cannot start the expiry thread", NULL);
        goto out;
    }
    atomic_store(&app.ready, 1);
    if (app.test_seed_len > 0) {
        fs_log(FS_LOG_WARN,
               "INSECURE: --insecure-test-mask-seed is set: every new mask set's master seed is "
               "derived from it, so its masks are predictable and shared by every mask set of "
               "the same shape. For reproducibility tests only; never in production",
               NULL);
    }
    fs_log_pack(FS_LOG_INFO, "listening", "{s:s, s:i, s:s, s:b, s:b}", "host", host, "port",
                (int)fs_http_server_port(app.srv), "data_dir", cfg.data_dir, "tls", app.tls,
                "deterministic_masks", app.test_seed_len > 0);

    (void)fs_svc_wait_signal(&sigs);
    atomic_store(&app.ready, 0);
    mask_teststop_release();   /* requests held at the stop point go on, to stop */
    mask_keygen_close(app.kg); /* downloads still waiting for a slot get 503 */
    fs_http_server_stop(app.srv, cfg.shutdown_grace_ms);
    status = 0;
out:
    mask_teststop_release();
    fs_bgthread_stop(&exp.bt);
    mask_keygen_close(app.kg);
    fs_http_server_free(app.srv);
    mask_keygen_free(app.kg);
    mask_store_close(app.st);
    fs_auth_free(app.admin);
    mask_http_free(&app);
    OPENSSL_cleanse(app.test_seed, sizeof app.test_seed);
    if (status == 0) {
        fs_log(FS_LOG_INFO, "stopped", NULL);
    }
    return status;
}
