/* The command line of `fedsvd local` that every algorithm family shares:
 * which family runs, the repeatable --party/--fail-party/--input options,
 * the --fail-party phases, and the per-party arrays they fill. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "local.h"
#include "orch.h"
#include "proto/jobsm.h"

#define NOPTS(a) (sizeof(a) / sizeof((a)[0]))

static const char *const k_phases[LOCAL_FAIL_POWER] = {
    "advertise_keys", "share_keys",     "masked_input", "consistency",
    "unmasking",      "noise_exchange", "plain_upload"};

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

/* ---- argument handling ---- */

int local_is_power(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--algorithm") == 0 && orch_power_algorithm(argv[i + 1])) {
            return 1;
        }
    }
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--algorithm=", 12) == 0 && orch_power_algorithm(argv[i] + 12)) {
            return 1;
        }
    }
    return 0;
}

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
    L->status = calloc(1, sizeof *L->status);
    L->result = calloc(1, sizeof *L->result);
    L->parts = json_array();
    L->masker_bytes_in = L->masker_bytes_out = -1;
    if (L->files == NULL || L->part_ids == NULL || L->agents == NULL || L->fail_at == NULL ||
        L->fail_round == NULL || L->sizes == NULL || L->status == NULL || L->result == NULL ||
        L->parts == NULL) {
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

/* ---- --test-mask-seed HEX ---- */

int local_parse_test_seed(struct local *L, const char *hex)
{
    size_t n = strlen(hex);

    if (!L->fed) {
        return cli_usage_error(L->cmd, "--test-mask-seed: only fedsvd and fedpca use a "
                                       "masking-server (a secure sum is exact without it)");
    }
    if (n < 2 || n > 128 || n % 2 != 0 || strspn(hex, "0123456789abcdefABCDEF") != n) {
        return cli_usage_error(L->cmd, "--test-mask-seed: expected an even number (2..128) of "
                                       "hex digits");
    }
    memcpy(L->test_mask_seed, hex, n + 1);
    fprintf(stderr,
            "fedsvd %s: --test-mask-seed: INSECURE deterministic masks, for reproducibility "
            "tests only\n",
            L->cmd);
    return CLI_OK;
}

/* ---- --restart SERVICE@PHASE[:R] ---- */

int local_take_restarts(const char *cmd, int *argc, char **argv, const char **specs, size_t *n)
{
    int out = 1;

    *n = 0;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;

        if (strcmp(a, "--") == 0) {
            while (i < *argc) {
                argv[out++] = argv[i++];
            }
            break;
        }
        if (strncmp(a, "--restart=", 10) == 0) {
            val = a + 10;
        } else if (strcmp(a, "--restart") == 0) {
            if (i + 1 >= *argc || strncmp(argv[i + 1], "--", 2) == 0) {
                return cli_usage_error(cmd, "option '--restart' needs a value");
            }
            val = argv[++i];
        } else {
            argv[out++] = argv[i];
            continue;
        }
        if (*n >= LOCAL_MAX_RESTARTS) {
            return cli_usage_error(cmd, "more than %d --restart options", LOCAL_MAX_RESTARTS);
        }
        specs[(*n)++] = val;
    }
    *argc = out;
    argv[out] = NULL;
    return CLI_OK;
}

/* 1 when a job of algorithm a passes through phase ph. */
static int algo_enters(enum fs_algo a, enum fs_job_phase ph)
{
    switch (ph) {
    case FS_JOB_ADVERTISE:
    case FS_JOB_SHARE_KEYS:
        return 1;
    case FS_JOB_EXPONENTS:
    case FS_JOB_FACTORIZING:
        return fs_algo_is_fedsvd(a);
    case FS_JOB_MASKED_INPUT:
    case FS_JOB_CONSISTENCY:
    case FS_JOB_UNMASKING:
        return a != FS_ALGO_FEDPOWER;
    case FS_JOB_NOISE_EXCHANGE:
        return a == FS_ALGO_FEDPOWER_UTILITY;
    case FS_JOB_PLAIN_UPLOAD:
        return a == FS_ALGO_FEDPOWER;
    default:
        return 0;
    }
}

/* The phases algorithm a passes through, for a message ("share_keys, ..."). */
static void algo_phase_list(enum fs_algo a, char *buf, size_t cap)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int ph = FS_JOB_ADVERTISE; ph < FS_JOB_DONE; ph++) {
        if (algo_enters(a, (enum fs_job_phase)ph) && len < cap) {
            int w = snprintf(buf + len, cap - len, "%s%s", len > 0 ? ", " : "",
                             fs_job_phase_name((enum fs_job_phase)ph));
            len += w > 0 ? (size_t)w : 0;
        }
    }
}

