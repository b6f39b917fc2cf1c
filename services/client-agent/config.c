/* Flags, then FEDSVD_* environment variables, then defaults: see config.h. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "net/http_server.h"
#include "net/svc.h"

#define OFF(f) offsetof(struct ca_config, f)
#define SZ(f)  sizeof(((struct ca_config *)0)->f)

/* An entry without a default (NULL) is another spelling of the entry above
 * with the same field (lib/net/svc.h). */
static const struct fs_svc_opt OPTS[] = {
    {"--listen HOST:PORT", "FEDSVD_LISTEN", FS_SVC_STR, OFF(listen), SZ(listen), "127.0.0.1:8444",
     0, 0, "operator API address; port 0 picks a free port, see --port-file"},
    {"--data-dir DIR", "FEDSVD_DATA_DIR", FS_SVC_STR, OFF(data_dir), SZ(data_dir), "", 0, 0,
     "keys, agent.db and results, created 0700 (required)"},
    {"--operator-token-file FILE", "FEDSVD_OPERATOR_TOKEN_FILE", FS_SVC_STR,
     OFF(operator_token_file), SZ(operator_token_file), "", 0, 0,
     "bearer token of the operator API, a 0600 file (required)"},
    {"--token-file FILE", "FEDSVD_TOKEN_FILE", FS_SVC_STR, OFF(operator_token_file),
     SZ(operator_token_file), NULL, 0, 0, NULL},
    {"--insecure", "FEDSVD_INSECURE", FS_SVC_BOOL, OFF(insecure), 0, "0", 0, 1,
     "do not verify the servers' TLS certificates"},
    {"--ca-file FILE", "FEDSVD_CA_FILE", FS_SVC_STR, OFF(ca_file), SZ(ca_file), "", 0, 0,
     "PEM CA bundle for the servers (default: the system's)"},
    {"--insecure-http", "FEDSVD_INSECURE_HTTP", FS_SVC_BOOL, OFF(insecure_http), 0, "0", 0, 1,
     "allow plain http:// server URLs to hosts that are not loopback, and a non-loopback "
     "--listen without TLS; otherwise such invitations are refused (422) and such a --listen "
     "stops the agent"},
    /* the servers' spelling first (its variable wins over the older one's) */
    {"--tls-cert FILE", "FEDSVD_TLS_CERT", FS_SVC_STR, OFF(tls_cert), SZ(tls_cert), "", 0, 0,
     "serve the operator API over HTTPS with this PEM certificate (with --tls-key)"},
    {"--tls-cert-file FILE", "FEDSVD_TLS_CERT_FILE", FS_SVC_STR, OFF(tls_cert), SZ(tls_cert), NULL,
     0, 0, NULL},
    {"--tls-key FILE", "FEDSVD_TLS_KEY", FS_SVC_STR, OFF(tls_key), SZ(tls_key), "", 0, 0,
     "PEM private key (unencrypted) for --tls-cert"},
    {"--tls-key-file FILE", "FEDSVD_TLS_KEY_FILE", FS_SVC_STR, OFF(tls_key), SZ(tls_key), NULL, 0,
     0, NULL},
    {"--openapi FILE", "FEDSVD_OPENAPI", FS_SVC_STR, OFF(openapi), SZ(openapi), "", 0, 0,
     "the contract served at /openapi.yaml (default: the repository's, found from the binary's "
     "path, or /usr/share/fedsvd/openapi.yaml; else 404)"},
    {"--max-elements N", "FEDSVD_MAX_ELEMENTS", FS_SVC_U64, OFF(max_elements), 0, "134217728", 1,
     (uint64_t)1 << 40, "largest dataset, rows x cols"},
    {"--max-participations N", "FEDSVD_MAX_PARTICIPATIONS", FS_SVC_U32, OFF(max_running), 0, "16",
     1, 1000, "participations running at once"},
    {"--poll-ms N", "FEDSVD_POLL_MS", FS_SVC_U32, OFF(poll_ms), 0, "200", 10, 60000,
     "longest wait between job polls against a server without long polls (10 ms after a step, "
     "doubling up to N); a long poll of the job waits max(N, 1000) ms, at most 10000"},
    {"--stall-timeout S", "FEDSVD_STALL_TIMEOUT", FS_SVC_U32, OFF(stall_s), 0, "3600", 0,
     30 * 86400,
     "fail a participation whose job shows no change for S seconds, 0 = never; not while the "
     "job waits for parties to join (the job's join timeout bounds that)"},
    {"--server-patience S", "FEDSVD_SERVER_PATIENCE", FS_SVC_U32, OFF(patience_s), 0, "120", 1,
     86400, "how long an unreachable server or 5xx answers are tolerated"},
    {"--port-file FILE", "FEDSVD_PORT_FILE", FS_SVC_STR, OFF(port_file), SZ(port_file), "", 0, 0,
     "write the bound port there once listening"},
    {"--max-connections-per-ip N", "FEDSVD_MAX_CONNECTIONS_PER_IP", FS_SVC_U32, OFF(max_per_ip), 0,
     "32", 0, 65536, "operator API: connections from one client address, 0 = no cap"},
    {"--request-timeout-s S", "FEDSVD_REQUEST_TIMEOUT_S", FS_SVC_U32, OFF(request_timeout_s), 0,
     "300", 0, 86400,
     "operator API: a request's headers and body must arrive within S seconds plus 1 s per "
     "64 KiB of body, else the client is disconnected; 0 = none"},
    {"--log-level LEVEL", "FEDSVD_LOG_LEVEL", FS_SVC_LEVEL, OFF(log_level), 0, "info", 0, 0,
     "debug, info, warn, error or off (JSON lines on stderr)"},
    {"--privacy-budget RHO", "FEDSVD_PRIVACY_BUDGET", FS_SVC_STR, OFF(budget_rho), SZ(budget_rho),
     "", 0, 0,
     "zCDP rho each dataset may spend in power-method jobs (default none: jobs are only "
     "recorded); GET /v1/privacy-ledger shows the ledger"},
    {"--privacy-budget-epsilon E", "FEDSVD_PRIVACY_BUDGET_EPSILON", FS_SVC_STR, OFF(budget_eps),
     SZ(budget_eps), "", 0, 0,
     "the budget as (E, D) instead: the largest rho whose optimal conversion is within it"},
    {"--privacy-budget-delta D", "FEDSVD_PRIVACY_BUDGET_DELTA", FS_SVC_STR, OFF(budget_delta),
     SZ(budget_delta), "", 0, 0,
     "D of --privacy-budget-epsilon, also the delta of the ledger's epsilons (default 1e-5)"},
};

