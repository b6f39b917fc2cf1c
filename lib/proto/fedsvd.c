/* Lossless federated SVD: masking side, party, server. See fedsvd.h for the
 * protocol, the canonical orientation and the choices made. */
#include "fedsvd.h"

#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/aead.h"
#include "../crypto/ct.h"
#include "../crypto/hkdf.h"
#include "../crypto/sha256.h"
#include "../io/matio.h"
#include "../la/qr.h"

/* The party computes its contribution in blocks of columns of about this many
 * words (at least CACHE_MIN_COLS columns), so a chunk never forces an m x n
 * product and BLAS still gets matrix-matrix work. */
#define CACHE_WORDS    ((size_t)1 << 22)
#define CACHE_MIN_COLS 8

/* Relative margin on the a-priori bound: covers the rounding of A_c's
 * orthogonality and of the products (gamma_n ~ n eps << 2^-20). */
#define BOUND_MARGIN 0x1p-20

#define KEYS_MAGIC      "FSVDKEY1"
#define KEYS_HEADER_LEN 136

/* ------------------------------------------------------------------ job */

/* The shared mask's blocks a party keeps between its two products with it
 * (fs_mask_keep): d = 1000 takes 8 MB, the largest dense block (4096) 134 MB. */
#define KEEP_SHARED_MASK_BYTES ((size_t)256 << 20)

static void canon_dims(enum fs_fedsvd_partition part, size_t rows, size_t cols, size_t *m,
                       size_t *n)
{
    *m = part == FS_FEDSVD_SAMPLES ? rows : cols;
    *n = part == FS_FEDSVD_SAMPLES ? cols : rows;
}

static int geometry_check(int partition, uint32_t parties, size_t rows, size_t cols,
                          struct fs_err *err)
{
    if (partition != FS_FEDSVD_SAMPLES && partition != FS_FEDSVD_FEATURES) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: unknown partition %d", partition);
    }
    if (parties < 1 || parties > FS_SECAGG_MAX_PARTIES) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: %u parties (1..%u)", parties,
                          (unsigned)FS_SECAGG_MAX_PARTIES);
    }
    if (rows < 1 || cols < 1 || rows > FS_FEDSVD_MAX_DIM || cols > FS_FEDSVD_MAX_DIM) {
        return fs_err_set(err, FS_ERANGE, "fedsvd: shape %zux%zu outside 1..%u", rows, cols,
                          FS_FEDSVD_MAX_DIM);
    }
    return 0;
}

int fs_fedsvd_job_check(const struct fs_fedsvd_job *job, struct fs_err *err)
{
    size_t m;
    size_t n;
    size_t total = 0;
    int rc;

    if (job == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: job is NULL");
    }
    rc = geometry_check((int)job->partition, job->parties, job->rows, job->cols, err);
    if (rc != 0) {
        return rc;
    }
    if (job->sizes == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: job has no party sizes");
    }
    canon_dims(job->partition, job->rows, job->cols, &m, &n);
    for (uint32_t i = 0; i < job->parties; i++) {
        if (job->sizes[i] < 1 || job->sizes[i] > m - total) {
            return fs_err_set(err, FS_EINVAL,
                              "fedsvd: party %u size %zu: sizes must be >= 1 and add up to %zu",
                              i + 1, job->sizes[i], m);
        }
        total += job->sizes[i];
    }
    if (total != m) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: party sizes add up to %zu, not %zu", total, m);
    }
    if (job->shards > 1 && job->partition != FS_FEDSVD_SAMPLES) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: shards need the samples partition");
    }
    if (job->shards > FS_FEDSVD_MAX_SHARDS || (job->shards > 1 && m < job->shards)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: %u shards for %zu rows (1..%u, >= 1 row each)",
                          job->shards, m, (unsigned)FS_FEDSVD_MAX_SHARDS);
    }
    return 0;
}

uint64_t fs_fedsvd_vector_len(const struct fs_fedsvd_job *job)
{
    if (fs_fedsvd_job_check(job, NULL) != 0) {
        return 0;
    }
    return (uint64_t)job->rows * (uint64_t)job->cols;
}

/* ------------------------------------------------------------------ fixed point */

int fs_fedsvd_exponent(double maxabs, int *e, struct fs_err *err)
{
    int ex = 0;

    if (e == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_exponent: e is NULL");
    }
    if (!isfinite(maxabs) || maxabs < 0.0) {
        return fs_err_set(err, FS_ERANGE, "fedsvd_exponent: magnitude is not finite");
    }
    if (maxabs == 0.0) {
        *e = FS_FEDSVD_EXP_MIN;
        return 0;
    }
    /* frexp gives maxabs' = f 2^ex with f in [0.5, 1), so maxabs' < 2^ex. */
    (void)frexp(maxabs * (1.0 + BOUND_MARGIN), &ex);
    if (!isfinite(maxabs * (1.0 + BOUND_MARGIN)) || ex > FS_FEDSVD_EXP_MAX) {
        return fs_err_set(err, FS_ERANGE, "fedsvd_exponent: magnitude 2^%d beyond 2^%d", ex,
                          FS_FEDSVD_EXP_MAX);
    }
    *e = ex < FS_FEDSVD_EXP_MIN ? FS_FEDSVD_EXP_MIN : ex;
    return 0;
}

int fs_fedsvd_public_exponent(const int *e, size_t k, int *out, struct fs_err *err)
{
    int mx = FS_FEDSVD_EXP_MIN;

    if (e == NULL || out == NULL || k == 0) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_public_exponent: no exponents");
    }
    for (size_t i = 0; i < k; i++) {
        if (e[i] < FS_FEDSVD_EXP_MIN || e[i] > FS_FEDSVD_EXP_MAX) {
            return fs_err_set(err, FS_EINVAL,
                              "fedsvd_public_exponent: exponent %zu (%d) outside "
                              "[%d, %d]",
                              i, e[i], FS_FEDSVD_EXP_MIN, FS_FEDSVD_EXP_MAX);
        }
        if (e[i] > mx) {
            mx = e[i];
        }
    }
    *out = mx;
    return 0;
}

int fs_fedsvd_fixedpt(int exponent, uint32_t parties, struct fs_fixedpt *fp, struct fs_err *err)
{
    if (exponent < FS_FEDSVD_EXP_MIN || exponent > FS_FEDSVD_EXP_MAX) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: exponent %d outside [%d, %d]", exponent,
                          FS_FEDSVD_EXP_MIN, FS_FEDSVD_EXP_MAX);
    }
    return fs_fixedpt_init(fp, ldexp(1.0, exponent), parties, err);
}

/* ------------------------------------------------------------------ secrets */

void fs_fedsvd_wipe_free(void *buf, size_t len)
{
    if (buf == NULL) {
        return;
    }
    OPENSSL_cleanse(buf, len);
    free(buf);
}

static void mat_free_secret(fs_mat *m)
{
    fs_mat_wipe(m);
    fs_mat_free(m);
}

/* ------------------------------------------------------------------ masking side */

struct fs_fedsvd_maskset {
    enum fs_fedsvd_partition partition;
    size_t rows, cols, m, n;
    uint32_t parties;
    size_t *offs; /* parties + 1 offsets into the partitioned dimension */
    size_t block_b;
    uint8_t b_seed[32];
    uint8_t group_key[32];
    fs_mask *a; /* A_c: m x m */
};

