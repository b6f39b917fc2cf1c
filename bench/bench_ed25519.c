/* Ed25519 verification on one core: fs_ed25519_verify (our verifier,
 * lib/crypto/ed25519_verify.c) against OpenSSL's EVP_DigestVerify called
 * directly, on the same 200 keys, 64-byte messages and signatures, best of
 * 5 rounds each. Prints microseconds per verification and the ratio.
 * Asserts nothing but that every signature verifies; about 1 s. */
#include "crypto/ed25519.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NSIG   200
#define ROUNDS 5

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_ed25519: %s failed\n", what);
    exit(1);
}

static uint8_t pubs[NSIG][FS_ED25519_KEY_LEN];
static uint8_t sigs[NSIG][FS_ED25519_SIG_LEN];
static uint8_t msgs[NSIG][64];

static int ossl_verify(int i)
{
    EVP_PKEY *pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pubs[i], 32);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = pk != NULL && md != NULL && EVP_DigestVerifyInit(md, NULL, NULL, NULL, pk) == 1 &&
             EVP_DigestVerify(md, sigs[i], 64, msgs[i], sizeof msgs[i]) == 1;

    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pk);
    return ok;
}

/* Best time per verification over ROUNDS passes (ours: which = 0). */
static double per_verify(int which)
{
    double best = 1e9;

    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now();
        for (int i = 0; i < NSIG; i++) {
            struct fs_err err = {0};
            int ok = which == 0
                         ? fs_ed25519_verify(sigs[i], pubs[i], msgs[i], sizeof msgs[i], &err) == 0
                         : ossl_verify(i);
            if (!ok) {
                die("verification");
            }
        }
        double t = (now() - t0) / NSIG;
        best = t < best ? t : best;
    }
    return best;
}

int main(void)
{
    struct fs_err err = {0};

    for (int i = 0; i < NSIG; i++) {
        uint8_t priv[FS_ED25519_KEY_LEN];
        for (size_t j = 0; j < sizeof msgs[i]; j++) {
            msgs[i][j] = (uint8_t)(i * 31 + j);
        }
        if (fs_ed25519_keygen(priv, pubs[i], &err) != 0 ||
            fs_ed25519_sign(sigs[i], priv, msgs[i], sizeof msgs[i], &err) != 0) {
            die("key generation or signing");
        }
    }
    per_verify(0); /* one-time table setup out of the timing */
    double ours = per_verify(0);
    double ossl = per_verify(1);
    printf("Ed25519 verify (64-byte messages, best of %d x %d): fs_ed25519_verify %.1f us, "
           "OpenSSL EVP %.1f us, OpenSSL / ours %.2f\n",
           ROUNDS, NSIG, 1e6 * ours, 1e6 * ossl, ossl / ours);
    return 0;
}
