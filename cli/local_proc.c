/* fedsvd local's child processes: free ports, spawning the services,
 * their state, stopping them, waiting until they are ready. */
#include <arpa/inet.h>
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

#include "cli.h"
#include "local.h"
#include "net/auth.h"
#include "net/svc.h"
#include "orch.h"

/* ---- signals ---- */

static volatile sig_atomic_t g_stop = 0;

static void on_signal(int sig)
{
    g_stop = sig;
}

int local_interrupted(void)
{
    return (int)g_stop;
}

void local_signals_install(struct local_signals *s)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &s->old_int);
    sigaction(SIGTERM, &sa, &s->old_term);
    sigaction(SIGHUP, &sa, &s->old_hup);
    s->on = 1;
}

void local_signals_restore(struct local_signals *s)
{
    if (s->on) {
        sigaction(SIGINT, &s->old_int, NULL);
        sigaction(SIGTERM, &s->old_term, NULL);
        sigaction(SIGHUP, &s->old_hup, NULL);
        s->on = 0;
    }
}

/* ---- child processes ---- */

int local_free_ports(size_t n, uint16_t *ports)
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

/* vfork + exec with stdout/stderr to the log file, stdin from /dev/null, in
 * its own process group (a terminal's ^C reaches only fedsvd, which then
 * stops the children in order) and with SIGTERM as its parent-death signal.
 * vfork, not fork: the child borrows our memory until it execs instead of
 * copying our page tables (fork cost ~3 ms per child once the party files
 * had been read, 12 children before the job can start); it only makes
 * system calls and writes nothing but its own locals. */
static pid_t spawn(char *const *argv, const char *log, char *why, size_t why_cap)
{
    const pid_t parent = getpid();
    const long open_max = sysconf(_SC_OPEN_MAX);
    const long maxfd = open_max < 0 || open_max > 65536 ? 65536 : open_max;
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
    fflush(NULL);
    pid = vfork();
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
        /* close_range is one system call; the loop is one per possible fd
         * (20000 under a common limit: ~10 ms per child on a busy host) */
#ifdef SYS_close_range
        if (syscall(SYS_close_range, 3U, ~0U, 0) != 0)
#endif
        {
            for (long fd = 3; fd < maxfd; fd++) {
                close((int)fd);
            }
        }
        execv(argv[0], argv);
        _exit(127);
    }
    close(nullfd);
    close(logfd);
    if (pid < 0) {
        snprintf(why, why_cap, "vfork: %s", strerror(errno));
        return -1;
    }
    return pid;
}

/* Reap p if it has exited. @return 1 when it is (still) running. */
int local_proc_running(struct proc *p)
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

void local_describe_status(const struct proc *p, char *buf, size_t cap)
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
void local_stop_all(struct proc **ps, size_t n, double grace_s)
{
    double t0 = cli_now();
    int any;

    for (size_t i = 0; i < n; i++) {
        if (local_proc_running(ps[i])) {
            kill(ps[i]->pid, SIGTERM);
        }
    }
    do {
        any = 0;
        for (size_t i = 0; i < n; i++) {
            any |= local_proc_running(ps[i]);
        }
        if (any) {
            orch_sleep_ms(5); /* the services exit within tens of ms of SIGTERM */
        }
    } while (any && cli_now() - t0 < grace_s);
    for (size_t i = 0; i < n; i++) {
        if (local_proc_running(ps[i])) {
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
void local_rm_rf(const char *path, int depth)
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
                local_rm_rf(sub, depth + 1);
            }
        }
        closedir(d);
    }
    rmdir(path);
}

int local_copy_file(const char *from, const char *to)
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

int local_find_bin_dir(struct local *L, const char *given)
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

