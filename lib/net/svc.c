/* Service configuration, port file and openapi.yaml: see svc.h. */
#include "svc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/fdio.h"
#include "../core/version.h"
#include "http_client.h"
#include "log.h"

static int set_bool(void *field, const char *val, const char *src, struct fs_err *err)
{
    int b;

    if (strcmp(val, "1") == 0 || strcasecmp(val, "true") == 0 || strcasecmp(val, "yes") == 0) {
        b = 1;
    } else if (strcmp(val, "0") == 0 || strcasecmp(val, "false") == 0 ||
               strcasecmp(val, "no") == 0) {
        b = 0;
    } else {
        return fs_err_set(err, FS_EINVAL, "%s: expected 0 or 1", src);
    }
    memcpy(field, &b, sizeof b);
    return 0;
}

static int set_uint(const struct fs_svc_opt *o, void *field, const char *val, const char *src,
                    struct fs_err *err)
{
    char *end = NULL;
    unsigned long long x;

    if (val[0] < '0' || val[0] > '9') {
        return fs_err_set(err, FS_EINVAL, "%s: expected a number", src);
    }
    errno = 0;
    x = strtoull(val, &end, 10);
    if (errno != 0 || end == val || *end != '\0' || x < o->lo || x > o->hi ||
        (o->kind == FS_SVC_U32 && x > UINT32_MAX)) {
        return fs_err_set(err, FS_EINVAL, "%s: expected an integer in %llu..%llu", src,
                          (unsigned long long)o->lo, (unsigned long long)o->hi);
    }
    if (o->kind == FS_SVC_U64) {
        uint64_t v = x;
        memcpy(field, &v, sizeof v);
    } else {
        uint32_t v = (uint32_t)x;
        memcpy(field, &v, sizeof v);
    }
    return 0;
}

/* src names where val came from, for the message. */
static int set_opt(const struct fs_svc_opt *o, void *cfg, const char *val, const char *src,
                   struct fs_err *err)
{
    char *field = (char *)cfg + o->off;

    switch (o->kind) {
    case FS_SVC_STR:
        if (strlen(val) >= o->size) {
            return fs_err_set(err, FS_EINVAL, "%s: value longer than %zu bytes", src, o->size - 1);
        }
        memcpy(field, val, strlen(val) + 1);
        return 0;
    case FS_SVC_LEVEL: {
        enum fs_log_level lv;
        if (fs_log_level_parse(val, &lv, err) != 0) {
            return fs_err_set(err, FS_EINVAL, "%s: expected debug, info, warn, error or off", src);
        }
        memcpy(field, &lv, sizeof lv);
        return 0;
    }
    case FS_SVC_BOOL:
        return set_bool(field, val, src, err);
    case FS_SVC_U64:
    case FS_SVC_U32:
        return set_uint(o, field, val, src, err);
    }
    return fs_err_set(err, FS_EINTERNAL, "config: bad option kind");
}

