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
#include "jobs.h"
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
           "                         [--allow-low-threshold] [--round-timeout S]\n"
           "                         [--join-timeout S]\n"
           "                         [--name LABEL] [--public-url URL] [--out-dir DIR]\n"
           "                         [--format text|json]\n"
           "                         (--party-key I:FPR for every party | --allow-unpinned)\n"
           "       fedsvd job create --server URL --admin-token-file F --algorithm fedsvd|fedpca\n"
           "                         --shape N,D --party-sizes N1,N2,... [--partition P]\n"
           "                         --masking-server URL --masking-token-file F [--k K]\n"
           "                         [--method exact|randomized] [--standardize]\n"
           "                         [--allow-dropouts] [--block-size C] [...as above]\n"
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
        "                         fedpower-private or dp-ppm\n"
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
        "  --party-key I:FPR      pin party I's identity: FPR is the 64-hex-digit fingerprint\n"
        "                         of its client-agent ('fedsvd agent identity'); repeat for\n"
        "                         every party 1..K. Agents and the server refuse any other key\n"
        "  --allow-unpinned       no pins: the parties trust the identity keys the server\n"
        "                         relays (a server that substitutes keys is not caught)\n"
        "  --threshold T          minimum survivors, floor(K/2)+1..K (default floor(K/2)+1)\n"
        "  --allow-low-threshold  accept a --threshold below floor(K/2)+1: then two disjoint\n"
        "                         halves of the parties could each complete an aggregation,\n"
        "                         and a malicious server could unmask an input (tests only)\n"
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

static void print_ids(const char *label, const json_t *a)
{
    size_t i;
    json_t *v;

    printf("%-12s ", label);
    if (!json_is_array(a) || json_array_size(a) == 0) {
        printf("none\n");
        return;
    }
    json_array_foreach(a, i, v)
    {
        printf("%s%lld", i > 0 ? "," : "", (long long)json_integer_value(v));
    }
    printf("\n");
}

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));

    return s != NULL ? s : dflt;
}

