/* Helpers shared by the tests/unit/test_la_*.c programs: seeded random
 * matrices, matrices with prescribed singular values, and the accuracy
 * measures of docs/references.md. Everything is static: each test is one program. */
#ifndef FS_TEST_LA_UTIL_H
#define FS_TEST_LA_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "crypto/prg.h"
#include "la/haar.h"
#include "la/mat.h"

/* New rows x cols standard normal matrix from a seed byte; NULL on failure. */
static inline fs_mat *tl_randn(size_t rows, size_t cols, uint8_t seed)
{
    uint8_t key[32] = {0};
    struct fs_err err = {0};
    fs_prg *prg = NULL;
    fs_mat *m = fs_mat_new(rows, cols);

    key[0] = seed;
    key[31] = 0xa5;
    if (m == NULL || fs_prg_new(&prg, key, NULL, &err) != 0 ||
        fs_mat_fill_normal(m, prg, &err) != 0) {
        fs_mat_free(m);
        m = NULL;
    }
    fs_prg_free(prg);
    return m;
}

/* New Haar orthogonal n x n from a seed byte; NULL on failure. */
static inline fs_mat *tl_haar(size_t n, uint8_t seed)
{
    uint8_t key[32] = {0};
    struct fs_err err = {0};
    fs_mat *q = NULL;

    key[0] = seed;
    key[1] = 0x5a;
    if (fs_haar_from_seed(n, key, &q, &err) != 0) {
        return NULL;
    }
    return q;
}

/* New m x n matrix Q1[:, :r] diag(s) Q2[:, :r]^T with Haar Q1, Q2 (r <= min(m, n)). */
static inline fs_mat *tl_with_svals(size_t m, size_t n, const double *s, size_t r, uint8_t seed)
{
    struct fs_err err = {0};
    fs_mat *q1 = tl_haar(m, seed);
    fs_mat *q2 = tl_haar(n, (uint8_t)(seed + 101));
    fs_mat *a = fs_mat_new(m, n);
    fs_mat *us = fs_mat_new(m, r);

    if (q1 == NULL || q2 == NULL || a == NULL || us == NULL) {
        goto fail;
    }
    for (size_t j = 0; j < r; j++) {
        for (size_t i = 0; i < m; i++) {
            FS_MAT_AT(us, i, j) = FS_MAT_AT(q1, i, j) * s[j];
        }
    }
    {
        fs_mat v = fs_mat_view(q2, 0, 0, n, r);
        if (fs_mat_gemm('N', 'T', 1.0, us, &v, 0.0, a, &err) != 0) {
            goto fail;
        }
    }
    fs_mat_free(q1);
    fs_mat_free(q2);
    fs_mat_free(us);
    return a;
fail:
    fs_mat_free(q1);
    fs_mat_free(q2);
    fs_mat_free(us);
    fs_mat_free(a);
    return NULL;
}

/* ||Q^T Q - I||_F; large on failure. */
static inline double tl_orth_err(const fs_mat *q)
{
    struct fs_err err = {0};
    fs_mat *g = NULL;
    double e;

    if (fs_mat_mul('T', 'N', q, q, &g, &err) != 0) {
        return 1e300;
    }
    for (size_t i = 0; i < g->rows; i++) {
        FS_MAT_AT(g, i, i) -= 1.0;
    }
    e = fs_mat_norm_fro(g);
    fs_mat_free(g);
    return e;
}

/* max |a_ij - b_ij| (same shape assumed; 1e300 otherwise). */
static inline double tl_max_diff(const fs_mat *a, const fs_mat *b)
{
    double mx = 0.0;

    if (a == NULL || b == NULL || a->rows != b->rows || a->cols != b->cols) {
        return 1e300;
    }
    for (size_t j = 0; j < a->cols; j++) {
        for (size_t i = 0; i < a->rows; i++) {
            double d = fabs(FS_MAT_AT(a, i, j) - FS_MAT_AT(b, i, j));
            if (!(d <= mx)) {
                mx = d;
            }
        }
    }
    return mx;
}

/* 1 if a and b have the same shape and bit-identical entries. */
static inline int tl_bit_equal(const fs_mat *a, const fs_mat *b)
{
    if (a == NULL || b == NULL || a->rows != b->rows || a->cols != b->cols) {
        return 0;
    }
    for (size_t j = 0; j < a->cols; j++) {
        if (a->rows > 0 &&
            memcmp(a->data + j * a->ld, b->data + j * b->ld, a->rows * sizeof(double)) != 0) {
            return 0;
        }
    }
    return 1;
}

/* Projection distance ||Z1 Z1^T - Z2 Z2^T||_F for orthonormal Z1, Z2 (same shape). */
static inline double tl_proj_dist(const fs_mat *z1, const fs_mat *z2)
{
    struct fs_err err = {0};
    fs_mat *p = fs_mat_new(z1->rows, z1->rows);
    double d = 1e300;

    if (p != NULL && fs_mat_gemm('N', 'T', 1.0, z1, z1, 0.0, p, &err) == 0 &&
        fs_mat_gemm('N', 'T', -1.0, z2, z2, 1.0, p, &err) == 0) {
        d = fs_mat_norm_fro(p);
    }
    fs_mat_free(p);
    return d;
}

#endif
