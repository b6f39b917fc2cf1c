/* The wire names of a job's phases (the "phase" of the Job and Aggregation
 * documents, openapi.yaml) and of its timed phases (the keys of the Job's
 * "timings" and "bytes_by_phase"). The phases themselves are the server's
 * job state machine's (lib/proto/jobsm.h). */
#ifndef FS_API_PHASE_H
#define FS_API_PHASE_H

#include "../lib/proto/jobsm.h"

/** "waiting_for_parties", "share_keys", ..., "done", "failed" ("unknown" out of range). */
const char *fs_job_phase_name(enum fs_job_phase ph);

/** The phase of a wire name. @return 0, or -1 for an unknown name. */
int fs_job_phase_parse(const char *name, enum fs_job_phase *out);

/** Key of phase t's timing ("advertise_keys", ...), t < FS_JOB_NTIMED; NULL otherwise. */
const char *fs_job_timing_name(enum fs_job_phase t);

#endif
