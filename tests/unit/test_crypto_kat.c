/* Known-answer tests from the standards for lib/crypto:
 *   SHA-256   FIPS 180-2 appendix B examples
 *   HKDF      RFC 5869 appendix A, test cases 1-3
 *   AES-GCM   McGrew-Viega GCM specification, test cases 13-16 (256-bit keys)
 *   X25519    RFC 7748 §5.2 (incl. 1 and 1000 iterations) and §6.1
 *   Ed25519   RFC 8032 §7.1 TEST 1, 2, 3, 1024 and SHA(abc) */
#include "crypto/aead.h"
#include "crypto/ed25519.h"
#include "crypto/hkdf.h"
#include "crypto/sha256.h"
#include "crypto/x25519.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>

/* Decode hex into out (cap bytes); returns the byte count, or SIZE_MAX on a
 * malformed string or overflow (which fails the test that uses it). */
static size_t unhex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = strlen(s);

    if (n % 2 != 0 || n / 2 > cap) {
        return SIZE_MAX;
    }
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v = 0;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) {
            return SIZE_MAX;
        }
        out[i] = (uint8_t)v;
    }
    return n / 2;
}

#define HEX(s, buf) unhex((s), (buf), sizeof(buf))

/* ---- SHA-256 ---- */

static void test_sha256(void)
{
    static const struct {
        const char *msg;
        const char *digest;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    struct fs_err err = {0};
    uint8_t want[32], got[32];

    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        CHECK(HEX(v[i].digest, want) == 32);
        CHECK_OK(fs_sha256(got, v[i].msg, strlen(v[i].msg), &err), &err);
        CHECK_MSG(memcmp(got, want, 32) == 0, "vector %zu", i);
    }
}

static void test_sha256_incremental_million_a(void)
{
    uint8_t want[32], got[32], chunk[1000];
    struct fs_err err = {0};
    fs_sha256_ctx *c = NULL;

    CHECK(HEX("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", want) == 32);
    memset(chunk, 'a', sizeof chunk);
    CHECK_OK(fs_sha256_new(&c, &err), &err);
    if (c == NULL) {
        return;
    }
    for (int i = 0; i < 1000; i++) {
        CHECK_OK(fs_sha256_update(c, chunk, sizeof chunk, &err), &err);
    }
    CHECK_OK(fs_sha256_final(c, got, &err), &err);
    CHECK(memcmp(got, want, 32) == 0);
    /* The context resets after final: "abc" again. */
    CHECK(HEX("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", want) == 32);
    CHECK_OK(fs_sha256_update(c, "ab", 2, &err), &err);
    CHECK_OK(fs_sha256_update(c, NULL, 0, &err), &err);
    CHECK_OK(fs_sha256_update(c, "c", 1, &err), &err);
    CHECK_OK(fs_sha256_final(c, got, &err), &err);
    CHECK(memcmp(got, want, 32) == 0);
    fs_sha256_free(c);
    fs_sha256_free(NULL);
}

/* ---- HKDF-SHA256, RFC 5869 A.1-A.3 ---- */

static void test_hkdf_rfc5869(void)
{
    static const struct {
        const char *ikm, *salt, *info, *prk, *okm;
    } v[] = {
        {"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "000102030405060708090a0b0c",
         "f0f1f2f3f4f5f6f7f8f9", "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5",
         "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"},
        {"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
         "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
         "404142434445464748494a4b4c4d4e4f",
         "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
         "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
         "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
         "b0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
         "d0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeef"
         "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
         "06a6b88c5853361a06104c9ceb35b45cef760014904671014a193f40c15fc244",
         "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
         "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
         "cc30c58179ec3e87c14c01d5c1f3434f1d87"},
        {"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "", "",
         "19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04",
         "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"},
    };
    struct fs_err err = {0};

    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t ikm[80], salt[80], info[80], prk[32], okm[82];
        uint8_t got_prk[32], got[82], got2[82];
        size_t ni = HEX(v[i].ikm, ikm), ns = HEX(v[i].salt, salt), nf = HEX(v[i].info, info);
        size_t np = HEX(v[i].prk, prk), no = HEX(v[i].okm, okm);

        CHECK(ni != SIZE_MAX && ns != SIZE_MAX && nf != SIZE_MAX && np == 32 && no != SIZE_MAX);
        if (no == SIZE_MAX) {
            continue;
        }
        CHECK_OK(fs_hkdf_sha256_extract(got_prk, ikm, ni, ns ? salt : NULL, ns, &err), &err);
        CHECK_MSG(memcmp(got_prk, prk, 32) == 0, "PRK of case %zu", i + 1);
        CHECK_OK(fs_hkdf_sha256_expand(got, no, prk, nf ? info : NULL, nf, &err), &err);
        CHECK_MSG(memcmp(got, okm, no) == 0, "OKM (expand) of case %zu", i + 1);
        CHECK_OK(
            fs_hkdf_sha256(got2, no, ikm, ni, ns ? salt : NULL, ns, nf ? info : NULL, nf, &err),
            &err);
        CHECK_MSG(memcmp(got2, okm, no) == 0, "OKM (full) of case %zu", i + 1);
    }
}