/* masking-server@keys[:P] (s, colon: the ':' of P or NULL) into *r: its
 * stop point, once party P's masks (the first party's) were sent. */
static int parse_keys(struct local *L, const char *s, const char *colon, struct local_restart *r)
{
    size_t party = 0;
    char what[64];
    int rc;

    if (!r->masker) {
        return cli_usage_error(L->cmd, "--restart %s: PHASE keys is for the masking-server only",
                               s);
    }
    r->keys = 1;
    r->party = -1;
    r->phase = FS_JOB_ADVERTISE; /* first on the timeline: the keys restarts in the order given */
    if (colon == NULL) {
        return CLI_OK;
    }
    snprintf(what, sizeof what, "--restart %s: the party P of keys:P", s);
    if ((rc = cli_parse_size(L->cmd, what, colon + 1, 1, L->k, &party)) != CLI_OK) {
        return rc;
    }
    r->party = (long)party;
    return CLI_OK;
}

/* 0 when every aggregation needs every input (no --allow-dropouts, secure-sum
 * aside): the secure aggregation then has no consistency round. */
static int enters_consistency(const struct local *L, enum fs_algo algo)
{
    struct fs_jobsm_config c = {.algo = algo, .allow_dropouts = L->allow_dropouts};

    return !fs_jobsm_all_inputs(&c);
}

/* One SERVICE@PHASE[:R] into *r (L->k parties, algorithm algo). */
static int parse_restart(struct local *L, enum fs_algo algo, const char *s, struct local_restart *r)
{
    const char *cmd = L->cmd;
    const char *at = strchr(s, '@');
    const char *colon = at != NULL ? strchr(at + 1, ':') : NULL;
    char svc[32], phase[32], list[256];
    size_t len;

    memset(r, 0, sizeof *r);
    r->agent = -1;
    r->round = -1;
    if (strlen(s) >= sizeof r->spec || at == NULL || at == s || (size_t)(at - s) >= sizeof svc) {
        return cli_usage_error(cmd, "--restart: expected SERVICE@PHASE[:R], got '%s'", s);
    }
    snprintf(r->spec, sizeof r->spec, "%s", s);
    len = (size_t)(at - s);
    memcpy(svc, s, len);
    svc[len] = '\0';
    len = colon != NULL ? (size_t)(colon - at - 1) : strlen(at + 1);
    if (len == 0 || len >= sizeof phase) {
        return cli_usage_error(cmd, "--restart %s: expected SERVICE@PHASE[:R]", s);
    }
    memcpy(phase, at + 1, len);
    phase[len] = '\0';
    if (strcmp(svc, "masking-server") == 0) {
        if (!fs_algo_is_fedsvd(algo)) {
            return cli_usage_error(cmd, "--restart %s: only fedsvd and fedpca use a masking-server",
                                   s);
        }
        r->masker = 1;
    } else if (strncmp(svc, "agent-", 6) == 0 || strncmp(svc, "client-agent-", 13) == 0) {
        size_t idx = 0;
        char what[64];
        int rc;

        snprintf(what, sizeof what, "--restart %s: the agent number", svc);
        if ((rc = cli_parse_size(cmd, what, svc[0] == 'c' ? svc + 13 : svc + 6, 1, L->k, &idx)) !=
            CLI_OK) {
            return rc;
        }
        r->agent = (int)idx - 1;
    } else if (strncmp(svc, "aggregation-shard-", 18) == 0) {
        size_t idx = 0;
        char what[64];
        int rc;

        if (L->shards <= 1) {
            return cli_usage_error(cmd, "--restart %s: shard peers run only with --shards S", s);
        }
        snprintf(what, sizeof what, "--restart %s: the shard number", svc);
        if ((rc = cli_parse_size(cmd, what, svc + 18, 1, L->shards - 1, &idx)) != CLI_OK) {
            return rc;
        }
        r->shard = (int)idx;
    } else if (strcmp(svc, "aggregation-server") != 0) {
        return cli_usage_error(cmd,
                               "--restart %s: SERVICE must be aggregation-server, "
                               "masking-server or client-agent-I (or agent-I; I = 1..%zu), or "
                               "with --shards S aggregation-shard-N (N = 1..S-1), got '%s'",
                               s, L->k, svc);
    }
    algo_phase_list(algo, list, sizeof list);
    /* begin: the aggregation server's key sharing closed (logged), its
     * aggregation 0 not begun yet (its stop point) */
    if (strcmp(phase, "begin") == 0) {
        if (r->agent >= 0 || r->masker || r->shard > 0 || colon != NULL) {
            return cli_usage_error(cmd,
                                   "--restart %s: PHASE begin is for the aggregation-server "
                                   "only, without :R (it comes once, before aggregation 0)",
                                   s);
        }
        r->phase = FS_JOB_SHARE_KEYS;
        r->begin = 1;
        return CLI_OK;
    }
    if (strcmp(phase, "keys") == 0) {
        return parse_keys(L, s, colon, r);
    }
    if (fs_job_phase_parse(phase, &r->phase) != 0 || r->phase > FS_JOB_DONE) {
        return cli_usage_error(cmd, "--restart %s: unknown phase '%s' (%s passes through %s)", s,
                               phase, fs_algo_name(algo), list);
    }
    /* done: the aggregation server's end logged but not yet stored (its stop point) */
    if (r->phase == FS_JOB_DONE && (r->agent >= 0 || r->masker || r->shard > 0)) {
        return cli_usage_error(cmd, "--restart %s: PHASE done is for the aggregation-server only",
                               s);
    }
    if (r->phase != FS_JOB_DONE && !algo_enters(algo, r->phase)) {
        return cli_usage_error(cmd, "--restart %s: a %s job never enters %s (it passes through %s)",
                               s, fs_algo_name(algo), phase, list);
    }
    if (r->phase == FS_JOB_CONSISTENCY && !enters_consistency(L, algo)) {
        return cli_usage_error(cmd,
                               "--restart %s: a %s job enters consistency only with "
                               "--allow-dropouts",
                               s, fs_algo_name(algo));
    }
    if (colon != NULL) {
        size_t round = 0;
        char what[64];
        int rc;

        snprintf(what, sizeof what, "--restart %s: the aggregation R", s);
        if ((rc = cli_parse_size(cmd, what, colon + 1, 0, 1000000, &round)) != CLI_OK) {
            return rc;
        }
        if ((r->phase == FS_JOB_ADVERTISE || r->phase == FS_JOB_SHARE_KEYS) && round != 0) {
            return cli_usage_error(cmd, "--restart %s: %s happens once, in aggregation 0", s,
                                   phase);
        }
        if (r->phase == FS_JOB_FACTORIZING || r->phase == FS_JOB_DONE) {
            return cli_usage_error(cmd,
                                   "--restart %s: %s happens once, after the last "
                                   "aggregation: no :R",
                                   s, phase);
        }
        r->round = (long)round;
    }
    return CLI_OK;
}

