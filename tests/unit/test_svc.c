/* What the services share outside their APIs: the flag / environment /
 * default table (net/svc.h), the port file, openapi.yaml's location, the
 * data directory and atomic file replacement (core/fdio.h), the SQLite
 * set-up, and the HTTP counters and text buffer of /metrics (net/metrics.h). */
#include "core/fdio.h"
#include "net/db.h"
#include "net/log.h"
#include "net/metrics.h"
#include "net/reply.h"
#include "net/storage.h"
#include "net/svc.h"
#include "test.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[64];

struct cfg {
    char name[8];
    char path[64];
    uint64_t big;
    uint32_t small;
    enum fs_log_level level;
    int flag;
    int help;
};

#define OFF(f) offsetof(struct cfg, f)
#define SZ(f)  sizeof(((struct cfg *)0)->f)

static const struct fs_svc_opt OPTS[] = {
    {"--name", "FSTEST_NAME", FS_SVC_STR, OFF(name), SZ(name), "abc", 0, 0, "a short name"},
    {"--path", "FSTEST_PATH", FS_SVC_STR, OFF(path), SZ(path), "", 0, 0, "a path"},
    {"--big", "FSTEST_BIG", FS_SVC_U64, OFF(big), 0, "4096", 16, (uint64_t)1 << 40, "a size"},
    {"--small", "FSTEST_SMALL", FS_SVC_U32, OFF(small), 0, "8", 1, 100, "a count"},
    {"--log-level", "FSTEST_LOG_LEVEL", FS_SVC_LEVEL, OFF(level), 0, "info", 0, 0, "a level"},
    {"--flag", "FSTEST_FLAG", FS_SVC_BOOL, OFF(flag), 0, "0", 0, 1, "a switch"},
};

#define NOPTS (sizeof OPTS / sizeof OPTS[0])

/* Parse a NULL-terminated argument list (argv[0] added) into *c. */
static int parse(struct cfg *c, struct fs_err *err, const char **args)
{
    char *argv[16];
    int argc = 0;

    argv[argc++] = (char *)"svc";
    while (args[argc - 1] != NULL && argc < 16) {
        argv[argc] = (char *)args[argc - 1];
        argc++;
    }
    memset(c, 0, sizeof *c);
    memset(err, 0, sizeof *err);
    return fs_svc_opts_parse(OPTS, NOPTS, c, argc, argv, &c->help, err);
}

static void clear_env(void)
{
    for (size_t k = 0; k < NOPTS; k++) {
        unsetenv(OPTS[k].env);
    }
}

static void test_opts_defaults_env_flags(void)
{
    struct fs_err err;
    struct cfg c;
    const char *none[] = {NULL};
    const char *flags[] = {"--name",     "xyz", "--big=1099511627776", "--log-level", "debug",
                           "--flag=yes", NULL};

    clear_env();
    CHECK_OK(parse(&c, &err, none), &err);
    CHECK(strcmp(c.name, "abc") == 0 && c.path[0] == '\0');
    CHECK(c.big == 4096 && c.small == 8 && c.level == FS_LOG_INFO && c.flag == 0 && c.help == 0);

    /* the environment overrides the defaults; an empty variable counts as unset */
    setenv("FSTEST_NAME", "env", 1);
    setenv("FSTEST_SMALL", "100", 1);
    setenv("FSTEST_PATH", "", 1);
    setenv("FSTEST_FLAG", "true", 1);
    CHECK_OK(parse(&c, &err, none), &err);
    CHECK(strcmp(c.name, "env") == 0 && c.small == 100 && c.path[0] == '\0' && c.flag == 1);

    /* flags override the environment, both spellings */
    CHECK_OK(parse(&c, &err, flags), &err);
    CHECK(strcmp(c.name, "xyz") == 0);
    CHECK(c.big == (uint64_t)1 << 40 && c.small == 100 && c.level == FS_LOG_DEBUG && c.flag == 1);
    clear_env();
}

