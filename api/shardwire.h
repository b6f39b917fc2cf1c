/* The peer documents of sharded aggregation (docs/sharding.md, openapi.yaml
 * tag shards), exchanged by a coordinator and its shard peers:
 *
 *   PUT  /v1/shards/{job}         the window spec (ShardWindowSpec)
 *   GET  /v1/shards/{job}         the window's status (ShardWindow)
 *   POST /v1/shards/{job}/finish  survivors, exponent and unmask plan (ShardFinish)
 *
 * and the coordinator's record of the shards' verdict on the masked input
 * ({"complete_on_shards": [ids]}, in the job's event journal). Pure codecs:
 * no HTTP, no globals. Error codes as in wire.h: FS_EFORMAT (400) for a
 * missing member or wrong JSON type, FS_EINVAL (422) for a well-formed but
 * wrong value, FS_ERANGE (413) for more entries than a cap.
 *
 * The unmask plan is secret (with one party's masked upload it removes that
 * party's self mask): its keys are decoded into caller buffers that are
 * wiped on every error path, and no error message ever holds key material. */
#ifndef FS_API_SHARDWIRE_H
#define FS_API_SHARDWIRE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/core/err.h"
#include "../lib/crypto/prg.h"
#include "jobs.h"

#define FS_SHARDWIRE_AUTH_LEN  32                  /* SHA-256 of a party's job token */
#define FS_SHARDWIRE_KEY_LEN   32                  /* an unmask stream key */
#define FS_SHARDWIRE_CHUNK_MIN 16u                 /* chunk_words */
#define FS_SHARDWIRE_CHUNK_MAX (1u << 22)          /* chunk_words */
#define FS_SHARDWIRE_WORDS_MAX ((uint64_t)1 << 40) /* total_words, offset, words */
#define FS_SHARDWIRE_ERROR_MAX 256                 /* a status's error text, with the NUL */

/* ---- the window spec (PUT /v1/shards/{job}) ---- */

struct fs_shard_window {
    uint32_t shard;       /* 1..shards-1 (shard 0 is the coordinator's own) */
    uint32_t round;       /* the job's SVD aggregation */
    uint32_t shards;      /* 2..FS_JOB_MAX_SHARDS */
    uint32_t parties;     /* 1..FS_JOB_MAX_PARTIES */
    uint32_t chunk_words; /* FS_SHARDWIRE_CHUNK_MIN..FS_SHARDWIRE_CHUNK_MAX */
    uint64_t total_words; /* rows * cols */
    uint64_t offset;      /* the shard's window [offset, offset + words) */
    uint64_t words;
    uint64_t rows, cols;                                /* the job's shape */
    const uint8_t (*party_auth)[FS_SHARDWIRE_AUTH_LEN]; /* parties entries */
    size_t *party_sizes;                                /* parties entries (rows of each) */
};

/**
 * The body {"shard", "round", "total_words", "offset", "words",
 * "chunk_words", "parties", "party_auth": [64 lower-case hex digits...],
 * "shape": [rows, cols], "shards", "party_sizes": [...]}; new reference or
 * NULL (out of memory).
 */
json_t *fs_shardwire_window_encode(const struct fs_shard_window *w);

/**
 * Decode and check a window spec: no unknown members, every integer in its
 * range, one party_auth and party_sizes entry per party, the sizes adding
 * up to rows (fs_fedsvd_job_check), total_words = rows * cols, and offset
 * and words exactly shard's window of the job's shard-blocked layout.
 * Allocates w->party_auth and w->party_sizes: release with
 * fs_shardwire_window_clear (nothing is left to release on failure).
 * @return 0, FS_EFORMAT, FS_EINVAL, FS_ENOMEM.
 */
FS_WUR int fs_shardwire_window_decode(const json_t *j, struct fs_shard_window *w,
                                      struct fs_err *err);

/** Free what fs_shardwire_window_decode allocated; zeroes *w. */
void fs_shardwire_window_clear(struct fs_shard_window *w);

/* ---- the window's status (GET /v1/shards/{job}, and the PUT and finish answers) ---- */

enum fs_shard_state {
    FS_SHARD_RECEIVING = 0,
    FS_SHARD_FINISHING,
    FS_SHARD_DONE,
    FS_SHARD_FAILED,
};

/** "receiving", "finishing", "done", "failed" ("unknown" out of range). */
const char *fs_shard_state_name(enum fs_shard_state s);

struct fs_shard_status {
    char job[FS_JOB_ID_MAX + 1];
    uint32_t shard;
    enum fs_shard_state state;
    uint32_t parties;  /* the job's parties: complete has this many entries */
    uint8_t *complete; /* caller's buffer: complete[p-1] = 1 when party p's upload is complete */
    uint64_t offset, words, chunks, chunk_words, peak_rss_bytes;
    int has_finish_s; /* finish_s given (once done) */
    double finish_s;
    char error[FS_SHARDWIRE_ERROR_MAX]; /* "" for null */
};

