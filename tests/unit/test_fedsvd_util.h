/* Helpers shared by test_fedsvd.c and test_fedpca.c: a secure-aggregation
 * job driven in one process (real crypto, dropouts injected before the
 * masked input or at the consistency round) and the accuracy measures of
 * docs/references.md. Everything is static: each test is one program. */
#ifndef FS_TEST_FEDSVD_UTIL_H
#define FS_TEST_FEDSVD_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "proto/secagg.h"
#include "test_la_util.h"
#include "test_secagg_util.h"

#define SA_MAXP 16

enum sa_drop {
    SA_STAY = 0,
    SA_DROP_BEFORE_INPUT,  /* never uploads in this aggregation (and is gone for good) */
    SA_DROP_AT_CONSISTENCY /* uploads, then disappears: its input is still in the sum */
};

struct sa {
    struct fs_secagg_config cfg;
    fs_secagg_client *c[SA_MAXP + 1];
    fs_secagg_server *s;
    int gone[SA_MAXP + 1];
};

/* Produce the masked chunk [off, off + cnt) of party `party`'s input. */
typedef int (*sa_input_fn)(void *ctx, uint32_t party, fs_secagg_client *c, uint64_t off,
                           uint64_t *y, size_t cnt, struct fs_err *err);

/* Key setup (R0, R1) for n parties, the server with chunk store `store`
 * (NULL: none). 0 or -1. */
static inline int sa_init_store(struct sa *j, uint32_t n, uint32_t t, uint32_t aggs, uint32_t chunk,
                                const struct fs_secagg_chunk_store *store)
{
    struct fs_err err = {0};

    memset(j, 0, sizeof *j);
    j->cfg.n = n;
    j->cfg.t = t;
    j->cfg.aggregations = aggs;
    j->cfg.chunk_words = chunk;
    if (n > SA_MAXP || fs_rand_bytes(j->cfg.job_id, 32, &err) != 0 ||
        fs_secagg_server_new(&j->cfg, store, &j->s, &err) != 0) {
        return -1;
    }
    for (uint32_t i = 1; i <= n; i++) {
        uint8_t sk[32], pk[32];
        struct fs_secagg_adv a;
        if (fs_ed25519_keygen(sk, pk, &err) != 0 ||
            fs_secagg_client_new(&j->cfg, i, sk, &j->c[i], &err) != 0 ||
            fs_secagg_client_advertise(j->c[i], &a, &err) != 0 ||
            fs_secagg_server_add_adv(j->s, &a, &err) != 0) {
            return -1;
        }
    }
    return sa_share_all(j->s, j->c, n, &err) == 0 ? 0 : -1;
}

/* Key setup (R0, R1) for n parties. 0 or -1. */
static inline int sa_init(struct sa *j, uint32_t n, uint32_t t, uint32_t aggs, uint32_t chunk)
{
    return sa_init_store(j, n, t, aggs, chunk, NULL);
}

static inline void sa_free(struct sa *j)
{
    fs_secagg_server_free(j->s);
    for (uint32_t i = 1; i <= j->cfg.n; i++) {
        fs_secagg_client_free(j->c[i]);
    }
}

/* After the masked input is closed: U3 (*u3, a new array: free()), the
 * consistency round (a party with drop[i] == SA_DROP_AT_CONSISTENCY leaves
 * instead; drop may be NULL) and the reveals of U4. 0, or -1 when the server
 * refused to close the consistency round. */
static inline int sa_consistency_reveals(struct sa *j, const enum sa_drop *drop, uint32_t **u3,
                                         size_t *n3, struct fs_err *err)
{
    const uint32_t *set;
    size_t k3 = 0, k4 = 0;

    set = fs_secagg_server_set(j->s, 3, &k3);
    *u3 = malloc(k3 * sizeof **u3);
    memcpy(*u3, set, k3 * sizeof **u3);
    *n3 = k3;
    for (size_t q = 0; q < k3; q++) {
        uint32_t i = set[q];
        uint8_t sig[64];
        if (drop != NULL && drop[i] == SA_DROP_AT_CONSISTENCY) {
            j->gone[i] = 1;
            continue;
        }
        CHECK_OK(fs_secagg_client_consistency(j->c[i], set, k3, sig, err), err);
        CHECK_OK(fs_secagg_server_add_consistency(j->s, i, sig, err), err);
    }
    if (fs_secagg_server_close_consistency(j->s, err) != 0) {
        return -1;
    }
    set = fs_secagg_server_set(j->s, 4, &k4);
    for (size_t q = 0; q < k4; q++) {
        struct fs_secagg_reveal *rv = NULL;
        size_t nrv = 0;
        uint32_t i = set[q];
        CHECK_OK(
            fs_secagg_client_unmask(j->c[i], set, fs_secagg_server_sigs(j->s), k4, &rv, &nrv, err),
            err);
        CHECK_OK(fs_secagg_server_add_reveals(j->s, i, rv, nrv, err), err);
        free(rv);
    }
    return 0;
}

/* One aggregation r of len words. drop[i] (may be NULL) says what party i does.
 * On success *sum is borrowed from the server and *u3 is a new array (free()).
 * Returns 0, or -1 when the server aborted. */
