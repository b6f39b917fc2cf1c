/* Pinned identities: fingerprints (lib/crypto/ed25519.h), the party_keys of
 * job specs and invitations (api/jobs.h), and the pin rules of both secure
 * aggregation state machines (lib/proto/secagg.h): a server that relays a
 * substituted identity key for a party is caught by the server's own check
 * (an advertisement refused) and by every pinned client (a roster refused
 * before any share is made). */
#include "crypto/ed25519.h"
#include "jobs.h"
#include "proto/secagg.h"
#include "test.h"

#include <stdlib.h>

#define NP 3

static json_t *parse(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    if (j == NULL) {
        fprintf(stderr, "bad test JSON: %s\n", e.text);
    }
    return j;
}

/* ------------------------------------------------------------ fingerprints */

static void test_fpr_roundtrip(void)
{
    struct fs_err err = {0};
    uint8_t sk[32], pk[32], back[32];
    char fpr[FS_ED25519_FPR_LEN + 1];
    char upper[FS_ED25519_FPR_LEN + 1];

    CHECK_OK(fs_ed25519_keygen(sk, pk, &err), &err);
    fs_ed25519_fpr_format(pk, fpr);
    CHECK(strlen(fpr) == 64 && strspn(fpr, "0123456789abcdef") == 64);
    CHECK_OK(fs_ed25519_fpr_parse(fpr, back, &err), &err);
    CHECK(memcmp(pk, back, 32) == 0);
    for (size_t i = 0; i <= 64; i++) {
        upper[i] = (char)(fpr[i] >= 'a' && fpr[i] <= 'f' ? fpr[i] - 'a' + 'A' : fpr[i]);
    }
    memset(back, 0, sizeof back);
    CHECK_OK(fs_ed25519_fpr_parse(upper, back, &err), &err);
    CHECK(memcmp(pk, back, 32) == 0);
    /* a known key: RFC 8032 test 1's public key */
    {
        static const char *k1 = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
        uint8_t p1[32];
        char again[FS_ED25519_FPR_LEN + 1];
        CHECK_OK(fs_ed25519_fpr_parse(k1, p1, &err), &err);
        CHECK(p1[0] == 0xd7 && p1[31] == 0x1a);
        fs_ed25519_fpr_format(p1, again);
        CHECK(strcmp(again, k1) == 0);
    }
}

static void test_fpr_strict(void)
{
    static const char *const bad[] = {
        "",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511",   /* 63 */
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a0", /* 65 */
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511g",
        " d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511 ",
        "0xd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f70751",
        "d75a980182b10ab7d54bfed3c964073a:ee172f3daa62325af021a68f707511a",
    };
    struct fs_err err = {0};
    uint8_t pk[32];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(pk, 0xee, sizeof pk);
        CHECK_MSG(fs_ed25519_fpr_parse(bad[i], pk, &err) == FS_EINVAL, "case %zu", i);
        CHECK(pk[0] == 0 && pk[31] == 0); /* zeroed on failure */
    }
    CHECK(fs_ed25519_fpr_parse(NULL, pk, &err) == FS_EINVAL);
}

/* ------------------------------------------------------------ job spec, invitation */

#define FPR_A "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define FPR_B "10112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define FPR_C "20112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static void test_spec_pins(void)
{
    struct fs_err err = {0};
    struct fs_job_spec s, s2;
    json_t *j = parse("{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[2,2],"
                      "\"party_keys\":[\"" FPR_A "\",\"" FPR_B "\",\"" FPR_C "\"]}");
    json_t *e;

    CHECK_OK(fs_job_spec_decode(j, 1 << 20, &s, &err), &err);
    CHECK(s.has_pins && !s.allow_unpinned);
    CHECK(s.party_keys[0][0] == 0x00 && s.party_keys[1][0] == 0x10 && s.party_keys[2][0] == 0x20);
    CHECK(s.party_keys[2][31] == 0xff);
    e = fs_job_spec_encode(&s);
    CHECK(json_is_array(json_object_get(e, "party_keys")) &&
          strcmp(json_string_value(json_array_get(json_object_get(e, "party_keys"), 1)), FPR_B) ==
              0);
    CHECK_OK(fs_job_spec_decode(e, 1 << 20, &s2, &err), &err);
    CHECK(memcmp(&s, &s2, sizeof s) == 0);
    json_decref(e);
    json_decref(j);
    /* allow_unpinned: no pins, encoded and decoded again */
    j = parse("{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[5,5],"
              "\"allow_unpinned\":true}");
    CHECK_OK(fs_job_spec_decode(j, 1 << 20, &s, &err), &err);
    CHECK(!s.has_pins && s.allow_unpinned);
    e = fs_job_spec_encode(&s);
    CHECK(json_is_true(json_object_get(e, "allow_unpinned")) &&
          json_object_get(e, "party_keys") == NULL);
    CHECK_OK(fs_job_spec_decode(e, 1 << 20, &s2, &err), &err);
    json_decref(e);
    json_decref(j);
}

