/* Durable state of the masking server under --data-dir (created 0700):
 *
 *   masking.db   SQLite (WAL), file mode 0600:
 *     masksets     one row per mask set: id, job_id, canonical spec (JSON),
 *                  state (active | deleted), created_at, deleted_at; at most
 *                  one active mask set per job_id (a partial unique index)
 *                  expires_unix (created + ttl_s) and the SHA-256 digest
 *                  of its end token (lets its job's end delete it)
 *     mask_parties per mask set and party: the party's pinned identity
 *                  (Ed25519 public key) and its download counters
 *   seeds/<id>.seed   the 32-byte master seed of an active mask set, mode
 *                  0600, written to a temp file, fsynced and renamed; the
 *                  only secret the server keeps. Destroyed (overwritten with
 *                  zeros, fsynced, unlinked) when the mask set is deleted.
 *
 * Create order: seed file, then the database row; delete order: row, then
 * seed file. mask_store_sweep_seeds (at start-up) destroys seed files that
 * have no active row, so a crash between the two steps leaves no secret.
 * One SQLite connection serialised by a mutex: safe from any thread. */
#ifndef MASK_STORE_H
#define MASK_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "spec.h"

#define MASK_SEED_LEN 32

typedef struct mask_store mask_store;

/**
 * Open (create) <dir>/masking.db and <dir>/seeds/. fsync_full: SQLite
 * synchronous=FULL, else NORMAL (seed files are always fsynced).
 * @param out free with mask_store_close.
 */
FS_WUR int mask_store_open(const char *dir, int fsync_full, mask_store **out, struct fs_err *err);

/** Close. Accepts NULL. */
void mask_store_close(mask_store *st);

/** 1 when the database answers a trivial query. */
int mask_store_ping(mask_store *st);

/* ---- seeds ---- */

/** Write the seed of mask set id (0600, durable). @return 0, FS_EIO, FS_ECONFLICT (exists). */
FS_WUR int mask_store_seed_write(mask_store *st, const char *id, const uint8_t seed[MASK_SEED_LEN],
                                 struct fs_err *err);

/**
 * Read the seed of mask set id into seed (the caller wipes it after use).
 * @return 0, FS_ENOTFOUND (no seed file), FS_EIO (unreadable, wrong size).
 */
FS_WUR int mask_store_seed_read(mask_store *st, const char *id, uint8_t seed[MASK_SEED_LEN],
                                struct fs_err *err);

/** 1 when the seed file of id exists. */
int mask_store_seed_exists(mask_store *st, const char *id);

/** Overwrite with zeros, fsync and unlink the seed file of id (absent: 0). */
FS_WUR int mask_store_seed_destroy(mask_store *st, const char *id, struct fs_err *err);

/**
 * Destroy every seed file (and temp file) under seeds/ that has no active
 * mask set. @param n if not NULL, receives how many were destroyed.
 */
FS_WUR int mask_store_sweep_seeds(mask_store *st, size_t *n, struct fs_err *err);

/* ---- mask sets ---- */

/* A mask set to insert (everything borrowed). */
struct mask_new {
    const char *id;
    const char *job_id;
    const char *spec_json; /* canonical */
    const char *created_at;
    double created_unix;
    double expires_unix;
    const uint8_t *end_digest;       /* 32 bytes: SHA-256 of the end token */
    const uint8_t (*identities)[32]; /* parties entries */
    uint32_t parties;
};

/**
 * Insert an active mask set and its parties' identities (party 1..n) in one
 * transaction. @return 0, FS_ECONFLICT (an active mask set for job_id
 * exists), FS_EIO.
 */
FS_WUR int mask_store_insert(mask_store *st, const struct mask_new *m, struct fs_err *err);

struct mask_row {
    const char *id;
    const char *job_id;
    const char *spec; /* canonical spec JSON */
    const char *state;
    const char *created_at;
    const char *deleted_at; /* NULL while active */
    double expires_unix;    /* 0: never (an older version's mask set) */
};

struct mask_party_row {
    uint32_t party;
    uint64_t downloads;
    const char *first_at; /* NULL before the first download */
    const char *last_at;
};

typedef int (*mask_row_fn)(void *ctx, const struct mask_row *row, struct fs_err *err);
typedef int (*mask_party_fn)(void *ctx, const struct mask_party_row *row, struct fs_err *err);

/** The mask set id (cb called once). @return 0, FS_ENOTFOUND, FS_EIO, or cb's error. */
FS_WUR int mask_store_get(mask_store *st, const char *id, mask_row_fn cb, void *ctx,
                          struct fs_err *err);

/**
 * Every mask set, newest first, optionally only those of job_id and/or in
 * state (NULL = any). Rows are borrowed for the call.
 */
FS_WUR int mask_store_list(mask_store *st, const char *job_id, const char *state, mask_row_fn cb,
                           void *ctx, struct fs_err *err);

/** The party rows of mask set id, by party. */
FS_WUR int mask_store_parties(mask_store *st, const char *id, mask_party_fn cb, void *ctx,
                              struct fs_err *err);

/**
 * Whether token is mask set id's end token (SHA-256 compared in constant time).
 * @return 0 (*match 0 or 1), FS_ENOTFOUND (no such mask set), FS_EIO, FS_ECRYPTO.
 */
FS_WUR int mask_store_match_end(mask_store *st, const char *id, const char *token, size_t len,
                                int *match, struct fs_err *err);

/**
 * Up to cap active mask sets whose expires_unix <= now_unix, soonest first,
 * into ids; *n receives how many.
 */
FS_WUR int mask_store_expired(mask_store *st, double now_unix, char (*ids)[MASK_ID_LEN + 1],
                              size_t cap, size_t *n, struct fs_err *err);

/**
 * Mark id deleted (at deleted_at). *changed = 1 when it was active.
 * @return 0, FS_ENOTFOUND, FS_EIO.
 */
FS_WUR int mask_store_mark_deleted(mask_store *st, const char *id, const char *deleted_at,
                                   int *changed, struct fs_err *err);

/** Count one served download of party's keys at time `at`. */
FS_WUR int mask_store_record_download(mask_store *st, const char *id, uint32_t party,
                                      const char *at, struct fs_err *err);

/** Mask sets by state (for /metrics). */
FS_WUR int mask_store_counts(mask_store *st, uint64_t *active, uint64_t *deleted,
                             struct fs_err *err);

#endif
