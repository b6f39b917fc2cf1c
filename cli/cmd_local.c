/* fedsvd local: a whole federated job on this machine with the real
 * services. It starts one aggregation-server and one client-agent per party
 * as child processes on free loopback ports, creates the job, hands each
 * agent its invitation and data file, follows the job, copies the result
 * out, writes a summary, and stops everything (SIGTERM, then SIGKILL after a
 * grace period) whatever happens — also on SIGINT/SIGTERM/SIGHUP. Children
 * get PR_SET_PDEATHSIG so they do not outlive a fedsvd that was SIGKILLed.
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
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "cli.h"
#include "io/matio.h"
#include "net/auth.h"
#include "orch.h"

#define NOPTS(a)          (sizeof(a) / sizeof((a)[0]))
#define LOCAL_MAX_PARTIES 100
#define LOCAL_PATH        4096
#define SPAWN_ATTEMPTS    5
#define READY_TIMEOUT_S   30.0
#define POLL_MS           200

static const char *const k_phases[] = {"advertise_keys", "share_keys", "masked_input",
                                       "consistency", "unmasking"};

static volatile sig_atomic_t g_stop = 0;

static void on_signal(int sig)
{
    g_stop = sig;
}

static void local_help(void)
{
    printf("Usage: fedsvd local --algorithm secure-sum --party FILE --party FILE [...] --out DIR\n"
           "                    [--threshold T] [--round-timeout S] [--fail-party I:PHASE]...\n"
           "                    [--timeout S] [--keep] [--bin-dir DIR] [--format text|json]\n"
           "\n"
           "Run a whole federated job on this machine with the real services: start one\n"
           "aggregation-server and one client-agent per party as separate processes on free\n"
           "127.0.0.1 ports (each with its own temporary --data-dir and a 0600 token file),\n"
           "create the job, give each agent its invitation and its party's file, show a\n"
           "progress line on stderr, copy the result to DIR, and stop everything.\n"
           "\n"
           "secure-sum writes DIR/sum.npy, the elementwise sum of the matrices of every party\n"
           "that survived (took part to the end), and DIR/summary.json: algorithm, parties\n"
           "(file, state, bytes sent and received), dropped parties, per-phase seconds, the\n"
           "server's bytes in and out, the exit status of every process. The services' logs\n"
           "are copied to DIR/logs/. A job that ends with fewer than T survivors fails: exit\n"
           "status 1 with the reason, summary.json says why, and there is no sum.npy.\n"
           "\n"
           "Options:\n"
           "  --algorithm A        secure-sum\n"
           "  --party FILE         one party's matrix (.npy, CSV, MatrixMarket, IDX); repeat\n"
           "                       once per party, 1 to %d parties, all of the same shape\n"
           "  --out DIR            where sum.npy, summary.json and logs/ go (created)\n"
           "  --threshold T        minimum survivors, 1..K (default floor(K/2)+1)\n"
           "  --round-timeout S    seconds (integer) a round, and joining, waits for missing\n"
           "                       parties before counting them as dropped (default 5)\n"
           "  --fail-party I:PHASE testing aid: party I (1-based, in --party order) stops just\n"
           "                       before sending its message of PHASE, as if it had crashed;\n"
           "                       PHASE is advertise_keys, share_keys, masked_input,\n"
           "                       consistency or unmasking; may be repeated\n"
           "  --timeout S          give up on the whole run after S seconds (default 600)\n"
           "  --keep               keep the temporary directory (data dirs, tokens, logs)\n"
           "                       and print where it is\n"
           "  --bin-dir DIR        where aggregation-server and client-agent are (default:\n"
           "                       the directory of this fedsvd binary)\n"
           "  --format F           text (default) or json (summary.json on one line)\n"
           "  -h, --help           show this text\n"
           "\n"
           "Example:\n"
           "  fedsvd gen powerlaw --rows 300 --cols 20 --out-dir parts --parties 3\n"
           "  fedsvd local --algorithm secure-sum --party parts/party-1.npy \\\n"
           "      --party parts/party-2.npy --party parts/party-3.npy --out result\n",
           LOCAL_MAX_PARTIES);
}

/* ---- child processes ---- */

struct proc {
    char name[32];
    char bin[LOCAL_PATH];
    char dir[LOCAL_PATH]; /* --data-dir */
    char log[LOCAL_PATH]; /* stdout+stderr */
    char url[64];
    uint16_t port;
    pid_t pid;  /* > 0 while it may be running */
    int reaped; /* 1 once waited for; status holds the wait status */
    int status;
    int killed;     /* 1 when it needed SIGKILL */
    int attempts;   /* spawns so far */
    fs_httpc *http; /* client with the admin / operator token */
};

/* Everything one run holds; freed by local_free. */
struct local {
    const char *cmd;
    size_t k;
    char **files;       /* absolute paths, k of them */
    const char **shown; /* as given on the command line */
    int *fail_at;       /* index into k_phases, or -1 */
    size_t thr;
    double round_timeout, timeout;
    int keep, json;
    const char *out;
    char bin_dir[LOCAL_PATH];
    char root[LOCAL_PATH]; /* temporary directory, "" when none */
    char admin_tok[FS_AUTH_TOKEN_GEN_LEN + 1];
    char op_tok[FS_AUTH_TOKEN_GEN_LEN + 1];
    char admin_file[LOCAL_PATH];
    char op_file[LOCAL_PATH];
    size_t rows, cols;
    struct proc server;
    struct proc *agents;
    char job_id[ORCH_ID_MAX];
    char **part_ids; /* participation id per agent */
    json_t *job;     /* last Job seen */
    json_t *parts;   /* array: last Participation per agent (or null) */
    json_t *manifest;
    char sum_sha[65];
    double t_start, t_ready, t_created, t_finished;
    struct orch_progress prog;
};

