/* api/wire.c and api/jobs.c: round trips of every message, and every kind
 * of malformed input (bad base64, wrong lengths, missing fields, wrong types,
 * unknown fields, too many entries) with the error code the services map to
 * HTTP (FS_EFORMAT 400, FS_EINVAL 422, FS_ERANGE 413). */
#include "crypto/rand.h"
#include "jobs.h"
#include "participation.h"
#include "test.h"
#include "wire.h"

#include <stdlib.h>

static json_t *parse(const char *s)
{
    json_error_t je;
    json_t *j = json_loads(s, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL) {
        fprintf(stderr, "  bad test JSON: %s\n", je.text);
    }
    return j;
}

static void test_b64_roundtrip(void)
{
    struct fs_err err = {0};
    uint8_t buf[300];
    uint8_t back[300];

    CHECK_OK(fs_rand_bytes(buf, sizeof buf, &err), &err);
    for (size_t n = 0; n <= sizeof buf; n++) {
        char *s = fs_b64url_encode(buf, n);
        uint8_t *alloc = NULL;
        size_t an = 0;
        CHECK(s != NULL);
        if (s == NULL) {
            return;
        }
        CHECK(strchr(s, '=') == NULL && strchr(s, '+') == NULL && strchr(s, '/') == NULL);
        CHECK(strlen(s) == (n * 4 + 2) / 3);
        CHECK_OK(fs_b64url_decode_exact(s, back, n, &err), &err);
        CHECK(memcmp(buf, back, n) == 0);
        CHECK_OK(fs_b64url_decode_alloc(s, n, &alloc, &an, &err), &err);
        CHECK(an == n && (n == 0 || memcmp(alloc, buf, n) == 0));
        free(alloc);
        free(s);
    }
}

static void test_b64_vectors(void)
{
    struct fs_err err = {0};
    uint8_t out[8];
    char *s = fs_b64url_encode((const uint8_t *)"\xfb\xff\xbf", 3);

    CHECK(s != NULL && strcmp(s, "-_-_") == 0);
    free(s);
    s = fs_b64url_encode((const uint8_t *)"foob", 4);
    CHECK(s != NULL && strcmp(s, "Zm9vYg") == 0);
    free(s);
    CHECK_OK(fs_b64url_decode_exact("Zm9vYmE", out, 5, &err), &err);
    CHECK(memcmp(out, "fooba", 5) == 0);
}

static void test_b64_malformed(void)
{
    struct fs_err err = {0};
    uint8_t out[16];
    uint8_t *a = NULL;
    size_t n = 0;

    CHECK(fs_b64url_decode_exact("Zm9vYg==", out, 4, &err) == FS_EFORMAT); /* padding */
    CHECK(fs_b64url_decode_exact("Zm9v+g", out, 4, &err) == FS_EFORMAT);   /* std alphabet */
    CHECK(fs_b64url_decode_exact("Zm9v Yg", out, 4, &err) == FS_EFORMAT);
    CHECK(fs_b64url_decode_exact("Zm9vY", out, 4, &err) == FS_EFORMAT);   /* 4k+1 chars */
    CHECK(fs_b64url_decode_exact("Zm9vYh", out, 4, &err) == FS_EFORMAT);  /* trailing bits */
    CHECK(fs_b64url_decode_exact("Zm9vYg", out, 5, &err) == FS_EINVAL);   /* too short */
    CHECK(fs_b64url_decode_exact("Zm9vYmFy", out, 4, &err) == FS_EINVAL); /* too long */
    CHECK(fs_b64url_decode_exact("Zm9vYmFyYmF6YmF6YmF6YmF6", out, 4, &err) == FS_EINVAL);
    CHECK(fs_b64url_decode_exact(NULL, out, 4, &err) == FS_EFORMAT);
    CHECK(fs_b64url_decode_alloc("Zm9vYmFy", 5, &a, &n, &err) == FS_ERANGE);
    CHECK(a == NULL && n == 0);
    CHECK(fs_b64url_decode_alloc("Zm9v*mFy", 10, &a, &n, &err) == FS_EFORMAT);
    CHECK(a == NULL);
    CHECK_OK(fs_b64url_decode_alloc("", 10, &a, &n, &err), &err);
    CHECK(n == 0);
    free(a);
}

static void fill_adv(struct fs_secagg_adv *a, uint32_t id)
{
    struct fs_err err = {0};
    memset(a, 0, sizeof *a);
    a->id = id;
    CHECK_OK(fs_rand_bytes(a->sign_pk, 32, &err), &err);
    CHECK_OK(fs_rand_bytes(a->c_pk, 32, &err), &err);
    a->nkeys = 3; /* one mask key per aggregation */
    a->s_pks = malloc(3 * 32);
    CHECK(a->s_pks != NULL);
    CHECK_OK(fs_rand_bytes(a->s_pks, 3 * 32, &err), &err);
    CHECK_OK(fs_rand_bytes(a->sig, 64, &err), &err);
}

