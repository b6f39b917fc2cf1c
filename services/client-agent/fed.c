/* The party side of fedsvd / fedpca jobs (docs/wire-fedsvd.md) for the
 * worker: checks the masking server's keys (manifest, then the assembled
 * keys) against the invitation, holds
 * the lib/proto party state (fs_fedsvd_party or fs_fedpca_party), produces
 * each aggregation's sealed exponent and masked chunks, absorbs the
 * statistics sums, and turns the published S and V' into the party's
 * result files. No HTTP here: worker.c moves the messages. */
#include "agent.h"

#include "core/hex.h"
#include "crypto/ct.h"
#include "io/matio.h"
#include "maskkeys.h"
#include "proto/fedpca.h"
#include "proto/fedsvd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ca_fed {
    int pca;       /* fedpca (else fedsvd) */
    int partition; /* FS_JOB_SAMPLES / FS_JOB_FEATURES */
    uint32_t party;
    uint32_t naggs;
    uint64_t rows, cols; /* the pooled matrix */
    fs_fedsvd_party *sp; /* fedsvd */
    fs_fedpca_party *pp; /* fedpca */
    uint64_t *stats;     /* this statistics round's input (fedpca samples) */
    size_t nstats;
};

static fs_fedsvd_party *svd_party(struct ca_fed *f)
{
    return f->pca ? fs_fedpca_party_svd(f->pp) : f->sp;
}

uint32_t ca_fed_aggregations(const struct ca_fed *f)
{
    return f->naggs;
}

int ca_fed_is_stats(const struct ca_fed *f, uint32_t r)
{
    return r + 1 < f->naggs;
}

uint64_t ca_fed_agg_len(const struct ca_fed *f, uint32_t r)
{
    if (ca_fed_is_stats(f, r)) {
        return r == 0 ? 3 * f->cols + 1 : 3 * f->cols;
    }
    return f->rows * f->cols;
}

/* The keys must be this party's keys of this job. */
static int check_keys(const struct fs_fedsvd_keys *k, const struct fs_invitation *inv,
                      struct fs_err *err)
{
    uint64_t off = 0;
    int part = inv->fed.partition == FS_JOB_FEATURES ? FS_FEDSVD_FEATURES : FS_FEDSVD_SAMPLES;

    for (uint32_t i = 1; i < inv->party; i++) {
        off += inv->fed.party_sizes[i - 1];
    }
    if (k->party != inv->party || k->parties != inv->parties || (int)k->partition != part ||
        k->rows != inv->global_rows || k->cols != inv->global_cols || k->offset != off ||
        k->size != inv->fed.party_sizes[inv->party - 1]) {
        return fs_err_set(err, FS_EINVAL,
                          "the masking server's keys do not fit this invitation (party %u/%u of "
                          "%u/%u, %s, %zu x %zu, range %zu+%zu): wrong mask set?",
                          k->party, inv->party, k->parties, inv->parties,
                          k->partition == FS_FEDSVD_FEATURES ? "features" : "samples", k->rows,
                          k->cols, k->offset, k->size);
    }
    return 0;
}

int ca_fed_check_manifest(const struct fs_invitation *inv, const struct fs_maskkeys *m,
                          struct fs_err *err)
{
    if (strcmp(m->job_id, inv->job_id) != 0 || strcmp(m->maskset, inv->maskset) != 0) {
        return fs_err_set(err, FS_EINVAL,
                          "the masking server's keys are for job %.64s, mask set %.64s, not "
                          "this invitation's: wrong mask set?",
                          m->job_id, m->maskset);
    }
    return check_keys(&m->hdr, inv, err);
}

int ca_fed_new(const struct fs_invitation *inv, const fs_mat *x, struct fs_fedsvd_keys *keys,
               struct ca_fed **out, struct fs_err *err)
{
    struct ca_fed *f = calloc(1, sizeof *f);
    int rc;

    *out = NULL;
    if (f == NULL) {
        fs_fedsvd_keys_free(keys);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    f->pca = inv->algo_known && inv->algo == FS_ALGO_FEDPCA;
    f->partition = inv->fed.partition;
    f->party = inv->party;
    f->rows = inv->global_rows;
    f->cols = inv->global_cols;
    f->naggs = f->pca && f->partition == FS_JOB_SAMPLES ? (inv->fed.standardize ? 3 : 2) : 1;
    rc = check_keys(keys, inv, err);
    if (rc != 0) {
        fs_fedsvd_keys_free(keys);
        goto fail;
    }
    /* both take ownership of keys, also on failure */
    rc = f->pca ? fs_fedpca_party_new(keys, x, inv->fed.standardize, &f->pp, err)
                : fs_fedsvd_party_new(keys, x, &f->sp, err);
    if (rc != 0) {
        goto fail;
    }
    *out = f;
    return 0;
fail:
    ca_fed_free(f);
    return rc;
}

void ca_fed_free(struct ca_fed *f)
{
    if (f == NULL) {
        return;
    }
    fs_fedsvd_party_free(f->sp);
    fs_fedpca_party_free(f->pp);
    if (f->stats != NULL) {
        fs_wipe(f->stats, f->nstats * sizeof *f->stats);
        free(f->stats);
    }
    free(f);
}

int ca_fed_exponent(struct ca_fed *f, uint32_t r, uint8_t sealed[FS_FEDSVD_SEALED_EXP_LEN],
                    struct fs_err *err)
{
    fs_fedsvd_party *sp;
    int e = 0;
    int rc;