static int free_ports(size_t n, uint16_t *ports)
{
    int *fds = calloc(n, sizeof *fds);
    int rc = 0;

    if (fds == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        fds[i] = -1;
    }
    /* Keep every probe socket open until all are picked so the n ports differ. */
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct sockaddr_in a;
        socklen_t len = sizeof a;

        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = 0;
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&a, sizeof a) != 0 ||
            getsockname(fds[i], (struct sockaddr *)&a, &len) != 0) {
            rc = -1;
            break;
        }
        ports[i] = ntohs(a.sin_port);
    }
    for (size_t i = 0; i < n; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    free(fds);
    return rc;
}

/* fork + exec with stdout/stderr to the log file, stdin from /dev/null, in
 * its own process group (a terminal's ^C reaches only fedsvd, which then
 * stops the children in order) and with SIGTERM as its parent-death signal. */
static pid_t spawn(char *const *argv, const char *log, char *why, size_t why_cap)
{
    pid_t parent = getpid();
    long maxfd = sysconf(_SC_OPEN_MAX);
    int logfd, nullfd;
    pid_t pid;

    logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0) {
        snprintf(why, why_cap, "%.160s: cannot open: %s", log, strerror(errno));
        return -1;
    }
    nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0) {
        snprintf(why, why_cap, "/dev/null: %s", strerror(errno));
        close(logfd);
        return -1;
    }
    if (maxfd < 0 || maxfd > 65536) {
        maxfd = 65536;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        /* Only async-signal-safe calls from here to exec. */
        sigset_t none;

        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) {
            _exit(126);
        }
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (dup2(nullfd, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0) {
            _exit(126);
        }
        for (long fd = 3; fd < maxfd; fd++) {
            close((int)fd);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    close(nullfd);
    close(logfd);
    if (pid < 0) {
        snprintf(why, why_cap, "fork: %s", strerror(errno));
        return -1;
    }
    return pid;
}

/* Reap p if it has exited. @return 1 when it is (still) running. */
static int proc_running(struct proc *p)
{
    int st = 0;
    pid_t r;

    if (p->pid <= 0 || p->reaped) {
        return 0;
    }
    r = waitpid(p->pid, &st, WNOHANG);
    if (r == p->pid) {
        p->reaped = 1;
        p->status = st;
        return 0;
    }
    return 1;
}

static void describe_status(const struct proc *p, char *buf, size_t cap)
{
    if (!p->reaped) {
        snprintf(buf, cap, "running");
    } else if (WIFEXITED(p->status)) {
        snprintf(buf, cap, "exit status %d", WEXITSTATUS(p->status));
    } else if (WIFSIGNALED(p->status)) {
        snprintf(buf, cap, "killed by signal %d", WTERMSIG(p->status));
    } else {
        snprintf(buf, cap, "wait status %d", p->status);
    }
}

/* SIGTERM every child still running, wait up to grace_s, SIGKILL the rest. */
static void stop_all(struct proc **ps, size_t n, double grace_s)
{
    double t0 = cli_now();
    int any;

    for (size_t i = 0; i < n; i++) {
        if (proc_running(ps[i])) {
            kill(ps[i]->pid, SIGTERM);
        }
    }
    do {
        any = 0;
        for (size_t i = 0; i < n; i++) {
            any |= proc_running(ps[i]);
        }
        if (any) {
            orch_sleep_ms(20);
        }
    } while (any && cli_now() - t0 < grace_s);
    for (size_t i = 0; i < n; i++) {
        if (proc_running(ps[i])) {
            int st = 0;

            ps[i]->killed = 1;
            kill(ps[i]->pid, SIGKILL);
            if (waitpid(ps[i]->pid, &st, 0) == ps[i]->pid) {
                ps[i]->reaped = 1;
                ps[i]->status = st;
            }
        }
    }
}

static int make_dir(const char *cmd, const char *path)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        return cli_runtime_error(cmd, "%s: cannot create directory: %s", path, strerror(errno));
    }
    return CLI_OK;
}

/* rm -rf of our own temporary tree (no symlinks followed; bounded depth). */
static void rm_rf(const char *path, int depth)
{
    struct stat st;
    DIR *d;
    struct dirent *e;

    if (lstat(path, &st) != 0) {
        return;
    }
    if (!S_ISDIR(st.st_mode) || depth > 16) {
        unlink(path);
        return;
    }
    d = opendir(path);
    if (d != NULL) {
        while ((e = readdir(d)) != NULL) {
            char sub[LOCAL_PATH];

            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
                continue;
            }
            if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < sizeof sub) {
                rm_rf(sub, depth + 1);
            }
        }
        closedir(d);
    }
    rmdir(path);
}

static int copy_file(const char *from, const char *to)
{
    char buf[65536];
    int in, out, rc = 0;
    ssize_t n;

    in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        return -1;
    }
    out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        close(in);
        return -1;
    }
    while ((n = read(in, buf, sizeof buf)) > 0) {
        if (write(out, buf, (size_t)n) != n) {
            rc = -1;
            break;
        }
    }
    if (n < 0) {
        rc = -1;
    }
    close(in);
    if (close(out) != 0) {
        rc = -1;
    }
    return rc;
}

/* ---- setup ---- */

static int find_bin_dir(struct local *L, const char *given)
{
    char exe[LOCAL_PATH];
    ssize_t n;
    char *slash;

    if (given != NULL) {
        if (realpath(given, L->bin_dir) == NULL) {
            return cli_runtime_error(L->cmd, "--bin-dir %s: %s", given, strerror(errno));
        }
        return CLI_OK;
    }
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        return cli_runtime_error(L->cmd, "cannot find the fedsvd binary's directory: %s",
                                 strerror(errno));
    }
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (slash == NULL) {
        return cli_runtime_error(L->cmd, "cannot find the fedsvd binary's directory");
    }
    *slash = '\0';
    snprintf(L->bin_dir, sizeof L->bin_dir, "%s", exe);
    return CLI_OK;
}

