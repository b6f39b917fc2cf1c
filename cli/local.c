/* The machinery of `fedsvd local` that every algorithm family shares
 * (cmd_local.c: secure-sum, fedsvd, fedpca; cmd_local_power.c: the power
 * methods; cmd_lsa.c): one aggregation-server (and for fedsvd/fedpca a
 * masking-server) and one client-agent per party as child processes on free
 * loopback ports, the run's temporary root and tokens, the agents'
 * participations, the job's progress, and the pieces of the summary.
 * Everything is stopped (SIGTERM, then SIGKILL after a grace period)
 * whatever happens — also on SIGINT/SIGTERM/SIGHUP. Children get
 * PR_SET_PDEATHSIG so they do not outlive a fedsvd that was SIGKILLed.
 *
 * Ports: a port is picked by binding 127.0.0.1:0 and closing the socket, so
 * another process can take it before the service binds it. A service that
 * exits before it is ready is restarted on a fresh port (a few times). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "cli.h"
#include "crypto/ed25519.h"
#include "jobdoc.h"
#include "local.h"
#include "net/auth.h"
#include "orch.h"

int local_start_services(struct local *L)
{
    struct proc **ps = NULL;
    uint16_t *ports = NULL;
    struct fs_err err;
    size_t nsrv = L->fed ? 2 : 1;
    size_t n = L->k + nsrv;
    int rc = CLI_OK;

    fs_err_clear(&err);
    ps = calloc(n, sizeof *ps);
    ports = calloc(n, sizeof *ports);
    if (ps == NULL || ports == NULL) {
        rc = cli_runtime_error(L->cmd, "out of memory");
        goto out;
    }
    /* --shards: the peers first, so that the server starts with their URLs */
    if ((rc = local_shards_start(L)) != CLI_OK) {
        goto out;
    }
    ps[0] = &L->server;
    if (L->fed) {
        ps[1] = &L->masker;
    }
    for (size_t i = 0; i < L->k; i++) {
        ps[i + nsrv] = &L->agents[i];
    }
    if (local_free_ports(n, ports) != 0) {
        rc = cli_runtime_error(L->cmd, "cannot find free ports: %s", strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rc = local_start_proc(L, ps[i], ports[i], i < nsrv)) != CLI_OK) {
            goto out;
        }
    }
    if ((rc = local_wait_ready(L, ps, n)) != CLI_OK) {
        goto out;
    }
    /* Clients with credentials, on the final ports. No whole-request limit
     * (sum.npy can be large); a transfer stalled for 30 s is aborted. */
    if (orch_client(&L->server.http, L->server.url, L->admin_tok, 0, 2, NULL, &err) != 0 ||
        (L->fed &&
         orch_client(&L->masker.http, L->masker.url, L->admin_tok, 0, 2, NULL, &err) != 0)) {
        rc = cli_fs_error(L->cmd, &err);
        goto out;
    }
    for (size_t i = 0; i < L->k; i++) {
        if (orch_client(&L->agents[i].http, L->agents[i].url, L->op_tok, 0, 2, NULL, &err) != 0) {
            rc = cli_fs_error(L->cmd, &err);
            goto out;
        }
    }
    /* each agent's identity, pinned in the job as a job creator would */
    free(L->party_keys);
    L->party_keys = calloc(L->k, sizeof *L->party_keys);
    if (L->party_keys == NULL) {
        rc = cli_runtime_error(L->cmd, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < L->k; i++) {
        if (orch_agent_identity(L->agents[i].http, L->party_keys[i], &err) != 0) {
            rc = cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
            goto out;
        }
    }
out:
    free(ports);
    free(ps);
    return rc;
}

int local_pin_spec(struct local *L, struct fs_job_spec *spec)
{
    struct fs_err err;

    fs_err_clear(&err);
    if (L->party_keys == NULL) {
        return cli_runtime_error(L->cmd, "the agents' identities are not known yet");
    }
    for (size_t i = 0; i < L->k; i++) {
        if (fs_ed25519_fpr_parse(L->party_keys[i], spec->party_keys[i], &err) != 0) {
            return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
        }
    }
    spec->has_pins = 1;
    spec->allow_unpinned = 0;
    return CLI_OK;
}