/* Every bad value is refused with a message naming where it came from. */
static void test_opts_errors(void)
{
    static const struct {
        const char *args[4];
        const char *env;
        const char *env_val;
        const char *msg;
    } cases[] = {
        {{"--bogus", "1", NULL}, NULL, NULL, "unknown argument \"--bogus\""},
        {{"--names", "x", NULL}, NULL, NULL, "unknown argument \"--names\""},
        {{"--name", NULL}, NULL, NULL, "--name: missing value"},
        {{"--name", "12345678", NULL}, NULL, NULL, "--name: value longer than 7 bytes"},
        {{"--big", "15", NULL}, NULL, NULL, "--big: expected an integer in 16..1099511627776"},
        {{"--big=1099511627777", NULL}, NULL, NULL, "--big: expected an integer in 16.."},
        {{"--big=-1", NULL}, NULL, NULL, "--big: expected a number"},
        {{"--big=12abc", NULL}, NULL, NULL, "--big: expected an integer"},
        {{"--big=99999999999999999999999", NULL}, NULL, NULL, "--big: expected an integer"},
        {{"--small=0", NULL}, NULL, NULL, "--small: expected an integer in 1..100"},
        {{"--small=4294967297", NULL}, NULL, NULL, "--small: expected an integer in 1..100"},
        {{"--flag=maybe", NULL}, NULL, NULL, "--flag: expected 0 or 1"},
        {{"--log-level", "loud", NULL}, NULL, NULL, "--log-level: expected debug, info"},
        {{NULL}, "FSTEST_SMALL", "101", "FSTEST_SMALL: expected an integer in 1..100"},
        {{NULL}, "FSTEST_NAME", "waytoolong", "FSTEST_NAME: value longer than 7 bytes"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fs_err err;
        struct cfg c;
        int rc;

        clear_env();
        if (cases[i].env != NULL) {
            setenv(cases[i].env, cases[i].env_val, 1);
        }
        rc = parse(&c, &err, (const char **)cases[i].args);
        CHECK_MSG(rc == FS_EINVAL, "case %zu: rc %d", i, rc);
        CHECK_MSG(strstr(err.msg, cases[i].msg) != NULL, "case %zu: \"%s\"", i, err.msg);
    }
    clear_env();
}

/* A bad default is a programming error, still reported, naming the default. */
static void test_opts_bad_default(void)
{
    static const struct fs_svc_opt bad[] = {
        {"--small", "FSTEST_SMALL", FS_SVC_U32, OFF(small), 0, "0", 1, 100, "a count"},
    };
    char *argv[] = {(char *)"svc", (char *)"--help"};
    struct fs_err err = {0};
    struct cfg c;

    clear_env();
    memset(&c, 0, sizeof c);
    CHECK(fs_svc_opts_parse(bad, 1, &c, 2, argv, &c.help, &err) == FS_EINVAL);
    CHECK_MSG(strstr(err.msg, "default of --small") != NULL, "%s", err.msg);
    CHECK(c.help == 1);
}

static void test_opts_usage_and_checks(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct fs_err err = {0};

    CHECK(f != NULL);
    if (f == NULL) {
        return;
    }
    fs_svc_opts_usage(f, "usage: svc [--flag value]...\n\n", OPTS, NOPTS);
    fclose(f);
    CHECK(strncmp(text, "usage: svc [--flag value]...\n\n", 30) == 0);
    for (size_t k = 0; k < NOPTS; k++) {
        CHECK_MSG(strstr(text, OPTS[k].flag) != NULL && strstr(text, OPTS[k].env) != NULL &&
                      strstr(text, OPTS[k].help) != NULL,
                  "%s missing from the usage", OPTS[k].flag);
    }
    CHECK(strstr(text, "default: 4096") != NULL && strstr(text, "default: (none)") != NULL);
    CHECK(strstr(text, "--help") != NULL);
    free(text);

    CHECK(fs_svc_check_admin_tls("", "", "", &err) == FS_EINVAL);
    CHECK(strstr(err.msg, "--admin-token-file") != NULL);
    CHECK(fs_svc_check_admin_tls("/t", "cert.pem", "", &err) == FS_EINVAL);
    CHECK(strstr(err.msg, "--tls-cert and --tls-key") != NULL);
    CHECK(fs_svc_check_admin_tls("/t", "", "key.pem", &err) == FS_EINVAL);
    CHECK_OK(fs_svc_check_admin_tls("/t", "", "", &err), &err);
    CHECK_OK(fs_svc_check_admin_tls("/t", "cert.pem", "key.pem", &err), &err);
}

/* Number of entries of dir whose name starts with prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
    closedir(d);
    return n;
}

/* Another spelling of an option (an entry without a default) and a --help
 * word after the flag's name: the last flag given wins whatever its
 * spelling, then the first variable set, then the first entry's default. */
struct acfg {
    char token[32];
    char cert[32];
    int help;
};

static const struct fs_svc_opt AOPTS[] = {
    {"--token-file FILE", "FSTEST_TOKEN_FILE", FS_SVC_STR, offsetof(struct acfg, token),
     sizeof(((struct acfg *)0)->token), "dflt", 0, 0, "the token"},
    {"--old-token FILE", "FSTEST_OLD_TOKEN", FS_SVC_STR, offsetof(struct acfg, token),
     sizeof(((struct acfg *)0)->token), NULL, 0, 0, NULL},
    {"--cert FILE", "FSTEST_CERT", FS_SVC_STR, offsetof(struct acfg, cert),
     sizeof(((struct acfg *)0)->cert), "", 0, 0, "a certificate"},
};

static int aparse(struct acfg *c, struct fs_err *err, int argc, const char **args)
{
    char *argv[8];

    argv[0] = (char *)"svc";
    for (int i = 0; i < argc; i++) {
        argv[i + 1] = (char *)args[i];
    }
    memset(c, 0, sizeof *c);
    memset(err, 0, sizeof *err);
    return fs_svc_opts_parse(AOPTS, 3, c, argc + 1, argv, &c->help, err);
}

static void test_opts_spellings(void)
{
    struct fs_err err;
    struct acfg c;
    char buf[2048];
    size_t n;
    FILE *f;

    unsetenv("FSTEST_TOKEN_FILE");
    unsetenv("FSTEST_OLD_TOKEN");
    unsetenv("FSTEST_CERT");
    CHECK_OK(aparse(&c, &err, 0, NULL), &err);
    CHECK(strcmp(c.token, "dflt") == 0 && c.cert[0] == '\0');
    CHECK_OK(aparse(&c, &err, 2, (const char *[]){"--old-token", "a"}), &err);
    CHECK(strcmp(c.token, "a") == 0);
    CHECK_OK(aparse(&c, &err, 2, (const char *[]){"--old-token=a", "--token-file=b"}), &err);
    CHECK(strcmp(c.token, "b") == 0);
    CHECK_OK(aparse(&c, &err, 2, (const char *[]){"--token-file=b", "--old-token=a"}), &err);
    CHECK(strcmp(c.token, "a") == 0);
    setenv("FSTEST_OLD_TOKEN", "old", 1);
    CHECK_OK(aparse(&c, &err, 0, NULL), &err);
    CHECK(strcmp(c.token, "old") == 0);
    setenv("FSTEST_TOKEN_FILE", "new", 1);
    CHECK_OK(aparse(&c, &err, 0, NULL), &err);
    CHECK(strcmp(c.token, "new") == 0); /* the first entry's variable wins */
    CHECK_OK(aparse(&c, &err, 2, (const char *[]){"--old-token", "flag"}), &err);
    CHECK(strcmp(c.token, "flag") == 0); /* a flag over any variable */
    unsetenv("FSTEST_TOKEN_FILE");
    unsetenv("FSTEST_OLD_TOKEN");
    /* the --help word is not part of the flag */
    CHECK(aparse(&c, &err, 2, (const char *[]){"--cert FILE", "x"}) == FS_EINVAL);
    CHECK(aparse(&c, &err, 1, (const char *[]){"--cert"}) == FS_EINVAL);
    CHECK_MSG(strcmp(err.msg, "--cert: missing value") == 0, "%s", err.msg);
    CHECK(aparse(&c, &err, 2,
                 (const char *[]){"--old-token", "0123456789012345678901234567890123"}) ==
          FS_EINVAL);
    CHECK_MSG(strstr(err.msg, "--old-token:") == err.msg, "%s", err.msg);
    f = tmpfile();
    CHECK(f != NULL);
    if (f != NULL) {
        fs_svc_opts_usage(f, "", AOPTS, 3);
        rewind(f);
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        CHECK(strstr(buf, "\n  --old-token FILE ") != NULL);
        CHECK(strstr(buf, "the same as --token-file\n") != NULL);
        CHECK(strstr(buf, "  --cert FILE ") != NULL);
    }
}

/* The one fs_err -> problem table of the three services (net/reply.h). */
static void test_problem_table(void)
{
    static const struct {
        int code;
        unsigned status;
        const char *slug;
    } want[] = {
        {FS_EFORMAT, 400, "bad_request"},
        {FS_EAUTH, 401, "unauthorized"},
        {FS_EFORBIDDEN, 403, "forbidden"},
        {FS_ENOTFOUND, 404, "not_found"},
        {FS_ESTATE, 409, "not_ready"},
        {FS_ECONFLICT, 409, "conflict"},
        {FS_EABORTED, 409, "aborted"},
        {FS_ERANGE, 413, "too_large"},
        {FS_EINVAL, 422, "invalid"},
        {FS_ETOOMANY, 429, "too_many_jobs"},
        {FS_EUNAVAILABLE, 503, "unavailable"},
        {FS_EIO, 500, "internal"},
        {FS_ESTORAGE, 503, "storage_unavailable"},
        {FS_ENOMEM, 500, "internal"},
        {FS_ECRYPTO, 500, "internal"},
        {FS_EINTERNAL, 500, "internal"},
        {12345, 500, "internal"},
    };

    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct fs_problem_kind *k = fs_problem_kind(want[i].code);
        CHECK_MSG(k->status == want[i].status && strcmp(k->code, want[i].slug) == 0 &&
                      k->title != NULL && fs_http_status_for_err(want[i].code) == want[i].status,
                  "code %d: %u %s", want[i].code, k->status, k->code);
    }
}

