#include "mem.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

void fs_prefault_write(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p;
    uintptr_t lo;
    uintptr_t hi;

    if (p == NULL || pg <= 0 || n == 0 || a + n < a) {
        return;
    }
    lo = (a + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    hi = (a + n) / (uintptr_t)pg * (uintptr_t)pg;
    if (hi > lo) {
        (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE); /* best effort */
    }
#else
    (void)p;
    (void)n;
#endif
}