/* ---- AES-256-GCM, McGrew & Viega, "The Galois/Counter Mode of Operation",
 * test cases 13-16: the 256-bit-key cases (K is 32 bytes in each). ---- */

static void test_gcm_spec(void)
{
    static const char *k15 = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308";
    static const char *p15 = "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                             "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255";
    static const char *c15 = "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                             "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad";
    static const struct {
        int tc;
        const char *key, *iv, *pt, *ad, *ct, *tag;
        size_t trunc; /* use only this many bytes of pt/ct (0 = all) */
    } v[] = {
        {13, "0000000000000000000000000000000000000000000000000000000000000000",
         "000000000000000000000000", "", "", "", "530f8afbc74536b9a963b4f1c4cb738b", 0},
        {14, "0000000000000000000000000000000000000000000000000000000000000000",
         "000000000000000000000000", "00000000000000000000000000000000", "",
         "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919", 0},
        {15, NULL, "cafebabefacedbaddecaf888", NULL, "", NULL, "b094dac5d93471bdec1a502270e3cc6c",
         0},
        {16, NULL, "cafebabefacedbaddecaf888", NULL, "feedfacedeadbeeffeedfacedeadbeefabaddad2",
         NULL, "76fc6ece0f4e1768cddf8853bb2d551b", 60},
    };
    struct fs_err err = {0};

    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t key[32], iv[12], pt[64], ad[20], ct[64], tag[16];
        uint8_t out[80], back[64];
        size_t nk = HEX(v[i].key ? v[i].key : k15, key);
        size_t nv = HEX(v[i].iv, iv);
        size_t np = HEX(v[i].pt ? v[i].pt : p15, pt);
        size_t na = HEX(v[i].ad, ad);
        size_t nc = HEX(v[i].ct ? v[i].ct : c15, ct);
        size_t nt = HEX(v[i].tag, tag);
        size_t n = 0;

        CHECK_MSG(nk == 32 && nv == 12 && nt == 16 && np == nc && na != SIZE_MAX,
                  "test case %d vectors", v[i].tc);
        if (nk != 32 || np != nc || np == SIZE_MAX) {
            continue;
        }
        if (v[i].trunc) {
            np = nc = v[i].trunc;
        }
        CHECK_OK(fs_aead_seal(out, sizeof out, &n, key, iv, ad, na, pt, np, &err), &err);
        CHECK(n == np + 16);
        CHECK_MSG(memcmp(out, ct, nc) == 0, "ciphertext of test case %d", v[i].tc);
        CHECK_MSG(memcmp(out + nc, tag, 16) == 0, "tag of test case %d", v[i].tc);
        CHECK_OK(fs_aead_open(back, sizeof back, &n, key, iv, ad, na, out, nc + 16, &err), &err);
        CHECK(n == np && memcmp(back, pt, np) == 0);
    }
}

/* ---- X25519, RFC 7748 ---- */

static void test_x25519_rfc7748_vectors(void)
{
    static const struct {
        const char *k, *u, *out;
    } v[] = {
        {"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
         "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
         "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"},
        /* u has its top bit set: it must be masked, not rejected. */
        {"4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
         "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
         "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"},
    };
    struct fs_err err = {0};

    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t k[32], u[32], want[32], got[32];
        CHECK(HEX(v[i].k, k) == 32 && HEX(v[i].u, u) == 32 && HEX(v[i].out, want) == 32);
        CHECK_OK(fs_x25519_shared(got, k, u, &err), &err);
        CHECK_MSG(memcmp(got, want, 32) == 0, "vector %zu", i + 1);
    }
}