static void test_adv_roundtrip(void)
{
    struct fs_err err = {0};
    struct fs_secagg_adv a;
    struct fs_secagg_adv b;
    int has = 0;
    int e = 0;
    json_t *j;

    fill_adv(&a, 7);
    j = fs_wire_adv_encode(&a, 1, -3);
    CHECK(j != NULL);
    CHECK_OK(fs_wire_adv_decode(j, &b, &has, &e, &err), &err);
    CHECK(fs_secagg_adv_equal(&a, &b) && b.nkeys == 3 && has == 1 && e == -3);
    CHECK(b.s_pks != a.s_pks); /* decoded into its own buffer */
    fs_secagg_adv_clear(&b);
    json_decref(j);
    j = fs_wire_adv_encode(&a, 0, 0);
    CHECK(json_is_null(json_object_get(j, "max_abs_exp")));
    CHECK_OK(fs_wire_adv_decode(j, &b, &has, &e, &err), &err);
    CHECK(has == 0);
    fs_secagg_adv_clear(&b);
    /* absent is the same as null */
    json_object_del(j, "max_abs_exp");
    has = 1;
    CHECK_OK(fs_wire_adv_decode(j, &b, &has, &e, &err), &err);
    CHECK(has == 0);
    fs_secagg_adv_clear(&b);
    json_decref(j);
    fs_secagg_adv_clear(&a);
}

/* Re-decode an encoded advert after changing one field. */
static int adv_mutated(const char *key, json_t *val)
{
    struct fs_err err = {0};
    struct fs_secagg_adv a;
    struct fs_secagg_adv b;
    int has;
    int e;
    int rc;
    json_t *j;

    fill_adv(&a, 2);
    j = fs_wire_adv_encode(&a, 1, 4);
    if (val == NULL) {
        json_object_del(j, key);
    } else {
        json_object_set_new(j, key, val);
    }
    rc = fs_wire_adv_decode(j, &b, &has, &e, &err);
    CHECK(rc == 0 || err.msg[0] != '\0');
    CHECK(rc == 0 || b.s_pks == NULL); /* nothing left to release on failure */
    fs_secagg_adv_clear(&b);
    fs_secagg_adv_clear(&a);
    json_decref(j);
    return rc;
}

static void test_adv_malformed(void)
{
    struct fs_err err = {0};
    struct fs_secagg_adv b;
    char *short_key = NULL;
    uint8_t k31[31] = {0};
    json_t *arr;

    CHECK(adv_mutated("party", NULL) == FS_EFORMAT);
    CHECK(adv_mutated("party", json_string("2")) == FS_EFORMAT);
    CHECK(adv_mutated("party", json_real(2.0)) == FS_EFORMAT);
    CHECK(adv_mutated("party", json_integer(0)) == FS_EINVAL);
    CHECK(adv_mutated("party", json_integer(1001)) == FS_EINVAL);
    CHECK(adv_mutated("party", json_integer(-1)) == FS_EINVAL);
    CHECK(adv_mutated("sign_pk", NULL) == FS_EFORMAT);
    CHECK(adv_mutated("c_pk", json_integer(3)) == FS_EFORMAT);
    CHECK(adv_mutated("s_pks", json_string("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!")) ==
          FS_EFORMAT); /* 43 characters: one key's length, not base64url */
    CHECK(adv_mutated("s_pks", NULL) == FS_EFORMAT);
    CHECK(adv_mutated("s_pks", json_string("")) == FS_EINVAL);
    CHECK(adv_mutated("s_pk", json_string("AAAA")) == FS_EINVAL); /* the one-key form is gone */
    short_key = fs_b64url_encode(k31, 31);
    CHECK(adv_mutated("s_pks", json_string(short_key)) == FS_EINVAL);
    CHECK(adv_mutated("sig", json_string(short_key)) == FS_EINVAL);
    free(short_key);
    CHECK(adv_mutated("max_abs_exp", json_string("4")) == FS_EFORMAT);
    CHECK(adv_mutated("max_abs_exp", json_integer(5000)) == FS_EINVAL);
    CHECK(adv_mutated("max_abs_exp", json_integer(1024)) == 0);
    CHECK(adv_mutated("extra", json_true()) == FS_EINVAL);
    arr = json_array();
    CHECK(fs_wire_adv_decode(arr, &b, NULL, NULL, &err) == FS_EFORMAT);
    json_decref(arr);
    CHECK(strstr(err.msg, "object") != NULL);
}

static void test_adv_error_names_field(void)
{
    struct fs_err err = {0};
    struct fs_secagg_adv a;
    struct fs_secagg_adv b;
    json_t *j;

    fill_adv(&a, 2);
    j = fs_wire_adv_encode(&a, 1, 4);
    json_object_set_new(j, "c_pk", json_string("AAAA"));
    CHECK(fs_wire_adv_decode(j, &b, NULL, NULL, &err) == FS_EINVAL);
    CHECK_MSG(strstr(err.msg, "c_pk") != NULL && strstr(err.msg, "32") != NULL, "%s", err.msg);
    json_decref(j);
    fs_secagg_adv_clear(&a);
}

