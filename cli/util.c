/* Option parsing, number parsing and output helpers shared by the commands. */
#include "cli.h"
#include "core/hex.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "crypto/rand.h"
#include "io/matio.h"
#include "la/csr.h"

/* Replace control characters (newlines from a library message, or from a
 * file name) so every diagnostic stays on one line. */
static void flatten(char *s)
{
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f) {
            *s = ' ';
        }
    }
}

static void vreport(const char *cmd, const char *suffix, const char *fmt, va_list ap)
{
    char msg[2 * FS_ERR_MSG_MAX];

    vsnprintf(msg, sizeof msg, fmt, ap);
    flatten(msg);
    fprintf(stderr, "fedsvd %s: %s%s\n", cmd, msg, suffix);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char suffix[128];
    va_list ap;

    snprintf(suffix, sizeof suffix, " (see 'fedsvd %s --help')", cmd);
    va_start(ap, fmt);
    vreport(cmd, suffix, fmt, ap);
    va_end(ap);
    return CLI_EUSAGE;
}

int cli_runtime_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport(cmd, "", fmt, ap);
    va_end(ap);
    return CLI_ERUNTIME;
}

int cli_fs_error(const char *cmd, const struct fs_err *err)
{
    if (err == NULL || err->msg[0] == '\0') {
        return cli_runtime_error(cmd, "error (%s)", fs_err_name(err != NULL ? err->code : 0));
    }
    return cli_runtime_error(cmd, "%s", err->msg);
}

/* ---- option tables ---- */

static int is_help(const char *a)
{
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* A lone "-" (stdin-style) and negative numbers are values, not options. */
static int looks_like_option(const char *a)
{
    if (a[0] != '-' || a[1] == '\0') {
        return 0;
    }
    if ((a[1] >= '0' && a[1] <= '9') || a[1] == '.') {
        return 0;
    }
    return 1;
}

static const struct cli_opt *find_opt(const struct cli_opt *opts, size_t nopts, const char *name,
                                      size_t len, size_t *index)
{
    for (size_t i = 0; i < nopts; i++) {
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0) {
            *index = i;
            return &opts[i];
        }
    }
    return NULL;
}

int cli_parse(const char *cmd, int argc, char **argv, const struct cli_opt *opts, size_t nopts,
              const char **pos, size_t max_pos, size_t *npos, int *help)
{
    unsigned char seen[64] = {0};
    int only_pos = 0;

    *help = 0;
    *npos = 0;
    /* --help wins over every other problem on the line. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            break;
        }
        if (is_help(argv[i])) {
            *help = 1;
            return CLI_OK;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq;
        const struct cli_opt *o;
        size_t idx = 0;
        size_t len;

        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (only_pos || !looks_like_option(a)) {
            if (*npos >= max_pos) {
                return cli_usage_error(cmd, "unexpected argument '%s'", a);
            }
            pos[(*npos)++] = a;
            continue;
        }
        if (a[1] != '-') {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        }
        eq = strchr(a + 2, '=');
        len = eq != NULL ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        o = find_opt(opts, nopts, a + 2, len, &idx);
        if (o == NULL) {
            return cli_usage_error(cmd, "unknown option '%.*s'", (int)(len + 2), a);
        }
        if (idx < sizeof seen && seen[idx] && o->kind != CLI_OPT_LIST) {
            return cli_usage_error(cmd, "option '--%s' given more than once", o->name);
        }
        if (idx < sizeof seen) {
            seen[idx] = 1;
        }
        if (o->kind == CLI_OPT_FLAG) {
            if (eq != NULL) {
                return cli_usage_error(cmd, "option '--%s' takes no value", o->name);
            }
            *o->flag = 1;
            continue;
        }
        if (eq == NULL &&
            (i + 1 >= argc || (looks_like_option(argv[i + 1]) && argv[i + 1][1] == '-'))) {
            return cli_usage_error(cmd, "option '--%s' needs a value", o->name);
        }
        if (o->kind == CLI_OPT_LIST) {
            size_t n = 0;
            while (n < CLI_LIST_MAX && o->value[n] != NULL) {
                n++;
            }
            if (n >= CLI_LIST_MAX) {
                return cli_usage_error(cmd, "option '--%s' given more than %d times", o->name,
                                       CLI_LIST_MAX);
            }
            o->value[n] = eq != NULL ? eq + 1 : argv[++i];
            continue;
        }
        *o->value = eq != NULL ? eq + 1 : argv[++i];
        if (o->kind == CLI_OPT_DIR) {
            /* argv's strings are ours to change; *o->value points into one */
            char *v = argv[i] + (eq != NULL ? (size_t)(eq + 1 - a) : 0);
            size_t n = strlen(v);

            while (n > 1 && v[n - 1] == '/') {
                v[--n] = '\0';
            }
        }
    }
    return CLI_OK;
}

