#include "rand.h"

#include <limits.h>
#include <openssl/rand.h>

int fs_rand_bytes(void *buf, size_t n, struct fs_err *err)
{
    unsigned char *p = buf;

    while (n > 0) {
        int chunk = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        if (RAND_bytes(p, chunk) != 1) {
            return fs_err_set(err, FS_ECRYPTO, "RAND_bytes failed");
        }
        p += chunk;
        n -= (size_t)chunk;
    }
    return 0;
}

int fs_rand_below(uint64_t bound, uint64_t *out, struct fs_err *err)
{
    uint64_t x;
    uint64_t limit;

    if (bound == 0) {
        return fs_err_set(err, FS_EINVAL, "fs_rand_below: bound is 0");
    }
    /* Reject the top partial block so every residue is equally likely. */
    limit = UINT64_MAX - (UINT64_MAX % bound);
    do {
        int rc = fs_rand_bytes(&x, sizeof x, err);
        if (rc != 0) {
            return rc;
        }
    } while (x >= limit);
    *out = x % bound;
    return 0;
}