#define NOPTS (sizeof OPTS / sizeof OPTS[0])

/* A positive finite number ("" = absent: *out untouched). */
static int parse_pos(const char *s, double *out)
{
    char *end = NULL;
    double v;

    if (s[0] == '\0') {
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
static int build_budget(struct ca_config *c, struct fs_err *err)
{
    double rho = 0.0;
    double eps = 0.0;
    double delta = FS_LEDGER_DEFAULT_DELTA;
    int rc;

    if (parse_pos(c->budget_rho, &rho) != 0) {
        return fs_err_set(err, FS_EINVAL, "--privacy-budget: expected a zCDP rho > 0, got %s",
                          c->budget_rho);
    }
    if (parse_pos(c->budget_eps, &eps) != 0) {
        return fs_err_set(err, FS_EINVAL, "--privacy-budget-epsilon: expected a number > 0, got %s",
                          c->budget_eps);
    }
    if (parse_pos(c->budget_delta, &delta) != 0 || delta >= 1.0) {
        return fs_err_set(err, FS_EINVAL,
                          "--privacy-budget-delta: expected a number in (0, 1), got %s",
                          c->budget_delta);
    }
    if (c->budget_rho[0] != '\0' && c->budget_eps[0] != '\0') {
        return fs_err_set(err, FS_EINVAL,
                          "--privacy-budget and --privacy-budget-epsilon exclude each other");
    }
    if (c->budget_rho[0] != '\0') {
        rc = fs_ledger_budget_from_rho(rho, delta, &c->budget, err);
    } else if (c->budget_eps[0] != '\0') {
        rc = fs_ledger_budget_from_eps(eps, delta, &c->budget, err);
    } else {
        rc = fs_ledger_budget_none(delta, &c->budget, err);
    }
    return rc != 0 ? fs_err_set(err, FS_EINVAL, "privacy budget: %s", err->msg) : 0;
}

int ca_config_parse(int argc, char **argv, struct ca_config *cfg, struct fs_err *err)
{
    int rc;

    memset(cfg, 0, sizeof *cfg);
    rc = fs_svc_opts_parse(OPTS, NOPTS, cfg, argc, argv, &cfg->help, err);
    if (rc != 0 || cfg->help) {
        return rc;
    }
    if (fs_http_parse_listen(cfg->listen, cfg->host, sizeof cfg->host, &cfg->port, err) != 0) {
        return fs_err_set(err, FS_EINVAL, "--listen: %s", err->msg);
    }
    if (cfg->data_dir[0] == '\0') {
        return fs_err_set(err, FS_EINVAL, "--data-dir is required");
    }
    if (cfg->operator_token_file[0] == '\0') {
        return fs_err_set(err, FS_EINVAL,
                          "--operator-token-file is required (the operator API's bearer token)");
    }
    if ((cfg->tls_cert[0] == '\0') != (cfg->tls_key[0] == '\0')) {
        return fs_err_set(err, FS_EINVAL, "--tls-cert and --tls-key go together");
    }
    return build_budget(cfg, err);
}

void ca_config_usage(FILE *out)
{
    fs_svc_opts_usage(
        out,
        "Usage: client-agent --data-dir DIR --operator-token-file FILE [OPTIONS]\n"
        "\n"
        "Runs next to a data holder's matrix file: joins federated jobs with an invitation,\n"
        "validates the data first, drives the client side of the protocol as an HTTP client\n"
        "(servers never connect to it), and serves the party's results to its operator.\n"
        "\n"
        "Options (flag, then environment variable, then default):\n",
        OPTS, NOPTS);
    fputs(
        "\n"
        "Logs are JSON lines on stderr. SIGTERM/SIGINT: stop accepting requests, suspend running\n"
        "participations, exit 0. At the next start with the same --data-dir (also after a crash\n"
        "or kill -9) every participation that was running resumes by itself: its secret and\n"
        "party token are sealed in agent.db under DIR/agent.key (AES-256-GCM, created at the\n"
        "first start, 0600), every random value of its protocol state derives from that secret\n"
        "(DP noise is never drawn twice), and its messages are rebuilt byte for byte. One that\n"
        "cannot resume (its dataset changed, ...) fails with \"cannot resume after restart: "
        "...\".\n",
        out);
}
