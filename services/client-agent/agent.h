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
 *   store.c   agent.db (SQLite, WAL): participations
 *   files.c   the data directory: identity key, per-participation files
 *
 * On-disk layout under --data-dir (directories 0700, files 0600):
 *   agent.db                          participations
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
    const char *port_file; /* write the bound port here once listening, or NULL */
    int insecure;          /* do not verify the servers' TLS certificates */
    uint64_t max_elements; /* largest dataset, rows * cols */
    unsigned max_running;  /* participations running at once */
    unsigned poll_ms;      /* job status polling interval */
    unsigned stall_s;      /* fail a participation whose job shows no change for this long */
    unsigned patience_s;   /* how long unreachable servers / 5xx are tolerated */
    enum fs_log_level log_level;
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

/* ---- files.c ---- */

/** mkdir -p with mode 0700 (existing directories are kept as they are). */
FS_WUR int files_mkdirs(const char *path, struct fs_err *err);
/** Create data-dir/identity.key (0600) unless present; check an existing one. */
FS_WUR int files_identity_ensure(const char *data_dir, struct fs_err *err);
/** Load the identity key (caller wipes it with fs_wipe after use). */
FS_WUR int files_identity_load(const char *data_dir, uint8_t sk[32], struct fs_err *err);
/** Write bytes to path atomically (temp file 0600, fsync, rename). */
FS_WUR int files_write_atomic(const char *path, const void *data, size_t len, struct fs_err *err);
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

/**
 * New party state from the masking server's key blob (borrowed; decoded,
 * checked against the invitation: party, parties, partition, pooled shape,
 * own range) and the party's data x (borrowed; must outlive the state).
 */
FS_WUR int fed_new(const struct fs_invitation *inv, const fs_mat *x, const uint8_t *blob,
                   size_t len, struct fed_party **out, struct fs_err *err);
void fed_free(struct fed_party *f);
uint32_t fed_aggregations(const struct fed_party *f);
/** 1 when aggregation r is a fedpca statistics round. */
int fed_is_stats(const struct fed_party *f, uint32_t r);
/** Words of aggregation r. */
uint64_t fed_agg_len(const struct fed_party *f, uint32_t r);
/** This party's sealed exponent of aggregation r (the SVD round first prepares T = Y_i B). */
FS_WUR int fed_exponent(struct fed_party *f, uint32_t r, uint8_t sealed[32], struct fs_err *err);
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

/* ---- api.c ---- */

/** Register every route. */
FS_WUR int api_routes(struct agent *ag, struct fs_err *err);
/** The request hook (metrics). */
void api_on_request(const struct fs_http_log_entry *e, void *ctx);
/** Participation JSON (new reference, NULL on OOM). */
json_t *api_part_json(const struct part_rec *r);

#endif