static void put_le(uint8_t *p, uint64_t v, int nbytes)
{
    for (int i = 0; i < nbytes; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint64_t get_le(const uint8_t *p, int nbytes)
{
    uint64_t v = 0;

    for (int i = nbytes - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* ------------------------------------------------------------------ sealed exponents */

static int seal_setup(const uint8_t group_key[32], uint32_t round, uint32_t party, uint8_t key[32],
                      uint8_t ad[24], struct fs_err *err)
{
    static const char info[] = "fedsvd/exponent-seal";

    memcpy(ad, "fedsvd/exponent/", 16);
    put_le(ad + 16, round, 4);
    put_le(ad + 20, party, 4);
    return fs_hkdf_sha256_expand(key, 32, group_key, info, sizeof info - 1, err);
}

int fs_fedsvd_exponent_seal(const uint8_t group_key[32], uint32_t round, uint32_t party, int e,
                            uint8_t out[FS_FEDSVD_SEALED_EXP_LEN], struct fs_err *err)
{
    uint8_t key[32];
    uint8_t ad[24];
    uint8_t pt[4];
    size_t olen = 0;
    int rc;

    if (group_key == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_exponent_seal: NULL argument");
    }
    if (e < FS_FEDSVD_EXP_MIN || e > FS_FEDSVD_EXP_MAX) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_exponent_seal: exponent %d out of range", e);
    }
    put_le(pt, (uint64_t)(uint32_t)e, 4);
    rc = seal_setup(group_key, round, party, key, ad, err);
    if (rc == 0) {
        /* a synthetic nonce: the same exponent seals to the same bytes, so
         * an agent restarted mid-round re-sends an identical message */
        rc = fs_aead_box_seal_det(out, FS_FEDSVD_SEALED_EXP_LEN, &olen, key, ad, sizeof ad, pt,
                                  sizeof pt, err);
    }
    OPENSSL_cleanse(key, sizeof key);
    return rc;
}

int fs_fedsvd_exponent_open_max(const uint8_t group_key[32], uint32_t round, const uint32_t *ids,
                                const uint8_t (*sealed)[FS_FEDSVD_SEALED_EXP_LEN], size_t k,
                                int *max, struct fs_err *err)
{
    int mx = FS_FEDSVD_EXP_MIN;
    int rc = 0;

    if (group_key == NULL || ids == NULL || sealed == NULL || max == NULL || k == 0) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_exponent_open_max: no exponents");
    }
    for (size_t q = 0; rc == 0 && q < k; q++) {
        uint8_t key[32];
        uint8_t ad[24];
        uint8_t pt[4];
        size_t plen = 0;
        rc = seal_setup(group_key, round, ids[q], key, ad, err);
        if (rc == 0) {
            rc = fs_aead_box_open(pt, sizeof pt, &plen, key, ad, sizeof ad, sealed[q],
                                  FS_FEDSVD_SEALED_EXP_LEN, err);
        }
        OPENSSL_cleanse(key, sizeof key);
        if (rc == 0) {
            /* two's complement of a 32-bit value, without implementation-defined casts */
            uint32_t u = (uint32_t)get_le(pt, 4);
            int64_t v = u < 0x80000000u ? (int64_t)u : (int64_t)u - 0x100000000LL;
            if (plen != 4 || v < FS_FEDSVD_EXP_MIN || v > FS_FEDSVD_EXP_MAX) {
                rc = fs_err_set(err, FS_EINVAL, "fedsvd: sealed exponent of party %u is invalid",
                                ids[q]);
            } else if (v > mx) {
                mx = (int)v;
            }
        }
    }
    if (rc == 0) {
        *max = mx;
    }
    return rc;
}

/* out = HKDF-SHA256(master, salt, label || partition || m || n), 32 bytes. */
static int derive_seed(const uint8_t master[32], const char *label, int partition, size_t m,
                       size_t n, uint8_t out[32], struct fs_err *err)
{
    static const char salt[] = "fedsvd-maskset-v1";
    uint8_t info[64];
    size_t ll = strlen(label);

    memset(info, 0, sizeof info);
    memcpy(info, label, ll < 40 ? ll : 40);
    put_le(info + 40, (uint64_t)partition, 4);
    put_le(info + 44, (uint64_t)m, 8);
    put_le(info + 52, (uint64_t)n, 8);
    return fs_hkdf_sha256(out, 32, master, 32, salt, sizeof salt - 1, info, 60, err);
}

void fs_fedsvd_maskset_free(fs_fedsvd_maskset *ms)
{
    if (ms == NULL) {
        return;
    }
    fs_mask_free(ms->a);
    free(ms->offs);
    OPENSSL_cleanse(ms->b_seed, sizeof ms->b_seed);
    OPENSSL_cleanse(ms->group_key, sizeof ms->group_key);
    free(ms);
}

int fs_fedsvd_maskset_new(const struct fs_fedsvd_job *job, const uint8_t master_seed[32],
                          fs_fedsvd_maskset **out, struct fs_err *err)
{
    fs_fedsvd_maskset *ms = NULL;
    uint8_t a_seed[32];
    size_t block_a;
    int rc;

    if (out == NULL || master_seed == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_maskset_new: NULL argument");
    }
    *out = NULL;
    rc = fs_fedsvd_job_check(job, err);
    if (rc != 0) {
        return rc;
    }
    ms = calloc(1, sizeof *ms);
    if (ms == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd_maskset_new: out of memory");
    }
    ms->partition = job->partition;
    ms->rows = job->rows;
    ms->cols = job->cols;
    ms->parties = job->parties;
    canon_dims(job->partition, job->rows, job->cols, &ms->m, &ms->n);
    ms->offs = calloc((size_t)job->parties + 1, sizeof *ms->offs);
    if (ms->offs == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "fedsvd_maskset_new: out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < job->parties; i++) {
        ms->offs[i + 1] = ms->offs[i] + job->sizes[i];
    }
    block_a = job->block_a != 0 ? job->block_a : fs_mask_choose_block(ms->m, ms->n, 0);
    ms->block_b = job->block_b != 0 ? job->block_b : fs_mask_choose_block(ms->n, ms->m, 0);
    if (ms->block_b > ms->n) {
        ms->block_b = ms->n;
    }
    rc = derive_seed(master_seed, "fedsvd/mask-A", (int)ms->partition, ms->m, ms->n, a_seed, err);
    if (rc == 0) {
        rc = derive_seed(master_seed, "fedsvd/mask-B", (int)ms->partition, ms->m, ms->n, ms->b_seed,
                         err);
    }
    if (rc == 0) {
        rc = derive_seed(master_seed, "fedpca/offset", (int)ms->partition, ms->m, ms->n,
                         ms->group_key, err);
    }
    if (rc == 0) {
        rc = fs_mask_new(ms->m, block_a, a_seed, &ms->a, err);
    }
out:
    OPENSSL_cleanse(a_seed, sizeof a_seed);
    if (rc != 0) {
        fs_fedsvd_maskset_free(ms);
        return rc;
    }
    *out = ms;
    return 0;
}

int fs_fedsvd_maskset_party(const fs_fedsvd_maskset *ms, uint32_t party,
                            struct fs_fedsvd_keys **out, struct fs_err *err)
{
    struct fs_fedsvd_keys *k = NULL;
    int rc;

    if (out == NULL || ms == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_maskset_party: NULL argument");
    }
    *out = NULL;
    if (party < 1 || party > ms->parties) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_maskset_party: no party %u (1..%u)", party,
                          ms->parties);
    }
    k = calloc(1, sizeof *k);
    if (k == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd_maskset_party: out of memory");
    }
    k->party = party;
    k->parties = ms->parties;
    k->partition = ms->partition;
    k->rows = ms->rows;
    k->cols = ms->cols;
    k->offset = ms->offs[party - 1];
    k->size = ms->offs[party] - ms->offs[party - 1];
    k->block_b = ms->block_b;
    memcpy(k->b_seed, ms->b_seed, 32);
    memcpy(k->group_key, ms->group_key, 32);
    rc = fs_mask_slab_new(ms->a, k->offset, k->size, &k->a_slab, err);
    if (rc != 0) {
        fs_fedsvd_keys_free(k);
        return rc;
    }
    *out = k;
    return 0;
}

/* ------------------------------------------------------------------ keys */

void fs_fedsvd_keys_free(struct fs_fedsvd_keys *k)
{
    if (k == NULL) {
        return;
    }
    fs_mask_slab_free(k->a_slab);
    OPENSSL_cleanse(k, sizeof *k);
    free(k);
}

static int piece_check(const struct fs_fedsvd_keys *k, size_t m, size_t p, size_t col0,
                       struct fs_err *err)
{
    const fs_mask_piece *pc = &k->a_slab->pieces[p];
    const fs_mat *q = pc->q;

    if (q == NULL || pc->rows == NULL || q->data == NULL || q->rows < 1 || q->rows > m ||
        q->cols < 1 || q->ld < q->rows) {
        return fs_err_set(err, FS_EINVAL, "fedsvd keys: slab piece %zu is malformed", p);
    }
    if (pc->col0 != col0 || q->cols > k->offset + k->size - col0) {
        return fs_err_set(err, FS_EINVAL,
                          "fedsvd keys: slab piece %zu covers columns %zu+%zu, expected from %zu",
                          p, pc->col0, q->cols, col0);
    }
    for (size_t a = 0; a < q->rows; a++) {
        if (pc->rows[a] >= m) {
            return fs_err_set(err, FS_EINVAL, "fedsvd keys: slab piece %zu row %zu out of range", p,
                              a);
        }
    }
    if (!fs_mat_all_finite(q, NULL, NULL)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd keys: slab piece %zu is not finite", p);
    }
    return 0;
}

/* Everything of the keys but the slab: geometry, party, range, B's block. */
static int header_check(const struct fs_fedsvd_keys *k, struct fs_err *err)
{
    size_t m;
    size_t n;
    int rc;

    if (k == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd keys: NULL");
    }
    if (k->partition != FS_FEDSVD_SAMPLES && k->partition != FS_FEDSVD_FEATURES) {
        return fs_err_set(err, FS_EINVAL, "fedsvd keys: bad partition");
    }
    rc = geometry_check((int)k->partition, k->parties, k->rows, k->cols, err);
    if (rc != 0) {
        return rc;
    }
    canon_dims(k->partition, k->rows, k->cols, &m, &n);
    if (k->party < 1 || k->party > k->parties || k->size < 1 || k->offset >= m ||
        k->size > m - k->offset || k->block_b < 1 || k->block_b > n) {
        return fs_err_set(err, FS_EINVAL,
                          "fedsvd keys: party %u range %zu+%zu or block %zu "
                          "invalid for %zux%zu",
                          k->party, k->offset, k->size, k->block_b, k->rows, k->cols);
    }
    return 0;
}

int fs_fedsvd_keys_check(const struct fs_fedsvd_keys *k, struct fs_err *err)
{
    const fs_mask_slab *s;
    size_t m;
    size_t n;
    size_t col;
    int rc;

    rc = header_check(k, err);
    if (rc != 0) {
        return rc;
    }
    canon_dims(k->partition, k->rows, k->cols, &m, &n);
    s = k->a_slab;
    if (s == NULL || s->n != m || s->c0 != k->offset || s->nc != k->size || s->npieces < 1 ||
        s->pieces == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd keys: slab does not match the party's range");
    }
    col = k->offset;
    for (size_t p = 0; p < s->npieces; p++) {
        rc = piece_check(k, m, p, col, err);
        if (rc != 0) {
            return rc;
        }
        col += s->pieces[p].q->cols;
    }
    if (col != k->offset + k->size) {
        return fs_err_set(err, FS_EINVAL, "fedsvd keys: slab pieces cover %zu of %zu columns",
                          col - k->offset, k->size);
    }
    return 0;
}

int fs_fedsvd_keys_encode(const struct fs_fedsvd_keys *k, uint8_t **buf, size_t *len,
                          struct fs_err *err)
{
    size_t total = KEYS_HEADER_LEN;
    uint8_t *b = NULL;
    uint8_t *p;
    int rc;

    if (buf == NULL || len == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_keys_encode: NULL argument");
    }
    *buf = NULL;
    *len = 0;
    rc = fs_fedsvd_keys_check(k, err);
    if (rc != 0) {
        return rc;
    }
    /* Sizes are bounded by memory already held (the slab), so no overflow. */
    for (size_t i = 0; i < k->a_slab->npieces; i++) {
        const fs_mat *q = k->a_slab->pieces[i].q;
        total += 32 + 8 * q->rows + 8 * q->rows * q->cols;
    }
    b = malloc(total);
    if (b == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd_keys_encode: out of memory for %zu bytes", total);
    }
    p = b;
    memcpy(p, KEYS_MAGIC, 8);
    put_le(p + 8, k->party, 4);
    put_le(p + 12, k->parties, 4);
    put_le(p + 16, (uint64_t)k->partition, 4);
    put_le(p + 20, 0, 4);
    put_le(p + 24, k->rows, 8);
    put_le(p + 32, k->cols, 8);
    put_le(p + 40, k->offset, 8);
    put_le(p + 48, k->size, 8);
    put_le(p + 56, k->block_b, 8);
    memcpy(p + 64, k->b_seed, 32);
    memcpy(p + 96, k->group_key, 32);
    put_le(p + 128, k->a_slab->npieces, 8);
    p += KEYS_HEADER_LEN;
    for (size_t i = 0; i < k->a_slab->npieces; i++) {
        const fs_mask_piece *pc = &k->a_slab->pieces[i];
        put_le(p, pc->block, 8);
        put_le(p + 8, pc->col0, 8);
        put_le(p + 16, pc->q->rows, 8);
        put_le(p + 24, pc->q->cols, 8);
        p += 32;
        for (size_t a = 0; a < pc->q->rows; a++, p += 8) {
            put_le(p, pc->rows[a], 8);
        }
        for (size_t c = 0; c < pc->q->cols; c++) {
            for (size_t a = 0; a < pc->q->rows; a++, p += 8) {
                uint64_t bits;
                memcpy(&bits, &FS_MAT_AT(pc->q, a, c), 8);
                put_le(p, bits, 8);
            }
        }
    }
    *buf = b;
    *len = total;
    return 0;
}

