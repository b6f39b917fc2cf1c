/* The lib/io entry points: format names, detection (extension, then magic
 * bytes of the possibly gzip'ed content) and the dense/sparse loaders that
 * dispatch to npy.c, csv.c, mtx.c and idx.c. */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

static int ends_with_ci(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    if (n < k) {
        return 0;
    }
    for (size_t i = 0; i < k; i++) {
        char c = s[n - k + i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != suf[i]) {
            return 0;
        }
    }
    return 1;
}

static int eq_ci(const char *a, const char *b)
{
    return strlen(a) == strlen(b) && ends_with_ci(a, strlen(a), b);
}

int fs_io_format_parse(const char *name, enum fs_io_format *out, struct fs_err *err)
{
    static const struct {
        const char *name;
        enum fs_io_format fmt;
    } names[] = {{"auto", FS_FMT_AUTO}, {"npy", FS_FMT_NPY}, {"csv", FS_FMT_CSV},
                 {"txt", FS_FMT_CSV},   {"tsv", FS_FMT_CSV}, {"mtx", FS_FMT_MTX},
                 {"mm", FS_FMT_MTX},    {"idx", FS_FMT_IDX}};

    if (name == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "format: NULL argument");
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (eq_ci(name, names[i].name)) {
            *out = names[i].fmt;
            return 0;
        }
    }
    {
        char tok[32];
        fs_io_token(tok, sizeof tok, name, strlen(name));
        return fs_err_set(err, FS_EINVAL, "unknown format '%s' (auto, npy, csv, mtx, idx)", tok);
    }
}

/* Format from the file name; FS_FMT_AUTO when the name says nothing. */
static enum fs_io_format fmt_from_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash != NULL ? slash + 1 : path;
    size_t n = strlen(base);

    if (ends_with_ci(base, n, ".gz")) {
        n -= 3; /* x.csv.gz is a gzip'ed CSV; the reader decompresses */
    }
    if (ends_with_ci(base, n, ".npy")) {
        return FS_FMT_NPY;
    }
    if (ends_with_ci(base, n, ".csv") || ends_with_ci(base, n, ".txt") ||
        ends_with_ci(base, n, ".tsv")) {
        return FS_FMT_CSV;
    }
    if (ends_with_ci(base, n, ".mtx") || ends_with_ci(base, n, ".mm")) {
        return FS_FMT_MTX;
    }
    if (ends_with_ci(base, n, ".idx") || ends_with_ci(base, n, "-ubyte")) {
        return FS_FMT_IDX;
    }
    return FS_FMT_AUTO;
}

/* Format from the first bytes of the (decompressed) content. */
static int sniff(const char *path, enum fs_io_format *out, struct fs_err *err)
{
    struct fs_io_rd rd;
    uint8_t b[16];
    size_t got = 0;
    int rc;

    rc = fs_io_rd_open(&rd, path, 64, err);
    if (rc != 0) {
        return rc;
    }
    rc = fs_io_rd_read(&rd, b, sizeof b, &got, err);
    fs_io_rd_close(&rd);
    if (rc != 0) {
        return rc;
    }
    if (got == 0) {
        return fs_io_err(err, FS_EFORMAT, path, "byte offset 0: empty file");
    }
    if (got >= 6 && memcmp(b, "\x93NUMPY", 6) == 0) {
        *out = FS_FMT_NPY;
        return 0;
    }
    if (got >= 14 && memcmp(b, "%%MatrixMarket", 14) == 0) {
        *out = FS_FMT_MTX;
        return 0;
    }
    if (got >= 4 && b[0] == 0 && b[1] == 0 && b[3] >= 1 &&
        (b[2] == 0x08 || b[2] == 0x09 || (b[2] >= 0x0B && b[2] <= 0x0E))) {
        *out = FS_FMT_IDX;
        return 0;
    }
    for (size_t i = 0; i < got; i++) {
        if (b[i] < 0x20 && b[i] != '\t' && b[i] != '\n' && b[i] != '\r') {
            return fs_io_err(err, FS_EFORMAT, path,
                             "byte offset %zu: unknown format (not .npy, MatrixMarket, IDX or "
                             "text)",
                             i);
        }
    }
    *out = FS_FMT_CSV;
    return 0;
}

static int resolve_fmt(const char *path, enum fs_io_format fmt, enum fs_io_format *out,
                       struct fs_err *err)
{
    if (fmt != FS_FMT_AUTO) {
        if (fmt != FS_FMT_NPY && fmt != FS_FMT_CSV && fmt != FS_FMT_MTX && fmt != FS_FMT_IDX) {
            return fs_io_err(err, FS_EINVAL, path, "unknown format code %d", (int)fmt);
        }
        *out = fmt;
        return 0;
    }
    *out = fmt_from_name(path);
    if (*out != FS_FMT_AUTO) {
        return 0;
    }
    return sniff(path, out, err);
}

