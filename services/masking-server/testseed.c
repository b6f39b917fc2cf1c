/* Deterministic test master seed of a mask set: see testseed.h. */
#include "testseed.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/hex.h"
#include "crypto/hkdf.h"

#define TEST_SALT "fedsvd insecure test mask seed v1"

int mask_test_seed_parse(const char *hex, uint8_t out[MASK_TEST_SEED_MAX], size_t *len,
                         struct fs_err *err)
{
    size_t n = strlen(hex);

    *len = 0;
    if (n < 2 || n > 2 * MASK_TEST_SEED_MAX || n % 2 != 0 || fs_hex_decode(hex, out, n / 2) != 0) {
        OPENSSL_cleanse(out, MASK_TEST_SEED_MAX);
        return fs_err_set(err, FS_EINVAL, "expected an even number (2..%d) of hex digits",
                          2 * MASK_TEST_SEED_MAX);
    }
    *len = n / 2;
    return 0;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * (7 - i)));
    }
}

int mask_test_seed_derive(const uint8_t *seed, size_t len, const struct mask_spec *spec,
                          uint8_t out[MASK_SEED_LEN], struct fs_err *err)
{
    /* info: partition, parties, shared, the two requested blocks, each
     * party's size; 8 bytes each, big-endian */
    size_t n = 5 + (size_t)spec->parties;
    uint8_t *info = calloc(n, 8);
    int rc;

    if (info == NULL) {
        memset(out, 0, MASK_SEED_LEN);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    put_u64(info, spec->partition == FS_FEDSVD_SAMPLES ? 1 : 2);
    put_u64(info + 8, spec->parties);
    put_u64(info + 16, spec->shared);
    put_u64(info + 24, spec->block_partitioned);
    put_u64(info + 32, spec->block_shared);
    for (uint32_t i = 0; i < spec->parties; i++) {
        put_u64(info + 40 + 8 * (size_t)i, spec->sizes[i]);
    }
    rc = fs_hkdf_sha256(out, MASK_SEED_LEN, seed, len, TEST_SALT, strlen(TEST_SALT), info, 8 * n,
                        err);
    free(info);
    return rc;
}