/* Read one piece at *pos of buf; bounds every allocation by the bytes left. */
static int decode_piece(const uint8_t *buf, size_t len, size_t *pos, size_t m, size_t nc,
                        fs_mask_piece *pc, struct fs_err *err)
{
    size_t left = len - *pos;
    uint64_t nrows;
    uint64_t ncols;
    const uint8_t *p = buf + *pos;

    if (left < 32) {
        return fs_err_set(err, FS_EFORMAT, "fedsvd keys: truncated piece header at %zu", *pos);
    }
    pc->block = (size_t)get_le(p, 8);
    pc->col0 = (size_t)get_le(p + 8, 8);
    nrows = get_le(p + 16, 8);
    ncols = get_le(p + 24, 8);
    p += 32;
    left = (left - 32) / 8; /* words left */
    if (nrows < 1 || nrows > m || ncols < 1 || ncols > nc || nrows > left ||
        ncols > (left - nrows) / nrows) {
        return fs_err_set(err, FS_EFORMAT, "fedsvd keys: piece of %llux%llu at %zu does not fit",
                          (unsigned long long)nrows, (unsigned long long)ncols, *pos);
    }
    pc->rows = malloc((size_t)nrows * sizeof *pc->rows);
    pc->q = fs_mat_new_uninit((size_t)nrows, (size_t)ncols);
    if (pc->rows == NULL || pc->q == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd keys: out of memory");
    }
    for (size_t a = 0; a < nrows; a++, p += 8) {
        pc->rows[a] = (size_t)get_le(p, 8);
    }
    for (size_t c = 0; c < ncols; c++) {
        for (size_t a = 0; a < nrows; a++, p += 8) {
            uint64_t bits = get_le(p, 8);
            memcpy(&FS_MAT_AT(pc->q, a, c), &bits, 8);
        }
    }
    *pos = (size_t)(p - buf);
    return 0;
}

static int decode_header(const uint8_t *buf, size_t len, struct fs_fedsvd_keys *k,
                         uint64_t *npieces, struct fs_err *err)
{
    uint64_t v[5];

    if (len < KEYS_HEADER_LEN || memcmp(buf, KEYS_MAGIC, 8) != 0) {
        return fs_err_set(err, FS_EFORMAT, "fedsvd keys: not a key blob (magic or length)");
    }
    k->party = (uint32_t)get_le(buf + 8, 4);
    k->parties = (uint32_t)get_le(buf + 12, 4);
    if (get_le(buf + 16, 4) > 1 || get_le(buf + 20, 4) != 0) {
        return fs_err_set(err, FS_EFORMAT, "fedsvd keys: bad partition or reserved field");
    }
    k->partition = get_le(buf + 16, 4) == 0 ? FS_FEDSVD_SAMPLES : FS_FEDSVD_FEATURES;
    for (int i = 0; i < 5; i++) {
        v[i] = get_le(buf + 24 + 8 * i, 8);
        if (v[i] > FS_FEDSVD_MAX_DIM) {
            return fs_err_set(err, FS_EFORMAT, "fedsvd keys: header field %d out of range", i);
        }
    }
    k->rows = (size_t)v[0];
    k->cols = (size_t)v[1];
    k->offset = (size_t)v[2];
    k->size = (size_t)v[3];
    k->block_b = (size_t)v[4];
    memcpy(k->b_seed, buf + 64, 32);
    memcpy(k->group_key, buf + 96, 32);
    *npieces = get_le(buf + 128, 8);
    if (*npieces < 1 || *npieces > (len - KEYS_HEADER_LEN) / 48) {
        return fs_err_set(err, FS_EFORMAT, "fedsvd keys: %llu pieces cannot fit",
                          (unsigned long long)*npieces);
    }
    return 0;
}

/* A check failing on decoded input: keep its message, report a format error. */
static int as_format_error(struct fs_err *err)
{
    if (err != NULL) {
        err->code = FS_EFORMAT;
    }
    return FS_EFORMAT;
}

int fs_fedsvd_keys_decode(const uint8_t *buf, size_t len, struct fs_fedsvd_keys **out,
                          struct fs_err *err)
{
    struct fs_fedsvd_keys *k = NULL;
    fs_mask_slab *s = NULL;
    uint64_t np = 0;
    size_t pos = KEYS_HEADER_LEN;
    size_t m;
    size_t n;
    int rc;

    if (out == NULL || (buf == NULL && len > 0)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_keys_decode: NULL argument");
    }
    *out = NULL;
    k = calloc(1, sizeof *k);
    if (k == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd_keys_decode: out of memory");
    }
    rc = buf == NULL ? fs_err_set(err, FS_EFORMAT, "fedsvd keys: empty")
                     : decode_header(buf, len, k, &np, err);
    if (rc == 0 && geometry_check((int)k->partition, k->parties, k->rows, k->cols, err) != 0) {
        rc = as_format_error(err);
    }
    if (rc != 0) {
        goto out;
    }
    canon_dims(k->partition, k->rows, k->cols, &m, &n);
    s = calloc(1, sizeof *s);
    k->a_slab = s;
    if (s != NULL) {
        s->pieces = calloc((size_t)np, sizeof *s->pieces);
    }
    if (s == NULL || s->pieces == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "fedsvd_keys_decode: out of memory");
        goto out;
    }
    s->n = m;
    s->c0 = k->offset;
    s->nc = k->size;
    for (size_t p = 0; rc == 0 && p < np; p++) {
        s->npieces++;
        rc = decode_piece(buf, len, &pos, m, k->size, &s->pieces[p], err);
    }
    if (rc == 0 && pos != len) {
        rc = fs_err_set(err, FS_EFORMAT, "fedsvd keys: %zu trailing bytes", len - pos);
    }
    if (rc == 0 && fs_fedsvd_keys_check(k, err) != 0) {
        rc = as_format_error(err);
    }
out:
    if (rc != 0) {
        fs_fedsvd_keys_free(k);
        return rc;
    }
    *out = k;
    return 0;
}

/* ------------------------------------------------------------------ keys as .npy files */

#define KEYFILE_BUF   ((size_t)1 << 20) /* bytes per sink call */
#define KEYS_ID_LABEL "fedsvd-keys-id-v1"

/* The .npy header of a piece's file; *hlen = its length. */
static int keyfile_header(size_t r, size_t c, enum fs_fedsvd_keyfile which, uint8_t *buf,
                          size_t cap, size_t *hlen, struct fs_err *err)
{
    struct fs_npy_header h;

    memset(&h, 0, sizeof h);
    h.dtype = which == FS_FEDSVD_KEYFILE_ROWS ? FS_NPY_U8 : FS_NPY_F8;
    h.fortran_order = which == FS_FEDSVD_KEYFILE_BLOCK;
    h.ndim = which == FS_FEDSVD_KEYFILE_ROWS ? 1 : 2;
    h.shape[0] = r;
    h.shape[1] = which == FS_FEDSVD_KEYFILE_ROWS ? 1 : c;
    return fs_npy_format_header(&h, buf, cap, hlen, err);
}

uint64_t fs_fedsvd_keyfile_len(size_t r, size_t c, enum fs_fedsvd_keyfile which)
{
    uint8_t hdr[256];
    size_t hlen = 0;
    uint64_t words;

    if (r < 1 || c < 1 || r > FS_FEDSVD_MAX_DIM || c > FS_FEDSVD_MAX_DIM ||
        keyfile_header(r, c, which, hdr, sizeof hdr, &hlen, NULL) != 0) {
        return 0;
    }
    words = which == FS_FEDSVD_KEYFILE_ROWS ? (uint64_t)r : (uint64_t)r * (uint64_t)c;
    return (uint64_t)hlen + 8 * words; /* < 2^62 + 256 */
}

struct keyfile_out {
    fs_fedsvd_sink_fn sink;
    void *ctx;
    fs_sha256_ctx *sha;
    uint8_t *buf;
    size_t n;
};

static int keyfile_flush(struct keyfile_out *o, struct fs_err *err)
{
    int rc = 0;

    if (o->n > 0) {
        rc = fs_sha256_update(o->sha, o->buf, o->n, err);
        if (rc == 0) {
            rc = o->sink(o->ctx, o->buf, o->n, err);
        }
        o->n = 0;
    }
    return rc;
}

static int keyfile_word(struct keyfile_out *o, uint64_t v, struct fs_err *err)
{
    if (o->n + 8 > KEYFILE_BUF) {
        int rc = keyfile_flush(o, err);
        if (rc != 0) {
            return rc;
        }
    }
    put_le(o->buf + o->n, v, 8);
    o->n += 8;
    return 0;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* len bytes already in the file's byte order (a column of doubles on a
 * little-endian host), copied through the buffer in as few pieces as fit. */
static int keyfile_bytes(struct keyfile_out *o, const void *src, size_t len, struct fs_err *err)
{
    const uint8_t *p = src;

    while (len > 0) {
        size_t take = KEYFILE_BUF - o->n < len ? KEYFILE_BUF - o->n : len;
        memcpy(o->buf + o->n, p, take);
        o->n += take;
        p += take;
        len -= take;
        if (o->n == KEYFILE_BUF) {
            int rc = keyfile_flush(o, err);
            if (rc != 0) {
                return rc;
            }
        }
    }
    return 0;
}
#endif

static int keyfile_body(struct keyfile_out *o, const fs_mask_piece *pc,
                        enum fs_fedsvd_keyfile which, struct fs_err *err)
{
    int rc = 0;

    if (which == FS_FEDSVD_KEYFILE_ROWS) {
        for (size_t a = 0; rc == 0 && a < pc->q->rows; a++) {
            rc = keyfile_word(o, pc->rows[a], err);
        }
        return rc;
    }
    for (size_t c = 0; rc == 0 && c < pc->q->cols; c++) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        rc = keyfile_bytes(o, &FS_MAT_AT(pc->q, 0, c), pc->q->rows * 8, err);
#else
        for (size_t a = 0; rc == 0 && a < pc->q->rows; a++) {
            uint64_t bits;
            memcpy(&bits, &FS_MAT_AT(pc->q, a, c), 8);
            rc = keyfile_word(o, bits, err);
        }
#endif
    }
    return rc;
}

