/* fedsvd local: a whole federated job on this machine with the real
 * services. It starts one aggregation-server (and for fedsvd/fedpca a
 * masking-server) and one client-agent per party as child processes on free
 * loopback ports, creates the job, hands each
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
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
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
#include <unistd.h>

#include <arpa/inet.h>

#include "cli.h"
#include "io/matio.h"
#include "local.h"
#include "local_verify.h"
#include "net/auth.h"
#include "orch.h"

#define NOPTS(a)        (sizeof(a) / sizeof((a)[0]))
#define SPAWN_ATTEMPTS  5
#define READY_TIMEOUT_S 30.0
#define POLL_MS         50

static const char *const k_phases[LOCAL_FAIL_POWER] = {
    "advertise_keys", "share_keys",     "masked_input", "consistency",
    "unmasking",      "noise_exchange", "plain_upload"};

static volatile sig_atomic_t g_stop = 0;

static void on_signal(int sig)
{
    g_stop = sig;
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

json_t *local_fail_json(const struct local *L, size_t i)
{
    char buf[48];

    if (L->fail_at == NULL || L->fail_at[i] < 0) {
        return json_null();
    }
    if (L->fail_round != NULL && L->fail_round[i] >= 0) {
        snprintf(buf, sizeof buf, "%s:%d", k_phases[L->fail_at[i]], L->fail_round[i]);
        return json_string(buf);
    }
    return json_string(k_phases[L->fail_at[i]]);
}

void local_help(void)
{
    printf("Usage: fedsvd local --algorithm secure-sum --party FILE --party FILE [...] --out DIR\n"
           "                    [--threshold T [--allow-low-threshold]] [--round-timeout S]\n"
           "                    [--fail-party I:PHASE]...\n"
           "                    [--timeout S] [--keep] [--bin-dir DIR] [--format text|json]\n"
           "       fedsvd local --algorithm fedsvd|fedpca (--party FILE... | --input FILE...\n"
           "                    --parties K) --out DIR [--k K] [--partition samples|features]\n"
           "                    [--block-size C] [--standardize] [--method exact|randomized]\n"
           "                    [--allow-dropouts] [--verify] [...the options above]\n"
           "       fedsvd local --algorithm fedpower|fedpower-utility|fedpower-private|dp-ppm\n"
           "                    --party FILE... --out DIR --k K [--reference V.npy]\n"
           "                    [...the power-method options below]\n"
           "\n"
           "Run a whole federated job on this machine with the real services: start one\n"
           "aggregation-server (and for fedsvd/fedpca a masking-server) and one client-agent\n"
           "per party as separate processes on free 127.0.0.1 ports (each with its own\n"
           "temporary --data-dir and a 0600 token file), create the job (and its mask set),\n"
           "give each agent its invitation and its party's file, show a progress line on\n"
           "stderr, copy the result to DIR, and stop everything.\n"
           "\n"
           "secure-sum writes DIR/sum.npy, the elementwise sum of the matrices of every party\n"
           "that survived (took part to the end), and DIR/summary.json: algorithm, parties\n"
           "(file, state, bytes sent and received), dropped parties, per-phase seconds, the\n"
           "server's bytes in and out, the exit status of every process. The services' logs\n"
           "are copied to DIR/logs/. A job that ends with fewer than T survivors fails: exit\n"
           "status 1 with the reason, summary.json says why, and there is no sum.npy.\n"
           "\n"
           "fedsvd (samples partition) writes DIR/S.npy, DIR/V.npy (d x r, shared) and\n"
           "DIR/party-<i>/U.npy (party i's rows of U); features: DIR/U.npy shared and\n"
           "DIR/party-<i>/V.npy. fedpca writes DIR/components.npy, singular_values.npy,\n"
           "explained_variance.npy, explained_variance_ratio.npy, mean.npy and\n"
           "DIR/party-<i>/scores.npy (features: scores shared, components and mean per\n"
           "party). summary.json adds phase timings (server and parties), bytes per party\n"
           "and per server, the peak memory of every process and the numerical rank.\n"
           "\n");
    printf("Options:\n"
           "  --algorithm A        secure-sum, fedsvd, fedpca, or a power method (below)\n"
           "  --party FILE         one party's matrix (.npy, CSV, MatrixMarket, IDX); repeat\n"
           "                       once per party, 1 to %d parties; secure-sum: all of one\n"
           "                       shape; fedsvd/fedpca samples: the same columns\n"
           "  --input FILE --parties K  fedsvd/fedpca: pool the --input files (stacked by rows)\n"
           "                       and split them into K parties of near-equal rows (samples)\n"
           "                       or columns (features)\n"
           "  --out DIR            where the results, summary.json and logs/ go (created)\n"
           "  --threshold T        minimum survivors, floor(K/2)+1..K (default floor(K/2)+1)\n"
           "  --allow-low-threshold accept a --threshold below floor(K/2)+1 (for dropout\n"
           "                       tests: with at most half the parties two disjoint groups\n"
           "                       could each complete an aggregation)\n"
           "  --round-timeout S    seconds (integer) a round, and joining, waits for missing\n"
           "                       parties before counting them as dropped (default 5;\n"
           "                       fedsvd/fedpca 300: rounds close as soon as all are in;\n"
           "                       joining, with the key download, waits at least 60)\n"
           "  --fail-party I:PHASE testing aid: party I (1-based, in --party order) stops just\n"
           "                       before sending its message of PHASE, as if it had crashed;\n"
           "                       PHASE is advertise_keys, share_keys, masked_input,\n"
           "                       consistency or unmasking (power methods also\n"
           "                       noise_exchange, plain_upload); may be repeated\n"
           "  --k K                fedsvd/fedpca: the top K (default: all min(N, d))\n"
           "  --partition P        samples (default: parties hold rows) or features (columns)\n"
           "  --block-size C       largest diagonal block of the masks (default: the masking\n"
           "                       server's); keep it >= the shared dimension\n"
           "  --standardize        fedpca: scale the features to unit variance\n"
           "  --method M           exact (default) or randomized (with --k)\n"
           "  --allow-dropouts     a party lost before its data is in gives the exact result\n"
           "                       of the others (default: the job fails cleanly)\n"
           "  --verify             compare with a LAPACK SVD of the pooled matrix; the figures\n"
           "                       go to summary.json (verification)\n"
           "  --timeout S          give up on the whole run after S seconds (default 600)\n"
           "  --keep               keep the temporary directory (data dirs, tokens, logs)\n"
           "                       and print where it is\n"
           "  --bin-dir DIR        where the services are (default: the directory of this\n"
           "                       fedsvd binary)\n"
           "  --format F           text (default) or json (summary.json on one line)\n"
           "  -h, --help           show this text\n"
           "\n",
           LOCAL_MAX_PARTIES);
    local_power_help();
    printf("\n"
           "Examples:\n"
           "  fedsvd gen powerlaw --rows 300 --cols 20 --out-dir parts --parties 3\n"
           "  fedsvd local --algorithm secure-sum --party parts/party-1.npy \\\n"
           "      --party parts/party-2.npy --party parts/party-3.npy --out result\n"
           "  fedsvd local --algorithm fedpca --k 5 --verify --party parts/party-1.npy \\\n"
           "      --party parts/party-2.npy --party parts/party-3.npy --out pca\n"
           "  fedsvd local --algorithm fedpower-private --k 5 --epsilon 1 --clip-z 1 \\\n"
           "      --bound-m 25 --reference ref/V.npy --party parts/party-1.npy \\\n"
           "      --party parts/party-2.npy --party parts/party-3.npy --out power\n");
}

/* ---- child processes ---- */

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
            orch_sleep_ms(5); /* the services exit within tens of ms of SIGTERM */
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

