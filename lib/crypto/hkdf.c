#include "hkdf.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

/* Only these are ever passed to the KDF; absent ones are simply not set. */
struct hkdf_args {
    int mode;
    const void *key;
    size_t key_len;
    const void *salt;
    size_t salt_len;
    const void *info;
    size_t info_len;
};

static int hkdf_run(uint8_t *out, size_t out_len, const struct hkdf_args *a, struct fs_err *err)
{
    static const unsigned char empty[1] = {0};
    EVP_KDF *kdf = NULL;
    EVP_KDF_CTX *kctx = NULL;
    OSSL_PARAM params[6];
    size_t np = 0;
    int mode = a->mode;
    int rc = FS_ECRYPTO;

    params[np++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
    params[np++] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode);
    /* An empty key must still be present (OpenSSL reports "missing key"
     * otherwise); a non-NULL pointer to zero bytes is a valid empty string. */
    params[np++] = OSSL_PARAM_construct_octet_string(
        OSSL_KDF_PARAM_KEY, (void *)(a->key_len > 0 ? a->key : empty), a->key_len);
    if (a->salt_len > 0) {
        params[np++] =
            OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)a->salt, a->salt_len);
    }
    if (a->info_len > 0) {
        params[np++] =
            OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)a->info, a->info_len);
    }
    params[np] = OSSL_PARAM_construct_end();

    kdf = EVP_KDF_fetch(NULL, OSSL_KDF_NAME_HKDF, NULL);
    if (kdf == NULL) {
        fs_err_set(err, FS_ECRYPTO, "hkdf: HKDF not available");
        goto out;
    }
    kctx = EVP_KDF_CTX_new(kdf);
    if (kctx == NULL) {
        fs_err_set(err, FS_ECRYPTO, "hkdf: context allocation failed");
        goto out;
    }
    if (EVP_KDF_derive(kctx, out, out_len, params) != 1) {
        fs_err_set(err, FS_ECRYPTO, "hkdf: derive failed (out_len %zu)", out_len);
        goto out;
    }
    rc = 0;
out:
    if (rc != 0) {
        OPENSSL_cleanse(out, out_len);
        ERR_clear_error();
    }
    EVP_KDF_CTX_free(kctx);
    EVP_KDF_free(kdf);
    return rc;
}

static int check_buf(const void *p, size_t n, const char *what, struct fs_err *err)
{
    if (p == NULL && n != 0) {
        return fs_err_set(err, FS_EINVAL, "hkdf: %s is NULL with length %zu", what, n);
    }
    return 0;
}

static int check_out(uint8_t *out, size_t out_len, struct fs_err *err)
{
    if (out == NULL || out_len == 0 || out_len > FS_HKDF_MAX_OUT) {
        return fs_err_set(err, FS_EINVAL, "hkdf: output length %zu not in 1..%d", out_len,
                          FS_HKDF_MAX_OUT);
    }
    return 0;
}

int fs_hkdf_sha256(uint8_t *out, size_t out_len, const void *ikm, size_t ikm_len, const void *salt,
                   size_t salt_len, const void *info, size_t info_len, struct fs_err *err)
{
    struct hkdf_args a = {
        EVP_KDF_HKDF_MODE_EXTRACT_AND_EXPAND, ikm, ikm_len, salt, salt_len, info, info_len};
    int rc = check_out(out, out_len, err);

    if (rc == 0) {
        rc = check_buf(ikm, ikm_len, "ikm", err);
    }
    if (rc == 0) {
        rc = check_buf(salt, salt_len, "salt", err);
    }
    if (rc == 0) {
        rc = check_buf(info, info_len, "info", err);
    }
    if (rc != 0) {
        if (out != NULL) {
            OPENSSL_cleanse(out, out_len);
        }
        return rc;
    }
    return hkdf_run(out, out_len, &a, err);
}

int fs_hkdf_sha256_extract(uint8_t prk[FS_HKDF_PRK_LEN], const void *ikm, size_t ikm_len,
                           const void *salt, size_t salt_len, struct fs_err *err)
{
    struct hkdf_args a = {EVP_KDF_HKDF_MODE_EXTRACT_ONLY, ikm, ikm_len, salt, salt_len, NULL, 0};
    int rc = check_buf(ikm, ikm_len, "ikm", err);

    if (rc == 0) {
        rc = check_buf(salt, salt_len, "salt", err);
    }
    if (rc != 0) {
        OPENSSL_cleanse(prk, FS_HKDF_PRK_LEN);
        return rc;
    }
    return hkdf_run(prk, FS_HKDF_PRK_LEN, &a, err);
}

int fs_hkdf_sha256_expand(uint8_t *out, size_t out_len, const uint8_t prk[FS_HKDF_PRK_LEN],
                          const void *info, size_t info_len, struct fs_err *err)
{
    struct hkdf_args a = {
        EVP_KDF_HKDF_MODE_EXPAND_ONLY, prk, FS_HKDF_PRK_LEN, NULL, 0, info, info_len};
    int rc = check_out(out, out_len, err);

    if (rc == 0) {
        rc = check_buf(info, info_len, "info", err);
    }
    if (rc != 0) {
        if (out != NULL) {
            OPENSSL_cleanse(out, out_len);
        }
        return rc;
    }
    return hkdf_run(out, out_len, &a, err);
}
