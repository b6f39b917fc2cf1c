/* fedsvd job create|status|watch|result|list|cancel: the operator's side of
 * the job resource on the aggregation server (docs/wire-secure-sum.md). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_lsa.h"
#include "jobdoc.h"
#include "jobs.h"
#include "maskset.h"
#include "net/auth.h"
#include "orch.h"

#define NOPTS(a)        (sizeof(a) / sizeof((a)[0]))
#define JOB_MAX_PARTIES 1000

static void job_help(void)
{
    printf("Usage: fedsvd job SUBCOMMAND [OPTIONS]\n"
           "\n"
           "Create and follow jobs on an aggregation server.\n"
           "\n"
           "Subcommands:\n"
           "  create   create a job; prints one invitation per party (JSON)\n"
           "  status   print a job's phase, parties, bytes and timings\n"
           "  watch    follow a job with a progress line until it is done or failed\n"
           "  result   print a finished job's result manifest, download its files\n"
           "  list     list the server's jobs (admin token)\n"
           "  cancel   cancel a job (admin token)\n"
           "\n"
           "Run 'fedsvd job SUBCOMMAND --help' for the options of each.\n");
}

static void conn_help(const char *token_opt, const char *who)
{
    printf("  --server URL           the aggregation server, e.g. http://127.0.0.1:8443\n"
           "  --%-20s file holding the %s bearer token (should be mode 0600)\n"
           "  --insecure             do not verify the server's TLS certificate\n"
           "  --ca-file FILE         verify the server with this PEM bundle\n"
           "  --insecure-http        allow http:// URLs to hosts that are not loopback (tokens\n"
           "                         and data unencrypted); default: only https:// leaves\n"
           "                         this machine\n",
           token_opt, who);
}

static void create_help(void)
{
    printf("Usage: fedsvd job create --server URL --admin-token-file F --algorithm secure-sum\n"
           "                         --parties K --shape R,C [--threshold T]\n"
           "                         [--allow-low-threshold] [--secagg full|plus]\n"
           "                         [--round-timeout S]\n"
           "                         [--join-timeout S]\n"
           "                         [--name LABEL] [--public-url URL] [--out-dir DIR]\n"
           "                         [--format text|json]\n"
           "                         (--party-key I:FPR for every party | --allow-unpinned)\n"
           "       fedsvd job create --server URL --admin-token-file F --algorithm fedsvd|fedpca\n"
           "                         --shape N,D --party-sizes N1,N2,... [--partition P]\n"
           "                         --masking-server URL --masking-token-file F [--k K]\n"
           "                         [--method exact|randomized] [--standardize]\n"
           "                         [--allow-dropouts] [--block-size C] [--shards S]\n"
           "                         [...as above]\n"
           "       fedsvd job create --algorithm lsa ... (text: 'fedsvd job create --algorithm\n"
           "                         lsa --help')\n"
           "       fedsvd job create --server URL --admin-token-file F --algorithm fedpower|\n"
           "                         fedpower-utility|fedpower-private|dp-ppm --cols D\n"
           "                         --party-sizes S1,S2,... --k K [--allow-dropouts]\n"
           "                         [...the power-method options below, ...as above]\n"
           "\n"
           "Every party's identity is pinned: --party-key I:FINGERPRINT for each party i\n"
           "(collected out of band from each party's operator, who prints it with 'fedsvd\n"
           "agent identity'), or --allow-unpinned to trust the keys the server relays.\n"
           "\n"
           "Create a job (POST /v1/jobs) and print its invitations: a JSON array with one\n"
           "invitation per party, each holding that party's secret token. Hand invitation i\n"
           "to party i only (out of band); its operator gives it to the party's client-agent.\n"
           "For fedsvd and fedpca the job's mask set is then created on the masking server\n"
           "(POST /v1/masksets), each party pinned to its --party-key identity: only that\n"
           "party's agent can fetch its keys (signed requests; no credential for keys\n"
           "exists). The masking-server URL and the mask-set id are added to every\n"
           "invitation, and the mask set's end token goes to the aggregation server, which\n"
           "deletes the mask set when the job ends.\n"
           "\n"
           "Options:\n");
    conn_help("admin-token-file F", "admin");
    printf(
        "  --algorithm A          secure-sum, fedsvd, fedpca, fedpower, fedpower-utility,\n"
        "                         fedpower-private or dp-ppm; lsa: both jobs of a federated\n"
        "                         text analysis ('fedsvd job create --algorithm lsa --help')\n"
        "  --parties K            number of parties, 1..1000 (fedsvd/fedpca: optional, the\n"
        "                         length of --party-sizes)\n"
        "  --shape R,C            secure-sum: every party's matrix shape (rows,cols);\n"
        "                         fedsvd/fedpca: the pooled matrix N,D\n"
        "  --partition P          samples (default: party i holds rows) or features (columns)\n"
        "  --party-sizes LIST     rows (samples) or columns (features) of each party, in party\n"
        "                         order; they add up to N (samples) or D (features); power\n"
        "                         methods: each party's rows s_i (public, the weights)\n"
        "  --cols D               power methods: the features every party holds (or --shape\n"
        "                         N,D with N the sum of --party-sizes)\n"
        "  --k K                  top-k singular triplets / components (default: all)\n"
        "  --method M             exact (default) or randomized (with --k)\n"
        "  --standardize          fedpca: scale every feature to unit variance\n"
        "  --allow-dropouts       a party that drops before its data is in gives the exact\n"
        "                         result of the others (default: the job fails cleanly)\n"
        "  --masking-server URL   the masking server (fedsvd/fedpca)\n"
        "  --masking-token-file F its admin token\n"
        "  --masking-public-url U the masking-server URL written into invitations (default:\n"
        "                         --masking-server)\n"
        "  --block-size C         largest diagonal block of the masks (default: the masking\n"
        "                         server's choice)\n"
        "  --shards S             fedsvd/fedpca, samples partition: S aggregation servers\n"
        "                         (1..16; the server and its --shard-peer servers) each hold\n"
        "                         a row range of the masked matrix (docs/sharding.md);\n"
        "                         default 1\n"
        "  --party-key I:FPR      pin party I's identity: FPR is the 64-hex-digit fingerprint\n"
        "                         of its client-agent ('fedsvd agent identity'); repeat for\n"
        "                         every party 1..K. Agents and the server refuse any other key\n"
        "  --allow-unpinned       no pins: the parties trust the identity keys the server\n"
        "                         relays (a server that substitutes keys is not caught)\n"
        "  --threshold T          minimum survivors, floor(K/2)+1..K (default floor(K/2)+1)\n"
        "  --allow-low-threshold  accept a --threshold below floor(K/2)+1: then two disjoint\n"
        "                         halves of the parties could each complete an aggregation,\n"
        "                         and a malicious server could unmask an input (tests only)\n"
        "  --secagg full|plus     secure aggregation masks with every other party (full) or\n"
        "                         with O(log K) neighbours of a random graph (plus, SecAgg+;\n"
        "                         default plus from 20 parties, full below)\n"
        "  --round-timeout S      seconds (integer) a round waits for missing parties\n"
        "                         before counting them as dropped (server default 60); it\n"
        "                         starts once every party has joined\n"
        "  --join-timeout S       seconds (integer, 1..604800) the job waits for every\n"
        "                         party to join before it starts (default 86400: a day,\n"
        "                         for partners who receive the invitation by email)\n"
        "  --name LABEL           a free-form label for the job\n"
        "  --public-url URL       the server URL written into invitations (default: the URL\n"
        "                         the server was reached at); use it behind a proxy or NAT\n"
        "  --out-dir DIR          write DIR/invitation-<i>.json (mode 0600) instead of\n"
        "                         printing the invitations\n"
        "  --format F             text (default: the invitations array, indented, and the\n"
        "                         job id on stderr) or json (one line: {\"job\", \"invitations\"}\n"
        "                         where invitations are objects, or file names with --out-dir)\n"
        "  -h, --help             show this text\n"
        "\n");
    orch_power_help();
}

static void status_help(void)
{
    printf("Usage: fedsvd job status --server URL --job ID --token-file F [--format text|json]\n"
           "\n"
           "Print a job's state (GET /v1/jobs/ID): phase, aggregation, parties present and\n"
           "dropped, bytes in and out of the server, per-phase seconds, the abort reason.\n"
           "\n"
           "Options:\n");
    conn_help("token-file F", "admin or party");
    printf("  --job ID               the job id (from job create)\n"
           "  --format F             text (default) or json (the Job object, one line)\n"
           "  -h, --help             show this text\n");
}

static void watch_help(void)
{
    printf("Usage: fedsvd job watch --server URL --job ID --token-file F [--interval S]\n"
           "                        [--timeout S] [--format text|json]\n"
           "\n"
           "Poll the job and show a progress line on stderr (redrawn in place on a terminal,\n"
           "one line per change otherwise) until it is done (exit 0) or failed (exit 1, with\n"
           "the reason). Then print the final status as 'job status' does.\n"
           "\n"
           "Options:\n");
    conn_help("token-file F", "admin or party");
    printf("  --job ID               the job id\n"
           "  --interval S           seconds between polls (default 0.5)\n"
           "  --timeout S            give up after S seconds (exit 1; default: never)\n"
           "  --format F             text (default) or json\n"
           "  -h, --help             show this text\n");
}

static void result_help(void)
{
    printf("Usage: fedsvd job result --server URL --job ID --token-file F [--out DIR]\n"
           "                         [--format text|json]\n"
           "\n"
           "Print the result manifest of a finished job (GET /v1/jobs/ID/result). With --out,\n"
           "download every file it lists into DIR (e.g. sum.npy for secure-sum) and check\n"
           "each one's SHA-256 against the manifest.\n"
           "\n"
           "Options:\n");
    conn_help("token-file F", "admin or party");
    printf("  --job ID               the job id\n"
           "  --out DIR              download the result files here (created if needed)\n"
           "  --format F             text (default) or json (the manifest, one line)\n"
           "  -h, --help             show this text\n");
}

static void list_help(void)
{
    printf("Usage: fedsvd job list --server URL --admin-token-file F [--format text|json]\n"
           "\n"
           "List the server's jobs (GET /v1/jobs): id, algorithm, phase, parties.\n"
           "\n"
           "Options:\n");
    conn_help("admin-token-file F", "admin");
    printf("  --format F             text (default: one line per job) or json\n"
           "  -h, --help             show this text\n");
}

static void cancel_help(void)
{
    printf("Usage: fedsvd job cancel --server URL --job ID --admin-token-file F\n"
           "                         [--format text|json]\n"
           "\n"
           "Cancel a job (DELETE /v1/jobs/ID): it moves to phase 'failed'.\n"
           "\n"
           "Options:\n");
    conn_help("admin-token-file F", "admin");
    printf("  --job ID               the job id\n"
           "  --format F             text (default) or json\n"
           "  -h, --help             show this text\n");
}

/* ---- shared plumbing ---- */