/* The shared SQLite connection and its helpers (net/db.h). */
static void test_db_helpers(void)
{
    struct fs_err err = {0};
    sqlite3_stmt *st = NULL;
    char path[128];
    char text[8];
    fs_db *db = NULL;

    snprintf(path, sizeof path, "%s/helpers.db", g_dir);
    CHECK_OK(fs_db_open(path, "helpers.db", 0, "CREATE TABLE IF NOT EXISTS t (a TEXT, b INT);", &db,
                        &err),
             &err);
    if (db == NULL) {
        return;
    }
    CHECK(fs_db_ping(db) == 1);
    fs_db_lock(db);
    CHECK(fs_db_has_column(db, "t", "a") == 1 && fs_db_has_column(db, "t", "c") == 0);
    CHECK_OK(fs_db_exec(db, "INSERT INTO t VALUES ('abcdefghij', 1);", "insert", &err), &err);
    CHECK(fs_db_exec(db, "INSERT INTO nosuch VALUES (1);", "insert", &err) == FS_EIO);
    CHECK_MSG(strncmp(err.msg, "helpers.db: insert: ", 20) == 0, "%s", err.msg);
    CHECK(fs_db_prepare(db, "SELECT nosuch FROM t", &st, &err) == FS_EIO && st == NULL);
    CHECK_MSG(strncmp(err.msg, "helpers.db: prepare: ", 21) == 0, "%s", err.msg);
    CHECK_OK(fs_db_prepare(db, "SELECT a FROM t", &st, &err), &err);
    CHECK(st != NULL && sqlite3_step(st) == SQLITE_ROW);
    fs_db_col_text(st, 0, text, sizeof text);
    CHECK(strcmp(text, "abcdefg") == 0); /* truncated to the buffer */
    sqlite3_finalize(st);
    fs_db_unlock(db);
    fs_db_close(db);
    fs_db_close(NULL);
}

