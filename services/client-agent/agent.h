/* client-agent: runs next to a data holder's file, joins jobs with an
 * invitation, drives the client side of the protocol over HTTP (it never
 * accepts connections from servers), and serves its operator the party's
 * results. Internal header shared by the service's modules:
 *
 *   main.c    configuration (flags, FEDSVD_* environment), startup, SIGTERM
 *   api.c     the operator API, health, metrics, openapi.yaml
 *   worker.c  one thread per participation, driving lib/proto/agent_driver
 *             and lib/proto/secagg over lib/net/http_client
 *   fed.c     the party side of fedsvd/fedpca (lib/proto/fedsvd, fedpca)
 *   power.c   the party side of the power-method jobs (lib/proto/fedpower)
 *   store.c   agent.db (SQLite, WAL): participations
 *   ledger.c  the privacy ledger (agent.db table privacy_ledger), GET /v1/privacy-ledger
 *   files.c   the data directory: identity key, per-participation files
 *
 * On-disk layout under --data-dir (directories 0700, files 0600):
 *   agent.db                          participations, privacy ledger
 *   identity.key                      Ed25519 private seed, 32 raw bytes
 *   participations/<id>/token         the party token while it runs
 *   participations/<id>/manifest.json the result manifest, once done
 *   participations/<id>/<name>.npy    the result files */
#ifndef FS_CLIENT_AGENT_H
#define FS_CLIENT_AGENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/err.h"
#include "core/fdio.h"
#include "dp/ledger.h"
#include "la/csr.h"
#include "la/mat.h"
#include "net/auth.h"
#include "net/http_server.h"
#include "net/log.h"
#include "proto/agent_msgs.h"
#include "proto/secagg.h"

#define AGENT_ID_MAX   40 /* "p-" + 32 hex digits, with the NUL */
#define AGENT_PATH_MAX 4096
#define AGENT_LIST_MAX 1000          /* participations returned by GET /v1/participations */
#define AGENT_MAX_BODY (1024 * 1024) /* POST /v1/participations */

struct agent_config {
    char host[256];
    uint16_t port;
    const char *data_dir;
    const char *operator_token_file;
    const char *openapi;  /* file served at /openapi.yaml, or NULL */
    const char *ca_file;  /* CA bundle for the servers, or NULL (system store) */
    const char *tls_cert; /* operator API over HTTPS when both are set */
    const char *tls_key;
    const char *port_file;      /* write the bound port here once listening, or NULL */
    int insecure;               /* do not verify the servers' TLS certificates */
    int insecure_http;          /* allow plain HTTP off loopback: server URLs and --listen */
    unsigned max_per_ip;        /* operator API: connections per client address, 0 = no cap */
    unsigned request_timeout_s; /* operator API: whole-request deadline, 0 = none */
    uint64_t max_elements;      /* largest dataset, rows * cols */
    unsigned max_running;       /* participations running at once */
    unsigned poll_ms;           /* job status polling interval */
    unsigned stall_s;           /* fail a participation whose job shows no change for this long */
    unsigned patience_s;        /* how long unreachable servers / 5xx are tolerated */
    enum fs_log_level log_level;
    struct fs_ledger_budget budget; /* privacy budget per dataset (budget.set = 0: none) */
};

/* One participation record (a row of agent.db). */
struct part_rec {
    char id[AGENT_ID_MAX];
    char job_id[FS_JOB_ID_MAX + 1];
    uint32_t party;
    char algorithm[FS_JOB_ALGO_MAX + 1];
    char state[16]; /* running | done | failed */
    char phase[32];
    double progress;
    uint64_t bytes_sent;
    uint64_t bytes_received;
    char error[FS_AGENT_ERROR_MAX]; /* "" = none */
    char created_at[32];
    char updated_at[32];
    char dataset_path[AGENT_PATH_MAX];
    char dataset_format[8];
    uint64_t rows, cols;
    char fail_at[32]; /* "" = none */
    char job_url[FS_JOB_URL_MAX + FS_JOB_ID_MAX + 16];
};

typedef struct agent_store agent_store;

struct agent;

/* A running participation, owned by its worker thread (detached). */
struct part {
    struct agent *ag;
    struct part_rec rec;         /* the worker's copy; persisted with store_progress */
    struct fs_agent_request req; /* holds the party token: wiped when the worker ends */
    fs_mat *data;                /* the validated dataset; wiped when the worker ends */
    fs_csr *sparse;              /* power-method jobs: a sparse (.mtx) dataset instead of data */
    char dir[AGENT_PATH_MAX];    /* data-dir/participations/<id> */
    atomic_int stop;             /* 0 run, 1 agent stopping, 2 cancelled by the operator */
    struct part *next;
};