/* A connected client from --server, a token file and the TLS flags. */
static int connect_server(const char *cmd, const char *server, const char *token_file,
                          const struct orch_tls *tls, fs_httpc **out)
{
    char *token = NULL;
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if (fs_auth_token_load(token_file, &token, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    rc = orch_client(out, server, token, 0, 2, tls, &err);
    fs_auth_token_free(token);
    if (rc != 0) {
        return cli_fs_error(cmd, &err);
    }
    return CLI_OK;
}

static int check_server(const char *cmd, const char *server)
{
    if (server == NULL) {
        return cli_usage_error(cmd, "--server is required");
    }
    if (!orch_url_ok(server)) {
        return cli_usage_error(cmd, "--server: expected an http:// or https:// URL, got '%s'",
                               server);
    }
    return CLI_OK;
}

/* A URL written into the invitations: the agents refuse plain HTTP to a
 * host that is not loopback (unless they run with --insecure-http), so say so
 * now rather than after the job exists. */
static int check_invitation_url(const char *cmd, const char *flag, const char *url,
                                const struct orch_tls *tls)
{
    struct fs_err err;

    fs_err_clear(&err);
    if (url == NULL || !orch_url_ok(url) || fs_http_url_check(url, tls->insecure_http, &err) == 0) {
        return CLI_OK;
    }
    return cli_usage_error(cmd, "%s: %s", flag, err.msg);
}

static int check_job(const char *cmd, const char *job)
{
    if (job == NULL) {
        return cli_usage_error(cmd, "--job is required");
    }
    if (!orch_id_ok(job)) {
        return cli_usage_error(cmd, "--job: not a job id: '%s'", job);
    }
    return CLI_OK;
}

/* Write a JSON document that holds a secret (an invitation): mode 0600 from
 * the start (temp file + rename), never readable by others even briefly. */
static int write_secret_json(const char *cmd, const char *path, const json_t *doc)
{
    char tmp[4096];
    char *s = NULL;
    size_t len;
    int fd = -1;
    int rc = CLI_OK;

    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp) {
        return cli_runtime_error(cmd, "%s: path too long", path);
    }
    s = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    if (s == NULL) {
        return cli_runtime_error(cmd, "out of memory building JSON");
    }
    len = strlen(s);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = cli_runtime_error(cmd, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    if (write(fd, s, len) != (ssize_t)len || write(fd, "\n", 1) != 1 || fsync(fd) != 0) {
        rc = cli_runtime_error(cmd, "%s: write failed: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        rc = cli_runtime_error(cmd, "%s: write failed: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        rc = cli_runtime_error(cmd, "%s: cannot rename into place: %s", path, strerror(errno));
    }
out:
    if (fd >= 0) {
        close(fd);
    }
    if (rc != CLI_OK) {
        unlink(tmp);
    }
    free(s);
    return rc;
}

/* ---- status text ---- */

static void print_ids(const char *label, const uint32_t *ids, size_t n)
{
    printf("%-12s ", label);
    if (n == 0) {
        printf("none\n");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        printf("%s%lu", i > 0 ? "," : "", (unsigned long)ids[i]);
    }
    printf("\n");
}

static void print_job_text(const struct fs_job_status *st)
{
    char in[32], out[32];

    printf("%-12s %s\n", "job", st->id);
    printf("%-12s %s\n", "algorithm", st->algorithm);
    if (st->name[0] != '\0') {
        printf("%-12s %s\n", "name", st->name);
    }
    printf("%-12s %s\n", "state", fs_job_state_name(st->state));
    printf("%-12s %s\n", "phase", st->phase);
    printf("%-12s %lu of %lu\n", "aggregation", (unsigned long)st->aggregation + 1,
           (unsigned long)st->aggregations);
    printf("%-12s %lu (threshold %lu)\n", "parties", (unsigned long)st->parties,
           (unsigned long)st->threshold);
    if (st->secagg_degree > 0) {
        printf("%-12s %s (%lu neighbours per party)\n", "secagg", st->secagg,
               (unsigned long)st->secagg_degree);
    } else if (st->secagg[0] != '\0') {
        printf("%-12s %s\n", "secagg", st->secagg);
    }
    if (st->has_shape) {
        printf("%-12s %llu x %llu\n", "shape", (unsigned long long)st->rows,
               (unsigned long long)st->cols);
    }
    print_ids("present", st->present, st->npresent);
    print_ids("dropped", st->dropped, st->ndropped);
    printf("%-12s in %s, out %s\n", "bytes", orch_bytes((double)st->bytes_in, in, sizeof in),
           orch_bytes((double)st->bytes_out, out, sizeof out));
    for (size_t i = 0; i < st->ntimings; i++) {
        printf("%-12s %s %.3f s\n", "timing", st->timings[i].name, st->timings[i].seconds);
    }
    if (st->has_deadline) {
        char dur[64];
        /* the join phase waits for the parties (the job's join timeout) */
        printf("%-12s %s\n",
               strcmp(st->phase, "waiting_for_parties") == 0 ? "join ends" : "round ends",
               orch_duration(st->deadline_in_s, dur, sizeof dur));
    }
    printf("%-12s %s\n", "created", st->created_at[0] != '\0' ? st->created_at : "?");
    if (st->has_error) {
        printf("%-12s %s\n", "error", st->error);
    }
}

/* ---- create ---- */

static int parse_shape(const char *cmd, const char *s, json_int_t shape[2])
{
    size_t *list = NULL;
    size_t n = 0;
    int rc;

    rc = cli_parse_size_list(cmd, "--shape", s, 2, &list, &n);
    if (rc != CLI_OK) {
        return rc;
    }
    if (n != 2) {
        free(list);
        return cli_usage_error(cmd, "--shape: expected ROWS,COLS, got '%s'", s);
    }
    shape[0] = (json_int_t)list[0];
    shape[1] = (json_int_t)list[1];
    free(list);
    return CLI_OK;
}

/* The created job's invitations: DIR/invitation-<i>.json (0600) with
 * --out-dir, else printed; --format json prints {"job", "invitations"}. */
static int emit_invitations(const char *cmd, const json_t *job, const json_t *invs,
                            const char *outdir, int json, const char *job_id, uint32_t threshold)
{
    json_t *files = NULL;
    int rc = CLI_OK;

    if (outdir != NULL) {
        size_t i;
        json_t *inv;

        files = json_array();
        json_array_foreach(invs, i, inv)
        {
            char name[64], path[4096];

            snprintf(name, sizeof name, "invitation-%zu.json", i + 1);
            if ((rc = cli_path_join(cmd, path, sizeof path, outdir, name)) != CLI_OK ||
                (rc = write_secret_json(cmd, path, inv)) != CLI_OK) {
                json_decref(files);
                return rc;
            }
            json_array_append_new(files, json_string(path));
        }
    }
    if (json) {
        rc = cli_print_json(
            cmd, json_pack("{s:O, s:O}", "job", job, "invitations", files != NULL ? files : invs));
    } else if (files != NULL) {
        printf("job %s created: %zu parties, threshold %lu; wrote %s/invitation-1..%zu.json\n",
               job_id, json_array_size(invs), (unsigned long)threshold, outdir,
               json_array_size(invs));
    } else {
        char *s = json_dumps(invs, JSON_INDENT(2));

        if (s == NULL) {
            json_decref(files);
            return cli_runtime_error(cmd, "out of memory");
        }
        puts(s);
        free(s);
        fprintf(stderr, "fedsvd %s: job %s created: %zu parties, threshold %lu\n", cmd, job_id,
                json_array_size(invs), (unsigned long)threshold);
    }
    json_decref(files);
    return rc;
}

/* POST spec to the server; the reply's job and invitations (K of them);
 * *client (when not NULL) keeps the connection for more requests. */
static int post_job(const char *cmd, const char *server, const char *tok,
                    const struct orch_tls *tls, const struct fs_job_spec *spec, const json_t *body,
                    size_t parties, json_t **resp, const json_t **invs, char job_id[ORCH_ID_MAX],
                    uint32_t *threshold, fs_httpc **client)
{
    struct fs_job_status *job = malloc(sizeof *job);
    struct fs_err err;
    fs_httpc *c = NULL;
    int rc;

    fs_err_clear(&err);
    *resp = NULL;
    *invs = NULL;
    if ((rc = connect_server(cmd, server, tok, tls, &c)) != CLI_OK) {
        free(job);
        return rc;
    }
    if (fs_httpc_json(c, "POST", "/v1/jobs", (json_t *)body, resp, NULL, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
    } else if (job == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
    } else if (fs_job_created_decode(*resp, job, invs, &err) != 0) {
        rc = cli_runtime_error(cmd, "POST /v1/jobs: %s", err.msg);
    } else if (job->parties != parties) {
        rc = cli_runtime_error(cmd, "POST /v1/jobs: the response lacks the job or %zu invitations",
                               parties);
    } else if (orch_check_invitation_pins(spec, *invs, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
    } else {
        snprintf(job_id, ORCH_ID_MAX, "%s", job->id);
        *threshold = job->threshold;
    }
    free(job);
    if (client != NULL && rc == CLI_OK) {
        *client = c;
    } else {
        fs_httpc_free(c);
    }
    return rc;
}

/* The options of job create. */
struct create_args {
    const char *server, *tok, *alg, *parties, *shape, *thr, *rt, *jt, *name, *pub, *outdir;
    const char *format, *ca, *part, *sizes, *k, *method, *msrv, *mtok, *mpub, *block, *cols;
    const char *secagg, *shards;
    int standardize, allow_dropouts, allow_unpinned, allow_low;
    const char *pkeys[CLI_LIST_MAX + 1];
    struct orch_power_opts po;
    struct orch_tls tls;
    enum fs_algo algo; /* --algorithm */
};

/* The options every algorithm has, into spec (spec->parties set):
 * --threshold, the timeouts, --name, --public-url; and --format. */
static int common_spec(const char *cmd, const struct create_args *a, struct fs_job_spec *spec,
                       int *json)
{
    size_t thr = 0, rt = 0, jt = 0;
    int rc;

    if ((a->thr != NULL &&
         (rc = cli_parse_size(cmd, "--threshold", a->thr, 1, spec->parties, &thr)) != 0) ||
        (a->rt != NULL &&
         (rc = cli_parse_size(cmd, "--round-timeout", a->rt, 1, 86400, &rt)) != 0) ||
        (a->jt != NULL && (rc = cli_parse_size(cmd, "--join-timeout", a->jt, 1,
                                               FS_JOB_MAX_JOIN_TIMEOUT, &jt)) != 0) ||
        (rc = cli_parse_format(cmd, a->format, json)) != 0) {
        return rc;
    }
    if (a->pub != NULL && !orch_url_ok(a->pub)) {
        return cli_usage_error(cmd, "--public-url: expected an http:// or https:// URL, got '%s'",
                               a->pub);
    }
    if ((a->name != NULL && strlen(a->name) > FS_JOB_NAME_MAX) ||
        (a->pub != NULL && strlen(a->pub) > FS_JOB_URL_MAX)) {
        return cli_usage_error(cmd, "--name is at most %d bytes, --public-url %d", FS_JOB_NAME_MAX,
                               FS_JOB_URL_MAX);
    }
    if (a->secagg != NULL && fs_job_secagg_parse(a->secagg, &spec->secagg) != 0) {
        return cli_usage_error(cmd, "--secagg: expected full or plus, got '%s'", a->secagg);
    }
    spec->threshold = (uint32_t)thr; /* 0: the server's default */
    spec->allow_low_threshold = a->allow_low;
    if (a->rt != NULL) {
        spec->round_timeout_s = (uint32_t)rt;
    }
    if (a->jt != NULL) {
        spec->join_timeout_s = (uint32_t)jt;
    }
    snprintf(spec->name, sizeof spec->name, "%s", a->name != NULL ? a->name : "");
    snprintf(spec->server_url, sizeof spec->server_url, "%s", a->pub != NULL ? a->pub : "");
    return CLI_OK;
}

/* The fedsvd/fedpca options of job create. */
static int fed_create_args(const char *cmd, const struct create_args *a, size_t **sizes,
                           size_t *nsizes, size_t *k, size_t *block)
{
    int rc;

    if (a->part != NULL && strcmp(a->part, "samples") != 0 && strcmp(a->part, "features") != 0) {
        return cli_usage_error(cmd, "--partition: expected samples or features, got '%s'", a->part);
    }
    if (a->method != NULL && strcmp(a->method, "exact") != 0 &&
        strcmp(a->method, "randomized") != 0) {
        return cli_usage_error(cmd, "--method: expected exact or randomized, got '%s'", a->method);
    }
    if (a->standardize && a->algo != FS_ALGO_FEDPCA) {
        return cli_usage_error(cmd, "--standardize is for fedpca");
    }
    if (a->sizes == NULL || a->msrv == NULL || a->mtok == NULL) {
        return cli_usage_error(cmd,
                               "%s needs --party-sizes, --masking-server and "
                               "--masking-token-file",
                               a->alg);
    }
    if (!orch_url_ok(a->msrv) || (a->mpub != NULL && !orch_url_ok(a->mpub))) {
        return cli_usage_error(cmd, "--masking-server / --masking-public-url: expected an http:// "
                                    "or https:// URL");
    }
    if ((a->k != NULL && (rc = cli_parse_size(cmd, "--k", a->k, 0, (size_t)1 << 31, k)) != 0) ||
        (a->k != NULL && *k == 0 &&
         (rc = cli_usage_error(cmd, "--k: must be between 1 and min(N, d) of the job, got '%s'",
                               a->k)) != 0) ||
        (a->block != NULL &&
         (rc = cli_parse_size(cmd, "--block-size", a->block, 1, (size_t)1 << 31, block)) != 0)) {
        return rc;
    }
    if (a->method != NULL && strcmp(a->method, "randomized") == 0 && *k == 0) {
        return cli_usage_error(cmd, "--method randomized needs --k");
    }
    return cli_parse_size_list(cmd, "--party-sizes", a->sizes, JOB_MAX_PARTIES, sizes, nsizes);
}

/*
 * Create the job's mask set on the masking server (docs/wire-fedsvd.md),
 * each party pinned to its identity (pins: the job's party_keys), so that
 * only party i's agent can fetch party i's keys; add masking_url and maskset
 * to each party's invitation, and hand the mask set's end token to the
 * aggregation server (srv), which deletes the mask set when the job ends.
 * No credential for mask keys exists, here or anywhere.
 */
static int fed_create_maskset(const char *cmd, const struct create_args *a,
                              const struct fs_job_spec *spec, const char *job_id, size_t block,
                              fs_httpc *srv, json_t *invs)
{
    struct fs_maskset_request *rq = calloc(1, sizeof *rq);
    struct fs_maskset_created *mc = calloc(1, sizeof *mc);
    int features = spec->fed.partition == FS_JOB_FEATURES;
    json_t *body = NULL, *resp = NULL;
    struct fs_err err;
    fs_httpc *m = NULL;
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (rq == NULL || mc == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    if (strlen(job_id) >= sizeof rq->job_id) {
        rc = cli_runtime_error(cmd, "job id too long: %s", job_id);
        goto out;
    }
    memcpy(rq->job_id, job_id, strlen(job_id) + 1);
    rq->partition = spec->fed.partition;
    rq->parties = spec->parties;
    rq->shared = features ? spec->rows : spec->cols;
    rq->block_size = block;
    memcpy(rq->sizes, spec->fed.party_sizes, sizeof rq->sizes);
    memcpy(rq->identities, spec->party_keys, sizeof rq->identities);
    if (orch_url_trim(a->mpub != NULL ? a->mpub : a->msrv, rq->server_url, sizeof rq->server_url,
                      &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    if ((body = fs_maskset_request_encode(rq)) == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    if ((rc = connect_server(cmd, a->msrv, a->mtok, &a->tls, &m)) != CLI_OK) {
        goto out;
    }
    if (fs_httpc_json(m, "POST", "/v1/masksets", body, &resp, NULL, &err) != 0) {
        rc = cli_runtime_error(cmd, "masking server: %s", err.msg);
        goto out;
    }
    if (fs_maskset_created_decode(resp, rq->parties, mc, &err) != 0) {
        rc = cli_runtime_error(cmd, "POST /v1/masksets: %s", err.msg);
        goto out;
    }
    for (size_t i = 0; i < rq->parties; i++) {
        /* the invitations as fs_job_created_decode checked them: entry i is party i + 1 */
        json_t *inv = json_array_get(invs, i);

        if (inv == NULL ||
            memcmp(mc->parties[i].identity, spec->party_keys[i], FS_JOB_KEY_LEN) != 0) {
            rc = cli_runtime_error(cmd, "POST /v1/masksets: party %zu is not pinned to its key",
                                   i + 1);
            goto out;
        }
        if (fs_invitation_add_maskset(inv, rq->server_url, mc->id) != 0) {
            rc = cli_runtime_error(cmd, "out of memory");
            goto out;
        }
    }
    if (orch_job_set_maskset(srv, job_id, rq->server_url, mc->id, mc->end_token, &err) != 0) {
        rc = cli_runtime_error(cmd, "%s", err.msg);
        goto out;
    }
    fprintf(stderr, "fedsvd %s: mask set %s created on %s\n", cmd, mc->id, rq->server_url);
out:
    if (mc != NULL) {
        fs_maskset_created_wipe(mc);
    }
    free(mc);
    free(rq);
    json_decref(resp);
    json_decref(body);
    fs_httpc_free(m);
    return rc;
}

/* job create for the power methods (docs/wire-fedpower.md): the spec. */
static int power_spec(const char *cmd, struct create_args *a, struct fs_job_spec *spec, int *json)
{
    size_t *sizes = NULL, nsizes = 0, parties = 0, cols = 0;
    json_int_t shape[2] = {0, 0};
    int vb_missing = 0, rc;
    uint64_t total = 0;

    a->po.k = a->k;
    if (a->shards != NULL) {
        return cli_usage_error(cmd, "--shards is for fedsvd and fedpca");
    }
    if (a->tok == NULL || a->sizes == NULL || (a->cols == NULL && a->shape == NULL)) {
        return cli_usage_error(cmd, "%s needs --admin-token-file, --party-sizes and --cols",
                               a->alg);
    }
    if ((rc = orch_power_params(cmd, spec->algo, &a->po, 0, NULL, &vb_missing)) != CLI_OK) {
        return rc;
    }
    if (vb_missing) {
        return cli_usage_error(cmd,
                               "%s needs --value-bound (a public bound on every party's "
                               "||M_i^T M_i / s_i||_2)",
                               a->alg);
    }
    if ((rc = cli_parse_size_list(cmd, "--party-sizes", a->sizes, JOB_MAX_PARTIES, &sizes,
                                  &nsizes)) != CLI_OK) {
        return rc;
    }
    for (size_t i = 0; i < nsizes; i++) {
        total += sizes[i];
        spec->power.party_rows[i] = sizes[i];
    }
    free(sizes);
    spec->parties = (uint32_t)nsizes;
    if ((a->parties != NULL &&
         ((rc = cli_parse_size(cmd, "--parties", a->parties, 1, JOB_MAX_PARTIES, &parties)) !=
              CLI_OK ||
          (parties != nsizes &&
           (rc = cli_usage_error(cmd, "--parties %zu but --party-sizes lists %zu", parties,
                                 nsizes)) != CLI_OK))) ||
        (a->cols != NULL &&
         (rc = cli_parse_size(cmd, "--cols", a->cols, 1, (size_t)1 << 20, &cols)) != CLI_OK) ||
        (a->shape != NULL && (rc = parse_shape(cmd, a->shape, shape)) != CLI_OK) ||
        (rc = common_spec(cmd, a, spec, json)) != CLI_OK) {
        return rc;
    }
    if (a->shape != NULL && (shape[1] < 1 || (uint64_t)shape[0] != total ||
                             (a->cols != NULL && (size_t)shape[1] != cols))) {
        return cli_usage_error(cmd,
                               "--shape N,D: N must be the sum of --party-sizes (%llu) and D "
                               "agree with --cols",
                               (unsigned long long)total);
    }
    spec->cols = a->cols != NULL ? cols : (size_t)shape[1];
    spec->rows = total;
    spec->power.allow_dropouts = a->allow_dropouts;
    if ((rc = orch_power_params(cmd, spec->algo, &a->po, spec->cols, &spec->power, NULL)) !=
        CLI_OK) {
        return rc;
    }
    return orch_party_keys(cmd, a->pkeys, nsizes, a->allow_unpinned, spec);
}

/* job create for secure-sum, fedsvd and fedpca: the spec; fedsvd/fedpca
 * also *sizes (nsizes of them) and *block for the mask set. */
static int sum_spec(const char *cmd, struct create_args *a, struct fs_job_spec *spec, int *json,
                    size_t **sizes, size_t *nsizes, size_t *block)
{
    int fed = fs_algo_is_fedsvd(spec->algo);
    size_t kk = 0, parties = 0;
    json_int_t shape[2] = {0, 0};
    int rc;

    if (fed) {
        if ((rc = fed_create_args(cmd, a, sizes, nsizes, &kk, block)) != CLI_OK) {
            return rc;
        }
    } else if (a->part != NULL || a->sizes != NULL || a->k != NULL || a->method != NULL ||
               a->standardize || a->allow_dropouts || a->msrv != NULL || a->mtok != NULL ||
               a->mpub != NULL || a->block != NULL || a->shards != NULL) {
        return cli_usage_error(cmd, "--partition, --party-sizes, --k, --method, --standardize, "
                                    "--allow-dropouts, --masking-*, --block-size and --shards "
                                    "are for fedsvd and fedpca");
    }
    if (a->tok == NULL || (!fed && a->parties == NULL) || a->shape == NULL) {
        return cli_usage_error(
            cmd, "--admin-token-file, --algorithm, --parties and --shape are required");
    }
    if (a->parties != NULL &&
        (rc = cli_parse_size(cmd, "--parties", a->parties, 1, JOB_MAX_PARTIES, &parties)) != 0) {
        return rc;
    }
    if (fed && a->parties != NULL && parties != *nsizes) {
        return cli_usage_error(cmd, "--parties %zu but --party-sizes lists %zu", parties, *nsizes);
    }
    spec->parties = (uint32_t)(fed ? *nsizes : parties);
    if ((rc = parse_shape(cmd, a->shape, shape)) != 0 ||
        (rc = common_spec(cmd, a, spec, json)) != 0) {
        return rc;
    }
    spec->rows = (uint64_t)shape[0];
    spec->cols = (uint64_t)shape[1];
    if (fed) {
        spec->fed.partition =
            a->part != NULL && strcmp(a->part, "features") == 0 ? FS_JOB_FEATURES : FS_JOB_SAMPLES;
        for (size_t i = 0; i < *nsizes; i++) {
            spec->fed.party_sizes[i] = (*sizes)[i];
        }
        spec->fed.k = kk;
        spec->fed.method = a->method != NULL && strcmp(a->method, "randomized") == 0
                               ? FS_JOB_RANDOMIZED
                               : FS_JOB_EXACT;
        spec->fed.standardize = a->standardize;
        spec->fed.allow_dropouts = a->allow_dropouts;
        if (a->shards != NULL) {
            size_t sh = 0;
            if ((rc = cli_parse_size(cmd, "--shards", a->shards, 1, FS_JOB_MAX_SHARDS, &sh)) != 0) {
                return rc;
            }
            spec->fed.shards = (uint32_t)sh;
        }
    }
    if ((rc = orch_party_keys(cmd, a->pkeys, spec->parties, a->allow_unpinned, spec)) != CLI_OK) {
        return rc;
    }
    if (fed && !spec->has_pins) {
        return cli_usage_error(cmd, "fedsvd and fedpca jobs need --party-key I:FINGERPRINT for "
                                    "every party: the masking server releases party i's keys only "
                                    "to requests signed by party i's identity");
    }
    return CLI_OK;
}

/* The fedsvd/fedpca job's mask set; a job without masks cannot run, so it
 * is cancelled when this fails. */
static int create_maskset(const char *cmd, const struct create_args *a,
                          const struct fs_job_spec *spec, size_t block, fs_httpc *c,
                          const char *job_id, json_t *invs)
{
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    rc = fed_create_maskset(cmd, a, spec, job_id, block, c, invs);
    if (rc != CLI_OK) {
        char path[ORCH_ID_MAX + 16];
        snprintf(path, sizeof path, "/v1/jobs/%s", job_id);
        if (orch_id_ok(job_id) && fs_httpc_json(c, "DELETE", path, NULL, NULL, NULL, &err) == 0) {
            fprintf(stderr, "fedsvd %s: job %s cancelled\n", cmd, job_id);
        }
    }
    return rc;
}

/* Build the spec, POST it, (fedsvd/fedpca) create the mask set, hand out the
 * invitations; with capture, *capture receives {"job", "invitations"} instead. */
static int create_job(const char *cmd, struct create_args *a, enum fs_algo algo, json_t **capture)
{
    struct fs_job_spec *spec = malloc(sizeof *spec);
    size_t *sizes = NULL, nsizes = 0, block = 0;
    char job_id[ORCH_ID_MAX] = "";
    uint32_t threshold = 0;
    json_t *body = NULL, *resp = NULL;
    const json_t *invs = NULL;
    fs_httpc *c = NULL;
    int json = 0, rc;

    if (spec == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    fs_job_spec_init(spec, algo);
    rc = fs_algo_is_power(algo) ? power_spec(cmd, a, spec, &json)
                                : sum_spec(cmd, a, spec, &json, &sizes, &nsizes, &block);
    if (rc != CLI_OK || (rc = orch_job_spec_json(cmd, spec, &body)) != CLI_OK) {
        goto out;
    }
    if (a->outdir != NULL && (rc = cli_mkdir_p(cmd, a->outdir)) != CLI_OK) {
        goto out;
    }
    if ((rc = post_job(cmd, a->server, a->tok, &a->tls, spec, body, spec->parties, &resp, &invs,
                       job_id, &threshold, &c)) != CLI_OK) {
        goto out;
    }
    if (fs_algo_is_fedsvd(algo) &&
        (rc = create_maskset(cmd, a, spec, block, c, job_id, (json_t *)invs)) != CLI_OK) {
        goto out;
    }
    if (capture != NULL) {
        *capture =
            json_pack("{s:O, s:O}", "job", json_object_get(resp, "job"), "invitations", invs);
        rc = *capture != NULL ? CLI_OK : cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    rc = emit_invitations(cmd, json_object_get(resp, "job"), invs, a->outdir, json, job_id,
                          threshold);
out:
    json_decref(resp);
    json_decref(body);
    fs_httpc_free(c);
    free(sizes);
    free(spec);
    return rc;
}

static int job_create_run(int argc, char **argv, json_t **capture)
{
    const char *cmd = "job create";
    struct create_args a;
    struct cli_opt opts[] = {
        {"server", CLI_OPT_VALUE, &a.server, NULL},
        {"admin-token-file", CLI_OPT_VALUE, &a.tok, NULL},
        {"algorithm", CLI_OPT_VALUE, &a.alg, NULL},
        {"parties", CLI_OPT_VALUE, &a.parties, NULL},
        {"shape", CLI_OPT_VALUE, &a.shape, NULL},
        {"threshold", CLI_OPT_VALUE, &a.thr, NULL},
        {"allow-low-threshold", CLI_OPT_FLAG, NULL, &a.allow_low},
        {"secagg", CLI_OPT_VALUE, &a.secagg, NULL},
        {"round-timeout", CLI_OPT_VALUE, &a.rt, NULL},
        {"join-timeout", CLI_OPT_VALUE, &a.jt, NULL},
        {"name", CLI_OPT_VALUE, &a.name, NULL},
        {"public-url", CLI_OPT_VALUE, &a.pub, NULL},
        {"out-dir", CLI_OPT_DIR, &a.outdir, NULL},
        {"format", CLI_OPT_VALUE, &a.format, NULL},
        {"insecure", CLI_OPT_FLAG, NULL, &a.tls.insecure},
        {"insecure-http", CLI_OPT_FLAG, NULL, &a.tls.insecure_http},
        {"ca-file", CLI_OPT_VALUE, &a.ca, NULL},
        {"partition", CLI_OPT_VALUE, &a.part, NULL},
        {"party-sizes", CLI_OPT_VALUE, &a.sizes, NULL},
        {"k", CLI_OPT_VALUE, &a.k, NULL},
        {"method", CLI_OPT_VALUE, &a.method, NULL},
        {"standardize", CLI_OPT_FLAG, NULL, &a.standardize},
        {"allow-dropouts", CLI_OPT_FLAG, NULL, &a.allow_dropouts},
        {"masking-server", CLI_OPT_VALUE, &a.msrv, NULL},
        {"masking-token-file", CLI_OPT_VALUE, &a.mtok, NULL},
        {"masking-public-url", CLI_OPT_VALUE, &a.mpub, NULL},
        {"block-size", CLI_OPT_VALUE, &a.block, NULL},
        {"shards", CLI_OPT_VALUE, &a.shards, NULL},
        {"cols", CLI_OPT_VALUE, &a.cols, NULL},
        {"party-key", CLI_OPT_LIST, a.pkeys, NULL},
        {"allow-unpinned", CLI_OPT_FLAG, NULL, &a.allow_unpinned},
        ORCH_POWER_OPTS(a.po),
    };
    const char *pos[1];
    size_t npos = 0;
    int help = 0, rc;
    enum fs_algo algo = FS_ALGO_SECURE_SUM;
    int known;

    memset(&a, 0, sizeof a);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        create_help();
        return CLI_OK;
    }
    a.tls.ca_file = a.ca;
    if ((rc = check_server(cmd, a.server)) != CLI_OK ||
        (rc = check_invitation_url(cmd, "--public-url", a.pub, &a.tls)) != CLI_OK ||
        (rc =
             check_invitation_url(cmd, a.mpub != NULL ? "--masking-public-url" : "--masking-server",
                                  a.mpub != NULL ? a.mpub : a.msrv, &a.tls)) != CLI_OK) {
        return rc;
    }
    known = fs_algo_parse(a.alg, &algo) == 0;
    if (!(known && fs_algo_is_power(algo)) && (orch_power_given(&a.po) || a.cols != NULL)) {
        return cli_usage_error(cmd, "--cols and the power-method options are for fedpower, "
                                    "fedpower-utility, fedpower-private and dp-ppm");
    }
    if (known && fs_algo_is_power(algo) &&
        (a.part != NULL || a.method != NULL || a.standardize || a.msrv != NULL || a.mtok != NULL ||
         a.mpub != NULL || a.block != NULL)) {
        return cli_usage_error(cmd, "--partition, --method, --standardize, --masking-* and "
                                    "--block-size are for fedsvd and fedpca");
    }
    if (a.alg == NULL) {
        return cli_usage_error(
            cmd, "--admin-token-file, --algorithm, --parties and --shape are required");
    }
    if (!known) {
        return cli_usage_error(cmd, "--algorithm: expected " FS_ALGO_LIST ", got '%s'", a.alg);
    }
    a.algo = algo;
    return create_job(cmd, &a, algo, capture);
}

static int job_create(int argc, char **argv)
{
    return job_create_run(argc, argv, NULL);
}

int cli_job_create_capture(int argc, char **argv, json_t **created)
{
    *created = NULL;
    return job_create_run(argc, argv, created);
}

/* ---- status / watch / result / list / cancel ---- */

struct job_args {
    const char *server, *token_file, *job, *format, *ca_file;
    struct orch_tls tls;
    int json;
};

/* The TLS options of a job subcommand (a: its struct job_args). */
#define JOB_TLS_OPTS(a)                                                                            \
    {"insecure", CLI_OPT_FLAG, NULL, &(a).tls.insecure},                                           \
        {"insecure-http", CLI_OPT_FLAG, NULL, &(a).tls.insecure_http},                             \
    {                                                                                              \
        "ca-file", CLI_OPT_VALUE, &(a).ca_file, NULL                                               \
    }

/* A job subcommand's options (opts) parsed; with --help, help_fn's text and
 * *help set (CLI_OK); else --server, --job (when with_job) and --format
 * checked and the TLS options into a->tls. */
static int job_args_parse(const char *cmd, int argc, char **argv, const struct cli_opt *opts,
                          size_t nopts, struct job_args *a, int with_job, void (*help_fn)(void),
                          int *help)
{
    const char *pos[1];
    size_t npos = 0;
    int rc;

    memset(a, 0, sizeof *a);
    rc = cli_parse(cmd, argc, argv, opts, nopts, pos, 0, &npos, help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (*help) {
        help_fn();
        return CLI_OK;
    }
    a->tls.ca_file = a->ca_file;
    if ((rc = check_server(cmd, a->server)) != 0 ||
        (with_job && (rc = check_job(cmd, a->job)) != 0) ||
        (rc = cli_parse_format(cmd, a->format, &a->json)) != 0) {
        return rc;
    }
    return CLI_OK;
}

/* The token file (the option tok_opt) is required: a client of --server with it. */
static int job_args_connect(const char *cmd, const struct job_args *a, const char *tok_opt,
                            fs_httpc **c)
{
    if (a->token_file == NULL) {
        return cli_usage_error(cmd, "--%s is required", tok_opt);
    }
    return connect_server(cmd, a->server, a->token_file, &a->tls, c);
}

static int job_status(int argc, char **argv)
{
    const char *cmd = "job status";
    struct job_args a;
    struct cli_opt opts[] = {
        {"server", CLI_OPT_VALUE, &a.server, NULL},
        {"token-file", CLI_OPT_VALUE, &a.token_file, NULL},
        {"job", CLI_OPT_VALUE, &a.job, NULL},
        {"format", CLI_OPT_VALUE, &a.format, NULL},
        JOB_TLS_OPTS(a),
    };
    int help = 0, rc;
    struct fs_err err;
    fs_httpc *c = NULL;
    json_t *job = NULL;
    struct fs_job_status *st = NULL;

    fs_err_clear(&err);
    rc = job_args_parse(cmd, argc, argv, opts, NOPTS(opts), &a, 1, status_help, &help);
    if (rc != CLI_OK || help || (rc = job_args_connect(cmd, &a, "token-file", &c)) != CLI_OK) {
        return rc;
    }
    st = malloc(sizeof *st);
    if (st == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    if (orch_job_poll(c, a.job, &job, st, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    if (a.json) {
        rc = cli_print_json(cmd, json_incref(job));
    } else {
        print_job_text(st);
    }
out:
    free(st);
    json_decref(job);
    fs_httpc_free(c);
    return rc;
}

static volatile sig_atomic_t g_watch_stop = 0;

static void watch_on_signal(int sig)
{
    g_watch_stop = sig;
}

static int job_watch(int argc, char **argv)
{
    const char *cmd = "job watch";
    const char *s_interval = NULL, *s_timeout = NULL;
    struct job_args a;
    struct cli_opt opts[] = {
        {"server", CLI_OPT_VALUE, &a.server, NULL},
        {"token-file", CLI_OPT_VALUE, &a.token_file, NULL},
        {"job", CLI_OPT_VALUE, &a.job, NULL},
        {"format", CLI_OPT_VALUE, &a.format, NULL},
        {"interval", CLI_OPT_VALUE, &s_interval, NULL},
        {"timeout", CLI_OPT_VALUE, &s_timeout, NULL},
        JOB_TLS_OPTS(a),
    };
    double interval = 0.5, timeout = 0, t0;
    int help = 0, rc;
    struct fs_err err;
    struct orch_progress prog;
    struct sigaction sa, old_int, old_term;
    fs_httpc *c = NULL;
    json_t *job = NULL;
    struct fs_job_status *st = NULL;

    fs_err_clear(&err);
    rc = job_args_parse(cmd, argc, argv, opts, NOPTS(opts), &a, 1, watch_help, &help);
    if (rc != CLI_OK || help ||
        (s_interval != NULL &&
         (rc = cli_parse_double(cmd, "--interval", s_interval, 0.05, CLI_CLOSED, 3600, CLI_CLOSED,
                                &interval)) != 0) ||
        (s_timeout != NULL && (rc = cli_parse_double(cmd, "--timeout", s_timeout, 0, CLI_OPEN, 0,
                                                     CLI_NONE, &timeout)) != 0)) {
        return rc;
    }
    if ((rc = job_args_connect(cmd, &a, "token-file", &c)) != CLI_OK) {
        return rc;
    }
    st = malloc(sizeof *st);
    if (st == NULL) {
        fs_httpc_free(c);
        return cli_runtime_error(cmd, "out of memory");
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = watch_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    orch_progress_init(&prog, stderr, cmd);
    t0 = cli_now();
    for (;;) {
        json_decref(job);
        job = NULL;
        if (orch_job_poll(c, a.job, &job, st, &err) != 0) {
            orch_progress_done(&prog);
            rc = cli_fs_error(cmd, &err);
            goto out;
        }
        orch_progress_job(&prog, st);
        if (st->state != FS_JOB_STATE_RUNNING) {
            break;
        }
        if (g_watch_stop != 0) {
            orch_progress_done(&prog);
            rc = cli_runtime_error(cmd, "interrupted; job %s is still running", a.job);
            goto out;
        }
        if (timeout > 0 && cli_now() - t0 > timeout) {
            orch_progress_done(&prog);
            rc = cli_runtime_error(cmd, "timed out after %.0f s; job %s is still %s", timeout,
                                   a.job, st->phase);
            goto out;
        }
        orch_sleep_ms((long)(interval * 1000));
    }
    orch_progress_done(&prog);
    if (a.json) {
        rc = cli_print_json(cmd, json_incref(job));
    } else {
        print_job_text(st);
    }
    if (rc == CLI_OK && st->state != FS_JOB_STATE_DONE) {
        rc = cli_runtime_error(cmd, "job %s %s: %s", a.job, fs_job_state_name(st->state),
                               st->has_error ? st->error : "no reason given");
    }
out:
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    free(st);
    json_decref(job);
    fs_httpc_free(c);
    return rc;
}

/* Download every file of a result into dir, verifying sha256. */
static int fetch_files(const char *cmd, fs_httpc *c, const char *prefix,
                       const struct fs_job_result *res, const char *dir)
{
    struct fs_err err;

    fs_err_clear(&err);
    for (size_t i = 0; i < res->nfiles; i++) {
        const char *name = res->files[i].name;
        char path[512], dest[4096];
        int rc;

        snprintf(path, sizeof path, "%s/%s", prefix, name);
        if ((rc = cli_path_join(cmd, dest, sizeof dest, dir, name)) != CLI_OK) {
            return rc;
        }
        if (orch_download_verified(c, path, dest, res->files[i].sha256, NULL, &err) != 0) {
            return cli_fs_error(cmd, &err);
        }
    }
    return CLI_OK;
}

static int job_result(int argc, char **argv)
{
    const char *cmd = "job result";
    const char *s_out = NULL;
    struct job_args a;
    struct cli_opt opts[] = {
        {"server", CLI_OPT_VALUE, &a.server, NULL},
        {"token-file", CLI_OPT_VALUE, &a.token_file, NULL},
        {"job", CLI_OPT_VALUE, &a.job, NULL},
        {"format", CLI_OPT_VALUE, &a.format, NULL},
        {"out", CLI_OPT_DIR, &s_out, NULL},
        JOB_TLS_OPTS(a),
    };
    int help = 0, rc;
    struct fs_err err;
    fs_httpc *c = NULL;
    json_t *res = NULL;
    struct fs_job_result *r = NULL;
    char path[64 + ORCH_ID_MAX];

    fs_err_clear(&err);
    rc = job_args_parse(cmd, argc, argv, opts, NOPTS(opts), &a, 1, result_help, &help);
    if (rc != CLI_OK || help || (rc = job_args_connect(cmd, &a, "token-file", &c)) != CLI_OK) {
        return rc;
    }
    snprintf(path, sizeof path, "/v1/jobs/%s/result", a.job);
    if (fs_httpc_json(c, "GET", path, NULL, &res, NULL, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    if ((r = malloc(sizeof *r)) == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    if (fs_job_result_decode(res, 0, r, &err) != 0) {
        rc = cli_runtime_error(cmd, "the result manifest: %s", err.msg);
        goto out;
    }
    if (s_out != NULL && ((rc = cli_mkdir_p(cmd, s_out)) != CLI_OK ||
                          (rc = fetch_files(cmd, c, path, r, s_out)) != CLI_OK)) {
        goto out;
    }
    if (a.json) {
        rc = cli_print_json(cmd, json_incref(res));
    } else {
        printf("%-12s %s\n", "algorithm", r->algorithm);
        print_ids("survivors", r->survivors, r->nsurvivors);
        print_ids("dropped", r->dropped, r->ndropped);
        for (size_t i = 0; i < r->nfiles; i++) {
            printf("%-12s %s sha256 %s%s%s\n", "file", r->files[i].name, r->files[i].sha256,
                   s_out != NULL ? " -> " : "", s_out != NULL ? s_out : "");
        }
    }
out:
    free(r);
    json_decref(res);
    fs_httpc_free(c);
    return rc;
}

static int job_list(int argc, char **argv)
{
    const char *cmd = "job list";
    struct job_args a;
    struct cli_opt opts[] = {
        {"server", CLI_OPT_VALUE, &a.server, NULL},
        {"admin-token-file", CLI_OPT_VALUE, &a.token_file, NULL},
        {"format", CLI_OPT_VALUE, &a.format, NULL},
        JOB_TLS_OPTS(a),
    };
    size_t n = 0;
    int help = 0, rc;
    struct fs_err err;
    fs_httpc *c = NULL;
    json_t *res = NULL;
    const json_t *jobs = NULL;
    struct fs_job_status *st = NULL;

    fs_err_clear(&err);
    rc = job_args_parse(cmd, argc, argv, opts, NOPTS(opts), &a, 0, list_help, &help);
    if (rc != CLI_OK || help ||
        (rc = job_args_connect(cmd, &a, "admin-token-file", &c)) != CLI_OK) {
        return rc;
    }
    if (fs_httpc_json(c, "GET", "/v1/jobs", NULL, &res, NULL, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    if (a.json) {
        rc = cli_print_json(cmd, json_incref(res));
        goto out;
    }
    st = malloc(sizeof *st);
    if (st == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    if (fs_job_list_decode(res, &jobs, &n, &err) != 0) {
        rc = cli_runtime_error(cmd, "GET /v1/jobs: %s", err.msg);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (fs_job_status_decode(json_array_get(jobs, i), st, &err) != 0) {
            rc = cli_runtime_error(cmd, "GET /v1/jobs: jobs[%zu]: %s", i, err.msg);
            goto out;
        }
        printf("%s  %-12s %-8s %-19s parties %lu\n", st->id, st->algorithm,
               fs_job_state_name(st->state), st->phase, (unsigned long)st->parties);
    }
out:
    free(st);
    json_decref(res);
    fs_httpc_free(c);
    return rc;
}

static int job_cancel(int argc, char **argv)
{
    const char *cmd = "job cancel";
    struct job_args a;
    struct cli_opt opts[] = {
        {"server", CLI_OPT_VALUE, &a.server, NULL},
        {"admin-token-file", CLI_OPT_VALUE, &a.token_file, NULL},
        {"job", CLI_OPT_VALUE, &a.job, NULL},
        {"format", CLI_OPT_VALUE, &a.format, NULL},
        JOB_TLS_OPTS(a),
    };
    int help = 0, rc;
    struct fs_err err;
    fs_httpc *c = NULL;
    json_t *res = NULL;
    char path[64 + ORCH_ID_MAX];

    fs_err_clear(&err);
    rc = job_args_parse(cmd, argc, argv, opts, NOPTS(opts), &a, 1, cancel_help, &help);
    if (rc != CLI_OK || help ||
        (rc = job_args_connect(cmd, &a, "admin-token-file", &c)) != CLI_OK) {
        return rc;
    }
    snprintf(path, sizeof path, "/v1/jobs/%s", a.job);
    if (fs_httpc_json(c, "DELETE", path, NULL, &res, NULL, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    if (a.json) {
        rc = cli_print_json(cmd, json_incref(res));
    } else {
        struct fs_job_status *st = malloc(sizeof *st);

        printf("job %s: %s\n", a.job,
               st != NULL && fs_job_status_decode(res, st, &err) == 0 ? st->phase : "cancelled");
        free(st);
    }
out:
    json_decref(res);
    fs_httpc_free(c);
    return rc;
}

int cmd_job(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } subs[] = {
        {"create", job_create}, {"status", job_status}, {"watch", job_watch},
        {"result", job_result}, {"list", job_list},     {"cancel", job_cancel},
    };

    if (argc < 2) {
        fprintf(stderr, "fedsvd job: missing SUBCOMMAND: create, status, watch, result, list or "
                        "cancel (see 'fedsvd job --help')\n");
        return CLI_EUSAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        job_help();
        return CLI_OK;
    }
    for (size_t i = 0; i < NOPTS(subs); i++) {
        if (strcmp(argv[1], subs[i].name) == 0) {
            return subs[i].run(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "fedsvd job: unknown subcommand '%s' (see 'fedsvd job --help')\n", argv[1]);
    return CLI_EUSAGE;
}
