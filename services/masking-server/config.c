/* Flags, then FEDSVD_* environment variables, then defaults. */
#include "config.h"

#include <stddef.h>
#include <string.h>

#include "net/svc.h"

#define OFF(f) offsetof(struct mask_config, f)
#define SZ(f)  sizeof(((struct mask_config *)0)->f)

static const struct fs_svc_opt OPTS[] = {
    {"--listen", "FEDSVD_LISTEN", FS_SVC_STR, OFF(listen), SZ(listen), "127.0.0.1:8445", 0, 0,
     "address to listen on, HOST:PORT, [IPv6]:PORT or :PORT (all interfaces); port 0 = any"},
    {"--data-dir", "FEDSVD_DATA_DIR", FS_SVC_STR, OFF(data_dir), SZ(data_dir), "./masking-data", 0,
     0, "state directory (0700): masking.db (SQLite, WAL) and seeds/<maskset>.seed (0600)"},
    {"--admin-token-file", "FEDSVD_ADMIN_TOKEN_FILE", FS_SVC_STR, OFF(admin_token_file),
     SZ(admin_token_file), "", 0, 0,
     "file holding the admin bearer token (mode 0600; required): creates, lists and deletes "
     "mask sets (it cannot download keys)"},
    {"--port-file", "FEDSVD_PORT_FILE", FS_SVC_STR, OFF(port_file), SZ(port_file), "", 0, 0,
     "once listening, write the bound port to this file (for --listen HOST:0)"},
    {"--log-level", "FEDSVD_LOG_LEVEL", FS_SVC_LEVEL, OFF(log_level), 0, "info", 0, 0,
     "debug, info, warn, error or off (JSON lines on stderr)"},
    {"--max-parties", "FEDSVD_MAX_PARTIES", FS_SVC_U32, OFF(max_parties), 0, "1000", 1, 1000,
     "most parties in one mask set"},
    {"--max-dim", "FEDSVD_MAX_DIM", FS_SVC_U64, OFF(max_dim), 0, "1048576", 1, 2147483647,
     "largest rows and largest cols of a mask set"},
    {"--max-key-bytes", "FEDSVD_MAX_KEY_BYTES", FS_SVC_U64, OFF(max_key_bytes), 0, "1073741824",
     4096, (uint64_t)1 << 40,
     "largest total of one party's .npy key files (the slab of A: about 8 x block x the "
     "party's rows); bounds the memory of a generation and of the agent's download"},
    {"--keygen-concurrency", "FEDSVD_KEYGEN_CONCURRENCY", FS_SVC_U32, OFF(keygen_concurrency), 0,
     "1", 1, 256,
     "key generations running at once (each holds about 2 x its key files in memory, and "
     "each already uses every core through the multi-threaded BLAS)"},
    {"--keys-cache-bytes", "FEDSVD_KEYS_CACHE_BYTES", FS_SVC_U64, OFF(keys_cache_bytes), 0,
     "4294967296", 0, (uint64_t)1 << 44,
     "memory for generated key files kept until their party has fetched them all (least "
     "recently used dropped first; the newest entry is always kept)"},
    {"--keys-cache-ttl-s", "FEDSVD_KEYS_CACHE_TTL_S", FS_SVC_U32, OFF(keys_cache_ttl_s), 0, "600",
     1, 86400, "drop a party's generated key files when unused for this long"},
    {"--max-connections", "FEDSVD_MAX_CONNECTIONS", FS_SVC_U32, OFF(max_connections), 0, "128", 4,
     4096, "concurrent HTTP connections (one thread each)"},
    {"--max-connections-per-ip", "FEDSVD_MAX_CONNECTIONS_PER_IP", FS_SVC_U32, OFF(max_per_ip), 0,
     "32", 0, 4096,
     "concurrent connections from one client address (more are closed at once), so that a few "
     "slow clients cannot take them all; 0 = no cap (behind a proxy every client has its "
     "address)"},
    {"--request-timeout-s", "FEDSVD_REQUEST_TIMEOUT_S", FS_SVC_U32, OFF(request_timeout_s), 0,
     "300", 0, 86400,
     "a request's headers and body must arrive within this many seconds (plus 1 s per 64 KiB "
     "of body); slower clients are disconnected. Key generation and downloads are not "
     "limited by it. 0 = no deadline"},
    {"--idle-timeout-s", "FEDSVD_IDLE_TIMEOUT_S", FS_SVC_U32, OFF(idle_timeout_s), 0, "30", 1, 3600,
     "close a connection that sends nothing for this long (a key download being generated is "
     "not idle)"},
    {"--shutdown-grace-ms", "FEDSVD_SHUTDOWN_GRACE_MS", FS_SVC_U32, OFF(shutdown_grace_ms), 0,
     "5000", 0, 600000, "on SIGTERM/SIGINT, how long requests in flight may take to finish"},
    {"--openapi", "FEDSVD_OPENAPI", FS_SVC_STR, OFF(openapi), SZ(openapi), "", 0, 0,
     "openapi.yaml served at /openapi.yaml (default: the repository's, found from the binary's "
     "path, or /usr/share/fedsvd/openapi.yaml)"},
    {"--tls-cert", "FEDSVD_TLS_CERT", FS_SVC_STR, OFF(tls_cert), SZ(tls_cert), "", 0, 0,
     "PEM certificate: serve HTTPS (with --tls-key)"},
    {"--tls-key", "FEDSVD_TLS_KEY", FS_SVC_STR, OFF(tls_key), SZ(tls_key), "", 0, 0,
     "PEM private key (unencrypted) for --tls-cert"},
    {"--insecure-http", "FEDSVD_INSECURE_HTTP", FS_SVC_BOOL, OFF(insecure_http), 0, "0", 0, 1,
     "allow plain HTTP on an address that is not loopback (without it, such a --listen "
     "needs --tls-cert): only on a network you trust or behind a TLS-terminating proxy; "
     "warned about at every start"},
    {"--fsync", "FEDSVD_FSYNC", FS_SVC_BOOL, OFF(fsync), 0, "0", 0, 1,
     "1: commit SQLite with synchronous=FULL (survives power loss); seed files are always "
     "fsynced"},
    {"--insecure-test-mask-seed", "FEDSVD_INSECURE_TEST_MASK_SEED", FS_SVC_STR,
     OFF(insecure_test_mask_seed), SZ(insecure_test_mask_seed), "", 0, 0,
     "INSECURE, for reproducibility tests only, never in production: HEX (2..128 hex "
     "digits) from which every mask set's master seed is derived together with its "
     "geometry, instead of the OS random generator, so that two runs of a job get the same "
     "masks and bit-identical results. Anyone who knows it can remove every mask. Refused "
     "unless --listen is a loopback address; warned about at start, and /readyz and every "
     "mask set made under it say \"deterministic_masks\": true"},
};

#define NOPTS (sizeof OPTS / sizeof OPTS[0])

int mask_config_parse(int argc, char **argv, struct mask_config *cfg, struct fs_err *err)
{
    int rc;

    memset(cfg, 0, sizeof *cfg);
    rc = fs_svc_opts_parse(OPTS, NOPTS, cfg, argc, argv, &cfg->help, err);
    if (rc != 0) {
        return rc;
    }
    if (cfg->help) {
        return 0;
    }
    return fs_svc_check_admin_tls(cfg->admin_token_file, cfg->tls_cert, cfg->tls_key, err);
}

void mask_config_usage(FILE *out)
{
    fs_svc_opts_usage(
        out,
        "usage: masking-server [--flag value | --flag=value]...\n"
        "\n"
        "Creates the secret random orthogonal masks of FedSVD jobs and hands each party\n"
        "only its own keys (docs/wire-fedsvd.md). Master seeds stay under --data-dir\n"
        "(mode 0600). Flags override FEDSVD_* environment variables, which override the\n"
        "defaults. SIGTERM/SIGINT stop it cleanly.\n"
        "\n",
        OPTS, NOPTS);
}