static int init_proc(struct local *L, struct proc *p, const char *name, const char *bin)
{
    snprintf(p->name, sizeof p->name, "%s", name);
    if ((size_t)snprintf(p->bin, sizeof p->bin, "%s/%s", L->bin_dir, bin) >= sizeof p->bin ||
        (size_t)snprintf(p->dir, sizeof p->dir, "%s/%s", L->root, name) >= sizeof p->dir ||
        (size_t)snprintf(p->log, sizeof p->log, "%s/%s.log", L->root, name) >= sizeof p->log) {
        return cli_runtime_error(L->cmd, "%s: path too long", L->root);
    }
    if (access(p->bin, X_OK) != 0) {
        return cli_runtime_error(L->cmd,
                                 "%s: not found or not executable (build it with 'make'; or "
                                 "point --bin-dir at it)",
                                 p->bin);
    }
    return make_dir(L->cmd, p->dir);
}

/* Start p on `port`: argv per service (DESIGN.md sec. 8 flags). */
static int start_proc(struct local *L, struct proc *p, uint16_t port, int is_server)
{
    char listen[32], why[256];
    char *argv[12];
    int n = 0;

    snprintf(listen, sizeof listen, "127.0.0.1:%u", (unsigned)port);
    argv[n++] = p->bin;
    argv[n++] = (char *)"--listen";
    argv[n++] = listen;
    argv[n++] = (char *)"--data-dir";
    argv[n++] = p->dir;
    if (is_server) {
        argv[n++] = (char *)"--admin-token-file";
        argv[n++] = L->admin_file;
    } else {
        argv[n++] = (char *)"--token-file";
        argv[n++] = L->op_file;
    }
    argv[n] = NULL;
    p->port = port;
    p->pid = 0;
    p->reaped = 0;
    p->attempts++;
    snprintf(p->url, sizeof p->url, "http://127.0.0.1:%u", (unsigned)port);
    p->pid = spawn(argv, p->log, why, sizeof why);
    if (p->pid < 0) {
        p->pid = 0;
        return cli_runtime_error(L->cmd, "cannot start %s: %s", p->name, why);
    }
    return CLI_OK;
}

/* Poll every process's /readyz until all answer 200; restart (on a new port)
 * any that exited first. */
static int wait_ready(struct local *L, struct proc **ps, size_t n)
{
    int *ready = calloc(n, sizeof *ready);
    fs_httpc **probe = calloc(n, sizeof *probe);
    double t0 = cli_now();
    size_t nready = 0;
    struct fs_err err;
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (ready == NULL || probe == NULL) {
        rc = cli_runtime_error(L->cmd, "out of memory");
        goto out;
    }
    while (nready < n) {
        if (g_stop != 0) {
            rc = cli_runtime_error(L->cmd, "interrupted by signal %d", (int)g_stop);
            goto out;
        }
        if (cli_now() - t0 > READY_TIMEOUT_S) {
            for (size_t i = 0; i < n; i++) {
                if (!ready[i]) {
                    rc = cli_runtime_error(L->cmd,
                                           "%s did not become ready on %s within %.0f s "
                                           "(log: %s/logs/%s.log)",
                                           ps[i]->name, ps[i]->url, READY_TIMEOUT_S, L->out,
                                           ps[i]->name);
                    goto out;
                }
            }
        }
        for (size_t i = 0; i < n; i++) {
            struct fs_httpc_req rq;
            struct fs_httpc_resp resp;

            if (ready[i]) {
                continue;
            }
            if (!proc_running(ps[i])) {
                char st[64];
                uint16_t port;

                describe_status(ps[i], st, sizeof st);
                fs_httpc_free(probe[i]);
                probe[i] = NULL;
                if (ps[i]->attempts >= SPAWN_ATTEMPTS) {
                    rc = cli_runtime_error(L->cmd,
                                           "%s exited before it was ready (%s, %d "
                                           "attempts; log: %s/logs/%s.log)",
                                           ps[i]->name, st, ps[i]->attempts, L->out, ps[i]->name);
                    goto out;
                }
                if (free_ports(1, &port) != 0) {
                    rc = cli_runtime_error(L->cmd, "cannot find a free port: %s", strerror(errno));
                    goto out;
                }
                if ((rc = start_proc(L, ps[i], port, ps[i] == &L->server)) != CLI_OK) {
                    goto out;
                }
                continue;
            }
            if (probe[i] == NULL &&
                orch_client(&probe[i], ps[i]->url, NULL, 1000, 0, NULL, &err) != 0) {
                rc = cli_fs_error(L->cmd, &err);
                goto out;
            }
            memset(&rq, 0, sizeof rq);
            memset(&resp, 0, sizeof resp);
            rq.method = "GET";
            rq.path = "/readyz";
            rq.retry = FS_HTTPC_RETRY_NEVER;
            if (fs_httpc_do(probe[i], &rq, &resp, &err) == 0 && resp.status == 200) {
                ready[i] = 1;
                nready++;
            }
            fs_httpc_resp_clear(&resp);
        }
        if (nready < n) {
            orch_sleep_ms(50);
        }
    }
out:
    if (probe != NULL) {
        for (size_t i = 0; i < n; i++) {
            fs_httpc_free(probe[i]);
        }
    }
    free(probe);
    free(ready);
    return rc;
}

static int start_services(struct local *L)
{
    struct proc **ps = NULL;
    uint16_t *ports = NULL;
    struct fs_err err;
    size_t n = L->k + 1;
    int rc = CLI_OK;

    fs_err_clear(&err);
    ps = calloc(n, sizeof *ps);
    ports = calloc(n, sizeof *ports);
    if (ps == NULL || ports == NULL) {
        rc = cli_runtime_error(L->cmd, "out of memory");
        goto out;
    }
    ps[0] = &L->server;
    for (size_t i = 0; i < L->k; i++) {
        ps[i + 1] = &L->agents[i];
    }
    if (free_ports(n, ports) != 0) {
        rc = cli_runtime_error(L->cmd, "cannot find free ports: %s", strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rc = start_proc(L, ps[i], ports[i], i == 0)) != CLI_OK) {
            goto out;
        }
    }
    if ((rc = wait_ready(L, ps, n)) != CLI_OK) {
        goto out;
    }
    /* Clients with credentials, on the final ports. No whole-request limit
     * (sum.npy can be large); a transfer stalled for 30 s is aborted. */
    if (orch_client(&L->server.http, L->server.url, L->admin_tok, 0, 2, NULL, &err) != 0) {
        rc = cli_fs_error(L->cmd, &err);
        goto out;
    }
    for (size_t i = 0; i < L->k; i++) {
        if (orch_client(&L->agents[i].http, L->agents[i].url, L->op_tok, 0, 2, NULL, &err) != 0) {
            rc = cli_fs_error(L->cmd, &err);
            goto out;
        }
    }
