/* aggregation-server: coordinates fedsvd jobs (openapi.yaml, docs/wire-*.md).
 *
 * Threads: the HTTP server's pool runs the handlers; one driver thread
 * closes rounds (every party in, or the deadline passed); one worker per
 * job runs unmasking when its last round closes. The main thread waits for
 * SIGTERM/SIGINT, then stops accepting, lets requests in flight finish
 * (--shutdown-grace-ms), stops the driver, waits for unmasking workers and
 * exits 0. Everything accepted is already in SQLite, so a killed server
 * resumes its jobs on the next start. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h> /* mallopt */
#endif

#include "config.h"
#include "crypto/paillier.h"
#include "http.h"
#include "jobmgr.h"
#include "maskend.h"
#include "net/auth.h"
#include "net/http_server.h"
#include "net/log.h"
#include "net/svc.h"
#include "powerjob.h"
#include "shardwin.h"
#include "store.h"
#include "teststop.h"

static atomic_int g_stop_driver;

static void *driver_main(void *arg)
{
    agg_mgr *m = arg;

    while (!atomic_load(&g_stop_driver)) {
        agg_mgr_tick(m);
        agg_mgr_wait(m, 50);
    }
    return NULL;
}

/* Options, --version and --help: -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, struct agg_config *cfg, char *host, size_t cap,
                         uint16_t *port)
{
    struct fs_err err = {0};

    if (fs_svc_version_flag("aggregation-server", argc, argv)) {
        return 0;
    }
    if (agg_config_parse(argc, argv, cfg, &err) != 0) {
        fprintf(stderr, "aggregation-server: %s\n", err.msg);
        return 2;
    }
    if (cfg->help) {
        agg_config_usage(stdout);
        return 0;
    }
    fs_log_set_level(cfg->log_level);
    if (fs_http_parse_listen(cfg->listen, host, cap, port, &err) != 0) {
        fprintf(stderr, "aggregation-server: --listen: %s\n", err.msg);
        return 2;
    }
    if (fs_svc_check_listen(host, cfg->tls_cert[0] != '\0', cfg->insecure_http, &err) != 0) {
        fprintf(stderr, "aggregation-server: %s\n", err.msg);
        return 2;
    }
    return -1;
}

/* The admin token, the store and the job manager. */
static int open_state(struct agg_app *app, const struct agg_config *cfg, struct fs_err *err)
{
    struct agg_mgr_config mcfg;

    if (agg_http_init(app, err) != 0 || fs_auth_new(&app->admin, err) != 0 ||
        fs_auth_add_file(app->admin, cfg->admin_token_file, "admin", err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot start", "{s:s}", "error", err->msg);
        return -1;
    }
    if (fs_svc_private_dir(cfg->data_dir, err) != 0 ||
        agg_store_open(cfg->data_dir, cfg->fsync, &app->st, err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot open the data directory", "{s:s}", "error", err->msg);
        return -1;
    }
    memset(&mcfg, 0, sizeof mcfg);
    mcfg.data_dir = cfg->data_dir;
    mcfg.max_elements = cfg->max_elements;
    mcfg.max_jobs = cfg->max_jobs;
    mcfg.chunk_words = cfg->chunk_words;
    mcfg.fsync = cfg->fsync;
    for (uint32_t i = 0; i < cfg->npeers && i < 16; i++) {
        mcfg.peers[i] = cfg->shard_peers[i];
    }
    mcfg.npeers = cfg->npeers;
    mcfg.peer_token_file = cfg->peer_token_file;
    mcfg.peer_ca_file = cfg->masking_ca_file;
    mcfg.insecure_http = cfg->insecure_http;
    mcfg.shard_deletion_max_age_s = cfg->shard_deletion_max_age_s;
    if (agg_mgr_new(&mcfg, app->st, &app->mgr, err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot start", "{s:s}", "error", err->msg);
        return -1;
    }
    agg_mgr_set_power_ops(app->mgr, &agg_power_ops);
    if (agg_shards_new(cfg->data_dir, cfg->fsync, cfg->shard_window_ttl_s, &app->shards, err) !=
        0) {
        fs_log_pack(FS_LOG_ERROR, "cannot start", "{s:s}", "error", err->msg);
        return -1;
    }
    if (cfg->peer_token_file[0] != '\0' &&
        (fs_auth_new(&app->peer, err) != 0 ||
         fs_auth_add_file(app->peer, cfg->peer_token_file, "peer", err) != 0)) {
        fs_log_pack(FS_LOG_ERROR, "cannot read the peer token", "{s:s}", "error", err->msg);
        return -1;
    }
    (void)fs_svc_find_openapi(cfg->openapi, app->openapi_path, sizeof app->openapi_path);
    if (app->openapi_path[0] == '\0') {
        fs_log(FS_LOG_WARN, "no openapi.yaml found; /openapi.yaml answers 404", NULL);
    }
    return 0;
}

/* (agg_mgr_set_on_change) a job changed: its parked long polls answer now */
static void kick_long_polls(void *srv)
{
    fs_http_server_kick(srv);
}

/* The HTTP server (not yet listening) and its routes. */
static int setup_http(struct agg_app *app, const struct agg_config *cfg, const char *host,
                      uint16_t port, struct fs_err *err)
{
    struct fs_http_server_config hcfg;

    fs_http_server_config_default(&hcfg);
    hcfg.host = host;
    hcfg.port = port;
    hcfg.threads = cfg->threads;
    hcfg.max_connections = cfg->max_connections;
    hcfg.max_per_ip = cfg->max_per_ip;
    hcfg.request_timeout_s = cfg->request_timeout_s;
    /* Per connection, held while it stays open (agents keep theirs): 64 KiB
     * holds the request line, the headers and upload pieces of ~60 KiB that
     * stream into the sum. 256 KiB cost 11 MB more at 50 parties (a third of
     * a 32 MB sum) for ~3% less server CPU per uploaded byte; 32 KiB saves
     * 2 MB more at 50 parties but costs ~20% more CPU per byte. */
    hcfg.conn_memory_limit = 64 * 1024;
    hcfg.log_requests = 1;
    hcfg.on_request = agg_http_on_request;
    hcfg.hook_ctx = app;
    hcfg.tls_cert_file = app->tls ? cfg->tls_cert : NULL;
    hcfg.tls_key_file = app->tls ? cfg->tls_key : NULL;
    if (fs_http_server_new(&app->srv, &hcfg, err) != 0 || agg_http_routes(app, err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot set up HTTP", "{s:s}", "error", err->msg);
        return -1;
    }
    agg_mgr_set_on_change(app->mgr, kick_long_polls, app->srv);
    return 0;
}

int main(int argc, char **argv)
{
    agg_maskend *maskend = NULL;
    struct agg_config cfg;
    struct agg_app app;
    struct fs_err err = {0};
    char host[256];
    uint16_t port = 0;
    sigset_t sigs;
    pthread_t driver;
    int have_driver = 0;
    int status = parse_options(argc, argv, &cfg, host, sizeof host, &port);

    if (status >= 0) {
        return status;
    }
    status = 1;
    memset(&app, 0, sizeof app);
    /* Every file this process creates (database, chunks, results) is private. */
    umask(077);
    /* fedpower-utility's noise exchange keeps a Paillier private key here:
     * GMP wipes every heap block it frees, installed before any thread runs. */
    fs_paillier_gmp_wipe_on_free();
#ifdef __GLIBC__
    /* Two malloc arenas rather than one per thread (8 HTTP threads, the
     * workers): each arena keeps the memory its thread freed, which
     * added some 1.5 MB to the peak at 50 parties. Set before any thread. */
    (void)mallopt(M_ARENA_MAX, 2);
#endif
    /* Signals go to the main thread only: block them before any thread starts. */
    fs_svc_block_signals(&sigs);

    app.cfg = &cfg;
    app.tls = cfg.tls_cert[0] != '\0';
    atomic_store(&app.ready, 0);
    if (open_state(&app, &cfg, &err) != 0 || setup_http(&app, &cfg, host, port, &err) != 0) {
        goto out;
    }
    /* A testing aid, off unless set; before the load, whose workers (a
     * resumed job's) may reach the stop point at once. */
    if (agg_teststop_arm(cfg.data_dir, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot start", "{s:s}", "error", err.msg);
        goto out;
    }
    /* Load (and replay) before serving: nothing may race the rebuild. */
    if (agg_mgr_load(app.mgr, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot load jobs", "{s:s}", "error", err.msg);
        goto out;
    }
    if (fs_http_server_start(app.srv, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot listen", "{s:s, s:s}", "listen", cfg.listen, "error",
                    err.msg);
        goto out;
    }
    fs_svc_base_url(app.fallback_url, sizeof app.fallback_url, app.tls, host,
                    fs_http_server_port(app.srv));
    if (pthread_create(&driver, NULL, driver_main, app.mgr) != 0) {
        fs_log(FS_LOG_ERROR, "cannot start the round driver", NULL);
        goto out;
    }
    have_driver = 1;
    if (agg_maskend_start(app.st, cfg.masking_ca_file, cfg.insecure_http, &maskend, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot start", "{s:s}", "error", err.msg);
        goto out;
    }
    if (cfg.port_file[0] != '\0' &&
        fs_svc_write_port_file(cfg.port_file, fs_http_server_port(app.srv), &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot write the port file", "{s:s}", "error", err.msg);
        goto out;
    }
    atomic_store(&app.ready, 1);
    fs_log_pack(FS_LOG_INFO, "listening", "{s:s, s:i, s:s, s:b}", "host", host, "port",
                (int)fs_http_server_port(app.srv), "data_dir", cfg.data_dir, "tls", app.tls);

    (void)fs_svc_wait_signal(&sigs);
    atomic_store(&app.ready, 0);
    agg_teststop_release(); /* before the requests waiting on a held job are drained */
    fs_http_server_stop(app.srv, cfg.shutdown_grace_ms);
    status = 0;
out:
    agg_teststop_release(); /* a thread held at the stop point goes on, to stop */
    agg_maskend_stop(maskend);
    if (have_driver) {
        atomic_store(&g_stop_driver, 1);
        pthread_join(driver, NULL);
    }
    if (app.mgr != NULL) {
        agg_mgr_set_on_change(app.mgr, NULL, NULL); /* before the server goes */
    }
    fs_http_server_free(app.srv);
    agg_mgr_free(app.mgr); /* waits for unmasking workers */
    agg_shards_free(app.shards);
    fs_auth_free(app.peer);
    agg_store_close(app.st);
    fs_auth_free(app.admin);
    agg_http_free(&app);
    if (status == 0) {
        fs_log(FS_LOG_INFO, "stopped", NULL);
    }
    return status;
}
