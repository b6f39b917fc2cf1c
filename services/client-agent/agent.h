/* client-agent: runs next to a data holder's file, joins jobs with an
 * invitation, drives the client side of the protocol over HTTP (it never
 * accepts connections from servers), and serves its operator the party's
 * results. Internal header shared by the service's modules:
 *
 *   main.c    startup and shutdown (SIGTERM)
 *   config.c  configuration: flags, FEDSVD_* environment, defaults
 *   api.c     the operator API, health, metrics, openapi.yaml
 *   worker.c  one thread per participation, driving lib/proto/agent_driver
 *             and lib/proto/secagg over lib/net/http_client (worker.h: with
 *             worker_io.c, worker_fed.c and worker_power.c)
 *   fed.c     the party side of fedsvd/fedpca (lib/proto/fedsvd, fedpca)
 *   power.c   the party side of the power-method jobs (lib/proto/fedpower)
 *   store.c   agent.db (SQLite, WAL): participations
 *   ledger.c  the privacy ledger (agent.db table privacy_ledger), GET /v1/privacy-ledger
 *   files.c   the data directory: identity key, per-participation files
 *
 * On-disk layout under --data-dir (directories 0700, files 0600):
 *   agent.db                          participations, privacy ledger, and
 *                                     the sealed resume state of running ones
 *   identity.key                      Ed25519 private seed, 32 raw bytes
 *   agent.key                         AES-256-GCM key sealing the resume state
 *   participations/<id>/manifest.json the result manifest, once done
 *   participations/<id>/<name>.npy    the result files */
#ifndef FS_CLIENT_AGENT_H
#define FS_CLIENT_AGENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../../api/agent_msgs.h"
#include "config.h"
#include "core/err.h"
#include "core/fdio.h"
#include "dp/ledger.h"
#include "la/csr.h"
#include "la/mat.h"
#include "net/auth.h"
#include "net/db.h"
#include "net/http_server.h"
#include "net/log.h"
#include "proto/secagg.h"

#define CA_ID_MAX   40            /* "p-" + 32 hex digits, with the NUL */
#define CA_LIST_MAX 1000          /* participations returned by GET /v1/participations */
#define CA_MAX_BODY (1024 * 1024) /* POST /v1/participations */

/* One participation record (a row of agent.db). */
struct ca_part_rec {
    char id[CA_ID_MAX];
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
    char dataset_path[CA_PATH_MAX];
    char dataset_format[8];
    uint64_t rows, cols;
    char fail_at[32]; /* "" = none */
    char job_url[FS_JOB_URL_MAX + FS_JOB_ID_MAX + 16];
    uint32_t restarts; /* agent restarts this participation resumed from */
};

#define CA_SECRET_LEN 32
/* The sealed resume state: nonce, tag, secret, token (NUL-terminated). */
#define CA_SEALED_MAX    (28 + CA_SECRET_LEN + FS_AUTH_TOKEN_MAX + 1)
#define CA_RESUME_PREFIX "cannot resume after restart: "

struct ca_agent;

/* A running participation, owned by its worker thread (detached). */
struct ca_part {
    struct ca_agent *ag;
    struct ca_part_rec rec;      /* the worker's copy; persisted with ca_store_progress */
    struct fs_agent_request req; /* holds the party token: wiped when the worker ends */
    fs_mat *data;                /* the validated dataset; wiped when the worker ends */
    fs_csr *sparse;              /* power-method jobs: a sparse (.mtx) dataset instead of data */
    char dir[CA_PATH_MAX];       /* data-dir/participations/<id> */
    /* The participation's secret (OS CSPRNG, sealed in agent.db before the
     * first message): every random value of the client's protocol state is
     * derived from it, so a restarted agent rebuilds its messages byte for
     * byte. Wiped with p. */
    uint8_t secret[CA_SECRET_LEN];
    int resumed;             /* started again after an agent restart */
    char dataset_sha256[65]; /* hex, at join: a resumed participation checks it */
    atomic_int stop;         /* 0 run, 1 agent stopping, 2 cancelled by the operator */
    struct ca_part *next;
};

