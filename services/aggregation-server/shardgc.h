/* The records of the deletions a coordinator owes its shard peers
 * (docs/sharding.md, "Files"): <data>/shard-deletions/<job>.<shard>.json
 * while the DELETE of that window is pending (sent again by shardcoord.c's
 * deletion thread), and shard-deletions/abandoned/<job>.<shard>.json once it
 * was given up (--shard-deletion-max-age-s). A record holds the job, the
 * shard, the peer's URL and times; never a token. This file reads and
 * writes them, counts them for /metrics and lists them for
 * GET /v1/shard-deletions; it keeps no state. */
#ifndef AGGSRV_SHARDGC_H
#define AGGSRV_SHARDGC_H

#include <jansson.h>
#include <stdint.h>

#include "../../api/jobs.h"
#include "core/err.h"

#define AGG_DEL_DIR       "shard-deletions"
#define AGG_DEL_ABANDONED "abandoned" /* under AGG_DEL_DIR */
#define AGG_DEL_LIST_MAX  1000        /* records listed per state by agg_del_doc */

struct agg_del_rec {
    char job[FS_JOB_ID_MAX + 1];
    uint32_t shard;
    char url[FS_JOB_URL_MAX + 1];
    int64_t recorded;  /* unix s: when the deletion was first recorded */
    int64_t abandoned; /* unix s: when it was given up; 0 = pending */
    char error[256];   /* abandoned: the error of the last try */
};

/** Read the record file name of dir into *r: 0, or -1 when it is not a
 * well-formed record (too big, not JSON, a bad job id, shard or URL). A
 * record without "recorded" (written by an older server) takes its file's
 * mtime. */
int agg_del_read(const char *dir, const char *name, struct agg_del_rec *r);

/** Write r to path atomically (temp file, fsync, rename). */
FS_WUR int agg_del_write(const char *path, const struct agg_del_rec *r, struct fs_err *err);

/** Give up pending record name of dir (r, read from it): written to
 * dir/abandoned/name with now and error, then removed from dir. */
FS_WUR int agg_del_abandon(const char *dir, const char *name, struct agg_del_rec *r,
                           const char *error, struct fs_err *err);

/** The number of pending and abandoned records under data_dir. */
void agg_del_counts(const char *data_dir, uint64_t *pending, uint64_t *abandoned);

/** The ShardDeletions document (openapi.yaml) of data_dir: both states'
 * counts and at most AGG_DEL_LIST_MAX records of each. NULL: out of memory. */
json_t *agg_del_doc(const char *data_dir, uint32_t max_age_s);

#endif