static inline int sa_aggregate(struct sa *j, uint32_t r, uint64_t len, sa_input_fn fn, void *ctx,
                               const enum sa_drop *drop, const uint64_t **sum, uint32_t **u3,
                               size_t *n3)
{
    struct fs_err err = {0};
    const uint32_t *set;
    size_t na = 0;
    uint64_t cw = j->cfg.chunk_words;
    uint64_t *y = malloc(cw * sizeof *y);
    int rc = -1;

    *u3 = NULL;
    *n3 = 0;
    if (y == NULL || fs_secagg_server_begin(j->s, r, len, &err) != 0) {
        goto out;
    }
    set = fs_secagg_server_set(j->s, 0, &na);
    for (size_t q = 0; q < na; q++) {
        uint32_t i = set[q];
        if (j->gone[i]) {
            continue;
        }
        if (drop != NULL && drop[i] == SA_DROP_BEFORE_INPUT) {
            j->gone[i] = 1;
            continue;
        }
        CHECK_OK(fs_secagg_client_begin(j->c[i], r, len, set, na, &err), &err);
        for (uint64_t idx = 0; idx * cw < len; idx++) {
            size_t m = (size_t)(len - idx * cw < cw ? len - idx * cw : cw);
            CHECK_OK(fn(ctx, i, j->c[i], idx * cw, y, m, &err), &err);
            CHECK_OK(fs_secagg_server_add_masked(j->s, i, idx, y, m, &err), &err);
        }
    }
    if (fs_secagg_server_close_masked(j->s, &err) != 0) {
        goto out;
    }
    if (sa_consistency_reveals(j, drop, u3, n3, &err) != 0 ||
        fs_secagg_server_finish(j->s, sum, &err) != 0) {
        goto out;
    }
    rc = 0;
out:
    if (rc != 0) {
        free(*u3);
        *u3 = NULL;
        *n3 = 0;
    }
    free(y);
    return rc;
}

/* ------------------------------------------------------------ metrics */

/* max |a_j - b_j| / b_0 over j < r. */
static inline double sv_err(const double *a, const double *b, size_t r)
{
    double e = 0.0;

    for (size_t j = 0; j < r; j++) {
        double d = fabs(a[j] - b[j]) / b[0];
        e = d > e ? d : e;
    }
    return e;
}

/* ||P_k P_k^T - Q_k Q_k^T||_F for the first k columns (dense; small n only). */
static inline double proj_dist(const fs_mat *p, const fs_mat *q, size_t k)
{
    struct fs_err err = {0};
    fs_mat pv = fs_mat_view(p, 0, 0, p->rows, k);
    fs_mat qv = fs_mat_view(q, 0, 0, q->rows, k);
    fs_mat *d = fs_mat_new(p->rows, p->rows);
    double r = 1e300;

    if (d != NULL && fs_mat_gemm('N', 'T', 1.0, &pv, &pv, 0.0, d, &err) == 0 &&
        fs_mat_gemm('N', 'T', -1.0, &qv, &qv, 1.0, d, &err) == 0) {
        r = fs_mat_norm_fro(d);
    }
    fs_mat_free(d);
    return r;
}

/* ||X - U_k diag(s) V_k^T||_F / ||X||_F. */
static inline double recon_err(const fs_mat *x, const fs_mat *u, const double *s, const fs_mat *v,
                               size_t k)
{
    struct fs_err err = {0};
    fs_mat *us = fs_mat_new(u->rows, k);
    fs_mat *d = fs_mat_dup(x);
    double r = 1e300;

    for (size_t j = 0; us != NULL && j < k; j++) {
        for (size_t i = 0; i < u->rows; i++) {
            FS_MAT_AT(us, i, j) = FS_MAT_AT(u, i, j) * s[j];
        }
    }
    if (us != NULL && d != NULL) {
        fs_mat vv = fs_mat_view(v, 0, 0, v->rows, k);
        if (fs_mat_gemm('N', 'T', -1.0, us, &vv, 1.0, d, &err) == 0) {
            r = fs_mat_norm_fro(d) / fs_mat_norm_fro(x);
        }
    }
    fs_mat_free(us);
    fs_mat_free(d);
    return r;
}

/* New row stack of parts[0..k) (same column count). */
static inline fs_mat *stack_rows(fs_mat *const *parts, size_t k)
{
    size_t rows = 0;
    size_t r0 = 0;
    fs_mat *s;

    for (size_t i = 0; i < k; i++) {
        rows += parts[i]->rows;
    }
    s = fs_mat_new(rows, parts[0]->cols);
    for (size_t i = 0; s != NULL && i < k; i++) {
        for (size_t j = 0; j < s->cols; j++) {
            for (size_t a = 0; a < parts[i]->rows; a++) {
                FS_MAT_AT(s, r0 + a, j) = FS_MAT_AT(parts[i], a, j);
            }
        }
        r0 += parts[i]->rows;
    }
    return s;
}

/* max over the first k columns of min(|a_j - b_j|, |a_j + b_j|) (sign-free). */
static inline double col_err(const fs_mat *a, const fs_mat *b, size_t k)
{
    double e = 0.0;

    for (size_t j = 0; j < k; j++) {
        double dp = 0.0, dm = 0.0;
        for (size_t i = 0; i < a->rows; i++) {
            double x = FS_MAT_AT(a, i, j), y = FS_MAT_AT(b, i, j);
            dp = fabs(x - y) > dp ? fabs(x - y) : dp;
            dm = fabs(x + y) > dm ? fabs(x + y) : dm;
        }
        dp = dp < dm ? dp : dm;
        e = dp > e ? dp : e;
    }
    return e;
}

#endif
