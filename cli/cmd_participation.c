/* fedsvd participation list|status|result: a site operator's view of its
 * client-agent's participations (the operator API, /v1/participations),
 * and the download of a participation's result files, each checked against
 * the size and SHA-256 the agent's result document lists. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "orch.h"
#include "participation.h"

#define NOPTS(a)  (sizeof(a) / sizeof((a)[0]))
#define LIST_SHOW 10 /* ids named when an ID must be chosen */

static void participation_help(void)
{
    printf("Usage: fedsvd participation SUBCOMMAND --agent URL --token-file F [OPTIONS]\n"
           "\n"
           "A site's participations in federated jobs, as its client-agent runs them\n"
           "(started with 'fedsvd join').\n"
           "\n"
           "Subcommands:\n"
           "  list       every participation of the agent: id, job, party, state, phase\n"
           "  status     one participation's state, phase, progress, bytes and error\n"
           "  result     download a finished participation's result files into a directory\n"
           "\n"
           "Run 'fedsvd participation SUBCOMMAND --help' for the options of each.\n");
}

static void sub_help(const char *sub)
{
    if (strcmp(sub, "list") == 0) {
        printf("Usage: fedsvd participation list --agent URL --token-file F [--format text|json]\n"
               "\n"
               "List the agent's participations (GET /v1/participations), newest first: id,\n"
               "job, party, algorithm, state (running, done, failed) and phase.\n");
    } else if (strcmp(sub, "status") == 0) {
        printf("Usage: fedsvd participation status --agent URL --token-file F [ID]\n"
               "                                   [--format text|json]\n"
               "\n"
               "Show one participation (GET /v1/participations/ID): state, phase, progress,\n"
               "bytes sent and received, the error of a failed one. ID may be left out when the\n"
               "agent has exactly one participation.\n");
    } else {
        printf("Usage: fedsvd participation result --agent URL --token-file F [ID] --out DIR\n"
               "                                   [--force] [--format text|json]\n"
               "\n"
               "Download every result file of a finished participation into DIR (created if\n"
               "needed): the agent's result document lists each file's name, size and SHA-256,\n"
               "and every download is checked against both before it is moved into place (a\n"
               "file that does not match is removed and the command fails). Files that already\n"
               "exist in DIR are not overwritten unless --force is given; nothing is downloaded\n"
               "then. ID may be left out when the agent has exactly one participation.\n");
    }
    printf("\nOptions:\n");
    orch_agent_help();
    if (strcmp(sub, "result") == 0) {
        printf("  --out DIR              the directory for the files\n"
               "  --force                replace files that exist in DIR\n");
    }
    printf("  --format F             text (default) or json (%s)\n"
           "  -h, --help             show this text\n",
           strcmp(sub, "result") == 0 ? "the result document, one line, with \"out\""
                                      : "the agent's document, one line");
}

int orch_participation_get(fs_httpc *c, const char *id, struct fs_participation *p, json_t **doc,
                           struct fs_err *err)
{
    char path[64 + FS_PARTICIPATION_ID_LEN];
    json_t *j = NULL;
    int rc;

    if (doc != NULL) {
        *doc = NULL;
    }
    snprintf(path, sizeof path, "/v1/participations/%s", id);
    rc = fs_httpc_json(c, "GET", path, NULL, &j, NULL, err);
    if (rc == 0 && (rc = fs_participation_decode(j, p, err)) != 0) {
        fs_err_prefix(err, "GET %s: ", path);
    }
    if (rc == 0 && doc != NULL) {
        *doc = j;
        j = NULL;
    }
    json_decref(j);
    return rc;
}

void orch_participation_print(const struct fs_participation *p)
{
    char sent[32], recv[32];

    printf("%-12s %s\n", "id", p->id);
    printf("%-12s %s\n", "job", p->job_id);
    printf("%-12s %u\n", "party", p->party);
    printf("%-12s %s\n", "algorithm", p->algorithm);
    printf("%-12s %s\n", "state", p->state);
    printf("%-12s %s\n", "phase", p->phase);
    printf("%-12s %.0f%%\n", "progress", p->progress * 100);
    printf("%-12s sent %s, received %s\n", "bytes",
           orch_bytes((double)p->bytes_sent, sent, sizeof sent),
           orch_bytes((double)p->bytes_received, recv, sizeof recv));
    printf("%-12s %s\n", "created", p->created_at);
    printf("%-12s %s\n", "updated", p->updated_at);
    if (p->error[0] != '\0') {
        printf("%-12s %s\n", "error", p->error);
    }
}

