/* aggregation-server configuration: flags, then FEDSVD_* environment
 * variables, then defaults. */
#ifndef AGGSRV_CONFIG_H
#define AGGSRV_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "net/log.h"

#define AGG_PATH_MAX  4096
#define AGG_MAX_PEERS 15  /* shard peers (shards 1..15) */
#define AGG_PEER_URL  513 /* bytes of a peer URL, with the NUL */

struct agg_config {
    char listen[256]; /* HOST:PORT */
    char data_dir[AGG_PATH_MAX];
    char admin_token_file[AGG_PATH_MAX];
    char openapi[AGG_PATH_MAX]; /* "" = search next to the binary */
    char tls_cert[AGG_PATH_MAX];
    char tls_key[AGG_PATH_MAX];
    char port_file[AGG_PATH_MAX];       /* "" = none */
    char masking_ca_file[AGG_PATH_MAX]; /* verifies masking servers at a job's end; "" = system */
    enum fs_log_level log_level;
    uint64_t max_body;      /* JSON request bodies */
    uint64_t max_elements;  /* rows * cols of a job */
    uint32_t max_jobs;      /* jobs running at once */
    uint32_t chunk_words;   /* words per masked upload chunk of new jobs */
    uint64_t upload_buffer; /* bytes of chunk bodies held in memory at once */
    uint32_t threads;       /* HTTP worker threads */
    uint32_t max_connections;
    uint32_t max_per_ip;        /* concurrent connections per client address; 0 = no cap */
    uint32_t request_timeout_s; /* whole-request deadline (headers and body); 0 = none */
    uint32_t shutdown_grace_ms;
    int insecure_http; /* 1: plain HTTP allowed on a non-loopback --listen address */
    int fsync;         /* 1: fsync chunk files, SQLite synchronous=FULL */
    int help;
    /* sharded aggregation: the peers (shards 1..npeers), comma-separated as
     * given (--shard-peer repeated, or FEDSVD_SHARD_PEERS), then split */
    char shard_peers_csv[AGG_MAX_PEERS * AGG_PEER_URL + 64];
    char shard_peers[AGG_MAX_PEERS][AGG_PEER_URL];
    uint32_t npeers;
    char peer_token_file[AGG_PATH_MAX]; /* "" = the /v1/shards routes answer 403 */
    uint32_t shard_window_ttl_s; /* a peer's window untouched this long is removed; 0 = never */
    uint32_t shard_deletion_max_age_s; /* coordinator: give up a peer's pending window deletion
                                         after this long; 0 = never */
};

/**
 * Fill cfg from argv and the environment. Prints nothing.
 * @return 0, or FS_EINVAL with a message naming the flag / variable.
 */
FS_WUR int agg_config_parse(int argc, char **argv, struct agg_config *cfg, struct fs_err *err);

/** Print the --help text (every flag, its environment variable and default). */
void agg_config_usage(FILE *out);

#endif
