/* The aggregation server's job documents as a client reads them
 * (openapi.yaml, tag jobs): the Job status (GET /v1/jobs/{job}), the job
 * list (GET /v1/jobs), the creation reply (POST /v1/jobs: JobCreated) and
 * the Result manifest (GET /v1/jobs/{job}/result), plus the body of PUT
 * /v1/jobs/{job}/maskset. Shared by the CLI and tests; the client agent
 * reads the job status through agent_msgs.h (the fields its driver needs).
 *
 * Decoders borrow the json_t and fill caller-owned structs (no allocation);
 * members a client does not show are ignored, as are unknown ones (a newer
 * server may add some). Error codes as in wire.h: FS_EFORMAT for a missing
 * member or a wrong JSON type, FS_EINVAL for a bad value; the message names
 * the member ("job.parties: expected an integer"). */
#ifndef FS_API_JOBDOC_H
#define FS_API_JOBDOC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/core/err.h"
#include "jobs.h"
#include "participation.h"
#include "phase.h"

#define FS_JOBDOC_TIMINGS_MAX 32  /* entries of "timings" kept (phase names) */
#define FS_JOBDOC_NAME_MAX    48  /* bytes of a phase / timing name, with the NUL */
#define FS_JOBDOC_TEXT_MAX    512 /* bytes of the error text kept, with the NUL */

enum fs_job_state { FS_JOB_STATE_RUNNING = 0, FS_JOB_STATE_DONE = 1, FS_JOB_STATE_FAILED = 2 };

/** "running", "done", "failed". */
const char *fs_job_state_name(enum fs_job_state s);

struct fs_job_timing {
    char name[FS_JOBDOC_NAME_MAX]; /* a phase name ("masked_input", ...) */
    double seconds;
};

/* One entry of a sharded job's "shards" list: where the chunks of rows
 * [lo, hi) of X', words [off, off + len) of the aggregation vector, go. */
struct fs_job_shard {
    uint32_t shard; /* 0 = the coordinator (the job's own server) */
    char url[FS_JOB_URL_MAX + 1];
    uint64_t lo, hi;
    uint64_t off, len;
};

/* GET /v1/jobs/{job} (schema Job): the fields a client shows and waits on. */
struct fs_job_status {
    char id[FS_JOB_ID_MAX + 1];
    char algorithm[FS_JOB_ALGO_MAX + 1]; /* as sent */
    int algo_known;                      /* algorithm names an enum fs_algo */
    enum fs_algo algo;                   /* valid when algo_known */
    char name[FS_JOB_NAME_MAX + 1];      /* "" when absent */
    enum fs_job_state state;
    char phase[FS_JOBDOC_NAME_MAX]; /* "waiting_for_parties", ... as sent */
    int phase_known;                /* phase names an enum fs_job_phase (phase.h) */
    enum fs_job_phase phase_id;     /* valid when phase_known */
    uint32_t aggregation;           /* 0-based */
    uint32_t aggregations;
    uint32_t parties, threshold;
    char secagg[8];         /* "full", "plus" (as sent, cut); "" when absent */
    uint32_t secagg_degree; /* plus: neighbours per party; 0 when absent */
    int has_shape;          /* "shape" [rows, cols] given */
    uint64_t rows, cols;
    uint32_t present[FS_JOB_MAX_PARTIES]; /* party ids, as sent */
    size_t npresent;
    uint32_t dropped[FS_JOB_MAX_PARTIES];
    size_t ndropped;
    uint64_t bytes_in, bytes_out;
    struct fs_job_timing timings[FS_JOBDOC_TIMINGS_MAX]; /* in document order; more are cut */
    size_t ntimings;
    int has_deadline; /* deadline_in_s a number (not null) */
    double deadline_in_s;
    char created_at[40]; /* "" when absent */
    int has_error;       /* error a string (not null) */
    char error[FS_JOBDOC_TEXT_MAX];
    uint32_t nshards; /* entries of "shards" (0 when absent: one server) */
    struct fs_job_shard shards[FS_JOB_MAX_SHARDS];
};

