/* The testing stop point FEDSVD_TEST_STOP_AT_PHASE (see teststop.h; the
 * part the services share is net/teststop.h). */
#include "teststop.h"

#include <string.h>

#include <jansson.h>

#include "../../api/phase.h"
#include "net/teststop.h"

static struct {
    int armed; /* set once by agg_teststop_arm, before the jobs run */
    int begin; /* the pseudo-phase begin: before aggregation 0's begin */
    enum fs_job_phase phase;
    long r; /* -1: any aggregation */
} g_stop;

/* The phases a running job enters after its creation, and its end. */
static int stoppable(enum fs_job_phase ph)
{
    return ph != FS_JOB_ADVERTISE && ph != FS_JOB_FAILED;
}

/* PHASE[:R] (begin without R) into g_stop. */
static int accept(const char *name, long r)
{
    enum fs_job_phase ph;

    if (strcmp(name, AGG_TESTSTOP_BEGIN) == 0) {
        g_stop.begin = 1;
        return r >= 0;
    }
    if (fs_job_phase_parse(name, &ph) != 0 || !stoppable(ph)) {
        return -1;
    }
    g_stop.phase = ph;
    g_stop.r = r;
    return 0;
}

static const struct fs_teststop_kind KIND = {
    "the aggregation server's", "PHASE[:R]",
    "PHASE or PHASE:R, R an aggregation number, PHASE one of share_keys, exponents, "
    "masked_input, consistency, unmasking, factorizing, noise_exchange, plain_upload, done; "
    "or begin, without R",
    accept};

int agg_teststop_arm(const char *data_dir, struct fs_err *err)
{
    return fs_teststop_arm(data_dir, &KIND, &g_stop.armed, err);
}

/* Write the marker (ph, r: where the job is held) and hold the thread. */
static void hold(const char *job, enum fs_job_phase ph, uint32_t r)
{
    fs_teststop_mark(json_pack("{s:s, s:s, s:I}", "job", job, "phase", fs_job_phase_name(ph),
                               "aggregation", (json_int_t)r),
                     "test stop point reached: holding the job until the process is killed");
    fs_teststop_hold();
}

void agg_teststop_reached(const char *job, enum fs_job_phase ph, uint32_t r)
{
    if (g_stop.armed && !g_stop.begin && ph == g_stop.phase &&
        (g_stop.r < 0 || (long)r == g_stop.r) && fs_teststop_claim()) {
        hold(job, ph, r);
    }
}

void agg_teststop_before_begin(const char *job)
{
    if (g_stop.armed && g_stop.begin && fs_teststop_claim()) {
        hold(job, FS_JOB_SHARE_KEYS, 0);
    }
}

void agg_teststop_release(void)
{
    fs_teststop_release();
}
