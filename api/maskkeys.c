/* Keys manifest codec: see maskkeys.h and docs/wire-fedsvd.md. */
#include "maskkeys.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hex.h"
#include "wire.h"

static const char *const FILE_KEY[2] = {"rows_file", "block_file"};

void fs_maskkeys_file_name(size_t p, enum fs_fedsvd_keyfile which, char *buf, size_t cap)
{
    snprintf(buf, cap, "%zu/%s", p, which == FS_FEDSVD_KEYFILE_ROWS ? "rows.npy" : "block.npy");
}

/* Exactly 2n lower-case hex digits. */
static int hex_decode(const char *s, uint8_t *out, size_t n)
{
    if (s == NULL || strlen(s) != 2 * n) {
        return -1;
    }
    return fs_hex_decode_lower(s, out, n);
}

static json_t *file_json(size_t p, const struct fs_fedsvd_piece_desc *d,
                         enum fs_fedsvd_keyfile which)
{
    char name[48];
    char hex[65];
    json_t *shape = which == FS_FEDSVD_KEYFILE_ROWS
                        ? json_pack("[I]", (json_int_t)d->r)
                        : json_pack("[I, I]", (json_int_t)d->r, (json_int_t)d->c);

    fs_maskkeys_file_name(p, which, name, sizeof name);
    fs_hex_encode(d->sha256[which], 32, hex);
    return json_pack("{s:s, s:s, s:b, s:o, s:I, s:s}", "name", name, "dtype",
                     which == FS_FEDSVD_KEYFILE_ROWS ? "<u8" : "<f8", "fortran_order",
                     which == FS_FEDSVD_KEYFILE_BLOCK, "shape", shape, "bytes",
                     (json_int_t)fs_fedsvd_keyfile_len(d->r, d->c, which), "sha256", hex);
}

json_t *fs_maskkeys_encode(const struct fs_maskkeys *m)
{
    const struct fs_fedsvd_keys *k;
    json_t *pieces;
    json_t *out = NULL;
    char *bs = NULL;
    char *gk = NULL;
    char id[65];
    uint64_t total = 0;

    if (m == NULL || (m->pieces == NULL && m->npieces > 0)) {
        return NULL;
    }
    k = &m->hdr;
    pieces = json_array();
    for (size_t p = 0; pieces != NULL && p < m->npieces; p++) {
        const struct fs_fedsvd_piece_desc *d = &m->pieces[p];
        json_t *o =
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "piece", (json_int_t)p, "block",
                      (json_int_t)d->block, "col0", (json_int_t)d->col0, "r", (json_int_t)d->r, "c",
                      (json_int_t)d->c, FILE_KEY[0], file_json(p, d, FS_FEDSVD_KEYFILE_ROWS),
                      FILE_KEY[1], file_json(p, d, FS_FEDSVD_KEYFILE_BLOCK));
        total += fs_fedsvd_keyfile_len(d->r, d->c, FS_FEDSVD_KEYFILE_ROWS) +
                 fs_fedsvd_keyfile_len(d->r, d->c, FS_FEDSVD_KEYFILE_BLOCK);
        if (o == NULL || json_array_append_new(pieces, o) != 0) {
            json_decref(pieces);
            pieces = NULL;
        }
    }
    bs = fs_b64url_encode(k->b_seed, 32);
    gk = fs_b64url_encode(k->group_key, 32);
    fs_hex_encode(m->keys_id, 32, id);
    if (pieces != NULL && bs != NULL && gk != NULL) {
        out = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:I, "
                        "s:o}",
                        "keys_id", id, "job_id", m->job_id, "maskset", m->maskset, "party",
                        (json_int_t)k->party, "parties", (json_int_t)k->parties, "partition",
                        k->partition == FS_FEDSVD_FEATURES ? "features" : "samples", "rows",
                        (json_int_t)k->rows, "cols", (json_int_t)k->cols, "offset",
                        (json_int_t)k->offset, "size", (json_int_t)k->size, "block_size_shared",
                        (json_int_t)k->block_b, "b_seed", bs, "group_key", gk, "bytes",
                        (json_int_t)total, "pieces", pieces);
        pieces = NULL;
    }
    json_decref(pieces);
    if (bs != NULL) {
        OPENSSL_cleanse(bs, strlen(bs));
    }
    if (gk != NULL) {
        OPENSSL_cleanse(gk, strlen(gk));
    }
    free(bs);
    free(gk);
    return out;
}