struct agent {
    struct agent_config cfg;
    agent_store *db;
    fs_auth *auth;
    fs_http_server *http;
    pthread_mutex_t mu; /* parts, nrunning */
    pthread_cond_t cv;  /* signalled when a worker ends or the agent stops */
    struct part *parts;
    unsigned nrunning;
    atomic_int stopping;
    /* metrics */
    atomic_ullong bytes_sent;
    atomic_ullong bytes_received;
    atomic_ullong started;
    atomic_ullong http_by_class[6]; /* index status/100 (0 = no status) */
};

/* ---- store.c ---- */

/**
 * Open (create) data-dir/agent.db in WAL mode and mark participations left
 * running by a previous process as failed ("agent restarted during the
 * protocol"): the SecAgg client state lives in memory only.
 * @param n_marked how many were marked (may be NULL).
 */
FS_WUR int store_open(const char *path, agent_store **out, unsigned *n_marked, struct fs_err *err);
void store_close(agent_store *s);
FS_WUR int store_insert(agent_store *s, const struct part_rec *r, const char *invitation_json,
                        struct fs_err *err);
/**
 * Write progress fields of a running participation (state, phase, progress,
 * bytes, error). Only a row still "running" changes, so the first terminal
 * state written wins (a cancel racing with completion).
 * @return 0, or FS_ESTATE when the row is no longer running.
 */
FS_WUR int store_progress(agent_store *s, const struct part_rec *r, struct fs_err *err);
/** @return 0 or FS_ENOTFOUND. */
FS_WUR int store_get(agent_store *s, const char *id, struct part_rec *r, struct fs_err *err);
/** Newest first, at most max. *out new array (free()). */
FS_WUR int store_list(agent_store *s, size_t max, struct part_rec **out, size_t *n,
                      struct fs_err *err);
/** 1 when a running or done participation of (job, party) exists, else 0; <0 on error. */
int store_exists_live(agent_store *s, const char *job_id, uint32_t party, struct fs_err *err);
/** Counts by state, for /metrics. */
FS_WUR int store_counts(agent_store *s, uint64_t *running, uint64_t *done, uint64_t *failed,
                        struct fs_err *err);
/** The shared connection, locked (ledger.c runs its own statements); pair with store_unlock. */
struct sqlite3 *store_lock(agent_store *s);
void store_unlock(agent_store *s);

/* ---- files.c ---- */

/** Create data-dir/identity.key (0600) unless present; check an existing one. */
FS_WUR int files_identity_ensure(const char *data_dir, struct fs_err *err);
/** Load the identity key (caller wipes it with fs_wipe after use). */
FS_WUR int files_identity_load(const char *data_dir, uint8_t sk[32], struct fs_err *err);
/** The identity's public key: what GET /v1/identity prints and jobs pin. */
FS_WUR int files_identity_public(const char *data_dir, uint8_t pk[32], struct fs_err *err);
/** SHA-256 of a file, streamed. */
FS_WUR int files_sha256(const char *path, uint8_t out[32], struct fs_err *err);
/** RFC 3339 UTC time now, "2026-11-23T10:00:00Z". */
void files_now(char out[32]);

/* ---- worker.c ---- */

/**
 * Start the worker thread of a participation (detached) and list it in
 * ag->parts. The caller holds ag->mu. Takes ownership of p on success (the
 * worker frees it); on failure p is still the caller's.
 */
FS_WUR int worker_start_locked(struct agent *ag, struct part *p, struct fs_err *err);

/** Free a participation never started (wipes token and data). Accepts NULL. */
void part_free(struct part *p);

/* ---- fed.c: fedsvd / fedpca party state (docs/wire-fedsvd.md) ---- */

struct fed_party;
struct fs_fedsvd_keys;
struct fs_maskkeys;

/**
 * The masking server's keys manifest (decoded) must be this party's keys of
 * this job: job id, mask set, party, parties, partition, pooled shape, own
 * range (checked before any key file is fetched).
 */
FS_WUR int fed_check_manifest(const struct fs_invitation *inv, const struct fs_maskkeys *m,
                              struct fs_err *err);