static int is_bool_word(const char *v)
{
    static const char *const words[] = {"0", "1", "true", "false", "yes", "no"};

    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (strcasecmp(v, words[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Length of the flag's name: "--listen HOST:PORT" names --listen. */
static int flag_len(const char *flag)
{
    return (int)strcspn(flag, " ");
}

/* The table entry argument a names (--flag or --flag=value), or nopts. */
static size_t find_flag(const struct fs_svc_opt *opts, size_t nopts, const char *a)
{
    for (size_t k = 0; k < nopts; k++) {
        size_t fl = (size_t)flag_len(opts[k].flag);
        if (strncmp(a, opts[k].flag, fl) == 0 && (a[fl] == '\0' || a[fl] == '=')) {
            return k;
        }
    }
    return nopts;
}

/* 1 when entry j is entry k or another spelling of it (no default, same field). */
static int same_opt(const struct fs_svc_opt *opts, size_t k, size_t j)
{
    return j == k || (opts[j].def == NULL && opts[j].off == opts[k].off);
}

/* The value of entry k (and its other spellings): the last flag given, else
 * the first environment variable set, else the default; src names it. */
static const char *resolve(const struct fs_svc_opt *opts, size_t nopts, size_t k,
                           const char *const *given, const int *pos, char *src, size_t cap)
{
    const char *val = NULL;
    int best = 0;

    for (size_t j = k; j < nopts; j++) {
        if (same_opt(opts, k, j) && given[j] != NULL && pos[j] > best) {
            val = given[j];
            best = pos[j];
            snprintf(src, cap, "%.*s", flag_len(opts[j].flag), opts[j].flag);
        }
    }
    for (size_t j = k; j < nopts && val == NULL; j++) {
        const char *e = same_opt(opts, k, j) ? getenv(opts[j].env) : NULL;
        if (e != NULL && e[0] != '\0') {
            val = e;
            snprintf(src, cap, "%s", opts[j].env);
        }
    }
    if (val == NULL) {
        val = opts[k].def;
        snprintf(src, cap, "default of %.*s", flag_len(opts[k].flag), opts[k].flag);
    }
    return val;
}

int fs_svc_opts_parse(const struct fs_svc_opt *opts, size_t nopts, void *cfg, int argc, char **argv,
                      int *help, struct fs_err *err)
{
    const char **given = calloc(nopts > 0 ? nopts : 1, sizeof *given);
    int *pos = calloc(nopts > 0 ? nopts : 1, sizeof *pos);
    int rc = 0;

    if (given == NULL || pos == NULL) {
        free(given);
        free(pos);
        return fs_err_set(err, FS_ENOMEM, "config: out of memory");
    }
    *help = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        size_t k;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *help = 1;
            continue;
        }
        k = find_flag(opts, nopts, a);
        if (k < nopts) {
            pos[k] = i;
        }
        if (k == nopts) {
            rc = fs_err_set(err, FS_EINVAL, "unknown argument \"%.64s\" (see --help)", a);
        } else if (eq != NULL) {
            given[k] = eq + 1;
        } else if (opts[k].kind == FS_SVC_BOOL && (i + 1 >= argc || !is_bool_word(argv[i + 1]))) {
            given[k] = "1"; /* a bare boolean flag: --insecure-http */
        } else if (i + 1 < argc) {
            given[k] = argv[++i];
        } else {
            rc = fs_err_set(err, FS_EINVAL, "%.*s: missing value", flag_len(opts[k].flag),
                            opts[k].flag);
        }
    }
    for (size_t k = 0; k < nopts && rc == 0; k++) {
        char src[96];
        const char *val;
        if (opts[k].def == NULL) {
            continue; /* another spelling: set with the entry it follows */
        }
        val = resolve(opts, nopts, k, given, pos, src, sizeof src);
        rc = set_opt(&opts[k], cfg, val, src, err);
    }
    free(given);
    free(pos);
    return rc;
}

int fs_svc_check_admin_tls(const char *admin_token_file, const char *tls_cert, const char *tls_key,
                           struct fs_err *err)
{
    if (admin_token_file[0] == '\0') {
        return fs_err_set(err, FS_EINVAL,
                          "--admin-token-file (FEDSVD_ADMIN_TOKEN_FILE) is required");
    }
    if ((tls_cert[0] == '\0') != (tls_key[0] == '\0')) {
        return fs_err_set(err, FS_EINVAL, "--tls-cert and --tls-key go together");
    }
    return 0;
}

void fs_svc_opts_usage(FILE *out, const char *intro, const struct fs_svc_opt *opts, size_t nopts)
{
    fputs(intro, out);
    for (size_t k = 0; k < nopts; k++) {
        if (opts[k].def == NULL) { /* another spelling of the entry with the same field */
            size_t p = 0;
            while (p < k && (opts[p].off != opts[k].off || opts[p].def == NULL)) {
                p++;
            }
            fprintf(out, "  %-20s %-26s the same as %.*s\n", opts[k].flag, opts[k].env,
                    flag_len(opts[p].flag), opts[p].flag);
            continue;
        }
        fprintf(out, "  %-20s %-26s default: %s\n      %s\n", opts[k].flag, opts[k].env,
                opts[k].def[0] != '\0' ? opts[k].def : "(none)", opts[k].help);
    }
    fprintf(out, "  %-20s show this help\n", "--help");
    fprintf(out, "  %-20s print the version\n", "--version");
}

json_t *fs_svc_health_doc(void)
{
    json_t *j = json_pack("{s:s, s:s}", "status", "ok", "version", fs_version());

    if (j != NULL && fs_revision()[0] != '\0' &&
        json_object_set_new(j, "revision", json_string(fs_revision())) != 0) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

int fs_svc_version_flag(const char *name, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            printf("%s %s\n", name, fs_version_string());
            return 1;
        }
    }
    return 0;
}

int fs_svc_write_port_file(const char *path, uint16_t port, struct fs_err *err)
{
    char buf[16];
    int n = snprintf(buf, sizeof buf, "%u\n", (unsigned)port);

    return fs_write_file_atomic(path, buf, (size_t)n, err);
}

const char *fs_svc_find_openapi(const char *flag, char *out, size_t cap)
{
    static const char *const cands[] = {"../../openapi.yaml", "../share/fedsvd/openapi.yaml"};
    char exe[PATH_MAX];
    ssize_t n;

    if (cap == 0) {
        return NULL;
    }
    out[0] = '\0';
    if (flag != NULL && flag[0] != '\0') {
        if (strlen(flag) >= cap) {
            return NULL;
        }
        snprintf(out, cap, "%s", flag);
        return out;
    }
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        char *slash;
        exe[n] = '\0';
        slash = strrchr(exe, '/');
        if (slash != NULL) {
            *slash = '\0';
            for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
                if (snprintf(out, cap, "%s/%s", exe, cands[i]) < (int)cap &&
                    access(out, R_OK) == 0) {
                    return out;
                }
            }
        }
    }
    if (access("/usr/share/fedsvd/openapi.yaml", R_OK) == 0 &&
        snprintf(out, cap, "/usr/share/fedsvd/openapi.yaml") < (int)cap) {
        return out;
    }
    out[0] = '\0';
    return NULL;
}