static void test_x25519_rfc7748_iterated(void)
{
    uint8_t k[32] = {9}, u[32] = {9}, r[32], want1[32], want1000[32];
    struct fs_err err = {0};

    CHECK(HEX("422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079", want1) == 32);
    CHECK(HEX("684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51", want1000) == 32);
    for (int i = 1; i <= 1000; i++) {
        if (fs_x25519_shared(r, k, u, &err) != 0) {
            CHECK_MSG(0, "iteration %d: %s", i, err.msg);
            return;
        }
        memcpy(u, k, 32);
        memcpy(k, r, 32);
        if (i == 1) {
            CHECK(memcmp(k, want1, 32) == 0);
        }
    }
    CHECK(memcmp(k, want1000, 32) == 0);
}

static void test_x25519_rfc7748_dh(void)
{
    uint8_t a[32], ap[32], b[32], bp[32], shared[32], got[32];
    struct fs_err err = {0};

    CHECK(HEX("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", a) == 32);
    CHECK(HEX("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a", ap) == 32);
    CHECK(HEX("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb", b) == 32);
    CHECK(HEX("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f", bp) == 32);
    CHECK(HEX("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742", shared) == 32);
    CHECK_OK(fs_x25519_public(got, a, &err), &err);
    CHECK(memcmp(got, ap, 32) == 0);
    CHECK_OK(fs_x25519_public(got, b, &err), &err);
    CHECK(memcmp(got, bp, 32) == 0);
    CHECK_OK(fs_x25519_shared(got, a, bp, &err), &err);
    CHECK(memcmp(got, shared, 32) == 0);
    CHECK_OK(fs_x25519_shared(got, b, ap, &err), &err);
    CHECK(memcmp(got, shared, 32) == 0);
}

/* ---- Ed25519, RFC 8032 §7.1 ---- */

/* TEST 1024: a 1023-byte message. */
static const char msg1024[] = "08b8b2b733424243760fe426a4b54908632110a66c2f6591eabd3345e3e4eb98"
                              "fa6e264bf09efe12ee50f8f54e9f77b1e355f6c50544e23fb1433ddf73be84d8"
                              "79de7c0046dc4996d9e773f4bc9efe5738829adb26c81b37c93a1b270b20329d"
                              "658675fc6ea534e0810a4432826bf58c941efb65d57a338bbd2e26640f89ffbc"
                              "1a858efcb8550ee3a5e1998bd177e93a7363c344fe6b199ee5d02e82d522c4fe"
                              "ba15452f80288a821a579116ec6dad2b3b310da903401aa62100ab5d1a36553e"
                              "06203b33890cc9b832f79ef80560ccb9a39ce767967ed628c6ad573cb116dbef"
                              "efd75499da96bd68a8a97b928a8bbc103b6621fcde2beca1231d206be6cd9ec7"
                              "aff6f6c94fcd7204ed3455c68c83f4a41da4af2b74ef5c53f1d8ac70bdcb7ed1"
                              "85ce81bd84359d44254d95629e9855a94a7c1958d1f8ada5d0532ed8a5aa3fb2"
                              "d17ba70eb6248e594e1a2297acbbb39d502f1a8c6eb6f1ce22b3de1a1f40cc24"
                              "554119a831a9aad6079cad88425de6bde1a9187ebb6092cf67bf2b13fd65f270"
                              "88d78b7e883c8759d2c4f5c65adb7553878ad575f9fad878e80a0c9ba63bcbcc"
                              "2732e69485bbc9c90bfbd62481d9089beccf80cfe2df16a2cf65bd92dd597b07"
                              "07e0917af48bbb75fed413d238f5555a7a569d80c3414a8d0859dc65a46128ba"
                              "b27af87a71314f318c782b23ebfe808b82b0ce26401d2e22f04d83d1255dc51a"
                              "ddd3b75a2b1ae0784504df543af8969be3ea7082ff7fc9888c144da2af58429e"
                              "c96031dbcad3dad9af0dcbaaaf268cb8fcffead94f3c7ca495e056a9b47acdb7"
                              "51fb73e666c6c655ade8297297d07ad1ba5e43f1bca32301651339e22904cc8c"
                              "42f58c30c04aafdb038dda0847dd988dcda6f3bfd15c4b4c4525004aa06eeff8"
                              "ca61783aacec57fb3d1f92b0fe2fd1a85f6724517b65e614ad6808d6f6ee34df"
                              "f7310fdc82aebfd904b01e1dc54b2927094b2db68d6f903b68401adebf5a7e08"
                              "d78ff4ef5d63653a65040cf9bfd4aca7984a74d37145986780fc0b16ac451649"
                              "de6188a7dbdf191f64b5fc5e2ab47b57f7f7276cd419c17a3ca8e1b939ae49e4"
                              "88acba6b965610b5480109c8b17b80e1b7b750dfc7598d5d5011fd2dcc5600a3"
                              "2ef5b52a1ecc820e308aa342721aac0943bf6686b64b2579376504ccc493d97e"
                              "6aed3fb0f9cd71a43dd497f01f17c0e2cb3797aa2a2f256656168e6c496afc5f"
                              "b93246f6b1116398a346f1a641f3b041e989f7914f90cc2c7fff357876e506b5"
                              "0d334ba77c225bc307ba537152f3f1610e4eafe595f6d9d90d11faa933a15ef1"
                              "369546868a7f3a45a96768d40fd9d03412c091c6315cf4fde7cb68606937380d"
                              "b2eaaa707b4c4185c32eddcdd306705e4dc1ffc872eeee475a64dfac86aba41c"
                              "0618983f8741c5ef68d3a101e8a3b8cac60c905c15fc910840b94c00a0b9d0";