/**
 * New party state from the assembled keys (ownership taken, also on failure;
 * checked against the invitation again) and the party's data x (borrowed;
 * must outlive the state).
 */
FS_WUR int fed_new(const struct fs_invitation *inv, const fs_mat *x, struct fs_fedsvd_keys *keys,
                   struct fed_party **out, struct fs_err *err);
void fed_free(struct fed_party *f);
uint32_t fed_aggregations(const struct fed_party *f);
/** 1 when aggregation r is a fedpca statistics round. */
int fed_is_stats(const struct fed_party *f, uint32_t r);
/** Words of aggregation r. */
uint64_t fed_agg_len(const struct fed_party *f, uint32_t r);
/** This party's sealed exponent of aggregation r (the SVD round first prepares T = Y_i B). */
FS_WUR int fed_exponent(struct fed_party *f, uint32_t r, uint8_t sealed[32], struct fs_err *err);
/**
 * 1 when the SVD step's T = Y_i B can be computed now (the keys are in and,
 * for fedpca, the statistics are done) and has not been: the worker does it
 * while it waits for the other parties, so fed_exponent finds it done.
 */
int fed_prepare_pending(struct fed_party *f);
/** Compute T = Y_i B now (fs_fedsvd_party_prepare; idempotent). */
FS_WUR int fed_prepare(struct fed_party *f, struct fs_err *err);
/**
 * Open the relayed sealed exponents of aggregation r and fix the round's
 * public exponent (*pubexp: the one to report for the SVD round).
 */
FS_WUR int fed_open(struct fed_party *f, uint32_t r, const uint32_t *ids,
                    const uint8_t (*sealed)[32], size_t k, int *pubexp, struct fs_err *err);
/** Masked chunk [off, off + m) of aggregation r's input. */
FS_WUR int fed_chunk(struct fed_party *f, uint32_t r, fs_secagg_client *c, uint64_t off,
                     uint64_t *y, size_t m, struct fs_err *err);
/** The upload of aggregation r is complete: free its intermediates. */
void fed_end_upload(struct fed_party *f, uint32_t r);
/** A statistics round's published sum and contributors. */
FS_WUR int fed_stats_result(struct fed_party *f, const uint64_t *sum, size_t len,
                            const uint32_t *u3, size_t n3, struct fs_err *err);
/**
 * Recover from the published S (r values) and V' (vc) and write the party's
 * result files into dir; each is appended to files ({"name", "shape",
 * "sha256"}), and rank etc. set in info.
 */
FS_WUR int fed_finish(struct fed_party *f, const double *s, size_t r, fs_mat *vc, double total_sq,
                      const uint32_t *u3, size_t n3, const char *dir, json_t *files, json_t *info,
                      struct fs_err *err);

/* ---- ledger.c: the privacy ledger (docs/privacy-ledger.md) ---- */

#define LEDGER_DATASET_ID_MAX 128   /* an operator-given dataset.id, bytes */
#define LEDGER_LIST_MAX       10000 /* entries listed by GET /v1/privacy-ledger */

/* What a participation is charged, decided at POST /v1/participations. */
struct ledger_charge {
    int charged;                             /* 0: not a power-method job (not ledgered) */
    char dataset[LEDGER_DATASET_ID_MAX + 8]; /* operator's id, or "sha256:<hex>" */
    char sha256[65];                         /* hex of the file, "" with an operator's id */
    double rho;                              /* +INFINITY: no formal guarantee */
    double delta;                            /* the job's delta */
    double eps;                              /* rho converted at the job's delta */
};

/** Create the table (existing agent.db files gain it) and settle stale reservations. */
FS_WUR int ledger_init(agent_store *s, struct fs_err *err);
/**
 * Take dataset.id out of a participation request body (the request decoder
 * knows no such field) into id ("" when absent). @return 0, FS_EFORMAT
 * (not a string), FS_EINVAL (empty, too long, characters outside
 * [A-Za-z0-9._:@/+-]).
 */
FS_WUR int ledger_take_dataset_id(json_t *body, char id[LEDGER_DATASET_ID_MAX + 1],
                                  struct fs_err *err);
/**
 * The charge of a participation: for a power-method invitation its rho
 * (fs_fedpower_party_rho) and the dataset identity (id, else SHA-256 of the
 * file at path, streamed: one read of the file). Other algorithms:
 * charged = 0. @return 0, FS_EINVAL (bad job parameters), FS_EIO.
 */