int fs_svc_check_listen(const char *host, int tls, int insecure_http, struct fs_err *err)
{
    if (tls || fs_http_host_is_loopback(host)) {
        return 0;
    }
    if (!insecure_http) {
        return fs_err_set(err, FS_EINVAL,
                          "refusing to listen on %.100s without TLS: tokens and data would "
                          "cross the network unencrypted. Give --tls-cert and --tls-key, listen "
                          "on a loopback address (127.0.0.1, ::1) behind a TLS-terminating "
                          "proxy, or pass --insecure-http (FEDSVD_INSECURE_HTTP=1) on a network "
                          "you trust",
                          host);
    }
    fs_log_pack(FS_LOG_WARN,
                "plain HTTP on a non-loopback address (--insecure-http): tokens and data cross "
                "the network unencrypted",
                "{s:s}", "host", host);
    return 0;
}

/* path with group or other permission bits: chmod to the owner's bits,
 * warning that it was done. A file that does not exist is fine. */
static int tighten(const char *path, mode_t keep, const char *what, struct fs_err *err)
{
    struct stat sb;
    char was[8];
    char now[8];

    if (stat(path, &sb) != 0) {
        return errno == ENOENT ? 0 : fs_err_set(err, FS_EIO, "%s: %s", path, strerror(errno));
    }
    if ((sb.st_mode & 077) == 0) {
        return 0;
    }
    if (chmod(path, sb.st_mode & keep) != 0) {
        if (errno != EPERM) {
            return fs_err_set(err, FS_EIO, "%s is open to other users and chmod failed: %s", path,
                              strerror(errno));
        }
        /* not its owner (e.g. a volume root given to the service's group) */
        snprintf(was, sizeof was, "%04o", (unsigned)(sb.st_mode & 07777));
        fs_log_pack(FS_LOG_WARN, "open to other users and not ours to make private", "{s:s, s:s}",
                    "path", path, "mode", was);
        return 0;
    }
    snprintf(was, sizeof was, "%04o", (unsigned)(sb.st_mode & 07777));
    snprintf(now, sizeof now, "%04o", (unsigned)(sb.st_mode & keep));
    fs_log_pack(FS_LOG_WARN, what, "{s:s, s:s, s:s}", "path", path, "mode_was", was, "mode", now);
    return 0;
}

int fs_svc_private_dir(const char *path, struct fs_err *err)
{
    struct stat sb;
    int rc = fs_mkdir_p(path, err); /* new directories are 0700 */

    if (rc != 0) {
        return rc;
    }
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        return fs_err_set(err, FS_EIO, "%s: not a directory", path);
    }
    return tighten(path, 0700, "data directory was open to other users: made it private", err);
}

int fs_svc_db_open(const char *path, int fsync_full, const char *schema, sqlite3 **out,
                   struct fs_err *err)
{
    static const char *const sfx[] = {"-wal", "-shm", "-journal"};
    sqlite3 *db = NULL;
    char *msg = NULL;
    char side[PATH_MAX + 16];
    int rc = 0;
    int fd = -1;

    *out = NULL;
    /* The database holds the service's secrets: create it 0600 before SQLite
     * does (it creates -wal and -shm with the database's permissions), and
     * make an existing one private, with its side files. */
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        return fs_err_set(err, FS_EIO, "%s: cannot open: %s", path, strerror(errno));
    }
    close(fd);
    rc = tighten(path, 0600, "database was open to other users: made it private", err);
    for (size_t i = 0; rc == 0 && i < sizeof sfx / sizeof sfx[0]; i++) {
        if (snprintf(side, sizeof side, "%s%s", path, sfx[i]) < (int)sizeof side) {
            rc = tighten(side, 0600, "database file was open to other users: made it private", err);
        }
    }
    if (rc != 0) {
        return rc;
    }
    if (sqlite3_open_v2(path, &db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        NULL) != SQLITE_OK) {
        rc = fs_err_set(err, FS_EIO, "%s: cannot open: %s", path,
                        db != NULL ? sqlite3_errmsg(db) : "out of memory");
        goto out;
    }
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_exec(db, "PRAGMA journal_mode=WAL;", NULL, NULL, &msg) != SQLITE_OK ||
        sqlite3_exec(db, fsync_full ? "PRAGMA synchronous=FULL;" : "PRAGMA synchronous=NORMAL;",
                     NULL, NULL, &msg) != SQLITE_OK ||
        sqlite3_exec(db, "PRAGMA foreign_keys=ON;", NULL, NULL, &msg) != SQLITE_OK ||
        sqlite3_exec(db, schema, NULL, NULL, &msg) != SQLITE_OK) {
        rc = fs_err_set(err, FS_EIO, "%s: %s", path, msg != NULL ? msg : sqlite3_errmsg(db));
        goto out;
    }
