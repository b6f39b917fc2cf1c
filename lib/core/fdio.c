#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* pos: pwrite at off (advancing a local offset), else write. */
static int write_loop(int fd, const void *p, size_t n, off_t off, int pos)
{
    const uint8_t *b = p;

    while (n > 0) {
        ssize_t w = pos ? pwrite(fd, b, n, off) : write(fd, b, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            if (w == 0) {
                errno = EIO;
            }
            return -1;
        }
        b += w;
        n -= (size_t)w;
        off += w;
    }
    return 0;
}

int fs_io_errcode(int errno_value)
{
    switch (errno_value) {
    case ENOSPC:
    case EDQUOT:
    case EROFS:
    case EFBIG:
        return FS_ESTORAGE;
    default:
        return FS_EIO;
    }
}

int fs_write_all(int fd, const void *p, size_t n)
{
    return write_loop(fd, p, n, 0, 0);
}

int fs_pwrite_all(int fd, const void *p, size_t n, off_t off)
{
    return write_loop(fd, p, n, off, 1);
}

#define FDIO_PATH_MAX 4096

int fs_mkdir_p(const char *path, struct fs_err *err)
{
    char buf[FDIO_PATH_MAX];
    size_t n = strlen(path);

    if (n == 0 || n >= sizeof buf) {
        return fs_err_set(err, FS_EINVAL, "mkdir: bad path (empty or over %d bytes)",
                          FDIO_PATH_MAX - 1);
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
                return fs_err_set(err, fs_io_errcode(errno), "mkdir %s: %s", buf, strerror(errno));
            }
            buf[i] = c;
        }
    }
    return 0;
}

/* fsync the directory holding path (best effort: some file systems refuse). */
static void sync_dir_of(const char *path)
{
    char dir[FDIO_PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : (size_t)(slash - path);
    int fd;

    if (slash == NULL) {
        memcpy(dir, ".", 2);
    } else if (n == 0) {
        memcpy(dir, "/", 2);
    } else if (n < sizeof dir) {
        memcpy(dir, path, n);
        dir[n] = '\0';
    } else {
        return;
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int fs_write_file_atomic(const char *path, const void *data, size_t len, struct fs_err *err)
{
    char tmp[FDIO_PATH_MAX + 16];
    int fd;
    int rc = 0;

    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) {
        return fs_err_set(err, FS_EINVAL, "%s: path too long", path);
    }
    fd = mkstemp(tmp); /* mode 0600 */
    if (fd < 0) {
        return fs_err_set(err, fs_io_errcode(errno), "%s: cannot create: %s", path,
                          strerror(errno));
    }
    if (fs_write_all(fd, data, len) != 0 || fsync(fd) != 0) {
        rc = fs_err_set(err, fs_io_errcode(errno), "%s: cannot write: %s", path, strerror(errno));
    }
    if (close(fd) != 0 && rc == 0) {
        rc = fs_err_set(err, fs_io_errcode(errno), "%s: cannot write: %s", path, strerror(errno));
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = fs_err_set(err, fs_io_errcode(errno), "%s: cannot rename: %s", path, strerror(errno));
    }
    if (rc != 0) {
        unlink(tmp);
        return rc;
    }
    sync_dir_of(path); /* the rename itself survives a power cut */
    return 0;
}