int local_post_job(struct local *L, struct fs_job_spec *spec, json_t **sent, json_t **invitations)
{
    struct fs_job_status *job = malloc(sizeof *job);
    json_t *body = NULL, *resp = NULL;
    const json_t *invs = NULL;
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    *invitations = NULL;
    if (sent != NULL) {
        *sent = NULL;
    }
    if ((rc = local_pin_spec(L, spec)) != CLI_OK ||
        (rc = orch_job_spec_json(L->cmd, spec, &body)) != CLI_OK) {
        free(job);
        return rc;
    }
    if (fs_httpc_json(L->server.http, "POST", "/v1/jobs", body, &resp, NULL, &err) != 0) {
        rc = cli_fs_error(L->cmd, &err);
        goto out;
    }
    if (job == NULL) {
        rc = cli_runtime_error(L->cmd, "out of memory");
        goto out;
    }
    if (fs_job_created_decode(resp, job, &invs, &err) != 0) {
        rc = cli_runtime_error(L->cmd, "POST /v1/jobs: %s", err.msg);
        goto out;
    }
    if (job->parties != L->k || !orch_id_ok(job->id)) {
        rc = cli_runtime_error(L->cmd,
                               "POST /v1/jobs: the response lacks a job id or %zu "
                               "invitations",
                               L->k);
        goto out;
    }
    snprintf(L->job_id, sizeof L->job_id, "%s", job->id);
    *invitations = json_incref((json_t *)invs);
    if (sent != NULL) {
        *sent = json_incref(body);
    }
out:
    free(job);
    json_decref(resp);
    json_decref(body);
    return rc;
}

const json_t *local_invitation_for(const json_t *invs, size_t party)
{
    /* local_post_job's invitations: entry i is party i + 1 (fs_job_created_decode) */
    return party >= 1 ? json_array_get(invs, party - 1) : NULL;
}

/* POST /v1/participations for agent i: its invitation, its file, and
 * --fail-party's fail_at (a testing aid the agents accept). */
