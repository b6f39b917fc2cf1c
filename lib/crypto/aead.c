#include "aead.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <string.h>

#include "rand.h"
#include "sha256.h"

/* EVP takes int lengths: feed long inputs in pieces of this size. */
#define AEAD_CHUNK ((size_t)1 << 30)

/* Feed n bytes through EVP_CipherUpdate (in == NULL-safe only for n == 0).
 * dst == NULL feeds associated data. */
static int aead_update(EVP_CIPHER_CTX *ctx, uint8_t *dst, const uint8_t *src, size_t n)
{
    while (n > 0) {
        size_t m = n < AEAD_CHUNK ? n : AEAD_CHUNK;
        int outl = 0;
        if (EVP_CipherUpdate(ctx, dst, &outl, src, (int)m) != 1) {
            return -1;
        }
        if (dst != NULL) {
            if ((size_t)outl != m) {
                return -1;
            }
            dst += m;
        }
        src += m;
        n -= m;
    }
    return 0;
}

static int check_args(const void *out, const size_t *out_len, const void *key, const void *nonce,
                      const void *ad, size_t ad_len, const void *in, size_t in_len,
                      struct fs_err *err)
{
    if (out == NULL || out_len == NULL || key == NULL || nonce == NULL) {
        return fs_err_set(err, FS_EINVAL, "aead: NULL argument");
    }
    if ((ad == NULL && ad_len != 0) || (in == NULL && in_len != 0)) {
        return fs_err_set(err, FS_EINVAL, "aead: NULL buffer with nonzero length");
    }
    return 0;
}

int fs_aead_seal(uint8_t *out, size_t out_cap, size_t *out_len, const uint8_t key[FS_AEAD_KEY_LEN],
                 const uint8_t nonce[FS_AEAD_NONCE_LEN], const void *ad, size_t ad_len,
                 const void *pt, size_t pt_len, struct fs_err *err)
{
    EVP_CIPHER_CTX *ctx = NULL;
    uint8_t tail[16];
    int outl = 0;
    int rc = check_args(out, out_len, key, nonce, ad, ad_len, pt, pt_len, err);

    if (rc != 0) {
        return rc;
    }
    *out_len = 0;
    if (pt_len > FS_AEAD_MAX_PT) {
        return fs_err_set(err, FS_EINVAL, "aead: plaintext of %zu bytes over the limit", pt_len);
    }
    if (out_cap < pt_len + FS_AEAD_TAG_LEN) {
        return fs_err_set(err, FS_EINVAL, "aead: output buffer %zu < %zu bytes", out_cap,
                          pt_len + FS_AEAD_TAG_LEN);
    }
    rc = FS_ECRYPTO;
    ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL || EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, nonce) != 1) {
        fs_err_set(err, FS_ECRYPTO, "aead: AES-256-GCM init failed");
        goto out;
    }
    if (aead_update(ctx, NULL, ad, ad_len) != 0 || aead_update(ctx, out, pt, pt_len) != 0 ||
        EVP_EncryptFinal_ex(ctx, tail, &outl) != 1 || outl != 0 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, FS_AEAD_TAG_LEN, out + pt_len) != 1) {
        fs_err_set(err, FS_ECRYPTO, "aead: AES-256-GCM encryption failed");
        goto out;
    }
    *out_len = pt_len + FS_AEAD_TAG_LEN;
    rc = 0;
out:
    if (rc != 0) {
        OPENSSL_cleanse(out, pt_len + FS_AEAD_TAG_LEN);
        ERR_clear_error();
    }
    EVP_CIPHER_CTX_free(ctx);
    return rc;
}

int fs_aead_open(uint8_t *out, size_t out_cap, size_t *out_len, const uint8_t key[FS_AEAD_KEY_LEN],
                 const uint8_t nonce[FS_AEAD_NONCE_LEN], const void *ad, size_t ad_len,
                 const uint8_t *in, size_t in_len, struct fs_err *err)
{
    EVP_CIPHER_CTX *ctx = NULL;
    uint8_t tag[FS_AEAD_TAG_LEN];
    uint8_t tail[16];
    size_t ct_len;
    int outl = 0;
    int rc = check_args(out, out_len, key, nonce, ad, ad_len, in, in_len, err);

    if (rc != 0) {
        return rc;
    }
    *out_len = 0;
    if (in_len < FS_AEAD_TAG_LEN) {
        return fs_err_set(err, FS_EAUTH, "aead: input of %zu bytes is shorter than the tag",
                          in_len);
    }
    ct_len = in_len - FS_AEAD_TAG_LEN;
    if (ct_len > FS_AEAD_MAX_PT) {
        return fs_err_set(err, FS_EINVAL, "aead: ciphertext of %zu bytes over the limit", ct_len);
    }
    if (out_cap < ct_len) {
        return fs_err_set(err, FS_EINVAL, "aead: output buffer %zu < %zu bytes", out_cap, ct_len);
    }
    /* Copy the tag first: with out == in the decryption writes over the
     * ciphertext (not the tag), but keeping our own copy makes that moot. */
    memcpy(tag, in + ct_len, FS_AEAD_TAG_LEN);
    rc = FS_ECRYPTO;
    ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL || EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, nonce) != 1) {
        fs_err_set(err, FS_ECRYPTO, "aead: AES-256-GCM init failed");
        goto out;
    }
    if (aead_update(ctx, NULL, ad, ad_len) != 0 || aead_update(ctx, out, in, ct_len) != 0 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, FS_AEAD_TAG_LEN, tag) != 1) {
        fs_err_set(err, FS_ECRYPTO, "aead: AES-256-GCM decryption failed");
        goto out;
    }
    /* Final compares the tag (in constant time inside OpenSSL). */
    if (EVP_DecryptFinal_ex(ctx, tail, &outl) != 1 || outl != 0) {
        rc = fs_err_set(err, FS_EAUTH, "aead: authentication failed");
        goto out;
    }
    *out_len = ct_len;
    rc = 0;
