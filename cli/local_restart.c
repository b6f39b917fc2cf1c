/* fedsvd local --restart SERVICE@PHASE[:R]: when the job reaches the
 * phase, SIGKILL the service and start it again on the same port with the
 * same data directory; summary.json records each restart. The aggregation
 * server's, the agents' and the masking server's keys restarts are placed
 * by their testing stop points (the service holds there and says so with a
 * marker file), the others by the job's polls. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "local.h"
#include "orch.h"

/* ---- --restart: kill a service when the job reaches a phase ---- */

/* The wall clock: seconds since the epoch. */
static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "2026-11-26T18:40:02.125Z" */
static void iso8601(double t, char *buf, size_t cap)
{
    time_t sec = (time_t)t;
    struct tm tm;
    char base[24];

    if (gmtime_r(&sec, &tm) == NULL || strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(buf, cap, "?");
        return;
    }
    snprintf(buf, cap, "%s.%03dZ", base, (int)((t - (double)sec) * 1000.0) % 1000);
}

static const char *restart_name(const struct local *L, const struct local_restart *r)
{
    return local_restart_proc((struct local *)L, r)->name;
}

/* The PHASE of r's spec: a job phase, begin or keys. */
static const char *restart_phase(const struct local_restart *r)
{
    return r->keys ? "keys" : r->begin ? "begin" : fs_job_phase_name(r->phase);
}

/* SIGKILL p, start it again on its port with its data directory and
 * arguments, and wait until it answers /readyz. A start that exits at once
 * (its port still held a moment) is tried again, on the same port. */
static int kill_and_restart(struct local *L, struct proc *p, double *down_s)
{
    const int is_server = p == &L->masker || local_is_server_proc(L, p);
    double t0 = cli_now();
    fs_httpc *probe = NULL;
    struct fs_err err;
    int tries = 0, rc = CLI_OK;

    fs_err_clear(&err);
    if (local_proc_running(p)) {
        int st = 0;

        kill(p->pid, SIGKILL);
        if (waitpid(p->pid, &st, 0) == p->pid) {
            p->reaped = 1;
            p->status = st;
        }
    }
    if ((rc = local_start_proc(L, p, p->port, is_server)) != CLI_OK) {
        return rc;
    }
    if (orch_client(&probe, p->url, NULL, 1000, 0, NULL, &err) != 0) {
        return cli_fs_error(L->cmd, &err);
    }
    for (;;) {
        struct fs_httpc_req rq;
        struct fs_httpc_resp resp;
        int ok;

        if (local_interrupted() != 0) {
            rc = cli_runtime_error(L->cmd, "interrupted by signal %d", local_interrupted());
            break;
        }
        if (!local_proc_running(p)) {
            char st[64];

            local_describe_status(p, st, sizeof st);
            if (++tries >= SPAWN_ATTEMPTS) {
                rc = cli_runtime_error(L->cmd,
                                       "--restart: %s did not start again on port %u (%s; log: "
                                       "%s/logs/%s.log)",
                                       p->name, (unsigned)p->port, st, L->out, p->name);
                break;
            }
            orch_sleep_ms(200);
            if ((rc = local_start_proc(L, p, p->port, is_server)) != CLI_OK) {
                break;
            }
            continue;
        }
        if (cli_now() - t0 > READY_TIMEOUT_S) {
            rc = cli_runtime_error(L->cmd,
                                   "--restart: %s did not become ready again within %.0f s "
                                   "(log: %s/logs/%s.log)",
                                   p->name, READY_TIMEOUT_S, L->out, p->name);
            break;
        }
        memset(&rq, 0, sizeof rq);
        memset(&resp, 0, sizeof resp);
        rq.method = "GET";
        rq.path = "/readyz";
        rq.retry = FS_HTTPC_RETRY_NEVER;
        ok = fs_httpc_do(probe, &rq, &resp, &err) == 0 && resp.status == 200;
        fs_httpc_resp_clear(&resp);
        if (ok) {
            break;
        }
        orch_sleep_ms(5);
    }
    fs_httpc_free(probe);
    *down_s = cli_now() - t0;
    return rc;
}

