/* MaskSetSpec codec and geometry: see spec.h and docs/wire-fedsvd.md. */
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hex.h"
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "la/mask.h"

static const char *const TOP_KEYS[] = {"job_id",     "partition",  "parties", "cols", "rows",
                                       "block_size", "server_url", "ttl_s",   NULL};
/* the stored form may also say "deterministic_masks": true (never a request) */
static const char *const STORED_TOP_KEYS[] = {
    "job_id", "partition",           "parties", "cols", "rows", "block_size", "server_url",
    "ttl_s",  "deterministic_masks", NULL};

static int key_known(const char *key, const char *const *keys)
{
    for (size_t i = 0; keys[i] != NULL; i++) {
        if (strcmp(key, keys[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

static int unknown_fields(const json_t *obj, const char *const *keys, const char *where,
                          struct fs_err *err)
{
    const char *key;
    json_t *v;

    json_object_foreach((json_t *)obj, key, v)
    {
        (void)v;
        if (!key_known(key, keys)) {
            return fs_err_set(err, FS_EINVAL, "%sunknown field \"%.64s\"", where, key);
        }
    }
    return 0;
}

/* An integer in 1..max; *present = 0 when absent or null and that is allowed. */
static int size_field(const json_t *obj, const char *key, uint64_t max, int required, size_t *out,
                      const char *where, struct fs_err *err)
{
    json_t *v = json_object_get(obj, key);
    json_int_t x;

    *out = 0;
    if (v == NULL || json_is_null(v)) {
        if (required) {
            return fs_err_set(err, FS_EFORMAT, "%s%s: missing", where, key);
        }
        return 0;
    }
    if (!json_is_integer(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s%s: expected an integer", where, key);
    }
    x = json_integer_value(v);
    if (x < 1 || (uint64_t)x > max) {
        return fs_err_set(err, FS_EINVAL, "%s%s: %lld is outside 1..%llu", where, key, (long long)x,
                          (unsigned long long)max);
    }
    *out = (size_t)x;
    return 0;
}

static int job_id_ok(const char *s)
{
    size_t n = strlen(s);

    if (n < 1 || n > MASK_JOB_ID_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) {
            return 0;
        }
    }
    return 1;
}

static int url_ok(const char *s)
{
    size_t n = strlen(s);

    if (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0) {
        return 0;
    }
    if (n <= 8 || s[n - 1] == '/') {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\') {
            return 0;
        }
    }
    return 1;
}

static int string_field(const json_t *obj, const char *key, int required, const char **out,
                        struct fs_err *err)
{
    json_t *v = json_object_get(obj, key);

    *out = NULL;
    if (v == NULL || json_is_null(v)) {
        return required ? fs_err_set(err, FS_EFORMAT, "%s: missing", key) : 0;
    }
    if (!json_is_string(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected a string", key);
    }
    if (json_string_length(v) != strlen(json_string_value(v))) {
        return fs_err_set(err, FS_EINVAL, "%s: contains NUL", key);
    }
    *out = json_string_value(v);
    return 0;
}

/* parties[i].identity: a fingerprint (64 hex digits), distinct from the earlier parties'. */
static int identity_field(const json_t *p, size_t i, const struct mask_caps *caps,
                          struct mask_spec *s, struct fs_err *err)
{
    json_t *v = json_object_get(p, "identity");
    struct fs_err e2 = {0};

    if (v == NULL && caps->stored && i == 0) {
        return 0; /* stored by an older version: no identities at all */
    }
    if (v == NULL || json_is_null(v)) {
        return fs_err_set(err, FS_EFORMAT,
                          "parties[%zu].identity: missing (the party agent's identity "
                          "fingerprint, 64 hex digits: only a request signed by that key gets "
                          "its keys)",
                          i);
    }
    if (!json_is_string(v)) {
        return fs_err_set(err, FS_EFORMAT, "parties[%zu].identity: expected a string", i);
    }
    if (s->identities == NULL) {
        s->identities = calloc(s->parties, sizeof *s->identities);
        if (s->identities == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory");
        }
    }
    if (fs_ed25519_fpr_parse(json_string_value(v), s->identities[i], &e2) != 0) {
        return fs_err_set(err, FS_EINVAL, "parties[%zu].identity: %s", i, e2.msg);
    }
    for (size_t k = 0; k < i; k++) {
        if (memcmp(s->identities[k], s->identities[i], sizeof s->identities[i]) == 0) {
            return fs_err_set(err, FS_EINVAL,
                              "parties[%zu].identity: the same as parties[%zu]'s (each party "
                              "has its own identity key)",
                              i, k);
        }
    }
    return 0;
}

static int decode_parties(const json_t *arr, const struct mask_caps *caps, struct mask_spec *s,
                          struct fs_err *err)
{
    static const char *const ROW_KEYS[] = {"party", "rows", "identity", NULL};
    static const char *const COL_KEYS[] = {"party", "cols", "identity", NULL};
    const char *size_key = s->partition == FS_FEDSVD_SAMPLES ? "rows" : "cols";
    size_t n;
    uint64_t total = 0;

    if (!json_is_array(arr)) {
        return fs_err_set(err, FS_EFORMAT, "parties: expected an array");
    }
    n = json_array_size(arr);
    if (n < 1 || n > caps->max_parties) {
        return fs_err_set(err, FS_EINVAL, "parties: %zu entries, expected 1..%u", n,
                          caps->max_parties);
    }
    s->sizes = calloc(n, sizeof *s->sizes);
    if (s->sizes == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    s->parties = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        const json_t *p = json_array_get(arr, i);
        char where[48];
        size_t id = 0;
        int rc;

        snprintf(where, sizeof where, "parties[%zu].", i);
        if (!json_is_object(p)) {
            return fs_err_set(err, FS_EFORMAT, "parties[%zu]: expected an object", i);
        }
        if (json_object_get(p, s->partition == FS_FEDSVD_SAMPLES ? "cols" : "rows") != NULL) {
            return fs_err_set(err, FS_EINVAL, "parties[%zu]: a %s job gives each party \"%s\"", i,
                              s->partition == FS_FEDSVD_SAMPLES ? "samples" : "features", size_key);
        }
        rc = unknown_fields(p, s->partition == FS_FEDSVD_SAMPLES ? ROW_KEYS : COL_KEYS, where, err);
        if (rc == 0) {
            rc = size_field(p, "party", caps->max_parties, 1, &id, where, err);
        }
        if (rc == 0 && id != i + 1) {
            rc = fs_err_set(err, FS_EINVAL,
                            "parties[%zu].party: %zu, expected %zu (list parties "
                            "1..K in order)",
                            i, id, i + 1);
        }
        if (rc == 0) {
            rc = size_field(p, size_key, caps->max_dim, 1, &s->sizes[i], where, err);
        }
        if (rc == 0 && (i == 0 || s->identities != NULL)) {
            rc = identity_field(p, i, caps, s, err);
        } else if (rc == 0 && json_object_get(p, "identity") != NULL) {
            rc = fs_err_set(err, FS_EINTERNAL, "stored spec: identities only for some parties");
        }
        if (rc != 0) {
            return rc;
        }
        total += s->sizes[i]; /* <= 1000 * 2^31: no overflow */
    }
    if (total > caps->max_dim) {
        return fs_err_set(err, FS_EINVAL, "parties: %s add up to %llu, more than --max-dim %llu",
                          size_key, (unsigned long long)total, (unsigned long long)caps->max_dim);
    }
    return 0;
}

static int decode_blocks(const json_t *v, const struct mask_caps *caps, struct mask_spec *s,
                         struct fs_err *err)
{
    static const char *const KEYS[] = {"partitioned", "shared", NULL};
    int rc;

    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x < 1 || (uint64_t)x > caps->max_dim) {
            return fs_err_set(err, FS_EINVAL, "block_size: %lld is outside 1..%llu", (long long)x,
                              (unsigned long long)caps->max_dim);
        }
        s->block_partitioned = (size_t)x;
        s->block_shared = (size_t)x;
        return 0;
    }
    if (!json_is_object(v)) {
        return fs_err_set(err, FS_EFORMAT, "block_size: expected null, an integer or an object");
    }
    rc = unknown_fields(v, KEYS, "block_size.", err);
    if (rc == 0) {
        rc = size_field(v, "partitioned", caps->max_dim, 0, &s->block_partitioned, "block_size.",
                        err);
    }
    if (rc == 0) {
        rc = size_field(v, "shared", caps->max_dim, 0, &s->block_shared, "block_size.", err);
    }
    return rc;
}

static int decode(const json_t *j, const struct mask_caps *caps, struct mask_spec *s,
                  struct fs_err *err)
{
    const char *str = NULL;
    const char *shared_key;
    int rc;

    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "mask set spec: expected a JSON object");
    }
    rc = unknown_fields(j, caps->stored ? STORED_TOP_KEYS : TOP_KEYS, "", err);
    if (rc == 0) {
        rc = string_field(j, "job_id", 1, &str, err);
    }
    s->deterministic = json_is_true(json_object_get(j, "deterministic_masks"));
    if (rc != 0) {
        return rc;
    }
    if (!job_id_ok(str)) {
        return fs_err_set(err, FS_EINVAL,
                          "job_id: 1..%d characters [A-Za-z0-9._-], starting with a letter or "
                          "digit",
                          MASK_JOB_ID_MAX);
    }
    memcpy(s->job_id, str, strlen(str) + 1);
    rc = string_field(j, "partition", 1, &str, err);
    if (rc != 0) {
        return rc;
    }
    if (strcmp(str, "samples") == 0) {
        s->partition = FS_FEDSVD_SAMPLES;
    } else if (strcmp(str, "features") == 0) {
        s->partition = FS_FEDSVD_FEATURES;
    } else {
        return fs_err_set(err, FS_EINVAL, "partition: expected \"samples\" or \"features\"");
    }
    shared_key = s->partition == FS_FEDSVD_SAMPLES ? "cols" : "rows";
    if (json_object_get(j, s->partition == FS_FEDSVD_SAMPLES ? "rows" : "cols") != NULL) {
        return fs_err_set(err, FS_EINVAL,
                          "%s: not allowed for partition %s (the total is the sum of the "
                          "parties' sizes); give \"%s\"",
                          s->partition == FS_FEDSVD_SAMPLES ? "rows" : "cols",
                          s->partition == FS_FEDSVD_SAMPLES ? "samples" : "features", shared_key);
    }
    if (json_object_get(j, "parties") == NULL) {
        return fs_err_set(err, FS_EFORMAT, "parties: missing");
    }
    rc = decode_parties(json_object_get(j, "parties"), caps, s, err);
    if (rc == 0) {
        rc = size_field(j, shared_key, caps->max_dim, 1, &s->shared, "", err);
    }
    if (rc == 0) {
        rc = decode_blocks(json_object_get(j, "block_size"), caps, s, err);
    }
    if (rc == 0) {
        size_t ttl = 0;
        rc = size_field(j, "ttl_s", MASK_TTL_MAX_S, 0, &ttl, "", err);
        s->ttl_s = ttl != 0 ? (uint32_t)ttl : MASK_TTL_DEFAULT_S;
    }
    if (rc == 0) {
        rc = string_field(j, "server_url", 0, &str, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (str != NULL) {
        if (strlen(str) > MASK_URL_MAX || !url_ok(str)) {
            return fs_err_set(err, FS_EINVAL,
                              "server_url: an http:// or https:// URL of at most %d bytes, no "
                              "spaces, no trailing '/'",
                              MASK_URL_MAX);
        }
        memcpy(s->server_url, str, strlen(str) + 1);
    }
    return 0;
}

int mask_spec_decode(const json_t *j, const struct mask_caps *caps, struct mask_spec *out,
                     struct fs_err *err)
{
    struct fs_fedsvd_job job;
    struct fs_err jerr = {0};
    int rc;

    memset(out, 0, sizeof *out);
    rc = decode(j, caps, out, err);
    if (rc != 0) {
        return rc;
    }
    for (uint32_t p = 1; p <= out->parties; p++) {
        uint64_t b = mask_spec_key_bytes(out, p);
        size_t np = mask_spec_pieces(out, p);
        if (np > FS_FEDSVD_KEYS_MAX_PIECES) {
            return fs_err_set(err, FS_EINVAL,
                              "party %u's slab would have %zu pieces (one per diagonal block it "
                              "touches), more than %d: use a larger block_size.partitioned",
                              p, np, FS_FEDSVD_KEYS_MAX_PIECES);
        }
        if (b > caps->max_key_bytes) {
            return fs_err_set(err, FS_EINVAL,
                              "party %u's keys would be %llu bytes, more than --max-key-bytes "
                              "%llu (fewer rows per party, a smaller block_size.partitioned, or "
                              "a larger cap)",
                              p, (unsigned long long)b, (unsigned long long)caps->max_key_bytes);
        }
    }
    mask_spec_job(out, &job);
    rc = fs_fedsvd_job_check(&job, &jerr);
    if (rc != 0) {
        return fs_err_set(err, FS_EINVAL, "%s", jerr.msg);
    }
    return 0;
}

void mask_spec_clear(struct mask_spec *s)
{
    if (s == NULL) {
        return;
    }
    free(s->sizes);
    free(s->identities);
    memset(s, 0, sizeof *s);
}

json_t *mask_spec_encode(const struct mask_spec *s)
{
    const char *size_key = s->partition == FS_FEDSVD_SAMPLES ? "rows" : "cols";
    json_t *parties = json_array();
    json_t *out;

    if (parties == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < s->parties; i++) {
        json_t *p = json_pack("{s:I, s:I}", "party", (json_int_t)(i + 1), size_key,
                              (json_int_t)s->sizes[i]);
        if (p != NULL && s->identities != NULL) {
            char fpr[FS_ED25519_FPR_LEN + 1];
            fs_ed25519_fpr_format(s->identities[i], fpr);
            if (json_object_set_new(p, "identity", json_string(fpr)) != 0) {
                json_decref(p);
                p = NULL;
            }
        }
        if (json_array_append_new(parties, p) != 0) {
            json_decref(parties);
            return NULL;
        }
    }
    out = json_pack(
        "{s:s, s:s, s:o, s:I, s:{s:o, s:o}, s:I}", "job_id", s->job_id, "partition",
        s->partition == FS_FEDSVD_SAMPLES ? "samples" : "features", "parties", parties,
        s->partition == FS_FEDSVD_SAMPLES ? "cols" : "rows", (json_int_t)s->shared, "block_size",
        "partitioned",
        s->block_partitioned != 0 ? json_integer((json_int_t)s->block_partitioned) : json_null(),
        "shared", s->block_shared != 0 ? json_integer((json_int_t)s->block_shared) : json_null(),
        "ttl_s", (json_int_t)s->ttl_s);
    if (out != NULL && s->deterministic &&
        json_object_set_new(out, "deterministic_masks", json_true()) != 0) {
        json_decref(out);
        out = NULL;
    }
    return out;
}

static size_t total_of(const struct mask_spec *s)
{
    size_t m = 0;

    for (uint32_t i = 0; i < s->parties; i++) {
        m += s->sizes[i];
    }
    return m;
}

void mask_spec_job(const struct mask_spec *s, struct fs_fedsvd_job *job)
{
    size_t m = total_of(s);

    memset(job, 0, sizeof *job);
    job->partition = s->partition;
    job->rows = s->partition == FS_FEDSVD_SAMPLES ? m : s->shared;
    job->cols = s->partition == FS_FEDSVD_SAMPLES ? s->shared : m;
    job->parties = s->parties;
    job->sizes = s->sizes;
    job->block_a = s->block_partitioned;
    job->block_b = s->block_shared;
}

void mask_spec_shape(const struct mask_spec *s, size_t *rows, size_t *cols)
{
    struct fs_fedsvd_job job;

    mask_spec_job(s, &job);
    *rows = job.rows;
    *cols = job.cols;
}

size_t mask_spec_offset(const struct mask_spec *s, uint32_t party)
{
    size_t off = 0;

    for (uint32_t i = 0; i + 1 < party && i < s->parties; i++) {
        off += s->sizes[i];
    }
    return off;
}

void mask_spec_blocks(const struct mask_spec *s, size_t *partitioned, size_t *shared)
{
    size_t m = total_of(s);
    size_t n = s->shared;
    size_t a = s->block_partitioned != 0 ? s->block_partitioned : fs_mask_choose_block(m, n, 0);
    size_t b = s->block_shared != 0 ? s->block_shared : fs_mask_choose_block(n, m, 0);

    *partitioned = a < m ? a : m;
    *shared = b < n ? b : n;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The slab of A_c[:, off:off+size] has one piece per diagonal block it
 * touches, each with all of that block's rows (lib/la/mask.h: nb =
 * ceil(m / block) balanced blocks, the larger ones first). Calls fn(r, c)
 * for each piece (r rows of the block, c columns covered); returns the count. */
static size_t pieces_of(const struct mask_spec *s, uint32_t party,
                        void (*fn)(void *ctx, size_t r, size_t c), void *ctx)
{
    size_t m = total_of(s);
    size_t block;
    size_t unused;
    size_t nb;
    size_t base;
    size_t extra;
    size_t off;
    size_t end;
    size_t first;
    size_t count = 0;

    if (party < 1 || party > s->parties) {
        return 0;
    }
    mask_spec_blocks(s, &block, &unused);
    nb = m / block + (m % block != 0);
    base = m / nb;
    extra = m % nb;
    off = mask_spec_offset(s, party);
    end = off + s->sizes[party - 1];
    /* the first block that can reach off: the larger blocks (base + 1) come first */
    first = off < extra * (base + 1) ? off / (base + 1) : extra + (off - extra * (base + 1)) / base;
    for (size_t t = first; t < nb; t++) {
        size_t b0 = t * base + (t < extra ? t : extra);
        size_t bn = base + (t < extra ? 1 : 0);
        size_t lo = b0 > off ? b0 : off;
        size_t hi = b0 + bn < end ? b0 + bn : end;
        if (b0 >= end) {
            break;
        }
        if (lo >= hi) {
            continue;
        }
        count++;
        if (fn != NULL) {
            fn(ctx, bn, hi - lo);
        }
    }
    return count;
}

static void add_piece_bytes(void *ctx, size_t r, size_t c)
{
    uint64_t *total = ctx;

    *total = sat_add(*total, fs_fedsvd_keyfile_len(r, c, FS_FEDSVD_KEYFILE_ROWS));
    *total = sat_add(*total, fs_fedsvd_keyfile_len(r, c, FS_FEDSVD_KEYFILE_BLOCK));
}

uint64_t mask_spec_key_bytes(const struct mask_spec *s, uint32_t party)
{
    uint64_t total = 0;

    (void)pieces_of(s, party, add_piece_bytes, &total);
    return total;
}

size_t mask_spec_pieces(const struct mask_spec *s, uint32_t party)
{
    return pieces_of(s, party, NULL, NULL);
}

int mask_id_valid(const char *s)
{
    if (s == NULL || strlen(s) != MASK_ID_LEN || s[0] != 'm' || s[1] != '-') {
        return 0;
    }
    for (size_t i = 2; i < MASK_ID_LEN; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

int mask_id_generate(char out[MASK_ID_LEN + 1], struct fs_err *err)
{
    uint8_t r[16];
    int rc = fs_rand_bytes(r, sizeof r, err);

    if (rc != 0) {
        return rc;
    }
    out[0] = 'm';
    out[1] = '-';
    fs_hex_encode(r, sizeof r, out + 2); /* MASK_ID_LEN characters in all */
    return 0;
}