int fs_fedsvd_keyfile_write(const struct fs_fedsvd_keys *k, size_t p, enum fs_fedsvd_keyfile which,
                            fs_fedsvd_sink_fn sink, void *ctx, struct fs_fedsvd_piece_desc *desc,
                            struct fs_err *err)
{
    struct keyfile_out o = {sink, ctx, NULL, NULL, 0};
    const fs_mask_piece *pc;
    uint8_t digest[32];
    int rc;

    if (k == NULL || sink == NULL || k->a_slab == NULL || p >= k->a_slab->npieces ||
        (which != FS_FEDSVD_KEYFILE_ROWS && which != FS_FEDSVD_KEYFILE_BLOCK)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_keyfile_write: bad argument");
    }
    pc = &k->a_slab->pieces[p];
    if (pc->q == NULL || pc->rows == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_keyfile_write: piece %zu is malformed", p);
    }
    o.buf = malloc(KEYFILE_BUF);
    if (o.buf == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd_keyfile_write: out of memory");
    }
    rc = fs_sha256_new(&o.sha, err);
    if (rc == 0) {
        rc = keyfile_header(pc->q->rows, pc->q->cols, which, o.buf, KEYFILE_BUF, &o.n, err);
    }
    if (rc == 0) {
        rc = keyfile_body(&o, pc, which, err);
    }
    if (rc == 0) {
        rc = keyfile_flush(&o, err);
    }
    if (rc == 0) {
        rc = fs_sha256_final(o.sha, digest, err);
    }
    if (rc == 0 && desc != NULL) {
        desc->block = pc->block;
        desc->col0 = pc->col0;
        desc->r = pc->q->rows;
        desc->c = pc->q->cols;
        memcpy(desc->sha256[which], digest, 32);
    }
    fs_sha256_free(o.sha);
    fs_fedsvd_wipe_free(o.buf, KEYFILE_BUF);
    return rc;
}

int fs_fedsvd_keys_id(const struct fs_fedsvd_keys *k, const struct fs_fedsvd_piece_desc *d,
                      size_t n, uint8_t out[32], struct fs_err *err)
{
    fs_sha256_ctx *sha = NULL;
    uint8_t b[64];
    int rc;

    if (k == NULL || out == NULL || (d == NULL && n > 0)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_keys_id: NULL argument");
    }
    rc = fs_sha256_new(&sha, err);
    if (rc == 0) {
        rc = fs_sha256_update(sha, KEYS_ID_LABEL, sizeof KEYS_ID_LABEL, err);
    }
    if (rc == 0) {
        put_le(b, k->party, 4);
        put_le(b + 4, k->parties, 4);
        put_le(b + 8, (uint64_t)k->partition, 4);
        put_le(b + 12, 0, 4);
        put_le(b + 16, k->rows, 8);
        put_le(b + 24, k->cols, 8);
        put_le(b + 32, k->offset, 8);
        put_le(b + 40, k->size, 8);
        put_le(b + 48, k->block_b, 8);
        put_le(b + 56, n, 8);
        rc = fs_sha256_update(sha, b, 64, err);
    }
    if (rc == 0) {
        rc = fs_sha256_update(sha, k->b_seed, 32, err);
    }
    if (rc == 0) {
        rc = fs_sha256_update(sha, k->group_key, 32, err);
    }
    for (size_t p = 0; rc == 0 && p < n; p++) {
        put_le(b, d[p].block, 8);
        put_le(b + 8, d[p].col0, 8);
        put_le(b + 16, d[p].r, 8);
        put_le(b + 24, d[p].c, 8);
        rc = fs_sha256_update(sha, b, 32, err);
        if (rc == 0) {
            rc = fs_sha256_update(sha, d[p].sha256, sizeof d[p].sha256, err);
        }
    }
    if (rc == 0) {
        rc = fs_sha256_final(sha, out, err);
    }
    fs_sha256_free(sha);
    OPENSSL_cleanse(b, sizeof b);
    return rc;
}

struct fs_fedsvd_keys_asm {
    struct fs_fedsvd_keys *k; /* a_slab with n pieces, filled as files arrive */
    struct fs_fedsvd_piece_desc *d;
    uint8_t *have; /* 2 n flags */
    size_t m;      /* rows of A_c */
};

void fs_fedsvd_keys_asm_free(fs_fedsvd_keys_asm *a)
{
    if (a == NULL) {
        return;
    }
    for (size_t p = 0; a->k != NULL && p < a->k->a_slab->npieces; p++) {
        fs_mask_piece *pc = &a->k->a_slab->pieces[p];
        if (pc->rows != NULL && pc->q == NULL) { /* fs_mask_slab_free wipes only complete pieces */
            OPENSSL_cleanse(pc->rows, a->d[p].r * sizeof *pc->rows);
        }
    }
    fs_fedsvd_keys_free(a->k);
    free(a->d);
    free(a->have);
    free(a);
}

/* The pieces of a manifest cover exactly the party's range; *total = their files' bytes. */
static int pieces_check(const struct fs_fedsvd_keys *k, size_t m,
                        const struct fs_fedsvd_piece_desc *d, size_t n, uint64_t *total,
                        struct fs_err *err)
{
    size_t col = k->offset;

    *total = 0;
    if (n < 1 || n > FS_FEDSVD_KEYS_MAX_PIECES) {
        return fs_err_set(err, FS_EFORMAT, "fedsvd keys: %zu pieces (1..%d)", n,
                          FS_FEDSVD_KEYS_MAX_PIECES);
    }
    for (size_t p = 0; p < n; p++) {
        if (d[p].r < 1 || d[p].r > m || d[p].c < 1 || d[p].c > d[p].r || d[p].col0 != col ||
            d[p].c > k->offset + k->size - col || (p > 0 && d[p].block <= d[p - 1].block) ||
            d[p].block >= m) {
            return fs_err_set(err, FS_EFORMAT,
                              "fedsvd keys: piece %zu (block %zu, columns %zu+%zu, %zu rows) does "
                              "not continue the slab at column %zu",
                              p, d[p].block, d[p].col0, d[p].c, d[p].r, col);
        }
        col += d[p].c;
        *total += fs_fedsvd_keyfile_len(d[p].r, d[p].c, FS_FEDSVD_KEYFILE_ROWS) +
                  fs_fedsvd_keyfile_len(d[p].r, d[p].c, FS_FEDSVD_KEYFILE_BLOCK);
    }
    if (col != k->offset + k->size) {
        return fs_err_set(err, FS_EFORMAT, "fedsvd keys: the pieces cover %zu of %zu columns",
                          col - k->offset, k->size);
    }
    return 0;
}

int fs_fedsvd_keys_asm_new(const struct fs_fedsvd_keys *hdr, const struct fs_fedsvd_piece_desc *d,
                           size_t n, const uint8_t keys_id[32], uint64_t max_bytes,
                           fs_fedsvd_keys_asm **out, struct fs_err *err)
{
    fs_fedsvd_keys_asm *a = NULL;
    uint8_t id[32];
    uint64_t total = 0;
    size_t n_unused;
    int rc;

    if (out == NULL || hdr == NULL || d == NULL || keys_id == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_keys_asm_new: NULL argument");
    }
    *out = NULL;
    rc = header_check(hdr, err);
    if (rc != 0) {
        return as_format_error(err);
    }
    a = calloc(1, sizeof *a);
    if (a == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd_keys_asm_new: out of memory");
    }
    canon_dims(hdr->partition, hdr->rows, hdr->cols, &a->m, &n_unused);
    rc = pieces_check(hdr, a->m, d, n, &total, err);
    if (rc == 0 && max_bytes > 0 && total > max_bytes) {
        rc = fs_err_set(err, FS_ERANGE, "fedsvd keys: %llu bytes of files, more than the cap %llu",
                        (unsigned long long)total, (unsigned long long)max_bytes);
    }
    if (rc == 0) {
        rc = fs_fedsvd_keys_id(hdr, d, n, id, err);
    }
    if (rc == 0 && !fs_ct_eq(id, keys_id, 32)) {
        rc = fs_err_set(err, FS_EFORMAT, "fedsvd keys: the manifest's keys_id does not match it");
    }
    if (rc != 0) {
        fs_fedsvd_keys_asm_free(a);
        return rc;
    }
    a->k = calloc(1, sizeof *a->k);
    a->d = malloc(n * sizeof *a->d);
    a->have = calloc(2 * n, 1);
    if (a->k != NULL) {
        *a->k = *hdr;
        a->k->a_slab = calloc(1, sizeof *a->k->a_slab);
    }
    if (a->k != NULL && a->k->a_slab != NULL) {
        a->k->a_slab->pieces = calloc(n, sizeof *a->k->a_slab->pieces);
    }
    if (a->d == NULL || a->have == NULL || a->k == NULL || a->k->a_slab == NULL ||
        a->k->a_slab->pieces == NULL) {
        fs_fedsvd_keys_asm_free(a);
        return fs_err_set(err, FS_ENOMEM, "fedsvd_keys_asm_new: out of memory");
    }
    memcpy(a->d, d, n * sizeof *a->d);
    a->k->a_slab->n = a->m;
    a->k->a_slab->c0 = hdr->offset;
    a->k->a_slab->nc = hdr->size;
    a->k->a_slab->npieces = n;
    for (size_t p = 0; p < n; p++) {
        a->k->a_slab->pieces[p].block = d[p].block;
        a->k->a_slab->pieces[p].col0 = d[p].col0;
    }
    *out = a;
    return 0;
}

uint64_t fs_fedsvd_keys_asm_file_len(const fs_fedsvd_keys_asm *a, size_t p,
                                     enum fs_fedsvd_keyfile which)
{
    if (a == NULL || a->k == NULL || p >= a->k->a_slab->npieces) {
        return 0;
    }
    return fs_fedsvd_keyfile_len(a->d[p].r, a->d[p].c, which);
}