    if (ca_fed_is_stats(f, r)) {
        return fs_fedpca_party_stats_exponent(f->pp, sealed, err);
    }
    sp = svd_party(f);
    if (sp == NULL) {
        return fs_err_set(err, FS_ESTATE, "the SVD step has not begun");
    }
    rc = fs_fedsvd_party_prepare(sp, &e, err);
    if (rc == 0) {
        rc = fs_fedsvd_exponent_seal(fs_fedsvd_party_keys(sp)->group_key, r, f->party, e, sealed,
                                     err);
    }
    return rc;
}

int ca_fed_prepare_pending(struct ca_fed *f)
{
    return f != NULL && !fs_fedsvd_party_prepared(svd_party(f));
}

int ca_fed_prepare(struct ca_fed *f, struct fs_err *err)
{
    fs_fedsvd_party *sp = f != NULL ? svd_party(f) : NULL;
    int e = 0;

    if (sp == NULL) {
        return fs_err_set(err, FS_ESTATE, "the SVD step has not begun");
    }
    return fs_fedsvd_party_prepare(sp, &e, err);
}

int ca_fed_open(struct ca_fed *f, uint32_t r, const uint32_t *ids,
                const uint8_t (*sealed)[FS_FEDSVD_SEALED_EXP_LEN], size_t k, int *pubexp,
                struct fs_err *err)
{
    fs_fedsvd_party *sp;
    int rc;

    *pubexp = 0;
    if (ca_fed_is_stats(f, r)) {
        size_t len;
        rc = fs_fedpca_party_stats_open(f->pp, ids, sealed, k, err);
        if (rc != 0) {
            return rc;
        }
        len = fs_fedpca_party_stats_len(f->pp);
        if (len != ca_fed_agg_len(f, r)) {
            return fs_err_set(err, FS_EINTERNAL, "statistics length %zu, expected %llu", len,
                              (unsigned long long)ca_fed_agg_len(f, r));
        }
        if (f->stats != NULL) {
            fs_wipe(f->stats, f->nstats * sizeof *f->stats);
            free(f->stats);
        }
        f->nstats = len;
        f->stats = malloc((len + 1) * sizeof *f->stats);
        if (f->stats == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        return fs_fedpca_party_stats_input(f->pp, f->stats, len, err);
    }
    sp = svd_party(f);
    if (sp == NULL) {
        return fs_err_set(err, FS_ESTATE, "the SVD step has not begun");
    }
    rc = fs_fedsvd_exponent_open_max(fs_fedsvd_party_keys(sp)->group_key, r, ids, sealed, k, pubexp,
                                     err);
    if (rc == 0) {
        rc = fs_fedsvd_party_set_exponent(sp, *pubexp, err);
    }
    return rc;
}

int ca_fed_chunk(struct ca_fed *f, uint32_t r, fs_secagg_client *c, uint64_t off, uint64_t *y,
                 size_t m, struct fs_err *err)
{
    if (ca_fed_is_stats(f, r)) {
        if (f->stats == NULL || off + m > f->nstats) {
            return fs_err_set(err, FS_ESTATE, "no statistics input for this chunk");
        }
        memcpy(y, f->stats + off, m * sizeof *y);
        return fs_secagg_client_mask(c, off, y, y, m, err);
    }
    if (svd_party(f) == NULL) {
        return fs_err_set(err, FS_ESTATE, "the SVD step has not begun");
    }
    return fs_fedsvd_party_masked(svd_party(f), c, off, y, m, err);
}

int ca_fed_set_shards(struct ca_fed *f, uint32_t shards, struct fs_err *err)
{
    if (svd_party(f) == NULL) {
        return fs_err_set(err, FS_ESTATE, "the SVD step has not begun");
    }
    return fs_fedsvd_party_set_shards(svd_party(f), shards, err);
}

void ca_fed_end_upload(struct ca_fed *f, uint32_t r)
{
    if (ca_fed_is_stats(f, r)) {
        if (f->stats != NULL) {
            fs_wipe(f->stats, f->nstats * sizeof *f->stats);
            free(f->stats);
            f->stats = NULL;
            f->nstats = 0;
        }
    } else if (svd_party(f) != NULL) {
        fs_fedsvd_party_end_upload(svd_party(f));
    }
}

int ca_fed_stats_result(struct ca_fed *f, const uint64_t *sum, size_t len, const uint32_t *u3,
                        size_t n3, struct fs_err *err)
{
    return fs_fedpca_party_stats_result(f->pp, sum, len, u3, n3, err);
}

/* Write one result file and add {"name", "shape", "sha256"} to files. */
static int put_file(const char *dir, const char *name, const fs_mat *m, json_t *files,
                    struct fs_err *err)
{
    char path[CA_PATH_MAX + 64];
    uint8_t d[32];
    char hex[65];
    json_t *shape;
    int rc;

    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        return fs_err_set(err, FS_EINVAL, "path too long");
    }
    rc = fs_npy_write_mat(path, m, err);
    if (rc != 0) {
        return rc;
    }
    rc = ca_files_sha256(path, d, err);
    if (rc != 0) {
        return rc;
    }
    fs_hex_encode(d, sizeof d, hex);
    shape = json_pack("[I, I]", (json_int_t)m->rows, (json_int_t)m->cols);
    if (json_array_append_new(files, json_pack("{s:s, s:o, s:s}", "name", name, "shape", shape,
                                               "sha256", hex)) != 0) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    return 0;
}

static int put_vec(const char *dir, const char *name, const double *v, size_t n, json_t *files,
                   struct fs_err *err)
{
    char path[CA_PATH_MAX + 64];
    uint8_t d[32];
    char hex[65];
    int rc;

    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        return fs_err_set(err, FS_EINVAL, "path too long");
    }
    rc = fs_npy_write_vec(path, v, n, err);
    if (rc == 0) {
        rc = ca_files_sha256(path, d, err);
    }
    if (rc != 0) {
        return rc;
    }
    fs_hex_encode(d, sizeof d, hex);
    if (json_array_append_new(files, json_pack("{s:s, s:[I], s:s}", "name", name, "shape",
                                               (json_int_t)n, "sha256", hex)) != 0) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    return 0;
}