out:
    free(ports);
    free(ps);
    return rc;
}

/* ---- the job ---- */

static int create_job(struct local *L, json_t **invitations)
{
    json_t *spec = NULL, *resp = NULL;
    const json_t *job, *invs;
    const char *id;
    struct fs_err err;
    int rc = CLI_OK;

    fs_err_clear(&err);
    *invitations = NULL;
    spec = json_pack("{s:s, s:s, s:I, s:I, s:[I,I], s:I, s:s}", "algorithm", "secure-sum", "name",
                     "fedsvd local", "parties", (json_int_t)L->k, "threshold", (json_int_t)L->thr,
                     "shape", (json_int_t)L->rows, (json_int_t)L->cols, "round_timeout_s",
                     (json_int_t)L->round_timeout, "server_url", L->server.url);
    if (spec == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    if (fs_httpc_json(L->server.http, "POST", "/v1/jobs", spec, &resp, NULL, &err) != 0) {
        rc = cli_fs_error(L->cmd, &err);
        goto out;
    }
    job = json_object_get(resp, "job");
    invs = json_object_get(resp, "invitations");
    id = json_string_value(json_object_get(job, "id"));
    if (!orch_id_ok(id) || !json_is_array(invs) || json_array_size(invs) != L->k) {
        rc = cli_runtime_error(L->cmd,
                               "POST /v1/jobs: the response lacks a job id or %zu "
                               "invitations",
                               L->k);
        goto out;
    }
    snprintf(L->job_id, sizeof L->job_id, "%s", id);
    *invitations = json_incref((json_t *)invs);
out:
    json_decref(resp);
    json_decref(spec);
    return rc;
}

/* The invitation for party i (1-based): by its "party" field, not by position. */
static const json_t *invitation_for(const json_t *invs, size_t party)
{
    size_t i;
    json_t *v;

    json_array_foreach(invs, i, v)
    {
        if (json_integer_value(json_object_get(v, "party")) == (json_int_t)party) {
            return v;
        }
    }
    return NULL;
}

static int join_agents(struct local *L, const json_t *invs)
{
    struct fs_err err;

    fs_err_clear(&err);
    for (size_t i = 0; i < L->k; i++) {
        const json_t *inv = invitation_for(invs, i + 1);
        json_t *body = NULL, *resp = NULL;
        const char *id;
        int rc = CLI_OK;

        if (inv == NULL) {
            return cli_runtime_error(L->cmd, "POST /v1/jobs: no invitation for party %zu", i + 1);
        }
        body = json_pack("{s:O, s:{s:s, s:s}, s:o}", "invitation", inv, "dataset", "path",
                         L->files[i], "format", "auto", "fail_at",
                         L->fail_at[i] >= 0 ? json_string(k_phases[L->fail_at[i]]) : json_null());
        if (body == NULL) {
            return cli_runtime_error(L->cmd, "out of memory");
        }
        if (fs_httpc_json(L->agents[i].http, "POST", "/v1/participations", body, &resp, NULL,
                          &err) != 0) {
            rc = cli_runtime_error(L->cmd, "party %zu (%s): %s", i + 1, L->shown[i], err.msg);
        } else {
            id = json_string_value(json_object_get(resp, "id"));
            if (!orch_id_ok(id)) {
                rc = cli_runtime_error(L->cmd, "%s: POST /v1/participations returned no id",
                                       L->agents[i].name);
            } else {
                L->part_ids[i] = strdup(id);
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

    if (!proc_running(&L->server)) {
        describe_status(&L->server, st, sizeof st);
        return cli_runtime_error(L->cmd,
                                 "aggregation-server stopped unexpectedly (%s); see %s/logs/%s.log",
                                 st, L->out, L->server.name);
    }
    for (size_t i = 0; i < L->k; i++) {
        if (!proc_running(&L->agents[i])) {
            describe_status(&L->agents[i], st, sizeof st);
            return cli_runtime_error(L->cmd,
                                     "%s (party %zu) stopped unexpectedly (%s); see %s/logs/%s.log",
                                     L->agents[i].name, i + 1, st, L->out, L->agents[i].name);
        }
    }
    return CLI_OK;
}

static int follow_job(struct local *L)
{
    struct fs_err err;
    double t0 = cli_now();
    int rc;

    fs_err_clear(&err);
    for (;;) {
        json_t *job = NULL;

        if ((rc = check_children(L)) != CLI_OK) {
            return rc;
        }
        if (orch_job_get(L->server.http, L->job_id, &job, &err) != 0) {
            orch_progress_done(&L->prog);
            return cli_fs_error(L->cmd, &err);
        }
        json_decref(L->job);
        L->job = job;
        orch_progress_job(&L->prog, job);
        if (strcmp(orch_job_state(job), "running") != 0) {
            orch_progress_done(&L->prog);
            return CLI_OK;
        }
        if (g_stop != 0) {
            orch_progress_done(&L->prog);
            return cli_runtime_error(L->cmd, "interrupted by signal %d", (int)g_stop);
        }
        if (cli_now() - t0 > L->timeout) {
            orch_progress_done(&L->prog);
            return cli_runtime_error(L->cmd, "timed out after %.0f s in phase %s (--timeout)",
                                     L->timeout,
                                     json_string_value(json_object_get(job, "phase")) != NULL
                                         ? json_string_value(json_object_get(job, "phase"))
                                         : "?");
        }
        orch_sleep_ms(POLL_MS);
    }
}

static int part_terminal(const json_t *p)
{
    const char *s = json_string_value(json_object_get(p, "state"));

    return s != NULL && (strcmp(s, "done") == 0 || strcmp(s, "failed") == 0);
}

/* Poll every participation until it is done or failed (or `wait_s` passes):
 * the agents fetch the result after the server has it. */
static int settle_agents(struct local *L, double wait_s)
{
    double t0 = cli_now();
    struct fs_err err;

    fs_err_clear(&err);
    for (;;) {
        size_t open = 0;

        for (size_t i = 0; i < L->k; i++) {
            char path[64 + ORCH_ID_MAX];
            json_t *p = NULL;

            if (L->part_ids[i] == NULL || part_terminal(json_array_get(L->parts, i))) {
                continue;
            }
            snprintf(path, sizeof path, "/v1/participations/%s", L->part_ids[i]);
            if (fs_httpc_json(L->agents[i].http, "GET", path, NULL, &p, NULL, &err) != 0) {
                return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
            }
            json_array_set_new(L->parts, i, p);
            open += !part_terminal(p);
        }
        if (open == 0 || cli_now() - t0 > wait_s || g_stop != 0) {
            return CLI_OK;
        }
        orch_progress_text(&L->prog, "waiting for the agents to finish");
        orch_sleep_ms(POLL_MS);
    }
}

/* The sha256 of name in a manifest, or NULL. */
static const char *manifest_sha(const json_t *m, const char *name)
{
    size_t i;
    json_t *f;

    json_array_foreach(json_object_get(m, "files"), i, f)
    {
        const char *n = json_string_value(json_object_get(f, "name"));

        if (n != NULL && strcmp(n, name) == 0) {
            return json_string_value(json_object_get(f, "sha256"));
        }
    }
    return NULL;
}

static int fetch_result(struct local *L)
{
    char path[128 + ORCH_ID_MAX], dest[LOCAL_PATH];
    const char *sha;
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    snprintf(path, sizeof path, "/v1/jobs/%s/result", L->job_id);
    if (fs_httpc_json(L->server.http, "GET", path, NULL, &L->manifest, NULL, &err) != 0) {
        return cli_fs_error(L->cmd, &err);
    }
    sha = manifest_sha(L->manifest, "sum.npy");
    if (sha == NULL || strlen(sha) != 64) {
        return cli_runtime_error(L->cmd, "GET %s: the manifest has no sum.npy with a sha256", path);
    }
    snprintf(L->sum_sha, sizeof L->sum_sha, "%s", sha);
    snprintf(path, sizeof path, "/v1/jobs/%s/result/sum.npy", L->job_id);
    if ((rc = cli_path_join(L->cmd, dest, sizeof dest, L->out, "sum.npy")) != CLI_OK) {
        return rc;
    }
    if (orch_download_verified(L->server.http, path, dest, L->sum_sha, NULL, &err) != 0) {
        return cli_fs_error(L->cmd, &err);
    }
    return CLI_OK;
}

/* Every agent that finished must hold the very same sum as the server. */
static int check_agent_results(struct local *L, json_t *agent_sha)
{
    struct fs_err err;

    fs_err_clear(&err);
    for (size_t i = 0; i < L->k; i++) {
        const json_t *p = json_array_get(L->parts, i);
        const char *st = json_string_value(json_object_get(p, "state"));
        char path[128 + ORCH_ID_MAX];
        json_t *m = NULL;
        const char *sha;

        if (st == NULL || strcmp(st, "done") != 0) {
            json_array_append_new(agent_sha, json_null());
            continue;
        }
        snprintf(path, sizeof path, "/v1/participations/%s/result", L->part_ids[i]);
        if (fs_httpc_json(L->agents[i].http, "GET", path, NULL, &m, NULL, &err) != 0) {
            return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
        }
        sha = manifest_sha(m, "sum.npy");
        json_array_append_new(agent_sha, sha != NULL ? json_string(sha) : json_null());
        if (sha == NULL || strcmp(sha, L->sum_sha) != 0) {
            json_decref(m);
            return cli_runtime_error(L->cmd,
                                     "party %zu's agent holds a different sum.npy (sha256 %s) "
                                     "than the server (%s)",
                                     i + 1, sha != NULL ? sha : "none", L->sum_sha);
        }
        json_decref(m);
    }
    return CLI_OK;
}

/* ---- summary ---- */

static json_t *proc_json(const struct proc *p)
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
    return o;
}

static int id_in(const json_t *arr, size_t id)
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
static json_t *copy_if(const json_t *obj, const char *key, int (*test)(const json_t *))
{
    const json_t *v = json_object_get(obj, key);

    return v != NULL && test(v) ? json_deep_copy(v) : json_null();
}

static int is_num(const json_t *v)
{
    return json_is_number(v);
}

static int is_str(const json_t *v)
{
    return json_is_string(v);
}

static int is_arr(const json_t *v)
{
    return json_is_array(v);
}

static int is_obj(const json_t *v)
{
    return json_is_object(v);
}

static json_t *party_json(const struct local *L, size_t i, const json_t *agent_sha)
{
    const json_t *p = json_array_get(L->parts, i);
    json_t *o;

    o = json_pack("{s:I, s:s, s:o, s:o, s:b, s:o, s:o, s:o, s:o}", "party", (json_int_t)(i + 1),
                  "file", L->shown[i], "participation",
                  L->part_ids[i] != NULL ? json_string(L->part_ids[i]) : json_null(), "state",
                  copy_if(p, "state", is_str), "dropped",
                  id_in(json_object_get(L->job, "dropped"), i + 1), "fail_at",
                  L->fail_at[i] >= 0 ? json_string(k_phases[L->fail_at[i]]) : json_null(),
                  "bytes_sent", copy_if(p, "bytes_sent", is_num), "bytes_received",
                  copy_if(p, "bytes_received", is_num), "error", copy_if(p, "error", is_str));
    if (o != NULL && L->manifest != NULL) {
        json_object_set_new(o, "in_sum",
                            json_boolean(id_in(json_object_get(L->manifest, "survivors"), i + 1)));
    }
    if (o != NULL && agent_sha != NULL && i < json_array_size(agent_sha)) {
        json_object_set(o, "sum_sha256", json_array_get(agent_sha, i));
    }
    return o;
}

static json_t *build_summary(struct local *L, const json_t *agent_sha, const char *error)
{
    const json_t *job = L->job;
    int done = strcmp(orch_job_state(job), "done") == 0;
    json_t *parties = json_array();
    json_t *procs = json_array();
    json_t *survivors = json_array();
    json_t *dropped = copy_if(job, "dropped", is_arr);
    json_t *phases = copy_if(job, "timings", is_obj);
    json_t *s;

    /* Survivors: the parties whose input is in the sum, as the server's result
     * manifest lists them (a party that drops out after its masked input is
     * still summed), else the job's parties not dropped. */
    for (size_t i = 0; i < L->k; i++) {
        const json_t *ms = json_object_get(L->manifest, "survivors");
        int in_sum = json_is_array(ms) ? id_in(ms, i + 1)
                                       : done && !id_in(json_object_get(job, "dropped"), i + 1);

        json_array_append_new(parties, party_json(L, i, agent_sha));
        if (in_sum) {
            json_array_append_new(survivors, json_integer((json_int_t)(i + 1)));
        }
    }
    json_array_append_new(procs, proc_json(&L->server));
    for (size_t i = 0; i < L->k; i++) {
        json_array_append_new(procs, proc_json(&L->agents[i]));
    }
    if (json_is_null(dropped)) {
        json_decref(dropped);
        dropped = json_array();
    }
    if (json_is_null(phases)) {
        json_decref(phases);
        phases = json_object();
    }
    s = json_pack(
        "{s:s, s:o, s:s, s:o, s:[I,I], s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:{s:o, s:o}, "
        "s:{s:f, s:f, s:f}, s:o, s:o, s:s}",
        "algorithm", "secure-sum", "job_id",
        L->job_id[0] != '\0' ? json_string(L->job_id) : json_null(), "state",
        job != NULL ? orch_job_state(job) : "failed", "error",
        error != NULL ? json_string(error) : json_null(), "shape", (json_int_t)L->rows,
        (json_int_t)L->cols, "party_count", (json_int_t)L->k, "threshold", (json_int_t)L->thr,
        "round_timeout_s", (json_int_t)L->round_timeout, "parties", parties, "dropped", dropped,
        "survivors", survivors, "phases", phases, "server", "bytes_in",
        copy_if(job, "bytes_in", is_num), "bytes_out", copy_if(job, "bytes_out", is_num), "seconds",
        "total", cli_now() - L->t_start, "startup", L->t_ready > 0 ? L->t_ready - L->t_start : 0.0,
        "job", L->t_finished > 0 && L->t_created > 0 ? L->t_finished - L->t_created : 0.0, "files",
        L->sum_sha[0] != '\0'
            ? json_pack("[{s:s, s:[I,I], s:s}]", "name", "sum.npy", "shape", (json_int_t)L->rows,
                        (json_int_t)L->cols, "sha256", L->sum_sha)
            : json_array(),
        "processes", procs, "out", L->out);
    return s;
}

/* ---- argument handling ---- */

/* Take every --party/--fail-party (repeatable) out of argv; the rest goes to
 * cli_parse. rest[] has room for argc entries. */
static int split_repeated(const char *cmd, int argc, char **argv, const char **party,
                          size_t *nparty, const char **fail, size_t *nfail, char **rest, int *nrest)
{
    *nparty = 0;
    *nfail = 0;
    *nrest = 0;
    rest[(*nrest)++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **list = NULL;
        size_t *n = NULL;
        const char *val = NULL;

        if (strcmp(a, "--") == 0) {
            while (i < argc) {
                rest[(*nrest)++] = argv[i++];
            }
            break;
        }
        if (strcmp(a, "--party") == 0 || strncmp(a, "--party=", 8) == 0) {
            list = party;
            n = nparty;
            val = a[7] == '=' ? a + 8 : NULL;
        } else if (strcmp(a, "--fail-party") == 0 || strncmp(a, "--fail-party=", 13) == 0) {
            list = fail;
            n = nfail;
            val = a[12] == '=' ? a + 13 : NULL;
        } else {
            rest[(*nrest)++] = argv[i];
            continue;
        }
        if (val == NULL) {
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
                return cli_usage_error(cmd, "option '%s' needs a value", a);
            }
            val = argv[++i];
        }
        if (*n >= LOCAL_MAX_PARTIES) {
            return cli_usage_error(cmd, "more than %d %s options", LOCAL_MAX_PARTIES,
                                   list == party ? "--party" : "--fail-party");
        }
        list[(*n)++] = val;
    }
    return CLI_OK;
}

static int parse_fail(const char *cmd, const char *s, size_t k, int *fail_at)
{
    const char *colon = strchr(s, ':');
    char num[16];
    size_t idx = 0, len;
    int rc;

    if (colon == NULL || colon == s || (size_t)(colon - s) >= sizeof num) {
        return cli_usage_error(cmd, "--fail-party: expected I:PHASE, got '%s'", s);
    }
    len = (size_t)(colon - s);
    memcpy(num, s, len);
    num[len] = '\0';
    if ((rc = cli_parse_size(cmd, "--fail-party", num, 1, k, &idx)) != CLI_OK) {
        return rc;
    }
    for (int p = 0; p < (int)NOPTS(k_phases); p++) {
        if (strcmp(colon + 1, k_phases[p]) == 0) {
            if (fail_at[idx - 1] >= 0) {
                return cli_usage_error(cmd, "--fail-party: party %zu given twice", idx);
            }
            fail_at[idx - 1] = p;
            return CLI_OK;
        }
    }
    return cli_usage_error(cmd,
                           "--fail-party: PHASE must be advertise_keys, share_keys, masked_input, "
                           "consistency or unmasking, got '%s'",
                           colon + 1);
}

/* Resolve every party file and check that all have one shape. */
static int check_parties(struct local *L)
{
    struct fs_err err;

    fs_err_clear(&err);
    for (size_t i = 0; i < L->k; i++) {
        char abs[PATH_MAX];
        fs_mat *m = NULL;

        if (realpath(L->shown[i], abs) == NULL) {
            return cli_runtime_error(L->cmd, "%s: %s", L->shown[i], strerror(errno));
        }
        L->files[i] = strdup(abs);
        if (L->files[i] == NULL) {
            return cli_runtime_error(L->cmd, "out of memory");
        }
        if (fs_io_load_dense(abs, FS_FMT_AUTO, NULL, &m, &err) != 0) {
            return cli_fs_error(L->cmd, &err);
        }
        if (i == 0) {
            L->rows = m->rows;
            L->cols = m->cols;
        } else if (m->rows != L->rows || m->cols != L->cols) {
            int rc =
                cli_runtime_error(L->cmd, "%s: shape %zu x %zu differs from %s (%zu x %zu)",
                                  L->shown[i], m->rows, m->cols, L->shown[0], L->rows, L->cols);
            fs_mat_free(m);
            return rc;
        }
        fs_mat_free(m);
    }
    return CLI_OK;
}

static int setup_root(struct local *L)
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

static void copy_logs(struct local *L)
{
    char dir[LOCAL_PATH], to[LOCAL_PATH];

    if (L->root[0] == '\0' || (size_t)snprintf(dir, sizeof dir, "%s/logs", L->out) >= sizeof dir) {
        return;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        return;
    }
    if ((size_t)snprintf(to, sizeof to, "%s/%s.log", dir, L->server.name) < sizeof to) {
        (void)copy_file(L->server.log, to);
    }
    for (size_t i = 0; i < L->k; i++) {
        if ((size_t)snprintf(to, sizeof to, "%s/%s.log", dir, L->agents[i].name) < sizeof to) {
            (void)copy_file(L->agents[i].log, to);
        }
    }
}

static void local_free(struct local *L)
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
    free(L->files);
    free(L->part_ids);
    free(L->agents);
    free(L->fail_at);
    json_decref(L->job);
    json_decref(L->parts);
    json_decref(L->manifest);
    /* The tokens are secrets even if this run's services are gone. */
    memset(L->admin_tok, 0, sizeof L->admin_tok);
    memset(L->op_tok, 0, sizeof L->op_tok);
}

/* The job's final figures: the server keeps counting bytes after "done"
 * (the result downloads). Best effort: the last status seen stays otherwise. */
static void refresh_job(struct local *L)
{
    json_t *job = NULL;
    struct fs_err err;

    fs_err_clear(&err);
    if (L->job_id[0] != '\0' && L->server.http != NULL &&
        orch_job_get(L->server.http, L->job_id, &job, &err) == 0) {
        json_decref(L->job);
        L->job = job;
    }
}

/* The run itself, once arguments are checked: returns the exit status and
 * leaves the error text (if any) in *error for the summary. */
static int run(struct local *L, char *error, size_t error_cap)
{
    json_t *invs = NULL;
    int rc;

    error[0] = '\0';
    if ((rc = start_services(L)) != CLI_OK) {
        snprintf(error, error_cap, "services did not start");
        goto out;
    }
    L->t_ready = cli_now();
    orch_progress_text(&L->prog, "services ready");
    if ((rc = create_job(L, &invs)) != CLI_OK || (rc = join_agents(L, invs)) != CLI_OK) {
        snprintf(error, error_cap, "job setup failed");
        goto out;
    }
    L->t_created = cli_now();
    if ((rc = follow_job(L)) != CLI_OK) {
        snprintf(error, error_cap, "run interrupted");
        goto out;
    }
    L->t_finished = cli_now();
    if (strcmp(orch_job_state(L->job), "done") != 0) {
        const char *why = json_string_value(json_object_get(L->job, "error"));

        snprintf(error, error_cap, "%s", why != NULL ? why : "the job failed (no reason given)");
        (void)settle_agents(L, 5.0);
        refresh_job(L);
        rc = cli_runtime_error(L->cmd, "job %s failed: %s", L->job_id, error);
        goto out;
    }
    if ((rc = fetch_result(L)) != CLI_OK || (rc = settle_agents(L, 60.0)) != CLI_OK) {
        snprintf(error, error_cap, "could not fetch the result");
        goto out;
    }
out:
    json_decref(invs);
    return rc;
}

int cmd_local(int argc, char **argv)
{
    const char *cmd = "local";
    const char *s_alg = NULL, *s_out = NULL, *s_thr = NULL, *s_rt = NULL, *s_timeout = NULL;
    const char *s_bin = NULL, *s_format = NULL;
    int keep = 0;
    struct cli_opt opts[] = {
        {"algorithm", CLI_OPT_VALUE, &s_alg, NULL},   {"out", CLI_OPT_VALUE, &s_out, NULL},
        {"threshold", CLI_OPT_VALUE, &s_thr, NULL},   {"round-timeout", CLI_OPT_VALUE, &s_rt, NULL},
        {"timeout", CLI_OPT_VALUE, &s_timeout, NULL}, {"bin-dir", CLI_OPT_VALUE, &s_bin, NULL},
        {"format", CLI_OPT_VALUE, &s_format, NULL},   {"keep", CLI_OPT_FLAG, NULL, &keep},
    };
    const char *party[LOCAL_MAX_PARTIES], *fail[LOCAL_MAX_PARTIES];
    const char *pos[1];
    char **rest = NULL;
    size_t nparty = 0, nfail = 0, npos = 0, rt = 5;
    int nrest = 0, help = 0, rc;
    struct local L;
    struct sigaction sa, old_int, old_term, old_hup;
    int handlers = 0;
    char error[FS_ERR_MSG_MAX];
    json_t *agent_sha = NULL, *summary = NULL;

    memset(&L, 0, sizeof L);
    L.cmd = cmd;
    L.round_timeout = 5;
    L.timeout = 600;
    error[0] = '\0';
    rest = calloc((size_t)argc + 1, sizeof *rest);
    if (rest == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    rc = split_repeated(cmd, argc, argv, party, &nparty, fail, &nfail, rest, &nrest);
    if (rc == CLI_OK) {
        rc = cli_parse(cmd, nrest, rest, opts, NOPTS(opts), pos, 0, &npos, &help);
    }
    if (rc != CLI_OK && !help) {
        /* --help anywhere wins, even after a bad --party. */
        for (int i = 1; i < argc; i++) {
            if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                help = 1;
            }
        }
        if (!help) {
            goto out;
        }
    }
    if (help) {
        local_help();
        rc = CLI_OK;
        goto out;
    }
    if (s_alg == NULL || s_out == NULL || nparty == 0) {
        rc = cli_usage_error(cmd, "--algorithm, --out and at least one --party are required");
        goto out;
    }
    if (strcmp(s_alg, "secure-sum") != 0) {
        rc = cli_usage_error(cmd, "--algorithm: expected secure-sum, got '%s'", s_alg);
        goto out;
    }
    L.k = nparty;
    L.shown = party;
    L.out = s_out;
    L.keep = keep;
    L.thr = L.k / 2 + 1;
    L.files = calloc(L.k, sizeof *L.files);
    L.part_ids = calloc(L.k, sizeof *L.part_ids);
    L.agents = calloc(L.k, sizeof *L.agents);
    L.fail_at = calloc(L.k, sizeof *L.fail_at);
    L.parts = json_array();
    if (L.files == NULL || L.part_ids == NULL || L.agents == NULL || L.fail_at == NULL ||
        L.parts == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < L.k; i++) {
        L.fail_at[i] = -1;
        json_array_append_new(L.parts, json_null());
    }
    for (size_t i = 0; i < nfail; i++) {
        if ((rc = parse_fail(cmd, fail[i], L.k, L.fail_at)) != CLI_OK) {
            goto out;
        }
    }
    if ((s_thr != NULL && (rc = cli_parse_size(cmd, "--threshold", s_thr, 1, L.k, &L.thr)) != 0) ||
        (s_rt != NULL && (rc = cli_parse_size(cmd, "--round-timeout", s_rt, 1, 86400, &rt)) != 0) ||
        (s_timeout != NULL && (rc = cli_parse_double(cmd, "--timeout", s_timeout, 0, CLI_OPEN, 0,
                                                     CLI_NONE, &L.timeout)) != 0) ||
        (rc = cli_parse_format(cmd, s_format, &L.json)) != 0) {
        goto out;
    }
    L.round_timeout = (double)rt;
    L.t_start = cli_now();
    orch_progress_init(&L.prog, stderr, cmd);
    if ((rc = check_parties(&L)) != CLI_OK || (rc = find_bin_dir(&L, s_bin)) != CLI_OK ||
        (rc = cli_mkdir_p(cmd, s_out)) != CLI_OK) {
        goto out;
    }
    {
        /* A stale result from an earlier run must not pass for this one's. */
        char stale[LOCAL_PATH];

        if (cli_path_join(cmd, stale, sizeof stale, s_out, "sum.npy") == CLI_OK) {
            unlink(stale);
        }
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    handlers = 1;
    if ((rc = setup_root(&L)) != CLI_OK ||
        (rc = init_proc(&L, &L.server, "aggregation-server", "aggregation-server")) != CLI_OK) {
        goto out;
    }
    for (size_t i = 0; i < L.k; i++) {
        char name[32];

        snprintf(name, sizeof name, "agent-%zu", i + 1);
        if ((rc = init_proc(&L, &L.agents[i], name, "client-agent")) != CLI_OK) {
            goto out;
        }
    }
    rc = run(&L, error, sizeof error);
    if (rc == CLI_OK) {
        agent_sha = json_array();
        rc = check_agent_results(&L, agent_sha);
        if (rc != CLI_OK) {
            snprintf(error, sizeof error, "agents disagree with the server");
        }
        refresh_job(&L);
    }
out:
    orch_progress_done(&L.prog);
    if (L.agents != NULL) {
        struct proc *ps[LOCAL_MAX_PARTIES + 1];
        size_t n = 0;

        for (size_t i = 0; i < L.k; i++) {
            ps[n++] = &L.agents[i];
        }
        ps[n++] = &L.server;
        stop_all(ps, n, 5.0);
    }
    if (L.root[0] != '\0') {
        copy_logs(&L);
        if (L.t_start > 0) {
            char path[LOCAL_PATH];

            summary = build_summary(&L, agent_sha, error[0] != '\0' ? error : NULL);
            if (summary != NULL &&
                cli_path_join(cmd, path, sizeof path, s_out, "summary.json") == CLI_OK) {
                int wrc = cli_write_json_file(cmd, path, json_incref(summary));

                rc = rc != CLI_OK ? rc : wrc;
            }
        }
        if (L.keep) {
            fprintf(stderr, "fedsvd %s: kept %s (data dirs, tokens, logs)\n", cmd, L.root);
        } else {
            rm_rf(L.root, 0);
        }
    }
    if (rc == CLI_OK && summary != NULL) {
        if (L.json) {
            rc = cli_print_json(cmd, json_incref(summary));
        } else {
            size_t ns = orch_count(summary, "survivors");
            size_t nd = orch_count(summary, "dropped");

            printf("secure-sum of %zu of %zu parties (%zu dropped, threshold %zu) in %.1f s: "
                   "%s/sum.npy\n",
                   ns, L.k, nd, L.thr, L.t_finished - L.t_created, s_out);
        }
    }
    if (handlers) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        sigaction(SIGHUP, &old_hup, NULL);
    }
    json_decref(summary);
    json_decref(agent_sha);
    local_free(&L);
    free(rest);
    return rc;
}