/* The file's .npy header must be exactly the one the server writes. */
static int keyfile_header_check(const struct fs_fedsvd_piece_desc *d, enum fs_fedsvd_keyfile which,
                                const uint8_t *file, size_t len, size_t *hlen, struct fs_err *err)
{
    uint8_t want[256];
    size_t wl = 0;
    int rc = keyfile_header(d->r, d->c, which, want, sizeof want, &wl, err);

    if (rc != 0) {
        return rc;
    }
    if (len < wl || memcmp(file, want, wl) != 0) {
        struct fs_npy_header h;
        struct fs_err e2 = {0};
        struct fs_io_caps caps = fs_io_caps_default();
        if (fs_npy_parse_header(file, len, &caps, &h, &e2) != 0) {
            return fs_err_set(err, FS_EFORMAT, "not a .npy file: %s", e2.msg);
        }
        return fs_err_set(err, FS_EFORMAT,
                          "expected %s %s shape (%zu%s), got %s fortran_order %d shape (%zu, %zu)",
                          which == FS_FEDSVD_KEYFILE_ROWS ? "<u8" : "<f8",
                          which == FS_FEDSVD_KEYFILE_ROWS ? "" : "fortran_order", d->r,
                          which == FS_FEDSVD_KEYFILE_ROWS ? ",)" : ", c)",
                          h.dtype == FS_NPY_F8 ? "<f8" : "<u8", h.fortran_order, h.shape[0],
                          h.ndim == 2 ? h.shape[1] : 0);
    }
    *hlen = wl;
    return 0;
}

int fs_fedsvd_keys_asm_add(fs_fedsvd_keys_asm *a, size_t p, enum fs_fedsvd_keyfile which,
                           const uint8_t *file, size_t len, struct fs_err *err)
{
    const struct fs_fedsvd_piece_desc *d;
    fs_mask_piece *pc;
    uint8_t digest[32];
    size_t hl = 0;
    const uint8_t *q;
    int rc;

    if (a == NULL || a->k == NULL || (file == NULL && len > 0) ||
        (which != FS_FEDSVD_KEYFILE_ROWS && which != FS_FEDSVD_KEYFILE_BLOCK)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_keys_asm_add: bad argument");
    }
    if (p >= a->k->a_slab->npieces) {
        return fs_err_set(err, FS_EFORMAT, "fedsvd keys: no piece %zu", p);
    }
    if (a->have[2 * p + (size_t)which]) {
        return fs_err_set(err, FS_ESTATE, "fedsvd keys: piece %zu file %d added twice", p,
                          (int)which);
    }
    d = &a->d[p];
    pc = &a->k->a_slab->pieces[p];
    if (len != fs_fedsvd_keyfile_len(d->r, d->c, which)) {
        return fs_err_set(err, FS_EFORMAT, "fedsvd keys: piece %zu %s: %zu bytes, expected %llu", p,
                          which == FS_FEDSVD_KEYFILE_ROWS ? "rows.npy" : "block.npy", len,
                          (unsigned long long)fs_fedsvd_keyfile_len(d->r, d->c, which));
    }
    rc = fs_sha256(digest, file, len, err);
    if (rc != 0) {
        return rc;
    }
    if (!fs_ct_eq(digest, d->sha256[which], 32)) {
        return fs_err_set(err, FS_EFORMAT,
                          "fedsvd keys: piece %zu %s: SHA-256 differs from the "
                          "manifest's",
                          p, which == FS_FEDSVD_KEYFILE_ROWS ? "rows.npy" : "block.npy");
    }
    rc = keyfile_header_check(d, which, file, len, &hl, err);
    if (rc != 0) {
        fs_err_prefix(err, "fedsvd keys: piece %zu %s: ", p,
                      which == FS_FEDSVD_KEYFILE_ROWS ? "rows.npy" : "block.npy");
        return FS_EFORMAT;
    }
    q = file + hl;
    if (which == FS_FEDSVD_KEYFILE_ROWS) {
        pc->rows = malloc(d->r * sizeof *pc->rows);
        if (pc->rows == NULL) {
            return fs_err_set(err, FS_ENOMEM, "fedsvd keys: out of memory");
        }
        for (size_t i = 0; i < d->r; i++, q += 8) {
            uint64_t v = get_le(q, 8);
            pc->rows[i] = v < a->m ? (size_t)v : a->m; /* out of range: caught by the check */
        }
    } else {
        pc->q = fs_mat_new_uninit(d->r, d->c);
        if (pc->q == NULL) {
            return fs_err_set(err, FS_ENOMEM, "fedsvd keys: out of memory");
        }
        for (size_t c = 0; c < d->c; c++) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            /* the file's <f8 column is the host's layout: one copy */
            memcpy(&FS_MAT_AT(pc->q, 0, c), q, d->r * 8);
            q += d->r * 8;
#else
            for (size_t i = 0; i < d->r; i++, q += 8) {
                uint64_t bits = get_le(q, 8);
                memcpy(&FS_MAT_AT(pc->q, i, c), &bits, 8);
            }
#endif
        }
    }
    a->have[2 * p + (size_t)which] = 1;
    return 0;
}

int fs_fedsvd_keys_asm_finish(fs_fedsvd_keys_asm *a, struct fs_fedsvd_keys **out,
                              struct fs_err *err)
{
    if (a == NULL || a->k == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_keys_asm_finish: NULL argument");
    }
    *out = NULL;
    for (size_t i = 0; i < 2 * a->k->a_slab->npieces; i++) {
        if (!a->have[i]) {
            return fs_err_set(err, FS_ESTATE, "fedsvd keys: piece %zu %s not added", i / 2,
                              i % 2 == 0 ? "rows.npy" : "block.npy");
        }
    }
    if (fs_fedsvd_keys_check(a->k, err) != 0) {
        return as_format_error(err);
    }
    *out = a->k;
    a->k = NULL;
    return 0;
}

/* ------------------------------------------------------------------ server */

void fs_fedsvd_published_clear(struct fs_fedsvd_published *p)
{
    if (p == NULL) {
        return;
    }
    free(p->s);
    fs_mat_free(p->vc);
    memset(p, 0, sizeof *p);
}

int fs_fedsvd_server_check_contributors(const struct fs_fedsvd_job *job, int allow_dropouts,
                                        const uint32_t *ids, size_t nids, size_t *n_included,
                                        struct fs_err *err)
{
    uint8_t *seen = NULL;
    size_t total = 0;
    int rc = fs_fedsvd_job_check(job, err);

    if (rc != 0) {
        return rc;
    }
    if (nids == 0 || ids == NULL) {
        return fs_err_set(err, FS_ESTATE, "fedsvd: no party contributed");
    }
    seen = calloc((size_t)job->parties + 1, 1);
    if (seen == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd: out of memory");
    }
    for (size_t q = 0; q < nids; q++) {
        if (ids[q] < 1 || ids[q] > job->parties || seen[ids[q]]) {
            rc = fs_err_set(err, FS_EINVAL, "fedsvd: contributor %u unknown or repeated", ids[q]);
            goto out;
        }
        seen[ids[q]] = 1;
        total += job->sizes[ids[q] - 1];
    }
    for (uint32_t i = 1; !allow_dropouts && i <= job->parties; i++) {
        if (!seen[i]) {
            rc = fs_err_set(err, FS_ESTATE,
                            "fedsvd: party %u dropped before its masked input was complete; the "
                            "SVD of the pooled matrix needs every party (allow_dropouts would give "
                            "the SVD of the survivors' %s)",
                            i, job->partition == FS_FEDSVD_SAMPLES ? "rows" : "columns");
            goto out;
        }
    }
    if (n_included != NULL) {
        *n_included = total;
    }
out:
    free(seen);
    return rc;
}

/* Checks of both decoders; *fp and the canonical m x n on success. */
static int decode_check(const struct fs_fedsvd_job *job, int public_exponent, const uint64_t *sum,
                        uint64_t len, fs_mat **out, struct fs_fixedpt *fp, size_t *m, size_t *n,
                        struct fs_err *err)
{
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_server_decode: out is NULL");
    }
    *out = NULL;
    rc = fs_fedsvd_job_check(job, err);
    if (rc == 0) {
        rc = fs_fedsvd_fixedpt(public_exponent, job->parties, fp, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (sum == NULL || len != fs_fedsvd_vector_len(job)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_server_decode: %llu words, expected %llu",
                          (unsigned long long)len, (unsigned long long)fs_fedsvd_vector_len(job));
    }
    if (job->shards > 1) {
        return fs_err_set(
            err, FS_EINVAL,
            "fedsvd_server_decode: a sharded job decodes per shard (fs_fedsvd_shard_r)");
    }
    canon_dims(job->partition, job->rows, job->cols, m, n);
    return 0;
}

int fs_fedsvd_server_decode_owned(const struct fs_fedsvd_job *job, int public_exponent,
                                  uint64_t *sum, uint64_t len, fs_mat **out, struct fs_err *err)
{
    struct fs_fixedpt fp;
    fs_mat *y = NULL;
    size_t m = 0;
    size_t n = 0;
    int rc = decode_check(job, public_exponent, sum, len, out, &fp, &m, &n, err);

    if (rc == 0) {
        y = malloc(sizeof *y);
        rc = y == NULL ? fs_err_set(err, FS_ENOMEM, "fedsvd_server_decode: out of memory") : 0;
    }
    if (rc != 0) {
        free(sum);
        return rc;
    }
    /* element i is read as a word and then written as a double, in place
     * (the kernels read each group before writing it) */
    fs_fixedpt_decode(&fp, sum, (double *)(void *)sum, (size_t)len);
    *y = (fs_mat){m, n, m, (double *)(void *)sum, 1};
    *out = y;
    return 0;
}

int fs_fedsvd_server_decode(const struct fs_fedsvd_job *job, int public_exponent,
                            const uint64_t *sum, uint64_t len, fs_mat **out, struct fs_err *err)
{
    struct fs_fixedpt fp;
    fs_mat *y = NULL;
    size_t m = 0;
    size_t n = 0;
    int rc = decode_check(job, public_exponent, sum, len, out, &fp, &m, &n, err);

    if (rc != 0) {
        return rc;
    }
    y = fs_mat_new_uninit(m, n);
    if (y == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd_server_decode: out of memory for %zux%zu", m, n);
    }
    fs_fixedpt_decode(&fp, sum, y->data, (size_t)len); /* ld == m: contiguous column-major */
    *out = y;
    return 0;
}

static int lapack_fail(const char *what, lapack_int info, struct fs_err *err)
{
    if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd: %s: out of memory", what);
    }
    if (info > 0) {
        return fs_err_set(err, FS_ENUMERIC, "fedsvd: %s did not converge (info %d)", what,
                          (int)info);
    }
    return fs_err_set(err, FS_ENUMERIC, "fedsvd: %s rejected argument %d", what, (int)-info);
}

