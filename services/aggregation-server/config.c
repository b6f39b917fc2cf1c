/* Flags, then FEDSVD_* environment variables, then defaults. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum opt_kind { O_STR, O_U64, O_U32, O_LEVEL, O_BOOL };

struct opt {
    const char *flag;
    const char *env;
    enum opt_kind kind;
    size_t off;  /* into struct agg_config */
    size_t size; /* of a string buffer */
    const char *def;
    uint64_t lo, hi;
    const char *help;
};

#define OFF(f) offsetof(struct agg_config, f)
#define SZ(f)  sizeof(((struct agg_config *)0)->f)

static const struct opt OPTS[] = {
    {"--listen", "FEDSVD_LISTEN", O_STR, OFF(listen), SZ(listen), "127.0.0.1:8443", 0, 0,
     "address to listen on, HOST:PORT, [IPv6]:PORT or :PORT (all interfaces); port 0 = any"},
    {"--data-dir", "FEDSVD_DATA_DIR", O_STR, OFF(data_dir), SZ(data_dir), "./aggsrv-data", 0, 0,
     "state directory: server.db (SQLite, WAL) and jobs/<id>/ (chunks, results)"},
    {"--admin-token-file", "FEDSVD_ADMIN_TOKEN_FILE", O_STR, OFF(admin_token_file),
     SZ(admin_token_file), "", 0, 0,
     "file holding the admin bearer token (mode 0600; required): creates and lists jobs"},
    {"--log-level", "FEDSVD_LOG_LEVEL", O_LEVEL, OFF(log_level), 0, "info", 0, 0,
     "debug, info, warn, error or off (JSON lines on stderr)"},
    {"--max-body", "FEDSVD_MAX_BODY", O_U64, OFF(max_body), 0, "4194304", 4096, (uint64_t)1 << 32,
     "largest JSON request body in bytes (share bundles of 1000 parties fit)"},
    {"--max-elements", "FEDSVD_MAX_ELEMENTS", O_U64, OFF(max_elements), 0, "268435456", 1,
     (uint64_t)1 << 36, "largest job matrix, rows x cols (the running sum is 8 bytes each)"},
    {"--max-jobs", "FEDSVD_MAX_JOBS", O_U32, OFF(max_jobs), 0, "64", 1, 100000,
     "jobs running at once; more are refused with 429"},
    {"--chunk-words", "FEDSVD_CHUNK_WORDS", O_U32, OFF(chunk_words), 0, "1048576", 16, 1u << 22,
     "uint64 words per masked upload chunk of new jobs (body cap 128 + 8 x this)"},
    {"--upload-buffer", "FEDSVD_UPLOAD_BUFFER", O_U64, OFF(upload_buffer), 0, "268435456", 0,
     (uint64_t)1 << 40,
     "bytes of masked chunk bodies held in memory at once (more uploads get 503 + Retry-After)"},
    {"--threads", "FEDSVD_THREADS", O_U32, OFF(threads), 0, "8", 1, 256, "HTTP worker threads"},
    {"--max-connections", "FEDSVD_MAX_CONNECTIONS", O_U32, OFF(max_connections), 0, "512", 4, 65536,
     "concurrent HTTP connections"},
    {"--shutdown-grace-ms", "FEDSVD_SHUTDOWN_GRACE_MS", O_U32, OFF(shutdown_grace_ms), 0, "5000", 0,
     600000, "on SIGTERM/SIGINT, how long requests in flight may take to finish"},
    {"--openapi", "FEDSVD_OPENAPI", O_STR, OFF(openapi), SZ(openapi), "", 0, 0,
     "openapi.yaml served at /openapi.yaml (default: the repository's, found from the binary's "
     "path, or /usr/share/fedsvd/openapi.yaml)"},
    {"--tls-cert", "FEDSVD_TLS_CERT", O_STR, OFF(tls_cert), SZ(tls_cert), "", 0, 0,
     "PEM certificate: serve HTTPS (with --tls-key)"},
    {"--tls-key", "FEDSVD_TLS_KEY", O_STR, OFF(tls_key), SZ(tls_key), "", 0, 0,
     "PEM private key (unencrypted) for --tls-cert"},
    {"--port-file", "FEDSVD_PORT_FILE", O_STR, OFF(port_file), SZ(port_file), "", 0, 0,
     "once listening, write the bound port to this file (for --listen HOST:0)"},
    {"--fsync", "FEDSVD_FSYNC", O_BOOL, OFF(fsync), 0, "0", 0, 1,
     "1: fsync chunk files and commit SQLite with synchronous=FULL (survives power loss, "
     "slower); 0: survives a killed process"},
};

#define NOPTS (sizeof OPTS / sizeof OPTS[0])

static int set_opt(struct agg_config *cfg, const struct opt *o, const char *val, const char *src,
                   struct fs_err *err)
{
    char *base = (char *)cfg + o->off;