struct ca_agent {
    struct ca_config cfg;
    fs_db *db;
    fs_auth *auth;
    fs_http_server *http;
    pthread_mutex_t mu; /* parts, nrunning */
    pthread_cond_t cv;  /* signalled when a worker ends or the agent stops */
    struct ca_part *parts;
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
 * Open (create) data-dir/agent.db in WAL mode. Participations left running
 * by a previous process stay running: main.c resumes them.
 * @param n_running how many there are (may be NULL).
 */
FS_WUR int ca_store_open(const char *path, fs_db **out, unsigned *n_running, struct fs_err *err);
/**
 * Insert a new participation and its resume state (sealed, borrowed; the
 * dataset's SHA-256 in hex) in one transaction.
 */
FS_WUR int ca_store_insert(fs_db *s, const struct ca_part_rec *r, const char *invitation_json,
                           const uint8_t *sealed, size_t sealed_len, const char *dataset_sha256,
                           struct fs_err *err);
/** The sealed resume state of participation id. @return 0, FS_ENOTFOUND, FS_EIO. */
FS_WUR int ca_store_resume_get(fs_db *s, const char *id, uint8_t *sealed, size_t cap, size_t *len,
                               char sha256_hex[65], struct fs_err *err);
/** Delete the resume state and message digests of an ended participation. */
void ca_store_resume_drop(fs_db *s, const char *id);
/** Count one more restart of a running participation (*restarts: the new count). */
FS_WUR int ca_store_restarted(fs_db *s, const char *id, uint32_t *restarts, struct fs_err *err);
/** The stored invitation (without token) of id: *json new string, free(). */
FS_WUR int ca_store_invitation(fs_db *s, const char *id, char **json, struct fs_err *err);
/**
 * Write ahead: record the SHA-256 of a message (request path and body)
 * before it is sent; when one is already recorded for this path (a message
 * rebuilt after a restart), it must be the same (*repeat = 1).
 * @return 0, FS_ESTATE (differs: message "cannot resume after restart:
 *         ..."; never waited out), FS_EIO.
 */
FS_WUR int ca_store_wal(fs_db *s, const char *id, const char *path, const uint8_t sha256[32],
                        int *repeat, struct fs_err *err);
/** Running participations, oldest first, at most max. *out new array (free()). */
FS_WUR int ca_store_running(fs_db *s, size_t max, struct ca_part_rec **out, size_t *n,
                            struct fs_err *err);
/**
 * Write progress fields of a running participation (state, phase, progress,
 * bytes, error). Only a row still "running" changes, so the first terminal
 * state written wins (a cancel racing with completion).
 * @return 0, or FS_ESTATE when the row is no longer running.
 */
FS_WUR int ca_store_progress(fs_db *s, const struct ca_part_rec *r, struct fs_err *err);
/** @return 0 or FS_ENOTFOUND. */
FS_WUR int ca_store_get(fs_db *s, const char *id, struct ca_part_rec *r, struct fs_err *err);
/** Newest first, at most max. *out new array (free()). */
FS_WUR int ca_store_list(fs_db *s, size_t max, struct ca_part_rec **out, size_t *n,
                         struct fs_err *err);
/** 1 when a running or done participation of (job, party) exists, else 0; <0 on error. */
int ca_store_exists_live(fs_db *s, const char *job_id, uint32_t party, struct fs_err *err);
/** Counts by state, for /metrics. */
FS_WUR int ca_store_counts(fs_db *s, uint64_t *running, uint64_t *done, uint64_t *failed,
                           struct fs_err *err);
/* (ledger.c runs its own statements under fs_db_lock.) */

/* ---- files.c ---- */

/** Create data-dir/identity.key (0600) unless present; check an existing one. */
FS_WUR int ca_files_identity_ensure(const char *data_dir, struct fs_err *err);
/** Load the identity key (caller wipes it with fs_wipe after use). */
FS_WUR int ca_files_identity_load(const char *data_dir, uint8_t sk[32], struct fs_err *err);
/** The identity's public key: what GET /v1/identity prints and jobs pin. */
FS_WUR int ca_files_identity_public(const char *data_dir, uint8_t pk[32], struct fs_err *err);
/** Create data-dir/agent.key (0600, 32 bytes from the OS CSPRNG) unless present. */
FS_WUR int ca_files_agent_key_ensure(const char *data_dir, struct fs_err *err);
/**
 * Seal the resume state of participation id (AES-256-GCM under agent.key,
 * the id as associated data): secret || token. out: CA_SEALED_MAX bytes.
 */
FS_WUR int ca_files_seal_resume(const char *data_dir, const char *id,
                                const uint8_t secret[CA_SECRET_LEN], const char *token,
                                uint8_t *out, size_t *out_len, struct fs_err *err);
/** Open what ca_files_seal_resume sealed (token: FS_AUTH_TOKEN_MAX + 1 bytes). Wipe both. */
FS_WUR int ca_files_open_resume(const char *data_dir, const char *id, const uint8_t *in,
                                size_t in_len, uint8_t secret[CA_SECRET_LEN], char *token,
                                struct fs_err *err);
/** SHA-256 of a file, streamed. */
FS_WUR int ca_files_sha256(const char *path, uint8_t out[32], struct fs_err *err);
/** RFC 3339 UTC time now, "2026-11-23T10:00:00Z". */
void ca_files_now(char out[32]);

/* ---- worker.c ---- */

/**
 * Start the worker thread of a participation (detached) and list it in
 * ag->parts. The caller holds ag->mu. Takes ownership of p on success (the
 * worker frees it); on failure p is still the caller's.
 */
FS_WUR int ca_worker_start_locked(struct ca_agent *ag, struct ca_part *p, struct fs_err *err);

/** Free a participation never started (wipes token and data). Accepts NULL. */
void ca_part_free(struct ca_part *p);

/* ---- resume.c ---- */

/**
 * At startup: resume every participation left running (its sealed state,
 * its dataset unchanged since the join), each on a new worker; one that
 * cannot resume is marked failed with "cannot resume after restart: ...".
 */
void ca_resume_all(struct ca_agent *ag);

/* ---- fed.c: fedsvd / fedpca party state (docs/wire-fedsvd.md) ---- */

struct ca_fed;
struct fs_fedsvd_keys;
struct fs_maskkeys;

/**
 * The masking server's keys manifest (decoded) must be this party's keys of
 * this job: job id, mask set, party, parties, partition, pooled shape, own
 * range (checked before any key file is fetched).
 */
FS_WUR int ca_fed_check_manifest(const struct fs_invitation *inv, const struct fs_maskkeys *m,
                                 struct fs_err *err);
/**
 * New party state from the assembled keys (ownership taken, also on failure;
 * checked against the invitation again) and the party's data x (borrowed;
 * must outlive the state).
 */
FS_WUR int ca_fed_new(const struct fs_invitation *inv, const fs_mat *x, struct fs_fedsvd_keys *keys,
                      struct ca_fed **out, struct fs_err *err);
void ca_fed_free(struct ca_fed *f);
uint32_t ca_fed_aggregations(const struct ca_fed *f);
/** 1 when aggregation r is a fedpca statistics round. */
int ca_fed_is_stats(const struct ca_fed *f, uint32_t r);
/** Words of aggregation r. */
uint64_t ca_fed_agg_len(const struct ca_fed *f, uint32_t r);
/** This party's sealed exponent of aggregation r (the SVD round first prepares T = Y_i B). */
FS_WUR int ca_fed_exponent(struct ca_fed *f, uint32_t r, uint8_t sealed[32], struct fs_err *err);
/**
 * 1 when the SVD step's T = Y_i B can be computed now (the keys are in and,
 * for fedpca, the statistics are done) and has not been: the worker does it
 * while it waits for the other parties, so ca_fed_exponent finds it done.
 */
int ca_fed_prepare_pending(struct ca_fed *f);
/** Compute T = Y_i B now (fs_fedsvd_party_prepare; idempotent). */
FS_WUR int ca_fed_prepare(struct ca_fed *f, struct fs_err *err);
/**
 * Open the relayed sealed exponents of aggregation r and fix the round's
 * public exponent (*pubexp: the one to report for the SVD round).
 */
FS_WUR int ca_fed_open(struct ca_fed *f, uint32_t r, const uint32_t *ids,
                       const uint8_t (*sealed)[32], size_t k, int *pubexp, struct fs_err *err);
/** Masked chunk [off, off + m) of aggregation r's input. */
FS_WUR int ca_fed_chunk(struct ca_fed *f, uint32_t r, fs_secagg_client *c, uint64_t off,
                        uint64_t *y, size_t m, struct fs_err *err);
/** Sharded jobs: the party's SVD-round chunks use the shard-blocked layout of
 * S shards (lib/proto/fedsvd_shard.h); S <= 1 is the unsharded layout. */
FS_WUR int ca_fed_set_shards(struct ca_fed *f, uint32_t shards, struct fs_err *err);
/** The upload of aggregation r is complete: free its intermediates. */
void ca_fed_end_upload(struct ca_fed *f, uint32_t r);
/** A statistics round's published sum and contributors. */
FS_WUR int ca_fed_stats_result(struct ca_fed *f, const uint64_t *sum, size_t len,
                               const uint32_t *u3, size_t n3, struct fs_err *err);
/**
 * Recover from the published S (r values) and V' (vc) and write the party's
 * result files into dir; each is appended to files ({"name", "shape",
 * "sha256"}), and rank etc. set in info.
 */
FS_WUR int ca_fed_finish(struct ca_fed *f, const double *s, size_t r, fs_mat *vc, double total_sq,
                         const uint32_t *u3, size_t n3, const char *dir, json_t *files,
                         json_t *info, struct fs_err *err);

/* ---- ledger.c: the privacy ledger (docs/privacy-ledger.md) ---- */

#define CA_LEDGER_DATASET_ID_MAX 128   /* an operator-given dataset.id, bytes */
#define CA_LEDGER_LIST_MAX       10000 /* entries listed by GET /v1/privacy-ledger */

/* What a participation is charged, decided at POST /v1/participations. */
struct ca_ledger_charge {
    int charged;                                /* 0: not a power-method job (not ledgered) */
    char dataset[CA_LEDGER_DATASET_ID_MAX + 8]; /* operator's id, or "sha256:<hex>" */
    char sha256[65];                            /* hex of the file, "" with an operator's id */
    double rho;                                 /* +INFINITY: no formal guarantee */
    double delta;                               /* the job's delta */
    double eps;                                 /* rho converted at the job's delta */
};

/** Create the table (existing agent.db files gain it) and settle stale reservations. */
FS_WUR int ca_ledger_init(fs_db *s, struct fs_err *err);
/**
 * Take dataset.id out of a participation request body (the request decoder
 * knows no such field) into id ("" when absent). @return 0, FS_EFORMAT
 * (not a string), FS_EINVAL (empty, too long, characters outside
 * [A-Za-z0-9._:@/+-]).
 */
FS_WUR int ca_ledger_take_dataset_id(json_t *body, char id[CA_LEDGER_DATASET_ID_MAX + 1],
                                     struct fs_err *err);
/**
 * The charge of a participation: for a power-method invitation its rho
 * (fs_fedpower_party_rho) and the dataset identity (id, else SHA-256 of the
 * file at path, streamed: one read of the file). Other algorithms:
 * charged = 0. @return 0, FS_EINVAL (bad job parameters), FS_EIO.
 */
FS_WUR int ca_ledger_charge_for(const struct fs_invitation *inv, const char *id, const char *path,
                                struct ca_ledger_charge *c, struct fs_err *err);
/**
 * Atomically (one SQLite transaction under the store lock) decide whether
 * the charge fits the dataset's budget and, if so, record it as reserved
 * for participation r. A refusal is not an error: d->allowed = 0, nothing
 * stored. @return 0 or FS_EIO.
 */
FS_WUR int ca_ledger_reserve(struct ca_agent *ag, const struct ca_part_rec *r,
                             const struct ca_ledger_charge *c, struct fs_ledger_decision *d,
                             struct fs_err *err);
/** Remove the entry of a participation that was never created (no-op when none). */
void ca_ledger_cancel(struct ca_agent *ag, const char *part_id);
/**
 * Worker hook: this party is about to send its first noisy upload:
 * reserved -> spent (no-op when already spent or not ledgered).
 */
FS_WUR int ca_ledger_spend(struct ca_agent *ag, const char *part_id, struct fs_err *err);
/**
 * Worker hook: the participation ends and this party sent NO noisy upload:
 * reserved -> released. Call before writing the terminal state (a
 * reservation whose participation has ended is otherwise settled as spent).
 */
FS_WUR int ca_ledger_release(struct ca_agent *ag, const char *part_id, struct fs_err *err);
/** GET /v1/privacy-ledger (operator). */
int ca_ledger_h_get(fs_http_req *req, fs_http_resp *resp, void *ctx);
/** Reply 403 privacy_budget_exceeded with the decision's numbers. */
int ca_ledger_reply_refused(fs_http_resp *resp, const char *algorithm,
                            const struct ca_ledger_charge *c, const struct fs_ledger_decision *d);

/* ---- power.c: power-method party state (docs/wire-fedpower.md) ---- */

struct ca_power;

/**
 * POST /v1/participations: the invitation's power-method parameters make a
 * valid configuration and the dataset (rows x cols) is this party's: cols =
 * d, rows = party_rows[party-1]. @return 0 or FS_EINVAL (422).
 */
FS_WUR int ca_power_check(const struct fs_invitation *inv, uint64_t rows, uint64_t cols,
                          struct fs_err *err);
/** New party state over dense or csr (exactly one; borrowed, must outlive it). */
FS_WUR int ca_power_new(const struct fs_invitation *inv, const fs_mat *dense, const fs_csr *csr,
                        struct ca_power **out, struct fs_err *err);
void ca_power_free(struct ca_power *p);
enum fs_agent_power ca_power_kind(const struct ca_power *p);
/** Rounds of the job: syncs, plus the Rayleigh upload with eigenvalues. */
uint32_t ca_power_aggregations(const struct ca_power *p);
/** fedpower-utility: aggregations followed by a noise exchange (the syncs); else 0. */
uint32_t ca_power_exchanges(const struct ca_power *p);
/** 1 when an exchange answer costs next to nothing (ot: a few curve operations). */
int ca_power_exchange_cheap(const struct ca_power *p);
int ca_power_is_rayleigh(const struct ca_power *p, uint32_t r);
/** Words (entries) of aggregation r's upload: d r at a sync, r r at the Rayleigh round. */
uint64_t ca_power_agg_len(const struct ca_power *p, uint32_t r);
uint32_t ca_power_d(const struct ca_power *p);
uint32_t ca_power_r(const struct ca_power *p);
/** Z of aggregation r (d x r) following iteration iter: the local iterations. Idempotent per r. */
FS_WUR int ca_power_receive(struct ca_power *p, uint32_t r, const fs_mat *z, uint32_t iter,
                            struct fs_err *err);
/** Masked chunk [off, off + m) of the pending ring upload. */
FS_WUR int ca_power_chunk(struct ca_power *p, fs_secagg_client *c, uint64_t off, uint64_t *y,
                          size_t m, struct fs_err *err);
/** fedpower: the pending plain upload (borrowed) and its zmax; NULL if none. */
const fs_mat *ca_power_plain(const struct ca_power *p, double *zmax);
/** Derive the party's noise and re-randomizers from the participation's secret. */
FS_WUR int ca_power_set_secret(struct ca_power *p, const uint8_t secret[CA_SECRET_LEN],
                               struct fs_err *err);
/** Rebuilt after a restart: the first Z received may be a later sync's. */
void ca_power_resuming(struct ca_power *p);
/** fedpower-utility: the server's Paillier key; response size; this sync's response. */
FS_WUR int ca_power_set_key(struct ca_power *p, const uint8_t *pk, size_t len, struct fs_err *err);
/** ca_power_set_key in two halves; the first may run on another thread while
 * p computes (fs_fedpower_party_exchange_prepare), the second takes nx over. */
FS_WUR int ca_power_key_prepare(const struct ca_power *p, const uint8_t *pk, size_t len,
                                struct fs_noisex_client **nx, struct fs_err *err);
void ca_power_key_install(struct ca_power *p, struct fs_noisex_client *nx);
size_t ca_power_response_size(const struct ca_power *p);
FS_WUR int ca_power_exchange(struct ca_power *p, const uint8_t *sel, size_t sel_len, uint8_t *out,
                             size_t out_len, struct fs_err *err);

/* ---- api.c ---- */

/** Register every route. */
FS_WUR int ca_api_routes(struct ca_agent *ag, struct fs_err *err);
/** The request hook (metrics). */
void ca_api_on_request(const struct fs_http_log_entry *e, void *ctx);
/**
 * Load the request's dataset (dense, or sparse for a power-method .mtx) and
 * check it against the invitation (rq->path becomes the resolved path).
 * @return 0, FS_EINVAL (422 material), FS_ENOMEM.
 */
FS_WUR int ca_api_load_dataset(const struct ca_agent *ag, struct fs_agent_request *rq,
                               fs_mat **dense, fs_csr **sparse, struct fs_err *err);
/** Participation JSON (new reference, NULL on OOM). */
json_t *ca_api_part_json(const struct ca_part_rec *r);

#endif
