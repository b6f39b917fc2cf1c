#include "ed25519.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "../core/hex.h"
#include "ed25519_int.h"
#include "rand.h"

#include <stdlib.h>
#include <string.h>

/* EVP wants a non-NULL pointer even for an empty message. */
static const unsigned char empty_msg[1] = {0};

int fs_ed25519_public(uint8_t pub[FS_ED25519_KEY_LEN], const uint8_t priv[FS_ED25519_KEY_LEN],
                      struct fs_err *err)
{
    EVP_PKEY *pk = NULL;
    size_t len = FS_ED25519_KEY_LEN;
    int rc = 0;

    pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, FS_ED25519_KEY_LEN);
    if (pk == NULL || EVP_PKEY_get_raw_public_key(pk, pub, &len) != 1 ||
        len != FS_ED25519_KEY_LEN) {
        OPENSSL_cleanse(pub, FS_ED25519_KEY_LEN);
        ERR_clear_error();
        rc = fs_err_set(err, FS_ECRYPTO, "ed25519: public key derivation failed");
    }
    EVP_PKEY_free(pk);
    return rc;
}

int fs_ed25519_keygen(uint8_t priv[FS_ED25519_KEY_LEN], uint8_t pub[FS_ED25519_KEY_LEN],
                      struct fs_err *err)
{
    int rc = fs_rand_bytes(priv, FS_ED25519_KEY_LEN, err);

    if (rc == 0) {
        rc = fs_ed25519_public(pub, priv, err);
    }
    if (rc != 0) {
        OPENSSL_cleanse(priv, FS_ED25519_KEY_LEN);
        OPENSSL_cleanse(pub, FS_ED25519_KEY_LEN);
    }
    return rc;
}

/* Sign with a loaded private key (pk NULL: the load failed). */
static int sign_with(EVP_PKEY *pk, uint8_t sig[FS_ED25519_SIG_LEN], const void *msg, size_t msg_len,
                     struct fs_err *err)
{
    EVP_MD_CTX *md = NULL;
    size_t len = FS_ED25519_SIG_LEN;
    int rc = FS_ECRYPTO;

    if (msg == NULL && msg_len != 0) {
        OPENSSL_cleanse(sig, FS_ED25519_SIG_LEN);
        return fs_err_set(err, FS_EINVAL, "ed25519: NULL message with length %zu", msg_len);
    }
    md = EVP_MD_CTX_new();
    if (pk == NULL || md == NULL || EVP_DigestSignInit(md, NULL, NULL, NULL, pk) != 1) {
        fs_err_set(err, FS_ECRYPTO, "ed25519: sign setup failed");
        goto out;
    }
    if (EVP_DigestSign(md, sig, &len, msg != NULL ? msg : empty_msg, msg_len) != 1 ||
        len != FS_ED25519_SIG_LEN) {
        fs_err_set(err, FS_ECRYPTO, "ed25519: signing failed");
        goto out;
    }
    rc = 0;
out:
    if (rc != 0) {
        OPENSSL_cleanse(sig, FS_ED25519_SIG_LEN);
        ERR_clear_error();
    }
    EVP_MD_CTX_free(md);
    return rc;
}

int fs_ed25519_sign(uint8_t sig[FS_ED25519_SIG_LEN], const uint8_t priv[FS_ED25519_KEY_LEN],
                    const void *msg, size_t msg_len, struct fs_err *err)
{
    EVP_PKEY *pk = NULL;
    int rc;

    if (msg == NULL && msg_len != 0) {
        OPENSSL_cleanse(sig, FS_ED25519_SIG_LEN);
        return fs_err_set(err, FS_EINVAL, "ed25519: NULL message with length %zu", msg_len);
    }
    pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, FS_ED25519_KEY_LEN);
    rc = sign_with(pk, sig, msg, msg_len, err);
    EVP_PKEY_free(pk);
    return rc;
}

struct fs_ed25519_signer {
    EVP_PKEY *pk;
};

int fs_ed25519_signer_new(fs_ed25519_signer **out, const uint8_t priv[FS_ED25519_KEY_LEN],
                          struct fs_err *err)
{
    fs_ed25519_signer *s = malloc(sizeof *s);

    *out = NULL;
    if (s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "ed25519: out of memory");
    }
    s->pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, FS_ED25519_KEY_LEN);
    if (s->pk == NULL) {
        free(s);
        ERR_clear_error();
        return fs_err_set(err, FS_ECRYPTO, "ed25519: sign setup failed");
    }
    *out = s;
    return 0;
}

int fs_ed25519_signer_public(const fs_ed25519_signer *s, uint8_t pub[FS_ED25519_KEY_LEN],
                             struct fs_err *err)
{
    size_t len = FS_ED25519_KEY_LEN;

    if (EVP_PKEY_get_raw_public_key(s->pk, pub, &len) != 1 || len != FS_ED25519_KEY_LEN) {
        OPENSSL_cleanse(pub, FS_ED25519_KEY_LEN);
        ERR_clear_error();
        return fs_err_set(err, FS_ECRYPTO, "ed25519: public key derivation failed");
    }
    return 0;
}

int fs_ed25519_signer_sign(const fs_ed25519_signer *s, uint8_t sig[FS_ED25519_SIG_LEN],
                           const void *msg, size_t msg_len, struct fs_err *err)
{
    return sign_with(s->pk, sig, msg, msg_len, err);
}

void fs_ed25519_signer_free(fs_ed25519_signer *s)
{
    if (s == NULL) {
        return;
    }
    EVP_PKEY_free(s->pk); /* the provider clears the private key it held */
    free(s);
}

int fs_ed25519_verify(const uint8_t sig[FS_ED25519_SIG_LEN], const uint8_t pub[FS_ED25519_KEY_LEN],
                      const void *msg, size_t msg_len, struct fs_err *err)
{
    int ok;

    if (msg == NULL && msg_len != 0) {
        return fs_err_set(err, FS_EINVAL, "ed25519: NULL message with length %zu", msg_len);
    }
    ok = fs_ed25519_verify_sig(sig, pub, msg, msg_len);
    if (ok < 0) {
        return fs_err_set(err, FS_ECRYPTO, "ed25519: verify setup failed");
    }
    if (ok == 0) {
        /* also a public key that is not a point encoding */
        return fs_err_set(err, FS_EAUTH, "ed25519: signature does not verify");
    }
    return 0;
}

void fs_ed25519_fpr_format(const uint8_t pub[FS_ED25519_KEY_LEN], char out[FS_ED25519_FPR_LEN + 1])
{
    fs_hex_encode(pub, FS_ED25519_KEY_LEN, out);
}

int fs_ed25519_fpr_parse(const char *s, uint8_t pub[FS_ED25519_KEY_LEN], struct fs_err *err)
{
    memset(pub, 0, FS_ED25519_KEY_LEN);
    if (s == NULL || strnlen(s, FS_ED25519_FPR_LEN + 1) != FS_ED25519_FPR_LEN ||
        fs_hex_decode(s, pub, FS_ED25519_KEY_LEN) != 0) {
        memset(pub, 0, FS_ED25519_KEY_LEN);
        return fs_err_set(err, FS_EINVAL,
                          "fingerprint: expected 64 hex digits (an Ed25519 public key)");
    }
    return 0;
}