/**
 * Decode a Job: id, algorithm, state (running|done|failed), phase and
 * parties are required; threshold (1..parties), aggregation, aggregations,
 * shape, present, dropped (party ids in 1..parties, at most parties of
 * them), bytes_in, bytes_out, timings (an object of numbers),
 * deadline_in_s, created_at, name, error (string or null; longer texts
 * are cut) and shards (2..FS_JOB_MAX_SHARDS entries, entry s for shard s, with
 * an http(s) url, rows and words) are checked when present and zero/empty
 * when absent.
 * @return 0, FS_EFORMAT, FS_EINVAL.
 */
FS_WUR int fs_job_status_decode(const json_t *j, struct fs_job_status *out, struct fs_err *err);

/**
 * The "shards" list of a sharded job (n entries, shard s at index s; n >= 2).
 * @return a new array, or NULL (out of memory).
 */
json_t *fs_job_shards_encode(const struct fs_job_shard *sh, uint32_t n);

/** 1 when id is in ids[0..n). */
int fs_job_ids_has(const uint32_t *ids, size_t n, uint32_t id);

/**
 * The job list (GET /v1/jobs): {"jobs": [Job, ...]}. *jobs is the borrowed
 * array (decode each entry with fs_job_status_decode), *n its size.
 * @return 0 or FS_EFORMAT.
 */
FS_WUR int fs_job_list_decode(const json_t *j, const json_t **jobs, size_t *n, struct fs_err *err);

/**
 * The reply of POST /v1/jobs (JobCreated): {"job": Job, "invitations": [...]}:
 * the job decoded into *job, the borrowed invitations array into *invitations,
 * exactly job->parties of them, entry i an object whose "party" is i+1
 * (decode each with fs_invitation_decode; they hold the parties' tokens).
 * @return 0, FS_EFORMAT, FS_EINVAL.
 */
FS_WUR int fs_job_created_decode(const json_t *j, struct fs_job_status *job,
                                 const json_t **invitations, struct fs_err *err);

/**
 * Add where a fedsvd/fedpca party gets its keys to an encoded invitation
 * (the mask set's creator does, not the aggregation server): "masking_url"
 * and "maskset" set (replaced if there). @return 0 or -1 (out of memory, not an object).
 */
int fs_invitation_add_maskset(json_t *invitation, const char *masking_url, const char *maskset);

/* GET /v1/jobs/{job}/result (schema Result): the fields a client shows and checks. */
struct fs_job_result {
    char algorithm[FS_JOB_ALGO_MAX + 1];
    int algo_known;
    enum fs_algo algo;
    int has_shape;
    uint64_t rows, cols;
    uint32_t parties;
    uint32_t survivors[FS_JOB_MAX_PARTIES];
    size_t nsurvivors;
    uint32_t dropped[FS_JOB_MAX_PARTIES];
    size_t ndropped;
    struct fs_result_file files[FS_RESULT_FILES_MAX]; /* participation.h */
    size_t nfiles;
};

/**
 * Decode a Result: algorithm and files required (fs_result_files_decode:
 * safe distinct names, sha256; bytes when need_bytes, as the client agent
 * sends them), parties, shape, survivors and dropped (ids in 1..parties)
 * when present. Other members (singular values, privacy, ...) are the
 * caller's to read from j. @return 0, FS_EFORMAT, FS_EINVAL, FS_ERANGE.
 */
FS_WUR int fs_job_result_decode(const json_t *j, int need_bytes, struct fs_job_result *out,
                                struct fs_err *err);

/**
 * The body of PUT /v1/jobs/{job}/maskset: {"masking_url", "maskset",
 * "end_token"} (fs_job_maskset_decode reads it). New reference (it holds
 * the end token: decref it promptly) or NULL (out of memory).
 */
json_t *fs_job_maskset_encode(const struct fs_job_maskset *m);

#endif