/* S and V of an m x n matrix with m >= n, U never formed: yc = Q R
 * (fs_qr_keep_r: dgeqrt in place, Q left as reflectors and dropped, the
 * buffer shrunk to R), then dgesdd of the n x n R (jobz = 'S' into a
 * scratch U: measured 0.39 s against 0.57 s for the in-place jobz = 'O' at
 * n = 1000, one core). What LAPACK's dgesdd does itself for m >> n, minus
 * generating Q (4mn^2 flops) and multiplying it into U (2mn^2): about 3x
 * fewer flops than dgesdd(jobz = 'O') of the whole yc. */
/* dgesdd on R holds R, U, V^T and about 3 n^2 words of divide-and-conquer
 * workspace: some 6 n^2 words, more than the m x n matrix that the QR freed
 * when m < 7n, so that the SVD of R, not the sum, would set the server's
 * peak (2 x 2000 x 1000: 67 MB against a 16 MB sum). There dgesvd without
 * U, V^T written over R, needs n^2 + O(n) words, at about 1.8x dgesdd's time
 * on R (n = 1000, one core). m == n keeps dgesdd: a square input (the
 * stacked R's of a sharded job after their QR) has no larger buffer behind
 * it to stay under. */
#define FRUGAL_SVD_ROWS 7

static int thin_tall_frugal(fs_mat *yc, double *s, struct fs_err *err)
{
    size_t n = yc->cols;
    double *superb = malloc(n * sizeof *superb);
    lapack_int info;

    if (superb == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd: out of memory for the SVD of %zux%zu", n, n);
    }
    info = LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'N', 'O', (lapack_int)n, (lapack_int)n, yc->data,
                          (lapack_int)yc->ld, s, NULL, 1, NULL, 1, superb);
    free(superb);
    return info != 0 ? lapack_fail("dgesvd", info, err) : 0;
}

/* On success *vt_at is where V^T is: vt, or yc itself (the frugal path). */
static int thin_tall(fs_mat *yc, double *s, fs_mat *vt, const fs_mat **vt_at, struct fs_err *err)
{
    size_t m = yc->rows;
    size_t n = yc->cols;
    fs_mat *u = NULL;
    lapack_int info;
    int rc = fs_qr_keep_r(yc, err);

    *vt_at = vt;
    if (rc != 0) {
        return rc;
    }
    if (m > n && m / FRUGAL_SVD_ROWS < n) {
        *vt_at = yc;
        return thin_tall_frugal(yc, s, err);
    }
    u = fs_mat_new_uninit(n, n);
    if (u == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd: out of memory for the SVD of %zux%zu", n, n);
    }
    info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', (lapack_int)n, (lapack_int)n, yc->data,
                          (lapack_int)yc->ld, s, u->data, (lapack_int)u->ld, vt->data,
                          (lapack_int)vt->ld);
    if (info != 0) {
        rc = lapack_fail("dgesdd", info, err);
    }
    fs_mat_wipe(u);
    fs_mat_free(u);
    return rc;
}

/* Thin SVD of yc in place: only S and V (no U for m >= n: thin_tall; m < n:
 * dgesdd jobz = 'O', V^T overwrites yc, no copy of yc). Keeps the first
 * r_keep triplets. */
static int thin_in_place(fs_mat *yc, size_t r_keep, double *s, fs_mat **v_out, struct fs_err *err)
{
    size_t m = yc->rows;
    size_t n = yc->cols;
    size_t r = m < n ? m : n;
    fs_mat *other = NULL; /* VT (m >= n) or the unused U (m < n) */
    const fs_mat *vt_at = NULL;
    fs_mat *v = NULL;
    double *sall = NULL;
    double dummy = 0.0;
    lapack_int info;
    int rc = 0;

    *v_out = NULL;
    other = m >= n ? fs_mat_new_uninit(n, n) : fs_mat_new_uninit(m, m);
    sall = malloc(r * sizeof *sall);
    v = fs_mat_new_uninit(n, r_keep);
    if (other == NULL || sall == NULL || v == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "fedsvd: out of memory for the SVD of %zux%zu", m, n);
        goto out;
    }
    if (m >= n) {
        rc = thin_tall(yc, sall, other, &vt_at, err);
    } else {
        info =
            LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'O', (lapack_int)m, (lapack_int)n, yc->data,
                           (lapack_int)yc->ld, sall, other->data, (lapack_int)other->ld, &dummy, 1);
        rc = info != 0 ? lapack_fail("dgesdd", info, err) : 0;
    }
    if (rc != 0) {
        goto out;
    }
    /* V^T sits in `other` or yc (m >= n, vt_at) or in the first m rows of yc
     * (m < n). */
    {
        const fs_mat *vt = m >= n ? vt_at : yc;
        for (size_t j = 0; j < r_keep; j++) {
            for (size_t i = 0; i < n; i++) {
                FS_MAT_AT(v, i, j) = FS_MAT_AT(vt, j, i);
            }
        }
    }
    memcpy(s, sall, r_keep * sizeof *s);
    *v_out = v;
    v = NULL;
out:
    fs_mat_free(other);
    fs_mat_free(v);
    free(sall);
    return rc;
}

static int factorize_check(const fs_mat *yc, size_t k, struct fs_err *err)
{
    size_t r;

    if (yc == NULL || yc->data == NULL || yc->rows < 1 || yc->cols < 1 || yc->ld < yc->rows ||
        yc->rows > FS_FEDSVD_MAX_DIM || yc->cols > FS_FEDSVD_MAX_DIM ||
        yc->ld > FS_FEDSVD_MAX_DIM) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_server_factorize: invalid matrix");
    }
    r = yc->rows < yc->cols ? yc->rows : yc->cols;
    if (k > r) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_server_factorize: k = %zu > min(m, n) = %zu", k,
                          r);
    }
    if (!fs_mat_all_finite(yc, NULL, NULL)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_server_factorize: non-finite entry");
    }
    return 0;
}

/* The randomized sketch's seed when the caller gives none: SHA-256 over a
 * label, the shape and the matrix's columns, so that equal inputs give equal
 * results (the sketch needs randomness independent of nothing secret: the
 * server holds the matrix anyway). */
static int sketch_seed(const fs_mat *yc, uint8_t seed[FS_SHA256_LEN], struct fs_err *err)
{
    static const char LABEL[] = "fedsvd/v1/sketch-seed";
    uint64_t shape[2] = {(uint64_t)yc->rows, (uint64_t)yc->cols};
    fs_sha256_ctx *sha = NULL;
    int rc = fs_sha256_new(&sha, err);

    if (rc == 0) {
        rc = fs_sha256_update(sha, LABEL, sizeof LABEL - 1, err);
    }
    if (rc == 0) {
        rc = fs_sha256_update(sha, shape, sizeof shape, err);
    }
    for (size_t j = 0; rc == 0 && j < yc->cols; j++) {
        rc = fs_sha256_update(sha, yc->data + j * yc->ld, yc->rows * sizeof(double), err);
    }
    if (rc == 0) {
        rc = fs_sha256_final(sha, seed, err);
    }
    fs_sha256_free(sha);
    return rc;
}

int fs_fedsvd_server_factorize(fs_mat *yc, size_t k, enum fs_topk_method method,
                               const uint8_t *seed, struct fs_fedsvd_published *out,
                               struct fs_err *err)
{
    uint8_t own_seed[FS_SHA256_LEN];

    struct fs_fedsvd_published res = {0};
    size_t r;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_server_factorize: out is NULL");
    }
    memset(out, 0, sizeof *out);
    rc = factorize_check(yc, k, err);
    if (rc != 0) {
        return rc;
    }
    r = yc->rows < yc->cols ? yc->rows : yc->cols;
    {
        double f = fs_mat_norm_fro(yc);
        res.total_sq = f * f;
    }
    if (k != 0 && method == FS_TOPK_AUTO) {
        method = 2 * k < r ? FS_TOPK_GESVDX : FS_TOPK_THIN;
    }
    if (k == 0 || method == FS_TOPK_THIN) {
        res.r = k == 0 ? r : k;
        res.s = malloc(res.r * sizeof *res.s);
        rc = res.s == NULL ? fs_err_set(err, FS_ENOMEM, "fedsvd: out of memory")
                           : thin_in_place(yc, res.r, res.s, &res.vc, err);
    } else {
        struct fs_svd_opts o = fs_svd_opts_default();
        fs_svd sv = {0};
        o.method = method;
        o.want_u = 0;
        o.seed = seed;
        if (seed == NULL && method == FS_TOPK_RANDOMIZED) {
            rc = sketch_seed(yc, own_seed, err);
            o.seed = own_seed;
        }
        if (rc == 0) {
            rc = fs_svd_topk(yc, k, &o, &sv, err);
        }
        if (rc == 0) {
            res.r = sv.r;
            res.s = sv.s;
            res.vc = sv.v;
            sv.s = NULL;
            sv.v = NULL;
        }
        fs_svd_clear(&sv);
    }
    if (rc != 0) {
        fs_fedsvd_published_clear(&res);
        return rc;
    }
    *out = res;
    return 0;
}

/* ------------------------------------------------------------------ party */

struct fs_fedsvd_party {
    struct fs_fedsvd_keys *keys;
    const fs_mat *x;     /* borrowed */
    size_t m, n;         /* canonical: Y_i is size x n, Y'_i is m x n */
    fs_mask *b;          /* B_c */
    fs_mat *t;           /* Y_i B_c, size x n; NULL before prepare / after end_upload */
    int exponent;        /* ours, valid once prepared */
    int public_exponent; /* valid when have_fp */
    int have_fp;
    int ended;
    uint32_t shards; /* the shard-blocked layout's S; 0 or 1 = unsharded */
    struct fs_fixedpt fp;
    /* Y'_i = A_c[:, R_i] T is zero outside the rows its slab covers (about
     * one block's worth of m): the cache holds only those, compactly. */
    size_t nrows;   /* rows the slab covers */
    size_t *srow;   /* those rows, ascending */
    size_t *sidx;   /* sidx[j]: the cache row of srow[j] */
    double *gbuf;   /* nrows: one column run's values, gathered */
    uint64_t *wbuf; /* nrows: their encodings */
    fs_mat *cache;  /* nrows x cache_w: columns [cache_c0, cache_c0 + cache_w) of those rows */
    size_t cache_w;
    size_t cache_c0;
    int cache_valid;
};

static void free_rowmap(fs_fedsvd_party *p)
{
    if (p->gbuf != NULL) {
        OPENSSL_cleanse(p->gbuf, p->nrows * sizeof *p->gbuf);
    }
    if (p->wbuf != NULL) {
        OPENSSL_cleanse(p->wbuf, p->nrows * sizeof *p->wbuf);
    }
    free(p->srow);
    free(p->sidx);
    free(p->gbuf);
    free(p->wbuf);
    p->srow = p->sidx = NULL;
    p->gbuf = NULL;
    p->wbuf = NULL;
    p->nrows = 0;
}