static void test_roster(void)
{
    struct fs_err err = {0};
    struct fs_secagg_adv r[5];
    struct fs_secagg_adv *back = NULL;
    size_t k = 0;
    json_t *j;

    for (uint32_t i = 0; i < 5; i++) {
        fill_adv(&r[i], i + 1);
    }
    j = fs_wire_roster_encode(r, 5);
    CHECK(j != NULL);
    CHECK(json_object_get(json_array_get(json_object_get(j, "roster"), 0), "max_abs_exp") == NULL);
    CHECK_OK(fs_wire_roster_decode(j, 5, &back, &k, &err), &err);
    CHECK(k == 5);
    for (size_t i = 0; i < k; i++) {
        CHECK(fs_secagg_adv_equal(&back[i], &r[i]));
    }
    free(back); /* one block, keys included */
    CHECK(fs_wire_roster_decode(j, 4, &back, &k, &err) == FS_ERANGE);
    CHECK(back == NULL && k == 0);
    /* repeated id */
    json_object_set_new(json_array_get(json_object_get(j, "roster"), 3), "party", json_integer(1));
    CHECK(fs_wire_roster_decode(j, 5, &back, &k, &err) == FS_EINVAL);
    CHECK_MSG(strstr(err.msg, "roster[3]") != NULL, "%s", err.msg);
    json_object_set_new(j, "roster", json_object());
    CHECK(fs_wire_roster_decode(j, 5, &back, &k, &err) == FS_EFORMAT);
    json_decref(j);
    j = json_object();
    CHECK(fs_wire_roster_decode(j, 5, &back, &k, &err) == FS_EFORMAT);
    json_decref(j);
    for (uint32_t i = 0; i < 5; i++) {
        fs_secagg_adv_clear(&r[i]);
    }
}

static void test_shares(void)
{
    struct fs_err err = {0};
    struct fs_secagg_share_ct cts[3];
    const struct fs_secagg_share_ct *ptrs[3];
    struct fs_secagg_share_ct *back = NULL;
    size_t k = 0;
    const size_t len = 151;
    json_t *j;

    for (int i = 0; i < 3; i++) {
        cts[i].from = 2;
        cts[i].to = (uint32_t)(i == 0 ? 1 : i + 2);
        cts[i].len = len;
        cts[i].ct = malloc(len);
        CHECK_OK(fs_rand_bytes(cts[i].ct, len, &err), &err);
        ptrs[i] = &cts[i];
    }
    j = fs_wire_shares_encode(ptrs, 3, 0);
    CHECK(json_object_get(json_array_get(json_object_get(j, "shares"), 0), "to") != NULL);
    CHECK_OK(fs_wire_shares_decode(j, 0, 2, len, 10, &back, &k, &err), &err);
    CHECK(k == 3);
    for (size_t i = 0; back != NULL && i < k; i++) {
        CHECK(back[i].from == 2 && back[i].to == cts[i].to && back[i].len == len);
        CHECK(memcmp(back[i].ct, cts[i].ct, len) == 0);
    }
    fs_secagg_share_cts_free(back, k);
    /* wrong ct length, too many, self-addressed, repeated, wrong key */
    CHECK(fs_wire_shares_decode(j, 0, 2, len + 1, 10, &back, &k, &err) == FS_EINVAL);
    CHECK_MSG(strstr(err.msg, "shares[0].ct") != NULL, "%s", err.msg);
    CHECK(back == NULL);
    CHECK(fs_wire_shares_decode(j, 0, 2, len, 2, &back, &k, &err) == FS_ERANGE);
    CHECK(fs_wire_shares_decode(j, 0, 3, len, 10, &back, &k, &err) == FS_EINVAL);
    CHECK(fs_wire_shares_decode(j, 1, 2, len, 10, &back, &k, &err) == FS_EINVAL); /* "to" unknown */
    json_object_set_new(json_array_get(json_object_get(j, "shares"), 2), "to", json_integer(1));
    CHECK(fs_wire_shares_decode(j, 0, 2, len, 10, &back, &k, &err) == FS_EINVAL);
    json_object_set_new(json_array_get(json_object_get(j, "shares"), 2), "to", json_integer(4));
    json_object_set_new(json_array_get(json_object_get(j, "shares"), 1), "ct", json_string("a="));
    CHECK(fs_wire_shares_decode(j, 0, 2, len, 10, &back, &k, &err) == FS_EFORMAT);
    json_array_append_new(json_object_get(j, "shares"), json_integer(5));
    CHECK(fs_wire_shares_decode(j, 0, 2, len, 10, &back, &k, &err) == FS_EFORMAT);
    json_decref(j);
    /* download form */
    for (int i = 0; i < 3; i++) {
        cts[i].to = 2;
        cts[i].from = (uint32_t)(i + 3);
    }
    j = fs_wire_shares_encode(ptrs, 3, 1);
    CHECK_OK(fs_wire_shares_decode(j, 1, 2, len, 10, &back, &k, &err), &err);
    CHECK(k == 3 && back[1].from == 4 && back[1].to == 2);
    fs_secagg_share_cts_free(back, k);
    json_decref(j);
    for (int i = 0; i < 3; i++) {
        free(cts[i].ct);
    }
    j = parse("{\"shares\": []}");
    CHECK_OK(fs_wire_shares_decode(j, 0, 2, len, 10, &back, &k, &err), &err);
    CHECK(k == 0);
    fs_secagg_share_cts_free(back, k);
    json_decref(j);
    j = parse("{\"shares\": [], \"x\": 1}");
    CHECK(fs_wire_shares_decode(j, 0, 2, len, 10, &back, &k, &err) == FS_EINVAL);
    json_decref(j);
}

static void test_sig(void)
{
    struct fs_err err = {0};
    uint8_t sig[64];
    uint8_t back[64];
    json_t *j;

    CHECK_OK(fs_rand_bytes(sig, 64, &err), &err);
    j = fs_wire_sig_encode(sig);
    CHECK_OK(fs_wire_sig_decode(j, back, &err), &err);
    CHECK(memcmp(sig, back, 64) == 0);
    json_object_set_new(j, "sig", json_string("AAAA"));
    CHECK(fs_wire_sig_decode(j, back, &err) == FS_EINVAL);
    json_object_del(j, "sig");
    CHECK(fs_wire_sig_decode(j, back, &err) == FS_EFORMAT);
    json_decref(j);
    j = parse("[\"x\"]");
    CHECK(fs_wire_sig_decode(j, back, &err) == FS_EFORMAT);
    json_decref(j);
}

