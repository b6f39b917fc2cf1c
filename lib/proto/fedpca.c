/* Federated PCA: global statistics by secure sum hidden behind ring offsets,
 * then FedSVD of the centred data. See fedpca.h for the scheme. */
#include "fedpca.h"

#include <float.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/hkdf.h"
#include "../crypto/prg.h"

/* Statistics travel as 3-limb fixed point: a value is an integer X =
 * round(v 2^f) with |X| < 2^(126 - c), K <= 2^c, written as two 52-bit
 * digits and a signed top limb, one ring word each. Each word's sum over K
 * <= 1000 parties stays below 2^62 (digits) or tiny (top), so the exact sum
 * of the X's is rebuilt in 128 bits. Precision: 2^-116 K relative to the
 * largest value, i.e. full double precision for every column whatever the
 * spread between columns (a single 64-bit word gives 2^-62 K^2 relative to
 * the largest, which loses 7 digits for a column 1e-9 of the largest). */
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

#define WIDE_WORDS 3
#define DIGIT_BITS 52
#define DIGIT_MASK (((uint64_t)1 << DIGIT_BITS) - 1)
#define TOP_BITS   (128 - 2 * DIGIT_BITS) /* 24 */

static int wide_frac_bits(int e, uint32_t parties)
{
    int c = 0;

    while (((uint64_t)1 << c) < parties) {
        c++;
    }
    return 126 - e - c;
}

/* |v| < 2^e (the exponent's margin) makes |X| < 2^(126 - c). */
static void wide_encode(double v, int f, uint64_t out[WIDE_WORDS])
{
    double r = nearbyint(ldexp(v, f));
    u128 u = (u128)(i128)r;
    uint64_t top = (uint64_t)(u >> (2 * DIGIT_BITS)) & ((((uint64_t)1) << TOP_BITS) - 1);

    out[0] = (uint64_t)u & DIGIT_MASK;
    out[1] = (uint64_t)(u >> DIGIT_BITS) & DIGIT_MASK;
    /* sign-extend the 24-bit top limb into a ring word */
    out[2] = (top >> (TOP_BITS - 1)) ? top | ~((((uint64_t)1) << TOP_BITS) - 1) : top;
}

/* The sum of K encodings back to a double. Unsigned 128-bit arithmetic: a
 * garbage sum (wrong contributor set) wraps instead of overflowing. */
static double wide_decode(const uint64_t s[WIDE_WORDS], int f)
{
    u128 top = (u128)s[2];
    u128 tot;

    if (s[2] >> 63) {
        top |= ~(u128)0 << 64; /* sign-extend the summed top limb */
    }
    tot = (top << (2 * DIGIT_BITS)) + ((u128)s[1] << DIGIT_BITS) + (u128)s[0];
    if (tot >> 127) {
        return -ldexp((double)(~tot) + 1.0, -f);
    }
    return ldexp((double)tot, -f);
}

struct fs_fedpca_party {
    struct fs_fedsvd_keys *keys; /* owned until the SVD step hands it to svd */
    const fs_mat *x;             /* borrowed */
    int standardize;
    enum fs_fedpca_step step;
    enum fs_fedsvd_partition partition;
    uint32_t party, parties;
    size_t nrows, d; /* shape of X_i */
    size_t rows;     /* N of the job */
    uint8_t group_key[32];
    double *mean;  /* d */
    double *scale; /* d, NULL without standardize */
    double *stat;  /* this round's local statistic (d) */
    int stat_exp;  /* its exponent, valid when have_stat */
    int have_stat;
    int pub_exp; /* this round's public exponent, valid when have_pub */
    int have_pub;
    size_t n_total;    /* N of the rows included */
    uint32_t *contrib; /* round 0's contributor set, sorted */
    size_t ncontrib;
    fs_mat *z; /* centred (scaled) copy of X_i */
    fs_fedsvd_party *svd;
};

void fs_fedpca_result_clear(struct fs_fedpca_result *r)
{
    if (r == NULL) {
        return;
    }
    free(r->s);
    free(r->explained_variance);
    free(r->explained_variance_ratio);
    free(r->mean);
    free(r->scale);
    fs_mat_free(r->components);
    fs_mat_free(r->scores);
    memset(r, 0, sizeof *r);
}

