/* client-agent: configuration, startup and shutdown. See agent.h for the
 * modules and the data directory, docs/wire-secure-sum.md for the API. */
#include "agent.h"
#include "net/svc.h"

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

#define DEFAULT_LISTEN       "127.0.0.1:8444"
#define DEFAULT_MAX_ELEMENTS ((uint64_t)1 << 27) /* 1 GiB of doubles */
#define SHUTDOWN_WAIT_S      30

static const char USAGE[] =
    "Usage: client-agent --data-dir DIR --operator-token-file FILE [OPTIONS]\n"
    "\n"
    "Runs next to a data holder's matrix file: joins federated jobs with an invitation,\n"
    "validates the data first, drives the client side of the protocol as an HTTP client\n"
    "(servers never connect to it), and serves the party's results to its operator.\n"
    "\n"
    "Options (flag, then environment variable, then default):\n"
    "  --listen HOST:PORT          operator API address (FEDSVD_LISTEN; default " DEFAULT_LISTEN
    ";\n"
    "                              port 0 picks a free port, see --port-file)\n"
    "  --data-dir DIR              keys, agent.db and results, created 0700 (FEDSVD_DATA_DIR;\n"
    "                              required)\n"
    "  --operator-token-file FILE  bearer token of the operator API, a 0600 file; alias\n"
    "                              --token-file (FEDSVD_OPERATOR_TOKEN_FILE or\n"
    "                              FEDSVD_TOKEN_FILE; required)\n"
    "  --insecure                  do not verify the servers' TLS certificates "
    "(FEDSVD_INSECURE=1)\n"
    "  --ca-file FILE              PEM CA bundle for the servers (FEDSVD_CA_FILE; default: "
    "system)\n"
    "  --insecure-http             allow plain http:// server URLs to hosts that are not\n"
    "                              loopback, and a non-loopback --listen without TLS\n"
    "                              (FEDSVD_INSECURE_HTTP=1); otherwise such invitations are\n"
    "                              refused (422) and such a --listen stops the agent\n"
    "  --tls-cert FILE             serve the operator API over HTTPS with this certificate ...\n"
    "  --tls-key FILE              ... and key (FEDSVD_TLS_CERT, FEDSVD_TLS_KEY; as on the\n"
    "                              servers; older spellings --tls-cert-file, --tls-key-file,\n"
    "                              FEDSVD_TLS_CERT_FILE, FEDSVD_TLS_KEY_FILE still work)\n"
    "  --openapi FILE              the contract served at /openapi.yaml (FEDSVD_OPENAPI;\n"
    "                              default: the repository's, found from the binary's path,\n"
    "                              or /usr/share/fedsvd/openapi.yaml; else 404)\n";

/* (two strings: C99 compilers need not support literals over 4095 bytes) */
static const char USAGE2[] =
    "  --max-elements N            largest dataset, rows x cols (FEDSVD_MAX_ELEMENTS;\n"
    "                              default 134217728)\n"
    "  --max-participations N      participations running at once (FEDSVD_MAX_PARTICIPATIONS;\n"
    "                              default 16)\n"
    "  --poll-ms N                 job status polling interval (FEDSVD_POLL_MS; default 200)\n"
    "  --stall-timeout S           fail a participation whose job shows no change for S\n"
    "                              seconds, 0 = never (FEDSVD_STALL_TIMEOUT; default 3600);\n"
    "                              not while the job waits for parties to join (the job's\n"
    "                              join timeout bounds that)\n"
    "  --server-patience S         how long an unreachable server or 5xx answers are\n"
    "                              tolerated (FEDSVD_SERVER_PATIENCE; default 120)\n"
    "  --port-file FILE            write the bound port there once listening (FEDSVD_PORT_FILE)\n"
    "  --max-connections-per-ip N  operator API: connections from one client address, 0 = no\n"
    "                              cap (FEDSVD_MAX_CONNECTIONS_PER_IP; default 32)\n"
    "  --request-timeout-s S       operator API: a request's headers and body must arrive\n"
    "                              within S seconds plus 1 s per 64 KiB of body, else the\n"
    "                              client is disconnected; 0 = none (FEDSVD_REQUEST_TIMEOUT_S;\n"
    "                              default 300)\n"
    "  --log-level LEVEL           debug, info, warn, error (FEDSVD_LOG_LEVEL; default info)\n"
    "  --privacy-budget RHO        zCDP rho each dataset may spend in power-method jobs\n"
    "                              (FEDSVD_PRIVACY_BUDGET; default none: jobs are only\n"
    "                              recorded); GET /v1/privacy-ledger shows the ledger\n"
    "  --privacy-budget-epsilon E  the budget as (E, D) instead: the largest rho whose\n"
    "  --privacy-budget-delta D    optimal conversion is within it\n"
    "                              (FEDSVD_PRIVACY_BUDGET_EPSILON, FEDSVD_PRIVACY_BUDGET_DELTA;\n"
    "                              D default 1e-5, also the delta of the ledger's epsilons)\n"
    "  -h, --help                  show this text\n"
    "  --version                   print the version\n"
    "\n"
    "Logs are JSON lines on stderr. SIGTERM/SIGINT: stop accepting requests, stop running\n"
    "participations (marked failed, \"agent stopped\"), exit 0. Participations that were\n"
    "running when the agent died are marked failed on the next start (\"agent restarted\n"
    "during the protocol\"): the secure-aggregation client state is kept in memory only.\n";