static int join_body(struct local *L, size_t i, const json_t *inv, json_t **body)
{
    struct fs_invitation *iv = malloc(sizeof *iv);
    struct fs_err err;
    int rc = CLI_OK;

    fs_err_clear(&err);
    *body = NULL;
    if (iv == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    if (fs_invitation_decode(inv, iv, &err) != 0) {
        rc = cli_runtime_error(L->cmd, "POST /v1/jobs: the invitation of party %zu: %s", i + 1,
                               err.msg);
    } else if ((*body = fs_participation_request_encode(iv, L->files[i], "auto", NULL)) == NULL ||
               json_object_set_new(*body, "fail_at", local_fail_json(L, i)) != 0) {
        rc = cli_runtime_error(L->cmd, "out of memory");
    }
    fs_invitation_wipe(iv);
    free(iv);
    return rc;
}

int local_join_agents(struct local *L, const json_t *invs)
{
    struct fs_err err;

    fs_err_clear(&err);
    for (size_t i = 0; i < L->k; i++) {
        const json_t *inv = local_invitation_for(invs, i + 1);
        json_t *body = NULL, *resp = NULL;
        struct fs_participation pst;
        int rc = CLI_OK;

        if (inv == NULL) {
            return cli_runtime_error(L->cmd, "POST /v1/jobs: no invitation for party %zu", i + 1);
        }
        if ((rc = join_body(L, i, inv, &body)) != CLI_OK) {
            return rc;
        }
        if (fs_httpc_json(L->agents[i].http, "POST", "/v1/participations", body, &resp, NULL,
                          &err) != 0) {
            rc = cli_runtime_error(L->cmd, "party %zu (%s): %s", i + 1, L->shown[i], err.msg);
        } else {
            if (fs_participation_decode(resp, &pst, &err) != 0) {
                rc = cli_runtime_error(L->cmd, "%s: POST /v1/participations: %s", L->agents[i].name,
                                       err.msg);
            } else {
                L->part_ids[i] = strdup(pst.id);
                json_array_set(L->parts, i, resp);
            }
        }
        json_decref(resp);
        json_decref(body);
        if (rc != CLI_OK) {
            return rc;
        }
        if (L->part_ids[i] == NULL) {
            return cli_runtime_error(L->cmd, "out of memory");
        }
    }
    return CLI_OK;
}

/* A server that died, or an agent that crashed (an agent told to fail stays up). */
static int check_children(struct local *L)
{
    char st[64];

    if (!local_proc_running(&L->server)) {
        local_describe_status(&L->server, st, sizeof st);
        return cli_runtime_error(L->cmd,
                                 "aggregation-server stopped unexpectedly (%s); see %s/logs/%s.log",
                                 st, L->out, L->server.name);
    }
    if (L->fed && !local_proc_running(&L->masker)) {
        local_describe_status(&L->masker, st, sizeof st);
        return cli_runtime_error(L->cmd,
                                 "masking-server stopped unexpectedly (%s); see %s/logs/%s.log", st,
                                 L->out, L->masker.name);
    }
    if (local_shards_check(L) != CLI_OK) {
        return CLI_ERUNTIME;
    }
    for (size_t i = 0; i < L->k; i++) {
        if (!local_proc_running(&L->agents[i])) {
            local_describe_status(&L->agents[i], st, sizeof st);
            return cli_runtime_error(L->cmd,
                                     "%s (party %zu) stopped unexpectedly (%s); see %s/logs/%s.log",
                                     L->agents[i].name, i + 1, st, L->out, L->agents[i].name);
        }
    }
    return CLI_OK;
}

/* Follow the job until it ends, firing the --restart options on the way.
 * With none pending it long-polls the job (the server answers when the
 * phase or aggregation changes, at the latest after LOCAL_LONG_POLL_MS);
 * a restart timed by the polls (the masking server's at a job phase, a
 * shard peer's) polls every LOCAL_POLL_MS or faster; one placed by a
 * service's stop point (the aggregation server's, an agent's, the masking
 * server's at keys) waits for its marker, looked for every 2 ms. */
int local_follow_job(struct local *L)
{
    struct fs_err err;
    double t0 = cli_now();
    long pause = -1;
    int rc;

    fs_err_clear(&err);
    for (;;) {
        json_t *job = NULL;
        const int stop = local_stop_pending(L);
        /* long poll: no restart to time, and the last poll saw the job */
        const long wait = !stop && pause < 0 && L->job != NULL ? LOCAL_LONG_POLL_MS : 0;
        const enum fs_job_phase seen = L->status->phase_id;
        const uint32_t seen_r = L->status->aggregation;
        const double t_poll = cli_now();

        if ((rc = check_children(L)) != CLI_OK || (rc = local_fire_stopped(L)) != CLI_OK) {
            orch_progress_done(&L->prog);
            return rc;
        }
        /* a server held at its stop point may leave a poll unanswered (an
         * HTTP thread of its may wait for the held job): give up after 3 s
         * (a busy host answers well within that), then the marker says
         * whether to kill it */
        if (local_job_poll(L, wait, stop ? 3000 : wait > 0 ? 5000 : 0, &job, &err) != 0) {
            if (stop && local_stop_reached(L)) {
                continue;
            }
            orch_progress_done(&L->prog);
            return cli_fs_error(L->cmd, &err);
        }
        json_decref(L->job);
        L->job = job;
        orch_progress_job(&L->prog, L->status);
        if (L->status->state != FS_JOB_STATE_RUNNING) {
            /* an agent held at its stop point after its last message (in
             * factorizing): restarted, it fetches the result */
            rc = local_fire_stopped(L);
            orch_progress_done(&L->prog);
            local_warn_unfired(L);
            return rc;
        }
        if ((rc = local_fire_restarts(L, &pause)) != CLI_OK) {
            orch_progress_done(&L->prog);
            return rc;
        }
        if (local_interrupted() != 0) {
            orch_progress_done(&L->prog);
            return cli_runtime_error(L->cmd, "interrupted by signal %d", local_interrupted());
        }
        if (cli_now() - t0 > L->timeout) {
            orch_progress_done(&L->prog);
            return cli_runtime_error(L->cmd, "timed out after %.0f s in phase %s (--timeout)",
                                     L->timeout, L->status->phase);
        }
        /* a long poll answered at once with nothing new (a server without
         * them) is no wait: the next poll comes after LOCAL_POLL_MS */
        if (pause >= 0 || stop || wait == 0 ||
            (seen == L->status->phase_id && seen_r == L->status->aggregation &&
             cli_now() - t_poll < 0.001 * LOCAL_POLL_MS)) {
            local_pause(L, pause >= 0 ? pause : LOCAL_POLL_MS);
        }
    }
}

/* 1 when p is a Participation in state a (or b, when not NULL). */
static int part_state_is(const json_t *p, const char *a, const char *b)
{
    struct fs_participation st;
    struct fs_err err;

    fs_err_clear(&err);
    if (!json_is_object(p) || fs_participation_decode(p, &st, &err) != 0) {
        return 0;
    }
    return strcmp(st.state, a) == 0 || (b != NULL && strcmp(st.state, b) == 0);
}

int local_part_terminal(const json_t *p)
{
    return part_state_is(p, "done", "failed");
}

int local_part_done(const json_t *p)
{
    return part_state_is(p, "done", NULL);
}

int local_poll_agents(struct local *L, size_t *open)
{
    struct fs_err err;

    fs_err_clear(&err);
    *open = 0;
    for (size_t i = 0; i < L->k; i++) {
        char path[64 + ORCH_ID_MAX];
        json_t *p = NULL;

        if (L->part_ids[i] == NULL || local_part_terminal(json_array_get(L->parts, i))) {
            continue;
        }
        snprintf(path, sizeof path, "/v1/participations/%s", L->part_ids[i]);
        if (fs_httpc_json(L->agents[i].http, "GET", path, NULL, &p, NULL, &err) != 0) {
            return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
        }
        json_array_set_new(L->parts, i, p);
        *open += !local_part_terminal(p);
    }
    return CLI_OK;
}

/* Poll every participation until it is done or failed (or `wait_s` passes):
 * the agents fetch the result after the server has it. */
int local_settle_agents(struct local *L, double wait_s)
{
    double t0 = cli_now();

    for (;;) {
        size_t open = 0;
        int rc = local_fire_stopped(L); /* an agent held at its stop point */

        if (rc == CLI_OK) {
            rc = local_poll_agents(L, &open);
        }
        if (rc != CLI_OK) {
            return rc;
        }
        if (open == 0 || cli_now() - t0 > wait_s || local_interrupted() != 0) {
            return CLI_OK;
        }
        orch_progress_text(&L->prog, "waiting for the agents to finish");
        orch_sleep_ms(LOCAL_POLL_MS);
    }
}

int local_manifest_sha(const json_t *m, const char *name, char sha[65])
{
    struct fs_result_file files[FS_RESULT_FILES_MAX];
    struct fs_err err;
    size_t n = 0;

    fs_err_clear(&err);
    if (!json_is_object(m) || fs_result_files_decode(m, 0, files, &n, &err) != 0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(files[i].name, name) == 0) {
            memcpy(sha, files[i].sha256, sizeof files[i].sha256);
            return 1;
        }
    }
    return 0;
}

