/* The shard side of sharded aggregation (docs/sharding.md): the windows this
 * server holds for jobs coordinated by another aggregation server. A window
 * is a data-only secure-aggregation window (lib/proto/secagg.h) of one
 * fedsvd/fedpca job's SVD aggregation: the parties upload its chunks with
 * their job tokens, the coordinator finishes it with the unmask plan, and
 * the window's rows are decoded and reduced to their R factor
 * (lib/proto/fedsvd_shard.h) on a worker thread.
 *
 * Windows live in memory and in <data>/shards/<job>/ (the creation body,
 * the uploads and a record of the accepted chunks, then R): a restarted
 * server reloads them, receiving (the chunks folded again) or done; a
 * window that was finishing is receiving again (the unmask plan is never
 * stored) and its coordinator sends the finish again.
 * Locking: the registry's mutex guards the list and the references; each
 * window's mutex its secure-aggregation state and status (never held while
 * folding a streamed chunk or while the worker computes). */
#ifndef AGGSRV_SHARDWIN_H
#define AGGSRV_SHARDWIN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "jobmgr.h"

typedef struct agg_shards agg_shards;
typedef struct agg_shardwin agg_shardwin;

/** New registry; windows' files under <data_dir>/shards: the windows of an
 * earlier run are reloaded (one that cannot be is removed, with a warning).
 * ttl_s > 0: a window that no request used for ttl_s seconds (its files'
 * mtime after a restart) is removed with its files, at start and by a
 * sweeper thread while running; 0: never. */
FS_WUR int agg_shards_new(const char *data_dir, int fsync, uint32_t ttl_s, agg_shards **out,
                          struct fs_err *err);

/** Wait for finishing workers, free every window. Accepts NULL. */
void agg_shards_free(agg_shards *r);

/**
 * PUT /v1/shards/{job}: create the window from body (see openapi.yaml,
 * ShardWindowSpec); an identical repeat is accepted (*created = 0), another
 * body for the same job is FS_ECONFLICT.
 */
FS_WUR int agg_shards_create(agg_shards *r, const char *job, const json_t *body, int *created,
                             struct fs_err *err);

/** The window of job with a reference (agg_shardwin_unref), or NULL. */
agg_shardwin *agg_shards_find(agg_shards *r, const char *job);
void agg_shardwin_unref(agg_shardwin *w);

/** DELETE: forget the window and remove its files (with its last
 * reference; a server that stops keeps them). @return 0 or FS_ENOTFOUND. */
FS_WUR int agg_shards_delete(agg_shards *r, const char *job, struct fs_err *err);

/** The window's document (GET /v1/shards/{job}; new reference). */
json_t *agg_shardwin_doc(agg_shardwin *w);

/** Which party a bearer token belongs to (the job's party tokens). */
FS_WUR int agg_shardwin_auth(agg_shardwin *w, const char *token, size_t len, uint32_t *party,
                             struct fs_err *err);

/* Masked chunks of the window: as agg_job_chunk_check / put_chunk /
 * stream_* of jobmgr.h, with chunk indices local to the window. */
FS_WUR int agg_shardwin_chunk_check(agg_shardwin *w, uint32_t party, uint64_t idx, size_t *m,
                                    struct fs_err *err);
FS_WUR int agg_shardwin_put_chunk(agg_shardwin *w, uint32_t party, uint64_t idx, const uint64_t *y,
                                  size_t m, struct fs_err *err);
FS_WUR int agg_shardwin_stream_begin(agg_shardwin *w, uint32_t party, uint64_t idx, size_t m,
                                     struct agg_upload *u, int *stream, struct fs_err *err);
FS_WUR int agg_shardwin_stream_piece(agg_shardwin *w, struct agg_upload *u, const uint8_t *p,
                                     size_t n, struct fs_err *err);
FS_WUR int agg_shardwin_stream_end(agg_shardwin *w, struct agg_upload *u, int complete,
                                   struct fs_err *err);

/** Largest finish body for a window of n parties (the plan's terms are bounded by n). */
uint64_t agg_shard_finish_cap(uint32_t n);

/**
 * POST /v1/shards/{job}/finish: {"u3": [...], "exponent": E, "plan": [{"key", "sign"}]}:
 * unmask, decode and reduce on a worker. A repeat while finishing or done
 * is accepted. The plan is wiped once applied.
 */
FS_WUR int agg_shardwin_finish(agg_shardwin *w, const json_t *body, struct fs_err *err);

/** Path of R's .npy once done (FS_ESTATE before, FS_EABORTED when it failed). */
FS_WUR int agg_shardwin_r_path(agg_shardwin *w, char *path, size_t cap, struct fs_err *err);

#endif
