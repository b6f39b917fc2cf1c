/* Two small documents the CLI reads that no other codec covers
 * (openapi.yaml): the client agent's identity (GET /v1/identity, schema
 * Identity; `fedsvd agent identity`, the pins `fedsvd local` collects) and
 * the broadcast iterate of a power-method aggregation as a job's creator
 * reads it (GET /v1/jobs/{job}/aggregations/{r}: "iteration" and "z"; the
 * full document, for the parties, is fs_agent_agg_parse's).
 *
 * Decoders borrow the json_t and fill caller-owned structs; other members
 * are ignored. Error codes as in wire.h: FS_EFORMAT for a missing member or
 * a wrong JSON type, FS_EINVAL for a bad value. */
#ifndef FS_API_CLI_DOCS_H
#define FS_API_CLI_DOCS_H

#include <jansson.h>
#include <stdint.h>

#include "../lib/core/err.h"
#include "jobs.h"

/** {"algorithm": "ed25519", "fingerprint": 64 hex digits} of an identity key. New reference or
 * NULL. */
json_t *fs_identity_encode(const uint8_t pub[FS_JOB_KEY_LEN]);

/** The key of an Identity document: algorithm "ed25519", fingerprint 64 hex digits. */
FS_WUR int fs_identity_decode(const json_t *j, uint8_t pub[FS_JOB_KEY_LEN], struct fs_err *err);

/* What a job's creator reads of a power-method aggregation. */
struct fs_power_agg_view {
    uint32_t index;     /* r */
    uint32_t iteration; /* the iteration the broadcast Z follows */
    uint64_t z_rows, z_cols;
    char z_sha256[65]; /* of z.npy, 64 lower-case hex digits */
};

/**
 * Decode index, iteration and z ({"shape": [d, r], "sha256": hex}) of a
 * power-method aggregation. @return 0, FS_EFORMAT, FS_EINVAL.
 */
FS_WUR int fs_power_agg_view_decode(const json_t *j, struct fs_power_agg_view *out,
                                    struct fs_err *err);

#endif