static void test_sigs(void)
{
    struct fs_err err = {0};
    uint32_t ids[3] = {1, 4, 9};
    uint8_t sigs[3][64];
    uint32_t *bid = NULL;
    uint8_t(*bsig)[64] = NULL;
    size_t k = 0;
    json_t *j;

    CHECK_OK(fs_rand_bytes(sigs, sizeof sigs, &err), &err);
    j = fs_wire_sigs_encode(ids, (const uint8_t(*)[64])sigs, 3);
    CHECK(json_is_array(j));
    CHECK_OK(fs_wire_sigs_decode(j, 10, &bid, &bsig, &k, &err), &err);
    CHECK(k == 3 && bid[2] == 9 && memcmp(bsig, sigs, sizeof sigs) == 0);
    free(bid);
    free(bsig);
    CHECK(fs_wire_sigs_decode(j, 2, &bid, &bsig, &k, &err) == FS_ERANGE);
    json_object_set_new(json_array_get(j, 1), "party", json_integer(1));
    CHECK(fs_wire_sigs_decode(j, 10, &bid, &bsig, &k, &err) == FS_EINVAL);
    CHECK(bid == NULL && bsig == NULL);
    json_object_set_new(json_array_get(j, 1), "party", json_integer(4));
    json_object_set_new(json_array_get(j, 1), "sig", json_null());
    CHECK(fs_wire_sigs_decode(j, 10, &bid, &bsig, &k, &err) == FS_EFORMAT);
    json_decref(j);
    j = json_object();
    CHECK(fs_wire_sigs_decode(j, 10, &bid, &bsig, &k, &err) == FS_EFORMAT);
    json_decref(j);
}

static void test_reveals(void)
{
    struct fs_err err = {0};
    struct fs_secagg_reveal rv[2];
    struct fs_secagg_reveal *back = NULL;
    size_t k = 0;
    json_t *j;
    json_t *e;

    memset(rv, 0, sizeof rv);
    rv[0].about = 1;
    rv[0].kind = FS_SECAGG_SELF_SEED;
    rv[1].about = 3;
    rv[1].kind = FS_SECAGG_MASK_KEY;
    CHECK_OK(fs_rand_bytes(rv[0].share, FS_SHAMIR_SHARE_LEN, &err), &err);
    CHECK_OK(fs_rand_bytes(rv[1].share, FS_SHAMIR_SHARE_LEN, &err), &err);
    j = fs_wire_reveals_encode(rv, 2);
    CHECK_OK(fs_wire_reveals_decode(j, 5, &back, &k, &err), &err);
    CHECK(k == 2 && memcmp(back, rv, sizeof rv) == 0);
    free(back);
    CHECK(fs_wire_reveals_decode(j, 1, &back, &k, &err) == FS_ERANGE);
    e = json_array_get(json_object_get(j, "reveals"), 1);
    json_object_set_new(e, "kind", json_string("both"));
    CHECK(fs_wire_reveals_decode(j, 5, &back, &k, &err) == FS_EINVAL);
    json_object_set_new(e, "kind", json_integer(1));
    CHECK(fs_wire_reveals_decode(j, 5, &back, &k, &err) == FS_EFORMAT);
    json_object_set_new(e, "kind", json_string("mask_key"));
    json_object_set_new(e, "about", json_integer(1));
    CHECK(fs_wire_reveals_decode(j, 5, &back, &k, &err) == FS_EINVAL);
    json_object_set_new(e, "about", json_integer(3));
    json_object_set_new(e, "share", json_string("AAAA"));
    CHECK(fs_wire_reveals_decode(j, 5, &back, &k, &err) == FS_EINVAL);
    json_object_del(e, "share");
    CHECK(fs_wire_reveals_decode(j, 5, &back, &k, &err) == FS_EFORMAT);
    CHECK(back == NULL && k == 0);
    json_decref(j);
}

static void test_ids(void)
{
    struct fs_err err = {0};
    uint32_t ids[4] = {3, 1, 7, 2};
    uint32_t *back = NULL;
    size_t k = 0;
    json_t *j = fs_wire_ids_encode(ids, 4);

    CHECK_OK(fs_wire_ids_decode(j, 7, &back, &k, &err), &err);
    CHECK(k == 4 && memcmp(back, ids, sizeof ids) == 0);
    free(back);
    CHECK(fs_wire_ids_decode(j, 6, &back, &k, &err) == FS_EINVAL); /* 7 > n */
    CHECK(fs_wire_ids_decode(j, 3, &back, &k, &err) == FS_ERANGE); /* 4 entries > n */
    json_decref(j);
    j = parse("[1, 2, 1]");
    CHECK(fs_wire_ids_decode(j, 5, &back, &k, &err) == FS_EINVAL);
    json_decref(j);
    j = parse("[1, \"2\"]");
    CHECK(fs_wire_ids_decode(j, 5, &back, &k, &err) == FS_EFORMAT);
    json_decref(j);
    j = parse("[0]");
    CHECK(fs_wire_ids_decode(j, 5, &back, &k, &err) == FS_EINVAL);
    json_decref(j);
    j = parse("{}");
    CHECK(fs_wire_ids_decode(j, 5, &back, &k, &err) == FS_EFORMAT);
    CHECK(back == NULL);
    json_decref(j);
}

