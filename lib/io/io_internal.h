/* Internal to lib/io, not a public API: a buffered reader over plain or
 * gzip'ed files (zlib recognises gzip by its magic bytes, never by the name),
 * the number parser shared by the text formats, caps checks, error
 * formatting and atomic file writing. Everything here is used by
 * matio.c, npy.c, csv.c, mtx.c and idx.c only. */
#ifndef FS_IO_INTERNAL_H
#define FS_IO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

#include "matio.h"

/* ---- reader ---- */

struct fs_io_rd {
    const char *path; /* borrowed, for messages */
    gzFile gz;
    unsigned char *buf;
    size_t cap;     /* bytes allocated; one byte is always kept for a NUL */
    size_t max_cap; /* the buffer never grows beyond this (longest line + 1) */
    size_t pos;     /* next unread byte in buf */
    size_t len;     /* valid bytes in buf */
    uint64_t base;  /* stream offset of buf[0] (uncompressed) */
    int eof;
    uint64_t lineno; /* 1-based number of the line last returned by fs_io_rd_line */
    int regular;     /* a regular file: st_size below is its length on disk */
    uint64_t st_size;
};

/**
 * Open path for reading (gzip'ed or plain, detected from the content).
 * max_line bounds the longest line fs_io_rd_line accepts. On failure the
 * reader is left closed (fs_io_rd_close is still safe).
 */
FS_WUR int fs_io_rd_open(struct fs_io_rd *r, const char *path, size_t max_line, struct fs_err *err);

/** Close and free. Safe on a zeroed or already closed reader. */
void fs_io_rd_close(struct fs_io_rd *r);

/** Back to the start of the stream (line numbers restart). */
FS_WUR int fs_io_rd_rewind(struct fs_io_rd *r, struct fs_err *err);

/** Offset of the next unread byte (uncompressed stream). */
uint64_t fs_io_rd_tell(const struct fs_io_rd *r);

/** 1 if the file is gzip'ed (valid after the first read). */
int fs_io_rd_is_gz(const struct fs_io_rd *r);

/**
 * 1 and *size = the stream length when it is known without reading it all
 * (a plain regular file, not gzip'ed), else 0. Lets binary loaders report
 * truncation before allocating what the header claims.
 */
int fs_io_rd_known_size(struct fs_io_rd *r, uint64_t *size);

/**
 * Read up to max bytes into a new buffer that grows with what actually
 * arrives (so a short stream claiming a huge size allocates little).
 * *got < max only at end of file. @param out malloc'd, free() it.
 */
FS_WUR int fs_io_rd_slurp(struct fs_io_rd *r, size_t max, uint8_t **out, size_t *got,
                          struct fs_err *err);

/** Read up to n bytes; *got < n only at end of file. */
FS_WUR int fs_io_rd_read(struct fs_io_rd *r, void *dst, size_t n, size_t *got, struct fs_err *err);

/**
 * Next line, without its "\n" or "\r\n", NUL-terminated, valid until the
 * next call (borrowed, may be modified in place by the caller).
 * @return 1 with a line, 0 at end of file, negative FS_E* on error.
 */
FS_WUR int fs_io_rd_line(struct fs_io_rd *r, char **line, size_t *len, struct fs_err *err);

/* ---- errors, caps ---- */

/** fs_err_set with "<path>: " in front (long paths are shortened from the left;
 * path NULL: no prefix). */
int fs_io_err(struct fs_err *err, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/** Copy a short printable excerpt of s[0..n) into dst (cap >= 8), "..." if cut. */
void fs_io_token(char *dst, size_t cap, const char *s, size_t n);

/** Caps with NULL or zero fields replaced by the defaults. */
struct fs_io_caps fs_io_caps_resolve(const struct fs_io_caps *caps);

/**
 * Check a dense shape against the caps before anything is allocated.
 * where: position text for the message ("line 3", "byte offset 16").
 * dense: also check rows*cols against max_elems.
 * @return 0 or FS_ERANGE.
 */
FS_WUR int fs_io_check_shape(const char *path, const char *where, uint64_t rows, uint64_t cols,
                             int dense, const struct fs_io_caps *caps, struct fs_err *err);

/* ---- numbers ---- */

enum { FS_IO_NUM_OK = 0, FS_IO_NUM_BAD = 1, FS_IO_NUM_NAN_INF = 2, FS_IO_NUM_OVERFLOW = 3 };

/**
 * Parse a decimal floating-point number at s (no leading blanks):
 * [+-] digits [. digits] [e [+-] digits], correctly rounded. The words
 * nan/inf/infinity give FS_IO_NUM_NAN_INF and a magnitude beyond double
 * FS_IO_NUM_OVERFLOW; hex floats are not numbers. *end is set past what was
 * consumed; the caller checks that a separator follows. s must be
 * NUL-terminated somewhere after the token.
 */
int fs_io_parse_double(const char *s, const char **end, double *v);

/** Parse unsigned decimal digits only; 0 ok, -1 not digits or overflow. */
int fs_io_parse_u64(const char *s, const char **end, uint64_t *v);

/* ---- atomic write: temp file in the same directory, fsync, rename ---- */

struct fs_io_wr {
    const char *path; /* borrowed */
    char *tmp;        /* owned */
    FILE *f;
    int failed;
};

/** Create "<path>.tmp.XXXXXX" (mode 0600) for writing. */
FS_WUR int fs_io_wr_open(struct fs_io_wr *w, const char *path, struct fs_err *err);

/** Append n bytes. */
FS_WUR int fs_io_wr_write(struct fs_io_wr *w, const void *p, size_t n, struct fs_err *err);

/** Flush, fsync, rename over path, fsync the directory. Closes w either way. */
FS_WUR int fs_io_wr_commit(struct fs_io_wr *w, struct fs_err *err);

/** Close and unlink the temp file if still open. Accepts a zeroed w. */
void fs_io_wr_abort(struct fs_io_wr *w);

/* ---- per-format loaders (caps already resolved, path for messages) ---- */

FS_WUR int fs_io_npy_load_dense(const char *path, const struct fs_io_caps *caps, fs_mat **out,
                                struct fs_err *err);
FS_WUR int fs_io_npy_check_dense(const char *path, const struct fs_io_caps *caps, size_t *rows,
                                 size_t *cols, struct fs_err *err);
FS_WUR int fs_io_csv_load_dense(const char *path, const struct fs_io_caps *caps, fs_mat **out,
                                struct fs_err *err);
FS_WUR int fs_io_idx_load_dense(const char *path, const struct fs_io_caps *caps, fs_mat **out,
                                struct fs_err *err);
/* MatrixMarket: exactly one of dense/sparse is non-NULL. A sparse load of an
 * array file fails with FS_ESTATE so the caller can densify and convert. */
FS_WUR int fs_io_mtx_load(const char *path, const struct fs_io_caps *caps, fs_mat **dense,
                          fs_csr **sparse, struct fs_err *err);
/* 1 if the file starts with a MatrixMarket coordinate banner. */
int fs_io_mtx_is_coordinate(const char *path);

#endif