FS_WUR int ledger_charge_for(const struct fs_invitation *inv, const char *id, const char *path,
                             struct ledger_charge *c, struct fs_err *err);
/**
 * Atomically (one SQLite transaction under the store lock) decide whether
 * the charge fits the dataset's budget and, if so, record it as reserved
 * for participation r. A refusal is not an error: d->allowed = 0, nothing
 * stored. @return 0 or FS_EIO.
 */
FS_WUR int ledger_reserve(struct agent *ag, const struct part_rec *r, const struct ledger_charge *c,
                          struct fs_ledger_decision *d, struct fs_err *err);
/** Remove the entry of a participation that was never created (no-op when none). */
void ledger_cancel(struct agent *ag, const char *part_id);
/**
 * Worker hook: this party is about to send its first noisy upload:
 * reserved -> spent (no-op when already spent or not ledgered).
 */
FS_WUR int ledger_spend(struct agent *ag, const char *part_id, struct fs_err *err);
/**
 * Worker hook: the participation ends and this party sent NO noisy upload:
 * reserved -> released. Call before writing the terminal state (a
 * reservation whose participation has ended is otherwise settled as spent).
 */
FS_WUR int ledger_release(struct agent *ag, const char *part_id, struct fs_err *err);
/** GET /v1/privacy-ledger (operator). */
int ledger_h_get(fs_http_req *req, fs_http_resp *resp, void *ctx);
/** Reply 403 privacy_budget_exceeded with the decision's numbers. */
int ledger_reply_refused(fs_http_resp *resp, const char *algorithm, const struct ledger_charge *c,
                         const struct fs_ledger_decision *d);

/* ---- power.c: power-method party state (docs/wire-fedpower.md) ---- */

struct power_party;

/**
 * POST /v1/participations: the invitation's power-method parameters make a
 * valid configuration and the dataset (rows x cols) is this party's: cols =
 * d, rows = party_rows[party-1]. @return 0 or FS_EINVAL (422).
 */
FS_WUR int power_check(const struct fs_invitation *inv, uint64_t rows, uint64_t cols,
                       struct fs_err *err);
/** New party state over dense or csr (exactly one; borrowed, must outlive it). */
FS_WUR int power_new(const struct fs_invitation *inv, const fs_mat *dense, const fs_csr *csr,
                     struct power_party **out, struct fs_err *err);
void power_free(struct power_party *p);
enum fs_agent_power power_kind(const struct power_party *p);
/** Rounds of the job: syncs, plus the Rayleigh upload with eigenvalues. */
uint32_t power_aggregations(const struct power_party *p);
/** fedpower-utility: aggregations followed by a noise exchange (the syncs); else 0. */
uint32_t power_exchanges(const struct power_party *p);
int power_is_rayleigh(const struct power_party *p, uint32_t r);
/** Words (entries) of aggregation r's upload: d r at a sync, r r at the Rayleigh round. */
uint64_t power_agg_len(const struct power_party *p, uint32_t r);
uint32_t power_d(const struct power_party *p);
uint32_t power_r(const struct power_party *p);
/** Z of aggregation r (d x r) following iteration iter: the local iterations. Idempotent per r. */
FS_WUR int power_receive(struct power_party *p, uint32_t r, const fs_mat *z, uint32_t iter,
                         struct fs_err *err);
/** Masked chunk [off, off + m) of the pending ring upload. */
FS_WUR int power_chunk(struct power_party *p, fs_secagg_client *c, uint64_t off, uint64_t *y,
                       size_t m, struct fs_err *err);
/** fedpower: the pending plain upload (borrowed) and its zmax; NULL if none. */
const fs_mat *power_plain(const struct power_party *p, double *zmax);
/** fedpower-utility: the server's Paillier key; response size; this sync's response. */
FS_WUR int power_set_key(struct power_party *p, const uint8_t *pk, size_t len, struct fs_err *err);
size_t power_response_size(const struct power_party *p);
FS_WUR int power_exchange(struct power_party *p, const uint8_t *sel, size_t sel_len, uint8_t *out,
                          size_t out_len, struct fs_err *err);

/* ---- api.c ---- */

/** Register every route. */
FS_WUR int api_routes(struct agent *ag, struct fs_err *err);
/** The request hook (metrics). */
void api_on_request(const struct fs_http_log_entry *e, void *ctx);
/** Participation JSON (new reference, NULL on OOM). */
json_t *api_part_json(const struct part_rec *r);

#endif