/* Peak resident memory of a running child (VmHWM, kB), or -1. */
long long local_read_hwm_kb(pid_t pid)
{
    char path[64], line[256];
    long long kb = -1;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            char *end = NULL;
            long long v = strtoll(line + 6, &end, 10);
            if (end != line + 6 && v >= 0) {
                kb = v;
            }
            break;
        }
    }
    fclose(f);
    return kb;
}

/* CPU seconds (user + system, all threads) a running child used so far, from
 * /proc/PID/stat fields 14 and 15, or -1. */
static double read_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long long ut = 0, st = 0;
    const char *p;
    size_t n;
    FILE *f;
    long hz = sysconf(_SC_CLK_TCK);

    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (p == NULL || hz <= 0 ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) {
        return -1;
    }
    return (double)(ut + st) / (double)hz;
}

/* A counter of a service's /metrics, or -1. */
static double scrape_metric(struct proc *p, const char *name)
{
    struct fs_httpc_req rq;
    struct fs_httpc_resp resp;
    struct fs_err err;
    double v = -1;

    fs_err_clear(&err);
    memset(&rq, 0, sizeof rq);
    memset(&resp, 0, sizeof resp);
    rq.method = "GET";
    rq.path = "/metrics";
    rq.retry = FS_HTTPC_RETRY_NEVER;
    if (p->http != NULL && fs_httpc_do(p->http, &rq, &resp, &err) == 0 && resp.status == 200 &&
        resp.body != NULL) {
        size_t n = strlen(name);
        for (const char *l = resp.body; l != NULL && *l != '\0';) {
            if (strncmp(l, name, n) == 0 && l[n] == ' ') {
                char *end = NULL;
                double x = strtod(l + n + 1, &end);
                if (end != l + n + 1) {
                    v = x;
                }
                break;
            }
            l = strchr(l, '\n');
            l = l != NULL ? l + 1 : NULL;
        }
    }
    fs_httpc_resp_clear(&resp);
    return v;
}

/* ---- summary ---- */

