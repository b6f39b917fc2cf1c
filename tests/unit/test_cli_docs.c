/* api/cli_docs.h: the Identity document (encoder and decoder agree; a wrong
 * algorithm, fingerprint or type is refused) and the creator's view of a
 * power-method aggregation (iteration and z, the sha256 lower-cased). */
#include <stdlib.h>

#include "../../api/cli_docs.h"
#include "test.h"

static json_t *parse(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    if (j == NULL) {
        fprintf(stderr, "bad test JSON: %s (%s)\n", s, e.text);
        abort();
    }
    return j;
}

#define FPR "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"

static void test_identity(void)
{
    struct fs_err err = {0};
    uint8_t pk[FS_JOB_KEY_LEN], back[FS_JOB_KEY_LEN];
    json_t *j;

    for (int i = 0; i < FS_JOB_KEY_LEN; i++) {
        pk[i] = (uint8_t)(i * 7 + 1);
    }
    j = fs_identity_encode(pk);
    CHECK(j != NULL);
    CHECK_OK(fs_identity_decode(j, back, &err), &err);
    CHECK(memcmp(pk, back, sizeof pk) == 0);
    json_decref(j);

    j = parse("{\"algorithm\": \"ed25519\", \"fingerprint\": \"" FPR "\"}");
    CHECK_OK(fs_identity_decode(j, back, &err), &err);
    CHECK(back[0] == 0xab && back[31] == 0x89);
    json_decref(j);
    j = parse("{\"algorithm\": \"rsa\", \"fingerprint\": \"" FPR "\"}");
    CHECK(fs_identity_decode(j, back, &err) == FS_EINVAL);
    json_decref(j);
    j = parse("{\"algorithm\": \"ed25519\", \"fingerprint\": \"abc\"}");
    CHECK(fs_identity_decode(j, back, &err) != 0);
    json_decref(j);
    j = parse("{\"algorithm\": \"ed25519\", \"fingerprint\": 12}");
    CHECK(fs_identity_decode(j, back, &err) == FS_EFORMAT);
    json_decref(j);
    CHECK(fs_identity_decode(NULL, back, &err) == FS_EFORMAT);
}

static void test_power_agg(void)
{
    struct fs_err err = {0};
    struct fs_power_agg_view v;
    json_t *j;

    j = parse("{\"index\": 3, \"kind\": \"sync\", \"iteration\": 12, \"chunk_words\": 0, "
              "\"z\": {\"shape\": [24, 5], \"sha256\": \"ABCDEF0123456789abcdef0123456789abcdef"
              "0123456789abcdef0123456789\"}}");
    CHECK_OK(fs_power_agg_view_decode(j, &v, &err), &err);
    CHECK(v.index == 3 && v.iteration == 12 && v.z_rows == 24 && v.z_cols == 5);
    CHECK(strcmp(v.z_sha256, FPR) == 0);
    json_decref(j);

    j = parse("{\"index\": 0, \"iteration\": 0, \"z\": {\"shape\": [24], \"sha256\": \"" FPR
              "\"}}");
    CHECK(fs_power_agg_view_decode(j, &v, &err) == FS_EFORMAT);
    json_decref(j);
    j = parse("{\"index\": 0, \"iteration\": -1, \"z\": {\"shape\": [2, 1], \"sha256\": \"" FPR
              "\"}}");
    CHECK(fs_power_agg_view_decode(j, &v, &err) == FS_EINVAL);
    json_decref(j);
    j = parse("{\"index\": 0, \"iteration\": 1, \"z\": {\"shape\": [2, 1], \"sha256\": \"xyz\"}}");
    CHECK(fs_power_agg_view_decode(j, &v, &err) == FS_EFORMAT);
    json_decref(j);
    j = parse("{\"index\": 0, \"iteration\": 1}");
    CHECK(fs_power_agg_view_decode(j, &v, &err) == FS_EFORMAT);
    json_decref(j);
}

int main(void)
{
    RUN(test_identity);
    RUN(test_power_agg);
    return TEST_END("test_cli_docs");
}
