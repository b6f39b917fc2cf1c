/* Sharded aggregation of FedSVD: row split, windows, per-shard R, TSQR
 * (see fedsvd_shard.h). */
#include "fedsvd_shard.h"

#include <stdlib.h>
#include <string.h>

#include "../la/fixedpt.h"
#include "../la/qr.h"

uint32_t fs_fedsvd_shard_count(const struct fs_fedsvd_job *job)
{
    return (job == NULL || job->shards <= 1) ? 1 : job->shards;
}

int fs_fedsvd_shard_rows(const struct fs_fedsvd_job *job, uint32_t s, uint64_t *lo, uint64_t *hi)
{
    uint32_t ns;

    if (lo == NULL || hi == NULL || fs_fedsvd_job_check(job, NULL) != 0) {
        return FS_EINVAL;
    }
    ns = fs_fedsvd_shard_count(job);
    if (s >= ns) {
        return FS_EINVAL;
    }
    /* samples (checked for ns > 1): the rows of Y' are the N samples */
    *lo = (uint64_t)s * job->rows / ns;
    *hi = (uint64_t)(s + 1) * job->rows / ns;
    if (ns == 1 && job->partition != FS_FEDSVD_SAMPLES) {
        *lo = 0;
        *hi = job->cols; /* features: Y' = X'^T, d rows */
    }
    return 0;
}

int fs_fedsvd_shard_window(const struct fs_fedsvd_job *job, uint32_t s, uint64_t *off,
                           uint64_t *len)
{
    uint64_t lo;
    uint64_t hi;
    uint64_t n;
    int rc;

    if (off == NULL || len == NULL) {
        return FS_EINVAL;
    }
    rc = fs_fedsvd_shard_rows(job, s, &lo, &hi);
    if (rc != 0) {
        return rc;
    }
    n = job->partition == FS_FEDSVD_SAMPLES ? job->cols : job->rows;
    *off = lo * n;
    *len = (hi - lo) * n;
    return 0;
}

int fs_fedsvd_shard_r(const struct fs_fedsvd_job *job, uint32_t s, int public_exponent,
                      uint64_t *sum, fs_mat **r_out, struct fs_err *err)
{
    struct fs_fixedpt fp;
    uint64_t lo = 0;
    uint64_t hi = 0;
    uint64_t off = 0;
    uint64_t len = 0;
    fs_mat *y = NULL;
    int rc;

    if (r_out == NULL || sum == NULL) {
        free(sum);
        return fs_err_set(err, FS_EINVAL, "fedsvd_shard_r: NULL argument");
    }
    *r_out = NULL;
    rc = fs_fedsvd_job_check(job, err);
    if (rc == 0 && (fs_fedsvd_shard_rows(job, s, &lo, &hi) != 0 ||
                    fs_fedsvd_shard_window(job, s, &off, &len) != 0)) {
        rc = fs_err_set(err, FS_EINVAL, "fedsvd_shard_r: no shard %u of %u", s,
                        fs_fedsvd_shard_count(job));
    }
    if (rc == 0) {
        rc = fs_fedsvd_fixedpt(public_exponent, job->parties, &fp, err);
    }
    if (rc == 0) {
        y = malloc(sizeof *y);
        rc = y == NULL ? fs_err_set(err, FS_ENOMEM, "fedsvd_shard_r: out of memory") : 0;
    }
    if (rc != 0) {
        free(sum);
        return rc;
    }
    /* in place, as fs_fedsvd_server_decode_owned: the window is the
     * (hi - lo) x n block of Y' in column-major order (ld hi - lo) */
    fs_fixedpt_decode(&fp, sum, (double *)(void *)sum, (size_t)len);
    *y = (fs_mat){(size_t)(hi - lo), (size_t)(len / (hi - lo)), (size_t)(hi - lo),
                  (double *)(void *)sum, 1};
    rc = fs_qr_keep_r(y, err);
    if (rc != 0) {
        fs_mat_wipe(y);
        fs_mat_free(y);
        return rc;
    }
    *r_out = y;
    return 0;
}

/* The R's stacked: sum of their rows x n, compact. */
static int stack_r(fs_mat *const *r, uint32_t ns, size_t n, fs_mat **out, struct fs_err *err)
{
    size_t rows = 0;
    size_t at = 0;
    fs_mat *z;

    *out = NULL;
    for (uint32_t s = 0; s < ns; s++) {
        if (r[s] == NULL || r[s]->data == NULL || r[s]->cols != n || r[s]->rows < 1 ||
            r[s]->rows > n || r[s]->ld < r[s]->rows) {
            return fs_err_set(err, FS_EINVAL, "fedsvd_tsqr_factorize: R of shard %u is not r x %zu",
                              s, n);
        }
        rows += r[s]->rows;
    }
    z = fs_mat_new_uninit(rows, n);
    if (z == NULL) {
        return fs_err_set(err, FS_ENOMEM, "fedsvd_tsqr_factorize: out of memory for %zux%zu", rows,
                          n);
    }
    for (uint32_t s = 0; s < ns; s++) {
        for (size_t j = 0; j < n; j++) {
            memcpy(&FS_MAT_AT(z, at, j), &FS_MAT_AT(r[s], 0, j), r[s]->rows * sizeof(double));
        }
        at += r[s]->rows;
    }
    *out = z;
    return 0;
}

