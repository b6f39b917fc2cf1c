/* Durable state of the aggregation server: SQLite (WAL) at
 * <data-dir>/server.db with three tables:
 *   jobs          one row per job: spec, state, error, result and a status
 *                 snapshot (JSON text)
 *   party_tokens  SHA-256 digests of the per-party bearer tokens
 *   events        per job, an append-only log of every accepted protocol
 *                 message and round close, in the order the state machine
 *                 applied them; replaying it rebuilds a running job
 * One connection, serialised by a mutex: safe from any thread. */
#ifndef AGGSRV_STORE_H
#define AGGSRV_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct agg_store agg_store;

/** Open (create) <dir>/server.db. fsync_full: synchronous=FULL, else NORMAL. */
FS_WUR int agg_store_open(const char *dir, int fsync_full, agg_store **out, struct fs_err *err);

/** Close. Accepts NULL. */
void agg_store_close(agg_store *st);

/** Insert a new job and its n party token digests in one transaction. */
FS_WUR int agg_store_job_insert(agg_store *st, const char *id, const char *created_at,
                                double created_unix, const char *spec_json, uint32_t chunk_words,
                                const uint8_t (*digests)[32], uint32_t n, struct fs_err *err);

/**
 * Update a job's state ("running", "done", "failed"), error (NULL = none),
 * result (NULL = keep) and status snapshot (NULL = keep).
 */
FS_WUR int agg_store_job_update(agg_store *st, const char *id, const char *state, const char *error,
                                const char *result_json, const char *status_json,
                                struct fs_err *err);

/** Append event seq of job id. body may be NULL (len 0). */
FS_WUR int agg_store_event_append(agg_store *st, const char *id, uint64_t seq, const char *kind,
                                  uint32_t party, uint64_t idx, const void *body, size_t len,
                                  double at, struct fs_err *err);

struct agg_job_row {
    const char *id;
    const char *created_at;
    double created_unix;
    const char *spec;
    uint32_t chunk_words;
    const char *state;
    const char *error;  /* may be NULL */
    const char *result; /* may be NULL */
    const char *status; /* may be NULL */
};

/** Call cb for every job, oldest first. Strings are borrowed for the call. */
FS_WUR int agg_store_jobs_load(agg_store *st,
                               int (*cb)(void *ctx, const struct agg_job_row *row,
                                         struct fs_err *err),
                               void *ctx, struct fs_err *err);

/** The n token digests of a job (party 1..n into digests[0..n)). */
FS_WUR int agg_store_tokens_load(agg_store *st, const char *id, uint32_t n, uint8_t (*digests)[32],
                                 struct fs_err *err);

struct agg_event {
    uint64_t seq;
    const char *kind;
    uint32_t party;
    uint64_t idx;
    const void *body;
    size_t len;
    double at;
};

/** Call cb for every event of a job in order. The event is borrowed for the call. */
FS_WUR int agg_store_events_load(agg_store *st, const char *id,
                                 int (*cb)(void *ctx, const struct agg_event *ev,
                                           struct fs_err *err),
                                 void *ctx, struct fs_err *err);

/* ---- the mask set of a fedsvd/fedpca job (PUT /v1/jobs/{job}/maskset) ---- */

/**
 * Record job_id's mask set and its end token (a secret that can only delete
 * that mask set, kept until the end call succeeds). A repeat of the same
 * values is a no-op. @return 0, FS_ECONFLICT (another mask set), FS_EIO.
 */
FS_WUR int agg_store_maskset_set(agg_store *st, const char *job_id, const char *masking_url,
                                 const char *maskset, const char *end_token, struct fs_err *err);

struct agg_maskset_row {
    char *job_id;
    char *masking_url;
    char *maskset;
    char *end_token; /* a secret (wiped after the call) */
    uint32_t attempts;
};

/**
 * Call cb for (up to 16) mask sets whose job is no longer running, whose end
 * call has not succeeded, was tried fewer than max_attempts times and is due
 * (next try <= now_unix). The lock is not held during cb; rows are borrowed.
 */
FS_WUR int agg_store_maskset_due(agg_store *st, double now_unix, uint32_t max_attempts,
                                 int (*cb)(void *ctx, const struct agg_maskset_row *row,
                                           struct fs_err *err),
                                 void *ctx, struct fs_err *err);

/**
 * The outcome of an end call: ended (the end token is erased) or not (tried
 * again at next_try_unix).
 */
FS_WUR int agg_store_maskset_result(agg_store *st, const char *job_id, int ended,
                                    double next_try_unix, double now_unix, struct fs_err *err);

/** 1 when the database answers a trivial query. */
int agg_store_ping(agg_store *st);

#endif
