/* The long-poll query of GET /v1/jobs/{job} (openapi.yaml, getJob):
 * ?wait_ms=N&phase=P&aggregation=R asks the server to answer once the job
 * is no longer in phase P of aggregation R, or after N milliseconds. */
#ifndef FS_API_JOBWAIT_H
#define FS_API_JOBWAIT_H

#include <stdint.h>

#include "../lib/core/err.h"
#include "../lib/proto/jobsm.h"

struct fs_job_wait {
    int wait;                /* wait_ms was given: a long poll */
    uint32_t ms;             /* 0..max_ms */
    enum fs_job_phase phase; /* the phase waited out */
    uint32_t aggregation;    /* and its aggregation */
};

/**
 * A path or query number: a decimal integer of at most 19 digits, without
 * sign or leading zeros, at most max. @return 0, or -1 (s NULL or empty,
 * other characters, too large).
 */
FS_WUR int fs_wire_parse_dec(const char *s, uint64_t max, uint64_t *out);

/**
 * Parse the query's values (each NULL when absent). No wait_ms: not a long
 * poll (out->wait = 0; phase and aggregation are not looked at). With
 * wait_ms: a decimal integer 0..max_ms without leading zeros, phase a phase
 * name (api/phase.h) and aggregation a decimal integer 0..UINT32_MAX, all
 * three required. @return 0 or FS_EFORMAT (the message names the rule, not
 * the values).
 */
FS_WUR int fs_job_wait_parse(const char *wait_ms, const char *phase, const char *aggregation,
                             uint32_t max_ms, struct fs_job_wait *out, struct fs_err *err);

#endif
