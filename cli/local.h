/* The machinery of `fedsvd local` that the algorithm families share, used
 * by cmd_local.c (secure-sum, fedsvd, fedpca), cmd_local_power.c (the power
 * methods) and cmd_lsa.c: child processes of the services on loopback ports,
 * the run's temporary root with its tokens, the job's agents and
 * participations, and the pieces of the summary (local.c); the shared
 * command line (local_args.c) and usage text (local_help.c). Every int
 * function returns a CLI_* exit status after printing its one-line
 * diagnostic (cli.h), unless it says otherwise. */
#ifndef FS_CLI_LOCAL_H
#define FS_CLI_LOCAL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "cli.h"
#include "jobs.h"
#include "net/auth.h"
#include "orch.h"
#include "phase.h"

#define LOCAL_MAX_PARTIES  100
#define LOCAL_PATH         4096
#define LOCAL_POLL_MS      50  /* between two polls of the job or the agents */
#define LOCAL_LONG_POLL_MS 500 /* the longest wait of a long poll of the job */

/* --fail-party phases: the first LOCAL_FAIL_SECAGG are those of every
 * secure sum; the power methods add noise_exchange and plain_upload. */
#define LOCAL_FAIL_SECAGG 5
#define LOCAL_FAIL_POWER  7

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
    int killed;       /* 1 when it needed SIGKILL */
    int attempts;     /* spawns so far */
    fs_httpc *http;   /* client with the admin / operator token */
    long long hwm_kb; /* peak resident memory (VmHWM) read before stopping; -1 unknown */
    double cpu_s;     /* user + system CPU seconds read before stopping; -1 unknown */
};

/* --restart SERVICE@PHASE[:R]: a service killed (SIGKILL) when the job
 * reaches PHASE (of aggregation R) and started again on its port with its
 * data directory (local.c). */
#define LOCAL_MAX_RESTARTS 32
#define LOCAL_RESTART_SPEC 96

struct local_restart {
    char spec[LOCAL_RESTART_SPEC]; /* as given */
    int agent;                     /* 0-based agent index, or -1 */
    int masker;                    /* 1: the masking-server (agent -1, masker 0: the server) */
    int shard; /* 1..S-1: the shard peer aggregation-shard-N (--shards), else 0 */
    enum fs_job_phase phase;
    int begin;  /* PHASE begin (server only): share_keys closed, aggregation 0 not begun */
    int keys;   /* PHASE keys[:P] (masking-server only): a party's masks sent (its stop point) */
    long party; /* keys:P: the party P (1-based), or -1: the first party served */
    long round; /* the aggregation R, or -1: the first time PHASE is entered */
    int fired;  /* 1 once the service was killed */
    enum fs_job_phase killed_phase; /* the phase the job was seen in at the kill */
    uint32_t killed_round;
    double after_s;  /* seconds from the agents' joining (t_created) to the kill */
    double at_epoch; /* the kill, seconds since the epoch */
    double down_s;   /* from the kill until the service answered /readyz again */
};

/* Everything one run holds; freed by local_free. */
struct local {
    const char *cmd;
    size_t k;
    char **files;       /* absolute paths, k of them */
    const char **shown; /* as given on the command line */
    int *fail_at;       /* index into k_phases, or -1 */
    int *fail_round;    /* power methods: the aggregation of fail_at, or -1 (any: the first) */
    size_t thr;
    int allow_low_threshold; /* --allow-low-threshold: thr below floor(k/2)+1 accepted */
    const char *s_secagg;    /* --secagg full|plus, NULL: the server's default */
    int secagg;              /* enum fs_job_secagg parsed from it (AUTO when absent) */
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
    char **part_ids;              /* participation id per agent */
    json_t *job;                  /* last Job seen */
    struct fs_job_status *status; /* the same, decoded (api/jobdoc.h) */
    json_t *parts;                /* array: last Participation per agent (or null) */
    json_t *manifest;             /* the job's Result (GET /v1/jobs/{job}/result) */
    struct fs_job_result *result; /* the same, decoded, when have_result */
    int have_result;
    char sum_sha[65];
    double t_start, t_ready, t_created, t_finished;
    double t_collected, t_stopped; /* fedsvd/fedpca: results copied, services stopped */
    struct orch_progress prog;
    /* fedsvd / fedpca */
    int fed, pca; /* algorithm fedsvd / fedpca */
    int features; /* partition features (else samples) */
    int standardize, allow_dropouts;
    size_t ksvd;           /* --k, 0 = thin */
    size_t block;          /* --block-size, 0 = default */
    int randomized;        /* --method randomized */
    size_t *sizes;         /* rows (samples) or cols (features) of each party */
    size_t n_rows, n_cols; /* the pooled matrix */
    struct proc masker;
    char maskset[ORCH_ID_MAX];
    json_t *party_manifests; /* array: each done party's result manifest (or null) */
    double masker_bytes_in, masker_bytes_out; /* from its /metrics; -1 unknown */
    json_t *shared_check;                     /* {"file": max |difference| between parties} */
    double t_mask;                            /* seconds to create the mask set */
    json_t *verify;                           /* --verify: the comparison with a centralised SVD */
    char (*party_keys)[ORCH_FPR_LEN + 1];     /* each agent's identity fingerprint (GET
                                                 /v1/identity), read once the agents are up */
    struct local_restart *restarts;           /* --restart, nrestarts of them (NULL when none) */
    size_t nrestarts;
    /* --test-mask-seed HEX, "" when none: INSECURE deterministic masks for
     * reproducibility tests, handed to the masking server */
    char test_mask_seed[132];
    /* --shards S (local_shards.c): S - 1 peers beside the server, one peer token */
    size_t shards;      /* 0 or 1: one aggregation server */
    struct proc *peers; /* shards - 1 of them, NULL when not sharded */
    char peer_tok[FS_AUTH_TOKEN_GEN_LEN + 1];
    char peer_file[LOCAL_PATH];
};