json_t *local_proc_json(const struct proc *p)
{
    json_t *o = json_pack("{s:s, s:I, s:b}", "name", p->name, "port", (json_int_t)p->port,
                          "sigkilled", p->killed);

    if (o == NULL) {
        return NULL;
    }
    if (p->reaped && WIFEXITED(p->status)) {
        json_object_set_new(o, "exit_code", json_integer(WEXITSTATUS(p->status)));
    } else if (p->reaped && WIFSIGNALED(p->status)) {
        json_object_set_new(o, "signal", json_integer(WTERMSIG(p->status)));
    } else {
        json_object_set_new(o, "exit_code", json_null());
    }
    json_object_set_new(o, "starts", json_integer(p->attempts));
    json_object_set_new(o, "cpu_seconds", p->cpu_s >= 0 ? json_real(p->cpu_s) : json_null());
    return o;
}

int local_id_in(const json_t *arr, size_t id)
{
    size_t i;
    json_t *v;

    json_array_foreach(arr, i, v)
    {
        if (json_integer_value(v) == (json_int_t)id) {
            return 1;
        }
    }
    return 0;
}

/* A copy of obj[key] when it has the type test accepts, else null. New reference. */
json_t *local_copy_if(const json_t *obj, const char *key, int (*test)(const json_t *))
{
    const json_t *v = json_object_get(obj, key);

    return v != NULL && test(v) ? json_deep_copy(v) : json_null();
}

int local_is_num(const json_t *v)
{
    return json_is_number(v);
}

int local_is_str(const json_t *v)
{
    return json_is_string(v);
}

int local_is_arr(const json_t *v)
{
    return json_is_array(v);
}

int local_is_obj(const json_t *v)
{
    return json_is_object(v);
}

json_t *local_hwm_json(const struct proc *p)
{
    return p->hwm_kb >= 0 ? json_integer((json_int_t)(p->hwm_kb * 1024)) : json_null();
}

/* Party-side phase seconds: the slowest party's, per phase. */
json_t *local_party_phase_max(const struct local *L)
{
    json_t *o = json_object();
    size_t i;
    json_t *m;

    json_array_foreach(L->party_manifests, i, m)
    {
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(m, "party_timings"), key, v)
        {
            json_t *prev = json_object_get(o, key);
            if (json_is_number(v) &&
                (prev == NULL || json_number_value(v) > json_number_value(prev))) {
                json_object_set_new(o, key, json_real(json_number_value(v)));
            }
        }
    }
    return o;
}

/* A stale result from an earlier run must not pass for this one's. */
void local_remove_stale(struct local *L)
{
    static const char *const names[] = {"sum.npy",
                                        "S.npy",
                                        "U.npy",
                                        "V.npy",
                                        "components.npy",
                                        "explained_variance.npy",
                                        "explained_variance_ratio.npy",
                                        "singular_values.npy",
                                        "mean.npy",
                                        "scale.npy",
                                        "scores.npy",
                                        "eigenvalues.npy",
                                        "convergence.svg",
                                        "summary.json",
                                        NULL};
    char path[LOCAL_PATH], dir[LOCAL_PATH];

    for (size_t i = 0; names[i] != NULL; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", L->out, names[i]) < sizeof path) {
            unlink(path);
        }
    }
    for (size_t p = 1; p <= LOCAL_MAX_PARTIES; p++) {
        if ((size_t)snprintf(dir, sizeof dir, "%s/party-%zu", L->out, p) >= sizeof dir) {
            break;
        }
        for (size_t i = 0; names[i] != NULL; i++) {
            if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) < sizeof path) {
                unlink(path);
            }
        }
        rmdir(dir);
    }
}

int local_write_summary(struct local *L, json_t *summary, int rc)
{
    char path[LOCAL_PATH];

    if (summary != NULL && L->nrestarts > 0) {
        json_object_set_new(summary, "restarts", local_restarts_json(L));
    }
    if (summary != NULL &&
        cli_path_join(L->cmd, path, sizeof path, L->out, "summary.json") == CLI_OK) {
        int wrc = cli_write_json_file(L->cmd, path, json_incref(summary));

        rc = rc != CLI_OK ? rc : wrc;
    }
    return rc;
}

