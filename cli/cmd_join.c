/* fedsvd join: a site operator hands its client-agent an invitation and the
 * path of the site's dataset in one command (POST /v1/participations), and
 * with --wait follows the participation until the site's part of the job
 * ends. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "crypto/ct.h"
#include "jobs.h"
#include "orch.h"
#include "participation.h"

#define NOPTS(a)        (sizeof(a) / sizeof((a)[0]))
#define INVITATION_MAX  (4u << 20) /* bytes of an invitation file */
#define JOIN_TIMEOUT_MS 600000L    /* the agent reads and checks the dataset in the request */
#define AGENT_PATIENCE  120.0      /* seconds an unreachable agent is retried while waiting */
#define EXIT_INTERRUPT  130
#define DATA_PATH_CAP   4096 /* the agent's cap on a dataset path */

static volatile sig_atomic_t g_join_stop = 0;

static void join_on_signal(int sig)
{
    g_join_stop = sig;
}

static void join_help(void)
{
    printf("Usage: fedsvd join --agent URL --token-file F --invitation FILE --data FILE\n"
           "                   [--data-format F] [--dataset-id NAME] [--wait]\n"
           "                   [--interval S] [--ca-file F] [--insecure] [--insecure-http]\n"
           "                   [--format text|json]\n"
           "\n"
           "Join a federated job: hand the site's client-agent the invitation the job's\n"
           "creator sent (one party's JSON object, holding that party's secret token) and\n"
           "the site's dataset (POST /v1/participations). The agent checks both (the\n"
           "invitation pins this agent's identity, the dataset has the job's shape) and\n"
           "runs the site's part of the job on its own; this prints the participation id.\n"
           "\n"
           "--data is a path on the AGENT's machine: the agent reads the file, the data\n"
           "never passes through this command (a relative path is taken relative to the\n"
           "current directory, for an agent on this machine).\n"
           "\n"
           "With --wait, progress lines go to stderr (one per change of state or phase)\n"
           "until the site's part ends: exit 0 when it is done, 1 when it failed (with the\n"
           "reason). Ctrl-C stops waiting only: the participation keeps running on the\n"
           "agent (exit 130); follow it with 'fedsvd participation status'. The job waits\n"
           "for every party to join (a day by default) before its rounds start.\n"
           "\n"
           "Options:\n");
    orch_agent_help();
    printf("  --invitation FILE      this party's invitation (from 'fedsvd job create')\n"
           "  --data FILE            the party's matrix, a path on the agent's machine\n"
           "  --data-format F        auto (default: by extension), npy, csv, mtx or idx\n"
           "  --dataset-id NAME      the dataset's name in the agent's privacy ledger\n"
           "                         (power-method jobs; default: its SHA-256)\n"
           "  --wait                 follow the participation until it ends\n"
           "  --interval S           seconds between status requests with --wait (default 1)\n"
           "  --format F             text (default: the participation id alone on the first\n"
           "                         line of stdout) or json (the participation document; with\n"
           "                         --wait the final one)\n"
           "  -h, --help             show this text\n");
}

/* Read and check the invitation file (a secret: the buffer is wiped). */
static int load_invitation(const char *cmd, const char *file, struct fs_invitation *inv)
{
    struct fs_err err;
    json_error_t jerr;
    struct stat sb;
    char *buf = NULL;
    json_t *j = NULL;
    size_t n = 0;
    FILE *f;
    int rc = CLI_OK;

    fs_err_clear(&err);
    f = fopen(file, "rb");
    if (f == NULL) {
        return cli_runtime_error(cmd, "--invitation %s: cannot open: %s", file, strerror(errno));
    }
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > INVITATION_MAX) {
        fclose(f);
        return cli_runtime_error(cmd, "--invitation %s: not a regular file of at most %u bytes",
                                 file, INVITATION_MAX);
    }
    buf = malloc((size_t)sb.st_size + 1);
    if (buf != NULL) {
        n = fread(buf, 1, (size_t)sb.st_size, f);
    }
    fclose(f);
    if (buf == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    j = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &jerr);
    fs_wipe(buf, n);
    free(buf);
    if (j == NULL) {
        rc = cli_runtime_error(cmd, "--invitation %s: not JSON (line %d: %s)", file, jerr.line,
                               jerr.text);
    } else if (json_is_array(j)) {
        rc = cli_runtime_error(cmd,
                               "--invitation %s: a list of %zu invitations (the job creator's "
                               "copy); give this party's own invitation, one JSON object",
                               file, json_array_size(j));
    } else if (fs_invitation_decode(j, inv, &err) != 0) {
        rc = cli_runtime_error(cmd, "--invitation %s: not a valid invitation: %s", file, err.msg);
    }
    json_decref(j);
    return rc;
}