int fs_io_load_dense(const char *path, enum fs_io_format fmt, const struct fs_io_caps *caps_in,
                     fs_mat **out, struct fs_err *err)
{
    struct fs_io_caps caps = fs_io_caps_resolve(caps_in);
    int rc;

    if (path == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_io_load_dense: NULL argument");
    }
    *out = NULL;
    rc = resolve_fmt(path, fmt, &fmt, err);
    if (rc != 0) {
        return rc;
    }
    switch (fmt) {
    case FS_FMT_NPY:
        return fs_io_npy_load_dense(path, &caps, out, err);
    case FS_FMT_CSV:
        return fs_io_csv_load_dense(path, &caps, out, err);
    case FS_FMT_MTX:
        return fs_io_mtx_load(path, &caps, out, NULL, err);
    case FS_FMT_IDX:
        return fs_io_idx_load_dense(path, &caps, out, err);
    default:
        return fs_io_err(err, FS_EINTERNAL, path, "format not resolved");
    }
}

int fs_io_check_dense(const char *path, enum fs_io_format fmt, const struct fs_io_caps *caps_in,
                      size_t *rows, size_t *cols, struct fs_err *err)
{
    struct fs_io_caps caps = fs_io_caps_resolve(caps_in);
    fs_mat *m = NULL;
    int rc;

    if (path == NULL || rows == NULL || cols == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_io_check_dense: NULL argument");
    }
    rc = resolve_fmt(path, fmt, &fmt, err);
    if (rc != 0) {
        return rc;
    }
    if (fmt == FS_FMT_NPY) {
        return fs_io_npy_check_dense(path, &caps, rows, cols, err);
    }
    rc = fs_io_load_dense(path, fmt, &caps, &m, err);
    if (rc == 0) {
        *rows = m->rows;
        *cols = m->cols;
    }
    fs_mat_free(m);
    return rc;
}

/* Nonzeros of a dense matrix as CSR. */
static int dense_to_csr(const char *path, const fs_mat *m, const struct fs_io_caps *caps,
                        fs_csr **out, struct fs_err *err)
{
    size_t nnz = 0;
    size_t k = 0;
    size_t *ri = NULL;
    size_t *ci = NULL;
    double *v = NULL;
    int rc;

    for (size_t j = 0; j < m->cols; j++) {
        for (size_t i = 0; i < m->rows; i++) {
            nnz += m->data[i + j * m->ld] != 0.0;
        }
    }
    if (nnz > caps->max_nnz) {
        return fs_io_err(err, FS_ERANGE, path, "%zu nonzeros exceed the cap of %llu (max_nnz)", nnz,
                         (unsigned long long)caps->max_nnz);
    }
    if (m->cols > UINT32_MAX) {
        return fs_io_err(err, FS_ERANGE, path, "%zu columns exceed the sparse limit of 2^32",
                         m->cols);
    }
    ri = malloc((nnz > 0 ? nnz : 1) * sizeof *ri);
    ci = malloc((nnz > 0 ? nnz : 1) * sizeof *ci);
    v = malloc((nnz > 0 ? nnz : 1) * sizeof *v);
    if (ri == NULL || ci == NULL || v == NULL) {
        rc = fs_io_err(err, FS_ENOMEM, path, "out of memory for %zu nonzeros", nnz);
        goto out;
    }
    for (size_t i = 0; i < m->rows; i++) {
        for (size_t j = 0; j < m->cols; j++) {
            double x = m->data[i + j * m->ld];
            if (x != 0.0) {
                ri[k] = i;
                ci[k] = j;
                v[k] = x;
                k++;
            }
        }
    }
    rc = fs_csr_from_coo(m->rows, m->cols, nnz, ri, ci, v, out, err);
    if (rc != 0) {
        fs_err_prefix(err, "%s: ", path);
    }
out:
    free(ri);
    free(ci);
    free(v);
    return rc;
}

int fs_io_load_sparse(const char *path, enum fs_io_format fmt, const struct fs_io_caps *caps_in,
                      fs_csr **out, struct fs_err *err)
{
    struct fs_io_caps caps = fs_io_caps_resolve(caps_in);
    fs_mat *m = NULL;
    int rc;

    if (path == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_io_load_sparse: NULL argument");
    }
    *out = NULL;
    rc = resolve_fmt(path, fmt, &fmt, err);
    if (rc != 0) {
        return rc;
    }
    if (fmt == FS_FMT_MTX) {
        rc = fs_io_mtx_load(path, &caps, NULL, out, err);
        if (rc != FS_ESTATE) {
            return rc;
        }
        /* An array file: dense, then dropped zeros. */
    }
    rc = fs_io_load_dense(path, fmt, &caps, &m, err);
    if (rc != 0) {
        return rc;
    }
    rc = dense_to_csr(path, m, &caps, out, err);
    fs_mat_free(m);
    return rc;
}

int fs_io_is_sparse_file(const char *path)
{
    enum fs_io_format fmt = FS_FMT_AUTO;

    if (path == NULL || resolve_fmt(path, FS_FMT_AUTO, &fmt, NULL) != 0) {
        return 0;
    }
    return fmt == FS_FMT_MTX && fs_io_mtx_is_coordinate(path);
}