/* Signal handlers of a run (SIGINT, SIGTERM, SIGHUP set a stop flag that
 * every wait loop checks); the previous ones are restored by local_signals_restore. */
struct local_signals {
    struct sigaction old_int, old_term, old_hup;
    int on;
};

void local_signals_install(struct local_signals *s);
void local_signals_restore(struct local_signals *s);

/** The signal that stopped the run (SIGINT, SIGTERM, SIGHUP), or 0. */
int local_interrupted(void);

/** The usage text of `fedsvd local` (all algorithms; local_help.c). */
void local_help(void);

/* ---- the command line (local_args.c) ---- */

/** 1 when argv's --algorithm names a power method (cmd_local_power, else cmd_local). */
int local_is_power(int argc, char **argv);

/** Party i's fail_at as the agent takes it ("masked_input", "masked_input:2"), or null. */
json_t *local_fail_json(const struct local *L, size_t i);

/** Take every --party/--fail-party/--input (repeatable) out of argv; the rest goes to rest[]. */
int local_split_repeated(const char *cmd, int argc, char **argv, const char **party, size_t *nparty,
                         const char **fail, size_t *nfail, const char **input, size_t *ninput,
                         char **rest, int *nrest);

/**
 * local_split_repeated, then cli_parse of the rest (rest: argc + 1 entries).
 * --help anywhere sets *help and wins over a bad option (CLI_OK then).
 */
int local_parse_args(const char *cmd, int argc, char **argv, const struct cli_opt *opts,
                     size_t nopts, const char **party, size_t *nparty, const char **fail,
                     size_t *nfail, const char **input, size_t *ninput, char **rest, int *help);

/** The per-party arrays of L (L->k parties) and the --fail-party values (nphases allowed). */
int local_alloc(struct local *L, const char **fail, size_t nfail, size_t nphases);

/**
 * "I:PHASE" into fail_at[I-1]; PHASE among the first nphases of
 * local_fail_json. With fail_round (not NULL) also "I:PHASE:R" (R into
 * fail_round[I-1], -1 without), for the phases of every aggregation.
 */
int local_parse_fail(const char *cmd, const char *s, size_t k, size_t nphases, int *fail_at,
                     int *fail_round);

/**
 * Take every --restart SPEC (repeatable) out of argv, in place: *argc
 * shrinks, specs[] (LOCAL_MAX_RESTARTS entries) gets the values, borrowed
 * from argv. Stops at "--".
 */
int local_take_restarts(const char *cmd, int *argc, char **argv, const char **specs, size_t *n);

/**
 * Check the --restart specs for a job of algorithm algo with L->k parties
 * (service, phase the algorithm enters, R) into L->restarts.
 */
int local_parse_restarts(struct local *L, enum fs_algo algo, const char **specs, size_t n);

/**
 * The job's aggregations are known (it was just created): each --restart
 * R must be one of them. @return CLI_OK, or CLI_EUSAGE after the reason.
 */
int local_check_restart_rounds(struct local *L, uint32_t aggregations);

/** Each --restart and --fail-party at noise_exchange:R against the job's
 * noise exchanges (aggregations 0..exchanges-1). Exit status 2 otherwise. */
int local_check_restart_exchanges(struct local *L, uint32_t exchanges);

/**
 * --test-mask-seed HEX (fedsvd/fedpca; L->fed set): checked (2..128 hex
 * digits, an even number) into L->test_mask_seed, with a warning on stderr
 * that the masks are deterministic. @return CLI_OK or CLI_EUSAGE.
 */
int local_parse_test_seed(struct local *L, const char *hex);

