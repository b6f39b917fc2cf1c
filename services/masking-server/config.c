/* Flags, then FEDSVD_* environment variables, then defaults. */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum opt_kind { O_STR, O_U64, O_U32, O_LEVEL, O_BOOL };

struct opt {
    const char *flag;
    const char *env;
    enum opt_kind kind;
    size_t off;  /* into struct msk_config */
    size_t size; /* of a string buffer */
    const char *def;
    uint64_t lo, hi;
    const char *help;
};

#define OFF(f) offsetof(struct msk_config, f)
#define SZ(f)  sizeof(((struct msk_config *)0)->f)

static const struct opt OPTS[] = {
    {"--listen", "FEDSVD_LISTEN", O_STR, OFF(listen), SZ(listen), "127.0.0.1:8445", 0, 0,
     "address to listen on, HOST:PORT, [IPv6]:PORT or :PORT (all interfaces); port 0 = any"},
    {"--data-dir", "FEDSVD_DATA_DIR", O_STR, OFF(data_dir), SZ(data_dir), "./masking-data", 0, 0,
     "state directory (0700): masking.db (SQLite, WAL) and seeds/<maskset>.seed (0600)"},
    {"--admin-token-file", "FEDSVD_ADMIN_TOKEN_FILE", O_STR, OFF(admin_token_file),
     SZ(admin_token_file), "", 0, 0,
     "file holding the admin bearer token (mode 0600; required): creates, lists and deletes "
     "mask sets (it cannot download keys)"},
    {"--port-file", "FEDSVD_PORT_FILE", O_STR, OFF(port_file), SZ(port_file), "", 0, 0,
     "once listening, write the bound port to this file (for --listen HOST:0)"},
    {"--log-level", "FEDSVD_LOG_LEVEL", O_LEVEL, OFF(log_level), 0, "info", 0, 0,
     "debug, info, warn, error or off (JSON lines on stderr)"},
    {"--max-parties", "FEDSVD_MAX_PARTIES", O_U32, OFF(max_parties), 0, "1000", 1, 1000,
     "most parties in one mask set"},
    {"--max-dim", "FEDSVD_MAX_DIM", O_U64, OFF(max_dim), 0, "1048576", 1, 2147483647,
     "largest rows and largest cols of a mask set"},
    {"--max-key-bytes", "FEDSVD_MAX_KEY_BYTES", O_U64, OFF(max_key_bytes), 0, "1073741824", 4096,
     (uint64_t)1 << 40,
     "largest total of one party's .npy key files (the slab of A: about 8 x block x the "
     "party's rows); bounds the memory of a generation and of the agent's download"},
    {"--keygen-concurrency", "FEDSVD_KEYGEN_CONCURRENCY", O_U32, OFF(keygen_concurrency), 0, "1", 1,
     256,
     "key generations running at once (each holds about 2 x its key files in memory, and "
     "each already uses every core through the multi-threaded BLAS)"},
    {"--keys-cache-bytes", "FEDSVD_KEYS_CACHE_BYTES", O_U64, OFF(keys_cache_bytes), 0, "4294967296",
     0, (uint64_t)1 << 44,
     "memory for generated key files kept until their party has fetched them all (least "
     "recently used dropped first; the newest entry is always kept)"},
    {"--keys-cache-ttl-s", "FEDSVD_KEYS_CACHE_TTL_S", O_U32, OFF(keys_cache_ttl_s), 0, "600", 1,
     86400, "drop a party's generated key files when unused for this long"},
    {"--max-connections", "FEDSVD_MAX_CONNECTIONS", O_U32, OFF(max_connections), 0, "128", 4, 4096,
     "concurrent HTTP connections (one thread each)"},
    {"--idle-timeout-s", "FEDSVD_IDLE_TIMEOUT_S", O_U32, OFF(idle_timeout_s), 0, "30", 1, 3600,
     "close a connection that sends nothing for this long (a key download being generated is "
     "not idle)"},
    {"--shutdown-grace-ms", "FEDSVD_SHUTDOWN_GRACE_MS", O_U32, OFF(shutdown_grace_ms), 0, "5000", 0,
     600000, "on SIGTERM/SIGINT, how long requests in flight may take to finish"},
    {"--openapi", "FEDSVD_OPENAPI", O_STR, OFF(openapi), SZ(openapi), "", 0, 0,
     "openapi.yaml served at /openapi.yaml (default: the repository's, found from the binary's "
     "path, or /usr/share/fedsvd/openapi.yaml)"},
    {"--tls-cert", "FEDSVD_TLS_CERT", O_STR, OFF(tls_cert), SZ(tls_cert), "", 0, 0,
     "PEM certificate: serve HTTPS (with --tls-key)"},
    {"--tls-key", "FEDSVD_TLS_KEY", O_STR, OFF(tls_key), SZ(tls_key), "", 0, 0,
     "PEM private key (unencrypted) for --tls-cert"},
    {"--fsync", "FEDSVD_FSYNC", O_BOOL, OFF(fsync), 0, "0", 0, 1,
     "1: commit SQLite with synchronous=FULL (survives power loss); seed files are always "
     "fsynced"},
};

#define NOPTS (sizeof OPTS / sizeof OPTS[0])

static int set_opt(struct msk_config *cfg, const struct opt *o, const char *val, const char *src,
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

int msk_config_parse(int argc, char **argv, struct msk_config *cfg, struct fs_err *err)
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

void msk_config_usage(FILE *out)
{
    fprintf(out, "usage: masking-server [--flag value | --flag=value]...\n"
                 "\n"
                 "Creates the secret random orthogonal masks of FedSVD jobs and hands each party\n"
                 "only its own keys (docs/wire-fedsvd.md). Master seeds stay under --data-dir\n"
                 "(mode 0600). Flags override FEDSVD_* environment variables, which override the\n"
                 "defaults. SIGTERM/SIGINT stop it cleanly.\n"
                 "\n");
    for (size_t k = 0; k < NOPTS; k++) {
        fprintf(out, "  %-20s %-26s default: %s\n      %s\n", OPTS[k].flag, OPTS[k].env,
                OPTS[k].def[0] != '\0' ? OPTS[k].def : "(none)", OPTS[k].help);
    }
    fprintf(out, "  %-20s show this help\n", "--help");
}
