/* Key generation and the key cache: the only place the masking server
 * touches mask material. Reads nothing and writes nothing on disk: the
 * caller passes the mask set's spec and master seed.
 *
 * A party's keys are generated once (fs_fedsvd_maskset_party, seconds to
 * minutes) into what is served (docs/wire-fedsvd.md): the manifest
 * (api/maskkeys.h) and two .npy files per slab piece
 * (fs_fedsvd_keyfile_write), each file in its own sealed anonymous memory
 * file (memfd; a heap buffer when memfd is unavailable). Every request for
 * that party's manifest or files is then served from this entry, never by
 * generating again, until the entry is dropped:
 *   - every file of it has been handed out once (the party has its keys;
 *     a later request generates again, bit-identical on this server);
 *   - the mask set is deleted (mask_keygen_drop);
 *   - it was not used for ttl_s seconds (a sweeper thread checks);
 *   - the entries together exceed cache_bytes: least recently used first
 *     (never the one just generated);
 *   - the server stops (mask_keygen_free).
 * Dropping closes the cache's memfds: the kernel frees the pages once the
 * responses still sending them (each has its own dup) are done; heap copies
 * are wiped. Nothing of the slab stays in the heap.
 *
 * Each mask set also has a block cache (lib/la/mask.h fs_mask_cache, at
 * most 64 MiB): neighbouring parties' slabs meet inside a diagonal block of
 * A, and the second one reuses the block's reflectors and the shared
 * 128-column chunk that the first drew and formed instead of doing them
 * again (bit-identical keys either way). Its entries hold mask material in
 * the heap, wiped when freed: as soon as every column of their block has been
 * handed out, and with the whole cache when the mask set is deleted, unused
 * for ttl_s, or the server stops.
 *
 * At most `concurrency` generations run at once (each holds the slab and
 * one 1 MiB buffer, the memfds about the size of the slab); the others wait
 * for a slot. Two requests for the same party share one generation.
 * Thread-safe. */
#ifndef MASK_KEYGEN_H
#define MASK_KEYGEN_H

#include <stdint.h>

#include "core/err.h"
#include "proto/fedsvd.h"
#include "spec.h"
#include "store.h"

typedef struct mask_keygen mask_keygen;

struct mask_keygen_opts {
    unsigned concurrency; /* generations at once, >= 1 */
    uint64_t cache_bytes; /* soft cap of the cached files */
    unsigned ttl_s;       /* drop entries unused this long, >= 1 */
};

/** New generator (starts the sweeper thread). @param out free with mask_keygen_free. */
FS_WUR int mask_keygen_new(const struct mask_keygen_opts *o, mask_keygen **out, struct fs_err *err);

/** Wake waiters and make new calls fail with FS_EUNAVAILABLE (shutdown). Idempotent. */
void mask_keygen_close(mask_keygen *kg);

/** Stop the sweeper and free every entry (after every call has returned). Accepts NULL. */
void mask_keygen_free(mask_keygen *kg);

/* A party's keys as served; reference-counted, read-only once returned. */
typedef struct mask_keyset mask_keyset;

/**
 * Party's keys of mask set id: the cached entry, or generated now from
 * (spec, seed) (waits for a generation slot, or for another request's
 * generation of the same party).
 * @param seed borrowed; the caller wipes it.
 * @param generated if not NULL, 1 when this call generated the entry.
 * @param out release with mask_keyset_put.
 * @return 0, FS_EUNAVAILABLE (closing), FS_EINVAL, FS_ENOMEM, FS_EIO, ...
 */
FS_WUR int mask_keygen_get(mask_keygen *kg, const char *id, const struct mask_spec *spec,
                           const uint8_t seed[MASK_SEED_LEN], uint32_t party, mask_keyset **out,
                           int *generated, struct fs_err *err);

/** Release a reference. Accepts NULL. */
void mask_keyset_put(mask_keygen *kg, mask_keyset *ks);

/** Drop every cached entry of mask set id (DELETE). */
void mask_keygen_drop(mask_keygen *kg, const char *id);

/* Something to send: fd >= 0 (owned: hand to fs_http_resp_fd) or buf (owned, wipe). */
struct mask_blob {
    int fd;
    uint8_t *buf;
    uint64_t len;
};

/** Close / wipe and free what b holds. Accepts an empty b. */
void mask_blob_release(struct mask_blob *b);

/** The manifest JSON (holds the seeds) as a new blob. */
FS_WUR int mask_keyset_manifest(const mask_keyset *ks, struct mask_blob *out, struct fs_err *err);

/** Number of slab pieces. */
size_t mask_keyset_npieces(const mask_keyset *ks);

/** keys_id, 64 lower-case hex digits. */
const char *mask_keyset_id(const mask_keyset *ks);

/** Generation time of the entry (seconds, without the wait for a slot). */
double mask_keyset_seconds(const mask_keyset *ks);

/** Total bytes of the entry's files. */
uint64_t mask_keyset_bytes(const mask_keyset *ks);

/**
 * File `which` of piece p as a new blob, and count it as handed out (the
 * entry is dropped once all are). @return 0, FS_ENOTFOUND (p out of range), FS_EIO.
 */
FS_WUR int mask_keyset_file(mask_keygen *kg, mask_keyset *ks, size_t p,
                            enum fs_fedsvd_keyfile which, struct mask_blob *out,
                            struct fs_err *err);

struct mask_keygen_stats {
    uint64_t running;
    uint64_t waiting;
    uint64_t done;      /* generations completed */
    uint64_t failed;    /* generations that failed */
    double seconds_sum; /* over the completed ones */
    double seconds_max;
    uint64_t cache_entries; /* entries in the cache now */
    uint64_t cache_bytes;   /* their files' bytes */
    uint64_t cache_hits;    /* requests served from an existing entry */
    uint64_t block_hits;    /* slab blocks found in a mask set's block cache */
    uint64_t block_misses;  /* slab blocks drawn anew */
    uint64_t block_bytes;   /* bytes in the block caches now */
};

/** A snapshot of the counters (for /metrics). */
void mask_keygen_stats(mask_keygen *kg, struct mask_keygen_stats *out);

/** 1 once every file of the entry was handed out (mask_keyset_file). */
int mask_keyset_all_served(mask_keygen *kg, const mask_keyset *ks);

#endif