/** summary.json's "restarts" (new reference): one entry per --restart. */
json_t *local_restarts_json(const struct local *L);

/** The text summary's lines of the --restart options (stdout; none without). */
void local_print_restarts(const struct local *L);
/** Kill and restart the services whose --restart phase the job reached
 * (local_restart.c); *pause gets the next poll's wait in ms, -1 when no
 * restart is pending that the job's polls must time. A restart of the
 * aggregation server is not timed by polls: see local_fire_stopped. */
int local_fire_restarts(struct local *L, long *pause);

/* The --restart options placed by the services' testing stop points
 * (lib/net/teststop.h): the aggregation server's (but at
 * waiting_for_parties), every agent's, and the masking server's at keys.
 * The service is started with FEDSVD_TEST_STOP_AT_PHASE set to the point
 * of its next such restart (PHASE[:R], or keys[:P]), holds there and
 * writes the marker LOCAL_STOP_MARKER in its data directory; the restart
 * fires when the marker is there, and the service starts again with the
 * point of its next one, if any. */
#define LOCAL_STOP_ENV    "FEDSVD_TEST_STOP_AT_PHASE"
#define LOCAL_STOP_MARKER "test-stop-point"

/** Fire each --restart whose stop point was reached (its service's marker
 *  is there); nothing when none was. */
int local_fire_stopped(struct local *L);
/** Fire the server's --restart at waiting_for_parties: the job was just
 * created (and stored) and no agent has joined it yet. */
int local_fire_created(struct local *L);
/** Sleep ms milliseconds, less when a stop point is reached. */
void local_pause(const struct local *L, long ms);

/* ---- the job's polls and the restarts' timeline (local_poll.c) ---- */

/** Position of (phase, aggregation r) on the timeline of a job of n
 * aggregations: per aggregation exponents, masked input (or the plain
 * upload), consistency, unmasking, noise exchange; factorizing after the
 * last; done (and anything else) UINT64_MAX. */
uint64_t local_timeline_pos(enum fs_job_phase ph, uint32_t r, uint32_t n);
/** Where restart r fires: its phase at aggregation R (the first time: 0). */
uint64_t local_restart_target(const struct local_restart *r, uint32_t n);
/** 1 for a restart of the aggregation server (not a --shards peer). */
int local_restart_of_server(const struct local_restart *r);
/** 1 for a restart placed by its service's testing stop point. */
int local_restart_by_stop(const struct local_restart *r);
/** The service (a struct proc of L) restart r kills. */
struct proc *local_restart_proc(struct local *L, const struct local_restart *r);
/** p's next --restart placed by its stop point (the first on the job's
 *  timeline), or NULL. */
struct local_restart *local_stop_restart(const struct local *L, const struct proc *p);
/** Its stop point ("masked_input:2", "keys:1") into buf. @return 1, or 0 when none. */
int local_stop_at(const struct local *L, const struct proc *p, char *buf, size_t cap);
/** 1 while a --restart waits for a stop point. */
int local_stop_pending(const struct local *L);
/** 1 when a service with a pending stop point has its marker in its data directory. */
int local_stop_marker(const struct local *L);

/**
 * GET the job into *out (new reference) and L->status. wait_ms > 0: a long
 * poll, answered once the job leaves the phase and aggregation of
 * L->status (or after wait_ms). limit_ms > 0: the request's limit beyond
 * wait_ms (else the low-speed limit only). @return 0 or an FS_E* code.
 */
FS_WUR int local_job_poll(struct local *L, long wait_ms, long limit_ms, json_t **out,
                          struct fs_err *err);
/** 1 when a --restart waits for a stop point and a marker is there. */
int local_stop_reached(const struct local *L);
/** Say on stderr which --restart never fired. */
void local_warn_unfired(const struct local *L);

/* ---- child processes (local_proc.c) ---- */

#define SPAWN_ATTEMPTS  5    /* starts of a service whose port was taken meanwhile */
#define READY_TIMEOUT_S 30.0 /* seconds a started service has to answer /readyz */

int local_free_ports(size_t n, uint16_t *ports);
void local_stop_all(struct proc **ps, size_t n, double grace_s);
int local_copy_file(const char *from, const char *to);
int local_proc_running(struct proc *p);
void local_describe_status(const struct proc *p, char *buf, size_t cap);
int local_start_proc(struct local *L, struct proc *p, uint16_t port, int is_server);
/** 1 when p is an aggregation or masking server of the run (--shards peers included). */
int local_is_server_proc(const struct local *L, const struct proc *p);
int local_wait_ready(struct local *L, struct proc **ps, size_t n);

/* ---- setup (local.c from here on) ---- */

/** Write summary (if not NULL) as L->out/summary.json; returns rc, or the write's failure. */
int local_write_summary(struct local *L, json_t *summary, int rc);

int local_find_bin_dir(struct local *L, const char *given);

