/* Key manifests of the masking server (api/maskkeys.c) as the agent reads
 * them: decode, encode back, and the assembler's checks of the geometry
 * (fs_fedsvd_keys_asm_new), with the manifest's keys_id and with the keys id
 * recomputed from the manifest (which gets past the digest to the range
 * checks). Bytes after the JSON document are a key file: its first byte
 * picks the piece and the file (rows.npy / block.npy), the rest is the file,
 * which the manifest is made to promise (digest, keys id) before the
 * assembler checks it (fs_fedsvd_keys_asm_add: length, .npy header, row
 * indices). Also the one-blob key decoder (fs_fedsvd_keys_decode) on the raw
 * bytes. */
#include "fuzz.h"

#include "api/maskkeys.h"
#include "lib/crypto/sha256.h"

/* The manifest promising `file` as file `which` of piece p, then the file. */
static void add_file(struct fs_maskkeys *m, size_t p, enum fs_fedsvd_keyfile which,
                     const uint8_t *file, size_t len)
{
    struct fs_err err = {0};
    fs_fedsvd_keys_asm *a = NULL;
    uint8_t id[32];

    if (fs_sha256(m->pieces[p].sha256[which], file, len, &err) != 0 ||
        fs_fedsvd_keys_id(&m->hdr, m->pieces, m->npieces, id, &err) != 0 ||
        fs_fedsvd_keys_asm_new(&m->hdr, m->pieces, m->npieces, id, (uint64_t)1 << 26, &a, &err) !=
            0) {
        fs_fedsvd_keys_asm_free(a);
        return;
    }
    if (fs_fedsvd_keys_asm_add(a, p, which, file, len, &err) == 0) {
        struct fs_fedsvd_keys *k = NULL;
        FUZZ_CHECK(len == fs_fedsvd_keys_asm_file_len(a, p, which));
        /* the same file twice is refused */
        FUZZ_CHECK(fs_fedsvd_keys_asm_add(a, p, which, file, len, &err) != 0);
        if (fs_fedsvd_keys_asm_finish(a, &k, &err) == 0) {
            FUZZ_CHECK(fs_fedsvd_keys_check(k, &err) == 0);
        }
        fs_fedsvd_keys_free(k);
    }
    fs_fedsvd_keys_asm_free(a);
}

static void assemble(const struct fs_maskkeys *m, const uint8_t id[32])
{
    struct fs_err err = {0};
    fs_fedsvd_keys_asm *a = NULL;

    if (fs_fedsvd_keys_asm_new(&m->hdr, m->pieces, m->npieces, id, (uint64_t)1 << 26, &a, &err) ==
        0) {
        for (size_t p = 0; p < m->npieces; p++) {
            FUZZ_CHECK(fs_fedsvd_keys_asm_file_len(a, p, FS_FEDSVD_KEYFILE_ROWS) > 0);
            FUZZ_CHECK(fs_fedsvd_keys_asm_file_len(a, p, FS_FEDSVD_KEYFILE_BLOCK) > 0);
        }
        FUZZ_CHECK(fs_fedsvd_keys_asm_file_len(a, m->npieces, FS_FEDSVD_KEYFILE_ROWS) == 0);
    }
    fs_fedsvd_keys_asm_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = NULL;
    struct fs_err err = {0};
    struct fs_maskkeys m;
    struct fs_fedsvd_keys *k = NULL;
    json_error_t je;
    size_t rest = 0;

    if (size > FUZZ_MAX_INPUT) {
        return 0;
    }
    if (fs_fedsvd_keys_decode(data, size, &k, &err) == 0) {
        FUZZ_CHECK(fs_fedsvd_keys_check(k, &err) == 0);
    }
    fs_fedsvd_keys_free(k);
    j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, &je);
    if (j == NULL) {
        return 0;
    }
    rest = (size_t)je.position <= size ? size - (size_t)je.position : 0;
    memset(&m, 0, sizeof m);
    if (fs_maskkeys_decode(j, &m, &err) == 0) {
        json_t *enc = fs_maskkeys_encode(&m);
        struct fs_maskkeys m2;
        uint8_t id[32];
        memset(&m2, 0, sizeof m2);
        FUZZ_CHECK(enc != NULL && fs_maskkeys_decode(enc, &m2, &err) == 0);
        FUZZ_CHECK(m2.npieces == m.npieces && memcmp(m2.keys_id, m.keys_id, 32) == 0);
        fs_maskkeys_clear(&m2);
        json_decref(enc);
        assemble(&m, m.keys_id);
        if (fs_fedsvd_keys_id(&m.hdr, m.pieces, m.npieces, id, &err) == 0) {
            assemble(&m, id);
        }
        if (rest > 0 && m.npieces > 0) {
            const uint8_t *file = data + (size - rest);
            add_file(&m, (file[0] >> 1) % m.npieces,
                     (file[0] & 1) ? FS_FEDSVD_KEYFILE_BLOCK : FS_FEDSVD_KEYFILE_ROWS, file + 1,
                     rest - 1);
        }
    }
    fs_maskkeys_clear(&m);
    json_decref(j);
    return 0;
}
