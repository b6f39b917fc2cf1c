/* Randomness derived from one secret (lib/crypto/derive.h) and what a
 * client agent builds on it to resume after a restart: the same secret
 * gives byte for byte the same keys, Shamir shares, share boxes, SecAgg
 * messages and Paillier re-randomizations; another secret (or the CSPRNG)
 * gives others; the synthetic-nonce AEAD opens like any box. */
#include "crypto/aead.h"
#include "crypto/derive.h"
#include "crypto/ed25519.h"
#include "crypto/paillier.h"
#include "crypto/rand.h"
#include "crypto/shamir.h"
#include "proto/secagg.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static void test_derive_key(void)
{
    struct fs_err err = {0};
    uint8_t s[32], a[32], b[32], c[32], d[32], e[32];
    char long_label[80];

    memset(s, 7, sizeof s);
    CHECK_OK(fs_derive_key(a, s, "x/label", 1, 2, &err), &err);
    CHECK_OK(fs_derive_key(b, s, "x/label", 1, 2, &err), &err);
    CHECK(memcmp(a, b, 32) == 0);
    CHECK_OK(fs_derive_key(c, s, "x/label", 2, 1, &err), &err);
    CHECK_OK(fs_derive_key(d, s, "x/labe", 1, 2, &err), &err);
    CHECK(memcmp(a, c, 32) != 0 && memcmp(a, d, 32) != 0);
    s[31] ^= 1;
    CHECK_OK(fs_derive_key(e, s, "x/label", 1, 2, &err), &err);
    CHECK(memcmp(a, e, 32) != 0);
    memset(long_label, 'a', sizeof long_label - 1);
    long_label[sizeof long_label - 1] = '\0';
    CHECK(fs_derive_key(e, s, long_label, 0, 0, &err) == FS_EINVAL);
    CHECK(fs_derive_key(e, s, NULL, 0, 0, &err) == FS_EINVAL);
}

static void test_aead_det(void)
{
    struct fs_err err = {0};
    uint8_t key[32];
    uint8_t b1[64], b2[64], b3[64], pt[64];
    size_t n1 = 0, n2 = 0, n3 = 0, np = 0;
    static const char msg[] = "an exponent";

    memset(key, 3, sizeof key);
    CHECK_OK(fs_aead_box_seal_det(b1, sizeof b1, &n1, key, "ad", 2, msg, sizeof msg, &err), &err);
    CHECK_OK(fs_aead_box_seal_det(b2, sizeof b2, &n2, key, "ad", 2, msg, sizeof msg, &err), &err);
    CHECK(n1 == sizeof msg + FS_AEAD_BOX_OVERHEAD && n1 == n2 && memcmp(b1, b2, n1) == 0);
    CHECK_OK(fs_aead_box_open(pt, sizeof pt, &np, key, "ad", 2, b1, n1, &err), &err);
    CHECK(np == sizeof msg && memcmp(pt, msg, np) == 0);
    /* another ad or plaintext: another nonce */
    CHECK_OK(fs_aead_box_seal_det(b3, sizeof b3, &n3, key, "ae", 2, msg, sizeof msg, &err), &err);
    CHECK(memcmp(b1, b3, FS_AEAD_NONCE_LEN) != 0);
    CHECK_OK(fs_aead_box_seal_det(b3, sizeof b3, &n3, key, "ad", 2, "x", 1, &err), &err);
    CHECK(memcmp(b1, b3, FS_AEAD_NONCE_LEN) != 0);
    b1[n1 - 1] ^= 1;
    CHECK(fs_aead_box_open(pt, sizeof pt, &np, key, "ad", 2, b1, n1, &err) == FS_EAUTH);
    /* the random-nonce box differs each time */
    CHECK_OK(fs_aead_box_seal(b1, sizeof b1, &n1, key, "ad", 2, msg, sizeof msg, &err), &err);
    CHECK_OK(fs_aead_box_seal(b2, sizeof b2, &n2, key, "ad", 2, msg, sizeof msg, &err), &err);
    CHECK(memcmp(b1, b2, n1) != 0);
}

