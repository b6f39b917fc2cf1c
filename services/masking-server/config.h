/* masking-server configuration: flags, then FEDSVD_* environment variables,
 * then defaults. */
#ifndef MASK_CONFIG_H
#define MASK_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "net/log.h"

#define MASK_PATH_MAX 4096

struct mask_config {
    char listen[256]; /* HOST:PORT */
    char data_dir[MASK_PATH_MAX];
    char admin_token_file[MASK_PATH_MAX];
    char openapi[MASK_PATH_MAX]; /* "" = search next to the binary */
    char tls_cert[MASK_PATH_MAX];
    char tls_key[MASK_PATH_MAX];
    char port_file[MASK_PATH_MAX]; /* "" = none */
    enum fs_log_level log_level;
    uint32_t max_parties;        /* parties of one mask set */
    uint64_t max_dim;            /* rows and cols of a mask set, each */
    uint64_t max_key_bytes;      /* the largest total of a party's key files */
    uint32_t keygen_concurrency; /* key generations running at once */
    uint64_t keys_cache_bytes;   /* soft cap of the key cache (keygen.h) */
    uint32_t keys_cache_ttl_s;   /* cached keys unused this long are dropped */
    uint32_t max_connections;
    uint32_t max_per_ip;        /* concurrent connections per client address; 0 = no cap */
    uint32_t request_timeout_s; /* whole-request deadline (headers and body); 0 = none */
    uint32_t idle_timeout_s;    /* close connections idle this long (slowloris) */
    int insecure_http;          /* 1: plain HTTP allowed on a non-loopback --listen address */
    uint32_t shutdown_grace_ms;
    int fsync; /* 1: SQLite synchronous=FULL (seed files are always fsynced) */
    /* hex; "" = none. INSECURE, tests only: each mask set's master seed derived from it
     * (testseed.h); refused unless --listen is loopback */
    char insecure_test_mask_seed[132];
    int help;
};

/**
 * Fill cfg from argv and the environment. Prints nothing.
 * @return 0, or FS_EINVAL with a message naming the flag / variable.
 */
FS_WUR int mask_config_parse(int argc, char **argv, struct mask_config *cfg, struct fs_err *err);

/** Print the --help text (every flag, its environment variable and default). */
void mask_config_usage(FILE *out);

#endif
