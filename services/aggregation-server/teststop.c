/* The testing stop point FEDSVD_TEST_STOP_AT_PHASE (see teststop.h). */
#include "teststop.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "../../api/phase.h"
#include "core/fdio.h"
#include "net/log.h"

static struct {
    int armed; /* set once by agg_teststop_arm, before the jobs run */
    int begin; /* the pseudo-phase begin: before aggregation 0's begin */
    enum fs_job_phase phase;
    long r; /* -1: any aggregation */
    char marker[4200];
} g_stop;

static atomic_flag g_fired = ATOMIC_FLAG_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_released;

/* The phases a running job enters after its creation, and its end. */
static int stoppable(enum fs_job_phase ph)
{
    return ph != FS_JOB_ADVERTISE && ph != FS_JOB_FAILED;
}

/* "PHASE" or "PHASE:R" into g_stop. */
static int parse(const char *v, struct fs_err *err)
{
    char name[64];
    const char *colon = strchr(v, ':');
    size_t n = colon != NULL ? (size_t)(colon - v) : strlen(v);
    enum fs_job_phase ph;

    if (n >= sizeof name) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected PHASE[:R]", AGG_TESTSTOP_ENV);
    }
    memcpy(name, v, n);
    name[n] = '\0';
    g_stop.r = -1;
    if (strcmp(name, AGG_TESTSTOP_BEGIN) == 0) {
        g_stop.begin = 1;
        return colon != NULL ? fs_err_set(err, FS_EFORMAT,
                                          "%s: begin happens once, before aggregation 0: no :R",
                                          AGG_TESTSTOP_ENV)
                             : 0;
    }
    if (fs_job_phase_parse(name, &ph) != 0 || !stoppable(ph)) {
        return fs_err_set(err, FS_EFORMAT,
                          "%s: '%s' cannot be a stop point (one of share_keys, exponents, "
                          "masked_input, consistency, unmasking, factorizing, noise_exchange, "
                          "plain_upload, done, begin)",
                          AGG_TESTSTOP_ENV, name);
    }
    g_stop.phase = ph;
    if (colon != NULL) {
        char *end = NULL;
        unsigned long r;

        errno = 0;
        r = strtoul(colon + 1, &end, 10);
        if (colon[1] < '0' || colon[1] > '9' || end == NULL || *end != '\0' || errno != 0 ||
            r > UINT32_MAX) {
            return fs_err_set(err, FS_EFORMAT, "%s: R of PHASE:R must be an aggregation number",
                              AGG_TESTSTOP_ENV);
        }
        g_stop.r = (long)r;
    }
    return 0;
}

int agg_teststop_arm(const char *data_dir, struct fs_err *err)
{
    const char *v = getenv(AGG_TESTSTOP_ENV);
    int rc;

    if (v == NULL || v[0] == '\0') {
        return 0;
    }
    if ((rc = parse(v, err)) != 0) {
        return rc;
    }
    if ((size_t)snprintf(g_stop.marker, sizeof g_stop.marker, "%s/%s", data_dir,
                         AGG_TESTSTOP_MARKER) >= sizeof g_stop.marker) {
        return fs_err_set(err, FS_EFORMAT, "%s: the data directory's path is too long",
                          AGG_TESTSTOP_ENV);
    }
    if (access(g_stop.marker, F_OK) == 0) {
        fs_log_pack(FS_LOG_WARN,
                    "test stop point already reached in this data directory: not armed",
                    "{s:s, s:s}", "stop_at", v, "marker", g_stop.marker);
        return 0;
    }
    g_stop.armed = 1;
    fs_log_pack(FS_LOG_WARN, "test stop point armed (a testing aid; never set it in production)",
                "{s:s}", "stop_at", v);
    return 0;
}

/* Write the marker (ph, r: where the job is held) and hold the thread. */
static void hold(const char *job, enum fs_job_phase ph, uint32_t r)
{
    struct fs_err err = {0};
    json_t *o;
    char *doc;

    o = json_pack("{s:s, s:s, s:I, s:I}", "job", job, "phase", fs_job_phase_name(ph), "aggregation",
                  (json_int_t)r, "pid", (json_int_t)getpid());
    doc = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(o);
    fs_log_pack(FS_LOG_WARN, "test stop point reached: holding the job until the process is killed",
                "{s:s, s:s, s:i}", "job", job, "phase", fs_job_phase_name(ph), "aggregation",
                (int)r);
    if (doc == NULL || fs_write_file_atomic(g_stop.marker, doc, strlen(doc), &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot write the test stop point's marker", "{s:s}", "error",
                    doc == NULL ? "out of memory" : err.msg);
    }
    free(doc);
    pthread_mutex_lock(&g_mu);
    while (!g_released) {
        pthread_cond_wait(&g_cv, &g_mu);
    }
    pthread_mutex_unlock(&g_mu);
}

void agg_teststop_reached(const char *job, enum fs_job_phase ph, uint32_t r)
{
    if (g_stop.armed && !g_stop.begin && ph == g_stop.phase &&
        (g_stop.r < 0 || (long)r == g_stop.r) && !atomic_flag_test_and_set(&g_fired)) {
        hold(job, ph, r);
    }
}

void agg_teststop_before_begin(const char *job)
{
    if (g_stop.armed && g_stop.begin && !atomic_flag_test_and_set(&g_fired)) {
        hold(job, FS_JOB_SHARE_KEYS, 0);
    }
}

void agg_teststop_release(void)
{
    pthread_mutex_lock(&g_mu);
    g_released = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}
