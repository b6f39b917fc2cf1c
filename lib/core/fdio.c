#include "fdio.h"

#include <errno.h>
#include <stdint.h>
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

int fs_write_all(int fd, const void *p, size_t n)
{
    return write_loop(fd, p, n, 0, 0);
}

int fs_pwrite_all(int fd, const void *p, size_t n, off_t off)
{
    return write_loop(fd, p, n, off, 1);
}