    switch (o->kind) {
    case O_STR:
        if (strlen(val) >= o->size) {
            return fs_err_set(err, FS_EINVAL, "%s: value longer than %zu bytes", src, o->size - 1);
        }
        memcpy(base, val, strlen(val) + 1);
        return 0;
    case O_LEVEL: {
        enum fs_log_level lv;
        if (fs_log_level_parse(val, &lv, err) != 0) {
            return fs_err_set(err, FS_EINVAL, "%s: expected debug, info, warn, error or off", src);
        }
        memcpy(base, &lv, sizeof lv);
        return 0;
    }
    case O_BOOL: {
        int b;
        if (strcmp(val, "1") == 0 || strcmp(val, "true") == 0 || strcmp(val, "yes") == 0) {
            b = 1;
        } else if (strcmp(val, "0") == 0 || strcmp(val, "false") == 0 || strcmp(val, "no") == 0) {
            b = 0;
        } else {
            return fs_err_set(err, FS_EINVAL, "%s: expected 0 or 1", src);
        }
        memcpy(base, &b, sizeof b);
        return 0;
    }
    case O_U64:
    case O_U32: {
        char *end = NULL;
        unsigned long long x;
        if (val[0] < '0' || val[0] > '9') {
            return fs_err_set(err, FS_EINVAL, "%s: expected a number", src);
        }
        errno = 0;
        x = strtoull(val, &end, 10);
        if (errno != 0 || end == val || *end != '\0' || x < o->lo || x > o->hi) {
            return fs_err_set(err, FS_EINVAL, "%s: expected an integer in %llu..%llu", src,
                              (unsigned long long)o->lo, (unsigned long long)o->hi);
        }
        if (o->kind == O_U64) {
            uint64_t v = x;
            memcpy(base, &v, sizeof v);
        } else {
            uint32_t v = (uint32_t)x;
            memcpy(base, &v, sizeof v);
        }
        return 0;
    }
    }
    return fs_err_set(err, FS_EINTERNAL, "config: bad option kind");
}

int agg_config_parse(int argc, char **argv, struct agg_config *cfg, struct fs_err *err)
{
    const char *given[NOPTS];
    int rc;

    memset(cfg, 0, sizeof *cfg);
    memset(given, 0, sizeof given);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        size_t k;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cfg->help = 1;
            continue;
        }
        for (k = 0; k < NOPTS; k++) {
            size_t fl = strlen(OPTS[k].flag);
            if (strncmp(a, OPTS[k].flag, fl) == 0 && (a[fl] == '\0' || a[fl] == '=')) {
                break;
            }
        }
        if (k == NOPTS) {
            return fs_err_set(err, FS_EINVAL, "unknown argument \"%.64s\" (see --help)", a);
        }
        if (strchr(a, '=') != NULL) {
            val = strchr(a, '=') + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            return fs_err_set(err, FS_EINVAL, "%s: missing value", OPTS[k].flag);
        }
        given[k] = val;
    }
    for (size_t k = 0; k < NOPTS; k++) {
        const char *val = given[k];
        char src[64];
        snprintf(src, sizeof src, "%s", OPTS[k].flag);
        if (val == NULL) {
            val = getenv(OPTS[k].env);
            if (val != NULL && val[0] == '\0') {
                val = NULL;
            }
            snprintf(src, sizeof src, "%s", OPTS[k].env);
        }
        if (val == NULL) {
            val = OPTS[k].def;
            snprintf(src, sizeof src, "default of %s", OPTS[k].flag);
        }
        rc = set_opt(cfg, &OPTS[k], val, src, err);
        if (rc != 0) {
            return rc;
        }
    }
    if (cfg->help) {
        return 0;
    }
    if (cfg->admin_token_file[0] == '\0') {
        return fs_err_set(err, FS_EINVAL,
                          "--admin-token-file (FEDSVD_ADMIN_TOKEN_FILE) is "
                          "required");
    }
    if ((cfg->tls_cert[0] == '\0') != (cfg->tls_key[0] == '\0')) {
        return fs_err_set(err, FS_EINVAL, "--tls-cert and --tls-key go together");
    }
    return 0;
}

void agg_config_usage(FILE *out)
{
    fprintf(out, "usage: aggregation-server [--flag value | --flag=value]...\n"
                 "\n"
                 "Coordinates fedsvd jobs: the server side of secure aggregation, job state in\n"
                 "SQLite, results. Flags override FEDSVD_* environment variables, which override\n"
                 "the defaults. SIGTERM/SIGINT stop it cleanly; running jobs resume on restart.\n"
                 "\n");
    for (size_t k = 0; k < NOPTS; k++) {
        fprintf(out, "  %-20s %-26s default: %s\n      %s\n", OPTS[k].flag, OPTS[k].env,
                OPTS[k].def[0] != '\0' ? OPTS[k].def : "(none)", OPTS[k].help);
    }
    fprintf(out, "  %-20s show this help\n", "--help");
}