/* Kill and restart r's service, killed in phase ph of aggregation agg. */
static int fire(struct local *L, struct local_restart *r, enum fs_job_phase ph, uint32_t agg)
{
    struct proc *p = local_restart_proc(L, r);
    char buf[160];
    int rc;

    r->fired = 1;
    r->killed_phase = ph;
    r->killed_round = agg;
    r->after_s = L->t_created > 0 ? cli_now() - L->t_created : 0.0;
    r->at_epoch = wall_now();
    if ((rc = kill_and_restart(L, p, &r->down_s)) != CLI_OK) {
        return rc;
    }
    snprintf(buf, sizeof buf, "restarted %s in %s (aggregation %u), down %.2f s", p->name,
             fs_job_phase_name(r->killed_phase), (unsigned)r->killed_round, r->down_s);
    orch_progress_text(&L->prog, buf);
    return CLI_OK;
}

/* Fire every --restart whose phase the job has reached: the phase itself,
 * or, when the polls missed it (a short phase), the first later one seen;
 * but the aggregation server's, which its stop point places exactly.
 * *pause: milliseconds to the next poll while a restart is pending: none
 * to speak of when its phase is at most two aggregations away (a small
 * job's phases last milliseconds, the whole job less than one 50 ms poll),
 * 10 ms when it is further; -1 when none is pending. */
int local_fire_restarts(struct local *L, long *pause)
{
    const struct fs_job_status *st = L->status;
    uint64_t now;

    *pause = -1;
    if (L->nrestarts == 0 || !st->phase_known || st->state != FS_JOB_STATE_RUNNING) {
        return CLI_OK;
    }
    now = local_timeline_pos(st->phase_id, st->aggregation, st->aggregations);
    for (size_t i = 0; i < L->nrestarts; i++) {
        struct local_restart *r = &L->restarts[i];
        uint64_t target = local_restart_target(r, st->aggregations);
        int rc;

        if (r->fired || local_restart_of_server(r) || local_restart_by_stop(r)) {
            continue; /* local_fire_stopped, local_fire_created */
        }
        if (now < target) {
            long ms = target - now <= 10 ? 1 : 10;
            *pause = *pause < 0 || ms < *pause ? ms : *pause;
            continue;
        }
        if ((rc = fire(L, r, st->phase_id, st->aggregation)) != CLI_OK) {
            return rc;
        }
    }
    return CLI_OK;
}

/* Fire p's --restart whose stop point p reached (its marker is there). */
static int fire_stopped(struct local *L, struct proc *p)
{
    struct local_restart *r = local_stop_restart(L, p);
    char path[LOCAL_PATH + 32];
    json_t *m;
    const char *ph = NULL;
    json_int_t agg = 0;
    enum fs_job_phase phase = L->status->phase_known ? L->status->phase_id : FS_JOB_ADVERTISE;
    int bad;

    if (r == NULL) {
        return CLI_OK;
    }
    snprintf(path, sizeof path, "%s/%s", p->dir, LOCAL_STOP_MARKER);
    m = json_load_file(path, 0, NULL);
    if (m == NULL) {
        return CLI_OK; /* not there (yet) */
    }
    if (r->keys) {
        /* {"maskset", "job", "phase": "keys", "party", "pid"}: killed in
         * the job's phase as last seen */
        bad = json_unpack(m, "{s:s}", "phase", &ph) != 0 || strcmp(ph, "keys") != 0;
        agg = (json_int_t)L->status->aggregation;
    } else {
        /* {"job", "phase", "aggregation", "pid"} (an agent's also
         * "participation"): where the service holds the job */
        bad = json_unpack(m, "{s:s, s:I}", "phase", &ph, "aggregation", &agg) != 0 ||
              fs_job_phase_parse(ph, &phase) != 0 || agg < 0 || agg > (json_int_t)UINT32_MAX;
    }
    json_decref(m);
    if (bad) {
        return cli_runtime_error(L->cmd, "--restart %s: %s is not %s's stop point marker", r->spec,
                                 path, p->name);
    }
    /* gone before the service starts again: it may be armed for the next one */
    (void)unlink(path);
    return fire(L, r, phase, (uint32_t)agg);
}

