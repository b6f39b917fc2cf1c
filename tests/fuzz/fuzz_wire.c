/* The SecAgg wire of api/wire.c on one JSON document: advertisements and
 * the roster, shares (upload and download forms), signatures, reveals,
 * sealed and public exponents, party-id arrays, and base64url. Parameters
 * (self, parties, aggregations) come from the document's "self", "n" and
 * "aggregations" when present. Decoded messages must encode back to
 * documents that decode to the same values. */
#include "fuzz.h"

#include "api/wire.h"

static void adv(const json_t *j)
{
    struct fs_err err = {0};
    struct fs_secagg_adv a;
    struct fs_secagg_adv b;
    int has_exp = 0;
    int e = 0;
    int has2 = 0;
    int e2 = 0;
    json_t *enc = NULL;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (fs_wire_adv_decode(j, &a, &has_exp, &e, &err) != 0) {
        FUZZ_CHECK(a.s_pks == NULL);
        return;
    }
    enc = fs_wire_adv_encode(&a, has_exp, e);
    FUZZ_CHECK(enc != NULL && fs_wire_adv_decode(enc, &b, &has2, &e2, &err) == 0);
    FUZZ_CHECK(fs_secagg_adv_equal(&a, &b) && has2 == has_exp && (!has_exp || e2 == e));
    json_decref(enc);
    fs_secagg_adv_clear(&a);
    fs_secagg_adv_clear(&b);
}

static void roster(const json_t *j, uint32_t n)
{
    struct fs_err err = {0};
    struct fs_secagg_adv *r = NULL;
    size_t k = 0;

    if (fs_wire_roster_decode(j, n, &r, &k, &err) == 0) {
        json_t *enc = fs_wire_roster_encode(r, k);
        FUZZ_CHECK(k <= n && enc != NULL);
        json_decref(enc);
    }
    free(r);
}

static void shares(const json_t *j, int use_from, uint32_t self, size_t ct_len, uint32_t n)
{
    struct fs_err err = {0};
    struct fs_secagg_share_ct *cts = NULL;
    size_t k = 0;

    if (fs_wire_shares_decode(j, use_from, self, ct_len, n, &cts, &k, &err) == 0) {
        const struct fs_secagg_share_ct **pp = calloc(k + 1, sizeof *pp);
        json_t *enc = NULL;
        struct fs_secagg_share_ct *cts2 = NULL;
        size_t k2 = 0;
        FUZZ_CHECK(pp != NULL && k <= n);
        for (size_t i = 0; i < k; i++) {
            FUZZ_CHECK(cts[i].len == ct_len);
            pp[i] = &cts[i];
        }
        enc = fs_wire_shares_encode(pp, k, use_from);
        FUZZ_CHECK(enc != NULL);
        FUZZ_CHECK(fs_wire_shares_decode(enc, use_from, self, ct_len, n, &cts2, &k2, &err) == 0);
        FUZZ_CHECK(k2 == k);
        for (size_t i = 0; i < k; i++) {
            FUZZ_CHECK(cts2[i].from == cts[i].from && cts2[i].to == cts[i].to &&
                       memcmp(cts2[i].ct, cts[i].ct, ct_len) == 0);
        }
        fs_secagg_share_cts_free(cts2, k2);
        json_decref(enc);
        free(pp);
    }
    fs_secagg_share_cts_free(cts, k);
}

