/* client-agent: startup and shutdown (config.c: the configuration). See agent.h for the
 * modules and the data directory, docs/wire-secure-sum.md for the API. */
#include "agent.h"
#include "net/svc.h"
#include "teststop.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SHUTDOWN_WAIT_S 30

/* Tell every worker to stop and wait (bounded) for them to persist and end. */
static void stop_workers(struct ca_agent *ag)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += SHUTDOWN_WAIT_S;
    pthread_mutex_lock(&ag->mu);
    for (struct ca_part *p = ag->parts; p != NULL; p = p->next) {
        atomic_store(&p->stop, 1);
    }
    pthread_cond_broadcast(&ag->cv);
    while (ag->nrunning > 0) {
        if (pthread_cond_timedwait(&ag->cv, &ag->mu, &ts) == ETIMEDOUT) {
            break;
        }
    }
    if (ag->nrunning > 0) {
        fs_log_pack(FS_LOG_WARN, "workers still busy at exit", "{s:i}", "running",
                    (int)ag->nrunning);
    }
    pthread_mutex_unlock(&ag->mu);
}

/* At startup: an older version kept a running participation's party token
 * in a file; the token now lives sealed in agent.db, so remove any left. */
static void remove_stale_tokens(const char *data_dir)
{
    char dir[CA_PATH_MAX];
    char path[CA_PATH_MAX + 300];
    struct dirent *e;
    DIR *d;

    snprintf(dir, sizeof dir, "%s/participations", data_dir);
    d = opendir(dir);
    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "p-", 2) != 0) {
            continue;
        }
        if (snprintf(path, sizeof path, "%s/%s/token", dir, e->d_name) < (int)sizeof path) {
            unlink(path);
        }
    }
    closedir(d);
}

static int fail(const char *what, const struct fs_err *err)
{
    fs_log_pack(FS_LOG_ERROR, what, "{s:s}", "error", err->msg);
    return 1;
}

/* The data directory, agent.db with the privacy ledger, the operator token.
 * @return 0, or 1 (logged). */
static int open_state(struct ca_agent *ag)
{
    struct fs_err err = {0};
    char path[CA_PATH_MAX];
    unsigned running = 0;

    if (fs_svc_private_dir(ag->cfg.data_dir, &err) != 0) {
        return fail("cannot create the data directory", &err);
    }
    snprintf(path, sizeof path, "%s/participations", ag->cfg.data_dir);
    if (fs_mkdir_p(path, &err) != 0 || ca_files_identity_ensure(ag->cfg.data_dir, &err) != 0 ||
        ca_files_agent_key_ensure(ag->cfg.data_dir, &err) != 0) {
        return fail("cannot set up the data directory", &err);
    }
    if (snprintf(path, sizeof path, "%s/agent.db", ag->cfg.data_dir) >= (int)sizeof path ||
        ca_store_open(path, &ag->db, &running, &err) != 0) {
        return fail("cannot open agent.db", &err);
    }
    remove_stale_tokens(ag->cfg.data_dir);
    /* a testing aid, off unless set; before any participation resumes */
    if (ca_teststop_arm(ag->cfg.data_dir, &err) != 0) {
        return fail("cannot start", &err);
    }
    if (ca_ledger_init(ag->db, &err) != 0) {
        return fail("cannot open the privacy ledger", &err);
    }
    if (ag->cfg.budget.set) {
        fs_log_pack(FS_LOG_INFO, "privacy budget per dataset", "{s:f, s:f, s:f}", "rho",
                    ag->cfg.budget.rho, "epsilon", ag->cfg.budget.eps, "delta",
                    ag->cfg.budget.delta);
    }
    if (running > 0) {
        fs_log_pack(FS_LOG_INFO, "resuming participations interrupted by a restart", "{s:i}",
                    "count", (int)running);
    }
    if (fs_auth_new(&ag->auth, &err) != 0 ||
        fs_auth_add_file(ag->auth, ag->cfg.operator_token_file, "operator", &err) != 0) {
        return fail("cannot load the operator token", &err);
    }
    return 0;
}

