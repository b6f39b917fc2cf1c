/* The long-poll query of GET /v1/jobs/{job} (see jobwait.h). */
#include "jobwait.h"

#include <string.h>

#include "phase.h"

int fs_wire_parse_dec(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    size_t n = 0;

    if (s == NULL || s[0] == '\0') {
        return -1;
    }
    for (; s[n] != '\0'; n++) {
        if (s[n] < '0' || s[n] > '9' || n >= 19) {
            return -1;
        }
        v = v * 10 + (uint64_t)(s[n] - '0');
    }
    if ((n > 1 && s[0] == '0') || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

int fs_job_wait_parse(const char *wait_ms, const char *phase, const char *aggregation,
                      uint32_t max_ms, struct fs_job_wait *out, struct fs_err *err)
{
    uint64_t ms = 0;
    uint64_t r = 0;

    memset(out, 0, sizeof *out);
    if (wait_ms == NULL) {
        return 0;
    }
    if (fs_wire_parse_dec(wait_ms, max_ms, &ms) != 0 ||
        fs_wire_parse_dec(aggregation, UINT32_MAX, &r) != 0 || phase == NULL ||
        fs_job_phase_parse(phase, &out->phase) != 0) {
        memset(out, 0, sizeof *out);
        return fs_err_set(err, FS_EFORMAT,
                          "wait_ms (0..%u) needs phase (a phase name) and aggregation", max_ms);
    }
    out->wait = 1;
    out->ms = (uint32_t)ms;
    out->aggregation = (uint32_t)r;
    return 0;
}