/* ---- numbers ---- */

int cli_parse_size(const char *cmd, const char *flag, const char *s, size_t min, size_t max,
                   size_t *out)
{
    const char *what = min >= 1 ? "a positive integer" : "a non-negative integer";
    char *end = NULL;
    unsigned long long v;

    if (s == NULL || s[0] < '0' || s[0] > '9') {
        return cli_usage_error(cmd, "%s: expected %s, got '%s'", flag, what, s != NULL ? s : "");
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (end == s || *end != '\0') {
        return cli_usage_error(cmd, "%s: expected %s, got '%s'", flag, what, s);
    }
    if (errno == ERANGE || v < min || v > max) {
        return cli_usage_error(cmd, "%s: must be between %zu and %zu, got '%s'", flag, min, max, s);
    }
    *out = (size_t)v;
    return CLI_OK;
}

static const char *bound_op(int lower, enum cli_bound b)
{
    if (lower) {
        return b == CLI_OPEN ? ">" : ">=";
    }
    return b == CLI_OPEN ? "<" : "<=";
}

int cli_parse_double(const char *cmd, const char *flag, const char *s, double lo,
                     enum cli_bound lob, double hi, enum cli_bound hib, double *out)
{
    char *end = NULL;
    double v;

    if (s == NULL || s[0] == '\0' || s[0] == ' ' || s[0] == '\t') {
        return cli_usage_error(cmd, "%s: expected a number, got '%s'", flag, s != NULL ? s : "");
    }
    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v)) {
        return cli_usage_error(cmd, "%s: expected a finite number, got '%s'", flag, s);
    }
    if ((lob == CLI_OPEN && !(v > lo)) || (lob == CLI_CLOSED && !(v >= lo))) {
        return cli_usage_error(cmd, "%s: must be %s %g, got '%s'", flag, bound_op(1, lob), lo, s);
    }
    if ((hib == CLI_OPEN && !(v < hi)) || (hib == CLI_CLOSED && !(v <= hi))) {
        return cli_usage_error(cmd, "%s: must be %s %g, got '%s'", flag, bound_op(0, hib), hi, s);
    }
    *out = v;
    return CLI_OK;
}