/* The operator API listening, the port file written. @return 0, or 1 (logged). */
static int serve(struct ca_agent *ag)
{
    struct fs_http_server_config hcfg;
    struct fs_err err = {0};
    int tls = ag->cfg.tls_cert[0] != '\0';

    fs_http_server_config_default(&hcfg);
    hcfg.host = ag->cfg.host;
    hcfg.port = ag->cfg.port;
    hcfg.on_request = ca_api_on_request;
    hcfg.hook_ctx = ag;
    hcfg.tls_cert_file = tls ? ag->cfg.tls_cert : NULL;
    hcfg.tls_key_file = tls ? ag->cfg.tls_key : NULL;
    hcfg.max_per_ip = ag->cfg.max_per_ip;
    hcfg.request_timeout_s = ag->cfg.request_timeout_s;
    if (fs_http_server_new(&ag->http, &hcfg, &err) != 0 || ca_api_routes(ag, &err) != 0 ||
        fs_http_server_start(ag->http, &err) != 0) {
        return fail("cannot start the HTTP server", &err);
    }
    if (ag->cfg.port_file[0] != '\0' &&
        fs_svc_write_port_file(ag->cfg.port_file, fs_http_server_port(ag->http), &err) != 0) {
        return fail("cannot write the port file", &err);
    }
    fs_log_pack(FS_LOG_INFO, "client-agent listening", "{s:s, s:i, s:s, s:b, s:I, s:i}", "host",
                ag->cfg.host, "port", (int)fs_http_server_port(ag->http), "data_dir",
                ag->cfg.data_dir, "tls", tls, "max_elements", (json_int_t)ag->cfg.max_elements,
                "max_participations", (int)ag->cfg.max_running);
    if (ag->cfg.insecure) {
        fs_log(FS_LOG_WARN, "TLS verification towards servers is off (--insecure)", NULL);
    }
    if (ag->cfg.insecure_http) {
        fs_log(FS_LOG_WARN,
               "plain http:// server URLs to hosts that are not loopback are allowed "
               "(--insecure-http)",
               NULL);
    }
    return 0;
}

/* The configuration: exit status 0 (--help), 2 (a usage error), or -1 to run. */
static int configure(struct ca_agent *ag, int argc, char **argv)
{
    struct fs_err err = {0};

    if (ca_config_parse(argc, argv, &ag->cfg, &err) != 0) {
        fprintf(stderr, "client-agent: %s (see client-agent --help)\n", err.msg);
        return 2;
    }
    if (ag->cfg.help) {
        ca_config_usage(stdout);
        return 0;
    }
    fs_log_set_level(ag->cfg.log_level);
    if (fs_svc_check_listen(ag->cfg.host, ag->cfg.tls_cert[0] != '\0', ag->cfg.insecure_http,
                            &err) != 0) {
        fprintf(stderr, "client-agent: %s\n", err.msg);
        return 2;
    }
    if (ag->cfg.openapi[0] == '\0') {
        (void)fs_svc_find_openapi(NULL, ag->cfg.openapi, sizeof ag->cfg.openapi);
    }
    return -1;
}

int main(int argc, char **argv)
{
    struct ca_agent *ag;
    pthread_condattr_t ca;
    sigset_t sigs;
    int rc;

    umask(077);
    if (fs_svc_version_flag("client-agent", argc, argv)) {
        return 0;
    }
    ag = calloc(1, sizeof *ag);
    if (ag == NULL) {
        fputs("client-agent: out of memory\n", stderr);
        return 1;
    }
    rc = configure(ag, argc, argv);
    if (rc >= 0) {
        free(ag);
        return rc;
    }
    pthread_mutex_init(&ag->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ag->cv, &ca);
    pthread_condattr_destroy(&ca);

    /* Signals go to the main thread's sigwait only; threads inherit the mask. */
    fs_svc_block_signals(&sigs);
    rc = open_state(ag);
    if (rc == 0) {
        rc = serve(ag);
    }
    if (rc == 0) {
        ca_resume_all(ag);
        (void)fs_svc_wait_signal(&sigs);
    }
    atomic_store(&ag->stopping, 1);
    ca_teststop_release(); /* a worker held at the stop point goes on, to stop */
    if (ag->http != NULL) {
        fs_http_server_stop(ag->http, 5000);
    }
    stop_workers(ag);
    fs_http_server_free(ag->http);
    if (ag->nrunning == 0) {
        fs_db_close(ag->db);
    }
    fs_auth_free(ag->auth);
    if (ag->nrunning == 0) {
        pthread_cond_destroy(&ag->cv);
        pthread_mutex_destroy(&ag->mu);
        free(ag);
    }
    if (rc == 0) {
        fs_log(FS_LOG_INFO, "stopped", NULL);
    }
    return rc;
}