static void test_job_spec(void)
{
    struct fs_err err = {0};
    struct fs_job_spec s;
    struct fs_job_spec s2;
    json_t *j = parse("{\"allow_unpinned\":true,\"algorithm\":\"secure-sum\",\"parties\":10,"
                      "\"shape\":[1000,1000],"
                      "\"server_url\":\"http://127.0.0.1:8443/\"}");
    json_t *e;

    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.parties == 10 && s.threshold == 6 && s.rows == 1000 && s.cols == 1000);
    /* the join phase waits a day for partners by default, whatever the round timeout */
    CHECK(s.round_timeout_s == 60 && s.join_timeout_s == 86400);
    CHECK(strcmp(s.server_url, "http://127.0.0.1:8443") == 0);
    e = fs_job_spec_encode(&s);
    CHECK_OK(fs_job_spec_decode(e, 1 << 28, &s2, &err), &err);
    CHECK(memcmp(&s, &s2, sizeof s) == 0);
    json_decref(e);
    CHECK(fs_job_spec_decode(j, 999999, &s, &err) == FS_EINVAL);
    /* a short round timeout leaves the join timeout alone; 7 days at most */
    json_object_set_new(j, "round_timeout_s", json_integer(1));
    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.round_timeout_s == 1 && s.join_timeout_s == 86400);
    json_object_set_new(j, "join_timeout_s", json_integer(604800));
    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.join_timeout_s == 604800);
    json_object_set_new(j, "join_timeout_s", json_integer(604801));
    CHECK(fs_job_spec_decode(j, 1 << 28, &s, &err) == FS_EINVAL);
    json_decref(j);
    /* a threshold below floor(n/2)+1 only with allow_low_threshold (kept by encode) */
    j = parse("{\"allow_unpinned\":true,\"algorithm\":\"secure-sum\",\"parties\":10,"
              "\"threshold\":5,\"shape\":[2,2]}");
    CHECK(fs_job_spec_decode(j, 1 << 28, &s, &err) == FS_EINVAL);
    CHECK(strstr(err.msg, "threshold: 5 is below 6") != NULL &&
          strstr(err.msg, "allow_low_threshold") != NULL);
    json_object_set_new(j, "threshold", json_integer(6));
    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.threshold == 6 && !s.allow_low_threshold);
    json_object_set_new(j, "threshold", json_integer(2));
    json_object_set_new(j, "allow_low_threshold", json_true());
    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.threshold == 2 && s.allow_low_threshold);
    e = fs_job_spec_encode(&s);
    CHECK(json_is_true(json_object_get(e, "allow_low_threshold")));
    CHECK_OK(fs_job_spec_decode(e, 1 << 28, &s2, &err), &err);
    CHECK(memcmp(&s, &s2, sizeof s) == 0);
    json_decref(e);
    json_object_set_new(j, "allow_low_threshold", json_string("yes"));
    CHECK(fs_job_spec_decode(j, 1 << 28, &s, &err) == FS_EFORMAT);
    json_decref(j);
    j = parse("{\"allow_unpinned\":true,\"algorithm\":\"secure-sum\",\"parties\":1,"
              "\"shape\":[2,2]}");
    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.threshold == 1);
    json_decref(j);
    const char *bad[][2] = {
        {"{\"algorithm\":\"secure-sum\",\"parties\":10,\"shape\":[2,2],\"x\":1}", "422"},
        {"{\"algorithm\":\"nope\",\"parties\":10,\"shape\":[2,2]}", "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":0,\"shape\":[2,2]}", "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":1001,\"shape\":[2,2]}", "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":3,\"threshold\":4,\"shape\":[2,2]}", "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[0,2]}", "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[2,2],\"round_timeout_s\":0}",
         "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[2,2],\"server_url\":\"ftp://x\"}",
         "422"},
        /* found by fuzzing: trimmed to "http:", which the spec's encoding could not decode */
        {"{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[2,2],\"allow_unpinned\":true,"
         "\"server_url\":\"http:///\"}",
         "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[2,2],\"allow_unpinned\":true,"
         "\"server_url\":\"https://\"}",
         "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":\"3\",\"shape\":[2,2]}", "400"},
        {"{\"algorithm\":\"secure-sum\",\"shape\":[2,2]}", "400"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[2]}", "400"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[2.5,2]}", "400"},
        {"{\"algorithm\":1,\"parties\":3,\"shape\":[2,2]}", "400"},
        {"[]", "400"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[4294967296,4294967296]}", "422"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int want = strcmp(bad[i][1], "422") == 0 ? FS_EINVAL : FS_EFORMAT;
        int rc;
        j = parse(bad[i][0]);
        rc = fs_job_spec_decode(j, 1 << 28, &s, &err);
        CHECK_MSG(rc == want, "case %zu: rc %d (%s)", i, rc, err.msg);
        json_decref(j);
    }
}

