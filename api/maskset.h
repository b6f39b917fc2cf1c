/* The masking server's mask-set resource as its client (the job's creator:
 * `fedsvd job create`, `fedsvd local`) speaks it (openapi.yaml, tag
 * masksets; docs/wire-fedsvd.md): the MaskSetSpec it posts (POST
 * /v1/masksets) and the MaskSetCreated reply. The server's own decoder of
 * the spec checks its caps against its configuration.
 *
 * The reply holds the mask set's end token (a secret): wipe the decoded
 * struct with fs_maskset_created_wipe. */
#ifndef FS_API_MASKSET_H
#define FS_API_MASKSET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/core/err.h"
#include "jobs.h"

/* POST /v1/masksets (schema MaskSetSpec). */
struct fs_maskset_request {
    char job_id[FS_JOB_ID_MAX + 1];     /* the aggregation-server job the mask set is for */
    int partition;                      /* enum fs_job_partition */
    uint32_t parties;                   /* 1..FS_JOB_MAX_PARTIES */
    uint64_t sizes[FS_JOB_MAX_PARTIES]; /* party i+1's rows (samples) or cols (features) */
    uint64_t shared;                    /* the other dimension: cols (samples) or rows (features) */
    uint8_t identities[FS_JOB_MAX_PARTIES][FS_JOB_KEY_LEN]; /* party i+1's pinned identity */
    uint64_t block_size;                 /* largest mask block, both masks; 0 = absent */
    char server_url[FS_JOB_URL_MAX + 1]; /* base URL written into keys_url; "" = absent */
};

/**
 * Encode a MaskSetSpec: job_id, partition, parties [{party, rows|cols,
 * identity (fingerprint)}], cols (samples) or rows (features), block_size
 * when > 0, server_url when set. New reference or NULL (OOM, parties out
 * of range).
 */
json_t *fs_maskset_request_encode(const struct fs_maskset_request *r);

/* One entry of the reply's "parties". */
struct fs_maskset_party {
    uint32_t party;
    uint8_t identity[FS_JOB_KEY_LEN];
    char keys_url[FS_JOB_URL_MAX + FS_JOB_ID_MAX + 64];
};

/* The reply of POST /v1/masksets (schema MaskSetCreated), client side. */
struct fs_maskset_created {
    char id[FS_MASKSET_ID_MAX + 1];        /* maskset.id */
    char end_token[FS_AUTH_TOKEN_MAX + 1]; /* a secret */
    uint32_t nparties;
    struct fs_maskset_party parties[FS_JOB_MAX_PARTIES]; /* in reply order */
};

/**
 * Decode a MaskSetCreated for a request of `parties` parties: maskset.id (1..64
 * of [A-Za-z0-9._-]), end_token (a valid token), exactly `parties` entries,
 * entry i for party i+1 with its identity fingerprint and a keys_url.
 * Other members are ignored. @return 0, FS_EFORMAT, FS_EINVAL.
 */
FS_WUR int fs_maskset_created_decode(const json_t *j, uint32_t parties,
                                     struct fs_maskset_created *out, struct fs_err *err);

/** Wipe a decoded reply (the end token). */
void fs_maskset_created_wipe(struct fs_maskset_created *c);

#endif