void fs_fedsvd_result_clear(struct fs_fedsvd_result *r)
{
    if (r == NULL) {
        return;
    }
    free(r->s);
    fs_mat_free(r->u);
    fs_mat_free(r->v);
    memset(r, 0, sizeof *r);
}

const struct fs_fedsvd_keys *fs_fedsvd_party_keys(const fs_fedsvd_party *p)
{
    return p != NULL ? p->keys : NULL;
}

int fs_fedsvd_party_prepared(const fs_fedsvd_party *p)
{
    return p == NULL || p->t != NULL || p->ended;
}

void fs_fedsvd_party_end_upload(fs_fedsvd_party *p)
{
    if (p == NULL) {
        return;
    }
    mat_free_secret(p->t);
    mat_free_secret(p->cache);
    free_rowmap(p);
    p->t = NULL;
    p->cache = NULL;
    p->cache_valid = 0;
    if (p->keys != NULL) {
        fs_mask_slab_free(p->keys->a_slab);
        p->keys->a_slab = NULL;
    }
    p->ended = 1;
}

void fs_fedsvd_party_free(fs_fedsvd_party *p)
{
    if (p == NULL) {
        return;
    }
    fs_fedsvd_party_end_upload(p);
    fs_fedsvd_keys_free(p->keys);
    fs_mask_free(p->b);
    OPENSSL_cleanse(p, sizeof *p);
    free(p);
}

int fs_fedsvd_party_new(struct fs_fedsvd_keys *keys, const fs_mat *x, fs_fedsvd_party **out,
                        struct fs_err *err)
{
    fs_fedsvd_party *p = NULL;
    size_t xr;
    size_t xc;
    int rc;

    if (out == NULL) {
        fs_fedsvd_keys_free(keys);
        return fs_err_set(err, FS_EINVAL, "fedsvd_party_new: out is NULL");
    }
    *out = NULL;
    rc = fs_fedsvd_keys_check(keys, err);
    if (rc != 0) {
        fs_fedsvd_keys_free(keys);
        return rc;
    }
    p = calloc(1, sizeof *p);
    if (p == NULL) {
        fs_fedsvd_keys_free(keys);
        return fs_err_set(err, FS_ENOMEM, "fedsvd_party_new: out of memory");
    }
    p->keys = keys;
    p->x = x;
    canon_dims(keys->partition, keys->rows, keys->cols, &p->m, &p->n);
    /* samples: X_i is size x d; features: X_i is N x size */
    xr = keys->partition == FS_FEDSVD_SAMPLES ? keys->size : keys->rows;
    xc = keys->partition == FS_FEDSVD_SAMPLES ? keys->cols : keys->size;
    if (x == NULL || x->data == NULL || x->ld < x->rows || x->rows != xr || x->cols != xc) {
        rc = fs_err_set(err, FS_EINVAL,
                        "fedsvd_party_new: party %u data is %zux%zu, expected "
                        "%zux%zu",
                        keys->party, x != NULL ? x->rows : 0, x != NULL ? x->cols : 0, xr, xc);
        goto out;
    }
    if (!fs_mat_all_finite(x, &xr, &xc)) {
        rc = fs_err_set(err, FS_EINVAL, "fedsvd_party_new: non-finite value at (%zu, %zu)", xr, xc);
        goto out;
    }
    rc = fs_mask_new(p->n, keys->block_b, keys->b_seed, &p->b, err);
    if (rc == 0) {
        /* drawn once for X_i B and again for B V': keep it when it is small */
        rc = fs_mask_keep(p->b, KEEP_SHARED_MASK_BYTES, err);
    }
out:
    if (rc != 0) {
        fs_fedsvd_party_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* T = Y_i B_c: X_i B_c (samples) or (B_c^T X_i)^T (features). */
static int compute_t(fs_fedsvd_party *p, struct fs_err *err)
{
    fs_mat *w = NULL;
    int rc;

    if (p->keys->partition == FS_FEDSVD_SAMPLES) {
        p->t = fs_mat_new_uninit(p->keys->size, p->n);
        if (p->t == NULL) {
            return fs_err_set(err, FS_ENOMEM, "fedsvd party: out of memory");
        }
        return fs_mask_mul_right(p->b, 'N', p->x, p->t, err);
    }
    w = fs_mat_new_uninit(p->n, p->keys->size);
    if (w == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd party: out of memory");
    }
    rc = fs_mask_mul_left(p->b, 'T', p->x, w, err);
    if (rc == 0) {
        p->t = fs_mat_transpose(w);
        if (p->t == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "fedsvd party: out of memory");
        }
    }
    mat_free_secret(w);
    return rc;
}

/* max_r ||A_c[r, R_i]||_2 from the slab pieces. */
static int slab_row_norm(const fs_mask_slab *s, size_t m, double *out, struct fs_err *err)
{
    double *ss = calloc(m, sizeof *ss);
    double mx = 0.0;

    if (ss == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd party: out of memory");
    }
    for (size_t p = 0; p < s->npieces; p++) {
        const fs_mask_piece *pc = &s->pieces[p];
        for (size_t c = 0; c < pc->q->cols; c++) {
            for (size_t a = 0; a < pc->q->rows; a++) {
                double v = FS_MAT_AT(pc->q, a, c);
                ss[pc->rows[a]] += v * v;
            }
        }
    }
    for (size_t r = 0; r < m; r++) {
        mx = ss[r] > mx ? ss[r] : mx;
    }
    fs_fedsvd_wipe_free(ss, m * sizeof *ss);
    *out = sqrt(mx);
    return 0;
}

int fs_fedsvd_party_prepare(fs_fedsvd_party *p, int *exponent, struct fs_err *err)
{
    double rho = 0.0;
    double colmax = 0.0;
    int rc;

    if (p == NULL || exponent == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_party_prepare: NULL argument");
    }
    if (p->ended) {
        return fs_err_set(err, FS_ESTATE, "fedsvd_party_prepare: upload already ended");
    }
    if (p->t != NULL) {
        *exponent = p->exponent;
        return 0;
    }
    rc = compute_t(p, err);
    if (rc == 0) {
        rc = slab_row_norm(p->keys->a_slab, p->m, &rho, err);
    }
    for (size_t c = 0; rc == 0 && c < p->n; c++) {
        fs_mat col = fs_mat_view(p->t, 0, c, p->t->rows, 1);
        double nc = fs_mat_norm_fro(&col);
        colmax = nc > colmax ? nc : colmax;
    }
    if (rc == 0) {
        rc = fs_fedsvd_exponent(rho * colmax, &p->exponent, err);
    }
    if (rc != 0) {
        mat_free_secret(p->t);
        p->t = NULL;
        return rc;
    }
    *exponent = p->exponent;
    return 0;
}

int fs_fedsvd_party_set_exponent(fs_fedsvd_party *p, int public_exponent, struct fs_err *err)
{
    int rc;

    if (p == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_party_set_exponent: NULL party");
    }
    if (p->t == NULL) {
        return fs_err_set(err, FS_ESTATE, "fedsvd_party_set_exponent: prepare first");
    }
    if (public_exponent < p->exponent) {
        return fs_err_set(err, FS_EINVAL,
                          "fedsvd_party_set_exponent: public exponent %d below ours (%d)",
                          public_exponent, p->exponent);
    }
    if (p->have_fp) {
        if (public_exponent != p->public_exponent) {
            return fs_err_set(err, FS_ESTATE,
                              "fedsvd_party_set_exponent: exponent already fixed at %d",
                              p->public_exponent);
        }
        return 0;
    }
    rc = fs_fedsvd_fixedpt(public_exponent, p->keys->parties, &p->fp, err);
    if (rc == 0) {
        p->have_fp = 1;
        p->public_exponent = public_exponent;
    }
    return rc;
}

/* The rows the slab covers, sorted, with their cache rows (pieces in
 * order, each piece's rows in its order: fs_mask_slab_mul_compact). A row
 * covered twice would make the compact product differ from A_c[:, R_i] T:
 * such keys are refused. */
static int build_rowmap(fs_fedsvd_party *p, struct fs_err *err)
{
    const fs_mask_slab *s = p->keys->a_slab;
    size_t r = fs_mask_slab_rows(s);
    size_t *at = NULL;
    size_t j = 0;
    size_t q = 0;

    if (p->srow != NULL) {
        return 0;
    }
    at = malloc((p->m > 0 ? p->m : 1) * sizeof *at);
    p->srow = malloc((r > 0 ? r : 1) * sizeof *p->srow);
    p->sidx = malloc((r > 0 ? r : 1) * sizeof *p->sidx);
    p->gbuf = malloc((r > 0 ? r : 1) * sizeof *p->gbuf);
    p->wbuf = malloc((r > 0 ? r : 1) * sizeof *p->wbuf);
    if (at == NULL || p->srow == NULL || p->sidx == NULL || p->gbuf == NULL || p->wbuf == NULL) {
        free(at);
        free_rowmap(p);
        return fs_err_set(err, FS_ENOMEM, "fedsvd party: out of memory");
    }
    p->nrows = r;
    for (size_t i = 0; i < p->m; i++) {
        at[i] = SIZE_MAX;
    }
    for (size_t t = 0; t < s->npieces; t++) {
        const fs_mask_piece *pc = &s->pieces[t];
        for (size_t a = 0; a < pc->q->rows; a++, q++) {
            size_t row = pc->rows[a];
            if (row >= p->m || at[row] != SIZE_MAX) {
                free(at);
                free_rowmap(p);
                return fs_err_set(err, FS_EINVAL, "fedsvd party: the mask slab's pieces %s row %zu",
                                  row >= p->m ? "go beyond" : "share", row);
            }
            at[row] = q;
        }
    }
    for (size_t i = 0; i < p->m; i++) {
        if (at[i] != SIZE_MAX) {
            p->srow[j] = i;
            p->sidx[j] = at[i];
            j++;
        }
    }
    free(at);
    return 0;
}

/* Make the block of columns of Y'_i = A_c[:, R_i] T that contains column col
 * the cached one (its rows the slab covers). Blocks start at multiples of
 * cache_w, so a column's bits do not depend on which chunk asked for it. */
static int fill_cache(fs_fedsvd_party *p, size_t col, struct fs_err *err)
{
    size_t c0;
    size_t w;
    int rc = build_rowmap(p, err);

    if (rc != 0) {
        return rc;
    }
    if (p->cache == NULL) {
        size_t cw = CACHE_WORDS / (p->nrows > 0 ? p->nrows : 1);
        cw = cw < CACHE_MIN_COLS ? CACHE_MIN_COLS : cw;
        p->cache_w = cw < p->n ? cw : p->n;
        p->cache = fs_mat_new_uninit(p->nrows, p->cache_w);
        if (p->cache == NULL) {
            return fs_err_set(err, FS_ENOMEM, "fedsvd party: out of memory for %zux%zu", p->nrows,
                              p->cache_w);
        }
    }
    c0 = (col / p->cache_w) * p->cache_w;
    w = p->n - c0 < p->cache_w ? p->n - c0 : p->cache_w;
    {
        fs_mat tv = fs_mat_view(p->t, 0, c0, p->t->rows, w);
        fs_mat cv = fs_mat_view(p->cache, 0, 0, p->nrows, w);
        p->cache_valid = 0;
        rc = fs_mask_slab_mul_compact(p->keys->a_slab, &tv, &cv, err);
    }
    if (rc == 0) {
        p->cache_c0 = c0;
        p->cache_valid = 1;
    }
    return rc;
}

/* First j with srow[j] >= row. */
static size_t rowmap_lower(const fs_fedsvd_party *p, size_t row)
{
    size_t lo = 0;
    size_t hi = p->nrows;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->srow[mid] < row) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Words of rows [row, row + run) of cached column cc into y: zero (the
 * encoding of 0) except the slab's rows, encoded. */
static int encode_run(fs_fedsvd_party *p, size_t cc, size_t row, size_t run, uint64_t *y,
                      struct fs_err *err)
{
    size_t j0 = rowmap_lower(p, row);
    size_t j1 = rowmap_lower(p, row + run);
    const double *col = &FS_MAT_AT(p->cache, 0, cc);
    int rc;

