/* Phase wire names: see phase.h. */
#include "phase.h"

#include <string.h>

static const char *const PHASE_NAME[] = {
    "waiting_for_parties", "share_keys", "exponents",   "masked_input",
    "consistency",         "unmasking",  "factorizing", "noise_exchange",
    "plain_upload",        "done",       "failed"};

static const char *const TIMING_NAME[FS_JOB_NTIMED] = {
    "advertise_keys", "share_keys",  "exponents",      "masked_input", "consistency",
    "unmasking",      "factorizing", "noise_exchange", "plain_upload"};

#define NPHASES ((int)(sizeof PHASE_NAME / sizeof PHASE_NAME[0]))

const char *fs_job_phase_name(enum fs_job_phase ph)
{
    return (int)ph >= 0 && (int)ph < NPHASES ? PHASE_NAME[ph] : "unknown";
}

int fs_job_phase_parse(const char *name, enum fs_job_phase *out)
{
    for (int i = 0; name != NULL && i < NPHASES; i++) {
        if (strcmp(name, PHASE_NAME[i]) == 0) {
            *out = (enum fs_job_phase)i;
            return 0;
        }
    }
    return -1;
}

const char *fs_job_timing_name(enum fs_job_phase t)
{
    return (int)t >= 0 && (int)t < FS_JOB_NTIMED ? TIMING_NAME[t] : NULL;
}