/** The temporary root (under TMPDIR), the admin and operator tokens and their 0600 files. */
int local_setup_root(struct local *L);

/** Paths of p (bin from L->bin_dir, data dir and log under the root). */
int local_init_proc(struct local *L, struct proc *p, const char *name, const char *bin);

/** Start the server (and masker when L->fed) and the L->k agents; wait until all are ready. */
int local_start_services(struct local *L);

/**
 * Pin the parties of the job about to be created: spec gets party_keys,
 * the identity each agent of this run reported (agent i is party i), so
 * that the job runs exactly as a job with pins collected out of band does.
 */
int local_pin_spec(struct local *L, struct fs_job_spec *spec);

/**
 * POST /v1/jobs: spec (the rest filled in by the caller) pinned to this
 * run's agents; L->job_id and *invitations (new reference, L->k of them)
 * from the reply; *sent (when not NULL) the JSON that was posted.
 */
int local_post_job(struct local *L, struct fs_job_spec *spec, json_t **sent, json_t **invitations);

/** Remove result files of an earlier run from L->out (and its party-<i>/ directories). */
void local_remove_stale(struct local *L);

/* ---- the job ---- */

/** local_start_services, then the clock and the progress line; *error says what failed. */
int local_start(struct local *L, char *error, size_t error_cap);

/**
 * Hand the invitations to the agents and follow the job to its end. A job
 * that failed is an error (exit 1) naming the server's reason, also in *error.
 */
int local_drive(struct local *L, const json_t *invs, char *error, size_t error_cap);

/** The invitation for party (1-based) in invs, by its "party" field, or NULL. */
const json_t *local_invitation_for(const json_t *invs, size_t party);

/** Hand each agent its invitation (by "party") and its file; records participation ids. */
int local_join_agents(struct local *L, const json_t *invs);

/** Poll the job (progress line) until it is no longer running; checks the children. */
int local_follow_job(struct local *L);

/** 1 when a Participation is done or failed. */
int local_part_terminal(const json_t *p);

/** 1 when a Participation is done. */
int local_part_done(const json_t *p);

/** One poll of every open participation; *open = how many are still not done or failed. */
int local_poll_agents(struct local *L, size_t *open);

/** Poll every participation until done/failed or wait_s seconds. */
int local_settle_agents(struct local *L, double wait_s);

/** GET the job's Result into L->manifest and L->result (have_result). */
int local_get_result(struct local *L);

/** 1 when party (1-based) is among the result's survivors. */
int local_in_result(const struct local *L, size_t party);

/** 1 when the last Job seen lists party (1-based) as dropped. */
int local_dropped(const struct local *L, size_t party);

/** Re-read the job's status (best effort). */
void local_refresh_job(struct local *L);

/** 1 with the sha256 (64 hex digits) of file `name` of a result document's "files" in sha. */
int local_manifest_sha(const json_t *m, const char *name, char sha[65]);

/* ---- the end ---- */

/** Read every child's peak memory, then stop them all (SIGTERM, then SIGKILL). */
void local_stop(struct local *L);

/** Copy the services' logs to L->out/logs/. */
void local_copy_logs(struct local *L);

/** Remove the temporary root (or say where it is with --keep). */
void local_drop_root(struct local *L);

void local_rm_rf(const char *path, int depth);
void local_free(struct local *L);

/* ---- --shards (local_shards.c) ---- */

/** The peers' paths and the shared 0600 peer token file (after local_setup_root). */
int local_shards_init(struct local *L);
/** Start the peers and wait until they are ready (before the coordinator starts). */
int local_shards_start(struct local *L);
/** Put the peers into ps (room for L->shards - 1): @return how many. */
size_t local_shards_procs(struct local *L, struct proc **ps);
/** A peer that died. */
int local_shards_check(struct local *L);
/** Copy the peers' logs into dir. */
void local_shards_copy_logs(struct local *L, const char *dir);
/** summary.json's "shards": [{"shard", "process", "rows", "peak_rss_bytes"}] (new reference). */
json_t *local_shards_json(const struct local *L);
void local_shards_free(struct local *L);

/* ---- summary pieces ---- */

long long local_read_hwm_kb(pid_t pid);
json_t *local_proc_json(const struct proc *p);
json_t *local_hwm_json(const struct proc *p);
/** Slowest party's seconds per phase, from L->party_manifests' "party_timings". */
json_t *local_party_phase_max(const struct local *L);
int local_id_in(const json_t *arr, size_t id);
/** A copy of obj[key] when test accepts it, else null. New reference. */
json_t *local_copy_if(const json_t *obj, const char *key, int (*test)(const json_t *));
int local_is_num(const json_t *v);
int local_is_str(const json_t *v);
int local_is_arr(const json_t *v);
int local_is_obj(const json_t *v);
#endif