static void test_spec_pins_bad(void)
{
    static const char *const bad[][2] = {
        /* neither: the refusal names both ways out */
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2]}", "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"allow_unpinned\":false}",
         "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"party_keys\":null}", "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"party_keys\":[]}", "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"party_keys\":[\"" FPR_A
         "\"]}",
         "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"party_keys\":[\"" FPR_A
         "\",\"" FPR_B "\",\"" FPR_C "\"]}",
         "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"party_keys\":[\"" FPR_A
         "\",\"" FPR_A "\"]}",
         "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"party_keys\":[\"" FPR_A
         "\",\"abc\"]}",
         "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"party_keys\":[\"" FPR_A
         "\",7]}",
         "400"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"party_keys\":\"" FPR_A
         "\"}",
         "400"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"allow_unpinned\":1}",
         "400"},
    };
    struct fs_err err = {0};
    struct fs_job_spec s;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int want = strcmp(bad[i][1], "422") == 0 ? FS_EINVAL : FS_EFORMAT;
        json_t *j = parse(bad[i][0]);
        int rc = fs_job_spec_decode(j, 1 << 20, &s, &err);
        CHECK_MSG(rc == want, "case %zu: rc %d (%s)", i, rc, err.msg);
        CHECK_MSG(strstr(err.msg, "party_keys") != NULL || strstr(err.msg, "allow_unpinned"),
                  "case %zu: %s", i, err.msg);
        json_decref(j);
    }
    /* the refusal of an unpinned job says what to do */
    {
        json_t *j = parse(bad[0][0]);
        CHECK(fs_job_spec_decode(j, 1 << 20, &s, &err) == FS_EINVAL);
        CHECK(strstr(err.msg, "allow_unpinned") != NULL &&
              strstr(err.msg, "fedsvd agent identity") != NULL);
        json_decref(j);
    }
}

static void test_invitation_pins(void)
{
    struct fs_err err = {0};
    struct fs_invitation inv, back;
    json_t *e;

    memset(&inv, 0, sizeof inv);
    inv.version = 1;
    CHECK_OK(fs_job_id_generate(inv.job_id, &err), &err);
    snprintf(inv.job_url, sizeof inv.job_url, "http://127.0.0.1:8443/v1/jobs/%s", inv.job_id);
    inv.party = 2;
    CHECK_OK(fs_auth_token_generate(inv.token, &err), &err);
    snprintf(inv.algorithm, sizeof inv.algorithm, "secure-sum");
    inv.parties = 3;
    inv.threshold = 2;
    inv.rows = 2;
    inv.cols = 2;
    inv.has_pins = 1;
    for (int p = 0; p < 3; p++) {
        memset(inv.party_keys[p], 0x41 + p, 32);
    }
    e = fs_invitation_encode(&inv);
    CHECK(json_array_size(json_object_get(e, "party_keys")) == 3);
    CHECK_OK(fs_invitation_decode(e, &back, &err), &err);
    CHECK(back.has_pins && memcmp(back.party_keys, inv.party_keys, 3 * 32) == 0);
    /* a wrong count is refused, as in the spec */
    json_array_remove(json_object_get(e, "party_keys"), 2);
    CHECK(fs_invitation_decode(e, &back, &err) == FS_EINVAL);
    CHECK(strstr(err.msg, "party_keys") != NULL);
    /* an unpinned job's invitation has none */
    json_object_del(e, "party_keys");
    CHECK_OK(fs_invitation_decode(e, &back, &err), &err);
    CHECK(!back.has_pins);
    json_decref(e);
    fs_invitation_wipe(&inv);
    fs_invitation_wipe(&back);
}