int cli_parse_size_list(const char *cmd, const char *flag, const char *s, size_t max_items,
                        size_t **out, size_t *n)
{
    size_t *list = NULL;
    size_t count = 0;
    const char *p = s;
    int rc = CLI_OK;

    *out = NULL;
    *n = 0;
    list = calloc(max_items > 0 ? max_items : 1, sizeof *list);
    if (list == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    for (;;) {
        char *end = NULL;
        unsigned long long v;

        if (*p < '0' || *p > '9') {
            rc = cli_usage_error(cmd,
                                 "%s: expected a comma-separated list of positive integers, "
                                 "got '%s'",
                                 flag, s);
            goto out;
        }
        errno = 0;
        v = strtoull(p, &end, 10);
        if (errno == ERANGE || v == 0 || (*end != ',' && *end != '\0')) {
            rc = cli_usage_error(cmd,
                                 "%s: expected a comma-separated list of positive integers, "
                                 "got '%s'",
                                 flag, s);
            goto out;
        }
        if (count >= max_items) {
            rc = cli_usage_error(cmd, "%s: more than %zu items", flag, max_items);
            goto out;
        }
        list[count++] = (size_t)v;
        if (*end == '\0') {
            break;
        }
        p = end + 1;
    }
    *out = list;
    *n = count;
    list = NULL;
out:
    free(list);
    return rc;
}

int cli_parse_format(const char *cmd, const char *s, int *json)
{
    if (s == NULL || strcmp(s, "text") == 0) {
        *json = 0;
        return CLI_OK;
    }
    if (strcmp(s, "json") == 0) {
        *json = 1;
        return CLI_OK;
    }
    return cli_usage_error(cmd, "--format: expected 'text' or 'json', got '%s'", s);
}

int cli_parse_seed(const char *cmd, const char *s, uint8_t key[32], char hex[65])
{
    struct fs_err err;

    memset(key, 0, 32);
    if (s == NULL) {
        if (fs_rand_bytes(key, 32, &err) != 0) {
            return cli_fs_error(cmd, &err);
        }
    } else if (strlen(s) == 64) {
        for (size_t i = 0; i < 32; i++) {
            int hi = fs_hex_digit(s[2 * i]);
            int lo = fs_hex_digit(s[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                return cli_usage_error(cmd,
                                       "--seed: expected 64 hex digits or an integer, got '%s'", s);
            }
            key[i] = (uint8_t)(hi * 16 + lo);
        }
    } else {
        char *end = NULL;
        unsigned long long v;

        errno = 0;
        v = (s[0] >= '0' && s[0] <= '9') ? strtoull(s, &end, 10) : 0;
        if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno == ERANGE) {
            return cli_usage_error(cmd, "--seed: expected 64 hex digits or an integer, got '%s'",
                                   s);
        }
        for (size_t i = 0; i < 8; i++) {
            key[i] = (uint8_t)(v >> (8 * i));
        }
    }
    fs_hex_encode(key, 32, hex);
    return CLI_OK;
}

/* ---- output ---- */

json_t *cli_json_num(double v)
{
    if (!isfinite(v)) {
        return json_null();
    }
    return json_real(v);
}

int cli_print_json(const char *cmd, json_t *obj)
{
    char *s = NULL;

    if (obj == NULL) {
        return cli_runtime_error(cmd, "out of memory building JSON");
    }
    s = json_dumps(obj, JSON_REAL_PRECISION(17));
    json_decref(obj);
    if (s == NULL) {
        return cli_runtime_error(cmd, "out of memory building JSON");
    }
    puts(s);
    free(s);
    return CLI_OK;
}

int cli_write_json_file(const char *cmd, const char *path, json_t *obj)
{
    char tmp[4096];
    int rc = CLI_OK;

    if (obj == NULL) {
        return cli_runtime_error(cmd, "out of memory building JSON");
    }
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp) {
        json_decref(obj);
        return cli_runtime_error(cmd, "%s: path too long", path);
    }
    if (json_dump_file(obj, tmp, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0) {
        rc = cli_runtime_error(cmd, "%s: cannot write", tmp);
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        rc = cli_runtime_error(cmd, "%s: cannot rename into place: %s", path, strerror(errno));
        unlink(tmp);
    }
out:
    json_decref(obj);
    return rc;
}

int cli_mkdir_p(const char *cmd, const char *path)
{
    char buf[4096];
    size_t len = strlen(path);

    if (len == 0 || len >= sizeof buf) {
        return cli_runtime_error(cmd, "'%s': invalid directory name", path);
    }
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char saved = buf[i];
            struct stat st;

            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                return cli_runtime_error(cmd, "%s: cannot create directory: %s", buf,
                                         strerror(errno));
            }
            if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
                return cli_runtime_error(cmd, "%s: not a directory", buf);
            }
            buf[i] = saved;
        }
    }
    return CLI_OK;
}