/* Disk full (a file-size limit: every write fails with EFBIG, SIGXFSZ
 * ignored): the database helpers and the atomic file writer answer
 * FS_ESTORAGE (a 503), nothing half-written stays, and all works again once
 * the limit is lifted. */
static void test_storage_errors(void)
{
    struct fs_err err = {0};
    struct rlimit old;
    struct rlimit lim;
    struct fs_text t;
    char path[128];
    char blob[8192];
    fs_db *db = NULL;
    fs_http_metrics *m = fs_http_metrics_new(4);
    sigset_t sigs;

    CHECK(fs_io_errcode(ENOSPC) == FS_ESTORAGE && fs_io_errcode(EDQUOT) == FS_ESTORAGE &&
          fs_io_errcode(EROFS) == FS_ESTORAGE && fs_io_errcode(EFBIG) == FS_ESTORAGE &&
          fs_io_errcode(EACCES) == FS_EIO);
    CHECK(fs_db_errcode(SQLITE_FULL) == FS_ESTORAGE &&
          fs_db_errcode(SQLITE_IOERR_WRITE) == FS_ESTORAGE &&
          fs_db_errcode(SQLITE_READONLY_DBMOVED) == FS_ESTORAGE &&
          fs_db_errcode(SQLITE_CONSTRAINT_UNIQUE) == FS_EIO &&
          fs_db_errcode(SQLITE_ERROR) == FS_EIO);
    CHECK(strcmp(fs_err_name(FS_ESTORAGE), "storage") == 0);

    snprintf(path, sizeof path, "%s/full.db", g_dir);
    CHECK_OK(fs_db_open(path, "full.db", 0, "CREATE TABLE IF NOT EXISTS t (b BLOB);", &db, &err),
             &err);
    if (db == NULL || m == NULL || getrlimit(RLIMIT_FSIZE, &old) != 0) {
        fs_db_close(db);
        fs_http_metrics_free(m);
        return;
    }
    memset(blob, 7, sizeof blob);
    fs_svc_block_signals(&sigs); /* ignores SIGXFSZ */
    pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
    lim.rlim_cur = 0;
    lim.rlim_max = old.rlim_max;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);

    fs_db_lock(db);
    CHECK(fs_db_exec(db, "INSERT INTO t VALUES (zeroblob(8192));", "insert", &err) == FS_ESTORAGE);
    CHECK_MSG(strncmp(err.msg, "full.db: insert: ", 17) == 0, "%s", err.msg);
    fs_db_unlock(db);
    CHECK(fs_storage_degraded() == 1 && strcmp(fs_storage_state(), "unavailable") == 0);
    snprintf(path, sizeof path, "%s/atomic.bin", g_dir);
    CHECK(fs_write_file_atomic(path, blob, sizeof blob, &err) == FS_ESTORAGE);
    CHECK(access(path, F_OK) != 0 && count_prefixed(g_dir, "atomic.bin") == 0); /* no temporary */
    CHECK(fs_storage_errors() >= 1); /* the database; a file write is noted when answered */
    fs_text_init(&t, 1 << 16);
    fs_http_metrics_write(m, NULL, &t);
    CHECK(t.p != NULL && strstr(t.p, "\nfedsvd_storage_unavailable 1\n") != NULL &&
          strstr(t.p, "\nfedsvd_storage_errors_total 0\n") == NULL);
    fs_text_free(&t);

    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0); /* space is back */
    fs_db_lock(db);
    CHECK_OK(fs_db_exec(db, "INSERT INTO t VALUES (zeroblob(8192));", "insert", &err), &err);
    fs_db_unlock(db);
    CHECK(fs_storage_degraded() == 0 && strcmp(fs_storage_state(), "ok") == 0);
    CHECK_OK(fs_write_file_atomic(path, blob, sizeof blob, &err), &err);
    fs_db_lock(db);
    CHECK_OK(fs_db_exec(db, "PRAGMA integrity_check;", "check", &err), &err);
    fs_db_unlock(db);
    fs_db_close(db);
    fs_http_metrics_free(m);
}

static void test_port_file_and_atomic_write(void)
{
    char path[128];
    char buf[32] = {0};
    struct fs_err err = {0};
    struct stat sb;
    FILE *f;

    snprintf(path, sizeof path, "%s/port", g_dir);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fputs("stale contents, longer than a port\n", f);
        fclose(f);
    }
    CHECK_OK(fs_svc_write_port_file(path, 54321, &err), &err);
    f = fopen(path, "r");
    CHECK(f != NULL);
    if (f != NULL) {
        CHECK(fread(buf, 1, sizeof buf - 1, f) == 6);
        fclose(f);
    }
    CHECK(strcmp(buf, "54321\n") == 0);
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    CHECK(count_prefixed(g_dir, "port.tmp") == 0);

    /* a directory that does not exist: an error, nothing left behind */
    snprintf(path, sizeof path, "%s/missing/port", g_dir);
    CHECK(fs_svc_write_port_file(path, 1, &err) == FS_EIO);
    CHECK(strstr(err.msg, "missing/port") != NULL);
    /* renaming over a directory fails: the temporary is removed */
    snprintf(path, sizeof path, "%s/adir", g_dir);
    CHECK(mkdir(path, 0700) == 0);
    CHECK(fs_write_file_atomic(path, "x", 1, &err) == FS_EIO);
    CHECK(count_prefixed(g_dir, "adir.tmp") == 0);
    CHECK(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode));
    /* an empty file is a file */
    snprintf(path, sizeof path, "%s/empty", g_dir);
    CHECK_OK(fs_write_file_atomic(path, NULL, 0, &err), &err);
    CHECK(stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0);
}