int local_parse_restarts(struct local *L, enum fs_algo algo, const char **specs, size_t n)
{
    if (n == 0) {
        return CLI_OK;
    }
    L->restarts = calloc(n, sizeof *L->restarts);
    if (L->restarts == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        int rc = parse_restart(L, algo, specs[i], &L->restarts[i]);

        if (rc != CLI_OK) {
            return rc;
        }
        L->nrestarts++;
    }
    return CLI_OK;
}

int local_check_restart_exchanges(struct local *L, uint32_t exchanges)
{
    for (size_t i = 0; L->fail_at != NULL && L->fail_round != NULL && i < L->k; i++) {
        if (L->fail_at[i] >= 0 && strcmp(k_phases[L->fail_at[i]], "noise_exchange") == 0 &&
            L->fail_round[i] >= 0 && (uint64_t)L->fail_round[i] >= (uint64_t)exchanges) {
            return cli_usage_error(L->cmd,
                                   "--fail-party %zu:noise_exchange:%d: without --allow-dropouts "
                                   "the job's one noise exchange is in aggregation 0 (every sync "
                                   "reuses it)",
                                   i + 1, L->fail_round[i]);
        }
    }
    for (size_t i = 0; i < L->nrestarts; i++) {
        const struct local_restart *r = &L->restarts[i];

        if (r->phase == FS_JOB_NOISE_EXCHANGE && r->round >= 0 &&
            (uint64_t)r->round >= (uint64_t)exchanges) {
            return cli_usage_error(L->cmd,
                                   "--restart %s: without --allow-dropouts the job's one noise "
                                   "exchange is in aggregation 0 (every sync reuses it)",
                                   r->spec);
        }
    }
    return CLI_OK;
}

int local_check_restart_rounds(struct local *L, uint32_t aggregations)
{
    for (size_t i = 0; i < L->nrestarts; i++) {
        const struct local_restart *r = &L->restarts[i];

        if (r->round >= 0 && (uint64_t)r->round >= (uint64_t)aggregations) {
            return cli_usage_error(L->cmd, "--restart %s: the job has %u aggregation%s (R = 0..%u)",
                                   r->spec, aggregations, aggregations == 1 ? "" : "s",
                                   aggregations > 0 ? aggregations - 1 : 0);
        }
    }
    return CLI_OK;
}