/* Raw values: environment first, flags override. */
struct raw {
    const char *listen;
    const char *data_dir;
    const char *token_file;
    const char *insecure;
    const char *insecure_http;
    const char *max_per_ip;
    const char *request_timeout;
    const char *ca_file;
    const char *tls_cert;
    const char *tls_key;
    const char *openapi;
    const char *max_elements;
    const char *max_running;
    const char *poll_ms;
    const char *stall;
    const char *patience;
    const char *port_file;
    const char *log_level;
    const char *budget_rho;
    const char *budget_eps;
    const char *budget_delta;
};

struct opt {
    const char *flag;
    const char *env;
    size_t off; /* offsetof(struct raw, field) */
    int is_bool;
};

#define OPT(f, e, field, b)                                                                        \
    {                                                                                              \
        f, e, offsetof(struct raw, field), b                                                       \
    }

static const struct opt OPTS[] = {
    OPT("--listen", "FEDSVD_LISTEN", listen, 0),
    OPT("--data-dir", "FEDSVD_DATA_DIR", data_dir, 0),
    OPT("--operator-token-file", "FEDSVD_OPERATOR_TOKEN_FILE", token_file, 0),
    OPT("--token-file", "FEDSVD_TOKEN_FILE", token_file, 0),
    OPT("--insecure", "FEDSVD_INSECURE", insecure, 1),
    OPT("--insecure-http", "FEDSVD_INSECURE_HTTP", insecure_http, 1),
    OPT("--max-connections-per-ip", "FEDSVD_MAX_CONNECTIONS_PER_IP", max_per_ip, 0),
    OPT("--request-timeout-s", "FEDSVD_REQUEST_TIMEOUT_S", request_timeout, 0),
    OPT("--ca-file", "FEDSVD_CA_FILE", ca_file, 0),
    /* the servers' spelling first (its variable wins over the alias's), then the aliases */
    OPT("--tls-cert", "FEDSVD_TLS_CERT", tls_cert, 0),
    OPT("--tls-key", "FEDSVD_TLS_KEY", tls_key, 0),
    OPT("--tls-cert-file", "FEDSVD_TLS_CERT_FILE", tls_cert, 0),
    OPT("--tls-key-file", "FEDSVD_TLS_KEY_FILE", tls_key, 0),
    OPT("--openapi", "FEDSVD_OPENAPI", openapi, 0),
    OPT("--max-elements", "FEDSVD_MAX_ELEMENTS", max_elements, 0),
    OPT("--max-participations", "FEDSVD_MAX_PARTICIPATIONS", max_running, 0),
    OPT("--poll-ms", "FEDSVD_POLL_MS", poll_ms, 0),
    OPT("--stall-timeout", "FEDSVD_STALL_TIMEOUT", stall, 0),
    OPT("--server-patience", "FEDSVD_SERVER_PATIENCE", patience, 0),
    OPT("--port-file", "FEDSVD_PORT_FILE", port_file, 0),
    OPT("--log-level", "FEDSVD_LOG_LEVEL", log_level, 0),
    OPT("--privacy-budget", "FEDSVD_PRIVACY_BUDGET", budget_rho, 0),
    OPT("--privacy-budget-epsilon", "FEDSVD_PRIVACY_BUDGET_EPSILON", budget_eps, 0),
    OPT("--privacy-budget-delta", "FEDSVD_PRIVACY_BUDGET_DELTA", budget_delta, 0),
};

#define NOPTS (sizeof OPTS / sizeof OPTS[0])