out:
    sqlite3_free(msg);
    if (rc != 0) {
        sqlite3_close_v2(db); /* accepts NULL */
        return rc;
    }
    *out = db;
    return 0;
}

/* The thread that blocked SIGTERM/SIGINT and waits for them. */
static pthread_t svc_waiter;

/* Threads that a library started before main() blocked the signals (OpenBLAS
 * starts its workers from a constructor) still have them unblocked, so the
 * kernel may deliver a SIGTERM there, whose default action would kill the
 * process before the orderly shutdown. This handler only ever runs in such a
 * thread: it hands the signal on to the waiting thread, where it stays
 * pending (blocked) until sigwait takes it. */
static void svc_forward_signal(int sig)
{
    int saved = errno;

    pthread_kill(svc_waiter, sig);
    errno = saved;
}

void fs_svc_block_signals(sigset_t *sigs)
{
    struct sigaction sa;

    sigemptyset(sigs);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    svc_waiter = pthread_self();
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = svc_forward_signal;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* over a file-size limit (RLIMIT_FSIZE) write() fails with EFBIG, a
     * storage error the service answers 503 for, instead of killing it */
    signal(SIGXFSZ, SIG_IGN);
}

int fs_svc_wait_signal(const sigset_t *sigs)
{
    int sig = 0;

    while (sigwait(sigs, &sig) != 0) {
    }
    fs_log_pack(FS_LOG_INFO, "shutting down", "{s:s}", "signal",
                sig == SIGTERM  ? "SIGTERM"
                : sig == SIGINT ? "SIGINT"
                                : "other");
    return sig;
}

void fs_svc_base_url(char *out, size_t cap, int tls, const char *host, uint16_t port)
{
    char name[256];
    int v6;

    /* A wildcard is no address a client can use: the machine's name is the
     * best guess for clients on other hosts (loopback would only ever work
     * on this one). --public-url overrides all of this. */
    if ((strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) &&
        gethostname(name, sizeof name) == 0 && memchr(name, '\0', sizeof name) != NULL &&
        name[0] != '\0') {
        host = name;
    }
    v6 = strchr(host, ':') != NULL;
    snprintf(out, cap, "%s://%s%s%s:%u", tls ? "https" : "http", v6 ? "[" : "", host, v6 ? "]" : "",
             (unsigned)port);
}

/* The inode of the IPv4 socket listening on 127.0.0.1:port (or 0.0.0.0),
 * from /proc/net/tcp; 0 when there is none, -1 when the table is not there. */
static long long listen_inode(uint16_t port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    long long found = 0;

    if (f == NULL) {
        return -1;
    }
    if (fgets(line, sizeof line, f) == NULL) { /* the header */
        fclose(f);
        return -1;
    }
    while (found == 0 && fgets(line, sizeof line, f) != NULL) {
        unsigned addr, lport, st;
        unsigned long long inode;

        /* "sl: local rem st tx:rx tr:when retrnsmt uid timeout inode" */
        if (sscanf(line, " %*u: %x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %llu", &addr, &lport,
                   &st, &inode) == 4 &&
            lport == port && st == 0x0A && (addr == 0x0100007Fu || addr == 0)) {
            found = (long long)inode;
        }
    }
    fclose(f);
    return found;
}

int fs_svc_pid_listens(pid_t pid, uint16_t port)
{
    char dir[64], path[384], target[64], want[64];
    long long inode = listen_inode(port);
    DIR *d;
    struct dirent *e;
    int owns = 0;

    if (inode < 0) {
        return -1;
    }
    if (inode == 0) {
        return 0;
    }
    snprintf(want, sizeof want, "socket:[%lld]", inode);
    snprintf(dir, sizeof dir, "/proc/%ld/fd", (long)pid);
    d = opendir(dir);
    if (d == NULL) {
        return errno == ENOENT ? 0 : -1;
    }
    while (!owns && (e = readdir(d)) != NULL) {
        ssize_t n;

        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        n = readlink(path, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            owns = strcmp(target, want) == 0;
        }
    }
    closedir(d);
    return owns;
}