int fs_fedsvd_tsqr_factorize(const struct fs_fedsvd_job *job, fs_mat *const *r, uint32_t S,
                             size_t k, enum fs_topk_method method, const uint8_t *seed,
                             struct fs_fedsvd_published *out, struct fs_err *err)
{
    fs_mat *z = NULL;
    size_t n;
    int rc;

    if (out == NULL || r == NULL) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_tsqr_factorize: NULL argument");
    }
    memset(out, 0, sizeof *out);
    rc = fs_fedsvd_job_check(job, err);
    if (rc != 0) {
        return rc;
    }
    if (S != fs_fedsvd_shard_count(job)) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_tsqr_factorize: %u R factors for %u shards", S,
                          fs_fedsvd_shard_count(job));
    }
    n = job->partition == FS_FEDSVD_SAMPLES ? job->cols : job->rows;
    rc = stack_r(r, S, n, &z, err);
    /* Y' = Q_blocks [R_0; ...; R_{S-1}] = Q_blocks Q_z R: Y', the stack and R
     * share S, V' and the Frobenius norm. The stack is at most S n x n; with
     * more rows than n its QR first leaves the n x n R (what the unsharded
     * thin path factorizes), so every method sees a small square problem. */
    if (rc == 0 && z->rows > n && k != 0) {
        rc = fs_qr_keep_r(z, err);
    }
    if (rc == 0) {
        rc = fs_fedsvd_server_factorize(z, k, method, seed, out, err);
    }
    if (z != NULL) {
        fs_mat_wipe(z);
    }
    fs_mat_free(z);
    return rc;
}

/* R checked as stack_r checks it: 1..n rows of n columns. */
static int r_ok(const fs_mat *r, size_t n)
{
    return r != NULL && r->data != NULL && r->cols == n && r->rows >= 1 && r->rows <= n &&
           r->ld >= r->rows;
}

int fs_fedsvd_tsqr_fold(fs_mat **acc, const fs_mat *r, size_t n, struct fs_err *err)
{
    fs_mat *parts[2];
    fs_mat *z = NULL;
    int rc;

    if (acc == NULL || !r_ok(r, n) || (*acc != NULL && !r_ok(*acc, n))) {
        return fs_err_set(err, FS_EINVAL, "fedsvd_tsqr_fold: R is not r x %zu", n);
    }
    if (*acc == NULL) {
        parts[0] = (fs_mat *)r;
        rc = stack_r(parts, 1, n, &z, err); /* a compact copy */
    } else {
        parts[0] = *acc;
        parts[1] = (fs_mat *)r;
        rc = stack_r(parts, 2, n, &z, err);
        if (rc == 0 && z->rows > n) {
            rc = fs_qr_keep_r(z, err); /* in place: n x n */
        }
    }
    if (rc != 0) {
        if (z != NULL) {
            fs_mat_wipe(z);
        }
        fs_mat_free(z);
        return rc;
    }
    if (*acc != NULL) {
        fs_mat_wipe(*acc);
        fs_mat_free(*acc);
    }
    *acc = z;
    return 0;
}

int fs_fedsvd_tsqr_finish(const struct fs_fedsvd_job *job, fs_mat *acc, size_t k,
                          enum fs_topk_method method, const uint8_t *seed,
                          struct fs_fedsvd_published *out, struct fs_err *err)
{
    size_t n;
    int rc;

    if (out == NULL || acc == NULL) {
        rc = fs_err_set(err, FS_EINVAL, "fedsvd_tsqr_finish: NULL argument");
        goto out;
    }
    memset(out, 0, sizeof *out);
    rc = fs_fedsvd_job_check(job, err);
    if (rc != 0) {
        goto out;
    }
    n = job->partition == FS_FEDSVD_SAMPLES ? job->cols : job->rows;
    if (!r_ok(acc, n)) {
        rc = fs_err_set(err, FS_EINVAL, "fedsvd_tsqr_finish: the factor is not r x %zu", n);
        goto out;
    }
    rc = fs_fedsvd_server_factorize(acc, k, method, seed, out, err);
out:
    if (acc != NULL) {
        fs_mat_wipe(acc);
    }
    fs_mat_free(acc);
    return rc;
}