static void arrays(const json_t *j, uint32_t n)
{
    struct fs_err err = {0};
    uint32_t *ids = NULL;
    uint8_t(*sigs)[FS_SECAGG_SIG_LEN] = NULL;
    uint8_t(*sealed)[FS_WIRE_SEALED_EXP_LEN] = NULL;
    size_t k = 0;

    if (fs_wire_sigs_decode(json_object_get(j, "signatures"), n, &ids, &sigs, &k, &err) == 0) {
        json_t *enc = fs_wire_sigs_encode(ids, (const uint8_t(*)[FS_SECAGG_SIG_LEN])sigs, k);
        FUZZ_CHECK(enc != NULL && k <= n);
        json_decref(enc);
    }
    free(ids);
    free(sigs);
    ids = NULL;
    k = 0;
    if (fs_wire_exps_decode(json_object_get(j, "exponents"), n, &ids, &sealed, &k, &err) == 0) {
        json_t *enc = fs_wire_exps_encode(ids, (const uint8_t(*)[FS_WIRE_SEALED_EXP_LEN])sealed, k);
        FUZZ_CHECK(enc != NULL && k <= n);
        for (size_t i = 0; i < k; i++) {
            FUZZ_CHECK(ids[i] >= 1 && ids[i] <= n);
        }
        json_decref(enc);
    }
    free(ids);
    free(sealed);
    ids = NULL;
    k = 0;
    if (fs_wire_ids_decode(json_object_get(j, "active"), n, &ids, &k, &err) == 0) {
        json_t *enc = fs_wire_ids_encode(ids, k);
        FUZZ_CHECK(enc != NULL && k <= n);
        for (size_t i = 0; i < k; i++) {
            FUZZ_CHECK(ids[i] >= 1 && ids[i] <= n);
        }
        json_decref(enc);
    }
    free(ids);
}

static void singles(const json_t *j, uint32_t n)
{
    struct fs_err err = {0};
    uint8_t sig[FS_SECAGG_SIG_LEN];
    uint8_t sealed[FS_WIRE_SEALED_EXP_LEN];
    struct fs_secagg_reveal *rv = NULL;
    size_t k = 0;
    int e = 0;

    if (fs_wire_sig_decode(j, sig, &err) == 0) {
        json_t *enc = fs_wire_sig_encode(sig);
        FUZZ_CHECK(enc != NULL);
        json_decref(enc);
    }
    if (fs_wire_exp_decode(j, sealed, &err) == 0) {
        json_t *enc = fs_wire_exp_encode(sealed);
        FUZZ_CHECK(enc != NULL);
        json_decref(enc);
    }
    if (fs_wire_pubexp_decode(j, &e, &err) == 0) {
        FUZZ_CHECK(e >= FS_WIRE_PUBEXP_MIN && e <= FS_WIRE_PUBEXP_MAX);
    }
    if (fs_wire_reveals_decode(j, n, &rv, &k, &err) == 0) {
        json_t *enc = fs_wire_reveals_encode(rv, k);
        FUZZ_CHECK(enc != NULL && k <= n);
        json_decref(enc);
    }
    free(rv);
}

/* Every string member as base64url: decoding then encoding gives it back. */
static void b64(const json_t *j)
{
    const char *key = NULL;
    const json_t *v = NULL;

    json_object_foreach((json_t *)j, key, v)
    {
        struct fs_err err = {0};
        const char *s = json_string_value(v);
        uint8_t *buf = NULL;
        size_t n = 0;
        if (s == NULL) {
            continue;
        }
        if (fs_b64url_decode_alloc(s, 4096, &buf, &n, &err) == 0) {
            char *back = fs_b64url_encode(buf, n);
            uint8_t exact[64];
            FUZZ_CHECK(back != NULL && strcmp(back, s) == 0);
            if (n <= sizeof exact) {
                FUZZ_CHECK(fs_b64url_decode_exact(s, exact, n, &err) == 0);
                FUZZ_CHECK(n == 0 || memcmp(exact, buf, n) == 0);
            }
            free(back);
        }
        free(buf);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = fuzz_json(data, size);
    struct fs_secagg_config cfg;
    uint32_t n = 0;
    uint32_t self = 0;
    size_t ct_len = 0;

    if (j == NULL) {
        return 0;
    }
    n = (uint32_t)fuzz_u64(j, "n", 3, 1000);
    self = (uint32_t)fuzz_u64(j, "self", 1, 1001);
    memset(&cfg, 0, sizeof cfg);
    cfg.n = n;
    cfg.t = n;
    cfg.aggregations = (uint32_t)fuzz_u64(j, "aggregations", 1, 16);
    ct_len = fs_secagg_share_ct_len(&cfg);
    adv(j);
    roster(j, n);
    shares(j, 0, self, ct_len, n);
    shares(j, 1, self, ct_len, n);
    arrays(j, n);
    singles(j, n);
    b64(j);
    json_decref(j);
    return 0;
}