static void test_job_spec_fed(void)
{
    struct fs_err err = {0};
    struct fs_job_spec s;
    struct fs_job_spec s2;
    json_t *j =
        parse("{\"allow_unpinned\":true,\"algorithm\":\"fedpca\",\"parties\":3,\"shape\":[600,50],"
              "\"party_sizes\":[200,250,150],\"k\":10,\"standardize\":true}");
    json_t *e;

    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.fed.partition == FS_JOB_SAMPLES && s.fed.party_sizes[1] == 250 && s.fed.k == 10);
    CHECK(s.fed.method == FS_JOB_EXACT && s.fed.standardize && !s.fed.allow_dropouts);
    CHECK(fs_job_aggregations(&s) == 3);
    {
        uint64_t r = 0, c = 0;
        fs_job_party_shape(&s, 2, &r, &c);
        CHECK(r == 250 && c == 50);
    }
    e = fs_job_spec_encode(&s);
    CHECK_OK(fs_job_spec_decode(e, 1 << 28, &s2, &err), &err);
    CHECK(memcmp(&s, &s2, sizeof s) == 0);
    json_decref(e);
    json_decref(j);
    j = parse("{\"allow_unpinned\":true,\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],"
              "\"partition\":\"features\",\"party_sizes\":[3,4],\"allow_dropouts\":true}");
    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.fed.partition == FS_JOB_FEATURES && s.fed.allow_dropouts &&
          fs_job_aggregations(&s) == 1);
    {
        uint64_t r = 0, c = 0;
        fs_job_party_shape(&s, 1, &r, &c);
        CHECK(r == 10 && c == 3);
    }
    json_decref(j);
    const char *bad[][2] = {
        {"{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7]}", "400"},
        {"{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[3,4]}", "422"},
        {"{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[5]}", "422"},
        {"{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[5,0]}", "422"},
        {"{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[5,\"5\"]}",
         "400"},
        {"{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[5,5],"
         "\"partition\":\"rows\"}",
         "422"},
        {"{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[5,5],"
         "\"k\":8}",
         "422"},
        {"{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[5,5],"
         "\"standardize\":true}",
         "422"},
        {"{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[5,5],"
         "\"method\":\"randomized\"}",
         "422"},
        {"{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[5,5],"
         "\"allow_dropouts\":1}",
         "400"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[10,7],\"k\":2}", "422"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int want = strcmp(bad[i][1], "422") == 0 ? FS_EINVAL : FS_EFORMAT;
        int rc;
        j = parse(bad[i][0]);
        rc = fs_job_spec_decode(j, 1 << 28, &s, &err);
        CHECK_MSG(rc == want, "fed case %zu: rc %d (%s)", i, rc, err.msg);
        json_decref(j);
    }
}

static void test_invitation_fed(void)
{
    struct fs_err err = {0};
    struct fs_invitation inv;
    struct fs_invitation back;
    json_t *j;

    memset(&inv, 0, sizeof inv);
    inv.version = 1;
    CHECK_OK(fs_job_id_generate(inv.job_id, &err), &err);
    snprintf(inv.job_url, sizeof inv.job_url, "http://127.0.0.1:8443/v1/jobs/%s", inv.job_id);
    inv.party = 2;
    CHECK_OK(fs_auth_token_generate(inv.token, &err), &err);
    snprintf(inv.algorithm, sizeof inv.algorithm, "fedsvd");
    inv.algo_known = fs_algo_parse(inv.algorithm, &inv.algo) == 0;
    inv.parties = 3;
    inv.threshold = 3;
    inv.is_fedsvd = 1;
    inv.global_rows = 12;
    inv.global_cols = 5;
    inv.fed.party_sizes[0] = 3;
    inv.fed.party_sizes[1] = 4;
    inv.fed.party_sizes[2] = 5;
    inv.rows = 4;
    inv.cols = 5;
    snprintf(inv.masking_url, sizeof inv.masking_url, "http://127.0.0.1:8445");
    snprintf(inv.maskset, sizeof inv.maskset, "m-00ff");
    j = fs_invitation_encode(&inv);
    CHECK_OK(fs_invitation_decode(j, &back, &err), &err);
    CHECK(memcmp(&inv, &back, sizeof inv) == 0);
    /* no mask credential travels in an invitation (keys go to the party's identity) */
    CHECK(json_object_get(j, "mask_token") == NULL);
    /* shape must be this party's slice */
    json_object_set_new(j, "shape", json_pack("[i, i]", 3, 5));
    CHECK(fs_invitation_decode(j, &back, &err) == FS_EINVAL && strstr(err.msg, "shape"));
    CHECK(back.token[0] == '\0');
    json_object_set_new(j, "shape", json_pack("[i, i]", 4, 5));
    json_object_del(j, "global_shape");
    CHECK(fs_invitation_decode(j, &back, &err) == FS_EFORMAT);
    json_decref(j);
    fs_invitation_wipe(&inv);
    fs_invitation_wipe(&back);
}