/* --data made absolute against the current directory. */
static int data_path(const char *cmd, const char *data, char *out, size_t cap)
{
    char cwd[4096];

    if (data[0] == '/') {
        if (strlen(data) >= cap) {
            return cli_usage_error(cmd, "--data: path too long");
        }
        snprintf(out, cap, "%s", data);
        return CLI_OK;
    }
    if (getcwd(cwd, sizeof cwd) == NULL) {
        return cli_runtime_error(cmd, "cannot read the current directory: %s", strerror(errno));
    }
    return cli_path_join(cmd, out, cap, cwd, data);
}

/* POST the request; *p the agent's answer, *doc its document. */
static int post_join(const char *cmd, fs_httpc *c, const struct fs_invitation *inv,
                     const char *path, const char *format, const char *dataset_id,
                     struct fs_participation *p, json_t **doc)
{
    struct fs_err err;
    json_t *body = fs_participation_request_encode(inv, path, format, dataset_id);
    int rc;

    fs_err_clear(&err);
    if (body == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    rc = fs_httpc_json(c, "POST", "/v1/participations", body, doc, NULL, &err);
    json_decref(body); /* it held the party token */
    if (rc != 0) {
        const char *hint = strstr(err.msg, "cannot open") != NULL
                               ? " (--data is a path on the agent's machine)"
                               : "";
        return cli_runtime_error(cmd, "the agent refused to join job %s as party %u: %s%s",
                                 inv->job_id, inv->party, err.msg, hint);
    }
    if (fs_participation_decode(*doc, p, &err) != 0) {
        return cli_runtime_error(cmd, "POST /v1/participations: %s", err.msg);
    }
    return CLI_OK;
}

/* One progress text per state and phase. */
static void progress_text(const struct fs_participation *p, char *buf, size_t cap)
{
    const char *note = "";

    if (strcmp(p->phase, "advertise_keys") == 0 || strcmp(p->phase, "share_keys") == 0) {
        note = " (the job starts once every party has joined)";
    }
    snprintf(buf, cap, "party %u of job %s: %s, %s%s", p->party, p->job_id, p->state, p->phase,
             note);
}

/* Follow participation id until it ends; *p its last state. */
static int wait_for(const char *cmd, fs_httpc *c, const char *agent, const char *id,
                    double interval, struct fs_participation *p, json_t **doc)
{
    struct orch_progress prog;
    struct fs_err err;
    double t_err = 0;
    char text[256];
    int rc = CLI_OK;

    fs_err_clear(&err);
    orch_progress_init(&prog, stderr, cmd);
    for (;;) {
        json_decref(*doc);
        *doc = NULL;
        if (orch_participation_get(c, id, p, doc, &err) == 0) {
            t_err = 0;
            progress_text(p, text, sizeof text);
            orch_progress_text(&prog, text);
            if (strcmp(p->state, "running") != 0) {
                break;
            }
        } else if (err.code == FS_ENOTFOUND || err.code == FS_EAUTH || err.code == FS_EFORMAT ||
                   (t_err > 0 && cli_now() - t_err > AGENT_PATIENCE)) {
            orch_progress_done(&prog);
            return cli_runtime_error(cmd, "%s; participation %s may still be running", err.msg, id);
        } else if (t_err == 0) {
            t_err = cli_now(); /* the agent restarting: retried for AGENT_PATIENCE s */
        }
        if (g_join_stop != 0) {
            orch_progress_done(&prog);
            fprintf(stderr,
                    "fedsvd %s: stopped waiting; participation %s keeps running on the agent "
                    "(fedsvd participation status --agent %s %s)\n",
                    cmd, id, agent, id);
            return EXIT_INTERRUPT;
        }
        orch_sleep_ms((long)(interval * 1000));
    }
    orch_progress_done(&prog);
    if (strcmp(p->state, "done") != 0) {
        rc = cli_runtime_error(cmd, "participation %s failed (phase %s): %s", id, p->phase,
                               p->error[0] != '\0' ? p->error : "no reason given");
    } else {
        fprintf(stderr,
                "fedsvd %s: party %u's part of job %s is done; fetch the result with 'fedsvd "
                "participation result --agent %s %s --out DIR'\n",
                cmd, p->party, p->job_id, agent, id);
    }
    return rc;
}

struct join_args {
    struct orch_agent_opts ao;
    const char *invitation, *data, *data_format, *dataset_id, *interval;
    int wait;
};

static int join_run(const char *cmd, struct join_args *a)
{
    struct fs_invitation inv;
    struct fs_participation p;
    struct sigaction sa, old_int, old_term;
    char path[DATA_PATH_CAP];
    double interval = 1.0;
    fs_httpc *c = NULL;
    json_t *doc = NULL;
    int rc;

    memset(&inv, 0, sizeof inv);
    if ((a->interval != NULL &&
         (rc = cli_parse_double(cmd, "--interval", a->interval, 0.05, CLI_CLOSED, 3600, CLI_CLOSED,
                                &interval)) != CLI_OK) ||
        (rc = orch_agent_connect(cmd, &a->ao, JOIN_TIMEOUT_MS, 0, &c)) != CLI_OK ||
        (rc = data_path(cmd, a->data, path, sizeof path)) != CLI_OK ||
        (rc = load_invitation(cmd, a->invitation, &inv)) != CLI_OK) {
        goto out;
    }
    rc = post_join(cmd, c, &inv, path, a->data_format, a->dataset_id, &p, &doc);
    fs_invitation_wipe(&inv);
    if (rc != CLI_OK) {
        goto out;
    }
    if (!a->ao.json) {
        printf("%s\n", p.id);
        fflush(stdout);
    }
    if (a->wait) {
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = join_on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        rc = wait_for(cmd, c, a->ao.url, p.id, interval, &p, &doc);
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
    if (a->ao.json && doc != NULL && rc != EXIT_INTERRUPT) {
        int prc = cli_print_json(cmd, doc);
        doc = NULL;
        rc = rc == CLI_OK ? prc : rc;
    }
out:
    fs_invitation_wipe(&inv);
    json_decref(doc);
    fs_httpc_free(c);
    return rc;
}

int cmd_join(int argc, char **argv)
{
    const char *cmd = "join";
    struct join_args a;
    struct cli_opt opts[] = {
        ORCH_AGENT_OPTS(a.ao),
        {"invitation", CLI_OPT_VALUE, &a.invitation, NULL},
        {"data", CLI_OPT_VALUE, &a.data, NULL},
        {"data-format", CLI_OPT_VALUE, &a.data_format, NULL},
        {"dataset-id", CLI_OPT_VALUE, &a.dataset_id, NULL},
        {"interval", CLI_OPT_VALUE, &a.interval, NULL},
        {"wait", CLI_OPT_FLAG, NULL, &a.wait},
    };
    static const char *const formats[] = {"auto", "npy", "csv", "mtx", "idx"};
    const char *pos[1];
    size_t npos = 0;
    int help = 0, rc, fmt_ok = 0;

    memset(&a, 0, sizeof a);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        join_help();
        return CLI_OK;
    }
    if (a.invitation == NULL || a.data == NULL) {
        return cli_usage_error(cmd, "--invitation FILE and --data FILE are required");
    }
    for (size_t i = 0; i < NOPTS(formats); i++) {
        fmt_ok |= a.data_format == NULL || strcmp(a.data_format, formats[i]) == 0;
    }
    if (!fmt_ok) {
        return cli_usage_error(cmd, "--data-format: expected auto, npy, csv, mtx or idx, got '%s'",
                               a.data_format);
    }
    if (a.data[0] == '\0') {
        return cli_usage_error(cmd, "--data: empty path");
    }
    return join_run(cmd, &a);
}