int ca_fed_finish(struct ca_fed *f, const double *s, size_t r, fs_mat *vc, double total_sq,
                  const uint32_t *u3, size_t n3, const char *dir, json_t *files, json_t *info,
                  struct fs_err *err)
{
    struct fs_fedsvd_published pub;
    int rc;

    memset(&pub, 0, sizeof pub);
    pub.r = r;
    pub.s = (double *)s; /* borrowed: not cleared here */
    pub.vc = vc;
    pub.total_sq = total_sq;
    if (!f->pca) {
        struct fs_fedsvd_result res = {0};
        rc = fs_fedsvd_party_recover(f->sp, &pub, 0.0, &res, err);
        if (rc == 0) {
            rc = put_vec(dir, "S.npy", res.s, res.r, files, err);
        }
        if (rc == 0) {
            rc = put_file(dir, "U.npy", res.u, files, err);
        }
        if (rc == 0) {
            rc = put_file(dir, "V.npy", res.v, files, err);
        }
        if (rc == 0) {
            json_object_set_new(info, "rank", json_integer((json_int_t)res.rank));
            json_object_set_new(info, "r", json_integer((json_int_t)res.r));
            json_object_set_new(info, "shared",
                                json_string(f->partition == FS_JOB_FEATURES ? "U.npy" : "V.npy"));
            json_object_set_new(info, "private",
                                json_string(f->partition == FS_JOB_FEATURES ? "V.npy" : "U.npy"));
        }
        if (res.u != NULL) {
            fs_mat_wipe(res.u);
        }
        if (res.v != NULL) {
            fs_mat_wipe(res.v);
        }
        fs_fedsvd_result_clear(&res);
        return rc;
    }
    {
        struct fs_fedpca_result res = {0};
        rc = fs_fedpca_party_finish(f->pp, &pub, u3, n3, 0.0, &res, err);
        if (rc == 0) {
            rc = put_vec(dir, "singular_values.npy", res.s, res.k, files, err);
        }
        if (rc == 0) {
            rc = put_file(dir, "components.npy", res.components, files, err);
        }
        if (rc == 0) {
            rc = put_vec(dir, "explained_variance.npy", res.explained_variance, res.k, files, err);
        }
        if (rc == 0) {
            rc = put_vec(dir, "explained_variance_ratio.npy", res.explained_variance_ratio, res.k,
                         files, err);
        }
        if (rc == 0) {
            rc = put_vec(dir, "mean.npy", res.mean, res.nmean, files, err);
        }
        if (rc == 0 && res.scale != NULL) {
            rc = put_vec(dir, "scale.npy", res.scale, res.nmean, files, err);
        }
        if (rc == 0) {
            rc = put_file(dir, "scores.npy", res.scores, files, err);
        }
        if (rc == 0) {
            json_object_set_new(info, "rank", json_integer((json_int_t)res.rank));
            json_object_set_new(info, "r", json_integer((json_int_t)res.k));
            json_object_set_new(info, "n_samples", json_integer((json_int_t)res.n_samples));
            json_object_set_new(info, "total_variance", json_real(res.total_variance));
            json_object_set_new(
                info, "shared",
                json_string(f->partition == FS_JOB_FEATURES ? "scores.npy" : "components.npy"));
            json_object_set_new(
                info, "private",
                json_string(f->partition == FS_JOB_FEATURES ? "components.npy" : "scores.npy"));
        }
        if (res.scores != NULL) {
            fs_mat_wipe(res.scores);
        }
        fs_fedpca_result_clear(&res);
    }
    return rc;
}