unsigned fs_fedpca_aggregations(enum fs_fedsvd_partition partition, int standardize)
{
    if (partition == FS_FEDSVD_FEATURES) {
        return 1;
    }
    return standardize ? 3 : 2;
}

void fs_fedpca_party_free(fs_fedpca_party *p)
{
    if (p == NULL) {
        return;
    }
    fs_fedsvd_keys_free(p->keys);
    fs_fedsvd_party_free(p->svd);
    fs_mat_wipe(p->z);
    fs_mat_free(p->z);
    fs_fedsvd_wipe_free(p->mean, p->d * sizeof *p->mean);
    fs_fedsvd_wipe_free(p->scale, p->d * sizeof *p->scale);
    fs_fedsvd_wipe_free(p->stat, p->d * sizeof *p->stat);
    free(p->contrib);
    OPENSSL_cleanse(p, sizeof *p);
    free(p);
}

enum fs_fedpca_step fs_fedpca_party_step(const fs_fedpca_party *p)
{
    return p != NULL ? p->step : FS_FEDPCA_STEP_DONE;
}

size_t fs_fedpca_party_stats_len(const fs_fedpca_party *p)
{
    if (p == NULL) {
        return 0;
    }
    if (p->step == FS_FEDPCA_STEP_MEAN) {
        return WIDE_WORDS * p->d + 1;
    }
    return p->step == FS_FEDPCA_STEP_VAR ? WIDE_WORDS * p->d : 0;
}

fs_fedsvd_party *fs_fedpca_party_svd(fs_fedpca_party *p)
{
    return p != NULL && p->step == FS_FEDPCA_STEP_SVD ? p->svd : NULL;
}

/* stat[j] = sum_i x_ij (MEAN) or sum_i (x_ij - mean_j)^2 (VAR). */
static void local_stat(const fs_mat *x, const double *mean, double *stat)
{
    for (size_t j = 0; j < x->cols; j++) {
        double acc = 0.0;
        for (size_t i = 0; i < x->rows; i++) {
            double v = FS_MAT_AT(x, i, j);
            if (mean != NULL) {
                v -= mean[j];
                v *= v;
            }
            acc += v;
        }
        stat[j] = acc;
    }
}

/* Scale for a column with mean mu and sample variance var (ddof 1). */
static double column_scale(double mu, double var, size_t n)
{
    double tiny = (double)n * DBL_EPSILON * fabs(mu);

    if (!(var > tiny * tiny)) {
        return 1.0; /* constant column: leave it centred, unscaled */
    }
    return sqrt(var);
}

/* Centre (and scale) a copy of X_i, then start the FedSVD party on it. */
static int enter_svd(fs_fedpca_party *p, struct fs_err *err)
{
    int rc;

    p->z = fs_mat_new_uninit(p->nrows, p->d);
    if (p->z == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpca: out of memory for %zux%zu", p->nrows, p->d);
    }
    for (size_t j = 0; j < p->d; j++) {
        double inv = p->scale != NULL ? 1.0 / p->scale[j] : 1.0;
        for (size_t i = 0; i < p->nrows; i++) {
            FS_MAT_AT(p->z, i, j) = (FS_MAT_AT(p->x, i, j) - p->mean[j]) * inv;
        }
    }
    rc = fs_fedsvd_party_new(p->keys, p->z, &p->svd, err);
    p->keys = NULL; /* taken, also on failure */
    if (rc == 0) {
        p->step = FS_FEDPCA_STEP_SVD;
    }
    return rc;
}

/* Features: every column is local, so are its mean and variance. */
static int local_moments(fs_fedpca_party *p, struct fs_err *err)
{
    if (p->rows < 2) {
        return fs_err_set(err, FS_EINVAL, "fedpca: PCA needs at least 2 samples");
    }
    local_stat(p->x, NULL, p->mean);
    for (size_t j = 0; j < p->d; j++) {
        p->mean[j] /= (double)p->rows;
    }
    if (p->scale != NULL) {
        local_stat(p->x, p->mean, p->scale);
        for (size_t j = 0; j < p->d; j++) {
            p->scale[j] = column_scale(p->mean[j], p->scale[j] / (double)(p->rows - 1), p->rows);
        }
    }
    p->n_total = p->rows;
    return enter_svd(p, err);
}