static void test_shamir_det(void)
{
    struct fs_err err = {0};
    static const uint16_t xs5[5] = {1, 2, 3, 4, 5};
    static const uint16_t xs3[3] = {4, 2, 5};
    struct fs_shamir_share a[5], b[5], c[3], r[5];
    uint8_t secret[32], ck[32], other[32], back[32];

    memset(secret, 0x42, sizeof secret);
    memset(ck, 0x11, sizeof ck);
    memset(other, 0x12, sizeof other);
    CHECK_OK(fs_shamir_split_at_det(secret, 3, xs5, 5, ck, a, &err), &err);
    CHECK_OK(fs_shamir_split_at_det(secret, 3, xs5, 5, ck, b, &err), &err);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* the share at x does not depend on the other points */
    CHECK_OK(fs_shamir_split_at_det(secret, 3, xs3, 3, ck, c, &err), &err);
    CHECK(memcmp(&c[0], &a[3], sizeof c[0]) == 0 && memcmp(&c[1], &a[1], sizeof c[1]) == 0 &&
          memcmp(&c[2], &a[4], sizeof c[2]) == 0);
    CHECK_OK(fs_shamir_combine(a + 1, 3, 3, back, &err), &err);
    CHECK(memcmp(back, secret, 32) == 0);
    CHECK_OK(fs_shamir_split_at_det(secret, 3, xs5, 5, other, r, &err), &err);
    CHECK(memcmp(&r[1], &a[1], sizeof r[1]) != 0);
    CHECK(fs_shamir_split_at_det(secret, 3, xs5, 5, NULL, r, &err) == FS_EINVAL);
}

/* Three SecAgg clients through R0 and R1; party 1 built twice from one secret. */
static void test_secagg_client_det(void)
{
    struct fs_err err = {0};
    struct fs_secagg_config cfg;
    uint8_t sk[4][32], pk[32], secret[32];
    fs_secagg_client *c[4] = {NULL};
    fs_secagg_client *again = NULL;
    fs_secagg_client *rnd = NULL;
    struct fs_secagg_adv adv[4], adv_again, adv_rnd;
    struct fs_secagg_share_ct *cts = NULL, *cts_again = NULL;
    size_t ncts = 0, ncts_again = 0;

    memset(&cfg, 0, sizeof cfg);
    cfg.n = 3;
    cfg.t = 2;
    cfg.aggregations = 2;
    memset(cfg.job_id, 0x77, sizeof cfg.job_id);
    memset(secret, 0x99, sizeof secret);
    for (uint32_t i = 1; i <= 3; i++) {
        uint8_t si[32];
        memset(si, (int)(0x90 + i), sizeof si);
        CHECK_OK(fs_ed25519_keygen(sk[i], pk, &err), &err);
        CHECK_OK(fs_secagg_client_new_det(&cfg, i, sk[i], i == 1 ? secret : si, &c[i], &err), &err);
        CHECK_OK(fs_secagg_client_advertise(c[i], &adv[i], &err), &err);
    }
    CHECK_OK(fs_secagg_client_new_det(&cfg, 1, sk[1], secret, &again, &err), &err);
    CHECK_OK(fs_secagg_client_advertise(again, &adv_again, &err), &err);
    CHECK(memcmp(adv[1].c_pk, adv_again.c_pk, 32) == 0 &&
          memcmp(adv[1].s_pks, adv_again.s_pks, 64) == 0 &&
          memcmp(adv[1].sig, adv_again.sig, sizeof adv[1].sig) == 0);
    CHECK(memcmp(adv[1].s_pks, adv[1].s_pks + 32, 32) != 0); /* a key pair per aggregation */
    CHECK_OK(fs_secagg_client_new(&cfg, 1, sk[1], &rnd, &err), &err);
    CHECK_OK(fs_secagg_client_advertise(rnd, &adv_rnd, &err), &err);
    CHECK(memcmp(adv[1].c_pk, adv_rnd.c_pk, 32) != 0);
    {
        struct fs_secagg_adv roster[3] = {adv[1], adv[2], adv[3]};
        CHECK_OK(fs_secagg_client_share_keys(c[1], roster, 3, &cts, &ncts, &err), &err);
        CHECK_OK(fs_secagg_client_share_keys(again, roster, 3, &cts_again, &ncts_again, &err),
                 &err);
    }
    CHECK(ncts == 2 && ncts_again == 2);
    for (size_t k = 0; k < ncts && k < ncts_again; k++) {
        CHECK(cts[k].to == cts_again[k].to && cts[k].len == cts_again[k].len &&
              memcmp(cts[k].ct, cts_again[k].ct, cts[k].len) == 0);
    }
    /* and the recipients open them */
    {
        struct fs_secagg_adv roster[3] = {adv[1], adv[2], adv[3]};
        struct fs_secagg_share_ct *o = NULL;
        size_t no = 0;
        CHECK_OK(fs_secagg_client_share_keys(c[2], roster, 3, &o, &no, &err), &err);
        fs_secagg_share_cts_free(o, no);
        for (size_t k = 0; k < ncts; k++) {
            if (cts[k].to == 2) {
                struct fs_secagg_share_ct one = cts[k];
                struct fs_err e2 = {0};
                /* only party 1's bundle: below the threshold count, but it must authenticate */
                int rc = fs_secagg_client_receive_shares(c[2], &one, 1, &e2);
                CHECK_MSG(rc == 0, "%s", e2.msg);
            }
        }
    }
    fs_secagg_share_cts_free(cts, ncts);
    fs_secagg_share_cts_free(cts_again, ncts_again);
    fs_secagg_client_free(again);
    fs_secagg_client_free(rnd);
    for (uint32_t i = 1; i <= 3; i++) {
        fs_secagg_client_free(c[i]);
    }
    CHECK(fs_secagg_client_new_det(&cfg, 1, sk[1], NULL, &again, &err) == FS_EINVAL);
}