int local_init_proc(struct local *L, struct proc *p, const char *name, const char *bin)
{
    p->hwm_kb = -1;
    p->cpu_s = -1;
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

/* ---- --shards: which processes are servers, the servers' shard flags ---- */

int local_is_server_proc(const struct local *L, const struct proc *p)
{
    if (p == &L->server || p == &L->masker) {
        return 1;
    }
    for (size_t i = 0; L->peers != NULL && i + 1 < L->shards; i++) {
        if (p == &L->peers[i]) {
            return 1;
        }
    }
    return 0;
}

/* Append a server's --shards flags (the peer token; the coordinator's
 * --shard-peer list) to argv[n..cap): @return the new n. */
static int local_shards_args(const struct local *L, const struct proc *p, char **argv, int n,
                             int cap)
{
    if (L->shards <= 1 || p == &L->masker || !local_is_server_proc(L, p)) {
        return n;
    }
    if (n + 2 < cap) {
        argv[n++] = (char *)"--peer-token-file";
        argv[n++] = (char *)L->peer_file;
    }
    for (size_t i = 0; p == &L->server && i + 1 < L->shards && n + 2 < cap; i++) {
        argv[n++] = (char *)"--shard-peer";
        argv[n++] = (char *)L->peers[i].url;
    }
    return n;
}

/* Start p on `port`: argv per service (each service's --help flags). */
int local_start_proc(struct local *L, struct proc *p, uint16_t port, int is_server)
{
    char listen[32], why[256], conc[16];
    char *argv[64];
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
    if (!is_server && getenv("FEDSVD_LOCAL_POLL_MS") == NULL) {
        /* agents on loopback: a job status poll is cheap, and each phase
         * change waits for the next one (the default is 200 ms) */
        argv[n++] = (char *)"--poll-ms";
        argv[n++] = (char *)"50";
    }
    if (is_server && getenv("FEDSVD_MAX_CONNECTIONS_PER_IP") == NULL) {
        /* every party connects from 127.0.0.1: no per-address cap */
        argv[n++] = (char *)"--max-connections-per-ip";
        argv[n++] = (char *)"0";
    }
    if (p == &L->masker && getenv("FEDSVD_KEYGEN_CONCURRENCY") == NULL) {
        /* the parties ask for their keys at once: generate on every core */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        snprintf(conc, sizeof conc, "%ld", cpus < 1 ? 1 : cpus > 8 ? 8 : cpus);
        argv[n++] = (char *)"--keygen-concurrency";
        argv[n++] = conc;
    }
    /* --shards: the peer token, and the coordinator's --shard-peer list */
    n = local_shards_args(L, p, argv, n, (int)(sizeof argv / sizeof argv[0]) - 1);
    argv[n] = NULL;
    p->port = port;
    p->pid = 0;
    p->reaped = 0;
    p->attempts++;
    snprintf(p->url, sizeof p->url, "http://127.0.0.1:%u", (unsigned)port);
    /* One BLAS thread for the K agents (they share this machine's cores and
     * compute at the same time) and for the masking server (its products
     * with 64-column chunks of each Haar block parallelise poorly): on a
     * busy 2-core machine, 10 x 10000 x 1000 fedsvd used half the CPU
     * seconds and no more wall time than with OpenBLAS's default of one
     * thread per core. The aggregation server keeps the default for its
     * factorization, which runs while everyone else waits. A setting of the
     * caller's wins. */
    int one_blas =
        ((!is_server && L->k > 1) || p == &L->masker) && getenv("OPENBLAS_NUM_THREADS") == NULL;
    if (one_blas) {
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
    }
    /* --test-mask-seed: in the masking server's environment only (not argv) */
    int test_seed = p == &L->masker && L->test_mask_seed[0] != '\0';
    if (test_seed) {
        setenv("FEDSVD_INSECURE_TEST_MASK_SEED", L->test_mask_seed, 1);
    }
    /* --restart SERVICE@PHASE: the service's testing stop point, set for
     * it while a restart of it placed there is pending (never inherited) */
    char stop_at[64];
    if (local_stop_at(L, p, stop_at, sizeof stop_at)) {
        setenv(LOCAL_STOP_ENV, stop_at, 1);
    } else {
        unsetenv(LOCAL_STOP_ENV);
    }
    p->pid = spawn(argv, p->log, why, sizeof why);
    unsetenv(LOCAL_STOP_ENV);
    if (one_blas) {
        unsetenv("OPENBLAS_NUM_THREADS");
    }
    if (test_seed) {
        unsetenv("FEDSVD_INSECURE_TEST_MASK_SEED");
    }
    if (p->pid < 0) {
        p->pid = 0;
        return cli_runtime_error(L->cmd, "cannot start %s: %s", p->name, why);
    }
    return CLI_OK;
}

/* Whether pid, or a child of it (a wrapper script that does not exec),
 * listens on port: 1 yes, 0 another process does, -1 unknown (no /proc). */
static int owns_port(pid_t pid, uint16_t port)
{
    int r = fs_svc_pid_listens(pid, port);
    DIR *d;
    struct dirent *e;

    if (r != 0 || (d = opendir("/proc")) == NULL) {
        return r;
    }
    while (r == 0 && (e = readdir(d)) != NULL) {
        char path[300], buf[512];
        const char *rp;
        FILE *f;
        size_t n;
        long ppid = 0;

        if (e->d_name[0] < '1' || e->d_name[0] > '9') {
            continue;
        }
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        if ((f = fopen(path, "r")) == NULL) {
            continue;
        }
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* "pid (comm) state ppid ...": comm may hold spaces and ')' */
        rp = strrchr(buf, ')');
        if (rp != NULL && sscanf(rp + 1, " %*c %ld", &ppid) == 1 && ppid == (long)pid) {
            r = fs_svc_pid_listens((pid_t)strtol(e->d_name, NULL, 10), port);
        }
    }
    closedir(d);
    return r;
}

/* Poll every process's /readyz until all answer 200; restart (on a new port)
 * any that exited first. A port is picked before the process starts, so
 * another program may take it in between: an answer counts only when the
 * process (or its child) is the one listening there; ours then fails to
 * bind, exits and is started again on a new port. */
int local_wait_ready(struct local *L, struct proc **ps, size_t n)
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
        if (local_interrupted() != 0) {
            rc = cli_runtime_error(L->cmd, "interrupted by signal %d", local_interrupted());
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
            if (!local_proc_running(ps[i])) {
                char st[64];
                uint16_t port;

                local_describe_status(ps[i], st, sizeof st);
                fs_httpc_free(probe[i]);
                probe[i] = NULL;
                if (ps[i]->attempts >= SPAWN_ATTEMPTS) {
                    rc = cli_runtime_error(L->cmd,
                                           "%s exited before it was ready (%s, %d "
                                           "attempts; log: %s/logs/%s.log)",
                                           ps[i]->name, st, ps[i]->attempts, L->out, ps[i]->name);
                    goto out;
                }
                if (local_free_ports(1, &port) != 0) {
                    rc = cli_runtime_error(L->cmd, "cannot find a free port: %s", strerror(errno));
                    goto out;
                }
                if ((rc = local_start_proc(L, ps[i], port, local_is_server_proc(L, ps[i]))) !=
                    CLI_OK) {
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
            if (fs_httpc_do(probe[i], &rq, &resp, &err) == 0 && resp.status == 200 &&
                owns_port(ps[i]->pid, ps[i]->port) != 0) {
                ready[i] = 1;
                nready++;
            }
            fs_httpc_resp_clear(&resp);
        }
        if (nready < n) {
            /* a probe of a port not yet listening fails at once: poll often */
            orch_sleep_ms(10);
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