static void test_mkdir_p(void)
{
    char path[256];
    char file[256];
    char big[5000];
    struct fs_err err = {0};
    struct stat sb;
    FILE *f;

    snprintf(path, sizeof path, "%s/a/b//c/", g_dir);
    CHECK_OK(fs_mkdir_p(path, &err), &err);
    CHECK(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0700);
    CHECK_OK(fs_mkdir_p(path, &err), &err); /* again: nothing to do */

    snprintf(file, sizeof file, "%s/a/f", g_dir);
    f = fopen(file, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/a/f/g", g_dir);
    CHECK(fs_mkdir_p(path, &err) == FS_EIO);
    CHECK_MSG(strstr(err.msg, "a/f/g") != NULL, "%s", err.msg);

    CHECK(fs_mkdir_p("", &err) == FS_EINVAL);
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(fs_mkdir_p(big, &err) == FS_EINVAL);
}

static void test_find_openapi(void)
{
    char out[PATH_MAX];
    char tiny[8];
    const char *p;

    p = fs_svc_find_openapi("/some/where/api.yaml", out, sizeof out);
    CHECK(p == out && strcmp(out, "/some/where/api.yaml") == 0);
    CHECK(fs_svc_find_openapi("/too/long/for/this", tiny, sizeof tiny) == NULL);
    CHECK(tiny[0] == '\0');
    /* this test runs from <repo>/<build>/tests/: the repository's openapi.yaml */
    p = fs_svc_find_openapi(NULL, out, sizeof out);
    CHECK(p == out);
    CHECK(p != NULL && strlen(out) > 12 && strcmp(out + strlen(out) - 12, "openapi.yaml") == 0);
    CHECK(p != NULL && access(out, R_OK) == 0);
    p = fs_svc_find_openapi("", out, sizeof out); /* empty flag: searched as well */
    CHECK(p == out);
    CHECK(fs_svc_find_openapi(NULL, tiny, sizeof tiny) == NULL && tiny[0] == '\0');
}

/* One integer from a query, or -1. */
static long long db_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    long long v = -1;

    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return v;
}

static void test_db_open(void)
{
    static const char schema[] = "CREATE TABLE IF NOT EXISTS p (id INTEGER PRIMARY KEY);"
                                 "CREATE TABLE IF NOT EXISTS c (pid INTEGER REFERENCES p(id));";
    char path[128];
    struct fs_err err = {0};
    sqlite3 *db = NULL;

    snprintf(path, sizeof path, "%s/state.db", g_dir);
    CHECK_OK(fs_svc_db_open(path, 1, schema, &db, &err), &err);
    CHECK(db != NULL);
    if (db == NULL) {
        return;
    }
    CHECK(db_int(db, "SELECT count(*) FROM sqlite_master WHERE type='table'") == 2);
    CHECK(db_int(db, "PRAGMA synchronous") == 2); /* FULL */
    CHECK(db_int(db, "PRAGMA foreign_keys") == 1);
    CHECK(sqlite3_exec(db, "INSERT INTO p VALUES (1); INSERT INTO c VALUES (1);", NULL, NULL,
                       NULL) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "INSERT INTO c VALUES (7);", NULL, NULL, NULL) != SQLITE_OK);
    sqlite3_close_v2(db);

    /* again, without fsync: the schema runs again harmlessly, the rows stay */
    db = NULL;
    CHECK_OK(fs_svc_db_open(path, 0, schema, &db, &err), &err);
    CHECK(db != NULL && db_int(db, "PRAGMA synchronous") == 1); /* NORMAL */
    {
        char mode[16] = {0};
        sqlite3_stmt *st = NULL;
        if (db != NULL &&
            sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW) {
            snprintf(mode, sizeof mode, "%s", (const char *)sqlite3_column_text(st, 0));
        }
        sqlite3_finalize(st);
        CHECK(strcmp(mode, "wal") == 0);
    }
    CHECK(db != NULL && db_int(db, "SELECT count(*) FROM c") == 1);
    sqlite3_close_v2(db);

    db = (sqlite3 *)&err; /* cleared on failure */
    CHECK(fs_svc_db_open(path, 0, "CREATE TABLE broken (", &db, &err) == FS_EIO);
    CHECK(db == NULL && strstr(err.msg, "state.db") != NULL);
    snprintf(path, sizeof path, "%s/no/such/dir/state.db", g_dir);
    CHECK(fs_svc_db_open(path, 0, schema, &db, &err) == FS_EIO);
    CHECK(db == NULL && strstr(err.msg, "cannot open") != NULL);
}