/* ------------------------------------------------------------ decode */

static int uint_field(const json_t *obj, const char *key, uint64_t max, uint64_t *out,
                      const char *where, struct fs_err *err)
{
    const json_t *v = json_object_get(obj, key);

    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max) {
        return fs_err_set(err, FS_EFORMAT, "keys manifest: %s%s: expected an integer 0..%llu",
                          where, key, (unsigned long long)max);
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int str_field(const json_t *obj, const char *key, char *buf, size_t cap, struct fs_err *err)
{
    const json_t *v = json_object_get(obj, key);

    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= cap) {
        return fs_err_set(err, FS_EFORMAT, "keys manifest: %s: expected a string of 1..%zu bytes",
                          key, cap - 1);
    }
    memcpy(buf, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

/* One file entry of piece p: everything but sha256 must be what encode writes. */
static int file_decode(const json_t *f, size_t p, struct fs_fedsvd_piece_desc *d,
                       enum fs_fedsvd_keyfile which, struct fs_err *err)
{
    json_t *want = file_json(p, d, which); /* with a zero digest for now */
    const char *keys[] = {"name", "dtype", "fortran_order", "shape", "bytes"};
    const json_t *sha = json_object_get(f, "sha256");
    int rc = 0;

    if (want == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    if (!json_is_object(f)) {
        rc = fs_err_set(err, FS_EFORMAT, "keys manifest: pieces[%zu].%s: expected an object", p,
                        FILE_KEY[which]);
    }
    for (size_t i = 0; rc == 0 && i < sizeof keys / sizeof keys[0]; i++) {
        if (!json_equal(json_object_get(f, keys[i]), json_object_get(want, keys[i]))) {
            rc = fs_err_set(err, FS_EFORMAT,
                            "keys manifest: pieces[%zu].%s.%s is not the one of a %zu x %zu piece",
                            p, FILE_KEY[which], keys[i], d->r, d->c);
        }
    }
    if (rc == 0 && hex_decode(json_string_value(sha), d->sha256[which], 32) != 0) {
        rc = fs_err_set(err, FS_EFORMAT, "keys manifest: pieces[%zu].%s.sha256: expected 64 hex", p,
                        FILE_KEY[which]);
    }
    json_decref(want);
    return rc;
}

static int piece_decode(const json_t *o, size_t p, struct fs_fedsvd_piece_desc *d,
                        struct fs_err *err)
{
    char where[40];
    uint64_t v[5];
    const char *keys[] = {"piece", "block", "col0", "r", "c"};
    int rc = 0;

    snprintf(where, sizeof where, "pieces[%zu].", p);
    if (!json_is_object(o)) {
        return fs_err_set(err, FS_EFORMAT, "keys manifest: %s: expected an object", where);
    }
    for (size_t i = 0; rc == 0 && i < 5; i++) {
        rc = uint_field(o, keys[i], FS_FEDSVD_MAX_DIM, &v[i], where, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (v[0] != p || v[3] < 1 || v[4] < 1) {
        return fs_err_set(err, FS_EFORMAT, "keys manifest: %s: piece %llu, %llu x %llu", where,
                          (unsigned long long)v[0], (unsigned long long)v[3],
                          (unsigned long long)v[4]);
    }
    d->block = (size_t)v[1];
    d->col0 = (size_t)v[2];
    d->r = (size_t)v[3];
    d->c = (size_t)v[4];
    rc = file_decode(json_object_get(o, FILE_KEY[0]), p, d, FS_FEDSVD_KEYFILE_ROWS, err);
    if (rc == 0) {
        rc = file_decode(json_object_get(o, FILE_KEY[1]), p, d, FS_FEDSVD_KEYFILE_BLOCK, err);
    }
    return rc;
}

static int seed_field(const json_t *j, const char *key, uint8_t out[32], struct fs_err *err)
{
    const json_t *v = json_object_get(j, key);

    if (!json_is_string(v) || fs_b64url_decode_exact(json_string_value(v), out, 32, NULL) != 0) {
        return fs_err_set(err, FS_EFORMAT, "keys manifest: %s: expected 32 bytes in base64url",
                          key);
    }
    return 0;
}

static int header_decode(const json_t *j, struct fs_maskkeys *out, struct fs_err *err)
{
    struct fs_fedsvd_keys *k = &out->hdr;
    const char *part = json_string_value(json_object_get(j, "partition"));
    const char *keys[] = {"party", "parties",          "rows", "cols", "offset",
                          "size",  "block_size_shared"};
    uint64_t v[7];
    int rc = 0;

    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "keys manifest: expected a JSON object");
    }
    if (hex_decode(json_string_value(json_object_get(j, "keys_id")), out->keys_id, 32) != 0) {
        return fs_err_set(err, FS_EFORMAT, "keys manifest: keys_id: expected 64 hex digits");
    }
    rc = str_field(j, "job_id", out->job_id, sizeof out->job_id, err);
    if (rc == 0) {
        rc = str_field(j, "maskset", out->maskset, sizeof out->maskset, err);
    }
    for (size_t i = 0; rc == 0 && i < 7; i++) {
        rc = uint_field(j, keys[i], FS_FEDSVD_MAX_DIM, &v[i], "", err);
    }
    if (rc == 0 &&
        (part == NULL || (strcmp(part, "samples") != 0 && strcmp(part, "features") != 0))) {
        rc = fs_err_set(err, FS_EFORMAT, "keys manifest: partition: samples or features");
    }
    if (rc == 0) {
        rc = seed_field(j, "b_seed", k->b_seed, err);
    }
    if (rc == 0) {
        rc = seed_field(j, "group_key", k->group_key, err);
    }
    if (rc != 0) {
        return rc;
    }
    k->party = (uint32_t)(v[0] <= UINT32_MAX ? v[0] : 0);
    k->parties = (uint32_t)(v[1] <= UINT32_MAX ? v[1] : 0);
    k->partition = strcmp(part, "features") == 0 ? FS_FEDSVD_FEATURES : FS_FEDSVD_SAMPLES;
    k->rows = (size_t)v[2];
    k->cols = (size_t)v[3];
    k->offset = (size_t)v[4];
    k->size = (size_t)v[5];
    k->block_b = (size_t)v[6];
    k->a_slab = NULL;
    return 0;
}

int fs_maskkeys_decode(const json_t *j, struct fs_maskkeys *out, struct fs_err *err)
{
    const json_t *arr;
    size_t n;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "maskkeys_decode: NULL argument");
    }
    memset(out, 0, sizeof *out);
    rc = header_decode(j, out, err);
    if (rc != 0) {
        return rc;
    }
    arr = json_object_get(j, "pieces");
    if (!json_is_array(arr) || json_array_size(arr) < 1) {
        return fs_err_set(err, FS_EFORMAT, "keys manifest: pieces: expected a nonempty array");
    }
    n = json_array_size(arr);
    if (n > FS_FEDSVD_KEYS_MAX_PIECES) {
        return fs_err_set(err, FS_ERANGE, "keys manifest: %zu pieces, at most %d", n,
                          FS_FEDSVD_KEYS_MAX_PIECES);
    }
    out->pieces = calloc(n, sizeof *out->pieces);
    if (out->pieces == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    out->npieces = n;
    for (size_t p = 0; rc == 0 && p < n; p++) {
        rc = piece_decode(json_array_get(arr, p), p, &out->pieces[p], err);
    }
    return rc;
}

void fs_maskkeys_clear(struct fs_maskkeys *m)
{
    if (m == NULL) {
        return;
    }
    free(m->pieces);
    OPENSSL_cleanse(m, sizeof *m);
}