int fs_fedpca_party_new(struct fs_fedsvd_keys *keys, const fs_mat *x, int standardize,
                        fs_fedpca_party **out, struct fs_err *err)
{
    fs_fedpca_party *p = NULL;
    int rc;

    if (out == NULL) {
        fs_fedsvd_keys_free(keys);
        return fs_err_set(err, FS_EINVAL, "fedpca_party_new: out is NULL");
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
        return fs_err_set(err, FS_ENOMEM, "fedpca_party_new: out of memory");
    }
    p->keys = keys;
    p->x = x;
    p->standardize = standardize != 0;
    p->partition = keys->partition;
    p->party = keys->party;
    p->parties = keys->parties;
    p->rows = keys->rows;
    p->nrows = keys->partition == FS_FEDSVD_SAMPLES ? keys->size : keys->rows;
    p->d = keys->partition == FS_FEDSVD_SAMPLES ? keys->cols : keys->size;
    memcpy(p->group_key, keys->group_key, 32);
    if (x == NULL || x->data == NULL || x->ld < x->rows || x->rows != p->nrows || x->cols != p->d ||
        !fs_mat_all_finite(x, NULL, NULL)) {
        rc = fs_err_set(err, FS_EINVAL, "fedpca_party_new: data must be a finite %zux%zu matrix",
                        p->nrows, p->d);
        goto out;
    }
    p->mean = calloc(p->d, sizeof *p->mean);
    p->stat = calloc(p->d, sizeof *p->stat);
    p->scale = p->standardize ? calloc(p->d, sizeof *p->scale) : NULL;
    if (p->mean == NULL || p->stat == NULL || (p->standardize && p->scale == NULL)) {
        rc = fs_err_set(err, FS_ENOMEM, "fedpca_party_new: out of memory");
        goto out;
    }
    if (p->partition == FS_FEDSVD_FEATURES) {
        rc = local_moments(p, err);
    } else {
        p->step = FS_FEDPCA_STEP_MEAN;
    }
out:
    if (rc != 0) {
        fs_fedpca_party_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

static int stats_step_check(const fs_fedpca_party *p, const char *who, struct fs_err *err)
{
    if (p == NULL) {
        return fs_err_set(err, FS_EINVAL, "%s: NULL party", who);
    }
    if (p->step != FS_FEDPCA_STEP_MEAN && p->step != FS_FEDPCA_STEP_VAR) {
        return fs_err_set(err, FS_ESTATE, "%s: not in a statistics step", who);
    }
    return 0;
}

static int round_of(const fs_fedpca_party *p)
{
    return p->step == FS_FEDPCA_STEP_MEAN ? 0 : 1;
}

/* This round's local statistic and its exponent, once. */
static int local_round_stat(fs_fedpca_party *p, struct fs_err *err)
{
    double mx = 0.0;
    int rc;

    if (p->have_stat) {
        return 0;
    }
    local_stat(p->x, p->step == FS_FEDPCA_STEP_VAR ? p->mean : NULL, p->stat);
    for (size_t j = 0; j < p->d; j++) {
        mx = fabs(p->stat[j]) > mx ? fabs(p->stat[j]) : mx;
    }
    rc = fs_fedsvd_exponent(mx, &p->stat_exp, err);
    if (rc == 0) {
        p->have_stat = 1;
    }
    return rc;
}

int fs_fedpca_party_stats_exponent(fs_fedpca_party *p, uint8_t sealed[FS_FEDSVD_SEALED_EXP_LEN],
                                   struct fs_err *err)
{
    int rc = stats_step_check(p, "fedpca_party_stats_exponent", err);

    if (rc == 0 && sealed == NULL) {
        rc = fs_err_set(err, FS_EINVAL, "fedpca_party_stats_exponent: sealed is NULL");
    }
    if (rc == 0) {
        rc = local_round_stat(p, err);
    }
    if (rc == 0) {
        rc = fs_fedsvd_exponent_seal(p->group_key, (uint32_t)round_of(p), p->party, p->stat_exp,
                                     sealed, err);
    }
    return rc;
}

int fs_fedpca_party_stats_open(fs_fedpca_party *p, const uint32_t *ids,
                               const uint8_t (*sealed)[FS_FEDSVD_SEALED_EXP_LEN], size_t k,
                               struct fs_err *err)
{
    int e = 0;
    int rc = stats_step_check(p, "fedpca_party_stats_open", err);

    if (rc == 0) {
        rc = local_round_stat(p, err);
    }
    if (rc == 0) {
        rc = fs_fedsvd_exponent_open_max(p->group_key, (uint32_t)round_of(p), ids, sealed, k, &e,
                                         err);
    }
    if (rc != 0) {
        return rc;
    }
    if (e < p->stat_exp) {
        return fs_err_set(err, FS_EINVAL, "fedpca: our own exponent is missing from the set");
    }
    p->pub_exp = e;
    p->have_pub = 1;
    return 0;
}

/* vec +=/-= the offset o_{round, party} (len words). */
static int apply_offset(const fs_fedpca_party *p, int round, uint32_t party, uint64_t *vec,
                        size_t len, int subtract, struct fs_err *err)
{
    static const char label[] = "fedpca/offset";
    uint8_t info[sizeof label - 1 + 8];
    uint8_t key[32];
    fs_prg *prg = NULL;
    int rc;

    memcpy(info, label, sizeof label - 1);
    for (int b = 0; b < 4; b++) {
        info[sizeof label - 1 + b] = (uint8_t)((unsigned)round >> (8 * b));
        info[sizeof label - 1 + 4 + b] = (uint8_t)(party >> (8 * b));
    }
    rc = fs_hkdf_sha256_expand(key, sizeof key, p->group_key, info, sizeof info, err);
    if (rc == 0) {
        rc = fs_prg_new(&prg, key, NULL, err);
    }
    if (rc == 0) {
        rc = subtract ? fs_prg_sub_u64(prg, vec, len, err) : fs_prg_add_u64(prg, vec, len, err);
    }
    fs_prg_free(prg);
    OPENSSL_cleanse(key, sizeof key);
    return rc;
}

int fs_fedpca_party_stats_input(fs_fedpca_party *p, uint64_t *y, size_t len, struct fs_err *err)
{
    int f;
    int rc = stats_step_check(p, "fedpca_party_stats_input", err);

    if (rc != 0) {
        return rc;
    }
    if (!p->have_pub) {
        return fs_err_set(err, FS_ESTATE, "fedpca_party_stats_input: open the exponents first");
    }
    if (y == NULL || len != fs_fedpca_party_stats_len(p)) {
        return fs_err_set(err, FS_EINVAL, "fedpca_party_stats_input: %zu words, expected %zu", len,
                          fs_fedpca_party_stats_len(p));
    }
    f = wide_frac_bits(p->pub_exp, p->parties);
    for (size_t j = 0; j < p->d; j++) {
        wide_encode(p->stat[j], f, y + WIDE_WORDS * j);
    }
    if (p->step == FS_FEDPCA_STEP_MEAN) {
        y[WIDE_WORDS * p->d] = (uint64_t)p->nrows;
    }
    return apply_offset(p, round_of(p), p->party, y, len, 0, err);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a;
    uint32_t y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* Sorted copy of a contributor set; checks ids, duplicates and our presence. */
static int sorted_set(const fs_fedpca_party *p, const uint32_t *ids, size_t n, uint32_t **out,
                      struct fs_err *err)
{
    uint32_t *s;
    int self = 0;

    *out = NULL;
    if (ids == NULL || n == 0 || n > p->parties) {
        return fs_err_set(err, FS_EINVAL, "fedpca: contributor set of %zu parties is invalid", n);
    }
    s = malloc(n * sizeof *s);
    if (s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpca: out of memory");
    }
    memcpy(s, ids, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_u32);
    for (size_t q = 0; q < n; q++) {
        if (s[q] < 1 || s[q] > p->parties || (q > 0 && s[q] == s[q - 1])) {
            uint32_t bad = s[q];
            free(s);
            return fs_err_set(err, FS_EINVAL, "fedpca: contributor %u unknown or repeated", bad);
        }
        self |= s[q] == p->party;
    }
    if (!self) {
        free(s);
        return fs_err_set(err, FS_ESTATE, "fedpca: party %u is not among the contributors",
                          p->party);
    }
    *out = s;
    return 0;
}

/* Check ids against round 0's set; *fresh receives a new sorted copy when this
 * is round 0 (stored by the caller once the round succeeded). */
static int same_set(const fs_fedpca_party *p, const uint32_t *ids, size_t n, uint32_t **fresh,
                    struct fs_err *err)
{
    uint32_t *s = NULL;
    int rc = sorted_set(p, ids, n, &s, err);

    *fresh = NULL;
    if (rc != 0) {
        return rc;
    }
    if (p->contrib == NULL) {
        *fresh = s;
        return 0;
    }
    if (n != p->ncontrib || memcmp(s, p->contrib, n * sizeof *s) != 0) {
        rc = fs_err_set(err, FS_ESTATE,
                        "fedpca: the contributors changed between aggregations "
                        "(%zu then %zu parties): the statistics no longer match "
                        "the rows",
                        p->ncontrib, n);
    }
    free(s);
    return rc;
}

/* Turn the offset-free sums into mean (and count) or scale. */
static int absorb_round(fs_fedpca_party *p, const uint64_t *sums, struct fs_err *err)
{
    int f = wide_frac_bits(p->pub_exp, p->parties);

    if (p->step == FS_FEDPCA_STEP_MEAN) {
        uint64_t count = sums[WIDE_WORDS * p->d];
        if (count < 2 || count > p->rows || count < p->nrows) {
            return fs_err_set(err, FS_ESTATE,
                              "fedpca: the decoded count is implausible: the contributor set does "
                              "not match the sum, or fewer than 2 samples");
        }
        p->n_total = (size_t)count;
        for (size_t j = 0; j < p->d; j++) {
            p->mean[j] = wide_decode(sums + WIDE_WORDS * j, f) / (double)p->n_total;
        }
        return 0;
    }
    for (size_t j = 0; j < p->d; j++) {
        double var = wide_decode(sums + WIDE_WORDS * j, f) / (double)(p->n_total - 1);
        p->scale[j] = column_scale(p->mean[j], var < 0.0 ? 0.0 : var, p->n_total);
    }
    return 0;
}

int fs_fedpca_party_stats_result(fs_fedpca_party *p, const uint64_t *sum, size_t len,
                                 const uint32_t *contributors, size_t ncontrib, struct fs_err *err)
{
    uint64_t *tmp = NULL;
    uint32_t *fresh = NULL;
    int rc = stats_step_check(p, "fedpca_party_stats_result", err);

    if (rc != 0) {
        return rc;
    }
    if (!p->have_pub) {
        return fs_err_set(err, FS_ESTATE, "fedpca_party_stats_result: open the exponents first");
    }
    if (sum == NULL || len != fs_fedpca_party_stats_len(p)) {
        return fs_err_set(err, FS_EINVAL, "fedpca_party_stats_result: %zu words, expected %zu", len,
                          fs_fedpca_party_stats_len(p));
    }
    rc = same_set(p, contributors, ncontrib, &fresh, err);
    if (rc != 0) {
        return rc;
    }
    tmp = malloc(len * sizeof *tmp);
    if (tmp == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "fedpca: out of memory");
        goto out;
    }
    memcpy(tmp, sum, len * sizeof *tmp);
    for (size_t q = 0; rc == 0 && q < ncontrib; q++) {
        rc = apply_offset(p, round_of(p), contributors[q], tmp, len, 1, err);
    }
    if (rc == 0) {
        rc = absorb_round(p, tmp, err);
    }
    if (rc != 0) {
        goto out;
    }
    p->have_stat = 0;
    p->have_pub = 0;
    if (fresh != NULL) {
        p->contrib = fresh;
        p->ncontrib = ncontrib;
        fresh = NULL;
    }
    if (p->step == FS_FEDPCA_STEP_MEAN && p->standardize) {
        p->step = FS_FEDPCA_STEP_VAR;
    } else {
        rc = enter_svd(p, err);
    }
out:
    free(fresh);
    fs_fedsvd_wipe_free(tmp, len * sizeof *tmp);
    return rc;
}

/* Copy n doubles (NULL-safe). */
static double *dup_doubles(const double *a, size_t n)
{
    double *b;

    if (a == NULL) {
        return NULL;
    }
    b = malloc((n > 0 ? n : 1) * sizeof *b);
    if (b != NULL) {
        memcpy(b, a, n * sizeof *b);
    }
    return b;
}

/* Fill the PCA result from the FedSVD result (whose matrices are taken). */
static int build_result(fs_fedpca_party *p, struct fs_fedsvd_result *fr, double total_sq,
                        struct fs_fedpca_result *res, struct fs_err *err)
{
    double dof = (double)(p->n_total - 1);
    int samples = p->partition == FS_FEDSVD_SAMPLES;
    int rc = 0;

    res->partition = p->partition;
    res->k = fr->r;
    res->rank = fr->rank;
    res->n_samples = p->n_total;
    res->nmean = p->d;
    res->total_variance = total_sq / dof;
    res->s = dup_doubles(fr->s, fr->r);
    res->explained_variance = malloc(fr->r * sizeof(double));
    res->explained_variance_ratio = malloc(fr->r * sizeof(double));
    res->mean = dup_doubles(p->mean, p->d);
    res->scale = dup_doubles(p->scale, p->d);
    res->scores = fs_mat_new_uninit(samples ? p->nrows : p->rows, fr->r);
    if (res->s == NULL || res->explained_variance == NULL ||
        res->explained_variance_ratio == NULL || res->mean == NULL ||
        (p->scale != NULL && res->scale == NULL) || res->scores == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpca: out of memory");
    }
    for (size_t j = 0; j < fr->r; j++) {
        double s2 = fr->s[j] * fr->s[j];
        res->explained_variance[j] = s2 / dof;
        res->explained_variance_ratio[j] = total_sq > 0.0 ? s2 / total_sq : 0.0;
    }
    if (samples) {
        /* scores = Z_i V directly: exact also for components beyond the rank */
        rc = fs_mat_gemm('N', 'N', 1.0, p->z, fr->v, 0.0, res->scores, err);
        res->components = fr->v;
        fr->v = NULL;
    } else {
        rc = fs_mat_copy(res->scores, fr->u, err);
        for (size_t j = 0; rc == 0 && j < fr->r; j++) {
            fs_mat col = fs_mat_view(res->scores, 0, j, p->rows, 1);
            fs_mat_scale(&col, fr->s[j]);
        }
        res->components = fr->v;
        fr->v = NULL;
    }
    return rc;
}

int fs_fedpca_party_finish(fs_fedpca_party *p, const struct fs_fedsvd_published *pub,
                           const uint32_t *contributors, size_t ncontrib, double rtol,
                           struct fs_fedpca_result *out, struct fs_err *err)
{
    struct fs_fedsvd_result fr = {0};
    struct fs_fedpca_result res = {0};
    int rc;

    if (p == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedpca_party_finish: NULL argument");
    }
    memset(out, 0, sizeof *out);
    if (p->step != FS_FEDPCA_STEP_SVD) {
        return fs_err_set(err, FS_ESTATE, "fedpca_party_finish: not in the SVD step");
    }
    rc = 0;
    if (p->partition == FS_FEDSVD_SAMPLES) {
        uint32_t *fresh = NULL;
        rc = same_set(p, contributors, ncontrib, &fresh, err);
        free(fresh); /* NULL: round 0 always stored a set */
    }
    if (rc == 0) {
        rc = fs_fedsvd_party_recover(p->svd, pub, rtol, &fr, err);
    }
    if (rc == 0) {
        rc = build_result(p, &fr, pub->total_sq, &res, err);
    }
    fs_fedsvd_result_clear(&fr);
    if (rc != 0) {
        fs_fedpca_result_clear(&res);
        return rc;
    }
    p->step = FS_FEDPCA_STEP_DONE;
    *out = res;
    return 0;
}

int fs_fedpca_server_check_round(const struct fs_fedsvd_job *job, int allow_dropouts,
                                 const uint32_t *first, size_t nfirst, const uint32_t *now,
                                 size_t nnow, struct fs_err *err)
{
    uint8_t *seen = NULL;
    int rc = fs_fedsvd_server_check_contributors(job, allow_dropouts, now, nnow, NULL, err);

    if (rc != 0 || first == NULL) {
        return rc;
    }
    if (nfirst != nnow) {
        return fs_err_set(err, FS_ESTATE,
                          "fedpca: %zu parties contributed to the first "
                          "aggregation, %zu to this one",
                          nfirst, nnow);
    }
    seen = calloc((size_t)job->parties + 1, 1);
    if (seen == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedpca: out of memory");
    }
    for (size_t q = 0; q < nnow; q++) {
        seen[now[q]] = 1; /* ids checked above */
    }
    for (size_t q = 0; rc == 0 && q < nfirst; q++) {
        if (first[q] < 1 || first[q] > job->parties || !seen[first[q]]) {
            rc = fs_err_set(err, FS_ESTATE,
                            "fedpca: party %u contributed to the first "
                            "aggregation but not to this one",
                            first[q]);
        }
    }
    free(seen);
    return rc;
}
