#include "ct.h"

#include <openssl/crypto.h>

int fs_ct_eq(const void *a, const void *b, size_t n)
{
    if (n == 0) {
        return 1;
    }
    return CRYPTO_memcmp(a, b, n) == 0;
}

int fs_ct_eq_len(const void *a, size_t alen, const void *b, size_t blen)
{
    /* Compare the common prefix in full even when the lengths differ, so the
     * time depends on the lengths and never on where the contents differ. */
    size_t n = alen < blen ? alen : blen;
    int same = fs_ct_eq(a, b, n);

    return (alen == blen) & same;
}

int fs_ct_is_zero(const void *p, size_t n)
{
    const unsigned char *q = p;
    volatile unsigned char acc = 0;

    for (size_t i = 0; i < n; i++) {
        acc |= q[i];
    }
    return acc == 0;
}

void fs_wipe(void *p, size_t n)
{
    if (p == NULL || n == 0) {
        return;
    }
    OPENSSL_cleanse(p, n);
}