    memset(y, 0, run * sizeof *y);
    for (size_t j = j0; j < j1; j++) {
        p->gbuf[j - j0] = col[p->sidx[j]];
    }
    rc = fs_fixedpt_encode(&p->fp, p->gbuf, p->wbuf, j1 - j0, err);
    if (rc != 0) {
        return fs_err_prefix(err, "fedsvd party, column %zu: ", cc + p->cache_c0);
    }
    for (size_t j = j0; j < j1; j++) {
        y[p->srow[j] - row] = p->wbuf[j - j0];
    }
    return 0;
}

static int cache_has(const fs_fedsvd_party *p, size_t col)
{
    return p->cache_valid && col >= p->cache_c0 && col - p->cache_c0 < p->cache_w;
}

/* The shard-blocked layout (fedsvd_shard.h): the rows [*lo, *hi) of the
 * shard whose window [*base, ...) holds words [off, off + cnt); FS_EINVAL
 * when they span two windows. One shard: all rows, base 0. */
static int shard_span(const fs_fedsvd_party *p, uint64_t off, size_t cnt, size_t *lo, size_t *hi,
                      uint64_t *base, struct fs_err *err)
{
    uint32_t ns = p->shards > 1 ? p->shards : 1;

    for (uint32_t s = 0; s < ns; s++) {
        uint64_t l = (uint64_t)s * p->m / ns;
        uint64_t h = (uint64_t)(s + 1) * p->m / ns;
        if (off < h * p->n || s + 1 == ns) {
            if (cnt > h * p->n - off) {
                return fs_err_set(err, FS_EINVAL,
                                  "fedsvd_party_encode: words %llu+%zu cross the end of shard %u",
                                  (unsigned long long)off, cnt, s);
            }
            *lo = (size_t)l;
            *hi = (size_t)h;
            *base = l * p->n;
            return 0;
        }
    }
    return fs_err_set(err, FS_EINVAL, "fedsvd_party_encode: no shard");
}

int fs_fedsvd_party_set_shards(fs_fedsvd_party *p, uint32_t shards, struct fs_err *err)
{
    if (p == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_party_set_shards: NULL party");
    }
    if (shards > 1 && p->keys->partition != FS_FEDSVD_SAMPLES) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: shards need the samples partition");
    }
    if (shards > FS_FEDSVD_MAX_SHARDS || (shards > 1 && p->m < shards)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: %u shards for %zu rows (1..%u, >= 1 row each)",
                          shards, p->m, (unsigned)FS_FEDSVD_MAX_SHARDS);
    }
    p->shards = shards;
    return 0;
}

int fs_fedsvd_party_encode(fs_fedsvd_party *p, uint64_t off, uint64_t *y, size_t cnt,
                           struct fs_err *err)
{
    uint64_t len;
    uint64_t pos;
    uint64_t base = 0;
    size_t lo = 0;
    size_t hi = 0;
    int rc = 0;

    if (p == NULL || (y == NULL && cnt > 0)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_party_encode: NULL argument");
    }
    if (p->t == NULL || !p->have_fp) {
        return fs_err_set(err, FS_ESTATE, "fedsvd_party_encode: %s",
                          p->ended ? "upload ended" : "prepare and set the exponent first");
    }
    len = (uint64_t)p->m * (uint64_t)p->n;
    if (off > len || cnt > len - off) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_party_encode: words %llu+%zu beyond %llu",
                          (unsigned long long)off, cnt, (unsigned long long)len);
    }
    rc = shard_span(p, off, cnt, &lo, &hi, &base, err);
    for (pos = off; rc == 0 && pos < off + cnt;) {
        size_t col = (size_t)((pos - base) / (hi - lo));
        size_t row = lo + (size_t)((pos - base) % (hi - lo));
        size_t run = hi - row;
        if (run > off + cnt - pos) {
            run = (size_t)(off + cnt - pos);
        }
        if (!cache_has(p, col)) {
            rc = fill_cache(p, col, err);
        }
        if (rc == 0) {
            rc = encode_run(p, col - p->cache_c0, row, run, y + (pos - off), err);
        }
        pos += run;
    }
    return rc;
}

int fs_fedsvd_party_masked(fs_fedsvd_party *p, fs_secagg_client *c, uint64_t off, uint64_t *y,
                           size_t cnt, struct fs_err *err)
{
    int rc = fs_fedsvd_party_encode(p, off, y, cnt, err);

    if (rc == 0) {
        rc = fs_secagg_client_mask(c, off, y, y, cnt, err);
    }
    return rc;
}

static int published_check(const struct fs_fedsvd_published *pub, size_t m, size_t n,
                           struct fs_err *err)
{
    size_t rmax = m < n ? m : n;

    if (pub == NULL || pub->s == NULL || pub->vc == NULL || pub->r < 1 || pub->r > rmax ||
        pub->vc->data == NULL || pub->vc->rows != n || pub->vc->cols != pub->r ||
        pub->vc->ld < pub->vc->rows) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: published factor has the wrong shape");
    }
    for (size_t j = 0; j < pub->r; j++) {
        if (!isfinite(pub->s[j]) || pub->s[j] < 0.0 || (j > 0 && pub->s[j] > pub->s[j - 1])) {
            return fs_err_set(err, FS_EINVAL, "fedsvd: published singular value %zu is invalid", j);
        }
    }
    if (!fs_mat_all_finite(pub->vc, NULL, NULL)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd: published factor is not finite");
    }
    return 0;
}

/* Flip column pairs so the largest-magnitude entry of each shared column is positive. */
static void fix_signs(fs_mat *shared, fs_mat *priv)
{
    for (size_t j = 0; j < shared->cols; j++) {
        size_t best = 0;
        double bv = -1.0;
        for (size_t i = 0; i < shared->rows; i++) {
            double a = fabs(FS_MAT_AT(shared, i, j));
            if (a > bv) {
                bv = a;
                best = i;
            }
        }
        if (FS_MAT_AT(shared, best, j) >= 0.0) {
            continue;
        }
        for (size_t i = 0; i < shared->rows; i++) {
            FS_MAT_AT(shared, i, j) = -FS_MAT_AT(shared, i, j);
        }
        for (size_t i = 0; i < priv->rows; i++) {
            FS_MAT_AT(priv, i, j) = -FS_MAT_AT(priv, i, j);
        }
    }
}

int fs_fedsvd_party_recover(fs_fedsvd_party *p, const struct fs_fedsvd_published *pub, double rtol,
                            struct fs_fedsvd_result *out, struct fs_err *err)
{
    struct fs_fedsvd_result res = {0};
    fs_mat *shared = NULL;
    fs_mat *priv = NULL;
    int samples;
    int rc;

    if (out == NULL || p == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_party_recover: NULL argument");
    }
    memset(out, 0, sizeof *out);
    rc = published_check(pub, p->m, p->n, err);
    if (rc != 0) {
        return rc;
    }
    samples = p->keys->partition == FS_FEDSVD_SAMPLES;
    if (!(rtol > 0.0)) {
        rtol = (double)(p->m > p->n ? p->m : p->n) * DBL_EPSILON;
    }
    res.partition = p->keys->partition;
    res.r = pub->r;
    res.s = malloc(pub->r * sizeof *res.s);
    shared = fs_mat_new_uninit(p->n, pub->r);
    priv = fs_mat_new(p->keys->size, pub->r);
    if (res.s == NULL || shared == NULL || priv == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "fedsvd_party_recover: out of memory");
        goto out;
    }
    memcpy(res.s, pub->s, pub->r * sizeof *res.s);
    while (res.rank < res.r && res.s[res.rank] > rtol * res.s[0]) {
        res.rank++;
    }
    rc = fs_mask_mul_left(p->b, 'N', pub->vc, shared, err);
    if (rc == 0 && res.rank > 0) {
        /* private = Y_i shared[:, :rank] diag(1/s); Y_i = X_i or X_i^T */
        fs_mat sv = fs_mat_view(shared, 0, 0, p->n, res.rank);
        fs_mat pv = fs_mat_view(priv, 0, 0, p->keys->size, res.rank);
        rc = fs_mat_gemm(samples ? 'N' : 'T', 'N', 1.0, p->x, &sv, 0.0, &pv, err);
        for (size_t j = 0; rc == 0 && j < res.rank; j++) {
            fs_mat col = fs_mat_view(priv, 0, j, p->keys->size, 1);
            fs_mat_scale(&col, 1.0 / res.s[j]);
        }
    }
    if (rc != 0) {
        goto out;
    }
    fix_signs(shared, priv);
    res.u = samples ? priv : shared;
    res.v = samples ? shared : priv;
    shared = NULL;
    priv = NULL;
    *out = res;
    memset(&res, 0, sizeof res);
out:
    fs_mat_free(shared);
    fs_mat_free(priv);
    fs_fedsvd_result_clear(&res);
    return rc;
}