static int file_mode(const char *path)
{
    struct stat sb;

    return stat(path, &sb) == 0 ? (int)(sb.st_mode & 07777) : -1;
}

/* The log written since the stream was set (rewound and read whole). */
static void read_log(FILE *f, char *buf, size_t cap)
{
    size_t n = 0;

    fflush(f);
    rewind(f);
    n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
}

/* Bare boolean flags; plain HTTP only on loopback; private data directories
 * and databases (0700 / 0600, looser ones tightened with a warning). */
static void test_transport_rules(void)
{
    struct fs_err err;
    struct cfg c;
    const char *bare[] = {"--flag", NULL};
    const char *bare_then[] = {"--flag", "--small", "5", NULL};
    const char *valued[] = {"--flag", "no", "--name", "q", NULL};
    char dir[128];
    char path[160];
    char side[176];
    char logbuf[4096];
    FILE *log = tmpfile();
    sqlite3 *db = NULL;
    mode_t old_umask;

    clear_env();
    CHECK(parse(&c, &err, bare) == 0 && c.flag == 1);
    CHECK(parse(&c, &err, bare_then) == 0 && c.flag == 1 && c.small == 5);
    CHECK(parse(&c, &err, valued) == 0 && c.flag == 0 && strcmp(c.name, "q") == 0);

    if (log == NULL) {
        CHECK(log != NULL);
        return;
    }
    fs_log_set_stream(log);
    CHECK(fs_svc_check_listen("127.0.0.1", 0, 0, &err) == 0);
    CHECK(fs_svc_check_listen("127.0.0.2", 0, 0, &err) == 0);
    CHECK(fs_svc_check_listen("::1", 0, 0, &err) == 0);
    CHECK(fs_svc_check_listen("localhost", 0, 0, &err) == 0);
    CHECK(fs_svc_check_listen("0.0.0.0", 1, 0, &err) == 0);
    read_log(log, logbuf, sizeof logbuf);
    CHECK(logbuf[0] == '\0'); /* nothing to warn about */
    CHECK(fs_svc_check_listen("0.0.0.0", 0, 0, &err) == FS_EINVAL);
    CHECK(strstr(err.msg, "refusing to listen on 0.0.0.0 without TLS") != NULL &&
          strstr(err.msg, "--tls-cert") != NULL && strstr(err.msg, "--insecure-http") != NULL);
    CHECK(fs_svc_check_listen("::", 0, 0, &err) == FS_EINVAL);
    CHECK(fs_svc_check_listen("10.1.2.3", 0, 0, &err) == FS_EINVAL);
    CHECK(fs_svc_check_listen("myhost.example", 0, 0, &err) == FS_EINVAL);
    CHECK(fs_svc_check_listen("0.0.0.0", 0, 1, &err) == 0);
    read_log(log, logbuf, sizeof logbuf);
    CHECK(strstr(logbuf, "\"level\":\"warn\"") != NULL &&
          strstr(logbuf, "--insecure-http") != NULL && strstr(logbuf, "0.0.0.0") != NULL);

    /* data directories: created 0700 even under umask 0; a 0755 one is tightened */
    old_umask = umask(0);
    snprintf(dir, sizeof dir, "%s/pd/a/b", g_dir);
    CHECK_OK(fs_svc_private_dir(dir, &err), &err);
    CHECK_MSG(file_mode(dir) == 0700, "%o", file_mode(dir));
    snprintf(dir, sizeof dir, "%s/open", g_dir);
    CHECK(mkdir(dir, 0755) == 0 && file_mode(dir) == 0755);
    CHECK_OK(fs_svc_private_dir(dir, &err), &err);
    CHECK_MSG(file_mode(dir) == 0700, "%o", file_mode(dir));
    read_log(log, logbuf, sizeof logbuf);
    CHECK(strstr(logbuf, "data directory was open to other users") != NULL &&
          strstr(logbuf, "\"mode_was\":\"0755\"") != NULL);
    snprintf(path, sizeof path, "%s/afile", dir);
    CHECK_OK(fs_write_file_atomic(path, "x", 1, &err), &err);
    CHECK(fs_svc_private_dir(path, &err) != 0);

    /* databases: 0600 with their -wal and -shm, even under umask 0 */
    snprintf(path, sizeof path, "%s/state.db", dir);
    CHECK_OK(fs_svc_db_open(path, 0, "CREATE TABLE IF NOT EXISTS t (x INTEGER);", &db, &err), &err);
    CHECK(db != NULL &&
          sqlite3_exec(db, "INSERT INTO t VALUES (1);", NULL, NULL, NULL) == SQLITE_OK);
    CHECK_MSG(file_mode(path) == 0600, "db %o", file_mode(path));
    snprintf(side, sizeof side, "%s-wal", path);
    CHECK_MSG(file_mode(side) == 0600, "wal %o", file_mode(side));
    snprintf(side, sizeof side, "%s-shm", path);
    CHECK_MSG(file_mode(side) == 0600, "shm %o", file_mode(side));
    /* an existing database readable by others (as older versions left it) */
    CHECK(chmod(path, 0644) == 0 && chmod(side, 0644) == 0);
    {
        sqlite3 *db2 = NULL;
        CHECK_OK(fs_svc_db_open(path, 0, "SELECT 1;", &db2, &err), &err);
        sqlite3_close_v2(db2);
    }
    CHECK_MSG(file_mode(path) == 0600, "db %o", file_mode(path));
    CHECK_MSG(file_mode(side) == 0600, "shm %o", file_mode(side));
    read_log(log, logbuf, sizeof logbuf);
    CHECK(strstr(logbuf, "database was open to other users") != NULL);
    sqlite3_close_v2(db);
    umask(old_umask);
    fs_log_set_stream(stderr);
    fclose(log);
}

