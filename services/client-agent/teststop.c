/* The client agent's testing stop point (see teststop.h). */
#include "teststop.h"

#include <string.h>

#include <jansson.h>

#include "../../api/phase.h"
#include "net/teststop.h"

static struct {
    int armed;
    enum fs_job_phase phase;
    long r; /* -1: any aggregation */
} g_stop;

/* PHASE[:R] into g_stop. */
static int accept(const char *name, long r)
{
    g_stop.r = r;
    return fs_job_phase_parse(name, &g_stop.phase) != 0 || g_stop.phase == FS_JOB_DONE ||
           g_stop.phase == FS_JOB_FAILED;
}

static const struct fs_teststop_kind KIND = {
    "an agent's", "PHASE[:R]",
    "PHASE or PHASE:R, R an aggregation number, PHASE one of waiting_for_parties, share_keys, "
    "exponents, masked_input, consistency, unmasking, factorizing, noise_exchange, plain_upload",
    accept};

int ca_teststop_arm(const char *data_dir, struct fs_err *err)
{
    return fs_teststop_arm(data_dir, &KIND, &g_stop.armed, err);
}

void ca_teststop_seen(const char *part, const char *job, const char *phase, uint32_t r)
{
    if (g_stop.armed && strcmp(phase, fs_job_phase_name(g_stop.phase)) == 0 &&
        (g_stop.r < 0 || (long)r == g_stop.r) && fs_teststop_claim()) {
        fs_teststop_mark(json_pack("{s:s, s:s, s:s, s:I}", "participation", part, "job", job,
                                   "phase", phase, "aggregation", (json_int_t)r),
                         "test stop point reached: holding the participation until the "
                         "process is killed");
        fs_teststop_hold();
    }
}

void ca_teststop_release(void)
{
    fs_teststop_release();
}
