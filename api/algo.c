/* Algorithm names: see jobs.h. */
#include "jobs.h"

#include <string.h>

/* Wire names, indexed by enum fs_algo. */
static const char *const ALGO_NAMES[FS_ALGO_COUNT] = {
    "secure-sum", "fedsvd", "fedpca", "fedpower", "fedpower-utility", "fedpower-private", "dp-ppm"};

const char *fs_algo_name(enum fs_algo a)
{
    if ((int)a < 0 || (int)a >= FS_ALGO_COUNT) {
        return "unknown";
    }
    return ALGO_NAMES[a];
}

int fs_algo_parse(const char *name, enum fs_algo *out)
{
    for (int a = 0; name != NULL && a < FS_ALGO_COUNT; a++) {
        if (strcmp(name, ALGO_NAMES[a]) == 0) {
            *out = (enum fs_algo)a;
            return 0;
        }
    }
    return -1;
}

enum fs_algo fs_invitation_algo(const struct fs_invitation *inv)
{
    enum fs_algo a = FS_ALGO_SECURE_SUM;

    (void)fs_algo_parse(inv->algorithm, &a);
    return a;
}