/* Start p on `port`: argv per service (each service's --help flags). */
static int start_proc(struct local *L, struct proc *p, uint16_t port, int is_server)
{
    char listen[32], why[256], conc[16];
    char *argv[16];
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
    if (!is_server && getenv("FEDSVD_POLL_MS") == NULL) {
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
    p->pid = spawn(argv, p->log, why, sizeof why);
    if (one_blas) {
        unsetenv("OPENBLAS_NUM_THREADS");
    }
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
                if ((rc = start_proc(L, ps[i], port, ps[i] == &L->server || ps[i] == &L->masker)) !=
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
            if (fs_httpc_do(probe[i], &rq, &resp, &err) == 0 && resp.status == 200) {
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
    ps[0] = &L->server;
    if (L->fed) {
        ps[1] = &L->masker;
    }
    for (size_t i = 0; i < L->k; i++) {
        ps[i + nsrv] = &L->agents[i];
    }
    if (free_ports(n, ports) != 0) {
        rc = cli_runtime_error(L->cmd, "cannot find free ports: %s", strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rc = start_proc(L, ps[i], ports[i], i < nsrv)) != CLI_OK) {
            goto out;
        }
    }
    if ((rc = wait_ready(L, ps, n)) != CLI_OK) {
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

int local_pin_spec(struct local *L, json_t *spec)
{
    json_t *a;

    if (L->party_keys == NULL) {
        return cli_runtime_error(L->cmd, "the agents' identities are not known yet");
    }
    a = json_array();
    for (size_t i = 0; a != NULL && i < L->k; i++) {
        if (json_array_append_new(a, json_string(L->party_keys[i])) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    if (a == NULL || json_object_set_new(spec, "party_keys", a) != 0) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    return CLI_OK;
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
    spec = json_pack("{s:s, s:s, s:I, s:I, s:[I,I], s:I, s:s}", "algorithm",
                     L->fed ? (L->pca ? "fedpca" : "fedsvd") : "secure-sum", "name", "fedsvd local",
                     "parties", (json_int_t)L->k, "threshold", (json_int_t)L->thr, "shape",
                     (json_int_t)(L->fed ? L->n_rows : L->rows),
                     (json_int_t)(L->fed ? L->n_cols : L->cols), "round_timeout_s",
                     (json_int_t)L->round_timeout, "server_url", L->server.url);
    if (spec != NULL && L->allow_low_threshold) {
        json_object_set_new(spec, "allow_low_threshold", json_true());
    }
    if (spec != NULL && !L->fed) {
        /* every party is an agent of this command, started before the job:
         * one that has not joined within a round timeout has failed (a
         * job's own default, a day, is for partners who join by hand) */
        json_object_set_new(spec, "join_timeout_s", json_integer((json_int_t)L->round_timeout));
    }
    if (spec != NULL && L->fed) {
        json_t *sizes = json_array();
        for (size_t i = 0; sizes != NULL && i < L->k; i++) {
            json_array_append_new(sizes, json_integer((json_int_t)L->sizes[i]));
        }
        json_object_set_new(spec, "partition", json_string(L->features ? "features" : "samples"));
        json_object_set_new(spec, "party_sizes", sizes);
        if (L->ksvd > 0) {
            json_object_set_new(spec, "k", json_integer((json_int_t)L->ksvd));
        }
        json_object_set_new(spec, "method", json_string(L->randomized ? "randomized" : "exact"));
        if (L->pca) {
            json_object_set_new(spec, "standardize", json_boolean(L->standardize));
        }
        json_object_set_new(spec, "allow_dropouts", json_boolean(L->allow_dropouts));
        /* joining includes each agent's key download (generated on demand by
         * the masking server): give it at least a minute even when the rounds
         * are short (dropout tests) */
        json_object_set_new(
            spec, "join_timeout_s",
            json_integer((json_int_t)(L->round_timeout > 60 ? L->round_timeout : 60)));
    }
    if (spec == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    if ((rc = local_pin_spec(L, spec)) != CLI_OK) {
        goto out;
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

/*
 * fedsvd/fedpca: create the job's mask set on the masking server, each party
 * pinned to its agent's identity (so that only agent i can fetch party i's
 * keys), merge masking_url and maskset into the invitations and give the
 * mask set's end token to the aggregation server, which deletes the mask set
 * when the job ends (docs/wire-fedsvd.md). Nobody holds a credential for keys.
 */
static int create_maskset(struct local *L, json_t *invs)
{
    json_t *spec = NULL, *resp = NULL, *parties = json_array();
    const json_t *creds;
    const char *id, *end_token;
    struct fs_err err;
    double t0 = cli_now();
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (L->party_keys == NULL) {
        json_decref(parties);
        return cli_runtime_error(L->cmd, "the agents' identities are not known yet");
    }
    for (size_t i = 0; parties != NULL && i < L->k; i++) {
        json_array_append_new(parties,
                              json_pack("{s:I, s:I, s:s}", "party", (json_int_t)(i + 1),
                                        L->features ? "cols" : "rows", (json_int_t)L->sizes[i],
                                        "identity", L->party_keys[i]));
    }
    spec = json_pack(
        "{s:s, s:s, s:o, s:I, s:s}", "job_id", L->job_id, "partition",
        L->features ? "features" : "samples", "parties", parties, L->features ? "rows" : "cols",
        (json_int_t)(L->features ? L->n_rows : L->n_cols), "server_url", L->masker.url);
    if (spec != NULL && L->block > 0) {
        json_object_set_new(spec, "block_size", json_integer((json_int_t)L->block));
    }
    if (spec == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    if (fs_httpc_json(L->masker.http, "POST", "/v1/masksets", spec, &resp, NULL, &err) != 0) {
        rc = cli_runtime_error(L->cmd, "masking-server: %s", err.msg);
        goto out;
    }
    id = json_string_value(json_object_get(json_object_get(resp, "maskset"), "id"));
    creds = json_object_get(resp, "parties");
    end_token = json_string_value(json_object_get(resp, "end_token"));
    if (!orch_id_ok(id) || !json_is_array(creds) || json_array_size(creds) != L->k ||
        end_token == NULL) {
        rc = cli_runtime_error(L->cmd,
                               "POST /v1/masksets: the response lacks an id, an end token or "
                               "%zu parties",
                               L->k);
        goto out;
    }
    snprintf(L->maskset, sizeof L->maskset, "%s", id);
    for (size_t i = 0; i < L->k; i++) {
        const json_t *c = json_array_get(creds, i);
        json_t *inv = json_array_get(invs, i);
        json_int_t party = json_integer_value(json_object_get(c, "party"));
        size_t q;
        json_t *v;

        inv = NULL;
        json_array_foreach(invs, q, v)
        {
            if (json_integer_value(json_object_get(v, "party")) == party) {
                inv = v;
            }
        }
        if (inv == NULL) {
            rc = cli_runtime_error(L->cmd, "POST /v1/masksets: no party %zu", i + 1);
            goto out;
        }
        json_object_set_new(inv, "masking_url", json_string(L->masker.url));
        json_object_set_new(inv, "maskset", json_string(id));
    }
    if (orch_job_set_maskset(L->server.http, L->job_id, L->masker.url, id, end_token, &err) != 0) {
        rc = cli_runtime_error(L->cmd, "aggregation-server: %s", err.msg);
        goto out;
    }
    L->t_mask = cli_now() - t0;
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

int local_join_agents(struct local *L, const json_t *invs)
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
                         L->files[i], "format", "auto", "fail_at", local_fail_json(L, i));
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
    if (L->fed && !proc_running(&L->masker)) {
        describe_status(&L->masker, st, sizeof st);
        return cli_runtime_error(L->cmd,
                                 "masking-server stopped unexpectedly (%s); see %s/logs/%s.log", st,
                                 L->out, L->masker.name);
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

int local_follow_job(struct local *L)
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

/* One poll of every open participation; *open = how many are still not
 * done or failed. */
static int local_poll_agents(struct local *L, size_t *open)
{
    struct fs_err err;

    fs_err_clear(&err);
    *open = 0;
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
        *open += !part_terminal(p);
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
        int rc = local_poll_agents(L, &open);

        if (rc != CLI_OK) {
            return rc;
        }
        if (open == 0 || cli_now() - t0 > wait_s || g_stop != 0) {
            return CLI_OK;
        }
        orch_progress_text(&L->prog, "waiting for the agents to finish");
        orch_sleep_ms(POLL_MS);
    }
}

/* The sha256 of name in a manifest, or NULL. */
const char *local_manifest_sha(const json_t *m, const char *name)
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
    sha = local_manifest_sha(L->manifest, "sum.npy");
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
        sha = local_manifest_sha(m, "sum.npy");
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

/* ---- fedsvd / fedpca results ---- */

/* 1 when result file `name` is private to its party (else shared by all). */
static int fed_private(const struct local *L, const char *name)
{
    if (!L->features) {
        return strcmp(name, L->pca ? "scores.npy" : "U.npy") == 0;
    }
    if (!L->pca) {
        return strcmp(name, "V.npy") == 0;
    }
    return strcmp(name, "components.npy") == 0 || strcmp(name, "mean.npy") == 0 ||
           strcmp(name, "scale.npy") == 0;
}

/* max |a - b| over two equally shaped matrix files, or -1 when they differ in shape. */
static double max_abs_diff(const char *a, const char *b)
{
    fs_mat *x = NULL, *y = NULL;
    struct fs_err err;
    double d = -1.0;

    fs_err_clear(&err);
    if (fs_io_load_dense(a, FS_FMT_NPY, NULL, &x, &err) == 0 &&
        fs_io_load_dense(b, FS_FMT_NPY, NULL, &y, &err) == 0 && x->rows == y->rows &&
        x->cols == y->cols) {
        d = 0.0;
        for (size_t j = 0; j < x->cols; j++) {
            for (size_t i = 0; i < x->rows; i++) {
                double e = fabs(FS_MAT_AT(x, i, j) - FS_MAT_AT(y, i, j));
                d = e > d ? e : d;
            }
        }
    }
    fs_mat_free(x);
    fs_mat_free(y);
    return d;
}

/*
 * Every party that finished holds its result on its agent: copy the shared
 * files once to DIR (checking the other parties hold the same, to the last
 * bit or within rounding), each party's private files to DIR/party-<i>/.
 */
/* 1 if the reference party's manifest (the party whose shared files are DIR's)
 * lists name with this sha256. */
static int same_sha(const struct local *L, size_t ref, const char *name, const char *sha)
{
    const char *first = local_manifest_sha(json_array_get(L->party_manifests, ref), name);

    return first != NULL && strcmp(first, sha) == 0;
}

/* A party's private files, downloaded on a thread of their own while the
 * command goes on polling and collecting the other parties (10 parties
 * finishing within a few ms of each other no longer wait for each other's
 * downloads). The thread uses only its agent's HTTP client, which nothing
 * else touches until it is joined. */
#define FETCH_MAX 8
struct fetch {
    fs_httpc *http;
    const char *agent;
    size_t n;
    char path[FETCH_MAX][128 + ORCH_ID_MAX];
    char dest[FETCH_MAX][LOCAL_PATH];
    char sha[FETCH_MAX][65];
    pthread_t th;
    int started;
    int rc;
    char msg[512];
};

static void *fetch_main(void *arg)
{
    struct fetch *f = arg;
    struct fs_err err;

    fs_err_clear(&err);
    for (size_t q = 0; q < f->n && f->rc == 0; q++) {
        if (orch_download_verified(f->http, f->path[q], f->dest[q], f->sha[q], NULL, &err) != 0) {
            f->rc = -1;
            snprintf(f->msg, sizeof f->msg, "%s", err.msg);
        }
    }
    return NULL;
}

/* Wait for every party's downloads; the first failure, if any, is the error. */
static int fetch_join(struct local *L, struct fetch *fx, int rc)
{
    for (size_t i = 0; fx != NULL && i < L->k; i++) {
        if (!fx[i].started) {
            continue;
        }
        pthread_join(fx[i].th, NULL);
        fx[i].started = 0;
        if (fx[i].rc != 0 && rc == CLI_OK) {
            rc = cli_runtime_error(L->cmd, "%s: %s", fx[i].agent, fx[i].msg);
        }
    }
    return rc;
}

/* Party i finished (done or failed): copy its files; *ref is the party whose
 * shared files are DIR's (the first one collected), SIZE_MAX before that.
 * Its private files go to *fe, fetched on a thread (fetch_join). */
static int collect_party(struct local *L, size_t i, size_t *ref, struct fetch *fe)
{
    char path[128 + ORCH_ID_MAX], dest[LOCAL_PATH], tmp[LOCAL_PATH];
    const char *st = json_string_value(json_object_get(json_array_get(L->parts, i), "state"));
    char pdir[LOCAL_PATH], pname[32];
    json_t *m = NULL, *f;
    struct fs_err err;
    size_t q;
    int rc;

    fs_err_clear(&err);
    if (st == NULL || strcmp(st, "done") != 0) {
        return CLI_OK;
    }
    snprintf(path, sizeof path, "/v1/participations/%s/result", L->part_ids[i]);
    if (fs_httpc_json(L->agents[i].http, "GET", path, NULL, &m, NULL, &err) != 0) {
        return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
    }
    json_array_set_new(L->party_manifests, i, m);
    snprintf(pname, sizeof pname, "party-%zu", i + 1);
    if ((rc = cli_path_join(L->cmd, pdir, sizeof pdir, L->out, pname)) != CLI_OK ||
        (rc = cli_mkdir_p(L->cmd, pdir)) != CLI_OK) {
        return rc;
    }
    json_array_foreach(json_object_get(m, "files"), q, f)
    {
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *sha = json_string_value(json_object_get(f, "sha256"));
        int priv;

        if (name == NULL || sha == NULL || strchr(name, '/') != NULL || name[0] == '.') {
            return cli_runtime_error(L->cmd, "%s: a bad file entry in the result manifest",
                                     L->agents[i].name);
        }
        priv = fed_private(L, name);
        snprintf(path, sizeof path, "/v1/participations/%s/result/%s", L->part_ids[i], name);
        if ((rc = cli_path_join(L->cmd, dest, sizeof dest, priv ? pdir : L->out, name)) != CLI_OK) {
            return rc;
        }
        if (!priv && *ref != SIZE_MAX && same_sha(L, *ref, name, sha)) {
            /* shared and bit-identical to the first party's copy (SHA-256 in the
             * manifests): nothing to download */
            json_t *prev = json_object_get(L->shared_check, name);
            if (!json_is_number(prev)) {
                json_object_set_new(L->shared_check, name, json_real(0.0));
            }
            continue;
        }
        if (!priv && *ref != SIZE_MAX) {
            /* shared: the first party's copy is DIR's; compare the others with it */
            double d;
            if ((size_t)snprintf(tmp, sizeof tmp, "%s/%s", pdir, name) >= sizeof tmp) {
                return cli_runtime_error(L->cmd, "%s: path too long", pdir);
            }
            if (orch_download_verified(L->agents[i].http, path, tmp, sha, NULL, &err) != 0) {
                return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
            }
            d = max_abs_diff(dest, tmp);
            unlink(tmp);
            {
                json_t *prev = json_object_get(L->shared_check, name);
                double p0 = json_is_number(prev) ? json_number_value(prev) : 0.0;
                json_object_set_new(L->shared_check, name,
                                    d < 0 ? json_null() : json_real(d > p0 ? d : p0));
            }
            if (d < 0 || d > 1e-9) {
                return cli_runtime_error(L->cmd,
                                         "party %zu's %s differs from party %zu's (max |diff| "
                                         "%g): the parties do not agree on the shared result",
                                         i + 1, name, *ref + 1, d);
            }
            continue;
        }
        if (priv) {
            if (fe->n == FETCH_MAX || strlen(sha) >= sizeof fe->sha[0]) {
                return cli_runtime_error(L->cmd, "%s: too many private files in the result",
                                         L->agents[i].name);
            }
            snprintf(fe->path[fe->n], sizeof fe->path[0], "%s", path);
            snprintf(fe->dest[fe->n], sizeof fe->dest[0], "%s", dest);
            snprintf(fe->sha[fe->n], sizeof fe->sha[0], "%s", sha);
            fe->n++;
            continue;
        }
        if (orch_download_verified(L->agents[i].http, path, dest, sha, NULL, &err) != 0) {
            return cli_runtime_error(L->cmd, "%s: %s", L->agents[i].name, err.msg);
        }
        json_object_set_new(L->shared_check, name, json_real(0.0));
    }
    if (*ref == SIZE_MAX) {
        *ref = i;
    }
    if (fe->n == 0) {
        rmdir(pdir); /* it gets nothing */
        return CLI_OK;
    }
    fe->http = L->agents[i].http;
    fe->agent = L->agents[i].name;
    if (pthread_create(&fe->th, NULL, fetch_main, fe) != 0) {
        fetch_main(fe); /* no thread: fetch here */
        return fe->rc != 0 ? cli_runtime_error(L->cmd, "%s: %s", fe->agent, fe->msg) : CLI_OK;
    }
    fe->started = 1;
    return CLI_OK;
}

/*
 * Every party that finished holds its result on its agent: copy the shared
 * files once to DIR (checking the other parties hold the same, to the last
 * bit or within rounding), each party's private files to DIR/party-<i>/.
 * A party's files are copied as soon as it is done (its private ones on a
 * thread of their own: struct fetch), while the others still
 * recover theirs.
 */
static int fed_collect_loop(struct local *L, struct fetch *fx);

static int fed_collect(struct local *L)
{
    struct fetch *fx = calloc(L->k > 0 ? L->k : 1, sizeof *fx);
    int rc;

    if (fx == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    rc = fetch_join(L, fx, fed_collect_loop(L, fx));
    free(fx);
    return rc;
}

static int fed_collect_loop(struct local *L, struct fetch *fx)
{
    char path[128 + ORCH_ID_MAX];
    char collected[LOCAL_MAX_PARTIES] = {0};
    size_t ref = SIZE_MAX;
    double t0 = cli_now();
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    snprintf(path, sizeof path, "/v1/jobs/%s/result", L->job_id);
    if (fs_httpc_json(L->server.http, "GET", path, NULL, &L->manifest, NULL, &err) != 0) {
        return cli_fs_error(L->cmd, &err);
    }
    L->party_manifests = json_array();
    L->shared_check = json_object();
    if (L->party_manifests == NULL || L->shared_check == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    for (size_t i = 0; i < L->k; i++) {
        json_array_append_new(L->party_manifests, json_null());
    }
    for (;;) {
        size_t open = 0, got = 0;

        if ((rc = local_poll_agents(L, &open)) != CLI_OK) {
            return rc;
        }
        for (size_t i = 0; i < L->k; i++) {
            if (collected[i] || !part_terminal(json_array_get(L->parts, i))) {
                continue;
            }
            collected[i] = 1;
            got++;
            if ((rc = collect_party(L, i, &ref, &fx[i])) != CLI_OK) {
                return rc;
            }
        }
        if (open == 0 || cli_now() - t0 > 120.0 || g_stop != 0) {
            break;
        }
        if (got == 0) {
            orch_progress_text(&L->prog, "waiting for the agents to finish");
            orch_sleep_ms(POLL_MS);
        }
    }
    if (ref == SIZE_MAX) {
        return cli_runtime_error(L->cmd, "no party finished with a result");
    }
    return CLI_OK;
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

static json_t *party_json(const struct local *L, size_t i, const json_t *agent_sha)
{
    const json_t *p = json_array_get(L->parts, i);
    json_t *o;

    o = json_pack("{s:I, s:s, s:o, s:o, s:b, s:o, s:o, s:o, s:o}", "party", (json_int_t)(i + 1),
                  "file", L->shown[i], "participation",
                  L->part_ids[i] != NULL ? json_string(L->part_ids[i]) : json_null(), "state",
                  local_copy_if(p, "state", local_is_str), "dropped",
                  local_id_in(json_object_get(L->job, "dropped"), i + 1), "fail_at",
                  local_fail_json(L, i), "bytes_sent", local_copy_if(p, "bytes_sent", local_is_num),
                  "bytes_received", local_copy_if(p, "bytes_received", local_is_num), "error",
                  local_copy_if(p, "error", local_is_str));
    if (o != NULL && L->manifest != NULL) {
        json_object_set_new(
            o, "in_sum",
            json_boolean(local_id_in(json_object_get(L->manifest, "survivors"), i + 1)));
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
    json_t *dropped = local_copy_if(job, "dropped", local_is_arr);
    json_t *phases = local_copy_if(job, "timings", local_is_obj);
    json_t *s;

    /* Survivors: the parties whose input is in the sum, as the server's result
     * manifest lists them (a party that drops out after its masked input is
     * still summed), else the job's parties not dropped. */
    for (size_t i = 0; i < L->k; i++) {
        const json_t *ms = json_object_get(L->manifest, "survivors");
        int in_sum = json_is_array(ms)
                         ? local_id_in(ms, i + 1)
                         : done && !local_id_in(json_object_get(job, "dropped"), i + 1);

        json_array_append_new(parties, party_json(L, i, agent_sha));
        if (in_sum) {
            json_array_append_new(survivors, json_integer((json_int_t)(i + 1)));
        }
    }
    json_array_append_new(procs, local_proc_json(&L->server));
    for (size_t i = 0; i < L->k; i++) {
        json_array_append_new(procs, local_proc_json(&L->agents[i]));
    }
    if (json_is_null(dropped)) {
        json_decref(dropped);
        dropped = json_array();
    }
    if (json_is_null(phases)) {
        json_decref(phases);
        phases = json_object();
    }
    s = json_pack("{s:s, s:o, s:s, s:o, s:[I,I], s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:{s:o, s:o}, "
                  "s:{s:f, s:f, s:f}, s:o, s:o, s:s}",
                  "algorithm", "secure-sum", "job_id",
                  L->job_id[0] != '\0' ? json_string(L->job_id) : json_null(), "state",
                  job != NULL ? orch_job_state(job) : "failed", "error",
                  error != NULL ? json_string(error) : json_null(), "shape", (json_int_t)L->rows,
                  (json_int_t)L->cols, "party_count", (json_int_t)L->k, "threshold",
                  (json_int_t)L->thr, "round_timeout_s", (json_int_t)L->round_timeout, "parties",
                  parties, "dropped", dropped, "survivors", survivors, "phases", phases, "server",
                  "bytes_in", local_copy_if(job, "bytes_in", local_is_num), "bytes_out",
                  local_copy_if(job, "bytes_out", local_is_num), "seconds", "total",
                  cli_now() - L->t_start, "startup", L->t_ready > 0 ? L->t_ready - L->t_start : 0.0,
                  "job", L->t_finished > 0 && L->t_created > 0 ? L->t_finished - L->t_created : 0.0,
                  "files",
                  L->sum_sha[0] != '\0'
                      ? json_pack("[{s:s, s:[I,I], s:s}]", "name", "sum.npy", "shape",
                                  (json_int_t)L->rows, (json_int_t)L->cols, "sha256", L->sum_sha)
                      : json_array(),
                  "processes", procs, "out", L->out);
    return s;
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

static json_t *build_fed_summary(struct local *L, const char *error)
{
    const json_t *job = L->job;
    const json_t *res = L->manifest;
    json_t *parties = json_array(), *procs = json_array(), *files = json_object();
    json_t *phases = local_copy_if(job, "timings", local_is_obj);
    json_t *mem = json_object();
    json_t *first = NULL;
    json_t *s;

    if (json_is_null(phases)) {
        json_decref(phases);
        phases = json_object();
    }
    if (L->t_mask > 0) {
        json_object_set_new(phases, "mask_set", json_real(L->t_mask));
    }
    {
        json_t *pm = local_party_phase_max(L);
        const char *key;
        json_t *v;
        json_object_foreach(pm, key, v)
        {
            char name[64];
            snprintf(name, sizeof name, "party_%s", key);
            json_object_set(phases, name, v);
        }
        json_decref(pm);
    }
    for (size_t i = 0; i < L->k; i++) {
        const json_t *p = json_array_get(L->parts, i);
        const json_t *m = json_array_get(L->party_manifests, i);
        json_t *o = json_pack(
            "{s:I, s:s, s:[I,I], s:o, s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "party",
            (json_int_t)(i + 1), "file", L->shown[i], "shape",
            (json_int_t)(L->features ? L->n_rows : L->sizes[i]),
            (json_int_t)(L->features ? L->sizes[i] : L->n_cols), "participation",
            L->part_ids[i] != NULL ? json_string(L->part_ids[i]) : json_null(), "state",
            local_copy_if(p, "state", local_is_str), "dropped",
            local_id_in(json_object_get(job, "dropped"), i + 1), "fail_at", local_fail_json(L, i),
            "bytes_sent", local_copy_if(p, "bytes_sent", local_is_num), "bytes_received",
            local_copy_if(p, "bytes_received", local_is_num), "timings",
            local_copy_if(m, "party_timings", local_is_obj), "rank",
            local_copy_if(m, "rank", local_is_num), "peak_memory_bytes",
            local_hwm_json(&L->agents[i]), "error", local_copy_if(p, "error", local_is_str));
        json_t *names = json_array();
        size_t q;
        json_t *f;

        json_array_foreach(json_object_get(m, "files"), q, f)
        {
            const char *n = json_string_value(json_object_get(f, "name"));
            char buf[80];
            if (n == NULL) {
                continue;
            }
            if (fed_private(L, n)) {
                snprintf(buf, sizeof buf, "party-%zu/%s", i + 1, n);
                json_array_append_new(names, json_string(buf));
            } else if (json_object_get(files, n) == NULL) {
                json_object_set_new(files, n, json_string(n));
            }
        }
        if (o != NULL) {
            json_object_set_new(o, "files", names);
            json_object_set_new(
                o, "in_result",
                json_boolean(local_id_in(json_object_get(res, "survivors"), i + 1)));
        } else {
            json_decref(names);
        }
        if (first == NULL && json_is_object(m)) {
            first = (json_t *)m;
        }
        json_array_append_new(parties, o);
        json_object_set_new(mem, L->agents[i].name, local_hwm_json(&L->agents[i]));
    }
    json_object_set_new(mem, L->server.name, local_hwm_json(&L->server));
    json_object_set_new(mem, L->masker.name, local_hwm_json(&L->masker));
    json_array_append_new(procs, local_proc_json(&L->server));
    json_array_append_new(procs, local_proc_json(&L->masker));
    for (size_t i = 0; i < L->k; i++) {
        json_array_append_new(procs, local_proc_json(&L->agents[i]));
    }
    s = json_pack("{s:s, s:s, s:o, s:o, s:s, s:o, s:[I,I], s:I, s:I, s:I, s:o, s:b, s:b, s:o, "
                  "s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                  "algorithm", L->pca ? "fedpca" : "fedsvd", "partition",
                  L->features ? "features" : "samples", "job_id",
                  L->job_id[0] != '\0' ? json_string(L->job_id) : json_null(), "maskset",
                  L->maskset[0] != '\0' ? json_string(L->maskset) : json_null(), "state",
                  job != NULL ? orch_job_state(job) : "failed", "error",
                  error != NULL ? json_string(error) : json_null(), "shape", (json_int_t)L->n_rows,
                  (json_int_t)L->n_cols, "party_count", (json_int_t)L->k, "threshold",
                  (json_int_t)L->thr, "round_timeout_s", (json_int_t)L->round_timeout, "k",
                  L->ksvd > 0 ? json_integer((json_int_t)L->ksvd) : json_null(), "standardize",
                  L->standardize, "allow_dropouts", L->allow_dropouts, "rank",
                  local_copy_if(first != NULL ? first : res, "rank", local_is_num), "r",
                  local_copy_if(res, "r", local_is_num), "singular_values",
                  local_copy_if(res, "singular_values", local_is_arr), "survivors",
                  local_copy_if(res, "survivors", local_is_arr), "dropped",
                  local_copy_if(job, "dropped", local_is_arr), "phases", phases, "parties", parties,
                  "peak_memory_bytes", mem);
    if (s == NULL) {
        json_decref(procs);
        json_decref(files);
        return NULL;
    }
    json_object_set_new(
        s, "servers",
        json_pack(
            "{s:{s:o, s:o, s:o}, s:{s:o, s:o, s:o}}", "aggregation", "bytes_in",
            local_copy_if(job, "bytes_in", local_is_num), "bytes_out",
            local_copy_if(job, "bytes_out", local_is_num), "peak_memory_bytes",
            local_hwm_json(&L->server), "masking", "bytes_in",
            L->masker_bytes_in >= 0 ? json_integer((json_int_t)L->masker_bytes_in) : json_null(),
            "bytes_out",
            L->masker_bytes_out >= 0 ? json_integer((json_int_t)L->masker_bytes_out) : json_null(),
            "peak_memory_bytes", local_hwm_json(&L->masker)));
    {
        json_t *shared = json_array();
        const char *key;
        json_t *v;
        json_object_foreach(files, key, v)
        {
            json_array_append_new(shared, json_string(key));
        }
        json_decref(files);
        json_object_set_new(s, "shared_files", shared);
    }
    json_object_set_new(s, "shared_max_abs_difference",
                        L->shared_check != NULL ? json_incref(L->shared_check) : json_object());
    json_object_set_new(
        s, "seconds",
        json_pack(
            "{s:f, s:f, s:f, s:f, s:f}", "total", cli_now() - L->t_start, "startup",
            L->t_ready > 0 ? L->t_ready - L->t_start : 0.0, "job",
            L->t_finished > 0 && L->t_created > 0 ? L->t_finished - L->t_created : 0.0, "collect",
            L->t_collected > 0 && L->t_finished > 0 ? L->t_collected - L->t_finished : 0.0, "stop",
            L->t_stopped > 0 && L->t_collected > 0 ? L->t_stopped - L->t_collected : 0.0));
    json_object_set_new(s, "processes", procs);
    json_object_set_new(s, "out", json_string(L->out));
    if (L->verify != NULL) {
        json_object_set(s, "verification", L->verify);
    }
    return s;
}

static void print_fed_text(const struct local *L, const json_t *summary)
{
    json_int_t rank = json_integer_value(json_object_get(summary, "rank"));
    json_int_t r = json_integer_value(json_object_get(summary, "r"));
    const char *priv =
        L->features ? (L->pca ? "components.npy" : "V.npy") : (L->pca ? "scores.npy" : "U.npy");

    printf("%s (%s partition) of %zu x %zu over %zu of %zu parties in %.1f s: r %lld, numerical "
           "rank %lld\n",
           L->pca ? "fedpca" : "fedsvd", L->features ? "features" : "samples", L->n_rows, L->n_cols,
           orch_count(summary, "survivors"), L->k, L->t_finished - L->t_created, (long long)r,
           (long long)rank);
    if (L->pca) {
        printf("  %s/{components,explained_variance,explained_variance_ratio,singular_values%s}"
               ".npy, %s/party-<i>/%s\n",
               L->out, L->features ? ",scores" : ",mean", L->out, priv);
    } else {
        printf("  %s/S.npy, %s/%s (shared), %s/party-<i>/%s (each party's own)\n", L->out, L->out,
               L->features ? "U.npy" : "V.npy", L->out, priv);
    }
    printf("  %s/summary.json (phase timings, bytes, peak memory)\n", L->out);
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

/*
 * --input FILE... --parties K: pool the inputs (stacked by rows: samples)
 * and split them into K contiguous, near-equal blocks of rows (samples) or
 * of columns (features), written as .npy into the run's temporary
 * directory; those become the parties' files.
 */
static int split_inputs(struct local *L, const char **input, size_t ninput, char **names)
{
    fs_mat **m = calloc(ninput, sizeof *m);
    struct fs_err err;
    size_t rows = 0, cols = 0;
    fs_mat *x = NULL;
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (m == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    for (size_t i = 0; i < ninput; i++) {
        if (fs_io_load_dense(input[i], FS_FMT_AUTO, NULL, &m[i], &err) != 0) {
            rc = cli_fs_error(L->cmd, &err);
            goto out;
        }
        if (i > 0 && m[i]->cols != cols) {
            rc = cli_runtime_error(L->cmd, "%s: %zu columns, but %s has %zu", input[i], m[i]->cols,
                                   input[0], cols);
            goto out;
        }
        cols = m[i]->cols;
        rows += m[i]->rows;
    }
    if ((L->features ? cols : rows) < L->k) {
        rc = cli_runtime_error(L->cmd, "cannot split %zu %s into %zu parties",
                               L->features ? cols : rows, L->features ? "columns" : "rows", L->k);
        goto out;
    }
    x = fs_mat_new(rows, cols);
    if (x == NULL) {
        rc = cli_runtime_error(L->cmd, "out of memory for the %zu x %zu input", rows, cols);
        goto out;
    }
    {
        size_t off = 0;
        for (size_t i = 0; i < ninput; i++) {
            for (size_t j = 0; j < cols; j++) {
                memcpy(&FS_MAT_AT(x, off, j), &FS_MAT_AT(m[i], 0, j), m[i]->rows * sizeof(double));
            }
            off += m[i]->rows;
            fs_mat_free(m[i]);
            m[i] = NULL;
        }
    }
    {
        size_t total = L->features ? cols : rows;
        size_t off = 0;
        for (size_t p = 0; p < L->k; p++) {
            size_t n = total / L->k + (p < total % L->k ? 1 : 0);
            fs_mat v =
                L->features ? fs_mat_view(x, 0, off, rows, n) : fs_mat_view(x, off, 0, n, cols);
            fs_mat *c = fs_mat_dup(&v);
            char path[LOCAL_PATH];

            if (c == NULL) {
                rc = cli_runtime_error(L->cmd, "out of memory");
                goto out;
            }
            if ((size_t)snprintf(path, sizeof path, "%s/input-party-%zu.npy", L->root, p + 1) >=
                    sizeof path ||
                fs_npy_write_mat(path, c, &err) != 0) {
                fs_mat_free(c);
                rc = cli_fs_error(L->cmd, &err);
                goto out;
            }
            fs_mat_free(c);
            names[p] = strdup(path);
            if (names[p] == NULL) {
                rc = cli_runtime_error(L->cmd, "out of memory");
                goto out;
            }
            L->shown[p] = names[p];
            off += n;
        }
    }
out:
    for (size_t i = 0; i < ninput; i++) {
        fs_mat_free(m[i]);
    }
    free(m);
    fs_mat_free(x);
    return rc;
}

/* --verify: the result against a centralised SVD of the pooled matrix. */
static int run_verify(struct local *L)
{
    struct local_verify_in in;
    struct fs_err err;
    int *inc = calloc(L->k, sizeof *inc);
    int rc;

    fs_err_clear(&err);
    if (inc == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    for (size_t i = 0; i < L->k; i++) {
        inc[i] = local_id_in(json_object_get(L->manifest, "survivors"), i + 1);
    }
    memset(&in, 0, sizeof in);
    in.pca = L->pca;
    in.features = L->features;
    in.standardize = L->standardize;
    in.k = L->ksvd;
    in.nparties = L->k;
    in.files = (const char *const *)L->files;
    in.included = inc;
    in.out = L->out;
    orch_progress_text(&L->prog, "verifying against a centralised SVD");
    rc = local_verify(&in, &L->verify, &err);
    free(inc);
    orch_progress_done(&L->prog);
    return rc == 0 ? CLI_OK : cli_fs_error(L->cmd, &err);
}

/* ---- argument handling ---- */

/* Take every --party/--fail-party (repeatable) out of argv; the rest goes to
 * cli_parse. rest[] has room for argc entries. */
int local_split_repeated(const char *cmd, int argc, char **argv, const char **party, size_t *nparty,
                         const char **fail, size_t *nfail, const char **input, size_t *ninput,
                         char **rest, int *nrest)
{
    *nparty = 0;
    *nfail = 0;
    *ninput = 0;
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
        } else if (strcmp(a, "--input") == 0 || strncmp(a, "--input=", 8) == 0) {
            list = input;
            n = ninput;
            val = a[7] == '=' ? a + 8 : NULL;
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
                                   list == party   ? "--party"
                                   : list == input ? "--input"
                                                   : "--fail-party");
        }
        list[(*n)++] = val;
    }
    return CLI_OK;
}

int local_parse_fail(const char *cmd, const char *s, size_t k, size_t nphases, int *fail_at,
                     int *fail_round)
{
    const char *colon = strchr(s, ':');
    const char *second = colon != NULL ? strchr(colon + 1, ':') : NULL;
    char num[16], phase[32];
    size_t idx = 0, len, round = 0;
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
    /* I:PHASE:R (the power methods): stop at the message of PHASE in aggregation R */
    len = second != NULL ? (size_t)(second - colon - 1) : strlen(colon + 1);
    if (len >= sizeof phase || (second != NULL && fail_round == NULL)) {
        return cli_usage_error(cmd, "--fail-party: expected I:PHASE%s, got '%s'",
                               fail_round != NULL ? "[:R]" : "", s);
    }
    memcpy(phase, colon + 1, len);
    phase[len] = '\0';
    if (second != NULL &&
        (rc = cli_parse_size(cmd, "--fail-party round", second + 1, 0, 99999, &round)) != CLI_OK) {
        return rc;
    }
    for (int p = 0; p < (int)nphases && p < (int)NOPTS(k_phases); p++) {
        if (strcmp(phase, k_phases[p]) == 0) {
            if (fail_at[idx - 1] >= 0) {
                return cli_usage_error(cmd, "--fail-party: party %zu given twice", idx);
            }
            if (second != NULL && p < 2) {
                return cli_usage_error(cmd, "--fail-party: %s happens once per job: no :R", phase);
            }
            fail_at[idx - 1] = p;
            if (fail_round != NULL) {
                fail_round[idx - 1] = second != NULL ? (int)round : -1;
            }
            return CLI_OK;
        }
    }
    return cli_usage_error(cmd,
                           "--fail-party: PHASE must be advertise_keys, share_keys, masked_input, "
                           "consistency%s unmasking%s, got '%s'",
                           nphases > LOCAL_FAIL_SECAGG ? "," : " or",
                           nphases > LOCAL_FAIL_SECAGG ? ", noise_exchange or plain_upload" : "",
                           phase);
}

int local_parse_args(const char *cmd, int argc, char **argv, const struct cli_opt *opts,
                     size_t nopts, const char **party, size_t *nparty, const char **fail,
                     size_t *nfail, const char **input, size_t *ninput, char **rest, int *help)
{
    const char *pos[1];
    size_t npos = 0;
    int nrest = 0;
    int rc;

    rc = local_split_repeated(cmd, argc, argv, party, nparty, fail, nfail, input, ninput, rest,
                              &nrest);
    if (rc == CLI_OK) {
        rc = cli_parse(cmd, nrest, rest, opts, nopts, pos, 0, &npos, help);
    }
    if (rc != CLI_OK && !*help) {
        /* --help anywhere wins, even after a bad --party. */
        for (int i = 1; i < argc; i++) {
            if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                *help = 1;
            }
        }
    }
    return *help ? CLI_OK : rc;
}

int local_alloc(struct local *L, const char **fail, size_t nfail, size_t nphases)
{
    L->files = calloc(L->k, sizeof *L->files);
    L->part_ids = calloc(L->k, sizeof *L->part_ids);
    L->agents = calloc(L->k, sizeof *L->agents);
    L->fail_at = calloc(L->k, sizeof *L->fail_at);
    L->fail_round = calloc(L->k, sizeof *L->fail_round);
    L->sizes = calloc(L->k, sizeof *L->sizes);
    L->parts = json_array();
    L->masker_bytes_in = L->masker_bytes_out = -1;
    if (L->files == NULL || L->part_ids == NULL || L->agents == NULL || L->fail_at == NULL ||
        L->fail_round == NULL || L->sizes == NULL || L->parts == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    for (size_t i = 0; i < L->k; i++) {
        L->fail_at[i] = -1;
        L->fail_round[i] = -1;
        json_array_append_new(L->parts, json_null());
    }
    for (size_t i = 0; i < nfail; i++) {
        int rc = local_parse_fail(L->cmd, fail[i], L->k, nphases, L->fail_at,
                                  nphases > LOCAL_FAIL_SECAGG ? L->fail_round : NULL);
        if (rc != CLI_OK) {
            return rc;
        }
    }
    return CLI_OK;
}

int local_write_summary(struct local *L, json_t *summary, int rc)
{
    char path[LOCAL_PATH];

    if (summary != NULL &&
        cli_path_join(L->cmd, path, sizeof path, L->out, "summary.json") == CLI_OK) {
        int wrc = cli_write_json_file(L->cmd, path, json_incref(summary));

        rc = rc != CLI_OK ? rc : wrc;
    }
    return rc;
}

/* Resolve every party file and check that all have one shape. */
static int check_parties(struct local *L)
{
    struct fs_err err;

    fs_err_clear(&err);
    for (size_t i = 0; i < L->k; i++) {
        char abs[PATH_MAX];
        size_t rows = 0;
        size_t cols = 0;

        if (realpath(L->shown[i], abs) == NULL) {
            return cli_runtime_error(L->cmd, "%s: %s", L->shown[i], strerror(errno));
        }
        L->files[i] = strdup(abs);
        if (L->files[i] == NULL) {
            return cli_runtime_error(L->cmd, "out of memory");
        }
        /* every value checked now, so a bad file fails before anything starts
         * (the agents load their file again; .npy files are streamed here) */
        if (fs_io_check_dense(abs, FS_FMT_AUTO, NULL, &rows, &cols, &err) != 0) {
            return cli_fs_error(L->cmd, &err);
        }
        if (L->fed) {
            /* samples: same columns, rows add up; features: the mirror */
            size_t same = L->features ? rows : cols;
            size_t own = L->features ? cols : rows;
            size_t want = L->features ? L->n_rows : L->n_cols;
            if (i > 0 && same != want) {
                int rc = cli_runtime_error(
                    L->cmd, "%s: %zu %s, but %s has %zu (partition %s: parties share the %s)",
                    L->shown[i], same, L->features ? "rows" : "columns", L->shown[0], want,
                    L->features ? "features" : "samples", L->features ? "rows" : "columns");
                return rc;
            }
            if (L->features) {
                L->n_rows = same;
                L->n_cols += own;
            } else {
                L->n_cols = same;
                L->n_rows += own;
            }
            L->sizes[i] = own;
            L->rows = rows;
            L->cols = cols;
            continue;
        }
        if (i == 0) {
            L->rows = rows;
            L->cols = cols;
        } else if (rows != L->rows || cols != L->cols) {
            int rc = cli_runtime_error(L->cmd, "%s: shape %zu x %zu differs from %s (%zu x %zu)",
                                       L->shown[i], rows, cols, L->shown[0], L->rows, L->cols);
            return rc;
        }
    }
    return CLI_OK;
}

/* fedsvd/fedpca: --k, when given, against the pooled N x d that check_parties found. */
static int check_k(const struct local *L, const char *s_k)
{
    size_t r = L->n_rows < L->n_cols ? L->n_rows : L->n_cols;

    if (!L->fed || s_k == NULL || (L->ksvd >= 1 && L->ksvd <= r)) {
        return CLI_OK;
    }
    return cli_usage_error(L->cmd,
                           "--k: must be between 1 and min(N, d) = %zu (N = %zu rows, d = %zu "
                           "columns in all), got '%s'",
                           r, L->n_rows, L->n_cols, s_k);
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
        (void)copy_file(L->server.log, to);
    }
    if (L->fed && (size_t)snprintf(to, sizeof to, "%s/%s.log", dir, L->masker.name) < sizeof to) {
        (void)copy_file(L->masker.log, to);
    }
    for (size_t i = 0; i < L->k; i++) {
        if ((size_t)snprintf(to, sizeof to, "%s/%s.log", dir, L->agents[i].name) < sizeof to) {
            (void)copy_file(L->agents[i].log, to);
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
    free(L->files);
    free(L->part_ids);
    free(L->agents);
    free(L->party_keys);
    free(L->fail_at);
    free(L->fail_round);
    free(L->sizes);
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

void local_stop(struct local *L)
{
    struct proc *ps[LOCAL_MAX_PARTIES + 2];
    size_t n = 0;

    if (L->agents == NULL) {
        return;
    }
    for (size_t i = 0; i < L->k; i++) {
        ps[n++] = &L->agents[i];
    }
    ps[n++] = &L->server;
    if (L->fed) {
        ps[n++] = &L->masker;
        L->masker_bytes_in = scrape_metric(&L->masker, "fedsvd_bytes_received_total");
        L->masker_bytes_out = scrape_metric(&L->masker, "fedsvd_bytes_sent_total");
    }
    /* peak memory of every process, while it still runs */
    for (size_t i = 0; i < n; i++) {
        if (proc_running(ps[i])) {
            ps[i]->hwm_kb = local_read_hwm_kb(ps[i]->pid);
            ps[i]->cpu_s = read_cpu_s(ps[i]->pid);
        }
    }
    stop_all(ps, n, 5.0);
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
        orch_job_get(L->server.http, L->job_id, &job, &err) == 0) {
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

int local_drive(struct local *L, const json_t *invs, char *error, size_t error_cap)
{
    int rc;

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
    if (strcmp(orch_job_state(L->job), "done") != 0) {
        const char *why = json_string_value(json_object_get(L->job, "error"));

        snprintf(error, error_cap, "%s", why != NULL ? why : "the job failed (no reason given)");
        (void)local_settle_agents(L, 5.0);
        local_refresh_job(L);
        return cli_runtime_error(L->cmd, "job %s failed: %s", L->job_id, error);
    }
    return CLI_OK;
}

/* The run itself, once arguments are checked: returns the exit status and
 * leaves the error text (if any) in *error for the summary. */
static int run(struct local *L, char *error, size_t error_cap)
{
    json_t *invs = NULL;
    int rc;

    error[0] = '\0';
    if ((rc = local_start(L, error, error_cap)) != CLI_OK) {
        goto out;
    }
    if ((rc = create_job(L, &invs)) != CLI_OK ||
        (L->fed && (rc = create_maskset(L, invs)) != CLI_OK)) {
        snprintf(error, error_cap, "job setup failed");
        goto out;
    }
    if ((rc = local_drive(L, invs, error, error_cap)) != CLI_OK) {
        goto out;
    }
    if (L->fed) {
        if ((rc = fed_collect(L)) != CLI_OK) {
            snprintf(error, error_cap, "could not collect the parties' results");
            goto out;
        }
        L->t_collected = cli_now();
    } else if ((rc = fetch_result(L)) != CLI_OK || (rc = local_settle_agents(L, 60.0)) != CLI_OK) {
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
    const char *s_bin = NULL, *s_format = NULL, *s_k = NULL, *s_part = NULL, *s_block = NULL;
    const char *s_method = NULL, *s_parties = NULL;
    int keep = 0, standardize = 0, allow_dropouts = 0, verify = 0, allow_low = 0;
    struct cli_opt opts[] = {
        {"algorithm", CLI_OPT_VALUE, &s_alg, NULL},
        {"out", CLI_OPT_DIR, &s_out, NULL},
        {"threshold", CLI_OPT_VALUE, &s_thr, NULL},
        {"allow-low-threshold", CLI_OPT_FLAG, NULL, &allow_low},
        {"round-timeout", CLI_OPT_VALUE, &s_rt, NULL},
        {"timeout", CLI_OPT_VALUE, &s_timeout, NULL},
        {"bin-dir", CLI_OPT_DIR, &s_bin, NULL},
        {"format", CLI_OPT_VALUE, &s_format, NULL},
        {"keep", CLI_OPT_FLAG, NULL, &keep},
        {"k", CLI_OPT_VALUE, &s_k, NULL},
        {"partition", CLI_OPT_VALUE, &s_part, NULL},
        {"block-size", CLI_OPT_VALUE, &s_block, NULL},
        {"method", CLI_OPT_VALUE, &s_method, NULL},
        {"standardize", CLI_OPT_FLAG, NULL, &standardize},
        {"allow-dropouts", CLI_OPT_FLAG, NULL, &allow_dropouts},
        {"parties", CLI_OPT_VALUE, &s_parties, NULL},
        {"verify", CLI_OPT_FLAG, NULL, &verify},
    };
    const char *party[LOCAL_MAX_PARTIES], *fail[LOCAL_MAX_PARTIES], *input[LOCAL_MAX_PARTIES];
    char *split_names[LOCAL_MAX_PARTIES];
    size_t ninput = 0, nsplit = 0;
    char **rest = NULL;
    size_t nparty = 0, nfail = 0, rt = 5;
    int help = 0, rc;
    struct local L;
    struct local_signals sigs;
    char error[FS_ERR_MSG_MAX];
    json_t *agent_sha = NULL, *summary = NULL;

    for (int i = 1; i + 1 < argc; i++) {
        /* the power methods have options of their own: cmd_local_power.c */
        if (strcmp(argv[i], "--algorithm") == 0 && orch_power_algorithm(argv[i + 1])) {
            return cmd_local_power(argc, argv);
        }
    }
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--algorithm=", 12) == 0 && orch_power_algorithm(argv[i] + 12)) {
            return cmd_local_power(argc, argv);
        }
    }
    memset(&L, 0, sizeof L);
    memset(&sigs, 0, sizeof sigs);
    L.cmd = cmd;
    L.round_timeout = 5;
    L.timeout = 600;
    error[0] = '\0';
    rest = calloc((size_t)argc + 1, sizeof *rest);
    if (rest == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    rc = local_parse_args(cmd, argc, argv, opts, NOPTS(opts), party, &nparty, fail, &nfail, input,
                          &ninput, rest, &help);
    if (rc != CLI_OK) {
        goto out;
    }
    if (help) {
        local_help();
        rc = CLI_OK;
        goto out;
    }
    memset(split_names, 0, sizeof split_names);
    if (ninput > 0 || s_parties != NULL) {
        if (nparty > 0 || ninput == 0 || s_parties == NULL) {
            rc = cli_usage_error(cmd, "give either --party FILE per party, or --input FILE... "
                                      "with --parties K");
            goto out;
        }
        if ((rc = cli_parse_size(cmd, "--parties", s_parties, 1, LOCAL_MAX_PARTIES, &nsplit)) !=
            CLI_OK) {
            goto out;
        }
        for (size_t i = 0; i < nsplit; i++) {
            party[i] = "(split)"; /* replaced once the split files exist */
        }
        nparty = nsplit;
    }
    if (s_alg == NULL || s_out == NULL || nparty == 0) {
        rc = cli_usage_error(cmd, "--algorithm, --out and at least one --party are required");
        goto out;
    }
    if (strcmp(s_alg, "fedsvd") == 0 || strcmp(s_alg, "fedpca") == 0) {
        L.fed = 1;
        L.pca = strcmp(s_alg, "fedpca") == 0;
    } else if (strcmp(s_alg, "secure-sum") != 0) {
        rc = cli_usage_error(cmd, "--algorithm: expected " ORCH_ALGORITHMS ", got '%s'", s_alg);
        goto out;
    }
    if (!L.fed && (s_k != NULL || s_part != NULL || s_block != NULL || s_method != NULL ||
                   standardize || allow_dropouts)) {
        rc = cli_usage_error(cmd, "--k, --partition, --block-size, --method, --standardize and "
                                  "--allow-dropouts are for fedsvd and fedpca");
        goto out;
    }
    if (standardize && !L.pca) {
        rc = cli_usage_error(cmd, "--standardize is for fedpca");
        goto out;
    }
    if (s_part != NULL && strcmp(s_part, "samples") != 0 && strcmp(s_part, "features") != 0) {
        rc = cli_usage_error(cmd, "--partition: expected samples or features, got '%s'", s_part);
        goto out;
    }
    if (s_method != NULL && strcmp(s_method, "exact") != 0 && strcmp(s_method, "randomized") != 0) {
        rc = cli_usage_error(cmd, "--method: expected exact or randomized, got '%s'", s_method);
        goto out;
    }
    /* (--k 0 too: its range, 1..min(N, d), is known once the files are read) */
    if ((s_k != NULL && (rc = cli_parse_size(cmd, "--k", s_k, 0, (size_t)1 << 31, &L.ksvd)) != 0) ||
        (s_block != NULL &&
         (rc = cli_parse_size(cmd, "--block-size", s_block, 1, (size_t)1 << 31, &L.block)) != 0)) {
        goto out;
    }
    L.features = s_part != NULL && strcmp(s_part, "features") == 0;
    L.randomized = s_method != NULL && strcmp(s_method, "randomized") == 0;
    if (L.randomized && s_k == NULL) {
        rc = cli_usage_error(cmd, "--method randomized needs --k");
        goto out;
    }
    L.standardize = standardize;
    L.allow_dropouts = allow_dropouts;
    /* fedsvd/fedpca rounds carry whole matrices: a round closes as soon as
     * every party is in, so a long deadline costs nothing unless one drops */
    if (L.fed) {
        rt = 300;
    }
    L.k = nparty;
    L.shown = party;
    L.out = s_out;
    L.keep = keep;
    L.thr = L.k / 2 + 1;
    L.allow_low_threshold = allow_low;
    if ((rc = local_alloc(&L, fail, nfail, LOCAL_FAIL_SECAGG)) != CLI_OK) {
        goto out;
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
    if (verify && !L.fed) {
        rc = cli_usage_error(cmd, "--verify is for fedsvd and fedpca");
        goto out;
    }
    if ((nsplit == 0 &&
         ((rc = check_parties(&L)) != CLI_OK || (rc = check_k(&L, s_k)) != CLI_OK)) ||
        (rc = local_find_bin_dir(&L, s_bin)) != CLI_OK ||
        (rc = cli_mkdir_p(cmd, s_out)) != CLI_OK) {
        goto out;
    }
    local_remove_stale(&L);
    local_signals_install(&sigs);
    if ((rc = local_setup_root(&L)) != CLI_OK ||
        (nsplit > 0 && ((rc = split_inputs(&L, input, ninput, split_names)) != CLI_OK ||
                        (rc = check_parties(&L)) != CLI_OK || (rc = check_k(&L, s_k)) != CLI_OK)) ||
        (rc = local_init_proc(&L, &L.server, "aggregation-server", "aggregation-server")) !=
            CLI_OK ||
        (L.fed &&
         (rc = local_init_proc(&L, &L.masker, "masking-server", "masking-server")) != CLI_OK)) {
        goto out;
    }
    for (size_t i = 0; i < L.k; i++) {
        char name[32];

        snprintf(name, sizeof name, "agent-%zu", i + 1);
        if ((rc = local_init_proc(&L, &L.agents[i], name, "client-agent")) != CLI_OK) {
            goto out;
        }
    }
    rc = run(&L, error, sizeof error);
    if (rc == CLI_OK && L.fed && verify) {
        rc = run_verify(&L);
        if (rc != CLI_OK) {
            snprintf(error, sizeof error, "verification failed");
        }
    }
    if (rc == CLI_OK && !L.fed) {
        agent_sha = json_array();
        rc = check_agent_results(&L, agent_sha);
        if (rc != CLI_OK) {
            snprintf(error, sizeof error, "agents disagree with the server");
        }
        local_refresh_job(&L);
    }
out:
    orch_progress_done(&L.prog);
    local_stop(&L);
    if (L.root[0] != '\0') {
        local_copy_logs(&L);
        if (L.t_start > 0) {
            summary = L.fed ? build_fed_summary(&L, error[0] != '\0' ? error : NULL)
                            : build_summary(&L, agent_sha, error[0] != '\0' ? error : NULL);
            rc = local_write_summary(&L, summary, rc);
        }
        local_drop_root(&L);
    }
    if (summary != NULL && L.json) {
        /* on failure too: the summary says what failed */
        int prc = cli_print_json(cmd, json_incref(summary));

        rc = rc != CLI_OK ? rc : prc;
    } else if (rc == CLI_OK && summary != NULL) {
        size_t ns = orch_count(summary, "survivors");
        size_t nd = orch_count(summary, "dropped");

        if (L.fed) {
            print_fed_text(&L, summary);
        } else {
            printf("secure-sum of %zu of %zu parties (%zu dropped, threshold %zu) in %.1f s: "
                   "%s/sum.npy\n",
                   ns, L.k, nd, L.thr, L.t_finished - L.t_created, s_out);
        }
    }
    local_signals_restore(&sigs);
    json_decref(summary);
    json_decref(agent_sha);
    local_free(&L);
    for (size_t i = 0; i < nsplit; i++) {
        free(split_names[i]);
    }
    free(rest);
    return rc;
}

/* ---- for the commands that run several jobs on one set of services (lsa) ---- */

int local_create_job(struct local *L, json_t **invitations)
{
    return create_job(L, invitations);
}

int local_create_maskset(struct local *L, json_t *invs)
{
    return create_maskset(L, invs);
}

int local_fetch_sum(struct local *L)
{
    return fetch_result(L);
}

int local_fed_collect(struct local *L)
{
    return fed_collect(L);
}

json_t *local_fed_summary(struct local *L, const char *error)
{
    return build_fed_summary(L, error);
}
