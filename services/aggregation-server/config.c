/* Flags, then FEDSVD_* environment variables, then defaults. */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "net/http_client.h"
#include "net/svc.h"

#define OFF(f) offsetof(struct agg_config, f)
#define SZ(f)  sizeof(((struct agg_config *)0)->f)

static const struct fs_svc_opt OPTS[] = {
    {"--listen", "FEDSVD_LISTEN", FS_SVC_STR, OFF(listen), SZ(listen), "127.0.0.1:8443", 0, 0,
     "address to listen on, HOST:PORT, [IPv6]:PORT or :PORT (all interfaces); port 0 = any"},
    {"--data-dir", "FEDSVD_DATA_DIR", FS_SVC_STR, OFF(data_dir), SZ(data_dir), "./aggsrv-data", 0,
     0, "state directory: server.db (SQLite, WAL) and jobs/<id>/ (chunks, results)"},
    {"--admin-token-file", "FEDSVD_ADMIN_TOKEN_FILE", FS_SVC_STR, OFF(admin_token_file),
     SZ(admin_token_file), "", 0, 0,
     "file holding the admin bearer token (mode 0600; required): creates and lists jobs"},
    {"--log-level", "FEDSVD_LOG_LEVEL", FS_SVC_LEVEL, OFF(log_level), 0, "info", 0, 0,
     "debug, info, warn, error or off (JSON lines on stderr)"},
    {"--max-body", "FEDSVD_MAX_BODY", FS_SVC_U64, OFF(max_body), 0, "4194304", 4096,
     (uint64_t)1 << 32, "largest JSON request body in bytes (share bundles of 1000 parties fit)"},
    {"--max-elements", "FEDSVD_MAX_ELEMENTS", FS_SVC_U64, OFF(max_elements), 0, "268435456", 1,
     (uint64_t)1 << 36, "largest job matrix, rows x cols (the running sum is 8 bytes each)"},
    {"--max-jobs", "FEDSVD_MAX_JOBS", FS_SVC_U32, OFF(max_jobs), 0, "64", 1, 100000,
     "jobs running at once; more are refused with 429"},
    {"--chunk-words", "FEDSVD_CHUNK_WORDS", FS_SVC_U32, OFF(chunk_words), 0, "1048576", 16,
     1u << 22, "uint64 words per masked upload chunk of new jobs (body cap 128 + 8 x this)"},
    {"--upload-buffer", "FEDSVD_UPLOAD_BUFFER", FS_SVC_U64, OFF(upload_buffer), 0, "268435456", 0,
     (uint64_t)1 << 40,
     "bytes of re-sent masked chunk bodies held in memory at once (new chunks stream into the sum "
     "without a buffer; more get 503 + Retry-After)"},
    {"--threads", "FEDSVD_THREADS", FS_SVC_U32, OFF(threads), 0, "8", 1, 256,
     "HTTP worker threads"},
    {"--max-connections", "FEDSVD_MAX_CONNECTIONS", FS_SVC_U32, OFF(max_connections), 0, "512", 4,
     65536, "concurrent HTTP connections"},
    {"--max-connections-per-ip", "FEDSVD_MAX_CONNECTIONS_PER_IP", FS_SVC_U32, OFF(max_per_ip), 0,
     "64", 0, 65536,
     "concurrent connections from one client address (more are closed at once), so that a few "
     "slow clients cannot take them all; 0 = no cap (behind a proxy every client has its "
     "address)"},
    {"--request-timeout-s", "FEDSVD_REQUEST_TIMEOUT_S", FS_SVC_U32, OFF(request_timeout_s), 0,
     "300", 0, 86400,
     "a request's headers and body must arrive within this many seconds, plus 1 s per 64 KiB "
     "of body (chunk uploads at 64 KiB/s or faster always fit); slower clients are "
     "disconnected. 0 = no deadline"},
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
    {"--masking-ca-file", "FEDSVD_MASKING_CA_FILE", FS_SVC_STR, OFF(masking_ca_file),
     SZ(masking_ca_file), "", 0, 0,
     "PEM bundle to verify https masking servers with when a job ends and its mask set is "
     "deleted (default: the system store)"},
    {"--port-file", "FEDSVD_PORT_FILE", FS_SVC_STR, OFF(port_file), SZ(port_file), "", 0, 0,
     "once listening, write the bound port to this file (for --listen HOST:0)"},
    {"--fsync", "FEDSVD_FSYNC", FS_SVC_BOOL, OFF(fsync), 0, "0", 0, 1,
     "1: fsync chunk files and commit SQLite with synchronous=FULL (survives power loss, "
     "slower); 0: survives a killed process"},
    {"--shard-peer URL", "FEDSVD_SHARD_PEERS", FS_SVC_STR, OFF(shard_peers_csv),
     SZ(shard_peers_csv), "", 0, 0,
     "another aggregation server that holds a row range of sharded fedsvd/fedpca jobs created "
     "here (repeat the flag for shards 1, 2, ...; the variable takes a comma-separated list); "
     "https unless on loopback or with --insecure-http"},
    {"--peer-token-file", "FEDSVD_PEER_TOKEN_FILE", FS_SVC_STR, OFF(peer_token_file),
     SZ(peer_token_file), "", 0, 0,
     "file holding the bearer token shard servers present to each other on /v1/shards (the "
     "same file on every shard; mode 0600); without it those routes answer 403"},
    {"--shard-window-ttl-s", "FEDSVD_SHARD_WINDOW_TTL_S", FS_SVC_U32, OFF(shard_window_ttl_s), 0,
     "2592000", 0, 315360000,
     "as a shard peer: remove a window (and its files) that neither its coordinator nor a party "
     "has used for this many seconds, at start and while running (its job ended while the "
     "coordinator could not delete it, or the coordinator is gone); 0 = never"},
    {"--shard-deletion-max-age-s", "FEDSVD_SHARD_DELETION_MAX_AGE_S", FS_SVC_U32,
     OFF(shard_deletion_max_age_s), 0, "2592000", 0, 315360000,
     "as a coordinator: a peer's window deletion that the peer has not taken (it is down or "
     "gone) is sent again with pauses up to 60 s for this many seconds, then given up: kept in "
     "shard-deletions/abandoned/, logged once, counted on /metrics and listed by "
     "GET /v1/shard-deletions (default: the peers' default --shard-window-ttl-s, after which a "
     "peer removes the window itself); 0 = never give up"},
};

