/* Whole writes to a file descriptor: the one loop over short writes and
 * EINTR that the library and the services share; and the two file-system
 * steps every service takes at start (its data directory, files replaced
 * atomically). */
#ifndef FS_CORE_FDIO_H
#define FS_CORE_FDIO_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/**
 * The fs_err code of a failed write's errno: FS_ESTORAGE when the file
 * system cannot take more (ENOSPC, EDQUOT, EROFS, EFBIG: a file-size limit,
 * with SIGXFSZ ignored), else FS_EIO.
 */
int fs_io_errcode(int errno_value);

/** Write all n bytes at p to fd. @return 0, or -1 with errno set (EIO for a zero-length write). */
int fs_write_all(int fd, const void *p, size_t n);

/** Write all n bytes at p to fd at offset off (the file offset is not moved). Same return. */
int fs_pwrite_all(int fd, const void *p, size_t n, off_t off);

/**
 * Create path and its missing parents with mode 0700 (existing ones are left
 * as they are), like `mkdir -p`.
 * @return 0, FS_EINVAL (empty or longer than 4095 bytes), FS_EIO or
 *         FS_ESTORAGE (fs_io_errcode) naming the directory that could not be made.
 */
FS_WUR int fs_mkdir_p(const char *path, struct fs_err *err);

/**
 * Replace path with the len bytes at data, all or nothing: write a mode-0600
 * temporary file beside it, fsync it, rename it over path, fsync the
 * directory. A reader sees the old file or the whole new one, never a part.
 * @return 0, FS_EINVAL (path too long), FS_EIO or FS_ESTORAGE (disk full,
 *         read-only...: fs_io_errcode); on failure the temporary is removed
 *         and path is unchanged.
 */
FS_WUR int fs_write_file_atomic(const char *path, const void *data, size_t len, struct fs_err *err);

#endif