int cli_path_join(const char *cmd, char *buf, size_t cap, const char *dir, const char *name)
{
    size_t n = strlen(dir);
    const char *sep = n > 0 && dir[n - 1] == '/' ? "" : "/";

    if ((size_t)snprintf(buf, cap, "%s%s%s", dir, sep, name) >= cap) {
        return cli_runtime_error(cmd, "%s/%s: path too long", dir, name);
    }
    return CLI_OK;
}

double cli_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- writers ---- */

int cli_write_csv(const char *path, const fs_mat *m, struct fs_err *err)
{
    char tmp[4096];
    FILE *f = NULL;
    int rc = 0;

    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp) {
        return fs_err_set(err, FS_EINVAL, "%s: path too long", path);
    }
    f = fopen(tmp, "w");
    if (f == NULL) {
        return fs_err_set(err, FS_EIO, "%s: cannot open for writing: %s", tmp, strerror(errno));
    }
    for (size_t i = 0; i < m->rows; i++) {
        for (size_t j = 0; j < m->cols; j++) {
            fprintf(f, j + 1 < m->cols ? "%.17g," : "%.17g\n", FS_MAT_AT(m, i, j));
        }
    }
    if (ferror(f) != 0) {
        rc = fs_err_set(err, FS_EIO, "%s: write failed", tmp);
    }
    if (fclose(f) != 0 && rc == 0) {
        rc = fs_err_set(err, FS_EIO, "%s: write failed: %s", tmp, strerror(errno));
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = fs_err_set(err, FS_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
    }
    if (rc != 0) {
        unlink(tmp);
    }
    return rc;
}

int cli_write_mtx_dense(const char *path, const fs_mat *m, struct fs_err *err)
{
    size_t nnz = 0;
    size_t k = 0;
    size_t *ri = NULL;
    size_t *ci = NULL;
    double *v = NULL;
    fs_csr *csr = NULL;
    int rc = 0;

    for (size_t j = 0; j < m->cols; j++) {
        for (size_t i = 0; i < m->rows; i++) {
            nnz += FS_MAT_AT(m, i, j) != 0.0;
        }
    }
    ri = malloc((nnz > 0 ? nnz : 1) * sizeof *ri);
    ci = malloc((nnz > 0 ? nnz : 1) * sizeof *ci);
    v = malloc((nnz > 0 ? nnz : 1) * sizeof *v);
    if (ri == NULL || ci == NULL || v == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    for (size_t j = 0; j < m->cols; j++) {
        for (size_t i = 0; i < m->rows; i++) {
            double x = FS_MAT_AT(m, i, j);
            if (x != 0.0) {
                ri[k] = i;
                ci[k] = j;
                v[k] = x;
                k++;
            }
        }
    }
    rc = fs_csr_from_coo(m->rows, m->cols, nnz, ri, ci, v, &csr, err);
    if (rc != 0) {
        goto out;
    }
    rc = fs_mtx_write_csr(path, csr, err);
out:
    fs_csr_free(csr);
    free(v);
    free(ci);
    free(ri);
    return rc;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t ls = strlen(s);
    size_t lf = strlen(suf);

    return ls >= lf && strcmp(s + ls - lf, suf) == 0;
}

int cli_write_dense_any(const char *path, const fs_mat *m, struct fs_err *err)
{
    if (has_suffix(path, ".csv")) {
        return cli_write_csv(path, m, err);
    }
    if (has_suffix(path, ".mtx") || has_suffix(path, ".mm")) {
        return cli_write_mtx_dense(path, m, err);
    }
    return fs_npy_write_mat(path, m, err);
}
