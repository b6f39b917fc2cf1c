/* The job manager of the aggregation server: the registry of jobs, the
 * jobs around lib/proto's job state machine (jobsm.h: phases, party sets,
 * thresholds, dropout rules) and fs_secagg_server (the secure aggregation),
 * persistence of every accepted message (store.h), the status documents,
 * the round driver (deadlines, closing rounds) and restart by replay.
 * Files: jobmgr.c (registry, creation, driver), jobcore.c (the job, its
 * locks and log), jobstatus.c (documents), jobround.c (messages, closing
 * rounds), jobagg.c (aggregations, the unmasking worker), jobroutes.c
 * (party routes), jobreplay.c (loading, replay); power methods plug in
 * through powerjob.h's hooks.
 *
 * Locking: each job has `mu` (status fields; held briefly, never across
 * crypto or I/O-heavy work) and `sm_mu` (the state machine and the event
 * log, whose order must equal the order of application). Order: sm_mu
 * then mu. Unmasking (fs_secagg_server_finish) runs on a worker thread that
 * holds sm_mu; handlers see `finishing` under mu first and answer at once
 * instead of waiting for it.
 *
 * Errors: functions return 0 or a negative code with err filled; besides
 * the FS_E* codes (FS_EFORMAT 400, FS_EAUTH 401, FS_ENOTFOUND 404, FS_ESTATE
 * 409 not_ready, FS_ECONFLICT 409 conflict, FS_ERANGE 413, FS_EINVAL 422)
 * they use the AGG_E* codes below. */
#ifndef AGGSRV_JOBMGR_H
#define AGGSRV_JOBMGR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../../api/jobs.h"
#include "core/err.h"
#include "proto/jobsm.h"
#include "proto/secagg.h"
#include "store.h"

#define AGG_EABORTED   FS_EABORTED   /* 409 aborted: the job failed */
#define AGG_EFORBIDDEN FS_EFORBIDDEN /* 403 */
#define AGG_ETOOMANY   FS_ETOOMANY   /* 429 too_many_jobs */

typedef struct agg_mgr agg_mgr;
typedef struct agg_job agg_job;
struct agg_algo_ops;

struct agg_mgr_config {
    const char *data_dir; /* copied */
    uint64_t max_elements;
    uint32_t max_jobs;    /* running at once */
    uint32_t chunk_words; /* for new jobs */
    int fsync;
    /* sharded fedsvd/fedpca jobs (shardcoord.c): the peers holding shards
     * 1..npeers (borrowed), the peer token's file and the CA to verify them */
    const char *peers[16];
    uint32_t npeers;
    const char *peer_token_file;
    const char *peer_ca_file;
    int insecure_http;
    uint32_t shard_deletion_max_age_s; /* pending window deletions given up after; 0 = never */
};

struct agg_counts {
    uint64_t running, done, failed;
    uint64_t rounds_complete,
        rounds_deadline; /* rounds closed because all were in / at the deadline */
    uint64_t parties_dropped;
    uint64_t chunks_accepted;
};

/** New manager over an open store (borrowed). Free with agg_mgr_free. */
FS_WUR int agg_mgr_new(const struct agg_mgr_config *cfg, agg_store *st, agg_mgr **out,
                       struct fs_err *err);

/** The power methods' hooks (powerjob.h's agg_power_ops); before agg_mgr_load.
 * Without them, power-method jobs are refused. */
void agg_mgr_set_power_ops(agg_mgr *m, const struct agg_algo_ops *ops);

/** fn(ctx) runs after a job's state changed and was persisted (a round
 * closed, a phase opened, the job ended): the HTTP server wakes its long
 * polls with it. fn must be quick and must not block; NULL unsets it. Once
 * this returns, a previous fn runs no more. */
void agg_mgr_set_on_change(agg_mgr *m, void (*fn)(void *ctx), void *ctx);

/**
 * Load every job from the store. Running jobs are rebuilt by replaying their
 * events into a fresh state machine; their round deadlines restart from now.
 * A job whose replay fails is marked failed (logged), not fatal.
 */
FS_WUR int agg_mgr_load(agg_mgr *m, struct fs_err *err);

/** Close rounds that are complete or past their deadline; join finished workers. */
void agg_mgr_tick(agg_mgr *m);

/** Sleep up to ms, or until a message may have completed a round. */
void agg_mgr_wait(agg_mgr *m, unsigned ms);

/** Wait for unmasking workers, free every job. Accepts NULL. */
void agg_mgr_free(agg_mgr *m);

void agg_mgr_counts(agg_mgr *m, struct agg_counts *c);

/**
 * Create a job from a checked spec. server_url: base URL for invitations
 * (the spec's, or derived from the request by the caller).
 * @param out new {"job": Job, "invitations": [Invitation]} (holds tokens).
 */
FS_WUR int agg_job_create(agg_mgr *m, const struct fs_job_spec *spec, const char *server_url,
                          json_t **out, struct fs_err *err);

/** The job with this id (borrowed: jobs live until agg_mgr_free), or NULL. */
agg_job *agg_mgr_find(agg_mgr *m, const char *id);

/** {"jobs": [Job]}, newest first; state_filter NULL or "running|done|failed". */
json_t *agg_mgr_list(agg_mgr *m, const char *state_filter);

/** Which party a bearer token belongs to (constant-time over all parties). @return 0 or FS_EAUTH.
 */
FS_WUR int agg_job_auth(agg_job *j, const char *token, size_t len, uint32_t *party,
                        struct fs_err *err);