int local_setup_root(struct local *L)
{
    const char *tmp = getenv("TMPDIR");
    struct fs_err err;

    fs_err_clear(&err);
    if (tmp == NULL || tmp[0] == '\0') {
        tmp = "/tmp";
    }
    if ((size_t)snprintf(L->root, sizeof L->root, "%s/fedsvd-local-XXXXXX", tmp) >=
        sizeof L->root - 256) {
        L->root[0] = '\0';
        return cli_runtime_error(L->cmd, "TMPDIR is too long");
    }
    if (mkdtemp(L->root) == NULL) {
        int e = errno;
        char shown[LOCAL_PATH];

        snprintf(shown, sizeof shown, "%s", L->root);
        L->root[0] = '\0';
        return cli_runtime_error(L->cmd, "%s: cannot create: %s", shown, strerror(e));
    }
    /* root is at most sizeof root - 256 bytes (checked above): these fit. */
    if ((size_t)snprintf(L->admin_file, sizeof L->admin_file, "%s/admin.token", L->root) >=
            sizeof L->admin_file ||
        (size_t)snprintf(L->op_file, sizeof L->op_file, "%s/operator.token", L->root) >=
            sizeof L->op_file) {
        return cli_runtime_error(L->cmd, "%s: path too long", L->root);
    }
    if (fs_auth_token_generate(L->admin_tok, &err) != 0 ||
        fs_auth_token_generate(L->op_tok, &err) != 0 ||
        fs_auth_token_write_file(L->admin_file, L->admin_tok, &err) != 0 ||
        fs_auth_token_write_file(L->op_file, L->op_tok, &err) != 0) {
        return cli_fs_error(L->cmd, &err);
    }
    return CLI_OK;
}

void local_copy_logs(struct local *L)
{
    char dir[LOCAL_PATH], to[LOCAL_PATH];

    if (L->root[0] == '\0' || (size_t)snprintf(dir, sizeof dir, "%s/logs", L->out) >= sizeof dir) {
        return;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        return;
    }
    if ((size_t)snprintf(to, sizeof to, "%s/%s.log", dir, L->server.name) < sizeof to) {
        (void)local_copy_file(L->server.log, to);
    }
    if (L->fed && (size_t)snprintf(to, sizeof to, "%s/%s.log", dir, L->masker.name) < sizeof to) {
        (void)local_copy_file(L->masker.log, to);
    }
    local_shards_copy_logs(L, dir);
    for (size_t i = 0; i < L->k; i++) {
        if ((size_t)snprintf(to, sizeof to, "%s/%s.log", dir, L->agents[i].name) < sizeof to) {
            (void)local_copy_file(L->agents[i].log, to);
        }
    }
}

void local_free(struct local *L)
{
    if (L->files != NULL) {
        for (size_t i = 0; i < L->k; i++) {
            free(L->files[i]);
        }
    }
    if (L->part_ids != NULL) {
        for (size_t i = 0; i < L->k; i++) {
            free(L->part_ids[i]);
        }
    }
    if (L->agents != NULL) {
        for (size_t i = 0; i < L->k; i++) {
            fs_httpc_free(L->agents[i].http);
        }
    }
    fs_httpc_free(L->server.http);
    local_shards_free(L);
    free(L->files);
    free(L->part_ids);
    free(L->agents);
    free(L->party_keys);
    free(L->fail_at);
    free(L->fail_round);
    free(L->restarts);
    free(L->sizes);
    free(L->status);
    free(L->result);
    if (L->masker.http != NULL) {
        fs_httpc_free(L->masker.http);
    }
    json_decref(L->party_manifests);
    json_decref(L->verify);
    json_decref(L->shared_check);
    json_decref(L->job);
    json_decref(L->parts);
    json_decref(L->manifest);
    /* The tokens are secrets even if this run's services are gone. */
    memset(L->admin_tok, 0, sizeof L->admin_tok);
    memset(L->op_tok, 0, sizeof L->op_tok);
}

int local_get_result(struct local *L)
{
    char path[64 + ORCH_ID_MAX];
    struct fs_err err;

    fs_err_clear(&err);
    json_decref(L->manifest);
    L->manifest = NULL;
    L->have_result = 0;
    snprintf(path, sizeof path, "/v1/jobs/%s/result", L->job_id);
    if (fs_httpc_json(L->server.http, "GET", path, NULL, &L->manifest, NULL, &err) != 0) {
        return cli_fs_error(L->cmd, &err);
    }
    if (fs_job_result_decode(L->manifest, 0, L->result, &err) != 0) {
        return cli_runtime_error(L->cmd, "GET %s: %s", path, err.msg);
    }
    L->have_result = 1;
    return CLI_OK;
}