static void print_job_text(const json_t *job)
{
    const json_t *timings = json_object_get(job, "timings");
    const json_t *shape = json_object_get(job, "shape");
    const json_t *error = json_object_get(job, "error");
    char in[32], out[32];

    printf("%-12s %s\n", "job", str_or(job, "id", "?"));
    printf("%-12s %s\n", "algorithm", str_or(job, "algorithm", "?"));
    if (str_or(job, "name", "")[0] != '\0') {
        printf("%-12s %s\n", "name", str_or(job, "name", ""));
    }
    printf("%-12s %s\n", "state", str_or(job, "state", "?"));
    printf("%-12s %s\n", "phase", str_or(job, "phase", "?"));
    printf("%-12s %lld of %lld\n", "aggregation",
           (long long)json_integer_value(json_object_get(job, "aggregation")) + 1,
           (long long)json_integer_value(json_object_get(job, "aggregations")));
    printf("%-12s %lld (threshold %lld)\n", "parties",
           (long long)json_integer_value(json_object_get(job, "parties")),
           (long long)json_integer_value(json_object_get(job, "threshold")));
    if (json_is_array(shape) && json_array_size(shape) == 2) {
        printf("%-12s %lld x %lld\n", "shape",
               (long long)json_integer_value(json_array_get(shape, 0)),
               (long long)json_integer_value(json_array_get(shape, 1)));
    }
    print_ids("present", json_object_get(job, "present"));
    print_ids("dropped", json_object_get(job, "dropped"));
    printf("%-12s in %s, out %s\n", "bytes",
           orch_bytes(json_number_value(json_object_get(job, "bytes_in")), in, sizeof in),
           orch_bytes(json_number_value(json_object_get(job, "bytes_out")), out, sizeof out));
    if (json_is_object(timings)) {
        const char *k;
        json_t *v;

        json_object_foreach((json_t *)timings, k, v)
        {
            printf("%-12s %s %.3f s\n", "timing", k, json_number_value(v));
        }
    }
    if (json_is_number(json_object_get(job, "deadline_in_s"))) {
        char dur[64];
        /* the join phase waits for the parties (the job's join timeout) */
        printf("%-12s %s\n",
               strcmp(str_or(job, "phase", ""), "waiting_for_parties") == 0 ? "join ends"
                                                                            : "round ends",
               orch_duration(json_number_value(json_object_get(job, "deadline_in_s")), dur,
                             sizeof dur));
    }
    printf("%-12s %s\n", "created", str_or(job, "created_at", "?"));
    if (json_is_string(error)) {
        printf("%-12s %s\n", "error", json_string_value(error));
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

/* The fedsvd/fedpca options of job create. */
static int fed_create_args(const char *cmd, const char *alg, const char *part, const char *sizes_s,
                           const char *k_s, const char *method, int standardize, const char *msrv,
                           const char *mtok, const char *mpub, const char *block_s, size_t **sizes,
                           size_t *nsizes, size_t *k, size_t *block)
{
    int rc;

    if (part != NULL && strcmp(part, "samples") != 0 && strcmp(part, "features") != 0) {
        return cli_usage_error(cmd, "--partition: expected samples or features, got '%s'", part);
    }
    if (method != NULL && strcmp(method, "exact") != 0 && strcmp(method, "randomized") != 0) {
        return cli_usage_error(cmd, "--method: expected exact or randomized, got '%s'", method);
    }
    if (standardize && strcmp(alg, "fedpca") != 0) {
        return cli_usage_error(cmd, "--standardize is for fedpca");
    }
    if (sizes_s == NULL || msrv == NULL || mtok == NULL) {
        return cli_usage_error(cmd,
                               "%s needs --party-sizes, --masking-server and "
                               "--masking-token-file",
                               alg);
    }
    if (!orch_url_ok(msrv) || (mpub != NULL && !orch_url_ok(mpub))) {
        return cli_usage_error(cmd, "--masking-server / --masking-public-url: expected an http:// "
                                    "or https:// URL");
    }
    if ((k_s != NULL && (rc = cli_parse_size(cmd, "--k", k_s, 0, (size_t)1 << 31, k)) != 0) ||
        (k_s != NULL && *k == 0 &&
         (rc = cli_usage_error(cmd, "--k: must be between 1 and min(N, d) of the job, got '%s'",
                               k_s)) != 0) ||
        (block_s != NULL &&
         (rc = cli_parse_size(cmd, "--block-size", block_s, 1, (size_t)1 << 31, block)) != 0)) {
        return rc;
    }
    if (method != NULL && strcmp(method, "randomized") == 0 && *k == 0) {
        return cli_usage_error(cmd, "--method randomized needs --k");
    }
    return cli_parse_size_list(cmd, "--party-sizes", sizes_s, JOB_MAX_PARTIES, sizes, nsizes);
}

/*
 * Create the job's mask set on the masking server (docs/wire-fedsvd.md),
 * each party pinned to its identity (pins: the job's party_keys), so that
 * only party i's agent can fetch party i's keys; add masking_url and maskset
 * to each party's invitation, and hand the mask set's end token to the
 * aggregation server (srv), which deletes the mask set when the job ends.
 * No credential for mask keys exists, here or anywhere.
 */
static int fed_create_maskset(const char *cmd, const char *msrv, const char *mtok, const char *mpub,
                              const struct orch_tls *tls, const char *job_id, int features,
                              const size_t *sizes, size_t n, size_t other, size_t block,
                              const json_t *pins, fs_httpc *srv, json_t *invs)
{
    char base[1024];
    json_t *spec = NULL, *resp = NULL, *parties = json_array();
    const json_t *creds;
    const char *id, *end_token;
    struct fs_err err;
    fs_httpc *m = NULL;
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (!json_is_array(pins) || json_array_size(pins) != n) {
        json_decref(parties);
        return cli_usage_error(cmd, "fedsvd and fedpca jobs need --party-key I:FINGERPRINT for "
                                    "every party: the masking server releases party i's keys "
                                    "only to requests signed by party i's identity");
    }
    for (size_t i = 0; parties != NULL && i < n; i++) {
        json_array_append_new(parties, json_pack("{s:I, s:I, s:O}", "party", (json_int_t)(i + 1),
                                                 features ? "cols" : "rows", (json_int_t)sizes[i],
                                                 "identity", json_array_get(pins, i)));
    }
    spec = json_pack("{s:s, s:s, s:o, s:I}", "job_id", job_id, "partition",
                     features ? "features" : "samples", "parties", parties,
                     features ? "rows" : "cols", (json_int_t)other);
    if (spec == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    if (block > 0) {
        json_object_set_new(spec, "block_size", json_integer((json_int_t)block));
    }
    if (orch_url_trim(mpub != NULL ? mpub : msrv, base, sizeof base, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    json_object_set_new(spec, "server_url", json_string(base));
    if ((rc = connect_server(cmd, msrv, mtok, tls, &m)) != CLI_OK) {
        goto out;
    }
    if (fs_httpc_json(m, "POST", "/v1/masksets", spec, &resp, NULL, &err) != 0) {
        rc = cli_runtime_error(cmd, "masking server: %s", err.msg);
        goto out;
    }
    id = json_string_value(json_object_get(json_object_get(resp, "maskset"), "id"));
    creds = json_object_get(resp, "parties");
    end_token = json_string_value(json_object_get(resp, "end_token"));
    if (!orch_id_ok(id) || !json_is_array(creds) || json_array_size(creds) != n ||
        end_token == NULL) {
        rc = cli_runtime_error(cmd,
                               "POST /v1/masksets: the response lacks an id, an end token or %zu "
                               "parties",
                               n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(creds, i);
        json_int_t party = json_integer_value(json_object_get(c, "party"));
        json_t *inv = NULL, *v;
        size_t q;

        json_array_foreach(invs, q, v)
        {
            if (json_integer_value(json_object_get(v, "party")) == party) {
                inv = v;
            }
        }
        if (inv == NULL || !json_equal(json_object_get(c, "identity"), json_array_get(pins, i))) {
            rc = cli_runtime_error(cmd, "POST /v1/masksets: party %zu is not pinned to its key",
                                   i + 1);
            goto out;
        }
        json_object_set_new(inv, "masking_url", json_string(base));
        json_object_set_new(inv, "maskset", json_string(id));
    }
    if (orch_job_set_maskset(srv, job_id, base, id, end_token, &err) != 0) {
        rc = cli_runtime_error(cmd, "%s", err.msg);
        goto out;
    }
    fprintf(stderr, "fedsvd %s: mask set %s created on %s\n", cmd, id, base);
out:
    json_decref(resp);
    json_decref(spec);
    fs_httpc_free(m);
    return rc;
}

/* The created job's invitations: DIR/invitation-<i>.json (0600) with
 * --out-dir, else printed; --format json prints {"job", "invitations"}. */
static int emit_invitations(const char *cmd, const json_t *job, const json_t *invs,
                            const char *outdir, int json, size_t parties)
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
        printf("job %s created: %zu parties, threshold %lld; wrote %s/invitation-1..%zu.json\n",
               str_or(job, "id", "?"), parties,
               (long long)json_integer_value(json_object_get(job, "threshold")), outdir, parties);
    } else {
        char *s = json_dumps(invs, JSON_INDENT(2));

        if (s == NULL) {
            json_decref(files);
            return cli_runtime_error(cmd, "out of memory");
        }
        puts(s);
        free(s);
        fprintf(stderr, "fedsvd %s: job %s created: %zu parties, threshold %lld\n", cmd,
                str_or(job, "id", "?"), parties,
                (long long)json_integer_value(json_object_get(job, "threshold")));
    }
    json_decref(files);
    return rc;
}

/* POST spec to the server; the reply's job and invitations (K of them). */
static int post_job(const char *cmd, const char *server, const char *tok,
                    const struct orch_tls *tls, const json_t *spec, size_t parties, json_t **resp)
{
    struct fs_err err;
    fs_httpc *c = NULL;
    int rc;

    fs_err_clear(&err);
    *resp = NULL;
    if ((rc = connect_server(cmd, server, tok, tls, &c)) != CLI_OK) {
        return rc;
    }
    if (fs_httpc_json(c, "POST", "/v1/jobs", (json_t *)spec, resp, NULL, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
    } else if (!json_is_object(json_object_get(*resp, "job")) ||
               !json_is_array(json_object_get(*resp, "invitations")) ||
               json_array_size(json_object_get(*resp, "invitations")) != parties) {
        rc = cli_runtime_error(cmd, "POST /v1/jobs: the response lacks the job or %zu invitations",
                               parties);
    } else if (orch_check_invitation_pins(spec, json_object_get(*resp, "invitations"), &err) != 0) {
        rc = cli_fs_error(cmd, &err);
    }
    fs_httpc_free(c);
    return rc;
}

/* job create for the power methods (docs/wire-fedpower.md). */
static int power_create(const char *cmd, const char *server, const char *tok, const char *alg,
                        const char *s_parties, const char *s_shape, const char *s_cols,
                        const char *s_sizes, const char *s_k, const char *s_thr, const char *s_rt,
                        const char *s_jt, const char *name, const char *pub, const char *outdir,
                        const char *format, const struct orch_tls *tls, struct orch_power_opts *po,
                        int allow_dropouts, int fed_only, const char *const *pkeys,
                        int allow_unpinned, int allow_low)
{
    size_t *sizes = NULL, nsizes = 0, parties = 0, thr = 0, rt = 0, jt = 0, cols = 0;
    json_int_t shape[2] = {0, 0};
    json_t *spec = NULL, *rows = NULL, *resp = NULL;
    int json = 0, vb_missing = 0, rc;
    uint64_t total = 0;

    po->k = s_k;
    if (fed_only) {
        return cli_usage_error(cmd, "--partition, --method, --standardize, --masking-* and "
                                    "--block-size are for fedsvd and fedpca");
    }
    if (tok == NULL || s_sizes == NULL || (s_cols == NULL && s_shape == NULL)) {
        return cli_usage_error(cmd, "%s needs --admin-token-file, --party-sizes and --cols", alg);
    }
    if ((rc = orch_power_spec(cmd, alg, po, 0, NULL, &vb_missing)) != CLI_OK) {
        return rc;
    }
    if (vb_missing) {
        return cli_usage_error(cmd,
                               "%s needs --value-bound (a public bound on every party's "
                               "||M_i^T M_i / s_i||_2)",
                               alg);
    }
    if ((rc = cli_parse_size_list(cmd, "--party-sizes", s_sizes, JOB_MAX_PARTIES, &sizes,
                                  &nsizes)) != CLI_OK) {
        return rc;
    }
    for (size_t i = 0; i < nsizes; i++) {
        total += sizes[i];
    }
    if ((s_parties != NULL &&
         ((rc = cli_parse_size(cmd, "--parties", s_parties, 1, JOB_MAX_PARTIES, &parties)) !=
              CLI_OK ||
          (parties != nsizes && (rc = cli_usage_error(cmd,
                                                      "--parties %zu but --party-sizes lists "
                                                      "%zu",
                                                      parties, nsizes)) != CLI_OK))) ||
        (s_cols != NULL &&
         (rc = cli_parse_size(cmd, "--cols", s_cols, 1, (size_t)1 << 20, &cols)) != CLI_OK) ||
        (s_shape != NULL && (rc = parse_shape(cmd, s_shape, shape)) != CLI_OK) ||
        (s_thr != NULL &&
         (rc = cli_parse_size(cmd, "--threshold", s_thr, 1, nsizes, &thr)) != CLI_OK) ||
        (s_rt != NULL && (rc = cli_parse_size(cmd, "--round-timeout", s_rt, 1, 86400, &rt)) != 0) ||
        (s_jt != NULL && (rc = cli_parse_size(cmd, "--join-timeout", s_jt, 1,
                                              FS_JOB_MAX_JOIN_TIMEOUT, &jt)) != 0) ||
        (rc = cli_parse_format(cmd, format, &json)) != CLI_OK) {
        free(sizes);
        return rc;
    }
    if (s_shape != NULL && (shape[1] < 1 || (uint64_t)shape[0] != total ||
                            (s_cols != NULL && (size_t)shape[1] != cols))) {
        free(sizes);
        return cli_usage_error(cmd,
                               "--shape N,D: N must be the sum of --party-sizes (%llu) and D "
                               "agree with --cols",
                               (unsigned long long)total);
    }
    if (s_cols == NULL) {
        cols = (size_t)shape[1];
    }
    if (pub != NULL && !orch_url_ok(pub)) {
        free(sizes);
        return cli_usage_error(cmd, "--public-url: expected an http:// or https:// URL, got '%s'",
                               pub);
    }
    spec = json_pack("{s:s, s:I, s:I, s:b}", "algorithm", alg, "parties", (json_int_t)nsizes,
                     "cols", (json_int_t)cols, "allow_dropouts", allow_dropouts);
    rows = json_array();
    if (spec == NULL || rows == NULL) {
        json_decref(rows);
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nsizes; i++) {
        json_array_append_new(rows, json_integer((json_int_t)sizes[i]));
    }
    json_object_set_new(spec, "party_rows", rows);
    if ((rc = orch_power_spec(cmd, alg, po, cols, spec, NULL)) != CLI_OK) {
        goto out;
    }
    if (s_thr != NULL) {
        json_object_set_new(spec, "threshold", json_integer((json_int_t)thr));
    }
    if (allow_low) {
        json_object_set_new(spec, "allow_low_threshold", json_true());
    }
    if (s_rt != NULL) {
        json_object_set_new(spec, "round_timeout_s", json_integer((json_int_t)rt));
    }
    if (s_jt != NULL) {
        json_object_set_new(spec, "join_timeout_s", json_integer((json_int_t)jt));
    }
    if (name != NULL) {
        json_object_set_new(spec, "name", json_string(name));
    }
    if (pub != NULL) {
        json_object_set_new(spec, "server_url", json_string(pub));
    }
    if ((rc = orch_party_keys(cmd, pkeys, nsizes, allow_unpinned, spec)) != CLI_OK) {
        goto out;
    }
    if (outdir != NULL && (rc = cli_mkdir_p(cmd, outdir)) != CLI_OK) {
        goto out;
    }
    if ((rc = post_job(cmd, server, tok, tls, spec, nsizes, &resp)) != CLI_OK) {
        goto out;
    }
    rc = emit_invitations(cmd, json_object_get(resp, "job"), json_object_get(resp, "invitations"),
                          outdir, json, nsizes);
out:
    json_decref(resp);
    json_decref(spec);
    free(sizes);
    return rc;
}

static int job_create(int argc, char **argv)
{
    const char *cmd = "job create";
    const char *s_server = NULL, *s_tok = NULL, *s_alg = NULL, *s_parties = NULL;
    const char *s_shape = NULL, *s_thr = NULL, *s_rt = NULL, *s_jt = NULL, *s_name = NULL;
    const char *s_pub = NULL;
    const char *s_outdir = NULL, *s_format = NULL, *s_ca = NULL;
    const char *s_part = NULL, *s_sizes = NULL, *s_k = NULL, *s_method = NULL, *s_msrv = NULL;
    const char *s_mtok = NULL, *s_mpub = NULL, *s_block = NULL, *s_cols = NULL;
    int standardize = 0, allow_dropouts = 0, fed = 0, power = 0, allow_unpinned = 0;
    int allow_low = 0;
    const char *pkeys[CLI_LIST_MAX + 1] = {NULL};
    struct orch_power_opts po;
    size_t *sizes = NULL, nsizes = 0, kk = 0, block = 0;
    char job_id[ORCH_ID_MAX] = "";
    struct orch_tls tls = {0, NULL, 0};
    struct cli_opt opts[] = {
        {"server", CLI_OPT_VALUE, &s_server, NULL},
        {"admin-token-file", CLI_OPT_VALUE, &s_tok, NULL},
        {"algorithm", CLI_OPT_VALUE, &s_alg, NULL},
        {"parties", CLI_OPT_VALUE, &s_parties, NULL},
        {"shape", CLI_OPT_VALUE, &s_shape, NULL},
        {"threshold", CLI_OPT_VALUE, &s_thr, NULL},
        {"allow-low-threshold", CLI_OPT_FLAG, NULL, &allow_low},
        {"round-timeout", CLI_OPT_VALUE, &s_rt, NULL},
        {"join-timeout", CLI_OPT_VALUE, &s_jt, NULL},
        {"name", CLI_OPT_VALUE, &s_name, NULL},
        {"public-url", CLI_OPT_VALUE, &s_pub, NULL},
        {"out-dir", CLI_OPT_DIR, &s_outdir, NULL},
        {"format", CLI_OPT_VALUE, &s_format, NULL},
        {"insecure", CLI_OPT_FLAG, NULL, &tls.insecure},
        {"insecure-http", CLI_OPT_FLAG, NULL, &tls.insecure_http},
        {"ca-file", CLI_OPT_VALUE, &s_ca, NULL},
        {"partition", CLI_OPT_VALUE, &s_part, NULL},
        {"party-sizes", CLI_OPT_VALUE, &s_sizes, NULL},
        {"k", CLI_OPT_VALUE, &s_k, NULL},
        {"method", CLI_OPT_VALUE, &s_method, NULL},
        {"standardize", CLI_OPT_FLAG, NULL, &standardize},
        {"allow-dropouts", CLI_OPT_FLAG, NULL, &allow_dropouts},
        {"masking-server", CLI_OPT_VALUE, &s_msrv, NULL},
        {"masking-token-file", CLI_OPT_VALUE, &s_mtok, NULL},
        {"masking-public-url", CLI_OPT_VALUE, &s_mpub, NULL},
        {"block-size", CLI_OPT_VALUE, &s_block, NULL},
        {"cols", CLI_OPT_VALUE, &s_cols, NULL},
        {"party-key", CLI_OPT_LIST, pkeys, NULL},
        {"allow-unpinned", CLI_OPT_FLAG, NULL, &allow_unpinned},
        ORCH_POWER_OPTS(po),
    };
    const char *pos[1];
    size_t npos = 0, parties = 0, thr = 0, rt = 0, jt = 0;
    json_int_t shape[2] = {0, 0};
    int help = 0, json = 0, rc;
    struct fs_err err;
    fs_httpc *c = NULL;
    json_t *spec = NULL, *resp = NULL;
    const json_t *invs, *job;

    fs_err_clear(&err);
    memset(&po, 0, sizeof po);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        create_help();
        return CLI_OK;
    }
    tls.ca_file = s_ca;
    if ((rc = check_server(cmd, s_server)) != CLI_OK ||
        (rc = check_invitation_url(cmd, "--public-url", s_pub, &tls)) != CLI_OK ||
        (rc =
             check_invitation_url(cmd, s_mpub != NULL ? "--masking-public-url" : "--masking-server",
                                  s_mpub != NULL ? s_mpub : s_msrv, &tls)) != CLI_OK) {
        return rc;
    }
    power = orch_power_algorithm(s_alg);
    if (!power && (orch_power_given(&po) || s_cols != NULL)) {
        return cli_usage_error(cmd, "--cols and the power-method options are for fedpower, "
                                    "fedpower-utility, fedpower-private and dp-ppm");
    }
    if (power) {
        return power_create(cmd, s_server, s_tok, s_alg, s_parties, s_shape, s_cols, s_sizes, s_k,
                            s_thr, s_rt, s_jt, s_name, s_pub, s_outdir, s_format, &tls, &po,
                            allow_dropouts,
                            s_part != NULL || s_method != NULL || standardize || s_msrv != NULL ||
                                s_mtok != NULL || s_mpub != NULL || s_block != NULL,
                            pkeys, allow_unpinned, allow_low);
    }
    if (s_alg != NULL && (strcmp(s_alg, "fedsvd") == 0 || strcmp(s_alg, "fedpca") == 0)) {
        fed = 1;
        rc = fed_create_args(cmd, s_alg, s_part, s_sizes, s_k, s_method, standardize, s_msrv,
                             s_mtok, s_mpub, s_block, &sizes, &nsizes, &kk, &block);
        if (rc != CLI_OK) {
            return rc;
        }
        if (s_parties == NULL) {
            s_parties = "0"; /* from --party-sizes below */
        }
    } else if (s_part != NULL || s_sizes != NULL || s_k != NULL || s_method != NULL ||
               standardize || allow_dropouts || s_msrv != NULL || s_mtok != NULL ||
               s_mpub != NULL || s_block != NULL) {
        return cli_usage_error(cmd, "--partition, --party-sizes, --k, --method, --standardize, "
                                    "--allow-dropouts, --masking-* and --block-size are for "
                                    "fedsvd and fedpca");
    }
    if (s_tok == NULL || s_alg == NULL || s_parties == NULL || s_shape == NULL) {
        free(sizes);
        return cli_usage_error(
            cmd, "--admin-token-file, --algorithm, --parties and --shape are required");
    }
    if (!fed && strcmp(s_alg, "secure-sum") != 0) {
        return cli_usage_error(cmd, "--algorithm: expected " ORCH_ALGORITHMS ", got '%s'", s_alg);
    }
    if (fed && strcmp(s_parties, "0") != 0 &&
        ((rc = cli_parse_size(cmd, "--parties", s_parties, 1, JOB_MAX_PARTIES, &parties)) != 0 ||
         parties != nsizes)) {
        free(sizes);
        return rc != 0 ? rc
                       : cli_usage_error(cmd, "--parties %zu but --party-sizes lists %zu", parties,
                                         nsizes);
    }
    if (fed) {
        parties = nsizes;
    }
    if ((!fed &&
         (rc = cli_parse_size(cmd, "--parties", s_parties, 1, JOB_MAX_PARTIES, &parties)) != 0) ||
        (rc = parse_shape(cmd, s_shape, shape)) != 0 ||
        (s_thr != NULL &&
         (rc = cli_parse_size(cmd, "--threshold", s_thr, 1, parties, &thr)) != 0) ||
        (s_rt != NULL && (rc = cli_parse_size(cmd, "--round-timeout", s_rt, 1, 86400, &rt)) != 0) ||
        (s_jt != NULL && (rc = cli_parse_size(cmd, "--join-timeout", s_jt, 1,
                                              FS_JOB_MAX_JOIN_TIMEOUT, &jt)) != 0) ||
        (rc = cli_parse_format(cmd, s_format, &json)) != 0) {
        free(sizes);
        return rc;
    }
    if (s_pub != NULL && !orch_url_ok(s_pub)) {
        free(sizes);
        return cli_usage_error(cmd, "--public-url: expected an http:// or https:// URL, got '%s'",
                               s_pub);
    }
    spec = json_pack("{s:s, s:I, s:[I,I]}", "algorithm", s_alg, "parties", (json_int_t)parties,
                     "shape", shape[0], shape[1]);
    if (spec == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    if (s_thr != NULL) {
        json_object_set_new(spec, "threshold", json_integer((json_int_t)thr));
    }
    if (allow_low) {
        json_object_set_new(spec, "allow_low_threshold", json_true());
    }
    if (s_rt != NULL) {
        json_object_set_new(spec, "round_timeout_s", json_integer((json_int_t)rt));
    }
    if (s_jt != NULL) {
        json_object_set_new(spec, "join_timeout_s", json_integer((json_int_t)jt));
    }
    if (s_name != NULL) {
        json_object_set_new(spec, "name", json_string(s_name));
    }
    if (s_pub != NULL) {
        json_object_set_new(spec, "server_url", json_string(s_pub));
    }
    if (fed) {
        json_t *a = json_array();
        for (size_t i = 0; a != NULL && i < nsizes; i++) {
            json_array_append_new(a, json_integer((json_int_t)sizes[i]));
        }
        json_object_set_new(spec, "partition", json_string(s_part != NULL ? s_part : "samples"));
        json_object_set_new(spec, "party_sizes", a);
        if (kk > 0) {
            json_object_set_new(spec, "k", json_integer((json_int_t)kk));
        }
        if (s_method != NULL) {
            json_object_set_new(spec, "method", json_string(s_method));
        }
        if (standardize) {
            json_object_set_new(spec, "standardize", json_true());
        }
        if (allow_dropouts) {
            json_object_set_new(spec, "allow_dropouts", json_true());
        }
    }
    if ((rc = orch_party_keys(cmd, pkeys, parties, allow_unpinned, spec)) != CLI_OK) {
        goto out;
    }
    if (fed && json_object_get(spec, "party_keys") == NULL) {
        rc = cli_usage_error(cmd, "fedsvd and fedpca jobs need --party-key I:FINGERPRINT for "
                                  "every party: the masking server releases party i's keys only "
                                  "to requests signed by party i's identity");
        goto out;
    }
    if (s_outdir != NULL && (rc = cli_mkdir_p(cmd, s_outdir)) != CLI_OK) {
        goto out;
    }
    if ((rc = connect_server(cmd, s_server, s_tok, &tls, &c)) != CLI_OK) {
        goto out;
    }
    if (fs_httpc_json(c, "POST", "/v1/jobs", spec, &resp, NULL, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    job = json_object_get(resp, "job");
    invs = json_object_get(resp, "invitations");
    if (!json_is_object(job) || !json_is_array(invs) || json_array_size(invs) != parties) {
        rc = cli_runtime_error(cmd, "POST /v1/jobs: the response lacks the job or %zu invitations",
                               parties);
        goto out;
    }
    if (orch_check_invitation_pins(spec, invs, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    snprintf(job_id, sizeof job_id, "%s", str_or(job, "id", ""));
    if (fed) {
        rc = fed_create_maskset(
            cmd, s_msrv, s_mtok, s_mpub, &tls, job_id,
            s_part != NULL && strcmp(s_part, "features") == 0, sizes, nsizes,
            (size_t)(s_part != NULL && strcmp(s_part, "features") == 0 ? shape[0] : shape[1]),
            block, json_object_get(spec, "party_keys"), c, (json_t *)invs);
        if (rc != CLI_OK) {
            /* a job without masks cannot run: do not leave it waiting */
            char path[ORCH_ID_MAX + 16];
            snprintf(path, sizeof path, "/v1/jobs/%s", job_id);
            if (orch_id_ok(job_id) &&
                fs_httpc_json(c, "DELETE", path, NULL, NULL, NULL, &err) == 0) {
                fprintf(stderr, "fedsvd %s: job %s cancelled\n", cmd, job_id);
            }
            goto out;
        }
    }
    rc = emit_invitations(cmd, job, invs, s_outdir, json, parties);
out:
    json_decref(resp);
    json_decref(spec);
    fs_httpc_free(c);
    free(sizes);
    return rc;
}

/* ---- status / watch / result / list / cancel ---- */

struct job_args {
    const char *server, *token_file, *job, *format, *ca_file;
    struct orch_tls tls;
    int json;
};

static int job_status(int argc, char **argv)
{
    const char *cmd = "job status";
    struct job_args a;
    struct cli_opt opts[] = {
        {"server", CLI_OPT_VALUE, &a.server, NULL},
        {"token-file", CLI_OPT_VALUE, &a.token_file, NULL},
        {"job", CLI_OPT_VALUE, &a.job, NULL},
        {"format", CLI_OPT_VALUE, &a.format, NULL},
        {"insecure", CLI_OPT_FLAG, NULL, &a.tls.insecure},
        {"insecure-http", CLI_OPT_FLAG, NULL, &a.tls.insecure_http},
        {"ca-file", CLI_OPT_VALUE, &a.ca_file, NULL},
    };
    const char *pos[1];
    size_t npos = 0;
    int help = 0, rc;
    struct fs_err err;
    fs_httpc *c = NULL;
    json_t *job = NULL;

    memset(&a, 0, sizeof a);
    fs_err_clear(&err);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        status_help();
        return CLI_OK;
    }
    a.tls.ca_file = a.ca_file;
    if ((rc = check_server(cmd, a.server)) != 0 || (rc = check_job(cmd, a.job)) != 0 ||
        (rc = cli_parse_format(cmd, a.format, &a.json)) != 0) {
        return rc;
    }
    if (a.token_file == NULL) {
        return cli_usage_error(cmd, "--token-file is required");
    }
    if ((rc = connect_server(cmd, a.server, a.token_file, &a.tls, &c)) != CLI_OK) {
        return rc;
    }
    if (orch_job_get(c, a.job, &job, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    if (a.json) {
        rc = cli_print_json(cmd, json_incref(job));
    } else {
        print_job_text(job);
    }
out:
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
        {"insecure", CLI_OPT_FLAG, NULL, &a.tls.insecure},
        {"insecure-http", CLI_OPT_FLAG, NULL, &a.tls.insecure_http},
        {"ca-file", CLI_OPT_VALUE, &a.ca_file, NULL},
    };
    const char *pos[1];
    size_t npos = 0;
    double interval = 0.5, timeout = 0, t0;
    int help = 0, rc;
    struct fs_err err;
    struct orch_progress prog;
    struct sigaction sa, old_int, old_term;
    fs_httpc *c = NULL;
    json_t *job = NULL;

    memset(&a, 0, sizeof a);
    fs_err_clear(&err);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        watch_help();
        return CLI_OK;
    }
    a.tls.ca_file = a.ca_file;
    if ((rc = check_server(cmd, a.server)) != 0 || (rc = check_job(cmd, a.job)) != 0 ||
        (rc = cli_parse_format(cmd, a.format, &a.json)) != 0 ||
        (s_interval != NULL &&
         (rc = cli_parse_double(cmd, "--interval", s_interval, 0.05, CLI_CLOSED, 3600, CLI_CLOSED,
                                &interval)) != 0) ||
        (s_timeout != NULL && (rc = cli_parse_double(cmd, "--timeout", s_timeout, 0, CLI_OPEN, 0,
                                                     CLI_NONE, &timeout)) != 0)) {
        return rc;
    }
    if (a.token_file == NULL) {
        return cli_usage_error(cmd, "--token-file is required");
    }
    if ((rc = connect_server(cmd, a.server, a.token_file, &a.tls, &c)) != CLI_OK) {
        return rc;
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
        if (orch_job_get(c, a.job, &job, &err) != 0) {
            orch_progress_done(&prog);
            rc = cli_fs_error(cmd, &err);
            goto out;
        }
        orch_progress_job(&prog, job);
        if (strcmp(orch_job_state(job), "running") != 0) {
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
                                   a.job, str_or(job, "phase", "running"));
            goto out;
        }
        orch_sleep_ms((long)(interval * 1000));
    }
    orch_progress_done(&prog);
    if (a.json) {
        rc = cli_print_json(cmd, json_incref(job));
    } else {
        print_job_text(job);
    }
    if (rc == CLI_OK && strcmp(orch_job_state(job), "done") != 0) {
        rc = cli_runtime_error(cmd, "job %s %s: %s", a.job, orch_job_state(job),
                               str_or(job, "error", "no reason given"));
    }
out:
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    json_decref(job);
    fs_httpc_free(c);
    return rc;
}

/* Download every file of a manifest into dir, verifying sha256. */
static int fetch_files(const char *cmd, fs_httpc *c, const char *prefix, const json_t *manifest,
                       const char *dir)
{
    const json_t *files = json_object_get(manifest, "files");
    struct fs_err err;
    size_t i;
    json_t *f;

    fs_err_clear(&err);
    if (!json_is_array(files)) {
        return cli_runtime_error(cmd, "the result manifest lists no files");
    }
    json_array_foreach(files, i, f)
    {
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *sha = json_string_value(json_object_get(f, "sha256"));
        char path[512], dest[4096];
        size_t n;
        int rc;

        n = name != NULL ? strlen(name) : 0;
        if (n < 5 || strcmp(name + n - 4, ".npy") != 0 || !orch_id_ok(name)) {
            return cli_runtime_error(cmd, "the result manifest names a bad file '%s'",
                                     name != NULL ? name : "");
        }
        snprintf(path, sizeof path, "%s/%s", prefix, name);
        if ((rc = cli_path_join(cmd, dest, sizeof dest, dir, name)) != CLI_OK) {
            return rc;
        }
        if (orch_download_verified(c, path, dest, sha, NULL, &err) != 0) {
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
        {"insecure", CLI_OPT_FLAG, NULL, &a.tls.insecure},
        {"insecure-http", CLI_OPT_FLAG, NULL, &a.tls.insecure_http},
        {"ca-file", CLI_OPT_VALUE, &a.ca_file, NULL},
    };
    const char *pos[1];
    size_t npos = 0;
    int help = 0, rc;
    struct fs_err err;
    fs_httpc *c = NULL;
    json_t *res = NULL;
    char path[64 + ORCH_ID_MAX];

    memset(&a, 0, sizeof a);
    fs_err_clear(&err);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        result_help();
        return CLI_OK;
    }
    a.tls.ca_file = a.ca_file;
    if ((rc = check_server(cmd, a.server)) != 0 || (rc = check_job(cmd, a.job)) != 0 ||
        (rc = cli_parse_format(cmd, a.format, &a.json)) != 0) {
        return rc;
    }
    if (a.token_file == NULL) {
        return cli_usage_error(cmd, "--token-file is required");
    }
    if ((rc = connect_server(cmd, a.server, a.token_file, &a.tls, &c)) != CLI_OK) {
        return rc;
    }
    snprintf(path, sizeof path, "/v1/jobs/%s/result", a.job);
    if (fs_httpc_json(c, "GET", path, NULL, &res, NULL, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    if (s_out != NULL && ((rc = cli_mkdir_p(cmd, s_out)) != CLI_OK ||
                          (rc = fetch_files(cmd, c, path, res, s_out)) != CLI_OK)) {
        goto out;
    }
    if (a.json) {
        rc = cli_print_json(cmd, json_incref(res));
    } else {
        const json_t *files = json_object_get(res, "files");
        size_t i;
        json_t *f;

        printf("%-12s %s\n", "algorithm", str_or(res, "algorithm", "?"));
        print_ids("survivors", json_object_get(res, "survivors"));
        print_ids("dropped", json_object_get(res, "dropped"));
        json_array_foreach(files, i, f)
        {
            printf("%-12s %s sha256 %s%s%s\n", "file", str_or(f, "name", "?"),
                   str_or(f, "sha256", "?"), s_out != NULL ? " -> " : "",
                   s_out != NULL ? s_out : "");
        }
    }
out:
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
        {"insecure", CLI_OPT_FLAG, NULL, &a.tls.insecure},
        {"insecure-http", CLI_OPT_FLAG, NULL, &a.tls.insecure_http},
        {"ca-file", CLI_OPT_VALUE, &a.ca_file, NULL},
    };
    const char *pos[1];
    size_t npos = 0, i;
    int help = 0, rc;
    struct fs_err err;
    fs_httpc *c = NULL;
    json_t *res = NULL, *j;

    memset(&a, 0, sizeof a);
    fs_err_clear(&err);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        list_help();
        return CLI_OK;
    }
    a.tls.ca_file = a.ca_file;
    if ((rc = check_server(cmd, a.server)) != 0 ||
        (rc = cli_parse_format(cmd, a.format, &a.json)) != 0) {
        return rc;
    }
    if (a.token_file == NULL) {
        return cli_usage_error(cmd, "--admin-token-file is required");
    }
    if ((rc = connect_server(cmd, a.server, a.token_file, &a.tls, &c)) != CLI_OK) {
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
    json_array_foreach(json_object_get(res, "jobs"), i, j)
    {
        printf("%s  %-12s %-8s %-19s parties %lld\n", str_or(j, "id", "?"),
               str_or(j, "algorithm", "?"), str_or(j, "state", "?"), str_or(j, "phase", "?"),
               (long long)json_integer_value(json_object_get(j, "parties")));
    }
out:
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
        {"insecure", CLI_OPT_FLAG, NULL, &a.tls.insecure},
        {"insecure-http", CLI_OPT_FLAG, NULL, &a.tls.insecure_http},
        {"ca-file", CLI_OPT_VALUE, &a.ca_file, NULL},
    };
    const char *pos[1];
    size_t npos = 0;
    int help = 0, rc;
    struct fs_err err;
    fs_httpc *c = NULL;
    json_t *res = NULL;
    char path[64 + ORCH_ID_MAX];

    memset(&a, 0, sizeof a);
    fs_err_clear(&err);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        cancel_help();
        return CLI_OK;
    }
    a.tls.ca_file = a.ca_file;
    if ((rc = check_server(cmd, a.server)) != 0 || (rc = check_job(cmd, a.job)) != 0 ||
        (rc = cli_parse_format(cmd, a.format, &a.json)) != 0) {
        return rc;
    }
    if (a.token_file == NULL) {
        return cli_usage_error(cmd, "--admin-token-file is required");
    }
    if ((rc = connect_server(cmd, a.server, a.token_file, &a.tls, &c)) != CLI_OK) {
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
        printf("job %s: %s\n", a.job, str_or(res, "phase", "cancelled"));
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