const char *agg_job_id(const agg_job *j);

/** The job's algorithm. */
enum fs_algo agg_job_algo(const agg_job *j);

/** y[i] = the little-endian uint64 at b + 8i (the .npy <u8 layout), i < m. y may
 * overlap b when y <= b (decoding in place, moving left). */
void agg_le64_decode(uint64_t *y, const uint8_t *b, size_t m);

/** Add request/response body bytes to the job's counters. */
void agg_job_count_bytes(agg_job *j, uint64_t in, uint64_t out);

/** The Job status document (new reference). */
json_t *agg_job_status(agg_job *j);

/* Longest wait of a long poll (GET /v1/jobs/{job}?wait_ms=), milliseconds. */
#define AGG_WAIT_MS_MAX 30000u

/** 1 when the job's phase or aggregation is no longer (ph, r) (a long poll's condition). */
int agg_job_moved(agg_job *j, enum fs_job_phase ph, uint32_t r);

/** 1 while a secure-sum, fedsvd or fedpca job holds its N x d sum or is
 * about to (from the round before masked_input, which allocates it, to the
 * end of factorizing). */
int agg_job_holds_sum(agg_job *j);

/** Cancel: the job fails with "cancelled by the operator". */
FS_WUR int agg_job_cancel(agg_job *j, struct fs_err *err);

/* Party messages: party is the caller's (from its token). */
FS_WUR int agg_job_post_adv(agg_job *j, uint32_t party, const json_t *body, struct fs_err *err);
FS_WUR int agg_job_get_roster(agg_job *j, json_t **out, struct fs_err *err);
FS_WUR int agg_job_post_shares(agg_job *j, uint32_t party, const json_t *body, struct fs_err *err);
FS_WUR int agg_job_get_shares(agg_job *j, uint32_t party, json_t **out, struct fs_err *err);
FS_WUR int agg_job_get_agg(agg_job *j, uint32_t r, json_t **out, struct fs_err *err);

/**
 * Before a chunk body is read: may party upload chunk idx of aggregation r
 * now? *m receives the chunk's length in words.
 */
FS_WUR int agg_job_chunk_check(agg_job *j, uint32_t party, uint32_t r, uint64_t idx, size_t *m,
                               struct fs_err *err);

/**
 * Accept chunk idx (m words y). An identical repeat is accepted, other
 * content is FS_ECONFLICT.
 */
FS_WUR int agg_job_put_chunk(agg_job *j, uint32_t party, uint32_t r, uint64_t idx,
                             const uint64_t *y, size_t m, struct fs_err *err);

/*
 * A chunk streamed into the sum while its body arrives (no copy of the
 * chunk, no job lock while folding: uploads of several parties and chunks
 * fold at once on the HTTP threads). stream_begin after chunk_check; then
 * stream_piece for each run of whole words, in order; stream_end always
 * (complete: commit; else the folded words leave the sum). Each piece is
 * written to the party's upload file before it is folded; the chunk counts
 * (its event is logged, a restart replays it) only once stream_end commits.
 */
struct agg_upload {
    struct fs_secagg_upload up;
    int fd; /* the party's upload file, -1 when closed */
    uint32_t party;
    uint32_t r;
    uint64_t idx;
    uint64_t off; /* byte offset of the chunk in the file */
};

/**
 * *stream = 1: the chunk is reserved, stream it (stream_end is due). 0: not
 * streamable (a repeat of an accepted chunk, or the round closed): buffer
 * the body and call agg_job_put_chunk, which decides.
 */
FS_WUR int agg_job_stream_begin(agg_job *j, uint32_t party, uint32_t r, uint64_t idx, size_t m,
                                struct agg_upload *u, int *stream, struct fs_err *err);
/** n little-endian words at p (any alignment): persisted, then folded. */
FS_WUR int agg_job_stream_piece(agg_job *j, struct agg_upload *u, const uint8_t *p, size_t n,
                                struct fs_err *err);
/** Commit (complete) or take back; releases the upload either way. */
FS_WUR int agg_job_stream_end(agg_job *j, struct agg_upload *u, int complete, struct fs_err *err);

FS_WUR int agg_job_post_sig(agg_job *j, uint32_t party, uint32_t r, const json_t *body,
                            struct fs_err *err);
FS_WUR int agg_job_post_reveals(agg_job *j, uint32_t party, uint32_t r, const json_t *body,
                                struct fs_err *err);

/* fedsvd / fedpca (docs/wire-fedsvd.md): the sealed exponent of aggregation r
 * (phase exponents), and the public exponent before the SVD upload. */
FS_WUR int agg_job_post_exponent(agg_job *j, uint32_t party, uint32_t r, const json_t *body,
                                 struct fs_err *err);
FS_WUR int agg_job_post_pubexp(agg_job *j, uint32_t party, uint32_t r, const json_t *body,
                               struct fs_err *err);

/** Path of the published (offset-padded) sum of fedpca statistics aggregation r. */
FS_WUR int agg_job_sum_path(agg_job *j, uint32_t r, char *path, size_t cap, struct fs_err *err);

/** The Result manifest once done. */
FS_WUR int agg_job_result(agg_job *j, json_t **out, struct fs_err *err);

/** Path of result file <name>.npy once done (FS_ENOTFOUND for other names). */
FS_WUR int agg_job_result_path(agg_job *j, const char *name, char *path, size_t cap,
                               struct fs_err *err);

#endif
