/* client-agent configuration: flags, then FEDSVD_* environment variables,
 * then defaults (lib/net/svc.h's table). */
#ifndef CA_CONFIG_H
#define CA_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "dp/ledger.h"
#include "net/log.h"

#define CA_PATH_MAX 4096

struct ca_config {
    char listen[256]; /* HOST:PORT, parsed into host and port */
    char host[256];
    uint16_t port;
    char data_dir[CA_PATH_MAX - 256]; /* room for the files under it in CA_PATH_MAX */
    char operator_token_file[CA_PATH_MAX];
    char openapi[CA_PATH_MAX];  /* file served at /openapi.yaml; "" = none found (404) */
    char ca_file[CA_PATH_MAX];  /* CA bundle for the servers; "" = the system store */
    char tls_cert[CA_PATH_MAX]; /* operator API over HTTPS when both are set */
    char tls_key[CA_PATH_MAX];
    char port_file[CA_PATH_MAX]; /* write the bound port here once listening; "" = none */
    int insecure;                /* do not verify the servers' TLS certificates */
    int insecure_http;           /* allow plain HTTP off loopback: server URLs and --listen */
    uint32_t max_per_ip;         /* operator API: connections per client address, 0 = no cap */
    uint32_t request_timeout_s;  /* operator API: whole-request deadline, 0 = none */
    uint64_t max_elements;       /* largest dataset, rows * cols */
    uint32_t max_running;        /* participations running at once */
    uint32_t poll_ms;            /* job status polling interval */
    uint32_t stall_s;            /* fail a participation whose job shows no change for this long */
    uint32_t patience_s;         /* how long unreachable servers / 5xx are tolerated */
    enum fs_log_level log_level;
    char budget_rho[64]; /* the privacy budget as given ("" = not given) */
    char budget_eps[64];
    char budget_delta[64];
    struct fs_ledger_budget budget; /* privacy budget per dataset (budget.set = 0: none) */
    int help;
};

/**
 * Fill cfg from argv and the environment, and check it (required flags,
 * --tls-cert with --tls-key, --listen, the privacy budget). Prints nothing.
 * @return 0, or FS_EINVAL with a message naming the flag / variable.
 */
FS_WUR int ca_config_parse(int argc, char **argv, struct ca_config *cfg, struct fs_err *err);

/** Print the --help text (every flag, its environment variable and default). */
void ca_config_usage(FILE *out);

#endif