int local_in_result(const struct local *L, size_t party)
{
    return L->have_result &&
           fs_job_ids_has(L->result->survivors, L->result->nsurvivors, (uint32_t)party);
}

int local_dropped(const struct local *L, size_t party)
{
    return L->job != NULL && L->status != NULL &&
           fs_job_ids_has(L->status->dropped, L->status->ndropped, (uint32_t)party);
}

void local_stop(struct local *L)
{
    struct proc *ps[LOCAL_MAX_PARTIES + 2 + FS_JOB_MAX_SHARDS];
    size_t n = 0;

    if (L->agents == NULL) {
        return;
    }
    for (size_t i = 0; i < L->k; i++) {
        ps[n++] = &L->agents[i];
    }
    ps[n++] = &L->server;
    n += local_shards_procs(L, ps + n);
    if (L->fed) {
        ps[n++] = &L->masker;
        L->masker_bytes_in = scrape_metric(&L->masker, "fedsvd_bytes_received_total");
        L->masker_bytes_out = scrape_metric(&L->masker, "fedsvd_bytes_sent_total");
    }
    /* peak memory of every process, while it still runs */
    for (size_t i = 0; i < n; i++) {
        if (local_proc_running(ps[i])) {
            ps[i]->hwm_kb = local_read_hwm_kb(ps[i]->pid);
            ps[i]->cpu_s = read_cpu_s(ps[i]->pid);
        }
    }
    local_stop_all(ps, n, 5.0);
    L->t_stopped = cli_now();
}

void local_drop_root(struct local *L)
{
    if (L->root[0] == '\0') {
        return;
    }
    if (L->keep) {
        fprintf(stderr, "fedsvd %s: kept %s (data dirs, tokens, logs)\n", L->cmd, L->root);
    } else {
        local_rm_rf(L->root, 0);
    }
}

/* The job's final figures: the server keeps counting bytes after "done"
 * (the result downloads). Best effort: the last status seen stays otherwise. */
void local_refresh_job(struct local *L)
{
    json_t *job = NULL;
    struct fs_err err;

    fs_err_clear(&err);
    if (L->job_id[0] != '\0' && L->server.http != NULL &&
        orch_job_poll(L->server.http, L->job_id, &job, L->status, &err) == 0) {
        json_decref(L->job);
        L->job = job;
    }
}

int local_start(struct local *L, char *error, size_t error_cap)
{
    int rc = local_start_services(L);

    if (rc != CLI_OK) {
        snprintf(error, error_cap, "services did not start");
        return rc;
    }
    L->t_ready = cli_now();
    orch_progress_text(&L->prog, "services ready");
    return CLI_OK;
}

/* Each --restart's R against the aggregations of the job just created. */
static int check_restart_rounds(struct local *L)
{
    json_t *job = NULL;
    struct fs_err err;

    fs_err_clear(&err);
    if (orch_job_poll(L->server.http, L->job_id, &job, L->status, &err) != 0) {
        return cli_fs_error(L->cmd, &err);
    }
    json_decref(L->job);
    L->job = job;
    return L->status->aggregations > 0 ? local_check_restart_rounds(L, L->status->aggregations)
                                       : CLI_OK;
}

int local_drive(struct local *L, const json_t *invs, char *error, size_t error_cap)
{
    int rc;

    if (L->nrestarts > 0 && (rc = check_restart_rounds(L)) != CLI_OK) {
        snprintf(error, error_cap, "job setup failed");
        return rc;
    }
    if ((rc = local_fire_created(L)) != CLI_OK) { /* aggregation-server@waiting_for_parties */
        snprintf(error, error_cap, "run interrupted");
        return rc;
    }
    if ((rc = local_join_agents(L, invs)) != CLI_OK) {
        snprintf(error, error_cap, "job setup failed");
        return rc;
    }
    L->t_created = cli_now();
    if ((rc = local_follow_job(L)) != CLI_OK) {
        snprintf(error, error_cap, "run interrupted");
        return rc;
    }
    L->t_finished = cli_now();
    if (L->status->state != FS_JOB_STATE_DONE) {
        snprintf(error, error_cap, "%s",
                 L->status->has_error ? L->status->error : "the job failed (no reason given)");
        (void)local_settle_agents(L, 5.0);
        local_refresh_job(L);
        return cli_runtime_error(L->cmd, "job %s failed: %s", L->job_id, error);
    }
    return CLI_OK;
}