static void test_signals_and_base_url(void)
{
    struct sigaction sa;
    sigset_t sigs;
    sigset_t now;
    char url[320];

    fs_svc_block_signals(&sigs);
    CHECK(pthread_sigmask(SIG_BLOCK, NULL, &now) == 0);
    CHECK(sigismember(&now, SIGTERM) == 1 && sigismember(&now, SIGINT) == 1);
    CHECK(sigismember(&sigs, SIGTERM) == 1 && sigismember(&sigs, SIGINT) == 1);
    CHECK(sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN);
    CHECK(sigaction(SIGXFSZ, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN);
    CHECK(raise(SIGINT) == 0); /* blocked: stays pending until the wait */
    CHECK(fs_svc_wait_signal(&sigs) == SIGINT);
    CHECK(raise(SIGTERM) == 0);
    CHECK(fs_svc_wait_signal(&sigs) == SIGTERM);

    fs_svc_base_url(url, sizeof url, 0, "127.0.0.1", 8443);
    CHECK(strcmp(url, "http://127.0.0.1:8443") == 0);
    fs_svc_base_url(url, sizeof url, 0, "127.0.0.2", 8443);
    CHECK(strcmp(url, "http://127.0.0.2:8443") == 0);
    fs_svc_base_url(url, sizeof url, 1, "::1", 9);
    CHECK(strcmp(url, "https://[::1]:9") == 0);
    /* a wildcard: the machine's name, never a loopback address */
    {
        char name[256] = "";
        char want[300];

        CHECK(gethostname(name, sizeof name) == 0);
        snprintf(want, sizeof want, "https://%s:443", name);
        fs_svc_base_url(url, sizeof url, 1, "0.0.0.0", 443);
        CHECK_MSG(strcmp(url, want) == 0, "%s", url);
        snprintf(want, sizeof want, "http://%s:8443", name);
        fs_svc_base_url(url, sizeof url, 0, "::", 8443);
        CHECK_MSG(strcmp(url, want) == 0, "%s", url);
    }
}

static void *early_thread(void *arg)
{
    (void)arg;
    for (;;) {
        pause();
    }
    return NULL;
}

/* A library thread started before main() blocked the signals (as OpenBLAS
 * does from a constructor) is the only one with SIGTERM unblocked: the
 * signal must still reach fs_svc_wait_signal instead of killing the process. */
static void test_signal_to_early_thread(void)
{
    int status = 0;
    int ready[2];
    int go[2];
    pid_t pid;
    char c = 0;

    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        sigset_t all;
        sigset_t sigs;
        pthread_t th;
        FILE *quiet = fopen("/dev/null", "w");

        if (quiet != NULL) {
            fs_log_set_stream(quiet); /* the "shutting down" lines */
        }
        signal(SIGTERM, SIG_DFL);
        sigemptyset(&all);
        sigaddset(&all, SIGTERM);
        sigaddset(&all, SIGINT);
        pthread_sigmask(SIG_UNBLOCK, &all, NULL);
        if (pthread_create(&th, NULL, early_thread, NULL) != 0) {
            _exit(3);
        }
        fs_svc_block_signals(&sigs);
        alarm(20);
        for (int i = 0; i < 5; i++) {
            /* the parent signals while this thread is not waiting yet */
            if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1) {
                _exit(4);
            }
            if (fs_svc_wait_signal(&sigs) != SIGTERM) {
                _exit(5);
            }
        }
        /* end the thread: a live one's TLS is "possibly lost" to valgrind */
        if (pthread_cancel(th) != 0 || pthread_join(th, NULL) != 0) {
            _exit(6);
        }
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    for (int i = 0; i < 5; i++) {
        if (read(ready[0], &c, 1) != 1) {
            break; /* the child died */
        }
        CHECK(kill(pid, SIGTERM) == 0);
        if (write(go[1], "g", 1) != 1) {
            break;
        }
    }
    close(ready[0]);
    close(go[1]);
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", (unsigned)status);
}

static void test_pid_listens(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd;
    int hold[2];
    pid_t other;
    uint16_t port;
    char c;

    CHECK(pipe(hold) == 0);
    other = fork(); /* before the socket exists: it holds no copy of it */
    CHECK(other >= 0);
    if (other == 0) {
        close(hold[1]);
        (void)!read(hold[0], &c, 1);
        _exit(0);
    }
    close(hold[0]);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    port = ntohs(a.sin_port);
    CHECK(fs_svc_pid_listens(getpid(), port) == 0); /* bound, not listening */
    CHECK(listen(fd, 4) == 0);
    CHECK(fs_svc_pid_listens(getpid(), port) == 1);
    CHECK(fs_svc_pid_listens(other, port) == 0); /* someone else's port */
    close(fd);
    CHECK(fs_svc_pid_listens(getpid(), port) == 0);
    close(hold[1]);
    CHECK(waitpid(other, NULL, 0) == other);
    CHECK(fs_svc_pid_listens(other, port) == 0); /* a process that is gone */
}

