#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static atomic_int g_level = FS_LOG_INFO;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *g_stream; /* NULL: stderr; guarded by g_lock */

int fs_log_level_parse(const char *s, enum fs_log_level *out, struct fs_err *err)
{
    static const struct {
        const char *name;
        enum fs_log_level level;
    } names[] = {{"debug", FS_LOG_DEBUG},  {"info", FS_LOG_INFO},   {"warn", FS_LOG_WARN},
                 {"warning", FS_LOG_WARN}, {"error", FS_LOG_ERROR}, {"off", FS_LOG_OFF}};

    if (s == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "log level: missing value");
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].level;
            return 0;
        }
    }
    return fs_err_set(err, FS_EINVAL,
                      "log level: unknown value (expected debug, info, warn, error or off)");
}

const char *fs_log_level_name(enum fs_log_level level)
{
    switch (level) {
    case FS_LOG_DEBUG:
        return "debug";
    case FS_LOG_INFO:
        return "info";
    case FS_LOG_WARN:
        return "warn";
    case FS_LOG_ERROR:
        return "error";
    default:
        return "off";
    }
}

void fs_log_set_level(enum fs_log_level level)
{
    atomic_store(&g_level, (int)level);
}

enum fs_log_level fs_log_get_level(void)
{
    return (enum fs_log_level)atomic_load(&g_level);
}

int fs_log_enabled(enum fs_log_level level)
{
    return level < FS_LOG_OFF && (int)level >= atomic_load(&g_level);
}

void fs_log_set_stream(FILE *stream)
{
    pthread_mutex_lock(&g_lock);
    g_stream = stream;
    pthread_mutex_unlock(&g_lock);
}

static void format_ts(char *buf, size_t cap)
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L);
}

/* A JSON string from arbitrary bytes: invalid UTF-8 would make json_string
 * fail, so fall back to replacing non-ASCII bytes with '?'. */
static json_t *safe_string(const char *s)
{
    json_t *j = json_string(s);
    char *copy = NULL;

    if (j != NULL) {
        return j;
    }
    copy = strdup(s);
    if (copy == NULL) {
        return NULL;
    }
    for (char *p = copy; *p != '\0'; p++) {
        if ((unsigned char)*p >= 0x80) {
            *p = '?';
        }
    }
    j = json_string(copy);
    free(copy);
    return j;
}

static void emit(json_t *rec)
{
    char *line = json_dumps(rec, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER |
                                     JSON_REAL_PRECISION(9));
    FILE *out = NULL;

    if (line == NULL) {
        return;
    }
    pthread_mutex_lock(&g_lock);
    out = g_stream != NULL ? g_stream : stderr;
    fputs(line, out);
    fputc('\n', out);
    fflush(out);
    pthread_mutex_unlock(&g_lock);
    free(line);
}

void fs_log(enum fs_log_level level, const char *msg, json_t *fields)
{
    char ts[96];
    json_t *rec = NULL;
    const char *key = NULL;
    json_t *val = NULL;

    if (!fs_log_enabled(level)) {
        goto out;
    }
    rec = json_object();
    if (rec == NULL) {
        goto out;
    }
    format_ts(ts, sizeof ts);
    json_object_set_new(rec, "ts", json_string(ts));
    json_object_set_new(rec, "level", json_string(fs_log_level_name(level)));
    json_object_set_new(rec, "msg", safe_string(msg != NULL ? msg : ""));
    if (json_is_object(fields)) {
        json_object_foreach(fields, key, val)
        {
            if (strcmp(key, "ts") != 0 && strcmp(key, "level") != 0 && strcmp(key, "msg") != 0) {
                json_object_set(rec, key, val);
            }
        }
    }
    emit(rec);
out:
    json_decref(rec);
    json_decref(fields);
}

void fs_log_pack(enum fs_log_level level, const char *msg, const char *fmt, ...)
{
    json_t *fields = NULL;
    json_error_t jerr;
    va_list ap;

    if (!fs_log_enabled(level)) {
        return;
    }
    va_start(ap, fmt);
    fields = json_vpack_ex(&jerr, 0, fmt, ap);
    va_end(ap);
    if (!json_is_object(fields)) {
        json_decref(fields);
        fields = json_pack("{s:s}", "log_error", "bad fields format");
    }
    fs_log(level, msg, fields);
}

void fs_logf(enum fs_log_level level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    if (!fs_log_enabled(level)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fs_log(level, msg, NULL);
}
