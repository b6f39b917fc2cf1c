/* Key generation for one party: the only place the masking server touches
 * mask material. Reads nothing and writes nothing on disk: the caller passes
 * the mask set's spec and master seed; the keys come back as one
 * fs_fedsvd_keys_encode blob in a sealed anonymous memory file (memfd), so
 * the HTTP layer can send it with sendfile and the kernel discards the pages
 * when the response is done (no unwiped copy in the heap). Every
 * intermediate (the mask set, the slab, the encoding buffer) is wiped.
 *
 * At most `concurrency` generations run at once (each holds the slab and
 * its encoding, about 2-3x the blob); the others wait for a slot.
 * Thread-safe. */
#ifndef MSK_KEYGEN_H
#define MSK_KEYGEN_H

#include <stdint.h>

#include "core/err.h"
#include "spec.h"
#include "store.h"

typedef struct msk_keygen msk_keygen;

/** New generator. @param out free with msk_keygen_free. */
FS_WUR int msk_keygen_new(unsigned concurrency, msk_keygen **out, struct fs_err *err);

/** Wake waiters and make new calls fail with FS_ESTATE (shutdown). Idempotent. */
void msk_keygen_close(msk_keygen *kg);

/** Free (after every call has returned). Accepts NULL. */
void msk_keygen_free(msk_keygen *kg);

/* The result of one generation: a file descriptor (fd >= 0) of len bytes,
 * or, when memfd is unavailable, a malloc'd buffer (buf != NULL) the caller
 * must wipe (fs_fedsvd_wipe_free) or hand to the HTTP layer. */
struct msk_keys_out {
    int fd;
    uint8_t *buf;
    uint64_t len;
    double seconds; /* generation + encoding time, without the wait for a slot */
};

/**
 * Generate party's keys of the mask set (spec, seed).
 * @param seed borrowed; the caller wipes it.
 * @param out filled on success (release with msk_keys_out_release).
 * @return 0, FS_ESTATE (closing), FS_EINVAL, FS_ENOMEM, FS_EIO, ...
 */
FS_WUR int msk_keygen_party(msk_keygen *kg, const struct msk_spec *spec,
                            const uint8_t seed[MSK_SEED_LEN], uint32_t party,
                            struct msk_keys_out *out, struct fs_err *err);

/** Close / wipe and free whatever out holds. Accepts an empty out. */
void msk_keys_out_release(struct msk_keys_out *out);

struct msk_keygen_stats {
    uint64_t running;
    uint64_t waiting;
    uint64_t done;      /* generations completed */
    uint64_t failed;    /* generations that failed */
    double seconds_sum; /* over the completed ones */
    double seconds_max;
};

/** A snapshot of the counters (for /metrics). */
void msk_keygen_stats(msk_keygen *kg, struct msk_keygen_stats *out);

#endif
