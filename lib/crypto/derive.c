#include "derive.h"

#include <openssl/crypto.h>
#include <string.h>

#include "hkdf.h"

#define LABEL_MAX 64

int fs_derive_key(uint8_t out[FS_DERIVE_KEY_LEN], const uint8_t secret[FS_DERIVE_KEY_LEN],
                  const char *label, uint32_t a, uint32_t b, struct fs_err *err)
{
    static const char salt[] = "fedsvd/derive/v1";
    uint8_t info[LABEL_MAX + 9];
    size_t n;

    if (out == NULL || secret == NULL || label == NULL) {
        return fs_err_set(err, FS_EINVAL, "derive: NULL argument");
    }
    n = strlen(label);
    if (n > LABEL_MAX) {
        return fs_err_set(err, FS_EINVAL, "derive: label of %zu bytes", n);
    }
    memcpy(info, label, n);
    info[n] = 0;
    for (int i = 0; i < 4; i++) {
        info[n + 1 + i] = (uint8_t)(a >> (24 - 8 * i));
        info[n + 5 + i] = (uint8_t)(b >> (24 - 8 * i));
    }
    return fs_hkdf_sha256(out, FS_DERIVE_KEY_LEN, secret, FS_DERIVE_KEY_LEN, salt, sizeof salt - 1,
                          info, n + 9, err);
}
