/* The identity document and a creator's view of a power-method aggregation:
 * see cli_docs.h. */
#include "cli_docs.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "../lib/crypto/ed25519.h"

json_t *fs_identity_encode(const uint8_t pub[FS_JOB_KEY_LEN])
{
    char fpr[FS_ED25519_FPR_LEN + 1];

    fs_ed25519_fpr_format(pub, fpr);
    return json_pack("{s:s, s:s}", "algorithm", "ed25519", "fingerprint", fpr);
}

int fs_identity_decode(const json_t *j, uint8_t pub[FS_JOB_KEY_LEN], struct fs_err *err)
{
    const char *alg = json_string_value(json_object_get(j, "algorithm"));
    const char *fpr = json_string_value(json_object_get(j, "fingerprint"));

    if (!json_is_object(j) || alg == NULL || fpr == NULL) {
        return fs_err_set(err, FS_EFORMAT,
                          "identity: expected {\"algorithm\": string, \"fingerprint\": string}");
    }
    if (strcmp(alg, "ed25519") != 0) {
        return fs_err_set(err, FS_EINVAL, "identity: algorithm is not ed25519");
    }
    if (fs_ed25519_fpr_parse(fpr, pub, err) != 0) {
        return fs_err_prefix(err, "identity.fingerprint: ");
    }
    return 0;
}

/* A non-negative integer member no larger than max. */
static int uint_member(const json_t *j, const char *what, const char *key, uint64_t max,
                       uint64_t *out, struct fs_err *err)
{
    const json_t *v = json_object_get(j, key);

    if (!json_is_integer(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected an integer", what, key);
    }
    if (json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max) {
        return fs_err_set(err, FS_EINVAL, "%s.%s: out of range", what, key);
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

int fs_power_agg_view_decode(const json_t *j, struct fs_power_agg_view *out, struct fs_err *err)
{
    const json_t *z = json_object_get(j, "z");
    const json_t *shape = json_object_get(z, "shape");
    const char *sha = json_string_value(json_object_get(z, "sha256"));
    uint64_t index = 0, iter = 0, d = 0, r = 0;
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j) || !json_is_object(z)) {
        return fs_err_set(err, FS_EFORMAT, "aggregation: expected an object with \"z\"");
    }
    if ((rc = uint_member(j, "aggregation", "index", UINT32_MAX, &index, err)) != 0 ||
        (rc = uint_member(j, "aggregation", "iteration", UINT32_MAX, &iter, err)) != 0) {
        return rc;
    }
    if (!json_is_array(shape) || json_array_size(shape) != 2 ||
        !json_is_integer(json_array_get(shape, 0)) || !json_is_integer(json_array_get(shape, 1))) {
        return fs_err_set(err, FS_EFORMAT, "aggregation.z.shape: expected [d, r]");
    }
    if (json_integer_value(json_array_get(shape, 0)) < 1 ||
        json_integer_value(json_array_get(shape, 1)) < 1) {
        return fs_err_set(err, FS_EINVAL, "aggregation.z.shape: expected positive sizes");
    }
    d = (uint64_t)json_integer_value(json_array_get(shape, 0));
    r = (uint64_t)json_integer_value(json_array_get(shape, 1));
    if (sha == NULL || strlen(sha) != 64) {
        return fs_err_set(err, FS_EFORMAT, "aggregation.z.sha256: expected 64 hex digits");
    }
    for (size_t i = 0; i < 64; i++) {
        if (!isxdigit((unsigned char)sha[i])) {
            return fs_err_set(err, FS_EINVAL, "aggregation.z.sha256: expected 64 hex digits");
        }
        out->z_sha256[i] = (char)tolower((unsigned char)sha[i]);
    }
    out->z_sha256[64] = '\0';
    out->index = (uint32_t)index;
    out->iteration = (uint32_t)iter;
    out->z_rows = d;
    out->z_cols = r;
    return 0;
}