static const char **slot(struct raw *r, const struct opt *o)
{
    return (const char **)(void *)((char *)r + o->off);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "client-agent: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see client-agent --help)\n");
    return 2;
}

/* @return -1 to continue, else an exit status (0 for --help). */
static int parse_args(int argc, char **argv, struct raw *r)
{
    memset(r, 0, sizeof *r);
    if (fs_svc_version_flag("client-agent", argc, argv)) {
        return 0;
    }
    for (size_t i = 0; i < NOPTS; i++) {
        const char *v = getenv(OPTS[i].env);
        if (v != NULL && v[0] != '\0' && *slot(r, &OPTS[i]) == NULL) {
            *slot(r, &OPTS[i]) = v;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq;
        size_t flen;
        int found = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(USAGE, stdout);
            fputs(USAGE2, stdout);
            return 0;
        }
        eq = strchr(a, '=');
        flen = eq != NULL ? (size_t)(eq - a) : strlen(a);
        for (size_t k = 0; k < NOPTS && !found; k++) {
            const struct opt *o = &OPTS[k];
            if (strlen(o->flag) != flen || strncmp(a, o->flag, flen) != 0) {
                continue;
            }
            found = 1;
            if (o->is_bool) {
                *slot(r, o) = eq != NULL ? eq + 1 : "1";
            } else if (eq != NULL) {
                *slot(r, o) = eq + 1;
            } else if (i + 1 < argc) {
                *slot(r, o) = argv[++i];
            } else {
                return usage_error("%s needs a value", o->flag);
            }
        }
        if (!found) {
            return usage_error("unknown option %s", a);
        }
    }
    return -1;
}

static int parse_bool(const char *s, int *out)
{
    if (s == NULL) {
        *out = 0;
        return 0;
    }
    if (strcmp(s, "1") == 0 || strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0) {
        *out = 1;
        return 0;
    }
    if (strcmp(s, "0") == 0 || strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0) {
        *out = 0;
        return 0;
    }
    return -1;
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t dflt, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v;

    if (s == NULL) {
        *out = dflt;
        return 0;
    }
    if (s[0] < '0' || s[0] > '9') {
        return -1;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        return -1;
    }
    *out = v;
    return 0;
}

/* A positive finite number (NULL: absent, *out untouched). */
static int parse_pos(const char *s, double *out)
{
    char *end = NULL;
    double v;

    if (s == NULL) {
        return 0;
    }
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v <= 0.0) {
        return -1;
    }
    *out = v;
    return 0;
}

/* --privacy-budget RHO, or --privacy-budget-epsilon E (with -delta D). */
static int build_budget(const struct raw *r, struct fs_ledger_budget *b)
{
    struct fs_err err = {0};
    double rho = 0.0;
    double eps = 0.0;
    double delta = FS_LEDGER_DEFAULT_DELTA;
    int rc;

    if (parse_pos(r->budget_rho, &rho) != 0) {
        return usage_error("--privacy-budget: expected a zCDP rho > 0, got %s", r->budget_rho);
    }
    if (parse_pos(r->budget_eps, &eps) != 0) {
        return usage_error("--privacy-budget-epsilon: expected a number > 0, got %s",
                           r->budget_eps);
    }
    if (parse_pos(r->budget_delta, &delta) != 0 || delta >= 1.0) {
        return usage_error("--privacy-budget-delta: expected a number in (0, 1), got %s",
                           r->budget_delta);
    }
    if (r->budget_rho != NULL && r->budget_eps != NULL) {
        return usage_error("%s",
                           "--privacy-budget and --privacy-budget-epsilon exclude each other");
    }
    if (r->budget_rho != NULL) {
        rc = fs_ledger_budget_from_rho(rho, delta, b, &err);
    } else if (r->budget_eps != NULL) {
        rc = fs_ledger_budget_from_eps(eps, delta, b, &err);
    } else {
        rc = fs_ledger_budget_none(delta, b, &err);
    }
    if (rc != 0) {
        return usage_error("privacy budget: %s", err.msg);
    }
    return -1;
}

