/* The keys manifest of the masking server (docs/wire-fedsvd.md, GET
 * /v1/masksets/{maskset}/parties/{party}/keys): one party's geometry, the
 * shared mask's seed, the group key and the list of slab pieces, each with
 * its two .npy files (name, shape, bytes, SHA-256; the file format is
 * lib/proto/fedsvd.h's fs_fedsvd_keyfile_*), bound together by keys_id.
 * Encoded by the masking server, decoded by the client agent (and tests).
 *
 * The manifest holds secrets (b_seed, group_key): wipe its text after use
 * and clear decoded manifests with fs_maskkeys_clear. */
#ifndef FS_API_MASKKEYS_H
#define FS_API_MASKKEYS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/core/err.h"
#include "../lib/proto/fedsvd.h"

#define FS_MASKKEYS_ID_MAX 64 /* job_id / maskset, bytes without NUL */

struct fs_maskkeys {
    char job_id[FS_MASKKEYS_ID_MAX + 1];
    char maskset[FS_MASKKEYS_ID_MAX + 1];
    struct fs_fedsvd_keys hdr; /* every field but a_slab (NULL) */
    size_t npieces;
    struct fs_fedsvd_piece_desc *pieces; /* owned, npieces */
    uint8_t keys_id[32];
};

/** The file name of piece p relative to the manifest's URL: "<p>/rows.npy" or "<p>/block.npy". */
void fs_maskkeys_file_name(size_t p, enum fs_fedsvd_keyfile which, char *buf, size_t cap);

/** The manifest as JSON (new reference, NULL on OOM or a bad argument). */
json_t *fs_maskkeys_encode(const struct fs_maskkeys *m);

/**
 * Decode a manifest. Checks types and that every piece's file entries are
 * the ones fs_maskkeys_encode writes for that piece (name, dtype, order,
 * shape, bytes); whether the pieces fit the geometry and keys_id is
 * fs_fedsvd_keys_asm_new's job. Unknown fields are ignored.
 * @param out filled; release with fs_maskkeys_clear (also after a failure).
 * @return 0, FS_EFORMAT, FS_ERANGE (more than FS_FEDSVD_KEYS_MAX_PIECES), FS_ENOMEM.
 */
FS_WUR int fs_maskkeys_decode(const json_t *j, struct fs_maskkeys *out, struct fs_err *err);

/** Free the pieces and wipe the struct (seeds). Accepts NULL. */
void fs_maskkeys_clear(struct fs_maskkeys *m);

#endif
