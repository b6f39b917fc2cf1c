/* The client-agent's operator documents (openapi.yaml, tag participations):
 * the participation request an operator posts with an invitation and a
 * dataset (POST /v1/participations), the participation status the agent
 * returns, and the per-file entries of a participation's result document.
 * Shared by the CLI (`fedsvd join`, `fedsvd participation`) and tests.
 *
 * Decoders borrow the json_t and fill caller-owned structs; unknown members
 * are ignored (an agent may add some). Error codes as in wire.h: FS_EFORMAT
 * for a missing member or wrong JSON type, FS_EINVAL for a bad value. */
#ifndef FS_API_PARTICIPATION_H
#define FS_API_PARTICIPATION_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/core/err.h"
#include "jobs.h"

#define FS_PARTICIPATION_ID_LEN   34  /* "p-" and 32 lower-case hex digits */
#define FS_PARTICIPATION_TEXT_MAX 512 /* error text kept, bytes with the NUL */
#define FS_RESULT_FILES_MAX       16  /* files in one result document */
#define FS_RESULT_NAME_MAX        64  /* bytes of a result file name, with the NUL */

/**
 * The body of POST /v1/participations: {"invitation": fs_invitation_encode(inv),
 * "dataset": {"path", "format"[, "id"]}}. path is the dataset's path on the
 * agent's machine; format "auto", "npy", "csv", "mtx" or "idx" (NULL: auto);
 * dataset_id the privacy-ledger name (NULL: absent). New reference (it holds
 * the party token: decref it promptly) or NULL (out of memory).
 */
json_t *fs_participation_request_encode(const struct fs_invitation *inv, const char *path,
                                        const char *format, const char *dataset_id);

/** 1 when s is a participation id as agents issue them ("p-" + 32 lower-case hex digits). */
int fs_participation_id_valid(const char *s);

/* GET /v1/participations/{id}: the fields a client shows. */
struct fs_participation {
    char id[FS_PARTICIPATION_ID_LEN + 1];
    char job_id[FS_JOB_ID_MAX + 1];
    uint32_t party;
    char algorithm[FS_JOB_ALGO_MAX + 1];
    char state[16]; /* "running", "done" or "failed" */
    char phase[48];
    double progress; /* 0..1 */
    uint64_t bytes_sent, bytes_received;
    char created_at[40], updated_at[40];
    char error[FS_PARTICIPATION_TEXT_MAX]; /* "" when null */
};

/**
 * Decode a Participation: id (valid), job_id, party >= 1, algorithm, state
 * (running|done|failed), phase, progress in [0, 1], byte counts, times,
 * error (string or null; longer texts are cut). @return 0, FS_EFORMAT, FS_EINVAL.
 */
FS_WUR int fs_participation_decode(const json_t *j, struct fs_participation *out,
                                   struct fs_err *err);

/**
 * The participation list (GET /v1/participations): {"participations": [...]}.
 * *items is the borrowed array (decode each entry with
 * fs_participation_decode), *n its size. @return 0 or FS_EFORMAT.
 */
FS_WUR int fs_participation_list_decode(const json_t *j, const json_t **items, size_t *n,
                                        struct fs_err *err);

/* One entry of a result document's "files". */
struct fs_result_file {
    char name[FS_RESULT_NAME_MAX]; /* [A-Za-z0-9_-]{1,48} + ".npy" */
    int has_bytes;                 /* "bytes" given (the client-agent gives it) */
    uint64_t bytes;
    char sha256[65]; /* 64 lower-case hex digits */
};

/**
 * Decode the "files" of a result document (GET .../result): at most
 * FS_RESULT_FILES_MAX entries with a safe, distinct name, a 64-hex-digit
 * sha256 (lower-cased) and, when present, bytes (a non-negative integer).
 * need_bytes: "bytes" is required. @return 0, FS_EFORMAT, FS_EINVAL, FS_ERANGE.
 */
FS_WUR int fs_result_files_decode(const json_t *j, int need_bytes, struct fs_result_file *files,
                                  size_t *n, struct fs_err *err);

#endif