static int build_config(const struct raw *r, struct agent_config *c)
{
    struct fs_err err = {0};
    uint64_t v = 0;

    memset(c, 0, sizeof *c);
    if (fs_http_parse_listen(r->listen != NULL ? r->listen : DEFAULT_LISTEN, c->host,
                             sizeof c->host, &c->port, &err) != 0) {
        return usage_error("--listen: %s", err.msg);
    }
    if (r->data_dir == NULL) {
        return usage_error("%s is required", "--data-dir");
    }
    if (r->token_file == NULL) {
        return usage_error("%s is required (the operator API's bearer token)",
                           "--operator-token-file");
    }
    c->data_dir = r->data_dir;
    c->operator_token_file = r->token_file;
    c->ca_file = r->ca_file;
    c->tls_cert = r->tls_cert;
    c->tls_key = r->tls_key;
    c->openapi = r->openapi;
    c->port_file = r->port_file;
    if ((c->tls_cert == NULL) != (c->tls_key == NULL)) {
        return usage_error("%s", "--tls-cert and --tls-key go together");
    }
    if (parse_bool(r->insecure, &c->insecure) != 0) {
        return usage_error("--insecure / FEDSVD_INSECURE: expected 1/0/true/false, got %s",
                           r->insecure);
    }
    if (parse_bool(r->insecure_http, &c->insecure_http) != 0) {
        return usage_error(
            "--insecure-http / FEDSVD_INSECURE_HTTP: expected 1/0/true/false, got %s",
            r->insecure_http);
    }
    if (parse_u64(r->max_per_ip, 0, 65536, 32, &v) != 0) {
        return usage_error("--max-connections-per-ip: expected 0..65536, got %s", r->max_per_ip);
    }
    c->max_per_ip = (unsigned)v;
    if (parse_u64(r->request_timeout, 0, 86400, 300, &v) != 0) {
        return usage_error("--request-timeout-s: expected 0..86400 seconds, got %s",
                           r->request_timeout);
    }
    c->request_timeout_s = (unsigned)v;
    if (parse_u64(r->max_elements, 1, (uint64_t)1 << 40, DEFAULT_MAX_ELEMENTS, &c->max_elements) !=
        0) {
        return usage_error("--max-elements: expected 1..2^40, got %s", r->max_elements);
    }
    if (parse_u64(r->max_running, 1, 1000, 16, &v) != 0) {
        return usage_error("--max-participations: expected 1..1000, got %s", r->max_running);
    }
    c->max_running = (unsigned)v;
    if (parse_u64(r->poll_ms, 10, 60000, 200, &v) != 0) {
        return usage_error("--poll-ms: expected 10..60000, got %s", r->poll_ms);
    }
    c->poll_ms = (unsigned)v;
    if (parse_u64(r->stall, 0, 30 * 86400, 3600, &v) != 0) {
        return usage_error("--stall-timeout: expected 0..2592000 seconds, got %s", r->stall);
    }
    c->stall_s = (unsigned)v;
    if (parse_u64(r->patience, 1, 86400, 120, &v) != 0) {
        return usage_error("--server-patience: expected 1..86400 seconds, got %s", r->patience);
    }
    c->patience_s = (unsigned)v;
    c->log_level = FS_LOG_INFO;
    if (r->log_level != NULL && fs_log_level_parse(r->log_level, &c->log_level, &err) != 0) {
        return usage_error("--log-level: expected debug, info, warn or error, got %s",
                           r->log_level);
    }
    if (build_budget(r, &c->budget) >= 0) {
        return 2;
    }
    return -1;
}