static void test_text(void)
{
    struct fs_text t;
    char line[101];

    memset(line, 'y', 100);
    line[100] = '\0';
    fs_text_init(&t, 10000);
    for (int i = 0; i < 99; i++) {
        fs_text_printf(&t, "%s", line);
    }
    fs_text_printf(&t, "%d", 12);
    CHECK(!t.failed && t.n == 9902 && strlen(t.p) == 9902 && strcmp(t.p + 9900, "12") == 0);
    fs_text_printf(&t, "%s", line); /* past the cap: failed, and it stays failed */
    CHECK(t.failed);
    fs_text_printf(&t, "x");
    CHECK(t.failed && t.n == 9902);
    fs_text_free(&t);
    CHECK(t.p == NULL && t.n == 0);

    fs_text_init(&t, 5);
    fs_text_printf(&t, "%s", "12345"); /* exactly the cap */
    CHECK(!t.failed && t.n == 5 && strcmp(t.p, "12345") == 0);
    fs_text_free(&t);
}

struct rec_arg {
    fs_http_metrics *m;
    int n;
};

static void *record_many(void *p)
{
    struct rec_arg *a = p;
    struct fs_http_log_entry e = {"POST", "/v1/jobs/{job}/chunks", 201, 1.0, 10, 3, 1, NULL};

    for (int i = 0; i < a->n; i++) {
        fs_http_metrics_record(a->m, &e);
    }
    return NULL;
}

static void test_metrics(void)
{
    fs_http_metrics *m = fs_http_metrics_new(3);
    struct fs_http_log_entry e = {"GET", "/v1/jobs", 200, 1.0, 0, 100, 1, NULL};
    struct rec_arg arg;
    pthread_t th[2];
    struct fs_text t;

    CHECK(m != NULL);
    if (m == NULL) {
        return;
    }
    fs_http_metrics_record(NULL, &e); /* no counters: nothing */
    fs_http_metrics_record(m, &e);
    fs_http_metrics_record(m, &e);
    e.status = 404;
    fs_http_metrics_record(m, &e);
    arg.m = m;
    arg.n = 5000;
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_create(&th[i], NULL, record_many, &arg) == 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
    }
    e.route = "/v1/other";
    fs_http_metrics_record(m, &e); /* a 4th series: overflow */
    e.method = "DELETE";
    fs_http_metrics_record(m, &e);

    fs_text_init(&t, 1 << 20);
    fs_http_metrics_write(m, NULL, &t);
    CHECK(!t.failed);
    CHECK(t.p != NULL && strstr(t.p, "\nfedsvd_bytes_received_total 100000\n") != NULL);
    CHECK(t.p != NULL && strstr(t.p, "\nfedsvd_bytes_sent_total 30500\n") != NULL);
    CHECK(t.p != NULL &&
          strstr(t.p, "fedsvd_http_requests_total{method=\"GET\",route=\"/v1/jobs\",status="
                      "\"200\"} 2\n") != NULL);
    CHECK(t.p != NULL &&
          strstr(t.p, "fedsvd_http_requests_total{method=\"GET\",route=\"/v1/jobs\",status="
                      "\"404\"} 1\n") != NULL);
    CHECK(t.p != NULL &&
          strstr(t.p, "fedsvd_http_requests_total{method=\"POST\",route=\"/v1/jobs/{job}/"
                      "chunks\",status=\"201\"} 10000\n") != NULL);
    CHECK(t.p != NULL &&
          strstr(t.p, "fedsvd_http_requests_total{method=\"OTHER\",route=\"other\",status="
                      "\"0\"} 2\n") != NULL);
    CHECK(t.p != NULL && strstr(t.p, "# TYPE fedsvd_http_requests_total counter\n") != NULL);
    CHECK(t.p != NULL && strstr(t.p, "fedsvd_http_connections") == NULL); /* no server */
    fs_text_free(&t);

    fs_text_init(&t, 64); /* too small for the counters: failed, not truncated */
    fs_http_metrics_write(m, NULL, &t);
    CHECK(t.failed);
    fs_text_free(&t);
    fs_http_metrics_free(m);
    fs_http_metrics_free(NULL);
}

int main(void)
{
    char cmd[128];

    snprintf(g_dir, sizeof g_dir, "/tmp/test_svc.XXXXXX");
    if (mkdtemp(g_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_opts_defaults_env_flags);
    RUN(test_opts_errors);
    RUN(test_opts_bad_default);
    RUN(test_opts_usage_and_checks);
    RUN(test_opts_spellings);
    RUN(test_problem_table);
    RUN(test_db_helpers);
    RUN(test_storage_errors);
    RUN(test_port_file_and_atomic_write);
    RUN(test_mkdir_p);
    RUN(test_find_openapi);
    RUN(test_db_open);
    RUN(test_transport_rules);
    RUN(test_signals_and_base_url);
    RUN(test_signal_to_early_thread);
    RUN(test_pid_listens);
    RUN(test_text);
    RUN(test_metrics);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", g_dir);
    }
    return TEST_END("test_svc");
}