/* GET /v1/participations: the document and its borrowed array of n entries. */
static int get_list(const char *cmd, fs_httpc *c, json_t **out, const json_t **items, size_t *n)
{
    struct fs_err err;

    fs_err_clear(&err);
    if (fs_httpc_json(c, "GET", "/v1/participations", NULL, out, NULL, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    if (fs_participation_list_decode(*out, items, n, &err) != 0) {
        json_decref(*out);
        *out = NULL;
        return cli_runtime_error(cmd, "GET /v1/participations: %s", err.msg);
    }
    return CLI_OK;
}

/* "ID (state), ..." of the first LIST_SHOW participations into names. */
static int list_names(const char *cmd, const json_t *items, size_t n, char *names, size_t cap)
{
    size_t used = 0;

    names[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        struct fs_participation p;
        struct fs_err err;
        int w;

        if (fs_participation_decode(json_array_get(items, i), &p, &err) != 0) {
            return cli_runtime_error(cmd, "GET /v1/participations: participations[%zu]: %s", i,
                                     err.msg);
        }
        w = i >= LIST_SHOW
                ? snprintf(names + used, cap - used, ", ...")
                : snprintf(names + used, cap - used, "%s%s (%s)", i > 0 ? ", " : "", p.id, p.state);
        if (w < 0 || (size_t)w >= cap - used || i >= LIST_SHOW) {
            break;
        }
        used += (size_t)w;
    }
    return CLI_OK;
}

/* The participation to act on: given (checked), or the agent's only one. */
static int resolve_id(const char *cmd, fs_httpc *c, const char *given,
                      char id[FS_PARTICIPATION_ID_LEN + 1])
{
    json_t *doc = NULL;
    const json_t *items = NULL;
    char names[LIST_SHOW * 80] = "";
    size_t n = 0;
    int rc;

    if (given != NULL) {
        if (!fs_participation_id_valid(given)) {
            return cli_usage_error(cmd,
                                   "'%s' is not a participation id (\"p-\" and 32 hex digits, "
                                   "as 'fedsvd participation list' shows)",
                                   given);
        }
        snprintf(id, FS_PARTICIPATION_ID_LEN + 1, "%s", given);
        return CLI_OK;
    }
    if ((rc = get_list(cmd, c, &doc, &items, &n)) != CLI_OK) {
        return rc;
    }
    if (n == 1) {
        struct fs_participation p;
        struct fs_err err;
        rc = fs_participation_decode(json_array_get(items, 0), &p, &err) == 0
                 ? (snprintf(id, FS_PARTICIPATION_ID_LEN + 1, "%s", p.id), CLI_OK)
                 : cli_runtime_error(cmd, "GET /v1/participations: %s", err.msg);
    } else if (n == 0) {
        rc = cli_runtime_error(cmd, "the agent has no participations (start one with 'fedsvd "
                                    "join')");
    } else if ((rc = list_names(cmd, items, n, names, sizeof names)) == CLI_OK) {
        rc = cli_usage_error(cmd, "the agent has %zu participations; give the ID of one: %s", n,
                             names);
    }
    json_decref(doc);
    return rc;
}

/* A clearer one-line error for the agent's 404. */
static int agent_error(const char *cmd, const char *id, const struct fs_err *err)
{
    if (err->code == FS_ENOTFOUND) {
        return cli_runtime_error(cmd,
                                 "no participation %s on this agent (see 'fedsvd participation "
                                 "list')",
                                 id);
    }
    return cli_fs_error(cmd, err);
}

static int part_list(const char *cmd, struct orch_agent_opts *o, fs_httpc *c)
{
    json_t *doc = NULL;
    const json_t *items = NULL;
    size_t n = 0;
    int rc;

    if ((rc = get_list(cmd, c, &doc, &items, &n)) != CLI_OK) {
        return rc;
    }
    if (o->json) {
        return cli_print_json(cmd, doc);
    }
    if (n == 0) {
        fprintf(stderr, "fedsvd %s: the agent has no participations\n", cmd);
    } else {
        printf("%-34s  %-34s  %5s  %-16s  %-7s  %s\n", "ID", "JOB", "PARTY", "ALGORITHM", "STATE",
               "PHASE");
    }
    for (size_t i = 0; i < n; i++) {
        struct fs_participation p;
        struct fs_err err;
        if (fs_participation_decode(json_array_get(items, i), &p, &err) != 0) {
            json_decref(doc);
            return cli_runtime_error(cmd, "GET /v1/participations: participations[%zu]: %s", i,
                                     err.msg);
        }
        printf("%-34s  %-34s  %5u  %-16s  %-7s  %s\n", p.id, p.job_id, p.party, p.algorithm,
               p.state, p.phase);
    }
    json_decref(doc);
    return CLI_OK;
}

static int part_status(const char *cmd, struct orch_agent_opts *o, fs_httpc *c, const char *given)
{
    char id[FS_PARTICIPATION_ID_LEN + 1];
    struct fs_participation p;
    struct fs_err err;
    json_t *doc = NULL;
    int rc;

    fs_err_clear(&err);
    if ((rc = resolve_id(cmd, c, given, id)) != CLI_OK) {
        return rc;
    }
    if (orch_participation_get(c, id, &p, &doc, &err) != 0) {
        return agent_error(cmd, id, &err);
    }
    if (o->json) {
        return cli_print_json(cmd, doc);
    }
    json_decref(doc);
    orch_participation_print(&p);
    return CLI_OK;
}

/* Download one file to a hidden temporary in dir, check its size and
 * SHA-256, then move it to dir/name (link: never over an existing file
 * unless force, which renames over it). */
static int fetch_one(const char *cmd, fs_httpc *c, const char *id, const char *dir,
                     const struct fs_result_file *f, int force)
{
    char path[128 + FS_PARTICIPATION_ID_LEN], dest[4096], tmp[4096], tname[96];
    uint64_t bytes = 0;
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if (snprintf(path, sizeof path, "/v1/participations/%s/result/%s", id, f->name) >=
            (int)sizeof path ||
        snprintf(tname, sizeof tname, ".%s.%ld.part", f->name, (long)getpid()) >=
            (int)sizeof tname) {
        return cli_runtime_error(cmd, "%s: name too long", f->name);
    }
    if ((rc = cli_path_join(cmd, dest, sizeof dest, dir, f->name)) != CLI_OK ||
        (rc = cli_path_join(cmd, tmp, sizeof tmp, dir, tname)) != CLI_OK) {
        return rc;
    }
    if (orch_download_verified(c, path, tmp, f->sha256, &bytes, &err) != 0) {
        unlink(tmp);
        return cli_runtime_error(cmd, "%s: %s (nothing written)", f->name, err.msg);
    }
    if (bytes != f->bytes) {
        unlink(tmp);
        return cli_runtime_error(cmd, "%s: got %llu bytes, the result document says %llu", f->name,
                                 (unsigned long long)bytes, (unsigned long long)f->bytes);
    }
    rc = force ? rename(tmp, dest) : link(tmp, dest);
    if (rc != 0 && !force && errno != EEXIST) {
        struct stat sb; /* no hard links on this file system: checked free, rename */
        rc = lstat(dest, &sb) == 0 ? (errno = EEXIST, -1) : rename(tmp, dest);
    }
    if (rc != 0) {
        int e = errno;
        unlink(tmp);
        return cli_runtime_error(cmd, "%s: %s", dest,
                                 e == EEXIST ? "exists (give --force to replace it)" : strerror(e));
    }
    unlink(tmp); /* after link(); gone already after rename() */
    return CLI_OK;
}

/* Refuse before downloading anything when a file exists in dir (no --force). */
static int check_free(const char *cmd, const char *dir, const struct fs_result_file *files,
                      size_t n)
{
    char dest[4096];
    struct stat sb;
    int rc;

    for (size_t i = 0; i < n; i++) {
        if ((rc = cli_path_join(cmd, dest, sizeof dest, dir, files[i].name)) != CLI_OK) {
            return rc;
        }
        if (lstat(dest, &sb) == 0) {
            return cli_runtime_error(cmd,
                                     "%s exists: give --force to replace the result files in "
                                     "%s (nothing was downloaded)",
                                     dest, dir);
        }
    }
    return CLI_OK;
}

static int part_result(const char *cmd, struct orch_agent_opts *o, fs_httpc *c, const char *given,
                       const char *dir, int force)
{
    struct fs_result_file files[FS_RESULT_FILES_MAX];
    char id[FS_PARTICIPATION_ID_LEN + 1], path[64 + FS_PARTICIPATION_ID_LEN], dest[4096];
    struct fs_err err;
    json_t *doc = NULL;
    size_t n = 0;
    int rc;

    fs_err_clear(&err);
    if ((rc = resolve_id(cmd, c, given, id)) != CLI_OK) {
        return rc;
    }
    snprintf(path, sizeof path, "/v1/participations/%s/result", id);
    if (fs_httpc_json(c, "GET", path, NULL, &doc, NULL, &err) != 0) {
        return agent_error(cmd, id, &err);
    }
    if (fs_result_files_decode(doc, 1, files, &n, &err) != 0) {
        rc = cli_runtime_error(cmd, "GET %s: %s", path, err.msg);
    } else if ((rc = cli_mkdir_p(cmd, dir)) == CLI_OK && !force) {
        rc = check_free(cmd, dir, files, n);
    }
    for (size_t i = 0; i < n && rc == CLI_OK; i++) {
        rc = fetch_one(cmd, c, id, dir, &files[i], force);
    }
    if (rc == CLI_OK && o->json) {
        json_object_set_new(doc, "out", json_string(dir));
        return cli_print_json(cmd, doc);
    }
    for (size_t i = 0; i < n && rc == CLI_OK; i++) {
        rc = cli_path_join(cmd, dest, sizeof dest, dir, files[i].name);
        printf("%s  %llu bytes  sha256 %s  ok\n", dest, (unsigned long long)files[i].bytes,
               files[i].sha256);
    }
    json_decref(doc);
    return rc;
}

static int participation_sub(const char *sub, int argc, char **argv)
{
    char cmd[40];
    const char *s_out = NULL;
    struct orch_agent_opts ao;
    int force = 0, help = 0, rc;
    struct cli_opt opts[] = {
        ORCH_AGENT_OPTS(ao),
        {"out", CLI_OPT_VALUE, &s_out, NULL},
        {"force", CLI_OPT_FLAG, NULL, &force},
    };
    int is_result = strcmp(sub, "result") == 0;
    const char *pos[1] = {NULL};
    size_t npos = 0;
    fs_httpc *c = NULL;

    snprintf(cmd, sizeof cmd, "participation %s", sub);
    memset(&ao, 0, sizeof ao);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts) - (is_result ? 0 : 2), pos,
                   strcmp(sub, "list") == 0 ? 0 : 1, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        sub_help(sub);
        return CLI_OK;
    }
    if (is_result && s_out == NULL) {
        return cli_usage_error(cmd, "--out DIR is required (where the result files go)");
    }
    if ((rc = orch_agent_connect(cmd, &ao, 0, 2, &c)) != CLI_OK) {
        return rc;
    }
    if (strcmp(sub, "list") == 0) {
        rc = part_list(cmd, &ao, c);
    } else if (is_result) {
        rc = part_result(cmd, &ao, c, pos[0], s_out, force);
    } else {
        rc = part_status(cmd, &ao, c, pos[0]);
    }
    fs_httpc_free(c);
    return rc;
}

int cmd_participation(int argc, char **argv)
{
    static const char *const subs[] = {"list", "status", "result"};

    if (argc < 2) {
        fprintf(stderr, "fedsvd participation: missing SUBCOMMAND: list, status or result (see "
                        "'fedsvd participation --help')\n");
        return CLI_EUSAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        participation_help();
        return CLI_OK;
    }
    for (size_t i = 0; i < NOPTS(subs); i++) {
        if (strcmp(argv[1], subs[i]) == 0) {
            return participation_sub(subs[i], argc - 1, argv + 1);
        }
    }
    fprintf(stderr,
            "fedsvd participation: unknown subcommand '%s' (see 'fedsvd participation --help')\n",
            argv[1]);
    return CLI_EUSAGE;
}
