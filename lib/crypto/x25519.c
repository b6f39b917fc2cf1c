#include "x25519.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "ct.h"
#include "rand.h"

#include <stdlib.h>

int fs_x25519_public(uint8_t pub[FS_X25519_KEY_LEN], const uint8_t priv[FS_X25519_KEY_LEN],
                     struct fs_err *err)
{
    EVP_PKEY *pk = NULL;
    size_t len = FS_X25519_KEY_LEN;
    int rc = 0;

    pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, FS_X25519_KEY_LEN);
    if (pk == NULL || EVP_PKEY_get_raw_public_key(pk, pub, &len) != 1 || len != FS_X25519_KEY_LEN) {
        OPENSSL_cleanse(pub, FS_X25519_KEY_LEN);
        ERR_clear_error();
        rc = fs_err_set(err, FS_ECRYPTO, "x25519: public key derivation failed");
    }
    EVP_PKEY_free(pk);
    return rc;
}

int fs_x25519_keygen(uint8_t priv[FS_X25519_KEY_LEN], uint8_t pub[FS_X25519_KEY_LEN],
                     struct fs_err *err)
{
    int rc = fs_rand_bytes(priv, FS_X25519_KEY_LEN, err);

    if (rc == 0) {
        rc = fs_x25519_public(pub, priv, err);
    }
    if (rc != 0) {
        OPENSSL_cleanse(priv, FS_X25519_KEY_LEN);
        OPENSSL_cleanse(pub, FS_X25519_KEY_LEN);
    }
    return rc;
}

struct fs_x25519_key {
    EVP_PKEY *pk;
};

int fs_x25519_key_new(fs_x25519_key **out, const uint8_t priv[FS_X25519_KEY_LEN],
                      struct fs_err *err)
{
    fs_x25519_key *k = malloc(sizeof *k);

    *out = NULL;
    if (k == NULL) {
        return fs_err_set(err, FS_ENOMEM, "x25519: out of memory");
    }
    k->pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, FS_X25519_KEY_LEN);
    if (k->pk == NULL) {
        free(k);
        ERR_clear_error();
        return fs_err_set(err, FS_ECRYPTO, "x25519: cannot load keys");
    }
    *out = k;
    return 0;
}

int fs_x25519_key_public(const fs_x25519_key *k, uint8_t pub[FS_X25519_KEY_LEN], struct fs_err *err)
{
    size_t len = FS_X25519_KEY_LEN;

    if (EVP_PKEY_get_raw_public_key(k->pk, pub, &len) != 1 || len != FS_X25519_KEY_LEN) {
        OPENSSL_cleanse(pub, FS_X25519_KEY_LEN);
        ERR_clear_error();
        return fs_err_set(err, FS_ECRYPTO, "x25519: public key derivation failed");
    }
    return 0;
}

void fs_x25519_key_free(fs_x25519_key *k)
{
    if (k == NULL) {
        return;
    }
    EVP_PKEY_free(k->pk); /* the provider clears the private key it held */
    free(k);
}

/* The agreement with a loaded private key (mine). */
static int shared_with(EVP_PKEY *mine, uint8_t out[FS_X25519_SHARED_LEN],
                       const uint8_t peer_pub[FS_X25519_KEY_LEN], struct fs_err *err)
{
    EVP_PKEY *peer = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    size_t len = FS_X25519_SHARED_LEN;
    int rc = FS_ECRYPTO;

    peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, peer_pub, FS_X25519_KEY_LEN);
    if (mine == NULL || peer == NULL) {
        fs_err_set(err, FS_ECRYPTO, "x25519: cannot load keys");
        goto out;
    }
    ctx = EVP_PKEY_CTX_new(mine, NULL);
    if (ctx == NULL || EVP_PKEY_derive_init(ctx) != 1 || EVP_PKEY_derive_set_peer(ctx, peer) != 1) {
        fs_err_set(err, FS_ECRYPTO, "x25519: derive setup failed");
        goto out;
    }
    /* OpenSSL itself refuses an all-zero result, so a derive failure at this
     * point means a low-order peer key; the explicit check below keeps us
     * safe should a provider not do that. */
    if (EVP_PKEY_derive(ctx, out, &len) != 1) {
        fs_err_set(err, FS_EAUTH, "x25519: derive refused (low-order peer public key)");
        rc = FS_EAUTH;
        goto out;
    }
    if (len != FS_X25519_SHARED_LEN) {
        fs_err_set(err, FS_ECRYPTO, "x25519: derive returned %zu bytes", len);
        goto out;
    }
    if (fs_ct_is_zero(out, FS_X25519_SHARED_LEN)) {
        fs_err_set(err, FS_EAUTH, "x25519: peer public key is a low-order point");
        rc = FS_EAUTH;
        goto out;
    }
    rc = 0;
out:
    if (rc != 0) {
        OPENSSL_cleanse(out, FS_X25519_SHARED_LEN);
        ERR_clear_error();
    }
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(peer);
    return rc;
}

int fs_x25519_key_shared(const fs_x25519_key *k, uint8_t out[FS_X25519_SHARED_LEN],
                         const uint8_t peer_pub[FS_X25519_KEY_LEN], struct fs_err *err)
{
    return shared_with(k->pk, out, peer_pub, err);
}

int fs_x25519_shared(uint8_t out[FS_X25519_SHARED_LEN], const uint8_t priv[FS_X25519_KEY_LEN],
                     const uint8_t peer_pub[FS_X25519_KEY_LEN], struct fs_err *err)
{
    EVP_PKEY *mine = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, FS_X25519_KEY_LEN);
    int rc = shared_with(mine, out, peer_pub, err);

    EVP_PKEY_free(mine);
    return rc;
}