static void test_exponents(void)
{
    struct fs_err err = {0};
    uint8_t sealed[32];
    uint8_t back[32];
    uint32_t ids[3] = {3, 1, 2};
    uint8_t sl[3][32];
    uint32_t *oid = NULL;
    uint8_t(*os)[32] = NULL;
    size_t k = 0;
    int e = 0;
    json_t *j;

    for (int i = 0; i < 32; i++) {
        sealed[i] = (uint8_t)(i * 7);
    }
    j = fs_wire_exp_encode(sealed);
    CHECK_OK(fs_wire_exp_decode(j, back, &err), &err);
    CHECK(memcmp(sealed, back, 32) == 0);
    json_object_set_new(j, "extra", json_true());
    CHECK(fs_wire_exp_decode(j, back, &err) == FS_EINVAL);
    json_decref(j);
    j = parse("{\"sealed\":\"AAAA\"}");
    CHECK(fs_wire_exp_decode(j, back, &err) == FS_EINVAL);
    json_decref(j);
    memset(sl, 5, sizeof sl);
    j = fs_wire_exps_encode(ids, (const uint8_t(*)[32])sl, 3);
    CHECK_OK(fs_wire_exps_decode(j, 3, &oid, &os, &k, &err), &err);
    CHECK(k == 3 && oid[0] == 3 && os[2][31] == 5);
    free(oid);
    free(os);
    CHECK(fs_wire_exps_decode(j, 2, &oid, &os, &k, &err) == FS_ERANGE);
    json_decref(j);
    ids[1] = 3;
    j = fs_wire_exps_encode(ids, (const uint8_t(*)[32])sl, 3);
    CHECK(fs_wire_exps_decode(j, 3, &oid, &os, &k, &err) == FS_EINVAL && oid == NULL);
    json_decref(j);
    j = fs_wire_pubexp_encode(-7);
    CHECK_OK(fs_wire_pubexp_decode(j, &e, &err), &err);
    CHECK(e == -7);
    json_decref(j);
    j = parse("{\"exponent\":1001}");
    CHECK(fs_wire_pubexp_decode(j, &e, &err) == FS_EINVAL);
    json_decref(j);
    j = parse("{\"exponent\":\"3\"}");
    CHECK(fs_wire_pubexp_decode(j, &e, &err) == FS_EFORMAT);
    json_decref(j);
}

static void test_invitation(void)
{
    struct fs_err err = {0};
    struct fs_invitation inv;
    struct fs_invitation back;
    char base[600];
    json_t *j;

    memset(&inv, 0, sizeof inv);
    inv.version = 1;
    CHECK_OK(fs_job_id_generate(inv.job_id, &err), &err);
    CHECK(fs_job_id_valid(inv.job_id));
    snprintf(inv.job_url, sizeof inv.job_url, "http://127.0.0.1:8443/v1/jobs/%s", inv.job_id);
    inv.party = 3;
    CHECK_OK(fs_auth_token_generate(inv.token, &err), &err);
    snprintf(inv.algorithm, sizeof inv.algorithm, "secure-sum");
    inv.algo_known = fs_algo_parse(inv.algorithm, &inv.algo) == 0;
    inv.parties = 10;
    inv.threshold = 7;
    inv.rows = 5;
    inv.cols = 4;
    j = fs_invitation_encode(&inv);
    CHECK_OK(fs_invitation_decode(j, &back, &err), &err);
    CHECK(memcmp(&inv, &back, sizeof inv) == 0);
    CHECK_OK(fs_invitation_server_url(&back, base, sizeof base, &err), &err);
    CHECK(strcmp(base, "http://127.0.0.1:8443") == 0);
    /* unknown fields are refused, as in a job spec */
    json_object_set_new(j, "future_field", json_true());
    CHECK(fs_invitation_decode(j, &back, &err) == FS_EINVAL);
    CHECK(strstr(err.msg, "unknown field \"future_field\"") != NULL);
    CHECK(back.token[0] == '\0');
    json_object_del(j, "future_field");
    CHECK_OK(fs_invitation_decode(j, &back, &err), &err);
    json_object_set_new(j, "party", json_integer(11));
    CHECK(fs_invitation_decode(j, &back, &err) == FS_EINVAL);
    json_object_set_new(j, "party", json_integer(3));
    json_object_set_new(j, "job_url", json_string("http://x/v1/jobs/j-0"));
    CHECK(fs_invitation_decode(j, &back, &err) == FS_EINVAL);
    json_object_del(j, "token");
    CHECK(fs_invitation_decode(j, &back, &err) == FS_EFORMAT);
    json_decref(j);
    fs_invitation_wipe(&inv);
    CHECK(!fs_job_id_valid("j-0123"));
    CHECK(!fs_job_id_valid("j-0123456789abcdef0123456789ABCDEF"));
    CHECK(fs_job_id_valid("j-0123456789abcdef0123456789abcdef"));
    CHECK(!fs_job_id_valid("j-0123456789abcdef0123456789abcdef0"));
}

static void test_secagg_job_id(void)
{
    struct fs_err err = {0};
    uint8_t a[32];
    uint8_t b[32];
    /* SHA-256("abc") */
    static const uint8_t abc[32] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea,
                                    0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
                                    0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c,
                                    0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};

    CHECK_OK(fs_wire_secagg_job_id("abc", a, &err), &err);
    CHECK(memcmp(a, abc, 32) == 0);
    CHECK_OK(fs_wire_secagg_job_id("j-0123456789abcdef0123456789abcdef", b, &err), &err);
    CHECK(memcmp(a, b, 32) != 0);
}