static void test_ed25519_rfc8032(void)
{
    static const struct {
        const char *name, *sk, *pk, *msg, *sig;
    } v[] = {
        {"TEST 1", "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
         "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
         "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
        {"TEST 2", "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
         "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
         "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
         "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
        {"TEST 3", "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
         "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
         "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
         "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
        {"TEST 1024", "f5e5767cf153319517630f226876b86c8160cc583bc013744c6bf255f5cc0ee5",
         "278117fc144c72340f67d0f2316e8386ceffbf2b2428c9c51fef7c597f1d426e", msg1024,
         "0aab4c900501b3e24d7cdf4663326a3a87df5e4843b2cbdb67cbf6e460fec350"
         "aa5371b1508f9f4528ecea23c436d94b5e8fcd4f681e30a6ac00a9704a188a03"},
        {"TEST SHA(abc)", "833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
         "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
         "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
         "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
         "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b589"
         "09351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"},
    };
    struct fs_err err = {0};

    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t sk[32], pk[32], msg[1024], sig[64], got[64];
        size_t nm = HEX(v[i].msg, msg);

        CHECK(HEX(v[i].sk, sk) == 32 && HEX(v[i].pk, pk) == 32 && HEX(v[i].sig, sig) == 64);
        CHECK_MSG(nm != SIZE_MAX, "%s message", v[i].name);
        if (nm == SIZE_MAX) {
            continue;
        }
        CHECK_OK(fs_ed25519_public(got, sk, &err), &err);
        CHECK_MSG(memcmp(got, pk, 32) == 0, "%s public key", v[i].name);
        CHECK_OK(fs_ed25519_sign(got, sk, nm ? msg : NULL, nm, &err), &err);
        CHECK_MSG(memcmp(got, sig, 64) == 0, "%s signature", v[i].name);
        CHECK_OK(fs_ed25519_verify(sig, pk, nm ? msg : NULL, nm, &err), &err);
        for (int bit = 0; bit < 512; bit += 37) { /* any flipped bit of R or S fails */
            sig[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            CHECK_MSG(fs_ed25519_verify(sig, pk, nm ? msg : NULL, nm, &err) == FS_EAUTH,
                      "%s bit %d", v[i].name, bit);
            sig[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
    }
    CHECK(strlen(msg1024) == 2 * 1023);
}

int main(void)
{
    RUN(test_sha256);
    RUN(test_sha256_incremental_million_a);
    RUN(test_hkdf_rfc5869);
    RUN(test_gcm_spec);
    RUN(test_x25519_rfc7748_vectors);
    RUN(test_x25519_rfc7748_iterated);
    RUN(test_x25519_rfc7748_dh);
    RUN(test_ed25519_rfc8032);
    return TEST_END("test_crypto_kat");
}