#define NOPTS (sizeof OPTS / sizeof OPTS[0])

/* argv with every --shard-peer joined into one --shard-peer=A,B,... (the
 * option table keeps one value per flag). *out: new array (free), its
 * strings borrowed except the joined one (*joined, free). */
static int join_peers(int argc, char **argv, char ***out, int *outc, char **joined,
                      struct fs_err *err)
{
    size_t cap = 32;
    char **v = calloc((size_t)argc + 2, sizeof *v);
    char *j = NULL;
    size_t used;
    int n = 0;
    int k = 0;

    *out = NULL;
    *joined = NULL;
    for (int i = 0; i < argc; i++) {
        cap += strlen(argv[i]) + 1;
    }
    j = calloc(1, cap);
    if (v == NULL || j == NULL) {
        free(v);
        free(j);
        return fs_err_set(err, FS_ENOMEM, "config: out of memory");
    }
    used = (size_t)snprintf(j, cap, "%s", "--shard-peer=");
    for (int i = 0; i < argc; i++) {
        const char *val = NULL;
        if (i > 0 && strcmp(argv[i], "--shard-peer") == 0) {
            if (i + 1 >= argc) {
                free(v);
                free(j);
                return fs_err_set(err, FS_EINVAL, "--shard-peer: missing value");
            }
            val = argv[++i];
        } else if (i > 0 && strncmp(argv[i], "--shard-peer=", 13) == 0) {
            val = argv[i] + 13;
        } else {
            v[k++] = argv[i];
            continue;
        }
        /* cap holds every argument plus a separator each: never truncated */
        used += (size_t)snprintf(j + used, cap - used, "%s%s", n++ > 0 ? "," : "", val);
    }
    if (n > 0) {
        v[k++] = j;
        *joined = j;
    } else {
        free(j);
    }
    *out = v;
    *outc = k;
    return 0;
}

/* Split shard_peers_csv into shard_peers (URLs checked, trailing '/' cut). */
static int split_peers(struct agg_config *cfg, struct fs_err *err)
{
    const char *p = cfg->shard_peers_csv;

    cfg->npeers = 0;
    while (*p != '\0') {
        const char *e = strchr(p, ',');
        size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
        size_t n = len;
        char *u;
        if (n == 0) {
            return fs_err_set(err, FS_EINVAL, "--shard-peer: empty URL");
        }
        if (cfg->npeers >= AGG_MAX_PEERS) {
            return fs_err_set(err, FS_EINVAL, "--shard-peer: at most %d peers", AGG_MAX_PEERS);
        }
        if (n >= AGG_PEER_URL) {
            return fs_err_set(err, FS_EINVAL, "--shard-peer: URL longer than %d bytes",
                              AGG_PEER_URL - 1);
        }
        u = cfg->shard_peers[cfg->npeers];
        memcpy(u, p, n);
        u[n] = '\0';
        while (n > 0 && u[n - 1] == '/') {
            u[--n] = '\0';
        }
        if ((strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) ||
            strpbrk(u, " \"<>\\^`{|}") != NULL) {
            return fs_err_set(err, FS_EINVAL,
                              "--shard-peer: expected an http(s) URL, got \"%.64s\"", u);
        }
        if (fs_http_url_check(u, cfg->insecure_http, err) != 0) {
            return fs_err_set(err, FS_EINVAL, "--shard-peer: %s", err->msg);
        }
        cfg->npeers++;
        p += len + (e != NULL ? 1 : 0);
        if (e != NULL && *p == '\0') {
            return fs_err_set(err, FS_EINVAL, "--shard-peer: empty URL");
        }
    }
    return 0;
}

int agg_config_parse(int argc, char **argv, struct agg_config *cfg, struct fs_err *err)
{
    int rc;

    char **v = NULL;
    char *joined = NULL;
    int vc = 0;

    memset(cfg, 0, sizeof *cfg);
    rc = join_peers(argc, argv, &v, &vc, &joined, err);
    if (rc == 0) {
        rc = fs_svc_opts_parse(OPTS, NOPTS, cfg, vc, v, &cfg->help, err);
    }
    free(v);
    free(joined);
    if (rc != 0) {
        return rc;
    }
    if (cfg->help) {
        return 0;
    }
    rc = split_peers(cfg, err);
    if (rc != 0) {
        return rc;
    }
    return fs_svc_check_admin_tls(cfg->admin_token_file, cfg->tls_cert, cfg->tls_key, err);
}

void agg_config_usage(FILE *out)
{
    fs_svc_opts_usage(
        out,
        "usage: aggregation-server [--flag value | --flag=value]...\n"
        "\n"
        "Coordinates fedsvd jobs: the server side of secure aggregation, job state in\n"
        "SQLite, results. Flags override FEDSVD_* environment variables, which override\n"
        "the defaults. SIGTERM/SIGINT stop it cleanly; running jobs of every algorithm\n"
        "resume on restart, also after kill -9. The data directory holds server.key\n"
        "(0600), which seals the secrets of running power-method jobs: keep it with\n"
        "the directory.\n"
        "\n",
        OPTS, NOPTS);
}