int local_fire_stopped(struct local *L)
{
    int rc = CLI_OK;

    if (!local_stop_pending(L)) {
        return CLI_OK;
    }
    rc = fire_stopped(L, &L->server);
    for (size_t i = 0; rc == CLI_OK && i < L->k; i++) {
        rc = fire_stopped(L, &L->agents[i]);
    }
    if (rc == CLI_OK && L->fed) {
        rc = fire_stopped(L, &L->masker);
    }
    return rc;
}

int local_fire_created(struct local *L)
{
    for (size_t i = 0; i < L->nrestarts; i++) {
        struct local_restart *r = &L->restarts[i];
        int rc;

        if (!r->fired && local_restart_of_server(r) && r->phase == FS_JOB_ADVERTISE &&
            (rc = fire(L, r, FS_JOB_ADVERTISE, 0)) != CLI_OK) {
            return rc;
        }
    }
    return CLI_OK;
}

json_t *local_restarts_json(const struct local *L)
{
    json_t *a = json_array();
    const int finished = L->status != NULL && L->status->state == FS_JOB_STATE_DONE;

    for (size_t i = 0; a != NULL && i < L->nrestarts; i++) {
        const struct local_restart *r = &L->restarts[i];
        json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:b}", "spec", r->spec, "service",
                              restart_name(L, r), "phase", restart_phase(r), "aggregation",
                              r->round >= 0 ? json_integer((json_int_t)r->round) : json_null(),
                              "fired", r->fired);

        if (o == NULL) {
            continue;
        }
        if (r->fired) {
            char when[32];

            iso8601(r->at_epoch, when, sizeof when);
            json_object_set_new(o, "killed_in",
                                json_pack("{s:s, s:I}", "phase", fs_job_phase_name(r->killed_phase),
                                          "aggregation", (json_int_t)r->killed_round));
            /* keys: placed by the masking server's stop point, never late */
            json_object_set_new(
                o, "late",
                json_boolean(!r->keys && (r->killed_phase != r->phase ||
                                          (r->round >= 0 && r->killed_round != r->round))));
            json_object_set_new(o, "at", json_string(when));
            json_object_set_new(o, "after_s", json_real(r->after_s));
            json_object_set_new(o, "down_s", json_real(r->down_s));
        }
        json_object_set_new(o, "job_finished", json_boolean(finished));
        json_array_append_new(a, o);
    }
    return a;
}

void local_print_restarts(const struct local *L)
{
    for (size_t i = 0; i < L->nrestarts; i++) {
        const struct local_restart *r = &L->restarts[i];

        if (!r->fired) {
            printf("  --restart %s: not done, the job ended before %s\n", r->spec,
                   restart_phase(r));
            continue;
        }
        printf("  --restart %s: %s killed in %s (aggregation %u) after %.2f s, down %.2f s\n",
               r->spec, restart_name(L, r), fs_job_phase_name(r->killed_phase),
               (unsigned)r->killed_round, r->after_s, r->down_s);
    }
}

/* A --restart that did not happen is worth a line on stderr. */
void local_warn_unfired(const struct local *L)
{
    for (size_t i = 0; i < L->nrestarts; i++) {
        if (!L->restarts[i].fired) {
            fprintf(stderr,
                    "fedsvd %s: --restart %s: the job ended before %s; nothing was killed\n",
                    L->cmd, L->restarts[i].spec, restart_phase(&L->restarts[i]));
        }
    }
}

void local_pause(const struct local *L, long ms)
{
    if (!local_stop_pending(L)) {
        orch_sleep_ms(ms);
        return;
    }
    /* a service may reach its stop point meanwhile: look every 2 ms */
    for (long t = 0; t < ms && !local_stop_marker(L) && local_interrupted() == 0; t += 2) {
        orch_sleep_ms(ms - t < 2 ? ms - t : 2);
    }
}