/* Tell every worker to stop and wait (bounded) for them to persist and end. */
static void stop_workers(struct agent *ag)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += SHUTDOWN_WAIT_S;
    pthread_mutex_lock(&ag->mu);
    for (struct part *p = ag->parts; p != NULL; p = p->next) {
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

/* At startup nothing runs: party tokens left by a killed process are of no
 * further use (participations are not resumed), so remove them. */
static void remove_stale_tokens(const char *data_dir)
{
    char dir[AGENT_PATH_MAX];
    char path[AGENT_PATH_MAX + 300];
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

int main(int argc, char **argv)
{
    struct fs_http_server_config hcfg;
    struct fs_err err = {0};
    struct raw raw;
    struct agent *ag;
    char path[AGENT_PATH_MAX];
    char openapi[AGENT_PATH_MAX];
    pthread_condattr_t ca;
    sigset_t sigs;
    unsigned marked = 0;
    int rc;

    umask(077);
    rc = parse_args(argc, argv, &raw);
    if (rc >= 0) {
        return rc;
    }
    ag = calloc(1, sizeof *ag);
    if (ag == NULL) {
        fputs("client-agent: out of memory\n", stderr);
        return 1;
    }
    rc = build_config(&raw, &ag->cfg);
    if (rc >= 0) {
        free(ag);
        return rc;
    }
    fs_log_set_level(ag->cfg.log_level);
    if (fs_svc_check_listen(ag->cfg.host, ag->cfg.tls_cert != NULL, ag->cfg.insecure_http, &err) !=
        0) {
        fprintf(stderr, "client-agent: %s\n", err.msg);
        free(ag);
        return 2;
    }
    if (ag->cfg.openapi == NULL) {
        ag->cfg.openapi = fs_svc_find_openapi(NULL, openapi, sizeof openapi);
    }
    pthread_mutex_init(&ag->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ag->cv, &ca);
    pthread_condattr_destroy(&ca);

    /* Signals go to the main thread's sigwait only; threads inherit the mask. */
    fs_svc_block_signals(&sigs);

    rc = 1;
    if (fs_svc_private_dir(ag->cfg.data_dir, &err) != 0) {
        rc = fail("cannot create the data directory", &err);
        goto out;
    }
    snprintf(path, sizeof path, "%s/participations", ag->cfg.data_dir);
    if (fs_mkdir_p(path, &err) != 0 || files_identity_ensure(ag->cfg.data_dir, &err) != 0) {
        rc = fail("cannot set up the data directory", &err);
        goto out;
    }
    if (snprintf(path, sizeof path, "%s/agent.db", ag->cfg.data_dir) >= (int)sizeof path ||
        store_open(path, &ag->db, &marked, &err) != 0) {
        rc = fail("cannot open agent.db", &err);
        goto out;
    }
    remove_stale_tokens(ag->cfg.data_dir);
    if (ledger_init(ag->db, &err) != 0) {
        rc = fail("cannot open the privacy ledger", &err);
        goto out;
    }
    if (ag->cfg.budget.set) {
        fs_log_pack(FS_LOG_INFO, "privacy budget per dataset", "{s:f, s:f, s:f}", "rho",
                    ag->cfg.budget.rho, "epsilon", ag->cfg.budget.eps, "delta",
                    ag->cfg.budget.delta);
    }
    if (marked > 0) {
        fs_log_pack(FS_LOG_WARN, "participations interrupted by a restart marked failed", "{s:i}",
                    "count", (int)marked);
    }
    if (fs_auth_new(&ag->auth, &err) != 0 ||
        fs_auth_add_file(ag->auth, ag->cfg.operator_token_file, "operator", &err) != 0) {
        rc = fail("cannot load the operator token", &err);
        goto out;
    }
    fs_http_server_config_default(&hcfg);
    hcfg.host = ag->cfg.host;
    hcfg.port = ag->cfg.port;
    hcfg.on_request = api_on_request;
    hcfg.hook_ctx = ag;
    hcfg.tls_cert_file = ag->cfg.tls_cert;
    hcfg.tls_key_file = ag->cfg.tls_key;
    hcfg.max_per_ip = ag->cfg.max_per_ip;
    hcfg.request_timeout_s = ag->cfg.request_timeout_s;
    if (fs_http_server_new(&ag->http, &hcfg, &err) != 0 || api_routes(ag, &err) != 0 ||
        fs_http_server_start(ag->http, &err) != 0) {
        rc = fail("cannot start the HTTP server", &err);
        goto out;
    }
    if (ag->cfg.port_file != NULL &&
        fs_svc_write_port_file(ag->cfg.port_file, fs_http_server_port(ag->http), &err) != 0) {
        rc = fail("cannot write the port file", &err);
        goto out;
    }
    fs_log_pack(FS_LOG_INFO, "client-agent listening", "{s:s, s:i, s:s, s:b, s:I, s:i}", "host",
                ag->cfg.host, "port", (int)fs_http_server_port(ag->http), "data_dir",
                ag->cfg.data_dir, "tls", ag->cfg.tls_cert != NULL, "max_elements",
                (json_int_t)ag->cfg.max_elements, "max_participations", (int)ag->cfg.max_running);
    if (ag->cfg.insecure) {
        fs_log(FS_LOG_WARN, "TLS verification towards servers is off (--insecure)", NULL);
    }
    if (ag->cfg.insecure_http) {
        fs_log(FS_LOG_WARN,
               "plain http:// server URLs to hosts that are not loopback are allowed "
               "(--insecure-http)",
               NULL);
    }

    (void)fs_svc_wait_signal(&sigs);
    rc = 0;
out:
    atomic_store(&ag->stopping, 1);
    if (ag->http != NULL) {
        fs_http_server_stop(ag->http, 5000);
    }
    stop_workers(ag);
    fs_http_server_free(ag->http);
    if (ag->nrunning == 0) {
        store_close(ag->db);
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
