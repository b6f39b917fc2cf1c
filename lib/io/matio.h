/* Matrix files: one entry point that loads any supported format, plus the
 * .npy writers. Formats: .npy (<f8, C or Fortran order; <u8 for ring
 * vectors), CSV (numbers, optional header, streamed), MatrixMarket
 * (coordinate and array; real/integer; general/symmetric) and IDX (plain or
 * gzip'ed, the Fashion-MNIST files). Every malformed input is rejected with
 * an error message that starts with the file name and names the position
 * (line, or byte offset) and the reason, e.g.
 *   "data.csv: line 17: expected 300 fields, found 299" */
#ifndef FS_IO_MATIO_H
#define FS_IO_MATIO_H

#include <stddef.h>
#include <stdint.h>

#include "../la/csr.h"
#include "../la/mat.h"

enum fs_io_format {
    FS_FMT_AUTO = 0, /* from the extension (.npy .csv .txt .mtx .mm .idx .gz/-ubyte), then magic */
    FS_FMT_NPY,
    FS_FMT_CSV,
    FS_FMT_MTX,
    FS_FMT_IDX
};

/* Caps applied to everything read from a file or the network. They are
 * checked from headers / size lines / a counting pass before the matrix is
 * allocated (exceeding one is FS_ERANGE). A zero field means the default.
 * For 1-D .npy vectors only max_elems applies in fs_npy_parse_header. */
struct fs_io_caps {
    size_t max_rows;    /* default 1<<26 */
    size_t max_cols;    /* default 1<<20 */
    uint64_t max_elems; /* dense rows*cols, default 1<<31 (16 GiB of doubles) */
    uint64_t max_nnz;   /* sparse, default 1<<31 */
};

/** Default caps. */
struct fs_io_caps fs_io_caps_default(void);

/** Parse a format name ("auto", "npy", "csv", "mtx", "idx"). @return 0 or FS_EINVAL. */
FS_WUR int fs_io_format_parse(const char *name, enum fs_io_format *out, struct fs_err *err);

/**
 * Load a dense matrix from any supported file (sparse files are densified).
 * caps may be NULL for defaults. Rejects NaN/Inf. IDX image files of
 * shape (n, h, w) become n x (h*w) with values 0..255.
 * @param out new matrix, free with fs_mat_free.
 */
FS_WUR int fs_io_load_dense(const char *path, enum fs_io_format fmt, const struct fs_io_caps *caps,
                            fs_mat **out, struct fs_err *err);

/**
 * Check a file as fs_io_load_dense would load it (format, header, shape and
 * caps, size, every value) and give its shape, without keeping the matrix.
 * .npy files are read through one 1 MiB buffer, so checking a large file
 * needs no memory of its size (when several values are bad, the first in
 * file order is reported); other formats are loaded and freed.
 */
FS_WUR int fs_io_check_dense(const char *path, enum fs_io_format fmt, const struct fs_io_caps *caps,
                             size_t *rows, size_t *cols, struct fs_err *err);

/**
 * Load a sparse matrix (MatrixMarket coordinate natively; dense formats are
 * converted, dropping zeros). @param out new CSR, free with fs_csr_free.
 */
FS_WUR int fs_io_load_sparse(const char *path, enum fs_io_format fmt, const struct fs_io_caps *caps,
                             fs_csr **out, struct fs_err *err);

/** 1 if the file is MatrixMarket coordinate (sparse) by extension/header, else 0. */
int fs_io_is_sparse_file(const char *path);

/* Writers create "<path>.tmp.XXXXXX" (mode 0600) in the same directory,
 * fsync it, rename it over path and fsync the directory; on failure the
 * temporary file is removed and path is untouched. */

/** Write a matrix as .npy (<f8, fortran_order True), atomically (temp file + rename). */
FS_WUR int fs_npy_write_mat(const char *path, const fs_mat *m, struct fs_err *err);

/** Write a 1-D vector of doubles as .npy, shape (n,). */
FS_WUR int fs_npy_write_vec(const char *path, const double *v, size_t n, struct fs_err *err);

/** Write a 1-D vector of uint64 as .npy (<u8), shape (n,). */
FS_WUR int fs_npy_write_u64(const char *path, const uint64_t *v, size_t n, struct fs_err *err);

/** Read a .npy <u8 vector (1-D, or 2-D flattened in memory order). @param out malloc'd, free(). */
FS_WUR int fs_npy_read_u64(const char *path, uint64_t max_elems, uint64_t **out, size_t *n,
                           struct fs_err *err);

/** Write a sparse matrix as MatrixMarket coordinate real general, 1-based. */
FS_WUR int fs_mtx_write_csr(const char *path, const fs_csr *a, struct fs_err *err);

/* ---- .npy headers, for streaming bodies (HTTP) ---- */

enum fs_npy_dtype { FS_NPY_F8 = 1, FS_NPY_U8 = 2 };

struct fs_npy_header {
    enum fs_npy_dtype dtype;
    int fortran_order;
    int ndim;          /* 1 or 2 */
    size_t shape[2];   /* shape[1] == 1 when ndim == 1 */
    size_t header_len; /* bytes before the data, including magic */
};

/**
 * Parse a .npy header from the first `len` bytes of buf.
 * @return 0 and fills h; FS_EFORMAT with an offset in the message when
 * malformed; FS_ERANGE when a dimension exceeds caps; FS_ESTATE if more bytes
 * are needed (len too short).
 */
FS_WUR int fs_npy_parse_header(const uint8_t *buf, size_t len, const struct fs_io_caps *caps,
                               struct fs_npy_header *h, struct fs_err *err);

/**
 * Format a .npy v1.0 header (padded to 64 bytes) into buf (cap bytes).
 * @param out_len receives the header length.
 */
FS_WUR int fs_npy_format_header(const struct fs_npy_header *h, uint8_t *buf, size_t cap,
                                size_t *out_len, struct fs_err *err);

#endif