/* ------------------------------------------------------------ state machines */

struct cast {
    struct fs_secagg_config cfg;
    uint8_t sk[NP + 1][32];
    uint8_t pins[NP][32];
    fs_secagg_client *c[NP + 1];
    struct fs_secagg_adv adv[NP + 1];
    fs_secagg_client *mallory; /* the server's own client for party 2, its own identity */
    struct fs_secagg_adv fake;
};

static void cast_init(struct cast *k)
{
    struct fs_err err = {0};
    uint8_t msk[32], mpk[32];

    memset(k, 0, sizeof *k);
    k->cfg.n = NP;
    k->cfg.t = 2;
    k->cfg.aggregations = 1;
    memset(k->cfg.job_id, 0x5a, sizeof k->cfg.job_id);
    for (uint32_t v = 1; v <= NP; v++) {
        CHECK_OK(fs_ed25519_keygen(k->sk[v], k->pins[v - 1], &err), &err);
        CHECK_OK(fs_secagg_client_new(&k->cfg, v, k->sk[v], &k->c[v], &err), &err);
    }
    /* a well-formed, correctly self-signed advertisement for party 2 under
     * another identity: what a server impersonating party 2 relays */
    CHECK_OK(fs_ed25519_keygen(msk, mpk, &err), &err);
    CHECK_OK(fs_secagg_client_new(&k->cfg, 2, msk, &k->mallory, &err), &err);
    CHECK_OK(fs_secagg_client_advertise(k->mallory, &k->fake, &err), &err);
}

static void cast_free(struct cast *k)
{
    for (uint32_t v = 1; v <= NP; v++) {
        fs_secagg_client_free(k->c[v]);
    }
    fs_secagg_client_free(k->mallory);
}

static void test_server_refuses_unpinned_key(void)
{
    struct fs_err err = {0};
    struct cast k;
    fs_secagg_server *s = NULL;
    const struct fs_secagg_adv *roster;
    size_t nr = 0;

    cast_init(&k);
    CHECK_OK(fs_secagg_server_new(&k.cfg, NULL, &s, &err), &err);
    CHECK(fs_secagg_server_set_pins(s, (const uint8_t(*)[32])k.pins, NP - 1, &err) == FS_EINVAL);
    CHECK_OK(fs_secagg_server_set_pins(s, (const uint8_t(*)[32])k.pins, NP, &err), &err);
    for (uint32_t v = 1; v <= NP; v++) {
        CHECK_OK(fs_secagg_client_advertise(k.c[v], &k.adv[v], &err), &err);
    }
    /* the substituted key: refused by the rule alone and by add_adv */
    CHECK(fs_secagg_server_check_pin(s, &k.fake, &err) == FS_EAUTH);
    CHECK(fs_secagg_server_add_adv(s, &k.fake, &err) == FS_EAUTH);
    CHECK(strstr(err.msg, "party 2") != NULL && strstr(err.msg, "pinned") != NULL);
    CHECK(fs_secagg_server_phase(s) == FS_SECAGG_ADVERTISE); /* refused, not aborted */
    /* the genuine ones go in, party 2's too: nothing of the fake was stored */
    for (uint32_t v = 1; v <= NP; v++) {
        CHECK_OK(fs_secagg_server_check_pin(s, &k.adv[v], &err), &err);
        CHECK_OK(fs_secagg_server_add_adv(s, &k.adv[v], &err), &err);
    }
    CHECK(fs_secagg_server_set_pins(s, (const uint8_t(*)[32])k.pins, NP, &err) == FS_ESTATE);
    CHECK_OK(fs_secagg_server_close_adv(s, &err), &err);
    roster = fs_secagg_server_roster(s, &nr);
    CHECK(nr == NP);
    for (size_t i = 0; i < nr; i++) {
        CHECK(memcmp(roster[i].sign_pk, k.pins[roster[i].id - 1], 32) == 0);
    }
    fs_secagg_server_free(s);
    /* an unpinned server takes the substitute (trust on first use) */
    CHECK_OK(fs_secagg_server_new(&k.cfg, NULL, &s, &err), &err);
    CHECK_OK(fs_secagg_server_check_pin(s, &k.fake, &err), &err);
    CHECK_OK(fs_secagg_server_add_adv(s, &k.fake, &err), &err);
    fs_secagg_server_free(s);
    cast_free(&k);
}

