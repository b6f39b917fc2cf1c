/* The matrix readers (lib/io) on one input, shared by fuzz_npy.c,
 * fuzz_csv.c, fuzz_mtx.c and fuzz_idx.c: dense and sparse loads and the
 * check-only pass under caps small enough for a fuzzer's memory, and the
 * invariants every result must keep. */
#ifndef FS_TESTS_FUZZ_IO_H
#define FS_TESTS_FUZZ_IO_H

#include "fuzz.h"

#include <math.h>

#include "lib/io/matio.h"

static inline struct fs_io_caps fuzz_io_caps(void)
{
    struct fs_io_caps caps = {
        .max_rows = 1u << 16, .max_cols = 1u << 12, .max_elems = 1u << 22, .max_nnz = 1u << 20};
    return caps;
}

static inline void fuzz_io_check_err(int rc, const struct fs_err *err)
{
    if (rc != 0) {
        FUZZ_CHECK(rc < 0);
        FUZZ_CHECK(err->msg[0] != '\0');
        FUZZ_CHECK(memchr(err->msg, '\0', sizeof err->msg) != NULL);
    }
}

/* The dense load; its status and shape (0 x 0 on failure) for
 * fuzz_io_check_agrees. */
static inline int fuzz_io_dense(const char *path, enum fs_io_format fmt, size_t *rows, size_t *cols)
{
    struct fs_io_caps caps = fuzz_io_caps();
    struct fs_err err = {0};
    fs_mat *m = NULL;
    int rc = fs_io_load_dense(path, fmt, &caps, &m, &err);

    *rows = 0;
    *cols = 0;
    fuzz_io_check_err(rc, &err);
    if (rc == 0) {
        *rows = m->rows;
        *cols = m->cols;
        FUZZ_CHECK(m != NULL && m->rows <= caps.max_rows && m->cols <= caps.max_cols);
        FUZZ_CHECK((uint64_t)m->rows * m->cols <= caps.max_elems);
        for (size_t j = 0; j < m->cols; j++) {
            for (size_t i = 0; i < m->rows; i++) {
                FUZZ_CHECK(isfinite(FS_MAT_AT(m, i, j)));
            }
        }
    } else {
        FUZZ_CHECK(m == NULL);
    }
    fs_mat_free(m);
    return rc;
}

static inline void fuzz_io_sparse(const char *path, enum fs_io_format fmt)
{
    struct fs_io_caps caps = fuzz_io_caps();
    struct fs_err err = {0};
    fs_csr *a = NULL;
    int rc = fs_io_load_sparse(path, fmt, &caps, &a, &err);

    fuzz_io_check_err(rc, &err);
    if (rc == 0) {
        FUZZ_CHECK(a != NULL && a->rowptr[0] == 0 && a->rowptr[a->rows] == a->nnz);
        for (size_t i = 0; i < a->rows; i++) {
            FUZZ_CHECK(a->rowptr[i] <= a->rowptr[i + 1]);
            for (size_t q = a->rowptr[i]; q < a->rowptr[i + 1]; q++) {
                FUZZ_CHECK(a->colidx[q] < a->cols);
                FUZZ_CHECK(q == a->rowptr[i] || a->colidx[q - 1] < a->colidx[q]);
                FUZZ_CHECK(isfinite(a->vals[q]));
            }
        }
    } else {
        FUZZ_CHECK(a == NULL);
    }
    fs_csr_free(a);
}

/* The check-only pass must agree with the dense load (status rc1, shape
 * rows1 x cols1, from fuzz_io_dense) on acceptance and shape. */
static inline void fuzz_io_check_agrees(const char *path, enum fs_io_format fmt, int rc1,
                                        size_t rows1, size_t cols1)
{
    struct fs_io_caps caps = fuzz_io_caps();
    struct fs_err err = {0};
    size_t rows = 0;
    size_t cols = 0;
    int rc2 = fs_io_check_dense(path, fmt, &caps, &rows, &cols, &err);

    fuzz_io_check_err(rc2, &err);
    FUZZ_CHECK((rc1 == 0) == (rc2 == 0));
    if (rc1 == 0) {
        FUZZ_CHECK(rows1 == rows && cols1 == cols);
    }
}

#endif
