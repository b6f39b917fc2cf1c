/* IDX files (the MNIST / Fashion-MNIST format), plain or gzip'ed:
 *   0x00 0x00 <type> <ndim>, ndim big-endian uint32 dimensions, then the
 *   data in C order, big-endian. Types: 0x08 u8, 0x09 i8, 0x0B i16,
 *   0x0C i32, 0x0D f32, 0x0E f64.
 * Shape (n, d1, d2, ...) becomes an n x (d1*d2*...) matrix, (n,) n x 1.
 * The file must end right after the data. */
#include "io_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IDX_MAX_NDIM 16
#define IDX_CHUNK    ((size_t)1 << 20)

static unsigned idx_type_size(uint8_t t)
{
    switch (t) {
    case 0x08:
    case 0x09:
        return 1;
    case 0x0B:
        return 2;
    case 0x0C:
    case 0x0D:
        return 4;
    case 0x0E:
        return 8;
    default:
        return 0;
    }
}

static double idx_value(const uint8_t *p, uint8_t type)
{
    uint32_t u32;
    uint64_t u64;
    float f;
    double d;

    switch (type) {
    case 0x08:
        return (double)p[0];
    case 0x09:
        return (double)(int8_t)p[0];
    case 0x0B:
        return (double)(int16_t)(uint16_t)((unsigned)p[0] << 8 | p[1]);
    case 0x0C:
        u32 = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        return (double)(int32_t)u32;
    case 0x0D:
        u32 = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        memcpy(&f, &u32, 4);
        return (double)f;
    default:
        u64 = 0;
        for (int k = 0; k < 8; k++) {
            u64 = u64 << 8 | p[k];
        }
        memcpy(&d, &u64, 8);
        return d;
    }
}

static int idx_truncated(const char *path, uint64_t at, uint64_t expect, const char *what,
                         struct fs_err *err)
{
    return fs_io_err(
        err, FS_EFORMAT, path, "byte offset %llu: truncated %s: expected %llu bytes, found %llu",
        (unsigned long long)at, what, (unsigned long long)expect, (unsigned long long)at);
}

/* Magic and dimensions. On success *rows x *cols, *type, *hdr bytes. */
static int idx_header(struct fs_io_rd *rd, const char *path, const struct fs_io_caps *caps,
                      size_t *rows, size_t *cols, uint8_t *type, size_t *hdr, struct fs_err *err)
{
    uint8_t b[4 * IDX_MAX_NDIM];
    size_t got = 0;
    uint64_t c = 1;
    unsigned ndim;
    int rc;

    rc = fs_io_rd_read(rd, b, 4, &got, err);
    if (rc != 0) {
        return rc;
    }
    for (size_t k = 0; k < got && k < 2; k++) {
        if (b[k] != 0) {
            return fs_io_err(err, FS_EFORMAT, path,
                             "byte offset %zu: bad magic (expected 00 00 <type> <ndim>)", k);
        }
    }
    if (got < 4) {
        return idx_truncated(path, got, 4, "header", err);
    }
    if (idx_type_size(b[2]) == 0) {
        return fs_io_err(err, FS_EFORMAT, path, "byte offset 2: unknown IDX data type 0x%02x",
                         b[2]);
    }
    ndim = b[3];
    if (ndim == 0 || ndim > IDX_MAX_NDIM) {
        return fs_io_err(err, FS_EFORMAT, path,
                         "byte offset 3: %u dimensions not supported (1..%d)", ndim, IDX_MAX_NDIM);
    }
    *type = b[2];
    *hdr = 4 + 4 * (size_t)ndim;
    rc = fs_io_rd_read(rd, b, 4 * (size_t)ndim, &got, err);
    if (rc != 0) {
        return rc;
    }
    if (got < 4 * (size_t)ndim) {
        return idx_truncated(path, 4 + got, *hdr, "header", err);
    }
    for (unsigned k = 0; k < ndim; k++) {
        const uint8_t *p = b + 4 * k;
        uint64_t d = (uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3];
        if (d == 0) {
            return fs_io_err(err, FS_EFORMAT, path, "byte offset %u: dimension %u is zero",
                             4 + 4 * k, k);
        }
        if (k == 0) {
            *rows = (size_t)d;
            continue;
        }
        if (d > caps->max_cols || c > caps->max_cols / d) {
            return fs_io_err(err, FS_ERANGE, path,
                             "byte offset %u: row size over the cap of %zu columns (max_cols)",
                             4 + 4 * k, caps->max_cols);
        }
        c *= d;
    }
    *cols = (size_t)c;
    return fs_io_check_shape(path, "byte offset 4", *rows, *cols, 1, caps, err);
}

/* Rows transposed per block: a block's columns are short contiguous runs in
 * the destination, instead of one cache line and TLB entry per element. */
#define IDX_BLOCK 64