static void test_client_refuses_substituted_roster(void)
{
    struct fs_err err = {0};
    struct cast k;
    struct fs_secagg_adv roster[NP];
    struct fs_secagg_share_ct *cts = NULL;
    size_t ncts = 99;

    cast_init(&k);
    for (uint32_t v = 1; v <= NP; v++) {
        CHECK_OK(fs_secagg_client_set_pins(k.c[v], (const uint8_t(*)[32])k.pins, NP, &err), &err);
        CHECK_OK(fs_secagg_client_advertise(k.c[v], &k.adv[v], &err), &err);
    }
    /* the server forwards party 2's slot with its own keys */
    roster[0] = k.adv[1];
    roster[1] = k.fake;
    roster[2] = k.adv[3];
    CHECK(fs_secagg_client_share_keys(k.c[1], roster, NP, &cts, &ncts, &err) == FS_EAUTH);
    CHECK(cts == NULL && ncts == 0); /* no share made for anyone */
    CHECK_MSG(strstr(err.msg, "party 2") != NULL && strstr(err.msg, "pinned") != NULL, "%s",
              err.msg);
    /* a roster without the substitute is fine for a fresh pinned party 3 */
    roster[1] = k.adv[2];
    CHECK_OK(fs_secagg_client_share_keys(k.c[3], roster, NP, &cts, &ncts, &err), &err);
    CHECK(ncts == NP - 1);
    fs_secagg_share_cts_free(cts, ncts);
    cts = NULL;
    /* pins come before the roster */
    CHECK(fs_secagg_client_set_pins(k.c[3], (const uint8_t(*)[32])k.pins, NP, &err) == FS_ESTATE);
    cast_free(&k);

    /* unpinned, the same substituted roster is taken: party 1 would encrypt
     * its shares for party 2 to the impersonator's keys */
    cast_init(&k);
    for (uint32_t v = 1; v <= NP; v++) {
        CHECK_OK(fs_secagg_client_advertise(k.c[v], &k.adv[v], &err), &err);
    }
    roster[0] = k.adv[1];
    roster[1] = k.fake;
    roster[2] = k.adv[3];
    CHECK_OK(fs_secagg_client_share_keys(k.c[1], roster, NP, &cts, &ncts, &err), &err);
    fs_secagg_share_cts_free(cts, ncts);
    cast_free(&k);
}

static void test_client_own_identity_pinned(void)
{
    struct fs_err err = {0};
    struct cast k;
    uint8_t other[NP][32];
    char fpr[FS_ED25519_FPR_LEN + 1];

    cast_init(&k);
    memcpy(other, k.pins, sizeof other);
    memset(other[0], 0x33, 32); /* party 1's pin is someone else's key */
    CHECK(fs_secagg_client_set_pins(k.c[1], (const uint8_t(*)[32])other, NP, &err) == FS_EAUTH);
    fs_ed25519_fpr_format(k.pins[0], fpr);
    CHECK_MSG(strstr(err.msg, "this agent's identity") != NULL && strstr(err.msg, fpr) != NULL &&
                  strstr(err.msg, "party 1") != NULL,
              "%s", err.msg);
    CHECK(fs_secagg_client_set_pins(k.c[1], (const uint8_t(*)[32])k.pins, 2, &err) == FS_EINVAL);
    /* the others are not concerned by party 1's pin */
    CHECK_OK(fs_secagg_client_set_pins(k.c[2], (const uint8_t(*)[32])other, NP, &err), &err);
    cast_free(&k);
}

int main(void)
{
    RUN(test_fpr_roundtrip);
    RUN(test_fpr_strict);
    RUN(test_spec_pins);
    RUN(test_spec_pins_bad);
    RUN(test_invitation_pins);
    RUN(test_server_refuses_unpinned_key);
    RUN(test_client_refuses_substituted_roster);
    RUN(test_client_own_identity_pinned);
    return TEST_END("test_pins");
}