/**
 * The status document {"job", "shard", "state", "complete": [ids],
 * "offset", "words", "chunks", "chunk_words", "peak_rss_bytes", "error":
 * text|null, "finish_s": seconds|null}. complete may be NULL (no party).
 * New reference or NULL (out of memory).
 */
json_t *fs_shardwire_status_encode(const struct fs_shard_status *s);

/**
 * Decode a status. The caller sets s->parties and s->complete (parties
 * bytes, or NULL to skip the ids' bitmap) first. Checks: a valid job id,
 * shard 1..FS_JOB_MAX_SHARDS-1, a known state, complete: at most parties
 * increasing ids 1..parties, non-negative counts, error a string (cut to
 * FS_SHARDWIRE_ERROR_MAX - 1 bytes) or null, finish_s a non-negative
 * number or null or absent. Unknown members are ignored (a newer peer may
 * add some). @return 0, FS_EFORMAT, FS_EINVAL, FS_ERANGE.
 */
FS_WUR int fs_shardwire_status_decode(const json_t *j, struct fs_shard_status *s,
                                      struct fs_err *err);

/* ---- the finish (POST /v1/shards/{job}/finish) ---- */

struct fs_shard_finish {
    uint32_t *u3; /* caller's buffer of u3_cap entries: the survivors, increasing */
    size_t u3_cap;
    size_t nu3;
    int exponent; /* the public fixed-point exponent, FS_WIRE_MIN_EXP..FS_WIRE_MAX_EXP */
    struct fs_prg_term *plan; /* caller's buffer of plan_cap entries: secret */
    size_t plan_cap;
    size_t nplan;
};

/**
 * Most plan terms for nu3 survivors among n parties: every survivor's self
 * mask plus, for each dropped party, one pairwise key per survivor:
 * nu3 + (n - nu3) * nu3 (0 when nu3 > n).
 */
uint64_t fs_shardwire_plan_max(uint32_t n, size_t nu3);

/** Largest finish body, in bytes, for a window of n parties (a cap for the HTTP body). */
uint64_t fs_shardwire_finish_cap(uint32_t n);

/**
 * The sizes of a finish body, checked as far as they go without decoding
 * (an object; u3 an array of 1..parties entries; plan an array of at
 * most fs_shardwire_plan_max(parties, nu3) entries): what to allocate
 * before fs_shardwire_finish_decode. @return 0, FS_EFORMAT, FS_ERANGE.
 */
FS_WUR int fs_shardwire_finish_sizes(const json_t *j, uint32_t parties, size_t *nu3, size_t *nplan,
                                     struct fs_err *err);

/**
 * Decode {"u3": [ids], "exponent": E, "plan": [{"key": b64url of 32 bytes,
 * "sign": 1|-1}]} for a window of `parties` parties into f's buffers: no
 * unknown members (in the body or a term), u3 increasing ids 1..parties,
 * the counts as fs_shardwire_finish_sizes and within f's caps (FS_ERANGE),
 * at least one term per survivor (its self mask; FS_EINVAL).
 * On failure f->plan[0..plan_cap) is wiped and f->nplan, f->nu3 are 0.
 * @return 0, FS_EFORMAT, FS_EINVAL, FS_ERANGE.
 */
FS_WUR int fs_shardwire_finish_decode(const json_t *j, uint32_t parties, struct fs_shard_finish *f,
                                      struct fs_err *err);

/**
 * The finish body as compact JSON text (u3[0..nu3), the exponent,
 * plan[0..nplan); a sign > 0 is 1, otherwise -1). Secret: the caller
 * wipes (fs_wipe) and frees it; the intermediate copies are wiped here.
 * NULL when out of memory.
 */
char *fs_shardwire_finish_encode(const uint32_t *u3, size_t nu3, int exponent,
                                 const struct fs_prg_term *plan, size_t nplan);

/** Wipe, in place, the key strings of a (decoded or not) finish document before it is freed. */
void fs_shardwire_finish_wipe(json_t *j);

/* ---- the shards' verdict on the masked input (the close event) ---- */

/** {"complete_on_shards": [ids]}; new reference or NULL. */
json_t *fs_shardwire_verdict_encode(const uint32_t *ids, size_t k);

/**
 * Decode a verdict of a job of n parties into in[0..n] (in[p] = 1 for a
 * party complete on every shard; in[0] = 0): increasing ids 1..n.
 * @return 0, FS_EFORMAT, FS_EINVAL, FS_ERANGE.
 */
FS_WUR int fs_shardwire_verdict_decode(const json_t *j, uint32_t n, uint8_t *in,
                                       struct fs_err *err);

#endif
