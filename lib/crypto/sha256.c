#include "sha256.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <stdlib.h>

struct fs_sha256_ctx {
    EVP_MD_CTX *md;
};

int fs_sha256(uint8_t out[FS_SHA256_LEN], const void *data, size_t n, struct fs_err *err)
{
    static const unsigned char empty[1] = {0};
    unsigned int len = 0;

    if (data == NULL && n != 0) {
        return fs_err_set(err, FS_EINVAL, "sha256: NULL data with length %zu", n);
    }
    if (EVP_Digest(data != NULL ? data : empty, n, out, &len, EVP_sha256(), NULL) != 1 ||
        len != FS_SHA256_LEN) {
        ERR_clear_error();
        return fs_err_set(err, FS_ECRYPTO, "sha256: EVP_Digest failed");
    }
    return 0;
}

int fs_sha256_new(fs_sha256_ctx **out, struct fs_err *err)
{
    fs_sha256_ctx *ctx = NULL;

    *out = NULL;
    ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) {
        return fs_err_set(err, FS_ENOMEM, "sha256: out of memory");
    }
    ctx->md = EVP_MD_CTX_new();
    if (ctx->md == NULL || EVP_DigestInit_ex(ctx->md, EVP_sha256(), NULL) != 1) {
        fs_sha256_free(ctx);
        ERR_clear_error();
        return fs_err_set(err, FS_ECRYPTO, "sha256: init failed");
    }
    *out = ctx;
    return 0;
}

int fs_sha256_update(fs_sha256_ctx *ctx, const void *data, size_t n, struct fs_err *err)
{
    if (n == 0) {
        return 0;
    }
    if (data == NULL) {
        return fs_err_set(err, FS_EINVAL, "sha256: NULL data with length %zu", n);
    }
    if (EVP_DigestUpdate(ctx->md, data, n) != 1) {
        ERR_clear_error();
        return fs_err_set(err, FS_ECRYPTO, "sha256: update failed");
    }
    return 0;
}

int fs_sha256_final(fs_sha256_ctx *ctx, uint8_t out[FS_SHA256_LEN], struct fs_err *err)
{
    unsigned int len = 0;

    if (EVP_DigestFinal_ex(ctx->md, out, &len) != 1 || len != FS_SHA256_LEN) {
        ERR_clear_error();
        return fs_err_set(err, FS_ECRYPTO, "sha256: final failed");
    }
    if (EVP_DigestInit_ex(ctx->md, EVP_sha256(), NULL) != 1) {
        ERR_clear_error();
        return fs_err_set(err, FS_ECRYPTO, "sha256: reset failed");
    }
    return 0;
}

void fs_sha256_free(fs_sha256_ctx *ctx)
{
    if (ctx == NULL) {
        return;
    }
    EVP_MD_CTX_free(ctx->md);
    free(ctx);
}