static void test_paillier_det(void)
{
    struct fs_err err = {0};
    fs_paillier_sk *sk = NULL;
    const fs_paillier_pk *pk;
    fs_paillier_djn *d1 = NULL, *d2 = NULL;
    uint8_t key[32], base[32];
    mpz_t m, c, r1, r2, r3;

    memset(key, 5, sizeof key);
    memset(base, 6, sizeof base);
    mpz_init_set_ui(m, 12345);
    mpz_inits(c, r1, r2, r3, NULL);
    CHECK_OK(fs_paillier_keygen(&sk, 1024, &err), &err);
    if (sk == NULL) {
        goto out;
    }
    pk = fs_paillier_sk_pub(sk);
    CHECK_OK(fs_paillier_djn_new_det(&d1, pk, 0, 2, base, &err), &err);
    CHECK_OK(fs_paillier_djn_new_det(&d2, pk, 0, 2, base, &err), &err);
    CHECK_OK(fs_paillier_encrypt(pk, NULL, c, m, &err), &err);
    CHECK_OK(fs_paillier_rerandomize_det(pk, d1, r1, c, key, &err), &err);
    CHECK_OK(fs_paillier_rerandomize_det(pk, d2, r2, c, key, &err), &err);
    CHECK(mpz_cmp(r1, r2) == 0 && mpz_cmp(r1, c) != 0);
    CHECK_OK(fs_paillier_rerandomize(pk, d1, r3, c, &err), &err);
    CHECK(mpz_cmp(r1, r3) != 0);
    CHECK_OK(fs_paillier_decrypt(sk, r3, r1, &err), &err);
    CHECK(mpz_cmp(r3, m) == 0);
out:
    mpz_clears(m, c, r1, r2, r3, NULL);
    fs_paillier_djn_free(d1);
    fs_paillier_djn_free(d2);
    fs_paillier_sk_free(sk);
}

int main(void)
{
    RUN(test_derive_key);
    RUN(test_aead_det);
    RUN(test_shamir_det);
    RUN(test_secagg_client_det);
    RUN(test_paillier_det);
    return TEST_END("test_derive");
}