/* Rows [i0, i0 + k) of the file, raw big-endian, into the matrix. */
static int idx_convert(const char *path, const uint8_t *raw, size_t i0, size_t k, uint8_t type,
                       size_t hdr, fs_mat *m, struct fs_err *err)
{
    unsigned es = idx_type_size(type);
    size_t rowb = m->cols * es;

    for (size_t b0 = 0; b0 < k; b0 += IDX_BLOCK) {
        size_t bn = k - b0 < IDX_BLOCK ? k - b0 : IDX_BLOCK;
        for (size_t j = 0; j < m->cols; j++) {
            const uint8_t *src = raw + b0 * rowb + j * es;
            double *dst = m->data + i0 + b0 + j * m->ld;
            if (type == 0x08) {
                for (size_t r = 0; r < bn; r++) {
                    dst[r] = (double)src[r * rowb];
                }
                continue;
            }
            for (size_t r = 0; r < bn; r++) {
                double v = idx_value(src + r * rowb, type);
                if (!isfinite(v)) {
                    size_t i = i0 + b0 + r;
                    return fs_io_err(err, FS_EFORMAT, path,
                                     "byte offset %llu: element [%zu, %zu]: NaN or Inf not "
                                     "allowed",
                                     (unsigned long long)(hdr + (uint64_t)i * rowb + j * es), i, j);
                }
                dst[r] = v;
            }
        }
    }
    return 0;
}

static int idx_trailing(const char *path, uint64_t total, struct fs_err *err)
{
    return fs_io_err(err, FS_EFORMAT, path,
                     "byte offset %llu: unexpected data after the array (expected %llu bytes in "
                     "total)",
                     (unsigned long long)total, (unsigned long long)total);
}

/* A plain file (size already checked): the data read in chunks. */
static int idx_data_plain(struct fs_io_rd *rd, const char *path, uint8_t type, size_t hdr,
                          fs_mat *m, struct fs_err *err)
{
    size_t rowb = m->cols * idx_type_size(type);
    size_t per = rowb >= IDX_CHUNK ? 1 : IDX_CHUNK / rowb;
    uint64_t total = hdr + (uint64_t)m->rows * rowb;
    uint8_t *buf = NULL;
    size_t i = 0;
    int rc = 0;

    if (per > m->rows) { /* a small array: a buffer its size, not a whole chunk */
        per = m->rows > 0 ? m->rows : 1;
    }
    buf = malloc(per * rowb);
    if (buf == NULL) {
        return fs_io_err(err, FS_ENOMEM, path, "out of memory");
    }
    while (i < m->rows) {
        size_t k = m->rows - i < per ? m->rows - i : per;
        size_t got = 0;
        rc = fs_io_rd_read(rd, buf, k * rowb, &got, err);
        if (rc != 0) {
            goto out;
        }
        if (got < k * rowb) { /* shrank since the size check */
            rc = idx_truncated(path, hdr + (uint64_t)i * rowb + got, total, "data", err);
            goto out;
        }
        rc = idx_convert(path, buf, i, k, type, hdr, m, err);
        if (rc != 0) {
            goto out;
        }
        i += k;
    }
    {
        uint8_t extra;
        size_t got = 0;
        rc = fs_io_rd_read(rd, &extra, 1, &got, err);
        if (rc == 0 && got != 0) {
            rc = idx_trailing(path, total, err);
        }
    }
out:
    free(buf);
    return rc;
}

static int idx_load(struct fs_io_rd *rd, const char *path, const struct fs_io_caps *caps,
                    fs_mat **out, struct fs_err *err)
{
    size_t rows = 0;
    size_t cols = 0;
    size_t hdr = 0;
    uint8_t type = 0;
    uint64_t size = 0;
    uint64_t total;
    uint8_t *raw = NULL;
    size_t got = 0;
    fs_mat *m = NULL;
    int rc;

    rc = idx_header(rd, path, caps, &rows, &cols, &type, &hdr, err);
    if (rc != 0) {
        return rc;
    }
    total = hdr + (uint64_t)rows * cols * idx_type_size(type);
    if (fs_io_rd_known_size(rd, &size)) {
        /* Truncation and trailing bytes known before allocating anything. */
        if (size < total) {
            return idx_truncated(path, size, total, "data", err);
        }
        if (size > total) {
            return idx_trailing(path, total, err);
        }
    } else {
        /* gzip'ed: the data must arrive before the matrix is allocated. */
        rc = fs_io_rd_slurp(rd, (size_t)(total - hdr) + 1, &raw, &got, err);
        if (rc != 0) {
            return rc;
        }
        if (got < total - hdr) {
            rc = idx_truncated(path, hdr + got, total, "data", err);
            goto out;
        }
        if (got > total - hdr) {
            rc = idx_trailing(path, total, err);
            goto out;
        }
    }
    m = fs_mat_new_uninit(rows, cols);
    if (m == NULL) {
        rc = fs_io_err(err, FS_ENOMEM, path, "out of memory for a %zu x %zu matrix", rows, cols);
        goto out;
    }
    if (raw != NULL) {
        rc = idx_convert(path, raw, 0, rows, type, hdr, m, err);
    } else {
        rc = idx_data_plain(rd, path, type, hdr, m, err);
    }
out:
    free(raw);
    if (rc != 0) {
        fs_mat_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int fs_io_idx_load_dense(const char *path, const struct fs_io_caps *caps, fs_mat **out,
                         struct fs_err *err)
{
    struct fs_io_rd rd;
    int rc;

    *out = NULL;
    rc = fs_io_rd_open(&rd, path, 64, err);
    if (rc != 0) {
        return rc;
    }
    rc = idx_load(&rd, path, caps, out, err);
    fs_io_rd_close(&rd);
    return rc;
}
