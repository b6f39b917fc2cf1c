/* The services' testing stop points: the shared part (see teststop.h). */
#include "teststop.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/fdio.h"
#include "log.h"

static char g_marker[4200];
static atomic_flag g_fired = ATOMIC_FLAG_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_released;

/* "NAME" or "NAME:N" of kind. */
static int parse(const char *v, const struct fs_teststop_kind *kind, struct fs_err *err)
{
    const char *colon = strchr(v, ':');
    size_t len = colon != NULL ? (size_t)(colon - v) : strlen(v);
    char name[64];
    char *end = NULL;
    unsigned long u = 0;

    if (len > 0 && len < sizeof name && colon != NULL) {
        errno = 0;
        u = strtoul(colon + 1, &end, 10);
    }
    if (len == 0 || len >= sizeof name ||
        (colon != NULL && (colon[1] < '0' || colon[1] > '9' || end == NULL || *end != '\0' ||
                           errno != 0 || u > UINT32_MAX))) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected %s", FS_TESTSTOP_ENV, kind->form);
    }
    memcpy(name, v, len);
    name[len] = '\0';
    if (kind->accept(name, colon != NULL ? (long)u : -1) != 0) {
        return fs_err_set(err, FS_EFORMAT, "%s: '%s' cannot be %s stop point (%s)", FS_TESTSTOP_ENV,
                          v, kind->whose, kind->names);
    }
    return 0;
}

int fs_teststop_arm(const char *data_dir, const struct fs_teststop_kind *kind, int *armed,
                    struct fs_err *err)
{
    const char *v = getenv(FS_TESTSTOP_ENV);
    int rc;

    *armed = 0;
    if (v == NULL || v[0] == '\0') {
        return 0;
    }
    if ((rc = parse(v, kind, err)) != 0) {
        return rc;
    }
    if ((size_t)snprintf(g_marker, sizeof g_marker, "%s/%s", data_dir, FS_TESTSTOP_MARKER) >=
        sizeof g_marker) {
        return fs_err_set(err, FS_EFORMAT, "%s: the data directory's path is too long",
                          FS_TESTSTOP_ENV);
    }
    if (access(g_marker, F_OK) == 0) {
        fs_log_pack(FS_LOG_WARN,
                    "test stop point already reached in this data directory: not armed",
                    "{s:s, s:s}", "stop_at", v, "marker", g_marker);
        return 0;
    }
    *armed = 1;
    fs_log_pack(FS_LOG_WARN, "test stop point armed (a testing aid; never set it in production)",
                "{s:s}", "stop_at", v);
    return 0;
}

int fs_teststop_claim(void)
{
    return !atomic_flag_test_and_set(&g_fired);
}

void fs_teststop_mark(json_t *o, const char *msg)
{
    struct fs_err err = {0};
    char *doc = NULL;

    if (o != NULL && json_object_set_new(o, "pid", json_integer((json_int_t)getpid())) == 0) {
        doc = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    }
    fs_log_pack(FS_LOG_WARN, msg, "{s:s}", "marker", doc != NULL ? doc : "?");
    if (doc == NULL || fs_write_file_atomic(g_marker, doc, strlen(doc), &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot write the test stop point's marker", "{s:s}", "error",
                    doc == NULL ? "out of memory" : err.msg);
    }
    free(doc);
    json_decref(o);
}

void fs_teststop_hold(void)
{
    pthread_mutex_lock(&g_mu);
    while (!g_released) {
        pthread_cond_wait(&g_cv, &g_mu);
    }
    pthread_mutex_unlock(&g_mu);
}

void fs_teststop_release(void)
{
    pthread_mutex_lock(&g_mu);
    g_released = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}
