/* lib/crypto/reqsig: the signed key requests of the masking server. A known
 * answer computed independently (Node's Ed25519 over the documented text),
 * round trips, and every way a header or a request can be wrong. */
#include "crypto/reqsig.h"

#include <stdio.h>
#include <string.h>

#include "test.h"

#define MASKSET "m-00112233445566778899aabbccddeeff"
#define PATH2   "/v1/masksets/" MASKSET "/parties/2/keys"
#define TS      1700000000

/* seed 01 02 .. 20; public key and signature of the documented text by Node. */
static const char PUB_HEX[] = "79b5562e8fe654f94078b112e8a98ba7901f853ae695bed7e0e3910bad049664";
static const char SIG_HEX[] = "0dd5966bbc51c75e10766041691abe0baa9403f33911c238244838e0deda672a"
                              "169958e74b27d0ad167cf4babff083714daf895a663daeb3551ed3d8c0414b01";

static void seed_of(uint8_t sk[32], uint8_t first)
{
    for (int i = 0; i < 32; i++) {
        sk[i] = (uint8_t)(first + i);
    }
}

static void test_known_answer(void)
{
    static const uint8_t NONCE[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    struct fs_err err = {0};
    uint8_t sk[32];
    uint8_t pub[32];
    char hdr[FS_REQSIG_HEADER_MAX];
    char want[FS_REQSIG_HEADER_MAX];
    char fpr[FS_ED25519_FPR_LEN + 1];
    struct fs_reqsig rs;

    seed_of(sk, 1);
    CHECK_OK(fs_ed25519_public(pub, sk, &err), &err);
    fs_ed25519_fpr_format(pub, fpr);
    CHECK(strcmp(fpr, PUB_HEX) == 0);
    CHECK_OK(fs_reqsig_sign(sk, "GET", PATH2, MASKSET, 2, TS, NONCE, hdr, &err), &err);
    snprintf(want, sizeof want, "Fedsvd-Sig party=2,ts=1700000000,nonce=0001020304050607,sig=%s",
             SIG_HEX);
    CHECK_MSG(strcmp(hdr, want) == 0, "%s", hdr);
    CHECK_OK(fs_reqsig_parse(hdr, &rs, &err), &err);
    CHECK(rs.party == 2 && rs.ts == TS && strcmp(rs.nonce, "0001020304050607") == 0);
    CHECK_OK(fs_reqsig_verify(&rs, pub, "GET", PATH2, MASKSET, TS + 10, &err), &err);
}

static void test_round_trip_fresh_nonce(void)
{
    struct fs_err err = {0};
    uint8_t sk[32];
    uint8_t pub[32];
    char h1[FS_REQSIG_HEADER_MAX];
    char h2[FS_REQSIG_HEADER_MAX];
    struct fs_reqsig rs;

    CHECK_OK(fs_ed25519_keygen(sk, pub, &err), &err);
    CHECK_OK(fs_reqsig_sign(sk, "GET", PATH2, MASKSET, 2, -5, NULL, h1, &err), &err);
    CHECK_OK(fs_reqsig_sign(sk, "GET", PATH2, MASKSET, 2, -5, NULL, h2, &err), &err);
    CHECK(strcmp(h1, h2) != 0); /* fresh nonces */
    CHECK(strlen(h1) < FS_REQSIG_HEADER_MAX);
    CHECK_OK(fs_reqsig_parse(h1, &rs, &err), &err);
    CHECK(rs.ts == -5);
    CHECK_OK(fs_reqsig_verify(&rs, pub, "GET", PATH2, MASKSET, 0, &err), &err);
}

/* Everything the verifier must refuse. */
static void test_refusals(void)
{
    struct fs_err err = {0};
    uint8_t sk[32];
    uint8_t pub[32];
    uint8_t other_sk[32];
    uint8_t other_pub[32];
    char hdr[FS_REQSIG_HEADER_MAX];
    struct fs_reqsig rs;

    seed_of(sk, 1);
    seed_of(other_sk, 101);
    CHECK_OK(fs_ed25519_public(pub, sk, &err), &err);
    CHECK_OK(fs_ed25519_public(other_pub, other_sk, &err), &err);
    CHECK_OK(fs_reqsig_sign(sk, "GET", PATH2, MASKSET, 2, TS, NULL, hdr, &err), &err);
    CHECK_OK(fs_reqsig_parse(hdr, &rs, &err), &err);
    /* another party's identity key */
    CHECK(fs_reqsig_verify(&rs, other_pub, "GET", PATH2, MASKSET, TS, &err) == FS_EAUTH &&
          strstr(err.msg, "does not verify"));
    /* another route, file, mask set, method */
    CHECK(fs_reqsig_verify(&rs, pub, "GET", PATH2 "/0/rows.npy", MASKSET, TS, &err) == FS_EAUTH);
    CHECK(fs_reqsig_verify(&rs, pub, "GET", "/v1/masksets/" MASKSET "/parties/1/keys", MASKSET, TS,
                           &err) == FS_EAUTH);
    CHECK(fs_reqsig_verify(&rs, pub, "GET", PATH2, "m-ffffffffffffffffffffffffffffffff", TS,
                           &err) == FS_EAUTH);
    CHECK(fs_reqsig_verify(&rs, pub, "DELETE", PATH2, MASKSET, TS, &err) == FS_EAUTH);
    /* another party number claimed in the header (same signature) */
    rs.party = 3;
    CHECK(fs_reqsig_verify(&rs, pub, "GET", PATH2, MASKSET, TS, &err) == FS_EAUTH);
    rs.party = 2;
    /* the time window: 300 s either way, not 301 */
    CHECK_OK(fs_reqsig_verify(&rs, pub, "GET", PATH2, MASKSET, TS + 300, &err), &err);
    CHECK_OK(fs_reqsig_verify(&rs, pub, "GET", PATH2, MASKSET, TS - 300, &err), &err);
    CHECK(fs_reqsig_verify(&rs, pub, "GET", PATH2, MASKSET, TS + 301, &err) == FS_EAUTH &&
          strstr(err.msg, "clock"));
    CHECK(fs_reqsig_verify(&rs, pub, "GET", PATH2, MASKSET, TS - 301, &err) == FS_EAUTH);
    /* a changed ts or nonce breaks the signature */
    rs.ts = TS + 1;
    snprintf(rs.ts_text, sizeof rs.ts_text, "%d", TS + 1);
    CHECK(fs_reqsig_verify(&rs, pub, "GET", PATH2, MASKSET, TS, &err) == FS_EAUTH);
    CHECK_OK(fs_reqsig_parse(hdr, &rs, &err), &err);
    rs.nonce[0] = rs.nonce[0] == 'a' ? 'b' : 'a';
    CHECK(fs_reqsig_verify(&rs, pub, "GET", PATH2, MASKSET, TS, &err) == FS_EAUTH);
    /* a flipped signature bit */
    CHECK_OK(fs_reqsig_parse(hdr, &rs, &err), &err);
    rs.sig[10] ^= 1;
    CHECK(fs_reqsig_verify(&rs, pub, "GET", PATH2, MASKSET, TS, &err) == FS_EAUTH);
    /* signing refuses what cannot be signed unambiguously */
    CHECK(fs_reqsig_sign(sk, "GET", PATH2 "?keys_id=0", MASKSET, 2, TS, NULL, hdr, &err) ==
          FS_EINVAL);
    CHECK(fs_reqsig_sign(sk, "GET", "/a\nb", MASKSET, 2, TS, NULL, hdr, &err) == FS_EINVAL);
    CHECK(fs_reqsig_sign(sk, "GET", PATH2, MASKSET, 0, TS, NULL, hdr, &err) == FS_EINVAL);
    CHECK(fs_reqsig_sign(sk, "GET", PATH2, "", 1, TS, NULL, hdr, &err) == FS_EINVAL);
}

static void test_parse_strict(void)
{
    static const char *const BAD[] = {
        NULL,
        "",
        "Bearer abcdefghijklmnopqrstuvwxyz",
        "Fedsvd-Sig",
        "Fedsvd-Sig ",
        "Fedsvd-Sigparty=1,ts=1,nonce=0001020304050607,sig=%s",
        "Fedsvd-Sig party=0,ts=1,nonce=0001020304050607,sig=%s",
        "Fedsvd-Sig party=01,ts=1,nonce=0001020304050607,sig=%s",
        "Fedsvd-Sig party=1001,ts=1,nonce=0001020304050607,sig=%s",
        "Fedsvd-Sig party=1,ts=01,nonce=0001020304050607,sig=%s",
        "Fedsvd-Sig party=1,ts=-0,nonce=0001020304050607,sig=%s",
        "Fedsvd-Sig party=1,ts=1x,nonce=0001020304050607,sig=%s",
        "Fedsvd-Sig party=1,ts=99999999999999999999,nonce=0001020304050607,sig=%s",
        "Fedsvd-Sig party=1,ts=1,nonce=000102030405060,sig=%s",
        "Fedsvd-Sig party=1,ts=1,nonce=000102030405060A,sig=%s",
        "Fedsvd-Sig party=1,ts=1,nonce=0001020304050607,sig=%s0",
        "Fedsvd-Sig party=1,ts=1,nonce=0001020304050607,sig=%s,x=1",
        "Fedsvd-Sig party=1, ts=1,nonce=0001020304050607,sig=%s",
        "Fedsvd-Sig ts=1,party=1,nonce=0001020304050607,sig=%s",
        "Fedsvd-Sig party=1,ts=1,sig=%s,nonce=0001020304050607",
    };
    struct fs_err err = {0};
    struct fs_reqsig rs;
    char sig[129];
    char buf[512];

    memset(sig, 'a', 128);
    sig[128] = '\0';
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        const char *h = BAD[i];
        if (h != NULL && strstr(h, "%s") != NULL) {
            snprintf(buf, sizeof buf, h, sig);
            h = buf;
        }
        CHECK_MSG(fs_reqsig_parse(h, &rs, &err) == FS_EAUTH, "case %zu accepted", i);
        CHECK(err.msg[0] != '\0' && strstr(err.msg, sig) == NULL); /* never echoes the value */
    }
    snprintf(buf, sizeof buf, "fedsvd-sig party=1000,ts=0,nonce=0001020304050607,sig=%s", sig);
    CHECK_OK(fs_reqsig_parse(buf, &rs, &err), &err); /* scheme case-insensitive */
    CHECK(rs.party == 1000 && rs.ts == 0);
    CHECK(fs_reqsig_is_scheme("Fedsvd-Sig x") && fs_reqsig_is_scheme("FEDSVD-SIG x"));
    CHECK(!fs_reqsig_is_scheme("Bearer x") && !fs_reqsig_is_scheme("Fedsvd-Sigx") &&
          !fs_reqsig_is_scheme(NULL));
}

int main(void)
{
    RUN(test_known_answer);
    RUN(test_round_trip_fresh_nonce);
    RUN(test_refusals);
    RUN(test_parse_strict);
    return TEST_END("test_reqsig");
}