/* The client-agent's operator documents (api/participation.h). */
static void test_participation(void)
{
    static const char SHA[] = "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef";
    struct fs_result_file files[FS_RESULT_FILES_MAX];
    struct fs_invitation inv, back;
    struct fs_participation p;
    struct fs_err err = {0};
    char doc[1024];
    json_t *j;
    size_t n = 0;

    memset(&inv, 0, sizeof inv);
    inv.version = 1;
    CHECK_OK(fs_job_id_generate(inv.job_id, &err), &err);
    snprintf(inv.job_url, sizeof inv.job_url, "http://127.0.0.1:8443/v1/jobs/%s", inv.job_id);
    inv.party = 2;
    CHECK_OK(fs_auth_token_generate(inv.token, &err), &err);
    snprintf(inv.algorithm, sizeof inv.algorithm, "secure-sum");
    inv.algo_known = fs_algo_parse(inv.algorithm, &inv.algo) == 0;
    inv.parties = 3;
    inv.threshold = 2;
    inv.rows = 5;
    inv.cols = 4;
    j = fs_participation_request_encode(&inv, "/data/site.npy", NULL, "site-a");
    CHECK(j != NULL);
    CHECK(strcmp(json_string_value(json_object_get(json_object_get(j, "dataset"), "format")),
                 "auto") == 0);
    CHECK(strcmp(json_string_value(json_object_get(json_object_get(j, "dataset"), "id")),
                 "site-a") == 0);
    CHECK_OK(fs_invitation_decode(json_object_get(j, "invitation"), &back, &err), &err);
    CHECK(memcmp(&inv, &back, sizeof inv) == 0);
    json_decref(j);
    fs_invitation_wipe(&inv);
    fs_invitation_wipe(&back);

    snprintf(doc, sizeof doc,
             "{\"id\":\"p-0123456789abcdef0123456789abcdef\",\"job_id\":\"%s\",\"party\":2,"
             "\"algorithm\":\"fedpca\",\"state\":\"running\",\"phase\":\"share_keys\","
             "\"progress\":0.25,\"bytes_sent\":10,\"bytes_received\":20,\"error\":null,"
             "\"created_at\":\"2024-01-01T00:00:00Z\",\"updated_at\":\"2024-01-01T00:00:01Z\"}",
             "j-0123456789abcdef0123456789abcdef");
    j = parse(doc);
    CHECK_OK(fs_participation_decode(j, &p, &err), &err);
    CHECK(p.party == 2 && p.progress == 0.25 && p.bytes_received == 20 && p.error[0] == '\0');
    CHECK(strcmp(p.phase, "share_keys") == 0 && strcmp(p.state, "running") == 0);
    json_object_set_new(j, "state", json_string("paused"));
    CHECK(fs_participation_decode(j, &p, &err) == FS_EINVAL && strstr(err.msg, "state") != NULL);
    json_object_set_new(j, "state", json_string("failed"));
    json_object_set_new(j, "error", json_string("cancelled by the operator"));
    CHECK_OK(fs_participation_decode(j, &p, &err), &err);
    CHECK(strcmp(p.error, "cancelled by the operator") == 0);
    json_object_set_new(j, "progress", json_real(1.5));
    CHECK(fs_participation_decode(j, &p, &err) == FS_EINVAL);
    json_object_set_new(j, "progress", json_real(1));
    json_object_set_new(j, "id", json_string("p-../../etc"));
    CHECK(fs_participation_decode(j, &p, &err) == FS_EINVAL);
    json_object_del(j, "id");
    CHECK(fs_participation_decode(j, &p, &err) == FS_EFORMAT);
    json_decref(j);

    snprintf(doc, sizeof doc,
             "{\"files\":[{\"name\":\"S.npy\",\"bytes\":152,\"sha256\":\"%s\"},"
             "{\"name\":\"V.npy\",\"shape\":[3,2],\"sha256\":\"%s\"}]}",
             SHA, SHA);
    j = parse(doc);
    CHECK_OK(fs_result_files_decode(j, 0, files, &n, &err), &err);
    CHECK(n == 2 && files[0].has_bytes && files[0].bytes == 152 && !files[1].has_bytes);
    CHECK(strncmp(files[0].sha256, "0123456789abcdef", 16) == 0); /* lower-cased */
    CHECK(fs_result_files_decode(j, 1, files, &n, &err) == FS_EFORMAT &&
          strstr(err.msg, "files[1].bytes") != NULL);
    json_object_set_new(json_array_get(json_object_get(j, "files"), 1), "name",
                        json_string("S.npy"));
    CHECK(fs_result_files_decode(j, 0, files, &n, &err) == FS_EINVAL &&
          strstr(err.msg, "twice") != NULL);
    json_object_set_new(json_array_get(json_object_get(j, "files"), 1), "name",
                        json_string("../V.npy"));
    CHECK(fs_result_files_decode(j, 0, files, &n, &err) == FS_EINVAL);
    json_object_set_new(json_array_get(json_object_get(j, "files"), 1), "name",
                        json_string("V.npy"));
    json_object_set_new(json_array_get(json_object_get(j, "files"), 1), "sha256",
                        json_string("not-hex"));
    CHECK(fs_result_files_decode(j, 0, files, &n, &err) == FS_EINVAL);
    json_object_set_new(json_array_get(json_object_get(j, "files"), 1), "sha256", json_string(SHA));
    for (int i = 0; i < FS_RESULT_FILES_MAX; i++) {
        json_array_append_new(json_object_get(j, "files"), json_pack("{s:s}", "name", "x.npy"));
    }
    CHECK(fs_result_files_decode(j, 0, files, &n, &err) == FS_ERANGE && n == 0);
    json_decref(j);
}

int main(void)
{
    RUN(test_b64_roundtrip);
    RUN(test_b64_vectors);
    RUN(test_b64_malformed);
    RUN(test_adv_roundtrip);
    RUN(test_adv_malformed);
    RUN(test_adv_error_names_field);
    RUN(test_roster);
    RUN(test_shares);
    RUN(test_sig);
    RUN(test_sigs);
    RUN(test_reveals);
    RUN(test_ids);
    RUN(test_job_spec);
    RUN(test_invitation);
    RUN(test_job_spec_fed);
    RUN(test_invitation_fed);
    RUN(test_exponents);
    RUN(test_secagg_job_id);
    RUN(test_participation);
    return TEST_END("test_wire");
}