out:
    if (rc != 0) {
        /* Never release plaintext that did not authenticate. */
        OPENSSL_cleanse(out, ct_len);
        /* Our fs_err has the story; leave no stale entries in OpenSSL's queue. */
        ERR_clear_error();
    }
    EVP_CIPHER_CTX_free(ctx);
    return rc;
}

int fs_aead_box_seal(uint8_t *out, size_t out_cap, size_t *out_len,
                     const uint8_t key[FS_AEAD_KEY_LEN], const void *ad, size_t ad_len,
                     const void *pt, size_t pt_len, struct fs_err *err)
{
    size_t n = 0;
    int rc;

    if (out == NULL || out_len == NULL) {
        return fs_err_set(err, FS_EINVAL, "aead: NULL argument");
    }
    *out_len = 0;
    if (out_cap < FS_AEAD_NONCE_LEN) {
        return fs_err_set(err, FS_EINVAL, "aead: output buffer %zu bytes too small", out_cap);
    }
    rc = fs_rand_bytes(out, FS_AEAD_NONCE_LEN, err);
    if (rc != 0) {
        return rc;
    }
    rc = fs_aead_seal(out + FS_AEAD_NONCE_LEN, out_cap - FS_AEAD_NONCE_LEN, &n, key, out, ad,
                      ad_len, pt, pt_len, err);
    if (rc != 0) {
        return rc;
    }
    *out_len = n + FS_AEAD_NONCE_LEN;
    return 0;
}

int fs_aead_box_seal_det(uint8_t *out, size_t out_cap, size_t *out_len,
                         const uint8_t key[FS_AEAD_KEY_LEN], const void *ad, size_t ad_len,
                         const void *pt, size_t pt_len, struct fs_err *err)
{
    static const char label[] = "fedsvd/aead-synthetic-nonce/v1";
    uint8_t h[FS_SHA256_LEN];
    uint8_t lens[16];
    fs_sha256_ctx *ctx = NULL;
    size_t n = 0;
    int rc;

    if (out == NULL || out_len == NULL || key == NULL || (ad == NULL && ad_len != 0) ||
        (pt == NULL && pt_len != 0)) {
        return fs_err_set(err, FS_EINVAL, "aead: NULL argument");
    }
    *out_len = 0;
    if (out_cap < FS_AEAD_NONCE_LEN) {
        return fs_err_set(err, FS_EINVAL, "aead: output buffer %zu bytes too small", out_cap);
    }
    for (int i = 0; i < 8; i++) { /* both lengths, so (ad, pt) splits cannot collide */
        lens[i] = (uint8_t)((uint64_t)ad_len >> (56 - 8 * i));
        lens[8 + i] = (uint8_t)((uint64_t)pt_len >> (56 - 8 * i));
    }
    rc = fs_sha256_new(&ctx, err);
    if (rc == 0) {
        rc = fs_sha256_update(ctx, label, sizeof label, err);
    }
    if (rc == 0) {
        rc = fs_sha256_update(ctx, key, FS_AEAD_KEY_LEN, err);
    }
    if (rc == 0) {
        rc = fs_sha256_update(ctx, lens, sizeof lens, err);
    }
    if (rc == 0 && ad_len > 0) {
        rc = fs_sha256_update(ctx, ad, ad_len, err);
    }
    if (rc == 0 && pt_len > 0) {
        rc = fs_sha256_update(ctx, pt, pt_len, err);
    }
    if (rc == 0) {
        rc = fs_sha256_final(ctx, h, err);
    }
    fs_sha256_free(ctx);
    if (rc == 0) {
        memcpy(out, h, FS_AEAD_NONCE_LEN);
        rc = fs_aead_seal(out + FS_AEAD_NONCE_LEN, out_cap - FS_AEAD_NONCE_LEN, &n, key, out, ad,
                          ad_len, pt, pt_len, err);
    }
    OPENSSL_cleanse(h, sizeof h);
    if (rc != 0) {
        return rc;
    }
    *out_len = n + FS_AEAD_NONCE_LEN;
    return 0;
}

int fs_aead_box_open(uint8_t *out, size_t out_cap, size_t *out_len,
                     const uint8_t key[FS_AEAD_KEY_LEN], const void *ad, size_t ad_len,
                     const uint8_t *in, size_t in_len, struct fs_err *err)
{
    uint8_t nonce[FS_AEAD_NONCE_LEN];

    if (out == NULL || out_len == NULL || (in == NULL && in_len != 0)) {
        return fs_err_set(err, FS_EINVAL, "aead: NULL argument");
    }
    *out_len = 0;
    if (in_len < FS_AEAD_BOX_OVERHEAD) {
        return fs_err_set(err, FS_EAUTH, "aead: box of %zu bytes is shorter than %d", in_len,
                          FS_AEAD_BOX_OVERHEAD);
    }
    memcpy(nonce, in, FS_AEAD_NONCE_LEN);
    return fs_aead_open(out, out_cap, out_len, key, nonce, ad, ad_len, in + FS_AEAD_NONCE_LEN,
                        in_len - FS_AEAD_NONCE_LEN, err);
}
