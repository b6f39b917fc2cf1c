/* The mask-set resource of docs/wire-fedsvd.md: the MaskSetSpec decoder
 * (POST /v1/masksets), its canonical stored form, mask-set ids, and the
 * public geometry derived from a spec (offsets, effective block sizes, the
 * number and size of each party's key files). Pure: no I/O, no secrets.
 *
 * Decoder error codes as in api/wire.h: FS_EFORMAT malformed (400: not an
 * object, missing field, wrong JSON type), FS_EINVAL well-formed but invalid
 * (422: unknown field, ranges, caps). */
#ifndef MASK_SPEC_H
#define MASK_SPEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "proto/fedsvd.h"

#define MASK_ID_LEN     34  /* "m-" + 32 lower-case hex digits */
#define MASK_JOB_ID_MAX 64  /* job_id, bytes */
#define MASK_URL_MAX    512 /* server_url, bytes */

/* ttl_s: the mask set is deleted (its seed destroyed, its keys gone) this
 * long after its creation unless its job ended (or the admin deleted it)
 * before. */
#define MASK_TTL_DEFAULT_S (7u * 86400u)
#define MASK_TTL_MAX_S     (90u * 86400u)

/* Caps from the configuration. */
struct mask_caps {
    uint32_t max_parties;
    uint64_t max_dim;
    uint64_t max_key_bytes;
    int stored; /* 1: a spec this server stored (an older version's may lack identities) */
};

struct mask_spec {
    char job_id[MASK_JOB_ID_MAX + 1];
    enum fs_fedsvd_partition partition;
    uint32_t parties;
    size_t *sizes;            /* owned: parties entries, rows (samples) or cols (features) */
    size_t shared;            /* the shared dimension: cols (samples) or rows (features) */
    size_t block_partitioned; /* requested max block of the secret mask; 0 = default */
    size_t block_shared;      /* requested max block of the shared mask; 0 = default */
    char server_url[MASK_URL_MAX + 1]; /* "" = none (not stored) */
    /* identities[i]: party i+1's pinned Ed25519 identity public key (its
     * fingerprint in the JSON), pairwise distinct; only a request signed by
     * it gets that party's keys (lib/crypto/reqsig.h). Owned, parties
     * entries; NULL only for a stored spec of an older version (no party can
     * fetch its keys then). */
    uint8_t (*identities)[32];
    uint32_t ttl_s; /* 1..MASK_TTL_MAX_S; MASK_TTL_DEFAULT_S when the spec has none */
    /* 1: the master seed came from --insecure-test-mask-seed (testseed.h);
     * kept in the stored form only, a request cannot set it */
    int deterministic;
};

/**
 * Decode and check a MaskSetSpec against caps.
 * @param out filled; release with mask_spec_clear (also after a failure).
 * @return 0, FS_EFORMAT, FS_EINVAL, FS_ENOMEM.
 */
FS_WUR int mask_spec_decode(const json_t *j, const struct mask_caps *caps, struct mask_spec *out,
                            struct fs_err *err);

/** Release what a spec owns and zero it. Accepts NULL. */
void mask_spec_clear(struct mask_spec *s);

/** Canonical JSON of the spec as stored (without server_url). New reference or NULL (OOM). */
json_t *mask_spec_encode(const struct mask_spec *s);

/** The library's job for this spec; job->sizes borrows s->sizes. */
void mask_spec_job(const struct mask_spec *s, struct fs_fedsvd_job *job);

/** Rows x cols of the federated matrix. */
void mask_spec_shape(const struct mask_spec *s, size_t *rows, size_t *cols);

/** Offset of party (1..parties) in the partitioned dimension. */
size_t mask_spec_offset(const struct mask_spec *s, uint32_t party);

/** Effective block sizes (what fs_fedsvd_maskset_new uses, clamped to the dimensions). */
void mask_spec_blocks(const struct mask_spec *s, size_t *partitioned, size_t *shared);

/** Exact total length of party's .npy key files (fs_fedsvd_keyfile_len; saturates). */
uint64_t mask_spec_key_bytes(const struct mask_spec *s, uint32_t party);

/** Number of slab pieces of party (0 for no such party). */
size_t mask_spec_pieces(const struct mask_spec *s, uint32_t party);

/** 1 when s looks like a mask-set id this server issues. */
int mask_id_valid(const char *s);

/** A fresh mask-set id into out. @return 0 or FS_ECRYPTO. */
FS_WUR int mask_id_generate(char out[MASK_ID_LEN + 1], struct fs_err *err);

#endif
