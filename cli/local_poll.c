/* fedsvd local: the polls of the job while it runs (local_follow_job),
 * and where the --restart options fall on the job's timeline (which of
 * them the aggregation server's stop point places, and the next one). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "local.h"
#include "net/http_client.h"
#include "orch.h"

int local_job_poll(struct local *L, long wait_ms, long limit_ms, json_t **out, struct fs_err *err)
{
    char path[128 + ORCH_ID_MAX];
    struct fs_httpc_req rq;
    struct fs_httpc_resp resp;
    json_error_t jerr;
    int rc;

    *out = NULL;
    if (wait_ms > 0 && L->status->phase_known) {
        snprintf(path, sizeof path, "/v1/jobs/%s?wait_ms=%ld&phase=%s&aggregation=%u", L->job_id,
                 wait_ms, fs_job_phase_name(L->status->phase_id), (unsigned)L->status->aggregation);
    } else {
        snprintf(path, sizeof path, "/v1/jobs/%s", L->job_id);
        wait_ms = 0;
    }
    memset(&rq, 0, sizeof rq);
    rq.method = "GET";
    rq.path = path;
    rq.accept = "application/json, application/problem+json";
    rq.timeout_ms = limit_ms > 0 ? wait_ms + limit_ms : 0;
    rc = fs_httpc_do(L->server.http, &rq, &resp, err);
    if (rc == 0) {
        rc = fs_httpc_check(&resp, "GET", path, err);
    }
    if (rc == 0) {
        *out = resp.body != NULL ? json_loadb(resp.body, resp.len, 0, &jerr) : NULL;
        if (!json_is_object(*out)) {
            rc = fs_err_set(err, FS_EFORMAT, "GET %s: expected a JSON object", path);
        }
    }
    fs_httpc_resp_clear(&resp);
    if (rc == 0) {
        rc = fs_job_status_decode(*out, L->status, err);
    }
    if (rc != 0) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

/* 1 when p's stop point marker is there. */
static int marker_of(const struct proc *p)
{
    char path[LOCAL_PATH + 32];

    snprintf(path, sizeof path, "%s/%s", p->dir, LOCAL_STOP_MARKER);
    return access(path, F_OK) == 0;
}

int local_stop_marker(const struct local *L)
{
    for (size_t i = 0; i < L->nrestarts; i++) {
        const struct local_restart *r = &L->restarts[i];

        if (!r->fired && local_restart_by_stop(r) &&
            marker_of(local_restart_proc((struct local *)L, r))) {
            return 1;
        }
    }
    return 0;
}

int local_stop_reached(const struct local *L)
{
    return local_stop_pending(L) && local_stop_marker(L);
}

uint64_t local_timeline_pos(enum fs_job_phase ph, uint32_t r, uint32_t n)
{
    switch (ph) {
    case FS_JOB_ADVERTISE:
        return 0;
    case FS_JOB_SHARE_KEYS:
        return 1;
    case FS_JOB_EXPONENTS:
    case FS_JOB_MASKED_INPUT:
    case FS_JOB_CONSISTENCY:
    case FS_JOB_UNMASKING:
        return 10 + 5 * (uint64_t)r + (uint64_t)(ph - FS_JOB_EXPONENTS);
    case FS_JOB_PLAIN_UPLOAD:
        return 10 + 5 * (uint64_t)r + 1;
    case FS_JOB_NOISE_EXCHANGE:
        return 10 + 5 * (uint64_t)r + 4;
    case FS_JOB_FACTORIZING:
        return 10 + 5 * (uint64_t)n;
    default:
        return UINT64_MAX;
    }
}

uint64_t local_restart_target(const struct local_restart *r, uint32_t n)
{
    if (r->begin) {
        return local_timeline_pos(FS_JOB_SHARE_KEYS, 0, n) + 1; /* before aggregation 0 */
    }
    return local_timeline_pos(r->phase, r->round >= 0 ? (uint32_t)r->round : 0, n);
}

int local_restart_of_server(const struct local_restart *r)
{
    return r->agent < 0 && !r->masker && r->shard == 0;
}

struct proc *local_restart_proc(struct local *L, const struct local_restart *r)
{
    return r->agent >= 0                      ? &L->agents[r->agent]
           : r->masker                        ? &L->masker
           : r->shard > 0 && L->peers != NULL ? &L->peers[r->shard - 1]
                                              : &L->server;
}

/* The aggregation server's (but at waiting_for_parties, local_fire_created),
 * every agent's, and the masking server's at keys. */
int local_restart_by_stop(const struct local_restart *r)
{
    return (local_restart_of_server(r) && r->phase != FS_JOB_ADVERTISE) || r->agent >= 0 || r->keys;
}

struct local_restart *local_stop_restart(const struct local *L, const struct proc *p)
{
    struct local_restart *next = NULL;

    for (size_t i = 0; i < L->nrestarts; i++) {
        struct local_restart *r = &L->restarts[i];

        /* n = UINT32_MAX: factorizing comes after every aggregation (and
         * done, UINT64_MAX, after everything); the masking server's keys
         * in the order given */
        if (!r->fired && local_restart_by_stop(r) &&
            local_restart_proc((struct local *)L, r) == p &&
            (next == NULL ||
             local_restart_target(r, UINT32_MAX) < local_restart_target(next, UINT32_MAX))) {
            next = r;
        }
    }
    return next;
}

int local_stop_at(const struct local *L, const struct proc *p, char *buf, size_t cap)
{
    const struct local_restart *r = local_stop_restart(L, p);

    if (r == NULL) {
        return 0;
    }
    if (r->keys && r->party > 0) {
        snprintf(buf, cap, "keys:%ld", r->party);
    } else if (r->keys || r->begin) {
        snprintf(buf, cap, "%s", r->keys ? "keys" : "begin");
    } else if (r->round >= 0) {
        snprintf(buf, cap, "%s:%ld", fs_job_phase_name(r->phase), r->round);
    } else {
        snprintf(buf, cap, "%s", fs_job_phase_name(r->phase));
    }
    return 1;
}

int local_stop_pending(const struct local *L)
{
    for (size_t i = 0; i < L->nrestarts; i++) {
        if (!L->restarts[i].fired && local_restart_by_stop(&L->restarts[i])) {
            return 1;
        }
    }
    return 0;
}
