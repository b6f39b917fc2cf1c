/* Whole writes to a file descriptor: the one loop over short writes and
 * EINTR that the library and the services share. */
#ifndef FS_CORE_FDIO_H
#define FS_CORE_FDIO_H

#include <stddef.h>
#include <sys/types.h>

/** Write all n bytes at p to fd. @return 0, or -1 with errno set (EIO for a zero-length write). */
int fs_write_all(int fd, const void *p, size_t n);

/** Write all n bytes at p to fd at offset off (the file offset is not moved). Same return. */
int fs_pwrite_all(int fd, const void *p, size_t n, off_t off);

#endif
