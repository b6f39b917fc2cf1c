/* The mask-set resource, client side: see maskset.h. */
#include "maskset.h"

#include <stdio.h>
#include <string.h>

#include "../lib/crypto/ct.h"
#include "../lib/crypto/ed25519.h"
#include "../lib/net/auth.h"

json_t *fs_maskset_request_encode(const struct fs_maskset_request *r)
{
    int features = r->partition == FS_JOB_FEATURES;
    json_t *parties = NULL;
    json_t *o = NULL;
    int bad;

    if (r->parties < 1 || r->parties > FS_JOB_MAX_PARTIES) {
        return NULL;
    }
    parties = json_array();
    bad = parties == NULL;
    for (uint32_t i = 0; !bad && i < r->parties; i++) {
        char fpr[FS_ED25519_FPR_LEN + 1];
        fs_ed25519_fpr_format(r->identities[i], fpr);
        bad |= json_array_append_new(parties,
                                     json_pack("{s:I, s:I, s:s}", "party", (json_int_t)(i + 1),
                                               features ? "cols" : "rows", (json_int_t)r->sizes[i],
                                               "identity", fpr)) != 0;
    }
    if (!bad) {
        o = json_pack("{s:s, s:s, s:O, s:I}", "job_id", r->job_id, "partition",
                      fs_job_partition_name(r->partition), "parties", parties,
                      features ? "rows" : "cols", (json_int_t)r->shared);
        bad = o == NULL;
    }
    if (!bad && r->block_size > 0) {
        bad = json_object_set_new(o, "block_size", json_integer((json_int_t)r->block_size)) != 0;
    }
    if (!bad && r->server_url[0] != '\0') {
        bad = json_object_set_new(o, "server_url", json_string(r->server_url)) != 0;
    }
    json_decref(parties);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A string member of at most cap-1 bytes into buf. */
static int str_member(const json_t *j, const char *what, const char *key, char *buf, size_t cap,
                      struct fs_err *err)
{
    const char *s = json_string_value(json_object_get(j, key));

    if (s == NULL) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected a string", what, key);
    }
    if (strlen(s) >= cap) {
        return fs_err_set(err, FS_EINVAL, "%s.%s: longer than %zu bytes", what, key, cap - 1);
    }
    snprintf(buf, cap, "%s", s);
    return 0;
}

static int party_entry(const json_t *p, size_t i, struct fs_maskset_party *out, struct fs_err *err)
{
    const json_t *n = json_object_get(p, "party");
    char fpr[FS_ED25519_FPR_LEN + 8];
    char what[48];
    int rc;

    snprintf(what, sizeof what, "parties[%zu]", i);
    if (!json_is_object(p) || !json_is_integer(n)) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected {\"party\", \"identity\", \"keys_url\"}",
                          what);
    }
    if (json_integer_value(n) != (json_int_t)(i + 1)) {
        return fs_err_set(err, FS_EINVAL, "%s.party: expected %zu", what, i + 1);
    }
    out->party = (uint32_t)(i + 1);
    if ((rc = str_member(p, what, "identity", fpr, sizeof fpr, err)) != 0 ||
        (rc = str_member(p, what, "keys_url", out->keys_url, sizeof out->keys_url, err)) != 0) {
        return rc;
    }
    if (fs_ed25519_fpr_parse(fpr, out->identity, NULL) != 0) {
        return fs_err_set(err, FS_EINVAL, "%s.identity: expected 64 hex digits", what);
    }
    return 0;
}

int fs_maskset_created_decode(const json_t *j, uint32_t parties, struct fs_maskset_created *out,
                              struct fs_err *err)
{
    const json_t *a = json_object_get(j, "parties");
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "mask set: expected a JSON object");
    }
    if ((rc = str_member(json_object_get(j, "maskset"), "maskset", "id", out->id, sizeof out->id,
                         err)) != 0 ||
        (rc = str_member(j, "mask set", "end_token", out->end_token, sizeof out->end_token, err)) !=
            0) {
        fs_maskset_created_wipe(out);
        return rc;
    }
    if (!fs_maskset_id_valid(out->id)) {
        rc = fs_err_set(err, FS_EINVAL, "maskset.id: expected 1..%d of [A-Za-z0-9._-]",
                        FS_MASKSET_ID_MAX);
    } else if (!fs_auth_token_valid(out->end_token, strlen(out->end_token))) {
        rc = fs_err_set(err, FS_EINVAL, "end_token: not a valid token");
    } else if (!json_is_array(a)) {
        rc = fs_err_set(err, FS_EFORMAT, "parties: expected an array");
    } else if (json_array_size(a) != parties || parties > FS_JOB_MAX_PARTIES) {
        rc = fs_err_set(err, FS_EINVAL, "parties: %zu entries for %u parties", json_array_size(a),
                        parties);
    }
    for (uint32_t i = 0; rc == 0 && i < parties; i++) {
        rc = party_entry(json_array_get(a, i), i, &out->parties[i], err);
    }
    if (rc != 0) {
        fs_maskset_created_wipe(out);
        return rc;
    }
    out->nparties = parties;
    return 0;
}

void fs_maskset_created_wipe(struct fs_maskset_created *c)
{
    fs_wipe(c, sizeof *c);
}
